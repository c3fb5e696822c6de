//! What the traced processes read and changed: file events turned into report entries.
//!
//! Writes, creates, deletes, renames and credential reads are individual entries. Plain reads
//! of one inode by one process are one entry with a `count` (the kernel already counts repeats
//! without sending them; their number is added when the process exits or the capture ends).
use std::collections::HashMap;

use sandbox_watch_common::ReadKey;
use serde::{Deserialize, Serialize};

use crate::judge::classify::{self, Classifier};
use crate::kernel::decode::{FailedOpen, FileOpen, PathOp};

const O_WRONLY: u32 = 0o1;
const O_RDWR: u32 = 0o2;
const O_CREAT: u32 = 0o100;
const O_TRUNC: u32 = 0o1000;
const FMODE_WRITE: u32 = 0x2;
const FMODE_CREATED: u32 = 0x100000;

/// Files larger than this are not hashed at the end (the entry says so).
pub const HASH_LIMIT: u64 = 64 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Read,
    Write,
    Create,
    Delete,
    Rename,
}

impl Op {
    pub fn of_open(open: &FileOpen) -> Op {
        if open.f_mode & FMODE_CREATED != 0 {
            Op::Create
        } else if open.f_mode & FMODE_WRITE != 0
            || open.open_flags & (O_WRONLY | O_RDWR | O_TRUNC | O_CREAT) != 0
        {
            Op::Write
        } else {
            Op::Read
        }
    }

    pub fn changes(self) -> bool {
        self != Op::Read
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
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
}

impl FileEntry {
    /// An entry for a path as the caller named it (delete, rename, link, failed open): no file
    /// was opened, so no filesystem identity and nothing verified.
    fn named(pid: u32, op: Op, path: String) -> FileEntry {
        FileEntry {
            pid,
            op,
            path,
            new_path: None,
            fs: None,
            magic: None,
            dev: None,
            ino: None,
            path_truncated: false,
            flags: None,
            credential: false,
            verified: false,
            unverified_reason: None,
            persistence: false,
            count: 1,
            folded: None,
            sha256: None,
            sha256_skipped: None,
            result: None,
            link_to: None,
            link: None,
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
}

/// What the capture loop must do after a file event.
pub struct Added {
    /// What the log gets for this event (None: a repeat, only counted).
    pub record: Option<FileEntry>,
    /// A credential read: the kernel must report every further open of this inode.
    pub always_report: Option<ReadKey>,
}

#[derive(Clone, Copy)]
struct ReadInode {
    dev: u32,
    entry: u32,
    ino: u64,
}

fn read_hash(tgid: u32, start_ns: u64, dev: u32, ino: u64) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    // A fixed-key hasher: the same key gives the same hash for the whole capture.
    let mut h =
        std::hash::BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default()
            .build_hasher();
    h.write_u32(tgid);
    h.write_u64(start_ns);
    h.write_u32(dev);
    h.write_u64(ino);
    h.finish()
}

impl Files {
    pub fn open(&mut self, classifier: &Classifier, start_ns: u64, open: &FileOpen) -> Added {
        let op = Op::of_open(open);
        let c = classifier.classify(&open.path, open.magic, open.path_truncated, op.changes());
        let h = &open.header;
        let plain_read = op == Op::Read && !c.credential;
        let key = read_hash(h.tgid, start_ns, open.dev, open.ino);
        if plain_read && let Some(&index) = self.reads.get(&key) {
            self.entries[index as usize].count += 1;
            return Added {
                record: None,
                always_report: None,
            };
        }
        let entry = FileEntry {
            pid: h.tgid,
            op,
            path: open.path.clone(),
            new_path: None,
            fs: Some(classify::fs_name(open.magic).to_string()),
            magic: Some(classify::magic_hex(open.magic)),
            dev: Some(dev_string(open.dev)),
            ino: Some(open.ino),
            path_truncated: open.path_truncated,
            flags: Some(open_flags(open.open_flags)),
            credential: c.credential,
            verified: c.verified,
            unverified_reason: c.reason,
            persistence: c.persistence,
            count: 1,
            folded: None,
            sha256: None,
            sha256_skipped: None,
            result: None,
            link_to: None,
            link: None,
        };
        let index = if plain_read && self.detailed_reads >= DETAILED_READS {
            self.fold(start_ns, &entry)
        } else {
            self.detailed_reads += usize::from(plain_read);
            self.entries.push(entry.clone());
            if plain_read {
                self.reads.insert(key, self.entries.len() as u32 - 1);
            }
            self.entries.len() - 1
        };
        if plain_read {
            let read = ReadInode {
                dev: open.dev,
                entry: index as u32,
                ino: open.ino,
            };
            self.inodes
                .entry((h.tgid, start_ns))
                .or_default()
                .push(read);
        }
        let always_report = (op == Op::Read && c.credential).then_some(ReadKey {
            tgid: h.tgid,
            dev: open.dev,
            ino: open.ino,
        });
        Added {
            record: Some(entry),
            always_report,
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
    /// None, and the log keeps it.
    pub fn path_op(&mut self, classifier: &Classifier, op: Op, p: &PathOp) -> Option<usize> {
        if matches!(-p.result, libc::ENOENT | libc::ENOTDIR) {
            return None;
        }
        let c = classifier.classify(&p.path, 0, p.path_truncated, true);
        let c_new = p
            .new_path
            .as_deref()
            .map(|n| classifier.classify(n, 0, p.new_path_truncated, true));
        self.add(FileEntry {
            new_path: p.new_path.clone(),
            path_truncated: p.path_truncated || p.new_path_truncated,
            credential: c.credential || c_new.as_ref().is_some_and(|c| c.credential),
            persistence: c.persistence || c_new.as_ref().is_some_and(|c| c.persistence),
            result: (p.result != 0).then(|| errno_name(p.result)),
            ..FileEntry::named(p.header.tgid, op, p.path.clone())
        })
    }

    /// A link made (or refused): an entry `create` at the link's path, with what it points to.
    /// Judged by where it is (a symbolic link named ~/.bashrc runs at every shell) and by what
    /// it points to (a link to a key exposes the key).
    pub fn link(&mut self, classifier: &Classifier, p: &PathOp, symbolic: bool) -> Option<usize> {
        if matches!(-p.result, libc::ENOENT | libc::ENOTDIR) {
            return None;
        }
        let at = p.new_path.clone().unwrap_or_default();
        let c = classifier.classify(&at, 0, p.new_path_truncated, true);
        let c_to = classifier.classify(&p.path, 0, p.path_truncated, false);
        self.add(FileEntry {
            path_truncated: p.path_truncated || p.new_path_truncated,
            credential: c.credential || c_to.credential,
            persistence: c.persistence,
            result: (p.result != 0).then(|| errno_name(p.result)),
            link_to: Some(p.path.clone()),
            link: Some(if symbolic { "symbolic" } else { "hard" }.to_string()),
            ..FileEntry::named(p.header.tgid, Op::Create, at)
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

    /// Hashes the final content of every file that was written or created and still exists.
    pub fn hash_written(&mut self) {
        use sha2::Digest;
        let mut done: HashMap<String, (Option<String>, Option<String>)> = HashMap::new();
        for e in self.entries.iter_mut().filter(|e| e.result.is_none()) {
            let path = match e.op {
                Op::Write | Op::Create => e.path.clone(),
                Op::Rename => match &e.new_path {
                    Some(p) => p.clone(),
                    None => continue,
                },
                _ => continue,
            };
            let (sum, skipped) = done
                .entry(path.clone())
                .or_insert_with(|| {
                    // Not through a symbolic link: one put there later names another file.
                    let Ok(meta) = std::fs::symlink_metadata(&path) else {
                        return (None, Some("gone at the end of the capture".into()));
                    };
                    if meta.file_type().is_symlink() {
                        let to = std::fs::read_link(&path)
                            .map(|t| t.display().to_string())
                            .unwrap_or_default();
                        return (None, Some(format!("a symbolic link (to {to}) at the end")));
                    }
                    if !meta.is_file() {
                        return (None, Some("not a regular file".into()));
                    }
                    if meta.len() > HASH_LIMIT {
                        return (None, Some(format!("larger than {} MiB", HASH_LIMIT >> 20)));
                    }
                    use std::os::unix::fs::OpenOptionsExt as _;
                    let nofollow = std::fs::OpenOptions::new()
                        .read(true)
                        .custom_flags(libc::O_NOFOLLOW)
                        .open(&path);
                    match nofollow {
                        Ok(mut f) => {
                            let mut h = sha2::Sha256::new();
                            match std::io::copy(&mut f, &mut h) {
                                Ok(_) => (Some(hex::encode(h.finalize())), None),
                                Err(e) => (None, Some(format!("unreadable: {e}"))),
                            }
                        }
                        Err(e) => (None, Some(format!("unreadable: {e}"))),
                    }
                })
                .clone();
            e.sha256 = sum;
            e.sha256_skipped = skipped;
        }
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
