//! What an act on the monitor means, in words: the kernel's tamper records (bpf(2), ptrace,
//! process_vm_*, pidfd, signals, opens of the monitor's files) become `tamper` records with
//! the line a person reads, or nothing when the act is harmless (reading the monitor's
//! `/proc/PID/stat` is what `ps` does).
use std::collections::HashMap;

use sandbox_watch_common::{EventKind, tamper as call};

use crate::kernel::decode;
use crate::record::Tamper;

/// The monitor's own BPF objects, by (kind, id), with the names of its maps.
#[derive(Clone, Debug, Default)]
pub struct Own {
    pub objects: HashMap<(u64, u32), String>,
    /// The monitor's thread group id.
    pub pid: u32,
}

impl Own {
    fn object(&self, kind: u64, id: u64) -> String {
        let what = match kind {
            call::OBJ_MAP => "map",
            call::OBJ_PROG => "program",
            call::OBJ_LINK => "link",
            _ => "object",
        };
        match self.objects.get(&(kind, id as u32)) {
            Some(name) if !name.is_empty() => format!("{what} {name} (id {id})"),
            _ => format!("{what} id {id}"),
        }
    }
}

/// bpf(2) commands by number (include/uapi/linux/bpf.h, `enum bpf_cmd`).
const BPF_CMDS: &[&str] = &[
    "BPF_MAP_CREATE",
    "BPF_MAP_LOOKUP_ELEM",
    "BPF_MAP_UPDATE_ELEM",
    "BPF_MAP_DELETE_ELEM",
    "BPF_MAP_GET_NEXT_KEY",
    "BPF_PROG_LOAD",
    "BPF_OBJ_PIN",
    "BPF_OBJ_GET",
    "BPF_PROG_ATTACH",
    "BPF_PROG_DETACH",
    "BPF_PROG_TEST_RUN",
    "BPF_PROG_GET_NEXT_ID",
    "BPF_MAP_GET_NEXT_ID",
    "BPF_PROG_GET_FD_BY_ID",
    "BPF_MAP_GET_FD_BY_ID",
    "BPF_OBJ_GET_INFO_BY_FD",
    "BPF_PROG_QUERY",
    "BPF_RAW_TRACEPOINT_OPEN",
    "BPF_BTF_LOAD",
    "BPF_BTF_GET_FD_BY_ID",
    "BPF_TASK_FD_QUERY",
    "BPF_MAP_LOOKUP_AND_DELETE_ELEM",
    "BPF_MAP_FREEZE",
    "BPF_BTF_GET_NEXT_ID",
    "BPF_MAP_LOOKUP_BATCH",
    "BPF_MAP_LOOKUP_AND_DELETE_BATCH",
    "BPF_MAP_UPDATE_BATCH",
    "BPF_MAP_DELETE_BATCH",
    "BPF_LINK_CREATE",
    "BPF_LINK_UPDATE",
    "BPF_LINK_GET_FD_BY_ID",
    "BPF_LINK_GET_NEXT_ID",
    "BPF_ENABLE_STATS",
    "BPF_ITER_CREATE",
    "BPF_LINK_DETACH",
    "BPF_PROG_BIND_MAP",
    "BPF_TOKEN_CREATE",
];

pub fn bpf_cmd(cmd: u64) -> String {
    BPF_CMDS
        .get(cmd as usize)
        .map_or_else(|| format!("bpf command {cmd}"), |s| s.to_string())
}

/// ptrace requests by number (include/uapi/linux/ptrace.h), the ones worth a name.
fn ptrace_request(r: u64) -> String {
    let name = match r {
        0 => "PTRACE_TRACEME",
        1 => "PTRACE_PEEKTEXT",
        2 => "PTRACE_PEEKDATA",
        4 => "PTRACE_POKETEXT",
        5 => "PTRACE_POKEDATA",
        7 => "PTRACE_CONT",
        8 => "PTRACE_KILL",
        12 => "PTRACE_GETREGS",
        13 => "PTRACE_SETREGS",
        16 => "PTRACE_ATTACH",
        17 => "PTRACE_DETACH",
        0x4206 => "PTRACE_SEIZE",
        0x4207 => "PTRACE_INTERRUPT",
        0x4204 => "PTRACE_GETREGSET",
        0x4205 => "PTRACE_SETREGSET",
        _ => return format!("ptrace request {r:#x}"),
    };
    name.to_string()
}

pub fn signal_name(sig: u64) -> String {
    if sig == 0 {
        return "signal 0 (is it alive?)".into();
    }
    i32::try_from(sig)
        .ok()
        .and_then(|s| nix::sys::signal::Signal::try_from(s).ok())
        .map_or_else(|| format!("signal {sig}"), |s| s.as_str().to_string())
}

/// /proc/PID entries that show nothing of the monitor's memory, descriptors or environment:
/// what ps, top and pgrep read.
const HARMLESS_PROC: &[&str] = &[
    "stat",
    "status",
    "cmdline",
    "comm",
    "statm",
    "cgroup",
    "limits",
    "oom_score",
    "oom_adj",
    "oom_score_adj",
    "loginuid",
    "sessionid",
    "wchan",
    "sched",
    "schedstat",
    "io",
    "task",
];

/// The first component of a /proc path after the pid (and after `task/TID`): what of the
/// process the open is about ("mem", "fd", "environ", …). None for the pid directory itself.
fn proc_entry(path: &str, pid: u64) -> Option<String> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let at = parts.iter().position(|p| *p == pid.to_string())?;
    let mut rest = &parts[at + 1..];
    if rest.first() == Some(&"task") && rest.len() >= 2 {
        rest = &rest[2..];
    }
    rest.first().map(|s| s.to_string())
}

/// The tamper record a kernel record makes (None: harmless).
pub fn judge(own: &Own, t: &decode::Tamper) -> Option<Tamper> {
    let pid = t.header.tgid;
    let mut out = Tamper {
        pid: Some(pid),
        op: String::new(),
        monitor: t.monitor,
        what: None,
        target: None,
        path: None,
        summary: String::new(),
    };
    match t.kind {
        EventKind::Bpf | EventKind::BpfFd => {
            let cmd = bpf_cmd(t.code);
            out.op = "bpf".into();
            let object = (t.detail != 0).then(|| own.object(t.detail, t.target));
            out.target = (t.detail != 0).then_some(t.target);
            out.summary = match (t.kind, t.monitor, &object) {
                (EventKind::BpfFd, _, Some(o)) => {
                    format!("pid {pid} took a descriptor of the monitor's {o} ({cmd})")
                }
                (_, true, Some(o)) => format!("pid {pid} called bpf({cmd}) on the monitor's {o}"),
                (_, false, Some(o)) => format!("pid {pid} called bpf({cmd}) on {o}"),
                (_, _, None) => format!("pid {pid} called bpf({cmd})"),
            };
            out.what = Some(if t.kind == EventKind::BpfFd {
                format!("{cmd} descriptor")
            } else {
                cmd
            });
        }
        EventKind::TraceAccess => {
            let (op, what) = match t.call {
                call::PTRACE => ("ptrace", ptrace_request(t.code)),
                call::PROCESS_VM_WRITEV => ("process_vm_writev", "write memory".into()),
                _ => ("process_vm_readv", "read memory".into()),
            };
            out.op = op.into();
            out.target = Some(t.target);
            out.summary = if op == "ptrace" {
                format!(
                    "pid {pid} called ptrace({what}) on the monitor (thread {})",
                    t.target
                )
            } else {
                format!(
                    "pid {pid} called {op} on the monitor (thread {}): {what} of the monitor",
                    t.target
                )
            };
            out.what = Some(what);
        }
        EventKind::Pidfd => {
            out.target = Some(t.target);
            if t.call == call::PIDFD_GETFD {
                out.op = "pidfd_getfd".into();
                out.what = Some(format!("fd {}", t.detail));
                out.summary = format!(
                    "pid {pid} took descriptor {} from the monitor (pidfd_getfd)",
                    t.detail
                );
            } else {
                out.op = "pidfd_open".into();
                out.summary = format!("pid {pid} opened a pidfd of the monitor (pidfd_open)");
            }
        }
        EventKind::Signal => {
            let sig = signal_name(t.code);
            out.op = "signal".into();
            out.target = Some(t.target);
            out.summary = format!("pid {pid} sent {sig} to the monitor");
            out.what = Some(sig);
        }
        EventKind::MonitorFile => {
            let path = t.path.clone().unwrap_or_default();
            out.op = "open".into();
            let writing = t.code & u64::from(sandbox_watch_common::abi::FMODE_WRITE) != 0;
            if t.detail == call::FILE_PROC {
                let entry = proc_entry(&path, t.target);
                if entry
                    .as_deref()
                    .is_none_or(|e| HARMLESS_PROC.contains(&e) && !writing)
                {
                    return None;
                }
                out.target = Some(t.target);
                out.what = entry.clone();
                out.summary = format!(
                    "pid {pid} opened the monitor's {path} ({} the monitor's {})",
                    if writing { "writing" } else { "reading" },
                    entry.unwrap_or_default()
                );
            } else {
                out.what = Some(if writing { "write" } else { "read" }.into());
                out.summary = format!(
                    "pid {pid} opened the monitor's own file {path} for {}",
                    if writing { "writing" } else { "reading" }
                );
            }
            out.path = Some(path);
        }
        EventKind::Module => {
            let (op, how) = if t.call == call::FINIT_MODULE {
                ("finit_module", format!("from fd {}", t.detail))
            } else {
                (
                    "init_module",
                    format!("from a {}-byte image in memory", t.target),
                )
            };
            out.op = op.into();
            out.what = Some("kernel module load".into());
            out.summary = format!(
                "pid {pid} called {op}: loading a kernel module {how}, which could hide \
                 anything from the monitor once it runs"
            );
        }
        _ => return None,
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_entries_are_named_after_the_pid() {
        assert_eq!(proc_entry("/proc/77/mem", 77).as_deref(), Some("mem"));
        assert_eq!(
            proc_entry("/proc/77/task/78/maps", 77).as_deref(),
            Some("maps")
        );
        assert_eq!(
            proc_entry("/tmp/p/77/fdinfo/4", 77).as_deref(),
            Some("fdinfo")
        );
        assert_eq!(proc_entry("/proc/77", 77), None);
    }

    #[test]
    fn a_module_load_is_tamper_whatever_the_module() {
        let t = decode::Tamper {
            header: decode::Header {
                tgid: 42,
                pid: 42,
                ktime_ns: 0,
                start_ns: 0,
                seq: 0,
            },
            kind: EventKind::Module,
            call: call::FINIT_MODULE,
            monitor: false,
            code: 0,
            target: 0,
            detail: 3,
            attr: [0; 2],
            dev: 0,
            ino: 0,
            magic: 0,
            result: 0,
            path: None,
            path_truncated: false,
        };
        let r = judge(&Own::default(), &t).expect("a tamper record");
        assert_eq!(r.op, "finit_module");
        assert!(
            r.summary
                .starts_with("pid 42 called finit_module: loading a kernel module from fd 3"),
            "{}",
            r.summary
        );
    }

    #[test]
    fn names() {
        assert_eq!(bpf_cmd(3), "BPF_MAP_DELETE_ELEM");
        assert_eq!(bpf_cmd(999), "bpf command 999");
        assert_eq!(signal_name(19), "SIGSTOP");
        assert_eq!(ptrace_request(16), "PTRACE_ATTACH");
    }
}
