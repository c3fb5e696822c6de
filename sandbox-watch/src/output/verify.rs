//! `verify`: checks an evidence log's hash chain line by line, in constant memory, and says
//! what it found: intact, unended (no end record; maybe cut off), tampered (the first bad
//! record named) or not a log. The format and canonical form it checks are in
//! [`evidence`](super::evidence).
use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::Path;

use serde_json::{Map, Value};

use ed25519_dalek::VerifyingKey;

use super::evidence::{END_KIND, MAX_LINE, ZERO_HASH, record_hash};
use super::sign;
use crate::error::exit;

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
    pub fn exit_code(&self) -> u8 {
        match self {
            Verdict::Intact { .. } => 0,
            Verdict::Unended { .. } => exit::UNENDED,
            Verdict::Tampered { .. } | Verdict::NotALog { .. } => exit::OTHER,
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
pub fn verify_reader(r: impl BufRead) -> io::Result<Verdict> {
    let mut prev = ZERO_HASH.to_string();
    check_all(r, &mut prev, None, &mut Vouch::default())
}

/// The anchor a capture printed to stderr (`log L: N records, head H`, at its start, every
/// checkpoint and its end): the log's first N records end in a record whose hash is H. A log
/// rewritten afterwards, however well rechained, has another hash there, and a cut one fewer
/// records; the records after the anchor's are not covered by it (a later anchor, or the
/// signatures, cover them).
#[derive(Clone, Debug, Default)]
pub struct Anchor {
    pub head: Option<String>,
    pub records: Option<u64>,
}

/// What a log says against an anchor.
#[derive(Debug, PartialEq)]
pub enum Anchored {
    /// Nothing to compare (no anchor, or a log that failed its chain already).
    Nothing,
    /// The anchor's record is there with its hash; `after` records follow it.
    Matches { at: u64, after: u64 },
    /// Why the log does not match.
    Mismatch(String),
}

impl Anchor {
    /// Compares the log `lines` (whose chain check gave `verdict`) with the anchor.
    pub fn check(&self, verdict: &Verdict, lines: impl BufRead) -> io::Result<Anchored> {
        let total = match verdict {
            Verdict::Intact { records } | Verdict::Unended { records, .. } => *records,
            _ => return Ok(Anchored::Nothing),
        };
        if self.head.is_none() && self.records.is_none() {
            return Ok(Anchored::Nothing);
        }
        if let Some(want) = self.records
            && want > total
        {
            return Ok(Anchored::Mismatch(format!(
                "the log has {total} records, the anchor says {want}: records were removed \
                 after the anchor was printed"
            )));
        }
        let Some(want) = &self.head else {
            let at = self.records.unwrap_or(total);
            return Ok(Anchored::Matches {
                at,
                after: total - at,
            });
        };
        // The record with the anchor's hash (the chain is intact, so each hash is the one
        // its record was written with, and only one record has it).
        let mut found = None;
        for (i, line) in lines.split(b'\n').enumerate() {
            let n = i as u64 + 1;
            if n > total {
                break;
            }
            let line = line?;
            let hash = serde_json::from_slice::<Value>(&line)
                .ok()
                .and_then(|v| v.get("hash").and_then(Value::as_str).map(str::to_owned));
            if hash.is_some_and(|h| want.eq_ignore_ascii_case(&h)) {
                found = Some(n);
                break;
            }
        }
        Ok(match (found, self.records) {
            (None, _) => Anchored::Mismatch(format!(
                "no record of the log has the hash {want} the anchor names: the log was \
                 rewritten (its chain recomputed) or cut after the anchor was printed"
            )),
            (Some(at), Some(want_at)) if at != want_at => Anchored::Mismatch(format!(
                "the anchor's hash is record {at}'s, the anchor says record {want_at}: records \
                 were added or removed before it after the anchor was printed"
            )),
            (Some(at), _) => Anchored::Matches {
                at,
                after: total - at,
            },
        })
    }
}

/// As [`verify`], also checking every signature against `key` (`verify --pubkey`).
pub fn verify_signed(path: &Path, key: &VerifyingKey) -> io::Result<(Verdict, Vouch)> {
    let f = File::open(path)?;
    verify_reader_signed(BufReader::with_capacity(64 * 1024, f), key)
}

/// [`verify_signed`] of a log read from `r`.
pub fn verify_reader_signed(r: impl BufRead, key: &VerifyingKey) -> io::Result<(Verdict, Vouch)> {
    let mut prev = ZERO_HASH.to_string();
    let mut vouch = Vouch::default();
    let verdict = check_all(r, &mut prev, Some(key), &mut vouch)?;
    Ok((verdict, vouch))
}

/// What the signatures of a log vouch for (`verify --pubkey`).
#[derive(Debug, Default, PartialEq)]
pub struct Vouch {
    /// Signatures that check.
    pub signed: u64,
    /// The seq of the last record whose signature checks before any that does not: it and
    /// every record before it are the monitor's.
    pub through: Option<u64>,
    /// The first signature that does not check: its seq and why.
    pub bad: Option<(u64, String)>,
    /// The end record's signature checks.
    pub end_signed: bool,
}

impl Vouch {
    /// The status and sentence of `verify --pubkey` for a chain that checked (`verdict`
    /// intact or unended): 0 when the signatures vouch for the whole log, its end included;
    /// 5 when an unended log's signatures vouch for a part (said how far); 6 when a signature
    /// does not check, the log has none, or its end is not signed.
    pub fn judge(&self, verdict: &Verdict, path: &str) -> (u8, String) {
        let records = match verdict {
            Verdict::Intact { records } | Verdict::Unended { records, .. } => *records,
            _ => return (verdict.exit_code(), verdict.message(path)),
        };
        let so_far = match self.through {
            Some(k) => format!(
                "the signatures vouch for records 0 to {k} only, and nothing vouches for \
                 the {} after",
                records - 1 - k
            ),
            None => "no record is vouched for".into(),
        };
        if let Some((seq, why)) = &self.bad {
            return (
                exit::UNSIGNED,
                format!(
                    "{path}: SIGNATURE CHECK FAILED at record {seq}: {why}. The log was \
                     rewritten (rechained) or forged after the monitor signed it; {so_far}."
                ),
            );
        }
        if self.signed == 0 {
            return (
                exit::UNSIGNED,
                format!(
                    "{path}: NOT SIGNED: none of its {records} records has a signature (the \
                     capture ran without --sign-key, or the signatures were taken out): \
                     nothing vouches that the monitor wrote it."
                ),
            );
        }
        match verdict {
            Verdict::Intact { .. } if self.end_signed => (
                0,
                format!(
                    "{path}: intact and signed: {records} {}, hash chain unbroken, and the \
                     end record's signature, which vouches for every record before it, \
                     checks with the key given.",
                    plural(records, "record", "records")
                ),
            ),
            Verdict::Intact { .. } => (
                exit::UNSIGNED,
                format!(
                    "{path}: END NOT SIGNED: the end record has no signature, so it was not \
                     written by the monitor (records forged after the capture ended); \
                     {so_far}."
                ),
            ),
            _ => (
                exit::UNENDED,
                format!("{} Of them, {so_far}.", verdict.message(path)),
            ),
        }
    }
}

/// The chain check; `prev` ends as the last good record's hash. With a key, every signature
/// is checked too, into `vouch`.
fn check_all(
    mut r: impl BufRead,
    prev: &mut String,
    key: Option<&VerifyingKey>,
    vouch: &mut Vouch,
) -> io::Result<Verdict> {
    let mut buf = Vec::new();
    let mut n: u64 = 0;
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
        match check_line(&buf, n, prev, key) {
            Ok(ok) => {
                match ok.signature {
                    Some(None) if vouch.bad.is_none() => {
                        vouch.signed += 1;
                        vouch.through = Some(n);
                        vouch.end_signed = ok.is_end;
                    }
                    Some(Some(why)) if vouch.bad.is_none() => vouch.bad = Some((n, why)),
                    _ => {}
                }
                *prev = ok.hash;
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
    /// With a key: None for a record without a signature, else what [`sign::check`] said.
    signature: Option<Option<String>>,
}

enum Bad {
    /// Not UTF-8 or not JSON: maybe a torn last line.
    Unreadable(String),
    /// JSON, but not an object with seq, prev and hash.
    NotARecord(String),
    /// A record that does not belong where it is.
    Broken(String),
}

fn check_line(line: &[u8], n: u64, prev: &str, key: Option<&VerifyingKey>) -> Result<LineOk, Bad> {
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
    let is_end = kind == END_KIND;
    let signature = match key {
        Some(key) if obj.contains_key(sign::SIGNATURE) => Some(sign::check(&obj, key)),
        _ => None,
    };
    Ok(LineOk {
        hash,
        is_end,
        signature,
    })
}

/// A JSON value parsed with every object's keys checked for duplicates (serde_json's own
/// `Value` keeps the last of two equal keys silently).
pub(crate) struct Strict(pub(crate) Value);

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
    use crate::output::evidence::LogWriter;
    use serde_json::json;
    use std::io::Cursor;
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

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

    /// An anchor printed at the start or a checkpoint vouches for the records up to it in the
    /// longer log the capture went on to write; a rewrite before it, a cut before it, or a
    /// hash at another place does not match.
    #[test]
    fn an_earlier_anchor_covers_the_records_up_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        drop(write_log(&path, 5, true));
        let ls = lines(&path);
        let hash_of = |i: usize| -> String {
            serde_json::from_str::<Value>(&ls[i]).unwrap()["hash"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        let check = |ls: &[String], head: Option<String>, records: Option<u64>| {
            let text = ls.join("\n") + "\n";
            let v = verify_lines(ls);
            Anchor { head, records }
                .check(&v, Cursor::new(text.into_bytes()))
                .unwrap()
        };
        // The third record's anchor, in the whole log (6 records: 5 execs and the end).
        let third = Some(hash_of(2));
        assert_eq!(
            check(&ls, third.clone(), Some(3)),
            Anchored::Matches { at: 3, after: 3 }
        );
        assert_eq!(
            check(&ls, Some(hash_of(5)), Some(6)),
            Anchored::Matches { at: 6, after: 0 }
        );
        // Its hash at another place, or a count the log does not reach.
        assert!(matches!(
            check(&ls, third.clone(), Some(4)),
            Anchored::Mismatch(m) if m.contains("record 3's")
        ));
        assert!(matches!(
            check(&ls, None, Some(7)),
            Anchored::Mismatch(m) if m.contains("removed")
        ));
        // Rechained from the second record on (as rechain.py does): no record has that hash.
        let mut rewritten: Vec<String> = Vec::new();
        let mut w = LogWriter::create(&dir.path().join("forged.jsonl"), false).unwrap();
        for (i, line) in ls.iter().enumerate() {
            let v: Value = serde_json::from_str(line).unwrap();
            if i == 1 || v["kind"] == "end" {
                continue;
            }
            let mut f = fields(v.clone());
            for k in ["seq", "prev", "hash", "at", "kind"] {
                f.remove(k);
            }
            w.append(at(1_796_000_000 + i as u64, 0), "exec", f)
                .unwrap();
        }
        w.finish(at(1_796_001_000, 0), Map::new()).unwrap();
        w.flush().unwrap();
        drop(w);
        rewritten.extend(lines(&dir.path().join("forged.jsonl")));
        assert!(matches!(verify_lines(&rewritten), Verdict::Intact { .. }));
        assert!(matches!(
            check(&rewritten, third, Some(3)),
            Anchored::Mismatch(m) if m.contains("rewritten")
        ));
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
}
