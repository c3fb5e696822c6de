//! The rules that look inside any text, wherever it is: token shapes, private key blocks,
//! `Authorization:` values, URL passwords, named values in code, data and config (rules 1, 5,
//! 6, 7 and 8 of the module's documentation).
use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

use super::names::{
    is_auth_scheme, is_authorization, is_placeholder, is_secret_name, is_secret_option,
};
use super::{Found, Word, redactable};

fn re(s: &str) -> Regex {
    Regex::new(s).expect("a valid pattern")
}

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

/// Well-known token shapes (rule 7).
pub static TOKENS: LazyLock<Vec<(Regex, TokenCheck)>> = LazyLock::new(|| {
    let t = |s: &str, ok: TokenCheck| (re(s), ok);
    vec![
        // GitHub
        t(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,255}", any_token),
        t(r"\bgithub_pat_[A-Za-z0-9_]{22,255}", any_token),
        // AWS access key ids
        t(AWS_KEY_ID, any_token),
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

const AWS_KEY_ID: &str = r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b";
static AWS_KEY_ID_RE: LazyLock<Regex> = LazyLock::new(|| re(AWS_KEY_ID));

pub fn has_aws_key_id(s: &str) -> bool {
    (s.contains("AKIA") || s.contains("ASIA")) && AWS_KEY_ID_RE.is_match(s)
}

static PEM: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?s)-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(.*?)(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\z)")
});
static AUTHORIZATION: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)\b(?:proxy-)?authorization[ \t]*:[ \t]*([^'\x22`\r\n]*)"));
/// In a script's own text, a header's value ends where the shell ends a word list too.
static AUTHORIZATION_IN_SCRIPT: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)\b(?:proxy-)?authorization[ \t]*:[ \t]*([^'\x22`\r\n;&|<>()\\]*)"));
static BEARER: LazyLock<Regex> = LazyLock::new(|| re(r"\bBearer[ \t]+([A-Za-z0-9\-._~+/]+=*)"));
static URL_USERINFO: LazyLock<Regex> =
    LazyLock::new(|| re(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@'\x22?#]*:([^\s'\x22/?#]+)@"));
static QUERY: LazyLock<Regex> =
    LazyLock::new(|| re(r"[?&]([A-Za-z_][A-Za-z0-9_.\-\[\]]*)=([^&#\s'\x22]+)"));
/// A key (quoted or bare), `:` `=` or `=>`, and a quoted value: JSON, Python dicts and
/// keyword arguments, JavaScript objects, YAML flow, Ruby hashes, shell assignments in a
/// here-document. Groups 1–3: the key; 4 and 5: the value.
static KEY_VALUE: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r#"(?:"([A-Za-z_][\w.-]*)"|'([A-Za-z_][\w.-]*)'|\b([A-Za-z_][\w.-]*))\]?"#,
        r#"[ \t]*(?::|=>|=)[ \t]*[rRbBuUfF]{0,2}"#,
        r#"(?:"((?:[^"\\\n]|\\.)*)"|'((?:[^'\\\n]|\\.)*)')"#,
    ))
});
/// `name: value` or `name = value` alone on a line, unquoted (YAML, INI, env files).
static LINE_VALUE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?m)^[ \t]*(?:-[ \t]+|export[ \t]+)?([A-Za-z_][\w.-]*)[ \t]*[:=][ \t]*([^\s'\x22#][^\s]*)[ \t]*\r?$",
    )
});
/// `--name=VALUE` inside a longer text (code): group 1 the option, 2 the value.
static OPTION_IN_TEXT: LazyLock<Regex> = LazyLock::new(|| {
    re(r#"(?:^|[^A-Za-z0-9_-])(--?[A-Za-z][A-Za-z0-9_-]*)=([^\s'"`\\,;)\]}&|<>]+)"#)
});
/// `'--name', 'VALUE'` in a list: group 1 the option, 2 and 3 the value.
static OPTION_IN_LIST: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r#"["'](--?[A-Za-z][A-Za-z0-9_-]*)["'][ \t]*,[ \t]*[rRbBuUfF]{0,2}"#,
        r#"(?:"((?:[^"\\\n]|\\.)*)"|'((?:[^'\\\n]|\\.)*)')"#,
    ))
});

/// A Bearer credential rather than a word after "Bearer" in prose ("Bearer tokens").
fn bearer_token(t: &str) -> bool {
    let plain_word = {
        let mut cs = t.chars();
        cs.next().is_some_and(|c| c.is_ascii_alphabetic()) && cs.all(|c| c.is_ascii_lowercase())
    };
    !plain_word || t.len() >= 24
}

/// `range` of `text` without the white space at its ends.
fn trimmed(text: &str, range: Range<usize>) -> Range<usize> {
    let s = &text[range.clone()];
    let start = range.start + (s.len() - s.trim_start().len());
    let end = range.end - (s.len() - s.trim_end().len());
    start..end.max(start)
}

/// The credential of an `Authorization` value (`range` of `text`): past its scheme when it
/// has one; `None` when it is only a scheme.
fn credential(text: &str, range: Range<usize>) -> Option<Range<usize>> {
    let r = trimmed(text, range);
    let v = &text[r.clone()];
    match v.find([' ', '\t']) {
        Some(sp)
            if v[..sp]
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)) =>
        {
            Some(trimmed(text, r.start + sp..r.end))
        }
        None if is_auth_scheme(v) => None,
        _ => Some(r),
    }
}

/// A value that a name makes a secret, unless it holds none.
fn named_value(value: &str, depth: usize) -> bool {
    redactable(value, depth) && !is_placeholder(value)
}

/// Applies every rule of this file to `word`; `script`: the word is a shell script's source.
pub fn scan(word: &Word, depth: usize, script: bool, found: &mut Found) {
    let t: &str = &word.text;
    let near_key_id = found.aws_key_id;
    let mut add = |r: Range<usize>| found.add(word, r);
    if t.contains("PRIVATE KEY-----") {
        for c in PEM.captures_iter(t) {
            let body = c.get(1).expect("group 1").range();
            let body = trim_escaped_newlines(t, trimmed(t, body));
            if redactable(&t[body.clone()], depth) {
                add(body);
            }
        }
    }
    let authorization = if script {
        &*AUTHORIZATION_IN_SCRIPT
    } else {
        &*AUTHORIZATION
    };
    for c in authorization.captures_iter(t) {
        if let Some(r) = credential(t, c.get(1).expect("group 1").range())
            && named_value(&t[r.clone()], depth)
        {
            add(r);
        }
    }
    if t.contains("Bearer") {
        for c in BEARER.captures_iter(t) {
            let g = c.get(1).expect("group 1");
            if bearer_token(g.as_str()) && redactable(g.as_str(), depth) {
                add(g.range());
            }
        }
    }
    if t.contains("://") {
        for c in URL_USERINFO.captures_iter(t) {
            let g = c.get(1).expect("group 1");
            if redactable(g.as_str(), depth) {
                add(g.range());
            }
        }
    }
    if t.contains('=') {
        for c in QUERY.captures_iter(t) {
            let g = c.get(2).expect("group 2");
            if is_secret_name(&c[1]) && named_value(g.as_str(), depth) {
                add(g.range());
            }
        }
        for c in OPTION_IN_TEXT.captures_iter(t) {
            let (name, g) = (&c[1], c.get(2).expect("group 2"));
            if option_is_secret(name) && named_value(g.as_str(), depth) {
                add(g.range());
            }
        }
    }
    if t.contains(['"', '\'']) {
        for c in KEY_VALUE.captures_iter(t) {
            let key = [1, 2, 3].iter().find_map(|&i| c.get(i)).expect("a key");
            // A bare key just after a quote is inside a string (`'Authorization: ' + '…'`).
            if c.get(3).is_some() && t[..key.start()].ends_with(['\'', '"']) {
                continue;
            }
            let value = c.get(4).or_else(|| c.get(5)).expect("a value");
            let r = if is_authorization(key.as_str()) {
                credential(t, value.range())
            } else {
                Some(value.range())
            };
            if let Some(r) = r
                && is_secret_name(key.as_str())
                && named_value(&t[r.clone()], depth)
            {
                add(r);
            }
        }
        for c in OPTION_IN_LIST.captures_iter(t) {
            let value = c.get(2).or_else(|| c.get(3)).expect("a value");
            if option_is_secret(&c[1])
                && !value.as_str().starts_with('-')
                && named_value(value.as_str(), depth)
            {
                add(value.range());
            }
        }
    }
    // (A script's lines are commands; its here-documents are scanned as texts of their own.)
    if !script && t.contains('\n') {
        for c in LINE_VALUE.captures_iter(t) {
            let (key, g) = (c.get(1).expect("group 1"), c.get(2).expect("group 2"));
            let r = if is_authorization(key.as_str()) {
                credential(t, g.range())
            } else {
                Some(g.range())
            };
            if let Some(r) = r
                && is_secret_name(key.as_str())
                && named_value(&t[r.clone()], depth)
            {
                add(r);
            }
        }
    }
    for (re, ok) in TOKENS.iter() {
        for m in re.find_iter(t) {
            if ok(m.as_str()) {
                add(m.range());
            }
        }
    }
    for r in aws_secret_keys(t, near_key_id) {
        add(r);
    }
}

/// An option named like a secret's, by its name with dashes: single-dash names of three
/// letters or more (so `-p=…` is not one).
pub fn option_is_secret(opt: &str) -> bool {
    let name = opt.trim_start_matches('-');
    (opt.starts_with("--") || name.len() >= 3) && is_secret_option(name)
}

/// A private key's body without the literal `\n`s (a `printf` format's) at its ends.
fn trim_escaped_newlines(t: &str, mut r: Range<usize>) -> Range<usize> {
    while t[r.clone()].starts_with("\\n") {
        r.start += 2;
        r = trimmed(t, r);
    }
    while r.end >= r.start + 2 && t[r.clone()].ends_with("\\n") {
        r.end -= 2;
        r = trimmed(t, r);
    }
    r
}

fn base64ish(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'/' || b == b'+'
}

/// Rule 8: runs of exactly 40 base64 characters that are AWS secret access keys: with upper
/// case, lower case and a digit, and next to an AWS key id (`near_key_id`) or random-looking.
fn aws_secret_keys(t: &str, near_key_id: bool) -> Vec<Range<usize>> {
    let b = t.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if !base64ish(b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && base64ish(b[i]) {
            i += 1;
        }
        let run = &b[start..i];
        if run.len() != 40 || b.get(i) == Some(&b'=') {
            continue;
        }
        let has = |f: fn(&u8) -> bool| run.iter().any(f);
        if !(has(u8::is_ascii_uppercase) && has(u8::is_ascii_lowercase) && has(u8::is_ascii_digit))
        {
            continue;
        }
        if near_key_id || random_looking(run) {
            out.push(start..i);
        }
    }
    out
}

/// At least 4.2 bits of entropy per character, 16 changes of kind (lower, upper, digit,
/// other) between neighbours, and fewer than 28 characters in word-like runs (a letter and two
/// or more lower-case letters): random base64 has about 4.8 bits, 25 changes and 12 such
/// characters; CamelCase names and paths are mostly words.
fn random_looking(run: &[u8]) -> bool {
    let mut counts = [0u32; 256];
    for &c in run {
        counts[c as usize] += 1;
    }
    let n = run.len() as f64;
    let entropy: f64 = counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum();
    let kind = |c: u8| match c {
        b'a'..=b'z' => 0,
        b'A'..=b'Z' => 1,
        b'0'..=b'9' => 2,
        _ => 3,
    };
    let changes = run.windows(2).filter(|w| kind(w[0]) != kind(w[1])).count();
    let mut in_words = 0;
    let mut i = 0;
    while i < run.len() {
        let lower_from = |j: usize| {
            run[j..]
                .iter()
                .take_while(|c| c.is_ascii_lowercase())
                .count()
        };
        let len = if run[i].is_ascii_alphabetic() && i + 1 < run.len() {
            1 + lower_from(i + 1)
        } else {
            0
        };
        if len >= 3 {
            in_words += len;
            i += len;
        } else {
            i += 1;
        }
    }
    entropy >= 4.2 && changes >= 16 && in_words < 28
}

// An argv cut by the kernel's limit: the beginning of a secret at its end.

static CUT_TOKEN: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b(?:gh[pousr]_|github_pat_|AKIA|ASIA|xox[abposr]-|xapp-|eyJ|sk-|glpat-|AIza|[sr]k_(?:live|test)_|npm_|hf_|pypi-)[A-Za-z0-9_.-]*$",
    )
});
static CUT_USERINFO: LazyLock<Regex> =
    LazyLock::new(|| re(r"[A-Za-z][A-Za-z0-9+.-]*://[^/@\s:]*:([^/@\s]*)$"));
static CUT_JSON_SECRET: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"(?i)"[a-z_-]*(?:password|passwd|secret|token|api_?key|credential)[a-z_-]*"\s*:\s*"([^"]*)$"#,
    )
});
static CUT_PEM: LazyLock<Regex> = LazyLock::new(|| re(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----"));

/// Where a secret cut by the end of `s` starts: a token's known prefix running to the end, a
/// URL's password or a JSON secret's value running to the end, or a private key block with
/// no end line.
pub fn cut_secret_start(s: &str) -> Option<usize> {
    if let Some(m) = CUT_TOKEN.find(s) {
        return Some(m.start());
    }
    for re in [&*CUT_USERINFO, &*CUT_JSON_SECRET] {
        if let Some(value) = re.captures(s).and_then(|c| c.get(1)) {
            return Some(value.start());
        }
    }
    let begin = CUT_PEM.find(s)?;
    let rest = &s[begin.end()..];
    if rest.contains("-----END") {
        return None;
    }
    // The body starts after the line break (the BEGIN line stays whole).
    let skip = rest.len() - rest.trim_start().len();
    Some(begin.end() + skip)
}
