//! `replay LOG`: the report and summary rebuilt from an evidence log alone, after checking its
//! hash chain. A log that fails the check is said so loudly, and the status is 1.
use std::collections::HashMap;
use std::io::BufRead as _;
use std::path::Path;

use serde_json::Value;

use crate::judge::netpolicy::{self, Policy};
use crate::output::report::{
    self, Agent, Exit, LogInfo, Parts, ProbeInfo, ProcessEntry, Report, Target,
};
use crate::output::verify::{self, Verdict as Chain};
use crate::state::files::FileEntry;
use crate::state::network::NetEntry;
use crate::state::processes::Verdict;

/// The log format this version writes and reads (in the `start` record).
pub const LOG_SCHEMA: &str = "sandbox-watch/log/1";

/// The report a log describes, and what its hash chain check said.
pub struct Replayed {
    pub report: Report,
    pub chain: Chain,
}

/// The complete records of a log, in order, read as they are needed: the whole log is never
/// held in memory. Stops at the first torn or unparsable line (`verify` says which).
pub fn records(path: &Path) -> std::io::Result<impl Iterator<Item = Value> + use<>> {
    let file = std::fs::File::open(path)?;
    Ok(std::io::BufReader::new(file)
        .lines()
        .map_while(Result::ok)
        .map_while(|line| match serde_json::from_str::<Value>(&line) {
            Ok(v @ Value::Object(_)) => Some(v),
            _ => None,
        }))
}

pub fn load(path: &Path) -> crate::error::Result<Replayed> {
    let chain = verify::verify(path).map_err(|e| {
        crate::error::Usage(format!(
            "{}: cannot read: {e}; give the path of a log written by --log",
            path.display()
        ))
    })?;
    if let Chain::NotALog { reason } = &chain {
        return Err(crate::error::Usage(format!(
            "{}: not a sandbox-watch log: {reason}",
            path.display()
        ))
        .into());
    }
    let mut records = records(path)?.peekable();
    let Some(first) = records.peek() else {
        return Err(crate::error::Usage(format!(
            "{}: no complete record to replay",
            path.display()
        ))
        .into());
    };
    if let Some(schema) = first["schema"].as_str()
        && schema != LOG_SCHEMA
    {
        return Err(crate::error::Usage(format!(
            "{}: written in format {schema}, and this sandbox-watch reads {LOG_SCHEMA}; replay it with the version that wrote it (its hash chain can still be checked with `verify`)",
            path.display()
        ))
        .into());
    }
    let (mut count, mut head) = (0u64, String::new());
    let mut report = rebuild(records.inspect(|r| {
        count += 1;
        head = r["hash"].as_str().unwrap_or_default().to_string();
    }));
    report.log = Some(LogInfo {
        path: path.display().to_string(),
        records: count,
        head,
        chain: Some(
            match chain {
                Chain::Intact { .. } => "intact",
                Chain::Unended { .. } => "unended",
                Chain::Tampered { .. } | Chain::NotALog { .. } => "tampered",
            }
            .to_string(),
        ),
        chain_message: Some(chain.message(&path.display().to_string())),
    });
    Ok(Replayed { report, chain })
}

fn at_ns(v: &Value) -> Option<i128> {
    v.as_str().and_then(crate::time::parse_ns)
}

fn from<T: serde::de::DeserializeOwned>(v: &Value) -> Option<T> {
    serde_json::from_value(v.clone()).ok()
}

/// Rebuilds the report from records in log order (see README, "The record").
pub fn rebuild<R: std::borrow::Borrow<Value>>(records: impl IntoIterator<Item = R>) -> Report {
    let mut target = Target {
        mode: "run".into(),
        command: Vec::new(),
        pid: None,
        container: None,
    };
    let mut probe = ProbeInfo::new("unknown".into(), Vec::new());
    let mut agent = Agent {
        pid: None,
        netns: None,
    };
    let mut rules = Vec::new();
    let mut processes: Vec<ProcessEntry> = Vec::new();
    let mut live: HashMap<u64, usize> = HashMap::new();
    let mut files = crate::state::files::Files::default();
    let mut network: Vec<NetEntry> = Vec::new();
    let mut same_net: HashMap<String, usize> = HashMap::new();
    let (mut events, mut redactions, mut exit) = (0u64, 0u64, Exit::default());
    let mut lost_by_kind = Default::default();
    let mut ended_at: Option<String> = None;
    let mut started_at = String::new();
    let mut first_agent_exec = None;
    let mut last_at = String::new();
    // Read at the end of a capture: file hashes by path, listeners still listening.
    let mut hashes: HashMap<String, (Option<String>, Option<String>)> = HashMap::new();
    let mut listening: Vec<(u64, Option<u64>, bool)> = Vec::new();

    for r in records {
        let r = r.borrow();
        let at = r["at"].as_str().unwrap_or_default().to_string();
        last_at.clone_from(&at);
        let pid = r["pid"].as_u64().unwrap_or(0);
        match r["kind"].as_str().unwrap_or_default() {
            "start" => {
                started_at = at.clone();
                target = from(&r["target"]).unwrap_or(target);
                probe = from(&r["probe"]).unwrap_or(probe);
                agent.netns = r["agent"]["netns"].as_u64();
                for rule in r["allow_net"].as_array().into_iter().flatten() {
                    if let Some(rule) = rule.as_str().and_then(|s| netpolicy::parse_rule(s).ok()) {
                        rules.push(rule);
                    }
                }
            }
            kind @ ("process" | "exec") => {
                let mut e: ProcessEntry = match from(&complete_process(r, &at)) {
                    Some(e) => e,
                    None => continue,
                };
                e.preexisting = kind == "process";
                if kind == "exec" && !e.launcher && first_agent_exec.is_none() {
                    first_agent_exec = Some((e.pid, e.netns));
                }
                if let Some(&i) = live.get(&pid) {
                    let old = &mut processes[i];
                    if old.fork_only && !old.preexisting {
                        e.started_at = old.started_at.clone();
                        *old = e;
                        continue;
                    }
                    old.ended_at = Some(at.clone());
                    old.running_at_end = false;
                }
                processes.push(e);
                live.insert(pid, processes.len() - 1);
            }
            "fork" => {
                let parent = r["ppid"]
                    .as_u64()
                    .and_then(|p| live.get(&p))
                    .map(|&i| processes[i].clone());
                let mut e = match parent {
                    Some(p) => p,
                    None => match from::<ProcessEntry>(&complete_process(r, &at)) {
                        Some(e) => e,
                        None => continue,
                    },
                };
                e.pid = pid as u32;
                e.ppid = r["ppid"].as_u64().unwrap_or(0) as u32;
                e.fork_only = true;
                e.preexisting = false;
                e.started_at = at.clone();
                (e.ended_at, e.exit_code, e.signal, e.running_at_end) = (None, None, None, true);
                processes.push(e);
                live.insert(pid, processes.len() - 1);
            }
            "exit" => {
                if let Some(i) = live.remove(&pid) {
                    let e = &mut processes[i];
                    e.ended_at = Some(at.clone());
                    e.exit_code = r["exit_code"].as_i64().map(|c| c as i32);
                    e.signal = r["signal"].as_i64().map(|c| c as i32);
                    e.running_at_end = false;
                }
            }
            "file" => {
                if let Some(f) = from::<FileEntry>(r) {
                    files.add_logged(f);
                }
            }
            "file_failed" => {
                // Failed opens are entries (failed deletes and renames are only logged).
                if let Some(f) = from::<FileEntry>(r).filter(|f| f.result.is_some()) {
                    files.add_failed(f);
                }
            }
            "file_count" => {
                // Counts are of reads unless the record says otherwise (older logs do not).
                let op: crate::state::files::Op =
                    from(&r["op"]).unwrap_or(crate::state::files::Op::Read);
                if let Some(f) = files.entries.iter_mut().rev().find(|f| {
                    f.pid as u64 == pid
                        && f.op == op
                        && f.path == r["path"].as_str().unwrap_or_default()
                        && f.ino == r["ino"].as_u64()
                }) {
                    f.count = r["count"].as_u64().unwrap_or(f.count);
                }
            }
            "net" => {
                let Some(n) = from::<NetEntry>(r) else {
                    continue;
                };
                let key = crate::state::network::same_key(&n);
                let aggregates = n.op != "listen" && n.result != "in_progress";
                match same_net.get(&key) {
                    Some(&i) if aggregates => {
                        network[i].count += 1;
                        network[i].last_at = at.clone();
                    }
                    _ => {
                        if aggregates {
                            same_net.insert(key, network.len());
                        }
                        network.push(n);
                    }
                }
            }
            "net_result" => {
                if let Some(n) = network.iter_mut().rev().find(|n| {
                    n.pid as u64 == pid
                        && n.result == "in_progress"
                        && n.port.map(u64::from) == r["port"].as_u64()
                }) {
                    n.result = r["result"].as_str().unwrap_or("in_progress").to_string();
                    n.last_at = at.clone();
                }
            }
            "file_hash" => {
                let text = |k: &str| r[k].as_str().map(str::to_string);
                if let Some(path) = text("path") {
                    hashes.insert(path, (text("sha256"), text("sha256_skipped")));
                }
            }
            "listening" => {
                let still = r["listening_at_end"].as_bool().unwrap_or(false);
                listening.push((pid, r["port"].as_u64(), still));
            }
            "end" => {
                ended_at = Some(at.clone());
                events = r["events"].as_u64().unwrap_or(0);
                redactions = r["redactions"].as_u64().unwrap_or(0);
                exit = from(&r["exit"]).unwrap_or_default();
                lost_by_kind = from(&r["lost_by_kind"]).unwrap_or_default();
                if let Some(a) = from::<Agent>(&r["agent"]) {
                    agent = a;
                }
            }
            _ => {}
        }
    }
    if agent.netns.is_none()
        && let Some((pid, netns)) = first_agent_exec
    {
        agent = Agent {
            pid: Some(pid),
            netns,
        };
    }
    let ended_at = ended_at.unwrap_or(last_at);
    let end_ns = at_ns(&Value::String(ended_at.clone()));
    for e in &mut processes {
        e.verdict = if e.launcher {
            Verdict::Inside
        } else {
            Verdict::of(e.netns, agent.netns)
        };
        e.running_at_end = e.ended_at.is_none();
        let (start, end) = (
            at_ns(&Value::String(e.started_at.clone())),
            e.ended_at
                .as_ref()
                .map_or(end_ns, |t| at_ns(&Value::String(t.clone()))),
        );
        e.duration_ms = match (start, end) {
            (Some(s), Some(t)) if t > s => ((t - s) / 1_000_000) as u64,
            _ => 0,
        };
    }
    for n in &mut network {
        n.verdict = Verdict::of(n.netns, agent.netns);
        if let Some(&(_, _, still)) = listening.iter().find(|(p, port, _)| {
            n.op == "listen" && *p == n.pid as u64 && *port == n.port.map(u64::from)
        }) {
            n.listening_at_end = Some(still);
        }
    }
    let mut files = files.entries;
    for f in &mut files {
        if f.result.is_some() {
            continue;
        }
        let path = match f.op {
            crate::state::files::Op::Write | crate::state::files::Op::Create => &f.path,
            crate::state::files::Op::Rename => match &f.new_path {
                Some(p) => p,
                None => continue,
            },
            _ => continue,
        };
        if let Some((sum, skipped)) = hashes.get(path) {
            (f.sha256, f.sha256_skipped) = (sum.clone(), skipped.clone());
        }
    }
    report::assemble(
        Parts {
            target,
            agent,
            started_at,
            ended_at,
            exit,
            probe,
            events,
            lost_by_kind,
            undecodable: 0,
            processes,
            files,
            network,
            redactions,
        },
        &Policy::new(rules),
    )
}

/// An exec or process record with the fields a report entry has but the record does not.
fn complete_process(r: &Value, at: &str) -> Value {
    let mut v = r.clone();
    if let Value::Object(m) = &mut v {
        for (k, default) in [
            ("started_at", Value::String(at.to_string())),
            ("ended_at", Value::Null),
            ("exit_code", Value::Null),
            ("signal", Value::Null),
            ("running_at_end", Value::Bool(true)),
            ("fork_only", Value::Bool(false)),
            ("preexisting", Value::Bool(false)),
            ("duration_ms", Value::from(0)),
            ("argv", Value::Array(Vec::new())),
            ("verdict", Value::String("inside".into())),
            ("ppid", Value::from(0)),
        ] {
            m.entry(k).or_insert(default);
        }
    }
    v
}
