//! What the traced processes read and changed: file events turned into report entries.
//!
//! Writes, creates, deletes, renames and credential reads are individual entries. Plain reads
//! of one inode by one process are one entry with a `count` (the kernel already counts repeats
//! without sending them; their number is added when the process exits or the capture ends).
use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::state::tool_calls::ToolCallRef;

use crate::record::{FileCount, FileHash, FileModified, Op};

/// Files larger than this are not hashed at the end (the entry says so).
pub const HASH_LIMIT: u64 = 64 << 20;

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
    #[serde(default)]
    pub verified: bool,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub unverified_reason: Option<String>,
    pub persistence: bool,
    #[serde(default = "one")]
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
    #[serde(
        skip_serializing_if = "Option::is_none",
        default,
        deserialize_with = "crate::record::maybe_error_name"
    )]
    pub result: Option<String>,
    /// A link created at `path`: what it points to (a symbolic link's target as given, or the
    /// file a hard link shares), and which kind.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub link_to: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub link: Option<String>,
    /// The tool call it is under (see `state::tool_calls`): a step's id, or null for the agent
    /// itself; not in the log's records (the session works it out).
    #[serde(default, skip_serializing_if = "ToolCallRef::is_unset")]
    pub tool_call: ToolCallRef,
    /// It happened (or, counted into one entry, happened again) after its step's own process
    /// had ended.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub after_step: bool,
    /// `--transcript`: an edit the agent made itself that its transcript declares, and the
    /// declaration's id there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declared: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declared_by: Option<String>,
    /// The file a credential or persistence rule named at start, when this entry reached its
    /// inode by another path (a hard link, a bind mount, a detached tree, a file handle).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub same_inode_as: Option<String>,
    /// chmod, mkdir: the mode asked for, in octal (`4755`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub mode: Option<String>,
    /// chown: the owner and group asked for (absent: left as they were).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub uid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub gid: Option<u32>,
    /// truncate: the length asked for.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub length: Option<u64>,
    /// setxattr: the attribute's name (never its value).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub xattr: Option<String>,
    /// Why it is an `escalation` finding (a setuid bit, file capabilities, a write-open of
    /// core_pattern, …), when it is one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub escalation: Option<String>,
    /// `io_uring`: a rename, delete or link submitted through io_uring, recorded at its
    /// submission with the names the kernel copied; its result is not seen (no `result`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub via: Option<String>,
    /// A rename, delete or link whose names the caller's memory changed during the call (a
    /// racing thread): the paths its names gave at the call's entry. `path` and `new_path`
    /// are what they gave at its exit; the kernel used one of the two. A `tamper` finding.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub raced: Option<RacedPaths>,
    /// An open for write (`write`, `create`): whether the process changed the file after
    /// this open (a write call wrote through a descriptor of it, or the kernel dirtied its
    /// data: a store into a mapping, an io_uring write) or by it (an O_TRUNC open of a regular
    /// file that was there). False: opened for write and no change seen in the capture; said
    /// only where writes dirty the inode opened (`record::from_kernel::writes_seen`), absent
    /// elsewhere. Written false at the open; a later `file_modified` record makes it true.
    /// Absent in older logs.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub modified: Option<bool>,
}

/// See [`FileEntry::raced`]: the entry's fields of the same names, as the call's entry gave
/// them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RacedPaths {
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub new_path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub link_to: Option<String>,
    /// A setxattr's attribute name at the call's entry.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub xattr: Option<String>,
}

fn one() -> u64 {
    1
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

/// The file entries of a session, made from `file` and `file_failed` records, with the counts
/// and hashes the end of the capture adds.
#[derive(Default)]
pub struct Files {
    pub entries: Vec<FileEntry>,
    /// Detailed plain reads: (process, dev, ino, path) → their entry. The path is part of
    /// it: a second path to one inode (a hard link, a bind mount) is an entry of its own.
    reads: HashMap<(u64, String, u64, String), u32>,
    /// Folded reads: (process, directory) → entry.
    folds: HashMap<(u64, String), u32>,
    detailed_reads: usize,
    /// Failed operations kept: (pid, path, op, error) → entry.
    failed: HashMap<(u32, String, Op, String), usize>,
    /// Entries by pid, of every process that had it.
    by_pid: HashMap<u32, Vec<u32>>,
    /// `file_hash` records: path → (sha256, why not).
    hashes: HashMap<String, (Option<String>, Option<String>)>,
}

/// What a `file` record did to the entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Added {
    /// A new entry.
    New(usize),
    /// A plain read of an inode the process read before: counted in its entry (such a
    /// record needs no line of its own; the `file_count` at the end has the total).
    Repeat(usize),
    /// Counted in its directory's folded entry.
    Folded(usize),
}

impl Added {
    pub fn index(self) -> usize {
        match self {
            Added::New(i) | Added::Repeat(i) | Added::Folded(i) => i,
        }
    }
}

impl Files {
    /// A `file` record of the process `process` (the session's number for it: the same
    /// across its execs, another for a reused pid).
    pub fn file(&mut self, process: u64, e: &FileEntry) -> Added {
        let plain_read = e.op == Op::Read && !e.credential && e.folded.is_none();
        let key = match (&e.dev, e.ino) {
            (Some(dev), Some(ino)) if plain_read => {
                Some((process, dev.clone(), ino, e.path.clone()))
            }
            _ => None,
        };
        if let Some(&i) = key.as_ref().and_then(|k| self.reads.get(k)) {
            self.entries[i as usize].count += e.count;
            return Added::Repeat(i as usize);
        }
        if plain_read && self.detailed_reads >= DETAILED_READS {
            return Added::Folded(self.fold(process, e));
        }
        self.detailed_reads += usize::from(plain_read);
        let i = self.push(e.clone());
        if let Some(k) = key {
            self.reads.insert(k, i as u32);
        }
        Added::New(i)
    }

    /// Counts a plain read in its process's entry for the file's directory.
    fn fold(&mut self, process: u64, entry: &FileEntry) -> usize {
        let dir = match entry.path.rfind('/') {
            Some(0) | None => "/".to_string(),
            Some(i) => format!("{}/", &entry.path[..i]),
        };
        let key = (process, dir);
        if let Some(&i) = self.folds.get(&key) {
            let e = &mut self.entries[i as usize];
            e.count += entry.count;
            e.folded = Some(e.folded.unwrap_or(0) + 1);
            return i as usize;
        }
        let mut folded = entry.clone();
        folded.path = key.1.clone();
        folded.ino = None;
        folded.folded = Some(1);
        let i = self.push(folded);
        self.folds.insert(key, i as u32);
        i
    }

    /// A failed operation, counted with its repeats (same process, path, operation and error).
    pub fn failed(&mut self, entry: &FileEntry) -> usize {
        let key = (
            entry.pid,
            entry.path.clone(),
            entry.op,
            entry.result.clone().unwrap_or_default(),
        );
        if let Some(&i) = self.failed.get(&key) {
            self.entries[i].count += entry.count;
            return i;
        }
        let i = self.push(entry.clone());
        self.failed.insert(key, i);
        i
    }

    /// A new entry: its index.
    fn push(&mut self, e: FileEntry) -> usize {
        let i = self.entries.len();
        // Entries are bounded by the fold (a few tens of thousands), far below u32::MAX.
        self.by_pid.entry(e.pid).or_default().push(i as u32);
        self.entries.push(e);
        i
    }

    /// The entries of every process that had this pid, oldest first.
    pub fn of_pid(&self, pid: u32) -> impl DoubleEndedIterator<Item = usize> + '_ {
        self.by_pid
            .get(&pid)
            .into_iter()
            .flatten()
            .map(|&i| i as usize)
    }

    /// A `file_count`: the entry's count with what the kernel counted (the newest entry of that
    /// process, operation, path and inode).
    pub fn count(&mut self, c: &FileCount) -> Option<usize> {
        let i = self
            .entries
            .iter()
            .rposition(|f| f.pid == c.pid && f.op == c.op && f.path == c.path && f.ino == c.ino)?;
        self.entries[i].count = c.count;
        Some(i)
    }

    /// The entry a `file_modified` record (or the kernel's record it comes from) is about: the
    /// newest open for write of that inode by that pid.
    pub fn opened_for_write(&self, pid: u32, dev: &str, ino: u64) -> Option<usize> {
        let dev = Some(dev);
        self.of_pid(pid).rev().find(|&i| {
            let f = &self.entries[i];
            f.modified.is_some() && f.ino == Some(ino) && f.dev.as_deref() == dev
        })
    }

    /// A `file_modified`: its entry was written through.
    pub fn modified(&mut self, m: &FileModified) -> Option<usize> {
        let i = self.opened_for_write(m.pid, &m.dev, m.ino)?;
        self.entries[i].modified = Some(true);
        Some(i)
    }

    /// A `file_hash`: what a written path held at the end.
    pub fn hash(&mut self, h: &FileHash) {
        self.hashes
            .insert(h.path.clone(), (h.sha256.clone(), h.sha256_skipped.clone()));
    }

    /// The path an entry changed, whose content is hashed at the end: a write's or create's
    /// path, a rename's new path (None for reads, deletes and failures).
    pub fn written_path(e: &FileEntry) -> Option<&str> {
        if e.result.is_some() {
            return None;
        }
        match e.op {
            Op::Write | Op::Create | Op::Truncate => Some(&e.path),
            Op::Rename => e.new_path.as_deref(),
            Op::Read
            | Op::Delete
            | Op::Path
            | Op::Chmod
            | Op::Chown
            | Op::Mkdir
            | Op::Setxattr
            | Op::Utime => None,
        }
    }

    /// Every written path once, in the order of their first entry.
    pub fn written_paths(&self) -> Vec<String> {
        let mut seen = std::collections::HashSet::new();
        self.entries
            .iter()
            .filter_map(Files::written_path)
            .filter(|p| seen.insert(*p))
            .map(str::to_string)
            .collect()
    }

    /// The entries as the report lists them: with the hashes of what they wrote.
    pub fn report_entries(&self) -> Vec<FileEntry> {
        let mut out = self.entries.clone();
        for f in &mut out {
            if let Some((sum, skipped)) = Files::written_path(f).and_then(|p| self.hashes.get(p)) {
                (f.sha256, f.sha256_skipped) = (sum.clone(), skipped.clone());
            }
        }
        out
    }
}

/// Filesystems whose files are made up by the kernel or another process as they are read
/// (proc, sysfs, tracefs, debugfs, FUSE, …): a read can block for ever or never end, and the
/// content is no file the agent wrote. Their files are never hashed.
const PSEUDO_FS: &[(i64, &str)] = &[
    (0x9fa0, "proc"),
    (0x6265_6572, "sysfs"),
    (0x7472_6163, "tracefs"),
    (0x6462_6720, "debugfs"),
    (0x6573_5546, "fuse"),
    (0x6273_6d6d, "bpf"),
    (0x2709_0710, "configfs"),
    (0x7363_6673, "securityfs"),
    (0x6366_5f6f, "cgroup"),
    (0x6367_7270, "cgroup2"),
];

/// The sha256 of a file's content as it is now, or why there is none. The file is opened
/// without following a symbolic link and without waiting (O_NONBLOCK: a FIFO or a device put
/// there later cannot hang the end of the capture); what was opened is then checked on its
/// descriptor (a regular file, not on a pseudo filesystem), and at most `HASH_LIMIT` bytes are
/// read.
pub fn hash_now(path: &str) -> (Option<String>, Option<String>) {
    use sha2::Digest;
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return (None, Some("gone at the end of the capture".into()));
    };
    if meta.file_type().is_symlink() {
        let to = std::fs::read_link(path)
            .map(|t| t.display().to_string())
            .unwrap_or_default();
        return (None, Some(format!("a symbolic link (to {to}) at the end")));
    }
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path);
    let f = match opened {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return (None, Some("a symbolic link at the end".into()));
        }
        Err(e) => return (None, Some(format!("unreadable: {e}"))),
    };
    // What was opened, not what the name showed a moment before.
    let meta = match f.metadata() {
        Ok(m) => m,
        Err(e) => return (None, Some(format!("unreadable: {e}"))),
    };
    if !meta.is_file() {
        return (None, Some("not a regular file".into()));
    }
    if let Ok(fs) = nix::sys::statfs::fstatfs(&f) {
        let magic = fs.filesystem_type().0;
        if let Some((_, name)) = PSEUDO_FS.iter().find(|(m, _)| *m == magic) {
            return (None, Some(format!("on {name}, a pseudo filesystem")));
        }
    }
    if meta.len() > HASH_LIMIT {
        return (None, Some(format!("larger than {} MiB", HASH_LIMIT >> 20)));
    }
    let mut h = sha2::Sha256::new();
    match std::io::copy(&mut f.take(HASH_LIMIT + 1), &mut h) {
        Ok(n) if n > HASH_LIMIT => (None, Some(format!("larger than {} MiB", HASH_LIMIT >> 20))),
        Ok(_) => (Some(hex::encode(h.finalize())), None),
        Err(e) => (None, Some(format!("unreadable: {e}"))),
    }
}

/// Up to `limit` bytes of a file as it is now (the last `limit` when `tail`), never through a
/// symbolic link; or why not.
pub fn read_now(path: &str, limit: u64, tail: bool) -> Result<Vec<u8>, String> {
    use std::io::{Read as _, Seek as _};
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => "gone at the end of the capture".to_string(),
            _ => format!("unreadable: {e}"),
        })?;
    let meta = f.metadata().map_err(|e| format!("unreadable: {e}"))?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if tail && meta.len() > limit {
        f.seek(std::io::SeekFrom::Start(meta.len() - limit))
            .map_err(|e| format!("unreadable: {e}"))?;
    }
    let mut out = Vec::new();
    f.take(limit)
        .read_to_end(&mut out)
        .map_err(|e| format!("unreadable: {e}"))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashing_never_waits_and_skips_what_is_not_a_plain_file() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        // A FIFO: refused at once (a blocking open would wait for a writer for ever).
        let (sum, why) = hash_now(fifo.to_str().unwrap());
        assert_eq!((sum, why.as_deref()), (None, Some("not a regular file")));
        // A regular-looking file the kernel makes up as it is read.
        let (sum, why) = hash_now("/proc/self/status");
        assert!(sum.is_none(), "a procfs file was hashed");
        assert!(why.unwrap().contains("proc"));
        let plain = dir.path().join("plain");
        std::fs::write(&plain, b"abc").unwrap();
        let (sum, _) = hash_now(plain.to_str().unwrap());
        assert_eq!(
            sum.as_deref(),
            Some("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        );
    }

    /// A `file_modified` makes the newest open for write of its process and inode modified,
    /// not an older one, a read, or another process's.
    #[test]
    fn a_file_modified_marks_the_newest_open_for_write_of_its_inode() {
        let entry = |pid: u32, op: Op, modified: Option<bool>| {
            let mut e: FileEntry = serde_json::from_value(serde_json::json!({
                "pid": pid, "op": "read", "path": "/w/f", "dev": "254:0", "ino": 7,
                "credential": false, "persistence": false,
            }))
            .unwrap();
            (e.op, e.modified) = (op, modified);
            e
        };
        let mut files = Files::default();
        files.file(1, &entry(10, Op::Write, Some(false)));
        files.file(1, &entry(10, Op::Write, Some(false)));
        files.file(1, &entry(10, Op::Read, None));
        files.file(2, &entry(11, Op::Write, Some(false)));
        let m = FileModified {
            pid: 10,
            path: Some("/w/f".into()),
            dev: "254:0".into(),
            ino: 7,
        };
        assert_eq!(files.modified(&m), Some(1));
        let got: Vec<_> = files.entries.iter().map(|e| e.modified).collect();
        assert_eq!(got, [Some(false), Some(true), None, Some(false)]);
        // Another inode, or a process with no open for write of it: no entry.
        assert_eq!(
            files.modified(&FileModified {
                ino: 8,
                ..m.clone()
            }),
            None
        );
        assert_eq!(files.modified(&FileModified { pid: 12, ..m }), None);
    }

    #[test]
    fn open_flags_read_like_c() {
        assert_eq!(open_flags(0), "O_RDONLY");
        assert_eq!(open_flags(0o1 | 0o100 | 0o1000), "O_WRONLY|O_CREAT|O_TRUNC");
        assert_eq!(open_flags(0o2 | 0o2000000), "O_RDWR|O_CLOEXEC");
        assert_eq!(open_flags(0o20200000 | 0o2), "O_RDWR|O_TMPFILE");
    }

    #[test]
    fn entries_are_found_by_pid_whichever_way_they_were_made() {
        let entry = |pid: u32, path: &str, result: Option<&str>| -> FileEntry {
            serde_json::from_value(serde_json::json!({"pid": pid, "op": "read", "path": path,
                "dev": "8:1", "ino": 5, "credential": false, "persistence": false,
                "result": result}))
            .unwrap()
        };
        let mut files = Files::default();
        files.file(1, &entry(7, "/a", None));
        files.file(2, &entry(8, "/a", None));
        files.failed(&entry(7, "/b", Some("EACCES")));
        // The same pid, another process (pid reuse).
        files.file(3, &entry(7, "/a", None));
        assert_eq!(files.of_pid(7).collect::<Vec<_>>(), vec![0, 2, 3]);
        assert_eq!(files.of_pid(8).collect::<Vec<_>>(), vec![1]);
        assert_eq!(files.of_pid(9).count(), 0);
    }

    #[test]
    fn devices_split_like_the_kernel() {
        assert_eq!(dev_string((254 << 20) | 3), "254:3");
        assert_eq!(dev_string(6), "0:6");
    }
}
