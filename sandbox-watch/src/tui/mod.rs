//! The terminal UI: watch an agent live, see the inside/outside verdict, drill into any record,
//! replay a log.
//!
//! One loop turns terminal input, captured records (the [`Feed`]), the agent's terminal output
//! and a render tick into actions that update the state ([`app`]), then draws ([`ui`]) at most
//! ~30 times a second and only when something changed. The feed is drained a bounded batch at
//! a time, lists are virtualised, and every list is capped, so the capture is never slowed.

mod app;
pub(crate) mod model;
mod pty;
mod ui;

#[cfg(test)]
mod tests;

use std::io::{self, Stdout};
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crossterm::event::{
    DisableBracketedPaste, EnableBracketedPaste, Event as TermEvent, EventStream,
};
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use futures::StreamExt;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use tokio::sync::mpsc::{self, Receiver, error::TryRecvError};

use app::{Action, App};
use pty::AgentIo;

/// What the capture sends the TUI.
#[derive(Debug, Clone)]
// One record at a time through a channel: boxing it would add an allocation to each.
#[allow(clippy::large_enum_variant)]
pub enum Feed {
    /// One record, with its place in the log (when there is one).
    Record(crate::record::Logged),
    /// A log line this version cannot read as a record (a kind from a newer version): shown
    /// in the Log view as it is, and nothing else.
    Other(serde_json::Value),
    /// Sent about every 200 ms by the capture: totals so far.
    Stats { events: u64, lost: u64 },
    /// The capture ended (the agent exited, a signal, --duration); the screen says so and
    /// stays until q.
    Ended { reason: String },
}

#[derive(Debug, Clone, Default)]
pub struct Options {
    /// NO_COLOR is set: no colours, bold and reverse only.
    pub no_color: bool,
    /// Showing a recorded log: elapsed time runs to its end, quitting never asks.
    pub replay: bool,
    /// Replay: what the log's hash chain check said, when it was not intact.
    pub log_problem: Option<LogProblem>,
}

/// A replayed log that is not intact: shown in the header the whole time.
#[derive(Debug, Clone)]
pub struct LogProblem {
    /// The chain is broken (else it only lacks its end record).
    pub tampered: bool,
    /// What `verify` says of it.
    pub message: String,
}

/// What the user chose when quitting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quit {
    /// Quit: nothing of the agent's runs any more, or this is not run mode.
    Normal,
    /// Quit and stop the agent, as on SIGINT (answer `n` to "leave it running?", or the
    /// terminal went away).
    StopAgent,
    /// Quit the TUI and leave the agent running (answer `y`).
    LeaveAgentRunning,
}

/// A frame at most every 33 ms (~30 fps).
const FRAME: Duration = Duration::from_millis(33);
/// A frame at least this often, for the clock.
const CLOCK_FRAMES: u32 = 15;
/// Feed messages taken per loop turn before input and the render tick get their turn.
const FEED_BATCH: usize = 2048;
/// Chunks of agent output taken per loop turn.
const AGENT_BATCH: usize = 64;

/// Runs the TUI on the real terminal until the user quits. `agent_pty`: the master side of the
/// agent's pseudo-terminal, when run mode gave it one (None in attach/replay).
pub async fn run(
    mut feed: Receiver<Feed>,
    options: Options,
    agent_pty: Option<OwnedFd>,
) -> io::Result<Quit> {
    let agent = agent_pty.map(AgentIo::start).transpose()?;
    let mut term = TerminalGuard::enter()?;
    let mut app = App::new(options, agent.is_some(), now_ns());
    let result = event_loop(&mut term.terminal, &mut app, &mut feed, agent).await;
    drop(term);
    result
}

/// Whether the terminal answers the cursor-position query the TUI starts with (ratatui asks
/// it; a terminal that never answers would fail the TUI after the agent started). Asked in
/// raw mode and given back at once; crossterm waits up to 2 s for the answer.
pub fn terminal_answers() -> io::Result<()> {
    enable_raw_mode()?;
    let asked = crossterm::cursor::position();
    let _ = disable_raw_mode();
    asked.map(drop)
}

/// Replay: the records of a log file, read as they are shown, then Ended.
pub async fn replay(log: PathBuf, options: Options) -> io::Result<()> {
    let records = crate::replay::records(&log)?;
    let (tx, rx) = mpsc::channel(4 * FEED_BATCH);
    // A thread of its own: reading is blocking, and it ends when the screen is gone (the send
    // fails) or the log is read.
    std::thread::spawn(move || feed_records(records, &tx));
    let options = Options {
        replay: true,
        ..options
    };
    run(rx, options, None).await.map(|_| ())
}

/// Sends each record, then Ended with what the screen says when the log has been read.
fn feed_records(records: impl Iterator<Item = serde_json::Value>, tx: &mpsc::Sender<Feed>) {
    let mut ended_by = None;
    for v in records {
        let feed = match crate::record::Logged::from_value(&v) {
            Some(r) => {
                if let crate::record::Record::End(e) = &r.record {
                    let by = if e.ended_by.is_empty() {
                        "ended"
                    } else {
                        &e.ended_by
                    };
                    ended_by = Some(by.to_string());
                }
                Feed::Record(r)
            }
            None => Feed::Other(v),
        };
        if tx.blocking_send(feed).is_err() {
            return;
        }
    }
    let reason = match ended_by {
        Some(by) => format!("end of the log ({by})"),
        None => "end of the log, which has no end record (the monitor was stopped)".into(),
    };
    let _ = tx.blocking_send(Feed::Ended { reason });
}

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

// As Feed: one at a time, never stored.
#[allow(clippy::large_enum_variant)]
enum LoopEvent {
    Term(io::Result<TermEvent>),
    TermClosed,
    Tick,
    Feed(Option<Feed>),
    Agent(Option<Vec<u8>>),
}

async fn event_loop(
    terminal: &mut Terminal<CrosstermBackend<Stdout>>,
    app: &mut App,
    feed: &mut Receiver<Feed>,
    mut agent: Option<AgentIo>,
) -> io::Result<Quit> {
    let mut input = EventStream::new();
    let mut tick = tokio::time::interval(FRAME);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut feed_open = true;
    let mut agent_open = agent.is_some();
    let mut frames_since_draw = 0u32;
    loop {
        let event = tokio::select! {
            biased;
            e = input.next() => match e {
                Some(e) => LoopEvent::Term(e),
                None => LoopEvent::TermClosed,
            },
            _ = tick.tick() => LoopEvent::Tick,
            out = agent_output(&mut agent), if agent_open => LoopEvent::Agent(out),
            f = feed.recv(), if feed_open => LoopEvent::Feed(f),
        };
        match event {
            LoopEvent::Term(Ok(TermEvent::Key(key))) => match app.action_for_key(key) {
                Action::Quit(q) => return Ok(q),
                Action::ToAgent(bytes) => {
                    if let Some(a) = &agent {
                        a.send(bytes);
                    }
                }
                action => app.update(action),
            },
            LoopEvent::Term(Ok(TermEvent::Paste(text))) => {
                let to_agent = app.agent.as_ref().filter(|a| a.focused);
                match (to_agent, &agent) {
                    (Some(screen), Some(io)) => {
                        let bytes = if screen.parser.screen().bracketed_paste() {
                            format!("\x1b[200~{text}\x1b[201~").into_bytes()
                        } else {
                            text.into_bytes()
                        };
                        io.send(bytes);
                    }
                    _ => {
                        if app.prompt.is_some() {
                            for c in text.chars().filter(|c| !c.is_control()) {
                                app.update(Action::FilterChar(c));
                            }
                        }
                    }
                }
            }
            LoopEvent::Term(Ok(TermEvent::Resize(..))) => app.dirty = true,
            LoopEvent::Term(Ok(_)) => {}
            LoopEvent::Term(Err(e)) => return Err(e),
            LoopEvent::TermClosed => return Ok(Quit::StopAgent),
            LoopEvent::Tick => {
                app.now_ns = now_ns();
                frames_since_draw += 1;
                if app.dirty || frames_since_draw >= CLOCK_FRAMES {
                    app.prepare();
                    terminal.draw(|f| ui::draw(f, app))?;
                    app.dirty = false;
                    frames_since_draw = 0;
                    if let (Some(screen), Some(io)) = (&mut app.agent, &agent)
                        && let Some((rows, cols)) = screen.pending_resize.take()
                    {
                        // A pty that cannot be resized keeps its old size; nothing to do.
                        let _ = io.resize(rows, cols);
                    }
                }
            }
            LoopEvent::Feed(Some(f)) => {
                app.ingest(f);
                for _ in 1..FEED_BATCH {
                    match feed.try_recv() {
                        Ok(f) => app.ingest(f),
                        Err(TryRecvError::Empty) => break,
                        Err(TryRecvError::Disconnected) => {
                            feed_open = false;
                            feed_closed(app);
                            break;
                        }
                    }
                }
            }
            LoopEvent::Feed(None) => {
                feed_open = false;
                feed_closed(app);
            }
            LoopEvent::Agent(Some(bytes)) => {
                app.agent_output(&bytes);
                if let Some(io) = &mut agent {
                    for _ in 1..AGENT_BATCH {
                        match io.output.try_recv() {
                            Ok(b) => app.agent_output(&b),
                            Err(TryRecvError::Empty) => break,
                            Err(TryRecvError::Disconnected) => {
                                agent_open = false;
                                app.agent_closed();
                                break;
                            }
                        }
                    }
                }
            }
            LoopEvent::Agent(None) => {
                agent_open = false;
                app.agent_closed();
            }
        }
    }
}

async fn agent_output(agent: &mut Option<AgentIo>) -> Option<Vec<u8>> {
    match agent {
        Some(a) => a.output.recv().await,
        None => std::future::pending().await,
    }
}

/// The capture dropped its sender without saying it ended.
fn feed_closed(app: &mut App) {
    if app.ended.is_none() {
        app.ingest(Feed::Ended {
            reason: "the capture stopped".into(),
        });
    }
}

type PanicHook = Box<dyn Fn(&std::panic::PanicHookInfo<'_>) + Sync + Send + 'static>;

/// Owns the terminal while the TUI runs: raw mode, the alternate screen, bracketed paste, and
/// a panic hook that gives the terminal back before the panic message is printed.
/// Not `ratatui::init`/`restore`: they leave bracketed paste on after a panic and keep their
/// panic hook for the rest of the process, which goes on (report, summary) after the TUI.
struct TerminalGuard {
    terminal: Terminal<CrosstermBackend<Stdout>>,
    previous_hook: Option<Arc<PanicHook>>,
}

impl TerminalGuard {
    fn enter() -> io::Result<Self> {
        let previous: Arc<PanicHook> = Arc::new(std::panic::take_hook());
        let chained = previous.clone();
        std::panic::set_hook(Box::new(move |info| {
            restore_terminal();
            chained(info);
        }));
        let mut guard_hook = Some(previous);
        let setup = || -> io::Result<Terminal<CrosstermBackend<Stdout>>> {
            enable_raw_mode()?;
            crossterm::execute!(io::stdout(), EnterAlternateScreen, EnableBracketedPaste)?;
            let mut terminal = Terminal::new(CrosstermBackend::new(io::stdout()))?;
            terminal.hide_cursor()?;
            terminal.clear()?;
            Ok(terminal)
        };
        match setup() {
            Ok(terminal) => Ok(TerminalGuard {
                terminal,
                previous_hook: guard_hook.take(),
            }),
            Err(e) => {
                restore_terminal();
                reinstall_hook(guard_hook.take());
                Err(e)
            }
        }
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore_terminal();
        reinstall_hook(self.previous_hook.take());
    }
}

fn restore_terminal() {
    let _ = disable_raw_mode();
    let _ = crossterm::execute!(
        io::stdout(),
        DisableBracketedPaste,
        LeaveAlternateScreen,
        crossterm::cursor::Show
    );
}

/// Puts back the panic hook that was there before ours.
fn reinstall_hook(previous: Option<Arc<PanicHook>>) {
    let Some(previous) = previous else { return };
    // Dropping our hook drops its clone of `previous`.
    drop(std::panic::take_hook());
    match Arc::try_unwrap(previous) {
        Ok(hook) => std::panic::set_hook(hook),
        Err(shared) => std::panic::set_hook(Box::new(move |info| shared(info))),
    }
}
