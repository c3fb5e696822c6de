//! Network I/O through io_uring only: no connect, send, sendmsg, accept or recv syscall is
//! made, so syscall tracepoints see none of it.
//!
//! ```text
//! uring-net [--setns NSPATH] [--uring-socket] tcp ADDR PORT MESSAGE
//!     IORING_OP_CONNECT linked with IORING_OP_SEND: MESSAGE to ADDR:PORT over TCP.
//! uring-net [--setns NSPATH] [--uring-socket] udp ADDR PORT MESSAGE
//!     IORING_OP_SENDMSG with a destination (msg_name) on an unconnected UDP socket.
//! uring-net [--uring-listen] accept PORTFILE
//!     A listener on 127.0.0.1 (bind+listen syscalls, or IORING_OP_BIND/LISTEN, 6.11+) whose
//!     port is written to PORTFILE; one connection taken with IORING_OP_ACCEPT and read with
//!     IORING_OP_RECV.
//! ```
//! `--setns NSPATH` first moves the process into that network namespace (e.g. the host's,
//! from a sandbox made with `unshare -n`); `--uring-socket` makes the socket with
//! IORING_OP_SOCKET (5.19+) instead of socket(2); `--async` sets IOSQE_ASYNC on every request
//! (they run in io-wq worker threads); `--sqpoll` makes a ring whose submissions a kernel
//! thread polls (IORING_SETUP_SQPOLL: not even io_uring_enter submits them). Prints one JSON
//! line of what happened.
#[path = "net_attack/common.rs"]
mod common;

use std::os::fd::RawFd;

use common::*;
use io_uring::{IoUring, opcode, squeue, types};
use serde_json::json;

const USAGE: &str = "usage: uring-net [--setns NSPATH] [--uring-socket] [--async] [--sqpoll] tcp|udp ADDR PORT MESSAGE | uring-net [--uring-listen] accept PORTFILE";

/// IOSQE_ASYNC on every request (`--async`).
static ASYNC: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut uring_socket = false;
    let mut uring_listen = false;
    let mut sqpoll = false;
    while let Some(a) = args.first().cloned() {
        match a.as_str() {
            "--setns" if args.len() > 1 => {
                enter_netns(open_ns(&args[1]));
                args.drain(..2);
            }
            "--uring-socket" => {
                uring_socket = true;
                args.remove(0);
            }
            "--uring-listen" => {
                uring_listen = true;
                args.remove(0);
            }
            "--async" => {
                ASYNC.store(true, std::sync::atomic::Ordering::Relaxed);
                args.remove(0);
            }
            "--sqpoll" => {
                sqpoll = true;
                args.remove(0);
            }
            _ => break,
        }
    }
    let mut builder = IoUring::builder();
    if sqpoll {
        builder.setup_sqpoll(2000);
    }
    let mut ring = builder
        .build(8)
        .unwrap_or_else(|e| die(format!("io_uring_setup: {e}")));
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["tcp", ip, port, msg] => tcp(&mut ring, parse_addr(ip, port), msg, uring_socket),
        ["udp", ip, port, msg] => udp(&mut ring, parse_addr(ip, port), msg, uring_socket),
        ["accept", portfile] => accept(&mut ring, portfile, uring_listen),
        _ => die(USAGE),
    }
}

/// Submits the entries (in order) and returns their results.
fn run(ring: &mut IoUring, entries: &[squeue::Entry]) -> Vec<i32> {
    for e in entries {
        let e = if ASYNC.load(std::sync::atomic::Ordering::Relaxed) {
            e.clone().flags(squeue::Flags::ASYNC) // added to the entry's own flags
        } else {
            e.clone()
        };
        // SAFETY: every buffer an entry points to lives until this function returns, after
        // all of them completed.
        unsafe { ring.submission().push(&e) }.unwrap_or_else(|_| die("submission queue full"));
    }
    ring.submit_and_wait(entries.len())
        .unwrap_or_else(|e| die(format!("io_uring_enter: {e}")));
    let mut results = vec![0; entries.len()];
    for cqe in ring.completion() {
        if let Some(r) = results.get_mut(cqe.user_data() as usize) {
            *r = cqe.result();
        }
    }
    results
}

fn errno_name(r: i32) -> serde_json::Value {
    if r < 0 {
        json!(std::io::Error::from_raw_os_error(-r).to_string())
    } else {
        json!(r)
    }
}

fn new_socket(
    ring: &mut IoUring,
    family: libc::c_int,
    ty: libc::c_int,
    proto: libc::c_int,
    uring: bool,
) -> RawFd {
    if !uring {
        return socket(family, ty, proto);
    }
    let e = opcode::Socket::new(family, ty | libc::SOCK_CLOEXEC, proto)
        .build()
        .user_data(0);
    let fd = run(ring, &[e])[0];
    if fd < 0 {
        die(format!(
            "IORING_OP_SOCKET: {}",
            std::io::Error::from_raw_os_error(-fd)
        ));
    }
    fd
}

fn tcp(ring: &mut IoUring, to: std::net::SocketAddr, msg: &str, uring_socket: bool) {
    let fd = new_socket(ring, family(&to), libc::SOCK_STREAM, 0, uring_socket);
    let (ss, len) = raw_sockaddr(&to);
    let connect = opcode::Connect::new(types::Fd(fd), (&raw const ss).cast(), len)
        .build()
        .flags(squeue::Flags::IO_LINK)
        .user_data(0);
    let send = opcode::Send::new(types::Fd(fd), msg.as_ptr(), msg.len() as u32)
        .build()
        .user_data(1);
    let r = run(ring, &[connect, send]);
    report(json!({
        "attack": "uring-tcp", "to": to.to_string(), "socket": if uring_socket { "IORING_OP_SOCKET" } else { "socket(2)" },
        "connect": errno_name(r[0]), "send": errno_name(r[1]),
        "local": sock_name(fd, false), "netns": own_netns(),
    }));
    close(fd);
    if r[0] < 0 || r[1] < 0 {
        std::process::exit(1);
    }
}

fn udp(ring: &mut IoUring, to: std::net::SocketAddr, msg: &str, uring_socket: bool) {
    let fd = new_socket(ring, family(&to), libc::SOCK_DGRAM, 0, uring_socket);
    let (mut ss, len) = raw_sockaddr(&to);
    let mut iov = libc::iovec {
        iov_base: msg.as_ptr() as *mut _,
        iov_len: msg.len(),
    };
    // SAFETY: msghdr is plain data; the fields set point to live buffers.
    let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
    hdr.msg_name = (&raw mut ss).cast();
    hdr.msg_namelen = len;
    hdr.msg_iov = &raw mut iov;
    hdr.msg_iovlen = 1;
    let send = opcode::SendMsg::new(types::Fd(fd), &raw const hdr)
        .build()
        .user_data(0);
    let r = run(ring, &[send]);
    report(json!({
        "attack": "uring-udp", "to": to.to_string(), "socket": if uring_socket { "IORING_OP_SOCKET" } else { "socket(2)" },
        "sendmsg": errno_name(r[0]), "local": sock_name(fd, false), "netns": own_netns(),
    }));
    close(fd);
    if r[0] < 0 {
        std::process::exit(1);
    }
}

fn accept(ring: &mut IoUring, portfile: &str, uring_listen: bool) {
    let fd = socket(libc::AF_INET, libc::SOCK_STREAM, 0);
    let (ss, len) = raw_sockaddr(&"127.0.0.1:0".parse().unwrap());
    if uring_listen {
        let bind = opcode::Bind::new(types::Fd(fd), (&raw const ss).cast(), len)
            .build()
            .flags(squeue::Flags::IO_LINK)
            .user_data(0);
        let listen = opcode::Listen::new(types::Fd(fd), 8).build().user_data(1);
        let r = run(ring, &[bind, listen]);
        if r[0] < 0 || r[1] < 0 {
            die(format!(
                "IORING_OP_BIND/LISTEN (6.11+): {} / {}",
                errno_name(r[0]),
                errno_name(r[1])
            ));
        }
    } else {
        // SAFETY: a valid sockaddr of its length.
        if unsafe { libc::bind(fd, (&raw const ss).cast(), len) } != 0
            || unsafe { libc::listen(fd, 8) } != 0
        {
            die(last_error("bind/listen"));
        }
    }
    let local = sock_name(fd, false);
    let port = local.rsplit(':').next().unwrap_or("0").to_string();
    std::fs::write(portfile, &port).unwrap_or_else(|e| die(format!("{portfile}: {e}")));
    // SAFETY: plain data, filled by the kernel.
    let mut peer: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut peer_len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    let e = opcode::Accept::new(types::Fd(fd), (&raw mut peer).cast(), &raw mut peer_len)
        .build()
        .user_data(0);
    let conn = run(ring, &[e])[0];
    if conn < 0 {
        die(format!("IORING_OP_ACCEPT: {}", errno_name(conn)));
    }
    let mut buf = [0u8; 256];
    let e = opcode::Recv::new(types::Fd(conn), buf.as_mut_ptr(), buf.len() as u32)
        .build()
        .user_data(0);
    let n = run(ring, &[e])[0];
    report(json!({
        "attack": "uring-accept", "listen": local, "listen_by": if uring_listen { "IORING_OP_BIND+LISTEN" } else { "bind(2)+listen(2)" },
        "peer": storage_to_string(&peer),
        "received": String::from_utf8_lossy(&buf[..n.max(0) as usize]),
    }));
    close(conn);
    close(fd);
}
