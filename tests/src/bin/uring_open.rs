//! Opens a file through io_uring (IORING_OP_OPENAT), reads it, and prints what it read: an
//! open that never passes through the open/openat syscalls.
use std::ffi::CString;

use io_uring::{IoUring, opcode, types};

fn main() {
    let path = std::env::args().nth(1).expect("usage: uring-open PATH");
    let c_path = CString::new(path.clone()).unwrap();
    let mut ring = IoUring::new(4).expect("io_uring_setup");
    let open = opcode::OpenAt::new(types::Fd(libc::AT_FDCWD), c_path.as_ptr())
        .flags(libc::O_RDONLY | libc::O_CLOEXEC)
        .build()
        .user_data(1);
    // SAFETY: the path outlives the submission (we wait for its completion below).
    unsafe { ring.submission().push(&open).expect("queue full") };
    ring.submit_and_wait(1).expect("io_uring_enter");
    let cqe = ring.completion().next().expect("a completion");
    let fd = cqe.result();
    if fd < 0 {
        eprintln!("{path}: {}", std::io::Error::from_raw_os_error(-fd));
        std::process::exit(1);
    }
    let mut buf = [0u8; 64];
    // SAFETY: fd is the descriptor io_uring opened for us.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    println!("{}", String::from_utf8_lossy(&buf[..n.max(0) as usize]));
}
