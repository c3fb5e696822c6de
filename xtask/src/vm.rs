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
//! Environment: `SW_VM_TIMEOUT` (seconds, default 2400) bounds the qemu run; `SW_VM_OPTIONAL=1`
//! turns "qemu is missing and cannot be installed" into a skip with exit status 0;
//! `SW_VM_NO_BUILD=1` skips setup and the release build of sandbox-watch (the binary already
//! in target/release is used; the test binaries are still built); `SW_VM_ONLY=tamper,files`
//! runs only those test binaries of the list, and `SW_VM_TESTS=name,name` only those tests of
//! them, and `SW_VM_PRE=script.sh` runs that script in the guest before them (all three for
//! development: CI runs every test and no script).
//!
//! A guest kernel that hangs (a soft lockup: twice in four full runs of this TCG guest, in a
//! `sandbox-watch` process; not yet explained) ends its boot at once with the kernel's trace in
//! the console (`kernel| ` lines), and the binaries it did not finish run once more in a second
//! boot, with one CPU (given the time the first left, at least 15 minutes). The run passes only
//! if every binary that finished in the first boot passed, none that did not finish printed a
//! failure, and the second boot passes whole; both summaries are printed and kept in `summary.txt`.
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

mod kernel;
mod outcome;

use kernel::*;
use outcome::*;

/// The integration test binaries run in the guest (cargo's test target names) and the exact
/// names of the tests each runs. A named test that does not exist is a failure, not a pass.
///
/// A choice, not every test: under TCG a test takes 20-60 s (each capture verifies every BPF
/// program again), and the 76 tests this list once held ran past the 40-minute limit. Every
/// capture loads and verifies the whole object on 6.1, so any test checks that it loads; the
/// tests here are those whose hooks behave differently there: the fentry open hook and what
/// it sees (io_uring, links, mounts, handles), 6.1's tracepoints for writes, attributes,
/// modules and mounts, and the tamper hooks.
const GUEST_TESTS: &[(&str, &[&str])] = &[
    (
        "process",
        &["unshare_sandbox_inside_and_nsenter_back_outside"],
    ),
    (
        "files",
        &[
            "credential_reads_on_ext4_tmpfs_and_proc_are_verified",
            "the_open_hook_states_what_it_cannot_see",
            "io_uring_opens_are_seen_by_fentry_or_at_their_completion",
            "create_write_rename_delete_and_persistence",
        ],
    ),
    ("output", &["an_output_flood_pushes_out_no_other_record"]),
    (
        "network",
        &["listener_ok_connect_and_refused_connect_on_v4_and_v6"],
    ),
    (
        "net_kernel",
        &[
            "io_uring_connects_inline_in_io_wq_and_sqpoll_are_connects_with_the_kernels_destination",
            "fastopen_sendto_and_sendmsg_are_connects",
            "raw_icmp_is_a_send_entry",
        ],
    ),
    (
        "file_truth",
        &[
            "a_key_read_through_a_hard_link_is_a_credential_read",
            "a_key_read_through_a_bind_mount_is_a_credential_read",
            "a_key_opened_by_handle_is_a_credential_read",
            "an_o_path_open_is_not_a_read_and_the_reads_after_it_are_all_counted",
            "a_name_rewritten_during_rename_names_both_and_is_tamper",
        ],
    ),
    (
        "dirty_writes",
        &[
            "a_write_through_an_inherited_descriptor_is_a_write",
            "a_write_through_a_descriptor_taken_with_pidfd_getfd_is_persistence",
            // The guest's /tmp is tmpfs: the store dirties no page there, only the mtime.
            "a_store_into_a_shared_mapping_of_a_tmpfs_file_is_a_write",
            "reads_that_update_the_atime_are_not_writes",
            // O_TRUNC told at do_sys_openat2's exit where fentry reports the open.
            "an_open_for_write_says_whether_the_file_was_changed",
        ],
    ),
    (
        "file_attrs",
        &[
            "a_setuid_bit_set_is_an_escalation_and_fails_on_it",
            // 6.1 has module support: the modprobe setting this host's 6.18 lacks.
            "a_write_to_modprobe_is_an_escalation",
            "a_binfmt_misc_registration_is_an_escalation",
        ],
    ),
    (
        "mounts",
        &[
            "a_bind_mount_as_root_is_a_mount_record_and_the_key_read_through_it_a_credential",
            // 6.1 has no open_tree_attr (6.15): the gap is named there.
            "a_mount_call_this_kernel_lacks_is_a_named_gap",
        ],
    ),
    ("evidence", &["a_real_log_verifies_and_tampering_is_named"]),
    (
        "tamper",
        &[
            "untrace_through_bpf_is_tamper_and_the_agent_stays_traced",
            "blinding_the_monitor_is_tamper_and_its_loss_is_counted",
            "writes_to_frozen_maps_fail_and_every_bpf_write_is_tamper",
            // 6.1 has the init_module/finit_module tracepoints (this host's 6.18 has no
            // module support): the tamper branch of the test runs there.
            "a_kernel_module_load_is_tamper_or_a_named_gap",
        ],
    ),
];

/// What the guest needs to mount the host over virtio 9p, and binfmt_misc (a module in Debian's
/// kernel) for the test that registers an interpreter; their dependencies come along, and those
/// that are built in (or absent) in a kernel version are skipped.
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
    "binfmt_misc",
];

/// The open hook the guest kernel must load.
const GUEST_HOOK: &str = "fentry";

/// Prefix of the lines the guest prints for the host to read.
const MARK: &str = "@@sw-vm";

/// What the kernel prints on the console when a CPU is stuck (a soft lockup).
const LOCKUP: &str = "BUG: soft lockup";

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
# What udev adds on a real system and devtmpfs lacks (the tests use /dev/fd/N paths).
ln -sfn /proc/self/fd $H/dev/fd
ln -sfn /proc/self/fd/0 $H/dev/stdin
ln -sfn /proc/self/fd/1 $H/dev/stdout
ln -sfn /proc/self/fd/2 $H/dev/stderr
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

/// One test binary as run in the guest.
#[derive(Clone)]
struct Planned {
    name: &'static str,
    exe: Option<PathBuf>,
    filters: Vec<&'static str>,
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
        Err(_) => Duration::from_secs(2400),
    };
    let console = dir.join("console.log");
    let mut needed = vec![root()];
    needed.extend(
        plan.iter()
            .filter_map(|p| p.exe.as_ref()?.parent().map(Path::to_path_buf)),
    );
    let keep = hidden_in_guest(&needed)?;
    let boot = boot(&kernel, &initrd, &script, &keep, &console, timeout, 2)?;

    let outcome = evaluate(&plan, &boot);
    let mut summary = summary(
        &kernel,
        &plan,
        &boot,
        &outcome,
        setup_time,
        started.elapsed(),
        &console,
    );
    println!("{summary}");
    let mut pass = outcome.pass;
    // A guest kernel that hung (a soft lockup) is named with its trace, and what it did not
    // finish runs once more in a second boot: every binary that did finish must have passed,
    // and the second boot must pass whole. The hang stays in the summary either way.
    let rerun: Vec<Planned> = plan
        .iter()
        .zip(&outcome.bins)
        .filter(|(_, b)| !b.ran)
        .map(|(p, _)| p.clone())
        .collect();
    if outcome.lockup.is_some()
        && !rerun.is_empty()
        && outcome
            .bins
            .iter()
            .all(|b| b.pass || (!b.ran && b.failed.is_empty()))
    {
        let first = dir.join("console-1.log");
        fs::rename(&console, &first)?;
        let names: Vec<&str> = rerun.iter().map(|p| p.name).collect();
        eprintln!(
            "vm-test: the guest kernel hung (soft lockup; its trace is above and in {}); \
             booting once more for what did not finish: {}",
            first.display(),
            names.join(", ")
        );
        fs::write(&script, guest_script(&rerun, &sandbox_watch))?;
        // The second boot gets what the first left, and at least 15 minutes (so the whole
        // guest run stays under 55). It has one CPU: both recorded hangs had the monitor's
        // threads stuck in the kernel, the second on both CPUs at once (a cross-CPU wait that
        // never ended); with one CPU there is no other CPU to wait for.
        let left = timeout
            .saturating_sub(boot.wall)
            .max(Duration::from_secs(900));
        let again = self::boot(&kernel, &initrd, &script, &keep, &console, left, 1)?;
        let outcome2 = evaluate(&rerun, &again);
        let second = self::summary(
            &kernel,
            &rerun,
            &again,
            &outcome2,
            setup_time,
            started.elapsed(),
            &console,
        );
        println!("{second}");
        pass = outcome2.pass;
        let _ = write!(
            summary,
            "\n==== second boot (the first boot's kernel hung; its console: {}) ====\n{second}",
            first.display()
        );
        println!(
            "vm-test: the first boot's kernel hung (soft lockup, trace in {}); the second boot {}",
            first.display(),
            if pass { "passed" } else { "failed too" }
        );
    }
    fs::write(dir.join("summary.txt"), &summary)?;
    if !pass {
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
    let only = std::env::var("SW_VM_ONLY").ok();
    let only: Option<Vec<&str>> = only.as_deref().map(|o| o.split(',').collect());
    if let Some(o) = &only
        && let Some(bad) = o.iter().find(|n| !GUEST_TESTS.iter().any(|(g, _)| g == *n))
    {
        bail!(
            "SW_VM_ONLY names {bad:?}, which is not in the guest's list: use some of {}",
            GUEST_TESTS
                .iter()
                .map(|(g, _)| *g)
                .collect::<Vec<_>>()
                .join(",")
        );
    }
    let tests = std::env::var("SW_VM_TESTS").ok();
    for &(name, filters) in GUEST_TESTS {
        if only.as_ref().is_some_and(|o| !o.contains(&name)) {
            continue;
        }
        let filters: Vec<&'static str> = filters
            .iter()
            .copied()
            .filter(|f| tests.as_ref().is_none_or(|t| t.split(',').any(|w| w == *f)))
            .collect();
        if filters.is_empty() {
            continue;
        }
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

/// `s` as one word of the guest's sh script.
fn quote(s: &str) -> String {
    shlex::try_quote(s)
        .expect("paths and test names hold no NUL byte")
        .into_owned()
}

/// The script the guest runs with the host's own userland (read over 9p at run time).
fn guest_script(plan: &[Planned], sandbox_watch: &Path) -> String {
    let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/sbin:/usr/bin:/sbin:/bin".into());
    let mut s = format!(
        r#"#!/bin/sh
# Written by `cargo xtask vm-test`; runs in the guest as the child of PID 1.
export PATH={path} HOME=/root TMPDIR=/tmp RUST_BACKTRACE=1 SANDBOX_WATCH_BIN={bin}
# Emulated (TCG) time: waits a test chose for the host are this many times longer here.
export SW_TIME_SCALE=10
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

# A kernel that hangs on a CPU (a soft lockup; it taints the kernel, bit 14) is named with
# its trace from the kernel's log (the console shows only its first line), and the boot ends
# at once instead of at the timeout.
(
    while sleep 5; do
        [ $(( $(cat /proc/sys/kernel/tainted) & 16384 )) -eq 0 ] && continue
        echo "$M lockup uptime=$(up)"
        dmesg | sed -n '/soft lockup/,$p' | head -n 200 | sed 's/^/kernel| /'
        printf '\003' | dd of=/dev/port bs=1 seek=244 count=1 status=none
        echo o > /proc/sysrq-trigger
        exit
    done
) &
watcher=$!

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
    if let Ok(pre) = std::env::var("SW_VM_PRE") {
        writeln!(s, "echo \"$M pre {q}\"; sh {q}", q = quote(&pre)).unwrap();
    }
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
        "kill $watcher\necho \"$M done status=$overall uptime=$(up)\"\nexit $overall"
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
    cpus: u32,
) -> anyhow::Result<Boot> {
    let mut cmd = Command::new("qemu-system-x86_64");
    cmd.args(["-accel", "tcg", "-m", "2048", "-smp", &cpus.to_string()])
        .arg("-kernel")
        .arg(&kernel.vmlinuz)
        .arg("-initrd")
        .arg(initrd)
        .arg("-append")
        // loglevel=3: the kernel's errors (a test that loads a bad module makes one) stay in
        // dmesg instead of landing inside a test's result line; oopses and lockups still show.
        .arg(format!(
            "console=ttyS0 panic=-1 quiet loglevel=3 sw_script={}{}",
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
    // When the console first said a CPU is stuck.
    let lockup_seen: Arc<Mutex<Option<Instant>>> = Arc::default();
    let reader = |stream: Box<dyn Read + Send>, prefix: &'static str| {
        let log = log.clone();
        let lines = lines.clone();
        let lockup_seen = lockup_seen.clone();
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
                if line.contains(LOCKUP) {
                    lockup_seen.lock().unwrap().get_or_insert_with(Instant::now);
                }
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
        // The guest's own watcher ends a hung boot; if it cannot run (every CPU stuck), the
        // host does, two minutes after the kernel's first soft-lockup line.
        if lockup_seen
            .lock()
            .unwrap()
            .is_some_and(|t| t.elapsed() > Duration::from_secs(120))
        {
            eprintln!(
                "vm-test: the guest kernel hung (soft lockup) and did not end the boot: killing qemu"
            );
            let _ = child.kill();
            break child.wait()?;
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
