//! JSON beyond serde's derives: a completed call's arguments checked once (`arguments`), whether
//! streamed arguments have closed (`close`), the strict scanner the decoders' fast paths and
//! `accepts_json` use (`scan`), the field reader (`fields`).

pub mod arguments;
pub mod close;
pub mod fields;
pub mod scan;

pub use arguments::Arguments;

/// True when `text` is one JSON value: the scanner's answer, and serde_json's where the scanner
/// cannot tell.
pub fn is_json(text: &str) -> bool {
    scan::accepts_json(text) || serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
}
