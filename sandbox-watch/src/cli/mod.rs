//! sandbox-watch: what an AI agent did inside its sandbox, recorded from the kernel.
//!
//! The command line, log and report are a contract (see README.md): names stay, fields are added.
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::judge::{classify, netpolicy, redact};
use crate::kernel::probe;
use crate::launch::{container, target};
use crate::output::{evidence, ocsf_out, report};
use crate::state::processes;
use crate::{demo, replay, tui};

use crate::capture::{Capture, Ends, Mode};
use crate::kernel::probe::{FileHook, Probe, ProbeOptions};
use crate::launch::target::Usage;
use crate::state::processes::{AgentRule, Model};

/// Exit statuses (README, "Exit status").
const EXIT_VIOLATION: u8 = 3;
const EXIT_USAGE: u8 = 2;
const EXIT_PROBE: u8 = 4;
/// `replay` of a log without its end record (as `verify` says of it).
const EXIT_UNENDED: u8 = 5;

#[derive(Parser)]
#[command(
    name = "sandbox-watch",
    version,
    about = "Shows what an AI agent did inside its sandbox, recorded from the kernel.",
    long_about = "Shows what an AI agent did inside its sandbox, recorded from the kernel where the agent \
cannot reach or edit the record: every command it ran, the files it read and changed (credentials and \
persistence flagged), and whether anything ran outside its network namespace.\n\n\
With no subcommand, runs a short demo agent session under the probe and prints its summary.",
    after_help = "Examples:\n  sudo sandbox-watch run --report r.json --log run.jsonl -- ./agent.sh\n  \
sudo sandbox-watch run --headless --fail-on outside,credential -- unshare -n python3 agent.py\n  \
sudo sandbox-watch attach --duration 60 1234\n  sandbox-watch verify run.jsonl\n\n\
Exit status: the agent's own (run), 3 when a --fail-on kind was found, 2 for a usage error, \
4 when the probe cannot start, 1 for other errors. verify and replay: 1 for a tampered log, 5 \
for one that never ended."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Launch the agent under the probe; ends when it exits (after --linger).
    Run(RunArgs),
    /// Watch a running process and its descendants; ends when they are gone.
    Attach(AttachArgs),
    /// Watch everything inside one container, whatever started it; ends when it is empty.
    Container(ContainerArgs),
    /// Check a log's hash chain offline (no root, no kernel needed). Exit 0: intact and
    /// ended; 1: a record changed, removed, inserted or reordered (the first bad seq is named),
    /// or not a log; 5: intact but without its end record (the monitor was killed, or records
    /// were cut from the end).
    Verify {
        /// The evidence log (JSONL) written by --log.
        log: PathBuf,
    },
    /// The TUI again on a recorded log (headless: the report and summary rebuilt from it),
    /// after checking its hash chain.
    Replay(ReplayArgs),
    /// Run the bundled demo agent session under the probe and print its summary.
    Demo(DemoArgs),
}

#[derive(Args, Clone)]
struct CaptureArgs {
    /// No TUI: write the log, report and summary only (also when stdin or stdout is not a
    /// terminal).
    #[arg(long)]
    headless: bool,
    /// The evidence log (JSONL, hash-chained), written as events arrive.
    #[arg(long, value_name = "PATH")]
    log: Option<PathBuf>,
    /// Overwrite an existing --log file.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    out: Outputs,
    /// The same events as OCSF 1.3 JSONL (Process Activity 1007, File System Activity 1001,
    /// Network Activity 4001, DNS Activity 4003).
    #[arg(long, value_name = "PATH")]
    ocsf: Option<PathBuf>,
    /// Stop after this many seconds (what is still running then is reported and left running).
    #[arg(long, value_name = "SECS", allow_negative_numbers = true, value_parser = parse_duration)]
    duration: Option<f64>,
    /// Also count reads of files matching this glob as credential reads (repeatable).
    #[arg(long = "credential", value_name = "GLOB")]
    credentials: Vec<String>,
    /// A file of more credential globs, one a line (`#` starts a comment).
    #[arg(long = "credentials-file", value_name = "PATH")]
    credentials_file: Option<PathBuf>,
    /// Compare verdicts with this net namespace instead (a pid or /proc/PID/ns/net).
    #[arg(long, value_name = "PID|/proc/PID/ns/net")]
    agent_netns: Option<String>,
    /// Allowed destinations (repeatable): CIDR[:PORT] or HOST[:PORT] (no port: any port;
    /// *.domain for its subdomains). A connect no rule allows is a `network` violation, and so
    /// is a DNS question unless a host rule names it or a rule allows its resolver (the
    /// resolver's address, any port or 53). Without the option there are none. DNS answers
    /// are not seen: a host rule allows a connect (to the rule's port) by a process that asked
    /// for that name, whatever the address; use CIDR rules where that is too loose.
    #[arg(long = "allow-net", value_name = "CIDR[:PORT]|HOST[:PORT]", value_parser = parse_allow_net)]
    allow_net: Vec<String>,
    /// Ring buffer size in bytes (a power of two, at least 4096).
    #[arg(long, value_name = "BYTES", value_parser = parse_ring_size)]
    ring_buffer: Option<u32>,
    /// Use this file-open hook instead of trying fentry first.
    #[arg(long, value_name = "fentry|tracepoint", value_parser = parse_file_hook)]
    file_hook: Option<FileHook>,
}

#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    capture: CaptureArgs,
    /// Seconds to keep watching after the agent exits, for its last children's events.
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = 1.0,
        allow_negative_numbers = true,
        value_parser = parse_secs
    )]
    linger: f64,
    /// Run the agent as this user (name or uid). Default: the user who ran sudo, else yourself.
    #[arg(long, value_name = "USER")]
    user: Option<String>,
    /// The agent's command line.
    #[arg(required = true, trailing_var_arg = true, value_name = "COMMAND")]
    command: Vec<String>,
}

#[derive(Args)]
struct AttachArgs {
    #[command(flatten)]
    capture: CaptureArgs,
    /// The process to watch, with its descendants.
    #[arg(value_parser = parse_pid, allow_hyphen_values = true)]
    pid: u32,
}

#[derive(Args)]
struct ContainerArgs {
    #[command(flatten)]
    capture: CaptureArgs,
    /// A container id (full or an unambiguous start), a name known to docker, podman, nerdctl
    /// or crictl, or a cgroup v2 path (absolute, or relative to the cgroup2 mount).
    #[arg(value_name = "ID|NAME|CGROUP")]
    target: String,
}

#[derive(Args)]
struct ReplayArgs {
    /// No TUI: write the report and summary only.
    #[arg(long)]
    headless: bool,
    #[command(flatten)]
    out: Outputs,
    /// The evidence log (JSONL) written by --log.
    log: PathBuf,
}

#[derive(Args)]
struct DemoArgs {
    /// Keep the demo's files in this directory (default: a temporary one).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

fn parse_pid(s: &str) -> Result<u32, String> {
    match s.parse::<i64>() {
        Ok(n) if n > 0 && n <= u32::MAX as i64 => Ok(n as u32),
        Ok(n) => Err(format!(
            "{n} is not a process id; give a positive number such as 1234"
        )),
        Err(_) => Err(format!(
            "'{s}' is not a process id; give a number such as 1234"
        )),
    }
}

/// The violation kinds of `--fail-on`.
#[derive(Clone, Debug)]
struct Kinds(Vec<String>);

fn parse_fail_on(s: &str) -> Result<Kinds, String> {
    let kinds: Vec<String> = s.split(',').map(|k| k.trim().to_string()).collect();
    for k in &kinds {
        if k.is_empty() {
            return Err(format!(
                "an empty kind in '{s}'; give a comma list of {}",
                report::VIOLATION_KINDS.join(", ")
            ));
        }
        if !report::VIOLATION_KINDS.contains(&k.as_str()) {
            return Err(format!(
                "unknown kind '{k}'; choose from {}",
                report::VIOLATION_KINDS.join(", ")
            ));
        }
    }
    Ok(Kinds(kinds))
}

fn parse_allow_net(s: &str) -> Result<String, String> {
    netpolicy::parse_rule(s)
        .map(|_| s.to_string())
        .map_err(|e| e.reason)
}

/// The policy of `--allow-net`; host names are also resolved now (best effort) so a connect
/// to their address matches without having seen the DNS question.
pub fn policy(rules: &[String]) -> netpolicy::Policy {
    use std::net::ToSocketAddrs;
    let rules: Vec<netpolicy::Rule> = rules
        .iter()
        .filter_map(|r| netpolicy::parse_rule(r).ok())
        .collect();
    let mut all = rules.clone();
    for rule in &rules {
        if let netpolicy::Rule::Host { host, port } = rule
            && !host.starts_with('*')
            && let Ok(addrs) = (host.as_str(), port.unwrap_or(0)).to_socket_addrs()
        {
            for a in addrs {
                let prefix = if a.is_ipv4() { 32 } else { 128 };
                all.push(netpolicy::Rule::Cidr {
                    net: a.ip(),
                    prefix,
                    port: *port,
                });
            }
        }
    }
    netpolicy::Policy::new(all)
}

fn parse_ring_size(s: &str) -> Result<u32, String> {
    let n: u64 = s
        .parse()
        .map_err(|_| format!("'{s}' is not a number of bytes"))?;
    if n > 1 << 30 {
        return Err(format!("{n} is too large; give a power of two up to 1 GiB"));
    }
    let n = n as u32;
    if n < 4096 || !n.is_power_of_two() {
        return Err(format!("{n} is not a power of two of at least 4096"));
    }
    Ok(n)
}

fn parse_duration(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x > 0.0 && x.is_finite() => Ok(x),
        _ => Err(format!(
            "'{s}' is not a positive number of seconds; give one like 30 or 0.5"
        )),
    }
}

fn parse_secs(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x >= 0.0 && x.is_finite() => Ok(x),
        _ => Err(format!(
            "'{s}' is not a number of seconds; give one like 1, 0.5 or 30"
        )),
    }
}

fn parse_file_hook(s: &str) -> Result<FileHook, String> {
    match s {
        "fentry" => Ok(FileHook::Fentry),
        "tracepoint" => Ok(FileHook::Tracepoint),
        _ => Err(format!("'{s}' is not a hook; choose fentry or tracepoint")),
    }
}

pub fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let cli = Cli::parse();
    let result = match cli.command {
        None => demo::run(None),
        Some(Command::Demo(a)) => demo::run(a.dir),
        Some(Command::Run(a)) => run(a),
        Some(Command::Attach(a)) => attach(a),
        Some(Command::Container(a)) => container(a),
        Some(Command::Verify { log }) => Ok(verify(&log)),
        Some(Command::Replay(a)) => replay(a),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            let code = if e.is::<Usage>()
                || e.is::<evidence::LogError>()
                || e.is::<classify::ClassifyError>()
            {
                EXIT_USAGE
            } else if e.is::<probe::ProbeError>() {
                EXIT_PROBE
            } else {
                1
            };
            eprintln!("sandbox-watch: {e:#}");
            ExitCode::from(code)
        }
    }
}

/// Prints a line on stdout; a closed pipe (`| head`) is not worth a panic.
pub fn say(text: &str) {
    let _ = writeln!(std::io::stdout(), "{text}");
}

fn verify(log: &Path) -> u8 {
    match evidence::verify(log) {
        Ok(v) => {
            let msg = v.message(&log.display().to_string());
            if v.exit_code() == 0 {
                say(&msg)
            } else {
                eprintln!("{msg}")
            }
            v.exit_code() as u8
        }
        Err(e) => {
            eprintln!("{}: cannot read: {e}", log.display());
            1
        }
    }
}

/// Checks the options every capture shares and opens the log, before anything starts.
/// What `prepare` opened before the agent starts.
struct Prepared {
    classifier: classify::Classifier,
    log: Option<evidence::LogWriter>,
    ocsf: Option<ocsf_out::OcsfWriter>,
}

fn prepare(args: &CaptureArgs) -> anyhow::Result<Prepared> {
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
    let log = match &args.log {
        Some(path) => Some(evidence::LogWriter::create(path, args.force)?),
        None => None,
    };
    let ocsf = match &args.ocsf {
        Some(path) => Some(ocsf_out::OcsfWriter::create(path, args.force)?),
        None => None,
    };
    Ok(Prepared {
        classifier,
        log,
        ocsf,
    })
}

/// Every output path is checked before anything starts, so a run is never lost to a path
/// that cannot be written at its end: each is a file (not a directory) in a directory that
/// exists, can be written, and no two options name the same file.
fn check_outputs(named: &[(&str, Option<&Path>)]) -> Result<(), Usage> {
    let mut seen: Vec<(&str, PathBuf)> = Vec::new();
    for &(option, path) in named {
        let Some(path) = path else { continue };
        let what = || format!("{option} {}", path.display());
        if path.is_dir() {
            return Err(Usage(format!(
                "{}: is a directory; give a file path",
                what()
            )));
        }
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        if !dir.is_dir() {
            return Err(Usage(format!(
                "{}: directory {} does not exist",
                what(),
                dir.display()
            )));
        }
        if nix::unistd::access(dir, nix::unistd::AccessFlags::W_OK).is_err() {
            return Err(Usage(format!(
                "{}: directory {} is not writable",
                what(),
                dir.display()
            )));
        }
        let file = file_key(path);
        if let Some((other, _)) = seen.iter().find(|(_, f)| *f == file) {
            return Err(Usage(format!(
                "{other} and {option} name the same file ({}); give each its own",
                path.display()
            )));
        }
        seen.push((option, file));
    }
    // The report and summary are written at the end: try now (the log and OCSF files are
    // opened now anyway). An existing file is opened without changing it; a new one is created
    // and removed.
    for &(option, path) in named {
        let Some(path) = path.filter(|_| option != "--log" && option != "--ocsf") else {
            continue;
        };
        let tried = if path.exists() {
            std::fs::OpenOptions::new()
                .append(true)
                .open(path)
                .map(drop)
        } else {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(path)
                .and_then(|_| std::fs::remove_file(path))
        };
        tried.map_err(|e| Usage(format!("{option} {}: cannot write it: {e}", path.display())))?;
    }
    Ok(())
}

/// A path with its directory resolved, to tell whether two options name one file.
fn file_key(path: &Path) -> PathBuf {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::canonicalize(dir)
        .unwrap_or_else(|_| dir.to_path_buf())
        .join(path.file_name().unwrap_or_default())
}

/// What names the summary's path, for messages.
fn summary_option(out: &Outputs) -> &'static str {
    if out.summary.is_some() {
        "--summary"
    } else {
        "$GITHUB_STEP_SUMMARY"
    }
}

/// Where the summary goes: --summary, else $GITHUB_STEP_SUMMARY when set (and not empty).
fn summary_path(out: &Outputs) -> Option<PathBuf> {
    out.summary.clone().or_else(|| {
        std::env::var_os("GITHUB_STEP_SUMMARY")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    })
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

fn probe_options(args: &CaptureArgs) -> ProbeOptions {
    ProbeOptions {
        ring_buffer_bytes: args.ring_buffer,
        cgroup: None,
        file_hook: args.file_hook,
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

fn run(args: RunArgs) -> anyhow::Result<u8> {
    let prepared = prepare(&args.capture)?;
    let program = target::resolve_program(&args.command[0])?;
    let user = target::agent_user(args.user.as_deref())?;
    let fixed_ns = agent_netns(args.capture.agent_netns.as_deref())?;
    if !(args.linger >= 0.0 && args.linger.is_finite()) {
        return Err(Usage(format!(
            "--linger {}: give a number of seconds",
            args.linger
        ))
        .into());
    }
    let mut probe = Probe::load(&probe_options(&args.capture))?;
    let ring = probe.ring()?;
    let tui = use_tui(&args.capture);
    let (pane, terminal) = match tui {
        true => {
            let (ours, theirs) = target::pseudo_terminal()?;
            (Some(ours), Some(theirs))
        }
        false => (None, None),
    };
    // No other thread exists yet: the fork is safe.
    let child = target::fork_gated(&program, &args.command, user, terminal)?;
    probe.trace(child.pid.as_raw() as u32)?;
    let rule = fixed_ns.map_or(AgentRule::FirstNonLauncher, AgentRule::Fixed);
    let model = Model::new(rule);
    let capture = new_capture(
        Mode::Run {
            command: redact::redact_argv(&args.command).0,
            pid: child.pid.as_raw() as u32,
        },
        probe,
        model,
        prepared,
        &args.capture,
    );
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
    let report = drive(&rt, capture, ring, ends, screen)?;
    let agent_code = match (report.exit.code, report.exit.signal) {
        (Some(c), _) => c as u8,
        (None, Some(sig)) => 128u8.wrapping_add(sig as u8),
        _ => 0,
    };
    conclude(&args.capture.out, &report, agent_code)
}

fn attach(args: AttachArgs) -> anyhow::Result<u8> {
    let prepared = prepare(&args.capture)?;
    target::check_attachable(args.pid)?;
    let fixed_ns = agent_netns(args.capture.agent_netns.as_deref())?;
    let ns = fixed_ns.or_else(|| target::netns_of(args.pid));
    let mut probe = Probe::load(&probe_options(&args.capture))?;
    let ring = probe.ring()?;
    let mut model = Model::new(ns.map_or(AgentRule::FirstNonLauncher, AgentRule::Fixed));
    model.agent_pid = Some(args.pid);
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
            model.seed(m);
        }
    }
    if seen.is_empty() {
        return Err(Usage(format!(
            "no process with pid {} (it exited before the attach)",
            args.pid
        ))
        .into());
    }
    let capture = new_capture(
        Mode::Attach { pid: args.pid },
        probe,
        model,
        prepared,
        &args.capture,
    );
    watch_target(&args.capture, capture, ring, true, None)
}

fn replay(args: ReplayArgs) -> anyhow::Result<u8> {
    let summary = summary_path(&args.out);
    check_outputs(&[
        ("--report", args.out.report.as_deref()),
        (summary_option(&args.out), summary.as_deref()),
    ])?;
    for (option, path) in [("--report", &args.out.report), ("--summary", &summary)] {
        if path
            .as_deref()
            .is_some_and(|p| file_key(p) == file_key(&args.log))
        {
            return Err(Usage(format!(
                "the log and {option} name the same file ({}); give the output its own",
                args.log.display()
            ))
            .into());
        }
    }
    let replayed = replay::load(&args.log)?;
    let chain_msg = replayed.chain.message(&args.log.display().to_string());
    let problem = match &replayed.chain {
        evidence::Verdict::Tampered { .. } => Some(true),
        evidence::Verdict::Unended { .. } => Some(false),
        _ => None,
    };
    if interactive(args.headless) {
        let options = tui::Options {
            log_problem: problem.map(|tampered| tui::LogProblem {
                tampered,
                message: chain_msg.clone(),
            }),
            ..tui_options(true)
        };
        runtime()?.block_on(tui::replay(args.log.clone(), options))?;
    }
    let code = conclude(&args.out, &replayed.report, 0)?;
    match problem {
        Some(true) => {
            eprintln!(
                "\nsandbox-watch: THIS LOG FAILED VERIFICATION. {chain_msg}\nThe report above was rebuilt from records that cannot be trusted."
            );
            Ok(1)
        }
        Some(false) => {
            eprintln!(
                "\nsandbox-watch: {chain_msg}\nThe report covers the records up to where the log stops."
            );
            // Not a clean record: say so in the status too, as `verify` does.
            Ok(if code == 0 { EXIT_UNENDED } else { code })
        }
        None => Ok(code),
    }
}

fn container(args: ContainerArgs) -> anyhow::Result<u8> {
    let prepared = prepare(&args.capture)?;
    let c = container::resolve(&args.target)?;
    let fixed_ns = agent_netns(args.capture.agent_netns.as_deref())?;
    let mut options = probe_options(&args.capture);
    options.cgroup = Some((c.cgroup_id, c.level));
    let mut probe = Probe::load(&options)?;
    let ring = probe.ring()?;
    // The processes already inside; the kernel adds the others by cgroup from now on.
    let inside: Vec<processes::Existing> =
        c.pids().into_iter().filter_map(target::existing).collect();
    let ns = fixed_ns.or_else(|| inside.iter().find_map(|e| e.netns));
    let mut model = Model::new(ns.map_or(AgentRule::FirstNonLauncher, AgentRule::Fixed));
    model.agent_pid = inside.first().map(|e| e.pid);
    for e in inside {
        probe.trace(e.pid)?;
        model.seed(e);
    }
    let mode = Mode::Container {
        id: c.id.clone(),
        cgroup: c.cgroup.clone(),
    };
    let capture = new_capture(mode, probe, model, prepared, &args.capture);
    watch_target(&args.capture, capture, ring, false, Some(c))
}

/// A capture with what `prepare` opened and the options every mode shares.
fn new_capture(
    mode: Mode,
    probe: Probe,
    model: Model,
    prepared: Prepared,
    args: &CaptureArgs,
) -> Capture {
    let mut capture = Capture::new(mode, probe, model, prepared.classifier, prepared.log);
    capture.policy = policy(&args.allow_net);
    capture.allow_net = args.allow_net.clone();
    capture.ocsf = prepared.ocsf;
    capture
}

/// The TUI is used unless --headless, or when stdin and stdout are not a terminal.
fn interactive(headless: bool) -> bool {
    use std::io::IsTerminal as _;
    !headless && std::io::stdout().is_terminal() && std::io::stdin().is_terminal()
}

fn use_tui(args: &CaptureArgs) -> bool {
    interactive(args.headless)
}

/// attach and container: watch until the target is gone, at --duration or on a signal, then
/// write the report and summary.
fn watch_target(
    args: &CaptureArgs,
    capture: Capture,
    ring: aya::maps::RingBuf<aya::maps::MapData>,
    when_empty: bool,
    container: Option<container::Container>,
) -> anyhow::Result<u8> {
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
    let report = drive(&runtime()?, capture, ring, ends, screen)?;
    conclude(&args.out, &report, 0)
}

/// What the TUI shows besides the records: the agent's terminal (run mode).
struct Screen {
    pane: Option<std::os::fd::OwnedFd>,
    agent: Option<nix::unistd::Pid>,
}

fn tui_options(replay: bool) -> tui::Options {
    tui::Options {
        no_color: std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()),
        replay,
        log_problem: None,
    }
}

/// Runs the capture to its end, with the TUI when there is a screen: the TUI gets every
/// record as it is logged and stays until `q` after the capture ends; quitting it first ends
/// the capture (and, unless the user chose to leave it running, stops the agent).
fn drive(
    rt: &tokio::runtime::Runtime,
    mut capture: Capture,
    ring: aya::maps::RingBuf<aya::maps::MapData>,
    mut ends: Ends,
    screen: Option<Screen>,
) -> anyhow::Result<report::Report> {
    let Some(screen) = screen else {
        capture.log_start();
        rt.block_on(capture.watch(ring, ends))?;
        return Ok(capture.finish());
    };
    let (feed, feed_rx) = tokio::sync::mpsc::channel(1 << 16);
    capture.feed = Some(feed.clone());
    capture.log_start();
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
            let watched = capture.watch(ring, ends).await;
            let report = capture.finish();
            let reason = capture.ended_by.clone();
            let _ = done.send(());
            let _ = feed.send(tui::Feed::Ended { reason }).await;
            watched.map(|_| report)
        };
        let showing = async {
            let quit = tui::run(feed_rx, tui_options(false), screen.pane).await;
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
        let (report, quit) = tokio::join!(capturing, showing);
        quit.map_err(|e| anyhow::anyhow!("the terminal: {e}"))?;
        report
    })
}

/// Where a capture's or a replay's results go.
#[derive(Args, Clone)]
struct Outputs {
    /// The JSON report, written at the end (of the capture, or of the replay).
    #[arg(long, value_name = "PATH")]
    report: Option<PathBuf>,
    /// The Markdown one-screen summary, appended to PATH (default: $GITHUB_STEP_SUMMARY when
    /// set). The report, by contrast, is written anew.
    #[arg(long, value_name = "PATH")]
    summary: Option<PathBuf>,
    /// Comma list of violation kinds that make the exit status 3:
    /// outside, credential, persistence, network, lost, leftover.
    #[arg(long, value_name = "KINDS", value_parser = parse_fail_on)]
    fail_on: Option<Kinds>,
}

/// Writes the report and summary; the exit status: 3 on a --fail-on kind, else `code`.
fn conclude(args: &Outputs, report: &report::Report, code: u8) -> anyhow::Result<u8> {
    if let Some(path) = &args.report {
        // Streamed: a report of a million entries is never one string in memory.
        let write = || -> std::io::Result<()> {
            let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
            serde_json::to_writer_pretty(&mut out, report)?;
            out.flush()
        };
        write().map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    }
    let summary = report.summary();
    if let Some(path) = summary_path(args) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        f.write_all(summary.as_bytes())?;
    }
    let _ = std::io::stderr().write_all(summary.as_bytes());
    let failed: Vec<&report::Violation> = match &args.fail_on {
        Some(kinds) => report
            .violations
            .iter()
            .filter(|v| kinds.0.contains(&v.kind))
            .collect(),
        None => Vec::new(),
    };
    if let Some(v) = failed.first() {
        eprintln!(
            "sandbox-watch: failing (--fail-on {}): {}",
            v.kind, v.summary
        );
        return Ok(EXIT_VIOLATION);
    }
    Ok(code)
}
