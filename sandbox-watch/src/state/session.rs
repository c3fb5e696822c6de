//! The one reducer: records in, the state of the capture out. Live capture, `replay` and the
//! TUI all feed it the same records ([`Session::apply`]), so what they show cannot disagree:
//! the report a replay rebuilds from a log is the report the capture wrote.
//!
//! A new record kind is a new arm in [`Session::apply`] (the compiler asks for it).
use std::collections::BTreeMap;
use std::time::SystemTime;

use crate::judge::netpolicy::{self, Policy};
use crate::output::report::{self, Agent, Exit, Parts, ProbeInfo, Report, Target};
use crate::record::{
    End, FileFailed, GitConfig, GitRef, PackageMeta, Record, Start, Tamper, Violation,
};
use crate::state::files::{Added, Files};
use crate::state::mounts::MountEntry;
use crate::state::network::Network;
use crate::state::processes::{AgentRule, Processes, is_launcher};
use crate::state::tool_calls::{self, ToolCallEntry, ToolCallRef, ToolCalls};

/// What a record changed, for the sinks that show it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    /// Nothing, and it says nothing the log needs: a repeated read (the end's `file_count`
    /// has the total), the exit of a process never seen. The capture does not log it.
    Skip,
    /// The process entry it made or changed.
    Process(usize),
    /// The file entry it made or counted in.
    File(Added),
    /// The network entry it made or changed.
    Net(usize),
    /// Something else (start, end, a failure of nothing, a violation, …).
    Other,
}

#[derive(Default)]
pub struct Session {
    pub start: Option<Start>,
    started_at: Option<SystemTime>,
    pub processes: Processes,
    pub files: Files,
    pub network: Network,
    /// Mount and namespace changes, in the order they came (`mounts[]`).
    pub mounts: Vec<MountEntry>,
    /// The agent's steps: its direct children (see `state::tool_calls`).
    pub tool_calls: ToolCalls,
    /// The session's number of the agent process, once it is known.
    agent_process: Option<u64>,
    /// `git_ref` records: ref file → what it held at the end.
    pub git_refs: BTreeMap<String, GitRef>,
    /// `git_config` records: config file → its hooks and include settings at the end.
    pub git_configs: BTreeMap<String, GitConfig>,
    /// `package_meta` records: manifest → its name and version at the end.
    pub package_metas: BTreeMap<String, PackageMeta>,
    /// `output` records: process entry (index in `processes.list`) → its streams.
    pub outputs: BTreeMap<usize, crate::state::output::ProcessOutput>,
    /// The capture's final violations, as logged (the report computes its own, the same).
    pub violations: Vec<Violation>,
    pub end: Option<End>,
    /// Acts on the monitor, repeats counted: each is a `tamper` violation.
    pub tamper: Vec<TamperFinding>,
    ended_at: Option<SystemTime>,
    last_at: Option<SystemTime>,
    policy: Policy,
}

impl Session {
    pub fn new() -> Session {
        Session::default()
    }

    /// Applies one record, at the time its log line gives.
    pub fn apply(&mut self, at: SystemTime, record: &Record) -> Applied {
        self.last_at = Some(self.last_at.map_or(at, |l| l.max(at)));
        let text = || crate::time::rfc3339_nanos(at);
        match record {
            Record::Start(s) => {
                let rule = s
                    .agent
                    .netns
                    .map_or(AgentRule::FirstNonLauncher, AgentRule::Fixed);
                self.processes = Processes::new(rule, s.agent.pid);
                let rules = s.allow_net.iter().chain(&s.allow_net_resolved);
                self.policy = Policy::new(
                    rules
                        .filter_map(|r| netpolicy::parse_rule(r).ok())
                        .collect(),
                );
                self.start = Some(s.clone());
                self.started_at = Some(at);
                Applied::Other
            }
            Record::Process(p) => {
                let parent = self.processes.live_index(p.ppid);
                let i = self.processes.seed(at, p);
                self.started(parent, i);
                Applied::Process(i)
            }
            Record::Exec(e) => {
                let i = self.processes.exec(at, e);
                self.ran(at, i);
                Applied::Process(i)
            }
            Record::Fork(f) => {
                let parent = self.processes.live_index(f.ppid);
                let i = self.processes.fork(at, f);
                self.started(parent, i);
                Applied::Process(i)
            }
            Record::ExecFailed(e) => self
                .processes
                .tried(at, e)
                .map_or(Applied::Other, Applied::Process),
            Record::Exit(x) => match self.processes.exit(at, x) {
                Some(i) => {
                    let p = &self.processes.list[i];
                    if let Some(step) = p.step.and_then(|k| self.tool_calls.list.get_mut(k))
                        && step.process == p.process
                    {
                        step.ended = true;
                    }
                    Applied::Process(i)
                }
                None => Applied::Skip,
            },
            Record::File(f) => {
                let process = self
                    .processes
                    .live_index(f.pid)
                    .map_or(0, |i| self.processes.list[i].process);
                match self.files.file(process, f) {
                    Added::Repeat(_) => Applied::Skip,
                    added => {
                        self.file_effect(at, added.index());
                        Applied::File(added)
                    }
                }
            }
            Record::FileFailed(FileFailed::Entry(f)) => {
                let i = self.files.failed(f);
                self.file_effect(at, i);
                Applied::File(Added::New(i))
            }
            Record::FileFailed(FileFailed::Missing(_)) => Applied::Other,
            Record::Mount(m) => {
                let step = self.step_of(m.pid);
                let mut entry = m.clone();
                entry.tool_call = ToolCallRef::of(step);
                entry.after_step = self.tool_calls.effect(step, at, m.pid, || m.line());
                self.mounts.push(entry);
                Applied::Other
            }
            Record::Net(n) => {
                let i = self.network.net(&text(), n, self.processes.agent_netns);
                let step = self.step_of(n.pid);
                let e = &mut self.network.entries[i];
                if e.tool_call.is_unset() {
                    e.tool_call = ToolCallRef::of(step);
                }
                let what = || {
                    format!(
                        "{} {}",
                        n.op.as_str(),
                        crate::state::network::destination(n)
                    )
                };
                if self.tool_calls.effect(step, at, n.pid, what) {
                    e.after_step = true;
                }
                Applied::Net(i)
            }
            Record::NetResult(r) => self
                .network
                .result(&text(), r)
                .map_or(Applied::Other, Applied::Net),
            Record::NetTamper(t) => {
                self.network.tampers.push(t.clone());
                Applied::Other
            }
            Record::FlowCount(c) => self
                .network
                .flow_count(c)
                .map_or(Applied::Other, Applied::Net),
            Record::FileCount(c) => self
                .files
                .count(c)
                .map_or(Applied::Other, |i| Applied::File(Added::New(i))),
            Record::FileModified(m) => self
                .files
                .modified(m)
                .map_or(Applied::Other, |i| Applied::File(Added::Repeat(i))),
            Record::FileHash(h) => {
                self.files.hash(h);
                Applied::Other
            }
            Record::Listening(l) => {
                self.network.listening(l);
                Applied::Other
            }
            Record::GitRef(g) => {
                self.git_refs.insert(g.path.clone(), g.clone());
                Applied::Other
            }
            Record::GitConfig(c) => {
                self.git_configs.insert(c.path.clone(), c.clone());
                Applied::Other
            }
            Record::PackageMeta(m) => {
                self.package_metas.insert(m.path.clone(), m.clone());
                Applied::Other
            }
            Record::Output(o) => match self.processes.live_index(o.pid) {
                Some(i) => {
                    let entry = self.outputs.entry(i).or_default();
                    let slot = if o.stream == "stderr" {
                        &mut entry.stderr
                    } else {
                        &mut entry.stdout
                    };
                    *slot = Some(o.output.clone());
                    Applied::Process(i)
                }
                None => Applied::Other,
            },
            Record::Violation(v) => {
                self.violations.push(v.clone());
                Applied::Other
            }
            Record::Tamper(t) => {
                self.tampered(t);
                Applied::Other
            }
            Record::End(e) => {
                self.end = Some(e.clone());
                self.ended_at = Some(at);
                Applied::Other
            }
        }
    }

    /// The step a process's records belong to now (None: the agent itself, or no step).
    fn step_of(&self, pid: u32) -> Option<usize> {
        self.processes
            .index_of(pid)
            .and_then(|i| self.processes.list[i].step)
    }

    /// A process entry made by a fork or read from /proc: a child of the agent process is a
    /// new step; any other is under its parent's (a fork copies it).
    fn started(&mut self, parent: Option<usize>, i: usize) {
        self.know_agent(i);
        let under_agent = parent.is_some_and(|p| {
            self.agent_process == Some(self.processes.list[p].process)
                && !self.processes.list[p].launcher
        });
        let p = &mut self.processes.list[i];
        if under_agent {
            p.step = Some(self.tool_calls.open(p.process, i));
        } else if let Some(k) = parent.and_then(|k| self.processes.list[k].step) {
            self.processes.list[i].step = Some(k);
        }
    }

    /// A program run: the step's own process keeps its entries; one run after its step
    /// ended is marked.
    fn ran(&mut self, at: SystemTime, i: usize) {
        self.know_agent(i);
        let p = &self.processes.list[i];
        let Some(k) = p.step else { return };
        let step = &mut self.tool_calls.list[k];
        if step.process == p.process && step.entries.last() != Some(&i) {
            step.entries.push(i);
        }
        let what = || format!("ran `{}`", report::clean(&p.argv.join(" ")));
        if self.tool_calls.effect(Some(k), at, p.pid, what) {
            self.processes.list[i].after_step = true;
        }
    }

    /// The agent process, whose direct children are the steps: `run`'s agent (the first
    /// program of the tree that is not a launcher) or the attached process. A container has
    /// no agent process of its own: its processes are under no step.
    fn know_agent(&mut self, i: usize) {
        let p = &self.processes.list[i];
        if self.agent_process.is_some() || p.launcher || p.fork_only {
            return;
        }
        let mode = self
            .start
            .as_ref()
            .map_or("run", |s| s.target.mode.as_str());
        let agent = match (mode, self.processes.agent_pid) {
            ("run" | "attach", Some(pid)) => pid == p.pid,
            // run with --agent-netns: the namespace is given, the agent is still the first
            // program that is not a launcher.
            ("run", None) => !is_launcher(p.exe.as_deref().unwrap_or_default(), &p.argv),
            _ => false,
        };
        if agent {
            self.agent_process = Some(p.process);
        }
    }

    /// A file entry made or counted: its step, and whether it came after the step.
    fn file_effect(&mut self, at: SystemTime, i: usize) {
        let e = &self.files.entries[i];
        let step = self.step_of(e.pid);
        let what = || {
            let path = report::clean(e.new_path.as_ref().unwrap_or(&e.path));
            match &e.result {
                Some(error) => format!("tried to {} {path} ({error})", e.op.attempt()),
                None => format!("{} {path}", e.op.past()),
            }
        };
        let after = self.tool_calls.effect(step, at, e.pid, what);
        let e = &mut self.files.entries[i];
        if e.tool_call.is_unset() {
            e.tool_call = ToolCallRef::of(step);
        }
        e.after_step |= after;
    }

    /// The tool calls as the report lists them (counts are added by the report).
    pub fn tool_call_entries(&self) -> Vec<ToolCallEntry> {
        let list = &self.processes.list;
        self.tool_calls
            .list
            .iter()
            .enumerate()
            .map(|(k, t)| {
                let first = &list[t.entries[0]];
                let program = t
                    .entries
                    .iter()
                    .map(|&i| &list[i])
                    .find(|p| !p.fork_only)
                    .unwrap_or(first);
                let last = &list[*t.entries.last().unwrap_or(&t.entries[0])];
                ToolCallEntry {
                    id: tool_calls::id(k),
                    pid: first.pid,
                    argv: program.argv.clone(),
                    exe: program.exe.clone(),
                    command: if program.fork_only {
                        None
                    } else {
                        tool_calls::command(&program.argv)
                    },
                    started_at: crate::time::rfc3339_nanos(first.began),
                    ended_at: last.ended.map(crate::time::rfc3339_nanos),
                    exit_code: last.exit_code,
                    signal: last.signal,
                    running_at_end: last.running(),
                    fork_only: program.fork_only,
                    declared: None,
                    declared_by: None,
                    after_step: t.after_step,
                    first_after_step: t.first_after.clone(),
                    processes: 0,
                    files_changed: 0,
                    files_read: 0,
                    connections: 0,
                    violations: 0,
                }
            })
            .collect()
    }

    /// One act on the monitor: a finding of its own, or a repeat of one already seen (the same
    /// process, the same call, the same detail, the same target).
    fn tampered(&mut self, t: &Tamper) {
        let same = |f: &&mut TamperFinding| {
            f.first.pid == t.pid
                && f.first.op == t.op
                && f.first.what == t.what
                && f.first.target == t.target
                && f.first.path == t.path
        };
        match self.tamper.iter_mut().find(same) {
            Some(f) => f.count += 1,
            None => self.tamper.push(TamperFinding {
                first: t.clone(),
                count: 1,
            }),
        }
    }

    /// The agent: as the processes found it, or as the end record says (logs whose start
    /// did not name the attached process).
    pub fn agent(&self) -> Agent {
        match self.end.as_ref().and_then(|e| e.agent.clone()) {
            Some(a) => a,
            None => Agent {
                pid: self.processes.agent_pid,
                netns: self.processes.agent_netns,
            },
        }
    }

    /// The report, from the records applied so far. Before the end record: the counts the
    /// end brings (events, lost records, the agent's exit) are those of `end` if given, else 0.
    pub fn report(&self) -> Report {
        self.report_with(self.end.as_ref(), self.ended_at.or(self.last_at))
    }

    /// The report as it will be once an end record with these counts is applied at `ended_at`:
    /// the capture computes the violations (and the end record's own counts) with it.
    pub fn report_with(&self, end: Option<&End>, ended_at: Option<SystemTime>) -> Report {
        let ended_at = ended_at.or(self.last_at).unwrap_or(SystemTime::UNIX_EPOCH);
        let start = self.start.as_ref();
        let agent = match end.and_then(|e| e.agent.clone()) {
            Some(a) => a,
            None => Agent {
                pid: self.processes.agent_pid,
                netns: self.processes.agent_netns,
            },
        };
        let processes = self
            .processes
            .list
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let mut e = self.processes.entry(p, ended_at);
                e.output = self.outputs.get(&i).cloned();
                // Judged against the agent as known at the end.
                e.verdict = if p.launcher {
                    crate::record::Verdict::Inside
                } else {
                    crate::record::Verdict::of(p.netns, agent.netns)
                };
                e
            })
            .collect::<Vec<_>>();
        let files = self.files.report_entries();
        let network = self.network.report_entries(agent.netns);
        let packages = crate::state::packages::derive(&processes, &files, &self.package_metas);
        let git = crate::state::git::derive(
            &processes,
            &files,
            &network,
            &self.git_refs,
            &self.git_configs,
        );
        report::assemble(
            Parts {
                target: start.map_or_else(
                    || Target {
                        mode: "run".into(),
                        command: Vec::new(),
                        pid: None,
                        container: None,
                        dropped_capabilities: Vec::new(),
                    },
                    |s| s.target.clone(),
                ),
                started_at: self
                    .started_at
                    .map(crate::time::rfc3339_nanos)
                    .unwrap_or_default(),
                ended_at: crate::time::rfc3339_nanos(ended_at),
                exit: end.map_or_else(Exit::default, |e| e.exit.clone()),
                probe: start.map_or_else(
                    || ProbeInfo::new("unknown".into(), Vec::new()),
                    |s| s.probe.clone(),
                ),
                events: end.map_or(0, |e| e.events),
                lost_by_kind: end.map(|e| e.lost_by_kind.clone()).unwrap_or_default(),
                undecodable: end.map_or(0, |e| e.undecodable),
                processes,
                files,
                network,
                mounts: self.mounts.clone(),
                tampers: self.network.tampers.clone(),
                packages,
                git,
                tool_calls: self.tool_call_entries(),
                redactions: end.map_or(0, |e| e.redactions),
                lost: end.map(|e| e.lost),
                sequence: end.and_then(|e| e.sequence.clone()),
                failed_inserts: end.map(|e| e.failed_inserts.clone()).unwrap_or_default(),
                tamper: self
                    .tamper
                    .iter()
                    .map(|f| (f.first.pid, f.line()))
                    .collect(),
                agent,
            },
            &self.policy,
        )
    }
}

/// An act on the monitor, and how many times the same one was seen.
#[derive(Clone, Debug)]
pub struct TamperFinding {
    pub first: Tamper,
    pub count: u64,
}

impl TamperFinding {
    /// The violation's line.
    pub fn line(&self) -> String {
        if self.count > 1 {
            format!("{} (×{})", self.first.summary, self.count)
        } else {
            self.first.summary.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Exec, Exit, Fork};
    use std::time::Duration;

    fn at(ms: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_millis(1_000_000 + ms)
    }

    fn exec(pid: u32, ppid: u32, argv: &[&str]) -> Record {
        Record::Exec(Exec {
            pid,
            ppid,
            exe: Some(format!("/usr/bin/{}", argv[0])),
            argv: argv.iter().map(|s| s.to_string()).collect(),
            netns: Some(1),
            ..Default::default()
        })
    }

    fn write(pid: u32, path: &str) -> Record {
        Record::File(
            serde_json::from_value(serde_json::json!({"pid": pid, "op": "write", "path": path,
                "credential": false, "persistence": false}))
            .unwrap(),
        )
    }

    #[test]
    fn children_of_the_agent_are_steps_and_a_leftover_acts_after_its_step() {
        let mut s = Session::new();
        let records = [
            exec(10, 1, &["timeout", "9", "agent"]),
            exec(10, 1, &["agent"]),
            Record::Fork(Fork { pid: 11, ppid: 10 }),
            exec(11, 10, &["sh", "-c", "x &"]),
            Record::Fork(Fork { pid: 12, ppid: 11 }),
            Record::Exit(Exit {
                pid: 11,
                exit_code: Some(0),
                signal: None,
            }),
            // The leftover, reparented: its records still name it by pid.
            write(12, "/w/late"),
            exec(12, 1, &["curl", "x"]),
            write(10, "/w/own"),
            Record::Fork(Fork { pid: 13, ppid: 10 }),
            Record::Exit(Exit {
                pid: 13,
                exit_code: None,
                signal: Some(9),
            }),
        ];
        for (i, r) in records.iter().enumerate() {
            s.apply(at(i as u64), r);
        }
        let report = s.report();
        let ids: Vec<&str> = report.tool_calls.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, ["1", "2"]);
        let (one, two) = (&report.tool_calls[0], &report.tool_calls[1]);
        assert_eq!(one.command.as_deref(), Some("x &"));
        assert_eq!((one.pid, one.exit_code), (11, Some(0)));
        assert_eq!(one.after_step, 2, "the write and the exec after it ended");
        let first = one.first_after_step.as_ref().unwrap();
        assert_eq!((first.pid, first.what.as_str()), (12, "wrote /w/late"));
        assert!(two.fork_only && two.command.is_none() && two.signal == Some(9));
        let file = |p: &str| report.files.iter().find(|f| f.path == p).unwrap();
        assert_eq!(file("/w/late").tool_call, ToolCallRef::Step("1".into()));
        assert!(file("/w/late").after_step);
        assert_eq!(file("/w/own").tool_call, ToolCallRef::Agent);
        let curl = report
            .processes
            .iter()
            .find(|p| p.argv[0] == "curl")
            .unwrap();
        assert!(curl.after_step && curl.tool_call == ToolCallRef::Step("1".into()));
        // The launcher and the agent are under no step.
        assert!(
            report.processes[..2]
                .iter()
                .all(|p| p.tool_call == ToolCallRef::Agent)
        );
        let outlived: Vec<_> = report
            .violations
            .iter()
            .filter(|v| v.kind == crate::record::ViolationKind::Outlived)
            .collect();
        assert_eq!(outlived.len(), 1);
        assert_eq!(outlived[0].tool_call, ToolCallRef::Step("1".into()));
        assert_eq!(one.violations, 1);
    }
}
