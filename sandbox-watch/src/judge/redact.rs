//! Secrets never leave: argv is redacted before it is logged or reported.
//!
//! What is replaced with [`REDACTED`] (the option name, header name or variable name stays):
//!
//! - the value of a secret-named option, `--password=…` or `--password …` (also `--token`,
//!   `--secret`, `--api-key`, `--apikey`, `--access-key`, `--client-secret`, `--auth`,
//!   `--authorization`, names ending in `-password`, `-token`, `-secret`, …, and single-dash
//!   ones such as `-storepass`, `-passin`); flags that take no value (`--no-password`,
//!   `--password-stdin`, `--ask-pass`, `--with-token`) are not secret options;
//! - the password options of particular programs (`RULES`): `-pSECRET` after mysql,
//!   mysqldump, mariadb and friends (but not `-p SECRET`, which those read as a database name),
//!   `sshpass -p`, `redis-cli -a`, `mongosh -p`, `sqlcmd -P`, `ldapsearch -w`, `zip -P`,
//!   `7z -pSECRET`, `openssl -k`/`-K`, `docker|podman|helm … login -p`, `gh secret set --body`,
//!   the password of `curl -u user:password` and `smbclient -U user%password`, and the last
//!   argument of `htpasswd -b`;
//! - `config`/`set` followed by a secret-named setting and its value: `aws configure set
//!   aws_secret_access_key V`, `git config github.token V`, `npm config set _authToken V`;
//! - `Authorization:` and `Proxy-Authorization:` header values anywhere in an argument, other
//!   secret-named headers (`X-Api-Key: …`, `PRIVATE-TOKEN: …`) given to `-H`/`--header`, and
//!   `Bearer <token>`;
//! - `NAME=VALUE` where NAME is an environment-style name (letters, digits, `_`, `.`, no
//!   leading dash) one of whose words is a secret word (token, secret, password, passwd, pwd,
//!   pass, passphrase, key, apikey, credential(s), creds, auth, cookie), also after
//!   `--env=`/`-D` and in query strings and form data (`?api_key=…&`), and `"password": "…"`
//!   inside JSON; names that only hold a place (`SSH_AUTH_SOCK`, `*_FILE`, `*_PATH`, `*_ID`,
//!   `PWD`, `credential.helper`, public keys) are left alone;
//! - values shaped like common tokens anywhere in an argument (GitHub, AWS access key ids,
//!   Slack, JWTs, OpenAI/Anthropic `sk-…`, GitLab `glpat-`, Google `AIza…`, Stripe, npm,
//!   Hugging Face, PyPI) and the body of a `-----BEGIN … PRIVATE KEY-----` block;
//! - the password of a URL's userinfo: `https://user:[REDACTED]@host`;
//! - all of the above inside shell scripts given to `sh -c`/`bash -lc`/`su -c`/`eval`: the
//!   script is split into words and commands roughly as the shell does, each command is
//!   redacted as an argv, and changed words are put back (single-quoted where needed).
//!
//! There is no rule by entropy alone: a bare random-looking positional argument (a commit
//! hash, a checksum, an id) is left as it is.

use std::sync::LazyLock;

use regex::{Captures, Regex};

pub const REDACTED: &str = "[REDACTED]";

/// How deep scripts inside scripts (`bash -c "sh -c '…'"`) are opened up.
const MAX_SCRIPT_DEPTH: usize = 4;

/// Returns argv with secret-looking values replaced, and how many values were replaced.
pub fn redact_argv(argv: &[String]) -> (Vec<String>, usize) {
    let mut n = 0;
    let out = redact_words(argv, 0, &mut n);
    (out, n)
}

/// [`redact_argv`] for an argv the kernel cut at its limit: the last argument ends where the cut
/// fell, so a token or key there is only its beginning, which the whole shapes do not match.
/// Such a beginning is redacted to the end.
pub fn redact_cut_argv(argv: &[String]) -> (Vec<String>, usize) {
    let (mut out, mut n) = redact_argv(argv);
    if let Some(last) = out.last_mut()
        && let Some(at) = cut_secret_start(last)
    {
        last.replace_range(at.., REDACTED);
        n += 1;
    }
    (out, n)
}

/// Where a secret cut by the end of `s` starts: a token's known prefix running to the end, or
/// a private key block with no end line.
fn cut_secret_start(s: &str) -> Option<usize> {
    if let Some(m) = CUT_TOKEN.find(s) {
        return Some(m.start());
    }
    // A URL's password or a JSON secret's value, cut before its end.
    for re in [&*CUT_USERINFO, &*CUT_JSON_SECRET] {
        if let Some(value) = re.captures(s).and_then(|c| c.get(1)) {
            return Some(value.start());
        }
    }
    let begin = CUT_PEM.find(s)?;
    (!s[begin.end()..].contains("-----END")).then_some(begin.end())
}

static CUT_TOKEN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"\b(?:gh[pousr]_|github_pat_|AKIA|ASIA|xox[abposr]-|xapp-|eyJ|sk-|glpat-|AIza|[sr]k_(?:live|test)_|npm_|hf_|pypi-)[A-Za-z0-9_.-]*$",
    )
    .unwrap()
});

static CUT_USERINFO: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[A-Za-z][A-Za-z0-9+.-]*://[^/@\s:]*:([^/@\s]*)$").unwrap());

static CUT_JSON_SECRET: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?i)"[a-z_-]*(?:password|passwd|secret|token|api_?key|credential)[a-z_-]*"\s*:\s*"([^"]*)$"#,
    )
    .unwrap()
});

static CUT_PEM: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----").unwrap());

/// True when a single string looks like a secret token by shape (the whole string is one
/// GitHub, AWS, Slack, JWT, OpenAI/Anthropic, GitLab, … token, or a private key block).
#[cfg_attr(not(test), allow(dead_code))]
pub fn looks_like_token(s: &str) -> bool {
    let s = s.trim();
    if s.starts_with("-----BEGIN") && PEM.is_match(s) {
        return true;
    }
    TOKENS.iter().any(|(re, ok)| {
        re.find(s)
            .is_some_and(|m| m.start() == 0 && m.end() == s.len() && ok(m.as_str()))
    })
}

/// The password-taking options of particular programs.
#[derive(Debug)]
struct ToolRule {
    names: &'static [&'static str],
    /// The rule applies only after this word, a subcommand (`docker login`).
    after: Option<&'static str>,
    /// Options whose next argument, or value after `=`, is a secret.
    next: &'static [&'static str],
    /// Short options whose glued rest is a secret (`-pSECRET`).
    glued: &'static [&'static str],
    /// Options whose value is user, `sep`, password; a short one may be glued (`-uuser:pw`).
    user_pass: &'static [&'static str],
    sep: char,
    /// `--password` takes a value only after `=`; the next argument is something else (mysql).
    password_needs_eq: bool,
    /// With `-b`, the last positional argument is the password (htpasswd).
    batch_last: bool,
}

const NO_RULE: ToolRule = ToolRule {
    names: &[],
    after: None,
    next: &[],
    glued: &[],
    user_pass: &[],
    sep: ':',
    password_needs_eq: false,
    batch_last: false,
};

static RULES: &[ToolRule] = &[
    ToolRule {
        names: &[
            "mysql",
            "mysqldump",
            "mysqladmin",
            "mysqlimport",
            "mysqlshow",
            "mysqlcheck",
            "mysqlpump",
            "mysqlslap",
            "mysqlbinlog",
            "mariadb",
            "mariadb-dump",
            "mariadb-admin",
            "mariadb-import",
            "mariadb-show",
            "mariadb-check",
            "mariadb-slap",
            "mariadb-binlog",
        ],
        glued: &["-p"],
        password_needs_eq: true,
        ..NO_RULE
    },
    ToolRule {
        names: &["sshpass"],
        next: &["-p"],
        glued: &["-p"],
        ..NO_RULE
    },
    ToolRule {
        names: &["redis-cli", "valkey-cli"],
        next: &["-a"],
        ..NO_RULE
    },
    ToolRule {
        names: &[
            "mongo",
            "mongosh",
            "mongodump",
            "mongorestore",
            "mongoexport",
            "mongoimport",
            "mongostat",
            "mongotop",
            "mongofiles",
        ],
        next: &["-p"],
        ..NO_RULE
    },
    ToolRule {
        names: &["sqlcmd", "bcp"],
        next: &["-P"],
        ..NO_RULE
    },
    ToolRule {
        names: &[
            "ldapsearch",
            "ldapadd",
            "ldapmodify",
            "ldapdelete",
            "ldapwhoami",
            "ldappasswd",
            "ldapcompare",
            "ldapmodrdn",
            "ldapexop",
        ],
        next: &["-w"],
        ..NO_RULE
    },
    ToolRule {
        names: &["zip", "zipcloak", "unzip"],
        next: &["-P"],
        ..NO_RULE
    },
    ToolRule {
        names: &["7z", "7za", "7zr", "7zz"],
        glued: &["-p"],
        ..NO_RULE
    },
    ToolRule {
        names: &["openssl"],
        next: &["-k", "-K"],
        ..NO_RULE
    },
    ToolRule {
        names: &["curl"],
        // A cookie string (or its file's name) and a bearer token.
        next: &["-b", "--cookie", "--oauth2-bearer"],
        user_pass: &["-u", "--user", "-U", "--proxy-user"],
        ..NO_RULE
    },
    ToolRule {
        names: &["smbclient", "rpcclient", "smbcacls"],
        user_pass: &["-U", "--user"],
        sep: '%',
        ..NO_RULE
    },
    ToolRule {
        names: &[
            "docker", "podman", "nerdctl", "buildah", "skopeo", "helm", "oras", "crane",
        ],
        after: Some("login"),
        next: &["-p", "--password"],
        ..NO_RULE
    },
    ToolRule {
        names: &["gh"],
        after: Some("secret"),
        next: &["-b", "--body"],
        glued: &["-b"],
        ..NO_RULE
    },
    ToolRule {
        names: &["htpasswd"],
        batch_last: true,
        ..NO_RULE
    },
];

/// The program a part of argv belongs to, as far as redaction cares.
#[derive(Clone, Copy, Debug)]
enum Tool {
    Other,
    /// A program of [`RULES`]; `active` once its subcommand, if it needs one, was seen.
    Rule {
        rule: &'static ToolRule,
        active: bool,
    },
    /// sh, bash, …, su: the argument after `-c` is a script.
    Shell,
    /// Every later argument is a script.
    Eval,
}

/// What the next argument is, given the one before.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Next {
    Plain,
    /// The value of a secret option.
    Secret,
    /// `user:password` (or another separator).
    UserPass(char),
    /// The value of `-H` / `--header`.
    Header,
}

/// What one argument told about those after it, besides [`Next`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Seen {
    Nothing,
    /// A shell's `-c`: the next argument that is not an option is a script.
    ScriptFlag,
    /// htpasswd's `-b`: the last positional argument is the password.
    Batch,
}

const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox", "su", "runuser",
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

fn basename(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

fn tool_of(arg: &str, prev: Option<&str>) -> Option<Tool> {
    if prev.is_some_and(|p| NAMING_OPTIONS.contains(&p)) {
        return None;
    }
    let b = basename(arg);
    if SHELLS.contains(&b) {
        return Some(Tool::Shell);
    }
    if b == "eval" {
        return Some(Tool::Eval);
    }
    RULES
        .iter()
        .find(|r| r.names.contains(&b))
        .map(|rule| Tool::Rule {
            rule,
            active: rule.after.is_none(),
        })
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

/// A value worth replacing: not empty, not already replaced, and at depth > 0 (words of a
/// script) not a shell expansion such as `$TOKEN`, which holds no secret itself.
fn redactable(value: &str, depth: usize) -> bool {
    let v = value.trim();
    let expansion = depth > 0 && v.starts_with('$');
    !v.is_empty() && !v.starts_with(REDACTED) && !expansion
}

fn redact_words(argv: &[String], depth: usize, n: &mut usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(argv.len());
    let mut tool = Tool::Other;
    let mut next = Next::Plain;
    let mut script_next = false;
    // The last positional word, for SETTER_WORDS.
    let mut last_word: Option<&str> = None;
    // htpasswd -b: where the last positional argument of the tool is, and how many there are.
    let mut batch = false;
    let mut positionals: Vec<usize> = Vec::new();
    for (i, arg) in argv.iter().enumerate() {
        let prev = i.checked_sub(1).map(|j| argv[j].as_str());
        let this = std::mem::replace(&mut next, Next::Plain);
        let is_option = looks_like_option(arg);
        let s = match this {
            Next::Secret if !is_option => redact_whole(arg, depth, n),
            Next::UserPass(sep) => redact_user_pass(arg, sep, depth, n),
            Next::Header => redact_header(arg, depth, n),
            _ if (script_next || matches!(tool, Tool::Eval)) && !is_option => {
                script_next = false;
                redact_script(arg, depth, n)
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
                    arg.clone()
                } else {
                    if let Tool::Rule { rule, active } = &mut tool
                        && !*active
                        && rule.after == Some(arg.as_str())
                    {
                        *active = true;
                    }
                    let (s, nx, seen) = redact_one(arg, tool, depth, n);
                    next = nx;
                    script_next |= seen == Seen::ScriptFlag;
                    batch |= seen == Seen::Batch;
                    if !is_option {
                        if next == Next::Plain
                            && s == *arg
                            && last_word.is_some_and(|w| SETTER_WORDS.contains(&w))
                            && !arg.contains('=')
                            && is_secret_name(arg)
                        {
                            next = Next::Secret;
                        }
                        last_word = Some(arg.as_str());
                        positionals.push(i);
                    }
                    s
                }
            }
        };
        out.push(redact_anywhere(&s, depth, n));
    }
    if batch
        && positionals.len() >= 2
        && let Some(&last) = positionals.last()
        && redactable(&out[last], depth)
    {
        *n += 1;
        out[last] = REDACTED.to_string();
    }
    out
}

fn redact_whole(arg: &str, depth: usize, n: &mut usize) -> String {
    if redactable(arg, depth) {
        *n += 1;
        REDACTED.to_string()
    } else {
        arg.to_string()
    }
}

/// `user:password` → `user:[REDACTED]`; a bare `user` stays.
fn redact_user_pass(value: &str, sep: char, depth: usize, n: &mut usize) -> String {
    match value.split_once(sep) {
        Some((user, pass)) if redactable(pass, depth) => {
            *n += 1;
            format!("{user}{sep}{REDACTED}")
        }
        _ => value.to_string(),
    }
}

static HEADER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?s)^(\s*([A-Za-z0-9_-]+)\s*:\s*)(.*)$").unwrap());

/// A header given to `-H`: `X-Api-Key: k` → `X-Api-Key: [REDACTED]`.
fn redact_header(value: &str, depth: usize, n: &mut usize) -> String {
    if let Some(c) = HEADER.captures(value)
        && is_secret_header(&c[2])
        && redactable(&c[3], depth)
    {
        *n += 1;
        return format!("{}{REDACTED}", &c[1]);
    }
    value.to_string()
}

fn is_secret_header(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    if matches!(
        name.as_str(),
        "authorization" | "proxy-authorization" | "cookie" | "set-cookie"
    ) {
        return true;
    }
    let words: Vec<&str> = name.split(['-', '_']).collect();
    if words.last().is_some_and(|w| PLACE_WORDS.contains(w)) {
        return false;
    }
    words.iter().any(|w| {
        matches!(
            *w,
            "token"
                | "key"
                | "apikey"
                | "secret"
                | "auth"
                | "password"
                | "passwd"
                | "credential"
                | "credentials"
        )
    })
}

static OPT_EQ: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?s)^(--?)([A-Za-z][A-Za-z0-9_.-]*)=(.*)$").unwrap());
static JAVA_PROP: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?s)^-D([A-Za-z_][A-Za-z0-9_.-]*=.*)$").unwrap());
static SHELL_C: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^-[A-Za-z]*c[A-Za-z]*$").unwrap());

/// Redacts one argument by the rules that look at it alone (and the tool it belongs to).
/// Returns it, what the next argument is, and what else it told.
fn redact_one(arg: &str, tool: Tool, depth: usize, n: &mut usize) -> (String, Next, Seen) {
    let plain = |s: String| (s, Next::Plain, Seen::Nothing);
    let is_long = arg.starts_with("--");
    if let Tool::Rule { rule, active: true } = tool
        && let Some(r) = redact_by_rule(arg, rule, depth, n)
    {
        return r;
    }
    // -Dgpg.passphrase=…: a Java/Maven property, before `-name=value` below takes it.
    if let Some(c) = JAVA_PROP.captures(arg) {
        return plain(format!("-D{}", redact_assignment(&c[1], depth, n)));
    }
    if let Some(c) = OPT_EQ.captures(arg) {
        let (dashes, name, value) = (&c[1], &c[2], &c[3]);
        let long_enough = dashes == "--" || name.len() >= 3;
        if long_enough && is_secret_option(name) {
            if redactable(value, depth) {
                *n += 1;
                return plain(format!("{dashes}{name}={REDACTED}"));
            }
            return plain(arg.to_string());
        }
        if dashes == "--" && name.eq_ignore_ascii_case("header") {
            return plain(format!("{dashes}{name}={}", redact_header(value, depth, n)));
        }
        // --env=API_TOKEN=…, --build-arg=…, --from-literal=password=…
        return plain(format!(
            "{dashes}{name}={}",
            redact_assignment(value, depth, n)
        ));
    }
    if !looks_like_option(arg) {
        return plain(redact_assignment(arg, depth, n));
    }
    // An option without `=`.
    if matches!(tool, Tool::Shell) && SHELL_C.is_match(arg) {
        return (arg.to_string(), Next::Plain, Seen::ScriptFlag);
    }
    if matches!(arg, "-H" | "--header") {
        return (arg.to_string(), Next::Header, Seen::Nothing);
    }
    let name = arg.trim_start_matches('-');
    if (is_long || name.len() >= 3) && is_secret_option(name) {
        return (arg.to_string(), Next::Secret, Seen::Nothing);
    }
    plain(arg.to_string())
}

/// The rules of one program for one of its options, if one applies.
fn redact_by_rule(
    arg: &str,
    rule: &ToolRule,
    depth: usize,
    n: &mut usize,
) -> Option<(String, Next, Seen)> {
    let plain = |s: String| Some((s, Next::Plain, Seen::Nothing));
    if !looks_like_option(arg) {
        return None;
    }
    let is_long = arg.starts_with("--");
    if is_long && let Some((opt, value)) = arg.split_once('=') {
        if rule.next.contains(&opt) {
            return plain(format!("{opt}={}", redact_whole(value, depth, n)));
        }
        if rule.user_pass.contains(&opt) {
            return plain(format!(
                "{opt}={}",
                redact_user_pass(value, rule.sep, depth, n)
            ));
        }
        return None;
    }
    if rule.next.contains(&arg) {
        return Some((arg.to_string(), Next::Secret, Seen::Nothing));
    }
    if rule.user_pass.contains(&arg) {
        return Some((arg.to_string(), Next::UserPass(rule.sep), Seen::Nothing));
    }
    if is_long {
        // mysql's --password takes its value only after `=`: the next argument is the database.
        if rule.password_needs_eq && arg == "--password" {
            return plain(arg.to_string());
        }
        return None;
    }
    for g in rule.glued {
        if let Some(v) = arg.strip_prefix(g)
            && !v.is_empty()
        {
            return plain(format!("{g}{}", redact_whole(v, depth, n)));
        }
    }
    for u in rule.user_pass.iter().filter(|u| u.len() == 2) {
        if let Some(v) = arg.strip_prefix(u)
            && !v.is_empty()
        {
            return plain(format!("{u}{}", redact_user_pass(v, rule.sep, depth, n)));
        }
        // In a cluster of flags (`-su admin:pw`, `-sSuadmin:pw`): after the letter, the value
        // is glued or is the next argument.
        let letter = u.as_bytes()[1];
        let flags = &arg.as_bytes()[1..];
        if let Some(at) = flags.iter().position(|&b| b == letter)
            && at > 0
            && flags[..at].iter().all(u8::is_ascii_alphabetic)
        {
            let (head, value) = arg.split_at(at + 2);
            if value.is_empty() {
                return Some((arg.to_string(), Next::UserPass(rule.sep), Seen::Nothing));
            }
            return plain(format!(
                "{head}{}",
                redact_user_pass(value, rule.sep, depth, n)
            ));
        }
    }
    if rule.batch_last
        && arg[1..].contains('b')
        && arg[1..].bytes().all(|b| b.is_ascii_alphabetic())
    {
        return Some((arg.to_string(), Next::Plain, Seen::Batch));
    }
    None
}

/// Is `name` (an option without its dashes) one whose value is a secret?
fn is_secret_option(name: &str) -> bool {
    let name = name.to_ascii_lowercase().replace('_', "-");
    // Flags about a secret that take no value, or take a place where the secret is.
    const NOT_VALUES: &[&str] = &["no-", "ask-", "prompt-", "with-", "use-", "read-", "show-"];
    if NOT_VALUES.iter().any(|p| name.starts_with(p)) {
        return false;
    }
    const EXACT: &[&str] = &[
        "password",
        "passwd",
        "pass",
        "passphrase",
        "token",
        "secret",
        "apikey",
        "api-key",
        "access-key",
        "accesskey",
        "secret-key",
        "client-secret",
        "auth",
        "authorization",
        "authtoken",
        "storepass",
        "keypass",
        "srcstorepass",
        "deststorepass",
        "srckeypass",
        "destkeypass",
        "passin",
        "passout",
    ];
    const SUFFIXES: &[&str] = &[
        "-password",
        "-passwd",
        "-passphrase",
        "-token",
        "-secret",
        "-api-key",
        "-apikey",
        "-access-key",
        "-secret-key",
    ];
    EXACT.contains(&name.as_str()) || SUFFIXES.iter().any(|s| name.ends_with(s))
}

static ASSIGN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?s)^([A-Za-z_][A-Za-z0-9_.]*)=(.*)$").unwrap());
static FORM: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^[A-Za-z_][A-Za-z0-9_.\-\[\]]*=[^&\s]*(?:&[A-Za-z_][A-Za-z0-9_.\-\[\]]*=[^&\s]*)+$",
    )
    .unwrap()
});

/// `NAME=VALUE` with a secret NAME → `NAME=[REDACTED]`; form data `a=1&password=x` pair by pair.
fn redact_assignment(arg: &str, depth: usize, n: &mut usize) -> String {
    if FORM.is_match(arg) {
        let t = format!("&{arg}");
        return redact_groups(&QUERY, &t, 3, depth, n, |c| is_secret_name(&c[2]))[1..].to_string();
    }
    if let Some(c) = ASSIGN.captures(arg)
        && is_secret_name(&c[1])
        && redactable(&c[2], depth)
    {
        *n += 1;
        return format!("{}={REDACTED}", &c[1]);
    }
    arg.to_string()
}

/// Last words of a name that say it holds where or which a secret is, not the secret.
const PLACE_WORDS: &[&str] = &[
    "sock",
    "socket",
    "file",
    "files",
    "path",
    "dir",
    "id",
    "ids",
    "name",
    "user",
    "username",
    "type",
    "method",
    "mode",
    "url",
    "uri",
    "host",
    "port",
    "enabled",
    "disabled",
    "required",
    "timeout",
    "len",
    "length",
    "size",
    "algorithm",
    "alg",
    "helper",
    "cache",
    "store",
    "provider",
    "backend",
    "version",
    "count",
];

/// Words of a variable name: `GITHUB_TOKEN` → github, token; `auth.rootPassword` → auth,
/// root, password.
fn name_words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    for part in name.split(['_', '.', '-', '[', ']']) {
        let mut cur = String::new();
        let mut prev_lower = false;
        for ch in part.chars() {
            if ch.is_ascii_uppercase() && prev_lower && !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            prev_lower = ch.is_ascii_lowercase() || ch.is_ascii_digit();
            cur.push(ch.to_ascii_lowercase());
        }
        if !cur.is_empty() {
            words.push(cur);
        }
    }
    words
}

/// Does this environment-style name hold a secret (`API_TOKEN`, `db_password`, `apiKey`)?
fn is_secret_name(name: &str) -> bool {
    if matches!(name, "PWD" | "OLDPWD") {
        return false;
    }
    let words = name_words(name);
    if words
        .last()
        .is_some_and(|w| PLACE_WORDS.contains(&w.as_str()))
    {
        return false;
    }
    if words.iter().any(|w| w == "public" || w == "pub") {
        return false;
    }
    words.iter().any(|w| {
        let w = w.as_str();
        matches!(
            w,
            "token"
                | "tokens"
                | "secret"
                | "secrets"
                | "pwd"
                | "pass"
                | "key"
                | "keys"
                | "auth"
                | "creds"
                | "cookie"
                | "cookies"
        ) || w.contains("password")
            || w.contains("passwd")
            || w.contains("passphrase")
            || w.contains("secret")
            || w.contains("credential")
            || w.ends_with("token")
            || w.ends_with("apikey")
            || w.ends_with("accesskey")
            || w.ends_with("secretkey")
            || w.ends_with("privatekey")
            || w.ends_with("authkey")
            || w.ends_with("auth")
    })
}

// Rules that apply anywhere in any argument.

static PEM: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?s)(-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----)(.*?)(-----END [A-Z0-9 ]*PRIVATE KEY-----|\z)",
    )
    .unwrap()
});
static AUTHORIZATION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b((?:proxy-)?authorization\s*:[ \t]*)([^'\x22\r\n]+)").unwrap()
});
static BEARER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\bBearer\s+([A-Za-z0-9\-._~+/]+=*)").unwrap());
static URL_USERINFO: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b([A-Za-z][A-Za-z0-9+.-]*://[^/\s:@'\x22?#]*:)([^\s'\x22/?#]+)@").unwrap()
});
static QUERY: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"([?&])([A-Za-z_][A-Za-z0-9_.\-\[\]]*)=([^&#\s'\x22]+)").unwrap());
static JSON_PAIR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#""([A-Za-z_][A-Za-z0-9_.\-]*)"\s*:\s*"((?:[^"\\]|\\.)*)""#).unwrap()
});

type TokenCheck = fn(&str) -> bool;

fn any_token(_: &str) -> bool {
    true
}

/// sk-… is also the start of ordinary words and branch names: a key has digits and both cases.
fn mixed_alnum(t: &str) -> bool {
    t.bytes().any(|b| b.is_ascii_digit())
        && t.bytes().any(|b| b.is_ascii_uppercase())
        && t.bytes().any(|b| b.is_ascii_lowercase())
}

fn mixed_case(t: &str) -> bool {
    t.bytes().any(|b| b.is_ascii_uppercase()) && t.bytes().any(|b| b.is_ascii_lowercase())
}

static TOKENS: LazyLock<Vec<(Regex, TokenCheck)>> = LazyLock::new(|| {
    let t = |re: &str, ok: TokenCheck| (Regex::new(re).unwrap(), ok);
    vec![
        // GitHub
        t(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,255}", any_token),
        t(r"\bgithub_pat_[A-Za-z0-9_]{22,255}", any_token),
        // AWS access key ids
        t(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b", any_token),
        // Slack
        t(r"\bxox[abposr]-[A-Za-z0-9-]{10,}", any_token),
        t(r"\bxapp-[A-Za-z0-9-]{10,}", any_token),
        // JWT
        t(
            r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
            any_token,
        ),
        // Anthropic, then OpenAI and the like
        t(r"\bsk-ant-[A-Za-z0-9_-]{20,}", any_token),
        t(
            r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",
            mixed_alnum,
        ),
        // GitLab
        t(r"\bglpat-[A-Za-z0-9_-]{20,}", any_token),
        // Google API keys
        t(r"\bAIza[0-9A-Za-z_-]{35}", any_token),
        // Stripe
        t(r"\b(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{20,}", any_token),
        // npm
        t(r"\bnpm_[A-Za-z0-9]{36}", any_token),
        // Hugging Face
        t(r"\bhf_[A-Za-z0-9]{30,}", mixed_case),
        // PyPI
        t(r"\bpypi-AgE[A-Za-z0-9_-]{50,}", any_token),
    ]
});

/// A Bearer credential rather than a word after "Bearer" in prose ("Bearer tokens").
fn bearer_token(t: &str) -> bool {
    let plain_word = {
        let mut cs = t.chars();
        cs.next().is_some_and(|c| c.is_ascii_alphabetic()) && cs.all(|c| c.is_ascii_lowercase())
    };
    !plain_word || t.len() >= 24
}

/// Replaces group `group` of every match of `re` for which `secret` holds with [`REDACTED`].
fn redact_groups(
    re: &Regex,
    text: &str,
    group: usize,
    depth: usize,
    n: &mut usize,
    secret: impl Fn(&Captures) -> bool,
) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for c in re.captures_iter(text) {
        let Some(g) = c.get(group) else { continue };
        if !redactable(g.as_str(), depth) || !secret(&c) {
            continue;
        }
        out.push_str(&text[last..g.start()]);
        out.push_str(REDACTED);
        last = g.end();
        *n += 1;
    }
    if last == 0 {
        return text.to_string();
    }
    out.push_str(&text[last..]);
    out
}

/// The rules that look inside any argument, whatever its place.
fn redact_anywhere(arg: &str, depth: usize, n: &mut usize) -> String {
    let mut s = arg.to_string();
    if s.contains("PRIVATE KEY-----") {
        s = redact_groups(&PEM, &s, 2, depth, n, |_| true);
    }
    s = redact_groups(&AUTHORIZATION, &s, 2, depth, n, |_| true);
    if s.contains("Bearer") {
        s = redact_groups(&BEARER, &s, 1, depth, n, |c| bearer_token(&c[1]));
    }
    if s.contains("://") {
        s = redact_groups(&URL_USERINFO, &s, 2, depth, n, |_| true);
    }
    if s.contains('=') {
        s = redact_groups(&QUERY, &s, 3, depth, n, |c| is_secret_name(&c[2]));
    }
    if s.contains('"') {
        s = redact_groups(&JSON_PAIR, &s, 2, depth, n, |c| is_secret_name(&c[1]));
    }
    for (re, ok) in TOKENS.iter() {
        s = redact_groups(re, &s, 0, depth, n, |c| ok(&c[0]));
    }
    s
}

// Shell scripts.

/// One word of a script: where it is in the text and what the shell makes of it.
#[derive(Debug)]
struct Word {
    start: usize,
    end: usize,
    text: String,
}

/// Splits a script into simple commands of words, roughly as a POSIX shell does: quotes and
/// backslashes are honoured; `;` `&` `|` `(` `)` and newlines end a command; `<` `>` end a
/// word; `#` at the start of a word starts a comment. Expansions are left as written.
fn shell_commands(s: &str) -> Vec<Vec<Word>> {
    let mut cmds = Vec::new();
    let mut cmd: Vec<Word> = Vec::new();
    let mut word: Option<Word> = None;
    let mut it = s.char_indices().peekable();
    fn start(word: &mut Option<Word>, at: usize) -> &mut Word {
        word.get_or_insert_with(|| Word {
            start: at,
            end: at,
            text: String::new(),
        })
    }
    fn finish(word: &mut Option<Word>, cmd: &mut Vec<Word>) {
        if let Some(w) = word.take() {
            cmd.push(w);
        }
    }
    while let Some((i, c)) = it.next() {
        match c {
            ' ' | '\t' => finish(&mut word, &mut cmd),
            '<' | '>' => finish(&mut word, &mut cmd),
            '\n' | ';' | '&' | '|' | '(' | ')' => {
                finish(&mut word, &mut cmd);
                if !cmd.is_empty() {
                    cmds.push(std::mem::take(&mut cmd));
                }
            }
            '#' if word.is_none() => {
                while let Some(&(_, c)) = it.peek() {
                    if c == '\n' {
                        break;
                    }
                    it.next();
                }
            }
            '\'' => {
                let w = start(&mut word, i);
                w.end = s.len();
                for (j, c) in it.by_ref() {
                    if c == '\'' {
                        w.end = j + 1;
                        break;
                    }
                    w.text.push(c);
                }
            }
            '"' => {
                let w = start(&mut word, i);
                w.end = s.len();
                while let Some((j, c)) = it.next() {
                    match c {
                        '"' => {
                            w.end = j + 1;
                            break;
                        }
                        '\\' => match it.peek() {
                            Some(&(_, n @ ('"' | '\\' | '$' | '`'))) => {
                                w.text.push(n);
                                it.next();
                            }
                            Some(&(_, '\n')) => {
                                it.next();
                            }
                            _ => w.text.push('\\'),
                        },
                        _ => w.text.push(c),
                    }
                }
            }
            '\\' => {
                let w = start(&mut word, i);
                match it.next() {
                    Some((j, '\n')) => w.end = j + 1,
                    Some((j, n)) => {
                        w.text.push(n);
                        w.end = j + n.len_utf8();
                    }
                    None => w.end = i + 1,
                }
            }
            _ => {
                let w = start(&mut word, i);
                w.text.push(c);
                w.end = i + c.len_utf8();
            }
        }
    }
    finish(&mut word, &mut cmd);
    if !cmd.is_empty() {
        cmds.push(cmd);
    }
    cmds
}

/// A word as it could be typed again: bare if it is safe, else single-quoted.
fn shell_quote(w: &str) -> String {
    let safe = !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_@%+=:,./-[]".contains(c));
    if safe {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', r"'\''"))
    }
}

/// Redacts a script given to a shell: each simple command as an argv.
fn redact_script(script: &str, depth: usize, n: &mut usize) -> String {
    if depth >= MAX_SCRIPT_DEPTH {
        return script.to_string();
    }
    let mut out = String::with_capacity(script.len());
    let mut last = 0;
    for cmd in shell_commands(script) {
        let words: Vec<String> = cmd.iter().map(|w| w.text.clone()).collect();
        let redacted = redact_words(&words, depth + 1, n);
        for (w, r) in cmd.iter().zip(redacted) {
            if r != w.text {
                out.push_str(&script[last..w.start]);
                out.push_str(&shell_quote(&r));
                last = w.end;
            }
        }
    }
    out.push_str(&script[last..]);
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_secret_cut_by_the_argv_limit_is_redacted_to_the_end() {
        let argv = |last: &str| vec!["/bin/true".to_string(), "pad".into(), last.to_string()];
        for (last, want) in [
            ("ghp_abcdefghijklmnopqr", "[REDACTED]"),
            ("--token=ghp_abc", "--token=[REDACTED]"),
            ("token eyJhbGciOi", "token [REDACTED]"),
            ("x sk-ant-api03-abc", "x [REDACTED]"),
            (
                "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA",
                "-----BEGIN OPENSSH PRIVATE KEY-----[REDACTED]",
            ),
        ] {
            let (out, n) = super::redact_cut_argv(&argv(last));
            assert_eq!(out[2], want, "{last}");
            assert!(n >= 1, "{last}");
        }
        for (last, want) in [
            ("https://bob:hunter2sec", "https://bob:[REDACTED]"),
            (
                r#"{"user": "a", "password":"hunter2se"#,
                r#"{"user": "a", "password":"[REDACTED]"#,
            ),
        ] {
            let (out, _) = super::redact_cut_argv(&argv(last));
            assert_eq!(out[2], want, "{last}");
        }
        // Not a secret's beginning: left as it is, and only the last argument is looked at.
        for last in ["hello world", "ask-me", "release-v1", "a ghp_x b"] {
            let (out, n) = super::redact_cut_argv(&argv(last));
            assert_eq!((out[2].as_str(), n), (last, 0), "{last}");
        }
        let (out, n) = super::redact_cut_argv(&["ghp_abc".into(), "last".into()]);
        assert_eq!((out, n), (vec!["ghp_abc".to_string(), "last".into()], 0));
        // Uncut, a beginning is not a token.
        assert_eq!(super::redact_argv(&argv("ghp_abc")).1, 0);
    }

    use super::*;

    fn argv(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    /// Redacts and checks the result and the count.
    #[track_caller]
    fn check(input: &[&str], want: &[&str], count: usize) {
        let (got, n) = redact_argv(&argv(input));
        assert_eq!(got, argv(want), "redacting {input:?}");
        assert_eq!(n, count, "count for {input:?}");
    }

    #[track_caller]
    fn untouched(input: &[&str]) {
        check(input, input, 0);
    }

    #[test]
    fn option_with_equals() {
        check(
            &["mytool", "--password=hunter2"],
            &["mytool", "--password=[REDACTED]"],
            1,
        );
        check(
            &["x", "--token=abc", "--secret=s"],
            &["x", "--token=[REDACTED]", "--secret=[REDACTED]"],
            2,
        );
        check(&["x", "--api-key=k1"], &["x", "--api-key=[REDACTED]"], 1);
        check(&["x", "--apikey=k1"], &["x", "--apikey=[REDACTED]"], 1);
        check(
            &["x", "--access-key=k1"],
            &["x", "--access-key=[REDACTED]"],
            1,
        );
        check(
            &["x", "--client-secret=k1"],
            &["x", "--client-secret=[REDACTED]"],
            1,
        );
        check(&["x", "--auth=u:p"], &["x", "--auth=[REDACTED]"], 1);
        check(
            &["x", "--auth-token=t"],
            &["x", "--auth-token=[REDACTED]"],
            1,
        );
        check(
            &["x", "--db-password=p"],
            &["x", "--db-password=[REDACTED]"],
            1,
        );
        check(
            &["x", "--GITHUB_TOKEN=t"],
            &["x", "--GITHUB_TOKEN=[REDACTED]"],
            1,
        );
        check(&["prog", "-token=abc"], &["prog", "-token=[REDACTED]"], 1);
        // Look-alikes.
        untouched(&["x", "--keyword=foo"]);
        untouched(&["git", "commit", "--author=Alice <a@example.com>"]);
        untouched(&["x", "--password="]);
        untouched(&["x", "--token-file=/run/secrets/t"]);
        untouched(&["x", "--max-tokens=100"]);
        untouched(&["sort", "--key=2"]);
        untouched(&["x", "--auth-type=basic"]);
    }

    #[test]
    fn option_with_separate_value() {
        check(
            &["x", "--password", "hunter2"],
            &["x", "--password", "[REDACTED]"],
            1,
        );
        check(
            &["x", "--token", "abc", "file"],
            &["x", "--token", "[REDACTED]", "file"],
            1,
        );
        check(
            &["keytool", "-storepass", "changeit"],
            &["keytool", "-storepass", "[REDACTED]"],
            1,
        );
        check(
            &["openssl", "-passin", "pass:pw"],
            &["openssl", "-passin", "[REDACTED]"],
            1,
        );
        check(
            &["wget", "--http-password", "pw", "u"],
            &["wget", "--http-password", "[REDACTED]", "u"],
            1,
        );
        // Look-alikes: flags that take no value, and a value that is an option.
        untouched(&["docker", "login", "-u", "me", "--password-stdin"]);
        untouched(&["psql", "--no-password", "mydb"]);
        untouched(&["gh", "auth", "login", "--with-token"]);
        untouched(&["ansible-playbook", "--ask-vault-password", "site.yml"]);
        untouched(&["x", "--token", "--verbose"]);
        untouched(&["x", "--keyword", "foo"]);
        untouched(&["ssh-keygen", "-t", "ed25519", "-f", "key"]);
    }

    #[test]
    fn glued_p_after_password_tools() {
        check(
            &["mysql", "-uroot", "-phunter2", "db"],
            &["mysql", "-uroot", "-p[REDACTED]", "db"],
            1,
        );
        check(
            &["/usr/bin/mysqldump", "-pX", "db"],
            &["/usr/bin/mysqldump", "-p[REDACTED]", "db"],
            1,
        );
        check(&["mariadb", "-ps3cret"], &["mariadb", "-p[REDACTED]"], 1);
        check(
            &["sudo", "-E", "mysql", "-psecret"],
            &["sudo", "-E", "mysql", "-p[REDACTED]"],
            1,
        );
        check(
            &["docker", "exec", "db", "mysql", "-pX"],
            &["docker", "exec", "db", "mysql", "-p[REDACTED]"],
            1,
        );
        check(
            &["sshpass", "-p", "pw", "ssh", "h"],
            &["sshpass", "-p", "[REDACTED]", "ssh", "h"],
            1,
        );
        check(
            &["sshpass", "-ppw", "ssh", "h"],
            &["sshpass", "-p[REDACTED]", "ssh", "h"],
            1,
        );
        check(
            &["redis-cli", "-a", "pw", "ping"],
            &["redis-cli", "-a", "[REDACTED]", "ping"],
            1,
        );
        // Look-alikes: -p is a port or a flag elsewhere; `mysql -p db` prompts.
        untouched(&["psql", "-h", "db", "-p5432", "-U", "me"]);
        untouched(&["psql", "-h", "mysql", "-p5432"]);
        untouched(&["mysql", "-p", "mydb"]);
        untouched(&["mysql", "-u", "root", "--password", "mydb"]);
        untouched(&["mkdir", "-p", "a/b"]);
        untouched(&["ssh", "-p2222", "host"]);
        untouched(&["docker", "run", "-p8080:80", "nginx"]);
        untouched(&["docker", "run", "--name", "mysql", "-p3306:3306", "mysql:8"]);
    }

    #[test]
    fn other_tools_that_take_passwords() {
        check(
            &["docker", "login", "-u", "me", "-p", "pw", "reg.example"],
            &[
                "docker",
                "login",
                "-u",
                "me",
                "-p",
                "[REDACTED]",
                "reg.example",
            ],
            1,
        );
        check(
            &["helm", "registry", "login", "h", "--password", "pw"],
            &["helm", "registry", "login", "h", "--password", "[REDACTED]"],
            1,
        );
        check(
            &["mongosh", "-u", "admin", "-p", "pw", "db"],
            &["mongosh", "-u", "admin", "-p", "[REDACTED]", "db"],
            1,
        );
        check(
            &["sqlcmd", "-S", "h", "-U", "sa", "-P", "pw"],
            &["sqlcmd", "-S", "h", "-U", "sa", "-P", "[REDACTED]"],
            1,
        );
        check(
            &["ldapsearch", "-x", "-D", "cn=admin", "-w", "pw"],
            &["ldapsearch", "-x", "-D", "cn=admin", "-w", "[REDACTED]"],
            1,
        );
        check(
            &["zip", "-P", "pw", "a.zip", "f"],
            &["zip", "-P", "[REDACTED]", "a.zip", "f"],
            1,
        );
        check(
            &["7z", "a", "-ppw", "a.7z", "f"],
            &["7z", "a", "-p[REDACTED]", "a.7z", "f"],
            1,
        );
        check(
            &["openssl", "enc", "-aes-256-cbc", "-k", "pw", "-in", "f"],
            &[
                "openssl",
                "enc",
                "-aes-256-cbc",
                "-k",
                "[REDACTED]",
                "-in",
                "f",
            ],
            1,
        );
        check(
            &["smbclient", "//h/s", "-U", "bob%pw"],
            &["smbclient", "//h/s", "-U", "bob%[REDACTED]"],
            1,
        );
        check(
            &["gh", "secret", "set", "API_KEY", "--body", "abc123"],
            &["gh", "secret", "set", "API_KEY", "--body", "[REDACTED]"],
            1,
        );
        check(
            &["gh", "secret", "set", "X", "-babc"],
            &["gh", "secret", "set", "X", "-b[REDACTED]"],
            1,
        );
        check(
            &["htpasswd", "-bc", "/etc/htpasswd", "admin", "pw"],
            &["htpasswd", "-bc", "/etc/htpasswd", "admin", "[REDACTED]"],
            1,
        );
        check(
            &["htpasswd", "-nbB", "admin", "pw"],
            &["htpasswd", "-nbB", "admin", "[REDACTED]"],
            1,
        );
        check(
            &[
                "aws",
                "configure",
                "set",
                "aws_secret_access_key",
                "wJalrXUtnFEMI/K7MDENG",
            ],
            &[
                "aws",
                "configure",
                "set",
                "aws_secret_access_key",
                "[REDACTED]",
            ],
            1,
        );
        check(
            &["git", "config", "--global", "github.token", "abc"],
            &["git", "config", "--global", "github.token", "[REDACTED]"],
            1,
        );
        check(
            &["npm", "config", "set", "//r.example/:_authToken", "abc"],
            &[
                "npm",
                "config",
                "set",
                "//r.example/:_authToken",
                "[REDACTED]",
            ],
            1,
        );
        // Look-alikes: the same letters elsewhere.
        untouched(&["docker", "run", "-p", "8080:80", "nginx"]);
        untouched(&["docker", "login", "reg.example"]);
        untouched(&["gh", "pr", "create", "-b", "body text"]);
        untouched(&["zip", "-r", "a.zip", "dir"]);
        untouched(&["htpasswd", "-c", "/etc/htpasswd", "admin"]);
        untouched(&["openssl", "req", "-new", "-key", "key.pem", "-out", "x.csr"]);
        untouched(&["smbclient", "-L", "h", "-U", "bob"]);
        untouched(&["git", "config", "--global", "user.name", "Bob"]);
        untouched(&["git", "config", "credential.helper", "store"]);
        untouched(&["aws", "configure", "get", "region"]);
        untouched(&["npm", "config", "set", "registry", "https://r.example/"]);
        untouched(&["grep", "-rn", "api_key", "src/"]);
    }

    #[test]
    fn curl_user_password() {
        check(
            &["curl", "-u", "alice:pw", "https://x"],
            &["curl", "-u", "alice:[REDACTED]", "https://x"],
            1,
        );
        check(
            &["curl", "--user=alice:pw", "u"],
            &["curl", "--user=alice:[REDACTED]", "u"],
            1,
        );
        check(
            &["curl", "-ualice:pw", "u"],
            &["curl", "-ualice:[REDACTED]", "u"],
            1,
        );
        untouched(&["curl", "-u", "alice", "https://x"]);
        untouched(&["ps", "-u", "root:wheel"]);
        // In a cluster of flags.
        check(
            &["curl", "-su", "admin:pw", "u"],
            &["curl", "-su", "admin:[REDACTED]", "u"],
            1,
        );
        check(
            &["curl", "-sSuadmin:pw", "u"],
            &["curl", "-sSuadmin:[REDACTED]", "u"],
            1,
        );
        untouched(&["curl", "-sS", "https://x"]);
        // Cookies and bearer tokens.
        check(
            &["curl", "-b", "session=abc123", "u"],
            &["curl", "-b", "[REDACTED]", "u"],
            1,
        );
        check(
            &["curl", "--oauth2-bearer", "tok123", "u"],
            &["curl", "--oauth2-bearer", "[REDACTED]", "u"],
            1,
        );
    }

    #[test]
    fn authorization_headers() {
        check(
            &["curl", "-H", "Authorization: Bearer abc", "https://x"],
            &["curl", "-H", "Authorization: [REDACTED]", "https://x"],
            1,
        );
        check(
            &["x", "Proxy-Authorization: Basic dXNlcjpwdw=="],
            &["x", "Proxy-Authorization: [REDACTED]"],
            1,
        );
        check(
            &["curl", "--header=authorization: token t"],
            &["curl", "--header=authorization: [REDACTED]"],
            1,
        );
        check(
            &[
                "git",
                "-c",
                "http.extraHeader=Authorization: Basic Zm9v",
                "fetch",
            ],
            &[
                "git",
                "-c",
                "http.extraHeader=Authorization: [REDACTED]",
                "fetch",
            ],
            1,
        );
        check(
            &["curl", "-H", "X-Api-Key: k123", "u"],
            &["curl", "-H", "X-Api-Key: [REDACTED]", "u"],
            1,
        );
        check(
            &["curl", "-H", "PRIVATE-TOKEN: abc", "u"],
            &["curl", "-H", "PRIVATE-TOKEN: [REDACTED]", "u"],
            1,
        );
        // Look-alikes.
        untouched(&[
            "curl",
            "-H",
            "Content-Type: application/json",
            "-H",
            "Accept: */*",
            "u",
        ]);
        untouched(&["curl", "-H", "X-Request-Id: 42", "u"]);
        untouched(&["curl", "-H", "X-Auth-User: bob", "u"]);
        untouched(&["git", "commit", "-m", "Token: refresh handling"]);
        untouched(&["echo", "authorization"]);
    }

    #[test]
    fn bearer() {
        check(&["x", "Bearer abc123XYZ"], &["x", "Bearer [REDACTED]"], 1);
        check(
            &["x", "--data", "use Bearer eyJhbGciOi.x"],
            &["x", "--data", "use Bearer [REDACTED]"],
            1,
        );
        untouched(&["git", "commit", "-m", "Bearer tokens are now refreshed"]);
        untouched(&["git", "commit", "-m", "Support Bearer authentication"]);
    }

    #[test]
    fn assignments() {
        check(
            &["env", "API_TOKEN=abc", "cmd"],
            &["env", "API_TOKEN=[REDACTED]", "cmd"],
            1,
        );
        check(
            &["docker", "run", "-e", "DB_PASSWORD=pw", "img"],
            &["docker", "run", "-e", "DB_PASSWORD=[REDACTED]", "img"],
            1,
        );
        check(
            &["x", "--env=AWS_SECRET_ACCESS_KEY=abc"],
            &["x", "--env=AWS_SECRET_ACCESS_KEY=[REDACTED]"],
            1,
        );
        check(
            &["mvn", "-Dgpg.passphrase=pp", "deploy"],
            &["mvn", "-Dgpg.passphrase=[REDACTED]", "deploy"],
            1,
        );
        check(
            &["helm", "--set", "auth.rootPassword=pw"],
            &["helm", "--set", "auth.rootPassword=[REDACTED]"],
            1,
        );
        check(&["x", "secret_key=abc"], &["x", "secret_key=[REDACTED]"], 1);
        check(&["x", "DB_PWD=a b c"], &["x", "DB_PWD=[REDACTED]"], 1);
        check(
            &["x", "GOOGLE_CREDENTIALS={}"],
            &["x", "GOOGLE_CREDENTIALS=[REDACTED]"],
            1,
        );
        check(&["x", "MY_AUTH=u:p"], &["x", "MY_AUTH=[REDACTED]"], 1);
        check(
            &[
                "kubectl",
                "create",
                "secret",
                "generic",
                "s",
                "--from-literal=password=pw",
            ],
            &[
                "kubectl",
                "create",
                "secret",
                "generic",
                "s",
                "--from-literal=password=[REDACTED]",
            ],
            1,
        );
        check(
            &["curl", "-d", "user=bob&password=pw&x=1"],
            &["curl", "-d", "user=bob&password=[REDACTED]&x=1"],
            1,
        );
        // Look-alikes.
        untouched(&["docker", "run", "-e", "FOO=bar", "img"]);
        untouched(&["env", "PWD=/tmp", "OLDPWD=/", "cmd"]);
        untouched(&[
            "env",
            "SSH_AUTH_SOCK=/run/agent",
            "GIT_AUTHOR_NAME=Alice",
            "git",
            "commit",
        ]);
        untouched(&[
            "env",
            "TOKENIZERS_PARALLELISM=false",
            "KEYMAP=us",
            "python3",
        ]);
        untouched(&[
            "env",
            "GITHUB_TOKEN_FILE=/run/t",
            "AWS_ACCESS_KEY_ID=x",
            "cmd",
        ]);
        untouched(&["git", "-c", "credential.helper=store", "push"]);
        untouched(&["make", "CFLAGS=-O2", "PREFIX=/usr"]);
        untouched(&["x", "SSH_PUBLIC_KEY=ssh-ed25519 AAAA"]);
        untouched(&["x", "API_TOKEN="]);
        untouched(&["x", "--keyword=a=b"]);
    }

    #[test]
    fn token_shapes() {
        let ghp = format!("ghp_{}", "a1B2".repeat(9));
        let pat = format!("github_pat_11ABCDEFG0{}", "x".repeat(60));
        let aws = "AKIAIOSFODNN7EXAMPLE";
        let slack = "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx";
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
        let openai = format!("sk-proj-{}", "Ab3dEf6hIj".repeat(5));
        let legacy = format!("sk-{}", "T3BlbkFJ".repeat(6));
        let ant = format!("sk-ant-api03-{}AA", "abcDEF123_-".repeat(8));
        let glpat = "glpat-xxxxxxxxxxxxxxxxxxxx";
        for t in [&ghp, &pat, aws, slack, jwt, &openai, &legacy, &ant, glpat] {
            assert!(looks_like_token(t), "{t}");
            check(&["x", t], &["x", "[REDACTED]"], 1);
            let s = format!("echo {t} done");
            check(&["sh", "-c", &s], &["sh", "-c", "echo [REDACTED] done"], 1);
            let s = format!("token:{t},");
            check(&["x", &s], &["x", "token:[REDACTED],"], 1);
        }
        // Look-alikes.
        for s in [
            "ghp_short",
            "AKIAlowercase0000000",
            "AKIAIOSFODNN7EXAMPLEX",
            "xoxb-",
            "eyJhbGciOiJIUzI1NiJ9",
            "sk-fix-issue-in-parser-module",
            "sk-Fix-Issue-In-Parser-Module-Now",
            "sk-learn",
            "scikit-learn",
            "task-abcdefghijklmnopqrstuvwxyz0123",
            "glpat-short",
            "0123456789abcdef0123456789abcdef01234567",
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        ] {
            assert!(!looks_like_token(s), "{s}");
            untouched(&["x", s]);
        }
    }

    #[test]
    fn private_key_block() {
        let key = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n";
        check(
            &["printf", key],
            &[
                "printf",
                "-----BEGIN OPENSSH PRIVATE KEY-----[REDACTED]-----END OPENSSH PRIVATE KEY-----\n",
            ],
            1,
        );
        assert!(looks_like_token(key));
        // Cut short: redacted to the end.
        check(
            &["x", "-----BEGIN RSA PRIVATE KEY-----\nMIIEow"],
            &["x", "-----BEGIN RSA PRIVATE KEY-----[REDACTED]"],
            1,
        );
        untouched(&[
            "x",
            "-----BEGIN PUBLIC KEY-----\nMIIBIjAN\n-----END PUBLIC KEY-----",
        ]);
        untouched(&[
            "x",
            "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
        ]);
    }

    #[test]
    fn url_userinfo() {
        check(
            &["git", "clone", "https://user:pass@host/r.git"],
            &["git", "clone", "https://user:[REDACTED]@host/r.git"],
            1,
        );
        check(
            &["psql", "postgres://app:p@ss@db:5432/x"],
            &["psql", "postgres://app:[REDACTED]@db:5432/x"],
            1,
        );
        check(
            &["redis-cli", "-u", "redis://:pw@h"],
            &["redis-cli", "-u", "redis://:[REDACTED]@h"],
            1,
        );
        check(
            &["curl", "https://x/api?api_key=abc&q=1"],
            &["curl", "https://x/api?api_key=[REDACTED]&q=1"],
            1,
        );
        untouched(&["git", "clone", "git@github.com:org/repo.git"]);
        untouched(&["git", "clone", "ssh://git@host:22/r.git"]);
        untouched(&["curl", "https://host:8080/path@x?q=1&page=2"]);
        untouched(&["curl", "https://user@host/"]);
    }

    #[test]
    fn json_bodies() {
        check(
            &["curl", "-d", r#"{"user":"bob","password":"pw","n":1}"#],
            &[
                "curl",
                "-d",
                r#"{"user":"bob","password":"[REDACTED]","n":1}"#,
            ],
            1,
        );
        check(
            &["x", r#"{"apiKey": "k"}"#],
            &["x", r#"{"apiKey": "[REDACTED]"}"#],
            1,
        );
        untouched(&["x", r#"{"keyword":"v","monkey":"x","token_count":"3"}"#]);
    }

    #[test]
    fn shell_scripts() {
        check(
            &[
                "bash",
                "-c",
                "mysql -uroot -phunter2 db < dump.sql && echo ok",
            ],
            &[
                "bash",
                "-c",
                "mysql -uroot -p[REDACTED] db < dump.sql && echo ok",
            ],
            1,
        );
        check(
            &[
                "/bin/bash",
                "-c",
                "-l",
                "curl -H 'Authorization: Bearer abc' https://x",
            ],
            &[
                "/bin/bash",
                "-c",
                "-l",
                "curl -H 'Authorization: [REDACTED]' https://x",
            ],
            1,
        );
        check(
            &[
                "sh",
                "-c",
                "export API_TOKEN=abc; tool --password \"two words\" x",
            ],
            &[
                "sh",
                "-c",
                "export API_TOKEN=[REDACTED]; tool --password [REDACTED] x",
            ],
            2,
        );
        check(
            &["bash", "-lc", "eval 'sshpass -p pw ssh host'"],
            &["bash", "-lc", "eval 'sshpass -p [REDACTED] ssh host'"],
            1,
        );
        check(
            &["sh", "-c", "bash -c \"redis-cli -a 'p w' ping\""],
            &["sh", "-c", "bash -c 'redis-cli -a [REDACTED] ping'"],
            1,
        );
        // A variable holds no secret itself.
        untouched(&["sh", "-c", "tool --password \"$PW\" && curl -u \"u:$P\" x"]);
        untouched(&[
            "bash",
            "-c",
            "git log --pretty=format:%H | head -n 3; ls -la # key=x",
        ]);
        // Only scripts are read as commands: a message that mentions an option is a message.
        untouched(&["git", "commit", "-m", "add --token flag support"]);
        untouched(&["echo", "sshpass -p is deprecated"]);
    }

    #[test]
    fn ordinary_command_lines_are_untouched() {
        for cmd in [
            &["git", "commit", "-m", "fix leap year"][..],
            &["git", "log", "--pretty=format:%H"],
            &["git", "log", "--author=bob", "--grep=password reset"],
            &["git", "show", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4"],
            &["ls", "-la"],
            &["python3", "-c", "print(1)"],
            &[
                "python3",
                "-c",
                "import os; key = os.urandom(16); print(len(key))",
            ],
            &["make", "-j4"],
            &["cargo", "build", "--release"],
            &["cargo", "test", "--", "--nocapture", "token"],
            &["pip", "install", "requests==2.31"],
            &["pip", "install", "scikit-learn", "tokenizers"],
            &[
                "docker",
                "run",
                "-e",
                "FOO=bar",
                "--rm",
                "-it",
                "ubuntu:24.04",
                "bash",
            ],
            &["ssh-keygen", "-t", "ed25519", "-f", "key"],
            &["ssh", "-i", "/home/u/.ssh/id_ed25519", "user@host"],
            &["gpg", "--recv-keys", "0xABCDEF0123456789"],
            &["openssl", "genrsa", "-out", "key.pem", "2048"],
            &["/usr/bin/node", "/app/server.js", "--port", "3000"],
            &["grep", "-rn", "password", "src/"],
            &["rg", "-i", "api_key", "."],
            &[
                "find",
                ".",
                "-name",
                "*.key",
                "-exec",
                "sh",
                "-c",
                "ls -l \"$1\"",
                "_",
                "{}",
                ";",
            ],
            &["tar", "-xzf", "secrets-backup.tar.gz"],
            &["kubectl", "get", "secret", "db-password", "-o", "yaml"],
            &["aws", "s3", "ls", "s3://bucket/key/path"],
            &["sed", "-i", "s/token/tok/g", "f.txt"],
            &["awk", "-F=", "{print $2}", "config.ini"],
            &["echo", "keys are parsed: key value"],
            &["bash", "-c", "cd /work && cargo test 2>&1 | tail -n 20"],
            &["/bin/sh", "-c", "npm ci && npm test"],
            &["curl", "-fsSL", "https://example.com/install.sh"],
            &["wget", "-q", "-O", "-", "https://example.com/a?x=1&y=2"],
            &["jq", ".token", "resp.json"],
            &["htop"],
            &[],
        ] {
            untouched(cmd);
        }
    }

    #[test]
    fn each_value_counts_once() {
        // The Authorization rule takes the Bearer token along; the URL password is one value.
        check(
            &[
                "curl",
                "-H",
                "Authorization: Bearer ghp_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            ],
            &["curl", "-H", "Authorization: [REDACTED]"],
            1,
        );
        check(
            &[
                "git",
                "push",
                "https://x:ghp_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa@github.com/o/r",
            ],
            &["git", "push", "https://x:[REDACTED]@github.com/o/r"],
            1,
        );
        check(
            &["x", "--token=ghp_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"],
            &["x", "--token=[REDACTED]"],
            1,
        );
        // Redacting twice changes nothing more.
        let (once, n) = redact_argv(&argv(&[
            "sh",
            "-c",
            "curl -u a:b -H 'Authorization: x' https://u:p@h?token=t",
        ]));
        assert_eq!(n, 4, "{once:?}");
        let (twice, m) = redact_argv(&once);
        assert_eq!((twice, m), (once, 0));
    }

    #[test]
    fn shell_words() {
        let cmds = shell_commands("a 'b c' \"d\\\"e\" f\\ g; h|i # j\nk");
        let texts: Vec<Vec<&str>> = cmds
            .iter()
            .map(|c| c.iter().map(|w| w.text.as_str()).collect())
            .collect();
        assert_eq!(
            texts,
            vec![
                vec!["a", "b c", "d\"e", "f g"],
                vec!["h"],
                vec!["i"],
                vec!["k"]
            ]
        );
        let s = "x 'b c' y";
        let w = &shell_commands(s)[0][1];
        assert_eq!(&s[w.start..w.end], "'b c'");
    }
}
