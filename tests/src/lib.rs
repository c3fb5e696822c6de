//! Helpers for the kernel tests: they run the real `sandbox-watch` binary (built in release
//! mode by `cargo xtask test`, path in SANDBOX_WATCH_BIN) as root and read what it wrote.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

pub mod agent;
pub mod tmux;
/// The report as the library defines it: tests read fields by name through these types.
pub use sandbox_watch::output::report::{ProcessEntry, Report, Violation};
pub use sandbox_watch::record::{NetOp, Op, Verdict, ViolationKind};
pub use sandbox_watch::state::files::FileEntry;
pub use sandbox_watch::state::network::NetEntry;

pub fn bin() -> PathBuf {
    match std::env::var_os("SANDBOX_WATCH_BIN") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/release/sandbox-watch"),
    }
}

/// `sandbox-watch`, without what in the environment would change what a test sees: a job
/// summary to append to, and a sudo caller to run the agent as (`sudo -E cargo xtask test`).
/// A test that wants one of them sets it.
pub fn command() -> Command {
    let mut c = Command::new(bin());
    for var in ["GITHUB_STEP_SUMMARY", "SUDO_UID", "SUDO_GID", "SUDO_USER"] {
        c.env_remove(var);
    }
    c
}

/// Waits until a monitor started in the background is watching: its log's first line is
/// written once the probe is loaded, the target traced and the signal handlers set.
pub fn wait_attached(log: &Path, monitor: &mut std::process::Child) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if std::fs::read(log).is_ok_and(|b| b.contains(&b'\n')) {
            return;
        }
        if let Ok(Some(status)) = monitor.try_wait() {
            panic!("the monitor exited ({status}) before it was watching");
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the monitor did not start watching within 60 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// `ms` milliseconds of the host's time on this machine: `SW_TIME_SCALE` times more where the
/// kernel runs emulated (the 6.1 guest of `cargo xtask vm-test` sets 10). For waits a test
/// picks to leave the product time to act, never for what the product promises to users.
pub fn scaled_ms(ms: u64) -> u64 {
    let scale = std::env::var("SW_TIME_SCALE")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(1);
    ms * scale.max(1)
}

/// The tests need root; say so loudly instead of passing without testing anything.
pub fn require_root() {
    assert!(
        nix_is_root(),
        "the kernel tests must run as root: `sudo -E cargo xtask test`"
    );
}

fn nix_is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

pub struct Run {
    pub output: Output,
    /// The report as JSON (older tests read it so).
    pub report: Value,
    /// The same report, typed.
    pub typed: Report,
    pub log: PathBuf,
    pub dir: tempfile::TempDir,
}

impl Run {
    pub fn code(&self) -> Option<i32> {
        self.output.status.code()
    }

    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    pub fn processes(&self) -> &Vec<Value> {
        self.report["processes"].as_array().expect("processes")
    }

    pub fn files(&self) -> &Vec<Value> {
        self.report["files"].as_array().expect("files")
    }

    /// Program runs (execs) whose argv equals `argv`.
    pub fn execs_of(&self, argv: &[&str]) -> Vec<&Value> {
        self.processes()
            .iter()
            .filter(|p| {
                !p["fork_only"].as_bool().unwrap_or(false)
                    && p["argv"].as_array().is_some_and(|a| {
                        a.len() == argv.len() && a.iter().zip(argv).all(|(x, y)| x == y)
                    })
            })
            .collect()
    }

    pub fn exec_of(&self, argv: &[&str]) -> &Value {
        let found = self.execs_of(argv);
        assert_eq!(
            found.len(),
            1,
            "expected one exec of {argv:?}; processes: {:#?}",
            self.processes()
        );
        found[0]
    }

    pub fn network(&self) -> &Vec<Value> {
        self.report["network"].as_array().expect("network")
    }

    /// The report's violations of one kind.
    pub fn violations_of(&self, kind: ViolationKind) -> Vec<&Violation> {
        self.typed
            .violations
            .iter()
            .filter(|v| v.kind == kind)
            .collect()
    }

    pub fn files_at(&self, path: &str) -> Vec<&Value> {
        self.files().iter().filter(|f| f["path"] == path).collect()
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// `sandbox-watch run --headless --report R --log L [extra] -- cmd…`
pub fn run(extra: &[&str], cmd: &[&str]) -> Run {
    run_in(tempfile::tempdir().unwrap(), extra, cmd)
}

pub fn run_in(dir: tempfile::TempDir, extra: &[&str], cmd: &[&str]) -> Run {
    run_in_env(dir, &[], extra, cmd)
}

/// `run`, with HOME set for sandbox-watch (and so for the agent): the home whose credential
/// and persistence files are known by their inode from the start.
pub fn run_home(home: &Path, extra: &[&str], cmd: &[&str]) -> Run {
    run_in_env(
        tempfile::tempdir().unwrap(),
        &[("HOME", home.as_os_str())],
        extra,
        cmd,
    )
}

pub fn run_in_env(
    dir: tempfile::TempDir,
    envs: &[(&str, &std::ffi::OsStr)],
    extra: &[&str],
    cmd: &[&str],
) -> Run {
    run_in_env_with(dir, envs, extra, cmd, command())
}

/// `run_home`, with `file` open as fd 3 in sandbox-watch and so in the agent it starts: a
/// descriptor the launcher opened before the capture.
pub fn run_home_fd3(home: &Path, file: &std::fs::File, cmd: &[&str]) -> Run {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let fd = file.as_raw_fd();
    let mut c = command();
    // SAFETY: dup2 and fcntl are async-signal-safe. dup2 leaves fd 3 without FD_CLOEXEC;
    // when the file already is fd 3 (a test process with few descriptors open, as in the 6.1
    // guest) dup2 does nothing, so the flag is cleared by hand.
    unsafe {
        c.pre_exec(move || {
            let ok = if fd == 3 {
                libc::fcntl(3, libc::F_SETFD, 0) >= 0
            } else {
                libc::dup2(fd, 3) >= 0
            };
            if !ok {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    run_in_env_with(
        tempfile::tempdir().unwrap(),
        &[("HOME", home.as_os_str())],
        &[],
        cmd,
        c,
    )
}

fn run_in_env_with(
    dir: tempfile::TempDir,
    envs: &[(&str, &std::ffi::OsStr)],
    extra: &[&str],
    cmd: &[&str],
    mut command: Command,
) -> Run {
    require_root();
    let report = dir.path().join("report.json");
    let log = dir.path().join("log.jsonl");
    let output = command
        .envs(envs.iter().copied())
        .args(["run", "--headless", "--linger", "0.3"])
        .arg("--report")
        .arg(&report)
        .arg("--log")
        .arg(&log)
        .args(extra)
        .arg("--")
        .args(cmd)
        .output()
        .expect("start sandbox-watch");
    let text = std::fs::read_to_string(&report).unwrap_or_else(|e| {
        panic!(
            "no report ({e}); exit {:?}; stderr:\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )
    });
    let report: Value = serde_json::from_str(&text).expect("report is JSON");
    let typed: Report = serde_json::from_str(&text).expect("the report reads as a Report");
    if log.exists() {
        assert_replay_matches(&report, &log);
    }
    Run {
        output,
        report,
        typed,
        log,
        dir,
    }
}

/// What a live report and the report `replay` rebuilds from its log must share: all but where
/// the log is and what its check said (a replay has checked the chain; the capture wrote it).
fn comparable(report: &Value) -> Value {
    let mut r = report.clone();
    if let Some(log) = r.get_mut("log").and_then(Value::as_object_mut) {
        for k in ["path", "chain", "chain_message"] {
            log.remove(k);
        }
    }
    r
}

/// `sandbox-watch replay --headless --report` of `log` gives `live` (the capture's report),
/// but for `log.path` and `log.chain`: every kernel test's run checks this, so the log holds
/// all the report is made of.
pub fn assert_replay_matches(live: &Value, log: &Path) {
    let dir = tempfile::tempdir().unwrap();
    let replayed_path = dir.path().join("replayed.json");
    // A capture reconciled with a transcript is replayed with the same one.
    let transcript = live["transcript"]["path"].as_str();
    let out = command()
        .args(["replay", "--headless", "--report"])
        .arg(&replayed_path)
        .args(transcript.map(|t| format!("--transcript={t}")))
        .arg(log)
        .output()
        .expect("start sandbox-watch replay");
    let text = std::fs::read_to_string(&replayed_path).unwrap_or_else(|e| {
        panic!(
            "replay wrote no report ({e}); exit {:?}; stderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let replayed: Value = serde_json::from_str(&text).expect("replayed report is JSON");
    let (live, replayed) = (comparable(live), comparable(&replayed));
    if live != replayed {
        panic!(
            "the replay of {} differs from the live report:\n{}",
            log.display(),
            json_diff(&live, &replayed, "")
        );
    }
}

/// Where two JSON values differ, one line each (the first 40).
pub fn json_diff(a: &Value, b: &Value, at: &str) -> String {
    let mut lines = Vec::new();
    diff_into(a, b, at, &mut lines);
    lines.truncate(40);
    lines.join("\n")
}

fn diff_into(a: &Value, b: &Value, at: &str, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let path = format!("{at}/{k}");
                match (x.get(k), y.get(k)) {
                    (Some(u), Some(v)) => diff_into(u, v, &path, out),
                    (u, v) => out.push(format!("{path}: live {u:?}, replay {v:?}")),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            if x.len() != y.len() {
                out.push(format!("{at}: live {} items, replay {}", x.len(), y.len()));
            }
            for (i, (u, v)) in x.iter().zip(y).enumerate() {
                diff_into(u, v, &format!("{at}/{i}"), out);
            }
        }
        (u, v) if u != v => out.push(format!("{at}: live {u}, replay {v}")),
        _ => {}
    }
}

/// Runs sandbox-watch with arbitrary arguments.
pub fn sandbox_watch(args: &[&str]) -> Output {
    command().args(args).output().expect("start sandbox-watch")
}

/// The test process's own net namespace inode.
pub fn own_netns() -> u64 {
    let link = std::fs::read_link("/proc/self/ns/net").unwrap();
    let s = link.to_string_lossy();
    s.trim_start_matches("net:[")
        .trim_end_matches(']')
        .parse()
        .unwrap()
}

pub fn sh(script: &str) -> Vec<String> {
    vec!["sh".into(), "-c".into(), script.into()]
}

/// The filesystem magic of the filesystem holding `path`, as the report writes it ("0xef53"):
/// what the kernel's own statfs says, to compare with what the probe read from the file.
pub fn fs_magic(path: &std::path::Path) -> String {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid C string and a zeroed statfs to fill.
    assert_eq!(
        unsafe { libc::statfs(c.as_ptr(), &mut st) },
        0,
        "statfs {}",
        path.display()
    );
    format!("{:#x}", st.f_type as u32)
}
