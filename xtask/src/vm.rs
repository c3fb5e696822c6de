//! `cargo xtask vm-test`: the kernel tests again, inside Debian's 6.1 kernel under qemu (TCG).
//!
//! This machine's kernel refuses fentry programs, so only a second kernel runs the fentry path
//! of the open hook. The guest is this machine itself seen through another kernel: it mounts
//! the host's root read-only over 9p, makes that its root (switch_root, so paths walked by the
//! kernel come out as on the host) with fresh proc, sys, dev, bpffs, tracefs, cgroup2 and tmpfs
//! on /tmp, /run, /root and /dev/shm, and runs `target/vm/guest.sh` (written on every run): a
//! sanity run of the release binary, then each binary of [`GUEST_TESTS`] with its filters.
//!
//! Reused between runs: the kernel package (`apt-get download`), its vmlinuz and the virtio + 9p
//! modules (`target/vm/kernel/<package>/`), and the initramfs (busybox + /init), rebuilt only
//! when an input changed. Everything lands in `target/vm/`; the console in `console.log`, the
//! summary in `summary.txt`.
//!
//! Environment: `SW_VM_TIMEOUT` (seconds, default 1800) bounds the qemu run; `SW_VM_OPTIONAL=1`
//! turns "qemu is missing and cannot be installed" into a skip with exit status 0;
//! `SW_VM_NO_BUILD=1` skips setup and the release build of sandbox-watch (the binary already
//! in target/release is used; the test binaries are still built).
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::fs;
use std::io::{BufRead as _, BufReader, Read, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};

use super::{have, installed, is_root, root};

/// The integration test binaries run in the guest (cargo's test target names) and the exact
/// names of the tests each runs. A named test that does not exist is a failure, not a pass.
const GUEST_TESTS: &[(&str, &[&str])] = &[
    (
        "process",
        &[
            "exec_chain_keeps_argv_with_spaces_and_cwd",
            "exit_code_and_signal_are_reported",
            "burst_of_500_execs_is_complete",
            "unshare_sandbox_inside_and_nsenter_back_outside",
            "run_mode_captures_the_very_first_exec",
        ],
    ),
    (
        "files",
        &[
            "credential_reads_on_ext4_tmpfs_and_proc_are_verified",
            "the_open_hook_states_what_it_cannot_see",
            "io_uring_opens_are_seen_by_fentry_and_named_as_a_gap_otherwise",
            "create_write_rename_delete_and_persistence",
            "symlinks_and_relative_paths_are_resolved_by_the_kernel",
            "an_open_storm_is_one_entry_with_its_count",
            "opens_that_fail_are_reported_for_secrets_and_refusals",
            "links_are_created_files_judged_by_where_they_are_and_what_they_point_to",
        ],
    ),
    (
        "network",
        &[
            "listener_ok_connect_and_refused_connect_on_v4_and_v6",
            "sandboxed_connect_is_inside_and_nsenter_back_is_outside",
            "non_blocking_connects_get_their_outcome",
            "dns_names_through_sendto_and_a_connected_socket",
        ],
    ),
    ("evidence", &["a_real_log_verifies_and_tampering_is_named"]),
];

/// What the guest needs to mount the host over virtio 9p; their dependencies come along, and
/// those that are built in (or absent) in a kernel version are skipped.
const MODULES: &[&str] = &[
    "virtio_ring",
    "virtio",
    "virtio_pci_modern_dev",
    "virtio_pci_legacy_dev",
    "virtio_pci",
    "9pnet",
    "9pnet_virtio",
    "netfs",
    "fscache",
    "9p",
];

/// The open hook the guest kernel must load.
const GUEST_HOOK: &str = "fentry";

/// Prefix of the lines the guest prints for the host to read.
const MARK: &str = "@@sw-vm";

/// The initramfs's /init (busybox sh). It exits qemu through isa-debug-exit with the status
/// of the guest script (2 when the guest could not be set up).
const INIT: &str = r#"#!/bin/busybox sh
# sandbox-watch vm-test guest init (written by `cargo xtask vm-test`)
/bin/busybox mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1
/bin/busybox --install -s /bin
export PATH=/bin
M=@@sw-vm
fail() {
    echo "$M setup-failed $*"
    dmesg | tail -n 30
    printf '\002' | dd of=/dev/port bs=1 seek=244 count=1 2>/dev/null
    poweroff -f
    sleep 30
}
mount -t proc proc /proc || fail "mount proc"
mount -t sysfs sysfs /sys || fail "mount sysfs"
echo "$M init kernel=$(uname -r) uptime=$(cut -d' ' -f1 /proc/uptime)"
script=$(sed -n 's/.*sw_script=\([^ ]*\).*/\1/p' /proc/cmdline)
[ -n "$script" ] || fail "no sw_script= on the kernel command line"
for m in $(cat /lib/modules/load-order); do
    insmod /lib/modules/$m.ko || fail "insmod $m"
done
H=/mnt/host
mkdir -p $H
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose hostroot $H || fail "mount 9p hostroot"
# Host directories the fresh tmpfs mounts below would hide (a checkout under /tmp or /root).
keep=$(sed -n 's/.*sw_keep=\([^ ]*\).*/\1/p' /proc/cmdline | tr , ' ')
i=0
for k in $keep; do
    mkdir -p /mnt/keep/$i
    mount --bind "$H$k" /mnt/keep/$i || fail "bind $k"
    i=$((i+1))
done
mount -t proc proc $H/proc || fail "mount proc on $H/proc"
mount -t sysfs sysfs $H/sys || fail "mount sysfs on $H/sys"
mount -t devtmpfs devtmpfs $H/dev || fail "mount devtmpfs on $H/dev"
mkdir -p $H/dev/shm $H/dev/pts
mount -t tmpfs -o mode=1777 tmpfs $H/dev/shm || fail "mount $H/dev/shm"
mount -t devpts -o mode=620,ptmxmode=666 devpts $H/dev/pts || fail "mount $H/dev/pts"
mount -t tmpfs -o mode=1777 tmpfs $H/tmp || fail "mount $H/tmp"
mount -t tmpfs -o mode=755 tmpfs $H/run || fail "mount $H/run"
mount -t tmpfs -o mode=700 tmpfs $H/root || fail "mount $H/root"
mount -t bpf bpf $H/sys/fs/bpf || fail "mount bpffs"
mount -t tracefs tracefs $H/sys/kernel/tracing || fail "mount tracefs"
mount -t cgroup2 cgroup2 $H/sys/fs/cgroup || echo "$M note: no cgroup2 on /sys/fs/cgroup"
i=0
for k in $keep; do
    mkdir -p "$H$k"
    mount --bind /mnt/keep/$i "$H$k" || fail "bind $k back"
    i=$((i+1))
done
ip link set lo up || fail "ip link set lo up"
[ -r "$H$script" ] || fail "no $script on the host"
echo "$M ready uptime=$(cut -d' ' -f1 /proc/uptime)"
# The host's root becomes the root (not a chroot: the kernel's path walks stop at the
# namespace's root, so a chroot would show every path under /mnt/host). PID 1 is then the
# host's sh: it runs the script and hands its status to qemu.
exec switch_root $H /bin/sh -c '
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
sh "$0"; rc=$?
echo "@@sw-vm exit status=$rc"
printf "\\$(printf %03o "$rc")" | dd of=/dev/port bs=1 seek=244 count=1 status=none
echo o > /proc/sysrq-trigger
sleep 30' "$script"
fail "switch_root failed"
"#;

struct Kernel {
    package: String,
    release: String,
    vmlinuz: PathBuf,
    /// Module files in load order.
    modules: Vec<PathBuf>,
}

/// One test binary as run in the guest.
struct Planned {
    name: &'static str,
    exe: Option<PathBuf>,
    filters: &'static [&'static str],
    /// Filters naming no test of this build.
    missing: Vec<&'static str>,
}

pub fn run() -> anyhow::Result<()> {
    let started = Instant::now();
    let dir = root().join("target/vm");
    fs::create_dir_all(&dir)?;

    if let Err(why) = ensure_packages() {
        if std::env::var("SW_VM_OPTIONAL").as_deref() == Ok("1") {
            eprintln!("vm-test: SKIPPED (SW_VM_OPTIONAL=1): {why}");
            return Ok(());
        }
        bail!("the VM tests cannot run: {why} (with SW_VM_OPTIONAL=1 this is a skip, exit 0)");
    }

    // What the guest runs is the host's own build, read over 9p.
    if std::env::var("SW_VM_NO_BUILD").as_deref() == Ok("1") {
        eprintln!("vm-test: SW_VM_NO_BUILD=1: using the sandbox-watch binary as it is");
    } else {
        super::setup()?;
        super::build()?;
    }
    let plan = plan(&test_binaries()?)?;
    let sandbox_watch = root().join("target/release/sandbox-watch");
    ensure!(
        sandbox_watch.exists(),
        "{} is missing",
        sandbox_watch.display()
    );

    let kernel = kernel(&dir)?;
    let initrd = initramfs(&dir, &kernel)?;
    let script = dir.join("guest.sh");
    fs::write(&script, guest_script(&plan, &sandbox_watch))?;
    let setup_time = started.elapsed();

    let timeout = match std::env::var("SW_VM_TIMEOUT") {
        Ok(s) => Duration::from_secs(
            s.trim()
                .parse()
                .with_context(|| format!("SW_VM_TIMEOUT={s:?} is not a number of seconds"))?,
        ),
        Err(_) => Duration::from_secs(1800),
    };
    let console = dir.join("console.log");
    let mut needed = vec![root()];
    needed.extend(
        plan.iter()
            .filter_map(|p| p.exe.as_ref()?.parent().map(Path::to_path_buf)),
    );
    let keep = hidden_in_guest(&needed)?;
    let boot = boot(&kernel, &initrd, &script, &keep, &console, timeout)?;

    let outcome = evaluate(&plan, &boot);
    let summary = summary(
        &kernel,
        &plan,
        &boot,
        &outcome,
        setup_time,
        started.elapsed(),
        &console,
    );
    println!("{summary}");
    fs::write(dir.join("summary.txt"), &summary)?;
    if !outcome.pass {
        // The summary said it all; no error trace after it.
        eprintln!("vm-test: FAILED");
        std::process::exit(1);
    }
    Ok(())
}

/// qemu and a static busybox, installed through apt when missing. Err: why they cannot be.
fn ensure_packages() -> Result<(), String> {
    let mut missing: Vec<&str> = ["qemu-system-x86", "busybox-static"]
        .into_iter()
        .filter(|p| !installed(p))
        .collect();
    if !have("qemu-system-x86_64") && !missing.contains(&"qemu-system-x86") {
        missing.insert(0, "qemu-system-x86");
    }
    if missing.is_empty() {
        return Ok(());
    }
    if !is_root() {
        return Err(format!(
            "{} missing and installing needs root (`sudo apt-get install {}`)",
            missing.join(", "),
            missing.join(" ")
        ));
    }
    let install = || {
        let mut cmd = Command::new("apt-get");
        cmd.args(["install", "-y", "-qq", "--no-install-recommends"])
            .args(["qemu-system-x86", "busybox-static"]);
        eprintln!("+ {cmd:?}");
        cmd.status().is_ok_and(|s| s.success())
    };
    if !install() {
        let _ = Command::new("apt-get").args(["update", "-qq"]).status();
        if !install() {
            return Err("`apt-get install qemu-system-x86 busybox-static` failed".into());
        }
    }
    if !have("qemu-system-x86_64") {
        return Err("qemu-system-x86_64 is still not on PATH after installing".into());
    }
    Ok(())
}

/// Builds the integration test binaries; their cargo target names and executables.
fn test_binaries() -> anyhow::Result<HashMap<String, PathBuf>> {
    let mut cmd = Command::new("cargo");
    cmd.current_dir(root()).args([
        "test",
        "--release",
        "-p",
        "integration-tests",
        "--no-run",
        "--message-format=json",
    ]);
    eprintln!("+ {cmd:?}");
    let out = cmd.stderr(Stdio::inherit()).output()?;
    ensure!(out.status.success(), "building the test binaries failed");
    let mut found = HashMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let is_test = v["target"]["kind"]
            .as_array()
            .is_some_and(|k| k.iter().any(|k| k == "test"));
        if v["reason"] == "compiler-artifact"
            && is_test
            && let (Some(name), Some(exe)) =
                (v["target"]["name"].as_str(), v["executable"].as_str())
        {
            found.insert(name.to_string(), PathBuf::from(exe));
        }
    }
    Ok(found)
}

/// Which binary runs which tests, and which named tests this build does not have (from the
/// binaries' own `--list`, run here).
fn plan(bins: &HashMap<String, PathBuf>) -> anyhow::Result<Vec<Planned>> {
    let mut plan = Vec::new();
    for &(name, filters) in GUEST_TESTS {
        let exe = bins.get(name).cloned();
        let listed: HashSet<String> = match &exe {
            Some(exe) => {
                let out = Command::new(exe)
                    .args(["--list", "--format", "terse"])
                    .output()
                    .with_context(|| format!("cannot run {} --list", exe.display()))?;
                String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .filter_map(|l| l.strip_suffix(": test"))
                    .map(str::to_string)
                    .collect()
            }
            None => HashSet::new(),
        };
        let missing: Vec<&str> = filters
            .iter()
            .copied()
            .filter(|f| !listed.contains(*f))
            .collect();
        match &exe {
            None => eprintln!("vm-test: WARNING: there is no test binary `{name}`"),
            Some(_) => {
                for m in &missing {
                    eprintln!(
                        "vm-test: WARNING: `{name}` has no test `{m}`: 0 tests will run for it \
                         (counted as a failure)"
                    );
                }
            }
        }
        plan.push(Planned {
            name,
            exe,
            filters,
            missing,
        });
    }
    Ok(plan)
}

/// The current Debian kernel package (linux-image-amd64's dependency), downloaded once, with
/// its vmlinuz and the modules the guest loads taken out.
fn kernel(dir: &Path) -> anyhow::Result<Kernel> {
    let package = kernel_package()?;
    let kdir = dir.join("kernel").join(&package);
    let ready = kdir.join("ready");
    if !ready.exists() {
        let deb = match find_deb(dir, &package)? {
            Some(deb) => deb,
            None => {
                let download = || {
                    let mut cmd = Command::new("apt-get");
                    cmd.current_dir(dir).arg("download").arg(&package);
                    if is_root() {
                        // Else apt warns that _apt cannot write into target/vm.
                        cmd.args(["-o", "APT::Sandbox::User=root"]);
                    }
                    eprintln!("+ {cmd:?}");
                    cmd.status().is_ok_and(|s| s.success())
                };
                if !download() {
                    if is_root() {
                        let _ = Command::new("apt-get").args(["update", "-qq"]).status();
                    }
                    ensure!(download(), "`apt-get download {package}` failed");
                }
                find_deb(dir, &package)?
                    .with_context(|| format!("apt-get download left no {package}_*.deb"))?
            }
        };
        extract_kernel(&deb, &kdir)?;
    }
    let text = fs::read_to_string(&ready)?;
    let mut lines = text.lines();
    let release = lines.next().context("empty kernel ready file")?.to_string();
    let modules = lines
        .filter(|l| !l.is_empty())
        .map(|m| kdir.join("modules").join(format!("{m}.ko")))
        .collect();
    Ok(Kernel {
        package,
        release,
        vmlinuz: kdir.join("vmlinuz"),
        modules,
    })
}

fn kernel_package() -> anyhow::Result<String> {
    let depends = || -> Option<String> {
        let out = Command::new("apt-cache")
            .args(["depends", "linux-image-amd64"])
            .output()
            .ok()?;
        String::from_utf8_lossy(&out.stdout).lines().find_map(|l| {
            let p = l.trim().trim_start_matches('|').strip_prefix("Depends: ")?;
            (p.starts_with("linux-image-") && p[12..].starts_with(|c: char| c.is_ascii_digit()))
                .then(|| p.trim().to_string())
        })
    };
    let package = match depends() {
        Some(p) => p,
        None => {
            ensure!(
                is_root(),
                "apt-cache knows no linux-image-amd64: run `sudo apt-get update`"
            );
            super::run(Command::new("apt-get").args(["update", "-qq"]))?;
            depends().context("apt-cache depends linux-image-amd64 names no kernel package")?
        }
    };
    if !package.starts_with("linux-image-6.1.") {
        eprintln!("vm-test: note: the Debian kernel is {package}, not a 6.1 one");
    }
    Ok(package)
}

fn find_deb(dir: &Path, package: &str) -> anyhow::Result<Option<PathBuf>> {
    let prefix = format!("{package}_");
    Ok(fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".deb"))
        }))
}

/// `dpkg-deb -x` into a scratch directory, keep vmlinuz and the modules (decompressed, in
/// load order from their own `depends=`), drop the rest (400 MB).
fn extract_kernel(deb: &Path, kdir: &Path) -> anyhow::Result<()> {
    let scratch = kdir.join("extract");
    let _ = fs::remove_dir_all(kdir);
    fs::create_dir_all(&scratch)?;
    super::run(Command::new("dpkg-deb").arg("-x").arg(deb).arg(&scratch))?;
    let vmlinuz = fs::read_dir(scratch.join("boot"))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("vmlinuz-"))
        })
        .context("no boot/vmlinuz-* in the kernel package")?;
    let release = vmlinuz.file_name().unwrap().to_str().unwrap()["vmlinuz-".len()..].to_string();
    let mod_root = scratch.join("lib/modules").join(&release);

    // Module name (as in `depends=`: dashes become underscores) → file.
    let mut index = HashMap::new();
    let mut stack = vec![mod_root.join("kernel")];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d)? {
            let p = e?.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Some(name) = module_name(&p) {
                index.insert(name, p);
            }
        }
    }
    let builtin: HashSet<String> = fs::read_to_string(mod_root.join("modules.builtin"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| module_name(Path::new(l)))
        .collect();

    let out = kdir.join("modules");
    fs::create_dir_all(&out)?;
    let mut order = Vec::new();
    let mut seen = HashSet::new();
    for want in MODULES {
        add_module(want, &index, &builtin, &out, &mut seen, &mut order)?;
    }
    fs::copy(&vmlinuz, kdir.join("vmlinuz"))?;
    fs::remove_dir_all(&scratch)?;
    fs::write(
        kdir.join("ready"),
        format!("{release}\n{}\n", order.join("\n")),
    )?;
    eprintln!(
        "vm-test: kernel {release}, modules in load order: {}",
        order.join(" ")
    );
    Ok(())
}

fn module_name(p: &Path) -> Option<String> {
    let n = p.file_name()?.to_str()?;
    let stem = [".ko", ".ko.xz", ".ko.zst", ".ko.gz"]
        .iter()
        .find_map(|s| n.strip_suffix(s))?;
    Some(stem.replace('-', "_"))
}

/// Depth first: a module's dependencies are loaded before it.
fn add_module(
    name: &str,
    index: &HashMap<String, PathBuf>,
    builtin: &HashSet<String>,
    out: &Path,
    seen: &mut HashSet<String>,
    order: &mut Vec<String>,
) -> anyhow::Result<()> {
    let name = name.replace('-', "_");
    if !seen.insert(name.clone()) {
        return Ok(());
    }
    let Some(path) = index.get(&name) else {
        if !builtin.contains(&name) {
            eprintln!("vm-test: note: no module {name} in this kernel (nor built in); skipped");
        }
        return Ok(());
    };
    let data = read_module(path)?;
    for dep in modinfo(&data, "depends")
        .with_context(|| format!("reading {}", path.display()))?
        .split(',')
        .filter(|d| !d.is_empty())
    {
        add_module(dep, index, builtin, out, seen, order)?;
    }
    fs::write(out.join(format!("{name}.ko")), &data)?;
    order.push(name);
    Ok(())
}

/// The module's bytes, decompressed (busybox insmod takes plain .ko files).
fn read_module(path: &Path) -> anyhow::Result<Vec<u8>> {
    let n = path.to_string_lossy();
    let tool = if n.ends_with(".xz") {
        "xz"
    } else if n.ends_with(".zst") {
        "zstd"
    } else if n.ends_with(".gz") {
        "gzip"
    } else {
        return Ok(fs::read(path)?);
    };
    let out = Command::new(tool)
        .arg("-dc")
        .arg(path)
        .output()
        .with_context(|| format!("cannot run {tool} to decompress {n}"))?;
    ensure!(out.status.success(), "{tool} -dc {n} failed");
    Ok(out.stdout)
}

/// A `key=value` of an ELF64 module's `.modinfo` section ("" when absent).
fn modinfo(ko: &[u8], key: &str) -> anyhow::Result<String> {
    let num = |off: usize, len: usize| -> Option<usize> {
        let b = ko.get(off..off + len)?;
        Some(b.iter().rev().fold(0usize, |n, &x| (n << 8) | x as usize))
    };
    ensure!(
        ko.starts_with(b"\x7fELF") && ko.get(4) == Some(&2) && ko.get(5) == Some(&1),
        "not a little-endian ELF64 file"
    );
    let bad = || anyhow::anyhow!("truncated ELF file");
    let shoff = num(0x28, 8).ok_or_else(bad)?;
    let shentsize = num(0x3a, 2).ok_or_else(bad)?;
    let shnum = num(0x3c, 2).ok_or_else(bad)?;
    let shstrndx = num(0x3e, 2).ok_or_else(bad)?;
    let section = |i: usize| -> Option<(usize, usize, usize)> {
        let h = shoff + i * shentsize;
        Some((num(h, 4)?, num(h + 24, 8)?, num(h + 32, 8)?))
    };
    let (_, stroff, _) = section(shstrndx).ok_or_else(bad)?;
    for i in 0..shnum {
        let (name, off, size) = section(i).ok_or_else(bad)?;
        let name_bytes = ko.get(stroff + name..).ok_or_else(bad)?;
        let end = name_bytes.iter().position(|&b| b == 0).unwrap_or(0);
        if &name_bytes[..end] != b".modinfo" {
            continue;
        }
        let data = ko.get(off..off + size).ok_or_else(bad)?;
        let prefix = format!("{key}=");
        return Ok(data
            .split(|&b| b == 0)
            .find_map(|s| s.strip_prefix(prefix.as_bytes()))
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .unwrap_or_default());
    }
    bail!("no .modinfo section")
}

/// busybox + /init + the modules, packed with busybox cpio; reused while its inputs are the
/// same.
fn initramfs(dir: &Path, kernel: &Kernel) -> anyhow::Result<PathBuf> {
    let out = dir.join("initramfs.cpio.gz");
    let key_file = dir.join("initramfs.key");
    let busybox = Path::new("/bin/busybox");
    let meta = fs::metadata(busybox).context("no /bin/busybox (busybox-static)")?;
    let mut key = format!(
        "{} {}\nbusybox {} {:?}\n",
        kernel.package,
        kernel.release,
        meta.len(),
        meta.modified()?
    );
    for m in &kernel.modules {
        writeln!(key, "{} {}", m.display(), fs::metadata(m)?.len())?;
    }
    key.push_str(INIT);
    if out.exists() && fs::read_to_string(&key_file).ok().as_deref() == Some(key.as_str()) {
        return Ok(out);
    }

    let stage = dir.join("initramfs");
    let _ = fs::remove_dir_all(&stage);
    for d in [
        "bin",
        "dev",
        "proc",
        "sys",
        "mnt/host",
        "lib/modules",
        "tmp",
    ] {
        fs::create_dir_all(stage.join(d))?;
    }
    fs::copy(busybox, stage.join("bin/busybox"))?;
    fs::write(stage.join("init"), INIT)?;
    use std::os::unix::fs::PermissionsExt as _;
    for f in ["bin/busybox", "init"] {
        fs::set_permissions(stage.join(f), fs::Permissions::from_mode(0o755))?;
    }
    let mut names = Vec::new();
    for m in &kernel.modules {
        let name = m.file_name().unwrap();
        fs::copy(m, stage.join("lib/modules").join(name))?;
        names.push(name.to_string_lossy().trim_end_matches(".ko").to_string());
    }
    fs::write(
        stage.join("lib/modules/load-order"),
        format!("{}\n", names.join("\n")),
    )?;

    // The file list, parents first, for `busybox cpio -o`.
    let mut list = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let mut entries: Vec<PathBuf> = fs::read_dir(stage.join(&rel))?
            .filter_map(|e| e.ok())
            .map(|e| rel.join(e.file_name()))
            .collect();
        entries.sort();
        for e in entries {
            if stage.join(&e).is_dir() {
                stack.push(e.clone());
            }
            list.push(e);
        }
    }
    let tmp = dir.join("initramfs.cpio.gz.tmp");
    let mut cpio = Command::new(busybox)
        .args(["cpio", "-o", "-H", "newc", "-R", "0:0"])
        .current_dir(&stage)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("cannot start busybox cpio")?;
    let mut gzip = Command::new("gzip")
        .arg("-9")
        .stdin(cpio.stdout.take().unwrap())
        .stdout(fs::File::create(&tmp)?)
        .spawn()
        .context("cannot start gzip")?;
    {
        let mut stdin = cpio.stdin.take().unwrap();
        for e in &list {
            writeln!(stdin, "{}", e.display())?;
        }
    }
    ensure!(cpio.wait()?.success(), "busybox cpio failed");
    ensure!(gzip.wait()?.success(), "gzip failed");
    fs::rename(&tmp, &out)?;
    fs::write(&key_file, key)?;
    eprintln!(
        "vm-test: initramfs {} ({} KiB)",
        out.display(),
        fs::metadata(&out)?.len() / 1024
    );
    Ok(out)
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The script the guest runs with the host's own userland (read over 9p at run time).
fn guest_script(plan: &[Planned], sandbox_watch: &Path) -> String {
    let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/sbin:/usr/bin:/sbin:/bin".into());
    let mut s = format!(
        r#"#!/bin/sh
# Written by `cargo xtask vm-test`; runs in the guest as the child of PID 1.
export PATH={path} HOME=/root TMPDIR=/tmp RUST_BACKTRACE=1 SANDBOX_WATCH_BIN={bin}
unset sw_script
M={MARK}
up() {{ cut -d' ' -f1 /proc/uptime; }}
cd /tmp
overall=0
echo "$M userland kernel=$(uname -r) uptime=$(up)"

# Sanity: which open hook loads on this kernel.
"$SANDBOX_WATCH_BIN" run --headless --linger 0.3 --report /tmp/sw-sanity.json -- true
rc=$?
hook=$(python3 -c 'import json; print(json.load(open("/tmp/sw-sanity.json"))["probe"]["file_open"])' 2>/dev/null || echo none)
echo "$M probe status=$rc file_open=$hook uptime=$(up)"
python3 -c 'import json; r = json.load(open("/tmp/sw-sanity.json")); print(json.dumps({{"probe": r["probe"], "coverage": r["coverage"]}}))' 2>&1
[ "$hook" = {GUEST_HOOK} ] || overall=1

run_tests() {{
    name=$1; shift
    echo "$M begin $name uptime=$(up)"
    "$@"
    rc=$?
    echo "$M end $name status=$rc uptime=$(up)"
    [ $rc -eq 0 ] || overall=1
}}
"#,
        path = quote(&path),
        bin = quote(&sandbox_watch.to_string_lossy()),
    );
    for p in plan {
        let Some(exe) = &p.exe else { continue };
        let filters: Vec<String> = p.filters.iter().map(|f| quote(f)).collect();
        writeln!(
            s,
            "run_tests {} {} --test-threads=1 --color=never --exact {}",
            p.name,
            quote(&exe.to_string_lossy()),
            filters.join(" ")
        )
        .unwrap();
    }
    writeln!(
        s,
        "echo \"$M done status=$overall uptime=$(up)\"\nexit $overall"
    )
    .unwrap();
    s
}

/// A qemu run: the console lines with the host's seconds since qemu started.
struct Boot {
    lines: Vec<(f64, String)>,
    exit: Option<i32>,
    timed_out: bool,
    wall: Duration,
}

/// The host directories the guest needs that its fresh tmpfs mounts (/tmp, /run, /root,
/// /dev/shm) would hide: /init binds them back.
fn hidden_in_guest(paths: &[PathBuf]) -> anyhow::Result<Vec<String>> {
    let mut keep: Vec<PathBuf> = Vec::new();
    for p in paths {
        let p = fs::canonicalize(p).with_context(|| format!("{}", p.display()))?;
        let hidden = ["/tmp", "/run", "/root", "/dev/shm"]
            .iter()
            .any(|m| p.starts_with(m));
        if hidden && !keep.iter().any(|k| p.starts_with(k)) {
            keep.retain(|k| !k.starts_with(&p));
            keep.push(p);
        }
    }
    keep.iter()
        .map(|k| {
            let s = k.to_string_lossy().into_owned();
            ensure!(
                !s.contains([' ', ',', '\t', '\n', '\'', '"', '\\']),
                "{s} is under a directory the guest mounts afresh and its name cannot be passed \
                 on the kernel command line: move the checkout"
            );
            Ok(s)
        })
        .collect()
}

fn boot(
    kernel: &Kernel,
    initrd: &Path,
    script: &Path,
    keep: &[String],
    console: &Path,
    timeout: Duration,
) -> anyhow::Result<Boot> {
    let mut cmd = Command::new("qemu-system-x86_64");
    cmd.args(["-accel", "tcg", "-m", "2048", "-smp", "2"])
        .arg("-kernel")
        .arg(&kernel.vmlinuz)
        .arg("-initrd")
        .arg(initrd)
        .arg("-append")
        .arg(format!(
            "console=ttyS0 panic=-1 quiet sw_script={}{}",
            script.display(),
            if keep.is_empty() {
                String::new()
            } else {
                format!(" sw_keep={}", keep.join(","))
            }
        ))
        .args(["-nographic", "-no-reboot", "-nic", "none"])
        .args(["-device", "isa-debug-exit,iobase=0xf4,iosize=0x04"])
        .args([
            "-virtfs",
            "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    eprintln!("+ {cmd:?}");
    eprintln!(
        "vm-test: booting {} (timeout {} s; console also in {})",
        kernel.release,
        timeout.as_secs(),
        console.display()
    );
    let start = Instant::now();
    let mut child = cmd.spawn().context("cannot start qemu-system-x86_64")?;
    let log = Arc::new(Mutex::new(fs::File::create(console)?));
    let lines = Arc::new(Mutex::new(Vec::new()));
    let reader = |stream: Box<dyn Read + Send>, prefix: &'static str| {
        let log = log.clone();
        let lines = lines.clone();
        std::thread::spawn(move || {
            let mut stream = BufReader::new(stream);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match stream.read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                let text = strip_escapes(&String::from_utf8_lossy(&buf));
                let line = format!("{prefix}{}", text.trim_end_matches(['\r', '\n']));
                println!("{line}");
                let _ = writeln!(log.lock().unwrap(), "{line}");
                lines
                    .lock()
                    .unwrap()
                    .push((start.elapsed().as_secs_f64(), line));
            }
        })
    };
    let out = reader(Box::new(child.stdout.take().unwrap()), "");
    let err = reader(Box::new(child.stderr.take().unwrap()), "qemu: ");
    let mut timed_out = false;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if start.elapsed() > timeout {
            timed_out = true;
            eprintln!(
                "vm-test: TIMEOUT after {} s: killing qemu",
                timeout.as_secs()
            );
            let _ = child.kill();
            break child.wait()?;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let wall = start.elapsed();
    let _ = out.join();
    let _ = err.join();
    let lines = std::mem::take(&mut *lines.lock().unwrap());
    Ok(Boot {
        lines,
        exit: status.code(),
        timed_out,
        wall,
    })
}

/// The line without terminal escape sequences (SeaBIOS clears the screen, colours).
fn strip_escapes(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\x1b' {
            out.push(c);
            continue;
        }
        match chars.next() {
            // CSI: parameters and intermediates up to a final byte in @..~.
            Some('[') => {
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            // Two-byte sequences (ESC c, ESC 7, …) and charset selection (ESC ( B).
            Some('(' | ')') => {
                chars.next();
            }
            _ => {}
        }
    }
    out
}

/// A guest marker line: `@@sw-vm WORD key=value…` (anywhere in the line: the kernel may have
/// printed into it).
fn marker(line: &str) -> Option<(&str, BTreeMap<&str, &str>, &str)> {
    let rest = &line[line.find(MARK)? + MARK.len()..];
    let rest = rest.trim_start();
    let (word, args) = rest.split_once(' ').unwrap_or((rest, ""));
    let kv = args
        .split_whitespace()
        .filter_map(|a| a.split_once('='))
        .collect();
    Some((word, kv, args))
}

struct BinResult {
    ran: bool,
    status: Option<i32>,
    seconds: Option<f64>,
    passed: usize,
    failed: Vec<String>,
    /// Filters with no `test NAME ... ok` line.
    not_passed: Vec<&'static str>,
    result_lines: usize,
    /// Console line numbers (1-based, as in console.log) of this binary's output.
    section: std::ops::Range<usize>,
    pass: bool,
}

struct Outcome {
    booted_kernel: Option<String>,
    boot_seconds: Option<f64>,
    hook: Option<String>,
    /// Console lines of the sanity run (its stderr when it failed).
    sanity: std::ops::Range<usize>,
    setup_failed: Option<String>,
    done: bool,
    bins: Vec<BinResult>,
    pass: bool,
    problems: Vec<String>,
}

/// A test binary's `end` marker: its exit status, the host's seconds since its `begin`, and
/// the console line.
#[derive(Clone, Copy)]
struct End {
    status: i32,
    seconds: f64,
    line: usize,
}

fn evaluate(plan: &[Planned], boot: &Boot) -> Outcome {
    let mut o = Outcome {
        booted_kernel: None,
        boot_seconds: None,
        hook: None,
        sanity: 0..0,
        setup_failed: None,
        done: false,
        bins: Vec::new(),
        pass: false,
        problems: Vec::new(),
    };
    // name → (host time at begin, first line, end)
    let mut sections: HashMap<String, (f64, usize, Option<End>)> = HashMap::new();
    for (i, (t, line)) in boot.lines.iter().enumerate() {
        let n = i + 1;
        let Some((word, kv, args)) = marker(line) else {
            continue;
        };
        match word {
            "init" => o.booted_kernel = kv.get("kernel").map(|s| s.to_string()),
            "userland" => {
                o.boot_seconds = Some(*t);
                o.sanity = n + 1..n + 1;
            }
            "probe" => {
                o.hook = kv.get("file_open").map(|s| s.to_string());
                o.sanity.end = n;
            }
            "setup-failed" => o.setup_failed = Some(args.to_string()),
            "begin" => {
                let name = args.split_whitespace().next().unwrap_or("").to_string();
                sections.insert(name, (*t, n + 1, None));
            }
            "end" => {
                let name = args.split_whitespace().next().unwrap_or("");
                let status = kv.get("status").and_then(|s| s.parse().ok()).unwrap_or(-1);
                if let Some(s) = sections.get_mut(name) {
                    s.2 = Some(End {
                        status,
                        seconds: *t - s.0,
                        line: n,
                    });
                }
            }
            "done" => o.done = true,
            _ => {}
        }
    }

    for p in plan {
        let (section, end) = match sections.get(p.name) {
            // A binary that never ended (timeout) runs to the end of the console.
            Some(&(_, first, end)) => (first..end.map_or(boot.lines.len() + 1, |e| e.line), end),
            None => (0..0, None),
        };
        let mut passed_names = HashSet::new();
        let mut failed = Vec::new();
        let mut passed = 0;
        let mut result_lines = 0;
        for n in section.clone() {
            let l = boot.lines[n - 1].1.as_str();
            if let Some(rest) = l.strip_prefix("test ")
                && let Some((name, verdict)) = rest.rsplit_once(" ... ")
            {
                match verdict.trim() {
                    "ok" => {
                        passed_names.insert(name.to_string());
                    }
                    "FAILED" => failed.push(name.to_string()),
                    _ => {}
                }
            }
            if let Some(r) = l.strip_prefix("test result: ") {
                result_lines += 1;
                passed += r
                    .split(". ")
                    .nth(1)
                    .and_then(|c| c.split(' ').next())
                    .and_then(|n| n.parse::<usize>().ok())
                    .unwrap_or(0);
            }
        }
        let not_passed: Vec<&str> = p
            .filters
            .iter()
            .copied()
            .filter(|f| !passed_names.contains(*f))
            .collect();
        let status = end.map(|e| e.status);
        let pass = status == Some(0)
            && result_lines == 1
            && passed == p.filters.len()
            && not_passed.is_empty();
        o.bins.push(BinResult {
            ran: end.is_some(),
            status,
            seconds: end.map(|e| e.seconds),
            passed,
            failed,
            not_passed,
            result_lines,
            section,
            pass,
        });
    }

    if boot.timed_out {
        o.problems
            .push("qemu was killed at the timeout (SW_VM_TIMEOUT)".into());
    }
    if let Some(why) = &o.setup_failed {
        o.problems
            .push(format!("the guest could not be set up: {why}"));
    }
    match boot.exit {
        Some(1) => {}
        Some(c) if c & 1 == 1 => o.problems.push(format!(
            "the guest reported status {} (qemu exit {c})",
            c >> 1
        )),
        Some(c) => o.problems.push(format!(
            "qemu exited {c} without a status from the guest (a guest panic or power-off)"
        )),
        None if boot.timed_out => {}
        None => o.problems.push("qemu was killed by a signal".into()),
    }
    match o.hook.as_deref() {
        Some(GUEST_HOOK) => {}
        Some(h) => o.problems.push(format!(
            "the sanity run in the guest gave open hook {h:?}, expected {GUEST_HOOK:?} on this \
             kernel (console.log lines {}-{})",
            o.sanity.start,
            o.sanity.end.saturating_sub(1)
        )),
        None => o
            .problems
            .push("no probe sanity line from the guest".into()),
    }
    if !o.done && o.setup_failed.is_none() {
        o.problems
            .push("the guest script did not finish (no `done` line)".into());
    }
    o.pass = o.problems.is_empty() && o.bins.iter().all(|b| b.pass);
    o
}

/// A failed test's output with what differs between runs of one failure left out: its name,
/// numbers (addresses, pids, line numbers).
fn failure_key(test: &str, lines: &[(f64, String)]) -> String {
    let mut key = String::new();
    for (_, l) in lines {
        let l = l.replace(test, "TEST");
        let mut token = String::new();
        let flush = |token: &mut String, key: &mut String| {
            let number = token.starts_with("0x")
                || (token.chars().all(|c| c.is_ascii_hexdigit())
                    && token.chars().any(|c| c.is_ascii_digit()));
            key.push_str(if number && !token.is_empty() {
                "#"
            } else {
                token
            });
            token.clear();
        };
        for c in l.chars() {
            if c.is_ascii_alphanumeric() {
                token.push(c);
            } else {
                flush(&mut token, &mut key);
                key.push(c);
            }
        }
        flush(&mut token, &mut key);
        key.push('\n');
    }
    key
}

/// Lines `range` of the console (1-based), the first `head` and last `tail` of them.
fn excerpt(w: &mut String, boot: &Boot, range: std::ops::Range<usize>, head: usize, tail: usize) {
    let len = range.len();
    for (k, n) in range.clone().enumerate() {
        if len > head + tail && k == head {
            let _ = writeln!(
                w,
                "    [… {} lines: console.log lines {}-{} …]",
                len - head - tail,
                n,
                range.end - tail - 1
            );
        }
        if len <= head + tail || k < head || k >= len - tail {
            let _ = writeln!(w, "{}", boot.lines[n - 1].1);
        }
    }
}

fn summary(
    kernel: &Kernel,
    plan: &[Planned],
    boot: &Boot,
    o: &Outcome,
    setup: Duration,
    total: Duration,
    console: &Path,
) -> String {
    let mut s = String::new();
    let w = &mut s;
    let _ = writeln!(w, "\n==== vm-test summary ====");
    let _ = writeln!(
        w,
        "kernel: {} booted ({}), open hook in the guest: {}",
        o.booted_kernel
            .as_deref()
            .unwrap_or("(never reached /init)"),
        kernel.package,
        o.hook.as_deref().unwrap_or("(unknown)")
    );
    match o.boot_seconds {
        Some(b) => {
            let _ = writeln!(
                w,
                "boot: {b:.1} s (qemu start to the host's userland running in the guest)"
            );
        }
        None => {
            let _ = writeln!(w, "boot: did not reach the guest script");
        }
    }
    for (p, b) in plan.iter().zip(&o.bins) {
        let verdict = if b.pass { "PASS" } else { "FAIL" };
        let mut line = format!(
            "{:<8} {verdict}  {}/{} passed",
            p.name,
            b.passed,
            p.filters.len()
        );
        if let Some(t) = b.seconds {
            let _ = write!(line, " in {t:.1} s");
        }
        if let Some(st) = b.status
            && st != 0
        {
            let _ = write!(line, ", exit status {st}");
        }
        if p.exe.is_none() {
            line.push_str(", no such test binary");
        } else if !b.ran {
            line.push_str(", did not finish");
        } else if b.result_lines != 1 {
            let _ = write!(line, ", {} `test result:` lines", b.result_lines);
        }
        let _ = writeln!(w, "{line}");
        for f in &b.failed {
            let _ = writeln!(w, "           failed:  {f}");
        }
        for m in &p.missing {
            let _ = writeln!(
                w,
                "           missing: {m} (not in this build: 0 tests ran for it)"
            );
        }
        for n in &b.not_passed {
            if !b.failed.iter().any(|f| f == n) && !p.missing.contains(n) {
                let _ = writeln!(w, "           not run: {n}");
            }
        }
    }
    let _ = writeln!(
        w,
        "time: {:.1} s total = {:.1} s setup and builds + {:.1} s qemu (boot and tests)",
        total.as_secs_f64(),
        setup.as_secs_f64(),
        boot.wall.as_secs_f64()
    );
    for p in &o.problems {
        let _ = writeln!(w, "problem: {p}");
    }

    // What a failure needs to be debugged without a rerun.
    if o.hook.as_deref() != Some(GUEST_HOOK) && !o.sanity.is_empty() {
        let _ = writeln!(
            w,
            "\n---- sanity run `sandbox-watch run -- true` in the guest (console.log lines {}-{}) ----",
            o.sanity.start,
            o.sanity.end - 1
        );
        excerpt(w, boot, o.sanity.clone(), 12, 12);
    }
    let mut shown: HashMap<String, (&str, String)> = HashMap::new();
    for (p, b) in plan.iter().zip(&o.bins) {
        if b.pass || b.section.is_empty() {
            continue;
        }
        // libtest prints each failed test's output as a `---- NAME stdout ----` block.
        let mut blocks = Vec::new();
        for n in b.section.clone() {
            let l = boot.lines[n - 1].1.as_str();
            if l.starts_with("---- ") && l.ends_with(" stdout ----") {
                blocks.push(n..b.section.end);
                if blocks.len() > 1 {
                    let k = blocks.len() - 2;
                    blocks[k].end = n;
                }
            } else if l == "failures:"
                && let Some(last) = blocks.last_mut()
                && last.end == b.section.end
            {
                last.end = n;
            }
        }
        if blocks.is_empty() {
            let _ = writeln!(
                w,
                "\n---- {} in the guest, last lines (console.log lines {}-{}) ----",
                p.name,
                b.section.start,
                b.section.end - 1
            );
            let from = b.section.end.saturating_sub(40).max(b.section.start);
            excerpt(w, boot, from..b.section.end, 40, 0);
        }
        for r in blocks {
            // The same failure in many tests (the probe cannot start) is shown once.
            let header = boot.lines[r.start - 1].1.as_str();
            let test = header
                .trim_start_matches("---- ")
                .trim_end_matches(" stdout ----");
            let key = failure_key(test, &boot.lines[r.start..r.end - 1]);
            if let Some((first_bin, first_test)) = shown.get(&key) {
                let _ = writeln!(
                    w,
                    "\n---- {}: {test}: the same output as {first_bin}: {first_test} \
                     (console.log lines {}-{}) ----",
                    p.name,
                    r.start,
                    r.end - 1
                );
                continue;
            }
            shown.insert(key, (p.name, test.to_string()));
            let _ = writeln!(
                w,
                "\n---- {} in the guest: console.log lines {}-{} ----",
                p.name,
                r.start,
                r.end - 1
            );
            excerpt(w, boot, r, 20, 12);
        }
    }
    if o.bins.iter().all(|b| b.section.is_empty()) && !boot.lines.is_empty() {
        let _ = writeln!(w, "\n---- last console lines ----");
        let n = boot.lines.len();
        excerpt(w, boot, n.saturating_sub(60) + 1..n + 1, 60, 0);
    }
    let _ = writeln!(w, "\nconsole: {}", console.display());
    let _ = writeln!(w, "RESULT: {}", if o.pass { "PASS" } else { "FAIL" });
    s
}
