pub mod files;
pub mod network;
pub mod processes;
pub mod session;
pub mod tool_calls;
