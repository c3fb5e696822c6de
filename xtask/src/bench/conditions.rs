//! Running one workload under each condition (unmonitored, traced by `sandbox-watch run`,
//! outside the traced set while `sandbox-watch attach` watches something else), and the
//! processes it starts and watches.
use super::*;

pub(super) fn unix_ns_now() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0)
}

pub(super) fn tv_ms(tv: libc::timeval) -> f64 {
    tv.tv_sec as f64 * 1e3 + tv.tv_usec as f64 / 1e3
}

pub(super) fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill has no memory preconditions; pid is a child we started and have not reaped.
    unsafe { libc::kill(pid as libc::pid_t, sig) };
}

/// A child process we started, reaped with wait4 (for its rusage); killed if dropped unreaped.
pub(super) struct Proc {
    pub(super) child: Child,
    pub(super) reaped: bool,
}

impl Proc {
    pub(super) fn spawn(cmd: &mut Command) -> anyhow::Result<Proc> {
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot start {cmd:?}"))?;
        Ok(Proc {
            child,
            reaped: false,
        })
    }

    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the exit: (exit status as a shell shows it, resource use). The rusage is
    /// the process's own plus that of every child it waited for (the kernel's RUSAGE_BOTH).
    pub(super) fn wait4(&mut self) -> anyhow::Result<(i32, libc::rusage)> {
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
    pub(super) fn exited(&mut self) -> anyhow::Result<Option<(i32, libc::rusage)>> {
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
pub(super) struct Watched {
    /// Peak VmHWM, RssAnon and RssFile (kB) over the samples.
    pub(super) hwm_kb: u64,
    pub(super) anon_kb: u64,
    pub(super) file_kb: u64,
    /// The monitor's CPU time (user+sys, all threads) when it was attached: when its log got
    /// its first line.
    pub(super) attached_cpu_ms: Option<f64>,
}

/// Watches a monitor while it runs: its CPU time at the moment its log gets a first line (the
/// capture loop runs: probe loaded, target traced), then every 50 ms its VmHWM (peak RSS, the
/// fallback when wait4's maximum may be a child's) and how much of its RSS is anonymous
/// (heap) or file-backed (the binary and the mapped ring buffer).
pub(super) struct Watcher {
    pub(super) stop: Arc<AtomicBool>,
    pub(super) thread: Option<std::thread::JoinHandle<Watched>>,
}

/// CPU time (user+sys, ns) of every thread of a process, from /proc/PID/task/*/schedstat.
pub(super) fn threads_cpu_ns(pid: u32) -> Option<u64> {
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

pub(super) fn status_kb(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

impl Watcher {
    pub(super) fn start(pid: u32, log: Option<&Path>) -> Watcher {
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

    pub(super) fn finish(mut self) -> Watched {
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
pub(super) fn command(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = Command::new(program);
    c.env_remove("SUDO_UID")
        .env_remove("SUDO_GID")
        .env_remove("SUDO_USER")
        .stdin(Stdio::null());
    c
}

pub(super) fn tail_of(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

// ---------------------------------------------------------------- conditions

/// Waits (up to 30 s) until no process of a sandbox-watch binary under test (this build's or
/// `--baseline`'s) is left but `live`, the monitor an outside run is measured beside: a monitor
/// that has exited leaves the slow detach of its programs to a child, and until that child is
/// gone its tracepoints would be in the next condition's run (the unmonitored one included).
/// Processes are known by their executable, not their name: a baseline copied to another name
/// is waited for too, and an outside run's own monitor is not (it would be a 30 s wait that
/// only this build's outside runs had). Then writes back what the runs before left dirty (a
/// traced run's log, the write storm's files): the kernel would otherwise write it back during
/// this run, which one depending on the order of the round.
fn settle(ctx: &Ctx, live: Option<u32>) {
    let binaries: Vec<PathBuf> = std::iter::once(&ctx.sw)
        .chain(ctx.baseline.as_ref())
        .filter_map(|b| std::fs::canonicalize(b).ok())
        .collect();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::time::Instant::now() < until
        && monitor_processes(&binaries)
            .into_iter()
            .any(|pid| Some(pid) != live)
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
}

/// Processes running one of `binaries` (a monitor, or the child that detaches its programs).
fn monitor_processes(binaries: &[PathBuf]) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse::<u32>().ok()?;
            let exe = std::fs::read_link(e.path().join("exe")).ok()?;
            // A binary rebuilt while it runs reads "PATH (deleted)".
            let exe = exe.to_str()?;
            let exe = Path::new(exe.strip_suffix(" (deleted)").unwrap_or(exe));
            binaries.iter().any(|b| b == exe).then_some(pid)
        })
        .collect()
}

/// A workload run directly (or under `prefix`, e.g. strace), timed by bench-helper.
pub(super) fn run_bare(ctx: &mut Ctx, w: Workload, prefix: &[&str]) -> anyhow::Result<Sample> {
    run_bare_beside(ctx, w, prefix, None)
}

/// [`run_bare`] while `live` (a monitor watching something else) runs.
fn run_bare_beside(
    ctx: &mut Ctx,
    w: Workload,
    prefix: &[&str],
    live: Option<u32>,
) -> anyhow::Result<Sample> {
    settle(ctx, live);
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
pub(super) struct Monitored {
    pub(super) timed: Timed,
    pub(super) watched: Watched,
    pub(super) rss_kb: u64,
    pub(super) user_ms: f64,
    pub(super) sys_ms: f64,
}

/// Starts the monitor (`cmd`, whose workload writes its timing to `timed`), watches it while it
/// runs, and waits for it.
pub(super) fn monitor(
    cmd: &mut Command,
    timed: &Path,
    log: &Path,
    errs: &Path,
) -> anyhow::Result<Monitored> {
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
pub(super) fn run_traced(ctx: &mut Ctx, sw: &Path, w: Workload) -> anyhow::Result<(Sample, Value)> {
    settle(ctx, None);
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
        command(sw)
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
        output_lost: output_lost(&r),
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
pub(super) fn monitor_rss_kb(ru: &libc::rusage, kids_maxrss_kb: i64, sampled_kb: u64) -> u64 {
    let waited = ru.ru_maxrss.max(0) as u64;
    if ru.ru_maxrss > kids_maxrss_kb {
        waited
    } else {
        sampled_kb
    }
}

/// The workload runs untraced while `sandbox-watch attach` watches an idle `sleep`.
pub(super) fn run_outside(ctx: &mut Ctx, sw: &Path, w: Workload) -> anyhow::Result<Sample> {
    settle(ctx, None);
    let dir = ctx.scratch()?;
    let (report, log, errs) = (
        dir.join("report.json"),
        dir.join("log.jsonl"),
        dir.join("monitor.stderr"),
    );
    let idle = Proc::spawn(command("sleep").arg("1000"))?;
    let mut mon = Proc::spawn(
        command(sw)
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
    let sample = run_bare_beside(ctx, w, &[], Some(mon.pid()));
    signal(mon.pid(), libc::SIGTERM);
    let (_, ru) = mon.wait4()?;
    let watched = watcher.finish();
    drop(idle);
    let mut sample = sample?;
    let r: Value = serde_json::from_slice(&std::fs::read(&report)?)
        .with_context(|| format!("reading {}", report.display()))?;
    sample.events = r["coverage"]["events"].as_u64();
    sample.lost = r["coverage"]["lost"].as_u64();
    sample.output_lost = output_lost(&r);
    let (user, sys) = (tv_ms(ru.ru_utime), tv_ms(ru.ru_stime));
    sample.cpu_user_ms = Some(user);
    sample.cpu_sys_ms = Some(sys);
    sample.watch_cpu_ms = attached_cpu_ms.map(|a| user + sys - a);
    sample.rss_mb = Some((ru.ru_maxrss.max(0) as u64).max(watched.hwm_kb) as f64 / 1024.0);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(sample)
}

/// Output chunks a report counts lost (0 when it lost none: the kind is then absent).
fn output_lost(r: &Value) -> Option<u64> {
    r["coverage"]["lost"].as_u64().map(|_| {
        r["coverage"]["lost_by_kind"]["output"]
            .as_u64()
            .unwrap_or(0)
    })
}
