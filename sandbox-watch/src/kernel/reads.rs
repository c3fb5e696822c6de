//! Repeated plain reads are counted in the kernel (map `READS`) and not sent: this collects
//! those counts for the file entries they belong to, when the reading process exits or the
//! capture ends. The totals reach the log, and so every session, as `file_count` records.
use std::collections::{HashMap, HashSet};

use sandbox_watch_common::ReadKey;

/// Past this many files read, a process's kernel-side read counts are collected at the end of
/// the capture rather than when it exits: one system call per file would slow the capture
/// while it is busy.
pub const EXIT_HARVEST: usize = 256;

#[derive(Default)]
pub struct ReadCounts {
    /// What each process (tgid, start) read, and their entries: 32 bytes a read, only for the
    /// reads the kernel counts (at most `READS`'s 32,768 entries at once: a full map counts
    /// nothing, and such reads are not kept here).
    inodes: HashMap<(u32, u64), Vec<Tracked>>,
    /// Opens the kernel counted but did not send, by file entry.
    extra: HashMap<usize, u64>,
    /// Entries whose count is final and already logged (see [`ReadCounts::settle`]).
    settled: HashSet<usize>,
}

/// A read's key without the process (the map's key has it) and its file entry.
#[derive(Clone, Copy)]
struct Tracked {
    ino: u64,
    name_key: u64,
    dev: u32,
    generation: u32,
    entry: u32,
}

impl Tracked {
    fn key(&self, tgid: u32, start_ns: u64) -> ReadKey {
        ReadKey {
            tgid,
            dev: self.dev,
            ino: self.ino,
            start_ns,
            generation: self.generation,
            _pad: 0,
            name_key: self.name_key,
        }
    }
}

impl ReadCounts {
    /// A plain read the kernel counts under `key`, counted in `entry`.
    pub fn track(&mut self, key: ReadKey, entry: usize) {
        // File entries are bounded by the fold (a few tens of thousands), far below u32::MAX.
        let Ok(entry) = u32::try_from(entry) else {
            return;
        };
        self.inodes
            .entry((key.tgid, key.start_ns))
            .or_default()
            .push(Tracked {
                ino: key.ino,
                name_key: key.name_key,
                dev: key.dev,
                generation: key.generation,
                entry,
            });
    }

    /// The process exited: take what the kernel counted for it, unless it read many files.
    pub fn exited(&mut self, tgid: u32, start_ns: u64, take: impl FnMut(&ReadKey) -> u64) {
        let few = self
            .inodes
            .get(&(tgid, start_ns))
            .is_some_and(|v| v.len() <= EXIT_HARVEST);
        if few {
            self.harvest(tgid, start_ns, take);
        }
    }

    /// A new process got `tgid`: take what the kernel counted for the processes that had it
    /// before (all ended).
    pub fn pid_reused(&mut self, tgid: u32, mut take: impl FnMut(&ReadKey) -> u64) {
        let before: Vec<(u32, u64)> = self
            .inodes
            .keys()
            .filter(|k| k.0 == tgid)
            .copied()
            .collect();
        for (tgid, start) in before {
            self.harvest(tgid, start, &mut take);
        }
    }

    /// The entry's count is final and logged now: the further opens counted for it, taken out,
    /// so that the end neither adds them again nor logs the entry's count a second time.
    pub fn settle(&mut self, entry: usize) -> u64 {
        self.settled.insert(entry);
        self.extra.remove(&entry).unwrap_or(0)
    }

    pub fn settled(&self, entry: usize) -> bool {
        self.settled.contains(&entry)
    }

    /// The end of the capture: take what is left.
    pub fn collect_all(&mut self, mut take: impl FnMut(&ReadKey) -> u64) {
        let all: Vec<(u32, u64)> = self.inodes.keys().copied().collect();
        for (tgid, start) in all {
            self.harvest(tgid, start, &mut take);
        }
    }

    fn harvest(&mut self, tgid: u32, start_ns: u64, mut take: impl FnMut(&ReadKey) -> u64) {
        for t in self.inodes.remove(&(tgid, start_ns)).unwrap_or_default() {
            let more = take(&t.key(tgid, start_ns));
            if more > 0 {
                *self.extra.entry(t.entry as usize).or_default() += more;
            }
        }
    }

    /// Further opens counted in the kernel for a file entry.
    pub fn extra(&self, entry: usize) -> u64 {
        self.extra.get(&entry).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(tgid: u32, ino: u64) -> ReadKey {
        ReadKey {
            tgid,
            dev: 7,
            ino,
            start_ns: 1000 + u64::from(tgid),
            generation: 3,
            _pad: 0,
            name_key: ino * 31,
        }
    }

    #[test]
    fn the_kernel_is_asked_with_the_key_it_counted_under() {
        let mut r = ReadCounts::default();
        r.track(key(1, 10), 0);
        r.track(key(1, 11), 1);
        r.track(key(2, 10), 2);
        let mut asked = Vec::new();
        r.exited(1, 1001, |k| {
            asked.push(*k);
            u64::from(k.ino == 11) * 4
        });
        assert_eq!(asked, vec![key(1, 10), key(1, 11)]);
        assert_eq!((r.extra(0), r.extra(1), r.extra(2)), (0, 4, 0));
        // The other process is collected at the end, once.
        let mut asked = Vec::new();
        r.collect_all(|k| {
            asked.push(*k);
            2
        });
        assert_eq!(asked, vec![key(2, 10)]);
        assert_eq!(r.extra(2), 2);
        r.collect_all(|_| panic!("collected twice"));
    }

    #[test]
    fn a_process_that_read_many_files_is_collected_at_the_end() {
        let mut r = ReadCounts::default();
        for ino in 0..=EXIT_HARVEST as u64 {
            r.track(key(5, ino), ino as usize);
        }
        r.exited(5, 1005, |_| panic!("collected at exit"));
        let mut n = 0;
        r.collect_all(|_| {
            n += 1;
            1
        });
        assert_eq!(n, EXIT_HARVEST + 1);
    }

    #[test]
    fn a_reused_pid_settles_the_counts_of_the_processes_that_had_it() {
        let mut r = ReadCounts::default();
        // Pid 5 read many files (collected at the end, not at its exit), pid 6 one.
        for ino in 0..=EXIT_HARVEST as u64 {
            r.track(key(5, ino), ino as usize);
        }
        r.track(key(6, 1), 1000);
        r.pid_reused(5, |k| u64::from(k.ino == 3) * 2);
        assert_eq!(r.extra(3), 2);
        assert!(!r.settled(3));
        assert_eq!(r.settle(3), 2);
        assert!(r.settled(3) && r.extra(3) == 0, "taken out once");
        // The end collects only the others.
        let mut asked = Vec::new();
        r.collect_all(|k| {
            asked.push(k.tgid);
            0
        });
        assert_eq!(asked, vec![6]);
    }

    #[test]
    fn a_read_costs_32_bytes() {
        assert_eq!(std::mem::size_of::<Tracked>(), 32);
    }
}
