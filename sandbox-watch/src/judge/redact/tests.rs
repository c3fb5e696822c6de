use super::*;

fn argv(s: &[&str]) -> Vec<String> {
    s.iter().map(|s| s.to_string()).collect()
}

/// Redacts and checks the exact result and the count.
#[track_caller]
fn check(input: &[&str], want: &[&str], count: usize) {
    let (got, n) = redact_argv(&argv(input));
    assert_eq!(got, argv(want), "redacting {input:?}");
    assert_eq!(n, count, "count for {input:?}");
    let (again, m) = redact_argv(&got);
    assert_eq!((&again, m), (&got, 0), "redacting {input:?} twice");
}

#[track_caller]
fn untouched(input: &[&str]) {
    check(input, input, 0);
}

const GHP: &str = "ghp_a1B2a1B2a1B2a1B2a1B2a1B2a1B2a1B2a1B2";
const AWS_ID: &str = "AKIAIOSFODNN7EXAMPLE";
const AWS_SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
const AWS_SECRET2: &str = "q3Vn8Zr+Lk2pXw7Tb5Hy0Ms4Jd9Fc6Ga1Ue/NoRi";
const ANT: &str = "sk-ant-api03-abcDEF123_-abcDEF123_-abcDEF123_-AA";
const JWT: &str =
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";

/// One form: the argv, the exact argv after redaction, and how many secrets it holds.
type Form = (Vec<String>, Vec<String>, usize);

fn form(input: &[&str], want: &[&str], n: usize) -> Form {
    (argv(input), argv(want), n)
}

/// The forms of issue 16 and every rule of the module's documentation, each with the exact
/// output: only the secret's bytes change. One form a line (or three), as a table.
#[rustfmt::skip]
fn forms() -> Vec<Form> {
    let claude = |secret: &str| {
        format!(
            "eval 'curl -s -H '\"'\"'Authorization: Bearer {secret}'\"'\"' https://api.example/v1' < /dev/null && pwd -P >| /tmp/claude-1a2b-cwd"
        )
    };
    let yaml = |secret: &str| {
        format!("cat > c.yml <<'EOF'\ndb:\n  user: app\n  password: {secret}\nEOF\necho done")
    };
    let pem = |body: &str| {
        format!("-----BEGIN OPENSSH PRIVATE KEY-----\n{body}\n-----END OPENSSH PRIVATE KEY-----\n")
    };
    vec![
        // Issue 16: the command Claude Code runs, quoted for eval inside bash -c: not re-quoted.
        form(
            &["/bin/bash", "-c", "-l", &claude(ANT)],
            &["/bin/bash", "-c", "-l", &claude(REDACTED)],
            1,
        ),
        // Issue 16: over-redaction of harmless ssh options.
        form(
            &["ssh", "-o", "StrictHostKeyChecking=no", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", "h", "true"],
            &["ssh", "-o", "StrictHostKeyChecking=no", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", "h", "true"],
            0,
        ),
        form(
            &["git", "-c", "core.sshCommand=ssh -o StrictHostKeyChecking=no -o PasswordAuthentication=no", "fetch"],
            &["git", "-c", "core.sshCommand=ssh -o StrictHostKeyChecking=no -o PasswordAuthentication=no", "fetch"],
            0,
        ),
        // Issue 16: leaks.
        form(
            &["python3", "-c", "import subprocess; subprocess.run(['tool', '--api-key=PLANTEDk3y', 'x'])"],
            &["python3", "-c", "import subprocess; subprocess.run(['tool', '--api-key=[REDACTED]', 'x'])"],
            1,
        ),
        form(
            &["python3", "-c", "requests.get(u, headers={'Authorization': 'token PLANTEDt0k', 'Accept': 'x'})"],
            &["python3", "-c", "requests.get(u, headers={'Authorization': 'token [REDACTED]', 'Accept': 'x'})"],
            1,
        ),
        form(
            &["tool", "--pw", "hunter2"],
            &["tool", "--pw", "[REDACTED]"],
            1,
        ),
        form(
            &["vendortool", "-H", "db", "-P", "Zq8!rT4#pL", "sync"],
            &["vendortool", "-H", "db", "-P", "[REDACTED]", "sync"],
            1,
        ),
        form(
            &["ftpsync", "-u", "admin:hunter2", "https://x/"],
            &["ftpsync", "-u", "admin:[REDACTED]", "https://x/"],
            1,
        ),
        form(&["echo", AWS_SECRET], &["echo", "[REDACTED]"], 1),
        form(
            &["sh", "-c", "echo `mysql -uroot -phunter2 -e 'select 1'` > out"],
            &["sh", "-c", "echo `mysql -uroot -p[REDACTED] -e 'select 1'` > out"],
            1,
        ),
        // Command substitutions, also inside double quotes.
        form(
            &["sh", "-c", "X=\"$(curl -su admin:pw https://x)\"; echo \"$X\""],
            &["sh", "-c", "X=\"$(curl -su admin:[REDACTED] https://x)\"; echo \"$X\""],
            1,
        ),
        // Secret options.
        form(
            &["mytool", "--password=hunter2"],
            &["mytool", "--password=[REDACTED]"],
            1,
        ),
        form(
            &["x", "--token", "abc", "file"],
            &["x", "--token", "[REDACTED]", "file"],
            1,
        ),
        form(
            &["keytool", "-storepass", "changeit"],
            &["keytool", "-storepass", "[REDACTED]"],
            1,
        ),
        form(
            &["x", "--db-password=p"],
            &["x", "--db-password=[REDACTED]"],
            1,
        ),
        form(
            &["node", "-e", "spawn('cli', ['--token', 'abc123', '-v'])"],
            &["node", "-e", "spawn('cli', ['--token', '[REDACTED]', '-v'])"],
            1,
        ),
        // Programs' own password options.
        form(
            &["mysql", "-uroot", "-phunter2", "db"],
            &["mysql", "-uroot", "-p[REDACTED]", "db"],
            1,
        ),
        form(
            &["sshpass", "-p", "pw", "ssh", "h"],
            &["sshpass", "-p", "[REDACTED]", "ssh", "h"],
            1,
        ),
        form(
            &["sqlcmd", "-S", "h", "-U", "sa", "-P", "pw"],
            &["sqlcmd", "-S", "h", "-U", "sa", "-P", "[REDACTED]"],
            1,
        ),
        form(
            &["ipmitool", "-H", "bmc", "-U", "admin", "-P", "pw", "power", "status"],
            &["ipmitool", "-H", "bmc", "-U", "admin", "-P", "[REDACTED]", "power", "status"],
            1,
        ),
        form(
            &["ssh-keygen", "-p", "-P", "old", "-N", "new", "-f", "k"],
            &["ssh-keygen", "-p", "-P", "[REDACTED]", "-N", "[REDACTED]", "-f", "k"],
            2,
        ),
        form(
            &["plink", "-pw", "pw", "host"],
            &["plink", "-pw", "[REDACTED]", "host"],
            1,
        ),
        form(
            &["htpasswd", "-bc", "/etc/htpasswd", "admin", "pw"],
            &["htpasswd", "-bc", "/etc/htpasswd", "admin", "[REDACTED]"],
            1,
        ),
        form(
            &["docker", "login", "-u", "me", "-p", "pw", "reg"],
            &["docker", "login", "-u", "me", "-p", "[REDACTED]", "reg"],
            1,
        ),
        form(
            &["smbclient", "//h/s", "-U", "bob%pw"],
            &["smbclient", "//h/s", "-U", "bob%[REDACTED]"],
            1,
        ),
        // user:password.
        form(
            &["curl", "-u", "alice:pw", "https://x"],
            &["curl", "-u", "alice:[REDACTED]", "https://x"],
            1,
        ),
        form(
            &["curl", "-sSuadmin:pw", "u"],
            &["curl", "-sSuadmin:[REDACTED]", "u"],
            1,
        ),
        form(
            &["http", "-a", "bob:pw", "x.org"],
            &["http", "-a", "bob:[REDACTED]", "x.org"],
            1,
        ),
        form(
            &["fetcher", "--user=bob:pw"],
            &["fetcher", "--user=bob:[REDACTED]"],
            1,
        ),
        form(
            &["curl", "-b", "session=abc123", "u"],
            &["curl", "-b", "[REDACTED]", "u"],
            1,
        ),
        // Settings.
        form(
            &["aws", "configure", "set", "aws_secret_access_key", AWS_SECRET],
            &["aws", "configure", "set", "aws_secret_access_key", "[REDACTED]"],
            1,
        ),
        form(
            &["git", "config", "--global", "github.token", "abc"],
            &["git", "config", "--global", "github.token", "[REDACTED]"],
            1,
        ),
        // Headers.
        form(
            &["curl", "-H", "Authorization: Bearer abc", "https://x"],
            &["curl", "-H", "Authorization: Bearer [REDACTED]", "https://x"],
            1,
        ),
        form(
            &["x", "Proxy-Authorization: Basic dXNlcjpwdw=="],
            &["x", "Proxy-Authorization: Basic [REDACTED]"],
            1,
        ),
        form(
            &["curl", "--header=authorization: token t"],
            &["curl", "--header=authorization: token [REDACTED]"],
            1,
        ),
        form(
            &["curl", "-H", "Authorization: abcdef"],
            &["curl", "-H", "Authorization: [REDACTED]"],
            1,
        ),
        form(
            &["git", "-c", "http.extraHeader=Authorization: Basic Zm9v", "fetch"],
            &["git", "-c", "http.extraHeader=Authorization: Basic [REDACTED]", "fetch"],
            1,
        ),
        form(
            &["curl", "-H", "X-Api-Key: k123", "u"],
            &["curl", "-H", "X-Api-Key: [REDACTED]", "u"],
            1,
        ),
        form(
            &["x", "--data", "use Bearer eyJhbGciOi.x"],
            &["x", "--data", "use Bearer [REDACTED]"],
            1,
        ),
        // Assignments, query strings, form data.
        form(
            &["env", "API_TOKEN=abc", "cmd"],
            &["env", "API_TOKEN=[REDACTED]", "cmd"],
            1,
        ),
        form(
            &["docker", "run", "-e", "DB_PASSWORD=pw", "img"],
            &["docker", "run", "-e", "DB_PASSWORD=[REDACTED]", "img"],
            1,
        ),
        form(
            &["mvn", "-Dgpg.passphrase=pp", "deploy"],
            &["mvn", "-Dgpg.passphrase=[REDACTED]", "deploy"],
            1,
        ),
        form(
            &["curl", "-d", "user=bob&password=pw&x=1"],
            &["curl", "-d", "user=bob&password=[REDACTED]&x=1"],
            1,
        ),
        form(
            &["curl", "https://x/api?api_key=abc&q=1"],
            &["curl", "https://x/api?api_key=[REDACTED]&q=1"],
            1,
        ),
        // Key and value in code and data.
        form(
            &["curl", "-d", r#"{"user":"bob","password":"pw","n":1}"#],
            &["curl", "-d", r#"{"user":"bob","password":"[REDACTED]","n":1}"#],
            1,
        ),
        form(
            &["python3", "-c", "db.login(user='bob', password=\"hunter2\")"],
            &["python3", "-c", "db.login(user='bob', password=\"[REDACTED]\")"],
            1,
        ),
        form(
            &["ruby", "-e", "c = Client.new(api_key => 'k-123', region: 'eu')"],
            &["ruby", "-e", "c = Client.new(api_key => '[REDACTED]', region: 'eu')"],
            1,
        ),
        form(
            &["bash", "-c", &yaml("hunter2")],
            &["bash", "-c", &yaml(REDACTED)],
            1,
        ),
        // Token shapes.
        form(&["x", GHP], &["x", "[REDACTED]"], 1),
        form(
            &["sh", "-c", &format!("echo {GHP} done")],
            &["sh", "-c", "echo [REDACTED] done"],
            1,
        ),
        form(
            &["x", &format!("token:{JWT},")],
            &["x", "token:[REDACTED],"],
            1,
        ),
        form(
            &["x", "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"],
            &["x", "[REDACTED]"],
            1,
        ),
        form(
            &["x", "glpat-xxxxxxxxxxxxxxxxxxxx"],
            &["x", "[REDACTED]"],
            1,
        ),
        form(&["x", &format!("k={ANT}")], &["x", "k=[REDACTED]"], 1),
        // AWS keys: the id, and a secret next to it or alone.
        form(
            &["env", &format!("AWS_ACCESS_KEY_ID={AWS_ID}"), &format!("S3KEY={AWS_SECRET}"), "aws", "s3", "ls"],
            &["env", "AWS_ACCESS_KEY_ID=[REDACTED]", "S3KEY=[REDACTED]", "aws", "s3", "ls"],
            2,
        ),
        form(
            &["sh", "-c", &format!("printf '%s\\n' {AWS_SECRET2} | tool")],
            &["sh", "-c", "printf '%s\\n' [REDACTED] | tool"],
            1,
        ),
        // Private key blocks and URL passwords.
        form(
            &["printf", &pem("b3BlbnNzaC1rZXktdjEAAAAA\nAAAABG5vbmUA")],
            &["printf", &pem(REDACTED)],
            1,
        ),
        form(
            &["git", "clone", "https://user:pass@host/r.git"],
            &["git", "clone", "https://user:[REDACTED]@host/r.git"],
            1,
        ),
        form(
            &["psql", "postgres://app:p@ss@db:5432/x"],
            &["psql", "postgres://app:[REDACTED]@db:5432/x"],
            1,
        ),
        // Scripts: the quotes stay; a secret written in pieces keeps its pieces' quotes.
        form(
            &["sh", "-c", "export API_TOKEN=abc; tool --password \"two words\" x"],
            &["sh", "-c", "export API_TOKEN=[REDACTED]; tool --password \"[REDACTED]\" x"],
            2,
        ),
        form(
            &["sh", "-c", "tool --password='ab'\"cd\"ef x"],
            &["sh", "-c", "tool --password='[REDACTED]'\"\" x"],
            1,
        ),
        form(
            &["bash", "-lc", "eval 'sshpass -p pw ssh host'"],
            &["bash", "-lc", "eval 'sshpass -p [REDACTED] ssh host'"],
            1,
        ),
        form(
            &["sh", "-c", "bash -c \"redis-cli -a 'p w' ping\""],
            &["sh", "-c", "bash -c \"redis-cli -a '[REDACTED]' ping\""],
            1,
        ),
        form(
            &["sh", "-c", "tool --password p\\ w\\'x && ok"],
            &["sh", "-c", "tool --password [REDACTED] && ok"],
            1,
        ),
        // Left alone.
        form(
            &["docker", "run", "-u", "1000:1000", "-p", "8080:80", "img"],
            &["docker", "run", "-u", "1000:1000", "-p", "8080:80", "img"],
            0,
        ),
        form(
            &["mkdir", "-p", "Build2x!"],
            &["mkdir", "-p", "Build2x!"],
            0,
        ),
        form(
            &["cp", "-P", "Src2File!", "dst"],
            &["cp", "-P", "Src2File!", "dst"],
            0,
        ),
        form(
            &["vendortool", "-p", "8080", "-P", "out/dir2X"],
            &["vendortool", "-p", "8080", "-P", "out/dir2X"],
            0,
        ),
        form(&["ps", "-u", "root:wheel"], &["ps", "-u", "root:wheel"], 0),
        form(
            &["sh", "-c", "tool --password \"$PW\" && curl -u \"u:$P\" -H \"Authorization: Bearer $T\" x"],
            &["sh", "-c", "tool --password \"$PW\" && curl -u \"u:$P\" -H \"Authorization: Bearer $T\" x"],
            0,
        ),
        form(
            &["python3", "-c", "h = {'Authorization': f'Bearer {tok}', 'password': None}"],
            &["python3", "-c", "h = {'Authorization': f'Bearer {tok}', 'password': None}"],
            0,
        ),
        form(
            &["git", "show", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4"],
            &["git", "show", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4"],
            0,
        ),
        form(
            &["ls", "src/main/java/com/Example/Foo1Bar/Baz2Qx"],
            &["ls", "src/main/java/com/Example/Foo1Bar/Baz2Qx"],
            0,
        ),
    ]
}

#[test]
fn every_form_gives_its_exact_output() {
    let forms = forms();
    assert!(forms.len() >= 40, "{} forms", forms.len());
    let mut failures = Vec::new();
    for (input, want, count) in &forms {
        let (got, n) = redact_argv(input);
        if (&got, n) != (want, *count) {
            failures.push(format!(
                "{input:?}\n   got  {got:?} ({n})\n   want {want:?} ({count})"
            ));
        }
        let (again, m) = redact_argv(&got);
        if (&again, m) != (&got, 0) {
            failures.push(format!("{input:?}: not idempotent: {again:?} ({m})"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

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
            "-----BEGIN OPENSSH PRIVATE KEY-----\n[REDACTED]",
        ),
        ("https://bob:hunter2sec", "https://bob:[REDACTED]"),
        (
            r#"{"user": "a", "password":"hunter2se"#,
            r#"{"user": "a", "password":"[REDACTED]"#,
        ),
    ] {
        let (out, n) = redact_cut_argv(&argv(last));
        assert_eq!((out[2].as_str(), n), (want, 1), "{last}");
    }
    // Not a secret's beginning: left as it is, and only the last argument is looked at.
    for last in ["hello world", "ask-me", "release-v1", "a ghp_x b"] {
        let (out, n) = redact_cut_argv(&argv(last));
        assert_eq!((out[2].as_str(), n), (last, 0), "{last}");
    }
    let (out, n) = redact_cut_argv(&["ghp_abc".into(), "last".into()]);
    assert_eq!((out, n), (vec!["ghp_abc".to_string(), "last".into()], 0));
    // Uncut, a beginning is not a token.
    assert_eq!(redact_argv(&argv("ghp_abc")).1, 0);
}

#[test]
fn secret_options_look_alikes() {
    untouched(&["x", "--keyword=foo"]);
    untouched(&["git", "commit", "--author=Alice <a@example.com>"]);
    untouched(&["x", "--password="]);
    untouched(&["x", "--token-file=/run/secrets/t"]);
    untouched(&["x", "--max-tokens=100"]);
    untouched(&["x", "max_tokens=100"]);
    untouched(&["sort", "--key=2"]);
    untouched(&["x", "--auth-type=basic"]);
    untouched(&["docker", "login", "-u", "me", "--password-stdin"]);
    untouched(&["psql", "--no-password", "mydb"]);
    untouched(&["gh", "auth", "login", "--with-token"]);
    untouched(&["ansible-playbook", "--ask-vault-password", "site.yml"]);
    untouched(&["x", "--token", "--verbose"]);
    untouched(&["x", "--keyword", "foo"]);
    untouched(&["ssh-keygen", "-t", "ed25519", "-f", "key"]);
    untouched(&[
        "curl",
        "--key",
        "client.pem",
        "--pubkey",
        "k.pub",
        "https://x",
    ]);
    untouched(&[
        "x",
        "--password=true",
        "--token=${TOKEN}",
        "--secret=<secret>",
    ]);
    check(&["prog", "-token=abc"], &["prog", "-token=[REDACTED]"], 1);
    check(
        &["openssl", "-passin", "pass:pw"],
        &["openssl", "-passin", "[REDACTED]"],
        1,
    );
}

#[test]
fn password_options_look_alikes() {
    // -p is a port or a flag elsewhere; `mysql -p db` prompts.
    untouched(&["psql", "-h", "db", "-p5432", "-U", "me"]);
    untouched(&["psql", "-h", "mysql", "-p5432"]);
    untouched(&["mysql", "-p", "mydb"]);
    untouched(&["mysql", "-u", "root", "--password", "mydb"]);
    untouched(&["mkdir", "-p", "a/b"]);
    untouched(&["ssh", "-p2222", "host"]);
    untouched(&["scp", "-P", "2222", "f", "h:"]);
    untouched(&["docker", "run", "-p8080:80", "nginx"]);
    untouched(&["docker", "run", "--name", "mysql", "-p3306:3306", "mysql:8"]);
    untouched(&["docker", "run", "-p", "8080:80", "nginx"]);
    untouched(&["docker", "login", "reg.example"]);
    untouched(&["gh", "pr", "create", "-b", "body text"]);
    untouched(&["zip", "-r", "a.zip", "dir"]);
    untouched(&["htpasswd", "-c", "/etc/htpasswd", "admin"]);
    untouched(&["openssl", "req", "-new", "-key", "key.pem", "-out", "x.csr"]);
    untouched(&["smbclient", "-L", "h", "-U", "bob"]);
    untouched(&["git", "log", "-p", "HEAD~3"]);
    untouched(&["grep", "-P", "[A-Z]\\d{3}", "f"]);
    untouched(&["xargs", "-P", "4", "-n", "1", "echo"]);
    untouched(&["patch", "-p1", "-i", "fix.diff"]);
    untouched(&["vendortool", "-p", "hunter2"]);
    untouched(&["vendortool", "-P", "-v", "x"]);
    untouched(&["vendortool", "-u", "bob"]);
    untouched(&["vendortool", "-u", "1000:1000"]);
    untouched(&["sudo", "-u", "root", "ls", "-p", "Abc123!x"]);
    untouched(&["curl", "-u", "alice", "https://x"]);
    untouched(&["curl", "-sS", "https://x"]);
    // After a launcher, the program it runs is not one the tables know.
    check(
        &["sudo", "-E", "vendortool", "-P", "Zq8!rT4#pL"],
        &["sudo", "-E", "vendortool", "-P", "[REDACTED]"],
        1,
    );
    check(
        &["docker", "exec", "db", "mysql", "-pX"],
        &["docker", "exec", "db", "mysql", "-p[REDACTED]"],
        1,
    );
    check(
        &["7z", "a", "-ppw", "a.7z", "f"],
        &["7z", "a", "-p[REDACTED]", "a.7z", "f"],
        1,
    );
    check(
        &["gh", "secret", "set", "X", "-babc"],
        &["gh", "secret", "set", "X", "-b[REDACTED]"],
        1,
    );
    check(
        &["curl", "-su", "admin:pw", "u"],
        &["curl", "-su", "admin:[REDACTED]", "u"],
        1,
    );
}

#[test]
fn names_look_alikes() {
    untouched(&["git", "config", "--global", "user.name", "Bob"]);
    untouched(&["git", "config", "credential.helper", "store"]);
    untouched(&["aws", "configure", "get", "region"]);
    untouched(&["npm", "config", "set", "registry", "https://r.example/"]);
    untouched(&["grep", "-rn", "api_key", "src/"]);
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
    untouched(&[
        "x",
        r#"{"keyword":"v","monkey":"x","token_count":"3","sort_key":"k"}"#,
    ]);
    untouched(&["python3", "-c", "d = sorted(x, key='name'); token == 'x'"]);
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
    untouched(&[
        "git",
        "commit",
        "-m",
        "Token: refresh handling\n\nMore words here",
    ]);
    untouched(&["echo", "authorization"]);
    untouched(&["python3", "-c", "print('Authorization: ' + 'Bearer')"]);
    untouched(&["git", "commit", "-m", "Bearer tokens are now refreshed"]);
    untouched(&["git", "commit", "-m", "Support Bearer authentication"]);
    check(&["x", "DB_PWD=a b c"], &["x", "DB_PWD=[REDACTED]"], 1);
    check(
        &["x", "GOOGLE_CREDENTIALS={\"k\":1}"],
        &["x", "GOOGLE_CREDENTIALS=[REDACTED]"],
        1,
    );
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
        &["helm", "--set", "auth.rootPassword=pw"],
        &["helm", "--set", "auth.rootPassword=[REDACTED]"],
        1,
    );
    check(
        &["x", r#"{"apiKey": "k", "x-api-key": "k2"}"#],
        &[
            "x",
            r#"{"apiKey": "[REDACTED]", "x-api-key": "[REDACTED]"}"#,
        ],
        2,
    );
}

#[test]
fn token_shapes_look_alikes() {
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
        "0123456789ABCDEF0123456789ABCDEF01234567",
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "ThisIsAVeryLongCamelCaseIdentifierName12",
        "TestSomethingVeryLongWithNumbers12345678",
        "usr/share/doc/Python3/html/library/Abcde",
        // 40 base64 characters inside a longer run, or padded: not a key of 40.
        "q3Vn8Zr+Lk2pXw7Tb5Hy0Ms4Jd9Fc6Ga1Ue/NoRiX",
        "q3Vn8Zr+Lk2pXw7Tb5Hy0Ms4Jd9Fc6Ga1Ue/NoRi=",
    ] {
        untouched(&["x", s]);
    }
    untouched(&[
        "x",
        "-----BEGIN PUBLIC KEY-----\nMIIBIjAN\n-----END PUBLIC KEY-----",
    ]);
    untouched(&[
        "x",
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
    ]);
    // A private key cut short: its body to the end.
    check(
        &["x", "-----BEGIN RSA PRIVATE KEY-----\nMIIEow"],
        &["x", "-----BEGIN RSA PRIVATE KEY-----\n[REDACTED]"],
        1,
    );
    untouched(&["git", "clone", "git@github.com:org/repo.git"]);
    untouched(&["git", "clone", "ssh://git@host:22/r.git"]);
    untouched(&["curl", "https://host:8080/path@x?q=1&page=2"]);
    untouched(&["curl", "https://user@host/"]);
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
            "curl -H 'Authorization: Bearer [REDACTED]' https://x",
        ],
        1,
    );
    // A redirection's target is no argument: `pwd -P > file` has no -P value.
    untouched(&["bash", "-c", "vendortool -P >| Out2File!x; pwd -P 2>&1"]);
    untouched(&[
        "bash",
        "-c",
        "git log --pretty=format:%H | head -n 3; ls -la # key=x",
    ]);
    // Only scripts are read as commands: a message that mentions an option is a message.
    untouched(&["git", "commit", "-m", "add --token flag support"]);
    untouched(&["echo", "sshpass -p is deprecated"]);
    // Deeper: sh -c inside docker exec inside a script; a here-document body.
    check(
        &[
            "sh",
            "-c",
            "docker exec db sh -c 'mysql -psecret1 -e \"show tables\"'",
        ],
        &[
            "sh",
            "-c",
            "docker exec db sh -c 'mysql -p[REDACTED] -e \"show tables\"'",
        ],
        1,
    );
    check(
        &[
            "bash",
            "-c",
            "cat <<EOF > .env\nexport API_TOKEN=abc123\nEOF\n",
        ],
        &[
            "bash",
            "-c",
            "cat <<EOF > .env\nexport API_TOKEN=[REDACTED]\nEOF\n",
        ],
        1,
    );
    // $'…' quoting, a subshell, a pipeline.
    check(
        &["bash", "-c", "(sshpass -p $'pw\\'x' ssh h) | tee log"],
        &["bash", "-c", "(sshpass -p $'[REDACTED]' ssh h) | tee log"],
        1,
    );
}

#[test]
fn each_secret_counts_once() {
    check(
        &["curl", "-H", &format!("Authorization: Bearer {GHP}")],
        &["curl", "-H", "Authorization: Bearer [REDACTED]"],
        1,
    );
    check(
        &["git", "push", &format!("https://x:{GHP}@github.com/o/r")],
        &["git", "push", "https://x:[REDACTED]@github.com/o/r"],
        1,
    );
    check(
        &["x", &format!("--token={GHP}")],
        &["x", "--token=[REDACTED]"],
        1,
    );
    check(
        &[
            "sh",
            "-c",
            "curl -u a:b -H 'Authorization: x' https://u:p@h?token=t",
        ],
        &[
            "sh",
            "-c",
            "curl -u a:[REDACTED] -H 'Authorization: [REDACTED]' https://u:[REDACTED]@h?token=[REDACTED]",
        ],
        4,
    );
}

#[test]
fn ordinary_command_lines_are_untouched() {
    for cmd in [
        &["git", "commit", "-m", "fix leap year"][..],
        &["git", "log", "--pretty=format:%H"],
        &["git", "log", "--author=bob", "--grep=password reset"],
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
        &[
            "bash",
            "-c",
            "for f in *.txt; do echo \"$f\"; done; x=$((1+2)); echo ${x:-0}",
        ],
        &[
            "sh",
            "-c",
            "ps aux | grep -v grep | grep -P 'claude|code' >/dev/null 2>&1",
        ],
        &["htop"],
        &[],
    ] {
        untouched(cmd);
    }
}

#[test]
fn shell_words_know_where_they_were() {
    let script = "a 'b c' \"d\\\"e\" f\\ g; h|i # j\nk $(l 'm') `n` <<X\nbody\nX\n";
    let root = Word::arg(0, script);
    let s = shell::split(&root);
    let texts: Vec<Vec<&str>> = s
        .commands
        .iter()
        .map(|c| c.iter().map(|w| &*w.text).collect())
        .collect();
    assert_eq!(
        texts,
        vec![
            vec!["a", "b c", "d\"e", "f g"],
            vec!["h"],
            vec!["i"],
            vec!["l", "m"],
            vec!["n"],
            vec!["k", "$(l 'm')", "`n`"],
        ]
    );
    assert_eq!(&*s.texts[0].text, "body\n");
    // Each character's bytes in the script.
    let word = &s.commands[0][1];
    let (arg, pieces) = word.locate(0..3);
    assert_eq!((arg, pieces.len(), &pieces[0]), (0, 1, &(3..6)));
    let word = &s.commands[0][2];
    let (arg, pieces) = word.locate(0..3);
    assert_eq!((arg, pieces.len(), &pieces[0]), (0, 1, &(9..13)));
}

mod property {
    use proptest::prelude::*;

    use super::super::*;

    /// Secrets in the places the rules know, each with the exact text it must become. The
    /// secret's bytes come from `s` (letters and digits, so no rule sees a placeholder).
    fn placed(s: &str) -> Vec<(String, String, bool)> {
        let r = REDACTED;
        // (as written, as redacted, is a shell script's piece)
        vec![
            (format!("--password={s}"), format!("--password={r}"), false),
            (format!("API_TOKEN={s}"), format!("API_TOKEN={r}"), false),
            (
                format!("Authorization: Bearer {s}"),
                format!("Authorization: Bearer {r}"),
                false,
            ),
            (
                format!("https://u:{s}@h/x"),
                format!("https://u:{r}@h/x"),
                false,
            ),
            (
                format!("{{\"secret\": \"{s}\"}}"),
                format!("{{\"secret\": \"{r}\"}}"),
                false,
            ),
            (format!("mysql -p{s} db"), format!("mysql -p{r} db"), true),
            (
                format!("curl -u 'bob:{s}' u"),
                format!("curl -u 'bob:{r}' u"),
                true,
            ),
            (
                format!("tool --token \"{s}\""),
                format!("tool --token \"{r}\""),
                true,
            ),
            (
                format!("echo \"$(sshpass -p {s} ssh h)\""),
                format!("echo \"$(sshpass -p {r} ssh h)\""),
                true,
            ),
            (
                format!("x=`redis-cli -a '{s}' ping`"),
                format!("x=`redis-cli -a '{r}' ping`"),
                true,
            ),
            (
                format!("curl -H 'Authorization: token {s}' x"),
                format!("curl -H 'Authorization: token {r}' x"),
                true,
            ),
            (
                format!("eval 'tool --api-key='\"'\"'{s}'\"'\"''"),
                format!("eval 'tool --api-key='\"'\"'{r}'\"'\"''"),
                true,
            ),
        ]
    }

    /// Words and script pieces that hold no secret.
    const PLAIN: &[&str] = &[
        "ls -la",
        "echo 'hello world'",
        "git commit -m \"fix: a b\"",
        "ssh -o StrictHostKeyChecking=no -o BatchMode=yes h true",
        "mkdir -p out/dir",
        "cd /tmp && make -j2",
        "printf '%s\\n' \"$HOME\"",
        "grep -P '\\d+' f",
        "cat <<EOF\nplain text\nEOF\n",
        "docker run -u 1000:1000 -p 8080:80 img",
        "tool --password \"$PW\"",
        "x=$((1 + 2)); echo ${x}",
        "python3 -c 'print(len(key))'",
    ];

    /// Pieces of text the rules react to, to be put together at random.
    const FRAGMENTS: &[&str] = &[
        " ",
        "\n",
        "'",
        "\"",
        "'\"'\"'",
        "\\",
        "$(",
        ")",
        "`",
        ";",
        "|",
        "&&",
        "<<EOF\n",
        "EOF\n",
        "=",
        ":",
        "@",
        "&",
        "?",
        ",",
        "{",
        "}",
        "[",
        "]",
        "-p",
        "-P",
        "-u",
        "--password",
        "--pw",
        "--api-key=",
        "-H",
        "Authorization: ",
        "Bearer ",
        "token ",
        "Basic ",
        "https://u:",
        "@h/",
        "API_TOKEN",
        "password",
        "'password': ",
        "\"secret\":",
        "sh -c ",
        "eval ",
        "mysql ",
        "curl ",
        "sshpass ",
        "vendortool ",
        "Zq8!rT4#pL",
        "hunter2",
        "abc",
        "$PW",
        "${T}",
        "ghp_a1B2a1B2a1B2a1B2a1B2a1B2a1B2a1B2a1B2",
        "AKIAIOSFODNN7EXAMPLE",
        "q3Vn8Zr+Lk2pXw7Tb5Hy0Ms4Jd9Fc6Ga1Ue/NoRi",
        "-----BEGIN RSA PRIVATE KEY-----",
        "-----END RSA PRIVATE KEY-----",
        "[REDACTED]",
        "é",
        "user:pw",
        "\t",
    ];

    fn secret() -> impl Strategy<Value = String> {
        "[A-Za-z0-9]{8,20}".prop_map(|s| format!("Zz9{s}"))
    }

    proptest! {
        /// Secrets placed among plain words, in an argv and inside `sh -c`: the output is the
        /// input with exactly the secrets' bytes replaced, each counted once; redacting it
        /// again changes nothing.
        #[test]
        fn only_the_secrets_bytes_change(
            parts in proptest::collection::vec((0usize..12, 0usize..13, secret(), any::<bool>()), 1..6),
            seps in proptest::collection::vec(prop_oneof![Just("; "), Just(" && "), Just("\n"), Just(" | ")], 6),
        ) {
            let mut argv_in = vec!["tool".to_string()];
            let mut argv_out = vec!["tool".to_string()];
            let (mut script_in, mut script_out) = (String::new(), String::new());
            let mut secrets = 0;
            for (k, (which, plain, s, secret_first)) in parts.iter().enumerate() {
                let (with, without, script_only) = placed(s).swap_remove(*which);
                // In a script, a command of its own.
                let (a, b) = if script_only { (with.clone(), without.clone()) } else { (format!("echo {with}"), format!("echo {without}")) };
                let p = PLAIN[*plain].to_string();
                let order = if *secret_first { [(a, b), (p.clone(), p)] } else { [(p.clone(), p), (a, b)] };
                for (a, b) in order {
                    if !script_in.is_empty() {
                        script_in.push_str(seps[k]);
                        script_out.push_str(seps[k]);
                    }
                    script_in.push_str(&a);
                    script_out.push_str(&b);
                }
                if !script_only {
                    argv_in.push(with);
                    argv_out.push(without);
                }
                secrets += 1;
            }
            let argv_secrets = argv_in.len() - 1;
            let (got, n) = redact_argv(&argv_in);
            prop_assert_eq!(&got, &argv_out);
            prop_assert_eq!(n, argv_secrets);
            let input = vec!["sh".to_string(), "-c".into(), script_in];
            let (got, n) = redact_argv(&input);
            prop_assert_eq!(&got[2], &script_out);
            prop_assert_eq!(n, secrets);
            prop_assert_eq!(redact_argv(&got), (got.clone(), 0));
        }

        /// Any text, as an argument and as a script, made of characters or of the pieces the
        /// rules look for: no panic, and redacting twice is redacting once; what is outside
        /// the markers is the input's, in order.
        #[test]
        fn any_text_is_redacted_once_and_for_all(
            text in prop_oneof![
                "[ -~\n\u{e9}]{0,120}",
                proptest::collection::vec(proptest::sample::select(FRAGMENTS), 0..24).prop_map(|v| v.concat()),
            ],
            script in any::<bool>(),
        ) {
            let argv = if script { vec!["sh".to_string(), "-c".into(), text.clone()] } else { vec!["x".to_string(), text.clone()] };
            let (once, n) = redact_argv(&argv);
            prop_assert_eq!(redact_argv(&once), (once.clone(), 0));
            prop_assert!(once.last().unwrap().matches(REDACTED).count() <= n + text.matches(REDACTED).count());
            // What is not a marker is the input's, in order: outside a script each piece
            // between markers is a piece of the input (a secret is one piece there); in a
            // script a secret written in pieces leaves what is between them (quotes, escapes),
            // so the rest is the input with parts taken out.
            let out = once.last().unwrap();
            if script {
                let mut input = text.chars();
                for c in out.split(REDACTED).flat_map(str::chars) {
                    prop_assert!(input.any(|i| i == c), "{c:?} of {out:?} not in order in {text:?}");
                }
            } else {
                let mut rest = text.as_str();
                for piece in out.split(REDACTED) {
                    let at = rest.find(piece);
                    prop_assert!(at.is_some(), "{piece:?} not in {rest:?}");
                    rest = &rest[at.unwrap() + piece.len()..];
                }
            }
        }
    }
}
