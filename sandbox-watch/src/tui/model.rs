//! What the TUI knows: log records turned into the rows of the five views.
//!
//! Everything here is bounded: the flat lists keep their newest [`LIST_CAP`] rows, the process
//! table stops adding past [`PROC_CAP`] (and counts what it left out), and each row keeps the
//! compact JSON of its record (shared with the Log view) for the details pane. Nothing here
//! knows about terminals.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use serde_json::Value;

/// Rows kept per flat list (files, network, alerts, log); older ones are dropped.
pub(crate) const LIST_CAP: usize = 100_000;
/// Processes kept; past this, new ones are counted but not shown.
pub(crate) const PROC_CAP: usize = 100_000;
/// Records kept per process for its details (fork, exec…, exit).
const PROC_RECORDS_CAP: usize = 16;

/// A record's verdict field.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Verdict {
    Inside,
    Outside,
    Unknown,
}

impl Verdict {
    pub(crate) fn of(v: &Value) -> Self {
        match str_field(v, "verdict") {
            Some("inside") => Verdict::Inside,
            Some("outside") => Verdict::Outside,
            _ => Verdict::Unknown,
        }
    }

    pub(crate) fn word(self) -> &'static str {
        match self {
            Verdict::Inside => "inside",
            Verdict::Outside => "outside",
            Verdict::Unknown => "",
        }
    }
}

// ---------------------------------------------------------------------------------------------
// JSON helpers: every field may be missing or of the wrong type; then it renders as blank.

pub(crate) fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

pub(crate) fn u64_field(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

pub(crate) fn i64_field(v: &Value, key: &str) -> Option<i64> {
    v.get(key).and_then(Value::as_i64)
}

pub(crate) fn bool_field(v: &Value, key: &str) -> bool {
    v.get(key).and_then(Value::as_bool).unwrap_or(false)
}

pub(crate) fn pid_field(v: &Value, key: &str) -> Option<u32> {
    u64_field(v, key).and_then(|n| u32::try_from(n).ok())
}

/// The record's `at`, in nanoseconds since the epoch.
pub(crate) fn at_ns(v: &Value) -> Option<i64> {
    str_field(v, "at").and_then(parse_rfc3339_ns)
}

/// Parses `2026-11-30T11:20:51.285371778Z` (or with a `+hh:mm` offset) to nanoseconds since the
/// epoch. None for anything else.
pub(crate) fn parse_rfc3339_ns(s: &str) -> Option<i64> {
    crate::time::parse_ns(s).and_then(|ns| i64::try_from(ns).ok())
}

/// An argv as a person would type it: arguments with spaces or quotes are single-quoted.
pub(crate) fn join_argv(v: Option<&Value>) -> String {
    let Some(Value::Array(args)) = v else {
        return String::new();
    };
    let mut out = String::new();
    for (i, a) in args.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let s = match a {
            Value::String(s) => s.as_str(),
            _ => "?",
        };
        let plain = !s.is_empty()
            && s.bytes()
                .all(|c| c.is_ascii_alphanumeric() || b"-_./=:,+@%^~".contains(&c) || c >= 0x80);
        if plain {
            out.push_str(s);
        } else {
            out.push('\'');
            out.push_str(&s.replace('\'', "'\\''"));
            out.push('\'');
        }
    }
    out
}

/// The name of a signal number, for the exit column.
pub(crate) fn signal_name(n: i64) -> String {
    i32::try_from(n)
        .ok()
        .and_then(|n| nix::sys::signal::Signal::try_from(n).ok())
        .map_or_else(|| format!("SIG{n}"), |s| s.as_str().to_string())
}

// ---------------------------------------------------------------------------------------------
// A bounded list addressed by ids that stay valid while older rows are dropped.

pub(crate) struct Rows<T> {
    items: VecDeque<T>,
    first: u64,
    cap: usize,
}

impl<T> Rows<T> {
    pub(crate) fn new(cap: usize) -> Self {
        Rows {
            items: VecDeque::new(),
            first: 0,
            cap,
        }
    }

    pub(crate) fn push(&mut self, t: T) {
        if self.items.len() == self.cap {
            self.items.pop_front();
            self.first += 1;
        }
        self.items.push_back(t);
    }

    /// Takes every row out; ids go on from where they were, so nothing that holds an id
    /// (a selection, a filter's matches, a pause) can point at a row that came later.
    pub(crate) fn take_all(&mut self) -> Vec<T> {
        self.first = self.end();
        self.items.drain(..).collect()
    }

    /// The id of the oldest row kept (= how many were dropped).
    pub(crate) fn first(&self) -> u64 {
        self.first
    }

    /// One past the id of the newest row (= how many were ever pushed).
    pub(crate) fn end(&self) -> u64 {
        self.first + self.items.len() as u64
    }

    pub(crate) fn get(&self, id: u64) -> Option<&T> {
        let i = id.checked_sub(self.first)?;
        self.items.get(usize::try_from(i).ok()?)
    }

    pub(crate) fn get_mut(&mut self, id: u64) -> Option<&mut T> {
        let i = id.checked_sub(self.first)?;
        self.items.get_mut(usize::try_from(i).ok()?)
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }
}

// ---------------------------------------------------------------------------------------------
// Processes: a tree by ppid.

pub(crate) struct Proc {
    pub pid: u32,
    pub ppid: Option<u32>,
    pub parent: Option<usize>,
    pub children: Vec<usize>,
    /// The argv, joined for display; a fork without exec shows its parent's.
    pub argv: String,
    /// True while the process only forked (argv is the parent's).
    pub fork_only: bool,
    pub started_ns: Option<i64>,
    pub ended_ns: Option<i64>,
    pub exit_code: Option<i64>,
    pub signal: Option<i64>,
    pub verdict: Verdict,
    pub launcher: bool,
    pub preexisting: bool,
    /// Its records (fork, exec…, exit), compact JSON, for the details pane.
    pub records: Vec<Arc<str>>,
    pub records_dropped: usize,
}

impl Proc {
    pub(crate) fn running(&self) -> bool {
        self.ended_ns.is_none() && self.exit_code.is_none() && self.signal.is_none()
    }

    pub(crate) fn search_matches(&self, pat: &str) -> bool {
        contains_ci(&self.argv, pat) || contains_ci(&self.pid.to_string(), pat)
    }

    fn add_record(&mut self, raw: &Arc<str>) {
        if self.records.len() < PROC_RECORDS_CAP {
            self.records.push(raw.clone());
        } else {
            self.records_dropped += 1;
        }
    }
}

#[derive(Default)]
pub(crate) struct Processes {
    pub procs: Vec<Proc>,
    by_pid: HashMap<u32, usize>,
    roots: Vec<usize>,
    /// Tree order: (index in `procs`, depth). Rebuilt lazily when `dirty`.
    pub order: Vec<(u32, u16)>,
    /// Index in `procs` → position in `order`.
    pub pos_of: Vec<u32>,
    pub dirty: bool,
    /// Processes seen but not stored (past [`PROC_CAP`]).
    pub not_stored: u64,
}

impl Processes {
    pub(crate) fn running(&self, pid: u32) -> Option<usize> {
        self.by_pid
            .get(&pid)
            .copied()
            .filter(|&i| self.procs[i].running())
    }

    pub(crate) fn by_pid(&self, pid: u32) -> Option<&Proc> {
        self.by_pid.get(&pid).map(|&i| &self.procs[i])
    }

    fn create(&mut self, pid: u32, ppid: Option<u32>, at: Option<i64>) -> Option<usize> {
        if self.procs.len() >= PROC_CAP {
            self.not_stored += 1;
            return None;
        }
        let parent = ppid.and_then(|pp| self.by_pid.get(&pp).copied());
        let idx = self.procs.len();
        let (argv, fork_only) = match parent {
            Some(p) => (self.procs[p].argv.clone(), true),
            None => (String::new(), true),
        };
        self.procs.push(Proc {
            pid,
            ppid,
            parent,
            children: Vec::new(),
            argv,
            fork_only,
            started_ns: at,
            ended_ns: None,
            exit_code: None,
            signal: None,
            verdict: Verdict::Unknown,
            launcher: false,
            preexisting: false,
            records: Vec::new(),
            records_dropped: 0,
        });
        match parent {
            Some(p) => self.procs[p].children.push(idx),
            None => self.roots.push(idx),
        }
        self.by_pid.insert(pid, idx);
        self.dirty = true;
        Some(idx)
    }

    pub(crate) fn fork(&mut self, v: &Value, raw: &Arc<str>) {
        let Some(pid) = pid_field(v, "pid") else {
            return;
        };
        let idx = match self.running(pid) {
            Some(i) => Some(i),
            None => self.create(pid, pid_field(v, "ppid"), at_ns(v)),
        };
        if let Some(i) = idx {
            self.procs[i].add_record(raw);
        }
    }

    /// An `exec` record, or a `process` record (a process seeded at attach).
    pub(crate) fn exec(&mut self, v: &Value, raw: &Arc<str>) -> Option<usize> {
        let pid = pid_field(v, "pid")?;
        let started = str_field(v, "started_at")
            .and_then(parse_rfc3339_ns)
            .or_else(|| at_ns(v));
        let i = match self.running(pid) {
            Some(i) => i,
            None => self.create(pid, pid_field(v, "ppid"), started)?,
        };
        let p = &mut self.procs[i];
        let argv = join_argv(v.get("argv"));
        if !argv.is_empty() {
            p.argv = argv;
            p.fork_only = false;
        } else if let Some(comm) = str_field(v, "comm") {
            p.argv = format!("[{comm}]");
            p.fork_only = false;
        }
        if p.ppid.is_none() {
            p.ppid = pid_field(v, "ppid");
        }
        p.verdict = Verdict::of(v);
        p.launcher = bool_field(v, "launcher");
        p.preexisting |= bool_field(v, "preexisting") || str_field(v, "kind") == Some("process");
        if p.started_ns.is_none() {
            p.started_ns = started;
        }
        if let Some(code) = i64_field(v, "exit_code") {
            p.exit_code = Some(code);
        }
        if let Some(sig) = i64_field(v, "signal") {
            p.signal = Some(sig);
        }
        if let Some(end) = str_field(v, "ended_at").and_then(parse_rfc3339_ns) {
            p.ended_ns = Some(end);
        }
        p.add_record(raw);
        // The argv changed: the tree's filter matches must be looked at again.
        self.dirty = true;
        Some(i)
    }

    pub(crate) fn exit(&mut self, v: &Value, raw: &Arc<str>) {
        let Some(i) = pid_field(v, "pid").and_then(|pid| self.running(pid)) else {
            return;
        };
        let p = &mut self.procs[i];
        p.exit_code = i64_field(v, "exit_code");
        p.signal = i64_field(v, "signal");
        p.ended_ns = at_ns(v).or(p.started_ns).or(Some(0));
        p.add_record(raw);
    }

    /// Rebuilds the tree order (depth first, children in the order they appeared).
    pub(crate) fn flatten(&mut self) {
        self.order.clear();
        self.pos_of.clear();
        self.pos_of.resize(self.procs.len(), 0);
        let mut stack: Vec<(usize, u16)> = self.roots.iter().rev().map(|&r| (r, 0)).collect();
        while let Some((i, depth)) = stack.pop() {
            self.pos_of[i] = self.order.len() as u32;
            self.order.push((i as u32, depth));
            for &c in self.procs[i].children.iter().rev() {
                stack.push((c, depth.saturating_add(1)));
            }
        }
        self.dirty = false;
    }
}

// ---------------------------------------------------------------------------------------------
// Flat rows.

pub(crate) struct FileRow {
    pub pid: Option<u32>,
    pub op: String,
    pub path: String,
    pub new_path: Option<String>,
    pub fs: String,
    pub credential: bool,
    pub persistence: bool,
    pub count: u64,
    /// For `file_failed`: the error (EACCES; a number in older logs).
    pub failed: Option<String>,
    pub raw: Arc<str>,
}

impl FileRow {
    pub(crate) fn from_record(v: &Value, raw: &Arc<str>) -> Self {
        let failed = (str_field(v, "kind") == Some("file_failed")).then(|| result_text(v));
        FileRow {
            pid: pid_field(v, "pid"),
            op: str_field(v, "op").unwrap_or("").to_string(),
            path: str_field(v, "path").unwrap_or("").to_string(),
            new_path: str_field(v, "new_path").map(str::to_string),
            fs: str_field(v, "fs").unwrap_or("").to_string(),
            credential: bool_field(v, "credential"),
            persistence: bool_field(v, "persistence"),
            count: u64_field(v, "count").unwrap_or(1),
            failed,
            raw: raw.clone(),
        }
    }

    pub(crate) fn search_matches(&self, pat: &str) -> bool {
        contains_ci(&self.path, pat)
            || self
                .new_path
                .as_deref()
                .is_some_and(|p| contains_ci(p, pat))
            || contains_ci(&self.op, pat)
            || contains_ci(&self.fs, pat)
            || self.pid.is_some_and(|p| contains_ci(&p.to_string(), pat))
            || (self.credential && contains_ci("credential", pat))
            || (self.persistence && contains_ci("persistence", pat))
    }
}

pub(crate) struct NetRow {
    pub pid: Option<u32>,
    pub op: String,
    pub proto: String,
    /// `addr:port`, `[v6]:port`, a unix socket's path, or `name (dns via addr:port)`.
    pub dest: String,
    /// For matching a later `net_result`.
    pub addr: Option<String>,
    pub port: Option<u64>,
    pub result: String,
    pub verdict: Verdict,
    pub listening_at_end: bool,
    pub count: u64,
    pub raw: Arc<str>,
    /// Later records about this row (`net_result`: the outcome of a connect in progress).
    pub later: Vec<Arc<str>>,
}

impl NetRow {
    pub(crate) fn from_record(v: &Value, raw: &Arc<str>) -> Self {
        let addr = match v.get("addr") {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Null) | None => None,
            Some(other) => Some(other.to_string()),
        };
        let port = u64_field(v, "port");
        let hostport = match (&addr, port) {
            (Some(a), Some(p)) if a.contains(':') => format!("[{a}]:{p}"),
            (Some(a), Some(p)) => format!("{a}:{p}"),
            (Some(a), None) => a.clone(),
            (None, Some(p)) => format!(":{p}"),
            (None, None) => String::new(),
        };
        let dest = match (str_field(v, "path"), str_field(v, "name")) {
            (Some(path), _) => path.to_string(),
            (None, Some(name)) if hostport.is_empty() => name.to_string(),
            (None, Some(name)) => format!("{name} (dns via {hostport})"),
            (None, None) => hostport,
        };
        let result = match v.get("result") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => String::new(),
        };
        NetRow {
            pid: pid_field(v, "pid"),
            op: str_field(v, "op").unwrap_or("").to_string(),
            proto: str_field(v, "proto").unwrap_or("").to_string(),
            dest,
            addr,
            port,
            result,
            verdict: Verdict::of(v),
            listening_at_end: bool_field(v, "listening_at_end"),
            count: u64_field(v, "count").unwrap_or(1),
            raw: raw.clone(),
            later: Vec::new(),
        }
    }

    /// Refused, or failed with an error (not ok, still in progress, or sent).
    pub(crate) fn refused(&self) -> bool {
        !matches!(self.result.as_str(), "" | "ok" | "in_progress" | "sent")
    }

    /// Whether a `net_result` record is about this row.
    pub(crate) fn is_result_of(&self, v: &Value) -> bool {
        let addr = v.get("addr").and_then(Value::as_str);
        self.op == "connect"
            && self.pid == pid_field(v, "pid")
            && self.addr.as_deref() == addr
            && self.port == u64_field(v, "port")
    }

    pub(crate) fn search_matches(&self, pat: &str) -> bool {
        contains_ci(&self.dest, pat)
            || contains_ci(&self.op, pat)
            || contains_ci(&self.proto, pat)
            || contains_ci(&self.result, pat)
            || contains_ci(self.verdict.word(), pat)
            || self.pid.is_some_and(|p| contains_ci(&p.to_string(), pat))
    }
}

/// What an alert is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum AlertKind {
    Outside,
    Credential,
    Persistence,
    Network,
    Lost,
    Leftover,
    /// Something the hook cannot see on this kernel (from `start.probe.gaps`).
    Gap,
    Other(String),
}

impl AlertKind {
    pub(crate) fn name(&self) -> &str {
        match self {
            AlertKind::Outside => "outside",
            AlertKind::Credential => "credential",
            AlertKind::Persistence => "persistence",
            AlertKind::Network => "network",
            AlertKind::Lost => "lost",
            AlertKind::Leftover => "leftover",
            AlertKind::Gap => "gap",
            AlertKind::Other(s) => s,
        }
    }

    pub(crate) fn parse(s: &str) -> Self {
        match s {
            "outside" => AlertKind::Outside,
            "credential" => AlertKind::Credential,
            "persistence" => AlertKind::Persistence,
            "network" => AlertKind::Network,
            "lost" => AlertKind::Lost,
            "leftover" => AlertKind::Leftover,
            "gap" => AlertKind::Gap,
            other => AlertKind::Other(other.to_string()),
        }
    }

    /// A `violation` record's kind. The log writer puts the record kind in `kind`, so the
    /// violation's own kind may be under `violation` (or `type`), or only in the summary.
    pub(crate) fn of_violation(v: &Value) -> Self {
        for key in ["violation", "violation_kind", "type"] {
            if let Some(s) = str_field(v, key) {
                return AlertKind::parse(s);
            }
        }
        let summary = str_field(v, "summary").unwrap_or("");
        if summary.contains("--allow-net") {
            AlertKind::Network
        } else if summary.contains(" credential ") {
            AlertKind::Credential
        } else if summary.contains("net namespace") || summary.contains("outside") {
            AlertKind::Outside
        } else if summary.contains("still running") {
            AlertKind::Leftover
        } else if summary.contains("events lost") {
            AlertKind::Lost
        } else if summary.starts_with("pid ")
            && [" wrote ", " created ", " renamed ", " deleted "]
                .iter()
                .any(|w| summary.contains(w))
        {
            AlertKind::Persistence
        } else if summary.contains("connect") || summary.contains("listen") {
            AlertKind::Network
        } else {
            AlertKind::Other("violation".into())
        }
    }
}

pub(crate) struct Alert {
    pub at_ns: Option<i64>,
    pub kind: AlertKind,
    pub pid: Option<u32>,
    pub summary: String,
    /// False for alerts derived live from exec/net/file records, true for `violation` records
    /// (the capture's final list, written at the end).
    pub violation: bool,
    pub raw: Option<Arc<str>>,
}

impl Alert {
    pub(crate) fn search_matches(&self, pat: &str) -> bool {
        contains_ci(&self.summary, pat) || contains_ci(self.kind.name(), pat)
    }
}

pub(crate) struct LogRow {
    pub seq: Option<u64>,
    pub at_ns: Option<i64>,
    pub kind: String,
    pub summary: String,
    pub raw: Arc<str>,
}

impl LogRow {
    pub(crate) fn search_matches(&self, pat: &str) -> bool {
        contains_ci(&self.summary, pat) || contains_ci(&self.raw, pat)
    }
}

/// One line saying what a record is, for the Log view.
pub(crate) fn summarize(v: &Value) -> String {
    let kind = str_field(v, "kind").unwrap_or("");
    let pid = pid_field(v, "pid")
        .map(|p| p.to_string())
        .unwrap_or_default();
    match kind {
        "start" => {
            let target = v.get("target").map(target_text).unwrap_or_default();
            let hook = v
                .get("probe")
                .and_then(|p| str_field(p, "file_open"))
                .unwrap_or("?");
            let gaps = v
                .get("probe")
                .and_then(|p| p.get("gaps"))
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            format!("{target} · file hook {hook} · {gaps} gap(s)")
        }
        "process" | "exec" => {
            let ppid = pid_field(v, "ppid")
                .map(|p| p.to_string())
                .unwrap_or_default();
            let verdict = Verdict::of(v);
            let mark = if verdict == Verdict::Outside {
                "  [OUTSIDE]"
            } else {
                ""
            };
            let pre = if kind == "process" { "running " } else { "" };
            format!(
                "{pre}pid {pid} (ppid {ppid}) {}{mark}",
                join_argv(v.get("argv"))
            )
        }
        "fork" => format!(
            "pid {pid} forked from {}",
            pid_field(v, "ppid")
                .map(|p| p.to_string())
                .unwrap_or_default()
        ),
        "exit" => match (i64_field(v, "exit_code"), i64_field(v, "signal")) {
            (_, Some(sig)) => format!("pid {pid} killed by {}", signal_name(sig)),
            (Some(code), None) => format!("pid {pid} exit {code}"),
            (None, None) => format!("pid {pid} exited"),
        },
        "file" => {
            let op = str_field(v, "op").unwrap_or("");
            let path = str_field(v, "path").unwrap_or("");
            let mut s = format!("pid {pid} {op} {path}");
            if let Some(np) = str_field(v, "new_path") {
                s.push_str(" → ");
                s.push_str(np);
            }
            if bool_field(v, "credential") {
                s.push_str("  [credential]");
            }
            if bool_field(v, "persistence") {
                s.push_str("  [persistence]");
            }
            s
        }
        "file_failed" => format!(
            "pid {pid} {} {} failed ({})",
            str_field(v, "op").unwrap_or(""),
            str_field(v, "path").unwrap_or(""),
            result_text(v)
        ),
        "net" => {
            let r = NetRow::from_record(v, &Arc::from(""));
            let mut s = format!("pid {pid} {} {} {} {}", r.op, r.proto, r.dest, r.result);
            if r.verdict == Verdict::Outside {
                s.push_str("  [OUTSIDE]");
            }
            s
        }
        "net_result" => {
            let r = NetRow::from_record(v, &Arc::from(""));
            format!("pid {pid} connect {} → {}", r.dest, r.result)
        }
        "file_count" => format!(
            "pid {pid} read {} {} times in all",
            str_field(v, "path").unwrap_or(""),
            u64_field(v, "count")
                .map(|n| n.to_string())
                .unwrap_or_default()
        ),
        "violation" => str_field(v, "summary").unwrap_or("").to_string(),
        "file_hash" => {
            let path = str_field(v, "path").unwrap_or("");
            match (str_field(v, "sha256"), str_field(v, "sha256_skipped")) {
                (Some(sum), _) => format!("{path} at the end: sha256 {sum}"),
                (None, Some(why)) => format!("{path} at the end: not hashed, {why}"),
                (None, None) => format!("{path} at the end"),
            }
        }
        "listening" => {
            let r = NetRow::from_record(v, &Arc::from(""));
            let still = if bool_field(v, "listening_at_end") {
                "still listening"
            } else {
                "no longer listening"
            };
            format!("pid {pid} {} {} {still} at the end", r.proto, r.dest)
        }
        "end" => {
            let by = str_field(v, "ended_by").unwrap_or("?");
            let verdict = str_field(v, "verdict").unwrap_or("?");
            let events = u64_field(v, "events")
                .map(|n| n.to_string())
                .unwrap_or_default();
            let lost = u64_field(v, "lost")
                .map(|n| n.to_string())
                .unwrap_or_default();
            format!("ended: {by} · verdict {verdict} · {events} events, {lost} lost")
        }
        _ => {
            // Unknown kind: its own fields, compact.
            let mut m = match v {
                Value::Object(m) => m.clone(),
                _ => return v.to_string(),
            };
            for k in ["seq", "prev", "hash", "at", "kind"] {
                m.remove(k);
            }
            let s = Value::Object(m).to_string();
            s.chars().take(300).collect()
        }
    }
}

/// A record's `result`: a name (EACCES), or the number older logs wrote.
fn result_text(v: &Value) -> String {
    match v.get("result") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

/// `run sh agent.sh`, `attach pid 1234`, `container abc`.
pub(crate) fn target_text(t: &Value) -> String {
    let mode = str_field(t, "mode").unwrap_or("");
    let command = join_argv(t.get("command"));
    let mut parts = vec![];
    if !mode.is_empty() {
        parts.push(mode.to_string());
    }
    if !command.is_empty() {
        parts.push(command);
    }
    if let Some(pid) = pid_field(t, "pid") {
        parts.push(format!("pid {pid}"));
    }
    match t.get("container") {
        Some(Value::String(c)) => parts.push(format!("container {c}")),
        Some(c @ Value::Object(_)) => {
            let id = str_field(c, "id").unwrap_or("?");
            parts.push(format!("container {}", id.get(..12).unwrap_or(id)));
        }
        _ => {}
    }
    parts.join(" ")
}

/// Case-insensitive (ASCII) substring test; `pat` must already be lower-case.
pub(crate) fn contains_ci(hay: &str, pat: &str) -> bool {
    if pat.is_empty() {
        return true;
    }
    let (h, p) = (hay.as_bytes(), pat.as_bytes());
    if p.len() > h.len() {
        return false;
    }
    h.windows(p.len())
        .any(|w| w.iter().zip(p).all(|(a, b)| a.to_ascii_lowercase() == *b))
}
