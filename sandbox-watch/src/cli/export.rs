//! OTLP export on the command line: `--otlp` on a capture (checked and started before the
//! agent, finished after the end record), `ship` (finished logs) and `verify --otlp-json` (a
//! collector's copy). The exporter itself is [`crate::output::otlp`].
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::args::{CaptureArgs, ShipArgs};
use super::say;
use crate::error::{Result, Usage, exit};
use crate::output::evidence::LogWriter;
use crate::output::otlp::{self, Config, Exporter, Status};
use crate::output::report::{Report, Violation};
use crate::record::ViolationKind;

/// Where `--otlp` without `--log` keeps the log until it is delivered.
pub const DEFAULT_SPOOL: &str = "/var/lib/sandbox-watch/spool";

/// A capture's export, from its start to its end.
pub(super) struct Export {
    exporter: Exporter,
    timeout: Duration,
    /// The log is a spooled one (no --log): removed once everything is delivered.
    spooled: Option<PathBuf>,
}

/// `--otlp`'s configuration (None without `--otlp`); a bad URL or variable is a usage error.
pub(super) fn config(args: &CaptureArgs) -> Result<Option<Config>, Usage> {
    let Some(flag) = args.otlp.as_deref() else {
        return Ok(None);
    };
    Config::from_env(Some(flag))
        .map(Some)
        .map_err(|e| Usage(e.0))
}

/// With `--otlp` and no `--log`: a new log file in the spool directory (created 0700).
pub(super) fn spool_path(args: &CaptureArgs) -> Result<PathBuf, Usage> {
    use std::os::unix::fs::DirBuilderExt as _;
    let dir = args
        .spool
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_SPOOL));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|e| {
            Usage(format!(
                "--otlp keeps its log in {} until it is delivered, and cannot create it: {e}; \
                 give --log PATH or --spool DIR",
                dir.display()
            ))
        })?;
    let now = jiff::Timestamp::now().strftime("%Y%m%dT%H%M%S%.fZ");
    Ok(dir.join(format!("{now}-{}.jsonl", std::process::id())))
}

/// Starts sending the log as it is written (before the agent starts).
pub(super) fn start(
    config: Config,
    log: &LogWriter,
    spooled: bool,
    timeout: f64,
) -> Result<Export> {
    let reader = log.reader()?;
    let exporter = Exporter::start(config, log.path(), reader)?;
    Ok(Export {
        exporter,
        timeout: Duration::from_secs_f64(timeout),
        spooled: spooled.then(|| log.path().to_path_buf()),
    })
}

/// After the end record: waits up to `--otlp-timeout` for the rest to be delivered, and adds
/// the `export` violation when something is missing ([`tell`] says where delivery stands).
pub(super) fn finish(export: Option<Export>, report: &mut Report) -> Option<Status> {
    let export = export?;
    let mut status = export.exporter.finish(export.timeout);
    if let Some(path) = &export.spooled {
        let kept = !status.complete();
        if !kept {
            let _ = std::fs::remove_file(path);
            let _ = std::fs::remove_file(otlp::cursor::path_for(path));
        }
        status.spool = Some(otlp::Spool {
            path: path.display().to_string(),
            kept,
        });
    }
    if let Some(problem) = status.problem() {
        report
            .violations
            .push(Violation::new(ViolationKind::Export, None, problem));
    }
    Some(status)
}

/// Where delivery stands, on stderr (after the TUI, once the terminal is ours again); with
/// what to run when something was not delivered.
pub(super) fn tell(status: &Status, report: &Report) {
    eprintln!("sandbox-watch: {}", line(status));
    if status.pending > 0 {
        let path = status
            .spool
            .as_ref()
            .map(|s| s.path.clone())
            .or_else(|| report.log.as_ref().map(|l| l.path.clone()))
            .unwrap_or_default();
        eprintln!(
            "sandbox-watch: the {} undelivered records are in {path}: `sandbox-watch ship \
             --otlp URL {path}` sends them (from where this run stopped)",
            status.pending
        );
    }
}

/// One line on where delivery stands.
pub(super) fn line(s: &Status) -> String {
    let mut text = format!(
        "OTLP export to {}: {} records sent, {} pending",
        s.endpoint, s.sent, s.pending
    );
    if s.rejected > 0 {
        text.push_str(&format!(", {} rejected", s.rejected));
    }
    if let Some(e) = &s.last_error {
        text.push_str(&format!(
            "; {}: {e}",
            if s.complete() {
                "an error on the way"
            } else {
                "last error"
            }
        ));
    }
    text
}

/// `ship --otlp URL LOG…`: sends each log from where its cursor says (nothing twice when run
/// again). 0 when everything is delivered; 1 when something is not (run it again to resume).
pub fn ship(args: ShipArgs) -> Result<u8> {
    let config = Config::from_env(Some(&args.otlp)).map_err(|e| Usage(e.0))?;
    // Every log is checked before anything is sent.
    let mut opened = Vec::new();
    for path in &args.logs {
        let file = std::fs::File::open(path)
            .map_err(|e| Usage(format!("{}: cannot read it: {e}", path.display())))?;
        if !file.metadata().is_ok_and(|m| m.is_file()) {
            return Err(Usage(format!("{}: not a file", path.display())).into());
        }
        opened.push((path.clone(), file));
    }
    let timeout = Duration::from_secs_f64(args.otlp_timeout);
    let mut all = true;
    for (path, file) in opened {
        let (status, before) = ship_one(&config, &path, file, timeout);
        let shown = path.display();
        let resumed = if before > 0 && before == status.sent && status.pending == 0 {
            "; all of them had been delivered by an earlier run: nothing was sent again".to_string()
        } else if before > 0 {
            format!("; {before} of them had been sent by an earlier run (resumed after those)")
        } else {
            String::new()
        };
        if status.complete() {
            say(&format!("{shown}: {}{resumed}", line(&status)));
        } else {
            all = false;
            eprintln!(
                "{shown}: {}{resumed}; run the same command again to send the rest",
                line(&status)
            );
        }
        if let Some(verdict) = unended(&path) {
            eprintln!("{shown}: {verdict}");
        }
    }
    Ok(if all { 0 } else { exit::OTHER })
}

/// Sends one log until it is all delivered or `timeout` has passed since the last progress.
/// Also returns how many records had been sent by an earlier run.
fn ship_one(config: &Config, path: &Path, file: std::fs::File, timeout: Duration) -> (Status, u64) {
    use otlp::sender::{Sender, Step};
    let mut sender = Sender::new(otlp::client::Client::new(config.clone()), path, file);
    let mut backoff = otlp::exporter::Backoff::default();
    let mut deadline = Instant::now() + timeout;
    loop {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        match sender.step(config.request_timeout.min(deadline - now)) {
            Step::Sent(_) => {
                backoff.reset();
                deadline = Instant::now() + timeout;
            }
            Step::CaughtUp => break,
            Step::Failed(f) => {
                let wait = backoff
                    .next(f.retry_after)
                    .min(deadline.saturating_duration_since(Instant::now()));
                std::thread::sleep(wait);
            }
        }
    }
    let before = sender.progress.before;
    let status = Status {
        endpoint: sender.endpoint().to_string(),
        sent: sender.progress.sent,
        pending: sender.pending(),
        rejected: sender.progress.rejected,
        last_error: sender.progress.last_error.clone(),
        session: sender.session().map(str::to_owned),
        spool: None,
        held_back_ms: 0,
    };
    (status, before)
}

/// A note when the log has no end record (still being written, or cut off).
fn unended(path: &Path) -> Option<String> {
    use crate::output::verify::{Verdict, verify};
    match verify(path).ok()? {
        Verdict::Unended { .. } => Some(
            "this log has no end record (the capture may still be running): ship it again \
             later for the rest"
                .into(),
        ),
        Verdict::Tampered { seq, .. } => Some(format!(
            "this log fails its own check at record {seq} (`sandbox-watch verify` says why); \
             it was sent as it is"
        )),
        _ => None,
    }
}

/// `verify --otlp-json FILE [LOG]`: every session's chain from what the collector received;
/// with LOG, also whether the collector's copy of LOG's session is LOG, whole.
pub fn verify_otlp_json(file: &Path, log: Option<&Path>) -> u8 {
    let shown = file.display();
    let reader = match std::fs::File::open(file) {
        Ok(f) => std::io::BufReader::with_capacity(1 << 20, f),
        Err(e) => {
            eprintln!("{shown}: cannot read: {e}");
            return exit::OTHER;
        }
    };
    let found = match otlp::received::check(reader) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("{shown}: cannot read: {e}");
            return exit::OTHER;
        }
    };
    let mut code = found.exit_code();
    for p in &found.problems {
        eprintln!("{shown}: {p}");
    }
    if found.sessions.is_empty() {
        eprintln!(
            "{shown}: no sandbox-watch records (no log record carries {})",
            otlp::mapping::SESSION_ATTR
        );
    }
    for s in &found.sessions {
        let text = format!("{shown}: {}", s.message());
        match s.verdict {
            otlp::received::Verdict::Intact { .. } => say(&text),
            _ => eprintln!("{text}"),
        }
    }
    if let Some(log) = log {
        let (ok, text) = compare_with_log(&found, log);
        if ok {
            say(&text);
        } else {
            eprintln!("{text}");
            code = exit::OTHER;
        }
    }
    code
}

/// Whether the collector's copy of `log`'s session holds exactly its records.
fn compare_with_log(found: &otlp::received::Found, log: &Path) -> (bool, String) {
    use crate::output::verify::{Verdict as LogVerdict, verify};
    use otlp::received::Verdict;
    let shown = log.display();
    let verdict = match verify(log) {
        Ok(v) => v,
        Err(e) => return (false, format!("{shown}: cannot read: {e}")),
    };
    let records = match verdict {
        LogVerdict::Intact { records } | LogVerdict::Unended { records, .. } => records,
        other => return (false, other.message(&shown.to_string())),
    };
    let text = std::fs::read(log).unwrap_or_default();
    let mut lines = text.split(|&b| b == b'\n').filter(|l| !l.is_empty());
    let session = lines.next().and_then(otlp::mapping::session_of);
    let head = text
        .split(|&b| b == b'\n')
        .rfind(|l| !l.is_empty())
        .and_then(|l| serde_json::from_slice::<serde_json::Value>(l).ok())
        .and_then(|v| v["hash"].as_str().map(str::to_owned));
    let Some(session) = session else {
        return (false, format!("{shown}: no session id in its first line"));
    };
    let Some(copy) = found.sessions.iter().find(|s| s.id == session) else {
        return (
            false,
            format!("{shown}: the collector received nothing of its session {session}"),
        );
    };
    match &copy.verdict {
        Verdict::Intact {
            records: n,
            head: h,
        }
        | Verdict::Unended {
            records: n,
            head: h,
        } if *n == records && Some(h) == head.as_ref() => (
            true,
            format!(
                "{shown}: the collector's copy of session {session} is this log: {n} \
                     records, the same head {h}"
            ),
        ),
        Verdict::Intact {
            records: n,
            head: h,
        }
        | Verdict::Unended {
            records: n,
            head: h,
        } => (
            false,
            format!(
                "{shown}: DIFFERS from the collector's copy of session {session}: the log has \
                 {records} records (head {}), the collector {n} (head {h}); {}",
                head.as_deref().unwrap_or("?"),
                if *n < records {
                    "records after the collector's last were never delivered, or were added to the log later"
                } else {
                    "the log lost records the collector has, or was rewritten"
                }
            ),
        ),
        Verdict::Broken { .. } => (
            false,
            format!("{shown}: the collector's copy of session {session} is not whole (above)"),
        ),
    }
}
