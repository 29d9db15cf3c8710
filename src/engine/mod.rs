//! The pure core: no wasm-bindgen, js-sys or web-sys. Sans-IO and single-threaded: bytes and
//! plain values in, events and (`!Send`) futures out, on whatever executor the caller runs.

pub mod budget;
pub mod bytes;
pub mod error;
pub mod generate;
pub mod json;
pub mod message;
pub mod model;
pub mod output;
pub mod partial_json;
pub mod providers;
pub mod replay;
pub mod secrets;
pub mod session;
pub mod soul;
pub mod sse;
pub mod step;
pub mod surrogates;
pub mod toolset;
pub mod ui_stream;
