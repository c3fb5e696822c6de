//! The JSON report (`--report`, schema `sandbox-watch/report/1`) and the Markdown summary.
//! Field names are a contract: ../shared/REPORT.md. Add fields; never rename.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::judge::netpolicy::Policy;
use crate::record::{NetOp, Op, SequenceCount, Verdict, ViolationKind};
use crate::state::files::{FileEntry, RacedPaths};
use crate::state::git::Git;
use crate::state::mounts::MountEntry;
use crate::state::network::NetEntry;
use crate::state::packages::Package;
use crate::state::tool_calls::{ToolCallEntry, ToolCallRef};

pub const SCHEMA: &str = "sandbox-watch/report/1";

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    pub schema: String,
    pub target: Target,
    pub agent: Agent,
    pub started_at: String,
    pub ended_at: String,
    pub exit: Exit,
    pub probe: ProbeInfo,
    pub coverage: Coverage,
    pub verdict: Verdict,
    pub processes: Vec<ProcessEntry>,
    pub files: Vec<FileEntry>,
    pub network: Vec<NetEntry>,
    /// Mount and namespace changes: one entry per call (see `state::mounts`).
    #[serde(default)]
    pub mounts: Vec<MountEntry>,
    /// Packages installed or removed (see `state::packages` for what each is derived from).
    #[serde(default)]
    pub packages: Vec<Package>,
    /// Commits made and pushes tried (see `state::git`).
    #[serde(default)]
    pub git: Git,
    pub violations: Vec<Violation>,
    pub log: Option<LogInfo>,
    /// How many argv values were replaced by `[REDACTED]`.
    pub redactions: u64,
    /// The agent's steps: one per direct child of the agent process (see `state::tool_calls`).
    #[serde(default)]
    pub tool_calls: Vec<ToolCallEntry>,
    /// `--transcript`: what the agent's own transcript declares that was not seen, and the
    /// other way round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript: Option<crate::judge::transcript::TranscriptInfo>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Target {
    pub mode: String,
    pub command: Vec<String>,
    pub pid: Option<u32>,
    pub container: Option<ContainerRef>,
    /// `run --protect`: the capabilities taken out of the agent's bounding set before its
    /// exec (none of its processes can hold them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped_capabilities: Vec<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ContainerRef {
    pub id: String,
    pub cgroup: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Agent {
    pub pid: Option<u32>,
    pub netns: Option<u64>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Exit {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ProbeInfo {
    pub file_open: String,
    pub gaps: Vec<String>,
    /// What sandbox-watch does not watch on any kernel (see `NOT_WATCHED`).
    #[serde(default)]
    pub not_watched: Vec<String>,
}

/// Outside what sandbox-watch watches, whatever the kernel: said in every report, so nobody
/// reads its silence as "did not happen".
pub const NOT_WATCHED: &[&str] = &[
    "removexattr; the results of io_uring's RENAMEAT, UNLINKAT, LINKAT, SYMLINKAT, MKDIRAT, SETXATTR and FSETXATTR requests (recorded when submitted, `via: io_uring`), and the file of an FSETXATTR on a fixed (registered) file",
    "that a delete removed another name of a credential or persistence file (a hard link to a key, removed by unlink or io_uring's UNLINKAT): a delete is judged by its path, as the name's inode is not known to the probe",
    "the data read or written (never recorded), and reads through a descriptor or mapping the capture did not see opened: a file counts as read when it is opened for it, and written when it is opened for write or when a traced process dirties its data through any descriptor or shared mapping (once per process and file); such a write is not seen when it goes into pages still dirty from an earlier one and leaves the mtime unchanged (same timestamp tick), or into dirty pages by copy_file_range, splice, sendfile or io_uring; an open for write's `modified` is true when a write call wrote through a descriptor of the file, the kernel dirtied its data after the open, or the open truncated it (O_TRUNC), and is false, wrongly, for a store through a shared mapping or an io_uring write into pages still dirty from the same clock tick, and for an io_uring O_TRUNC open that writes nothing (on overlayfs, procfs, sysfs and devices, where writes dirty no inode opened, an open that did not truncate has no `modified`)",
    "the data of any connection or datagram (payloads are never recorded; DNS questions are decoded from UDP datagrams to port 53 sent by any API, not from TCP or other ports)",
    "AF_PACKET frames sent with PACKET_QDISC_BYPASS (they reach no net_dev tracepoint); unix-domain datagrams; vsock data, and vsock connects not made by connect(2) (io_uring)",
    "DNS answers, and names resolved without DNS (/etc/hosts)",
    "a name rewritten by another thread during a rename, delete, link or attribute call (chmod, chown, truncate, mkdir, setxattr and its attribute name, utime) and back before its exit: the names are read from the caller's memory at the call's entry and exit, and only a difference between the two is seen (a `tamper` finding naming both; the kernel's own copy is not read)",
    "mounts and namespace changes made outside the traced tree (a helper, a container runtime, systemd, an automounter), and namespaces a child is made in by clone or clone3 with CLONE_NEW* flags (no `mounts` entry: the child's exec has its namespaces); of the traced tree's own mount, umount2, move_mount, open_tree, fs*, mount_setattr, pivot_root, chroot, unshare and setns calls, the paths given (but a tree's, taken from its descriptor), mount's and fsopen's filesystem type and fsconfig's key are read from the caller's memory when the call returns (`from_caller_memory`); mount's data (its options) and fsconfig's values are never read",
];

impl ProbeInfo {
    pub fn new(file_open: String, gaps: Vec<String>) -> ProbeInfo {
        ProbeInfo {
            file_open,
            gaps,
            not_watched: NOT_WATCHED.iter().map(|s| s.to_string()).collect(),
        }
    }
}

/// `complete` means "nothing was lost": no kernel sequence gap, no ring drop, no failed map
/// insert that loses records, nothing undecodable. What this kernel cannot see at all is in
/// `probe.gaps`, apart.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Coverage {
    pub events: u64,
    pub lost: u64,
    pub complete: bool,
    /// Lost records per event kind as the kernel's drop counters say (only kinds that lost
    /// any), and `not_in_the_ring` for what the sequence numbers say is missing beyond them.
    pub lost_by_kind: BTreeMap<String, u64>,
    /// Records the decoder could not read (a bug if ever non-zero).
    pub undecodable: u64,
    /// What the kernel's sequence numbers say: numbered, received, missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<SequenceCount>,
    /// Map inserts that failed in the kernel, by map: `TRACED` (a process not followed: lost),
    /// `READS` (a read sent again instead of counted: nothing lost), `MON_TIDS`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failed_inserts: BTreeMap<String, u64>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ProcessEntry {
    pub pid: u32,
    pub ppid: u32,
    pub exe: Option<String>,
    pub argv: Vec<String>,
    #[serde(default)]
    pub argv_truncated: bool,
    pub cwd: Option<String>,
    pub uid: Option<u32>,
    pub netns: Option<u64>,
    #[serde(default)]
    pub verdict: Verdict,
    #[serde(default)]
    pub started_at: String,
    pub ended_at: Option<String>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    #[serde(default)]
    pub running_at_end: bool,
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
    /// Milliseconds from start to end (or to the end of the capture while still running).
    /// An integer: floats print differently across languages, and log lines are hashed.
    #[serde(default)]
    pub duration_ms: u64,
    /// What the program wrote to its stdout and stderr (see `state::output`); none when it
    /// wrote nothing there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<crate::state::output::ProcessOutput>,
    /// Programs this process tried to run and could not (failed execve/execveat), in order.
    /// A PATH search's misses (ENOENT, ENOTDIR) before it ran a program of the same name are
    /// left out (the log keeps them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tried: Vec<Tried>,
    /// The tool call it is under (see `state::tool_calls`): a step's id, or null for the agent
    /// itself; not in the log's records (the session works it out).
    #[serde(default, skip_serializing_if = "ToolCallRef::is_unset")]
    pub tool_call: ToolCallRef,
    /// It ran this program after its step's own process had ended.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub after_step: bool,
}

/// A program a process tried to run: the exec failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tried {
    pub at: String,
    /// The program tried: the directory from the kernel (cwd or dirfd), the name as given.
    pub path: String,
    #[serde(default)]
    pub path_truncated: bool,
    pub argv: Vec<String>,
    #[serde(default)]
    pub argv_truncated: bool,
    /// The error's name (`ENOENT`, `EACCES`, `ENOEXEC`, …), from the syscall's result.
    pub result: String,
    /// `execve` or `execveat`.
    pub syscall: String,
    /// The name and argv were read from the caller's memory, not from the kernel's copy:
    /// another thread of the caller could have changed them after the kernel read them.
    #[serde(default)]
    pub from_caller_memory: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Violation {
    pub kind: ViolationKind,
    pub pid: Option<u32>,
    pub summary: String,
    /// A grouped finding (one behaviour of one process over many files): what it is about.
    /// `environ`: the process read (or tried to read) other processes' environments.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub subject: Option<String>,
    /// A grouped finding: how many files it stands for (the failed tries included).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub count: Option<u64>,
    /// A grouped finding: every file, in the order the files list has them.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub paths: Vec<String>,
    /// A grouped finding: of its files, how many failed, by error (`ESRCH`: the process had
    /// gone; `EACCES`: refused).
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub failed: BTreeMap<String, u64>,
    /// The tool call it happened under (null: the agent itself, or none).
    #[serde(default, skip_serializing_if = "ToolCallRef::is_unset")]
    pub tool_call: ToolCallRef,
}

impl Violation {
    /// A violation under no tool call (`tool_call` unset: not written).
    pub fn new(kind: ViolationKind, pid: Option<u32>, summary: String) -> Violation {
        Violation::in_step(ToolCallRef::Unset, kind, pid, summary)
    }

    /// A violation under a tool call (a step's id, or the agent itself).
    pub fn in_step(
        tool_call: ToolCallRef,
        kind: ViolationKind,
        pid: Option<u32>,
        summary: String,
    ) -> Violation {
        Violation {
            kind,
            pid,
            summary,
            subject: None,
            count: None,
            paths: Vec::new(),
            failed: BTreeMap::new(),
            tool_call,
        }
    }
}

/// One process's reads of `/proc/*/environ` (`ps`, `pgrep`, an agent's IDE detection): one
/// finding, after the real credential files. See the README's ranking of findings.
pub struct EnvironGroup<'a> {
    pub pid: u32,
    pub files: Vec<&'a FileEntry>,
}

impl EnvironGroup<'_> {
    /// The processes whose environment was read (distinct paths that opened).
    pub fn read(&self) -> usize {
        self.distinct(|f| f.result.is_none())
    }

    /// The tries that failed, by error.
    pub fn failed(&self) -> BTreeMap<String, u64> {
        let mut by = BTreeMap::new();
        for f in &self.files {
            if let Some(e) = &f.result {
                *by.entry(e.clone()).or_default() += 1;
            }
        }
        by
    }

    fn distinct(&self, keep: impl Fn(&FileEntry) -> bool) -> usize {
        self.files
            .iter()
            .filter(|f| keep(f))
            .map(|f| f.path.as_str())
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    }

    /// The distinct paths, in order.
    pub fn paths(&self) -> Vec<String> {
        let mut seen = std::collections::HashSet::new();
        self.files
            .iter()
            .filter(|f| seen.insert(f.path.as_str()))
            .map(|f| f.path.clone())
            .collect()
    }

    /// `the environment of 97 processes (3 more failed: ESRCH ×3)`, or of `/proc/12/environ`
    /// when it was one.
    pub fn what(&self) -> String {
        let read = self.read();
        let failed = self.failed();
        let failures = failed
            .iter()
            .map(|(e, n)| {
                if *n > 1 {
                    format!("{e} ×{n}")
                } else {
                    e.clone()
                }
            })
            .collect::<Vec<_>>()
            .join(", ");
        let paths = self.paths();
        let of = if paths.len() == 1 {
            clean(&paths[0])
        } else {
            let n = self.distinct(|_| true);
            format!("{n} processes")
        };
        match (read, failures.is_empty()) {
            (0, _) => format!("tried to read the environment of {of} (failed: {failures})"),
            (_, true) => format!("read the environment of {of}"),
            (_, false) => format!(
                "read the environment of {of} ({} failed: {failures})",
                failed.values().sum::<u64>()
            ),
        }
    }
}

/// The credential entries that are environ files, one group per process, in first-touch order.
pub fn environ_groups(files: &[FileEntry]) -> Vec<EnvironGroup<'_>> {
    let mut groups: Vec<EnvironGroup> = Vec::new();
    for f in files
        .iter()
        .filter(|f| f.credential && crate::judge::classify::is_environ(&f.path))
    {
        match groups.iter_mut().find(|g| g.pid == f.pid) {
            Some(g) => g.files.push(f),
            None => groups.push(EnvironGroup {
                pid: f.pid,
                files: vec![f],
            }),
        }
    }
    groups
}

/// A failure that is a tool's normal probing, not a refusal to report (README, "Refused or
/// failed"): a `/proc` file of a process that had gone (ESRCH), an environ read (grouped in
/// its finding), or a try the same process then made good (same operation, same path: `rm -r`
/// unlinks a directory, gets EISDIR, then removes it as one).
pub fn expected_failure(files: &[FileEntry], f: &FileEntry) -> bool {
    f.result.is_some()
        && (f.result.as_deref() == Some("ESRCH")
            || (f.credential && crate::judge::classify::is_environ(&f.path))
            || files
                .iter()
                .any(|g| g.result.is_none() && g.pid == f.pid && g.op == f.op && g.path == f.path))
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LogInfo {
    pub path: String,
    pub records: u64,
    pub head: String,
    /// Replay: what the hash chain check of the log said (`intact`, `unended`, `tampered`),
    /// and its sentence. A live capture wrote the log itself and has neither.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub chain: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub chain_message: Option<String>,
}

/// Everything a report is made of, from a live capture or from a log (replay).
pub struct Parts {
    pub target: Target,
    pub agent: Agent,
    pub started_at: String,
    pub ended_at: String,
    pub exit: Exit,
    pub probe: ProbeInfo,
    pub events: u64,
    pub lost_by_kind: BTreeMap<String, u64>,
    pub undecodable: u64,
    pub processes: Vec<ProcessEntry>,
    pub files: Vec<FileEntry>,
    pub network: Vec<NetEntry>,
    pub mounts: Vec<MountEntry>,
    /// Connects raced by their callers (`net_tamper` records).
    pub tampers: Vec<crate::record::NetTamper>,
    pub tool_calls: Vec<ToolCallEntry>,
    pub packages: Vec<Package>,
    pub git: Git,
    pub redactions: u64,
    /// The end's count of lost records (None before the end: the drop counters' sum).
    pub lost: Option<u64>,
    pub sequence: Option<SequenceCount>,
    pub failed_inserts: BTreeMap<String, u64>,
    /// Acts on the monitor: who, and the violation's line.
    pub tamper: Vec<(Option<u32>, String)>,
}

/// The report: the parts, plus what follows from them (verdict, coverage, violations).
pub fn assemble(p: Parts, policy: &Policy) -> Report {
    let lost: u64 = p.lost.unwrap_or_else(|| p.lost_by_kind.values().sum());
    let duplicates = p.sequence.as_ref().map_or(0, |s| s.duplicates);
    let verdict = if p.processes.iter().any(|e| e.verdict == Verdict::Outside)
        || p.network.iter().any(|n| n.verdict == Verdict::Outside)
    {
        Verdict::Outside
    } else {
        Verdict::Inside
    };
    let violations = violations(&p, lost, policy);
    let mut tool_calls = p.tool_calls;
    for t in &mut tool_calls {
        let under = |r: &ToolCallRef| r.id() == Some(t.id.as_str());
        t.processes = p
            .processes
            .iter()
            .filter(|e| under(&e.tool_call) && !e.fork_only)
            .count() as u64;
        let files = p
            .files
            .iter()
            .filter(|f| under(&f.tool_call) && f.result.is_none());
        let (read, changed): (Vec<&FileEntry>, Vec<&FileEntry>) =
            files.partition(|f| f.op == Op::Read);
        t.files_changed = changed.iter().filter(|f| !not_a_file(f)).count() as u64;
        t.files_read = read.len() as u64;
        t.connections = p
            .network
            .iter()
            .filter(|n| under(&n.tool_call) && n.op == NetOp::Connect)
            .map(|n| n.count)
            .sum();
        t.violations = violations.iter().filter(|v| under(&v.tool_call)).count() as u64;
    }
    Report {
        schema: SCHEMA.into(),
        coverage: Coverage {
            events: p.events,
            lost,
            // Nothing lost (what the hooks cannot see is in probe.gaps). Logs from before the
            // sequence numbers meant that and "no gaps" together: they replay as they did.
            complete: match &p.sequence {
                Some(_) => lost == 0 && p.undecodable == 0 && duplicates == 0,
                None => lost == 0 && p.probe.gaps.is_empty() && p.undecodable == 0,
            },
            lost_by_kind: p.lost_by_kind,
            undecodable: p.undecodable,
            sequence: p.sequence,
            failed_inserts: p.failed_inserts,
        },
        target: p.target,
        agent: p.agent,
        started_at: p.started_at,
        ended_at: p.ended_at,
        exit: p.exit,
        probe: p.probe,
        verdict,
        processes: p.processes,
        files: p.files,
        network: p.network,
        mounts: p.mounts,
        packages: p.packages,
        git: p.git,
        violations,
        log: None,
        redactions: p.redactions,
        tool_calls,
        transcript: None,
    }
}

/// Violations in the order a person should read them.
fn violations(parts: &Parts, lost: u64, policy: &Policy) -> Vec<Violation> {
    let (processes, lost_by, agent_netns) =
        (&parts.processes, &parts.lost_by_kind, parts.agent.netns);
    let mut out = Vec::new();
    // Acts on the monitor first: what else the record says depends on it being whole.
    for (pid, line) in &parts.tamper {
        let step = pid
            .and_then(|pid| processes.iter().rfind(|p| p.pid == pid))
            .map_or(ToolCallRef::Unset, |p| p.tool_call.clone());
        out.push(Violation::in_step(
            step,
            ViolationKind::Tamper,
            *pid,
            line.clone(),
        ));
    }
    let name = |p: &ProcessEntry| clean(&p.argv.join(" ").chars().take(80).collect::<String>());
    for p in processes.iter().filter(|p| p.verdict == Verdict::Outside) {
        out.push(Violation::in_step(
            p.tool_call.clone(),
            ViolationKind::Outside,
            Some(p.pid),
            format!(
                "pid {} `{}` ran in net namespace {}, not the agent's {}",
                p.pid,
                name(p),
                p.netns.unwrap_or(0),
                agent_netns.unwrap_or(0)
            ),
        ));
    }
    // Reads of a secret first: what an agent read is what it can leak. Environ files are
    // grouped per reader, ranked after persistence (below).
    let mut credentials: Vec<&FileEntry> = parts
        .files
        .iter()
        .filter(|f| f.credential && !crate::judge::classify::is_environ(&f.path))
        .collect();
    credentials.sort_by_key(|f| f.op != Op::Read);
    for f in credentials {
        let how = if let Some(rule) = &f.same_inode_as {
            // Another path to a key the rules named at start: both paths, people look for either.
            format!(
                "the same file as {}, {}",
                clean(rule),
                if f.verified {
                    "verified"
                } else {
                    "not verified"
                }
            )
        } else if f.verified {
            format!("verified on {}", f.fs.as_deref().unwrap_or("?"))
        } else {
            format!(
                "not verified: {}",
                f.unverified_reason
                    .as_deref()
                    .unwrap_or("path from the syscall")
            )
        };
        let summary = match (&f.result, &f.link_to) {
            (Some(error), _) => format!(
                "pid {} tried to {} credential {} (failed: {error})",
                f.pid,
                f.op.attempt(),
                clean(&f.path)
            ),
            (None, Some(to)) => format!(
                "pid {} made {} a {} link to {} (a credential)",
                f.pid,
                clean(&f.path),
                f.link.as_deref().unwrap_or("symbolic"),
                clean(to)
            ),
            (None, None) => format!(
                "pid {} {} credential {} ({how})",
                f.pid,
                f.op.past(),
                clean(&f.path)
            ),
        };
        out.push(Violation::in_step(
            f.tool_call.clone(),
            ViolationKind::Credential,
            Some(f.pid),
            summary,
        ));
    }
    for n in parts
        .network
        .iter()
        .filter(|n| n.verdict == Verdict::Outside)
    {
        out.push(Violation::in_step(
            n.tool_call.clone(),
            ViolationKind::Outside,
            Some(n.pid),
            format!(
                "pid {} {} {} from net namespace {}, not the agent's {}",
                n.pid,
                n.op.as_str(),
                clean(&crate::state::network::destination(n)),
                n.netns.unwrap_or(0),
                agent_netns.unwrap_or(0)
            ),
        ));
    }
    if !policy.is_empty() {
        for n in &parts.network {
            if n.op == NetOp::Listen
                || n.op == NetOp::Accept
                || n.proto == "unix"
                || policy_allows(policy, &parts.network, n)
            {
                continue;
            }
            out.push(Violation::in_step(
                n.tool_call.clone(),
                ViolationKind::Network,
                Some(n.pid),
                format!(
                    "pid {} {} {} ({}), not allowed by --allow-net",
                    n.pid,
                    n.op.as_str(),
                    clean(&crate::state::network::destination(n)),
                    n.result
                ),
            ));
        }
    }
    for t in &parts.tampers {
        let dest = |a: &Option<String>, p: Option<u16>| match (a, p) {
            (Some(a), Some(p)) if a.contains(':') => format!("[{a}]:{p}"),
            (Some(a), Some(p)) => format!("{a}:{p}"),
            (Some(a), None) => a.clone(),
            _ => "?".into(),
        };
        let mut what = Vec::new();
        if t.caller_addr != t.addr || t.caller_port != t.port {
            what.push(format!(
                "its sockaddr read {} when connect returned",
                dest(&t.caller_addr, t.caller_port)
            ));
        }
        if t.fd_swapped {
            what.push(format!(
                "its descriptor named another socket (net namespace {}) when connect returned",
                t.caller_netns.unwrap_or(0)
            ));
        }
        let step = processes
            .iter()
            .rfind(|p| p.pid == t.pid)
            .map_or(ToolCallRef::Unset, |p| p.tool_call.clone());
        out.push(Violation::in_step(
            step,
            ViolationKind::Tamper,
            Some(t.pid),
            clean(&format!(
                "pid {} connected to {} (net namespace {}) while {}: a racing caller",
                t.pid,
                dest(&t.addr, t.port),
                t.netns.unwrap_or(0),
                what.join(" and ")
            )),
        ));
    }
    // Renames, deletes, links and attribute calls whose names another thread rewrote during
    // the call: one finding per process, with its first such call.
    let mut raced: BTreeMap<u32, (&FileEntry, &RacedPaths, u64)> = BTreeMap::new();
    for (f, r) in parts
        .files
        .iter()
        .filter_map(|f| Some((f, f.raced.as_ref()?)))
    {
        raced.entry(f.pid).or_insert((f, r, 0)).2 += 1;
    }
    for (pid, (f, r, n)) in raced {
        // A rename's old and new path; a link's path and target; a delete's path; a
        // setxattr's path and attribute name.
        let names = |path: &str,
                     new_path: Option<&String>,
                     link_to: Option<&String>,
                     xattr: Option<&String>| {
            match (new_path.or(link_to), xattr) {
                (Some(to), _) => format!("`{}` → `{}`", clean(path), clean(to)),
                (None, Some(name)) => format!("`{}` ({})", clean(path), clean(name)),
                (None, None) => format!("`{}`", clean(path)),
            }
        };
        let step = processes
            .iter()
            .rfind(|p| p.pid == pid)
            .map_or(ToolCallRef::Unset, |p| p.tool_call.clone());
        let what = if f.link.is_some() {
            "link"
        } else if matches!(f.op, Op::Delete | Op::Rename) {
            f.op.attempt()
        } else {
            f.op.as_str()
        };
        out.push(Violation::in_step(
            step,
            ViolationKind::Tamper,
            Some(pid),
            format!(
                "pid {pid} had the names of {n} call{} rewritten by another thread during the \
                 call (the kernel used one of the two names): first its {what} of {} at its \
                 entry, {} at its exit",
                if n == 1 { "" } else { "s" },
                names(
                    &r.path,
                    r.new_path.as_ref(),
                    r.link_to.as_ref(),
                    r.xattr.as_ref()
                ),
                names(
                    &f.path,
                    f.new_path.as_ref(),
                    f.link_to.as_ref(),
                    f.xattr.as_ref()
                ),
            ),
        ));
    }
    for f in parts.files.iter().filter(|f| f.persistence) {
        let mut path = clean(f.new_path.as_ref().unwrap_or(&f.path));
        // Raced names: both, the kernel used one.
        if let Some(r) = &f.raced {
            let other = clean(r.new_path.as_ref().unwrap_or(&r.path));
            if other != path {
                path = format!("{path} or {other} (its names were rewritten during the call)");
            }
        }
        let summary = match (&f.result, &f.link_to) {
            (Some(error), _) => format!(
                "pid {} tried to {} {path} (failed: {error})",
                f.pid,
                f.op.attempt()
            ),
            (None, Some(to)) => format!(
                "pid {} made {path} a {} link to {}",
                f.pid,
                f.link.as_deref().unwrap_or("symbolic"),
                clean(to)
            ),
            (None, None) => match &f.same_inode_as {
                Some(rule) => format!(
                    "pid {} {} {path} (the same file as {})",
                    f.pid,
                    f.op.past(),
                    clean(rule)
                ),
                None => format!("pid {} {} {path}", f.pid, f.op.past()),
            },
        };
        out.push(Violation::in_step(
            f.tool_call.clone(),
            ViolationKind::Persistence,
            Some(f.pid),
            summary,
        ));
    }
    // A git config pointing hooks (or included config) outside the repository: git runs
    // what is there at the next commit, wherever the agent put it.
    for s in parts.git.config.iter().filter(|s| s.outside) {
        let step = processes
            .iter()
            .rfind(|p| p.pid == s.pid)
            .map_or(ToolCallRef::Unset, |p| p.tool_call.clone());
        out.push(Violation::in_step(
            step,
            ViolationKind::Persistence,
            Some(s.pid),
            clean(&format!(
                "pid {} set {} = {} in {}: {}",
                s.pid,
                s.key,
                s.value,
                s.path,
                if s.path.ends_with("/.git/config") {
                    "outside the repository"
                } else {
                    "a global config, for every repository"
                }
            )),
        ));
    }
    for f in &parts.files {
        let Some(why) = &f.escalation else { continue };
        out.push(Violation::in_step(
            f.tool_call.clone(),
            ViolationKind::Escalation,
            Some(f.pid),
            escalation_summary(f, why),
        ));
    }
    for g in environ_groups(&parts.files) {
        let who = processes
            .iter()
            .rfind(|p| p.pid == g.pid && !p.argv.is_empty())
            .map(|p| format!(" `{}`", name(p)))
            .unwrap_or_default();
        let paths = g.paths();
        out.push(Violation {
            subject: Some("environ".into()),
            count: Some(paths.len() as u64),
            failed: g.failed(),
            paths,
            ..Violation::in_step(
                g.files[0].tool_call.clone(),
                ViolationKind::Credential,
                Some(g.pid),
                format!("pid {}{who} {}", g.pid, g.what()),
            )
        });
    }
    // A step's processes acting after the step's own process ended: its first such effect.
    for t in &parts.tool_calls {
        let Some(first) = &t.first_after_step else {
            continue;
        };
        let more = match t.after_step {
            0 | 1 => String::new(),
            n => format!(" ({n} effects after it)"),
        };
        out.push(Violation::in_step(
            ToolCallRef::Step(t.id.clone()),
            ViolationKind::Outlived,
            Some(first.pid),
            format!(
                "pid {} {} after step {} (pid {}) had ended{more}",
                first.pid, first.what, t.id, t.pid
            ),
        ));
    }
    if lost > 0 {
        let mut by: Vec<String> = lost_by.iter().map(|(k, n)| format!("{k} {n}")).collect();
        if let Some(n) = parts.failed_inserts.get("TRACED") {
            by.push(format!(
                "{n} processes not followed (the traced set was full)"
            ));
        }
        let how = match &parts.sequence {
            Some(s) => format!(
                "the kernel numbered {} records, {} arrived",
                s.numbered, s.received
            ),
            None => "ring buffer full".to_string(),
        };
        out.push(Violation::in_step(
            ToolCallRef::Agent,
            ViolationKind::Lost,
            None,
            format!(
                "{lost} events lost in the kernel ({how}; {}); the record is incomplete",
                by.join(", ")
            ),
        ));
    }
    // Left over: still running after the agent itself ended (run: the command; attach: the
    // attached process). Ended by --duration or a signal while it runs, nothing is left over
    // yet (what runs is still listed, running_at_end).
    // The agent's pid may have several entries (one per exec): ended when none still runs.
    let agent_ended = parts.target.pid.is_some_and(|pid| {
        let mut entries = processes.iter().filter(|p| p.pid == pid).peekable();
        entries.peek().is_some() && entries.all(|p| !p.running_at_end)
    });
    for p in processes
        .iter()
        .filter(|p| agent_ended && p.running_at_end && (!p.fork_only || p.preexisting))
    {
        out.push(Violation::in_step(
            p.tool_call.clone(),
            ViolationKind::Leftover,
            Some(p.pid),
            format!(
                "pid {} `{}` was still running when the capture ended",
                p.pid,
                name(p)
            ),
        ));
    }
    // One line for one finding: DNS questions of one name differ only in their type.
    let mut seen = std::collections::HashSet::new();
    out.retain(|v| seen.insert((v.kind, v.pid, v.summary.clone())));
    out
}

/// Writes that change no file: the null device, terminals, pipes and sockets.
fn not_a_file(f: &FileEntry) -> bool {
    const DEVICES: [&str; 7] = [
        "/dev/null",
        "/dev/zero",
        "/dev/full",
        "/dev/tty",
        "/dev/random",
        "/dev/urandom",
        "/dev/ptmx",
    ];
    DEVICES.contains(&f.path.as_str())
        || f.path.starts_with("/dev/pts/")
        || matches!(
            f.fs.as_deref(),
            Some("devpts" | "pipefs" | "sockfs" | "anon_inode")
        )
}

fn policy_allows(policy: &Policy, network: &[NetEntry], n: &NetEntry) -> bool {
    // --allow-net names IP networks: a packet socket's frames and a vsock connection (which
    // leaves by the hypervisor's transport, whatever the namespace) are in none of them.
    if n.device.is_some() || n.proto == "vsock" {
        return false;
    }
    let Some(addr) = n.addr.as_deref().and_then(|a| a.parse().ok()) else {
        return true;
    };
    if n.op == NetOp::Dns {
        return policy.allows_dns(n.name.as_deref().unwrap_or(""), addr);
    }
    // A connect to a resolver that carried allowed DNS questions is their transport (a UDP
    // socket connected to port 53, then send()); the questions are judged, not the socket.
    if n.op == NetOp::Connect
        && n.port == Some(53)
        && network.iter().any(|d| {
            d.op == NetOp::Dns
                && d.pid == n.pid
                && d.addr == n.addr
                && policy.allows_dns(d.name.as_deref().unwrap_or(""), addr)
        })
    {
        return true;
    }
    // The datagrams that carried DNS questions: the questions are judged, each on its own.
    // Only as many datagrams as questions were read: any more to port 53 (through an API
    // whose data the DNS decoder does not see, such as io_uring or write()) are judged as a
    // flow, so one allowed question cannot open a channel to any server's port 53.
    if n.op == NetOp::Send && n.port == Some(53) {
        let questions: u64 = network
            .iter()
            .filter(|d| d.op == NetOp::Dns && d.pid == n.pid && d.addr == n.addr)
            .map(|d| d.count)
            .sum();
        if questions > 0 && n.packets.unwrap_or(n.count) <= questions {
            return true;
        }
    }
    let names: Vec<&str> = network
        .iter()
        .filter(|d| d.op == NetOp::Dns && d.pid == n.pid)
        .filter_map(|d| d.name.as_deref())
        .collect();
    policy.allows(addr, n.port.unwrap_or(0), &names)
}

impl Report {
    /// The Markdown one-screen summary: the line to read first comes first.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let first = match self.violations.first() {
            Some(v) => format!(
                "**{}**: {}",
                v.kind.as_str().to_uppercase(),
                self.finding(v)
            ),
            None => "no violations".to_string(),
        };
        let verdict = self.verdict.shout();
        // A replayed log that failed its check: nothing below can be trusted, so that first.
        if let Some(log) = &self.log
            && log.chain.as_deref() == Some("tampered")
        {
            s.push_str(&format!(
                "## sandbox-watch: THIS LOG FAILED VERIFICATION — {}\n\nWhat follows was rebuilt from records that cannot be trusted.\n\n",
                log.chain_message.as_deref().unwrap_or("")
            ));
        }
        if let Some(log) = &self.log
            && log.chain.as_deref() == Some("unended")
        {
            s.push_str(&format!(
                "## sandbox-watch: THIS LOG HAS NO END RECORD — {}\n\nWhat follows stops where the log stops: processes listed as left running may have ended later, and event counts are unknown.\n\n",
                no_html(&clean(log.chain_message.as_deref().unwrap_or("")))
            ));
        }
        s.push_str(&format!("## sandbox-watch: {verdict} — {first}\n\n"));
        let target = match self.target.mode.as_str() {
            "run" => format!("`{}`", clean(&self.target.command.join(" "))),
            "attach" => format!("pid {}", self.target.pid.unwrap_or(0)),
            _ => self
                .target
                .container
                .as_ref()
                .map(|c| c.id.clone())
                .unwrap_or_default(),
        };
        s.push_str(&format!(
            "- **Run**: {} → {}, {} {target}, exit {}\n",
            self.started_at,
            self.ended_at,
            self.target.mode,
            match (self.exit.code, self.exit.signal) {
                (Some(c), _) => c.to_string(),
                (None, Some(sig)) => format!("signal {sig}"),
                _ => "n/a".into(),
            }
        ));
        let runs: Vec<&ProcessEntry> = self.processes.iter().filter(|p| !p.fork_only).collect();
        let (answers, failed): (Vec<&&ProcessEntry>, Vec<&&ProcessEntry>) = runs
            .iter()
            .filter(|p| p.exit_code.is_some_and(|c| c != 0) || p.signal.is_some())
            .partition(|p| answered_no(p).is_some());
        let answers: Vec<String> = answers.iter().filter_map(|p| answered_no(p)).collect();
        let failed: Vec<String> = failed.iter().map(|p| program(p)).collect();
        let longest = runs
            .iter()
            .filter(|p| !p.running_at_end)
            .max_by(|a, b| a.duration_ms.cmp(&b.duration_ms));
        s.push_str(&format!(
            "- **Commands**: {} ({} failed{}{}){}\n",
            runs.len(),
            failed.len(),
            if failed.is_empty() {
                String::new()
            } else {
                format!(": {}", counted(&failed))
            },
            if answers.is_empty() {
                String::new()
            } else {
                format!(
                    "; {} answered no with exit 1: {}",
                    answers.len(),
                    counted(&answers)
                )
            },
            longest.map_or(String::new(), |p| format!(
                ", longest {:.1} s ({})",
                p.duration_ms as f64 / 1000.0,
                program(p)
            ))
        ));
        // `--capture-output`: what each failed command said last on its stderr.
        for p in runs.iter().filter(|p| {
            (p.exit_code.is_some_and(|c| c != 0) || p.signal.is_some()) && answered_no(p).is_none()
        }) {
            let Some(line) = p
                .output
                .as_ref()
                .and_then(|o| o.stderr.as_ref())
                .and_then(|e| e.last_line())
            else {
                continue;
            };
            let line: String = line.chars().take(200).collect();
            s.push_str(&format!(
                "  - {} (pid {}, {}): {}\n",
                program(p),
                p.pid,
                match (p.exit_code, p.signal) {
                    (Some(c), _) => format!("exit {c}"),
                    (None, Some(sig)) => format!("signal {sig}"),
                    _ => "failed".into(),
                },
                no_html(&clean(&line))
            ));
        }
        // What could not be run: each path with its error, counted.
        let mut tried: BTreeMap<String, usize> = BTreeMap::new();
        for t in self.processes.iter().flat_map(|p| &p.tried) {
            let what = format!("`{}` ({})", no_html(&clean(&t.path)), t.result);
            *tried.entry(what).or_default() += 1;
        }
        if !tried.is_empty() {
            let shown: Vec<String> = tried
                .iter()
                .take(10)
                .map(|(what, n)| {
                    if *n > 1 {
                        format!("{what} ×{n}")
                    } else {
                        what.clone()
                    }
                })
                .collect();
            let more = tried.len().saturating_sub(10);
            s.push_str(&format!(
                "- **Tried to run**: {}{}\n",
                shown.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            ));
        }
        if let Some(line) = self.tool_calls_line() {
            s.push_str(&line);
        }
        // Distinct paths; a folded entry stands for `folded` files of its directory.
        let count = |op: Op| {
            let files = self
                .files
                .iter()
                .filter(|f| f.op == op && f.result.is_none() && !not_a_file(f));
            let (folded, paths): (Vec<&FileEntry>, Vec<&FileEntry>) =
                files.partition(|f| f.folded.is_some());
            let distinct = paths
                .iter()
                .map(|f| f.path.as_str())
                .collect::<std::collections::BTreeSet<_>>()
                .len();
            distinct as u64 + folded.iter().filter_map(|f| f.folded).sum::<u64>()
        };
        // Paths every open for write of which wrote nothing (`modified` false on each entry).
        let mut unchanged = std::collections::BTreeMap::new();
        for f in self.files.iter().filter(|f| {
            f.op == Op::Write && f.result.is_none() && f.folded.is_none() && !not_a_file(f)
        }) {
            let only_opened = unchanged.entry(f.path.as_str()).or_insert(true);
            *only_opened &= f.modified == Some(false);
        }
        let unchanged = unchanged.values().filter(|&&u| u).count();
        let written = match unchanged {
            0 => format!("{} written", count(Op::Write)),
            n => format!(
                "{} written ({n} of them opened for write and not written to)",
                count(Op::Write)
            ),
        };
        s.push_str(&format!(
            "- **Files**: {written}, {} created, {} removed, {} renamed, {} read\n",
            count(Op::Create),
            count(Op::Delete),
            count(Op::Rename),
            count(Op::Read)
        ));
        // A rename is named by where the file went.
        let landed = |f: &FileEntry| f.new_path.clone().unwrap_or_else(|| f.path.clone());
        let environ = |f: &FileEntry| crate::judge::classify::is_environ(&f.path);
        let creds: Vec<String> = self
            .files
            .iter()
            .filter(|f| f.credential && f.op == Op::Read && f.result.is_none() && !environ(f))
            .map(landed)
            .collect();
        // Then the grouped findings: `environ of 97 processes (ps, pid 12)`.
        let grouped: Vec<String> = environ_groups(&self.files)
            .iter()
            .filter(|g| g.read() > 0)
            .map(|g| {
                let who = self
                    .processes
                    .iter()
                    .rfind(|p| p.pid == g.pid && !p.argv.is_empty())
                    .map_or(String::new(), |p| format!("{}, ", program(p)));
                let n = g.read();
                let of = if n == 1 {
                    "1 process".to_string()
                } else {
                    format!("{n} processes")
                };
                format!("environ of {of} ({who}pid {})", g.pid)
            })
            .collect();
        let creds_changed: Vec<String> = self
            .files
            .iter()
            .filter(|f| f.credential && f.op != Op::Read && f.result.is_none())
            .map(|f| format!("{} ({})", landed(f), f.op.past()))
            .collect();
        let pers: Vec<String> = self
            .files
            .iter()
            .filter(|f| f.persistence && f.result.is_none())
            .map(landed)
            .collect();
        let escalations: Vec<String> = self
            .files
            .iter()
            .filter_map(|f| Some(escalation_summary(f, f.escalation.as_ref()?)))
            .collect();
        let (expected, failed): (Vec<&FileEntry>, Vec<&FileEntry>) = self
            .files
            .iter()
            .filter(|f| f.result.is_some() && !not_a_file(f))
            .partition(|f| expected_failure(&self.files, f));
        let failed: Vec<String> = failed
            .iter()
            .filter_map(|f| {
                Some(format!(
                    "{} {} ({})",
                    f.op.as_str(),
                    f.path,
                    f.result.as_ref()?
                ))
            })
            .collect();
        s.push_str(&format!(
            "- **Credentials read**: {}\n",
            list_ranked(&creds, &grouped)
        ));
        if !creds_changed.is_empty() {
            s.push_str(&format!(
                "- **Credentials changed**: {}\n",
                list_or_none(&creds_changed)
            ));
        }
        s.push_str(&format!(
            "- **Persistence written**: {}\n",
            list_or_none(&pers)
        ));
        if !escalations.is_empty() {
            s.push_str(&format!(
                "- **Escalation**: {}\n",
                no_html(&cut(&escalations.join("; "), 400))
            ));
        }
        if let Some(line) = self.mounts_line() {
            s.push_str(&line);
        }
        if !failed.is_empty() || !expected.is_empty() {
            let mut by: BTreeMap<&str, u64> = BTreeMap::new();
            for f in &expected {
                *by.entry(f.result.as_deref().unwrap_or("")).or_default() += f.count;
            }
            let expected = if by.is_empty() {
                String::new()
            } else {
                let by: Vec<String> = by.iter().map(|(e, n)| format!("{e} ×{n}")).collect();
                format!(
                    "{}{} expected (a tool's probing, in the report's files: {})",
                    if failed.is_empty() { "" } else { "; " },
                    expected.iter().map(|f| f.count).sum::<u64>(),
                    by.join(", ")
                )
            };
            s.push_str(&format!(
                "- **Refused or failed**: {}{expected}\n",
                if failed.is_empty() {
                    String::new()
                } else {
                    // Two rows or so; the report's files have every failure.
                    list_within(&failed, 240)
                }
            ));
        }
        s.push_str(&self.network_line());
        if let Some(t) = &self.transcript {
            // Nothing of the transcript's own text: it is the agent's.
            s.push_str(&format!(
                "- **Transcript**: {} declared, {} not seen, undeclared tool calls: {}{}\n",
                t.declared,
                t.unobserved.len(),
                if t.undeclared.is_empty() {
                    "none".to_string()
                } else {
                    let shown: Vec<String> = t
                        .undeclared
                        .iter()
                        .take(10)
                        .map(|id| format!("step {}", clean(id)))
                        .collect();
                    match t.undeclared.len().saturating_sub(10) {
                        0 => shown.join(", "),
                        more => format!("{} and {more} more", shown.join(", ")),
                    }
                },
                if t.problems.is_empty() {
                    String::new()
                } else {
                    format!(
                        " ({} problem(s) reading it: see the report)",
                        t.problems.len()
                    )
                }
            ));
        }
        if let Some(line) = self.packages_line() {
            s.push_str(&line);
        }
        if let Some(line) = self.git_line() {
            s.push_str(&line);
        }
        let left: Vec<String> = self
            .processes
            .iter()
            .filter(|p| p.running_at_end)
            .map(|p| format!("{} ({})", p.pid, program(p)))
            .collect();
        s.push_str(&format!("- **Left running**: {}\n", list_or_none(&left)));
        s.push_str(&format!(
            "- **Coverage**: {} events, {} lost, file opens via {}{}\n",
            self.coverage.events,
            self.coverage.lost,
            self.probe.file_open,
            if self.probe.gaps.is_empty() {
                String::new()
            } else {
                // What was not seen, without why: the report's probe.gaps says why.
                let gaps: Vec<&str> = self.probe.gaps.iter().map(|g| gap_name(g)).collect();
                format!(
                    "; not seen: {} (why: the report's probe.gaps)",
                    gaps.join("; ")
                )
            }
        ));
        // Each finding's step, grouped, on one row (the summary is one screen; the first line
        // has the first finding in full, the report's violations have them all).
        if let Some(line) = self.findings_line() {
            s.push_str(&line);
        }
        if let Some(log) = &self.log {
            // The full anchor: `verify --head` checks a log against it.
            s.push_str(&format!(
                "- **Log**: `{}` ({} records, head `{}`): `sandbox-watch verify --head {} --records {} {}`\n",
                clean(&log.path),
                log.records,
                log.head,
                log.head,
                log.records,
                shlex::try_quote(&log.path).map_or_else(|_| clean(&log.path), |q| clean(&q))
            ));
        }
        s
    }
}

/// At most `n` characters, the cut marked with `…`.
fn cut(text: &str, n: usize) -> String {
    if text.chars().count() <= n {
        return text.to_string();
    }
    let mut out: String = text.chars().take(n - 1).collect();
    out.push('…');
    out
}

impl Report {
    /// `- **Tool calls**: 6 (2 failed); acted after their step ended: step 3`, when the agent
    /// had steps.
    fn tool_calls_line(&self) -> Option<String> {
        if self.tool_calls.is_empty() {
            return None;
        }
        let failed = self
            .tool_calls
            .iter()
            .filter(|t| t.exit_code.is_some_and(|c| c != 0) || t.signal.is_some())
            .count();
        let outlived: Vec<String> = self
            .tool_calls
            .iter()
            .filter(|t| t.after_step > 0)
            .map(|t| format!("step {}", t.id))
            .collect();
        let shown = outlived
            .iter()
            .take(10)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        let line = format!(
            "- **Tool calls**: {} ({failed} failed){}",
            self.tool_calls.len(),
            match outlived.len() {
                0 => String::new(),
                1..=10 => format!("; acted after their step ended: {shown}"),
                n => format!(
                    "; acted after their step ended: {shown} and {} more",
                    n - 10
                ),
            }
        );
        Some(format!("{}\n", cut(&line, 119)))
    }

    /// `- **Findings by step**: step 5 outlived, step 2 credential ×2, the agent itself
    /// persistence`: in the findings' order, cut to one row; when the agent had steps.
    fn findings_line(&self) -> Option<String> {
        if self.tool_calls.is_empty() || self.violations.is_empty() {
            return None;
        }
        let mut groups: Vec<(String, &str, usize)> = Vec::new();
        for v in &self.violations {
            let who = match (&v.tool_call, v.pid) {
                (ToolCallRef::Step(id), _) => format!("step {}", clean(id)),
                (ToolCallRef::Agent, Some(_)) => "the agent itself".to_string(),
                _ => "no step".to_string(),
            };
            let kind = v.kind.as_str();
            match groups.iter_mut().find(|(w, k, _)| *w == who && *k == kind) {
                Some(g) => g.2 += 1,
                None => groups.push((who, kind, 1)),
            }
        }
        let items: Vec<String> = groups
            .iter()
            .map(|(who, kind, n)| match n {
                1 => format!("{who} {kind}"),
                n => format!("{who} {kind} ×{n}"),
            })
            .collect();
        let line = format!("- **Findings by step**: {}", items.join(", "));
        Some(format!("{}\n", cut(&line, 119)))
    }

    /// A violation as the summary says it: with the step it happened under ("step 2 `cat
    /// ~/.ssh/id_rsa`: pid 9 read credential …"), or "the agent itself" when there are steps
    /// and it was none of them.
    fn finding(&self, v: &Violation) -> String {
        let text = no_html(&clean(&v.summary));
        let step = v
            .tool_call
            .id()
            .and_then(|id| self.tool_calls.iter().find(|t| t.id == id));
        match (step, &v.tool_call) {
            (Some(t), _) => format!("{}: {text}", no_html(&t.name())),
            (None, ToolCallRef::Agent) if !self.tool_calls.is_empty() && v.pid.is_some() => {
                format!("the agent itself: {text}")
            }
            _ => text,
        }
    }

    /// The **Mounts and namespaces** line (pid 9 `mount --bind /home/u/.ssh /tmp/x`; pid 8
    /// `unshare(mnt,user)`), when the traced tree mounted something, took a tree, changed its
    /// root or a namespace: in the order they came, a repeat counted, cut to about three rows
    /// (the report's `mounts` has every call, the new mount API's fsopen, fsconfig, fsmount
    /// and fspick too).
    fn mounts_line(&self) -> Option<String> {
        let mut items: Vec<(String, usize)> = Vec::new();
        for m in self.mounts.iter().filter(|m| m.op.summarized()) {
            let one = format!("pid {} `{}`", m.pid, clean(&m.line()));
            match items.iter_mut().find(|(i, _)| *i == one) {
                Some((_, n)) => *n += 1,
                None => items.push((one, 1)),
            }
        }
        if items.is_empty() {
            return None;
        }
        let mut shown = String::new();
        let mut n = 0;
        for (item, count) in &items {
            let one = if *count > 1 {
                format!("{item} ×{count}")
            } else {
                item.clone()
            };
            if n > 0 && shown.chars().count() + 2 + one.chars().count() > 300 {
                break;
            }
            if n > 0 {
                shown.push_str("; ");
            }
            shown.push_str(&one);
            n += 1;
        }
        let more = match items.len() - n {
            0 => String::new(),
            more => format!(" and {more} more"),
        };
        Some(format!("- **Mounts and namespaces**: {shown}{more}\n"))
    }

    /// `- **Packages**: pip six 1.17.0, pip 24.0 (venv /w/.venv); apt tree 2.1.1`, when any:
    /// grouped by manager and where they went, each place named once.
    fn packages_line(&self) -> Option<String> {
        if self.packages.is_empty() {
            return None;
        }
        // (manager, where) and the packages there, in the order first seen.
        type Group<'a> = ((&'a str, String), Vec<String>);
        let mut groups: Vec<Group> = Vec::new();
        for p in self.packages.iter().take(20) {
            let place = match (p.scope.as_str(), &p.prefix) {
                ("system", None) => String::new(),
                (scope, Some(prefix)) => format!(" ({scope} {prefix})"),
                (scope, None) => format!(" ({scope})"),
            };
            let mut one = p.name.clone();
            if let Some(v) = &p.version {
                one.push_str(&format!(" {v}"));
            }
            if p.action == "remove" {
                one.push_str(" removed");
            }
            let key = (p.manager.as_str(), place);
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, names)) => names.push(one),
                None => groups.push((key, vec![one])),
            }
        }
        let items: Vec<String> = groups
            .iter()
            .map(|((manager, place), names)| {
                no_html(&clean(&format!("{manager} {}{place}", names.join(", "))))
            })
            .collect();
        let more = self.packages.len().saturating_sub(20);
        Some(format!(
            "- **Packages**: {}{}\n",
            items.join("; "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        ))
    }

    /// `- **Git**: 1 commit on main in /w/app (d403a31 'Greet the world')`, when any.
    fn git_line(&self) -> Option<String> {
        if self.git.is_empty() {
            return None;
        }
        // Commits grouped by repository and branch, in the order first seen.
        type Group<'a> = ((&'a str, Option<&'a str>), Vec<String>);
        let mut groups: Vec<Group> = Vec::new();
        for c in &self.git.commits {
            let key = (c.repo.as_str(), c.branch.as_deref());
            let subject = c
                .message
                .as_deref()
                .map(|m| m.split_once(": ").map_or(m, |(_, s)| s))
                .unwrap_or("");
            let id: String = c.commit.as_deref().unwrap_or("?").chars().take(7).collect();
            let one = format!("{id} '{subject}'");
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, v)) => v.push(one),
                None => groups.push((key, vec![one])),
            }
        }
        let mut parts: Vec<String> = groups
            .iter()
            .map(|((repo, branch), v)| {
                let shown: Vec<&String> = v.iter().take(3).collect();
                format!(
                    "{} commit{} on {} in {} ({}{})",
                    v.len(),
                    if v.len() == 1 { "" } else { "s" },
                    branch.unwrap_or("a detached HEAD"),
                    repo,
                    shown
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                    if v.len() > 3 { ", …" } else { "" }
                )
            })
            .collect();
        for p in &self.git.pushes {
            parts.push(format!(
                "push to {}",
                if p.hosts.is_empty() {
                    p.remote
                        .clone()
                        .unwrap_or_else(|| "its default remote".into())
                } else {
                    p.hosts.join(", ")
                }
            ));
        }
        Some(format!(
            "- **Git**: {}\n",
            no_html(&clean(&parts.join("; ")))
        ))
    }

    /// Destinations (connects that worked), refusals and failures, listeners left, DNS names.
    fn network_line(&self) -> String {
        use crate::state::network::destination;
        let pick = |f: &dyn Fn(&crate::state::network::NetEntry) -> bool| -> Vec<String> {
            self.network
                .iter()
                .filter(|n| f(n))
                .map(destination)
                .collect()
        };
        let reached = pick(&|n| n.op == NetOp::Connect && n.result == "ok");
        let refused = pick(&|n| n.op == NetOp::Connect && n.result != "ok");
        let left = pick(&|n| n.op == NetOp::Listen && n.listening_at_end == Some(true));
        let names: Vec<String> = self
            .network
            .iter()
            .filter(|n| n.op == NetOp::Dns)
            .filter_map(|n| n.name.clone())
            .collect();
        format!(
            "- **Network**: {}; refused or failed: {}; DNS: {}; listening at the end: {}\n",
            list_or_none(&reached),
            list_or_none(&refused),
            list_or_none(&names),
            list_or_none(&left)
        )
    }
}

/// A query whose exit status 1 is its answer, not a failure: `grep` found no match, `test`
/// was false, `cmp`/`diff` found a difference, `git check-ignore` found the path not ignored
/// (a coding agent runs it for each new file). Its name as the summary counts it.
fn answered_no(p: &ProcessEntry) -> Option<String> {
    if p.exit_code != Some(1) {
        return None;
    }
    let name = program(p);
    let args = p.argv.get(1..).unwrap_or_default();
    let has = |flag: &str| args.iter().any(|a| a == flag);
    match name.as_str() {
        "grep" | "egrep" | "fgrep" | "rg" | "test" | "[" | "cmp" | "diff" => Some(name),
        "git" => {
            // The subcommand: the first word after git's own options (-C DIR, -c K=V).
            let mut words = args.iter();
            let sub = loop {
                match words.next()?.as_str() {
                    "-C" | "-c" => {
                        words.next()?;
                    }
                    w if w.starts_with('-') => {}
                    w => break w,
                }
            };
            let yes = match sub {
                "check-ignore" | "grep" => true,
                "merge-base" => has("--is-ancestor"),
                "diff" | "diff-index" | "diff-files" => has("--quiet") || has("--exit-code"),
                _ => false,
            };
            yes.then(|| format!("git {sub}"))
        }
        _ => None,
    }
}

fn program(p: &ProcessEntry) -> String {
    p.argv
        .first()
        .or(p.exe.as_ref())
        .map(|a| no_html(&clean(a.rsplit('/').next().unwrap_or(a))))
        .unwrap_or_else(|| format!("pid {}", p.pid))
}

/// Text from the agent (paths, argv) made safe for one line of Markdown and for a terminal:
/// control characters are written as escapes (a newline in a path cannot start a line of the
/// summary, an ESC cannot reach the terminal), and a backtick, which would end a code span,
/// becomes a quote. The report and the log keep the text as it was.
pub fn clean(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '`' => out.push('\''),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Markdown outside a code span renders HTML: angle brackets as entities.
fn no_html(s: &str) -> String {
    s.replace('<', "&lt;").replace('>', "&gt;")
}

fn counted(names: &[String]) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for n in names {
        *counts.entry(n).or_default() += 1;
    }
    counts
        .iter()
        .map(|(n, c)| {
            if *c > 1 {
                format!("{n} ×{c}")
            } else {
                n.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// An escalation finding as the violations and the summary say it: `pid 7 changed the mode of
/// /w/x to 4755 (the setuid bit)`.
fn escalation_summary(f: &FileEntry, why: &str) -> String {
    // Raced names: both, the kernel used one.
    let raced = f.raced.as_ref();
    let path = match raced.filter(|r| r.path != f.path) {
        Some(r) => format!(
            "{} or {} (its names were rewritten during the call)",
            clean(&f.path),
            clean(&r.path)
        ),
        None => clean(&f.path),
    };
    let to = match (&f.mode, &f.xattr) {
        (Some(mode), _) if f.op == Op::Chmod => format!(" to {mode}"),
        (_, Some(name)) => match raced.and_then(|r| r.xattr.as_ref()).filter(|n| *n != name) {
            Some(other) => format!(
                " ({} or {}: the name was rewritten during the call)",
                clean(name),
                clean(other)
            ),
            None => format!(" ({})", clean(name)),
        },
        _ => String::new(),
    };
    match &f.result {
        Some(error) => format!(
            "pid {} tried to {} {path}{to} (failed: {error}; {why})",
            f.pid,
            f.op.attempt()
        ),
        None => format!("pid {} {} {path}{to} ({why})", f.pid, f.op.past()),
    }
}

/// `first` sorted (the files by name), then `then` in its order (grouped findings), at most
/// ten in all.
fn list_ranked(first: &[String], then: &[String]) -> String {
    let mut v: Vec<&String> = first.iter().collect();
    v.sort();
    v.dedup();
    v.extend(then);
    if v.is_empty() {
        return "none".into();
    }
    let shown: Vec<String> = v
        .iter()
        .take(10)
        .map(|p| format!("`{}`", clean(p)))
        .collect();
    if v.len() > 10 {
        format!("{} and {} more", shown.join(", "), v.len() - 10)
    } else {
        shown.join(", ")
    }
}

/// A gap without its reason: `file opens made through io_uring (the fentry hook …)` is
/// `file opens made through io_uring`.
fn gap_name(gap: &str) -> &str {
    gap.split_once(" (").map_or(gap, |(name, _)| name)
}

/// [`listed`] within `budget` characters.
fn list_within(items: &[String], budget: usize) -> String {
    listed(items, usize::MAX, budget)
}

/// [`listed`], at most ten; `none` for no items.
fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        return "none".into();
    }
    listed(items, 10, usize::MAX)
}

/// The distinct items, sorted and quoted, as many as fit in `at_most` items and `budget`
/// characters (always the first), then `and N more`.
fn listed(items: &[String], at_most: usize, budget: usize) -> String {
    let mut v: Vec<&String> = items.iter().collect();
    v.sort();
    v.dedup();
    let mut shown = String::new();
    let mut n = 0;
    for item in &v {
        let one = format!("`{}`", clean(item));
        if n > 0 && (n == at_most || shown.chars().count() + 2 + one.chars().count() > budget) {
            break;
        }
        if n > 0 {
            shown.push_str(", ");
        }
        shown.push_str(&one);
        n += 1;
    }
    match v.len() - n {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    fn file(v: serde_json::Value) -> FileEntry {
        let mut base = json!({"pid": 7, "credential": false, "verified": true,
            "persistence": false, "count": 1});
        base.as_object_mut()
            .unwrap()
            .extend(v.as_object().unwrap().clone());
        serde_json::from_value(base).unwrap()
    }

    #[test]
    fn one_allowed_dns_question_does_not_open_port_53_to_more_datagrams() {
        let policy = Policy::new(vec![
            crate::judge::netpolicy::parse_rule("example.com:443").unwrap(),
        ]);
        let entry = |v: serde_json::Value| -> NetEntry {
            let mut base = json!({"pid": 7, "proto": "udp", "addr": "203.0.113.9", "port": 53,
                "result": "ok", "verdict": "inside", "count": 1, "first_at": "", "last_at": ""});
            base.as_object_mut()
                .unwrap()
                .extend(v.as_object().unwrap().clone());
            serde_json::from_value(base).unwrap()
        };
        let question = entry(json!({"op": "dns", "name": "example.com", "count": 2}));
        let carried = entry(json!({"op": "send", "packets": 2}));
        let more = entry(json!({"op": "send", "packets": 40}));
        let network = vec![question.clone(), carried.clone(), more.clone()];
        assert!(policy_allows(&policy, &network, &question));
        assert!(policy_allows(&policy, &network, &carried));
        assert!(!policy_allows(&policy, &network, &more));
    }

    pub(crate) fn report(files: Vec<FileEntry>) -> Report {
        assemble(
            Parts {
                target: Target {
                    mode: "run".into(),
                    command: vec!["agent".into()],
                    pid: Some(7),
                    container: None,
                    dropped_capabilities: Vec::new(),
                },
                agent: Agent {
                    pid: Some(7),
                    netns: Some(1),
                },
                started_at: "2026-11-30T00:00:00Z".into(),
                ended_at: "2026-11-30T00:00:01Z".into(),
                exit: Exit::default(),
                probe: ProbeInfo::new("tracepoint".into(), vec![]),
                events: 10,
                lost_by_kind: BTreeMap::new(),
                undecodable: 0,
                processes: vec![],
                files,
                network: vec![],
                mounts: vec![],
                tampers: vec![],
                tool_calls: vec![],
                packages: vec![],
                git: Git::default(),
                redactions: 0,
                lost: None,
                sequence: None,
                failed_inserts: BTreeMap::new(),
                tamper: vec![],
            },
            &Policy::new(vec![]),
        )
    }

    #[test]
    fn the_mounts_line_keeps_their_order_counts_repeats_and_is_cut() {
        let mut r = report(vec![]);
        assert!(!r.summary().contains("Mounts"), "no line without mounts");
        let m = |pid: u32, v: serde_json::Value| {
            let mut base = json!({"pid": pid, "op": "mount"});
            base.as_object_mut()
                .unwrap()
                .extend(v.as_object().unwrap().clone());
            serde_json::from_value::<MountEntry>(base).unwrap()
        };
        r.mounts = vec![
            m(8, json!({"op": "unshare", "namespaces": ["mnt", "user"]})),
            m(
                9,
                json!({"source": "/h/.ssh", "target": "/tmp/x", "flags": ["bind"]}),
            ),
            m(9, json!({"op": "fsopen", "fstype": "tmpfs"})),
            m(8, json!({"op": "unshare", "namespaces": ["mnt", "user"]})),
        ];
        let line = |r: &Report| {
            r.summary()
                .lines()
                .find(|l| l.starts_with("- **Mounts"))
                .unwrap()
                .to_string()
        };
        assert_eq!(
            line(&r),
            "- **Mounts and namespaces**: pid 8 `unshare(mnt,user)` ×2; pid 9 `mount --bind /h/.ssh /tmp/x`"
        );
        for i in 0..40 {
            r.mounts
                .push(m(10, json!({"op": "chroot", "target": format!("/r{i}")})));
        }
        let cut = line(&r);
        assert!(cut.ends_with("`chroot /r10` and 29 more"), "{cut}");
    }

    #[test]
    fn environ_reads_are_one_finding_after_the_key_and_probing_is_not_listed() {
        // `ps` (pid 9) opens 100 environs, 3 of processes that had gone; cat (pid 7) reads
        // the key; a shell appends to .bashrc; rm's unlink of a directory fails EISDIR and
        // its rmdir then works; a write is really refused.
        let mut files: Vec<FileEntry> = (0..100)
            .map(|i| {
                let result = (i < 3).then_some("ESRCH");
                file(
                    json!({"pid": 9, "op": "read", "path": format!("/proc/{}/environ", 1000 + i),
                    "credential": true, "result": result}),
                )
            })
            .collect();
        files.push(file(
            json!({"op": "read", "path": "/h/.ssh/id_rsa", "credential": true}),
        ));
        files.push(file(
            json!({"pid": 8, "op": "write", "path": "/h/.bashrc", "persistence": true}),
        ));
        files.push(file(
            json!({"pid": 5, "op": "delete", "path": "/p/build", "result": "EISDIR"}),
        ));
        files.push(file(json!({"pid": 5, "op": "delete", "path": "/p/build"})));
        files.push(file(
            json!({"pid": 5, "op": "write", "path": "/etc/passwd", "result": "EROFS"}),
        ));
        files.push(file(
            json!({"pid": 5, "op": "read", "path": "/proc/77/cmdline", "result": "ESRCH"}),
        ));
        let mut r = report(files);
        let environ: Vec<&Violation> = r
            .violations
            .iter()
            .filter(|v| v.summary.contains("environ"))
            .collect();
        assert_eq!(environ.len(), 1, "{:#?}", r.violations);
        let e = environ[0];
        assert_eq!(e.kind, ViolationKind::Credential);
        assert_eq!(e.subject.as_deref(), Some("environ"));
        assert_eq!(e.pid, Some(9));
        assert_eq!(e.count, Some(100));
        assert_eq!(e.paths.len(), 100);
        assert_eq!(e.failed, BTreeMap::from([("ESRCH".to_string(), 3)]));
        assert_eq!(
            e.summary,
            "pid 9 read the environment of 100 processes (3 failed: ESRCH ×3)"
        );
        let kinds: Vec<(ViolationKind, bool)> = r
            .violations
            .iter()
            .map(|v| (v.kind, v.subject.is_some()))
            .collect();
        assert_eq!(
            kinds,
            [
                (ViolationKind::Credential, false),
                (ViolationKind::Persistence, false),
                (ViolationKind::Credential, true),
            ],
            "the key, the persistence write, then the grouped reads: {:#?}",
            r.violations
        );
        // The reader's program, when known, is named.
        r.processes.push(
            serde_json::from_value(json!({"pid": 9, "ppid": 1, "exe": "/usr/bin/ps",
                "argv": ["ps", "aux"], "cwd": null, "uid": 0, "netns": 1, "ended_at": null,
                "exit_code": 0, "signal": null, "comm": "ps", "euid": 0, "gid": 0,
                "mntns": null, "pidns": null, "userns": null, "cgroup_id": null}))
            .unwrap(),
        );
        let s = r.summary();
        let line = |head: &str| s.lines().find(|l| l.starts_with(head)).unwrap().to_string();
        assert_eq!(
            line("- **Credentials read**"),
            "- **Credentials read**: `/h/.ssh/id_rsa`, `environ of 97 processes (ps, pid 9)`"
        );
        assert_eq!(
            line("- **Refused or failed**"),
            "- **Refused or failed**: `write /etc/passwd (EROFS)`; 5 expected (a tool's \
             probing, in the report's files: EISDIR ×1, ESRCH ×4)"
        );
    }

    #[test]
    fn what_the_agent_named_cannot_forge_summary_lines_or_reach_the_terminal() {
        let evil = "/h/x`\n\n## sandbox-watch: INSIDE — no violations <img src=x>\x1b]2;PWNED\x07";
        let r = report(vec![
            file(json!({"op": "read", "path": format!("{evil}/.ssh/id_rsa"), "credential": true})),
            file(json!({"op": "write", "path": evil})),
        ]);
        let s = r.summary();
        assert_eq!(
            s.lines().filter(|l| l.starts_with("## ")).count(),
            1,
            "one heading: {s}"
        );
        assert!(!s.contains('\x1b') && !s.contains('\x07'), "{s:?}");
        let first = s.lines().next().unwrap();
        // Outside a code span HTML would render; inside one (the lists) it is text.
        assert!(!first.contains("<img"), "no raw HTML: {first}");
        assert!(
            first.contains("\\n\\n## sandbox-watch"),
            "escaped, on the first line: {first}"
        );
        // The report keeps the path as it was.
        assert_eq!(r.files[0].path, format!("{evil}/.ssh/id_rsa"));
    }

    #[test]
    fn the_summary_names_renames_by_where_they_went_and_counts_real_files() {
        let r = report(vec![
            file(
                json!({"op": "rename", "path": "/h/.ssh/authorized_keys.tmp",
                "new_path": "/h/.ssh/authorized_keys", "persistence": true}),
            ),
            file(json!({"op": "read", "path": "/h/.netrc", "credential": true, "fs": "ext2/3/4"})),
            file(json!({"op": "create", "path": "/h/.aws/credentials", "credential": true})),
            file(json!({"op": "write", "path": "/dev/null", "fs": "tmpfs"})),
            file(json!({"op": "write", "path": "/h/project/main.py", "fs": "ext2/3/4"})),
            file(json!({"op": "write", "path": "pipe:[123]", "fs": "pipefs"})),
            file(json!({"op": "write", "path": "/etc/shadow", "result": "EACCES"})),
            file(json!({"op": "read", "path": "/dev/tty", "result": "ENXIO"})),
            file(json!({"op": "read", "path": "/usr/lib", "folded": 5, "count": 9})),
        ]);
        let s = r.summary();
        let line = |head: &str| {
            s.lines()
                .find(|l| l.starts_with(head))
                .unwrap_or_else(|| panic!("{head} in {s}"))
                .to_string()
        };
        assert!(
            line("- **Files**")
                .starts_with("- **Files**: 1 written, 1 created, 0 removed, 1 renamed, 6 read"),
            "{s}"
        );
        let pers = line("- **Persistence written**");
        assert!(
            pers.contains("/h/.ssh/authorized_keys") && !pers.contains(".tmp"),
            "{pers}"
        );
        let read = line("- **Credentials read**");
        assert!(
            read.contains("/h/.netrc") && !read.contains(".aws"),
            "{read}"
        );
        assert!(line("- **Credentials changed**").contains("/h/.aws/credentials (created)"));
        // A failed open is listed as such, not counted as a change; a device's is left out.
        assert_eq!(
            line("- **Refused or failed**"),
            "- **Refused or failed**: `write /etc/shadow (EACCES)`"
        );
        // No credential changed: no such line.
        let quiet = report(vec![file(
            json!({"op": "read", "path": "/h/.netrc", "credential": true}),
        )]);
        assert!(!quiet.summary().contains("Credentials changed"));
    }

    /// A query's exit 1 is its answer (a coding agent runs `git check-ignore` for each new
    /// file): counted apart from the failures, which stay failures.
    #[test]
    fn a_query_answering_no_is_not_a_failed_command() {
        let mut r = report(Vec::new());
        let run = |pid: u32, argv: &[&str], exit: i32| -> ProcessEntry {
            serde_json::from_value(json!({"pid": pid, "ppid": 1, "exe": null, "argv": argv,
                "cwd": null, "uid": 0, "netns": 1, "ended_at": null, "exit_code": exit,
                "signal": null, "comm": "x", "euid": 0, "gid": 0, "mntns": null, "pidns": null,
                "userns": null, "cgroup_id": null}))
            .unwrap()
        };
        r.processes = vec![
            run(10, &["git", "check-ignore", "-q", "--", "a"], 1),
            run(11, &["/usr/bin/git", "-C", "/w", "check-ignore", "b"], 1),
            run(12, &["grep", "-q", "x", "f"], 1),
            run(13, &["grep", "x", "missing"], 2),
            run(14, &["git", "push"], 1),
            run(15, &["git", "-c", "diff", "status"], 1),
            run(16, &["false"], 1),
            run(17, &["ls"], 0),
        ];
        let s = r.summary();
        let line = s.lines().find(|l| l.starts_with("- **Commands**")).unwrap();
        assert!(
            line.starts_with(
                "- **Commands**: 8 (4 failed: false, git ×2, grep; 3 answered no with exit 1: \
                 git check-ignore ×2, grep)"
            ),
            "{line}"
        );
    }

    /// A real CLI session's long lists (seven failures under a deep directory, a venv's three
    /// packages, two gaps with their reasons) stay one screen: each line stays about its
    /// rows, and says how much more the report has.
    #[test]
    fn long_lists_keep_the_summary_one_screen() {
        let deep = "/check/work/main/target/agent-sessions/sw-agent-c7ncX6";
        let mut files: Vec<FileEntry> = ["python", "python3", "python3.11", "lib64", "lib", "x"]
            .iter()
            .map(|n| {
                file(
                    json!({"op": "read", "path": format!("{deep}/proj/.venv/bin/{n}"),
                    "result": "ELOOP"}),
                )
            })
            .collect();
        files.push(file(json!({"op": "delete",
            "path": format!("{deep}/home/.claude/plugins/store"), "result": "ENOTEMPTY"})));
        let mut r = report(files);
        let venv = format!("{deep}/proj/.venv");
        r.packages = ["setuptools", "pip", "tinypkg"]
            .iter()
            .map(|name| Package {
                manager: "pip".into(),
                name: name.to_string(),
                version: Some("1.0".into()),
                scope: "venv".into(),
                prefix: Some(venv.clone()),
                action: "install".into(),
                pid: 9,
                evidence: String::new(),
                verdict: Verdict::Inside,
            })
            .collect();
        r.probe.gaps = vec![
            crate::kernel::probe::IO_URING_GAP.to_string(),
            "kernel module loads by init_module calls (tracepoint/syscalls/sys_enter_init_module \
             could not be attached: this kernel has no such tracepoint)"
                .to_string(),
        ];
        let s = r.summary();
        let line = |head: &str| s.lines().find(|l| l.starts_with(head)).unwrap().to_string();
        let rows = |l: &str| l.chars().count().div_ceil(120);
        let failed = line("- **Refused or failed**");
        assert!(rows(&failed) <= 3, "{failed}");
        assert!(
            failed.contains(" more"),
            "says the rest is elsewhere: {failed}"
        );
        assert!(
            failed.contains("(ENOTEMPTY)`"),
            "sorted: the delete first: {failed}"
        );
        assert_eq!(
            line("- **Packages**"),
            format!("- **Packages**: pip setuptools 1.0, pip 1.0, tinypkg 1.0 (venv {venv})")
        );
        let coverage = line("- **Coverage**");
        assert!(
            coverage.ends_with(
                "not seen: some io_uring opens; kernel module loads by init_module calls \
                 (why: the report's probe.gaps)"
            ),
            "{coverage}"
        );
    }
}
