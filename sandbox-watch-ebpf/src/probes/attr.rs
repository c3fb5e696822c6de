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
//!
//! Names raced: the names such a call takes from the caller's memory (its path's, and a
//! setxattr's attribute name) are read at the exit, after the kernel copied them, so another
//! thread of the caller can have rewritten them in between. `sys_enter_attr`, one program on
//! the entry tracepoints of the same calls (the same table), keeps them per thread in
//! `ENTRY_NAMES` as renames do (`probes/files.rs`); the exit's record carries them after its
//! own ([`NAMES_AT_ENTRY`]) and the userspace compares the two.
use aya_ebpf::{EbpfContext, programs::TracePointContext};
use sandbox_watch_common::{
    AttrEvent, EventKind, NAMES_AT_ENTRY, PATH_FROM_DIR_AND_NAME, PATH_FROM_FILE, PATH_TRUNCATED,
    VIA_IO_URING,
    attr::{self, nr},
};

use super::files::{
    AT_FDCWD, PATH_MASK, dir_and_name_in, forget_entry_names, keep_entry_names, read_str,
    take_entry_names,
};
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

/// What the table says of an attribute call: its [`attr`] op, where its file is, and the
/// index of its first argument after the file; None for any other call.
#[inline(always)]
fn call_of(syscall: i32) -> Option<(u32, u32, u32)> {
    if syscall < 0 || syscall as usize >= CALLS {
        return None;
    }
    // The mask must reach the verifier: LLVM drops it as redundant after the check above, and
    // 6.1's verifier does not carry that check's bound through the copy LLVM compares
    // (`unbounded memory access` at the table). A volatile read keeps it.
    let i = unsafe { core::ptr::read_volatile(&syscall) } as usize & (CALLS - 1);
    let code = CALL[i];
    let op = code & 0xff;
    if op == 0 {
        return None;
    }
    Some((op, (code >> 8) & 0xff, (code >> 16) & 3))
}

/// The record's system call number: `__syscall_nr` at byte 8 of both `syscall_trace_enter`
/// and `syscall_trace_exit`.
#[inline(always)]
fn syscall_nr(ctx: &TracePointContext) -> i32 {
    unsafe { core::ptr::read(ctx.as_ptr().cast::<u8>().add(8).cast::<i32>()) }
}

/// Argument `i` (0-3) of `a`, without a bounds check the compiler may keep: a check whose
/// failure is a panic ends the program in a call that never returns, which the verifier
/// refuses ("last insn is not an exit or jmp").
#[inline(always)]
fn nth(a: &[u64; 4], i: u32) -> u64 {
    match i & 3 {
        0 => a[0],
        1 => a[1],
        2 => a[2],
        _ => a[3],
    }
}

/// Where the names the call takes from the caller's memory are (0: none): its path's (a
/// name-based call; utimensat's may be NULL, naming `dirfd` itself) and its extended
/// attribute's (setxattr). The entry and the exit both ask, from the same arguments.
#[inline(always)]
fn names_of(op: u32, target: u32, at: u32, a: &[u64; 4]) -> (u64, u64) {
    let path = match target {
        NAME => a[0],
        DIR_NAME => a[1],
        _ => 0,
    };
    let xattr = if op == attr::SETXATTR { nth(a, at) } else { 0 };
    (path, xattr)
}

/// The entry of every attribute call (`kernel/probe.rs` lists them): keeps the names it takes
/// from the caller's memory, for its exit to compare with what they say then.
#[aya_ebpf::macros::tracepoint]
pub fn sys_enter_attr(ctx: TracePointContext) -> u32 {
    if !is_traced(current_tgid()) {
        return 0;
    }
    let Some((op, target, at)) = call_of(syscall_nr(&ctx)) else {
        return 0;
    };
    // From the saved registers, as the exit reads them: the record itself is only as long as
    // the call's arguments (chmod has two), and a program that loads past the end of any
    // tracepoint's record it is attached to is refused there (EACCES at the attach).
    let mut a = [0u64; 4];
    unsafe { sw_syscall_args(a.as_mut_ptr()) };
    let (path, xattr) = names_of(op, target, at, &a);
    if path != 0 || xattr != 0 {
        keep_entry_names(path, xattr, attr::NAME_MAX as u32);
    }
    0
}

/// The exit of every attribute call (see the module's comment; `kernel/probe.rs` lists them).
#[aya_ebpf::macros::tracepoint]
pub fn sys_exit_attr(ctx: TracePointContext) -> u32 {
    if !is_traced(current_tgid()) {
        return 0;
    }
    let syscall = syscall_nr(&ctx);
    let Some((op, target, at)) = call_of(syscall) else {
        return 0;
    };
    let result = unsafe { ctx.read_at::<i64>(super::syscall::RET) }.unwrap_or(0) as i32;
    let mut a = [0u64; 4];
    unsafe { sw_syscall_args(a.as_mut_ptr()) };
    let (path, xattr) = names_of(op, target, at, &a);
    let value = nth(&a, at);
    let value2 = if at < 3 { nth(&a, at + 1) } else { 0 };
    // A NULL name with a dirfd (utimensat(fd, NULL, …)) is the descriptor's own file.
    let file = if target == FD || (target == DIR_NAME && a[1] == 0) {
        let file = unsafe { sw_task_fd_file(current_task(), a[0] as u32) };
        if file.is_null() {
            // No such descriptor: nothing was changed, and there is no file to name. Its
            // names at the entry (an fsetxattr's attribute name) go with it.
            if xattr != 0 {
                forget_entry_names();
            }
            return 0;
        }
        Target::File(file)
    } else if target == NAME {
        Target::Named(AT_FDCWD, a[0])
    } else {
        Target::Named(a[0] as i32 as i64, a[1])
    };
    send_attr(Change {
        op,
        syscall,
        file,
        kernel: false,
        entry_names: path != 0 || xattr != 0,
        xattr: if op == attr::SETXATTR { value } else { 0 },
        value: if op == attr::SETXATTR { 0 } else { value },
        value2: if op == attr::CHOWN { value2 } else { 0 },
        result,
    });
    0
}

/// The file an attribute change is of.
#[derive(Clone, Copy)]
enum Target {
    /// A descriptor's (walked from its `struct file`); null: a fixed file of an io_uring,
    /// which has no path here.
    File(Ptr),
    /// A name under a directory descriptor (`dir_and_name`).
    Named(i64, u64),
}

/// An attribute change to record: `kernel` when its names are the kernel's copies (an
/// io_uring request's, flagged [`VIA_IO_URING`]: `result` is not its), `entry_names` when its
/// entry kept the names it took from the caller's memory, `xattr` the attribute name's
/// address (setxattr), else 0.
struct Change {
    op: u32,
    syscall: i32,
    file: Target,
    kernel: bool,
    entry_names: bool,
    xattr: u64,
    value: u64,
    value2: u64,
    result: i32,
}

#[inline(always)]
fn send_attr(c: Change) {
    let Some(base) = scratch() else { return };
    let event = base.cast::<AttrEvent>();
    let tail = unsafe { base.add(core::mem::size_of::<AttrEvent>()) };
    let (mut dev, mut ino, mut magic) = (0, 0, 0);
    let (walked, path_kind) = match c.file {
        Target::File(file) if file.is_null() => (0, PATH_FROM_FILE),
        Target::File(file) => {
            let inode = unsafe { sw_file_inode(file) };
            dev = unsafe { sw_inode_dev(inode) };
            ino = unsafe { sw_inode_ino(inode) };
            magic = unsafe { sw_file_magic(file) };
            (unsafe { sw_file_path(file, tail) }, PATH_FROM_FILE)
        }
        Target::Named(dirfd, name) => (
            dir_and_name_in(dirfd, name, tail, c.kernel),
            PATH_FROM_DIR_AND_NAME,
        ),
    };
    let path_len = walked & !WALK_TRUNCATED & PATH_MASK;
    let mut flags = if c.kernel { VIA_IO_URING } else { 0 };
    if walked & WALK_TRUNCATED != 0 {
        flags |= PATH_TRUNCATED;
    }
    let mut name_len = 0;
    if c.xattr != 0 {
        let dst = unsafe { tail.add(path_len as usize) };
        let n = read_str(c.kernel, dst, attr::NAME_MAX as u32, c.xattr);
        if n > 0 {
            name_len = n as u32 & (attr::NAME_MAX as u32 * 2 - 1);
            if name_len as usize >= attr::NAME_MAX {
                flags |= attr::NAME_TRUNCATED;
            }
        }
    }
    let mut size = core::mem::size_of::<AttrEvent>() + path_len as usize + name_len as usize;
    if c.entry_names {
        let dst = unsafe { tail.add(path_len as usize + name_len as usize) };
        let kept = take_entry_names(dst, true);
        if kept > 0 {
            flags |= NAMES_AT_ENTRY;
            size += kept as usize;
        }
    }
    let task = current_task();
    unsafe {
        *event = AttrEvent {
            header: header(EventKind::Attr, current_tgid(), sw_task_start_ns(task)),
            op: c.op,
            syscall: c.syscall,
            flags,
            path_kind,
            path_len,
            name_len,
            result: c.result,
            dev,
            ino,
            magic,
            value: c.value,
            value2: c.value2,
        };
    }
    submit(EventKind::Attr, base, size);
}

/// An io_uring MKDIRAT request (`probes/uring.rs`): the record mkdirat makes, with the name the
/// request's prep copied into the kernel.
#[inline(always)]
pub(crate) fn send_uring_mkdir(dirfd: i64, name: u64, mode: u64) {
    send_attr(Change {
        op: attr::MKDIR,
        syscall: nr::MKDIRAT,
        file: Target::Named(dirfd, name),
        kernel: true,
        entry_names: false,
        xattr: 0,
        value: mode,
        value2: 0,
        result: 0,
    });
}

/// An io_uring SETXATTR (`path`: the kernel's copy of its name, under the cwd) or FSETXATTR
/// (`fd`; -1 for a fixed file) request: the record setxattr or fsetxattr makes, with the
/// attribute's name from the kernel's copy (`name`).
#[inline(always)]
pub(crate) fn send_uring_xattr(by_fd: bool, fd: i64, path: u64, name: u64) {
    let (file, syscall) = if by_fd {
        let file = if fd >= 0 {
            unsafe { sw_task_fd_file(current_task(), fd as u32) }
        } else {
            core::ptr::null()
        };
        (Target::File(file), nr::FSETXATTR)
    } else {
        (Target::Named(AT_FDCWD, path), nr::SETXATTR)
    };
    send_attr(Change {
        op: attr::SETXATTR,
        syscall,
        file,
        kernel: true,
        entry_names: false,
        xattr: name,
        value: 0,
        value2: 0,
        result: 0,
    });
}
