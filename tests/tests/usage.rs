//! Bad input: a sentence on stderr and the documented exit code, never a panic.
use integration_tests::*;

fn check(args: &[&str], code: i32, says: &str) {
    let out = sandbox_watch(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
    assert!(
        stderr.contains(says),
        "{args:?} should say {says:?}; said: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn attach_bad_pids() {
    require_root();
    check(&["attach", "abc"], 2, "not a process id");
    check(&["attach", "--", "-5"], 2, "not a process id");
    check(&["attach", "0"], 2, "not a process id");
    check(&["attach", "4000000"], 2, "no process with pid 4000000");
    check(&["attach", "2"], 2, "kernel thread");
}

#[test]
fn run_bad_commands() {
    require_root();
    check(&["run"], 2, "COMMAND");
    check(&["run", "--", "/no/such/program"], 2, "cannot start");
    check(
        &["run", "--", "no-such-command-anywhere"],
        2,
        "no such command",
    );
    check(&["run", "--", "/etc"], 2, "directory");
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain.txt");
    std::fs::write(&plain, "not a program").unwrap();
    check(&["run", "--", plain.to_str().unwrap()], 2, "not executable");
    // Executable but not a program the kernel can run: found at exec, still a usage error.
    let garbage = dir.path().join("garbage");
    std::fs::write(&garbage, [0x7f, b'E', b'L', b'F', 0, 1, 2]).unwrap();
    std::fs::set_permissions(
        &garbage,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    check(
        &["run", "--", garbage.to_str().unwrap()],
        2,
        "Exec format error",
    );
}

#[test]
fn bad_options() {
    check(
        &["run", "--fail-on", "outside,bogus", "--", "true"],
        2,
        "unknown kind 'bogus'",
    );
    check(&["run", "--bogus", "--", "true"], 2, "--bogus");
    check(
        &["run", "--ring-buffer", "1000", "--", "true"],
        2,
        "power of two",
    );
    check(&["run", "--duration", "-1", "--", "true"], 2, "positive");
}

#[test]
fn unwritable_log_is_found_before_the_agent_starts() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let cmd = format!("touch {}", marker.display());
    check(
        &[
            "run",
            "--log",
            "/no/such/dir/log.jsonl",
            "--",
            "sh",
            "-c",
            &cmd,
        ],
        2,
        "/no/such/dir/log.jsonl",
    );
    assert!(!marker.exists(), "the agent must not start");
    check(
        &[
            "run",
            "--report",
            "/no/such/dir/r.json",
            "--",
            "sh",
            "-c",
            &cmd,
        ],
        2,
        "does not exist",
    );
    assert!(!marker.exists(), "the agent must not start");
    // Every output that could not be written at the end is found now too.
    let d = dir.path().display().to_string();
    let same = format!("{d}/same.out");
    let cases: Vec<(Vec<String>, String)> = vec![
        (vec!["--log".into(), d.clone()], "is a directory".into()),
        (vec!["--report".into(), d.clone()], "is a directory".into()),
        (vec!["--summary".into(), d.clone()], "is a directory".into()),
        (
            vec!["--report".into(), "/proc/r.json".into()],
            "--report /proc/r.json: cannot write it".into(),
        ),
        (
            vec![
                "--log".into(),
                same.clone(),
                "--report".into(),
                same.clone(),
            ],
            "--log and --report name the same file".into(),
        ),
        (
            vec![
                "--log".into(),
                same.clone(),
                "--ocsf".into(),
                format!("{d}/./same.out"),
            ],
            "--log and --ocsf name the same file".into(),
        ),
    ];
    for (opts, says) in cases {
        let mut args: Vec<&str> = vec!["run"];
        args.extend(opts.iter().map(String::as_str));
        args.extend(["--", "sh", "-c", &cmd]);
        check(&args, 2, &says);
        assert!(!marker.exists(), "{opts:?}: the agent must not start");
        assert!(
            !std::path::Path::new(&same).exists(),
            "{opts:?}: nothing left behind"
        );
    }
    // replay must not write its report over the log it reads.
    std::fs::write(&same, "{}\n").unwrap();
    check(
        &["replay", "--headless", "--report", &same, &same],
        2,
        "the log and --report name the same file",
    );
    assert_eq!(std::fs::read_to_string(&same).unwrap(), "{}\n");
}

#[test]
fn not_root_is_exit_4_with_advice() {
    require_root();
    // Drop to nobody for the monitor itself, run from a copy nobody can reach (the checkout
    // may sit below a directory only root may enter).
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let copy = dir.path().join("sandbox-watch");
    std::fs::copy(bin(), &copy).unwrap();
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&copy)
        .args(["run", "--", "true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("needs root"), "{stderr}");
}
