//! Tool calls, from the kernel alone: every direct child of the agent process is one step of
//! the agent (a tool call), and everything its processes do is attributed to it. What they do
//! after the step's own process ended (a `nohup`, `setsid` or `&` leftover that writes,
//! connects or runs a program later) is marked `after_step`.
//!
//! The session ([`crate::state::session`]) decides all of it from the records in their order,
//! so a replay of the log attributes every entry as the capture did. Nothing here is logged:
//! the attribution is the session's conclusion, not evidence.
use std::time::SystemTime;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Which tool call an entry is under, as the report names it: the step's id, or null for the
/// agent process itself (and for what no step started: the launchers before the agent, a
/// container's processes). `Unset` is what a record has before the session attributed it: it
/// is not written, so the log's records never carry it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum ToolCallRef {
    #[default]
    Unset,
    /// The agent itself (null).
    Agent,
    /// A step's id.
    Step(String),
}

impl ToolCallRef {
    pub fn is_unset(&self) -> bool {
        *self == ToolCallRef::Unset
    }

    /// The ref of the step at this index of the session's list (ids count from 1).
    pub fn of(step: Option<usize>) -> ToolCallRef {
        step.map_or(ToolCallRef::Agent, |k| ToolCallRef::Step(id(k)))
    }

    /// The step's id, if under one.
    pub fn id(&self) -> Option<&str> {
        match self {
            ToolCallRef::Step(id) => Some(id),
            ToolCallRef::Unset | ToolCallRef::Agent => None,
        }
    }
}

impl Serialize for ToolCallRef {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ToolCallRef::Step(id) => s.serialize_str(id),
            ToolCallRef::Unset | ToolCallRef::Agent => s.serialize_none(),
        }
    }
}

impl<'de> Deserialize<'de> for ToolCallRef {
    /// A present field: null is the agent, a string a step (a missing one is `Unset`, by
    /// `#[serde(default)]`).
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Option::<String>::deserialize(d)? {
            Some(id) => ToolCallRef::Step(id),
            None => ToolCallRef::Agent,
        })
    }
}

/// A step's id: its number, from 1, in the order the agent started them.
pub fn id(index: usize) -> String {
    (index + 1).to_string()
}

/// One tool call as the session follows it.
#[derive(Clone, Debug)]
pub struct ToolCall {
    /// The session's number of the step's own process (the agent's direct child).
    pub process: u64,
    /// Its process entries (one per program it ran), in order.
    pub entries: Vec<usize>,
    /// Whether the step's own process has ended: what its processes do from then on is after
    /// the step.
    pub ended: bool,
    /// How many records of its processes came after it ended (programs run, forks, file
    /// entries, network entries and connects counted into one).
    pub after_step: u64,
    /// The first of them, for the `outlived` finding.
    pub first_after: Option<AfterStep>,
}

/// The first thing a step's processes did after the step ended.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct AfterStep {
    pub at: String,
    pub pid: u32,
    /// "wrote /tmp/x", "connect 127.0.0.1:8000", "ran `curl …`".
    pub what: String,
}

/// The tool calls of a session.
#[derive(Default)]
pub struct ToolCalls {
    pub list: Vec<ToolCall>,
}

impl ToolCalls {
    /// A new step, whose own process has this session number and first entry.
    pub fn open(&mut self, process: u64, entry: usize) -> usize {
        self.list.push(ToolCall {
            process,
            entries: vec![entry],
            ended: false,
            after_step: 0,
            first_after: None,
        });
        self.list.len() - 1
    }

    /// Something a process of step `k` did now: whether it is after the step ended (then it
    /// is counted, and the first one kept).
    pub fn effect(
        &mut self,
        k: Option<usize>,
        at: SystemTime,
        pid: u32,
        what: impl FnOnce() -> String,
    ) -> bool {
        let Some(step) = k.and_then(|k| self.list.get_mut(k)) else {
            return false;
        };
        if !step.ended {
            return false;
        }
        step.after_step += 1;
        if step.first_after.is_none() {
            step.first_after = Some(AfterStep {
                at: crate::time::rfc3339_nanos(at),
                pid,
                what: what(),
            });
        }
        true
    }
}

/// A tool call in the report.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ToolCallEntry {
    pub id: String,
    pub pid: u32,
    /// The program the step ran, as run (redacted like every argv).
    pub argv: Vec<String>,
    #[serde(default)]
    pub exe: Option<String>,
    /// What the agent asked for: the shell command when the step is `sh -c …` (the wrapper an
    /// agent adds peeled off where it is recognisable), else the argv quoted as a shell would;
    /// null for a fork of the agent that ran no program.
    pub command: Option<String>,
    pub started_at: String,
    pub ended_at: Option<String>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    #[serde(default)]
    pub running_at_end: bool,
    /// The agent forked and the child never ran a program of its own.
    #[serde(default)]
    pub fork_only: bool,
    /// Whether the agent's transcript declares it: null without `--transcript`.
    #[serde(default)]
    pub declared: Option<bool>,
    /// The transcript's id of the declaration it matched (Claude Code's `tool_use` id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declared_by: Option<String>,
    /// How many of its effects came after its own process ended.
    #[serde(default)]
    pub after_step: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_after_step: Option<AfterStep>,
    /// Program runs under it (its own included), file entries that changed something, file
    /// entries that read, connects, and violations.
    #[serde(default)]
    pub processes: u64,
    #[serde(default)]
    pub files_changed: u64,
    #[serde(default)]
    pub files_read: u64,
    #[serde(default)]
    pub connections: u64,
    #[serde(default)]
    pub violations: u64,
}

impl ToolCallEntry {
    /// How the summary names it: "step 3 `cat ~/.ssh/id_rsa`".
    pub fn name(&self) -> String {
        let what = self.command.clone().unwrap_or_else(|| "(a fork)".into());
        let what: String = what.chars().take(80).collect();
        format!("step {} `{}`", self.id, crate::output::report::clean(&what))
    }
}

/// Shells whose `-c` string is the command.
const SHELLS: &[&str] = &["sh", "bash", "zsh", "dash", "ash", "ksh", "mksh", "fish"];

/// What a step's argv asked for: the shell's command string when it is `sh -c STRING` (bash's
/// and zsh's option clusters such as `-lc`, `-c -l`, `-o pipefail -c` included), with a
/// recognisable agent wrapper peeled off; else the argv quoted as a shell would.
pub fn command(argv: &[String]) -> Option<String> {
    let first = argv.first()?;
    let base = first.rsplit('/').next().unwrap_or(first);
    if SHELLS.contains(&base)
        && let Some(script) = shell_string(&argv[1..])
    {
        return Some(peel(script).unwrap_or_else(|| script.to_string()));
    }
    Some(shlex::try_join(argv.iter().map(String::as_str)).unwrap_or_else(|_| argv.join(" ")))
}

/// The command string of a shell's arguments, when they have `-c`.
fn shell_string(args: &[String]) -> Option<&str> {
    let mut c = false;
    let mut i = 0;
    while let Some(a) = args.get(i) {
        i += 1;
        if a == "--" || a == "-" {
            break;
        }
        if let Some(long) = a.strip_prefix("--") {
            // bash's long options that take a value.
            if matches!(long, "rcfile" | "init-file") {
                i += 1;
            }
            continue;
        }
        let Some(flags) = a.strip_prefix('-').or_else(|| a.strip_prefix('+')) else {
            i -= 1;
            break;
        };
        c |= a.starts_with('-') && flags.contains('c');
        // -o NAME / -O NAME: the next word is the option's name.
        if flags.contains('o') || flags.contains('O') {
            i += 1;
        }
    }
    if !c {
        return None;
    }
    args.get(i).map(String::as_str)
}

/// An agent's own wrapper around the command it was asked to run, peeled: Claude Code runs
/// `source ~/.claude/shell-snapshots/snapshot-….sh && eval 'CMD' \< /dev/null && pwd -P >|
/// /tmp/claude-…-cwd` (CMD quoted for `eval`).
fn peel(script: &str) -> Option<String> {
    let claude = script.contains("shell-snapshots/snapshot-")
        || (script.contains("/claude-") && script.contains("-cwd"));
    if !claude {
        return None;
    }
    let words = shlex::split(script)?;
    let eval = words.iter().position(|w| w == "eval")?;
    words.get(eval + 1).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn shell_strings_are_the_command() {
        for (words, want) in [
            (&["sh", "-c", "cat ~/.ssh/id_rsa"][..], "cat ~/.ssh/id_rsa"),
            (&["/bin/bash", "-lc", "git status"], "git status"),
            (&["bash", "-c", "-l", "ls -la"], "ls -la"),
            (&["bash", "-o", "pipefail", "-c", "a | b"], "a | b"),
            (&["zsh", "-c", "echo hi", "zsh", "arg"], "echo hi"),
            (&["bash", "--norc", "--noprofile", "-c", "x"], "x"),
        ] {
            assert_eq!(command(&argv(words)).as_deref(), Some(want), "{words:?}");
        }
    }

    #[test]
    fn without_c_the_argv_is_quoted() {
        assert_eq!(
            command(&argv(&["sh", "script.sh", "a b"])).as_deref(),
            Some("sh script.sh 'a b'")
        );
        // `-o c` is an option's name, not -c.
        assert_eq!(
            command(&argv(&["bash", "-o", "c", "x"])).as_deref(),
            Some("bash -o c x")
        );
        assert_eq!(
            command(&argv(&["git", "status"])).as_deref(),
            Some("git status")
        );
        assert_eq!(command(&[]), None);
        // A lone -c with nothing after it is no command string.
        assert_eq!(command(&argv(&["sh", "-c"])).as_deref(), Some("sh -c"));
    }

    #[test]
    fn claude_codes_wrapper_is_peeled() {
        let script = r#"source /root/.claude/shell-snapshots/snapshot-bash-1764590000000-ab12cd.sh && eval 'grep -r '"'"'TODO'"'"' src | head' \< /dev/null && pwd -P >| /tmp/claude-9f3e-cwd"#;
        assert_eq!(
            command(&argv(&["/bin/bash", "-c", "-l", script])).as_deref(),
            Some("grep -r 'TODO' src | head")
        );
        // A string that only looks half like it is left whole; a torn quote too.
        let plain = "eval 'x' && echo done";
        assert_eq!(command(&argv(&["sh", "-c", plain])).as_deref(), Some(plain));
        let torn = "source a/shell-snapshots/snapshot-1.sh && eval 'x";
        assert_eq!(command(&argv(&["sh", "-c", torn])).as_deref(), Some(torn));
    }

    #[test]
    fn a_ref_is_null_or_an_id_and_unset_is_not_written() {
        #[derive(Serialize, Deserialize)]
        struct E {
            #[serde(default, skip_serializing_if = "ToolCallRef::is_unset")]
            tool_call: ToolCallRef,
        }
        let s = |r: ToolCallRef| serde_json::to_string(&E { tool_call: r }).unwrap();
        assert_eq!(s(ToolCallRef::Unset), "{}");
        assert_eq!(s(ToolCallRef::Agent), r#"{"tool_call":null}"#);
        assert_eq!(s(ToolCallRef::Step("3".into())), r#"{"tool_call":"3"}"#);
        let r = |t: &str| serde_json::from_str::<E>(t).unwrap().tool_call;
        assert_eq!(r("{}"), ToolCallRef::Unset);
        assert_eq!(r(r#"{"tool_call":null}"#), ToolCallRef::Agent);
        assert_eq!(r(r#"{"tool_call":"3"}"#), ToolCallRef::Step("3".into()));
    }
}
