//! Files known by their inode, and writes seen where the kernel dirties the inode.
//!
//! - `IDENTITY`: (dev, generation, ino) → `ID_*` flags of the credential and persistence files
//!   (and directories) that existed at start. The monitor fills it by opening each itself
//!   while its own tgid is traced: `report_open` then puts the key, read exactly as it reads
//!   the agent's opens, in `REGISTER` under the opening thread instead of sending a record. No
//!   userspace `st_dev` translation is involved (btrfs and overlayfs report other numbers).
//!   The open, dirty, rename, unlink and link hooks look inodes up here (traced tasks only), so
//!   a hard link, a bind mount, `open_tree`, `pivot_root` or `open_by_handle_at` to a key is
//!   still the key.
//! - `raw_tracepoint/writeback_mark_inode_dirty(struct inode *inode, int flags)`: fires in the
//!   task that dirties the inode (`write`, `pwrite`, a page fault on a shared mapping, an
//!   io_uring worker of the process, truncate, fallocate, O_DIRECT), again for every newly
//!   dirtied folio and every timestamp change: the first data dirtying per (process, inode) is
//!   sent, the rest stop in `WRITTEN`. Writeback itself runs in kworkers (untraced).
use aya_ebpf::{
    helpers::generated::bpf_get_current_pid_tgid,
    macros::{map, raw_tracepoint},
    maps::{HashMap, LruHashMap},
    programs::RawTracePointContext,
};
use sandbox_watch_common::{
    DIRTY_IO_WORKER, DIRTY_NO_NAME, DIRTY_OPENED, DIRTY_PAGES, DIRTY_PATH_TRUNCATED, DIRTY_UNLINKED, DirtyEvent,
    EventKind, InodeKey, PATH_MAX,
};

use crate::{current_task, current_tgid, header, is_traced, kernel::*, scratch, submit};

#[map]
pub static IDENTITY: HashMap<InodeKey, u32> = HashMap::with_max_entries(65536, 0);

/// The inode of the monitor's last open, by thread id (registration; see the module doc).
#[map]
pub static REGISTER: HashMap<u32, InodeKey> = HashMap::with_max_entries(64, 0);

/// Set by the loader: the monitor's own tgid.
#[unsafe(no_mangle)]
static MONITOR_TGID: u32 = 0;

/// (process, inode) already known written: `DIRTY_OPENED` when the process opened it for
/// write in the capture, `SENT` once its dirtying was sent. LRU: an evicted entry costs a
/// second record, never a lost one.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct WrittenKey {
    pub tgid: u32,
    pub dev: u32,
    pub start_ns: u64,
    pub ino: u64,
    pub generation: u32,
    pub _pad: u32,
}

#[map]
static WRITTEN: LruHashMap<WrittenKey, u32> = LruHashMap::with_max_entries(65536, 0);

const SENT: u32 = 1 << 1;
const S_IFMT: u32 = 0o170000;
const S_IFREG: u32 = 0o100000;

#[inline(always)]
pub fn identity_of(dev: u32, generation: u32, ino: u64) -> u32 {
    let key = InodeKey {
        dev,
        generation,
        ino,
    };
    unsafe { IDENTITY.get(&key) }.copied().unwrap_or(0)
}

#[inline(always)]
pub fn identity_of_inode(inode: Ptr) -> u32 {
    unsafe {
        identity_of(
            sw_inode_dev(inode),
            sw_inode_generation(inode),
            sw_inode_ino(inode),
        )
    }
}

/// Whether this open is the monitor registering an inode: then it is kept, not sent.
#[inline(always)]
pub fn registered(tgid: u32, key: &InodeKey) -> bool {
    let monitor = unsafe { core::ptr::read_volatile(&MONITOR_TGID) };
    if monitor == 0 || tgid != monitor {
        return false;
    }
    let tid = unsafe { bpf_get_current_pid_tgid() } as u32;
    let _ = REGISTER.insert(tid, key, 0);
    true
}

/// Called by the open hooks for a traced task's open for write.
#[inline(always)]
pub fn opened_for_write(tgid: u32, start_ns: u64, key: &InodeKey) {
    let key = WrittenKey {
        tgid,
        dev: key.dev,
        start_ns,
        ino: key.ino,
        generation: key.generation,
        _pad: 0,
    };
    match WRITTEN.get_ptr_mut(&key) {
        Some(v) => unsafe { *v |= DIRTY_OPENED },
        None => {
            let _ = WRITTEN.insert(&key, &DIRTY_OPENED, 0);
        }
    }
}

/// System calls (x86_64 numbers) whose inode dirtying is not a data write: opens (their own
/// record covers O_TRUNC and O_TMPFILE), reads (atime), and the metadata and name operations
/// that have records of their own.
#[inline(always)]
fn not_a_write(syscall: i64) -> bool {
    matches!(
        syscall,
        // open, creat, openat, openat2
        2 | 85 | 257 | 437
        // read, pread64, readv, mmap, execve, readahead, preadv, execveat, preadv2
        | 0 | 17 | 19 | 9 | 59 | 187 | 295 | 322 | 327
        // chmod, fchmod, chown, fchown, lchown, fchmodat, fchownat, fchmodat2
        | 90 | 91 | 92 | 93 | 94 | 268 | 260 | 452
        // utime, utimes, futimesat, utimensat
        | 132 | 235 | 261 | 280
        // setxattr, lsetxattr, fsetxattr, removexattr, lremovexattr, fremovexattr,
        // setxattrat, removexattrat, file_setattr
        | 188 | 189 | 190 | 197 | 198 | 199 | 463 | 466 | 469
        // rename, mkdir, rmdir, link, unlink, symlink, mknod, mkdirat, mknodat, unlinkat,
        // renameat, linkat, symlinkat, renameat2
        | 82 | 83 | 84 | 86 | 87 | 88 | 133 | 258 | 259 | 263 | 264 | 265 | 266 | 316
    )
}

#[raw_tracepoint(tracepoint = "writeback_mark_inode_dirty")]
pub fn writeback_mark_inode_dirty(ctx: RawTracePointContext) -> i32 {
    let tgid = current_tgid();
    if !is_traced(tgid) {
        return 0;
    }
    let inode: Ptr = ctx.arg(0);
    let flags: u64 = ctx.arg(1);
    let flags = flags as u32;
    if unsafe { sw_inode_mode(inode) } & S_IFMT != S_IFREG {
        return 0;
    }
    let syscall = unsafe { sw_current_syscall() };
    if not_a_write(syscall) {
        return 0;
    }
    let pages = flags & unsafe { sw_i_dirty_pages() } != 0;
    // Without I_DIRTY_PAGES (tmpfs and others without dirty-page accounting, or a timestamp
    // only) it is a write when mtime moved (a write's file_update_time); an atime update
    // leaves mtime behind atime.
    if !pages {
        if flags & unsafe { sw_i_dirty_inode() } == 0 {
            return 0;
        }
        if unsafe { sw_inode_mtime_ns(inode) } < unsafe { sw_inode_atime_ns(inode) } {
            return 0;
        }
    }
    let task = current_task();
    let start_ns = unsafe { sw_task_start_ns(task) };
    let dev = unsafe { sw_inode_dev(inode) };
    let ino = unsafe { sw_inode_ino(inode) };
    let generation = unsafe { sw_inode_generation(inode) };
    let key = WrittenKey {
        tgid,
        dev,
        start_ns,
        ino,
        generation,
        _pad: 0,
    };
    let known = match WRITTEN.get_ptr_mut(&key) {
        Some(v) => unsafe {
            if *v & SENT != 0 {
                return 0;
            }
            *v |= SENT;
            *v & DIRTY_OPENED
        },
        None => {
            let _ = WRITTEN.insert(&key, &SENT, 0);
            0
        }
    };
    let Some(base) = scratch() else { return 0 };
    let event = base.cast::<DirtyEvent>();
    let tail = unsafe { base.add(core::mem::size_of::<DirtyEvent>()) };
    let dentry = unsafe { sw_inode_alias(inode) };
    let mut bits = known;
    if unsafe { sw_current_io_worker() } != 0 {
        bits |= DIRTY_IO_WORKER;
    }
    if pages {
        bits |= DIRTY_PAGES;
    }
    let mut walked = 0;
    if dentry.is_null() {
        bits |= DIRTY_NO_NAME;
    } else {
        if unsafe { sw_dentry_unhashed(dentry) } != 0 {
            bits |= DIRTY_UNLINKED;
        }
        walked = unsafe { sw_dentry_walk(dentry, tail) };
        if walked & WALK_TRUNCATED != 0 {
            bits |= DIRTY_PATH_TRUNCATED;
        }
    }
    let path_len = walked & !WALK_TRUNCATED & (2 * PATH_MAX as u32 - 1);
    unsafe {
        *event = DirtyEvent {
            header: header(EventKind::Dirty, tgid, start_ns),
            magic: sw_inode_magic(inode),
            ino,
            dev,
            dirty_flags: flags,
            syscall: syscall as i32,
            bits,
            nlink: sw_inode_nlink(inode),
            identity: identity_of(dev, generation, ino),
            generation,
            path_len,
        };
    }
    submit(
        EventKind::Dirty,
        base,
        core::mem::size_of::<DirtyEvent>() + path_len as usize,
    );
    0
}
