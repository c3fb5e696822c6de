//! The process model: one entry per program run, keyed while alive by (tgid, start tick) so a
//! reused pid never merges two processes, and the inside/outside verdicts.
use std::collections::HashMap;

use serde::Serialize;

use crate::kernel::decode::{Event, Exec};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Inside,
    Outside,
}

impl Verdict {
    pub fn of(netns: Option<u64>, agent_netns: Option<u64>) -> Verdict {
        match (netns, agent_netns) {
            (Some(a), Some(b)) if a != b => Verdict::Outside,
            _ => Verdict::Inside,
        }
    }
}

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

#[derive(Clone, Debug, Default, Serialize)]
pub struct Process {
    pub pid: u32,
    pub ppid: u32,
    pub exe: Option<String>,
    pub argv: Vec<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
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
    /// Boot clock ns of the process start (the thread group leader's).
    #[serde(skip)]
    pub start_ns: u64,
    /// Boot clock ns when this entry began (fork or exec) and ended (exit or next exec).
    #[serde(skip)]
    pub began_ns: u64,
    #[serde(skip)]
    pub ended_ns: Option<u64>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub fork_only: bool,
    /// Existed before the capture started (attach, container).
    pub preexisting: bool,
    /// Part of the launch chain before the agent (run mode); never counted as outside.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub launcher: bool,
    /// This entry ended because the process ran another program.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub replaced: bool,
}

impl Process {
    pub fn running(&self) -> bool {
        self.ended_ns.is_none()
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

pub struct Model {
    pub processes: Vec<Process>,
    live: HashMap<(u32, u64), usize>,
    rule: AgentRule,
    pub agent_netns: Option<u64>,
    pub agent_pid: Option<u32>,
    ns_per_tick: u64,
}

impl Model {
    pub fn new(rule: AgentRule) -> Model {
        let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
            .ok()
            .flatten()
            .filter(|&t| t > 0)
            .unwrap_or(100) as u64;
        let agent_netns = match rule {
            AgentRule::Fixed(ns) => Some(ns),
            AgentRule::FirstNonLauncher => None,
        };
        Model {
            processes: Vec::new(),
            live: HashMap::new(),
            rule,
            agent_netns,
            agent_pid: None,
            ns_per_tick: 1_000_000_000 / ticks,
        }
    }

    /// /proc gives start times in clock ticks; the kernel in ns. Keys use ticks for both.
    fn key(&self, tgid: u32, start_ns: u64) -> (u32, u64) {
        (tgid, start_ns / self.ns_per_tick)
    }

    pub fn live_count(&self) -> usize {
        self.live.len()
    }

    pub fn verdict(&self, p: &Process) -> Verdict {
        if p.launcher {
            return Verdict::Inside;
        }
        Verdict::of(p.netns, self.agent_netns)
    }

    pub fn seed(&mut self, e: Existing) {
        let key = self.key(e.pid, e.start_ns);
        self.processes.push(Process {
            pid: e.pid,
            ppid: e.ppid,
            exe: e.exe,
            argv: e.argv,
            cwd: e.cwd,
            uid: e.uid,
            netns: e.netns,
            start_ns: e.start_ns,
            began_ns: e.start_ns,
            preexisting: true,
            ..Default::default()
        });
        self.live.insert(key, self.processes.len() - 1);
    }

    /// Applies one event; returns the index of the entry it touched.
    pub fn apply(&mut self, event: &Event) -> Option<usize> {
        match event {
            Event::Fork {
                header,
                child_tgid,
                child_start_ns,
            } => {
                let parent = self
                    .live
                    .get(&self.key(header.tgid, header.start_ns))
                    .map(|&i| &self.processes[i]);
                let child = Process {
                    pid: *child_tgid,
                    ppid: header.tgid,
                    exe: parent.and_then(|p| p.exe.clone()),
                    argv: parent.map(|p| p.argv.clone()).unwrap_or_default(),
                    argv_truncated: parent.is_some_and(|p| p.argv_truncated),
                    cwd: parent.and_then(|p| p.cwd.clone()),
                    uid: parent.and_then(|p| p.uid),
                    euid: parent.and_then(|p| p.euid),
                    gid: parent.and_then(|p| p.gid),
                    netns: parent.and_then(|p| p.netns),
                    mntns: parent.and_then(|p| p.mntns),
                    pidns: parent.and_then(|p| p.pidns),
                    userns: parent.and_then(|p| p.userns),
                    cgroup_id: parent.and_then(|p| p.cgroup_id),
                    comm: parent.and_then(|p| p.comm.clone()),
                    launcher: parent.is_some_and(|p| p.launcher) && self.agent_netns.is_none(),
                    start_ns: *child_start_ns,
                    began_ns: header.ktime_ns,
                    fork_only: true,
                    ..Default::default()
                };
                self.processes.push(child);
                let idx = self.processes.len() - 1;
                let key = self.key(*child_tgid, *child_start_ns);
                self.live.insert(key, idx);
                Some(idx)
            }
            Event::Exec(exec) => Some(self.exec(exec)),
            Event::Exit { header, exit_code } => {
                let idx = self.live.remove(&self.key(header.tgid, header.start_ns))?;
                let p = &mut self.processes[idx];
                p.ended_ns = Some(header.ktime_ns);
                let code = *exit_code as i32;
                if code & 0x7f != 0 {
                    p.signal = Some(code & 0x7f);
                } else {
                    p.exit_code = Some((code >> 8) & 0xff);
                }
                Some(idx)
            }
            _ => None,
        }
    }

    fn exec(&mut self, e: &Exec) -> usize {
        let h = &e.header;
        let key = self.key(h.tgid, h.start_ns);
        let exe = crate::kernel::decode::normalize_exe(&e.filename, &e.cwd);
        let launcher = matches!(self.rule, AgentRule::FirstNonLauncher)
            && self.agent_netns.is_none()
            && is_launcher(&exe, &e.argv);
        if !launcher && self.agent_netns.is_none() {
            self.agent_netns = Some(e.netns as u64);
            self.agent_pid = Some(h.tgid);
        }
        let fill = |p: &mut Process| {
            p.pid = h.tgid;
            p.ppid = e.ppid;
            p.exe = Some(exe.clone());
            p.argv = e.argv.clone();
            p.argv_truncated = e.argv_truncated;
            p.cwd = Some(e.cwd.clone());
            p.uid = Some(e.uid);
            p.euid = Some(e.euid);
            p.gid = Some(e.gid);
            p.netns = Some(e.netns as u64);
            p.mntns = Some(e.mntns as u64);
            p.pidns = Some(e.pidns as u64);
            p.userns = Some(e.userns as u64);
            p.cgroup_id = Some(e.cgroup_id);
            p.comm = Some(e.comm.clone());
            p.start_ns = h.start_ns;
            p.fork_only = false;
            p.launcher = launcher;
        };
        if let Some(&idx) = self.live.get(&key) {
            let p = &mut self.processes[idx];
            if p.fork_only && !p.preexisting {
                fill(p);
                return idx;
            }
            // The same process runs a second program: close this entry, open another.
            p.ended_ns = Some(h.ktime_ns);
            p.replaced = true;
        }
        let mut p = Process {
            began_ns: h.ktime_ns,
            ..Default::default()
        };
        fill(&mut p);
        self.processes.push(p);
        let idx = self.processes.len() - 1;
        self.live.insert(key, idx);
        idx
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::decode::Header;

    fn header(tgid: u32, start_ns: u64, at: u64) -> Header {
        Header {
            tgid,
            pid: tgid,
            ktime_ns: at,
            start_ns,
        }
    }

    fn exec(tgid: u32, start_ns: u64, netns: u32, argv: &[&str]) -> Event {
        Event::Exec(Exec {
            header: header(tgid, start_ns, start_ns + 1),
            ppid: 1,
            uid: 0,
            euid: 0,
            gid: 0,
            cgroup_id: 1,
            netns,
            mntns: 1,
            pidns: 1,
            userns: 1,
            comm: argv[0].into(),
            filename: format!("/usr/bin/{}", argv[0]),
            cwd: "/tmp".into(),
            cwd_truncated: false,
            argv: argv.iter().map(|s| s.to_string()).collect(),
            argv_truncated: false,
            argv_full_len: 0,
        })
    }

    #[test]
    fn reused_pid_is_a_new_process() {
        let mut m = Model::new(AgentRule::Fixed(10));
        m.apply(&exec(100, 1_000_000_000, 10, &["first"]));
        m.apply(&Event::Exit {
            header: header(100, 1_000_000_000, 2_000_000_000),
            exit_code: 7 << 8,
        });
        // Same pid, started much later: must not touch the first entry.
        m.apply(&exec(100, 9_000_000_000, 10, &["second"]));
        m.apply(&Event::Exit {
            header: header(100, 9_000_000_000, 9_500_000_000),
            exit_code: 9,
        });
        assert_eq!(m.processes.len(), 2);
        assert_eq!(m.processes[0].argv, ["first"]);
        assert_eq!(m.processes[0].exit_code, Some(7));
        assert_eq!(m.processes[1].argv, ["second"]);
        assert_eq!(m.processes[1].signal, Some(9));
        assert_eq!(m.processes[1].exit_code, None);
        // An exit for a process that is not live changes nothing.
        assert_eq!(
            m.apply(&Event::Exit {
                header: header(100, 9_000_000_000, 1),
                exit_code: 0
            }),
            None
        );
    }

    #[test]
    fn fork_then_exec_is_one_entry_and_fork_only_stays() {
        let mut m = Model::new(AgentRule::Fixed(10));
        m.apply(&exec(1, 100, 10, &["sh"]));
        m.apply(&Event::Fork {
            header: header(1, 100, 200),
            child_tgid: 2,
            child_start_ns: 200,
        });
        m.apply(&Event::Fork {
            header: header(1, 100, 300),
            child_tgid: 3,
            child_start_ns: 300,
        });
        m.apply(&exec(2, 200, 10, &["ls"]));
        assert_eq!(m.processes.len(), 3);
        assert!(!m.processes[1].fork_only);
        assert_eq!(m.processes[1].argv, ["ls"]);
        assert!(m.processes[2].fork_only);
        assert_eq!(m.processes[2].argv, ["sh"]);
        // Exec twice: two entries, same pid.
        m.apply(&exec(2, 200, 10, &["cat"]));
        assert_eq!(m.processes.len(), 4);
        assert!(m.processes[1].replaced);
        assert_eq!(m.processes[3].pid, 2);
    }

    #[test]
    fn agent_namespace_skips_launchers() {
        let mut m = Model::new(AgentRule::FirstNonLauncher);
        m.apply(&exec(1, 100, 10, &["unshare", "-n", "agent"]));
        m.apply(&exec(1, 100, 20, &["agent"]));
        m.apply(&Event::Fork {
            header: header(1, 100, 200),
            child_tgid: 2,
            child_start_ns: 200,
        });
        m.apply(&exec(
            2,
            200,
            10,
            &["nsenter", "--net=/proc/1/ns/net", "curl"],
        ));
        assert_eq!(m.agent_netns, Some(20));
        assert_eq!(
            m.verdict(&m.processes[0]),
            Verdict::Inside,
            "the launcher is not outside"
        );
        assert_eq!(m.verdict(&m.processes[1]), Verdict::Inside);
        assert_eq!(m.verdict(&m.processes[2]), Verdict::Outside);
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
