//! Writes seen where the kernel dirtied the inode (`writeback_mark_inode_dirty`).
//!
//! An open for write already has its entry: the dirtying marks it `modified`. A write with no
//! open in the capture (a descriptor inherited from the launcher, taken with pidfd_getfd,
//! opened before an attach, or a store through a shared mapping) is a `write` entry of its
//! own, `without_open`, at the inode's newest name. That name is walked from the filesystem's
//! root (an inode has no mount): the mount table turns it into a path.
use sandbox_watch_common::InodeKey;

use super::{FileEntry, Files, Op, dev_string, judge};
use crate::judge::classify::{self, Classifier};
use crate::kernel::decode::Dirty;

/// Where each filesystem is mounted, from the monitor's mount table.
#[derive(Clone, Debug, Default)]
pub struct Mounts {
    /// (kernel dev, the mount's root within its filesystem, where it is mounted).
    mounts: Vec<(u32, String, String)>,
}

impl Mounts {
    pub fn load() -> Mounts {
        let mut mounts = Vec::new();
        if let Ok(infos) = procfs::process::Process::myself().and_then(|p| p.mountinfo()) {
            for m in infos {
                let Some((major, minor)) = m.majmin.split_once(':') else {
                    continue;
                };
                let (Ok(major), Ok(minor)) = (major.parse::<u32>(), minor.parse::<u32>()) else {
                    continue;
                };
                mounts.push((
                    major << 20 | minor,
                    m.root.clone(),
                    m.mount_point.to_string_lossy().into_owned(),
                ));
            }
        }
        Mounts { mounts }
    }

    /// A path from a filesystem's root as a path in the monitor's mount namespace: through
    /// a mount of that filesystem whose root holds it (the whole filesystem's first, then the
    /// shortest mount point: the canonical path rather than a bind mount's).
    pub fn resolve(&self, dev: u32, fs_path: &str) -> Option<String> {
        self.mounts
            .iter()
            .filter(|(d, root, _)| *d == dev && within(fs_path, root))
            .min_by_key(|(_, root, point)| (root.len(), point.len()))
            .map(|(_, root, point)| {
                let rest = fs_path.strip_prefix(root.as_str()).unwrap_or(fs_path);
                let rest = rest.trim_start_matches('/');
                match (point.as_str(), rest) {
                    (p, "") => p.to_string(),
                    ("/", r) => format!("/{r}"),
                    (p, r) => format!("{p}/{r}"),
                }
            })
    }
}

fn within(path: &str, root: &str) -> bool {
    root == "/"
        || path == root
        || path
            .strip_prefix(root)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// The system calls that write (x86_64 numbers) by name, for `through`.
fn syscall_name(nr: i32) -> String {
    match nr {
        -1 => "mmap".into(),
        1 => "write".into(),
        18 => "pwrite64".into(),
        20 => "writev".into(),
        40 => "sendfile".into(),
        16 => "ioctl".into(),
        76 => "truncate".into(),
        77 => "ftruncate".into(),
        275 => "splice".into(),
        276 => "tee".into(),
        285 => "fallocate".into(),
        296 => "pwritev".into(),
        326 => "copy_file_range".into(),
        328 => "pwritev2".into(),
        426 => "io_uring".into(),
        n => format!("syscall {n}"),
    }
}

/// What a dirtied inode did to the entries.
pub enum Dirtied {
    /// The process's open-for-write entry is now `modified`.
    Modified(usize),
    /// A new `write` entry.
    Written(usize),
}

impl Files {
    pub fn dirty(&mut self, classifier: &Classifier, d: &Dirty) -> Dirtied {
        let h = &d.header;
        let key = (h.tgid, h.start_ns, d.dev, d.ino);
        if d.opened
            && let Some(&i) = self.written.get(&key)
        {
            self.entries[i].modified = Some(true);
            return Dirtied::Modified(i);
        }
        let path = match &d.fs_path {
            Some(p) => self
                .mounts
                .resolve(d.dev, p)
                .or_else(|| {
                    // A filesystem mounted since the start.
                    self.mounts = Mounts::load();
                    self.mounts.resolve(d.dev, p)
                })
                .unwrap_or_else(|| p.clone()),
            None => format!("(no name: inode {} on {})", d.ino, dev_string(d.dev)),
        };
        let inode = judge::Inode {
            identity: d.identity,
            key: Some(InodeKey {
                dev: d.dev,
                generation: d.generation,
                ino: d.ino,
            }),
            parent: None,
        };
        let j = self.judge(
            classifier,
            &path,
            d.magic,
            d.path_truncated,
            Op::Write,
            inode,
        );
        let through = if d.io_worker {
            "io_uring".to_string()
        } else {
            syscall_name(d.syscall)
        };
        self.entries.push(FileEntry {
            pid: h.tgid,
            op: Op::Write,
            path,
            fs: Some(classify::fs_name(d.magic).to_string()),
            magic: Some(classify::magic_hex(d.magic)),
            dev: Some(dev_string(d.dev)),
            ino: Some(d.ino),
            path_truncated: d.path_truncated,
            credential: j.c.credential,
            verified: j.c.verified,
            unverified_reason: j.c.reason,
            persistence: j.c.persistence,
            count: 1,
            same_inode_as: j.same_inode_as,
            escalation: j.escalation,
            modified: Some(true),
            without_open: true,
            through: Some(through),
            deleted: d.unlinked || d.fs_path.is_none(),
            stdio: self.stdio.contains(&(d.dev, d.ino)),
            io_uring: d.io_worker,
            ..Default::default()
        });
        let i = self.entries.len() - 1;
        self.written.insert(key, i);
        Dirtied::Written(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filesystem_paths_become_mount_paths() {
        let m = Mounts {
            mounts: vec![
                (1, "/".into(), "/".into()),
                (2, "/".into(), "/tmp".into()),
                (3, "/home/u/.ssh".into(), "/tmp/x".into()),
                (3, "/".into(), "/data".into()),
            ],
        };
        assert_eq!(m.resolve(1, "/etc/passwd").as_deref(), Some("/etc/passwd"));
        assert_eq!(m.resolve(2, "/a/b").as_deref(), Some("/tmp/a/b"));
        assert_eq!(
            m.resolve(3, "/home/u/.ssh/id_rsa").as_deref(),
            Some("/data/home/u/.ssh/id_rsa")
        );
        let bind_only = Mounts {
            mounts: vec![(3, "/home/u/.ssh".into(), "/tmp/x".into())],
        };
        assert_eq!(
            bind_only.resolve(3, "/home/u/.ssh/id_rsa").as_deref(),
            Some("/tmp/x/id_rsa")
        );
        assert_eq!(m.resolve(3, "/srv/f").as_deref(), Some("/data/srv/f"));
        assert_eq!(m.resolve(9, "/x"), None);
    }
}
