//! The 32-bit door, shut for `run`: a 64-bit process may still enter the kernel the i386 way
//! (`int 0x80`, or a 32-bit program) or with an x32 syscall number, and the syscall
//! tracepoints every hook is built on do not fire for those (the kernel ignores compat
//! syscalls there). Before the agent's exec, the child installs this seccomp filter, which
//! every descendant inherits and none can remove: a system call of any other architecture
//! than the native one, or with the x32 bit, kills the process with SIGSYS before it runs
//! (SECCOMP_RET_KILL_PROCESS: not a signal it could catch). The capture names such a death
//! as a `tamper` finding (`op` compat).
//!
//! The filter is installed while the child still has the monitor's privileges, so no
//! no_new_privs is set (the agent's setuid programs, sudo among them, work as before).

/// `struct seccomp_data`: `nr` at 0, `arch` at 4.
const NR: u32 = 0;
const ARCH: u32 = 4;
/// AUDIT_ARCH_X86_64 (EM_X86_64 | 64-bit | little-endian).
#[cfg(target_arch = "x86_64")]
const NATIVE: u32 = 0xC000_003E;
/// AUDIT_ARCH_AARCH64.
#[cfg(target_arch = "aarch64")]
const NATIVE: u32 = 0xC000_00B7;
/// x32 system calls are x86_64's with this bit set.
const X32_BIT: u32 = 0x4000_0000;

const fn stmt(code: u32, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

const fn jump(code: u32, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    }
}

/// The classic-BPF program: native arch and no x32 bit, or the process dies.
pub const FILTER: [libc::sock_filter; 7] = [
    stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, ARCH),
    jump(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, NATIVE, 0, 4),
    stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, NR),
    // -1 is no system call (a tracer skipped it): let the kernel answer ENOSYS as usual.
    jump(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, u32::MAX, 1, 0),
    jump(libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K, X32_BIT, 1, 0),
    stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW),
    stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_KILL_PROCESS),
];

/// Installs [`FILTER`] on the calling thread (the forked child, before exec). Only
/// async-signal-safe calls; returns the errno on failure (EACCES without CAP_SYS_ADMIN).
///
/// # Safety
/// Called in the child between fork and exec: touches no allocator, no lock.
pub unsafe fn install(prog: &libc::sock_fprog) -> Result<(), i32> {
    // SAFETY: seccomp(SECCOMP_SET_MODE_FILTER, 0, prog) reads the program `prog` points at,
    // which lives in memory prepared before the fork.
    let r = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0,
            prog as *const libc::sock_fprog,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        // SAFETY: errno of this thread.
        Err(unsafe { *libc::__errno_location() })
    }
}

/// The summary of a traced process's death by SIGSYS under the guard.
pub fn summary(pid: u32) -> String {
    format!(
        "pid {pid} was killed by SIGSYS: it made a 32-bit (int 0x80, i386) or x32 system \
         call, which no syscall tracepoint sees and the monitor's guard refuses (or a seccomp \
         filter of its own killed it)"
    )
}

/// `run --protect`: the capabilities an agent needs to attack its monitor (load BPF or read
/// its maps, open perf events, ptrace it, load a kernel module, and the rest CAP_SYS_ADMIN
/// allows), taken out of the agent's bounding set before its exec: after it no process of the
/// tree can gain them, not as root, not through a setuid or file-capability program.
pub const PROTECT: [(i32, &str); 5] = [
    (39, "CAP_BPF"),
    (38, "CAP_PERFMON"),
    (19, "CAP_SYS_PTRACE"),
    (21, "CAP_SYS_ADMIN"),
    (16, "CAP_SYS_MODULE"),
];

/// Root's exec gives back the inheritable set too: refuses `--protect` when the monitor's
/// holds one of [`PROTECT`] (it normally holds none).
pub fn check_inheritable() -> Result<(), crate::error::Usage> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let inh = status
        .lines()
        .find_map(|l| l.strip_prefix("CapInh:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    let held: Vec<&str> = PROTECT
        .iter()
        .filter(|(cap, _)| inh & (1u64 << cap) != 0)
        .map(|(_, name)| *name)
        .collect();
    if held.is_empty() {
        Ok(())
    } else {
        Err(crate::error::Usage(format!(
            "--protect: sandbox-watch's inheritable capabilities hold {}, which the agent \
             would get back at exec; start it without them (e.g. not under capsh --inh)",
            held.join(", ")
        )))
    }
}

/// Drops [`PROTECT`] from the bounding set and clears the ambient set, in the child before
/// exec. Only async-signal-safe calls; returns the errno on failure.
///
/// # Safety
/// Called in the child between fork and exec.
pub unsafe fn protect() -> Result<(), i32> {
    for (cap, _) in PROTECT {
        // SAFETY: prctl with integer arguments.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) } != 0 {
            // SAFETY: errno of this thread.
            return Err(unsafe { *libc::__errno_location() });
        }
    }
    // SAFETY: as above. EINVAL on a kernel without ambient capabilities: nothing to clear.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    Ok(())
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    /// Forks a child that installs the guard (with no_new_privs, so that the test needs no
    /// root), then runs `call`; returns how the child ended.
    fn under_guard(call: fn()) -> nix::sys::wait::WaitStatus {
        let prog = libc::sock_fprog {
            len: FILTER.len() as u16,
            filter: FILTER.as_ptr().cast_mut(),
        };
        // SAFETY: the child makes only system calls before _exit.
        match unsafe { nix::unistd::fork() }.unwrap() {
            nix::unistd::ForkResult::Child => unsafe {
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                    || install(&prog).is_err()
                {
                    libc::_exit(2);
                }
                call();
                libc::_exit(0);
            },
            nix::unistd::ForkResult::Parent { child } => {
                nix::sys::wait::waitpid(child, None).unwrap()
            }
        }
    }

    #[test]
    fn a_32_bit_or_x32_call_is_killed_and_a_64_bit_one_runs() {
        use nix::sys::signal::Signal;
        use nix::sys::wait::WaitStatus;
        let native = under_guard(|| {
            // SAFETY: getpid has no arguments.
            unsafe { libc::syscall(libc::SYS_getpid) };
        });
        assert!(matches!(native, WaitStatus::Exited(_, 0)), "{native:?}");
        let i386 = under_guard(|| {
            // SAFETY: i386 getpid (20) through int 0x80: no arguments, no memory.
            unsafe {
                core::arch::asm!("int 0x80", inlateout("eax") 20 => _);
            }
        });
        assert!(
            matches!(i386, WaitStatus::Signaled(_, Signal::SIGSYS, _)),
            "{i386:?}"
        );
        let x32 = under_guard(|| {
            // SAFETY: x32 getpid: no arguments.
            unsafe { libc::syscall(X32_BIT as libc::c_long | libc::SYS_getpid) };
        });
        assert!(
            matches!(x32, WaitStatus::Signaled(_, Signal::SIGSYS, _)),
            "{x32:?}"
        );
    }
}
