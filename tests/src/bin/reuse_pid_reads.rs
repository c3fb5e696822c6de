//! Issue 15: two processes with one pid read the same files.
//!
//! `reuse_pid_reads DIR FIRST SECOND`: a child reads every file of DIR FIRST times, and exits;
//! once it is reaped, a second child is made with the same pid (clone3 with `set_tid`, which
//! root may ask for) and reads every file of DIR SECOND times. Prints `pid P` and exits 0 when
//! both children did.
use std::path::{Path, PathBuf};

/// Reads each file `times` times, then ends the child without unwinding into the parent's code.
fn reader(files: &[PathBuf], times: usize) -> ! {
    for _ in 0..times {
        for f in files {
            std::fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        }
    }
    // SAFETY: ends this (single-threaded) child.
    unsafe { libc::_exit(0) }
}

/// clone3(2) as fork, with the pid `pid` when given: the child's pid (0 in the child).
fn clone3(pid: Option<libc::pid_t>) -> libc::pid_t {
    let set_tid = [pid.unwrap_or(0)];
    // struct clone_args: flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size,
    // tls, set_tid, set_tid_size, cgroup.
    let mut args = [0u64; 11];
    args[4] = libc::SIGCHLD as u64;
    if pid.is_some() {
        args[8] = set_tid.as_ptr() as u64;
        args[9] = 1;
    }
    // SAFETY: a clone_args of the size given, and set_tid alive across the call.
    let r = unsafe { libc::syscall(libc::SYS_clone3, args.as_ptr(), size_of_val(&args)) };
    assert!(r >= 0, "clone3: {}", std::io::Error::last_os_error());
    r as libc::pid_t
}

fn reap(pid: libc::pid_t) {
    let mut status = 0;
    // SAFETY: waits for our own child.
    let r = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(
        r == pid && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child {pid}: status {status:#x}"
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    assert!(args.len() == 4, "usage: reuse_pid_reads DIR FIRST SECOND");
    let mut files: Vec<PathBuf> = std::fs::read_dir(Path::new(&args[1]))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let (first_times, second_times): (usize, usize) =
        (args[2].parse().unwrap(), args[3].parse().unwrap());
    let first = clone3(None);
    if first == 0 {
        reader(&files, first_times);
    }
    reap(first);
    let second = clone3(Some(first));
    if second == 0 {
        reader(&files, second_times);
    }
    assert_eq!(second, first);
    reap(second);
    println!("pid {first}");
}
