//! The command line: what clap parses, and the checks of each value (a bad one is a usage
//! error that says what to give instead).
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::judge::netpolicy;
use crate::kernel::probe::FileHook;
use crate::record::ViolationKind;

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
for one that never ended; verify --pubkey: 6 when the signatures do not vouch for the log."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Subcommand)]
pub enum Command {
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
    ///
    /// A rewritten log can be rechained so that the chain alone looks intact: give the anchor
    /// the capture printed on its stderr (`log L: N records, head H`), which the agent could
    /// not edit, and a log changed after it fails (exit 1).
    Verify {
        /// The evidence log (JSONL) written by --log. With --otlp-json: also check that the
        /// collector's copy of this log's session is this log, whole.
        #[arg(required_unless_present = "otlp_json")]
        log: Option<PathBuf>,
        /// Check every session in what a collector received instead: FILE is the OTLP/JSON
        /// file exporter's output (one ExportLogsServiceRequest a line). Names the missing,
        /// changed or foreign records of each session; 0 all intact, 1 any not, 5 some
        /// session has no end record.
        #[arg(long, value_name = "FILE")]
        otlp_json: Option<PathBuf>,
        /// The full hash of the last record, as the capture printed it at its end (or at a
        /// checkpoint, with the records then): the log must end with exactly that record.
        #[arg(long, value_name = "HASH", conflicts_with = "otlp_json")]
        head: Option<String>,
        /// How many records the log must have (the count printed with the head).
        #[arg(long, value_name = "N", conflicts_with = "otlp_json")]
        records: Option<u64>,
        /// Check the signatures of a log written with --sign-key against this public key
        /// (PEM, from `openssl pkey -in KEY -pubout`, or the 64 hex digits the capture
        /// printed). Exit 0: the signed end record vouches for the whole log; 5: unended,
        /// and it says how far the signatures vouch; 6: a signature does not check, there is
        /// none, or the end record is unsigned (the log was rechained or forged after the end).
        #[arg(long, value_name = "PATH", conflicts_with = "otlp_json")]
        pubkey: Option<PathBuf>,
    },
    /// Send finished logs to an OpenTelemetry collector over OTLP/HTTP (the same records as
    /// --otlp). Resumable: each log's cursor (LOG.otlp-cursor) says what the collector already
    /// has, so running it again sends only the rest. Exit 0: all delivered; 1: not all (say
    /// why; run it again); 2: a bad URL or an unreadable log.
    Ship(ShipArgs),
    /// The TUI again on a recorded log (headless: the report and summary rebuilt from it),
    /// after checking its hash chain.
    Replay(ReplayArgs),
    /// Run the bundled demo agent session under the probe and print its summary.
    Demo(DemoArgs),
}

#[derive(Args, Clone)]
pub struct CaptureArgs {
    /// No TUI: write the log, report and summary only (also when stdin or stdout is not a
    /// terminal).
    #[arg(long)]
    pub headless: bool,
    /// The evidence log (JSONL, hash-chained), written as events arrive.
    #[arg(long, value_name = "PATH")]
    pub log: Option<PathBuf>,
    /// Overwrite an existing --log file.
    #[arg(long)]
    pub force: bool,
    /// Sign the log's start record, a checkpoint record every --checkpoint seconds and its
    /// end record with this Ed25519 private key (PKCS#8 PEM: `openssl genpkey -algorithm
    /// ed25519 -out KEY`), so that `verify --pubkey KEY.pub` catches a log rechained or
    /// forged after the end. The key must be one the agent cannot read: mode 600 (or 400),
    /// not owned by the user the agent runs as, outside the directory it works in.
    #[arg(long, value_name = "PATH")]
    pub sign_key: Option<PathBuf>,
    /// Seconds between checkpoints: the anchor printed to stderr (headless) and, with
    /// --sign-key, a signed checkpoint record in the log.
    #[arg(long, value_name = "SECS", default_value_t = 10.0, value_parser = parse_secs)]
    pub checkpoint: f64,
    #[command(flatten)]
    pub out: Outputs,
    /// The same events as OCSF 1.3 JSONL (Process Activity 1007, File System Activity 1001,
    /// Network Activity 4001, DNS Activity 4003).
    #[arg(long, value_name = "PATH")]
    pub ocsf: Option<PathBuf>,
    /// Stop after this many seconds (what is still running then is reported and left running).
    #[arg(long, value_name = "SECS", allow_negative_numbers = true, value_parser = parse_duration)]
    pub duration: Option<f64>,
    /// Also count reads of files matching this glob as credential reads (repeatable).
    #[arg(long = "credential", value_name = "GLOB")]
    pub credentials: Vec<String>,
    /// A file of more credential globs, one a line (`#` starts a comment).
    #[arg(long = "credentials-file", value_name = "PATH")]
    pub credentials_file: Option<PathBuf>,
    /// Compare verdicts with this net namespace instead (a pid or /proc/PID/ns/net).
    #[arg(long, value_name = "PID|/proc/PID/ns/net")]
    pub agent_netns: Option<String>,
    /// Allowed destinations (repeatable): CIDR[:PORT] or HOST[:PORT] (no port: any port;
    /// *.domain for its subdomains). A connect no rule allows is a `network` violation, and so
    /// is a DNS question unless a host rule names it or a rule allows its resolver (the
    /// resolver's address, any port or 53). Without the option there are none. DNS answers
    /// are not seen: a host rule allows a connect (to the rule's port) by a process that asked
    /// for that name, whatever the address; use CIDR rules where that is too loose.
    #[arg(long = "allow-net", value_name = "CIDR[:PORT]|HOST[:PORT]", value_parser = parse_allow_net)]
    pub allow_net: Vec<String>,
    /// Ring buffer size in bytes (a power of two, at least 4096; default 4 MiB): every record
    /// but output.
    #[arg(long, value_name = "BYTES", value_parser = parse_ring_size)]
    pub ring_buffer: Option<u32>,
    /// Output ring buffer size in bytes (a power of two, at least 4096; default 8 MiB): the
    /// bytes traced programs write to their stdout and stderr, on their way to be hashed. A
    /// program that writes faster than the monitor hashes (about 1.7 GB/s on one core with
    /// SHA-NI) fills it; what does not fit is lost output (the stream's sha256 is then null
    /// and says why), never another record.
    #[arg(long, value_name = "BYTES", value_parser = parse_ring_size)]
    pub output_ring: Option<u32>,
    /// Stream every log record, as it is written, to an OpenTelemetry collector over
    /// OTLP/HTTP (protobuf; OTEL_EXPORTER_OTLP_PROTOCOL=http/json for JSON). URL is the
    /// collector's base URL (/v1/logs is appended); without one (--otlp= or --otlp before
    /// another option) OTEL_EXPORTER_OTLP_LOGS_ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT or
    /// http://localhost:4318. OTEL_EXPORTER_OTLP_HEADERS (never printed, and not passed on to
    /// the agent `run` starts), OTEL_RESOURCE_ATTRIBUTES and OTEL_EXPORTER_OTLP_CERTIFICATE are
    /// honoured. Delivery is
    /// at least once: a collector that is down gets the records later; the report's
    /// export.otlp says what was not delivered (--fail-on export).
    #[arg(long, value_name = "URL", num_args = 0..=1, default_missing_value = "")]
    pub otlp: Option<String>,
    /// Seconds to wait at the end for the collector to take the records still pending.
    #[arg(long, value_name = "SECS", default_value_t = 5.0, value_parser = parse_secs)]
    pub otlp_timeout: f64,
    /// With --otlp and no --log: the directory where the log is kept until it is delivered
    /// (removed then; kept, for `ship`, when not). Default /var/lib/sandbox-watch/spool.
    #[arg(long, value_name = "DIR")]
    pub spool: Option<PathBuf>,
    /// Keep the text of what each program printed: the first and last 2 KiB of its stdout
    /// and stderr, redacted as argv is, in the log and the report (`output.stdout.head`,
    /// `.tail`), and each failed command's last stderr line in the summary. Without it only
    /// the byte count and sha256 of each stream are kept. A program that read a credential
    /// file never has its text kept.
    #[arg(long)]
    pub capture_output: bool,
    /// Use this file-open hook instead of trying fentry first.
    #[arg(long, value_name = "fentry|tracepoint", value_parser = parse_file_hook)]
    pub file_hook: Option<FileHook>,
}

#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub capture: CaptureArgs,
    /// Seconds to keep watching after the agent exits, for its last children's events.
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = 1.0,
        allow_negative_numbers = true,
        value_parser = parse_secs
    )]
    pub linger: f64,
    /// Run the agent as this user (name or uid). Default: the user who ran sudo, else yourself.
    #[arg(long, value_name = "USER")]
    pub user: Option<String>,
    /// Start the agent without the capabilities it would need to attack its monitor:
    /// CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE, CAP_SYS_ADMIN and CAP_SYS_MODULE are taken out of
    /// its bounding set (and ambient set) before its exec, so no process of its tree, root or
    /// setuid, can hold them; the report's target.dropped_capabilities says so.
    #[arg(long)]
    pub protect: bool,
    /// The agent's command line. Any bytes: an argument that is not UTF-8 is passed on as it
    /// is (and recorded escaped, `\xNN`).
    #[arg(required = true, trailing_var_arg = true, value_name = "COMMAND")]
    pub command: Vec<std::ffi::OsString>,
}

#[derive(Args)]
pub struct AttachArgs {
    #[command(flatten)]
    pub capture: CaptureArgs,
    /// The process to watch, with its descendants.
    #[arg(value_parser = parse_pid, allow_hyphen_values = true)]
    pub pid: u32,
}

#[derive(Args)]
pub struct ContainerArgs {
    #[command(flatten)]
    pub capture: CaptureArgs,
    /// A container id (full or an unambiguous start), a name known to docker, podman, nerdctl
    /// or crictl, or a cgroup v2 path (absolute, or relative to the cgroup2 mount).
    #[arg(value_name = "ID|NAME|CGROUP")]
    pub target: String,
}

#[derive(Args)]
pub struct ReplayArgs {
    /// No TUI: write the report and summary only.
    #[arg(long)]
    pub headless: bool,
    #[command(flatten)]
    pub out: Outputs,
    /// The evidence log (JSONL) written by --log.
    pub log: PathBuf,
}

#[derive(Args)]
pub struct ShipArgs {
    /// The collector's base URL (/v1/logs is appended); --otlp= takes it from
    /// OTEL_EXPORTER_OTLP_LOGS_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT.
    #[arg(long, value_name = "URL")]
    pub otlp: String,
    /// Give up on a log after this many seconds without progress.
    #[arg(long, value_name = "SECS", default_value_t = 30.0, value_parser = parse_secs)]
    pub otlp_timeout: f64,
    /// The evidence logs to send.
    #[arg(required = true, value_name = "LOG")]
    pub logs: Vec<PathBuf>,
}

#[derive(Args)]
pub struct DemoArgs {
    /// Keep the demo's files in this directory (default: a temporary one).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

pub fn parse_pid(s: &str) -> Result<u32, String> {
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
pub struct Kinds(pub Vec<ViolationKind>);

pub fn parse_fail_on(s: &str) -> Result<Kinds, String> {
    let all = || {
        ViolationKind::ALL
            .iter()
            .map(|k| k.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut kinds = Vec::new();
    for k in s.split(',').map(str::trim) {
        if k.is_empty() {
            return Err(format!(
                "an empty kind in '{s}'; give a comma list of {}",
                all()
            ));
        }
        match ViolationKind::parse(k) {
            Some(kind) => kinds.push(kind),
            None => return Err(format!("unknown kind '{k}'; choose from {}", all())),
        }
    }
    Ok(Kinds(kinds))
}

pub fn parse_allow_net(s: &str) -> Result<String, String> {
    netpolicy::parse_rule(s)
        .map(|_| s.to_string())
        .map_err(|e| e.reason)
}

pub fn parse_ring_size(s: &str) -> Result<u32, String> {
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

pub fn parse_duration(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x > 0.0 && x.is_finite() => Ok(x),
        _ => Err(format!(
            "'{s}' is not a positive number of seconds; give one like 30 or 0.5"
        )),
    }
}

pub fn parse_secs(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x >= 0.0 && x.is_finite() => Ok(x),
        _ => Err(format!(
            "'{s}' is not a number of seconds; give one like 1, 0.5 or 30"
        )),
    }
}

pub fn parse_file_hook(s: &str) -> Result<FileHook, String> {
    match s {
        "fentry" => Ok(FileHook::Fentry),
        "tracepoint" => Ok(FileHook::Tracepoint),
        _ => Err(format!("'{s}' is not a hook; choose fentry or tracepoint")),
    }
}

/// Where a capture's or a replay's results go.
#[derive(Args, Clone)]
pub struct Outputs {
    /// The JSON report, written at the end (of the capture, or of the replay).
    #[arg(long, value_name = "PATH")]
    pub report: Option<PathBuf>,
    /// The Markdown one-screen summary, appended to PATH (default: $GITHUB_STEP_SUMMARY when
    /// set). The report, by contrast, is written anew.
    #[arg(long, value_name = "PATH")]
    pub summary: Option<PathBuf>,
    /// Comma list of violation kinds that make the exit status 3:
    /// outside, credential, persistence, network, lost, leftover, tamper (an act on the
    /// monitor, or a caller that raced the kernel), export (--otlp records not delivered),
    /// outlived (a step's process acted after its step ended), undeclared (a
    /// finding under a step the transcript does not declare).
    #[arg(long, value_name = "KINDS", value_parser = parse_fail_on)]
    pub fail_on: Option<Kinds>,
    /// Reconcile the tool calls with the agent's own transcript, read when the capture ends:
    /// a plain JSONL of {tool, command, started_at, ended_at} (any agent), Claude Code's
    /// session .jsonl or Codex's rollout .jsonl; `auto`: the newest such file the traced
    /// processes wrote.
    #[arg(long, value_name = "PATH|auto")]
    pub transcript: Option<String>,
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    use clap::Parser;

    use super::{Cli, Command};

    #[test]
    fn a_command_that_is_not_utf8_is_parsed_and_kept_byte_for_byte() {
        let args = [
            OsStr::new("sandbox-watch"),
            OsStr::new("run"),
            OsStr::new("--headless"),
            OsStr::new("--"),
            OsStr::new("/bin/echo"),
            OsStr::from_bytes(b"\xff"),
            OsStr::from_bytes(b"caf\xc3\xa9 \xfe-x"),
        ];
        let cli = Cli::try_parse_from(args).expect("non-UTF-8 argv is accepted");
        let Some(Command::Run(run)) = cli.command else {
            panic!("not run")
        };
        let bytes: Vec<&[u8]> = run.command.iter().map(|a| a.as_bytes()).collect();
        assert_eq!(
            bytes,
            [&b"/bin/echo"[..], b"\xff", b"caf\xc3\xa9 \xfe-x"],
            "the bytes as given"
        );
    }
}
