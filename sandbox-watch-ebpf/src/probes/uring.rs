//! File operations submitted through io_uring (issue 15 item 6).
//!
//! `tp_btf/io_uring_submit_req(struct io_kiocb *req)` (`io_uring_submit_sqe(req, …)` before
//! 6.2, the same program) fires in the submitting task (an SQPOLL thread is a thread of the same
//! process) once the request's prep has copied its names into the kernel (`getname`): the names
//! recorded are the kernel's, which no thread of the caller can change afterwards. RENAMEAT,
//! UNLINKAT, LINKAT and SYMLINKAT become the records their syscalls make (each name under its
//! directory descriptor, walked from the kernel's objects), flagged [`VIA_IO_URING`], and
//! MKDIRAT, SETXATTR and FSETXATTR the attribute records their syscalls make (the attribute's
//! name from the kernel's copy). Their result comes later, in the completion, and is not read:
//! the record is of the request.
//!
//! `tp_btf/io_uring_complete(ctx, req, …)` (the request is the second argument on every
//! kernel) runs where the kernel posts a request's result: in the submitter, an io-wq worker
//! or the SQPOLL thread, all threads of the submitting process sharing its descriptor table.
//! Where fentry on `security_file_open` is refused, an OPENAT or OPENAT2 that succeeded is the
//! open record a syscall's exit makes: the file is the one at the descriptor the completion
//! returns (or in the fixed-file slot it filled, on kernels whose slots are io_rsrc_nodes,
//! 6.13 and later), walked, flagged [`VIA_IO_URING`]. Not seen so: an open into a slot on an
//! older kernel, a failed one (its name is freed by then), one whose completion is never
//! posted (a `DEFER_TASKRUN` ring its owner never waits on), and, when another thread closes
//! the descriptor (or another request fills the slot) and opens another file there before the
//! completion, the file the request opened (the entry then names the other file).
use aya_ebpf::{macros::btf_tracepoint, programs::BtfTracePointContext};
use sandbox_watch_common::{EventKind, VIA_IO_URING};

use super::attr::{send_uring_mkdir, send_uring_xattr};
use super::files::{Names, report_open, send_link, send_path_op};
use crate::{current_task, current_tgid, is_traced, kernel::*};

// enum io_uring_op (include/uapi/linux/io_uring.h; equal in kernel.c).
const IORING_OP_OPENAT: u32 = 18;
const IORING_OP_OPENAT2: u32 = 28;
const IORING_OP_RENAMEAT: u32 = 35;
const IORING_OP_UNLINKAT: u32 = 36;
const IORING_OP_MKDIRAT: u32 = 37;
const IORING_OP_SYMLINKAT: u32 = 38;
const IORING_OP_LINKAT: u32 = 39;
const IORING_OP_FSETXATTR: u32 = 41;
const IORING_OP_SETXATTR: u32 = 42;

#[btf_tracepoint(function = "io_uring_submit_req")]
pub fn io_uring_submit_req(ctx: BtfTracePointContext) -> i32 {
    if !is_traced(current_tgid()) {
        return 0;
    }
    let req: Ptr = ctx.arg(0);
    let op = unsafe { sw_uring_opcode(req) };
    if op == IORING_OP_FSETXATTR || op == IORING_OP_SETXATTR {
        let mut a = [0u64; 3];
        unsafe { sw_uring_xattr(req, op, a.as_mut_ptr()) };
        send_uring_xattr(op == IORING_OP_FSETXATTR, a[0] as i64, a[1], a[2]);
        return 0;
    }
    if !matches!(
        op,
        IORING_OP_RENAMEAT
            | IORING_OP_UNLINKAT
            | IORING_OP_MKDIRAT
            | IORING_OP_SYMLINKAT
            | IORING_OP_LINKAT
    ) {
        return 0;
    }
    let mut a = [0u64; 4];
    unsafe { sw_uring_names(req, op, a.as_mut_ptr()) };
    let names = Names {
        dirfd: a[0] as i64,
        name: a[1],
        new_dirfd: a[2] as i64,
        new_name: a[3],
        kernel: true,
    };
    match op {
        IORING_OP_MKDIRAT => send_uring_mkdir(names.dirfd, names.name, a[2]),
        IORING_OP_RENAMEAT => send_path_op(EventKind::Rename, names, 0, VIA_IO_URING),
        IORING_OP_UNLINKAT => send_path_op(EventKind::Unlink, names, 0, VIA_IO_URING),
        _ => send_link(op == IORING_OP_SYMLINKAT, names, 0, VIA_IO_URING),
    }
    0
}

/// Opens through io_uring, at their completion (loaded only where fentry is refused).
#[btf_tracepoint(function = "io_uring_complete")]
pub fn io_uring_complete(ctx: BtfTracePointContext) -> i32 {
    if !is_traced(current_tgid()) {
        return 0;
    }
    let req: Ptr = ctx.arg(1);
    let op = unsafe { sw_uring_opcode(req) };
    if op != IORING_OP_OPENAT && op != IORING_OP_OPENAT2 {
        return 0;
    }
    let res = unsafe { sw_uring_res(req) };
    if res < 0 {
        return 0;
    }
    // Into the descriptor table (`res` is the descriptor), or into a fixed-file slot.
    let slot = unsafe { sw_uring_open_slot(req, res) };
    let file = if slot < 0 {
        unsafe { sw_task_fd_file(current_task(), res as u32) }
    } else {
        unsafe { sw_uring_slot_file(req, slot as u32) }
    };
    if !file.is_null() {
        report_open(file, VIA_IO_URING, || 0);
    }
    0
}
