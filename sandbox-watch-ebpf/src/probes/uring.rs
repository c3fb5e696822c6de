//! io_uring file requests, named from the kernel's own copies of their paths.
//!
//! Each file opcode's prep copies its path arguments into `struct filename`s kept in the
//! request's command area (`struct io_rename`, `io_link`, `io_unlink`, `io_mkdir`, `io_open`,
//! `io_xattr`, all in vmlinux BTF on 6.1 and 6.18) before the submit tracepoint, and frees
//! them when the request has run. So the names are read at submission, in the submitter's
//! context (classic tracepoints, the same record on 6.1's `io_uring_submit_sqe` and 6.4+'s
//! `io_uring_submit_req`: the request at byte 16, the opcode at 32) and sent with the result
//! at `io_uring_complete` (the request at 16, the result at 32 on both; its tp_btf prototype
//! differs between them). No thread of the caller can change a name after the prep copied it.
//!
//! At the completion, relative names get their directory walked from the kernel (the dirfd's
//! file, or the cwd: io_uring's workers share the process's files and fs), an open's file is
//! walked from the fd table, and where fentry runs the `security_path_*` hooks (in the
//! worker) leave the inodes' identity.
use aya_ebpf::{
    helpers::generated::bpf_probe_read_kernel,
    macros::{map, tracepoint},
    maps::{LruHashMap, PerCpuArray},
    programs::TracePointContext,
};
use sandbox_watch_common::{EventKind, PATH_MAX, URING_NAME_MAX, UringEvent, uring_op};

use super::inodes::identity_of;
use super::kpaths;
use crate::{current_task, current_tgid, header, is_traced, kernel::*, opaque, scratch, submit};

const AT_FDCWD: i32 = -100;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct Pending {
    pub opcode: u32,
    pub _pad: u32,
    pub req: UringReq,
    pub names: [u8; 2 * URING_NAME_MAX],
}

/// Requests submitted and not completed yet, by `struct io_kiocb *`. LRU: a ring torn down
/// without completions leaves entries behind.
#[map]
static URING: LruHashMap<u64, Pending> = LruHashMap::with_max_entries(4096, 0);

#[map]
static URING_SCRATCH: PerCpuArray<Pending> = PerCpuArray::with_max_entries(1, 0);

#[inline(always)]
fn on_submit(ctx: &TracePointContext) -> u32 {
    if !is_traced(current_tgid()) {
        return 0;
    }
    let req = unsafe { ctx.read_at::<u64>(16) }.unwrap_or(0);
    let opcode = unsafe { ctx.read_at::<u8>(32) }.unwrap_or(0) as u32;
    let Some(ptr) = URING_SCRATCH.get_ptr_mut(0) else {
        return 0;
    };
    let p = unsafe { &mut *ptr };
    p.opcode = opcode;
    if unsafe { sw_uring_names(req as Ptr, opcode, &mut p.req, p.names.as_mut_ptr()) } == 0 {
        return 0;
    }
    // By reference: the value is larger than a copy on the BPF stack allows.
    let _ = URING.insert(&req, unsafe { &*ptr }, 0);
    0
}

#[tracepoint(category = "io_uring", name = "io_uring_submit_req")]
pub fn io_uring_submit_req(ctx: TracePointContext) -> u32 {
    on_submit(&ctx)
}

#[tracepoint(category = "io_uring", name = "io_uring_submit_sqe")]
pub fn io_uring_submit_sqe(ctx: TracePointContext) -> u32 {
    on_submit(&ctx)
}

/// The directory a relative name starts from, walked into `dst` (nothing for an absolute
/// name or none).
#[inline(always)]
fn dir_of(dfd: i32, name: *const u8, len: u32, dst: *mut u8) -> u32 {
    if len == 0 || unsafe { *name } == b'/' {
        return 0;
    }
    let task = current_task();
    let walked = if dfd == AT_FDCWD {
        unsafe { sw_task_cwd(task, dst) }
    } else {
        let file = unsafe { sw_task_fd_file(task, dfd as u32) };
        if file.is_null() {
            return 0;
        }
        unsafe { sw_file_path(file, dst) }
    };
    walked & !WALK_TRUNCATED & (2 * PATH_MAX as u32 - 1)
}

#[tracepoint(category = "io_uring", name = "io_uring_complete")]
pub fn io_uring_complete(ctx: TracePointContext) -> u32 {
    let tgid = current_tgid();
    if !is_traced(tgid) {
        return 0;
    }
    let req = unsafe { ctx.read_at::<u64>(16) }.unwrap_or(0);
    let result = unsafe { ctx.read_at::<i32>(32) }.unwrap_or(0);
    let Some(p) = (unsafe { URING.get(&req) }) else {
        return 0;
    };
    let Some(base) = scratch() else { return 0 };
    let event = base.cast::<UringEvent>();
    let tail = unsafe { base.add(core::mem::size_of::<UringEvent>()) };
    // One helper call, not a byte loop (a loop of 512 copies and the walks below are past
    // 6.1's verifier budget together).
    unsafe { bpf_probe_read_kernel(tail.cast(), 512, p.names.as_ptr().cast()) };
    let opcode = p.opcode;
    let r = p.req;
    let _ = URING.remove(&req);
    let task = current_task();
    let mut e = UringEvent {
        header: header(EventKind::Uring, tgid, unsafe { sw_task_start_ns(task) }),
        opcode,
        result,
        dfd: r.dfd,
        dfd2: r.dfd2,
        flags: r.flags,
        slot: r.slot,
        len_a: r.len_a,
        len_b: r.len_b,
        ..Default::default()
    };
    let names = tail as *const u8;
    let after = unsafe { tail.add(2 * URING_NAME_MAX) };
    let opens = opcode == uring_op::OPENAT || opcode == uring_op::OPENAT2;
    if opens && result >= 0 && r.slot == 0 {
        // An open into the process's fd table: the file itself.
        let file = unsafe { sw_task_fd_file(task, result as u32) };
        if !file.is_null() {
            let walked = unsafe { sw_file_path(file, after) };
            e.path_len = walked & !WALK_TRUNCATED & (2 * PATH_MAX as u32 - 1);
            let inode = unsafe { sw_file_inode(file) };
            e.dev = unsafe { sw_inode_dev(inode) };
            e.ino = unsafe { sw_inode_ino(inode) };
            e.generation = unsafe { sw_inode_generation(inode) };
            e.identity = identity_of(e.dev, e.generation, e.ino);
            e.magic = unsafe { sw_file_magic(file) };
            e.f_mode = unsafe { sw_file_mode(file) };
        }
        unsafe { *event = e };
        let size = core::mem::size_of::<UringEvent>() + 512 + e.path_len as usize;
        submit(EventKind::Uring, base, size);
        return 0;
    }
    // Named operations: the kernel's inodes (fentry), then the directories of relative names.
    let tag = match opcode {
        uring_op::RENAMEAT => kpaths::TAG_RENAME,
        uring_op::UNLINKAT => kpaths::TAG_UNLINK,
        uring_op::LINKAT => kpaths::TAG_LINK,
        _ => 0,
    };
    if tag != 0
        && let Some(k) = kpaths::take(tag)
    {
        e.identity = k.identity | k.identity_b;
        e.dev = k.dev;
        e.ino = k.ino;
        e.generation = k.generation;
    }
    // A symbolic link's target is kept as given; an xattr's second name is the attribute's.
    // One state for every opcode from here (see `opaque`).
    let walk_a = opaque((opcode != uring_op::SYMLINKAT) as u64);
    let walk_b = opaque((opcode != uring_op::SETXATTR && opcode != uring_op::FSETXATTR) as u64);
    let (dfd, dfd2) = (opaque(r.dfd as u64) as i32, opaque(r.dfd2 as u64) as i32);
    if walk_a != 0 {
        e.dir_a_len = dir_of(dfd, names, r.len_a, after);
    }
    if walk_b != 0 {
        let second = unsafe { after.add(e.dir_a_len as usize) };
        e.dir_b_len = dir_of(dfd2, unsafe { names.add(URING_NAME_MAX) }, r.len_b, second);
    }
    unsafe { *event = e };
    let size = core::mem::size_of::<UringEvent>()
        + 512
        + e.dir_a_len as usize
        + e.dir_b_len as usize;
    submit(EventKind::Uring, base, size);
    0
}
