pub mod container;
pub mod guard;
pub mod target;
