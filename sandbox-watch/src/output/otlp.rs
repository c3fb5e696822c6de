//! OTLP export: every evidence-log line, as it is written, becomes one OpenTelemetry LogRecord
//! sent over OTLP/HTTP to a collector, delivered at least once.
//!
//! # How
//!
//! The exporter does not sit in the capture's path. It tails the log file itself (the writer
//! writes whole lines, so everything up to the last newline is a finished record), batches
//! what it has not sent, POSTs it, and after each batch the collector took, moves a cursor
//! kept beside the log (`<log>.otlp-cursor`: byte offset and record count per endpoint). A
//! collector that is down, busy (429) or failing (5xx) gets the same batch again, with
//! backoff; the capture is never slowed or stopped by it. At the end the capture gives the
//! exporter `--otlp-timeout` to catch up; what is still not delivered stays in the log, and
//! `sandbox-watch ship` sends it later from the cursor on.
//!
//! # Mapping (a contract, see README.md)
//!
//! - body: the log line's exact text (a string, without the newline), so anyone downstream
//!   recomputes the chain from the bodies alone ([`received`] does);
//! - `timeUnixNano` from `at`, `observedTimeUnixNano` when sent; event name
//!   `sandbox_watch.<kind>`; severity INFO, WARN for `violation` records;
//! - attributes `sandbox_watch.seq` (int), `sandbox_watch.kind`, `sandbox_watch.hash`,
//!   `sandbox_watch.prev`, and semantic-convention ones where a field means the same:
//!   `process.pid`, `process.parent_pid`, `process.user.id`, `process.exit.code`,
//!   `process.executable.path`, `process.working_directory`, `process.command_args`,
//!   `file.path`, `server.address`, `server.port`, `network.transport`,
//!   `dns.question.name`, `sandbox_watch.violation`;
//! - resource `service.name=sandbox-watch`, `service.version`, `host.name`, `host.id`
//!   (/etc/machine-id), then `OTEL_RESOURCE_ATTRIBUTES` and `OTEL_SERVICE_NAME`, and
//!   `sandbox_watch.session.id`: the `session_id` of the log's start record, which nothing
//!   overrides; scope `sandbox-watch`.
//!
//! A receiver that wants each record once keys on (`sandbox_watch.session.id`,
//! `sandbox_watch.seq`): at-least-once delivery may repeat a batch.
pub mod client;
pub mod config;
pub mod cursor;
pub mod encode;
pub mod exporter;
pub mod mapping;
pub mod received;
pub mod sender;

use std::os::unix::fs::FileExt as _;
use std::path::Path;

use serde::Serialize;

pub use config::{BadConfig, Config};
pub use exporter::Exporter;

/// Where delivery to one endpoint stands: the report's `export.otlp`.
#[derive(Clone, Debug, Serialize)]
pub struct Status {
    /// Where the records went (without any query string).
    pub endpoint: String,
    /// Records the collector took.
    pub sent: u64,
    /// Records it does not have (still in the log, for `ship`).
    pub pending: u64,
    /// Records it took but said it rejected (OTLP partial success).
    pub rejected: u64,
    /// The last error met, as a sentence (also when a later try went through).
    pub last_error: Option<String>,
    /// The `sandbox_watch.session.id` the records were sent under.
    pub session: Option<String>,
    /// With `--otlp` and no `--log`: the spooled log, kept when something is pending.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spool: Option<Spool>,
    /// Milliseconds the live exporter held back while the capture's drain was behind the
    /// kernel (its CPU went to draining first); 0 for `ship`.
    pub held_back_ms: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Spool {
    pub path: String,
    /// False: everything was delivered and the spooled log removed.
    pub kept: bool,
}

impl Status {
    /// Everything was delivered and nothing rejected.
    pub fn complete(&self) -> bool {
        self.pending == 0 && self.rejected == 0
    }

    /// The `export` violation's sentence, when delivery is not complete.
    pub fn problem(&self) -> Option<String> {
        if self.complete() {
            return None;
        }
        let mut s = String::new();
        if self.pending > 0 {
            s = format!(
                "{} log records were not delivered to {}",
                self.pending, self.endpoint
            );
        }
        if self.rejected > 0 {
            if !s.is_empty() {
                s.push_str("; ");
            }
            s.push_str(&format!(
                "{} records were rejected by {}",
                self.rejected, self.endpoint
            ));
        }
        if let Some(e) = &self.last_error {
            s.push_str(&format!(" (last error: {e})"));
        }
        Some(s)
    }
}

/// Whole lines in the file at `path` after byte `from`.
pub fn count_lines(path: &Path, from: u64) -> u64 {
    std::fs::File::open(path).map_or(0, |f| count_lines_in(&f, from))
}

/// Whole lines in `file` after byte `from`.
pub fn count_lines_in(file: &std::fs::File, from: u64) -> u64 {
    let mut buf = vec![0u8; 1 << 20];
    let (mut at, mut lines) = (from, 0u64);
    loop {
        match file.read_at(&mut buf, at) {
            Ok(0) | Err(_) => return lines,
            Ok(n) => {
                lines += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
                at += n as u64;
            }
        }
    }
}
