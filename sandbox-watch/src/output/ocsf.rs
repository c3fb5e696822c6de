//! The evidence log's events as OCSF 1.3.0 objects (one JSON object a line): for SIEMs and
//! data lakes that read the Open Cybersecurity Schema Framework.
//!
//! | log `kind` | OCSF class (class_uid, category_uid) | activity |
//! |---|---|---|
//! | `exec` | Process Activity (1007, 1) | Launch (1) |
//! | `fork` | Process Activity (1007, 1) | Launch (1): the child is a new process |
//! | `process` | Process Activity (1007, 1) | Other (99), `activity_name` "Running": a process already running when the capture began (its launch was not seen; `process.created_time` is when it started) |
//! | `exit` | Process Activity (1007, 1) | Terminate (2), `exit_code` |
//! | `exec_failed` | Process Activity (1007, 1) | Launch (1), status Failure, `status_detail` the errno name; `process` is the program tried (`file.path`, `cmd_line`), `actor.process` the process that tried |
//! | `file` | File System Activity (1001, 1) | Create 1, Read 2, Update 3 (write), Delete 4, Rename 5 (`file` the old path, `file_result` the new); status Success |
//! | `file_failed` | File System Activity (1001, 1) | as `file`, status Failure, `status_code` the raw result, `status_detail` the errno name; no `file_result` (OCSF keeps it for successes: `new_path` stays in `unmapped`) |
//! | `net` connect | Network Activity (4001, 4) | ok: Open (1); refused: Refuse (5); ECONNRESET: Reset (3); another error: Fail (4); in_progress: Other (99) "Connect" (the outcome comes as a `net_result`) |
//! | `net` listen | Network Activity (4001, 4) | Listen (7) |
//! | `net_result` | Network Activity (4001, 4) | the outcome of an in-progress connect, as for connect |
//! | `net` dns | DNS Activity (4003, 4) | Query (1), `query { hostname, type }` |
//! | `start`, `end`, `violation`, `mount`, others | none | `to_ocsf` returns `None` (OCSF 1.3.0 has no class for a mount or a namespace change) |
//!
//! Every object has what OCSF 1.3.0 requires of its class (base event: `activity_id`,
//! `category_uid`, `class_uid`, `type_uid`, `time`, `severity_id`, `metadata` with `version` and
//! `product.vendor_name`; System Activity classes: `actor`, `device`; Process Activity:
//! `process`; File System Activity: `file` with `name` and `type_id`; Network Activity:
//! `dst_endpoint`). What the log says that OCSF has no attribute for (verdict, netns,
//! credential, persistence, verified, fs, dev, ino, argv, cwd, signal, …) is kept in
//! `unmapped` under its log name; `metadata` carries the record's `seq` (`sequence`), `hash`
//! (`uid`), `kind` (`event_code`) and `at` (`original_time`).
//!
//! Choices:
//! - `severity_id` is Informational (1), Medium (3) for a credential or persistence file and
//!   for anything outside the agent's network namespace.
//! - Files are `type_id` Unknown (0): the log does not say whether a path is a regular file,
//!   a directory or a device. An executable (`process.file`) is a Regular File (1).
//! - `device` is the machine the probe ran on: `type_id` Unknown, `os` Linux; its `hostname`
//!   only when given to [`to_ocsf_on_host`] (the log does not carry it). Without it `device`
//!   has none of the identifying attributes OCSF's `endpoint` constraint asks for.
//! - `src_endpoint` is left out: the probe does not record the local address of a connect.
//! - A unix socket's path is `dst_endpoint.name`; `connection_info.protocol_name` is set for
//!   tcp and udp only (it is an IANA protocol name), other `proto` values stay in `unmapped`.
//! - A listen's `dst_endpoint` is the listening (local) address: it is the responder.
//! - `time` is the record's `at` in epoch milliseconds (0 when `at` is missing or not RFC 3339;
//!   the log always has it), `timezone_offset` its offset in minutes.
//! - `count`, `first_at`/`last_at` (net) become `count`, `start_time`/`end_time`. The record's
//!   `prev` is dropped: the hash chain cannot be checked on OCSF objects anyway.
use serde_json::{Map, Value, json};

use crate::record::{Logged, NetOp, Op, Record};

pub const OCSF_VERSION: &str = "1.3.0";
pub const PRODUCT: &str = "sandbox-watch";

/// The log record's chain fields: mapped into `metadata` (or dropped: `prev`).
const CHAIN_KEYS: [&str; 5] = ["seq", "prev", "hash", "at", "kind"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    FileSystem,
    Process,
    Network,
    Dns,
}

impl Class {
    fn uid(self) -> u64 {
        match self {
            Class::FileSystem => 1001,
            Class::Process => 1007,
            Class::Network => 4001,
            Class::Dns => 4003,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Class::FileSystem => "File System Activity",
            Class::Process => "Process Activity",
            Class::Network => "Network Activity",
            Class::Dns => "DNS Activity",
        }
    }

    fn category(self) -> (u64, &'static str) {
        match self {
            Class::FileSystem | Class::Process => (1, "System Activity"),
            Class::Network | Class::Dns => (4, "Network Activity"),
        }
    }
}

/// The OCSF object for one evidence-log record, or `None` when the record has no OCSF class
/// (`start`, `end`, `violation`, and the counts and hashes written at the end).
#[cfg_attr(not(test), allow(dead_code))]
pub fn to_ocsf(record: &Logged, product_version: &str) -> Option<Value> {
    to_ocsf_on_host(record, product_version, None)
}

/// As [`to_ocsf`], naming the machine the capture ran on in `device.hostname`.
pub fn to_ocsf_on_host(
    logged: &Logged,
    product_version: &str,
    hostname: Option<&str>,
) -> Option<Value> {
    let Value::Object(obj) = logged.to_value() else {
        return None;
    };
    let mut rest = obj.clone();
    for k in CHAIN_KEYS {
        rest.remove(k);
    }
    let mut event = match &logged.record {
        Record::Exec(_) => process_event(&mut rest, 1, "Launch"),
        Record::Process(_) => process_event(&mut rest, 99, "Running"),
        Record::Fork(_) => fork_event(&mut rest),
        Record::Exit(_) => exit_event(&mut rest),
        Record::ExecFailed(_) => exec_failed_event(&mut rest),
        Record::File(f) => file_event(&mut rest, f.op, true),
        Record::FileFailed(f) => file_event(&mut rest, f.op(), false),
        Record::Net(n) => net_event(&mut rest, n.op),
        Record::NetResult(_) => net_event(&mut rest, NetOp::Connect),
        Record::Start(_)
        | Record::Mount(_)
        | Record::NetTamper(_)
        | Record::FlowCount(_)
        | Record::FileCount(_)
        | Record::FileModified(_)
        | Record::FileHash(_)
        | Record::Listening(_)
        | Record::GitRef(_)
        | Record::PackageMeta(_)
        | Record::GitConfig(_)
        | Record::Output(_)
        | Record::Violation(_)
        | Record::Tamper(_)
        | Record::End(_) => return None,
    };
    event.finish(&obj, rest, product_version, hostname);
    Some(Value::Object(event.out))
}

/// An event being built: its class, activity and class-specific attributes.
struct Event {
    class: Class,
    activity_id: u64,
    activity_name: String,
    out: Map<String, Value>,
}

impl Event {
    fn new(class: Class, activity_id: u64, activity_name: &str) -> Event {
        Event {
            class,
            activity_id,
            activity_name: activity_name.to_string(),
            out: Map::new(),
        }
    }

    fn set(&mut self, key: &str, value: Value) {
        self.out.insert(key.to_string(), value);
    }

    fn status(&mut self, id: u64, detail: Option<String>) {
        let name = match id {
            1 => "Success",
            2 => "Failure",
            99 => "Other",
            _ => "Unknown",
        };
        self.set("status_id", json!(id));
        self.set("status", json!(name));
        if let Some(d) = detail {
            self.set("status_detail", json!(d));
        }
    }

    /// The attributes every class shares, and `unmapped` from what is left of the record.
    fn finish(
        &mut self,
        record: &Map<String, Value>,
        mut rest: Map<String, Value>,
        product_version: &str,
        hostname: Option<&str>,
    ) {
        let (category_uid, category_name) = self.class.category();
        let at = record.get("at").and_then(Value::as_str);
        let (time, offset) = at.and_then(parse_rfc3339).unwrap_or((0, 0));
        let outside = rest.get("verdict").and_then(Value::as_str) == Some("outside");
        let flagged = [rest.get("credential"), rest.get("persistence")]
            .into_iter()
            .any(|v| v.and_then(Value::as_bool) == Some(true));
        let (severity_id, severity) = if outside || flagged {
            (3, "Medium")
        } else {
            (1, "Informational")
        };
        if let Some(count) = take_u64(&mut rest, "count") {
            self.set("count", json!(count));
        }
        for (from, to) in [("first_at", "start_time"), ("last_at", "end_time")] {
            if let Some(ms) = take_time(&mut rest, from) {
                self.set(to, json!(ms));
            }
        }

        let mut metadata = Map::new();
        metadata.insert("version".into(), json!(OCSF_VERSION));
        metadata.insert(
            "product".into(),
            json!({ "name": PRODUCT, "vendor_name": PRODUCT, "version": product_version }),
        );
        metadata.insert("profiles".into(), json!(["host"]));
        metadata.insert("log_name".into(), json!("evidence"));
        metadata.insert("log_provider".into(), json!(PRODUCT));
        if let Some(kind) = record.get("kind") {
            metadata.insert("event_code".into(), kind.clone());
        }
        if let Some(at) = at {
            metadata.insert("original_time".into(), json!(at));
        }
        if let Some(seq) = record.get("seq").and_then(Value::as_u64) {
            metadata.insert("sequence".into(), json!(seq));
        }
        if let Some(hash) = record.get("hash").and_then(Value::as_str) {
            metadata.insert("uid".into(), json!(hash));
        }

        let mut device = json!({
            "type_id": 0,
            "type": "Unknown",
            "os": { "name": "Linux", "type_id": 200, "type": "Linux" },
        });
        if let Some(h) = hostname {
            device["hostname"] = json!(h);
        }

        let type_uid = self.class.uid() * 100 + self.activity_id;
        let type_name = format!("{}: {}", self.class.name(), self.activity_name);
        let common = [
            ("activity_id", json!(self.activity_id)),
            ("activity_name", json!(self.activity_name)),
            ("category_uid", json!(category_uid)),
            ("category_name", json!(category_name)),
            ("class_uid", json!(self.class.uid())),
            ("class_name", json!(self.class.name())),
            ("type_uid", json!(type_uid)),
            ("type_name", json!(type_name)),
            ("severity_id", json!(severity_id)),
            ("severity", json!(severity)),
            ("time", json!(time)),
            ("timezone_offset", json!(offset)),
            ("metadata", Value::Object(metadata)),
            ("device", device),
        ];
        for (k, v) in common {
            self.set(k, v);
        }
        rest.retain(|_, v| !v.is_null());
        if !rest.is_empty() {
            self.set("unmapped", Value::Object(rest));
        }
    }
}

/// Removes `key` from the record's remaining fields; `None` when absent or null.
fn take(rest: &mut Map<String, Value>, key: &str) -> Option<Value> {
    rest.remove(key).filter(|v| !v.is_null())
}

fn take_str(rest: &mut Map<String, Value>, key: &str) -> Option<String> {
    match take(rest, key)? {
        Value::String(s) => Some(s),
        other => {
            // Not the type expected: keep it, unmapped.
            rest.insert(key.to_string(), other);
            None
        }
    }
}

fn take_u64(rest: &mut Map<String, Value>, key: &str) -> Option<u64> {
    let v = take(rest, key)?;
    match v.as_u64() {
        Some(n) => Some(n),
        None => {
            rest.insert(key.to_string(), v);
            None
        }
    }
}

fn take_i64(rest: &mut Map<String, Value>, key: &str) -> Option<i64> {
    let v = take(rest, key)?;
    match v.as_i64() {
        Some(n) => Some(n),
        None => {
            rest.insert(key.to_string(), v);
            None
        }
    }
}

/// An RFC 3339 time as epoch milliseconds (kept unmapped when it is not one).
fn take_time(rest: &mut Map<String, Value>, key: &str) -> Option<i64> {
    let v = take(rest, key)?;
    match v.as_str().and_then(parse_rfc3339) {
        Some((ms, _)) => Some(ms),
        None => {
            rest.insert(key.to_string(), v);
            None
        }
    }
}

/// The last component of a path (the path itself for `/` or a path ending in `/`).
fn base_name(path: &str) -> &str {
    match path.rsplit('/').next() {
        Some(name) if !name.is_empty() => name,
        _ => path,
    }
}

/// argv as one shell-readable line: words with anything but `[A-Za-z0-9_@%+=:,./-]` are
/// single-quoted.
/// The argv as one shell command line. Not shlex: shlex also quotes `=`, `%` and `,` (so
/// `--x=1` would become `'--x=1'`) and puts a word with `'` in double quotes; this keeps such
/// options plain and one quoting style (`'it'\''s'`), as the test below pins.
fn cmd_line(argv: &[Value]) -> String {
    let words: Vec<String> = argv
        .iter()
        .map(|a| {
            let s = match a {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let plain = !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_@%+=:,./-".contains(&b));
            if plain {
                s
            } else {
                format!("'{}'", s.replace('\'', r"'\''"))
            }
        })
        .collect();
    words.join(" ")
}

fn pid_process(pid: Option<u64>) -> Value {
    match pid {
        Some(pid) => json!({ "pid": pid }),
        None => json!({}),
    }
}

/// `exec` and `process`: the process object from the program's fields.
fn process_event(rest: &mut Map<String, Value>, activity_id: u64, name: &str) -> Event {
    let mut e = Event::new(Class::Process, activity_id, name);
    let pid = take_u64(rest, "pid");
    let ppid = take_u64(rest, "ppid");
    let exe = take_str(rest, "exe");
    let comm = take_str(rest, "comm");
    let mut process = Map::new();
    if let Some(pid) = pid {
        process.insert("pid".into(), json!(pid));
    }
    // argv stays in unmapped as well: cmd_line is one rendering of it.
    if let Some(argv) = rest.get("argv").and_then(Value::as_array)
        && !argv.is_empty()
    {
        process.insert("cmd_line".into(), json!(cmd_line(argv)));
    }
    let name = comm.or_else(|| exe.as_deref().map(|x| base_name(x).to_string()));
    if let Some(name) = name {
        process.insert("name".into(), json!(name));
    }
    if let Some(exe) = &exe {
        process.insert(
            "file".into(),
            json!({ "path": exe, "name": base_name(exe), "type_id": 1, "type": "Regular File" }),
        );
    }
    if let Some(ppid) = ppid {
        process.insert("parent_process".into(), json!({ "pid": ppid }));
    }
    if let Some(uid) = take_u64(rest, "uid") {
        process.insert("user".into(), json!({ "uid": uid.to_string() }));
    }
    if let Some(ms) = take_time(rest, "started_at") {
        process.insert("created_time".into(), json!(ms));
    }
    if let Some(ms) = take_time(rest, "ended_at") {
        process.insert("terminated_time".into(), json!(ms));
    }
    if let Some(code) = take_i64(rest, "exit_code") {
        e.set("exit_code", json!(code));
    }
    let what = process
        .get("cmd_line")
        .and_then(Value::as_str)
        .or(exe.as_deref())
        .unwrap_or("?")
        .to_string();
    let pid_text = pid.map_or("?".to_string(), |p| p.to_string());
    e.set(
        "message",
        json!(if activity_id == 1 {
            format!("pid {pid_text} ran {what}")
        } else {
            format!("pid {pid_text} was running {what}")
        }),
    );
    // The parent started it (or, unknown, the process itself).
    e.set("actor", json!({ "process": pid_process(ppid.or(pid)) }));
    e.set("process", Value::Object(process));
    e
}

fn fork_event(rest: &mut Map<String, Value>) -> Event {
    let mut e = Event::new(Class::Process, 1, "Launch");
    let pid = take_u64(rest, "pid");
    let ppid = take_u64(rest, "ppid");
    let mut process = pid_process(pid);
    if let Some(ppid) = ppid {
        process["parent_process"] = json!({ "pid": ppid });
    }
    let text = |n: Option<u64>| n.map_or("?".to_string(), |p| p.to_string());
    e.set(
        "message",
        json!(format!("pid {} forked pid {}", text(ppid), text(pid))),
    );
    e.set("actor", json!({ "process": pid_process(ppid.or(pid)) }));
    e.set("process", process);
    e
}

/// A failed exec: a Launch that failed, by the process that tried (the actor); `process` is
/// the program it tried to run.
fn exec_failed_event(rest: &mut Map<String, Value>) -> Event {
    let mut e = Event::new(Class::Process, 1, "Launch");
    let pid = take_u64(rest, "pid");
    let path = take_str(rest, "path").unwrap_or_default();
    let result = take_str(rest, "result");
    let mut process = Map::new();
    process.insert(
        "file".into(),
        json!({ "path": path, "name": base_name(&path), "type_id": 1, "type": "Regular File" }),
    );
    process.insert("name".into(), json!(base_name(&path)));
    // An exec keeps the pid: the program tried would have run as the process that tried.
    if let Some(pid) = pid {
        process.insert("pid".into(), json!(pid));
    }
    if let Some(argv) = rest.get("argv").and_then(Value::as_array)
        && !argv.is_empty()
    {
        process.insert("cmd_line".into(), json!(cmd_line(argv)));
    }
    let pid_text = pid.map_or("?".to_string(), |p| p.to_string());
    let why = result.clone().unwrap_or_else(|| "?".into());
    e.set(
        "message",
        json!(format!("pid {pid_text} tried to run {path} ({why})")),
    );
    e.status(2, result);
    e.set("actor", json!({ "process": pid_process(pid) }));
    e.set("process", Value::Object(process));
    e
}

fn exit_event(rest: &mut Map<String, Value>) -> Event {
    let mut e = Event::new(Class::Process, 2, "Terminate");
    let pid = take_u64(rest, "pid");
    let code = take_i64(rest, "exit_code");
    let signal = rest.get("signal").and_then(Value::as_i64);
    if let Some(code) = code {
        e.set("exit_code", json!(code));
    }
    let pid_text = pid.map_or("?".to_string(), |p| p.to_string());
    let how = match (code, signal) {
        (_, Some(sig)) => format!("was killed by signal {sig}"),
        (Some(code), None) => format!("exited with status {code}"),
        (None, None) => "exited".to_string(),
    };
    e.set("message", json!(format!("pid {pid_text} {how}")));
    e.set("actor", json!({ "process": pid_process(pid) }));
    e.set("process", pid_process(pid));
    e
}

fn file_object(path: &str, sha256: Option<&str>) -> Value {
    let mut file = json!({
        "path": path,
        "name": base_name(path),
        "type_id": 0,
        "type": "Unknown",
    });
    if let Some(hash) = sha256 {
        file["hashes"] = json!([{ "algorithm_id": 3, "algorithm": "SHA-256", "value": hash }]);
    }
    file
}

/// `file` (done) and `file_failed` (the error's name in `result`).
fn file_event(rest: &mut Map<String, Value>, op: Op, done: bool) -> Event {
    rest.remove("op");
    let (activity_id, activity) = op.ocsf_activity();
    let mut e = Event::new(Class::FileSystem, activity_id, activity);
    let pid = take_u64(rest, "pid");
    let path = take_str(rest, "path").unwrap_or_default();
    // file_result is "the resulting file object when the activity was allowed and
    // successful": a failed rename's target stays in unmapped.
    let new_path = if done {
        take_str(rest, "new_path")
    } else {
        rest.get("new_path")
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let sha256 = take_str(rest, "sha256");
    e.set("file", file_object(&path, sha256.as_deref()));
    if let Some(new) = new_path.as_ref().filter(|_| done) {
        e.set("file_result", file_object(new, None));
    }
    let mut message = format!(
        "pid {} {} {path}",
        pid.map_or("?".to_string(), |p| p.to_string()),
        op.as_str()
    );
    if let Some(new) = &new_path {
        message.push_str(&format!(" to {new}"));
    }
    if done {
        e.status(1, None);
    } else {
        let result = take(rest, "result");
        let detail = match result.as_ref().and_then(Value::as_i64) {
            // Older logs wrote the -errno number.
            Some(r) => Some(crate::state::files::errno_name(-(r.unsigned_abs() as i32))),
            None => result.as_ref().and_then(Value::as_str).map(str::to_string),
        };
        if let Some(r) = &result {
            let code = match r {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            e.set("status_code", json!(code));
        }
        message.push_str(&format!(
            " failed ({})",
            detail.as_deref().unwrap_or("no result")
        ));
        e.status(2, detail);
    }
    e.set("message", json!(message));
    e.set("actor", json!({ "process": pid_process(pid) }));
    e
}

/// `net` (connect, listen, dns) and `net_result` (the outcome of an in-progress connect).
fn net_event(rest: &mut Map<String, Value>, op: NetOp) -> Event {
    rest.remove("op");
    let result = take_str(rest, "result");
    let pid = take_u64(rest, "pid");
    let addr = take_str(rest, "addr");
    let port = take_u64(rest, "port");
    let path = take_str(rest, "path");
    let ip: Option<std::net::IpAddr> = addr.as_deref().and_then(|a| a.parse().ok());

    let r = result.as_deref().unwrap_or("");
    let (class_uid, activity_id, activity, status) = op.ocsf(r);
    let class = if class_uid == Class::Dns.uid() {
        Class::Dns
    } else {
        Class::Network
    };
    let mut e = Event::new(class, activity_id, activity);
    match status {
        Some(id) => e.status(id, result.clone()),
        None => {
            if let Some(r) = &result {
                e.set("status_detail", json!(r));
            }
        }
    }

    let mut dst = Map::new();
    match (&addr, ip) {
        (Some(_), Some(ip)) => {
            dst.insert("ip".into(), json!(ip.to_string()));
        }
        // Not an IP address: keep it as the endpoint's name.
        (Some(a), None) => {
            dst.insert("name".into(), json!(a));
        }
        (None, _) => {}
    }
    if let Some(port) = port {
        dst.insert("port".into(), json!(port));
    }
    if let Some(path) = &path {
        dst.insert("name".into(), json!(path));
    }
    // A connect's name (when the log gives one): the DNS name of the destination.
    if op != NetOp::Dns
        && let Some(name) = take_str(rest, "name")
    {
        dst.insert("hostname".into(), json!(name));
    }

    let mut conn = Map::new();
    let direction = if op == NetOp::Listen {
        (1, "Inbound")
    } else {
        (2, "Outbound")
    };
    conn.insert("direction_id".into(), json!(direction.0));
    conn.insert("direction".into(), json!(direction.1));
    let proto_num = match rest.get("proto").and_then(Value::as_str) {
        Some("tcp") => Some(6),
        Some("udp") => Some(17),
        _ => None,
    };
    if let Some(num) = proto_num {
        let name = take_str(rest, "proto").unwrap_or_default();
        conn.insert("protocol_name".into(), json!(name));
        conn.insert("protocol_num".into(), json!(num));
    }
    if let Some(ip) = ip {
        let (id, name) = if ip.to_canonical().is_ipv4() {
            (4, "Internet Protocol version 4 (IPv4)")
        } else {
            (6, "Internet Protocol version 6 (IPv6)")
        };
        conn.insert("protocol_ver_id".into(), json!(id));
        conn.insert("protocol_ver".into(), json!(name));
        if ip.to_canonical().is_loopback() {
            conn.insert("boundary_id".into(), json!(1));
            conn.insert("boundary".into(), json!("Localhost"));
        }
    }

    let where_to = match (&path, &addr, port) {
        (Some(p), _, _) => p.clone(),
        (None, Some(a), Some(p)) if a.contains(':') => format!("[{a}]:{p}"),
        (None, Some(a), Some(p)) => format!("{a}:{p}"),
        (None, Some(a), None) => a.clone(),
        (None, None, _) => "?".to_string(),
    };
    let pid_text = pid.map_or("?".to_string(), |p| p.to_string());
    let message = if class == Class::Dns {
        let name = take_str(rest, "name");
        let qtype = take_str(rest, "qtype");
        if let Some(name) = name.as_ref().filter(|n| !n.is_empty()) {
            let mut query = json!({ "hostname": name, "opcode_id": 0, "opcode": "Query" });
            if let Some(t) = &qtype {
                query["type"] = json!(t);
            }
            e.set("query", query);
        }
        format!(
            "pid {pid_text} looked up {} ({}) via {where_to}",
            name.as_deref().unwrap_or("?"),
            qtype.as_deref().unwrap_or("?")
        )
    } else {
        format!(
            "pid {pid_text} {} {where_to}: {}",
            op.as_str(),
            if r.is_empty() { "?" } else { r }
        )
    };
    e.set("message", json!(message));
    // actor is optional in the network classes: left out rather than empty.
    if pid.is_some() {
        e.set("actor", json!({ "process": pid_process(pid) }));
    }
    // Required by Network Activity (there, even empty when the log has no address), only
    // recommended by DNS Activity.
    if !(dst.is_empty() && class == Class::Dns) {
        e.set("dst_endpoint", Value::Object(dst));
    }
    e.set("connection_info", Value::Object(conn));
    e
}

/// An RFC 3339 date-time (`2026-11-30T11:20:51.285371778Z`, `…+02:00`) as epoch milliseconds
/// and the offset from UTC in minutes.
fn parse_rfc3339(s: &str) -> Option<(i64, i64)> {
    crate::time::parse(s).map(|t| (t.unix_ms(), i64::from(t.offset_s / 60)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log line as a record.
    fn logged(v: &Value) -> Logged {
        let mut v = v.clone();
        if let Value::Object(m) = &mut v {
            m.entry("at").or_insert_with(|| AT.into());
        }
        Logged::from_value(&v).unwrap_or_else(|| panic!("not a record: {v}"))
    }

    const AT: &str = "2026-11-30T11:20:51.291179710Z";
    /// 2026-11-30T11:20:51.291Z in epoch milliseconds (`date -d … +%s%3N`).
    const AT_MS: i64 = 1_796_037_651_291;

    /// Required by OCSF 1.3.0 at the top level of every event: base_event.json with
    /// includes/classification.json and includes/occurrence.json.
    const BASE_REQUIRED: [&str; 7] = [
        "activity_id",
        "category_uid",
        "class_uid",
        "type_uid",
        "time",
        "severity_id",
        "metadata",
    ];

    /// Required at the top level by the class and the category event it extends.
    fn class_required(class_uid: u64) -> &'static [&'static str] {
        match class_uid {
            // events/system/system.json: actor, device; events/system/process.json: process.
            1007 => &["actor", "device", "process"],
            // events/system/system.json: actor, device; events/system/filesystem.json: actor, file.
            1001 => &["actor", "device", "file"],
            // events/network/network.json: dst_endpoint.
            4001 => &["dst_endpoint"],
            // events/network/dns.json overrides dst_endpoint to recommended.
            4003 => &[],
            other => panic!("unexpected class {other}"),
        }
    }

    fn is_present(v: &Value, key: &str) -> bool {
        v.get(key).is_some_and(|x| !x.is_null())
    }

    /// Asserts what OCSF 1.3.0 requires of the objects present (objects/*.json "required"
    /// attributes and `at_least_one` constraints).
    fn check_object(kind: &str, v: &Value) {
        let req: &[&str] = match kind {
            "metadata" => &["product", "version"],
            "product" => &["vendor_name"],
            "device" => &["type_id"],
            "os" => &["name", "type_id"],
            "file" => &["name", "type_id"],
            "connection_info" => &["direction_id"],
            "query" => &["hostname"],
            "fingerprint" => &["algorithm_id", "value"],
            _ => &[],
        };
        for k in req {
            assert!(is_present(v, k), "{kind} lacks required {k}: {v}");
        }
        let one_of: &[&str] = match kind {
            "process" => &["pid", "uid"],
            "actor" => &[
                "process",
                "user",
                "invoked_by",
                "session",
                "app_name",
                "app_uid",
            ],
            "user" => &["account", "name", "uid"],
            "product" => &["name", "uid"],
            "endpoint" => &[
                "ip",
                "uid",
                "name",
                "hostname",
                "svc_name",
                "instance_uid",
                "interface_uid",
                "interface_name",
            ],
            _ => &[],
        };
        if !one_of.is_empty() {
            assert!(
                one_of.iter().any(|k| is_present(v, k)),
                "{kind} has none of {one_of:?}: {v}"
            );
        }
        let children: &[(&str, &str)] = match kind {
            "metadata" => &[("product", "product")],
            "device" => &[("os", "os")],
            "actor" => &[("process", "process"), ("user", "user")],
            "process" => &[
                ("file", "file"),
                ("parent_process", "process"),
                ("user", "user"),
            ],
            "file" => &[],
            _ => &[],
        };
        for (k, child) in children {
            if let Some(c) = v.get(k) {
                check_object(child, c);
            }
        }
        if kind == "file"
            && let Some(hashes) = v.get("hashes")
        {
            for h in hashes.as_array().expect("hashes is an array") {
                check_object("fingerprint", h);
            }
        }
    }

    /// Every requirement of the class, and the numbers that must agree.
    fn check(e: &Value) -> u64 {
        for k in BASE_REQUIRED {
            assert!(is_present(e, k), "missing {k}: {e}");
        }
        let class = e["class_uid"].as_u64().unwrap();
        for k in class_required(class) {
            assert!(is_present(e, k), "class {class} lacks {k}: {e}");
        }
        let activity = e["activity_id"].as_u64().unwrap();
        assert_eq!(e["type_uid"].as_u64().unwrap(), class * 100 + activity);
        assert_eq!(e["category_uid"].as_u64().unwrap(), class / 1000);
        assert_eq!(e["metadata"]["version"], "1.3.0");
        assert_eq!(e["metadata"]["product"]["name"], "sandbox-watch");
        assert_eq!(e["metadata"]["product"]["vendor_name"], "sandbox-watch");
        assert!(e["time"].is_i64());
        for (k, kind) in [
            ("metadata", "metadata"),
            ("device", "device"),
            ("actor", "actor"),
            ("process", "process"),
            ("file", "file"),
            ("file_result", "file"),
            ("dst_endpoint", "endpoint"),
            ("src_endpoint", "endpoint"),
            ("connection_info", "connection_info"),
            ("query", "query"),
        ] {
            if let Some(v) = e.get(k) {
                check_object(kind, v);
            }
        }
        class
    }

    fn ocsf(record: Value) -> Value {
        to_ocsf(&logged(&record), "0.1.0").unwrap_or_else(|| panic!("no OCSF for {record}"))
    }

    fn with_chain(kind: &str, fields: Value) -> Value {
        let mut r = json!({ "seq": 7, "prev": "00", "hash": "ab12", "at": AT, "kind": kind });
        for (k, v) in fields.as_object().unwrap() {
            r[k] = v.clone();
        }
        r
    }

    #[test]
    fn exec_is_a_process_launch() {
        // A record as the log writes it (from a real run).
        let r = with_chain(
            "exec",
            json!({"argv":["sh","-c","cd /tmp && echo hi \"two words\""],"argv_truncated":false,
              "cgroup_id":1,"comm":"sh","cwd":"/tmp/t1","euid":0,"exe":"/usr/bin/sh",
              "fork_only":false,"gid":0,"launcher":false,"mntns":4026531832u64,
              "netns":4026531833u64,"pid":30266,"pidns":4026531836u64,"ppid":30261,
              "preexisting":false,"started_at":"2026-11-30T11:20:51.291179710Z","uid":1000,
              "userns":4026531837u64,"verdict":"inside"}),
        );
        let e = ocsf(r);
        assert_eq!(check(&e), 1007);
        assert_eq!(
            (e["activity_id"].as_u64(), e["type_uid"].as_u64()),
            (Some(1), Some(100701))
        );
        assert_eq!(e["activity_name"], "Launch");
        assert_eq!(e["category_uid"], 1);
        assert_eq!(e["severity_id"], 1);
        assert_eq!(e["time"], AT_MS);
        assert_eq!(e["timezone_offset"], 0);
        let p = &e["process"];
        assert_eq!(p["pid"], 30266);
        assert_eq!(p["name"], "sh");
        assert_eq!(p["cmd_line"], r#"sh -c 'cd /tmp && echo hi "two words"'"#);
        assert_eq!(
            p["file"],
            json!({"path":"/usr/bin/sh","name":"sh","type_id":1,"type":"Regular File"})
        );
        assert_eq!(p["parent_process"], json!({"pid": 30261}));
        assert_eq!(p["user"], json!({"uid": "1000"}));
        assert_eq!(p["created_time"], AT_MS);
        assert_eq!(e["actor"], json!({"process": {"pid": 30261}}));
        let m = &e["metadata"];
        assert_eq!(m["original_time"], AT);
        assert_eq!(m["sequence"], 7);
        assert_eq!(m["uid"], "ab12");
        assert_eq!(m["event_code"], "exec");
        assert_eq!(m["product"]["version"], "0.1.0");
        let u = &e["unmapped"];
        assert_eq!(u["verdict"], "inside");
        assert_eq!(u["netns"], 4026531833u64);
        assert_eq!(u["cwd"], "/tmp/t1");
        assert_eq!(u["argv"][2], "cd /tmp && echo hi \"two words\"");
        for gone in [
            "pid",
            "ppid",
            "exe",
            "comm",
            "uid",
            "started_at",
            "seq",
            "hash",
            "prev",
            "at",
            "kind",
        ] {
            assert!(u.get(gone).is_none(), "{gone} is mapped, not unmapped");
        }
    }

    #[test]
    fn exit_fork_and_process() {
        let e = ocsf(with_chain(
            "exit",
            json!({"exit_code": 3, "pid": 30268, "signal": null}),
        ));
        assert_eq!(check(&e), 1007);
        assert_eq!(
            (e["activity_id"].as_u64(), e["type_uid"].as_u64()),
            (Some(2), Some(100702))
        );
        assert_eq!(e["exit_code"], 3);
        assert_eq!(e["process"]["pid"], 30268);
        assert!(e.get("unmapped").is_none(), "null signal is not kept: {e}");
        let e = ocsf(with_chain(
            "exit",
            json!({"exit_code": null, "pid": 5, "signal": 9}),
        ));
        assert_eq!(e["unmapped"]["signal"], 9);
        assert!(e.get("exit_code").is_none());
        assert_eq!(e["message"], "pid 5 was killed by signal 9");

        let e = ocsf(with_chain("fork", json!({"pid": 30268, "ppid": 30266})));
        assert_eq!(check(&e), 1007);
        assert_eq!(e["type_uid"], 100701);
        assert_eq!(
            e["process"],
            json!({"pid": 30268, "parent_process": {"pid": 30266}})
        );
        assert_eq!(e["actor"]["process"]["pid"], 30266);

        let e = ocsf(with_chain(
            "process",
            json!({"pid": 1234, "ppid": 1, "exe": "/usr/bin/python3", "argv": ["python3", "agent.py"],
                   "preexisting": true, "started_at": "2026-11-30T10:00:00Z", "ended_at": null,
                   "exit_code": null, "verdict": "outside", "running_at_end": true}),
        ));
        assert_eq!(check(&e), 1007);
        assert_eq!(
            (e["activity_id"].as_u64(), e["type_uid"].as_u64()),
            (Some(99), Some(100799))
        );
        assert_eq!(e["activity_name"], "Running");
        assert_eq!(e["process"]["name"], "python3");
        assert_eq!(e["process"]["cmd_line"], "python3 agent.py");
        assert_eq!(e["process"]["created_time"], 1_796_032_800_000i64);
        assert_eq!(e["severity_id"], 3, "outside the agent's namespace");
        assert_eq!(e["unmapped"]["preexisting"], true);
    }

    #[test]
    fn file_ops_map_to_activities() {
        for (op, id) in [
            ("create", 1),
            ("read", 2),
            ("write", 3),
            ("delete", 4),
            ("rename", 5),
        ] {
            let mut fields = json!({"count":2,"credential":false,"dev":"254:0","fs":"ext2/3/4",
                "ino":672,"magic":"0xef53","op":op,"path":"/etc/ld.so.cache","persistence":false,
                "pid":30266,"verified":false});
            if op == "rename" {
                fields["new_path"] = json!("/tmp/new name");
            }
            let e = ocsf(with_chain("file", fields));
            assert_eq!(check(&e), 1001, "{op}");
            assert_eq!(e["activity_id"], id, "{op}");
            assert_eq!(e["type_uid"], 100100 + id, "{op}");
            assert_eq!(e["status_id"], 1);
            assert_eq!(e["count"], 2);
            assert_eq!(e["actor"]["process"]["pid"], 30266);
            assert_eq!(e["file"]["path"], "/etc/ld.so.cache");
            assert_eq!(e["file"]["name"], "ld.so.cache");
            assert_eq!(e["file"]["type_id"], 0);
            assert_eq!(e["unmapped"]["fs"], "ext2/3/4");
            assert_eq!(e["unmapped"]["ino"], 672);
            assert_eq!(e["unmapped"]["credential"], false);
            assert_eq!(e["unmapped"]["persistence"], false);
            assert_eq!(e["unmapped"]["verified"], false);
            if op == "rename" {
                assert_eq!(e["file_result"]["path"], "/tmp/new name");
                assert_eq!(e["file_result"]["name"], "new name");
            } else {
                assert!(e.get("file_result").is_none());
            }
        }
    }

    #[test]
    fn file_hashes_flags_and_failures() {
        let sha = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        let e = ocsf(with_chain(
            "file",
            json!({"op":"write","path":"/home/u/.bashrc","pid":9,"persistence":true,
                   "credential":false,"verified":true,"sha256":sha}),
        ));
        check(&e);
        assert_eq!(
            e["file"]["hashes"],
            json!([{"algorithm_id":3,"algorithm":"SHA-256","value":sha}])
        );
        assert_eq!(e["severity_id"], 3);
        assert_eq!(e["unmapped"]["persistence"], true);

        let e = ocsf(with_chain(
            "file_failed",
            json!({"new_path":null,"op":"delete","path":"/tmp/p/.git/logs/AUTO_MERGE","pid":3518,"result":-2}),
        ));
        assert_eq!(check(&e), 1001);
        assert_eq!(e["type_uid"], 100104);
        assert_eq!(e["status_id"], 2);
        assert_eq!(e["status"], "Failure");
        assert_eq!(e["status_code"], "ENOENT", "older logs' -2, named");
        assert_eq!(e["status_detail"], "ENOENT");
        assert!(e.get("unmapped").is_none(), "{e}");
        // The root directory still has a name.
        let e = ocsf(with_chain(
            "file",
            json!({"op":"read","path":"/","pid":1,"credential":false,"persistence":false}),
        ));
        assert_eq!(e["file"]["name"], "/");
    }

    #[test]
    fn network_connects_and_listens() {
        let net = |fields: Value| ocsf(with_chain("net", fields));
        let e = net(
            json!({"pid":7,"op":"connect","proto":"tcp","addr":"93.184.216.34","port":443,
            "result":"ok","netns":4026531833u64,"verdict":"inside","count":1,
            "first_at":AT,"last_at":AT}),
        );
        assert_eq!(check(&e), 4001);
        assert_eq!(
            (e["activity_id"].as_u64(), e["type_uid"].as_u64()),
            (Some(1), Some(400101))
        );
        assert_eq!(e["category_uid"], 4);
        assert_eq!(e["status_id"], 1);
        assert_eq!(e["dst_endpoint"], json!({"ip":"93.184.216.34","port":443}));
        let c = &e["connection_info"];
        assert_eq!(
            (c["direction_id"].as_u64(), c["protocol_name"].as_str()),
            (Some(2), Some("tcp"))
        );
        assert_eq!(c["protocol_num"], 6);
        assert_eq!(c["protocol_ver_id"], 4);
        assert!(c.get("boundary_id").is_none());
        assert_eq!(e["start_time"], AT_MS);
        assert_eq!(
            e["unmapped"],
            json!({"netns":4026531833u64,"verdict":"inside"})
        );

        let e = net(
            json!({"pid":7,"op":"connect","proto":"tcp","addr":"::1","port":8000,"result":"refused"}),
        );
        check(&e);
        assert_eq!(
            (e["activity_id"].as_u64(), e["status_id"].as_u64()),
            (Some(5), Some(2))
        );
        assert_eq!(e["connection_info"]["protocol_ver_id"], 6);
        assert_eq!(e["connection_info"]["boundary_id"], 1);

        let e = net(
            json!({"pid":7,"op":"connect","proto":"tcp","addr":"10.9.9.9","port":22,"result":"ETIMEDOUT",
                   "name":"git.example"}),
        );
        check(&e);
        assert_eq!(e["dst_endpoint"]["hostname"], "git.example");
        assert_eq!(
            (e["activity_id"].as_u64(), e["status_detail"].as_str()),
            (Some(4), Some("ETIMEDOUT"))
        );

        let e = net(
            json!({"pid":7,"op":"connect","proto":"tcp","addr":"10.9.9.9","port":22,"result":"in_progress"}),
        );
        check(&e);
        assert_eq!(
            (e["type_uid"].as_u64(), e["activity_name"].as_str()),
            (Some(400199), Some("Connect"))
        );
        assert_eq!(e["status_id"], 0);

        let e = ocsf(with_chain(
            "net_result",
            json!({"pid":7,"addr":"10.9.9.9","port":22,"result":"ok"}),
        ));
        check(&e);
        assert_eq!(e["type_uid"], 400101);
        assert_eq!(e["metadata"]["event_code"], "net_result");

        let e = net(
            json!({"pid":8,"op":"listen","proto":"tcp","addr":"127.0.0.1","port":8000,
            "result":"ok","listening_at_end":true,"verdict":"outside"}),
        );
        check(&e);
        assert_eq!(
            (e["activity_id"].as_u64(), e["type_uid"].as_u64()),
            (Some(7), Some(400107))
        );
        assert_eq!(e["connection_info"]["direction_id"], 1);
        assert_eq!(e["severity_id"], 3);
        assert_eq!(e["unmapped"]["listening_at_end"], true);

        let e = net(
            json!({"pid":8,"op":"connect","proto":"unix","path":"/run/docker.sock","result":"ok"}),
        );
        check(&e);
        assert_eq!(e["dst_endpoint"], json!({"name":"/run/docker.sock"}));
        assert!(e["connection_info"].get("protocol_name").is_none());
        assert_eq!(e["unmapped"]["proto"], "unix");
    }

    #[test]
    fn dns_is_dns_activity() {
        let e = ocsf(with_chain(
            "net",
            json!({"pid":9,"op":"dns","proto":"udp","addr":"127.0.0.53","port":53,
                   "name":"mfrggzdfmztwq2lk.x1.attacker.net","qtype":"TXT","result":"sent",
                   "verdict":"inside","count":1}),
        ));
        assert_eq!(check(&e), 4003);
        assert_eq!(
            (e["activity_id"].as_u64(), e["type_uid"].as_u64()),
            (Some(1), Some(400301))
        );
        assert_eq!(e["class_name"], "DNS Activity");
        assert_eq!(e["query"]["hostname"], "mfrggzdfmztwq2lk.x1.attacker.net");
        assert_eq!(e["query"]["type"], "TXT");
        assert_eq!(e["dst_endpoint"], json!({"ip":"127.0.0.53","port":53}));
        assert_eq!(e["status_detail"], "sent");
        assert!(e.get("status_id").is_none());
        // A malformed question: the partial name is the hostname, the reason stays.
        let e = ocsf(with_chain(
            "net",
            json!({"pid":9,"op":"dns","proto":"udp","addr":"10.0.0.2","port":53,"name":"aaaa",
                   "malformed":"name longer than 255 bytes","result":"malformed"}),
        ));
        check(&e);
        assert_eq!(e["query"]["hostname"], "aaaa");
        assert_eq!(e["unmapped"]["malformed"], "name longer than 255 bytes");
        let e = ocsf(with_chain("net", json!({"op":"dns","name":"","pid":1})));
        check(&e);
        assert!(e.get("query").is_none());
    }

    #[test]
    fn records_without_a_class() {
        let start = json!({"target": {"mode": "run", "command": [], "pid": null, "container": null},
            "probe": {"file_open": "tracepoint", "gaps": []}, "agent": {"netns": null}});
        for (kind, fields) in [
            ("start", start),
            ("end", json!({"events": 1})),
            ("violation", json!({"pid": 1, "summary": "s"})),
            ("file_count", json!({"pid": 1, "path": "/x", "count": 2})),
            ("file_hash", json!({"path": "/x", "sha256": null})),
            ("listening", json!({"pid": 1, "listening_at_end": true})),
        ] {
            assert_eq!(
                to_ocsf(&logged(&with_chain(kind, fields)), "0.1.0"),
                None,
                "{kind}"
            );
        }
    }

    #[test]
    fn records_with_only_their_required_fields() {
        for v in [
            json!({"kind": "exec", "pid": 1}),
            json!({"kind": "process", "pid": 1, "ppid": 0, "exe": null, "argv": [], "cwd": null,
                "uid": null, "netns": null, "verdict": "inside", "started_at": "?",
                "ended_at": null, "exit_code": null, "signal": null, "running_at_end": true,
                "fork_only": false, "preexisting": true, "comm": null, "euid": null, "gid": null,
                "mntns": null, "pidns": null, "userns": null, "cgroup_id": null,
                "duration_ms": 0}),
            json!({"kind": "fork", "pid": 2, "ppid": 1}),
            json!({"kind": "exit", "pid": 2}),
            json!({"kind": "file", "pid": 1, "op": "read", "path": "/", "credential": false,
                "persistence": false, "count": 1}),
            json!({"kind": "file_failed", "pid": 1, "op": "delete", "path": "/x",
                "result": "ENOENT"}),
            json!({"kind": "net", "pid": 1, "op": "connect", "proto": "tcp", "result": "ok",
                "addr": "127.0.0.1"}),
            json!({"kind": "net_result", "pid": 1, "result": "ok", "addr": "::1", "port": 1}),
            json!({"kind": "exec_failed", "pid": 1, "path": "/x", "argv": ["x"],
                "result": "EACCES", "syscall": "execve", "from_caller_memory": true}),
        ] {
            let e = ocsf(v.clone());
            check(&e);
            // What the record has that OCSF has no place for is kept, not lost.
            assert_eq!(
                e["type_uid"].as_u64().unwrap() / 100,
                e["class_uid"].as_u64().unwrap(),
                "{v}"
            );
        }
        let e = ocsf(json!({"kind":"exec","pid":1,"argv":[],"exe":"/bin/true"}));
        assert!(e["process"].get("cmd_line").is_none());
        assert_eq!(e["message"], "pid 1 ran /bin/true");
    }

    #[test]
    fn a_failed_exec_is_a_failed_launch_of_the_program_tried() {
        let e = ocsf(
            json!({"kind": "exec_failed", "pid": 7, "path": "/usr/bin/zsh",
            "argv": ["zsh", "-l"], "result": "ENOENT", "syscall": "execve",
            "from_caller_memory": true}),
        );
        check(&e);
        assert_eq!(
            (e["class_uid"].as_u64(), e["activity_id"].as_u64()),
            (Some(1007), Some(1))
        );
        assert_eq!(
            (e["status_id"].as_u64(), e["status_detail"].as_str()),
            (Some(2), Some("ENOENT"))
        );
        assert_eq!(e["process"]["file"]["path"], "/usr/bin/zsh");
        assert_eq!(e["process"]["cmd_line"], "zsh -l");
        assert_eq!(e["actor"]["process"]["pid"], 7);
        assert_eq!(e["process"]["pid"], 7);
        assert_eq!(e["message"], "pid 7 tried to run /usr/bin/zsh (ENOENT)");
        assert_eq!(e["unmapped"]["from_caller_memory"], true, "{e:#}");
    }

    #[test]
    fn host_name_goes_to_device() {
        let r = with_chain("fork", json!({"pid": 2, "ppid": 1}));
        let e = to_ocsf_on_host(&logged(&r), "0.1.0", Some("ci-runner-7")).unwrap();
        assert_eq!(e["device"]["hostname"], "ci-runner-7");
        check_object("endpoint", &e["device"]);
        assert!(ocsf(r)["device"].get("hostname").is_none());
    }

    #[test]
    fn rfc3339_times() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some((0, 0)));
        assert_eq!(parse_rfc3339(AT), Some((AT_MS, 0)));
        assert_eq!(
            parse_rfc3339("2026-11-30T11:20:51.2Z"),
            Some((AT_MS - 91, 0))
        );
        assert_eq!(
            parse_rfc3339("2026-11-30T12:20:51.291+01:00"),
            Some((AT_MS, 60))
        );
        assert_eq!(
            parse_rfc3339("2026-11-30t06:50:51.291-04:30"),
            Some((AT_MS, -270))
        );
        assert_eq!(
            parse_rfc3339("2000-02-29T00:00:00Z"),
            Some((951_782_400_000, 0))
        );
        assert_eq!(parse_rfc3339("1969-12-31T23:59:59Z"), Some((-1000, 0)));
        // ISO 8601's offset without a colon is read too (jiff's parser; the log writes `Z`).
        assert_eq!(
            parse_rfc3339("2026-11-30T12:20:51.291+0100"),
            Some((AT_MS, 60))
        );
        for bad in [
            "",
            "2026-11-30",
            "2026-11-30T11:20:51",
            "2026-13-01T00:00:00Z",
            "2026-11-30T11:20:51.Z",
            "2026-11-30T11:20:51Zjunk",
            "2026-11-30T25:00:00Z",
            "２026-11-30T11:20:51Z",
            "2026-11-30T11:20:51.1é",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn command_lines_are_shell_quoted() {
        let argv = json!(["a b", "it's", "", "--x=1", "ok/path.txt", "$HOME"]);
        assert_eq!(
            cmd_line(argv.as_array().unwrap()),
            r#"'a b' 'it'\''s' '' --x=1 ok/path.txt '$HOME'"#
        );
    }

    /// Records from real runs (the chain fields included), one of each kind and file op.
    const REAL: &str = r#"{"seq":0,"prev":"0000000000000000000000000000000000000000000000000000000000000000","hash":"cf79b48b6e0582558503513ac93c5b46aebae4ff803f3f733fe69c3c09a19920","at":"2026-11-30T11:20:51.285371778Z","kind":"start","agent":{"netns":null},"probe":{"file_open":"tracepoint","gaps":["file opens made through io_uring (the fentry hook on security_file_open was refused by this kernel; the syscall tracepoints used instead do not see them)"]},"target":{"command":["sh","-c","cd /tmp && echo hi \"two words\" && ls / >/dev/null; cat /etc/hostname"],"container":null,"mode":"run","pid":null},"version":"0.1.0"}
{"seq":1,"prev":"cf79b48b6e0582558503513ac93c5b46aebae4ff803f3f733fe69c3c09a19920","hash":"1c2c824a12479bf258c039dcfda3fa62be56b214f4cfa94857345f318092ffe8","at":"2026-11-30T11:20:51.291179710Z","kind":"exec","argv":["sh","-c","cd /tmp && echo hi \"two words\" && ls / >/dev/null; cat /etc/hostname"],"argv_truncated":false,"cgroup_id":1,"comm":"sh","cwd":"/tmp/t1","euid":0,"exe":"/usr/bin/sh","fork_only":false,"gid":0,"launcher":false,"mntns":4026531832,"netns":4026531833,"pid":30266,"pidns":4026531836,"ppid":30261,"preexisting":false,"started_at":"2026-11-30T11:20:51.291179710Z","uid":0,"userns":4026531837,"verdict":"inside"}
{"seq":2,"prev":"1c2c824a12479bf258c039dcfda3fa62be56b214f4cfa94857345f318092ffe8","hash":"c5fcdde3618d2897e58e0d72b9bc63dc6dd6bebfa5daf69a9cca4b035b8e5d83","at":"2026-11-30T11:20:51.291769299Z","kind":"file","count":1,"credential":false,"dev":"254:0","fs":"ext2/3/4","ino":672,"magic":"0xef53","op":"read","path":"/etc/ld.so.cache","persistence":false,"pid":30266,"verified":false}
{"seq":4,"prev":"4211435ae9f0710a07b31eb5e012dc0680cd5c5c7789f8e9aa9b7a09e4ea77aa","hash":"80c4c8d7ab9a6f51c3beb57a43ea399aa429971144bba9bdb2743b47f2744b45","at":"2026-11-30T11:20:51.292139661Z","kind":"file","count":1,"credential":false,"dev":"0:6","fs":"tmpfs","ino":3,"magic":"0x1021994","op":"write","path":"/dev/null","persistence":false,"pid":30266,"verified":false}
{"seq":5,"prev":"80c4c8d7ab9a6f51c3beb57a43ea399aa429971144bba9bdb2743b47f2744b45","hash":"5186421bf29c1edd8e2b22249fccf314192bb74fc44c6ab10183b7b38864a790","at":"2026-11-30T11:20:51.292208754Z","kind":"fork","pid":30268,"ppid":30266}
{"seq":28,"prev":"4747e88e8a3a15fa44a056581d9f11184dc4a510f52fecccac8fd5da2aab29e4","hash":"b90b5ef8877407f0b7d4364bede84140c6611e9637955987643dc80db7009f2c","at":"2026-11-30T11:20:51.295299865Z","kind":"exit","exit_code":0,"pid":30268,"signal":null}
{"seq":51,"prev":"75c48f2deccc1c2c50824e96fa70ca5829914172b3c9fc5961b9ecaf81188b51","hash":"53c00a26dc712446e4f5a2a1fe6220204fb33d9428499446c7c875171b4a97d4","at":"2026-11-30T11:20:52.299505692Z","kind":"end","complete":false,"ended_by":"the agent exited","events":50,"exit":{"code":0,"signal":null},"files":42,"lost":0,"processes":3,"verdict":"inside","violations":0}
{"seq":41,"prev":"2db7210fe1ed7c16668cf195ef213afa47a896a689093843aeda9abbfd279b88","hash":"b8a1ee6447a3e47c9d63da6ac8b880a3935858037702b2193a46b5eb80e0ff1b","at":"2026-11-30T11:24:17.000605373Z","kind":"file","count":1,"credential":false,"dev":"254:0","fs":"ext2/3/4","ino":10035277,"magic":"0xef53","op":"create","path":"/tmp/sandbox-watch-demo-3509/project/.git/description","persistence":false,"pid":3514,"verified":false}
{"seq":76,"prev":"a140b22f287e53862dccb268d0dda566798f6e59e7fa206fe701edf9186d83a3","hash":"5d9623f96436b68ea03cca4418db48f704ff954cc8e7e708c4a16db6b48d8343","at":"2026-11-30T11:24:17.002975989Z","kind":"file","count":1,"credential":false,"new_path":"/tmp/sandbox-watch-demo-3509/project/.git/config","op":"rename","path":"/tmp/sandbox-watch-demo-3509/project/.git/config.lock","persistence":false,"pid":3514,"verified":false}
{"seq":86,"prev":"d00b07f60b4a69da1c5dafd5fdc50038c6b1ec7de53d5da206923dc8e6ae73c9","hash":"e229e5f78fa691bb339951fab6ebf1ce9e7eeeed65403084a65929d7066066fa","at":"2026-11-30T11:24:17.003833889Z","kind":"file","count":1,"credential":false,"op":"delete","path":"/tmp/sandbox-watch-demo-3509/project/.git/t8dYh1o","persistence":false,"pid":3514,"verified":false}
{"seq":179,"prev":"295cb17b20fdf25fc85cea4bebd63f32f20f2f8e51b39b0e1f8669d3a4e88796","hash":"158e918c90a3b3ece09f49fbaa4c1a9118ad747027c2cc39b785e5e9122ac384","at":"2026-11-30T11:24:17.012412023Z","kind":"file_failed","new_path":null,"op":"delete","path":"/tmp/sandbox-watch-demo-3509/project/.git/logs/AUTO_MERGE","pid":3518,"result":-2}
{"seq":1585,"prev":"b48f60cd06d01196872e9560a6150d340d78a7ac4569f0fb25a80a56f6a0e2f3","hash":"c3897e147ca3c624d86ad7493de6f6cf21cb3c8d5b17b1d6611607ab2079a0c5","at":"2026-11-30T11:24:18.287896333Z","kind":"violation","pid":3511,"summary":"pid 3511 created credential /tmp/sandbox-watch-demo-3509/home/.netrc (verified on ext2/3/4)"}
"#;

    #[test]
    fn real_records() {
        let want = [
            ("start", None),
            ("exec", Some(100701)),
            ("file", Some(100102)),
            ("file", Some(100103)),
            ("fork", Some(100701)),
            ("exit", Some(100702)),
            ("end", None),
            ("file", Some(100101)),
            ("file", Some(100105)),
            ("file", Some(100104)),
            ("file_failed", Some(100104)),
            ("violation", None),
        ];
        let records: Vec<Value> = REAL
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(records.len(), want.len());
        for (record, (kind, type_uid)) in records.iter().zip(want) {
            assert_eq!(record["kind"], kind);
            let got = to_ocsf(&logged(record), "0.1.0");
            assert_eq!(
                got.as_ref().map(|e| e["type_uid"].as_u64().unwrap()),
                type_uid,
                "{record}"
            );
            let Some(e) = got else { continue };
            check(&e);
            assert_eq!(e["metadata"]["uid"], record["hash"]);
            assert_eq!(e["metadata"]["sequence"], record["seq"]);
            assert!(e["time"].as_i64().unwrap() > 1_790_000_000_000);
            if kind == "file_failed" {
                assert_eq!(
                    (e["status_id"].as_u64(), e["status_detail"].as_str()),
                    (Some(2), Some("ENOENT"))
                );
            }
        }
    }
}
