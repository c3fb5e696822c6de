pub mod classify;
pub mod dns;
pub mod escalation;
pub mod identity;
pub mod netpolicy;
pub mod redact;
pub mod tamper;
pub mod transcript;
