//! OTLP export through a real OpenTelemetry collector: sandbox-watch → rotel (installed by
//! `cargo xtask setup`, pinned) → its OTLP exporter → otlp-sink, which writes what arrives as
//! the collector file exporter's OTLP/JSON lines, read back here and by `verify --otlp-json`.
use std::io::{BufRead as _, BufReader, Write as _};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use integration_tests::*;
use serde_json::{Map, Value};

const PYTHON: &str = "/usr/bin/python3";

/// The OTel variables a test's environment might have: none of them leaks into a test.
const OTEL_VARS: &[&str] = &[
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_LOGS_HEADERS",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL",
    "OTEL_EXPORTER_OTLP_COMPRESSION",
    "OTEL_EXPORTER_OTLP_TIMEOUT",
    "OTEL_EXPORTER_OTLP_CERTIFICATE",
    "OTEL_RESOURCE_ATTRIBUTES",
    "OTEL_SERVICE_NAME",
];

fn sw() -> Command {
    let mut c = command();
    for v in OTEL_VARS {
        c.env_remove(v);
    }
    c
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn sink_bin() -> PathBuf {
    bin().with_file_name("otlp-sink")
}

fn rotel_bin() -> PathBuf {
    let p = std::env::var_os("SW_ROTEL").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tools/rotel/rotel-agent"),
        PathBuf::from,
    );
    assert!(
        p.exists(),
        "the collector rotel is not installed at {}: run `cargo xtask setup`",
        p.display()
    );
    p
}

/// The last hop: writes every request it takes to `out` as OTLP/JSON.
struct Sink {
    child: Child,
    addr: String,
    out: PathBuf,
}

impl Sink {
    fn start(dir: &Path, name: &str, listen: &str, extra: &[&str]) -> Sink {
        let out = dir.join(format!("{name}.jsonl"));
        let mut child = Command::new(sink_bin())
            .arg(listen)
            .arg(&out)
            .args(extra)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start otlp-sink (built by cargo xtask test)");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("otlp-sink said {line:?}"))
            .to_string();
        Sink { child, addr, out }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The real collector, receiving OTLP/HTTP on `port` and exporting to the sink.
struct Rotel {
    child: Option<Child>,
    port: u16,
    grpc: u16,
    sink: String,
    dir: PathBuf,
}

impl Rotel {
    fn start(dir: &Path, port: u16, sink: &Sink) -> Rotel {
        let mut r = Rotel {
            child: None,
            port,
            grpc: free_port(),
            sink: sink.url(),
            dir: dir.to_path_buf(),
        };
        r.restart();
        r
    }

    fn restart(&mut self) {
        assert!(self.child.is_none());
        let child = Command::new(rotel_bin())
            .arg("start")
            .args(["--otlp-http-endpoint", &format!("127.0.0.1:{}", self.port)])
            .args(["--otlp-grpc-endpoint", &format!("127.0.0.1:{}", self.grpc)])
            .args(["--exporter", "otlp", "--otlp-exporter-protocol", "http"])
            .args(["--otlp-exporter-endpoint", &self.sink])
            .args(["--otlp-exporter-retry-initial-backoff", "100ms"])
            .arg("--pid-file")
            .arg(self.dir.join("rotel.pid"))
            .arg("--log-file")
            .arg(self.dir.join("rotel.log"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start rotel");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "rotel did not listen within 20 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM: it forwards what it holds, then exits.
    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: kill on the pid of our own child.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(10);
            while c.try_wait().unwrap().is_none() {
                if Instant::now() > deadline {
                    let _ = c.kill();
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Rotel {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One LogRecord as it arrived.
#[derive(Debug)]
struct Received {
    body: String,
    attrs: Map<String, Value>,
    resource: Map<String, Value>,
    event_name: String,
    severity: i64,
    time_ns: u128,
}

fn attrs(list: &Value) -> Map<String, Value> {
    let mut m = Map::new();
    for kv in list.as_array().into_iter().flatten() {
        let v = &kv["value"];
        let value = if let Some(s) = v.get("stringValue") {
            s.clone()
        } else if let Some(i) = v.get("intValue") {
            // OTLP/JSON writes 64-bit integers as strings.
            Value::from(
                i.as_str()
                    .map_or_else(|| i.as_i64().unwrap(), |s| s.parse::<i64>().unwrap()),
            )
        } else if let Some(a) = v.get("arrayValue") {
            Value::Array(
                a["values"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|x| x["stringValue"].clone())
                    .collect(),
            )
        } else {
            v.clone()
        };
        m.insert(kv["key"].as_str().unwrap().to_string(), value);
    }
    m
}

fn received(path: &Path) -> Vec<Received> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    // The collector may be writing as this reads: only whole lines (a request the sink has
    // not finished writing is read on the next call).
    let whole = text.rfind('\n').map_or("", |i| &text[..=i]);
    let mut out = Vec::new();
    for line in whole.lines().filter(|l| !l.trim().is_empty()) {
        let req: Value = serde_json::from_str(line).expect("the sink writes JSON");
        for rl in req["resourceLogs"].as_array().unwrap() {
            let resource = attrs(&rl["resource"]["attributes"]);
            for sl in rl["scopeLogs"].as_array().unwrap() {
                for r in sl["logRecords"].as_array().unwrap() {
                    out.push(Received {
                        body: r["body"]["stringValue"].as_str().unwrap().to_string(),
                        attrs: attrs(&r["attributes"]),
                        resource: resource.clone(),
                        event_name: r["eventName"].as_str().unwrap_or_default().to_string(),
                        severity: r["severityNumber"].as_i64().unwrap_or_default(),
                        time_ns: r["timeUnixNano"].as_str().unwrap().parse().unwrap(),
                    });
                }
            }
        }
    }
    out
}

fn log_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

/// Waits until the sink has a copy of every line of `log` (the collector batches).
fn wait_for_all(sink: &Sink, log: &Path) -> Vec<Received> {
    let want = log_lines(log);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = received(&sink.out);
        let bodies: std::collections::HashSet<&str> = got.iter().map(|r| r.body.as_str()).collect();
        if want.iter().all(|l| bodies.contains(l.as_str())) {
            return got;
        }
        if Instant::now() > deadline {
            let missing: Vec<&String> = want
                .iter()
                .filter(|l| !bodies.contains(l.as_str()))
                .take(3)
                .collect();
            panic!(
                "after 20 s the collector delivered {} of {} records; e.g. missing {missing:#?}",
                want.iter().filter(|l| bodies.contains(l.as_str())).count(),
                want.len()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn report(path: &Path, out: &Output) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| {
        panic!(
            "no report ({e}); exit {:?}; stderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
    });
    serde_json::from_str(&text).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn verify_otlp(file: &Path, log: Option<&Path>) -> (Option<i32>, String) {
    let mut c = sw();
    c.arg("verify").arg("--otlp-json").arg(file);
    if let Some(l) = log {
        c.arg(l);
    }
    let o = c.output().unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned() + &stderr(&o),
    )
}

/// `run --headless --report R [--log L] [extra] -- cmd`, with the environment `env`.
fn capture(
    dir: &Path,
    log: Option<&Path>,
    extra: &[&str],
    env: &[(&str, &str)],
    cmd: &[&str],
) -> (Output, Value) {
    let report_path = dir.join("report.json");
    let mut c = sw();
    c.args(["run", "--headless", "--linger", "0.3", "--report"])
        .arg(&report_path);
    if let Some(l) = log {
        c.arg("--log").arg(l);
    }
    c.args(extra).envs(env.iter().copied()).arg("--").args(cmd);
    let out = c.output().expect("start sandbox-watch");
    let r = report(&report_path, &out);
    (out, r)
}

#[test]
fn every_record_of_a_real_capture_arrives_as_written() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let sink = Sink::start(d, "got", "127.0.0.1:0", &[]);
    let rotel = Rotel::start(d, free_port(), &sink);
    let log = d.join("log.jsonl");
    let secret = d.join("secret.key");
    std::fs::write(&secret, "k\n").unwrap();
    let closed = free_port();
    let script = format!(
        "cat /etc/hostname >/dev/null; echo x > {w}; cat {s} >/dev/null; \
         {PYTHON} -c 'import socket; socket.socket().connect_ex((\"127.0.0.1\", {closed}))'; exit 0",
        w = d.join("written").display(),
        s = secret.display()
    );
    let (out, r) = capture(
        d,
        Some(&log),
        &[
            "--otlp",
            &rotel.url(),
            "--credential",
            secret.to_str().unwrap(),
        ],
        &[(
            "OTEL_RESOURCE_ATTRIBUTES",
            "deployment.environment=ci,team=sec%2Cops",
        )],
        &["sh", "-c", &script],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines = log_lines(&log);
    let e = &r["export"]["otlp"];
    assert_eq!(e["sent"], lines.len(), "{e}");
    assert_eq!(e["pending"], 0, "{e}");
    assert_eq!(e["last_error"], Value::Null, "{e}");
    assert_eq!(e["endpoint"], format!("{}/v1/logs", rotel.url()));
    let start: Value = serde_json::from_str(&lines[0]).unwrap();
    let session = start["session_id"]
        .as_str()
        .expect("a session_id in the start record");
    assert_eq!(session.len(), 32);
    assert_eq!(e["session"], session);

    let got = wait_for_all(&sink, &log);
    // Every line byte for byte, its attributes from it.
    let mut kinds = std::collections::BTreeSet::new();
    for line in &lines {
        let rec: Value = serde_json::from_str(line).unwrap();
        let copy = got
            .iter()
            .find(|g| g.body == *line)
            .unwrap_or_else(|| panic!("not received: {line}"));
        let kind = rec["kind"].as_str().unwrap();
        kinds.insert(kind.to_string());
        let a = &copy.attrs;
        assert_eq!(a["sandbox_watch.seq"], rec["seq"], "{line}");
        assert_eq!(a["sandbox_watch.kind"], rec["kind"]);
        assert_eq!(a["sandbox_watch.hash"], rec["hash"]);
        assert_eq!(a["sandbox_watch.prev"], rec["prev"]);
        assert_eq!(copy.event_name, format!("sandbox_watch.{kind}"));
        assert_eq!(
            copy.severity,
            if kind == "violation" { 13 } else { 9 },
            "{line}"
        );
        let at: jiff::Timestamp = rec["at"].as_str().unwrap().parse().unwrap();
        assert_eq!(copy.time_ns as i128, at.as_nanosecond());
        if let Some(pid) = rec.get("pid").filter(|p| p.is_u64()) {
            assert_eq!(&a["process.pid"], pid, "{line}");
        }
        match kind {
            "exec" => {
                assert_eq!(a["process.executable.path"], rec["exe"]);
                assert_eq!(a["process.command_args"], rec["argv"]);
            }
            "file" => assert_eq!(a["file.path"], rec["path"]),
            // A unix connect (e.g. libc asking nscd when HOME is unset) has a path, no address.
            "net" if rec["op"] == "connect" && rec["proto"] == "unix" => {
                assert!(!a.contains_key("server.address"), "{line}");
                assert_eq!(a["network.transport"], "unix");
            }
            "net" if rec["op"] == "connect" => {
                assert_eq!(a["server.address"], rec["addr"]);
                assert_eq!(a["server.port"], rec["port"]);
                assert_eq!(a["network.transport"], rec["proto"]);
            }
            "violation" => assert_eq!(a["sandbox_watch.violation"], rec["violation"]),
            _ => {}
        }
        let res = &copy.resource;
        assert_eq!(res["sandbox_watch.session.id"], session);
        assert_eq!(res["service.name"], "sandbox-watch");
        assert!(res["service.version"].is_string());
        assert!(res["host.name"].is_string());
        assert_eq!(res["deployment.environment"], "ci");
        assert_eq!(res["team"], "sec,ops");
    }
    for k in ["start", "exec", "file", "net", "violation", "end"] {
        assert!(
            kinds.contains(k),
            "no {k} record in this capture: {kinds:?}"
        );
    }
    let (code, text) = verify_otlp(&sink.out, Some(&log));
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("is this log"), "{text}");
}

/// The network lines the kernel's own objects make (issue 14): a TCP connect to the test's
/// listener, an accepted connection, a UDP flow and its counts, each arriving at the collector
/// with the remote end as the kernel had it, named as OpenTelemetry names it.
#[test]
fn net_lines_arrive_with_the_kernels_remote_end() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let sink = Sink::start(d, "got", "127.0.0.1:0", &[]);
    let rotel = Rotel::start(d, free_port(), &sink);
    let log = d.join("log.jsonl");
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let tcp_port = tcp.local_addr().unwrap().port();
    let taker = std::thread::spawn(move || {
        let (mut c, peer) = tcp.accept().unwrap();
        let mut got = Vec::new();
        let _ = std::io::Read::read_to_end(&mut c, &mut got);
        (peer, got)
    });
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let udp_port = udp.local_addr().unwrap().port();
    let dialer = d.join("dialer-port");
    let py = r#"
import socket, sys
tcp, udp, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
c = socket.create_connection(("127.0.0.1", tcp)); c.sendall(b"to-the-test"); c.close()
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(3): u.sendto(b"d" * 50, ("127.0.0.1", udp))
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen()
k = socket.create_connection(l.getsockname()); a, peer = l.accept()
open(out, "w").write(str(k.getsockname()[1]))
"#;
    let (out, _) = capture(
        d,
        Some(&log),
        &["--otlp", &rotel.url()],
        &[],
        &[
            PYTHON,
            "-c",
            py,
            &tcp_port.to_string(),
            &udp_port.to_string(),
            dialer.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (_, data) = taker.join().unwrap();
    assert_eq!(
        data, b"to-the-test",
        "the test's listener took the connection"
    );
    udp.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    for _ in 0..3 {
        udp.recv(&mut [0u8; 64]).expect("every datagram arrived");
    }
    let dialer_port: i64 = std::fs::read_to_string(&dialer).unwrap().parse().unwrap();
    let got = wait_for_all(&sink, &log);
    let lines: Vec<(String, Value)> = log_lines(&log)
        .into_iter()
        .map(|l| {
            let v = serde_json::from_str(&l).unwrap();
            (l, v)
        })
        .collect();
    // The collector's copy of the one line `pick` selects.
    let one = |what: &str, pick: &dyn Fn(&Value) -> bool| -> Map<String, Value> {
        let found: Vec<&(String, Value)> = lines.iter().filter(|(_, v)| pick(v)).collect();
        assert_eq!(found.len(), 1, "one {what} line: {found:#?}");
        let line = &found[0].0;
        got.iter()
            .find(|g| g.body == *line)
            .unwrap_or_else(|| panic!("not received: {line}"))
            .attrs
            .clone()
    };
    let tcp_port = i64::from(tcp_port);
    let udp_port = i64::from(udp_port);
    let c = one("connect to the test's listener", &|l| {
        l["kind"] == "net" && l["op"] == "connect" && l["port"] == tcp_port
    });
    assert_eq!(c["server.address"], "127.0.0.1", "{c:#?}");
    assert_eq!(c["server.port"], tcp_port);
    assert_eq!(c["network.peer.address"], "127.0.0.1");
    assert_eq!(c["network.peer.port"], tcp_port);
    assert_eq!(c["network.transport"], "tcp");
    assert_eq!(c["network.type"], "ipv4");
    assert_eq!(c["sandbox_watch.net.netns"], own_netns());
    assert_eq!(c["sandbox_watch.net.verdict"], "inside");
    let a = one("accept", &|l| l["kind"] == "net" && l["op"] == "accept");
    assert_eq!(a["client.address"], "127.0.0.1", "{a:#?}");
    assert_eq!(a["client.port"], dialer_port, "the dialer's own port");
    assert_eq!(a["network.peer.port"], dialer_port);
    assert!(!a.contains_key("server.address"), "{a:#?}");
    let s = one("send to the test's UDP socket", &|l| {
        l["kind"] == "net" && l["op"] == "send" && l["port"] == udp_port
    });
    assert_eq!(s["server.address"], "127.0.0.1", "{s:#?}");
    assert_eq!(s["network.peer.port"], udp_port);
    assert_eq!(s["network.transport"], "udp");
    let f = one("flow count of that send", &|l| {
        l["kind"] == "flow_count" && l["port"] == udp_port
    });
    assert_eq!(f["server.address"], "127.0.0.1", "{f:#?}");
    assert_eq!(f["server.port"], udp_port);
    assert_eq!(f["sandbox_watch.net.packets"], 3);
}

#[test]
fn attach_with_otlp_sends_the_preexisting_and_the_new_processes() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let sink = Sink::start(d, "got", "127.0.0.1:0", &[]);
    let rotel = Rotel::start(d, free_port(), &sink);
    let go = d.join("go");
    // A running agent with a child from before the attach, and one program run after it.
    let script = format!(
        "sleep 30 & while [ ! -e {g} ]; do sleep 0.02; done; /bin/echo after; kill $!; wait",
        g = go.display()
    );
    let mut agent = Command::new("sh").args(["-c", &script]).spawn().unwrap();
    let log = d.join("log.jsonl");
    let report_path = d.join("report.json");
    let mut monitor = sw()
        .args(["attach", "--headless", "--otlp", &rotel.url(), "--report"])
        .arg(&report_path)
        .arg("--log")
        .arg(&log)
        .arg(agent.id().to_string())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_attached(&log, &mut monitor);
    std::fs::write(&go, "").unwrap();
    agent.wait().unwrap();
    let out = monitor.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mut r = report(&report_path, &out);
    let lines = log_lines(&log);
    let e = &r["export"]["otlp"];
    assert_eq!(e["sent"], lines.len(), "{e}");
    assert_eq!(e["pending"], 0, "{e}");
    let got = wait_for_all(&sink, &log);
    let kinds: std::collections::HashSet<&str> = got
        .iter()
        .map(|g| g.attrs["sandbox_watch.kind"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains("process"),
        "the preexisting processes: {kinds:?}"
    );
    assert!(
        got.iter().any(|g| g.attrs["sandbox_watch.kind"] == "exec"
            && g.attrs["process.command_args"] == serde_json::json!(["/bin/echo", "after"])),
        "the program run after the attach"
    );
    let start: Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(start["target"]["mode"], "attach");
    let (code, text) = verify_otlp(&sink.out, Some(&log));
    assert_eq!(code, Some(0), "{text}");
    // The export is the only thing the log does not hold (it is known after its end).
    r.as_object_mut().unwrap().remove("export");
    assert_replay_matches(&r, &log);
}

#[test]
fn the_collectors_credentials_reach_it_and_neither_the_agent_nor_any_output() {
    require_root();
    const TOKEN: &str = "s3cret-7f3a9c";
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let sink = Sink::start(
        d,
        "got",
        "127.0.0.1:0",
        &["--require", &format!("authorization:Bearer {TOKEN}")],
    );
    // The agent (another user, as under sudo) looks for the token where it can: its own
    // environment and its parent's, the monitor's.
    let out_dir = d.join("out");
    std::fs::create_dir(&out_dir).unwrap();
    std::fs::set_permissions(
        &out_dir,
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let seen = out_dir.join("agent-env");
    let script = format!(
        "env > {s}; cat /proc/$PPID/environ >> {s} 2>/dev/null; exit 0",
        s = seen.display()
    );
    let log = d.join("log.jsonl");
    let (out, r) = capture(
        d,
        Some(&log),
        &["--otlp", &sink.url(), "--user", "nobody"],
        &[(
            "OTEL_EXPORTER_OTLP_HEADERS",
            &format!("Authorization=Bearer%20{TOKEN}"),
        )],
        &["sh", "-c", &script],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let e = &r["export"]["otlp"];
    assert_eq!(e["pending"], 0, "the collector took the header: {e}");
    assert_eq!(e["sent"], log_lines(&log).len(), "{e}");
    let env = std::fs::read_to_string(&seen).expect("the agent ran");
    assert!(env.contains("PATH="), "{env}");
    assert!(
        !env.contains(TOKEN),
        "the agent got the collector's token:\n{env}"
    );
    assert!(!env.contains("OTEL_EXPORTER_OTLP_HEADERS"), "{env}");
    for (what, text) in [
        ("the log", std::fs::read_to_string(&log).unwrap()),
        ("the report", r.to_string()),
        ("stderr", stderr(&out)),
        (
            "the records received",
            std::fs::read_to_string(&sink.out).unwrap(),
        ),
    ] {
        assert!(!text.contains(TOKEN), "the token is in {what}");
    }

    // The check is real: without the header, the collector refuses everything.
    let log2 = d.join("log2.jsonl");
    let (out, r) = capture(
        d,
        Some(&log2),
        &["--otlp", &sink.url(), "--otlp-timeout", "1"],
        &[],
        &["true"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let e = &r["export"]["otlp"];
    assert_eq!(e["sent"], 0, "{e}");
    assert_eq!(e["pending"], log_lines(&log2).len(), "{e}");
    let said = e["last_error"].as_str().unwrap();
    assert!(
        said.contains("401") && said.contains("OTEL_EXPORTER_OTLP_HEADERS"),
        "{e}"
    );
}

#[test]
fn a_collector_started_late_and_restarted_mid_capture_loses_nothing() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let sink = Sink::start(d, "got", "127.0.0.1:0", &[]);
    let port = free_port();
    let log = d.join("log.jsonl");
    let report_path = d.join("report.json");
    let mut monitor = sw()
        .args([
            "run",
            "--headless",
            "--linger",
            "0.3",
            "--otlp-timeout",
            "20",
            "--otlp",
        ])
        .arg(format!("http://127.0.0.1:{port}"))
        .arg("--log")
        .arg(&log)
        .arg("--report")
        .arg(&report_path)
        .args([
            "--",
            "sh",
            "-c",
            "for i in $(seq 1 70); do /bin/true; sleep 0.1; done",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_attached(&log, &mut monitor);
    // Nothing listens for the first 1.5 s.
    std::thread::sleep(Duration::from_millis(1500));
    let mut rotel = Rotel::start(d, port, &sink);
    // Records leave as they are written, not only at the end.
    let deadline = Instant::now() + Duration::from_secs(5);
    while received(&sink.out).is_empty() {
        assert!(
            Instant::now() < deadline,
            "nothing arrived within 5 s of the collector starting"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        monitor.try_wait().unwrap().is_none(),
        "the capture already ended"
    );
    let early = received(&sink.out).len();
    std::thread::sleep(Duration::from_millis(1000));
    rotel.stop();
    std::thread::sleep(Duration::from_millis(1500));
    rotel.restart();
    let out = monitor.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let r = report(&report_path, &out);
    let lines = log_lines(&log);
    let e = &r["export"]["otlp"];
    assert_eq!(e["pending"], 0, "{e}");
    assert_eq!(e["sent"], lines.len(), "{e}");
    let got = wait_for_all(&sink, &log);
    let distinct: std::collections::HashSet<&str> = got.iter().map(|g| g.body.as_str()).collect();
    // The delivery figures of this outage, for the record.
    eprintln!(
        "outage: {} records logged; {} arrived while the capture ran before the restart; \
         {} LogRecords received in all, {} distinct, {} duplicates, 0 missing; last error: {}",
        lines.len(),
        early,
        got.len(),
        distinct.len(),
        got.len() - distinct.len(),
        e["last_error"]
    );
    assert_eq!(distinct.len(), lines.len());
    assert!(
        e["last_error"]
            .as_str()
            .is_some_and(|s| s.contains("refused")),
        "the outage was seen: {e}"
    );
    let (code, text) = verify_otlp(&sink.out, Some(&log));
    assert_eq!(code, Some(0), "{text}");
}

#[test]
fn with_nothing_listening_the_agent_runs_and_the_report_says_what_was_not_delivered() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let url = format!("http://127.0.0.1:{}", free_port());
    let log = d.join("log.jsonl");
    let marker = d.join("ran");
    let script = format!("touch {}; exit 7", marker.display());
    let started = Instant::now();
    let (out, r) = capture(
        d,
        Some(&log),
        &["--otlp", &url, "--otlp-timeout", "1"],
        &[],
        &["sh", "-c", &script],
    );
    assert!(started.elapsed() < Duration::from_secs(30), "no hang");
    assert_eq!(
        out.status.code(),
        Some(7),
        "the agent's status: {}",
        stderr(&out)
    );
    assert!(marker.exists());
    let lines = log_lines(&log);
    let e = &r["export"]["otlp"];
    assert_eq!(e["sent"], 0, "{e}");
    assert_eq!(e["pending"], lines.len(), "{e}");
    assert!(
        e["last_error"]
            .as_str()
            .unwrap()
            .contains("connection refused"),
        "{e}"
    );
    let v: Vec<&Value> = r["violations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["kind"] == "export")
        .collect();
    assert_eq!(v.len(), 1, "{:#?}", r["violations"]);
    assert!(
        v[0]["summary"]
            .as_str()
            .unwrap()
            .contains(&format!("{} log records were not delivered", lines.len()))
    );
    assert!(
        stderr(&out).contains("sandbox-watch ship --otlp URL"),
        "{}",
        stderr(&out)
    );
    // The log is whole all the same.
    assert_eq!(
        sandbox_watch(&["verify", log.to_str().unwrap()])
            .status
            .code(),
        Some(0)
    );

    // --fail-on export makes it fail CI; no --log: the log waits in the spool, and `ship`
    // delivers it later.
    let spool = d.join("spool");
    let (out, r) = capture(
        d,
        None,
        &[
            "--otlp",
            &url,
            "--otlp-timeout",
            "0.5",
            "--fail-on",
            "export",
            "--spool",
            spool.to_str().unwrap(),
        ],
        &[],
        &["true"],
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let s = &r["export"]["otlp"]["spool"];
    assert_eq!(s["kept"], true, "{s}");
    let spooled = PathBuf::from(s["path"].as_str().unwrap());
    assert!(spooled.starts_with(&spool) && spooled.exists());
    assert_eq!(r["log"]["path"], s["path"]);
    let sink = Sink::start(d, "got", "127.0.0.1:0", &[]);
    let rotel = Rotel::start(d, free_port(), &sink);
    let shipped = sw()
        .args(["ship", "--otlp", &rotel.url()])
        .arg(&spooled)
        .output()
        .unwrap();
    assert_eq!(shipped.status.code(), Some(0), "{}", stderr(&shipped));
    wait_for_all(&sink, &spooled);
    let (code, text) = verify_otlp(&sink.out, Some(&spooled));
    assert_eq!(code, Some(0), "{text}");

    // Delivered at the end: the spooled log is removed.
    let spool2 = d.join("spool2");
    let (out, r) = capture(
        d,
        None,
        &["--otlp", &rotel.url(), "--spool", spool2.to_str().unwrap()],
        &[],
        &["true"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let s = &r["export"]["otlp"]["spool"];
    assert_eq!(s["kept"], false, "{s}");
    assert_eq!(
        std::fs::read_dir(&spool2).unwrap().count(),
        0,
        "the spool is empty"
    );
}

#[test]
fn ship_of_a_finished_log_is_resumable_and_sends_nothing_twice() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let log = d.join("log.jsonl");
    // Over 2,048 records: more than one request.
    let files = d.join("many");
    std::fs::create_dir(&files).unwrap();
    let script = format!(
        "import os\nfor i in range(2500): open(os.path.join({:?}, str(i)), 'w').close()",
        files.to_str().unwrap()
    );
    let (out, _) = capture(d, Some(&log), &[], &[], &[PYTHON, "-c", &script]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let total = log_lines(&log).len();
    assert!(total > 2600, "{total}");

    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let url = format!("http://{listen}");
    // A collector that takes one request and goes away.
    let first = Sink::start(d, "first", &listen, &["--exit-after", "1"]);
    let o = sw()
        .args(["ship", "--otlp-timeout", "1", "--otlp", &url])
        .arg(&log)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("run the same command again"),
        "{}",
        stderr(&o)
    );
    let first_got = received(&first.out);
    assert!(!first_got.is_empty() && first_got.len() < total);
    let first_out = first.out.clone();
    drop(first);

    // The real collector on the same address: only the rest is sent.
    let sink = Sink::start(d, "rest", "127.0.0.1:0", &[]);
    let rotel = Rotel::start(d, port, &sink);
    let o = sw()
        .args(["ship", "--otlp", &url])
        .arg(&log)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        said.contains(&format!(
            "{} of them had been sent by an earlier run",
            first_got.len()
        )),
        "{said}"
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while received(&sink.out).len() < total - first_got.len() {
        assert!(Instant::now() < deadline, "the rest did not arrive");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Once more: nothing is sent again.
    let o = sw()
        .args(["ship", "--otlp", &url])
        .arg(&log)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let said = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(said.contains("nothing was sent again"), "{said}");
    std::thread::sleep(Duration::from_millis(800));
    drop(rotel);
    let rest = received(&sink.out);
    assert_eq!(first_got.len() + rest.len(), total, "each record once");
    // Both parts together are the whole session.
    let both = d.join("both.jsonl");
    let mut all = std::fs::read(&first_out).unwrap();
    all.extend(std::fs::read(&sink.out).unwrap());
    std::fs::write(&both, all).unwrap();
    let (code, text) = verify_otlp(&both, Some(&log));
    assert_eq!(code, Some(0), "{text}");
    assert!(!text.contains("more than once"), "{text}");
}

#[test]
fn verify_otlp_json_names_a_removed_and_an_altered_record() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let sink = Sink::start(d, "got", "127.0.0.1:0", &[]);
    let rotel = Rotel::start(d, free_port(), &sink);
    let log = d.join("log.jsonl");
    let (out, _) = capture(
        d,
        Some(&log),
        &["--otlp", &rotel.url()],
        &[],
        &["sh", "-c", "for i in 1 2 3 4 5 6; do /bin/true $i; done"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    wait_for_all(&sink, &log);
    drop(rotel);
    let (code, text) = verify_otlp(&sink.out, None);
    assert_eq!(code, Some(0), "{text}");

    // Rewrites the collector's file, record by record.
    let rewrite = |name: &str, f: &dyn Fn(u64, &mut Value) -> bool| -> PathBuf {
        let text = std::fs::read_to_string(&sink.out).unwrap();
        let mut out = String::new();
        for line in text.lines() {
            let mut req: Value = serde_json::from_str(line).unwrap();
            for rl in req["resourceLogs"].as_array_mut().unwrap() {
                for sl in rl["scopeLogs"].as_array_mut().unwrap() {
                    let recs = sl["logRecords"].as_array_mut().unwrap();
                    recs.retain_mut(|r| {
                        let body: Value =
                            serde_json::from_str(r["body"]["stringValue"].as_str().unwrap())
                                .unwrap();
                        f(body["seq"].as_u64().unwrap(), r)
                    });
                }
            }
            out.push_str(&serde_json::to_string(&req).unwrap());
            out.push('\n');
        }
        let p = d.join(name);
        std::fs::write(&p, out).unwrap();
        p
    };
    let removed = rewrite("removed.jsonl", &|seq, _| seq != 4);
    let (code, text) = verify_otlp(&removed, None);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("record 4 is missing"), "{text}");
    let (code, text) = verify_otlp(&removed, Some(&log));
    assert_eq!(code, Some(1), "{text}");

    let altered = rewrite("altered.jsonl", &|seq, r| {
        if seq == 6 {
            let body =
                r["body"]["stringValue"]
                    .as_str()
                    .unwrap()
                    .replacen("\"pid\":", "\"pid\":1", 1);
            r["body"]["stringValue"] = body.into();
        }
        true
    });
    let (code, text) = verify_otlp(&altered, None);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("record 6 was changed"), "{text}");
    assert!(!text.contains("missing"), "{text}");
}

/// Options, environment, and what the error must say.
type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);

#[test]
fn bad_otlp_options_are_usage_errors_before_the_agent_starts() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let marker = d.join("ran");
    let log = d.join("log.jsonl");
    let cases: &[Case] = &[
        (
            &["--otlp", "ftp://127.0.0.1:21"],
            &[],
            "unknown scheme 'ftp'",
        ),
        (&["--otlp", "127.0.0.1:4318"], &[], "no scheme"),
        (
            &["--otlp", "http://127.0.0.1:99999"],
            &[],
            "not a port number",
        ),
        (&["--otlp", "http://"], &[], "--otlp"),
        (
            &["--otlp", "http://me:hunter2@127.0.0.1:4318"],
            &[],
            "OTEL_EXPORTER_OTLP_HEADERS",
        ),
        (
            &["--otlp="],
            &[("OTEL_EXPORTER_OTLP_ENDPOINT", "nope")],
            "OTEL_EXPORTER_OTLP_ENDPOINT",
        ),
        (
            &["--otlp", "http://127.0.0.1:4318"],
            &[("OTEL_EXPORTER_OTLP_HEADERS", "Bearer hunter2")],
            "OTEL_EXPORTER_OTLP_HEADERS",
        ),
        (
            &["--otlp", "http://127.0.0.1:4318"],
            &[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")],
            "http/protobuf",
        ),
        (
            &["--otlp", "http://127.0.0.1:4318"],
            &[("OTEL_EXPORTER_OTLP_CERTIFICATE", "/nonexistent/ca.pem")],
            "/nonexistent/ca.pem",
        ),
        (
            &["--otlp", "http://127.0.0.1:4318", "--spool", "/proc/nope"],
            &[],
            "--spool",
        ),
    ];
    for (args, env, says) in cases {
        let mut c = sw();
        c.args(["run", "--headless"])
            .args(*args)
            .envs(env.iter().copied());
        if !args.contains(&"--spool") {
            c.arg("--log").arg(&log);
        }
        let o = c.args(["--", "touch"]).arg(&marker).output().unwrap();
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?} {env:?}: {e}");
        assert!(e.contains(says), "{args:?}: {e}");
        assert!(!e.contains("hunter2"), "a secret was printed: {e}");
        assert!(!e.contains("panicked"), "{e}");
        assert!(!marker.exists(), "{args:?}: the agent ran");
        assert!(
            !log.exists(),
            "{args:?}: the log was created before the check"
        );
    }
    // ship and verify too.
    let o = sw()
        .args(["ship", "--otlp", "gopher://x", "/etc/hostname"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = sw()
        .args(["ship", "--otlp", "http://127.0.0.1:1"])
        .arg(d.join("none.jsonl"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let (code, text) = verify_otlp(&d.join("none.jsonl"), None);
    assert_eq!(code, Some(1), "{text}");
    std::fs::write(d.join("junk.jsonl"), "hello\n").unwrap();
    let (code, text) = verify_otlp(&d.join("junk.jsonl"), None);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("not an OTLP/JSON logs request"), "{text}");
}

/// A TLS server on loopback that answers every POST with an empty OTLP success.
struct TlsServer {
    child: Child,
    port: u16,
    ca: PathBuf,
}

impl TlsServer {
    fn start(d: &Path) -> TlsServer {
        let ossl = |args: &[&str]| {
            let o = Command::new("openssl")
                .args(args)
                .current_dir(d)
                .output()
                .expect("openssl");
            assert!(o.status.success(), "openssl {args:?}: {}", stderr(&o));
        };
        ossl(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "1",
            "-subj",
            "/CN=sandbox-watch test CA",
        ]);
        ossl(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "srv.key",
            "-out",
            "srv.csr",
            "-subj",
            "/CN=127.0.0.1",
        ]);
        std::fs::write(d.join("ext.cnf"), "subjectAltName=IP:127.0.0.1\n").unwrap();
        ossl(&[
            "x509",
            "-req",
            "-in",
            "srv.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "srv.pem",
            "-days",
            "1",
            "-extfile",
            "ext.cnf",
        ]);
        let server = r#"
import http.server, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get('content-length', 0)))
        self.send_response(200)
        self.send_header('content-type', 'application/x-protobuf')
        self.send_header('content-length', '0')
        self.end_headers()
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(('127.0.0.1', 0), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
s.socket = ctx.wrap_socket(s.socket, server_side=True)
print(s.server_address[1], flush=True)
s.serve_forever()
"#;
        let mut child = Command::new(PYTHON)
            .args(["-c", server, "srv.pem", "srv.key"])
            .current_dir(d)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        TlsServer {
            child,
            port: line.trim().parse().expect("the TLS server's port"),
            ca: d.join("ca.pem"),
        }
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A listener that answers every connection with bytes that are not HTTP.
fn not_http() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            // Take the request first, then answer it with something else.
            let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
            let mut buf = [0u8; 1 << 16];
            while matches!(std::io::Read::read(&mut s, &mut buf), Ok(n) if n > 0) {}
            let _ = s.write_all(b"SSH-2.0-OpenSSH_9.2\r\n\x00\x01garbage\r\n\r\n");
        }
    });
    port
}

#[test]
fn a_collector_that_misbehaves_is_a_sentence_and_the_agent_runs() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let one = |url: &str, env: &[(&str, &str)], timeout: &str| -> (Output, Value) {
        let log = d.join("log.jsonl");
        let _ = std::fs::remove_file(&log);
        let _ = std::fs::remove_file(d.join("log.jsonl.otlp-cursor"));
        let args = ["--otlp", url, "--otlp-timeout", timeout];
        let started = Instant::now();
        let (out, r) = capture(d, Some(&log), &args, env, &["sh", "-c", "exit 4"]);
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{url}: no hang"
        );
        assert_eq!(
            out.status.code(),
            Some(4),
            "{url}: the agent's status: {}",
            stderr(&out)
        );
        assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
        (out, r)
    };
    let last_error = |r: &Value| {
        r["export"]["otlp"]["last_error"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };

    // HTTP 200 with a web page: not taken as delivered.
    let garbage = Sink::start(d, "garbage", "127.0.0.1:0", &["--answer", "garbage"]);
    let (_, r) = one(&garbage.url(), &[], "1");
    assert!(
        last_error(&r).contains("not an OTLP response"),
        "{}",
        last_error(&r)
    );
    assert!(r["export"]["otlp"]["pending"].as_u64().unwrap() > 0);
    // Busy, then better: 503s are retried and everything arrives.
    let busy = Sink::start(d, "busy", "127.0.0.1:0", &["--fail-first", "2"]);
    let (_, r) = one(&busy.url(), &[], "10");
    assert_eq!(r["export"]["otlp"]["pending"], 0, "{}", r["export"]);
    assert!(last_error(&r).contains("HTTP 503"), "{}", last_error(&r));
    assert_eq!(
        received(&busy.out).len() as u64,
        r["export"]["otlp"]["sent"].as_u64().unwrap()
    );
    // Not HTTP at all.
    let (_, r) = one(&format!("http://127.0.0.1:{}", not_http()), &[], "1");
    assert!(last_error(&r).contains("not HTTP"), "{}", last_error(&r));
    // Takes the connection and never answers: each try ends at OTEL_EXPORTER_OTLP_TIMEOUT.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    let (_, r) = one(&url, &[("OTEL_EXPORTER_OTLP_TIMEOUT", "300")], "1");
    assert!(last_error(&r).contains("no answer"), "{}", last_error(&r));
    drop(silent);
    // https: a certificate of a CA nobody gave us is refused; with the CA given it works.
    let tls = TlsServer::start(d);
    let url = format!("https://127.0.0.1:{}", tls.port);
    let (_, r) = one(&url, &[], "1");
    assert!(last_error(&r).contains("TLS"), "{}", last_error(&r));
    assert!(
        last_error(&r).contains("OTEL_EXPORTER_OTLP_CERTIFICATE"),
        "{}",
        last_error(&r)
    );
    let ca = tls.ca.to_str().unwrap().to_string();
    let (_, r) = one(&url, &[("OTEL_EXPORTER_OTLP_CERTIFICATE", &ca)], "5");
    assert_eq!(r["export"]["otlp"]["pending"], 0, "{}", r["export"]);
    assert_eq!(r["export"]["otlp"]["last_error"], Value::Null);
    // http to the TLS port.
    let (_, r) = one(&format!("http://127.0.0.1:{}", tls.port), &[], "1");
    assert!(!last_error(&r).is_empty());
    // A host that cannot be reached: the monitor in a network namespace with no route
    // (nothing leaves this machine).
    let report_path = d.join("unreach.json");
    let o = Command::new("unshare")
        .arg("-n")
        .arg(bin())
        .args([
            "run",
            "--headless",
            "--linger",
            "0.3",
            "--otlp",
            "http://192.0.2.1:4318",
            "--otlp-timeout",
            "1",
            "--report",
        ])
        .arg(&report_path)
        .arg("--spool")
        .arg(d.join("spool"))
        .args(["--", "sh", "-c", "exit 4"])
        .env_remove("GITHUB_STEP_SUMMARY")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let r = report(&report_path, &o);
    assert!(
        last_error(&r).contains("cannot be reached"),
        "{}",
        last_error(&r)
    );
}
