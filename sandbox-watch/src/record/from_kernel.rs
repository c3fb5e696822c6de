//! What a decoded kernel event becomes: its record, judged (credential and persistence
//! paths, DNS questions read, exit status split) before any sink sees it. The argv is
//! redacted by the capture before it gets here.
//!
//! Only what needs the kernel's own identity lives here too: which non-blocking connect a
//! socket's later outcome belongs to ([`Sockets`]).
use std::collections::HashMap;

use super::{
    Exec, ExecFailed, Exit, FileFailed, FlowCount, Fork, Missing, NetResult, NetTamper, Record,
};
use crate::judge::classify::{self, Classifier};
use crate::kernel::decode::{
    self, Conn, ConnOp, FailedOpen, FileOpen, Flow, Header, Net, NetOp as KernelNetOp, PathOp,
};
use crate::record::{MountOp, NetOp, Op, Verdict};
use crate::state::files::{FileEntry, RacedPaths, dev_string, errno_name, open_flags};
use crate::state::mounts::{MountEntry, Namespaces};
use crate::state::network::{NetEntry, proto_name, result_name};
use sandbox_watch_common::abi::{
    FMODE_CREATED, FMODE_PATH, FMODE_WRITE, O_ACCMODE, O_CREAT, O_RDWR, O_TRUNC, O_WRONLY,
};

/// An exec. `launcher`, `verdict` and `started_at` are the session's to say (see
/// `Session::apply`): they are filled in from it before the record is logged.
pub fn exec(e: &decode::Exec) -> Exec {
    Exec {
        pid: e.header.tgid,
        ppid: e.ppid,
        exe: Some(decode::normalize_exe(&e.filename, &e.cwd)),
        argv: e.argv.clone(),
        argv_truncated: e.argv_truncated,
        cwd: Some(e.cwd.clone()),
        uid: Some(e.uid),
        netns: Some(e.netns as u64),
        verdict: Verdict::Inside,
        started_at: String::new(),
        fork_only: false,
        preexisting: false,
        launcher: false,
        comm: Some(e.comm.clone()),
        euid: Some(e.euid),
        gid: Some(e.gid),
        mntns: Some(e.mntns as u64),
        pidns: Some(e.pidns as u64),
        userns: Some(e.userns as u64),
        cgroup_id: Some(e.cgroup_id),
    }
}

/// A failed exec (its argv already redacted by the capture).
pub fn exec_failed(e: &decode::ExecFailed) -> ExecFailed {
    ExecFailed {
        pid: e.header.tgid,
        path: e.path.clone(),
        path_truncated: e.path_truncated,
        argv: e.argv.clone(),
        argv_truncated: e.argv_truncated,
        result: errno_name(e.result),
        syscall: e.syscall.to_string(),
        from_caller_memory: true,
    }
}

pub fn fork(header: &Header, child_tgid: u32) -> Fork {
    Fork {
        pid: child_tgid,
        ppid: header.tgid,
    }
}

/// `exit_code` is `task->exit_code`: `status << 8` for exit(status), the signal for a kill.
pub fn exit(header: &Header, exit_code: u32) -> Exit {
    let code = exit_code as i32;
    let (exit_code, signal) = if code & 0x7f != 0 {
        (None, Some(code & 0x7f))
    } else {
        (Some((code >> 8) & 0xff), None)
    };
    Exit {
        pid: header.tgid,
        exit_code,
        signal,
    }
}

/// What an open did, from the file's mode and the flags it was opened with.
pub fn op_of_open(open: &FileOpen) -> Op {
    if open.f_mode & FMODE_PATH != 0 {
        Op::Path
    } else if open.f_mode & FMODE_CREATED != 0 {
        Op::Create
    } else if open.f_mode & FMODE_WRITE != 0
        || open.open_flags & (O_WRONLY | O_RDWR | O_TRUNC | O_CREAT) != 0
    {
        Op::Write
    } else {
        Op::Read
    }
}

/// An entry for a path as the caller named it (delete, rename, link, failed open): no file
/// was opened, so no filesystem identity and nothing verified.
fn named(pid: u32, op: Op, path: String) -> FileEntry {
    FileEntry {
        pid,
        op,
        path,
        new_path: None,
        fs: None,
        magic: None,
        dev: None,
        ino: None,
        path_truncated: false,
        flags: None,
        credential: false,
        verified: false,
        unverified_reason: None,
        persistence: false,
        count: 1,
        folded: None,
        sha256: None,
        sha256_skipped: None,
        result: None,
        link_to: None,
        link: None,
        tool_call: Default::default(),
        after_step: false,
        declared: None,
        declared_by: None,
        same_inode_as: None,
        mode: None,
        uid: None,
        gid: None,
        length: None,
        xattr: None,
        escalation: None,
        via: None,
        raced: None,
        modified: None,
    }
}

/// A path operation's `result` and `via`: an io_uring request's result is not seen.
fn outcome(p: &PathOp) -> (Option<String>, Option<String>) {
    if p.via_io_uring {
        (None, Some("io_uring".into()))
    } else {
        ((p.result != 0).then(|| errno_name(p.result)), None)
    }
}

/// An open, with the path walked from the kernel's `struct file`.
pub fn open(classifier: &Classifier, open: &FileOpen) -> FileEntry {
    let op = op_of_open(open);
    let inode = (open.dev, open.ino);
    let (mut c, same_inode_as) = classifier.classify_file(
        &open.path,
        open.magic,
        open.path_truncated,
        op.changes(),
        inode,
    );
    if op == Op::Path {
        // Naming a key is not reading it: the read, if any, is an open of its own.
        c = Default::default();
    }
    FileEntry {
        same_inode_as,
        fs: Some(classify::fs_name(open.magic).to_string()),
        magic: Some(classify::magic_hex(open.magic)),
        dev: Some(dev_string(open.dev)),
        ino: Some(open.ino),
        path_truncated: open.path_truncated,
        flags: Some(open_flags(open.open_flags)),
        credential: c.credential,
        verified: c.verified,
        unverified_reason: c.reason,
        persistence: c.persistence,
        escalation: escalation_of_open(op, &open.path, open.magic),
        via: open.via_io_uring.then(|| "io_uring".into()),
        modified: open
            .modified
            .filter(|&m| matches!(op, Op::Write | Op::Create) && (m || writes_seen(open))),
        ..named(open.header.tgid, op, open.path.clone())
    }
}

/// Whether the probe sees every change to this open's file (a write call's exit, and the
/// kernel dirtying its inode for stores and io_uring writes), so that an open for write with
/// none is "not written to" (`modified: false`): a regular file of
/// ext2/3/4, xfs, btrfs or tmpfs. Not overlayfs (the inode dirtied is the upper layer's, not
/// the one opened), procfs, sysfs or device files (their writes dirty nothing): no
/// `modified` there, unless the open itself truncated the file.
fn writes_seen(open: &FileOpen) -> bool {
    let device = open.path.starts_with("/dev/") && !open.path.starts_with("/dev/shm/");
    !device
        && matches!(
            classify::fs_name(open.magic),
            "ext2/3/4" | "xfs" | "btrfs" | "tmpfs"
        )
}

/// A write-open of a kernel helper setting (`judge::escalation`).
fn escalation_of_open(op: Op, path: &str, magic: u64) -> Option<String> {
    if matches!(op, Op::Write | Op::Create) {
        crate::judge::escalation::of_write(path, magic)
    } else {
        None
    }
}

/// An open that failed (refused, or failed otherwise: the kernel does not send opens of
/// files that are not there).
pub fn failed_open(classifier: &Classifier, f: &FailedOpen) -> Record {
    let writes = f.open_flags & (O_ACCMODE | O_CREAT | O_TRUNC) != 0;
    let op = if writes { Op::Write } else { Op::Read };
    let c = classifier.classify(&f.path, 0, f.path_truncated, writes);
    Record::FileFailed(FileFailed::Entry(FileEntry {
        path_truncated: f.path_truncated,
        flags: Some(open_flags(f.open_flags)),
        credential: c.credential,
        unverified_reason: c
            .credential
            .then(|| "the open failed: the path is the caller's".to_string()),
        persistence: c.persistence,
        result: Some(errno_name(f.result)),
        escalation: escalation_of_open(op, &f.path, 0),
        ..named(f.header.tgid, op, f.path.clone())
    }))
}

/// An attribute change (chmod, chown, truncate, mkdir, setxattr, utime families), done or
/// failed: an entry with its op and what it asked for. Judged as a change of the file
/// (credential, persistence: `chmod +x` of a git hook arms it) and for escalation.
pub fn attr(classifier: &Classifier, a: &decode::Attr) -> Record {
    use decode::AttrOp;
    let op = match a.op {
        AttrOp::Chmod => Op::Chmod,
        AttrOp::Chown => Op::Chown,
        AttrOp::Truncate => Op::Truncate,
        AttrOp::Mkdir => Op::Mkdir,
        AttrOp::Setxattr => Op::Setxattr,
        AttrOp::Utime => Op::Utime,
    };
    // Nothing there (or, for mkdir -p, already there): only the log keeps it.
    if matches!(-a.result, libc::ENOENT | libc::ENOTDIR)
        || (op == Op::Mkdir && -a.result == libc::EEXIST)
    {
        return Record::FileFailed(FileFailed::Missing(Missing {
            pid: a.header.tgid,
            op,
            path: a.path.clone(),
            new_path: None,
            result: errno_name(a.result),
        }));
    }
    let (mut c, same_inode_as) = match a.file {
        Some((dev, ino, magic)) => {
            classifier.classify_file(&a.path, magic, a.path_truncated, true, (dev, ino))
        }
        None => (
            classifier.classify(&a.path, 0, a.path_truncated, true),
            None,
        ),
    };
    // Judged by the names at the call's exit and, when a thread rewrote them during the call,
    // at its entry too: the kernel used one of the two.
    let raced = a.raced.as_ref().map(|(path, xattr)| RacedPaths {
        path: path.clone(),
        new_path: None,
        link_to: None,
        xattr: xattr.clone(),
    });
    if let Some(r) = raced.as_ref().filter(|r| r.path != a.path) {
        let at_entry = classifier.classify(&r.path, 0, a.path_truncated, true);
        c.credential |= at_entry.credential;
        c.persistence |= at_entry.persistence;
    }
    let id = |v: u64| (v as u32 != u32::MAX).then_some(v as u32);
    let mode = matches!(op, Op::Chmod | Op::Mkdir).then(|| format!("{:o}", a.value & 0o7777));
    let magic = a.file.map_or(0, |f| f.2);
    let paths = [Some(&a.path), raced.as_ref().map(|r| &r.path)];
    let names = [
        a.name.as_ref(),
        raced.as_ref().and_then(|r| r.xattr.as_ref()),
    ];
    let escalation = match op {
        Op::Chmod => crate::judge::escalation::of_chmod(a.value),
        Op::Setxattr => names
            .into_iter()
            .flatten()
            .find_map(|n| crate::judge::escalation::of_xattr(n)),
        Op::Truncate => paths
            .into_iter()
            .flatten()
            .find_map(|p| crate::judge::escalation::of_write(p, magic)),
        _ => None,
    };
    let mut entry = FileEntry {
        same_inode_as,
        path_truncated: a.path_truncated,
        credential: c.credential,
        verified: c.verified && a.file.is_some(),
        unverified_reason: c.reason,
        persistence: c.persistence,
        result: (a.result != 0).then(|| errno_name(a.result)),
        via: a.via_io_uring.then(|| "io_uring".to_string()),
        mode,
        uid: (op == Op::Chown).then(|| id(a.value)).flatten(),
        gid: (op == Op::Chown).then(|| id(a.value2)).flatten(),
        length: (op == Op::Truncate).then_some(a.value),
        xattr: a.name.clone(),
        escalation,
        raced,
        ..named(a.header.tgid, op, a.path.clone())
    };
    if let Some((dev, ino, magic)) = a.file {
        entry.fs = Some(classify::fs_name(magic).to_string());
        entry.magic = Some(classify::magic_hex(magic));
        entry.dev = Some(dev_string(dev));
        entry.ino = Some(ino);
    }
    file_or_failed(entry)
}

/// A mount or namespace call, made or failed: its entry. mount(2)'s source is a path only
/// for a bind or a move; otherwise it is the name given (`tmpfs`, `none`, a device).
pub fn mount(m: &decode::Mount) -> Record {
    use decode::MountOp as K;
    let op = match m.op {
        K::Mount => MountOp::Mount,
        K::Umount => MountOp::Umount,
        K::MoveMount => MountOp::MoveMount,
        K::OpenTree => MountOp::OpenTree,
        K::Fsopen => MountOp::Fsopen,
        K::Fsconfig => MountOp::Fsconfig,
        K::Fsmount => MountOp::Fsmount,
        K::Fspick => MountOp::Fspick,
        K::MountSetattr => MountOp::MountSetattr,
        K::PivotRoot => MountOp::PivotRoot,
        K::Chroot => MountOp::Chroot,
        K::Unshare => MountOp::Unshare,
        K::Setns => MountOp::Setns,
    };
    let (flags, namespaces) = crate::state::mounts::flag_names(op, m.call_flags);
    const MS_BIND: u64 = 4096;
    const MS_MOVE: u64 = 8192;
    // A bind or a move takes a path and no filesystem type (mount(8) passes `none`).
    let path_source = op != MountOp::Mount || m.call_flags & (MS_BIND | MS_MOVE) != 0;
    let source = if path_source {
        m.source.clone()
    } else {
        m.source_given.clone()
    };
    let ignored_type = op == MountOp::Mount && path_source;
    let ns = |i: usize| u64::from(m.ns[i]);
    use sandbox_watch_common::mount as k;
    let returns_fd = matches!(
        op,
        MountOp::OpenTree | MountOp::Fsopen | MountOp::Fsmount | MountOp::Fspick
    );
    Record::Mount(MountEntry {
        pid: m.header.tgid,
        op,
        source,
        target: m.target.clone(),
        fstype: (op != MountOp::Fsconfig && !ignored_type)
            .then(|| m.name.clone())
            .flatten(),
        key: (op == MountOp::Fsconfig).then(|| m.name.clone()).flatten(),
        device: m.devname.clone(),
        flags,
        namespaces,
        root: m.root.clone(),
        ns: Namespaces {
            mnt: ns(k::NS_MNT),
            net: ns(k::NS_NET),
            pid: ns(k::NS_PID),
            user: ns(k::NS_USER),
            uts: ns(k::NS_UTS),
            ipc: ns(k::NS_IPC),
            cgroup: ns(k::NS_CGROUP),
            time: ns(k::NS_TIME),
        },
        result: (m.result < 0).then(|| errno_name(m.result as i32)),
        fd: (returns_fd && m.result >= 0).then_some(m.result),
        source_from_kernel: m.source_from_tree,
        from_caller_memory: m.caller_names,
        path_truncated: m.source_truncated || m.target_truncated || m.root_truncated,
        tool_call: Default::default(),
        after_step: false,
    })
}

/// An entry, or a failed one (`file_failed`) when it has a result.
fn file_or_failed(entry: FileEntry) -> Record {
    if entry.result.is_some() {
        Record::FileFailed(FileFailed::Entry(entry))
    } else {
        Record::File(entry)
    }
}

/// Nothing was there to delete, rename or link (`rm -f`, lock files): only the log keeps it.
fn missing(op: Op, p: &PathOp) -> Option<Record> {
    matches!(-p.result, libc::ENOENT | libc::ENOTDIR).then(|| {
        Record::FileFailed(FileFailed::Missing(Missing {
            pid: p.header.tgid,
            op,
            path: p.path.clone(),
            new_path: p.new_path.clone(),
            result: errno_name(p.result),
        }))
    })
}

/// A delete or rename, done or failed.
pub fn path_op(classifier: &Classifier, op: Op, p: &PathOp) -> Record {
    if let Some(m) = missing(op, p) {
        return m;
    }
    // Judged by the names at the call's exit and, when a thread rewrote them during the call,
    // at its entry too: the kernel used one of the two.
    let raced = p.raced.as_ref().map(|(path, new_path)| RacedPaths {
        path: path.clone(),
        new_path: new_path.clone(),
        link_to: None,
        xattr: None,
    });
    let mut credential = false;
    let mut persistence = false;
    let at_entry = raced.as_ref().map(|r| (&r.path, &r.new_path));
    for (path, new_path) in [(&p.path, &p.new_path)].into_iter().chain(at_entry) {
        let c = classifier.classify(path, 0, p.path_truncated, true);
        let c_new = new_path.as_deref().map(|n| {
            let mut c = classifier.classify(n, 0, p.new_path_truncated, true);
            // A directory renamed where its files would run (a hooks directory, autostart).
            c.persistence |= op == Op::Rename && classifier.holds_persistence(n);
            c
        });
        credential |= c.credential || c_new.as_ref().is_some_and(|c| c.credential);
        persistence |= c.persistence || c_new.as_ref().is_some_and(|c| c.persistence);
    }
    let (result, via) = outcome(p);
    file_or_failed(FileEntry {
        new_path: p.new_path.clone(),
        path_truncated: p.path_truncated || p.new_path_truncated,
        credential,
        persistence,
        result,
        via,
        raced,
        ..named(p.header.tgid, op, p.path.clone())
    })
}

/// A link made (or refused): a `create` at the link's path, with what it points to. Judged
/// by where it is (a symbolic link named ~/.bashrc runs at every shell) and by what it points
/// to (a link to a key exposes the key).
pub fn link(classifier: &Classifier, p: &PathOp, symbolic: bool) -> Record {
    if let Some(m) = missing(Op::Create, p) {
        return m;
    }
    let at = p.new_path.clone().unwrap_or_default();
    // The link's path, then its target, as the call's exit gave them and (raced) its entry.
    let raced = p.raced.as_ref().map(|(to, at)| RacedPaths {
        path: at.clone().unwrap_or_default(),
        new_path: None,
        link_to: Some(to.clone()),
        xattr: None,
    });
    let at_entry = raced
        .as_ref()
        .map(|r| (&r.path, r.link_to.as_ref().unwrap_or(&r.path)));
    let (mut credential, mut persistence) = (false, false);
    for (at, to) in [(&at, &p.path)].into_iter().chain(at_entry) {
        let c = classifier.classify(at, 0, p.new_path_truncated, true);
        let c_to = classifier.classify(to, 0, p.path_truncated, false);
        credential |= c.credential || c_to.credential;
        // A symbolic link where a directory's files would run points that directory there.
        persistence |= c.persistence || (symbolic && classifier.holds_persistence(at));
    }
    let (result, via) = outcome(p);
    file_or_failed(FileEntry {
        path_truncated: p.path_truncated || p.new_path_truncated,
        credential,
        persistence,
        result,
        via,
        raced,
        link_to: Some(p.path.clone()),
        link: Some(if symbolic { "symbolic" } else { "hard" }.to_string()),
        ..named(p.header.tgid, Op::Create, at)
    })
}

/// Pairs a non-blocking connect with its outcome, which comes later from the socket's TCP
/// state change (or, on loopback, before the connect's own record). The kernel's socket
/// address never reaches the log: the records name a socket by a number of this capture.
#[derive(Default)]
pub struct Sockets {
    /// Connects in progress: kernel socket → its number in the records.
    pending: HashMap<u64, u64>,
    /// Outcomes that came before their connect's record, by kernel socket.
    early: HashMap<u64, i32>,
    next: u64,
    /// connect(2) calls in flight whose socket the kernel began connecting (SYN_SENT in the
    /// calling thread), by thread: their record comes at the call's exit.
    held: HashMap<u32, Began>,
    /// The kernel sockets of `held`, with the thread.
    held_sock: HashMap<u64, u32>,
}

/// A connection as the kernel's socket began it, waiting for its connect(2)'s record.
struct Began {
    entry: NetEntry,
    sock: u64,
    /// Its outcome, when it came before the call returned.
    outcome: Option<String>,
}

/// x86-64 system call numbers the connection records name.
const SYS_SENDTO: i32 = 44;
const SYS_SENDMSG: i32 = 46;
const SYS_CONNECT: i32 = 42;
const SYS_LISTEN: i32 = 50;
const SYS_IO_URING_ENTER: i32 = 426;

/// How a connection was asked for: None for connect(2) and listen(2) themselves.
fn via(c: &Conn) -> Option<String> {
    if c.io_worker {
        return Some("io_uring worker".into());
    }
    Some(match c.syscall {
        SYS_CONNECT | SYS_LISTEN => return None,
        SYS_SENDTO => "fastopen sendto".into(),
        SYS_SENDMSG => "fastopen sendmsg".into(),
        SYS_IO_URING_ENTER => "io_uring".into(),
        n => format!("syscall {n}"),
    })
}

fn ns(inum: u32) -> Option<u64> {
    (inum != 0).then_some(inum as u64)
}

fn entry(pid: u32, op: NetOp, proto: String, at: &str) -> NetEntry {
    NetEntry {
        pid,
        op,
        proto,
        addr: None,
        port: None,
        path: None,
        name: None,
        qtype: None,
        malformed: None,
        result: "ok".into(),
        netns: None,
        verdict: Verdict::Inside,
        count: 1,
        first_at: at.to_string(),
        last_at: at.to_string(),
        listening_at_end: None,
        via: None,
        vsock_port: None,
        device: None,
        ifindex: None,
        packets: None,
        bytes: None,
        socket: None,
        tool_call: Default::default(),
        after_step: false,
    }
}

/// A TCP connection from the kernel's socket: the entry (or the outcome) it makes, if any.
pub fn conn(sockets: &mut Sockets, c: &Conn, at: &str, agent_netns: Option<u64>) -> Vec<Record> {
    let proto = proto_name(c.family, c.protocol, c.sock_type);
    let mut e = entry(c.header.tgid, NetOp::Connect, proto, at);
    e.netns = ns(c.sk_netns);
    e.verdict = Verdict::of(e.netns, agent_netns);
    e.via = via(c);
    match c.op {
        ConnOp::Out => {
            e.addr = c.daddr.map(|a| a.to_string());
            e.port = Some(c.dport);
            e.result = super::IN_PROGRESS.into();
            if !c.io_worker && c.syscall == SYS_CONNECT {
                // connect(2): its own record, at the exit, says how the call ended.
                sockets.held_sock.insert(c.sock, c.header.pid);
                sockets.held.insert(
                    c.header.pid,
                    Began {
                        entry: e,
                        sock: c.sock,
                        outcome: None,
                    },
                );
                return Vec::new();
            }
            sockets.next += 1;
            sockets.pending.insert(c.sock, sockets.next);
            e.socket = Some(sockets.next);
            vec![Record::Net(e)]
        }
        ConnOp::In => {
            e.op = NetOp::Accept;
            e.addr = c.daddr.map(|a| a.to_string());
            e.port = Some(c.dport);
            vec![Record::Net(e)]
        }
        ConnOp::Listen => {
            if e.via.is_none() {
                return Vec::new(); // listen(2): its own record has it
            }
            e.op = NetOp::Listen;
            e.addr = c.saddr.map(|a| a.to_string());
            e.port = Some(c.sport);
            e.listening_at_end = Some(false);
            vec![Record::Net(e)]
        }
        ConnOp::Up | ConnOp::Down => {
            let result = match (c.op, c.err) {
                (ConnOp::Up, _) => "ok".to_string(),
                (_, 0) => "closed".to_string(),
                (_, err) => result_name(-err),
            };
            if let Some(socket) = sockets.pending.remove(&c.sock) {
                return vec![Record::NetResult(NetResult {
                    pid: c.header.tgid,
                    addr: c.daddr.map(|a| a.to_string()),
                    port: Some(c.dport),
                    result,
                    socket: Some(socket),
                })];
            }
            if let Some(thread) = sockets.held_sock.get(&c.sock)
                && let Some(b) = sockets.held.get_mut(thread)
                && b.outcome.is_none()
            {
                b.outcome = Some(result);
            }
            Vec::new()
        }
    }
}

/// The connect(2) record of a connection the kernel began in the same thread: the entry has
/// the kernel's destination and namespace and the call's result; what the caller showed at
/// the exit is compared with them.
fn began_connect(
    sockets: &mut Sockets,
    b: Began,
    n: &Net,
    agent_netns: Option<u64>,
) -> Vec<Record> {
    sockets.held_sock.remove(&b.sock);
    let mut e = b.entry;
    e.verdict = Verdict::of(e.netns, agent_netns);
    e.result = match (n.result, b.outcome) {
        (-115, Some(outcome)) => outcome,
        (r, _) => result_name(r),
    };
    if e.result == super::IN_PROGRESS {
        sockets.next += 1;
        sockets.pending.insert(b.sock, sockets.next);
        e.socket = Some(sockets.next);
    }
    let caller_addr = n.addr.map(|a| a.to_string());
    let caller_port = Some(n.port);
    let fd_swapped = n.sock != b.sock;
    let mut out = Vec::new();
    if fd_swapped || caller_addr != e.addr || caller_port != e.port {
        out.push(Record::NetTamper(NetTamper {
            pid: e.pid,
            addr: e.addr.clone(),
            port: e.port,
            netns: e.netns,
            caller_addr,
            caller_port,
            fd_swapped,
            caller_netns: ns(n.netns),
        }));
    }
    out.insert(0, Record::Net(e));
    out
}

/// Connections begun by connect(2) whose call's record never came (the capture ended first).
pub fn unpaired(sockets: &mut Sockets) -> Vec<Record> {
    sockets.held_sock.clear();
    let mut held: Vec<Began> = sockets.held.drain().map(|(_, b)| b).collect();
    held.sort_by(|a, b| a.entry.first_at.cmp(&b.entry.first_at));
    held.into_iter().map(|b| Record::Net(b.entry)).collect()
}

/// A flow's protocol, destination and port as its entry names them.
pub fn flow_dest(k: &sandbox_watch_common::FlowKey) -> (String, Option<String>, Option<u16>) {
    use sandbox_watch_common::FLOW_ETHERTYPE;
    use sandbox_watch_common::abi::{IPPROTO_SCTP, IPPROTO_UDPLITE};
    let addr = match k.ip {
        4 => Some(std::net::IpAddr::from([
            k.daddr[0], k.daddr[1], k.daddr[2], k.daddr[3],
        ])),
        6 => Some(std::net::IpAddr::from(k.daddr)),
        _ => None,
    };
    let proto = if k.proto & FLOW_ETHERTYPE != 0 {
        format!("ethertype 0x{:04x}", k.proto & 0xffff)
    } else {
        match k.proto {
            IPPROTO_SCTP => "sctp".into(),
            IPPROTO_UDPLITE => "udplite".into(),
            p => proto_name(2, p, 0),
        }
    };
    let port = matches!(k.proto, 17 | IPPROTO_SCTP | IPPROTO_UDPLITE).then_some(k.dport as u16);
    (proto, addr.map(|a| a.to_string()), port)
}

/// A flow's first packet: its `send` entry.
pub fn flow(f: &Flow, at: &str, agent_netns: Option<u64>) -> Record {
    use sandbox_watch_common::abi::{AF_PACKET, SOCK_RAW};
    let (proto, addr, port) = flow_dest(&f.key);
    let mut e = entry(f.key.tgid, NetOp::Send, proto, at);
    e.addr = addr;
    e.port = port;
    e.result = "sent".into();
    e.netns = ns(f.key.netns);
    e.verdict = Verdict::of(e.netns, agent_netns);
    e.via = if f.key.family == AF_PACKET as u32 {
        e.ifindex = Some(f.key.ifindex);
        e.device = f.device.clone();
        Some("packet socket".into())
    } else if f.key.sock_type == SOCK_RAW {
        Some("raw socket".into())
    } else {
        None
    };
    Record::Net(e)
}

/// The end's count of a flow.
pub fn flow_count(
    k: &sandbox_watch_common::FlowKey,
    v: &sandbox_watch_common::FlowValue,
) -> FlowCount {
    let (proto, addr, port) = flow_dest(k);
    FlowCount {
        pid: k.tgid,
        proto,
        addr,
        port,
        netns: ns(k.netns),
        ifindex: (k.family == sandbox_watch_common::abi::AF_PACKET as u32).then_some(k.ifindex),
        packets: v.packets,
        bytes: v.bytes,
    }
}

/// `at`: the event's time, as the log writes it.
pub fn net(sockets: &mut Sockets, n: &Net, at: &str, agent_netns: Option<u64>) -> Vec<Record> {
    if n.op == KernelNetOp::Connect
        && let Some(b) = sockets.held.remove(&n.header.pid)
    {
        return began_connect(sockets, b, n, agent_netns);
    }
    net_syscall(sockets, n, at, agent_netns)
        .into_iter()
        .collect()
}

/// A record of the syscall probes alone.
fn net_syscall(
    sockets: &mut Sockets,
    n: &Net,
    at: &str,
    agent_netns: Option<u64>,
) -> Option<Record> {
    let netns = (n.netns != 0).then_some(n.netns as u64);
    if n.op == KernelNetOp::ConnectResult {
        let Some(socket) = sockets.pending.remove(&n.sock) else {
            sockets.early.insert(n.sock, n.result);
            return None;
        };
        return Some(Record::NetResult(NetResult {
            pid: n.header.tgid,
            addr: n.addr.map(|a| a.to_string()),
            port: (n.family == 2 || n.family == 10).then_some(n.port),
            result: result_name(n.result),
            socket: Some(socket),
        }));
    }
    let (op, mut result) = match n.op {
        KernelNetOp::Connect => {
            let early = sockets.early.remove(&n.sock);
            match (n.result, early) {
                (-115, Some(outcome)) => (NetOp::Connect, result_name(outcome)),
                (r, _) => (NetOp::Connect, result_name(r)),
            }
        }
        KernelNetOp::Listen | KernelNetOp::Bind => (NetOp::Listen, "ok".to_string()),
        KernelNetOp::Dns => (NetOp::Dns, "sent".to_string()),
        KernelNetOp::ConnectResult => unreachable!("handled above"),
    };
    let mut socket = None;
    if op == NetOp::Connect && result == super::IN_PROGRESS {
        sockets.next += 1;
        sockets.pending.insert(n.sock, sockets.next);
        socket = Some(sockets.next);
    }
    let (mut name, mut qtype, mut malformed) = (None, None, None);
    if op == NetOp::Dns {
        match crate::judge::dns::parse_query(&n.payload) {
            crate::judge::dns::Query::Name {
                name: q, qtype: t, ..
            } => {
                name = Some(q);
                qtype = Some(t);
            }
            crate::judge::dns::Query::Malformed { reason, partial } => {
                name = Some(partial);
                malformed = Some(reason);
                result = "malformed".into();
            }
        }
    }
    Some(Record::Net(NetEntry {
        pid: n.header.tgid,
        op,
        proto: proto_name(n.family, n.protocol, n.sock_type),
        addr: match n.vsock {
            Some((cid, _)) => Some(cid.to_string()),
            None => n.addr.map(|a| a.to_string()),
        },
        port: match n.vsock {
            Some((_, port)) => u16::try_from(port).ok(),
            None => (n.family == 2 || n.family == 10).then_some(n.port),
        },
        vsock_port: n.vsock.map(|(_, port)| port),
        device: None,
        ifindex: None,
        path: n.unix_path.clone(),
        name,
        qtype,
        malformed,
        result,
        netns,
        verdict: Verdict::of(netns, agent_netns),
        count: 1,
        first_at: at.to_string(),
        last_at: at.to_string(),
        listening_at_end: (op == NetOp::Listen).then_some(false),
        via: None,
        packets: None,
        bytes: None,
        socket,
        tool_call: Default::default(),
        after_step: false,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setxattr(path: &str, name: &str, raced: Option<(&str, Option<&str>)>) -> decode::Attr {
        decode::Attr {
            header: Header {
                tgid: 5,
                pid: 5,
                ktime_ns: 1,
                start_ns: 1,
                seq: 0,
            },
            op: decode::AttrOp::Setxattr,
            syscall: sandbox_watch_common::attr::nr::SETXATTR,
            path: path.into(),
            path_truncated: false,
            file: None,
            value: 0,
            value2: 0,
            name: Some(name.into()),
            name_truncated: false,
            result: 0,
            via_io_uring: false,
            raced: raced.map(|(p, n)| (p.to_string(), n.map(str::to_string))),
        }
    }

    fn entry(r: Record) -> FileEntry {
        match r {
            Record::File(f) => f,
            r => panic!("{r:?}"),
        }
    }

    #[test]
    fn an_attribute_call_raced_is_judged_by_both_names() {
        let c = Classifier::new(&[]).unwrap();
        // The exit read the decoy; the entry security.capability: an escalation, both named.
        let e = entry(attr(
            &c,
            &setxattr(
                "/tmp/f",
                "user.x",
                Some(("/tmp/f", Some("security.capability"))),
            ),
        ));
        assert!(e.escalation.is_some(), "{e:?}");
        let r = e.raced.as_ref().unwrap();
        assert_eq!(
            (r.path.as_str(), r.xattr.as_deref()),
            ("/tmp/f", Some("security.capability"))
        );
        assert_eq!(e.xattr.as_deref(), Some("user.x"));
        // The other way round too, and not without the race.
        let e = entry(attr(
            &c,
            &setxattr(
                "/tmp/f",
                "security.capability",
                Some(("/tmp/f", Some("user.x"))),
            ),
        ));
        assert!(e.escalation.is_some(), "{e:?}");
        let e = entry(attr(&c, &setxattr("/tmp/f", "user.x", None)));
        assert!(e.escalation.is_none() && e.raced.is_none(), "{e:?}");
        // A path raced to a persistence file: persistence.
        let e = entry(attr(
            &c,
            &setxattr(
                "/tmp/f",
                "user.x",
                Some(("/home/alice/.bashrc", Some("user.x"))),
            ),
        ));
        assert!(e.persistence && e.escalation.is_none(), "{e:?}");
    }

    fn ev(op: KernelNetOp, result: i32, sock: u64) -> Net {
        Net {
            header: Header {
                tgid: 5,
                pid: 5,
                ktime_ns: 1,
                start_ns: 1,
                seq: 0,
            },
            op,
            family: 2,
            sock_type: 1,
            protocol: 6,
            addr: Some("127.0.0.1".parse().unwrap()),
            port: 80,
            netns: 7,
            result,
            sock,
            unix_path: None,
            vsock: None,
            payload: Vec::new(),
        }
    }

    #[test]
    fn outcomes_pair_with_their_socket_in_either_order() {
        let mut s = Sockets::default();
        // In progress, then its outcome: the records share the socket's number.
        let [Record::Net(c)] = &net(&mut s, &ev(KernelNetOp::Connect, -115, 0xa), "t", None)[..]
        else {
            panic!()
        };
        assert_eq!((c.result.as_str(), c.socket), ("in_progress", Some(1)));
        let [Record::NetResult(r)] = &net(
            &mut s,
            &ev(KernelNetOp::ConnectResult, -111, 0xa),
            "t",
            None,
        )[..] else {
            panic!()
        };
        assert_eq!((r.result.as_str(), r.socket), ("refused", Some(1)));
        // The outcome first (loopback): no record for it, the connect carries it.
        assert!(net(&mut s, &ev(KernelNetOp::ConnectResult, 0, 0xb), "t", None).is_empty());
        let [Record::Net(c)] = &net(&mut s, &ev(KernelNetOp::Connect, -115, 0xb), "t", None)[..]
        else {
            panic!()
        };
        assert_eq!((c.result.as_str(), c.socket), ("ok", None));
    }

    fn out(pid: u32, syscall: i32, sock: u64, port: u16, netns: u32) -> Conn {
        Conn {
            header: Header {
                tgid: 5,
                pid,
                ktime_ns: 1,
                start_ns: 1,
                seq: 0,
            },
            op: ConnOp::Out,
            family: 2,
            sock_type: 1,
            protocol: 6,
            saddr: None,
            sport: 0,
            daddr: Some("127.0.0.1".parse().unwrap()),
            dport: port,
            sk_netns: netns,
            task_netns: netns,
            syscall,
            io_worker: syscall == -1,
            err: 0,
            bytes_sent: 0,
            bytes_received: 0,
            sock,
        }
    }

    #[test]
    fn a_connect_whose_caller_showed_another_address_or_socket_is_tamper() {
        let mut s = Sockets::default();
        // The kernel connected sock 0xa to 127.0.0.1:80 in thread 6 (connect(2)): held.
        assert!(conn(&mut s, &out(6, SYS_CONNECT, 0xa, 80, 7), "t", None).is_empty());
        // Its exit record: the caller's buffer says 10.1.1.1:443 and the fd names sock 0xb.
        let mut exit = ev(KernelNetOp::Connect, 0, 0xb);
        exit.header.pid = 6;
        exit.addr = Some("10.1.1.1".parse().unwrap());
        exit.port = 443;
        exit.netns = 8;
        let [Record::Net(e), Record::NetTamper(t)] = &net(&mut s, &exit, "t", Some(8))[..] else {
            panic!()
        };
        // The entry is the kernel's; the tamper record has both views.
        assert_eq!(
            (e.addr.as_deref(), e.port, e.netns),
            (Some("127.0.0.1"), Some(80), Some(7))
        );
        assert_eq!(e.verdict, Verdict::Outside);
        assert_eq!(
            (t.caller_addr.as_deref(), t.caller_port),
            (Some("10.1.1.1"), Some(443))
        );
        assert!(t.fd_swapped);
        // An honest connect: the same values, no tamper record.
        assert!(conn(&mut s, &out(6, SYS_CONNECT, 0xc, 80, 7), "t", None).is_empty());
        let mut exit = ev(KernelNetOp::Connect, 0, 0xc);
        exit.header.pid = 6;
        assert!(matches!(
            &net(&mut s, &exit, "t", None)[..],
            [Record::Net(_)]
        ));
    }

    #[test]
    fn connections_without_connect_2_get_their_outcome_by_socket() {
        let mut s = Sockets::default();
        let [Record::Net(e)] = &conn(&mut s, &out(6, -1, 0xa, 80, 7), "t", None)[..] else {
            panic!()
        };
        assert_eq!(
            (e.result.as_str(), e.via.as_deref()),
            ("in_progress", Some("io_uring worker"))
        );
        let mut up = out(6, -1, 0xa, 80, 7);
        up.op = ConnOp::Up;
        let [Record::NetResult(r)] = &conn(&mut s, &up, "t", None)[..] else {
            panic!()
        };
        assert_eq!((r.result.as_str(), r.socket), ("ok", e.socket));
        // A fastopen sendto, refused.
        let [Record::Net(e)] = &conn(&mut s, &out(6, SYS_SENDTO, 0xb, 81, 7), "t", None)[..] else {
            panic!()
        };
        assert_eq!(e.via.as_deref(), Some("fastopen sendto"));
        let mut down = out(6, -1, 0xb, 81, 7);
        (down.op, down.err) = (ConnOp::Down, 111);
        let [Record::NetResult(r)] = &conn(&mut s, &down, "t", None)[..] else {
            panic!()
        };
        assert_eq!(r.result, "refused");
    }
}
