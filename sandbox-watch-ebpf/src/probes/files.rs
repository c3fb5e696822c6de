//! File opens.
//!
//! Opens come from one of two hooks, chosen by the loader:
//! - `fentry/security_file_open(struct file *file)`: every open, io_uring's and
//!   open_by_handle_at's included, but not O_PATH ones (no file is opened for access);
//! - where fentry is refused, the syscall tracepoints `sys_exit_open{,at,at2}`/`creat` and
//!   `sys_exit_open_by_handle_at`, which take the `struct file` from the fd table. They cannot
//!   see opens made without those syscalls (io_uring: see `uring.rs`).
//!
//! O_PATH descriptors (`FMODE_PATH`) are sent as they are (their own op, never a read); where
//! fentry runs they come from the fexit of `do_sys_openat2`.
//!
//! Syscall tracepoint records are `struct syscall_trace_enter { struct trace_entry ent; int nr;
//! unsigned long args[6]; }` and `struct syscall_trace_exit { ...; int nr; long ret; }`: the
//! arguments and the result start at byte 16 on every kernel since 2.6.33.
use aya_ebpf::{
    helpers::generated::{bpf_probe_read_kernel, bpf_probe_read_user},
    macros::{fentry, fexit, map, tracepoint},
    maps::{Array, HashMap},
    programs::{FEntryContext, FExitContext, TracePointContext},
};
use sandbox_watch_common::{
    EventKind, FileEvent, ID_PARENT_SHIFT, InodeKey, PATH_FROM_DIR_AND_NAME, PATH_FROM_FILE,
    PATH_MAX, PATH_TRUNCATED, ReadKey,
};

use super::inodes::{identity_of, opened_for_write, registered};
use super::paths::{PATH_MASK, dir_and_name};
use super::syscall::RET;
use crate::{current_task, current_tgid, header, is_traced, kernel::*, scratch, submit};

const AT_FDCWD: i64 = -100;
/// `FMODE_WRITE`, `FMODE_PATH` and `FMODE_CREATED` in `file->f_mode` (include/linux/fs.h; the
/// same values on 6.1 and 6.18).
const FMODE_WRITE: u32 = 0x2;
const FMODE_PATH: u32 = 0x4000;
const FMODE_CREATED: u32 = 0x100000;

/// Plain reads already reported, by process, inode and name (see `ReadKey`), with how many
/// more opens followed. Reads of an `IDENTITY` inode never enter it: each is sent.
#[map]
static READS: HashMap<ReadKey, u64> = HashMap::with_max_entries(32768, 0);

/// Set by the loader once the open hook is chosen: slot 0 is 1 when fentry runs.
#[map]
static OPEN_HOOK: Array<u32> = Array::with_max_entries(1, 0);

#[inline(always)]
fn fentry_opens() -> bool {
    OPEN_HOOK.get(0).is_some_and(|v| *v == 1)
}

// ---- opens: syscall tracepoints (the fallback) ----
//
// Only the exits: the flags come from the `struct file` itself (`f_flags`; O_CREAT and O_TRUNC
// are gone by then, FMODE_CREATED in `f_mode` says "created"), so untraced tasks pay one
// lookup per open, not two.

#[tracepoint(category = "syscalls", name = "sys_exit_openat")]
pub fn sys_exit_openat(ctx: TracePointContext) -> u32 {
    exit_open(&ctx, Args::DirNameFlags)
}

#[tracepoint(category = "syscalls", name = "sys_exit_open")]
pub fn sys_exit_open(ctx: TracePointContext) -> u32 {
    exit_open(&ctx, Args::NameFlags)
}

#[tracepoint(category = "syscalls", name = "sys_exit_creat")]
pub fn sys_exit_creat(ctx: TracePointContext) -> u32 {
    exit_open(&ctx, Args::Name)
}

/// open_by_handle_at(mount_fd, handle, flags) returns a descriptor like openat; a failure has
/// no path to report. Where fentry runs, `security_file_open` has seen it already (unless it
/// is an O_PATH one).
#[tracepoint(category = "syscalls", name = "sys_exit_open_by_handle_at")]
pub fn sys_exit_open_by_handle_at(ctx: TracePointContext) -> u32 {
    if !is_traced(current_tgid()) {
        return 0;
    }
    let ret = unsafe { ctx.read_at::<i64>(RET) }.unwrap_or(-1);
    if ret < 0 {
        return 0;
    }
    let file = unsafe { sw_task_fd_file(current_task(), ret as u32) };
    if file.is_null() {
        return 0;
    }
    if fentry_opens() && unsafe { sw_file_mode(file) } & FMODE_PATH == 0 {
        return 0;
    }
    report_open(file);
    0
}

#[tracepoint(category = "syscalls", name = "sys_exit_openat2")]
pub fn sys_exit_openat2(ctx: TracePointContext) -> u32 {
    exit_open(&ctx, Args::DirNameHow)
}

/// Where an open syscall keeps the directory fd, the path and the flags.
#[derive(Clone, Copy)]
enum Args {
    /// openat(dirfd, path, flags, mode)
    DirNameFlags,
    /// open(path, flags, mode)
    NameFlags,
    /// creat(path, mode)
    Name,
    /// openat2(dirfd, path, struct open_how *how, size): `how->flags` first
    DirNameHow,
}

const O_WRONLY_CREAT_TRUNC: u32 = 0o1 | 0o100 | 0o1000;

#[inline(always)]
fn exit_open(ctx: &TracePointContext, args: Args) -> u32 {
    if !is_traced(current_tgid()) {
        return 0;
    }
    let ret = unsafe { ctx.read_at::<i64>(RET) }.unwrap_or(-1);
    if ret < 0 {
        if missing(ret) {
            return 0;
        }
        // No file to read: the path and flags as the caller gave them (still in the saved
        // registers at the exit).
        let mut a = [0u64; 4];
        unsafe { sw_syscall_args(a.as_mut_ptr()) };
        let (dirfd, name, flags) = match args {
            Args::DirNameFlags => (a[0] as i32 as i64, a[1], a[2] as u32),
            Args::NameFlags => (AT_FDCWD, a[0], a[1] as u32),
            Args::Name => (AT_FDCWD, a[0], O_WRONLY_CREAT_TRUNC),
            Args::DirNameHow => {
                let mut flags: u64 = 0;
                unsafe {
                    bpf_probe_read_user((&raw mut flags).cast(), 8, a[2] as *const _);
                }
                (a[0] as i32 as i64, a[1], flags as u32)
            }
        };
        report_failed_open(dirfd, name, flags, ret as i32);
        return 0;
    }
    let file = unsafe { sw_task_fd_file(current_task(), ret as u32) };
    if !file.is_null() {
        report_open(file);
    }
    0
}

/// ENOENT or ENOTDIR: the file is not there. Every program looks for many files that are not
/// there (libraries, modules, configuration): thousands a Python start-up. Those stay in the
/// kernel; opens refused or failing otherwise are sent.
#[inline(always)]
fn missing(ret: i64) -> bool {
    ret == -2 || ret == -20
}

/// Sends an open that failed: its directory (from the kernel) and name (as given), its flags
/// and the error.
#[inline(always)]
fn report_failed_open(dirfd: i64, name: u64, open_flags: u32, result: i32) {
    let Some(base) = scratch() else { return };
    let event = base.cast::<FileEvent>();
    let tail = unsafe { base.add(core::mem::size_of::<FileEvent>()) };
    let walked = dir_and_name(dirfd, name, tail);
    let path_len = walked & !WALK_TRUNCATED & PATH_MASK;
    let tgid = current_tgid();
    unsafe {
        *event = FileEvent {
            header: header(
                EventKind::OpenFailed,
                tgid,
                sw_task_start_ns(current_task()),
            ),
            open_flags,
            flags: if walked & WALK_TRUNCATED != 0 {
                PATH_TRUNCATED
            } else {
                0
            },
            path_kind: PATH_FROM_DIR_AND_NAME,
            path_len,
            result,
            ..Default::default()
        };
    }
    submit(
        EventKind::OpenFailed,
        base,
        core::mem::size_of::<FileEvent>() + path_len as usize,
    );
}

// ---- opens: fentry (where the kernel allows it) ----

#[fentry(function = "security_file_open")]
pub fn security_file_open(ctx: FEntryContext) -> u32 {
    if !is_traced(current_tgid()) {
        return 0;
    }
    let file: Ptr = ctx.arg(0);
    // f_flags has lost O_CREAT/O_TRUNC by now; FMODE_CREATED in f_mode says "created".
    report_open(file);
    0
}

/// Where fentry runs, the syscall tracepoints do not: opens that fail before the file exists
/// (refused, or no such file) come from the exit of `do_sys_openat2(int dfd, const char __user
/// *filename, struct open_how *how)`, which open, openat, openat2 and creat all go through.
#[fexit(function = "do_sys_openat2")]
pub fn do_sys_openat2_exit(ctx: FExitContext) -> u32 {
    if !is_traced(current_tgid()) {
        return 0;
    }
    let ret: i64 = ctx.arg(3);
    if ret >= 0 {
        // security_file_open never sees an O_PATH open: it is taken here.
        let file = unsafe { sw_task_fd_file(current_task(), ret as u32) };
        if !file.is_null() && unsafe { sw_file_mode(file) } & FMODE_PATH != 0 {
            report_open(file);
        }
        return 0;
    }
    if missing(ret) {
        return 0;
    }
    let dirfd: i32 = ctx.arg(0);
    let name: u64 = ctx.arg(1);
    let how: u64 = ctx.arg(2);
    let mut flags: u64 = 0;
    unsafe { bpf_probe_read_kernel((&raw mut flags).cast(), 8, how as *const _) };
    report_failed_open(dirfd as i64, name, flags as u32, ret as i32);
    0
}

/// Sends one open, unless it is a plain read this process already made of this inode by this
/// name (then it is only counted). An open by the monitor itself registers the inode instead.
#[inline(always)]
fn report_open(file: Ptr) {
    let tgid = current_tgid();
    let f_mode = unsafe { sw_file_mode(file) };
    let inode = unsafe { sw_file_inode(file) };
    let id = InodeKey {
        dev: unsafe { sw_inode_dev(inode) },
        generation: unsafe { sw_inode_generation(inode) },
        ino: unsafe { sw_inode_ino(inode) },
    };
    if registered(tgid, &id) {
        return;
    }
    let start_ns = unsafe { sw_task_start_ns(current_task()) };
    let name_key = unsafe { sw_file_name_key(file) };
    // FMODE_WRITE covers O_WRONLY, O_RDWR and (with them) O_TRUNC; FMODE_CREATED, O_CREAT. An
    // O_PATH descriptor reads nothing: never counted as a read.
    let plain_read = f_mode & (FMODE_WRITE | FMODE_CREATED | FMODE_PATH) == 0;
    let key = ReadKey {
        tgid,
        dev: id.dev,
        ino: id.ino,
        start_ns,
        generation: id.generation,
        _pad: 0,
        name_key,
    };
    if plain_read && let Some(count) = READS.get_ptr_mut(&key) {
        unsafe { *count += 1 };
        return;
    }
    // Known inodes are never counted in READS: every open of one is sent.
    let identity = identity_of(id.dev, id.generation, id.ino);
    if plain_read && identity == 0 {
        let _ = READS.insert(&key, &0, 0);
    }
    if f_mode & FMODE_WRITE != 0 {
        opened_for_write(tgid, start_ns, &id);
    }
    let mut flags = identity;
    let (mut parent_ino, mut parent_generation) = (0, 0);
    if f_mode & FMODE_CREATED != 0 {
        let dir = unsafe { sw_file_parent_inode(file) };
        parent_ino = unsafe { sw_inode_ino(dir) };
        parent_generation = unsafe { sw_inode_generation(dir) };
        let d = identity_of(id.dev, parent_generation, parent_ino);
        flags |= d << ID_PARENT_SHIFT;
    }
    let Some(base) = scratch() else { return };
    let event = base.cast::<FileEvent>();
    let tail = unsafe { base.add(core::mem::size_of::<FileEvent>()) };
    let walked = unsafe { sw_file_path(file, tail) };
    let path_len = walked & !WALK_TRUNCATED & (2 * PATH_MAX as u32 - 1);
    unsafe {
        *event = FileEvent {
            header: header(EventKind::FileOpen, tgid, start_ns),
            magic: sw_file_magic(file),
            ino: id.ino,
            dev: id.dev,
            open_flags: sw_file_flags(file),
            f_mode,
            flags: if walked & WALK_TRUNCATED != 0 {
                PATH_TRUNCATED
            } else {
                0
            },
            path_kind: PATH_FROM_FILE,
            path_len,
            identity: flags,
            generation: id.generation,
            name_key,
            parent_ino,
            parent_generation,
            ..Default::default()
        };
    }
    submit(
        EventKind::FileOpen,
        base,
        core::mem::size_of::<FileEvent>() + path_len as usize,
    );
}
