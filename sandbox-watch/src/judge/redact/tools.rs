//! What particular programs take as a password, and which programs are known to take none.

/// The password-taking options of one family of programs.
#[derive(Debug)]
pub struct ToolRule {
    pub names: &'static [&'static str],
    /// The rule applies only after this word, a subcommand (`docker login`).
    pub after: Option<&'static str>,
    /// Options whose next argument, or value after `=`, is a secret.
    pub next: &'static [&'static str],
    /// Short options whose glued rest is a secret (`-pSECRET`).
    pub glued: &'static [&'static str],
    /// Options whose value is user, `sep`, password; a short one may be glued (`-uuser:pw`).
    pub user_pass: &'static [&'static str],
    pub sep: char,
    /// `--password` takes a value only after `=`; the next argument is something else (mysql).
    pub password_needs_eq: bool,
    /// With `-b`, the last positional argument is the password (htpasswd).
    pub batch_last: bool,
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

pub static RULES: &[ToolRule] = &[
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
            "cqlsh",
        ],
        next: &["-p"],
        ..NO_RULE
    },
    ToolRule {
        names: &["sqlcmd", "bcp", "ipmitool"],
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
        names: &["7z", "7za", "7zr", "7zz", "rar", "unrar"],
        glued: &["-p"],
        ..NO_RULE
    },
    ToolRule {
        names: &["openssl"],
        next: &["-k", "-K"],
        ..NO_RULE
    },
    ToolRule {
        names: &["ssh-keygen"],
        next: &["-P", "-N"],
        ..NO_RULE
    },
    ToolRule {
        names: &["plink", "pscp", "psftp", "putty"],
        next: &["-pw"],
        ..NO_RULE
    },
    ToolRule {
        // The password's hash, which is as good as the password to a cracker.
        names: &["useradd", "usermod"],
        next: &["-p", "--password"],
        ..NO_RULE
    },
    ToolRule {
        names: &["rdesktop"],
        next: &["-p"],
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
        names: &["http", "https", "xh", "xhs"],
        user_pass: &["-a", "--auth"],
        ..NO_RULE
    },
    ToolRule {
        names: &["ab"],
        user_pass: &["-A", "-P"],
        ..NO_RULE
    },
    ToolRule {
        names: &["lftp"],
        user_pass: &["-u", "--user"],
        sep: ',',
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

/// Shells, and programs whose `-c` runs a shell script (`su -c`).
pub const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox", "su", "runuser",
];

/// Programs known to take no password in `-p`/`-P`/`-pw` and no `user:password` in `-u`
/// (a flag, a port, a pid, a count, a regex, a uid:gid), so the rules for programs not
/// known (see [`super::command`]) leave them alone.
pub const NO_PASSWORD: &[&str] = &[
    "mkdir",
    "cp",
    "mv",
    "ln",
    "ls",
    "rm",
    "install",
    "rsync",
    "scp",
    "ssh",
    "sftp",
    "git",
    "grep",
    "egrep",
    "fgrep",
    "rg",
    "ag",
    "xargs",
    "parallel",
    "ps",
    "pgrep",
    "pkill",
    "top",
    "htop",
    "kill",
    "patch",
    "nc",
    "ncat",
    "netcat",
    "socat",
    "tar",
    "cpio",
    "python",
    "pip",
    "uv",
    "perl",
    "ruby",
    "node",
    "npm",
    "npx",
    "pnpm",
    "yarn",
    "cargo",
    "go",
    "make",
    "cmake",
    "sort",
    "uniq",
    "cut",
    "sed",
    "awk",
    "gawk",
    "head",
    "tail",
    "du",
    "df",
    "lsof",
    "ss",
    "netstat",
    "strace",
    "ltrace",
    "gdb",
    "perf",
    "uvicorn",
    "gunicorn",
    "flask",
    "jupyter",
    "pwd",
    "cd",
    "date",
    "read",
    "printf",
    "echo",
    "tee",
    "find",
    "chmod",
    "chown",
    "stat",
    "touch",
    "diff",
    "cmp",
    "file",
    "gzip",
    "xz",
    "bzip2",
    "zstd",
    "unshare",
    "nsenter",
    "ip",
    "iptables",
    "sudo",
    "env",
    "nice",
    "timeout",
    "nohup",
    "setsid",
    "kubectl",
    "psql",
    "pg_dump",
    "pg_restore",
    "pg_dumpall",
    "createdb",
    "dropdb",
    "pgbench",
    "pg_isready",
    "systemctl",
    "journalctl",
    "less",
    "cat",
    "wc",
    "tr",
    "sleep",
    "watch",
    "which",
    "time",
    "bwrap",
    "firejail",
    "chroot",
    "runc",
    "crun",
    "ctr",
    "crictl",
    "sqlite3",
    "jq",
    "yq",
    "wget",
    "ping",
    "dig",
    "host",
    "tmux",
    "screen",
    "setpriv",
    "systemd-run",
    "lsblk",
    "mount",
    "umount",
    "free",
    "uname",
    "id",
    "passwd",
];

/// A program's name as the tables have it: the last part of a path, without a version
/// (`/usr/bin/python3.12` → `python`, `pip3` → `pip`).
pub fn program_name(word: &str) -> &str {
    let base = word.rsplit('/').next().unwrap_or(word);
    let trimmed = base.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    if trimmed.is_empty() || trimmed.ends_with('-') {
        base
    } else {
        trimmed
    }
}
