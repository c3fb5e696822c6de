//! Network truth from the kernel's own objects (issue 14): every way out that the syscall
//! probes alone missed, run for real against a listener of the test's own on loopback, and
//! checked against what that listener saw. Each of these left no record (or a wrong one) with
//! the syscall probes alone.
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::os::fd::FromRawFd;
use std::time::{Duration, Instant};

use integration_tests::*;
use serde_json::Value;

fn find(r: &Run, f: impl Fn(&Value) -> bool) -> Vec<&Value> {
    r.network().iter().filter(|n| f(n)).collect()
}

/// How long a test waits for its capture's program to act: the capture starts first (in the
/// 6.1 TCG guest loading the probe takes ~30 s), so a listener that gave up sooner freed its
/// trap before the connect came, or left its capture waiting forever.
const PATIENCE: Duration = Duration::from_secs(300);

/// The next connection on `l`, or a panic after PATIENCE (a test fails, it never hangs).
fn accept(l: &TcpListener) -> (TcpStream, std::net::SocketAddr) {
    l.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + PATIENCE;
    loop {
        match l.accept() {
            Ok((c, peer)) => {
                c.set_nonblocking(false).unwrap();
                return (c, peer);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                assert!(Instant::now() < deadline, "no connection came");
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("accept: {e}"),
        }
    }
}

/// A TCP listener on 127.0.0.1 that takes one connection and reads it to its end, in a thread:
/// (port, a handle giving the peer's address and the bytes).
fn tcp_listener() -> (
    u16,
    std::thread::JoinHandle<(std::net::SocketAddr, Vec<u8>)>,
) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let h = std::thread::spawn(move || {
        let (mut c, peer) = accept(&l);
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut data = Vec::new();
        let _ = c.read_to_end(&mut data);
        (peer, data)
    });
    (port, h)
}

fn uring_net() -> &'static str {
    env!("CARGO_BIN_EXE_uring-net")
}

fn assert_tcp_entry(r: &Run, port: u16, via: Option<&str>) {
    let c = find(r, |n| n["op"] == "connect" && n["port"] == port);
    assert_eq!(
        c.len(),
        1,
        "one connect to the listener: {:#?}",
        r.network()
    );
    assert_eq!(c[0]["proto"], "tcp");
    assert_eq!(c[0]["addr"], "127.0.0.1");
    assert_eq!(c[0]["netns"], own_netns());
    assert_eq!(c[0]["verdict"], "inside");
    assert_eq!(c[0]["result"], "ok", "{:#?}", c[0]);
    assert_eq!(c[0]["via"].as_str(), via, "{:#?}", c[0]);
}

#[test]
fn io_uring_connects_inline_in_io_wq_and_sqpoll_are_connects_with_the_kernels_destination() {
    for (flags, via) in [
        (&[][..], "io_uring"),
        (&["--async"][..], "io_uring worker"),
        (&["--sqpoll"][..], "io_uring worker"),
    ] {
        let (port, listener) = tcp_listener();
        let p = port.to_string();
        let mut cmd = vec![uring_net()];
        cmd.extend_from_slice(flags);
        cmd.extend(["tcp", "127.0.0.1", &p, "uring-secret"]);
        let r = run(&["--allow-net", "10.0.0.0/8"], &cmd);
        assert_eq!(r.code(), Some(0), "{flags:?}: {}", r.stderr());
        let (_, data) = listener.join().unwrap();
        assert_eq!(data, b"uring-secret", "the listener got the bytes");
        assert_tcp_entry(&r, port, Some(via));
        let v = r.violations_of(ViolationKind::Network);
        assert_eq!(v.len(), 1, "{flags:?}: --allow-net 10/8 judges it: {v:#?}");
        assert!(
            v[0].summary.contains(&format!("127.0.0.1:{port}")),
            "{v:#?}"
        );
    }
}

#[test]
fn fastopen_sendto_and_sendmsg_are_connects() {
    let py = r#"
import socket, sys
mode, port = sys.argv[1], int(sys.argv[2])
s = socket.socket()
if mode == "sendto":
    s.sendto(b"tfo-secret", socket.MSG_FASTOPEN, ("127.0.0.1", port))
else:
    s.sendmsg([b"tfo-secret"], [], socket.MSG_FASTOPEN, ("127.0.0.1", port))
s.close()
"#;
    for mode in ["sendto", "sendmsg"] {
        let (port, listener) = tcp_listener();
        let r = run(&[], &["python3", "-c", py, mode, &port.to_string()]);
        assert_eq!(r.code(), Some(0), "{mode}: {}", r.stderr());
        let (_, data) = listener.join().unwrap();
        assert_eq!(data, b"tfo-secret");
        assert_tcp_entry(&r, port, Some(&format!("fastopen {mode}")));
    }
}

#[test]
fn udp_datagrams_to_any_port_are_one_send_entry_with_the_kernels_counts() {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = rx.local_addr().unwrap().port();
    // sendto, sendmsg, and connect + send: 10 datagrams of 100 bytes each to one port.
    let py = r#"
import socket, sys
port = int(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(4): s.sendto(b"x" * 100, ("127.0.0.1", port))
for i in range(3): s.sendmsg([b"y" * 100], [], 0, ("127.0.0.1", port))
c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); c.connect(("127.0.0.1", port))
for i in range(3): c.send(b"z" * 100)
"#;
    let r = run(
        &["--allow-net", "10.0.0.0/8"],
        &["python3", "-c", py, &port.to_string()],
    );
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut got = 0;
    let mut buf = [0u8; 200];
    while got < 10 && rx.recv(&mut buf).is_ok() {
        got += 1;
    }
    assert_eq!(got, 10, "the listener got every datagram");
    let s = find(&r, |n| n["op"] == "send" && n["port"] == port);
    assert_eq!(s.len(), 1, "one entry for the flow: {:#?}", r.network());
    assert_eq!(s[0]["proto"], "udp");
    assert_eq!(s[0]["addr"], "127.0.0.1");
    assert_eq!(s[0]["netns"], own_netns());
    assert_eq!(s[0]["verdict"], "inside");
    // Two sockets: two flows counted into one entry.
    assert_eq!(s[0]["packets"], 10, "{:#?}", s[0]);
    let bytes = s[0]["bytes"].as_u64().unwrap();
    assert!(
        bytes >= 10 * 128,
        "wire bytes (IP + UDP headers included): {bytes}"
    );
    assert!(
        r.typed
            .violations
            .iter()
            .any(|v| v.kind == ViolationKind::Network
                && v.summary.contains(&format!("send 127.0.0.1:{port}"))),
        "--allow-net judges datagrams too: {:#?}",
        r.typed.violations
    );
}

#[test]
fn raw_icmp_is_a_send_entry() {
    let py = r#"
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
s.sendto(bytes([8, 0, 0xa4, 0xa7, 0x53, 0x57, 0, 1]), ("127.0.0.1", 0))
"#;
    let r = run(&[], &["python3", "-c", py]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let s = find(&r, |n| n["op"] == "send" && n["proto"] == "icmp");
    assert_eq!(s.len(), 1, "{:#?}", r.network());
    assert_eq!(s[0]["addr"], "127.0.0.1");
    assert_eq!(s[0]["via"], "raw socket");
    // One packet: the kernel's echo reply (its own socket, in softirq) is not the agent's.
    assert_eq!(s[0]["packets"], 1, "{:#?}", s[0]);
}

#[test]
fn setns_back_to_the_host_then_io_uring_udp_is_outside() {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = rx.local_addr().unwrap().port();
    let p = port.to_string();
    let host = format!("/proc/{}/ns/net", std::process::id());
    let r = run(
        &[],
        &[
            "unshare",
            "-n",
            uring_net(),
            "--setns",
            &host,
            "udp",
            "127.0.0.1",
            &p,
            "hi",
        ],
    );
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(
        rx.recv(&mut buf).unwrap(),
        2,
        "the datagram reached the host's loopback"
    );
    let s = find(&r, |n| n["op"] == "send" && n["port"] == port);
    assert_eq!(s.len(), 1, "{:#?}", r.network());
    assert_eq!(
        s[0]["netns"],
        own_netns(),
        "the device's namespace: the host's"
    );
    assert_eq!(
        s[0]["verdict"], "outside",
        "the agent lives in the unshare'd one"
    );
    assert!(
        r.typed
            .violations
            .iter()
            .any(|v| v.kind == ViolationKind::Outside
                && v.summary.contains(&format!("send 127.0.0.1:{port}"))),
        "{:#?}",
        r.typed.violations
    );
}

#[test]
fn an_accepted_inbound_connection_has_the_dialers_address_and_port() {
    let dir = tempfile::tempdir().unwrap();
    let portfile = dir.path().join("port");
    let py = r#"
import socket, sys
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(); l.settimeout(300)
open(sys.argv[1] + ".tmp", "w").write(str(l.getsockname()[1]))
import os; os.rename(sys.argv[1] + ".tmp", sys.argv[1])
c, peer = l.accept(); c.recv(100); c.close()
"#;
    let pf = portfile.clone();
    let dialer = std::thread::spawn(move || {
        let deadline = Instant::now() + PATIENCE;
        let port: u16 = loop {
            if let Ok(p) = std::fs::read_to_string(&pf) {
                break p.parse().unwrap();
            }
            assert!(
                Instant::now() < deadline,
                "the listener never wrote its port"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let local = s.local_addr().unwrap();
        s.write_all(b"hello").unwrap();
        (port, local)
    });
    let r = run(&[], &["python3", "-c", py, portfile.to_str().unwrap()]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let (port, local) = dialer.join().unwrap();
    let a = find(&r, |n| n["op"] == "accept");
    assert_eq!(a.len(), 1, "{:#?}", r.network());
    assert_eq!(a[0]["addr"], local.ip().to_string());
    assert_eq!(a[0]["port"], local.port(), "the dialer's own port");
    assert_eq!(a[0]["netns"], own_netns());
    assert_eq!(
        find(&r, |n| n["op"] == "listen" && n["port"] == port).len(),
        1
    );
}

/// A listener whose accept queue is held full (backlog 0 and a connection of its own) until a
/// SYN is dropped for it, so a connect to it sleeps in the kernel ~1 s until its SYN is sent
/// again; then it takes one connection and reads it.
fn slow_listener() -> (
    u16,
    std::thread::JoinHandle<(std::net::SocketAddr, Vec<u8>)>,
) {
    // SAFETY: plain socket calls on a descriptor this function owns.
    let l = unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0);
        let addr = libc::sockaddr_in {
            sin_family: libc::AF_INET as u16,
            sin_port: 0,
            sin_addr: libc::in_addr {
                s_addr: u32::from_ne_bytes([127, 0, 0, 1]),
            },
            sin_zero: [0; 8],
        };
        assert_eq!(libc::bind(fd, (&raw const addr).cast(), 16), 0);
        assert_eq!(libc::listen(fd, 0), 0);
        TcpListener::from_raw_fd(fd)
    };
    let port = l.local_addr().unwrap().port();
    let filler = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let overflows = || {
        let text = std::fs::read_to_string("/proc/net/netstat").unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for pair in lines.chunks(2) {
            if pair[0].starts_with("TcpExt:") {
                let i = pair[0]
                    .split_whitespace()
                    .position(|w| w == "ListenOverflows");
                return pair[1]
                    .split_whitespace()
                    .nth(i.unwrap())
                    .unwrap()
                    .parse::<u64>()
                    .unwrap();
            }
        }
        0
    };
    let h = std::thread::spawn(move || {
        let before = overflows();
        let deadline = Instant::now() + PATIENCE;
        while overflows() == before && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let (f, _) = accept(&l);
        drop((f, filler));
        let (mut c, peer) = accept(&l);
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut data = Vec::new();
        let _ = c.read_to_end(&mut data);
        (peer, data)
    });
    (port, h)
}

#[test]
fn a_sockaddr_rewritten_during_connect_is_recorded_where_it_went_and_flagged() {
    let (port, listener) = slow_listener();
    let p = port.to_string();
    let r = run(
        &["--allow-net", "10.0.0.0/8", "--fail-on", "tamper"],
        &[
            env!("CARGO_BIN_EXE_connect-race"),
            "127.0.0.1",
            &p,
            "10.66.66.66",
            "443",
            "raced",
        ],
    );
    assert_eq!(r.code(), Some(3), "--fail-on tamper: {}", r.stderr());
    let (_, data) = listener.join().unwrap();
    assert_eq!(data, b"raced", "the connection went to the listener");
    let c = find(&r, |n| n["op"] == "connect");
    assert_eq!(c.len(), 1, "{:#?}", r.network());
    assert_eq!(
        (c[0]["addr"].as_str(), c[0]["port"].as_u64()),
        (Some("127.0.0.1"), Some(port as u64))
    );
    assert!(
        find(&r, |n| n["addr"] == "10.66.66.66").is_empty(),
        "the decoy is nowhere"
    );
    let t = r.violations_of(ViolationKind::Tamper);
    assert_eq!(t.len(), 1, "{:#?}", r.typed.violations);
    assert!(
        t[0].summary.contains(&format!("127.0.0.1:{port}"))
            && t[0].summary.contains("10.66.66.66:443"),
        "{t:#?}"
    );
    assert!(
        r.typed
            .violations
            .iter()
            .any(|v| v.kind == ViolationKind::Network),
        "127.0.0.1 is not in 10/8"
    );
}

#[test]
fn a_descriptor_swapped_during_connect_keeps_the_kernels_socket_namespace() {
    let (port, listener) = slow_listener();
    let p = port.to_string();
    let host = format!("/proc/{}/ns/net", std::process::id());
    let r = run(
        &[],
        &[
            "unshare",
            "-n",
            env!("CARGO_BIN_EXE_connect-fdswap"),
            &host,
            "127.0.0.1",
            &p,
            "swapped",
        ],
    );
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let (_, data) = listener.join().unwrap();
    assert_eq!(data, b"swapped");
    let c = find(&r, |n| n["op"] == "connect" && n["port"] == port);
    assert_eq!(c.len(), 1, "{:#?}", r.network());
    assert_eq!(
        c[0]["netns"],
        own_netns(),
        "the socket the kernel connected is the host's"
    );
    assert_eq!(c[0]["verdict"], "outside");
    let t = r.violations_of(ViolationKind::Tamper);
    assert_eq!(t.len(), 1, "{:#?}", r.typed.violations);
    assert!(t[0].summary.contains("another socket"), "{t:#?}");
}

/// The index of a device of the test's own namespace.
fn ifindex(name: &str) -> u32 {
    let c = std::ffi::CString::new(name).unwrap();
    // SAFETY: a NUL-terminated name.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    assert_ne!(i, 0, "no device {name}");
    i
}

#[test]
fn af_packet_frames_are_one_send_entry_naming_the_device() {
    // The test's own packet socket on lo sees what the agent's frames delivered.
    const ETHERTYPE: u16 = 0x88b5;
    let lo = ifindex("lo");
    // SAFETY: plain socket calls on a descriptor this test owns.
    let rx = unsafe {
        let fd = libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            ETHERTYPE.to_be() as i32,
        );
        assert!(fd >= 0, "AF_PACKET: {}", std::io::Error::last_os_error());
        let mut sll: libc::sockaddr_ll = std::mem::zeroed();
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ETHERTYPE.to_be();
        sll.sll_ifindex = lo as i32;
        let len = std::mem::size_of::<libc::sockaddr_ll>() as u32;
        assert_eq!(libc::bind(fd, (&raw const sll).cast(), len), 0);
        std::os::fd::OwnedFd::from_raw_fd(fd)
    };
    let py = r#"
import socket
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x88b5))
s.bind(("lo", 0))
frame = bytes(12) + b"\x88\xb5" + b"sw-packet-frame"
frame += bytes(60 - len(frame))
for i in range(5): s.send(frame)
"#;
    let r = run(&["--allow-net", "10.0.0.0/8"], &["python3", "-c", py]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let mut got = 0;
    let mut buf = [0u8; 128];
    loop {
        // SAFETY: a read into a buffer of its length, without waiting.
        let n = unsafe {
            libc::recv(
                std::os::fd::AsRawFd::as_raw_fd(&rx),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            break;
        }
        if buf[..n as usize]
            .windows(15)
            .any(|w| w == b"sw-packet-frame")
        {
            got += 1;
        }
    }
    assert_eq!(got, 5, "the frames went out on lo");
    let s = find(&r, |n| n["op"] == "send" && n["via"] == "packet socket");
    assert_eq!(s.len(), 1, "one entry for the flow: {:#?}", r.network());
    assert_eq!(s[0]["proto"], "ethertype 0x88b5", "{:#?}", s[0]);
    assert_eq!(s[0]["device"], "lo", "{:#?}", s[0]);
    assert_eq!(s[0]["ifindex"], lo, "{:#?}", s[0]);
    assert_eq!(s[0]["netns"], own_netns(), "the device's namespace");
    assert_eq!(s[0]["verdict"], "inside");
    assert!(s[0].get("addr").is_none(), "not IP: no address {:#?}", s[0]);
    assert_eq!(s[0]["packets"], 5, "{:#?}", s[0]);
    assert_eq!(s[0]["bytes"], 5 * 60, "{:#?}", s[0]);
    assert!(
        r.typed
            .violations
            .iter()
            .any(|v| v.kind == ViolationKind::Network
                && v.summary.contains("send ethertype 0x88b5 on lo")),
        "--allow-net judges frames too: {:#?}",
        r.typed.violations
    );
}

/// The machine's own vsock CID (IOCTL_VM_SOCKETS_GET_LOCAL_CID on /dev/vsock).
fn local_cid() -> u32 {
    let f = std::fs::File::open("/dev/vsock").expect("/dev/vsock");
    let mut cid = 0u32;
    // SAFETY: the ioctl writes one u32.
    let rc = unsafe { libc::ioctl(std::os::fd::AsRawFd::as_raw_fd(&f), 0x7b9, &mut cid) };
    assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
    cid
}

#[test]
fn vsock_connects_name_the_cid_and_port_the_kernels_socket_holds() {
    // The machine's own CID: nothing leaves it (without vsock_loopback the virtio transport
    // refuses a packet to its own CID with ENODEV, with it the loopback answers).
    let cid = local_cid();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("errors");
    let py = r#"
import socket, sys, errno
cid, out = int(sys.argv[1]), sys.argv[2]
names = []
for port in (5005, 100005):
    s = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
    try:
        s.connect((cid, port)); names.append("ok")
    except OSError as e:
        names.append(errno.errorcode[e.errno])
    s.close()
open(out, "w").write(" ".join(names))
"#;
    let r = run(
        &["--allow-net", "10.0.0.0/8"],
        &["python3", "-c", py, &cid.to_string(), out.to_str().unwrap()],
    );
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let results = std::fs::read_to_string(&out).unwrap();
    let results: Vec<&str> = results.split(' ').collect();
    let c = find(&r, |n| n["op"] == "connect" && n["proto"] == "vsock");
    assert_eq!(c.len(), 2, "{:#?}", r.network());
    for (i, port) in [5005u32, 100005].into_iter().enumerate() {
        let e = c
            .iter()
            .find(|e| e["vsock_port"] == port)
            .unwrap_or_else(|| panic!("no entry for port {port}: {c:#?}"));
        assert_eq!(e["addr"], cid.to_string(), "the CID: {e:#?}");
        match u16::try_from(port) {
            Ok(p) => assert_eq!(e["port"], p, "{e:#?}"),
            Err(_) => assert!(e.get("port").is_none(), "{e:#?}"),
        }
        assert_eq!(e["result"], results[i], "the caller's own result: {e:#?}");
        assert_eq!(e["netns"], own_netns(), "the socket's namespace");
        assert_eq!(e["verdict"], "inside");
    }
    assert!(
        find(&r, |n| n["proto"] == "tcp").is_empty(),
        "no vsock connect is a tcp entry: {:#?}",
        r.network()
    );
    let v = r.violations_of(ViolationKind::Network);
    assert_eq!(v.len(), 2, "--allow-net judges vsock too: {v:#?}");
    assert!(
        v.iter()
            .any(|v| v.summary.contains(&format!("vsock cid {cid} port 100005"))),
        "{v:#?}"
    );
}
