pub mod container;
pub mod target;
