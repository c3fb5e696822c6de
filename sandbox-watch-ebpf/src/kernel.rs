//! The C shim (`c/kernel.c`): kernel struct reads with CO-RE relocations. See that file.
use core::ffi::c_void;

pub type Ptr = *const c_void;

unsafe extern "C" {
    /// Atomically adds 1 to `*counter` and returns the value before (BPF v3 atomics).
    pub fn sw_fetch_add(counter: *mut u64, n: u64) -> u64;
    pub fn sw_task_tgid(task: Ptr) -> u32;
    pub fn sw_task_ppid(task: Ptr) -> u32;
    pub fn sw_task_start_ns(task: Ptr) -> u64;
    pub fn sw_task_own_start_ns(task: Ptr) -> u64;
    pub fn sw_task_netns(task: Ptr) -> u32;
    pub fn sw_task_mntns(task: Ptr) -> u32;
    pub fn sw_task_pidns(task: Ptr) -> u32;
    pub fn sw_task_userns(task: Ptr) -> u32;
    pub fn sw_task_euid(task: Ptr) -> u32;
    pub fn sw_task_live_threads(task: Ptr) -> i32;
    pub fn sw_task_exit_code(task: Ptr) -> u32;
    pub fn sw_task_arg_start(task: Ptr) -> u64;
    pub fn sw_task_arg_end(task: Ptr) -> u64;
    pub fn sw_task_cwd(task: Ptr, buf: *mut u8) -> u32;
    pub fn sw_task_fd_file(task: Ptr, fd: u32) -> Ptr;
    pub fn sw_task_fd_inode(task: Ptr, fd: u32) -> Ptr;
    pub fn sw_current_start_ns() -> u64;
    pub fn sw_current_fd_inode(fd: u32) -> Ptr;
    pub fn sw_current_stream_of(fd: u32, out: Ptr, err: Ptr) -> u32;
    pub fn sw_current_std_stream(fd: u32) -> u32;
    pub fn sw_bprm_filename(bprm: Ptr) -> *const u8;
    pub fn sw_file_path(file: Ptr, buf: *mut u8) -> u32;
    pub fn sw_file_magic(file: Ptr) -> u64;
    pub fn sw_file_mode(file: Ptr) -> u32;
    pub fn sw_file_inode(file: Ptr) -> Ptr;
    pub fn sw_inode_magic(inode: Ptr) -> u64;
    pub fn sw_inode_dev(inode: Ptr) -> u32;
    pub fn sw_inode_ino(inode: Ptr) -> u64;
    pub fn sw_inode_generation(inode: Ptr) -> u32;
    pub fn sw_inode_mode(inode: Ptr) -> u32;
    pub fn sw_inode_path(inode: Ptr, buf: *mut u8) -> u32;
    pub fn sw_dirty_pages_flag() -> u32;
    pub fn sw_dirty_inode_flags() -> u32;
    pub fn sw_file_name_key(file: Ptr) -> u64;
    pub fn sw_file_flags(file: Ptr) -> u32;
    pub fn sw_file_sock(file: Ptr) -> Ptr;
    pub fn sw_file_sock_type(file: Ptr) -> u32;
    pub fn sw_sk_protocol(sk: Ptr) -> u32;
    pub fn sw_sk_family(sk: Ptr) -> u32;
    pub fn sw_sk_err(sk: Ptr) -> i32;
    pub fn sw_sk_netns(sk: Ptr) -> u32;
    pub fn sw_sk_local_port(sk: Ptr) -> u32;
    pub fn sw_sk_remote_port_be(sk: Ptr) -> u32;
    pub fn sw_sk_local_addr(sk: Ptr, out: *mut u8);
    pub fn sw_sk_remote_addr(sk: Ptr, out: *mut u8);
    pub fn sw_syscall_args(args: *mut u64);
    pub fn sw_task_pid(task: Ptr) -> u32;
    pub fn sw_task_own_pidns(task: Ptr) -> u32;
    pub fn sw_fd_bpf_object(task: Ptr, fd: u32, id: *mut u32) -> u32;
    pub fn sw_fd_pidfd_pid(task: Ptr, fd: u32) -> u32;
    pub fn sw_file_proc_pid(file: Ptr) -> u32;
    pub fn sw_sk_type(sk: Ptr) -> u32;
    pub fn sw_tcp_bytes(sk: Ptr, out: *mut u64);
    /// Only with the typed `struct sk_buff *` of a tp_btf program (direct loads; see kernel.c).
    pub fn sw_skb_flow(skb: Ptr, out: *mut SkbFlow) -> i32;
    pub fn sw_dev_name(dev: Ptr, out: *mut u8);
    pub fn sw_vsock_remote(sk: Ptr, cid: *mut u32, port: *mut u32) -> i32;
    pub fn sw_task_io_worker(task: Ptr) -> u32;
    pub fn sw_syscall_nr() -> i64;
    pub fn sw_uring_opcode(req: Ptr) -> u32;
    pub fn sw_uring_res(req: Ptr) -> i32;
    pub fn sw_uring_open_slot(req: Ptr, res: i32) -> i64;
    pub fn sw_uring_slot_file(req: Ptr, index: u32) -> Ptr;
    pub fn sw_uring_names(req: Ptr, op: u32, out: *mut u64);
    pub fn sw_uring_xattr(req: Ptr, op: u32, out: *mut u64);
    pub fn sw_count_packet(counts: *mut u64, len: u64);
    pub fn sw_syscall_arg4() -> u64;
    pub fn sw_task_namespaces(task: Ptr, out: *mut u32);
    pub fn sw_task_root_dentry(task: Ptr) -> Ptr;
    pub fn sw_file_dentry(file: Ptr) -> Ptr;
    pub fn sw_dentry_inode(dentry: Ptr) -> Ptr;
    pub fn sw_dentry_fs_path(dentry: Ptr, buf: *mut u8) -> u32;
    pub fn sw_file_devname(file: Ptr) -> *const u8;
    pub fn sw_file_fstype(file: Ptr) -> *const u8;
    pub fn sw_fd_ns_type(task: Ptr, fd: u32) -> u32;
}

/// `struct sw_skb_flow` of kernel.c: what a packet's flow needs (filled by `sw_skb_flow`).
#[repr(C)]
pub struct SkbFlow {
    pub l3: *const u8,
    pub end: *const u8,
    pub sk: Ptr,
    pub dev: Ptr,
    pub start_ns: u64,
    pub family: u32,
    pub sock_type: u32,
    pub ethertype: u32,
    pub netns: u32,
    pub ifindex: u32,
    pub len: u32,
}

/// `s_magic` of procfs.
pub const PROC_SUPER_MAGIC: u64 = 0x9fa0;

/// Set in the length a path walk returns when the path was cut.
pub const WALK_TRUNCATED: u32 = 1 << 31;
