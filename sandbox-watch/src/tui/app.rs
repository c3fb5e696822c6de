//! The TUI's state and the actions that change it. Terminal input becomes an [`Action`]
//! ([`App::action_for_key`]); captured records are ingested ([`App::ingest`], in
//! `app/ingest.rs`); the details pane is put together in `app/details.rs`; drawing lives in
//! `ui.rs` and only reads this (plus scroll offsets and the page height it measures).

use std::collections::VecDeque;
use std::num::NonZeroU16;
use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use serde_json::Value;

use super::model::Rows;
use super::model::{
    Alert, AlertKind, LIST_CAP, LogRow, NET_LATER_CAP, NetRecords, StepRow, Steps, Tree, Verdict,
    at_ns, file_matches, i64_field, join_argv, net_matches, ns, proc_argv, proc_matches,
    signal_name, step_command, step_matches, str_field, summarize, target_text, u64_field,
};
use super::{Feed, Options, Quit};
use crate::record::{Logged, Record};
use crate::state::session::{Applied, Session};

mod details;
mod ingest;

/// Sparkline samples kept (Stats arrive every ~200 ms: 24 s of history).
const RATE_SAMPLES: usize = 120;
/// Buckets of the records-over-log-time histogram (the rate when there are no Stats, as in
/// replay); when full, pairs are merged and the bucket doubles.
const HIST_BUCKETS: usize = 1024;
const HIST_FIRST_BUCKET_NS: i64 = 100_000_000;
/// Alert lines kept for the gaps of the probe (each gap is one alert).
const GAP_ALERTS_MAX: usize = 16;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum View {
    Processes,
    Files,
    Network,
    Alerts,
    Log,
    ToolCalls,
}

/// How many views there are (the per-view arrays' length).
pub(crate) const VIEWS: usize = 6;

impl View {
    pub(crate) const ALL: [View; VIEWS] = [
        View::Processes,
        View::Files,
        View::Network,
        View::Alerts,
        View::Log,
        View::ToolCalls,
    ];

    pub(crate) fn index(self) -> usize {
        self as usize
    }

    pub(crate) fn title(self) -> &'static str {
        match self {
            View::Processes => "Processes",
            View::Files => "Files",
            View::Network => "Network",
            View::Alerts => "Alerts",
            View::Log => "Log",
            View::ToolCalls => "Tool calls",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Move {
    Up,
    Down,
    PageUp,
    PageDown,
    Home,
    End,
}

#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) enum Action {
    /// Leave the TUI.
    Quit(Quit),
    /// q while the agent still runs: ask before quitting.
    AskQuit,
    CancelQuit,
    ShowView(View),
    NextView,
    PrevView,
    Move(Move),
    ToggleFollow,
    TogglePause,
    OpenDetails,
    /// Esc on the help or details overlay.
    CloseOverlay,
    ToggleHelp,
    FilterStart,
    FilterChar(char),
    FilterBackspace,
    FilterClearInput,
    FilterApply,
    /// Esc while typing: the filter is dropped.
    FilterCancel,
    /// Esc with a filter applied.
    ClearFilter,
    NextMatch,
    PrevMatch,
    FocusAgent,
    FocusMonitor,
    /// Bytes for the agent's terminal (the loop writes them to the pty master).
    ToAgent(Vec<u8>),
    Noop,
}

/// A substring filter on one view, with the rows it matches (ids for flat lists, positions in
/// the tree order for processes), kept up to date as rows arrive.
pub(crate) struct Filter {
    /// As typed.
    pub pattern: String,
    /// Lower-cased, for matching.
    needle: String,
    pub matches: VecDeque<u64>,
    /// Flat lists: rows up to this id have been looked at.
    scanned: u64,
}

pub(crate) struct ViewState {
    /// The selected row: an id (flat lists) or an index in `procs` (processes).
    pub sel: Option<u64>,
    /// First visible position (kept by the drawing code so the selection stays in view).
    pub offset: usize,
    /// Stick to the newest row.
    pub follow: bool,
    pub filter: Option<Filter>,
    /// Rows the list showed last frame (for PgUp/PgDn).
    pub height: usize,
}

impl ViewState {
    fn new(follow: bool) -> Self {
        ViewState {
            sel: None,
            offset: 0,
            follow,
            filter: None,
            height: 10,
        }
    }
}

/// The visible rows of a view: keys `lo..hi` (or the filter's matches among them), possibly
/// newest first.
pub(crate) struct Visible<'a> {
    lo: u64,
    matches: Option<(&'a VecDeque<u64>, usize)>,
    reversed: bool,
    pub len: usize,
}

impl Visible<'_> {
    pub(crate) fn key_at(&self, pos: usize) -> Option<u64> {
        if pos >= self.len {
            return None;
        }
        let p = if self.reversed {
            self.len - 1 - pos
        } else {
            pos
        };
        match self.matches {
            Some((m, start)) => m.get(start + p).copied(),
            None => Some(self.lo + p as u64),
        }
    }

    /// The position of `key`, or of the nearest visible row after it.
    pub(crate) fn pos_of(&self, key: u64) -> usize {
        if self.len == 0 {
            return 0;
        }
        let idx = match self.matches {
            Some((m, start)) => m.partition_point(|&k| k < key).saturating_sub(start),
            None => usize::try_from(key.saturating_sub(self.lo)).unwrap_or(usize::MAX),
        }
        .min(self.len - 1);
        if self.reversed {
            self.len - 1 - idx
        } else {
            idx
        }
    }

    /// The position of the newest row.
    pub(crate) fn newest(&self) -> usize {
        if self.reversed {
            0
        } else {
            self.len.saturating_sub(1)
        }
    }
}

/// What the header shows; computed each frame, or frozen while paused.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct HeaderInfo {
    pub target: String,
    pub netns: String,
    pub hook: String,
    pub gaps: usize,
    pub elapsed_ns: Option<i64>,
    pub events: u64,
    pub lost: u64,
    pub rate: Vec<u64>,
    /// Events in the last second, from Stats.
    pub rate_per_s: Option<u64>,
    pub outside: bool,
    pub reason: Option<String>,
    pub counts: [u64; VIEWS],
}

pub(crate) struct Paused {
    pub header: HeaderInfo,
    /// Flat lists: rows from this id on are not shown.
    ends: [u64; VIEWS],
}

pub(crate) struct Details {
    pub title: String,
    pub lines: Vec<String>,
    pub scroll: usize,
}

/// The agent's terminal as the pane shows it.
pub(crate) struct AgentScreen {
    pub parser: vt100::Parser,
    pub focused: bool,
    pub exited: bool,
    /// A size the pane took that the pty has not been told yet (rows, cols).
    pub pending_resize: Option<(u16, u16)>,
}

impl AgentScreen {
    pub(crate) fn new(rows: u16, cols: u16) -> Self {
        let nz = |n: u16| NonZeroU16::new(n).unwrap_or(NonZeroU16::MIN);
        AgentScreen {
            parser: vt100::Parser::new(nz(rows), nz(cols), 1000),
            focused: false,
            exited: false,
            pending_resize: None,
        }
    }

    /// Called by the drawing code with the pane's inner size.
    pub(crate) fn fit(&mut self, rows: u16, cols: u16) {
        let (r, c) = self.parser.screen().size();
        if (r.get(), c.get()) != (rows, cols) && rows > 0 && cols > 0 {
            let nz = |n: u16| NonZeroU16::new(n).unwrap_or(NonZeroU16::MIN);
            self.parser.set_size(nz(rows), nz(cols));
            self.pending_resize = Some((rows, cols));
        }
    }
}

struct StartInfo {
    target: String,
    mode: String,
    agent_netns: Option<u64>,
    hook: Option<String>,
    gaps: usize,
}

pub(crate) struct App {
    pub options: Options,
    /// The wall clock, ns since the epoch; set by the loop each tick, fixed by tests.
    pub now_ns: i64,

    start: Option<StartInfo>,
    first_at: Option<i64>,
    last_at: Option<i64>,
    end_at: Option<i64>,
    ended_now: Option<i64>,
    /// Set when the capture ended: why.
    pub ended: Option<String>,
    end_verdict_outside: bool,
    outside_reason: Option<String>,
    records: u64,
    stats_events: Option<u64>,
    stats_lost: u64,
    end_events: Option<u64>,
    end_lost: u64,
    rate: VecDeque<u64>,
    hist: Vec<u64>,
    hist_bucket_ns: i64,
    lost_alerted: bool,
    /// The capture's final violations arrived and replaced the alerts derived live.
    final_alerts: bool,
    /// Alert ids given up when that happened (the gaps were pushed again).
    alerts_replaced: u64,
    /// The gap alerts, pushed again after the final violations (which show in rank order).
    gaps_after: Vec<Alert>,
    /// Live: one alert per process that reads other processes' environments, counted up.
    environ_alerts: std::collections::HashMap<u32, EnvironAlert>,

    /// The state the records make: the same as the report's (the views show its entries).
    pub session: Session,
    /// The process entries as a tree, with their records.
    pub procs: Tree,
    /// The tool calls with their effects, for the Tool calls view.
    pub steps: Steps,
    /// Each file entry's first record (for the details pane).
    pub file_raw: Vec<Arc<str>>,
    /// Each network entry's records.
    pub net_raw: Vec<NetRecords>,
    pub alerts: Rows<Alert>,
    pub log: Rows<LogRow>,

    pub view: View,
    pub views: [ViewState; VIEWS],
    pub help: bool,
    pub details: Option<Details>,
    /// The filter being typed.
    pub prompt: Option<String>,
    pub confirm_quit: bool,
    pub paused: Option<Paused>,
    /// A one-line message for the status bar, until the next key.
    pub status: Option<String>,
    pub agent: Option<AgentScreen>,
    /// Something changed since the last frame.
    pub dirty: bool,
    /// Table rows turned into widgets so far (tests check this stays bounded).
    pub rows_built: u64,
}

/// The live alert of one process's environ reads: its id and what it counted so far.
#[derive(Default)]
struct EnvironAlert {
    id: u64,
    read: u64,
    failed: u64,
    /// The file entries counted (a failed open's entry comes again with each repeat).
    entries: std::collections::HashSet<usize>,
}

impl App {
    pub(crate) fn new(options: Options, agent_pane: bool, now_ns: i64) -> Self {
        App {
            options,
            now_ns,
            start: None,
            first_at: None,
            last_at: None,
            end_at: None,
            ended_now: None,
            ended: None,
            end_verdict_outside: false,
            outside_reason: None,
            records: 0,
            stats_events: None,
            stats_lost: 0,
            end_events: None,
            end_lost: 0,
            rate: VecDeque::new(),
            hist: Vec::new(),
            hist_bucket_ns: HIST_FIRST_BUCKET_NS,
            lost_alerted: false,
            final_alerts: false,
            alerts_replaced: 0,
            gaps_after: Vec::new(),
            environ_alerts: std::collections::HashMap::new(),
            session: Session::new(),
            procs: Tree::default(),
            steps: Steps::default(),
            file_raw: Vec::new(),
            net_raw: Vec::new(),
            alerts: Rows::new(LIST_CAP),
            log: Rows::new(LIST_CAP),
            view: View::Processes,
            views: [
                ViewState::new(false),
                ViewState::new(false),
                ViewState::new(false),
                ViewState::new(false),
                ViewState::new(true),
                ViewState::new(false),
            ],
            help: false,
            details: None,
            prompt: None,
            confirm_quit: false,
            paused: None,
            status: None,
            agent: agent_pane.then(|| AgentScreen::new(24, 80)),
            dirty: true,
            rows_built: 0,
        }
    }

    /// Run mode and the agent may still be running: quitting asks first.
    pub(crate) fn agent_may_run(&self) -> bool {
        let run_mode = self.agent.is_some() || self.start.as_ref().is_some_and(|s| s.mode == "run");
        run_mode && !self.options.replay && self.ended.is_none()
    }

    /// First record's time, for relative times (`+1.234s`).
    pub(crate) fn first_at(&self) -> Option<i64> {
        self.first_at
    }

    /// The time "now" means for durations: the wall clock while live, the end once ended.
    pub(crate) fn clock_end(&self) -> i64 {
        if self.options.replay {
            self.end_at.or(self.last_at).unwrap_or(self.now_ns)
        } else if self.ended.is_some() {
            self.end_at.or(self.ended_now).unwrap_or(self.now_ns)
        } else {
            self.now_ns
        }
    }

    fn elapsed_ns(&self) -> Option<i64> {
        let first = self.first_at?;
        Some((self.clock_end() - first).max(0))
    }

    pub(crate) fn header_info(&self) -> HeaderInfo {
        if let Some(p) = &self.paused {
            return p.header.clone();
        }
        let start = self.start.as_ref();
        let first_exec = self.session.processes.agent_netns;
        let netns = match (start.and_then(|s| s.agent_netns), first_exec) {
            (Some(n), _) => format!("netns {n}"),
            (None, Some(n)) => format!("netns {n} (first exec)"),
            (None, None) => "netns ?".to_string(),
        };
        let rate: Vec<u64> = if self.stats_events.is_some() {
            self.rate.iter().copied().collect()
        } else {
            self.hist.clone()
        };
        let rate_per_s = (!self.rate.is_empty()).then(|| self.rate.iter().rev().take(5).sum());
        let outside = self.outside_reason.is_some() || self.end_verdict_outside;
        let reason = self.outside_reason.clone().or_else(|| {
            self.end_verdict_outside
                .then(|| "the capture's verdict is outside".to_string())
        });
        HeaderInfo {
            target: start.map(|s| s.target.clone()).unwrap_or_default(),
            netns,
            hook: start.and_then(|s| s.hook.clone()).unwrap_or_default(),
            gaps: start.map_or(0, |s| s.gaps),
            elapsed_ns: self.elapsed_ns(),
            events: self
                .stats_events
                .or(self.end_events)
                .unwrap_or(self.records),
            lost: self.stats_lost.max(self.end_lost),
            rate,
            rate_per_s,
            outside,
            reason,
            counts: [
                self.procs.nodes.len() as u64 + self.procs.not_stored,
                self.session.files.entries.len() as u64,
                self.session.network.entries.len() as u64,
                self.alerts.end() - self.alerts_replaced,
                self.log.end(),
                self.session.tool_calls.list.len() as u64,
            ],
        }
    }

    // -----------------------------------------------------------------------------------------
    // Lists.

    fn flat_bounds(&self, view: View) -> (u64, u64) {
        let (first, end) = match view {
            View::Processes => (0, self.procs.order.len() as u64),
            View::ToolCalls => (0, self.steps.order.len() as u64),
            View::Files => (0, self.session.files.entries.len() as u64),
            View::Network => (0, self.session.network.entries.len() as u64),
            View::Alerts => (self.alerts.first(), self.alerts.end()),
            View::Log => (self.log.first(), self.log.end()),
        };
        let end = match (&self.paused, view) {
            (Some(p), v) if !matches!(v, View::Processes | View::ToolCalls) => {
                p.ends[v.index()].clamp(first, end)
            }
            _ => end,
        };
        (first, end)
    }

    pub(crate) fn visible(&self, view: View) -> Visible<'_> {
        let (lo, hi) = self.flat_bounds(view);
        // Live alerts newest first; the final violations in the report's rank order.
        let reversed = view == View::Alerts && !self.final_alerts;
        match &self.views[view.index()].filter {
            Some(f) => {
                let start = f.matches.partition_point(|&k| k < lo);
                let stop = f.matches.partition_point(|&k| k < hi);
                Visible {
                    lo,
                    matches: Some((&f.matches, start)),
                    reversed,
                    len: stop.saturating_sub(start),
                }
            }
            None => Visible {
                lo,
                matches: None,
                reversed,
                len: usize::try_from(hi - lo).unwrap_or(usize::MAX),
            },
        }
    }

    fn sel_key(&self, view: View) -> Option<u64> {
        let sel = self.views[view.index()].sel?;
        match view {
            View::Processes => {
                let pos = *self.procs.pos_of.get(usize::try_from(sel).ok()?)?;
                Some(u64::from(pos))
            }
            View::ToolCalls => self.steps.pos_of.get(&sel).map(|&p| u64::from(p)),
            _ => Some(sel),
        }
    }

    fn set_sel_key(&mut self, view: View, key: Option<u64>) {
        let sel = match (view, key) {
            (View::Processes, Some(k)) => self
                .procs
                .order
                .get(usize::try_from(k).unwrap_or(usize::MAX))
                .map(|&(i, _)| u64::from(i)),
            (View::ToolCalls, Some(k)) => self
                .steps
                .order
                .get(usize::try_from(k).unwrap_or(usize::MAX))
                .map(|(row, _)| row.key()),
            (_, k) => k,
        };
        self.views[view.index()].sel = sel;
    }

    /// The selected position in the visible list, if any row is visible.
    pub(crate) fn selected_pos(&self, view: View) -> Option<usize> {
        let vis = self.visible(view);
        if vis.len == 0 {
            return None;
        }
        Some(match self.sel_key(view) {
            Some(k) => vis.pos_of(k),
            None => 0,
        })
    }

    /// Brings derived state up to date before drawing or moving: tree order, filters, follow.
    /// Costs what arrived since the last call (plus a tree walk when processes changed).
    pub(crate) fn prepare(&mut self) {
        if self.procs.dirty && self.paused.is_none() {
            self.procs.flatten();
            if let Some(f) = &mut self.views[View::Processes.index()].filter {
                f.matches.clear();
                for (pos, &(i, _)) in self.procs.order.iter().enumerate() {
                    if proc_matches(&self.session.processes.list[i as usize], &f.needle) {
                        f.matches.push_back(pos as u64);
                    }
                }
            }
        }
        if self.paused.is_none() {
            self.steps.sync(&self.session);
        }
        if self.steps.dirty && self.paused.is_none() {
            self.steps.flatten();
            if let Some(f) = self.views[View::ToolCalls.index()].filter.take() {
                self.set_filter(View::ToolCalls, f.pattern);
            }
        }
        self.sync_filter(View::Files);
        self.sync_filter(View::Network);
        self.sync_filter(View::Alerts);
        self.sync_filter(View::Log);
        for view in View::ALL {
            if self.views[view.index()].follow {
                let vis = self.visible(view);
                let key = vis.key_at(vis.newest());
                if key.is_some() {
                    self.set_sel_key(view, key);
                }
            }
        }
    }

    fn row_matches(&self, view: View, key: u64, needle: &str) -> bool {
        match view {
            View::Processes => self.procs.order.get(key as usize).is_some_and(|&(i, _)| {
                proc_matches(&self.session.processes.list[i as usize], needle)
            }),
            View::Files => self
                .session
                .files
                .entries
                .get(key as usize)
                .is_some_and(|r| file_matches(r, needle)),
            View::Network => self
                .session
                .network
                .entries
                .get(key as usize)
                .is_some_and(|r| net_matches(r, needle)),
            View::Alerts => self
                .alerts
                .get(key)
                .is_some_and(|r| r.search_matches(needle)),
            View::Log => self.log.get(key).is_some_and(|r| r.search_matches(needle)),
            View::ToolCalls => self.steps.order.get(key as usize).is_some_and(|&(_, g)| {
                step_matches(&self.session, (g as usize).checked_sub(1), needle)
            }),
        }
    }

    fn list_ids(&self, view: View) -> (u64, u64) {
        match view {
            View::Processes => (0, self.procs.order.len() as u64),
            View::Files => (0, self.session.files.entries.len() as u64),
            View::Network => (0, self.session.network.entries.len() as u64),
            View::Alerts => (self.alerts.first(), self.alerts.end()),
            View::Log => (self.log.first(), self.log.end()),
            View::ToolCalls => (0, self.steps.order.len() as u64),
        }
    }

    /// Flat lists: forget matches that were dropped, look at rows that arrived.
    fn sync_filter(&mut self, view: View) {
        let (first, end) = self.list_ids(view);
        let Some(mut f) = self.views[view.index()].filter.take() else {
            return;
        };
        while f.matches.front().is_some_and(|&k| k < first) {
            f.matches.pop_front();
        }
        for id in f.scanned.max(first)..end {
            if self.row_matches(view, id, &f.needle) {
                f.matches.push_back(id);
            }
        }
        f.scanned = end;
        self.views[view.index()].filter = Some(f);
    }

    fn set_filter(&mut self, view: View, pattern: String) {
        let needle = pattern.to_lowercase();
        let (first, end) = self.list_ids(view);
        let mut matches = VecDeque::new();
        if view == View::ToolCalls {
            // Whether each group is picked, once: its rows follow.
            let picked: Vec<bool> = (0..=self.session.tool_calls.list.len())
                .map(|g| step_matches(&self.session, g.checked_sub(1), &needle))
                .collect();
            for (pos, &(_, g)) in self.steps.order.iter().enumerate() {
                if picked.get(g as usize) == Some(&true) {
                    matches.push_back(pos as u64);
                }
            }
        } else {
            for key in first..end {
                if self.row_matches(view, key, &needle) {
                    matches.push_back(key);
                }
            }
        }
        self.views[view.index()].filter = Some(Filter {
            pattern,
            needle,
            matches,
            scanned: end,
        });
    }

    fn move_sel(&mut self, view: View, mv: Move) {
        self.prepare();
        let vis = self.visible(view);
        if vis.len == 0 {
            return;
        }
        let last = vis.len - 1;
        let cur = self.selected_pos(view).unwrap_or(0);
        let page = self.views[view.index()].height.max(2) - 1;
        let new = match mv {
            Move::Up => cur.saturating_sub(1),
            Move::Down => (cur + 1).min(last),
            Move::PageUp => cur.saturating_sub(page),
            Move::PageDown => (cur + page).min(last),
            Move::Home => 0,
            Move::End => last,
        };
        let newest = vis.newest();
        let key = vis.key_at(new);
        self.set_sel_key(view, key);
        if new != newest {
            self.views[view.index()].follow = false;
        }
    }

    fn step_match(&mut self, forward: bool) {
        let view = self.view;
        if self.views[view.index()].filter.is_none() {
            self.status = Some("no filter: press / to type one".into());
            return;
        }
        self.prepare();
        let vis = self.visible(view);
        if vis.len == 0 {
            self.status = Some("no match".into());
            return;
        }
        let cur = self.selected_pos(view).unwrap_or(0);
        let new = if forward {
            (cur + 1) % vis.len
        } else {
            (cur + vis.len - 1) % vis.len
        };
        let (newest, len) = (vis.newest(), vis.len);
        let key = vis.key_at(new);
        self.set_sel_key(view, key);
        if new != newest {
            self.views[view.index()].follow = false;
        }
        self.status = Some(format!("match {} of {len}", new + 1));
    }

    // -----------------------------------------------------------------------------------------
    // Keys and actions.

    /// What a key means in the current mode.
    pub(crate) fn action_for_key(&self, key: KeyEvent) -> Action {
        if key.kind == KeyEventKind::Release {
            return Action::Noop;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        // Ctrl-] arrives as Ctrl-5 from terminals without the kitty protocol (0x1d).
        let ctrl_bracket = ctrl && matches!(key.code, KeyCode::Char(']') | KeyCode::Char('5'));
        if let Some(a) = &self.agent
            && a.focused
        {
            if ctrl_bracket {
                return Action::FocusMonitor;
            }
            return Action::ToAgent(super::pty::key_bytes(
                &key,
                a.parser.screen().application_cursor(),
            ));
        }
        if self.confirm_quit {
            return match key.code {
                KeyCode::Char('y') | KeyCode::Char('Y') => Action::Quit(Quit::LeaveAgentRunning),
                KeyCode::Char('n') | KeyCode::Char('N') => Action::Quit(Quit::StopAgent),
                _ => Action::CancelQuit,
            };
        }
        if self.prompt.is_some() {
            return match key.code {
                KeyCode::Enter => Action::FilterApply,
                KeyCode::Esc => Action::FilterCancel,
                KeyCode::Backspace => Action::FilterBackspace,
                KeyCode::Char('u') if ctrl => Action::FilterClearInput,
                KeyCode::Char('c') if ctrl => Action::FilterCancel,
                KeyCode::Char(c) if !ctrl => Action::FilterChar(c),
                _ => Action::Noop,
            };
        }
        let quit = if self.agent_may_run() {
            Action::AskQuit
        } else {
            Action::Quit(Quit::Normal)
        };
        if ctrl && key.code == KeyCode::Char('c') {
            return quit;
        }
        if self.help {
            return match key.code {
                KeyCode::Esc | KeyCode::Char('?') | KeyCode::F(1) | KeyCode::Char('q') => {
                    Action::CloseOverlay
                }
                _ => Action::Noop,
            };
        }
        if self.details.is_some() {
            return match key.code {
                KeyCode::Esc | KeyCode::Enter | KeyCode::Char('q') => Action::CloseOverlay,
                KeyCode::Char('?') | KeyCode::F(1) => Action::ToggleHelp,
                KeyCode::Up | KeyCode::Char('k') => Action::Move(Move::Up),
                KeyCode::Down | KeyCode::Char('j') => Action::Move(Move::Down),
                KeyCode::PageUp => Action::Move(Move::PageUp),
                KeyCode::PageDown | KeyCode::Char(' ') => Action::Move(Move::PageDown),
                KeyCode::Home | KeyCode::Char('g') => Action::Move(Move::Home),
                KeyCode::End | KeyCode::Char('G') => Action::Move(Move::End),
                _ => Action::Noop,
            };
        }
        if ctrl_bracket {
            return if self.agent.is_some() {
                Action::FocusAgent
            } else {
                Action::Noop
            };
        }
        match key.code {
            KeyCode::Char('q') => quit,
            KeyCode::Char('?') | KeyCode::F(1) => Action::ToggleHelp,
            KeyCode::Tab => Action::NextView,
            KeyCode::BackTab => Action::PrevView,
            KeyCode::Char(c @ '1'..='6') => Action::ShowView(View::ALL[(c as u8 - b'1') as usize]),
            KeyCode::Up | KeyCode::Char('k') => Action::Move(Move::Up),
            KeyCode::Down | KeyCode::Char('j') => Action::Move(Move::Down),
            KeyCode::PageUp => Action::Move(Move::PageUp),
            KeyCode::PageDown | KeyCode::Char(' ') => Action::Move(Move::PageDown),
            KeyCode::Home | KeyCode::Char('g') => Action::Move(Move::Home),
            KeyCode::End | KeyCode::Char('G') => Action::Move(Move::End),
            KeyCode::Enter => Action::OpenDetails,
            KeyCode::Char('/') => Action::FilterStart,
            KeyCode::Char('n') => Action::NextMatch,
            KeyCode::Char('N') => Action::PrevMatch,
            KeyCode::Char('f') => Action::ToggleFollow,
            KeyCode::Char('p') => Action::TogglePause,
            KeyCode::Esc => Action::ClearFilter,
            _ => Action::Noop,
        }
    }

    /// Applies an action. `Quit` and `ToAgent` are the loop's business and ignored here.
    pub(crate) fn update(&mut self, action: Action) {
        if action == Action::Noop {
            return;
        }
        self.dirty = true;
        if !matches!(action, Action::NextMatch | Action::PrevMatch) {
            self.status = None;
        }
        let view = self.view;
        match action {
            Action::Quit(_) => self.confirm_quit = false,
            Action::ToAgent(_) | Action::Noop => {}
            Action::AskQuit => self.confirm_quit = true,
            Action::CancelQuit => self.confirm_quit = false,
            Action::ShowView(v) => self.view = v,
            Action::NextView => self.view = View::ALL[(view.index() + 1) % VIEWS],
            Action::PrevView => self.view = View::ALL[(view.index() + VIEWS - 1) % VIEWS],
            Action::Move(mv) => match &mut self.details {
                Some(d) => {
                    d.scroll = match mv {
                        Move::Up => d.scroll.saturating_sub(1),
                        Move::Down => d.scroll + 1,
                        Move::PageUp => d.scroll.saturating_sub(10),
                        Move::PageDown => d.scroll + 10,
                        Move::Home => 0,
                        Move::End => usize::MAX / 2,
                    }
                }
                None => self.move_sel(view, mv),
            },
            Action::ToggleFollow => {
                let vs = &mut self.views[view.index()];
                vs.follow = !vs.follow;
                self.status = Some(format!("follow {}", if vs.follow { "on" } else { "off" }));
            }
            Action::TogglePause => {
                if self.paused.take().is_some() {
                    self.status = Some("display resumed".into());
                } else {
                    let ends = View::ALL.map(|v| self.list_ids(v).1);
                    self.paused = Some(Paused {
                        header: self.header_info(),
                        ends,
                    });
                }
            }
            Action::OpenDetails => {
                self.prepare();
                self.details = self.details_for_selection();
                if self.details.is_none() {
                    self.status = Some("nothing selected".into());
                }
            }
            Action::CloseOverlay => {
                if self.help {
                    self.help = false;
                } else {
                    self.details = None;
                }
            }
            Action::ToggleHelp => self.help = !self.help,
            Action::FilterStart => {
                let current = self.views[view.index()]
                    .filter
                    .as_ref()
                    .map(|f| f.pattern.clone());
                self.prompt = Some(current.unwrap_or_default());
            }
            Action::FilterChar(c) => {
                if let Some(p) = &mut self.prompt {
                    p.push(c);
                }
            }
            Action::FilterBackspace => {
                if let Some(p) = &mut self.prompt {
                    p.pop();
                }
            }
            Action::FilterClearInput => {
                if let Some(p) = &mut self.prompt {
                    p.clear();
                }
            }
            Action::FilterApply => {
                let pattern = self.prompt.take().unwrap_or_default();
                if pattern.is_empty() {
                    self.views[view.index()].filter = None;
                } else {
                    self.prepare();
                    self.set_filter(view, pattern);
                }
            }
            Action::FilterCancel => {
                self.prompt = None;
                self.views[view.index()].filter = None;
            }
            Action::ClearFilter => {
                if self.views[view.index()].filter.take().is_some() {
                    self.status = Some("filter cleared".into());
                }
            }
            Action::NextMatch => self.step_match(true),
            Action::PrevMatch => self.step_match(false),
            Action::FocusAgent => match &mut self.agent {
                Some(a) if !a.exited => a.focused = true,
                Some(_) => self.status = Some("the agent's terminal is closed".into()),
                None => {}
            },
            Action::FocusMonitor => {
                if let Some(a) = &mut self.agent {
                    a.focused = false;
                }
            }
        }
    }

    /// Bytes the agent wrote to its terminal.
    pub(crate) fn agent_output(&mut self, bytes: &[u8]) {
        if let Some(a) = &mut self.agent {
            a.parser.process(bytes);
            self.dirty = true;
        }
    }

    /// The agent's terminal closed (it exited, or the pty broke).
    pub(crate) fn agent_closed(&mut self) {
        if let Some(a) = &mut self.agent {
            a.exited = true;
            a.focused = false;
            self.dirty = true;
        }
    }
}

/// `12ms`, `3.40s`, `2m05s`, `1h02m`.
pub(crate) fn duration_text(ns: i64) -> String {
    let ns = ns.max(0);
    let ms = ns / 1_000_000;
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{}.{:02}s", ms / 1000, (ms % 1000) / 10)
    } else if ms < 3_600_000 {
        format!("{}m{:02}s", ms / 60_000, (ms / 1000) % 60)
    } else {
        format!("{}h{:02}m", ms / 3_600_000, (ms / 60_000) % 60)
    }
}

/// `+1.234s` after the first record, `+2m05.1s` past a minute.
pub(crate) fn offset_text(at: Option<i64>, first: Option<i64>) -> String {
    let (Some(at), Some(first)) = (at, first) else {
        return String::new();
    };
    let ms = (at - first).max(0) / 1_000_000;
    if ms < 60_000 {
        format!("+{}.{:03}s", ms / 1000, ms % 1000)
    } else {
        format!(
            "+{}m{:02}.{}s",
            ms / 60_000,
            (ms / 1000) % 60,
            (ms % 1000) / 100
        )
    }
}
