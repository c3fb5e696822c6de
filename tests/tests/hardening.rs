//! Odd and hostile input: every case gets a sentence and the documented exit code, never a
//! panic, and overload is visible instead of silent.
use std::process::{Command, Stdio};

use integration_tests::*;
use serde_json::Value;

fn no_panic(out: &std::process::Output) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn logs_that_are_not_logs() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &[u8], i32, &str); 5] = [
        ("empty", b"", 1, "empty"),
        ("garbage", b"\x00\x01 not json at all\n", 1, "not"),
        ("json-but-not-a-log", b"{\"hello\":1}\n", 1, "not"),
        ("torn", b"{\"seq\":0,\"prev\":\"00", 5, "torn"),
        ("binary", &[0xff; 300], 1, "not"),
    ];
    for (name, bytes, code, says) in cases {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        let out = sandbox_watch(&["verify", p.to_str().unwrap()]);
        no_panic(&out);
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{name}: {text}");
        assert!(
            text.to_lowercase().contains(says),
            "{name}: should say {says:?}: {text}"
        );
        let out = sandbox_watch(&["replay", "--headless", p.to_str().unwrap()]);
        no_panic(&out);
        assert_ne!(
            out.status.code(),
            Some(0),
            "{name}: replay of a non-log must fail"
        );
    }
    // A log that cannot be read is a usage error (2) with a sentence, for verify as for replay.
    for missing in ["/no/such/log.jsonl", "/"] {
        let out = sandbox_watch(&["verify", missing]);
        no_panic(&out);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "verify {missing}: {stderr}");
        assert!(
            stderr.contains(&format!("{missing}: cannot read"))
                && stderr.contains("give the path of a log"),
            "{stderr}"
        );
    }
    let out = sandbox_watch(&["replay", "--headless", "/no/such/log.jsonl"]);
    no_panic(&out);
    assert_eq!(out.status.code(), Some(2), "a usage error");
    assert!(String::from_utf8_lossy(&out.stderr).contains("/no/such/log.jsonl: cannot read"));
}

#[test]
fn a_log_from_a_newer_schema_is_refused_by_replay_but_still_verifies() {
    let r = run(&[], &["true"]);
    let text = std::fs::read_to_string(&r.log).unwrap();
    assert!(text.lines().next().unwrap().contains("sandbox-watch/log/1"));
    // Re-chain a copy whose start record says schema 2 (a newer writer), so only the schema differs.
    let newer = r.dir.path().join("newer.jsonl");
    let status = Command::new("python3")
        .arg("-c")
        .arg(RECHAIN)
        .arg(&r.log)
        .arg(&newer)
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(
        sandbox_watch(&["verify", newer.to_str().unwrap()])
            .status
            .code(),
        Some(0)
    );
    let out = sandbox_watch(&["replay", "--headless", newer.to_str().unwrap()]);
    no_panic(&out);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("sandbox-watch/log/2"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Rewrites a log with schema 2 in its start record and a recomputed hash chain, following
/// the canonical form the README documents (sorted keys, no whitespace).
const RECHAIN: &str = r#"
import hashlib, json, sys
prev = "0" * 64
out = []
for i, line in enumerate(open(sys.argv[1])):
    rec = json.loads(line)
    if i == 0:
        rec["schema"] = "sandbox-watch/log/2"
    rec.pop("hash")
    rec["prev"] = prev
    canon = json.dumps(rec, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    rec["hash"] = prev = hashlib.sha256(canon.encode()).hexdigest()
    out.append(json.dumps(rec, separators=(",", ":"), ensure_ascii=False))
open(sys.argv[2], "w").write("\n".join(out) + "\n")
"#;

#[test]
fn argv_of_128_kib_is_kept_to_the_limit_and_marked() {
    // 128 KiB in two arguments (one argument may not exceed 128 KiB itself).
    let half = "x".repeat(64 * 1024);
    let r = run(&[], &["/bin/echo", &half, &half]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let e = r
        .processes()
        .iter()
        .find(|p| p["argv"][0] == "/bin/echo")
        .expect("the exec");
    assert_eq!(e["argv_truncated"], true);
    let kept: usize = e["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().len() + 1)
        .sum();
    assert!(
        // Each argument with its NUL, but the cut last one has none: one byte more at most.
        (32 * 1024 - 16..=32 * 1024 + 1).contains(&kept),
        "kept {kept} bytes"
    );
}

#[test]
fn argv_with_invalid_utf8_and_newlines_is_kept_escaped() {
    let r = run(
        &[],
        &[
            "sh",
            "-c",
            "/bin/echo \"$(printf 'a\\nb')\" \"$(printf 'c\\377d')\" > /dev/null",
        ],
    );
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let e = r
        .processes()
        .iter()
        .find(|p| p["argv"][0] == "/bin/echo")
        .expect("the exec");
    assert_eq!(e["argv"][1], "a\nb");
    assert_eq!(e["argv"][2], "c\\xffd");
}

#[test]
fn ten_thousand_processes_in_the_tree() {
    let r = run(
        &["--ring-buffer", "33554432"],
        &["sh", "-c", "seq 10000 | xargs -P 4 -n 50 /bin/true"],
    );
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let trues = r
        .processes()
        .iter()
        .filter(|p| p["argv"][0] == "/bin/true")
        .count();
    assert_eq!(trues, 200, "10000 arguments in 200 runs of 50");
    // Every number reached a process: 10000 arguments.
    let args: usize = r
        .processes()
        .iter()
        .filter(|p| p["argv"][0] == "/bin/true")
        .map(|p| p["argv"].as_array().unwrap().len() - 1)
        .sum();
    assert_eq!(args, 10000);
    assert_eq!(r.report["coverage"]["lost"], 0);
    let r = run(
        &[],
        &[
            "sh",
            "-c",
            "i=0; while [ $i -lt 10000 ]; do /bin/true & i=$((i+1)); if [ $((i % 100)) = 0 ]; then wait; fi; done; wait",
        ],
    );
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let trues = r
        .processes()
        .iter()
        .filter(|p| p["argv"][0] == "/bin/true")
        .count();
    assert_eq!(trues, 10000, "every exec of the tree");
    assert_eq!(r.report["coverage"]["lost"], 0);
}

#[test]
fn overload_is_counted_and_fails_ci_when_asked() {
    // A ring buffer of one page cannot keep up with a burst of distinct file opens.
    let py = "import os\nfor root, dirs, files in os.walk('/usr/lib'):\n    for f in files[:50]:\n        try: os.close(os.open(os.path.join(root, f), os.O_RDONLY))\n        except OSError: pass\n";
    let r = run(
        &["--ring-buffer", "4096", "--fail-on", "lost"],
        &["python3", "-c", py],
    );
    let lost = r.report["coverage"]["lost"].as_u64().unwrap();
    assert!(
        lost > 0,
        "a one-page ring buffer must overflow here: {:#}",
        r.report["coverage"]
    );
    assert_eq!(r.report["coverage"]["complete"], false);
    assert!(
        r.report["coverage"]["lost_by_kind"]["file_open"]
            .as_u64()
            .unwrap()
            > 0,
        "{:#}",
        r.report["coverage"]
    );
    let v: Vec<&Value> = r.report["violations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["kind"] == "lost")
        .collect();
    assert_eq!(v.len(), 1);
    assert_eq!(r.code(), Some(3), "--fail-on lost fails CI");
    let summary = r.stderr();
    assert!(summary.contains("lost"), "{summary}");
}

#[test]
fn sigpipe_on_stdout_is_not_a_crash() {
    let r = run(&[], &["true"]);
    // `verify` prints to stdout; the reader goes away at once.
    let mut child = command()
        .args(["verify", r.log.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    no_panic(&out);
    assert_eq!(out.status.code(), Some(0));
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{} --help | head -c 10 > /dev/null",
            bin().display()
        ))
        .output()
        .unwrap();
    no_panic(&out);
    assert!(out.status.success());
}

#[test]
fn a_process_that_exits_before_the_attach() {
    require_root();
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    let out = sandbox_watch(&["attach", &pid.to_string()]);
    no_panic(&out);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("no process with pid {pid}")));
}

#[test]
fn more_bad_options() {
    let cases: [(&[&str], &str); 14] = [
        (&["run", "--fail-on", "", "--", "true"], "an empty kind"),
        (
            &["run", "--fail-on", "credential,,outside", "--", "true"],
            "an empty kind",
        ),
        (
            &["run", "--duration", "abc", "--", "true"],
            "not a positive number of seconds",
        ),
        (
            &["run", "--ring-buffer", "99999999999999", "--", "true"],
            "too large",
        ),
        (
            &["run", "--agent-netns", "/etc/passwd", "--", "true"],
            "not a namespace link",
        ),
        (
            &["run", "--allow-net", "10.0.0.0/33", "--", "true"],
            "prefix",
        ),
        (&["run", "--allow-net", "host:99999", "--", "true"], "port"),
        (&["run", "--credential", "[unclosed", "--", "true"], "glob"),
        (&["run", "--linger", "abc", "--", "true"], "abc"),
        (&["run", "--linger", "-1", "--", "true"], "--linger"),
        (
            &["run", "--file-hook", "kprobe", "--", "true"],
            "fentry or tracepoint",
        ),
        (
            &["run", "--user", "no-such-user-xyz", "--", "true"],
            "no such user",
        ),
        (
            &["run", "--agent-netns", "/proc/self/ns/pid", "--", "true"],
            "not a network namespace",
        ),
        (&["container", "--headless", "/"], "container"),
    ];
    for (args, says) in cases {
        let out = sandbox_watch(args);
        no_panic(&out);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(says),
            "{args:?} should say {says:?}: {stderr}"
        );
    }
}
