//! The real-agent harness: the unmodified Claude Code CLI at the version pinned in
//! `tests/agent/pins.json` (installed from npm by `cargo xtask setup` into `target/agents/`),
//! driven by a scripted model server on loopback (`tests/agent/model_server.py`: the Anthropic
//! Messages API with SSE streaming, one tool call a turn) through a realistic session, with the
//! session's ground truth: the model server's own record of every tool result, and `strace -f`
//! of the same session run separately (`tests/agent/strace_truth.py`).
//!
//! The CLI runs offline: `ANTHROPIC_BASE_URL` is the model server, the API key is fake, and
//! these turn off everything else it would reach for (found by tracing its connects and DNS
//! questions): `DISABLE_AUTOUPDATER` (else the interactive UI runs `npm install --global` as
//! root), `DISABLE_TELEMETRY`, `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC` (telemetry, the
//! `HEAD /api/hello` check), `CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL` (the
//! interactive UI's `git clone` of the plugin marketplace from github.com over ssh and https),
//! `DISABLE_INSTALLATION_CHECKS`. `IS_SANDBOX=1` lets `--dangerously-skip-permissions` run as
//! root. HOME is a throwaway directory with a fake SSH key, a `.bashrc` and a `.claude.json` that
//! says onboarding, the folder trust dialog and the custom API key were already answered.
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use regex::Regex;
use serde_json::{Value, json};

use crate::tmux::Tmux;

/// A token planted in one step's argv (curl's Authorization header): no output may hold it.
pub const SECRET: &str =
    "sk-ant-api03-PLANTEDsecretPLANTEDsecret0123456789abcdefABCDEF-0123456789AA";
const API_KEY: &str = "sk-ant-scripted-model-server-fake-key";
pub const PROMPT: &str = "Run the scripted session.";
const MODEL_WAIT: Duration = Duration::from_secs(150);

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn agent_file(name: &str) -> PathBuf {
    manifest().join("agent").join(name)
}

fn agents_dir() -> PathBuf {
    std::env::var_os("SW_AGENTS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest().join("../target/agents"))
}

/// The agent CLIs the tests drive.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Agent {
    /// Claude Code (`@anthropic-ai/claude-code`), Anthropic Messages API.
    Claude,
    /// Codex (`@openai/codex`, Apache-2.0), OpenAI Responses API through a custom provider,
    /// its tool calls in its own sandbox (bubblewrap: new user, pid, mount and net namespaces).
    Codex,
}

impl Agent {
    fn pin(self) -> &'static str {
        match self {
            Agent::Claude => "claude-code",
            Agent::Codex => "codex",
        }
    }

    /// The file name of the CLI's executable.
    pub fn exe(self) -> &'static str {
        match self {
            Agent::Claude => "claude",
            Agent::Codex => "codex",
        }
    }
}

/// The pinned agent CLI.
pub struct Cli {
    pub agent: Agent,
    pub bin: PathBuf,
    pub version: String,
}

/// The pinned CLI; `None`, with the reason printed, only when `cargo xtask setup` found npm's
/// registry unreachable, and not under CI (`CI` set, as CI runners do): there a missing CLI
/// fails the test, which would otherwise pass without running anything. Not installed at all
/// is a failure that says what to run.
pub fn cli(agent: Agent) -> Option<Cli> {
    let pins: Value = serde_json::from_str(include_str!("../agent/pins.json")).unwrap();
    let pin = &pins[agent.pin()];
    let dir = agents_dir().join(agent.pin());
    if let Ok(why) = std::fs::read_to_string(dir.join("unavailable")) {
        let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
        assert!(
            !ci,
            "CI is set and the agent CLI is not installed: {}",
            why.trim()
        );
        eprintln!("SKIPPED: {}", why.trim());
        return None;
    }
    let version = pin["version"].as_str().unwrap().to_string();
    let want = format!("{}@{version}", pin["package"].as_str().unwrap());
    let bin = dir.join(pin["bin"].as_str().unwrap());
    let stamp = std::fs::read_to_string(dir.join("installed")).unwrap_or_default();
    assert!(
        bin.exists() && stamp.trim() == want,
        "{want} is not installed in {}: run `cargo xtask setup` (it installs it from npm)",
        dir.display()
    );
    Some(Cli {
        agent,
        bin,
        version,
    })
}

/// One scripted turn: the tool call the model server answers with.
pub struct Step {
    pub name: &'static str,
    pub tool: &'static str,
    pub input: Value,
    /// The shell command, for a shell step.
    pub command: Option<String>,
}

/// A throwaway world for one run of the session: `home/` (a fake SSH key, `.bashrc`,
/// `.gitconfig`, `.claude.json`), `proj/` (a git repository, the agent's working directory),
/// `wheels/` (a local wheel for the offline pip install), and the script.
pub struct Session {
    _dir: Option<tempfile::TempDir>,
    pub agent: Agent,
    pub root: PathBuf,
    pub home: PathBuf,
    pub proj: PathBuf,
    /// The port of the leftover server a step starts (the same in runs that are compared).
    pub leftover_port: u16,
    pub steps: Vec<Step>,
}

/// A loopback port nothing listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn git(dir: &Path, home: &Path, args: &[&str]) {
    let out = Command::new("git")
        .current_dir(dir)
        .env("HOME", home)
        .env_remove("GIT_DIR")
        .args(args)
        .output()
        .expect("git is installed (cargo xtask setup)");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Session {
    pub fn new(agent: Agent, leftover_port: u16) -> Session {
        // Under target/, not /tmp: Codex's sandbox lets commands write to /tmp, and the
        // session's HOME must be as read-only to it as a real one.
        let parent = manifest().join("../target/agent-sessions");
        std::fs::create_dir_all(&parent).unwrap();
        let dir = tempfile::Builder::new()
            .prefix("sw-agent-")
            .tempdir_in(&parent)
            .unwrap();
        let root = dir.path().canonicalize().unwrap();
        let home = root.join("home");
        let proj = root.join("proj");
        let ssh = home.join(".ssh");
        std::fs::create_dir_all(&ssh).unwrap();
        std::fs::create_dir_all(&proj).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&ssh, std::fs::Permissions::from_mode(0o700)).unwrap();
        let key = ssh.join("id_rsa");
        std::fs::write(
            &key,
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAAFAKEkeyFORtheREALagentTEST\n-----END OPENSSH PRIVATE KEY-----\n",
        )
        .unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(home.join(".bashrc"), "# the session's .bashrc\n").unwrap();
        std::fs::write(
            home.join(".gitconfig"),
            "[user]\n\tname = Scripted Agent\n\temail = agent@example.invalid\n[init]\n\tdefaultBranch = main\n",
        )
        .unwrap();
        // Onboarding, the folder trust dialog, the bypass-permissions warning and the custom
        // API key question already answered, so the interactive UI goes straight to its prompt.
        let claude_json = json!({
            "hasCompletedOnboarding": true,
            "theme": "dark",
            "bypassPermissionsModeAccepted": true,
            "customApiKeyResponses": {"approved": [&API_KEY[API_KEY.len() - 20..]], "rejected": []},
            "projects": {proj.to_str().unwrap(): {
                "hasTrustDialogAccepted": true,
                "hasCompletedProjectOnboarding": true
            }}
        });
        std::fs::write(home.join(".claude.json"), claude_json.to_string()).unwrap();

        std::fs::write(proj.join("greeting.txt"), "hello\n").unwrap();
        std::fs::write(proj.join("obsolete.txt"), "no longer needed\n").unwrap();
        std::fs::write(proj.join("README.md"), "# A project\n").unwrap();
        git(&proj, &home, &["init", "-q"]);
        git(&proj, &home, &["add", "."]);
        git(&proj, &home, &["commit", "-qm", "Start"]);

        let wheel = Command::new("python3")
            .arg(agent_file("make_wheel.py"))
            .arg(root.join("wheels"))
            .output()
            .expect("python3 is installed (cargo xtask setup)");
        assert!(
            wheel.status.success(),
            "make_wheel.py: {}",
            String::from_utf8_lossy(&wheel.stderr)
        );

        std::fs::create_dir_all(home.join(".codex")).unwrap();
        let steps = match agent {
            Agent::Claude => claude_steps(&root, leftover_port),
            Agent::Codex => codex_steps(leftover_port),
        };
        let script = json!({
            "steps": steps.iter().map(|s| json!({"tool": s.tool, "input": s.input})).collect::<Vec<_>>(),
            "final": "All steps done.",
        });
        std::fs::write(root.join("script.json"), script.to_string()).unwrap();
        // SW_KEEP_AGENT_SESSIONS=1 keeps the directory (captures, strace, model log) to look at.
        let dir = if std::env::var_os("SW_KEEP_AGENT_SESSIONS").is_some() {
            eprintln!("keeping the session in {}", root.display());
            let _ = dir.keep();
            None
        } else {
            Some(dir)
        };
        Session {
            _dir: dir,
            agent,
            root,
            home,
            proj,
            leftover_port,
            steps,
        }
    }

    /// The index of the step named `name`.
    pub fn step(&self, name: &str) -> usize {
        self.steps
            .iter()
            .position(|s| s.name == name)
            .unwrap_or_else(|| panic!("no step {name}"))
    }

    /// The indexes of the shell steps, in order.
    pub fn bash_steps(&self) -> Vec<usize> {
        (0..self.steps.len())
            .filter(|&i| self.steps[i].command.is_some())
            .collect()
    }

    /// What the CLI needs to know about the model server before it starts: Codex's provider
    /// (`$CODEX_HOME/config.toml`), with the update check, analytics and plugins (which fetch
    /// from github.com) off.
    fn point_at(&self, port: u16) {
        if self.agent == Agent::Codex {
            std::fs::write(
                self.home.join(".codex/config.toml"),
                format!(
                    "model = \"scripted-model\"\nmodel_provider = \"scripted\"\ncheck_for_update_on_startup = false\n\n[analytics]\nenabled = false\n\n[features]\nplugins = false\n\n[model_providers.scripted]\nname = \"Scripted\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\nenv_key = \"SCRIPTED_API_KEY\"\nwire_api = \"responses\"\n"
                ),
            )
            .unwrap();
        }
    }

    /// The environment the CLI runs with (and nothing else from the test's).
    pub fn env(&self, port: u16) -> Vec<(&'static str, String)> {
        if self.agent == Agent::Codex {
            return vec![
                (
                    "PATH",
                    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
                ),
                ("HOME", self.home.display().to_string()),
                ("CODEX_HOME", self.home.join(".codex").display().to_string()),
                ("USER", "root".into()),
                ("LANG", "C.UTF-8".into()),
                ("SCRIPTED_API_KEY", API_KEY.into()),
            ];
        }
        vec![
            (
                "PATH",
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
            ),
            ("HOME", self.home.display().to_string()),
            ("USER", "root".into()),
            ("LANG", "C.UTF-8".into()),
            ("TERM", "xterm-256color".into()),
            ("SHELL", "/bin/bash".into()),
            ("IS_SANDBOX", "1".into()),
            ("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{port}")),
            ("ANTHROPIC_API_KEY", API_KEY.into()),
            ("DISABLE_AUTOUPDATER", "1".into()),
            ("DISABLE_TELEMETRY", "1".into()),
            ("DISABLE_ERROR_REPORTING", "1".into()),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
            (
                "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL",
                "1".into(),
            ),
            ("DISABLE_INSTALLATION_CHECKS", "1".into()),
        ]
    }

    fn env_line(&self, port: u16) -> String {
        self.env(port)
            .iter()
            .map(|(k, v)| format!("{k}={}", shell_quote(v)))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Ends what the session left running (the leftover server, anything else started in its
    /// directories), found by pid: a process whose working directory is inside the session.
    pub fn kill_leftovers(&self) {
        let me = std::process::id() as i32;
        for _ in 0..50 {
            let pids: Vec<i32> = std::fs::read_dir("/proc")
                .unwrap()
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .filter(|&pid: &i32| pid != me)
                .filter(|pid| {
                    std::fs::read_link(format!("/proc/{pid}/cwd"))
                        .is_ok_and(|cwd| cwd.starts_with(&self.root))
                })
                .collect();
            if pids.is_empty() {
                return;
            }
            for pid in pids {
                // SAFETY: kill has no memory preconditions; these are the session's processes.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Whether a process of the CLI (`…/claude`) still runs in the session.
    fn agent_running(&self) -> bool {
        std::fs::read_dir("/proc").unwrap().any(|e| {
            let Some(pid) = e
                .ok()
                .and_then(|e| e.file_name().to_str()?.parse::<i32>().ok())
            else {
                return false;
            };
            std::fs::read_link(format!("/proc/{pid}/exe"))
                .is_ok_and(|exe| exe.file_name().is_some_and(|n| n == self.agent.exe()))
                && std::fs::read_link(format!("/proc/{pid}/cwd"))
                    .is_ok_and(|cwd| cwd.starts_with(&self.root))
        })
    }

    /// Text with what differs between two runs of the session made the same: the session's
    /// directory, the CLI's random file names, the planted token (as correctly redacted).
    pub fn norm(&self, s: &str) -> String {
        static RULES: LazyLock<Vec<(Regex, &str)>> = LazyLock::new(|| {
            [
                (r"snapshot-bash-\d+-[a-z0-9]+\.sh", "snapshot-bash-N.sh"),
                (r"/tmp/claude-[0-9a-f]+-cwd", "/tmp/claude-N-cwd"),
                (r"/tmp/tmp[A-Za-z0-9_]+", "/tmp/tmpN"),
                (r"\.tmp\.\d+\.[0-9a-f]+", ".tmp.N"),
                (r"/sed[A-Za-z0-9]{6}$", "/sedN"),
            ]
            .into_iter()
            .map(|(re, to)| (Regex::new(re).unwrap(), to))
            .collect()
        });
        let mut s = s
            .replace(SECRET, "[REDACTED]")
            .replace(self.root.to_str().unwrap(), "<dir>");
        for (re, to) in RULES.iter() {
            s = re.replace_all(&s, *to).into_owned();
        }
        s
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.kill_leftovers();
    }
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Claude Code's session: each step one tool call, in this order.
fn claude_steps(root: &Path, leftover_port: u16) -> Vec<Step> {
    let proj = root.join("proj");
    let home = root.join("home");
    let bash = |name, command: String, description: &str| Step {
        name,
        tool: "Bash",
        input: json!({"command": command, "description": description}),
        command: Some(command),
    };
    let p = leftover_port;
    vec![
        bash(
            "edit-commit",
            "sed -i 's/hello/hello, world/' greeting.txt && git commit -qam 'Greet the world'".into(),
            "Edit the greeting and commit it",
        ),
        bash(
            "delete",
            "git rm -q obsolete.txt && git commit -qm 'Remove obsolete.txt'".into(),
            "Delete the obsolete file",
        ),
        Step {
            name: "write-notes",
            tool: "Write",
            input: json!({"file_path": proj.join("NOTES.md"), "content": "# Notes\n\nWritten by the agent.\n"}),
            command: None,
        },
        Step {
            name: "read-notes",
            tool: "Read",
            input: json!({"file_path": proj.join("NOTES.md")}),
            command: None,
        },
        Step {
            name: "edit-notes",
            tool: "Edit",
            input: json!({"file_path": proj.join("NOTES.md"), "old_string": "# Notes", "new_string": "# Project notes"}),
            command: None,
        },
        bash(
            "venv",
            "python3 -m venv .venv && .venv/bin/pip install -q --no-index --find-links ../wheels tinypkg".into(),
            "Make a virtual environment and install tinypkg",
        ),
        bash(
            "use-package",
            ".venv/bin/python -c 'import tinypkg; print(tinypkg.hello())'".into(),
            "Use the installed package",
        ),
        // A delayed background writer: it waits (bounded) for the agent's later Write of
        // ~/.profile, then writes late.txt, long after its own step ended.
        bash(
            "delayed-writer",
            "(n=0; until [ -e ~/.profile ] || [ $n -ge 400 ]; do sleep 0.05; n=$((n+1)); done; echo late > late.txt) > /dev/null 2>&1 &".into(),
            "Write late.txt once the profile exists",
        ),
        bash(
            "leftover-server",
            format!("nohup python3 -m http.server {p} --bind 127.0.0.1 > /dev/null 2>&1 &"),
            "Serve the project on loopback",
        ),
        bash("credential", "cat ~/.ssh/id_rsa".into(), "Show the SSH key"),
        bash(
            "bashrc",
            r#"echo 'export PATH="$HOME/.local/bin:$PATH"' >> ~/.bashrc"#.into(),
            "Add ~/.local/bin to PATH in .bashrc",
        ),
        Step {
            name: "write-profile",
            tool: "Write",
            input: json!({"file_path": home.join(".profile"), "content": "export EDITOR=vi\n"}),
            command: None,
        },
        bash(
            "unshare",
            format!("unshare -n curl -sS --max-time 2 http://127.0.0.1:{p}/; echo \"curl exit $?\""),
            "Try the server from a new network namespace",
        ),
        bash(
            "fetch-notes",
            format!("curl -s http://127.0.0.1:{p}/NOTES.md"),
            "Fetch the notes from the local server",
        ),
        bash(
            "token",
            format!(
                "curl -s -o /dev/null -w '%{{http_code}}' -H 'Authorization: Bearer {SECRET}' http://127.0.0.1:{p}/"
            ),
            "Call the local server with a token",
        ),
        bash("failing", "ls does-not-exist".into(), "List a missing file"),
    ]
}

/// Codex's session: shell steps only (its `exec_command` tool), each run in Codex's own sandbox
/// (`--sandbox workspace-write`): the workspace writable, the rest read-only, no network.
fn codex_steps(leftover_port: u16) -> Vec<Step> {
    let shell = |name, command: String| Step {
        name,
        tool: "exec_command",
        input: json!({"cmd": command}),
        command: Some(command),
    };
    let p = leftover_port;
    vec![
        shell(
            "edit-commit",
            "sed -i 's/hello/hello, world/' greeting.txt && git commit -qam 'Greet the world'"
                .into(),
        ),
        shell("delete", "rm obsolete.txt".into()),
        shell("credential", "cat ~/.ssh/id_rsa".into()),
        shell(
            "bashrc",
            r#"echo 'export PATH="$HOME/.local/bin:$PATH"' >> ~/.bashrc"#.into(),
        ),
        shell(
            "token",
            format!(
                "curl -sS --max-time 2 -o /dev/null -H 'Authorization: Bearer {SECRET}' http://127.0.0.1:{p}/"
            ),
        ),
        shell("failing", "ls does-not-exist".into()),
    ]
}

/// The scripted model server (`tests/agent/model_server.py`), for one session; ended on drop.
pub struct ModelServer {
    child: Child,
    pub port: u16,
    log: PathBuf,
}

impl ModelServer {
    pub fn start(s: &Session) -> ModelServer {
        let log = s.root.join("model-log.json");
        let port_file = s.root.join("model-port");
        let child = Command::new("python3")
            .arg(agent_file("model_server.py"))
            .arg("--script")
            .arg(s.root.join("script.json"))
            .arg("--log")
            .arg(&log)
            .arg("--port-file")
            .arg(&port_file)
            .stdin(Stdio::null())
            .spawn()
            .expect("start the model server");
        let deadline = Instant::now() + Duration::from_secs(20);
        let port = loop {
            if let Some(p) = std::fs::read_to_string(&port_file)
                .ok()
                .and_then(|p| p.trim().parse().ok())
            {
                break p;
            }
            assert!(Instant::now() < deadline, "the model server did not start");
            std::thread::sleep(Duration::from_millis(20));
        };
        s.point_at(port);
        ModelServer { child, port, log }
    }

    /// The server's record: requests, tool results, whether the final answer went out.
    pub fn log(&self) -> Value {
        std::fs::read_to_string(&self.log)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or(Value::Null)
    }

    pub fn finished(&self) -> bool {
        self.log()["finished"] == true
    }

    /// Waits until the final answer went out; false after `MODEL_WAIT`.
    pub fn wait_finished(&self) -> bool {
        let deadline = Instant::now() + MODEL_WAIT;
        while Instant::now() < deadline {
            if self.finished() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One capture of the session by sandbox-watch.
pub struct Capture {
    pub report: Value,
    /// The model server's record of the session.
    pub model: Value,
    /// Every output, by name: stdout, stderr (or the terminal's screen), log, report, summary,
    /// OCSF.
    pub outputs: Vec<(String, String)>,
    pub summary: String,
    pub status: Option<i32>,
    pub seconds: f64,
    /// The model server's port: the one place the CLI should connect to.
    pub model_port: u16,
}

impl Capture {
    fn read(
        dir: &Path,
        server: &ModelServer,
        mut outputs: Vec<(String, String)>,
        status: Option<i32>,
        seconds: f64,
    ) -> Capture {
        for f in ["log.jsonl", "report.json", "summary.md", "ocsf.jsonl"] {
            let p = dir.join(f);
            outputs.push((
                f.to_string(),
                std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
            ));
        }
        let report = serde_json::from_str(&outputs[outputs.len() - 3].1).expect("report is JSON");
        let summary = outputs[outputs.len() - 2].1.clone();
        Capture {
            report,
            model: server.log(),
            model_port: server.port,
            outputs,
            summary,
            status,
            seconds,
        }
    }

    pub fn processes(&self) -> &Vec<Value> {
        self.report["processes"].as_array().expect("processes")
    }

    pub fn agent_pid(&self) -> i64 {
        self.report["agent"]["pid"].as_i64().expect("agent.pid")
    }

    pub fn violations(&self, kind: &str) -> Vec<&Value> {
        self.report["violations"]
            .as_array()
            .expect("violations")
            .iter()
            .filter(|v| v["kind"] == kind)
            .collect()
    }

    /// Exec entries (not forks) whose argv is exactly `argv`.
    pub fn execs(&self, argv: &[&str]) -> Vec<&Value> {
        self.processes()
            .iter()
            .filter(|p| p["fork_only"] != true && p["argv"] == json!(argv))
            .collect()
    }

    /// The program a pid ran last (its latest exec's file name).
    pub fn program(&self, pid: i64) -> String {
        self.processes()
            .iter()
            .filter(|p| p["pid"] == pid && p["fork_only"] != true)
            .max_by_key(|p| p["started_at"].as_str().unwrap_or("").to_string())
            .and_then(|p| p["exe"].as_str())
            .map(|e| e.rsplit('/').next().unwrap_or(e).to_string())
            .unwrap_or_default()
    }

    /// The tool-call shells: the agent's children `/bin/bash -c "… eval '…' …"`, in order.
    pub fn tool_call_shells(&self) -> Vec<&Value> {
        let agent = self.agent_pid();
        let mut shells: Vec<&Value> = self
            .processes()
            .iter()
            .filter(|p| p["ppid"] == agent && p["fork_only"] != true && is_tool_shell(&p["argv"]))
            .collect();
        shells.sort_by_key(|p| p["started_at"].as_str().unwrap_or("").to_string());
        shells
    }

    /// The pids in the tree under `pid` (itself included).
    pub fn tree(&self, pid: i64) -> BTreeSet<i64> {
        let mut children: HashMap<i64, BTreeSet<i64>> = HashMap::new();
        for p in self.processes() {
            if let (Some(pid), Some(ppid)) = (p["pid"].as_i64(), p["ppid"].as_i64())
                && pid != ppid
            {
                children.entry(ppid).or_default().insert(pid);
            }
        }
        let mut out = BTreeSet::new();
        let mut todo = vec![pid];
        while let Some(p) = todo.pop() {
            if out.insert(p) {
                todo.extend(children.get(&p).into_iter().flatten());
            }
        }
        out
    }

    /// What ran under one tool-call shell, comparable with [`Truth::step_execs`]: one line per
    /// exec, `argv => how it ended`.
    pub fn step_execs(&self, s: &Session, shell: &Value) -> BTreeSet<String> {
        let tree = self.tree(shell["pid"].as_i64().unwrap());
        let mut by_pid: BTreeMap<i64, Vec<&Value>> = BTreeMap::new();
        for p in self.processes() {
            if p["fork_only"] != true && p["pid"].as_i64().is_some_and(|pid| tree.contains(&pid)) {
                by_pid
                    .entry(p["pid"].as_i64().unwrap())
                    .or_default()
                    .push(p);
            }
        }
        let mut out = BTreeSet::new();
        for execs in by_pid.values_mut() {
            execs.sort_by_key(|p| p["started_at"].as_str().unwrap_or("").to_string());
            for (i, p) in execs.iter().enumerate() {
                let end = if i + 1 < execs.len() {
                    "exec'd again".to_string()
                } else if p["running_at_end"] == true {
                    "running".to_string()
                } else if let Some(sig) = p["signal"].as_i64() {
                    format!("signal {sig}")
                } else {
                    format!("exit {}", p["exit_code"])
                };
                out.insert(format!("{} => {end}", s.norm(&argv_line(&p["argv"]))));
            }
        }
        out
    }

    /// Connects under one tool-call shell: `destination result`.
    pub fn step_connects(&self, s: &Session, shell: &Value) -> BTreeSet<String> {
        let tree = self.tree(shell["pid"].as_i64().unwrap());
        self.report["network"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| {
                n["op"] == "connect" && n["pid"].as_i64().is_some_and(|p| tree.contains(&p))
            })
            .map(|n| {
                let dest = match n["path"].as_str() {
                    Some(path) => path.to_string(),
                    None => format!("{}:{}", n["addr"].as_str().unwrap_or("?"), n["port"]),
                };
                let result = match n["result"].as_str().unwrap_or("?") {
                    "in_progress" => "ok",
                    "refused" => "ECONNREFUSED",
                    r => r,
                };
                s.norm(&format!("{dest} {result}"))
            })
            .collect()
    }

    /// Files the session changed in its project and home (the CLI's own state and what git
    /// and the venv keep inside `.git/` and `.venv/` left out): `write PATH`, `delete PATH`,
    /// `rename PATH -> PATH`.
    pub fn file_effects(&self, s: &Session) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for f in self.report["files"].as_array().unwrap() {
            if !f["result"].is_null() {
                continue;
            }
            let path = s.norm(f["path"].as_str().unwrap_or(""));
            let effect = match f["op"].as_str().unwrap_or("") {
                "write" | "create" => format!("write {path}"),
                "delete" => format!("delete {path}"),
                "rename" => format!(
                    "rename {path} -> {}",
                    s.norm(f["new_path"].as_str().unwrap_or(""))
                ),
                _ => continue,
            };
            if in_scope(&effect) {
                out.insert(effect);
            }
        }
        out
    }
}

fn in_scope(effect: &str) -> bool {
    effect
        .split(' ')
        .filter(|w| w.starts_with('<'))
        .any(|path| {
            (path.starts_with("<dir>/proj/") || path.starts_with("<dir>/home/"))
                && !path.starts_with("<dir>/proj/.git/")
                && !path.starts_with("<dir>/proj/.venv/")
                && !path.starts_with("<dir>/home/.claude")
        })
}

/// Whether an argv is the CLI's tool-call shell: `/bin/bash -c "… eval '…' … pwd -P >| …"`.
pub fn is_tool_shell(argv: &Value) -> bool {
    let a: Vec<&str> = argv
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    a.len() >= 3
        && a[0] == "/bin/bash"
        && a[1] == "-c"
        && a[2].contains(" eval ")
        && a[2].contains("pwd -P >|")
}

fn argv_line(argv: &Value) -> String {
    argv.as_array()
        .map(|a| {
            a.iter()
                .map(|x| x.as_str().unwrap_or("?"))
                .collect::<Vec<_>>()
                .join(" \u{2423} ")
        })
        .unwrap_or_default()
}

fn sandbox_watch_args(dir: &Path) -> Vec<String> {
    let mut args = vec![
        "run".to_string(),
        "--headless".into(),
        "--linger".into(),
        "1".into(),
    ];
    for (flag, file) in [
        ("--report", "report.json"),
        ("--log", "log.jsonl"),
        ("--summary", "summary.md"),
        ("--ocsf", "ocsf.jsonl"),
    ] {
        args.push(flag.into());
        args.push(dir.join(file).display().to_string());
    }
    args
}

/// The CLI behind `timeout` (a launcher: the agent is still the CLI), so a stuck session ends;
/// `--foreground` keeps the interactive UI in the terminal's foreground process group.
fn agent_argv(cli: &Cli, print: bool) -> Vec<String> {
    let mut argv = vec!["timeout".to_string()];
    if !print {
        argv.push("--foreground".into());
    }
    argv.extend([
        "-k".into(),
        "5".into(),
        "170".into(),
        cli.bin.display().to_string(),
    ]);
    if print {
        argv.extend(["-p".into(), PROMPT.into()]);
    }
    argv.push("--dangerously-skip-permissions".into());
    argv
}

fn outputs_of(out: &Output) -> Vec<(String, String)> {
    vec![
        (
            "stdout".into(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        ),
        (
            "stderr".into(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ),
    ]
}

/// Codex under `sandbox-watch run --headless`: `codex exec --sandbox workspace-write PROMPT`,
/// its tool calls in its own sandbox.
pub fn watch_codex(cli: &Cli, s: &Session) -> Capture {
    let server = ModelServer::start(s);
    let out_dir = s.root.join("capture");
    std::fs::create_dir_all(&out_dir).unwrap();
    let started = Instant::now();
    let mut cmd = crate::command();
    cmd.env_clear()
        .envs(s.env(server.port))
        .current_dir(&s.proj)
        .args(sandbox_watch_args(&out_dir))
        .args(["--", "timeout", "-k", "5", "170"])
        .arg(&cli.bin)
        .args(["exec", "--sandbox", "workspace-write", PROMPT])
        .stdin(Stdio::null());
    let out = cmd.output().expect("start sandbox-watch");
    let seconds = started.elapsed().as_secs_f64();
    s.kill_leftovers();
    Capture::read(
        &out_dir,
        &server,
        outputs_of(&out),
        out.status.code(),
        seconds,
    )
}

/// Print mode under `sandbox-watch run --headless --transcript auto`: `claude -p PROMPT
/// --dangerously-skip-permissions`.
pub fn watch_print(cli: &Cli, s: &Session) -> Capture {
    let server = ModelServer::start(s);
    let out_dir = s.root.join("capture");
    std::fs::create_dir_all(&out_dir).unwrap();
    let started = Instant::now();
    let mut cmd = crate::command();
    cmd.env_clear()
        .envs(s.env(server.port))
        .current_dir(&s.proj)
        .args(sandbox_watch_args(&out_dir))
        // The CLI's own session log, found among the files it wrote, against its tool calls.
        .args(["--transcript", "auto"])
        .arg("--")
        .args(agent_argv(cli, true))
        .stdin(Stdio::null());
    let out = cmd.output().expect("start sandbox-watch");
    let seconds = started.elapsed().as_secs_f64();
    s.kill_leftovers();
    Capture::read(
        &out_dir,
        &server,
        outputs_of(&out),
        out.status.code(),
        seconds,
    )
}

/// The interactive UI in a tmux terminal under `sandbox-watch run --headless`: the prompt typed,
/// the session's end seen in the model server's record, then `/exit` typed.
pub fn watch_interactive(cli: &Cli, s: &Session) -> Capture {
    let server = ModelServer::start(s);
    let out_dir = s.root.join("capture");
    std::fs::create_dir_all(&out_dir).unwrap();
    let mut line = vec![crate::bin().display().to_string()];
    line.extend(sandbox_watch_args(&out_dir));
    line.push("--".into());
    line.extend(agent_argv(cli, false));
    let started = Instant::now();
    let t = launch(s, &server, "agent-ui", &line);
    type_prompt_and_exit(&t, &server);
    let status = t.exit_status(60);
    let screen = t.screen();
    drop(t);
    let seconds = started.elapsed().as_secs_f64();
    s.kill_leftovers();
    Capture::read(
        &out_dir,
        &server,
        vec![("screen".into(), screen)],
        status,
        seconds,
    )
}

/// What the sandbox-watch TUI run showed and did.
pub struct TuiRun {
    pub capture: Capture,
    /// The report existed once the capture had ended, before `q` was pressed.
    pub report_before_q: bool,
    pub screen_at_end: String,
    /// The Alerts view (key 4) once the capture had ended.
    pub alerts_screen: String,
}

/// The interactive UI inside sandbox-watch's own TUI (the agent in its pane; Ctrl-] gives it
/// the keyboard), in tmux.
pub fn watch_tui(cli: &Cli, s: &Session) -> TuiRun {
    let server = ModelServer::start(s);
    let out_dir = s.root.join("capture");
    std::fs::create_dir_all(&out_dir).unwrap();
    let mut line = vec![crate::bin().display().to_string()];
    line.extend(
        sandbox_watch_args(&out_dir)
            .into_iter()
            .filter(|a| a != "--headless"),
    );
    line.push("--".into());
    line.extend(agent_argv(cli, false));
    let started = Instant::now();
    let t = launch(s, &server, "agent-tui", &line);
    // The agent's pane shows the CLI's prompt; Ctrl-] gives it the keyboard.
    t.wait_for("bypass permissions", 60);
    t.keys(&["C-]"]);
    t.wait_for("keyboard here", 10);
    type_prompt_and_exit(&t, &server);
    let screen_at_end = t.try_wait_for("capture ended", 60).unwrap_or_else(|s| s);
    std::thread::sleep(Duration::from_millis(500));
    let report_before_q = out_dir.join("report.json").exists();
    if t.screen().contains("keyboard here") {
        t.keys(&["C-]"]);
        std::thread::sleep(Duration::from_millis(300));
    }
    // The Alerts view, as a person would open it first.
    t.keys(&["4"]);
    std::thread::sleep(Duration::from_millis(700));
    let alerts_screen = t.screen();
    t.keys(&["q"]);
    let status = t.exit_status(30);
    let seconds = started.elapsed().as_secs_f64();
    let screen = t.screen();
    drop(t);
    s.kill_leftovers();
    TuiRun {
        capture: Capture::read(
            &out_dir,
            &server,
            vec![("screen".into(), screen)],
            status,
            seconds,
        ),
        report_before_q,
        screen_at_end,
        alerts_screen,
    }
}

fn launch(s: &Session, server: &ModelServer, name: &str, line: &[String]) -> Tmux {
    let script = s.root.join(format!("{name}.sh"));
    std::fs::write(
        &script,
        format!(
            "cd {} && exec env -i {} {}\n",
            shell_quote(s.proj.to_str().unwrap()),
            s.env_line(server.port),
            line.iter()
                .map(|a| shell_quote(a))
                .collect::<Vec<_>>()
                .join(" ")
        ),
    )
    .unwrap();
    Tmux::start(name, 120, 40, &format!("bash {}", script.display()))
}

/// Waits for the CLI's prompt, types the session's prompt, waits until the model server sent
/// its final answer, and types `/exit`.
fn type_prompt_and_exit(t: &Tmux, server: &ModelServer) {
    t.wait_for("bypass permissions", 60);
    std::thread::sleep(Duration::from_millis(500));
    t.type_text(PROMPT);
    std::thread::sleep(Duration::from_millis(300));
    t.keys(&["Enter"]);
    assert!(
        server.wait_finished(),
        "the interactive session did not finish; model server log: {:#}\nscreen:\n{}",
        server.log(),
        t.screen()
    );
    t.wait_for("All steps done.", 30);
    std::thread::sleep(Duration::from_millis(1000));
    t.type_text("/exit");
    std::thread::sleep(Duration::from_millis(300));
    t.keys(&["Enter"]);
}

/// `strace -f` of the same session in print mode, without sandbox-watch.
pub struct Truth {
    pub data: Value,
    pub model: Value,
    pub seconds: f64,
}

pub fn strace_print(cli: &Cli, s: &Session) -> Truth {
    let server = ModelServer::start(s);
    let dir = s.root.join("strace");
    std::fs::create_dir_all(&dir).unwrap();
    let prefix = dir.join("trace");
    let started = Instant::now();
    let mut strace = Command::new("strace");
    strace
        .args(["-f", "-ff", "-q", "-y", "-ttt", "-s", "65536", "-o"])
        .arg(&prefix)
        .args([
            "-e",
            "trace=execve,execveat,open,openat,openat2,creat,unlink,unlinkat,rmdir,rename,renameat,renameat2,connect,clone,clone3,fork,vfork,unshare,setns,chdir",
            "--",
        ])
        .arg(&cli.bin)
        .args(["-p", PROMPT, "--dangerously-skip-permissions"])
        .env_clear()
        .envs(s.env(server.port))
        .current_dir(&s.proj)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = strace
        .spawn()
        .expect("strace is installed (cargo xtask setup)");
    let finished = server.wait_finished();
    // strace waits for every traced process: once the CLI is gone, end the leftover server.
    let deadline = Instant::now() + Duration::from_secs(30);
    while s.agent_running() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    s.kill_leftovers();
    let _ = child.wait();
    let seconds = started.elapsed().as_secs_f64();
    assert!(
        finished,
        "the strace'd session did not finish: {:#}",
        server.log()
    );
    let out = Command::new("python3")
        .arg(agent_file("strace_truth.py"))
        .arg(&prefix)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "strace_truth.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Truth {
        data: serde_json::from_slice(&out.stdout).expect("strace_truth.py printed JSON"),
        model: server.log(),
        seconds,
    }
}

impl Truth {
    fn processes(&self) -> &Vec<Value> {
        self.data["processes"].as_array().unwrap()
    }

    pub fn agent_pid(&self) -> i64 {
        self.data["first"].as_i64().unwrap()
    }

    fn agent_end(&self) -> f64 {
        self.processes()
            .iter()
            .find(|p| p["pid"] == self.agent_pid())
            .and_then(|p| p["ended_at"].as_f64())
            .unwrap_or(f64::MAX)
    }

    fn tree(&self, pid: i64) -> BTreeSet<i64> {
        let mut children: HashMap<i64, Vec<i64>> = HashMap::new();
        for p in self.processes() {
            if let (Some(pid), Some(ppid)) = (p["pid"].as_i64(), p["ppid"].as_i64()) {
                children.entry(ppid).or_default().push(pid);
            }
        }
        let mut out = BTreeSet::new();
        let mut todo = vec![pid];
        while let Some(p) = todo.pop() {
            if out.insert(p) {
                todo.extend(children.get(&p).into_iter().flatten());
            }
        }
        out
    }

    /// The tool-call shells (pids), in the order they started.
    pub fn tool_call_shells(&self) -> Vec<i64> {
        let agent = self.agent_pid();
        let mut shells: Vec<(f64, i64)> = self
            .processes()
            .iter()
            .filter(|p| p["ppid"] == agent)
            .filter_map(|p| {
                let e = p["execs"]
                    .as_array()?
                    .iter()
                    .find(|e| e["result"] == "ok")?;
                is_tool_shell(&e["argv"])
                    .then(|| (e["at"].as_f64().unwrap(), p["pid"].as_i64().unwrap()))
            })
            .collect();
        shells.sort_by(|a, b| a.0.total_cmp(&b.0));
        shells.into_iter().map(|(_, pid)| pid).collect()
    }

    /// The tool-call shell's argv (the command as the CLI wrapped it, token and all).
    pub fn shell_command(&self, pid: i64) -> String {
        let p = self.processes().iter().find(|p| p["pid"] == pid).unwrap();
        p["execs"][0]["argv"][2].as_str().unwrap().to_string()
    }

    /// What ran under one tool-call shell (the argv as the kernel gave it, scripts with their
    /// interpreter), in the form of [`Capture::step_execs`].
    pub fn step_execs(&self, s: &Session, shell: i64) -> BTreeSet<String> {
        let tree = self.tree(shell);
        let agent_end = self.agent_end();
        let mut out = BTreeSet::new();
        for p in self.processes() {
            if !p["pid"].as_i64().is_some_and(|pid| tree.contains(&pid)) {
                continue;
            }
            let execs: Vec<&Value> = p["execs"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["result"] == "ok")
                .collect();
            for (i, e) in execs.iter().enumerate() {
                let ended = p["ended_at"].as_f64();
                let end = if i + 1 < execs.len() {
                    "exec'd again".to_string()
                } else if ended.is_none_or(|t| t > agent_end + 1.0) {
                    "running".to_string()
                } else if let Some(sig) = p["signal"].as_i64() {
                    format!("signal {sig}")
                } else {
                    format!("exit {}", p["exit_code"])
                };
                out.insert(format!(
                    "{} => {end}",
                    s.norm(&argv_line(&e["kernel_argv"]))
                ));
            }
        }
        out
    }

    /// Connects under one tool-call shell, in the form of [`Capture::step_connects`].
    pub fn step_connects(&self, s: &Session, shell: i64) -> BTreeSet<String> {
        let tree = self.tree(shell);
        self.data["connects"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["pid"].as_i64().is_some_and(|p| tree.contains(&p)))
            .filter(|c| {
                matches!(
                    c["family"].as_str(),
                    Some("AF_INET" | "AF_INET6" | "AF_UNIX")
                )
            })
            .map(|c| {
                let dest = match c["path"].as_str() {
                    Some(path) => path.to_string(),
                    None => format!("{}:{}", c["addr"].as_str().unwrap_or("?"), c["port"]),
                };
                let result = match c["result"].as_str().unwrap_or("?") {
                    "EINPROGRESS" => "ok",
                    r => r,
                };
                s.norm(&format!("{dest} {result}"))
            })
            .collect()
    }

    /// Files changed in the session's project and home, in the form of
    /// [`Capture::file_effects`].
    pub fn file_effects(&self, s: &Session) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for o in self.data["opens"].as_array().unwrap() {
            let flags = o["flags"].as_str().unwrap_or("");
            if o["result"] == "ok"
                && ["O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC"]
                    .iter()
                    .any(|f| flags.contains(f))
            {
                out.insert(format!("write {}", s.norm(o["path"].as_str().unwrap())));
            }
        }
        for u in self.data["unlinks"].as_array().unwrap() {
            if u["result"] == "ok" {
                out.insert(format!("delete {}", s.norm(u["path"].as_str().unwrap())));
            }
        }
        for r in self.data["renames"].as_array().unwrap() {
            if r["result"] == "ok" {
                out.insert(format!(
                    "rename {} -> {}",
                    s.norm(r["path"].as_str().unwrap()),
                    s.norm(r["new_path"].as_str().unwrap())
                ));
            }
        }
        out.retain(|e| in_scope(e));
        out
    }

    /// The programs that opened `path` to read it (not `O_PATH`).
    pub fn readers(&self, path: &Path) -> BTreeSet<String> {
        let names: HashMap<i64, String> = self
            .processes()
            .iter()
            .filter_map(|p| {
                let e = p["execs"]
                    .as_array()?
                    .iter()
                    .rev()
                    .find(|e| e["result"] == "ok")?;
                let f = e["filename"].as_str()?;
                Some((
                    p["pid"].as_i64()?,
                    f.rsplit('/').next().unwrap_or(f).to_string(),
                ))
            })
            .collect();
        self.data["opens"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|o| {
                o["result"] == "ok"
                    && o["path"] == path.to_str().unwrap()
                    && !o["flags"].as_str().unwrap_or("").contains("O_PATH")
            })
            .filter_map(|o| names.get(&o["pid"].as_i64()?).cloned())
            .collect()
    }
}

/// Checks that all run and are reported together: a comparison with ground truth shows every
/// difference at once, not only the first.
#[derive(Default)]
pub struct Checks {
    failed: Vec<String>,
    passed: Vec<String>,
}

impl Checks {
    pub fn check(&mut self, name: &str, ok: bool, detail: impl FnOnce() -> String) {
        if ok {
            self.passed.push(name.to_string());
        } else {
            self.failed.push(format!("FAILED: {name}\n{}", detail()));
        }
    }

    /// Two sets must be equal; the difference is the detail.
    pub fn same(&mut self, name: &str, truth: &BTreeSet<String>, report: &BTreeSet<String>) {
        let missing: Vec<&String> = truth.difference(report).collect();
        let extra: Vec<&String> = report.difference(truth).collect();
        self.check(name, missing.is_empty() && extra.is_empty(), || {
            let mut d = String::new();
            for m in missing {
                d += &format!("  only in the ground truth: {m}\n");
            }
            for e in extra {
                d += &format!("  only in the report:       {e}\n");
            }
            d
        });
    }

    /// Panics listing every failed check.
    pub fn finish(self, what: &str) {
        eprintln!(
            "{what}: {} checks passed, {} failed",
            self.passed.len(),
            self.failed.len()
        );
        for p in &self.passed {
            eprintln!("  ok: {p}");
        }
        assert!(
            self.failed.is_empty(),
            "{what}: {} of {} checks failed:\n\n{}",
            self.failed.len(),
            self.failed.len() + self.passed.len(),
            self.failed.join("\n")
        );
    }
}

/// sha256 of a file, hex.
pub fn sha256_file(path: &Path) -> Option<String> {
    use sha2::Digest;
    let data = std::fs::read(path).ok()?;
    Some(hex::encode(sha2::Sha256::digest(&data)))
}

/// How many terminal rows text takes at `cols` columns.
pub fn rows_at(text: &str, cols: usize) -> usize {
    text.lines()
        .map(|l| l.chars().count().div_ceil(cols).max(1))
        .sum()
}
