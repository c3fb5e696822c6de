//! Which names hold a secret (options, variables, keys, headers), which names are known to
//! hold none, and which values are no secret whatever their name.

/// Option names, variables and keys known to hold no secret although their words say key,
/// auth or pass: ssh's `-o` options, git's settings, curl's options. Compared without case.
const HARMLESS: &[&str] = &[
    // ssh_config(5)
    "StrictHostKeyChecking",
    "BatchMode",
    "ConnectTimeout",
    "PasswordAuthentication",
    "PubkeyAuthentication",
    "KbdInteractiveAuthentication",
    "ChallengeResponseAuthentication",
    "HostbasedAuthentication",
    "GSSAPIAuthentication",
    "PreferredAuthentications",
    "NumberOfPasswordPrompts",
    "HostKeyAlgorithms",
    "HostKeyAlias",
    "UpdateHostKeys",
    "VerifyHostKeyDNS",
    "AddKeysToAgent",
    "PubkeyAcceptedKeyTypes",
    "PubkeyAcceptedAlgorithms",
    "HostbasedAcceptedAlgorithms",
    "CASignatureAlgorithms",
    "RevokedHostKeys",
    "KnownHostsCommand",
    "UserKnownHostsFile",
    "GlobalKnownHostsFile",
    "IdentityFile",
    "IdentityAgent",
    "IdentitiesOnly",
    "CertificateFile",
    "SecurityKeyProvider",
    "PKCS11Provider",
    "RekeyLimit",
    "FingerprintHash",
    "ForwardAgent",
    "LogLevel",
    // git-config(1)
    "credential.helper",
    "credential.username",
    "credential.useHttpPath",
    "http.emptyAuth",
    "http.proxyAuthMethod",
    "http.sslKey",
    "http.sslCertPasswordProtected",
    "user.signingKey",
    "commit.gpgSign",
    "tag.gpgSign",
    "push.gpgSign",
    "gpg.format",
    "gpg.program",
    "core.sshCommand",
    // curl(1): the names of files, types and methods
    "key",
    "key-type",
    "pubkey",
    "proxy-key",
    "proxy-key-type",
    "hostpubmd5",
    "hostpubsha256",
    "aws-sigv4",
    "anyauth",
    "proxy-anyauth",
    "tlsauthtype",
    "proxy-tlsauthtype",
    "netrc-file",
    "login-options",
    "sasl-authzid",
    "delegation",
];

pub fn harmless(name: &str) -> bool {
    let name = name.trim_start_matches('-');
    HARMLESS.iter().any(|h| h.eq_ignore_ascii_case(name))
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
    "checking",
    "prompt",
    "prompts",
];

/// Words before `key` that make it a secret key (`API_KEY`, `secretKey`, `x-api-key`); a
/// `key` alone, or after other words (`sort_key`, `primary_key`), is not one.
const KEY_QUALIFIERS: &[&str] = &[
    "api",
    "secret",
    "private",
    "access",
    "auth",
    "encryption",
    "signing",
    "master",
    "client",
    "license",
    "service",
    "account",
    "app",
    "deploy",
    "session",
    "shared",
    "aws",
    "openai",
    "anthropic",
    "stripe",
];

/// Words of a name: `GITHUB_TOKEN` → github, token; `auth.rootPassword` → auth, root,
/// password; `X-Api-Key` → x, api, key.
fn name_words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    for part in name.split(['_', '.', '-', '[', ']', '/', ':']) {
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

/// Does this variable, key or setting name hold a secret (`API_TOKEN`, `db_password`,
/// `apiKey`, `Authorization`)?
pub fn is_secret_name(name: &str) -> bool {
    if matches!(name, "PWD" | "OLDPWD") || harmless(name) {
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
    words.iter().enumerate().any(|(i, w)| {
        let w = w.as_str();
        let qualified = i > 0 && KEY_QUALIFIERS.contains(&words[i - 1].as_str());
        matches!(
            w,
            "token" | "secret" | "secrets" | "pwd" | "pw" | "pass" | "auth" | "creds" | "cookie"
        ) || ((w == "key" || w == "keys") && qualified)
            || w.contains("password")
            || w.contains("passwd")
            || w.contains("passphrase")
            || w.contains("secret")
            || w.contains("credential")
            || w == "authorization"
            || w.ends_with("token")
            || w.ends_with("apikey")
            || w.ends_with("accesskey")
            || w.ends_with("secretkey")
            || w.ends_with("privatekey")
            || w.ends_with("authkey")
            || w.ends_with("auth")
    })
}

/// Is `name` (an option without its dashes) one whose value is a secret?
pub fn is_secret_option(name: &str) -> bool {
    if harmless(name) {
        return false;
    }
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
        "pw",
        "pwd",
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
        "-pass",
        "-pw",
        "-pwd",
        "-token",
        "-secret",
        "-api-key",
        "-apikey",
        "-access-key",
        "-secret-key",
    ];
    EXACT.contains(&name.as_str()) || SUFFIXES.iter().any(|s| name.ends_with(s))
}

/// A header whose value is a secret, given to `-H` (`X-Api-Key: …`, `PRIVATE-TOKEN: …`).
pub fn is_secret_header(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    if matches!(
        lower.as_str(),
        "authorization" | "proxy-authorization" | "cookie" | "set-cookie"
    ) {
        return true;
    }
    let words = name_words(&lower);
    if words
        .last()
        .is_some_and(|w| PLACE_WORDS.contains(&w.as_str()))
    {
        return false;
    }
    words.iter().any(|w| {
        matches!(
            w.as_str(),
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

/// `Authorization` and `Proxy-Authorization`: their value is a scheme and a credential.
pub fn is_authorization(name: &str) -> bool {
    name.eq_ignore_ascii_case("authorization") || name.eq_ignore_ascii_case("proxy-authorization")
}

/// Authentication schemes: an `Authorization:` value that is only one of these holds nothing.
pub fn is_auth_scheme(word: &str) -> bool {
    [
        "bearer",
        "basic",
        "digest",
        "token",
        "negotiate",
        "ntlm",
        "bot",
        "apikey",
        "hoba",
        "mutual",
    ]
    .iter()
    .any(|s| s.eq_ignore_ascii_case(word))
}

/// A value no name makes a secret: a boolean, a null, a template for one (`{tok}`,
/// `{{ vault_pw }}`, `${TOKEN}`, `%s`, `<token>`), punctuation alone (`+`, `***`).
pub fn is_placeholder(value: &str) -> bool {
    let v = value.trim();
    const WORDS: &[&str] = &[
        "true",
        "false",
        "yes",
        "no",
        "on",
        "off",
        "null",
        "none",
        "nil",
        "undefined",
    ];
    WORDS.iter().any(|w| w.eq_ignore_ascii_case(v))
        || !v.chars().any(char::is_alphanumeric)
        || is_format_field(v)
        || v.starts_with("${")
        || v.starts_with("{{")
        || v.starts_with("%(")
        || matches!(v, "%s" | "%r" | "?" | "***" | "...")
        || (v.starts_with('<') && v.ends_with('>'))
}

/// A value given to `-p`/`-P`/`-pw` of a program not known to take (or not to take) a
/// password there, that reads as a password rather than a port, a path, a count or a word:
/// 6 to 128 bytes, no white space or `/`, not starting with `-` `.` `~` `$` `@`, and three of
/// the four kinds of character (lower case, upper case, digit, other).
pub fn looks_like_password(v: &str) -> bool {
    let b = v.as_bytes();
    if !(6..=128).contains(&b.len())
        || b.iter().any(|c| c.is_ascii_whitespace() || *c == b'/')
        || matches!(b[0], b'-' | b'.' | b'~' | b'$' | b'@')
    {
        return false;
    }
    let kinds = [
        b.iter().any(u8::is_ascii_lowercase),
        b.iter().any(u8::is_ascii_uppercase),
        b.iter().any(u8::is_ascii_digit),
        b.iter().any(|c| !c.is_ascii_alphanumeric()),
    ];
    kinds.iter().filter(|&&k| k).count() >= 3
}

/// `{tok}`, `{0}`, `{self.token}`, `{}`: a format string's field.
fn is_format_field(v: &str) -> bool {
    v.strip_prefix('{')
        .and_then(|v| v.strip_suffix('}'))
        .is_some_and(|inner| {
            inner
                .chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for n in [
            "API_TOKEN",
            "db_password",
            "apiKey",
            "x-api-key",
            "AWS_SECRET_ACCESS_KEY",
            "auth.rootPassword",
            "GITHUB_TOKEN",
            "Authorization",
            "secret_key",
            "DB_PWD",
            "MY_AUTH",
            "_authToken",
            "client_secret",
            "pw",
        ] {
            assert!(is_secret_name(n), "{n}");
        }
        for n in [
            "StrictHostKeyChecking",
            "strictHostKeyChecking",
            "BatchMode",
            "ConnectTimeout",
            "PasswordAuthentication",
            "sort_key",
            "primary_key",
            "KEYMAP",
            "max_tokens",
            "TOKENIZERS_PARALLELISM",
            "SSH_AUTH_SOCK",
            "AWS_ACCESS_KEY_ID",
            "GITHUB_TOKEN_FILE",
            "SSH_PUBLIC_KEY",
            "credential.helper",
            "PWD",
            "token_count",
        ] {
            assert!(!is_secret_name(n), "{n}");
        }
    }

    #[test]
    fn passwords_by_shape() {
        for v in ["Hunter2!", "Zq8!rT4#pL", "s3cr3t!x", "Password1"] {
            assert!(looks_like_password(v), "{v}");
        }
        for v in [
            "hunter2",
            "8080:80",
            "5432",
            "build/out",
            "-v",
            "src",
            "HEAD",
            "1,2,3",
            "~/x",
            "$PW",
            "abc",
        ] {
            assert!(!looks_like_password(v), "{v}");
        }
    }
}
