//! `sandbox-watch` with no arguments: a short agent session (demo.sh) under the probe, then
//! its summary. It runs the real `run` command on the real kernel, nothing is simulated.
use std::path::PathBuf;

const SCRIPT: &str = include_str!("demo.sh");

pub fn run(dir: Option<PathBuf>) -> crate::error::Result<u8> {
    let temp;
    let dir = match dir {
        Some(d) => {
            std::fs::create_dir_all(&d)?;
            d
        }
        None => {
            temp = std::env::temp_dir().join(format!("sandbox-watch-demo-{}", std::process::id()));
            std::fs::create_dir_all(&temp)?;
            temp
        }
    };
    let dir = dir.canonicalize()?;
    let script = dir.join("agent.sh");
    std::fs::write(&script, SCRIPT)?;
    let log = dir.join("demo-log.jsonl");
    let report = dir.join("demo-report.json");
    let summary = dir.join("demo-summary.md");
    for f in [&log, &report, &summary] {
        let _ = std::fs::remove_file(f);
    }
    eprintln!(
        "sandbox-watch demo: running {} under the probe (files in {})",
        script.display(),
        dir.display()
    );
    let status = std::process::Command::new(std::env::current_exe()?)
        .args(["run", "--headless", "--linger", "0.5"])
        .arg("--log")
        .arg(&log)
        .arg("--report")
        .arg(&report)
        .arg("--summary")
        .arg(&summary)
        .args(["--", "sh"])
        .arg(&script)
        .env("DEMO_DIR", &dir)
        .env_remove("GITHUB_STEP_SUMMARY")
        .status()?;
    // The capture printed the summary on stderr; say where the rest is.
    if summary.exists() {
        crate::cli::say(&format!("Summary: {}", summary.display()));
        crate::cli::say(&format!("Report:  {}", report.display()));
        crate::cli::say(&format!(
            "Log:     {} (check it: sandbox-watch verify {})",
            log.display(),
            log.display()
        ));
    }
    Ok(status.code().unwrap_or(1) as u8)
}
