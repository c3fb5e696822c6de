//! Output: what traced processes write to their stdout and stderr.
//!
//! - `sys_exit_write`, `sys_exit_pwrite64`: for a traced task, a write that wrote (`ret > 0`)
//!   to the program's stdout or stderr, as its exec gave them (the inodes at fd 1 and 2 then,
//!   `STREAMS`; compared with the file the fd names in the task's file table now, so a
//!   `dup(1)`, `/dev/stdout` opened again, or a shell's `printf x >&2` go where the bytes
//!   went) is sent in chunks of `OUTPUT_CHUNK` bytes, `ret` bytes in all (the
//!   count the kernel returned), up to `OUTPUT_CHUNKS` chunks; a chunk the ring cannot take,
//!   and every chunk past the limit, is counted in `DROPS[output]`.
//! - `sys_exit_writev`, `pwritev`, `pwritev2`: the same, one chunk per buffer for the first
//!   `OUTPUT_IOVECS` buffers (Node.js writes its stdout so); a longer buffer or more buffers
//!   end in a chunk flagged `OUTPUT_IOVECS_CUT`, and the stream's hash is then not made.
//! - `sendfile64`, `splice`, `copy_file_range`, `tee`, `vmsplice`: counted, not carried (a
//!   record with `ret` and `OUTPUT_NOT_CARRIED`), so the stream's byte count stays right and
//!   its hash is known to be incomplete.
//! - Not seen at all: io_uring writes, and writes by a process not traced (an untraced
//!   process given the traced one's pipe writes as itself).
//!
//! The arguments (fd, buffer) come from the registers the syscall saved at its entry, the
//! result from the tracepoint. The bytes are read from the caller's buffer after the kernel
//! copied them: another thread of the process can change the buffer in between, so what is
//! sent is what the buffer held at the exit, not necessarily what the kernel wrote. The count
//! (`ret`) is the kernel's own.
use aya_ebpf::{
    helpers::generated::bpf_probe_read_user, macros::map, maps::LruHashMap,
    programs::TracePointContext,
};
use sandbox_watch_common::{
    EventKind, OUTPUT_CHUNK, OUTPUT_CHUNKS, OUTPUT_CUT, OUTPUT_IOVECS, OUTPUT_IOVECS_CUT,
    OUTPUT_NOT_CARRIED, OUTPUT_READ_FAILED, OUTPUT_VIA_COPY_FILE_RANGE, OUTPUT_VIA_PWRITE64,
    OUTPUT_VIA_PWRITEV, OUTPUT_VIA_PWRITEV2, OUTPUT_VIA_SENDFILE, OUTPUT_VIA_SPLICE,
    OUTPUT_VIA_TEE, OUTPUT_VIA_VMSPLICE, OUTPUT_VIA_WRITE, OUTPUT_VIA_WRITEV, OutputEvent,
};

use super::syscall::{RET, syscall_programs};
use crate::{
    count_lost, current_task, current_tgid, header, is_traced, kernel::*, scratch, submit,
    submit_value,
};

const FIXED: usize = core::mem::size_of::<OutputEvent>();

/// A program's standard streams as its exec gave them: the inodes at fd 1 and 2.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Streams {
    start_ns: u64,
    out: u64,
    err: u64,
}

/// By tgid, set at each traced exec (an LRU: no exit hook needed; `start_ns` tells a reused
/// pid). A process with none (a fork's child before it execs, a process traced after its
/// exec) is judged by the fd number and the file table alone (`sw_task_std_stream`).
#[map]
static STREAMS: LruHashMap<u32, Streams> = LruHashMap::with_max_entries(65536, 0);

/// At a traced exec: the program's stdout and stderr.
#[inline(always)]
pub fn remember_streams(task: Ptr, tgid: u32, start_ns: u64) {
    let s = unsafe {
        Streams {
            start_ns,
            out: sw_task_fd_inode(task, 1) as u64,
            err: sw_task_fd_inode(task, 2) as u64,
        }
    };
    let _ = STREAMS.insert(tgid, s, 0);
}

syscall_programs! {
    sys_exit_write(ctx) => { carried(&ctx, OUTPUT_VIA_WRITE); 0 };
    sys_exit_pwrite64(ctx) => { carried(&ctx, OUTPUT_VIA_PWRITE64); 0 };
    sys_exit_writev(ctx) => { carried_iov(&ctx, OUTPUT_VIA_WRITEV); 0 };
    sys_exit_pwritev(ctx) => { carried_iov(&ctx, OUTPUT_VIA_PWRITEV); 0 };
    sys_exit_pwritev2(ctx) => { carried_iov(&ctx, OUTPUT_VIA_PWRITEV2); 0 };
    sys_exit_sendfile64(ctx) => { counted(&ctx, 0, OUTPUT_VIA_SENDFILE); 0 };
    sys_exit_splice(ctx) => { counted(&ctx, 2, OUTPUT_VIA_SPLICE); 0 };
    sys_exit_copy_file_range(ctx) => { counted(&ctx, 2, OUTPUT_VIA_COPY_FILE_RANGE); 0 };
    sys_exit_tee(ctx) => { counted(&ctx, 1, OUTPUT_VIA_TEE); 0 };
    sys_exit_vmsplice(ctx) => { counted(&ctx, 0, OUTPUT_VIA_VMSPLICE); 0 };
}

/// For a traced task's write that wrote to its stdout or stderr: the record's fixed part
/// (in this CPU's scratch), and the syscall's first four arguments.
#[inline(always)]
fn start(ctx: &TracePointContext, fd_arg: usize, via: u32) -> Option<(*mut u8, [u64; 4])> {
    let tgid = current_tgid();
    if !is_traced(tgid) {
        return None;
    }
    let ret = unsafe { ctx.read_at::<i64>(RET) }.unwrap_or(0);
    if ret <= 0 {
        return None;
    }
    let mut a = [0u64; 4];
    unsafe { sw_syscall_args(a.as_mut_ptr()) };
    let fd = a[fd_arg & 3] as u32;
    let task = current_task();
    let start_ns = unsafe { sw_task_start_ns(task) };
    let stream = match unsafe { STREAMS.get(tgid) } {
        Some(s) if s.start_ns == start_ns => unsafe {
            sw_task_stream_of(task, fd, s.out as Ptr, s.err as Ptr)
        },
        _ => unsafe { sw_task_std_stream(task, fd) },
    };
    if stream == 0 {
        return None;
    }
    let Some(base) = scratch() else {
        count_lost(EventKind::Output, 1);
        return None;
    };
    let ev = unsafe { &mut *base.cast::<OutputEvent>() };
    *ev = OutputEvent {
        header: header(EventKind::Output, tgid, start_ns),
        stream,
        fd,
        ret: ret as u64,
        via,
        ..Default::default()
    };
    Some((base, a))
}

/// write(fd, buf, count), pwrite64(fd, buf, count, pos): the bytes, in chunks.
#[inline(always)]
fn carried(ctx: &TracePointContext, via: u32) {
    let Some((base, args)) = start(ctx, 0, via) else {
        return;
    };
    let buf = args[1];
    let ev = unsafe { &mut *base.cast::<OutputEvent>() };
    let tail = unsafe { base.add(FIXED) };
    let total = ev.ret;
    for i in 0..OUTPUT_CHUNKS {
        let offset = (i * OUTPUT_CHUNK) as u64;
        if offset >= total {
            return;
        }
        let left = total - offset;
        let n = if left > OUTPUT_CHUNK as u64 {
            OUTPUT_CHUNK
        } else {
            left as usize
        };
        // Bounded for the verifier through memory (see `submit`): at most OUTPUT_CHUNK.
        let n = unsafe { core::ptr::read_volatile(&n) } & (2 * OUTPUT_CHUNK - 1);
        ev.offset = offset;
        ev.flags = if i == OUTPUT_CHUNKS - 1 && left > OUTPUT_CHUNK as u64 {
            OUTPUT_CUT
        } else {
            0
        };
        let read =
            unsafe { bpf_probe_read_user(tail.cast(), n as u32, (buf + offset) as *const _) };
        let len = if read < 0 {
            ev.flags |= OUTPUT_READ_FAILED;
            0
        } else {
            n
        };
        ev.len = len as u32;
        submit(EventKind::Output, base, FIXED + len);
    }
    let sent = (OUTPUT_CHUNKS * OUTPUT_CHUNK) as u64;
    if total > sent {
        // The chunks past the limit, as the ring's refusals are: lost.
        count_lost(
            EventKind::Output,
            (total - sent).div_ceil(OUTPUT_CHUNK as u64),
        );
    }
}

/// writev(fd, iov, iovcnt), pwritev(fd, iov, iovcnt, pos), pwritev2(…, flags): each of the
/// first `OUTPUT_IOVECS` buffers as one chunk. A longer buffer, or more buffers, end the
/// carrying with a chunk flagged `OUTPUT_IOVECS_CUT` (one chunk per buffer keeps the verifier's
/// work small: a buffer split into chunks made it give up). `ret` may end within a buffer.
#[inline(always)]
fn carried_iov(ctx: &TracePointContext, via: u32) {
    let Some((base, args)) = start(ctx, 0, via) else {
        return;
    };
    let (iov, iovcnt) = (args[1], args[2]);
    let ev = unsafe { &mut *base.cast::<OutputEvent>() };
    let tail = unsafe { base.add(FIXED) };
    let total = ev.ret;
    let mut offset = 0u64;
    for i in 0..OUTPUT_IOVECS as u64 {
        if offset >= total {
            return;
        }
        if i >= iovcnt {
            break;
        }
        // struct iovec { void *iov_base; size_t iov_len; }
        let mut v = [0u64; 2];
        if unsafe { bpf_probe_read_user(v.as_mut_ptr().cast(), 16, (iov + i * 16) as *const _) } < 0
        {
            break;
        }
        let mut n = total - offset;
        if n > v[1] {
            n = v[1];
        }
        ev.flags = 0;
        if n > OUTPUT_CHUNK as u64 {
            n = OUTPUT_CHUNK as u64;
            ev.flags = OUTPUT_IOVECS_CUT;
        }
        // Bounded for the verifier through memory (see `submit`): at most OUTPUT_CHUNK.
        let n = (unsafe { core::ptr::read_volatile(&n) } as usize) & (2 * OUTPUT_CHUNK - 1);
        ev.offset = offset;
        let read = unsafe { bpf_probe_read_user(tail.cast(), n as u32, v[0] as *const _) };
        let len = if read < 0 {
            ev.flags |= OUTPUT_READ_FAILED;
            0
        } else {
            n
        };
        ev.len = len as u32;
        submit(EventKind::Output, base, FIXED + len);
        if ev.flags & OUTPUT_IOVECS_CUT != 0 {
            return;
        }
        offset += n as u64;
    }
    if offset < total {
        // More buffers than are read: a chunk of no bytes says so.
        ev.offset = offset;
        ev.len = 0;
        ev.flags = OUTPUT_IOVECS_CUT;
        submit(EventKind::Output, base, FIXED);
    }
}

/// A write the probe does not carry: its count only.
#[inline(always)]
fn counted(ctx: &TracePointContext, fd_arg: usize, via: u32) {
    let Some((base, _)) = start(ctx, fd_arg, via) else {
        return;
    };
    let ev = unsafe { &mut *base.cast::<OutputEvent>() };
    ev.flags = OUTPUT_NOT_CARRIED;
    submit_value(EventKind::Output, ev);
}
