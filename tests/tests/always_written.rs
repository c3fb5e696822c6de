//! The report is always written with the TUI: when the capture ends (the screen still up),
//! when the terminal hangs up or a signal comes during or after the capture, and when the
//! terminal cannot run the TUI at all (found before the agent starts).
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use integration_tests::tmux::Tmux;
use integration_tests::*;

/// `sandbox-watch run` with every output, in tmux; its pid in `pid`.
fn start(name: &str, dir: &Path, agent: &str) -> Tmux {
    let d = dir.display();
    Tmux::start(
        name,
        120,
        36,
        &format!(
            "env -u SUDO_UID -u SUDO_GID -u SUDO_USER -u GITHUB_STEP_SUMMARY sh -c 'echo $$ > {d}/pid; exec {} run --report {d}/report.json --summary {d}/summary.md --ocsf {d}/ocsf.jsonl --log {d}/log.jsonl -- {agent}'",
            bin().display()
        ),
    )
}

fn pid(dir: &Path) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(s) = std::fs::read_to_string(dir.join("pid"))
            && let Ok(p) = s.trim().parse()
        {
            return p;
        }
        assert!(Instant::now() < deadline, "no pid file");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The report (parsed), and that the summary and the OCSF export are there too.
fn outputs(dir: &Path) -> Result<serde_json::Value, String> {
    let report =
        std::fs::read_to_string(dir.join("report.json")).map_err(|e| format!("report: {e}"))?;
    for f in ["summary.md", "ocsf.jsonl"] {
        let text = std::fs::read_to_string(dir.join(f)).map_err(|e| format!("{f}: {e}"))?;
        if text.is_empty() {
            return Err(format!("{f} is empty"));
        }
    }
    serde_json::from_str(&report).map_err(|e| format!("report: {e}"))
}

#[test]
fn the_report_is_written_when_the_capture_ends_before_q() {
    let dir = tempfile::tempdir().unwrap();
    let t = start("written-at-end", dir.path(), "sh -c \"exit 3\"");
    t.wait_for("capture ended", 20);
    // The screen is still up, and everything is written.
    let r = outputs(dir.path()).unwrap_or_else(|e| panic!("{e}; the screen:\n{}", t.screen()));
    assert_eq!(r["exit"]["code"], 3);
    assert!(!t.screen().contains("SW-EXIT="), "the TUI stays until q");
    t.keys(&["q"]);
    assert_eq!(t.exit_status(10), Some(3), "{}", t.screen());
    // Written once: the summary is not appended twice.
    let summary = std::fs::read_to_string(dir.path().join("summary.md")).unwrap();
    assert_eq!(summary.matches("## sandbox-watch").count(), 1, "{summary}");
}

/// A signal to the monitor with the TUI up, during the capture (the agent sleeps on) or after
/// it; the outputs must be written and the monitor gone within seconds.
fn signalled(name: &str, signal: i32, during: bool) -> (serde_json::Value, Option<i32>) {
    let dir = tempfile::tempdir().unwrap();
    let agent = if during { "sleep 30" } else { "true" };
    let t = start(name, dir.path(), agent);
    let p = pid(dir.path());
    t.wait_for(if during { "sleep 30" } else { "capture ended" }, 20);
    unsafe { libc::kill(p, signal) };
    let status = t.exit_status(15);
    let r = outputs(dir.path()).unwrap_or_else(|e| panic!("{e}; the screen:\n{}", t.screen()));
    // An agent left running is the test's to end.
    for p in r["processes"].as_array().unwrap() {
        if p["running_at_end"] == true && p["argv"][0] == "sleep" {
            unsafe { libc::kill(p["pid"].as_i64().unwrap() as i32, libc::SIGKILL) };
        }
    }
    assert!(
        status.is_some(),
        "the monitor did not end; the screen:\n{}",
        t.screen()
    );
    (r, status)
}

#[test]
fn sighup_after_the_capture_ended_keeps_the_report_and_the_agents_status() {
    let (r, status) = signalled("hup-after", libc::SIGHUP, false);
    assert_eq!(r["exit"]["code"], 0);
    assert_eq!(status, Some(0), "not killed by SIGHUP (129)");
}

#[test]
fn sighup_during_the_capture_ends_it_and_writes_the_report() {
    let (r, status) = signalled("hup-during", libc::SIGHUP, true);
    let sleep = r["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["argv"] == serde_json::json!(["sleep", "30"]))
        .cloned()
        .unwrap();
    // As headless: the capture ends, the agent is not stopped by it.
    assert_eq!(sleep["running_at_end"], true, "{sleep:#}");
    assert_eq!(
        status,
        Some(0),
        "the agent still ran: 0, as README's exit status says"
    );
}

#[test]
fn sigterm_during_the_capture_ends_it_and_writes_the_report() {
    let (r, status) = signalled("term-during", libc::SIGTERM, true);
    assert!(
        r["processes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["argv"][0] == "sleep")
    );
    assert_eq!(status, Some(0));
}

#[test]
fn sigint_after_the_capture_ended_closes_the_tui() {
    let (r, status) = signalled("int-after", libc::SIGINT, false);
    assert_eq!(r["exit"]["code"], 0);
    assert_eq!(status, Some(0));
}

/// A terminal that never answers the cursor-position query (a bare pty nobody reads for):
/// found before the agent starts, which then runs headless, the report and status intact.
#[test]
fn a_terminal_that_does_not_answer_runs_headless_before_the_agent_starts() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let (mut master, mut slave) = (0, 0);
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty");
    let master = unsafe { OwnedFd::from_raw_fd(master) };
    let slave = unsafe { OwnedFd::from_raw_fd(slave) };
    let mark = dir.path().join("agent-ran");
    let report = dir.path().join("report.json");
    let mut child = command()
        .arg("run")
        .arg("--report")
        .arg(&report)
        .args(["--", "sh", "-c"])
        .arg(format!("echo > {}; exit 7", mark.display()))
        .env_remove("GITHUB_STEP_SUMMARY")
        .stdin(Stdio::from(slave.try_clone().unwrap()))
        .stdout(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave))
        .spawn()
        .unwrap();
    // What it writes, read (so it never blocks) but never answered.
    let fd = master.as_raw_fd();
    let reader = std::thread::spawn(move || {
        let _keep = master;
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                break;
            }
            out.extend_from_slice(&buf[..n as usize]);
        }
        String::from_utf8_lossy(&out).into_owned()
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the monitor did not end");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let said = reader.join().unwrap();
    assert_eq!(
        status.code(),
        Some(7),
        "the agent's status; it said:\n{said}"
    );
    assert!(said.contains("does not answer"), "it says why: {said}");
    assert!(mark.exists(), "the agent ran");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).expect("the report")).unwrap();
    assert_eq!(r["exit"]["code"], 7);
}
