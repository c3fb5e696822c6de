//! `verify` and `replay`: the commands on a recorded log (no root, no kernel).
use std::path::Path;

use super::args::ReplayArgs;
use super::outputs::{check_outputs, conclude, file_key, summary_option, summary_path};
use super::say;
use super::watch::{interactive, runtime, tui_options};
use crate::error::{Result, Usage, exit};
use crate::output::sign;
use crate::output::verify::{self, Verdict};
use crate::{replay, tui};

/// `verify LOG [--head H] [--records N] [--pubkey P]`: the status is the verdict's (0 intact
/// and ended, 1 tampered, 5 unended); 1 as well when the log does not match the anchor given;
/// 6 when the signatures do not vouch for it (see [`verify::Vouch::judge`]); 2 when the log or
/// the key cannot be read.
pub fn verify(log: &Path, anchor: &verify::Anchor, pubkey: Option<&Path>) -> u8 {
    let key = match pubkey.map(sign::load_public).transpose() {
        Ok(k) => k,
        Err(e) => {
            eprintln!("sandbox-watch: {e}");
            return exit::USAGE;
        }
    };
    let checked = match &key {
        Some(key) => verify::verify_signed(log, key).map(|(v, vouch)| (v, Some(vouch))),
        None => verify::verify(log).map(|v| (v, None)),
    };
    match checked {
        Ok((v, vouch)) => {
            let anchored =
                std::fs::File::open(log).and_then(|f| anchor.check(&v, std::io::BufReader::new(f)));
            match anchored {
                Ok(verify::Anchored::Mismatch(why)) => {
                    eprintln!("{}: DOES NOT MATCH THE ANCHOR: {why}.", log.display());
                    return exit::OTHER;
                }
                Ok(verify::Anchored::Matches { at, after }) if after > 0 => eprintln!(
                    "{}: the anchor vouches for records 1 to {at}; the {after} after it are \
                     not covered by this anchor (a later one, or --pubkey, covers them)",
                    log.display()
                ),
                Ok(_) => {}
                Err(e) => {
                    eprintln!("{}: cannot read: {e}", log.display());
                    return exit::USAGE;
                }
            }
            let shown = log.display().to_string();
            let (code, msg) = match vouch {
                Some(vouch) => vouch.judge(&v, &shown),
                None => (v.exit_code(), v.message(&shown)),
            };
            if code == 0 {
                say(&msg)
            } else {
                eprintln!("{msg}")
            }
            code
        }
        // No such file, a directory, no permission: the argument is wrong, as for `replay`.
        Err(e) => {
            eprintln!(
                "{}: cannot read: {e}; give the path of a log written by --log",
                log.display()
            );
            exit::USAGE
        }
    }
}

pub fn replay(args: ReplayArgs) -> Result<u8> {
    let summary = summary_path(&args.out);
    check_outputs(&[
        ("--report", args.out.report.as_deref()),
        (summary_option(&args.out), summary.as_deref()),
    ])?;
    for (option, path) in [("--report", &args.out.report), ("--summary", &summary)] {
        if path
            .as_deref()
            .is_some_and(|p| file_key(p) == file_key(&args.log))
        {
            return Err(Usage(format!(
                "the log and {option} name the same file ({}); give the output its own",
                args.log.display()
            ))
            .into());
        }
    }
    let replayed = replay::load(&args.log)?;
    let chain_msg = replayed.chain.message(&args.log.display().to_string());
    let problem = match &replayed.chain {
        Verdict::Tampered { .. } => Some(true),
        Verdict::Unended { .. } => Some(false),
        _ => None,
    };
    if interactive(args.headless) {
        let options = tui::Options {
            log_problem: problem.map(|tampered| tui::LogProblem {
                tampered,
                message: chain_msg.clone(),
            }),
            ..tui_options(true)
        };
        runtime()?.block_on(tui::replay(args.log.clone(), options))?;
    }
    let code = conclude(&args.out, &replayed.report, None, 0)?;
    match problem {
        Some(true) => {
            eprintln!(
                "\nsandbox-watch: THIS LOG FAILED VERIFICATION. {chain_msg}\nThe report above was rebuilt from records that cannot be trusted."
            );
            Ok(exit::OTHER)
        }
        Some(false) => {
            eprintln!(
                "\nsandbox-watch: {chain_msg}\nThe report covers the records up to where the log stops."
            );
            // Not a clean record: say so in the status too, as `verify` does.
            Ok(if code == 0 { exit::UNENDED } else { code })
        }
        None => Ok(code),
    }
}
