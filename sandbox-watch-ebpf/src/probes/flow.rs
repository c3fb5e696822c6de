//! Datagrams and packets from the packet itself, whatever API sent them (sendto, sendmsg,
//! send, write on a connected socket, io_uring SEND/SENDMSG; UDP to any port, raw and ping
//! ICMP, AF_PACKET frames), with the namespace of the device it left by.
//!
//! `tp_btf/net_dev_queue(struct sk_buff *skb)` runs in the sender's context for every packet
//! a socket sends (`__dev_queue_xmit`). An untraced sender pays one `TRACED` lookup. The typed
//! `skb` lets the C shim read the kernel's fields with plain loads (`sw_skb_flow`), not one
//! helper call each. What a softirq sends while a traced task happens to be interrupted is
//! thrown out: a request or time-wait mini socket, a kernel socket (no `struct file`: ICMP
//! errors, echo replies), and TCP (followed by its states, see `conn.rs`).
//!
//! One flow is (process, socket family and type, the packet's protocol, destination, port,
//! device namespace; for AF_PACKET also the device): its first packet is a ring record, the
//! rest one hash update each.
use aya_ebpf::{
    helpers::generated::bpf_probe_read_kernel,
    macros::{btf_tracepoint, map},
    maps::HashMap,
    programs::BtfTracePointContext,
};
use sandbox_watch_common::{
    DNS_MAX, EventKind, FLOW_ETHERTYPE, FLOW_UNAGGREGATED, FlowEvent, FlowKey, FlowValue, NET_DNS,
    abi::{
        AF_INET, AF_INET6, AF_PACKET, IPPROTO_ICMP, IPPROTO_ICMPV6, IPPROTO_TCP, IPPROTO_UDP,
        SOCK_DGRAM,
    },
};

use super::net;
use crate::{count_lost, current_tgid, header, is_traced, kernel::*, submit_value};

/// bpf_map_update_elem: only when the key is not there yet.
const BPF_NOEXIST: u64 = 1;
const IPPROTO_SCTP: u32 = sandbox_watch_common::abi::IPPROTO_SCTP;
const IPPROTO_UDPLITE: u32 = sandbox_watch_common::abi::IPPROTO_UDPLITE;

const DNS_PORT: u32 = 53;
/// The UDP header's size: the datagram starts past it.
const UDP_HEADER: usize = 8;

/// Bytes of the network header read at once: an IPv6 header and the first 8 bytes past it, or
/// an IPv4 header of up to 10 words and the first 8 past one without options (ports, ICMP
/// type and code).
const HEAD: usize = 48;

/// Every flow of the traced processes and what it carried; userspace reads it at the end.
#[map]
static FLOWS: HashMap<FlowKey, FlowValue> = HashMap::with_max_entries(16384, 0);

#[btf_tracepoint(function = "net_dev_queue")]
pub fn net_dev_queue(ctx: BtfTracePointContext) -> i32 {
    let tgid = current_tgid();
    if !is_traced(tgid) {
        return 0;
    }
    let skb: Ptr = ctx.arg(0);
    let _ = flow(skb, tgid);
    0
}

/// Counts the packet in its flow. A packet of a flow already seen costs the reads its key
/// needs and one map update; the record (header, source, device name, the socket's
/// namespace) is built only for a flow's first packet.
#[inline(always)]
fn flow(skb: Ptr, tgid: u32) -> Option<()> {
    // SAFETY: plain numbers and pointers the C shim fills (all zero is a valid value).
    let mut s: SkbFlow = unsafe { core::mem::zeroed() };
    if unsafe { sw_skb_flow(skb, &mut s) } == 0 {
        return None;
    }
    let mut h = [0u8; HEAD];
    if unsafe { bpf_probe_read_kernel(h.as_mut_ptr().cast(), HEAD as u32, s.l3.cast()) } < 0 {
        return None;
    }
    let mut key = FlowKey {
        tgid,
        family: s.family,
        sock_type: s.sock_type,
        netns: s.netns,
        start_ns: s.start_ns,
        ..Default::default()
    };
    let packet = s.family == AF_PACKET as u32;
    // Where the transport header starts (0: not IP).
    let l4 = match h[0] >> 4 {
        4 if !packet || s.ethertype == 0x0800 => {
            key.ip = 4;
            key.proto = h[9] as u32;
            key.daddr[..4].copy_from_slice(&h[16..20]);
            ((h[0] & 0xf) as usize) * 4
        }
        6 if !packet || s.ethertype == 0x86dd => {
            key.ip = 6;
            key.proto = h[6] as u32;
            key.daddr.copy_from_slice(&h[24..40]);
            40
        }
        _ => {
            key.proto = FLOW_ETHERTYPE | (s.ethertype & 0xffff);
            0
        }
    };
    if key.proto == IPPROTO_TCP {
        return None;
    }
    // The transport header's first 4 bytes: from the read above for the usual header lengths.
    let mut ports = [0u8; 4];
    match l4 {
        0 => {}
        20 => ports.copy_from_slice(&h[20..24]),
        40 => ports.copy_from_slice(&h[40..44]),
        _ => {
            let at = unsafe { s.l3.add(l4) };
            if unsafe { bpf_probe_read_kernel(ports.as_mut_ptr().cast(), 4, at.cast()) } < 0 {
                ports = [0; 4];
            }
        }
    }
    let transport = matches!(key.proto, IPPROTO_UDP | IPPROTO_UDPLITE | IPPROTO_SCTP);
    if l4 != 0 && transport {
        key.dport = u16::from_be_bytes([ports[2], ports[3]]) as u32;
    }
    if key.proto == IPPROTO_UDP && key.dport == DNS_PORT && s.sock_type == SOCK_DGRAM && !packet {
        dns(&s, &key, l4);
    }
    if packet {
        // A packet socket's destination is the device: one flow per interface.
        key.ifindex = s.ifindex;
    }
    let len = s.len as u64;
    if count(&key, len) {
        return Some(());
    }
    let first = FlowValue {
        packets: 1,
        bytes: len,
    };
    let mut flags = 0;
    if FLOWS.insert(key, first, BPF_NOEXIST).is_err() {
        // Another CPU made it first, or the map is full.
        if count(&key, len) {
            return Some(());
        }
        count_lost(EventKind::NetFlow, 1);
        flags |= FLOW_UNAGGREGATED;
    }
    let mut ev = FlowEvent {
        header: header(EventKind::NetFlow, tgid, s.start_ns),
        key,
        flags,
        ifindex: s.ifindex,
        len: s.len,
        ..Default::default()
    };
    match key.ip {
        4 => ev.saddr[..4].copy_from_slice(&h[12..16]),
        6 => ev.saddr.copy_from_slice(&h[8..24]),
        _ => {}
    }
    if l4 != 0 && transport {
        ev.sport = u16::from_be_bytes([ports[0], ports[1]]) as u32;
    }
    if l4 != 0 && matches!(key.proto, IPPROTO_ICMP | IPPROTO_ICMPV6) {
        ev.icmp = (ports[0] as u32) << 8 | ports[1] as u32;
    }
    unsafe { sw_dev_name(s.dev, ev.device.as_mut_ptr()) };
    ev.sk_netns = unsafe { sw_sk_netns(s.sk) };
    submit_value(EventKind::NetFlow, &mut ev);
    Some(())
}

/// A UDP datagram to port 53, whatever API sent it (sendto, sendmsg, sendmmsg, write or send
/// on a connected socket, io_uring): a `NET_DNS` record with the destination the packet
/// carries and the datagram's first `DNS_MAX` bytes, as far as they are in the packet's linear
/// part (all of it unless the send was corked or GSO).
#[inline(always)]
fn dns(s: &SkbFlow, key: &FlowKey, l4: usize) {
    let Some((base, ev, tail)) = net::event(NET_DNS) else {
        return;
    };
    ev.family = if key.ip == 4 { AF_INET } else { AF_INET6 } as u32;
    ev.sock_type = s.sock_type;
    ev.protocol = IPPROTO_UDP;
    ev.addr = key.daddr;
    ev.port = key.dport;
    ev.netns = unsafe { sw_sk_netns(s.sk) };
    ev.sock = s.sk as u64;
    let start = unsafe { s.l3.add(l4 + UDP_HEADER) };
    let room = (s.end as usize).saturating_sub(start as usize);
    let n = room.min(DNS_MAX) as u32;
    if unsafe { bpf_probe_read_kernel(tail.cast(), n, start.cast()) } < 0 {
        return;
    }
    ev.tail_len = n;
    net::send(base, ev);
}

/// Adds a packet to its flow; false when the flow is not in the map.
#[inline(always)]
fn count(key: &FlowKey, len: u64) -> bool {
    let Some(v) = FLOWS.get_ptr_mut(key) else {
        return false;
    };
    unsafe { sw_count_packet(v.cast(), len) };
    true
}
