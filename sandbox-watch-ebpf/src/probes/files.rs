//! File opens, deletes and renames.
//!
//! Opens come from one of two hooks, chosen by the loader:
//! - `fentry/security_file_open(struct file *file)`: every open, io_uring's included;
//! - where fentry is refused, the syscall tracepoints `sys_exit_open{,at,at2}`/`creat`, which
//!   take the `struct file` from the fd table, and io_uring's completions of its opens
//!   (`probes/uring.rs`).
//!
//! Deletes and renames use the syscall tracepoints `unlink{,at}`, `rmdir`, `rename{,at,at2}`:
//! the directory comes from the kernel (dirfd or cwd), the last part from the argument.
//!
//! Syscall tracepoint records are `struct syscall_trace_enter { struct trace_entry ent; int nr;
//! unsigned long args[6]; }` and `struct syscall_trace_exit { ...; int nr; long ret; }`: the
//! arguments and the result start at byte 16 on every kernel since 2.6.33.
use aya_ebpf::{
    helpers::generated::{
        bpf_get_current_pid_tgid, bpf_probe_read_kernel, bpf_probe_read_kernel_str,
        bpf_probe_read_user, bpf_probe_read_user_str,
    },
    macros::{btf_tracepoint, fentry, fexit, map, tracepoint},
    maps::{HashMap, LruHashMap},
    programs::{BtfTracePointContext, FEntryContext, FExitContext, TracePointContext},
};
use sandbox_watch_common::{
    EventKind, FileEvent, InodeKey, LINK_SYMBOLIC, NAMES_AT_ENTRY, NEW_PATH_TRUNCATED,
    PATH_AS_GIVEN, PATH_FROM_DIR_AND_NAME, PATH_FROM_FILE, PATH_FROM_INODE, PATH_MAX,
    PATH_TRUNCATED, ReadKey,
    written::{MODIFIED, OPENED},
};

use super::syscall::{RET, arg, syscall_programs};
use crate::{
    current_task, current_tgid, header, is_traced, kernel::*, scratch, submit, submit_value,
};

use sandbox_watch_common::abi::{
    FMODE_CREATED, FMODE_PATH, FMODE_WRITE, O_CREAT, O_TRUNC, O_WRONLY, S_IFMT, S_IFREG,
};

pub(crate) const AT_FDCWD: i64 = -100;
/// Bytes kept of a name given to unlink/rename.
const NAME_MAX: usize = 1024;
/// Bounds a path's length in a record's tail for the verifier (a walk plus a name fit in it).
pub(crate) const PATH_MASK: u32 = 0x3fff;

/// Plain reads already reported, by process (with its start), inode (with its generation) and
/// the name used, with how many more opens followed.
#[map]
static READS: HashMap<ReadKey, u64> = HashMap::with_max_entries(32768, 0);

/// Inodes every open of which is sent (credentials): filled by userspace, at start with the
/// files the rules name (found by their inode, whatever path opens them later), and when a
/// credential is first found by its path. Only read here, so a count in flight in `READS` is
/// never overwritten.
#[map]
static ALWAYS: HashMap<InodeKey, u8> = HashMap::with_max_entries(16384, 0);

/// Files a process is known to write in this capture, by process (with its start) and inode
/// (with its generation; `name_key` is 0), with their state (`written::*`): `OPENED` at every
/// open for write the capture sees, `MODIFIED` at the first write through it (sent then, once
/// per open, as `FileModified`) and at the first dirtying of any other file, so a write storm
/// is one record per file. An LRU: a file pushed out by 65,536 newer ones is sent again at its
/// next dirtying (the userspace folds it into the entry it has).
#[map]
static WRITTEN: LruHashMap<ReadKey, u8> = LruHashMap::with_max_entries(65536, 0);

#[inline(always)]
fn written_key(tgid: u32, dev: u32, ino: u64, start_ns: u64, generation: u32) -> ReadKey {
    ReadKey {
        tgid,
        dev,
        ino,
        start_ns,
        generation,
        _pad: 0,
        name_key: 0,
    }
}

/// Enters a file's state; false when the map refused it (counted).
#[inline(always)]
fn note_written(key: &ReadKey, state: u8) -> bool {
    if WRITTEN.insert(key, state, 0).is_err() {
        crate::count_fail(sandbox_watch_common::fails::WRITTEN);
        return false;
    }
    true
}

/// Whether an open truncated the file: the caller asked for O_TRUNC (`given`: the flags the
/// call was given, 0 where the hook does not have them) of a regular file the open did not
/// create. The kernel then truncates it inside the call, before the open is reported (and sets
/// its times, even when it was empty already).
#[inline(always)]
fn truncates(given: u32, f_mode: u32, inode: Ptr) -> bool {
    given & O_TRUNC != 0
        && f_mode & FMODE_CREATED == 0
        && unsafe { sw_inode_mode(inode) } & S_IFMT == S_IFREG
}

/// The file `key` names, open for write with nothing written yet (`OPENED`), was written
/// through: it is `MODIFIED`, and its entry is told (`FileModified`, no path).
#[inline(always)]
fn modified(key: &ReadKey) {
    note_written(key, MODIFIED);
    let mut e = FileEvent {
        header: header(EventKind::FileModified, key.tgid, key.start_ns),
        ino: key.ino,
        dev: key.dev,
        generation: key.generation,
        ..Default::default()
    };
    submit_value(EventKind::FileModified, &mut e);
}

// ---- writes: at the exit of the write calls ----
//
// `sys_exit_file_writes`, one program the loader attaches to the exits of write(2), pwrite64,
// writev, pwritev, pwritev2, sendfile, splice and copy_file_range (the output probe's calls,
// `probes/output.rs`, which has programs of its own on them: one more there would make 6.1's
// verifier give up on them). A write into pages still dirty from a write in the same clock
// tick dirties nothing, nor does one to a procfs or sysfs file, so the dirtying hook alone
// would miss them.

/// x86-64 numbers of the calls whose descriptor written to is not their first argument:
/// sendfile(out_fd, …) has it first like write(2); splice and copy_file_range third.
const SPLICE: i32 = 275;
const COPY_FILE_RANGE: i32 = 326;

#[tracepoint]
pub fn sys_exit_file_writes(ctx: TracePointContext) -> u32 {
    let tgid = current_tgid();
    if !is_traced(tgid) {
        return 0;
    }
    if unsafe { ctx.read_at::<i64>(RET) }.unwrap_or(0) <= 0 {
        return 0;
    }
    // `struct syscall_trace_exit { struct trace_entry ent; int nr; long ret; }`
    let nr = unsafe { ctx.read_at::<i32>(8) }.unwrap_or(-1);
    let mut a = [0u64; 4];
    unsafe { sw_syscall_args(a.as_mut_ptr()) };
    let fd = if nr == SPLICE || nr == COPY_FILE_RANGE {
        a[2]
    } else {
        a[0]
    };
    wrote(tgid, unsafe { sw_current_start_ns() }, fd as u32);
    0
}

/// A traced task's write call wrote to `fd`: an open for write of its file in this capture,
/// with nothing written yet, is modified.
#[inline(always)]
fn wrote(tgid: u32, start_ns: u64, fd: u32) {
    let inode = unsafe { sw_current_fd_inode(fd) };
    if inode.is_null() {
        return;
    }
    let dev = unsafe { sw_inode_dev(inode) };
    let ino = unsafe { sw_inode_ino(inode) };
    let generation = unsafe { sw_inode_generation(inode) };
    let key = written_key(tgid, dev, ino, start_ns, generation);
    if unsafe { WRITTEN.get(key) }.copied() == Some(OPENED) {
        modified(&key);
    }
}

// ---- writes: where the kernel dirties the inode ----
//
// `tp_btf/writeback_mark_inode_dirty(struct inode *inode, int flags)` runs in the task that
// dirties the inode, at every `__mark_inode_dirty`: write(2) and its family, a store into a
// shared mapping (at the page fault), io_uring's writes (in its io-wq worker, a thread of the
// submitter). Only data is a write: the call is for the inode's pages (I_DIRTY_PAGES), not an
// atime or attribute update.

/// x86-64 numbers of write(2), pwrite64, writev, pwritev, pwritev2.
const WRITE_CALLS: [i64; 5] = [1, 18, 20, 296, 328];

/// x86-64 numbers of open, creat, openat, open_by_handle_at, openat2: their exits report the
/// open (an O_TRUNC one truncates, and dirties the pages, before it returns).
const OPEN_CALLS: [i64; 5] = [2, 85, 257, 304, 437];

/// The syscall number of a task that is in no system call: the kernel's entry of a page fault
/// (or an interrupt) from user mode sets `orig_ax` to -1.
const NO_SYSCALL: i64 = -1;

/// Whether a dirtying is a write of the file's data not already reported as an open: its pages
/// (a page clean until now), or the inode's times from inside a write call (a write into pages
/// still dirty from an earlier write dirties no page, only the mtime; an atime update from a
/// read looks the same, so the call tells them apart) or from no call at all: a store into a
/// shared mapping of a file whose filesystem has no `page_mkwrite` (tmpfs, /dev/shm) dirties no
/// page the kernel writes back, only the mtime (`file_update_time` at the fault), while a read
/// updates the atime inside its call (read(2), mmap(2), execve), never at a fault. `nr`: the
/// task's syscall, not an open (see `writeback_mark_inode_dirty`).
#[inline(always)]
fn is_data_write(flags: u32, nr: i64) -> bool {
    if flags & unsafe { sw_dirty_pages_flag() } != 0 {
        return true;
    }
    flags & unsafe { sw_dirty_inode_flags() } != 0
        && (WRITE_CALLS.contains(&nr) || nr == NO_SYSCALL)
}

#[btf_tracepoint(function = "writeback_mark_inode_dirty")]
pub fn writeback_mark_inode_dirty(ctx: BtfTracePointContext) -> i32 {
    let tgid = current_tgid();
    if !is_traced(tgid) {
        return 0;
    }
    let inode: Ptr = ctx.arg(0);
    let flags: i32 = ctx.arg(1);
    let nr = unsafe { sw_syscall_nr() };
    // Not inside an open call: the open is the record (a truncation by it is its own flag).
    if OPEN_CALLS.contains(&nr) || !is_data_write(flags as u32, nr) {
        return 0;
    }
    let dev = unsafe { sw_inode_dev(inode) };
    let ino = unsafe { sw_inode_ino(inode) };
    let generation = unsafe { sw_inode_generation(inode) };
    let start_ns = unsafe { sw_task_start_ns(current_task()) };
    let key = written_key(tgid, dev, ino, start_ns, generation);
    match unsafe { WRITTEN.get(key) }.copied() {
        Some(OPENED) => {
            modified(&key);
            return 0;
        }
        Some(_) => return 0,
        None => {}
    }
    note_written(&key, MODIFIED);
    let Some(base) = scratch() else { return 0 };
    let event = base.cast::<FileEvent>();
    let tail = unsafe { base.add(core::mem::size_of::<FileEvent>()) };
    let walked = unsafe { sw_inode_path(inode, tail) };
    let e = FileEvent {
        header: header(EventKind::InodeDirty, tgid, start_ns),
        magic: unsafe { sw_inode_magic(inode) },
        ino,
        dev,
        generation,
        f_mode: sandbox_watch_common::abi::FMODE_WRITE,
        open_flags: O_WRONLY,
        path_kind: PATH_FROM_INODE,
        ..Default::default()
    };
    send_walked(EventKind::InodeDirty, event, e, walked);
    0
}

/// Sends `e`, a record whose path was walked into the tail after it (`walked`: what the walk
/// returned), with that path's length and its truncation flag.
#[inline(always)]
fn send_walked(kind: EventKind, event: *mut FileEvent, mut e: FileEvent, walked: u32) {
    e.path_len = walked & !WALK_TRUNCATED & (2 * PATH_MAX as u32 - 1);
    if walked & WALK_TRUNCATED != 0 {
        e.flags |= PATH_TRUNCATED;
    }
    let size = core::mem::size_of::<FileEvent>() + e.path_len as usize;
    unsafe { *event = e };
    submit(kind, event.cast(), size);
}

// ---- opens: syscall tracepoints (the fallback) ----
//
// Only the exits: the flags come from the `struct file` itself (`f_flags`; O_CREAT and O_TRUNC
// are gone by then, FMODE_CREATED in `f_mode` says "created"), so untraced tasks pay one
// lookup per open, not two.

syscall_programs! {
    sys_exit_openat(ctx) => exit_open(&ctx, Args::DirNameFlags);
    sys_exit_open(ctx) => exit_open(&ctx, Args::NameFlags);
    sys_exit_creat(ctx) => exit_open(&ctx, Args::Name);
    sys_exit_openat2(ctx) => exit_open(&ctx, Args::DirNameHow);
    /// open_by_handle_at(mount_fd, handle, flags): a descriptor like openat's, for a file named
    /// by no path at all (where fentry runs, `security_file_open` sees it). Failures have no
    /// path to report.
    sys_exit_open_by_handle_at(ctx) => exit_open_by_handle(&ctx);
}

#[inline(always)]
fn exit_open_by_handle(ctx: &TracePointContext) -> u32 {
    if !is_traced(current_tgid()) {
        return 0;
    }
    let ret = unsafe { ctx.read_at::<i64>(RET) }.unwrap_or(-1);
    if ret < 0 {
        return 0;
    }
    let file = unsafe { sw_task_fd_file(current_task(), ret as u32) };
    if !file.is_null() {
        // open_by_handle_at(mount_fd, handle, flags)
        report_open(file, 0, || {
            let mut a = [0u64; 4];
            unsafe { sw_syscall_args(a.as_mut_ptr()) };
            a[2] as u32
        });
    }
    0
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

const O_WRONLY_CREAT_TRUNC: u32 = O_WRONLY | O_CREAT | O_TRUNC;

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
        // No file to read.
        let (dirfd, name, flags) = given(args);
        report_failed_open(dirfd, name, flags, ret as i32);
        return 0;
    }
    let file = unsafe { sw_task_fd_file(current_task(), ret as u32) };
    if file.is_null() {
        return 0;
    }
    report_open(file, 0, || given(args).2);
    0
}

/// The directory fd, path and flags an open was given: still in the saved registers at the
/// exit (openat2's flags in the caller's memory).
#[inline(always)]
fn given(args: Args) -> (i64, u64, u32) {
    let mut a = [0u64; 4];
    unsafe { sw_syscall_args(a.as_mut_ptr()) };
    match args {
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
    }
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
    // FMODE_CREATED in f_mode says "created"; an O_TRUNC has not truncated yet (the exit,
    // `do_sys_openat2_exit`, tells it).
    report_open(file, 0, || 0);
    0
}

/// Where fentry runs, an open is reported at `security_file_open`, before an O_TRUNC open
/// truncates the file: at the open's exit (`given`: its flags), such an open is modified.
#[inline(always)]
fn truncated_after_report(file: Ptr, f_mode: u32, given: u32) {
    let inode = unsafe { sw_file_inode(file) };
    if !truncates(given, f_mode, inode) {
        return;
    }
    let key = written_key(
        current_tgid(),
        unsafe { sw_inode_dev(inode) },
        unsafe { sw_inode_ino(inode) },
        unsafe { sw_task_start_ns(current_task()) },
        unsafe { sw_inode_generation(inode) },
    );
    modified(&key);
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
    let how: u64 = ctx.arg(2);
    let mut flags: u64 = 0;
    unsafe { bpf_probe_read_kernel((&raw mut flags).cast(), 8, how as *const _) };
    if ret >= 0 {
        let file = unsafe { sw_task_fd_file(current_task(), ret as u32) };
        if file.is_null() {
            return 0;
        }
        let f_mode = unsafe { sw_file_mode(file) };
        // O_PATH opens never reach `security_file_open`: they are sent from here.
        if f_mode & FMODE_PATH != 0 {
            report_open(file, 0, || 0);
        } else if f_mode & FMODE_WRITE != 0 {
            // Reported at `security_file_open`, before an O_TRUNC truncated it.
            truncated_after_report(file, f_mode, flags as u32);
        }
        return 0;
    }
    if missing(ret) {
        return 0;
    }
    let dirfd: i32 = ctx.arg(0);
    let name: u64 = ctx.arg(1);
    report_failed_open(dirfd as i64, name, flags as u32, ret as i32);
    0
}

/// Sends one open, unless it is a plain read this process already made of this inode by this
/// name (then it is only counted). O_PATH opens (no read, no write) and opens of `ALWAYS`
/// inodes are always sent. `via` goes into the record's flags ([`VIA_IO_URING`] for an open
/// seen at its io_uring completion). `given`: the flags the call was given, where the hook has
/// them (an O_TRUNC in them is told apart: `truncates`), else 0; asked for only of an open for
/// write, the one they matter to.
#[inline(always)]
pub(crate) fn report_open(file: Ptr, via: u32, given: impl FnOnce() -> u32) {
    let tgid = current_tgid();
    let f_mode = unsafe { sw_file_mode(file) };
    let inode = unsafe { sw_file_inode(file) };
    let dev = unsafe { sw_inode_dev(inode) };
    let ino = unsafe { sw_inode_ino(inode) };
    super::tamper::monitor_file(file, f_mode, dev, ino);
    let generation = unsafe { sw_inode_generation(inode) };
    let name_key = unsafe { sw_file_name_key(file) };
    let start_ns = unsafe { sw_task_start_ns(current_task()) };
    // FMODE_WRITE covers O_WRONLY, O_RDWR and (with them) O_TRUNC; FMODE_CREATED, O_CREAT.
    let plain_read = f_mode & (FMODE_WRITE | FMODE_CREATED | FMODE_PATH) == 0;
    let always = unsafe { ALWAYS.get(InodeKey { dev, _pad: 0, ino }) }.is_some();
    let mut counted = 0;
    if f_mode & FMODE_WRITE != 0 {
        // Its writes are this open's: the dirtying hook need not send them, only that the
        // file was modified.
        let key = written_key(tgid, dev, ino, start_ns, generation);
        if truncates(given(), f_mode, inode) {
            note_written(&key, MODIFIED);
            counted = sandbox_watch_common::OPEN_MODIFIED;
        } else {
            note_written(&key, OPENED);
        }
    }
    if plain_read && !always {
        let key = ReadKey {
            tgid,
            dev,
            ino,
            start_ns,
            generation,
            _pad: 0,
            name_key,
        };
        if let Some(count) = READS.get_ptr_mut(key) {
            unsafe { *count += 1 };
            return;
        }
        if READS.insert(key, 0, 0).is_err() {
            crate::count_fail(sandbox_watch_common::fails::READS);
        } else {
            counted = sandbox_watch_common::READ_COUNTED;
        }
    }
    let Some(base) = scratch() else { return };
    let event = base.cast::<FileEvent>();
    let tail = unsafe { base.add(core::mem::size_of::<FileEvent>()) };
    let walked = unsafe { sw_file_path(file, tail) };
    let e = FileEvent {
        header: header(EventKind::FileOpen, tgid, start_ns),
        magic: unsafe { sw_file_magic(file) },
        ino,
        dev,
        generation,
        name_key,
        open_flags: unsafe { sw_file_flags(file) },
        f_mode,
        flags: counted | via,
        path_kind: PATH_FROM_FILE,
        ..Default::default()
    };
    send_walked(EventKind::FileOpen, event, e, walked);
}

// ---- links ----
//
// Only the exits: the arguments are read from the registers saved at the syscall's entry.

syscall_programs! {
    sys_exit_symlink(ctx) => exit_link(&ctx, LinkArgs::Symlink);
    sys_exit_symlinkat(ctx) => exit_link(&ctx, LinkArgs::Symlinkat);
    sys_exit_link(ctx) => exit_link(&ctx, LinkArgs::Link);
    sys_exit_linkat(ctx) => exit_link(&ctx, LinkArgs::Linkat);
}

// ---- names at a call's entry ----

/// The names a traced thread's rename, delete, link or attribute call held at the call's
/// entry, as read then from its memory (`len`: with the NUL; 0 when it could not be read or
/// the call has no such name). An attribute call's are its path's name and its extended
/// attribute's name (`probes/attr.rs`).
#[repr(C)]
pub struct EntryNames {
    len: [u32; 2],
    name: [[u8; NAME_MAX]; 2],
}

/// [`EntryNames`] by thread, from a call's entry to its exit, which takes them out. An LRU: a
/// thread that never reached the exit (killed in the call) leaves an entry that ages out.
#[map]
static ENTRY_NAMES: LruHashMap<u64, EntryNames> = LruHashMap::with_max_entries(1024, 0);

/// No second name.
const NONE: usize = 6;

syscall_programs! {
    sys_enter_unlink(ctx) => enter_names(&ctx, 0, NONE);
    sys_enter_rmdir(ctx) => enter_names(&ctx, 0, NONE);
    sys_enter_unlinkat(ctx) => enter_names(&ctx, 1, NONE);
    sys_enter_rename(ctx) => enter_names(&ctx, 0, 1);
    sys_enter_renameat(ctx) => enter_names(&ctx, 1, 3);
    sys_enter_renameat2(ctx) => enter_names(&ctx, 1, 3);
    sys_enter_symlink(ctx) => enter_names(&ctx, 0, 1);
    sys_enter_symlinkat(ctx) => enter_names(&ctx, 0, 2);
    sys_enter_link(ctx) => enter_names(&ctx, 0, 1);
    sys_enter_linkat(ctx) => enter_names(&ctx, 1, 3);
}

/// Keeps the names (arguments `a` and `b`) a traced thread's call holds at its entry. The
/// kernel copies them right after; a thread that rewrites them before the exit reads them
/// again makes the two differ.
#[inline(always)]
fn enter_names(ctx: &TracePointContext, a: usize, b: usize) -> u32 {
    if !is_traced(current_tgid()) {
        return 0;
    }
    let second = if b == NONE { 0 } else { arg(ctx, b) };
    keep_entry_names(arg(ctx, a), second, NAME_MAX as u32);
    0
}

/// Keeps, for this thread's call in flight, the NUL-ended names at `first` and `second` in
/// the caller's memory (0: none), the second cut at `second_max` bytes (as the exit's record
/// cuts it). Its exit takes them out ([`take_entry_names`]); a failed insert is counted.
#[inline(always)]
pub(crate) fn keep_entry_names(first: u64, second: u64, second_max: u32) {
    let Some(base) = scratch() else { return };
    let v = base.cast::<EntryNames>();
    unsafe {
        for (i, (src, max)) in [(first, NAME_MAX as u32), (second, second_max)]
            .into_iter()
            .enumerate()
        {
            let n = if src == 0 {
                0
            } else {
                read_str(false, (*v).name[i].as_mut_ptr(), max, src)
            };
            (*v).len[i] = if n > 0 { n as u32 } else { 0 };
        }
        if ENTRY_NAMES
            .insert(bpf_get_current_pid_tgid(), &*v, 0)
            .is_err()
        {
            crate::count_fail(sandbox_watch_common::fails::NAMES);
        }
    }
}

/// Takes this thread's [`EntryNames`] out of the map unread (a call that makes no record).
#[inline(always)]
pub(crate) fn forget_entry_names() {
    let _ = ENTRY_NAMES.remove(unsafe { bpf_get_current_pid_tgid() });
}

/// Writes this thread's [`EntryNames`] at `dst`, each NUL-ended (one name for a delete), and
/// takes them out of the map: the bytes written, 0 when none were kept (counted: the record
/// goes out without them, and a race on its names is not seen).
#[inline(always)]
pub(crate) fn take_entry_names(dst: *mut u8, two: bool) -> u32 {
    let key = unsafe { bpf_get_current_pid_tgid() };
    let Some(v) = ENTRY_NAMES.get_ptr(key) else {
        crate::count_fail(sandbox_watch_common::fails::NAMES);
        return 0;
    };
    let mut at: u32 = 0;
    for i in 0..2 {
        if i == 1 && !two {
            break;
        }
        let len = unsafe { (*v).len[i] }.min(NAME_MAX as u32);
        let to = unsafe { dst.add((at & (2 * NAME_MAX as u32 - 1)) as usize) };
        if len == 0 {
            unsafe { *to = 0 };
            at += 1;
        } else {
            let len = len & (2 * NAME_MAX as u32 - 1);
            unsafe {
                bpf_probe_read_kernel(to.cast(), len, (*v).name[i].as_ptr().cast());
                // A name cut at NAME_MAX has no NUL of its own.
                *to.add(((len - 1) & (NAME_MAX as u32 - 1)) as usize) = 0;
            }
            at += len;
        }
    }
    let _ = ENTRY_NAMES.remove(key);
    at
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum LinkArgs {
    /// symlink(target, linkpath)
    Symlink,
    /// symlinkat(target, newdirfd, linkpath)
    Symlinkat,
    /// link(oldpath, newpath)
    Link,
    /// linkat(olddirfd, oldpath, newdirfd, newpath, flags)
    Linkat,
}

#[inline(always)]
fn exit_link(ctx: &TracePointContext, args: LinkArgs) -> u32 {
    if !is_traced(current_tgid()) {
        return 0;
    }
    let result = unsafe { ctx.read_at::<i64>(RET) }.unwrap_or(0) as i32;
    let mut a = [0u64; 4];
    unsafe { sw_syscall_args(a.as_mut_ptr()) };
    let (old_dirfd, old, new_dirfd, new) = match args {
        LinkArgs::Symlink => (0, a[0], AT_FDCWD, a[1]),
        LinkArgs::Symlinkat => (0, a[0], a[1] as i32 as i64, a[2]),
        LinkArgs::Link => (AT_FDCWD, a[0], AT_FDCWD, a[1]),
        LinkArgs::Linkat => (a[0] as i32 as i64, a[1], a[2] as i32 as i64, a[3]),
    };
    let symbolic = matches!(args, LinkArgs::Symlink | LinkArgs::Symlinkat);
    let names = Names {
        dirfd: old_dirfd,
        name: old,
        new_dirfd,
        new_name: new,
        kernel: false,
    };
    send_link(symbolic, names, result, 0);
    0
}

/// The names of a link, rename or delete: each relative to its directory descriptor, in the
/// caller's memory (a syscall's arguments) or the kernel's (`kernel`: an io_uring request's,
/// copied at its prep).
#[derive(Clone, Copy)]
pub(crate) struct Names {
    pub dirfd: i64,
    pub name: u64,
    pub new_dirfd: i64,
    pub new_name: u64,
    pub kernel: bool,
}

/// A `Link` record: the target, then the link. `flags` are added to the record's.
#[inline(always)]
pub(crate) fn send_link(symbolic: bool, n: Names, result: i32, flags: u32) {
    let Some(base) = scratch() else { return };
    let event = base.cast::<FileEvent>();
    let tail = unsafe { base.add(core::mem::size_of::<FileEvent>()) };
    // A symbolic link's target is kept as given (it is resolved from the link's directory, when
    // it is used); a hard link's is a file, resolved like any name.
    let first = if symbolic {
        let n = read_str(n.kernel, tail, NAME_MAX as u32, n.name);
        let len = if n > 0 { n as u32 } else { 0 };
        if len as usize >= NAME_MAX {
            len | WALK_TRUNCATED
        } else {
            len
        }
    } else {
        dir_and_name_in(n.dirfd, n.name, tail, n.kernel)
    };
    let path_len = first & !WALK_TRUNCATED & PATH_MASK;
    let second = dir_and_name_in(
        n.new_dirfd,
        n.new_name,
        unsafe { tail.add(path_len as usize) },
        n.kernel,
    );
    let new_path_len = second & !WALK_TRUNCATED & PATH_MASK;
    let mut flags = flags;
    if first & WALK_TRUNCATED != 0 {
        flags |= PATH_TRUNCATED;
    }
    if second & WALK_TRUNCATED != 0 {
        flags |= NEW_PATH_TRUNCATED;
    }
    let mut size = core::mem::size_of::<FileEvent>() + path_len as usize + new_path_len as usize;
    if !n.kernel {
        let dst = unsafe { tail.add(path_len as usize + new_path_len as usize) };
        let kept = take_entry_names(dst, true);
        if kept > 0 {
            flags |= NAMES_AT_ENTRY;
            size += kept as usize;
        }
    }
    let tgid = current_tgid();
    unsafe {
        *event = FileEvent {
            header: header(EventKind::Link, tgid, sw_task_start_ns(current_task())),
            open_flags: if symbolic { LINK_SYMBOLIC } else { 0 },
            flags,
            path_kind: if symbolic {
                PATH_AS_GIVEN
            } else {
                PATH_FROM_DIR_AND_NAME
            },
            path_len,
            new_path_kind: PATH_FROM_DIR_AND_NAME,
            new_path_len,
            result,
            ..Default::default()
        };
    }
    submit(EventKind::Link, base, size);
}

// ---- deletes and renames ----

// Only the exits: the arguments are read from the registers saved at the syscall's entry
// (nothing is kept from entry to exit, so no table of syscalls in flight can fill up).

syscall_programs! {
    sys_exit_unlink(ctx) => exit_path_op(&ctx, EventKind::Unlink, PathArgs::Name);
    sys_exit_rmdir(ctx) => exit_path_op(&ctx, EventKind::Unlink, PathArgs::Name);
    sys_exit_unlinkat(ctx) => exit_path_op(&ctx, EventKind::Unlink, PathArgs::DirName);
    sys_exit_rename(ctx) => exit_path_op(&ctx, EventKind::Rename, PathArgs::NameName);
    sys_exit_renameat(ctx) => exit_path_op(&ctx, EventKind::Rename, PathArgs::DirNameDirName);
    sys_exit_renameat2(ctx) => exit_path_op(&ctx, EventKind::Rename, PathArgs::DirNameDirName);
}

/// Where a delete or rename keeps its names.
#[derive(Clone, Copy)]
enum PathArgs {
    /// unlink(path), rmdir(path)
    Name,
    /// unlinkat(dirfd, path, flags)
    DirName,
    /// rename(old, new)
    NameName,
    /// renameat(olddirfd, old, newdirfd, new), renameat2(…, flags)
    DirNameDirName,
}

#[inline(always)]
fn exit_path_op(ctx: &TracePointContext, kind: EventKind, args: PathArgs) -> u32 {
    if !is_traced(current_tgid()) {
        return 0;
    }
    let mut a = [0u64; 4];
    unsafe { sw_syscall_args(a.as_mut_ptr()) };
    let (dirfd, name, new_dirfd, new_name) = match args {
        PathArgs::Name => (AT_FDCWD, a[0], 0, 0),
        PathArgs::DirName => (a[0] as i32 as i64, a[1], 0, 0),
        PathArgs::NameName => (AT_FDCWD, a[0], AT_FDCWD, a[1]),
        PathArgs::DirNameDirName => (a[0] as i32 as i64, a[1], a[2] as i32 as i64, a[3]),
    };
    let result = unsafe { ctx.read_at::<i64>(RET) }.unwrap_or(0) as i32;
    let names = Names {
        dirfd,
        name,
        new_dirfd,
        new_name,
        kernel: false,
    };
    send_path_op(kind, names, result, 0);
    0
}

/// An `Unlink` or `Rename` record (a rename's new name second). `flags` are added to the
/// record's.
#[inline(always)]
pub(crate) fn send_path_op(kind: EventKind, n: Names, result: i32, flags: u32) {
    let Some(base) = scratch() else { return };
    let event = base.cast::<FileEvent>();
    let tail = unsafe { base.add(core::mem::size_of::<FileEvent>()) };
    let first = dir_and_name_in(n.dirfd, n.name, tail, n.kernel);
    let path_len = first & !WALK_TRUNCATED & PATH_MASK;
    let mut flags = flags;
    if first & WALK_TRUNCATED != 0 {
        flags |= PATH_TRUNCATED;
    }
    let mut new_path_len = 0;
    if kind == EventKind::Rename {
        let dst = unsafe { tail.add(path_len as usize) };
        let second = dir_and_name_in(n.new_dirfd, n.new_name, dst, n.kernel);
        new_path_len = second & !WALK_TRUNCATED & PATH_MASK;
        if second & WALK_TRUNCATED != 0 {
            flags |= NEW_PATH_TRUNCATED;
        }
    }
    let mut size = core::mem::size_of::<FileEvent>() + path_len as usize + new_path_len as usize;
    if !n.kernel {
        let dst = unsafe { tail.add(path_len as usize + new_path_len as usize) };
        let kept = take_entry_names(dst, kind == EventKind::Rename);
        if kept > 0 {
            flags |= NAMES_AT_ENTRY;
            size += kept as usize;
        }
    }
    let tgid = current_tgid();
    unsafe {
        *event = FileEvent {
            header: header(kind, tgid, sw_task_start_ns(current_task())),
            flags,
            path_kind: PATH_FROM_DIR_AND_NAME,
            path_len,
            new_path_kind: PATH_FROM_DIR_AND_NAME,
            new_path_len,
            result,
            ..Default::default()
        };
    }
    submit(kind, base, size);
}

/// Writes the directory a `*at` name is relative to (walked from the kernel's own objects;
/// nothing for an absolute name), a NUL, then the name as the caller gave it.
///
/// A name through the caller's own descriptor (`/proc/self/fd/N/REST`, `/dev/fd/N/REST`,
/// `/proc/thread-self/fd/N/REST`; editors and agents' write tools rename their temporary
/// files this way) is written as descriptor N's file, walked, and `REST`: the path the kernel
/// resolved, not the magic link.
#[inline(always)]
pub(crate) fn dir_and_name(dirfd: i64, name: u64, dst: *mut u8) -> u32 {
    dir_and_name_in(dirfd, name, dst, false)
}

/// As [`dir_and_name`], the name in the caller's memory or (`kernel`) the kernel's.
#[inline(always)]
pub(crate) fn dir_and_name_in(dirfd: i64, name: u64, dst: *mut u8, kernel: bool) -> u32 {
    let mut first = [0u8; 2];
    read_str(kernel, first.as_mut_ptr(), 2, name);
    let task = current_task();
    let mut name = name;
    let mut dir: Ptr = core::ptr::null();
    let mut from_cwd = false;
    if first[0] == b'/' {
        if let Some((fd, skip)) = through_fd(name, kernel) {
            dir = unsafe { sw_task_fd_file(task, fd) };
            if !dir.is_null() {
                name += skip;
            }
        }
    } else if dirfd == AT_FDCWD {
        from_cwd = true;
    } else {
        dir = unsafe { sw_task_fd_file(task, dirfd as u32) };
    }
    let walked = if from_cwd {
        unsafe { sw_task_cwd(task, dst) }
    } else if !dir.is_null() {
        unsafe { sw_file_path(dir, dst) }
    } else {
        0
    };
    let dir_len = walked & !WALK_TRUNCATED & (2 * PATH_MAX as u32 - 1);
    unsafe { *dst.add(dir_len as usize) = 0 };
    let name_dst = unsafe { dst.add(dir_len as usize + 1) };
    let n = read_str(kernel, name_dst, NAME_MAX as u32, name);
    let name_len = if n > 0 { n as u32 } else { 0 };
    let mut out = dir_len + 1 + name_len;
    if walked & WALK_TRUNCATED != 0 || name_len as usize >= NAME_MAX {
        out |= WALK_TRUNCATED;
    }
    out
}

/// Reads a NUL-ended string of at most `max` bytes at `src`, in the caller's memory or
/// (`kernel`) the kernel's: its length with the NUL, or a negative error.
#[inline(always)]
pub(crate) fn read_str(kernel: bool, dst: *mut u8, max: u32, src: u64) -> i64 {
    unsafe {
        if kernel {
            bpf_probe_read_kernel_str(dst.cast(), max, src as *const _)
        } else {
            bpf_probe_read_user_str(dst.cast(), max, src as *const _)
        }
    }
}

/// Bytes of a name looked at for a `/proc/self/fd/N/` prefix.
const FD_PREFIX_MAX: usize = 40;

/// `Some((N, bytes up to REST))` when the name is `PREFIX/N/REST` with a prefix naming the
/// caller's own descriptors and a non-empty `REST`.
#[inline(always)]
fn through_fd(name: u64, kernel: bool) -> Option<(u32, u64)> {
    let mut buf = [0u8; FD_PREFIX_MAX];
    let n = read_str(kernel, buf.as_mut_ptr(), FD_PREFIX_MAX as u32, name);
    if n <= 0 {
        return None;
    }
    let start = if starts_with(&buf, b"/proc/self/fd/") {
        14
    } else if starts_with(&buf, b"/dev/fd/") {
        8
    } else if starts_with(&buf, b"/proc/thread-self/fd/") {
        21
    } else {
        return None;
    };
    let mut fd: u32 = 0;
    let mut i = start;
    while i < start + 9 && i < FD_PREFIX_MAX - 1 {
        let c = buf[i];
        if c == b'/' {
            break;
        }
        if !c.is_ascii_digit() {
            return None;
        }
        fd = fd * 10 + (c - b'0') as u32;
        i += 1;
    }
    // Digits, then a slash, then at least one byte of a name.
    if i == start || buf[i] != b'/' || buf[i + 1] == 0 {
        return None;
    }
    Some((fd, i as u64 + 1))
}

#[inline(always)]
fn starts_with(buf: &[u8; FD_PREFIX_MAX], prefix: &[u8]) -> bool {
    let mut i = 0;
    while i < prefix.len() {
        if buf[i] != prefix[i] {
            return false;
        }
        i += 1;
    }
    true
}
