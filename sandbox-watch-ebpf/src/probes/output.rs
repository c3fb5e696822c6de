//! Output: what traced processes write to their stdout and stderr.
//!
//! - `sys_exit_write`, `sys_exit_pwrite64`: for a traced task, a write that wrote (`ret > 0`)
//!   to the program's stdout or stderr, as its exec gave them (the inodes at fd 1 and 2 then,
//!   `STREAMS`; compared with the file the fd names in the task's file table now, so a
//!   `dup(1)`, `/dev/stdout` opened again, or a shell's `printf x >&2` go where the bytes
//!   went) is sent in chunks of `OUTPUT_CHUNK` bytes, `ret` bytes in all (the
//!   count the kernel returned), up to `OUTPUT_CHUNKS` chunks, each read from the writer's
//!   buffer straight into room reserved in the ring (no copy through scratch); a chunk the ring
//!   cannot take, and every chunk past the limit, is counted in `DROPS[output]`.
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
use crate::{Reserved, count_lost, current_tgid, header, is_traced, kernel::*, submit_value};

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
/// exec) is judged by the fd number and the file table alone (`sw_current_std_stream`).
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

/// For a traced task's write that wrote to its stdout or stderr: the record's fixed part, and
/// the syscall's first four arguments.
#[inline(always)]
fn start(ctx: &TracePointContext, fd_arg: usize, via: u32) -> Option<(OutputEvent, [u64; 4])> {
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
    let start_ns = unsafe { sw_current_start_ns() };
    let stream = match unsafe { STREAMS.get(tgid) } {
        Some(s) if s.start_ns == start_ns => unsafe {
            sw_current_stream_of(fd, s.out as Ptr, s.err as Ptr)
        },
        _ => unsafe { sw_current_std_stream(fd) },
    };
    if stream == 0 {
        return None;
    }
    let ev = OutputEvent {
        header: header(EventKind::Output, tgid, start_ns),
        stream,
        fd,
        ret: ret as u64,
        via,
        ..Default::default()
    };
    Some((ev, a))
}

/// One chunk as the ring holds it: the record's fixed part, then room for `N` bytes of the
/// write (`len` says how many of them are).
#[repr(C)]
struct Chunk<const N: usize> {
    ev: OutputEvent,
    data: [u8; N],
}

/// Sends `ev` with `n` bytes (at most `OUTPUT_CHUNK`) read from the writer's memory at `src`
/// straight into the ring. The ring reserves only sizes the verifier knows, so a chunk takes
/// the smallest of three that holds it: a line, a page, a whole chunk.
#[inline(always)]
fn send_chunk(ev: &OutputEvent, src: u64, n: usize) {
    // A copy of the count the verifier does not link to the caller's (a masked value gets no
    // id of its own): the size chosen below must not narrow the caller's count, or each of the
    // three sizes makes a state of its own at every turn of writev's loop (3^8: the verifier
    // gave up at a million instructions).
    let n = unsafe { core::ptr::read_volatile(&n) } & (2 * OUTPUT_CHUNK - 1);
    if n <= 256 {
        send_in::<256>(ev, src, n)
    } else if n <= 4096 {
        send_in::<4096>(ev, src, n)
    } else {
        send_in::<OUTPUT_CHUNK>(ev, src, n)
    }
}

#[inline(always)]
fn send_in<const N: usize>(ev: &OutputEvent, src: u64, n: usize) {
    let Some(mut r) = Reserved::<Chunk<N>>::new(EventKind::Output) else {
        return;
    };
    let chunk = unsafe { &mut *r.as_mut_ptr() };
    chunk.ev = *ev;
    // Bounded for the verifier: through a volatile read LLVM cannot drop the check as known.
    let n = unsafe { core::ptr::read_volatile(&n) };
    let n = if n > N { N } else { n };
    let read =
        unsafe { bpf_probe_read_user(chunk.data.as_mut_ptr().cast(), n as u32, src as *const _) };
    if read < 0 {
        chunk.ev.flags |= OUTPUT_READ_FAILED;
        chunk.ev.len = 0;
    } else {
        chunk.ev.len = n as u32;
    }
    r.send();
}

/// write(fd, buf, count), pwrite64(fd, buf, count, pos): the bytes, in chunks.
#[inline(always)]
fn carried(ctx: &TracePointContext, via: u32) {
    let Some((mut ev, args)) = start(ctx, 0, via) else {
        return;
    };
    let buf = args[1];
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
        ev.offset = offset;
        ev.flags = if i == OUTPUT_CHUNKS - 1 && left > OUTPUT_CHUNK as u64 {
            OUTPUT_CUT
        } else {
            0
        };
        send_chunk(&ev, buf + offset, n);
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
    let Some((mut ev, args)) = start(ctx, 0, via) else {
        return;
    };
    let (iov, iovcnt) = (args[1], args[2]);
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
        ev.offset = offset;
        send_chunk(&ev, v[0], n as usize);
        if ev.flags & OUTPUT_IOVECS_CUT != 0 {
            return;
        }
        offset += n;
    }
    if offset < total {
        // More buffers than are read: a chunk of no bytes says so.
        ev.offset = offset;
        ev.len = 0;
        ev.flags = OUTPUT_IOVECS_CUT;
        submit_value(EventKind::Output, &mut ev);
    }
}

/// A write the probe does not carry: its count only.
#[inline(always)]
fn counted(ctx: &TracePointContext, fd_arg: usize, via: u32) {
    let Some((mut ev, _)) = start(ctx, fd_arg, via) else {
        return;
    };
    ev.flags = OUTPUT_NOT_CARRIED;
    submit_value(EventKind::Output, &mut ev);
}
