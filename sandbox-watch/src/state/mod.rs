pub mod files;
pub mod mounts;
pub mod network;
pub mod processes;
