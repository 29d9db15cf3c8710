//! JSON beyond serde's derives: a completed call's arguments checked once (`arguments`), whether
//! streamed arguments have closed (`close`).

pub mod arguments;
pub mod close;

pub use arguments::Arguments;
