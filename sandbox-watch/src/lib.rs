//! sandbox-watch: what an AI agent did inside its sandbox, recorded from the kernel.
//!
//! The command line, log and report are a contract (see README.md): names stay, fields are added.
pub mod capture;
pub mod cli;
pub mod demo;
pub mod error;
pub mod judge;
pub mod kernel;
pub mod launch;
pub mod output;
pub mod record;
pub mod replay;
pub mod state;
pub mod time;
pub mod tui;
