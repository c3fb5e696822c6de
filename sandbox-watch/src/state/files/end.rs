//! What is read when the capture ends: the final content of written files (sha256), the
//! files a directory moved or linked into a persistence place holds, the git settings a
//! written config file holds, and which opens for write changed nothing.
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::{Files, HASH_LIMIT, Op};
use crate::judge::classify::Classifier;
use crate::judge::gitconfig;

/// Filesystems that account dirty pages: there an open for write the kernel never saw dirty
/// its inode changed nothing (on tmpfs a write in the file's first clock tick dirties nothing).
const DIRTY_ACCOUNTED: &[&str] = &["ext2/3/4", "xfs", "btrfs", "f2fs"];
/// How much of a moved directory is looked at.
const MAX_FILES: usize = 256;
const MAX_DEPTH: usize = 4;
/// Git config files larger than this are not read.
const GIT_CONFIG_MAX: u64 = 1 << 20;

/// Files under `dir` (not following links inside it), relative to it.
fn files_below(dir: &Path, rel: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir.join(rel)) else {
        return;
    };
    for e in entries.filter_map(Result::ok) {
        if out.len() >= MAX_FILES {
            return;
        }
        let r = rel.join(e.file_name());
        match e.file_type() {
            Ok(t) if t.is_dir() && depth > 0 => files_below(dir, &r, depth - 1, out),
            Ok(t) if !t.is_dir() => out.push(r),
            _ => {}
        }
    }
}

impl Files {
    /// Everything the end of the capture reads; the entries it changed (to log them).
    pub fn at_end(&mut self, classifier: &Classifier) -> Vec<usize> {
        self.hash_written();
        let mut changed = self.moved_directories(classifier);
        changed.extend(self.git_settings());
        changed.extend(self.unmodified());
        changed.sort_unstable();
        changed.dedup();
        changed
    }

    /// A directory renamed or linked into a persistence place is persistence for what it
    /// holds: `mv /tmp/h .git/hooks`, `mv /tmp/as ~/.config/autostart`, `ln -s /tmp/h
    /// .git/hooks`. Its files are judged by their paths there.
    fn moved_directories(&mut self, classifier: &Classifier) -> Vec<usize> {
        let mut changed = Vec::new();
        for (i, e) in self.entries.iter_mut().enumerate() {
            if e.result.is_some() {
                continue;
            }
            let at = match (e.op, &e.new_path, &e.link) {
                (Op::Rename, Some(to), _) => to.clone(),
                (Op::Create, _, Some(_)) => e.path.clone(),
                _ => continue,
            };
            // The directory itself, through a symbolic link put there.
            if !Path::new(&at).is_dir() {
                continue;
            }
            let mut found = Vec::new();
            files_below(Path::new(&at), Path::new(""), MAX_DEPTH, &mut found);
            let persistent: Vec<String> = found
                .iter()
                .map(|rel| format!("{at}/{}", rel.display()))
                .filter(|p| classifier.classify(p, 0, false, true).persistence)
                .collect();
            if !persistent.is_empty() {
                e.persistence = true;
                e.persistent_files = Some(persistent);
                changed.push(i);
            }
        }
        changed
    }

    /// The git settings of concern there at the start, by config file (see `git_settings`).
    pub fn git_snapshot(&mut self, configs: &[PathBuf]) {
        for path in configs {
            if let Some(text) = read_config(path) {
                let found = gitconfig::concerns(path, &text);
                self.git_before.insert(path.display().to_string(), found);
            }
        }
    }

    /// A git config written in the capture with settings that make git run something from
    /// outside the repository, not there at the start: persistence (on the last entry that
    /// wrote it).
    fn git_settings(&mut self) -> Vec<usize> {
        let mut last: HashMap<String, usize> = HashMap::new();
        for (i, e) in self.entries.iter().enumerate() {
            if e.result.is_some() {
                continue;
            }
            let path = match (e.op, &e.new_path) {
                (Op::Rename, Some(to)) => to,
                (Op::Write | Op::Create | Op::Truncate, _) => &e.path,
                _ => continue,
            };
            if gitconfig::is_config(path) {
                last.insert(path.clone(), i);
            }
        }
        let mut changed = Vec::new();
        for (path, i) in last {
            let Some(text) = read_config(Path::new(&path)) else {
                continue;
            };
            let before = self.git_before.get(&path).cloned().unwrap_or_default();
            let new: Vec<String> = gitconfig::concerns(Path::new(&path), &text)
                .into_iter()
                .filter(|s| !before.contains(s))
                .collect();
            if !new.is_empty() {
                let e = &mut self.entries[i];
                e.persistence = true;
                e.git_settings = Some(new);
                changed.push(i);
            }
        }
        changed
    }

    /// Opens for write the kernel never saw dirty their inode (where it would have): not
    /// modified, unless another process wrote the same file.
    fn unmodified(&mut self) -> Vec<usize> {
        if !self.dirty_seen {
            return Vec::new();
        }
        let modified: std::collections::HashSet<(Option<String>, Option<u64>)> = self
            .entries
            .iter()
            .filter(|e| e.modified == Some(true))
            .map(|e| (e.dev.clone(), e.ino))
            .collect();
        let mut changed = Vec::new();
        for (i, e) in self.entries.iter_mut().enumerate() {
            let accounted = e
                .fs
                .as_deref()
                .is_some_and(|fs| DIRTY_ACCOUNTED.contains(&fs));
            if matches!(e.op, Op::Write | Op::Create)
                && e.result.is_none()
                && e.modified.is_none()
                && e.ino.is_some()
                && accounted
                && !modified.contains(&(e.dev.clone(), e.ino))
            {
                e.modified = Some(false);
                changed.push(i);
            }
        }
        changed
    }

    /// Hashes the final content of every file that was written or created and still exists.
    pub fn hash_written(&mut self) {
        use sha2::Digest;
        let mut done: HashMap<String, (Option<String>, Option<String>)> = HashMap::new();
        for e in self.entries.iter_mut().filter(|e| e.result.is_none()) {
            let path = match e.op {
                Op::Write | Op::Create => e.path.clone(),
                Op::Rename => match &e.new_path {
                    Some(p) => p.clone(),
                    None => continue,
                },
                _ => continue,
            };
            let (sum, skipped) = done
                .entry(path.clone())
                .or_insert_with(|| {
                    // Not through a symbolic link: one put there later names another file.
                    let Ok(meta) = std::fs::symlink_metadata(&path) else {
                        return (None, Some("gone at the end of the capture".into()));
                    };
                    if meta.file_type().is_symlink() {
                        let to = std::fs::read_link(&path)
                            .map(|t| t.display().to_string())
                            .unwrap_or_default();
                        return (None, Some(format!("a symbolic link (to {to}) at the end")));
                    }
                    if !meta.is_file() {
                        return (None, Some("not a regular file".into()));
                    }
                    if meta.len() > HASH_LIMIT {
                        return (None, Some(format!("larger than {} MiB", HASH_LIMIT >> 20)));
                    }
                    use std::os::unix::fs::OpenOptionsExt as _;
                    let nofollow = std::fs::OpenOptions::new()
                        .read(true)
                        .custom_flags(libc::O_NOFOLLOW)
                        .open(&path);
                    match nofollow {
                        Ok(mut f) => {
                            let mut h = sha2::Sha256::new();
                            match std::io::copy(&mut f, &mut h) {
                                Ok(_) => (Some(hex::encode(h.finalize())), None),
                                Err(e) => (None, Some(format!("unreadable: {e}"))),
                            }
                        }
                        Err(e) => (None, Some(format!("unreadable: {e}"))),
                    }
                })
                .clone();
            e.sha256 = sum;
            e.sha256_skipped = skipped;
        }
    }
}

fn read_config(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > GIT_CONFIG_MAX {
        return None;
    }
    std::fs::read_to_string(path).ok()
}
