//! The real agent CLIs the kernel tests drive (`tests/tests/real_agent.rs`): installed from npm
//! at the exact versions pinned in `tests/agent/pins.json`, into `target/agents/<name>/` (no
//! HOME needed: CI runs as root with HOME unset; npm's cache is `target/agents/npm-cache`).
//! A second run skips what is already there. When npm cannot reach its registry,
//! `target/agents/<name>/unavailable` says why, and the tests that need it print that and skip.
use std::path::Path;
use std::process::Command;

use anyhow::{Context as _, bail};
use serde_json::Value;

pub fn setup(root: &Path) -> anyhow::Result<()> {
    let pins = root.join("tests/agent/pins.json");
    let text = std::fs::read_to_string(&pins)
        .with_context(|| format!("cannot read {}", pins.display()))?;
    let pins: Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", pins.display()))?;
    for (name, pin) in pins.as_object().context("pins.json: not an object")? {
        let field = |k: &str| {
            pin[k]
                .as_str()
                .with_context(|| format!("pins.json: {name}.{k} is missing"))
        };
        install(
            root,
            name,
            field("package")?,
            field("version")?,
            field("bin")?,
        )?;
    }
    Ok(())
}

fn install(root: &Path, name: &str, package: &str, version: &str, bin: &str) -> anyhow::Result<()> {
    let agents = root.join("target/agents");
    let dir = agents.join(name);
    let stamp = dir.join("installed");
    let unavailable = dir.join("unavailable");
    let want = format!("{package}@{version}");
    let bin = dir.join(bin);
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s.trim() == want) && bin.exists() {
        return Ok(());
    }
    std::fs::create_dir_all(&dir)?;
    let _ = std::fs::remove_file(&unavailable);
    let cache = agents.join("npm-cache");
    let mut npm = Command::new("npm");
    npm.arg("install")
        .arg("--prefix")
        .arg(&dir)
        .arg("--cache")
        .arg(&cache)
        // The platform binary comes as an optional dependency; the wrapper's postinstall only
        // copies it, and the tests run it from its own package.
        .args([
            "--ignore-scripts",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
        ])
        .arg(&want);
    eprintln!("+ {npm:?}");
    let out = npm
        .output()
        .context("cannot start npm (cargo xtask setup installs it)")?;
    if !out.status.success() {
        let ping = Command::new("npm")
            .args(["ping", "--cache"])
            .arg(&cache)
            .output()
            .context("cannot start npm")?;
        if !ping.status.success() {
            let why = format!(
                "npm cannot reach its registry, so {want} is not installed (`npm ping`: {})",
                last_line(&ping.stderr)
            );
            eprintln!("warning: {why}; the real-agent tests will skip");
            std::fs::write(&unavailable, why + "\n")?;
            return Ok(());
        }
        bail!(
            "npm install {want} failed although the registry answers: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let version_out = Command::new(&bin)
        .arg("--version")
        .env("DISABLE_AUTOUPDATER", "1")
        .output()
        .with_context(|| format!("cannot run {}", bin.display()))?;
    let printed = String::from_utf8_lossy(&version_out.stdout);
    if !printed.contains(version) {
        bail!(
            "{} --version printed {printed:?}, not {version}",
            bin.display()
        );
    }
    std::fs::write(&stamp, want + "\n")?;
    Ok(())
}

fn last_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no output")
        .trim()
        .to_string()
}
