//! The OpenTelemetry collector the OTLP tests and the bench send through: rotel (an OTLP
//! collector written in Rust) from PyPI, pinned, in a virtual environment of the project's own
//! (`target/tools/rotel`), so nothing outside the tree changes and HOME is not needed.
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};

/// Pinned: an alpha, so no other version is taken.
pub const ROTEL_VERSION: &str = "0.0.1a15";

/// Where setup puts it.
pub fn dir() -> PathBuf {
    crate::root().join("target/tools/rotel")
}

/// The collector's binary (a link into the virtual environment).
pub fn binary() -> PathBuf {
    dir().join("rotel-agent")
}

/// Installs rotel unless the pinned version is there and runs.
pub fn setup() -> anyhow::Result<()> {
    let dir = dir();
    let stamp = dir.join("stamp");
    let want = format!("rotel {ROTEL_VERSION}");
    let works = || {
        Command::new(binary())
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s.trim() == want) && works() {
        return Ok(());
    }
    let venv = dir.join("venv");
    let _ = std::fs::remove_dir_all(&venv);
    std::fs::create_dir_all(&dir)?;
    // Debian's python3 first: a pyenv shim needs HOME, which CI does not set.
    let python = ["/usr/bin/python3", "python3"].into_iter().find(|p| {
        Command::new(p)
            .args(["-c", "import ensurepip, venv"])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    let python = match python {
        Some(p) => p,
        None if crate::is_root() => {
            crate::run(Command::new("apt-get").args(["install", "-y", "-qq", "python3-venv"]))?;
            "/usr/bin/python3"
        }
        None => bail!(
            "python3 cannot make a virtual environment: run `sudo apt-get install python3-venv`"
        ),
    };
    crate::run(Command::new(python).arg("-m").arg("venv").arg(&venv))?;
    crate::run(
        Command::new(venv.join("bin/pip"))
            .args([
                "install",
                "--quiet",
                "--no-cache-dir",
                "--disable-pip-version-check",
                "--no-input",
                "--pre",
            ])
            .arg(format!("rotel=={ROTEL_VERSION}"))
            .env("PIP_NO_INPUT", "1"),
    )?;
    let found = find_agent(&venv.join("lib")).with_context(|| {
        format!(
            "rotel {ROTEL_VERSION} installed but no rotel-agent under {}",
            venv.display()
        )
    })?;
    let link = binary();
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&found, &link)?;
    if !works() {
        bail!("{} does not run", link.display());
    }
    std::fs::write(&stamp, &want)?;
    Ok(())
}

/// `lib/python3.X/site-packages/rotel/rotel-agent`.
fn find_agent(lib: &Path) -> Option<PathBuf> {
    std::fs::read_dir(lib)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("site-packages/rotel/rotel-agent"))
        .find(|p| p.is_file())
}
