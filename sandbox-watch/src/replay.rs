//! `replay LOG`: the report and summary rebuilt from an evidence log alone, after checking its
//! hash chain: its records through the same [`Session`] the capture used. A log that fails the
//! check is said so loudly, and the status is 1.
use std::io::BufRead as _;
use std::path::Path;

use serde_json::Value;

use crate::output::report::{LogInfo, Report};
use crate::output::verify::{self, Verdict as Chain};
use crate::record::Logged;
use crate::state::session::Session;

/// The log format this version writes and reads (in the `start` record).
pub const LOG_SCHEMA: &str = "sandbox-watch/log/1";

/// The report a log describes, and what its hash chain check said.
pub struct Replayed {
    pub report: Report,
    pub chain: Chain,
}

/// The complete records of a log, in order, read as they are needed: the whole log is never
/// held in memory. Stops at the first torn or unparsable line (`verify` says which).
pub fn records(path: &Path) -> std::io::Result<impl Iterator<Item = Value> + use<>> {
    let file = std::fs::File::open(path)?;
    Ok(std::io::BufReader::new(file)
        .lines()
        .map_while(Result::ok)
        .map_while(|line| match serde_json::from_str::<Value>(&line) {
            Ok(v @ Value::Object(_)) => Some(v),
            _ => None,
        }))
}

pub fn load(path: &Path) -> crate::error::Result<Replayed> {
    let chain = verify::verify(path).map_err(|e| {
        crate::error::Usage(format!(
            "{}: cannot read: {e}; give the path of a log written by --log",
            path.display()
        ))
    })?;
    if let Chain::NotALog { reason } = &chain {
        return Err(crate::error::Usage(format!(
            "{}: not a sandbox-watch log: {reason}",
            path.display()
        ))
        .into());
    }
    let mut records = records(path)?.peekable();
    let Some(first) = records.peek() else {
        return Err(crate::error::Usage(format!(
            "{}: no complete record to replay",
            path.display()
        ))
        .into());
    };
    if let Some(schema) = first["schema"].as_str()
        && schema != LOG_SCHEMA
    {
        return Err(crate::error::Usage(format!(
            "{}: written in format {schema}, and this sandbox-watch reads {LOG_SCHEMA}; replay it with the version that wrote it (its hash chain can still be checked with `verify`)",
            path.display()
        ))
        .into());
    }
    let (mut count, mut head) = (0u64, String::new());
    let mut report = rebuild(records.inspect(|r| {
        count += 1;
        head = r["hash"].as_str().unwrap_or_default().to_string();
    }));
    report.log = Some(LogInfo {
        path: path.display().to_string(),
        records: count,
        head,
        chain: Some(
            match chain {
                Chain::Intact { .. } => "intact",
                Chain::Unended { .. } => "unended",
                Chain::Tampered { .. } | Chain::NotALog { .. } => "tampered",
            }
            .to_string(),
        ),
        chain_message: Some(chain.message(&path.display().to_string())),
    });
    Ok(Replayed { report, chain })
}

/// Rebuilds the report from log lines in order: each record this version knows goes through
/// a [`Session`], as it did in the capture that wrote it (see README, "The record").
pub fn rebuild<R: std::borrow::Borrow<Value>>(records: impl IntoIterator<Item = R>) -> Report {
    let mut session = Session::new();
    for r in records {
        if let Some(l) = Logged::from_value(r.borrow()) {
            session.apply(l.at, &l.record);
        }
    }
    session.report()
}
