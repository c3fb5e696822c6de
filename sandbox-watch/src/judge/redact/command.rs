//! The rules that read a command's words in order: options and their values, the password
//! options of particular programs, assignments, shell scripts (rules 1–4 and 9 of the
//! module's documentation).
use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

use super::names::{
    is_authorization, is_placeholder, is_secret_header, is_secret_name, is_secret_option,
    looks_like_password,
};
use super::tools::{NO_PASSWORD, RULES, SHELLS, ToolRule, program_name};
use super::{Found, MAX_SCRIPT_DEPTH, Word, redactable, shell, text};

/// Redacts a whole argv (depth 0).
pub fn argv(argv: &[String], found: &mut Found) {
    let words: Vec<Word> = argv
        .iter()
        .enumerate()
        .map(|(i, a)| Word::arg(i, a))
        .collect();
    command(&words, 0, found);
}

/// The program a part of a command belongs to, as far as redaction cares.
#[derive(Clone, Copy, Debug)]
enum Tool {
    /// Not known: the rules for unknown programs apply (`-u user:pass`, `-P Passw0rd!`).
    Other,
    /// A program of [`RULES`]; `active` once its subcommand, if it needs one, was seen.
    Rule {
        rule: &'static ToolRule,
        active: bool,
    },
    /// A program of [`NO_PASSWORD`]: no rule for unknown programs applies.
    Known,
    /// sudo, env, timeout, …: the next word that is not an option or assignment is the
    /// program (`sudo -u root mytool`).
    Launcher,
    /// sh, bash, …, su: the argument after `-c` is a script.
    Shell,
    /// Every later argument is a script.
    Eval,
}

/// What the next word is, given the one before.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Next {
    Plain,
    /// The value of a secret option.
    Secret,
    /// `user:password` (or another separator); `any` when the program is not known (then a
    /// numeric `uid:gid` is no password).
    UserPass {
        sep: char,
        any: bool,
    },
    /// The value of `-H` / `--header`.
    Header,
    /// The value of `-p`, `-P` or `-pw` of a program not known: a secret if it reads as one.
    MaybePassword,
}

/// What one word told about those after it, besides [`Next`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Seen {
    Nothing,
    /// A shell's `-c`: the next word that is not an option is a script.
    ScriptFlag,
    /// htpasswd's `-b`: the last positional word is the password.
    Batch,
}

/// Programs that run another program named by their first plain word.
const LAUNCHERS: &[&str] = &[
    "sudo", "doas", "env", "nice", "ionice", "timeout", "nohup", "setsid", "time", "exec",
    "stdbuf", "chroot", "unshare", "nsenter", "bwrap", "firejail", "xargs", "watch", "strace",
    "ltrace", "setpriv", "command", "builtin",
];

/// Options whose value names a host or container, after which a tool's name is that value,
/// not the tool (`psql -h mysql -p5432`, `docker run --name mysql`).
const NAMING_OPTIONS: &[&str] = &[
    "-h",
    "--host",
    "-H",
    "--hostname",
    "--name",
    "--network",
    "--net",
    "--link",
    "--container-name",
    "--service",
    "-S",
    "--socket",
];

/// Words after which a secret-named word is followed by its value: `aws configure set
/// aws_secret_access_key V`, `git config github.token V`, `npm config set _authToken V`.
const SETTER_WORDS: &[&str] = &["set", "config"];

fn tool_of(word: &str, prev: Option<&str>) -> Option<Tool> {
    if prev.is_some_and(|p| NAMING_OPTIONS.contains(&p)) {
        return None;
    }
    let base = word.rsplit('/').next().unwrap_or(word);
    let name = program_name(word);
    let is = |list: &[&str]| list.contains(&base) || list.contains(&name);
    if is(SHELLS) {
        return Some(Tool::Shell);
    }
    if base == "eval" {
        return Some(Tool::Eval);
    }
    if let Some(rule) = RULES.iter().find(|r| is(r.names)) {
        return Some(Tool::Rule {
            rule,
            active: rule.after.is_none(),
        });
    }
    if is(LAUNCHERS) {
        return Some(Tool::Launcher);
    }
    is(NO_PASSWORD).then_some(Tool::Known)
}

/// A word naming the program already in effect is its argument (`htpasswd -c /etc/htpasswd`).
fn same_tool(a: Tool, b: Tool) -> bool {
    match (a, b) {
        (Tool::Rule { rule: x, .. }, Tool::Rule { rule: y, .. }) => std::ptr::eq(x, y),
        _ => false,
    }
}

/// `-x`, `-xyz`, `--xyz`: not `-`, `--`, `-1`.
fn looks_like_option(arg: &str) -> bool {
    let b = arg.as_bytes();
    b.len() >= 2 && b[0] == b'-' && (b[1].is_ascii_alphabetic() || (b[1] == b'-' && b.len() > 2))
}

/// A value a name or an option makes a secret, unless it holds none.
fn named_value(value: &str, depth: usize) -> bool {
    redactable(value, depth) && !is_placeholder(value)
}

/// Redacts one command's words: an argv, or a simple command of a script at `depth`.
fn command(words: &[Word], depth: usize, found: &mut Found) {
    let mut tool = Tool::Other;
    let mut next = Next::Plain;
    let mut script_next = false;
    // The last positional word, for SETTER_WORDS.
    let mut last_word: Option<&str> = None;
    // htpasswd -b: the positional words of the tool.
    let mut batch = false;
    let mut positionals: Vec<usize> = Vec::new();
    for (i, w) in words.iter().enumerate() {
        let arg: &str = &w.text;
        let prev = i.checked_sub(1).map(|j| &*words[j].text);
        let this = std::mem::replace(&mut next, Next::Plain);
        let is_option = looks_like_option(arg);
        let mut in_script = false;
        match this {
            Next::Secret if !is_option => {
                if named_value(arg, depth) {
                    found.add(w, 0..arg.len());
                }
            }
            Next::UserPass { sep, any } => user_pass(w, 0, sep, any, depth, found),
            Next::Header => header(w, 0, depth, found),
            Next::MaybePassword if !is_option && looks_like_password(arg) => {
                if named_value(arg, depth) {
                    found.add(w, 0..arg.len());
                }
            }
            _ if (script_next || matches!(tool, Tool::Eval)) && !is_option => {
                script_next = false;
                in_script = true;
                script(w, depth, found);
            }
            _ => {
                if let Some(t) = tool_of(arg, prev)
                    && !same_tool(t, tool)
                {
                    tool = t;
                    script_next = false;
                    batch = false;
                    positionals.clear();
                    last_word = None;
                } else {
                    if let Tool::Rule { rule, active } = &mut tool
                        && !*active
                        && rule.after == Some(arg)
                    {
                        *active = true;
                    }
                    if matches!(tool, Tool::Launcher) && !is_option && !arg.contains('=') {
                        // The launched program, not one the tables know.
                        tool = Tool::Other;
                    }
                    let before = found.secrets.len();
                    let (nx, seen) = one(w, tool, depth, found);
                    next = nx;
                    script_next |= seen == Seen::ScriptFlag;
                    batch |= seen == Seen::Batch;
                    if !is_option {
                        if next == Next::Plain
                            && found.secrets.len() == before
                            && last_word.is_some_and(|w| SETTER_WORDS.contains(&w))
                            && !arg.contains('=')
                            && is_secret_name(arg)
                        {
                            next = Next::Secret;
                        }
                        last_word = Some(arg);
                        positionals.push(i);
                    }
                }
            }
        }
        // A script's own text too: a secret the shell's words split (`echo Bearer abc`).
        text::scan(
            w,
            if in_script { depth + 1 } else { depth },
            in_script,
            found,
        );
    }
    if batch
        && positionals.len() >= 2
        && let Some(&last) = positionals.last()
        && redactable(&words[last].text, depth)
    {
        found.add(&words[last], 0..words[last].text.len());
    }
}

/// A script given to a shell: each of its commands redacted as an argv, one level deeper.
fn script(w: &Word, depth: usize, found: &mut Found) {
    if depth + 1 >= MAX_SCRIPT_DEPTH {
        return;
    }
    let s = shell::split(w);
    for cmd in &s.commands {
        command(cmd, depth + 1, found);
    }
    for t in &s.texts {
        text::scan(t, depth + 1, false, found);
    }
}

/// `user<sep>password` from `at` in the word: the password is the secret. A program not
/// known (`any`) has it only when it is not a number (`docker -u 1000:1000` is a uid:gid).
fn user_pass(w: &Word, at: usize, sep: char, any: bool, depth: usize, found: &mut Found) {
    let value = &w.text[at..];
    if let Some(i) = value.find(sep) {
        let pass = &value[i + sep.len_utf8()..];
        let numeric = pass.bytes().all(|b| b.is_ascii_digit());
        if redactable(pass, depth) && !(any && (numeric || value[..i].is_empty())) {
            found.add(w, at + i + sep.len_utf8()..w.text.len());
        }
    }
}

static HEADER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?s)^\s*([A-Za-z0-9_-]+)\s*:\s*(.*?)\s*$").unwrap());

/// A header given to `-H`, from `at` in the word: `X-Api-Key: k` → `X-Api-Key: [REDACTED]`.
/// (`Authorization` is for [`text::scan`], which keeps its scheme.)
fn header(w: &Word, at: usize, depth: usize, found: &mut Found) {
    if let Some(c) = HEADER.captures(&w.text[at..])
        && !is_authorization(&c[1])
        && is_secret_header(&c[1])
    {
        let v = c.get(2).expect("group 2");
        if named_value(v.as_str(), depth) {
            found.add(w, at + v.start()..at + v.end());
        }
    }
}

static OPT_EQ: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?s)^(--?)([A-Za-z][A-Za-z0-9_.-]*)=(.*)$").unwrap());
static ASSIGN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?s)^([A-Za-z_][A-Za-z0-9_.]*)=(.*)$").unwrap());
static FORM: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^[A-Za-z_][A-Za-z0-9_.\-\[\]]*=[^&\s]*(?:&[A-Za-z_][A-Za-z0-9_.\-\[\]]*=[^&\s]*)+$",
    )
    .unwrap()
});
static SHELL_C: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^-[A-Za-z]*c[A-Za-z]*$").unwrap());

/// Redacts one word by the rules that look at it alone (and the tool it belongs to).
/// Returns what the next word is, and what else it told.
fn one(w: &Word, tool: Tool, depth: usize, found: &mut Found) -> (Next, Seen) {
    let plain = (Next::Plain, Seen::Nothing);
    let arg: &str = &w.text;
    let is_long = arg.starts_with("--");
    let unknown = matches!(tool, Tool::Other);
    if let Tool::Rule { rule, active: true } = tool
        && let Some(r) = by_rule(w, rule, depth, found)
    {
        return r;
    }
    // -Dgpg.passphrase=…: a Java/Maven property, before `-name=value` below takes it.
    if arg.starts_with("-D") && ASSIGN.is_match(&arg[2..]) {
        assignment(w, 2, depth, found);
        return plain;
    }
    if let Some(c) = OPT_EQ.captures(arg) {
        let (dashes, name, value) = (&c[1], &c[2], c.get(3).expect("group 3"));
        let long_enough = dashes == "--" || name.len() >= 3;
        if long_enough && is_secret_option(name) {
            if named_value(value.as_str(), depth) {
                found.add(w, value.range());
            }
            return plain;
        }
        if dashes == "--" && name.eq_ignore_ascii_case("header") {
            header(w, value.start(), depth, found);
            return plain;
        }
        if unknown && dashes == "--" && name == "user" {
            user_pass(w, value.start(), ':', true, depth, found);
            return plain;
        }
        // --env=API_TOKEN=…, --build-arg=…, --from-literal=password=…
        assignment(w, value.start(), depth, found);
        return plain;
    }
    if !looks_like_option(arg) {
        assignment(w, 0, depth, found);
        return plain;
    }
    // An option without `=`.
    if matches!(tool, Tool::Shell) && SHELL_C.is_match(arg) {
        return (Next::Plain, Seen::ScriptFlag);
    }
    if matches!(arg, "-H" | "--header") {
        return (Next::Header, Seen::Nothing);
    }
    let name = arg.trim_start_matches('-');
    if (is_long || name.len() >= 3) && is_secret_option(name) {
        return (Next::Secret, Seen::Nothing);
    }
    if unknown {
        match arg {
            "-u" | "--user" => {
                return (
                    Next::UserPass {
                        sep: ':',
                        any: true,
                    },
                    Seen::Nothing,
                );
            }
            "-p" | "-P" | "-pw" => return (Next::MaybePassword, Seen::Nothing),
            _ if arg.starts_with("-u") && arg.contains(':') => {
                user_pass(w, 2, ':', true, depth, found);
            }
            _ => {}
        }
    }
    plain
}

/// The rules of one program for one of its options, if one applies.
fn by_rule(w: &Word, rule: &ToolRule, depth: usize, found: &mut Found) -> Option<(Next, Seen)> {
    let plain = Some((Next::Plain, Seen::Nothing));
    let arg: &str = &w.text;
    if !looks_like_option(arg) {
        return None;
    }
    let whole_from = |at: usize, found: &mut Found| {
        if redactable(&arg[at..], depth) {
            found.add(w, at..arg.len());
        }
    };
    let is_long = arg.starts_with("--");
    if is_long && let Some((opt, _)) = arg.split_once('=') {
        let at = opt.len() + 1;
        if rule.next.contains(&opt) {
            whole_from(at, found);
            return plain;
        }
        if rule.user_pass.contains(&opt) {
            user_pass(w, at, rule.sep, false, depth, found);
            return plain;
        }
        return None;
    }
    if rule.next.contains(&arg) {
        return Some((Next::Secret, Seen::Nothing));
    }
    if rule.user_pass.contains(&arg) {
        let next = Next::UserPass {
            sep: rule.sep,
            any: false,
        };
        return Some((next, Seen::Nothing));
    }
    if is_long {
        // mysql's --password takes its value only after `=`: the next word is the database.
        if rule.password_needs_eq && arg == "--password" {
            return plain;
        }
        return None;
    }
    for g in rule.glued {
        if arg.len() > g.len() && arg.starts_with(g) {
            whole_from(g.len(), found);
            return plain;
        }
    }
    for u in rule.user_pass.iter().filter(|u| u.len() == 2) {
        if arg.len() > 2 && arg.starts_with(u) {
            user_pass(w, 2, rule.sep, false, depth, found);
            return plain;
        }
        // In a cluster of flags (`-su admin:pw`, `-sSuadmin:pw`): after the letter, the value
        // is glued or is the next word.
        let letter = u.as_bytes()[1];
        let flags = &arg.as_bytes()[1..];
        if let Some(at) = flags.iter().position(|&b| b == letter)
            && at > 0
            && flags[..at].iter().all(u8::is_ascii_alphabetic)
        {
            if at + 2 == arg.len() {
                let next = Next::UserPass {
                    sep: rule.sep,
                    any: false,
                };
                return Some((next, Seen::Nothing));
            }
            user_pass(w, at + 2, rule.sep, false, depth, found);
            return plain;
        }
    }
    if rule.batch_last
        && arg[1..].contains('b')
        && arg[1..].bytes().all(|b| b.is_ascii_alphabetic())
    {
        return Some((Next::Plain, Seen::Batch));
    }
    None
}

/// `NAME=VALUE` from `at` in the word, with a secret NAME: the value is the secret; form data
/// (`a=1&password=x`) pair by pair.
fn assignment(w: &Word, at: usize, depth: usize, found: &mut Found) {
    let rest = &w.text[at..];
    let pairs: Vec<Range<usize>> = if FORM.is_match(rest) {
        let mut start = 0;
        rest.split('&')
            .map(|p| {
                let r = start..start + p.len();
                start += p.len() + 1;
                r
            })
            .collect()
    } else {
        std::iter::once(0..rest.len()).collect()
    };
    for p in pairs {
        if let Some(c) = ASSIGN.captures(&rest[p.clone()])
            && is_secret_name(&c[1])
        {
            let v = c.get(2).expect("group 2");
            if named_value(v.as_str(), depth) {
                found.add(w, at + p.start + v.start()..at + p.start + v.end());
            }
        }
    }
}
