//! Datagrams and packets from the packet itself, whatever API sent them (sendto, sendmsg,
//! send, write on a connected socket, io_uring SEND/SENDMSG; UDP to any port, raw and ping
//! ICMP, AF_PACKET frames), with the namespace of the device it left by.
//!
//! `raw_tracepoint/net_dev_queue(struct sk_buff *skb)` runs in the sender's context for every
//! packet a socket sends (`__dev_queue_xmit`). An untraced sender pays one `TRACED` lookup.
//! What a softirq sends while a traced task happens to be interrupted is thrown out: a request
//! or time-wait mini socket, a kernel socket (no `struct file`: ICMP errors, echo replies), and
//! TCP (followed by its states, see `conn.rs`).
//!
//! One flow is (process, socket family and type, the packet's protocol, destination, port,
//! device namespace; for AF_PACKET also the device): its first packet is a ring record, the
//! rest one hash update each.
use aya_ebpf::{
    helpers::generated::bpf_probe_read_kernel,
    macros::{map, raw_tracepoint},
    maps::HashMap,
    programs::RawTracePointContext,
};
use sandbox_watch_common::{
    EventKind, FLOW_ETHERTYPE, FLOW_UNAGGREGATED, FlowEvent, FlowKey, FlowValue,
    abi::{AF_INET, AF_INET6, AF_PACKET, IPPROTO_ICMP, IPPROTO_ICMPV6, IPPROTO_TCP, IPPROTO_UDP},
};

use crate::{count_lost, current_task, current_tgid, header, is_traced, kernel::*, submit_value};

/// bpf_map_update_elem: only when the key is not there yet.
const BPF_NOEXIST: u64 = 1;
const IPPROTO_SCTP: u32 = sandbox_watch_common::abi::IPPROTO_SCTP;
const IPPROTO_UDPLITE: u32 = sandbox_watch_common::abi::IPPROTO_UDPLITE;

/// Every flow of the traced processes and what it carried; userspace reads it at the end.
#[map]
static FLOWS: HashMap<FlowKey, FlowValue> = HashMap::with_max_entries(16384, 0);

#[raw_tracepoint(tracepoint = "net_dev_queue")]
pub fn net_dev_queue(ctx: RawTracePointContext) -> i32 {
    let tgid = current_tgid();
    if !is_traced(tgid) {
        return 0;
    }
    let skb: Ptr = ctx.arg(0);
    let _ = flow(skb, tgid);
    0
}

#[inline(always)]
fn flow(skb: Ptr, tgid: u32) -> Option<()> {
    let sk = unsafe { sw_skb_sk(skb) };
    if sk.is_null() || unsafe { sw_sk_is_user(sk) } == 0 {
        return None;
    }
    let family = unsafe { sw_sk_family(sk) };
    let inet = family == AF_INET as u32 || family == AF_INET6 as u32;
    if inet && unsafe { sw_sk_protocol(sk) } == IPPROTO_TCP {
        return None;
    }
    let dev = unsafe { sw_skb_dev(skb) };
    if dev.is_null() {
        return None;
    }
    let mut ethertype = 0u32;
    let l3 = unsafe { sw_skb_l3(skb, dev, family, &mut ethertype) };
    let mut h = [0u8; 48];
    if unsafe { bpf_probe_read_kernel(h.as_mut_ptr().cast(), 48, l3.cast()) } < 0 {
        return None;
    }
    let mut ev = FlowEvent {
        header: header(EventKind::NetFlow, tgid, unsafe {
            sw_task_start_ns(current_task())
        }),
        ..Default::default()
    };
    let k = &mut ev.key;
    k.tgid = tgid;
    k.family = family;
    k.sock_type = unsafe { sw_sk_type(sk) };
    let mut l4: *const u8 = core::ptr::null();
    match h[0] >> 4 {
        4 if family != AF_PACKET as u32 || ethertype == 0x0800 => {
            k.ip = 4;
            k.proto = h[9] as u32;
            k.daddr[..4].copy_from_slice(&h[16..20]);
            ev.saddr[..4].copy_from_slice(&h[12..16]);
            l4 = unsafe { l3.add(((h[0] & 0xf) as usize) * 4) };
        }
        6 if family != AF_PACKET as u32 || ethertype == 0x86dd => {
            k.ip = 6;
            k.proto = h[6] as u32;
            k.daddr.copy_from_slice(&h[24..40]);
            ev.saddr.copy_from_slice(&h[8..24]);
            l4 = unsafe { l3.add(40) };
        }
        _ => k.proto = FLOW_ETHERTYPE | (ethertype & 0xffff),
    }
    if k.proto == IPPROTO_TCP {
        return None;
    }
    if !l4.is_null() {
        let mut ports = [0u8; 4];
        if unsafe { bpf_probe_read_kernel(ports.as_mut_ptr().cast(), 4, l4.cast()) } == 0 {
            match k.proto {
                IPPROTO_UDP | IPPROTO_UDPLITE | IPPROTO_SCTP => {
                    ev.sport = u16::from_be_bytes([ports[0], ports[1]]) as u32;
                    k.dport = u16::from_be_bytes([ports[2], ports[3]]) as u32;
                }
                IPPROTO_ICMP | IPPROTO_ICMPV6 => {
                    ev.icmp = (ports[0] as u32) << 8 | ports[1] as u32;
                }
                _ => {}
            }
        }
    }
    k.netns = unsafe { sw_dev_netns(dev) };
    if family == AF_PACKET as u32 {
        // A packet socket's destination is the device: one flow per interface.
        k.ifindex = unsafe { sw_dev_ifindex(dev) };
    }
    k.start_ns = ev.header.start_ns;
    let len = unsafe { sw_skb_len(skb) } as u64;
    let key = ev.key;
    if count(&key, len) {
        return Some(());
    }
    let first = FlowValue {
        packets: 1,
        bytes: len,
    };
    if FLOWS.insert(key, first, BPF_NOEXIST).is_err() {
        // Another CPU made it first, or the map is full.
        if count(&key, len) {
            return Some(());
        }
        count_lost(EventKind::NetFlow, 1);
        ev.flags |= FLOW_UNAGGREGATED;
    }
    ev.ifindex = unsafe { sw_dev_ifindex(dev) };
    unsafe { sw_dev_name(dev, ev.device.as_mut_ptr()) };
    ev.len = len as u32;
    ev.sk_netns = unsafe { sw_sk_netns(sk) };
    submit_value(EventKind::NetFlow, &mut ev);
    Some(())
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
