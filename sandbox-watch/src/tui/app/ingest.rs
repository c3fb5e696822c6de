//! Records into the TUI's state: each record the feed brings updates the rows of the views,
//! the counts, the alerts and the header.
use super::*;

impl App {
    pub(crate) fn ingest(&mut self, feed: Feed) {
        self.dirty = true;
        match feed {
            Feed::Record(v) => self.ingest_record(v),
            Feed::Stats { events, lost } => {
                if let Some(prev) = self.stats_events {
                    if self.rate.len() == RATE_SAMPLES {
                        self.rate.pop_front();
                    }
                    self.rate.push_back(events.saturating_sub(prev));
                }
                self.stats_events = Some(events);
                self.stats_lost = lost;
                if lost > 0 && !self.lost_alerted {
                    self.lost_alerted = true;
                    self.alerts.push(Alert {
                        at_ns: Some(self.now_ns),
                        kind: AlertKind::Lost,
                        pid: None,
                        summary: format!(
                            "{lost} events lost in the kernel (ring buffer full): the record is incomplete"
                        ),
                        violation: false,
                        raw: None,
                    });
                }
            }
            Feed::Ended { reason } => {
                self.ended = Some(reason);
                self.ended_now.get_or_insert(self.now_ns);
                self.confirm_quit = false;
                if let Some(a) = &mut self.agent {
                    a.focused = false;
                }
            }
        }
    }

    fn ingest_record(&mut self, v: Value) {
        let raw: Arc<str> = Arc::from(v.to_string());
        let kind = str_field(&v, "kind").unwrap_or("").to_string();
        let at = at_ns(&v);
        if let Some(at) = at {
            let first = *self.first_at.get_or_insert(at);
            self.last_at = Some(self.last_at.map_or(at, |l| l.max(at)));
            self.count_in_histogram((at - first).max(0));
        }
        self.records += 1;
        let pid = pid_field(&v, "pid");
        match kind.as_str() {
            "start" => {
                let target = v.get("target");
                let probe = v.get("probe");
                let gaps: Vec<String> = probe
                    .and_then(|p| p.get("gaps"))
                    .and_then(Value::as_array)
                    .map(|g| {
                        g.iter()
                            .filter_map(|s| s.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default();
                let hook = probe
                    .and_then(|p| str_field(p, "file_open"))
                    .map(str::to_string);
                for gap in gaps.iter().take(GAP_ALERTS_MAX) {
                    self.alerts.push(Alert {
                        at_ns: at,
                        kind: AlertKind::Gap,
                        pid: None,
                        summary: format!(
                            "not seen with the {} hook: {gap}",
                            hook.as_deref().unwrap_or("?")
                        ),
                        violation: false,
                        raw: Some(raw.clone()),
                    });
                }
                self.start = Some(StartInfo {
                    target: target.map(target_text).unwrap_or_default(),
                    mode: target
                        .and_then(|t| str_field(t, "mode"))
                        .unwrap_or("")
                        .to_string(),
                    agent_netns: v.get("agent").and_then(|a| u64_field(a, "netns")),
                    hook,
                    gaps: gaps.len(),
                });
            }
            "process" | "exec" => {
                self.procs.exec(&v, &raw);
                if !bool_field(&v, "launcher") && self.first_exec_netns.is_none() {
                    self.first_exec_netns = u64_field(&v, "netns");
                }
                if Verdict::of(&v) == Verdict::Outside {
                    let netns = u64_field(&v, "netns")
                        .map(|n| format!(" (netns {n})"))
                        .unwrap_or_default();
                    let summary = format!(
                        "pid {} `{}` ran outside the agent's network namespace{netns}",
                        pid.map(|p| p.to_string()).unwrap_or_default(),
                        join_argv(v.get("argv")),
                    );
                    self.outside(at, AlertKind::Outside, pid, summary, &raw);
                }
            }
            "fork" => self.procs.fork(&v, &raw),
            "exit" => self.procs.exit(&v, &raw),
            "file" | "file_failed" => {
                let row = FileRow::from_record(&v, &raw);
                if row.credential || row.persistence {
                    let (kind, what) = if row.credential {
                        (AlertKind::Credential, "credential ")
                    } else {
                        (AlertKind::Persistence, "persistence file ")
                    };
                    let path = match &row.new_path {
                        Some(np) => format!("{} → {np}", row.path),
                        None => row.path.clone(),
                    };
                    let pid_text = pid.map(|p| p.to_string()).unwrap_or_default();
                    self.alerts.push(Alert {
                        at_ns: at,
                        kind,
                        pid,
                        summary: match &row.failed {
                            Some(error) => format!(
                                "pid {pid_text} tried to {} {what}{path} (failed: {error})",
                                if row.op == "read" { "read" } else { "write" }
                            ),
                            None => format!("pid {pid_text} {} {what}{path}", verb(&row.op)),
                        },
                        violation: false,
                        raw: Some(raw.clone()),
                    });
                }
                if let Some(key) = file_key(&v) {
                    if self.file_index.len() >= 2 * LIST_CAP {
                        self.file_index.clear();
                    }
                    self.file_index.insert(key, self.files.end());
                }
                self.files.push(row);
            }
            "net" => {
                let row = NetRow::from_record(&v, &raw);
                if row.verdict == Verdict::Outside {
                    let summary = format!(
                        "pid {} {} {} {} outside the agent's network namespace",
                        pid.map(|p| p.to_string()).unwrap_or_default(),
                        row.op,
                        row.proto,
                        row.dest
                    );
                    self.outside(at, AlertKind::Network, pid, summary, &raw);
                }
                self.net.push(row);
            }
            "net_result" => {
                // The outcome of a connect logged as in progress: update the newest match.
                let end = self.net.end();
                let lo = end
                    .saturating_sub(NET_RESULT_LOOKBACK)
                    .max(self.net.first());
                if let Some(id) = (lo..end)
                    .rev()
                    .find(|&id| self.net.get(id).is_some_and(|r| r.is_result_of(&v)))
                    && let Some(row) = self.net.get_mut(id)
                {
                    if let Some(res) = str_field(&v, "result") {
                        row.result = res.to_string();
                    }
                    if row.later.len() < NET_LATER_CAP {
                        row.later.push(raw.clone());
                    }
                }
            }
            "file_count" => {
                // The final read count of a file (counted in the kernel): update its row.
                if let Some(key) = file_key(&v)
                    && let Some(&id) = self.file_index.get(&key)
                    && let Some(row) = self.files.get_mut(id)
                    && let Some(n) = u64_field(&v, "count")
                {
                    row.count = n;
                }
            }
            "violation" => {
                if !self.final_alerts {
                    self.supersede_live_alerts();
                }
                let kind = AlertKind::of_violation(&v);
                let summary = str_field(&v, "summary").unwrap_or("").to_string();
                if kind == AlertKind::Outside && self.outside_reason.is_none() {
                    self.outside_reason = Some(summary.clone());
                }
                self.alerts.push(Alert {
                    at_ns: at,
                    kind,
                    pid,
                    summary,
                    violation: true,
                    raw: Some(raw.clone()),
                });
            }
            "end" => {
                if let Some(s) = &mut self.start
                    && s.agent_netns.is_none()
                {
                    s.agent_netns = v.get("agent").and_then(|a| u64_field(a, "netns"));
                }
                self.end_at = at;
                self.end_verdict_outside = str_field(&v, "verdict") == Some("outside");
                self.end_events = u64_field(&v, "events");
                self.end_lost = u64_field(&v, "lost").unwrap_or(0);
                if self.ended.is_none() {
                    let by = str_field(&v, "ended_by").unwrap_or("the capture ended");
                    self.ended = Some(by.to_string());
                }
            }
            _ => {}
        }
        let seq = u64_field(&v, "seq");
        self.log.push(LogRow {
            seq,
            at_ns: at,
            kind,
            summary: summarize(&v),
            raw,
        });
    }

    /// The final list of violations covers everything the live alerts said (outside,
    /// credential, persistence, lost), with more detail: keep only the gaps, which are not
    /// violations, so each finding shows once.
    fn supersede_live_alerts(&mut self) {
        self.final_alerts = true;
        let live = self.alerts.take_all();
        self.alerts_replaced = self.alerts.end();
        let gaps: Vec<Alert> = live
            .into_iter()
            .filter(|a| a.kind == AlertKind::Gap)
            .collect();
        for a in gaps {
            self.alerts.push(a);
        }
        let state = &mut self.views[View::Alerts.index()];
        state.sel = None;
        state.offset = 0;
    }

    fn count_in_histogram(&mut self, since_first_ns: i64) {
        let mut i = (since_first_ns / self.hist_bucket_ns) as usize;
        while i >= HIST_BUCKETS {
            self.hist = self.hist.chunks(2).map(|c| c.iter().sum()).collect();
            self.hist_bucket_ns *= 2;
            i = (since_first_ns / self.hist_bucket_ns) as usize;
        }
        if self.hist.len() <= i {
            self.hist.resize(i + 1, 0);
        }
        self.hist[i] += 1;
    }

    fn outside(
        &mut self,
        at: Option<i64>,
        kind: AlertKind,
        pid: Option<u32>,
        summary: String,
        raw: &Arc<str>,
    ) {
        if self.outside_reason.is_none() {
            self.outside_reason = Some(summary.clone());
        }
        self.alerts.push(Alert {
            at_ns: at,
            kind,
            pid,
            summary,
            violation: false,
            raw: Some(raw.clone()),
        });
    }
}

/// A file record's identity for `file_count`: (pid, op, dev, ino); a count without `op` (older
/// logs) is of reads.
fn file_key(v: &Value) -> Option<(u32, String, String, u64)> {
    let dev = match v.get("dev")? {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let op = str_field(v, "op").unwrap_or("read").to_string();
    Some((pid_field(v, "pid")?, op, dev, u64_field(v, "ino")?))
}

fn verb(op: &str) -> &str {
    match op {
        "read" => "read",
        "write" => "wrote",
        "create" => "created",
        "delete" => "deleted",
        "rename" => "renamed",
        other => other,
    }
}
