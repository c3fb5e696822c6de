pub mod backlog;
pub mod decode;
pub mod guard;
pub mod probe;
pub mod reads;
pub mod sequence;
