//! Mounts and namespace changes: mount, umount2, move_mount, open_tree(_attr), fsopen,
//! fsmount, fspick, mount_setattr, pivot_root, chroot; unshare and setns.
//!
//! Syscall exits, their arguments read from the saved registers. Paths are the directory
//! from the kernel (dirfd or cwd) and the name as given; a mount's source is a path only for
//! bind and move mounts (else it is a device or a name: kept as given). unshare and setns send
//! the task's namespaces after the call: the process's earlier ones are in its exec record.
use aya_ebpf::{
    helpers::generated::bpf_probe_read_user_str, macros::tracepoint, programs::TracePointContext,
};
use sandbox_watch_common::{
    EventKind, MOUNT_CHROOT, MOUNT_FSMOUNT, MOUNT_FSOPEN, MOUNT_FSPICK, MOUNT_MOUNT, MOUNT_MOVE,
    MOUNT_OPEN_TREE, MOUNT_PIVOT_ROOT, MOUNT_SETATTR, MOUNT_UMOUNT, MountEvent, NEW_PATH_TRUNCATED,
    NS_SETNS, NS_UNSHARE, NsEvent, PATH_AS_GIVEN, PATH_FROM_DIR_AND_NAME, PATH_TRUNCATED,
};

use super::paths::{AT_FDCWD, PATH_MASK, as_given, dir_and_name, syscall_nr};
use super::syscall::RET;
use crate::{current_task, current_tgid, header, is_traced, kernel::*, opaque, scratch, submit};

const MS_BIND: u64 = 4096;
const MS_MOVE: u64 = 8192;
/// Bytes kept of a filesystem type's name.
const FSTYPE_MAX: u32 = 64;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    /// mount(source, target, fstype, flags, data)
    Mount,
    /// umount2(target, flags)
    Umount,
    /// move_mount(from_dfd, from_path, to_dfd, to_path, flags)
    MoveMount,
    /// open_tree(dfd, path, flags), open_tree_attr(dfd, path, flags, attr, size)
    OpenTree,
    /// fsopen(fstype, flags)
    Fsopen,
    /// fsmount(fs_fd, flags, attr_flags)
    Fsmount,
    /// fspick(dfd, path, flags)
    Fspick,
    /// mount_setattr(dfd, path, flags, attr, size)
    MountSetattr,
    /// pivot_root(new_root, put_old)
    PivotRoot,
    /// chroot(path)
    Chroot,
}

/// One name: nothing, resolved against its directory (dirfd), or as given.
#[derive(Clone, Copy)]
enum Name {
    None,
    At(i64, u64),
    Given(u64),
}

impl Name {
    /// (kind, dirfd, pointer), the kind as a `PATH_*` value (0: none).
    fn parts(self) -> (u64, i64, u64) {
        match self {
            Name::None => (0, 0, 0),
            Name::At(dirfd, ptr) => (PATH_FROM_DIR_AND_NAME as u64, dirfd, ptr),
            Name::Given(ptr) => (PATH_AS_GIVEN as u64, 0, ptr),
        }
    }
}

/// Writes one name; its kind and the walk's result.
#[inline(always)]
fn put(name: Name, dst: *mut u8) -> (u32, u32) {
    // One state whatever the syscall (see `opaque`).
    let (kind, dirfd, ptr) = name.parts();
    let kind = opaque(kind) as u32;
    let dirfd = opaque(dirfd as u64) as i64;
    if kind == PATH_FROM_DIR_AND_NAME {
        (kind, dir_and_name(dirfd, ptr, dst))
    } else if kind == PATH_AS_GIVEN {
        (kind, as_given(ptr, dst))
    } else {
        (0, 0)
    }
}

#[inline(always)]
fn exit_mount(ctx: &TracePointContext, form: Form) -> u32 {
    let tgid = current_tgid();
    if !is_traced(tgid) {
        return 0;
    }
    let result = unsafe { ctx.read_at::<i64>(RET) }.unwrap_or(0) as i32;
    let mut a = [0u64; 5];
    unsafe { sw_syscall_args5(a.as_mut_ptr()) };
    let at = |n: usize| a[n] as i32 as i64;
    let (op, source, target, fstype, flags) = match form {
        Form::Mount => {
            let source = if a[3] & (MS_BIND | MS_MOVE) != 0 {
                Name::At(AT_FDCWD, a[0])
            } else {
                Name::Given(a[0])
            };
            (MOUNT_MOUNT, source, Name::At(AT_FDCWD, a[1]), a[2], a[3])
        }
        Form::Umount => (MOUNT_UMOUNT, Name::None, Name::At(AT_FDCWD, a[0]), 0, a[1]),
        Form::MoveMount => (
            MOUNT_MOVE,
            Name::At(at(0), a[1]),
            Name::At(at(2), a[3]),
            0,
            a[4],
        ),
        Form::OpenTree => (MOUNT_OPEN_TREE, Name::At(at(0), a[1]), Name::None, 0, a[2]),
        Form::Fsopen => (MOUNT_FSOPEN, Name::None, Name::None, a[0], a[1]),
        Form::Fsmount => (MOUNT_FSMOUNT, Name::None, Name::None, 0, a[1]),
        Form::Fspick => (MOUNT_FSPICK, Name::None, Name::At(at(0), a[1]), 0, a[2]),
        Form::MountSetattr => (MOUNT_SETATTR, Name::None, Name::At(at(0), a[1]), 0, a[2]),
        Form::PivotRoot => (
            MOUNT_PIVOT_ROOT,
            Name::At(AT_FDCWD, a[0]),
            Name::At(AT_FDCWD, a[1]),
            0,
            0,
        ),
        Form::Chroot => (MOUNT_CHROOT, Name::None, Name::At(AT_FDCWD, a[0]), 0, 0),
    };
    let Some(base) = scratch() else { return 0 };
    let event = base.cast::<MountEvent>();
    let ev = unsafe { &mut *event };
    *ev = MountEvent {
        header: header(EventKind::Mount, tgid, unsafe { sw_task_start_ns(current_task()) }),
        op,
        result,
        flags,
        mntns: unsafe { sw_task_mntns(current_task()) },
        ..Default::default()
    };
    let fstype = opaque(fstype);
    let tail = unsafe { base.add(core::mem::size_of::<MountEvent>()) };
    let (source_kind, s) = put(source, tail);
    ev.source_kind = source_kind;
    if s & WALK_TRUNCATED != 0 {
        ev.path_flags |= PATH_TRUNCATED;
    }
    ev.source_len = s & !WALK_TRUNCATED & PATH_MASK;
    let source_len = unsafe { core::ptr::read_volatile(&ev.source_len) } & PATH_MASK;
    let (target_kind, t) = put(target, unsafe { tail.add(source_len as usize) });
    ev.target_kind = target_kind;
    if t & WALK_TRUNCATED != 0 {
        ev.path_flags |= NEW_PATH_TRUNCATED;
    }
    ev.target_len = t & !WALK_TRUNCATED & PATH_MASK;
    let target_len = unsafe { core::ptr::read_volatile(&ev.target_len) } & PATH_MASK;
    if fstype != 0 {
        let dst = unsafe { tail.add(source_len as usize + target_len as usize) };
        let n = unsafe { bpf_probe_read_user_str(dst.cast(), FSTYPE_MAX, fstype as *const _) };
        ev.fstype_len = if n > 0 { n as u32 & 0x7f } else { 0 };
    }
    let fstype_len = unsafe { core::ptr::read_volatile(&ev.fstype_len) } & 0x7f;
    let size = core::mem::size_of::<MountEvent>()
        + source_len as usize
        + target_len as usize
        + fstype_len as usize;
    submit(EventKind::Mount, base, size);
    0
}

/// Attached to the exit tracepoints of every mount syscall (one program, verified once).
#[tracepoint]
pub fn sys_exit_mounts(ctx: TracePointContext) -> u32 {
    let form = match syscall_nr(&ctx) {
        165 => Form::Mount,
        // umount2 (its tracepoints are named `umount`)
        166 => Form::Umount,
        429 => Form::MoveMount,
        // open_tree, open_tree_attr
        428 | 467 => Form::OpenTree,
        430 => Form::Fsopen,
        432 => Form::Fsmount,
        433 => Form::Fspick,
        442 => Form::MountSetattr,
        155 => Form::PivotRoot,
        161 => Form::Chroot,
        _ => return 0,
    };
    exit_mount(&ctx, form)
}

#[inline(always)]
fn exit_ns(ctx: &TracePointContext, op: u32) -> u32 {
    let tgid = current_tgid();
    if !is_traced(tgid) {
        return 0;
    }
    let result = unsafe { ctx.read_at::<i64>(RET) }.unwrap_or(0) as i32;
    let mut a = [0u64; 4];
    unsafe { sw_syscall_args(a.as_mut_ptr()) };
    let task = current_task();
    let event = unsafe {
        NsEvent {
            header: header(EventKind::Namespace, tgid, sw_task_start_ns(task)),
            op,
            result,
            flags: if op == NS_UNSHARE { a[0] } else { a[1] },
            netns: sw_task_netns(task),
            mntns: sw_task_mntns(task),
            pidns: sw_task_pidns(task),
            userns: sw_task_userns(task),
            utsns: sw_task_utsns(task),
            path_len: 0,
        }
    };
    crate::submit_value(EventKind::Namespace, &event);
    0
}

/// Attached to the exits of unshare and setns.
#[tracepoint]
pub fn sys_exit_namespace(ctx: TracePointContext) -> u32 {
    match syscall_nr(&ctx) {
        272 => exit_ns(&ctx, NS_UNSHARE),
        308 => exit_ns(&ctx, NS_SETNS),
        _ => 0,
    }
}
