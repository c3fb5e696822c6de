//! Writing the report and the summary without letting the agent turn them against the host: a
//! root monitor that writes through a symbolic link the agent planted at `--report` overwrites
//! whatever it points to (/etc/shadow), and one that opens a FIFO planted there hangs.
//!
//! - The report is written to a new file in the same directory (O_CREAT|O_EXCL, mode 0600: it
//!   never follows anything) and renamed over the path: a symlink, FIFO or hard link at the
//!   path is replaced, its target untouched.
//! - The summary is appended to (a job summary is shared): opened O_NOFOLLOW|O_NONBLOCK, then
//!   the opened file must be a regular file with one name (a hard link to another file is
//!   refused), else nothing is written.
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::Path;

/// Writes a whole new file at `path` through `write`, replacing whatever is there (never
/// writing through it).
pub fn replace(path: &Path, write: impl FnOnce(&mut File) -> io::Result<()>) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
        return Err(io::Error::other("is a directory"));
    }
    let mut tmp = tempfile::Builder::new()
        .prefix(".sandbox-watch-")
        .tempfile_in(dir)?;
    write(tmp.as_file_mut())?;
    tmp.as_file_mut().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Opens `path` for appending, created 0600 if missing; refuses a symbolic link, anything
/// that is not a regular file (without waiting on a FIFO) and a file with other names.
pub fn open_append(path: &Path) -> io::Result<File> {
    let f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => io::Error::other("is a symbolic link; refused"),
            Some(libc::ENXIO) => io::Error::other("is a FIFO without a reader; refused"),
            _ => e,
        })?;
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::other("is not a regular file; refused"));
    }
    if meta.nlink() > 1 {
        return Err(io::Error::other(format!(
            "has {} names (a hard link to another file?); refused",
            meta.nlink()
        )));
    }
    Ok(f)
}

/// Appends `text` to `path` as [`open_append`] allows.
pub fn append(path: &Path, text: &[u8]) -> io::Result<()> {
    open_append(path)?.write_all(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn victim(dir: &Path) -> std::path::PathBuf {
        let v = dir.join("victim");
        std::fs::write(&v, b"secret\n").unwrap();
        v
    }

    #[test]
    fn a_symlink_or_fifo_at_the_report_is_replaced_not_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let v = victim(dir.path());
        let report = dir.path().join("report.json");
        std::os::unix::fs::symlink(&v, &report).unwrap();
        replace(&report, |f| f.write_all(b"{}")).unwrap();
        assert_eq!(
            std::fs::read(&v).unwrap(),
            b"secret\n",
            "the target was written"
        );
        assert!(!std::fs::symlink_metadata(&report).unwrap().is_symlink());
        assert_eq!(std::fs::read(&report).unwrap(), b"{}");
        // A FIFO: replaced at once, no wait for a reader.
        let fifo = dir.path().join("fifo.json");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        replace(&fifo, |f| f.write_all(b"{}")).unwrap();
        assert!(std::fs::metadata(&fifo).unwrap().is_file());
        // A hard link: the other name keeps its content.
        let hard = dir.path().join("hard.json");
        std::fs::hard_link(&v, &hard).unwrap();
        replace(&hard, |f| f.write_all(b"{}")).unwrap();
        assert_eq!(std::fs::read(&v).unwrap(), b"secret\n");
        assert!(replace(dir.path(), |_| Ok(())).is_err(), "a directory");
    }

    #[test]
    fn the_summary_is_never_appended_through_a_link_or_to_a_fifo() {
        let dir = tempfile::tempdir().unwrap();
        let v = victim(dir.path());
        let link = dir.path().join("summary.md");
        std::os::unix::fs::symlink(&v, &link).unwrap();
        let e = append(&link, b"x").unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        let hard = dir.path().join("hard.md");
        std::fs::hard_link(&v, &hard).unwrap();
        let e = append(&hard, b"x").unwrap_err();
        assert!(e.to_string().contains("names"), "{e}");
        assert_eq!(std::fs::read(&v).unwrap(), b"secret\n");
        let fifo = dir.path().join("fifo.md");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        assert!(append(&fifo, b"x").is_err(), "a FIFO");
        let plain = dir.path().join("plain.md");
        append(&plain, b"a").unwrap();
        append(&plain, b"b").unwrap();
        assert_eq!(std::fs::read(&plain).unwrap(), b"ab");
    }
}
