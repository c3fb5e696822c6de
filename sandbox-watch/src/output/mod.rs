pub mod evidence;
pub mod ocsf;
pub mod ocsf_out;
pub mod otlp;
pub mod report;
pub mod safe_file;
pub mod verify;
pub mod watch;
