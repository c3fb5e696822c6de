//! Opens a file through io_uring (IORING_OP_OPENAT), reads it, and prints what it read: an
//! open that never passes through the open/openat syscalls.
//!
//! `uring-open PATH`: two opens of PATH, one as the ring runs it at once (in the submitter)
//! and one forced to io_uring's worker thread (IOSQE_ASYNC), each read and printed.
//! `uring-open --fixed PATH`: one open into fixed-file slot 0 (no descriptor), and one into a
//! slot the ring picks, each read through its slot.
//! `uring-open --unreaped PATH`: one open in the worker thread on a DEFER_TASKRUN ring whose
//! completion is never waited for; the file is read through the descriptor the worker put it
//! at (the lowest free one), found without the completion.
use std::ffi::CString;

use io_uring::{IoUring, opcode, squeue, types};

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mode = match args.first().map(String::as_str) {
        Some(m @ ("--fixed" | "--unreaped")) => m.to_string(),
        _ => String::new(),
    };
    if !mode.is_empty() {
        args.remove(0);
    }
    let fixed = mode == "--fixed";
    let path = args
        .first()
        .expect("usage: uring-open [--fixed] PATH")
        .clone();
    let c_path = CString::new(path.clone()).unwrap();
    if mode == "--unreaped" {
        unreaped(&path, &c_path);
        return;
    }
    let mut ring = IoUring::new(4).expect("io_uring_setup");
    if fixed {
        ring.submitter()
            .register_files_sparse(2)
            .expect("register_files_sparse");
        let first = types::DestinationSlot::try_from_slot_target(0).unwrap();
        for slot in [first, types::DestinationSlot::auto_target()] {
            let open = opcode::OpenAt::new(types::Fd(libc::AT_FDCWD), c_path.as_ptr())
                .flags(libc::O_RDONLY)
                .file_index(Some(slot))
                .build();
            // Slot 0 asked for: 0; a slot the ring picked: its index.
            let result = run(&mut ring, open);
            if result < 0 {
                fail(&path, result);
            }
            let mut buf = [0u8; 64];
            let fixed = types::Fixed(result as u32);
            let read = opcode::Read::new(fixed, buf.as_mut_ptr(), buf.len() as u32).build();
            let n = run(&mut ring, read);
            if n < 0 {
                fail(&path, n);
            }
            println!("{}", String::from_utf8_lossy(&buf[..n as usize]));
        }
        return;
    }
    for flags in [squeue::Flags::empty(), squeue::Flags::ASYNC] {
        let open = opcode::OpenAt::new(types::Fd(libc::AT_FDCWD), c_path.as_ptr())
            .flags(libc::O_RDONLY | libc::O_CLOEXEC)
            .build()
            .flags(flags);
        let fd = run(&mut ring, open);
        if fd < 0 {
            fail(&path, fd);
        }
        let mut buf = [0u8; 64];
        // SAFETY: fd is the descriptor io_uring opened for us.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        println!("{}", String::from_utf8_lossy(&buf[..n.max(0) as usize]));
        // SAFETY: closing our own descriptor.
        unsafe { libc::close(fd) };
    }
}

fn unreaped(path: &str, c_path: &CString) {
    let mut ring: IoUring = IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .build(4)
        .expect("io_uring_setup with DEFER_TASKRUN");
    // The descriptor the worker will take: the lowest free one.
    // SAFETY: dup of stdin, closed at once; only its number is kept.
    let next = unsafe { libc::dup(0) };
    unsafe { libc::close(next) };
    let open = opcode::OpenAt::new(types::Fd(libc::AT_FDCWD), c_path.as_ptr())
        .flags(libc::O_RDONLY)
        .build()
        .flags(squeue::Flags::ASYNC);
    // SAFETY: the path outlives the request (this function waits below, and so does main).
    unsafe { ring.submission().push(&open).expect("queue full") };
    ring.submit().expect("io_uring_enter");
    let mut buf = [0u8; 64];
    for _ in 0..200 {
        std::thread::sleep(std::time::Duration::from_millis(5));
        // SAFETY: reading into our buffer from a descriptor that may not exist yet.
        let n = unsafe { libc::read(next, buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            println!("{}", String::from_utf8_lossy(&buf[..n as usize]));
            return;
        }
    }
    fail(path, -libc::EBADF);
}

/// Submits one request and waits for its result.
fn run(ring: &mut IoUring, entry: squeue::Entry) -> i32 {
    // SAFETY: what the request points to (the path, the buffer) outlives it: we wait for its
    // completion here.
    unsafe { ring.submission().push(&entry).expect("queue full") };
    ring.submit_and_wait(1).expect("io_uring_enter");
    ring.completion().next().expect("a completion").result()
}

fn fail(path: &str, result: i32) -> ! {
    eprintln!("{path}: {}", std::io::Error::from_raw_os_error(-result));
    std::process::exit(1);
}
