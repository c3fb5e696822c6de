//! Where fentry loads: the paths of path operations from the kernel's own dentries, after the
//! kernel resolved them, so no thread of the caller can change what is recorded.
//!
//! `fentry/security_path_{unlink,rmdir,mkdir,rename,link,symlink,chmod,chown,truncate}` run
//! inside the syscall (and inside io_uring's worker for its requests) with the directory's
//! `struct path` and the dentry. Each walks the full path (mounts crossed) into `KPATHS` by
//! pid_tgid with the inodes' `IDENTITY` flags; the syscall's exit takes it instead of the
//! names from the caller's memory. The syscall enter hooks clear what a previous operation
//! of the task left.
//!
//! Prototypes (include/linux/security.h, the same on 6.1 and 6.18):
//! `security_path_unlink(const struct path *dir, struct dentry *dentry)`,
//! `security_path_rmdir(const struct path *dir, struct dentry *dentry)`,
//! `security_path_mkdir(const struct path *dir, struct dentry *dentry, umode_t mode)`,
//! `security_path_rename(const struct path *old_dir, struct dentry *old_dentry,
//!  const struct path *new_dir, struct dentry *new_dentry, unsigned int flags)`,
//! `security_path_link(struct dentry *old_dentry, const struct path *new_dir,
//!  struct dentry *new_dentry)`,
//! `security_path_symlink(const struct path *dir, struct dentry *dentry, const char *old_name)`,
//! `security_path_chmod(const struct path *path, umode_t mode)`,
//! `security_path_chown(const struct path *path, kuid_t uid, kgid_t gid)`,
//! `security_path_truncate(const struct path *path)`.
use aya_ebpf::{
    helpers::generated::{bpf_get_current_pid_tgid, bpf_probe_read_kernel_str},
    macros::{fentry, map},
    maps::{HashMap, PerCpuArray},
    programs::FEntryContext,
};

use super::inodes::identity_of_inode;
use crate::{current_tgid, is_traced, kernel::*};

/// Bytes of one walked path in a `KPath` (a walk writes up to PATH_MAX + NAME_MAX, and its
/// cursor after that).
pub const SLOT: usize = 4608;

/// What operation a `KPath` is for: an exit takes only its own.
pub const TAG_UNLINK: u32 = 1;
pub const TAG_MKDIR: u32 = 2;
pub const TAG_RENAME: u32 = 3;
pub const TAG_LINK: u32 = 4;
pub const TAG_SYMLINK: u32 = 5;
pub const TAG_ATTR: u32 = 6;

#[repr(C)]
pub struct KPath {
    pub tag: u32,
    /// `IDENTITY` flags of the first path's inode (the file renamed, unlinked, linked, changed)
    /// and of the second's (a rename's target when it exists).
    pub identity: u32,
    pub identity_b: u32,
    pub dev: u32,
    pub ino: u64,
    pub generation: u32,
    /// Walk results (with `WALK_TRUNCATED`); 0 = none.
    pub len_a: u32,
    pub len_b: u32,
    pub _pad: u32,
    pub a: [u8; SLOT],
    pub b: [u8; SLOT],
}

#[map]
static KPATHS: HashMap<u64, KPath> = HashMap::with_max_entries(4096, 0);

#[map]
static KPATH_SCRATCH: PerCpuArray<KPath> = PerCpuArray::with_max_entries(1, 0);

/// At a syscall's entry: nothing from an earlier operation of this task applies to it.
#[inline(always)]
pub fn clear() {
    let _ = KPATHS.remove(unsafe { bpf_get_current_pid_tgid() });
}

/// At the exit: the kernel's paths for this operation, if a hook left them.
#[inline(always)]
pub fn take(tag: u32) -> Option<&'static KPath> {
    let k = unsafe { KPATHS.get(bpf_get_current_pid_tgid()) }?;
    if k.tag != tag {
        return None;
    }
    Some(k)
}

#[inline(always)]
fn start(tag: u32) -> Option<&'static mut KPath> {
    if !is_traced(current_tgid()) {
        return None;
    }
    let k = KPATH_SCRATCH.get_ptr_mut(0)?;
    let k = unsafe { &mut *k };
    k.tag = tag;
    k.identity = 0;
    k.identity_b = 0;
    k.dev = 0;
    k.ino = 0;
    k.generation = 0;
    k.len_a = 0;
    k.len_b = 0;
    Some(k)
}

#[inline(always)]
fn note_inode(k: &mut KPath, inode: Ptr) {
    if inode.is_null() {
        return;
    }
    k.dev = unsafe { sw_inode_dev(inode) };
    k.ino = unsafe { sw_inode_ino(inode) };
    k.generation = unsafe { sw_inode_generation(inode) };
    k.identity = identity_of_inode(inode);
}

#[inline(always)]
fn keep(k: &KPath) {
    let _ = KPATHS.insert(unsafe { bpf_get_current_pid_tgid() }, k, 0);
}

/// One dentry in a directory: the first path, and its inode.
#[inline(always)]
fn one(tag: u32, dir: Ptr, dentry: Ptr) -> u32 {
    let Some(k) = start(tag) else { return 0 };
    k.len_a = unsafe { sw_dentry_in_path_walk(dentry, dir, k.a.as_mut_ptr()) } | PRESENT;
    note_inode(k, unsafe { sw_dentry_inode(dentry) });
    keep(k);
    0
}

#[fentry(function = "security_path_unlink")]
pub fn security_path_unlink(ctx: FEntryContext) -> u32 {
    one(TAG_UNLINK, ctx.arg(0), ctx.arg(1))
}

#[fentry(function = "security_path_rmdir")]
pub fn security_path_rmdir(ctx: FEntryContext) -> u32 {
    one(TAG_UNLINK, ctx.arg(0), ctx.arg(1))
}

#[fentry(function = "security_path_mkdir")]
pub fn security_path_mkdir(ctx: FEntryContext) -> u32 {
    one(TAG_MKDIR, ctx.arg(0), ctx.arg(1))
}

#[fentry(function = "security_path_rename")]
pub fn security_path_rename(ctx: FEntryContext) -> u32 {
    let Some(k) = start(TAG_RENAME) else { return 0 };
    let (old_dir, old, new_dir, new): (Ptr, Ptr, Ptr, Ptr) =
        (ctx.arg(0), ctx.arg(1), ctx.arg(2), ctx.arg(3));
    k.len_a = unsafe { sw_dentry_in_path_walk(old, old_dir, k.a.as_mut_ptr()) } | PRESENT;
    k.len_b = unsafe { sw_dentry_in_path_walk(new, new_dir, k.b.as_mut_ptr()) } | PRESENT;
    note_inode(k, unsafe { sw_dentry_inode(old) });
    let target = unsafe { sw_dentry_inode(new) };
    if !target.is_null() {
        k.identity_b = identity_of_inode(target);
    }
    keep(k);
    0
}

#[fentry(function = "security_path_link")]
pub fn security_path_link(ctx: FEntryContext) -> u32 {
    let Some(k) = start(TAG_LINK) else { return 0 };
    let (old, new_dir, new): (Ptr, Ptr, Ptr) = (ctx.arg(0), ctx.arg(1), ctx.arg(2));
    // A hard link stays in its mount: the old dentry is walked in the new directory's.
    k.len_a = unsafe { sw_dentry_in_path_walk(old, new_dir, k.a.as_mut_ptr()) } | PRESENT;
    k.len_b = unsafe { sw_dentry_in_path_walk(new, new_dir, k.b.as_mut_ptr()) } | PRESENT;
    note_inode(k, unsafe { sw_dentry_inode(old) });
    keep(k);
    0
}

#[fentry(function = "security_path_symlink")]
pub fn security_path_symlink(ctx: FEntryContext) -> u32 {
    let Some(k) = start(TAG_SYMLINK) else {
        return 0;
    };
    let (dir, dentry, target): (Ptr, Ptr, Ptr) = (ctx.arg(0), ctx.arg(1), ctx.arg(2));
    // The target is a string (the kernel's copy), kept as given.
    let n = unsafe { bpf_probe_read_kernel_str(k.a.as_mut_ptr().cast(), 1024, target.cast()) };
    k.len_a = if n > 0 { n as u32 | PRESENT } else { 0 };
    k.len_b = unsafe { sw_dentry_in_path_walk(dentry, dir, k.b.as_mut_ptr()) } | PRESENT;
    keep(k);
    0
}

#[inline(always)]
fn attr(path: Ptr) -> u32 {
    let Some(k) = start(TAG_ATTR) else { return 0 };
    k.len_a = unsafe { sw_path_walk(path, k.a.as_mut_ptr()) } | PRESENT;
    note_inode(k, unsafe { sw_path_inode(path) });
    keep(k);
    0
}

#[fentry(function = "security_path_chmod")]
pub fn security_path_chmod(ctx: FEntryContext) -> u32 {
    attr(ctx.arg(0))
}

#[fentry(function = "security_path_chown")]
pub fn security_path_chown(ctx: FEntryContext) -> u32 {
    attr(ctx.arg(0))
}

#[fentry(function = "security_path_truncate")]
pub fn security_path_truncate(ctx: FEntryContext) -> u32 {
    attr(ctx.arg(0))
}

/// Bit set in `len_a`/`len_b` when the slot holds something (a walk of nothing returns 0).
pub const PRESENT: u32 = 1 << 30;
