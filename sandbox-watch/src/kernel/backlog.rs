//! How far the capture's drain is behind the kernel: the bytes its last pass over the ring
//! buffer took, against the ring's size. The OTLP exporter (and the collector it keeps busy)
//! holds back while the drain is behind, so the CPU goes to draining first: in the bench, the
//! capture of 1,007,014 records with `--otlp` to a collector on the same 2 cores lost 182,669
//! of them to a full ring while the exporter and the collector took their share of the CPU
//! regardless (the same capture without `--otlp` lost none).
//!
//! One capture per process, so one backlog: a process that only ships finished logs never
//! drains a ring and is never behind.
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes the last pass took (records with their 8-byte ring headers).
static LAST_PASS: AtomicU64 = AtomicU64::new(0);
/// Bytes of the ring buffer (0: no ring, never behind).
static RING: AtomicU64 = AtomicU64::new(0);

/// The ring buffer's size, once it is mapped.
pub fn ring_size(bytes: u64) {
    RING.store(bytes, Ordering::Relaxed);
}

/// The bytes one record of `len` bytes takes in the ring: an 8-byte header, the data
/// rounded up to 8.
pub fn record_bytes(len: usize) -> u64 {
    8 + (len as u64).next_multiple_of(8)
}

/// A pass over the ring took `bytes`: what was waiting when it began, and what arrived
/// while it ran. 0 once the capture stops draining (nothing more to give way to).
pub fn drained(bytes: u64) {
    LAST_PASS.store(bytes, Ordering::Relaxed);
}

/// Whether the last pass took more than a quarter of the ring: the drain is behind, and what
/// does not have to run now (the export) should wait.
pub fn behind() -> bool {
    let ring = RING.load(Ordering::Relaxed);
    ring > 0 && LAST_PASS.load(Ordering::Relaxed) > ring / 4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behind_when_a_pass_took_more_than_a_quarter_of_the_ring() {
        assert_eq!(record_bytes(0), 8);
        assert_eq!(record_bytes(1), 16);
        assert_eq!(record_bytes(300), 312);
        // No ring yet: never behind.
        drained(1 << 30);
        assert!(!behind());
        ring_size(4 << 20);
        drained(1 << 20);
        assert!(!behind(), "a quarter is not more than a quarter");
        drained((1 << 20) + 8);
        assert!(behind());
        drained(0);
        assert!(!behind());
    }
}
