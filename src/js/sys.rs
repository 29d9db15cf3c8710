//! Raw bindings to the few web APIs the glue uses, bound to globals directly (never through
//! `window`, which Node and Workers lack). Kept apart from the idiomatic layer above it.

use js_sys::{Function, Promise};
use wasm_bindgen::prelude::*;

#[wasm_bindgen]
extern "C" {
    pub type AbortController;
    #[wasm_bindgen(constructor)]
    pub fn new() -> AbortController;
    #[wasm_bindgen(method, getter)]
    pub fn signal(this: &AbortController) -> AbortSignal;
    #[wasm_bindgen(method)]
    pub fn abort(this: &AbortController, reason: &JsValue);

    #[derive(Clone)]
    pub type AbortSignal;
    #[wasm_bindgen(method, getter)]
    pub fn aborted(this: &AbortSignal) -> bool;
    #[wasm_bindgen(method, getter)]
    pub fn reason(this: &AbortSignal) -> JsValue;
    #[wasm_bindgen(method, js_name = addEventListener)]
    pub fn add_event_listener(this: &AbortSignal, kind: &str, f: &Function);
    #[wasm_bindgen(method, js_name = removeEventListener)]
    pub fn remove_event_listener(this: &AbortSignal, kind: &str, f: &Function);

    pub type Response;
    #[wasm_bindgen(method, getter)]
    pub fn status(this: &Response) -> u16;
    #[wasm_bindgen(method, getter)]
    pub fn headers(this: &Response) -> Headers;
    #[wasm_bindgen(method, getter)]
    pub fn body(this: &Response) -> Option<ReadableStream>;
    #[wasm_bindgen(method)]
    pub fn text(this: &Response) -> Promise;

    pub type Headers;
    #[wasm_bindgen(method)]
    pub fn get(this: &Headers, name: &str) -> Option<String>;

    pub type ReadableStream;
    #[wasm_bindgen(method, js_name = getReader)]
    pub fn get_reader(this: &ReadableStream) -> Reader;

    pub type Reader;
    #[wasm_bindgen(method)]
    pub fn read(this: &Reader) -> Promise;
    #[wasm_bindgen(method)]
    pub fn cancel(this: &Reader) -> Promise;

    pub type ReadResult;
    #[wasm_bindgen(method, getter)]
    pub fn done(this: &ReadResult) -> bool;
    #[wasm_bindgen(method, getter)]
    pub fn value(this: &ReadResult) -> JsValue;

    #[wasm_bindgen(js_name = setTimeout)]
    pub fn set_timeout(f: &Function, ms: f64) -> JsValue;
    #[wasm_bindgen(js_name = clearTimeout)]
    pub fn clear_timeout(id: &JsValue);

    #[wasm_bindgen(js_namespace = Date, js_name = now)]
    pub fn date_now() -> f64;

    #[wasm_bindgen(js_namespace = crypto, js_name = randomUUID)]
    pub fn random_uuid() -> String;
}
