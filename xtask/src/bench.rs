//! `cargo xtask bench`: what watching costs, measured on this machine.
//!
//! Three workloads time themselves (through `bench-helper timed`, so a monitor's start-up is
//! never in the measured time): an exec storm (fork+exec of `/bin/true` from a shell loop), an
//! open storm (open/close of one file, `open-storm`) and a short agent session (git, python,
//! sed, ls), a signal storm (kill(2) of itself, the syscall and tracepoint the tamper
//! hooks of issue 13 sit on), and a write storm (4 KiB written to each of 1,000 files and
//! closed, 20 times over: every write dirties an inode, where the hook of issue 15 item 5 sits). Each runs unmonitored, traced by `sandbox-watch run`, and outside the traced set
//! while `sandbox-watch attach` watches an idle process; the conditions alternate within every
//! round (their order rotating from round to round) and the median of the rounds is compared
//! with the unmonitored median. Installed peers (strace -f, bpftrace, auditd) run the two storms
//! in the same rounds.
//!
//! Also measured: events and lost records per traced run, the monitor's CPU time and peak RSS,
//! the time from starting `sandbox-watch run` to the workload's first exec, the delay from an
//! exec in the kernel to its line in the log (p50, p99), and the monitor's peak RSS over a
//! capture of about 1,000,000 records: log only, with the report, and with the report and
//! `--otlp` to a real collector on loopback (rotel, exporting to its blackhole), whose extra
//! CPU per record is the export's cost.
//!
//! Output: a table on stdout, progress on stderr, and a JSON file (`--json`, default
//! `target/bench/bench.json`).
use std::fs::File;
use std::io::{BufRead as _, BufReader, Read as _, Seek as _, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail};
use serde_json::{Value, json};

mod conditions;
mod peers;
mod results;

use conditions::*;
use peers::*;
use results::*;

/// What `cargo xtask bench` was asked for.
pub struct Options {
    /// Rounds (median taken); default 7, or 3 with `quick`.
    pub runs: Option<usize>,
    /// Fewer rounds and smaller workloads, for development.
    pub quick: bool,
    /// Where the JSON goes (default target/bench/bench.json).
    pub json: Option<PathBuf>,
    /// Leave strace, bpftrace and auditd out.
    pub no_peers: bool,
    /// Only the captures of about 1,000,000 records, at full size.
    pub memory_only: bool,
    /// Another sandbox-watch binary run traced and outside in the same rounds.
    pub baseline: Option<PathBuf>,
    /// Only these workloads (their keys); empty: all. Leaves the latency and memory out.
    pub workloads: Vec<String>,
}

/// The issue's targets (issue 8): ratios to the unmonitored run, and memory.
const TARGET_TRACED_EXEC: f64 = 1.10;
const TARGET_TRACED_OPEN: f64 = 1.50;
const TARGET_OUTSIDE: f64 = 1.05;
/// The output storm: traced (every write read and hashed) and outside the traced set (one
/// map lookup per write) (issue 19).
const TARGET_TRACED_OUTPUT: f64 = 1.30;
const TARGET_OUTSIDE_OUTPUT: f64 = 1.03;
/// Issue 14: a traced UDP storm within 1.3× (of the kernel's floor there; here of the
/// unmonitored run, which is stricter: the floor itself costs a few percent).
const TARGET_TRACED_UDP: f64 = 1.30;
/// Issue 14: outside the traced set within 3% of the floor (one no-op program on the syscall
/// tracepoint the storm makes; what any syscall tracepoint program costs every task).
const TARGET_OUTSIDE_FLOOR: f64 = 1.03;

/// The floor: a no-op program on a tracepoint of each storm's system call (the entry; for the
/// output storm's write, the exit, where the output probe is).
const FLOOR_PROGRAM: &str = "tracepoint:syscalls:sys_enter_execve, tracepoint:syscalls:sys_enter_openat, tracepoint:syscalls:sys_enter_sendto, tracepoint:syscalls:sys_enter_connect, tracepoint:syscalls:sys_enter_kill, tracepoint:syscalls:sys_exit_write { }";
const FLOOR_TRACEPOINTS: usize = 6;
const TARGET_RSS_MB: f64 = 64.0;

const BPFTRACE_PROGRAM: &str = r#"tracepoint:syscalls:sys_enter_execve { printf("%s\n", str(args->filename)); } tracepoint:syscalls:sys_enter_openat { printf("%s\n", str(args->filename)); }"#;
const AUDIT_RULE: [&str; 9] = [
    "always,exit",
    "-F",
    "arch=b64",
    "-S",
    "execve",
    "-S",
    "openat",
    "-k",
    "sandbox-watch-bench",
];

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

fn check_interrupted() -> anyhow::Result<()> {
    if INTERRUPTED.load(Ordering::SeqCst) {
        bail!("interrupted");
    }
    Ok(())
}

fn progress(msg: impl AsRef<str>) {
    eprintln!("bench: {}", msg.as_ref());
}

/// Sizes of one benchmark run.
struct Sizes {
    rounds: usize,
    execs: u64,
    opens: u64,
    /// 4 KiB writes of the output storm.
    output_writes: u64,
    /// kill(2) calls of the signal storm.
    signals: u64,
    /// Files of the write storm (4 KiB each), and how many times each is written.
    write_files: u64,
    write_passes: u64,
    commits: u64,
    markers: u64,
    marker_interval_ms: u64,
    mem_files: u64,
    mem_procs: u64,
    datagrams: u64,
    connects: u64,
}

impl Sizes {
    fn new(o: &Options) -> Sizes {
        let (rounds, s) = if o.quick && !o.memory_only {
            (
                3,
                Sizes {
                    rounds: 0,
                    execs: 300,
                    opens: 50_000,
                    output_writes: 6400,
                    signals: 50_000,
                    write_files: 1000,
                    write_passes: 5,
                    commits: 3,
                    markers: 50,
                    marker_interval_ms: 20,
                    mem_files: 200,
                    mem_procs: 250,
                    datagrams: 50_000,
                    connects: 1000,
                },
            )
        } else {
            (
                7,
                Sizes {
                    rounds: 0,
                    execs: 1000,
                    opens: 200_000,
                    output_writes: 25_600,
                    signals: 200_000,
                    write_files: 1000,
                    write_passes: 20,
                    commits: 5,
                    markers: 200,
                    marker_interval_ms: 20,
                    mem_files: 1000,
                    mem_procs: 1000,
                    datagrams: 200_000,
                    connects: 5000,
                },
            )
        };
        Sizes {
            rounds: o.runs.unwrap_or(rounds).max(1),
            ..s
        }
    }
}

/// The programs and the scratch directory.
struct Ctx {
    sw: PathBuf,
    /// `--baseline`: the other sandbox-watch binary.
    baseline: Option<PathBuf>,
    helper: PathBuf,
    open_storm: PathBuf,
    python: String,
    work: PathBuf,
    sizes: Sizes,
    next_id: u64,
}

impl Ctx {
    /// A fresh directory for one run's files.
    fn scratch(&mut self) -> anyhow::Result<PathBuf> {
        self.next_id += 1;
        let dir = self.work.join(format!("run-{:04}", self.next_id));
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Workload {
    ExecStorm,
    OpenStorm,
    UdpStorm,
    TcpStorm,
    Agent,
    OutputStorm,
    SignalStorm,
    WriteStorm,
}

const WORKLOADS: [Workload; 8] = [
    Workload::ExecStorm,
    Workload::OpenStorm,
    Workload::UdpStorm,
    Workload::TcpStorm,
    Workload::Agent,
    Workload::OutputStorm,
    Workload::SignalStorm,
    Workload::WriteStorm,
];

impl Workload {
    fn key(self) -> &'static str {
        match self {
            Workload::ExecStorm => "exec_storm",
            Workload::OpenStorm => "open_storm",
            Workload::UdpStorm => "udp_storm",
            Workload::TcpStorm => "tcp_connect_storm",
            Workload::Agent => "agent_session",
            Workload::OutputStorm => "output_storm",
            Workload::SignalStorm => "signal_storm",
            Workload::WriteStorm => "write_storm",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Workload::ExecStorm => "exec storm",
            Workload::OpenStorm => "open storm",
            Workload::UdpStorm => "UDP storm",
            Workload::TcpStorm => "TCP storm",
            Workload::Agent => "agent session",
            Workload::OutputStorm => "output storm",
            Workload::SignalStorm => "signal storm",
            Workload::WriteStorm => "write storm",
        }
    }

    fn describe(self, s: &Sizes) -> String {
        match self {
            Workload::ExecStorm => format!("{} fork+exec of /bin/true from a sh loop", s.execs),
            Workload::OpenStorm => format!("{} open/close of one file (open-storm)", s.opens),
            Workload::OutputStorm => format!(
                "{} MiB to a pipe in 4 KiB writes (dd | wc -c)",
                s.output_writes / 256
            ),
            Workload::SignalStorm => format!(
                "{} kill(getpid(), SIGUSR1), ignored (bench-helper signals)",
                s.signals
            ),
            Workload::WriteStorm => format!(
                "{} passes of 4 KiB written to each of {} files and closed (bench-helper writes; files made in the warm-up)",
                s.write_passes, s.write_files
            ),
            Workload::UdpStorm => format!(
                "{} sendto of 64 bytes to a loopback UDP socket of its own (bench-helper udp)",
                s.datagrams
            ),
            Workload::TcpStorm => format!(
                "{} connect+accept+close to a loopback listener of its own (bench-helper tcp)",
                s.connects
            ),
            Workload::Agent => format!(
                "git init + {} edit/add/commit rounds (sed), a python3 run, git log/status/diff, ls -R",
                s.commits
            ),
        }
    }

    /// The traced-run target (ratio to unmonitored), if the issue sets one.
    fn traced_target(self) -> Option<f64> {
        match self {
            Workload::ExecStorm => Some(TARGET_TRACED_EXEC),
            Workload::OpenStorm => Some(TARGET_TRACED_OPEN),
            Workload::UdpStorm => Some(TARGET_TRACED_UDP),
            Workload::TcpStorm | Workload::Agent | Workload::SignalStorm | Workload::WriteStorm => {
                None
            }
            Workload::OutputStorm => Some(TARGET_TRACED_OUTPUT),
        }
    }

    /// The target outside the traced set (ratio to unmonitored).
    fn outside_target(self) -> f64 {
        match self {
            Workload::OutputStorm => TARGET_OUTSIDE_OUTPUT,
            _ => TARGET_OUTSIDE,
        }
    }

    /// The storms the peers (strace, bpftrace, auditd) run too.
    fn storm(self) -> bool {
        matches!(
            self,
            Workload::ExecStorm
                | Workload::OpenStorm
                | Workload::UdpStorm
                | Workload::TcpStorm
                | Workload::SignalStorm
                | Workload::OutputStorm
                | Workload::WriteStorm
        )
    }

    /// The command line; `dir` is this run's scratch directory.
    fn argv(self, ctx: &Ctx, dir: &Path) -> Vec<String> {
        match self {
            Workload::ExecStorm => vec![
                "/bin/sh".into(),
                "-c".into(),
                format!(
                    "i=0; while [ $i -lt {} ]; do /bin/true; i=$((i+1)); done",
                    ctx.sizes.execs
                ),
            ],
            Workload::OpenStorm => vec![
                ctx.open_storm.display().to_string(),
                ctx.sizes.opens.to_string(),
                ctx.work.join("open-storm.dat").display().to_string(),
            ],
            Workload::OutputStorm => vec![
                "/bin/sh".into(),
                "-c".into(),
                format!(
                    "dd if=/dev/zero bs=4096 count={} status=none | wc -c > /dev/null",
                    ctx.sizes.output_writes
                ),
            ],
            Workload::UdpStorm => vec![
                ctx.helper.display().to_string(),
                "udp".into(),
                ctx.sizes.datagrams.to_string(),
            ],
            Workload::TcpStorm => vec![
                ctx.helper.display().to_string(),
                "tcp".into(),
                ctx.sizes.connects.to_string(),
            ],
            Workload::SignalStorm => vec![
                ctx.helper.display().to_string(),
                "signals".into(),
                ctx.sizes.signals.to_string(),
            ],
            // The same files every run (made by the warm-up run): creating them would measure
            // ext4's inode allocation, slow and erratic after the machine's many deletions.
            Workload::WriteStorm => vec![
                ctx.helper.display().to_string(),
                "writes".into(),
                ctx.work.join("write-storm").display().to_string(),
                ctx.sizes.write_files.to_string(),
                ctx.sizes.write_passes.to_string(),
            ],
            Workload::Agent => vec![
                "/bin/sh".into(),
                ctx.work.join("agent.sh").display().to_string(),
                dir.join("agent").display().to_string(),
                ctx.sizes.commits.to_string(),
                ctx.python.clone(),
            ],
        }
    }
}

/// The realistic agent session: `agent.sh DIR COMMITS PYTHON`.
const AGENT_SCRIPT: &str = r#"#!/bin/sh
# A short agent session: a repository, edits with sed, commits, a python run, a listing.
set -e
dir=$1; commits=$2; py=$3
mkdir -p "$dir"; cd "$dir"
git init -q repo; cd repo
git config user.email bench@example.invalid
git config user.name bench
git config commit.gpgsign false
i=1
while [ $i -le $commits ]; do
  printf 'def step%d(x):\n    return x + %d\n' $i $i > "mod$i.py"
  printf '# step %d\nTODO: step %d\n' $i $i >> NOTES.md
  sed -i "s/x + $i/x * $i/" "mod$i.py"
  sed -i 's/TODO/DONE/' NOTES.md
  git add -A
  git commit -q -m "step $i"
  i=$((i+1))
done
"$py" - <<'EOF'
import collections, csv, hashlib, json, os, pathlib, re, subprocess, textwrap, unittest
counts = collections.Counter()
digests = {}
for p in sorted(pathlib.Path('.').glob('*.py')):
    text = p.read_text()
    compile(text, str(p), 'exec')
    counts.update(re.findall(r'\w+', text))
    digests[p.name] = hashlib.sha256(text.encode()).hexdigest()
pathlib.Path('summary.json').write_text(json.dumps({'words': counts.most_common(5), 'files': digests}))
EOF
git log --oneline > /dev/null
git status --short > /dev/null
git diff HEAD~1 --stat > /dev/null
ls -R . > /dev/null
"#;

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Cond {
    Unmonitored,
    Floor,
    Traced,
    Outside,
    BaseTraced,
    BaseOutside,
    Strace,
    Bpftrace,
    Auditd,
}

impl Cond {
    fn key(self) -> &'static str {
        match self {
            Cond::Unmonitored => "unmonitored",
            Cond::Floor => "floor",
            Cond::Traced => "traced",
            Cond::Outside => "outside",
            Cond::BaseTraced => "baseline_traced",
            Cond::BaseOutside => "baseline_outside",
            Cond::Strace => "strace",
            Cond::Bpftrace => "bpftrace",
            Cond::Auditd => "auditd",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Cond::Unmonitored => "unmonitored",
            Cond::Floor => "floor (no-op tp)",
            Cond::Traced => "traced (run)",
            Cond::Outside => "outside (attach)",
            Cond::BaseTraced => "baseline traced",
            Cond::BaseOutside => "baseline outside",
            Cond::Strace => "strace -f",
            Cond::Bpftrace => "bpftrace",
            Cond::Auditd => "auditd",
        }
    }
}

/// One measured run.
#[derive(Clone, Default)]
struct Sample {
    ms: f64,
    /// The workload's own CPU time (user+sys of its whole tree): the probes' in-kernel cost
    /// lands here, and it moves less than wall time with other load on the machine.
    workload_cpu_ms: f64,
    events: Option<u64>,
    /// Records lost, output chunks included.
    lost: Option<u64>,
    /// Of them, output chunks: a program printing faster than the monitor hashes (SHA-256)
    /// loses these, and only these (their own ring; the stream's sha256 is null then).
    output_lost: Option<u64>,
    cpu_user_ms: Option<f64>,
    cpu_sys_ms: Option<f64>,
    /// The monitor's CPU (user+sys) from attached to its exit: the part events cost.
    watch_cpu_ms: Option<f64>,
    rss_mb: Option<f64>,
    attach_ms: Option<f64>,
}

impl Sample {
    fn json(&self) -> Value {
        json!({
            "ms": round3(self.ms),
            "workload_cpu_ms": round3(self.workload_cpu_ms),
            "events": self.events,
            "lost": self.lost,
            "output_lost": self.output_lost,
            "monitor_cpu_user_ms": self.cpu_user_ms.map(round3),
            "monitor_cpu_sys_ms": self.cpu_sys_ms.map(round3),
            "monitor_cpu_after_attach_ms": self.watch_cpu_ms.map(round3),
            "monitor_peak_rss_mb": self.rss_mb.map(round3),
            "attach_ms": self.attach_ms.map(round3),
        })
    }
}

/// All samples of one workload × condition.
struct Cell {
    workload: Workload,
    cond: Cond,
    samples: Vec<Sample>,
}

/// What `bench-helper timed` wrote.
struct Timed {
    elapsed_ns: u64,
    utime_us: i64,
    stime_us: i64,
    kids_maxrss_kb: i64,
}

impl Timed {
    fn read(path: &Path) -> anyhow::Result<Timed> {
        let v: Value = serde_json::from_str(
            &std::fs::read_to_string(path)
                .with_context(|| format!("the workload wrote no timing ({})", path.display()))?,
        )?;
        let status = v["status"].as_i64().unwrap_or(-1);
        if status != 0 {
            bail!("the workload failed (status {status})");
        }
        Ok(Timed {
            elapsed_ns: v["elapsed_ns"].as_u64().context("elapsed_ns")?,
            utime_us: v["utime_us"].as_i64().unwrap_or(0),
            stime_us: v["stime_us"].as_i64().unwrap_or(0),
            kids_maxrss_kb: v["kids_maxrss_kb"].as_i64().unwrap_or(0),
        })
    }

    fn ms(&self) -> f64 {
        self.elapsed_ns as f64 / 1e6
    }

    fn cpu_ms(&self) -> f64 {
        (self.utime_us + self.stime_us) as f64 / 1e3
    }
}

// ---------------------------------------------------------------- latency and memory

/// The delay from an exec in the kernel (the log line's `at`) to the moment its line can be
/// read from the log: `markers` execs of `/bin/true marker-N`, the log polled every 2 ms.
fn latency(ctx: &mut Ctx) -> anyhow::Result<(Value, Option<f64>)> {
    let dir = ctx.scratch()?;
    let (log, errs) = (dir.join("log.jsonl"), dir.join("monitor.stderr"));
    let n = ctx.sizes.markers;
    let t0 = unix_ns_now();
    let mut mon = Proc::spawn(
        command(&ctx.sw)
            .args(["run", "--headless", "--log"])
            .arg(&log)
            .arg("--")
            .arg(&ctx.helper)
            .arg("markers")
            .arg(n.to_string())
            .arg(ctx.sizes.marker_interval_ms.to_string())
            .stdout(Stdio::null())
            .stderr(File::create(&errs)?),
    )?;
    let mut file: Option<File> = None;
    let mut pending = Vec::new();
    let mut delays = Vec::new();
    let mut first_exec_ns = None;
    let mut chunk = vec![0u8; 1 << 16];
    let mut done = false;
    while !done {
        if mon.exited()?.is_some() {
            done = true; // one last read below
        }
        if file.is_none() {
            file = File::open(&log).ok();
        }
        if let Some(f) = file.as_mut() {
            loop {
                let got = f.read(&mut chunk)?;
                if got == 0 {
                    break;
                }
                pending.extend_from_slice(&chunk[..got]);
            }
            let now = unix_ns_now();
            while let Some(nl) = pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = pending.drain(..=nl).collect();
                let Ok(v) = serde_json::from_slice::<Value>(&line) else {
                    continue;
                };
                if v["kind"] != "exec" {
                    continue;
                }
                let at = v["at"].as_str().and_then(parse_rfc3339_ns);
                if first_exec_ns.is_none() {
                    first_exec_ns = at;
                }
                let marker = v["argv"]
                    .as_array()
                    .and_then(|a| a.get(1))
                    .and_then(Value::as_str)
                    .is_some_and(|s| s.starts_with("marker-"));
                if marker && let Some(at) = at {
                    delays.push((now - at) as f64 / 1e6);
                }
            }
        }
        check_interrupted()?;
        if !done {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    if delays.len() as u64 != n {
        bail!(
            "the log had {} of {n} marker execs; monitor stderr:\n{}",
            delays.len(),
            tail_of(&errs)
        );
    }
    let attach_ms = first_exec_ns.map(|ns| (ns - t0) as f64 / 1e6);
    delays.sort_by(f64::total_cmp);
    let v = json!({
        "markers": n,
        "interval_ms": ctx.sizes.marker_interval_ms,
        "p50_ms": round3(percentile(&delays, 50.0)),
        "p99_ms": round3(percentile(&delays, 99.0)),
        "max_ms": round3(*delays.last().unwrap_or(&0.0)),
        "min_ms": round3(*delays.first().unwrap_or(&0.0)),
    });
    let _ = std::fs::remove_dir_all(&dir);
    Ok((v, attach_ms))
}

/// The last complete line of a (possibly large) file.
fn last_line(path: &Path) -> anyhow::Result<Value> {
    let mut f = File::open(path)?;
    let len = f.metadata()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(1 << 20)))?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf)?;
    let text = String::from_utf8_lossy(&buf);
    let line = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .context("empty log")?;
    Ok(serde_json::from_str(line)?)
}

/// A capture of about `files × procs` records: `procs` processes one after another, each
/// opening `files` distinct files once (reads the kernel cannot fold into a count), each
/// process adding its fork, exec, exit and loader opens. With `with_report` false, only the
/// log is written (to see what the report costs); with `otlp`, the records are also sent to
/// that collector.
fn memory(ctx: &mut Ctx, with_report: bool, otlp: Option<&Collector>) -> anyhow::Result<Value> {
    let files_dir = ctx.work.join("mem-files");
    let (files, procs) = (ctx.sizes.mem_files, ctx.sizes.mem_procs);
    // Create the files untraced first.
    let ok = command(&ctx.helper)
        .arg("opens")
        .arg(&files_dir)
        .arg(files.to_string())
        .arg("0")
        .status()?
        .success();
    if !ok {
        bail!("bench-helper opens could not create the files");
    }
    let dir = ctx.scratch()?;
    let (out, report, log, errs) = (
        dir.join("timed.json"),
        dir.join("report.json"),
        dir.join("log.jsonl"),
        dir.join("monitor.stderr"),
    );
    let mut cmd = command(&ctx.sw);
    cmd.args(["run", "--headless"]);
    if with_report {
        cmd.arg("--report").arg(&report);
    }
    if let Some(c) = otlp {
        cmd.args(["--otlp", &c.url(), "--otlp-timeout", "120"]);
    }
    let collector_cpu0 = otlp.map(Collector::cpu_ms);
    cmd.arg("--log")
        .arg(&log)
        .arg("--")
        .arg(&ctx.helper)
        .arg("timed")
        .arg(&out)
        .arg(&ctx.helper)
        .arg("opens")
        .arg(&files_dir)
        .arg(files.to_string())
        .arg(procs.to_string());
    let started = Instant::now();
    let m = monitor(&mut cmd, &out, &log, &errs)?;
    let wall_s = started.elapsed().as_secs_f64();
    let end = last_line(&log)?;
    if end["kind"] != "end" {
        bail!("the log does not end with an end record");
    }
    let (user, sys, watched) = (m.user_ms, m.sys_ms, &m.watched);
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let export = match otlp {
        Some(_) => {
            let r: Value = serde_json::from_slice(&std::fs::read(&report)?)?;
            r["export"]["otlp"].clone()
        }
        None => Value::Null,
    };
    let collector_cpu_ms = otlp
        .zip(collector_cpu0)
        .map(|(c, before)| round3(c.cpu_ms() - before));
    let v = json!({
        "with_report": with_report,
        "otlp": otlp.map(|c| c.url()),
        "export": export,
        "collector_cpu_ms": collector_cpu_ms,
        "records": end["seq"].as_u64().map(|s| s + 1),
        "workload": format!("{procs} processes × {files} distinct file opens (bench-helper opens)"),
        "events": end["events"],
        "lost": end["lost"],
        "lost_by_kind": end["lost_by_kind"],
        "file_entries": end["files"],
        "processes": end["processes"],
        "peak_rss_mb": round3(m.rss_kb as f64 / 1024.0),
        "sampled_vmhwm_mb": round3(watched.hwm_kb as f64 / 1024.0),
        // Peaks over the 50 ms samples: the heap, and file-backed pages (the binary and the
        // ring buffer, which the monitor maps twice).
        "sampled_rss_anon_mb": round3(watched.anon_kb as f64 / 1024.0),
        "sampled_rss_file_mb": round3(watched.file_kb as f64 / 1024.0),
        "monitor_cpu_user_ms": round3(user),
        "monitor_cpu_sys_ms": round3(sys),
        "monitor_cpu_after_attach_ms": watched.attached_cpu_ms.map(|a| round3(user + sys - a)),
        "workload_ms": round3(m.timed.ms()),
        "monitor_wall_s": round3(wall_s),
        "log_mb": round3(size(&log) as f64 / 1048576.0),
        "report_mb": round3(size(&report) as f64 / 1048576.0),
    });
    let _ = std::fs::remove_dir_all(&dir);
    Ok(v)
}

/// The collector of the `--otlp` capture: rotel on loopback, exporting to its blackhole.
struct Collector {
    child: Child,
    port: u16,
}

impl Collector {
    fn start(work: &Path) -> anyhow::Result<Collector> {
        let free = || -> anyhow::Result<u16> {
            Ok(std::net::TcpListener::bind("127.0.0.1:0")?
                .local_addr()?
                .port())
        };
        let (port, grpc) = (free()?, free()?);
        let child = Command::new(crate::collector::binary())
            .arg("start")
            .args(["--otlp-http-endpoint", &format!("127.0.0.1:{port}")])
            .args(["--otlp-grpc-endpoint", &format!("127.0.0.1:{grpc}")])
            .args(["--exporter", "blackhole"])
            .arg("--pid-file")
            .arg(work.join("rotel.pid"))
            .arg("--log-file")
            .arg(work.join("rotel.log"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting rotel (cargo xtask setup installs it)")?;
        let c = Collector { child, port };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                bail!("rotel did not listen on 127.0.0.1:{port} within 20 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(c)
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Its CPU time so far (user + system), from /proc.
    fn cpu_ms(&self) -> f64 {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap_or_default();
        // After the command name in parentheses: utime and stime are fields 14 and 15.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        let ticks = |i: usize| {
            fields
                .get(i)
                .and_then(|f| f.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        (ticks(11) + ticks(12)) * 1000.0 / hz
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        // SAFETY: kill on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------- statistics and time

fn median(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// `2026-01-02T03:04:05.123456789Z` → ns since the epoch (the log's `at`).
fn parse_rfc3339_ns(s: &str) -> Option<i128> {
    s.parse::<jiff::Timestamp>().ok().map(|t| t.as_nanosecond())
}

// ---------------------------------------------------------------- the run

/// Tracers running that this benchmark did not start (checked when none of its own run):
/// their probes cost every process something, the unmonitored runs included.
fn other_tracers() -> Vec<String> {
    let mut found = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return found;
    };
    for e in dir.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        let comm = comm.trim();
        if ["sandbox-watch", "bpftrace", "strace", "auditd", "perf"].contains(&comm) {
            found.push(format!("{comm} (pid {pid})"));
        }
    }
    found.sort();
    found
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn build() -> anyhow::Result<()> {
    // Built at low priority (the machine may be shared); the measurements run at normal priority.
    crate::run(command("nice").current_dir(crate::root()).args([
        "-n",
        "10",
        "cargo",
        "build",
        "--release",
        "-p",
        "sandbox-watch",
        "-p",
        "integration-tests",
        "--bins",
    ]))
}

pub fn run(opts: Options) -> anyhow::Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("the benchmark loads BPF programs: run it as root (`sudo -E cargo xtask bench`)");
    }
    crate::setup()?;
    build()?;
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    let root = crate::root();
    let release = root.join("target/release");
    let work = std::env::temp_dir().join(format!("sandbox-watch-bench-{}", std::process::id()));
    std::fs::create_dir_all(&work)?;
    let result = bench(&opts, &root, &release, &work);
    let _ = std::fs::remove_dir_all(&work);
    result
}

/// The workloads `--workloads` names (all without it); an unknown name is an error.
fn selected(opts: &Options) -> anyhow::Result<Vec<Workload>> {
    if opts.memory_only {
        return Ok(Vec::new());
    }
    if opts.workloads.is_empty() {
        return Ok(WORKLOADS.to_vec());
    }
    let mut out = Vec::new();
    for name in &opts.workloads {
        let Some(w) = WORKLOADS.iter().find(|w| w.key() == name.trim()) else {
            bail!(
                "--workloads: no workload {name:?}; the workloads are {}",
                WORKLOADS.map(Workload::key).join(", ")
            );
        };
        if !out.contains(w) {
            out.push(*w);
        }
    }
    Ok(out)
}

fn bench(opts: &Options, root: &Path, release: &Path, work: &Path) -> anyhow::Result<()> {
    let workloads = selected(opts)?;
    let sizes = Sizes::new(opts);
    let python = ["/usr/bin/python3", "/usr/local/bin/python3"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap_or("python3")
        .to_string();
    if let Some(b) = &opts.baseline {
        let ok = Command::new(b)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            bail!(
                "--baseline {}: not a sandbox-watch binary that runs (`{0} --version` failed); \
                 give the path of another build, e.g. /work/main/target/release/sandbox-watch",
                b.display()
            );
        }
    }
    let mut ctx = Ctx {
        sw: release.join("sandbox-watch"),
        baseline: opts.baseline.clone(),
        helper: release.join("bench-helper"),
        open_storm: release.join("open-storm"),
        python,
        work: work.to_path_buf(),
        sizes,
        next_id: 0,
    };
    std::fs::write(work.join("open-storm.dat"), b"open storm\n")?;
    std::fs::write(work.join("agent.sh"), AGENT_SCRIPT)?;
    let load_start = loadavg();
    let started = Instant::now();

    // Peers: which are here, and why not the others.
    let mut peers: Vec<Cond> = Vec::new();
    let mut skipped: Vec<(String, String)> = Vec::new();
    if opts.memory_only {
        skipped.push((
            "everything but the large captures".into(),
            "--memory-only".into(),
        ));
    } else if opts.no_peers {
        skipped.push(("peers".into(), "--no-peers".into()));
    } else {
        if crate::have("strace") {
            peers.push(Cond::Strace);
        } else {
            skipped.push((
                "strace".into(),
                "not installed (apt-get install strace)".into(),
            ));
        }
        if crate::have("bpftrace") {
            peers.push(Cond::Bpftrace);
        } else {
            skipped.push((
                "bpftrace".into(),
                "not installed (apt-get install bpftrace)".into(),
            ));
        }
        match audit_unavailable() {
            None => peers.push(Cond::Auditd),
            Some(why) => skipped.push(("auditd".into(), why)),
        }
    }
    let floor = !opts.memory_only && crate::have("bpftrace") && crate::have("bpftool");
    if !floor && !opts.memory_only {
        skipped.push((
            "the floor (a no-op syscall tracepoint program)".into(),
            "needs bpftrace and bpftool (apt-get install bpftrace bpftool)".into(),
        ));
    }
    let rounds = if opts.memory_only {
        0
    } else {
        ctx.sizes.rounds
    };
    progress(format!(
        "{rounds} rounds{}; peers: {}; load average {load_start}",
        if opts.quick { " (quick)" } else { "" },
        if peers.is_empty() {
            "none".to_string()
        } else {
            peers
                .iter()
                .map(|c| c.label())
                .collect::<Vec<_>>()
                .join(", ")
        }
    ));

    let mut cells: Vec<Cell> = Vec::new();
    let push = |cells: &mut Vec<Cell>, w: Workload, cond: Cond, s: Sample| match cells
        .iter_mut()
        .find(|c| c.workload == w && c.cond == cond)
    {
        Some(c) => c.samples.push(s),
        None => cells.push(Cell {
            workload: w,
            cond,
            samples: vec![s],
        }),
    };

    // Warm the caches (page cache, dentries, the BPF object's first load): not measured.
    progress("warming up");
    for &w in &workloads {
        run_bare(&mut ctx, w, &[])?;
    }
    let sw = ctx.sw.clone();
    let (_, probe) = run_traced(&mut ctx, &sw, Workload::OpenStorm)?;
    if let Some(b) = ctx.baseline.clone() {
        run_traced(&mut ctx, &b, Workload::OpenStorm)?;
    }

    let mut peer_cpu: Vec<Value> = Vec::new();
    let mut others: Vec<String> = Vec::new();
    for round in 1..=rounds {
        let now = other_tracers();
        if !now.is_empty() {
            progress(format!(
                "round {round}: also running (not started by the benchmark): {}",
                now.join(", ")
            ));
        }
        for o in now {
            if !others.contains(&o) {
                others.push(o);
            }
        }
        for &w in &workloads {
            let mut conds = vec![Cond::Unmonitored, Cond::Traced, Cond::Outside];
            if ctx.baseline.is_some() {
                conds.extend([Cond::BaseTraced, Cond::BaseOutside]);
            }
            // Under strace every signal is a stop of the tracee (ptrace): not the same work.
            if w.storm() && w != Workload::SignalStorm && peers.contains(&Cond::Strace) {
                conds.push(Cond::Strace);
            }
            // A B C, B C A, C A B, …: no condition always runs first (after the previous
            // workload) or always right after the same other one.
            let n = conds.len();
            conds.rotate_left((round - 1) % n);
            for cond in conds {
                check_interrupted()?;
                let s = match cond {
                    Cond::Unmonitored => run_bare(&mut ctx, w, &[])?,
                    Cond::Traced => run_traced(&mut ctx, &sw, w)?.0,
                    Cond::Outside => run_outside(&mut ctx, &sw, w)?,
                    Cond::BaseTraced | Cond::BaseOutside => {
                        let b = ctx.baseline.clone().expect("only with --baseline");
                        if cond == Cond::BaseTraced {
                            run_traced(&mut ctx, &b, w)?.0
                        } else {
                            run_outside(&mut ctx, &b, w)?
                        }
                    }
                    Cond::Strace => {
                        run_bare(&mut ctx, w, &["strace", "-f", "-qq", "-o", "/dev/null"])?
                    }
                    _ => unreachable!("session peers run below"),
                };
                progress(format!(
                    "round {round}/{rounds}: {} {}: {:.1} ms{}",
                    w.label(),
                    cond.label(),
                    s.ms,
                    match (s.events, s.lost) {
                        (Some(e), Some(l)) => format!(" ({e} events, {l} lost)"),
                        _ => String::new(),
                    }
                ));
                push(&mut cells, w, cond, s);
            }
        }
        // The kernel's floor: one session per round, every storm.
        if floor {
            check_interrupted()?;
            let f = Floor::start()?;
            let mut results = Vec::new();
            for &w in workloads.iter().filter(|w| w.storm()) {
                results.push((w, run_bare(&mut ctx, w, &[])?));
            }
            f.stop()?;
            for (w, s) in results {
                progress(format!(
                    "round {round}/{rounds}: {} {}: {:.1} ms",
                    w.label(),
                    Cond::Floor.label(),
                    s.ms
                ));
                push(&mut cells, w, Cond::Floor, s);
            }
        }
        // The peers that watch the whole machine: one session per round, both storms.
        if peers.contains(&Cond::Bpftrace) {
            check_interrupted()?;
            let bt = Bpftrace::start()?;
            let mut results = Vec::new();
            for w in [Workload::ExecStorm, Workload::OpenStorm] {
                let lost0 = bt.lost.load(Ordering::Relaxed);
                let s = run_bare(&mut ctx, w, &[])?;
                // Its "Lost N events" lines come when it reads its buffers after the burst.
                std::thread::sleep(Duration::from_millis(300));
                let lost = bt.lost.load(Ordering::Relaxed) - lost0;
                results.push((
                    w,
                    Sample {
                        lost: Some(lost),
                        ..s
                    },
                ));
            }
            let (cpu, lost) = bt.stop()?;
            for (w, s) in results {
                progress(format!(
                    "round {round}/{rounds}: {} bpftrace: {:.1} ms ({} lost)",
                    w.label(),
                    s.ms,
                    s.lost.unwrap_or(0)
                ));
                push(&mut cells, w, Cond::Bpftrace, s);
            }
            peer_cpu.push(
                json!({"peer": "bpftrace", "round": round, "cpu_ms": round3(cpu), "lost": lost}),
            );
        }
        if peers.contains(&Cond::Auditd) {
            check_interrupted()?;
            let audit = Audit::start()?;
            let mut results = Vec::new();
            for w in [Workload::ExecStorm, Workload::OpenStorm] {
                let lost0 = audit.lost();
                let s = run_bare(&mut ctx, w, &[])?;
                let lost = audit.lost().saturating_sub(lost0);
                results.push((
                    w,
                    Sample {
                        lost: Some(lost),
                        ..s
                    },
                ));
            }
            let cpu = audit.stop()?;
            for (w, s) in results {
                progress(format!(
                    "round {round}/{rounds}: {} auditd: {:.1} ms ({} lost)",
                    w.label(),
                    s.ms,
                    s.lost.unwrap_or(0)
                ));
                push(&mut cells, w, Cond::Auditd, s);
            }
            peer_cpu.push(json!({"peer": "auditd", "round": round, "cpu_ms": round3(cpu)}));
        }
    }

    let partial = !opts.workloads.is_empty();
    let (latency, latency_attach) = if opts.memory_only || partial {
        (json!({}), None)
    } else {
        progress("kernel-to-log delay");
        let (latency, attach) = latency(&mut ctx)?;
        progress(format!(
            "kernel-to-log delay: p50 {} ms, p99 {} ms",
            latency["p50_ms"], latency["p99_ms"]
        ));
        (latency, attach)
    };
    let mut memory_runs = Vec::new();
    let collector = if partial {
        None
    } else {
        Some(Collector::start(work)?)
    };
    let captures: Vec<(bool, Option<&Collector>)> = match &collector {
        Some(c) => vec![(true, None), (false, None), (true, Some(c))],
        None => Vec::new(),
    };
    for (with_report, otlp) in captures {
        check_interrupted()?;
        progress(format!(
            "memory: capture of about {} records{}",
            ctx.sizes.mem_files * ctx.sizes.mem_procs,
            match (with_report, otlp) {
                (_, Some(c)) => format!(" (--otlp to rotel at {})", c.url()),
                (true, None) => String::new(),
                (false, None) => " (log only, no --report)".into(),
            }
        ));
        let mut m = memory(&mut ctx, with_report, otlp)?;
        if otlp.is_some() {
            // What exporting adds, against the same capture with the report and no --otlp.
            let cpu = |v: &Value| {
                v["monitor_cpu_user_ms"].as_f64().unwrap_or(0.0)
                    + v["monitor_cpu_sys_ms"].as_f64().unwrap_or(0.0)
            };
            let records = m["records"].as_f64().unwrap_or(f64::NAN);
            let added_ms = cpu(&m) - cpu(&memory_runs[0]);
            m["otlp_added_cpu_ms"] = json!(round3(added_ms));
            m["otlp_cpu_us_per_record"] = json!(round3(added_ms * 1000.0 / records));
            m["collector_cpu_us_per_record"] = json!(
                m["collector_cpu_ms"]
                    .as_f64()
                    .map(|c| round3(c * 1000.0 / records))
            );
        }
        progress(format!(
            "memory: {} events, {} lost, peak RSS {} MB{}",
            m["events"],
            m["lost"],
            m["peak_rss_mb"],
            if otlp.is_some() {
                format!(
                    "; export {}; +{} µs CPU per record",
                    m["export"], m["otlp_cpu_us_per_record"]
                )
            } else {
                String::new()
            }
        ));
        memory_runs.push(m);
    }
    drop(collector);

    let results = Results {
        opts,
        sizes: &ctx.sizes,
        cells: &cells,
        peers: &peers,
        skipped: &skipped,
        probe: &probe,
        latency: &latency,
        latency_attach,
        memory: &memory_runs,
        peer_cpu: &peer_cpu,
        others: &others,
        load_start,
        load_end: loadavg(),
        elapsed_s: started.elapsed().as_secs_f64(),
    };
    let (table, json) = results.render();
    println!("{table}");
    let path = opts
        .json
        .clone()
        .unwrap_or_else(|| root.join("target/bench/bench.json"));
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&path, serde_json::to_string_pretty(&json)? + "\n")
        .with_context(|| format!("writing {}", path.display()))?;
    progress(format!("JSON written to {}", path.display()));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339() {
        assert_eq!(parse_rfc3339_ns("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_rfc3339_ns("2000-03-01T00:00:01.5Z"),
            Some(951_868_801_500_000_000)
        );
        assert_eq!(
            parse_rfc3339_ns("2024-02-29T12:34:56.123456789Z"),
            Some(1_709_210_096_123_456_789)
        );
        assert_eq!(parse_rfc3339_ns("garbage"), None);
    }

    #[test]
    fn stats() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        let v: Vec<f64> = (1..=200).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 100.0);
        assert_eq!(percentile(&v, 99.0), 198.0);
    }
}
