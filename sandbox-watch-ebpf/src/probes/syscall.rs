//! What the syscall tracepoints share.
//!
//! Syscall tracepoint records are `struct syscall_trace_enter { struct trace_entry ent; int nr;
//! unsigned long args[6]; }` and `struct syscall_trace_exit { ...; int nr; long ret; }`: the
//! arguments and the result start at byte 16 on every kernel since 2.6.33.
use aya_ebpf::{EbpfContext, programs::TracePointContext};

pub const ARG0: usize = 16;
pub const RET: usize = 16;

/// Argument `n` (0-5) of a `sys_enter_*` record, read straight from the record: a tracepoint
/// program may load from its context, which costs a fraction of `read_at`'s helper call
/// (that shows in a storm of sends, where this runs five times per call).
#[inline(always)]
pub fn arg(ctx: &TracePointContext, n: usize) -> u64 {
    if n > 5 {
        return 0;
    }
    unsafe { core::ptr::read(ctx.as_ptr().cast::<u8>().add(ARG0 + 8 * n).cast::<u64>()) }
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
