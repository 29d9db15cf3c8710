//! Plain data across the boundary: as JSON text, one `JSON.parse` or `JSON.stringify` a value.

use js_sys::{Reflect, JSON};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

/// Plain data to a JS value, through JSON text: one `JSON.parse`. (JSON text is the one way
/// plain data crosses: serde-wasm-bindgen cost about 15 crossings a message field by field and
/// about 40 KB of .wasm, measured with bench/crossings.mjs and twiggy.)
pub fn to_js<T: serde::Serialize + ?Sized>(v: &T) -> JsValue {
    match serde_json::to_string(v) {
        Ok(s) => JSON::parse(&s).unwrap_or(JsValue::NULL),
        Err(_) => JsValue::NULL,
    }
}

/// A JS value to plain data, through one `JSON.stringify`; the error says what did not fit.
pub fn read_js<T: serde::de::DeserializeOwned>(v: &JsValue) -> Result<T, String> {
    let text = JSON::stringify(v).ok().and_then(|s| s.as_string()).ok_or("a value JSON cannot hold")?;
    read_json_text(&text)
}

/// JSON text that came from JavaScript as plain data. A string JS holds may have half a surrogate
/// pair (a UI cut it); that half is read as U+FFFD, as `TextEncoder` reads it, instead of failing
/// the whole value (retried only when a parse fails).
pub fn read_json_text<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, String> {
    match serde_json::from_str(text) {
        Ok(v) => Ok(v),
        Err(e) => match crate::engine::json::lone_surrogates_replaced(text) {
            Some(fixed) => serde_json::from_str(&fixed).map_err(|e| e.to_string()),
            None => Err(e.to_string()),
        },
    }
}

pub fn from_js<T: serde::de::DeserializeOwned>(v: &JsValue) -> Option<T> {
    read_js(v).ok()
}

/// `error.message` for an `Error`, with its class when it is a subclass (`TypeError: x is
/// undefined`); `String(value)` for anything else. Never throws, whatever was thrown: every
/// property is read through `Reflect.get` (a getter that throws, a revoked Proxy, a value JSON
/// cannot hold), so a hostile error is described, not rethrown through wasm.
pub fn error_text(e: &JsValue) -> String {
    let prop = |k: &str| Reflect::get(e, &JsValue::from_str(k)).ok().and_then(|v| v.as_string());
    if let Some(s) = e.as_string() {
        return s;
    }
    if e.is_instance_of::<js_sys::Error>() {
        let name = prop("name").unwrap_or_default();
        let message = prop("message").unwrap_or_else(|| "an error whose message could not be read".into());
        return if name.is_empty() || name == "Error" { message } else { format!("{name}: {message}") };
    }
    if e.is_symbol() {
        return "a symbol".into();
    }
    prop("message")
        .or_else(|| JSON::stringify(e).ok().and_then(|s| s.as_string()))
        .unwrap_or_else(|| "unknown error".into())
}
