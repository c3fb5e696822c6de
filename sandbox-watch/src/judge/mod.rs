pub mod classify;
pub mod dns;
pub mod netpolicy;
pub mod redact;
pub mod transcript;
