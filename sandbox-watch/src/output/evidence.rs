//! The evidence log: one JSON object a line (JSONL), each line chained to the one before it by a
//! SHA-256 hash, so that a changed, removed, inserted or reordered record is found by `verify`.
//!
//! # Format (users' scripts depend on it)
//!
//! Every line is one JSON object ending in `\n` with
//!
//! - `seq`: the record's position, 0, 1, 2, …
//! - `prev`: the previous line's `hash`; 64 zeros ([`ZERO_HASH`]) on line 0
//! - `hash`: SHA-256, lower-case hex, of the line's canonical form (below)
//! - `at`: when it happened, RFC 3339 in UTC with nine fractional digits,
//!   e.g. `2026-11-30T11:04:09.123456789Z`
//! - `kind`: what the record is (`"start"`, `"exec"`, …)
//! - the kind's own fields.
//!
//! The last line, written when the capture ends, has `kind: "end"`. The writer puts `seq`,
//! `prev`, `hash`, `at` and `kind` first and the other keys after them in sorted order, but a
//! reader must not depend on the order of keys in a line: only the canonical form is hashed.
//!
//! # Canonical form
//!
//! To recompute `hash` of a line:
//!
//! 1. parse the line as a JSON object and remove its `hash` key;
//! 2. serialise what is left as JSON with the keys of every object, at every depth, sorted by
//!    their UTF-8 bytes (plain byte order, not by UTF-16 units or locale), no whitespace
//!    between tokens, strings escaped as serde_json escapes them (`"` `\` and the control
//!    characters U+0000–U+001F only: `\"` `\\` `\b` `\f` `\n` `\r` `\t`, the rest as `\u00XX`
//!    with lower-case hex; everything else, `/` and non-ASCII included, as raw UTF-8), and
//!    numbers as serde_json prints them (integers in plain decimal);
//! 3. hash those bytes with SHA-256 and write the digest as 64 lower-case hex digits.
//!
//! In Python that is
//! `hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()).hexdigest()`
//! (Python sorts keys by code point, which is the same order as by UTF-8 bytes; JavaScript's
//! default sort compares UTF-16 units, which differs only for keys with characters above
//! U+FFFF). Integers, strings, booleans, null, arrays and objects come out the same in any
//! language that follows the rules above. Floating-point numbers do not: serde_json prints
//! `0.000025` where Python prints `2.5e-05` (the two agree from 1e-4 up to 1e16), so a field
//! meant to be re-hashed elsewhere is better an integer (nanoseconds, say) than a float. A
//! verifier in a language whose JSON numbers are doubles (JavaScript) must parse integers
//! above 2^53 exactly.
//!
//! # What the chain proves, and what not
//!
//! `verify` proves that the file is one unbroken chain from a record 0 to its last line. It
//! cannot tell a log that was rewritten whole, every hash recomputed, from the original: for
//! that keep the last record's hash ([`LogWriter::head`], printed when the capture ends)
//! somewhere else and compare it, or sign the log (`--sign-key`, see [`sign`](super::sign)).
//! Cutting lines off the end of a log (the `end` record with them) leaves an intact chain:
//! that is reported as unended, not as tampered.

use std::fmt::Write as _;
use std::fs::{File, OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::sign::{self, LogKey};
use super::watch::{Change, Watched};

/// The `prev` of record 0.
pub const ZERO_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The keys every record has, which a kind's own fields must not use.
pub const RESERVED_KEYS: [&str; 5] = ["seq", "prev", "hash", "at", "kind"];

/// The kind of the last record of a finished capture.
pub const END_KIND: &str = "end";

/// `append` writes the buffered lines itself once this many bytes are waiting.
const PENDING_LIMIT: usize = 1 << 20;

/// A new session id for a start record: 128 random bits as 32 lower-case hex digits.
pub fn new_session_id() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the kernel's random numbers (getrandom)");
    hex::encode(bytes)
}

/// `verify` reads no line longer than this (the writer never writes one near it).
pub const MAX_LINE: usize = 64 << 20;

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("--log {path}: already exists; pass --force to overwrite it")]
    Exists { path: String },
    #[error("--log {path}: is a symbolic link; refusing to write the log through it")]
    Symlink { path: String },
    #[error("--log {path}: {error}")]
    Io { path: String, error: io::Error },
}

/// Writes the evidence log. Records are buffered in memory by [`LogWriter::append`] and written
/// as whole lines by [`LogWriter::flush`]; dropping the writer flushes what is left, as well as
/// it can.
#[derive(Debug)]
pub struct LogWriter {
    file: File,
    path: PathBuf,
    /// The seq of the next record, which is also the number of records appended.
    seq: u64,
    /// The hash of the last record appended.
    prev: String,
    /// Whole lines appended but not yet written.
    pending: Vec<u8>,
    /// Bytes written to the file (what its size must be).
    written: u64,
    /// The file and its path, watched for a delete, rename, replace or truncate.
    watched: Watched,
    /// `--sign-key`: signs the start, checkpoint and end records.
    key: Option<LogKey>,
}

impl LogWriter {
    /// The open file's metadata (its inode, for the kernel's list of the monitor's files).
    pub fn metadata(&self) -> std::io::Result<std::fs::Metadata> {
        self.file.metadata()
    }

    /// Creates the file with mode 0600, never following a symlink at `path` (O_NOFOLLOW; a
    /// symlink is [`LogError::Symlink`]), refusing an existing file (O_EXCL) unless `force`, in
    /// which case an existing regular file is truncated (still never through a symlink) and
    /// its mode set to 0600. Anything at `path` that is not a regular file (a directory, a
    /// FIFO, a device) is refused even with `force`. The file is opened O_APPEND.
    pub fn create(path: &Path, force: bool) -> Result<LogWriter, LogError> {
        let shown = path.display().to_string();
        let io_err = |error: io::Error| LogError::Io {
            path: shown.clone(),
            error,
        };
        let mut opts = OpenOptions::new();
        // O_NONBLOCK keeps an open of a FIFO planted at `path` from waiting for a reader; it
        // changes nothing for a regular file.
        opts.append(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK);
        if force {
            opts.create(true);
        } else {
            opts.create_new(true);
        }
        let file = match opts.open(path) {
            Ok(f) => f,
            Err(e) => {
                let is_symlink = path
                    .symlink_metadata()
                    .map(|m| m.file_type().is_symlink())
                    .unwrap_or(false);
                return Err(match e.raw_os_error() {
                    // O_CREAT|O_EXCL fails with EEXIST on a symlink, dangling or not;
                    // O_NOFOLLOW fails with ELOOP on one.
                    Some(libc::EEXIST) | Some(libc::ELOOP) if is_symlink => {
                        LogError::Symlink { path: shown }
                    }
                    Some(libc::EEXIST) => LogError::Exists { path: shown },
                    _ => io_err(e),
                });
            }
        };
        let meta = file.metadata().map_err(io_err)?;
        if !meta.file_type().is_file() {
            return Err(io_err(io::Error::other(
                "is not a regular file; refusing to write the log there",
            )));
        }
        // With --force: a hard link planted there would have the log truncate another file.
        if meta.nlink() > 1 {
            return Err(io_err(io::Error::other(format!(
                "has {} names (a hard link to another file?); refusing to truncate it",
                meta.nlink()
            ))));
        }
        if meta.len() > 0 {
            file.set_len(0).map_err(io_err)?;
        }
        // Exactly 0600 whatever the umask, and for a file that existed before.
        if meta.permissions().mode() & 0o7777 != 0o600 {
            file.set_permissions(Permissions::from_mode(0o600))
                .map_err(io_err)?;
        }
        let watched = Watched::new("evidence log", path, &file).map_err(io_err)?;
        Ok(LogWriter {
            file,
            path: path.to_path_buf(),
            seq: 0,
            prev: ZERO_HASH.to_string(),
            pending: Vec::new(),
            written: 0,
            watched,
            key: None,
        })
    }

    /// Adds one record: builds {seq, prev, at, kind, ..fields, hash}; `fields` must not contain
    /// seq/prev/hash/at/kind (checked by a debug assertion; in a release build such a field is
    /// dropped). `at` is written RFC 3339 in UTC with nine fractional digits. Returns the
    /// record's hash.
    ///
    /// The line is buffered in memory, not written yet, unless more than 1 MiB is waiting: then
    /// everything buffered is written, as by [`LogWriter::flush`]. An `Err` is that write
    /// failing; the record stays in the chain and in the buffer, and a later flush retries.
    pub fn append(
        &mut self,
        at: SystemTime,
        kind: &str,
        fields: Map<String, Value>,
    ) -> Result<String, LogError> {
        debug_assert!(
            RESERVED_KEYS.iter().all(|k| !fields.contains_key(*k)),
            "a {kind:?} record's fields use a reserved key (one of {RESERVED_KEYS:?})"
        );
        let mut obj = fields;
        for k in RESERVED_KEYS {
            obj.remove(k);
        }
        let at = crate::time::rfc3339_nanos(at);
        obj.insert("seq".into(), Value::from(self.seq));
        obj.insert("prev".into(), Value::from(self.prev.as_str()));
        obj.insert("at".into(), Value::from(at.as_str()));
        obj.insert("kind".into(), Value::from(kind));
        if let Some(key) = &self.key
            && sign::signs(kind)
        {
            key.sign(&mut obj);
        }
        let hash = record_hash(&obj);
        // The kind's own fields (a signature's among them), sorted, after the reserved keys.
        let mut tail = Vec::with_capacity(256);
        let mut own: Vec<(&String, &Value)> = obj
            .iter()
            .filter(|(k, _)| !RESERVED_KEYS.contains(&k.as_str()))
            .collect();
        own.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        for (k, v) in own {
            tail.push(b',');
            write_json_string(k, &mut tail);
            tail.push(b':');
            write_canonical(v, &mut tail);
        }

        let line = &mut self.pending;
        let start = line.len();
        let _ = write!(
            ByteSink(line),
            "{{\"seq\":{},\"prev\":\"{}\",\"hash\":\"{}\",\"at\":",
            self.seq,
            self.prev,
            hash
        );
        write_json_string(&at, line);
        line.extend_from_slice(b",\"kind\":");
        write_json_string(kind, line);
        line.extend_from_slice(&tail);
        line.extend_from_slice(b"}\n");
        debug_assert!(!line[start..line.len() - 1].contains(&b'\n'));

        self.seq += 1;
        self.prev.clone_from(&hash);
        if self.pending.len() >= PENDING_LIMIT {
            self.flush()?;
        }
        Ok(hash)
    }

    /// Writes every buffered whole line, normally with a single write(2) on the O_APPEND file.
    /// Callers call this at least once a second. After a short write or an error, what was not
    /// written stays buffered (nothing is written twice) and the next flush goes on from there.
    pub fn flush(&mut self) -> Result<(), LogError> {
        while !self.pending.is_empty() {
            match self.file.write(&self.pending) {
                Ok(0) => {
                    return Err(self.io_err(io::Error::new(
                        io::ErrorKind::WriteZero,
                        "the log file took no more bytes",
                    )));
                }
                Ok(n) => {
                    self.pending.drain(..n);
                    self.written += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.io_err(e)),
            }
        }
        Ok(())
    }

    /// Flushes, then asks the kernel to put the file on disk (fdatasync).
    pub fn sync(&mut self) -> Result<(), LogError> {
        self.flush()?;
        self.file.sync_data().map_err(|e| self.io_err(e))
    }

    /// Appends the `end` record with `fields`, writes everything and syncs the file. Returns
    /// the `end` record's hash, which is then [`LogWriter::head`].
    pub fn finish(
        &mut self,
        at: SystemTime,
        fields: Map<String, Value>,
    ) -> Result<String, LogError> {
        let hash = self.append(at, END_KIND, fields)?;
        self.sync()?;
        Ok(hash)
    }

    /// Adds one record (see [`LogWriter::append`]); its `kind` is the record's.
    pub fn write(
        &mut self,
        at: SystemTime,
        record: &crate::record::Record,
    ) -> Result<String, LogError> {
        self.append(at, record.kind(), record.fields())
    }

    /// Adds the last record, writes everything and syncs the file (see [`LogWriter::finish`]).
    pub fn finish_record(
        &mut self,
        at: SystemTime,
        record: &crate::record::Record,
    ) -> Result<String, LogError> {
        let hash = self.write(at, record)?;
        self.sync()?;
        Ok(hash)
    }

    /// Signs the start, checkpoint and end records from now on (`--sign-key`).
    pub fn set_key(&mut self, key: LogKey) {
        self.key = Some(key);
    }

    /// The signing key's public half (hex), when the log is signed.
    pub fn signed_by(&self) -> Option<String> {
        self.key.as_ref().map(LogKey::public_hex)
    }

    /// With a signing key, appends a signed `checkpoint` record (it vouches for every record
    /// before it) and writes everything; without one, does nothing.
    pub fn checkpoint(&mut self, at: SystemTime) -> Result<(), LogError> {
        if self.key.is_some() {
            self.append(at, sign::CHECKPOINT_KIND, Map::new())?;
            self.flush()?;
        }
        Ok(())
    }

    /// Lines appended so far (buffered or written).
    pub fn records(&self) -> u64 {
        self.seq
    }

    /// The hash of the last line appended ([`ZERO_HASH`] if none).
    pub fn head(&self) -> &str {
        &self.prev
    }

    /// Where the log is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What was done to the file or its path since the last call (see [`Watched::check`]).
    pub fn changes(&mut self) -> Vec<Change> {
        self.watched.check(&self.file, self.written)
    }

    /// The log's path as the kernel's records name it.
    pub fn resolved_path(&self) -> &Path {
        self.watched.resolved()
    }

    /// A second, read-only handle on the log file itself (not on whatever is at its path
    /// later), for a reader that follows it as it is written (the OTLP exporter).
    pub fn reader(&self) -> io::Result<File> {
        use std::os::fd::AsRawFd as _;
        File::open(format!("/proc/self/fd/{}", self.file.as_raw_fd()))
    }

    fn io_err(&self, error: io::Error) -> LogError {
        LogError::Io {
            path: self.path.display().to_string(),
            error,
        }
    }
}

impl Drop for LogWriter {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

/// Lets `write!` format straight into a byte buffer.
struct ByteSink<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for ByteSink<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// The canonical form of a record (see the module documentation): JSON with the keys of every
/// object sorted by their UTF-8 bytes, no whitespace, serde_json's escaping and numbers.
///
/// serde_json's `Map` is a `BTreeMap` unless its `preserve_order` feature is on, and then
/// `serde_json::to_vec` gives the same bytes; this function sorts by itself so that a feature
/// turned on by some other crate in the build can never change a hash.
pub fn canonical_bytes(obj: &Map<String, Value>) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    write_object(obj, &mut out);
    out
}

/// SHA-256, lower-case hex, of [`canonical_bytes`] of a record without its `hash`.
pub fn record_hash(obj_without_hash: &Map<String, Value>) -> String {
    debug_assert!(!obj_without_hash.contains_key("hash"));
    hex::encode(Sha256::digest(canonical_bytes(obj_without_hash)))
}

fn write_canonical(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Object(m) => write_object(m, out),
        Value::Array(a) => {
            out.push(b'[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(x, out);
            }
            out.push(b']');
        }
        scalar => serde_json::to_writer(&mut *out, scalar)
            .expect("serialising a JSON scalar into memory cannot fail"),
    }
}

fn write_object(m: &Map<String, Value>, out: &mut Vec<u8>) {
    let mut entries: Vec<(&String, &Value)> = m.iter().collect();
    entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    out.push(b'{');
    for (i, (k, v)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_json_string(k, out);
        out.push(b':');
        write_canonical(v, out);
    }
    out.push(b'}');
}

fn write_json_string(s: &str, out: &mut Vec<u8>) {
    serde_json::to_writer(&mut *out, s).expect("serialising a string into memory cannot fail");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::verify::{Verdict, verify};
    use serde_json::json;
    use std::time::{Duration, UNIX_EPOCH};

    fn fields(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => panic!("not an object"),
        }
    }

    fn at(secs: u64, nanos: u32) -> SystemTime {
        UNIX_EPOCH + Duration::new(secs, nanos)
    }

    fn lines(path: &Path) -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn hash_is_recomputable_from_the_documented_recipe() {
        // The recipe by hand, for one record: sorted keys, no spaces, no hash.
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log.jsonl");
        let mut w = LogWriter::create(&p, false).unwrap();
        let h = w
            .append(
                at(0, 5),
                "start",
                fields(json!({"b": {"y": 1, "x": "é\n"}, "a": -2})),
            )
            .unwrap();
        drop(w);
        let expected = "{\"a\":-2,\"at\":\"1970-01-01T00:00:00.000000005Z\",\
                        \"b\":{\"x\":\"é\\n\",\"y\":1},\"kind\":\"start\",\"prev\":\""
            .to_string()
            + ZERO_HASH
            + "\",\"seq\":0}";
        assert_eq!(h, hex::encode(Sha256::digest(expected.as_bytes())));
        assert_eq!(lines(&p).len(), 1, "dropping the writer flushed the line");
    }

    #[test]
    fn file_mode_is_0600() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log.jsonl");
        drop(LogWriter::create(&p, false).unwrap());
        assert_eq!(std::fs::metadata(&p).unwrap().mode() & 0o7777, 0o600);

        // A file that existed with other modes gets 0600 when forced.
        std::fs::set_permissions(&p, Permissions::from_mode(0o644)).unwrap();
        drop(LogWriter::create(&p, true).unwrap());
        assert_eq!(std::fs::metadata(&p).unwrap().mode() & 0o7777, 0o600);
    }

    #[test]
    fn a_symlink_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::write(&target, b"precious\n").unwrap();
        let link = dir.path().join("log.jsonl");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        for force in [false, true] {
            let e = LogWriter::create(&link, force).unwrap_err();
            assert!(
                matches!(e, LogError::Symlink { .. }),
                "force {force}: {e:?}"
            );
            assert!(e.to_string().contains("symbolic link"));
        }
        assert_eq!(std::fs::read(&target).unwrap(), b"precious\n");
        // A dangling one too.
        let dangling = dir.path().join("dangling");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
        for force in [false, true] {
            let e = LogWriter::create(&dangling, force).unwrap_err();
            assert!(
                matches!(e, LogError::Symlink { .. }),
                "force {force}: {e:?}"
            );
        }
        assert!(!dir.path().join("nowhere").exists());
        // A hard link to another file: refused even with force, the other file untouched.
        let hard = dir.path().join("hard.jsonl");
        std::fs::hard_link(&target, &hard).unwrap();
        let e = LogWriter::create(&hard, true).unwrap_err();
        assert!(e.to_string().contains("hard link"), "{e}");
        assert_eq!(std::fs::read(&target).unwrap(), b"precious\n");
    }

    #[test]
    fn an_existing_file_needs_force_and_is_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log.jsonl");
        std::fs::write(&p, b"old contents that are long\n").unwrap();
        let e = LogWriter::create(&p, false).unwrap_err();
        assert!(matches!(e, LogError::Exists { .. }), "{e:?}");
        assert!(e.to_string().contains("--force"));
        assert_eq!(std::fs::read(&p).unwrap(), b"old contents that are long\n");

        let mut w = LogWriter::create(&p, true).unwrap();
        w.finish(at(1, 0), Map::new()).unwrap();
        drop(w);
        assert_eq!(verify(&p).unwrap(), Verdict::Intact { records: 1 });
        assert_eq!(lines(&p).len(), 1);

        // Not a regular file: refused even with force.
        let e = LogWriter::create(dir.path(), true).unwrap_err();
        assert!(matches!(e, LogError::Io { .. }), "{e:?}");
    }

    #[test]
    fn append_buffers_until_flush() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log.jsonl");
        let mut w = LogWriter::create(&p, false).unwrap();
        assert_eq!(w.head(), ZERO_HASH);
        let h = w.append(at(1, 0), "x", Map::new()).unwrap();
        assert_eq!(w.head(), h);
        assert_eq!(w.records(), 1);
        assert_eq!(std::fs::read(&p).unwrap(), b"");
        w.flush().unwrap();
        assert_eq!(lines(&p).len(), 1);
        w.flush().unwrap();
        assert_eq!(lines(&p).len(), 1, "flushing twice writes nothing twice");
    }

    #[test]
    fn canonical_bytes_sorted_at_depth() {
        let v = json!({
            "b": 1,
            "a": {"z": [ {"d": 1, "c": 2} ], "y": "é/\"\u{1}"},
            "B": null,
            "é": true,
            "aa": 1.5,
        });
        let m = fields(v.clone());
        let got = String::from_utf8(canonical_bytes(&m)).unwrap();
        assert_eq!(
            got,
            "{\"B\":null,\"a\":{\"y\":\"é/\\\"\\u0001\",\"z\":[{\"c\":2,\"d\":1}]},\"aa\":1.5,\"b\":1,\"é\":true}"
        );
        // serde_json's Map is a BTreeMap here, so its own output is the same bytes.
        assert_eq!(serde_json::to_string(&v).unwrap(), got);
        // Insertion order does not matter.
        let mut m2 = Map::new();
        for k in ["é", "aa", "B", "a", "b"] {
            m2.insert(k.into(), m[k].clone());
        }
        assert_eq!(canonical_bytes(&m2), canonical_bytes(&m));
    }
}
