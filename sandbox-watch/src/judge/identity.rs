//! The files the rules name that exist at start, to be known by their inode.
//!
//! A credential or persistence rule is a glob over paths; an agent that opens the same inode by
//! another path (a hard link, a bind mount, `open_tree`, `pivot_root`, `open_by_handle_at`)
//! escapes every path rule. So at start each rule is expanded over the places it can name (the
//! agent's home, root's, the working directory and its repository, and the absolute rules),
//! and every file found is known by its (dev, inode): the classifier then judges any open of
//! that inode as the rule's file, and the kernel sends every open of a credential's inode
//! (`Probe::always_report`) instead of counting repeats.
//!
//! Files created later, and files outside these places matching a `**/` rule, are judged by
//! the path used.
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use globset::GlobBuilder;

use super::classify::{Classifier, InodeRule, RuleKind};

/// At most this many files are known by their inode.
pub const MAX_RULE_PATHS: usize = 4096;
/// At most this many entries of one directory are looked at.
const MAX_LISTED: usize = 2000;
/// How deep a `**` below a directory is followed.
const MAX_DEPTH: usize = 3;

/// Where `**/` rules are expanded: home directories and working directories.
#[derive(Clone, Debug, Default)]
pub struct Roots(pub Vec<PathBuf>);

impl Roots {
    /// The places an agent's files live: its homes, its working directory and the repository
    /// that holds it.
    pub fn new(homes: &[PathBuf], cwd: Option<&Path>) -> Roots {
        let mut roots = Roots::default();
        for h in homes {
            roots.add(h);
        }
        if let Some(cwd) = cwd {
            roots.add(cwd);
            if let Some(repo) = cwd.ancestors().find(|d| d.join(".git").exists()) {
                roots.add(repo);
            }
        }
        roots
    }

    /// One more place (a directory other than `/`, once).
    pub fn add(&mut self, p: &Path) {
        if p.is_absolute() && p.is_dir() && p != Path::new("/") && !self.0.iter().any(|r| r == p) {
            self.0.push(p.to_path_buf());
        }
    }
}

/// The kernel's `dev_t` of a superblock (major << 20 | minor) from `stat`'s `st_dev`.
pub fn kernel_dev(st_dev: u64) -> u32 {
    (libc::major(st_dev) << 20) | libc::minor(st_dev)
}

/// The rules' files that exist now, by (kernel dev, inode number).
pub fn inodes(classifier: &Classifier, roots: &Roots) -> HashMap<(u32, u64), InodeRule> {
    let mut out = HashMap::new();
    for (path, kind) in rule_paths(classifier, roots) {
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        let Some(text) = path.to_str() else { continue };
        let rule = out
            .entry((kernel_dev(meta.dev()), meta.ino()))
            .or_insert_with(|| InodeRule {
                path: text.to_string(),
                credential: false,
                persistence: false,
            });
        match kind {
            RuleKind::Credential => rule.credential = true,
            RuleKind::Persistence => rule.persistence = true,
        }
    }
    out
}

/// The rule files that exist now, with what they are, at most `MAX_RULE_PATHS`.
pub fn rule_paths(classifier: &Classifier, roots: &Roots) -> Vec<(PathBuf, RuleKind)> {
    let mut out: Vec<(PathBuf, RuleKind)> = Vec::new();
    for (glob, kind) in classifier.rule_globs() {
        let (bases, rest): (Vec<PathBuf>, &str) = if let Some(rest) = glob.strip_prefix("**/") {
            (roots.0.clone(), rest)
        } else if let Some(rest) = glob.strip_prefix('/') {
            // procfs and sysfs files are judged by their path (their inodes come and go).
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
    out.sort();
    out.dedup();
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
    out: &mut Vec<(PathBuf, RuleKind)>,
) {
    if out.len() >= MAX_RULE_PATHS {
        return;
    }
    let Some((first, rest)) = parts.split_first() else {
        file(classifier, kind, base, out);
        return;
    };
    if *first == "**" {
        below(classifier, kind, base, MAX_DEPTH, out);
        return;
    }
    if is_glob(first) {
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
fn file(classifier: &Classifier, kind: RuleKind, path: &Path, out: &mut Vec<(PathBuf, RuleKind)>) {
    let Some(text) = path.to_str() else { return };
    if !path.is_file() {
        return;
    }
    let c = classifier.classify(text, 0, false, true);
    let agrees = match kind {
        RuleKind::Credential => c.credential,
        RuleKind::Persistence => c.persistence,
    };
    if agrees {
        out.push((path.to_path_buf(), kind));
    }
}

fn below(
    classifier: &Classifier,
    kind: RuleKind,
    dir: &Path,
    depth: usize,
    out: &mut Vec<(PathBuf, RuleKind)>,
) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.filter_map(Result::ok).take(MAX_LISTED) {
        if out.len() >= MAX_RULE_PATHS {
            return;
        }
        let p = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() && depth > 0 => below(classifier, kind, &p, depth - 1, out),
            Ok(t) if t.is_file() => file(classifier, kind, &p, out),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_find_keys_and_hooks_by_their_inode() {
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
            "secret.toml",
        ] {
            std::fs::write(home.join(f), "x").unwrap();
        }
        // A hard link elsewhere is the same inode: found by it, not by its name.
        std::fs::hard_link(home.join(".ssh/id_rsa"), dir.path().join("innocent.txt")).unwrap();
        let c = Classifier::new(&["secret.toml".to_string()]).unwrap();
        let roots = Roots::new(std::slice::from_ref(&home), Some(&home.join("repo")));
        let found = rule_paths(&c, &roots);
        let kind = |p: &str| {
            found
                .iter()
                .find(|(f, _)| *f == home.join(p))
                .map(|(_, k)| *k)
        };
        assert_eq!(kind(".ssh/id_rsa"), Some(RuleKind::Credential));
        assert_eq!(kind(".ssh/id_rsa.pub"), None, "{found:#?}");
        assert_eq!(kind(".ssh/known_hosts"), None);
        assert_eq!(kind(".bashrc"), Some(RuleKind::Persistence));
        assert_eq!(kind("secret.toml"), Some(RuleKind::Credential));
        assert_eq!(
            kind("repo/.git/hooks/pre-commit"),
            Some(RuleKind::Persistence)
        );
        assert_eq!(kind("repo/.git/hooks/pre-commit.sample"), None);

        let by_inode = inodes(&c, &roots);
        let link = std::fs::metadata(dir.path().join("innocent.txt")).unwrap();
        let rule = &by_inode[&(kernel_dev(link.dev()), link.ino())];
        assert_eq!(rule.path, home.join(".ssh/id_rsa").to_str().unwrap());
        assert!(rule.credential && !rule.persistence);
    }

    #[test]
    fn kernel_dev_is_major_above_20_bits_of_minor() {
        assert_eq!(kernel_dev(libc::makedev(8, 1)), (8 << 20) | 1);
        assert_eq!(kernel_dev(libc::makedev(259, 70000)), (259 << 20) | 70000);
    }
}
