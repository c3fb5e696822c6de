//! Attribute changes (chmod, chown, truncate, utimes, xattrs), mkdir and mknod, and the
//! io_uring file requests, as file entries.
use sandbox_watch_common::{InodeKey, uring_op};

use super::{FileEntry, Files, Op, dev_string, errno_name};
use crate::judge::classify::{self, Classifier};
use crate::kernel::decode::{Attr, AttrOp, FileOpen, PathOp, Raced, Uring};

const S_ISUID: u32 = 0o4000;
const S_ISGID: u32 = 0o2000;
const S_IFMT: u32 = 0o170000;
const S_IFDIR: u32 = 0o040000;
const ANY_EXEC: u32 = 0o111;

/// What an xattr's name gives away: `security.capability` gives a program root's powers when
/// it runs; other `security.*` and `trusted.*` attributes are labels the kernel's security
/// modules act on.
fn xattr_escalation(name: &str) -> Option<String> {
    if name == "security.capability" {
        Some("file capabilities (security.capability): the program gets them when it runs".into())
    } else if name.starts_with("security.") || name.starts_with("trusted.") {
        Some(format!("{name}: a security label the kernel acts on"))
    } else {
        None
    }
}

/// An octal mode as people write it: `4755`.
pub fn mode_string(mode: u32) -> String {
    format!("{:04o}", mode & 0o7777)
}

impl Files {
    /// chmod, chown, truncate, utimes, setxattr, removexattr. A failed one is kept like a
    /// failed open (counted with its repeats), unless there was no such file.
    pub fn attr(
        &mut self,
        classifier: &Classifier,
        a: &Attr,
        wall: impl Fn(u64) -> String,
    ) -> Option<usize> {
        if matches!(-a.result, libc::ENOENT | libc::ENOTDIR) {
            return None;
        }
        let op = match a.op {
            AttrOp::Chmod => Op::Chmod,
            AttrOp::Chown => Op::Chown,
            AttrOp::Truncate => Op::Truncate,
            AttrOp::Utimes => Op::Utimes,
            AttrOp::SetXattr => Op::Setxattr,
            AttrOp::RemoveXattr => Op::Removexattr,
        };
        let key = (a.ino != 0).then_some(InodeKey {
            dev: a.dev,
            generation: a.generation,
            ino: a.ino,
        });
        // Persistence is a change to what runs: the content (truncate), or the bits that let
        // it run (chmod +x of a hook).
        let changes = op == Op::Truncate || (op == Op::Chmod && a.mode & ANY_EXEC != 0);
        let judged_as = if changes { Op::Truncate } else { Op::Path };
        let names = PathOp {
            header: a.header.clone(),
            path: a.path.clone(),
            path_truncated: a.path_truncated,
            identity: a.identity,
            key,
            from_kernel: a.from_kernel || a.by_fd,
            raced: a.raced_path.clone().map(|p| Raced {
                path: Some(p),
                new_path: None,
            }),
            unchecked: a.unchecked,
            result: a.result,
            ..Default::default()
        };
        let mut j = self.judge_names(classifier, &names, judged_as);
        // A credential's mode or owner changed matters whatever the op (a key made readable).
        let credential = self.judge_names(classifier, &names, Op::Read).c;
        if credential.credential && !j.c.credential {
            j.c.credential = true;
            j.c.verified = credential.verified;
            j.c.reason = credential.reason;
        }
        let escalation = match op {
            Op::Chmod if a.mode & (S_ISUID | S_ISGID) != 0 => Some(format!(
                "mode {}: the program runs with its owner's {} when anyone starts it",
                mode_string(a.mode),
                if a.mode & S_ISUID != 0 {
                    "user id (setuid)"
                } else {
                    "group id (setgid)"
                }
            )),
            Op::Setxattr | Op::Removexattr => a.xattr.as_deref().and_then(xattr_escalation),
            _ => j.escalation.take(),
        };
        let mut e = FileEntry {
            path_truncated: a.path_truncated,
            credential: j.c.credential,
            verified: j.c.verified && (a.by_fd || a.from_kernel),
            unverified_reason: j.c.credential.then(|| j.c.reason.clone()).flatten(),
            persistence: j.c.persistence,
            same_inode_as: j.same_inode_as,
            escalation,
            result: (a.result != 0).then(|| errno_name(a.result)),
            xattr: a.xattr.clone(),
            ..self.named_op(&names, op, a.path.clone())
        };
        e.kernel_path = a.from_kernel || a.by_fd;
        if key.is_some() {
            e.dev = Some(dev_string(a.dev));
            e.ino = Some(a.ino);
            e.fs = Some(classify::fs_name(a.magic).to_string()).filter(|_| a.magic != 0);
            e.magic = Some(classify::magic_hex(a.magic)).filter(|_| a.magic != 0);
        }
        match op {
            Op::Chmod => e.mode = Some(mode_string(a.mode)),
            Op::Chown => {
                e.uid = (a.uid != u32::MAX).then_some(a.uid);
                e.gid = (a.gid != u32::MAX).then_some(a.gid);
            }
            Op::Truncate => e.size = Some(a.size),
            Op::Setxattr => e.size = Some(a.size),
            Op::Utimes if a.times_given => e.mtime = Some(wall(a.size)),
            _ => {}
        }
        self.add(e)
    }

    /// A directory or a special file made.
    pub fn mkdir(&mut self, classifier: &Classifier, p: &PathOp, mode: u32) -> Option<usize> {
        if matches!(-p.result, libc::ENOENT | libc::ENOTDIR | libc::EEXIST) {
            return None;
        }
        let op = if mode & S_IFMT == S_IFDIR || mode & S_IFMT == 0 {
            Op::Mkdir
        } else {
            Op::Mknod
        };
        let j = self.judge_names(classifier, p, op);
        self.add(FileEntry {
            path_truncated: p.path_truncated,
            persistence: j.c.persistence,
            credential: j.c.credential,
            same_inode_as: j.same_inode_as,
            mode: Some(mode_string(mode)),
            result: (p.result != 0).then(|| errno_name(p.result)),
            ..self.named_op(p, op, p.path.clone())
        })
    }

    /// An io_uring request: an open becomes an open entry (where fentry did not see it), the
    /// named operations their entries, each marked `io_uring`. The entry's index, and
    /// whether the kernel should know a credential's inode from now on.
    pub fn uring(
        &mut self,
        classifier: &Classifier,
        u: &Uring,
    ) -> (Option<usize>, Option<(InodeKey, u32)>) {
        let p = |path: Option<&String>, new_path: Option<&String>| PathOp {
            header: u.header.clone(),
            path: path.cloned().unwrap_or_default(),
            new_path: new_path.cloned(),
            result: u.result,
            identity: u.identity,
            key: (u.ino != 0).then_some(InodeKey {
                dev: u.dev,
                generation: u.generation,
                ino: u.ino,
            }),
            from_kernel: true,
            ..Default::default()
        };
        let mut know = None;
        let index = match u.opcode {
            uring_op::OPENAT | uring_op::OPENAT2 => {
                if u.result >= 0 && u.slot == 0 {
                    // Where fentry runs, security_file_open already sent it.
                    if self.fentry_opens {
                        return (None, None);
                    }
                    let Some(path) = u.file.clone() else {
                        return (None, None);
                    };
                    let open = FileOpen {
                        header: u.header.clone(),
                        magic: u.magic,
                        dev: u.dev,
                        ino: u.ino,
                        open_flags: u.flags,
                        f_mode: u.f_mode,
                        path,
                        path_truncated: false,
                        identity: u.identity,
                        generation: u.generation,
                        name_key: 0,
                        parent_ino: 0,
                        parent_generation: 0,
                    };
                    let added = self.open(classifier, u.header.start_ns, &open);
                    know = added.know;
                    added.record.map(|_| self.entries.len() - 1)
                } else if u.result >= 0 {
                    if self.fentry_opens {
                        return (None, None);
                    }
                    // A direct descriptor: no fd to read the file from.
                    let names = p(u.path.as_ref(), None);
                    let op = if u.flags & 0o3 != 0 {
                        Op::Write
                    } else {
                        Op::Read
                    };
                    let j = self.judge_names(classifier, &names, op);
                    self.add(FileEntry {
                        credential: j.c.credential,
                        persistence: j.c.persistence,
                        unverified_reason: Some(
                            "an io_uring open into a direct descriptor: the path as given".into(),
                        ),
                        flags: Some(super::open_flags(u.flags)),
                        ..FileEntry::named(u.header.tgid, op, names.path.clone())
                    })
                } else {
                    let failed = crate::kernel::decode::FailedOpen {
                        header: u.header.clone(),
                        path: u.path.clone().unwrap_or_default(),
                        path_truncated: false,
                        open_flags: u.flags,
                        result: u.result,
                    };
                    if matches!(-u.result, libc::ENOENT | libc::ENOTDIR) {
                        return (None, None);
                    }
                    self.failed_open(classifier, &failed)
                }
            }
            uring_op::RENAMEAT => {
                self.path_op(classifier, Op::Rename, &p(u.path.as_ref(), u.second.as_ref()))
            }
            uring_op::UNLINKAT => self.path_op(classifier, Op::Delete, &p(u.path.as_ref(), None)),
            uring_op::LINKAT => self.link(classifier, &p(u.path.as_ref(), u.second.as_ref()), false),
            uring_op::SYMLINKAT => {
                let mut names = p(u.path.as_ref(), u.second.as_ref());
                names.key = None;
                self.link(classifier, &names, true)
            }
            uring_op::MKDIRAT => self.mkdir(classifier, &p(u.path.as_ref(), None), u.flags),
            uring_op::SETXATTR | uring_op::FSETXATTR => {
                let a = Attr {
                    header: u.header.clone(),
                    op: AttrOp::SetXattr,
                    result: u.result,
                    mode: 0,
                    uid: u32::MAX,
                    gid: u32::MAX,
                    size: 0,
                    at_flags: 0,
                    path: u.path.clone().unwrap_or_else(|| "(a descriptor)".into()),
                    path_truncated: false,
                    by_fd: false,
                    from_kernel: true,
                    times_given: false,
                    xattr: u.second.clone(),
                    dev: 0,
                    ino: 0,
                    generation: 0,
                    identity: 0,
                    magic: 0,
                    raced_path: None,
                    unchecked: false,
                };
                self.attr(classifier, &a, |_| String::new())
            }
            _ => None,
        };
        if let Some(i) = index {
            self.entries[i].io_uring = true;
        }
        (index, know)
    }
}
