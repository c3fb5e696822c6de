//! Reaches into the monitor's process, then acts (key read, connect, .bashrc).
//!
//! `attack-ptrace STEP…` (default: every step), run as root under `sandbox-watch run`:
//! - `attach`: PTRACE_ATTACH to the monitor's main thread, PTRACE_GETREGS, PTRACE_DETACH;
//! - `seize-thread`: PTRACE_SEIZE + PTRACE_INTERRUPT of another thread of the monitor, detach;
//! - `vm-read`: process_vm_readv of the monitor's stack;
//! - `vm-write`: process_vm_writev of the same bytes back (a write that changes nothing);
//! - `proc`: opens /proc/MONITOR/{mem,maps,environ}, reads mem at the stack, and reopens the
//!   monitor's evidence log through /proc/MONITOR/fd/N for appending;
//! - `pidfd`: pidfd_open, pidfd_getfd of the monitor's log fd, pidfd_send_signal(0).
//!
//! Each step prints what the kernel allowed. Exit 0 when at least one step worked.
#[path = "../attack_common.rs"]
mod common;

use std::io::Read as _;
use std::os::fd::{FromRawFd as _, OwnedFd};

use common::*;

fn errno() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// Field 28 of /proc/PID/stat: the start of the stack (an address certainly mapped).
fn start_stack(pid: i32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = &stat[stat.rfind(')').map_or(0, |i| i + 2)..];
    after
        .split(' ')
        .nth(25)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The fd number of the monitor's --log file.
fn log_fd(monitor: i32) -> Option<(i32, std::path::PathBuf)> {
    let log = monitor_option(monitor, "--log")?;
    for entry in std::fs::read_dir(format!("/proc/{monitor}/fd"))
        .ok()?
        .flatten()
    {
        if std::fs::read_link(entry.path()).ok().as_deref() == Some(log.as_path()) {
            return Some((entry.file_name().to_str()?.parse().ok()?, log));
        }
    }
    None
}

fn attach(monitor: i32) -> bool {
    // SAFETY: ptrace/waitpid with integer arguments and a zeroed regs struct.
    unsafe {
        if libc::ptrace(libc::PTRACE_ATTACH, monitor, 0, 0) != 0 {
            say(&format!("PTRACE_ATTACH {monitor}: {}", errno()));
            return false;
        }
        let mut status = 0;
        libc::waitpid(monitor, &mut status, libc::__WALL);
        let mut regs: libc::user_regs_struct = std::mem::zeroed();
        let got = libc::ptrace(libc::PTRACE_GETREGS, monitor, 0, &mut regs);
        say(&format!(
            "PTRACE_ATTACH {monitor}: attached; GETREGS {} (rip {:#x})",
            if got == 0 { "ok" } else { "failed" },
            regs.rip
        ));
        libc::ptrace(libc::PTRACE_DETACH, monitor, 0, 0);
    }
    true
}

fn seize_thread(monitor: i32) -> bool {
    let Some(tid) = threads_of(monitor).into_iter().find(|t| *t != monitor) else {
        say("the monitor has one thread only");
        return false;
    };
    // SAFETY: as above.
    unsafe {
        if libc::ptrace(libc::PTRACE_SEIZE, tid, 0, 0) != 0 {
            say(&format!("PTRACE_SEIZE thread {tid}: {}", errno()));
            return false;
        }
        libc::ptrace(libc::PTRACE_INTERRUPT, tid, 0, 0);
        let mut status = 0;
        libc::waitpid(tid, &mut status, libc::__WALL);
        say(&format!(
            "PTRACE_SEIZE + INTERRUPT of monitor thread {tid}: stopped (status {status:#x})"
        ));
        libc::ptrace(libc::PTRACE_DETACH, tid, 0, 0);
    }
    true
}

fn vm(monitor: i32, write: bool) -> bool {
    let at = start_stack(monitor).saturating_sub(256);
    let mut buf = [0u8; 64];
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: at as *mut _,
        iov_len: buf.len(),
    };
    // SAFETY: valid iovecs of our own buffer; the remote one is only used by the kernel.
    let n = unsafe { libc::process_vm_readv(monitor, &local, 1, &remote, 1, 0) };
    if n < 0 {
        say(&format!("process_vm_readv {monitor} @{at:#x}: {}", errno()));
        return false;
    }
    say(&format!("process_vm_readv {monitor} @{at:#x}: {n} bytes"));
    if write {
        // SAFETY: as above; the bytes written are the ones just read.
        let n = unsafe { libc::process_vm_writev(monitor, &local, 1, &remote, 1, 0) };
        if n < 0 {
            say(&format!("process_vm_writev {monitor}: {}", errno()));
            return false;
        }
        say(&format!(
            "process_vm_writev {monitor} @{at:#x}: {n} bytes written"
        ));
    }
    true
}

fn proc_files(monitor: i32) -> bool {
    let mut any = false;
    for name in ["maps", "environ"] {
        match std::fs::read(format!("/proc/{monitor}/{name}")) {
            Ok(b) => {
                say(&format!("read /proc/{monitor}/{name}: {} bytes", b.len()));
                any = true;
            }
            Err(e) => say(&format!("/proc/{monitor}/{name}: {e}")),
        }
    }
    match std::fs::File::open(format!("/proc/{monitor}/mem")) {
        Ok(f) => {
            use std::os::unix::fs::FileExt as _;
            let mut buf = [0u8; 64];
            let at = start_stack(monitor).saturating_sub(256);
            match f.read_at(&mut buf, at) {
                Ok(n) => say(&format!("read /proc/{monitor}/mem @{at:#x}: {n} bytes")),
                Err(e) => say(&format!("read /proc/{monitor}/mem: {e}")),
            }
            any = true;
        }
        Err(e) => say(&format!("/proc/{monitor}/mem: {e}")),
    }
    if let Some((fd, log)) = log_fd(monitor) {
        let through = format!("/proc/{monitor}/fd/{fd}");
        match std::fs::OpenOptions::new().append(true).open(&through) {
            Ok(_) => {
                say(&format!(
                    "opened the monitor's log {} for appending through {through}",
                    log.display()
                ));
                any = true;
            }
            Err(e) => say(&format!("{through}: {e}")),
        }
    }
    any
}

fn pidfd(monitor: i32) -> bool {
    // SAFETY: plain syscalls with integer arguments.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, monitor, 0) };
    if pidfd < 0 {
        say(&format!("pidfd_open {monitor}: {}", errno()));
        return false;
    }
    // SAFETY: the kernel just gave us this fd.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as i32) };
    use std::os::fd::AsRawFd as _;
    say(&format!("pidfd_open {monitor}: fd {}", pidfd.as_raw_fd()));
    if let Some((fd, log)) = log_fd(monitor) {
        // SAFETY: as above.
        let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
        if got < 0 {
            say(&format!("pidfd_getfd of the log fd {fd}: {}", errno()));
        } else {
            // SAFETY: as above.
            let mut f = unsafe { std::fs::File::from_raw_fd(got as i32) };
            let mut head = String::new();
            let _ = (&mut f).take(0).read_to_string(&mut head);
            say(&format!(
                "pidfd_getfd: holds the monitor's log {} (its fd {fd}) as fd {got}",
                log.display()
            ));
        }
    }
    // SAFETY: as above; signal 0 only checks that the signal could be sent.
    let sent = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            0,
            std::ptr::null::<u8>(),
            0,
        )
    };
    say(&format!(
        "pidfd_send_signal(0): {}",
        if sent == 0 {
            "allowed".to_string()
        } else {
            errno().to_string()
        }
    ));
    true
}

fn main() {
    let mut steps: Vec<String> = std::env::args().skip(1).collect();
    if steps.is_empty() {
        steps = [
            "attach",
            "seize-thread",
            "vm-read",
            "vm-write",
            "proc",
            "pidfd",
        ]
        .map(String::from)
        .to_vec();
    }
    let home = attack_home();
    let listener = listener();
    let port = listener.local_addr().unwrap().port();
    let monitor = monitor_pid();
    let mut worked = 0;
    for step in &steps {
        let ok = match step.as_str() {
            "attach" => attach(monitor),
            "seize-thread" => seize_thread(monitor),
            "vm-read" => vm(monitor, false),
            "vm-write" => vm(monitor, true),
            "proc" => proc_files(monitor),
            "pidfd" => pidfd(monitor),
            other => die(&format!("unknown step {other:?}")),
        };
        worked += ok as u32;
    }
    act(&home, port);
    drop(listener);
    if worked == 0 {
        std::process::exit(70);
    }
}
