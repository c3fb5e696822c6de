//! The live exporter: a thread of its own (at a lower CPU priority than the capture) that
//! tails the evidence log as the capture writes it and sends each whole line, retrying with
//! backoff while the collector is down or busy, and holding back while the capture's drain is
//! behind the kernel ([`backlog`]). The capture never waits for it; when the capture has
//! written its end record, [`Exporter::finish`] gives it a bounded time to catch up and says
//! where delivery stands.
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::Status;
use super::client::Client;
use super::config::Config;
use super::sender::{Progress, Sender, Step};
use crate::kernel::backlog;

/// How often a caught-up exporter looks for new lines (the log is written every 100 ms).
const POLL: Duration = Duration::from_millis(200);

/// How often an exporter holding back for the drain looks again (the drain passes over the
/// ring at least every 10 ms).
const HOLD: Duration = Duration::from_millis(20);

/// Waits between tries while the collector is down: from 100 ms, doubling up to 5 s.
pub struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            next: Duration::from_millis(100),
        }
    }
}

impl Backoff {
    pub fn reset(&mut self) {
        *self = Backoff::default();
    }

    /// The next wait (with up to a quarter more, so many hosts do not retry in step), or what
    /// the collector asked for (at most 30 s).
    pub fn next(&mut self, retry_after: Option<Duration>) -> Duration {
        let wait = self.next;
        self.next = (self.next * 2).min(Duration::from_secs(5));
        if let Some(asked) = retry_after {
            return asked.min(Duration::from_secs(30));
        }
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        wait + wait.mul_f64(f64::from(nanos % 1000) / 4000.0)
    }
}

#[derive(Default)]
struct State {
    /// Set by `finish`: send what is left until then.
    deadline: Option<Instant>,
    progress: Progress,
    session: Option<String>,
    acked_offset: u64,
    /// The thread ended; `pending` is what it counted.
    done: Option<u64>,
    /// Time it held back while the capture's drain was behind.
    held_back: Duration,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The exporter of one capture's log.
pub struct Exporter {
    shared: Arc<Shared>,
    endpoint: String,
    log: PathBuf,
}

impl Exporter {
    /// Starts the thread that sends the log at `path`, read through `file`.
    pub fn start(config: Config, path: &Path, file: File) -> std::io::Result<Exporter> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
        });
        let endpoint = config.shown.clone();
        let request_timeout = config.request_timeout;
        let sender = Sender::new(Client::new(config), path, file);
        let theirs = shared.clone();
        std::thread::Builder::new()
            .name("otlp-export".into())
            .spawn(move || export(sender, &theirs, request_timeout))?;
        Ok(Exporter {
            shared,
            endpoint,
            log: path.to_path_buf(),
        })
    }

    /// Called once the log's last line is written: sends what is left for at most `timeout`,
    /// then says what was sent and what was not.
    pub fn finish(self, timeout: Duration) -> Status {
        let deadline = Instant::now() + timeout;
        let mut state = self.shared.lock();
        state.deadline = Some(deadline);
        self.shared.wake.notify_all();
        // The thread stops by the deadline, unless stuck in a call that does not end: then
        // its last word is taken a moment later.
        let give_up = deadline + Duration::from_millis(500);
        while state.done.is_none() {
            let now = Instant::now();
            if now >= give_up {
                break;
            }
            state = self
                .shared
                .wake
                .wait_timeout(state, give_up - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        let pending = match state.done {
            Some(p) => p,
            None => super::count_lines(&self.log, state.acked_offset),
        };
        let mut last_error = state.progress.last_error.clone();
        if state.done.is_none() {
            last_error = Some(format!(
                "{}; still sending when --otlp-timeout ran out",
                last_error.unwrap_or_else(|| "no answer".into())
            ));
        }
        Status {
            endpoint: self.endpoint.clone(),
            sent: state.progress.sent,
            pending,
            rejected: state.progress.rejected,
            last_error,
            session: state.session.clone(),
            spool: None,
            held_back_ms: state.held_back.as_millis() as u64,
        }
    }
}

/// The thread: send, and when caught up or failing, wait (a finish wakes it at once).
fn export(mut sender: Sender, shared: &Shared, request_timeout: Duration) {
    lower_priority();
    let mut backoff = Backoff::default();
    loop {
        let deadline = shared.lock().deadline;
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            break;
        }
        // While the capture runs and its drain is behind the kernel, the CPU is the drain's:
        // no batch is built or sent (and the collector is not kept busy) until it caught up.
        if deadline.is_none() && backlog::behind() {
            let state = shared.lock();
            let (mut state, _) = shared
                .wake
                .wait_timeout_while(state, HOLD, |s| s.deadline.is_none())
                .unwrap_or_else(|p| p.into_inner());
            state.held_back += now.elapsed();
            continue;
        }
        let timeout = deadline.map_or(request_timeout, |d| request_timeout.min(d - now));
        let step = sender.step(timeout);
        {
            let mut state = shared.lock();
            state.progress = sender.progress.clone();
            state.session = sender.session().map(str::to_owned);
            state.acked_offset = sender.acked_offset();
        }
        let wait = match step {
            Step::Sent(_) => {
                backoff.reset();
                continue;
            }
            // The end record was written before the deadline was set: nothing more comes.
            Step::CaughtUp if deadline.is_some() => break,
            Step::CaughtUp => POLL,
            Step::Failed(f) => backoff.next(f.retry_after),
        };
        let state = shared.lock();
        let finishing = state.deadline.is_some();
        let wait = state.deadline.map_or(wait, |d| {
            wait.min(d.saturating_duration_since(Instant::now()))
        });
        // Woken early when finish sets the deadline.
        let _ = shared
            .wake
            .wait_timeout_while(state, wait, |s| s.deadline.is_some() == finishing);
    }
    let pending = sender.pending();
    let mut state = shared.lock();
    state.progress = sender.progress.clone();
    state.done = Some(pending);
    shared.wake.notify_all();
}

/// The capture comes first: this thread runs at nice 10.
fn lower_priority() {
    // SAFETY: gettid has no preconditions; setpriority on our own thread id changes only this
    // thread's nice value (Linux keeps one per thread).
    unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 10);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_five_seconds_and_honours_retry_after() {
        let mut b = Backoff::default();
        let first = b.next(None);
        assert!(first >= Duration::from_millis(100) && first <= Duration::from_millis(125));
        let mut last = first;
        for _ in 0..10 {
            last = b.next(None);
        }
        assert!(last >= Duration::from_secs(5) && last <= Duration::from_millis(6250));
        assert_eq!(b.next(Some(Duration::from_secs(2))), Duration::from_secs(2));
        assert_eq!(
            b.next(Some(Duration::from_secs(3600))),
            Duration::from_secs(30)
        );
        b.reset();
        assert!(b.next(None) <= Duration::from_millis(125));
    }
}
