//! Kills the monitor with SIGKILL, after acting (key read, connect, .bashrc) when asked.
//!
//! `attack-kill-monitor DELAY_MS [act]`: with `act`, acts first; then waits DELAY_MS
//! milliseconds (0: at once) and sends SIGKILL to the monitor. Prints how long after its own
//! start the kill was sent. What is left to judge is the log: `sandbox-watch verify LOG`.
#[path = "../attack_common.rs"]
mod common;

use std::time::Instant;

use common::*;

fn main() {
    let started = Instant::now();
    let delay: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| die("usage: attack-kill-monitor DELAY_MS [act]"));
    let acting = std::env::args().nth(2).as_deref() == Some("act");
    let monitor = monitor_pid();
    if acting {
        let home = attack_home();
        let listener = listener();
        act(&home, listener.local_addr().unwrap().port());
    }
    let at = started.elapsed();
    if delay > at.as_millis() as u64 {
        sleep_ms(delay - at.as_millis() as u64);
    }
    // SAFETY: kill with a pid and a signal number.
    if unsafe { libc::kill(monitor, libc::SIGKILL) } != 0 {
        die(&format!(
            "SIGKILL {monitor}: {}",
            std::io::Error::last_os_error()
        ));
    }
    say(&format!(
        "SIGKILL sent to the monitor ({monitor}) {:.1} ms after my start",
        started.elapsed().as_secs_f64() * 1e3
    ));
}
