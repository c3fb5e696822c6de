//! Tool calls on the real kernel: every direct child of the agent process is a step, and what
//! its processes do is attributed to it, also after a detached leftover was reparented away
//! from it. The agents here are shell scripts that run their steps as children, as an agent
//! CLI does: real processes, traced by the real probe.
use integration_tests::*;
use serde_json::Value;

/// The agent script, written to `dir/agent.sh` and run as `sh agent.sh`.
fn agent(dir: &std::path::Path, script: &str) -> String {
    let path = dir.join("agent.sh");
    std::fs::write(&path, script).unwrap();
    path.display().to_string()
}

fn step<'a>(r: &'a Run, id: &str) -> &'a Value {
    r.report["tool_calls"]
        .as_array()
        .expect("tool_calls")
        .iter()
        .find(|t| t["id"] == id)
        .unwrap_or_else(|| panic!("no step {id}: {:#?}", r.report["tool_calls"]))
}

fn file<'a>(r: &'a Run, path: &std::path::Path, op: &str) -> &'a Value {
    let found: Vec<&Value> = r
        .files_at(path.to_str().unwrap())
        .into_iter()
        .filter(|f| f["op"] == op)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one {op} of {}: {:#?}",
        path.display(),
        r.files()
    );
    found[0]
}

#[test]
fn every_child_of_the_agent_is_a_step_and_every_effect_names_its_step() {
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("home/.ssh")).unwrap();
    let key = d.join("home/.ssh/id_rsa");
    std::fs::write(&key, "-----BEGIN OPENSSH PRIVATE KEY-----\n").unwrap();
    // Step 5 leaves a writer behind: setsid in the background, so the step's shell exits at
    // once and the writer is reparented away from it before it writes.
    let steps = [
        format!("echo hello > {}/a.txt", d.display()),
        format!("cat {} > /dev/null", key.display()),
        "exit 3".to_string(),
        "kill -9 $$".to_string(),
        format!(
            "setsid sh -c 'sleep 0.3; echo late > {}/late.txt' > /dev/null 2>&1 &",
            d.display()
        ),
        format!(
            "n=0; while [ ! -e {}/late.txt ] && [ $n -lt 200 ]; do sleep 0.05; n=$((n+1)); done",
            d.display()
        ),
    ];
    let quoted: Vec<String> = steps
        .iter()
        .map(|s| format!("sh -c {}", shell_quote(s)))
        .collect();
    // Between steps 5 and 6 the agent writes a file itself (a shell redirection: no child).
    let script = format!(
        "{}\n{}\n{}\n{}\n{}\necho own > {}/own.txt\n{}\n",
        quoted[0],
        quoted[1],
        quoted[2],
        quoted[3],
        quoted[4],
        d.display(),
        quoted[5]
    );
    let summary = d.join("summary.md");
    let sh = agent(d, &script);
    let r = run(
        &[
            "--summary",
            summary.to_str().unwrap(),
            "--fail-on",
            "outlived",
        ],
        &["sh", &sh],
    );
    assert_eq!(r.code(), Some(3), "--fail-on outlived: {}", r.stderr());

    // The steps, in order, with the commands as the agent gave them and their own ends.
    let calls = r.report["tool_calls"].as_array().expect("tool_calls");
    let commands: Vec<&str> = calls
        .iter()
        .map(|t| t["command"].as_str().unwrap())
        .collect();
    assert_eq!(
        commands,
        steps.iter().map(String::as_str).collect::<Vec<_>>()
    );
    let agent_pid = r.exec_of(&["sh", &sh])["pid"].clone();
    for (i, t) in calls.iter().enumerate() {
        assert_eq!(t["id"], (i + 1).to_string());
        assert_eq!(t["argv"], serde_json::json!(["sh", "-c", steps[i]]));
        let own = r.exec_of(&["sh", "-c", &steps[i]]);
        assert_eq!(own["pid"], t["pid"], "step {}", i + 1);
        assert_eq!(own["ppid"], agent_pid, "a direct child of the agent");
        assert_eq!(own["tool_call"], t["id"]);
        assert!(t["started_at"].as_str() <= t["ended_at"].as_str(), "{t}");
        assert_eq!(t["running_at_end"], false);
        assert_eq!(t["declared"], Value::Null, "no transcript given");
    }
    assert_eq!(step(&r, "1")["exit_code"], 0);
    assert_eq!(step(&r, "3")["exit_code"], 3);
    assert_eq!(step(&r, "4")["signal"], 9);
    assert_eq!(step(&r, "4")["exit_code"], Value::Null);

    // Every process, file and network entry names its step; the agent's own are null.
    for list in ["processes", "files", "network", "violations"] {
        for e in r.report[list].as_array().unwrap() {
            assert!(
                e.get("tool_call").is_some(),
                "{list} entry without tool_call: {e}"
            );
        }
    }
    assert_eq!(r.exec_of(&["sh", &sh])["tool_call"], Value::Null);
    assert_eq!(file(&r, &d.join("a.txt"), "create")["tool_call"], "1");
    assert_eq!(step(&r, "1")["files_changed"], 1);
    let own = file(&r, &d.join("own.txt"), "create");
    assert_eq!(
        own["tool_call"],
        Value::Null,
        "the agent's own write: {own}"
    );
    assert_eq!(file(&r, &key, "read")["tool_call"], "2");
    let cred: Vec<&Value> = r.report["violations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["kind"] == "credential")
        .collect();
    assert_eq!(cred.len(), 1, "{:#?}", r.report["violations"]);
    assert_eq!(cred[0]["tool_call"], "2");
    assert_eq!(step(&r, "2")["violations"], 1);

    // The leftover: its processes are step 5's, and what they did after the step ended is
    // marked, the first of it an `outlived` finding of step 5.
    let late = file(&r, &d.join("late.txt"), "create");
    assert_eq!(late["tool_call"], "5", "{late}");
    assert_eq!(late["after_step"], true, "{late}");
    let sleeper = r.exec_of(&["sleep", "0.3"]);
    assert_eq!(sleeper["tool_call"], "5");
    assert!(step(&r, "5")["after_step"].as_u64().unwrap() >= 1);
    for id in ["1", "2", "3", "4", "6"] {
        assert_eq!(step(&r, id)["after_step"], 0, "step {id}");
    }
    for f in r.files() {
        if f["tool_call"] != "5" {
            assert!(f.get("after_step").is_none(), "{f}");
        }
    }
    let outlived: Vec<&Value> = r.report["violations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["kind"] == "outlived")
        .collect();
    assert_eq!(outlived.len(), 1, "{:#?}", r.report["violations"]);
    assert_eq!(outlived[0]["tool_call"], "5");
    assert!(
        outlived[0]["summary"]
            .as_str()
            .unwrap()
            .contains("after step 5"),
        "{}",
        outlived[0]
    );

    // The summary names the step of each finding (Markdown: `>` is written `&gt;`).
    let text = std::fs::read_to_string(&summary).unwrap();
    assert!(
        text.contains(&format!("step 2 `cat {} &gt; /dev/null`", key.display())),
        "{text}"
    );
    assert!(
        text.contains("**Findings by step**: step 2 credential, step 5 outlived"),
        "{text}"
    );
    assert!(text.contains("**Tool calls**: 6"), "{text}");
}

#[test]
fn a_step_that_waits_for_its_children_has_nothing_after_it() {
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    let d = dir.path();
    let script = format!(
        "sh -c 'sleep 0.2 & echo x > {d}/x.txt; wait'\nsh -c 'true'\n",
        d = d.display()
    );
    let sh = agent(d, &script);
    let r = run(&["--fail-on", "outlived"], &["sh", &sh]);
    assert_eq!(
        r.code(),
        Some(0),
        "nothing outlived its step: {}",
        r.stderr()
    );
    let calls = r.report["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2, "{calls:#?}");
    assert!(calls.iter().all(|t| t["after_step"] == 0), "{calls:#?}");
    assert_eq!(r.exec_of(&["sleep", "0.2"])["tool_call"], "1");
    assert!(
        r.processes().iter().all(|p| p.get("after_step").is_none()),
        "{:#?}",
        r.processes()
    );
}

/// A connect names the step whose process made it, also when a leftover of an ended step makes
/// it: each step connects to a listener of its own, so a connect given to the wrong step (or to
/// none) fails the test.
#[test]
fn a_connect_names_its_step_and_a_leftovers_connect_is_after_it() {
    use std::io::Read;
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    let d = dir.path().to_path_buf();
    let listeners: Vec<std::net::TcpListener> = (0..2)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let ports: Vec<u16> = listeners
        .iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect();
    // Each listener takes one connection and marks it taken (the agent's last step waits for
    // the second, so the leftover's connect is in the capture).
    let accepters: Vec<_> = listeners
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            let mark = d.join(format!("accepted{i}"));
            std::thread::spawn(move || {
                let (mut c, _) = l.accept().unwrap();
                let mut buf = [0u8; 16];
                let _ = c.read(&mut buf);
                std::fs::write(mark, "").unwrap();
            })
        })
        .collect();
    let connect = |port: u16| format!("bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}'");
    let steps = [
        "true".to_string(),
        connect(ports[0]),
        format!(
            "setsid sh -c 'sleep 0.3; {}' > /dev/null 2>&1 &",
            connect(ports[1]).replace('\'', "\"")
        ),
        format!(
            "n=0; while [ ! -e {}/accepted1 ] && [ $n -lt 200 ]; do sleep 0.05; n=$((n+1)); done",
            d.display()
        ),
    ];
    let script: String = steps
        .iter()
        .map(|s| format!("sh -c {}\n", shell_quote(s)))
        .collect();
    let sh = agent(&d, &script);
    let r = run(&[], &["sh", &sh]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    for a in accepters {
        a.join().unwrap();
    }
    let to = |port: u16| -> Vec<&Value> {
        r.network()
            .iter()
            .filter(|n| n["op"] == "connect" && n["port"] == port)
            .collect()
    };
    let first = to(ports[0]);
    assert_eq!(first.len(), 1, "{:#?}", r.network());
    assert_eq!(
        first[0]["tool_call"], "2",
        "the step that connected: {}",
        first[0]
    );
    assert!(first[0].get("after_step").is_none(), "{}", first[0]);
    let late = to(ports[1]);
    assert_eq!(late.len(), 1, "{:#?}", r.network());
    assert_eq!(
        late[0]["tool_call"], "3",
        "the leftover's step: {}",
        late[0]
    );
    assert_eq!(
        late[0]["after_step"], true,
        "after step 3 ended: {}",
        late[0]
    );
    // A step's `connections` counts every connect under it. bash with SHELL unset (as in CI)
    // looks itself up in passwd first, and glibc tries nscd's socket twice: those are connects
    // too, so the TCP ones are counted apart.
    let connects = |id: &str, tcp_only: bool| -> u64 {
        r.network()
            .iter()
            .filter(|n| n["op"] == "connect" && n["tool_call"] == id)
            .filter(|n| !tcp_only || n["proto"] == "tcp")
            .map(|n| n["count"].as_u64().unwrap())
            .sum()
    };
    let ids = ["1", "2", "3", "4"];
    let counted: Vec<u64> = ids
        .iter()
        .map(|id| step(&r, id)["connections"].as_u64().unwrap())
        .collect();
    let listed: Vec<u64> = ids.iter().map(|id| connects(id, false)).collect();
    assert_eq!(counted, listed, "{:#?}", r.report["tool_calls"]);
    let tcp: Vec<u64> = ids.iter().map(|id| connects(id, true)).collect();
    assert_eq!(tcp, [0, 1, 1, 0], "{:#?}", r.network());
}

/// The word as `sh` reads it back: single quotes, a quote inside as '\''.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Claude Code's wrapper around a Bash tool call, as its CLI runs it.
fn claude_wrapped(snapshot: &std::path::Path, cmd: &str) -> String {
    let cwd = snapshot.with_file_name("claude-1a2b-cwd");
    format!(
        "bash -c -l {}",
        shell_quote(&format!(
            "source {} && eval {} \\< /dev/null && pwd -P >| {}",
            snapshot.display(),
            shell_quote(cmd),
            cwd.display()
        ))
    )
}

#[test]
fn the_transcript_is_reconciled_with_what_ran() {
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    let d = dir.path();
    let home = d.join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::create_dir_all(home.join(".claude/shell-snapshots")).unwrap();
    std::fs::create_dir_all(home.join(".claude/projects/-w")).unwrap();
    let snapshot = home.join(".claude/shell-snapshots/snapshot-bash-1-ab.sh");
    std::fs::write(&snapshot, "").unwrap();
    let key = home.join(".ssh/id_rsa");
    std::fs::write(&key, "-----BEGIN OPENSSH PRIVATE KEY-----\n").unwrap();
    let transcript = home.join(".claude/projects/-w/session.jsonl");
    let one = format!("echo one > {}/one.txt", d.display());
    let cat = format!("cat {} > /dev/null", key.display());
    // The transcript the agent writes (printf is its shell's own: no step): steps 1 and 3 and
    // its own edit of own.txt are declared; step 2 (the key read) is not; it also declares a
    // step that never ran. Lines the agent writes are untrusted: one is not JSON.
    let lines = [
        serde_json::json!({"type": "assistant", "message": {"content": [
            {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": one}}]}}),
        serde_json::json!({"type": "user", "message": {"content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": ""}]}}),
        serde_json::json!({"type": "assistant", "message": {"content": [
            {"type": "tool_use", "id": "toolu_w", "name": "Write",
             "input": {"file_path": d.join("own.txt"), "content": "own"}}]}}),
        serde_json::json!({"type": "assistant", "message": {"content": [
            {"type": "tool_use", "id": "toolu_3", "name": "Bash", "input": {"command": "true"}}]}}),
        serde_json::json!({"type": "assistant", "message": {"content": [
            {"type": "tool_use", "id": "toolu_9", "name": "Bash",
             "input": {"command": "curl http://198.51.100.7/x"}}]}}),
    ];
    let mut printf = String::new();
    for l in &lines {
        printf.push_str(&format!(
            "printf '%s\\n' {} >> {}\n",
            shell_quote(&l.to_string()),
            transcript.display()
        ));
    }
    printf.push_str(&format!(
        "printf 'not json\\n' >> {}\n",
        transcript.display()
    ));
    let script = format!(
        "{}\nsh -c {}\necho own > {}/own.txt\n{}\n{printf}",
        claude_wrapped(&snapshot, &one),
        shell_quote(&cat),
        d.display(),
        claude_wrapped(&snapshot, "true"),
    );
    let sh = agent(d, &script);
    let r = run(
        &["--transcript", "auto", "--fail-on", "undeclared"],
        &["sh", &sh],
    );
    assert_eq!(r.code(), Some(3), "--fail-on undeclared: {}", r.stderr());
    let t = &r.report["transcript"];
    assert_eq!(
        t["path"],
        transcript.to_str().unwrap(),
        "auto found it: {t}"
    );
    assert_eq!(t["formats"], serde_json::json!(["claude-code"]));
    // The wrapper is peeled, so the declared command matches what ran.
    assert_eq!(step(&r, "1")["command"], one);
    assert_eq!(step(&r, "1")["declared"], true);
    assert_eq!(step(&r, "1")["declared_by"], "toolu_1");
    assert_eq!(step(&r, "3")["command"], "true");
    assert_eq!(step(&r, "3")["declared"], true);
    assert_eq!(step(&r, "2")["command"], cat);
    assert_eq!(step(&r, "2")["declared"], false);
    assert_eq!(t["undeclared"], serde_json::json!(["2"]));
    let unobserved = t["unobserved"].as_array().unwrap();
    assert_eq!(unobserved.len(), 1, "{t}");
    assert_eq!(unobserved[0]["id"], "toolu_9");
    let own = file(&r, &d.join("own.txt"), "create");
    assert_eq!(
        (own["declared"].clone(), own["declared_by"].clone()),
        (true.into(), "toolu_w".into())
    );
    let undeclared: Vec<&Value> = r.report["violations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["kind"] == "undeclared")
        .collect();
    assert_eq!(undeclared.len(), 1, "{:#?}", r.report["violations"]);
    assert_eq!(undeclared[0]["tool_call"], "2");
    assert!(
        t["problems"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p.as_str().unwrap().contains("not JSON")),
        "{t}"
    );
    // The summary names no transcript text but the matched commands.
    assert!(!r.stderr().contains("198.51.100.7"), "{}", r.stderr());

    // replay --transcript: a transcript edited to drop step 3, with forged times.
    let edited = d.join("edited.jsonl");
    let plain = [
        serde_json::json!({"tool": "shell", "command": one,
            "started_at": "2001-01-01T00:00:00Z", "ended_at": "2001-01-01T00:00:01Z"}),
        serde_json::json!({"tool": "shell", "command": cat}),
    ];
    let text: Vec<String> = plain.iter().map(Value::to_string).collect();
    std::fs::write(&edited, text.join("\n") + "\n").unwrap();
    // Replayed headless with a transcript: the exit status and the report.
    let replay = |transcript: &std::path::Path, flags: &[&str]| {
        let out_path = d.join("replayed.json");
        let _ = std::fs::remove_file(&out_path);
        let args = [&["replay", "--headless"], flags].concat();
        let out = sandbox_watch(
            &[
                args.as_slice(),
                &[
                    "--transcript",
                    transcript.to_str().unwrap(),
                    "--report",
                    out_path.to_str().unwrap(),
                    r.log.to_str().unwrap(),
                ],
            ]
            .concat(),
        );
        let report = std::fs::read_to_string(&out_path)
            .map(|text| serde_json::from_str::<Value>(&text).unwrap())
            .unwrap_or_default();
        (out, report)
    };
    let (out, replayed) = replay(&edited, &["--fail-on", "undeclared"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "no finding under the undeclared step 3"
    );
    let t = &replayed["transcript"];
    assert_eq!(t["undeclared"], serde_json::json!(["3"]), "{t}");
    assert!(
        t["problems"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p.as_str().unwrap().contains("times do not fit")),
        "{t}"
    );
    // And a transcript that is no transcript at all: said, not a crash.
    let junk = d.join("junk.jsonl");
    let mut bytes = vec![0xffu8, 0xfe, b'\n'];
    bytes.extend(std::iter::repeat_n(b'{', 9 << 20));
    std::fs::write(&junk, bytes).unwrap();
    let (out, replayed) = replay(&junk, &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let problems = replayed["transcript"]["problems"].as_array().unwrap();
    assert!(problems.len() >= 2, "{problems:?}");
    assert_eq!(
        replayed["transcript"]["undeclared"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
}
