//! Names a path syscall was given, read at its entry and again at its exit.
//!
//! The kernel copies a name from the caller's memory once, somewhere between the two; a thread
//! of the caller can rewrite it around that copy (rename a decoy to ~/.bashrc, record a rename
//! to the decoy). Without a kernel hook that holds the kernel's own copy (fentry, see
//! `kpaths.rs`), two reads are what there is: where they differ the record says so
//! (`NAME_RACED`, the entry-time names in its tail) and the report calls it tamper. Equal reads
//! do not prove the kernel used that name (a thread can flip it twice): they are evidence, and
//! a process that raced once is not to be trusted on any name.
//!
//! A name that cannot be read at entry (its page not resident yet: the read may not fault) is
//! not compared (`NAME_UNCHECKED`).
use aya_ebpf::{
    helpers::generated::{bpf_get_current_pid_tgid, bpf_probe_read_user_str},
    macros::map,
    maps::{HashMap, PerCpuArray},
};
use sandbox_watch_common::{NAME_RACED, NEW_NAME_RACED, RACED_NAME_MAX};

use crate::{current_tgid, is_traced};

/// In a record's flags: a name could not be read at the syscall's entry, so it was not
/// compared with the one read at its exit.
pub const NAME_UNCHECKED: u32 = 1 << 7;

/// A path syscall's arguments and its names as read at entry, by pid_tgid.
#[repr(C)]
pub struct Entry {
    pub dirfd: i64,
    pub name: u64,
    pub new_dirfd: i64,
    pub new_name: u64,
    /// Bytes read at entry (with the NUL), or 0 when the name could not be read (or none).
    pub len_a: i64,
    pub len_b: i64,
    pub a: [u8; RACED_NAME_MAX],
    pub b: [u8; RACED_NAME_MAX],
}

#[map]
static ENTRY: HashMap<u64, Entry> = HashMap::with_max_entries(16384, 0);

/// Where an `Entry` is assembled (560 bytes: more than a copy on the BPF stack allows).
#[map]
static ENTRY_SCRATCH: PerCpuArray<Entry> = PerCpuArray::with_max_entries(1, 0);

/// A buffer to read a name again into at the exit.
#[repr(C)]
pub struct NameBuf {
    pub bytes: [u8; RACED_NAME_MAX],
}

#[map]
static EXIT_NAME: PerCpuArray<NameBuf> = PerCpuArray::with_max_entries(1, 0);

const WORDS: usize = RACED_NAME_MAX / 8;

#[inline(always)]
fn zero(buf: *mut u8) {
    let words = buf.cast::<u64>();
    for i in 0..WORDS {
        unsafe { *words.add(i) = 0 };
    }
}

/// Reads a user name into a zeroed slot; the bytes read (0 when unreadable or none).
#[inline(always)]
fn read_name(dst: *mut u8, ptr: u64) -> i64 {
    zero(dst);
    if ptr == 0 {
        return 0;
    }
    let n = unsafe { bpf_probe_read_user_str(dst.cast(), RACED_NAME_MAX as u32, ptr as *const _) };
    if n < 0 { 0 } else { n }
}

/// At a traced task's syscall entry: keeps the arguments and copies of the names.
#[inline(always)]
pub fn remember(dirfd: i64, name: u64, new_dirfd: i64, new_name: u64) {
    if !is_traced(current_tgid()) {
        return;
    }
    super::kpaths::clear();
    let Some(e) = ENTRY_SCRATCH.get_ptr_mut(0) else {
        return;
    };
    let e = unsafe { &mut *e };
    e.dirfd = dirfd;
    e.name = name;
    e.new_dirfd = new_dirfd;
    e.new_name = new_name;
    e.len_a = read_name(e.a.as_mut_ptr(), name);
    e.len_b = read_name(e.b.as_mut_ptr(), new_name);
    let _ = ENTRY.insert(unsafe { bpf_get_current_pid_tgid() }, &*e, 0);
}

/// At the exit: what the entry kept for this task (it stays until `forget`).
#[inline(always)]
pub fn taken() -> Option<&'static Entry> {
    unsafe { ENTRY.get(bpf_get_current_pid_tgid()) }
}

#[inline(always)]
pub fn forget() {
    let _ = ENTRY.remove(unsafe { bpf_get_current_pid_tgid() });
}

/// Compares a name read at entry with the same argument read now: `raced` when they differ,
/// `NAME_UNCHECKED` when there was nothing to compare.
#[inline(always)]
fn compare(kept: &[u8; RACED_NAME_MAX], kept_len: i64, ptr: u64, raced: u32) -> u32 {
    if ptr == 0 {
        return 0;
    }
    if kept_len == 0 {
        return NAME_UNCHECKED;
    }
    let Some(now) = EXIT_NAME.get_ptr_mut(0) else {
        return 0;
    };
    let now = unsafe { &mut *now };
    if read_name(now.bytes.as_mut_ptr(), ptr) == 0 {
        // Unreadable now, readable before: the caller unmapped or protected it in between.
        return raced;
    }
    let a = kept.as_ptr().cast::<u64>();
    let b = now.bytes.as_ptr().cast::<u64>();
    let mut differ = 0u64;
    for i in 0..WORDS {
        differ |= unsafe { *a.add(i) ^ *b.add(i) };
    }
    if differ != 0 { raced } else { 0 }
}

/// The race flags of both names of the entry (`NAME_RACED`, `NEW_NAME_RACED`,
/// `NAME_UNCHECKED`).
#[inline(always)]
pub fn races(e: &Entry) -> u32 {
    compare(&e.a, e.len_a, e.name, NAME_RACED) | compare(&e.b, e.len_b, e.new_name, NEW_NAME_RACED)
}
