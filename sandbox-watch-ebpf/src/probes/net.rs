//! Network: connects (and their later outcome), listeners, UDP servers; the records DNS
//! questions share with them.
//!
//! - `sys_enter/exit_connect`, `listen`, `bind`: the socket comes from the caller's fd table;
//!   its type, protocol and **its own** network namespace are read from the `struct sock`.
//!   What the caller's sockaddr said at the exit is compared in userspace with what the
//!   kernel's socket holds (`conn.rs`): a difference is a racing caller.
//! - A vsock connect's CID and port are the socket's own (`vsock_sock.remote_addr`) at the
//!   exit, read through the C shim.
//! - DNS questions are taken from the packets (`flow.rs`): a UDP datagram to port 53 sent by
//!   any API is a `NET_DNS` record with its first `DNS_MAX` bytes.
use aya_ebpf::{
    helpers::generated::bpf_probe_read_user, macros::tracepoint, programs::TracePointContext,
};
use sandbox_watch_common::{
    DNS_MAX, EventKind, NET_BIND, NET_CONNECT, NET_LISTEN, NET_VSOCK_PEER, NetEvent, SOCKADDR_MAX,
};

use super::syscall::{RET, syscall_programs};
use crate::{current_task, current_tgid, header, is_traced, kernel::*, scratch, submit};

use sandbox_watch_common::abi::{AF_INET, AF_INET6, AF_UNIX, AF_VSOCK, SOCK_DGRAM};

/// Fills the event's socket fields from the socket behind `fd`; returns the `struct sock`.
#[inline(always)]
fn socket(ev: &mut NetEvent, fd: u32) -> Ptr {
    let file = unsafe { sw_task_fd_file(current_task(), fd) };
    let sk = unsafe { sw_file_sock(file) };
    if sk.is_null() {
        return sk;
    }
    unsafe {
        ev.sock_type = sw_file_sock_type(file);
        ev.protocol = sw_sk_protocol(sk);
        ev.netns = sw_sk_netns(sk);
        ev.family = sw_sk_family(sk);
    }
    ev.sock = sk as u64;
    sk
}

/// Reads a `sockaddr` from the caller into `tail` and sets family, address and port from it.
/// Returns the bytes read (the whole sockaddr stays in the tail: unix paths are read from it).
#[inline(always)]
fn sockaddr(ev: &mut NetEvent, tail: *mut u8, uaddr: u64, len: u64) -> u32 {
    let n = if len > SOCKADDR_MAX as u64 {
        SOCKADDR_MAX as u32
    } else {
        len as u32
    };
    if uaddr == 0 || unsafe { bpf_probe_read_user(tail.cast(), n, uaddr as *const _) } < 0 {
        return 0;
    }
    let family = unsafe { *(tail as *const u16) };
    ev.family = family as u32;
    ev.port = u16::from_be(unsafe { *(tail.add(2) as *const u16) }) as u32;
    unsafe {
        match family {
            AF_INET => core::ptr::copy_nonoverlapping(tail.add(4), ev.addr.as_mut_ptr(), 4),
            AF_INET6 => core::ptr::copy_nonoverlapping(tail.add(8), ev.addr.as_mut_ptr(), 16),
            _ => {}
        }
    }
    n
}

/// A record of `op` in this CPU's scratch area: the area, the record, and its tail.
#[inline(always)]
pub(crate) fn event(op: u32) -> Option<(*mut u8, &'static mut NetEvent, *mut u8)> {
    let base = scratch()?;
    let ev = unsafe { &mut *base.cast::<NetEvent>() };
    *ev = NetEvent {
        header: header(EventKind::Net, current_tgid(), unsafe {
            sw_task_start_ns(current_task())
        }),
        op,
        ..Default::default()
    };
    let tail = unsafe { base.add(core::mem::size_of::<NetEvent>()) };
    Some((base, ev, tail))
}

/// Sends the record `event` made, with its tail.
#[inline(always)]
pub(crate) fn send(base: *mut u8, ev: &NetEvent) {
    let tail = (ev.tail_len as usize) & (2 * DNS_MAX - 1);
    submit(
        EventKind::Net,
        base,
        core::mem::size_of::<NetEvent>() + tail,
    );
}

// ---- connect ----

#[tracepoint(category = "syscalls", name = "sys_exit_connect")]
pub fn sys_exit_connect(ctx: TracePointContext) -> u32 {
    if !is_traced(current_tgid()) {
        return 0;
    }
    // connect(fd, addr, addrlen), from the registers saved at the entry.
    let mut a = [0u64; 4];
    unsafe { sw_syscall_args(a.as_mut_ptr()) };
    let ret = unsafe { ctx.read_at::<i64>(RET) }.unwrap_or(0);
    let Some((base, ev, tail)) = event(NET_CONNECT) else {
        return 0;
    };
    let sk = socket(ev, a[0] as u32);
    let n = sockaddr(ev, tail, a[1], a[2] & 0xffff_ffff);
    if ev.family == AF_UNIX as u32 {
        ev.tail_len = n;
    }
    if !sk.is_null() && unsafe { sw_sk_family(sk) } == AF_VSOCK as u32 {
        vsock_peer(ev, sk);
    }
    ev.result = ret as i32;
    send(base, ev);
    0
}

/// A vsock connect's peer from the kernel's socket, not the caller's sockaddr (which the
/// syscall probe cannot parse and another thread could rewrite).
#[inline(always)]
fn vsock_peer(ev: &mut NetEvent, sk: Ptr) {
    ev.family = AF_VSOCK as u32;
    ev.addr = [0; 16];
    ev.port = 0;
    let (mut cid, mut port) = (0u32, 0u32);
    if unsafe { sw_vsock_remote(sk, &mut cid, &mut port) } == 0 {
        ev.addr[..4].copy_from_slice(&cid.to_ne_bytes());
        ev.port = port;
        ev.flags |= NET_VSOCK_PEER;
    }
}

// ---- listen and UDP servers ----

syscall_programs! {
    sys_exit_listen(ctx) => { local_endpoint(&ctx, NET_LISTEN); 0 };
    sys_exit_bind(ctx) => { local_endpoint(&ctx, NET_BIND); 0 };
}

/// A successful listen, or bind of a datagram socket: reports its local address. The socket's
/// descriptor is the first argument, read from the registers saved at the entry.
#[inline(always)]
fn local_endpoint(ctx: &TracePointContext, op: u32) {
    if !is_traced(current_tgid()) {
        return;
    }
    if unsafe { ctx.read_at::<i64>(RET) }.unwrap_or(-1) != 0 {
        return;
    }
    let mut a = [0u64; 4];
    unsafe { sw_syscall_args(a.as_mut_ptr()) };
    let Some((base, ev, _)) = event(op) else {
        return;
    };
    let sk = socket(ev, a[0] as u32);
    if sk.is_null() || (op == NET_BIND && ev.sock_type != SOCK_DGRAM) {
        return;
    }
    if ev.family != AF_INET as u32 && ev.family != AF_INET6 as u32 {
        return;
    }
    unsafe {
        sw_sk_local_addr(sk, ev.addr.as_mut_ptr());
        ev.port = sw_sk_local_port(sk);
    }
    send(base, ev);
}
