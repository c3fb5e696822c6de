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
/// [`FileEvent::flags`] of an open: its [`ReadKey`] went into the kernel's map `READS`, which
/// counts the process's further opens of the file (a full map counts nothing: they are sent).
pub const READ_COUNTED: u32 = 1 << 4;
/// [`FileEvent::flags`] of a rename, delete or link submitted through io_uring: recorded at
/// the submission (the names the kernel copied), so `result` is not the operation's (it is 0;
/// the completion is not read). Of an open: made through io_uring, seen at its completion
/// (where fentry is refused; the file is the one at the descriptor the completion returned).
pub const VIA_IO_URING: u32 = 1 << 5;
/// [`FileEvent::flags`] of a rename, delete or link made by a syscall: after its paths the
/// tail holds the names the caller's memory held at the call's entry (each NUL-ended; a
/// link's target, then its path; a delete's one), read again at its exit for the paths. A
/// thread that rewrote them during the call shows as the two differing. [`AttrEvent::flags`]
/// of an attribute call that takes a name from the caller's memory: after its path and
/// attribute name, the path's name and the attribute's name at the entry (each NUL-ended,
/// empty when the call has none).
pub const NAMES_AT_ENTRY: u32 = 1 << 6;
/// [`FileEvent::flags`] of an open for write of a regular file that was there before it: the
/// open itself changed the file (O_TRUNC: the kernel truncated it inside the call).
pub const OPEN_MODIFIED: u32 = 1 << 7;

/// What the kernel's map `WRITTEN` holds for a process's file (issue 15 item 5).
pub mod written {
    /// Opened for write in the capture; nothing written through it yet.
    pub const OPENED: u8 = 1;
    /// Written (or truncated) since its last open for write, or dirtied with no open seen.
    pub const MODIFIED: u8 = 2;
}

/// What follows the header. The numbers are fixed: logs and tests depend on them.
///
/// Numbers kept for work under way, so that branches adding kinds do not collide:
/// - 10–19: tamper (issue 13)
/// - 20–29: network flows, inbound connections, io_uring network operations (issue 14)
/// - 30–39: files, mounts, namespaces, dirty inodes (issue 15)
/// - 40–44: failed execs (issue 16)
/// - 45–49: process output (issue 19)
///
/// A new kind: its variant here (with its number in `from_u32`, `name` and `fixed_size`, which
/// have no `_` arm so the compiler asks), its struct below, its probe in
/// `sandbox-watch-ebpf/src/probes/`, and its `Record` in the userspace.
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
    /// Bytes a traced process wrote to its stdout or stderr (one chunk of one write).
    Output = 45,
    /// An execve or execveat that failed (the error from the syscall's exit; the path and
    /// argv read from the caller's memory).
    ExecFailed = 40,
    // 10–19: the agent acting on its monitor (issue 13). All are a [`TamperEvent`]; each is
    // sent at the syscall's entry (before it takes effect) and wakes the reader at once.
    /// A bpf(2) call by a traced task (the command, and the object it names when it names one).
    Bpf = 10,
    /// bpf(2) gave a traced task a descriptor of one of the monitor's own maps, programs or
    /// links (at the exit of `*_GET_FD_BY_ID` and `OBJ_GET`: the object of the returned fd).
    BpfFd = 11,
    /// ptrace, process_vm_readv or process_vm_writev aimed at a thread of the monitor.
    TraceAccess = 12,
    /// pidfd_open or pidfd_getfd aimed at the monitor.
    Pidfd = 13,
    /// A signal to the monitor (any sender's syscall, or the kernel on its behalf), or a kill
    /// call aimed at it (signal 0 included).
    Signal = 14,
    /// An open of the monitor's own files: its `/proc/PID/...` entries or one of its outputs
    /// (by inode, whatever the path). Tail: the walked path, as a `FileEvent`'s.
    MonitorFile = 15,
    /// init_module or finit_module by a traced task: a kernel module load, at its entry (the
    /// module could hide anything once it runs).
    Module = 16,
    // 20–29: network truth from the kernel's own objects (issue 14).
    /// A TCP connection begun by a traced task (at CLOSE→SYN_SENT, in the asking task),
    /// accepted on a traced listener (SYN_RECV→ESTABLISHED), a listener (→LISTEN), or a vsock
    /// connection request: a [`ConnEvent`] with the socket's own addresses and namespace.
    NetConn = 20,
    /// A followed connection became established (its local port known) or closed (its error
    /// and byte counts): a [`ConnEvent`].
    NetConnEnd = 21,
    /// The first packet of a flow (datagrams, raw and packet frames, vsock data), or a DNS
    /// datagram: a [`FlowEvent`]; the flow's counts stay in the kernel's `FLOWS` map.
    NetFlow = 22,
    // 30–34: files (issue 15, attribute changes and escalation).
    /// A traced task changed a file's attributes (chmod, chown, truncate, mkdir, setxattr,
    /// utime families): an [`AttrEvent`], from the syscall's exit.
    Attr = 30,
    // 32–33: writes seen where the kernel dirties the inode (issue 15 item 5).
    /// A traced task dirtied the pages of an inode it was not seen opening for write in this
    /// capture (inherited, pidfd_getfd'd or pre-attach descriptors, shared mappings): a
    /// [`FileEvent`] with dev, ino, generation and the path of the inode's first dentry from
    /// its filesystem's root (`PATH_FROM_INODE`), from `tp_btf/writeback_mark_inode_dirty`.
    InodeDirty = 32,
    /// A file a traced task opened for write in this capture was changed after that open (a
    /// write call that wrote, or the kernel dirtying its data: a store into a mapping, an
    /// io_uring write): a [`FileEvent`] with dev, ino and generation, no path. Sent once per
    /// open for write.
    FileModified = 33,
    // 35–36: mount and namespace changes (issue 15 item 3).
    /// A traced task's mount or namespace call returned (mount, umount2, move_mount,
    /// open_tree, fsopen, fsconfig, fsmount, fspick, mount_setattr, pivot_root, chroot,
    /// unshare, setns): a [`MountEvent`], from the syscall's exit.
    Mount = 35,
}

impl EventKind {
    /// Every kind, in number order.
    pub const ALL: [EventKind; 25] = [
        Self::Fork,
        Self::Exec,
        Self::Exit,
        Self::FileOpen,
        Self::Unlink,
        Self::Rename,
        Self::Net,
        Self::OpenFailed,
        Self::Link,
        Self::Bpf,
        Self::BpfFd,
        Self::TraceAccess,
        Self::Pidfd,
        Self::Signal,
        Self::MonitorFile,
        Self::Module,
        Self::NetConn,
        Self::NetConnEnd,
        Self::NetFlow,
        Self::Attr,
        Self::InodeDirty,
        Self::FileModified,
        Self::Mount,
        Self::ExecFailed,
        Self::Output,
    ];

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
            45 => Self::Output,
            40 => Self::ExecFailed,
            10 => Self::Bpf,
            11 => Self::BpfFd,
            12 => Self::TraceAccess,
            13 => Self::Pidfd,
            14 => Self::Signal,
            15 => Self::MonitorFile,
            16 => Self::Module,
            20 => Self::NetConn,
            21 => Self::NetConnEnd,
            22 => Self::NetFlow,
            30 => Self::Attr,
            32 => Self::InodeDirty,
            33 => Self::FileModified,
            35 => Self::Mount,
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
            Self::Output => "output",
            Self::ExecFailed => "exec_failed",
            Self::Bpf => "bpf",
            Self::BpfFd => "bpf_fd",
            Self::TraceAccess => "trace_access",
            Self::Pidfd => "pidfd",
            Self::Signal => "signal",
            Self::MonitorFile => "monitor_file",
            Self::Module => "module",
            Self::NetConn => "net_conn",
            Self::NetConnEnd => "net_conn_end",
            Self::NetFlow => "net_flow",
            Self::Attr => "attr",
            Self::InodeDirty => "inode_dirty",
            Self::FileModified => "file_modified",
            Self::Mount => "mount",
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
            Self::Output => core::mem::size_of::<OutputEvent>(),
            Self::ExecFailed => core::mem::size_of::<ExecFailedEvent>(),
            Self::Bpf
            | Self::BpfFd
            | Self::TraceAccess
            | Self::Pidfd
            | Self::Signal
            | Self::MonitorFile
            | Self::Module => core::mem::size_of::<TamperEvent>(),
            Self::NetConn | Self::NetConnEnd => core::mem::size_of::<ConnEvent>(),
            Self::NetFlow => core::mem::size_of::<FlowEvent>(),
            Self::Attr => core::mem::size_of::<AttrEvent>(),
            Self::InodeDirty | Self::FileModified => core::mem::size_of::<FileEvent>(),
            Self::Mount => core::mem::size_of::<MountEvent>(),
        }
    }
}

/// The largest kind number plus one: the size of the per-kind drop counter array.
pub const KIND_SLOTS: u32 = {
    let mut max = 0;
    let mut i = 0;
    while i < EventKind::ALL.len() {
        let k = EventKind::ALL[i] as u32;
        if k > max {
            max = k;
        }
        i += 1;
    }
    max + 1
};

// Every kind is in `ALL` exactly once, and `from_u32` reads back each number: a kind added to
// the enum but not to `ALL` (or given a number `from_u32` does not know) fails to build.
const _: () = {
    let mut i = 0;
    while i < EventKind::ALL.len() {
        let k = EventKind::ALL[i];
        match EventKind::from_u32(k as u32) {
            Some(back) => assert!(back as u32 == k as u32, "from_u32 disagrees with a kind"),
            None => panic!("from_u32 does not know a kind of EventKind::ALL"),
        }
        let mut j = i + 1;
        while j < EventKind::ALL.len() {
            assert!(
                EventKind::ALL[j] as u32 != k as u32,
                "a kind is twice in EventKind::ALL"
            );
            j += 1;
        }
        i += 1;
    }
    // ALL names every variant: `count` has no `_` arm, so a new variant must be counted here.
    const fn count(k: EventKind) -> usize {
        match k {
            EventKind::Fork
            | EventKind::Exec
            | EventKind::Exit
            | EventKind::FileOpen
            | EventKind::Unlink
            | EventKind::Rename
            | EventKind::Net
            | EventKind::OpenFailed
            | EventKind::Link
            | EventKind::Output
            | EventKind::ExecFailed
            | EventKind::Bpf
            | EventKind::BpfFd
            | EventKind::TraceAccess
            | EventKind::Pidfd
            | EventKind::Signal
            | EventKind::MonitorFile
            | EventKind::Module
            | EventKind::NetConn
            | EventKind::NetConnEnd
            | EventKind::NetFlow
            | EventKind::Attr
            | EventKind::InodeDirty
            | EventKind::FileModified
            | EventKind::Mount => 25,
        }
    }
    assert!(
        count(EventKind::Fork) == EventKind::ALL.len(),
        "EventKind::ALL misses a kind"
    );
};

/// Kernel constants both sides read (include/uapi/linux/fcntl.h, fs.h, socket.h, in.h).
pub mod abi {
    /// `file->f_mode`: opened for writing; the open created the file.
    pub const FMODE_WRITE: u32 = 0x2;
    pub const FMODE_CREATED: u32 = 0x10_0000;
    /// `inode->i_mode`: the file type bits, and a regular file's.
    pub const S_IFMT: u32 = 0o170_000;
    pub const S_IFREG: u32 = 0o100_000;
    /// `file->f_mode` of an O_PATH descriptor (the same on 6.1 and 6.18): no read, no write.
    pub const FMODE_PATH: u32 = 0x4000;
    /// Open flags (x86-64 and the generic ones: the values are the same on arm64).
    pub const O_ACCMODE: u32 = 0o3;
    pub const O_WRONLY: u32 = 0o1;
    pub const O_RDWR: u32 = 0o2;
    pub const O_CREAT: u32 = 0o100;
    pub const O_EXCL: u32 = 0o200;
    pub const O_TRUNC: u32 = 0o1000;
    pub const O_APPEND: u32 = 0o2000;
    pub const O_NONBLOCK: u32 = 0o4000;
    pub const O_DIRECTORY: u32 = 0o20_0000;
    pub const O_NOFOLLOW: u32 = 0o40_0000;
    pub const O_CLOEXEC: u32 = 0o200_0000;
    pub const O_PATH: u32 = 0o1000_0000;
    pub const O_TMPFILE: u32 = 0o2020_0000;
    /// Socket families, types and protocols.
    pub const AF_UNIX: u16 = 1;
    pub const AF_INET: u16 = 2;
    pub const AF_INET6: u16 = 10;
    pub const AF_PACKET: u16 = 17;
    pub const AF_VSOCK: u16 = 40;
    pub const SOCK_STREAM: u32 = 1;
    pub const SOCK_DGRAM: u32 = 2;
    pub const SOCK_RAW: u32 = 3;
    pub const SOCK_SEQPACKET: u32 = 5;
    pub const IPPROTO_ICMP: u32 = 1;
    pub const IPPROTO_TCP: u32 = 6;
    pub const IPPROTO_UDP: u32 = 17;
    pub const IPPROTO_ICMPV6: u32 = 58;
    pub const IPPROTO_SCTP: u32 = 132;
    pub const IPPROTO_UDPLITE: u32 = 136;
    /// Errors the probes and the decoder name (as positive numbers).
    pub const ECONNRESET: i32 = 104;
    pub const ETIMEDOUT: i32 = 110;
    pub const ECONNREFUSED: i32 = 111;
    pub const EINPROGRESS: i32 = 115;
    /// TCP states (include/net/tcp_states.h), as `inet_sock_set_state` gives them.
    pub const TCP_ESTABLISHED: u32 = 1;
    pub const TCP_SYN_SENT: u32 = 2;
    pub const TCP_SYN_RECV: u32 = 3;
    pub const TCP_TIME_WAIT: u32 = 6;
    pub const TCP_CLOSE: u32 = 7;
    pub const TCP_LISTEN: u32 = 10;
    pub const TCP_NEW_SYN_RECV: u32 = 12;
    /// Ethernet types (include/uapi/linux/if_ether.h).
    pub const ETH_P_IP: u32 = 0x0800;
    pub const ETH_P_IPV6: u32 = 0x86dd;
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
    /// The kernel's global sequence number (map `SEQ`), taken just before the record is put
    /// in the ring: 0, 1, 2, … over every record of every kind, so a record that never
    /// arrives leaves a hole, whatever a drop counter says.
    pub seq: u64,
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

/// An execve or execveat of a traced process that failed. The error is the syscall's result
/// at its exit; the path and argv are read from the caller's memory at that exit (the kernel's
/// own copies are not reachable from a tracepoint), so another thread of the caller could have
/// changed them after the kernel read them: the record says so.
///
/// Tail: `path_len` bytes of the path tried (`PATH_FROM_DIR_AND_NAME`: the directory from the
/// kernel, cwd or `dirfd`, then a NUL, then the name as given), then `argv_len` bytes of argv
/// (each argument ended by NUL). `flags`: `PATH_TRUNCATED`, `ARGV_TRUNCATED`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ExecFailedEvent {
    pub header: EventHeader,
    /// -errno.
    pub result: i32,
    pub flags: u32,
    /// `EXEC_FAILED_EXECVE` or `EXEC_FAILED_EXECVEAT`.
    pub syscall: u32,
    pub path_len: u32,
    pub argv_len: u32,
    pub _pad: u32,
}

pub const EXEC_FAILED_EXECVE: u32 = 1;
pub const EXEC_FAILED_EXECVEAT: u32 = 2;
/// Arguments and bytes of argv kept of a failed exec.
pub const EXEC_FAILED_ARGS: u32 = 64;
pub const EXEC_FAILED_ARGV_MAX: usize = 8 * 1024;

/// How the file event's path was obtained.
pub const PATH_FROM_FILE: u32 = 1;
/// Directory part from the kernel (dirfd or cwd), last part from the syscall argument.
pub const PATH_FROM_DIR_AND_NAME: u32 = 2;
/// The argument as the caller gave it, not resolved (a symbolic link's target).
pub const PATH_AS_GIVEN: u32 = 3;
/// The components of an inode's first dentry up to its filesystem's root, leaf first each
/// ended by NUL (no mount is known: the userspace puts the mount point in front).
pub const PATH_FROM_INODE: u32 = 4;
/// In a `Link` event's `open_flags`: a symbolic link (else a hard link).
pub const LINK_SYMBOLIC: u32 = 1;

/// An open (from the `struct file`), unlink or rename by a traced process.
/// Tail: `path_len` bytes, then `new_path_len` bytes (rename only). A path is either
/// components leaf first each ended by NUL (`PATH_FROM_FILE`), or for
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
    /// `inode->i_generation` (opens): with `dev` and `ino`, one file over time.
    pub generation: u32,
    /// The name an open used (see [`ReadKey::name_key`]); 0 for other records.
    pub name_key: u64,
}

/// Space after [`FileEvent`] for its tail: two paths of `PATH_MAX + NAME_MAX`.
pub const FILE_TAIL: usize = 2 * (PATH_MAX + 256 + 256);

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
    /// [`NET_VSOCK_PEER`].
    pub flags: u32,
    pub _pad: u32,
    /// The kernel socket, to match a connect with its later result.
    pub sock: u64,
}

/// [`NetEvent::flags`]: a vsock connect's peer from the kernel's socket
/// (`vsock_sock.remote_addr` at the call's exit): the CID in `addr`'s first four bytes (native
/// order) and the port (32 bits) in `port`. Without it a vsock event has no peer.
pub const NET_VSOCK_PEER: u32 = 1 << 0;

/// Which stream an [`OutputEvent`] is of.
pub const OUTPUT_STDOUT: u32 = 1;
pub const OUTPUT_STDERR: u32 = 2;
/// Bytes of a write carried by one [`OutputEvent`]; a longer write is sent in chunks.
pub const OUTPUT_CHUNK: usize = 16 * 1024;
/// Chunks sent of one write (`OUTPUT_CHUNK * OUTPUT_CHUNKS` bytes); the rest of a longer write
/// is counted in the kernel's drop counter for `output`, and the stream's hash is not made.
pub const OUTPUT_CHUNKS: usize = 16;
/// In [`OutputEvent::flags`]: the chunk's bytes could not be read from the caller's buffer.
pub const OUTPUT_READ_FAILED: u32 = 1 << 0;
/// In [`OutputEvent::flags`]: a write the probe counts but does not carry (sendfile, splice,
/// copy_file_range, tee, vmsplice): `ret` bytes went to the stream, `len` is 0.
pub const OUTPUT_NOT_CARRIED: u32 = 1 << 1;
/// In [`OutputEvent::flags`]: chunks after this one were not sent (`OUTPUT_CHUNKS` reached).
pub const OUTPUT_CUT: u32 = 1 << 2;
/// In [`OutputEvent::flags`]: a writev's bytes after this chunk were not read (a buffer
/// longer than `OUTPUT_CHUNK`, or more buffers than `OUTPUT_IOVECS`).
pub const OUTPUT_IOVECS_CUT: u32 = 1 << 3;
/// Buffers read of one writev, pwritev or pwritev2.
pub const OUTPUT_IOVECS: usize = 8;

/// [`OutputEvent::via`]: the syscall that wrote (write, pwrite64 and the writev family are
/// carried).
pub const OUTPUT_VIA_WRITE: u32 = 1;
pub const OUTPUT_VIA_PWRITE64: u32 = 2;
pub const OUTPUT_VIA_WRITEV: u32 = 3;
pub const OUTPUT_VIA_PWRITEV: u32 = 4;
pub const OUTPUT_VIA_PWRITEV2: u32 = 5;
pub const OUTPUT_VIA_SENDFILE: u32 = 6;
pub const OUTPUT_VIA_SPLICE: u32 = 7;
pub const OUTPUT_VIA_COPY_FILE_RANGE: u32 = 8;
pub const OUTPUT_VIA_TEE: u32 = 9;
pub const OUTPUT_VIA_VMSPLICE: u32 = 10;

/// Part of what a traced process wrote to its stdout or stderr, read at the write syscall's
/// exit. Tail: `len` bytes, the write's bytes from `offset`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct OutputEvent {
    pub header: EventHeader,
    /// `OUTPUT_STDOUT` or `OUTPUT_STDERR`: the open file written is the one at fd 1 or 2 of
    /// the task (from its file table, not from the fd number alone).
    pub stream: u32,
    /// The descriptor the caller wrote to.
    pub fd: u32,
    /// What the syscall returned: the bytes the kernel wrote (the whole write).
    pub ret: u64,
    /// Where this chunk starts in that write.
    pub offset: u64,
    pub len: u32,
    pub flags: u32,
    /// The syscall that wrote: one of `OUTPUT_VIA_*`.
    pub via: u32,
    pub _pad: u32,
}

/// [`TamperEvent::call`]: the system call (or hook) that made the record.
pub mod tamper {
    /// bpf(2), at its entry.
    pub const BPF: u32 = 1;
    /// bpf(2), at its exit: the descriptor it returned.
    pub const BPF_FD: u32 = 2;
    pub const PTRACE: u32 = 3;
    pub const PROCESS_VM_READV: u32 = 4;
    pub const PROCESS_VM_WRITEV: u32 = 5;
    pub const PIDFD_OPEN: u32 = 6;
    pub const PIDFD_GETFD: u32 = 7;
    pub const PIDFD_SEND_SIGNAL: u32 = 8;
    pub const KILL: u32 = 9;
    pub const TKILL: u32 = 10;
    pub const TGKILL: u32 = 11;
    /// The kernel generated a signal for the monitor (`signal:signal_generate`), whatever
    /// the syscall (kill, a process group, ptrace's stop, an i386 kill…).
    pub const SIGNAL_GENERATE: u32 = 12;
    /// An open (MonitorFile).
    pub const OPEN: u32 = 13;
    /// init_module(image, len, args) (Module): `target` is the image's length.
    pub const INIT_MODULE: u32 = 14;
    /// finit_module(fd, args, flags) (Module): `detail` is the fd, `code` the flags.
    pub const FINIT_MODULE: u32 = 15;

    /// The kind of BPF object in [`super::TamperEvent::detail`] (and in `OWN_IDS` keys).
    pub const OBJ_MAP: u64 = 1;
    pub const OBJ_PROG: u64 = 2;
    pub const OBJ_LINK: u64 = 3;

    /// MonitorFile's [`super::TamperEvent::detail`]: what of the monitor's was opened.
    pub const FILE_PROC: u64 = 1;
    pub const FILE_OUTPUT: u64 = 2;
}

/// Something a traced task did to its monitor, or with bpf(2) (kinds 10–19).
///
/// `monitor` is 1 when the kernel found that the call names the monitor: one of its threads
/// (by number, only when the caller is in the monitor's pid namespace; or by pidfd), one of
/// its BPF objects (`OWN_IDS`), one of its files. Tail (MonitorFile only): `path_len` bytes of
/// the path walked from the `struct file` (components leaf first, each ended by NUL).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct TamperEvent {
    pub header: EventHeader,
    /// A [`tamper`] call constant.
    pub call: u32,
    pub monitor: u32,
    /// bpf: the command; ptrace: the request; a signal: its number; MonitorFile: `f_mode`.
    pub code: u64,
    /// The process aimed at (ptrace, process_vm_*, pidfd_*, kill: the number given; a
    /// signal: the target's thread group; MonitorFile of /proc: the pid the entry belongs to),
    /// or the BPF object's id.
    pub target: u64,
    /// bpf: the object's kind (`tamper::OBJ_*`, 0 none); a signal: the target thread;
    /// pidfd_getfd: the descriptor asked for; MonitorFile: `tamper::FILE_*`.
    pub detail: u64,
    /// bpf: the first 16 bytes of `attr` as the caller gave them (user memory: a detail, the
    /// decision above is made on kernel objects where there are any).
    pub attr: [u64; 2],
    /// MonitorFile: the file.
    pub ino: u64,
    pub magic: u64,
    pub dev: u32,
    /// signal_generate's result (0 delivered, 1 ignored, 2 already pending, …).
    pub result: i32,
    pub path_len: u32,
    pub flags: u32,
}

/// Key of the loader's `OUTPUTS` map: a file the monitor writes (or reads a secret from).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FileKey {
    pub dev: u32,
    pub _pad: u32,
    pub ino: u64,
}

/// Slots of the kernel's `FAILS` counters: a map insert that failed.
pub mod fails {
    /// A traced process's child (or a task found in the container's cgroup) could not be
    /// added to `TRACED`: that process and what it starts are not followed.
    pub const TRACED: u32 = 0;
    /// A read could not be entered in `READS`: it was sent anyway (nothing lost), later
    /// opens of that file are sent again instead of counted.
    pub const READS: u32 = 1;
    /// A monitor thread could not be added to `MON_TIDS`.
    pub const MON_TIDS: u32 = 2;
    /// A write could not be entered in `WRITTEN` (an LRU: only when every entry of the CPU's
    /// list is in use): that file's next dirtying is sent again, not lost.
    pub const WRITTEN: u32 = 3;
    /// A rename's, delete's, link's or attribute call's names at its entry were not in
    /// `ENTRY_NAMES` at its exit (the insert failed, 1,024 newer calls in flight pushed them
    /// out, or the process was traced during the call): its record is sent without them (a
    /// race on them is not seen).
    pub const NAMES: u32 = 4;
    pub const SLOTS: u32 = 5;
}

/// [`ConnEvent::op`].
pub mod conn {
    /// NetConn: a traced task began a connection (TCP at SYN_SENT; vsock at its request).
    pub const OUT: u32 = 1;
    /// NetConn: a connection arrived on a traced task's listener and was established.
    pub const IN: u32 = 2;
    /// NetConn: a traced task's socket began listening.
    pub const LISTEN: u32 = 3;
    /// NetConnEnd: a followed connection is established (its local address is known now).
    pub const UP: u32 = 4;
    /// NetConnEnd: a followed connection closed (`err`, byte counts).
    pub const DOWN: u32 = 5;

    /// [`super::ConnEvent::flags`]: made by an io_uring worker or SQPOLL thread (PF_IO_WORKER),
    /// which has no syscall of its own.
    pub const IO_WORKER: u32 = 1 << 0;
    /// The listener's owner was found but `CONNS` was full: this connection's end is not seen.
    pub const UNFOLLOWED: u32 = 1 << 1;
}

/// A connection of a traced process, from the socket the kernel uses (kinds NetConn and
/// NetConnEnd). Addresses are as the `struct sock` holds them: 4 bytes for v4 (the first
/// four), 16 for v6; for vsock the first four bytes are the CID (native order). Ports are in
/// host order. `header.tgid`/`start_ns` name the owner, whatever task the hook ran in.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ConnEvent {
    pub header: EventHeader,
    /// A [`conn`] op.
    pub op: u32,
    pub family: u32,
    pub sock_type: u32,
    pub protocol: u32,
    /// The local end.
    pub saddr: [u8; 16],
    /// The remote end (out: the destination; in: the peer that connected).
    pub daddr: [u8; 16],
    pub sport: u32,
    pub dport: u32,
    /// The network namespace of the socket itself.
    pub sk_netns: u32,
    /// The namespace of the task the hook ran in, when that is the asking task (out,
    /// listen); 0 otherwise.
    pub task_netns: u32,
    /// The asking task's system call (`orig_ax` of the registers saved at its entry: connect,
    /// sendto, sendmsg, io_uring_enter, listen, …), -1 when it has none (`IO_WORKER`).
    pub syscall: i32,
    pub flags: u32,
    /// DOWN: `sk_err` (positive: 111 refused, 110 timed out, 104 reset; 0 a normal close).
    pub err: i32,
    /// The TCP state before the change that made the record.
    pub old_state: u32,
    /// DOWN (TCP): `tcp_sock.bytes_acked` (a FIN counts one) and `bytes_received`.
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// The kernel socket: the records of one connection share it.
    pub sock: u64,
}

/// Key of the kernel's `FLOWS` map: one flow of one process.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FlowKey {
    pub tgid: u32,
    /// The socket's family (AF_INET, AF_INET6, AF_PACKET, AF_VSOCK, AF_UNIX).
    pub family: u32,
    pub sock_type: u32,
    /// The packet's own transport protocol (IP protocol number), or `FLOW_ETHERTYPE |
    /// ethertype` for a frame that is not IP; 0 for vsock and unix.
    pub proto: u32,
    /// The packet's destination (4 or 16 bytes, by `ip`); vsock: the CID in the first four.
    pub daddr: [u8; 16],
    /// The destination port (UDP, SCTP, UDP-Lite, vsock), host order; 0 for others.
    pub dport: u32,
    /// The network namespace of the device the packet left by (AF_UNIX, vsock: the socket's).
    pub netns: u32,
    /// The IP version of the packet (4, 6), 0 for other frames.
    pub ip: u32,
    /// AF_PACKET: the device the frame left by (`net_device.ifindex`): a packet socket's
    /// destination is its interface. 0 for other families.
    pub ifindex: u32,
    pub start_ns: u64,
}

/// `proto` of a [`FlowKey`] for a frame that is not IP: this bit and the ethertype.
pub const FLOW_ETHERTYPE: u32 = 1 << 16;

/// Value in `FLOWS`: what the flow carried so far.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct FlowValue {
    pub packets: u64,
    /// Bytes as they left (link header included: `skb->len` at the device).
    pub bytes: u64,
}

/// [`FlowEvent::flags`]: `FLOWS` was full: this packet was not counted there (it is one
/// packet on its own, and the loss is counted).
pub const FLOW_UNAGGREGATED: u32 = 1 << 0;

/// A flow's first packet (kind NetFlow). No payload is kept.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct FlowEvent {
    pub header: EventHeader,
    pub key: FlowKey,
    /// The packet's source address and port.
    pub saddr: [u8; 16],
    pub sport: u32,
    /// The device it left by.
    pub ifindex: u32,
    /// ICMP: type << 8 | code.
    pub icmp: u32,
    /// Bytes of this packet.
    pub len: u32,
    pub flags: u32,
    /// The socket's own namespace (it may differ from the device's: a socket made before a
    /// setns sends from its own).
    pub sk_netns: u32,
    pub _pad: u32,
    /// The device's name (`net_device.name`, NUL-padded).
    pub device: [u8; 16],
}

/// What an [`AttrEvent`] changed.
pub mod attr {
    /// chmod, fchmod, fchmodat, fchmodat2: `value` is the mode.
    pub const CHMOD: u32 = 1;
    /// chown, lchown, fchown, fchownat: `value` the uid, `value2` the gid (u32::MAX: unchanged).
    pub const CHOWN: u32 = 2;
    /// truncate, ftruncate: `value` the length.
    pub const TRUNCATE: u32 = 3;
    /// mkdir, mkdirat: `value` the mode.
    pub const MKDIR: u32 = 4;
    /// setxattr, lsetxattr, fsetxattr, setxattrat: the attribute's name in the tail (never its
    /// value).
    pub const SETXATTR: u32 = 5;
    /// utimensat, utime, utimes, futimesat.
    pub const UTIME: u32 = 6;
    /// [`super::AttrEvent::flags`]: the attribute's name was longer than the bytes kept.
    pub const NAME_TRUNCATED: u32 = 1 << 8;
    /// Bytes kept of an extended attribute's name (XATTR_NAME_MAX is 255).
    pub const NAME_MAX: usize = 256;

    /// x86-64 system call numbers of the attribute calls (the record's `__syscall_nr`: one
    /// program serves every tracepoint, and tells them apart by it).
    pub mod nr {
        pub const TRUNCATE: i32 = 76;
        pub const FTRUNCATE: i32 = 77;
        pub const MKDIR: i32 = 83;
        pub const CHMOD: i32 = 90;
        pub const FCHMOD: i32 = 91;
        pub const CHOWN: i32 = 92;
        pub const FCHOWN: i32 = 93;
        pub const LCHOWN: i32 = 94;
        pub const UTIME: i32 = 132;
        pub const SETXATTR: i32 = 188;
        pub const LSETXATTR: i32 = 189;
        pub const FSETXATTR: i32 = 190;
        pub const UTIMES: i32 = 235;
        pub const MKDIRAT: i32 = 258;
        pub const FCHOWNAT: i32 = 260;
        pub const FUTIMESAT: i32 = 261;
        pub const FCHMODAT: i32 = 268;
        pub const UTIMENSAT: i32 = 280;
        pub const FCHMODAT2: i32 = 452;
        pub const SETXATTRAT: i32 = 463;
    }
}

/// An attribute change by a traced task (see [`attr`]). Tail: `path_len` bytes of path (as a
/// [`FileEvent`]'s, of kind `path_kind`), then `name_len` bytes of the extended attribute's
/// name (setxattr only), then with [`NAMES_AT_ENTRY`] the names at the call's entry.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct AttrEvent {
    pub header: EventHeader,
    /// An [`attr`] constant.
    pub op: u32,
    /// The system call number.
    pub syscall: i32,
    /// [`PATH_TRUNCATED`], [`attr::NAME_TRUNCATED`], [`VIA_IO_URING`] (an io_uring MKDIRAT
    /// request: `result` is not its), [`NAMES_AT_ENTRY`].
    pub flags: u32,
    pub path_kind: u32,
    pub path_len: u32,
    pub name_len: u32,
    /// 0 or -errno.
    pub result: i32,
    /// A descriptor-based call: the file's `dev` (its `ino` and `magic` below); 0 otherwise.
    pub dev: u32,
    pub ino: u64,
    pub magic: u64,
    /// See [`attr`].
    pub value: u64,
    pub value2: u64,
}

/// What a [`MountEvent`] is of: the call (`op`), where its names came from (`flags`), and
/// which namespace is where in [`MountEvent::ns`].
pub mod mount {
    pub const MOUNT: u32 = 1;
    /// umount2 (its tracepoint is `sys_exit_umount`).
    pub const UMOUNT: u32 = 2;
    pub const MOVE_MOUNT: u32 = 3;
    /// open_tree and open_tree_attr.
    pub const OPEN_TREE: u32 = 4;
    pub const FSOPEN: u32 = 5;
    pub const FSCONFIG: u32 = 6;
    pub const FSMOUNT: u32 = 7;
    pub const FSPICK: u32 = 8;
    pub const MOUNT_SETATTR: u32 = 9;
    pub const PIVOT_ROOT: u32 = 10;
    pub const CHROOT: u32 = 11;
    pub const UNSHARE: u32 = 12;
    pub const SETNS: u32 = 13;

    /// [`super::MountEvent::flags`]: the record's dentry is a mount's tree as the kernel holds
    /// it (the descriptor open_tree or fsmount returned, or move_mount's from-descriptor): the
    /// source, with the mount's source name (`mnt_devname`) and its filesystem's type from
    /// the kernel. Without it the source is the caller's name (`source_len`).
    pub const SOURCE_FROM_TREE: u32 = 1 << 8;
    /// Some name of the record (source, target, fstype or key) was read from the caller's
    /// memory at the call's exit: another thread could have changed it after the kernel
    /// read it.
    pub const CALLER_NAMES: u32 = 1 << 9;
    /// The dentry's walk was cut.
    pub const DENTRY_TRUNCATED: u32 = 1 << 10;
    /// The record's dentry is the task's root after the call (chroot, pivot_root, setns).
    pub const HAS_ROOT: u32 = 1 << 11;
    /// Bytes kept of a filesystem type, an fsconfig key, a mount's source name.
    pub const NAME_MAX: usize = 256;

    /// Where each namespace is in [`super::MountEvent::ns`]: the task's, after the call (pid
    /// and time: the ones its children get).
    pub const NS_MNT: usize = 0;
    pub const NS_NET: usize = 1;
    pub const NS_PID: usize = 2;
    pub const NS_USER: usize = 3;
    pub const NS_UTS: usize = 4;
    pub const NS_IPC: usize = 5;
    pub const NS_CGROUP: usize = 6;
    pub const NS_TIME: usize = 7;
    pub const NS_COUNT: usize = 8;

    /// x86-64 system call numbers of the calls (the record's `__syscall_nr`: one program
    /// serves every tracepoint).
    pub mod nr {
        pub const PIVOT_ROOT: i32 = 155;
        pub const CHROOT: i32 = 161;
        pub const MOUNT: i32 = 165;
        pub const UMOUNT2: i32 = 166;
        pub const UNSHARE: i32 = 272;
        pub const SETNS: i32 = 308;
        pub const OPEN_TREE: i32 = 428;
        pub const MOVE_MOUNT: i32 = 429;
        pub const FSOPEN: i32 = 430;
        pub const FSCONFIG: i32 = 431;
        pub const FSMOUNT: i32 = 432;
        pub const FSPICK: i32 = 433;
        pub const MOUNT_SETATTR: i32 = 442;
        pub const OPEN_TREE_ATTR: i32 = 467;
    }
}

/// A mount or namespace call of a traced task, at its exit (see [`mount`]). Tail, in this
/// order: `dentry_len` bytes of a dentry's path up to its filesystem's root (as
/// `PATH_FROM_INODE`, on `dentry_dev`): a tree's root (`SOURCE_FROM_TREE`) or the task's
/// root after the call (`HAS_ROOT`; walked in the mount namespace a pivoted root is only
/// `/`); `devname_len` bytes of a tree's source as the kernel keeps it (NUL-ended);
/// `name_len` bytes of a NUL-ended name (a tree's filesystem type from the kernel, mount's
/// and fsopen's type as given, fsconfig's key); `source_len` bytes of the source the caller
/// named (mount, move_mount, open_tree, pivot_root's new root; not when the tree is known)
/// and `target_len` of the target (mount, umount2, move_mount, fspick, mount_setattr,
/// pivot_root's put_old, chroot's path), both `PATH_FROM_DIR_AND_NAME`. Never mount's data
/// (options can hold passwords) nor fsconfig's values.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct MountEvent {
    pub header: EventHeader,
    /// A [`mount`] op.
    pub op: u32,
    /// The system call number.
    pub syscall: i32,
    /// What the call returned: 0, a descriptor (open_tree, fsopen, fsmount, fspick), or -errno.
    pub result: i64,
    /// The call's flags: mount's mountflags, umount2's, move_mount's, open_tree's, fsopen's,
    /// fsmount's, fspick's, mount_setattr's; unshare's CLONE_* flags; setns's nstype (when
    /// the caller gave 0, the type of the namespace its descriptor names); fsconfig's command.
    pub call_flags: u64,
    /// [`mount`] flags, [`PATH_TRUNCATED`] (source), [`NEW_PATH_TRUNCATED`] (target).
    pub flags: u32,
    /// The dentry's superblock dev and inode (`SOURCE_FROM_TREE`, `HAS_ROOT`).
    pub dentry_dev: u32,
    pub dentry_ino: u64,
    /// The task's namespaces after the call (inode numbers, `mount::NS_*`; 0 unknown).
    pub ns: [u32; mount::NS_COUNT],
    pub dentry_len: u32,
    pub devname_len: u32,
    pub name_len: u32,
    pub source_len: u32,
    pub target_len: u32,
    pub _pad: u32,
}

/// Scratch space a probe assembles a record in before it copies the used part to the ring.
pub const SCRATCH_SIZE: usize = 64 * 1024;

/// Key of the kernel's table of plain reads already reported (map `READS`): a process
/// opening the same inode again only bumps the count stored under this key.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ReadKey {
    pub tgid: u32,
    pub dev: u32,
    pub ino: u64,
    /// The process's start (pids are reused).
    pub start_ns: u64,
    /// `inode->i_generation` (inode numbers are reused).
    pub generation: u32,
    pub _pad: u32,
    /// The name used: the dentry's name hash and length, its parent and the mount, mixed. A
    /// second path to one inode (a hard link, a bind mount) is a read of its own.
    pub name_key: u64,
}

/// Key of `ALWAYS` (inodes whose every open is sent: credentials, found by path or registered
/// at start by their inode): the superblock's dev and the inode number.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct InodeKey {
    pub dev: u32,
    pub _pad: u32,
    pub ino: u64,
}

/// Names of the globals the userspace sets at load time.
pub mod globals {
    /// Container mode: the cgroup id whose tasks are traced (0 = off), and its level.
    pub const CGROUP_ID: &str = "CGROUP_ID";
    pub const CGROUP_LEVEL: &str = "CGROUP_LEVEL";
    /// The monitor's own thread group id and the inode of its pid namespace: a number given
    /// to kill or ptrace names the monitor only in that namespace.
    pub const MONITOR_TGID: &str = "MONITOR_TGID";
    pub const MONITOR_PIDNS: &str = "MONITOR_PIDNS";
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
    unsafe impl aya::Pod for InodeKey {}
    unsafe impl aya::Pod for NetEvent {}
    unsafe impl aya::Pod for OutputEvent {}
    unsafe impl aya::Pod for ExecFailedEvent {}
    unsafe impl aya::Pod for TamperEvent {}
    unsafe impl aya::Pod for FileKey {}
    unsafe impl aya::Pod for ConnEvent {}
    unsafe impl aya::Pod for FlowKey {}
    unsafe impl aya::Pod for FlowValue {}
    unsafe impl aya::Pod for FlowEvent {}
    unsafe impl aya::Pod for AttrEvent {}
    unsafe impl aya::Pod for MountEvent {}
}
