//! Container mode with a real runtime: runc, with a busybox rootfs, on this machine's cgroup
//! layout. Containers and their cgroup directories are removed even when a test fails.
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use integration_tests::*;
use serde_json::Value;

/// A running runc container; removed on drop.
struct Runc {
    id: String,
    bundle: tempfile::TempDir,
    pid: u32,
}

const PARENT: &str = "sw-test";

fn cgroup2_mount() -> PathBuf {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    info.lines()
        .find_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            (right.split_whitespace().next()? == "cgroup2")
                .then(|| PathBuf::from(left.split_whitespace().nth(4).unwrap()))
        })
        .expect("cgroup2 mounted")
}

impl Runc {
    fn start(id: &str, script: &str) -> Runc {
        require_root();
        let bundle = tempfile::tempdir().unwrap();
        let bin = bundle.path().join("rootfs/bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::copy("/bin/busybox", bin.join("busybox"))
            .expect("busybox-static is installed (cargo xtask setup)");
        for l in ["sh", "sleep", "cat", "ls", "true", "echo"] {
            std::os::unix::fs::symlink("busybox", bin.join(l)).unwrap();
        }
        let out = Command::new("runc")
            .arg("spec")
            .current_dir(bundle.path())
            .output()
            .expect("runc is installed (cargo xtask setup)");
        assert!(out.status.success());
        let path = bundle.path().join("config.json");
        let mut config: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        config["process"]["terminal"] = false.into();
        config["process"]["args"] = serde_json::json!(["sh", "-c", script]);
        config["linux"]["cgroupsPath"] = format!("{PARENT}/{id}").into();
        std::fs::write(&path, config.to_string()).unwrap();
        let pid_file = bundle.path().join("pid");
        let status = Command::new("runc")
            .args(["run", "-d", "--pid-file"])
            .arg(&pid_file)
            .arg(id)
            .current_dir(bundle.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "runc run {id}");
        let pid = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        Runc {
            id: id.to_string(),
            bundle,
            pid,
        }
    }

    fn exec(&self, args: &[&str]) {
        let status = Command::new("runc")
            .args(["exec", "-d", &self.id])
            .args(args)
            .status()
            .unwrap();
        assert!(status.success());
    }

    fn stop(&self) {
        let _ = Command::new("runc")
            .args(["kill", &self.id, "KILL"])
            .status();
    }

    fn cgroup(&self) -> String {
        format!("/{PARENT}/{}", self.id)
    }
}

impl Drop for Runc {
    fn drop(&mut self) {
        let _ = Command::new("runc")
            .args(["delete", "-f", &self.id])
            .stderr(Stdio::null())
            .status();
        let dir = cgroup2_mount().join(PARENT);
        for _ in 0..50 {
            let _ = std::fs::remove_dir(dir.join(&self.id));
            if !dir.join(&self.id).exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = std::fs::remove_dir(&dir);
        let _ = &self.bundle;
    }
}

fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{prefix}{:08x}{:08x}", std::process::id(), nanos)
}

/// `sandbox-watch container` in the background; returns (child, report path).
fn watch(dir: &Path, target: &str, extra: &[&str]) -> std::process::Child {
    command()
        .args(["container", "--headless", "--report"])
        .arg(dir.join("report.json"))
        .arg("--log")
        .arg(dir.join("log.jsonl"))
        .args(extra)
        .arg(target)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The report, checked against the replay of its log.
fn report(dir: &Path) -> Value {
    let r = serde_json::from_str(
        &std::fs::read_to_string(dir.join("report.json")).expect("report written"),
    )
    .unwrap();
    assert_replay_matches(&r, &dir.join("log.jsonl"));
    r
}

#[test]
fn the_container_is_watched_and_nothing_else() {
    let c = Runc::start(
        &unique("a1b2c3"),
        "while true; do cat /proc/self/stat > /dev/null; sleep 0.2; done",
    );
    let dir = tempfile::tempdir().unwrap();
    let mut monitor = watch(dir.path(), &c.id, &[]);
    wait_attached(&dir.path().join("log.jsonl"), &mut monitor);
    c.exec(&["sh", "-c", "echo entered-later > /dev/null; sleep 0.3"]);
    // A process on the host at the same time.
    Command::new("/bin/echo")
        .arg("host-only")
        .stdout(Stdio::null())
        .status()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    c.stop();
    let out = wait(&mut monitor, 20);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = report(dir.path());
    let procs = r["processes"].as_array().unwrap();
    assert_eq!(r["target"]["mode"], "container");
    assert_eq!(r["target"]["container"]["id"], c.id);
    assert_eq!(r["target"]["container"]["cgroup"], c.cgroup());
    let init = procs
        .iter()
        .find(|p| p["pid"] == c.pid)
        .expect("the container's init, there before the capture");
    assert_eq!(init["preexisting"], true);
    assert!(
        procs.iter().any(|p| p["argv"][0] == "cat"),
        "the loop inside is captured"
    );
    assert!(
        procs.iter().any(|p| p["argv"].as_array().is_some_and(|a| a
            .iter()
            .any(|x| x.as_str().is_some_and(|s| s.contains("entered-later"))))),
        "runc exec is captured: {procs:#?}"
    );
    assert!(
        !procs.iter().any(|p| p["argv"][1] == "host-only"),
        "a host process is not"
    );
    let netns = std::fs::read_link(format!("/proc/{}/ns/net", std::process::id())).unwrap();
    assert_ne!(
        r["agent"]["netns"].to_string(),
        netns
            .to_string_lossy()
            .trim_start_matches("net:[")
            .trim_end_matches(']'),
        "the container's own namespace"
    );
    assert_eq!(r["verdict"], "inside");
    let end: Value = serde_json::from_str(
        std::fs::read_to_string(dir.path().join("log.jsonl"))
            .unwrap()
            .lines()
            .last()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(end["ended_by"], "the container's cgroup is empty or gone");
}

fn wait(child: &mut std::process::Child, secs: u64) -> std::process::Output {
    for _ in 0..secs * 10 {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if child.try_wait().unwrap().is_none() {
        let _ = child.kill();
        panic!("the capture did not end when the container stopped");
    }
    let mut stderr = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    std::process::Output {
        status: child.wait().unwrap(),
        stdout: Vec::new(),
        stderr: stderr.into_bytes(),
    }
}

#[test]
fn resolution_by_full_id_short_id_and_cgroup_path() {
    let c = Runc::start(&unique("d4e5f6"), "sleep 600");
    let mount = cgroup2_mount();
    let absolute = mount
        .join(c.cgroup().trim_start_matches('/'))
        .display()
        .to_string();
    for target in [
        c.id.clone(),
        c.id[..10].to_string(),
        c.cgroup(),
        c.cgroup()[1..].to_string(),
        absolute,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut m = watch(dir.path(), &target, &["--duration", "0.5"]);
        let out = wait(&mut m, 20);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{target}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let r = report(dir.path());
        assert_eq!(r["target"]["container"]["cgroup"], c.cgroup(), "{target}");
        assert!(
            r["processes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["pid"] == c.pid),
            "{target}"
        );
    }
}

#[test]
fn unknown_and_ambiguous_ids_are_usage_errors() {
    let base = unique("e7f8");
    let a = Runc::start(&format!("{base}aa"), "sleep 600");
    let b = Runc::start(&format!("{base}bb"), "sleep 600");
    let out = sandbox_watch(&["container", "--headless", &base]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("more than one") && stderr.contains(&a.id) && stderr.contains(&b.id),
        "{stderr}"
    );
    let out = sandbox_watch(&["container", "--headless", "no-such-container-0000"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no running container"), "{stderr}");
}
