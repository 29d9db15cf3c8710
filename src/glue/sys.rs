//! The browser objects the glue uses: typed `web-sys` bindings (fetch's `RequestInit`,
//! `Response`, `Headers`, the body's `ReadableStreamDefaultReader`, `AbortController`,
//! `AbortSignal`), bound to globals directly — never through `window`, which Node and Workers
//! lack. The one raw binding left is `crypto.randomUUID`, which web-sys reaches only through a
//! `Window` or a `WorkerGlobalScope`.

use wasm_bindgen::prelude::*;

pub use web_sys::{
    AbortController, AbortSignal, Headers, ReadableStreamDefaultReader as Reader, RequestInit, Response,
};

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = crypto, js_name = randomUUID)]
    pub fn random_uuid() -> String;
}

/// A new `AbortController` (every runtime this package supports has one; a runtime without it
/// gets the constructor's error back, never a thrown or crashed call).
pub fn abort_controller() -> Result<AbortController, JsValue> {
    AbortController::new()
}

/// `Date.now()`.
pub fn date_now() -> f64 {
    js_sys::Date::now()
}
