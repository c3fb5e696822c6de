//! Loads the embedded BPF object, attaches its programs and gives access to its maps.
//!
//! The table `PROGRAMS` lists every program with the hook it needs and what is lost without
//! it. Required hooks failing is an error (exit 4); an optional one failing becomes a gap in
//! the report (`probe.gaps`), never a silent hole. The open hook is chosen by trying: fentry on
//! `security_file_open` first, the syscall tracepoints where fentry is refused.
use std::path::Path;

use aya::{
    Btf, Ebpf, EbpfLoader,
    maps::{Array, HashMap, IterableMap, MapData, PerCpuArray, RingBuf},
    programs::{BtfTracePoint, FEntry, ProgramError, RawTracePoint, TracePoint},
};
use sandbox_watch_common::{
    EventKind, FileKey, FlowKey, FlowValue, InodeKey, KIND_SLOTS, ReadKey, fails, globals,
};

use super::guard::{self, Object};

/// Which hook delivered file opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FileHook {
    Fentry,
    Tracepoint,
}

impl FileHook {
    pub fn as_str(self) -> &'static str {
        match self {
            FileHook::Fentry => "fentry",
            FileHook::Tracepoint => "tracepoint",
        }
    }
}

/// The kernel's two ring buffers: what traced processes wrote to their stdout and stderr
/// (`output`), and every other record (`events`). Output has its own so that a flood of it
/// loses only output: the records of what ran, opened, connected and exited are never pushed
/// out by it.
pub struct Rings {
    pub events: RingBuf<MapData>,
    pub output: RingBuf<MapData>,
}

/// What the loader can be asked for.
#[derive(Clone, Debug, Default)]
pub struct ProbeOptions {
    /// Bytes of the ring buffer (a power of two, at least a page).
    pub ring_buffer_bytes: Option<u32>,
    /// Bytes of the output ring buffer (the same rules).
    pub output_ring_bytes: Option<u32>,
    /// Container mode: trace tasks under this cgroup (id, level in the hierarchy).
    pub cgroup: Option<(u64, u32)>,
    /// Use this open hook instead of trying fentry first (tests use it).
    pub file_hook: Option<FileHook>,
    /// The monitor's own files (outputs, signing key): an open of one by a traced task is a
    /// tamper record, whatever path it used.
    pub outputs: Vec<FileKey>,
}

#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error(
        "sandbox-watch needs root (or CAP_BPF and CAP_PERFMON) to load its probe; run it with sudo"
    )]
    NotPrivileged,
    #[error(
        "this kernel has no BTF (/sys/kernel/btf/vmlinux is missing); sandbox-watch needs a kernel built with CONFIG_DEBUG_INFO_BTF=y"
    )]
    NoBtf,
    #[error("could not load the BPF object: {0}")]
    Load(String),
    #[error("could not attach {program} to {hook}: {error}")]
    Attach {
        program: &'static str,
        hook: String,
        error: String,
    },
}

enum Hook {
    Raw(&'static str),
    Syscall(&'static str),
    /// A BTF-typed tracepoint (`tp_btf`).
    Btf(&'static str),
    /// One program attached to several syscall tracepoints (it reads which from the record).
    Syscalls(&'static [&'static str], Absent),
}

/// What a [`Hook::Syscalls`] tracepoint this kernel does not have means for the report.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Absent {
    /// Nothing: the call is missing too, and its family is whole without it (the attribute
    /// calls: fchmodat2, setxattrat).
    Quiet,
    /// A gap, named as a single syscall tracepoint's is (`probe.gaps`): the call is missing
    /// too, but a reader of the report should not have to know which calls this kernel has.
    Named,
}

struct Program {
    name: &'static str,
    hook: Hook,
    /// What the report says is missing when this program cannot run; None = required.
    gap: Option<&'static str>,
    /// Only for the syscall open hook (left out when fentry runs).
    open_fallback: bool,
}

const fn raw(tp: &'static str) -> Program {
    Program {
        name: tp,
        hook: Hook::Raw(tp),
        gap: None,
        open_fallback: false,
    }
}

/// A syscall tracepoint program (named as its tracepoint) and what is unseen without it.
const fn sys(tp: &'static str, gap: &'static str) -> Program {
    Program {
        name: tp,
        hook: Hook::Syscall(tp),
        gap: Some(gap),
        open_fallback: false,
    }
}

/// A syscall tracepoint of the open fallback (left out when fentry runs).
const fn open(tp: &'static str, gap: &'static str) -> Program {
    Program {
        name: tp,
        hook: Hook::Syscall(tp),
        gap: Some(gap),
        open_fallback: true,
    }
}

#[rustfmt::skip]
const PROGRAMS: &[Program] = &[
    raw("sched_process_fork"),
    raw("sched_process_exec"),
    raw("sched_process_exit"),
    sys("sys_exit_execve", "failed execve"), sys("sys_exit_execveat", "failed execveat"),
    open("sys_exit_openat", "openat"),
    open("sys_exit_open", "open"),
    open("sys_exit_creat", "creat"),
    open("sys_exit_openat2", "openat2"),
    open("sys_exit_open_by_handle_at", "open_by_handle_at"),
    sys("sys_exit_unlink", "unlink"),
    sys("sys_exit_unlinkat", "unlinkat"),
    sys("sys_exit_rmdir", "rmdir"),
    sys("sys_exit_rename", "rename"),
    sys("sys_exit_renameat", "renameat"),
    sys("sys_exit_renameat2", "renameat2"),
    sys("sys_exit_symlink", "symlink"), sys("sys_exit_symlinkat", "symlinkat"),
    sys("sys_exit_link", "link"), sys("sys_exit_linkat", "linkat"),
    // The names at the entry of each, to find a thread that rewrote them during the call.
    sys("sys_enter_unlink", "races on unlink's name"),
    sys("sys_enter_unlinkat", "races on unlinkat's name"),
    sys("sys_enter_rmdir", "races on rmdir's name"),
    sys("sys_enter_rename", "races on rename's names"),
    sys("sys_enter_renameat", "races on renameat's names"),
    sys("sys_enter_renameat2", "races on renameat2's names"),
    sys("sys_enter_symlink", "races on symlink's names"),
    sys("sys_enter_symlinkat", "races on symlinkat's names"),
    sys("sys_enter_link", "races on link's names"),
    sys("sys_enter_linkat", "races on linkat's names"),
    Program {
        name: "io_uring_submit_req",
        hook: Hook::Btf("io_uring_submit_req"),
        gap: Some("renames, deletes, links, mkdirs and xattrs made through io_uring"),
        open_fallback: false,
    },
    // Opens made through io_uring, from the completion's descriptor (probes/uring.rs): where
    // fentry runs, security_file_open sees them itself.
    Program {
        name: "io_uring_complete",
        hook: Hook::Btf("io_uring_complete"),
        gap: Some("file opens made through io_uring"),
        open_fallback: true,
    },
    sys("sys_exit_connect", "connect"),
    sys("sys_exit_listen", "listen"),
    sys("sys_exit_bind", "UDP server bind"),
    sys("sys_exit_write", "output written with write"),
    sys("sys_exit_pwrite64", "output written with pwrite64"),
    sys("sys_exit_writev", "output of writev"),
    sys("sys_exit_pwritev", "output of pwritev"),
    sys("sys_exit_pwritev2", "output of pwritev2"),
    sys("sys_exit_sendfile64", "output counts of sendfile"),
    sys("sys_exit_splice", "output counts of splice"),
    sys("sys_exit_copy_file_range", "output counts of copy_file_range"),
    sys("sys_exit_tee", "output counts of tee"),
    sys("sys_exit_vmsplice", "output counts of vmsplice"),
    Program {
        name: "inet_sock_set_state",
        hook: Hook::Raw("inet_sock_set_state"),
        gap: Some("TCP connections from the kernel's socket (io_uring and fastopen connects, accepted connections, outcomes)"),
        open_fallback: false,
    },
    Program {
        name: "net_dev_queue",
        hook: Hook::Btf("net_dev_queue"),
        gap: Some("datagrams and packets from the packet (UDP, raw, ICMP, AF_PACKET, io_uring sends), and DNS questions"),
        open_fallback: false,
    },
    // The agent acting on its monitor (probes/tamper.rs).
    sys("sys_enter_bpf", "bpf(2)"),
    sys("sys_exit_bpf", "bpf(2) descriptors of the monitor's objects"),
    sys("sys_enter_ptrace", "ptrace of the monitor"),
    sys("sys_enter_process_vm_readv", "process_vm_readv of the monitor"),
    sys("sys_enter_process_vm_writev", "process_vm_writev of the monitor"),
    sys("sys_enter_pidfd_open", "pidfd_open of the monitor"),
    sys("sys_enter_pidfd_getfd", "pidfd_getfd from the monitor"),
    sys("sys_enter_pidfd_send_signal", "pidfd_send_signal to the monitor"),
    sys("sys_enter_kill", "kill of the monitor"),
    sys("sys_enter_tkill", "tkill of the monitor"),
    sys("sys_enter_tgkill", "tgkill of the monitor"),
    sys("sys_enter_init_module", "kernel module loads by init_module"),
    sys("sys_enter_finit_module", "kernel module loads by finit_module"),
    // Attribute changes (probes/attr.rs): one program verified once, attached to each; and
    // one on their entries, for the names they take from the caller's memory.
    Program {
        name: "sys_exit_attr",
        hook: Hook::Syscalls(ATTR_CALLS, Absent::Quiet),
        gap: Some("attribute changes"),
        open_fallback: false,
    },
    // Mount and namespace changes (probes/mounts.rs): one program, attached to each.
    Program {
        name: "sys_exit_mounts",
        hook: Hook::Syscalls(MOUNT_CALLS, Absent::Named),
        gap: Some("mount and namespace changes"),
        open_fallback: false,
    },
    Program {
        name: "sys_enter_attr",
        hook: Hook::Syscalls(ATTR_ENTRIES, Absent::Quiet),
        gap: Some("attribute calls' names rewritten during the call"),
        open_fallback: false,
    },
    // Whether an open for write was written through (probes/files.rs): one program on the
    // exits of the write calls.
    Program {
        name: "sys_exit_file_writes",
        hook: Hook::Syscalls(FILE_WRITE_CALLS, Absent::Quiet),
        gap: Some("write calls into pages still dirty from the same clock tick, as making an open for write `modified`"),
        open_fallback: false,
    },
    Program {
        name: "writeback_mark_inode_dirty",
        hook: Hook::Btf("writeback_mark_inode_dirty"),
        gap: Some("writes through descriptors the capture did not see opened (inherited, pidfd_getfd, before attach, shared mappings)"),
        open_fallback: false,
    },
    Program {
        name: "signal_generate",
        hook: Hook::Btf("signal_generate"),
        gap: Some("signals to the monitor"),
        open_fallback: false,
    },
];

/// BTF tracepoints with another name on older kernels (same arguments first): (name, older
/// name). io_uring_submit_sqe(req, force_nonblock) became io_uring_submit_req(req) in 6.2.
const BTF_RENAMED: &[(&str, &str)] = &[("io_uring_submit_req", "io_uring_submit_sqe")];

/// The exits `sys_exit_file_writes` is attached to: the calls that write to a descriptor.
const FILE_WRITE_CALLS: &[&str] = &[
    "sys_exit_write",
    "sys_exit_pwrite64",
    "sys_exit_writev",
    "sys_exit_pwritev",
    "sys_exit_pwritev2",
    "sys_exit_sendfile64",
    "sys_exit_splice",
    "sys_exit_copy_file_range",
];

/// The entries `sys_enter_attr` is attached to: those of [`ATTR_CALLS`] that take a name from
/// the caller's memory (fchmod, fchown and ftruncate take none).
const ATTR_ENTRIES: &[&str] = &[
    "sys_enter_chmod",
    "sys_enter_fchmodat",
    "sys_enter_fchmodat2",
    "sys_enter_chown",
    "sys_enter_lchown",
    "sys_enter_fchownat",
    "sys_enter_truncate",
    "sys_enter_mkdir",
    "sys_enter_mkdirat",
    "sys_enter_setxattr",
    "sys_enter_lsetxattr",
    "sys_enter_fsetxattr",
    "sys_enter_setxattrat",
    "sys_enter_utimensat",
    "sys_enter_utime",
    "sys_enter_utimes",
    "sys_enter_futimesat",
];

/// The exits `sys_exit_attr` is attached to (kernels without fchmodat2, 6.6, or setxattrat,
/// 6.13, do not have those calls at all: not a gap).
const ATTR_CALLS: &[&str] = &[
    "sys_exit_chmod",
    "sys_exit_fchmod",
    "sys_exit_fchmodat",
    "sys_exit_fchmodat2",
    "sys_exit_chown",
    "sys_exit_lchown",
    "sys_exit_fchown",
    "sys_exit_fchownat",
    "sys_exit_truncate",
    "sys_exit_ftruncate",
    "sys_exit_mkdir",
    "sys_exit_mkdirat",
    "sys_exit_setxattr",
    "sys_exit_lsetxattr",
    "sys_exit_fsetxattr",
    "sys_exit_setxattrat",
    "sys_exit_utimensat",
    "sys_exit_utime",
    "sys_exit_utimes",
    "sys_exit_futimesat",
];

/// The exits `sys_exit_mounts` is attached to (umount2's tracepoint is named after umount).
/// A kernel without one (open_tree_attr, 6.15; the new mount API before 5.2) has not the call
/// either, but the report says so: a mount made some other way would be unseen.
const MOUNT_CALLS: &[&str] = &[
    "sys_exit_mount",
    "sys_exit_umount",
    "sys_exit_move_mount",
    "sys_exit_open_tree",
    "sys_exit_open_tree_attr",
    "sys_exit_fsopen",
    "sys_exit_fsconfig",
    "sys_exit_fsmount",
    "sys_exit_fspick",
    "sys_exit_mount_setattr",
    "sys_exit_pivot_root",
    "sys_exit_chroot",
    "sys_exit_unshare",
    "sys_exit_setns",
];

/// The programs attached by hand, not from `PROGRAMS`: fentry on security_file_open, and the
/// fexit on do_sys_openat2 for the opens that failed (both where the kernel allows fentry).
const FENTRY_OPEN: &str = "security_file_open";
const FEXIT_OPENAT2: &str = "do_sys_openat2_exit";

/// The io_uring gap of the syscall open hook, worded for people.
pub const IO_URING_GAP: &str = "some io_uring opens (failed ones, ones never completed, and ones into fixed-file slots on kernels before 6.13: the fentry hook on security_file_open was refused by this kernel, so io_uring opens are read from what their completion returns, the descriptor or the slot, and an open whose completion is never posted, on a DEFER_TASKRUN ring its owner never waits on, is not seen)";

/// An attached program's link: detached when dropped.
type Link = Box<dyn Send>;

pub struct Probe {
    /// Detached together when the probe is dropped (see `Drop`).
    links: Vec<Link>,
    ebpf: Ebpf,
    pub file_hook: FileHook,
    pub gaps: Vec<String>,
    traced: HashMap<MapData, u32, u32>,
    reads: HashMap<MapData, ReadKey, u64>,
    always: HashMap<MapData, InodeKey, u8>,
    flows: HashMap<MapData, FlowKey, FlowValue>,
    drops: PerCpuArray<MapData, u64>,
    seq: Array<MapData, u64>,
    fails: PerCpuArray<MapData, u64>,
    /// The BPF objects this process holds, with their names (maps): what a tamper record's
    /// id is checked against.
    pub own: Vec<(Object, String)>,
    /// The maps frozen so far, by name.
    pub frozen: Vec<&'static str>,
}

/// Maps no bpf(2) call may write once the programs run: frozen at load. (TRACED is frozen
/// once the target is seeded, `Probe::seal`; READS and the ring buffer stay writable, see
/// the README.)
const FROZEN_AT_LOAD: &[&str] = &[
    "SEQ",
    "DROPS",
    "FAILS",
    "OWN_IDS",
    "MON_TIDS",
    "OUTPUTS",
    "CONNS",
    "LISTENERS",
    "FLOWS",
    "SCRATCH",
];

static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/sandbox-watch"));

/// Whether this process may load BPF programs (root, or CAP_BPF+CAP_PERFMON in effect).
pub fn privileged() -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    // CapEff bits: CAP_PERFMON = 38, CAP_BPF = 39.
    procfs::process::Process::myself()
        .and_then(|me| me.status())
        .is_ok_and(|s| s.capeff & (1 << 38) != 0 && s.capeff & (1 << 39) != 0)
}

/// aya finds syscall tracepoints through tracefs; mount it where the kernel expects it when
/// nothing is there yet.
fn ensure_tracefs() {
    let dir = Path::new("/sys/kernel/tracing");
    let empty = std::fs::read_dir(dir)
        .map(|mut d| d.next().is_none())
        .unwrap_or(false);
    if empty {
        let _ = nix::mount::mount(
            Some("nodev"),
            dir,
            Some("tracefs"),
            nix::mount::MsFlags::empty(),
            None::<&str>,
        );
    }
}

impl Drop for Probe {
    /// Detaching a syscall tracepoint waits for RCU grace periods: on 6.18 the last close of
    /// the links took 1.6 s at every exit, even all at once. So a child that outlives us holds
    /// a copy of every descriptor: our closes are then not the last, and the detach happens
    /// when that child exits, after us, with nobody waiting for it. Where the child cannot be
    /// made, the links are closed together here (their waits overlap).
    fn drop(&mut self) {
        let links = std::mem::take(&mut self.links);
        if detach_after_exit() {
            drop(links);
            return;
        }
        std::thread::scope(|s| {
            for link in links {
                s.spawn(move || drop(link));
            }
        });
    }
}

/// Forks a child that keeps a copy of what keeps our programs attached (the BPF links and
/// perf events) until this process has exited, then exits. It closes every other descriptor
/// first: no pipe or terminal of ours stays open in it. False if it could not be made.
fn detach_after_exit() -> bool {
    let mut fds = [0; 2];
    // SAFETY: fds is a valid array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return false;
    }
    let [read_end, write_end] = fds;
    let mut keep = attachment_fds();
    keep.push(read_end);
    keep.sort_unstable();
    // SAFETY: the child calls only async-signal-safe functions (close_range, read, _exit) and
    // never returns: other threads' locks (the allocator's among them) are never needed in it.
    match unsafe { libc::fork() } {
        0 => unsafe {
            let mut next = 0u32;
            for &fd in &keep {
                let fd = fd as u32;
                if fd > next {
                    libc::syscall(libc::SYS_close_range, next, fd - 1, 0);
                }
                next = fd + 1;
            }
            libc::syscall(libc::SYS_close_range, next, u32::MAX, 0);
            let mut byte = 0u8;
            // EOF comes when the last write end closes: when we have exited.
            while libc::read(read_end, (&raw mut byte).cast(), 1) < 0
                && *libc::__errno_location() == libc::EINTR
            {}
            libc::_exit(0)
        },
        -1 => {
            // SAFETY: both are ours and unused.
            unsafe {
                libc::close(read_end);
                libc::close(write_end);
            }
            false
        }
        _ => {
            // The write end stays open until we exit.
            // SAFETY: read_end is ours and unused.
            unsafe { libc::close(read_end) };
            true
        }
    }
}

/// Our descriptors of BPF links and perf events.
fn attachment_fds() -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let fd = e.file_name().to_str()?.parse().ok()?;
            let target = std::fs::read_link(e.path()).ok()?;
            matches!(
                target.to_str()?,
                "anon_inode:bpf-link" | "anon_inode:[perf_event]"
            )
            .then_some(fd)
        })
        .collect()
}

impl Probe {
    pub fn load(options: &ProbeOptions) -> Result<Probe, ProbeError> {
        if !privileged() {
            return Err(ProbeError::NotPrivileged);
        }
        if !Path::new("/sys/kernel/btf/vmlinux").exists() {
            return Err(ProbeError::NoBtf);
        }
        ensure_tracefs();
        let btf = Btf::from_sys_fs().map_err(|e| ProbeError::Load(format!("reading BTF: {e}")))?;
        let cpus = aya::util::nr_cpus().map_err(|(_, e)| ProbeError::Load(e.to_string()))? as u32;
        let (cgroup_id, cgroup_level) = options.cgroup.unwrap_or((0, 0));
        let (monitor_tgid, monitor_pidns) = (std::process::id(), guard::own_pidns());
        let mut loader = EbpfLoader::new();
        loader
            .btf(Some(&btf))
            .map_max_entries("SCRATCH", cpus)
            .override_global(globals::CGROUP_ID, &cgroup_id, true)
            .override_global(globals::CGROUP_LEVEL, &cgroup_level, true)
            .override_global(globals::MONITOR_TGID, &monitor_tgid, true)
            .override_global(globals::MONITOR_PIDNS, &monitor_pidns, true);
        if let Some(bytes) = options.ring_buffer_bytes {
            loader.map_max_entries("EVENTS", bytes);
        }
        if let Some(bytes) = options.output_ring_bytes {
            loader.map_max_entries("OUTPUT", bytes);
        }
        let mut ebpf = loader
            .load(OBJECT)
            .map_err(|e| ProbeError::Load(format!("{e:#}")))?;

        let mut gaps = Vec::new();
        let mut links: Vec<Link> = Vec::new();
        let file_hook = match options.file_hook {
            Some(FileHook::Tracepoint) => FileHook::Tracepoint,
            _ => match attach_fentry(&mut ebpf, &btf) {
                Ok(link) => {
                    links.push(link);
                    FileHook::Fentry
                }
                Err(e) if options.file_hook == Some(FileHook::Fentry) => {
                    return Err(ProbeError::Attach {
                        program: "security_file_open",
                        hook: "fentry/security_file_open".into(),
                        error: format!(
                            "{e}. This kernel refuses fentry: leave out --file-hook (the syscall \
                             tracepoints are used then) or pass --file-hook tracepoint"
                        ),
                    });
                }
                Err(e) => {
                    log::info!(
                        "fentry on security_file_open refused ({e}); using syscall tracepoints"
                    );
                    FileHook::Tracepoint
                }
            },
        };
        if file_hook == FileHook::Tracepoint {
            gaps.push(IO_URING_GAP.to_string());
        } else {
            match attach_fexit(&mut ebpf, &btf, FEXIT_OPENAT2, "do_sys_openat2") {
                Ok(link) => links.push(link),
                Err(e) => {
                    // Opens that fail never reach security_file_open.
                    log::warn!("fexit on do_sys_openat2 not attached: {e}");
                    gaps.push(format!(
                        "file opens that failed (fexit/do_sys_openat2 could not be attached: {e})"
                    ));
                }
            }
        }
        for p in PROGRAMS {
            if let Hook::Syscalls(tracepoints, absent) = p.hook {
                gaps.extend(attach_each(&mut ebpf, p, tracepoints, absent, &mut links));
            }
        }
        let wanted: Vec<&Program> = PROGRAMS
            .iter()
            .filter(|p| !(p.open_fallback && file_hook == FileHook::Fentry))
            .filter(|p| !matches!(p.hook, Hook::Syscalls(..)))
            .collect();
        for (p, attached) in wanted.iter().zip(attach_all(&mut ebpf, &wanted, &btf)) {
            match attached {
                Ok(link) => links.push(link),
                Err(error) => match p.gap {
                    None => {
                        return Err(ProbeError::Attach {
                            program: p.name,
                            hook: hook_name(&p.hook),
                            error,
                        });
                    }
                    Some(what) => {
                        log::warn!("{} not attached: {error}", p.name);
                        gaps.push(format!(
                            "{what} calls ({} could not be attached: {error})",
                            hook_name(&p.hook)
                        ));
                    }
                },
            }
        }
        gaps.dedup();

        // Parsing the kernel's BTF took tens of MB that are free now: give them back.
        drop(btf);
        // SAFETY: malloc_trim only releases free heap memory.
        unsafe { libc::malloc_trim(0) };
        let own = tell_the_kernel_what_is_ours(&mut ebpf, &options.outputs)?;
        let mut frozen = Vec::new();
        for name in FROZEN_AT_LOAD {
            let map = ebpf
                .map(name)
                .ok_or_else(|| ProbeError::Load(format!("map {name} missing from the object")))?;
            let data = map_data(map)
                .ok_or_else(|| ProbeError::Load(format!("map {name}: unexpected type")))?;
            guard::freeze(data)
                .map_err(|e| ProbeError::Load(format!("freezing map {name}: {e}")))?;
            frozen.push(*name);
        }
        let traced = take_map(&mut ebpf, "TRACED")?;
        let reads = take_map(&mut ebpf, "READS")?;
        let always = take_map(&mut ebpf, "ALWAYS")?;
        let drops = take_map(&mut ebpf, "DROPS")?;
        let seq = take_map(&mut ebpf, "SEQ")?;
        let fails = take_map(&mut ebpf, "FAILS")?;
        let flows = take_map(&mut ebpf, "FLOWS")?;
        Ok(Probe {
            links,
            ebpf,
            file_hook,
            gaps,
            traced,
            reads,
            always,
            drops,
            seq,
            fails,
            own,
            frozen,
            flows,
        })
    }

    /// The ring buffers; call once. The size of the one for everything but output goes to
    /// [`super::backlog`].
    pub fn rings(&mut self) -> Result<Rings, ProbeError> {
        let events = self.take_ring("EVENTS")?;
        if let Ok(info) = events.info() {
            super::backlog::ring_size(info.max_entries().into());
        }
        let output = self.take_ring("OUTPUT")?;
        let ring = |name, data| {
            RingBuf::try_from(aya::maps::Map::RingBuf(data))
                .map_err(|e| ProbeError::Load(format!("map {name}: {e}")))
        };
        Ok(Rings {
            events: ring("EVENTS", events)?,
            output: ring("OUTPUT", output)?,
        })
    }

    fn take_ring(&mut self, name: &str) -> Result<MapData, ProbeError> {
        match self.ebpf.take_map(name) {
            Some(aya::maps::Map::RingBuf(data)) => Ok(data),
            Some(_) => Err(ProbeError::Load(format!("map {name} is not a ring buffer"))),
            None => Err(ProbeError::Load(format!(
                "map {name} missing from the object"
            ))),
        }
    }

    /// Adds a thread group to the traced set.
    pub fn trace(&mut self, tgid: u32) -> Result<(), ProbeError> {
        self.traced
            .insert(tgid, 1, 0)
            .map_err(|e| ProbeError::Load(format!("adding pid {tgid} to the traced set: {e}")))
    }

    /// Records lost in the kernel so far, per event kind (index = kind number).
    pub fn lost(&self) -> [u64; KIND_SLOTS as usize] {
        let mut out = [0u64; KIND_SLOTS as usize];
        for (slot, total) in out.iter_mut().enumerate() {
            if let Ok(values) = self.drops.get(&(slot as u32), 0) {
                *total = values.iter().sum();
            }
        }
        out
    }

    /// Freezes the traced set once the target is in it: from now on only the kernel adds (a
    /// traced task's children, the container's tasks) and removes (exits); a bpf(2) call can
    /// neither take a process out nor put one in.
    pub fn seal(&mut self) -> Result<(), ProbeError> {
        guard::freeze(self.traced.map())
            .map_err(|e| ProbeError::Load(format!("freezing map TRACED: {e}")))?;
        self.frozen.push("TRACED");
        Ok(())
    }

    /// Map inserts that failed in the kernel so far (index: `sandbox_watch_common::fails`).
    pub fn failed_inserts(&self) -> [u64; fails::SLOTS as usize] {
        let mut out = [0u64; fails::SLOTS as usize];
        for (slot, total) in out.iter_mut().enumerate() {
            if let Ok(values) = self.fails.get(&(slot as u32), 0) {
                *total = values.iter().sum();
            }
        }
        out
    }

    /// How many records the kernel has numbered so far (the next sequence number): with the
    /// records received, what never arrived.
    pub fn sequence(&self) -> u64 {
        self.seq.get(&0, 0).unwrap_or(0)
    }

    /// Every flow the kernel counted (packets and bytes so far), by key.
    pub fn flows(&self) -> Vec<(FlowKey, FlowValue)> {
        self.flows.iter().filter_map(Result::ok).collect()
    }

    /// Makes the kernel send every open of this inode, by any traced process (credentials).
    pub fn always_report(&mut self, dev: u32, ino: u64) -> Result<(), aya::maps::MapError> {
        self.always.insert(InodeKey { dev, _pad: 0, ino }, 1, 0)
    }

    /// Takes the number of further plain reads the kernel counted but did not send.
    pub fn take_read_count(&mut self, key: &ReadKey) -> u64 {
        match self.reads.get(key, 0) {
            Err(_) => 0,
            Ok(n) => {
                let _ = self.reads.remove(key);
                n
            }
        }
    }
}

fn take_map<T: TryFrom<aya::maps::Map, Error = aya::maps::MapError>>(
    ebpf: &mut Ebpf,
    name: &str,
) -> Result<T, ProbeError> {
    let map = ebpf
        .take_map(name)
        .ok_or_else(|| ProbeError::Load(format!("map {name} missing from the object")))?;
    T::try_from(map).map_err(|e| ProbeError::Load(format!("map {name}: {e}")))
}

fn hook_name(hook: &Hook) -> String {
    match hook {
        Hook::Raw(tp) => format!("raw_tracepoint/{tp}"),
        Hook::Syscall(tp) => format!("tracepoint/syscalls/{tp}"),
        Hook::Btf(tp) => format!("tp_btf/{tp}"),
        Hook::Syscalls(tps, _) => format!("tracepoint/syscalls/{{{}}}", tps.join(",")),
    }
}

/// The descriptor-holding part of a map aya has not handed out yet.
fn map_data(map: &aya::maps::Map) -> Option<&MapData> {
    use aya::maps::Map;
    match map {
        Map::Array(d) | Map::HashMap(d) | Map::LruHashMap(d) | Map::PerCpuArray(d) => Some(d),
        _ => None,
    }
}

/// Fills `OWN_IDS` (every map, program and link this process holds: read once all are
/// attached), `MON_TIDS` (its threads) and `OUTPUTS`; they are frozen after.
fn tell_the_kernel_what_is_ours(
    ebpf: &mut Ebpf,
    outputs: &[FileKey],
) -> Result<Vec<(Object, String)>, ProbeError> {
    let err = |what: &str, e: aya::maps::MapError| ProbeError::Load(format!("{what}: {e}"));
    let objects = guard::own_objects();
    let mut own_ids: HashMap<&mut MapData, u64, u32> = HashMap::try_from(
        ebpf.map_mut("OWN_IDS")
            .ok_or_else(|| ProbeError::Load("map OWN_IDS missing from the object".into()))?,
    )
    .map_err(|e| err("map OWN_IDS", e))?;
    for o in &objects {
        own_ids
            .insert(o.key(), 1, 0)
            .map_err(|e| err("OWN_IDS", e))?;
    }
    let mut threads: HashMap<&mut MapData, u32, u32> = HashMap::try_from(
        ebpf.map_mut("MON_TIDS")
            .ok_or_else(|| ProbeError::Load("map MON_TIDS missing from the object".into()))?,
    )
    .map_err(|e| err("map MON_TIDS", e))?;
    for tid in guard::own_threads() {
        threads.insert(tid, 1, 0).map_err(|e| err("MON_TIDS", e))?;
    }
    let mut files: HashMap<&mut MapData, FileKey, u32> = HashMap::try_from(
        ebpf.map_mut("OUTPUTS")
            .ok_or_else(|| ProbeError::Load("map OUTPUTS missing from the object".into()))?,
    )
    .map_err(|e| err("map OUTPUTS", e))?;
    for key in outputs {
        files.insert(*key, 1, 0).map_err(|e| err("OUTPUTS", e))?;
    }
    // Names, for the report: the maps by what aya calls them.
    let names: std::collections::HashMap<u32, String> = ebpf
        .maps()
        .filter_map(|(name, map)| Some((map_data(map)?.info().ok()?.id(), name.to_string())))
        .collect();
    Ok(objects
        .into_iter()
        .map(|o| {
            let name = match o.kind {
                sandbox_watch_common::tamper::OBJ_MAP => names.get(&o.id).cloned(),
                _ => None,
            };
            (o, name.unwrap_or_default())
        })
        .collect())
}

/// Loads and attaches `wanted` on as many threads as there are CPUs (at most 4), and gives
/// each one's result in `wanted`'s order. The verifier runs in the thread that loads, and it is
/// most of the start: one after the other, the 59 programs took 1.4 s to load here.
fn attach_all(ebpf: &mut Ebpf, wanted: &[&Program], btf: &Btf) -> Vec<Result<Link, String>> {
    let mut in_object: std::collections::HashMap<&str, &mut aya::programs::Program> =
        ebpf.programs_mut().collect();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    // Dealt in turn: the table keeps a family's programs (alike in cost) together.
    let mut shares: Vec<Vec<_>> = (0..threads).map(|_| Vec::new()).collect();
    for (i, p) in wanted.iter().enumerate() {
        shares[i % threads].push((i, *p, in_object.remove(p.name)));
    }
    let mut results: Vec<Option<Result<Link, String>>> = wanted.iter().map(|_| None).collect();
    std::thread::scope(|s| {
        let workers: Vec<_> = shares
            .into_iter()
            .map(|share| {
                s.spawn(move || {
                    share
                        .into_iter()
                        .map(|(i, p, prog)| {
                            let attached = match prog {
                                Some(prog) => attach(prog, p, btf),
                                None => Err("program missing from the object".to_string()),
                            };
                            (i, attached)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for worker in workers {
            for (i, attached) in worker.join().expect("loading a program does not panic") {
                results[i] = Some(attached);
            }
        }
    });
    results
        .into_iter()
        .map(|r| r.expect("every program was tried"))
        .collect()
}

fn attach(prog: &mut aya::programs::Program, p: &Program, btf: &Btf) -> Result<Link, String> {
    let e = |e: ProgramError| causes(&e);
    Ok(match p.hook {
        Hook::Raw(tp) => {
            let prog: &mut RawTracePoint = prog.try_into().map_err(e)?;
            prog.load().map_err(e)?;
            let id = prog.attach(tp).map_err(e)?;
            Box::new(prog.take_link(id).map_err(e)?)
        }
        Hook::Syscall(tp) => {
            // A kernel built without a syscall (init_module without CONFIG_MODULES) has no
            // tracepoint for it: say so, and spare the verifier a program that cannot run.
            let events = Path::new("/sys/kernel/tracing/events/syscalls");
            if events.is_dir() && !events.join(tp).exists() {
                return Err(
                    "this kernel has no such tracepoint (built without that system call)".into(),
                );
            }
            let prog: &mut TracePoint = prog.try_into().map_err(e)?;
            prog.load().map_err(e)?;
            let id = prog.attach("syscalls", tp).map_err(e)?;
            Box::new(prog.take_link(id).map_err(e)?)
        }
        Hook::Btf(tp) => {
            let prog: &mut BtfTracePoint = prog.try_into().map_err(e)?;
            if let Err(first) = prog.load(tp, btf) {
                // A tracepoint renamed since: its older name, where the kernel has that.
                let older = BTF_RENAMED.iter().find(|(now, _)| *now == tp);
                if older.is_none_or(|(_, old)| prog.load(old, btf).is_err()) {
                    return Err(e(first));
                }
            }
            let id = prog.attach().map_err(e)?;
            Box::new(prog.take_link(id).map_err(e)?)
        }
        Hook::Syscalls(..) => return Err("attached by attach_each".into()),
    })
}

/// Loads one program and attaches it to each syscall tracepoint: the gaps of those that could
/// not be attached (a tracepoint this kernel does not have, as `absent` says).
fn attach_each(
    ebpf: &mut Ebpf,
    p: &Program,
    tracepoints: &[&str],
    absent: Absent,
    links: &mut Vec<Link>,
) -> Vec<String> {
    let what = p.gap.unwrap_or(p.name);
    let e = |e: ProgramError| causes(&e);
    let prog: Result<&mut TracePoint, String> = ebpf
        .program_mut(p.name)
        .ok_or_else(|| "program missing from the object".to_string())
        .and_then(|prog| prog.try_into().map_err(e))
        .and_then(|prog: &mut TracePoint| prog.load().map(|()| prog).map_err(e));
    let prog = match prog {
        Ok(prog) => prog,
        Err(error) => {
            log::warn!("{} not loaded: {error}", p.name);
            return vec![format!(
                "{what} ({} could not be loaded: {error})",
                hook_name(&p.hook)
            )];
        }
    };
    let mut gaps = Vec::new();
    for tp in tracepoints {
        let call = tp
            .trim_start_matches("sys_exit_")
            .trim_start_matches("sys_enter_");
        match prog
            .attach("syscalls", tp)
            .and_then(|id| prog.take_link(id))
        {
            Ok(link) => links.push(Box::new(link)),
            Err(_)
                if !Path::new("/sys/kernel/tracing/events/syscalls")
                    .join(tp)
                    .exists() =>
            {
                log::info!("{tp}: no such tracepoint on this kernel (nor the call)");
                if absent == Absent::Named {
                    gaps.push(format!(
                        "{what}: {call} calls (tracepoint/syscalls/{tp} could not be attached: this kernel has no such tracepoint, nor the call)"
                    ));
                }
            }
            Err(error) => {
                let error = e(error);
                log::warn!("{} not attached to {tp}: {error}", p.name);
                gaps.push(format!(
                    "{what}: {call} calls (tracepoint/syscalls/{tp} could not be attached: {error})"
                ));
            }
        }
    }
    gaps
}

fn attach_fentry(ebpf: &mut Ebpf, btf: &Btf) -> Result<Link, String> {
    let prog = ebpf.program_mut(FENTRY_OPEN).ok_or("program missing")?;
    let e = |e: ProgramError| causes(&e);
    let prog: &mut FEntry = prog.try_into().map_err(e)?;
    prog.load("security_file_open", btf).map_err(e)?;
    let id = prog.attach().map_err(e)?;
    Ok(Box::new(prog.take_link(id).map_err(e)?))
}

fn attach_fexit(ebpf: &mut Ebpf, btf: &Btf, program: &str, function: &str) -> Result<Link, String> {
    let prog = ebpf.program_mut(program).ok_or("program missing")?;
    let e = |e: ProgramError| causes(&e);
    let prog: &mut aya::programs::FExit = prog.try_into().map_err(e)?;
    prog.load(function, btf).map_err(e)?;
    let id = prog.attach().map_err(e)?;
    Ok(Box::new(prog.take_link(id).map_err(e)?))
}

/// An error and its causes in one line ("… Verifier output: : Operation not permitted" reads
/// better without the empty verifier output).
fn causes(e: &dyn std::error::Error) -> String {
    let mut parts = vec![e.to_string()];
    let mut next = e.source();
    while let Some(cause) = next {
        parts.push(cause.to_string());
        next = cause.source();
    }
    let mut line = String::new();
    for p in &parts {
        let p = p.trim().trim_end_matches("Verifier output:").trim();
        let p = p.trim_end_matches('.');
        if p.is_empty() || line.contains(p) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(p);
    }
    line
}

/// Index into the per-kind drop counters.
pub fn kind_name(slot: usize) -> &'static str {
    EventKind::from_u32(slot as u32).map_or("other", EventKind::name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn the_program_table_and_the_object_name_the_same_programs() {
        // A program the object has but nothing attaches is a hook that silently never runs;
        // one the table names but the object lacks fails at every start.
        let object = aya_obj::Object::parse(OBJECT).expect("the embedded BPF object parses");
        let in_object: BTreeSet<&str> = object.programs.keys().map(String::as_str).collect();
        let attached: BTreeSet<&str> = PROGRAMS
            .iter()
            .map(|p| p.name)
            .chain([FENTRY_OPEN, FEXIT_OPENAT2])
            .collect();
        assert_eq!(attached, in_object);
        // Syscall programs are attached by their name: each is a real tracepoint's.
        for p in PROGRAMS {
            if let Hook::Syscalls(tps, _) = p.hook {
                let at = if p.name.starts_with("sys_enter_") {
                    "sys_enter_"
                } else {
                    "sys_exit_"
                };
                assert!(tps.iter().all(|tp| tp.starts_with(at)), "{tps:?}");
            }
            if let Hook::Syscall(tp) = p.hook {
                assert_eq!(p.name, tp);
                assert!(
                    tp.starts_with("sys_enter_") || tp.starts_with("sys_exit_"),
                    "{tp}"
                );
            }
        }
    }

    #[test]
    fn the_attribute_entries_are_the_exits_of_calls_that_take_a_name() {
        // Each entry has its exit; an exit without an entry takes no name from the caller.
        for tp in ATTR_ENTRIES {
            let exit = tp.replacen("sys_enter_", "sys_exit_", 1);
            assert!(ATTR_CALLS.contains(&exit.as_str()), "{tp}");
        }
        let by_fd: Vec<&str> = ATTR_CALLS
            .iter()
            .filter(|tp| {
                let entry = tp.replacen("sys_exit_", "sys_enter_", 1);
                !ATTR_ENTRIES.contains(&entry.as_str())
            })
            .copied()
            .collect();
        assert_eq!(
            by_fd,
            ["sys_exit_fchmod", "sys_exit_fchown", "sys_exit_ftruncate"]
        );
    }

    #[test]
    fn every_kind_has_a_drop_counter_and_a_name() {
        for k in EventKind::ALL {
            assert!((k as u32) < KIND_SLOTS);
            assert_eq!(kind_name(k as usize), k.name());
        }
        assert_eq!(kind_name(0), "other");
    }
}
