//! Logs written before the typed record (by the release binary of commit 72a44f5, the last
//! before it; `tests/fixtures/make.sh` made them from real sessions on the kernel) still
//! verify, and replaying them gives the report their own capture wrote.
//!
//! The sessions: a `run` of an agent script (programs, exit codes and a signal, a fork that
//! never ran a program, a credential read, a refused read of one, persistence writes, a rename
//! into ~/.ssh, symbolic and hard links, failed opens and deletes, repeated reads counted in the
//! kernel, a listener, connects that worked, were refused and did not block, DNS questions, a
//! process in another network namespace, one left running, `--allow-net` CIDR rules); an
//! `attach` to a tree that was there before; and an `attach` whose monitor was killed (no end
//! record).
use std::path::{Path, PathBuf};

use sandbox_watch::output::verify::{self, Verdict};
use sandbox_watch::replay;
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn json(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture(name)).unwrap()).unwrap()
}

/// A report without what differs by construction: where the log is and what its check said
/// (a capture wrote its log, a replay checked it), and how long the processes still running
/// at the end ran (that binary's capture measured them to its clock when it finished, its
/// replay and this version to the end record's time). The fields this version adds are
/// compared in `old_logs_get_tool_calls`.
fn comparable(mut r: Value) -> Value {
    // Sections added since those binaries: nothing in them when empty.
    for k in ["packages", "git", "mounts"] {
        if r[k] == serde_json::json!([]) || r[k] == serde_json::json!({"commits": [], "pushes": []})
        {
            r.as_object_mut().unwrap().remove(k);
        }
    }
    if let Some(log) = r["log"].as_object_mut() {
        for k in ["path", "chain", "chain_message"] {
            log.remove(k);
        }
    }
    for p in r["processes"].as_array_mut().unwrap() {
        if p["running_at_end"] == true {
            p.as_object_mut().unwrap().remove("duration_ms");
        }
    }
    // What this version adds, which that binary did not write: the tool calls, and each
    // entry's attribution to one.
    r.as_object_mut().unwrap().remove("tool_calls");
    for list in ["processes", "files", "network", "violations"] {
        for e in r[list].as_array_mut().unwrap() {
            let e = e.as_object_mut().unwrap();
            e.remove("tool_call");
            e.remove("after_step");
        }
    }
    r
}

fn first_difference(a: &Value, b: &Value, at: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            x.keys()
                .chain(y.keys())
                .find_map(|k| match (x.get(k), y.get(k)) {
                    (Some(u), Some(v)) => first_difference(u, v, &format!("{at}/{k}")),
                    (u, v) => Some(format!("{at}/{k}: {u:?} vs {v:?}")),
                })
        }
        (Value::Array(x), Value::Array(y)) if x.len() != y.len() => {
            Some(format!("{at}: {} vs {} items", x.len(), y.len()))
        }
        (Value::Array(x), Value::Array(y)) => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (u, v))| first_difference(u, v, &format!("{at}/{i}"))),
        (u, v) if u != v => Some(format!("{at}: {u} vs {v}")),
        _ => None,
    }
}

#[test]
fn old_logs_still_verify() {
    for name in ["run.jsonl", "attach.jsonl"] {
        let v = verify::verify(&fixture(name)).unwrap();
        assert!(matches!(v, Verdict::Intact { .. }), "{name}: {v:?}");
    }
    let v = verify::verify(&fixture("unended.jsonl")).unwrap();
    assert!(
        matches!(v, Verdict::Unended { torn: false, .. }),
        "unended.jsonl: {v:?}"
    );
}

/// What this version reports differently on purpose, applied to the old live report: a
/// process's parent is the one its `fork` record names (that binary took the parent at exec,
/// which is init for a program started after its shell exited). Pids whose fork the log has
/// more than once (reused) are left alone.
fn as_this_version_reports(mut want: Value, log: &Path) -> Value {
    let mut forks: std::collections::HashMap<u64, Vec<u64>> = Default::default();
    for line in std::fs::read_to_string(log).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        if v["kind"] == "fork" {
            let (pid, ppid) = (v["pid"].as_u64().unwrap(), v["ppid"].as_u64().unwrap());
            forks.entry(pid).or_default().push(ppid);
        }
    }
    for p in want["processes"].as_array_mut().unwrap() {
        if let Some([ppid]) = p["pid"]
            .as_u64()
            .and_then(|pid| forks.get(&pid))
            .map(Vec::as_slice)
        {
            p["ppid"] = (*ppid).into();
        }
    }
    want
}

#[test]
fn old_logs_replay_to_the_report_their_capture_wrote() {
    for name in ["run", "attach"] {
        let log = fixture(&format!("{name}.jsonl"));
        let replayed = replay::load(&log).unwrap();
        let got = comparable(serde_json::to_value(&replayed.report).unwrap());
        let want = comparable(as_this_version_reports(
            json(&format!("{name}.live.json")),
            &log,
        ));
        if let Some(d) = first_difference(&got, &want, "") {
            panic!("{name}: the replay differs from the live report at {d}");
        }
        // Not a trivial pass: the sessions have what the comparison is about.
        let r = &replayed.report;
        assert!(r.processes.len() > 20 && !r.violations.is_empty(), "{name}");
    }
}

#[test]
fn an_old_unended_log_replays_as_it_did() {
    let replayed = replay::load(&fixture("unended.jsonl")).unwrap();
    assert!(matches!(replayed.chain, Verdict::Unended { .. }));
    let got = comparable(serde_json::to_value(&replayed.report).unwrap());
    let want = comparable(json("unended.replay.json"));
    if let Some(d) = first_difference(&got, &want, "") {
        panic!("unended: the replay differs from the old replay at {d}");
    }
}

#[test]
fn old_logs_get_tool_calls() {
    // The fixture agent (tests/fixtures/agent.sh) runs its commands as children of its own
    // shell: each is a step, and the entries of the old log are attributed to them on replay.
    let r = replay::load(&fixture("run.jsonl")).unwrap().report;
    let v = serde_json::to_value(&r).unwrap();
    let calls = v["tool_calls"].as_array().unwrap();
    let by_command = |c: &str| {
        calls
            .iter()
            .find(|t| t["command"] == c)
            .unwrap_or_else(|| panic!("no step `{c}`: {calls:#?}"))
    };
    let exit7 = by_command("exit 7");
    assert_eq!(exit7["exit_code"], 7);
    assert_eq!(exit7["argv"], serde_json::json!(["sh", "-c", "exit 7"]));
    // `(exit 3)`: a subshell, a fork of the agent that ran no program.
    let sub = calls
        .iter()
        .find(|t| t["fork_only"] == true)
        .expect("the subshell step");
    assert_eq!(
        (sub["exit_code"].clone(), sub["command"].clone()),
        (3.into(), Value::Null)
    );
    let cat = by_command("cat /tmp/swfx/home/.ssh/id_rsa");
    let id = cat["id"].as_str().unwrap();
    let cred = r
        .violations
        .iter()
        .find(|v| v.summary.contains("/tmp/swfx/home/.ssh/id_rsa") && v.summary.contains(" read "))
        .expect("the credential read");
    assert_eq!(cred.tool_call.id(), Some(id));
    assert_eq!(cat["violations"], 1);
    // The agent's own write (a redirection in its shell) is under no step.
    let main = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == "/tmp/swfx/project/main.py")
        .unwrap();
    assert_eq!(main["tool_call"], Value::Null);
    // The leftover is named with the step that started it.
    let setsid = by_command("setsid sleep 3");
    let leftover = r
        .violations
        .iter()
        .find(|v| v.kind == sandbox_watch::record::ViolationKind::Leftover)
        .unwrap();
    assert_eq!(leftover.tool_call.id(), setsid["id"].as_str());
    // The summary's first line names the step of the first finding.
    let first = r.summary().lines().next().unwrap().to_string();
    let v0 = &r.violations[0];
    let step0 = calls
        .iter()
        .find(|t| Some(t["id"].as_str().unwrap()) == v0.tool_call.id());
    if let Some(t) = step0 {
        assert!(
            first.contains(&format!("step {} `", t["id"].as_str().unwrap())),
            "{first}"
        );
    }
    // Every entry says which step it is under.
    for list in ["processes", "files", "network", "violations"] {
        for e in v[list].as_array().unwrap() {
            assert!(e.get("tool_call").is_some(), "{list}: {e}");
        }
    }
}
