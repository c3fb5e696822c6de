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

SW_INLINE u32 sw_inode_generation(void *inode)
{
	return BPF_CORE_READ((struct inode *)inode, i_generation);
}

// The name an open used, without walking it: the dentry's name (hash and length), its parent
// dentry and the mount, mixed into one number. Two paths to one inode (hard links, bind
// mounts) differ in at least one of them; a reopen by the same name does not.
SW_INLINE u64 sw_file_name_key(void *file)
{
	struct file *f = file;
	u64 hash_len = BPF_CORE_READ(f, f_path.dentry, d_name.hash_len);
	u64 parent = (u64)BPF_CORE_READ(f, f_path.dentry, d_parent);
	u64 mnt = (u64)BPF_CORE_READ(f, f_path.mnt);
	return hash_len ^ (parent * 0x9E3779B97F4A7C15ull) ^ (mnt << 17 | mnt >> 47);
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
