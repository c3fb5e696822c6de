//! Declared versus observed: the agent's own transcript (what it says it ran and edited)
//! reconciled with the tool calls the kernel saw (`--transcript PATH|auto`, `replay
//! --transcript PATH`).
//!
//! The transcript is written by the agent, so it is untrusted input: it is read line by line
//! with a bound on each line, every line that cannot be read is a sentence in the report
//! (never a panic), and nothing of its text reaches the summary but a matched command.
//!
//! Formats, told apart per line:
//! - plain JSONL, for any agent: `{"tool": "shell", "command": "…", "started_at": "…",
//!   "ended_at": "…", "id": "…"}`, and for a file edit the agent made itself `{"tool":
//!   "write", "file_path": "…"}` (`id`, the times optional);
//! - Claude Code (`~/.claude/projects/<dir>/<session>.jsonl`): `tool_use` blocks of assistant
//!   messages (`Bash` with `input.command`; `Write`, `Edit`, `MultiEdit` with
//!   `input.file_path`; `NotebookEdit` with `input.notebook_path`), their time the line's
//!   `timestamp`, ended by the `tool_result` with the same `tool_use_id`;
//! - Codex (`~/.codex/sessions/…/rollout-*.jsonl`): `function_call` items named `shell` whose
//!   `arguments` hold a `command` array (best effort: the shape as documented, not tested
//!   against a Codex session here).
use std::collections::HashMap;
use std::io::BufRead;
use std::path::Path;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::output::report::{Report, Violation, clean};
use crate::record::{Op, ViolationKind};
use crate::state::tool_calls::ToolCallRef;

/// A line longer than this is skipped (and said).
pub const MAX_LINE: usize = 8 << 20;
/// At most this many declarations are read; the rest is said.
pub const MAX_DECLARED: usize = 100_000;
/// A declared step matches a tool call that started within this much of its declared times.
const SLACK: Duration = Duration::from_secs(5);

/// One thing the agent says it did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Declared {
    /// The transcript's id for it (Claude Code's `tool_use` id), when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The tool's name as the transcript gives it (`Bash`, `shell`, `Write`, …).
    pub tool: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    /// The transcript's line (from 1).
    pub line: usize,
}

/// What was read from a transcript.
#[derive(Debug, Default)]
pub struct Transcript {
    pub declared: Vec<Declared>,
    /// The formats seen (`plain`, `claude-code`, `codex`).
    pub formats: Vec<&'static str>,
    /// What could not be read, one sentence each.
    pub problems: Vec<String>,
}

/// The report's `transcript`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TranscriptInfo {
    /// The file read (null when `auto` found none).
    pub path: Option<String>,
    #[serde(default)]
    pub formats: Vec<String>,
    /// How many shell steps and file edits it declares.
    #[serde(default)]
    pub declared: usize,
    /// Declared, never seen: a step or edit the kernel has no trace of.
    #[serde(default)]
    pub unobserved: Vec<Declared>,
    /// Tool call ids observed and not declared.
    #[serde(default)]
    pub undeclared: Vec<String>,
    /// Lines that could not be read, and other things a reader should know.
    #[serde(default)]
    pub problems: Vec<String>,
}

/// Reads a transcript; an unreadable file is an error (a sentence), a bad line a problem.
pub fn read(path: &Path) -> std::io::Result<Transcript> {
    let file = std::fs::File::open(path)?;
    Ok(parse(std::io::BufReader::new(file)))
}

/// Parses transcript lines from any reader.
pub fn parse(mut reader: impl BufRead) -> Transcript {
    let mut t = Transcript::default();
    // Claude Code: tool_use id → its declaration, to set the end from its tool_result.
    let mut open: HashMap<String, usize> = HashMap::new();
    let (mut bad, mut long, mut first_bad) = (0usize, 0usize, None);
    let mut line = 0usize;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        line += 1;
        match read_bounded(&mut reader, &mut buf) {
            Ok(Line::End) => break,
            Ok(Line::TooLong) => {
                long += 1;
                continue;
            }
            Ok(Line::Read) => {}
            Err(e) => {
                t.problems
                    .push(format!("reading stopped at line {line}: {e}"));
                break;
            }
        }
        if buf.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let Ok(v) = serde_json::from_slice::<Value>(&buf) else {
            bad += 1;
            first_bad.get_or_insert(line);
            continue;
        };
        let format = declarations(&v, line, &mut t.declared, &mut open);
        if let Some(f) = format
            && !t.formats.contains(&f)
        {
            t.formats.push(f);
        }
        if t.declared.len() > MAX_DECLARED {
            t.declared.truncate(MAX_DECLARED);
            t.problems.push(format!(
                "more than {MAX_DECLARED} declarations: read up to line {line}"
            ));
            break;
        }
    }
    if bad > 0 {
        t.problems.push(format!(
            "{bad} line(s) are not JSON (the first: line {})",
            first_bad.unwrap_or(0)
        ));
    }
    if long > 0 {
        t.problems.push(format!(
            "{long} line(s) longer than {} MiB were skipped",
            MAX_LINE >> 20
        ));
    }
    t
}

enum Line {
    Read,
    TooLong,
    End,
}

/// One line into `buf` (without its newline), never more than MAX_LINE bytes held.
fn read_bounded(r: &mut impl BufRead, buf: &mut Vec<u8>) -> std::io::Result<Line> {
    let mut too_long = false;
    let mut any = false;
    loop {
        let chunk = r.fill_buf()?;
        if chunk.is_empty() {
            return Ok(match (any, too_long) {
                (false, _) => Line::End,
                (true, true) => Line::TooLong,
                (true, false) => Line::Read,
            });
        }
        any = true;
        let (part, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (&chunk[..i], Some(i + 1)),
            None => (chunk, None),
        };
        if !too_long {
            if buf.len() + part.len() > MAX_LINE {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(part);
            }
        }
        let used = done.unwrap_or(chunk.len());
        r.consume(used);
        if done.is_some() {
            return Ok(if too_long { Line::TooLong } else { Line::Read });
        }
    }
}

fn text(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

/// The declarations of one transcript line, and its format.
fn declarations(
    v: &Value,
    line: usize,
    out: &mut Vec<Declared>,
    open: &mut HashMap<String, usize>,
) -> Option<&'static str> {
    // Plain: {"tool", "command" | "file_path", "started_at", "ended_at", "id"}.
    if let Some(tool) = text(v, "tool") {
        out.push(Declared {
            id: text(v, "id"),
            tool,
            command: text(v, "command"),
            file_path: text(v, "file_path"),
            started_at: text(v, "started_at"),
            ended_at: text(v, "ended_at"),
            line,
        });
        return Some("plain");
    }
    // Claude Code: message.content[] blocks.
    if let Some(content) = v
        .get("message")
        .and_then(|m| m.get("content"))
        .and_then(Value::as_array)
    {
        let at = text(v, "timestamp");
        let mut any = false;
        for block in content {
            match block.get("type").and_then(Value::as_str) {
                Some("tool_use") => {
                    any = true;
                    let name = text(block, "name").unwrap_or_default();
                    let input = block.get("input").unwrap_or(&Value::Null);
                    let (command, file_path) = match name.as_str() {
                        "Bash" => (text(input, "command"), None),
                        "Write" | "Edit" | "MultiEdit" => (None, text(input, "file_path")),
                        "NotebookEdit" => (None, text(input, "notebook_path")),
                        // Reads, searches, web fetches: in-process, nothing to match.
                        _ => continue,
                    };
                    let id = text(block, "id");
                    if let Some(id) = &id {
                        open.insert(id.clone(), out.len());
                    }
                    out.push(Declared {
                        id,
                        tool: name,
                        command,
                        file_path,
                        started_at: at.clone(),
                        ended_at: None,
                        line,
                    });
                }
                Some("tool_result") => {
                    any = true;
                    if let Some(i) = text(block, "tool_use_id").and_then(|id| open.remove(&id)) {
                        out[i].ended_at = at.clone();
                    }
                }
                _ => {}
            }
        }
        return any.then_some("claude-code");
    }
    // Codex: {"type": "response_item", "payload": {"type": "function_call", "name": "shell",
    // "arguments": "{\"command\": [\"bash\", \"-lc\", \"…\"]}", "call_id": …}}.
    let item = v.get("payload").unwrap_or(v);
    if item.get("type").and_then(Value::as_str) == Some("function_call")
        && matches!(
            item.get("name").and_then(Value::as_str),
            Some("shell" | "container.exec" | "local_shell")
        )
    {
        let args: Value = item
            .get("arguments")
            .and_then(Value::as_str)
            .and_then(|a| serde_json::from_str(a).ok())
            .unwrap_or(Value::Null);
        let argv: Option<Vec<String>> = args.get("command").and_then(|c| {
            c.as_array()?
                .iter()
                .map(|w| w.as_str().map(str::to_string))
                .collect()
        });
        out.push(Declared {
            id: text(item, "call_id"),
            tool: "shell".into(),
            command: argv.and_then(|a| crate::state::tool_calls::command(&a)),
            file_path: None,
            started_at: text(v, "timestamp"),
            ended_at: None,
            line,
        });
        return Some("codex");
    }
    None
}

/// Whether a path is an agent transcript (for `--transcript auto`).
pub fn looks_like_transcript(path: &str) -> bool {
    let claude = path.contains("/.claude/projects/") && path.ends_with(".jsonl");
    let codex = path.contains("/.codex/sessions/")
        && path
            .rsplit('/')
            .next()
            .is_some_and(|f| f.starts_with("rollout-"))
        && path.ends_with(".jsonl");
    claude || codex
}

/// `auto`: the newest transcript the traced tree wrote during the capture.
pub fn find(report: &Report) -> Option<String> {
    report
        .files
        .iter()
        .rev()
        .filter(|f| f.result.is_none() && matches!(f.op, Op::Write | Op::Create))
        .map(|f| f.path.as_str())
        .find(|p| looks_like_transcript(p))
        .map(str::to_string)
}

fn normalized(command: &str) -> &str {
    command.trim()
}

fn time(s: &Option<String>) -> Option<SystemTime> {
    s.as_deref().and_then(crate::record::parse_at)
}

/// Reconciles the report with a transcript read from `path`: `declared` on each tool call,
/// `declared`/`declared_by` on the agent's own file edits, `transcript` with what does not
/// match, and an `undeclared` violation for each finding under a step the agent did not declare.
pub fn reconcile(report: &mut Report, path: &str, t: Transcript) {
    let mut info = TranscriptInfo {
        path: Some(path.to_string()),
        formats: t.formats.iter().map(|f| f.to_string()).collect(),
        problems: t.problems,
        ..TranscriptInfo::default()
    };
    if info.formats.is_empty() {
        info.problems.push(
            "no line of it is a declaration in a known format (plain, Claude Code, Codex)".into(),
        );
    }
    let mut matched = vec![false; report.tool_calls.len()];
    let mut forged = 0usize;
    for mut d in t.declared {
        // Redacted as an observed command is (the tool call's command is its redacted argv's
        // script): so the two compare, and no secret of the transcript reaches the report.
        d.command = d.command.map(|c| redact_command(&c));
        if let Some(command) = &d.command {
            info.declared += 1;
            let want = normalized(command);
            let candidates: Vec<usize> = (0..report.tool_calls.len())
                .filter(|&i| {
                    !matched[i]
                        && report.tool_calls[i]
                            .command
                            .as_deref()
                            .is_some_and(|c| normalized(c) == want)
                })
                .collect();
            // By time when the transcript's times are usable: started within its window.
            let (from, to) = (
                time(&d.started_at),
                time(&d.ended_at).or(time(&d.started_at)),
            );
            let in_window = |i: &&usize| match (from, to) {
                (Some(from), Some(to)) => time(&Some(report.tool_calls[**i].started_at.clone()))
                    .is_some_and(|s| s + SLACK >= from && s <= to + SLACK),
                _ => true,
            };
            let pick = candidates.iter().find(in_window).or_else(|| {
                let first = candidates.first();
                forged += usize::from(first.is_some());
                first
            });
            match pick {
                Some(&i) => {
                    matched[i] = true;
                    report.tool_calls[i].declared = Some(true);
                    report.tool_calls[i].declared_by = d.id.clone();
                }
                None => info.unobserved.push(d),
            }
        } else if let Some(file) = &d.file_path {
            info.declared += 1;
            let found = report.files.iter_mut().find(|f| {
                f.tool_call == ToolCallRef::Agent
                    && f.result.is_none()
                    && f.op.changes()
                    && f.new_path.as_ref().unwrap_or(&f.path) == file
                    && f.declared.is_none()
            });
            match found {
                Some(f) => {
                    f.declared = Some(true);
                    f.declared_by = d.id.clone();
                }
                None => info.unobserved.push(d),
            }
        }
    }
    if forged > 0 {
        info.problems.push(format!(
            "{forged} declared step(s) matched a tool call by command only: their declared times do not fit when it ran"
        ));
    }
    for (i, t) in report.tool_calls.iter_mut().enumerate() {
        if !matched[i] {
            t.declared = Some(false);
            info.undeclared.push(t.id.clone());
        }
    }
    // A finding under a step the agent never declared is a finding of its own.
    let mut undeclared = Vec::new();
    for v in &report.violations {
        let Some(id) = v.tool_call.id() else { continue };
        if !matches!(
            v.kind,
            ViolationKind::Credential
                | ViolationKind::Persistence
                | ViolationKind::Escalation
                | ViolationKind::Outside
                | ViolationKind::Network
        ) || !info.undeclared.iter().any(|u| u == id)
        {
            continue;
        }
        undeclared.push(Violation::in_step(
            v.tool_call.clone(),
            ViolationKind::Undeclared,
            v.pid,
            format!(
                "step {id} is not in the agent's transcript, and under it: {}",
                clean(&v.summary)
            ),
        ));
    }
    report.violations.extend(undeclared);
    for t in &mut report.tool_calls {
        let id = t.id.clone();
        t.violations = report
            .violations
            .iter()
            .filter(|v| v.tool_call.id() == Some(&id))
            .count() as u64;
    }
    report.transcript = Some(info);
}

/// A shell command with its secrets redacted as the same command run by `sh -c` would be.
fn redact_command(command: &str) -> String {
    let argv = ["sh".to_string(), "-c".to_string(), command.to_string()];
    let (mut out, _) = crate::judge::redact::redact_argv(&argv);
    out.pop().unwrap_or_default()
}

/// Reads `--transcript` (a path, or `auto`) and reconciles; a file that cannot be read is a
/// sentence in the report's `transcript.problems`, not a failure of the capture.
pub fn apply(report: &mut Report, option: &str) {
    let path = if option == "auto" {
        match find(report) {
            Some(p) => p,
            None => {
                report.transcript = Some(TranscriptInfo {
                    problems: vec![
                        "--transcript auto: the traced processes wrote no transcript (~/.claude/projects/…/*.jsonl, ~/.codex/sessions/…/rollout-*.jsonl)".into(),
                    ],
                    ..TranscriptInfo::default()
                });
                return;
            }
        }
    } else {
        option.to_string()
    };
    match read(Path::new(&path)) {
        Ok(t) => reconcile(report, &path, t),
        Err(e) => {
            report.transcript = Some(TranscriptInfo {
                path: Some(path.clone()),
                problems: vec![format!("{path}: cannot read: {e}")],
                ..TranscriptInfo::default()
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Transcript {
        parse(std::io::Cursor::new(text.as_bytes().to_vec()))
    }

    #[test]
    fn plain_lines_declare_steps_and_edits() {
        let t = parsed(concat!(
            r#"{"tool":"shell","command":"ls -la","started_at":"2026-12-01T10:00:00Z","ended_at":"2026-12-01T10:00:01Z","id":"a"}"#,
            "\n",
            r#"{"tool":"write","file_path":"/w/main.py"}"#,
            "\n"
        ));
        assert_eq!(t.formats, ["plain"]);
        assert_eq!(t.declared.len(), 2);
        assert_eq!(t.declared[0].command.as_deref(), Some("ls -la"));
        assert_eq!(t.declared[0].id.as_deref(), Some("a"));
        assert_eq!(t.declared[1].file_path.as_deref(), Some("/w/main.py"));
        assert!(t.problems.is_empty(), "{:?}", t.problems);
    }

    #[test]
    fn claude_code_tool_uses_end_at_their_results() {
        let t = parsed(concat!(
            r#"{"type":"user","message":{"role":"user","content":"do it"},"timestamp":"2026-12-01T10:00:00Z"}"#,
            "\n",
            r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"ok"},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"git status","description":"d"}},{"type":"tool_use","id":"toolu_2","name":"Read","input":{"file_path":"/x"}}]},"timestamp":"2026-12-01T10:00:01Z"}"#,
            "\n",
            r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"clean"}]},"timestamp":"2026-12-01T10:00:03Z"}"#,
            "\n",
            r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"toolu_3","name":"Write","input":{"file_path":"/w/a.py","content":"x"}}]},"timestamp":"2026-12-01T10:00:04Z"}"#,
            "\n"
        ));
        assert_eq!(t.formats, ["claude-code"]);
        assert_eq!(t.declared.len(), 2, "Read declares nothing to match");
        assert_eq!(t.declared[0].command.as_deref(), Some("git status"));
        assert_eq!(
            t.declared[0].ended_at.as_deref(),
            Some("2026-12-01T10:00:03Z")
        );
        assert_eq!(t.declared[1].file_path.as_deref(), Some("/w/a.py"));
        assert_eq!(t.declared[1].id.as_deref(), Some("toolu_3"));
    }

    #[test]
    fn codex_shell_calls_are_peeled_like_observed_ones() {
        let t = parsed(
            r#"{"timestamp":"2026-12-01T10:00:00Z","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"command\":[\"bash\",\"-lc\",\"cargo test\"]}","call_id":"call_1"}}"#,
        );
        assert_eq!(t.formats, ["codex"]);
        assert_eq!(t.declared[0].command.as_deref(), Some("cargo test"));
    }

    #[test]
    fn a_declared_secret_is_redacted_and_still_matches_its_step() {
        let secret = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH";
        let command = format!("curl -H 'Authorization: Bearer {secret}' http://127.0.0.1:9/");
        let redacted = redact_command(&command);
        assert!(!redacted.contains(secret), "{redacted}");
        assert!(
            redacted.starts_with("curl -H 'Authorization: "),
            "{redacted}"
        );
        let line = serde_json::json!({"tool": "shell", "command": command}).to_string();
        let t = parsed(&line);
        let mut report = crate::output::report::tests::report(vec![]);
        report
            .tool_calls
            .push(crate::state::tool_calls::ToolCallEntry {
                id: "1".into(),
                command: Some(redacted.clone()),
                ..Default::default()
            });
        reconcile(&mut report, "t.jsonl", t);
        assert_eq!(report.tool_calls[0].declared, Some(true));
        let info = report.transcript.as_ref().unwrap();
        assert!(info.unobserved.is_empty() && info.undeclared.is_empty());
        // Not matched: the unobserved declaration is kept redacted.
        let t = parsed(&line);
        let mut report = crate::output::report::tests::report(vec![]);
        reconcile(&mut report, "t.jsonl", t);
        let json = serde_json::to_string(&report).unwrap();
        assert!(!json.contains(secret), "{json}");
    }

    #[test]
    fn untrusted_lines_are_sentences_not_panics() {
        let huge = "x".repeat(MAX_LINE + 10);
        let text = format!(
            "not json\n{{\"tool\": 5}}\n{huge}\n\u{0}\u{1}\n{{\"message\":{{\"content\":[{{\"type\":\"tool_use\",\"input\":7}},{{\"type\":\"tool_result\",\"tool_use_id\":[]}}]}}}}\n[1,2]\n\"s\"\n{{\"tool\":\"shell\",\"command\":\"ok\",\"started_at\":\"not a time\"}}"
        );
        let t = parsed(&text);
        // The last line (no newline at the end) is still read.
        assert_eq!(
            t.declared.last().and_then(|d| d.command.as_deref()),
            Some("ok")
        );
        assert!(
            t.problems
                .iter()
                .any(|p| p.contains("not JSON") && p.contains("line 1")),
            "{:?}",
            t.problems
        );
        assert!(
            t.problems.iter().any(|p| p.contains("longer than")),
            "{:?}",
            t.problems
        );
    }

    #[test]
    fn transcripts_are_found_by_their_paths() {
        assert!(looks_like_transcript(
            "/root/.claude/projects/-work-x/3f2a.jsonl"
        ));
        assert!(looks_like_transcript(
            "/home/u/.codex/sessions/2026/12/01/rollout-2026-12-01T10-00-00-abc.jsonl"
        ));
        assert!(!looks_like_transcript("/root/.claude/settings.json"));
        assert!(!looks_like_transcript("/home/u/.codex/sessions/x.jsonl"));
    }
}
