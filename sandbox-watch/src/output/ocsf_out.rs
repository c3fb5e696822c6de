//! `--ocsf PATH`: the capture's records as OCSF events (see `ocsf.rs` for the mapping), one
//! JSON object a line, written as they come (batched like the evidence log).
use std::fs::File;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

pub struct OcsfWriter {
    file: File,
    path: PathBuf,
    pending: Vec<u8>,
    /// Events written or waiting.
    pub events: u64,
}

impl OcsfWriter {
    /// Creates the file (mode 0600), never through a symlink, refusing an existing file unless
    /// `force`.
    pub fn create(path: &Path, force: bool) -> Result<OcsfWriter, crate::error::Usage> {
        let mut options = std::fs::OpenOptions::new();
        options
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW);
        if force {
            options.create(true).truncate(true);
        } else {
            options.create_new(true);
        }
        let file = options.open(path).map_err(|e| {
            let why = match e.raw_os_error() {
                Some(libc::EEXIST) => "already exists; pass --force to overwrite it".to_string(),
                Some(libc::ELOOP) => "is a symbolic link; refusing to write through it".to_string(),
                _ => e.to_string(),
            };
            crate::error::Usage(format!("--ocsf {}: {why}", path.display()))
        })?;
        Ok(OcsfWriter {
            file,
            path: path.to_path_buf(),
            pending: Vec::new(),
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
            self.pending.clear();
        }
        Ok(())
    }
}
