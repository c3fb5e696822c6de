//! The evidence record: the one typed thing that flows from the kernel's decoded events and
//! the judges to every sink (the log, the session that makes the report, the summary, OCSF and
//! the TUI). A log line is a [`Record`] with its envelope (`seq`, `prev`, `hash`, `at`); a
//! replay reads the same records back.
//!
//! Serde names are the contract (../shared/REPORT.md): the tag is `kind`, each kind's fields
//! are named as in the report. Add fields with `#[serde(default)]` so older logs still read;
//! never rename one.
//!
//! A new kind is a variant here; the compiler then points at every `match` that must say what
//! it means: the session ([`crate::state::session`]), OCSF, the TUI's summary line.
pub mod from_kernel;
pub mod words;

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::output::report::{Agent, ContainerRef, ProbeInfo, ProcessEntry, Target};
use crate::state::files::FileEntry;
use crate::state::mounts::MountEntry;
use crate::state::network::NetEntry;
use crate::state::tool_calls::ToolCallRef;
pub use words::{IN_PROGRESS, MountOp, NetOp, Op, Verdict, ViolationKind};

/// One record of the evidence log.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Record {
    /// What is watched and how (the first record).
    Start(Start),
    /// A process there before the capture (attach, container), read from /proc.
    Process(ProcessEntry),
    /// A traced process ran a program.
    Exec(Exec),
    /// A traced process made a new process.
    Fork(Fork),
    /// A traced process ended.
    Exit(Exit),
    /// A traced process tried to run a program and the exec failed.
    ExecFailed(ExecFailed),
    /// A file read, written, created, deleted, renamed or linked.
    File(FileEntry),
    /// A file operation that failed.
    FileFailed(FileFailed),
    /// A mount or namespace call (mount, umount2, move_mount, open_tree, the fs* calls,
    /// mount_setattr, pivot_root, chroot, unshare, setns), made or failed.
    Mount(MountEntry),
    /// A connect, a listen or a DNS question.
    Net(NetEntry),
    /// The later outcome of a connect that was in progress.
    NetResult(NetResult),
    /// A connect whose caller-visible arguments (its sockaddr, its descriptor's socket) are not
    /// what the kernel's socket was connected with: a racing caller.
    NetTamper(NetTamper),
    /// At the end: what a `send` entry's flow carried, as the kernel counted it.
    FlowCount(FlowCount),
    /// At the end: a file entry's count, with the repeats the kernel counted.
    FileCount(FileCount),
    /// A file a process opened for write was written through after that open: its entry's
    /// `modified` becomes true. Written when the kernel first sees the write.
    FileModified(FileModified),
    /// At the end: the sha256 of a written path as it was then.
    FileHash(FileHash),
    /// At the end: whether a listener still listens.
    Listening(Listening),
    /// At the end: a git ref a traced process updated, as it was then, with its reflog's
    /// latest lines (one per update seen).
    GitRef(GitRef),
    /// At the end: the name and version a created package manifest (npm's package.json) held.
    PackageMeta(PackageMeta),
    /// At the end: the settings of a git config file a traced process put in place that make
    /// git run or read files from elsewhere (`core.hooksPath`, `include.path`, …).
    GitConfig(GitConfig),
    /// What a program run wrote to one of its standard streams, at the run's end (its exit,
    /// its next exec, or the end of the capture).
    Output(crate::state::output::OutputRecord),
    /// At the end: one of the report's violations.
    Violation(Violation),
    /// The agent acted on its monitor (bpf(2), ptrace, a signal, its files), or the record
    /// shows that something was taken from it: a `tamper` violation. Written as it arrives.
    Tamper(Tamper),
    /// The last record: the counts.
    End(End),
}

impl Record {
    /// The `kind` the log gives this record.
    pub fn kind(&self) -> &'static str {
        match self {
            Record::Start(_) => "start",
            Record::Process(_) => "process",
            Record::Exec(_) => "exec",
            Record::Fork(_) => "fork",
            Record::Exit(_) => "exit",
            Record::ExecFailed(_) => "exec_failed",
            Record::File(_) => "file",
            Record::FileFailed(_) => "file_failed",
            Record::Mount(_) => "mount",
            Record::Net(_) => "net",
            Record::NetResult(_) => "net_result",
            Record::NetTamper(_) => "net_tamper",
            Record::FlowCount(_) => "flow_count",
            Record::FileCount(_) => "file_count",
            Record::FileModified(_) => "file_modified",
            Record::FileHash(_) => "file_hash",
            Record::Listening(_) => "listening",
            Record::GitRef(_) => "git_ref",
            Record::PackageMeta(_) => "package_meta",
            Record::GitConfig(_) => "git_config",
            Record::Output(_) => "output",
            Record::Violation(_) => "violation",
            Record::Tamper(_) => "tamper",
            Record::End(_) => "end",
        }
    }

    /// The process the record is about, when it is about one.
    pub fn pid(&self) -> Option<u32> {
        match self {
            Record::Process(p) => Some(p.pid),
            Record::Exec(e) => Some(e.pid),
            Record::Fork(f) => Some(f.pid),
            Record::Exit(e) => Some(e.pid),
            Record::ExecFailed(e) => Some(e.pid),
            Record::File(f) => Some(f.pid),
            Record::FileFailed(f) => Some(f.pid()),
            Record::Mount(m) => Some(m.pid),
            Record::Net(n) => Some(n.pid),
            Record::NetResult(n) => Some(n.pid),
            Record::NetTamper(t) => Some(t.pid),
            Record::FlowCount(c) => Some(c.pid),
            Record::FileCount(c) => Some(c.pid),
            Record::FileModified(m) => Some(m.pid),
            Record::Listening(l) => Some(l.pid),
            Record::GitConfig(c) => Some(c.pid),
            Record::Violation(v) => v.pid,
            Record::Output(o) => Some(o.pid),
            Record::Tamper(t) => t.pid,
            Record::Start(_)
            | Record::FileHash(_)
            | Record::GitRef(_)
            | Record::PackageMeta(_)
            | Record::End(_) => None,
        }
    }

    /// The record's own fields (without `kind`), as the log writes them.
    pub fn fields(&self) -> Map<String, Value> {
        match serde_json::to_value(self) {
            Ok(Value::Object(mut m)) => {
                m.remove("kind");
                m
            }
            // Every variant is a struct: serde_json cannot fail on one or make a non-object.
            _ => Map::new(),
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Start {
    pub target: Target,
    pub probe: ProbeInfo,
    pub agent: StartAgent,
    /// `--allow-net` as given.
    #[serde(default)]
    pub allow_net: Vec<String>,
    /// The addresses the host rules of `--allow-net` resolved to when the capture began, as
    /// rules (`93.184.216.34/32:443`): a replay judges connects with them as the capture did.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_net_resolved: Vec<String>,
    #[serde(default)]
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// A random id of this session (32 hex digits), so a collector that receives many
    /// sessions' records can tell them apart (the OTLP resource's `sandbox_watch.session.id`).
    /// Logs written before it have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// The agent as known at the start: the namespace given (attach, container, --agent-netns),
/// or none (run: the first process that is not a launcher decides).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct StartAgent {
    pub netns: Option<u64>,
    /// attach, container: the process the capture follows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
}

/// A program run: the report's process entry as it is known at the exec.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Exec {
    pub pid: u32,
    #[serde(default)]
    pub ppid: u32,
    pub exe: Option<String>,
    #[serde(default)]
    pub argv: Vec<String>,
    #[serde(default)]
    pub argv_truncated: bool,
    pub cwd: Option<String>,
    pub uid: Option<u32>,
    pub netns: Option<u64>,
    /// At the exec, with what was known of the agent then (the report judges again at the end).
    #[serde(default)]
    pub verdict: Verdict,
    /// When its entry began: the fork, for a forked process's first program.
    #[serde(default)]
    pub started_at: String,
    #[serde(default)]
    pub fork_only: bool,
    #[serde(default)]
    pub preexisting: bool,
    #[serde(default)]
    pub launcher: bool,
    pub comm: Option<String>,
    pub euid: Option<u32>,
    pub gid: Option<u32>,
    pub mntns: Option<u64>,
    pub pidns: Option<u64>,
    pub userns: Option<u64>,
    pub cgroup_id: Option<u64>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Fork {
    /// The new process.
    pub pid: u32,
    /// The process that forked.
    pub ppid: u32,
}

/// An execve or execveat that failed: what a process tried to run, and why it could not.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ExecFailed {
    pub pid: u32,
    /// The program tried: the directory from the kernel (cwd or dirfd), the name as given.
    pub path: String,
    #[serde(default)]
    pub path_truncated: bool,
    /// Redacted as an exec's.
    pub argv: Vec<String>,
    #[serde(default)]
    pub argv_truncated: bool,
    /// The error's name (`ENOENT`, `EACCES`, `ENOEXEC`, …), from the syscall's result.
    pub result: String,
    /// `execve` or `execveat`.
    pub syscall: String,
    /// The name and argv were read from the caller's memory at the syscall's exit, not from
    /// the kernel's copy: another thread of the caller could have changed them in between.
    #[serde(default)]
    pub from_caller_memory: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Exit {
    pub pid: u32,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
}

/// A failed file operation: an entry (refused or failed for a reason other than "not
/// there"), or, for a delete, rename or link of nothing (ENOENT, ENOTDIR), only what was tried.
// An entry is built once per failed operation and moved into its record: boxing it would add
// an allocation for nothing measurable.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FileFailed {
    Entry(FileEntry),
    Missing(Missing),
}

impl FileFailed {
    pub fn pid(&self) -> u32 {
        match self {
            FileFailed::Entry(e) => e.pid,
            FileFailed::Missing(m) => m.pid,
        }
    }

    pub fn op(&self) -> Op {
        match self {
            FileFailed::Entry(e) => e.op,
            FileFailed::Missing(m) => m.op,
        }
    }
}

/// A delete, rename or link that failed because there was nothing there: kept in the log,
/// not an entry (every program looks for many files).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Missing {
    pub pid: u32,
    pub op: Op,
    pub path: String,
    #[serde(default)]
    pub new_path: Option<String>,
    #[serde(deserialize_with = "error_name")]
    pub result: String,
}

/// A failure's `result`: its error's name (`ENOENT`); older logs wrote the -errno number.
fn error_name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Number(n) => {
            crate::state::files::errno_name(-(n.as_i64().unwrap_or(0).unsigned_abs() as i32))
        }
        Value::String(s) => s,
        other => other.to_string(),
    })
}

/// The same for an entry's optional `result`.
pub(crate) fn maybe_error_name<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<String>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Null => None,
        Value::Number(n) => Some(crate::state::files::errno_name(
            -(n.as_i64().unwrap_or(0).unsigned_abs() as i32),
        )),
        Value::String(s) => Some(s),
        other => Some(other.to_string()),
    })
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NetResult {
    pub pid: u32,
    #[serde(default)]
    pub addr: Option<String>,
    #[serde(default)]
    pub port: Option<u16>,
    pub result: String,
    /// The socket of the connect it ends (see [`NetEntry::socket`]); older logs have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket: Option<u64>,
}

/// A connect raced by its caller. The connect's entry has the kernel's values; this says what
/// the caller's memory and descriptor table showed when the call returned.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NetTamper {
    pub pid: u32,
    /// Where the kernel connected the socket, and its namespace.
    pub addr: Option<String>,
    pub port: Option<u16>,
    pub netns: Option<u64>,
    /// What the caller's sockaddr said at the call's exit.
    pub caller_addr: Option<String>,
    pub caller_port: Option<u16>,
    /// The descriptor named another socket at the exit than the one the kernel connected
    /// (its namespace, when it could be read).
    #[serde(default)]
    pub fd_swapped: bool,
    #[serde(default)]
    pub caller_netns: Option<u64>,
}

/// The packets and bytes of one flow of a `send` entry (same pid, proto, addr, port, netns).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FlowCount {
    pub pid: u32,
    pub proto: String,
    #[serde(default)]
    pub addr: Option<String>,
    #[serde(default)]
    pub port: Option<u16>,
    #[serde(default)]
    pub netns: Option<u64>,
    /// AF_PACKET: the device's index (the entry's `ifindex`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ifindex: Option<u32>,
    pub packets: u64,
    pub bytes: u64,
}

fn read_op() -> Op {
    Op::Read
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FileCount {
    pub pid: u32,
    /// Older logs counted reads only and did not say.
    #[serde(default = "read_op")]
    pub op: Op,
    pub path: String,
    #[serde(default)]
    pub dev: Option<String>,
    #[serde(default)]
    pub ino: Option<u64>,
    pub count: u64,
}

/// See [`Record::FileModified`]: the entry is the newest `file` record of this process with
/// this inode that has `modified`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FileModified {
    pub pid: u32,
    /// The entry's path (null when the capture had no entry for it: its open was lost).
    pub path: Option<String>,
    pub dev: String,
    pub ino: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FileHash {
    pub path: String,
    #[serde(default)]
    pub sha256: Option<String>,
    #[serde(default)]
    pub sha256_skipped: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Listening {
    pub pid: u32,
    #[serde(default)]
    pub proto: String,
    #[serde(default)]
    pub addr: Option<String>,
    #[serde(default)]
    pub port: Option<u16>,
    pub listening_at_end: bool,
}

/// A git ref file (`…/.git/refs/heads/main`, `…/.git/HEAD`) as it was at the end of the
/// capture: the commit it names, and the last lines of its reflog, oldest first, as many as
/// the traced processes made updates of it (fewer when the reflog has fewer).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct GitRef {
    pub path: String,
    /// The id the ref file held (None: gone, a symbolic ref, unreadable; see `skipped`).
    #[serde(default)]
    pub commit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    #[serde(default)]
    pub reflog: Vec<RefUpdate>,
}

/// One reflog line: `old new who when\tmessage` (the message redacted as argv is).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefUpdate {
    pub old: String,
    pub new: String,
    #[serde(default)]
    pub message: String,
}

/// A git config file a traced process put in place (git config renames `config.lock` onto
/// it), read at the end: the settings that make git run hooks or read config from a path
/// (`core.hooksPath`, `include.path`, `includeIf.<condition>.path`), values redacted as argv
/// is. Nothing else of the file is logged.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct GitConfig {
    pub path: String,
    /// The process that put it in place last.
    pub pid: u32,
    #[serde(default)]
    pub settings: Vec<GitSetting>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GitSetting {
    pub key: String,
    pub value: String,
}

/// A package manifest created by a traced process, read at the end (name and version only,
/// redacted as argv is).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PackageMeta {
    pub path: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

/// A violation as the log has it: its kind is `violation` there (`kind` names the record).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Violation {
    /// Older logs did not say (the summary does).
    #[serde(default)]
    pub violation: Option<ViolationKind>,
    pub pid: Option<u32>,
    pub summary: String,
    /// The tool call it happened under (null: the agent itself); older logs did not say.
    #[serde(default, skip_serializing_if = "ToolCallRef::is_unset")]
    pub tool_call: ToolCallRef,
}

/// An act on the monitor, or a sign that records were taken from it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Tamper {
    /// Who did it (None: found by the monitor itself, e.g. a replaced output at the end).
    pub pid: Option<u32>,
    /// What was used: `bpf`, `ptrace`, `process_vm_readv`, `process_vm_writev`, `pidfd_open`,
    /// `pidfd_getfd`, `signal`, `open`, `rename`, `delete`, `output`, `log`, `sequence`.
    pub op: String,
    /// The kernel (or the monitor) found that it names the monitor itself: one of its threads,
    /// BPF objects or files. A bpf(2) call on objects of its own is `false`.
    #[serde(default)]
    pub monitor: bool,
    /// The detail that groups repeats: a bpf command, a ptrace request, a signal, a file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub what: Option<String>,
    /// A process or BPF object id aimed at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The line a person reads.
    pub summary: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct End {
    /// Records read from the kernel's ring buffer.
    #[serde(default)]
    pub events: u64,
    #[serde(default)]
    pub lost: u64,
    #[serde(default)]
    pub lost_by_kind: BTreeMap<String, u64>,
    #[serde(default)]
    pub complete: bool,
    #[serde(default)]
    pub verdict: Verdict,
    #[serde(default)]
    pub exit: crate::output::report::Exit,
    #[serde(default)]
    pub agent: Option<Agent>,
    #[serde(default)]
    pub processes: usize,
    #[serde(default)]
    pub files: usize,
    #[serde(default)]
    pub network: usize,
    #[serde(default)]
    pub violations: usize,
    #[serde(default)]
    pub redactions: u64,
    #[serde(default)]
    pub ended_by: String,
    /// Kernel records that could not be decoded (older logs did not say).
    #[serde(default)]
    pub undecodable: u64,
    /// What the kernel's sequence numbers say (older logs did not have them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<SequenceCount>,
    /// Map inserts that failed in the kernel, by map (only those that failed).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failed_inserts: BTreeMap<String, u64>,
}

/// The kernel numbers every record it makes (one global counter, taken before the ring copy);
/// what never arrived is missing, whatever the kernel's drop counters say.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SequenceCount {
    /// Records the kernel numbered during the capture.
    pub numbered: u64,
    /// Of those, how many reached the monitor.
    pub received: u64,
    /// numbered − received: lost in the kernel (a full ring) or taken out of the ring.
    pub missing: u64,
    /// What the kernel's drop counters say it dropped (equal to `missing` unless they were
    /// reset or records were taken out of the ring).
    pub dropped: u64,
    /// Records that arrived twice, or numbered beyond the counter: forged or replayed.
    #[serde(default)]
    pub duplicates: u64,
}

/// A record with its place in the log: what the TUI and OCSF get, and what a replay reads.
#[derive(Clone, Debug)]
pub struct Logged {
    /// None when the capture writes no log.
    pub seq: Option<u64>,
    pub hash: Option<String>,
    pub at: SystemTime,
    pub record: Record,
}

impl Logged {
    /// The record as one JSON object with its `kind`, `at`, and (when logged) `seq` and `hash`:
    /// the log line without `prev`.
    pub fn to_value(&self) -> Value {
        let mut m = self.record.fields();
        m.insert("kind".into(), self.record.kind().into());
        m.insert("at".into(), crate::time::rfc3339_nanos(self.at).into());
        if let Some(seq) = self.seq {
            m.insert("seq".into(), seq.into());
        }
        if let Some(hash) = &self.hash {
            m.insert("hash".into(), hash.clone().into());
        }
        Value::Object(m)
    }

    /// A log line read back; None when it is not a record this version knows (a kind it does
    /// not know, a field of the wrong type) or has no `at`.
    pub fn from_value(v: &Value) -> Option<Logged> {
        let at = v.get("at")?.as_str().and_then(parse_at)?;
        let record = Record::deserialize(v).ok()?;
        Some(Logged {
            seq: v.get("seq").and_then(Value::as_u64),
            hash: v.get("hash").and_then(Value::as_str).map(str::to_string),
            at,
            record,
        })
    }
}

/// An `at` (RFC 3339) as a time.
pub fn parse_at(s: &str) -> Option<SystemTime> {
    let ns = crate::time::parse_ns(s)?;
    let ns = u64::try_from(ns).ok()?;
    Some(SystemTime::UNIX_EPOCH + Duration::from_nanos(ns))
}

/// The target as the start record and the report name it.
pub fn target(mode: &str, command: Vec<String>, pid: Option<u32>) -> Target {
    Target {
        mode: mode.into(),
        command,
        pid,
        container: None,
        dropped_capabilities: Vec::new(),
    }
}

/// A container target.
pub fn container_target(id: String, cgroup: String) -> Target {
    Target {
        mode: "container".into(),
        command: Vec::new(),
        pid: None,
        container: Some(ContainerRef { id, cgroup }),
        dropped_capabilities: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_reads_back_what_it_wrote() {
        let lines = [
            r#"{"kind":"fork","pid":2,"ppid":1}"#,
            r#"{"kind":"exit","pid":2,"exit_code":0,"signal":null}"#,
            r#"{"kind":"file_failed","pid":3,"op":"delete","path":"/x","new_path":null,"result":"ENOENT"}"#,
            r#"{"kind":"net_result","pid":3,"addr":"127.0.0.1","port":80,"result":"ok"}"#,
            r#"{"kind":"file_hash","path":"/x","sha256":null,"sha256_skipped":"gone"}"#,
            r#"{"kind":"violation","violation":"lost","pid":null,"summary":"s"}"#,
            r#"{"kind":"git_ref","path":"/r/.git/refs/heads/main","commit":"ab","reflog":[{"old":"00","new":"ab","message":"commit (initial): x"}]}"#,
            r#"{"kind":"package_meta","path":"/p/node_modules/a/package.json","name":"a","version":"1.0.0"}"#,
            r#"{"kind":"output","pid":4,"stream":"stderr","bytes":3,"sha256":"ab","head":"no\n"}"#,
            r#"{"kind":"output","pid":4,"stream":"stdout","bytes":3,"sha256":null,"sha256_skipped":"lost","text_withheld":"read a credential file"}"#,
            r#"{"kind":"mount","pid":5,"op":"mount","source":"/h/.ssh","target":"/tmp/x","flags":["bind"],"ns":{"mnt":1,"net":2,"pid":3,"user":4,"uts":5,"ipc":6,"cgroup":7,"time":8},"from_caller_memory":true}"#,
            r#"{"kind":"mount","pid":5,"op":"unshare","namespaces":["mnt","user"],"ns":{"mnt":1,"net":2,"pid":3,"user":4,"uts":5,"ipc":6,"cgroup":7,"time":8},"result":"EPERM"}"#,
        ];
        for line in lines {
            let v: Value = serde_json::from_str(line).unwrap();
            let r = Record::deserialize(&v).unwrap_or_else(|e| panic!("{line}: {e}"));
            let mut back = r.fields();
            back.insert("kind".into(), r.kind().into());
            assert_eq!(Value::Object(back), v, "{line}");
        }
    }

    #[test]
    fn a_failed_entry_is_not_a_missing_one() {
        let v: Value = serde_json::from_str(
            r#"{"kind":"file_failed","pid":3,"op":"read","path":"/etc/shadow","credential":true,
               "verified":false,"persistence":false,"count":1,"result":"EACCES"}"#,
        )
        .unwrap();
        assert!(matches!(
            Record::deserialize(&v).unwrap(),
            Record::FileFailed(FileFailed::Entry(_))
        ));
        // A kind this version does not know is not a record (a replay skips it).
        let other: Value = serde_json::from_str(r#"{"kind":"wobble","at":"x"}"#).unwrap();
        assert!(Logged::from_value(&other).is_none());
    }
}
