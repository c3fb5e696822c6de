//! Git commits and pushes, derived from what the kernel saw: a traced `git` (commit, merge,
//! rebase, am, cherry-pick, revert, pull) renaming its lock file onto a ref under
//! `.git/refs/heads/` (or onto `.git/HEAD`, detached), and the ids the ref file and its reflog
//! held at the end of the capture (the `git_ref` records); pushes from `git push` execs and the
//! connects and DNS questions of their process trees.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::output::report::ProcessEntry;
use crate::record::{GitConfig, GitRef, GitSetting, NetOp, Op, RefUpdate};
use crate::state::files::FileEntry;
use crate::state::network::NetEntry;

/// Subcommands that make commits.
const COMMITTING: &[&str] = &[
    "commit",
    "merge",
    "rebase",
    "am",
    "cherry-pick",
    "revert",
    "pull",
];

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Git {
    pub commits: Vec<Commit>,
    pub pushes: Vec<Push>,
    /// Hook and include settings of config files a traced process put in place.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config: Vec<ConfigSetting>,
}

/// A setting that makes git run hooks from, or read config from, a path: `core.hooksPath`,
/// `include.path`, `includeIf.<condition>.path`, as the config file held it at the end.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConfigSetting {
    /// The config file: a repository's `.git/config`, or a global one (`~/.gitconfig`,
    /// `~/.config/git/config`, `/etc/gitconfig`).
    pub path: String,
    pub key: String,
    /// Redacted as argv is.
    pub value: String,
    /// The path is outside the repository (a global config's always is: it holds for every
    /// repository). Such a setting is persistence: git runs what is there at the next commit.
    pub outside: bool,
    /// The process that put the file in place last.
    pub pid: u32,
}

impl Git {
    pub fn is_empty(&self) -> bool {
        self.commits.is_empty() && self.pushes.is_empty()
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Commit {
    /// The work tree (the directory holding `.git`), or the git directory of a bare repository.
    pub repo: String,
    /// None: a detached HEAD.
    pub branch: Option<String>,
    /// The new commit id: from the ref file's content at the end for its last update, from the
    /// reflog line of this update for earlier ones (`commit_from` says which).
    pub commit: Option<String>,
    #[serde(default)]
    pub commit_from: Option<String>,
    /// The id the ref named before (from the reflog).
    #[serde(default)]
    pub previous: Option<String>,
    /// The reflog's message (`commit (amend): Greet the world`), redacted as argv is.
    #[serde(default)]
    pub message: Option<String>,
    /// The git subcommand of the process that moved the ref.
    pub command: String,
    pub pid: u32,
    /// The ref file moved.
    pub r#ref: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Push {
    pub pid: u32,
    /// The directory git ran in.
    pub repo: Option<String>,
    /// The remote as given on the command line (a name or a URL), if any.
    pub remote: Option<String>,
    /// The remote's host: from a URL given, else the DNS names the push's processes asked for,
    /// else the addresses they connected to.
    pub hosts: Vec<String>,
    /// `addr:port` of each connect made by the push's process tree.
    pub connects: Vec<String>,
}

/// The git subcommand of an argv (`git -C dir commit -m x` → `commit`).
pub fn subcommand(p: &ProcessEntry) -> Option<&str> {
    let exe = p.exe.as_deref().or(p.argv.first().map(String::as_str))?;
    if exe.rsplit('/').next() != Some("git") {
        return None;
    }
    let mut args = p.argv.iter().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "-C" | "-c" | "--git-dir" | "--work-tree" | "--namespace" => {
                args.next();
            }
            s if s.starts_with('-') => {}
            s => return Some(s),
        }
    }
    None
}

/// A ref file a commit moves: (git dir, branch or None for HEAD).
fn ref_of(path: &str) -> Option<(&str, Option<&str>)> {
    if let Some(at) = path.find("/refs/heads/") {
        let (gitdir, branch) = (&path[..at], &path[at + "/refs/heads/".len()..]);
        // `.git/logs/refs/heads/main` is the reflog (appended in place), not the ref.
        return (!branch.is_empty() && !branch.ends_with(".lock") && !gitdir.ends_with("/logs"))
            .then_some((gitdir, Some(branch)));
    }
    let gitdir = path.strip_suffix("/HEAD")?;
    gitdir.ends_with(".git").then_some((gitdir, None))
}

/// Where a file entry put a ref: a lock file renamed onto it (or, for tools that write refs
/// in place, the ref written).
fn ref_written(f: &FileEntry) -> Option<&str> {
    if f.result.is_some() {
        return None;
    }
    let to = match f.op {
        Op::Rename => f.new_path.as_deref()?,
        Op::Write | Op::Create => f.path.as_str(),
        _ => return None,
    };
    ref_of(to).map(|_| to)
}

/// Ref files updated by traced processes, with how many updates each: the capture reads
/// these at the end (their reflog's last that many lines).
pub fn updated_refs(files: &[FileEntry]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for f in files {
        if let Some(r) = ref_written(f) {
            *out.entry(r.to_string()).or_insert(0) += 1;
        }
    }
    out
}

/// The reflog of a ref file.
pub fn reflog_path(ref_path: &str) -> Option<String> {
    let (gitdir, branch) = ref_of(ref_path)?;
    Some(match branch {
        Some(b) => format!("{gitdir}/logs/refs/heads/{b}"),
        None => format!("{gitdir}/logs/HEAD"),
    })
}

/// The latest program run by `pid` (pids can be reused: the last exec is the one a later
/// event is about).
fn latest(processes: &[ProcessEntry], pid: u32) -> Option<&ProcessEntry> {
    processes
        .iter()
        .rev()
        .find(|p| p.pid == pid && !p.fork_only)
}

/// The git command a process belongs to: its own, or its nearest git ancestor's (hooks and
/// helpers run below it).
fn git_command(processes: &[ProcessEntry], pid: u32) -> Option<(&ProcessEntry, &str)> {
    let mut at = pid;
    for _ in 0..4 {
        let p = latest(processes, at).or_else(|| processes.iter().rev().find(|p| p.pid == at))?;
        if let Some(sub) = subcommand(p) {
            return Some((p, sub));
        }
        at = p.ppid;
    }
    None
}

pub fn derive(
    processes: &[ProcessEntry],
    files: &[FileEntry],
    network: &[NetEntry],
    refs: &BTreeMap<String, GitRef>,
    configs: &BTreeMap<String, GitConfig>,
) -> Git {
    let mut commits = Vec::new();
    // Each ref's updates in the order the kernel saw them, paired with its reflog's lines.
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    let totals = updated_refs(files);
    for f in files {
        let Some(to) = ref_written(f) else { continue };
        let nth = seen.entry(to).or_insert(0);
        let i = *nth;
        *nth += 1;
        let Some((_, sub)) = git_command(processes, f.pid) else {
            continue;
        };
        if !COMMITTING.contains(&sub) {
            continue;
        }
        let Some((gitdir, branch)) = ref_of(to) else {
            continue;
        };
        let total = totals.get(to).copied().unwrap_or(0);
        let at_end = refs.get(to);
        // The reflog's lines are the last `total` (or fewer): line i of the updates seen.
        let line = at_end.and_then(|r| {
            let missing = total.saturating_sub(r.reflog.len());
            i.checked_sub(missing).and_then(|j| r.reflog.get(j))
        });
        let (commit, commit_from) = if i + 1 == total
            && let Some(c) = at_end.and_then(|r| r.commit.clone())
        {
            (Some(c), Some("ref".to_string()))
        } else if let Some(l) = line {
            (Some(l.new.clone()), Some("reflog".to_string()))
        } else {
            (None, None)
        };
        let repo = gitdir.strip_suffix("/.git").unwrap_or(gitdir);
        commits.push(Commit {
            repo: repo.to_string(),
            branch: branch.map(str::to_string),
            commit,
            commit_from,
            previous: line.map(|l| l.old.clone()),
            message: line.map(|l| l.message.clone()),
            command: sub.to_string(),
            pid: f.pid,
            r#ref: to.to_string(),
        });
    }
    let pushes = processes
        .iter()
        .filter(|p| !p.fork_only && subcommand(p) == Some("push"))
        .map(|p| push(p, processes, network))
        .collect();
    let config = configs
        .values()
        .flat_map(|c| {
            c.settings.iter().map(|s| ConfigSetting {
                path: c.path.clone(),
                key: s.key.clone(),
                value: s.value.clone(),
                outside: points_outside(&c.path, &s.value),
                pid: c.pid,
            })
        })
        .collect();
    Git {
        commits,
        pushes,
        config,
    }
}

/// The repository a config file belongs to: `Some(work tree)` for `<tree>/.git/config`,
/// `None` for a global config; not a git config file: no answer.
fn config_repo(path: &str) -> Option<Option<&str>> {
    if let Some(tree) = path.strip_suffix("/.git/config") {
        return Some(Some(tree));
    }
    let global = path.ends_with("/.gitconfig")
        || path.ends_with("/.config/git/config")
        || path == "/etc/gitconfig";
    global.then_some(None)
}

/// Git config files a traced process put in place (created, written, or renamed onto, as
/// `git config` does with `config.lock`): file → the pid of the last.
pub fn configs_written(files: &[FileEntry]) -> BTreeMap<String, u32> {
    files
        .iter()
        .filter(|f| f.result.is_none())
        .filter_map(|f| {
            let to = match f.op {
                Op::Create | Op::Write => Some(&f.path),
                Op::Rename => f.new_path.as_ref(),
                _ => None,
            }?;
            config_repo(to).map(|_| (to.clone(), f.pid))
        })
        .collect()
}

/// Whether a hooks or include path in a config file points outside its repository. Relative
/// paths are the repository's own (hooksPath is relative to the work tree, an include to
/// the config's directory) unless they climb out; `~` is the user's home.
pub fn points_outside(config: &str, value: &str) -> bool {
    let Some(Some(tree)) = config_repo(config) else {
        return true;
    };
    if value.starts_with('~') || value.split('/').any(|p| p == "..") {
        return true;
    }
    value.starts_with('/') && !value.starts_with(&format!("{tree}/"))
}

/// The hook and include settings of a config file's text, with their keys as git names them.
fn hook_settings(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut section = String::new();
    let mut sub: Option<String> = None;
    for line in text.lines() {
        let line = line.trim();
        if let Some(head) = line.strip_prefix('[') {
            let head = head.split(']').next().unwrap_or("");
            let (name, rest) = head.split_once(char::is_whitespace).unwrap_or((head, ""));
            section = name.to_ascii_lowercase();
            let rest = rest.trim().trim_matches('"');
            sub = (!rest.is_empty()).then(|| rest.to_string());
            continue;
        }
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let (key, value) = line.split_once('=').unwrap_or((line, ""));
        let key = key.trim().to_ascii_lowercase();
        let value = value.trim().trim_matches('"').to_string();
        let name = match (section.as_str(), sub.as_deref(), key.as_str()) {
            ("core", None, "hookspath") => "core.hooksPath".to_string(),
            ("include", None, "path") => "include.path".to_string(),
            ("includeif", Some(cond), "path") => format!("includeIf.{cond}.path"),
            _ => continue,
        };
        out.push((name, value));
    }
    out
}

/// A config file's hook and include settings as they are now: the `git_config` record the
/// capture logs at the end (values redacted as argv is; the count of redactions).
pub fn read_config(path: &str, pid: u32) -> (GitConfig, usize) {
    let mut c = GitConfig {
        path: path.to_string(),
        pid,
        ..GitConfig::default()
    };
    let mut redacted = 0;
    match crate::state::files::read_now(path, 1 << 20, false) {
        Ok(b) => {
            for (key, value) in hook_settings(&String::from_utf8_lossy(&b)) {
                let value: String = value.chars().take(400).collect();
                let (v, n) = crate::judge::redact::redact_argv(&[value]);
                redacted += n;
                let value = v.into_iter().next().unwrap_or_default();
                c.settings.push(GitSetting { key, value });
            }
        }
        Err(why) => c.skipped = Some(why),
    }
    (c, redacted)
}

fn push(p: &ProcessEntry, processes: &[ProcessEntry], network: &[NetEntry]) -> Push {
    let remote = p
        .argv
        .iter()
        .skip_while(|a| a.as_str() != "push")
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .cloned();
    // The push's process tree: it and every process below it.
    let mut tree = vec![p.pid];
    let mut grew = true;
    while grew {
        grew = false;
        for q in processes {
            if tree.contains(&q.ppid) && !tree.contains(&q.pid) {
                tree.push(q.pid);
                grew = true;
            }
        }
    }
    let mine = network.iter().filter(|n| tree.contains(&n.pid));
    let connects: Vec<String> = mine
        .clone()
        .filter(|n| n.op == NetOp::Connect)
        .filter_map(|n| Some(format!("{}:{}", n.addr.as_deref()?, n.port?)))
        .collect();
    let mut hosts: Vec<String> = remote.as_deref().and_then(url_host).into_iter().collect();
    if hosts.is_empty() {
        hosts = mine
            .filter(|n| n.op == NetOp::Dns)
            .filter_map(|n| n.name.clone())
            .collect();
    }
    if hosts.is_empty() {
        hosts = connects
            .iter()
            .map(|c| {
                c.rsplit_once(':')
                    .map_or(c.as_str(), |(a, _)| a)
                    .to_string()
            })
            .collect();
    }
    hosts.dedup();
    Push {
        pid: p.pid,
        repo: p.cwd.clone(),
        remote,
        hosts,
        connects,
    }
}

/// The host of a git remote URL: `https://host:port/x`, `ssh://user@host/x`, `user@host:x`.
pub fn url_host(remote: &str) -> Option<String> {
    let rest = match remote.split_once("://") {
        Some((_, rest)) => rest,
        None if remote.contains(':') && !remote.starts_with('/') => remote,
        None => return None,
    };
    let authority = rest.split(['/']).next()?;
    let host = authority.rsplit('@').next()?;
    let host = if let Some(v6) = host.strip_prefix('[') {
        v6.split(']').next()?
    } else {
        host.split(':').next()?
    };
    (!host.is_empty()).then(|| host.to_string())
}

/// A reflog line: `old new Name <mail> 1700000000 +0000\tmessage`.
pub fn parse_reflog_line(line: &str) -> Option<(String, String, String)> {
    let (head, message) = line.split_once('\t').unwrap_or((line, ""));
    let mut words = head.split(' ');
    let old = words.next()?;
    let new = words.next()?;
    let hex =
        |s: &str| (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| b.is_ascii_hexdigit());
    (hex(old) && hex(new)).then(|| (old.to_string(), new.to_string(), message.to_string()))
}

/// A ref file and its reflog as they are now: the `git_ref` record the capture logs at the
/// end, with the last `updates` reflog lines (messages redacted; the count of redactions).
pub fn read_ref(path: &str, updates: usize) -> (GitRef, usize) {
    use crate::state::files::read_now;
    let (commit, skipped) = match read_now(path, 4096, false) {
        Ok(b) => {
            let text = String::from_utf8_lossy(&b).trim().to_string();
            if text.len() >= 40 && text.bytes().all(|c| c.is_ascii_hexdigit()) {
                (Some(text), None)
            } else if text.starts_with("ref: ") {
                (None, Some("a symbolic ref at the end".to_string()))
            } else {
                (None, Some("not a commit id at the end".to_string()))
            }
        }
        Err(why) => (None, Some(why)),
    };
    let mut redacted = 0;
    let reflog = reflog_path(path)
        .and_then(|log| read_now(&log, 1 << 20, true).ok())
        .map(|b| {
            let text = String::from_utf8_lossy(&b).into_owned();
            let lines: Vec<&str> = text.lines().collect();
            let from = lines.len().saturating_sub(updates);
            lines[from..]
                .iter()
                .filter_map(|l| parse_reflog_line(l))
                .map(|(old, new, message)| {
                    let message: String = message.chars().take(200).collect();
                    let (m, n) = crate::judge::redact::redact_argv(&[message]);
                    redacted += n;
                    RefUpdate {
                        old,
                        new,
                        message: m.into_iter().next().unwrap_or_default(),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    (
        GitRef {
            path: path.to_string(),
            commit,
            skipped,
            reflog,
        },
        redacted,
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn hook_and_include_settings_are_read_and_judged_by_where_they_point() {
        let text = "[core]\n\tbare = false\n\thooksPath = /tmp/h\n[include]\n  path = ../x.inc\n\
                    [includeIf \"gitdir:~/w/\"]\n\tpath = \"~/evil\"\n[remote \"o\"]\n\turl = x\n";
        assert_eq!(
            super::hook_settings(text),
            [
                ("core.hooksPath", "/tmp/h"),
                ("include.path", "../x.inc"),
                ("includeIf.gitdir:~/w/.path", "~/evil"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string()))
        );
        let repo = "/w/app/.git/config";
        assert!(super::points_outside(repo, "/tmp/h"));
        assert!(super::points_outside(repo, "../x.inc"));
        assert!(super::points_outside(repo, "~/evil"));
        assert!(!super::points_outside(repo, ".githooks"));
        assert!(!super::points_outside(repo, "/w/app/.githooks"));
        assert!(super::points_outside(repo, "/w/app2/h"));
        assert!(super::points_outside("/home/u/.gitconfig", ".githooks"));
    }

    use super::*;

    #[test]
    fn refs_and_hosts_read_as_git_writes_them() {
        assert_eq!(
            ref_of("/w/app/.git/refs/heads/feature/x"),
            Some(("/w/app/.git", Some("feature/x")))
        );
        assert_eq!(ref_of("/w/app/.git/HEAD"), Some(("/w/app/.git", None)));
        assert_eq!(ref_of("/w/app/.git/refs/heads/main.lock"), None);
        assert_eq!(ref_of("/w/app/HEAD"), None);
        assert_eq!(ref_of("/w/app/.git/logs/refs/heads/main"), None);
        assert_eq!(
            reflog_path("/w/app/.git/refs/heads/main").as_deref(),
            Some("/w/app/.git/logs/refs/heads/main")
        );
        assert_eq!(
            url_host("https://github.com/a/b.git").as_deref(),
            Some("github.com")
        );
        assert_eq!(
            url_host("git@gitlab.com:a/b.git").as_deref(),
            Some("gitlab.com")
        );
        assert_eq!(url_host("ssh://u@[::1]:22/x").as_deref(), Some("::1"));
        assert_eq!(url_host("origin"), None);
        assert_eq!(url_host("/srv/bare.git"), None);
        let z = "0".repeat(40);
        let a = "a".repeat(40);
        assert_eq!(
            parse_reflog_line(&format!("{z} {a} A <a@b> 1 +0000\tcommit (initial): x")),
            Some((z.clone(), a.clone(), "commit (initial): x".into()))
        );
        assert_eq!(parse_reflog_line("garbage"), None);
    }
}
