pub mod decode;
pub mod probe;
pub mod reads;
pub mod guard;
pub mod sequence;
