//! What the syscall tracepoints share.
//!
//! Syscall tracepoint records are `struct syscall_trace_enter { struct trace_entry ent; int nr;
//! unsigned long args[6]; }` and `struct syscall_trace_exit { ...; int nr; long ret; }`: the
//! arguments and the result start at byte 16 on every kernel since 2.6.33.
use aya_ebpf::{
    helpers::generated::bpf_get_current_pid_tgid, macros::map, maps::HashMap,
    programs::TracePointContext,
};

use crate::{current_tgid, is_traced};

pub const ARG0: usize = 16;
pub const RET: usize = 16;

#[inline(always)]
pub fn arg(ctx: &TracePointContext, n: usize) -> u64 {
    unsafe { ctx.read_at::<u64>(ARG0 + 8 * n) }.unwrap_or(0)
}

/// Arguments of a syscall in flight, from its enter to its exit, by pid_tgid.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Pending {
    pub dirfd: i64,
    pub name: u64,
    pub new_dirfd: i64,
    pub new_name: u64,
    pub flags: u32,
    pub _pad: u32,
}

#[map]
static PENDING: HashMap<u64, Pending> = HashMap::with_max_entries(16384, 0);

/// Keeps a traced task's syscall arguments for its exit.
#[inline(always)]
pub fn remember(dirfd: i64, name: u64, new_dirfd: i64, new_name: u64, flags: u32) {
    if !is_traced(current_tgid()) {
        return;
    }
    let pending = Pending {
        dirfd,
        name,
        new_dirfd,
        new_name,
        flags,
        _pad: 0,
    };
    let _ = PENDING.insert(unsafe { bpf_get_current_pid_tgid() }, pending, 0);
}

/// The arguments kept at this task's syscall enter, if it is traced.
#[inline(always)]
pub fn take() -> Option<Pending> {
    let key = unsafe { bpf_get_current_pid_tgid() };
    let pending = unsafe { PENDING.get(key) }.copied();
    if pending.is_some() {
        let _ = PENDING.remove(key);
    }
    pending
}

/// Syscall tracepoint programs, one line each: `sys_exit_unlink(ctx) => body;`. A program is
/// named after its tracepoint (`syscalls/<name>`): the loader's table attaches it by that
/// name, and the test in `kernel/probe.rs` checks that the table and the object agree.
macro_rules! syscall_programs {
    ($($(#[$doc:meta])* $name:ident($ctx:ident) => $body:expr;)+) => {
        $(
            $(#[$doc])*
            #[aya_ebpf::macros::tracepoint]
            pub fn $name($ctx: aya_ebpf::programs::TracePointContext) -> u32 {
                $body
            }
        )+
    };
}
pub(crate) use syscall_programs;
