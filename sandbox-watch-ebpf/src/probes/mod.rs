//! One file per hook family. Each names the kernel hook and the prototype it relies on.
mod attr;
mod conn;
mod files;
mod flow;
mod mounts;
mod net;
mod output;
mod process;
mod syscall;
mod tamper;
mod uring;
