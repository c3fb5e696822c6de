//! Types shared by the BPF programs and the userspace: every record that crosses the ring
//! buffer starts with an [`EventHeader`] whose `kind` says which struct follows.
//!
//! Layout rules: `#[repr(C)]`, fixed-size fields, explicit padding, no pointers. Variable-length
//! data (argv, paths) sits in a tail after the fixed part; the fixed part says how long it is.
#![no_std]

/// Bytes of argv kept per exec. Longer argv is cut here and marked `ARGV_TRUNCATED`.
pub const ARGV_MAX: usize = 32 * 1024;
/// Bytes of one resolved path (its components, leaf first, each ended by a NUL).
pub const PATH_MAX: usize = 4096;
/// Bytes of the file name given to execve, as the kernel saw it.
pub const FILENAME_MAX: usize = 512;
/// How many components a path walk follows before it gives up and marks the path cut.
pub const PATH_DEPTH: u32 = 64;

/// Flags in [`ExecEvent::flags`], [`FileEvent::flags`].
pub const ARGV_TRUNCATED: u32 = 1 << 0;
pub const CWD_TRUNCATED: u32 = 1 << 1;
pub const PATH_TRUNCATED: u32 = 1 << 2;
pub const NEW_PATH_TRUNCATED: u32 = 1 << 3;
/// The name the caller gave (the first, or the new one of a rename or link) read at the
/// syscall's entry differs from the one read at its exit, or could not be read at entry: a
/// thread rewrote it while the kernel used it. The entry-time names follow the paths in the
/// tail (`raced_len` bytes: the first name, then the second, each ended by a NUL).
pub const NAME_RACED: u32 = 1 << 4;
pub const NEW_NAME_RACED: u32 = 1 << 5;
/// The paths came from the kernel's own dentries (fentry on `security_path_*`), not from the
/// caller's memory.
pub const PATH_FROM_KERNEL: u32 = 1 << 6;

/// What follows the header. The numbers are fixed: logs and tests depend on them.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    Fork = 1,
    Exec = 2,
    Exit = 3,
    FileOpen = 4,
    Unlink = 5,
    Rename = 6,
    Net = 7,
    /// An open that failed (the path as the caller gave it, with its directory).
    OpenFailed = 8,
    /// A symbolic or hard link made: the target, then the new name.
    Link = 9,
    // 10–19: reserved for the tamper records (issue 13).
    // 30–39: file truth (issue 15).
    /// The kernel marked a regular file's inode dirty in a traced task's context: a write
    /// (`write`, `pwrite`, a store through a shared mapping, io_uring, truncate…), whatever
    /// descriptor it went through. Once per process and inode.
    Dirty = 30,
    /// An io_uring file request (open, rename, unlink, link, symlink, mkdir, xattr) and its
    /// result, named from the kernel's own copies of its paths.
    Uring = 31,
    /// chmod, chown, truncate, utimes or an xattr change (the `ATTR_*` op).
    Attr = 32,
    /// A directory (mkdir) or a special file (mknod) made: a `FileEvent`, the mode in
    /// `open_flags`.
    Mkdir = 33,
    /// A mount operation (`MOUNT_*` op): mount, umount, move_mount, open_tree, fsmount,
    /// fsopen, fspick, mount_setattr, pivot_root, chroot.
    Mount = 34,
    /// unshare or setns: the task's namespaces after it.
    Namespace = 35,
}

/// The largest event kind plus one: the size of the per-kind drop counter array.
pub const KIND_SLOTS: u32 = 40;

impl EventKind {
    pub const fn from_u32(v: u32) -> Option<Self> {
        Some(match v {
            1 => Self::Fork,
            2 => Self::Exec,
            3 => Self::Exit,
            4 => Self::FileOpen,
            5 => Self::Unlink,
            6 => Self::Rename,
            7 => Self::Net,
            8 => Self::OpenFailed,
            9 => Self::Link,
            30 => Self::Dirty,
            31 => Self::Uring,
            32 => Self::Attr,
            33 => Self::Mkdir,
            34 => Self::Mount,
            35 => Self::Namespace,
            _ => return None,
        })
    }

    pub const fn name(self) -> &'static str {
        match self {
            Self::Fork => "fork",
            Self::Exec => "exec",
            Self::Exit => "exit",
            Self::FileOpen => "file_open",
            Self::Unlink => "unlink",
            Self::Rename => "rename",
            Self::Net => "net",
            Self::OpenFailed => "open_failed",
            Self::Link => "link",
            Self::Dirty => "dirty",
            Self::Uring => "io_uring",
            Self::Attr => "attr",
            Self::Mkdir => "mkdir",
            Self::Mount => "mount",
            Self::Namespace => "namespace",
        }
    }

    /// Size of the fixed part of this kind's record (the tail, if any, follows it).
    /// Every kind is matched without a `_` arm, so a new kind that is not handled fails to build.
    pub const fn fixed_size(self) -> usize {
        match self {
            Self::Fork => core::mem::size_of::<ForkEvent>(),
            Self::Exec => core::mem::size_of::<ExecEvent>(),
            Self::Exit => core::mem::size_of::<ExitEvent>(),
            Self::FileOpen => core::mem::size_of::<FileEvent>(),
            Self::Unlink => core::mem::size_of::<FileEvent>(),
            Self::Rename => core::mem::size_of::<FileEvent>(),
            Self::Net => core::mem::size_of::<NetEvent>(),
            Self::OpenFailed => core::mem::size_of::<FileEvent>(),
            Self::Link => core::mem::size_of::<FileEvent>(),
            Self::Dirty => core::mem::size_of::<DirtyEvent>(),
            Self::Uring => core::mem::size_of::<UringEvent>(),
            Self::Attr => core::mem::size_of::<AttrEvent>(),
            Self::Mkdir => core::mem::size_of::<FileEvent>(),
            Self::Mount => core::mem::size_of::<MountEvent>(),
            Self::Namespace => core::mem::size_of::<NsEvent>(),
        }
    }
}

/// Starts every record.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct EventHeader {
    pub kind: u32,
    /// Thread group id (the process id users see) of the task the event is about.
    pub tgid: u32,
    /// Thread id of the task that caused the event.
    pub pid: u32,
    pub _pad: u32,
    /// `bpf_ktime_get_boot_ns()` when the probe ran.
    pub ktime_ns: u64,
    /// Start time (boot clock, ns) of the thread group leader: with `tgid` it names one
    /// process even when pids are reused.
    pub start_ns: u64,
}

/// A new process (not a new thread) whose parent is traced.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ForkEvent {
    pub header: EventHeader,
    pub child_tgid: u32,
    pub _pad: u32,
    pub child_start_ns: u64,
}

/// A traced process ran execve. Tail: `cwd_len` bytes of cwd path components (leaf first,
/// each ended by NUL), then `argv_len` bytes of argv (each argument ended by NUL).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ExecEvent {
    pub header: EventHeader,
    pub ppid: u32,
    pub uid: u32,
    pub euid: u32,
    pub gid: u32,
    pub cgroup_id: u64,
    pub netns: u32,
    pub mntns: u32,
    pub pidns: u32,
    pub userns: u32,
    pub flags: u32,
    pub filename_len: u32,
    pub cwd_len: u32,
    pub argv_len: u32,
    /// Length of the whole argv area in the new process (larger than `argv_len` when cut).
    pub argv_full_len: u32,
    pub _pad: u32,
    pub comm: [u8; 16],
    pub filename: [u8; FILENAME_MAX],
}

/// Space after [`ExecEvent`] for its tail.
pub const EXEC_TAIL: usize = PATH_MAX + ARGV_MAX;

/// The last thread of a traced process exited.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ExitEvent {
    pub header: EventHeader,
    /// `task->exit_code`: `status << 8` for exit(status), the signal number for a kill.
    pub exit_code: u32,
    pub _pad: u32,
}

/// How the file event's path was obtained.
pub const PATH_FROM_FILE: u32 = 1;
/// Directory part from the kernel (dirfd or cwd), last part from the syscall argument.
pub const PATH_FROM_DIR_AND_NAME: u32 = 2;
/// The argument as the caller gave it, not resolved (a symbolic link's target).
pub const PATH_AS_GIVEN: u32 = 3;
/// In a `Link` event's `open_flags`: a symbolic link (else a hard link).
pub const LINK_SYMBOLIC: u32 = 1;

/// An open (from the `struct file`), unlink or rename by a traced process.
/// Tail: `path_len` bytes, then `new_path_len` bytes (rename only), then `raced_len` bytes
/// (the names read at the syscall's entry, when `NAME_RACED`/`NEW_NAME_RACED`). A path is
/// either components leaf first each ended by NUL (`PATH_FROM_FILE`), or for
/// `PATH_FROM_DIR_AND_NAME` the directory's components, then a NUL, then the name as given.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct FileEvent {
    pub header: EventHeader,
    /// Superblock magic of the file's filesystem (0 when unknown).
    pub magic: u64,
    pub ino: u64,
    /// Kernel `dev_t` of the superblock (major << 20 | minor).
    pub dev: u32,
    /// Open flags as the caller passed them (O_CREAT, O_TRUNC, O_WRONLY, …).
    pub open_flags: u32,
    /// `file->f_mode` (FMODE_* bits).
    pub f_mode: u32,
    pub flags: u32,
    pub path_kind: u32,
    pub path_len: u32,
    pub new_path_kind: u32,
    pub new_path_len: u32,
    /// Syscall result for unlink/rename and failed opens (0 or -errno); 0 for opens.
    pub result: i32,
    /// `IDENTITY` flags of the file's inode (`ID_*`), and for a file the open created, its
    /// directory's flags shifted by `ID_PARENT_SHIFT`.
    pub identity: u32,
    /// `inode->i_generation`: with `dev` and `ino`, one file over time.
    pub generation: u32,
    /// Bytes after the paths: the names read at the syscall's entry (see `NAME_RACED`).
    pub raced_len: u32,
    /// The name an open used (dentry name, parent and mount), as in [`ReadKey`].
    pub name_key: u64,
    /// A created file's directory (same `dev`): its inode number and generation.
    pub parent_ino: u64,
    pub parent_generation: u32,
    pub _pad: u32,
}

/// Space after [`FileEvent`] for its tail: two paths of `PATH_MAX + NAME_MAX`, and two names
/// read at entry.
pub const FILE_TAIL: usize = 2 * (PATH_MAX + 256 + 256) + 2 * RACED_NAME_MAX;

/// Bytes of a name kept from a syscall's entry to compare with its exit.
pub const RACED_NAME_MAX: usize = 256;

/// Flags of an inode in the kernel's `IDENTITY` map (and in records' `identity`).
pub const ID_CREDENTIAL: u32 = 1 << 0;
pub const ID_PERSISTENCE: u32 = 1 << 1;
/// A directory whose new entries are persistence (`.git/hooks`, `.config/autostart`, …).
pub const ID_PERSISTENCE_DIR: u32 = 1 << 4;
/// A directory whose entries are credentials (`.ssh`, `/run/secrets`, …).
pub const ID_CREDENTIAL_DIR: u32 = 1 << 5;
/// In a create's `identity`, the directory's flags sit above this shift.
pub const ID_PARENT_SHIFT: u32 = 8;

/// Key of `IDENTITY`: one inode (its superblock's dev, its number and generation).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct InodeKey {
    pub dev: u32,
    pub generation: u32,
    pub ino: u64,
}

/// `DirtyEvent::bits`.
/// The process opened this inode for write in the capture (the entry exists: it is modified).
pub const DIRTY_OPENED: u32 = 1 << 0;
/// Dirtied by an io_uring worker thread of the process.
pub const DIRTY_IO_WORKER: u32 = 1 << 1;
/// The kernel dirtied page-cache pages (not only timestamps).
pub const DIRTY_PAGES: u32 = 1 << 2;
/// The dentry named is deleted (the file lives on through an open descriptor).
pub const DIRTY_UNLINKED: u32 = 1 << 3;
/// The inode has no name at all (O_TMPFILE, or its last name is gone): dev and ino only.
pub const DIRTY_NO_NAME: u32 = 1 << 4;
/// The path was cut (too deep or too long).
pub const DIRTY_PATH_TRUNCATED: u32 = 1 << 5;

/// A regular file's inode dirtied by a traced task. Tail: `path_len` bytes of the path from
/// the inode's newest name up to its filesystem's root (components leaf first, each ended by
/// NUL): relative to the filesystem, not to a mount.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct DirtyEvent {
    pub header: EventHeader,
    pub magic: u64,
    pub ino: u64,
    pub dev: u32,
    /// The `I_DIRTY_*` flags of the call.
    pub dirty_flags: u32,
    /// The system call the task was in (-1: a page fault).
    pub syscall: i32,
    pub bits: u32,
    pub nlink: u32,
    pub identity: u32,
    pub generation: u32,
    pub path_len: u32,
}

/// io_uring opcodes named in [`UringEvent::opcode`] (include/uapi/linux/io_uring.h).
pub mod uring_op {
    pub const FALLOCATE: u32 = 17;
    pub const OPENAT: u32 = 18;
    pub const CLOSE: u32 = 19;
    pub const STATX: u32 = 21;
    pub const OPENAT2: u32 = 28;
    pub const RENAMEAT: u32 = 35;
    pub const UNLINKAT: u32 = 36;
    pub const MKDIRAT: u32 = 37;
    pub const SYMLINKAT: u32 = 38;
    pub const LINKAT: u32 = 39;
    pub const MSG_RING: u32 = 40;
    pub const FSETXATTR: u32 = 41;
    pub const SETXATTR: u32 = 42;
    pub const FGETXATTR: u32 = 43;
    pub const GETXATTR: u32 = 44;
    pub const FIXED_FD_INSTALL: u32 = 54;
    pub const FTRUNCATE: u32 = 55;
}

/// Bytes of each of the two names an io_uring request carries.
pub const URING_NAME_MAX: usize = 256;

/// An io_uring file request of a traced process, at its completion. Tail: two names of
/// `URING_NAME_MAX` bytes (the kernel's copies, NUL-ended; for xattrs the path and the
/// attribute's name), then `dir_a_len` and `dir_b_len` bytes (the directories relative names
/// start from, walked from the kernel: the dirfd or the cwd), then `path_len` bytes (an open's
/// file, walked from the `struct file`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct UringEvent {
    pub header: EventHeader,
    pub opcode: u32,
    /// The request's result (an fd for an open, 0 or -errno).
    pub result: i32,
    pub dfd: i32,
    pub dfd2: i32,
    /// Open flags, mkdir mode, rename/link/unlink flags.
    pub flags: u32,
    /// A direct-descriptor open's slot (0: an ordinary fd).
    pub slot: u32,
    pub len_a: u32,
    pub len_b: u32,
    pub dir_a_len: u32,
    pub dir_b_len: u32,
    pub path_len: u32,
    /// `IDENTITY` flags of an open's file (0 otherwise).
    pub identity: u32,
    pub dev: u32,
    pub generation: u32,
    pub ino: u64,
    pub magic: u64,
    pub f_mode: u32,
    pub _pad: u32,
}

/// [`AttrEvent::op`].
pub const ATTR_CHMOD: u32 = 1;
pub const ATTR_CHOWN: u32 = 2;
pub const ATTR_TRUNCATE: u32 = 3;
pub const ATTR_UTIMES: u32 = 4;
pub const ATTR_SETXATTR: u32 = 5;
pub const ATTR_REMOVEXATTR: u32 = 6;
/// In [`AttrEvent::flags`]: the file was named by a descriptor (fchmod, ftruncate, …): its
/// path is walked from the `struct file`, and dev/ino/identity are the file's.
pub const ATTR_BY_FD: u32 = 1 << 8;
/// In [`AttrEvent::flags`]: utimensat/utimes set explicit times (not "now").
pub const ATTR_TIMES_GIVEN: u32 = 1 << 9;

/// Bytes of an xattr's name kept.
pub const XATTR_NAME_MAX: usize = 256;

/// A change of a file's attributes by a traced process. Tail: `path_len` bytes (a path of
/// `path_kind`), `xattr_len` bytes (the attribute's name, NUL-ended), `raced_len` bytes (the
/// name read at entry, when `NAME_RACED` is in `flags`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct AttrEvent {
    pub header: EventHeader,
    pub op: u32,
    pub result: i32,
    /// chmod: the new mode; chown: `uid` and `gid` (u32::MAX: unchanged).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    /// `PATH_TRUNCATED`, `NAME_RACED`, `PATH_FROM_KERNEL`, `ATTR_BY_FD`, `ATTR_TIMES_GIVEN`.
    pub flags: u32,
    /// truncate: the new length; setxattr: the value's size; utimes: the new mtime (s).
    pub size: u64,
    pub dev: u32,
    pub identity: u32,
    pub ino: u64,
    pub magic: u64,
    pub generation: u32,
    pub path_kind: u32,
    pub path_len: u32,
    pub xattr_len: u32,
    pub raced_len: u32,
    /// The syscall's own flags (AT_SYMLINK_NOFOLLOW, XATTR_CREATE, …).
    pub at_flags: u32,
}

/// [`MountEvent::op`].
pub const MOUNT_MOUNT: u32 = 1;
pub const MOUNT_UMOUNT: u32 = 2;
pub const MOUNT_MOVE: u32 = 3;
pub const MOUNT_OPEN_TREE: u32 = 4;
pub const MOUNT_FSOPEN: u32 = 5;
pub const MOUNT_FSMOUNT: u32 = 6;
pub const MOUNT_FSPICK: u32 = 7;
pub const MOUNT_SETATTR: u32 = 8;
pub const MOUNT_PIVOT_ROOT: u32 = 9;
pub const MOUNT_CHROOT: u32 = 10;

/// A mount operation by a traced process. Tail: `source_len` bytes (mount's source as given,
/// or a path), `target_len` bytes (a path of `target_kind`), `fstype_len` bytes (a filesystem
/// type, NUL-ended). Sources and targets that are paths are `PATH_FROM_DIR_AND_NAME`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct MountEvent {
    pub header: EventHeader,
    pub op: u32,
    /// 0, an fd (open_tree, fsopen, fsmount, fspick) or -errno.
    pub result: i32,
    /// The call's flags (MS_BIND, MOVE_MOUNT_*, OPEN_TREE_CLONE, …).
    pub flags: u64,
    /// The task's mount namespace after the call.
    pub mntns: u32,
    pub source_kind: u32,
    pub source_len: u32,
    pub target_kind: u32,
    pub target_len: u32,
    pub fstype_len: u32,
    pub path_flags: u32,
    pub _pad: u32,
}

/// [`NsEvent::op`].
pub const NS_UNSHARE: u32 = 1;
pub const NS_SETNS: u32 = 2;

/// unshare or setns by a traced process: the flags and the task's namespaces after the call.
/// Tail (setns): `path_len` bytes, the path of the descriptor's file (components leaf first).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct NsEvent {
    pub header: EventHeader,
    pub op: u32,
    pub result: i32,
    /// unshare's CLONE_* flags; setns's nstype.
    pub flags: u64,
    pub netns: u32,
    pub mntns: u32,
    pub pidns: u32,
    pub userns: u32,
    pub utsns: u32,
    pub path_len: u32,
}

/// What a [`NetEvent`] reports.
pub const NET_CONNECT: u32 = 1;
/// The outcome of a connect that returned EINPROGRESS (from the socket's TCP state change).
pub const NET_CONNECT_RESULT: u32 = 2;
pub const NET_LISTEN: u32 = 3;
/// A datagram socket bound to a local address (a UDP server).
pub const NET_BIND: u32 = 4;
/// A datagram sent to port 53; the tail holds its first bytes.
pub const NET_DNS: u32 = 5;

/// Bytes of a DNS datagram kept.
pub const DNS_MAX: usize = 512;
/// Bytes of a `sockaddr` read from the caller (`sockaddr_un` is the largest: 110).
pub const SOCKADDR_MAX: usize = 112;

/// A socket operation by a traced process. Tail: `tail_len` bytes: for a unix-domain connect
/// the `sockaddr_un` path, for `NET_DNS` the datagram.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct NetEvent {
    pub header: EventHeader,
    pub op: u32,
    /// AF_INET 2, AF_INET6 10, AF_UNIX 1.
    pub family: u32,
    /// SOCK_STREAM 1, SOCK_DGRAM 2, …
    pub sock_type: u32,
    /// IPPROTO_TCP 6, IPPROTO_UDP 17 (0 for unix).
    pub protocol: u32,
    /// The remote (connect, dns) or local (listen, bind) address: 4 bytes for v4, 16 for v6.
    pub addr: [u8; 16],
    /// Host order.
    pub port: u32,
    /// Network namespace of the socket itself.
    pub netns: u32,
    /// 0 or -errno.
    pub result: i32,
    pub tail_len: u32,
    /// The kernel socket, to match a connect with its later result.
    pub sock: u64,
}

/// Scratch space a probe assembles a record in before it copies the used part to the ring.
pub const SCRATCH_SIZE: usize = 64 * 1024;

/// Key of the kernel's table of plain reads already reported (map `READS`): a process
/// opening the same inode again only bumps the count stored under this key.
///
/// It names the process (with its start: pids are reused), the inode (with its generation:
/// inode numbers are reused) and the name used (`name_key`: the dentry's name hash and
/// length, its parent and the mount), so a second path to one inode is a read of its own.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ReadKey {
    pub tgid: u32,
    pub dev: u32,
    pub ino: u64,
    pub start_ns: u64,
    pub generation: u32,
    pub _pad: u32,
    pub name_key: u64,
}

/// Names of the globals the userspace sets at load time.
pub mod globals {
    /// Container mode: the cgroup id whose tasks are traced (0 = off), and its level.
    pub const CGROUP_ID: &str = "CGROUP_ID";
    pub const CGROUP_LEVEL: &str = "CGROUP_LEVEL";
    /// The monitor's own tgid: its opens while it is in the traced set register inodes in
    /// `IDENTITY` (through `REGISTER`) instead of being sent.
    pub const MONITOR_TGID: &str = "MONITOR_TGID";
}

#[cfg(feature = "user")]
mod user {
    use super::*;
    unsafe impl aya::Pod for EventHeader {}
    unsafe impl aya::Pod for ForkEvent {}
    unsafe impl aya::Pod for ExecEvent {}
    unsafe impl aya::Pod for ExitEvent {}
    unsafe impl aya::Pod for FileEvent {}
    unsafe impl aya::Pod for ReadKey {}
    unsafe impl aya::Pod for NetEvent {}
    unsafe impl aya::Pod for InodeKey {}
    unsafe impl aya::Pod for DirtyEvent {}
    unsafe impl aya::Pod for UringEvent {}
    unsafe impl aya::Pod for AttrEvent {}
    unsafe impl aya::Pod for MountEvent {}
    unsafe impl aya::Pod for NsEvent {}
}
