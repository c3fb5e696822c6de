//! The command line: clap's definitions and the checks of their values ([`args`]), and the
//! commands themselves. `main.rs` parses and dispatches; every failure is an
//! [`Error`](crate::error::Error) that knows its exit status.
mod args;
mod export;
mod log;
mod outputs;
mod watch;

use std::io::Write as _;

pub use args::{Cli, Command};
pub use export::{ship, verify_otlp_json};
pub use log::{replay, verify};
pub use watch::{attach, container, run};

/// Prints a line on stdout; a closed pipe (`| head`) is not worth a panic.
pub fn say(text: &str) {
    let _ = writeln!(std::io::stdout(), "{text}");
}
