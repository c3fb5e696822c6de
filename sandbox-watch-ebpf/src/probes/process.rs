//! Process lifecycle, through raw tracepoints (their arguments are kernel pointers, so no
//! tracepoint record layout is assumed):
//! - `sched_process_fork(struct task_struct *parent, struct task_struct *child)`
//! - `sched_process_exec(struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)`
//! - `sched_process_exit(struct task_struct *p, ...)` (runs in the exiting task)
//!
//! Failed execs through the exits of the `execve` and `execveat` syscall tracepoints (a
//! successful exec is `sched_process_exec`'s).
use aya_ebpf::{
    helpers::generated::{
        bpf_get_current_cgroup_id, bpf_get_current_comm, bpf_get_current_pid_tgid,
        bpf_get_current_uid_gid, bpf_probe_read_kernel_str, bpf_probe_read_user,
        bpf_probe_read_user_str,
    },
    macros::raw_tracepoint,
    programs::{RawTracePointContext, TracePointContext},
};
use sandbox_watch_common::{
    ARGV_MAX, ARGV_TRUNCATED, CWD_TRUNCATED, EXEC_FAILED_ARGS, EXEC_FAILED_ARGV_MAX,
    EXEC_FAILED_EXECVE, EXEC_FAILED_EXECVEAT, EventKind, ExecEvent, ExecFailedEvent, ExitEvent,
    FILENAME_MAX, ForkEvent, PATH_MAX, PATH_TRUNCATED,
};

use super::files::{AT_FDCWD, PATH_MASK, dir_and_name};
use super::syscall::{RET, syscall_programs};
use crate::{current_task, current_tgid, header, is_traced, kernel::*, scratch, submit, trace};

#[raw_tracepoint(tracepoint = "sched_process_fork")]
pub fn sched_process_fork(ctx: RawTracePointContext) -> i32 {
    let parent_tgid = current_tgid();
    let child: Ptr = ctx.arg(1);
    super::tamper::thread_started(parent_tgid, child);
    if !is_traced(parent_tgid) {
        return 0;
    }
    let child_tgid = unsafe { sw_task_tgid(child) };
    if child_tgid == parent_tgid {
        return 0; // a new thread, not a new process
    }
    trace(child_tgid);
    let mut event = ForkEvent {
        header: header(EventKind::Fork, parent_tgid, unsafe {
            sw_task_start_ns(current_task())
        }),
        child_tgid,
        _pad: 0,
        child_start_ns: unsafe { sw_task_own_start_ns(child) },
    };
    crate::submit_value(EventKind::Fork, &mut event);
    0
}

#[raw_tracepoint(tracepoint = "sched_process_exec")]
pub fn sched_process_exec(ctx: RawTracePointContext) -> i32 {
    let tgid = current_tgid();
    if !is_traced(tgid) {
        return 0;
    }
    let _ = try_exec(&ctx, tgid);
    0
}

fn try_exec(ctx: &RawTracePointContext, tgid: u32) -> Option<()> {
    let task = current_task();
    let bprm: Ptr = ctx.arg(2);
    let base = scratch()?;
    let event = base.cast::<ExecEvent>();
    let uid_gid = unsafe { bpf_get_current_uid_gid() };
    unsafe {
        let e = &mut *event;
        e.header = header(EventKind::Exec, tgid, sw_task_start_ns(task));
        super::output::remember_streams(task, tgid, e.header.start_ns);
        e.ppid = sw_task_ppid(task);
        e.uid = uid_gid as u32;
        e.gid = (uid_gid >> 32) as u32;
        e.euid = sw_task_euid(task);
        e.cgroup_id = bpf_get_current_cgroup_id();
        e.netns = sw_task_netns(task);
        e.mntns = sw_task_mntns(task);
        e.pidns = sw_task_pidns(task);
        e.userns = sw_task_userns(task);
        e.flags = 0;
        bpf_get_current_comm(e.comm.as_mut_ptr().cast(), e.comm.len() as u32);
        let n = bpf_probe_read_kernel_str(
            e.filename.as_mut_ptr().cast(),
            FILENAME_MAX as u32,
            sw_bprm_filename(bprm).cast(),
        );
        e.filename_len = if n > 0 { n as u32 - 1 } else { 0 };
    }

    let tail = unsafe { base.add(core::mem::size_of::<ExecEvent>()) };
    let walked = unsafe { sw_task_cwd(task, tail) };
    let cwd_len = walked & !WALK_TRUNCATED & (2 * PATH_MAX as u32 - 1);
    let mut flags = if walked & WALK_TRUNCATED != 0 {
        CWD_TRUNCATED
    } else {
        0
    };

    let start = unsafe { sw_task_arg_start(task) };
    let end = unsafe { sw_task_arg_end(task) };
    let full = end.saturating_sub(start);
    let mut len = full;
    if len > ARGV_MAX as u64 {
        len = ARGV_MAX as u64;
        flags |= ARGV_TRUNCATED;
    }
    let argv = unsafe { tail.add(cwd_len as usize) };
    if unsafe { bpf_probe_read_user(argv.cast(), len as u32, start as *const _) } < 0 {
        len = 0;
    }
    unsafe {
        let e = &mut *event;
        e.flags = flags;
        e.cwd_len = cwd_len;
        e.argv_len = len as u32;
        e.argv_full_len = full.min(u32::MAX as u64) as u32;
    }
    let size = core::mem::size_of::<ExecEvent>() + cwd_len as usize + len as usize;
    submit(EventKind::Exec, base, size);
    Some(())
}

#[raw_tracepoint(tracepoint = "sched_process_exit")]
pub fn sched_process_exit(_ctx: RawTracePointContext) -> i32 {
    let tgid = current_tgid();
    super::tamper::thread_exited(tgid, unsafe { bpf_get_current_pid_tgid() } as u32);
    if !is_traced(tgid) {
        return 0;
    }
    let task = current_task();
    if unsafe { sw_task_live_threads(task) } != 0 {
        return 0; // other threads of the group still run
    }
    crate::untrace(tgid);
    let mut event = ExitEvent {
        header: header(EventKind::Exit, tgid, unsafe { sw_task_start_ns(task) }),
        exit_code: unsafe { sw_task_exit_code(task) },
        _pad: 0,
    };
    crate::submit_value(EventKind::Exit, &mut event);
    0
}

// ---- failed execs ----
//
// Only the exits: a successful exec returns 0 in the new program, a failed one returns -errno
// to its caller, whose arguments are still in the registers saved at the entry and whose
// memory is still its own. The path and argv are read from that memory: racy (another thread
// of the caller may have changed them after the kernel read them), and the record says so.

syscall_programs! {
    /// execve(filename, argv, envp)
    sys_exit_execve(ctx) => exit_exec(&ctx, EXEC_FAILED_EXECVE);
    /// execveat(dirfd, filename, argv, envp, flags)
    sys_exit_execveat(ctx) => exit_exec(&ctx, EXEC_FAILED_EXECVEAT);
}

#[inline(always)]
fn exit_exec(ctx: &TracePointContext, syscall: u32) -> u32 {
    let tgid = current_tgid();
    if !is_traced(tgid) {
        return 0;
    }
    let ret = unsafe { ctx.read_at::<i64>(RET) }.unwrap_or(0);
    if ret < 0 {
        let _ = report_exec_failed(tgid, syscall, ret as i32);
    }
    0
}

fn report_exec_failed(tgid: u32, syscall: u32, result: i32) -> Option<()> {
    let mut a = [0u64; 4];
    unsafe { sw_syscall_args(a.as_mut_ptr()) };
    let (dirfd, name, argv) = if syscall == EXEC_FAILED_EXECVEAT {
        (a[0] as i32 as i64, a[1], a[2])
    } else {
        (AT_FDCWD, a[0], a[1])
    };
    let base = scratch()?;
    let event = base.cast::<ExecFailedEvent>();
    let tail = unsafe { base.add(core::mem::size_of::<ExecFailedEvent>()) };
    let walked = dir_and_name(dirfd, name, tail);
    let path_len = walked & !WALK_TRUNCATED & PATH_MASK;
    let mut flags = if walked & WALK_TRUNCATED != 0 {
        PATH_TRUNCATED
    } else {
        0
    };
    // argv: each pointer, then its string, until the NULL that ends it.
    let args = unsafe { tail.add(path_len as usize) };
    let max = EXEC_FAILED_ARGV_MAX as u32;
    let mut len: u32 = 0;
    let mut ended = false;
    for i in 0..EXEC_FAILED_ARGS {
        let mut p: u64 = 0;
        let at = argv.wrapping_add(8 * i as u64);
        if unsafe { bpf_probe_read_user((&raw mut p).cast(), 8, at as *const _) } < 0 || p == 0 {
            ended = true;
            break;
        }
        let off = len & (max - 1);
        let room = max - off;
        let n =
            unsafe { bpf_probe_read_user_str(args.add(off as usize).cast(), room, p as *const _) };
        if n <= 0 {
            break; // unreadable: the rest is not known
        }
        len = off + n as u32;
        if n as u32 >= room {
            break; // cut
        }
    }
    if !ended {
        flags |= ARGV_TRUNCATED;
    }
    let argv_len = if len > max { max } else { len };
    unsafe {
        *event = ExecFailedEvent {
            header: header(
                EventKind::ExecFailed,
                tgid,
                sw_task_start_ns(current_task()),
            ),
            result,
            flags,
            syscall,
            path_len,
            argv_len,
            _pad: 0,
        };
    }
    let size = core::mem::size_of::<ExecFailedEvent>() + path_len as usize + argv_len as usize;
    submit(EventKind::ExecFailed, base, size);
    Some(())
}
