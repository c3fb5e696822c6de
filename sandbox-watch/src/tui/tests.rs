//! Drawing tests (insta snapshots of the TestBackend's text), state and key tests.
//! The clock is fixed (`App::now_ns`), so nothing in a snapshot depends on when it ran.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::style::{Color, Modifier};
use serde_json::{Value, json};

use super::app::{Action, App, View};
use super::model::{LIST_CAP, parse_rfc3339_ns};
use super::{Feed, Options, Quit, ui};

const SESSION: &str = include_str!("testdata/session.jsonl");

/// A record for the feed, from the JSON of a log line (a line without `at` gets t0's).
fn feed(mut v: Value) -> Feed {
    if let Value::Object(m) = &mut v {
        m.entry("at")
            .or_insert_with(|| "2026-11-30T11:24:16Z".into());
    }
    match crate::record::Logged::from_value(&v) {
        Some(logged) => Feed::Record(logged),
        None => Feed::Other(v),
    }
}

fn t0() -> i64 {
    parse_rfc3339_ns("2026-11-30T11:24:16Z").unwrap()
}

fn session() -> Vec<Value> {
    SESSION
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn app_from(records: Vec<Value>, options: Options, now_ns: i64) -> App {
    let mut app = App::new(options, false, now_ns);
    for r in records {
        app.ingest(feed(r));
    }
    app.prepare();
    app
}

/// The whole recorded session, as the live TUI sees it once the end record arrived.
fn ended_app() -> App {
    app_from(session(), Options::default(), t0() + 2_000_000_000)
}

/// The session cut before the agent's exit: still running, with Stats.
fn live_app() -> App {
    let records: Vec<Value> = session()
        .into_iter()
        .take_while(|r| r["kind"] != "exit" || r["pid"] != 4100)
        .collect();
    let mut app = app_from(records, Options::default(), t0() + 5_500_000_000);
    for events in [0u64, 12, 30, 31, 40, 64, 70] {
        app.ingest(Feed::Stats { events, lost: 0 });
    }
    app.prepare();
    app
}

/// Records that make the verdict OUTSIDE: a child in another network namespace that connects.
fn outside_records() -> Vec<Value> {
    vec![
        json!({"seq": 100, "at": "2026-11-30T11:24:17.100Z", "kind": "fork", "pid": 4200, "ppid": 4100}),
        json!({"seq": 101, "at": "2026-11-30T11:24:17.101Z", "kind": "exec", "pid": 4200, "ppid": 4100,
               "argv": ["unshare", "-n", "curl", "https://example.org/"], "cwd": "/home/dev/project",
               "uid": 1000, "netns": 4026532600u64, "verdict": "outside", "launcher": false}),
        json!({"seq": 102, "at": "2026-11-30T11:24:17.200Z", "kind": "net", "pid": 4200, "op": "connect",
               "proto": "tcp", "addr": "203.0.113.7", "port": 443, "result": "ok", "netns": 4026532600u64,
               "verdict": "outside", "count": 1}),
    ]
}

fn outside_app() -> App {
    let mut app = live_app();
    for r in outside_records() {
        app.ingest(feed(r));
    }
    app.prepare();
    app
}

fn draw(app: &mut App, w: u16, h: u16) -> Terminal<TestBackend> {
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    app.prepare();
    term.draw(|f| ui::draw(f, app)).unwrap();
    term
}

fn text(buf: &Buffer) -> String {
    let area = buf.area;
    let mut out = String::new();
    for y in 0..area.height {
        let mut line = String::new();
        for x in 0..area.width {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn screen(app: &mut App, w: u16, h: u16) -> String {
    text(draw(app, w, h).backend().buffer())
}

fn snap(name: &str, app: &mut App, w: u16, h: u16) {
    let s = screen(app, w, h);
    insta::with_settings!({prepend_module_to_snapshot => false, omit_expression => true}, {
        insta::assert_snapshot!(format!("{name}_{w}x{h}"), s);
    });
}

fn press(app: &mut App, code: KeyCode) -> Action {
    press_mod(app, code, KeyModifiers::NONE)
}

fn press_mod(app: &mut App, code: KeyCode, m: KeyModifiers) -> Action {
    let action = app.action_for_key(KeyEvent::new(code, m));
    app.update(action.clone());
    action
}

fn type_str(app: &mut App, s: &str) {
    for c in s.chars() {
        press(app, KeyCode::Char(c));
    }
}

/// The key of the selected row's text on screen (the reversed line).
fn selected_line(term: &Terminal<TestBackend>) -> String {
    let buf = term.backend().buffer();
    for y in 0..buf.area.height {
        let reversed = (0..buf.area.width)
            .filter(|&x| buf[(x, y)].modifier.contains(Modifier::REVERSED))
            .count();
        if reversed as u16 > buf.area.width / 2 {
            let mut line = String::new();
            for x in 0..buf.area.width {
                line.push_str(buf[(x, y)].symbol());
            }
            return line.trim_end().to_string();
        }
    }
    String::new()
}

// ---------------------------------------------------------------------------------------------
// Snapshots.

const SIZES: [(u16, u16); 2] = [(80, 24), (120, 36)];

#[test]
fn snapshot_each_view() {
    for (w, h) in SIZES {
        for (n, name) in [
            ('1', "view_processes"),
            ('2', "view_files"),
            ('3', "view_network"),
            ('4', "view_alerts"),
            ('5', "view_log"),
            ('6', "view_tool_calls"),
        ] {
            let mut app = ended_app();
            press(&mut app, KeyCode::Char(n));
            snap(name, &mut app, w, h);
        }
    }
}

#[test]
fn snapshot_header_inside_and_outside() {
    for (w, h) in SIZES {
        snap("header_inside", &mut live_app(), w, h);
        snap("header_outside", &mut outside_app(), w, h);
    }
}

#[test]
fn snapshot_help() {
    for (w, h) in SIZES {
        let mut app = live_app();
        press(&mut app, KeyCode::Char('?'));
        snap("help", &mut app, w, h);
    }
}

#[test]
fn snapshot_details() {
    for (w, h) in SIZES {
        let mut app = ended_app();
        press(&mut app, KeyCode::Down); // pid 4101, git commit
        press(&mut app, KeyCode::Enter);
        snap("details_process", &mut app, w, h);
    }
    let mut app = ended_app();
    press(&mut app, KeyCode::Char('2'));
    type_str(&mut app, "/netrc");
    press(&mut app, KeyCode::Enter);
    press(&mut app, KeyCode::Enter);
    snap("details_file", &mut app, 80, 24);
}

#[test]
fn snapshot_too_small() {
    let s = screen(&mut live_app(), 30, 8);
    assert!(s.contains("terminal too small"), "{s}");
    assert!(s.contains("(30×8)"), "{s}");
    assert!(!s.contains("sandbox-watch"), "only the message: {s}");
    snap("too_small", &mut live_app(), 30, 8);
    // 40×10 is enough.
    assert!(screen(&mut live_app(), 40, 10).contains("sandbox-watch"));
}

#[test]
fn snapshot_replay() {
    let mut app = app_from(
        session(),
        Options {
            replay: true,
            ..Options::default()
        },
        // The wall clock is far past the log: replay's elapsed time ends at the end record.
        t0() + 86_400_000_000_000,
    );
    app.ingest(Feed::Ended {
        reason: "end of the log (the agent exited)".into(),
    });
    let s = screen(&mut app, 80, 24);
    assert!(s.contains("0:00:01"), "elapsed runs to the end record: {s}");
    assert!(s.contains("REPLAY"), "{s}");
    assert!(s.contains("end of the log (the agent exited)"), "{s}");
    snap("replay", &mut app, 80, 24);
}

#[test]
fn a_replayed_log_that_failed_its_check_says_so_before_the_verdict() {
    let problem = |tampered: bool, message: &str| Options {
        replay: true,
        log_problem: Some(super::LogProblem {
            tampered,
            message: message.into(),
        }),
        ..Options::default()
    };
    let mut app = app_from(
        session(),
        problem(
            true,
            "run.jsonl: TAMPERED at record 12: its hash does not match",
        ),
        t0(),
    );
    let s = screen(&mut app, 120, 36);
    let header: Vec<&str> = s.lines().take(3).collect();
    assert!(header[0].contains("TAMPERED"), "{s}");
    assert!(
        header[2].contains("THIS LOG FAILED VERIFICATION: run.jsonl: TAMPERED at record 12"),
        "{s}"
    );
    let mut app = app_from(session(), problem(false, "run.jsonl: unended"), t0());
    let s = screen(&mut app, 120, 36);
    assert!(s.lines().next().unwrap().contains("UNENDED"), "{s}");
    assert!(!s.contains("FAILED VERIFICATION"), "{s}");
}

#[test]
fn snapshot_agent_pane_and_quit_prompt() {
    let mut app = App::new(Options::default(), true, t0() + 3_000_000_000);
    for r in session().into_iter().take(12) {
        app.ingest(feed(r));
    }
    app.agent_output(
        b"$ python3 server.py\r\nServing on 127.0.0.1:8000\r\n\x1b[1mready\x1b[0m\r\n> ",
    );
    snap("agent_pane", &mut app, 80, 24);
    press_mod(&mut app, KeyCode::Char(']'), KeyModifiers::CONTROL);
    snap("agent_pane_focused", &mut app, 120, 36);
    press_mod(&mut app, KeyCode::Char(']'), KeyModifiers::CONTROL);
    assert_eq!(press(&mut app, KeyCode::Char('q')), Action::AskQuit);
    snap("quit_prompt", &mut app, 80, 24);
}

#[test]
fn snapshot_filtered_files() {
    let mut app = ended_app();
    press(&mut app, KeyCode::Char('2'));
    type_str(&mut app, "/project");
    snap("filter_typing", &mut app, 80, 24);
    press(&mut app, KeyCode::Enter);
    snap("filter_applied", &mut app, 80, 24);
}

// ---------------------------------------------------------------------------------------------
// What the screen says, checked without snapshots.

#[test]
fn verdict_badges_are_green_and_red() {
    for (mut app, word, bg) in [
        (live_app(), "INSIDE", Color::Green),
        (outside_app(), "OUTSIDE", Color::Red),
    ] {
        let term = draw(&mut app, 80, 24);
        let buf = term.backend().buffer();
        let line: String = (0..80).map(|x| buf[(x, 0)].symbol().to_string()).collect();
        let x = line
            .find(word)
            .unwrap_or_else(|| panic!("{word} in {line}")) as u16;
        assert_eq!(buf[(x, 0)].bg, bg, "{word} badge");
    }
}

#[test]
fn outside_reason_is_the_first_outside_record() {
    let mut app = outside_app();
    let s = screen(&mut app, 120, 36);
    assert!(
        s.contains("OUTSIDE: pid 4200 `unshare -n curl https://example.org/` ran outside"),
        "{s}"
    );
    // An outside violation alone also makes it OUTSIDE.
    let mut app = live_app();
    app.ingest(feed(json!({"kind": "violation", "pid": 7,
        "summary": "pid 7 `nc` ran in net namespace 1, not the agent's 2"})));
    assert!(screen(&mut app, 120, 36).contains("OUTSIDE: pid 7 `nc` ran in net namespace"));
}

#[test]
fn lost_events_are_red() {
    let mut app = live_app();
    app.ingest(Feed::Stats {
        events: 100,
        lost: 5,
    });
    let term = draw(&mut app, 80, 24);
    let buf = term.backend().buffer();
    let line: String = (0..80).map(|x| buf[(x, 1)].symbol().to_string()).collect();
    let x = line.find("lost 5").expect("lost 5 on line 2") as u16;
    // `find` gives a byte offset; the line before it is ASCII except the separators.
    let col = line[..x as usize].chars().count() as u16;
    assert_eq!(buf[(col, 1)].fg, Color::Red);
    assert!(
        app.alerts
            .get(app.alerts.end() - 1)
            .unwrap()
            .summary
            .contains("5 events lost"),
        "a lost alert"
    );
}

#[test]
fn no_color_uses_only_bold_and_reverse() {
    let opts = Options {
        no_color: true,
        ..Options::default()
    };
    let mut app = app_from(session(), opts, t0());
    for r in outside_records() {
        app.ingest(feed(r));
    }
    for n in ['1', '2', '3', '4', '5', '6', '?'] {
        press(&mut app, KeyCode::Char(n));
        let term = draw(&mut app, 120, 36);
        for cell in term.backend().buffer().content() {
            assert_eq!(cell.fg, Color::Reset, "view {n}: {cell:?}");
            assert_eq!(cell.bg, Color::Reset, "view {n}: {cell:?}");
            assert!(
                (Modifier::BOLD | Modifier::REVERSED).contains(cell.modifier),
                "view {n}: {cell:?}"
            );
        }
    }
}

#[test]
fn unknown_kinds_and_missing_fields_are_tolerated() {
    let mut app = App::new(Options::default(), false, t0());
    for r in [
        json!({}),
        json!({"kind": "exec"}),
        json!({"kind": "exec", "pid": 5}),
        json!({"kind": "fork", "pid": 6}),
        json!({"kind": "exit", "pid": 99}),
        json!({"kind": "file"}),
        json!({"kind": "file_failed", "pid": "x"}),
        json!({"kind": "net"}),
        json!({"kind": "violation"}),
        json!({"kind": "start", "target": 3}),
        json!({"kind": "end", "at": "not a time"}),
        json!({"kind": "wobble", "seq": 4, "x": [1, 2]}),
        json!("just a string"),
    ] {
        app.ingest(feed(r));
    }
    for n in ['1', '2', '3', '4', '5', '6'] {
        press(&mut app, KeyCode::Char(n));
        press(&mut app, KeyCode::End);
        press(&mut app, KeyCode::Enter);
        screen(&mut app, 80, 24);
        press(&mut app, KeyCode::Esc);
        screen(&mut app, 80, 24);
    }
    // The unknown kind is in the Log only.
    assert_eq!(app.log.end(), 13);
    press(&mut app, KeyCode::Char('5'));
    assert!(screen(&mut app, 80, 24).contains("wobble"));
    press(&mut app, KeyCode::Char('4'));
    assert!(!screen(&mut app, 80, 24).contains("wobble"));
}

#[test]
fn processes_form_a_tree_by_ppid() {
    let mut app = ended_app();
    let s = screen(&mut app, 120, 36);
    // 4105 forked from 4104 (a child of the agent), drawn one level deeper.
    let l4104 = s.lines().find(|l| l.contains("4104")).unwrap();
    let l4105 = s.lines().find(|l| l.contains("4105")).unwrap();
    let indent = |l: &str| l.find(['├', '└']).unwrap();
    assert!(indent(l4105) > indent(l4104), "{l4104}\n{l4105}");
    assert!(s.contains("SIGKILL"), "the signal of 4103: {s}");
    assert!(s.contains("● left"), "sleep was left running: {s}");
}

#[test]
fn elapsed_time_uses_the_injected_clock() {
    let mut app = live_app();
    assert!(screen(&mut app, 80, 24).contains("0:00:05"));
    app.now_ns += 65_000_000_000;
    assert!(screen(&mut app, 80, 24).contains("0:01:10"));
    // Once the capture ended, elapsed stops at the end.
    app.ingest(Feed::Ended {
        reason: "the agent exited".into(),
    });
    app.now_ns += 3_600_000_000_000;
    let s = screen(&mut app, 80, 24);
    assert!(s.contains("0:01:10"), "{s}");
    assert!(s.contains("capture ended: the agent exited"), "{s}");
}

// ---------------------------------------------------------------------------------------------
// Bounded work.

fn file_record(i: u64) -> Value {
    json!({"seq": i, "at": "2026-11-30T11:24:16.5Z", "kind": "file", "pid": 4100, "op": "read",
           "path": format!("/data/f{i:06}"), "fs": "ext2/3/4", "count": 1,
           "credential": false, "persistence": false})
}

#[test]
fn hundred_thousand_rows_build_only_the_visible_ones() {
    let mut app = App::new(Options::default(), false, t0());
    // Writes: each is an entry of its own (reads past DETAILED_READS are folded).
    for i in 0..100_000 {
        let mut r = file_record(i);
        r["op"] = "write".into();
        app.ingest(feed(r));
    }
    press(&mut app, KeyCode::Char('2'));
    let list_rows = 24 - 5 - 1; // header 3, tabs 1, status 1, column header 1
    let before = app.rows_built;
    screen(&mut app, 80, 24);
    assert_eq!(app.rows_built - before, list_rows);

    press(&mut app, KeyCode::End);
    let before = app.rows_built;
    let term = draw(&mut app, 80, 24);
    assert_eq!(app.rows_built - before, list_rows);
    assert!(selected_line(&term).contains("/data/f099999"));

    press(&mut app, KeyCode::PageUp);
    let before = app.rows_built;
    let term = draw(&mut app, 80, 24);
    assert!(app.rows_built - before <= list_rows);
    let page = list_rows - 1;
    assert!(
        selected_line(&term).contains(&format!("/data/f{:06}", 99_999 - page)),
        "{}",
        selected_line(&term)
    );

    // The Log view holds the same 100,000 records and is just as cheap.
    press(&mut app, KeyCode::Char('5'));
    let before = app.rows_built;
    screen(&mut app, 80, 24);
    assert_eq!(app.rows_built - before, list_rows);
}

#[test]
fn lists_are_capped() {
    let mut app = App::new(Options::default(), false, t0());
    let n = LIST_CAP as u64 + 5_000;
    for i in 0..n {
        app.ingest(feed(file_record(i)));
    }
    // The log list keeps the newest LIST_CAP records.
    assert_eq!(app.log.len(), LIST_CAP);
    assert_eq!(app.log.first(), 5_000);
    assert_eq!(app.log.end(), n);
    // The Files view shows the session's entries, as the report has them: past
    // DETAILED_READS plain reads, one entry for their directory.
    let detailed = crate::state::files::DETAILED_READS as u64;
    assert_eq!(app.session.files.entries.len() as u64, detailed + 1);
    press(&mut app, KeyCode::Char('2'));
    let term = draw(&mut app, 80, 24);
    assert!(
        selected_line(&term).contains("/data/"),
        "{}",
        selected_line(&term)
    );
    assert!(text(term.backend().buffer()).contains(&format!("Files {}", detailed + 1)));
}

// ---------------------------------------------------------------------------------------------
// Keys.

#[test]
fn tab_and_digits_switch_views() {
    let mut app = live_app();
    assert_eq!(app.view, View::Processes);
    let order: Vec<View> = (0..6)
        .map(|_| {
            press(&mut app, KeyCode::Tab);
            app.view
        })
        .collect();
    assert_eq!(
        order,
        [
            View::Files,
            View::Network,
            View::Alerts,
            View::Log,
            View::ToolCalls,
            View::Processes
        ]
    );
    press(&mut app, KeyCode::BackTab);
    assert_eq!(app.view, View::ToolCalls);
    press(&mut app, KeyCode::Char('6'));
    assert_eq!(app.view, View::ToolCalls);
    press(&mut app, KeyCode::Char('3'));
    assert_eq!(app.view, View::Network);
    assert!(screen(&mut app, 80, 24).contains("pypi.org"));
}

#[test]
fn filter_and_next_previous_match() {
    let mut app = ended_app();
    press(&mut app, KeyCode::Char('2'));
    press(&mut app, KeyCode::Char('/'));
    assert_eq!(app.prompt.as_deref(), Some(""));
    type_str(&mut app, "projecx");
    press(&mut app, KeyCode::Backspace);
    type_str(&mut app, "t/");
    press(&mut app, KeyCode::Enter);
    assert!(app.prompt.is_none());
    // .git/config, .git/objects…, out.txt, tmp.txt → final.txt, old.log (the failed delete of
    // missing.log, which was not there, is in the Log view only: not an entry of the report)
    assert_eq!(app.visible(View::Files).len, 5);
    let s = screen(&mut app, 120, 36);
    assert!(!s.contains("ld.so.cache"), "filtered out: {s}");
    assert!(s.contains("filter \"project/\""), "{s}");

    let sel = |app: &mut App| selected_line(&draw(app, 120, 36));
    assert!(sel(&mut app).contains(".git/config"));
    press(&mut app, KeyCode::Char('n'));
    assert!(sel(&mut app).contains(".git/objects"));
    press(&mut app, KeyCode::Char('N'));
    assert!(sel(&mut app).contains(".git/config"));
    press(&mut app, KeyCode::Char('N')); // wraps to the last match
    assert!(sel(&mut app).contains("old.log"));
    press(&mut app, KeyCode::Char('n')); // and back to the first
    assert!(sel(&mut app).contains(".git/config"));

    // New rows that match join the filtered list as they arrive.
    app.ingest(feed(json!({"kind": "file", "pid": 4100, "op": "write",
        "path": "/home/dev/project/new.txt", "credential": false, "persistence": false})));
    app.ingest(feed(json!({"kind": "file", "pid": 4100, "op": "write",
        "path": "/tmp/elsewhere", "credential": false, "persistence": false})));
    app.prepare();
    assert_eq!(app.visible(View::Files).len, 6);

    // Filters are per view.
    press(&mut app, KeyCode::Char('1'));
    assert!(app.views[View::Processes.index()].filter.is_none());
    press(&mut app, KeyCode::Char('2'));

    // Esc clears it.
    press(&mut app, KeyCode::Esc);
    assert_eq!(app.visible(View::Files).len, 10);

    // Esc while typing drops it too; n without a filter says so.
    type_str(&mut app, "/zzz");
    press(&mut app, KeyCode::Esc);
    assert!(app.prompt.is_none());
    assert!(app.views[View::Files.index()].filter.is_none());
    press(&mut app, KeyCode::Char('n'));
    assert!(app.status.as_deref().unwrap().contains("no filter"));
}

#[test]
fn filter_on_processes_matches_argv() {
    let mut app = ended_app();
    type_str(&mut app, "/PYTHON");
    press(&mut app, KeyCode::Enter);
    assert_eq!(app.visible(View::Processes).len, 1);
    press(&mut app, KeyCode::Enter);
    let d = app.details.as_ref().expect("details open");
    assert_eq!(d.title, "process 4102");
    assert!(
        d.lines.iter().any(|l| l.contains("\"--port\"")),
        "full argv"
    );
    assert!(d.lines.iter().any(|l| l.starts_with("cwd")), "cwd");
    assert!(d.lines.iter().any(|l| l.starts_with("netns")), "namespaces");
    press(&mut app, KeyCode::Esc);
    assert!(app.details.is_none());
}

#[test]
fn follow_toggles_and_moving_up_stops_it() {
    let mut app = live_app();
    press(&mut app, KeyCode::Char('5'));
    assert!(
        app.views[View::Log.index()].follow,
        "the Log follows by default"
    );
    app.ingest(feed(
        json!({"seq": 500, "kind": "fork", "pid": 9000, "ppid": 4100}),
    ));
    assert!(selected_line(&draw(&mut app, 80, 24)).contains("pid 9000"));

    press(&mut app, KeyCode::Char('k'));
    assert!(!app.views[View::Log.index()].follow);
    let held = selected_line(&draw(&mut app, 80, 24));
    app.ingest(feed(
        json!({"seq": 501, "kind": "fork", "pid": 9001, "ppid": 4100}),
    ));
    assert_eq!(selected_line(&draw(&mut app, 80, 24)), held);

    press(&mut app, KeyCode::Char('f'));
    assert!(app.views[View::Log.index()].follow);
    assert!(selected_line(&draw(&mut app, 80, 24)).contains("pid 9001"));

    // Other views do not follow until asked.
    press(&mut app, KeyCode::Char('2'));
    assert!(!app.views[View::Files.index()].follow);
    press(&mut app, KeyCode::Char('f'));
    app.ingest(feed(file_record(1)));
    assert!(selected_line(&draw(&mut app, 80, 24)).contains("/data/f000001"));
}

#[test]
fn pause_freezes_the_display_but_not_the_state() {
    let mut app = live_app();
    press(&mut app, KeyCode::Char('5'));
    let before = screen(&mut app, 80, 24);
    press(&mut app, KeyCode::Char('p'));
    assert!(app.paused.is_some());
    let shown = app.visible(View::Log).len;
    for i in 0..50 {
        app.ingest(feed(file_record(i)));
    }
    app.ingest(Feed::Stats {
        events: 1000,
        lost: 0,
    });
    for r in outside_records() {
        app.ingest(feed(r));
    }
    assert_eq!(app.visible(View::Log).len, shown, "display frozen");
    assert_eq!(
        app.log.end() as usize,
        shown + 53,
        "feed still drained into state"
    );
    let paused = screen(&mut app, 80, 24);
    assert!(paused.contains("PAUSED"));
    assert!(!paused.contains("OUTSIDE"), "the header is frozen too");
    // Same rows as before the pause.
    let body = |s: &str| s.lines().skip(4).take(18).collect::<Vec<_>>().join("\n");
    assert_eq!(body(&paused), body(&before));

    press(&mut app, KeyCode::Char('p'));
    assert!(app.paused.is_none());
    assert_eq!(app.visible(View::Log).len, shown + 53);
    assert!(screen(&mut app, 80, 24).contains("OUTSIDE"));
}

#[test]
fn quitting_asks_while_the_agent_runs() {
    let mut app = live_app();
    assert_eq!(press(&mut app, KeyCode::Char('q')), Action::AskQuit);
    assert!(app.confirm_quit);
    assert_eq!(press(&mut app, KeyCode::Esc), Action::CancelQuit);
    assert!(!app.confirm_quit);
    press(&mut app, KeyCode::Char('q'));
    assert_eq!(
        press(&mut app, KeyCode::Char('y')),
        Action::Quit(Quit::LeaveAgentRunning)
    );
    press_mod(&mut app, KeyCode::Char('c'), KeyModifiers::CONTROL);
    assert_eq!(
        press(&mut app, KeyCode::Char('n')),
        Action::Quit(Quit::StopAgent)
    );

    // Once the capture ended, q quits at once.
    app.ingest(Feed::Ended {
        reason: "the agent exited".into(),
    });
    assert_eq!(
        press(&mut app, KeyCode::Char('q')),
        Action::Quit(Quit::Normal)
    );
    // In replay too.
    let mut app = app_from(
        session().into_iter().take(5).collect(),
        Options {
            replay: true,
            ..Options::default()
        },
        t0(),
    );
    assert_eq!(
        press(&mut app, KeyCode::Char('q')),
        Action::Quit(Quit::Normal)
    );
}

#[test]
fn help_and_details_are_closed_by_esc() {
    let mut app = ended_app();
    press(&mut app, KeyCode::F(1));
    assert!(app.help);
    assert!(screen(&mut app, 80, 24).contains("pause the display"));
    assert_eq!(press(&mut app, KeyCode::Char('q')), Action::CloseOverlay);
    assert!(!app.help);
    press(&mut app, KeyCode::Char('?'));
    press(&mut app, KeyCode::Esc);
    assert!(!app.help);

    press(&mut app, KeyCode::Char('2'));
    press(&mut app, KeyCode::Enter);
    assert!(app.details.is_some());
    // Scrolling is clamped by drawing.
    press(&mut app, KeyCode::End);
    screen(&mut app, 80, 24);
    let end = app.details.as_ref().unwrap().scroll;
    press(&mut app, KeyCode::Up);
    screen(&mut app, 80, 24);
    assert_eq!(app.details.as_ref().unwrap().scroll, end.saturating_sub(1));
    press(&mut app, KeyCode::Esc);
    assert!(app.details.is_none());
}

#[test]
fn moving_keys() {
    let mut app = ended_app();
    press(&mut app, KeyCode::Char('5'));
    press(&mut app, KeyCode::Home);
    assert!(selected_line(&draw(&mut app, 80, 24)).contains("start"));
    press(&mut app, KeyCode::Char('j'));
    press(&mut app, KeyCode::Down);
    assert!(selected_line(&draw(&mut app, 80, 24)).starts_with("2 "));
    press(&mut app, KeyCode::PageDown);
    assert!(selected_line(&draw(&mut app, 80, 24)).starts_with("19 "));
    press(&mut app, KeyCode::Up);
    assert!(selected_line(&draw(&mut app, 80, 24)).starts_with("18 "));
    press(&mut app, KeyCode::End);
    assert!(selected_line(&draw(&mut app, 80, 24)).contains("ended: the agent exited"));
    press(&mut app, KeyCode::Char('g'));
    assert!(selected_line(&draw(&mut app, 80, 24)).starts_with("0 "));
}

#[test]
fn alerts_are_newest_first_and_include_derived_ones() {
    let mut app = outside_app();
    press(&mut app, KeyCode::Char('4'));
    let s = screen(&mut app, 120, 36);
    let pos = |needle: &str| s.find(needle).unwrap_or_else(|| panic!("{needle}: {s}"));
    // The newest (the outside connect) comes before the credential read, before the gap.
    assert!(pos("203.0.113.7:443") < pos("read credential /home/dev/.netrc"));
    assert!(pos("read credential") < pos("io_uring"));
    assert!(
        s.contains("wrote persistence file /home/dev/.bashrc"),
        "{s}"
    );
}

#[test]
fn the_final_violations_replace_the_live_alerts() {
    let mut app = outside_app();
    let live = app.alerts.len();
    assert!(live >= 4, "gap, credential, persistence, outside: {live}");
    press(&mut app, KeyCode::Char('4'));
    press(&mut app, KeyCode::Down);
    for (seq, pid, summary) in [
        (
            200,
            4200,
            "pid 4200 `unshare -n curl https://example.org/` ran in net namespace 4026532600, not the agent's 4026531840",
        ),
        (
            201,
            4101,
            "pid 4101 read credential /home/dev/.netrc (verified on ext4)",
        ),
    ] {
        app.ingest(feed(json!({"seq": seq, "at": "2026-11-30T11:24:18Z",
            "kind": "violation", "violation": if pid == 4200 { "outside" } else { "credential" },
            "pid": pid, "summary": summary})));
    }
    app.ingest(feed(
        json!({"seq": 202, "at": "2026-11-30T11:24:18Z", "kind": "end",
        "events": 10, "lost": 0}),
    ));
    let s = screen(&mut app, 120, 36);
    let rows: Vec<&str> = s.lines().filter(|l| l.starts_with('+')).collect();
    assert_eq!(
        rows.len(),
        3,
        "the gap and the two violations, each once: {s}"
    );
    // In the report's rank order (as they came), the gaps after them.
    assert!(
        rows[0].contains("unshare -n curl") && rows[0].contains(" end "),
        "{s}"
    );
    assert!(
        rows[1].contains("verified on ext4") && rows[1].contains(" end "),
        "{s}"
    );
    assert!(
        rows[2].contains("io_uring") && rows[2].contains(" live "),
        "{s}"
    );
    assert!(!s.contains("wrote persistence file"), "{s}");
    assert_eq!(app.alerts.len(), 3);
}

#[test]
fn environ_reads_are_one_live_alert_per_reader() {
    let mut app = outside_app();
    let before = app.alerts.len();
    for i in 0..50u64 {
        let result = if i < 2 { json!("ESRCH") } else { json!(null) };
        let kind = if i < 2 { "file_failed" } else { "file" };
        app.ingest(feed(
            json!({"seq": 300 + i, "kind": kind, "pid": 4100, "op": "read",
            "path": format!("/proc/{}/environ", 5000 + i), "fs": "proc", "count": 1,
            "credential": true, "verified": true, "persistence": false, "result": result}),
        ));
    }
    assert_eq!(app.alerts.len(), before + 1, "one alert for the reader");
    press(&mut app, KeyCode::Char('4'));
    let s = screen(&mut app, 120, 36);
    assert!(
        s.contains("pid 4100 read the environment of 48 processes, 2 failed"),
        "{s}"
    );
}

#[test]
fn agent_pane_gets_the_keyboard_with_ctrl_bracket() {
    let mut app = App::new(Options::default(), true, t0());
    assert_eq!(press(&mut app, KeyCode::Char('a')), Action::Noop);
    // Ctrl-] as terminals without the kitty protocol report it (0x1d → Ctrl-5).
    assert_eq!(
        press_mod(&mut app, KeyCode::Char('5'), KeyModifiers::CONTROL),
        Action::FocusAgent
    );
    for (code, m, bytes) in [
        (KeyCode::Char('q'), KeyModifiers::NONE, b"q".to_vec()),
        (KeyCode::Char('c'), KeyModifiers::CONTROL, vec![3]),
        (KeyCode::Enter, KeyModifiers::NONE, b"\r".to_vec()),
        (KeyCode::Up, KeyModifiers::NONE, b"\x1b[A".to_vec()),
        (KeyCode::Char('x'), KeyModifiers::ALT, b"\x1bx".to_vec()),
        (
            KeyCode::Char('é'),
            KeyModifiers::NONE,
            "é".as_bytes().to_vec(),
        ),
        (KeyCode::F(5), KeyModifiers::NONE, b"\x1b[15~".to_vec()),
        (KeyCode::Esc, KeyModifiers::NONE, vec![0x1b]),
    ] {
        assert_eq!(press_mod(&mut app, code, m), Action::ToAgent(bytes));
    }
    // Application cursor mode changes the arrows.
    app.agent_output(b"\x1b[?1h");
    assert_eq!(
        press(&mut app, KeyCode::Up),
        Action::ToAgent(b"\x1bOA".to_vec())
    );
    assert_eq!(
        press_mod(&mut app, KeyCode::Char(']'), KeyModifiers::CONTROL),
        Action::FocusMonitor
    );
    assert_eq!(press(&mut app, KeyCode::Tab), Action::NextView);
    // The agent's terminal follows the pane's size.
    draw(&mut app, 80, 24);
    let (rows, cols) = app.agent.as_mut().unwrap().pending_resize.take().unwrap();
    assert_eq!((rows, cols), (7, 78));
    draw(&mut app, 200, 50);
    assert_eq!(app.agent.as_ref().unwrap().pending_resize, Some((43, 98)));
    // When the capture ends the keyboard comes back.
    press_mod(&mut app, KeyCode::Char(']'), KeyModifiers::CONTROL);
    app.ingest(Feed::Ended {
        reason: "the agent exited".into(),
    });
    assert!(!app.agent.as_ref().unwrap().focused);
}

#[test]
fn details_scroll_moves() {
    let mut app = ended_app();
    press(&mut app, KeyCode::Enter);
    assert_eq!(app.details.as_ref().unwrap().title, "process 4100");
    press(&mut app, KeyCode::Down);
    assert_eq!(app.details.as_ref().unwrap().scroll, 1);
    press(&mut app, KeyCode::PageDown);
    assert_eq!(app.details.as_ref().unwrap().scroll, 11);
    press(&mut app, KeyCode::Home);
    assert_eq!(app.details.as_ref().unwrap().scroll, 0);
}

// ---------------------------------------------------------------------------------------------
// Small pieces.

#[test]
fn rfc3339_parsing() {
    assert_eq!(parse_rfc3339_ns("1970-01-01T00:00:00Z"), Some(0));
    assert_eq!(
        parse_rfc3339_ns("1970-01-01T00:00:01.5Z"),
        Some(1_500_000_000)
    );
    assert_eq!(
        parse_rfc3339_ns("2026-11-30T11:20:51.285371778Z"),
        Some(1_796_037_651_285_371_778)
    );
    assert_eq!(
        parse_rfc3339_ns("2026-11-30T12:20:51+01:00"),
        parse_rfc3339_ns("2026-11-30T11:20:51Z")
    );
    for bad in [
        "",
        "yesterday",
        "2026-13-01T00:00:00Z",
        "2026-11-30T11:20:51",
        "2026-11-30T11:20:51.Z",
    ] {
        assert_eq!(parse_rfc3339_ns(bad), None, "{bad}");
    }
}

#[test]
fn replay_feeds_every_record_then_says_whether_the_log_ended() {
    let fed = |records: Vec<Value>| {
        let (tx, mut rx) = tokio::sync::mpsc::channel(4);
        let n = records.len();
        let feeder = std::thread::spawn(move || super::feed_records(records.into_iter(), &tx));
        let mut got = Vec::new();
        while let Some(f) = rx.blocking_recv() {
            got.push(f);
        }
        feeder.join().unwrap();
        assert_eq!(got.len(), n + 1, "each record, then Ended");
        // Every line is a record, but the session's line of a kind this version does not
        // know, which goes to the Log view as it is.
        assert!(
            got[..n]
                .iter()
                .all(|f| matches!(f, Feed::Record(_) | Feed::Other(_)))
        );
        assert_eq!(
            got[..n]
                .iter()
                .filter(|f| matches!(f, Feed::Other(_)))
                .count(),
            usize::from(n > 31),
            "the heartbeat"
        );
        match got.pop() {
            Some(Feed::Ended { reason }) => reason,
            _ => panic!("the last feed is Ended"),
        }
    };
    assert_eq!(fed(session()), "end of the log (the agent exited)");
    assert!(fed(session()[..5].to_vec()).contains("no end record"));
}

#[test]
fn run_and_replay_futures_are_send() {
    fn is_send<T: Send>(_: &T) {}
    let (_tx, rx) = tokio::sync::mpsc::channel(1);
    let run = super::run(rx, Options::default(), None);
    is_send(&run);
    let replay = super::replay(std::path::PathBuf::new(), Options::default());
    is_send(&replay);
}

#[test]
fn later_records_update_their_rows() {
    let mut app = live_app();
    app.ingest(feed(
        json!({"kind": "net", "pid": 4102, "op": "connect", "proto": "tcp",
        "addr": "::1", "port": 8001, "result": "in_progress", "verdict": "inside", "count": 1}),
    ));
    app.ingest(feed(
        json!({"kind": "file", "pid": 4100, "op": "read", "path": "/etc/hosts",
        "dev": "254:0", "ino": 77, "count": 1, "credential": false, "persistence": false}),
    ));
    app.ingest(feed(
        json!({"kind": "net_result", "pid": 4102, "addr": "::1", "port": 8001,
        "result": "refused"}),
    ));
    app.ingest(feed(
        json!({"kind": "file_count", "pid": 4100, "path": "/etc/hosts",
        "dev": "254:0", "ino": 77, "count": 7}),
    ));
    press(&mut app, KeyCode::Char('3'));
    press(&mut app, KeyCode::End);
    let s = screen(&mut app, 80, 24);
    let row = s
        .lines()
        .find(|l| l.contains("[::1]:8001"))
        .expect("the connect row");
    assert!(row.contains("refused"), "{row}");
    press(&mut app, KeyCode::Enter);
    let d = app.details.as_ref().unwrap();
    assert!(
        d.lines.iter().any(|l| l.starts_with("── net_result")),
        "{:?}",
        d.lines
    );
    press(&mut app, KeyCode::Esc);
    press(&mut app, KeyCode::Char('2'));
    let s = screen(&mut app, 80, 24);
    let row = s.lines().find(|l| l.contains("/etc/hosts")).unwrap();
    assert!(row.contains("×7"), "{row}");
    press(&mut app, KeyCode::Char('5'));
    assert!(screen(&mut app, 80, 24).contains("read /etc/hosts 7 times in all"));
}

#[test]
fn targets_and_violation_kinds() {
    let mut app = App::new(Options::default(), false, t0());
    app.ingest(feed(
        json!({"kind": "start", "target": {"mode": "container",
        "command": [], "pid": null,
        "container": {"id": "0123456789abcdef0123", "cgroup": "/sys/fs/cgroup/x"}},
        "agent": {"netns": 4026532001u64}, "probe": {"file_open": "fentry", "gaps": []}}),
    ));
    app.ingest(feed(
        json!({"kind": "violation", "pid": 3, "at": "2026-11-30T11:24:16Z",
        "summary": "pid 3 connect 203.0.113.7:443 (ok), not allowed by --allow-net"}),
    ));
    app.ingest(feed(
        json!({"kind": "violation", "pid": 4, "at": "2026-11-30T11:24:16Z",
        "summary": "pid 4 connect 203.0.113.7:443 from net namespace 5, not the agent's 6"}),
    ));
    let s = screen(&mut app, 120, 36);
    assert!(s.contains("container container 0123456789ab"), "{s}");
    assert!(
        s.contains("agent netns 4026532001 │ file hook fentry │"),
        "{s}"
    );
    assert!(!s.contains("gap"), "{s}");
    assert!(
        s.contains("OUTSIDE: pid 4 connect 203.0.113.7:443 from net namespace 5"),
        "{s}"
    );
    press(&mut app, KeyCode::Char('4'));
    let s = screen(&mut app, 120, 36);
    let kind_of = |needle: &str| {
        s.lines()
            .find(|l| l.starts_with("+0") && l.contains(needle))
            .unwrap_or_else(|| panic!("{needle}: {s}"))
            .split_whitespace()
            .nth(1)
            .unwrap()
            .to_string()
    };
    assert_eq!(kind_of("--allow-net"), "network");
    assert_eq!(kind_of("from net namespace"), "outside");
    // Quitting in container mode does not ask.
    assert_eq!(
        press(&mut app, KeyCode::Char('q')),
        Action::Quit(Quit::Normal)
    );
}

#[test]
fn a_long_path_in_an_alert_keeps_its_names() {
    let summary = "pid 13511 read credential \
                   /work/wt/agent/target/agent-sessions/sw-agent-btUxwf/home/.ssh/id_rsa";
    // Cut at the end, the line would lose the file's name: the middle of the path goes instead.
    assert_eq!(
        ui::head_keeping_names(summary, 68),
        "pid 13511 read credential …/.ssh/id_rsa"
    );
    assert_eq!(ui::head_keeping_names(summary, 200), summary);
    // The longest path first; a URL, quotes and punctuation stay as they are.
    assert_eq!(
        ui::head_keeping_names("`cat /a/b/c/d/e/f/key`, /x/y/z, http://h:1/a/b/c/d", 45),
        "`cat …/f/key`, /x/y/z, http://h:1/a/b/c/d"
    );
    // Still too long: cut at the end.
    assert_eq!(ui::head_keeping_names("/a/b/c/d/eeeeeeee", 8), "…/d/eee…");
}

#[test]
fn the_tool_calls_view_groups_effects_under_their_step_and_filters_by_step() {
    let mut app = ended_app();
    press(&mut app, KeyCode::Char('6'));
    let all = screen(&mut app, 120, 36);
    // Each step of the session's agent with its effects under it.
    for want in [
        "git commit -q -m",
        "python3 server.py",
        "cat /home/dev/.netrc",
        ".netrc",
    ] {
        assert!(all.contains(want), "{want}:\n{all}");
    }
    let rows = app.visible(View::ToolCalls).len;
    // A step number: that step and its effects only.
    press(&mut app, KeyCode::Char('/'));
    press(&mut app, KeyCode::Char('3'));
    press(&mut app, KeyCode::Enter);
    let three = screen(&mut app, 120, 36);
    assert!(three.contains("cat /home/dev/.netrc"), "{three}");
    assert!(
        three.contains("read /home/dev/.netrc"),
        "its read:\n{three}"
    );
    assert!(!three.contains("python3"), "{three}");
    assert!(!three.contains("git commit"), "{three}");
    let only = app.visible(View::ToolCalls).len;
    assert!(only >= 2 && only < rows, "{only} of {rows}");
    // Enter on the step: its details.
    press(&mut app, KeyCode::Home);
    press(&mut app, KeyCode::Enter);
    let details = screen(&mut app, 120, 36);
    assert!(details.contains("step 3"), "{details}");
    assert!(details.contains("killed by SIGKILL"), "{details}");
    press(&mut app, KeyCode::Esc);
    // Text: the steps whose command has it.
    press(&mut app, KeyCode::Char('/'));
    press_mod(&mut app, KeyCode::Char('u'), KeyModifiers::CONTROL);
    for c in "server".chars() {
        press(&mut app, KeyCode::Char(c));
    }
    press(&mut app, KeyCode::Enter);
    let py = screen(&mut app, 120, 36);
    assert!(py.contains("python3 server.py"), "{py}");
    assert!(py.contains("127.0.0.1:9999"), "its refused connect:\n{py}");
    assert!(!py.contains(".netrc"), "{py}");
}
