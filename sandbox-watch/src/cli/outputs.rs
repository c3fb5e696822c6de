//! Where the results go: the output paths, checked before anything starts, then the report and
//! summary written at the end, and the `--fail-on` status.
use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::args::Outputs;
use crate::error::{Usage, exit};
use crate::output::{otlp, report};

/// Every output path is checked before anything starts, so a run is never lost to a path
/// that cannot be written at its end: each is a file (not a directory) in a directory that
/// exists, can be written, and no two options name the same file.
pub(super) fn check_outputs(named: &[(&str, Option<&Path>)]) -> Result<(), Usage> {
    let mut seen: Vec<(&str, PathBuf)> = Vec::new();
    for &(option, path) in named {
        let Some(path) = path else { continue };
        let what = || format!("{option} {}", path.display());
        if path.is_dir() {
            return Err(Usage(format!(
                "{}: is a directory; give a file path",
                what()
            )));
        }
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        if !dir.is_dir() {
            return Err(Usage(format!(
                "{}: directory {} does not exist",
                what(),
                dir.display()
            )));
        }
        if nix::unistd::access(dir, nix::unistd::AccessFlags::W_OK).is_err() {
            return Err(Usage(format!(
                "{}: directory {} is not writable",
                what(),
                dir.display()
            )));
        }
        let file = file_key(path);
        if let Some((other, _)) = seen.iter().find(|(_, f)| *f == file) {
            return Err(Usage(format!(
                "{other} and {option} name the same file ({}); give each its own",
                path.display()
            )));
        }
        seen.push((option, file));
    }
    // The report and summary are written at the end: try now (the log and OCSF files are
    // opened now anyway). An existing report is replaced at the end (a new file renamed over
    // it: only its directory matters); an existing summary is opened as it will be appended
    // to (never through a symbolic link, never waiting on a FIFO); a new file is created and
    // removed.
    for &(option, path) in named {
        let Some(path) = path.filter(|_| option != "--log" && option != "--ocsf") else {
            continue;
        };
        let exists = std::fs::symlink_metadata(path).is_ok();
        let tried = if exists && option == "--report" {
            Ok(())
        } else if exists {
            crate::output::safe_file::open_append(path).map(drop)
        } else {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(path)
                .and_then(|_| std::fs::remove_file(path))
        };
        tried.map_err(|e| Usage(format!("{option} {}: cannot write it: {e}", path.display())))?;
    }
    Ok(())
}

/// A path with its directory resolved, to tell whether two options name one file.
pub(super) fn file_key(path: &Path) -> PathBuf {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::canonicalize(dir)
        .unwrap_or_else(|_| dir.to_path_buf())
        .join(path.file_name().unwrap_or_default())
}

/// What names the summary's path, for messages.
pub(super) fn summary_option(out: &Outputs) -> &'static str {
    if out.summary.is_some() {
        "--summary"
    } else {
        "$GITHUB_STEP_SUMMARY"
    }
}

/// Where the summary goes: --summary, else $GITHUB_STEP_SUMMARY when set (and not empty).
pub(super) fn summary_path(out: &Outputs) -> Option<PathBuf> {
    out.summary.clone().or_else(|| {
        std::env::var_os("GITHUB_STEP_SUMMARY")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    })
}

/// The report as written: the capture's, and where its OTLP export stands (`export.otlp`).
#[derive(serde::Serialize)]
struct Written<'a> {
    #[serde(flatten)]
    report: &'a report::Report,
    #[serde(skip_serializing_if = "Option::is_none")]
    export: Option<ExportSection<'a>>,
}

#[derive(serde::Serialize)]
struct ExportSection<'a> {
    otlp: &'a otlp::Status,
}

/// Writes the report and summary; the exit status: 3 on a --fail-on kind, else `code`.
pub(super) fn conclude(
    args: &Outputs,
    report: &report::Report,
    export: Option<&otlp::Status>,
    code: u8,
) -> crate::error::Result<u8> {
    let mut reconciled;
    let report = match &args.transcript {
        Some(_) => {
            reconciled = report.clone();
            reconcile(args, &mut reconciled);
            &reconciled
        }
        None => report,
    };
    write_outputs(args, report, export)?;
    Ok(status(args, report, export, code))
}

/// The report reconciled with the agent's transcript (`--transcript`), read after the capture
/// ended; nothing without the option.
pub(super) fn reconcile(args: &Outputs, report: &mut report::Report) {
    if let Some(option) = &args.transcript {
        crate::judge::transcript::apply(report, option);
    }
}

/// Writes the report and appends the summary to its file (the TUI: as soon as the capture
/// and its export end, with the screen still up).
pub(super) fn write_outputs(
    args: &Outputs,
    report: &report::Report,
    export: Option<&otlp::Status>,
) -> anyhow::Result<()> {
    if let Some(path) = &args.report {
        // Streamed: a report of a million entries is never one string in memory.
        let written = Written {
            report,
            export: export.map(|otlp| ExportSection { otlp }),
        };
        // A new file renamed over the path: whatever the agent put there (a symbolic link to
        // /etc/shadow, a FIFO) is replaced, never written through.
        crate::output::safe_file::replace(path, |f| {
            let mut out = std::io::BufWriter::new(f);
            serde_json::to_writer_pretty(&mut out, &written)?;
            out.flush()
        })
        .map_err(|e| anyhow::anyhow!("--report {}: {e}", path.display()))?;
    }
    if let Some(path) = summary_path(args) {
        // Never through a symbolic link, never waiting on a FIFO, never into a hard link.
        if let Err(e) = crate::output::safe_file::append(&path, summary(report, export).as_bytes())
        {
            eprintln!(
                "sandbox-watch: {} {}: {e}; the summary was not written there",
                summary_option(args),
                path.display()
            );
        }
    }
    Ok(())
}

/// The summary, with the Export line when there was an export.
fn summary(report: &report::Report, export: Option<&otlp::Status>) -> String {
    let mut summary = report.summary();
    if let Some(status) = export {
        summary.push_str(&format!(
            "- **Export**: {}\n",
            report::clean(&super::export::line(status))
        ));
    }
    summary
}

/// Where the export stands and the summary on stderr (once the terminal is ours again), and
/// the exit status: 3 on a --fail-on kind, else `code`.
pub(super) fn status(
    args: &Outputs,
    report: &report::Report,
    export: Option<&otlp::Status>,
    code: u8,
) -> u8 {
    if let Some(status) = export {
        super::export::tell(status, report);
    }
    let _ = std::io::stderr().write_all(summary(report, export).as_bytes());
    let failed: Vec<&report::Violation> = match &args.fail_on {
        Some(kinds) => report
            .violations
            .iter()
            .filter(|v| kinds.0.contains(&v.kind))
            .collect(),
        None => Vec::new(),
    };
    if let Some(v) = failed.first() {
        eprintln!(
            "sandbox-watch: failing (--fail-on {}): {}",
            v.kind.as_str(),
            v.summary
        );
        return exit::FAIL_ON;
    }
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the agent (or anyone) planted at an output path before the start: the check
    /// neither hangs on a FIFO nor writes through a link.
    #[test]
    fn planted_outputs_neither_hang_the_start_nor_are_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"secret\n").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        // A report is replaced at the end, whatever is there now.
        for planted in [&fifo, &link] {
            check_outputs(&[("--report", Some(planted))]).unwrap();
        }
        // A summary is appended to: refused, at once.
        for planted in [&fifo, &link] {
            let e = check_outputs(&[("--summary", Some(planted))]).unwrap_err();
            assert!(e.0.contains("cannot write it"), "{}", e.0);
        }
        assert_eq!(std::fs::read(&victim).unwrap(), b"secret\n");
        // A plain existing summary is fine, and left as it was.
        let summary = dir.path().join("summary.md");
        std::fs::write(&summary, b"# job\n").unwrap();
        check_outputs(&[("--summary", Some(&summary))]).unwrap();
        assert_eq!(std::fs::read(&summary).unwrap(), b"# job\n");
    }
}
