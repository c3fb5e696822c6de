//! Repeated plain reads are counted in the kernel (map `READS`) and not sent: this collects
//! those counts for the file entries they belong to, when the reading process exits or the
//! capture ends. The totals reach the log, and so every session, as `file_count` records.
use std::collections::HashMap;

use sandbox_watch_common::ReadKey;

/// Past this many files read, a process's kernel-side read counts are collected at the end of
/// the capture rather than when it exits: one system call per file would slow the capture
/// while it is busy.
pub const EXIT_HARVEST: usize = 256;

#[derive(Default)]
pub struct ReadCounts {
    /// The kernel's keys of what each process (tgid, start) read, and their entries: 48 bytes
    /// a read, the only per-read memory past the fold.
    inodes: HashMap<(u32, u64), Vec<(ReadKey, usize)>>,
    /// Opens the kernel counted but did not send, by file entry.
    extra: HashMap<usize, u64>,
}

impl ReadCounts {
    /// A plain read the kernel counts under `key`, counted in `entry`.
    pub fn track(&mut self, key: ReadKey, entry: usize) {
        self.inodes
            .entry((key.tgid, key.start_ns))
            .or_default()
            .push((key, entry));
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

    /// The end of the capture: take what is left.
    pub fn collect_all(&mut self, mut take: impl FnMut(&ReadKey) -> u64) {
        let all: Vec<(u32, u64)> = self.inodes.keys().copied().collect();
        for (tgid, start) in all {
            self.harvest(tgid, start, &mut take);
        }
    }

    fn harvest(&mut self, tgid: u32, start_ns: u64, mut take: impl FnMut(&ReadKey) -> u64) {
        for (key, entry) in self.inodes.remove(&(tgid, start_ns)).unwrap_or_default() {
            let more = take(&key);
            if more > 0 {
                *self.extra.entry(entry).or_default() += more;
            }
        }
    }

    /// Further opens counted in the kernel for a file entry.
    pub fn extra(&self, entry: usize) -> u64 {
        self.extra.get(&entry).copied().unwrap_or(0)
    }
}
