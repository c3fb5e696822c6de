//! What the traced processes read and changed: file events turned into report entries.
//!
//! Writes, creates, deletes, renames and credential reads are individual entries. Plain reads
//! of one inode by one process under one name are one entry with a `count` (the kernel already
//! counts repeats without sending them; their number is added when the process exits or the
//! capture ends).
//!
//! Every access is judged by the path used and, where the kernel knew the inode from the
//! start (`judge.rs`), by the rule's path too. `writes.rs` has the writes the kernel saw
//! dirty an inode, `attrs.rs` the attribute changes, mkdirs and io_uring requests, `end.rs`
//! what is read when the capture ends (hashes, directories moved into persistence places, git
//! settings).
use std::collections::HashMap;

use sandbox_watch_common::{ID_CREDENTIAL, InodeKey, ReadKey};
use serde::{Deserialize, Serialize};

use crate::judge::classify::{self, Classifier};
use crate::kernel::decode::{FailedOpen, FileOpen, PathOp};

mod attrs;
mod end;
mod judge;
mod writes;

pub use judge::Known;
pub use writes::{Dirtied, Mounts};

const O_WRONLY: u32 = 0o1;
const O_RDWR: u32 = 0o2;
const O_CREAT: u32 = 0o100;
const O_TRUNC: u32 = 0o1000;
const FMODE_WRITE: u32 = 0x2;
const FMODE_CREATED: u32 = 0x100000;

/// Files larger than this are not hashed at the end (the entry says so).
pub const HASH_LIMIT: u64 = 64 << 20;

const FMODE_PATH: u32 = 0x4000;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    #[default]
    Read,
    Write,
    Create,
    Delete,
    Rename,
    /// An O_PATH descriptor: names the file, reads nothing.
    Path,
    Mkdir,
    /// A special file (FIFO, socket, device) made.
    Mknod,
    Chmod,
    Chown,
    Truncate,
    Utimes,
    Setxattr,
    Removexattr,
}

impl Op {
    pub fn of_open(open: &FileOpen) -> Op {
        if open.f_mode & FMODE_PATH != 0 {
            Op::Path
        } else if open.f_mode & FMODE_CREATED != 0 {
            Op::Create
        } else if open.f_mode & FMODE_WRITE != 0
            || open.open_flags & (O_WRONLY | O_RDWR | O_TRUNC | O_CREAT) != 0
        {
            Op::Write
        } else {
            Op::Read
        }
    }

    /// Whether the operation changes the file system (persistence applies to those).
    pub fn changes(self) -> bool {
        !matches!(self, Op::Read | Op::Path)
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
            Op::Mkdir => "made the directory",
            Op::Mknod => "made the special file",
            Op::Chmod => "changed the mode of",
            Op::Chown => "changed the owner of",
            Op::Truncate => "truncated",
            Op::Utimes => "changed the times of",
            Op::Setxattr => "set an extended attribute of",
            Op::Removexattr => "removed an extended attribute of",
        }
    }

    /// "pid 7 tried to write /etc/x" (an operation that failed).
    pub fn attempt(self) -> &'static str {
        match self {
            Op::Read | Op::Path => "read",
            Op::Write | Op::Create => "write",
            Op::Delete => "delete",
            Op::Rename => "rename",
            Op::Mkdir | Op::Mknod => "make",
            Op::Chmod => "change the mode of",
            Op::Chown => "change the owner of",
            Op::Truncate => "truncate",
            Op::Utimes => "change the times of",
            Op::Setxattr => "set an extended attribute of",
            Op::Removexattr => "remove an extended attribute of",
        }
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct FileEntry {
    pub pid: u32,
    pub op: Op,
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub new_path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub fs: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub magic: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub dev: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub ino: Option<u64>,
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub path_truncated: bool,
    /// The open's flags (O_WRONLY|O_CREAT|…; O_RDONLY when none).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub flags: Option<String>,
    pub credential: bool,
    pub verified: bool,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub unverified_reason: Option<String>,
    pub persistence: bool,
    pub count: u64,
    /// A folded entry (see `DETAILED_READS`): `path` is a directory, this many files in it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub folded: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sha256: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sha256_skipped: Option<String>,
    /// An open that failed: the error's name (EACCES, EPERM, ENOENT, …). The path is then the
    /// caller's, not the kernel's file (not verified).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub result: Option<String>,
    /// A link created at `path`: what it points to (a symbolic link's target as given, or the
    /// file a hard link shares), and which kind.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub link_to: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub link: Option<String>,
    /// The kernel knew this inode from the start under the rule's path given here (a hard
    /// link, bind mount, handle or other path to a credential or persistence file), or, for a
    /// file created through another path to a rule's directory, its path there.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub same_inode_as: Option<String>,
    /// Gives root's power away outside the traced tree (setuid or setgid bits, file
    /// capabilities and other `security.*` attributes, core_pattern, modprobe, binfmt_misc).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub escalation: Option<String>,
    /// A name given to the call changed while it ran (read at its entry and its exit): a
    /// thread of the caller rewrote it. `path`/`new_path` are the names at the exit.
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub raced: bool,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub path_at_entry: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub new_path_at_entry: Option<String>,
    /// false: a name could not be read at the call's entry, so it was not checked.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub name_checked: Option<bool>,
    /// The paths are the kernel's own (fentry on security_path_*), not the caller's names.
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub kernel_path: bool,
    /// An open for write: whether the kernel saw the file's content change (dirtied pages or
    /// times); left out where the filesystem cannot say (tmpfs, procfs).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub modified: Option<bool>,
    /// A write with no open of the file by this process in the capture (an inherited
    /// descriptor, one taken with pidfd_getfd, one opened before an attach, a shared mapping):
    /// seen where the kernel dirtied the inode.
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub without_open: bool,
    /// How such a write was made: the system call, `mmap` (a store through a shared
    /// mapping), `io_uring`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub through: Option<String>,
    /// The file had no name left (deleted while open) when it was written.
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub deleted: bool,
    /// The monitor's own standard output or error, which the agent inherited.
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub stdio: bool,
    /// Made through io_uring.
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub io_uring: bool,
    /// chmod, mkdir, mknod: the mode (octal); chown: the new owner and group (when changed).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub mode: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub uid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub gid: Option<u32>,
    /// truncate: the new length; setxattr: the value's size.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub size: Option<u64>,
    /// setxattr, removexattr: the attribute's name.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub xattr: Option<String>,
    /// utimes: the modification time set (RFC 3339), when the caller gave one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub mtime: Option<String>,
    /// A directory moved or linked into a persistence place: the files in it that are
    /// persistence there (at the end of the capture).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub persistent_files: Option<Vec<String>>,
    /// A git configuration written: the settings that make git run something from outside
    /// the repository and were not there at the start.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub git_settings: Option<Vec<String>>,
}

impl FileEntry {
    /// An entry for a path as the caller named it (delete, rename, link, failed open): no file
    /// was opened, so no filesystem identity and nothing verified.
    fn named(pid: u32, op: Op, path: String) -> FileEntry {
        FileEntry {
            pid,
            op,
            path,
            count: 1,
            ..Default::default()
        }
    }
}

/// The name of a -errno result: `EACCES`.
pub fn errno_name(result: i32) -> String {
    match nix::errno::Errno::from_raw(-result) {
        nix::errno::Errno::UnknownErrno => format!("errno {}", -result),
        e => format!("{e:?}"),
    }
}

/// Open flags as people write them: `O_WRONLY|O_CREAT|O_TRUNC`.
pub fn open_flags(flags: u32) -> String {
    const NAMES: &[(u32, &str)] = &[
        (0o100, "O_CREAT"),
        (0o200, "O_EXCL"),
        (0o1000, "O_TRUNC"),
        (0o2000, "O_APPEND"),
        (0o4000, "O_NONBLOCK"),
        (0o200000, "O_DIRECTORY"),
        (0o400000, "O_NOFOLLOW"),
        (0o2000000, "O_CLOEXEC"),
        (0o10000000, "O_PATH"),
        (0o20200000, "O_TMPFILE"),
    ];
    let mut out = vec![match flags & 0o3 {
        0 => "O_RDONLY",
        1 => "O_WRONLY",
        _ => "O_RDWR",
    }];
    for &(bit, name) in NAMES {
        if flags & bit == bit && !(name == "O_DIRECTORY" && flags & 0o20200000 == 0o20200000) {
            out.push(name);
        }
    }
    out.join("|")
}

pub fn dev_string(dev: u32) -> String {
    // The kernel's internal dev_t: 12 bits of major above 20 bits of minor.
    format!("{}:{}", dev >> 20, dev & 0xfffff)
}

/// Plain reads kept as entries of their own. Past this many, a process's further plain reads
/// are folded into one entry per directory (`folded`: how many files); the log still has each.
/// This bounds the monitor's memory on captures of millions of distinct files.
pub const DETAILED_READS: usize = 10_000;

/// Past this many files read, a process's kernel-side read counts are collected at the end of
/// the capture rather than when it exits.
pub const EXIT_HARVEST: usize = 256;

#[derive(Default)]
pub struct Files {
    pub entries: Vec<FileEntry>,
    /// Detailed plain reads: a hash of (tgid, process start, dev, ino) → their entry.
    reads: HashMap<u64, u32>,
    /// The inodes each process read and their entries, to add the kernel's counts of
    /// repeats when it exits (16 bytes a read: the only per-read memory past the fold).
    inodes: HashMap<(u32, u64), Vec<ReadInode>>,
    /// Folded reads: (tgid, process start, directory) → entry.
    folds: HashMap<(u32, u64, String), u32>,
    detailed_reads: usize,
    /// Failed opens kept: (tgid, path, op, error) → entry.
    failed: HashMap<(u32, String, Op, String), usize>,
    /// Inodes the kernel knows (see `judge.rs`).
    known: HashMap<InodeKey, Known>,
    /// Opens for write and creates: (tgid, process start, dev, ino) → entry, to mark the one
    /// the kernel then saw dirtied as `modified`.
    written: HashMap<(u32, u64, u32, u64), usize>,
    /// Where each filesystem is mounted (a dirtied inode's path is from its filesystem's root).
    pub mounts: Mounts,
    /// The monitor's own standard output and error (dev, ino), which the agent inherits.
    pub stdio: Vec<(u32, u64)>,
    /// Git settings of concern in the config files there at the start (see `end.rs`).
    pub git_before: HashMap<String, Vec<String>>,
    /// The kernel reports dirtied inodes: an open for write it did not see dirtied is not
    /// modified (on filesystems that account dirty pages).
    pub dirty_seen: bool,
    /// security_file_open reports every open, io_uring's too (fentry).
    pub fentry_opens: bool,
}

/// What the capture loop must do after a file event.
pub struct Added {
    /// What the log gets for this event (None: a repeat, only counted).
    pub record: Option<FileEntry>,
    /// A credential found by its path: the kernel should know its inode from now on (every
    /// open of it sent, its other paths flagged).
    pub know: Option<(InodeKey, u32)>,
}

/// A read whose repeats the kernel counts under this key (with the process's tgid and start).
#[derive(Clone, Copy)]
struct ReadInode {
    dev: u32,
    generation: u32,
    ino: u64,
    name_key: u64,
    entry: u32,
}

/// The kernel's read key (`ReadKey`) as one number: the process (with its start), the inode
/// (with its generation) and the name used.
fn read_hash(tgid: u32, start_ns: u64, open: &FileOpen) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    // A fixed-key hasher: the same key gives the same hash for the whole capture.
    let mut h =
        std::hash::BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default()
            .build_hasher();
    h.write_u32(tgid);
    h.write_u64(start_ns);
    h.write_u32(open.dev);
    h.write_u64(open.ino);
    h.write_u32(open.generation);
    h.write_u64(open.name_key);
    h.finish()
}

impl Files {
    pub fn open(&mut self, classifier: &Classifier, start_ns: u64, open: &FileOpen) -> Added {
        let op = Op::of_open(open);
        let key = InodeKey {
            dev: open.dev,
            generation: open.generation,
            ino: open.ino,
        };
        let inode = judge::Inode {
            identity: open.identity,
            key: Some(key),
            parent: (open.parent_ino != 0).then_some(InodeKey {
                dev: open.dev,
                generation: open.parent_generation,
                ino: open.parent_ino,
            }),
        };
        let j = self.judge(
            classifier,
            &open.path,
            open.magic,
            open.path_truncated,
            op,
            inode,
        );
        let c = &j.c;
        let h = &open.header;
        let plain_read = op == Op::Read && !c.credential;
        let hash = read_hash(h.tgid, start_ns, open);
        if plain_read && let Some(&index) = self.reads.get(&hash) {
            self.entries[index as usize].count += 1;
            return Added {
                record: None,
                know: None,
            };
        }
        let entry = FileEntry {
            pid: h.tgid,
            op,
            path: open.path.clone(),
            fs: Some(classify::fs_name(open.magic).to_string()),
            magic: Some(classify::magic_hex(open.magic)),
            dev: Some(dev_string(open.dev)),
            ino: Some(open.ino),
            path_truncated: open.path_truncated,
            flags: Some(open_flags(open.open_flags)),
            credential: c.credential,
            verified: c.verified,
            unverified_reason: c.reason.clone(),
            persistence: c.persistence,
            count: 1,
            same_inode_as: j.same_inode_as.clone(),
            escalation: j.escalation.clone(),
            stdio: self.stdio.contains(&(open.dev, open.ino)),
            ..Default::default()
        };
        let index = if plain_read && self.detailed_reads >= DETAILED_READS {
            self.fold(start_ns, &entry)
        } else {
            self.detailed_reads += usize::from(plain_read);
            self.entries.push(entry.clone());
            if plain_read {
                self.reads.insert(hash, self.entries.len() as u32 - 1);
            }
            self.entries.len() - 1
        };
        if op == Op::Read {
            let read = ReadInode {
                dev: open.dev,
                generation: open.generation,
                ino: open.ino,
                name_key: open.name_key,
                entry: index as u32,
            };
            self.inodes
                .entry((h.tgid, start_ns))
                .or_default()
                .push(read);
        }
        if matches!(op, Op::Write | Op::Create) {
            self.written
                .insert((h.tgid, start_ns, open.dev, open.ino), index);
        }
        let known = open.identity & ID_CREDENTIAL != 0;
        let know = (c.credential && !known && op == Op::Read).then_some((key, ID_CREDENTIAL));
        if let Some((key, flags)) = know {
            self.know(key, open.path.clone(), flags);
        }
        Added {
            record: Some(entry),
            know,
        }
    }

    /// Counts a plain read in its process's entry for the file's directory.
    fn fold(&mut self, start_ns: u64, entry: &FileEntry) -> usize {
        let dir = match entry.path.rfind('/') {
            Some(0) | None => "/".to_string(),
            Some(i) => format!("{}/", &entry.path[..i]),
        };
        let key = (entry.pid, start_ns, dir);
        if let Some(&i) = self.folds.get(&key) {
            let e = &mut self.entries[i as usize];
            e.count += 1;
            e.folded = Some(e.folded.unwrap_or(0) + 1);
            return i as usize;
        }
        let mut folded = entry.clone();
        folded.path = key.2.clone();
        folded.ino = None;
        folded.folded = Some(1);
        self.entries.push(folded);
        let i = self.entries.len() - 1;
        self.folds.insert(key, i as u32);
        i
    }

    /// An open that failed (refused, or failed otherwise: the kernel does not send opens of
    /// files that are not there). Repeats are counted.
    pub fn failed_open(&mut self, classifier: &Classifier, f: &FailedOpen) -> Option<usize> {
        const O_ACCMODE: u32 = 0o3;
        const O_CREAT: u32 = 0o100;
        const O_TRUNC: u32 = 0o1000;
        let writes = f.open_flags & (O_ACCMODE | O_CREAT | O_TRUNC) != 0;
        let op = if writes { Op::Write } else { Op::Read };
        let c = classifier.classify(&f.path, 0, f.path_truncated, writes);
        self.add_failed(FileEntry {
            path_truncated: f.path_truncated,
            flags: Some(open_flags(f.open_flags)),
            credential: c.credential,
            unverified_reason: c
                .credential
                .then(|| "the open failed: the path is the caller's".to_string()),
            persistence: c.persistence,
            result: Some(errno_name(f.result)),
            ..FileEntry::named(f.header.tgid, op, f.path.clone())
        })
    }

    /// A failed open, counted with its repeats (same process, path, operation and error).
    pub fn add_failed(&mut self, entry: FileEntry) -> Option<usize> {
        let key = (
            entry.pid,
            entry.path.clone(),
            entry.op,
            entry.result.clone().unwrap_or_default(),
        );
        if let Some(&i) = self.failed.get(&key) {
            self.entries[i].count += entry.count;
            return Some(i);
        }
        self.entries.push(entry);
        let i = self.entries.len() - 1;
        self.failed.insert(key, i);
        Some(i)
    }

    /// A delete or rename; a failed one is an entry with its `result`, like a failed open, but
    /// not when there was nothing to delete or rename (ENOENT, ENOTDIR: `rm -f`, lock files):
    /// None, and the log keeps it. Judged by every name it had: at the exit, at the entry (a
    /// raced name), and the inode's rule path (where the kernel named the inode).
    pub fn path_op(&mut self, classifier: &Classifier, op: Op, p: &PathOp) -> Option<usize> {
        if matches!(-p.result, libc::ENOENT | libc::ENOTDIR) {
            return None;
        }
        let j = self.judge_names(classifier, p, op);
        self.add(FileEntry {
            new_path: p.new_path.clone(),
            path_truncated: p.path_truncated || p.new_path_truncated,
            credential: j.c.credential,
            verified: j.c.verified && p.from_kernel,
            unverified_reason: j.c.credential.then(|| j.c.reason.clone()).flatten(),
            persistence: j.c.persistence,
            same_inode_as: j.same_inode_as,
            result: (p.result != 0).then(|| errno_name(p.result)),
            ..self.named_op(p, op, p.path.clone())
        })
    }

    /// The fields every named operation has: who, the raced names, where the paths came from.
    fn named_op(&self, p: &PathOp, op: Op, path: String) -> FileEntry {
        let raced = p.raced.clone().unwrap_or_default();
        FileEntry {
            raced: p.raced.is_some(),
            path_at_entry: raced.path,
            new_path_at_entry: raced.new_path,
            name_checked: p.unchecked.then_some(false),
            kernel_path: p.from_kernel,
            ..FileEntry::named(p.header.tgid, op, path)
        }
    }

    /// A named operation judged by all its names.
    fn judge_names(
        &self,
        classifier: &Classifier,
        p: &PathOp,
        op: Op,
    ) -> judge::Judged {
        let inode = judge::Inode {
            identity: p.identity,
            key: p.key,
            parent: None,
        };
        let mut names: Vec<(&str, bool)> = vec![(&p.path, p.path_truncated)];
        if let Some(n) = &p.new_path {
            names.push((n, p.new_path_truncated));
        }
        if let Some(r) = &p.raced {
            names.extend(r.path.as_deref().map(|n| (n, false)));
            names.extend(r.new_path.as_deref().map(|n| (n, false)));
        }
        let mut j = judge::Judged::default();
        for (name, cut) in names {
            let one = self.judge(classifier, name, 0, cut, op, inode);
            if one.c.credential && !j.c.credential {
                j.c.credential = true;
                j.c.verified = one.c.verified;
                j.c.reason = one.c.reason;
            }
            j.c.persistence |= one.c.persistence;
            j.same_inode_as = j.same_inode_as.or(one.same_inode_as);
            j.escalation = j.escalation.or(one.escalation);
        }
        if j.c.credential && j.c.reason.is_none() && !p.from_kernel {
            j.c.reason = Some("the path is the caller's".into());
        }
        j
    }

    /// A link made (or refused): an entry `create` at the link's path, with what it points to.
    /// Judged by where it is (a symbolic link named ~/.bashrc runs at every shell) and by what
    /// it points to (a link to a key exposes the key).
    pub fn link(&mut self, classifier: &Classifier, p: &PathOp, symbolic: bool) -> Option<usize> {
        if matches!(-p.result, libc::ENOENT | libc::ENOTDIR) {
            return None;
        }
        let at = p.new_path.clone().unwrap_or_default();
        let mut at_names = p.clone();
        at_names.path = at.clone();
        at_names.new_path = None;
        at_names.raced = p.raced.as_ref().map(|r| crate::kernel::decode::Raced {
            path: r.new_path.clone(),
            new_path: None,
        });
        let c = self.judge_names(classifier, &at_names, Op::Create);
        let mut to_names = p.clone();
        to_names.new_path = None;
        to_names.raced = p.raced.as_ref().map(|r| crate::kernel::decode::Raced {
            path: r.path.clone(),
            new_path: None,
        });
        let c_to = self.judge_names(classifier, &to_names, Op::Read);
        self.add(FileEntry {
            path_truncated: p.path_truncated || p.new_path_truncated,
            credential: c.c.credential || c_to.c.credential,
            persistence: c.c.persistence,
            same_inode_as: c_to.same_inode_as,
            result: (p.result != 0).then(|| errno_name(p.result)),
            link_to: Some(p.path.clone()),
            link: Some(if symbolic { "symbolic" } else { "hard" }.to_string()),
            ..self.named_op(p, Op::Create, at)
        })
    }

    /// A new entry, or a failed one counted with its repeats.
    fn add(&mut self, entry: FileEntry) -> Option<usize> {
        if entry.result.is_some() {
            return self.add_failed(entry);
        }
        self.entries.push(entry);
        Some(self.entries.len() - 1)
    }

    /// When a process exits: for each inode it read, `take` returns how many more opens the
    /// kernel counted without sending, and they are added to the entry. A process that read
    /// more than `EXIT_HARVEST` files waits for the end of the capture: one system call per
    /// file would slow the capture while it is busy.
    pub fn collect_read_counts(
        &mut self,
        tgid: u32,
        start_ns: u64,
        take: impl FnMut(&ReadKey) -> u64,
    ) {
        let few = self
            .inodes
            .get(&(tgid, start_ns))
            .is_some_and(|v| v.len() <= EXIT_HARVEST);
        if few {
            self.harvest(tgid, start_ns, take);
        }
    }

    /// The same for every process not collected yet, at the end.
    pub fn collect_all_read_counts(&mut self, mut take: impl FnMut(&ReadKey) -> u64) {
        let all: Vec<(u32, u64)> = self.inodes.keys().copied().collect();
        for (tgid, start) in all {
            self.harvest(tgid, start, &mut take);
        }
    }

    fn harvest(&mut self, tgid: u32, start_ns: u64, mut take: impl FnMut(&ReadKey) -> u64) {
        for r in self.inodes.remove(&(tgid, start_ns)).unwrap_or_default() {
            let more = take(&ReadKey {
                tgid,
                dev: r.dev,
                ino: r.ino,
                start_ns,
                generation: r.generation,
                _pad: 0,
                name_key: r.name_key,
            });
            self.entries[r.entry as usize].count += more;
        }
    }

    /// A file record from a log (replay): the same entries, with the same folding.
    pub fn add_logged(&mut self, entry: FileEntry) {
        let plain_read = entry.op == Op::Read && !entry.credential && entry.folded.is_none();
        if plain_read && self.detailed_reads >= DETAILED_READS {
            self.fold(0, &entry);
            return;
        }
        self.detailed_reads += usize::from(plain_read);
        self.entries.push(entry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_flags_read_like_c() {
        assert_eq!(open_flags(0), "O_RDONLY");
        assert_eq!(open_flags(0o1 | 0o100 | 0o1000), "O_WRONLY|O_CREAT|O_TRUNC");
        assert_eq!(open_flags(0o2 | 0o2000000), "O_RDWR|O_CLOEXEC");
        assert_eq!(open_flags(0o20200000 | 0o2), "O_RDWR|O_TMPFILE");
    }

    #[test]
    fn devices_split_like_the_kernel() {
        assert_eq!(dev_string((254 << 20) | 3), "254:3");
        assert_eq!(dev_string(6), "0:6");
    }
}
