//! What each command printed, from the kernel's write probes: every traced program's stdout
//! and stderr counted and hashed whole, compared with what the same script prints when run
//! without the monitor; with `--capture-output` the text's head and tail, never the text of a
//! program that read a credential, and never anything of an untraced process.
use std::process::{Command, Stdio};

use integration_tests::*;
use serde_json::Value;
use sha2::Digest;

fn sha(bytes: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(bytes))
}

/// Prints markers to stdout and stderr (a pipe: the test's), one write longer than the
/// kernel's chunk, and a line into a file (a child whose stdout is that file).
fn script(file: &str) -> String {
    format!(
        "printf 'OUT-MARK-1\\n'; printf 'ERR-MARK-2\\n' >&2
         /usr/bin/python3 -c 'import os; os.write(1, bytes(range(256)) * 400)'
         sh -c 'printf FILE-MARK-3' > {file}
         printf 'OUT-END-4\\n'"
    )
}

/// The program run whose argv is `argv`, and its stream (`stdout` or `stderr`).
fn stream<'a>(r: &'a Run, argv: &[&str], name: &str) -> &'a Value {
    &r.exec_of(argv)["output"][name]
}

#[test]
fn what_each_program_printed_is_counted_and_hashed_as_printed() {
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    // The same script without the monitor: what its stdout and stderr received.
    let plain_file = dir.path().join("plain.txt");
    let plain = Command::new("sh")
        .args(["-c", &script(plain_file.to_str().unwrap())])
        .output()
        .unwrap();
    assert!(plain.status.success());
    let file = dir.path().join("file.txt");
    let s = script(file.to_str().unwrap());
    let r = run(&[], &["sh", "-c", &s]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    // What the agent printed came through the monitor unchanged.
    assert_eq!(r.output.stdout, plain.stdout);

    // The shell's own writes, then python's one write of 102400 bytes (more than one chunk):
    // per program run. The whole of stdout is the two joined, as the tee saw it.
    let sh_out = stream(&r, &["sh", "-c", &s], "stdout");
    let py = [
        "/usr/bin/python3",
        "-c",
        "import os; os.write(1, bytes(range(256)) * 400)",
    ];
    let py_out = stream(&r, &py, "stdout");
    let big: Vec<u8> = (0..400).flat_map(|_| 0u8..=255).collect();
    assert_eq!(py_out["bytes"], big.len() as u64, "{py_out}");
    assert_eq!(py_out["sha256"], sha(&big), "{py_out}");
    assert_eq!(sh_out["bytes"], 21, "{sh_out}");
    assert_eq!(
        sh_out["sha256"],
        sha(b"OUT-MARK-1\nOUT-END-4\n"),
        "{sh_out}"
    );
    let mut joined = b"OUT-MARK-1\n".to_vec();
    joined.extend_from_slice(&big);
    joined.extend_from_slice(b"OUT-END-4\n");
    assert_eq!(
        joined, plain.stdout,
        "the script prints what this test thinks"
    );

    let sh_err = stream(&r, &["sh", "-c", &s], "stderr");
    assert_eq!(sh_err["bytes"], plain.stderr.len() as u64);
    assert_eq!(sh_err["sha256"], sha(&plain.stderr));
    // Into a file: the child's stdout is the file.
    let f = stream(&r, &["sh", "-c", "printf FILE-MARK-3"], "stdout");
    assert_eq!(f["sha256"], sha(&std::fs::read(&file).unwrap()), "{f}");
    assert_eq!(f["bytes"], 11);
    // No text without --capture-output.
    for p in r.processes() {
        for name in ["stdout", "stderr"] {
            let o = &p["output"][name];
            assert!(o.get("head").is_none() && o.get("tail").is_none(), "{o}");
        }
    }
}

#[test]
fn capture_output_keeps_redacted_text_but_never_a_credential_readers_or_an_untraced_ones() {
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    let key = dir.path().join("fake_id_key");
    let secret = "FAKEKEY-6b1d0e77c2a94f3b8e5d-TEXT";
    std::fs::write(&key, format!("{secret}\n")).unwrap();
    // An untraced process printing the whole time, to a pipe of its own.
    let mut untraced = Command::new("sh")
        .args([
            "-c",
            "while :; do echo UNTRACED-MARK-9; echo UNTRACED-MARK-9 >&2; sleep 0.01; done",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let long: String = (0..300)
        .map(|i| format!("line {i:04} of a long stream\n"))
        .collect();
    let long_file = dir.path().join("long.txt");
    std::fs::write(&long_file, &long).unwrap();
    let summary = dir.path().join("summary.md");
    let s = format!(
        "printf 'OUT-MARK-1\\n'; printf 'ERR-MARK-2\\n' >&2
         cat {key} > /dev/null
         head -n 5 {key} | cat > /dev/null
         cat {long}
         sh -c 'echo starting; echo \"LAST-ERR-LINE-$((4+1)): no such thing\" >&2; exit 7' || true",
        key = key.display(),
        long = long_file.display()
    );
    let r = run(
        &[
            "--capture-output",
            "--credential",
            key.to_str().unwrap(),
            "--summary",
            summary.to_str().unwrap(),
        ],
        &["sh", "-c", &s],
    );
    let _ = untraced.kill();
    let _ = untraced.wait();
    assert_eq!(r.code(), Some(0), "{}", r.stderr());

    let sh_out = stream(&r, &["sh", "-c", &s], "stdout");
    assert_eq!(sh_out["head"], "OUT-MARK-1\n", "{sh_out}");
    assert_eq!(
        stream(&r, &["sh", "-c", &s], "stderr")["head"],
        "ERR-MARK-2\n"
    );
    // A long stream: its first and last 2 KiB.
    let cat_long = stream(&r, &["cat", long_file.to_str().unwrap()], "stdout");
    assert_eq!(cat_long["sha256"], sha(long.as_bytes()));
    assert_eq!(cat_long["head"], long[..2048], "{cat_long}");
    assert_eq!(cat_long["tail"], long[long.len() - 2048..], "{cat_long}");
    // The credential's reader: counted and hashed, its text withheld, and the report says so.
    let cat_key = stream(&r, &["cat", key.to_str().unwrap()], "stdout");
    assert_eq!(cat_key["bytes"], secret.len() as u64 + 1, "{cat_key}");
    assert_eq!(cat_key["sha256"], sha(format!("{secret}\n").as_bytes()));
    assert!(cat_key.get("head").is_none(), "{cat_key}");
    assert!(
        cat_key["text_withheld"]
            .as_str()
            .is_some_and(|w| w.contains("credential")),
        "{cat_key}"
    );
    // A program given the key's bytes through a pipe: the key's line is cut out of its text.
    let piped = stream(&r, &["cat"], "stdout");
    assert_eq!(piped["head"], "[REDACTED]\n", "{piped}");
    assert_eq!(piped["sha256"], cat_key["sha256"]);
    // The failed command's line names its last stderr line.
    let summary = std::fs::read_to_string(&summary).unwrap();
    assert!(
        summary.contains("LAST-ERR-LINE-5: no such thing"),
        "{summary}"
    );
    // The key's text and the untraced process's are nowhere the monitor wrote.
    let outputs = [
        serde_json::to_string(&r.report).unwrap(),
        r.log_text(),
        summary.clone(),
        String::from_utf8_lossy(&r.output.stdout).into_owned(),
        r.stderr(),
    ];
    for (i, text) in outputs.iter().enumerate() {
        assert!(!text.contains(secret), "the key's text is in output {i}");
        assert!(
            !text.contains("FAKEKEY"),
            "part of the key's text is in output {i}"
        );
        assert!(
            !text.contains("UNTRACED-MARK"),
            "an untraced process's output is in output {i}"
        );
    }
    // Without --capture-output no failed command's stderr is shown.
    let quiet_summary = dir.path().join("quiet.md");
    let q = run(
        &["--summary", quiet_summary.to_str().unwrap()],
        &["sh", "-c", "echo \"LAST-ERR-LINE-$((3+3))\" >&2; exit 4"],
    );
    assert_eq!(q.code(), Some(4));
    let quiet = std::fs::read_to_string(&quiet_summary).unwrap();
    assert!(!quiet.contains("LAST-ERR-LINE-6"), "{quiet}");
    assert!(!q.log_text().contains("LAST-ERR-LINE-6"));
}

/// One write longer than the kernel carries (16 chunks of 16 KiB): the chunks past the limit
/// are counted as lost, and that honest loss is not taken for an attack on the drop counters
/// (before, they were counted without a sequence number, and `--fail-on tamper` failed a run
/// that attacked nothing: "its drop counters were raised by someone").
#[test]
fn a_write_longer_than_the_kernel_carries_is_loss_not_tamper() {
    let r = run(
        &["--fail-on", "tamper"],
        &[
            "/usr/bin/python3",
            "-c",
            "import os; os.write(1, b'x' * 300000)",
        ],
    );
    let tamper = r.violations_of(ViolationKind::Tamper);
    assert!(tamper.is_empty(), "no attack, yet: {tamper:#?}");
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let cov = &r.typed.coverage;
    // 300000 bytes: 16 chunks sent, 3 more (37856 bytes) counted.
    assert_eq!(cov.lost, 3, "{cov:#?}");
    let seq = cov.sequence.as_ref().expect("the sequence count");
    assert_eq!(seq.missing, seq.dropped, "{seq:#?}");
}

/// What Node.js does with its stdout: writev. The bytes of the buffers are carried and hashed
/// as written; a writev of more buffers than the probe reads, or of a buffer longer than its
/// chunk, has its count right, no hash, and says why.
#[test]
fn a_writev_is_hashed_as_its_buffers_and_one_of_too_many_buffers_says_so() {
    let two = "import os; os.writev(1, [b'A' * 10000, b'-tail\\n'])";
    let long = "import os; os.writev(1, [b'B' * 40000])";
    let many = "import os; os.writev(1, [b'%d,' % i for i in range(12)])";
    let script = format!(
        "/usr/bin/python3 -c \"{two}\"; /usr/bin/python3 -c \"{many}\"; /usr/bin/python3 -c \"{long}\""
    );
    let r = run(&[], &["sh", "-c", &script]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let mut want = vec![b'A'; 10000];
    want.extend_from_slice(b"-tail\n");
    let out = stream(&r, &["/usr/bin/python3", "-c", two], "stdout");
    assert_eq!(out["bytes"], want.len() as u64, "{out}");
    assert_eq!(out["sha256"], sha(&want), "{out}");

    let many_bytes: Vec<u8> = (0..12).flat_map(|i| format!("{i},").into_bytes()).collect();
    let out = stream(&r, &["/usr/bin/python3", "-c", many], "stdout");
    assert_eq!(out["bytes"], many_bytes.len() as u64, "{out}");
    assert_eq!(out["sha256"], Value::Null, "{out}");
    let cut = "writev was read in part";
    assert!(
        out["sha256_skipped"].as_str().unwrap().contains(cut),
        "{out}"
    );
    let out = stream(&r, &["/usr/bin/python3", "-c", long], "stdout");
    assert_eq!(
        (&out["bytes"], &out["sha256"]),
        (&40000.into(), &Value::Null),
        "{out}"
    );
    assert!(
        out["sha256_skipped"].as_str().unwrap().contains(cut),
        "{out}"
    );
    assert_eq!(r.report["coverage"]["lost"], 0);
}

/// An agent that floods its stdout to hide what it does meanwhile: while a traced `dd` writes
/// gigabytes to a pipe (faster than any monitor hashes them), the same script reads a
/// credential 200 times with `cat`. The output's bytes can outrun the monitor; the records of
/// what was run and read must not be pushed out by them. Every `cat` is a process entry with
/// its read of the key; whatever was lost is output (named on the stream it belongs to), never
/// an exec, an open or an exit.
#[test]
fn an_output_flood_pushes_out_no_other_record() {
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    let key = dir.path().join("flood-id_ed25519");
    std::fs::write(&key, "-----BEGIN OPENSSH PRIVATE KEY-----\nflood\n").unwrap();
    let key = key.to_str().unwrap();
    const READS: usize = 200;
    let script = format!(
        "dd if=/dev/zero bs=64k count=200000 status=none | cat > /dev/null & F=$!
         sleep 0.2
         for i in $(seq {READS}); do cat {key} > /dev/null; done
         kill $F; wait"
    );
    let r = run(&["--credential", key], &["sh", "-c", &script]);
    assert!(r.code().is_some(), "{}", r.stderr());
    let cats = r.execs_of(&["cat", key]);
    let reads = r
        .files_at(key)
        .iter()
        .filter(|f| f["op"] == "read" && f["credential"] == true)
        .map(|f| f["count"].as_u64().unwrap_or(1))
        .sum::<u64>();
    let cov = &r.report["coverage"];
    eprintln!(
        "{} cats, {reads} credential reads; coverage {cov}",
        cats.len()
    );
    let lost_other: Vec<_> = cov["lost_by_kind"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(kind, n)| *kind != "output" && n.as_u64() != Some(0))
        .collect();
    assert!(
        lost_other.is_empty(),
        "records other than output were lost: {lost_other:?}"
    );
    assert_eq!(cats.len(), READS, "every cat is a process entry");
    assert_eq!(reads, READS as u64, "every read of the key is counted");
    // The flood's own stream: its count is the kernel's, and a hash only if nothing was lost.
    let dd = &r.exec_of(&[
        "dd",
        "if=/dev/zero",
        "bs=64k",
        "count=200000",
        "status=none",
    ]);
    let out = &dd["output"]["stdout"];
    assert!(out["bytes"].as_u64().unwrap() > 0, "{out}");
    if cov["lost_by_kind"]["output"].as_u64().unwrap_or(0) > 0 {
        assert!(
            out["sha256"].is_null() && out["sha256_skipped"].is_string(),
            "output was lost, yet: {out}"
        );
    }
}
