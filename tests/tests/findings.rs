//! Findings a person can act on, from real processes: one finding per behaviour (a process
//! that reads every process's environment is one `credential` finding, after the key), and a
//! tool's normal probing kept out of the summary's "Refused or failed" line.
use integration_tests::*;
use serde_json::Value;

const READ_ALL_ENVIRONS: &str = "import glob
n = 0
for f in glob.glob('/proc/[0-9]*/environ'):
    try:
        open(f, 'rb').read()
        n += 1
    except OSError:
        pass
print(n)";

#[test]
fn reading_every_environ_is_one_finding_ranked_after_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    let key = home.join(".ssh/id_rsa");
    std::fs::write(&key, "-----BEGIN OPENSSH PRIVATE KEY-----\n").unwrap();
    let script = format!(
        "python3 -c \"$READER\" > /dev/null; cat {} > /dev/null; echo x >> {}",
        key.display(),
        home.join(".bashrc").display()
    );
    let summary = dir.path().join("summary.md");
    let r = run_in(
        dir,
        &["--summary", summary.to_str().unwrap()],
        &[
            "env",
            &format!("READER={READ_ALL_ENVIRONS}"),
            "sh",
            "-c",
            &script,
        ],
    );
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let python = r
        .processes()
        .iter()
        // The last exec: `python3` may be a shim (pyenv) that execs the real one.
        .rfind(|p| p["argv"][0].as_str().unwrap_or("").ends_with("python3") && p["argv"][1] == "-c")
        .expect("python ran")
        .clone();
    let environ_files = r
        .files()
        .iter()
        .filter(|f| f["pid"] == python["pid"] && f["path"].as_str().unwrap().ends_with("/environ"))
        .count();
    assert!(
        environ_files > 5,
        "python read many environs: {environ_files}"
    );
    // Those that opened (a process that ended meanwhile gives ESRCH: in the finding's count,
    // not among the processes read).
    let environ_read = r
        .files()
        .iter()
        .filter(|f| {
            f["pid"] == python["pid"]
                && f["path"].as_str().unwrap().ends_with("/environ")
                && f["result"].is_null()
        })
        .count();
    let violations = r.report["violations"].as_array().unwrap();
    let environ: Vec<&Value> = violations
        .iter()
        // The monitor's own environ among them is a `tamper` finding of its own (issue 13).
        .filter(|v| v["kind"] == "credential" && v["summary"].as_str().unwrap().contains("environ"))
        .collect();
    assert_eq!(environ.len(), 1, "one finding for the reader: {environ:#?}");
    let e = environ[0];
    assert_eq!(e["kind"], "credential");
    assert_eq!(e["subject"], "environ");
    assert_eq!(e["pid"], python["pid"]);
    assert_eq!(e["count"], environ_files as u64, "{e:#}");
    assert_eq!(e["paths"].as_array().unwrap().len(), environ_files);
    assert!(
        e["summary"].as_str().unwrap().contains(&format!(
            "read the environment of {environ_files} processes"
        )),
        "{e:#}"
    );
    // The ranking: the key, then persistence, then the grouped finding.
    let at = |needle: &str| {
        violations
            .iter()
            .position(|v| v["summary"].as_str().unwrap().contains(needle))
            .unwrap_or_else(|| panic!("no finding naming {needle}: {violations:#?}"))
    };
    let (k, b, g) = (
        at(key.to_str().unwrap()),
        at(".bashrc"),
        at("environment of"),
    );
    assert!(
        k < b && b < g,
        "key {k}, .bashrc {b}, environ {g}: {violations:#?}"
    );
    let text = std::fs::read_to_string(&summary).unwrap();
    let creds = text
        .lines()
        .find(|l| l.contains("**Credentials read**"))
        .unwrap();
    assert!(
        creds.starts_with(&format!(
            "- **Credentials read**: `{}`, `environ of {environ_read} processes (python3, pid {})`",
            key.display(),
            python["pid"]
        )),
        "{creds}"
    );
}

/// `rm -r` as a tool does it (unlink the directory, EISDIR, then rmdir) is not a failure to
/// list; a write that really failed is, and the probing is counted on the line.
#[test]
fn a_tools_probing_is_not_listed_as_refused() {
    let dir = tempfile::tempdir().unwrap();
    let gone = dir.path().join("gone");
    let kept = dir.path().join("kept");
    std::fs::create_dir(&gone).unwrap();
    std::fs::create_dir(&kept).unwrap();
    let code = format!(
        "import os
try:
    os.unlink('{gone}')
except IsADirectoryError:
    os.rmdir('{gone}')
try:
    open('{kept}', 'w')
except IsADirectoryError:
    pass",
        gone = gone.display(),
        kept = kept.display()
    );
    let summary = dir.path().join("summary.md");
    let r = run_in(
        dir,
        &["--summary", summary.to_str().unwrap()],
        &["python3", "-c", &code],
    );
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let at_gone = r.files_at(gone.to_str().unwrap());
    assert!(
        at_gone
            .iter()
            .any(|f| f["op"] == "delete" && f["result"] == "EISDIR")
            && at_gone
                .iter()
                .any(|f| f["op"] == "delete" && f["result"].is_null()),
        "the report keeps the failed unlink and the removal: {at_gone:#?}"
    );
    let text = std::fs::read_to_string(&summary).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("**Refused or failed**"))
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(
        line,
        format!(
            "- **Refused or failed**: `write {} (EISDIR)`; 1 expected (a tool's probing, in the report's files: EISDIR ×1)",
            kept.display()
        )
    );
}
