//! The agent acting on its monitor: records sent at the syscall's **entry**, before it takes
//! effect, and woken at once, so even "delete myself from TRACED" is in the ring first.
//!
//! - `sys_enter_bpf(cmd, attr, size)`: every bpf(2) call of a traced task, with the object it
//!   names (an fd resolved through `struct file` → `bpf_map`/`bpf_prog`/`bpf_link`, or an id)
//!   and whether that is one of the monitor's own (`OWN_IDS`); `sys_exit_bpf`: the descriptor
//!   `*_GET_FD_BY_ID`/`OBJ_GET` returned, when it is one of ours (a kernel object: no race).
//! - `sys_enter_ptrace`, `process_vm_readv/writev`, `pidfd_open`, `kill`, `tkill`, `tgkill`:
//!   a number that is one of the monitor's threads (`MON_TIDS`), when the caller lives in the
//!   monitor's pid namespace (elsewhere the same number is another task).
//! - `sys_enter_pidfd_getfd`, `pidfd_send_signal`: the target from the pidfd's own `struct pid`.
//! - `tp_btf/signal_generate(int sig, struct kernel_siginfo *, struct task_struct *task, int
//!   group, int result)`: every signal generated for the monitor in a traced task's context,
//!   whatever made it (kill of a process group, ptrace's stop, an i386 kill). Not a syscall
//!   tracepoint: it costs untraced tasks no slow syscall path.
//! - `sys_enter_init_module`, `sys_enter_finit_module`: every kernel module load by a traced
//!   task (a module can hide anything once it runs: the record is made before it loads).
//!   Kernels built without module support have no such tracepoints: a gap in `probe.gaps`.
//! - opens (from `files.rs`, both hooks): a procfs file of a monitor thread, or an inode in
//!   `OUTPUTS` (the log, the OCSF export, the summary, the signing key) whatever path reached it.
//!
//! `OWN_IDS`, `MON_TIDS` and `OUTPUTS` are written by the loader, then frozen: bpf(2) cannot
//! change them; the fork hook keeps adding the monitor's new threads.
use aya_ebpf::{
    helpers::generated::bpf_probe_read_user,
    macros::{btf_tracepoint, map},
    maps::HashMap,
    programs::{BtfTracePointContext, TracePointContext},
};
use sandbox_watch_common::{EventKind, FileKey, PATH_MAX, TamperEvent, fails, tamper};

use super::syscall::{RET, arg, syscall_programs};
use crate::{current_task, current_tgid, header, is_traced, kernel::*, scratch, submit_now};

/// The monitor's own maps, programs and links: key `(tamper::OBJ_* << 32) | id`.
#[map]
static OWN_IDS: HashMap<u64, u32> = HashMap::with_max_entries(256, 0);

/// The monitor's threads (ids as the initial pid namespace numbers them).
#[map]
static MON_TIDS: HashMap<u32, u32> = HashMap::with_max_entries(4096, 0);

/// The files the monitor writes (and its signing key), by inode.
#[map]
static OUTPUTS: HashMap<FileKey, u32> = HashMap::with_max_entries(64, 0);

/// Set by the loader: the monitor's thread group id, and the inode of its pid namespace.
#[unsafe(no_mangle)]
static MONITOR_TGID: u32 = 0;
#[unsafe(no_mangle)]
static MONITOR_PIDNS: u32 = 0;

const SIGCHLD: u64 = 17;

#[inline(always)]
fn monitor_tgid() -> u32 {
    unsafe { core::ptr::read_volatile(&MONITOR_TGID) }
}

/// A new thread of the monitor (its tokio and helper threads start after the loader seeded
/// the set): called from the fork hook for every new task.
#[inline(always)]
pub fn thread_started(parent_tgid: u32, child: Ptr) {
    if parent_tgid == monitor_tgid()
        && unsafe { sw_task_tgid(child) } == parent_tgid
        && MON_TIDS
            .insert(unsafe { sw_task_pid(child) }, 1, 0)
            .is_err()
    {
        crate::count_fail(fails::MON_TIDS);
    }
}

/// A monitor thread ended: its number may name another task later.
#[inline(always)]
pub fn thread_exited(tgid: u32, pid: u32) {
    if tgid == monitor_tgid() && pid != tgid {
        let _ = MON_TIDS.remove(pid);
    }
}

/// Whether the number a caller gave names a thread of the monitor: only in the monitor's pid
/// namespace do the caller's numbers mean the monitor's tasks.
#[inline(always)]
fn names_monitor(pid: u64) -> bool {
    if pid == 0 || pid > u32::MAX as u64 {
        return false;
    }
    let ns = unsafe { core::ptr::read_volatile(&MONITOR_PIDNS) };
    if unsafe { sw_task_own_pidns(current_task()) } != ns {
        return false;
    }
    unsafe { MON_TIDS.get(pid as u32) }.is_some()
}

#[inline(always)]
fn own(kind: u64, id: u64) -> bool {
    kind != 0 && unsafe { OWN_IDS.get((kind << 32) | (id & 0xffff_ffff)) }.is_some()
}

#[inline(always)]
fn event(kind: EventKind, call: u32) -> TamperEvent {
    TamperEvent {
        header: header(kind, current_tgid(), unsafe {
            sw_task_start_ns(current_task())
        }),
        call,
        ..Default::default()
    }
}

#[inline(always)]
fn send(kind: EventKind, mut ev: TamperEvent) {
    submit_now(
        kind,
        (&raw mut ev).cast(),
        core::mem::size_of::<TamperEvent>(),
    );
}

// ---- bpf(2) ----

/// Commands whose `attr` starts with a map's descriptor (`map_fd`).
const MAP_FD_FIRST: u64 = (1 << 1) | (1 << 2) | (1 << 3) | (1 << 4) | (1 << 21) | (1 << 22);
/// The batch map commands: `map_fd` at byte 36 of `attr`.
const MAP_FD_BATCH: u64 = (1 << 24) | (1 << 25) | (1 << 26) | (1 << 27);
/// Commands whose `attr` starts with a program's or link's descriptor, or any BPF object's:
/// PROG_TEST_RUN, OBJ_GET_INFO_BY_FD, LINK_UPDATE, ITER_CREATE, LINK_DETACH, PROG_BIND_MAP.
const OBJ_FD_FIRST: u64 = (1 << 10) | (1 << 15) | (1 << 29) | (1 << 33) | (1 << 34) | (1 << 35);
const PROG_GET_FD_BY_ID: u64 = 13;
const MAP_GET_FD_BY_ID: u64 = 14;
const LINK_GET_FD_BY_ID: u64 = 30;
const OBJ_GET: u64 = 7;

#[inline(always)]
fn fd_object(ev: &mut TamperEvent, fd: u32) {
    let mut id = 0u32;
    let kind = unsafe { sw_fd_bpf_object(current_task(), fd, &mut id) } as u64;
    ev.detail = kind;
    ev.target = id as u64;
    ev.monitor = own(kind, id as u64) as u32;
}

syscall_programs! {
    sys_enter_bpf(ctx) => { enter_bpf(&ctx); 0 };
    sys_exit_bpf(ctx) => { exit_bpf(&ctx); 0 };
    sys_enter_ptrace(ctx) => { aimed(EventKind::TraceAccess, tamper::PTRACE, arg(&ctx, 1), arg(&ctx, 0)); 0 };
    sys_enter_process_vm_readv(ctx) => { aimed(EventKind::TraceAccess, tamper::PROCESS_VM_READV, arg(&ctx, 0), 0); 0 };
    sys_enter_process_vm_writev(ctx) => { aimed(EventKind::TraceAccess, tamper::PROCESS_VM_WRITEV, arg(&ctx, 0), 0); 0 };
    sys_enter_pidfd_open(ctx) => { aimed(EventKind::Pidfd, tamper::PIDFD_OPEN, arg(&ctx, 0), 0); 0 };
    sys_enter_kill(ctx) => { aimed(EventKind::Signal, tamper::KILL, arg(&ctx, 0), arg(&ctx, 1)); 0 };
    sys_enter_tkill(ctx) => { aimed(EventKind::Signal, tamper::TKILL, arg(&ctx, 0), arg(&ctx, 1)); 0 };
    sys_enter_tgkill(ctx) => { aimed(EventKind::Signal, tamper::TGKILL, arg(&ctx, 1), arg(&ctx, 2)); 0 };
    sys_enter_pidfd_getfd(ctx) => { by_pidfd(&ctx, EventKind::Pidfd, tamper::PIDFD_GETFD); 0 };
    sys_enter_pidfd_send_signal(ctx) => { by_pidfd(&ctx, EventKind::Signal, tamper::PIDFD_SEND_SIGNAL); 0 };
    sys_enter_init_module(ctx) => { module(tamper::INIT_MODULE, 0, arg(&ctx, 1), 0); 0 };
    sys_enter_finit_module(ctx) => { module(tamper::FINIT_MODULE, arg(&ctx, 0), 0, arg(&ctx, 2)); 0 };
}

// ---- init_module, finit_module ----

/// A kernel module load by a traced task, whatever the module (it fails without
/// CAP_SYS_MODULE, `run --protect`; the attempt is on record either way).
#[inline(always)]
fn module(call: u32, fd: u64, len: u64, flags: u64) {
    if !is_traced(current_tgid()) {
        return;
    }
    let mut ev = event(EventKind::Module, call);
    ev.detail = fd;
    ev.target = len;
    ev.code = flags;
    send(EventKind::Module, ev);
}

#[inline(always)]
fn enter_bpf(ctx: &TracePointContext) {
    if !is_traced(current_tgid()) {
        return;
    }
    let (cmd, uattr) = (arg(ctx, 0), arg(ctx, 1));
    let mut ev = event(EventKind::Bpf, tamper::BPF);
    ev.code = cmd;
    let mut head = [0u32; 10];
    unsafe { bpf_probe_read_user(head.as_mut_ptr().cast(), 40, uattr as *const _) };
    ev.attr = [
        head[0] as u64 | (head[1] as u64) << 32,
        head[2] as u64 | (head[3] as u64) << 32,
    ];
    if cmd < 64 {
        let bit = 1u64 << cmd;
        if bit & MAP_FD_FIRST != 0 || bit & OBJ_FD_FIRST != 0 {
            fd_object(&mut ev, head[0]);
        } else if bit & MAP_FD_BATCH != 0 {
            fd_object(&mut ev, head[9]);
        } else {
            let kind = match cmd {
                MAP_GET_FD_BY_ID => tamper::OBJ_MAP,
                PROG_GET_FD_BY_ID => tamper::OBJ_PROG,
                LINK_GET_FD_BY_ID => tamper::OBJ_LINK,
                _ => 0,
            };
            if kind != 0 {
                ev.detail = kind;
                ev.target = head[0] as u64;
                ev.monitor = own(kind, head[0] as u64) as u32;
            }
        }
    }
    send(EventKind::Bpf, ev);
}

/// A descriptor bpf(2) handed out: one of ours? (The id the caller asked for is user memory
/// and could be swapped during the call; the returned descriptor's object is the kernel's.)
#[inline(always)]
fn exit_bpf(ctx: &TracePointContext) {
    if !is_traced(current_tgid()) {
        return;
    }
    let fd = unsafe { ctx.read_at::<i64>(RET) }.unwrap_or(-1);
    if fd < 0 {
        return;
    }
    let mut a = [0u64; 4];
    unsafe { sw_syscall_args(a.as_mut_ptr()) };
    let cmd = a[0];
    if !matches!(
        cmd,
        MAP_GET_FD_BY_ID | PROG_GET_FD_BY_ID | LINK_GET_FD_BY_ID | OBJ_GET
    ) {
        return;
    }
    let mut ev = event(EventKind::BpfFd, tamper::BPF_FD);
    ev.code = cmd;
    ev.result = fd as i32;
    fd_object(&mut ev, fd as u32);
    if ev.monitor != 0 {
        send(EventKind::BpfFd, ev);
    }
}

// ---- ptrace, process_vm_*, pidfd_open, kill: a number ----

/// A syscall that names a process by number: recorded when it names the monitor.
#[inline(always)]
fn aimed(kind: EventKind, call: u32, pid: u64, code: u64) {
    if !is_traced(current_tgid()) || !names_monitor(pid) {
        return;
    }
    let mut ev = event(kind, call);
    ev.monitor = 1;
    ev.target = pid;
    ev.code = code;
    send(kind, ev);
}

// ---- pidfd_getfd, pidfd_send_signal: a pidfd ----

/// pidfd_getfd(pidfd, targetfd, flags), pidfd_send_signal(pidfd, sig, info, flags): the target
/// is the pidfd's own `struct pid`, whatever namespace the caller is in.
#[inline(always)]
fn by_pidfd(ctx: &TracePointContext, kind: EventKind, call: u32) {
    if !is_traced(current_tgid()) {
        return;
    }
    let pid = unsafe { sw_fd_pidfd_pid(current_task(), arg(ctx, 0) as u32) };
    if pid == 0 || unsafe { MON_TIDS.get(pid) }.is_none() {
        return;
    }
    let mut ev = event(kind, call);
    ev.monitor = 1;
    ev.target = pid as u64;
    if call == tamper::PIDFD_GETFD {
        ev.detail = arg(ctx, 1);
    } else {
        ev.code = arg(ctx, 1);
    }
    send(kind, ev);
}

// ---- signals ----

/// Every signal the kernel generates for the monitor in a traced task's context. SIGCHLD is
/// the kernel telling the monitor a child ended (the agent's own exit in `run`): not sent.
#[btf_tracepoint(function = "signal_generate")]
pub fn signal_generate(ctx: BtfTracePointContext) -> i32 {
    let target: Ptr = ctx.arg(2);
    let target_tgid = unsafe { sw_task_tgid(target) };
    if target_tgid != monitor_tgid() || !is_traced(current_tgid()) {
        return 0;
    }
    let sig: u64 = ctx.arg(0);
    if sig == SIGCHLD {
        return 0;
    }
    let result: u64 = ctx.arg(4);
    let mut ev = event(EventKind::Signal, tamper::SIGNAL_GENERATE);
    ev.monitor = 1;
    ev.code = sig;
    ev.target = target_tgid as u64;
    ev.detail = unsafe { sw_task_pid(target) } as u64;
    ev.result = result as i32;
    send(EventKind::Signal, ev);
    0
}

// ---- opens of the monitor's files ----

/// Called by the open hooks for every open of a traced task (before any read is folded):
/// sends a MonitorFile record when the file is a procfs entry of a monitor thread, or one of
/// the monitor's outputs.
#[inline(always)]
pub fn monitor_file(file: Ptr, f_mode: u32, dev: u32, ino: u64) {
    let magic = unsafe { sw_file_magic(file) };
    let mut what = 0;
    let mut pid = 0u32;
    if magic == PROC_SUPER_MAGIC {
        pid = unsafe { sw_file_proc_pid(file) };
        if pid != 0 && unsafe { MON_TIDS.get(pid) }.is_some() {
            what = tamper::FILE_PROC;
        }
    }
    if what == 0 {
        let key = FileKey { dev, _pad: 0, ino };
        if unsafe { OUTPUTS.get(key) }.is_none() {
            return;
        }
        what = tamper::FILE_OUTPUT;
    }
    let Some(base) = scratch() else { return };
    let ev = base.cast::<TamperEvent>();
    let tail = unsafe { base.add(core::mem::size_of::<TamperEvent>()) };
    let walked = unsafe { sw_file_path(file, tail) };
    let path_len = walked & !WALK_TRUNCATED & (2 * PATH_MAX as u32 - 1);
    unsafe {
        *ev = event(EventKind::MonitorFile, tamper::OPEN);
        let e = &mut *ev;
        e.monitor = 1;
        e.code = f_mode as u64;
        e.target = pid as u64;
        e.detail = what;
        e.dev = dev;
        e.ino = ino;
        e.magic = magic;
        e.path_len = path_len;
        e.flags = if walked & WALK_TRUNCATED != 0 {
            sandbox_watch_common::PATH_TRUNCATED
        } else {
            0
        };
    }
    submit_now(
        EventKind::MonitorFile,
        base,
        core::mem::size_of::<TamperEvent>() + path_len as usize,
    );
}
