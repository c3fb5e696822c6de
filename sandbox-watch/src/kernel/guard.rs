//! Kernel state the agent cannot rewrite, and what tells the kernel which objects, threads and
//! files are the monitor's own.
//!
//! - **Frozen maps** (`BPF_MAP_FREEZE`): once the userspace has written a map for the last
//!   time it freezes it; from then on every bpf(2) write to it fails with EPERM, the agent's
//!   included (the BPF programs still write it). aya 0.14 freezes only `.rodata`, so the
//!   command is made here with the descriptor aya holds.
//! - `OWN_IDS`: the ids of every map, program and link this process holds, read from its own
//!   `/proc/self/fdinfo` after the programs are attached.
//! - `MON_TIDS`: this process's threads (the fork hook adds the ones started later).
//! - `OUTPUTS`: the inodes of the files the monitor writes (and of its signing key).
use std::os::fd::{AsFd, AsRawFd};

use aya::maps::MapData;
use sandbox_watch_common::{FileKey, tamper};

/// `BPF_MAP_FREEZE` (include/uapi/linux/bpf.h).
const BPF_MAP_FREEZE: libc::c_long = 22;

/// Freezes a map: no bpf(2) call can write it from now on (programs still can).
pub fn freeze(map: &MapData) -> std::io::Result<()> {
    // union bpf_attr { struct { __u32 map_fd; … } }: the descriptor first, the rest zero.
    let mut attr = [0u64; 16];
    attr[0] = map.fd().as_fd().as_raw_fd() as u64;
    // SAFETY: attr is a valid 128-byte buffer that outlives the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_MAP_FREEZE,
            attr.as_mut_ptr(),
            std::mem::size_of_val(&attr),
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// One BPF object this process holds: its kind (`tamper::OBJ_*`) and id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Object {
    pub kind: u64,
    pub id: u32,
}

impl Object {
    /// The key of `OWN_IDS`.
    pub fn key(self) -> u64 {
        (self.kind << 32) | self.id as u64
    }
}

/// The BPF objects behind this process's descriptors, from `/proc/self/fdinfo`: exactly what
/// it holds (`map_id:`, `prog_id:`, `link_id:` lines).
pub fn own_objects() -> Vec<Object> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/fdinfo") else {
        return out;
    };
    for entry in dir.flatten() {
        let Ok(text) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        out.extend(objects_in_fdinfo(&text));
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The object one fdinfo file names (a link's fdinfo also names its program: both count).
fn objects_in_fdinfo(text: &str) -> Vec<Object> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let kind = match name.trim() {
            "map_id" => tamper::OBJ_MAP,
            "prog_id" => tamper::OBJ_PROG,
            "link_id" => tamper::OBJ_LINK,
            _ => continue,
        };
        if let Ok(id) = value.trim().parse() {
            out.push(Object { kind, id });
        }
    }
    out
}

/// This process's threads now.
pub fn own_threads() -> Vec<u32> {
    std::fs::read_dir("/proc/self/task")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The inode of this process's pid namespace.
pub fn own_pidns() -> u32 {
    std::fs::read_link("/proc/self/ns/pid")
        .ok()
        .and_then(|l| crate::launch::target::parse_ns_link(&l.to_string_lossy()))
        .unwrap_or(0) as u32
}

/// The key the kernel reads for an open file (its superblock's `s_dev`: major << 20 | minor).
pub fn file_key(meta: &std::fs::Metadata) -> FileKey {
    use std::os::unix::fs::MetadataExt as _;
    let dev = meta.dev();
    FileKey {
        dev: ((libc::major(dev) as u32) << 20) | libc::minor(dev) as u32,
        _pad: 0,
        ino: meta.ino(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fdinfo_names_maps_programs_and_links() {
        let map = "pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t1057\nmap_type:\t1\nmap_id:\t916\nfrozen:\t0\n";
        assert_eq!(
            objects_in_fdinfo(map),
            [Object {
                kind: tamper::OBJ_MAP,
                id: 916
            }]
        );
        let link = "link_type:\tperf\nlink_id:\t33\nprog_tag:\tab\nprog_id:\t120\n";
        assert_eq!(
            objects_in_fdinfo(link),
            [
                Object {
                    kind: tamper::OBJ_LINK,
                    id: 33
                },
                Object {
                    kind: tamper::OBJ_PROG,
                    id: 120
                }
            ]
        );
        assert!(objects_in_fdinfo("pos:\t0\nflags:\t02\n").is_empty());
    }
}
