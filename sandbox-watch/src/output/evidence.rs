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
//! somewhere else and compare it. Cutting lines off the end of a log (the `end` record with
//! them) leaves an intact chain: that is reported as unended, not as tampered.

use std::fmt::Write as _;
use std::fs::{File, OpenOptions, Permissions};
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// The `prev` of record 0.
pub const ZERO_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The keys every record has, which a kind's own fields must not use.
pub const RESERVED_KEYS: [&str; 5] = ["seq", "prev", "hash", "at", "kind"];

/// The kind of the last record of a finished capture.
pub const END_KIND: &str = "end";

/// `append` writes the buffered lines itself once this many bytes are waiting.
const PENDING_LIMIT: usize = 1 << 20;

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
}

impl LogWriter {
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
        if meta.len() > 0 {
            file.set_len(0).map_err(io_err)?;
        }
        // Exactly 0600 whatever the umask, and for a file that existed before.
        if meta.permissions().mode() & 0o7777 != 0o600 {
            file.set_permissions(Permissions::from_mode(0o600))
                .map_err(io_err)?;
        }
        Ok(LogWriter {
            file,
            path: path.to_path_buf(),
            seq: 0,
            prev: ZERO_HASH.to_string(),
            pending: Vec::new(),
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
        // The kind's own fields, sorted, before the reserved keys join them.
        let mut tail = Vec::with_capacity(256);
        let mut own: Vec<(&String, &Value)> = obj.iter().collect();
        own.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        for (k, v) in own {
            tail.push(b',');
            write_json_string(k, &mut tail);
            tail.push(b':');
            write_canonical(v, &mut tail);
        }
        let at = rfc3339_nanos(at);
        obj.insert("seq".into(), Value::from(self.seq));
        obj.insert("prev".into(), Value::from(self.prev.as_str()));
        obj.insert("at".into(), Value::from(at.as_str()));
        obj.insert("kind".into(), Value::from(kind));
        let hash = record_hash(&obj);

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

/// `t` as RFC 3339 in UTC with nine fractional digits: `2026-11-30T11:04:09.123456789Z`.
pub fn rfc3339_nanos(t: SystemTime) -> String {
    let (secs, nanos): (i64, u32) = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (
            i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            d.subsec_nanos(),
        ),
        Err(e) => {
            let d = e.duration();
            let mut s = -i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
            let mut n = d.subsec_nanos();
            if n > 0 {
                s -= 1;
                n = 1_000_000_000 - n;
            }
            (s, n)
        }
    };
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{nanos:09}Z",
        sod / 3600,
        sod % 3600 / 60,
        sod % 60
    )
}

/// Parses what [`rfc3339_nanos`] writes (`YYYY-MM-DDTHH:MM:SS[.fraction]Z`) back to Unix
/// nanoseconds; None for anything else.
pub fn parse_rfc3339_nanos(s: &str) -> Option<i128> {
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let rest = s.get(19..)?.strip_suffix('Z')?;
    let nanos: i64 = match rest.strip_prefix('.') {
        Some(frac)
            if !frac.is_empty() && frac.len() <= 9 && frac.bytes().all(|c| c.is_ascii_digit()) =>
        {
            frac.parse::<i64>().ok()? * 10i64.pow(9 - frac.len() as u32)
        }
        Some(_) => return None,
        None if rest.is_empty() => 0,
        None => return None,
    };
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    // days_from_civil (Howard Hinnant), the inverse of civil_from_days.
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec;
    Some(secs as i128 * 1_000_000_000 + nanos as i128)
}

/// The proleptic Gregorian (year, month, day) of a count of days since 1970-01-01
/// (Howard Hinnant's civil_from_days).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365], from March 1st
    let mp = (5 * doy + 2) / 153; // [0, 11], March = 0
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m as u32, d as u32)
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

/// What `verify` found.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    /// exit 0: chain intact and the last record is kind "end"
    Intact { records: u64 },
    /// exit 5: chain intact but no `end` record (the monitor was killed); `torn` says the file
    /// ended in a partial line (a torn last line is reported, not counted as tampering)
    Unended { records: u64, torn: bool },
    /// exit 1: a record was changed, removed, inserted or reordered; `seq` is the first bad
    /// line's position (the seq it should have had), `reason` a sentence
    Tampered { seq: u64, reason: String },
    /// exit 1: empty file, or not a log at all (first line is not a JSON object with
    /// seq/prev/hash)
    NotALog { reason: String },
}

impl Verdict {
    /// 0 intact, 5 intact but unended, 1 tampered or not a log.
    pub fn exit_code(&self) -> i32 {
        match self {
            Verdict::Intact { .. } => 0,
            Verdict::Unended { .. } => 5,
            Verdict::Tampered { .. } | Verdict::NotALog { .. } => 1,
        }
    }

    /// One or two sentences a person reads.
    pub fn message(&self, path: &str) -> String {
        match self {
            Verdict::Intact { records } => format!(
                "{path}: intact: {records} {}, hash chain unbroken, ending with the end record.",
                plural(*records, "record", "records")
            ),
            Verdict::Unended { records, torn } => {
                let mut s = format!(
                    "{path}: unended: the hash chain of {records} {} is unbroken but there is no \
                     end record: the capture did not finish (the monitor was killed, or is \
                     still running), or records were cut from the end, which the chain cannot \
                     show.",
                    plural(*records, "record", "records")
                );
                if *torn {
                    s.push_str(" The last line was cut off part way through and is not counted.");
                }
                s
            }
            Verdict::Tampered { seq, reason } => {
                format!("{path}: TAMPERED at record {seq}: {reason}")
            }
            Verdict::NotALog { reason } => format!("{path}: not an evidence log: {reason}"),
        }
    }
}

fn plural<'a>(n: u64, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 { one } else { many }
}

/// Verifies the log at `path`, reading it line by line in constant memory.
pub fn verify(path: &Path) -> io::Result<Verdict> {
    let f = File::open(path)?;
    verify_reader(BufReader::with_capacity(64 * 1024, f))
}

/// Verifies a log read from `r`, line by line. An `Err` is only a read error.
pub fn verify_reader(mut r: impl BufRead) -> io::Result<Verdict> {
    let mut buf = Vec::new();
    let mut n: u64 = 0;
    let mut prev = ZERO_HASH.to_string();
    let mut ended = false;
    loop {
        buf.clear();
        let newline = match read_line_limited(&mut r, &mut buf, MAX_LINE)? {
            LineRead::Eof => break,
            LineRead::Line { newline } => newline,
            LineRead::TooLong => {
                let reason = format!("line {} is longer than {} MiB", n + 1, MAX_LINE >> 20);
                return Ok(bad_line(n, reason));
            }
        };
        if ended {
            return Ok(Verdict::Tampered {
                seq: n,
                reason: format!(
                    "line {} follows the end record (record {}); nothing is written after it.",
                    n + 1,
                    n - 1
                ),
            });
        }
        match check_line(&buf, n, &prev) {
            Ok(ok) => {
                prev = ok.hash;
                ended = ok.is_end;
                n += 1;
            }
            Err(Bad::Unreadable(reason)) => {
                // A last line without its newline was being written when the writer stopped.
                // On line 0 only something that starts the way the writer starts a log counts.
                if !newline && (n > 0 || buf.starts_with(b"{\"seq\":0")) {
                    return Ok(Verdict::Unended {
                        records: n,
                        torn: true,
                    });
                }
                return Ok(bad_line(n, reason));
            }
            Err(Bad::NotARecord(reason)) => return Ok(bad_line(n, reason)),
            Err(Bad::Broken(reason)) => return Ok(Verdict::Tampered { seq: n, reason }),
        }
    }
    Ok(if n == 0 {
        Verdict::NotALog {
            reason: "the file is empty.".into(),
        }
    } else if ended {
        Verdict::Intact { records: n }
    } else {
        Verdict::Unended {
            records: n,
            torn: false,
        }
    })
}

/// A line that is no record: on line 0 the file is no log, later it is tampering.
fn bad_line(n: u64, reason: String) -> Verdict {
    if n == 0 {
        Verdict::NotALog { reason }
    } else {
        Verdict::Tampered { seq: n, reason }
    }
}

enum LineRead {
    Eof,
    Line { newline: bool },
    TooLong,
}

/// Reads one line into `buf` without its `\n`, never holding more than `max` bytes of it.
fn read_line_limited(r: &mut impl BufRead, buf: &mut Vec<u8>, max: usize) -> io::Result<LineRead> {
    loop {
        let avail = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if avail.is_empty() {
            return Ok(if buf.is_empty() {
                LineRead::Eof
            } else {
                LineRead::Line { newline: false }
            });
        }
        match avail.iter().position(|&b| b == b'\n') {
            Some(i) => {
                if buf.len() + i > max {
                    return Ok(LineRead::TooLong);
                }
                buf.extend_from_slice(&avail[..i]);
                r.consume(i + 1);
                return Ok(LineRead::Line { newline: true });
            }
            None => {
                let len = avail.len();
                if buf.len() + len > max {
                    return Ok(LineRead::TooLong);
                }
                buf.extend_from_slice(avail);
                r.consume(len);
            }
        }
    }
}

struct LineOk {
    hash: String,
    is_end: bool,
}

enum Bad {
    /// Not UTF-8 or not JSON: maybe a torn last line.
    Unreadable(String),
    /// JSON, but not an object with seq, prev and hash.
    NotARecord(String),
    /// A record that does not belong where it is.
    Broken(String),
}

fn check_line(line: &[u8], n: u64, prev: &str) -> Result<LineOk, Bad> {
    let lineno = n + 1;
    if std::str::from_utf8(line).is_err() {
        return Err(Bad::Unreadable(format!(
            "line {lineno} is not valid UTF-8."
        )));
    }
    let value = match serde_json::from_slice::<Strict>(line) {
        Ok(Strict(v)) => v,
        Err(e) if e.classify() == serde_json::error::Category::Data => {
            // Only the duplicate-key check raises a data error: two parsers could read
            // such a line differently, so it is no honest record.
            return Err(Bad::Broken(format!("line {lineno} has {e}.")));
        }
        Err(e) => {
            return Err(Bad::Unreadable(format!("line {lineno} is not JSON ({e}).")));
        }
    };
    let Value::Object(mut obj) = value else {
        return Err(Bad::NotARecord(format!(
            "line {lineno} is not a JSON object."
        )));
    };
    let seq = obj.get("seq").and_then(Value::as_u64);
    let hash = match obj.remove("hash") {
        Some(Value::String(h)) => Some(h),
        _ => None,
    };
    let (Some(seq), Some(hash), Some(line_prev)) =
        (seq, hash, obj.get("prev").and_then(Value::as_str))
    else {
        return Err(Bad::NotARecord(format!(
            "line {lineno} lacks a numeric seq or a prev or hash string."
        )));
    };
    if seq > n {
        let missing = if seq == n + 1 {
            format!("record {n} is missing")
        } else {
            format!("records {n} to {} are missing", seq - 1)
        };
        return Err(Bad::Broken(format!(
            "{missing}: line {lineno} holds record {seq} (records were removed or reordered)."
        )));
    }
    if seq < n {
        return Err(Bad::Broken(format!(
            "line {lineno} holds record {seq} where record {n} belongs (a record was inserted, \
             duplicated or reordered)."
        )));
    }
    if record_hash(&obj) != hash {
        return Err(Bad::Broken(format!(
            "record {n} was changed: its hash does not match its content."
        )));
    }
    if line_prev != prev {
        return Err(Bad::Broken(if n == 0 {
            "record 0 has a prev other than 64 zeros: the log does not start at its beginning."
                .to_string()
        } else {
            format!(
                "record {n} does not link to record {}: its prev is not that record's hash, so \
                 record {} was replaced after record {n} was written.",
                n - 1,
                n - 1
            )
        }));
    }
    let Some(kind) = obj.get("kind").and_then(Value::as_str) else {
        return Err(Bad::Broken(format!("record {n} has no kind.")));
    };
    Ok(LineOk {
        hash,
        is_end: kind == END_KIND,
    })
}

/// A JSON value parsed with every object's keys checked for duplicates (serde_json's own
/// `Value` keeps the last of two equal keys silently).
struct Strict(Value);

impl<'de> serde::Deserialize<'de> for Strict {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> serde::de::Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut v = Vec::new();
        while let Some(Strict(x)) = seq.next_element()? {
            v.push(x);
        }
        Ok(Value::Array(v))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut m = Map::new();
        while let Some(k) = map.next_key::<String>()? {
            if m.contains_key(&k) {
                return Err(serde::de::Error::custom(format_args!(
                    "the key {k:?} twice"
                )));
            }
            let Strict(v) = map.next_value()?;
            m.insert(k, v);
        }
        Ok(Value::Object(m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::io::Cursor;
    use std::time::Duration;

    fn fields(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => panic!("not an object"),
        }
    }

    fn at(secs: u64, nanos: u32) -> SystemTime {
        UNIX_EPOCH + Duration::new(secs, nanos)
    }

    /// A log of `n` exec records, then an `end` record if `end`.
    fn write_log(path: &Path, n: u64, end: bool) -> LogWriter {
        let mut w = LogWriter::create(path, false).unwrap();
        for i in 0..n {
            w.append(
                at(1_796_000_000 + i, 123_456_789),
                "exec",
                fields(json!({
                    "pid": 1000 + i,
                    "argv": ["git", "commit", "-m", format!("change {i} \"quoted\" é")],
                    "env": {"Z": 1, "A": [true, null]},
                })),
            )
            .unwrap();
        }
        if end {
            w.finish(
                at(1_796_001_000, 0),
                fields(json!({"reason": "agent exited"})),
            )
            .unwrap();
        }
        w.flush().unwrap();
        w
    }

    fn lines(path: &Path) -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn verify_lines(ls: &[String]) -> Verdict {
        let mut s = ls.join("\n");
        s.push('\n');
        verify_reader(Cursor::new(s.into_bytes())).unwrap()
    }

    #[test]
    fn intact_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log.jsonl");
        let w = write_log(&p, 9, true);
        assert_eq!(w.records(), 10);
        let v = verify(&p).unwrap();
        assert_eq!(v, Verdict::Intact { records: 10 });
        assert_eq!(v.exit_code(), 0);
        assert!(v.message("log.jsonl").contains("intact"));

        // The contract's fields, line by line.
        let ls = lines(&p);
        let mut prev = ZERO_HASH.to_string();
        for (i, l) in ls.iter().enumerate() {
            let mut obj: Map<String, Value> = serde_json::from_str(l).unwrap();
            assert_eq!(obj["seq"], json!(i));
            assert_eq!(obj["prev"], json!(prev));
            let at = obj["at"].as_str().unwrap();
            assert_eq!(at.len(), 30, "{at}");
            assert!(at.ends_with('Z'));
            let Value::String(h) = obj.remove("hash").unwrap() else {
                panic!()
            };
            assert_eq!(h, record_hash(&obj));
            assert_eq!(h.len(), 64);
            assert!(
                h.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            );
            prev = h;
        }
        assert!(ls[0].starts_with("{\"seq\":0,\"prev\":\"0000"), "{}", ls[0]);
        assert!(ls.last().unwrap().contains("\"kind\":\"end\""));
        assert_eq!(w.head(), prev);
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
    fn one_changed_byte_in_record_5_is_tampering() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log.jsonl");
        write_log(&p, 9, true);
        let mut ls = lines(&p);
        ls[5] = ls[5].replacen("change 5", "change 6", 1);
        assert_ne!(ls[5], lines(&p)[5]);
        let v = verify_lines(&ls);
        let Verdict::Tampered { seq, reason } = &v else {
            panic!("{v:?}")
        };
        assert_eq!(*seq, 5);
        assert!(reason.contains("record 5 was changed"), "{reason}");
        assert_eq!(v.exit_code(), 1);

        // Every single byte changed in the record body is caught, not only that one.
        let orig = lines(&p);
        for i in 0..orig[5].len() {
            let mut b = orig[5].clone().into_bytes();
            b[i] = if b[i] == b'0' { b'1' } else { b'0' };
            let mut ls = orig.clone();
            ls[5] = String::from_utf8_lossy(&b).into_owned();
            let v = verify_lines(&ls);
            assert!(
                matches!(
                    v,
                    Verdict::Tampered { seq: 5, .. } | Verdict::Tampered { seq: 6, .. }
                ),
                "byte {i}: {v:?}"
            );
        }
    }

    #[test]
    fn a_rehashed_change_breaks_the_next_link() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log.jsonl");
        write_log(&p, 9, true);
        let mut ls = lines(&p);
        let mut obj: Map<String, Value> = serde_json::from_str(&ls[5]).unwrap();
        obj.remove("hash");
        obj.insert("pid".into(), json!(1));
        let h = record_hash(&obj);
        obj.insert("hash".into(), json!(h));
        ls[5] = serde_json::to_string(&obj).unwrap();
        let v = verify_lines(&ls);
        let Verdict::Tampered { seq, reason } = &v else {
            panic!("{v:?}")
        };
        assert_eq!(*seq, 6);
        assert!(reason.contains("record 5"), "{reason}");
    }

    #[test]
    fn a_deleted_record_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log.jsonl");
        write_log(&p, 9, true);
        let mut ls = lines(&p);
        ls.remove(4);
        let v = verify_lines(&ls);
        let Verdict::Tampered { seq, reason } = &v else {
            panic!("{v:?}")
        };
        assert_eq!(*seq, 4);
        assert!(reason.contains("record 4 is missing"), "{reason}");
        assert!(v.message("x").contains("TAMPERED at record 4"));

        // Record 0 removed.
        let mut ls = lines(&p);
        ls.remove(0);
        assert!(matches!(
            verify_lines(&ls),
            Verdict::Tampered { seq: 0, .. }
        ));
    }

    #[test]
    fn swapped_records_are_tampering() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log.jsonl");
        write_log(&p, 9, true);
        let mut ls = lines(&p);
        ls.swap(3, 4);
        let v = verify_lines(&ls);
        assert!(matches!(v, Verdict::Tampered { seq: 3, .. }), "{v:?}");
    }

    #[test]
    fn an_inserted_or_duplicated_record_is_tampering() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log.jsonl");
        write_log(&p, 9, true);
        let mut ls = lines(&p);
        let dup = ls[2].clone();
        ls.insert(3, dup);
        let v = verify_lines(&ls);
        let Verdict::Tampered { seq, reason } = &v else {
            panic!("{v:?}")
        };
        assert_eq!(*seq, 3);
        assert!(reason.contains("inserted"), "{reason}");
    }

    #[test]
    fn a_line_after_end_is_tampering() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log.jsonl");
        let mut w = write_log(&p, 3, true);
        // A record that chains on properly, but after the end.
        w.append(at(9, 0), "exec", Map::new()).unwrap();
        w.flush().unwrap();
        let v = verify(&p).unwrap();
        let Verdict::Tampered { seq, reason } = &v else {
            panic!("{v:?}")
        };
        assert_eq!(*seq, 4);
        assert!(reason.contains("follows the end record"), "{reason}");
        let mut ls = lines(&p);
        ls[4] = "{}".into();
        assert!(matches!(
            verify_lines(&ls),
            Verdict::Tampered { seq: 4, .. }
        ));
    }

    #[test]
    fn a_duplicate_key_is_tampering() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log.jsonl");
        write_log(&p, 3, true);
        let mut ls = lines(&p);
        // serde_json alone keeps the last "pid" and the hash would still match.
        ls[1] = ls[1].replacen("\"argv\":", "\"pid\":1,\"argv\":", 1);
        let v = verify_lines(&ls);
        let Verdict::Tampered { seq, reason } = &v else {
            panic!("{v:?}")
        };
        assert_eq!(*seq, 1);
        assert!(reason.contains("twice"), "{reason}");
    }

    #[test]
    fn a_missing_end_is_unended() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log.jsonl");
        let w = write_log(&p, 4, false);
        drop(w);
        let v = verify(&p).unwrap();
        assert_eq!(
            v,
            Verdict::Unended {
                records: 4,
                torn: false
            }
        );
        assert_eq!(v.exit_code(), 5);
        assert!(v.message("x").contains("no end record"));

        // Cutting the end record away gives the same.
        let p2 = dir.path().join("log2.jsonl");
        write_log(&p2, 4, true);
        let mut ls = lines(&p2);
        ls.pop();
        assert_eq!(
            verify_lines(&ls),
            Verdict::Unended {
                records: 4,
                torn: false
            }
        );
    }

    #[test]
    fn a_torn_last_line_is_unended_and_torn() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log.jsonl");
        write_log(&p, 6, false);
        let full = std::fs::read(&p).unwrap();
        let last_start = full[..full.len() - 1]
            .iter()
            .rposition(|&b| b == b'\n')
            .unwrap()
            + 1;
        for cut in [last_start + 1, last_start + 40, full.len() - 2] {
            let v = verify_reader(Cursor::new(&full[..cut])).unwrap();
            assert_eq!(
                v,
                Verdict::Unended {
                    records: 5,
                    torn: true
                },
                "cut at {cut}"
            );
            assert_eq!(v.exit_code(), 5);
            assert!(v.message("x").contains("cut off"));
        }
        // A whole last line without its newline is counted.
        let v = verify_reader(Cursor::new(&full[..full.len() - 1])).unwrap();
        assert_eq!(
            v,
            Verdict::Unended {
                records: 6,
                torn: false
            }
        );
        // A torn first line.
        let v = verify_reader(Cursor::new(&full[..20])).unwrap();
        assert_eq!(
            v,
            Verdict::Unended {
                records: 0,
                torn: true
            }
        );
        // A torn line that is not the last one is tampering.
        let mut b = full[..last_start - 10].to_vec();
        b.push(b'\n');
        b.extend_from_slice(&full[last_start..]);
        assert!(matches!(
            verify_reader(Cursor::new(b)).unwrap(),
            Verdict::Tampered { seq: 4, .. }
        ));
        // Non-UTF-8 in a middle line is tampering.
        let mut b = full.clone();
        b[last_start - 20] = 0xff;
        assert!(matches!(
            verify_reader(Cursor::new(b)).unwrap(),
            Verdict::Tampered { seq: 4, .. }
        ));
    }

    #[test]
    fn empty_and_garbage_are_not_a_log() {
        for input in [
            &b""[..],
            b"hello world\n",
            b"hello world",
            b"\xff\xfe\x00garbage\n",
            b"[1,2,3]\n",
            b"{\"a\":1}\n",
            b"{\"seq\":\"0\",\"prev\":\"x\",\"hash\":\"y\"}\n",
            b"\n\n",
        ] {
            let v = verify_reader(Cursor::new(input)).unwrap();
            assert!(matches!(v, Verdict::NotALog { .. }), "{input:?}: {v:?}");
            assert_eq!(v.exit_code(), 1);
            assert!(v.message("f").starts_with("f: not an evidence log"));
        }
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("empty");
        std::fs::write(&p, b"").unwrap();
        assert!(matches!(verify(&p).unwrap(), Verdict::NotALog { .. }));
    }

    #[test]
    fn an_overlong_line_is_refused_in_bounded_memory() {
        struct Endless;
        impl io::Read for Endless {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                buf.fill(b'a');
                Ok(buf.len())
            }
        }
        let v = verify_reader(BufReader::new(Endless)).unwrap();
        assert!(matches!(v, Verdict::NotALog { .. }), "{v:?}");
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
    fn rfc3339_nanos_of_known_instants() {
        assert_eq!(rfc3339_nanos(UNIX_EPOCH), "1970-01-01T00:00:00.000000000Z");
        // 2026-11-30T11:04:09Z = 1796036649
        assert_eq!(
            rfc3339_nanos(at(1_796_036_649, 1)),
            "2026-11-30T11:04:09.000000001Z"
        );
        assert_eq!(
            rfc3339_nanos(at(1_796_036_649, 123_456_789)),
            "2026-11-30T11:04:09.123456789Z"
        );
        // 2024-02-29T00:00:00Z = 1709164800, and the day after.
        assert_eq!(
            rfc3339_nanos(at(1_709_164_800, 0)),
            "2024-02-29T00:00:00.000000000Z"
        );
        assert_eq!(
            rfc3339_nanos(at(1_709_251_199, 999_999_999)),
            "2024-02-29T23:59:59.999999999Z"
        );
        assert_eq!(
            rfc3339_nanos(at(1_709_251_200, 0)),
            "2024-03-01T00:00:00.000000000Z"
        );
        // 2000 is a leap year, 2100 is not.
        assert_eq!(
            rfc3339_nanos(at(951_782_400, 0)),
            "2000-02-29T00:00:00.000000000Z"
        );
        assert_eq!(
            rfc3339_nanos(at(4_107_542_400, 0)),
            "2100-03-01T00:00:00.000000000Z"
        );
        // Before 1970.
        assert_eq!(
            rfc3339_nanos(UNIX_EPOCH - Duration::new(1, 500_000_000)),
            "1969-12-31T23:59:58.500000000Z"
        );
    }

    #[test]
    fn rfc3339_parses_back() {
        for t in [
            UNIX_EPOCH,
            UNIX_EPOCH + std::time::Duration::new(1_796_036_649, 1),
            UNIX_EPOCH + std::time::Duration::new(1_709_164_800, 999_999_999),
        ] {
            let text = rfc3339_nanos(t);
            let ns = t.duration_since(UNIX_EPOCH).unwrap().as_nanos() as i128;
            assert_eq!(parse_rfc3339_nanos(&text), Some(ns), "{text}");
        }
        assert_eq!(
            parse_rfc3339_nanos("2026-11-30T11:04:09Z"),
            Some(1_796_036_649_000_000_000)
        );
        assert_eq!(
            parse_rfc3339_nanos("2026-11-30T11:04:09.5Z"),
            Some(1_796_036_649_500_000_000)
        );
        for bad in [
            "",
            "2026-11-30",
            "2026-13-30T11:04:09Z",
            "2026-11-30T11:04:09.Z",
            "x026-11-30T11:04:09Z",
        ] {
            assert_eq!(parse_rfc3339_nanos(bad), None, "{bad}");
        }
    }

    #[test]
    fn civil_from_days_matches_counting_days() {
        let (mut y, mut m, mut d) = (1970_i64, 1_u32, 1_u32);
        for days in 0..(400 * 366) {
            assert_eq!(civil_from_days(days), (y, m, d), "day {days}");
            let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
            let len = match m {
                2 if leap => 29,
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            };
            d += 1;
            if d > len {
                d = 1;
                m += 1;
                if m > 12 {
                    m = 1;
                    y += 1;
                }
            }
        }
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
