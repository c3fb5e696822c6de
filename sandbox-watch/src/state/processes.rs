//! The process model: one entry per program run, made from the session's records, and the
//! inside/outside verdicts. While alive a process is found by its pid: records come in the
//! kernel's order, so a pid is reused only after the exit of the process that had it.
use std::collections::HashMap;
use std::time::SystemTime;

use crate::output::report::{ProcessEntry, Tried};
use crate::record::{Exec, ExecFailed, Exit, Fork, Verdict};

/// Programs that only set up the sandbox and start the agent: in `run` mode the agent's
/// namespace is that of the first process in the tree that is none of these.
pub const LAUNCHERS: &[&str] = &[
    "unshare",
    "bwrap",
    "firejail",
    "nsenter",
    "sudo",
    "su",
    "runuser",
    "setpriv",
    "env",
    "chroot",
    "timeout",
    "nice",
    "setsid",
    "ionice",
    "taskset",
    "stdbuf",
    "nohup",
    "doas",
    "chrt",
    "prlimit",
    "systemd-run",
    "flatpak-spawn",
    "capsh",
    "sandbox-watch",
];

pub fn is_launcher(exe: &str, argv: &[String]) -> bool {
    let base = exe.rsplit('/').next().unwrap_or(exe);
    if base == "ip" {
        // `ip netns exec NAME cmd`
        return argv.get(1).is_some_and(|a| a == "netns")
            && argv.get(2).is_some_and(|a| a == "exec");
    }
    LAUNCHERS.contains(&base)
}

/// How the agent's namespace is found.
#[derive(Clone, Copy, Debug)]
pub enum AgentRule {
    /// Given (attach, container, --agent-netns).
    Fixed(u64),
    /// `run`: the first exec in the tree that is not a launcher.
    FirstNonLauncher,
}

#[derive(Clone, Debug)]
pub struct Process {
    pub pid: u32,
    pub ppid: u32,
    pub exe: Option<String>,
    pub argv: Vec<String>,
    pub argv_truncated: bool,
    pub cwd: Option<String>,
    pub uid: Option<u32>,
    pub euid: Option<u32>,
    pub gid: Option<u32>,
    pub netns: Option<u64>,
    pub mntns: Option<u64>,
    pub pidns: Option<u64>,
    pub userns: Option<u64>,
    pub cgroup_id: Option<u64>,
    pub comm: Option<String>,
    /// When this entry began (fork or exec) and ended (exit or the next exec).
    pub began: SystemTime,
    pub ended: Option<SystemTime>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub fork_only: bool,
    /// Existed before the capture started (attach, container).
    pub preexisting: bool,
    /// Part of the launch chain before the agent (run mode); never counted as outside.
    pub launcher: bool,
    /// The process this entry is a program of: the same number across its execs, another for
    /// a reused pid.
    pub process: u64,
    /// The entry this one follows: the same process ran another program.
    pub replaces: Option<usize>,
    /// The tool call it is under (the session's index; None: the agent itself, or no step).
    pub step: Option<usize>,
    /// It ran this program after its step's own process ended.
    pub after_step: bool,
    /// Programs it tried to run and could not.
    pub tried: Vec<Tried>,
}

impl Process {
    pub fn running(&self) -> bool {
        self.ended.is_none()
    }

    fn new(pid: u32, began: SystemTime, process: u64) -> Process {
        Process {
            pid,
            ppid: 0,
            exe: None,
            argv: Vec::new(),
            argv_truncated: false,
            cwd: None,
            uid: None,
            euid: None,
            gid: None,
            netns: None,
            mntns: None,
            pidns: None,
            userns: None,
            cgroup_id: None,
            comm: None,
            began,
            ended: None,
            exit_code: None,
            signal: None,
            fork_only: false,
            preexisting: false,
            launcher: false,
            process,
            replaces: None,
            step: None,
            after_step: false,
            tried: Vec::new(),
        }
    }

    /// The program's fields from an exec. The parent is the fork's when the fork was seen: at
    /// exec the kernel's parent may already be init (or a subreaper), the shell of
    /// `nohup server &` having exited between the fork and the exec.
    fn fill(&mut self, e: &Exec, launcher: bool) {
        self.pid = e.pid;
        if self.ppid == 0 {
            self.ppid = e.ppid;
        }
        self.exe.clone_from(&e.exe);
        self.argv.clone_from(&e.argv);
        self.argv_truncated = e.argv_truncated;
        self.cwd.clone_from(&e.cwd);
        self.uid = e.uid;
        self.euid = e.euid;
        self.gid = e.gid;
        self.netns = e.netns;
        self.mntns = e.mntns;
        self.pidns = e.pidns;
        self.userns = e.userns;
        self.cgroup_id = e.cgroup_id;
        self.comm.clone_from(&e.comm);
        self.fork_only = false;
        self.launcher = launcher;
    }
}

/// A process that was already running, read from /proc.
#[derive(Clone, Debug, Default)]
pub struct Existing {
    pub pid: u32,
    pub ppid: u32,
    pub start_ns: u64,
    pub exe: Option<String>,
    pub argv: Vec<String>,
    pub cwd: Option<String>,
    pub uid: Option<u32>,
    pub netns: Option<u64>,
}

pub struct Processes {
    pub list: Vec<Process>,
    live: HashMap<u32, usize>,
    rule: AgentRule,
    pub agent_netns: Option<u64>,
    pub agent_pid: Option<u32>,
    next_process: u64,
}

impl Default for Processes {
    fn default() -> Self {
        Processes::new(AgentRule::FirstNonLauncher, None)
    }
}

impl Processes {
    pub fn new(rule: AgentRule, agent_pid: Option<u32>) -> Processes {
        let agent_netns = match rule {
            AgentRule::Fixed(ns) => Some(ns),
            AgentRule::FirstNonLauncher => None,
        };
        Processes {
            list: Vec::new(),
            live: HashMap::new(),
            rule,
            agent_netns,
            agent_pid,
            next_process: 0,
        }
    }

    /// How many processes are alive.
    pub fn live_count(&self) -> usize {
        self.live.len()
    }

    /// The pids of the processes still alive as far as the records tell.
    pub fn live_pids(&self) -> impl Iterator<Item = u32> + '_ {
        self.live.keys().copied()
    }

    /// The entry of the live process with this pid.
    pub fn live_index(&self, pid: u32) -> Option<usize> {
        self.live.get(&pid).copied()
    }

    /// The entry of `pid`: the live one, else its newest (a record that came after its exit).
    pub fn index_of(&self, pid: u32) -> Option<usize> {
        self.live_index(pid)
            .or_else(|| self.list.iter().rposition(|p| p.pid == pid))
    }

    /// Whether any entry of `pid` still runs.
    pub fn running(&self, pid: u32) -> bool {
        self.live.contains_key(&pid)
    }

    pub fn verdict(&self, p: &Process) -> Verdict {
        if p.launcher {
            return Verdict::Inside;
        }
        Verdict::of(p.netns, self.agent_netns)
    }

    fn new_process(&mut self) -> u64 {
        self.next_process += 1;
        self.next_process
    }

    fn push(&mut self, p: Process) -> usize {
        let pid = p.pid;
        self.list.push(p);
        let i = self.list.len() - 1;
        self.live.insert(pid, i);
        i
    }

    /// A `process` record: one there before the capture.
    pub fn seed(&mut self, at: SystemTime, e: &ProcessEntry) -> usize {
        let began = crate::record::parse_at(&e.started_at).unwrap_or(at);
        let process = self.new_process();
        self.push(Process {
            ppid: e.ppid,
            exe: e.exe.clone(),
            argv: e.argv.clone(),
            argv_truncated: e.argv_truncated,
            cwd: e.cwd.clone(),
            uid: e.uid,
            euid: e.euid,
            gid: e.gid,
            netns: e.netns,
            mntns: e.mntns,
            pidns: e.pidns,
            userns: e.userns,
            cgroup_id: e.cgroup_id,
            comm: e.comm.clone(),
            preexisting: true,
            ..Process::new(e.pid, began, process)
        })
    }

    /// A `fork`: the child is its parent's program until it execs one of its own.
    pub fn fork(&mut self, at: SystemTime, f: &Fork) -> usize {
        let process = self.new_process();
        let mut child = match self.live.get(&f.ppid).map(|&i| &self.list[i]) {
            Some(parent) => Process {
                launcher: parent.launcher && self.agent_netns.is_none(),
                ..parent.clone()
            },
            None => Process::new(f.pid, at, process),
        };
        child.pid = f.pid;
        child.ppid = f.ppid;
        child.began = at;
        child.ended = None;
        (child.exit_code, child.signal) = (None, None);
        child.fork_only = true;
        child.preexisting = false;
        child.process = process;
        child.replaces = None;
        child.after_step = false;
        child.tried = Vec::new();
        self.push(child)
    }

    /// An `exec`: fills the entry of a process that only forked, or opens a new one (the
    /// previous program of the same process ends here).
    pub fn exec(&mut self, at: SystemTime, e: &Exec) -> usize {
        let exe = e.exe.as_deref().unwrap_or_default();
        let launcher = matches!(self.rule, AgentRule::FirstNonLauncher)
            && self.agent_netns.is_none()
            && is_launcher(exe, &e.argv);
        if !launcher && self.agent_netns.is_none() {
            self.agent_netns = e.netns;
            self.agent_pid = Some(e.pid);
        }
        let mut replaces = None;
        let mut process = None;
        let mut step = None;
        if let Some(&i) = self.live.get(&e.pid) {
            let p = &mut self.list[i];
            // A PATH search (execvp) that found the program: its misses said nothing.
            p.tried
                .retain(|t| !(is_miss(&t.result) && file_name(&t.path) == file_name(exe)));
            if p.fork_only && !p.preexisting {
                p.fill(e, launcher);
                return i;
            }
            // The same process runs a second program: close this entry, open another.
            p.ended = Some(at);
            replaces = Some(i);
            process = Some(p.process);
            step = p.step;
        }
        let process = process.unwrap_or_else(|| self.new_process());
        let mut p = Process::new(e.pid, at, process);
        // Another program of the same process: the same parent (its fork's, if seen).
        p.ppid = replaces.map_or(0, |i| self.list[i].ppid);
        p.fill(e, launcher);
        p.replaces = replaces;
        p.step = step;
        self.push(p)
    }

    /// An `exec_failed`: the live process's entry that tried; None when it is not known.
    pub fn tried(&mut self, at: SystemTime, e: &ExecFailed) -> Option<usize> {
        let i = *self.live.get(&e.pid)?;
        self.list[i].tried.push(Tried {
            at: crate::time::rfc3339_nanos(at),
            path: e.path.clone(),
            path_truncated: e.path_truncated,
            argv: e.argv.clone(),
            argv_truncated: e.argv_truncated,
            result: e.result.clone(),
            syscall: e.syscall.clone(),
            from_caller_memory: e.from_caller_memory,
        });
        Some(i)
    }

    /// An `exit`; None when the process is not known (nothing to record).
    pub fn exit(&mut self, at: SystemTime, x: &Exit) -> Option<usize> {
        let i = self.live.remove(&x.pid)?;
        let p = &mut self.list[i];
        p.ended = Some(at);
        p.exit_code = x.exit_code;
        p.signal = x.signal;
        Some(i)
    }

    /// The report's entry of a process; one still running is measured up to `end`.
    pub fn entry(&self, p: &Process, end: SystemTime) -> ProcessEntry {
        let ended = p.ended.unwrap_or(end);
        ProcessEntry {
            pid: p.pid,
            ppid: p.ppid,
            exe: p.exe.clone(),
            argv: p.argv.clone(),
            argv_truncated: p.argv_truncated,
            cwd: p.cwd.clone(),
            uid: p.uid,
            netns: p.netns,
            verdict: self.verdict(p),
            started_at: crate::time::rfc3339_nanos(p.began),
            ended_at: p.ended.map(crate::time::rfc3339_nanos),
            exit_code: p.exit_code,
            signal: p.signal,
            running_at_end: p.running(),
            fork_only: p.fork_only,
            preexisting: p.preexisting,
            launcher: p.launcher,
            comm: p.comm.clone(),
            euid: p.euid,
            gid: p.gid,
            mntns: p.mntns,
            pidns: p.pidns,
            userns: p.userns,
            cgroup_id: p.cgroup_id,
            duration_ms: ended
                .duration_since(p.began)
                .map_or(0, |d| (d.as_nanos() / 1_000_000) as u64),
            tool_call: crate::state::tool_calls::ToolCallRef::of(p.step),
            after_step: p.after_step,
            output: None,
            tried: p.tried.clone(),
        }
    }
}

/// An exec that failed because nothing of that name was there: what a PATH search meets in
/// every directory before the one that has the program.
fn is_miss(result: &str) -> bool {
    matches!(result, "ENOENT" | "ENOTDIR")
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(ms: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_millis(1_000_000 + ms)
    }

    fn exec(pid: u32, netns: u64, argv: &[&str]) -> Exec {
        Exec {
            pid,
            ppid: 1,
            exe: Some(format!("/usr/bin/{}", argv[0])),
            argv: argv.iter().map(|s| s.to_string()).collect(),
            netns: Some(netns),
            ..Default::default()
        }
    }

    fn exit(pid: u32, exit_code: Option<i32>, signal: Option<i32>) -> Exit {
        Exit {
            pid,
            exit_code,
            signal,
        }
    }

    fn failed(pid: u32, path: &str, result: &str) -> ExecFailed {
        ExecFailed {
            pid,
            path: path.into(),
            path_truncated: false,
            argv: vec!["git".into(), "status".into()],
            argv_truncated: false,
            result: result.into(),
            syscall: "execve".into(),
            from_caller_memory: true,
        }
    }

    #[test]
    fn failed_execs_are_kept_but_a_path_search_that_found_its_program() {
        let mut m = Processes::new(AgentRule::Fixed(10), None);
        m.exec(at(1), &exec(100, 10, &["node"]));
        m.fork(
            at(2),
            &Fork {
                pid: 101,
                ppid: 100,
            },
        );
        // execvp("git"): missing in two directories, refused in a third, found in /usr/bin.
        assert_eq!(
            m.tried(at(3), &failed(101, "/usr/local/sbin/git", "ENOENT")),
            Some(1)
        );
        m.tried(at(3), &failed(101, "/usr/local/bin/git", "ENOTDIR"));
        m.tried(at(3), &failed(101, "/opt/bin/git", "EACCES"));
        m.tried(at(3), &failed(101, "/usr/local/bin/zsh", "ENOENT"));
        let i = m.exec(at(4), &exec(101, 10, &["git"]));
        assert_eq!(i, 1, "the forked entry became git's");
        let e = m.entry(&m.list[i], at(5));
        let paths: Vec<&str> = e.tried.iter().map(|t| t.path.as_str()).collect();
        assert_eq!(paths, ["/opt/bin/git", "/usr/local/bin/zsh"]);
        assert_eq!(e.tried[0].result, "EACCES");
        // A fork does not inherit its parent's tries; a process not seen has none to add.
        m.tried(at(6), &failed(100, "/usr/bin/zsh", "ENOENT"));
        let j = m.fork(
            at(7),
            &Fork {
                pid: 102,
                ppid: 100,
            },
        );
        assert!(m.list[j].tried.is_empty());
        assert_eq!(m.list[0].tried.len(), 1);
        assert_eq!(m.tried(at(8), &failed(999, "/x", "ENOENT")), None);
    }

    #[test]
    fn a_reused_pid_is_a_new_process() {
        let mut m = Processes::new(AgentRule::Fixed(10), None);
        m.exec(at(1), &exec(100, 10, &["first"]));
        m.exit(at(2), &exit(100, Some(7), None));
        // Same pid, after the first one's exit: must not touch the first entry.
        m.exec(at(9), &exec(100, 10, &["second"]));
        m.exit(at(10), &exit(100, None, Some(9)));
        assert_eq!(m.list.len(), 2);
        assert_eq!(m.list[0].argv, ["first"]);
        assert_eq!(m.list[0].exit_code, Some(7));
        assert_eq!(m.list[1].argv, ["second"]);
        assert_eq!(m.list[1].signal, Some(9));
        assert_ne!(m.list[0].process, m.list[1].process);
        // An exit for a process that is not live changes nothing.
        assert_eq!(m.exit(at(11), &exit(100, Some(0), None)), None);
    }

    #[test]
    fn fork_then_exec_is_one_entry_and_fork_only_stays() {
        let mut m = Processes::new(AgentRule::Fixed(10), None);
        m.exec(at(1), &exec(1, 10, &["sh"]));
        m.fork(at(2), &Fork { pid: 2, ppid: 1 });
        m.fork(at(3), &Fork { pid: 3, ppid: 1 });
        m.exec(at(4), &exec(2, 10, &["ls"]));
        assert_eq!(m.list.len(), 3);
        assert!(!m.list[1].fork_only);
        assert_eq!(m.list[1].argv, ["ls"]);
        assert_eq!(m.list[1].began, at(2), "the entry began at the fork");
        assert!(m.list[2].fork_only);
        assert_eq!(m.list[2].argv, ["sh"]);
        // Exec twice: two entries, same pid, the same process.
        m.exec(at(5), &exec(2, 10, &["cat"]));
        assert_eq!(m.list.len(), 4);
        assert_eq!(m.list[1].ended, Some(at(5)));
        assert_eq!(m.list[3].replaces, Some(1));
        assert_eq!(m.list[3].process, m.list[1].process);
    }

    #[test]
    fn the_parent_is_the_forks_not_the_reaper_at_exec() {
        // `nohup server &` in a shell that exits at once: the child is reparented to init
        // before it execs, so the exec record's ppid is 1; the fork record said 2.
        let mut m = Processes::new(AgentRule::Fixed(10), None);
        m.exec(at(1), &exec(2, 10, &["sh"]));
        m.fork(at(2), &Fork { pid: 3, ppid: 2 });
        m.exit(at(3), &exit(2, Some(0), None));
        let i = m.exec(at(4), &exec(3, 10, &["nohup", "server"]));
        assert_eq!(m.list[i].ppid, 2, "the fork's parent");
        // nohup execs the server: another program of the same process, the same parent.
        let j = m.exec(at(5), &exec(3, 10, &["server"]));
        assert_ne!(i, j);
        assert_eq!(m.list[j].ppid, 2);
        // A process whose fork was not seen: the exec's parent is all there is.
        let k = m.exec(at(6), &exec(9, 10, &["other"]));
        assert_eq!(m.list[k].ppid, 1);
    }

    #[test]
    fn agent_namespace_skips_launchers() {
        let mut m = Processes::new(AgentRule::FirstNonLauncher, None);
        m.exec(at(1), &exec(1, 10, &["unshare", "-n", "agent"]));
        m.exec(at(2), &exec(1, 20, &["agent"]));
        m.fork(at(3), &Fork { pid: 2, ppid: 1 });
        m.exec(
            at(4),
            &exec(2, 10, &["nsenter", "--net=/proc/1/ns/net", "curl"]),
        );
        assert_eq!(m.agent_netns, Some(20));
        assert_eq!(m.agent_pid, Some(1));
        assert_eq!(
            m.verdict(&m.list[0]),
            Verdict::Inside,
            "the launcher is not outside"
        );
        assert_eq!(m.verdict(&m.list[1]), Verdict::Inside);
        assert_eq!(m.verdict(&m.list[2]), Verdict::Outside);
    }

    #[test]
    fn a_launchers_fork_after_the_agent_is_known_is_no_launcher() {
        // `timeout` (a launcher, host namespace) starts the agent in namespace 20, then forks
        // again: that child runs in the host's namespace after the agent began.
        let mut m = Processes::new(AgentRule::FirstNonLauncher, None);
        m.exec(
            at(1),
            &exec(1, 10, &["timeout", "9", "unshare", "-n", "agent"]),
        );
        m.fork(at(2), &Fork { pid: 2, ppid: 1 });
        assert!(m.list[1].launcher, "forked before the agent is known");
        m.exec(at(3), &exec(2, 20, &["agent"]));
        m.fork(at(4), &Fork { pid: 3, ppid: 1 });
        assert!(!m.list[2].launcher);
        assert_eq!(m.verdict(&m.list[2]), Verdict::Outside);
    }

    #[test]
    fn launcher_detection() {
        assert!(is_launcher("/usr/bin/bwrap", &[]));
        assert!(is_launcher(
            "/usr/sbin/ip",
            &["ip".into(), "netns".into(), "exec".into()]
        ));
        assert!(!is_launcher("/usr/sbin/ip", &["ip".into(), "addr".into()]));
        assert!(!is_launcher("/bin/sh", &[]));
    }
}
