//! What to watch: a command started under the probe (`run`), or a running process tree
//! (`attach`), read from /proc.
use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::unistd::{ForkResult, Gid, Pid, Uid};

use crate::error::Usage;
use crate::state::processes::Existing;

/// Finds the program a command names, as execvp would, so a command that cannot be started
/// is refused before anything runs.
pub fn resolve_program(name: &OsStr) -> Result<PathBuf, Usage> {
    let shown = Path::new(name).display();
    let name_bytes = name.as_bytes();
    let check = |p: &Path| -> Result<PathBuf, Usage> {
        let meta = std::fs::metadata(p)
            .map_err(|e| Usage(format!("cannot start `{shown}`: {}: {e}", p.display())))?;
        if meta.is_dir() {
            return Err(Usage(format!(
                "cannot start `{shown}`: {} is a directory",
                p.display()
            )));
        }
        nix::unistd::access(p, nix::unistd::AccessFlags::X_OK).map_err(|_| {
            Usage(format!(
                "cannot start `{shown}`: {} is not executable",
                p.display()
            ))
        })?;
        Ok(p.to_path_buf())
    };
    if name_bytes.is_empty() {
        return Err(Usage("the command to run is empty".into()));
    }
    if name_bytes.contains(&b'/') {
        return check(Path::new(name));
    }
    // As execvp: the first executable file of that name in PATH (the default path when unset).
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    match which::which_in(name, Some(path), cwd) {
        Ok(found) => check(&found),
        Err(_) => Err(Usage(format!(
            "cannot start `{shown}`: no such command in PATH; give a path or install it"
        ))),
    }
}

/// Who the agent runs as, when not as ourselves.
pub struct AgentUser {
    pub uid: Uid,
    pub gid: Gid,
    /// Its name and home, for the agent's USER, LOGNAME and HOME.
    pub name: String,
    pub home: PathBuf,
}

/// The user the agent runs as: `--user`, else the user who called sudo, else ourselves.
pub fn agent_user(user: Option<&str>) -> Result<Option<AgentUser>, Usage> {
    let of = |u: nix::unistd::User| AgentUser {
        uid: u.uid,
        gid: u.gid,
        name: u.name,
        home: u.dir,
    };
    if let Some(u) = user {
        let found = match u.parse::<u32>() {
            Ok(uid) => nix::unistd::User::from_uid(Uid::from_raw(uid)),
            Err(_) => nix::unistd::User::from_name(u),
        };
        return match found {
            Ok(Some(user)) => Ok(Some(of(user))),
            _ => Err(Usage(format!("--user {u}: no such user"))),
        };
    }
    if !nix::unistd::geteuid().is_root() {
        return Ok(None);
    }
    let id = |var: &str| std::env::var(var).ok().and_then(|v| v.parse::<u32>().ok());
    match (id("SUDO_UID"), id("SUDO_GID")) {
        (Some(uid), Some(gid)) if uid != 0 => {
            let uid = Uid::from_raw(uid);
            // The caller's name and home when the system knows the uid.
            let known = nix::unistd::User::from_uid(uid).ok().flatten();
            Ok(Some(AgentUser {
                uid,
                gid: Gid::from_raw(gid),
                name: known
                    .as_ref()
                    .map_or_else(|| uid.to_string(), |u| u.name.clone()),
                home: known.map_or_else(|| PathBuf::from("/"), |u| u.dir),
            }))
        }
        _ => Ok(None),
    }
}

/// The agent's environment, or None for ours unchanged: ours without the variables named in
/// `withhold` (the collector's credentials of `--otlp`: the agent must not be able to send as
/// the monitor), and for an agent run as another user, with that user's HOME, USER and
/// LOGNAME (root's HOME would send its tools to files they cannot read).
fn environment_for(user: Option<&AgentUser>, withhold: &[&str]) -> Option<Vec<CString>> {
    use std::os::unix::ffi::OsStrExt as _;
    let withheld = |k: &[u8]| withhold.iter().any(|w| w.as_bytes() == k);
    if user.is_none() && !std::env::vars_os().any(|(k, _)| withheld(k.as_bytes())) {
        return None;
    }
    let mut env: Vec<CString> = std::env::vars_os()
        .filter(|(k, _)| !withheld(k.as_bytes()))
        .filter(|(k, _)| user.is_none() || !matches!(k.as_bytes(), b"HOME" | b"USER" | b"LOGNAME"))
        .filter_map(|(k, v)| {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            CString::new(kv).ok()
        })
        .collect();
    for (k, v) in user.iter().flat_map(|user| {
        [
            ("HOME", user.home.as_os_str().as_bytes()),
            ("USER", user.name.as_bytes()),
            ("LOGNAME", user.name.as_bytes()),
        ]
    }) {
        let mut kv = format!("{k}=").into_bytes();
        kv.extend_from_slice(v);
        if let Ok(c) = CString::new(kv) {
            env.push(c);
        }
    }
    Some(env)
}

/// A pseudo-terminal for the agent: (the monitor's side, the agent's side).
pub fn pseudo_terminal() -> Result<(OwnedFd, OwnedFd), Usage> {
    let pty = nix::pty::openpty(None, None)
        .map_err(|e| Usage(format!("cannot open a pseudo-terminal: {e}")))?;
    // The agent must not inherit the monitor's side.
    nix::fcntl::fcntl(
        &pty.master,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    )
    .map_err(|e| Usage(format!("pseudo-terminal: {e}")))?;
    Ok((pty.master, pty.slave))
}

/// The child's status word for a failed `--protect` is -(this + errno); for a failed seccomp
/// guard, -errno; for a failed exec, errno.
const PROTECT_FAILED: i32 = 0x1000;

/// A forked child that waits at a gate until its pid is in the traced set, then execs.
pub struct GatedChild {
    pub pid: Pid,
    gate: OwnedFd,
    status: OwnedFd,
}

/// Forks the agent, its environment without the variables named in `withhold`. The child only
/// makes async-signal-safe system calls between fork and exec (so another thread, such as the
/// OTLP exporter's, may exist): all memory it needs is prepared here.
pub fn fork_gated(
    program: &Path,
    argv: &[OsString],
    user: Option<AgentUser>,
    withhold: &[&str],
    terminal: Option<OwnedFd>,
    protect: bool,
) -> Result<GatedChild, Usage> {
    // The bytes as given, UTF-8 or not.
    let to_c = |s: &OsStr| {
        CString::new(s.as_bytes()).map_err(|_| Usage(format!("argument {s:?} contains a NUL byte")))
    };
    let c_program = to_c(program.as_os_str())?;
    let c_argv: Vec<CString> = argv.iter().map(|a| to_c(a)).collect::<Result<_, _>>()?;
    let mut c_ptrs: Vec<*const libc::c_char> = c_argv.iter().map(|a| a.as_ptr()).collect();
    c_ptrs.push(std::ptr::null());
    let c_env = environment_for(user.as_ref(), withhold);
    let env_ptrs: Option<Vec<*const libc::c_char>> = c_env.as_ref().map(|env| {
        env.iter()
            .map(|e| e.as_ptr())
            .chain([std::ptr::null()])
            .collect()
    });
    let ids = user.as_ref().map(|u| (u.uid, u.gid));
    let filter = super::guard::FILTER;
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr().cast_mut(),
    };
    let (gate_r, gate_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|e| Usage(format!("pipe: {e}")))?;
    let (status_r, status_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|e| Usage(format!("pipe: {e}")))?;
    // SAFETY: the child calls only async-signal-safe functions (read, write, signal, setuid
    // family, execv, _exit) on memory prepared above.
    match unsafe { nix::unistd::fork() } {
        Err(e) => Err(Usage(format!("fork: {e}"))),
        Ok(ForkResult::Child) => unsafe {
            let mut byte = 0u8;
            loop {
                let n = libc::read(gate_r.as_raw_fd(), (&raw mut byte).cast(), 1);
                if n == 1 {
                    break;
                }
                if n == 0 || *libc::__errno_location() != libc::EINTR {
                    libc::_exit(126);
                }
            }
            // With a pseudo-terminal (the TUI's agent pane): a session of its own, the
            // terminal as controlling terminal and as stdin, stdout and stderr.
            if let Some(tty) = &terminal {
                let fd = tty.as_raw_fd();
                if libc::setsid() < 0
                    || libc::ioctl(fd, libc::TIOCSCTTY, 0) < 0
                    || libc::dup2(fd, 0) < 0
                    || libc::dup2(fd, 1) < 0
                    || libc::dup2(fd, 2) < 0
                {
                    let err = *libc::__errno_location();
                    libc::write(status_w.as_raw_fd(), (&raw const err).cast(), 4);
                    libc::_exit(126);
                }
            }
            // Rust ignores SIGPIPE; the agent gets the default back.
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            // The 32-bit door shut, with the monitor's privileges still (no no_new_privs).
            // A failure is sent as a negative errno.
            if let Err(err) = super::guard::install(&prog) {
                let err = -err;
                libc::write(status_w.as_raw_fd(), (&raw const err).cast(), 4);
                libc::_exit(126);
            }
            if protect && let Err(err) = super::guard::protect() {
                let err = -(PROTECT_FAILED + err);
                libc::write(status_w.as_raw_fd(), (&raw const err).cast(), 4);
                libc::_exit(126);
            }
            if let Some((uid, gid)) = ids
                && (libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(gid.as_raw()) != 0
                    || libc::setuid(uid.as_raw()) != 0)
            {
                let err = *libc::__errno_location();
                libc::write(status_w.as_raw_fd(), (&raw const err).cast(), 4);
                libc::_exit(126);
            }
            match &env_ptrs {
                Some(env) => libc::execve(c_program.as_ptr(), c_ptrs.as_ptr(), env.as_ptr()),
                None => libc::execv(c_program.as_ptr(), c_ptrs.as_ptr()),
            };
            let err = *libc::__errno_location();
            libc::write(status_w.as_raw_fd(), (&raw const err).cast(), 4);
            libc::_exit(127);
        },
        Ok(ForkResult::Parent { child }) => {
            drop(gate_r);
            drop(status_w);
            drop(terminal);
            Ok(GatedChild {
                pid: child,
                gate: gate_w,
                status: status_r,
            })
        }
    }
}

impl GatedChild {
    /// Lets the child exec; returns once it has (or with the reason it could not).
    pub fn release(self) -> Result<Pid, Usage> {
        let one = [1u8];
        nix::unistd::write(&self.gate, &one)
            .map_err(|e| Usage(format!("starting the agent: {e}")))?;
        let mut buf = [0u8; 4];
        let n = nix::unistd::read(&self.status, &mut buf).unwrap_or(0);
        if n == 4 {
            let raw = i32::from_ne_bytes(buf);
            if raw <= -PROTECT_FAILED {
                let err = nix::errno::Errno::from_raw(-raw - PROTECT_FAILED);
                return Err(Usage(format!(
                    "--protect: cannot take the capabilities out of the agent's bounding set: \
                     {}; run sandbox-watch as root",
                    err.desc()
                )));
            }
            let err = nix::errno::Errno::from_raw(raw.abs());
            if raw < 0 {
                return Err(Usage(format!(
                    "cannot install the seccomp guard that refuses the agent's 32-bit \
                     system calls: {}; run sandbox-watch as root",
                    err.desc()
                )));
            }
            return Err(Usage(format!("cannot start the command: {}", err.desc())));
        }
        Ok(self.pid)
    }
}

/// Leaves the agent running after the monitor quits: its pseudo-terminal would hang up (and
/// the kernel send it SIGHUP) when the monitor's side closes, so a small process of its own
/// keeps that side open, reading and dropping the agent's output, until the agent's side is
/// closed by all. It holds nothing else of the monitor's (no probe, no log).
pub fn keep_terminal_open(master: OwnedFd) -> std::io::Result<()> {
    // SAFETY: the child only makes system calls (the process may have threads).
    match unsafe { nix::unistd::fork() }.map_err(std::io::Error::from)? {
        ForkResult::Parent { .. } => Ok(()),
        ForkResult::Child => unsafe {
            libc::setsid();
            libc::prctl(libc::PR_SET_NAME, c"sw-agent-pty".as_ptr());
            // Not at the capture thread's raised priority.
            libc::setpriority(libc::PRIO_PROCESS, 0, 0);
            if libc::dup2(master.as_raw_fd(), 0) < 0 {
                libc::_exit(1);
            }
            // Every other descriptor: the probe's links and maps, the log, the terminal.
            if libc::syscall(libc::SYS_close_range, 1u32, u32::MAX, 0u32) != 0 {
                for fd in 1..65536 {
                    libc::close(fd);
                }
            }
            let mut buf = [0u8; 4096];
            loop {
                let n = libc::read(0, buf.as_mut_ptr().cast(), buf.len());
                if n > 0 || (n < 0 && *libc::__errno_location() == libc::EINTR) {
                    continue;
                }
                // EIO: no process has the agent's side open any more.
                libc::_exit(0);
            }
        },
    }
}

fn read_stat(pid: u32) -> Option<procfs::process::Stat> {
    procfs::process::Process::new(pid as i32).ok()?.stat().ok()
}

/// Checks an `attach` target: it exists and is not a kernel thread.
pub fn check_attachable(pid: u32) -> Result<(), Usage> {
    let stat = read_stat(pid).ok_or_else(|| Usage(format!("no process with pid {pid}")))?;
    const PF_KTHREAD: u32 = 0x0020_0000;
    if stat.flags & PF_KTHREAD != 0 || pid == 2 || stat.ppid == 2 {
        return Err(Usage(format!(
            "pid {pid} ({}) is a kernel thread; attach to a user process",
            stat.comm
        )));
    }
    Ok(())
}

/// The net namespace inode of a process.
pub fn netns_of(pid: u32) -> Option<u64> {
    let link = std::fs::read_link(format!("/proc/{pid}/ns/net")).ok()?;
    parse_ns_link(&link.to_string_lossy())
}

/// `net:[4026531840]` → 4026531840
pub fn parse_ns_link(link: &str) -> Option<u64> {
    link.split_once('[')?.1.strip_suffix(']')?.parse().ok()
}

/// The process and its descendants as they are now, parents first.
pub fn tree(root: u32) -> Vec<Existing> {
    let Ok(all) = procfs::process::all_processes() else {
        return Vec::new();
    };
    let stats: Vec<procfs::process::Stat> = all.filter_map(|p| p.ok()?.stat().ok()).collect();
    let mut members = vec![root];
    let mut i = 0;
    while i < members.len() {
        let parent = members[i] as i32;
        for s in &stats {
            if s.ppid == parent && !members.contains(&(s.pid as u32)) {
                members.push(s.pid as u32);
            }
        }
        i += 1;
    }
    members.into_iter().filter_map(existing).collect()
}

/// What /proc says of one process.
pub fn existing(pid: u32) -> Option<Existing> {
    let p = procfs::process::Process::new(pid as i32).ok()?;
    let stat = p.stat().ok()?;
    let ns_per_tick = 1_000_000_000 / procfs::ticks_per_second();
    Some(Existing {
        pid,
        ppid: stat.ppid as u32,
        start_ns: stat.starttime * ns_per_tick,
        exe: p.exe().ok().map(|e| e.to_string_lossy().into_owned()),
        argv: p.cmdline().unwrap_or_default(),
        cwd: p.cwd().ok().map(|c| c.to_string_lossy().into_owned()),
        uid: p.uid().ok(),
        netns: netns_of(pid),
    })
}
