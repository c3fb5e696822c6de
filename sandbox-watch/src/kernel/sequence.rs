//! The kernel's sequence numbers, counted: every record the kernel makes takes the next number
//! of one counter (map `SEQ`) before it is copied to the ring, so what never arrives leaves a
//! hole whatever the drop counters say. Records from two CPUs can arrive slightly out of
//! order: numbers are counted, not required in order.
use roaring::RoaringTreemap;

use crate::record::SequenceCount;

#[derive(Default)]
pub struct Sequence {
    seen: RoaringTreemap,
    /// Records whose number was already seen (replayed into the ring, or forged).
    duplicates: u64,
}

impl Sequence {
    /// One record's number.
    pub fn note(&mut self, seq: u64) {
        if !self.seen.insert(seq) {
            self.duplicates += 1;
        }
    }

    /// Records received with a number below `numbered` (the kernel's counter, read after the
    /// last drain).
    pub fn received_below(&self, numbered: u64) -> u64 {
        if numbered == 0 {
            return 0;
        }
        self.seen.rank(numbered - 1)
    }

    /// The count at the end: `numbered` from the kernel's counter, `dropped` from its drop
    /// counters. A number at or beyond the counter cannot come from the kernel: a duplicate.
    pub fn count(&self, numbered: u64, dropped: u64) -> SequenceCount {
        let received = self.received_below(numbered);
        let beyond = self.seen.len() - received;
        SequenceCount {
            numbered,
            received,
            missing: numbered - received,
            dropped,
            duplicates: self.duplicates + beyond,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holes_duplicates_and_numbers_beyond_the_counter() {
        let mut s = Sequence::default();
        for n in [0, 2, 1, 5, 5, 4, 1 << 40] {
            s.note(n);
        }
        let c = s.count(7, 1);
        assert_eq!(c.received, 5, "0 1 2 4 5");
        assert_eq!(c.missing, 2, "3 and 6");
        assert_eq!(c.duplicates, 2, "5 twice, and 2^40 beyond the counter");
        assert_eq!(Sequence::default().count(0, 0).missing, 0);
    }
}
