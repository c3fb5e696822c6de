//! Where the traced processes connected, what they left listening and which names they looked
//! up: `net` records made into the report's entries, each with the verdict of its socket's own
//! namespace. Identical connects and DNS questions are one entry with a count.
use std::collections::HashMap;

use procfs::net::{TcpNetEntry, TcpState, UdpNetEntry, UdpState};
use serde::{Deserialize, Serialize};

use crate::record::{FlowCount, IN_PROGRESS, Listening, NetOp, NetResult, NetTamper, Verdict};
use crate::state::tool_calls::ToolCallRef;
use sandbox_watch_common::abi::{
    AF_PACKET, AF_UNIX, AF_VSOCK, IPPROTO_ICMP, IPPROTO_ICMPV6, IPPROTO_TCP, IPPROTO_UDP,
    SOCK_DGRAM, SOCK_STREAM,
};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NetEntry {
    pub pid: u32,
    pub op: NetOp,
    /// tcp, udp, unix (or the socket type's name for others).
    #[serde(default)]
    pub proto: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub addr: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub port: Option<u16>,
    /// vsock: the peer's port as the kernel's socket holds it (32 bits; `port` has it too when
    /// it fits in 16). `addr` is the peer's CID.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub vsock_port: Option<u32>,
    /// AF_PACKET sends: the device the frames left by (its name and index, from the kernel's
    /// `net_device`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub device: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub ifindex: Option<u32>,
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
    #[serde(default)]
    pub result: String,
    #[serde(default)]
    pub netns: Option<u64>,
    #[serde(default)]
    pub verdict: Verdict,
    #[serde(default = "one")]
    pub count: u64,
    #[serde(default)]
    pub first_at: String,
    #[serde(default)]
    pub last_at: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub listening_at_end: Option<bool>,
    /// How the connection was made when it was not connect(2): `io_uring`, `io_uring worker`,
    /// `fastopen sendto`, `fastopen sendmsg`, or another system call's name.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub via: Option<String>,
    /// send: packets and bytes (link header included) the kernel counted for the flow.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub packets: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub bytes: Option<u64>,
    /// In the log, on a connect in progress: the capture's number for its socket, which the
    /// `net_result` with its outcome names too. Not in the report.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub socket: Option<u64>,
    /// The tool call it is under (see `state::tool_calls`): a step's id, or null for the agent
    /// itself; not in the log's records (the session works it out).
    #[serde(default, skip_serializing_if = "ToolCallRef::is_unset")]
    pub tool_call: ToolCallRef,
    /// It happened (or, counted into one entry, happened again) after its step's own process
    /// had ended.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub after_step: bool,
}

fn one() -> u64 {
    1
}

/// Where an entry went, for people: `127.0.0.1:8000`, `[::1]:443`, `example.com (dns via 127.0.0.53)`, a unix path.
pub fn destination(n: &NetEntry) -> String {
    if let Some(path) = &n.path {
        return path.clone();
    }
    let mut addr = match (&n.addr, n.port) {
        (Some(a), _) if n.proto == "vsock" => match n.vsock_port {
            Some(p) => format!("vsock cid {a} port {p}"),
            None => format!("vsock cid {a}"),
        },
        (Some(a), Some(p)) if a.contains(':') => format!("[{a}]:{p}"),
        (Some(a), Some(p)) => format!("{a}:{p}"),
        (Some(a), None) => a.clone(),
        (None, _) if n.device.is_some() => n.proto.clone(),
        _ => "?".into(),
    };
    if let Some(device) = &n.device {
        addr = format!("{addr} on {device}");
    }
    match &n.name {
        Some(name) => format!("{name} (dns via {addr})"),
        None => addr,
    }
}

/// The result word for a syscall result.
pub fn result_name(result: i32) -> String {
    use sandbox_watch_common::abi::{ECONNREFUSED, EINPROGRESS};
    match -result {
        0 => "ok".into(),
        ECONNREFUSED => "refused".into(),
        EINPROGRESS => IN_PROGRESS.into(),
        errno => {
            let e = nix::errno::Errno::from_raw(errno);
            match e {
                nix::errno::Errno::UnknownErrno => format!("errno {errno}"),
                e => format!("{e:?}"),
            }
        }
    }
}

/// The protocol's name for a socket's family, protocol and type.
pub fn proto_name(family: u32, protocol: u32, sock_type: u32) -> String {
    match (family, protocol, sock_type) {
        (f, _, _) if f == AF_UNIX as u32 => "unix".into(),
        (f, _, _) if f == AF_VSOCK as u32 => "vsock".into(),
        (f, _, _) if f == AF_PACKET as u32 => "packet".into(),
        (_, IPPROTO_ICMP, _) => "icmp".into(),
        (_, IPPROTO_ICMPV6, _) => "icmpv6".into(),
        (_, IPPROTO_TCP, _) => "tcp".into(),
        (_, IPPROTO_UDP, _) => "udp".into(),
        (_, _, SOCK_STREAM) => "tcp".into(),
        (_, _, SOCK_DGRAM) => "udp".into(),
        (_, p, _) => format!("proto {p}"),
    }
}

/// Entries with the same key are one entry with a count: same process, operation,
/// destination, name, result and namespace.
pub fn same_key(e: &NetEntry) -> String {
    format!(
        "{:?}|{:?}|{:?}|{}|{}|{}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{}|{:?}",
        e.ifindex,
        e.vsock_port,
        e.via,
        e.pid,
        e.op.as_str(),
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

/// Whether an entry counts with the others of its key: a listen is its own entry, and so is a
/// connect whose outcome is not known yet.
fn aggregates(e: &NetEntry) -> bool {
    e.op != NetOp::Listen && e.result != IN_PROGRESS
}

/// The network entries of a session.
#[derive(Default)]
pub struct Network {
    pub entries: Vec<NetEntry>,
    /// The first entry of each key (see `same_key`).
    same: HashMap<String, usize>,
    /// Connects in progress, by their socket's number in the records.
    pending: HashMap<u64, usize>,
    /// `listening` records: (pid, port, still listening).
    listening: Vec<(u32, Option<u16>, bool)>,
    /// Connects raced by their callers.
    pub tampers: Vec<NetTamper>,
}

impl Network {
    /// A `net` record at `at` (RFC 3339); `agent_netns`: what its verdict compares with now
    /// (the report judges again at the end). Returns its entry.
    pub fn net(&mut self, at: &str, n: &NetEntry, agent_netns: Option<u64>) -> usize {
        if aggregates(n) {
            let key = same_key(n);
            if let Some(&i) = self.same.get(&key) {
                let e = &mut self.entries[i];
                e.count += n.count;
                e.last_at = at.to_string();
                return i;
            }
            self.same.insert(key, self.entries.len());
        }
        let mut e = n.clone();
        e.verdict = Verdict::of(e.netns, agent_netns);
        if e.first_at.is_empty() {
            e.first_at = at.to_string();
        }
        if e.last_at.is_empty() {
            e.last_at = at.to_string();
        }
        self.entries.push(e);
        let i = self.entries.len() - 1;
        if n.op == NetOp::Connect
            && n.result == IN_PROGRESS
            && let Some(socket) = n.socket
        {
            self.pending.insert(socket, i);
        }
        i
    }

    /// A `net_result`: the outcome of the connect in progress on its socket. Logs from before
    /// sockets were named pair it with the newest connect of that process, address and port
    /// still in progress.
    pub fn result(&mut self, at: &str, r: &NetResult) -> Option<usize> {
        let i = match r.socket {
            Some(socket) => self.pending.remove(&socket)?,
            None => self.entries.iter().rposition(|n| {
                n.pid == r.pid
                    && n.op == NetOp::Connect
                    && n.result == IN_PROGRESS
                    && n.port == r.port
                    && n.addr == r.addr
            })?,
        };
        let e = &mut self.entries[i];
        e.result = r.result.clone();
        e.last_at = at.to_string();
        Some(i)
    }

    /// A `flow_count` record: adds a flow's packets and bytes to its `send` entry.
    pub fn flow_count(&mut self, c: &FlowCount) -> Option<usize> {
        let i = self.entries.iter().position(|e| {
            e.op == NetOp::Send
                && e.pid == c.pid
                && e.proto == c.proto
                && e.addr == c.addr
                && e.port == c.port
                && e.netns == c.netns
                && e.ifindex == c.ifindex
        })?;
        let e = &mut self.entries[i];
        *e.packets.get_or_insert(0) += c.packets;
        *e.bytes.get_or_insert(0) += c.bytes;
        Some(i)
    }

    /// A `listening` record (the end of the capture).
    pub fn listening(&mut self, l: &Listening) {
        self.listening.push((l.pid, l.port, l.listening_at_end));
    }

    /// The listeners, for the end of the capture: (pid, proto, addr, port) of each.
    pub fn listeners(&self) -> impl Iterator<Item = &NetEntry> {
        self.entries.iter().filter(|e| e.op == NetOp::Listen)
    }

    /// The entries as the report lists them: judged against the agent's namespace as known at
    /// the end; connects whose outcome came later counted with the others like them (one
    /// entry, `count`, `first_at`/`last_at`); listeners marked with what the end found.
    pub fn report_entries(&self, agent_netns: Option<u64>) -> Vec<NetEntry> {
        let mut out: Vec<NetEntry> = Vec::with_capacity(self.entries.len());
        let mut first: HashMap<String, usize> = HashMap::new();
        for n in &self.entries {
            let mut e = n.clone();
            e.socket = None;
            e.verdict = Verdict::of(e.netns, agent_netns);
            if e.op == NetOp::Listen
                && let Some(&(_, _, still)) = self
                    .listening
                    .iter()
                    .find(|(pid, port, _)| *pid == e.pid && *port == e.port)
            {
                e.listening_at_end = Some(still);
            }
            if aggregates(&e) {
                let key = same_key(&e);
                if let Some(&i) = first.get(&key) {
                    let into = &mut out[i];
                    into.count += e.count;
                    into.after_step |= e.after_step;
                    if let Some(p) = e.packets {
                        *into.packets.get_or_insert(0) += p;
                    }
                    if let Some(b) = e.bytes {
                        *into.bytes.get_or_insert(0) += b;
                    }
                    if e.first_at < into.first_at {
                        into.first_at = e.first_at;
                    }
                    if e.last_at > into.last_at {
                        into.last_at = e.last_at;
                    }
                    continue;
                }
                first.insert(key, out.len());
            }
            out.push(e);
        }
        out
    }
}

/// Whether process `pid` still has a listener of `proto` on local `port` (read from its own
/// /proc/PID/net, which shows its namespace).
pub fn still_listening(pid: u32, proto: &str, port: u16) -> bool {
    let Ok(p) = procfs::process::Process::new(pid as i32) else {
        return false;
    };
    if proto == "udp" {
        [p.udp(), p.udp6()]
            .iter()
            .flatten()
            .any(|t| udp_bound(t, port))
    } else {
        [p.tcp(), p.tcp6()]
            .iter()
            .flatten()
            .any(|t| tcp_listening(t, port))
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
    use procfs::net::{TcpNetEntries, UdpNetEntries};

    fn connect(port: u16, result: &str, socket: Option<u64>) -> NetEntry {
        NetEntry {
            pid: 5,
            op: NetOp::Connect,
            proto: "tcp".into(),
            addr: Some("127.0.0.1".into()),
            port: Some(port),
            path: None,
            name: None,
            qtype: None,
            malformed: None,
            result: result.into(),
            netns: Some(7),
            verdict: Verdict::Inside,
            count: 1,
            first_at: String::new(),
            last_at: String::new(),
            listening_at_end: None,
            via: None,
            vsock_port: None,
            device: None,
            ifindex: None,
            packets: None,
            bytes: None,
            socket,
            tool_call: Default::default(),
            after_step: false,
        }
    }

    fn net(n: &mut Network, at: &str, mut e: NetEntry, agent: Option<u64>) -> usize {
        (e.first_at, e.last_at) = (at.into(), at.into());
        n.net(at, &e, agent)
    }

    #[test]
    fn packet_flows_are_counted_per_device_and_vsock_names_its_cid() {
        let mut n = Network::default();
        let frames = |ifindex: u32, device: &str| NetEntry {
            op: NetOp::Send,
            proto: "ethertype 0x88b5".into(),
            addr: None,
            port: None,
            result: "sent".into(),
            via: Some("packet socket".into()),
            device: Some(device.into()),
            ifindex: Some(ifindex),
            ..connect(0, "sent", None)
        };
        let lo = net(&mut n, "t1", frames(1, "lo"), Some(7));
        let veth = net(&mut n, "t2", frames(9, "veth0"), Some(7));
        assert_ne!(lo, veth, "two devices, two entries");
        assert_eq!(destination(&n.entries[veth]), "ethertype 0x88b5 on veth0");
        let count = |ifindex| FlowCount {
            pid: 5,
            proto: "ethertype 0x88b5".into(),
            addr: None,
            port: None,
            netns: Some(7),
            ifindex: Some(ifindex),
            packets: 3,
            bytes: 180,
        };
        assert_eq!(n.flow_count(&count(9)), Some(veth));
        assert_eq!(n.entries[veth].packets, Some(3));
        assert_eq!(
            n.entries[lo].packets, None,
            "the other device's flow is its own"
        );
        let vsock = NetEntry {
            proto: "vsock".into(),
            addr: Some("3".into()),
            port: None,
            vsock_port: Some(100_005),
            ..connect(0, "ENODEV", None)
        };
        assert_eq!(destination(&vsock), "vsock cid 3 port 100005");
    }

    #[test]
    fn identical_connects_aggregate_and_verdicts_are_the_sockets() {
        let mut n = Network::default();
        net(&mut n, "t1", connect(80, "ok", None), Some(7));
        net(&mut n, "t2", connect(80, "ok", None), Some(7));
        net(&mut n, "t3", connect(81, "refused", None), Some(7));
        let mut other = connect(82, "ENETUNREACH", None);
        other.netns = Some(8);
        net(&mut n, "t4", other, Some(7));
        let r = n.report_entries(Some(7));
        assert_eq!(r.len(), 3);
        assert_eq!(
            (r[0].count, r[0].first_at.as_str(), r[0].last_at.as_str()),
            (2, "t1", "t2")
        );
        assert_eq!(r[2].verdict, Verdict::Outside);
    }

    #[test]
    fn outcomes_that_come_later_pair_by_socket_and_count_with_the_others() {
        let mut n = Network::default();
        // Two connects in progress to the same place; the second's outcome comes first.
        net(&mut n, "t1", connect(80, IN_PROGRESS, Some(1)), Some(7));
        net(&mut n, "t2", connect(80, IN_PROGRESS, Some(2)), Some(7));
        let outcome = |socket, result: &str| NetResult {
            pid: 5,
            addr: Some("127.0.0.1".into()),
            port: Some(80),
            result: result.into(),
            socket: Some(socket),
        };
        n.result("t3", &outcome(2, "refused"));
        n.result("t4", &outcome(1, "ok"));
        assert_eq!(n.entries[0].result, "ok");
        assert_eq!(n.entries[1].result, "refused");
        // An outcome for a socket nobody waits for changes nothing.
        assert!(n.result("t5", &outcome(9, "ok")).is_none());
        // A third, blocking, connect that worked: one entry with the first, count 2.
        net(&mut n, "t6", connect(80, "ok", None), Some(7));
        let r = n.report_entries(Some(7));
        let ok: Vec<_> = r.iter().filter(|e| e.result == "ok").collect();
        assert_eq!(ok.len(), 1, "{r:#?}");
        assert_eq!(
            (ok[0].count, ok[0].first_at.as_str(), ok[0].last_at.as_str()),
            (2, "t1", "t6")
        );
        assert!(r.iter().all(|e| e.socket.is_none()));
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
