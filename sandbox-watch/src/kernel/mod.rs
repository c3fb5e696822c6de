pub mod decode;
pub mod probe;
