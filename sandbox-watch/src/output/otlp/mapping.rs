//! One log line → one OpenTelemetry LogRecord (the mapping is documented in the README and in
//! [`super`]): the body is the line's exact text, so anyone downstream can recompute the chain;
//! the attributes are read from it for searching and are not part of the evidence.
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{
    AnyValue, ArrayValue, InstrumentationScope, KeyValue, any_value,
};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs, SeverityNumber};
use opentelemetry_proto::tonic::resource::v1::Resource;
use serde_json::Value;

/// The resource attribute that tells sessions apart.
pub const SESSION_ATTR: &str = "sandbox_watch.session.id";

/// The start record's field that holds the session id.
pub const SESSION_FIELD: &str = "session_id";

fn string(s: impl Into<String>) -> AnyValue {
    AnyValue {
        value: Some(any_value::Value::StringValue(s.into())),
    }
}

fn int(i: i64) -> AnyValue {
    AnyValue {
        value: Some(any_value::Value::IntValue(i)),
    }
}

fn kv(key: &str, value: AnyValue) -> KeyValue {
    KeyValue {
        key: key.to_string(),
        value: Some(value),
        ..Default::default()
    }
}

/// The session id of a log, from its first line: the start record's `session_id`, or for a
/// log written before there was one, the first 32 hex digits of record 0's hash (so shipping
/// it twice still names one session).
pub fn session_of(first_line: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(first_line).ok()?;
    if let Some(id) = v.get(SESSION_FIELD).and_then(Value::as_str) {
        return Some(id.to_string());
    }
    let hash = v.get("hash").and_then(Value::as_str)?;
    Some(hash.chars().take(32).collect())
}

/// The resource of every record of one session: who sent it, from where, which session; then
/// `OTEL_RESOURCE_ATTRIBUTES` and `OTEL_SERVICE_NAME` (which may replace the defaults, but
/// never the session id).
pub fn resource(session: &str, extra: &[(String, String)]) -> Resource {
    let mut attrs: Vec<(String, String)> = vec![
        ("service.name".into(), "sandbox-watch".into()),
        ("service.version".into(), env!("CARGO_PKG_VERSION").into()),
    ];
    if let Some(host) = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
    {
        attrs.push(("host.name".into(), host));
    }
    // host.id on Linux is the machine id (semantic conventions).
    if let Some(id) = std::fs::read_to_string("/etc/machine-id")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
    {
        attrs.push(("host.id".into(), id));
    }
    for (k, v) in extra {
        if k == SESSION_ATTR {
            continue;
        }
        attrs.retain(|(key, _)| key != k);
        attrs.push((k.clone(), v.clone()));
    }
    attrs.push((SESSION_ATTR.into(), session.to_string()));
    Resource {
        attributes: attrs
            .iter()
            .map(|(k, v)| kv(k, string(v.as_str())))
            .collect(),
        ..Default::default()
    }
}

/// The instrumentation scope of every record.
pub fn scope() -> Option<InstrumentationScope> {
    Some(InstrumentationScope {
        name: "sandbox-watch".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        ..Default::default()
    })
}

/// One request holding `records` of one session.
pub fn request(resource: &Resource, records: Vec<LogRecord>) -> ExportLogsServiceRequest {
    ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: Some(resource.clone()),
            scope_logs: vec![ScopeLogs {
                scope: scope(),
                log_records: records,
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
    }
}

/// The addresses of a network line, as OpenTelemetry's semantic conventions name them. The
/// remote end the kernel used (a connect's or a flow's destination, an accepted connection's
/// dialer, where a raced connect really went) is `network.peer.address`/`.port`; it is also
/// `server.address`/`.port` when the traced side is the client, and `client.address`/`.port`
/// for an accept (the traced side is the server). A listener's own address is
/// `server.address`. A unix socket's path is not an address (`addr` is absent).
fn net_attributes<'a>(
    kind: &str,
    s: &dyn Fn(&str) -> Option<&'a str>,
    i: &dyn Fn(&str) -> Option<i64>,
    attrs: &mut Vec<KeyValue>,
) {
    let (addr, port) = (s("addr"), i("port"));
    let accepted = kind == "net" && s("op") == Some("accept");
    let listener = kind == "listening" || (kind == "net" && s("op") == Some("listen"));
    let (named, port_name) = if accepted {
        ("client.address", "client.port")
    } else {
        ("server.address", "server.port")
    };
    if let Some(a) = addr {
        attrs.push(kv(named, string(a)));
    }
    if let Some(p) = port {
        attrs.push(kv(port_name, int(p)));
    }
    if listener {
        return;
    }
    if let Some(a) = addr {
        attrs.push(kv("network.peer.address", string(a)));
        if let Ok(ip) = a.parse::<std::net::IpAddr>() {
            let family = if ip.is_ipv4() { "ipv4" } else { "ipv6" };
            attrs.push(kv("network.type", string(family)));
        }
    }
    if let Some(p) = port {
        attrs.push(kv("network.peer.port", int(p)));
    }
}

/// The LogRecord of one log line (without its newline). A line that is not a record (it
/// cannot be, unless the file was changed) is still sent, its body exact, without attributes.
pub fn log_record(line: &[u8], observed_ns: u64) -> LogRecord {
    let body = match std::str::from_utf8(line) {
        Ok(text) => string(text),
        Err(_) => AnyValue {
            value: Some(any_value::Value::BytesValue(line.to_vec())),
        },
    };
    let mut record = LogRecord {
        observed_time_unix_nano: observed_ns,
        severity_number: SeverityNumber::Info as i32,
        severity_text: "INFO".into(),
        body: Some(body),
        event_name: "sandbox_watch.unreadable".into(),
        ..Default::default()
    };
    let Ok(Value::Object(obj)) = serde_json::from_slice::<Value>(line) else {
        return record;
    };
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("unknown");
    record.event_name = format!("sandbox_watch.{kind}");
    if kind == "violation" {
        record.severity_number = SeverityNumber::Warn as i32;
        record.severity_text = "WARN".into();
    }
    if let Some(ns) = obj
        .get("at")
        .and_then(Value::as_str)
        .and_then(crate::time::parse_ns)
    {
        record.time_unix_nano = u64::try_from(ns).unwrap_or(0);
    }
    let attrs = &mut record.attributes;
    let s = |k: &str| obj.get(k).and_then(Value::as_str);
    let i = |k: &str| obj.get(k).and_then(Value::as_i64);
    if let Some(seq) = i("seq") {
        attrs.push(kv("sandbox_watch.seq", int(seq)));
    }
    attrs.push(kv("sandbox_watch.kind", string(kind)));
    for (key, attr) in [
        ("hash", "sandbox_watch.hash"),
        ("prev", "sandbox_watch.prev"),
    ] {
        if let Some(v) = s(key) {
            attrs.push(kv(attr, string(v)));
        }
    }
    // Semantic-convention attributes where a field means the same thing.
    for (key, attr) in [
        ("pid", "process.pid"),
        ("ppid", "process.parent_pid"),
        ("uid", "process.user.id"),
        ("exit_code", "process.exit.code"),
    ] {
        if let Some(v) = i(key) {
            attrs.push(kv(attr, int(v)));
        }
    }
    for (key, attr) in [
        ("exe", "process.executable.path"),
        ("cwd", "process.working_directory"),
    ] {
        if let Some(v) = s(key) {
            attrs.push(kv(attr, string(v)));
        }
    }
    if let Some(argv) = obj.get("argv").and_then(Value::as_array) {
        let values = argv
            .iter()
            .map(|a| string(a.as_str().map_or_else(|| a.to_string(), str::to_owned)))
            .collect();
        attrs.push(kv(
            "process.command_args",
            AnyValue {
                value: Some(any_value::Value::ArrayValue(ArrayValue { values })),
            },
        ));
    }
    match kind {
        "file" | "file_failed" | "file_count" | "file_hash" | "file_modified" => {
            if let Some(p) = s("path") {
                attrs.push(kv("file.path", string(p)));
            }
        }
        "net" | "net_result" | "listening" | "flow_count" | "net_tamper" => {
            net_attributes(kind, &s, &i, attrs);
            if let Some(p) = s("proto") {
                attrs.push(kv("network.transport", string(p)));
            }
            if let Some(n) = s("name") {
                attrs.push(kv("dns.question.name", string(n)));
            }
            for (key, attr) in [
                ("op", "sandbox_watch.net.op"),
                ("verdict", "sandbox_watch.net.verdict"),
                ("via", "sandbox_watch.net.via"),
                ("result", "sandbox_watch.net.result"),
            ] {
                if let Some(v) = s(key) {
                    attrs.push(kv(attr, string(v)));
                }
            }
            for (key, attr) in [
                ("netns", "sandbox_watch.net.netns"),
                ("packets", "sandbox_watch.net.packets"),
                ("bytes", "sandbox_watch.net.bytes"),
            ] {
                if let Some(v) = i(key) {
                    attrs.push(kv(attr, int(v)));
                }
            }
            if kind == "net_tamper" {
                if let Some(a) = s("caller_addr") {
                    attrs.push(kv("sandbox_watch.tamper.caller_address", string(a)));
                }
                if let Some(p) = i("caller_port") {
                    attrs.push(kv("sandbox_watch.tamper.caller_port", int(p)));
                }
                if let Some(n) = i("caller_netns") {
                    attrs.push(kv("sandbox_watch.tamper.caller_netns", int(n)));
                }
                if let Some(b) = obj.get("fd_swapped").and_then(Value::as_bool) {
                    attrs.push(kv(
                        "sandbox_watch.tamper.fd_swapped",
                        AnyValue {
                            value: Some(any_value::Value::BoolValue(b)),
                        },
                    ));
                }
            }
        }
        "mount" => {
            for (key, attr) in [
                ("op", "sandbox_watch.mount.op"),
                ("source", "sandbox_watch.mount.source"),
                ("target", "sandbox_watch.mount.target"),
                ("fstype", "sandbox_watch.mount.fstype"),
                ("root", "sandbox_watch.mount.root"),
                ("result", "sandbox_watch.mount.result"),
            ] {
                if let Some(v) = s(key) {
                    attrs.push(kv(attr, string(v)));
                }
            }
        }
        "violation" => {
            if let Some(v) = s("violation") {
                attrs.push(kv("sandbox_watch.violation", string(v)));
            }
            // The step it is under: its id, or null for the agent itself (a record from before
            // tool calls has no such field, and gets neither attribute).
            match obj.get("tool_call") {
                Some(Value::String(id)) => attrs.push(kv("sandbox_watch.tool_call", string(id))),
                Some(Value::Null) => attrs.push(kv(
                    "sandbox_watch.tool_call.agent",
                    AnyValue {
                        value: Some(any_value::Value::BoolValue(true)),
                    },
                )),
                _ => {}
            }
        }
        _ => {}
    }
    record
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr<'a>(r: &'a LogRecord, key: &str) -> Option<&'a any_value::Value> {
        r.attributes
            .iter()
            .find(|kv| kv.key == key)
            .and_then(|kv| kv.value.as_ref())
            .and_then(|v| v.value.as_ref())
    }

    fn text(v: Option<&any_value::Value>) -> &str {
        match v {
            Some(any_value::Value::StringValue(s)) => s,
            other => panic!("not a string: {other:?}"),
        }
    }

    fn integer(v: Option<&any_value::Value>) -> i64 {
        match v {
            Some(any_value::Value::IntValue(i)) => *i,
            other => panic!("not an int: {other:?}"),
        }
    }

    #[test]
    fn an_exec_line() {
        let line = r#"{"seq":3,"prev":"aa","hash":"bb","at":"2026-12-01T10:00:00.000000005Z","kind":"exec","argv":["git","commit","-m","x y"],"cwd":"/w","exe":"/usr/bin/git","pid":42,"ppid":41,"uid":1000}"#;
        let r = log_record(line.as_bytes(), 7);
        assert_eq!(
            r.body,
            Some(string(line)),
            "the body is the line, byte for byte"
        );
        assert_eq!(r.event_name, "sandbox_watch.exec");
        assert_eq!(r.time_unix_nano, 1_796_119_200_000_000_005);
        assert_eq!(r.observed_time_unix_nano, 7);
        assert_eq!(r.severity_number, SeverityNumber::Info as i32);
        assert_eq!(integer(attr(&r, "sandbox_watch.seq")), 3);
        assert_eq!(text(attr(&r, "sandbox_watch.kind")), "exec");
        assert_eq!(text(attr(&r, "sandbox_watch.hash")), "bb");
        assert_eq!(text(attr(&r, "sandbox_watch.prev")), "aa");
        assert_eq!(integer(attr(&r, "process.pid")), 42);
        assert_eq!(integer(attr(&r, "process.parent_pid")), 41);
        assert_eq!(text(attr(&r, "process.executable.path")), "/usr/bin/git");
        let Some(any_value::Value::ArrayValue(args)) = attr(&r, "process.command_args") else {
            panic!("no command args")
        };
        assert_eq!(args.values.len(), 4);
        assert_eq!(args.values[3], string("x y"));
    }

    #[test]
    fn file_net_dns_and_violation_lines() {
        let f = log_record(
            br#"{"seq":1,"kind":"file","pid":5,"path":"/etc/passwd","op":"read"}"#,
            0,
        );
        assert_eq!(text(attr(&f, "file.path")), "/etc/passwd");
        let n = log_record(
            br#"{"seq":2,"kind":"net","op":"connect","proto":"tcp","addr":"10.0.0.1","port":443,"pid":5}"#,
            0,
        );
        assert_eq!(text(attr(&n, "server.address")), "10.0.0.1");
        assert_eq!(integer(attr(&n, "server.port")), 443);
        assert_eq!(text(attr(&n, "network.transport")), "tcp");
        let d = log_record(
            br#"{"seq":3,"kind":"net","op":"dns","proto":"udp","addr":"127.0.0.53","port":53,"name":"example.com"}"#,
            0,
        );
        assert_eq!(text(attr(&d, "dns.question.name")), "example.com");
        let v = log_record(
            br#"{"seq":4,"kind":"violation","violation":"outside","pid":9,"summary":"s"}"#,
            0,
        );
        assert_eq!(v.severity_number, SeverityNumber::Warn as i32);
        assert_eq!(v.severity_text, "WARN");
        assert_eq!(text(attr(&v, "sandbox_watch.violation")), "outside");
    }

    #[test]
    fn a_violation_names_its_step_or_the_agent() {
        let step = log_record(
            br#"{"seq":4,"kind":"violation","violation":"credential","pid":9,"summary":"s","tool_call":"3"}"#,
            0,
        );
        assert_eq!(text(attr(&step, "sandbox_watch.tool_call")), "3");
        assert_eq!(attr(&step, "sandbox_watch.tool_call.agent"), None);
        let agent = log_record(
            br#"{"seq":5,"kind":"violation","violation":"persistence","pid":8,"summary":"s","tool_call":null}"#,
            0,
        );
        assert_eq!(attr(&agent, "sandbox_watch.tool_call"), None);
        assert_eq!(
            attr(&agent, "sandbox_watch.tool_call.agent"),
            Some(&any_value::Value::BoolValue(true))
        );
        let old = log_record(
            br#"{"seq":6,"kind":"violation","violation":"outside","pid":7,"summary":"s"}"#,
            0,
        );
        assert_eq!(attr(&old, "sandbox_watch.tool_call"), None);
        assert_eq!(attr(&old, "sandbox_watch.tool_call.agent"), None);
    }

    #[test]
    fn accepts_flows_and_raced_connects_name_the_kernels_remote_end() {
        let a = log_record(
            br#"{"seq":5,"kind":"net","op":"accept","proto":"tcp","addr":"10.1.2.3","port":40000,"netns":4026531840,"verdict":"inside","result":"ok","pid":5}"#,
            0,
        );
        assert_eq!(text(attr(&a, "client.address")), "10.1.2.3");
        assert_eq!(integer(attr(&a, "client.port")), 40000);
        assert_eq!(text(attr(&a, "network.peer.address")), "10.1.2.3");
        assert_eq!(integer(attr(&a, "network.peer.port")), 40000);
        assert!(
            attr(&a, "server.address").is_none(),
            "an accept's addr is the dialer, not a server"
        );
        assert_eq!(text(attr(&a, "network.type")), "ipv4");
        assert_eq!(text(attr(&a, "sandbox_watch.net.op")), "accept");
        assert_eq!(integer(attr(&a, "sandbox_watch.net.netns")), 4026531840);
        assert_eq!(text(attr(&a, "sandbox_watch.net.verdict")), "inside");
        let send = log_record(
            br#"{"seq":6,"kind":"net","op":"send","proto":"udp","addr":"::1","port":9,"via":"raw socket","verdict":"outside","pid":5}"#,
            0,
        );
        assert_eq!(text(attr(&send, "server.address")), "::1");
        assert_eq!(text(attr(&send, "network.peer.address")), "::1");
        assert_eq!(text(attr(&send, "network.type")), "ipv6");
        assert_eq!(text(attr(&send, "network.transport")), "udp");
        assert_eq!(text(attr(&send, "sandbox_watch.net.via")), "raw socket");
        let f = log_record(
            br#"{"seq":7,"kind":"flow_count","pid":5,"proto":"udp","addr":"127.0.0.1","port":5353,"netns":1,"packets":10,"bytes":1280}"#,
            0,
        );
        assert_eq!(text(attr(&f, "server.address")), "127.0.0.1");
        assert_eq!(integer(attr(&f, "server.port")), 5353);
        assert_eq!(integer(attr(&f, "sandbox_watch.net.packets")), 10);
        assert_eq!(integer(attr(&f, "sandbox_watch.net.bytes")), 1280);
        let t = log_record(
            br#"{"seq":8,"kind":"net_tamper","pid":5,"addr":"127.0.0.1","port":8080,"netns":1,"caller_addr":"10.66.66.66","caller_port":443,"fd_swapped":false,"caller_netns":null}"#,
            0,
        );
        assert_eq!(
            text(attr(&t, "server.address")),
            "127.0.0.1",
            "where it went"
        );
        assert_eq!(integer(attr(&t, "network.peer.port")), 8080);
        assert_eq!(
            text(attr(&t, "sandbox_watch.tamper.caller_address")),
            "10.66.66.66"
        );
        assert_eq!(integer(attr(&t, "sandbox_watch.tamper.caller_port")), 443);
        assert_eq!(
            attr(&t, "sandbox_watch.tamper.fd_swapped"),
            Some(&any_value::Value::BoolValue(false))
        );
        assert!(attr(&t, "sandbox_watch.tamper.caller_netns").is_none());
        let l = log_record(
            br#"{"seq":9,"kind":"listening","pid":5,"proto":"tcp","addr":"0.0.0.0","port":8000,"listening_at_end":true}"#,
            0,
        );
        assert_eq!(text(attr(&l, "server.address")), "0.0.0.0");
        assert!(
            attr(&l, "network.peer.address").is_none(),
            "a listener has no peer"
        );
    }

    #[test]
    fn a_line_that_is_no_record_is_sent_as_it_is() {
        let r = log_record(b"not json", 0);
        assert_eq!(r.body, Some(string("not json")));
        assert!(r.attributes.is_empty());
        let r = log_record(b"\xff\xfe", 0);
        assert_eq!(
            r.body.unwrap().value,
            Some(any_value::Value::BytesValue(vec![0xff, 0xfe]))
        );
    }

    #[test]
    fn the_session_and_the_resource() {
        assert_eq!(
            session_of(br#"{"seq":0,"hash":"ab","kind":"start","session_id":"s1"}"#).as_deref(),
            Some("s1")
        );
        let old = format!(r#"{{"seq":0,"hash":"{}","kind":"start"}}"#, "c".repeat(64));
        assert_eq!(session_of(old.as_bytes()), Some("c".repeat(32)));
        assert_eq!(session_of(b"garbage"), None);
        let r = resource(
            "s1",
            &[
                ("service.name".into(), "mine".into()),
                (SESSION_ATTR.into(), "forged".into()),
                ("team".into(), "a".into()),
            ],
        );
        let get = |k: &str| {
            let found: Vec<_> = r.attributes.iter().filter(|kv| kv.key == k).collect();
            assert!(found.len() <= 1, "{k} twice");
            found.first().map(|kv| kv.value.clone().unwrap())
        };
        assert_eq!(get("service.name"), Some(string("mine")));
        assert_eq!(get(SESSION_ATTR), Some(string("s1")));
        assert_eq!(get("team"), Some(string("a")));
        assert_eq!(
            get("service.version"),
            Some(string(env!("CARGO_PKG_VERSION")))
        );
    }
}
