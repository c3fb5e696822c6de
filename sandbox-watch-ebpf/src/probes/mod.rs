//! One file per hook family. Each names the kernel hook and the prototype it relies on.
mod attrs;
mod files;
mod inodes;
mod kpaths;
mod mounts;
mod names;
mod net;
mod paths;
mod process;
mod syscall;
mod uring;
