//! Mounts and namespace changes made by the traced processes: a line each in the report's
//! `mounts` (and the summary), since each changes what a path names or which namespace a
//! process is judged in.
use serde::{Deserialize, Serialize};

use crate::kernel::decode::{Mount, MountOp, Namespace, NsOp};
use crate::state::files::errno_name;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct MountEntry {
    pub pid: u32,
    /// mount, umount, move_mount, open_tree, fsopen, fsmount, fspick, mount_setattr,
    /// pivot_root, chroot, unshare, setns.
    pub op: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub source: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub target: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub fstype: Option<String>,
    /// The call's flags by name (MS_BIND|MS_REC, CLONE_NEWNS|CLONE_NEWUSER, …).
    pub flags: String,
    /// `ok`, an fd number for the calls that return one, or the error's name.
    pub result: String,
    /// The process's namespaces after the call (unshare, setns; the mount namespace for
    /// mounts).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub mntns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub netns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub pidns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub userns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub utsns: Option<u64>,
}

fn names(flags: u64, table: &[(u64, &str)]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut rest = flags;
    for &(bit, name) in table {
        if flags & bit == bit && bit != 0 {
            out.push(name.to_string());
            rest &= !bit;
        }
    }
    if rest != 0 {
        out.push(format!("{rest:#x}"));
    }
    if out.is_empty() {
        "0".into()
    } else {
        out.join("|")
    }
}

const MS_FLAGS: &[(u64, &str)] = &[
    (1, "MS_RDONLY"),
    (2, "MS_NOSUID"),
    (4, "MS_NODEV"),
    (8, "MS_NOEXEC"),
    (32, "MS_REMOUNT"),
    (4096, "MS_BIND"),
    (8192, "MS_MOVE"),
    (16384, "MS_REC"),
    (1 << 17, "MS_UNBINDABLE"),
    (1 << 18, "MS_PRIVATE"),
    (1 << 19, "MS_SLAVE"),
    (1 << 20, "MS_SHARED"),
];

const CLONE_FLAGS: &[(u64, &str)] = &[
    (0x200, "CLONE_FS"),
    (0x400, "CLONE_FILES"),
    (0x20000, "CLONE_NEWNS"),
    (0x2000000, "CLONE_NEWCGROUP"),
    (0x4000000, "CLONE_NEWUTS"),
    (0x8000000, "CLONE_NEWIPC"),
    (0x10000000, "CLONE_NEWUSER"),
    (0x20000000, "CLONE_NEWPID"),
    (0x40000000, "CLONE_NEWNET"),
    (0x80, "CLONE_NEWTIME"),
];

fn result(r: i32, returns_fd: bool) -> String {
    match r {
        0 => "ok".into(),
        n if n > 0 && returns_fd => format!("fd {n}"),
        n if n > 0 => "ok".into(),
        n => errno_name(n),
    }
}

impl MountEntry {
    pub fn of_mount(m: &Mount) -> MountEntry {
        let (op, returns_fd, flags) = match m.op {
            MountOp::Mount => ("mount", false, names(m.flags, MS_FLAGS)),
            MountOp::Umount => ("umount", false, format!("{:#x}", m.flags)),
            MountOp::MoveMount => ("move_mount", false, format!("{:#x}", m.flags)),
            MountOp::OpenTree => ("open_tree", true, format!("{:#x}", m.flags)),
            MountOp::Fsopen => ("fsopen", true, format!("{:#x}", m.flags)),
            MountOp::Fsmount => ("fsmount", true, format!("{:#x}", m.flags)),
            MountOp::Fspick => ("fspick", true, format!("{:#x}", m.flags)),
            MountOp::MountSetattr => ("mount_setattr", false, format!("{:#x}", m.flags)),
            MountOp::PivotRoot => ("pivot_root", false, "0".into()),
            MountOp::Chroot => ("chroot", false, "0".into()),
        };
        MountEntry {
            pid: m.header.tgid,
            op: op.into(),
            source: m.source.clone(),
            target: m.target.clone(),
            fstype: m.fstype.clone(),
            flags,
            result: result(m.result, returns_fd),
            mntns: Some(m.mntns as u64),
            ..Default::default()
        }
    }

    pub fn of_namespace(n: &Namespace) -> MountEntry {
        MountEntry {
            pid: n.header.tgid,
            op: match n.op {
                NsOp::Unshare => "unshare",
                NsOp::Setns => "setns",
            }
            .into(),
            flags: names(n.flags, CLONE_FLAGS),
            result: result(n.result, false),
            mntns: Some(n.mntns as u64),
            netns: Some(n.netns as u64),
            pidns: Some(n.pidns as u64),
            userns: Some(n.userns as u64),
            utsns: Some(n.utsns as u64),
            ..Default::default()
        }
    }

    /// One line for people: "mount tmpfs none on /mnt (MS_NOSUID)".
    pub fn describe(&self) -> String {
        let what = match self.op.as_str() {
            "unshare" | "setns" => format!("{} {}", self.op, self.flags),
            "mount" => format!(
                "mount {}{} on {} ({})",
                self.fstype
                    .as_deref()
                    .map(|t| format!("{t} "))
                    .unwrap_or_default(),
                self.source.as_deref().unwrap_or("?"),
                self.target.as_deref().unwrap_or("?"),
                self.flags
            ),
            "move_mount" | "pivot_root" => format!(
                "{} {} to {}",
                self.op,
                self.source.as_deref().unwrap_or("?"),
                self.target.as_deref().unwrap_or("?")
            ),
            _ => format!(
                "{} {}",
                self.op,
                self.target
                    .as_deref()
                    .or(self.source.as_deref())
                    .or(self.fstype.as_deref())
                    .unwrap_or("")
            ),
        };
        if self.result == "ok" || self.result.starts_with("fd ") {
            what
        } else {
            format!("{what} (failed: {})", self.result)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_by_name() {
        assert_eq!(names(4096 | 16384, MS_FLAGS), "MS_BIND|MS_REC");
        assert_eq!(
            names(0x20000 | 0x10000000, CLONE_FLAGS),
            "CLONE_NEWNS|CLONE_NEWUSER"
        );
        assert_eq!(names(0, MS_FLAGS), "0");
        assert_eq!(names(1 << 40, MS_FLAGS), "0x10000000000");
    }
}
