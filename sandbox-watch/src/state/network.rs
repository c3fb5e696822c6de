//! Where the traced processes connected, what they left listening and which names they looked
//! up: network events turned into report entries, each with the verdict of its socket's own
//! namespace.
use std::collections::HashMap;

use procfs::net::{TcpNetEntry, TcpState, UdpNetEntry, UdpState};
use serde::{Deserialize, Serialize};

use crate::kernel::decode::{Net, NetOp};
use crate::state::processes::Verdict;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NetEntry {
    pub pid: u32,
    /// connect, listen or dns.
    pub op: String,
    /// tcp, udp, unix (or the socket type's name for others).
    pub proto: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub addr: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub port: Option<u16>,
    /// A unix-domain socket's path.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub path: Option<String>,
    /// dns: the name asked for.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub name: Option<String>,
    /// dns: the record type asked for.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub qtype: Option<String>,
    /// dns: why the datagram could not be read as a query.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub malformed: Option<String>,
    /// ok, refused, in_progress (no outcome seen), sent (dns: the query was handed to send*;
    /// neither the call's result nor the answer is watched), or
    /// the error's name (ENETUNREACH, ETIMEDOUT, …).
    pub result: String,
    pub netns: Option<u64>,
    pub verdict: Verdict,
    pub count: u64,
    pub first_at: String,
    pub last_at: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub listening_at_end: Option<bool>,
}

/// Where an entry went, for people: `127.0.0.1:8000`, `[::1]:443`, `example.com (dns via 127.0.0.53)`, a unix path.
pub fn destination(n: &NetEntry) -> String {
    if let Some(path) = &n.path {
        return path.clone();
    }
    let addr = match (&n.addr, n.port) {
        (Some(a), Some(p)) if a.contains(':') => format!("[{a}]:{p}"),
        (Some(a), Some(p)) => format!("{a}:{p}"),
        (Some(a), None) => a.clone(),
        _ => "?".into(),
    };
    match &n.name {
        Some(name) => format!("{name} (dns via {addr})"),
        None => addr,
    }
}

/// The result word for a syscall result.
pub fn result_name(result: i32) -> String {
    match -result {
        0 => "ok".into(),
        111 => "refused".into(),
        115 => "in_progress".into(),
        errno => {
            let e = nix::errno::Errno::from_raw(errno);
            match e {
                nix::errno::Errno::UnknownErrno => format!("errno {errno}"),
                e => format!("{e:?}"),
            }
        }
    }
}

fn proto_name(n: &Net) -> String {
    match (n.family, n.protocol, n.sock_type) {
        (1, _, _) => "unix".into(),
        (_, 6, _) => "tcp".into(),
        (_, 17, _) => "udp".into(),
        (_, _, 1) => "tcp".into(),
        (_, _, 2) => "udp".into(),
        (_, p, _) => format!("proto {p}"),
    }
}

#[derive(Default)]
pub struct Network {
    pub entries: Vec<NetEntry>,
    /// Identical connects and DNS questions are one entry with a count (see `same_key`).
    same: HashMap<String, usize>,
    /// Connects in progress, by kernel socket.
    pending: HashMap<u64, usize>,
    /// Outcomes that came before their connect's own record (loopback finishes inside the
    /// call), by kernel socket.
    early: HashMap<u64, i32>,
}

/// Entries with the same key are one entry with a count: same process, operation,
/// destination, name, result and namespace.
pub fn same_key(e: &NetEntry) -> String {
    format!(
        "{}|{}|{}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{}|{:?}",
        e.pid,
        e.op,
        e.proto,
        e.addr,
        e.path,
        e.port,
        e.name,
        e.qtype,
        e.malformed,
        e.result,
        e.netns
    )
}

impl Network {
    /// Applies one network event (`at`: its time, RFC 3339; `agent_netns`: what verdicts
    /// compare with); returns the entry it made or changed.
    pub fn apply(&mut self, n: &Net, at: &str, agent_netns: Option<u64>) -> Option<usize> {
        let netns = (n.netns != 0).then_some(n.netns as u64);
        if n.op == NetOp::ConnectResult {
            let Some(index) = self.pending.remove(&n.sock) else {
                self.early.insert(n.sock, n.result);
                return None;
            };
            let e = &mut self.entries[index];
            e.result = result_name(n.result);
            e.last_at = at.to_string();
            return Some(index);
        }
        let (op, mut result) = match n.op {
            NetOp::Connect => ("connect", result_name(n.result)),
            NetOp::Listen | NetOp::Bind => ("listen", "ok".to_string()),
            NetOp::Dns => ("dns", "sent".to_string()),
            NetOp::ConnectResult => unreachable!(),
        };
        let (mut name, mut qtype, mut malformed) = (None, None, None);
        if n.op == NetOp::Dns {
            match crate::judge::dns::parse_query(&n.payload) {
                crate::judge::dns::Query::Name {
                    name: q, qtype: t, ..
                } => {
                    name = Some(q);
                    qtype = Some(t);
                }
                crate::judge::dns::Query::Malformed { reason, partial } => {
                    name = Some(partial);
                    malformed = Some(reason);
                    result = "malformed".into();
                }
            }
        }
        let entry = NetEntry {
            pid: n.header.tgid,
            op: op.into(),
            proto: proto_name(n),
            addr: n.addr.map(|a| a.to_string()),
            port: (n.family == 2 || n.family == 10).then_some(n.port),
            path: n.unix_path.clone(),
            name,
            qtype,
            malformed,
            result,
            netns,
            verdict: Verdict::of(netns, agent_netns),
            count: 1,
            first_at: at.to_string(),
            last_at: at.to_string(),
            listening_at_end: (op == "listen").then_some(false),
        };
        let in_progress = n.op == NetOp::Connect && n.result == -115;
        if !in_progress && op != "listen" {
            let key = same_key(&entry);
            if let Some(&index) = self.same.get(&key) {
                let e = &mut self.entries[index];
                e.count += 1;
                e.last_at = at.to_string();
                return Some(index);
            }
            self.same.insert(key, self.entries.len());
        }
        self.entries.push(entry);
        let index = self.entries.len() - 1;
        let early = self.early.remove(&n.sock);
        if in_progress {
            match early {
                Some(result) => self.entries[index].result = result_name(result),
                None => {
                    self.pending.insert(n.sock, index);
                }
            }
        }
        Some(index)
    }

    /// Marks listeners whose process still has the port open (read from that process's own
    /// /proc/PID/net, which shows its namespace).
    pub fn mark_listening_at_end(&mut self, running: impl Fn(u32) -> bool) {
        for e in &mut self.entries {
            if e.op != "listen" {
                continue;
            }
            let (Some(port), true) = (e.port, running(e.pid)) else {
                continue;
            };
            let Ok(p) = procfs::process::Process::new(e.pid as i32) else {
                e.listening_at_end = Some(false);
                continue;
            };
            e.listening_at_end = Some(if e.proto == "udp" {
                [p.udp(), p.udp6()]
                    .iter()
                    .flatten()
                    .any(|t| udp_bound(t, port))
            } else {
                [p.tcp(), p.tcp6()]
                    .iter()
                    .flatten()
                    .any(|t| tcp_listening(t, port))
            });
        }
    }

    /// Recomputes verdicts once the agent's namespace is known (run mode finds it late).
    pub fn reverdict(&mut self, agent_netns: Option<u64>) {
        for e in &mut self.entries {
            e.verdict = Verdict::of(e.netns, agent_netns);
        }
    }
}

/// Whether a TCP table (`/proc/PID/net/tcp[6]`) has a listener on local `port`.
fn tcp_listening(table: &[TcpNetEntry], port: u16) -> bool {
    table
        .iter()
        .any(|s| s.local_address.port() == port && s.state == TcpState::Listen)
}

/// Whether a UDP table (`/proc/PID/net/udp[6]`) has a socket bound to local `port` (a bound,
/// unconnected UDP socket is in state CLOSE).
fn udp_bound(table: &[UdpNetEntry], port: u16) -> bool {
    table
        .iter()
        .any(|s| s.local_address.port() == port && s.state == UdpState::Close)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::decode::Header;
    use procfs::net::{TcpNetEntries, UdpNetEntries};

    fn net(op: NetOp, port: u16, result: i32, sock: u64) -> Net {
        Net {
            header: Header {
                tgid: 5,
                pid: 5,
                ktime_ns: 1,
                start_ns: 1,
            },
            op,
            family: 2,
            sock_type: 1,
            protocol: 6,
            addr: Some("127.0.0.1".parse().unwrap()),
            port,
            netns: 7,
            result,
            sock,
            unix_path: None,
            payload: Vec::new(),
        }
    }

    #[test]
    fn identical_connects_aggregate_and_results_are_named() {
        let mut n = Network::default();
        n.apply(&net(NetOp::Connect, 80, 0, 1), "t1", Some(7));
        n.apply(&net(NetOp::Connect, 80, 0, 2), "t2", Some(7));
        n.apply(&net(NetOp::Connect, 81, -111, 3), "t3", Some(7));
        n.apply(&net(NetOp::Connect, 82, -101, 4), "t4", Some(8));
        assert_eq!(n.entries.len(), 3);
        assert_eq!(
            (
                n.entries[0].count,
                n.entries[0].first_at.as_str(),
                n.entries[0].last_at.as_str()
            ),
            (2, "t1", "t2")
        );
        assert_eq!(n.entries[1].result, "refused");
        assert_eq!(n.entries[2].result, "ENETUNREACH");
        assert_eq!(n.entries[2].verdict, Verdict::Outside);
    }

    #[test]
    fn an_in_progress_connect_gets_its_outcome() {
        let mut n = Network::default();
        n.apply(&net(NetOp::Connect, 80, -115, 9), "t1", Some(7));
        assert_eq!(n.entries[0].result, "in_progress");
        n.apply(&net(NetOp::ConnectResult, 80, -111, 9), "t2", Some(7));
        assert_eq!(n.entries[0].result, "refused");
        // A result for a socket nobody waits for is ignored.
        assert!(
            n.apply(&net(NetOp::ConnectResult, 80, 0, 10), "t3", Some(7))
                .is_none()
        );
    }

    fn query(name: &str, qtype: u16) -> Vec<u8> {
        let mut q = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        for label in name.split('.') {
            q.push(label.len() as u8);
            q.extend_from_slice(label.as_bytes());
        }
        q.push(0);
        q.extend_from_slice(&qtype.to_be_bytes());
        q.extend_from_slice(&1u16.to_be_bytes());
        q
    }

    #[test]
    fn dns_queries_aggregate_by_name_and_type() {
        let mut n = Network::default();
        for (i, (name, qtype)) in [
            ("example.com", 1),
            ("example.com", 28),
            ("example.com", 1),
            ("other.test", 16),
        ]
        .into_iter()
        .enumerate()
        {
            let mut e = net(NetOp::Dns, 53, 0, i as u64);
            (e.sock_type, e.protocol) = (2, 17);
            e.payload = query(name, qtype);
            n.apply(&e, "t", Some(7));
        }
        let got: Vec<(Option<&str>, Option<&str>, u64)> = n
            .entries
            .iter()
            .map(|e| (e.name.as_deref(), e.qtype.as_deref(), e.count))
            .collect();
        assert_eq!(
            got,
            [
                (Some("example.com"), Some("A"), 2),
                (Some("example.com"), Some("AAAA"), 1),
                (Some("other.test"), Some("TXT"), 1),
            ]
        );
    }

    #[test]
    fn proc_net_tables() {
        use procfs::FromBufReadSI as _;
        let info = procfs::ExplicitSystemInfo {
            boot_time_secs: 0,
            ticks_per_second: 100,
            page_size: 4096,
            is_little_endian: true,
        };
        let head = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n";
        let line = |st: &str| {
            format!(
                "{head}   0: 0100007F:1F90 00000000:0000 {st} 00000000:00000000 00:00000000 00000000  1000        0 12345 1 0000000000000000 100 0 0 10 0\n"
            )
        };
        let tcp = |st| {
            TcpNetEntries::from_buf_read(line(st).as_bytes(), &info)
                .unwrap()
                .0
        };
        let udp = |st| {
            UdpNetEntries::from_buf_read(line(st).as_bytes(), &info)
                .unwrap()
                .0
        };
        assert!(tcp_listening(&tcp("0A"), 8080));
        assert!(!tcp_listening(&tcp("0A"), 8081));
        assert!(!tcp_listening(&tcp("07"), 8080));
        assert!(udp_bound(&udp("07"), 8080));
        assert!(!udp_bound(&udp("01"), 8080));
    }
}
