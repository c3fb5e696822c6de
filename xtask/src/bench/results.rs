//! What the benchmark prints and writes: the table, the checked targets and the JSON.
use super::*;

pub(super) struct Results<'a> {
    pub(super) opts: &'a Options,
    pub(super) sizes: &'a Sizes,
    pub(super) cells: &'a [Cell],
    pub(super) peers: &'a [Cond],
    pub(super) skipped: &'a [(String, String)],
    pub(super) probe: &'a Value,
    pub(super) latency: &'a Value,
    pub(super) latency_attach: Option<f64>,
    pub(super) memory: &'a [Value],
    pub(super) peer_cpu: &'a [Value],
    pub(super) others: &'a [String],
    pub(super) load_start: String,
    pub(super) load_end: String,
    pub(super) elapsed_s: f64,
}

/// One checked target.
pub(super) struct Check {
    what: String,
    target: String,
    value: String,
    met: bool,
}

pub(super) fn met(ok: bool) -> &'static str {
    if ok { "met" } else { "NOT MET" }
}

pub(super) fn fmt_ms(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

pub(super) fn opt<T: std::fmt::Display>(x: Option<T>) -> String {
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

    /// The ratio to the kernel's floor (the same workload beside a no-op syscall tracepoint
    /// program), when the floor ran.
    fn floor_ratio(&self, w: Workload, cond: Cond) -> Option<f64> {
        let floor = self.med(w, Cond::Floor, |s| Some(s.ms))?;
        Some(self.med(w, cond, |s| Some(s.ms))? / floor)
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

    /// Records lost over the cell's runs: all (`output` false: the other kinds; true: output
    /// chunks alone).
    fn total_lost(&self, w: Workload, cond: Cond, output: bool) -> Option<u64> {
        let c = self.cell(w, cond)?;
        let lost: Vec<u64> = c
            .samples
            .iter()
            .filter_map(|s| {
                let out = s.output_lost.unwrap_or(0);
                s.lost
                    .map(|l| if output { out } else { l.saturating_sub(out) })
            })
            .collect();
        (!lost.is_empty()).then(|| lost.iter().sum())
    }

    /// Records lost in every traced and outside run: output chunks alone (`output`), or the
    /// rest.
    fn lost_everywhere(&self, output: bool) -> u64 {
        WORKLOADS
            .iter()
            .flat_map(|&w| [Cond::Traced, Cond::Outside].map(|c| self.total_lost(w, c, output)))
            .flatten()
            .sum()
    }

    fn target_of(w: Workload, cond: Cond) -> Option<f64> {
        match cond {
            Cond::Traced => w.traced_target(),
            Cond::Outside => Some(w.outside_target()),
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
        // Issue 14's targets against the floor: outside within 3% of it; a traced UDP storm
        // (and issue 19's output storm) within 1.3× of it.
        for w in WORKLOADS {
            for (cond, t) in [
                (Cond::Outside, Some(TARGET_OUTSIDE_FLOOR)),
                (
                    Cond::Traced,
                    match w {
                        Workload::UdpStorm => Some(TARGET_TRACED_UDP),
                        // Issue 19's 1.3×, against what any program on write's exit costs.
                        Workload::OutputStorm => Some(TARGET_TRACED_OUTPUT),
                        _ => None,
                    },
                ),
            ] {
                if let (Some(t), Some(r)) = (t, self.floor_ratio(w, cond)) {
                    out.push(Check {
                        what: format!("{} {} / floor", w.label(), cond.label()),
                        target: format!("≤ {t:.2}×"),
                        value: format!("{r:.2}×"),
                        met: r <= t,
                    });
                }
            }
        }
        let lost = self.lost_everywhere(false);
        out.push(Check {
            what: "records lost but output, every traced and outside run".into(),
            target: "0".into(),
            value: lost.to_string(),
            met: lost == 0,
        });
        for m in self.memory.iter().filter(|m| m["with_report"] == true) {
            let otlp = if m["otlp"].is_string() {
                " with --otlp"
            } else {
                ""
            };
            let rss = m["peak_rss_mb"].as_f64().unwrap_or(f64::NAN);
            out.push(Check {
                what: format!("monitor peak RSS, capture of {} events{otlp}", m["events"]),
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
            if m["otlp"].is_string() {
                let pending = m["export"]["pending"].as_u64();
                out.push(Check {
                    what: "records not delivered to the collector at its end".into(),
                    target: "0".into(),
                    value: opt(pending),
                    met: pending == Some(0),
                });
            }
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

    pub(super) fn render(&self) -> (String, Value) {
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
        for w in WORKLOADS
            .iter()
            .filter(|&&w| self.cells.iter().any(|c| c.workload == w))
        {
            let _ = writeln!(t, "  {}: {}", w.label(), w.describe(self.sizes));
        }
        let _ = writeln!(t);
        let header = format!(
            "{:<14} {:<16} {:>9} {:>13} {:>6} {:>6} {:>6} {:>6}  {:<16} {:>6} {:>5} {:>6} {:>6} {:>6} {:>6}",
            "workload",
            "condition",
            "median ms",
            "min–max",
            "ratio",
            "paired",
            "cpu",
            "floor",
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
                Cond::Floor,
                Cond::Traced,
                Cond::BaseTraced,
                Cond::Outside,
                Cond::BaseOutside,
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
                let floor_ratio = self.floor_ratio(w, cond).filter(|_| cond != Cond::Floor);
                let wl_cpu = self.med(w, cond, |s| Some(s.workload_cpu_ms));
                let target = Self::target_of(w, cond);
                let target_text = match (target, ratio) {
                    (Some(tg), Some(r)) => format!("≤ {tg:.2}× {}", met(r <= tg)),
                    _ if matches!(cond, Cond::Strace | Cond::Bpftrace | Cond::Auditd) => {
                        "(peer)".to_string()
                    }
                    _ if cond == Cond::Floor => "(kernel floor)".to_string(),
                    _ if matches!(cond, Cond::BaseTraced | Cond::BaseOutside) => {
                        "(baseline)".to_string()
                    }
                    _ => String::new(),
                };
                let events = self.med(w, cond, |s| s.events.map(|e| e as f64));
                let user = self.med(w, cond, |s| s.cpu_user_ms);
                let sys = self.med(w, cond, |s| s.cpu_sys_ms);
                let watch = self.med(w, cond, |s| s.watch_cpu_ms);
                let rss = self.med(w, cond, |s| s.rss_mb);
                let lost = self.total_lost(w, cond, false);
                let _ = writeln!(
                    t,
                    "{:<14} {:<16} {:>9} {:>13} {:>6} {:>6} {:>6} {:>6}  {:<16} {:>6} {:>5} {:>6} {:>6} {:>6} {:>6}",
                    w.label(),
                    cond.label(),
                    fmt_ms(med),
                    format!("{}–{}", fmt_ms(lo), fmt_ms(hi)),
                    opt(ratio.map(|r| format!("{r:.2}"))),
                    opt(paired.map(|r| format!("{r:.2}"))),
                    opt(cpu_ratio.map(|r| format!("{r:.2}"))),
                    opt(floor_ratio.map(|r| format!("{r:.2}"))),
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
                        "floor_ratio": floor_ratio.map(round3),
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
time is charged; less moved by other load than wall time); floor: median / the floor's median (floor: the same workload\n\
beside bpftrace holding a no-op program on sys_enter_execve, _openat, _sendto, _connect and _kill, what any syscall tracepoint costs).\n\
events: ring-buffer records per run; lost: total over all runs, output chunks apart (below) (bpftrace: its \"Lost N events\"; auditd: the kernel's audit lost counter).\n\
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
                match (m["with_report"] == true, m["otlp"].is_string()) {
                    (_, true) => ", --log, --report and --otlp (rotel on loopback)",
                    (true, false) => ", --log and --report",
                    (false, false) => ", --log only",
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
        for m in self.memory.iter().filter(|m| m["otlp"].is_string()) {
            let _ = writeln!(
                t,
                "OTLP export of that capture: {} records sent, {} pending, {} rejected; added monitor CPU {} ms = {} µs per record (the collector: {} µs per record)",
                m["export"]["sent"],
                m["export"]["pending"],
                m["export"]["rejected"],
                m["otlp_added_cpu_ms"],
                m["otlp_cpu_us_per_record"],
                m["collector_cpu_us_per_record"],
            );
        }
        for (peer, why) in self.skipped {
            let _ = writeln!(t, "not compared: {peer}: {why}");
        }
        if self.cells.iter().any(|c| c.cond == Cond::Floor) {
            let _ = writeln!(
                t,
                "floor: the workload unmonitored while a no-op bpftrace program is attached to the entry tracepoints of the storms' syscalls (execve, openat, sendto, connect, kill) and write's exit:\n\
any attached syscall tracepoint puts every task's syscalls on the kernel's traced path; the gap between it and `traced`/`outside` is ours"
            );
        }
        if let Some(b) = &self.opts.baseline {
            let _ = writeln!(
                t,
                "baseline: the same traced and outside runs with --baseline {} in the same rounds",
                b.display()
            );
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
        let _ = writeln!(t, "targets (issues 8 and 14):");
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
        // Said, not judged: a program that prints faster than SHA-256 hashes loses output, and
        // only output (its own ring); the stream then has no sha256 and says why.
        let _ = writeln!(
            t,
            "output chunks lost, every traced and outside run: {} (each stream that lost any \
             has no sha256 and says why)",
            self.lost_everywhere(true)
        );

        let json = json!({
            "schema": "sandbox-watch/bench/1",
            "quick": self.opts.quick,
            "baseline": self.opts.baseline.as_ref().map(|b| b.display().to_string()),
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
