//! Drawing. Reads the [`App`]; writes back only what drawing measures (scroll offsets, the
//! page height, the agent pane's size, the details scroll clamp) and the count of rows built.
//! Lists are virtualised: only the rows on screen become widgets.

use ratatui::Frame;
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Position, Rect};
use ratatui::style::{Color, Modifier, Style, Stylize};
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{
    Block, BorderType, Borders, Cell, Clear, Paragraph, Row, Scrollbar, ScrollbarOrientation,
    ScrollbarState, Sparkline, Table, Widget,
};

use super::app::{App, HeaderInfo, View, duration_text, offset_text};
use super::model::{
    AlertKind, StepRow, Verdict, net_dest, net_refused, ns, proc_argv, signal_name, step_command,
};
use crate::record::ViolationKind;

/// Below this the screen only says it is too small.
pub(crate) const MIN_WIDTH: u16 = 40;
pub(crate) const MIN_HEIGHT: u16 = 10;

/// Styles, with or without colour (NO_COLOR: bold and reverse only).
#[derive(Clone, Copy)]
pub(crate) struct Theme {
    color: bool,
}

impl Theme {
    pub(crate) fn new(no_color: bool) -> Self {
        Theme { color: !no_color }
    }

    fn pick(self, colored: Style, plain: Style) -> Style {
        if self.color { colored } else { plain }
    }

    fn inside(self) -> Style {
        self.pick(
            Style::new().fg(Color::Black).bg(Color::Green).bold(),
            Style::new().bold().reversed(),
        )
    }

    fn outside(self) -> Style {
        self.pick(
            Style::new().fg(Color::White).bg(Color::Red).bold(),
            Style::new().bold().reversed(),
        )
    }

    fn bad(self) -> Style {
        self.pick(Style::new().fg(Color::Red).bold(), Style::new().bold())
    }

    fn warn(self) -> Style {
        self.pick(Style::new().fg(Color::Yellow), Style::new().bold())
    }

    fn good(self) -> Style {
        self.pick(Style::new().fg(Color::Green), Style::new())
    }

    fn dim(self) -> Style {
        self.pick(Style::new().fg(Color::DarkGray), Style::new())
    }

    fn title(self) -> Style {
        self.pick(Style::new().fg(Color::Cyan).bold(), Style::new().bold())
    }

    fn key(self) -> Style {
        self.pick(Style::new().fg(Color::Cyan).bold(), Style::new().bold())
    }

    fn credential(self) -> Style {
        self.pick(Style::new().fg(Color::Magenta).bold(), Style::new().bold())
    }

    fn persistence(self) -> Style {
        self.pick(Style::new().fg(Color::Yellow).bold(), Style::new().bold())
    }

    fn selected(self) -> Style {
        Style::new().add_modifier(Modifier::REVERSED)
    }

    fn column_header(self) -> Style {
        self.pick(Style::new().fg(Color::Cyan).bold(), Style::new().bold())
    }

    fn badge(self) -> Style {
        self.pick(
            Style::new().fg(Color::Black).bg(Color::Yellow).bold(),
            Style::new().bold().reversed(),
        )
    }

    fn focus_border(self) -> Style {
        self.pick(Style::new().fg(Color::Yellow).bold(), Style::new().bold())
    }
}

pub(crate) fn draw(frame: &mut Frame, app: &mut App) {
    let area = frame.area();
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        draw_too_small(frame, area);
        return;
    }
    let theme = Theme::new(app.options.no_color);
    let [header, tabs, body, status] = Layout::vertical([
        Constraint::Length(3),
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(area);
    let info = app.header_info();
    draw_header(frame, header, app, &info, theme);
    draw_tabs(frame, tabs, app, &info, theme);

    let list_area = if app.agent.is_some() {
        let (list, pane) = if body.width >= 160 {
            let [l, p] =
                Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)])
                    .areas(body);
            (l, p)
        } else {
            let [l, p] = Layout::vertical([Constraint::Percentage(50), Constraint::Percentage(50)])
                .areas(body);
            (l, p)
        };
        draw_agent(frame, pane, app, theme);
        list
    } else {
        body
    };
    draw_list(frame, list_area, app, theme);
    draw_status(frame, status, app, theme);

    if app.details.is_some() {
        draw_details(frame, area, app, theme);
    }
    if app.help {
        draw_help(frame, area, app, theme);
    }
    if app.confirm_quit {
        draw_confirm_quit(frame, area, theme);
    }
}

fn draw_too_small(frame: &mut Frame, area: Rect) {
    let msg = format!(
        "terminal too small ({}×{}), need {MIN_WIDTH}×{MIN_HEIGHT}",
        area.width, area.height
    );
    let lines: Vec<Line> = wrap(&msg, area.width.max(1) as usize)
        .into_iter()
        .map(|l| Line::from(l).centered())
        .collect();
    let h = (lines.len() as u16).min(area.height);
    let y = area.y + area.height.saturating_sub(h) / 2;
    let rect = Rect::new(area.x, y, area.width, h);
    frame.render_widget(Paragraph::new(lines).bold(), rect);
}

// ---------------------------------------------------------------------------------------------
// Header.

fn draw_header(frame: &mut Frame, area: Rect, app: &App, info: &HeaderInfo, theme: Theme) {
    let rows = Layout::vertical([Constraint::Length(1); 3]).split(area);

    // Line 1: target, and the badges.
    let verdict = if info.outside {
        Span::styled(" OUTSIDE ", theme.outside())
    } else {
        Span::styled(" INSIDE ", theme.inside())
    };
    let mut badges = vec![];
    if app.paused.is_some() {
        badges.push(Span::styled(" PAUSED ", theme.badge()));
        badges.push(Span::raw(" "));
    }
    if app.options.replay {
        badges.push(Span::styled(" REPLAY ", theme.badge()));
        badges.push(Span::raw(" "));
    }
    match &app.options.log_problem {
        Some(p) if p.tampered => {
            badges.push(Span::styled(" TAMPERED ", theme.outside()));
            badges.push(Span::raw(" "));
        }
        Some(_) => {
            badges.push(Span::styled(" UNENDED ", theme.badge()));
            badges.push(Span::raw(" "));
        }
        None => {}
    }
    badges.push(verdict);
    let badges = Line::from(badges);
    let bw = badges.width() as u16;
    let [left, right] =
        Layout::horizontal([Constraint::Min(0), Constraint::Length(bw)]).areas(rows[0]);
    let target = if info.target.is_empty() {
        "(waiting for the start record)".to_string()
    } else {
        info.target.clone()
    };
    let l1 = Line::from(vec![
        Span::styled(" sandbox-watch ", theme.title()),
        Span::raw(head(&target, (left.width as usize).saturating_sub(17))).bold(),
    ]);
    frame.render_widget(l1, left);
    frame.render_widget(badges.right_aligned(), right);

    // Line 2: namespace, hook, elapsed, lost, events, and the rate as a sparkline just after:
    // the widest wording that leaves room for a sparkline of 6, else the most compact alone.
    const SPARK_MIN: usize = 6;
    const SPARK_MAX: usize = 24;
    let width = rows[1].width as usize;
    let l2 = (0..3)
        .map(|level| facts_line(info, level, theme))
        .find(|l| l.width() + 1 + SPARK_MIN <= width)
        .unwrap_or_else(|| facts_line(info, 2, theme));
    let used = l2.width() + 1;
    frame.render_widget(l2, rows[1]);
    let w = width.saturating_sub(used).min(SPARK_MAX);
    if w >= SPARK_MIN {
        let data = if info.rate_per_s.is_some() {
            info.rate[info.rate.len().saturating_sub(w)..].to_vec()
        } else {
            compress(&info.rate, w)
        };
        let spark = Rect {
            x: rows[1].x + used as u16,
            width: w as u16,
            ..rows[1]
        };
        frame.render_widget(Sparkline::default().data(&data).style(theme.good()), spark);
    }

    // Line 3: why OUTSIDE (or that nothing left), and the agent pane's key.
    let hint = match &app.agent {
        Some(a) if a.focused => Line::from(vec![
            Span::styled("Ctrl-]", theme.key()),
            Span::raw(" back to monitor "),
        ]),
        Some(_) => Line::from(vec![
            Span::styled("Ctrl-]", theme.key()),
            Span::raw(" type to agent "),
        ]),
        None => Line::default(),
    };
    let hw = hint.width() as u16;
    let [left, right] =
        Layout::horizontal([Constraint::Min(0), Constraint::Length(hw)]).areas(rows[2]);
    let width = left.width as usize;
    let l3 = if let Some(p) = app.options.log_problem.as_ref().filter(|p| p.tampered) {
        // Nothing below can be trusted: that comes before any verdict.
        Line::from(Span::styled(
            head(
                &format!(" ✗ THIS LOG FAILED VERIFICATION: {}", p.message),
                width,
            ),
            theme.bad(),
        ))
    } else if info.outside {
        let reason = info.reason.as_deref().unwrap_or("");
        Line::from(vec![
            Span::styled(" ✗ OUTSIDE: ", theme.bad()),
            Span::styled(head(reason, width.saturating_sub(12)), theme.bad()),
        ])
    } else {
        Line::from(Span::styled(
            head(
                " ✓ nothing ran outside the agent's network namespace",
                width,
            ),
            theme.good(),
        ))
    };
    frame.render_widget(l3, left);
    frame.render_widget(hint.right_aligned(), right);
}

/// Header line 2: the agent's namespace, the file hook, elapsed time, lost and events;
/// `level` 0 is the most explicit wording, 2 the most compact.
fn facts_line(info: &HeaderInfo, level: u8, theme: Theme) -> Line<'static> {
    let sep = || Span::styled(" │ ", theme.dim());
    let mut l = vec![];
    let netns = match level {
        0 => format!(" agent {}", info.netns),
        1 => format!(" agent {}", info.netns.trim_end_matches(" (first exec)")),
        _ => format!(" {}", info.netns.trim_end_matches(" (first exec)")),
    };
    l.push(Span::raw(netns));
    l.push(sep());
    let hook = if info.hook.is_empty() {
        "?"
    } else {
        &info.hook
    };
    l.push(Span::raw(match level {
        0 => format!("file hook {hook}"),
        1 => format!("hook {hook}"),
        _ => hook.to_string(),
    }));
    if info.gaps > 0 {
        let plural = if info.gaps == 1 { "" } else { "s" };
        l.push(Span::styled(
            match level {
                2 => format!(" ⚠{} gap{plural}", info.gaps),
                _ => format!(" ⚠ {} gap{plural}", info.gaps),
            },
            theme.warn(),
        ));
    }
    l.push(sep());
    let clock = info
        .elapsed_ns
        .map(clock_text)
        .unwrap_or_else(|| "-:--:--".into());
    l.push(Span::raw(if level == 0 {
        format!("elapsed {clock}")
    } else {
        clock
    }));
    l.push(sep());
    l.push(Span::styled(
        format!("lost {}", info.lost),
        if info.lost > 0 {
            theme.bad()
        } else {
            Style::new()
        },
    ));
    l.push(sep());
    l.push(Span::raw(match (level, info.rate_per_s) {
        (2, Some(r)) => format!("{} ev {r}/s", info.events),
        (_, Some(r)) => format!("{} events {r}/s", info.events),
        (2, None) => format!("{} ev", info.events),
        (_, None) => format!("{} events", info.events),
    }));
    Line::from(l)
}

fn draw_tabs(frame: &mut Frame, area: Rect, app: &App, info: &HeaderInfo, theme: Theme) {
    let wide = tabs_line(app, info, theme, " ");
    let line = if wide.width() <= area.width as usize {
        wide
    } else {
        tabs_line(app, info, theme, "")
    };
    frame.render_widget(line, area);
}

/// The tabs, each label starting with `pad` (none when the wide line does not fit).
fn tabs_line(app: &App, info: &HeaderInfo, theme: Theme, pad: &str) -> Line<'static> {
    let mut spans = vec![];
    for v in View::ALL {
        let active = v == app.view;
        let n = info.counts[v.index()];
        let label = format!("{pad}{} {} ", v.index() + 1, v.title());
        let filtered = app.views[v.index()].filter.is_some();
        if active {
            spans.push(Span::styled(label, Style::new().bold().reversed()));
        } else {
            spans.push(Span::raw(label));
        }
        let count = if filtered {
            format!("{n}* ")
        } else {
            format!("{n} ")
        };
        let style = if v == View::Alerts && n > 0 {
            theme.bad()
        } else {
            theme.dim()
        };
        spans.push(Span::styled(count, style));
    }
    Line::from(spans)
}

// ---------------------------------------------------------------------------------------------
// The list of the current view.

struct Columns {
    names: Vec<&'static str>,
    widths: Vec<Constraint>,
}

fn columns(view: View) -> Columns {
    use Constraint::{Length, Min};
    let (names, widths) = match view {
        View::Processes => (
            vec!["PID", "PROCESS", "EXIT", "TIME", "VERDICT"],
            vec![Length(7), Min(10), Length(8), Length(7), Length(8)],
        ),
        View::Files => (
            vec!["PID", "OP", "FS", "FLAGS", "PATH"],
            vec![Length(7), Length(6), Length(8), Length(11), Min(10)],
        ),
        View::Network => (
            vec!["PID", "OP", "PROTO", "DESTINATION", "RESULT", "VERDICT"],
            vec![
                Length(7),
                Length(7),
                Length(5),
                Min(10),
                Length(12),
                Length(8),
            ],
        ),
        View::Alerts => (
            vec!["TIME", "KIND", "FROM", "SUMMARY"],
            vec![Length(9), Length(11), Length(4), Min(10)],
        ),
        View::Log => (
            vec!["SEQ", "TIME", "KIND", "RECORD"],
            vec![Length(6), Length(9), Length(11), Min(10)],
        ),
        View::ToolCalls => (
            vec!["STEP", "COMMAND / EFFECT", "EXIT", "TIME", "NOTE"],
            vec![Length(5), Min(10), Length(8), Length(7), Length(12)],
        ),
    };
    Columns { names, widths }
}

/// The width left for the flexible column, with one space between columns.
fn flex_width(view: View, width: u16) -> usize {
    let cols = columns(view);
    let fixed: u16 = cols
        .widths
        .iter()
        .map(|c| match c {
            Constraint::Length(n) => *n,
            _ => 0,
        })
        .sum();
    let gaps = cols.widths.len().saturating_sub(1) as u16;
    width.saturating_sub(fixed + gaps) as usize
}

fn draw_list(frame: &mut Frame, area: Rect, app: &mut App, theme: Theme) {
    let view = app.view;
    if area.height < 2 {
        return;
    }
    let height = (area.height - 1) as usize;
    let (len, sel) = {
        let vis = app.visible(view);
        (vis.len, app.selected_pos(view))
    };
    let vs = &mut app.views[view.index()];
    vs.height = height;
    let mut offset = vs.offset.min(len.saturating_sub(height));
    if let Some(sel) = sel {
        if sel < offset {
            offset = sel;
        } else if sel >= offset + height {
            offset = sel + 1 - height;
        }
    }
    vs.offset = offset;

    let scrollbar = len > height;
    let table_area = Rect {
        width: area.width.saturating_sub(u16::from(scrollbar)),
        ..area
    };
    let flex = flex_width(view, table_area.width);
    // Running processes are timed to now, or to the end of the capture.
    let now = app.clock_end();
    let rows: Vec<Row> = {
        let app: &App = app;
        let vis = app.visible(view);
        (offset..(offset + height).min(len))
            .filter_map(|pos| {
                let key = vis.key_at(pos)?;
                let row = build_row(app, view, key, flex, now, theme)?;
                Some(if Some(pos) == sel {
                    row.style(theme.selected())
                } else {
                    row
                })
            })
            .collect()
    };
    app.rows_built += rows.len() as u64;

    let cols = columns(view);
    let header = Row::new(cols.names.iter().map(|n| Cell::from(*n))).style(theme.column_header());
    let table = Table::new(rows, cols.widths)
        .header(header)
        .column_spacing(1);
    frame.render_widget(table, table_area);

    if len == 0 {
        let msg = empty_message(app, view);
        let y = area.y + 1 + (height as u16).saturating_sub(1) / 2;
        let r = Rect::new(area.x, y.min(area.bottom() - 1), area.width, 1);
        frame.render_widget(Line::from(Span::styled(msg, theme.dim())).centered(), r);
    }
    if scrollbar {
        let mut state = ScrollbarState::new(len.saturating_sub(height) + 1).position(offset);
        let sb_area = Rect {
            y: area.y + 1,
            height: area.height - 1,
            ..area
        };
        frame.render_stateful_widget(
            Scrollbar::new(ScrollbarOrientation::VerticalRight)
                .begin_symbol(None)
                .end_symbol(None)
                .track_symbol(Some("│"))
                .track_style(theme.dim()),
            sb_area,
            &mut state,
        );
    }
}

fn empty_message(app: &App, view: View) -> String {
    if let Some(f) = &app.views[view.index()].filter {
        return format!("no row matches \"{}\" (Esc clears the filter)", f.pattern);
    }
    match view {
        View::Processes => "no process yet".into(),
        View::Files => "no file record yet".into(),
        View::Network => "no network record yet".into(),
        View::Alerts => "no alert: nothing outside, no credential or persistence access".into(),
        View::Log => "no record yet".into(),
        View::ToolCalls => "no tool call yet (each direct child of the agent is one)".into(),
    }
}

fn build_row(
    app: &App,
    view: View,
    key: u64,
    flex: usize,
    now: i64,
    theme: Theme,
) -> Option<Row<'static>> {
    let pid_text = |p: Option<u32>| p.map(|p| p.to_string()).unwrap_or_default();
    match view {
        View::Processes => {
            let &(i, depth) = app.procs.order.get(usize::try_from(key).ok()?)?;
            let p = &app.session.processes.list[i as usize];
            let verdict_of = app.session.processes.verdict(p);
            let prefix = tree_prefix(app, i as usize, depth);
            let mut argv = String::new();
            if p.fork_only {
                argv.push_str("(fork) ");
            }
            argv.push_str(&proc_argv(p));
            if let Some(t) = p.tried.last() {
                argv.push_str(&format!(" · tried to run {} ({})", t.path, t.result));
                if p.tried.len() > 1 {
                    argv.push_str(&format!(" and {} more", p.tried.len() - 1));
                }
            }
            let avail = flex.saturating_sub(prefix.chars().count());
            let process = Line::from(vec![
                Span::styled(prefix, theme.dim()),
                Span::styled(
                    head(&argv, avail),
                    if p.fork_only || p.launcher {
                        theme.dim()
                    } else {
                        Style::new()
                    },
                ),
            ]);
            let (exit, exit_style) = match (p.exit_code, p.signal) {
                (_, Some(s)) => (signal_name(s.into()), theme.bad()),
                (Some(0), None) => ("0".to_string(), Style::new()),
                (Some(c), None) => (c.to_string(), theme.bad()),
                (None, None) if app.ended.is_some() => ("● left".to_string(), theme.warn()),
                (None, None) => ("● run".to_string(), theme.good()),
            };
            let end = p.ended.map_or(now, ns);
            let time = duration_text(end - ns(p.began));
            let verdict = if p.launcher {
                Span::styled("launcher", theme.dim())
            } else {
                match verdict_of {
                    Verdict::Outside => Span::styled("OUTSIDE", theme.bad()),
                    Verdict::Inside => Span::styled("inside", theme.dim()),
                }
            };
            let row = Row::new(vec![
                Cell::from(p.pid.to_string()),
                Cell::from(process),
                Cell::from(Span::styled(exit, exit_style)),
                Cell::from(time),
                Cell::from(verdict),
            ]);
            Some(if verdict_of == Verdict::Outside {
                row.style(theme.bad())
            } else {
                row
            })
        }
        View::Files => {
            let r = app.session.files.entries.get(usize::try_from(key).ok()?)?;
            let mut flags = vec![];
            if r.credential {
                flags.push("credential".to_string());
            }
            if r.persistence {
                flags.push("persist".to_string());
            }
            if r.escalation.is_some() {
                flags.push("escalation".to_string());
            }
            if let Some(res) = &r.result {
                flags.push(format!("failed {res}"));
            }
            if r.count > 1 {
                flags.push(format!("×{}", r.count));
            }
            let path = match &r.new_path {
                Some(np) => format!("{} → {np}", r.path),
                None => r.path.clone(),
            };
            let row = Row::new(vec![
                Cell::from(pid_text(Some(r.pid))),
                Cell::from(r.op.as_str()),
                Cell::from(r.fs.clone().unwrap_or_default()),
                Cell::from(flags.join(" ")),
                Cell::from(tail(&path, flex)),
            ]);
            Some(if r.credential || r.escalation.is_some() {
                row.style(theme.credential())
            } else if r.persistence {
                row.style(theme.persistence())
            } else if r.result.is_some() {
                row.style(theme.dim())
            } else {
                row
            })
        }
        View::Network => {
            let r = app
                .session
                .network
                .entries
                .get(usize::try_from(key).ok()?)?;
            let mut result = if r.listening_at_end == Some(true) {
                "listening".to_string()
            } else {
                r.result.clone()
            };
            if r.count > 1 {
                result.push_str(&format!(" ×{}", r.count));
            }
            let verdict = match r.verdict {
                Verdict::Outside => Span::styled("OUTSIDE", theme.bad()),
                Verdict::Inside => Span::styled("inside", theme.dim()),
            };
            let row = Row::new(vec![
                Cell::from(pid_text(Some(r.pid))),
                Cell::from(r.op.as_str()),
                Cell::from(r.proto.clone()),
                Cell::from(head(&net_dest(r), flex)),
                Cell::from(result),
                Cell::from(verdict),
            ]);
            Some(if r.verdict == Verdict::Outside {
                row.style(theme.bad())
            } else if net_refused(r) {
                row.style(theme.warn())
            } else {
                row
            })
        }
        View::Alerts => {
            let a = app.alerts.get(key)?;
            let style = match a.kind {
                AlertKind::Violation(
                    ViolationKind::Outside
                    | ViolationKind::Network
                    | ViolationKind::Credential
                    | ViolationKind::Undeclared
                    | ViolationKind::Escalation
                    | ViolationKind::Tamper,
                ) => theme.bad(),
                AlertKind::Violation(
                    ViolationKind::Persistence
                    | ViolationKind::Lost
                    | ViolationKind::Leftover
                    | ViolationKind::Outlived
                    | ViolationKind::Export,
                ) => theme.warn(),
                AlertKind::Gap => Style::new(),
            };
            Some(Row::new(vec![
                Cell::from(offset_text(a.at_ns, app.first_at())),
                Cell::from(Span::styled(a.kind.name().to_string(), style)),
                Cell::from(Span::styled(
                    if a.violation { "end" } else { "live" },
                    theme.dim(),
                )),
                Cell::from(head_keeping_names(&a.summary, flex)),
            ]))
        }
        View::ToolCalls => {
            let &(row, group) = app.steps.order.get(usize::try_from(key).ok()?)?;
            step_row(app, row, group, flex, now, theme)
        }
        View::Log => {
            let r = app.log.get(key)?;
            let style = match r.kind.as_str() {
                "violation" => theme.bad(),
                "start" | "end" => theme.title(),
                _ => Style::new(),
            };
            Some(Row::new(vec![
                Cell::from(r.seq.map(|s| s.to_string()).unwrap_or_default()),
                Cell::from(offset_text(r.at_ns, app.first_at())),
                Cell::from(Span::styled(r.kind.clone(), style)),
                Cell::from(head(&r.summary, flex)),
            ]))
        }
    }
}

/// A row of the Tool calls view: a step (its command, end, time, whether it outlived), or one
/// of its effects under it.
fn step_row(
    app: &App,
    row: StepRow,
    group: u32,
    flex: usize,
    now: i64,
    theme: Theme,
) -> Option<Row<'static>> {
    let s = &app.session;
    let last_in_group = app
        .steps
        .order
        .iter()
        .rev()
        .find(|(_, g)| *g == group)
        .is_some_and(|(r, _)| *r == row);
    let branch = if last_in_group { "└ " } else { "├ " };
    let effect = |text: String, note: String, style: Style| {
        Some(
            Row::new(vec![
                Cell::from(""),
                Cell::from(Line::from(vec![
                    Span::styled(branch, theme.dim()),
                    Span::raw(head(&text, flex.saturating_sub(2))),
                ])),
                Cell::from(""),
                Cell::from(""),
                Cell::from(note),
            ])
            .style(style),
        )
    };
    let after = |a: bool| if a { "after step" } else { "" }.to_string();
    match row {
        StepRow::Step(None) => Some(
            Row::new(vec![
                Cell::from("—"),
                Cell::from("the agent itself (no step)"),
                Cell::from(""),
                Cell::from(""),
                Cell::from(""),
            ])
            .style(theme.title()),
        ),
        StepRow::Step(Some(k)) => {
            let t = s.tool_calls.list.get(k)?;
            let list = &s.processes.list;
            let own = list.get(t.entries[0])?;
            let last = list.get(*t.entries.last()?)?;
            let command = step_command(s, k).unwrap_or_else(|| "(a fork of the agent)".into());
            let (exit, exit_style) = match (last.exit_code, last.signal) {
                (_, Some(sig)) => (signal_name(sig.into()), theme.bad()),
                (Some(0), None) => ("0".to_string(), Style::new()),
                (Some(c), None) => (c.to_string(), theme.bad()),
                (None, None) if app.ended.is_some() => ("● left".to_string(), theme.warn()),
                (None, None) => ("● run".to_string(), theme.good()),
            };
            let end = last.ended.map_or(now, ns);
            let note = if t.after_step > 0 {
                Span::styled(format!("outlived ×{}", t.after_step), theme.warn())
            } else {
                Span::raw("")
            };
            Some(
                Row::new(vec![
                    Cell::from(crate::state::tool_calls::id(k)),
                    Cell::from(head(&command, flex)),
                    Cell::from(Span::styled(exit, exit_style)),
                    Cell::from(duration_text(end - ns(own.began))),
                    Cell::from(note),
                ])
                .style(Style::new().bold()),
            )
        }
        StepRow::Process(i) => {
            let p = s.processes.list.get(i)?;
            let mut note = after(p.after_step);
            if s.processes.verdict(p) == Verdict::Outside {
                note = "OUTSIDE".into();
            }
            let exit = match (p.exit_code, p.signal) {
                (_, Some(sig)) => format!(" · {}", signal_name(sig.into())),
                (Some(c), None) if c != 0 => format!(" · exit {c}"),
                _ => String::new(),
            };
            let what = if p.fork_only { "forked" } else { "ran" };
            let style = if note == "OUTSIDE" {
                theme.bad()
            } else {
                Style::new()
            };
            effect(
                format!("pid {} {what} {}{exit}", p.pid, proc_argv(p)),
                note,
                style,
            )
        }
        StepRow::File(i) => {
            let f = s.files.entries.get(i)?;
            let path = match &f.new_path {
                Some(np) => format!("{} → {np}", f.path),
                None => f.path.clone(),
            };
            let failed = f
                .result
                .as_ref()
                .map(|r| format!(" (failed {r})"))
                .unwrap_or_default();
            let text = format!(
                "pid {} {} {}{failed}",
                f.pid,
                f.op.as_str(),
                tail(&path, flex)
            );
            let (note, style) = if f.credential {
                ("credential".to_string(), theme.credential())
            } else if f.escalation.is_some() {
                ("escalation".to_string(), theme.credential())
            } else if f.persistence {
                ("persist".to_string(), theme.persistence())
            } else if f.result.is_some() {
                (String::new(), theme.dim())
            } else {
                (String::new(), Style::new())
            };
            let note = match (f.after_step, note.is_empty()) {
                (true, true) => after(true),
                (true, false) => format!("{note} after"),
                (false, _) => note,
            };
            effect(text, note, style)
        }
        StepRow::Net(i) => {
            let n = s.network.entries.get(i)?;
            let text = format!(
                "pid {} {} {} {} {}",
                n.pid,
                n.op.as_str(),
                n.proto,
                net_dest(n),
                n.result
            );
            let (note, style) = if n.verdict == Verdict::Outside {
                ("OUTSIDE".to_string(), theme.bad())
            } else if net_refused(n) {
                (after(n.after_step), theme.warn())
            } else {
                (after(n.after_step), Style::new())
            };
            effect(text, note, style)
        }
    }
}

/// `│ ├─` glyphs for a process at `depth` (ancestors' last-child status decides the bars).
fn tree_prefix(app: &App, idx: usize, depth: u16) -> String {
    const MAX_DRAWN: u16 = 12;
    if depth == 0 {
        return String::new();
    }
    let procs = &app.procs.nodes;
    let is_last = |i: usize| {
        procs[i]
            .parent
            .is_none_or(|p| procs[p].children.last() == Some(&i))
    };
    let mut parts = vec![if is_last(idx) { "└ " } else { "├ " }];
    let mut cur = procs[idx].parent;
    let mut level = depth - 1;
    while let Some(a) = cur {
        if level == 0 {
            break;
        }
        if level < MAX_DRAWN {
            parts.push(if is_last(a) { "  " } else { "│ " });
        }
        level -= 1;
        cur = procs[a].parent;
    }
    let mut s = String::new();
    if depth > MAX_DRAWN {
        s.push('…');
    }
    for p in parts.iter().rev() {
        s.push_str(p);
    }
    s
}

// ---------------------------------------------------------------------------------------------
// Status bar.

fn draw_status(frame: &mut Frame, area: Rect, app: &App, theme: Theme) {
    if let Some(p) = &app.prompt {
        let line = Line::from(vec![Span::styled("/", theme.key()), Span::raw(p.clone())]);
        let hint = Line::from(Span::styled(" Enter apply · Esc clear ", theme.dim()));
        let [l, r] =
            Layout::horizontal([Constraint::Min(0), Constraint::Length(hint.width() as u16)])
                .areas(area);
        frame.render_widget(line, l);
        frame.render_widget(hint, r);
        let x = (l.x + 1 + p.chars().count() as u16).min(l.right().saturating_sub(1));
        frame.set_cursor_position(Position::new(x, l.y));
        return;
    }
    let vs = &app.views[app.view.index()];
    let mut left = vec![];
    if let Some(reason) = &app.ended {
        left.push(Span::styled(
            format!(" capture ended: {reason} "),
            Style::new().bold().reversed(),
        ));
        left.push(Span::raw(" "));
    }
    if app.paused.is_some() {
        left.push(Span::styled(" PAUSED ", theme.badge()));
        left.push(Span::raw(" "));
    }
    if vs.follow {
        left.push(Span::styled("follow ", theme.good()));
    }
    if let Some(f) = &vs.filter {
        let n = app.visible(app.view).len;
        left.push(Span::styled(
            format!("filter \"{}\" ", f.pattern),
            theme.key(),
        ));
        left.push(Span::raw(format!(
            "{n} row{} ",
            if n == 1 { "" } else { "s" }
        )));
    }
    if let Some(s) = &app.status {
        left.push(Span::styled(format!("· {s}"), theme.warn()));
    }
    let left = Line::from(left);
    let hints: &[(&str, &str)] = &[
        ("q", "quit"),
        ("?", "help"),
        ("/", "filter"),
        ("↵", "details"),
        ("f", "follow"),
        ("p", "pause"),
    ];
    // As many key hints as fit beside the left part.
    let room = area.width as usize - left.width().min(area.width as usize);
    let right = (0..=hints.len())
        .rev()
        .map(|n| {
            let mut spans = vec![];
            for (k, what) in &hints[..n] {
                spans.push(Span::styled(*k, theme.key()));
                spans.push(Span::raw(format!(" {what}  ")));
            }
            Line::from(spans)
        })
        .find(|l| l.width() < room)
        .unwrap_or_default();
    let rw = right.width() as u16;
    let [l, r] = Layout::horizontal([Constraint::Min(0), Constraint::Length(rw)]).areas(area);
    frame.render_widget(left, l);
    frame.render_widget(right.right_aligned(), r);
}

// ---------------------------------------------------------------------------------------------
// The agent's pane.

fn draw_agent(frame: &mut Frame, area: Rect, app: &mut App, theme: Theme) {
    let Some(agent) = &mut app.agent else {
        return;
    };
    let (title, border) = if agent.exited {
        (" agent (its terminal closed) ".to_string(), theme.dim())
    } else if agent.focused {
        (
            " agent · keyboard here · Ctrl-] back to monitor ".to_string(),
            theme.focus_border(),
        )
    } else {
        (" agent · Ctrl-] to type ".to_string(), Style::new())
    };
    let block = Block::new()
        .borders(Borders::ALL)
        .border_type(if agent.focused {
            BorderType::Thick
        } else {
            BorderType::Plain
        })
        .border_style(border)
        .title(Span::styled(title, border));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if inner.width == 0 || inner.height == 0 {
        return;
    }
    agent.fit(inner.height, inner.width);
    let screen = agent.parser.screen();
    frame.render_widget(ScreenWidget(screen), inner);
    if agent.focused && !screen.hide_cursor() {
        let (row, col) = screen.cursor_position();
        if row < inner.height && col < inner.width {
            frame.set_cursor_position(Position::new(inner.x + col, inner.y + row));
        }
    }
}

/// A vt100 screen drawn cell by cell (the agent's own colours are kept).
/// Not tui-term's `PseudoTerminal`: tui-term 0.3 draws vt100 0.16 screens (its `vt100`
/// feature pins `^0.16`), and this is vt100 0.18; its `Screen` trait without that feature
/// would need this same cell conversion.
struct ScreenWidget<'a>(&'a vt100::Screen);

impl Widget for ScreenWidget<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let conv = |c: vt100::Color| match c {
            vt100::Color::Default => Color::Reset,
            vt100::Color::Idx(i) => Color::Indexed(i),
            vt100::Color::Rgb(r, g, b) => Color::Rgb(r, g, b),
        };
        for row in 0..area.height {
            for col in 0..area.width {
                let Some(cell) = self.0.cell(row, col) else {
                    continue;
                };
                if cell.is_wide_continuation() {
                    continue;
                }
                let Some(out) = buf.cell_mut((area.x + col, area.y + row)) else {
                    continue;
                };
                let s = cell.contents();
                out.set_symbol(if s.is_empty() { " " } else { s });
                let mut style = Style::new()
                    .fg(conv(cell.fgcolor()))
                    .bg(conv(cell.bgcolor()));
                if cell.bold() {
                    style = style.bold();
                }
                if cell.italic() {
                    style = style.italic();
                }
                if cell.underline() {
                    style = style.underlined();
                }
                if cell.inverse() {
                    style = style.reversed();
                }
                out.set_style(style);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Overlays.

fn popup(area: Rect, width: u16, height: u16) -> Rect {
    let w = width.min(area.width.saturating_sub(2)).max(1);
    let h = height.min(area.height.saturating_sub(2)).max(1);
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}

const HELP: &[(&str, &str)] = &[
    ("q  Ctrl-C", "quit (asks first while the agent still runs)"),
    ("?  F1", "this help; Esc closes it"),
    ("Tab  Shift-Tab", "next / previous view"),
    (
        "1 … 6",
        "Processes, Files, Network, Alerts, Log, Tool calls",
    ),
    ("j k  ↓ ↑", "move the selection"),
    ("PgDn PgUp  Space", "a page down / up"),
    ("Home End  g G", "first / last row"),
    ("Enter", "details of the selected row; Esc closes them"),
    ("/", "filter this view (type, Enter applies, Esc clears)"),
    (
        "/ in Tool calls",
        "a step's number: that step and its effects only",
    ),
    ("n  N", "next / previous match of the filter"),
    ("f", "follow the newest row on / off"),
    ("p", "pause the display (the capture goes on)"),
    ("Esc", "clear the filter, close a pane"),
    ("Ctrl-]", "give the keyboard to the agent's pane and back"),
];

fn draw_help(frame: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let key_w = HELP
        .iter()
        .map(|(k, _)| k.chars().count())
        .max()
        .unwrap_or(0);
    let mut lines: Vec<Line> = HELP
        .iter()
        .filter(|(k, _)| app.agent.is_some() || !k.starts_with("Ctrl-]"))
        .map(|(k, what)| {
            Line::from(vec![
                Span::styled(format!(" {k:<key_w$}  "), theme.key()),
                Span::raw(*what),
            ])
        })
        .collect();
    lines.push(Line::default());
    lines.push(Line::from(vec![
        Span::raw(" Badge: "),
        Span::styled(" INSIDE ", theme.inside()),
        Span::raw(" nothing ran outside the agent's network namespace; "),
    ]));
    lines.push(Line::from(vec![
        Span::raw("        "),
        Span::styled(" OUTSIDE ", theme.outside()),
        Span::raw(" something did: the header says what first."),
    ]));
    let width = lines.iter().map(Line::width).max().unwrap_or(0) as u16 + 2;
    let rect = popup(area, width, lines.len() as u16 + 2);
    frame.render_widget(Clear, rect);
    let block = Block::bordered()
        .title(Span::styled(" keys ", theme.title()))
        .title_bottom(Line::from(" Esc closes ").right_aligned());
    frame.render_widget(Paragraph::new(lines).block(block), rect);
}

fn draw_details(frame: &mut Frame, area: Rect, app: &mut App, theme: Theme) {
    let Some(d) = &mut app.details else {
        return;
    };
    let rect = popup(
        area,
        area.width.saturating_sub(4),
        area.height.saturating_sub(2),
    );
    frame.render_widget(Clear, rect);
    let block = Block::bordered()
        .title(Span::styled(format!(" {} ", d.title), theme.title()))
        .title_bottom(Line::from(" j/k PgUp/PgDn scroll · Esc closes ").right_aligned());
    let inner = block.inner(rect);
    frame.render_widget(block, rect);
    let width = inner.width.saturating_sub(1).max(1) as usize;
    let mut wrapped: Vec<String> = vec![];
    for l in &d.lines {
        wrapped.extend(wrap(l, width));
    }
    let height = inner.height as usize;
    let max_scroll = wrapped.len().saturating_sub(height);
    d.scroll = d.scroll.min(max_scroll);
    let lines: Vec<Line> = wrapped
        .iter()
        .skip(d.scroll)
        .take(height)
        .map(|l| {
            if l.starts_with("── ") {
                Line::from(Span::styled(l.clone(), theme.title()))
            } else {
                Line::from(l.clone())
            }
        })
        .collect();
    frame.render_widget(Paragraph::new(Text::from(lines)), inner);
    if max_scroll > 0 {
        let mut state = ScrollbarState::new(max_scroll + 1).position(d.scroll);
        frame.render_stateful_widget(
            Scrollbar::new(ScrollbarOrientation::VerticalRight)
                .begin_symbol(None)
                .end_symbol(None)
                .track_symbol(Some("│"))
                .track_style(theme.dim()),
            inner,
            &mut state,
        );
    }
}

fn draw_confirm_quit(frame: &mut Frame, area: Rect, theme: Theme) {
    let lines = vec![
        Line::from(" The agent is still running. Leave it running? ").bold(),
        Line::default(),
        Line::from(vec![
            Span::styled("  y ", theme.key()),
            Span::raw(" quit and leave it running"),
        ]),
        Line::from(vec![
            Span::styled("  n ", theme.key()),
            Span::raw(" quit and stop it"),
        ]),
        Line::from(vec![Span::styled("  Esc ", theme.key()), Span::raw("stay")]),
    ];
    let width = lines.iter().map(Line::width).max().unwrap_or(0) as u16 + 2;
    let rect = popup(area, width, lines.len() as u16 + 2);
    frame.render_widget(Clear, rect);
    frame.render_widget(
        Paragraph::new(lines).block(
            Block::bordered()
                .border_style(theme.warn())
                .title(" quit? "),
        ),
        rect,
    );
}

// ---------------------------------------------------------------------------------------------
// Text helpers (widths counted in chars: the UI's own text is narrow).

/// `s` cut to `width` chars, ending in `…` when cut.
pub(crate) fn head(s: &str, width: usize) -> String {
    let n = s.chars().count();
    if n <= width {
        return s.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let mut out: String = s.chars().take(width - 1).collect();
    out.push('…');
    out
}

/// `s` cut to `width` chars as [`head`] does, but first with the middle of its longest paths
/// left out (`/work/…/home/.ssh/id_rsa` → `…/.ssh/id_rsa`): what a path names is at its end.
pub(crate) fn head_keeping_names(s: &str, width: usize) -> String {
    let mut words: Vec<String> = s.split(' ').map(str::to_owned).collect();
    let len =
        |words: &[String]| words.iter().map(|w| w.chars().count()).sum::<usize>() + words.len() - 1;
    while len(&words) > width {
        let shorter = words
            .iter()
            .enumerate()
            .filter_map(|(i, w)| Some((i, short_path(w)?)))
            .max_by_key(|(i, short)| words[*i].chars().count() - short.chars().count());
        let Some((i, short)) = shorter else { break };
        words[i] = short;
    }
    head(&words.join(" "), width)
}

/// A word holding a path of more than two names (after a quote or bracket, before
/// punctuation), with all but its last two names left out.
fn short_path(word: &str) -> Option<String> {
    let start = word.find('/')?;
    let (before, rest) = word.split_at(start);
    if before.chars().any(char::is_alphanumeric) {
        return None;
    }
    let end = rest
        .trim_end_matches(['`', '\'', '"', ',', ';', ':', ')', ']'])
        .len();
    let (path, after) = rest.split_at(end);
    let names: Vec<&str> = path.split('/').filter(|n| !n.is_empty()).collect();
    if names.len() <= 2 {
        return None;
    }
    Some(format!(
        "{before}…/{}{after}",
        names[names.len() - 2..].join("/")
    ))
}

/// `s` cut to its last `width` chars, starting with `…` when cut (for paths).
pub(crate) fn tail(s: &str, width: usize) -> String {
    let n = s.chars().count();
    if n <= width {
        return s.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let mut out = String::from("…");
    out.extend(s.chars().skip(n - (width - 1)));
    out
}

/// Hard wrap at `width` chars, keeping words whole where a line has room.
pub(crate) fn wrap(s: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let chars: Vec<char> = s.chars().collect();
    if chars.len() <= width {
        return vec![s.to_string()];
    }
    let mut out = vec![];
    let mut start = 0;
    while start < chars.len() {
        let mut end = (start + width).min(chars.len());
        if end < chars.len()
            && let Some(sp) = chars[start..end].iter().rposition(|&c| c == ' ')
            && sp > width / 2
        {
            end = start + sp + 1;
        }
        out.push(
            chars[start..end]
                .iter()
                .collect::<String>()
                .trim_end()
                .to_string(),
        );
        start = end;
    }
    out
}

/// `h:mm:ss`.
fn clock_text(ns: i64) -> String {
    let s = ns.max(0) / 1_000_000_000;
    format!("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
}

/// Sums `data` into at most `width` buckets.
fn compress(data: &[u64], width: usize) -> Vec<u64> {
    if width == 0 || data.len() <= width {
        return data.to_vec();
    }
    let per = data.len().div_ceil(width);
    data.chunks(per).map(|c| c.iter().sum()).collect()
}
