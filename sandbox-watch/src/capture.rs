//! One capture: kernel records → decoder → process and file models → log, then the report.
//!
//! A single task owns the whole pipeline (no locks): it waits on the ring buffer's fd, the
//! agent's exit, signals and a tick, and handles each record as it arrives.
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use aya::maps::{MapData, RingBuf};
use serde_json::{Value, json};
use tokio::io::unix::AsyncFd;
use tokio::signal::unix::{SignalKind, signal};

use crate::judge::classify::Classifier;
use crate::judge::netpolicy::Policy;
use crate::kernel::decode::{self, Event};
use crate::kernel::probe::{Probe, kind_name};
use crate::output::evidence::LogWriter;
use crate::output::report::{self, Agent, Exit, LogInfo, ProbeInfo, ProcessEntry, Report, Target};
use crate::state::files::{Files, Op};
use crate::state::network::Network;
use crate::state::processes::{Model, Process};
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
    Attach {
        pid: u32,
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
    pub model: Model,
    pub files: Files,
    pub network: Network,
    /// `--allow-net`: destinations outside it are `network` violations.
    pub policy: Policy,
    /// The rules as given, for the log.
    pub allow_net: Vec<String>,
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
}

impl Capture {
    pub fn new(
        mode: Mode,
        probe: Probe,
        model: Model,
        classifier: Classifier,
        log: Option<LogWriter>,
    ) -> Capture {
        let clock = Clock::now();
        let started_ns = clock.boot_now();
        Capture {
            mode,
            probe,
            model,
            files: Files::default(),
            network: Network::default(),
            policy: Policy::new(Vec::new()),
            allow_net: Vec::new(),
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
        }
    }

    /// One record: to the evidence log, and as OCSF to `--ocsf` and to the TUI, both with the
    /// log's `seq` and `hash` so each event leads back to its line.
    fn write_log(&mut self, at_ns: u64, kind: &str, fields: Value) {
        let Value::Object(fields) = fields else {
            return;
        };
        let at = self.clock.wall(at_ns);
        let shown = (self.ocsf.is_some() || self.feed.is_some()).then(|| fields.clone());
        let mut logged = None;
        if let Some(log) = self.log.as_mut() {
            let seq = log.records();
            match log.append(at, kind, fields) {
                Ok(hash) => logged = Some((seq, hash)),
                Err(e) => eprintln!("sandbox-watch: writing the log failed: {e}"),
            }
        }
        let Some(mut fields) = shown else { return };
        fields.insert("kind".into(), kind.into());
        fields.insert("at".into(), rfc3339_nanos(at).into());
        if let Some((seq, hash)) = logged {
            fields.insert("seq".into(), seq.into());
            fields.insert("hash".into(), hash.into());
        }
        let record = Value::Object(fields);
        let host = self.hostname.as_deref();
        if let Some(ocsf) = self.ocsf.as_mut()
            && let Some(event) =
                crate::output::ocsf::to_ocsf_on_host(&record, env!("CARGO_PKG_VERSION"), host)
        {
            ocsf.push(event);
        }
        if let Some(feed) = &self.feed {
            let _ = feed.try_send(crate::tui::Feed::Record(record));
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

    /// The first log record: what is watched and how.
    pub fn log_start(&mut self) {
        // Processes there before the capture (attach, container): their argv was read from
        // /proc, and is redacted as an exec's is, before anything is written.
        for p in &mut self.model.processes {
            let (argv, n) = crate::judge::redact::redact_argv(&p.argv);
            p.argv = argv;
            self.redactions += n as u64;
        }
        let fields = json!({
            "target": self.target(),
            "probe": self.probe_info(),
            "agent": { "netns": self.model.agent_netns },
            "allow_net": self.allow_net,
            "version": env!("CARGO_PKG_VERSION"),
            "schema": crate::replay::LOG_SCHEMA,
        });
        self.write_log(self.started_ns, "start", fields);
        for i in 0..self.model.processes.len() {
            let fields = self.process_json(&self.model.processes[i]);
            self.write_log(self.started_ns, "process", fields);
        }
    }

    fn target(&self) -> Target {
        match &self.mode {
            Mode::Run { command, pid } => Target {
                mode: "run".into(),
                command: command.clone(),
                pid: Some(*pid),
                container: None,
            },
            Mode::Container { id, cgroup } => Target {
                mode: "container".into(),
                command: Vec::new(),
                pid: None,
                container: Some(report::ContainerRef {
                    id: id.clone(),
                    cgroup: cgroup.clone(),
                }),
            },
            Mode::Attach { pid } => Target {
                mode: "attach".into(),
                // The attached process's own command line (read from /proc, redacted).
                command: self
                    .model
                    .processes
                    .iter()
                    .find(|p| p.pid == *pid)
                    .map(|p| p.argv.clone())
                    .unwrap_or_default(),
                pid: Some(*pid),
                container: None,
            },
        }
    }

    fn probe_info(&self) -> ProbeInfo {
        ProbeInfo::new(
            self.probe.file_hook.as_str().into(),
            self.probe.gaps.clone(),
        )
    }

    fn process_json(&self, p: &Process) -> Value {
        serde_json::to_value(self.process_entry(p)).unwrap_or(Value::Null)
    }

    fn process_entry(&self, p: &Process) -> ProcessEntry {
        let end = p.ended_ns.unwrap_or_else(|| self.clock.boot_now());
        ProcessEntry {
            pid: p.pid,
            ppid: p.ppid,
            exe: p.exe.clone(),
            argv: p.argv.clone(),
            argv_truncated: p.argv_truncated,
            cwd: p.cwd.clone(),
            uid: p.uid,
            netns: p.netns,
            verdict: self.model.verdict(p),
            started_at: self.clock.rfc3339(p.began_ns),
            ended_at: p.ended_ns.map(|n| self.clock.rfc3339(n)),
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
            duration_ms: end.saturating_sub(p.began_ns) / 1_000_000,
        }
    }

    /// Handles one ring-buffer record.
    pub fn handle(&mut self, bytes: &[u8]) {
        self.events += 1;
        let mut event = match decode::decode(bytes) {
            Ok(e) => e,
            Err(e) => {
                self.undecodable += 1;
                log::warn!("undecodable record: {e}");
                return;
            }
        };
        let at = event.header().ktime_ns;
        if let Event::Exec(exec) = &mut event {
            let (argv, n) = if exec.argv_truncated {
                crate::judge::redact::redact_cut_argv(&exec.argv)
            } else {
                crate::judge::redact::redact_argv(&exec.argv)
            };
            exec.argv = argv;
            self.redactions += n as u64;
        }
        match &event {
            Event::Exec(_) => {
                if let Some(i) = self.model.apply(&event) {
                    let mut fields = self.process_json(&self.model.processes[i]);
                    if let Value::Object(m) = &mut fields {
                        for k in [
                            "ended_at",
                            "exit_code",
                            "signal",
                            "running_at_end",
                            "duration_ms",
                        ] {
                            m.remove(k);
                        }
                    }
                    self.write_log(at, "exec", fields);
                }
            }
            Event::Fork {
                header, child_tgid, ..
            } => {
                self.model.apply(&event);
                let (pid, ppid) = (*child_tgid, header.tgid);
                self.write_log(at, "fork", json!({ "pid": pid, "ppid": ppid }));
            }
            Event::Exit { header, .. } => {
                let (tgid, start) = (header.tgid, header.start_ns);
                let probe = &mut self.probe;
                self.files
                    .collect_read_counts(tgid, start, |key| probe.take_read_count(key));
                if let Some(i) = self.model.apply(&event) {
                    let p = &self.model.processes[i];
                    let fields =
                        json!({ "pid": p.pid, "exit_code": p.exit_code, "signal": p.signal });
                    self.write_log(at, "exit", fields);
                }
            }
            Event::FileOpen(open) => {
                let start = open.header.start_ns;
                let added = self.files.open(&self.classifier, start, open);
                if let Some(key) = added.always_report {
                    self.probe.always_report(key);
                }
                if let Some(record) = added.record {
                    let fields = serde_json::to_value(&record).unwrap_or(Value::Null);
                    self.write_log(at, "file", fields);
                }
            }
            Event::Net(net) => {
                // The log gets every event (count 1); the report aggregates.
                let at_text = self.clock.rfc3339(at);
                let changed = self.network.apply(net, &at_text, self.model.agent_netns);
                if net.op == crate::kernel::decode::NetOp::ConnectResult {
                    if let Some(i) = changed {
                        let e = &self.network.entries[i];
                        let fields = json!({ "pid": e.pid, "addr": e.addr, "port": e.port, "result": e.result });
                        self.write_log(at, "net_result", fields);
                    }
                } else if let Some(i) = changed {
                    let mut e = self.network.entries[i].clone();
                    e.count = 1;
                    e.first_at = at_text.clone();
                    e.last_at = at_text;
                    let fields = serde_json::to_value(&e).unwrap_or(Value::Null);
                    self.write_log(at, "net", fields);
                }
            }
            Event::Link { op, symbolic } => {
                match self.files.link(&self.classifier, op, *symbolic) {
                    Some(i) => self.log_file(at, i),
                    None => self.log_missing(at, Op::Create, op),
                }
            }
            Event::FailedOpen(f) => {
                if let Some(i) = self.files.failed_open(&self.classifier, f) {
                    self.log_file(at, i);
                }
            }
            Event::Unlink(op) | Event::Rename(op) => {
                let kind = if op.new_path.is_some() {
                    Op::Rename
                } else {
                    Op::Delete
                };
                match self.files.path_op(&self.classifier, kind, op) {
                    Some(i) => self.log_file(at, i),
                    None => self.log_missing(at, kind, op),
                }
            }
        }
    }

    /// Waits for records until the capture ends.
    pub async fn watch(&mut self, ring: RingBuf<MapData>, mut ends: Ends) -> anyhow::Result<()> {
        // SAFETY: the ring buffer owns its fd and outlives the registration (both are dropped
        // together at the end of this function).
        let mut ring = unsafe { AsyncFd::register(ring) }.map_err(|e| e.into_parts().1)?;
        let mut sigint = signal(SignalKind::interrupt())?;
        let mut sigterm = signal(SignalKind::terminate())?;
        // The kernel wakes us only when an eighth of the ring is waiting: the tick drains the rest.
        let mut tick = tokio::time::interval(Duration::from_millis(100));
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
                    self.drain(guard.get_inner_mut());
                    guard.clear_ready();
                }
                _ = sigint.recv() => { self.ended_by = "SIGINT".into(); break; }
                _ = sigterm.recv() => { self.ended_by = "SIGTERM".into(); break; }
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
                    self.drain(ring.get_mut());
                    self.flush();
                    ticks += 1;
                    if ticks.is_multiple_of(50) {
                        // Records are short-lived, entries long-lived: hand the holes between
                        // them back to the kernel every few seconds (RSS stays near the data).
                        // SAFETY: malloc_trim only releases free heap memory.
                        unsafe { libc::malloc_trim(0) };
                    }
                    if let Some(feed) = &self.feed {
                        let lost = self.probe.lost().iter().sum();
                        let _ = feed.try_send(crate::tui::Feed::Stats { events: self.events, lost });
                    }
                    if ends.when_empty && self.model.live_count() == 0 {
                        self.ended_by = "no traced process is left".into();
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
        self.drain(ring.get_mut());
        Ok(())
    }

    /// Logs the file entry an event made or counted, as that one event (count 1): `file`, or
    /// `file_failed` for an operation that failed.
    fn log_file(&mut self, at: u64, i: usize) {
        let mut e = self.files.entries[i].clone();
        e.count = 1;
        let record = if e.result.is_some() {
            "file_failed"
        } else {
            "file"
        };
        let fields = serde_json::to_value(&e).unwrap_or(Value::Null);
        self.write_log(at, record, fields);
    }

    /// A delete, rename or link that failed because there was nothing there: no entry, but the
    /// log keeps it.
    fn log_missing(&mut self, at: u64, kind: Op, op: &crate::kernel::decode::PathOp) {
        let fields = json!({ "pid": op.header.tgid, "op": kind, "path": op.path,
            "new_path": op.new_path, "result": crate::state::files::errno_name(op.result) });
        self.write_log(at, "file_failed", fields);
    }

    /// Handles every record waiting in the ring buffer.
    fn drain(&mut self, ring: &mut RingBuf<MapData>) {
        while let Some(item) = ring.next() {
            self.handle(&item);
        }
    }

    /// Builds the report; writes the log's `end` record.
    pub fn finish(&mut self) -> Report {
        let end_ns = self.clock.boot_now();
        let probe = &mut self.probe;
        self.files
            .collect_all_read_counts(|key| probe.take_read_count(key));
        self.files.hash_written();
        self.network.reverdict(self.model.agent_netns);
        let model = &self.model;
        self.network.mark_listening_at_end(|pid| {
            model.processes.iter().any(|p| p.pid == pid && p.running())
        });
        let lost_by_kind: BTreeMap<String, u64> = self
            .probe
            .lost()
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(i, n)| (kind_name(i).to_string(), *n))
            .collect();
        let exit = match self.agent_status {
            Some(nix::sys::wait::WaitStatus::Exited(_, code)) => Exit {
                code: Some(code),
                signal: None,
            },
            Some(nix::sys::wait::WaitStatus::Signaled(_, sig, _)) => Exit {
                code: None,
                signal: Some(sig as i32),
            },
            // attach: the attached process's own end, when it ended.
            _ => match &self.mode {
                Mode::Attach { pid } => self
                    .model
                    .processes
                    .iter()
                    .find(|p| p.pid == *pid && !p.running())
                    .map_or_else(Exit::default, |p| Exit {
                        code: p.exit_code,
                        signal: p.signal,
                    }),
                _ => Exit::default(),
            },
        };
        let mut report = report::assemble(
            report::Parts {
                target: self.target(),
                agent: Agent {
                    pid: self.model.agent_pid,
                    netns: self.model.agent_netns,
                },
                started_at: self.clock.rfc3339(self.started_ns),
                ended_at: self.clock.rfc3339(end_ns),
                exit,
                probe: self.probe_info(),
                events: self.events,
                lost_by_kind,
                undecodable: self.undecodable,
                processes: self
                    .model
                    .processes
                    .iter()
                    .map(|p| self.process_entry(p))
                    .collect(),
                files: std::mem::take(&mut self.files.entries),
                network: std::mem::take(&mut self.network.entries),
                redactions: self.redactions,
            },
            &self.policy,
        );
        // The log ends with what the report concluded: counts the events did not carry, the
        // violations, and the end record.
        for f in report.files.iter().filter(|f| f.count > 1) {
            let fields = json!({ "pid": f.pid, "op": f.op, "path": f.path, "dev": f.dev, "ino": f.ino, "count": f.count });
            self.write_log(end_ns, "file_count", fields);
        }
        // Hashes of what was written, as the files were at the end (once a path).
        let mut hashed = std::collections::HashSet::new();
        for f in &report.files {
            let path = f.new_path.as_ref().unwrap_or(&f.path);
            if (f.sha256.is_some() || f.sha256_skipped.is_some()) && hashed.insert(path.clone()) {
                let fields =
                    json!({ "path": path, "sha256": f.sha256, "sha256_skipped": f.sha256_skipped });
                self.write_log(end_ns, "file_hash", fields);
            }
        }
        for n in report.network.iter() {
            if let Some(listening) = n.listening_at_end {
                let fields = json!({ "pid": n.pid, "proto": n.proto, "addr": n.addr, "port": n.port, "listening_at_end": listening });
                self.write_log(end_ns, "listening", fields);
            }
        }
        // `kind` names the record in the log: the violation's own kind is `violation` there.
        for v in &report.violations {
            let fields = json!({ "violation": v.kind, "pid": v.pid, "summary": v.summary });
            self.write_log(end_ns, "violation", fields);
        }
        let end_fields = json!({
            "events": report.coverage.events,
            "lost": report.coverage.lost,
            "lost_by_kind": report.coverage.lost_by_kind,
            "complete": report.coverage.complete,
            "verdict": report.verdict,
            "exit": report.exit,
            "agent": report.agent,
            "processes": report.processes.len(),
            "files": report.files.len(),
            "network": report.network.len(),
            "violations": report.violations.len(),
            "redactions": report.redactions,
            "ended_by": self.ended_by,
        });
        let end_at = self.clock.wall(end_ns);
        if let Some(ocsf) = self.ocsf.as_mut()
            && let Err(e) = ocsf.flush()
        {
            eprintln!("sandbox-watch: writing the OCSF export failed: {e}");
        }
        report.log = self.log.as_mut().map(|w| {
            let Value::Object(fields) = end_fields else {
                unreachable!("json! of an object")
            };
            if let Err(e) = w.finish(end_at, fields) {
                eprintln!("sandbox-watch: writing the log failed: {e}");
            }
            LogInfo {
                path: w.path().display().to_string(),
                records: w.records(),
                head: w.head().to_string(),
                chain: None,
                chain_message: None,
            }
        });
        report
    }
}
