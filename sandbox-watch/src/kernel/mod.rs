pub mod decode;
pub mod probe;
pub mod reads;
