//! What the network attack programs share: addresses as the kernel takes them, entering a
//! network namespace, waiting until a thread is inside a given syscall, and one JSON line of
//! what was done.
#![allow(dead_code)] // each program uses a part

use std::net::{IpAddr, SocketAddr};
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

pub fn die(msg: impl std::fmt::Display) -> ! {
    eprintln!("{msg}");
    std::process::exit(2)
}

pub fn last_error(what: &str) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

pub fn parse_addr(ip: &str, port: &str) -> SocketAddr {
    let ip: IpAddr = ip
        .parse()
        .unwrap_or_else(|_| die(format!("{ip}: not an IP address")));
    let port: u16 = port
        .parse()
        .unwrap_or_else(|_| die(format!("{port}: not a port")));
    SocketAddr::new(ip, port)
}

/// `addr` as a `sockaddr_in` / `sockaddr_in6` in a `sockaddr_storage`, with its length.
pub fn raw_sockaddr(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain data, all-zero is valid.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than sockaddr_in and suitably aligned.
            unsafe { std::ptr::write((&raw mut ss).cast(), sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: 0,
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: 0,
            };
            // SAFETY: as above.
            unsafe { std::ptr::write((&raw mut ss).cast(), sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as libc::socklen_t)
}

pub fn family(addr: &SocketAddr) -> libc::c_int {
    if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    }
}

/// The local or peer address of a socket, for people ("127.0.0.1:41234").
pub fn sock_name(fd: RawFd, peer: bool) -> String {
    // SAFETY: getsockname/getpeername fill at most `len` bytes of the storage.
    unsafe {
        let mut ss: libc::sockaddr_storage = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        let p = (&raw mut ss).cast();
        let r = if peer {
            libc::getpeername(fd, p, &mut len)
        } else {
            libc::getsockname(fd, p, &mut len)
        };
        if r != 0 {
            return format!("? ({})", std::io::Error::last_os_error());
        }
        storage_to_string(&ss)
    }
}

pub fn storage_to_string(ss: &libc::sockaddr_storage) -> String {
    // SAFETY: the family says which struct the storage holds.
    unsafe {
        match ss.ss_family as libc::c_int {
            libc::AF_INET => {
                let sin = &*(ss as *const _ as *const libc::sockaddr_in);
                let ip = std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
                format!("{ip}:{}", u16::from_be(sin.sin_port))
            }
            libc::AF_INET6 => {
                let sin6 = &*(ss as *const _ as *const libc::sockaddr_in6);
                let ip = std::net::Ipv6Addr::from(sin6.sin6_addr.s6_addr);
                format!("[{ip}]:{}", u16::from_be(sin6.sin6_port))
            }
            f => format!("family {f}"),
        }
    }
}

/// The network namespace inode of this thread ("net:[4026531840]" → 4026531840).
pub fn own_netns() -> u64 {
    let link = std::fs::read_link("/proc/thread-self/ns/net").unwrap_or_default();
    let s = link.to_string_lossy();
    s.trim_start_matches("net:[")
        .trim_end_matches(']')
        .parse()
        .unwrap_or(0)
}

/// Opens a namespace file (to come back to it later with `setns`).
pub fn open_ns(path: &str) -> RawFd {
    let c = std::ffi::CString::new(path).unwrap_or_else(|_| die("a path without NUL"));
    // SAFETY: a valid C string.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        die(last_error(&format!("open {path}")));
    }
    fd
}

/// Moves this thread into the network namespace `ns` (an open namespace file).
pub fn enter_netns(ns: RawFd) {
    // SAFETY: setns on an open namespace file.
    if unsafe { libc::setns(ns, libc::CLONE_NEWNET) } != 0 {
        die(last_error("setns"));
    }
}

pub fn gettid() -> libc::pid_t {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// Waits until thread `tid` of this process sleeps inside syscall `nr` (its
/// /proc/self/task/TID/syscall starts with the number, its stat says `S`), then `settle`
/// more. False when that did not happen within `limit`.
pub fn wait_in_syscall(tid: libc::pid_t, nr: i64, settle: Duration, limit: Duration) -> bool {
    let syscall = format!("/proc/self/task/{tid}/syscall");
    let stat = format!("/proc/self/task/{tid}/stat");
    let sleeping = || {
        let s = std::fs::read_to_string(&stat).unwrap_or_default();
        // pid (comm) STATE …: the comm may hold spaces, the state follows its last ')'.
        s.rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('S'))
    };
    let start = Instant::now();
    while start.elapsed() < limit {
        let text = std::fs::read_to_string(&syscall).unwrap_or_default();
        if text.split_whitespace().next() == Some(nr.to_string().as_str()) && sleeping() {
            std::thread::sleep(settle);
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}

pub fn socket(family: libc::c_int, ty: libc::c_int, proto: libc::c_int) -> RawFd {
    // SAFETY: socket has no memory arguments.
    let fd = unsafe { libc::socket(family, ty | libc::SOCK_CLOEXEC, proto) };
    if fd < 0 {
        die(last_error("socket"));
    }
    fd
}

/// Sends all of `data` on a connected socket.
pub fn send_all(fd: RawFd, data: &[u8]) -> isize {
    // SAFETY: data is a valid buffer of its length.
    unsafe { libc::send(fd, data.as_ptr().cast(), data.len(), 0) }
}

pub fn close(fd: RawFd) {
    // SAFETY: the caller owns fd.
    unsafe { libc::close(fd) };
}

/// Prints what the program did, one JSON object a line.
pub fn report(value: serde_json::Value) {
    println!("{value}");
}
