//! The evidence: a hash-chained log that verifies offline, endings that lose nothing, the CI
//! gate, the summary, the OCSF export, replay, and no secret in any output.
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use integration_tests::*;
use serde_json::Value;

fn verify(log: &std::path::Path) -> (Option<i32>, String) {
    let out = sandbox_watch(&["verify", log.to_str().unwrap()]);
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code(), text)
}

fn lines(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

fn write_lines(path: &std::path::Path, lines: &[String]) {
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

#[test]
fn a_real_log_verifies_and_tampering_is_named() {
    let r = run(
        &[],
        &["sh", "-c", "for i in 1 2 3 4 5 6; do /bin/true $i; done"],
    );
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let (code, text) = verify(&r.log);
    assert_eq!(code, Some(0), "{text}");
    let mode = std::fs::metadata(&r.log).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let original = lines(&r.log);
    assert!(original.len() > 8);
    assert_eq!(r.report["log"]["records"], original.len());
    let last: Value = serde_json::from_str(original.last().unwrap()).unwrap();
    assert_eq!(last["kind"], "end");
    assert_eq!(r.report["log"]["head"], last["hash"]);

    let copy = r.dir.path().join("copy.jsonl");
    // One changed byte in record 5.
    let mut l = original.clone();
    let i = l[5].find("\"at\":\"").unwrap() + 6;
    let mut bytes = l[5].clone().into_bytes();
    bytes[i + 3] = if bytes[i + 3] == b'7' { b'8' } else { b'7' };
    l[5] = String::from_utf8(bytes).unwrap();
    write_lines(&copy, &l);
    let (code, text) = verify(&copy);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains('5'), "names record 5: {text}");
    // A deleted record.
    let mut l = original.clone();
    l.remove(3);
    write_lines(&copy, &l);
    let (code, text) = verify(&copy);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains('3'), "{text}");
    // Two records swapped.
    let mut l = original.clone();
    l.swap(2, 4);
    write_lines(&copy, &l);
    assert_eq!(verify(&copy).0, Some(1));
    // Cut before the end record: intact but unended.
    write_lines(&copy, &original[..original.len() - 1]);
    let (code, text) = verify(&copy);
    assert_eq!(code, Some(5), "{text}");
}

#[test]
fn a_symlink_or_an_existing_file_at_the_log_path_is_refused() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("elsewhere");
    std::fs::write(&target, "keep me").unwrap();
    let link = dir.path().join("log.jsonl");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let out = sandbox_watch(&["run", "--log", link.to_str().unwrap(), "--", "true"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("symbolic link"));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");
    let existing = dir.path().join("existing.jsonl");
    std::fs::write(&existing, "old").unwrap();
    let out = sandbox_watch(&["run", "--log", existing.to_str().unwrap(), "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--force"));
    let out = sandbox_watch(&[
        "run",
        "--force",
        "--log",
        existing.to_str().unwrap(),
        "--",
        "true",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(verify(&existing).0, Some(0));
}

/// Starts an attach capture of a sleeping process, then signals the monitor.
fn signalled_capture(signal: i32) -> (tempfile::TempDir, std::process::ExitStatus) {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let mut target = Command::new("sh")
        .args(["-c", "while true; do /bin/true; sleep 0.1; done"])
        .spawn()
        .unwrap();
    let log = dir.path().join("log.jsonl");
    let mut monitor = command()
        .args(["attach", "--headless", "--log"])
        .arg(&log)
        .arg("--report")
        .arg(dir.path().join("report.json"))
        .arg(target.id().to_string())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_attached(&log, &mut monitor);
    // And until the loop's `/bin/true` has been logged at least once.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&log).is_ok_and(|t| t.contains("\"/bin/true\"")) {
        assert!(std::time::Instant::now() < deadline, "no /bin/true logged");
        std::thread::sleep(Duration::from_millis(20));
    }
    unsafe { libc::kill(monitor.id() as i32, signal) };
    let status = monitor.wait().unwrap();
    target.kill().unwrap();
    target.wait().unwrap();
    (dir, status)
}

#[test]
fn sigterm_finishes_the_log_and_report() {
    let (dir, status) = signalled_capture(libc::SIGTERM);
    assert_eq!(status.code(), Some(0));
    let (code, text) = verify(&dir.path().join("log.jsonl"));
    assert_eq!(code, Some(0), "{text}");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("report.json")).unwrap())
            .unwrap();
    assert!(
        report["processes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["argv"][0] == "/bin/true")
    );
    let end: Value =
        serde_json::from_str(lines(&dir.path().join("log.jsonl")).last().unwrap()).unwrap();
    assert_eq!(end["ended_by"], "SIGTERM");
}

#[test]
fn sigkill_leaves_a_log_whose_complete_lines_verify() {
    let (dir, _) = signalled_capture(libc::SIGKILL);
    let log = dir.path().join("log.jsonl");
    let (code, text) = verify(&log);
    assert_eq!(code, Some(5), "{text}");
    assert!(lines(&log).len() > 1, "records were written as they came");
    // replay says the log stops early (status 5, as verify) but rebuilds what is there.
    let out = sandbox_watch(&[
        "replay",
        "--headless",
        "--report",
        dir.path().join("replayed.json").to_str().unwrap(),
        log.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert!(stderr.contains("no end record"), "{stderr}");
    let replayed: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("replayed.json")).unwrap())
            .unwrap();
    assert!(!replayed["processes"].as_array().unwrap().is_empty());
    assert_eq!(replayed["log"]["chain"], "unended");
    assert_eq!(replayed["log"]["records"], lines(&log).len());
}

#[test]
fn fail_on_credential_returns_3_and_otherwise_the_agents_status() {
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    let key = dir.path().join(".ssh/id_rsa");
    std::fs::create_dir_all(key.parent().unwrap()).unwrap();
    std::fs::write(&key, "secret").unwrap();
    let script = format!("cat {} > /dev/null; exit 4", key.display());
    let r = run(&["--fail-on", "credential"], &["sh", "-c", &script]);
    assert_eq!(r.code(), Some(3), "{}", r.stderr());
    let r = run(
        &["--fail-on", "outside,persistence"],
        &["sh", "-c", &script],
    );
    assert_eq!(
        r.code(),
        Some(4),
        "no listed kind found: the agent's own status"
    );
    let r = run(&["--fail-on", "credential"], &["sh", "-c", "exit 4"]);
    assert_eq!(r.code(), Some(4));
}

#[test]
fn the_summary_counts_commands_and_goes_to_the_step_summary() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let step = dir.path().join("step.md");
    std::fs::write(&step, "earlier step\n").unwrap();
    let out = command()
        .args([
            "run",
            "--headless",
            "--",
            "sh",
            "-c",
            "/bin/true; /bin/false; ls / > /dev/null",
        ])
        .env("GITHUB_STEP_SUMMARY", &step)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = std::fs::read_to_string(&step).unwrap();
    assert!(
        text.starts_with("earlier step\n"),
        "appended, not overwritten"
    );
    assert!(text.contains("**Commands**: 4 (1 failed: false)"), "{text}");
    assert!(text.contains("INSIDE"), "{text}");
}

#[test]
fn replay_rebuilds_the_report() {
    // Reads, a failing command, a written file (hashed at the end) and a listener left running.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let listener = format!(
        "import socket, time\ns = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\nopen('{d}/port', 'w').write(str(s.getsockname()[1]))\ntime.sleep(20)\n"
    );
    let script = format!(
        "for i in 1 2 3; do cat /etc/hostname > /dev/null; done; sh -c 'exit 3'; echo hello > {d}/out.txt; \
         setsid python3 -c \"$1\" > /dev/null 2>&1 < /dev/null & n=0; while [ ! -s {d}/port ] && [ $n -lt 1200 ]; do sleep 0.05; n=$((n+1)); done; true"
    );
    let r = run_in(dir, &[], &["sh", "-c", &script, "sh", &listener]);
    let listen: Vec<&Value> = r.network().iter().filter(|n| n["op"] == "listen").collect();
    assert_eq!(listen.len(), 1, "{:#?}", r.network());
    assert_eq!(listen[0]["listening_at_end"], true);
    unsafe { libc::kill(listen[0]["pid"].as_i64().unwrap() as i32, libc::SIGKILL) };
    let hashed = r.files_at(&format!("{d}/out.txt"));
    assert!(
        hashed.iter().any(|f| f["sha256"].is_string()),
        "{hashed:#?}"
    );
    let replayed = r.dir.path().join("replayed.json");
    let out = sandbox_watch(&[
        "replay",
        "--headless",
        "--report",
        replayed.to_str().unwrap(),
        r.log.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let again: Value = serde_json::from_str(&std::fs::read_to_string(&replayed).unwrap()).unwrap();
    for key in ["verdict", "agent", "exit", "probe", "target"] {
        assert_eq!(again[key], r.report[key], "{key}");
    }
    let strip = |v: &Value| -> Vec<(Value, Value, Value, Value)> {
        v["processes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["pid"].clone(),
                    p["argv"].clone(),
                    p["exit_code"].clone(),
                    p["fork_only"].clone(),
                )
            })
            .collect()
    };
    assert_eq!(strip(&again), strip(&r.report));
    let counts = |v: &Value| -> Vec<(Value, Value, Value)> {
        v["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| (f["path"].clone(), f["op"].clone(), f["count"].clone()))
            .collect()
    };
    assert_eq!(counts(&again), counts(&r.report));
    // What the end of the capture found travels in the log too.
    let hashes = |v: &Value| -> Vec<(Value, Value, Value)> {
        v["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                (
                    f["path"].clone(),
                    f["sha256"].clone(),
                    f["sha256_skipped"].clone(),
                )
            })
            .collect()
    };
    assert_eq!(hashes(&again), hashes(&r.report));
    assert_eq!(again["network"], r.report["network"]);

    // A tampered log is said so loudly.
    let mut l = lines(&r.log);
    // (Whitespace is not content: the canonical form ignores it. A changed value is.)
    let i = l
        .iter()
        .position(|line| line.contains("/etc/hostname"))
        .unwrap();
    l[i] = l[i].replace("/etc/hostname", "/etc/hostnamf");
    let bad = r.dir.path().join("bad.jsonl");
    write_lines(&bad, &l);
    let bad_report = r.dir.path().join("bad-report.json");
    let out = sandbox_watch(&[
        "replay",
        "--headless",
        "--report",
        bad_report.to_str().unwrap(),
        bad.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("## sandbox-watch: THIS LOG FAILED VERIFICATION"),
        "the summary's first line: {stderr}"
    );
    let bad_report: Value =
        serde_json::from_str(&std::fs::read_to_string(&bad_report).unwrap()).unwrap();
    assert_eq!(bad_report["log"]["chain"], "tampered");
    assert!(
        bad_report["log"]["chain_message"]
            .as_str()
            .unwrap()
            .contains(&format!("TAMPERED at record {i}")),
        "{:#}",
        bad_report["log"]
    );
    // The intact log's replay says so too.
    assert_eq!(again["log"]["chain"], "intact");
}

#[test]
fn planted_secrets_never_reach_an_output() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let secrets = [
        "hunter2-PLANTED-1",
        "ghp_PLANTEDplantedPLANTEDplanted123456",
        "tok-PLANTED-3",
        "envsecret-PLANTED-4",
        "AKIAPLANTED000000005",
    ];
    let script = format!(
        "/bin/echo --password={} > /dev/null; /bin/echo {} > /dev/null; /bin/echo -H 'Authorization: Bearer {}' > /dev/null; /bin/echo key {} > /dev/null; env > /dev/null",
        secrets[0], secrets[1], secrets[2], secrets[4]
    );
    let out = command()
        .args(["run", "--headless"])
        .args(outputs_args(dir.path()))
        .args(["--", "sh", "-c", &script])
        .env("API_TOKEN", secrets[3])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let outputs = all_outputs(dir.path(), &out);
    for s in secrets {
        for (i, text) in outputs.iter().enumerate() {
            assert!(!text.contains(s), "secret {s} found in output {i}");
        }
    }
    let r: Value = serde_json::from_str(&outputs[3]).unwrap();
    assert!(
        r["redactions"].as_u64().unwrap() >= 4,
        "{}",
        r["redactions"]
    );
    assert!(outputs[2].contains("[REDACTED]"));
}

/// A word as a POSIX shell reads it back: single-quoted.
fn quoted(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

#[test]
fn the_forms_that_leaked_in_issue_16_reach_no_output_and_the_rest_is_kept() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    // Programs the rules know (or do not know) by name: all /bin/true here, found in PATH.
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    for name in ["tool", "vendortool", "ftpsync", "mysql", "curl", "ssh"] {
        std::os::unix::fs::symlink("/bin/true", bin.join(name)).unwrap();
    }
    let cwd_file = dir.path().join("cwd");
    let secrets = [
        "PLANTEDapikey6x",
        "PLANTEDdict7x",
        "PLANTEDpw8x",
        "Pl4nted!P9x",
        "PLANTEDuserpass10",
        "q3Vn8Zr+Lk2pXw7Tb5Hy0Ms4Jd9Fc6Ga1Ue/NoRi",
        "PLANTEDbt11x",
        "sk-ant-api03-PLANTEDclaude12xxxxxxxxxxxxxxxxxxxxx",
    ];
    let [api, dict, pw, unknown_p, user_pass, aws, backtick, bearer] = secrets;
    // Each command as it runs (its argv), in the order of issue 16.
    let commands: Vec<Vec<String>> = [
        vec!["python3", "-c", &format!("import sys; args = ['tool', '--api-key={api}']")],
        vec!["python3", "-c", &format!("h = {{'Authorization': 'token {dict}', 'Accept': 'x'}}")],
        vec!["tool", "--pw", pw, "--verbose"],
        vec!["vendortool", "-H", "db", "-P", unknown_p, "sync"],
        vec!["ftpsync", "-u", &format!("admin:{user_pass}"), "sftp://h/"],
        vec!["/bin/echo", aws],
        // What Claude Code runs: the command quoted for eval inside bash -c -l.
        vec!["bash", "-c", "-l", &format!(
            "eval 'curl -s -H '\"'\"'Authorization: Bearer {bearer}'\"'\"' https://127.0.0.1:9/' < /dev/null && pwd -P >| {}",
            cwd_file.display()
        )],
        // Not secrets: kept as they are.
        vec!["ssh", "-o", "StrictHostKeyChecking=no", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", "h", "true"],
    ]
    .iter()
    .map(|c| c.iter().map(|w| w.to_string()).collect())
    .collect();
    let mut script: Vec<String> = commands
        .iter()
        .map(|c| c.iter().map(|w| quoted(w)).collect::<Vec<_>>().join(" ") + " > /dev/null")
        .collect();
    // A secret in backticks.
    script.push(format!("x=`mysql -uroot -p{backtick} -e 1`; echo \"$x\""));
    let script = script.join("\n");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let out = command()
        .args(["run", "--headless"])
        .args(outputs_args(dir.path()))
        .args(["--", "sh", "-c", &script])
        .env("PATH", &path)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let outputs = all_outputs(dir.path(), &out);
    for s in secrets {
        for (i, text) in outputs.iter().enumerate() {
            assert!(!text.contains(s), "secret {s} found in output {i}");
        }
    }
    // Exactly the secrets' bytes were replaced, everywhere else each argv is as it ran: the
    // script (with its quotes), and each program it ran.
    let redacted = |w: &str| {
        secrets
            .iter()
            .fold(w.to_string(), |w, s| w.replace(s, "[REDACTED]"))
    };
    let r: Value = serde_json::from_str(&outputs[3]).unwrap();
    let processes = r["processes"].as_array().unwrap();
    let argv_of = |argv0: &str| -> Vec<Value> {
        processes
            .iter()
            .filter(|p| p["fork_only"] != true && p["argv"][0] == argv0)
            .map(|p| p["argv"].clone())
            .collect()
    };
    let want_script = redacted(&script);
    assert_eq!(
        argv_of("sh"),
        [serde_json::json!(["sh", "-c", want_script])]
    );
    assert_eq!(
        r["target"]["command"],
        serde_json::json!(["sh", "-c", want_script])
    );
    let mut wanted: Vec<Vec<String>> = commands
        .iter()
        .map(|c| c.iter().map(|w| redacted(w)).collect())
        .collect();
    wanted.push(vec![
        "mysql".into(),
        "-uroot".into(),
        "-p[REDACTED]".into(),
        "-e".into(),
        "1".into(),
    ]);
    wanted.push(vec![
        "curl".into(),
        "-s".into(),
        "-H".into(),
        "Authorization: Bearer [REDACTED]".into(),
        "https://127.0.0.1:9/".into(),
    ]);
    // (Matched on the program's name and the rest of argv: python3 may be a wrapper, such as
    // pyenv's, that runs the real one by its path.)
    let name = |w: &str| w.rsplit('/').next().unwrap_or(w).to_string();
    for want in &wanted {
        let found = processes.iter().any(|p| {
            let argv: Vec<String> = p["argv"]
                .as_array()
                .unwrap()
                .iter()
                .map(|w| w.as_str().unwrap_or_default().to_string())
                .collect();
            p["fork_only"] != true
                && argv.first().map(|w| name(w)) == Some(name(&want[0]))
                && argv[1..] == want[1..]
        });
        assert!(found, "exec of {want:?}; the report has {processes:#?}");
    }
    // Nothing was taken for a secret that is not one.
    let ssh = &wanted[7];
    assert!(!ssh.iter().any(|w| w.contains("[REDACTED]")), "{ssh:?}");
    // One count a secret: each marker in the argv of a program run (fork-only entries carry
    // their parent's). Eight in the script, then each again in the program that got it (the
    // bearer token twice: in bash's script and in curl's header), more where a wrapper ran
    // the program (pyenv's python3).
    let markers: usize = processes
        .iter()
        .filter(|p| p["fork_only"] != true)
        .flat_map(|p| p["argv"].as_array().unwrap())
        .map(|w| w.as_str().unwrap_or_default().matches("[REDACTED]").count())
        .sum();
    assert!(markers >= 17, "{markers}");
    // The count is of what the log holds: the argv of every program run, and of every exec
    // that failed (a PATH search's misses are in the log, not in the report's `tried`).
    let logged: usize = outputs[2]
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| matches!(v["kind"].as_str(), Some("exec" | "process" | "exec_failed")))
        .flat_map(|v| v["argv"].as_array().cloned().unwrap_or_default())
        .map(|w| w.as_str().unwrap_or_default().matches("[REDACTED]").count())
        .sum();
    assert!(logged >= markers, "{logged} < {markers}");
    assert_eq!(r["redactions"], logged, "{:#}", r["redactions"]);
    // The log and the OCSF export hold the same redacted argv.
    assert!(
        outputs[2].contains("Authorization: Bearer [REDACTED]"),
        "log"
    );
    assert!(outputs[5].contains("--api-key=[REDACTED]"), "OCSF");
}

/// Every output of a capture, as text: log, report, summary, OCSF, and the monitor's stdout
/// and stderr.
fn all_outputs(dir: &std::path::Path, out: &std::process::Output) -> Vec<String> {
    let mut texts = vec![
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    ];
    for f in ["log.jsonl", "report.json", "summary.md", "ocsf.jsonl"] {
        let p = dir.join(f);
        texts.push(std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())));
    }
    texts
}

fn outputs_args(dir: &std::path::Path) -> Vec<String> {
    [
        "--log",
        "log.jsonl",
        "--report",
        "report.json",
        "--summary",
        "summary.md",
        "--ocsf",
        "ocsf.jsonl",
    ]
    .iter()
    .enumerate()
    .map(|(i, a)| {
        if i % 2 == 1 {
            dir.join(a).display().to_string()
        } else {
            a.to_string()
        }
    })
    .collect()
}

#[test]
fn secrets_in_the_argv_of_processes_there_before_an_attach_are_redacted() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let token = "ghp_PLANTEDbeforeATTACHplanted1234567890";
    // $0 and $1 of the script are the two secret-bearing arguments.
    // The target lives until the attach watches it (its stdin is closed then): a fixed sleep
    // could end before a loaded machine's attach read its argv.
    let mut target = Command::new("sh")
        .args(["-c", "read x", "--password=hunter2-BEFORE-attach", token])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut monitor = command()
        .args(["attach", "--headless"])
        .args(outputs_args(dir.path()))
        .arg(target.id().to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_attached(&dir.path().join("log.jsonl"), &mut monitor);
    drop(target.stdin.take());
    target.wait().unwrap();
    let out = monitor.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let texts = all_outputs(dir.path(), &out);
    for secret in [token, "hunter2-BEFORE-attach"] {
        for (i, text) in texts.iter().enumerate() {
            assert!(!text.contains(secret), "{secret} found in output {i}");
        }
    }
    let r: Value = serde_json::from_str(&texts[3]).unwrap();
    assert!(
        r["redactions"].as_u64().unwrap() >= 2,
        "{}",
        r["redactions"]
    );
    let first = &r["processes"][0];
    assert_eq!(first["preexisting"], true);
    assert_eq!(first["argv"][3], "--password=[REDACTED]", "{first:#}");
    assert_eq!(first["argv"][4], "[REDACTED]", "{first:#}");
}

#[test]
fn a_token_cut_by_the_argv_limit_is_redacted() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    // The kernel keeps 32 KiB of argv: the pad puts the cut inside the token.
    let pad = "a".repeat(32 * 1024 - 40);
    let token = format!("ghp_{}", "PLANTEDcut".repeat(20));
    let out = command()
        .args(["run", "--headless", "--linger", "0.3"])
        .args(outputs_args(dir.path()))
        .args(["--", "/bin/true", &pad, &token])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let texts = all_outputs(dir.path(), &out);
    for (i, text) in texts.iter().enumerate() {
        assert!(
            !text.contains("ghp_PLANTEDcut"),
            "the cut token in output {i}"
        );
    }
    let r: Value = serde_json::from_str(&texts[3]).unwrap();
    let e = &r["processes"][0];
    assert_eq!(e["argv_truncated"], true, "the cut fell inside the argv");
    assert_eq!(e["argv"][2], "[REDACTED]");
}

#[test]
fn the_ocsf_export_has_records_of_each_class() {
    let dir = tempfile::tempdir().unwrap();
    let ocsf = dir.path().join("ocsf.jsonl");
    let py = "import socket\ns=socket.socket(); s.bind(('127.0.0.1',0)); s.listen()\nsocket.create_connection(s.getsockname()).close()\nopen('/etc/hostname').read()\n";
    let r = run(&["--ocsf", ocsf.to_str().unwrap()], &["python3", "-c", py]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let text = std::fs::read_to_string(&ocsf).unwrap();
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    assert!(
        !records.is_empty(),
        "an export that writes nothing is the failure users complain about"
    );
    let classes: std::collections::BTreeSet<u64> = records
        .iter()
        .map(|r| r["class_uid"].as_u64().unwrap())
        .collect();
    for class in [1007, 1001, 4001] {
        assert!(classes.contains(&class), "class {class} in {classes:?}");
    }
    // Each event leads back to its log line: metadata.sequence is its seq, uid its hash.
    let log: Vec<Value> = lines(&r.log)
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for rec in &records {
        let seq = rec["metadata"]["sequence"].as_u64().expect("a sequence") as usize;
        assert_eq!(rec["metadata"]["uid"], log[seq]["hash"], "{rec:#}");
    }
    for rec in &records {
        assert!(
            rec["metadata"]["version"]
                .as_str()
                .unwrap()
                .starts_with("1.")
        );
        assert_eq!(
            rec["type_uid"].as_u64().unwrap(),
            rec["class_uid"].as_u64().unwrap() * 100 + rec["activity_id"].as_u64().unwrap()
        );
    }
}
