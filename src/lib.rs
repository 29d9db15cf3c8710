//! kosong-wasm: kosong's `generate`/`step` and their providers, for browsers, Node and
//! Cloudflare Workers. `engine` is the pure-Rust core; `glue` is the wasm-bindgen glue;
//! the package's JavaScript is in `js/` at the project's root.

pub mod engine;

#[cfg(target_arch = "wasm32")]
mod glue;
