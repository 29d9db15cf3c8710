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

/// `AbortSignal.any([a, b])`: a signal that aborts when either does, where the runtime has it
/// (Node 20.3+, workerd, current browsers); `None` elsewhere.
pub fn either_signal(a: &AbortSignal, b: &AbortSignal) -> Option<AbortSignal> {
    let class = js_sys::Reflect::get(&js_sys::global(), &"AbortSignal".into()).ok()?;
    let any = js_sys::Reflect::get(&class, &"any".into()).ok()?.dyn_into::<js_sys::Function>().ok()?;
    any.call1(&class, &js_sys::Array::of2(a, b)).ok().map(|s| s.unchecked_into())
}

/// A `DOMException` named `TimeoutError` (what `AbortSignal.timeout` aborts with), or an `Error`
/// of that name where the runtime has no `DOMException`.
pub fn timeout_error(message: &str) -> JsValue {
    let made = js_sys::Reflect::get(&js_sys::global(), &"DOMException".into())
        .ok()
        .and_then(|c| c.dyn_into::<js_sys::Function>().ok())
        .and_then(|c| {
            js_sys::Reflect::construct(&c, &js_sys::Array::of2(&message.into(), &"TimeoutError".into())).ok()
        });
    made.unwrap_or_else(|| {
        let e = js_sys::Error::new(message);
        e.set_name("TimeoutError");
        e.into()
    })
}

/// `Date.now()`.
pub fn date_now() -> f64 {
    js_sys::Date::now()
}
