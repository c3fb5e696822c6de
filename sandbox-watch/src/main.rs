//! sandbox-watch: what an AI agent did inside its sandbox, recorded from the kernel.
//!
//! This file parses the command line and dispatches; the work is in the library
//! (`sandbox_watch::cli` and the folders it calls). The command line, log and report are a
//! contract (see README.md): names stay, fields are added.
use std::process::ExitCode;

use clap::Parser as _;
use sandbox_watch::cli::{self, Cli, Command};
use sandbox_watch::demo;

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let result = match Cli::parse().command {
        None => demo::run(None),
        Some(Command::Demo(a)) => demo::run(a.dir),
        Some(Command::Run(a)) => cli::run(a),
        Some(Command::Attach(a)) => cli::attach(a),
        Some(Command::Container(a)) => cli::container(a),
        Some(Command::Verify {
            otlp_json: Some(file),
            log,
            ..
        }) => Ok(cli::verify_otlp_json(&file, log.as_deref())),
        Some(Command::Verify {
            log: Some(log),
            head,
            records,
            pubkey,
            ..
        }) => Ok(cli::verify(
            &log,
            &sandbox_watch::output::verify::Anchor { head, records },
            pubkey.as_deref(),
        )),
        Some(Command::Verify { log: None, .. }) => unreachable!("clap requires LOG or --otlp-json"),
        Some(Command::Ship(a)) => cli::ship(a),
        Some(Command::Replay(a)) => cli::replay(a),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("sandbox-watch: {}", e.message());
            ExitCode::from(e.exit_code())
        }
    }
}
