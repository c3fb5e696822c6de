//! Mount and namespace changes of the traced processes (`mounts[]` in the report): one entry
//! per call (mount, umount2, move_mount, open_tree, the fs* calls, mount_setattr, pivot_root,
//! chroot, unshare, setns), made or failed, as its `mount` record says.
//!
//! The entry is the record: nothing is merged or counted, so a replay lists what the capture
//! listed. What is read from the kernel and what from the caller's memory is said per entry
//! (`from_caller_memory`, `source_from_kernel`).
use serde::{Deserialize, Serialize};

use crate::record::MountOp;
use crate::state::tool_calls::ToolCallRef;

/// One mount or namespace call.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MountEntry {
    pub pid: u32,
    pub op: MountOp,
    /// What is mounted or cloned: mount's source (a path for a bind or a move, else the name
    /// given: `tmpfs`, a device), open_tree's and move_mount's tree, pivot_root's new root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Where: mount's and move_mount's target, umount2's, fspick's, mount_setattr's, chroot's
    /// path as given, pivot_root's put_old.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The filesystem type: mount's and fsopen's as given, a tree's from the kernel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fstype: Option<String>,
    /// fsconfig: the key set (never its value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// A tree's source as the kernel keeps it (the device, or the name its mount was given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// The call's flags by name (`bind`, `rec`, `private`, `detach`, `clone`, …; bits with no
    /// name as hex).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
    /// unshare, setns: the namespaces asked for (`mnt`, `net`, `pid`, `user`, `uts`, `ipc`,
    /// `cgroup`, `time`); for setns with none given, the type of the namespace its descriptor
    /// names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    /// chroot, pivot_root, setns: the process's root directory after the call, from the
    /// kernel (named where its filesystem is mounted in the monitor's namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
    /// The process's namespaces after the call (inode numbers; pid and time: its children's).
    #[serde(default)]
    pub ns: Namespaces,
    /// The error's name when the call failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// The descriptor the call returned (open_tree, fsopen, fsmount, fspick).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fd: Option<i64>,
    /// The source is a tree as the kernel holds it (a descriptor's mount), not a name.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub source_from_kernel: bool,
    /// A name here (source, target, fstype, key) was read from the caller's memory when the
    /// call returned, not from the kernel's copy: another thread of the caller could have
    /// changed it in between.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_caller_memory: bool,
    /// A path here was longer than the probe keeps.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub path_truncated: bool,
    /// The tool call it is under (see `state::tool_calls`); not in the log's records.
    #[serde(default, skip_serializing_if = "ToolCallRef::is_unset")]
    pub tool_call: ToolCallRef,
    /// It happened after its step's own process had ended.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub after_step: bool,
}

/// A process's namespaces, by inode number (0: not known).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Namespaces {
    pub mnt: u64,
    pub net: u64,
    pub pid: u64,
    pub user: u64,
    pub uts: u64,
    pub ipc: u64,
    pub cgroup: u64,
    pub time: u64,
}

impl MountEntry {
    /// What the call did, as a person would have typed it: `mount --bind /home/u/.ssh /tmp/x`,
    /// `unshare(mnt,user)`, `pivot_root /tmp/r`; a failure ends with its error.
    pub fn line(&self) -> String {
        let has = |f: &str| self.flags.iter().any(|x| x == f);
        let or_q = |p: &Option<String>| p.clone().unwrap_or_else(|| "?".into());
        let (source, target) = (or_q(&self.source), or_q(&self.target));
        let mut line = match self.op {
            MountOp::Mount if has("bind") => {
                let rec = if has("rec") { "--rbind" } else { "--bind" };
                format!("mount {rec} {source} {target}")
            }
            MountOp::Mount if has("move") => format!("mount --move {source} {target}"),
            MountOp::Mount if has("remount") => format!("mount -o remount {target}"),
            MountOp::Mount
                if ["private", "shared", "slave", "unbindable"]
                    .iter()
                    .any(|p| has(p)) =>
            {
                let r = if has("rec") { "r" } else { "" };
                let how = ["private", "shared", "slave", "unbindable"]
                    .into_iter()
                    .find(|p| has(p))
                    .unwrap_or("private");
                format!("mount --make-{r}{how} {target}")
            }
            MountOp::Mount => match &self.fstype {
                Some(t) => format!("mount -t {t} {source} {target}"),
                None => format!("mount {source} {target}"),
            },
            MountOp::Umount => format!("umount {target}"),
            MountOp::MoveMount => format!("move_mount {source} {target}"),
            MountOp::OpenTree if has("clone") => format!("open_tree --clone {source}"),
            MountOp::OpenTree => format!("open_tree {source}"),
            MountOp::Fsopen | MountOp::Fsmount => {
                format!(
                    "{} {}",
                    self.op.as_str(),
                    self.fstype.as_deref().unwrap_or("?")
                )
            }
            MountOp::Fsconfig => format!("fsconfig {}", self.key.as_deref().unwrap_or("")),
            MountOp::Fspick | MountOp::MountSetattr => format!("{} {target}", self.op.as_str()),
            MountOp::PivotRoot => match &self.root {
                Some(root) => format!("pivot_root {root}"),
                None => format!("pivot_root {source}"),
            },
            MountOp::Chroot => format!("chroot {}", self.root.as_ref().unwrap_or(&target)),
            MountOp::Unshare | MountOp::Setns => {
                format!("{}({})", self.op.as_str(), self.namespaces.join(","))
            }
        };
        if let Some(error) = &self.result {
            line.push_str(&format!(" ({error})"));
        }
        line
    }
}

/// Bits and their names, first to last; what no name covers is left in the return.
fn named(flags: u64, names: &[(u64, &str)], out: &mut Vec<String>) -> u64 {
    let mut rest = flags;
    for &(bit, name) in names {
        if flags & bit != 0 {
            out.push(name.to_string());
            rest &= !bit;
        }
    }
    rest
}

/// CLONE_NEW* (include/uapi/linux/sched.h): the namespaces unshare and setns name.
const NAMESPACES: &[(u64, &str)] = &[
    (0x0002_0000, "mnt"),
    (0x4000_0000, "net"),
    (0x2000_0000, "pid"),
    (0x1000_0000, "user"),
    (0x0400_0000, "uts"),
    (0x0800_0000, "ipc"),
    (0x0200_0000, "cgroup"),
    (0x80, "time"),
];

/// mount(2)'s flags (include/uapi/linux/mount.h).
const MOUNT_FLAGS: &[(u64, &str)] = &[
    (1, "rdonly"),
    (2, "nosuid"),
    (4, "nodev"),
    (8, "noexec"),
    (16, "synchronous"),
    (32, "remount"),
    (64, "mandlock"),
    (128, "dirsync"),
    (256, "nosymfollow"),
    (1024, "noatime"),
    (2048, "nodiratime"),
    (4096, "bind"),
    (8192, "move"),
    (16384, "rec"),
    (32768, "silent"),
    (1 << 16, "posixacl"),
    (1 << 17, "unbindable"),
    (1 << 18, "private"),
    (1 << 19, "slave"),
    (1 << 20, "shared"),
    (1 << 21, "relatime"),
    (1 << 23, "iversion"),
    (1 << 24, "strictatime"),
    (1 << 25, "lazytime"),
];

/// open_tree's own flags, then the `AT_*` flags it shares with mount_setattr.
const OPEN_TREE_FLAGS: &[(u64, &str)] = &[(1, "clone"), (0o2000000, "cloexec")];
const AT_FLAGS: &[(u64, &str)] = &[
    (0x100, "symlink_nofollow"),
    (0x800, "no_automount"),
    (0x1000, "empty_path"),
    (0x8000, "recursive"),
];

/// The names of a call's flags (and, for unshare and setns, of the namespaces they ask for).
pub fn flag_names(op: MountOp, flags: u64) -> (Vec<String>, Vec<String>) {
    let mut names = Vec::new();
    let mut namespaces = Vec::new();
    let rest = match op {
        MountOp::Mount => {
            // The old magic number some callers still put in the high bits.
            let flags = if flags & 0xffff_0000 == 0xc0ed_0000 {
                flags & 0xffff
            } else {
                flags
            };
            named(flags, MOUNT_FLAGS, &mut names)
        }
        MountOp::Umount => named(
            flags,
            &[(1, "force"), (2, "detach"), (4, "expire"), (8, "nofollow")],
            &mut names,
        ),
        MountOp::MoveMount => named(
            flags,
            &[
                (1, "f_symlinks"),
                (2, "f_automounts"),
                (4, "f_empty_path"),
                (0x10, "t_symlinks"),
                (0x20, "t_automounts"),
                (0x40, "t_empty_path"),
                (0x100, "set_group"),
                (0x200, "beneath"),
            ],
            &mut names,
        ),
        MountOp::OpenTree => {
            let rest = named(flags, OPEN_TREE_FLAGS, &mut names);
            named(rest, AT_FLAGS, &mut names)
        }
        MountOp::MountSetattr => named(flags, AT_FLAGS, &mut names),
        MountOp::Fsopen | MountOp::Fsmount => named(flags, &[(1, "cloexec")], &mut names),
        MountOp::Fspick => named(
            flags,
            &[
                (1, "cloexec"),
                (2, "symlink_nofollow"),
                (4, "no_automount"),
                (8, "empty_path"),
            ],
            &mut names,
        ),
        MountOp::Fsconfig => {
            const COMMANDS: [&str; 9] = [
                "set_flag",
                "set_string",
                "set_binary",
                "set_path",
                "set_path_empty",
                "set_fd",
                "cmd_create",
                "cmd_reconfigure",
                "cmd_create_excl",
            ];
            match COMMANDS.get(flags as usize) {
                Some(c) => {
                    names.push(c.to_string());
                    0
                }
                None => flags,
            }
        }
        MountOp::Unshare | MountOp::Setns => {
            let rest = named(flags, NAMESPACES, &mut namespaces);
            named(
                rest,
                &[(0x200, "fs"), (0x400, "files"), (0x4_0000, "sysvsem")],
                &mut names,
            )
        }
        MountOp::PivotRoot | MountOp::Chroot => flags,
    };
    if rest != 0 {
        names.push(format!("{rest:#x}"));
    }
    (names, namespaces)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(op: MountOp, flags: u64) -> MountEntry {
        let (flags, namespaces) = flag_names(op, flags);
        MountEntry {
            pid: 7,
            op,
            source: Some("/home/u/.ssh".into()),
            target: Some("/tmp/x".into()),
            fstype: None,
            key: None,
            device: None,
            flags,
            namespaces,
            root: None,
            ns: Namespaces::default(),
            result: None,
            fd: None,
            source_from_kernel: false,
            from_caller_memory: true,
            path_truncated: false,
            tool_call: ToolCallRef::default(),
            after_step: false,
        }
    }

    #[test]
    fn each_call_reads_as_it_was_typed() {
        assert_eq!(
            entry(MountOp::Mount, 4096).line(),
            "mount --bind /home/u/.ssh /tmp/x"
        );
        assert_eq!(
            entry(MountOp::Mount, 0xc0ed_0000 | 4096 | 16384).line(),
            "mount --rbind /home/u/.ssh /tmp/x"
        );
        assert_eq!(
            entry(MountOp::Mount, 16384 | (1 << 18)).line(),
            "mount --make-rprivate /tmp/x"
        );
        assert_eq!(
            entry(MountOp::Unshare, 0x0002_0000 | 0x1000_0000).line(),
            "unshare(mnt,user)"
        );
        let mut failed = entry(MountOp::Setns, 0x4000_0000);
        failed.result = Some("EPERM".into());
        assert_eq!(failed.line(), "setns(net) (EPERM)");
        assert_eq!(
            entry(MountOp::OpenTree, 1 | 0o2000000).flags,
            ["clone", "cloexec"]
        );
        assert_eq!(entry(MountOp::Umount, 2 | 0x40).flags, ["detach", "0x40"]);
    }
}
