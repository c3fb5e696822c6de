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
#include <bpf/bpf_endian.h>

#define SW_INLINE __attribute__((always_inline))

// The atomic fetch-and-add behind the global sequence number (the counter is a Rust map's
// value: maps defined here are relocated to the wrong map). An atomic whose result is used
// needs the BPF v3 instruction set: this file is compiled with -mcpu=v3, the function is not
// inlined into the Rust callers, and the object is linked with +alu32 (build.rs).
__attribute__((noinline)) u64 sw_fetch_add(u64 *counter, u64 n)
{
	return __sync_fetch_and_add(counter, n);
}

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

// The inode behind a descriptor of the task, or NULL.
SW_INLINE void *sw_task_fd_inode(void *task, u32 fd)
{
	struct file *file = sw_task_fd_file(task, fd);
	return file ? BPF_CORE_READ(file, f_inode) : NULL;
}

// ---- the current task, through the typed pointer bpf_get_current_task_btf returns ----
// Its fields are direct loads (one instruction each, a fault reads as 0), where a
// BPF_CORE_READ on an untyped pointer is a helper call per field: the output probe runs these
// at every write of a traced task. A descriptor's file is still read with a helper (the fd
// array is a pointer to pointers, which the verifier does not type).

// As sw_task_start_ns, for the current task.
SW_INLINE u64 sw_current_start_ns(void)
{
	struct task_struct *t = bpf_get_current_task_btf();
	return t->group_leader->start_boottime;
}

// The file table's entry for `fd` of the current task (fd 1 and 2 too, in `std`), or NULL.
SW_INLINE struct file *sw_current_fd_file(u32 fd, struct file **std)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct fdtable *fdt = t->files->fdt;
	if (!fdt)
		return NULL;
	u32 max = fdt->max_fds;
	struct file **fds = fdt->fd;
	struct file *file = NULL;
	if (std && max > 2) {
		bpf_core_read(&std[0], sizeof(std[0]), &fds[1]);
		bpf_core_read(&std[1], sizeof(std[1]), &fds[2]);
	}
	if (fd >= max)
		return NULL;
	bpf_core_read(&file, sizeof(file), &fds[fd]);
	return file;
}

// The inode of the current task's `fd`, or NULL.
SW_INLINE void *sw_current_fd_inode(u32 fd)
{
	struct file *file = sw_current_fd_file(fd, NULL);
	return file ? BPF_CORE_READ(file, f_inode) : NULL;
}

// Which of the program's streams a write to `fd` went to, given the inodes its fd 1 and 2 had
// at its exec: the file written now is that stdout's (1) or that stderr's (2) inode, or
// neither (0). A shell's `printf x >&2` writes to fd 1 while fd 1 is a dup of fd 2: stderr.
// When stdout and stderr are one inode (2>&1), the fd number decides.
SW_INLINE u32 sw_current_stream_of(u32 fd, void *out, void *err)
{
	struct file *file = sw_current_fd_file(fd, NULL);
	void *inode = file ? BPF_CORE_READ(file, f_inode) : NULL;
	if (!inode)
		return 0;
	if (inode == out && inode == err)
		return fd == 2 ? 2 : 1;
	if (inode == out)
		return 1;
	if (inode == err)
		return 2;
	return 0;
}

// Which standard stream a write to `fd` went to: 1 or 2 when `fd` is 1 or 2; for another
// descriptor, 1 or 2 when its file is the same inode as fd 1's or fd 2's (a dup of it, or
// /dev/stdout opened again: the same pipe, terminal or file), from the task's file table; 0
// otherwise. Read at the write's exit: a racing thread of the task may have changed the table
// since the kernel wrote (a dup2 onto 1), and then the table's answer wins.
SW_INLINE u32 sw_current_std_stream(u32 fd)
{
	if (fd == 1 || fd == 2)
		return fd;
	struct file *std[2] = { NULL, NULL };
	struct file *file = sw_current_fd_file(fd, std);
	if (!file)
		return 0;
	struct inode *inode = BPF_CORE_READ(file, f_inode);
	if (std[0] && BPF_CORE_READ(std[0], f_inode) == inode)
		return 1;
	if (std[1] && BPF_CORE_READ(std[1], f_inode) == inode)
		return 2;
	return 0;
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

SW_INLINE u64 sw_inode_magic(void *inode)
{
	return BPF_CORE_READ((struct inode *)inode, i_sb, s_magic);
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

// The inode's type and permission bits (S_IFREG, …).
SW_INLINE u32 sw_inode_mode(void *inode)
{
	return BPF_CORE_READ((struct inode *)inode, i_mode);
}

// The path of an inode's first dentry (i_dentry, linked by d_u.d_alias) up to its
// filesystem's root, as sw_walk writes it; 0 when it has none (unlinked, or never looked up).
// No mount is known from an inode: sw_walk with none stops at the superblock's root, and the
// userspace puts the mount point in front.
SW_INLINE u32 sw_inode_path(void *inode, u8 *buf)
{
	struct hlist_node *first = BPF_CORE_READ((struct inode *)inode, i_dentry.first);
	if (!first)
		return 0;
	struct dentry *dentry = (void *)first - bpf_core_field_offset(struct dentry, d_u.d_alias);
	return sw_walk(dentry, NULL, buf);
}

// I_DIRTY_PAGES, the flag __mark_inode_dirty gets when a page of the file's data is dirtied
// (write(2), a store into a shared mapping, io_uring's writes): a #define until 6.11 (1 << 2),
// an enumerator of `inode_state_flags_t` (in BTF) since 6.12, where its value changed.
SW_INLINE u32 sw_dirty_pages_flag(void)
{
	if (bpf_core_enum_value_exists(enum inode_state_flags_t, I_DIRTY_PAGES))
		return bpf_core_enum_value(enum inode_state_flags_t, I_DIRTY_PAGES);
	return 1 << 2;
}

// I_DIRTY_SYNC | I_DIRTY_DATASYNC (a time or size change of the inode), as sw_dirty_pages_flag.
SW_INLINE u32 sw_dirty_inode_flags(void)
{
	if (bpf_core_enum_value_exists(enum inode_state_flags_t, I_DIRTY_SYNC))
		return bpf_core_enum_value(enum inode_state_flags_t, I_DIRTY_SYNC) |
		       bpf_core_enum_value(enum inode_state_flags_t, I_DIRTY_DATASYNC);
	return (1 << 0) | (1 << 1);
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
// they are still there at its exit (only the return value's register changes). The pointer
// bpf_task_pt_regs returns is typed, so these are direct loads (CO-RE relocated), not a helper
// call each.
SW_INLINE void sw_syscall_args(u64 *args)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	args[0] = PT_REGS_PARM1_SYSCALL(regs);
	args[1] = PT_REGS_PARM2_SYSCALL(regs);
	args[2] = PT_REGS_PARM3_SYSCALL(regs);
	args[3] = PT_REGS_PARM4_SYSCALL(regs);
}

// ---- the monitor's own objects (tamper records) ----

SW_INLINE u32 sw_task_pid(void *task)
{
	return BPF_CORE_READ((struct task_struct *)task, pid);
}

// pid->numbers[level]: `numbers` is a flexible array, which aya's CO-RE relocation refuses to
// index ("array index out of bounds"), so the element is reached by its offset and size.
SW_INLINE struct upid *sw_pid_upid(struct pid *pid, unsigned int level)
{
	return (void *)pid + bpf_core_field_offset(struct pid, numbers) +
	       (level & 31) * bpf_core_type_size(struct upid);
}

// The pid namespace the task itself lives in (not the one for its children).
SW_INLINE u32 sw_task_own_pidns(void *task)
{
	struct pid *pid = BPF_CORE_READ((struct task_struct *)task, thread_pid);
	unsigned int level = BPF_CORE_READ(pid, level);
	return BPF_CORE_READ(sw_pid_upid(pid, level), ns, ns.inum);
}

// The first 8 bytes of the file's dentry name (anon inodes: "bpf-map", "bpf-prog",
// "bpf_link", "[pidfd]") as a little-endian number.
static SW_INLINE u64 sw_file_name8(void *file)
{
	const unsigned char *name = BPF_CORE_READ((struct file *)file, f_path.dentry, d_name.name);
	u64 v = 0;
	bpf_probe_read_kernel(&v, 8, name);
	return v;
}

#define SW_OBJ_MAP 1
#define SW_OBJ_PROG 2
#define SW_OBJ_LINK 3

// Which BPF object (SW_OBJ_*) the task's descriptor is, with its id in *id; 0 if none.
SW_INLINE u32 sw_fd_bpf_object(void *task, u32 fd, u32 *id)
{
	void *file = sw_task_fd_file(task, fd);
	*id = 0;
	if (!file)
		return 0;
	u64 name = sw_file_name8(file);
	void *priv = BPF_CORE_READ((struct file *)file, private_data);
	// "bpf-map\0", "bpf-prog", "bpf_link" as little-endian u64.
	if (name == 0x0070616d2d667062ULL) {
		*id = BPF_CORE_READ((struct bpf_map *)priv, id);
		return SW_OBJ_MAP;
	}
	if (name == 0x676f72702d667062ULL) {
		*id = BPF_CORE_READ((struct bpf_prog *)priv, aux, id);
		return SW_OBJ_PROG;
	}
	if (name == 0x6b6e696c5f667062ULL) {
		*id = BPF_CORE_READ((struct bpf_link *)priv, id);
		return SW_OBJ_LINK;
	}
	return 0;
}

#define SW_ANON_INODE_FS_MAGIC 0x09041934
#define SW_PIDFS_MAGIC 0x50494446

// The pid (as the initial namespace numbers it) a pidfd of the task refers to; 0 if the
// descriptor is no pidfd. Up to 6.8 a pidfd is an anon inode with the struct pid in
// private_data; from 6.9 a pidfs inode (the struct pid in i_private from 6.11, private_data
// before).
SW_INLINE u32 sw_fd_pidfd_pid(void *task, u32 fd)
{
	void *file = sw_task_fd_file(task, fd);
	if (!file)
		return 0;
	u64 magic = sw_file_magic(file);
	struct pid *pid = NULL;
	if (magic == SW_PIDFS_MAGIC) {
		pid = BPF_CORE_READ((struct file *)file, f_inode, i_private);
		if (!pid)
			pid = BPF_CORE_READ((struct file *)file, private_data);
	} else if (magic == SW_ANON_INODE_FS_MAGIC && sw_file_name8(file) == 0x5d64666469705bULL) {
		pid = BPF_CORE_READ((struct file *)file, private_data);
	}
	if (!pid)
		return 0;
	return BPF_CORE_READ(sw_pid_upid(pid, 0), nr);
}

#define SW_PROC_SUPER_MAGIC 0x9fa0

// For a procfs file that belongs to a process (/proc/PID/..., /proc/PID/task/TID/..., on any
// procfs mount): that task's pid in the initial namespace. 0 otherwise.
SW_INLINE u32 sw_file_proc_pid(void *file)
{
	struct inode *inode = BPF_CORE_READ((struct file *)file, f_inode);
	struct proc_inode *pi = (void *)inode - bpf_core_field_offset(struct proc_inode, vfs_inode);
	struct pid *pid = BPF_CORE_READ(pi, pid);
	if (!pid)
		return 0;
	return BPF_CORE_READ(sw_pid_upid(pid, 0), nr);
}

// ---- network truth: sockets and packets (issue 14) ----

SW_INLINE u32 sw_sk_type(void *sk)
{
	return BPF_CORE_READ((struct sock *)sk, sk_type);
}

// The TCP byte counts of a connection: acknowledged by the peer (a FIN counts one), received.
SW_INLINE void sw_tcp_bytes(void *sk, u64 *out)
{
	out[0] = BPF_CORE_READ((struct tcp_sock *)sk, bytes_acked);
	out[1] = BPF_CORE_READ((struct tcp_sock *)sk, bytes_received);
}

// The device's name as the kernel holds it (`net_device.name`, IFNAMSIZ bytes).
SW_INLINE void sw_dev_name(void *dev, u8 *out)
{
	bpf_core_read_str(out, 16, &((struct net_device *)dev)->name);
}

// The vsock socket's own peer, as connect() stored it (`vsock_sock.remote_addr`, copied from
// the caller's sockaddr under the socket's lock before the transport was chosen). Local shapes
// with the kernel's names: vsock may be a module whose types are not in the build host's
// vmlinux.h; where the running kernel's BTF has no `vsock_sock` this returns -1 and the reads
// (relocated to nothing) are never reached.
struct sockaddr_vm___sw {
	unsigned int svm_port;
	unsigned int svm_cid;
} __attribute__((preserve_access_index));

struct vsock_sock___sw {
	struct sock sk;
	struct sockaddr_vm___sw remote_addr;
} __attribute__((preserve_access_index));

SW_INLINE int sw_vsock_remote(void *sk, u32 *cid, u32 *port)
{
	if (!bpf_core_type_exists(struct vsock_sock___sw))
		return -1;
	struct vsock_sock___sw *v = (void *)sk - bpf_core_field_offset(struct vsock_sock___sw, sk);
	*cid = BPF_CORE_READ(v, remote_addr.svm_cid);
	*port = BPF_CORE_READ(v, remote_addr.svm_port);
	return 0;
}

// What a packet's flow needs from the kernel's objects, for the tp_btf program on
// `net_dev_queue`. Its `skb` is a typed pointer (PTR_TO_BTF_ID): the field accesses below are
// plain loads, CO-RE relocated, that the verifier lets fault safely (BPF_PROBE_MEM) - no helper
// call each, as BPF_CORE_READ's bpf_probe_read_kernel would be. So this may only be called
// with a pointer the verifier knows as a `struct sk_buff`.
//
// Returns 0 for a packet that is not counted: no socket; a request or time-wait mini socket
// (whose fields past `sock_common` are something else: SYN-ACKs and ACKs sent in softirq carry
// them); a socket without a `struct file` (a kernel socket: the ICMP socket that sends
// port-unreachables and echo replies, TCP's control socket, tunnels); inet TCP (followed by
// its states); no device.
//
// `l3` is where the packet's network header starts. IP sockets: where the IP layer put it.
// Packet sockets: past the device's link header from `skb->data` (their network_header is the
// frame's start); `ethertype` is then the frame's own type when the link header is Ethernet's,
// else `skb->protocol`. `end` is where the packet's linear part ends (`skb_tail_pointer`):
// the bytes past it are in pages (a corked or GSO send).
struct sw_skb_flow {
	const u8 *l3;
	const u8 *end;
	void *sk;
	void *dev;
	u64 start_ns;
	u32 family;
	u32 sock_type;
	u32 ethertype;
	u32 netns;
	u32 ifindex;
	u32 len;
};

SW_INLINE int sw_skb_flow(struct sk_buff *skb, struct sw_skb_flow *out)
{
	struct sock *sk = skb->sk;
	if (!sk)
		return 0;
	u8 state = sk->__sk_common.skc_state;
	if (state == TCP_NEW_SYN_RECV || state == TCP_TIME_WAIT)
		return 0;
	struct socket *so = sk->sk_socket;
	if (!so || !so->file)
		return 0;
	u32 family = sk->__sk_common.skc_family;
	if ((family == 2 || family == 10) && sk->sk_protocol == IPPROTO_TCP) // AF_INET, AF_INET6
		return 0;
	struct net_device *dev = skb->dev;
	if (!dev)
		return 0;
	out->sk = sk;
	out->dev = dev;
	out->family = family;
	out->sock_type = sk->sk_type;
	out->ethertype = bpf_ntohs(skb->protocol);
	out->netns = dev->nd_net.net->ns.inum;
	out->ifindex = dev->ifindex;
	out->len = skb->len;
	out->start_ns = bpf_get_current_task_btf()->group_leader->start_boottime;
	if (family == 17) { // AF_PACKET
		const u8 *data = skb->data;
		u16 hlen = dev->hard_header_len;
		if (hlen == 14) {
			u16 type = 0;
			bpf_probe_read_kernel(&type, 2, data + 12);
			out->ethertype = bpf_ntohs(type);
		}
		out->l3 = data + hlen;
	} else {
		out->l3 = skb->head + skb->network_header;
	}
	out->end = skb->head + skb->tail;
	return 1;
}

// An io_uring worker or SQPOLL thread (PF_IO_WORKER): it runs requests, it made no syscall.
SW_INLINE u32 sw_task_io_worker(void *task)
{
	return BPF_CORE_READ((struct task_struct *)task, flags) & 0x10;
}

// The current task's system call: orig_ax of the user registers saved at its entry (x86-64).
SW_INLINE long sw_syscall_nr(void)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	return BPF_CORE_READ(regs, orig_ax);
}

// Adds one packet of `len` bytes to a flow's counts (`{packets, bytes}` in a map value), with
// atomic adds: other CPUs count the same flow (the BPF target's core has no atomic RMW).
SW_INLINE void sw_count_packet(u64 *counts, u64 len)
{
	__sync_fetch_and_add(&counts[0], 1);
	__sync_fetch_and_add(&counts[1], len);
}

// ---- io_uring requests (tp_btf/io_uring_submit_req, after the request's prep) ----

SW_INLINE u32 sw_uring_opcode(void *req)
{
	return BPF_CORE_READ((struct io_kiocb *)req, opcode);
}

// ---- io_uring completions (tp_btf/io_uring_complete: the request is its second argument on
// every kernel, `req->cqe.res` its result) ----

SW_INLINE s32 sw_uring_res(void *req)
{
	return BPF_CORE_READ((struct io_kiocb *)req, cqe.res);
}

// Where a completed OPENAT or OPENAT2 put its file (io_open in io_uring/openclose.c, in the
// request's command area): -1 into the descriptor table (`res` is the descriptor), else the
// index of the fixed-file slot: the one asked for (file_slot is it plus one; `res` is 0), or
// the one the ring chose (file_slot is IORING_FILE_INDEX_ALLOC; `res` is it).
SW_INLINE s64 sw_uring_open_slot(void *req, s32 res)
{
	struct io_open *o = (void *)((char *)req + bpf_core_field_offset(struct io_kiocb, cmd));
	u32 slot = BPF_CORE_READ(o, file_slot);
	if (slot == 0)
		return -1;
	// IORING_FILE_INDEX_ALLOC is ~0U; slots are below 1 << 20. Tested by its top bit: built
	// here, `slot == ~0U` came out false for ~0U (an immediate compare that is not 32-bit).
	if ((slot >> 31) & 1)
		return res;
	return slot - 1;
}

// The file in fixed-file slot `index` of the request's ring (io_slot_file: the slot's node's
// file_ptr without its flag bits), or NULL: the table of io_rsrc_node pointers of 6.13 and
// later only (6.1's table of io_fixed_file has no such node; fentry sees those opens there).
SW_INLINE void *sw_uring_slot_file(void *req, u32 index)
{
	if (!bpf_core_field_exists(struct io_rsrc_node, file_ptr))
		return NULL;
	struct io_ring_ctx *ctx = BPF_CORE_READ((struct io_kiocb *)req, ctx);
	if (index >= BPF_CORE_READ(ctx, file_table.data.nr))
		return NULL;
	struct io_rsrc_node **nodes = BPF_CORE_READ(ctx, file_table.data.nodes);
	struct io_rsrc_node *node = NULL;
	bpf_core_read(&node, sizeof(node), &nodes[index]);
	if (!node)
		return NULL;
	return (void *)(BPF_CORE_READ(node, file_ptr) & ~7UL);
}

// Keep these equal to the uapi's enum io_uring_op (and probes/uring.rs).
#define SW_IORING_OP_RENAMEAT 35
#define SW_IORING_OP_UNLINKAT 36
#define SW_IORING_OP_MKDIRAT 37
#define SW_IORING_OP_SYMLINKAT 38
#define SW_IORING_OP_LINKAT 39
#define SW_IORING_OP_FSETXATTR 41
#define SW_IORING_OP_SETXATTR 42

// The names of a RENAMEAT, UNLINKAT, MKDIRAT, SYMLINKAT or LINKAT request, as its prep copied
// them into the kernel (getname): out = { dfd, name, new dfd, new name } (names as kernel
// addresses, 0 when absent; for MKDIRAT, out[2] is the mode). The request's command data is the
// union at its start (`cmd`), which the opcode's struct overlays (struct io_rename, io_unlink,
// io_mkdir, io_link in io_uring/fs.c).
SW_INLINE void sw_uring_names(void *req, u32 op, u64 *out)
{
	void *cmd = (char *)req + bpf_core_field_offset(struct io_kiocb, cmd);
	struct filename *old = NULL, *new = NULL;
	if (op == SW_IORING_OP_RENAMEAT) {
		struct io_rename *r = cmd;
		out[0] = (u64)(s64)BPF_CORE_READ(r, old_dfd);
		out[2] = (u64)(s64)BPF_CORE_READ(r, new_dfd);
		old = BPF_CORE_READ(r, oldpath);
		new = BPF_CORE_READ(r, newpath);
	} else if (op == SW_IORING_OP_UNLINKAT) {
		struct io_unlink *u = cmd;
		out[0] = (u64)(s64)BPF_CORE_READ(u, dfd);
		old = BPF_CORE_READ(u, filename);
	} else if (op == SW_IORING_OP_MKDIRAT) {
		struct io_mkdir *m = cmd;
		out[0] = (u64)(s64)BPF_CORE_READ(m, dfd);
		out[2] = (u64)BPF_CORE_READ(m, mode);
		old = BPF_CORE_READ(m, filename);
	} else if (op == SW_IORING_OP_SYMLINKAT || op == SW_IORING_OP_LINKAT) {
		struct io_link *l = cmd;
		out[0] = (u64)(s64)BPF_CORE_READ(l, old_dfd);
		out[2] = (u64)(s64)BPF_CORE_READ(l, new_dfd);
		old = BPF_CORE_READ(l, oldpath);
		new = BPF_CORE_READ(l, newpath);
	}
	out[1] = old ? (u64)BPF_CORE_READ(old, name) : 0;
	out[3] = new ? (u64)BPF_CORE_READ(new, name) : 0;
}

// An FSETXATTR or SETXATTR request after its prep: out = { the descriptor (FSETXATTR; -1 for a
// fixed file, which is an index into the ring's table), the path's name (SETXATTR: the
// kernel's copy), the attribute's name (the kernel's copy, 256 bytes at most) }. Its context is
// `struct kernel_xattr_ctx` (`struct xattr_ctx` before 6.13: the field is found by its name).
SW_INLINE void sw_uring_xattr(void *req, u32 op, u64 *out)
{
	struct io_kiocb *r = req;
	struct io_xattr *x = (void *)((char *)req + bpf_core_field_offset(struct io_kiocb, cmd));
	out[0] = (u64)-1;
	out[1] = 0;
	if (op == SW_IORING_OP_FSETXATTR) {
		if (!(BPF_CORE_READ(r, flags) & (1ULL << 0)))
			out[0] = (u64)(s64)BPF_CORE_READ(r, cqe.fd);
	} else {
		struct filename *f = BPF_CORE_READ(x, filename);
		out[1] = f ? (u64)BPF_CORE_READ(f, name) : 0;
	}
	struct xattr_name *kname = BPF_CORE_READ(x, ctx.kname);
	out[2] = kname ? (u64)kname->name : 0;
}

// ---- mounts and namespaces (probes/mounts.rs) ----

// The current syscall's fifth argument (move_mount's flags), as sw_syscall_args reads the
// first four.
SW_INLINE u64 sw_syscall_arg4(void)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	return PT_REGS_PARM5_CORE_SYSCALL(regs);
}

// The task's namespaces (their inode numbers), in the order of sandbox-watch-common's
// `mount::NS_*`: mnt, net, pid (for its children), user, uts, ipc, cgroup, time (for its
// children). 0 for one the kernel has not (no nsproxy: an exiting task).
SW_INLINE void sw_task_namespaces(void *task, u32 *out)
{
	struct task_struct *t = task;
	struct nsproxy *ns = BPF_CORE_READ(t, nsproxy);
	if (!ns)
		return;
	out[0] = BPF_CORE_READ(ns, mnt_ns, ns.inum);
	out[1] = BPF_CORE_READ(ns, net_ns, ns.inum);
	out[2] = BPF_CORE_READ(ns, pid_ns_for_children, ns.inum);
	out[3] = BPF_CORE_READ(t, cred, user_ns, ns.inum);
	out[4] = BPF_CORE_READ(ns, uts_ns, ns.inum);
	out[5] = BPF_CORE_READ(ns, ipc_ns, ns.inum);
	out[6] = BPF_CORE_READ(ns, cgroup_ns, ns.inum);
	if (bpf_core_field_exists(ns->time_ns_for_children))
		out[7] = BPF_CORE_READ(ns, time_ns_for_children, ns.inum);
}

// The dentry of the task's root directory (fs->root): after chroot, where the kernel put it;
// after pivot_root, the new root.
SW_INLINE void *sw_task_root_dentry(void *task)
{
	return BPF_CORE_READ((struct task_struct *)task, fs, root.dentry);
}

SW_INLINE void *sw_file_dentry(void *file)
{
	return BPF_CORE_READ((struct file *)file, f_path.dentry);
}

SW_INLINE void *sw_dentry_inode(void *dentry)
{
	return BPF_CORE_READ((struct dentry *)dentry, d_inode);
}

// The path of a dentry up to its filesystem's root, as sw_inode_path writes it (no mount: the
// userspace finds where that filesystem is mounted). A root or a tree is named so because its
// walk in the mount namespace says little: a pivoted root, or a detached tree, is "/" there.
SW_INLINE u32 sw_dentry_fs_path(void *dentry, u8 *buf)
{
	return sw_walk(dentry, NULL, buf);
}

// The source name the kernel keeps for the mount a file is on (`mount->mnt_devname`: the
// device, or the name given to mount or fsconfig's "source"; a bind mount's is its original's).
SW_INLINE const char *sw_file_devname(void *file)
{
	struct vfsmount *vfsmnt = BPF_CORE_READ((struct file *)file, f_path.mnt);
	struct mount *mnt = (void *)vfsmnt - bpf_core_field_offset(struct mount, mnt);
	return BPF_CORE_READ(mnt, mnt_devname);
}

// The name of the filesystem type a file is on (`s_type->name`: "ext4", "tmpfs", …).
SW_INLINE const char *sw_file_fstype(void *file)
{
	return BPF_CORE_READ((struct file *)file, f_inode, i_sb, s_type, name);
}

#define SW_NSFS_MAGIC 0x6e736673

// The shapes of kernels before 6.18, where a namespace's type was in its operations (local
// names: the build host's vmlinux.h may not have the field).
struct proc_ns_operations___old {
	int type;
} __attribute__((preserve_access_index));

struct ns_common___old {
	const struct proc_ns_operations___old *ops;
} __attribute__((preserve_access_index));

// The CLONE_NEW* type of the namespace a descriptor of the task names (an nsfs file, as
// /proc/PID/ns/* opens), 0 when it is not one (a pidfd, or no such descriptor).
SW_INLINE u32 sw_fd_ns_type(void *task, u32 fd)
{
	void *file = sw_task_fd_file(task, fd);
	if (!file || sw_file_magic(file) != SW_NSFS_MAGIC)
		return 0;
	struct ns_common *ns = BPF_CORE_READ((struct file *)file, f_inode, i_private);
	if (!ns)
		return 0;
	// 6.18 keeps the type in the ns_common itself; before, its operations held it.
	if (bpf_core_field_exists(ns->ns_type))
		return BPF_CORE_READ(ns, ns_type);
	struct ns_common___old *old = (void *)ns;
	return BPF_CORE_READ(old, ops, type);
}
