//! `run`, `attach` and `container`: the commands that load the probe, watch a target to its
//! end (with the TUI when there is a terminal), then write the report and summary.
use std::time::Duration;

use super::args::{AttachArgs, CaptureArgs, ContainerArgs, RunArgs};
use super::export::{self, Export};
use super::outputs::{
    check_outputs, conclude, reconcile, status, summary_option, summary_path, write_outputs,
};
use crate::capture::{Capture, Ends, Mode};
use crate::error::{Result, Usage};
use crate::judge::{classify, identity, netpolicy, redact};
use crate::kernel::probe::{Probe, ProbeOptions};
use crate::launch::{container, target};
use crate::output::sign::LogKey;
use crate::output::{evidence, ocsf_out, otlp, report};
use crate::state::processes;
use crate::tui;

/// What `prepare` opened before the agent starts.
struct Prepared {
    classifier: classify::Classifier,
    /// Where the rules' files are looked for at start (see `judge::identity`).
    roots: identity::Roots,
    log: Option<evidence::LogWriter>,
    ocsf: Option<ocsf_out::OcsfWriter>,
    /// The signing key file (`--sign-key`), as opened.
    key_file: Option<std::fs::Metadata>,
}

/// Who the agent is, for the check of a `--sign-key` file: the uid it runs as and the
/// directory it works in, when known.
#[derive(Default)]
struct AgentSide {
    uid: Option<u32>,
    tree: Option<std::path::PathBuf>,
}

/// Checks the options every capture shares and opens the log, before anything starts; with
/// `--otlp`, also starts sending the log as it is written.
fn prepare(args: &CaptureArgs, agent: AgentSide) -> Result<(Prepared, Option<Export>)> {
    let otlp = export::config(args)?;
    if args.checkpoint < 0.1 {
        return Err(Usage(format!(
            "--checkpoint {}: give at least 0.1 seconds",
            args.checkpoint
        ))
        .into());
    }
    if args.sign_key.is_some() && args.log.is_none() && otlp.is_none() {
        return Err(Usage(
            "--sign-key signs the evidence log: give --log PATH (or --otlp) too".into(),
        )
        .into());
    }
    let key = match &args.sign_key {
        Some(path) => Some(LogKey::load(path, agent.uid, agent.tree.as_deref())?),
        None => None,
    };
    let key_file = key.as_ref().map(|k| k.file().clone());
    let mut globs = args.credentials.clone();
    if let Some(path) = &args.credentials_file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Usage(format!("--credentials-file {}: {e}", path.display())))?;
        globs.extend(
            text.lines()
                .map(|l| l.split('#').next().unwrap_or_default().trim())
                .filter(|l| !l.is_empty())
                .map(String::from),
        );
    }
    let classifier = classify::Classifier::new(&globs)?;
    check_outputs(&[
        ("--log", args.log.as_deref()),
        ("--report", args.out.report.as_deref()),
        (
            summary_option(&args.out),
            summary_path(&args.out).as_deref(),
        ),
        ("--ocsf", args.ocsf.as_deref()),
    ])?;
    let spool = match (&otlp, &args.log) {
        (Some(_), None) => Some(export::spool_path(args)?),
        _ => None,
    };
    let mut log = match args.log.as_ref().or(spool.as_ref()) {
        Some(path) => Some(evidence::LogWriter::create(path, args.force)?),
        None => None,
    };
    if let (Some(log), Some(key)) = (log.as_mut(), key) {
        eprintln!(
            "sandbox-watch: signing the log with Ed25519 key {} (check it with verify --pubkey)",
            key.public_hex()
        );
        log.set_key(key);
    }
    let ocsf = match &args.ocsf {
        Some(path) => Some(ocsf_out::OcsfWriter::create(path, args.force)?),
        None => None,
    };
    let export = match (otlp, &log) {
        (Some(config), Some(log)) => Some(export::start(
            config,
            log,
            spool.is_some(),
            args.otlp_timeout,
        )?),
        _ => None,
    };
    Ok((
        Prepared {
            classifier,
            roots: identity::Roots::new(&homes(), std::env::current_dir().ok().as_deref()),
            log,
            ocsf,
            key_file,
        },
        export,
    ))
}

/// Homes whose rule files are known by their inode: the caller's `$HOME`, the invoking
/// user's under sudo, and root's.
fn homes() -> Vec<std::path::PathBuf> {
    let mut homes: Vec<std::path::PathBuf> = std::env::var_os("HOME")
        .map(Into::into)
        .into_iter()
        .collect();
    if let Ok(Some(user)) = target::agent_user(None) {
        homes.push(user.home);
    }
    homes.push("/root".into());
    homes
}

fn agent_netns(spec: Option<&str>) -> Result<Option<u64>, Usage> {
    let Some(spec) = spec else { return Ok(None) };
    let path = match spec.parse::<u32>() {
        Ok(pid) => format!("/proc/{pid}/ns/net"),
        Err(_) => spec.to_string(),
    };
    let link = std::fs::read_link(&path).map_err(|e| {
        let why = match e.raw_os_error() {
            Some(libc::EINVAL) => "is not a namespace link".to_string(),
            Some(libc::ENOENT) if spec.parse::<u32>().is_ok() => "no such process".to_string(),
            _ => e.to_string(),
        };
        Usage(format!(
            "--agent-netns {spec}: {path} {why}; give a pid or /proc/PID/ns/net"
        ))
    })?;
    let link = link.to_string_lossy();
    link.starts_with("net:[")
        .then(|| target::parse_ns_link(&link))
        .flatten()
        .map(Some)
        .ok_or_else(|| {
            Usage(format!(
                "--agent-netns {spec}: {path} is not a network namespace"
            ))
        })
}

fn probe_options(args: &CaptureArgs, prepared: &Prepared) -> ProbeOptions {
    // The files already open that the agent must not touch, by inode: an open of one by a
    // traced task, through any path (/proc/MONITOR/fd/N, a hard link), is a tamper record.
    let outputs = [
        prepared.log.as_ref().and_then(|l| l.metadata().ok()),
        prepared.ocsf.as_ref().and_then(|o| o.metadata().ok()),
        prepared.key_file.clone(),
    ]
    .into_iter()
    .flatten()
    .map(|m| crate::kernel::guard::file_key(&m))
    .collect();
    ProbeOptions {
        ring_buffer_bytes: args.ring_buffer,
        output_ring_bytes: args.output_ring,
        cgroup: None,
        file_hook: args.file_hook,
        outputs,
    }
}

pub(super) fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

pub fn run(args: RunArgs) -> Result<u8> {
    let user = target::agent_user(args.user.as_deref())?;
    let agent = AgentSide {
        uid: Some(
            user.as_ref()
                .map_or_else(|| nix::unistd::geteuid().as_raw(), |u| u.uid.as_raw()),
        ),
        tree: std::env::current_dir().ok(),
    };
    let (mut prepared, export) = prepare(&args.capture, agent)?;
    let program = target::resolve_program(&args.command[0])?;
    if let Some(u) = &user {
        prepared.roots.add(&u.home);
    }
    let fixed_ns = agent_netns(args.capture.agent_netns.as_deref())?;
    if !(args.linger >= 0.0 && args.linger.is_finite()) {
        return Err(Usage(format!(
            "--linger {}: give a number of seconds",
            args.linger
        ))
        .into());
    }
    let mut probe = Probe::load(&probe_options(&args.capture, &prepared))?;
    let rings = probe.rings()?;
    let tui = use_tui(&args.capture);
    let (pane, terminal) = match tui {
        true => {
            let (ours, theirs) = target::pseudo_terminal()?;
            (Some(ours), Some(theirs))
        }
        false => (None, None),
    };
    // With --otlp, the collector's credentials stay with the monitor.
    let withhold = match export {
        Some(_) => otlp::config::CREDENTIAL_VARS,
        None => &[],
    };
    if args.protect {
        crate::launch::guard::check_inheritable()?;
    }
    let child = target::fork_gated(
        &program,
        &args.command,
        user,
        withhold,
        terminal,
        args.protect,
    )?;
    probe.trace(child.pid.as_raw() as u32)?;
    probe.seal()?;
    let mut capture = new_capture(
        Mode::Run {
            // Recorded as the kernel's argv is: bytes that are not UTF-8 escaped, then redacted.
            command: redact::redact_argv(&recorded_argv(&args.command)).0,
            pid: child.pid.as_raw() as u32,
        },
        probe,
        prepared,
        &args.capture,
    );
    capture.agent_netns = fixed_ns;
    capture.compat_guard = true;
    if args.protect {
        capture.dropped_capabilities = crate::launch::guard::PROTECT
            .iter()
            .map(|(_, name)| name.to_string())
            .collect();
    }
    // The start record is on disk before the agent runs its first instruction: a kill of the
    // monitor at any moment leaves a log `verify` calls unended.
    capture.log_start();
    let pid = child.release()?;

    let rt = runtime()?;
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        if let Ok(status) = nix::sys::wait::waitpid(pid, None) {
            let _ = tx.send(status);
        }
    });
    let ends = Ends {
        agent: Some(rx),
        linger: Duration::from_secs_f64(args.linger),
        duration: args.capture.duration.map(Duration::from_secs_f64),
        when_empty: false,
        container: None,
        stop: None,
    };
    let screen = tui.then_some(Screen {
        pane,
        agent: Some(pid),
    });
    let ended = drive(&rt, capture, rings, ends, screen, export, &args.capture.out)?;
    let report = &ended.report;
    let agent_code = match (report.exit.code, report.exit.signal) {
        (Some(c), _) => c as u8,
        (None, Some(sig)) => 128u8.wrapping_add(sig as u8),
        _ => 0,
    };
    ended.end(&args.capture.out, agent_code)
}

pub fn attach(args: AttachArgs) -> Result<u8> {
    let agent = AgentSide {
        uid: std::fs::metadata(format!("/proc/{}", args.pid))
            .ok()
            .map(|m| std::os::unix::fs::MetadataExt::uid(&m)),
        tree: std::fs::read_link(format!("/proc/{}/cwd", args.pid)).ok(),
    };
    let (mut prepared, export) = prepare(&args.capture, agent)?;
    if let Ok(cwd) = std::fs::read_link(format!("/proc/{}/cwd", args.pid)) {
        prepared.roots.add(&cwd);
    }
    target::check_attachable(args.pid)?;
    let fixed_ns = agent_netns(args.capture.agent_netns.as_deref())?;
    let ns = fixed_ns.or_else(|| target::netns_of(args.pid));
    let mut probe = Probe::load(&probe_options(&args.capture, &prepared))?;
    let rings = probe.rings()?;
    let mut existing = Vec::new();
    // Trace the tree, then look again until no new member appears: a child forked while we
    // were adding its parent is caught either by the kernel (parent traced) or by the rescan.
    let mut seen = std::collections::HashSet::new();
    loop {
        let members = target::tree(args.pid);
        let new: Vec<_> = members
            .into_iter()
            .filter(|m| !seen.contains(&m.pid))
            .collect();
        if new.is_empty() {
            break;
        }
        for m in new {
            probe.trace(m.pid)?;
            seen.insert(m.pid);
            existing.push(m);
        }
    }
    if seen.is_empty() {
        return Err(Usage(format!(
            "no process with pid {} (it exited before the attach)",
            args.pid
        ))
        .into());
    }
    probe.seal()?;
    let command = existing
        .iter()
        .find(|p: &&processes::Existing| p.pid == args.pid)
        .map(|p| redact::redact_argv(&p.argv).0)
        .unwrap_or_default();
    let mode = Mode::Attach {
        pid: args.pid,
        command,
    };
    let mut capture = new_capture(mode, probe, prepared, &args.capture);
    capture.agent_netns = ns;
    capture.agent_pid = Some(args.pid);
    capture.existing = existing;
    watch_target(&args.capture, capture, rings, true, None, export)
}

pub fn container(args: ContainerArgs) -> Result<u8> {
    let (prepared, export) = prepare(&args.capture, AgentSide::default())?;
    let c = container::resolve(&args.target)?;
    let fixed_ns = agent_netns(args.capture.agent_netns.as_deref())?;
    let mut options = probe_options(&args.capture, &prepared);
    options.cgroup = Some((c.cgroup_id, c.level));
    let mut probe = Probe::load(&options)?;
    let rings = probe.rings()?;
    // The processes already inside; the kernel adds the others by cgroup from now on.
    let inside: Vec<processes::Existing> =
        c.pids().into_iter().filter_map(target::existing).collect();
    let ns = fixed_ns.or_else(|| inside.iter().find_map(|e| e.netns));
    let agent_pid = inside.first().map(|e| e.pid);
    for e in &inside {
        probe.trace(e.pid)?;
    }
    probe.seal()?;
    let mode = Mode::Container {
        id: c.id.clone(),
        cgroup: c.cgroup.clone(),
    };
    let mut capture = new_capture(mode, probe, prepared, &args.capture);
    capture.agent_netns = ns;
    capture.agent_pid = agent_pid;
    capture.existing = inside;
    watch_target(&args.capture, capture, rings, false, Some(c), export)
}

/// The addresses the host rules of `--allow-net` resolve to now (best effort), as rules: a
/// connect to one matches without the DNS question having been seen. They go into the log's
/// start record, so a replay judges with the same rules.
fn resolved(rules: &[String]) -> Vec<String> {
    use std::net::ToSocketAddrs;
    let mut out = Vec::new();
    for rule in rules.iter().filter_map(|r| netpolicy::parse_rule(r).ok()) {
        if let netpolicy::Rule::Host { host, port } = &rule
            && !host.starts_with('*')
            && let Ok(addrs) = (host.as_str(), port.unwrap_or(0)).to_socket_addrs()
        {
            for a in addrs {
                // Bracketed for IPv6, so that no last group reads as a port.
                let net = match a.ip() {
                    std::net::IpAddr::V4(ip) => format!("{ip}/32"),
                    std::net::IpAddr::V6(ip) => format!("[{ip}/128]"),
                };
                let text = match port {
                    Some(p) => format!("{net}:{p}"),
                    None => net,
                };
                if !out.contains(&text) {
                    out.push(text);
                }
            }
        }
    }
    out
}

/// A capture with what `prepare` opened and the options every mode shares.
fn new_capture(mode: Mode, probe: Probe, prepared: Prepared, args: &CaptureArgs) -> Capture {
    let mut capture = Capture::new(mode, probe, prepared.classifier, prepared.log);
    capture.know_inodes(&prepared.roots);
    capture.allow_net_resolved = resolved(&args.allow_net);
    capture.allow_net = args.allow_net.clone();
    capture.ocsf = prepared.ocsf;
    capture.capture_output = args.capture_output;
    capture.checkpoint = Duration::from_secs_f64(args.checkpoint);
    capture
}

/// The TUI is used unless --headless, or when stdin and stdout are not a terminal.
pub(super) fn interactive(headless: bool) -> bool {
    use std::io::IsTerminal as _;
    !headless && std::io::stdout().is_terminal() && std::io::stdin().is_terminal()
}

/// The TUI when there is a terminal that answers: one that does not answer the
/// cursor-position query (which the TUI needs) is found here, before the agent starts, and
/// the capture runs headless, saying so.
fn use_tui(args: &CaptureArgs) -> bool {
    if !interactive(args.headless) {
        return false;
    }
    match tui::terminal_answers() {
        Ok(()) => true,
        Err(e) => {
            eprintln!(
                "sandbox-watch: the terminal does not answer the cursor-position query ({e}): \
                 running without the TUI (as with --headless); the report and summary are \
                 written as usual"
            );
            false
        }
    }
}

/// attach and container: watch until the target is gone, at --duration or on a signal, then
/// write the report and summary.
fn watch_target(
    args: &CaptureArgs,
    capture: Capture,
    rings: crate::kernel::probe::Rings,
    when_empty: bool,
    container: Option<container::Container>,
    export: Option<Export>,
) -> Result<u8> {
    let ends = Ends {
        agent: None,
        linger: Duration::ZERO,
        duration: args.duration.map(Duration::from_secs_f64),
        when_empty,
        container,
        stop: None,
    };
    let screen = use_tui(args).then_some(Screen {
        pane: None,
        agent: None,
    });
    drive(&runtime()?, capture, rings, ends, screen, export, &args.out)?.end(&args.out, 0)
}

/// What the TUI shows besides the records: the agent's terminal (run mode).
struct Screen {
    pane: Option<std::os::fd::OwnedFd>,
    agent: Option<nix::unistd::Pid>,
}

pub(super) fn tui_options(replay: bool) -> tui::Options {
    tui::Options {
        no_color: std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()),
        replay,
        log_problem: None,
    }
}

/// Runs the capture to its end, with the TUI when there is a screen: the TUI gets every
/// record as it is logged and stays until `q` after the capture ends; quitting it first ends
/// the capture (and, unless the user chose to leave it running, stops the agent).
/// With the TUI, the report and summary are written as soon as the capture ends (the screen
/// stays), and SIGHUP, SIGTERM or SIGINT end the capture (if it still runs) and the TUI;
/// with `--otlp`, they are written once the export has finished, and carry it.
fn drive(
    rt: &tokio::runtime::Runtime,
    mut capture: Capture,
    rings: crate::kernel::probe::Rings,
    mut ends: Ends,
    screen: Option<Screen>,
    export: Option<Export>,
    out: &super::args::Outputs,
) -> anyhow::Result<Ended> {
    let Some(screen) = screen else {
        capture.log_start();
        capture.log_existing();
        rt.block_on(capture.watch(rings, ends))?;
        let mut report = capture.finish();
        let exported = export::finish(export, &mut report);
        return Ok(Ended {
            report,
            exported,
            written: false,
        });
    };
    let signals = {
        use tokio::signal::unix::{SignalKind, signal};
        let _rt = rt.enter();
        [
            signal(SignalKind::hangup())?,
            signal(SignalKind::terminate())?,
            signal(SignalKind::interrupt())?,
        ]
    };
    let (feed, feed_rx) = tokio::sync::mpsc::channel(1 << 16);
    capture.feed = Some(feed.clone());
    // The TUI owns the terminal: no anchor lines on it (the summary has the end's).
    capture.anchors = false;
    capture.log_start();
    capture.log_existing();
    let (stop, stop_rx) = tokio::sync::oneshot::channel();
    ends.stop = Some(stop_rx);
    let (done, mut done_rx) = tokio::sync::oneshot::channel::<()>();
    // The agent's terminal, for leaving the agent running after the TUI is gone.
    let keep = match &screen.pane {
        Some(fd) => Some(fd.try_clone()?),
        None => None,
    };
    rt.block_on(async move {
        let capturing = async {
            let watched = capture.watch(rings, ends).await;
            let mut report = capture.finish();
            // The export's wait for the collector (up to --otlp-timeout) off this thread: the
            // TUI keeps answering meanwhile.
            let (mut report, exported) = tokio::task::spawn_blocking(move || {
                let exported = export::finish(export, &mut report);
                (report, exported)
            })
            .await
            .expect("the export's end does not panic");
            // The agent's transcript, once the capture has ended (it may write it last).
            reconcile(out, &mut report);
            // At once, the screen still up: nothing that ends the TUI later can lose them.
            let written = write_outputs(out, &report, exported.as_ref());
            let reason = match &written {
                Ok(()) => capture.ended_by.clone(),
                Err(e) => format!("{}; writing the report failed: {e}", capture.ended_by),
            };
            let _ = done.send(());
            let _ = feed.send(tui::Feed::Ended { reason }).await;
            watched.and(written).map(|_| Ended {
                report,
                exported,
                written: true,
            })
        };
        let showing = async {
            let [mut hup, mut term, mut int] = signals;
            let quit = tokio::select! {
                quit = tui::run(feed_rx, tui_options(false), screen.pane) => quit,
                // The terminal went away, or someone asked us to stop: the capture sees the
                // same signal and ends (as headless: the agent is not stopped), the TUI closes.
                _ = hup.recv() => Ok(tui::Quit::Normal),
                _ = term.recv() => Ok(tui::Quit::Normal),
                _ = int.recv() => Ok(tui::Quit::Normal),
            };
            match (&quit, screen.agent) {
                (Ok(tui::Quit::StopAgent), Some(agent)) => {
                    // Stop it, and let the capture see it go (its end ends the capture); one
                    // that ignores SIGTERM gets SIGKILL.
                    use nix::sys::signal::{Signal, killpg};
                    use tokio::sync::oneshot::error::TryRecvError;
                    if matches!(done_rx.try_recv(), Err(TryRecvError::Empty)) {
                        let _ = killpg(agent, Signal::SIGTERM);
                        let three = Duration::from_secs(3);
                        if tokio::time::timeout(three, &mut done_rx).await.is_err() {
                            let _ = killpg(agent, Signal::SIGKILL);
                            let two = Duration::from_secs(2);
                            let _ = tokio::time::timeout(two, &mut done_rx).await;
                        }
                    }
                }
                (Ok(tui::Quit::LeaveAgentRunning), _) => {
                    if let Some(master) = keep
                        && let Err(e) = target::keep_terminal_open(master)
                    {
                        eprintln!("sandbox-watch: cannot keep the agent's terminal open: {e}");
                    }
                }
                _ => {}
            }
            let _ = stop.send(());
            quit
        };
        let (ended, quit) = tokio::join!(capturing, showing);
        let ended = ended?;
        if let Err(e) = quit {
            eprintln!("sandbox-watch: the terminal: {e} (the report and summary were written)");
        }
        Ok(ended)
    })
}

/// A capture that ended: its report, where its export stands, and whether the outputs were
/// written already (by the TUI, when the capture ended).
struct Ended {
    report: report::Report,
    exported: Option<otlp::Status>,
    written: bool,
}

impl Ended {
    /// Writes the outputs unless the TUI did; the exit status.
    fn end(&self, out: &super::args::Outputs, code: u8) -> Result<u8> {
        let exported = self.exported.as_ref();
        if self.written {
            Ok(status(out, &self.report, exported, code))
        } else {
            conclude(out, &self.report, exported, code)
        }
    }
}

/// An argv as the record keeps it: each argument's bytes, `\xNN` where they are not UTF-8 (as
/// the decoder writes the kernel's argv).
fn recorded_argv(argv: &[std::ffi::OsString]) -> Vec<String> {
    use std::os::unix::ffi::OsStrExt;
    argv.iter()
        .map(|a| crate::kernel::decode::escape(a.as_bytes()))
        .collect()
}
