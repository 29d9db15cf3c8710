//! kosong-wasm: kosong's `generate`/`step` and their providers, for browsers, Node and
//! Cloudflare Workers. `core` is pure Rust; `js` is the wasm-bindgen glue.

pub mod core;

#[cfg(target_arch = "wasm32")]
mod js;
