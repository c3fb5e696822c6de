//! What the TUI shows: the session's state (processes, files, network, tool calls: the same
//! state the report is made of), arranged for the six views, and what only the screen needs (the
//! process tree, each row's records for the details pane, alerts, the log).
//!
//! Everything the TUI adds is bounded: the alert and log lists keep their newest [`LIST_CAP`]
//! rows, the process tree stops adding past [`PROC_CAP`] (and counts what it left out), and
//! each row keeps the compact JSON of its records for the details pane. Nothing here knows
//! about terminals.

use std::collections::VecDeque;
use std::sync::Arc;

use serde_json::Value;

use crate::output::report::Target;
use crate::record::{FileFailed, Record, ViolationKind};
use crate::state::files::FileEntry;
use crate::state::network::{NetEntry, destination};
use crate::state::processes::{Process, Processes};

pub(crate) use crate::record::Verdict;

/// Rows kept per flat list of the TUI's own (alerts, log); older ones are dropped.
pub(crate) const LIST_CAP: usize = 100_000;
/// Processes kept in the tree; past this, new ones are counted but not shown.
pub(crate) const PROC_CAP: usize = 100_000;
/// Records kept per process for its details (fork, exec…, exit).
const PROC_RECORDS_CAP: usize = 16;
/// Later records kept per network row.
pub(crate) const NET_LATER_CAP: usize = 4;

// ---------------------------------------------------------------------------------------------
// JSON helpers for the details pane (a record's fields, shown as they are).

pub(crate) fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

pub(crate) fn u64_field(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

pub(crate) fn i64_field(v: &Value, key: &str) -> Option<i64> {
    v.get(key).and_then(Value::as_i64)
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

/// A time as nanoseconds since the epoch.
pub(crate) fn ns(t: std::time::SystemTime) -> i64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// An argv as a person would type it: arguments with spaces or quotes are single-quoted.
pub(crate) fn join_argv(args: &[String]) -> String {
    let mut out = String::new();
    for (i, s) in args.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
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
// Processes: the session's entries as a tree. A program a process ran after another sits under
// the one it followed; a new process under its parent.

pub(crate) struct Node {
    pub parent: Option<usize>,
    pub children: Vec<usize>,
    /// Its records (fork, exec…, exit), compact JSON, for the details pane.
    pub records: Vec<Arc<str>>,
    pub records_dropped: usize,
}

/// Nodes are indexed like the session's process entries.
#[derive(Default)]
pub(crate) struct Tree {
    pub nodes: Vec<Node>,
    roots: Vec<usize>,
    /// Tree order: (index, depth). Rebuilt lazily when `dirty`.
    pub order: Vec<(u32, u16)>,
    /// Index → position in `order`.
    pub pos_of: Vec<u32>,
    pub dirty: bool,
    /// Processes seen but not stored (past [`PROC_CAP`]).
    pub not_stored: u64,
}

impl Tree {
    /// The session's entry `i` was made or changed by a record (`raw`). A new one is placed
    /// under the entry it followed, or its parent's.
    pub(crate) fn touched(&mut self, processes: &Processes, i: usize, raw: &Arc<str>) {
        if i == self.nodes.len() {
            if i >= PROC_CAP {
                self.not_stored += 1;
                return;
            }
            let p = &processes.list[i];
            let parent = p
                .replaces
                .or_else(|| processes.live_index(p.ppid).filter(|&pi| pi != i))
                .filter(|&pi| pi < i);
            self.nodes.push(Node {
                parent,
                children: Vec::new(),
                records: Vec::new(),
                records_dropped: 0,
            });
            match parent {
                Some(pi) => self.nodes[pi].children.push(i),
                None => self.roots.push(i),
            }
        }
        let Some(node) = self.nodes.get_mut(i) else {
            return;
        };
        if node.records.len() < PROC_RECORDS_CAP {
            node.records.push(raw.clone());
        } else {
            node.records_dropped += 1;
        }
        // A program or an end changed: the tree's filter matches must be looked at again.
        self.dirty = true;
    }

    /// Rebuilds the tree order (depth first, children in the order they appeared).
    pub(crate) fn flatten(&mut self) {
        self.order.clear();
        self.pos_of.clear();
        self.pos_of.resize(self.nodes.len(), 0);
        let mut stack: Vec<(usize, u16)> = self.roots.iter().rev().map(|&r| (r, 0)).collect();
        while let Some((i, depth)) = stack.pop() {
            self.pos_of[i] = self.order.len() as u32;
            self.order.push((i as u32, depth));
            for &c in self.nodes[i].children.iter().rev() {
                stack.push((c, depth.saturating_add(1)));
            }
        }
        self.dirty = false;
    }
}

/// How a process is shown: its argv (a fork shows its parent's), or `[comm]`.
pub(crate) fn proc_argv(p: &Process) -> String {
    match (&p.argv[..], &p.comm) {
        ([], Some(comm)) => format!("[{comm}]"),
        (argv, _) => join_argv(argv),
    }
}

pub(crate) fn proc_matches(p: &Process, pat: &str) -> bool {
    contains_ci(&proc_argv(p), pat) || contains_ci(&p.pid.to_string(), pat)
}

// ---------------------------------------------------------------------------------------------
// Tool calls: each step of the agent with its effects under it (the processes it ran, the file
// and network entries of its processes), the agent's own first.

/// A row of the Tool calls view.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum StepRow {
    /// A step (its index in the session's tool calls), or the agent itself and what no step
    /// started (None).
    Step(Option<usize>),
    /// A process entry (a program run) under the step.
    Process(usize),
    File(usize),
    Net(usize),
}

impl StepRow {
    /// As a selection key that stays valid while rows are added above it.
    pub(crate) fn key(self) -> u64 {
        let (tag, i) = match self {
            StepRow::Step(None) => (0, 0),
            StepRow::Step(Some(k)) => (1, k),
            StepRow::Process(i) => (2, i),
            StepRow::File(i) => (3, i),
            StepRow::Net(i) => (4, i),
        };
        (tag << 56) | (i as u64 & ((1 << 56) - 1))
    }
}

/// The Tool calls view's rows: every entry is placed once, under the step its tool call names
/// (an entry's step is decided when it is made), and the order is rebuilt when rows came.
#[derive(Default)]
pub(crate) struct Steps {
    /// Effects per group: `[0]` the agent itself, `[k + 1]` step k.
    groups: Vec<Vec<StepRow>>,
    /// Entries looked at so far (processes, files, network).
    seen: [usize; 3],
    /// The view's order: each row with its group.
    pub order: Vec<(StepRow, u32)>,
    /// A row's key → its position in `order`.
    pub pos_of: std::collections::HashMap<u64, u32>,
    pub dirty: bool,
}

impl Steps {
    /// Places the entries the session made since the last call.
    pub(crate) fn sync(&mut self, session: &crate::state::session::Session) {
        let steps = session.tool_calls.list.len();
        if self.groups.len() < steps + 1 {
            self.groups.resize(steps + 1, Vec::new());
            self.dirty = true;
        }
        let firsts: std::collections::HashSet<usize> =
            if self.seen[0] < session.processes.list.len() {
                session
                    .tool_calls
                    .list
                    .iter()
                    .map(|t| t.entries[0])
                    .collect()
            } else {
                Default::default()
            };
        let procs = &session.processes.list;
        for (i, p) in procs.iter().enumerate().skip(self.seen[0]) {
            // A step's first program is the step's own row.
            if !firsts.contains(&i) {
                self.add(p.step, StepRow::Process(i));
            }
        }
        self.seen[0] = procs.len();
        let files = &session.files.entries;
        for (i, f) in files.iter().enumerate().skip(self.seen[1]) {
            self.add(step_index(&f.tool_call), StepRow::File(i));
        }
        self.seen[1] = files.len();
        let net = &session.network.entries;
        for (i, n) in net.iter().enumerate().skip(self.seen[2]) {
            self.add(step_index(&n.tool_call), StepRow::Net(i));
        }
        self.seen[2] = net.len();
    }

    fn add(&mut self, step: Option<usize>, row: StepRow) {
        let g = step.map_or(0, |k| k + 1);
        if self.groups.len() <= g {
            self.groups.resize(g + 1, Vec::new());
        }
        self.groups[g].push(row);
        self.dirty = true;
    }

    /// Rebuilds the order: the agent's own group (when it has rows), then each step and its
    /// effects in the order they came.
    pub(crate) fn flatten(&mut self) {
        self.order.clear();
        self.pos_of.clear();
        for (g, rows) in self.groups.iter().enumerate() {
            if g == 0 && rows.is_empty() {
                continue;
            }
            let head = StepRow::Step(g.checked_sub(1));
            for row in std::iter::once(&head).chain(rows) {
                self.pos_of.insert(row.key(), self.order.len() as u32);
                self.order.push((*row, g as u32));
            }
        }
        self.dirty = false;
    }
}

/// The session's index of the step a tool call names (None: the agent, or no step).
fn step_index(t: &crate::state::tool_calls::ToolCallRef) -> Option<usize> {
    t.id()
        .and_then(|id| id.parse::<usize>().ok())
        .and_then(|n| n.checked_sub(1))
}

/// What a step ran: the shell command of `sh -c …` (an agent's wrapper peeled), else its argv;
/// None for a fork of the agent that ran no program.
pub(crate) fn step_command(session: &crate::state::session::Session, k: usize) -> Option<String> {
    let t = session.tool_calls.list.get(k)?;
    let list = &session.processes.list;
    let p = t.entries.iter().map(|&i| &list[i]).find(|p| !p.fork_only)?;
    Some(crate::state::tool_calls::command(&p.argv).unwrap_or_else(|| proc_argv(p)))
}

/// Whether the filter `pat` (lower-case) picks step `k` (None: the agent's own group): a number
/// is a step id, `agent` the agent's group, other text a part of the step's command.
pub(crate) fn step_matches(
    session: &crate::state::session::Session,
    k: Option<usize>,
    pat: &str,
) -> bool {
    let pat = pat.trim();
    let pat = pat.strip_prefix("step").map_or(pat, str::trim_start);
    if !pat.is_empty() && pat.bytes().all(|b| b.is_ascii_digit()) {
        return k.is_some_and(|k| crate::state::tool_calls::id(k) == pat);
    }
    match k {
        None => contains_ci("the agent itself", pat),
        Some(k) => step_command(session, k).is_some_and(|c| contains_ci(&c, pat)),
    }
}

// ---------------------------------------------------------------------------------------------
// Files and network: the session's entries.

pub(crate) fn file_matches(f: &FileEntry, pat: &str) -> bool {
    contains_ci(&f.path, pat)
        || f.new_path.as_deref().is_some_and(|p| contains_ci(p, pat))
        || contains_ci(f.op.as_str(), pat)
        || contains_ci(f.fs.as_deref().unwrap_or(""), pat)
        || contains_ci(&f.pid.to_string(), pat)
        || (f.credential && contains_ci("credential", pat))
        || (f.persistence && contains_ci("persistence", pat))
        || (f.escalation.is_some() && contains_ci("escalation", pat))
}

/// Where a network entry went, as the Network view shows it.
pub(crate) fn net_dest(n: &NetEntry) -> String {
    match (&n.addr, &n.path, &n.name) {
        (None, None, Some(name)) => name.clone(),
        _ => destination(n),
    }
}

/// Refused, or failed with an error (not ok, still in progress, or sent).
pub(crate) fn net_refused(n: &NetEntry) -> bool {
    !matches!(n.result.as_str(), "" | "ok" | "in_progress" | "sent")
}

pub(crate) fn net_matches(n: &NetEntry, pat: &str) -> bool {
    contains_ci(&net_dest(n), pat)
        || contains_ci(n.op.as_str(), pat)
        || contains_ci(&n.proto, pat)
        || contains_ci(&n.result, pat)
        || contains_ci(n.verdict.as_str(), pat)
        || contains_ci(&n.pid.to_string(), pat)
}

/// A network row's records for the details pane: the first, and a few later ones (its
/// outcome, repeats counted in it).
pub(crate) struct NetRecords {
    pub raw: Arc<str>,
    pub later: Vec<Arc<str>>,
}

// ---------------------------------------------------------------------------------------------
// Alerts.

/// What an alert is about: a violation's kind, or a gap of the probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AlertKind {
    Violation(ViolationKind),
    /// Something the hook cannot see on this kernel (from `start.probe.gaps`).
    Gap,
}

impl AlertKind {
    pub(crate) const OUTSIDE: AlertKind = AlertKind::Violation(ViolationKind::Outside);

    pub(crate) fn name(self) -> &'static str {
        match self {
            AlertKind::Violation(k) => k.as_str(),
            AlertKind::Gap => "gap",
        }
    }
}

/// The kind of a violation record from a log that did not name it, from its summary.
pub(crate) fn guess_kind(summary: &str) -> ViolationKind {
    if summary.contains("--allow-net") {
        ViolationKind::Network
    } else if summary.contains(" credential ") {
        ViolationKind::Credential
    } else if summary.contains("net namespace") || summary.contains("outside") {
        ViolationKind::Outside
    } else if summary.contains("still running") {
        ViolationKind::Leftover
    } else if summary.contains("events lost") {
        ViolationKind::Lost
    } else if [" wrote ", " created ", " renamed ", " deleted "]
        .iter()
        .any(|w| summary.contains(w))
    {
        ViolationKind::Persistence
    } else {
        ViolationKind::Network
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

fn hostport(addr: &Option<String>, port: Option<u16>) -> String {
    match (addr, port) {
        (Some(a), Some(p)) if a.contains(':') => format!("[{a}]:{p}"),
        (Some(a), Some(p)) => format!("{a}:{p}"),
        (Some(a), None) => a.clone(),
        (None, Some(p)) => format!(":{p}"),
        (None, None) => String::new(),
    }
}

/// One line saying what a record is, for the Log view.
pub(crate) fn summarize(r: &Record) -> String {
    let mark = |v: Verdict| {
        if v == Verdict::Outside {
            "  [OUTSIDE]"
        } else {
            ""
        }
    };
    match r {
        Record::Start(s) => format!(
            "{} · file hook {} · {} gap(s)",
            target_text(&s.target),
            s.probe.file_open,
            s.probe.gaps.len()
        ),
        Record::Process(p) => format!(
            "running pid {} (ppid {}) {}{}",
            p.pid,
            p.ppid,
            join_argv(&p.argv),
            mark(p.verdict)
        ),
        Record::Exec(e) => format!(
            "pid {} (ppid {}) {}{}",
            e.pid,
            e.ppid,
            join_argv(&e.argv),
            mark(e.verdict)
        ),
        Record::Fork(f) => format!("pid {} forked from {}", f.pid, f.ppid),
        Record::ExecFailed(e) => format!(
            "pid {} tried to run {} ({}): {}",
            e.pid,
            e.path,
            e.result,
            join_argv(&e.argv)
        ),
        Record::Exit(x) => match (x.exit_code, x.signal) {
            (_, Some(sig)) => format!("pid {} killed by {}", x.pid, signal_name(sig.into())),
            (Some(code), None) => format!("pid {} exit {code}", x.pid),
            (None, None) => format!("pid {} exited", x.pid),
        },
        Record::File(f) => {
            let mut s = format!("pid {} {} {}", f.pid, f.op.as_str(), f.path);
            if let Some(np) = &f.new_path {
                s.push_str(" → ");
                s.push_str(np);
            }
            if f.credential {
                s.push_str("  [credential]");
            }
            if f.persistence {
                s.push_str("  [persistence]");
            }
            if f.escalation.is_some() {
                s.push_str("  [escalation]");
            }
            s
        }
        Record::FileFailed(f) => {
            let (path, result) = match f {
                FileFailed::Entry(e) => (&e.path, e.result.as_deref().unwrap_or("")),
                FileFailed::Missing(m) => (&m.path, m.result.as_str()),
            };
            format!(
                "pid {} {} {path} failed ({result})",
                f.pid(),
                f.op().as_str()
            )
        }
        Record::Net(n) => format!(
            "pid {} {} {} {} {}{}",
            n.pid,
            n.op.as_str(),
            n.proto,
            net_dest(n),
            n.result,
            mark(n.verdict)
        ),
        Record::NetResult(n) => format!(
            "pid {} connect {} → {}",
            n.pid,
            hostport(&n.addr, n.port),
            n.result
        ),
        Record::NetTamper(t) => format!(
            "pid {} TAMPER connect went to {} but the caller showed {}{}",
            t.pid,
            hostport(&t.addr, t.port),
            hostport(&t.caller_addr, t.caller_port),
            if t.fd_swapped {
                " and another socket"
            } else {
                ""
            }
        ),
        Record::FlowCount(c) => format!(
            "pid {} send {} {} {} packets, {} bytes in all",
            c.pid,
            c.proto,
            hostport(&c.addr, c.port),
            c.packets,
            c.bytes
        ),
        Record::FileCount(c) => format!(
            "pid {} {} {} {} times in all",
            c.pid,
            if c.op == crate::record::Op::Read {
                "read".to_string()
            } else {
                c.op.as_str().to_string()
            },
            c.path,
            c.count
        ),
        Record::FileModified(m) => format!(
            "pid {} wrote to {}",
            m.pid,
            m.path
                .clone()
                .unwrap_or_else(|| format!("inode {} on {}", m.ino, m.dev))
        ),
        Record::Mount(m) => format!("pid {} {}", m.pid, m.line()),
        Record::Violation(v) => v.summary.clone(),
        Record::Tamper(t) => format!("TAMPER: {}", t.summary),
        Record::FileHash(h) => match (&h.sha256, &h.sha256_skipped) {
            (Some(sum), _) => format!("{} at the end: sha256 {sum}", h.path),
            (None, Some(why)) => format!("{} at the end: not hashed, {why}", h.path),
            (None, None) => format!("{} at the end", h.path),
        },
        Record::GitRef(g) => format!(
            "{} at the end: {}",
            g.path,
            g.commit
                .as_deref()
                .or(g.skipped.as_deref())
                .unwrap_or("no commit")
        ),
        Record::Output(o) => format!(
            "pid {} {}: {} bytes, {}",
            o.pid,
            o.stream,
            o.output.bytes,
            o.output
                .sha256
                .as_deref()
                .map_or_else(|| "not hashed".to_string(), |s| format!("sha256 {s}"))
        ),
        Record::GitConfig(c) => format!(
            "{} at the end: {}",
            c.path,
            c.settings
                .iter()
                .map(|s| format!("{} = {}", s.key, s.value))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Record::PackageMeta(m) => format!(
            "{} at the end: {} {}",
            m.path,
            m.name.as_deref().unwrap_or("?"),
            m.version.as_deref().unwrap_or("?")
        ),
        Record::Listening(l) => format!(
            "pid {} {} {} {} at the end",
            l.pid,
            l.proto,
            hostport(&l.addr, l.port),
            if l.listening_at_end {
                "still listening"
            } else {
                "no longer listening"
            }
        ),
        Record::End(e) => format!(
            "ended: {} · verdict {} · {} events, {} lost",
            e.ended_by,
            e.verdict.as_str(),
            e.events,
            e.lost
        ),
    }
}

/// `run sh agent.sh`, `attach pid 1234`, `container abc`.
pub(crate) fn target_text(t: &Target) -> String {
    let command = join_argv(&t.command);
    let mut parts = vec![];
    if !t.mode.is_empty() {
        parts.push(t.mode.clone());
    }
    if !command.is_empty() {
        parts.push(command);
    }
    if let Some(pid) = t.pid {
        parts.push(format!("pid {pid}"));
    }
    if let Some(c) = &t.container {
        parts.push(format!("container {}", c.id.get(..12).unwrap_or(&c.id)));
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
