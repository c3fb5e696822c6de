// Reads of kernel structs for the Rust BPF programs, compiled by clang with CO-RE relocations
// (`__builtin_preserve_access_index` through BPF_CORE_READ), so every field offset below is
// fixed up by the loader for the running kernel's BTF. Nothing here holds an offset taken from
// one kernel's headers: vmlinux.h is only the names and shapes the relocations refer to.
//
// Every function takes the kernel pointers as `void *` (values from bpf_get_current_task or a
// probe argument) and returns plain numbers, so the Rust side needs no copy of these structs.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

#define SW_INLINE __attribute__((always_inline))

// Keep these equal to sandbox-watch-common.
#define SW_PATH_MAX 4096
#define SW_NAME_MAX 256
#define SW_PATH_DEPTH 64
#define SW_TRUNCATED (1u << 31)

SW_INLINE u32 sw_task_tgid(void *task)
{
	return BPF_CORE_READ((struct task_struct *)task, tgid);
}

SW_INLINE u32 sw_task_ppid(void *task)
{
	return BPF_CORE_READ((struct task_struct *)task, real_parent, tgid);
}

// Start of the thread group leader on the boot clock: /proc/PID/stat's starttime in ns.
SW_INLINE u64 sw_task_start_ns(void *task)
{
	return BPF_CORE_READ((struct task_struct *)task, group_leader, start_boottime);
}

SW_INLINE u64 sw_task_own_start_ns(void *task)
{
	return BPF_CORE_READ((struct task_struct *)task, start_boottime);
}

SW_INLINE u32 sw_task_netns(void *task)
{
	return BPF_CORE_READ((struct task_struct *)task, nsproxy, net_ns, ns.inum);
}

SW_INLINE u32 sw_task_mntns(void *task)
{
	return BPF_CORE_READ((struct task_struct *)task, nsproxy, mnt_ns, ns.inum);
}

SW_INLINE u32 sw_task_pidns(void *task)
{
	return BPF_CORE_READ((struct task_struct *)task, nsproxy, pid_ns_for_children, ns.inum);
}

SW_INLINE u32 sw_task_userns(void *task)
{
	return BPF_CORE_READ((struct task_struct *)task, cred, user_ns, ns.inum);
}

SW_INLINE u32 sw_task_euid(void *task)
{
	return BPF_CORE_READ((struct task_struct *)task, cred, euid.val);
}

// Threads of the group still alive; 0 at the exit of the last one.
SW_INLINE int sw_task_live_threads(void *task)
{
	return BPF_CORE_READ((struct task_struct *)task, signal, live.counter);
}

SW_INLINE u32 sw_task_exit_code(void *task)
{
	return BPF_CORE_READ((struct task_struct *)task, exit_code);
}

SW_INLINE u64 sw_task_arg_start(void *task)
{
	return BPF_CORE_READ((struct task_struct *)task, mm, arg_start);
}

SW_INLINE u64 sw_task_arg_end(void *task)
{
	return BPF_CORE_READ((struct task_struct *)task, mm, arg_end);
}

// Walks from a dentry up to the root of its mount namespace, crossing mounts, and writes the
// names it passes leaf first, each ended by a NUL, into buf (which must hold SW_WALK_BUF
// bytes). Returns the bytes written, with SW_TRUNCATED set when the walk stopped before the
// root (too deep or too long).
//
// The write position lives in buf, not in a register: a position the verifier tracks exactly
// makes every iteration a new state (64 iterations of 2 branches do not verify); read back
// from memory it is a number the mask bounds, and the iterations' states prune.
#define SW_WALK_CURSOR (SW_PATH_MAX + SW_NAME_MAX)
static SW_INLINE u32 sw_walk(struct dentry *dentry, struct vfsmount *vfsmnt, u8 *buf)
{
	volatile u32 *cursor = (volatile u32 *)(buf + SW_WALK_CURSOR);
	struct mount *mnt = (void *)vfsmnt - bpf_core_field_offset(struct mount, mnt);
	*cursor = 0;
	for (int i = 0; i < SW_PATH_DEPTH; i++) {
		struct dentry *mnt_root = BPF_CORE_READ(vfsmnt, mnt_root);
		struct dentry *parent = BPF_CORE_READ(dentry, d_parent);
		if (dentry == mnt_root || dentry == parent) {
			struct mount *mnt_parent = BPF_CORE_READ(mnt, mnt_parent);
			if (dentry != mnt_root || mnt == mnt_parent)
				return *cursor;
			dentry = BPF_CORE_READ(mnt, mnt_mountpoint);
			mnt = mnt_parent;
			vfsmnt = (void *)mnt + bpf_core_field_offset(struct mount, mnt);
			continue;
		}
		u32 off = *cursor;
		if (off >= SW_PATH_MAX)
			return off | SW_TRUNCATED;
		const u8 *name = BPF_CORE_READ(dentry, d_name.name);
		long n = bpf_probe_read_kernel_str(buf + (off & (SW_PATH_MAX - 1)), SW_NAME_MAX, name);
		if (n <= 0)
			return off | SW_TRUNCATED;
		*cursor = off + n;
		dentry = parent;
	}
	return *cursor | SW_TRUNCATED;
}

SW_INLINE u32 sw_task_cwd(void *task, u8 *buf)
{
	struct fs_struct *fs = BPF_CORE_READ((struct task_struct *)task, fs);
	struct dentry *dentry = BPF_CORE_READ(fs, pwd.dentry);
	struct vfsmount *mnt = BPF_CORE_READ(fs, pwd.mnt);
	return sw_walk(dentry, mnt, buf);
}

SW_INLINE u32 sw_file_path(void *file, u8 *buf)
{
	struct dentry *dentry = BPF_CORE_READ((struct file *)file, f_path.dentry);
	struct vfsmount *mnt = BPF_CORE_READ((struct file *)file, f_path.mnt);
	return sw_walk(dentry, mnt, buf);
}

// The open file behind a descriptor of the task, or NULL.
SW_INLINE void *sw_task_fd_file(void *task, u32 fd)
{
	struct fdtable *fdt = BPF_CORE_READ((struct task_struct *)task, files, fdt);
	if (!fdt)
		return NULL;
	u32 max = BPF_CORE_READ(fdt, max_fds);
	if (fd >= max)
		return NULL;
	struct file **fds = BPF_CORE_READ(fdt, fd);
	struct file *file = NULL;
	bpf_core_read(&file, sizeof(file), &fds[fd]);
	return file;
}

SW_INLINE u64 sw_file_magic(void *file)
{
	return BPF_CORE_READ((struct file *)file, f_inode, i_sb, s_magic);
}

// The inode, read once for the fields an open needs on its fast path.
SW_INLINE void *sw_file_inode(void *file)
{
	return BPF_CORE_READ((struct file *)file, f_inode);
}

SW_INLINE u32 sw_inode_dev(void *inode)
{
	return BPF_CORE_READ((struct inode *)inode, i_sb, s_dev);
}

SW_INLINE u64 sw_inode_ino(void *inode)
{
	return BPF_CORE_READ((struct inode *)inode, i_ino);
}

SW_INLINE u32 sw_file_mode(void *file)
{
	return BPF_CORE_READ((struct file *)file, f_mode);
}

SW_INLINE const char *sw_bprm_filename(void *bprm)
{
	return BPF_CORE_READ((struct linux_binprm *)bprm, filename);
}

SW_INLINE u32 sw_file_flags(void *file)
{
	return BPF_CORE_READ((struct file *)file, f_flags);
}

// ---- sockets ----

// The socket behind an open file, or NULL when the file is not a socket.
SW_INLINE void *sw_file_sock(void *file)
{
	if (!file)
		return NULL;
	u16 mode = BPF_CORE_READ((struct file *)file, f_inode, i_mode);
	if ((mode & 0170000) != 0140000) // S_IFMT, S_IFSOCK
		return NULL;
	struct socket *sock = BPF_CORE_READ((struct file *)file, private_data);
	return BPF_CORE_READ(sock, sk);
}

SW_INLINE u32 sw_file_sock_type(void *file)
{
	struct socket *sock = BPF_CORE_READ((struct file *)file, private_data);
	return BPF_CORE_READ(sock, type);
}

SW_INLINE u32 sw_sk_protocol(void *sk)
{
	return BPF_CORE_READ((struct sock *)sk, sk_protocol);
}

SW_INLINE u32 sw_sk_family(void *sk)
{
	return BPF_CORE_READ((struct sock *)sk, __sk_common.skc_family);
}

SW_INLINE int sw_sk_err(void *sk)
{
	return BPF_CORE_READ((struct sock *)sk, sk_err);
}

// The network namespace of the socket itself (not of the task using it).
SW_INLINE u32 sw_sk_netns(void *sk)
{
	return BPF_CORE_READ((struct sock *)sk, __sk_common.skc_net.net, ns.inum);
}

// Local port in host order.
SW_INLINE u32 sw_sk_local_port(void *sk)
{
	return BPF_CORE_READ((struct sock *)sk, __sk_common.skc_num);
}

// Remote port in network order, as the kernel keeps it.
SW_INLINE u32 sw_sk_remote_port_be(void *sk)
{
	return BPF_CORE_READ((struct sock *)sk, __sk_common.skc_dport);
}

// Writes 16 bytes: the v4 address in the first 4 or the v6 address.
SW_INLINE void sw_sk_local_addr(void *sk, u8 *out)
{
	struct sock *s = sk;
	if (BPF_CORE_READ(s, __sk_common.skc_family) == 10) // AF_INET6
		bpf_core_read(out, 16, &s->__sk_common.skc_v6_rcv_saddr);
	else
		bpf_core_read(out, 4, &s->__sk_common.skc_rcv_saddr);
}

SW_INLINE void sw_sk_remote_addr(void *sk, u8 *out)
{
	struct sock *s = sk;
	if (BPF_CORE_READ(s, __sk_common.skc_family) == 10)
		bpf_core_read(out, 16, &s->__sk_common.skc_v6_daddr);
	else
		bpf_core_read(out, 4, &s->__sk_common.skc_daddr);
}

// The current syscall's first four arguments, from the user registers saved at its entry:
// they are still there at its exit (only the return value's register changes).
SW_INLINE void sw_syscall_args(u64 *args)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	args[0] = PT_REGS_PARM1_CORE_SYSCALL(regs);
	args[1] = PT_REGS_PARM2_CORE_SYSCALL(regs);
	args[2] = PT_REGS_PARM3_CORE_SYSCALL(regs);
	args[3] = PT_REGS_PARM4_CORE_SYSCALL(regs);
}

// The current syscall's first five arguments, from the saved user registers (as
// sw_syscall_args).
SW_INLINE void sw_syscall_args5(u64 *args)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	args[0] = PT_REGS_PARM1_CORE_SYSCALL(regs);
	args[1] = PT_REGS_PARM2_CORE_SYSCALL(regs);
	args[2] = PT_REGS_PARM3_CORE_SYSCALL(regs);
	args[3] = PT_REGS_PARM4_CORE_SYSCALL(regs);
	args[4] = PT_REGS_PARM5_CORE_SYSCALL(regs);
}

// The system call the current task is in (orig_ax; -1 in a page fault).
SW_INLINE long sw_current_syscall(void)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	return BPF_CORE_READ(regs, orig_ax);
}

// An io_uring worker thread (iou-wrk-*, PF_IO_WORKER): it runs the process's requests.
SW_INLINE u32 sw_current_io_worker(void)
{
	struct task_struct *t = bpf_get_current_task_btf();
	return (BPF_CORE_READ(t, flags) & 0x10) != 0;
}

SW_INLINE u32 sw_task_utsns(void *task)
{
	return BPF_CORE_READ((struct task_struct *)task, nsproxy, uts_ns, ns.inum);
}

// ---- inodes: identity, names, dirtying ----

SW_INLINE u32 sw_inode_mode(void *inode)
{
	return BPF_CORE_READ((struct inode *)inode, i_mode);
}

SW_INLINE u64 sw_inode_magic(void *inode)
{
	return BPF_CORE_READ((struct inode *)inode, i_sb, s_magic);
}

SW_INLINE u32 sw_inode_nlink(void *inode)
{
	return BPF_CORE_READ((struct inode *)inode, __i_nlink);
}

// An inode's generation: it changes when the filesystem reuses the inode number (ext4, xfs,
// btrfs, tmpfs set it at allocation), so (dev, ino, generation) names one file over time.
SW_INLINE u32 sw_inode_generation(void *inode)
{
	return BPF_CORE_READ((struct inode *)inode, i_generation);
}

SW_INLINE void *sw_dentry_inode(void *dentry)
{
	return BPF_CORE_READ((struct dentry *)dentry, d_inode);
}

// The inode's most recent name (i_dentry is an hlist through d_u.d_alias, newest first; like
// d_find_alias without its lock), or NULL when it has none (an O_TMPFILE, a deleted file
// whose last dentry is gone).
SW_INLINE void *sw_inode_alias(void *inode)
{
	struct hlist_node *first = BPF_CORE_READ((struct inode *)inode, i_dentry.first);
	if (!first)
		return NULL;
	return (void *)first - bpf_core_field_offset(struct dentry, d_u.d_alias);
}

// d_unhashed: a name deleted while the file stayed open.
SW_INLINE u32 sw_dentry_unhashed(void *dentry)
{
	return BPF_CORE_READ((struct dentry *)dentry, d_hash.pprev) == NULL;
}

// Names from a dentry up to its superblock's root: an inode has no vfsmount, so no mount is
// crossed and the path is relative to the filesystem's root. Written as sw_walk.
SW_INLINE u32 sw_dentry_walk(void *d, u8 *buf)
{
	struct dentry *dentry = d;
	volatile u32 *cursor = (volatile u32 *)(buf + SW_WALK_CURSOR);
	*cursor = 0;
	for (int i = 0; i < SW_PATH_DEPTH; i++) {
		struct dentry *parent = BPF_CORE_READ(dentry, d_parent);
		if (dentry == parent)
			return *cursor;
		u32 off = *cursor;
		if (off >= SW_PATH_MAX)
			return off | SW_TRUNCATED;
		const u8 *name = BPF_CORE_READ(dentry, d_name.name);
		long n = bpf_probe_read_kernel_str(buf + (off & (SW_PATH_MAX - 1)), SW_NAME_MAX, name);
		if (n <= 0)
			return off | SW_TRUNCATED;
		*cursor = off + n;
		dentry = parent;
	}
	return *cursor | SW_TRUNCATED;
}

// A dentry named within a `struct path` directory's mount (the security_path_* hooks: the
// directory and the dentry in it), walked as sw_walk: the full path in the mount namespace.
SW_INLINE u32 sw_dentry_in_path_walk(void *dentry, void *dir, u8 *buf)
{
	struct vfsmount *mnt = BPF_CORE_READ((struct path *)dir, mnt);
	return sw_walk(dentry, mnt, buf);
}

// A `struct path` walked as sw_walk.
SW_INLINE u32 sw_path_walk(void *path, u8 *buf)
{
	struct dentry *dentry = BPF_CORE_READ((struct path *)path, dentry);
	struct vfsmount *mnt = BPF_CORE_READ((struct path *)path, mnt);
	return sw_walk(dentry, mnt, buf);
}

SW_INLINE void *sw_path_inode(void *path)
{
	return BPF_CORE_READ((struct path *)path, dentry, d_inode);
}

// The inode of the directory a file was opened in (its dentry's parent).
SW_INLINE void *sw_file_parent_inode(void *file)
{
	return BPF_CORE_READ((struct file *)file, f_path.dentry, d_parent, d_inode);
}

// A number for the name an open used (not the inode): the dentry's name hash and length, its
// parent and the mount. Two paths to one inode (hard links, bind mounts) differ here; the
// same path opened again (or /proc/self/fd/N of it) does not.
SW_INLINE u64 sw_file_name_key(void *file)
{
	struct file *f = file;
	u64 hash_len = BPF_CORE_READ(f, f_path.dentry, d_name.hash_len);
	u64 parent = (u64)BPF_CORE_READ(f, f_path.dentry, d_parent);
	u64 mnt = (u64)BPF_CORE_READ(f, f_path.mnt);
	return hash_len ^ (parent * 0x9E3779B97F4A7C15ull) ^ (mnt << 17 | mnt >> 47);
}

// Timestamps: 6.11+ keep i_mtime_sec/i_mtime_nsec; 6.7-6.10 struct timespec64 __i_mtime;
// before, struct timespec64 i_mtime. CO-RE picks the one this kernel has.
struct inode___ts64 {
	struct timespec64 i_atime, i_mtime;
} __attribute__((preserve_access_index));
struct inode___ts64_ {
	struct timespec64 __i_atime, __i_mtime;
} __attribute__((preserve_access_index));

SW_INLINE u64 sw_inode_mtime_ns(void *p)
{
	struct inode *inode = p;
	if (bpf_core_field_exists(inode->i_mtime_sec))
		return BPF_CORE_READ(inode, i_mtime_sec) * 1000000000ull +
		       BPF_CORE_READ(inode, i_mtime_nsec);
	struct inode___ts64 *o = p;
	if (bpf_core_field_exists(o->i_mtime))
		return BPF_CORE_READ(o, i_mtime.tv_sec) * 1000000000ull +
		       BPF_CORE_READ(o, i_mtime.tv_nsec);
	struct inode___ts64_ *m = p;
	return BPF_CORE_READ(m, __i_mtime.tv_sec) * 1000000000ull +
	       BPF_CORE_READ(m, __i_mtime.tv_nsec);
}

SW_INLINE u64 sw_inode_atime_ns(void *p)
{
	struct inode *inode = p;
	if (bpf_core_field_exists(inode->i_atime_sec))
		return BPF_CORE_READ(inode, i_atime_sec) * 1000000000ull +
		       BPF_CORE_READ(inode, i_atime_nsec);
	struct inode___ts64 *o = p;
	if (bpf_core_field_exists(o->i_atime))
		return BPF_CORE_READ(o, i_atime.tv_sec) * 1000000000ull +
		       BPF_CORE_READ(o, i_atime.tv_nsec);
	struct inode___ts64_ *m = p;
	return BPF_CORE_READ(m, __i_atime.tv_sec) * 1000000000ull +
	       BPF_CORE_READ(m, __i_atime.tv_nsec);
}

// I_DIRTY_* bits of this kernel: enum inode_state_flags_t since the 6.12 renumbering
// (I_DIRTY_PAGES = 1 << 6), macros before it (I_DIRTY_SYNC 1, _DATASYNC 2, _PAGES 4,
// I_DIRTY_TIME 1 << 11). i_state itself is never read: its type differs between them.
SW_INLINE u32 sw_i_dirty_pages(void)
{
	if (bpf_core_enum_value_exists(enum inode_state_flags_t, I_DIRTY_PAGES))
		return bpf_core_enum_value(enum inode_state_flags_t, I_DIRTY_PAGES);
	return 1 << 2;
}

SW_INLINE u32 sw_i_dirty_inode(void)
{
	if (bpf_core_enum_value_exists(enum inode_state_flags_t, I_DIRTY_SYNC))
		return bpf_core_enum_value(enum inode_state_flags_t, I_DIRTY_SYNC) |
		       bpf_core_enum_value(enum inode_state_flags_t, I_DIRTY_DATASYNC) |
		       bpf_core_enum_value(enum inode_state_flags_t, I_DIRTY_TIME);
	return 1 | 2 | (1 << 11);
}

// ---- io_uring requests ----

// What an io_uring request's opcode prep copied into the kernel (struct filename) and kept in
// the request's command area: the directory fds, the flags or mode, and up to two names, each
// read into its own 256-byte slot of `names`. Returns 0 when the opcode is not one of them.
struct sw_uring_req {
	int dfd, dfd2;
	u32 flags, slot;
	u32 len_a, len_b; // bytes of each name with its NUL (0: none)
};

// 6.1's xattr context (6.13+ calls it kernel_xattr_ctx).
struct xattr_ctx___old {
	struct xattr_name *kname;
} __attribute__((preserve_access_index));
struct io_xattr___old {
	struct file *file;
	struct xattr_ctx___old ctx;
	struct filename *filename;
} __attribute__((preserve_access_index));

static SW_INLINE u32 sw_filename(struct filename *f, u8 *dst)
{
	const char *n = BPF_CORE_READ(f, name);
	long len = bpf_probe_read_kernel_str(dst, 256, n);
	if (len < 0) {
		dst[0] = 0;
		return 0;
	}
	return len;
}

SW_INLINE u32 sw_uring_names(void *req, u32 op, struct sw_uring_req *out, u8 *names)
{
	void *cmd = req + bpf_core_field_offset(struct io_kiocb, cmd);
	out->dfd = out->dfd2 = 0;
	out->flags = out->slot = 0;
	out->len_a = out->len_b = 0;
	names[0] = names[256] = 0;
	switch (op) {
	case 35: { // IORING_OP_RENAMEAT
		struct io_rename *r = cmd;
		out->dfd = BPF_CORE_READ(r, old_dfd);
		out->dfd2 = BPF_CORE_READ(r, new_dfd);
		out->flags = BPF_CORE_READ(r, flags);
		out->len_a = sw_filename(BPF_CORE_READ(r, oldpath), names);
		out->len_b = sw_filename(BPF_CORE_READ(r, newpath), names + 256);
		return 1;
	}
	case 38: // IORING_OP_SYMLINKAT (struct io_link too: oldpath is the target)
	case 39: { // IORING_OP_LINKAT
		struct io_link *l = cmd;
		out->dfd = BPF_CORE_READ(l, old_dfd);
		out->dfd2 = BPF_CORE_READ(l, new_dfd);
		out->flags = BPF_CORE_READ(l, flags);
		out->len_a = sw_filename(BPF_CORE_READ(l, oldpath), names);
		out->len_b = sw_filename(BPF_CORE_READ(l, newpath), names + 256);
		return 1;
	}
	case 36: { // IORING_OP_UNLINKAT
		struct io_unlink *u = cmd;
		out->dfd = BPF_CORE_READ(u, dfd);
		out->flags = BPF_CORE_READ(u, flags);
		out->len_a = sw_filename(BPF_CORE_READ(u, filename), names);
		return 1;
	}
	case 37: { // IORING_OP_MKDIRAT
		struct io_mkdir *m = cmd;
		out->dfd = BPF_CORE_READ(m, dfd);
		out->flags = BPF_CORE_READ(m, mode);
		out->len_a = sw_filename(BPF_CORE_READ(m, filename), names);
		return 1;
	}
	case 18: // IORING_OP_OPENAT
	case 28: { // IORING_OP_OPENAT2
		struct io_open *o = cmd;
		out->dfd = BPF_CORE_READ(o, dfd);
		out->flags = BPF_CORE_READ(o, how.flags);
		out->slot = BPF_CORE_READ(o, file_slot);
		out->len_a = sw_filename(BPF_CORE_READ(o, filename), names);
		return 1;
	}
	case 41: // IORING_OP_FSETXATTR
	case 42: { // IORING_OP_SETXATTR
		struct xattr_name *kname;
		struct filename *f;
		if (bpf_core_type_exists(struct kernel_xattr_ctx)) {
			struct io_xattr *x = cmd;
			kname = BPF_CORE_READ(x, ctx.kname);
			f = BPF_CORE_READ(x, filename);
		} else {
			struct io_xattr___old *x = cmd;
			kname = BPF_CORE_READ(x, ctx.kname);
			f = BPF_CORE_READ(x, filename);
		}
		if (op == 42) {
			out->dfd = -100; // AT_FDCWD: the path is relative to the cwd
			out->len_a = sw_filename(f, names);
		}
		long len = bpf_probe_read_kernel_str(names + 256, 256, kname->name);
		out->len_b = len > 0 ? len : 0;
		return 1;
	}
	}
	return 0;
}
