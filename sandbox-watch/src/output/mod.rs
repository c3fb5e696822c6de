pub mod evidence;
pub mod ocsf;
pub mod ocsf_out;
pub mod otlp;
pub mod report;
pub mod verify;
