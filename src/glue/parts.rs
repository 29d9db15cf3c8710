//! The callbacks a call is given: parts batched for the part hook (one crossing a batch), and
//! JSON callbacks (`onToolCall`, `onToolResult`) whose returned Promise the engine awaits.

use futures::FutureExt;
use js_sys::Function;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use super::error::GlueError;
use super::signals;
use crate::engine::error::ChatProviderError;
use crate::engine::generate::CallbackResult;
use crate::engine::message::StreamedMessagePart;

/// Calls a JS callback with a JSON argument; a returned Promise is awaited by the engine.
pub fn call_json_hook<T: serde::Serialize>(f: &Option<Function>, value: &T) -> CallbackResult<GlueError> {
    let Some(f) = f else { return Ok(None) };
    let json = serde_json::to_string(value).map_err(|e| ChatProviderError::Other(e.to_string()))?;
    let ret = f.call1(&JsValue::UNDEFINED, &JsValue::from_str(&json)).map_err(GlueError::Js)?;
    if super::is_thenable(&ret) {
        let fut = signals::Awaited::new(&ret);
        return Ok(Some(async move { fut.await.map(|_| ()).map_err(GlueError::Js) }.boxed_local()));
    }
    Ok(None)
}

#[wasm_bindgen]
extern "C" {
    /// The part hook as the JS layer makes it (`partHook` in step.js): `(text, meta)` delivers
    /// a batch of parts — `meta` holds `[kind, idLength, textLength]` for each, `text` each
    /// part's id then its text (lengths in UTF-16 units) — and returns a Promise only when a
    /// callback returned one. One crossing and one UTF-8 decode a batch, not a part.
    #[wasm_bindgen(extends = Function)]
    type PartHook;
    #[wasm_bindgen(method, catch, js_name = call)]
    fn deliver(
        this: &PartHook,
        this_arg: &JsValue,
        text: &str,
        // Owned, so JS gets a copy: a `&[u32]` arrives as a view into wasm memory, which a
        // memory growth during the callback (the callback calls into the package, or other
        // code allocates while an async callback waits) empties — the rest of the batch's parts
        // were skipped.
        meta: Vec<u32>,
    ) -> Result<Option<js_sys::Promise>, JsValue>;
}

/// A batch's part kinds (the JS layer's `partHook` takes these numbers from this file when the
/// package is built: `"@core:PART_TEXT@"`).
pub const PART_TEXT: u32 = 0;
pub const PART_THINK: u32 = 1;
/// An argument fragment, with its call's id.
pub const PART_ARGUMENTS: u32 = 2;
/// Any other part, as JSON.
pub const PART_JSON: u32 = 3;
/// Not a part: the answer's stream broke and it is read again after the sequence number its text
/// holds (the model call's telemetry span notes it).
pub const PART_RECONNECT: u32 = 4;

/// The parts of a step held for the part hook until the engine flushes them (before a tool is
/// handed on, and before it waits for more bytes), each with one of the kinds above.
pub struct PartBatch<'a> {
    hook: Option<&'a PartHook>,
    text: String,
    meta: Vec<u32>,
}

impl<'a> PartBatch<'a> {
    pub fn new(f: &'a Option<Function>) -> Self {
        PartBatch { hook: f.as_ref().map(|f| f.unchecked_ref()), text: String::new(), meta: Vec::new() }
    }

    fn push(&mut self, kind: u32, id: &str, text: &str) {
        let units = |s: &str| if s.is_ascii() { s.len() } else { s.encode_utf16().count() } as u32;
        self.meta.extend([kind, units(id), units(text)]);
        self.text.push_str(id);
        self.text.push_str(text);
    }
}

impl crate::engine::generate::PartSink<GlueError> for PartBatch<'_> {
    fn part(&mut self, part: &StreamedMessagePart) -> CallbackResult<GlueError> {
        use crate::engine::message::{ContentPart, ToolCallPart};
        if self.hook.is_none() {
            return Ok(None);
        }
        match part {
            StreamedMessagePart::Content(ContentPart::Text { text, extras: None }) => self.push(PART_TEXT, "", text),
            StreamedMessagePart::Content(ContentPart::Think { think, encrypted: None }) => {
                self.push(PART_THINK, "", think)
            }
            StreamedMessagePart::ToolCallPart(ToolCallPart { arguments_part: Some(a), tool_call_id: Some(id) }) => {
                self.push(PART_ARGUMENTS, id, a)
            }
            _ => {
                let json = serde_json::to_string(part).map_err(|e| ChatProviderError::Other(e.to_string()))?;
                self.push(PART_JSON, "", &json)
            }
        }
        Ok(None)
    }

    fn hears_each(&self) -> bool {
        self.hook.is_some()
    }

    fn heard(&mut self, news: crate::engine::generate::Heard<'_>) {
        if let (crate::engine::generate::Heard::Reconnected(after), Some(_)) = (news, self.hook) {
            self.push(PART_RECONNECT, "", &after.to_string());
        }
    }

    fn flush(&mut self) -> CallbackResult<GlueError> {
        let Some(hook) = self.hook else { return Ok(None) };
        if self.meta.is_empty() {
            return Ok(None);
        }
        let ret = hook.deliver(&JsValue::UNDEFINED, &self.text, std::mem::take(&mut self.meta));
        self.text.clear();
        Ok(ret.map_err(GlueError::Js)?.map(|p| {
            let fut = signals::Awaited::new(&p);
            async move { fut.await.map(|_| ()).map_err(GlueError::Js) }.boxed_local()
        }))
    }
}
