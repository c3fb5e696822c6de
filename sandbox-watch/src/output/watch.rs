//! The monitor's own output files (the evidence log, `--ocsf`), watched while it writes them.
//!
//! An agent does not need to open the log to take it away: `rm`, `mv` (away, or another file
//! over it) and truncate(2) work on the path, and the kernel's open hook sees none of them.
//! What they leave behind is plain on the open file and at the path: the file has no name left
//! (no links), another inode is at the path, no inode is there, or the file holds fewer bytes
//! (or more) than this process wrote to it. [`Watched::check`] compares those and names each
//! change once; the capture turns them into `tamper` records.
use std::fs::File;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

/// One change found, in words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// `deleted`, `moved`, `replaced`, `truncated` or `appended`.
    pub what: &'static str,
    pub summary: String,
}

/// An output file: its path and the inode the monitor opened there.
#[derive(Debug)]
pub struct Watched {
    /// What the file is, for the summaries ("evidence log", "OCSF export").
    role: &'static str,
    path: PathBuf,
    /// The path made absolute through its directory (as the kernel's records name it).
    resolved: PathBuf,
    dev: u64,
    ino: u64,
    /// The changes already named (each once).
    said: Vec<&'static str>,
}

impl Watched {
    /// `file` was just opened at `path`.
    pub fn new(role: &'static str, path: &Path, file: &File) -> std::io::Result<Watched> {
        let m = file.metadata()?;
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let resolved = match (std::fs::canonicalize(dir), path.file_name()) {
            (Ok(d), Some(name)) => d.join(name),
            _ => std::path::absolute(path)?,
        };
        Ok(Watched {
            role,
            path: path.to_path_buf(),
            resolved,
            dev: m.dev(),
            ino: m.ino(),
            said: Vec::new(),
        })
    }

    /// The path as the kernel's records name it (absolute, its directory resolved).
    pub fn resolved(&self) -> &Path {
        &self.resolved
    }

    /// What changed since the last check: `file` is the open file, `written` the bytes this
    /// process has written to it (its size, as nothing else may write it).
    pub fn check(&mut self, file: &File, written: u64) -> Vec<Change> {
        let mut found = Vec::new();
        let (role, path) = (self.role, self.path.display());
        let Ok(open) = file.metadata() else {
            return found;
        };
        if open.nlink() == 0 {
            found.push(Change {
                what: "deleted",
                summary: format!(
                    "the {role} {path} was deleted while the monitor wrote it (the records after it \
                     reach no file a path names; the end anchor on stderr and the report still say \
                     what the log held)"
                ),
            });
        }
        match std::fs::symlink_metadata(&self.path) {
            Ok(at) if (at.dev(), at.ino()) != (self.dev, self.ino) => found.push(Change {
                what: "replaced",
                summary: format!(
                    "another file was put at the {role}'s path {path} while the monitor wrote it \
                     (the {role} was moved or deleted first): what is at that path now is not \
                     what the monitor wrote"
                ),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && open.nlink() > 0 => {
                found.push(Change {
                    what: "moved",
                    summary: format!(
                        "the {role} {path} was renamed away while the monitor wrote it (it goes on \
                         writing it under its new name)"
                    ),
                })
            }
            _ => {}
        }
        if open.len() < written {
            found.push(Change {
                what: "truncated",
                summary: format!(
                    "the {role} {path} was truncated while the monitor wrote it: {} of the {written} \
                     bytes written are left",
                    open.len()
                ),
            });
        } else if open.len() > written {
            found.push(Change {
                what: "appended",
                summary: format!(
                    "someone else wrote to the {role} {path}: it holds {} bytes, the monitor wrote \
                     {written}",
                    open.len()
                ),
            });
        }
        found.retain(|c| !self.said.contains(&c.what));
        self.said.extend(found.iter().map(|c| c.what));
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    fn whats(w: &mut Watched, f: &File, n: u64) -> Vec<&'static str> {
        w.check(f, n).iter().map(|c| c.what).collect()
    }

    #[test]
    fn each_change_to_the_path_or_the_file_is_named_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        let mut f = std::fs::OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)
            .unwrap();
        let mut w = Watched::new("evidence log", &path, &f).unwrap();
        f.write_all(b"one\n").unwrap();
        assert!(whats(&mut w, &f, 4).is_empty());
        // Someone else appends: more bytes than written.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"x")
            .unwrap();
        assert_eq!(whats(&mut w, &f, 4), ["appended"]);
        // Truncated.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(0)
            .unwrap();
        assert_eq!(whats(&mut w, &f, 4), ["truncated"]);
        assert!(whats(&mut w, &f, 4).is_empty(), "named once");
        // Renamed away.
        let moved = dir.path().join("moved");
        std::fs::rename(&path, &moved).unwrap();
        assert_eq!(whats(&mut w, &f, 0), ["moved"]);
        // Another file over the path.
        std::fs::write(&path, b"forged\n").unwrap();
        assert_eq!(whats(&mut w, &f, 0), ["replaced"]);
        // And the log itself deleted.
        std::fs::remove_file(&moved).unwrap();
        assert_eq!(whats(&mut w, &f, 0), ["deleted"]);
    }

    #[test]
    fn a_file_left_alone_says_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        let mut f = File::create(&path).unwrap();
        let mut w = Watched::new("OCSF export", &path, &f).unwrap();
        for n in 1..=3u64 {
            f.write_all(b"line\n").unwrap();
            assert!(whats(&mut w, &f, 5 * n).is_empty());
        }
    }
}
