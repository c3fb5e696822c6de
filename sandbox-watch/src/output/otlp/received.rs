//! `verify --otlp-json FILE`: checks each session's hash chain from the bodies a collector
//! received, without the host that sent them. FILE is what the OpenTelemetry collector's file
//! exporter writes (`format: json`): one OTLP/JSON `ExportLogsServiceRequest` a line.
//!
//! Records are grouped by the resource attribute `sandbox_watch.session.id`; each body is
//! checked alone (its hash recomputed from its content), then the session's records in seq
//! order (each one's `prev` the hash of the one before, from 0 to the end record). Copies of
//! one record (at-least-once delivery sends some twice) count once; two different records
//! with one seq are tampering. Memory: about 100 bytes per record, not the bodies.
use std::collections::BTreeMap;
use std::io::BufRead;

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use super::mapping::{SESSION_ATTR, SESSION_FIELD};
use crate::output::evidence::{END_KIND, MAX_LINE, ZERO_HASH, record_hash};
use crate::output::verify::Strict;

type Digest32 = [u8; 32];

/// One received record, checked alone.
struct Seen {
    hash: Digest32,
    prev: Digest32,
    end: bool,
    /// sha256 of the body, to tell a copy from a different record with the same seq.
    body: Digest32,
    /// Record 0 only: the session it names.
    names_session: Option<String>,
}

#[derive(Default)]
struct Session {
    records: BTreeMap<u64, Seen>,
    /// Problems found in single records: (seq if known, sentence).
    problems: Vec<(Option<u64>, String)>,
    copies: u64,
    host: Option<String>,
}

/// What was found for one session.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    /// Records 0 to the end record, every link right.
    Intact { records: u64, head: String },
    /// Every record there is links up, but no end record arrived (yet).
    Unended { records: u64, head: String },
    /// Missing, changed or foreign records: each problem a sentence.
    Broken { problems: Vec<String> },
}

#[derive(Debug)]
pub struct SessionReport {
    pub id: String,
    pub host: Option<String>,
    /// Records received more than once (counted once).
    pub copies: u64,
    pub verdict: Verdict,
}

/// What the whole file held.
#[derive(Debug, Default)]
pub struct Found {
    pub sessions: Vec<SessionReport>,
    /// Problems with the file itself (lines that are no OTLP/JSON, records without a session).
    pub problems: Vec<String>,
}

impl Found {
    /// 0 every session intact; 1 anything broken (or nothing of ours at all); 5 otherwise
    /// (some session has no end record), as `verify` of a log.
    pub fn exit_code(&self) -> u8 {
        use crate::error::exit;
        if !self.problems.is_empty()
            || self.sessions.is_empty()
            || self
                .sessions
                .iter()
                .any(|s| matches!(s.verdict, Verdict::Broken { .. }))
        {
            exit::OTHER
        } else if self
            .sessions
            .iter()
            .any(|s| matches!(s.verdict, Verdict::Unended { .. }))
        {
            exit::UNENDED
        } else {
            0
        }
    }
}

fn string_attr<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a str> {
    attrs.iter().find(|kv| kv.key == key).and_then(|kv| {
        match kv.value.as_ref()?.value.as_ref()? {
            any_value::Value::StringValue(s) => Some(s.as_str()),
            _ => None,
        }
    })
}

fn int_attr(attrs: &[KeyValue], key: &str) -> Option<u64> {
    attrs.iter().find(|kv| kv.key == key).and_then(|kv| {
        match kv.value.as_ref()?.value.as_ref()? {
            any_value::Value::IntValue(i) => u64::try_from(*i).ok(),
            _ => None,
        }
    })
}

fn digest_of_hex(s: &str) -> Option<Digest32> {
    let mut d = [0u8; 32];
    hex::decode_to_slice(s, &mut d).ok()?;
    Some(d)
}

/// Checks one body alone: a record whose hash matches its content. Err: (seq if readable,
/// the problem).
fn check_body(body: &[u8]) -> Result<(u64, Seen), (Option<u64>, String)> {
    let Ok(Strict(Value::Object(mut obj))) = serde_json::from_slice::<Strict>(body) else {
        return Err((
            None,
            "a body that is not a log record (not a JSON object)".into(),
        ));
    };
    let seq = obj.get("seq").and_then(Value::as_u64);
    let Some(seq) = seq else {
        return Err((None, "a body without a seq".into()));
    };
    let hash = match obj.remove("hash") {
        Some(Value::String(h)) => h,
        _ => return Err((Some(seq), format!("record {seq} has no hash"))),
    };
    let prev = obj
        .get("prev")
        .and_then(Value::as_str)
        .and_then(digest_of_hex);
    let (Some(hash_d), Some(prev)) = (digest_of_hex(&hash), prev) else {
        return Err((
            Some(seq),
            format!("record {seq} has a hash or prev that is not 64 hex digits"),
        ));
    };
    if record_hash(&obj) != hash {
        return Err((
            Some(seq),
            format!("record {seq} was changed: its hash does not match its content"),
        ));
    }
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
    let names_session = (seq == 0).then(|| {
        obj.get(SESSION_FIELD)
            .and_then(Value::as_str)
            .map_or_else(|| hash.chars().take(32).collect(), str::to_owned)
    });
    Ok((
        seq,
        Seen {
            hash: hash_d,
            prev,
            end: kind == END_KIND,
            body: Sha256::digest(body).into(),
            names_session,
        },
    ))
}

/// Reads the collector's file and checks every session in it.
pub fn check(reader: impl BufRead) -> std::io::Result<Found> {
    let mut sessions: BTreeMap<String, Session> = BTreeMap::new();
    let mut found = Found::default();
    let mut without_session = 0u64;
    for (i, line) in reader.split(b'\n').enumerate() {
        let line = line?;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if line.len() > MAX_LINE * 4 {
            found
                .problems
                .push(format!("line {} is too long to be read", i + 1));
            continue;
        }
        let request: ExportLogsServiceRequest = match serde_json::from_slice(&line) {
            Ok(r) => r,
            Err(e) => {
                found.problems.push(format!(
                    "line {} is not an OTLP/JSON logs request ({e})",
                    i + 1
                ));
                continue;
            }
        };
        for rl in request.resource_logs {
            let resource = rl.resource.unwrap_or_default();
            let res_session = string_attr(&resource.attributes, SESSION_ATTR).map(str::to_owned);
            let host = string_attr(&resource.attributes, "host.name").map(str::to_owned);
            for sl in rl.scope_logs {
                for record in sl.log_records {
                    let id = res_session.clone().or_else(|| {
                        string_attr(&record.attributes, SESSION_ATTR).map(str::to_owned)
                    });
                    let Some(id) = id else {
                        without_session += 1;
                        continue;
                    };
                    let session = sessions.entry(id).or_default();
                    if session.host.is_none() {
                        session.host.clone_from(&host);
                    }
                    let body = match record.body.and_then(|b| b.value) {
                        Some(any_value::Value::StringValue(s)) => s.into_bytes(),
                        Some(any_value::Value::BytesValue(b)) => b,
                        _ => {
                            let seq = int_attr(&record.attributes, "sandbox_watch.seq");
                            let what =
                                seq.map_or("a record".to_string(), |s| format!("record {s}"));
                            session.problems.push((
                                seq,
                                format!("{what} arrived without its text (no string body)"),
                            ));
                            continue;
                        }
                    };
                    match check_body(&body) {
                        Ok((seq, seen)) => match session.records.get(&seq) {
                            Some(other) if other.body == seen.body => session.copies += 1,
                            Some(_) => session
                                .problems
                                .push((Some(seq), format!("two different records {seq} arrived"))),
                            None => {
                                session.records.insert(seq, seen);
                            }
                        },
                        Err((seq, why)) => {
                            let seq =
                                seq.or_else(|| int_attr(&record.attributes, "sandbox_watch.seq"));
                            session.problems.push((seq, why));
                        }
                    }
                }
            }
        }
    }
    if without_session > 0 {
        found.problems.push(format!(
            "{without_session} log records carry no {SESSION_ATTR}: not from sandbox-watch, or \
             their resource was dropped on the way"
        ));
    }
    for (id, s) in sessions {
        found.sessions.push(SessionReport {
            verdict: chain(&id, &s),
            id,
            host: s.host,
            copies: s.copies,
        });
    }
    Ok(found)
}

/// The session's chain, in seq order.
fn chain(id: &str, s: &Session) -> Verdict {
    let mut problems: Vec<(u64, String)> = s
        .problems
        .iter()
        .map(|(seq, p)| (seq.unwrap_or(u64::MAX), p.clone()))
        .collect();
    // Records whose own check failed are there, but changed: not "missing" too.
    let changed: std::collections::HashSet<u64> = s.problems.iter().filter_map(|p| p.0).collect();
    let zero = digest_of_hex(ZERO_HASH).expect("64 zeros");
    let mut expect = 0u64;
    let mut prev: Option<&Seen> = None;
    let mut end: Option<u64> = None;
    for (&seq, seen) in &s.records {
        if let Some(e) = end {
            problems.push((
                seq,
                format!("record {seq} follows the end record (record {e})"),
            ));
            break;
        }
        // The gap before this record, less what arrived changed.
        let gap: Vec<u64> = (expect..seq).filter(|n| !changed.contains(n)).collect();
        if let (Some(first), Some(last)) = (gap.first(), gap.last()) {
            problems.push((
                *first,
                if first == last {
                    format!("record {first} is missing")
                } else if gap.len() as u64 == last - first + 1 {
                    format!("records {first} to {last} are missing")
                } else {
                    format!(
                        "{} records between {first} and {last} are missing",
                        gap.len()
                    )
                },
            ));
        }
        if seq == 0 {
            if seen.prev != zero {
                problems.push((0, "record 0 has a prev other than 64 zeros".into()));
            }
            if seen.names_session.as_deref() != Some(id) {
                problems.push((
                    0,
                    format!(
                        "record 0 belongs to session {}, not to the session {id} it was sent as",
                        seen.names_session.as_deref().unwrap_or("?")
                    ),
                ));
            }
        } else if let Some(p) = prev.filter(|_| expect == seq)
            && seen.prev != p.hash
        {
            problems.push((
                seq,
                format!(
                    "record {seq} does not link to record {}: its prev is not that record's hash",
                    seq - 1
                ),
            ));
        }
        if seen.end {
            end = Some(seq);
        }
        prev = Some(seen);
        expect = seq + 1;
    }
    if s.records.is_empty() && problems.is_empty() {
        problems.push((0, "no record arrived whole".into()));
    }
    if !problems.is_empty() {
        problems.sort_by_key(|(seq, _)| *seq);
        return Verdict::Broken {
            problems: problems.into_iter().map(|(_, p)| p).collect(),
        };
    }
    let head = prev.map(|p| hex::encode(p.hash)).unwrap_or_default();
    if end.is_some() {
        Verdict::Intact {
            records: expect,
            head,
        }
    } else {
        Verdict::Unended {
            records: expect,
            head,
        }
    }
}

impl SessionReport {
    /// What `verify` prints for this session.
    pub fn message(&self) -> String {
        let host = self
            .host
            .as_deref()
            .map(|h| format!(" (host {h})"))
            .unwrap_or_default();
        let copies = if self.copies > 0 {
            format!(
                " ({} records arrived more than once; counted once)",
                self.copies
            )
        } else {
            String::new()
        };
        match &self.verdict {
            Verdict::Intact { records, head } => format!(
                "session {}{host}: intact: {records} records, hash chain unbroken, ending with \
                 the end record; head {head}{copies}.",
                self.id
            ),
            Verdict::Unended { records, head } => format!(
                "session {}{host}: unended: {records} records link up but no end record \
                 arrived (the capture is still running, its exporter could not deliver the \
                 rest, or the last records were removed); head {head}{copies}.",
                self.id
            ),
            Verdict::Broken { problems } => {
                let shown: Vec<&str> = problems.iter().take(10).map(String::as_str).collect();
                let more = if problems.len() > 10 {
                    format!("; and {} more", problems.len() - 10)
                } else {
                    String::new()
                };
                format!(
                    "session {}{host}: TAMPERED or INCOMPLETE: {}{more}.",
                    self.id,
                    shown.join("; ")
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::evidence::LogWriter;
    use crate::output::otlp::mapping;
    use serde_json::{Map, json};
    use std::time::{Duration, UNIX_EPOCH};

    /// A real log of `n` records (start with a session id, execs, end), as lines.
    fn log_lines(session: &str, n: u64) -> Vec<String> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log.jsonl");
        let mut w = LogWriter::create(&p, false).unwrap();
        let at = UNIX_EPOCH + Duration::from_secs(1_796_000_000);
        let Value::Object(start) = json!({ SESSION_FIELD: session }) else {
            unreachable!()
        };
        w.append(at, "start", start).unwrap();
        for i in 1..n - 1 {
            let Value::Object(f) = json!({"pid": i, "argv": ["x"]}) else {
                unreachable!()
            };
            w.append(at, "exec", f).unwrap();
        }
        w.finish(at, Map::new()).unwrap();
        drop(w);
        std::fs::read_to_string(&p)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// The collector's file: one request per chunk of lines, as JSON lines.
    fn file(sessions: &[(&str, &[String])], chunk: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for (id, lines) in sessions {
            let resource = mapping::resource(id, &[]);
            for part in lines.chunks(chunk) {
                let records = part
                    .iter()
                    .map(|l| mapping::log_record(l.as_bytes(), 0))
                    .collect();
                let req = mapping::request(&resource, records);
                out.extend(serde_json::to_vec(&req).unwrap());
                out.push(b'\n');
            }
        }
        out
    }

    fn check_bytes(b: &[u8]) -> Found {
        check(std::io::Cursor::new(b)).unwrap()
    }

    #[test]
    fn whole_sessions_with_copies_are_intact() {
        let a = log_lines("a", 20);
        let b = log_lines("b", 5);
        // Out of order, and some records twice (a retried batch).
        let mut a2: Vec<String> = a[10..].to_vec();
        a2.extend_from_slice(&a[..12]);
        let f = check_bytes(&file(&[("a", &a2), ("b", &b)], 3));
        assert_eq!(f.exit_code(), 0, "{f:?}");
        assert_eq!(f.sessions.len(), 2);
        let head = serde_json::from_str::<Value>(a.last().unwrap()).unwrap()["hash"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(f.sessions[0].verdict, Verdict::Intact { records: 20, head });
        assert_eq!(f.sessions[0].copies, 2);
        assert!(f.sessions[0].message().contains("intact: 20 records"));
    }

    #[test]
    fn a_removed_an_altered_and_a_cut_session_are_named() {
        let a = log_lines("a", 12);
        let mut removed = a.clone();
        removed.remove(5);
        let f = check_bytes(&file(&[("a", &removed)], 4));
        assert_eq!(f.exit_code(), 1);
        let m = f.sessions[0].message();
        assert!(m.contains("record 5 is missing"), "{m}");

        let mut altered = a.clone();
        altered[7] = altered[7].replace("\"pid\":7", "\"pid\":777");
        assert_ne!(altered[7], a[7]);
        let f = check_bytes(&file(&[("a", &altered)], 4));
        assert_eq!(f.exit_code(), 1);
        let m = f.sessions[0].message();
        assert!(m.contains("record 7 was changed"), "{m}");
        assert!(!m.contains("missing"), "{m}");

        // A copy of the session that stops early: unended, exit 5.
        let f = check_bytes(&file(&[("a", &a[..6])], 4));
        assert_eq!(f.exit_code(), 5);
        assert!(matches!(
            f.sessions[0].verdict,
            Verdict::Unended { records: 6, .. }
        ));

        // Two different records with one seq.
        let mut twice = a.clone();
        twice.push(altered[7].clone());
        let f = check_bytes(&file(&[("a", &twice)], 4));
        assert_eq!(f.exit_code(), 1);

        // A record re-chained by hand (its own hash right, its link wrong).
        let mut v: Map<String, Value> = serde_json::from_str(&a[3]).unwrap();
        v.insert("pid".into(), 99.into());
        v.remove("hash");
        let h = record_hash(&v);
        v.insert("hash".into(), h.into());
        let mut rechained = a.clone();
        rechained[3] = serde_json::to_string(&v).unwrap();
        let f = check_bytes(&file(&[("a", &rechained)], 4));
        let m = f.sessions[0].message();
        assert!(m.contains("record 4 does not link to record 3"), "{m}");
    }

    #[test]
    fn records_sent_under_another_session_and_garbage_lines() {
        let a = log_lines("a", 4);
        let f = check_bytes(&file(&[("b", &a)], 4));
        assert_eq!(f.exit_code(), 1);
        assert!(f.sessions[0].message().contains("belongs to session a"));
        let mut bytes = file(&[("a", &a)], 4);
        bytes.extend_from_slice(b"not json\n");
        let f = check_bytes(&bytes);
        assert_eq!(f.exit_code(), 1);
        assert!(f.problems[0].contains("line 2"), "{:?}", f.problems);
        assert_eq!(
            check_bytes(b"").exit_code(),
            1,
            "nothing of ours is no success"
        );
    }
}
