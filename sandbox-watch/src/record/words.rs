//! The typed words of the record: what a file or network operation was, a verdict, a kind of
//! violation. Each enum says its own words (the log's and report's name, the past tense, the
//! verb of an attempt, the OCSF activity) here, so the report, the summary, the TUI and the
//! OCSF export never match on strings, and a new variant is a compile error at every place
//! that must say something about it.
use serde::{Deserialize, Serialize};

/// What a file entry did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Read,
    Write,
    Create,
    Delete,
    Rename,
    /// An O_PATH open: the file named and held, neither read nor written (its descriptor can
    /// be passed on, reopened through /proc/self/fd, or used as a directory for `*at` calls).
    Path,
    /// The mode changed (chmod, fchmod, fchmodat, fchmodat2): `mode`.
    Chmod,
    /// The owner changed (chown, lchown, fchown, fchownat): `uid`, `gid`.
    Chown,
    /// Cut or extended to `length` (truncate, ftruncate).
    Truncate,
    /// A directory made (mkdir, mkdirat): `mode`.
    Mkdir,
    /// An extended attribute set (setxattr, lsetxattr, fsetxattr, setxattrat): `xattr` (its
    /// name; never its value).
    Setxattr,
    /// The access and modification times set (utimensat, utime, utimes, futimesat).
    Utime,
}

impl Op {
    /// The log's and report's name: `read`, `write`, …
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Create => "create",
            Op::Delete => "delete",
            Op::Rename => "rename",
            Op::Path => "path",
            Op::Chmod => "chmod",
            Op::Chown => "chown",
            Op::Truncate => "truncate",
            Op::Mkdir => "mkdir",
            Op::Setxattr => "setxattr",
            Op::Utime => "utime",
        }
    }

    /// "pid 7 wrote /etc/x".
    pub fn past(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "wrote",
            Op::Create => "created",
            Op::Delete => "deleted",
            Op::Rename => "renamed",
            Op::Path => "opened (O_PATH)",
            Op::Chmod => "changed the mode of",
            Op::Chown => "changed the owner of",
            Op::Truncate => "truncated",
            Op::Mkdir => "made the directory",
            Op::Setxattr => "set an extended attribute of",
            Op::Utime => "set the times of",
        }
    }

    /// "pid 7 tried to write /etc/x" (an operation that failed).
    pub fn attempt(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write | Op::Create => "write",
            Op::Delete => "delete",
            Op::Rename => "rename",
            Op::Path => "open",
            Op::Chmod => "change the mode of",
            Op::Chown => "change the owner of",
            Op::Truncate => "truncate",
            Op::Mkdir => "make the directory",
            Op::Setxattr => "set an extended attribute of",
            Op::Utime => "set the times of",
        }
    }

    /// OCSF File System Activity: (activity_id, activity_name).
    pub fn ocsf_activity(self) -> (u64, &'static str) {
        match self {
            Op::Create => (1, "Create"),
            Op::Read => (2, "Read"),
            Op::Write => (3, "Update"),
            Op::Delete => (4, "Delete"),
            Op::Rename => (5, "Rename"),
            Op::Path => (14, "Open"),
            Op::Truncate => (3, "Update"),
            Op::Mkdir => (1, "Create"),
            Op::Setxattr | Op::Utime => (6, "Set Attributes"),
            Op::Chmod | Op::Chown => (7, "Set Security"),
        }
    }

    /// Whether the operation changes the file system.
    pub fn changes(self) -> bool {
        !matches!(self, Op::Read | Op::Path)
    }
}

/// What a mount entry's call was (`mounts[]`: mount and namespace changes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MountOp {
    Mount,
    /// umount2.
    Umount,
    MoveMount,
    /// open_tree or open_tree_attr: a tree (with `clone`, a detached copy) as a descriptor.
    OpenTree,
    Fsopen,
    Fsconfig,
    /// A filesystem context made a (detached) mount.
    Fsmount,
    Fspick,
    MountSetattr,
    PivotRoot,
    Chroot,
    Unshare,
    Setns,
}

impl MountOp {
    /// The log's and report's name: `mount`, `move_mount`, …
    pub fn as_str(self) -> &'static str {
        match self {
            MountOp::Mount => "mount",
            MountOp::Umount => "umount",
            MountOp::MoveMount => "move_mount",
            MountOp::OpenTree => "open_tree",
            MountOp::Fsopen => "fsopen",
            MountOp::Fsconfig => "fsconfig",
            MountOp::Fsmount => "fsmount",
            MountOp::Fspick => "fspick",
            MountOp::MountSetattr => "mount_setattr",
            MountOp::PivotRoot => "pivot_root",
            MountOp::Chroot => "chroot",
            MountOp::Unshare => "unshare",
            MountOp::Setns => "setns",
        }
    }

    /// Whether the summary names it: what changes what the process sees (a mount, a tree it
    /// can read through, a root, a namespace), not the steps of the new mount API before its
    /// `fsmount` is put somewhere by `move_mount`.
    pub fn summarized(self) -> bool {
        !matches!(
            self,
            MountOp::Fsopen | MountOp::Fsconfig | MountOp::Fsmount | MountOp::Fspick
        )
    }
}

/// What a network entry did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NetOp {
    Connect,
    /// A stream socket listening, or a datagram socket bound (a UDP server).
    Listen,
    /// A DNS question sent.
    Dns,
    /// A TCP connection that arrived on a traced listener (`addr`/`port`: the peer).
    Accept,
    /// Datagrams or packets sent (UDP to any port, raw, ICMP, AF_PACKET): one entry per flow,
    /// from the packets themselves, with `packets` and `bytes`.
    Send,
}

impl NetOp {
    pub fn as_str(self) -> &'static str {
        match self {
            NetOp::Connect => "connect",
            NetOp::Listen => "listen",
            NetOp::Dns => "dns",
            NetOp::Accept => "accept",
            NetOp::Send => "send",
        }
    }

    /// OCSF: (class, activity_id, activity_name, status_id) for an entry with this `result`.
    /// Class 4001 is Network Activity, 4003 DNS Activity; status 1 Success, 2 Failure,
    /// 0 Unknown, None for none.
    pub fn ocsf(self, result: &str) -> (u64, u64, &'static str, Option<u64>) {
        match self {
            NetOp::Dns => (4003, 1, "Query", None),
            NetOp::Accept => (4001, 1, "Open", Some(1)),
            NetOp::Send => (4001, 6, "Traffic", Some(1)),
            NetOp::Listen => (4001, 7, "Listen", Some(if result == "ok" { 1 } else { 2 })),
            NetOp::Connect => match result {
                "ok" => (4001, 1, "Open", Some(1)),
                "refused" => (4001, 5, "Refuse", Some(2)),
                "ECONNRESET" => (4001, 3, "Reset", Some(2)),
                IN_PROGRESS | "" => (4001, 99, "Connect", Some(0)),
                _ => (4001, 4, "Fail", Some(2)),
            },
        }
    }
}

/// The `result` of a connect whose outcome has not been seen (yet).
pub const IN_PROGRESS: &str = "in_progress";

/// Inside or outside the agent's network namespace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    #[default]
    Inside,
    Outside,
}

impl Verdict {
    /// `outside` when both namespaces are known and differ.
    pub fn of(netns: Option<u64>, agent_netns: Option<u64>) -> Verdict {
        match (netns, agent_netns) {
            (Some(a), Some(b)) if a != b => Verdict::Outside,
            _ => Verdict::Inside,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Inside => "inside",
            Verdict::Outside => "outside",
        }
    }

    /// As the summary's first line and the TUI's badge say it.
    pub fn shout(self) -> &'static str {
        match self {
            Verdict::Inside => "INSIDE",
            Verdict::Outside => "OUTSIDE",
        }
    }
}

/// What a violation is about (`--fail-on` takes these names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ViolationKind {
    /// A process or connection in another network namespace than the agent's.
    Outside,
    /// A credential read, changed, linked, or tried.
    Credential,
    /// A persistence file (shell rc, systemd unit, git hook, …) written.
    Persistence,
    /// A way to run as root, or outside the tree, set up: a setuid or setgid bit set, a
    /// `security.capability` attribute set, or a write-open of the kernel's helper settings
    /// (`/proc/sys/kernel/core_pattern`, `/proc/sys/kernel/modprobe`, binfmt_misc).
    Escalation,
    /// A destination `--allow-net` does not allow.
    Network,
    /// Records lost in the kernel.
    Lost,
    /// A process still running after the agent ended.
    Leftover,
    /// The agent acted on its monitor (bpf(2), ptrace, signals, its files), records were
    /// taken from it, or a caller raced the kernel (what its memory said is not what the
    /// kernel did).
    Tamper,
    /// A step's process acted after the step's own process had ended (a `nohup`, `setsid` or
    /// `&` leftover that wrote, connected or ran a program later).
    Outlived,
    /// A credential, persistence, escalation, outside or network finding under a step the agent's
    /// transcript does not declare (`--transcript`).
    Undeclared,
    /// `--otlp`: records not delivered to the collector by the end.
    Export,
}

impl ViolationKind {
    pub const ALL: &[ViolationKind] = &[
        ViolationKind::Outside,
        ViolationKind::Credential,
        ViolationKind::Persistence,
        ViolationKind::Escalation,
        ViolationKind::Network,
        ViolationKind::Lost,
        ViolationKind::Leftover,
        ViolationKind::Tamper,
        ViolationKind::Outlived,
        ViolationKind::Undeclared,
        ViolationKind::Export,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ViolationKind::Outside => "outside",
            ViolationKind::Credential => "credential",
            ViolationKind::Persistence => "persistence",
            ViolationKind::Escalation => "escalation",
            ViolationKind::Network => "network",
            ViolationKind::Lost => "lost",
            ViolationKind::Leftover => "leftover",
            ViolationKind::Tamper => "tamper",
            ViolationKind::Outlived => "outlived",
            ViolationKind::Undeclared => "undeclared",
            ViolationKind::Export => "export",
        }
    }

    pub fn parse(s: &str) -> Option<ViolationKind> {
        Self::ALL.iter().copied().find(|k| k.as_str() == s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_serde_names() {
        for k in ViolationKind::ALL {
            assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
            assert_eq!(ViolationKind::parse(k.as_str()), Some(*k));
        }
        for op in [
            Op::Read,
            Op::Write,
            Op::Create,
            Op::Delete,
            Op::Rename,
            Op::Path,
            Op::Chmod,
            Op::Chown,
            Op::Truncate,
            Op::Mkdir,
            Op::Setxattr,
            Op::Utime,
        ] {
            assert_eq!(serde_json::to_value(op).unwrap(), op.as_str());
        }
        for op in [
            NetOp::Connect,
            NetOp::Listen,
            NetOp::Dns,
            NetOp::Accept,
            NetOp::Send,
        ] {
            assert_eq!(serde_json::to_value(op).unwrap(), op.as_str());
        }
        for v in [Verdict::Inside, Verdict::Outside] {
            assert_eq!(serde_json::to_value(v).unwrap(), v.as_str());
        }
    }
}
