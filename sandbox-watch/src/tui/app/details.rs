//! The details pane: the selected row's record (and the records it gathered), pretty.
use super::*;

impl App {
    pub(super) fn details_for_selection(&self) -> Option<Details> {
        let view = self.view;
        let vis = self.visible(view);
        let key = vis.key_at(self.selected_pos(view)?)?;
        let first = self.first_at;
        match view {
            View::Processes => {
                let (i, _) = *self.procs.order.get(key as usize)?;
                self.process_details(i as usize)
            }
            View::Files => self.file_details(key as usize),
            View::Network => self.net_details(key as usize),
            View::ToolCalls => match self.steps.order.get(key as usize)?.0 {
                StepRow::Step(k) => Some(self.step_details(k)),
                StepRow::Process(i) => self.process_details(i),
                StepRow::File(i) => self.file_details(i),
                StepRow::Net(i) => self.net_details(i),
            },
            View::Alerts => {
                let a = self.alerts.get(key)?;
                let mut lines = vec![format!("{}: {}", a.kind.name(), a.summary)];
                lines.push(if a.violation {
                    "source: violation record (the capture's final list)".into()
                } else {
                    "source: derived live from the record below".into()
                });
                lines.extend(self.process_line(a.pid));
                if let Some(raw) = &a.raw {
                    record_lines(raw, first, &mut lines);
                }
                Some(Details {
                    title: format!("alert: {}", a.kind.name()),
                    lines,
                    scroll: 0,
                })
            }
            View::Log => {
                let r = self.log.get(key)?;
                let mut lines = vec![];
                record_lines(&r.raw, first, &mut lines);
                Some(Details {
                    title: format!(
                        "record {}",
                        r.seq
                            .map(|s| s.to_string())
                            .unwrap_or_else(|| r.kind.clone())
                    ),
                    lines,
                    scroll: 0,
                })
            }
        }
    }

    /// "status: exited 0 · ran 1.2 s": how `p` ended, and how long since `began`.
    fn status_line(
        &self,
        p: &crate::state::processes::Process,
        began: std::time::SystemTime,
    ) -> String {
        let status = match (p.exit_code, p.signal) {
            (_, Some(s)) => format!("killed by {}", signal_name(s.into())),
            (Some(c), None) => format!("exited {c}"),
            (None, None) if self.ended.is_some() => "still running when the capture ended".into(),
            (None, None) => "running".into(),
        };
        let ran = match p.ended {
            Some(e) => format!(" · ran {}", duration_text(ns(e) - ns(began))),
            None => String::new(),
        };
        format!("status: {status}{ran}")
    }

    fn process_details(&self, i: usize) -> Option<Details> {
        let first = self.first_at;
        let node = self.procs.nodes.get(i)?;
        let p = self.session.processes.list.get(i)?;
        let mut lines = vec![];
        lines.push(format!(
            "pid {} · parent {} · {} child{}",
            p.pid,
            p.ppid,
            node.children.len(),
            if node.children.len() == 1 { "" } else { "ren" }
        ));
        lines.push(self.status_line(p, p.began));
        let mut flags = vec![];
        flags.push(self.session.processes.verdict(p).as_str().to_string());
        if p.fork_only {
            flags.push("fork only (argv is the parent's)".into());
        }
        if p.preexisting {
            flags.push("preexisting".into());
        }
        if p.launcher {
            flags.push("launcher".into());
        }
        if !flags.is_empty() {
            lines.push(format!("verdict: {}", flags.join(" · ")));
        }
        lines.push(format!("argv: {}", proc_argv(p)));
        lines.extend(self.step_line(
            &crate::state::tool_calls::ToolCallRef::of(p.step),
            p.after_step,
        ));
        for t in &p.tried {
            lines.push(format!(
                "tried to run: {} ({}, {}) argv: {}{}",
                t.path,
                t.result,
                t.syscall,
                crate::tui::model::join_argv(&t.argv),
                if t.from_caller_memory {
                    " · name and argv read from the caller's memory"
                } else {
                    ""
                }
            ));
        }
        for raw in &node.records {
            lines.push(String::new());
            record_lines(raw, first, &mut lines);
        }
        if node.records_dropped > 0 {
            lines.push(format!(
                "({} more records in the Log view)",
                node.records_dropped
            ));
        }
        Some(Details {
            title: format!("process {}", p.pid),
            lines,
            scroll: 0,
        })
    }

    fn file_details(&self, i: usize) -> Option<Details> {
        let r = self.session.files.entries.get(i)?;
        let mut lines = self.process_line(Some(r.pid));
        lines.extend(self.step_line(&r.tool_call, r.after_step));
        record_lines(self.file_raw.get(i)?, self.first_at, &mut lines);
        Some(Details {
            title: format!("file {}", r.path),
            lines,
            scroll: 0,
        })
    }

    fn net_details(&self, i: usize) -> Option<Details> {
        let first = self.first_at;
        let r = self.session.network.entries.get(i)?;
        let rows = self.net_raw.get(i)?;
        let mut lines = self.process_line(Some(r.pid));
        lines.extend(self.step_line(&r.tool_call, r.after_step));
        record_lines(&rows.raw, first, &mut lines);
        for later in &rows.later {
            lines.push(String::new());
            record_lines(later, first, &mut lines);
        }
        Some(Details {
            title: format!(
                "network {} {}",
                r.op.as_str(),
                crate::tui::model::net_dest(r)
            ),
            lines,
            scroll: 0,
        })
    }

    /// Which step an entry is under, and whether it came after the step ended.
    fn step_line(&self, t: &crate::state::tool_calls::ToolCallRef, after: bool) -> Vec<String> {
        use crate::state::tool_calls::ToolCallRef;
        let after = if after {
            " · after the step ended"
        } else {
            ""
        };
        match t {
            ToolCallRef::Unset => vec![],
            ToolCallRef::Agent => vec![format!("tool call: none (the agent itself){after}")],
            ToolCallRef::Step(id) => vec![format!("tool call: step {id}{after}")],
        }
    }

    /// A step: what it ran, how it ended, what it did (and after it ended). None: the agent's
    /// own group.
    fn step_details(&self, k: Option<usize>) -> Details {
        let Some(t) = k.and_then(|k| self.session.tool_calls.list.get(k)) else {
            return Details {
                title: "the agent itself".into(),
                lines: vec![
                    "What the agent process did itself (its own edits, its own connections), and"
                        .into(),
                    "what no step started (the launchers before it). Enter on a row shows it."
                        .into(),
                ],
                scroll: 0,
            };
        };
        let k = k.unwrap_or_default();
        let list = &self.session.processes.list;
        let own = &list[t.entries[0]];
        let last = &list[*t.entries.last().unwrap_or(&t.entries[0])];
        let id = crate::state::tool_calls::id(k);
        let mut lines = vec![format!(
            "step {id} · pid {} · {} program{} of its own",
            own.pid,
            t.entries.len(),
            if t.entries.len() == 1 { "" } else { "s" }
        )];
        lines.push(format!(
            "command: {}",
            step_command(&self.session, k).unwrap_or_else(|| "(a fork of the agent)".into())
        ));
        lines.push(format!("argv: {}", proc_argv(last)));
        lines.push(self.status_line(last, own.began));
        let g = k + 1;
        let (mut procs, mut files, mut net) = (0, 0, 0);
        for &(row, group) in &self.steps.order {
            if group as usize == g {
                match row {
                    StepRow::Process(_) => procs += 1,
                    StepRow::File(_) => files += 1,
                    StepRow::Net(_) => net += 1,
                    StepRow::Step(_) => {}
                }
            }
        }
        lines.push(format!(
            "under it: {procs} other program runs, {files} file entries, {net} network entries"
        ));
        if t.after_step > 0 {
            lines.push(format!(
                "after it ended: {} effects of its processes (outlived)",
                t.after_step
            ));
            if let Some(a) = &t.first_after {
                lines.push(format!("first: pid {} {} at {}", a.pid, a.what, a.at));
            }
        }
        Details {
            title: format!("step {id}"),
            lines,
            scroll: 0,
        }
    }

    fn process_line(&self, pid: Option<u32>) -> Vec<String> {
        let Some(pid) = pid else { return vec![] };
        let newest = self
            .session
            .processes
            .list
            .iter()
            .rev()
            .find(|p| p.pid == pid);
        match newest {
            Some(p) => vec![
                format!("process: pid {pid} {}", proc_argv(p)),
                String::new(),
            ],
            None => vec![format!("process: pid {pid}"), String::new()],
        }
    }
}

/// A record, pretty: a heading line, then `key  value` lines (nested objects as `a.b`).
fn record_lines(raw: &str, first: Option<i64>, out: &mut Vec<String>) {
    let v: Value = match serde_json::from_str(raw) {
        Ok(v) => v,
        Err(_) => {
            out.push(raw.to_string());
            return;
        }
    };
    let kind = str_field(&v, "kind").unwrap_or("record");
    let seq = u64_field(&v, "seq")
        .map(|s| format!(" · seq {s}"))
        .unwrap_or_default();
    let when = offset_text(at_ns(&v), first);
    let when = if when.is_empty() {
        when
    } else {
        format!(" · {when}")
    };
    out.push(format!("── {kind}{seq}{when} ──"));
    let mut fields = vec![];
    flatten_fields(&v, "", &mut fields);
    let width = fields
        .iter()
        .map(|(k, _)| k.len())
        .max()
        .unwrap_or(0)
        .min(24);
    for (k, val) in fields {
        if k == "kind" {
            continue;
        }
        out.push(format!("{k:<width$}  {val}"));
    }
    // What a person cannot read at a glance.
    if let Some(sig) = i64_field(&v, "signal") {
        out.push(format!("{:<width$}  {}", "(signal)", signal_name(sig)));
    }
}

fn flatten_fields(v: &Value, prefix: &str, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(m) => {
            for (k, val) in m {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                match val {
                    Value::Object(inner) if !inner.is_empty() => flatten_fields(val, &key, out),
                    _ => out.push((key, value_text(val))),
                }
            }
        }
        other => out.push((prefix.to_string(), value_text(other))),
    }
}

fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "—".into(),
        other => other.to_string(),
    }
}
