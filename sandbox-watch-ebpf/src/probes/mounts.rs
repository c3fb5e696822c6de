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

#[inline(always)]
fn send_mount(syscall: i32, code: u32, a: &[u64; 5], result: i64) {
    let Some(base) = scratch() else { return };
    let event = base.cast::<MountEvent>();
    let tail = unsafe { base.add(core::mem::size_of::<MountEvent>()) };
    let task = current_task();
    let (source_at, target_at) = ((code >> 8) & 0xf, (code >> 12) & 0xf);
    let (name_arg, flags_arg, extra) = ((code >> 16) & 0xf, (code >> 20) & 0xf, code >> 24);
    let mut e = MountEvent {
        header: header(EventKind::Mount, current_tgid(), unsafe {
            sw_task_start_ns(task)
        }),
        op: code & 0xff,
        syscall,
        result,
        call_flags: arg_at(flags_arg, a).unwrap_or(0),
        ..Default::default()
    };
    if extra & NS_FD != 0 && e.call_flags == 0 {
        e.call_flags = unsafe { sw_fd_ns_type(task, a[0] as u32) } as u64;
    }
    // The tree the source is, when the kernel holds it as a descriptor.
    let mut tree: Ptr = core::ptr::null();
    if extra & TREE_RESULT != 0 && result >= 0 {
        tree = unsafe { sw_task_fd_file(task, result as u32) };
    }
    if extra & TREE_FROM != 0 && (a[0] as i32) >= 0 && empty_name(a[1]) {
        tree = unsafe { sw_task_fd_file(task, a[0] as u32) };
    }
    // The source: the tree's path in its filesystem, or the caller's name.
    let mut source = 0;
    if !tree.is_null() {
        let dentry = unsafe { sw_file_dentry(tree) };
        source = unsafe { sw_dentry_fs_path(dentry, tail) };
        e.tree_dev = unsafe { sw_inode_dev(sw_dentry_inode(dentry)) };
        e.flags |= mount::SOURCE_FROM_TREE;
    } else if source_at != NONE {
        let (dirfd, name) = name_at(source_at, a);
        source = dir_and_name(dirfd, name, tail);
        e.flags |= mount::CALLER_NAMES;
    }
    e.source_len = source & !WALK_TRUNCATED & PATH_MASK;
    if source & WALK_TRUNCATED != 0 {
        e.flags |= PATH_TRUNCATED;
    }
    let at = unsafe { tail.add(e.source_len as usize) };
    if target_at != NONE {
        let (dirfd, name) = name_at(target_at, a);
        let target = dir_and_name(dirfd, name, at);
        e.target_len = target & !WALK_TRUNCATED & PATH_MASK;
        if target & WALK_TRUNCATED != 0 {
            e.flags |= NEW_PATH_TRUNCATED;
        }
        e.flags |= mount::CALLER_NAMES;
    }
    // The name: a tree's filesystem type from the kernel, else the caller's string.
    let at = unsafe { at.add(e.target_len as usize) };
    let n = if !tree.is_null() {
        read_str(
            true,
            at,
            mount::NAME_MAX as u32,
            unsafe { sw_file_fstype(tree) } as u64,
        )
    } else if let Some(name) = arg_at(name_arg, a) {
        e.flags |= mount::CALLER_NAMES;
        read_str(false, at, mount::NAME_MAX as u32, name)
    } else {
        0
    };
    e.name_len = if n > 0 {
        n as u32 & (2 * mount::NAME_MAX as u32 - 1)
    } else {
        0
    };
    let at = unsafe { at.add(e.name_len as usize) };
    if extra & ROOT != 0 {
        let dentry = unsafe { sw_task_root_dentry(task) };
        if !dentry.is_null() {
            let walked = unsafe { sw_dentry_fs_path(dentry, at) };
            let inode = unsafe { sw_dentry_inode(dentry) };
            e.root_dev = unsafe { sw_inode_dev(inode) };
            e.root_ino = unsafe { sw_inode_ino(inode) };
            e.root_len = walked & !WALK_TRUNCATED & (2 * PATH_MAX as u32 - 1);
            e.flags |= mount::HAS_ROOT;
            if walked & WALK_TRUNCATED != 0 {
                e.flags |= mount::ROOT_TRUNCATED;
            }
        }
    }
    let at = unsafe { at.add(e.root_len as usize) };
    if !tree.is_null() {
        let n = read_str(
            true,
            at,
            mount::NAME_MAX as u32,
            unsafe { sw_file_devname(tree) } as u64,
        );
        e.devname_len = if n > 0 {
            n as u32 & (2 * mount::NAME_MAX as u32 - 1)
        } else {
            0
        };
    }
    unsafe { sw_task_namespaces(task, e.ns.as_mut_ptr()) };
    let size = core::mem::size_of::<MountEvent>()
        + e.source_len as usize
        + e.target_len as usize
        + e.name_len as usize
        + e.root_len as usize
        + e.devname_len as usize;
    unsafe { *event = e };
    submit(EventKind::Mount, base, size);
}
