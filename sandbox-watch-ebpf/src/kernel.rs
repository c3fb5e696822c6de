//! The C shim (`c/kernel.c`): kernel struct reads with CO-RE relocations. See that file.
use core::ffi::c_void;

pub type Ptr = *const c_void;

unsafe extern "C" {
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
    pub fn sw_bprm_filename(bprm: Ptr) -> *const u8;
    pub fn sw_file_path(file: Ptr, buf: *mut u8) -> u32;
    pub fn sw_file_magic(file: Ptr) -> u64;
    pub fn sw_file_mode(file: Ptr) -> u32;
    pub fn sw_file_inode(file: Ptr) -> Ptr;
    pub fn sw_inode_dev(inode: Ptr) -> u32;
    pub fn sw_inode_ino(inode: Ptr) -> u64;
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
    pub fn sw_syscall_args5(args: *mut u64);
    pub fn sw_current_syscall() -> i64;
    pub fn sw_current_io_worker() -> u32;
    pub fn sw_task_utsns(task: Ptr) -> u32;
    pub fn sw_inode_mode(inode: Ptr) -> u32;
    pub fn sw_inode_magic(inode: Ptr) -> u64;
    pub fn sw_inode_nlink(inode: Ptr) -> u32;
    pub fn sw_inode_generation(inode: Ptr) -> u32;
    pub fn sw_dentry_inode(dentry: Ptr) -> Ptr;
    pub fn sw_inode_alias(inode: Ptr) -> Ptr;
    pub fn sw_dentry_unhashed(dentry: Ptr) -> u32;
    pub fn sw_dentry_walk(dentry: Ptr, buf: *mut u8) -> u32;
    pub fn sw_dentry_in_path_walk(dentry: Ptr, dir: Ptr, buf: *mut u8) -> u32;
    pub fn sw_path_walk(path: Ptr, buf: *mut u8) -> u32;
    pub fn sw_path_inode(path: Ptr) -> Ptr;
    pub fn sw_file_parent_inode(file: Ptr) -> Ptr;
    pub fn sw_file_name_key(file: Ptr) -> u64;
    pub fn sw_inode_mtime_ns(inode: Ptr) -> u64;
    pub fn sw_inode_atime_ns(inode: Ptr) -> u64;
    pub fn sw_i_dirty_pages() -> u32;
    pub fn sw_i_dirty_inode() -> u32;
    pub fn sw_uring_names(req: Ptr, opcode: u32, out: *mut UringReq, names: *mut u8) -> u32;
}

/// `struct sw_uring_req` of the C shim: what an io_uring request's prep kept.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct UringReq {
    pub dfd: i32,
    pub dfd2: i32,
    pub flags: u32,
    pub slot: u32,
    pub len_a: u32,
    pub len_b: u32,
}

/// Set in the length a path walk returns when the path was cut.
pub const WALK_TRUNCATED: u32 = 1 << 31;
