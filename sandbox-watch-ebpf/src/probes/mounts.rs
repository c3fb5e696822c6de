//! Mount and namespace changes: mount, umount2, move_mount, open_tree(_attr), fsopen,
//! fsconfig, fsmount, fspick, mount_setattr, pivot_root, chroot, unshare, setns.
//!
//! One program, `sys_exit_mounts`, attached by the loader to the exit tracepoint of each (as
//! `probes/attr.rs` is to the attribute calls): the verifier checks it once. It tells the calls
//! apart by the record's `__syscall_nr` and reads their arguments from the registers saved at
//! the entry (`sw_syscall_args`, `sw_syscall_arg4`).
//!
//! What the record holds is read at the exit, from the kernel's own objects where they say it:
//! - the task's namespaces after the call (`current->nsproxy`, `cred->user_ns`);
//! - its root after chroot, pivot_root and setns (`current->fs->root`: the dentry's path in
//!   its filesystem and its dev and inode);
//! - a tree's source (the descriptor open_tree or fsmount returned, move_mount's
//!   from-descriptor): its root dentry's path in its filesystem, the mount's `mnt_devname` and
//!   its filesystem's type;
//! - setns's namespace type, when the caller gave 0, from its descriptor's nsfs inode;
//!
//! and from the caller's memory where the kernel keeps nothing to read back (flagged
//! `CALLER_NAMES`): mount's source, target and type, the other calls' names (their directory
//! from the kernel, dirfd or cwd), fsopen's type, fsconfig's key. Never mount's data (its
//! options can hold passwords), nor fsconfig's values.
use aya_ebpf::{EbpfContext, programs::TracePointContext};
use sandbox_watch_common::{
    EventKind, MountEvent, NEW_PATH_TRUNCATED, PATH_MAX, PATH_TRUNCATED,
    mount::{self, nr},
};

use super::files::{AT_FDCWD, PATH_MASK, dir_and_name, read_str};
use crate::{current_task, current_tgid, header, is_traced, kernel::*, scratch, submit};

/// Where a call's name is (its directory descriptor and the name, as arguments).
const NONE: u32 = 0;
/// `(AT_FDCWD, a0)`
const CWD_0: u32 = 1;
/// `(AT_FDCWD, a1)`
const CWD_1: u32 = 2;
/// `(a0, a1)`
const A0_1: u32 = 3;
/// `(a2, a3)`
const A2_3: u32 = 4;

/// No argument (a name string's, the flags').
const NO: u32 = 0xf;

// What else a call's record holds:
/// the task's root after the call;
const ROOT: u32 = 1;
/// the source is the tree of the descriptor the call returned (open_tree, fsmount);
const TREE_RESULT: u32 = 2;
/// the source is the tree of descriptor a0 when a1 is an empty name (move_mount's
/// `MOVE_MOUNT_F_EMPTY_PATH`, from open_tree or fsmount);
const TREE_FROM: u32 = 4;
/// setns: a 0 nstype is the type of the namespace descriptor a0 names.
const NS_FD: u32 = 8;

/// Bounds the system call numbers the table covers (the largest is open_tree_attr's, 467).
const CALLS: usize = 512;

/// For each system call number: 0 (not one of these calls), or its op (a `mount` constant),
/// where its source (`<< 8`) and target (`<< 12`) are, the argument of its name string
/// (`<< 16`) and flags (`<< 20`), and what else it holds (`<< 24`). A table, not a `match`,
/// for the reason `probes/attr.rs` gives: the body is verified once for all the calls.
static CALL: [u32; CALLS] = {
    let mut t = [0u32; CALLS];
    #[rustfmt::skip]
    let calls: [(i32, u32, u32, u32, u32, u32, u32); 14] = [
        // (call, op, source, target, name arg, flags arg, extras)
        // mount(source, target, fstype, flags, data)
        (nr::MOUNT, mount::MOUNT, CWD_0, CWD_1, 2, 3, 0),
        // umount2(target, flags)
        (nr::UMOUNT2, mount::UMOUNT, NONE, CWD_0, NO, 1, 0),
        // move_mount(from_dfd, from_path, to_dfd, to_path, flags)
        (nr::MOVE_MOUNT, mount::MOVE_MOUNT, A0_1, A2_3, NO, 4, TREE_FROM),
        // open_tree(dfd, path, flags), open_tree_attr(dfd, path, flags, attr, size)
        (nr::OPEN_TREE, mount::OPEN_TREE, A0_1, NONE, NO, 2, TREE_RESULT),
        (nr::OPEN_TREE_ATTR, mount::OPEN_TREE, A0_1, NONE, NO, 2, TREE_RESULT),
        // fsopen(fsname, flags)
        (nr::FSOPEN, mount::FSOPEN, NONE, NONE, 0, 1, 0),
        // fsconfig(fd, cmd, key, value, aux): the key only
        (nr::FSCONFIG, mount::FSCONFIG, NONE, NONE, 2, 1, 0),
        // fsmount(fs_fd, flags, attr_flags)
        (nr::FSMOUNT, mount::FSMOUNT, NONE, NONE, NO, 1, TREE_RESULT),
        // fspick(dfd, path, flags)
        (nr::FSPICK, mount::FSPICK, NONE, A0_1, NO, 2, 0),
        // mount_setattr(dfd, path, flags, attr, size)
        (nr::MOUNT_SETATTR, mount::MOUNT_SETATTR, NONE, A0_1, NO, 2, 0),
        // pivot_root(new_root, put_old)
        (nr::PIVOT_ROOT, mount::PIVOT_ROOT, CWD_0, CWD_1, NO, NO, ROOT),
        // chroot(path)
        (nr::CHROOT, mount::CHROOT, NONE, CWD_0, NO, NO, ROOT),
        // unshare(flags)
        (nr::UNSHARE, mount::UNSHARE, NONE, NONE, NO, 0, 0),
        // setns(fd, nstype)
        (nr::SETNS, mount::SETNS, NONE, NONE, NO, 1, ROOT | NS_FD),
    ];
    let mut i = 0;
    while i < calls.len() {
        let (n, op, source, target, name, flags, extra) = calls[i];
        t[n as usize] = op | source << 8 | target << 12 | name << 16 | flags << 20 | extra << 24;
        i += 1;
    }
    t
};

/// The exit of every mount and namespace call (see the module's comment; `kernel/probe.rs`
/// lists them).
#[aya_ebpf::macros::tracepoint]
pub fn sys_exit_mounts(ctx: TracePointContext) -> u32 {
    if !is_traced(current_tgid()) {
        return 0;
    }
    let syscall = unsafe { core::ptr::read(ctx.as_ptr().cast::<u8>().add(8).cast::<i32>()) };
    if syscall < 0 || syscall as usize >= CALLS {
        return 0;
    }
    let code = CALL[syscall as usize & (CALLS - 1)];
    if code & 0xff == 0 {
        return 0;
    }
    let result = unsafe { ctx.read_at::<i64>(super::syscall::RET) }.unwrap_or(0);
    let mut a = [0u64; 5];
    unsafe {
        sw_syscall_args(a.as_mut_ptr());
        a[4] = sw_syscall_arg4();
    }
    send_mount(syscall, code, &a, result);
    0
}

/// A name's directory descriptor and address, by where the table says it is.
#[inline(always)]
fn name_at(at: u32, a: &[u64; 5]) -> (i64, u64) {
    match at {
        CWD_0 => (AT_FDCWD, a[0]),
        CWD_1 => (AT_FDCWD, a[1]),
        A0_1 => (a[0] as i32 as i64, a[1]),
        _ => (a[2] as i32 as i64, a[3]),
    }
}

/// Argument `n` (`NO`: none, 0).
#[inline(always)]
fn arg_at(n: u32, a: &[u64; 5]) -> Option<u64> {
    match n {
        0 => Some(a[0]),
        1 => Some(a[1]),
        2 => Some(a[2]),
        3 => Some(a[3]),
        4 => Some(a[4]),
        _ => None,
    }
}

/// Whether the name at `name` is empty (or cannot be read).
#[inline(always)]
fn empty_name(name: u64) -> bool {
    let mut first = [0u8; 2];
    read_str(false, first.as_mut_ptr(), 2, name);
    first[0] == 0
}

/// The tree a call's source is, when the kernel holds it as a descriptor: the file of the
/// descriptor open_tree or fsmount returned, or of move_mount's from-descriptor with an empty
/// from-path.
#[inline(always)]
fn tree_of(extra: u32, a: &[u64; 5], result: i64) -> Ptr {
    let task = current_task();
    if extra & TREE_RESULT != 0 && result >= 0 {
        return unsafe { sw_task_fd_file(task, result as u32) };
    }
    if extra & TREE_FROM != 0 && (a[0] as i32) >= 0 && empty_name(a[1]) {
        return unsafe { sw_task_fd_file(task, a[0] as u32) };
    }
    core::ptr::null()
}

/// A length the record holds, read back from it (map memory: the verifier does not know it,
/// only the mask), so what follows is checked once whatever set it.
#[inline(always)]
fn held(len: &u32, mask: u32) -> usize {
    (unsafe { core::ptr::read_volatile(len) } & mask) as usize
}

/// The parts of the tail, in their order.
const DEVNAME: u32 = 1;
const NAME: u32 = 2;
const SOURCE: u32 = 3;
const TARGET: u32 = 4;
const END: u32 = 5;

/// Where a part of the tail starts: after the parts before it, by the lengths the record holds
/// (the dentry's is first).
#[inline(always)]
fn before(event: *const MountEvent, part: u32) -> usize {
    let e = unsafe { &*event };
    let mut at = held(&e.dentry_len, WALK_MASK);
    if part > DEVNAME {
        at += held(&e.devname_len, NAME_MASK);
    }
    if part > NAME {
        at += held(&e.name_len, NAME_MASK);
    }
    if part > SOURCE {
        at += held(&e.source_len, PATH_MASK);
    }
    if part > TARGET {
        at += held(&e.target_len, PATH_MASK);
    }
    at
}

/// Bounds a NUL-ended name's length in the tail.
const NAME_MASK: u32 = 2 * mount::NAME_MAX as u32 - 1;
/// Bounds a walked dentry's length in the tail.
const WALK_MASK: u32 = 2 * PATH_MAX as u32 - 1;

/// Builds the record in this CPU's scratch area and sends it. Every field is written straight
/// into the record there, and each part of the tail starts where the record's lengths say:
/// the verifier does not follow map memory, so the flags and lengths one part sets do not make
/// the parts after it checked once for each combination (built in a struct on the stack they
/// did, and 6.1's verifier gave up at a million instructions).
#[inline(always)]
fn send_mount(syscall: i32, code: u32, a: &[u64; 5], result: i64) {
    let Some(base) = scratch() else { return };
    let event = base.cast::<MountEvent>();
    let tail = unsafe { base.add(core::mem::size_of::<MountEvent>()) };
    let task = current_task();
    let (source_at, target_at) = ((code >> 8) & 0xf, (code >> 12) & 0xf);
    let (name_arg, flags_arg, extra) = ((code >> 16) & 0xf, (code >> 20) & 0xf, code >> 24);
    unsafe {
        *event = MountEvent {
            header: header(EventKind::Mount, current_tgid(), sw_task_start_ns(task)),
            op: code & 0xff,
            syscall,
            result,
            call_flags: arg_at(flags_arg, a).unwrap_or(0),
            ..Default::default()
        };
        if extra & NS_FD != 0 && (*event).call_flags == 0 {
            (*event).call_flags = sw_fd_ns_type(task, a[0] as u32) as u64;
        }
        sw_task_namespaces(task, (*event).ns.as_mut_ptr());
    }
    // The dentry, first in the tail: the tree the source is, or the task's root after the call.
    let dentry = {
        let tree = tree_of(extra, a, result);
        if !tree.is_null() {
            unsafe { (*event).flags |= mount::SOURCE_FROM_TREE };
            unsafe { sw_file_dentry(tree) }
        } else if extra & ROOT != 0 {
            unsafe { (*event).flags |= mount::HAS_ROOT };
            unsafe { sw_task_root_dentry(task) }
        } else {
            core::ptr::null()
        }
    };
    if !dentry.is_null() {
        let walked = unsafe { sw_dentry_fs_path(dentry, tail) };
        let inode = unsafe { sw_dentry_inode(dentry) };
        unsafe {
            (*event).dentry_dev = sw_inode_dev(inode);
            (*event).dentry_ino = sw_inode_ino(inode);
            (*event).dentry_len = walked & !WALK_TRUNCATED & WALK_MASK;
            if walked & WALK_TRUNCATED != 0 {
                (*event).flags |= mount::DENTRY_TRUNCATED;
            }
        }
    }
    // A tree's source name and filesystem type, from the kernel.
    let tree = tree_of(extra, a, result);
    if !tree.is_null() {
        let at = unsafe { tail.add(before(event, DEVNAME)) };
        let n = read_str(
            true,
            at,
            mount::NAME_MAX as u32,
            unsafe { sw_file_devname(tree) } as u64,
        );
        unsafe { (*event).devname_len = if n > 0 { n as u32 & NAME_MASK } else { 0 } };
        let at = unsafe { tail.add(before(event, NAME)) };
        let n = read_str(
            true,
            at,
            mount::NAME_MAX as u32,
            unsafe { sw_file_fstype(tree) } as u64,
        );
        unsafe { (*event).name_len = if n > 0 { n as u32 & NAME_MASK } else { 0 } };
    }
    // Without a tree, the caller's names: a type or a key, the source, the target (the paths'
    // directories from the kernel).
    let from_tree = unsafe { core::ptr::read_volatile(&(*event).flags) } & mount::SOURCE_FROM_TREE;
    if from_tree == 0
        && let Some(name) = arg_at(name_arg, a)
    {
        let at = unsafe { tail.add(before(event, NAME)) };
        let n = read_str(false, at, mount::NAME_MAX as u32, name);
        unsafe {
            (*event).name_len = if n > 0 { n as u32 & NAME_MASK } else { 0 };
            (*event).flags |= mount::CALLER_NAMES;
        }
    }
    if from_tree == 0 && source_at != NONE {
        let (dirfd, name) = name_at(source_at, a);
        let walked = dir_and_name(dirfd, name, unsafe { tail.add(before(event, SOURCE)) });
        unsafe {
            (*event).source_len = walked & !WALK_TRUNCATED & PATH_MASK;
            (*event).flags |= mount::CALLER_NAMES;
            if walked & WALK_TRUNCATED != 0 {
                (*event).flags |= PATH_TRUNCATED;
            }
        }
    }
    if target_at != NONE {
        let (dirfd, name) = name_at(target_at, a);
        let walked = dir_and_name(dirfd, name, unsafe { tail.add(before(event, TARGET)) });
        unsafe {
            (*event).target_len = walked & !WALK_TRUNCATED & PATH_MASK;
            (*event).flags |= mount::CALLER_NAMES;
            if walked & WALK_TRUNCATED != 0 {
                (*event).flags |= NEW_PATH_TRUNCATED;
            }
        }
    }
    let size = core::mem::size_of::<MountEvent>() + before(event, END);
    submit(EventKind::Mount, base, size);
}
