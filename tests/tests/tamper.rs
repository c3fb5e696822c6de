//! The record defends itself (issue 13): an agent running as root that attacks its monitor
//! with the programs of `src/bin/attack_*.rs` is on record, or its work is counted as loss, or
//! the rewritten log fails `verify` against the anchor the capture printed. Each test failed
//! on the code before issue 13 (see the notes beside each).
use std::path::{Path, PathBuf};
use std::process::Command;

use integration_tests::*;

/// A home with the test key and .bashrc the attacks read and append to.
fn attack_home(dir: &Path) -> PathBuf {
    let home = dir.join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(
        home.join(".ssh/id_rsa"),
        b"-----BEGIN TEST KEY-----\nnot a real key\n-----END TEST KEY-----\n",
    )
    .unwrap();
    std::fs::write(home.join(".bashrc"), b"# test bashrc\n").unwrap();
    home
}

fn tamper(r: &Run) -> Vec<&Violation> {
    r.violations_of(ViolationKind::Tamper)
}

fn sh(script: &str) -> Vec<String> {
    vec!["sh".into(), "-c".into(), script.into()]
}

fn run_attack(dir: tempfile::TempDir, extra: &[&str], script: &str) -> Run {
    let cmd = sh(script);
    let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
    run_in(dir, extra, &cmd)
}

/// bpf(2) on the monitor's TRACED map (find it by id, delete its own tgid): before issue 13
/// the delete worked and the key read after it was never seen (exit 0; `--fail-on tamper` was
/// refused with exit 2). Now the call is a tamper record sent before it runs, the delete fails
/// (TRACED is frozen), and what the agent does next is still recorded.
#[test]
fn untrace_through_bpf_is_tamper_and_the_agent_stays_traced() {
    let dir = tempfile::tempdir().unwrap();
    let home = attack_home(dir.path());
    let script = format!(
        "ATTACK_HOME={h} {bin} untrace; cat {h}/.ssh/id_rsa >/dev/null",
        h = home.display(),
        bin = env!("CARGO_BIN_EXE_attack-bpf")
    );
    let r = run_attack(dir, &["--fail-on", "tamper"], &script);
    assert_eq!(r.code(), Some(3), "stderr: {}", r.stderr());
    let t = tamper(&r);
    assert!(
        t.iter()
            .any(|v| v.summary.contains("BPF_MAP_DELETE_ELEM") && v.summary.contains("TRACED")),
        "no tamper violation for the delete from TRACED: {t:#?}"
    );
    assert!(
        r.stderr().contains("deleting my tgid from TRACED"),
        "the delete should have been refused (TRACED frozen): {}",
        r.stderr()
    );
    let key = home.join(".ssh/id_rsa");
    assert!(
        !r.files_at(&key.display().to_string()).is_empty(),
        "the key read after the attack is missing: {:#?}",
        r.files()
    );
}

/// Frozen maps: a root agent takes the monitor's DROPS, SEQ and TRACED by id and writes them
/// (BPF_MAP_UPDATE_ELEM, BPF_MAP_DELETE_ELEM). Before issue 13 every write worked and left no
/// record. Now each fails with EPERM (BPF_MAP_FREEZE: the asserts on `errno 1` fail where a
/// map is not frozen), each call is a tamper record made before it ran, and the key read after
/// it is still recorded. READS stays writable (the monitor writes it during the capture): the
/// agent's update of it works, and is a tamper record all the same.
#[test]
fn writes_to_frozen_maps_fail_and_every_bpf_write_is_tamper() {
    let dir = tempfile::tempdir().unwrap();
    let home = attack_home(dir.path());
    let script = format!(
        "ATTACK_HOME={h} {bin} frozen",
        h = home.display(),
        bin = env!("CARGO_BIN_EXE_attack-bpf")
    );
    let r = run_attack(dir, &["--fail-on", "tamper"], &script);
    let err = r.stderr();
    assert_eq!(r.code(), Some(3), "stderr: {err}");
    let t = tamper(&r);
    let recorded = |cmd: &str, map: &str| {
        t.iter().any(|v| {
            v.summary
                .contains(&format!("bpf({cmd}) on the monitor's map {map} "))
        })
    };
    for map in ["DROPS", "SEQ", "TRACED"] {
        for (op, cmd) in [
            ("update", "BPF_MAP_UPDATE_ELEM"),
            ("delete", "BPF_MAP_DELETE_ELEM"),
        ] {
            assert!(
                err.lines()
                    .any(|l| l.contains(&format!("{map} {op}: errno 1"))),
                "{map} {op} not refused with EPERM: {err}"
            );
            assert!(
                recorded(cmd, map),
                "no tamper record for {cmd} on {map}: {t:#?}"
            );
        }
    }
    assert!(
        err.lines().any(|l| l.contains("READS update: ok")),
        "READS is writable: {err}"
    );
    assert!(
        recorded("BPF_MAP_UPDATE_ELEM", "READS"),
        "no tamper record for the READS write: {t:#?}"
    );
    let key = home.join(".ssh/id_rsa");
    assert!(
        !r.files_at(&key.display().to_string()).is_empty(),
        "the key read after the attack is missing: {:#?}",
        r.files()
    );
}

/// SIGSTOP the monitor, flood its ring until records drop, act, zero the drop counters,
/// SIGCONT: before issue 13 the run said `lost 0` and nothing else. Now the stop is a tamper
/// record, the counters cannot be reset (frozen), and the loss is counted from the kernel's
/// sequence numbers.
#[test]
fn blinding_the_monitor_is_tamper_and_its_loss_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let home = attack_home(dir.path());
    // The attack dies when the counters cannot be zeroed: the shell lets the monitor go on.
    let script = format!(
        "ATTACK_HOME={h} {bin}; kill -CONT $PPID",
        h = home.display(),
        bin = env!("CARGO_BIN_EXE_attack-blind")
    );
    let r = run_attack(
        dir,
        &["--ring-buffer", "65536", "--fail-on", "tamper,lost"],
        &script,
    );
    assert_eq!(r.code(), Some(3), "stderr: {}", r.stderr());
    let cov = &r.typed.coverage;
    assert!(cov.lost > 0, "nothing lost: {cov:#?}\n{}", r.stderr());
    let seq = cov.sequence.as_ref().expect("the sequence count");
    assert!(seq.missing > 0 && seq.numbered > seq.received, "{seq:#?}");
    assert!(!cov.complete);
    let t = tamper(&r);
    assert!(
        t.iter().any(|v| v.summary.contains("SIGSTOP")),
        "no tamper violation for the SIGSTOP: {t:#?}"
    );
    assert!(
        t.iter().any(|v| v.summary.contains("DROPS")),
        "no tamper violation for the bpf(2) on DROPS: {t:#?}"
    );
}

/// ptrace, process_vm_readv/writev, /proc/MONITOR/{maps,environ,mem,fd/N}, pidfd_getfd and
/// pidfd_send_signal on the monitor: before issue 13 all allowed and unrecorded (only plain
/// reads of /proc files). Now each is a tamper violation naming the monitor.
#[test]
fn reaching_into_the_monitor_is_tamper() {
    let dir = tempfile::tempdir().unwrap();
    let home = attack_home(dir.path());
    let script = format!(
        "ATTACK_HOME={h} {bin}",
        h = home.display(),
        bin = env!("CARGO_BIN_EXE_attack-ptrace")
    );
    let r = run_attack(dir, &["--fail-on", "tamper"], &script);
    assert_eq!(r.code(), Some(3), "stderr: {}", r.stderr());
    let t = tamper(&r);
    let said = |needle: &str| t.iter().any(|v| v.summary.contains(needle));
    for needle in [
        "ptrace(PTRACE_ATTACH)",
        "ptrace(PTRACE_SEIZE)",
        "process_vm_readv",
        "process_vm_writev",
        "/mem",
        "/environ",
        "pidfd_getfd",
        "opened the monitor's own file",
    ] {
        assert!(said(needle), "no tamper violation with {needle:?}: {t:#?}");
    }
}

/// SIGKILL of the monitor within the first milliseconds: before issue 13 the log was empty
/// ("not an evidence log", exit 1). Later, the last 100–200 ms were still buffered: a key read
/// 50 ms before the kill was missing. Now the start record is on disk before the agent runs
/// and every drain is written within ~10 ms: `verify` says unended (5), with the read.
#[test]
fn a_killed_monitor_leaves_an_unended_log_with_what_came_before() {
    // The delays are the host's: ten times longer in the emulated 6.1 guest, where 60 ms
    // was too short for the read to reach the log (CI, 2026-12-02).
    for (delay, act) in [(0, false), (0, true), (60, true), (300, true)] {
        let delay = scaled_ms(delay);
        let dir = tempfile::tempdir().unwrap();
        let home = attack_home(dir.path());
        let log = dir.path().join("log.jsonl");
        let mut args = vec![delay.to_string()];
        if act {
            args.push("act".into());
        }
        let out = command()
            .args(["run", "--headless", "--log"])
            .arg(&log)
            .arg("--")
            .arg(env!("CARGO_BIN_EXE_attack-kill-monitor"))
            .args(&args)
            .env("ATTACK_HOME", &home)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            None,
            "the monitor was not killed (delay {delay}): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v = command().arg("verify").arg(&log).output().unwrap();
        assert_eq!(
            v.status.code(),
            Some(5),
            "delay {delay} act {act}: {}",
            String::from_utf8_lossy(&v.stderr)
        );
        // Acted, then 60 ms or more before the kill: the read is in the log.
        if act && delay != 0 {
            let text = std::fs::read_to_string(&log).unwrap();
            assert!(
                text.contains("id_rsa"),
                "delay {delay}: the key read before the kill is not in the log"
            );
        }
    }
}

/// `(N, H)` of the anchor line `sandbox-watch: log L: N records, head H (when)` the capture
/// printed to its stderr.
fn printed_anchor(err: &str, when: &str) -> (String, String) {
    let line = err
        .lines()
        .find(|l| l.contains("head") && l.ends_with(&format!("({when})")))
        .unwrap_or_else(|| panic!("no {when} anchor on stderr: {err}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let i = words.iter().position(|w| *w == "records,").unwrap();
    assert_eq!(words[i + 2].len(), 64, "a full hash: {line}");
    (words[i - 1].to_string(), words[i + 2].to_string())
}

/// The anchor: a log rewritten after the run (the key read removed, every hash recomputed)
/// still passed `verify` before issue 13, and nothing printed its full head. Now the capture
/// prints `N records, head H` to stderr at the end, and `verify --head H --records N` refuses
/// the rechained log (the original passes).
#[test]
fn a_rechained_log_fails_against_the_printed_anchor() {
    let dir = tempfile::tempdir().unwrap();
    let home = attack_home(dir.path());
    let key = home.join(".ssh/id_rsa");
    let r = run_in(dir, &[], &["cat", key.to_str().unwrap()]);
    let err = r.stderr();
    let anchor = |when: &str| printed_anchor(&err, when);
    let (records, head) = anchor("end");
    // The start's anchor vouches for the records up to it in the whole log.
    let (start_records, start_head) = anchor("start");
    let out = command()
        .arg("verify")
        .arg(&r.log)
        .args(["--head", &start_head, "--records", &start_records])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "the start anchor: {said}");
    assert!(said.contains("not covered by this anchor"), "{said}");
    let verify = |log: &Path, anchored: bool| {
        let mut c = command();
        c.arg("verify").arg(log);
        if anchored {
            c.args(["--head", &head, "--records", &records]);
        }
        let out = c.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    assert_eq!(
        verify(&r.log, true).0,
        Some(0),
        "{:?}",
        verify(&r.log, true)
    );
    let forged = r.dir.path().join("forged.jsonl");
    let status = Command::new("python3")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/attacks/rechain.py"))
        .arg(&r.log)
        .arg("--out")
        .arg(&forged)
        .output()
        .unwrap();
    // Its stderr line is kept out of the test's own output: the 6.1 guest reads that output
    // line by line for each test's result.
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    assert!(!std::fs::read_to_string(&forged).unwrap().contains("id_rsa"));
    assert_eq!(
        verify(&forged, false).0,
        Some(0),
        "the rechained chain alone looks intact"
    );
    let (code, msg) = verify(&forged, true);
    assert_eq!(code, Some(1), "{msg}");
    assert!(msg.contains("DOES NOT MATCH THE ANCHOR"), "{msg}");
}

/// 16,500 threads blocked in connect() filled the per-syscall PENDING map: before issue 13 a
/// rename over .bashrc, a TCP connect and an unlink made then were not recorded and nothing
/// was lost. Now the exits read their arguments from the saved registers (no table to fill):
/// all three are recorded.
#[test]
fn thousands_of_threads_in_connect_hide_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let home = attack_home(dir.path());
    let script = format!(
        "ATTACK_HOME={h} {bin}",
        h = home.display(),
        bin = env!("CARGO_BIN_EXE_attack-pending")
    );
    let r = run_attack(dir, &["--allow-net", "10.0.0.0/8"], &script);
    let bashrc = home.join(".bashrc").display().to_string();
    assert!(
        r.files()
            .iter()
            .any(|f| f["op"] == "rename" && f["new_path"] == bashrc.as_str()),
        "the rename over .bashrc is missing; stderr: {}",
        r.stderr()
    );
    assert!(
        r.network()
            .iter()
            .any(|n| n["op"] == "connect" && n["addr"] == "127.0.0.1"),
        "the TCP connect is missing: {:#?}",
        r.network()
    );
    assert!(
        r.files().iter().any(|f| f["op"] == "delete"),
        "the unlink is missing"
    );
}

/// The log and the OCSF export taken away or cut through their paths (rm, mv away, another
/// file moved over the log, truncate(2)): none of these opens the file, so before, nothing was
/// recorded (exit 0 with `--fail-on tamper`, "no violations"). Now each is a tamper violation
/// naming the file and what was done, with the pid of the rm or mv when the session saw it.
#[test]
fn outputs_deleted_moved_replaced_or_truncated_are_tamper() {
    let cases = [
        ("log", "deleted", "rm -f \"$LOG\""),
        ("log", "renamed away", "mv \"$LOG\" \"$LOG.away\""),
        (
            "log",
            "another file was put at",
            "echo forged >\"$LOG.new\"; mv \"$LOG.new\" \"$LOG\"",
        ),
        (
            "log",
            "truncated",
            "python3 -c 'import os, sys; os.truncate(sys.argv[1], 0)' \"$LOG\"",
        ),
        ("ocsf", "renamed away", "mv \"$OCSF\" \"$OCSF.away\""),
    ];
    for (file, said, act) in cases {
        let dir = tempfile::tempdir().unwrap();
        let (report, log, ocsf) = (
            dir.path().join("report.json"),
            dir.path().join("log.jsonl"),
            dir.path().join("ocsf.jsonl"),
        );
        // The agent acts, then goes on a little (the capture checks its outputs as it runs).
        let script = format!("{act}; sleep 0.2; cat /etc/hostname >/dev/null");
        let out = command()
            .args([
                "run",
                "--headless",
                "--linger",
                "0.3",
                "--fail-on",
                "tamper",
            ])
            .arg("--report")
            .arg(&report)
            .arg("--log")
            .arg(&log)
            .arg("--ocsf")
            .arg(&ocsf)
            .args(["--", "sh", "-c", &script])
            .env("LOG", &log)
            .env("OCSF", &ocsf)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{act}: {stderr}");
        let text = std::fs::read_to_string(&report).unwrap();
        let typed: Report = serde_json::from_str(&text).unwrap();
        let name = if file == "log" {
            "log.jsonl"
        } else {
            "ocsf.jsonl"
        };
        let t: Vec<&Violation> = typed
            .violations
            .iter()
            .filter(|v| v.kind == ViolationKind::Tamper)
            .collect();
        let hit = t
            .iter()
            .find(|v| v.summary.contains(said) && v.summary.contains(name))
            .unwrap_or_else(|| panic!("{act}: no tamper violation saying {said:?}: {t:#?}"));
        // rm and mv are file records of the session: the violation names who.
        if !act.starts_with("python3") {
            assert!(
                hit.summary.contains("renamed or deleted it"),
                "{act}: the pid of the rm or mv is not named: {hit:#?}"
            );
        }
    }
}

/// An Ed25519 key as `openssl genpkey -algorithm ed25519` writes it, and its public half as
/// `openssl pkey -pubout` writes it, in a directory of their own (outside the agent's tree),
/// mode 0600.
fn sign_key() -> (tempfile::TempDir, PathBuf, PathBuf) {
    use std::os::unix::fs::PermissionsExt as _;
    let keys = tempfile::tempdir().unwrap();
    let key = keys.path().join("log.key");
    std::fs::write(
        &key,
        "-----BEGIN PRIVATE KEY-----\n\
         MC4CAQAwBQYDK2VwBCIEIDtDGH8yhnF2Lxk01Ow4OJQoYws+xB7ibuPMSAT6Stnt\n\
         -----END PRIVATE KEY-----\n",
    )
    .unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let public = keys.path().join("log.pub");
    std::fs::write(
        &public,
        "-----BEGIN PUBLIC KEY-----\n\
         MCowBQYDK2VwAyEAAeHyal03V02GI+kh4pJE5bWPldUrjt0DLLTP7/7RV3c=\n\
         -----END PUBLIC KEY-----\n",
    )
    .unwrap();
    (keys, key, public)
}

/// `verify --pubkey`: status and stderr+stdout.
fn verify_signed(log: &Path, public: &Path) -> (Option<i32>, String) {
    let out = command()
        .arg("verify")
        .arg("--pubkey")
        .arg(public)
        .arg(log)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// `--sign-key`: the capture signs its start, a checkpoint every `--checkpoint` seconds and its
/// end. Before it, a rechained log (the key read removed, every hash recomputed, as
/// tests/attacks/rechain.py and the leftover daemon of forge_after_end.py do) passed `verify`
/// (exit 0), and there was no `--sign-key` or `--pubkey` (clap exit 2). Now `verify --pubkey`
/// passes the real log and fails the rechained one and one forged after the end that keeps
/// the signed records and writes an unsigned end (exit 6, saying why); a log cut short says
/// how far the signatures vouch (exit 5); a key file others may read is refused.
#[test]
fn a_signed_log_verifies_and_rechained_or_forged_logs_fail_its_signature() {
    let (keys, key, public) = sign_key();
    let key_arg = key.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let home = attack_home(dir.path());
    let script = format!(
        "cat {h}/.ssh/id_rsa >/dev/null; sleep 0.5",
        h = home.display()
    );
    let r = run_attack(
        dir,
        &["--sign-key", key_arg, "--checkpoint", "0.2"],
        &script,
    );
    let err = r.stderr();
    assert!(
        err.contains(
            "signing the log with Ed25519 key \
             01e1f26a5d37574d8623e921e29244e5b58f95d52b8edd032cb4cfeffed15777"
        ),
        "{err}"
    );
    let real = r.log.clone();
    let text = std::fs::read_to_string(&real).unwrap();
    assert!(text.contains("id_rsa"), "{text}");
    let checkpoints = text
        .lines()
        .filter(|l| l.contains(r#""kind":"checkpoint""#))
        .count();
    assert!(checkpoints >= 1, "no signed checkpoint in 0.5 s: {text}");
    let (code, msg) = verify_signed(&real, &public);
    assert_eq!(code, Some(0), "{msg}");
    assert!(msg.contains("intact and signed"), "{msg}");

    // A rechain with the signatures left as they are, and one that keeps the signed start
    // and writes an unsigned end after it (the deeds after the start gone).
    let rechained = r.dir.path().join("rechained.jsonl");
    let out = Command::new("python3")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/attacks/rechain.py"))
        .arg(&real)
        .arg("--out")
        .arg(&rechained)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !std::fs::read_to_string(&rechained)
            .unwrap()
            .contains("id_rsa")
    );
    let plain = command().arg("verify").arg(&rechained).output().unwrap();
    assert_eq!(
        plain.status.code(),
        Some(0),
        "the rechained chain alone looks intact"
    );
    let (code, msg) = verify_signed(&rechained, &public);
    assert_eq!(code, Some(6), "{msg}");
    assert!(msg.contains("SIGNATURE CHECK FAILED"), "{msg}");
    let cut = r.dir.path().join("cut.jsonl");
    let py = format!(
        "import sys; sys.path.insert(0, {attacks:?}); import swlog\n\
         r = swlog.read_log({real:?})\n\
         end = {{k: v for k, v in r[-1].items() if k not in ('signature', 'signed_by')}}\n\
         open({cut:?}, 'w').close()\n\
         swlog.write_log({cut:?}, swlog.rechain(r[:1] + [end]))\n",
        attacks = concat!(env!("CARGO_MANIFEST_DIR"), "/attacks"),
        real = real.to_str().unwrap(),
        cut = cut.to_str().unwrap(),
    );
    let out = Command::new("python3").args(["-c", &py]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (code, msg) = verify_signed(&cut, &public);
    assert_eq!(code, Some(6), "{msg}");
    assert!(
        msg.contains("END NOT SIGNED") && msg.contains("records 0 to 0 only"),
        "{msg}"
    );
    // Cut short (a killed monitor): unended, and how far the signatures vouch.
    let short = r.dir.path().join("short.jsonl");
    let head: String = text.lines().take(3).map(|l| format!("{l}\n")).collect();
    std::fs::write(&short, head).unwrap();
    let (code, msg) = verify_signed(&short, &public);
    assert_eq!(code, Some(5), "{msg}");
    assert!(
        msg.contains("the signatures vouch for records 0 to"),
        "{msg}"
    );

    // A key others may read is refused before anything starts.
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let d = tempfile::tempdir().unwrap();
    let out = command()
        .args(["run", "--headless", "--log"])
        .arg(d.path().join("l.jsonl"))
        .args(["--sign-key", key_arg, "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("chmod 600"));
    drop(keys);
}

/// Forge after the end: the agent reads the key and leaves a daemon behind
/// (tests/attacks/forge_after_end.py) that waits for the monitor to exit, rewrites the log
/// without the key read, the .bashrc append, itself and every violation, rechains every hash
/// as `verify` computes them, and rebuilds the report and summary with the monitor's own
/// `replay`. Before issue 13 that was the whole story: `verify` said intact and the report
/// "no violations". It still is for plain `verify` (asserted: the forge is a real one), but
/// the end anchor the capture printed to its stderr (out of the agent's reach) refuses the
/// forged log, and so do the signatures of `--sign-key`.
#[test]
fn a_log_forged_after_the_end_fails_against_the_anchor_and_the_signature() {
    let (keys, key, public) = sign_key();
    let dir = tempfile::tempdir().unwrap();
    let home = attack_home(dir.path());
    let (log, report, summary) = (
        dir.path().join("log.jsonl"),
        dir.path().join("report.json"),
        dir.path().join("summary.md"),
    );
    let out = command()
        .args(["run", "--headless", "--linger", "0.3", "--log"])
        .arg(&log)
        .arg("--report")
        .arg(&report)
        .arg("--summary")
        .arg(&summary)
        .arg("--sign-key")
        .arg(&key)
        .args([
            "--fail-on",
            "tamper,credential,persistence",
            "--",
            "python3",
        ])
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/attacks/forge_after_end.py"
        ))
        .args(["--wait", "60"])
        .env("ATTACK_HOME", &home)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    // The capture itself saw the attack (the key read, the .bashrc append, the daemon's
    // pidfd_open of the monitor).
    assert_eq!(out.status.code(), Some(3), "{err}");
    let (records, head) = printed_anchor(&err, "end");
    // The daemon forges once the monitor is gone.
    let forge_out = home.join("forge.out");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let said = loop {
        let said = std::fs::read_to_string(&forge_out).unwrap_or_default();
        if said.contains("replay exit") || said.contains("did not exit") {
            break said;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the daemon did not forge within 60 s: {said}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(said.contains("replay exit 0"), "{said}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        !text.contains("id_rsa") && !text.contains(r#""kind":"violation""#),
        "the forge kept the key read: {said}"
    );
    // The rebuilt report and summary are the forger's: nothing happened.
    let typed: Report = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert!(typed.violations.is_empty(), "{:#?}", typed.violations);
    let verify = |args: &[&str]| {
        let out = command()
            .arg("verify")
            .args(args)
            .arg(&log)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    // Without the anchor, the forged log verifies: what issue 13 was about.
    let (code, msg) = verify(&[]);
    assert_eq!(code, Some(0), "the forged chain alone looks intact: {msg}");
    let (code, msg) = verify(&["--head", &head, "--records", &records]);
    assert_eq!(code, Some(1), "{msg}");
    assert!(msg.contains("DOES NOT MATCH THE ANCHOR"), "{msg}");
    let (code, msg) = verify(&["--pubkey", public.to_str().unwrap()]);
    assert_eq!(code, Some(6), "{msg}");
    drop(keys);
}

/// The 32-bit door: `int 0x80` runs an i386 system call, which no syscall tracepoint sees.
/// Before the guard, attack-compat read the key, connected out and appended to .bashrc that
/// way with nothing recorded (exit 0, even with `--fail-on tamper`). Now `run` puts the agent
/// under a seccomp filter (before its exec) that kills a 32-bit or x32 system call with
/// SIGSYS before it runs: .bashrc is untouched, the shell sees status 159 (128 + SIGSYS), and
/// the death is a tamper violation (exit 3).
#[test]
fn a_32_bit_system_call_is_refused_and_on_record() {
    let dir = tempfile::tempdir().unwrap();
    let home = attack_home(dir.path());
    let script = format!(
        "ATTACK_HOME={h} {bin}; echo attack-compat status $? >&2",
        h = home.display(),
        bin = env!("CARGO_BIN_EXE_attack-compat")
    );
    let r = run_attack(dir, &["--fail-on", "tamper"], &script);
    let err = r.stderr();
    assert!(err.contains("attack-compat status 159"), "{err}");
    assert_eq!(r.code(), Some(3), "stderr: {err}");
    let t = tamper(&r);
    assert!(
        t.iter()
            .any(|v| v.summary.contains("killed by SIGSYS") && v.summary.contains("32-bit")),
        "no tamper violation for the refused 32-bit call: {t:#?}"
    );
    assert_eq!(
        std::fs::read_to_string(home.join(".bashrc")).unwrap(),
        "# test bashrc\n",
        "the i386 write to .bashrc ran"
    );
    // A 64-bit program is untouched by the guard.
    let ok = run_attack(
        tempfile::tempdir().unwrap(),
        &["--fail-on", "tamper"],
        "echo 64-bit >/dev/null",
    );
    assert_eq!(ok.code(), Some(0), "stderr: {}", ok.stderr());
}

/// `run --protect`: the agent starts without CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE,
/// CAP_SYS_ADMIN and CAP_SYS_MODULE in its bounding set, so even as root its bpf(2) fails with EPERM (without
/// --protect the same call succeeds, as the first run shows; before it the option did not
/// exist: clap exit 2), and the report says what was taken away.
#[test]
fn protect_takes_bpf_away_from_a_root_agent() {
    let script = "grep CapBnd /proc/self/status >&2; python3 -c '\
import ctypes, sys\n\
libc = ctypes.CDLL(None, use_errno=True)\n\
attr = ctypes.create_string_buffer(16)\n\
r = libc.syscall(321, 12, attr, 16)\n\
print(\"bpf result\", r, \"errno\", ctypes.get_errno(), file=sys.stderr)'";
    let open = run_attack(tempfile::tempdir().unwrap(), &[], script);
    assert!(
        open.stderr().contains("bpf result 0 errno 0"),
        "as root without --protect, BPF_MAP_GET_NEXT_ID finds a map: {}",
        open.stderr()
    );
    assert!(open.report["target"].get("dropped_capabilities").is_none());

    let r = run_attack(tempfile::tempdir().unwrap(), &["--protect"], script);
    let err = r.stderr();
    assert!(
        err.contains("bpf result -1 errno 1"),
        "bpf(2) not refused: {err}"
    );
    let bnd = err
        .lines()
        .find_map(|l| l.strip_prefix("CapBnd:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or_else(|| panic!("no CapBnd line: {err}"));
    for cap in [16, 19, 21, 38, 39] {
        assert_eq!(
            bnd & (1 << cap),
            0,
            "capability {cap} still bounded: {bnd:x}"
        );
    }
    assert_eq!(
        r.report["target"]["dropped_capabilities"],
        serde_json::json!([
            "CAP_BPF",
            "CAP_PERFMON",
            "CAP_SYS_PTRACE",
            "CAP_SYS_ADMIN",
            "CAP_SYS_MODULE"
        ])
    );
}

/// A root agent can read the signing key (and then sign a forged log): before, that read was
/// a plain file entry. Now the key file is one of the monitor's own files, by inode: its open
/// is a `tamper` record, whatever path reached it (here a hard link).
#[test]
fn reading_the_signing_key_is_tamper() {
    let (keys, key, _public) = sign_key();
    let link = keys.path().join("innocent.txt");
    std::fs::hard_link(&key, &link).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let script = format!("cat {} >/dev/null", link.display());
    let r = run_attack(
        dir,
        &["--sign-key", key.to_str().unwrap(), "--fail-on", "tamper"],
        &script,
    );
    assert_eq!(r.code(), Some(3), "stderr: {}", r.stderr());
    let t = tamper(&r);
    assert!(
        t.iter()
            .any(|v| v.summary.contains("own file") && v.summary.contains("innocent.txt")),
        "no tamper violation for the key read: {t:#?}"
    );
}

/// A kernel module load: before, init_module and finit_module were not hooked (a root agent's
/// module load left no record, exit 0 with `--fail-on tamper`). Now their entry tracepoints
/// make a tamper record before the kernel looks at the module: here finit_module of a file
/// that is no module and init_module of 16 bytes of garbage (both fail, ENOEXEC or EINVAL,
/// after the entry hook saw them). A kernel built without module support (this 6.18 one)
/// has no such tracepoints, and no such calls (ENOSYS): `probe.gaps` names both, the capture
/// runs on.
#[test]
fn a_kernel_module_load_is_tamper_or_a_named_gap() {
    let script = "python3 -c '\
import ctypes, os, sys\n\
libc = ctypes.CDLL(None, use_errno=True)\n\
fd = os.open(\"/etc/hostname\", os.O_RDONLY)\n\
r = libc.syscall(313, fd, b\"\", 0)\n\
print(\"finit_module result\", r, \"errno\", ctypes.get_errno(), file=sys.stderr)\n\
image = ctypes.create_string_buffer(16)\n\
r = libc.syscall(175, image, 16, b\"\")\n\
print(\"init_module result\", r, \"errno\", ctypes.get_errno(), file=sys.stderr)'";
    let r = run_attack(
        tempfile::tempdir().unwrap(),
        &["--fail-on", "tamper"],
        script,
    );
    let err = r.stderr();
    assert!(
        err.contains("finit_module result -1") && err.contains("init_module result -1"),
        "{err}"
    );
    let hooked = Path::new("/sys/kernel/tracing/events/syscalls/sys_enter_finit_module").exists();
    let gaps = r.report["probe"]["gaps"].to_string();
    if hooked {
        assert_eq!(r.code(), Some(3), "stderr: {err}");
        let t = tamper(&r);
        for call in ["finit_module", "init_module"] {
            assert!(
                t.iter().any(|v| v
                    .summary
                    .contains(&format!("called {call}: loading a kernel module"))),
                "no tamper violation for {call}: {t:#?}"
            );
        }
        assert!(!gaps.contains("_module could not be attached"), "{gaps}");
    } else {
        assert!(err.contains("finit_module result -1 errno 38"), "{err}");
        for tp in ["sys_enter_finit_module", "sys_enter_init_module"] {
            assert!(
                gaps.contains(&format!(
                    "{tp} could not be attached: this kernel has no such tracepoint"
                )),
                "no gap named for {tp}: {gaps}"
            );
        }
    }
}
