//! Secrets never leave: argv is redacted before it is logged or reported.
//!
//! Redaction is exact: only the bytes of a secret are replaced with [`REDACTED`]; everything
//! around it (the option or variable name, quotes, escapes, other words) stays byte for byte
//! as it was in the argument. Inside a shell script a secret is found in the words the shell
//! would make, and replaced where those words' bytes are in the script: `'"'"'Authorization:
//! Bearer sk-…'"'"'` becomes `'"'"'Authorization: Bearer [REDACTED]'"'"'`. A secret written in
//! pieces by quoting (`'ab'"cd"`) keeps the quotes: the first piece becomes [`REDACTED`], the
//! others empty (`'[REDACTED]'""`). Each secret counts once in `redactions`, however many rules
//! found it.
//!
//! What is a secret:
//!
//! 1. The value of a secret-named option, `--password=…` or `--password …` (also `--pw`,
//!    `--pwd`, `--pass`, `--token`, `--secret`, `--api-key`, `--apikey`, `--access-key`,
//!    `--client-secret`, `--auth`, `--authorization`, names ending in `-password`, `-pass`,
//!    `-pw`, `-token`, `-secret`, `-api-key`, …, and single-dash ones of three letters or more
//!    such as `-storepass`, `-passin`); flags that take no value (`--no-password`,
//!    `--password-stdin`, `--ask-pass`, `--with-token`) are not secret options. Also written
//!    inside code (`python -c "…'--api-key=VALUE'…"`: `--name=VALUE` anywhere in any
//!    argument) and as a list (`['--api-key', 'VALUE']`).
//! 2. The password options of particular programs (`tools::RULES`): `-pSECRET` after mysql,
//!    mysqldump, mariadb and friends (not `-p SECRET`, which those read as a database name),
//!    `sshpass -p`, `redis-cli -a`, `mongosh -p`, `cqlsh -p`, `sqlcmd -P`, `ipmitool -P`,
//!    `ldapsearch -w`, `zip -P`, `7z -pSECRET`, `openssl -k`/`-K`, `ssh-keygen -P`/`-N`,
//!    `plink -pw`, `useradd -p`, `docker|podman|helm … login -p`, `gh secret set --body`, the
//!    password of `curl -u user:password`, `http -a user:password`, `lftp -u user,password` and
//!    `smbclient -U user%password`, and the last argument of `htpasswd -b`.
//! 3. Programs not known to these tables (neither in `tools::RULES` nor in
//!    `tools::NO_PASSWORD`, the programs whose `-p`/`-P`/`-u` are flags, ports, pids, uid:gid):
//!    the password of `-u user:password` / `--user user:password` (not a numeric `uid:gid`),
//!    and the value of `-p VALUE`, `-P VALUE` or `-pw VALUE` when it reads as a password
//!    (`names::looks_like_password`: 6 to 128 bytes, no white space or `/`, three of the
//!    four kinds lower case, upper case, digit, other). `-p` and `-P` are flags for most
//!    programs (`mkdir -p`, `cp -P`, `ls -p`), so a value that reads as a path, a port, a
//!    count or a plain word is left as it is.
//! 4. `config`/`set` followed by a secret-named setting and its value: `aws configure set
//!    aws_secret_access_key V`, `git config github.token V`, `npm config set _authToken V`.
//! 5. `Authorization:` and `Proxy-Authorization:` header values anywhere in an argument, past
//!    the scheme (`Authorization: Bearer [REDACTED]`, `Basic [REDACTED]`, `token [REDACTED]`);
//!    other secret-named headers (`X-Api-Key: …`, `PRIVATE-TOKEN: …`, `Cookie: …`) given to
//!    `-H`/`--header`; and the credential after `Bearer`.
//! 6. Named values (`names::is_secret_name`: a name one of whose words is token, secret,
//!    password, passwd, pwd, pw, pass, passphrase, credential(s), creds, auth, cookie, or `key`
//!    after api, secret, private, access, …): `NAME=VALUE` as an argument (also after
//!    `--env=`, `-D`, `--set`), in query strings and form data (`?api_key=…&`), as key and
//!    quoted value in JSON, Python dicts and keyword arguments, JavaScript and YAML flow
//!    (`"password": "…"`, `'Authorization': 'token …'`, `api_key='…'`, `token => "…"`), and as
//!    a `name: value` or `name = value` line of a multi-line text (YAML, INI, a here-document).
//!    Names that only hold a place (`SSH_AUTH_SOCK`, `*_FILE`, `*_PATH`, `*_ID`, `PWD`,
//!    `credential.helper`, public keys), names known to be harmless (`names::HARMLESS`: ssh's
//!    `StrictHostKeyChecking`, `BatchMode`, `ConnectTimeout`, `PasswordAuthentication`, …,
//!    git's `credential.helper`, `user.signingKey`, …, curl's `--key`, `--pubkey`, …), and
//!    values that are no secret whatever the name (`true`, `no`, `null`, `{tok}`, `${TOKEN}`,
//!    `{{ vault_pw }}`, `%s`, `<token>`) are left alone.
//! 7. Values shaped like well-known tokens anywhere in an argument (`text::TOKENS`: GitHub
//!    `ghp_`/`github_pat_`, AWS access key ids `AKIA`/`ASIA`, Slack `xox?-`, JWTs,
//!    OpenAI/Anthropic `sk-…`, GitLab `glpat-`, Google `AIza…`, Stripe, npm, Hugging Face,
//!    PyPI), the body of a `-----BEGIN … PRIVATE KEY-----` block (the BEGIN and END lines
//!    stay), and the password of a URL's userinfo (`https://user:[REDACTED]@host`).
//! 8. AWS secret access keys standing alone: a run of exactly 40 of `A-Za-z0-9/+` (not part of
//!    a longer base64 run, not followed by `=` padding) with upper case, lower case and a
//!    digit (so no hex digest: a git commit id is lower case), that either sits in an argv
//!    holding an AWS access key id, or looks random: at least 4.2 bits of entropy per
//!    character and at least 16 changes of character kind between neighbours (words,
//!    CamelCase names and paths have fewer; 99.7% of random keys pass).
//! 9. All of the above inside shell scripts given to `sh -c`/`bash -lc`/`su -c`/`eval`,
//!    including command substitutions (`$(…)`, backticks, also inside double quotes) and
//!    here-documents: the script is split into words and commands as the shell does (quotes,
//!    backslashes, `;` `&` `|` `(` `)` newlines, redirections), each command is redacted as an
//!    argv, and shell expansions (`$TOKEN`, `"$PW"`) are left alone: they hold no secret
//!    themselves.
//!
//! There is no rule by entropy alone for other shapes: a bare random-looking positional
//! argument (a commit hash, a checksum, an id) is left as it is.

mod command;
mod names;
mod shell;
mod text;
mod tools;

#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::ops::Range;

pub const REDACTED: &str = "[REDACTED]";

/// How deep scripts inside scripts (`bash -c "sh -c '…'"`) are opened up.
const MAX_SCRIPT_DEPTH: usize = 4;

/// Returns argv with secret values replaced, and how many secrets were replaced.
pub fn redact_argv(argv: &[String]) -> (Vec<String>, usize) {
    until_stable(argv, false)
}

/// [`redact_argv`] for an argv the kernel cut at its limit: the last argument ends where the cut
/// fell, so a token or key there is only its beginning, which the whole shapes do not match.
/// Such a beginning is redacted to the end.
pub fn redact_cut_argv(argv: &[String]) -> (Vec<String>, usize) {
    until_stable(argv, true)
}

/// Passes over the argv until one finds nothing: a marker put in place of a secret can make
/// a word boundary the rules see (`…KEY--token=x` → `[REDACTED]--token=x`), so the output is
/// redacted again, and redacting the result once more finds nothing. Mostly one pass: the
/// first that finds nothing ends it. Each pass that finds something turns characters that
/// are not a marker into markers, so it ends; `MAX_PASSES` bounds it all the same.
fn until_stable(argv: &[String], cut: bool) -> (Vec<String>, usize) {
    const MAX_PASSES: usize = 8;
    let (mut out, mut total) = pass(argv, cut);
    for _ in 1..MAX_PASSES {
        if total == 0 {
            break;
        }
        let (again, n) = pass(&out, cut);
        if n == 0 {
            break;
        }
        (out, total) = (again, total + n);
    }
    (out, total)
}

fn pass(argv: &[String], cut: bool) -> (Vec<String>, usize) {
    let mut found = Found::new(argv);
    command::argv(argv, &mut found);
    if cut
        && let Some(last) = argv.len().checked_sub(1)
        && let Some(at) = text::cut_secret_start(&argv[last])
        && redactable(&argv[last][at..], 0)
    {
        found.add_arg(last, at..argv[last].len());
    }
    found.apply(argv)
}

/// A string the rules read, and where its bytes are in the argument it came from.
pub(super) struct Word<'a> {
    pub text: Cow<'a, str>,
    origin: Origin<'a>,
}

enum Origin<'a> {
    /// The text is argument `n` itself.
    Arg(usize),
    /// A word the shell makes of part of `parent`'s text: for each of its characters, its
    /// offset in `text` and the bytes of `parent.text` it was written as (with its quotes'
    /// and escapes' bytes left out, or for an escape, included).
    Shell {
        parent: &'a Word<'a>,
        map: Vec<(usize, Range<usize>)>,
    },
}

impl<'a> Word<'a> {
    pub fn arg(n: usize, text: &'a str) -> Word<'a> {
        Word {
            text: Cow::Borrowed(text),
            origin: Origin::Arg(n),
        }
    }

    /// A word of `parent`'s text; `map` as in [`Origin::Shell`].
    pub fn shell(parent: &'a Word<'a>, text: String, map: Vec<(usize, Range<usize>)>) -> Self {
        Word {
            text: Cow::Owned(text),
            origin: Origin::Shell { parent, map },
        }
    }

    /// Which argument `range` of the text is in, and where: the pieces of that argument its
    /// characters were written as.
    fn locate(&self, range: Range<usize>) -> (usize, Vec<Range<usize>>) {
        match &self.origin {
            Origin::Arg(n) => (*n, vec![range]),
            Origin::Shell { parent, map } => {
                let first = map.partition_point(|(at, _)| *at < range.start);
                let in_parent = merge(
                    map[first..]
                        .iter()
                        .take_while(|(at, _)| *at < range.end)
                        .map(|(_, r)| r.clone()),
                );
                let mut arg = 0;
                let mut pieces = Vec::new();
                for r in in_parent {
                    let (n, p) = parent.locate(r);
                    arg = n;
                    pieces.extend(p);
                }
                (arg, merge(pieces))
            }
        }
    }
}

/// Ranges in order, those that touch joined.
fn merge(ranges: impl IntoIterator<Item = Range<usize>>) -> Vec<Range<usize>> {
    let mut out: Vec<Range<usize>> = Vec::new();
    for r in ranges {
        if r.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}

/// The secrets found in one argv so far.
pub(super) struct Found {
    /// Each secret: its argument and the pieces of it that are the secret's bytes.
    secrets: Vec<(usize, Vec<Range<usize>>)>,
    /// The argv holds an AWS access key id somewhere (rule 8).
    pub aws_key_id: bool,
}

impl Found {
    fn new(argv: &[String]) -> Found {
        Found {
            secrets: Vec::new(),
            aws_key_id: argv.iter().any(|a| text::has_aws_key_id(a)),
        }
    }

    /// Records that `range` of `word`'s text is a secret.
    pub fn add(&mut self, word: &Word, range: Range<usize>) {
        if range.is_empty() {
            return;
        }
        let (arg, pieces) = word.locate(range);
        if !pieces.is_empty() {
            self.secrets.push((arg, pieces));
        }
    }

    fn add_arg(&mut self, arg: usize, range: Range<usize>) {
        if !range.is_empty() {
            self.secrets.push((arg, vec![range]));
        }
    }

    /// The argv with every secret replaced, and how many there were: secrets whose pieces
    /// overlap or touch are one.
    fn apply(self, argv: &[String]) -> (Vec<String>, usize) {
        let mut count = 0;
        let out = argv
            .iter()
            .enumerate()
            .map(|(n, arg)| {
                let secrets: Vec<&Vec<Range<usize>>> = self
                    .secrets
                    .iter()
                    .filter(|(a, _)| *a == n)
                    .map(|(_, p)| p)
                    .collect();
                if secrets.is_empty() {
                    return arg.clone();
                }
                let (s, c) = replace(arg, &secrets);
                count += c;
                s
            })
            .collect();
        (out, count)
    }
}

/// Replaces the secrets' pieces in `arg`: the first piece of each with [`REDACTED`], its other
/// pieces with nothing. Returns the text and the number of secrets.
fn replace(arg: &str, secrets: &[&Vec<Range<usize>>]) -> (String, usize) {
    // Join secrets whose pieces overlap or touch (union-find over the pieces in order).
    let mut group: Vec<usize> = (0..secrets.len()).collect();
    fn root(group: &mut [usize], mut i: usize) -> usize {
        while group[i] != i {
            group[i] = group[group[i]];
            i = group[i];
        }
        i
    }
    let mut pieces: Vec<(Range<usize>, usize)> = secrets
        .iter()
        .enumerate()
        .flat_map(|(i, p)| p.iter().map(move |r| (r.clone(), i)))
        .collect();
    pieces.sort_by_key(|(r, _)| (r.start, r.end));
    let mut reach: Option<(usize, usize)> = None;
    for (r, i) in &pieces {
        match reach {
            Some((end, j)) if r.start <= end => {
                let (a, b) = (root(&mut group, *i), root(&mut group, j));
                group[a] = b;
                reach = Some((end.max(r.end), j));
            }
            _ => reach = Some((r.end, *i)),
        }
    }
    // Each group's pieces, merged; the first of each group gets the marker.
    let mut by_group: std::collections::BTreeMap<usize, Vec<Range<usize>>> = Default::default();
    for (r, i) in pieces {
        by_group.entry(root(&mut group, i)).or_default().push(r);
    }
    let mut cuts: Vec<(Range<usize>, bool)> = Vec::new();
    for ranges in by_group.values() {
        for (k, r) in merge(ranges.iter().cloned()).into_iter().enumerate() {
            cuts.push((r, k == 0));
        }
    }
    cuts.sort_by_key(|(r, _)| r.start);
    let mut out = String::with_capacity(arg.len());
    let mut last = 0;
    for (r, marker) in cuts {
        // Pieces are on character boundaries of the argument: they come from a word's
        // characters or from matches in the argument's own text.
        let (start, end) = (r.start.max(last), r.end.min(arg.len()));
        if start >= end || !arg.is_char_boundary(start) || !arg.is_char_boundary(end) {
            continue;
        }
        out.push_str(&arg[last..start]);
        if marker {
            out.push_str(REDACTED);
        }
        last = end;
    }
    out.push_str(&arg[last..]);
    (out, by_group.len())
}

/// A value worth replacing: not empty, not already replaced (nor a piece of a marker a rule's
/// pattern cut), and in a script (depth > 0) not a shell expansion such as `$TOKEN`, which
/// holds no secret itself.
pub(super) fn redactable(value: &str, depth: usize) -> bool {
    let v = value.trim();
    let expansion = depth > 0 && (v.starts_with('$') || v.starts_with('`'));
    let marker = v.contains(&REDACTED[..REDACTED.len() - 1]) || v.contains(&REDACTED[1..]);
    !v.is_empty() && !marker && !expansion
}
