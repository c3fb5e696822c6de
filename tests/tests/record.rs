//! The live report and the report a replay rebuilds from the log are the same (every `run`
//! of these tests checks it, see `integration_tests::run_in`): here, the four cases in which
//! they used to disagree, each on the real kernel.
use integration_tests::*;

/// A free TCP port on 127.0.0.1 (bound and let go: nothing listens there now).
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[test]
fn a_launchers_fork_after_the_agent_began_is_judged_the_same_live_and_replayed() {
    // A launcher (a shell under a launcher's name) starts the agent in a network namespace of
    // its own, then forks a subshell in the host's namespace. That fork is not part of the
    // launch: live, it was OUTSIDE; the replay copied `launcher` from its parent and said
    // INSIDE.
    let r = {
        let dir = tempfile::tempdir().unwrap();
        let launcher = dir.path().join("timeout");
        std::os::unix::fs::symlink("/bin/sh", &launcher).unwrap();
        // The launcher runs nothing before the agent (a program it ran first would be the
        // agent): it waits on a FIFO the agent writes to, with the shell's own `read`.
        let fifo = dir.path().join("started");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
        let script = format!(
            "unshare -n sh -c 'echo > {f}; sleep 1' & read x < {f}; (exit 4); wait",
            f = fifo.display()
        );
        let launcher = launcher.to_str().unwrap().to_string();
        run_in(dir, &[], &[&launcher, "-c", &script])
    };
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let report = &r.typed;
    let agent = report.agent.netns.expect("the agent's namespace");
    assert_ne!(
        agent,
        own_netns(),
        "the agent runs in a namespace of its own"
    );
    let sub = report
        .processes
        .iter()
        .find(|p| p.fork_only && p.exit_code == Some(4))
        .unwrap_or_else(|| panic!("the subshell: {:#?}", report.processes));
    assert!(!sub.launcher, "forked after the agent began");
    assert_eq!(sub.verdict, Verdict::Outside, "{sub:#?}");
    assert_eq!(report.verdict, Verdict::Outside);
}

#[test]
fn allow_net_host_rules_are_judged_the_same_live_and_replayed() {
    // A host rule allows the addresses the name resolved to when the capture began. The log
    // did not say which: a replay found the connect outside every rule.
    let host = nix_hostname();
    let port = free_port();
    let Some(addr) = std::net::ToSocketAddrs::to_socket_addrs(&(host.as_str(), port))
        .ok()
        .and_then(|mut a| a.find(|a| a.is_ipv4()))
    else {
        panic!("this machine's name {host} does not resolve; the test needs it to (/etc/hosts)");
    };
    let py = format!(
        "import socket\nsrv = socket.socket(); srv.bind(('{ip}', {port})); srv.listen()\n\
         socket.create_connection(('{ip}', {port})).close()",
        ip = addr.ip()
    );
    let rule = format!("{host}:{port}");
    let r = run(
        &["--allow-net", &rule, "--fail-on", "network"],
        &["python3", "-c", &py],
    );
    assert_eq!(r.code(), Some(0), "allowed live: {}", r.stderr());
    let connect = r
        .typed
        .network
        .iter()
        .find(|n| n.op == NetOp::Connect && n.port == Some(port))
        .unwrap_or_else(|| panic!("the connect: {:#?}", r.typed.network));
    assert_eq!(connect.result, "ok");
    assert!(r.typed.violations.is_empty(), "{:#?}", r.typed.violations);
    // And replayed, with --fail-on network: allowed too (status 0, not 3).
    let out = sandbox_watch(&[
        "replay",
        "--headless",
        "--fail-on",
        "network",
        r.log.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn nix_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn fifteen_non_blocking_connects_to_one_address_are_one_entry() {
    // As a real agent connects: non-blocking, 15 times to one address. Live made 15 entries
    // of count 1 (each was in progress when the call returned), the replay one of count 15.
    let py = r#"
import socket, select
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(64); port = srv.getsockname()[1]
for _ in range(15):
    s = socket.socket(); s.setblocking(False)
    try: s.connect(("127.0.0.1", port))
    except BlockingIOError: pass
    select.select([], [s], [], 2)
    s.close()
print(port)
"#;
    let r = run(&[], &["python3", "-c", py]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let port: u16 = String::from_utf8_lossy(&r.output.stdout)
        .trim()
        .parse()
        .unwrap();
    let connects: Vec<&NetEntry> = r
        .typed
        .network
        .iter()
        .filter(|n| n.op == NetOp::Connect && n.port == Some(port))
        .collect();
    assert_eq!(connects.len(), 1, "one entry: {connects:#?}");
    let c = connects[0];
    assert_eq!((c.count, c.result.as_str()), (15, "ok"), "{c:#?}");
    assert!(c.first_at < c.last_at, "{c:#?}");
}

#[test]
fn a_connects_later_outcome_goes_to_its_own_socket() {
    // Two connects in progress from one process to the same port of two addresses; their
    // outcomes come a second later (the listeners' queues are full, so the first SYNs are
    // dropped), in the other order: the first refused (its listener closed), the second
    // accepted. Paired by process and port, the replay gave each the other's outcome.
    let port = free_port();
    let py = format!(
        r#"
import socket, select, time
def listener(ip):
    s = socket.socket(); s.bind((ip, {port})); s.listen(0)
    filler = socket.socket(); filler.connect((ip, {port}))   # fills the accept queue
    return s, filler
a, fa = listener("127.0.0.1")
b, fb = listener("127.0.0.2")
ca = socket.socket(); ca.setblocking(False); ca.connect_ex(("127.0.0.1", {port}))
time.sleep(0.1)
cb = socket.socket(); cb.setblocking(False); cb.connect_ex(("127.0.0.2", {port}))
a.close()                      # the retransmitted SYN to .1 is refused
conn, _ = b.accept()           # room again at .2: its retransmitted SYN is accepted
select.select([], [cb], [], 5); select.select([], [ca], [], 5)
print(ca.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR), cb.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR))
"#
    );
    let r = run(&[], &["python3", "-c", &py]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let errors = String::from_utf8_lossy(&r.output.stdout).trim().to_string();
    assert_eq!(
        errors, "111 0",
        "the kernel's own outcomes: .1 refused, .2 accepted"
    );
    let outcome = |ip: &str| {
        let found: Vec<&NetEntry> = r
            .typed
            .network
            .iter()
            .filter(|n| {
                n.op == NetOp::Connect && n.port == Some(port) && n.addr.as_deref() == Some(ip)
            })
            .collect();
        found
            .iter()
            .map(|n| n.result.clone())
            .collect::<Vec<String>>()
    };
    // The fillers' connects worked at once; the two in progress got their own outcome.
    assert!(
        outcome("127.0.0.1").contains(&"refused".to_string()),
        "{:#?}",
        r.typed.network
    );
    let b = outcome("127.0.0.2");
    assert!(
        !b.contains(&"refused".to_string()),
        "{b:?}: {:#?}",
        r.typed.network
    );
    assert!(
        !outcome("127.0.0.1").contains(&"in_progress".to_string())
            && !b.contains(&"in_progress".to_string()),
        "both outcomes seen: {:#?}",
        r.typed.network
    );
}
