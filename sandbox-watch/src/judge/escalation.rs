//! `escalation` findings: what a traced task did that lets something run as root, or outside
//! the tree, later: a setuid or setgid bit set, file capabilities (`security.capability`) set,
//! or a write-open of one of the kernel's own helper settings (a crash then runs
//! `core_pattern`'s program as root; a module request `modprobe`'s; binfmt_misc runs its
//! interpreters for matching files).
//!
//! Judged on the path the kernel walked (opens) or the caller's name with the directory from
//! the kernel (failed opens, name-based attribute calls), and on binfmt_misc's own filesystem
//! magic wherever it is mounted.

/// binfmt_misc's superblock magic (`BINFMTFS_MAGIC`).
const BINFMTFS_MAGIC: u64 = 0x4249_4e4d;

const S_ISUID: u64 = 0o4000;
const S_ISGID: u64 = 0o2000;

/// Why a write-open of `path` (on a filesystem of `magic`, 0 when unknown) is an escalation.
pub fn of_write(path: &str, magic: u64) -> Option<String> {
    let why = match path {
        "/proc/sys/kernel/core_pattern" => {
            "core_pattern: the kernel runs its program as root when a process crashes"
        }
        "/proc/sys/kernel/modprobe" => {
            "modprobe: the kernel runs this program as root to load a module"
        }
        _ if magic == BINFMTFS_MAGIC
            || path == "/proc/sys/fs/binfmt_misc"
            || path.starts_with("/proc/sys/fs/binfmt_misc/") =>
        {
            "binfmt_misc: the kernel runs its interpreters for the files they match"
        }
        _ => return None,
    };
    Some(why.to_string())
}

/// Why a chmod to `mode` is an escalation (a setuid or setgid bit).
pub fn of_chmod(mode: u64) -> Option<String> {
    match (mode & S_ISUID != 0, mode & S_ISGID != 0) {
        (true, true) => Some("the setuid and setgid bits".into()),
        (true, false) => Some("the setuid bit".into()),
        (false, true) => Some("the setgid bit".into()),
        (false, false) => None,
    }
}

/// Why setting the extended attribute `name` is an escalation (file capabilities).
pub fn of_xattr(name: &str) -> Option<String> {
    (name == "security.capability")
        .then(|| "security.capability: file capabilities, given to whoever runs it".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_helpers_are_escalations_and_their_neighbours_are_not() {
        assert!(of_write("/proc/sys/kernel/core_pattern", 0x9fa0).is_some());
        assert!(of_write("/proc/sys/kernel/modprobe", 0).is_some());
        assert!(of_write("/proc/sys/fs/binfmt_misc/register", 0).is_some());
        assert!(of_write("/proc/sys/fs/binfmt_misc/status", 0).is_some());
        // binfmt_misc mounted somewhere else: known by its filesystem.
        assert!(of_write("/mnt/b/register", BINFMTFS_MAGIC).is_some());
        assert!(of_write("/proc/sys/kernel/core_pattern2", 0).is_none());
        assert!(of_write("/proc/sys/kernel/hostname", 0x9fa0).is_none());
        assert!(of_write("/proc/sys/fs/binfmt_misc_x", 0).is_none());
    }

    #[test]
    fn setuid_and_setgid_bits_and_file_capabilities() {
        assert_eq!(of_chmod(0o4755).as_deref(), Some("the setuid bit"));
        assert_eq!(of_chmod(0o2755).as_deref(), Some("the setgid bit"));
        assert!(of_chmod(0o6755).unwrap().contains("setuid and setgid"));
        assert!(
            of_chmod(0o1777).is_none(),
            "the sticky bit is no escalation"
        );
        assert!(of_chmod(0o755).is_none());
        assert!(of_xattr("security.capability").is_some());
        assert!(of_xattr("security.selinux").is_none());
        assert!(of_xattr("user.capability").is_none());
    }
}
