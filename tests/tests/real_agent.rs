//! A real coding agent under the probe: the unmodified Claude Code CLI (pinned, from npm),
//! driven by a scripted model server on loopback through a realistic session, in print mode
//! and in its interactive UI in a terminal, and the report compared with the session's ground
//! truth: the model server's own record of every tool result, the session's known effects, and
//! `strace -f` of the same session run without sandbox-watch.
//!
//! The checks of one run are all made and reported together (one failure does not hide the
//! others); see `tests/src/agent.rs` for the harness and how the CLI is kept offline.
use std::path::Path;
use std::time::Instant;

use integration_tests::agent::*;
use integration_tests::*;
use serde_json::Value;

/// The session did what its script says, by the model server's own record: otherwise the CLI,
/// not sandbox-watch, misbehaved and nothing below means anything.
fn assert_the_session_ran(s: &Session, model: &Value) {
    assert_eq!(
        model["finished"], true,
        "the session did not finish: {model:#}"
    );
    let results = model["tool_results"].as_array().expect("tool_results");
    assert_eq!(
        results.len(),
        s.steps.len(),
        "one tool result per step: {model:#}"
    );
    let result = |name: &str| {
        let i = s.step(name);
        results
            .iter()
            .find(|r| r["step"] == i)
            .unwrap_or_else(|| panic!("no tool result for step {name}: {model:#}"))
    };
    let content = |name: &str| result(name)["content"].as_str().unwrap_or("").to_string();
    for (i, step) in s.steps.iter().enumerate() {
        let r = results.iter().find(|r| r["step"] == i).unwrap();
        assert_eq!(
            r["is_error"],
            step.name == "failing",
            "step {} ({}): {r:#}",
            i,
            step.name
        );
    }
    assert!(
        content("failing").contains("Exit code 2"),
        "{}",
        content("failing")
    );
    assert!(content("credential").contains("BEGIN OPENSSH PRIVATE KEY"));
    assert!(content("use-package").contains("hello from tinypkg"));
    assert!(
        content("unshare").contains("curl exit 7"),
        "{}",
        content("unshare")
    );
    assert!(
        content("fetch-notes").contains("# Project notes"),
        "the leftover server answered"
    );
    assert_eq!(content("token").trim(), "200");
}

/// The CLI's own quoting of a command in its tool-call shell: `eval '…'`, each `'` as `'"'"'`.
fn quoted_by_the_cli(command: &str) -> String {
    format!("eval '{}'", command.replace('\'', r#"'"'"'"#))
}

/// What every run of the session must show, whatever drove the CLI.
fn session_checks(c: &mut Checks, s: &Session, cap: &Capture) {
    let r = &cap.report;
    let agent = cap.agent_pid();
    let proj = |p: &str| s.proj.join(p).display().to_string();
    let home = |p: &str| s.home.join(p).display().to_string();
    let port = s.leftover_port.to_string();
    let one = |argv: &[&str]| -> Option<Value> {
        let found = cap.execs(argv);
        (found.len() == 1).then(|| found[0].clone())
    };

    c.check(
        "the agent is the CLI, in the test's network namespace",
        cap.program(agent) == "claude" && r["agent"]["netns"] == own_netns(),
        || format!("agent {:#}, program {}", r["agent"], cap.program(agent)),
    );
    c.check(
        "the agent's exit status is the CLI's (0)",
        r["exit"]["code"] == 0,
        || format!("{:#}", r["exit"]),
    );
    c.check("nothing was lost", r["coverage"]["lost"] == 0, || {
        format!("{:#}", r["coverage"])
    });

    // Every scripted shell step: a tool-call shell, ended as the model server was told.
    let shells = cap.tool_call_shells();
    let bash = s.bash_steps();
    c.check(
        "one tool-call shell per Bash step",
        shells.len() == bash.len(),
        || format!("{} shells for {} Bash steps", shells.len(), bash.len()),
    );
    for (shell, &i) in shells.iter().zip(&bash) {
        let want = if s.steps[i].name == "failing" { 2 } else { 0 };
        c.check(
            &format!("step {} `{}` ended with {want}", i, s.steps[i].name),
            shell["exit_code"] == want,
            || format!("{shell:#}"),
        );
    }

    // Each step's programs, exactly as run, with their exit codes.
    let pip = format!("{}/.venv/bin/python3", s.proj.display());
    let key = home(".ssh/id_rsa");
    let root_url = format!("http://127.0.0.1:{port}/");
    let notes_url = format!("http://127.0.0.1:{port}/NOTES.md");
    let expected: Vec<(Vec<&str>, i64)> = vec![
        (
            vec!["sed", "-i", "s/hello/hello, world/", "greeting.txt"],
            0,
        ),
        (vec!["git", "commit", "-qam", "Greet the world"], 0),
        (vec!["git", "rm", "-q", "obsolete.txt"], 0),
        (vec!["git", "commit", "-qm", "Remove obsolete.txt"], 0),
        (vec!["python3", "-m", "venv", ".venv"], 0),
        (
            vec![
                &pip,
                ".venv/bin/pip",
                "install",
                "-q",
                "--no-index",
                "--find-links",
                "../wheels",
                "tinypkg",
            ],
            0,
        ),
        (
            vec![
                ".venv/bin/python",
                "-c",
                "import tinypkg; print(tinypkg.hello())",
            ],
            0,
        ),
        (vec!["cat", &key], 0),
        (vec!["curl", "-sS", "--max-time", "2", &root_url], 7),
        (vec!["curl", "-s", &notes_url], 0),
        (vec!["ls", "does-not-exist"], 2),
    ];
    for (argv, code) in &expected {
        let e = one(argv);
        c.check(
            &format!("`{}` ran once and exited {code}", argv.join(" ")),
            e.as_ref().is_some_and(|e| e["exit_code"] == *code),
            || format!("found {:#?}", cap.execs(argv)),
        );
    }
    let server_argv = ["python3", "-m", "http.server", &port, "--bind", "127.0.0.1"];
    let server = one(&server_argv);
    let server_shell = shells.get(
        bash.iter()
            .position(|&i| s.steps[i].name == "leftover-server")
            .unwrap_or(99),
    );
    c.check(
        "the leftover server's parent is its step's shell (the fork's parent, as the log's fork \
         record says, not init after the shell exited)",
        server
            .as_ref()
            .zip(server_shell)
            .is_some_and(|(p, sh)| p["ppid"] == sh["pid"]),
        || {
            format!(
                "server {server:#?}\nits step's shell pid {:?}",
                server_shell.map(|p| &p["pid"])
            )
        },
    );
    c.check(
        "the leftover server is reported running at the end, and as a leftover",
        server.as_ref().is_some_and(|p| {
            p["running_at_end"] == true
                && cap
                    .violations("leftover")
                    .iter()
                    .any(|v| v["pid"] == p["pid"])
        }),
        || format!("{server:#?}\nviolations {:#}", r["violations"]),
    );

    // Files.
    let files = r["files"].as_array().unwrap();
    let at = |path: &str| -> Vec<&Value> {
        files
            .iter()
            .filter(|f| f["path"] == path || f["new_path"] == path)
            .collect()
    };
    let pid_of = |argv: &[&str]| one(argv).map(|p| p["pid"].clone());
    c.check(
        "sed's edit of greeting.txt is a write (rename into place) by sed",
        at(&proj("greeting.txt")).iter().any(|f| {
            f["pid"]
                == pid_of(&["sed", "-i", "s/hello/hello, world/", "greeting.txt"])
                    .unwrap_or_default()
                && matches!(f["op"].as_str(), Some("rename" | "write"))
        }),
        || format!("{:#?}", at(&proj("greeting.txt"))),
    );
    c.check(
        "`git rm` deleted obsolete.txt",
        at(&proj("obsolete.txt")).iter().any(|f| {
            f["op"] == "delete"
                && f["pid"] == pid_of(&["git", "rm", "-q", "obsolete.txt"]).unwrap_or_default()
        }),
        || format!("{:#?}", at(&proj("obsolete.txt"))),
    );
    let notes = proj("NOTES.md");
    let notes_sha = sha256_file(Path::new(&notes));
    c.check(
        "the agent's own Write/Edit of NOTES.md is a write by the agent at NOTES.md's real path \
         (the CLI renames through /proc/self/fd/N/)",
        at(&notes).iter().any(|f| {
            f["pid"] == agent && matches!(f["op"].as_str(), Some("rename" | "write" | "create"))
        }),
        || {
            format!(
                "entries at NOTES.md: {:#?}\nthe agent's renames: {:#?}",
                at(&notes),
                files
                    .iter()
                    .filter(|f| f["pid"] == agent && f["op"] == "rename")
                    .collect::<Vec<_>>()
            )
        },
    );
    c.check(
        "NOTES.md's final sha256 is reported",
        notes_sha.is_some()
            && at(&notes)
                .iter()
                .any(|f| f["sha256"].as_str() == notes_sha.as_deref()),
        || format!("on disk {notes_sha:?}; entries {:#?}", at(&notes)),
    );
    let site = s.proj.join(".venv/lib");
    let init = std::fs::read_dir(&site)
        .ok()
        .and_then(|mut d| d.next())
        .and_then(|e| e.ok())
        .map(|e| {
            e.path()
                .join("site-packages/tinypkg/__init__.py")
                .display()
                .to_string()
        })
        .unwrap_or_default();
    let pip_pid = pip_pid(cap, &pip);
    c.check(
        "pip installed tinypkg/__init__.py into the venv",
        at(&init).iter().any(|f| {
            matches!(f["op"].as_str(), Some("create" | "write" | "rename"))
                && Some(&f["pid"]) == pip_pid.as_ref()
        }),
        || format!("{init}: {:#?}", at(&init)),
    );

    // Findings.
    let cat = pid_of(&["cat", &key]).unwrap_or_default();
    c.check(
        "the credential read is a credential violation naming ~/.ssh/id_rsa, by cat",
        cap.violations("credential")
            .iter()
            .any(|v| v["pid"] == cat && v["summary"].as_str().unwrap_or("").contains(&key)),
        || format!("{:#?}", cap.violations("credential")),
    );
    key_first_checks(c, cap, &key);
    let bashrc = home(".bashrc");
    let bashrc_shell = shells.get(
        bash.iter()
            .position(|&i| s.steps[i].name == "bashrc")
            .unwrap_or(99),
    );
    let bashrc_tree = bashrc_shell
        .map(|p| cap.tree(p["pid"].as_i64().unwrap()))
        .unwrap_or_default();
    c.check(
        "the .bashrc append is a persistence violation, by its step's shell",
        cap.violations("persistence").iter().any(|v| {
            v["summary"].as_str().unwrap_or("").contains(&bashrc)
                && v["pid"].as_i64().is_some_and(|p| bashrc_tree.contains(&p))
        }),
        || format!("{:#?}", cap.violations("persistence")),
    );
    let profile = home(".profile");
    c.check(
        "the agent's own Write of ~/.profile is a persistence violation naming ~/.profile, by the agent",
        cap.violations("persistence").iter().any(|v| {
            v["pid"] == agent
                && v["summary"]
                    .as_str()
                    .unwrap_or("")
                    .contains(&format!(" {profile}"))
        }),
        || format!("{:#?}", cap.violations("persistence")),
    );
    c.check(
        "persistence violations name only ~/.bashrc and ~/.profile",
        cap.violations("persistence").iter().all(|v| {
            let t = v["summary"].as_str().unwrap_or("");
            t.contains(&format!(" {bashrc}")) || t.contains(&format!(" {profile}"))
        }),
        || format!("{:#?}", cap.violations("persistence")),
    );

    // The namespace step: `unshare -n` puts curl in a new network namespace, which is not the
    // agent's: outside, by the README's definition (the agent's namespace is the first
    // non-launcher's, here the CLI's; `unshare` inside the session is not a launcher of the
    // agent). unshare itself ran in the agent's namespace.
    let unshare = one(&[
        "unshare",
        "-n",
        "curl",
        "-sS",
        "--max-time",
        "2",
        &format!("http://127.0.0.1:{port}/"),
    ]);
    let curl = one(&[
        "curl",
        "-sS",
        "--max-time",
        "2",
        &format!("http://127.0.0.1:{port}/"),
    ]);
    c.check(
        "`unshare -n` ran in the agent's namespace, inside; its curl in another, outside",
        unshare
            .as_ref()
            .is_some_and(|u| u["verdict"] == "inside" && u["netns"] == r["agent"]["netns"])
            && curl.as_ref().is_some_and(|p| {
                p["verdict"] == "outside"
                    && p["netns"] != r["agent"]["netns"]
                    && unshare.as_ref().is_some_and(|u| u["pid"] == p["pid"])
            }),
        || format!("unshare {unshare:#?}\ncurl {curl:#?}"),
    );
    let curl_pid = curl.as_ref().map(|p| p["pid"].clone()).unwrap_or_default();
    let network = r["network"].as_array().unwrap();
    c.check(
        "its connect failed ENETUNREACH from its own namespace, outside",
        network.iter().any(|n| {
            n["pid"] == curl_pid
                && n["op"] == "connect"
                && n["port"] == s.leftover_port
                && n["result"] == "ENETUNREACH"
                && n["verdict"] == "outside"
                && curl.as_ref().is_some_and(|p| p["netns"] == n["netns"])
        }),
        || {
            format!(
                "{:#?}",
                network
                    .iter()
                    .filter(|n| n["pid"] == curl_pid)
                    .collect::<Vec<_>>()
            )
        },
    );
    c.check(
        "the verdict is outside, and only the namespace step is outside",
        r["verdict"] == "outside"
            && cap
                .violations("outside")
                .iter()
                .all(|v| v["pid"] == curl_pid),
        || format!("{} {:#?}", r["verdict"], cap.violations("outside")),
    );

    // Network: offline, the agent talks to the model server only.
    c.check(
        "every inet connect is to loopback, and there is no DNS question",
        network.iter().all(|n| {
            n["op"] != "dns"
                && (n["op"] != "connect" || n["proto"] == "unix" || n["addr"] == "127.0.0.1")
        }),
        || {
            format!(
                "{:#?}",
                network
                    .iter()
                    .filter(
                        |n| n["op"] == "dns" || (n["proto"] != "unix" && n["addr"] != "127.0.0.1")
                    )
                    .collect::<Vec<_>>()
            )
        },
    );
    c.check(
        "the agent connected to the model server",
        network.iter().any(|n| {
            n["pid"] == agent
                && n["op"] == "connect"
                && n["port"] == cap.model_port
                && n["result"] == "ok"
        }),
        || format!("model port {}", cap.model_port),
    );
    let listen = network
        .iter()
        .find(|n| n["op"] == "listen" && n["port"] == s.leftover_port);
    c.check(
        "the leftover server's listen is reported, still listening at the end",
        listen.is_some_and(|n| {
            n["listening_at_end"] == true && server.as_ref().is_some_and(|p| p["pid"] == n["pid"])
        }),
        || format!("{listen:#?}"),
    );

    // The token.
    for (name, text) in &cap.outputs {
        c.check(
            &format!("the token is absent from {name}"),
            !text.contains(SECRET),
            || {
                let i = text.find(SECRET).unwrap();
                format!(
                    "…{}…",
                    &text[i.saturating_sub(80)..(i + SECRET.len() + 20).min(text.len())]
                )
            },
        );
    }
    let token_curl = [
        "curl",
        "-s",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "-H",
        "Authorization: Bearer [REDACTED]",
        &format!("http://127.0.0.1:{port}/"),
    ];
    c.check(
        "exact redaction: curl's argv has only the token replaced (`Authorization: Bearer [REDACTED]`)",
        cap.execs(&token_curl).len() == 1,
        || format!("curl argv: {:#?}", cap.processes().iter().filter(|p| p["argv"][0] == "curl" && p["argv"].to_string().contains("http_code")).map(|p| &p["argv"]).collect::<Vec<_>>()),
    );
    let token_step = &s.steps[s.step("token")].input["command"];
    let want = quoted_by_the_cli(&token_step.as_str().unwrap().replace(SECRET, "[REDACTED]"));
    let shell = shells.get(
        bash.iter()
            .position(|&i| s.steps[i].name == "token")
            .unwrap_or(99),
    );
    c.check(
        "exact redaction: the tool-call shell's command keeps the CLI's own quoting byte for byte",
        shell.is_some_and(|p| p["argv"][2].as_str().unwrap_or("").contains(&want)),
        || {
            format!(
                "want …{want}…\ngot {:#}",
                shell.map(|p| &p["argv"][2]).unwrap_or(&Value::Null)
            )
        },
    );
    c.check(
        "the redaction is counted",
        r["redactions"].as_u64().unwrap_or(0) >= 1,
        || format!("{}", r["redactions"]),
    );

    // The summary: one screen, the findings by name.
    let summary = &cap.summary;
    let line = |label: &str| {
        summary
            .lines()
            .find(|l| l.contains(label))
            .unwrap_or("")
            .to_string()
    };
    let creds = line("**Credentials read**");
    c.check(
        "the summary's credential line names ~/.ssh/id_rsa first",
        creds
            .find('`')
            .is_some_and(|i| creds[i + 1..].starts_with(&key)),
        || creds.clone(),
    );
    let persist = line("**Persistence written**");
    c.check(
        "the summary's persistence line names ~/.bashrc and ~/.profile",
        persist.contains(&format!("`{bashrc}`")) && persist.contains(&format!("`{profile}`")),
        || persist.clone(),
    );
    // `rm -rf` as the CLI does it (unlink, EISDIR, then rmdir) is no failure: a delete that
    // failed and then succeeded on the same path is not "refused or failed".
    let refused = line("**Refused or failed**");
    let removed: std::collections::BTreeSet<&str> = files
        .iter()
        .filter(|f| f["op"] == "delete" && f["result"].is_null())
        .filter_map(|f| f["path"].as_str())
        .collect();
    let undone: Vec<&str> = refused
        .split('`')
        .skip(1)
        .step_by(2)
        .filter_map(|item| item.strip_prefix("delete "))
        .filter_map(|item| item.rsplit_once(" (").map(|(path, _)| path))
        .filter(|path| removed.contains(path))
        .collect();
    c.check(
        "the summary's refused-or-failed line lists no delete that then succeeded",
        undone.is_empty(),
        || format!("removed after all: {undone:#?}\n{refused}"),
    );
    c.check(
        "the summary fits one screen (120×36)",
        rows_at(summary, 120) <= 36,
        || format!("{} rows:\n{summary}", rows_at(summary, 120)),
    );
}

/// The pid of `.venv/bin/pip install …` (the kernel's argv: the interpreter first).
fn pip_pid(cap: &Capture, interpreter: &str) -> Option<Value> {
    cap.processes()
        .iter()
        .find(|p| p["argv"][0] == interpreter && p["argv"][1] == ".venv/bin/pip")
        .map(|p| p["pid"].clone())
}

/// The `ps aux` of the CLI's IDE detection opens every process's environ: one finding per
/// process, not one per file, and none of them before the key.
fn environ_checks(c: &mut Checks, cap: &Capture) {
    let environ: Vec<&Value> = cap
        .violations("credential")
        .into_iter()
        .filter(|v| {
            v["subject"] == "environ" || v["summary"].as_str().unwrap_or("").contains("/environ")
        })
        .collect();
    let readers: std::collections::BTreeSet<String> =
        environ.iter().map(|v| v["pid"].to_string()).collect();
    let ps = cap.execs(&["ps", "aux"]);
    c.check("the CLI's start-up ran `ps aux`", !ps.is_empty(), || {
        String::new()
    });
    c.check(
        "`ps aux`'s environ reads are one grouped credential finding (subject environ, with \
         the count and every path)",
        ps.iter().any(|p| {
            environ.iter().any(|v| {
                v["pid"] == p["pid"]
                    && v["subject"] == "environ"
                    && v["count"].as_u64().is_some_and(|n| n >= 10)
                    && v["paths"].as_array().map(Vec::len)
                        == v["count"].as_u64().map(|n| n as usize)
            })
        }),
        || format!("ps {ps:#?}\nenviron findings {environ:#?}"),
    );
    c.check(
        "environ reads are one credential finding per process, not one per file",
        environ.len() <= readers.len(),
        || {
            format!(
                "{} environ violations from {} processes, e.g. {:#?}",
                environ.len(),
                readers.len(),
                environ.iter().take(3).collect::<Vec<_>>()
            )
        },
    );
}

/// Issue 16: the key read is at the top of the findings. Only the processes that ran in
/// another network namespace (the README's rank 1) may come before it; every other credential
/// finding, the grouped environ reads, persistence and leftovers come after it.
fn key_first_checks(c: &mut Checks, cap: &Capture, key: &str) {
    let all = cap.report["violations"].as_array().expect("violations");
    let is_key =
        |v: &Value| v["kind"] == "credential" && v["summary"].as_str().unwrap_or("").contains(key);
    let at = all.iter().position(is_key);
    let ran_outside = |v: &Value| {
        v["kind"] == "outside"
            && v["summary"]
                .as_str()
                .unwrap_or("")
                .contains(" ran in net namespace ")
    };
    // Acts on the monitor come first (README's rank 0): `ps aux` reads the monitor's environ
    // too, a `tamper` finding of its own.
    let on_the_monitor = |v: &Value| v["kind"] == "tamper";
    c.check(
        "the ~/.ssh/id_rsa read is the first finding after the acts on the monitor and the \
         processes that ran outside (nothing else, no environ read, before it)",
        at.is_some_and(|i| all[..i].iter().all(|v| on_the_monitor(v) || ran_outside(v))),
        || {
            format!(
                "at {at:?} of {}: {:#?}",
                all.len(),
                all.iter()
                    .take(at.unwrap_or(5) + 1)
                    .map(|v| format!("{} {}", v["kind"], v["summary"]))
                    .collect::<Vec<_>>()
            )
        },
    );
    let environ_at = all.iter().position(|v| v["subject"] == "environ");
    c.check(
        "every grouped environ finding comes after the key read",
        match (at, environ_at) {
            (Some(k), Some(e)) => k < e,
            (Some(_), None) => true,
            _ => false,
        },
        || format!("key at {at:?}, first environ finding at {environ_at:?}"),
    );
}

/// The model server's id of step `i`'s tool use (`tests/agent/model_server.py`).
fn tool_use_id(i: usize) -> String {
    format!("toolu_sw_{i:02}")
}

/// The report's tool call whose command is the step's (as redacted), if exactly one is.
fn tool_call_of<'a>(cap: &'a Capture, s: &Session, name: &str) -> Option<&'a Value> {
    let command = s.steps[s.step(name)].command.as_deref()?;
    let command = command.replace(SECRET, "[REDACTED]");
    let found: Vec<&Value> = cap.report["tool_calls"]
        .as_array()?
        .iter()
        .filter(|t| t["command"] == command.as_str())
        .collect();
    (found.len() == 1).then(|| found[0])
}

/// Issue 18's real-agent checks, on a capture with `--transcript auto`: every scripted step is
/// a declared, observed tool call with its exit code; its effects are attributed to it (the
/// credential read, the `.bashrc` append, the namespace step), the agent's own Write/Edit to
/// the agent (null) and declared by their tool use; the `nohup` server is `outlived` when it
/// answers a later step's request; nothing scripted is undeclared, nothing declared unobserved.
fn tool_call_checks(c: &mut Checks, s: &Session, cap: &Capture) {
    let r = &cap.report;
    let agent = cap.agent_pid();
    let empty = Vec::new();
    let calls = r["tool_calls"].as_array().unwrap_or(&empty);
    let shells = cap.tool_call_shells();
    let bash = s.bash_steps();
    let id_of = |name: &str| tool_call_of(cap, s, name).map(|t| t["id"].clone());

    // The transcript: the CLI's own session log, found among the files it wrote.
    let t = &r["transcript"];
    let claude_dir = s.home.join(".claude/projects").display().to_string();
    c.check(
        "--transcript auto found the CLI's session log under ~/.claude/projects, read as Claude Code's",
        t["path"]
            .as_str()
            .is_some_and(|p| p.starts_with(&claude_dir) && p.ends_with(".jsonl"))
            && t["formats"] == serde_json::json!(["claude-code"]),
        || format!("{t:#}"),
    );
    let edits = s
        .steps
        .iter()
        .filter(|st| matches!(st.tool, "Write" | "Edit"))
        .count();
    c.check(
        "it declares every Bash step and every Write/Edit of the script, and nothing else",
        t["declared"] == bash.len() + edits,
        || {
            format!(
                "{} declared; {} Bash, {edits} edits",
                t["declared"],
                bash.len()
            )
        },
    );
    c.check(
        "nothing declared is unobserved, and reading it had no problem",
        t["unobserved"].as_array().is_some_and(Vec::is_empty)
            && t["problems"].as_array().is_some_and(Vec::is_empty),
        || format!("{t:#}"),
    );

    // Every scripted shell step: one tool call, its own process the tool-call shell, with the
    // step's exit code, declared by the step's tool use, nothing after it (but the server's).
    let mut ids = Vec::new();
    for (k, &i) in bash.iter().enumerate() {
        let step = &s.steps[i];
        let want = if step.name == "failing" { 2 } else { 0 };
        let call = tool_call_of(cap, s, step.name);
        c.check(
            &format!(
                "step {i} `{}` is one tool call, the tool-call shell's, exit {want}, declared by {}",
                step.name,
                tool_use_id(i)
            ),
            call.is_some_and(|t| {
                Some(&t["pid"]) == shells.get(k).map(|sh| &sh["pid"])
                    && t["exit_code"] == want
                    && t["signal"].is_null()
                    && t["declared"] == true
                    && t["declared_by"] == tool_use_id(i).as_str()
            }),
            || {
                format!(
                    "{call:#?}\nthe shell {:#?}\ntool calls with its words: {:#?}",
                    shells.get(k),
                    calls
                        .iter()
                        .filter(|t| t["command"]
                            .as_str()
                            .is_some_and(|c| c.contains(step.name.split('-').next().unwrap())))
                        .collect::<Vec<_>>()
                )
            },
        );
        // After its step: the nohup server's effects, and git's own: `git commit` (git 2.47)
        // starts `git maintenance run --auto --detach`, whose detached child reads .git/
        // after the step's shell exited (seen in this session, racing the shell's exit). A
        // real leftover, so `outlived`; nothing else of any step may come after it.
        let after: Vec<String> = call
            .map(|t| after_step_effects(cap, &t["id"]))
            .unwrap_or_default();
        let by_git_maintenance = |pid: i64| {
            cap.processes().iter().any(|p| {
                p["pid"] == pid
                    && p["argv"].as_array().is_some_and(|a| {
                        a.len() >= 3 && a[1] == "maintenance" && a.iter().any(|w| w == "--detach")
                    })
            })
        };
        let server_step = matches!(step.name, "leftover-server" | "delayed-writer");
        c.check(
            &format!(
                "step {i} `{}`: {}",
                step.name,
                if server_step {
                    "acted after it ended (its background process)"
                } else {
                    "nothing after it ended but git's detached maintenance"
                }
            ),
            call.is_some_and(|t| {
                let n = t["after_step"].as_u64().unwrap_or(u64::MAX);
                let pids = after_step_pids(cap, &t["id"]);
                if server_step {
                    n >= 1 && n as usize >= after.len()
                } else {
                    pids.iter().all(|&p| by_git_maintenance(p)) && (n == 0) == pids.is_empty()
                }
            }),
            || format!("{call:#?}\nits effects after it: {after:#?}"),
        );
        ids.push(call.map(|t| t["id"].as_str().unwrap_or("").parse::<u64>().unwrap_or(0)));
    }
    c.check(
        "the scripted steps' ids are in the script's order",
        ids.iter().all(Option::is_some) && ids.windows(2).all(|w| w[0] < w[1]),
        || format!("{ids:?}"),
    );

    // Their effects, attributed to them.
    let key = s.home.join(".ssh/id_rsa").display().to_string();
    let credential = id_of("credential");
    c.check(
        "the credential read is under the credential step (violation, cat, the file entry)",
        credential.is_some()
            && cap.violations("credential").iter().any(|v| {
                v["summary"].as_str().unwrap_or("").contains(&key)
                    && Some(&v["tool_call"]) == credential.as_ref()
            })
            && cap
                .execs(&["cat", &key])
                .iter()
                .all(|p| Some(&p["tool_call"]) == credential.as_ref())
            && r["files"].as_array().unwrap().iter().any(|f| {
                f["path"] == key.as_str()
                    && f["op"] == "read"
                    && Some(&f["tool_call"]) == credential.as_ref()
            }),
        || format!("step {credential:?}; {:#?}", cap.violations("credential")),
    );
    let bashrc = s.home.join(".bashrc").display().to_string();
    let bashrc_step = id_of("bashrc");
    c.check(
        "the .bashrc append is under the bashrc step (violation and file entry)",
        bashrc_step.is_some()
            && cap.violations("persistence").iter().any(|v| {
                v["summary"].as_str().unwrap_or("").contains(&bashrc)
                    && Some(&v["tool_call"]) == bashrc_step.as_ref()
            })
            && r["files"].as_array().unwrap().iter().any(|f| {
                f["path"] == bashrc.as_str()
                    && f["op"] != "read"
                    && Some(&f["tool_call"]) == bashrc_step.as_ref()
            }),
        || format!("step {bashrc_step:?}; {:#?}", cap.violations("persistence")),
    );
    let unshare = id_of("unshare");
    let outside: Vec<&Value> = cap.violations("outside");
    c.check(
        "the namespace step's outside findings and its connect are under it",
        unshare.is_some()
            && !outside.is_empty()
            && outside
                .iter()
                .all(|v| Some(&v["tool_call"]) == unshare.as_ref())
            && r["network"]
                .as_array()
                .unwrap()
                .iter()
                .any(|n| n["result"] == "ENETUNREACH" && Some(&n["tool_call"]) == unshare.as_ref()),
        || format!("step {unshare:?}; {outside:#?}"),
    );

    // The agent's own Write/Edit: in its own process (null), each declared by its tool use.
    let files = r["files"].as_array().unwrap();
    for (name, path) in [
        ("write-notes", s.proj.join("NOTES.md")),
        ("edit-notes", s.proj.join("NOTES.md")),
        ("write-profile", s.home.join(".profile")),
    ] {
        let by = tool_use_id(s.step(name));
        let path = path.display().to_string();
        let entry = files.iter().find(|f| f["declared_by"] == by.as_str());
        c.check(
            &format!("the agent's {name} is its own write of {path}, declared by {by}"),
            entry.is_some_and(|f| {
                f["pid"] == agent
                    && f["tool_call"].is_null()
                    && f["declared"] == true
                    && (f["path"] == path.as_str() || f["new_path"] == path.as_str())
            }),
            || {
                format!(
                    "{entry:#?}\nthe agent's entries there: {:#?}",
                    files
                        .iter()
                        .filter(|f| f["pid"] == agent
                            && (f["path"] == path.as_str() || f["new_path"] == path.as_str()))
                        .collect::<Vec<_>>()
                )
            },
        );
    }
    let profile = s.home.join(".profile").display().to_string();
    c.check(
        "the agent's ~/.profile persistence finding is the agent's own (tool_call null)",
        cap.violations("persistence").iter().any(|v| {
            v["summary"].as_str().unwrap_or("").contains(&profile) && v["tool_call"].is_null()
        }),
        || format!("{:#?}", cap.violations("persistence")),
    );

    // The nohup server: its step's, outlived, and acting after its step when it answers the
    // later fetch-notes request (it reads NOTES.md only then).
    let port = s.leftover_port.to_string();
    let server = cap.execs(&["python3", "-m", "http.server", &port, "--bind", "127.0.0.1"]);
    let leftover = id_of("leftover-server");
    let notes = s.proj.join("NOTES.md").display().to_string();
    c.check(
        "the nohup server is its step's, and reads NOTES.md after its step (the fetch-notes request)",
        leftover.is_some()
            && server.len() == 1
            && server[0]["tool_call"] == *leftover.as_ref().unwrap()
            && files.iter().any(|f| {
                f["pid"] == server[0]["pid"]
                    && f["path"] == notes.as_str()
                    && f["op"] == "read"
                    && f["tool_call"] == *leftover.as_ref().unwrap()
                    && f["after_step"] == true
            }),
        || {
            format!(
                "step {leftover:?}; server {server:#?}\nits file entries: {:#?}",
                server.first().map(|p| files
                    .iter()
                    .filter(|f| f["pid"] == p["pid"])
                    .collect::<Vec<_>>())
            )
        },
    );
    // The delayed writer: late.txt is written by its step's background process, after the
    // step ended (once the agent's later Write made ~/.profile), and the step is outlived.
    let writer = id_of("delayed-writer");
    let late = s.proj.join("late.txt").display().to_string();
    let writer_tree: std::collections::BTreeSet<i64> = writer
        .as_ref()
        .and_then(|id| calls.iter().find(|t| t["id"] == *id))
        .and_then(|t| t["pid"].as_i64())
        .map(|p| cap.tree(p))
        .unwrap_or_default();
    c.check(
        "the delayed writer's late.txt is its step's, by its background process, after the step ended",
        writer.is_some()
            && files.iter().any(|f| {
                f["path"] == late.as_str()
                    && matches!(f["op"].as_str(), Some("create" | "write"))
                    && f["tool_call"] == *writer.as_ref().unwrap()
                    && f["after_step"] == true
                    && f["pid"].as_i64().is_some_and(|p| writer_tree.contains(&p))
            }),
        || {
            format!(
                "step {writer:?} tree {writer_tree:?}; entries at late.txt {:#?}",
                files
                    .iter()
                    .filter(|f| f["path"] == late.as_str())
                    .collect::<Vec<_>>()
            )
        },
    );
    let outlived = cap.violations("outlived");
    c.check(
        "the delayed writer's step is outlived",
        outlived
            .iter()
            .any(|v| writer.is_some() && Some(&v["tool_call"]) == writer.as_ref()),
        || format!("step {writer:?}; {outlived:#?}"),
    );
    c.check(
        "the nohup server's step is outlived",
        outlived
            .iter()
            .any(|v| Some(&v["tool_call"]) == leftover.as_ref()),
        || format!("step {leftover:?}; {outlived:#?}"),
    );

    // No false undeclared: what the transcript does not declare is the CLI's housekeeping
    // (not a tool-call shell), and no finding is under it.
    let undeclared: Vec<&Value> = t["undeclared"]
        .as_array()
        .map(|u| {
            u.iter()
                .filter_map(|id| calls.iter().find(|t| t["id"] == *id))
                .collect()
        })
        .unwrap_or_default();
    c.check(
        "every undeclared tool call is the CLI's housekeeping, not a tool-call shell",
        t["undeclared"].is_array()
            && undeclared.len() == t["undeclared"].as_array().unwrap().len()
            && undeclared.iter().all(|t| !is_tool_shell(&t["argv"])),
        || format!("{undeclared:#?}"),
    );
    c.check(
        "the clean session has no undeclared finding",
        cap.violations("undeclared").is_empty(),
        || format!("{:#?}", cap.violations("undeclared")),
    );
    c.check(
        "every declared tool call is a tool-call shell; every tool call is declared or not",
        calls.iter().all(|t| match t["declared"].as_bool() {
            Some(true) => is_tool_shell(&t["argv"]),
            Some(false) => true,
            None => false,
        }),
        || format!("{calls:#?}"),
    );
    for list in ["processes", "files", "network", "violations"] {
        c.check(
            &format!("every {list} entry names its tool call"),
            r[list]
                .as_array()
                .is_some_and(|l| l.iter().all(|e| e.get("tool_call").is_some())),
            || {
                format!(
                    "the first without: {:#?}",
                    r[list]
                        .as_array()
                        .and_then(|l| l.iter().find(|e| e.get("tool_call").is_none()))
                )
            },
        );
    }
    print_tool_calls(s, cap);
}

/// The pids of the entries marked `after_step` under the tool call `id`.
fn after_step_pids(cap: &Capture, id: &Value) -> std::collections::BTreeSet<i64> {
    ["processes", "files", "network"]
        .iter()
        .flat_map(|list| cap.report[*list].as_array().into_iter().flatten())
        .filter(|e| e["tool_call"] == *id && e["after_step"] == true)
        .filter_map(|e| e["pid"].as_i64())
        .collect()
}

/// The entries marked `after_step` under the tool call `id`, one line each.
fn after_step_effects(cap: &Capture, id: &Value) -> Vec<String> {
    ["processes", "files", "network"]
        .iter()
        .flat_map(|list| {
            cap.report[*list]
                .as_array()
                .into_iter()
                .flatten()
                .map(move |e| (list, e))
        })
        .filter(|(_, e)| e["tool_call"] == *id && e["after_step"] == true)
        .map(|(list, e)| format!("{list}: pid {} {} {}", e["pid"], e["op"], e["path"]))
        .collect()
}

/// The session's tool-call table (for the closing note): the scripted steps, then the CLI's
/// housekeeping grouped by command.
fn print_tool_calls(s: &Session, cap: &Capture) {
    let empty = Vec::new();
    let calls = cap.report["tool_calls"].as_array().unwrap_or(&empty);
    eprintln!("tool calls: {}", calls.len());
    eprintln!(
        "| id | step | command | exit | declared | processes | files changed | files read | connections | violations | after step |"
    );
    eprintln!("|---|---|---|---|---|---|---|---|---|---|---|");
    let mut housekeeping: std::collections::BTreeMap<String, (usize, String)> = Default::default();
    for t in calls {
        let command: String = t["command"]
            .as_str()
            .unwrap_or("(a fork)")
            .chars()
            .take(70)
            .collect();
        let step = s
            .steps
            .iter()
            .find(|st| {
                st.command
                    .as_deref()
                    .map(|c| c.replace(SECRET, "[REDACTED]"))
                    == t["command"].as_str().map(str::to_string)
            })
            .map(|st| st.name);
        match step {
            Some(name) => eprintln!(
                "| {} | {name} | `{}` | {} | {} | {} | {} | {} | {} | {} | {} |",
                t["id"].as_str().unwrap_or("?"),
                command.replace('|', "\\|"),
                t["exit_code"],
                t["declared"],
                t["processes"],
                t["files_changed"],
                t["files_read"],
                t["connections"],
                t["violations"],
                t["after_step"]
            ),
            None => {
                let e = housekeeping.entry(command).or_default();
                e.0 += 1;
                if e.1.len() < 40 {
                    e.1 += &format!(
                        "{}{}",
                        if e.1.is_empty() { "" } else { "," },
                        t["id"].as_str().unwrap_or("?")
                    );
                }
            }
        }
    }
    eprintln!("housekeeping (not scripted), by command: count, ids:");
    for (command, (n, ids)) in &housekeeping {
        eprintln!("  {n} × `{command}` (ids {ids})");
    }
}

/// The same capture replayed with its transcript edited: the credential step's tool use (and
/// its result) dropped, and a Bash tool use added that never ran. The dropped step is
/// `undeclared` with its credential read an `undeclared` finding; the added one `unobserved`.
fn edited_transcript_checks(c: &mut Checks, s: &Session, cap: &Capture) {
    let Some(path) = cap.report["transcript"]["path"].as_str() else {
        c.check("the capture has a transcript to edit", false, String::new);
        return;
    };
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let dropped = tool_use_id(s.step("credential"));
    let mut edited: Vec<&str> = text.lines().filter(|l| !l.contains(&dropped)).collect();
    let forged = serde_json::json!({
        "type": "assistant",
        "timestamp": cap.report["started_at"],
        "message": {"role": "assistant", "content": [{
            "type": "tool_use", "id": "toolu_forged", "name": "Bash",
            "input": {"command": "rm -rf /tmp/never-ran", "description": "never ran"}
        }]}
    })
    .to_string();
    edited.push(&forged);
    let edited_path = s.root.join("edited-transcript.jsonl");
    std::fs::write(&edited_path, edited.join("\n") + "\n").unwrap();
    let replayed_path = s.root.join("replayed-edited.json");
    let out = command()
        .args(["replay", "--headless", "--report"])
        .arg(&replayed_path)
        .arg(format!("--transcript={}", edited_path.display()))
        .args(["--fail-on", "undeclared"])
        .arg(s.root.join("capture/log.jsonl"))
        .output()
        .expect("start sandbox-watch replay");
    let replayed: Value = std::fs::read_to_string(&replayed_path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    let t = &replayed["transcript"];
    let credential = tool_call_of(cap, s, "credential").map(|t| t["id"].clone());
    let key = s.home.join(".ssh/id_rsa").display().to_string();
    let undeclared_findings: Vec<&Value> = replayed["violations"]
        .as_array()
        .map(|v| v.iter().filter(|v| v["kind"] == "undeclared").collect())
        .unwrap_or_default();
    c.check(
        "edited transcript: the dropped credential step is undeclared, its key read an undeclared finding under it, and that is the only undeclared finding",
        credential.as_ref().is_some_and(|id| {
            t["undeclared"].as_array().is_some_and(|u| u.contains(id))
                && replayed["tool_calls"]
                    .as_array()
                    .is_some_and(|l| l.iter().any(|tc| tc["id"] == *id && tc["declared"] == false))
                && undeclared_findings.len() == 1
                && undeclared_findings[0]["tool_call"] == *id
                && undeclared_findings[0]["summary"].as_str().unwrap_or("").contains(&key)
        }),
        || {
            format!(
                "exit {:?} {}\nstep {credential:?}\ntranscript {t:#}\nundeclared findings {undeclared_findings:#?}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )
        },
    );
    c.check(
        "edited transcript: the added Bash tool use is the one unobserved declaration",
        t["unobserved"].as_array().is_some_and(|u| {
            u.len() == 1
                && u[0]["id"] == "toolu_forged"
                && u[0]["command"] == "rm -rf /tmp/never-ran"
        }),
        || format!("{t:#}"),
    );
    c.check(
        "edited transcript: every other scripted step is still declared",
        s.bash_steps()
            .iter()
            .filter(|&&i| s.steps[i].name != "credential")
            .all(|&i| {
                tool_call_of(cap, s, s.steps[i].name).is_some_and(|live| {
                    replayed["tool_calls"].as_array().is_some_and(|l| {
                        l.iter()
                            .any(|tc| tc["id"] == live["id"] && tc["declared"] == true)
                    })
                })
            }),
        || format!("{:#?}", replayed["tool_calls"]),
    );
    c.check(
        "edited transcript: the replay with --fail-on undeclared exits 3",
        out.status.code() == Some(3),
        || format!("{:?} {}", out.status, String::from_utf8_lossy(&out.stderr)),
    );
}

fn timed<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let t = Instant::now();
    let v = f();
    eprintln!("{what}: {:.1} s", t.elapsed().as_secs_f64());
    v
}

#[test]
fn claude_code_print_mode_matches_strace_and_the_model_servers_record() {
    require_root();
    let Some(cli) = cli(Agent::Claude) else {
        return;
    };
    let started = Instant::now();
    let port = free_port();

    // Ground truth first: the same session under strace -f, without sandbox-watch.
    let truth_session = Session::new(Agent::Claude, port);
    let truth = timed("strace run", || strace_print(&cli, &truth_session));
    assert_the_session_ran(&truth_session, &truth.model);
    let truth_shells = truth.tool_call_shells();
    let bash = truth_session.bash_steps();
    assert_eq!(
        truth_shells.len(),
        bash.len(),
        "strace saw one tool-call shell per Bash step"
    );

    let s = Session::new(Agent::Claude, port);
    let cap = timed("sandbox-watch run", || watch_print(&cli, &s));
    assert_the_session_ran(&s, &cap.model);

    let mut c = Checks::default();
    session_checks(&mut c, &s, &cap);
    let t = Instant::now();
    tool_call_checks(&mut c, &s, &cap);
    edited_transcript_checks(&mut c, &s, &cap);
    eprintln!(
        "tool-call and transcript checks: {:.1} s",
        t.elapsed().as_secs_f64()
    );

    // Against strace: each step's programs (argv as the kernel gave them, and how each ended),
    // its connects, the files the session changed, who read the key.
    let shells = cap.tool_call_shells();
    for (k, &i) in bash.iter().enumerate() {
        let name = s.steps[i].name;
        let want = truth.step_execs(&truth_session, truth_shells[k]);
        let got = shells
            .get(k)
            .map(|p| cap.step_execs(&s, p))
            .unwrap_or_default();
        c.same(
            &format!("step {i} `{name}`: its programs and exits, as strace saw them"),
            &want,
            &got,
        );
        let want = truth.step_connects(&truth_session, truth_shells[k]);
        let got = shells
            .get(k)
            .map(|p| cap.step_connects(&s, p))
            .unwrap_or_default();
        c.same(
            &format!("step {i} `{name}`: its connects, as strace saw them"),
            &want,
            &got,
        );
    }
    c.same(
        "the files the session changed in its project and home, as strace saw them",
        &truth.file_effects(&truth_session),
        &cap.file_effects(&s),
    );
    let key = s.home.join(".ssh/id_rsa");
    let truth_readers = truth.readers(&truth_session.home.join(".ssh/id_rsa"));
    let readers = cap
        .violations("credential")
        .iter()
        .filter(|v| {
            v["summary"]
                .as_str()
                .unwrap_or("")
                .contains(key.to_str().unwrap())
        })
        .map(|v| cap.program(v["pid"].as_i64().unwrap()))
        .collect();
    c.same(
        "the programs that read ~/.ssh/id_rsa, as strace saw them",
        &truth_readers,
        &readers,
    );
    // The CLI's quoting of the token step, from strace: what exact redaction must keep.
    let cmd = s.steps[s.step("token")].input["command"].as_str().unwrap();
    let k = bash
        .iter()
        .position(|&i| s.steps[i].name == "token")
        .unwrap();
    c.check(
        "strace confirms how the CLI quotes a command in its tool-call shell",
        truth
            .shell_command(truth_shells[k])
            .contains(&quoted_by_the_cli(cmd)),
        || truth.shell_command(truth_shells[k]),
    );

    eprintln!("summary:\n{}", cap.summary);
    eprintln!(
        "real agent, print mode: {:.1} s in all (strace {:.1} s, sandbox-watch {:.1} s)",
        started.elapsed().as_secs_f64(),
        truth.seconds,
        cap.seconds
    );
    c.finish("print mode");
}

#[test]
fn claude_code_interactive_ui_in_a_terminal() {
    require_root();
    let Some(cli) = cli(Agent::Claude) else {
        return;
    };
    let s = Session::new(Agent::Claude, free_port());
    let cap = timed("interactive run", || watch_interactive(&cli, &s));
    assert_eq!(
        cap.status,
        Some(0),
        "sandbox-watch's status; the screen:\n{}",
        cap.outputs[0].1
    );
    assert_the_session_ran(&s, &cap.model);
    let mut c = Checks::default();
    session_checks(&mut c, &s, &cap);
    environ_checks(&mut c, &cap);
    eprintln!("summary:\n{}", cap.summary);
    c.finish("interactive UI");
}

#[test]
fn claude_code_inside_the_tui() {
    require_root();
    let Some(cli) = cli(Agent::Claude) else {
        return;
    };
    let s = Session::new(Agent::Claude, free_port());
    let run = timed("TUI run", || watch_tui(&cli, &s));
    let cap = &run.capture;
    assert_the_session_ran(&s, &cap.model);
    let mut c = Checks::default();
    c.check(
        "the report is written when the capture ends, before q",
        run.report_before_q,
        || format!("the screen at the end:\n{}", run.screen_at_end),
    );
    c.check(
        "sandbox-watch exits with the agent's status (0)",
        cap.status == Some(0),
        || format!("{:?}", cap.status),
    );
    let key = s.home.join(".ssh/id_rsa").display().to_string();
    c.check(
        "the Alerts view's first screen names ~/.ssh/id_rsa",
        run.alerts_screen.contains(".ssh/id_rsa"),
        || run.alerts_screen.clone(),
    );
    c.check(
        "the report has the credential read",
        cap.violations("credential")
            .iter()
            .any(|v| v["summary"].as_str().unwrap_or("").contains(&key)),
        || format!("{:#?}", cap.violations("credential")),
    );
    key_first_checks(&mut c, cap, &key);
    environ_checks(&mut c, cap);
    eprintln!(
        "screen at the end:\n{}\nAlerts:\n{}",
        run.screen_at_end, run.alerts_screen
    );
    c.finish("inside the TUI");
}

/// The exit code Codex reported for each step (`Process exited with code N` in its tool output).
fn codex_exit_codes(model: &Value) -> std::collections::BTreeMap<i64, i64> {
    model["tool_results"]
        .as_array()
        .expect("tool_results")
        .iter()
        .filter_map(|r| {
            let text = r["content"].as_str()?;
            let code = text.split("Process exited with code ").nth(1)?;
            let code: String = code.chars().take_while(|c| c.is_ascii_digit()).collect();
            Some((r["step"].as_i64()?, code.parse().ok()?))
        })
        .collect()
}

#[test]
fn codex_in_its_own_sandbox() {
    require_root();
    let Some(cli) = cli(Agent::Codex) else { return };
    let s = Session::new(Agent::Codex, free_port());
    let cap = timed("codex run", || watch_codex(&cli, &s));
    let model = &cap.model;
    assert_eq!(
        model["finished"], true,
        "the session did not finish: {model:#}\n{:#?}",
        cap.outputs
    );
    let codes = codex_exit_codes(model);
    assert_eq!(
        codes.len(),
        s.steps.len(),
        "an exit code per step: {model:#}"
    );
    let code = |name: &str| codes[&(s.step(name) as i64)];
    assert_eq!(code("credential"), 0, "{model:#}");
    assert_eq!(code("failing"), 2, "{model:#}");
    assert_eq!(code("token"), 7, "no network in Codex's sandbox: {model:#}");

    let r = &cap.report;
    let agent = cap.agent_pid();
    let mut c = Checks::default();
    c.check(
        "the agent is Codex, in the test's network namespace",
        cap.program(agent) == "codex" && r["agent"]["netns"] == own_netns(),
        || format!("agent {:#}, program {}", r["agent"], cap.program(agent)),
    );
    c.check("nothing was lost", r["coverage"]["lost"] == 0, || {
        format!("{:#}", r["coverage"])
    });
    // Each step: `/bin/bash -c COMMAND` in Codex's sandbox, with the exit code Codex reported,
    // in a network namespace that is not the agent's (bubblewrap's --unshare-net): outside, by
    // the README's definition.
    let mut sandboxed = std::collections::BTreeSet::new();
    for (i, step) in s.steps.iter().enumerate() {
        let command = step
            .command
            .as_deref()
            .unwrap()
            .replace(SECRET, "[REDACTED]");
        let shells = cap.execs(&["/bin/bash", "-c", &command]);
        let want = codes[&(i as i64)];
        // bash execs the command's last program itself: the pid's last exec has the status.
        let last = shells.first().and_then(|sh| {
            cap.processes()
                .iter()
                .filter(|p| p["pid"] == sh["pid"] && p["fork_only"] != true)
                .max_by_key(|p| p["started_at"].as_str().unwrap_or("").to_string())
        });
        c.check(
            &format!(
                "step {i} `{}`: `bash -c` ran once and ended with {want}, as Codex reported",
                step.name
            ),
            shells.len() == 1 && last.is_some_and(|p| p["exit_code"] == want),
            || format!("{shells:#?}\nits last exec: {last:#?}"),
        );
        if let Some(sh) = shells.first() {
            c.check(
                &format!(
                    "step {i} `{}` ran in the sandbox's own network namespace, outside",
                    step.name
                ),
                sh["netns"] != r["agent"]["netns"] && sh["verdict"] == "outside",
                || format!("{sh:#}"),
            );
            sandboxed.extend(cap.tree(sh["pid"].as_i64().unwrap()));
        }
    }
    let key = s.home.join(".ssh/id_rsa").display().to_string();
    let cat = cap.execs(&["cat", &key]);
    c.check(
        "the credential read in the sandbox is a credential violation naming ~/.ssh/id_rsa, by cat",
        cat.len() == 1
            && cap.violations("credential").iter().any(|v| {
                v["pid"] == cat[0]["pid"] && v["summary"].as_str().unwrap_or("").contains(&key)
            }),
        || format!("cat {cat:#?}\n{:#?}", cap.violations("credential")),
    );
    key_first_checks(&mut c, &cap, &key);
    let bashrc = s.home.join(".bashrc").display().to_string();
    let files = r["files"].as_array().unwrap();
    let at_bashrc: Vec<&Value> = files
        .iter()
        .filter(|f| f["path"] == bashrc.as_str() && f["op"] != "read")
        .collect();
    // Codex's workspace-write policy lets the sandbox write /tmp: with the tree (and so the
    // session's HOME) under /tmp the append goes through, elsewhere it is refused. Either way
    // the report must say what the kernel did, by the sandboxed process.
    let refused = code("bashrc") != 0;
    c.check(
        "the .bashrc append is in the report as the sandbox decided it: refused (read-only \
         HOME) with its error, or written when HOME is under /tmp",
        at_bashrc.iter().any(|f| {
            f["result"].is_string() == refused
                && f["pid"].as_i64().is_some_and(|p| sandboxed.contains(&p))
        }),
        || format!("exit {}; entries {at_bashrc:#?}", code("bashrc")),
    );
    c.check(
        "the persistence write, refused or not, is a finding naming ~/.bashrc",
        cap.violations("persistence")
            .iter()
            .any(|v| v["summary"].as_str().unwrap_or("").contains(&bashrc)),
        || format!("{:#?}", cap.violations("persistence")),
    );
    let network = r["network"].as_array().unwrap();
    c.check(
        "every inet connect is to loopback, and there is no DNS question",
        network.iter().all(|n| {
            n["op"] != "dns"
                && (n["op"] != "connect" || n["proto"] == "unix" || n["addr"] == "127.0.0.1")
        }),
        || format!("{network:#?}"),
    );
    c.check(
        "the agent connected to the model server",
        network
            .iter()
            .any(|n| n["pid"] == agent && n["op"] == "connect" && n["port"] == cap.model_port),
        || format!("model port {}", cap.model_port),
    );
    let url = format!("http://127.0.0.1:{}/", s.leftover_port);
    let curl_argv = [
        "curl",
        "-sS",
        "--max-time",
        "2",
        "-o",
        "/dev/null",
        "-H",
        "Authorization: Bearer [REDACTED]",
        &url,
    ];
    let curl = cap.execs(&curl_argv);
    c.check(
        "exact redaction: curl's argv has only the token replaced",
        curl.len() == 1,
        || {
            format!(
                "{:#?}",
                cap.processes()
                    .iter()
                    .filter(|p| p["argv"][0] == "curl")
                    .map(|p| &p["argv"])
                    .collect::<Vec<_>>()
            )
        },
    );
    // Codex's seccomp filter refuses the sandboxed curl its socket: nothing to connect (socket
    // creation is not watched), and no connect from inside the sandbox got anywhere.
    c.check(
        "no connect from inside the sandbox succeeded",
        network.iter().all(|n| {
            n["op"] != "connect"
                || n["proto"] == "unix"
                || !n["pid"].as_i64().is_some_and(|p| sandboxed.contains(&p))
                || n["result"] != "ok"
        }),
        || format!("{network:#?}"),
    );
    // The sandbox keeps .git read-only: the commit's index.lock is refused, and reported.
    let lock = s.proj.join(".git/index.lock").display().to_string();
    c.check(
        "the sandbox refused git's .git/index.lock (EROFS), and the report has it",
        code("edit-commit") == 128
            && files
                .iter()
                .any(|f| f["path"] == lock.as_str() && f["result"] == "EROFS"),
        || {
            format!(
                "exit {}; {:#?}",
                code("edit-commit"),
                files
                    .iter()
                    .filter(|f| f["path"].as_str().is_some_and(|p| p.contains("index.lock")))
                    .collect::<Vec<_>>()
            )
        },
    );
    for (name, text) in &cap.outputs {
        c.check(
            &format!("the token is absent from {name}"),
            !text.contains(SECRET),
            || {
                let i = text.find(SECRET).unwrap();
                format!(
                    "…{}…",
                    &text[i.saturating_sub(80)..(i + SECRET.len() + 20).min(text.len())]
                )
            },
        );
    }
    eprintln!("summary:\n{}", cap.summary);
    c.finish("codex");
}
