//! `--ocsf PATH`: the capture's records as OCSF events (see `ocsf.rs` for the mapping), one
//! JSON object a line, written as they come (batched like the evidence log).
use std::fs::File;
use std::io::Write as _;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use super::watch::{Change, Watched};

pub struct OcsfWriter {
    file: File,
    path: PathBuf,
    pending: Vec<u8>,
    /// Bytes written to the file (what its size must be).
    written: u64,
    /// The file and its path, watched for a delete, rename, replace or truncate.
    watched: Watched,
    /// Events written or waiting.
    pub events: u64,
}

impl OcsfWriter {
    /// The open file's metadata (its inode, for the kernel's list of the monitor's files).
    pub fn metadata(&self) -> std::io::Result<std::fs::Metadata> {
        self.file.metadata()
    }

    /// Creates the file (mode 0600, O_APPEND), never through a symlink, refusing an existing
    /// file unless `force` (then it is emptied).
    pub fn create(path: &Path, force: bool) -> Result<OcsfWriter, crate::error::Usage> {
        let mut options = std::fs::OpenOptions::new();
        // O_APPEND: a truncation by someone else stays visible in the size.
        options
            .append(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC);
        if force {
            options.create(true);
        } else {
            options.create_new(true);
        }
        let usage = |e: std::io::Error| {
            let why = match e.raw_os_error() {
                Some(libc::EEXIST) => "already exists; pass --force to overwrite it".to_string(),
                Some(libc::ELOOP) => "is a symbolic link; refusing to write through it".to_string(),
                _ => e.to_string(),
            };
            crate::error::Usage(format!("--ocsf {}: {why}", path.display()))
        };
        let file = options.open(path).map_err(usage)?;
        // With --force: never a FIFO or device, never a hard link to another file.
        let meta = file.metadata().map_err(usage)?;
        if !meta.is_file() || meta.nlink() > 1 {
            return Err(crate::error::Usage(format!(
                "--ocsf {}: is not a regular file with one name; refusing to write there",
                path.display()
            )));
        }
        file.set_len(0).map_err(usage)?;
        let watched = Watched::new("OCSF export", path, &file).map_err(usage)?;
        Ok(OcsfWriter {
            file,
            path: path.to_path_buf(),
            pending: Vec::new(),
            written: 0,
            watched,
            events: 0,
        })
    }

    pub fn push(&mut self, event: serde_json::Value) {
        if serde_json::to_writer(&mut self.pending, &event).is_ok() {
            self.pending.push(b'\n');
            self.events += 1;
        }
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        if !self.pending.is_empty() {
            self.file.write_all(&self.pending).map_err(|e| {
                std::io::Error::new(e.kind(), format!("{}: {e}", self.path.display()))
            })?;
            self.written += self.pending.len() as u64;
            self.pending.clear();
        }
        Ok(())
    }

    /// What was done to the file or its path since the last call (see [`Watched::check`]).
    pub fn changes(&mut self) -> Vec<Change> {
        self.watched.check(&self.file, self.written)
    }

    /// The file's path as the kernel's records name it.
    pub fn resolved_path(&self) -> &Path {
        self.watched.resolved()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn force_never_truncates_through_a_hard_link_and_never_waits_on_a_fifo() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"precious\n").unwrap();
        let hard = dir.path().join("ocsf.jsonl");
        std::fs::hard_link(&victim, &hard).unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        for planted in [&hard, &fifo] {
            let e = OcsfWriter::create(planted, true).err().expect("refused");
            assert!(e.0.contains("--ocsf"), "{}", e.0);
        }
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious\n");
    }
}
