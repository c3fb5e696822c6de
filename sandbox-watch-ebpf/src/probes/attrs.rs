//! Changes of a file's attributes: chmod, chown, truncate, utimes and xattrs (set, remove),
//! each family in its path, `*at` and descriptor forms.
//!
//! Syscall tracepoints, one enter and one exit program attached to all of them (they tell them
//! apart by the record's syscall number). The path forms keep their name at entry (`names.rs`) and are sent at
//! the exit with the directory walked from the kernel; the descriptor forms (fchmod, fchown,
//! ftruncate, fsetxattr, fremovexattr, utimensat with no name) walk the `struct file` and give
//! its inode (and so its identity). Where fentry runs, `security_path_{chmod,chown,truncate}`
//! leave the kernel's path and the inode for the path forms too. The other arguments (mode,
//! owner, length, the xattr's name, times) are read at the exit from the saved registers.
use aya_ebpf::{
    helpers::generated::{bpf_probe_read_kernel, bpf_probe_read_user, bpf_probe_read_user_str},
    macros::tracepoint,
    programs::TracePointContext,
};
use sandbox_watch_common::{
    ATTR_BY_FD, ATTR_CHMOD, ATTR_CHOWN, ATTR_REMOVEXATTR, ATTR_SETXATTR, ATTR_TIMES_GIVEN,
    ATTR_TRUNCATE, ATTR_UTIMES, AttrEvent, EventKind, NAME_RACED, PATH_FROM_DIR_AND_NAME,
    PATH_FROM_FILE, PATH_FROM_KERNEL, PATH_MAX, PATH_TRUNCATED, RACED_NAME_MAX, XATTR_NAME_MAX,
};

use super::inodes::identity_of;
use super::kpaths::{self, PRESENT};
use super::names::{self, forget, races, taken};
use super::paths::{AT_FDCWD, PATH_MASK, dir_and_name, syscall_nr};
use super::syscall::{RET, arg};
use crate::{current_task, current_tgid, header, is_traced, kernel::*, opaque, scratch, submit};

/// The forms, by where their arguments are.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    /// chmod(path, mode)
    Chmod,
    /// fchmod(fd, mode)
    Fchmod,
    /// fchmodat(dfd, path, mode)
    Fchmodat,
    /// fchmodat2(dfd, path, mode, flags)
    Fchmodat2,
    /// chown(path, uid, gid), lchown
    Chown,
    /// fchown(fd, uid, gid)
    Fchown,
    /// fchownat(dfd, path, uid, gid, flags)
    Fchownat,
    /// truncate(path, length)
    Truncate,
    /// ftruncate(fd, length)
    Ftruncate,
    /// setxattr(path, name, value, size, flags), lsetxattr
    Setxattr,
    /// fsetxattr(fd, name, value, size, flags)
    Fsetxattr,
    /// removexattr(path, name), lremovexattr
    Removexattr,
    /// fremovexattr(fd, name)
    Fremovexattr,
    /// setxattrat(dfd, path, at_flags, name, uargs, usize)
    Setxattrat,
    /// removexattrat(dfd, path, at_flags, name)
    Removexattrat,
    /// utimensat(dfd, path or NULL, times, flags)
    Utimensat,
    /// utimes(path, struct timeval times[2])
    Utimes,
    /// utime(path, struct utimbuf *times)
    Utime,
    /// futimesat(dfd, path, struct timeval times[2])
    Futimesat,
}

impl Form {
    fn op(self) -> u32 {
        match self {
            Form::Chmod | Form::Fchmod | Form::Fchmodat | Form::Fchmodat2 => ATTR_CHMOD,
            Form::Chown | Form::Fchown | Form::Fchownat => ATTR_CHOWN,
            Form::Truncate | Form::Ftruncate => ATTR_TRUNCATE,
            Form::Setxattr | Form::Fsetxattr | Form::Setxattrat => ATTR_SETXATTR,
            Form::Removexattr | Form::Fremovexattr | Form::Removexattrat => ATTR_REMOVEXATTR,
            Form::Utimensat | Form::Utimes | Form::Utime | Form::Futimesat => ATTR_UTIMES,
        }
    }

    fn by_fd(self) -> bool {
        matches!(
            self,
            Form::Fchmod | Form::Fchown | Form::Ftruncate | Form::Fsetxattr | Form::Fremovexattr
        )
    }
}

/// What an exit reads from the saved registers: mode, uid, gid, size, xattr name pointer,
/// the syscall's flags, and the fd of a descriptor form (-1: none).
struct Args {
    mode: u32,
    uid: u32,
    gid: u32,
    size: u64,
    xattr: u64,
    at_flags: u32,
    times: u64,
    fd: i64,
}

#[inline(always)]
fn args(form: Form) -> Args {
    let mut a = [0u64; 5];
    unsafe { sw_syscall_args5(a.as_mut_ptr()) };
    let mut out = Args {
        mode: 0,
        uid: u32::MAX,
        gid: u32::MAX,
        size: 0,
        xattr: 0,
        at_flags: 0,
        times: 0,
        fd: -1,
    };
    match form {
        Form::Chmod => out.mode = a[1] as u32,
        Form::Fchmod => {
            out.fd = a[0] as i32 as i64;
            out.mode = a[1] as u32;
        }
        Form::Fchmodat => out.mode = a[2] as u32,
        Form::Fchmodat2 => {
            out.mode = a[2] as u32;
            out.at_flags = a[3] as u32;
        }
        Form::Chown => {
            out.uid = a[1] as u32;
            out.gid = a[2] as u32;
        }
        Form::Fchown => {
            out.fd = a[0] as i32 as i64;
            out.uid = a[1] as u32;
            out.gid = a[2] as u32;
        }
        Form::Fchownat => {
            out.uid = a[2] as u32;
            out.gid = a[3] as u32;
            out.at_flags = a[4] as u32;
        }
        Form::Truncate => out.size = a[1],
        Form::Ftruncate => {
            out.fd = a[0] as i32 as i64;
            out.size = a[1];
        }
        Form::Setxattr => {
            out.xattr = a[1];
            out.size = a[3];
            out.at_flags = a[4] as u32;
        }
        Form::Fsetxattr => {
            out.fd = a[0] as i32 as i64;
            out.xattr = a[1];
            out.size = a[3];
            out.at_flags = a[4] as u32;
        }
        Form::Removexattr => out.xattr = a[1],
        Form::Fremovexattr => {
            out.fd = a[0] as i32 as i64;
            out.xattr = a[1];
        }
        Form::Setxattrat | Form::Removexattrat => {
            out.at_flags = a[2] as u32;
            out.xattr = a[3];
        }
        Form::Utimensat => {
            // No name: the descriptor itself (futimens).
            if a[1] == 0 {
                out.fd = a[0] as i32 as i64;
            }
            out.times = a[2];
            out.at_flags = a[3] as u32;
        }
        Form::Utimes | Form::Utime => out.times = a[1],
        Form::Futimesat => out.times = a[2],
    }
    out
}

/// The new mtime (seconds) from the caller's times, where it gave any.
#[inline(always)]
fn mtime(form: Form, times: u64) -> u64 {
    if times == 0 {
        return 0;
    }
    // utimensat: struct __kernel_timespec[2]; utimes, futimesat: struct timeval[2] (both 16
    // bytes each on 64-bit); utime: struct utimbuf { actime; modtime; }.
    let at = if form == Form::Utime { 8 } else { 16 };
    let mut sec: u64 = 0;
    unsafe { bpf_probe_read_user((&raw mut sec).cast(), 8, (times + at) as *const _) };
    sec
}

#[inline(always)]
fn exit_attr(ctx: &TracePointContext, form: Form) -> u32 {
    let tgid = current_tgid();
    let entry = if form.by_fd() {
        if !is_traced(tgid) {
            return 0;
        }
        None
    } else {
        match taken() {
            Some(e) => Some(e),
            None => return 0,
        }
    };
    let result = unsafe { ctx.read_at::<i64>(RET) }.unwrap_or(0) as i32;
    let a = args(form);
    let Some(base) = scratch() else { return 0 };
    let event = base.cast::<AttrEvent>();
    let e = unsafe { &mut *event };
    let tail = unsafe { base.add(core::mem::size_of::<AttrEvent>()) };
    *e = AttrEvent {
        header: header(EventKind::Attr, tgid, unsafe {
            sw_task_start_ns(current_task())
        }),
        op: form.op(),
        result,
        mode: a.mode,
        uid: a.uid,
        gid: a.gid,
        size: a.size,
        at_flags: a.at_flags,
        ..Default::default()
    };
    if e.op == ATTR_UTIMES {
        e.size = mtime(form, a.times);
        if a.times != 0 {
            e.flags |= ATTR_TIMES_GIVEN;
        }
    }
    // From here on one state for every form (see `opaque`): what differs is in the record.
    let fd = opaque(a.fd as u64) as i64;
    let xattr = opaque(a.xattr);
    let walked;
    if fd >= 0 {
        e.flags |= ATTR_BY_FD;
        e.path_kind = PATH_FROM_FILE;
        let file = unsafe { sw_task_fd_file(current_task(), fd as u32) };
        walked = if file.is_null() {
            0
        } else {
            let inode = unsafe { sw_file_inode(file) };
            e.dev = unsafe { sw_inode_dev(inode) };
            e.ino = unsafe { sw_inode_ino(inode) };
            e.generation = unsafe { sw_inode_generation(inode) };
            e.identity = identity_of(e.dev, e.generation, e.ino);
            e.magic = unsafe { sw_file_magic(file) };
            unsafe { sw_file_path(file, tail) }
        };
        e.path_len = walked & !WALK_TRUNCATED & (2 * PATH_MAX as u32 - 1);
    } else if let Some(k) = kpaths::take(kpaths::TAG_ATTR) {
        e.flags |= PATH_FROM_KERNEL;
        e.path_kind = PATH_FROM_FILE;
        e.identity = k.identity;
        e.dev = k.dev;
        e.ino = k.ino;
        e.generation = k.generation;
        walked = k.len_a & !PRESENT;
        let n = walked & !WALK_TRUNCATED & 0x1fff;
        unsafe { bpf_probe_read_kernel(tail.cast(), n, k.a.as_ptr().cast()) };
        e.path_len = n;
    } else if let Some(en) = entry {
        e.path_kind = PATH_FROM_DIR_AND_NAME;
        walked = dir_and_name(en.dirfd, en.name, tail);
        e.path_len = walked & !WALK_TRUNCATED & PATH_MASK;
    } else {
        walked = 0;
    }
    if walked & WALK_TRUNCATED != 0 {
        e.flags |= PATH_TRUNCATED;
    }
    let mut at = (unsafe { core::ptr::read_volatile(&e.path_len) } & PATH_MASK) as usize;
    if xattr != 0 {
        let n = unsafe {
            bpf_probe_read_user_str(
                tail.add(at).cast(),
                XATTR_NAME_MAX as u32,
                xattr as *const _,
            )
        };
        e.xattr_len = if n > 0 { n as u32 & 0x1ff } else { 0 };
        at += e.xattr_len as usize;
    }
    if let Some(en) = entry {
        e.flags |= races(en);
        if e.flags & NAME_RACED != 0 {
            unsafe {
                bpf_probe_read_kernel(
                    tail.add(at).cast(),
                    RACED_NAME_MAX as u32,
                    en.a.as_ptr().cast(),
                )
            };
            e.raced_len = RACED_NAME_MAX as u32;
        }
        forget();
    }
    let size = core::mem::size_of::<AttrEvent>()
        + at
        + (unsafe { core::ptr::read_volatile(&e.raced_len) } & 0x1ff) as usize;
    submit(EventKind::Attr, base, size);
    0
}

#[inline(always)]
fn dfd(ctx: &TracePointContext, n: usize) -> i64 {
    arg(ctx, n) as i32 as i64
}

/// The form of an attribute syscall by its number (x86_64).
#[inline(always)]
fn form_of(nr: i32) -> Option<Form> {
    Some(match nr {
        90 => Form::Chmod,
        91 => Form::Fchmod,
        268 => Form::Fchmodat,
        452 => Form::Fchmodat2,
        92 | 94 => Form::Chown,
        93 => Form::Fchown,
        260 => Form::Fchownat,
        76 => Form::Truncate,
        77 => Form::Ftruncate,
        188 | 189 => Form::Setxattr,
        190 => Form::Fsetxattr,
        197 | 198 => Form::Removexattr,
        199 => Form::Fremovexattr,
        463 => Form::Setxattrat,
        466 => Form::Removexattrat,
        280 => Form::Utimensat,
        235 => Form::Utimes,
        132 => Form::Utime,
        261 => Form::Futimesat,
        _ => return None,
    })
}

/// Attached to the enter tracepoints of the path and `*at` forms (one program, verified
/// once): keeps the name.
#[tracepoint]
pub fn sys_enter_attr(ctx: TracePointContext) -> u32 {
    let Some(form) = form_of(syscall_nr(&ctx)) else {
        return 0;
    };
    match form {
        Form::Chmod
        | Form::Chown
        | Form::Truncate
        | Form::Setxattr
        | Form::Removexattr
        | Form::Utimes
        | Form::Utime => names::remember(AT_FDCWD, arg(&ctx, 0), 0, 0),
        Form::Fchmodat
        | Form::Fchmodat2
        | Form::Fchownat
        | Form::Setxattrat
        | Form::Removexattrat
        | Form::Utimensat
        | Form::Futimesat => names::remember(dfd(&ctx, 0), arg(&ctx, 1), 0, 0),
        _ => {}
    }
    0
}

/// Attached to the exit tracepoints of every form: sends the record.
#[tracepoint]
pub fn sys_exit_attr(ctx: TracePointContext) -> u32 {
    match form_of(syscall_nr(&ctx)) {
        Some(form) => exit_attr(&ctx, form),
        None => 0,
    }
}
