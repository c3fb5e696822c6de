//! The peers measured beside sandbox-watch: bpftrace and auditd (strace needs no set-up).
use super::*;

/// bpftrace printing every execve and openat, its output drained by a thread (the harness
/// needs its stdout only to see that it is attached).
pub(super) struct Bpftrace {
    proc: Proc,
    pub(super) lost: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Bpftrace {
    pub(super) fn start() -> anyhow::Result<Bpftrace> {
        let marker = format!("/tmp/swb-ready-{}", std::process::id());
        Bpftrace::start_program(BPFTRACE_PROGRAM, &marker)
    }

    /// Runs `program`, attached once a line of its stdout starts with `marker` after this
    /// process opened the path `marker` (the program must print it for that open).
    pub(super) fn start_program(program: &str, marker: &str) -> anyhow::Result<Bpftrace> {
        let marker = marker.to_string();
        let mut proc = Proc::spawn(
            command("bpftrace")
                .arg("-e")
                .arg(program)
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
    pub(super) fn stop(mut self) -> anyhow::Result<(f64, u64)> {
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
pub(super) struct AuditStatus {
    enabled: u64,
    pid: u64,
    backlog_limit: u64,
    backlog_wait_time: u64,
    rate_limit: u64,
    lost: u64,
}

pub(super) fn audit_status() -> anyhow::Result<AuditStatus> {
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

pub(super) fn auditctl(args: &[&str]) -> anyhow::Result<()> {
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
pub(super) fn audit_unavailable() -> Option<String> {
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
pub(super) struct Audit {
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
pub(super) fn audit_rules() -> anyhow::Result<Vec<String>> {
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

pub(super) const NEVER_TASK: &str = "-a never,task";

pub(super) const AUDIT_LOG_DIR: &str = "/var/log/audit";

impl Audit {
    pub(super) fn start() -> anyhow::Result<Audit> {
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

    pub(super) fn lost(&self) -> u64 {
        audit_status().map(|s| s.lost).unwrap_or(0)
    }

    /// Stops it: the daemon's CPU ms (user+sys) over the session.
    pub(super) fn stop(mut self) -> anyhow::Result<f64> {
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
pub(super) fn proc_cpu_ms(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = after.split_whitespace().collect();
    // After the ")": state is field 3, utime 14, stime 15 (1-based) → indexes 11, 12.
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some(ticks as f64 * 1e3 / hz)
}

/// The kernel's floor: bpftrace holding a no-op program on each storm's syscall entry
/// tracepoint ([`FLOOR_PROGRAM`]); what any syscall tracepoint program costs every task.
pub(super) struct Floor {
    proc: Proc,
}

impl Floor {
    pub(super) fn start() -> anyhow::Result<Floor> {
        let mut proc = Proc::spawn(
            command("bpftrace")
                .arg("-e")
                .arg(FLOOR_PROGRAM)
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        )?;
        // Attached once bpftool lists its tracepoint links (the program prints nothing).
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if attached_tracepoints(proc.pid()) >= FLOOR_TRACEPOINTS {
                return Ok(Floor { proc });
            }
            if let Some((code, _)) = proc.exited()? {
                bail!("bpftrace (the floor's no-op program) exited {code} before attaching");
            }
            if Instant::now() > deadline {
                bail!("bpftrace (the floor's no-op program) did not attach within 60 s");
            }
            check_interrupted()?;
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub(super) fn stop(mut self) -> anyhow::Result<()> {
        signal(self.proc.pid(), libc::SIGINT);
        self.proc.wait4()?;
        Ok(())
    }
}

/// How many tracepoints `pid` has BPF programs attached to (`bpftool perf show`).
fn attached_tracepoints(pid: u32) -> usize {
    let Ok(out) = command("bpftool").args(["perf", "show", "--json"]).output() else {
        return 0;
    };
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    v.as_array().map_or(0, |all| {
        all.iter()
            .filter(|e| e["pid"] == pid && e["fd_type"] == "tracepoint")
            .count()
    })
}
