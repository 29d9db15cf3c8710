//! Glue for `PartialJson` (argument previews) and for `ChaosProvider`'s scripts as streams.

use wasm_bindgen::prelude::*;

/// The state behind the JS `PartialJson`.
#[wasm_bindgen]
pub struct PartialJsonCore {
    inner: crate::engine::partial_json::PartialJson,
    /// The path of the last edit handed out, when it was an append (see `feed`).
    last_append: Option<Vec<crate::engine::partial_json::PathSeg>>,
}

#[wasm_bindgen]
impl PartialJsonCore {
    #[wasm_bindgen(constructor)]
    pub fn new() -> PartialJsonCore {
        PartialJsonCore { inner: crate::engine::partial_json::PartialJson::new(), last_append: None }
    }

    /// The edits the piece makes to the preview: JSON (`[…]`), or — the frequent case of a
    /// string still streaming — `+text`: one append to the path of the last edit handed out,
    /// which was an append too (no JSON made here or parsed in JS).
    pub fn feed(&mut self, piece: &str) -> String {
        use crate::engine::partial_json::Edit;
        let edits = self.inner.feed(piece);
        // `+text`: the one edit appends `text` where the last append went, and the string is
        // still open (the JS layer then appends plain pieces itself; see preview.js).
        if let [Edit::Append { path, text }] = edits.as_slice() {
            if self.last_append.as_ref() == Some(path) && self.inner.in_plain_string() {
                let mut out = String::with_capacity(text.len() + 1);
                out.push('+');
                out.push_str(text);
                return out;
            }
        }
        match edits.last() {
            Some(Edit::Append { path, .. }) => self.last_append = Some(path.clone()),
            Some(Edit::Set { .. }) => self.last_append = None,
            None => return "[]".into(),
        }
        serde_json::to_string(&edits).unwrap_or_else(|_| "[]".into())
    }

    #[wasm_bindgen(getter)]
    pub fn done(&self) -> bool {
        self.inner.done()
    }

    #[wasm_bindgen(getter)]
    pub fn failed(&self) -> bool {
        self.inner.failed()
    }

    #[wasm_bindgen(getter, js_name = depthLimited)]
    pub fn depth_limited(&self) -> bool {
        self.inner.depth_limited()
    }
}

impl Default for PartialJsonCore {
    fn default() -> Self {
        Self::new()
    }
}

/// An echo-DSL script as the OpenAI Chat Completions stream `ChaosProvider` serves it as (see
/// `EchoScript::to_chat_sse`). Errors are the DSL's own messages.
#[wasm_bindgen(js_name = echoScriptSse)]
pub fn echo_script_sse(script: &str) -> Result<String, JsValue> {
    let s = crate::engine::providers::echo::parse_echo_script(script).map_err(|e| js_sys::Error::new(e.message()))?;
    Ok(s.to_chat_sse())
}
