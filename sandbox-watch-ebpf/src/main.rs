//! The kernel side of sandbox-watch: follows one set of processes (the traced tgids, or one
//! cgroup) and sends what they do through two ring buffers: `OUTPUT` for the bytes they write
//! to their stdout and stderr, `EVENTS` for everything else.
//!
//! Untraced tasks cost one hash lookup per probe (`is_traced`). Records are assembled in a
//! per-CPU scratch area and copied to the ring at their used length (output chunks are read
//! straight into room reserved in theirs); a record that does not fit is counted in `DROPS`
//! (per kind) so the userspace can report it. Every record carries the
//! next number of one global sequence (`SEQ`), taken before the copy: a record that never
//! reaches the userspace leaves a hole in the sequence even when `DROPS` was reset.
#![no_std]
#![no_main]

mod kernel;
mod probes;

use aya_ebpf::{
    helpers::generated::{
        bpf_get_current_ancestor_cgroup_id, bpf_get_current_pid_tgid, bpf_get_current_task,
        bpf_get_smp_processor_id, bpf_ktime_get_boot_ns, bpf_ringbuf_output, bpf_ringbuf_query,
    },
    macros::map,
    maps::{Array, HashMap, PerCpuArray, RingBuf, ring_buf::RingBufEntry},
};
use sandbox_watch_common::{EventHeader, EventKind, KIND_SLOTS, SCRATCH_SIZE, fails};

/// Flags of bpf_ringbuf_output and bpf_ringbuf_query (include/uapi/linux/bpf.h).
const BPF_RB_NO_WAKEUP: u64 = 1;
const BPF_RB_FORCE_WAKEUP: u64 = 2;
const BPF_RB_AVAIL_DATA: u64 = 0;
const BPF_RB_RING_SIZE: u64 = 1;

/// Thread group ids being followed. Userspace seeds it; forks add, group exits remove.
#[map]
static TRACED: HashMap<u32, u32> = HashMap::with_max_entries(65536, 0);

/// Every record for the userspace: 4 MiB unless `--ring-buffer` says otherwise (a few
/// thousand execs, tens of thousands of file records in flight).
#[map]
static EVENTS: RingBuf = RingBuf::with_byte_size(4 << 20, 0);

/// What traced processes wrote to their stdout and stderr (`output` records): 8 MiB unless
/// `--output-ring` says otherwise. A ring of its own, so output can outrun the monitor (a
/// program writes faster than anything hashes) and lose only output, never pushing out the
/// records of what ran, opened, connected or exited (`EVENTS`).
#[map]
static OUTPUT: RingBuf = RingBuf::with_byte_size(8 << 20, 0);

/// The ring a record of `kind` goes to.
#[inline(always)]
fn ring_of(kind: EventKind) -> &'static RingBuf {
    if kind as u32 == EventKind::Output as u32 {
        &OUTPUT
    } else {
        &EVENTS
    }
}

/// Records that did not fit in their ring, per event kind.
#[map]
static DROPS: PerCpuArray<u64> = PerCpuArray::with_max_entries(KIND_SLOTS, 0);

/// The global sequence number: the number the next record gets.
#[map]
static SEQ: Array<u64> = Array::with_max_entries(1, 0);

/// Map inserts that failed, per map (`sandbox_watch_common::fails`).
#[map]
static FAILS: PerCpuArray<u64> = PerCpuArray::with_max_entries(fails::SLOTS, 0);

/// Counts a failed map insert.
#[inline(always)]
pub fn count_fail(slot: u32) {
    if let Some(count) = FAILS.get_ptr_mut(slot) {
        unsafe { *count += 1 };
    }
}

#[repr(C)]
pub struct Scratch {
    pub bytes: [u8; SCRATCH_SIZE],
}

/// One scratch area per CPU (a plain array: per-CPU values are limited to 32 KiB). The loader
/// sets max_entries to the number of possible CPUs.
#[map]
static SCRATCH: Array<Scratch> = Array::with_max_entries(1, 0);

/// Container mode: trace every task whose cgroup at `CGROUP_LEVEL` is `CGROUP_ID`
/// (0 = off). Set by the loader.
#[unsafe(no_mangle)]
static CGROUP_ID: u64 = 0;
#[unsafe(no_mangle)]
static CGROUP_LEVEL: u32 = 0;

#[inline(always)]
pub fn current_tgid() -> u32 {
    (unsafe { bpf_get_current_pid_tgid() } >> 32) as u32
}

#[inline(always)]
pub fn current_task() -> *const core::ffi::c_void {
    unsafe { bpf_get_current_task() as *const core::ffi::c_void }
}

/// Whether the current task is followed. In container mode a task found in the container's
/// cgroup is added to `TRACED`, so it is followed from its first event there.
#[inline(always)]
pub fn is_traced(tgid: u32) -> bool {
    if unsafe { TRACED.get(tgid) }.is_some() {
        return true;
    }
    let id = unsafe { core::ptr::read_volatile(&CGROUP_ID) };
    if id == 0 {
        return false;
    }
    let level = unsafe { core::ptr::read_volatile(&CGROUP_LEVEL) };
    if unsafe { bpf_get_current_ancestor_cgroup_id(level as i32) } != id {
        return false;
    }
    trace(tgid);
    true
}

/// Adds a thread group to the traced set (counted when the set is full).
pub fn trace(tgid: u32) {
    if TRACED.insert(tgid, 1, 0).is_err() {
        count_fail(fails::TRACED);
    }
}

pub fn untrace(tgid: u32) {
    let _ = TRACED.remove(tgid);
}

/// This CPU's scratch area.
#[inline(always)]
pub fn scratch() -> Option<*mut u8> {
    let cpu = unsafe { bpf_get_smp_processor_id() };
    SCRATCH.get_ptr_mut(cpu).map(|s| s.cast::<u8>())
}

#[inline(always)]
pub fn header(kind: EventKind, tgid: u32, start_ns: u64) -> EventHeader {
    EventHeader {
        kind: kind as u32,
        tgid,
        pid: unsafe { bpf_get_current_pid_tgid() } as u32,
        _pad: 0,
        ktime_ns: unsafe { bpf_ktime_get_boot_ns() },
        start_ns,
        seq: 0,
    }
}

/// The next number of the global sequence (u64::MAX if the map cannot be read, which the
/// userspace counts as a bad sequence number).
#[inline(always)]
fn next_seq() -> u64 {
    take_seq(1)
}

/// Takes `n` numbers of the global sequence; the first of them.
#[inline(always)]
fn take_seq(n: u64) -> u64 {
    match SEQ.get_ptr_mut(0) {
        Some(counter) => unsafe { kernel::sw_fetch_add(counter, n) },
        None => u64::MAX,
    }
}

/// Copies `len` bytes of the record at `data` (in scratch or on the stack; it starts with an
/// [`EventHeader`]) to its ring with the next sequence number, or counts it as dropped.
#[inline(always)]
pub fn submit(kind: EventKind, data: *mut u8, len: usize) {
    output(kind, data, len, false);
}

/// As [`submit`], and wakes the reader at once: for records that must reach the log before
/// what they announce can take effect (an attack on the monitor).
#[inline(always)]
pub fn submit_now(kind: EventKind, data: *mut u8, len: usize) {
    output(kind, data, len, true);
}

#[inline(always)]
fn output(kind: EventKind, data: *mut u8, len: usize, now: bool) {
    unsafe { (*data.cast::<EventHeader>()).seq = next_seq() };
    // The mask must reach the verifier: through a volatile read LLVM cannot prove it redundant
    // and drop it (older verifiers, 6.1's, then lose the bound of the sum and refuse the call).
    let len = unsafe { core::ptr::read_volatile(&len) } & (SCRATCH_SIZE - 1);
    let ring = ring_of(kind);
    let wake = wake_flags(ring, len, now);
    let ret = unsafe { bpf_ringbuf_output(ring_ptr(ring), data.cast(), len as u64, wake) };
    if ret < 0 {
        count_drop(kind);
    }
}

/// Whether committing `len` more bytes should wake the reader. Waking it for every record
/// costs the traced task an interrupt and the monitor a context switch: wake it when this
/// record takes what is waiting past a multiple of an eighth of the ring. That is once per
/// eighth however far behind the reader is (waking it at every record once an eighth was
/// waiting cost a 100 MiB output storm an interrupt per 4 KiB write), and a wake-up it missed
/// while it was draining is made again an eighth later. It also drains the ring on its own
/// every 10 ms.
#[inline(always)]
fn wake_flags(ring: &RingBuf, len: usize, now: bool) -> u64 {
    let ring = ring_ptr(ring);
    let waiting = unsafe { bpf_ringbuf_query(ring, BPF_RB_AVAIL_DATA) };
    let eighth = unsafe { bpf_ringbuf_query(ring, BPF_RB_RING_SIZE) } / 8;
    let crosses = eighth > 0 && (waiting + len as u64) / eighth != waiting / eighth;
    if now || crosses {
        BPF_RB_FORCE_WAKEUP
    } else {
        BPF_RB_NO_WAKEUP
    }
}

/// The map pointer the ring helpers take.
#[inline(always)]
fn ring_ptr(ring: &RingBuf) -> *mut core::ffi::c_void {
    (ring as *const RingBuf).cast_mut().cast()
}

#[inline(always)]
fn count_drop(kind: EventKind) {
    if let Some(count) = DROPS.get_ptr_mut(kind as u32) {
        unsafe { *count += 1 };
    }
}

/// A record of type `T` written in place in the ring, not copied there from scratch (the
/// output probe's chunks: the writer's bytes are read straight into the ring). `T` starts with
/// an [`EventHeader`]. Its sequence number is taken before the room is reserved, as [`submit`]
/// takes it before the copy, and written into the header when the record is sent.
pub struct Reserved<T: 'static> {
    entry: RingBufEntry<T>,
    seq: u64,
    ring: &'static RingBuf,
}

impl<T> Reserved<T> {
    /// Room for one `T` in the ring, or None: counted as a drop of `kind`, with its number of
    /// the sequence taken (a hole the userspace matches with the drop).
    #[inline(always)]
    pub fn new(kind: EventKind) -> Option<Reserved<T>> {
        let seq = next_seq();
        let ring = ring_of(kind);
        let Some(entry) = ring.reserve::<T>(0) else {
            count_drop(kind);
            return None;
        };
        Some(Reserved { entry, seq, ring })
    }

    /// The record, uninitialised: to be filled in whole before it is sent.
    #[inline(always)]
    pub fn as_mut_ptr(&mut self) -> *mut T {
        self.entry.as_mut_ptr()
    }

    /// Sets the header's sequence number and commits the record for the reader.
    #[inline(always)]
    pub fn send(mut self) {
        unsafe { (*self.entry.as_mut_ptr().cast::<EventHeader>()).seq = self.seq };
        let wake = wake_flags(self.ring, core::mem::size_of::<T>(), false);
        self.entry.submit(wake);
    }
}

/// Counts `n` records of `kind` as lost without trying to send them. They take their numbers
/// of the sequence, as a record the ring refuses does: the userspace's check that every hole
/// in the sequence is a counted drop (and every counted drop a hole) holds for them too.
#[inline(always)]
pub fn count_lost(kind: EventKind, n: u64) {
    take_seq(n);
    if let Some(count) = DROPS.get_ptr_mut(kind as u32) {
        unsafe { *count += n };
    }
}

/// Sends a fixed-size record from the stack.
#[inline(always)]
pub fn submit_value<T>(kind: EventKind, value: &mut T) {
    submit(kind, (value as *mut T).cast(), core::mem::size_of::<T>());
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
