//! One error type for every command, and the exit statuses: what status a failure gives is
//! decided here and nowhere else (README, "Exit status"; a contract).
use crate::judge::classify::ClassifyError;
use crate::kernel::probe::ProbeError;
use crate::output::evidence::LogError;

/// Exit statuses besides 0 and the agent's own status (which `run` returns).
pub mod exit {
    /// Any other error; `verify` and `replay`: a tampered log, or not a log.
    pub const OTHER: u8 = 1;
    /// A usage error, found before the agent starts.
    pub const USAGE: u8 = 2;
    /// A `--fail-on` kind was found.
    pub const FAIL_ON: u8 = 3;
    /// The probe cannot start (not root, no BTF, the kernel refused it).
    pub const PROBE: u8 = 4;
    /// `verify` and `replay`: the log is intact but has no end record.
    pub const UNENDED: u8 = 5;
    /// `verify --pubkey`: a signature does not check, the log has none, or its end record
    /// is not signed (rechained, or forged after the capture ended).
    pub const UNSIGNED: u8 = 6;
}

/// A usage error: exit 2 with this sentence (which says what to do).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Usage(pub String);

/// Why a command failed; [`Error::exit_code`] is its status.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A bad option, no such pid or container, a command that cannot be started.
    #[error(transparent)]
    Usage(#[from] Usage),
    /// `--log` cannot be created (exists, a symlink, unwritable).
    #[error(transparent)]
    Log(#[from] LogError),
    /// A bad `--credential` glob.
    #[error(transparent)]
    Credentials(#[from] ClassifyError),
    /// The probe cannot be loaded or attached.
    #[error(transparent)]
    Probe(#[from] ProbeError),
    /// Anything else.
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error::Other(e.into())
    }
}

impl Error {
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Usage(_) | Error::Log(_) | Error::Credentials(_) => exit::USAGE,
            Error::Probe(_) => exit::PROBE,
            Error::Other(_) => exit::OTHER,
        }
    }

    /// The error and its causes, `outer: inner: …`.
    pub fn message(&self) -> String {
        let mut text = self.to_string();
        let mut cause = std::error::Error::source(self);
        while let Some(c) = cause {
            text.push_str(": ");
            text.push_str(&c.to_string());
            cause = c.source();
        }
        text
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
