//! Loads the embedded BPF object, attaches its programs and gives access to its maps.
//!
//! The table `PROGRAMS` lists every program with the hook it needs and what is lost without
//! it. Required hooks failing is an error (exit 4); an optional one failing becomes a gap in
//! the report (`probe.gaps`), never a silent hole. The open hook is chosen by trying: fentry on
//! `security_file_open` first, the syscall tracepoints where fentry is refused.
use std::path::Path;

use aya::{
    Btf, Ebpf, EbpfLoader,
    maps::{Array, HashMap, MapData, PerCpuArray, RingBuf},
    programs::{FEntry, ProgramError, RawTracePoint, TracePoint},
};
use sandbox_watch_common::{EventKind, InodeKey, KIND_SLOTS, ReadKey, globals};

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

/// What the loader can be asked for.
#[derive(Clone, Debug, Default)]
pub struct ProbeOptions {
    /// Bytes of the ring buffer (a power of two, at least a page).
    pub ring_buffer_bytes: Option<u32>,
    /// Container mode: trace tasks under this cgroup (id, level in the hierarchy).
    pub cgroup: Option<(u64, u32)>,
    /// Use this open hook instead of trying fentry first (tests use it).
    pub file_hook: Option<FileHook>,
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
    /// One program attached to the enter or exit tracepoints of several syscalls (it tells
    /// them apart by the record's syscall number): verified once.
    Syscalls(&'static [Call]),
    /// A classic tracepoint outside `syscalls`: (category, name).
    Event(&'static str, &'static str),
    /// fentry on a kernel function (only where the open hook is fentry).
    Fentry(&'static str),
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

/// One syscall of a shared program: its name (the tracepoints are `sys_enter_NAME` and
/// `sys_exit_NAME`), and whether only recent kernels have it (fchmodat2 is 6.6+, setxattrat
/// 6.13+…: where its tracepoint does not exist, nothing can make the call).
struct Call {
    name: &'static str,
    recent: bool,
}

const fn call(name: &'static str) -> Call {
    Call {
        name,
        recent: false,
    }
}

const fn new_call(name: &'static str) -> Call {
    Call { name, recent: true }
}

/// A program attached to the enter or exit tracepoints (as its name says) of these calls.
const fn shared(name: &'static str, calls: &'static [Call]) -> Program {
    Program {
        name,
        hook: Hook::Syscalls(calls),
        gap: Some("calls"),
        open_fallback: false,
    }
}

/// Deletes, renames, links, mkdir, mknod (`paths.rs`).
const PATH_CALLS: &[Call] = &[
    call("unlink"),
    call("unlinkat"),
    call("rmdir"),
    call("rename"),
    call("renameat"),
    call("renameat2"),
    call("link"),
    call("linkat"),
    call("symlink"),
    call("symlinkat"),
    call("mkdir"),
    call("mkdirat"),
    call("mknod"),
    call("mknodat"),
];

/// The attribute calls that take a name (`attrs.rs`).
const ATTR_NAMED_CALLS: &[Call] = &[
    call("chmod"),
    call("fchmodat"),
    new_call("fchmodat2"),
    call("chown"),
    call("lchown"),
    call("fchownat"),
    call("truncate"),
    call("setxattr"),
    call("lsetxattr"),
    call("removexattr"),
    call("lremovexattr"),
    new_call("setxattrat"),
    new_call("removexattrat"),
    call("utimensat"),
    call("utimes"),
    call("utime"),
    call("futimesat"),
];

/// Every attribute call: the named ones and the descriptor ones.
const ATTR_CALLS: &[Call] = &[
    call("chmod"),
    call("fchmod"),
    call("fchmodat"),
    new_call("fchmodat2"),
    call("chown"),
    call("lchown"),
    call("fchown"),
    call("fchownat"),
    call("truncate"),
    call("ftruncate"),
    call("setxattr"),
    call("lsetxattr"),
    call("fsetxattr"),
    call("removexattr"),
    call("lremovexattr"),
    call("fremovexattr"),
    new_call("setxattrat"),
    new_call("removexattrat"),
    call("utimensat"),
    call("utimes"),
    call("utime"),
    call("futimesat"),
];

/// Mounts (`mounts.rs`). The umount2 syscall's tracepoints are named `umount`.
const MOUNT_CALLS: &[Call] = &[
    call("mount"),
    call("umount"),
    call("move_mount"),
    call("open_tree"),
    new_call("open_tree_attr"),
    call("fsopen"),
    call("fsmount"),
    call("fspick"),
    call("mount_setattr"),
    call("pivot_root"),
    call("chroot"),
];

const NAMESPACE_CALLS: &[Call] = &[call("unshare"), call("setns")];

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
        open_fallback: true,
        ..sys(tp, gap)
    }
}

/// An fentry program that gives the kernel's own paths of a path operation (only where the
/// open hook is fentry); without it the caller's names are used (checked at entry and exit).
const fn kpath(function: &'static str, gap: &'static str) -> Program {
    Program {
        name: function,
        hook: Hook::Fentry(function),
        gap: Some(gap),
        open_fallback: false,
    }
}

#[rustfmt::skip]
const PROGRAMS: &[Program] = &[
    raw("sched_process_fork"),
    raw("sched_process_exec"),
    raw("sched_process_exit"),
    open("sys_exit_openat", "openat"),
    open("sys_exit_open", "open"),
    open("sys_exit_creat", "creat"),
    open("sys_exit_openat2", "openat2"),
    sys("sys_exit_open_by_handle_at", "open_by_handle_at"),
    shared("sys_enter_path", PATH_CALLS), shared("sys_exit_path", PATH_CALLS),
    shared("sys_enter_attr", ATTR_NAMED_CALLS), shared("sys_exit_attr", ATTR_CALLS),
    shared("sys_exit_mounts", MOUNT_CALLS), shared("sys_exit_namespace", NAMESPACE_CALLS),
    sys("sys_enter_connect", "connect"), sys("sys_exit_connect", "connect"),
    sys("sys_enter_listen", "listen"), sys("sys_exit_listen", "listen"),
    sys("sys_enter_bind", "UDP server bind"), sys("sys_exit_bind", "UDP server bind"),
    sys("sys_enter_sendto", "DNS over sendto"),
    sys("sys_enter_sendmsg", "DNS over sendmsg"),
    sys("sys_enter_sendmmsg", "DNS over sendmmsg"),
    Program {
        gap: Some("the outcome of non-blocking TCP connects"),
        ..raw("inet_sock_set_state")
    },
    Program {
        gap: Some(DIRTY_GAP),
        ..raw("writeback_mark_inode_dirty")
    },
    Program {
        name: "io_uring_complete",
        hook: Hook::Event("io_uring", "io_uring_complete"),
        gap: Some(URING_GAP),
        open_fallback: false,
    },
    kpath("security_path_rename", "the kernel's own paths of renames"),
    kpath("security_path_unlink", "the kernel's own paths of unlinks"),
    kpath("security_path_rmdir", "the kernel's own paths of rmdirs"),
    kpath("security_path_mkdir", "the kernel's own paths of mkdirs"),
    kpath("security_path_link", "the kernel's own paths of hard links"),
    kpath("security_path_symlink", "the kernel's own paths of symbolic links"),
    kpath("security_path_chmod", "the kernel's own paths of chmods"),
    kpath("security_path_chown", "the kernel's own paths of chowns"),
    kpath("security_path_truncate", "the kernel's own paths of truncates"),
];

/// io_uring's file requests, worded for people.
pub const URING_GAP: &str = "file requests made through io_uring (opens, renames, unlinks, links, mkdirs, xattrs)";

/// Writes without an open in the capture, worded for people.
pub const DIRTY_GAP: &str = "writes through descriptors not opened in the capture (inherited, taken with pidfd_getfd, opened before an attach, or through a shared mapping)";

/// What the syscall hooks cannot give where fentry is refused, worded for people.
pub const CALLER_NAMES_GAP: &str = "the names given to rename, link, unlink, mkdir, chmod, chown, truncate, utimes and xattr calls are read from the caller's memory (fentry on security_path_* was refused by this kernel): read at the call's entry and again at its exit, a name rewritten between the two is flagged (tamper), one rewritten and restored in between is not seen";
pub const URING_DIRECT_GAP: &str = "io_uring opens into a direct descriptor (a fixed file slot): the path as given, not the kernel's file (fentry on security_file_open was refused by this kernel)";

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
    identity: HashMap<MapData, InodeKey, u32>,
    register: HashMap<MapData, u32, InodeKey>,
    drops: PerCpuArray<MapData, u64>,
}

/// A file or directory the kernel now knows by its inode.
#[derive(Clone, Debug)]
pub struct Registered {
    pub path: std::path::PathBuf,
    pub key: InodeKey,
    pub flags: u32,
}

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
    /// Detaching a tracepoint waits for an RCU grace period (about 70 ms here): one after the
    /// other, the 25 links took 1.7 s at every exit. Together, the waits overlap.
    fn drop(&mut self) {
        let links = std::mem::take(&mut self.links);
        std::thread::scope(|s| {
            for link in links {
                s.spawn(move || drop(link));
            }
        });
    }
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
        let monitor = std::process::id();
        let mut loader = EbpfLoader::new();
        loader
            .btf(Some(&btf))
            .map_max_entries("SCRATCH", cpus)
            .override_global(globals::CGROUP_ID, &cgroup_id, true)
            .override_global(globals::CGROUP_LEVEL, &cgroup_level, true)
            .override_global(globals::MONITOR_TGID, &monitor, true);
        if let Some(bytes) = options.ring_buffer_bytes {
            loader.map_max_entries("EVENTS", bytes);
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
            gaps.push(URING_DIRECT_GAP.to_string());
            gaps.push(CALLER_NAMES_GAP.to_string());
        } else {
            match attach_fexit(&mut ebpf, &btf, "do_sys_openat2_exit", "do_sys_openat2") {
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
        // io_uring submissions: 6.4+ name the tracepoint io_uring_submit_req, 6.1
        // io_uring_submit_sqe (the same record).
        let mut submit_errors = Vec::new();
        for tp in ["io_uring_submit_req", "io_uring_submit_sqe"] {
            let p = Program {
                name: tp,
                hook: Hook::Event("io_uring", tp),
                gap: Some(URING_GAP),
                open_fallback: false,
                    };
            match attach(&mut ebpf, &p, &btf) {
                Ok(link) => {
                    links.push(link);
                    submit_errors.clear();
                    break;
                }
                Err(e) => submit_errors.push(format!("{tp}: {e}")),
            }
        }
        if !submit_errors.is_empty() {
            log::warn!("io_uring submissions not hooked: {}", submit_errors.join("; "));
            gaps.push(format!(
                "{URING_GAP} (tracepoint/io_uring/io_uring_submit_req or _sqe could not be attached: {})",
                submit_errors.join("; ")
            ));
        }
        for p in PROGRAMS {
            if p.open_fallback && file_hook == FileHook::Fentry {
                continue;
            }
            if matches!(p.hook, Hook::Fentry(_)) && file_hook != FileHook::Fentry {
                continue;
            }
            if let Hook::Syscalls(calls) = p.hook {
                let started = std::time::Instant::now();
                attach_shared(&mut ebpf, p.name, calls, &mut links, &mut gaps);
                log::debug!("{}: loaded in {:?}", p.name, started.elapsed());
                continue;
            }
            let started = std::time::Instant::now();
            let attached = attach(&mut ebpf, p, &btf);
            log::debug!("{}: loaded in {:?}", p.name, started.elapsed());
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
                        let calls = if matches!(p.hook, Hook::Syscall(_)) {
                            " calls"
                        } else {
                            ""
                        };
                        gaps.push(format!(
                            "{what}{calls} ({} could not be attached: {error})",
                            hook_name(&p.hook)
                        ));
                    }
                },
            }
        }
        gaps.dedup();
        let mut open_hook: Array<MapData, u32> = take_map(&mut ebpf, "OPEN_HOOK")?;
        open_hook
            .set(0, u32::from(file_hook == FileHook::Fentry), 0)
            .map_err(|e| ProbeError::Load(format!("map OPEN_HOOK: {e}")))?;

        // Parsing the kernel's BTF took tens of MB that are free now: give them back.
        drop(btf);
        // SAFETY: malloc_trim only releases free heap memory.
        unsafe { libc::malloc_trim(0) };
        let traced = take_map(&mut ebpf, "TRACED")?;
        let reads = take_map(&mut ebpf, "READS")?;
        let identity = take_map(&mut ebpf, "IDENTITY")?;
        let register = take_map(&mut ebpf, "REGISTER")?;
        let drops = take_map(&mut ebpf, "DROPS")?;
        Ok(Probe {
            links,
            ebpf,
            file_hook,
            gaps,
            traced,
            reads,
            identity,
            register,
            drops,
        })
    }

    /// The ring buffer; call once.
    pub fn ring(&mut self) -> Result<RingBuf<MapData>, ProbeError> {
        take_map(&mut self.ebpf, "EVENTS")
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

    /// Makes the kernel know this inode (`ID_*` flags): every open of it by a traced process
    /// is sent whatever path it uses, and its other paths are flagged. For a file found to be
    /// a credential by its path after the start (one created during the capture).
    pub fn know_inode(&mut self, key: InodeKey, flags: u32) {
        let old = self.identity.get(&key, 0).unwrap_or(0);
        if old | flags != old {
            let _ = self.identity.insert(key, old | flags, 0);
        }
    }

    /// Puts each existing rule path in the kernel's `IDENTITY` map. The monitor opens each
    /// itself while its own tgid is traced: the open hook then stores the inode exactly as it
    /// reads it for the agent (`REGISTER`, by thread) instead of sending a record. Call before
    /// any target is traced and before any other thread exists.
    pub fn register(&mut self, rules: &[(std::path::PathBuf, u32)]) -> Vec<Registered> {
        use std::os::unix::fs::OpenOptionsExt as _;
        let me = std::process::id();
        let tid = nix::unistd::gettid().as_raw() as u32;
        let mut out = Vec::new();
        if self.traced.insert(me, 1, 0).is_err() {
            return out;
        }
        for (path, flags) in rules {
            // Only files and directories: opening a FIFO or a device would block or act.
            let Ok(meta) = std::fs::metadata(path) else {
                continue;
            };
            if !meta.is_file() && !meta.is_dir() {
                continue;
            }
            let _ = self.register.remove(&tid);
            let opened = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
                .open(path);
            let Ok(file) = opened else { continue };
            drop(file);
            let Ok(key) = self.register.get(&tid, 0) else {
                log::warn!("{}: the open hook did not register it", path.display());
                continue;
            };
            self.know_inode(key, *flags);
            out.push(Registered {
                path: path.clone(),
                key,
                flags: *flags,
            });
        }
        let _ = self.register.remove(&tid);
        let _ = self.traced.remove(&me);
        out
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
        Hook::Event(category, tp) => format!("tracepoint/{category}/{tp}"),
        Hook::Fentry(function) => format!("fentry/{function}"),
        Hook::Syscalls(_) => "tracepoint/syscalls/*".into(),
    }
}

fn load_tracepoint<'a>(ebpf: &'a mut Ebpf, program: &str) -> Result<&'a mut TracePoint, String> {
    let e = |e: ProgramError| causes(&e);
    let prog = ebpf
        .program_mut(program)
        .ok_or("program missing from the object")?;
    let prog: &mut TracePoint = prog.try_into().map_err(e)?;
    prog.load().map_err(e)?;
    Ok(prog)
}

/// Loads a shared program once and attaches it to each call's tracepoint (`sys_enter_NAME` or
/// `sys_exit_NAME` as the program's name says); each one that fails is a gap.
fn attach_shared(
    ebpf: &mut Ebpf,
    program: &'static str,
    calls: &[Call],
    links: &mut Vec<Link>,
    gaps: &mut Vec<String>,
) {
    let side = if program.starts_with("sys_enter_") {
        "sys_enter_"
    } else {
        "sys_exit_"
    };
    let e = |e: ProgramError| causes(&e);
    let loaded = load_tracepoint(ebpf, program);
    let prog = match loaded {
        Ok(prog) => prog,
        Err(error) => {
            log::warn!("{program} not loaded: {error}");
            let names: Vec<&str> = calls.iter().map(|c| c.name).collect();
            gaps.push(format!(
                "{} calls ({program} could not be loaded: {error})",
                names.join(", ")
            ));
            return;
        }
    };
    for c in calls {
        let tp = format!("{side}{}", c.name);
        if c.recent && !Path::new("/sys/kernel/tracing/events/syscalls").join(&tp).exists() {
            log::info!("{tp}: this kernel has no such syscall");
            continue;
        }
        let attached = prog
            .attach("syscalls", &tp)
            .map_err(e)
            .and_then(|id| prog.take_link(id).map_err(e));
        match attached {
            Ok(link) => links.push(Box::new(link)),
            Err(error) => {
                log::warn!("{tp} not attached: {error}");
                gaps.push(format!(
                    "{} calls (tracepoint/syscalls/{tp} could not be attached: {error})",
                    c.name
                ));
            }
        }
    }
}

fn attach(ebpf: &mut Ebpf, p: &Program, btf: &Btf) -> Result<Link, String> {
    let prog = ebpf
        .program_mut(p.name)
        .ok_or("program missing from the object")?;
    let e = |e: ProgramError| causes(&e);
    Ok(match p.hook {
        Hook::Raw(tp) => {
            let prog: &mut RawTracePoint = prog.try_into().map_err(e)?;
            prog.load().map_err(e)?;
            let id = prog.attach(tp).map_err(e)?;
            Box::new(prog.take_link(id).map_err(e)?)
        }
        Hook::Syscall(tp) => {
            let prog: &mut TracePoint = prog.try_into().map_err(e)?;
            prog.load().map_err(e)?;
            let id = prog.attach("syscalls", tp).map_err(e)?;
            Box::new(prog.take_link(id).map_err(e)?)
        }
        Hook::Event(category, tp) => {
            let prog: &mut TracePoint = prog.try_into().map_err(e)?;
            prog.load().map_err(e)?;
            let id = prog.attach(category, tp).map_err(e)?;
            Box::new(prog.take_link(id).map_err(e)?)
        }
        Hook::Fentry(function) => {
            let prog: &mut FEntry = prog.try_into().map_err(e)?;
            prog.load(function, btf).map_err(e)?;
            let id = prog.attach().map_err(e)?;
            Box::new(prog.take_link(id).map_err(e)?)
        }
        Hook::Syscalls(_) => return Err("a shared program: see attach_shared".into()),
    })
}

fn attach_fentry(ebpf: &mut Ebpf, btf: &Btf) -> Result<Link, String> {
    let prog = ebpf
        .program_mut("security_file_open")
        .ok_or("program missing")?;
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
