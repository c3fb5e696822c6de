//! Issue 15, attribute changes and escalation, on the real kernel: chmod, chown, truncate,
//! mkdir, setxattr and utime calls are file entries of their own op (with what they asked
//! for), and a setuid bit, file capabilities or a write-open of core_pattern is an
//! `escalation` violation that `--fail-on escalation` fails on. Each test fails on the code
//! before (no such entries, and `escalation` was no kind): see the notes of branch `f15a`.
use std::path::Path;

use integration_tests::*;
use serde_json::Value;

fn text(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The report's entries of `op` at `path`, at least one.
fn entries<'a>(r: &'a Run, path: &Path, op: &str) -> Vec<&'a Value> {
    let found: Vec<&Value> = r
        .files_at(text(path))
        .into_iter()
        .filter(|f| f["op"] == op)
        .collect();
    assert!(
        !found.is_empty(),
        "no {op} of {}; files: {:#?}",
        path.display(),
        r.files()
    );
    found
}

fn escalations(r: &Run) -> Vec<&Violation> {
    r.violations_of(ViolationKind::Escalation)
}

/// A directory in /tmp (ext4 here, which keeps extended attributes) with a plain file in it.
fn dir_with_file() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    let file = dir.path().join("f");
    std::fs::write(&file, "0123456789abcdef").unwrap();
    (dir, file)
}

/// Case 12e: `chmod u+s`.
#[test]
fn a_setuid_bit_set_is_an_escalation_and_fails_on_it() {
    let (_dir, file) = dir_with_file();
    let r = run(
        &["--fail-on", "escalation"],
        &["sh", "-c", &format!("chmod u+s {}", text(&file))],
    );
    assert_eq!(r.code(), Some(3), "--fail-on escalation: {}", r.stderr());
    let e = entries(&r, &file, "chmod")[0];
    let mode = e["mode"].as_str().unwrap();
    assert!(mode.len() == 4 && mode.starts_with('4'), "{e:#}");
    assert_eq!(e["escalation"], "the setuid bit", "{e:#}");
    assert!(e.get("result").is_none(), "{e:#}");
    let v = escalations(&r);
    assert_eq!(v.len(), 1, "{:#?}", r.typed.violations);
    assert!(
        v[0].summary.contains(text(&file)) && v[0].summary.contains("setuid"),
        "{}",
        v[0].summary
    );
    // The summary's first line says it.
    let summary = r.typed.summary();
    let first = summary.lines().find(|l| l.starts_with("## ")).unwrap_or("");
    assert!(first.contains("ESCALATION"), "{summary}");
}

/// Case 12d: what `setcap cap_setuid=ep` does: a `security.capability` extended attribute
/// (`vfs_cap_data` revision 2, effective, CAP_SETUID permitted), set by Python so that no
/// tool outside the image is needed.
#[test]
fn file_capabilities_set_are_an_escalation() {
    let (_dir, file) = dir_with_file();
    let script = format!(
        "import os, struct; os.setxattr('{}', 'security.capability', \
         struct.pack('<5I', 0x02000001, 1 << 7, 0, 0, 0))",
        text(&file)
    );
    let r = run(&["--fail-on", "escalation"], &["python3", "-c", &script]);
    assert_eq!(r.code(), Some(3), "{}", r.stderr());
    let e = entries(&r, &file, "setxattr")[0];
    assert_eq!(e["xattr"], "security.capability", "{e:#}");
    assert!(e["escalation"].as_str().is_some(), "{e:#}");
    assert!(e.get("result").is_none(), "the call worked: {e:#}");
    let v = escalations(&r);
    assert_eq!(v.len(), 1, "{:#?}", r.typed.violations);
    assert!(
        v[0].summary.contains("security.capability"),
        "{}",
        v[0].summary
    );
}

/// Case 12f: a write-open of `/proc/sys/kernel/core_pattern`. Opened for writing and closed
/// without a write: the host's value must not change.
#[test]
fn a_write_open_of_core_pattern_is_an_escalation() {
    let core_pattern = Path::new("/proc/sys/kernel/core_pattern");
    let before = std::fs::read_to_string(core_pattern).unwrap();
    let r = run(
        &["--fail-on", "escalation"],
        &[
            "python3",
            "-c",
            "import os; os.close(os.open('/proc/sys/kernel/core_pattern', os.O_WRONLY))",
        ],
    );
    assert_eq!(std::fs::read_to_string(core_pattern).unwrap(), before);
    assert_eq!(r.code(), Some(3), "{}", r.stderr());
    let e = entries(&r, core_pattern, "write")[0];
    assert!(
        e["escalation"].as_str().unwrap().contains("core_pattern"),
        "{e:#}"
    );
    assert_eq!(escalations(&r).len(), 1, "{:#?}", r.typed.violations);
}

/// Case 13: plain attribute changes are entries with what they asked for, and no finding.
#[test]
fn plain_attribute_changes_are_entries_without_a_violation() {
    let (dir, file) = dir_with_file();
    let sub = dir.path().join("d");
    let uid = unsafe { libc::getuid() };
    let script = format!(
        "chmod 644 {f} && chown {uid} {f} && truncate -s 10 {f} && mkdir {d} && \
         touch -d 2020-01-01 {f} && python3 -c \"import os; os.setxattr('{f}', 'user.x', b'1'); \
         fd = os.open('{f}', os.O_RDWR); os.ftruncate(fd, 3); os.fchmod(fd, 0o600)\"",
        f = text(&file),
        d = text(&sub)
    );
    let r = run(&["--fail-on", "escalation"], &["sh", "-c", &script]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let chmods = entries(&r, &file, "chmod");
    assert!(chmods.iter().any(|e| e["mode"] == "644"), "{chmods:#?}");
    // fchmod: the path walked from the descriptor's file, with its inode.
    let fchmod = chmods.iter().find(|e| e["mode"] == "600").expect("fchmod");
    assert!(fchmod["ino"].as_u64().is_some(), "{fchmod:#}");
    let chown = entries(&r, &file, "chown")[0];
    assert_eq!(chown["uid"], uid, "{chown:#}");
    assert!(chown.get("gid").is_none(), "the group was left: {chown:#}");
    let truncates = entries(&r, &file, "truncate");
    assert!(
        truncates.iter().any(|e| e["length"] == 10),
        "{truncates:#?}"
    );
    assert!(
        truncates
            .iter()
            .any(|e| e["length"] == 3 && e["ino"].as_u64().is_some()),
        "ftruncate: {truncates:#?}"
    );
    let mkdir = entries(&r, &sub, "mkdir")[0];
    assert!(mkdir["mode"].as_str().is_some(), "{mkdir:#}");
    entries(&r, &file, "utime");
    let xattr = entries(&r, &file, "setxattr")[0];
    assert_eq!(xattr["xattr"], "user.x", "{xattr:#}");
    for f in r.files() {
        assert!(f.get("escalation").is_none(), "{f:#}");
    }
    assert!(escalations(&r).is_empty(), "{:#?}", r.typed.violations);
}
