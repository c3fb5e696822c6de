//! How far a log has been delivered, per endpoint: `<log>.otlp-cursor` beside the log, JSON
//! `{"session": ID, "endpoints": {URL: {"offset": BYTES, "records": N}}}`, replaced whole
//! (write and rename) after each batch the collector took. A lost or stale cursor only means
//! records are sent again (at least once, never fewer).
use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Where one endpoint's delivery stands: the first `records` lines (`offset` bytes) are in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    pub offset: u64,
    pub records: u64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    session: String,
    endpoints: BTreeMap<String, Position>,
}

/// The cursor file of one log.
#[derive(Debug)]
pub struct Cursor {
    path: PathBuf,
    file: File,
}

/// The cursor's path for a log.
pub fn path_for(log: &Path) -> PathBuf {
    let mut name = log.file_name().unwrap_or_default().to_os_string();
    name.push(".otlp-cursor");
    log.with_file_name(name)
}

impl Cursor {
    /// The cursor of `log` for `session`: what was saved, when it was saved for that session
    /// (a log overwritten by a new capture starts again), else nothing sent yet.
    pub fn load(log: &Path, session: &str) -> Cursor {
        let path = path_for(log);
        let file = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<File>(&b).ok())
            .filter(|f| f.session == session)
            .unwrap_or_else(|| File {
                session: session.to_string(),
                endpoints: BTreeMap::new(),
            });
        Cursor { path, file }
    }

    pub fn position(&self, endpoint: &str) -> Position {
        self.file
            .endpoints
            .get(endpoint)
            .copied()
            .unwrap_or_default()
    }

    /// Records a new position and writes the file (mode 0600, replaced atomically).
    pub fn save(&mut self, endpoint: &str, at: Position) -> std::io::Result<()> {
        self.file.endpoints.insert(endpoint.to_string(), at);
        let dir = self
            .path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
        serde_json::to_writer(&mut tmp, &self.file)?;
        tmp.write_all(b"\n")?;
        tmp.persist(&self.path).map_err(|e| e.error)?;
        Ok(())
    }

    /// Removes the file (after the log it belongs to was removed).
    pub fn remove(&self) {
        let _ = std::fs::remove_file(&self.path);
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saved_per_endpoint_and_per_session() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("run.jsonl");
        assert_eq!(path_for(&log), dir.path().join("run.jsonl.otlp-cursor"));
        let mut c = Cursor::load(&log, "s1");
        assert_eq!(c.position("http://a"), Position::default());
        let p = Position {
            offset: 100,
            records: 2,
        };
        c.save("http://a", p).unwrap();
        let c = Cursor::load(&log, "s1");
        assert_eq!(c.position("http://a"), p);
        assert_eq!(c.position("http://b"), Position::default());
        // Another session in the same file name starts again.
        assert_eq!(
            Cursor::load(&log, "s2").position("http://a"),
            Position::default()
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(c.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // A garbled file is as none.
        std::fs::write(c.path(), b"{garbage").unwrap();
        assert_eq!(
            Cursor::load(&log, "s1").position("http://a"),
            Position::default()
        );
    }
}
