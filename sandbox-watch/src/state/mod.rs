pub mod files;
pub mod git;
pub mod network;
pub mod output;
pub mod packages;
pub mod processes;
pub mod session;
pub mod tool_calls;
