//! The one reducer: records in, the state of the capture out. Live capture, `replay` and the
//! TUI all feed it the same records ([`Session::apply`]), so what they show cannot disagree:
//! the report a replay rebuilds from a log is the report the capture wrote.
//!
//! A new record kind is a new arm in [`Session::apply`] (the compiler asks for it).
use std::collections::BTreeMap;
use std::time::SystemTime;

use crate::judge::netpolicy::{self, Policy};
use crate::output::report::{self, Agent, Exit, Parts, ProbeInfo, Report, Target};
use crate::record::{End, FileFailed, GitRef, PackageMeta, Record, Start, Tamper, Violation};
use crate::state::files::{Added, Files};
use crate::state::network::Network;
use crate::state::processes::{AgentRule, Processes};

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
    /// `git_ref` records: ref file → what it held at the end.
    pub git_refs: BTreeMap<String, GitRef>,
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
            Record::Process(p) => Applied::Process(self.processes.seed(at, p)),
            Record::Exec(e) => Applied::Process(self.processes.exec(at, e)),
            Record::Fork(f) => Applied::Process(self.processes.fork(at, f)),
            Record::ExecFailed(e) => self
                .processes
                .tried(at, e)
                .map_or(Applied::Other, Applied::Process),
            Record::Exit(x) => self
                .processes
                .exit(at, x)
                .map_or(Applied::Skip, Applied::Process),
            Record::File(f) => {
                let process = self
                    .processes
                    .live_index(f.pid)
                    .map_or(0, |i| self.processes.list[i].process);
                match self.files.file(process, f) {
                    Added::Repeat(_) => Applied::Skip,
                    added => Applied::File(added),
                }
            }
            Record::FileFailed(FileFailed::Entry(f)) => {
                Applied::File(Added::New(self.files.failed(f)))
            }
            Record::FileFailed(FileFailed::Missing(_)) => Applied::Other,
            Record::Net(n) => {
                Applied::Net(self.network.net(&text(), n, self.processes.agent_netns))
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
        let git = crate::state::git::derive(&processes, &files, &network, &self.git_refs);
        report::assemble(
            Parts {
                target: start.map_or_else(
                    || Target {
                        mode: "run".into(),
                        command: Vec::new(),
                        pid: None,
                        container: None,
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
                tampers: self.network.tampers.clone(),
                packages,
                git,
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
