//! The benchmark's open storm: opens and closes one file N times (default 200,000) and prints
//! the elapsed time. `open-storm [N] [PATH]`; without PATH a scratch file is made (and removed)
//! in the temporary directory, outside the timed part.
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt as _;
use std::path::PathBuf;
use std::time::Instant;

fn main() {
    let mut args = std::env::args_os().skip(1);
    let n: u64 = match args.next() {
        Some(s) => s
            .to_str()
            .and_then(|s| s.replace('_', "").parse().ok())
            .unwrap_or_else(|| {
                eprintln!("usage: open-storm [N] [PATH]");
                std::process::exit(2)
            }),
        None => 200_000,
    };
    let (path, scratch) = match args.next() {
        Some(p) => (PathBuf::from(p), false),
        None => {
            let p = std::env::temp_dir().join(format!("open-storm-{}", std::process::id()));
            std::fs::write(&p, b"open storm\n").expect("creating the scratch file");
            (p, true)
        }
    };
    let c_path = CString::new(path.as_os_str().as_bytes()).expect("a path without NUL");
    let start = Instant::now();
    for _ in 0..n {
        // SAFETY: c_path is a valid NUL-terminated string; the fd is closed right away.
        let fd = unsafe { libc::open(c_path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            eprintln!("{}: {}", path.display(), std::io::Error::last_os_error());
            std::process::exit(1);
        }
        // SAFETY: fd was just opened by us.
        unsafe { libc::close(fd) };
    }
    let elapsed = start.elapsed();
    if scratch {
        let _ = std::fs::remove_file(&path);
    }
    println!(
        "open-storm: {n} open/close of {} in {:.1} ms ({:.0} ns each)",
        path.display(),
        elapsed.as_secs_f64() * 1e3,
        elapsed.as_nanos() as f64 / n.max(1) as f64
    );
}
