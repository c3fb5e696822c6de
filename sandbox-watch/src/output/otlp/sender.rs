//! Reads a log from where its cursor says and sends its whole lines in batches: one batch in
//! flight at a time, kept until the collector took it, then the cursor moves past it. Used by
//! the live exporter (which tails the log as the capture writes it) and by `ship`.
use std::fs::File;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use opentelemetry_proto::tonic::resource::v1::Resource;
use sha2::{Digest as _, Sha256};

use super::client::{Client, Failure};
use super::config::Protocol;
use super::cursor::{Cursor, Position};
use super::{encode, mapping};
use crate::output::evidence::MAX_LINE;

/// At most this many records in one request…
const BATCH_RECORDS: usize = 2048;
/// …and about this many bytes of lines (a request is about half as much again). Small, so
/// the exporter of a busy capture holds little (the line buffer, the request in flight):
/// 256 KiB is about 600 records of a capture's file opens, and a few hundred requests a
/// second cost a collector on loopback little.
const BATCH_BYTES: usize = 1 << 18;

/// Where delivery stands.
#[derive(Clone, Debug, Default)]
pub struct Progress {
    /// Records the collector took (in this run and, for `ship`, earlier ones).
    pub sent: u64,
    /// Of those, how many it said it rejected (OTLP partial success).
    pub rejected: u64,
    /// The last error met (a sentence), even if a later try went through.
    pub last_error: Option<String>,
    /// Records that had been sent before this run started (`ship` resuming).
    pub before: u64,
}

/// What one step did.
pub enum Step {
    /// A batch of this many records went through.
    Sent(u64),
    /// Every whole line written so far has been sent.
    CaughtUp,
    /// The batch did not go through: try again later.
    Failed(Failure),
}

/// One log being sent to one endpoint.
pub struct Sender {
    client: Client,
    log: PathBuf,
    file: File,
    session: Option<Session>,
    batch_records: usize,
    in_flight: Option<Batch>,
    buf: Vec<u8>,
    pub progress: Progress,
    cursor_warned: bool,
}

struct Session {
    id: String,
    resource: Resource,
    cursor: Cursor,
    /// What the collector has.
    acked: Position,
}

struct Batch {
    body: Vec<u8>,
    end: Position,
    records: u64,
}

impl Sender {
    /// A sender of the log at `path`, read through `file` (opened for reading).
    pub fn new(client: Client, path: &Path, file: File) -> Sender {
        Sender {
            client,
            log: path.to_path_buf(),
            file,
            session: None,
            batch_records: BATCH_RECORDS,
            in_flight: None,
            buf: Vec::new(),
            progress: Progress::default(),
            cursor_warned: false,
        }
    }

    pub fn endpoint(&self) -> &str {
        &self.client.config().shown
    }

    /// The session id, once the log's first line has been read.
    pub fn session(&self) -> Option<&str> {
        self.session.as_ref().map(|s| s.id.as_str())
    }

    /// Sends the next batch (or tries the one that failed again), waiting at most `timeout`.
    pub fn step(&mut self, timeout: Duration) -> Step {
        if self.session.is_none() && !self.start_session() {
            return Step::CaughtUp;
        }
        if self.in_flight.is_none() {
            match self.next_batch() {
                Some(b) => self.in_flight = Some(b),
                None => return Step::CaughtUp,
            }
        }
        let batch = self.in_flight.as_ref().expect("a batch in flight");
        match self.client.post(&batch.body, timeout) {
            Ok(accepted) => {
                let batch = self.in_flight.take().expect("a batch in flight");
                self.progress.sent += batch.records;
                self.progress.rejected += accepted.rejected;
                if let Some(m) = accepted.message {
                    self.progress.last_error = Some(m);
                }
                let session = self.session.as_mut().expect("a session");
                session.acked = batch.end;
                let endpoint = &self.client.config().shown;
                if let Err(e) = session.cursor.save(endpoint, batch.end)
                    && !self.cursor_warned
                {
                    self.cursor_warned = true;
                    eprintln!(
                        "sandbox-watch: cannot save the delivery cursor {}: {e} (a later `ship` \
                         would send again what was already sent)",
                        session.cursor.path().display()
                    );
                }
                Step::Sent(batch.records)
            }
            Err(f) => {
                if f.too_large && self.batch_records > 1 {
                    // Build it again, smaller.
                    self.batch_records /= 2;
                    self.in_flight = None;
                }
                // A try cut short by the end of the wait says less than the error before it.
                let cut_short = timeout < self.client.config().request_timeout
                    && f.message.contains("no answer within");
                if !(cut_short && self.progress.last_error.is_some()) {
                    self.progress.last_error = Some(f.message.clone());
                }
                Step::Failed(f)
            }
        }
    }

    /// Whole lines in the log the collector does not have yet.
    pub fn pending(&self) -> u64 {
        super::count_lines_in(&self.file, self.acked_offset())
    }

    /// The bytes of the log the collector has.
    pub fn acked_offset(&self) -> u64 {
        self.session.as_ref().map_or(0, |s| s.acked.offset)
    }

    /// Reads line 0 for the session id and finds where delivery stands. False while the log
    /// has no whole first line yet.
    fn start_session(&mut self) -> bool {
        let Some(first) = self.lines_at(0, 1).map(|(lines, _)| lines) else {
            return false;
        };
        let line = &self.buf[..first[0]];
        let id =
            mapping::session_of(line).unwrap_or_else(|| hex::encode(&Sha256::digest(line)[..16]));
        let cursor = Cursor::load(&self.log, &id);
        let mut acked = cursor.position(&self.client.config().shown);
        if !self.ends_a_line(acked.offset) {
            acked = Position::default();
        }
        self.progress.sent = acked.records;
        self.progress.before = acked.records;
        self.session = Some(Session {
            resource: mapping::resource(&id, &self.client.config().resource),
            id,
            cursor,
            acked,
        });
        true
    }

    /// Whether `offset` is 0 or just after a newline inside the file.
    fn ends_a_line(&self, offset: u64) -> bool {
        if offset == 0 {
            return true;
        }
        let mut b = [0u8; 1];
        matches!(self.file.read_at(&mut b, offset - 1), Ok(1) if b[0] == b'\n')
    }

    /// Reads whole lines at `offset` into `self.buf` (at most `max` lines, about BATCH_BYTES):
    /// the length of each (without its newline) and the bytes they take. None while there is
    /// no whole line there.
    fn lines_at(&mut self, offset: u64, max: usize) -> Option<(Vec<usize>, u64)> {
        let mut want = BATCH_BYTES;
        loop {
            self.buf.resize(want, 0);
            let mut got = 0;
            while got < want {
                match self.file.read_at(&mut self.buf[got..], offset + got as u64) {
                    Ok(0) => break,
                    Ok(n) => got += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            let mut lens = Vec::new();
            let mut start = 0;
            while lens.len() < max {
                match self.buf[start..got].iter().position(|&b| b == b'\n') {
                    Some(i) => {
                        lens.push(i);
                        start += i + 1;
                    }
                    None => break,
                }
            }
            if !lens.is_empty() {
                return Some((lens, start as u64));
            }
            // One line longer than what was read: read more, up to the longest line a log has.
            if got == want && want < MAX_LINE + 1 {
                want = (want * 2).min(MAX_LINE + 1);
                continue;
            }
            return None;
        }
    }

    /// The next batch after what was acknowledged, encoded; None when caught up.
    fn next_batch(&mut self) -> Option<Batch> {
        let acked = self.session.as_ref()?.acked;
        let (lens, bytes) = self.lines_at(acked.offset, self.batch_records)?;
        let observed = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let session = self.session.as_ref()?;
        let lines = lens.iter().scan(0, |start, len| {
            let line = &self.buf[*start..*start + len];
            *start += len + 1;
            Some(line)
        });
        let body = match self.client.config().protocol {
            // Straight into protobuf, a record at a time (the bytes prost would write).
            Protocol::Protobuf => {
                // The attributes repeat a few fields of each line: about half as much again.
                let mut batch = encode::Batch::new(&session.resource, bytes as usize * 3 / 2);
                for line in lines {
                    batch.push(line, observed);
                }
                self.client.compress(batch.finish())
            }
            Protocol::Json => {
                let records = lines
                    .map(|line| mapping::log_record(line, observed))
                    .collect();
                self.client
                    .encode(&mapping::request(&session.resource, records))
            }
        };
        Some(Batch {
            body,
            end: Position {
                offset: acked.offset + bytes,
                records: acked.records + lens.len() as u64,
            },
            records: lens.len() as u64,
        })
    }

    /// Removes the cursor file (its log is being removed).
    pub fn remove_cursor(&self) {
        if let Some(s) = &self.session {
            s.cursor.remove();
        }
    }
}
