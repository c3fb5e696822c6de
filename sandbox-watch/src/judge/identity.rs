//! The files the rules name that exist at start, to be known by their inode in the kernel.
//!
//! A credential or persistence rule is a glob over paths; an agent that opens the same inode by
//! another path (a hard link, a bind mount, `open_tree`, `pivot_root`, `open_by_handle_at`)
//! escapes every path rule. So at start each rule is expanded over the places it can name
//! (the agent's home, root's, the working directory and its repository, and the absolute
//! rules), and every file found is handed to the kernel (`Probe::register`), which then flags
//! any access to that inode whatever path it uses. Rules that say "anything in this
//! directory" (`.git/hooks/*`, `.config/autostart/*.desktop`, `/etc/cron.d/*`) also hand over
//! the directory: a file created in it through another path is judged as if created there.
//!
//! Files created later, and files outside these places matching a `**/` rule, are judged by
//! the path used (a credential found by its path is then known by its inode too).
use std::path::{Path, PathBuf};

use globset::GlobBuilder;
use sandbox_watch_common::{ID_CREDENTIAL, ID_CREDENTIAL_DIR, ID_PERSISTENCE, ID_PERSISTENCE_DIR};

use super::classify::{Classifier, RuleKind};

/// At most this many paths are handed to the kernel (its map holds 65,536).
pub const MAX_RULE_PATHS: usize = 4096;
/// At most this many entries of one directory are looked at.
const MAX_LISTED: usize = 2000;
/// How deep a `**` below a directory is followed.
const MAX_DEPTH: usize = 3;

/// Where `**/` rules are expanded: home directories and working directories.
#[derive(Clone, Debug, Default)]
pub struct Roots(pub Vec<PathBuf>);

impl Roots {
    /// The places an agent's files live: its home (the `--user`'s, the invoking user's, root's,
    /// `$HOME`), its working directory and the repository that holds it.
    pub fn new(homes: &[PathBuf], cwd: Option<&Path>) -> Roots {
        let mut roots: Vec<PathBuf> = Vec::new();
        let mut add = |p: &Path| {
            if p.is_absolute() && p.is_dir() && p != Path::new("/") && !roots.iter().any(|r| r == p)
            {
                roots.push(p.to_path_buf());
            }
        };
        for h in homes {
            add(h);
        }
        if let Some(cwd) = cwd {
            add(cwd);
            if let Some(repo) = cwd.ancestors().find(|d| d.join(".git").exists()) {
                add(repo);
            }
        }
        Roots(roots)
    }
}

/// The rule paths that exist now, with their `ID_*` flags, at most `MAX_RULE_PATHS`.
pub fn rule_paths(classifier: &Classifier, roots: &Roots) -> Vec<(PathBuf, u32)> {
    let mut out: Vec<(PathBuf, u32)> = Vec::new();
    for (glob, kind) in classifier.rule_globs() {
        let (bases, rest): (Vec<PathBuf>, &str) = if let Some(rest) = glob.strip_prefix("**/") {
            (roots.0.clone(), rest)
        } else if let Some(rest) = glob.strip_prefix('/') {
            if rest.starts_with("proc/") || rest.starts_with("sys/") {
                continue;
            }
            (vec![PathBuf::from("/")], rest)
        } else {
            continue;
        };
        let parts: Vec<&str> = rest.split('/').filter(|p| !p.is_empty()).collect();
        for base in bases {
            expand(classifier, kind, &base, &parts, &mut out);
        }
    }
    // One entry a path, the flags of every rule that named it.
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out.dedup_by(|later, first| {
        if later.0 == first.0 {
            first.1 |= later.1;
            true
        } else {
            false
        }
    });
    out.truncate(MAX_RULE_PATHS);
    out
}

fn is_glob(part: &str) -> bool {
    part.contains(['*', '?', '[', '{'])
}

/// Entries of `dir` whose name matches one path component's glob.
fn matching(dir: &Path, part: &str) -> Vec<PathBuf> {
    let Ok(glob) = GlobBuilder::new(part).literal_separator(true).build() else {
        return Vec::new();
    };
    let matcher = glob.compile_matcher();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .take(MAX_LISTED)
        .filter(|e| matcher.is_match(e.file_name()))
        .map(|e| e.path())
        .collect()
}

fn expand(
    classifier: &Classifier,
    kind: RuleKind,
    base: &Path,
    parts: &[&str],
    out: &mut Vec<(PathBuf, u32)>,
) {
    if out.len() >= MAX_RULE_PATHS {
        return;
    }
    let Some((first, rest)) = parts.split_first() else {
        file(classifier, base, out);
        return;
    };
    if *first == "**" {
        // Anything below: the directory itself, and what is in it now.
        directory(kind, base, out);
        below(classifier, base, MAX_DEPTH, out);
        return;
    }
    if is_glob(first) {
        if rest.is_empty() {
            // "Anything (matching) in this directory": new files there are judged too.
            directory(kind, base, out);
        }
        for p in matching(base, first) {
            expand(classifier, kind, &p, rest, out);
        }
        return;
    }
    let next = base.join(first);
    if next.symlink_metadata().is_ok() {
        expand(classifier, kind, &next, rest, out);
    }
}

/// A file a rule names: kept when the classifier (with its exceptions) agrees.
fn file(classifier: &Classifier, path: &Path, out: &mut Vec<(PathBuf, u32)>) {
    let Some(text) = path.to_str() else { return };
    if !path.is_file() {
        return;
    }
    let c = classifier.classify(text, 0, false, true);
    let mut flags = 0;
    if c.credential {
        flags |= ID_CREDENTIAL;
    }
    if c.persistence {
        flags |= ID_PERSISTENCE;
    }
    if flags != 0 {
        out.push((path.to_path_buf(), flags));
    }
}

fn directory(kind: RuleKind, path: &Path, out: &mut Vec<(PathBuf, u32)>) {
    if path.is_dir() {
        let flags = match kind {
            RuleKind::Credential => ID_CREDENTIAL_DIR,
            RuleKind::Persistence => ID_PERSISTENCE_DIR,
        };
        out.push((path.to_path_buf(), flags));
    }
}

fn below(classifier: &Classifier, dir: &Path, depth: usize, out: &mut Vec<(PathBuf, u32)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.filter_map(Result::ok).take(MAX_LISTED) {
        if out.len() >= MAX_RULE_PATHS {
            return;
        }
        let p = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() && depth > 0 => below(classifier, &p, depth - 1, out),
            Ok(t) if t.is_file() => file(classifier, &p, out),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_find_keys_hooks_and_their_directories() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        for d in [".ssh", ".config/autostart", "repo/.git/hooks"] {
            std::fs::create_dir_all(home.join(d)).unwrap();
        }
        for f in [
            ".ssh/id_rsa",
            ".ssh/id_rsa.pub",
            ".ssh/known_hosts",
            ".bashrc",
            "repo/.git/hooks/pre-commit",
            "repo/.git/hooks/pre-commit.sample",
        ] {
            std::fs::write(home.join(f), "x").unwrap();
        }
        let c = Classifier::new(&["secret.toml".to_string()]).unwrap();
        std::fs::write(home.join("secret.toml"), "x").unwrap();
        let found = rule_paths(&c, &Roots::new(&[home.clone()], Some(&home.join("repo"))));
        let flags = |p: &str| {
            found
                .iter()
                .find(|(f, _)| *f == home.join(p))
                .map(|(_, fl)| *fl)
        };
        assert_eq!(flags(".ssh/id_rsa"), Some(ID_CREDENTIAL));
        assert_eq!(flags(".ssh/id_rsa.pub"), None, "{found:#?}");
        assert_eq!(flags(".ssh/known_hosts"), None);
        assert_eq!(flags(".bashrc"), Some(ID_PERSISTENCE));
        assert_eq!(flags("secret.toml"), Some(ID_CREDENTIAL));
        assert_eq!(flags("repo/.git/hooks/pre-commit"), Some(ID_PERSISTENCE));
        assert_eq!(flags("repo/.git/hooks/pre-commit.sample"), None);
        assert_eq!(flags("repo/.git/hooks"), Some(ID_PERSISTENCE_DIR));
        assert_eq!(flags(".config/autostart"), Some(ID_PERSISTENCE_DIR));
        assert_eq!(flags(".ssh"), Some(ID_CREDENTIAL_DIR));
    }
}
