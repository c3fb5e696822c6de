//! Project tasks: `cargo xtask setup | run | test | lint`.
//!
//! `setup` installs what building the BPF object needs and does nothing when it is all there:
//! the nightly's rust-src, bpf-linker built against the nightly's own LLVM, clang, libbpf
//! headers and bpftool (for the CO-RE C shim); the OpenTelemetry collector the OTLP tests
//! send through (rotel, pinned, from PyPI into target/tools); and the pinned agent CLIs the
//! real-agent tests drive (`agents.rs`).
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};
use clap::{Parser, Subcommand};

mod agents;
mod bench;
mod collector;
mod vm;

#[derive(Parser)]
#[command(about = "sandbox-watch project tasks")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Install the toolchain pieces and packages the build needs (idempotent).
    Setup,
    /// Set up, build in release mode and run sandbox-watch with these arguments (none: the demo).
    Run {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Set up, build, and run every test: unit tests, then the root tests on the real kernel.
    Test {
        /// Only run tests whose name contains this.
        filter: Option<String>,
    },
    /// cargo fmt --check and clippy -D warnings on the userspace and the BPF crate.
    Lint,
    /// Run the kernel tests in target/vm/ under Debian's 6.1 kernel in qemu (the fentry path).
    VmTest,
    /// Measure what watching costs: workloads unmonitored, traced and outside the traced set,
    /// beside strace, bpftrace and auditd; prints a table and writes JSON (needs root).
    Bench {
        /// Rounds per condition, alternating (the median is reported). Default 7, 3 with --quick.
        #[arg(long, value_name = "N")]
        runs: Option<usize>,
        /// Fewer rounds and smaller workloads (for development; not for the targets).
        #[arg(long)]
        quick: bool,
        /// Where to write the JSON results (default target/bench/bench.json).
        #[arg(long, value_name = "PATH")]
        json: Option<PathBuf>,
        /// Leave out the peers (strace, bpftrace, auditd).
        #[arg(long)]
        no_peers: bool,
        /// Only the captures of about 1,000,000 records (memory, and the cost of --otlp), at
        /// full size even with --quick.
        #[arg(long)]
        memory_only: bool,
        /// Another sandbox-watch binary (e.g. main's build) to run traced and outside in the
        /// same rounds, so a change is compared with what it changes under the same load.
        #[arg(long, value_name = "BIN")]
        baseline: Option<PathBuf>,
        /// Only these workloads, comma-separated (exec_storm, open_storm, udp_storm,
        /// tcp_connect_storm, agent_session, output_storm, signal_storm, write_storm); the latency and
        /// memory captures are left out.
        #[arg(long, value_name = "LIST", value_delimiter = ',')]
        workloads: Vec<String>,
    },
}

const BPF_LINKER_VERSION: &str = "0.13.0";

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.task {
        Task::Setup => setup(),
        Task::Run { args } => {
            setup()?;
            build()?;
            let status = Command::new(root().join("target/release/sandbox-watch"))
                .args(&args)
                .status()?;
            std::process::exit(status.code().unwrap_or(1));
        }
        Task::Test { filter } => {
            setup()?;
            build()?;
            test(filter.as_deref())?;
            // The same kernel tests' core under Debian's 6.1 in qemu, where fentry loads.
            if filter.is_none() { vm::run() } else { Ok(()) }
        }
        Task::Lint => lint(),
        Task::VmTest => vm::run(),
        Task::Bench {
            runs,
            quick,
            json,
            no_peers,
            memory_only,
            baseline,
            workloads,
        } => bench::run(bench::Options {
            runs,
            quick,
            json,
            no_peers,
            memory_only,
            baseline,
            workloads,
        }),
    }
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn run(cmd: &mut Command) -> anyhow::Result<()> {
    eprintln!("+ {cmd:?}");
    let status = cmd
        .status()
        .with_context(|| format!("cannot start {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed ({status})");
    }
    Ok(())
}

fn output(cmd: &mut Command) -> anyhow::Result<String> {
    let out = cmd
        .output()
        .with_context(|| format!("cannot start {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Whether a Debian package is installed.
fn installed(package: &str) -> bool {
    output(Command::new("dpkg-query").args(["-W", "-f", "${Status}", package]))
        .is_ok_and(|s| s.contains("install ok installed"))
}

fn cargo_home() -> PathBuf {
    std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into())).join(".cargo")
        })
}

fn is_root() -> bool {
    output(Command::new("id").arg("-u")).is_ok_and(|s| s.trim() == "0")
}

fn setup() -> anyhow::Result<()> {
    // The nightly toolchain and its rust-src (the BPF target builds core from source).
    let installed = output(Command::new("rustup").args([
        "component",
        "list",
        "--toolchain",
        "nightly",
        "--installed",
    ]))
    .unwrap_or_default();
    if installed.is_empty() {
        run(Command::new("rustup").args([
            "toolchain",
            "install",
            "nightly",
            "--profile",
            "minimal",
        ]))?;
    }
    if !installed.lines().any(|l| l.starts_with("rust-src")) {
        run(Command::new("rustup").args([
            "component",
            "add",
            "rust-src",
            "--toolchain",
            "nightly",
        ]))?;
    }

    // Debian packages: clang + libbpf headers + bpftool for the C shim; runc and a static
    // busybox for the container tests; strace for the cross-check test; pip, venv and npm for
    // the package tests.
    let missing: Vec<&str> = [
        ("clang", have("clang")),
        (
            "libbpf-dev",
            Path::new("/usr/include/bpf/bpf_core_read.h").exists(),
        ),
        (
            "bpftool",
            have("bpftool") || Path::new("/usr/sbin/bpftool").exists(),
        ),
        ("runc", have("runc")),
        ("busybox-static", crate::installed("busybox-static")),
        ("strace", have("strace")),
        ("python3", have("python3")),
        ("git", have("git")),
        ("tmux", have("tmux")),
        ("openssl", have("openssl")),
        // The package tests (a venv with pip, npm) and the real-agent tests (npm installs the
        // agent CLIs; the session makes a venv).
        ("python3-pip", crate::installed("python3-pip")),
        ("python3-venv", crate::installed("python3-venv")),
        ("npm", have("npm")),
    ]
    .into_iter()
    .filter(|(_, ok)| !ok)
    .map(|(p, _)| p)
    .collect();
    if !missing.is_empty() {
        if !is_root() {
            bail!(
                "missing packages {missing:?}: run `sudo apt-get install {}`",
                missing.join(" ")
            );
        }
        run(Command::new("apt-get").arg("update").arg("-qq"))?;
        run(Command::new("apt-get")
            .args(["install", "-y", "-qq", "--no-install-recommends"])
            .args(&missing))?;
    }

    // bpf-linker must use the same LLVM as the nightly rustc.
    let version = output(Command::new("rustc").args(["+nightly", "-vV"]))?;
    let llvm = version
        .lines()
        .find_map(|l| l.strip_prefix("LLVM version: "))
        .context("rustc +nightly -vV printed no LLVM version")?
        .trim()
        .to_string();
    let major = llvm.split('.').next().unwrap_or_default().to_string();
    let prefix = cargo_home().join("sandbox-watch-llvm");
    let stamp = prefix.join("stamp");
    let want = format!("bpf-linker {BPF_LINKER_VERSION} llvm {llvm}");
    let linker = cargo_home().join("bin/bpf-linker");
    let current = std::fs::read_to_string(&stamp).unwrap_or_default();
    // The nightly's libLLVM, linked under both the name bpf-linker's build looks for and the
    // soname the built binary asks for (its RUNPATH is this directory).
    let sysroot = output(Command::new("rustc").args(["+nightly", "--print", "sysroot"]))?;
    let lib_dir = Path::new(sysroot.trim()).join("lib");
    let lib = std::fs::read_dir(&lib_dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("libLLVM.so.{major}")))
        })
        .with_context(|| format!("no libLLVM.so.{major}* in {}", lib_dir.display()))?;
    let link_dir = prefix.join("lib");
    std::fs::create_dir_all(&link_dir)?;
    for name in [
        std::ffi::OsStr::new("libLLVM.so"),
        lib.file_name().unwrap_or_default(),
    ] {
        let link = link_dir.join(name);
        if std::fs::read_link(&link).ok().as_deref() != Some(lib.as_path()) {
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(&lib, &link)?;
        }
    }
    let works = linker.exists()
        && Command::new(&linker)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
    if current.trim() != want || !works {
        run(Command::new("cargo")
            .args([
                "install",
                "--force",
                "bpf-linker",
                "--version",
                BPF_LINKER_VERSION,
                "--no-default-features",
                "--features",
            ])
            .arg(format!("llvm-{major}"))
            .env("LLVM_PREFIX", &prefix))?;
        std::fs::write(&stamp, &want)?;
    }

    // The OpenTelemetry collector of the OTLP tests and the bench.
    collector::setup()?;

    // The real agent CLIs the kernel tests drive, at their pinned versions.
    agents::setup(&root())?;

    // What running needs: say it now rather than fail later.
    if !Path::new("/sys/kernel/btf/vmlinux").exists() {
        eprintln!(
            "warning: this kernel has no BTF (/sys/kernel/btf/vmlinux); the probe cannot load here"
        );
    }
    if !is_root() {
        eprintln!("warning: not root; the capture and the kernel tests need root (sudo)");
    }
    Ok(())
}

fn build() -> anyhow::Result<()> {
    run(Command::new("cargo").current_dir(root()).args([
        "build",
        "--release",
        "-p",
        "sandbox-watch",
    ]))
}

fn test(filter: Option<&str>) -> anyhow::Result<()> {
    let bin = root().join("target/release/sandbox-watch");
    // Unit tests: pure logic, no root needed.
    run(Command::new("cargo")
        .current_dir(root())
        .args([
            "test",
            "--release",
            "-p",
            "sandbox-watch",
            "-p",
            "sandbox-watch-common",
            "-p",
            "xtask",
        ])
        .args(filter))?;
    if !is_root() {
        bail!("the kernel tests need root: run `sudo -E cargo xtask test`");
    }
    // Kernel tests: load the real object, run real processes; one at a time. Under
    // `sudo -E`, the agent would run as the caller and a test's job summary would be appended
    // to the real one: the tests that want either set it themselves.
    run(Command::new("cargo")
        .current_dir(root())
        .args(["test", "--release", "-p", "integration-tests", "--"])
        .args(filter)
        .args(["--test-threads=1"])
        .env("SANDBOX_WATCH_BIN", &bin)
        .env("SW_ROTEL", collector::binary())
        .env("RUST_BACKTRACE", "1")
        .env_remove("SUDO_UID")
        .env_remove("SUDO_GID")
        .env_remove("SUDO_USER")
        .env_remove("GITHUB_STEP_SUMMARY"))?;
    Ok(())
}

fn lint() -> anyhow::Result<()> {
    run(Command::new("cargo")
        .current_dir(root())
        .args(["fmt", "--all", "--check"]))?;
    run(Command::new("cargo").current_dir(root()).args([
        "clippy",
        "--release",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]))?;
    let ebpf = root().join("sandbox-watch-ebpf");
    run(Command::new("cargo").current_dir(&ebpf).args([
        "+nightly",
        "clippy",
        "--release",
        "--target",
        "bpfel-unknown-none",
        "-Z",
        "build-std=core",
        "--",
        "-D",
        "warnings",
        "-C",
        "panic=abort",
    ]))?;
    Ok(())
}
