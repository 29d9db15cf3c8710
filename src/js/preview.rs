//! Glue for `PartialJson` (argument previews) and for `ChaosProvider`'s script reading.

use wasm_bindgen::prelude::*;

/// The state behind the JS `PartialJson`.
#[wasm_bindgen]
pub struct PartialJsonCore {
    inner: crate::core::partial_json::PartialJson,
}

#[wasm_bindgen]
impl PartialJsonCore {
    #[wasm_bindgen(constructor)]
    pub fn new() -> PartialJsonCore {
        PartialJsonCore { inner: crate::core::partial_json::PartialJson::new() }
    }

    /// The edits (JSON) that the piece makes to the preview.
    pub fn feed(&mut self, piece: &str) -> String {
        let edits = self.inner.feed(piece);
        if edits.is_empty() {
            return "[]".into();
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

/// An echo-DSL script as `{parts, id, usage}` (JSON), for `ChaosProvider` to stream it
/// through a real fetch path. Errors are the DSL's own messages.
#[wasm_bindgen(js_name = parseEchoScript)]
pub fn parse_echo_script_json(script: &str) -> Result<String, JsValue> {
    let s = crate::core::providers::echo::parse_echo_script(script).map_err(|e| js_sys::Error::new(e.message()))?;
    Ok(serde_json::json!({ "parts": s.parts, "id": s.id, "usage": s.usage }).to_string())
}
