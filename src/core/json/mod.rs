//! JSON beyond serde's derives: a completed call's arguments checked once (`arguments`), whether
//! streamed arguments have closed (`close`), the strict scanner the decoders' fast paths and
//! `accepts_json` use (`scan`), the field reader (`fields`).

pub mod arguments;
pub mod close;
pub mod fields;
pub mod scan;

pub use arguments::Arguments;
