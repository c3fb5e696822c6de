//! Records into the TUI's state: each record the feed brings updates the rows of the views,
//! the counts, the alerts and the header.
use super::*;

impl App {
    pub(crate) fn ingest(&mut self, feed: Feed) {
        self.dirty = true;
        match feed {
            Feed::Record(v) => self.ingest_record(v),
            Feed::Other(v) => self.ingest_other(v),
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
                        kind: AlertKind::Violation(crate::record::ViolationKind::Lost),
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

    fn ingest_record(&mut self, logged: Logged) {
        let raw: Arc<str> = Arc::from(logged.to_value().to_string());
        let at = Some(ns(logged.at));
        if let Some(at) = at {
            let first = *self.first_at.get_or_insert(at);
            self.last_at = Some(self.last_at.map_or(at, |l| l.max(at)));
            self.count_in_histogram((at - first).max(0));
        }
        self.records += 1;
        let record = &logged.record;
        let pid = record.pid();
        let applied = self.session.apply(logged.at, record);
        match (record, applied) {
            (Record::Start(s), _) => {
                let hook = s.probe.file_open.clone();
                for gap in s.probe.gaps.iter().take(GAP_ALERTS_MAX) {
                    self.alerts.push(Alert {
                        at_ns: at,
                        kind: AlertKind::Gap,
                        pid: None,
                        summary: format!("not seen with the {hook} hook: {gap}"),
                        violation: false,
                        raw: Some(raw.clone()),
                    });
                }
                self.start = Some(StartInfo {
                    target: target_text(&s.target),
                    mode: s.target.mode.clone(),
                    agent_netns: s.agent.netns,
                    hook: Some(hook),
                    gaps: s.probe.gaps.len(),
                });
            }
            (Record::Process(_) | Record::Exec(_), Applied::Process(i)) => {
                self.procs.touched(&self.session.processes, i, &raw);
                let p = &self.session.processes.list[i];
                if self.session.processes.verdict(p) == Verdict::Outside {
                    let netns = p.netns.map(|n| format!(" (netns {n})")).unwrap_or_default();
                    let summary = format!(
                        "pid {} `{}` ran outside the agent's network namespace{netns}",
                        p.pid,
                        join_argv(&p.argv),
                    );
                    self.outside(at, AlertKind::OUTSIDE, pid, summary, &raw);
                }
            }
            (Record::Fork(_) | Record::Exit(_) | Record::ExecFailed(_), Applied::Process(i)) => {
                self.procs.touched(&self.session.processes, i, &raw);
            }
            (Record::File(f), Applied::File(added)) => {
                self.file_alert(at, f, None, added.index(), &raw);
                if added.index() == self.file_raw.len() {
                    self.file_raw.push(raw.clone());
                }
            }
            (Record::FileFailed(crate::record::FileFailed::Entry(f)), Applied::File(added)) => {
                self.file_alert(at, f, f.result.as_deref(), added.index(), &raw);
                if added.index() == self.file_raw.len() {
                    self.file_raw.push(raw.clone());
                }
            }
            (Record::Net(_) | Record::NetResult(_), Applied::Net(i)) => {
                let n = &self.session.network.entries[i];
                if i == self.net_raw.len() {
                    if n.verdict == Verdict::Outside {
                        let summary = format!(
                            "pid {} {} {} {} outside the agent's network namespace",
                            n.pid,
                            n.op.as_str(),
                            n.proto,
                            crate::tui::model::net_dest(n)
                        );
                        let kind = AlertKind::Violation(crate::record::ViolationKind::Network);
                        self.outside(at, kind, pid, summary, &raw);
                    }
                    self.net_raw.push(NetRecords {
                        raw: raw.clone(),
                        later: Vec::new(),
                    });
                } else if let Some(rows) = self.net_raw.get_mut(i)
                    && rows.later.len() < NET_LATER_CAP
                {
                    rows.later.push(raw.clone());
                }
            }
            (Record::Violation(v), _) => {
                if !self.final_alerts {
                    self.supersede_live_alerts();
                }
                let kind = AlertKind::Violation(
                    v.violation
                        .unwrap_or_else(|| crate::tui::model::guess_kind(&v.summary)),
                );
                if kind == AlertKind::OUTSIDE && self.outside_reason.is_none() {
                    self.outside_reason = Some(v.summary.clone());
                }
                self.alerts.push(Alert {
                    at_ns: at,
                    kind,
                    pid,
                    summary: v.summary.clone(),
                    violation: true,
                    raw: Some(raw.clone()),
                });
            }
            (Record::End(e), _) => {
                if let Some(s) = &mut self.start
                    && s.agent_netns.is_none()
                {
                    s.agent_netns = e.agent.as_ref().and_then(|a| a.netns);
                }
                for a in std::mem::take(&mut self.gaps_after) {
                    self.alerts.push(a);
                }
                self.end_at = at;
                self.end_verdict_outside = e.verdict == Verdict::Outside;
                self.end_events = Some(e.events);
                self.end_lost = e.lost;
                if self.ended.is_none() {
                    let by = if e.ended_by.is_empty() {
                        "the capture ended"
                    } else {
                        &e.ended_by
                    };
                    self.ended = Some(by.to_string());
                }
            }
            _ => {}
        }
        self.log.push(LogRow {
            seq: logged.seq,
            at_ns: at,
            kind: record.kind().to_string(),
            summary: summarize(record),
            raw,
        });
    }

    /// A line that is not a record this version knows: a row in the Log view, its own fields.
    fn ingest_other(&mut self, v: Value) {
        let at = at_ns(&v);
        if let Some(at) = at {
            let first = *self.first_at.get_or_insert(at);
            self.last_at = Some(self.last_at.map_or(at, |l| l.max(at)));
            self.count_in_histogram((at - first).max(0));
        }
        self.records += 1;
        let mut own = match &v {
            Value::Object(m) => m.clone(),
            other => {
                let mut m = serde_json::Map::new();
                m.insert("line".into(), other.clone());
                m
            }
        };
        for k in ["seq", "prev", "hash", "at", "kind"] {
            own.remove(k);
        }
        self.log.push(LogRow {
            seq: u64_field(&v, "seq"),
            at_ns: at,
            kind: str_field(&v, "kind").unwrap_or("").to_string(),
            summary: Value::Object(own).to_string().chars().take(300).collect(),
            raw: Arc::from(v.to_string()),
        });
    }

    /// A credential or persistence file touched (or tried: `failed`): an alert at once.
    fn file_alert(
        &mut self,
        at: Option<i64>,
        f: &crate::state::files::FileEntry,
        failed: Option<&str>,
        entry: usize,
        raw: &Arc<str>,
    ) {
        use crate::record::ViolationKind;
        if let Some(why) = &f.escalation {
            let summary = match failed {
                Some(error) => format!(
                    "pid {} tried to {} {} (failed: {error}; {why})",
                    f.pid,
                    f.op.attempt(),
                    f.path
                ),
                None => format!("pid {} {} {} ({why})", f.pid, f.op.past(), f.path),
            };
            self.alerts.push(Alert {
                at_ns: at,
                kind: AlertKind::Violation(ViolationKind::Escalation),
                pid: Some(f.pid),
                summary,
                violation: false,
                raw: Some(raw.clone()),
            });
        }
        if !(f.credential || f.persistence) {
            return;
        }
        if f.credential && crate::judge::classify::is_environ(&f.path) {
            return self.environ_alert(at, f, failed.is_some(), entry, raw);
        }
        let (kind, what) = if f.credential {
            (ViolationKind::Credential, "credential ")
        } else {
            (ViolationKind::Persistence, "persistence file ")
        };
        let path = match &f.new_path {
            Some(np) => format!("{} → {np}", f.path),
            None => f.path.clone(),
        };
        let summary = match failed {
            Some(error) => format!(
                "pid {} tried to {} {what}{path} (failed: {error})",
                f.pid,
                f.op.attempt()
            ),
            None => format!("pid {} {} {what}{path}", f.pid, f.op.past()),
        };
        self.alerts.push(Alert {
            at_ns: at,
            kind: AlertKind::Violation(kind),
            pid: Some(f.pid),
            summary,
            violation: false,
            raw: Some(raw.clone()),
        });
    }

    /// Reads of `/proc/*/environ`: one alert per reading process, its counts kept up to date
    /// (as the report groups them: README, "Findings").
    fn environ_alert(
        &mut self,
        at: Option<i64>,
        f: &crate::state::files::FileEntry,
        failed: bool,
        entry: usize,
        raw: &Arc<str>,
    ) {
        if self.final_alerts {
            return;
        }
        let pid = f.pid;
        let known = self
            .environ_alerts
            .get(&pid)
            .is_some_and(|a| self.alerts.get(a.id).is_some());
        if !known {
            let id = self.alerts.end();
            self.alerts.push(Alert {
                at_ns: at,
                kind: AlertKind::Violation(crate::record::ViolationKind::Credential),
                pid: Some(pid),
                summary: String::new(),
                violation: false,
                raw: Some(raw.clone()),
            });
            self.environ_alerts.insert(
                pid,
                EnvironAlert {
                    id,
                    ..Default::default()
                },
            );
        }
        let a = self.environ_alerts.get_mut(&pid).expect("inserted above");
        if a.entries.insert(entry) {
            if failed {
                a.failed += 1;
            } else {
                a.read += 1;
            }
        }
        let failed = match a.failed {
            0 => String::new(),
            n => format!(", {n} failed"),
        };
        let summary = format!(
            "pid {pid} read the environment of {} processes{failed} (/proc/*/environ)",
            a.read
        );
        if let Some(alert) = self.alerts.get_mut(a.id) {
            alert.summary = summary;
        }
    }

    /// The final list of violations covers everything the live alerts said (outside,
    /// credential, persistence, lost), with more detail: keep only the gaps, which are not
    /// violations, so each finding shows once.
    fn supersede_live_alerts(&mut self) {
        self.final_alerts = true;
        let live = self.alerts.take_all();
        self.alerts_replaced = self.alerts.end();
        self.gaps_after = live
            .into_iter()
            .filter(|a| a.kind == AlertKind::Gap)
            .collect();
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
