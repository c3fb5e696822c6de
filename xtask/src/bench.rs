//! `cargo xtask bench`: what watching costs, measured on this machine.
//!
//! Three workloads time themselves (through `bench-helper timed`, so a monitor's start-up is
//! never in the measured time): an exec storm (fork+exec of `/bin/true` from a shell loop), an
//! open storm (open/close of one file, `open-storm`) and a short agent session (git, python,
//! sed, ls). Each runs unmonitored, traced by `sandbox-watch run`, and outside the traced set
//! while `sandbox-watch attach` watches an idle process; the conditions alternate within every
//! round (their order rotating from round to round) and the median of the rounds is compared
//! with the unmonitored median. Installed peers (strace -f, bpftrace, auditd) run the two storms
//! in the same rounds.
//!
//! Also measured: events and lost records per traced run, the monitor's CPU time and peak RSS,
//! the time from starting `sandbox-watch run` to the workload's first exec, the delay from an
//! exec in the kernel to its line in the log (p50, p99), and the monitor's peak RSS over a
//! capture of about 1,000,000 records.
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
}

/// The issue's targets (issue 8): ratios to the unmonitored run, and memory.
const TARGET_TRACED_EXEC: f64 = 1.10;
const TARGET_TRACED_OPEN: f64 = 1.50;
const TARGET_OUTSIDE: f64 = 1.05;
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
    commits: u64,
    markers: u64,
    marker_interval_ms: u64,
    mem_files: u64,
    mem_procs: u64,
}

impl Sizes {
    fn new(o: &Options) -> Sizes {
        let (rounds, s) = if o.quick {
            (
                3,
                Sizes {
                    rounds: 0,
                    execs: 300,
                    opens: 50_000,
                    commits: 3,
                    markers: 50,
                    marker_interval_ms: 20,
                    mem_files: 200,
                    mem_procs: 250,
                },
            )
        } else {
            (
                7,
                Sizes {
                    rounds: 0,
                    execs: 1000,
                    opens: 200_000,
                    commits: 5,
                    markers: 200,
                    marker_interval_ms: 20,
                    mem_files: 1000,
                    mem_procs: 1000,
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
    Agent,
}

const WORKLOADS: [Workload; 3] = [Workload::ExecStorm, Workload::OpenStorm, Workload::Agent];

impl Workload {
    fn key(self) -> &'static str {
        match self {
            Workload::ExecStorm => "exec_storm",
            Workload::OpenStorm => "open_storm",
            Workload::Agent => "agent_session",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Workload::ExecStorm => "exec storm",
            Workload::OpenStorm => "open storm",
            Workload::Agent => "agent session",
        }
    }

    fn describe(self, s: &Sizes) -> String {
        match self {
            Workload::ExecStorm => format!("{} fork+exec of /bin/true from a sh loop", s.execs),
            Workload::OpenStorm => format!("{} open/close of one file (open-storm)", s.opens),
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
            Workload::Agent => None,
        }
    }

    fn storm(self) -> bool {
        self != Workload::Agent
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
    Traced,
    Outside,
    Strace,
    Bpftrace,
    Auditd,
}

impl Cond {
    fn key(self) -> &'static str {
        match self {
            Cond::Unmonitored => "unmonitored",
            Cond::Traced => "traced",
            Cond::Outside => "outside",
            Cond::Strace => "strace",
            Cond::Bpftrace => "bpftrace",
            Cond::Auditd => "auditd",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Cond::Unmonitored => "unmonitored",
            Cond::Traced => "traced (run)",
            Cond::Outside => "outside (attach)",
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
    lost: Option<u64>,
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

// ---------------------------------------------------------------- processes

fn unix_ns_now() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0)
}

fn tv_ms(tv: libc::timeval) -> f64 {
    tv.tv_sec as f64 * 1e3 + tv.tv_usec as f64 / 1e3
}

fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill has no memory preconditions; pid is a child we started and have not reaped.
    unsafe { libc::kill(pid as libc::pid_t, sig) };
}

/// A child process we started, reaped with wait4 (for its rusage); killed if dropped unreaped.
struct Proc {
    child: Child,
    reaped: bool,
}

impl Proc {
    fn spawn(cmd: &mut Command) -> anyhow::Result<Proc> {
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot start {cmd:?}"))?;
        Ok(Proc {
            child,
            reaped: false,
        })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the exit: (exit status as a shell shows it, resource use). The rusage is
    /// the process's own plus that of every child it waited for (the kernel's RUSAGE_BOTH).
    fn wait4(&mut self) -> anyhow::Result<(i32, libc::rusage)> {
        let pid = self.pid() as libc::pid_t;
        loop {
            let mut status = 0;
            // SAFETY: rusage is plain data that wait4 fills.
            let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
            // SAFETY: pid is our child; both out-pointers are valid.
            let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
            if r == pid {
                self.reaped = true;
                let code = if libc::WIFEXITED(status) {
                    libc::WEXITSTATUS(status)
                } else {
                    128 + libc::WTERMSIG(status)
                };
                return Ok((code, ru));
            }
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EINTR) {
                bail!("wait4({pid}): {err}");
            }
        }
    }

    /// Non-blocking: whether it has exited (then it is reaped).
    fn exited(&mut self) -> anyhow::Result<Option<(i32, libc::rusage)>> {
        let pid = self.pid() as libc::pid_t;
        let mut status = 0;
        // SAFETY: as in wait4.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: pid is our child; both out-pointers are valid.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
        if r == pid {
            self.reaped = true;
            let code = if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else {
                128 + libc::WTERMSIG(status)
            };
            return Ok(Some((code, ru)));
        }
        if r < 0 {
            bail!("wait4({pid}): {}", std::io::Error::last_os_error());
        }
        Ok(None)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if !self.reaped {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// What a [`Watcher`] saw of a monitor.
#[derive(Default)]
struct Watched {
    /// Peak VmHWM, RssAnon and RssFile (kB) over the samples.
    hwm_kb: u64,
    anon_kb: u64,
    file_kb: u64,
    /// The monitor's CPU time (user+sys, all threads) when it was attached: when its log got
    /// its first line.
    attached_cpu_ms: Option<f64>,
}

/// Watches a monitor while it runs: its CPU time at the moment its log gets a first line (the
/// capture loop runs: probe loaded, target traced), then every 50 ms its VmHWM (peak RSS, the
/// fallback when wait4's maximum may be a child's) and how much of its RSS is anonymous
/// (heap) or file-backed (the binary and the mapped ring buffer).
struct Watcher {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Watched>>,
}

/// CPU time (user+sys, ns) of every thread of a process, from /proc/PID/task/*/schedstat.
fn threads_cpu_ns(pid: u32) -> Option<u64> {
    let mut total = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
    {
        let text = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
        total += text.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(total)
}

fn status_kb(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

impl Watcher {
    fn start(pid: u32, log: Option<&Path>) -> Watcher {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let log = log.map(Path::to_path_buf);
        let thread = std::thread::spawn(move || {
            let mut w = Watched::default();
            let status = format!("/proc/{pid}/status");
            let mut attached = log.is_none();
            let mut last_status = Instant::now() - Duration::from_secs(1);
            while !s.load(Ordering::Relaxed) {
                if !attached
                    && let Some(log) = &log
                    && std::fs::metadata(log).is_ok_and(|m| m.len() > 0)
                {
                    attached = true;
                    w.attached_cpu_ms = threads_cpu_ns(pid).map(|ns| ns as f64 / 1e6);
                }
                if last_status.elapsed() >= Duration::from_millis(50) {
                    last_status = Instant::now();
                    if let Ok(text) = std::fs::read_to_string(&status) {
                        w.hwm_kb = w.hwm_kb.max(status_kb(&text, "VmHWM:").unwrap_or(0));
                        w.anon_kb = w.anon_kb.max(status_kb(&text, "RssAnon:").unwrap_or(0));
                        w.file_kb = w.file_kb.max(status_kb(&text, "RssFile:").unwrap_or(0));
                    }
                }
                std::thread::sleep(Duration::from_millis(if attached { 50 } else { 5 }));
            }
            w
        });
        Watcher {
            stop,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> Watched {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A command with the environment every benchmark process gets: the agent runs as root like
/// the unmonitored run (no sudo user to drop to).
fn command(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = Command::new(program);
    c.env_remove("SUDO_UID")
        .env_remove("SUDO_GID")
        .env_remove("SUDO_USER")
        .stdin(Stdio::null());
    c
}

fn tail_of(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

// ---------------------------------------------------------------- conditions

/// A workload run directly (or under `prefix`, e.g. strace), timed by bench-helper.
fn run_bare(ctx: &mut Ctx, w: Workload, prefix: &[&str]) -> anyhow::Result<Sample> {
    let dir = ctx.scratch()?;
    let out = dir.join("timed.json");
    let argv = w.argv(ctx, &dir);
    let (program, rest): (&std::ffi::OsStr, Vec<&std::ffi::OsStr>) = match prefix.split_first() {
        Some((p, more)) => (
            p.as_ref(),
            more.iter()
                .map(|s| s.as_ref())
                .chain([ctx.helper.as_os_str()])
                .collect(),
        ),
        None => (ctx.helper.as_os_str(), Vec::new()),
    };
    let errs = dir.join("stderr");
    let mut p = Proc::spawn(
        command(program)
            .args(rest)
            .arg("timed")
            .arg(&out)
            .args(&argv)
            .stdout(Stdio::null())
            .stderr(File::create(&errs)?),
    )?;
    let (code, _) = p.wait4()?;
    let timed =
        Timed::read(&out).with_context(|| format!("exit {code}; stderr:\n{}", tail_of(&errs)))?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Sample {
        ms: timed.ms(),
        workload_cpu_ms: timed.cpu_ms(),
        ..Sample::default()
    })
}

/// A `sandbox-watch run` of a timed workload, finished: the workload's own timing, the
/// monitor's peak RSS, and its CPU time without the workload's.
struct Monitored {
    timed: Timed,
    watched: Watched,
    rss_kb: u64,
    user_ms: f64,
    sys_ms: f64,
}

/// Starts the monitor (`cmd`, whose workload writes its timing to `timed`), watches it while it
/// runs, and waits for it.
fn monitor(cmd: &mut Command, timed: &Path, log: &Path, errs: &Path) -> anyhow::Result<Monitored> {
    let mut p = Proc::spawn(cmd.stdout(Stdio::null()).stderr(File::create(errs)?))?;
    let watcher = Watcher::start(p.pid(), Some(log));
    let (code, ru) = p.wait4()?;
    let watched = watcher.finish();
    if code != 0 {
        bail!(
            "sandbox-watch run exited {code}; its stderr:\n{}",
            tail_of(errs)
        );
    }
    let timed = Timed::read(timed)?;
    Ok(Monitored {
        rss_kb: monitor_rss_kb(&ru, timed.kids_maxrss_kb, watched.hwm_kb),
        user_ms: tv_ms(ru.ru_utime) - timed.utime_us as f64 / 1e3,
        sys_ms: tv_ms(ru.ru_stime) - timed.stime_us as f64 / 1e3,
        timed,
        watched,
    })
}

/// The workload traced by `sandbox-watch run --headless --report R --log L`.
fn run_traced(ctx: &mut Ctx, w: Workload) -> anyhow::Result<(Sample, Value)> {
    let dir = ctx.scratch()?;
    let (out, report, log, errs) = (
        dir.join("timed.json"),
        dir.join("report.json"),
        dir.join("log.jsonl"),
        dir.join("monitor.stderr"),
    );
    let argv = w.argv(ctx, &dir);
    let t0 = unix_ns_now();
    let m = monitor(
        command(&ctx.sw)
            .args(["run", "--headless", "--report"])
            .arg(&report)
            .arg("--log")
            .arg(&log)
            .arg("--")
            .arg(&ctx.helper)
            .arg("timed")
            .arg(&out)
            .args(&argv),
        &out,
        &log,
        &errs,
    )?;
    let r: Value = serde_json::from_slice(&std::fs::read(&report)?)
        .with_context(|| format!("reading {}", report.display()))?;
    let attach_ms = r["processes"][0]["started_at"]
        .as_str()
        .and_then(parse_rfc3339_ns)
        .map(|ns| (ns - t0) as f64 / 1e6);
    let sample = Sample {
        ms: m.timed.ms(),
        workload_cpu_ms: m.timed.cpu_ms(),
        events: r["coverage"]["events"].as_u64(),
        lost: r["coverage"]["lost"].as_u64(),
        cpu_user_ms: Some(m.user_ms),
        cpu_sys_ms: Some(m.sys_ms),
        watch_cpu_ms: m.watched.attached_cpu_ms.map(|a| m.user_ms + m.sys_ms - a),
        rss_mb: Some(m.rss_kb as f64 / 1024.0),
        attach_ms,
    };
    let probe = r["probe"].clone();
    let _ = std::fs::remove_dir_all(&dir);
    Ok((sample, probe))
}

/// The monitor's peak RSS. wait4 reports the larger of the monitor's own peak and its
/// children's (the agent's tree, whose first process was forked from the monitor and so starts
/// with its image): exact unless the workload's children grew larger than the monitor, and
/// then the /proc sample (taken every 50 ms) stands in.
fn monitor_rss_kb(ru: &libc::rusage, kids_maxrss_kb: i64, sampled_kb: u64) -> u64 {
    let waited = ru.ru_maxrss.max(0) as u64;
    if ru.ru_maxrss > kids_maxrss_kb {
        waited
    } else {
        sampled_kb
    }
}

/// The workload runs untraced while `sandbox-watch attach` watches an idle `sleep`.
fn run_outside(ctx: &mut Ctx, w: Workload) -> anyhow::Result<Sample> {
    let dir = ctx.scratch()?;
    let (report, log, errs) = (
        dir.join("report.json"),
        dir.join("log.jsonl"),
        dir.join("monitor.stderr"),
    );
    let idle = Proc::spawn(command("sleep").arg("1000"))?;
    let mut mon = Proc::spawn(
        command(&ctx.sw)
            .args(["attach", "--headless", "--report"])
            .arg(&report)
            .arg("--log")
            .arg(&log)
            .arg(idle.pid().to_string())
            .stdout(Stdio::null())
            .stderr(File::create(&errs)?),
    )?;
    let watcher = Watcher::start(mon.pid(), None);
    // Attached once the capture loop runs: it writes the log's first line then.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if std::fs::metadata(&log).is_ok_and(|m| m.len() > 0) {
            break;
        }
        if let Some((code, _)) = mon.exited()? {
            bail!(
                "sandbox-watch attach exited {code} before attaching:\n{}",
                tail_of(&errs)
            );
        }
        if Instant::now() > deadline {
            bail!("sandbox-watch attach did not start within 60 s");
        }
        check_interrupted()?;
        std::thread::sleep(Duration::from_millis(5));
    }
    let attached_cpu_ms = threads_cpu_ns(mon.pid()).map(|ns| ns as f64 / 1e6);
    let sample = run_bare(ctx, w, &[]);
    signal(mon.pid(), libc::SIGTERM);
    let (_, ru) = mon.wait4()?;
    let watched = watcher.finish();
    drop(idle);
    let mut sample = sample?;
    let r: Value = serde_json::from_slice(&std::fs::read(&report)?)
        .with_context(|| format!("reading {}", report.display()))?;
    sample.events = r["coverage"]["events"].as_u64();
    sample.lost = r["coverage"]["lost"].as_u64();
    let (user, sys) = (tv_ms(ru.ru_utime), tv_ms(ru.ru_stime));
    sample.cpu_user_ms = Some(user);
    sample.cpu_sys_ms = Some(sys);
    sample.watch_cpu_ms = attached_cpu_ms.map(|a| user + sys - a);
    sample.rss_mb = Some((ru.ru_maxrss.max(0) as u64).max(watched.hwm_kb) as f64 / 1024.0);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(sample)
}

// ---------------------------------------------------------------- peers

/// bpftrace printing every execve and openat, its output drained by a thread (the harness
/// needs its stdout only to see that it is attached).
struct Bpftrace {
    proc: Proc,
    lost: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Bpftrace {
    fn start() -> anyhow::Result<Bpftrace> {
        let marker = format!("/tmp/swb-ready-{}", std::process::id());
        let mut proc = Proc::spawn(
            command("bpftrace")
                .arg("-e")
                .arg(BPFTRACE_PROGRAM)
                .stdout(Stdio::piped())
                .stderr(Stdio::null()),
        )?;
        let stdout = proc.child.stdout.take().context("bpftrace stdout")?;
        let ready = Arc::new(AtomicBool::new(false));
        let lost = Arc::new(AtomicU64::new(0));
        let (r, l, m) = (ready.clone(), lost.clone(), marker.clone());
        let thread = std::thread::spawn(move || {
            let mut reader = BufReader::with_capacity(1 << 16, stdout);
            let mut line = Vec::new();
            loop {
                line.clear();
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                if !r.load(Ordering::Relaxed) && line.starts_with(m.as_bytes()) {
                    r.store(true, Ordering::Relaxed);
                }
                // "Lost N events" when its perf buffer overflowed.
                if let Some(rest) = line.strip_prefix(b"Lost ") {
                    let n = String::from_utf8_lossy(rest)
                        .split_whitespace()
                        .next()
                        .and_then(|n| n.parse::<u64>().ok())
                        .unwrap_or(0);
                    l.fetch_add(n, Ordering::Relaxed);
                }
            }
        });
        let b = Bpftrace {
            proc,
            lost,
            thread: Some(thread),
        };
        // Attached once it prints an openat of our marker path.
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut b = b;
        while !ready.load(Ordering::Relaxed) {
            let _ = File::open(&marker);
            if let Some((code, _)) = b.proc.exited()? {
                bail!("bpftrace exited {code} before attaching");
            }
            if Instant::now() > deadline {
                bail!("bpftrace did not attach within 60 s");
            }
            check_interrupted()?;
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(b)
    }

    /// Stops it: (its CPU ms user+sys, events it reported lost).
    fn stop(mut self) -> anyhow::Result<(f64, u64)> {
        signal(self.proc.pid(), libc::SIGINT);
        let (_, ru) = self.proc.wait4()?;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        Ok((
            tv_ms(ru.ru_utime) + tv_ms(ru.ru_stime),
            self.lost.load(Ordering::Relaxed),
        ))
    }
}

/// The kernel's audit settings, to put back.
#[derive(Clone, Debug)]
struct AuditStatus {
    enabled: u64,
    pid: u64,
    backlog_limit: u64,
    backlog_wait_time: u64,
    rate_limit: u64,
    lost: u64,
}

fn audit_status() -> anyhow::Result<AuditStatus> {
    let out = command("auditctl").arg("-s").output()?;
    if !out.status.success() {
        bail!(
            "auditctl -s: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let get = |k: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(k).and_then(|v| v.strip_prefix(' ')))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    Ok(AuditStatus {
        enabled: get("enabled"),
        pid: get("pid"),
        backlog_limit: get("backlog_limit"),
        backlog_wait_time: get("backlog_wait_time"),
        rate_limit: get("rate_limit"),
        lost: get("lost"),
    })
}

fn auditctl(args: &[&str]) -> anyhow::Result<()> {
    let out = command("auditctl").args(args).output()?;
    if !out.status.success() {
        bail!(
            "auditctl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Whether auditd can be run here, and if not why (one already running is left alone).
fn audit_unavailable() -> Option<String> {
    if !crate::have("auditd") && !Path::new("/sbin/auditd").exists() {
        return Some("auditd is not installed (apt-get install auditd)".into());
    }
    match audit_status() {
        Err(e) => Some(format!("{e:#}")),
        Ok(s) if s.pid != 0 => Some(format!(
            "an audit daemon is already running (pid {}); left alone",
            s.pid
        )),
        Ok(s) if s.enabled == 2 => Some("the audit configuration is locked (enabled 2)".into()),
        Ok(_) => None,
    }
}

/// auditd running with the execve/openat rule; dropping it (or `stop`) puts the machine back
/// as it was: rule deleted, daemon stopped, kernel settings restored, logs it made removed.
struct Audit {
    before: AuditStatus,
    /// `-a never,task` was there (it would keep the rule from seeing new processes: taken
    /// out for the session, put back after).
    had_never_task: bool,
    /// No rule at all was there.
    had_no_rules: bool,
    pid: u64,
    logs_were_empty: bool,
    stopped: bool,
}

/// `auditctl -l`, one rule a line (none: empty).
fn audit_rules() -> anyhow::Result<Vec<String>> {
    let out = command("auditctl").arg("-l").output()?;
    if !out.status.success() {
        bail!(
            "auditctl -l: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && *l != "No rules")
        .map(String::from)
        .collect())
}

const NEVER_TASK: &str = "-a never,task";

const AUDIT_LOG_DIR: &str = "/var/log/audit";

impl Audit {
    fn start() -> anyhow::Result<Audit> {
        let before = audit_status()?;
        let logs_were_empty = std::fs::read_dir(AUDIT_LOG_DIR)
            .map(|mut d| d.next().is_none())
            .unwrap_or(false);
        let rules = audit_rules()?;
        let mut audit = Audit {
            before,
            had_never_task: rules.iter().any(|r| r == NEVER_TASK),
            had_no_rules: rules.is_empty(),
            pid: 0,
            logs_were_empty,
            stopped: false,
        };
        let program = if crate::have("auditd") {
            "auditd"
        } else {
            "/sbin/auditd"
        };
        let out = command(program).output()?;
        if !out.status.success() {
            bail!(
                "starting auditd: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let s = audit_status()?;
            if s.pid != 0 {
                audit.pid = s.pid;
                break;
            }
            if Instant::now() > deadline {
                bail!("auditd did not register with the kernel within 15 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // The backlog Debian's own rules set (-b 8192); the kernel default (64) would make
        // the workload wait on a full queue rather than measure auditd.
        auditctl(&["-b", "8192"])?;
        if audit.had_never_task {
            auditctl(&["-d", "never,task"])?;
        }
        let mut add = vec!["-a"];
        add.extend(AUDIT_RULE);
        auditctl(&add)?;
        Ok(audit)
    }

    fn lost(&self) -> u64 {
        audit_status().map(|s| s.lost).unwrap_or(0)
    }

    /// Stops it: the daemon's CPU ms (user+sys) over the session.
    fn stop(mut self) -> anyhow::Result<f64> {
        self.stopped = true;
        let cpu = proc_cpu_ms(self.pid as u32);
        self.restore()?;
        Ok(cpu.unwrap_or(f64::NAN))
    }

    fn restore(&mut self) -> anyhow::Result<()> {
        let mut first_err = None;
        let mut del = vec!["-d"];
        del.extend(AUDIT_RULE);
        if let Err(e) = auditctl(&del) {
            first_err.get_or_insert(e);
        }
        if self.pid != 0 {
            signal(self.pid as u32, libc::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(15);
            while Path::new(&format!("/proc/{}", self.pid)).exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        let b = &self.before;
        for args in [
            vec!["-e".to_string(), b.enabled.to_string()],
            vec!["-b".to_string(), b.backlog_limit.to_string()],
            vec![
                "--backlog_wait_time".to_string(),
                b.backlog_wait_time.to_string(),
            ],
            vec!["-r".to_string(), b.rate_limit.to_string()],
        ] {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            if let Err(e) = auditctl(&args) {
                first_err.get_or_insert(e);
            }
        }
        if self.logs_were_empty
            && let Ok(dir) = std::fs::read_dir(AUDIT_LOG_DIR)
        {
            for e in dir.flatten() {
                let _ = std::fs::remove_file(e.path());
            }
        }
        // Once audit has been enabled the kernel gives every new process an audit context
        // (syscall entry/exit slow path) until reboot, rules or not; `-a never,task` is how
        // that is turned off again (what a machine where auditd never ran behaves like).
        if (self.had_never_task || self.had_no_rules)
            && let Err(e) = auditctl(&["-a", "never,task"])
        {
            first_err.get_or_insert(e);
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl Drop for Audit {
    fn drop(&mut self) {
        if !self.stopped {
            self.stopped = true;
            if let Err(e) = self.restore() {
                eprintln!("bench: restoring the audit settings: {e:#}");
            }
        }
    }
}

/// CPU time (user+sys, ms) of a process from /proc/PID/stat (clock ticks).
fn proc_cpu_ms(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = after.split_whitespace().collect();
    // After the ")": state is field 3, utime 14, stime 15 (1-based) → indexes 11, 12.
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some(ticks as f64 * 1e3 / hz)
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
/// log is written (to see what the report costs).
fn memory(ctx: &mut Ctx, with_report: bool) -> anyhow::Result<Value> {
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
    let v = json!({
        "with_report": with_report,
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

fn bench(opts: &Options, root: &Path, release: &Path, work: &Path) -> anyhow::Result<()> {
    let sizes = Sizes::new(opts);
    let python = ["/usr/bin/python3", "/usr/local/bin/python3"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap_or("python3")
        .to_string();
    let mut ctx = Ctx {
        sw: release.join("sandbox-watch"),
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
    if opts.no_peers {
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
    let rounds = ctx.sizes.rounds;
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
    for w in WORKLOADS {
        run_bare(&mut ctx, w, &[])?;
    }
    let (_, probe) = run_traced(&mut ctx, Workload::OpenStorm)?;

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
        for w in WORKLOADS {
            let mut conds = vec![Cond::Unmonitored, Cond::Traced, Cond::Outside];
            if w.storm() && peers.contains(&Cond::Strace) {
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
                    Cond::Traced => run_traced(&mut ctx, w)?.0,
                    Cond::Outside => run_outside(&mut ctx, w)?,
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

    progress("kernel-to-log delay");
    let (latency, latency_attach) = latency(&mut ctx)?;
    progress(format!(
        "kernel-to-log delay: p50 {} ms, p99 {} ms",
        latency["p50_ms"], latency["p99_ms"]
    ));
    let mut memory_runs = Vec::new();
    for with_report in [true, false] {
        check_interrupted()?;
        progress(format!(
            "memory: capture of about {} records{}",
            ctx.sizes.mem_files * ctx.sizes.mem_procs,
            if with_report {
                ""
            } else {
                " (log only, no --report)"
            }
        ));
        let m = memory(&mut ctx, with_report)?;
        progress(format!(
            "memory: {} events, {} lost, peak RSS {} MB",
            m["events"], m["lost"], m["peak_rss_mb"]
        ));
        memory_runs.push(m);
    }

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

// ---------------------------------------------------------------- output

struct Results<'a> {
    opts: &'a Options,
    sizes: &'a Sizes,
    cells: &'a [Cell],
    peers: &'a [Cond],
    skipped: &'a [(String, String)],
    probe: &'a Value,
    latency: &'a Value,
    latency_attach: Option<f64>,
    memory: &'a [Value],
    peer_cpu: &'a [Value],
    others: &'a [String],
    load_start: String,
    load_end: String,
    elapsed_s: f64,
}

/// One checked target.
struct Check {
    what: String,
    target: String,
    value: String,
    met: bool,
}

fn met(ok: bool) -> &'static str {
    if ok { "met" } else { "NOT MET" }
}

fn fmt_ms(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

fn opt<T: std::fmt::Display>(x: Option<T>) -> String {
    x.map_or_else(|| "-".to_string(), |v| v.to_string())
}

impl Results<'_> {
    fn cell(&self, w: Workload, cond: Cond) -> Option<&Cell> {
        self.cells
            .iter()
            .find(|c| c.workload == w && c.cond == cond)
    }

    fn med(&self, w: Workload, cond: Cond, f: impl Fn(&Sample) -> Option<f64>) -> Option<f64> {
        let c = self.cell(w, cond)?;
        let xs: Vec<f64> = c.samples.iter().filter_map(f).collect();
        median(&xs)
    }

    fn ratio(&self, w: Workload, cond: Cond) -> Option<f64> {
        let base = self.med(w, Cond::Unmonitored, |s| Some(s.ms))?;
        Some(self.med(w, cond, |s| Some(s.ms))? / base)
    }

    /// The same ratio for the workload's own CPU time.
    fn cpu_ratio(&self, w: Workload, cond: Cond) -> Option<f64> {
        let base = self.med(w, Cond::Unmonitored, |s| Some(s.workload_cpu_ms))?;
        Some(self.med(w, cond, |s| Some(s.workload_cpu_ms))? / base)
    }

    /// The median over the rounds of (this round's run / this round's unmonitored run): less
    /// sensitive than the ratio of medians to load that drifts during the benchmark.
    fn paired_ratio(&self, w: Workload, cond: Cond) -> Option<f64> {
        let base = self.cell(w, Cond::Unmonitored)?;
        let c = self.cell(w, cond)?;
        let r: Vec<f64> = c
            .samples
            .iter()
            .zip(&base.samples)
            .map(|(x, b)| x.ms / b.ms)
            .collect();
        median(&r)
    }

    fn total_lost(&self, w: Workload, cond: Cond) -> Option<u64> {
        let c = self.cell(w, cond)?;
        let lost: Vec<u64> = c.samples.iter().filter_map(|s| s.lost).collect();
        (!lost.is_empty()).then(|| lost.iter().sum())
    }

    fn target_of(w: Workload, cond: Cond) -> Option<f64> {
        match cond {
            Cond::Traced => w.traced_target(),
            Cond::Outside => Some(TARGET_OUTSIDE),
            _ => None,
        }
    }

    fn checks(&self) -> Vec<Check> {
        let mut out = Vec::new();
        for w in WORKLOADS {
            for cond in [Cond::Traced, Cond::Outside] {
                if let (Some(t), Some(r)) = (Self::target_of(w, cond), self.ratio(w, cond)) {
                    out.push(Check {
                        what: format!("{} {}", w.label(), cond.label()),
                        target: format!("≤ {t:.2}×"),
                        value: format!("{r:.2}×"),
                        met: r <= t,
                    });
                }
            }
        }
        let lost: u64 = WORKLOADS
            .iter()
            .flat_map(|&w| [Cond::Traced, Cond::Outside].map(|c| self.total_lost(w, c)))
            .flatten()
            .sum();
        out.push(Check {
            what: "events lost, every traced and outside run".into(),
            target: "0".into(),
            value: lost.to_string(),
            met: lost == 0,
        });
        if let Some(m) = self.memory.first() {
            let rss = m["peak_rss_mb"].as_f64().unwrap_or(f64::NAN);
            out.push(Check {
                what: format!("monitor peak RSS, capture of {} events", m["events"]),
                target: format!("≤ {TARGET_RSS_MB:.0} MB"),
                value: format!("{rss:.1} MB"),
                met: rss <= TARGET_RSS_MB,
            });
            let lost = m["lost"].as_u64().unwrap_or(0);
            out.push(Check {
                what: "events lost in that capture".into(),
                target: "0".into(),
                value: lost.to_string(),
                met: lost == 0,
            });
        }
        out
    }

    fn attach_all(&self) -> Vec<f64> {
        self.cells
            .iter()
            .filter(|c| c.cond == Cond::Traced)
            .flat_map(|c| c.samples.iter().filter_map(|s| s.attach_ms))
            .chain(self.latency_attach)
            .collect()
    }

    fn render(&self) -> (String, Value) {
        use std::fmt::Write as _;
        let mut t = String::new();
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
        let _ = writeln!(
            t,
            "sandbox-watch benchmark: median of {} alternating rounds{}; {cpus} CPUs, kernel {}, file hook {}",
            self.sizes.rounds,
            if self.opts.quick {
                " (--quick: smaller workloads)"
            } else {
                ""
            },
            kernel.trim(),
            self.probe["file_open"].as_str().unwrap_or("?"),
        );
        let _ = writeln!(
            t,
            "load average: {} at start, {} at end; {:.0} s in all",
            self.load_start, self.load_end, self.elapsed_s
        );
        if !self.others.is_empty() {
            let _ = writeln!(
                t,
                "WARNING: tracers the benchmark did not start were running: {}; their probes are in every condition, unmonitored included",
                self.others.join(", ")
            );
        }
        for w in WORKLOADS {
            let _ = writeln!(t, "  {}: {}", w.label(), w.describe(self.sizes));
        }
        let _ = writeln!(t);
        let header = format!(
            "{:<14} {:<16} {:>9} {:>13} {:>6} {:>6} {:>6}  {:<16} {:>6} {:>5} {:>6} {:>6} {:>6} {:>6}",
            "workload",
            "condition",
            "median ms",
            "min–max",
            "ratio",
            "paired",
            "cpu",
            "target",
            "events",
            "lost",
            "user",
            "sys",
            "watch",
            "RSS MB"
        );
        let _ = writeln!(t, "{header}");
        let _ = writeln!(t, "{}", "-".repeat(header.chars().count()));
        let mut rows = serde_json::Map::new();
        for w in WORKLOADS {
            let mut conds = serde_json::Map::new();
            for cond in [
                Cond::Unmonitored,
                Cond::Traced,
                Cond::Outside,
                Cond::Strace,
                Cond::Bpftrace,
                Cond::Auditd,
            ] {
                let Some(c) = self.cell(w, cond) else {
                    continue;
                };
                let ms: Vec<f64> = c.samples.iter().map(|s| s.ms).collect();
                let med = median(&ms).unwrap_or(f64::NAN);
                let (lo, hi) = ms
                    .iter()
                    .fold((f64::INFINITY, 0f64), |(a, b), &x| (a.min(x), b.max(x)));
                let ratio = self.ratio(w, cond);
                let paired = self.paired_ratio(w, cond);
                let cpu_ratio = self.cpu_ratio(w, cond);
                let wl_cpu = self.med(w, cond, |s| Some(s.workload_cpu_ms));
                let target = Self::target_of(w, cond);
                let target_text = match (target, ratio) {
                    (Some(tg), Some(r)) => format!("≤ {tg:.2}× {}", met(r <= tg)),
                    _ if matches!(cond, Cond::Strace | Cond::Bpftrace | Cond::Auditd) => {
                        "(peer)".to_string()
                    }
                    _ => String::new(),
                };
                let events = self.med(w, cond, |s| s.events.map(|e| e as f64));
                let user = self.med(w, cond, |s| s.cpu_user_ms);
                let sys = self.med(w, cond, |s| s.cpu_sys_ms);
                let watch = self.med(w, cond, |s| s.watch_cpu_ms);
                let rss = self.med(w, cond, |s| s.rss_mb);
                let lost = self.total_lost(w, cond);
                let _ = writeln!(
                    t,
                    "{:<14} {:<16} {:>9} {:>13} {:>6} {:>6} {:>6}  {:<16} {:>6} {:>5} {:>6} {:>6} {:>6} {:>6}",
                    w.label(),
                    cond.label(),
                    fmt_ms(med),
                    format!("{}–{}", fmt_ms(lo), fmt_ms(hi)),
                    opt(ratio.map(|r| format!("{r:.2}"))),
                    opt(paired.map(|r| format!("{r:.2}"))),
                    opt(cpu_ratio.map(|r| format!("{r:.2}"))),
                    target_text,
                    opt(events.map(|e| format!("{e:.0}"))),
                    opt(lost),
                    opt(user.map(|x| format!("{x:.0}"))),
                    opt(sys.map(|x| format!("{x:.0}"))),
                    opt(watch.map(|x| format!("{x:.0}"))),
                    opt(rss.map(|r| format!("{r:.1}"))),
                );
                conds.insert(
                    cond.key().into(),
                    json!({
                        "median_ms": round3(med),
                        "min_ms": round3(lo),
                        "max_ms": round3(hi),
                        "ratio": ratio.map(round3),
                        "paired_ratio": paired.map(round3),
                        "workload_cpu_ms_median": wl_cpu.map(round3),
                        "workload_cpu_ratio": cpu_ratio.map(round3),
                        "target_ratio": target,
                        "met": match (target, ratio) { (Some(tg), Some(r)) => Some(r <= tg), _ => None },
                        "events_median": events,
                        "lost_total": lost,
                        "monitor_cpu_user_ms_median": user.map(round3),
                        "monitor_cpu_sys_ms_median": sys.map(round3),
                        "monitor_cpu_after_attach_ms_median": watch.map(round3),
                        "monitor_peak_rss_mb_median": rss.map(round3),
                        "runs": c.samples.iter().map(Sample::json).collect::<Vec<_>>(),
                    }),
                );
            }
            rows.insert(
                w.key().into(),
                json!({ "describe": w.describe(self.sizes), "conditions": conds }),
            );
        }
        let _ = writeln!(
            t,
            "ratio: median / unmonitored median (the targets apply to it); paired: median over rounds of run / same round's\n\
unmonitored run; cpu: the same ratio for the workload's own CPU time (user+sys of its tree, where the probes' kernel\n\
time is charged; less moved by other load than wall time).\n\
events: ring-buffer records per run; lost: total over all runs (bpftrace: its \"Lost N events\"; auditd: the kernel's audit lost counter).\n\
user, sys: the monitor's CPU ms per run (start-up included: BPF load and verification is most of sys); watch: its CPU ms (user+sys) from attached to exit.\n\
RSS MB: the monitor's peak RSS. Medians over the rounds throughout."
        );
        let _ = writeln!(t);

        let attach = self.attach_all();
        let attach_med = median(&attach);
        let (alo, ahi) = attach
            .iter()
            .fold((f64::INFINITY, 0f64), |(a, b), &x| (a.min(x), b.max(x)));
        let _ = writeln!(
            t,
            "start to attached (sandbox-watch run started → workload's first exec): median {} ms (min {} ms, max {} ms, {} runs)",
            opt(attach_med.map(fmt_ms)),
            fmt_ms(alo),
            fmt_ms(ahi),
            attach.len()
        );
        let _ = writeln!(
            t,
            "kernel → log line delay ({} execs {} ms apart, log polled every 2 ms): p50 {} ms, p99 {} ms, max {} ms",
            self.latency["markers"],
            self.latency["interval_ms"],
            self.latency["p50_ms"],
            self.latency["p99_ms"],
            self.latency["max_ms"]
        );
        for m in self.memory {
            let rss = m["peak_rss_mb"].as_f64().unwrap_or(f64::NAN);
            let _ = writeln!(
                t,
                "memory, {}{}: {} events, {} lost, {} file entries; monitor peak RSS {:.1} MB (target ≤ {TARGET_RSS_MB:.0} MB: {}; sampled peaks: anonymous {:.1} MB, file-backed {:.1} MB), CPU {:.0}+{:.0} ms, workload {:.0} ms, monitor {:.1} s in all; log {:.0} MB, report {:.0} MB",
                m["workload"].as_str().unwrap_or(""),
                if m["with_report"] == true {
                    ", --log and --report"
                } else {
                    ", --log only"
                },
                m["events"],
                m["lost"],
                m["file_entries"],
                rss,
                met(rss <= TARGET_RSS_MB),
                m["sampled_rss_anon_mb"].as_f64().unwrap_or(0.0),
                m["sampled_rss_file_mb"].as_f64().unwrap_or(0.0),
                m["monitor_cpu_user_ms"].as_f64().unwrap_or(0.0),
                m["monitor_cpu_sys_ms"].as_f64().unwrap_or(0.0),
                m["workload_ms"].as_f64().unwrap_or(0.0),
                m["monitor_wall_s"].as_f64().unwrap_or(0.0),
                m["log_mb"].as_f64().unwrap_or(0.0),
                m["report_mb"].as_f64().unwrap_or(0.0),
            );
        }
        for (peer, why) in self.skipped {
            let _ = writeln!(t, "not compared: {peer}: {why}");
        }
        if self.peers.contains(&Cond::Bpftrace) {
            let _ = writeln!(
                t,
                "bpftrace: the program of issue 8; its stdout is read and discarded by the benchmark (to see it attach)"
            );
        }
        if self.peers.contains(&Cond::Auditd) {
            let _ = writeln!(
                t,
                "auditd: rule -a always,exit -F arch=b64 -S execve -S openat, backlog 8192; started and stopped each round, settings restored,\n\
then `-a never,task` (once audit ran, the kernel gives every new process an audit context until reboot; that rule stops it)"
            );
        }
        let _ = writeln!(t);
        let checks = self.checks();
        let _ = writeln!(t, "targets (issue 8):");
        for c in &checks {
            let _ = writeln!(
                t,
                "  {:<48} {:>10}  (target {:<8}) {}",
                c.what,
                c.value,
                c.target,
                met(c.met)
            );
        }

        let json = json!({
            "schema": "sandbox-watch/bench/1",
            "quick": self.opts.quick,
            "rounds": self.sizes.rounds,
            "machine": {
                "cpus": cpus,
                "kernel": kernel.trim(),
                "load_average_start": self.load_start,
                "load_average_end": self.load_end,
                "other_tracers": self.others,
            },
            "probe": self.probe,
            "elapsed_s": round3(self.elapsed_s),
            "workloads": rows,
            "attach_ms": {
                "median": attach_med.map(round3),
                "min": round3(alo),
                "max": round3(ahi),
                "runs": attach.iter().map(|x| round3(*x)).collect::<Vec<_>>(),
            },
            "latency": self.latency,
            "memory": self.memory,
            "peers": {
                "compared": self.peers.iter().map(|c| c.key()).collect::<Vec<_>>(),
                "skipped": self.skipped.iter().map(|(p, w)| json!({"peer": p, "why": w})).collect::<Vec<_>>(),
                "sessions": self.peer_cpu,
            },
            "targets": checks.iter().map(|c| json!({
                "what": c.what, "target": c.target, "value": c.value, "met": c.met,
            })).collect::<Vec<_>>(),
            "all_met": checks.iter().all(|c| c.met),
        });
        (t, json)
    }
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
