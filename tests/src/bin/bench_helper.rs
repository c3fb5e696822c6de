//! Small programs for `cargo xtask bench`:
//!
//! - `timed OUT CMD [ARG…]`: runs CMD, then writes to OUT (JSON) its wall time and the resource
//!   use of this process and its children, and exits with CMD's status. The benchmark times
//!   every workload through it, so a monitor's own start-up is never in the measured time.
//! - `markers N INTERVAL_MS`: runs `/bin/true marker-I` for I in 0..N, one every INTERVAL_MS
//!   (for the kernel-to-log delay).
//! - `opens DIR FILES PROCS`: creates FILES files in DIR, then runs PROCS processes one after
//!   another, each opening every file once (FILES × PROCS distinct reads: records the kernel
//!   cannot fold into a count).
//! - `open-each DIR FILES`: one of those processes.
//! - `udp N`, `tcp N`: N datagrams, N loopback connections (see below).
//! - `writes DIR N PASSES`: N files in DIR (made by the first run), 4 KiB written at the start
//!   of each and closed, PASSES times over (the write storm: every write dirties an inode; the files are not created each
//!   time, as ext4's search for a free inode after many deletions costs up to 20× the rest).
//! - `signals N`: N × kill(getpid(), SIGUSR1) with SIGUSR1 ignored: each is a kill(2) and a
//!   generated signal, what the monitor's tamper hooks (sys_enter_kill, signal_generate) see.
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

fn usage() -> ! {
    eprintln!(
        "usage: bench-helper timed OUT CMD [ARG…] | markers N INTERVAL_MS | opens DIR FILES PROCS | open-each DIR FILES | udp N | tcp N | signals N | writes DIR N PASSES"
    );
    std::process::exit(2)
}

fn num(s: Option<&String>) -> u64 {
    s.and_then(|s| s.replace('_', "").parse().ok())
        .unwrap_or_else(|| usage())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("timed") if args.len() >= 3 => timed(Path::new(&args[1]), &args[2..]),
        Some("markers") => markers(num(args.get(1)), num(args.get(2))),
        Some("opens") => opens(
            Path::new(args.get(1).unwrap_or_else(|| usage())),
            num(args.get(2)),
            num(args.get(3)),
        ),
        Some("udp") => udp(num(args.get(1))),
        Some("tcp") => tcp(num(args.get(1))),
        Some("signals") => signals(num(args.get(1))),
        Some("writes") => writes(
            Path::new(args.get(1).unwrap_or_else(|| usage())),
            num(args.get(2)),
            num(args.get(3)),
        ),
        Some("open-each") => open_each(
            Path::new(args.get(1).unwrap_or_else(|| usage())),
            num(args.get(2)),
        ),
        _ => usage(),
    }
}

fn usage_of(who: libc::c_int) -> libc::rusage {
    // SAFETY: rusage is plain data; getrusage fills it.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(who, &mut ru);
        ru
    }
}

fn micros(tv: libc::timeval) -> i64 {
    tv.tv_sec * 1_000_000 + tv.tv_usec
}

fn timed(out: &Path, cmd: &[String]) {
    let wall = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let start = Instant::now();
    let status = Command::new(&cmd[0]).args(&cmd[1..]).status();
    let elapsed = start.elapsed();
    let (me, kids) = (usage_of(libc::RUSAGE_SELF), usage_of(libc::RUSAGE_CHILDREN));
    let code = match &status {
        Ok(s) => s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0)),
        Err(e) => {
            eprintln!("bench-helper: cannot start {}: {e}", cmd[0]);
            127
        }
    };
    let record = serde_json::json!({
        "elapsed_ns": elapsed.as_nanos() as u64,
        "start_unix_ns": wall.as_nanos() as u64,
        "status": code,
        // This process and every child it waited for (the whole workload tree).
        "utime_us": micros(me.ru_utime) + micros(kids.ru_utime),
        "stime_us": micros(me.ru_stime) + micros(kids.ru_stime),
        "maxrss_kb": me.ru_maxrss.max(kids.ru_maxrss),
        // The children alone: this process's own peak includes what it inherited at fork
        // (a monitor's whole image when the monitor started it).
        "kids_maxrss_kb": kids.ru_maxrss,
    });
    if let Err(e) = std::fs::write(out, record.to_string()) {
        eprintln!("bench-helper: {}: {e}", out.display());
        std::process::exit(1);
    }
    std::process::exit(code);
}

fn markers(n: u64, interval_ms: u64) {
    let start = Instant::now();
    for i in 0..n {
        let due = start + Duration::from_millis(i * interval_ms);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let _ = Command::new("/bin/true")
            .arg(format!("marker-{i}"))
            .stdout(Stdio::null())
            .status();
    }
}

fn file(dir: &Path, i: u64) -> PathBuf {
    dir.join(format!("f{i:06}"))
}

fn opens(dir: &Path, files: u64, procs: u64) {
    std::fs::create_dir_all(dir).expect("creating the directory");
    for i in 0..files {
        let path = file(dir, i);
        if !path.exists() {
            std::fs::write(&path, b"x").expect("creating a file");
        }
    }
    let me = std::env::current_exe().expect("own path");
    for _ in 0..procs {
        let ok = Command::new(&me)
            .arg("open-each")
            .arg(dir)
            .arg(files.to_string())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("bench-helper: open-each failed");
            std::process::exit(1);
        }
    }
}

fn writes(dir: &Path, files: u64, passes: u64) {
    use std::io::Write as _;
    std::fs::create_dir_all(dir).expect("creating the directory");
    let block = [0x57u8; 4096];
    for i in (0..passes).flat_map(|_| 0..files) {
        let path = file(dir, i);
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .and_then(|mut f| f.write_all(&block));
        if let Err(e) = written {
            eprintln!("bench-helper: {}: {e}", path.display());
            std::process::exit(1);
        }
    }
}

fn open_each(dir: &Path, files: u64) {
    for i in 0..files {
        let c = CString::new(file(dir, i).as_os_str().as_bytes()).expect("no NUL");
        // SAFETY: c is a valid path string; the fd is closed right away.
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            eprintln!(
                "bench-helper: {}: {}",
                c.to_string_lossy(),
                std::io::Error::last_os_error()
            );
            std::process::exit(1);
        }
        // SAFETY: fd was just opened by us.
        unsafe { libc::close(fd) };
    }
}

/// N datagrams of 64 bytes to a loopback UDP socket of its own (nobody reads them: the
/// socket's buffer drops what does not fit, as it would for an exfiltration target).
fn udp(n: u64) {
    let rx = std::net::UdpSocket::bind("127.0.0.1:0").expect("binding a UDP socket");
    let to = rx.local_addr().expect("its address");
    let tx = std::net::UdpSocket::bind("127.0.0.1:0").expect("binding a UDP socket");
    let buf = [0x55u8; 64];
    for _ in 0..n {
        let _ = tx.send_to(&buf, to);
    }
}

/// N signals to itself, ignored (the kernel still generates each: `signal:signal_generate`
/// fires with result "ignored").
fn signals(n: u64) {
    // SAFETY: SIG_IGN for SIGUSR1, then kill of this process: no handler runs.
    unsafe {
        libc::signal(libc::SIGUSR1, libc::SIG_IGN);
        let me = libc::getpid();
        for _ in 0..n {
            libc::kill(me, libc::SIGUSR1);
        }
    }
}

/// N connections to a loopback listener of its own: connect, accept, close both.
fn tcp(n: u64) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("binding a listener");
    let to = l.local_addr().expect("its address");
    for _ in 0..n {
        let c = std::net::TcpStream::connect(to).expect("connecting to the listener");
        let (a, _) = l.accept().expect("accepting");
        drop((c, a));
    }
}
