//! Network capture on the real kernel: real sockets on loopback and in namespaces the test
//! makes. No traffic leaves the machine (DNS datagrams go to 127.0.0.1:53, where nothing
//! listens).
use integration_tests::*;
use serde_json::Value;

fn net(r: &Run) -> Vec<&Value> {
    r.report["network"]
        .as_array()
        .expect("network")
        .iter()
        .collect()
}

fn find(r: &Run, f: impl Fn(&Value) -> bool) -> Vec<&Value> {
    net(r).into_iter().filter(|n| f(n)).collect()
}

/// Python that listens on an ephemeral port of `host`, connects to it, and to a closed port.
const CLIENT_SERVER: &str = r#"
import socket, sys
fam = socket.AF_INET6 if ':' in sys.argv[1] else socket.AF_INET
srv = socket.socket(fam, socket.SOCK_STREAM)
srv.bind((sys.argv[1], 0)); srv.listen()
port = srv.getsockname()[1]
c = socket.socket(fam, socket.SOCK_STREAM); c.connect((sys.argv[1], port)); c.close()
c = socket.socket(fam, socket.SOCK_STREAM); c.connect((sys.argv[1], port)); c.close()
closed = socket.socket(fam, socket.SOCK_STREAM); closed.bind((sys.argv[1], 0)); dead = closed.getsockname()[1]; closed.close()
try:
    socket.socket(fam, socket.SOCK_STREAM).connect((sys.argv[1], dead))
except ConnectionRefusedError:
    pass
print(port, dead)
"#;

fn ports(r: &Run) -> (u64, u64) {
    let out = String::from_utf8_lossy(&r.output.stdout).to_string();
    let v: Vec<u64> = out.split_whitespace().map(|p| p.parse().unwrap()).collect();
    (v[0], v[1])
}

/// Python that builds a DNS question: `query(name, qtype)`.
const DNS_QUERY: &str = r#"
import socket, struct
def query(name, qtype=1):
    q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    return q + b"\0" + struct.pack(">HH", qtype, 1)
"#;

#[test]
fn listener_ok_connect_and_refused_connect_on_v4_and_v6() {
    for host in ["127.0.0.1", "::1"] {
        let r = run(&[], &["python3", "-c", CLIENT_SERVER, host]);
        assert_eq!(r.code(), Some(0), "{}", r.stderr());
        let (port, dead) = ports(&r);
        let listen = find(&r, |n| n["op"] == "listen" && n["port"] == port);
        assert_eq!(listen.len(), 1, "{:#?}", net(&r));
        assert_eq!(listen[0]["proto"], "tcp");
        assert_eq!(listen[0]["addr"], host);
        assert_eq!(listen[0]["listening_at_end"], false, "the server exited");
        let ok = find(&r, |n| n["op"] == "connect" && n["port"] == port);
        assert_eq!(ok.len(), 1, "identical connects aggregate: {:#?}", net(&r));
        assert_eq!(
            (ok[0]["result"].clone(), ok[0]["count"].clone()),
            ("ok".into(), 2.into())
        );
        assert_eq!(ok[0]["addr"], host);
        assert_eq!(ok[0]["verdict"], "inside");
        assert_eq!(ok[0]["netns"], own_netns());
        let refused = find(&r, |n| n["op"] == "connect" && n["port"] == dead);
        assert_eq!(refused.len(), 1, "{:#?}", net(&r));
        assert_eq!(refused[0]["result"], "refused");
    }
}

#[test]
fn non_blocking_connects_get_their_outcome() {
    let py = r#"
import socket, select
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(); port = srv.getsockname()[1]
dead_s = socket.socket(); dead_s.bind(("127.0.0.1", 0)); dead = dead_s.getsockname()[1]; dead_s.close()
for p in (port, dead):
    s = socket.socket(); s.setblocking(False)
    try: s.connect(("127.0.0.1", p))
    except BlockingIOError: pass
    select.select([], [s], [], 2)
    s.close()
print(port, dead)
"#;
    let r = run(&[], &["python3", "-c", py]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let (port, dead) = ports(&r);
    let ok = find(&r, |n| n["op"] == "connect" && n["port"] == port);
    assert_eq!(ok.len(), 1, "{:#?}", net(&r));
    assert_eq!(
        ok[0]["result"], "ok",
        "the in-progress connect completed: {:#?}",
        ok[0]
    );
    let refused = find(&r, |n| n["op"] == "connect" && n["port"] == dead);
    assert_eq!(refused.len(), 1, "{:#?}", net(&r));
    assert_eq!(refused[0]["result"], "refused", "{:#?}", refused[0]);
}

#[test]
fn dns_names_through_sendto_and_a_connected_socket() {
    let py = DNS_QUERY.to_string()
        + r#"
import os
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.sendto(query("first.sandbox-watch.test"), ("127.0.0.1", 53))
socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).sendto(query("v6.sandbox-watch.test"), ("::1", 53))
c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
c.connect(("127.0.0.1", 53))
# Nothing listens on 127.0.0.1:53: after the first datagram the kernel reports the ICMP
# refusal on the next send. The datagrams were sent all the same.
# A write() on the connected socket is a question too: they are read from the packets.
for send in (lambda: c.send(query("second.sandbox-watch.test", 28)),
             lambda: c.sendmsg([query("third.sandbox-watch.test")]),
             lambda: os.write(c.fileno(), query("fourth.sandbox-watch.test")),
             lambda: c.send(b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x3fcut")):
    try: send()
    except ConnectionRefusedError: send()
"#;
    let r = run(&[], &["python3", "-c", &py]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let dns = find(&r, |n| n["op"] == "dns");
    let names: Vec<&str> = dns.iter().filter_map(|n| n["name"].as_str()).collect();
    for want in [
        "first.sandbox-watch.test",
        "second.sandbox-watch.test",
        "third.sandbox-watch.test",
        "fourth.sandbox-watch.test",
        "v6.sandbox-watch.test",
    ] {
        assert!(names.contains(&want), "{want} in {names:?}");
    }
    let second = dns
        .iter()
        .find(|n| n["name"] == "second.sandbox-watch.test")
        .unwrap();
    assert_eq!(second["qtype"], "AAAA");
    assert_eq!(second["addr"], "127.0.0.1");
    assert_eq!(second["port"], 53);
    let fourth = dns
        .iter()
        .find(|n| n["name"] == "fourth.sandbox-watch.test")
        .unwrap();
    assert_eq!(
        (fourth["addr"].as_str(), fourth["port"].as_u64()),
        (Some("127.0.0.1"), Some(53))
    );
    let v6 = dns
        .iter()
        .find(|n| n["name"] == "v6.sandbox-watch.test")
        .unwrap();
    assert_eq!(
        (v6["addr"].as_str(), v6["port"].as_u64()),
        (Some("::1"), Some(53))
    );
    assert!(
        dns.iter().any(|n| n["malformed"].is_string()),
        "a cut name is reported as malformed: {dns:#?}"
    );
}

#[test]
fn unix_connect_is_reported_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("agent.sock");
    let py = format!(
        "import socket\ns = socket.socket(socket.AF_UNIX); s.bind('{p}'); s.listen()\nc = socket.socket(socket.AF_UNIX); c.connect('{p}')\n",
        p = sock.display()
    );
    let r = run(&[], &["python3", "-c", &py]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    // Other unix connects may come with it: with HOME unset, libc looks the user up and
    // tries nscd's socket first. Only the one to the test's socket is asserted on.
    let path = sock.to_str().unwrap();
    let u = find(&r, |n| {
        n["proto"] == "unix" && n["op"] == "connect" && n["path"] == path
    });
    assert_eq!(u.len(), 1, "{:#?}", net(&r));
    assert_eq!(u[0]["result"], "ok");
}

#[test]
fn sandboxed_connect_is_inside_and_nsenter_back_is_outside() {
    // A listener in the test's own namespace for the escaping connect to reach.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let me = std::process::id();
    let connect = format!(
        "import socket\ntry: socket.create_connection(('127.0.0.1', {port}), timeout=2)\nexcept OSError as e: print(e)\n"
    );
    let script = format!("python3 -c \"$1\"; nsenter --net=/proc/{me}/ns/net python3 -c \"$1\"",);
    let r = run(&[], &["unshare", "-n", "sh", "-c", &script, "sh", &connect]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let c = find(&r, |n| n["op"] == "connect" && n["port"] == port);
    assert_eq!(c.len(), 2, "{:#?}", net(&r));
    let inside: Vec<&&Value> = c.iter().filter(|n| n["verdict"] == "inside").collect();
    let outside: Vec<&&Value> = c.iter().filter(|n| n["verdict"] == "outside").collect();
    assert_eq!(inside.len(), 1);
    assert_ne!(
        inside[0]["result"], "ok",
        "loopback is down in the new namespace"
    );
    assert_eq!(outside.len(), 1);
    assert_eq!(outside[0]["result"], "ok");
    assert_eq!(outside[0]["netns"], own_netns());
    assert_eq!(r.report["verdict"], "outside");
    drop(listener);
}

#[test]
fn a_listener_left_running_is_marked() {
    let dir = tempfile::tempdir().unwrap();
    let port_file = dir.path().join("port");
    let py = format!(
        "import socket, time\ns = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\nopen('{f}', 'w').write(str(s.getsockname()[1]))\ntime.sleep(20)\n",
        f = port_file.display()
    );
    let script = format!(
        "setsid python3 -c \"$1\" > /dev/null 2>&1 < /dev/null & n=0; while [ ! -s {f} ] && [ $n -lt 1200 ]; do sleep 0.05; n=$((n+1)); done",
        f = port_file.display()
    );
    let r = run(&[], &["sh", "-c", &script, "sh", &py]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let port: u64 = std::fs::read_to_string(&port_file)
        .unwrap()
        .parse()
        .unwrap();
    let l = find(&r, |n| n["op"] == "listen" && n["port"] == port);
    assert_eq!(l.len(), 1, "{:#?}", net(&r));
    assert_eq!(l[0]["listening_at_end"], true);
    let pid = l[0]["pid"].as_i64().unwrap();
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
}

#[test]
fn allow_net_gives_one_violation_for_the_one_destination_outside_it() {
    let r = run(
        &["--allow-net", "127.0.0.0/8"],
        &["python3", "-c", CLIENT_SERVER, "::1"],
    );
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let v: Vec<&Value> = r.report["violations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["kind"] == "network")
        .collect();
    // ::1 is outside 127.0.0.0/8: the ok connect and the refused one are two destinations.
    assert_eq!(v.len(), 2, "{v:#?}");

    let py = "import socket\ns=socket.socket(); s.bind(('127.0.0.1',0)); s.listen(); p=s.getsockname()[1]\nsocket.create_connection(('127.0.0.1', p)).close()\nt=socket.socket(socket.AF_INET6); t.bind(('::1',0)); t.listen(); q=t.getsockname()[1]\nsocket.create_connection(('::1', q)).close()\n";
    let r = run(
        &["--allow-net", "127.0.0.0/8", "--fail-on", "network"],
        &["python3", "-c", py],
    );
    let v: Vec<&Value> = r.report["violations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["kind"] == "network")
        .collect();
    assert_eq!(v.len(), 1, "{v:#?}");
    assert!(v[0]["summary"].as_str().unwrap().contains("::1"), "{v:#?}");
    assert_eq!(r.code(), Some(3), "--fail-on network");
    // Without --allow-net there is no network violation.
    let r = run(&[], &["python3", "-c", py]);
    assert!(
        !r.report["violations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["kind"] == "network")
    );
}

#[test]
fn allowed_dns_questions_allow_their_resolver_connect_and_others_do_not() {
    let py = DNS_QUERY.to_string()
        + r#"
c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
c.connect(("127.0.0.1", 53))
for name, qtype in (("allowed.sandbox-watch.test", 1), ("allowed.sandbox-watch.test", 28)):
    try: c.send(query(name, qtype))
    except ConnectionRefusedError: c.send(query(name, qtype))
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.sendto(query("elsewhere.sandbox-watch.test"), ("127.0.0.2", 53))
"#;
    let r = run(
        &["--allow-net", "allowed.sandbox-watch.test:443"],
        &["python3", "-c", &py],
    );
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let v: Vec<&str> = r.report["violations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["kind"] == "network")
        .map(|v| v["summary"].as_str().unwrap())
        .collect();
    // The question for another name is one; the resolver connect of the allowed questions
    // and the allowed questions (an A and an AAAA) are none.
    assert_eq!(v.len(), 1, "{v:#?}");
    assert!(v[0].contains("elsewhere.sandbox-watch.test"), "{v:#?}");
}
