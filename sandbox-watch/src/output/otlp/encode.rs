//! A batch written straight into OTLP protobuf bytes, one record at a time: the same bytes
//! as [`mapping::log_record`]'s LogRecords put in [`mapping::request`] and encoded with
//! prost (a unit test holds the two together), without a JSON value tree, a `LogRecord` and
//! its strings per line. The live exporter sends 1,000,000 records of a busy capture: built
//! the other way, each batch held about 6 MB at once and cost about 11 µs of CPU a record.
//!
//! A line whose fields do not read as the usual types (not an object, a duplicate key, a
//! number where a string belongs, an argv element that is not a string, not UTF-8), and a
//! network line (whose attributes only the general mapping writes), is encoded through the
//! general mapping instead, so the mapping stays the one contract.
use std::borrow::Cow;

use opentelemetry_proto::tonic::logs::v1::{ResourceLogs, ScopeLogs, SeverityNumber};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message as _;
use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint};
use serde::Deserialize;

use super::mapping;

/// The fields the mapping reads, borrowed from the line where it has no escapes.
#[derive(Deserialize)]
struct Fields<'a> {
    #[serde(borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    at: Option<Cow<'a, str>>,
    seq: Option<i64>,
    #[serde(borrow)]
    hash: Option<Cow<'a, str>>,
    #[serde(borrow)]
    prev: Option<Cow<'a, str>>,
    pid: Option<i64>,
    ppid: Option<i64>,
    uid: Option<i64>,
    exit_code: Option<i64>,
    #[serde(borrow)]
    exe: Option<Cow<'a, str>>,
    #[serde(borrow)]
    cwd: Option<Cow<'a, str>>,
    #[serde(borrow)]
    argv: Option<Vec<Cow<'a, str>>>,
    #[serde(borrow)]
    path: Option<Cow<'a, str>>,
}

/// The records of one request, encoded as they come, after room for the request's head
/// (which holds their total length), so the finished request is the same buffer.
pub struct Batch {
    /// Room for the head, then `ScopeLogs.log_records` entries (field 2), each with its key
    /// and length.
    buf: Vec<u8>,
    room: usize,
    /// `ResourceLogs` with its resource and no ScopeLogs; `ScopeLogs` with its scope and no
    /// records.
    resource_logs: Vec<u8>,
    scope_logs: Vec<u8>,
    /// One record's bytes, reused.
    scratch: Vec<u8>,
    count: usize,
}

impl Batch {
    /// An empty batch of records under `resource`, with room for about `bytes` of them.
    pub fn new(resource: &Resource, bytes: usize) -> Batch {
        let resource_logs = ResourceLogs {
            resource: Some(resource.clone()),
            scope_logs: Vec::new(),
            schema_url: String::new(),
        }
        .encode_to_vec();
        // ScopeLogs: its scope (field 1), then the records (field 2); schema_url is empty.
        let scope_logs = ScopeLogs {
            scope: mapping::scope(),
            log_records: Vec::new(),
            schema_url: String::new(),
        }
        .encode_to_vec();
        // Two keys and two lengths (at most 10 bytes each) around them.
        let room = 2 * 11 + resource_logs.len() + scope_logs.len();
        let mut buf = Vec::with_capacity(room + bytes);
        buf.resize(room, 0);
        Batch {
            buf,
            room,
            resource_logs,
            scope_logs,
            scratch: Vec::with_capacity(1024),
            count: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The bytes of the records so far.
    pub fn bytes(&self) -> usize {
        self.buf.len() - self.room
    }

    /// Adds the LogRecord of one log line (without its newline).
    pub fn push(&mut self, line: &[u8], observed_ns: u64) {
        self.scratch.clear();
        if !fast_record(line, observed_ns, &mut self.scratch) {
            self.scratch.clear();
            mapping::log_record(line, observed_ns)
                .encode(&mut self.scratch)
                .expect("a Vec grows as needed");
        }
        put_bytes(&mut self.buf, 2, &self.scratch);
        self.count += 1;
    }

    /// The encoded ExportLogsServiceRequest holding these records.
    pub fn finish(mut self) -> Vec<u8> {
        let records = self.bytes();
        let scope_logs_len = self.scope_logs.len() + records;
        // ResourceLogs: its resource (field 1), then the one ScopeLogs (field 2).
        let mut head = Vec::with_capacity(self.room);
        head.extend_from_slice(&self.resource_logs);
        encode_key(2, WireType::LengthDelimited, &mut head);
        encode_varint(scope_logs_len as u64, &mut head);
        head.extend_from_slice(&self.scope_logs);
        let resource_logs_len = head.len() + records;
        // The request: resource_logs (field 1).
        let mut top = Vec::with_capacity(11);
        encode_key(1, WireType::LengthDelimited, &mut top);
        encode_varint(resource_logs_len as u64, &mut top);
        let start = self.room - top.len() - head.len();
        self.buf[start..start + top.len()].copy_from_slice(&top);
        self.buf[start + top.len()..self.room].copy_from_slice(&head);
        self.buf.drain(..start);
        self.buf
    }
}

fn put_bytes(buf: &mut Vec<u8>, tag: u32, bytes: &[u8]) {
    encode_key(tag, WireType::LengthDelimited, buf);
    encode_varint(bytes.len() as u64, buf);
    buf.extend_from_slice(bytes);
}

/// A string field, left out when empty (proto3).
fn put_str(buf: &mut Vec<u8>, tag: u32, s: &str) {
    if !s.is_empty() {
        put_bytes(buf, tag, s.as_bytes());
    }
}

fn delimited_len(n: usize) -> usize {
    1 + encoded_len_varint(n as u64) + n
}

/// An AnyValue holding a string (a oneof: written even when empty).
fn any_str_len(s: &str) -> usize {
    delimited_len(s.len())
}

fn put_any_str(buf: &mut Vec<u8>, s: &str) {
    put_bytes(buf, 1, s.as_bytes());
}

/// A KeyValue attribute (field 6 of LogRecord) whose value is `value_len` bytes of AnyValue.
fn put_kv_head(buf: &mut Vec<u8>, key: &str, value_len: usize) {
    let kv_len = delimited_len(key.len()) + delimited_len(value_len);
    encode_key(6, WireType::LengthDelimited, buf);
    encode_varint(kv_len as u64, buf);
    put_bytes(buf, 1, key.as_bytes());
    encode_key(2, WireType::LengthDelimited, buf);
    encode_varint(value_len as u64, buf);
}

fn put_kv_str(buf: &mut Vec<u8>, key: &str, value: &str) {
    put_kv_head(buf, key, any_str_len(value));
    put_any_str(buf, value);
}

fn put_kv_int(buf: &mut Vec<u8>, key: &str, value: i64) {
    put_kv_head(buf, key, 1 + encoded_len_varint(value as u64));
    encode_key(3, WireType::Varint, buf);
    encode_varint(value as u64, buf);
}

/// The kinds whose attributes (the kernel's remote end, the verdict, a tamper's caller, a
/// violation's step) only the general mapping writes: they are few in a capture, and one
/// contract is simpler.
const GENERAL_KINDS: &[&str] = &[
    "net",
    "net_result",
    "listening",
    "flow_count",
    "net_tamper",
    "violation",
];

/// The mapping of [`mapping::log_record`] for a line whose fields read as the usual types and
/// whose kind is not one of [`GENERAL_KINDS`]; false (and `buf` to be cleared) otherwise.
fn fast_record(line: &[u8], observed_ns: u64, buf: &mut Vec<u8>) -> bool {
    if line.first() != Some(&b'{') {
        return false;
    }
    let Ok(text) = std::str::from_utf8(line) else {
        return false;
    };
    let Ok(f) = serde_json::from_str::<Fields>(text) else {
        return false;
    };
    let kind = f.kind.as_deref().unwrap_or("unknown");
    if GENERAL_KINDS.contains(&kind) {
        return false;
    }
    let time =
        f.at.as_deref()
            .and_then(crate::time::parse_ns)
            .map_or(0, |ns| u64::try_from(ns).unwrap_or(0));
    // A violation (WARN) takes the general mapping.
    let (severity, severity_text) = (SeverityNumber::Info, "INFO");
    // LogRecord's fields in the order prost writes them (by tag): time (1), severity (2, 3),
    // body (5), attributes (6), observed time (11), event name (12); zero values left out.
    if time != 0 {
        encode_key(1, WireType::SixtyFourBit, buf);
        buf.extend_from_slice(&time.to_le_bytes());
    }
    encode_key(2, WireType::Varint, buf);
    encode_varint(severity as i32 as u64, buf);
    put_str(buf, 3, severity_text);
    encode_key(5, WireType::LengthDelimited, buf);
    encode_varint(any_str_len(text) as u64, buf);
    put_any_str(buf, text);
    if let Some(seq) = f.seq {
        put_kv_int(buf, "sandbox_watch.seq", seq);
    }
    put_kv_str(buf, "sandbox_watch.kind", kind);
    for (v, key) in [
        (&f.hash, "sandbox_watch.hash"),
        (&f.prev, "sandbox_watch.prev"),
    ] {
        if let Some(v) = v {
            put_kv_str(buf, key, v);
        }
    }
    for (v, key) in [
        (f.pid, "process.pid"),
        (f.ppid, "process.parent_pid"),
        (f.uid, "process.user.id"),
        (f.exit_code, "process.exit.code"),
    ] {
        if let Some(v) = v {
            put_kv_int(buf, key, v);
        }
    }
    for (v, key) in [
        (&f.exe, "process.executable.path"),
        (&f.cwd, "process.working_directory"),
    ] {
        if let Some(v) = v {
            put_kv_str(buf, key, v);
        }
    }
    if let Some(argv) = &f.argv {
        // AnyValue { array_value (5): ArrayValue { values (1): AnyValue… } }
        let array_len: usize = argv.iter().map(|a| delimited_len(any_str_len(a))).sum();
        put_kv_head(buf, "process.command_args", delimited_len(array_len));
        encode_key(5, WireType::LengthDelimited, buf);
        encode_varint(array_len as u64, buf);
        for a in argv {
            encode_key(1, WireType::LengthDelimited, buf);
            encode_varint(any_str_len(a) as u64, buf);
            put_any_str(buf, a);
        }
    }
    if let Some(p) = &f.path
        && matches!(
            kind,
            "file" | "file_failed" | "file_count" | "file_hash" | "file_modified"
        )
    {
        put_kv_str(buf, "file.path", p);
    }
    if observed_ns != 0 {
        encode_key(11, WireType::SixtyFourBit, buf);
        buf.extend_from_slice(&observed_ns.to_le_bytes());
    }
    encode_key(12, WireType::LengthDelimited, buf);
    let event = ["sandbox_watch.", kind];
    encode_varint((event[0].len() + event[1].len()) as u64, buf);
    for part in event {
        buf.extend_from_slice(part.as_bytes());
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINES: &[&str] = &[
        r#"{"seq":0,"prev":"00","hash":"3a","at":"2026-12-01T16:48:41.519651685Z","kind":"start","agent":{"netns":null},"session_id":"s1","target":{"command":["a","b"],"pid":3}}"#,
        r#"{"seq":3,"prev":"aa","hash":"bb","at":"2026-12-01T10:00:00.000000005Z","kind":"exec","argv":["git","commit","-m","x y","","é \"q\" \\ \u0001"],"cwd":"/w","exe":"/usr/bin/git","pid":42,"ppid":41,"uid":1000}"#,
        r#"{"seq":4999,"prev":"d4","hash":"91","at":"2026-12-01T16:48:41.599835890Z","kind":"file","count":1,"credential":false,"dev":"254:0","flags":"O_RDONLY","ino":10373678,"op":"read","path":"/tmp/memprof/files/f000959","persistence":false,"pid":32256,"verified":false}"#,
        r#"{"seq":5,"kind":"exit","pid":9,"exit_code":-1,"uid":0,"ppid":0,"at":"garbage"}"#,
        r#"{"seq":6,"kind":"file","path":null,"exe":null,"argv":[]}"#,
        r#"{"kind":"","seq":-3}"#,
        r#"{}"#,
        r#"{"seq":14,"kind":"fork","pid":9,"ppid":8,"port":1.5,"name":7}"#,
        // Through the general mapping: network lines (their remote end, verdict, caller)…
        r#"{"seq":2,"kind":"net","op":"connect","proto":"tcp","addr":"10.0.0.1","port":443,"pid":5,"netns":4026531840,"verdict":"inside","result":"ok"}"#,
        r#"{"seq":3,"kind":"net","op":"dns","proto":"udp","addr":"127.0.0.53","port":53,"name":"example.com"}"#,
        r#"{"seq":5,"kind":"net","op":"accept","proto":"tcp","addr":"::1","port":40000,"pid":5}"#,
        r#"{"seq":7,"kind":"listening","addr":"::","port":8080,"proto":"tcp6"}"#,
        r#"{"seq":8,"kind":"flow_count","pid":5,"proto":"udp","addr":"127.0.0.1","port":5353,"packets":10,"bytes":1280}"#,
        r#"{"seq":9,"kind":"net_tamper","pid":5,"addr":"10.0.0.2","port":80,"caller_addr":"10.0.0.1","caller_port":443,"caller_netns":1,"fd_swapped":true}"#,
        r#"{"seq":10,"kind":"net_result","pid":5,"addr":"10.0.0.1","port":443,"result":"refused"}"#,
        // …violations (their step: an id, the agent itself, or none)…
        r#"{"seq":4,"kind":"violation","violation":"outside","pid":9,"summary":"s","at":"1970-01-01T00:00:00Z"}"#,
        r#"{"seq":11,"kind":"violation","violation":"credential","pid":9,"summary":"s","tool_call":"3"}"#,
        r#"{"seq":12,"kind":"violation","violation":"persistence","pid":8,"summary":"s","tool_call":null}"#,
        // …types it does not expect, duplicates, not an object.
        r#"{"seq":"8","kind":"file","path":"/x"}"#,
        r#"{"seq":9,"kind":"exec","argv":["a",1,null,{"b":2}]}"#,
        r#"{"seq":10,"kind":"net","port":1.5,"addr":"h"}"#,
        r#"{"seq":11,"seq":12,"kind":"exec"}"#,
        r#"{"seq":18446744073709551615,"kind":"exec"}"#,
        r#"{"seq":13,"kind":"file","path":"/p"} trailing"#,
        r#"[1,2,3]"#,
        "not json",
        "",
        "\u{00e9}{\"seq\":1}",
    ];

    /// How many of LINES, from the first, take the direct way.
    const DIRECT: usize = 8;

    /// Equal bytes, or where they first differ (the requests are long).
    fn same(ours: &[u8], theirs: &[u8], what: &str) {
        if ours != theirs {
            let at = ours.iter().zip(theirs).take_while(|(a, b)| a == b).count();
            panic!(
                "{what}: {} bytes against prost's {}, first different at {at}: {:?} against {:?}",
                ours.len(),
                theirs.len(),
                &ours[at.saturating_sub(8)..(at + 16).min(ours.len())],
                &theirs[at.saturating_sub(8)..(at + 16).min(theirs.len())],
            );
        }
    }

    /// The bytes prost writes for the general mapping's request.
    fn reference(lines: &[&[u8]], observed: u64, resource: &Resource) -> Vec<u8> {
        let records = lines
            .iter()
            .map(|l| mapping::log_record(l, observed))
            .collect();
        mapping::request(resource, records).encode_to_vec()
    }

    #[test]
    fn the_bytes_are_those_of_the_general_mapping() {
        let resource = mapping::resource("s1", &[("team".into(), "a".into())]);
        let mut lines: Vec<&[u8]> = LINES.iter().map(|l| l.as_bytes()).collect();
        lines.push(b"\xff\xfe{");
        lines.push(b"{\"seq\":1,\"kind\":\"exec\",\"exe\":\"\xff\"}");
        // The usual records take the direct way, the others the general mapping.
        for (i, line) in lines.iter().enumerate() {
            let direct = fast_record(line, 1, &mut Vec::new());
            assert_eq!(
                direct,
                i < DIRECT,
                "line {i}: {:?}",
                String::from_utf8_lossy(line)
            );
        }
        // One at a time, so a difference names its line.
        for line in &lines {
            for observed in [0, 7, u64::MAX] {
                let mut b = Batch::new(&resource, 0);
                b.push(line, observed);
                same(
                    &b.finish(),
                    &reference(&[line], observed, &resource),
                    &format!("line {:?}", String::from_utf8_lossy(line)),
                );
            }
        }
        let mut b = Batch::new(&resource, 16);
        for line in &lines {
            b.push(line, 99);
        }
        assert_eq!(b.len(), lines.len());
        same(&b.finish(), &reference(&lines, 99, &resource), "all lines");
        same(
            &Batch::new(&resource, 0).finish(),
            &reference(&[], 1, &resource),
            "no line",
        );
    }

    #[test]
    fn a_long_line_and_many_records_have_lengths_of_several_bytes() {
        let resource = mapping::resource("s2", &[]);
        let long = format!(
            r#"{{"seq":1,"kind":"exec","argv":["{}"],"exe":"/bin/x","pid":70000}}"#,
            "a".repeat(300_000)
        );
        let lines: Vec<&[u8]> = std::iter::repeat_n(long.as_bytes(), 3)
            .chain(std::iter::repeat_n(LINES[2].as_bytes(), 500))
            .collect();
        let mut b = Batch::new(&resource, 0);
        for line in &lines {
            b.push(line, 5);
        }
        same(&b.finish(), &reference(&lines, 5, &resource), "long lines");
    }
}
