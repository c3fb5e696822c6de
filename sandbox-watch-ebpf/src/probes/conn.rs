//! TCP connections from the kernel's own socket, whatever API made them (connect, fastopen
//! sendto/sendmsg, io_uring CONNECT inline, in io-wq or SQPOLL; accepts by any API).
//!
//! `raw_tracepoint/inet_sock_set_state(const struct sock *sk, int oldstate, int newstate)`:
//! - CLOSE→SYN_SENT and →LISTEN run in the task that asked (its syscall, io_uring's task_work,
//!   an io-wq worker or the SQPOLL thread: all of the asking tgid): one `TRACED` lookup. The
//!   record carries the destination, protocol and namespace the socket holds now, after the
//!   kernel copied and checked the caller's sockaddr.
//! - Every other change may run in softirq on top of any task: it is attributed by socket
//!   (`CONNS`) or, for a listener's new child at SYN_RECV→ESTABLISHED (its peer set), by the
//!   listener's (namespace, port) (`LISTENERS`). States that say nothing return before any read.
use aya_ebpf::{
    helpers::generated::{bpf_get_current_pid_tgid, bpf_ktime_get_boot_ns},
    macros::{map, raw_tracepoint},
    maps::HashMap,
    programs::RawTracePointContext,
};
use sandbox_watch_common::{
    ConnEvent, EventHeader, EventKind,
    abi::{IPPROTO_TCP, TCP_CLOSE, TCP_ESTABLISHED, TCP_LISTEN, TCP_SYN_RECV, TCP_SYN_SENT},
    conn,
};

use crate::{count_lost, current_task, current_tgid, is_traced, kernel::*, scratch, submit};

/// Who a followed socket belongs to.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Owner {
    tgid: u32,
    _pad: u32,
    start_ns: u64,
}

/// Sockets of traced processes whose later states are reported, by kernel socket.
#[map]
static CONNS: HashMap<u64, Owner> = HashMap::with_max_entries(16384, 0);

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ListenKey {
    netns: u32,
    port: u32,
}

/// Listeners of traced processes, by (socket namespace, local port).
#[map]
static LISTENERS: HashMap<ListenKey, Owner> = HashMap::with_max_entries(4096, 0);

#[raw_tracepoint(tracepoint = "inet_sock_set_state")]
pub fn inet_sock_set_state(ctx: RawTracePointContext) -> i32 {
    let sk: Ptr = ctx.arg(0);
    let old = ctx.arg::<u64>(1) as u32;
    let new = ctx.arg::<u64>(2) as u32;
    match new {
        TCP_SYN_SENT | TCP_LISTEN => asked(sk, old, new),
        TCP_ESTABLISHED if old == TCP_SYN_RECV => inbound(sk, old),
        TCP_ESTABLISHED => followed(sk, old, conn::UP, false),
        TCP_CLOSE if old == TCP_LISTEN => {
            let key = listen_key(sk);
            let _ = LISTENERS.remove(key);
        }
        TCP_CLOSE => followed(sk, old, conn::DOWN, true),
        _ => {}
    }
    0
}

#[inline(always)]
fn listen_key(sk: Ptr) -> ListenKey {
    ListenKey {
        netns: unsafe { sw_sk_netns(sk) },
        port: unsafe { sw_sk_local_port(sk) },
    }
}

/// SYN_SENT or LISTEN, in the asking task.
#[inline(always)]
fn asked(sk: Ptr, old: u32, new: u32) {
    let tgid = current_tgid();
    if !is_traced(tgid) || unsafe { sw_sk_protocol(sk) } != IPPROTO_TCP {
        return;
    }
    let task = current_task();
    let owner = Owner {
        tgid,
        _pad: 0,
        start_ns: unsafe { sw_task_start_ns(task) },
    };
    let op = if new == TCP_LISTEN {
        if LISTENERS.insert(listen_key(sk), owner, 0).is_err() {
            count_lost(EventKind::NetConn, 1);
        }
        conn::LISTEN
    } else {
        if CONNS.insert(sk as u64, owner, 0).is_err() {
            count_lost(EventKind::NetConnEnd, 1);
        }
        conn::OUT
    };
    let worker = unsafe { sw_task_io_worker(task) } != 0;
    let (syscall, flags) = if worker {
        (-1, conn::IO_WORKER)
    } else {
        (unsafe { sw_syscall_nr() } as i32, 0)
    };
    send(sk, &owner, op, old, flags, |ev| {
        ev.task_netns = unsafe { sw_task_netns(task) };
        ev.syscall = syscall;
    });
}

/// A listener's child, established: its peer is known now.
#[inline(always)]
fn inbound(sk: Ptr, old: u32) {
    let Some(owner) = (unsafe { LISTENERS.get(listen_key(sk)) }).copied() else {
        return;
    };
    let mut flags = 0;
    if CONNS.insert(sk as u64, owner, 0).is_err() {
        flags |= conn::UNFOLLOWED;
        count_lost(EventKind::NetConnEnd, 1);
    }
    send(sk, &owner, conn::IN, old, flags, |_| {});
}

/// A later state of a followed socket (any task, any context).
#[inline(always)]
fn followed(sk: Ptr, old: u32, op: u32, end: bool) {
    let Some(owner) = (unsafe { CONNS.get(sk as u64) }).copied() else {
        return;
    };
    if end {
        let _ = CONNS.remove(sk as u64);
    }
    send(sk, &owner, op, old, 0, |ev| {
        if end {
            ev.err = unsafe { sw_sk_err(sk) };
            let mut bytes = [0u64; 2];
            unsafe { sw_tcp_bytes(sk, bytes.as_mut_ptr()) };
            ev.bytes_sent = bytes[0];
            ev.bytes_received = bytes[1];
        }
    });
}

#[inline(always)]
fn send(sk: Ptr, owner: &Owner, op: u32, old: u32, flags: u32, more: impl FnOnce(&mut ConnEvent)) {
    let Some(base) = scratch() else { return };
    let ev = unsafe { &mut *base.cast::<ConnEvent>() };
    let kind = if op == conn::UP || op == conn::DOWN {
        EventKind::NetConnEnd
    } else {
        EventKind::NetConn
    };
    *ev = ConnEvent {
        header: EventHeader {
            kind: kind as u32,
            tgid: owner.tgid,
            pid: unsafe { bpf_get_current_pid_tgid() } as u32,
            _pad: 0,
            ktime_ns: unsafe { bpf_ktime_get_boot_ns() },
            start_ns: owner.start_ns,
            seq: 0,
        },
        op,
        flags,
        old_state: old,
        syscall: -1,
        sock: sk as u64,
        ..Default::default()
    };
    unsafe {
        ev.family = sw_sk_family(sk);
        ev.sock_type = sw_sk_type(sk);
        ev.protocol = sw_sk_protocol(sk);
        ev.sk_netns = sw_sk_netns(sk);
        sw_sk_local_addr(sk, ev.saddr.as_mut_ptr());
        sw_sk_remote_addr(sk, ev.daddr.as_mut_ptr());
        ev.sport = sw_sk_local_port(sk);
        ev.dport = u16::from_be(sw_sk_remote_port_be(sk) as u16) as u32;
    }
    more(ev);
    submit(kind, base, core::mem::size_of::<ConnEvent>());
}
