//! One capture: kernel records → decoder → [`Record`]s (judged) → the [`Session`] and every
//! sink (log, OCSF, TUI), then the report the session makes.
//!
//! A single task owns the whole pipeline (no locks): it waits on the ring buffer's fd, the
//! agent's exit, signals and a tick, and handles each record as it arrives. Every record the
//! session applies is the record the log gets, so a replay of the log rebuilds this report.
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use aya::maps::{MapData, RingBuf};
use sandbox_watch_common::ReadKey;
use tokio::io::unix::AsyncFd;
use tokio::signal::unix::{SignalKind, signal};

use crate::judge::classify::Classifier;
use crate::judge::tamper::Own;
use crate::kernel::backlog;
use crate::kernel::decode::{self, Event};
use crate::kernel::probe::{Probe, Rings, kind_name};
use crate::kernel::reads::ReadCounts;
use crate::kernel::sequence::Sequence;
use crate::output::evidence::LogWriter;
use crate::output::report::{self, LogInfo, ProbeInfo, ProcessEntry, Report, Target};
use crate::record::from_kernel::{self, Sockets};
use crate::record::{
    self, End, FileCount, FileHash, FileModified, Listening, Logged, Op, Record, Start, StartAgent,
    Tamper,
};
use crate::state::processes::Existing;
use crate::state::session::{Applied, Session};
use crate::time::rfc3339_nanos;

/// Converts the kernel's boot clock to wall time.
#[derive(Clone, Copy)]
pub struct Clock {
    /// Wall clock ns minus boot clock ns, measured at start.
    offset_ns: i128,
}

impl Clock {
    pub fn now() -> Clock {
        let boot =
            nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME).expect("boot clock");
        let wall = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .expect("time after 1970");
        let boot_ns = boot.tv_sec() as i128 * 1_000_000_000 + boot.tv_nsec() as i128;
        Clock {
            offset_ns: wall.as_nanos() as i128 - boot_ns,
        }
    }

    pub fn boot_now(&self) -> u64 {
        let boot =
            nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME).expect("boot clock");
        boot.tv_sec() as u64 * 1_000_000_000 + boot.tv_nsec() as u64
    }

    pub fn wall(&self, boot_ns: u64) -> SystemTime {
        let ns = (boot_ns as i128 + self.offset_ns).max(0) as u128;
        SystemTime::UNIX_EPOCH + Duration::from_nanos(ns as u64)
    }

    pub fn rfc3339(&self, boot_ns: u64) -> String {
        rfc3339_nanos(self.wall(boot_ns))
    }
}

pub enum Mode {
    /// `command` is already redacted.
    Run {
        command: Vec<String>,
        pid: u32,
    },
    /// `command`: the process's argv from /proc, already redacted.
    Attach {
        pid: u32,
        command: Vec<String>,
    },
    Container {
        id: String,
        cgroup: String,
    },
}

/// How the capture ends.
pub struct Ends {
    /// run: the agent's exit status arrives here.
    pub agent: Option<tokio::sync::oneshot::Receiver<nix::sys::wait::WaitStatus>>,
    pub linger: Duration,
    pub duration: Option<Duration>,
    /// attach: end when no traced process is left.
    pub when_empty: bool,
    /// container: end when its cgroup is empty or removed.
    pub container: Option<crate::launch::container::Container>,
    /// The TUI was quit: end now.
    pub stop: Option<tokio::sync::oneshot::Receiver<()>>,
}

pub struct Capture {
    pub mode: Mode,
    pub probe: Probe,
    /// The state every record goes through: what the report is made of.
    pub session: Session,
    /// The agent's namespace when it is given (attach, container, --agent-netns), and the
    /// process followed (attach, container).
    pub agent_netns: Option<u64>,
    pub agent_pid: Option<u32>,
    /// Processes there before the capture (attach, container), read from /proc.
    pub existing: Vec<Existing>,
    /// `--allow-net` as given, and what its host rules resolved to (as rules).
    pub allow_net: Vec<String>,
    pub allow_net_resolved: Vec<String>,
    pub classifier: Classifier,
    pub log: Option<LogWriter>,
    /// `--ocsf`: the same records as OCSF events.
    pub ocsf: Option<crate::output::ocsf_out::OcsfWriter>,
    /// For the OCSF device.
    hostname: Option<String>,
    /// The TUI's feed: every record, stats on each tick, and the end.
    pub feed: Option<tokio::sync::mpsc::Sender<crate::tui::Feed>>,
    pub clock: Clock,
    pub started_ns: u64,
    pub events: u64,
    pub undecodable: u64,
    pub redactions: u64,
    pub agent_status: Option<nix::sys::wait::WaitStatus>,
    pub ended_by: String,
    sockets: Sockets,
    reads: ReadCounts,
    /// `--capture-output`: keep the head and tail of each stream as text.
    pub capture_output: bool,
    outputs: crate::state::output::Outputs,
    /// The lines of the credential files traced processes read, by path, as they were when
    /// first needed: cut out of any kept output text (a pipe from `cat key`).
    secret_lines: BTreeMap<String, Vec<String>>,
    /// The kernel's sequence numbers seen.
    sequence: Sequence,
    /// The monitor's own BPF objects and pid, for the tamper records.
    own: Own,
    /// The rings, between the watch and the end's last drain.
    rings: Option<Rings>,
    /// Print the log's anchor to stderr (not while the TUI owns the terminal).
    pub anchors: bool,
    /// The start record as logged (sent again to a TUI started later).
    start_logged: Option<Logged>,
    /// How often the anchor is printed (headless) and a signed checkpoint written.
    pub checkpoint: Duration,
    /// `run`: the agent's tree is under the seccomp guard that kills a 32-bit or x32 system
    /// call with SIGSYS (`launch::guard`), so such a death is a tamper finding.
    pub compat_guard: bool,
    /// `run --protect`: the capabilities the agent's tree cannot have (the report says so).
    pub dropped_capabilities: Vec<String>,
}

impl Capture {
    pub fn new(
        mode: Mode,
        probe: Probe,
        classifier: Classifier,
        log: Option<LogWriter>,
    ) -> Capture {
        let clock = Clock::now();
        let started_ns = clock.boot_now();
        let own = Own {
            objects: probe
                .own
                .iter()
                .map(|(o, name)| ((o.kind, o.id), name.clone()))
                .collect(),
            pid: std::process::id(),
        };
        Capture {
            mode,
            probe,
            session: Session::new(),
            agent_netns: None,
            agent_pid: None,
            existing: Vec::new(),
            allow_net: Vec::new(),
            allow_net_resolved: Vec::new(),
            classifier,
            log,
            ocsf: None,
            feed: None,
            hostname: nix::unistd::gethostname()
                .ok()
                .and_then(|h| h.into_string().ok()),
            clock,
            started_ns,
            events: 0,
            undecodable: 0,
            redactions: 0,
            agent_status: None,
            ended_by: String::new(),
            sockets: Sockets::default(),
            reads: ReadCounts::default(),
            capture_output: false,
            outputs: Default::default(),
            secret_lines: BTreeMap::new(),
            sequence: Sequence::default(),
            own,
            rings: None,
            anchors: true,
            checkpoint: Duration::from_secs(10),
            start_logged: None,
            compat_guard: false,
            dropped_capabilities: Vec::new(),
        }
    }

    /// Knows the rules' files that exist now by their inode (see `judge::identity`): every
    /// open of a credential's inode is sent by the kernel from the start, whatever its path.
    pub fn know_inodes(&mut self, roots: &crate::judge::identity::Roots) {
        let inodes = crate::judge::identity::inodes(&self.classifier, roots);
        let credentials: Vec<(u32, u64)> = inodes
            .iter()
            .filter(|(_, rule)| rule.credential)
            .map(|(key, _)| *key)
            .collect();
        log::debug!(
            "{} rule files known by their inode ({} credentials)",
            inodes.len(),
            credentials.len()
        );
        self.classifier.set_inodes(inodes);
        for (dev, ino) in credentials {
            self.always_report(dev, ino);
        }
    }

    /// Makes the kernel send every open of this inode (a credential). Should its table be full,
    /// the further opens are counted instead (as a plain read's): nothing is lost.
    fn always_report(&mut self, dev: u32, ino: u64) {
        if let Err(e) = self.probe.always_report(dev, ino) {
            log::warn!("the kernel's table of credential inodes refused one: {e}");
        }
    }

    /// One record: through the session, then (unless the session says it adds nothing) to
    /// the evidence log, and as OCSF to `--ocsf` and to the TUI, both with the log's `seq`
    /// and `hash` so each event leads back to its line.
    fn emit(&mut self, at_ns: u64, mut record: Record) -> Applied {
        let at = self.clock.wall(at_ns);
        let applied = self.session.apply(at, &record);
        if applied == Applied::Skip {
            return applied;
        }
        // What the session concluded of a program run, for the readers of the log.
        if let (Record::Exec(e), Applied::Process(i)) = (&mut record, applied) {
            let p = &self.session.processes.list[i];
            e.launcher = p.launcher;
            e.verdict = self.session.processes.verdict(p);
            e.started_at = rfc3339_nanos(p.began);
        }
        let mut logged = Logged {
            seq: None,
            hash: None,
            at,
            record,
        };
        if let Some(log) = self.log.as_mut() {
            let seq = log.records();
            let written = match &logged.record {
                Record::End(_) => log.finish_record(at, &logged.record),
                r => log.write(at, r),
            };
            match written {
                Ok(hash) => (logged.seq, logged.hash) = (Some(seq), Some(hash)),
                Err(e) => eprintln!("sandbox-watch: writing the log failed: {e}"),
            }
            // An act on the monitor is on disk before anything else is read: if the monitor
            // is killed next, the log still has it.
            if matches!(logged.record, Record::Tamper(_) | Record::Start(_))
                && let Err(e) = log.flush()
            {
                eprintln!("sandbox-watch: writing the log failed: {e}");
            }
        }
        let host = self.hostname.as_deref();
        if let Some(ocsf) = self.ocsf.as_mut()
            && let Some(event) =
                crate::output::ocsf::to_ocsf_on_host(&logged, env!("CARGO_PKG_VERSION"), host)
        {
            ocsf.push(event);
        }
        if matches!(logged.record, Record::Start(_)) {
            self.start_logged = Some(logged.clone());
        }
        if let Some(feed) = &self.feed {
            let _ = feed.try_send(crate::tui::Feed::Record(logged));
        }
        applied
    }

    /// Output records lost in the kernel so far.
    fn output_lost(&self) -> u64 {
        self.probe.lost()[sandbox_watch_common::EventKind::Output as usize]
    }

    /// Ends the output streams of a program run (its exit or exec; all at the end): one
    /// `output` record each, before the record that ends the run.
    fn end_output(&mut self, at_ns: u64, tgid: Option<u32>) {
        let lost = self.output_lost();
        let ended = match tgid {
            Some(tgid) => self.outputs.end(tgid, lost),
            None => self.outputs.end_all(lost),
        };
        if self.capture_output && !ended.is_empty() {
            self.read_secret_lines();
        }
        let secrets: Vec<&String> = self.secret_lines.values().flatten().collect();
        let mut records = Vec::new();
        for e in ended {
            let withheld = self.credential_read_by(e.pid);
            records.push(e.record(self.capture_output, withheld, |text| {
                // The credentials' own lines first: the rules below could cut one in part.
                let mut text = text.to_string();
                let mut found = 0;
                for s in &secrets {
                    if text.contains(s.as_str()) {
                        found += text.matches(s.as_str()).count();
                        text = text.replace(s.as_str(), crate::judge::redact::REDACTED);
                    }
                }
                let (mut v, n) = crate::judge::redact::redact_argv(&[text]);
                (v.pop().unwrap_or_default(), found + n)
            }));
        }
        for (r, n) in records {
            self.redactions += n as u64;
            self.emit(at_ns, Record::Output(r));
        }
    }

    /// Reads the lines (8 bytes or longer) of each credential file read so far, once a file.
    fn read_secret_lines(&mut self) {
        let paths: Vec<String> = self
            .session
            .files
            .entries
            .iter()
            .filter(|f| f.credential && f.result.is_none())
            .map(|f| f.path.clone())
            .filter(|p| !self.secret_lines.contains_key(p))
            .collect();
        for path in paths {
            use std::io::Read as _;
            let mut bytes = Vec::new();
            // Regular files only: opening a FIFO would wait for a writer.
            let regular = std::fs::metadata(&path).is_ok_and(|m| m.is_file());
            if regular && let Ok(f) = std::fs::File::open(&path) {
                let _ = f.take(1 << 20).read_to_end(&mut bytes);
            }
            let lines = String::from_utf8_lossy(&bytes)
                .lines()
                .map(str::trim)
                .filter(|l| l.len() >= 8)
                .map(str::to_string)
                .collect();
            self.secret_lines.insert(path, lines);
        }
    }

    /// Why a program's text is not kept: it read a credential file (its bytes may be in it).
    fn credential_read_by(&self, pid: u32) -> Option<String> {
        let f = self
            .session
            .files
            .entries
            .iter()
            .find(|f| f.pid == pid && f.credential && f.result.is_none())?;
        Some(format!(
            "the program read a credential file ({}): only the count and hash are kept",
            f.path
        ))
    }

    /// The log and the OCSF export, deleted, moved, replaced or truncated by someone (the
    /// open hook sees none of that): a `tamper` record for each change, once. The pid is that
    /// of the last delete or rename of the path the session has, if any.
    fn check_outputs(&mut self, at_ns: u64) {
        let mut changes = Vec::new();
        if let Some(log) = self.log.as_mut() {
            let path = log.resolved_path().display().to_string();
            changes.extend(log.changes().into_iter().map(|c| (c, path.clone())));
        }
        if let Some(ocsf) = self.ocsf.as_mut() {
            let path = ocsf.resolved_path().display().to_string();
            changes.extend(ocsf.changes().into_iter().map(|c| (c, path.clone())));
        }
        for (change, path) in changes {
            let pid = self
                .session
                .files
                .entries
                .iter()
                .rev()
                .find(|f| {
                    matches!(
                        f.op,
                        crate::record::words::Op::Delete | crate::record::words::Op::Rename
                    ) && (f.path == path || f.new_path.as_deref() == Some(path.as_str()))
                })
                .map(|f| f.pid);
            let t = Tamper {
                pid,
                op: "output".into(),
                monitor: true,
                what: Some(change.what.into()),
                target: None,
                path: Some(path),
                summary: match pid {
                    Some(pid) => format!("{} (pid {pid} renamed or deleted it)", change.summary),
                    None => change.summary,
                },
            };
            self.emit(at_ns, Record::Tamper(t));
        }
    }

    fn flush(&mut self) {
        if let Some(log) = self.log.as_mut()
            && let Err(e) = log.flush()
        {
            eprintln!("sandbox-watch: writing the log failed: {e}");
        }
        if let Some(ocsf) = self.ocsf.as_mut()
            && let Err(e) = ocsf.flush()
        {
            eprintln!("sandbox-watch: writing the OCSF export failed: {e}");
        }
    }

    /// The first record: what is watched and how. Written (and flushed) before anything is
    /// traced or the agent released, so a kill of the monitor at any moment leaves a log that
    /// `verify` calls unended, never "not a log"; its hash goes to stderr.
    /// Called again (once the TUI's feed exists) it only hands the TUI the record written.
    pub fn log_start(&mut self) {
        if let Some(logged) = &self.start_logged {
            if let Some(feed) = &self.feed {
                let _ = feed.try_send(crate::tui::Feed::Record(logged.clone()));
            }
            return;
        }
        let start = Start {
            target: self.target(),
            probe: self.probe_info(),
            agent: StartAgent {
                netns: self.agent_netns,
                pid: self.agent_pid,
            },
            allow_net: self.allow_net.clone(),
            allow_net_resolved: self.allow_net_resolved.clone(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            schema: Some(crate::replay::LOG_SCHEMA.to_string()),
            session_id: Some(crate::output::evidence::new_session_id()),
        };
        self.emit(self.started_ns, Record::Start(start));
        self.anchor("start");
    }

    /// The processes there before the capture (attach, container), read from /proc: their
    /// argv is redacted as an exec's is, before anything is written.
    pub fn log_existing(&mut self) {
        for p in &mut self.existing {
            let (argv, n) = crate::judge::redact::redact_argv(&p.argv);
            p.argv = argv;
            self.redactions += n as u64;
        }
        let now = self.clock.boot_now();
        for e in std::mem::take(&mut self.existing) {
            let entry = ProcessEntry {
                pid: e.pid,
                ppid: e.ppid,
                exe: e.exe,
                argv: e.argv,
                argv_truncated: false,
                cwd: e.cwd,
                uid: e.uid,
                netns: e.netns,
                verdict: record::Verdict::of(e.netns, self.agent_netns),
                started_at: self.clock.rfc3339(e.start_ns),
                ended_at: None,
                exit_code: None,
                signal: None,
                running_at_end: true,
                fork_only: false,
                preexisting: true,
                launcher: false,
                comm: None,
                euid: None,
                gid: None,
                mntns: None,
                pidns: None,
                userns: None,
                cgroup_id: None,
                duration_ms: now.saturating_sub(e.start_ns) / 1_000_000,
                tool_call: Default::default(),
                after_step: false,
                output: None,
                tried: Vec::new(),
            };
            self.emit(self.started_ns, Record::Process(entry));
        }
    }

    fn target(&self) -> Target {
        match &self.mode {
            Mode::Run { command, pid } => Target {
                dropped_capabilities: self.dropped_capabilities.clone(),
                ..record::target("run", command.clone(), Some(*pid))
            },
            Mode::Container { id, cgroup } => record::container_target(id.clone(), cgroup.clone()),
            // The attached process's own command line (read from /proc, redacted).
            Mode::Attach { pid, command } => record::target("attach", command.clone(), Some(*pid)),
        }
    }

    fn probe_info(&self) -> ProbeInfo {
        ProbeInfo::new(
            self.probe.file_hook.as_str().into(),
            self.probe.gaps.clone(),
        )
    }

    /// Prints the log's anchor to stderr (the terminal or the CI job's log, which the agent
    /// cannot edit): how many records, and the last one's full hash. `verify --head H
    /// --records N` checks a log against it.
    pub fn anchor(&mut self, when: &str) {
        // With --sign-key, a signed record vouches for the log so far (under the TUI too).
        if when == "checkpoint"
            && let Some(log) = self.log.as_mut()
            && let Err(e) = log.checkpoint(SystemTime::now())
        {
            eprintln!("sandbox-watch: writing a signed checkpoint failed: {e}");
        }
        if !self.anchors {
            return;
        }
        if let Some(log) = self.log.as_mut() {
            let _ = log.flush();
            eprintln!(
                "sandbox-watch: log {}: {} records, head {} ({when})",
                log.path().display(),
                log.records(),
                log.head()
            );
        }
    }

    /// Handles one ring-buffer record.
    pub fn handle(&mut self, bytes: &[u8]) {
        self.events += 1;
        let event = match decode::decode(bytes) {
            Ok(e) => e,
            Err(e) => {
                self.undecodable += 1;
                log::warn!("undecodable record: {e}");
                return;
            }
        };
        self.sequence.note(event.header().seq);
        let at = event.header().ktime_ns;
        match event {
            Event::Exec(mut exec) => {
                let (argv, n) = if exec.argv_truncated {
                    crate::judge::redact::redact_cut_argv(&exec.argv)
                } else {
                    crate::judge::redact::redact_argv(&exec.argv)
                };
                exec.argv = argv;
                self.redactions += n as u64;
                let pid = exec.header.tgid;
                if self.session.processes.live_index(pid).is_none() {
                    // A process whose fork was not seen (one that entered a container).
                    self.settle_reads_of(at, pid);
                }
                self.end_output(at, Some(pid));
                self.emit(at, Record::Exec(from_kernel::exec(&exec)));
            }
            Event::ExecFailed(mut failed) => {
                let (argv, n) = if failed.argv_truncated {
                    crate::judge::redact::redact_cut_argv(&failed.argv)
                } else {
                    crate::judge::redact::redact_argv(&failed.argv)
                };
                failed.argv = argv;
                self.redactions += n as u64;
                self.emit(at, Record::ExecFailed(from_kernel::exec_failed(&failed)));
            }
            Event::Fork {
                header, child_tgid, ..
            } => {
                self.settle_reads_of(at, child_tgid);
                self.emit(at, Record::Fork(from_kernel::fork(&header, child_tgid)));
            }
            Event::Exit { header, exit_code } => {
                let probe = &mut self.probe;
                self.reads.exited(header.tgid, header.start_ns, |key| {
                    probe.take_read_count(key)
                });
                self.end_output(at, Some(header.tgid));
                let exit = from_kernel::exit(&header, exit_code);
                let guarded = self.compat_guard && exit.signal == Some(libc::SIGSYS);
                self.emit(at, Record::Exit(exit));
                if guarded {
                    let t = Tamper {
                        pid: Some(header.tgid),
                        op: "compat".into(),
                        monitor: false,
                        what: Some("SIGSYS".into()),
                        target: None,
                        path: None,
                        summary: crate::launch::guard::summary(header.tgid),
                    };
                    self.emit(at, Record::Tamper(t));
                }
            }
            Event::FileOpen(open) => {
                let entry = from_kernel::open(&self.classifier, &open);
                let (read, credential) = (entry.op == Op::Read, entry.credential);
                let h = &open.header;
                let key = ReadKey {
                    tgid: h.tgid,
                    dev: open.dev,
                    ino: open.ino,
                    start_ns: h.start_ns,
                    generation: open.generation,
                    _pad: 0,
                    name_key: open.name_key,
                };
                let applied = self.emit(at, Record::File(entry));
                if read && credential {
                    // The kernel must send every further open of this inode.
                    self.always_report(open.dev, open.ino);
                }
                // Only a key the kernel put in its map has a count to collect (also one that
                // went in at a repeat, after a full map let room again; and a credential's,
                // counted until the kernel was told to send its every open). Keys a full map
                // refused are not kept: a capture of a million distinct reads kept 32 MB of them.
                if open.read_counted
                    && let Applied::File(a) = applied
                {
                    self.reads.track(key, a.index());
                }
            }
            Event::FileModified {
                header, dev, ino, ..
            } => {
                let dev = crate::state::files::dev_string(dev);
                let files = &self.session.files;
                let path = files
                    .opened_for_write(header.tgid, &dev, ino)
                    .map(|i| files.entries[i].path.clone());
                let m = FileModified {
                    pid: header.tgid,
                    path,
                    dev,
                    ino,
                };
                self.emit(at, Record::FileModified(m));
            }
            Event::Net(net) => {
                let at_text = self.clock.rfc3339(at);
                let agent = self.session.processes.agent_netns;
                for r in from_kernel::net(&mut self.sockets, &net, &at_text, agent) {
                    self.emit(at, r);
                }
            }
            Event::Conn(c) => {
                let at_text = self.clock.rfc3339(at);
                let agent = self.session.processes.agent_netns;
                for r in from_kernel::conn(&mut self.sockets, &c, &at_text, agent) {
                    self.emit(at, r);
                }
            }
            Event::Flow(f) => {
                let at_text = self.clock.rfc3339(at);
                let agent = self.session.processes.agent_netns;
                let r = from_kernel::flow(&f, &at_text, agent);
                self.emit(at, r);
            }
            Event::Link { op, symbolic } => {
                let r = from_kernel::link(&self.classifier, &op, symbolic);
                self.emit(at, r);
            }
            Event::FailedOpen(f) => {
                let r = from_kernel::failed_open(&self.classifier, &f);
                self.emit(at, r);
            }
            Event::Attr(a) => {
                let r = from_kernel::attr(&self.classifier, &a);
                self.emit(at, r);
            }
            Event::Mount(m) => {
                self.emit(at, from_kernel::mount(&m));
            }
            Event::Output(chunk) => {
                let probe = &self.probe;
                self.outputs.chunk(&chunk, self.capture_output, || {
                    probe.lost()[sandbox_watch_common::EventKind::Output as usize]
                });
            }
            Event::Unlink(op) | Event::Rename(op) => {
                let kind = if op.new_path.is_some() {
                    Op::Rename
                } else {
                    Op::Delete
                };
                let r = from_kernel::path_op(&self.classifier, kind, &op);
                self.emit(at, r);
            }
            Event::Tamper(t) => {
                if let Some(r) = crate::judge::tamper::judge(&self.own, &t) {
                    self.emit(at, Record::Tamper(r));
                }
            }
        }
    }

    /// Waits for records until the capture ends.
    pub async fn watch(&mut self, rings: Rings, mut ends: Ends) -> anyhow::Result<()> {
        // SAFETY: the ring buffer owns its fd and outlives the registration (both are dropped
        // together at the end of this function).
        let mut ring = unsafe { AsyncFd::register(rings.events) }.map_err(|e| e.into_parts().1)?;
        // SAFETY: as above.
        let mut output =
            unsafe { AsyncFd::register(rings.output) }.map_err(|e| e.into_parts().1)?;
        raise_priority();
        let mut sigint = signal(SignalKind::interrupt())?;
        let mut sigterm = signal(SignalKind::terminate())?;
        // The terminal went away: end as on SIGTERM (the default would lose the report).
        let mut sighup = signal(SignalKind::hangup())?;
        // The kernel wakes us only when what is waiting passes an eighth of the ring, or another
        // eighth (or at once, for an act on the monitor): the tick drains the rest, and every
        // drain is written at once, so a kill of the monitor loses at most the last 10 ms.
        let mut tick = tokio::time::interval(Duration::from_millis(10));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut checkpoint = tokio::time::interval_at(
            tokio::time::Instant::now() + self.checkpoint,
            self.checkpoint,
        );
        let started = tokio::time::Instant::now();
        let mut deadline = ends.duration.map(|d| started + d);
        let mut agent = ends.agent.take();
        let mut stop = ends.stop.take();
        let mut ticks = 0u64;
        loop {
            let linger_or_duration = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                guard = ring.readable_mut() => {
                    let mut guard = guard?;
                    self.drain(guard.get_inner_mut(), output.get_mut());
                    guard.clear_ready();
                    self.flush();
                }
                guard = output.readable_mut() => {
                    let mut guard = guard?;
                    self.drain(ring.get_mut(), guard.get_inner_mut());
                    guard.clear_ready();
                    self.flush();
                }
                _ = checkpoint.tick() => {
                    self.anchor("checkpoint");
                }
                _ = sigint.recv() => { self.ended_by = "SIGINT".into(); break; }
                _ = sigterm.recv() => { self.ended_by = "SIGTERM".into(); break; }
                _ = sighup.recv() => { self.ended_by = "SIGHUP".into(); break; }
                _ = async { stop.as_mut().unwrap().await }, if stop.is_some() => {
                    self.ended_by = "the TUI was quit".into();
                    break;
                }
                status = async { agent.as_mut().unwrap().await }, if agent.is_some() => {
                    agent = None;
                    if let Ok(status) = status {
                        self.agent_status = Some(status);
                    }
                    let linger = tokio::time::Instant::now() + ends.linger;
                    deadline = Some(deadline.map_or(linger, |d| d.min(linger)));
                    self.ended_by = "the agent exited".into();
                }
                _ = linger_or_duration => {
                    if self.ended_by.is_empty() { self.ended_by = "--duration".into(); }
                    break;
                }
                _ = tick.tick() => {
                    self.drain(ring.get_mut(), output.get_mut());
                    self.flush();
                    ticks += 1;
                    if ticks.is_multiple_of(500) {
                        // Records are short-lived, entries long-lived: hand the holes between
                        // them back to the kernel every few seconds (RSS stays near the data).
                        // SAFETY: malloc_trim only releases free heap memory.
                        unsafe { libc::malloc_trim(0) };
                    }
                    if ticks.is_multiple_of(10) {
                        self.check_outputs(self.clock.boot_now());
                    }
                    if ticks.is_multiple_of(10)
                        && let Some(feed) = &self.feed
                    {
                        let lost = self.probe.lost().iter().sum();
                        let _ = feed.try_send(crate::tui::Feed::Stats { events: self.events, lost });
                    }
                    if ends.when_empty && self.session.processes.live_count() == 0 {
                        self.ended_by = "no traced process is left".into();
                        break;
                    }
                    // A process seeded from /proc that ended before its tgid was in the traced
                    // set left no exit record: once a second, end if every process the records
                    // call alive is gone or a zombie (the records still in the ring are drained
                    // below, so an exit on its way is not lost).
                    if ends.when_empty
                        && ticks.is_multiple_of(100)
                        && self.session.processes.live_pids().all(|pid| !running_in_proc(pid))
                    {
                        self.ended_by =
                            "no traced process is left (one ended before the capture saw it)".into();
                        break;
                    }
                    if ends.container.as_ref().is_some_and(|c| c.finished()) {
                        self.ended_by = "the container's cgroup is empty or gone".into();
                        break;
                    }
                }
            }
        }
        // Whatever the kernel sent before the end still counts.
        self.drain(ring.get_mut(), output.get_mut());
        self.flush();
        self.rings = Some(Rings {
            events: ring.into_inner(),
            output: output.into_inner(),
        });
        // No more draining to give way to (the end's last drain is short).
        backlog::drained(0);
        Ok(())
    }

    /// A new process has `pid`: the processes that had it before ended, and their read counts
    /// are final. They are logged now, as `file_count` records, which name their entry by pid
    /// and path (and inode): at the end the same record would be taken for the new process's
    /// entry of the same file. The end skips them. (One hash lookup for a pid never seen.)
    fn settle_reads_of(&mut self, at: u64, pid: u32) {
        let files = &self.session.files;
        let before: Vec<usize> = files
            .of_pid(pid)
            .filter(|&i| !self.reads.settled(i))
            .collect();
        if before.is_empty() {
            return;
        }
        let probe = &mut self.probe;
        self.reads.pid_reused(pid, |key| probe.take_read_count(key));
        let entries = &self.session.files.entries;
        let counts: Vec<FileCount> = before
            .into_iter()
            .filter_map(|i| file_count(&entries[i], entries[i].count + self.reads.settle(i)))
            .collect();
        for c in counts {
            self.emit(at, Record::FileCount(c));
        }
    }

    /// Handles every record waiting in the two rings, in the order of their sequence numbers
    /// (and says how much the events ring held). A program's output chunks are then handled
    /// after its exec and before its exit or next exec, whichever ring is read first: a record
    /// the kernel made after another of the same task took a higher number and was put in its
    /// ring after that one was committed, so it is never at a ring's head while an earlier
    /// one of its task is still to come.
    fn drain(&mut self, events: &mut RingBuf<MapData>, output: &mut RingBuf<MapData>) {
        let mut bytes = 0;
        loop {
            let from_output = match (head_seq(events), head_seq(output)) {
                (None, None) => break,
                (Some(e), Some(o)) => o < e,
                (e, _) => e.is_none(),
            };
            let ring = if from_output {
                &mut *output
            } else {
                &mut *events
            };
            let Some(item) = ring.next() else { break };
            if !from_output {
                bytes += backlog::record_bytes(item.len());
            }
            self.handle(&item);
        }
        backlog::drained(bytes);
    }

    /// The end: what the kernel counted, what written files hold now, which listeners still
    /// listen, the violations and the end record, all as records; then the report.
    pub fn finish(&mut self) -> Report {
        let sequence = self.last_drain();
        let end_ns = self.clock.boot_now();
        self.end_output(end_ns, None);
        // Nothing more is read from the rings: unmapped now, before the report is built (their
        // data pages are mapped twice, ~8 MB of RSS at 4 MiB, which otherwise added to the
        // report's heap at the capture's peak).
        self.rings = None;
        let probe = &mut self.probe;
        self.reads.collect_all(|key| probe.take_read_count(key));
        let counts: Vec<FileCount> = self
            .session
            .files
            .entries
            .iter()
            .enumerate()
            .filter(|(i, _)| !self.reads.settled(*i))
            .filter_map(|(i, f)| file_count(f, f.count + self.reads.extra(i)))
            .collect();
        for c in counts {
            self.emit(end_ns, Record::FileCount(c));
        }
        // Hashes of what was written, as the files are now (once a path).
        for path in self.session.files.written_paths() {
            let (sha256, sha256_skipped) = crate::state::files::hash_now(&path);
            let h = FileHash {
                path,
                sha256,
                sha256_skipped,
            };
            self.emit(end_ns, Record::FileHash(h));
        }
        for r in from_kernel::unpaired(&mut self.sockets) {
            self.emit(end_ns, r);
        }
        // What each flow carried, as the kernel counted it.
        let mut flows = self.probe.flows();
        flows.sort_by_key(|(k, _)| (k.tgid, k.start_ns));
        for (k, v) in &flows {
            self.emit(end_ns, Record::FlowCount(from_kernel::flow_count(k, v)));
        }
        // Git refs moved and package manifests made: what they held at the end.
        let files = &self.session.files.entries;
        let refs = crate::state::git::updated_refs(files);
        let manifests = crate::state::packages::manifests(files);
        for (path, updates) in refs {
            let (r, redacted) = crate::state::git::read_ref(&path, updates);
            self.redactions += redacted as u64;
            self.emit(end_ns, Record::GitRef(r));
        }
        for (path, pid) in crate::state::git::configs_written(&self.session.files.entries) {
            let (c, redacted) = crate::state::git::read_config(&path, pid);
            self.redactions += redacted as u64;
            self.emit(end_ns, Record::GitConfig(c));
        }
        for path in manifests {
            let (m, redacted) = crate::state::packages::read_meta(&path);
            self.redactions += redacted as u64;
            self.emit(end_ns, Record::PackageMeta(m));
        }
        let listening: Vec<Listening> = self
            .session
            .network
            .listeners()
            .map(|n| Listening {
                pid: n.pid,
                proto: n.proto.clone(),
                addr: n.addr.clone(),
                port: n.port,
                listening_at_end: n.port.is_some_and(|port| {
                    self.session.processes.running(n.pid)
                        && crate::state::network::still_listening(n.pid, &n.proto, port)
                }),
            })
            .collect();
        for l in listening {
            self.emit(end_ns, Record::Listening(l));
        }
        let mut lost_by_kind: BTreeMap<String, u64> = self
            .probe
            .lost()
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(i, n)| (kind_name(i).to_string(), *n))
            .collect();
        if sequence.missing > sequence.dropped {
            lost_by_kind.insert(
                "not_in_the_ring".into(),
                sequence.missing - sequence.dropped,
            );
        }
        let failed_inserts: BTreeMap<String, u64> = self
            .probe
            .failed_inserts()
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(i, n)| (fail_name(i as u32).to_string(), *n))
            .collect();
        for t in sequence_tamper(&sequence) {
            self.emit(end_ns, Record::Tamper(t));
        }
        self.flush();
        self.check_outputs(end_ns);
        let not_followed = failed_inserts.get("TRACED").copied().unwrap_or(0);
        let mut end = End {
            events: self.events,
            lost: sequence.missing.max(sequence.dropped) + not_followed,
            lost_by_kind,
            exit: self.agent_exit(),
            redactions: self.redactions,
            ended_by: self.ended_by.clone(),
            undecodable: self.undecodable,
            sequence: Some(sequence),
            failed_inserts,
            ..End::default()
        };
        // The log ends with what the report concludes: its violations, then the counts.
        let concluded = self
            .session
            .report_with(Some(&end), Some(self.clock.wall(end_ns)));
        for v in &concluded.violations {
            let v = record::Violation {
                violation: Some(v.kind),
                pid: v.pid,
                summary: v.summary.clone(),
                tool_call: v.tool_call.clone(),
            };
            self.emit(end_ns, Record::Violation(v));
        }
        end.complete = concluded.coverage.complete;
        end.verdict = concluded.verdict;
        end.agent = Some(concluded.agent.clone());
        end.processes = concluded.processes.len();
        end.files = concluded.files.len();
        end.network = concluded.network.len();
        end.violations = concluded.violations.len();
        // Freed before the report below is built: two reports of a large session at once were
        // the capture's peak of memory.
        drop(concluded);
        self.emit(end_ns, Record::End(end));
        self.anchor("end");
        if let Some(ocsf) = self.ocsf.as_mut()
            && let Err(e) = ocsf.flush()
        {
            eprintln!("sandbox-watch: writing the OCSF export failed: {e}");
        }
        let mut report = self.session.report();
        report.log = self.log.as_ref().map(|w| LogInfo {
            path: w.path().display().to_string(),
            records: w.records(),
            head: w.head().to_string(),
            chain: None,
            chain_message: None,
        });
        report
    }

    /// The end's last drain: until everything the kernel numbered so far has arrived or is
    /// counted as dropped (a record is numbered just before it is put in the ring), at most
    /// 50 ms. Every record counted was drained before the counter was read, so a number at or
    /// beyond it cannot be the kernel's.
    fn last_drain(&mut self) -> record::SequenceCount {
        let deadline = std::time::Instant::now() + Duration::from_millis(50);
        loop {
            if let Some(mut rings) = self.rings.take() {
                self.drain(&mut rings.events, &mut rings.output);
                self.rings = Some(rings);
            }
            let numbered = self.probe.sequence();
            let dropped: u64 = self.probe.lost().iter().sum();
            let count = self.sequence.count(numbered, dropped);
            if count.received + count.dropped >= count.numbered
                || std::time::Instant::now() >= deadline
            {
                self.flush();
                return count;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The agent's own end: its exit status (run), or the attached process's end.
    fn agent_exit(&self) -> report::Exit {
        match self.agent_status {
            Some(nix::sys::wait::WaitStatus::Exited(_, code)) => report::Exit {
                code: Some(code),
                signal: None,
            },
            Some(nix::sys::wait::WaitStatus::Signaled(_, sig, _)) => report::Exit {
                code: None,
                signal: Some(sig as i32),
            },
            _ => match &self.mode {
                Mode::Attach { pid, .. } => self
                    .session
                    .processes
                    .list
                    .iter()
                    .find(|p| p.pid == *pid && !p.running())
                    .map_or_else(report::Exit::default, |p| report::Exit {
                        code: p.exit_code,
                        signal: p.signal,
                    }),
                _ => report::Exit::default(),
            },
        }
    }
}

/// The drain comes before what it watches: this thread (which drains the ring, and is the
/// only one that does) runs at nice -5 when allowed (root, or CAP_SYS_NICE; otherwise as it
/// is). At nice 0 the bench's capture of 1,000 processes opening files was runnable nearly all
/// the time on 2 busy cores and got about as much CPU as the workload itself: the ring stayed
/// near full, and when an exporter and a collector also wanted the CPU it overflowed. The
/// agent and everything it starts were forked before, at their own priority (a thread's nice
/// value is not shared with the process's other threads).
fn raise_priority() {
    // SAFETY: gettid has no preconditions; setpriority on our own thread id changes only this
    // thread's nice value.
    unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, -5);
    }
}

/// The sequence number of the record at the head of `ring`, which stays there: an item not
/// dropped is not consumed, and the next `next()` gives it again.
fn head_seq(ring: &mut RingBuf<MapData>) -> Option<u64> {
    let item = ring.next()?;
    let seq = decode::seq_of(&item);
    std::mem::forget(item);
    Some(seq)
}

/// A failed-insert counter's name (the map).
fn fail_name(slot: u32) -> &'static str {
    use sandbox_watch_common::fails;
    match slot {
        fails::TRACED => "TRACED",
        fails::READS => "READS",
        fails::MON_TIDS => "MON_TIDS",
        fails::WRITTEN => "WRITTEN",
        fails::NAMES => "NAMES_AT_ENTRY",
        _ => "other",
    }
}

/// What the sequence numbers say was done to the ring: records missing that no drop counter
/// accounts for (the counters were reset, or records were taken out of the ring: its
/// consumer position moved), and records that came twice or with numbers the kernel never
/// gave (put back into it).
fn sequence_tamper(s: &record::SequenceCount) -> Vec<Tamper> {
    let mut out = Vec::new();
    if s.missing != s.dropped {
        let how = if s.missing > s.dropped {
            "its drop counters were reset, or records were taken out of the ring"
        } else {
            "its drop counters were raised by someone"
        };
        out.push(Tamper {
            pid: None,
            op: "sequence".into(),
            monitor: true,
            what: Some("counters".into()),
            target: None,
            path: None,
            summary: format!(
                "the kernel numbered {} records and {} never arrived, but its drop counters say {}: {how}",
                s.numbered, s.missing, s.dropped
            ),
        });
    }
    if s.duplicates > 0 {
        out.push(Tamper {
            pid: None,
            op: "sequence".into(),
            monitor: true,
            what: Some("duplicates".into()),
            target: None,
            path: None,
            summary: format!(
                "{} records arrived twice or with numbers the kernel never gave: records were put back into the ring",
                s.duplicates
            ),
        });
    }
    out
}

/// Whether `pid` runs, as /proc says: not gone, not a zombie, not dead.
fn running_in_proc(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    procfs::process::Process::new(pid)
        .and_then(|p| p.stat())
        .is_ok_and(|s| !matches!(s.state, 'Z' | 'X' | 'x'))
}

/// The `file_count` record of an entry opened `count` times in all, when that is more than
/// its record said (one).
fn file_count(f: &crate::state::files::FileEntry, count: u64) -> Option<FileCount> {
    (count > 1).then(|| FileCount {
        pid: f.pid,
        op: f.op,
        path: f.path.clone(),
        dev: f.dev.clone(),
        ino: f.ino,
        count,
    })
}
