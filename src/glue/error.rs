//! Errors on their way to JavaScript: one enum, one conversion to this package's classes.

use js_sys::{Function, Object, Reflect};
use wasm_bindgen::prelude::*;

use crate::engine::error::ChatProviderError;
use crate::engine::model::ModelError;

/// A provider error (made into its class at the end), with the JS error that caused it when there
/// was one (a failed `fetch`: kept as `cause`), or a JS value thrown by user code or a runtime,
/// passed through unchanged.
#[non_exhaustive]
pub enum GlueError {
    Provider(ChatProviderError),
    Caused(ChatProviderError, JsValue),
    /// The runtime's own error (a turn's `MaxStepsReached`, …): its class, the core's message
    /// and the class's fields.
    Runtime {
        class: &'static str,
        message: String,
        fields: Object,
    },
    Js(JsValue),
}

impl From<ChatProviderError> for GlueError {
    fn from(e: ChatProviderError) -> Self {
        GlueError::Provider(e)
    }
}

impl From<JsValue> for GlueError {
    fn from(v: JsValue) -> Self {
        GlueError::Js(v)
    }
}

impl ModelError for GlueError {
    fn provider_error(&self) -> Option<&ChatProviderError> {
        match self {
            GlueError::Provider(e) | GlueError::Caused(e, _) => Some(e),
            GlueError::Runtime { .. } | GlueError::Js(_) => None,
        }
    }
    fn redact(self, secrets: &crate::engine::secrets::Secrets) -> Self {
        match self {
            GlueError::Provider(e) => GlueError::Provider(e.redact(secrets)),
            GlueError::Caused(e, cause) => GlueError::Caused(e.redact(secrets), cause),
            other => other,
        }
    }
}

impl GlueError {
    /// The JS value: a provider error as its exported class (through the factory the JS layer
    /// installs), anything else as it is.
    pub fn into_js(self) -> JsValue {
        match self {
            GlueError::Provider(e) => provider_error_to_js(&e, None),
            GlueError::Caused(e, cause) => provider_error_to_js(&e, Some(&cause)),
            GlueError::Runtime { class, message, fields } => make(class, &message, &fields),
            GlueError::Js(v) => v,
        }
    }
}

pub fn type_error(msg: &str) -> JsValue {
    js_sys::TypeError::new(msg).into()
}

fn provider_error_to_js(e: &ChatProviderError, cause: Option<&JsValue>) -> JsValue {
    let fields = Object::new();
    let set = |k: &str, v: &JsValue| {
        let _ = Reflect::set(&fields, &JsValue::from_str(k), v);
    };
    set("kind", &JsValue::from_str(e.kind()));
    if let ChatProviderError::Status { status, request_id, retry_after_ms, .. } = e {
        set("status", &JsValue::from(*status));
        set("requestId", &request_id.as_deref().map(JsValue::from_str).unwrap_or(JsValue::NULL));
        set("retryAfterMs", &retry_after_ms.map(|ms| JsValue::from(ms as f64)).unwrap_or(JsValue::NULL));
    }
    if let ChatProviderError::MalformedOutput { text, .. } = e {
        set("text", &JsValue::from_str(text));
    }
    if let Some(c) = cause {
        set("cause", c);
    }
    make(e.class_name(), e.message(), &fields)
}

/// This package's error class `class` (the JS layer's factory, installed when the module is
/// loaded, before anything can fail), with `message` and `fields`.
fn make(class: &str, message: &str, fields: &Object) -> JsValue {
    let factory: Option<Function> = super::hook(|h| &h.error_factory);
    factory
        .and_then(|f| f.call3(&JsValue::UNDEFINED, &class.into(), &message.into(), fields).ok())
        .unwrap_or_else(|| js_sys::Error::new(message).into())
}
