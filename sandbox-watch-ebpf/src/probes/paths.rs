//! Operations on names: delete (unlink, rmdir), rename, links, mkdir and mknod.
//!
//! Syscall tracepoints, enter and exit, one program each attached to all of them (it tells
//! them apart by the record's syscall number). The enter keeps the arguments and copies of
//! the names (`names.rs`); the exit sends the record: the directory walked from the kernel (dirfd or
//! cwd), the last part as given, both names checked against their entry copies. Where fentry
//! runs, the `security_path_*` hooks (`kpaths.rs`) have left the kernel's own paths and the
//! inodes' identity, and those are sent instead of the caller's names.
use aya_ebpf::{
    helpers::generated::{bpf_probe_read_kernel, bpf_probe_read_user, bpf_probe_read_user_str},
    macros::tracepoint,
    programs::TracePointContext,
};
use sandbox_watch_common::{
    EventKind, FileEvent, LINK_SYMBOLIC, NAME_RACED, NEW_NAME_RACED, NEW_PATH_TRUNCATED,
    PATH_AS_GIVEN, PATH_FROM_DIR_AND_NAME, PATH_FROM_FILE, PATH_FROM_KERNEL, PATH_MAX,
    PATH_TRUNCATED, RACED_NAME_MAX,
};

use super::kpaths::{self, PRESENT};
use super::names::{self, Entry, forget, races, taken};
use super::syscall::{RET, arg};
use crate::{current_task, current_tgid, header_of, kernel::*, opaque, scratch, submit_of};

pub const AT_FDCWD: i64 = -100;
/// Bytes kept of a name given to a path syscall.
pub const NAME_MAX: usize = 1024;
/// Bounds a path's length in a record's tail for the verifier (a walk plus a name fit in it).
pub const PATH_MASK: u32 = 0x3fff;

/// Writes the directory a `*at` name is relative to (walked from the kernel's own objects;
/// nothing for an absolute name), a NUL, then the name as the caller gave it.
#[inline(always)]
pub fn dir_and_name(dirfd: i64, name: u64, dst: *mut u8) -> u32 {
    let mut first: u8 = 0;
    unsafe { bpf_probe_read_user((&raw mut first).cast(), 1, name as *const _) };
    let task = current_task();
    let mut walked = 0;
    if first != b'/' {
        if dirfd == AT_FDCWD {
            walked = unsafe { sw_task_cwd(task, dst) };
        } else {
            let file = unsafe { sw_task_fd_file(task, dirfd as u32) };
            if !file.is_null() {
                walked = unsafe { sw_file_path(file, dst) };
            }
        }
    }
    let dir_len = walked & !WALK_TRUNCATED & (2 * PATH_MAX as u32 - 1);
    unsafe { *dst.add(dir_len as usize) = 0 };
    let name_dst = unsafe { dst.add(dir_len as usize + 1) };
    let n = unsafe { bpf_probe_read_user_str(name_dst.cast(), NAME_MAX as u32, name as *const _) };
    let name_len = if n > 0 { n as u32 } else { 0 };
    let mut out = dir_len + 1 + name_len;
    if walked & WALK_TRUNCATED != 0 || name_len as usize >= NAME_MAX {
        out |= WALK_TRUNCATED;
    }
    out
}

/// A name read as given (a symbolic link's target), NUL-ended.
#[inline(always)]
pub fn as_given(name: u64, dst: *mut u8) -> u32 {
    let n = unsafe { bpf_probe_read_user_str(dst.cast(), NAME_MAX as u32, name as *const _) };
    let len = if n > 0 { n as u32 } else { 0 };
    if len as usize >= NAME_MAX {
        len | WALK_TRUNCATED
    } else {
        len
    }
}

/// Copies one of a `KPath`'s slots into the tail; its length.
#[inline(always)]
fn copy_slot(len: u32, src: *const u8, dst: *mut u8) -> u32 {
    let n = len & !(WALK_TRUNCATED | PRESENT) & 0x1fff;
    unsafe { bpf_probe_read_kernel(dst.cast(), n, src.cast()) };
    n
}

#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Shape {
    /// One name (unlink, rmdir, mkdir, mknod).
    One,
    /// Two names (rename, hard link).
    Two,
    /// A symbolic link: its target as given, then its name.
    Symlink,
}

/// Sends the record of a path operation at its exit.
///
/// The paths are written first and their lengths kept in the record (map memory, not
/// registers), the names' race check comes after: the verifier then checks the walks once,
/// not once per combination of race flags (6.1's budget of a million instructions).
#[inline(always)]
fn send(kind: u32, tag: u32, shape: u8, open_flags: u32, result: i32, e: &Entry) {
    let (symlink, one) = (shape == Shape::Symlink as u8, shape == Shape::One as u8);
    let Some(base) = scratch() else { return };
    let event = base.cast::<FileEvent>();
    let ev = unsafe { &mut *event };
    let tail = unsafe { base.add(core::mem::size_of::<FileEvent>()) };
    let tgid = current_tgid();
    *ev = FileEvent {
        header: header_of(kind, tgid, unsafe { sw_task_start_ns(current_task()) }),
        open_flags,
        result,
        ..Default::default()
    };
    if let Some(k) = kpaths::take(tag) {
        ev.flags = PATH_FROM_KERNEL;
        ev.identity = k.identity | k.identity_b;
        ev.dev = k.dev;
        ev.ino = k.ino;
        ev.generation = k.generation;
        let first = copy_slot(k.len_a, k.a.as_ptr(), tail);
        ev.path_len = first;
        ev.new_path_len = copy_slot(k.len_b, k.b.as_ptr(), unsafe { tail.add(first as usize) });
        ev.path_kind = if symlink {
            PATH_AS_GIVEN
        } else {
            PATH_FROM_FILE
        };
        ev.new_path_kind = PATH_FROM_FILE;
        if k.len_a & WALK_TRUNCATED != 0 {
            ev.flags |= PATH_TRUNCATED;
        }
        if k.len_b & WALK_TRUNCATED != 0 {
            ev.flags |= NEW_PATH_TRUNCATED;
        }
    } else {
        let first = if symlink {
            ev.path_kind = PATH_AS_GIVEN;
            as_given(e.name, tail)
        } else {
            ev.path_kind = PATH_FROM_DIR_AND_NAME;
            dir_and_name(e.dirfd, e.name, tail)
        };
        if first & WALK_TRUNCATED != 0 {
            ev.flags |= PATH_TRUNCATED;
        }
        let first = first & !WALK_TRUNCATED & PATH_MASK;
        ev.path_len = first;
        if !one {
            let second =
                dir_and_name(e.new_dirfd, e.new_name, unsafe { tail.add(first as usize) });
            if second & WALK_TRUNCATED != 0 {
                ev.flags |= NEW_PATH_TRUNCATED;
            }
            ev.new_path_len = second & !WALK_TRUNCATED & PATH_MASK;
            ev.new_path_kind = PATH_FROM_DIR_AND_NAME;
        }
    }
    // Read back from the record: lengths the verifier no longer follows exactly.
    let first = unsafe { core::ptr::read_volatile(&ev.path_len) } & PATH_MASK;
    let second = unsafe { core::ptr::read_volatile(&ev.new_path_len) } & PATH_MASK;
    let raced = races(e);
    ev.flags |= raced;
    if raced & (NAME_RACED | NEW_NAME_RACED) != 0 {
        let at = unsafe { tail.add(first as usize + second as usize) };
        unsafe {
            bpf_probe_read_kernel(at.cast(), RACED_NAME_MAX as u32, e.a.as_ptr().cast());
            bpf_probe_read_kernel(
                at.add(RACED_NAME_MAX).cast(),
                RACED_NAME_MAX as u32,
                e.b.as_ptr().cast(),
            );
        }
        ev.raced_len = 2 * RACED_NAME_MAX as u32;
    }
    let raced_len = unsafe { core::ptr::read_volatile(&ev.raced_len) } & 0x3ff;
    let size =
        core::mem::size_of::<FileEvent>() + first as usize + second as usize + raced_len as usize;
    submit_of(kind, base, size);
}

#[inline(always)]
fn at(ctx: &TracePointContext, n: usize) -> i64 {
    arg(ctx, n) as i32 as i64
}

/// The syscall of a syscall tracepoint record (`int __syscall_nr` at byte 8, after the
/// 8-byte `struct trace_entry`), x86_64 numbers.
#[inline(always)]
pub fn syscall_nr(ctx: &TracePointContext) -> i32 {
    unsafe { ctx.read_at::<i32>(8) }.unwrap_or(-1)
}

const S_IFDIR: u32 = 0o040000;

/// Attached to the enter tracepoints of unlink, unlinkat, rmdir, rename, renameat, renameat2,
/// link, linkat, symlink, symlinkat, mkdir, mkdirat, mknod and mknodat (one program, verified
/// once): keeps the names.
#[tracepoint]
pub fn sys_enter_path(ctx: TracePointContext) -> u32 {
    let (dirfd, name, new_dirfd, new_name) = match syscall_nr(&ctx) {
        // unlink, rmdir, mkdir, mknod: (path, …)
        87 | 84 | 83 | 133 => (AT_FDCWD, arg(&ctx, 0), 0, 0),
        // unlinkat, mkdirat, mknodat: (dirfd, path, …)
        263 | 258 | 259 => (at(&ctx, 0), arg(&ctx, 1), 0, 0),
        // rename, link: (old, new)
        82 | 86 => (AT_FDCWD, arg(&ctx, 0), AT_FDCWD, arg(&ctx, 1)),
        // renameat, renameat2, linkat: (olddirfd, old, newdirfd, new, …)
        264 | 316 | 265 => (at(&ctx, 0), arg(&ctx, 1), at(&ctx, 2), arg(&ctx, 3)),
        // symlink: (target, linkpath)
        88 => (0, arg(&ctx, 0), AT_FDCWD, arg(&ctx, 1)),
        // symlinkat: (target, newdirfd, linkpath)
        266 => (0, arg(&ctx, 0), at(&ctx, 1), arg(&ctx, 2)),
        _ => return 0,
    };
    names::remember(dirfd, name, new_dirfd, new_name);
    0
}

/// Attached to the exit tracepoints of the same syscalls: sends the record.
#[tracepoint]
pub fn sys_exit_path(ctx: TracePointContext) -> u32 {
    let Some(e) = taken() else { return 0 };
    let nr = syscall_nr(&ctx);
    let (kind, tag, shape, mode_arg) = match nr {
        87 | 263 | 84 => (EventKind::Unlink, kpaths::TAG_UNLINK, Shape::One, 0),
        82 | 264 | 316 => (EventKind::Rename, kpaths::TAG_RENAME, Shape::Two, 0),
        86 | 265 => (EventKind::Link, kpaths::TAG_LINK, Shape::Two, 0),
        88 | 266 => (EventKind::Link, kpaths::TAG_SYMLINK, Shape::Symlink, 0),
        83 | 133 => (EventKind::Mkdir, kpaths::TAG_MKDIR, Shape::One, 1),
        258 | 259 => (EventKind::Mkdir, kpaths::TAG_MKDIR, Shape::One, 2),
        _ => {
            forget();
            return 0;
        }
    };
    let mut open_flags = if shape == Shape::Symlink {
        LINK_SYMBOLIC
    } else {
        0
    };
    if mode_arg != 0 {
        // The mode is not a name: nothing to race; read from the saved registers.
        let mut a = [0u64; 4];
        unsafe { sw_syscall_args(a.as_mut_ptr()) };
        open_flags = if mode_arg == 1 { a[1] } else { a[2] } as u32;
        // mkdir's mode has no file type: say it is a directory.
        if nr == 83 || nr == 258 {
            open_flags |= S_IFDIR;
        }
    }
    let result = unsafe { ctx.read_at::<i64>(RET) }.unwrap_or(0) as i32;
    // One state for the common code, whatever the syscall (see `opaque`).
    let packed = opaque(
        kind as u64 | (tag as u64) << 8 | (shape as u64) << 16 | (open_flags as u64) << 32,
    );
    let (kind, tag, shape) = (
        packed as u32 & 0xff,
        (packed >> 8) as u32 & 0xff,
        (packed >> 16) as u8,
    );
    send(kind, tag, shape, (packed >> 32) as u32, result, e);
    forget();
    0
}
