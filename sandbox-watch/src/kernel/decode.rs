//! Ring-buffer bytes to typed events. Pure: it never trusts a length in the record and never
//! panics on any input (fuzzed in tests), so a malformed record is an error, not a crash.
use sandbox_watch_common as common;
use sandbox_watch_common::{
    AttrEvent, DirtyEvent, EventKind, ExecEvent, FileEvent, MountEvent, NsEvent, UringEvent,
};

/// Fields every event has.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Header {
    pub tgid: u32,
    /// Thread that caused the event.
    pub pid: u32,
    /// Boot clock, ns.
    pub ktime_ns: u64,
    /// Thread group leader's start (boot clock, ns).
    pub start_ns: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exec {
    pub header: Header,
    pub ppid: u32,
    pub uid: u32,
    pub euid: u32,
    pub gid: u32,
    pub cgroup_id: u64,
    pub netns: u32,
    pub mntns: u32,
    pub pidns: u32,
    pub userns: u32,
    pub comm: String,
    /// The file name execve was given (may be relative to `cwd`).
    pub filename: String,
    pub cwd: String,
    pub cwd_truncated: bool,
    pub argv: Vec<String>,
    pub argv_truncated: bool,
    /// Bytes of argv in the process (more than were kept when truncated).
    pub argv_full_len: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileOpen {
    pub header: Header,
    pub magic: u64,
    pub dev: u32,
    pub ino: u64,
    pub open_flags: u32,
    pub f_mode: u32,
    pub path: String,
    pub path_truncated: bool,
    /// `ID_*` flags of the inode (known to the kernel from the start), and for a created file
    /// its directory's above `ID_PARENT_SHIFT`.
    pub identity: u32,
    pub generation: u32,
    /// The name the open used, as the kernel's read counts key it.
    pub name_key: u64,
    /// A created file's directory (inode number, generation; same dev), 0 otherwise.
    pub parent_ino: u64,
    pub parent_generation: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PathOp {
    pub header: Header,
    pub path: String,
    pub path_truncated: bool,
    /// Rename only.
    pub new_path: Option<String>,
    pub new_path_truncated: bool,
    /// 0 or -errno.
    pub result: i32,
    /// `ID_*` flags of the inodes involved, where the kernel named them (fentry), and the
    /// first one's inode.
    pub identity: u32,
    pub key: Option<common::InodeKey>,
    /// The paths are the kernel's own (fentry on security_path_*), not the caller's names.
    pub from_kernel: bool,
    /// The names as read at the syscall's entry, where they differed at its exit.
    pub raced: Option<Raced>,
    /// A name could not be read at the entry, so it was not compared.
    pub unchecked: bool,
}

/// The names a path syscall had at its entry, when a thread changed them before its exit
/// (each resolved against the same directory as the name at the exit).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Raced {
    pub path: Option<String>,
    pub new_path: Option<String>,
}

/// The kernel dirtied a regular file's inode in a traced process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dirty {
    pub header: Header,
    pub magic: u64,
    pub dev: u32,
    pub ino: u64,
    pub generation: u32,
    pub identity: u32,
    pub dirty_flags: u32,
    /// The syscall the task was in (-1: a page fault).
    pub syscall: i32,
    pub nlink: u32,
    /// The process opened the inode for write in the capture (its entry exists).
    pub opened: bool,
    pub io_worker: bool,
    pub pages: bool,
    pub unlinked: bool,
    /// Its newest name, from the filesystem's root (not a mount's); None: it has none.
    pub fs_path: Option<String>,
    pub path_truncated: bool,
}

/// An io_uring file request and its result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Uring {
    pub header: Header,
    pub opcode: u32,
    pub result: i32,
    pub flags: u32,
    pub slot: u32,
    /// The first name resolved against its directory (a symbolic link's target as given).
    pub path: Option<String>,
    /// The second name: a rename's or link's new name; an xattr's attribute name.
    pub second: Option<String>,
    /// An open's file, walked from the kernel.
    pub file: Option<String>,
    pub identity: u32,
    pub dev: u32,
    pub ino: u64,
    pub generation: u32,
    pub magic: u64,
    pub f_mode: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttrOp {
    Chmod,
    Chown,
    Truncate,
    Utimes,
    SetXattr,
    RemoveXattr,
}

/// chmod, chown, truncate, utimes, setxattr or removexattr.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attr {
    pub header: Header,
    pub op: AttrOp,
    pub result: i32,
    pub mode: u32,
    /// u32::MAX: unchanged.
    pub uid: u32,
    pub gid: u32,
    /// truncate: the length; setxattr: the value's size; utimes: the new mtime (seconds).
    pub size: u64,
    pub at_flags: u32,
    pub path: String,
    pub path_truncated: bool,
    pub by_fd: bool,
    pub from_kernel: bool,
    pub times_given: bool,
    pub xattr: Option<String>,
    pub dev: u32,
    pub ino: u64,
    pub generation: u32,
    pub identity: u32,
    pub magic: u64,
    /// The name at entry, where it differed at the exit.
    pub raced_path: Option<String>,
    pub unchecked: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MountOp {
    Mount,
    Umount,
    MoveMount,
    OpenTree,
    Fsopen,
    Fsmount,
    Fspick,
    MountSetattr,
    PivotRoot,
    Chroot,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    pub header: Header,
    pub op: MountOp,
    pub result: i32,
    pub flags: u64,
    pub mntns: u32,
    pub source: Option<String>,
    pub target: Option<String>,
    pub fstype: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NsOp {
    Unshare,
    Setns,
}

/// unshare or setns: the namespaces after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Namespace {
    pub header: Header,
    pub op: NsOp,
    pub result: i32,
    pub flags: u64,
    pub netns: u32,
    pub mntns: u32,
    pub pidns: u32,
    pub userns: u32,
    pub utsns: u32,
}

/// An open that failed: no file, so the path is the caller's (its directory from the kernel).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailedOpen {
    pub header: Header,
    pub path: String,
    pub path_truncated: bool,
    pub open_flags: u32,
    /// -errno.
    pub result: i32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetOp {
    Connect,
    /// The outcome of a connect that was in progress.
    ConnectResult,
    Listen,
    /// A datagram socket bound as a server.
    Bind,
    Dns,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Net {
    pub header: Header,
    pub op: NetOp,
    pub family: u32,
    pub sock_type: u32,
    pub protocol: u32,
    /// The remote (connect, dns) or local (listen, bind) address, when an IP one.
    pub addr: Option<std::net::IpAddr>,
    pub port: u16,
    /// Network namespace of the socket (0 when the socket could not be read).
    pub netns: u32,
    /// 0 or -errno.
    pub result: i32,
    pub sock: u64,
    /// A unix-domain connect's path (`@name` for the abstract namespace).
    pub unix_path: Option<String>,
    /// The first bytes of a DNS datagram.
    pub payload: Vec<u8>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    Fork {
        header: Header,
        child_tgid: u32,
        child_start_ns: u64,
    },
    Exec(Exec),
    Exit {
        header: Header,
        exit_code: u32,
    },
    FileOpen(FileOpen),
    Unlink(PathOp),
    Rename(PathOp),
    FailedOpen(FailedOpen),
    /// A link made: `path` is its target (as given, for a symbolic link), `new_path` the link.
    Link {
        op: PathOp,
        symbolic: bool,
    },
    Net(Net),
    Dirty(Dirty),
    Uring(Uring),
    Attr(Attr),
    /// A directory (or a special file: `mode` says which) made.
    Mkdir {
        op: PathOp,
        mode: u32,
    },
    Mount(Mount),
    Namespace(Namespace),
}

impl Event {
    pub fn header(&self) -> &Header {
        match self {
            Event::Fork { header, .. } | Event::Exit { header, .. } => header,
            Event::Exec(e) => &e.header,
            Event::FileOpen(f) => &f.header,
            Event::Unlink(p) | Event::Rename(p) => &p.header,
            Event::FailedOpen(f) => &f.header,
            Event::Link { op, .. } | Event::Mkdir { op, .. } => &op.header,
            Event::Net(n) => &n.header,
            Event::Dirty(d) => &d.header,
            Event::Uring(u) => &u.header,
            Event::Attr(a) => &a.header,
            Event::Mount(m) => &m.header,
            Event::Namespace(n) => &n.header,
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("record of {0} bytes is shorter than its header")]
    Short(usize),
    #[error("unknown event kind {0}")]
    UnknownKind(u32),
    #[error("{kind} record of {len} bytes is shorter than its fixed part ({need})")]
    Truncated {
        kind: &'static str,
        len: usize,
        need: usize,
    },
    #[error("{kind} record says its tail has {claimed} bytes but {present} are present")]
    BadTail {
        kind: &'static str,
        claimed: usize,
        present: usize,
    },
}

/// Reads a `T` (a `#[repr(C)]` plain-data struct from sandbox-watch-common) from the start of
/// `bytes`, whatever their alignment.
fn read<T: aya::Pod>(bytes: &[u8]) -> Option<T> {
    if bytes.len() < size_of::<T>() {
        return None;
    }
    // SAFETY: T is Pod (any bit pattern is valid) and the length was checked.
    Some(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) })
}

fn header(h: &common::EventHeader) -> Header {
    Header {
        tgid: h.tgid,
        pid: h.pid,
        ktime_ns: h.ktime_ns,
        start_ns: h.start_ns,
    }
}

pub fn decode(bytes: &[u8]) -> Result<Event, DecodeError> {
    let raw: common::EventHeader = read(bytes).ok_or(DecodeError::Short(bytes.len()))?;
    let kind = EventKind::from_u32(raw.kind).ok_or(DecodeError::UnknownKind(raw.kind))?;
    let need = kind.fixed_size();
    if bytes.len() < need {
        return Err(DecodeError::Truncated {
            kind: kind.name(),
            len: bytes.len(),
            need,
        });
    }
    let hdr = header(&raw);
    let tail = &bytes[need..];
    Ok(match kind {
        EventKind::Net => Event::Net(net(hdr, read(bytes).expect("length checked"), tail)?),
        EventKind::Fork => {
            let f: common::ForkEvent = read(bytes).expect("length checked");
            Event::Fork {
                header: hdr,
                child_tgid: f.child_tgid,
                child_start_ns: f.child_start_ns,
            }
        }
        EventKind::Exit => {
            let e: common::ExitEvent = read(bytes).expect("length checked");
            Event::Exit {
                header: hdr,
                exit_code: e.exit_code,
            }
        }
        EventKind::Exec => Event::Exec(exec(hdr, read(bytes).expect("length checked"), tail)?),
        EventKind::FileOpen => {
            let f: FileEvent = read(bytes).expect("length checked");
            let path_bytes = take(kind, tail, f.path_len as usize)?;
            Event::FileOpen(FileOpen {
                header: hdr,
                magic: f.magic,
                dev: f.dev,
                ino: f.ino,
                open_flags: f.open_flags,
                f_mode: f.f_mode,
                path: path_from_walk(path_bytes),
                path_truncated: f.flags & common::PATH_TRUNCATED != 0,
                identity: f.identity,
                generation: f.generation,
                name_key: f.name_key,
                parent_ino: f.parent_ino,
                parent_generation: f.parent_generation,
            })
        }
        EventKind::OpenFailed => {
            let f: FileEvent = read(bytes).expect("length checked");
            let path = take(kind, tail, f.path_len as usize)?;
            Event::FailedOpen(FailedOpen {
                header: hdr,
                path: path_of(f.path_kind, path),
                path_truncated: f.flags & common::PATH_TRUNCATED != 0,
                open_flags: f.open_flags,
                result: f.result,
            })
        }
        EventKind::Link => {
            let f: FileEvent = read(bytes).expect("length checked");
            Event::Link {
                op: path_op(kind, hdr, &f, tail, true)?,
                symbolic: f.open_flags & common::LINK_SYMBOLIC != 0,
            }
        }
        EventKind::Mkdir => {
            let f: FileEvent = read(bytes).expect("length checked");
            Event::Mkdir {
                op: path_op(kind, hdr, &f, tail, false)?,
                mode: f.open_flags,
            }
        }
        EventKind::Unlink | EventKind::Rename => {
            let f: FileEvent = read(bytes).expect("length checked");
            let op = path_op(kind, hdr, &f, tail, kind == EventKind::Rename)?;
            if kind == EventKind::Rename {
                Event::Rename(op)
            } else {
                Event::Unlink(op)
            }
        }
        EventKind::Dirty => Event::Dirty(dirty(hdr, read(bytes).expect("length checked"), tail)?),
        EventKind::Uring => Event::Uring(uring(hdr, read(bytes).expect("length checked"), tail)?),
        EventKind::Attr => Event::Attr(attr(hdr, read(bytes).expect("length checked"), tail)?),
        EventKind::Mount => Event::Mount(mount(hdr, read(bytes).expect("length checked"), tail)?),
        EventKind::Namespace => {
            let n: NsEvent = read(bytes).expect("length checked");
            Event::Namespace(Namespace {
                header: hdr,
                op: if n.op == common::NS_SETNS {
                    NsOp::Setns
                } else {
                    NsOp::Unshare
                },
                result: n.result,
                flags: n.flags,
                netns: n.netns,
                mntns: n.mntns,
                pidns: n.pidns,
                userns: n.userns,
                utsns: n.utsns,
            })
        }
    })
}

/// A delete, rename, link or mkdir: its paths, and the names at entry where they raced.
fn path_op(
    kind: EventKind,
    header: Header,
    f: &FileEvent,
    tail: &[u8],
    two: bool,
) -> Result<PathOp, DecodeError> {
    let first = take(kind, tail, f.path_len as usize)?;
    let rest = &tail[first.len()..];
    let second = take(kind, rest, f.new_path_len as usize)?;
    let raced_bytes = take(kind, &rest[second.len()..], f.raced_len as usize)?;
    let raced = (f.flags & (common::NAME_RACED | common::NEW_NAME_RACED) != 0).then(|| {
        let slot = common::RACED_NAME_MAX;
        let a = raced_bytes.get(..slot).map(until_nul).unwrap_or_default();
        let b = raced_bytes.get(slot..).map(until_nul).unwrap_or_default();
        Raced {
            path: (f.flags & common::NAME_RACED != 0).then(|| renamed(f.path_kind, first, a)),
            new_path: (f.flags & common::NEW_NAME_RACED != 0)
                .then(|| renamed(f.new_path_kind, second, b)),
        }
    });
    Ok(PathOp {
        header,
        path: path_of(f.path_kind, first),
        path_truncated: f.flags & common::PATH_TRUNCATED != 0,
        new_path: two.then(|| path_of(f.new_path_kind, second)),
        new_path_truncated: f.flags & common::NEW_PATH_TRUNCATED != 0,
        result: f.result,
        identity: f.identity,
        key: (f.ino != 0).then_some(common::InodeKey {
            dev: f.dev,
            generation: f.generation,
            ino: f.ino,
        }),
        from_kernel: f.flags & common::PATH_FROM_KERNEL != 0,
        raced,
        unchecked: f.flags & NAME_UNCHECKED != 0,
    })
}

/// In a record's flags: a name was not readable at the syscall's entry (not compared).
pub const NAME_UNCHECKED: u32 = 1 << 7;

/// A path of `kind` with its last part replaced by `name` (a name as the caller gave it at
/// the syscall's entry): the same directory, the other name.
fn renamed(kind: u32, bytes: &[u8], name: &[u8]) -> String {
    let name = escape(name);
    if kind == common::PATH_AS_GIVEN || name.starts_with('/') {
        return normalize_or_given(kind, &name);
    }
    if kind != common::PATH_FROM_DIR_AND_NAME {
        // A kernel-walked path: replace its last component.
        let path = path_from_walk(bytes);
        let dir = path.rsplit_once('/').map_or("", |(d, _)| d);
        return normalize(&format!("{dir}/{name}"));
    }
    let (dir, _) = split_dir_and_name(bytes);
    normalize(&format!("{}/{name}", path_from_walk(dir)))
}

fn normalize_or_given(kind: u32, name: &str) -> String {
    if kind == common::PATH_AS_GIVEN {
        name.to_string()
    } else {
        normalize(name)
    }
}

fn dirty(header: Header, d: DirtyEvent, tail: &[u8]) -> Result<Dirty, DecodeError> {
    let path = take(EventKind::Dirty, tail, d.path_len as usize)?;
    Ok(Dirty {
        header,
        magic: d.magic,
        dev: d.dev,
        ino: d.ino,
        generation: d.generation,
        identity: d.identity,
        dirty_flags: d.dirty_flags,
        syscall: d.syscall,
        nlink: d.nlink,
        opened: d.bits & common::DIRTY_OPENED != 0,
        io_worker: d.bits & common::DIRTY_IO_WORKER != 0,
        pages: d.bits & common::DIRTY_PAGES != 0,
        unlinked: d.bits & common::DIRTY_UNLINKED != 0,
        fs_path: (d.bits & common::DIRTY_NO_NAME == 0).then(|| path_from_walk(path)),
        path_truncated: d.bits & common::DIRTY_PATH_TRUNCATED != 0,
    })
}

fn uring(header: Header, u: UringEvent, tail: &[u8]) -> Result<Uring, DecodeError> {
    let kind = EventKind::Uring;
    let slot = common::URING_NAME_MAX;
    let names = take(kind, tail, 2 * slot)?;
    let rest = &tail[2 * slot..];
    let dir_a = take(kind, rest, u.dir_a_len as usize)?;
    let rest = &rest[dir_a.len()..];
    let dir_b = take(kind, rest, u.dir_b_len as usize)?;
    let rest = &rest[dir_b.len()..];
    let file = take(kind, rest, u.path_len as usize)?;
    let a = until_nul(&names[..slot]);
    let b = until_nul(&names[slot..]);
    let resolve = |dir: &[u8], name: &[u8]| {
        let name = escape(name);
        if name.starts_with('/') {
            normalize(&name)
        } else {
            normalize(&format!("{}/{name}", path_from_walk(dir)))
        }
    };
    use common::uring_op;
    let (path, second) = match u.opcode {
        uring_op::SYMLINKAT => (Some(escape(a)), Some(resolve(dir_b, b))),
        uring_op::SETXATTR => (Some(resolve(dir_a, a)), Some(escape(b))),
        uring_op::FSETXATTR => (None, Some(escape(b))),
        _ => (
            (u.len_a > 0).then(|| resolve(dir_a, a)),
            (u.len_b > 0).then(|| resolve(dir_b, b)),
        ),
    };
    Ok(Uring {
        header,
        opcode: u.opcode,
        result: u.result,
        flags: u.flags,
        slot: u.slot,
        path,
        second,
        file: (u.path_len > 0).then(|| path_from_walk(file)),
        identity: u.identity,
        dev: u.dev,
        ino: u.ino,
        generation: u.generation,
        magic: u.magic,
        f_mode: u.f_mode,
    })
}

fn attr(header: Header, a: AttrEvent, tail: &[u8]) -> Result<Attr, DecodeError> {
    let kind = EventKind::Attr;
    let path = take(kind, tail, a.path_len as usize)?;
    let rest = &tail[path.len()..];
    let xattr = take(kind, rest, a.xattr_len as usize)?;
    let raced = take(kind, &rest[xattr.len()..], a.raced_len as usize)?;
    let op = match a.op {
        common::ATTR_CHMOD => AttrOp::Chmod,
        common::ATTR_CHOWN => AttrOp::Chown,
        common::ATTR_TRUNCATE => AttrOp::Truncate,
        common::ATTR_UTIMES => AttrOp::Utimes,
        common::ATTR_SETXATTR => AttrOp::SetXattr,
        common::ATTR_REMOVEXATTR => AttrOp::RemoveXattr,
        other => return Err(DecodeError::UnknownKind(0x200 + other)),
    };
    Ok(Attr {
        header,
        op,
        result: a.result,
        mode: a.mode,
        uid: a.uid,
        gid: a.gid,
        size: a.size,
        at_flags: a.at_flags,
        path: path_of(a.path_kind, path),
        path_truncated: a.flags & common::PATH_TRUNCATED != 0,
        by_fd: a.flags & common::ATTR_BY_FD != 0,
        from_kernel: a.flags & common::PATH_FROM_KERNEL != 0,
        times_given: a.flags & common::ATTR_TIMES_GIVEN != 0,
        xattr: (a.xattr_len > 0).then(|| escape(until_nul(xattr))),
        dev: a.dev,
        ino: a.ino,
        generation: a.generation,
        identity: a.identity,
        magic: a.magic,
        raced_path: (a.flags & common::NAME_RACED != 0)
            .then(|| renamed(a.path_kind, path, until_nul(raced))),
        unchecked: a.flags & NAME_UNCHECKED != 0,
    })
}

fn mount(header: Header, m: MountEvent, tail: &[u8]) -> Result<Mount, DecodeError> {
    let kind = EventKind::Mount;
    let source = take(kind, tail, m.source_len as usize)?;
    let rest = &tail[source.len()..];
    let target = take(kind, rest, m.target_len as usize)?;
    let fstype = take(kind, &rest[target.len()..], m.fstype_len as usize)?;
    let op = match m.op {
        common::MOUNT_MOUNT => MountOp::Mount,
        common::MOUNT_UMOUNT => MountOp::Umount,
        common::MOUNT_MOVE => MountOp::MoveMount,
        common::MOUNT_OPEN_TREE => MountOp::OpenTree,
        common::MOUNT_FSOPEN => MountOp::Fsopen,
        common::MOUNT_FSMOUNT => MountOp::Fsmount,
        common::MOUNT_FSPICK => MountOp::Fspick,
        common::MOUNT_SETATTR => MountOp::MountSetattr,
        common::MOUNT_PIVOT_ROOT => MountOp::PivotRoot,
        common::MOUNT_CHROOT => MountOp::Chroot,
        other => return Err(DecodeError::UnknownKind(0x300 + other)),
    };
    Ok(Mount {
        header,
        op,
        result: m.result,
        flags: m.flags,
        mntns: m.mntns,
        source: (m.source_len > 0).then(|| path_of(m.source_kind, source)),
        target: (m.target_len > 0).then(|| path_of(m.target_kind, target)),
        fstype: (m.fstype_len > 0).then(|| escape(until_nul(fstype))),
    })
}

fn net(header: Header, n: common::NetEvent, tail: &[u8]) -> Result<Net, DecodeError> {
    let tail = take(EventKind::Net, tail, n.tail_len as usize)?;
    let op = match n.op {
        common::NET_CONNECT => NetOp::Connect,
        common::NET_CONNECT_RESULT => NetOp::ConnectResult,
        common::NET_LISTEN => NetOp::Listen,
        common::NET_BIND => NetOp::Bind,
        common::NET_DNS => NetOp::Dns,
        other => return Err(DecodeError::UnknownKind(0x100 + other)),
    };
    let addr = match n.family {
        2 => Some(std::net::IpAddr::from([
            n.addr[0], n.addr[1], n.addr[2], n.addr[3],
        ])),
        10 => {
            let v6 = std::net::Ipv6Addr::from(n.addr);
            // A v4-mapped address is the v4 one.
            Some(match v6.to_ipv4_mapped() {
                Some(v4) => std::net::IpAddr::V4(v4),
                None => std::net::IpAddr::V6(v6),
            })
        }
        _ => None,
    };
    let unix_path = (n.family == 1 && op == NetOp::Connect).then(|| unix_path(tail));
    Ok(Net {
        header,
        op,
        family: n.family,
        sock_type: n.sock_type,
        protocol: n.protocol,
        addr,
        port: n.port as u16,
        netns: n.netns,
        result: n.result,
        sock: n.sock,
        unix_path,
        payload: if op == NetOp::Dns {
            tail.to_vec()
        } else {
            Vec::new()
        },
    })
}

/// The path of a `sockaddr_un` (family, then the path; a leading NUL is the abstract namespace).
fn unix_path(sockaddr: &[u8]) -> String {
    let path = sockaddr.get(2..).unwrap_or_default();
    match path.first() {
        Some(0) => format!("@{}", escape(until_nul(&path[1..]))),
        _ => escape(until_nul(path)),
    }
}

fn take(kind: EventKind, tail: &[u8], len: usize) -> Result<&[u8], DecodeError> {
    tail.get(..len).ok_or(DecodeError::BadTail {
        kind: kind.name(),
        claimed: len,
        present: tail.len(),
    })
}

fn exec(header: Header, e: ExecEvent, tail: &[u8]) -> Result<Exec, DecodeError> {
    let kind = EventKind::Exec;
    let cwd = take(kind, tail, e.cwd_len as usize)?;
    let argv = take(kind, &tail[cwd.len()..], e.argv_len as usize)?;
    let filename_len = (e.filename_len as usize).min(e.filename.len());
    Ok(Exec {
        header,
        ppid: e.ppid,
        uid: e.uid,
        euid: e.euid,
        gid: e.gid,
        cgroup_id: e.cgroup_id,
        netns: e.netns,
        mntns: e.mntns,
        pidns: e.pidns,
        userns: e.userns,
        comm: escape(until_nul(&e.comm)),
        filename: escape(&e.filename[..filename_len]),
        cwd: path_from_walk(cwd),
        cwd_truncated: e.flags & common::CWD_TRUNCATED != 0,
        argv: split_nul(argv).map(escape).collect(),
        argv_truncated: e.flags & common::ARGV_TRUNCATED != 0,
        argv_full_len: e.argv_full_len,
    })
}

fn until_nul(b: &[u8]) -> &[u8] {
    b.iter().position(|&c| c == 0).map_or(b, |n| &b[..n])
}

/// NUL-ended strings; a last one without its NUL (cut) still counts.
fn split_nul(b: &[u8]) -> impl Iterator<Item = &[u8]> {
    let b = b.strip_suffix(&[0]).unwrap_or(b);
    b.split(|&c| c == 0).filter(move |_| !b.is_empty())
}

/// Keeps valid UTF-8 as it is and writes every byte that is not as `\xNN`, so nothing is
/// dropped and the result is still one JSON string.
pub fn escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// A path walked in the kernel: components leaf first, each ended by a NUL.
pub fn path_from_walk(bytes: &[u8]) -> String {
    let parts: Vec<&[u8]> = split_nul(bytes).collect();
    if parts.is_empty() {
        return "/".to_string();
    }
    let mut out = String::new();
    for part in parts.iter().rev() {
        out.push('/');
        out.push_str(&escape(part));
    }
    out
}

/// A path of either kind (see `sandbox_watch_common::FileEvent`).
fn path_of(kind: u32, bytes: &[u8]) -> String {
    if kind == common::PATH_AS_GIVEN {
        return escape(until_nul(bytes));
    }
    if kind != common::PATH_FROM_DIR_AND_NAME {
        return path_from_walk(bytes);
    }
    let (dir, name) = split_dir_and_name(bytes);
    let name = escape(name);
    if name.starts_with('/') {
        return normalize(&name);
    }
    let dir = path_from_walk(dir);
    normalize(&format!("{dir}/{name}"))
}

/// A `PATH_FROM_DIR_AND_NAME` path's parts: the directory's components (each NUL-ended), an
/// empty one (the separator), then the name.
fn split_dir_and_name(bytes: &[u8]) -> (&[u8], &[u8]) {
    let mut dir_end = 0;
    let mut at = 0;
    loop {
        match bytes[at..].iter().position(|&c| c == 0) {
            Some(0) | None => break,
            Some(n) => {
                at += n + 1;
                dir_end = at;
            }
        }
    }
    let name_start = (dir_end + 1).min(bytes.len());
    (&bytes[..dir_end], until_nul(&bytes[name_start..]))
}

/// The program an exec ran, as an absolute path: execve's file name resolved against the cwd.
pub fn normalize_exe(filename: &str, cwd: &str) -> String {
    if filename.starts_with('/') {
        normalize(filename)
    } else {
        normalize(&format!("{cwd}/{filename}"))
    }
}

/// Removes `.` and empty components and applies `..` lexically (the directory part came from
/// the kernel already resolved; only the caller's own name can hold them).
pub fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    format!("/{}", parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header_bytes(kind: u32) -> Vec<u8> {
        let h = common::EventHeader {
            kind,
            tgid: 10,
            pid: 11,
            _pad: 0,
            ktime_ns: 5,
            start_ns: 6,
        };
        as_bytes(&h).to_vec()
    }

    fn as_bytes<T>(v: &T) -> &[u8] {
        unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), size_of::<T>()) }
    }

    #[test]
    fn walked_paths_come_out_root_first() {
        assert_eq!(
            path_from_walk(b"key\0.ssh\0alice\0home\0"),
            "/home/alice/.ssh/key"
        );
        assert_eq!(path_from_walk(b""), "/");
        assert_eq!(path_from_walk(b"cut-na"), "/cut-na");
    }

    #[test]
    fn invalid_utf8_and_newlines_are_kept() {
        assert_eq!(escape(b"a\xffb\nc"), "a\\xffb\nc");
        assert_eq!(path_from_walk(b"f\xfe\0tmp\0"), "/tmp/f\\xfe");
    }

    #[test]
    fn dir_and_name_paths() {
        assert_eq!(
            path_of(common::PATH_FROM_DIR_AND_NAME, b"w\0tmp\0\0a/b.txt\0"),
            "/tmp/w/a/b.txt"
        );
        assert_eq!(
            path_of(common::PATH_FROM_DIR_AND_NAME, b"\0/etc/x\0"),
            "/etc/x"
        );
        assert_eq!(
            path_of(common::PATH_FROM_DIR_AND_NAME, b"w\0tmp\0\0../x\0"),
            "/tmp/x"
        );
        assert_eq!(
            path_of(common::PATH_FROM_DIR_AND_NAME, b"\0./rel\0"),
            "/rel"
        );
    }

    #[test]
    fn exec_with_cut_argv() {
        let mut e: ExecEvent = unsafe { std::mem::zeroed() };
        e.header = common::EventHeader {
            kind: EventKind::Exec as u32,
            tgid: 3,
            pid: 3,
            _pad: 0,
            ktime_ns: 1,
            start_ns: 2,
        };
        e.ppid = 1;
        e.netns = 4026531840;
        e.filename[..8].copy_from_slice(b"/bin/git");
        e.filename_len = 8;
        e.comm[..3].copy_from_slice(b"git");
        let cwd = b"repo\0tmp\0";
        let argv = b"git\0commit\0-m\0two words\0cu";
        e.cwd_len = cwd.len() as u32;
        e.argv_len = argv.len() as u32;
        e.argv_full_len = 99999;
        e.flags = common::ARGV_TRUNCATED;
        let mut bytes = as_bytes(&e).to_vec();
        bytes.extend_from_slice(cwd);
        bytes.extend_from_slice(argv);
        let Event::Exec(x) = decode(&bytes).unwrap() else {
            panic!("not an exec")
        };
        assert_eq!(x.argv, ["git", "commit", "-m", "two words", "cu"]);
        assert!(x.argv_truncated);
        assert_eq!(x.cwd, "/tmp/repo");
        assert_eq!(x.filename, "/bin/git");
        assert_eq!(x.comm, "git");
        assert_eq!(x.netns, 4026531840);
        // A tail shorter than claimed is an error, not a panic.
        bytes.truncate(bytes.len() - 3);
        assert!(matches!(decode(&bytes), Err(DecodeError::BadTail { .. })));
    }

    #[test]
    fn short_and_unknown_records_are_errors() {
        assert_eq!(decode(&[1, 2]), Err(DecodeError::Short(2)));
        assert_eq!(decode(&header_bytes(99)), Err(DecodeError::UnknownKind(99)));
        assert!(matches!(
            decode(&header_bytes(2)),
            Err(DecodeError::Truncated { .. })
        ));
    }

    proptest::proptest! {
        /// Any bytes, and any bytes behind a valid header of each kind: an event or an error.
        #[test]
        fn decoding_never_panics(kind in proptest::prop_oneof![0u32..10, 30u32..36], tail in proptest::collection::vec(proptest::num::u8::ANY, 0..6000)) {
            let _ = decode(&tail);
            let mut bytes = header_bytes(kind);
            bytes.extend_from_slice(&tail);
            let _ = decode(&bytes);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        // A small deterministic fuzz: random records, and valid headers with random tails.
        let mut state = 0x2545f4914f6cdd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for i in 0..20_000 {
            let len = (next() % 2048) as usize;
            let mut bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if i % 2 == 0 && bytes.len() >= 4 {
                let kind = [1, 2, 3, 4, 5, 6, 7, 8, 9, 30, 31, 32, 33, 34, 35][(next() % 15) as usize];
                bytes[..4].copy_from_slice(&kind.to_ne_bytes());
            }
            let _ = decode(&bytes);
        }
    }
}
