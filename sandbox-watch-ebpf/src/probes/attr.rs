//! Attribute changes: the chmod, chown, truncate, mkdir, setxattr and utime families.
//!
//! One program, `sys_exit_attr`, attached by the loader to the exit tracepoint of every one of
//! those calls: the verifier checks it once, however many calls it serves (each program of its
//! own would cost start-up time). It tells the calls apart by the record's `__syscall_nr`
//! (`struct syscall_trace_exit { struct trace_entry ent; int nr; long ret; }`: at byte 8) and
//! reads their arguments from the registers saved at the entry (`sw_syscall_args`): nothing is
//! kept from entry to exit.
//!
//! Paths: a descriptor-based call (fchmod, fchown, ftruncate, fsetxattr, utimensat with no
//! name) walks the descriptor's `struct file`; a name-based one gives the directory from the
//! kernel (dirfd or cwd) and the last part as given (`dir_and_name`).
use aya_ebpf::{
    EbpfContext,
    helpers::generated::{bpf_probe_read_kernel_str, bpf_probe_read_user_str},
    programs::TracePointContext,
};
use sandbox_watch_common::{
    AttrEvent, EventKind, PATH_FROM_DIR_AND_NAME, PATH_FROM_FILE, PATH_TRUNCATED, VIA_IO_URING,
    attr::{self, nr},
};

use super::files::{AT_FDCWD, PATH_MASK, dir_and_name, dir_and_name_in};
use crate::{current_task, current_tgid, header, is_traced, kernel::*, scratch, submit};

/// Where a call keeps its file.
const FD: u32 = 1;
/// `call(path, …)`
const NAME: u32 = 2;
/// `call(dirfd, path, …)`; a NULL path (utimensat) names `dirfd` itself.
const DIR_NAME: u32 = 3;

/// Bounds the system call numbers the table covers (the largest is setxattrat's, 463).
const CALLS: usize = 512;

/// For each system call number: 0 (not an attribute call), or what it changes (an `attr`
/// constant), where its file is (`<< 8`), and the index of its first argument after the file
/// (`<< 16`: `value`; for setxattr, the attribute's name).
///
/// A table, not a `match`: read at an index the verifier does not know, the code is a number
/// it does not know either, so it checks the body once for all the calls, not once per call
/// (which cost as much start-up time as a program per call).
static CALL: [u32; CALLS] = {
    let mut t = [0u32; CALLS];
    let calls: [(i32, u32, u32, u32); 20] = [
        (nr::CHMOD, attr::CHMOD, NAME, 1),
        (nr::FCHMOD, attr::CHMOD, FD, 1),
        (nr::FCHMODAT, attr::CHMOD, DIR_NAME, 2),
        (nr::FCHMODAT2, attr::CHMOD, DIR_NAME, 2),
        (nr::CHOWN, attr::CHOWN, NAME, 1),
        (nr::LCHOWN, attr::CHOWN, NAME, 1),
        (nr::FCHOWN, attr::CHOWN, FD, 1),
        (nr::FCHOWNAT, attr::CHOWN, DIR_NAME, 2),
        (nr::TRUNCATE, attr::TRUNCATE, NAME, 1),
        (nr::FTRUNCATE, attr::TRUNCATE, FD, 1),
        (nr::MKDIR, attr::MKDIR, NAME, 1),
        (nr::MKDIRAT, attr::MKDIR, DIR_NAME, 2),
        (nr::SETXATTR, attr::SETXATTR, NAME, 1),
        (nr::LSETXATTR, attr::SETXATTR, NAME, 1),
        (nr::FSETXATTR, attr::SETXATTR, FD, 1),
        // setxattrat(dfd, path, at_flags, name, uargs, usize)
        (nr::SETXATTRAT, attr::SETXATTR, DIR_NAME, 3),
        (nr::UTIME, attr::UTIME, NAME, 1),
        (nr::UTIMES, attr::UTIME, NAME, 1),
        (nr::FUTIMESAT, attr::UTIME, DIR_NAME, 2),
        (nr::UTIMENSAT, attr::UTIME, DIR_NAME, 2),
    ];
    let mut i = 0;
    while i < calls.len() {
        let (n, op, target, at) = calls[i];
        t[n as usize] = op | target << 8 | at << 16;
        i += 1;
    }
    t
};

/// The exit of every attribute call (see the module's comment; `kernel/probe.rs` lists them).
#[aya_ebpf::macros::tracepoint]
pub fn sys_exit_attr(ctx: TracePointContext) -> u32 {
    if !is_traced(current_tgid()) {
        return 0;
    }
    let syscall = unsafe { core::ptr::read(ctx.as_ptr().cast::<u8>().add(8).cast::<i32>()) };
    if syscall < 0 || syscall as usize >= CALLS {
        return 0;
    }
    let code = CALL[syscall as usize & (CALLS - 1)];
    let (op, target, at) = (code & 0xff, (code >> 8) & 0xff, (code >> 16) & 3);
    if op == 0 {
        return 0;
    }
    let result = unsafe { ctx.read_at::<i64>(super::syscall::RET) }.unwrap_or(0) as i32;
    let mut a = [0u64; 4];
    unsafe { sw_syscall_args(a.as_mut_ptr()) };
    let value = a[at as usize];
    let value2 = if at < 3 { a[at as usize + 1] } else { 0 };
    let task = current_task();
    // A NULL name with a dirfd (utimensat(fd, NULL, …)) is the descriptor's own file.
    let fd = if target == FD || (target == DIR_NAME && a[1] == 0) {
        Some(a[0] as u32)
    } else {
        None
    };
    let Some(base) = scratch() else { return 0 };
    let event = base.cast::<AttrEvent>();
    let tail = unsafe { base.add(core::mem::size_of::<AttrEvent>()) };
    let (mut dev, mut ino, mut magic) = (0, 0, 0);
    let (walked, path_kind) = match fd {
        Some(fd) => {
            let file = unsafe { sw_task_fd_file(task, fd) };
            if file.is_null() {
                // No such descriptor: nothing was changed, and there is no file to name.
                return 0;
            }
            let inode = unsafe { sw_file_inode(file) };
            dev = unsafe { sw_inode_dev(inode) };
            ino = unsafe { sw_inode_ino(inode) };
            magic = unsafe { sw_file_magic(file) };
            (unsafe { sw_file_path(file, tail) }, PATH_FROM_FILE)
        }
        None => {
            let (dirfd, name) = if target == NAME {
                (AT_FDCWD, a[0])
            } else {
                (a[0] as i32 as i64, a[1])
            };
            (dir_and_name(dirfd, name, tail), PATH_FROM_DIR_AND_NAME)
        }
    };
    let path_len = walked & !WALK_TRUNCATED & PATH_MASK;
    let mut flags = if walked & WALK_TRUNCATED != 0 {
        PATH_TRUNCATED
    } else {
        0
    };
    let mut name_len = 0;
    if op == attr::SETXATTR {
        let dst = unsafe { tail.add(path_len as usize) };
        let n = unsafe {
            bpf_probe_read_user_str(dst.cast(), attr::NAME_MAX as u32, value as *const _)
        };
        if n > 0 {
            name_len = n as u32 & (attr::NAME_MAX as u32 * 2 - 1);
            if name_len as usize >= attr::NAME_MAX {
                flags |= attr::NAME_TRUNCATED;
            }
        }
    }
    unsafe {
        *event = AttrEvent {
            header: header(EventKind::Attr, current_tgid(), sw_task_start_ns(task)),
            op,
            syscall,
            flags,
            path_kind,
            path_len,
            name_len,
            result,
            dev,
            ino,
            magic,
            value: if op == attr::SETXATTR { 0 } else { value },
            value2: if op == attr::CHOWN { value2 } else { 0 },
        };
    }
    let size = core::mem::size_of::<AttrEvent>() + path_len as usize + name_len as usize;
    submit(EventKind::Attr, base, size);
    0
}

/// An io_uring MKDIRAT request (`probes/uring.rs`): the record mkdirat makes, with the name the
/// request's prep copied into the kernel, flagged [`VIA_IO_URING`] (its result is not read).
#[inline(always)]
pub(crate) fn send_uring_mkdir(dirfd: i64, name: u64, mode: u64) {
    let Some(base) = scratch() else { return };
    let event = base.cast::<AttrEvent>();
    let tail = unsafe { base.add(core::mem::size_of::<AttrEvent>()) };
    let walked = dir_and_name_in(dirfd, name, tail, true);
    let path_len = walked & !WALK_TRUNCATED & PATH_MASK;
    let truncated = if walked & WALK_TRUNCATED != 0 {
        PATH_TRUNCATED
    } else {
        0
    };
    unsafe {
        *event = AttrEvent {
            header: header(
                EventKind::Attr,
                current_tgid(),
                sw_task_start_ns(current_task()),
            ),
            op: attr::MKDIR,
            syscall: nr::MKDIRAT,
            flags: truncated | VIA_IO_URING,
            path_kind: PATH_FROM_DIR_AND_NAME,
            path_len,
            value: mode,
            ..Default::default()
        };
    }
    submit(
        EventKind::Attr,
        base,
        core::mem::size_of::<AttrEvent>() + path_len as usize,
    );
}

/// An io_uring SETXATTR (`path`: the kernel's copy of its name, under the cwd) or FSETXATTR
/// (`fd`; -1 for a fixed file, which has no path here) request: the record setxattr or
/// fsetxattr makes, with the attribute's name from the kernel's copy (`name`), flagged
/// [`VIA_IO_URING`].
#[inline(always)]
pub(crate) fn send_uring_xattr(by_fd: bool, fd: i64, path: u64, name: u64) {
    let Some(base) = scratch() else { return };
    let event = base.cast::<AttrEvent>();
    let tail = unsafe { base.add(core::mem::size_of::<AttrEvent>()) };
    let task = current_task();
    let (mut dev, mut ino, mut magic) = (0, 0, 0);
    let (walked, path_kind, syscall) = if by_fd {
        let file = if fd >= 0 {
            unsafe { sw_task_fd_file(task, fd as u32) }
        } else {
            core::ptr::null()
        };
        if file.is_null() {
            (0, PATH_FROM_FILE, nr::FSETXATTR)
        } else {
            let inode = unsafe { sw_file_inode(file) };
            dev = unsafe { sw_inode_dev(inode) };
            ino = unsafe { sw_inode_ino(inode) };
            magic = unsafe { sw_file_magic(file) };
            (
                unsafe { sw_file_path(file, tail) },
                PATH_FROM_FILE,
                nr::FSETXATTR,
            )
        }
    } else {
        (
            dir_and_name_in(AT_FDCWD, path, tail, true),
            PATH_FROM_DIR_AND_NAME,
            nr::SETXATTR,
        )
    };
    let path_len = walked & !WALK_TRUNCATED & PATH_MASK;
    let mut flags = VIA_IO_URING;
    if walked & WALK_TRUNCATED != 0 {
        flags |= PATH_TRUNCATED;
    }
    let mut name_len = 0;
    if name != 0 {
        let dst = unsafe { tail.add(path_len as usize) };
        let n = unsafe {
            bpf_probe_read_kernel_str(dst.cast(), attr::NAME_MAX as u32, name as *const _)
        };
        if n > 0 {
            name_len = n as u32 & (attr::NAME_MAX as u32 * 2 - 1);
        }
    }
    unsafe {
        *event = AttrEvent {
            header: header(EventKind::Attr, current_tgid(), sw_task_start_ns(task)),
            op: attr::SETXATTR,
            syscall,
            flags,
            path_kind,
            path_len,
            name_len,
            dev,
            ino,
            magic,
            ..Default::default()
        };
    }
    let size = core::mem::size_of::<AttrEvent>() + path_len as usize + name_len as usize;
    submit(EventKind::Attr, base, size);
}
