//! Glue for the soul runtime's pure parts: the context, compaction and the loop's rules.

use js_sys::Array;
use wasm_bindgen::prelude::*;

use crate::core::agent::{missing_capabilities, retry_wait_ms, tool_result_to_message, Backoff};
use crate::core::compaction;
use crate::core::context::Context;
use crate::core::message::Message;
use crate::core::toolset::ToolResult;

fn bad_input(what: &str, e: impl std::fmt::Display) -> JsValue {
    js_sys::TypeError::new(&format!("invalid {what}: {e}")).into()
}

fn lines(v: Vec<String>) -> Array {
    v.into_iter().map(|l| JsValue::from_str(&l)).collect()
}

/// The state behind the JS `Context`. Every change returns the `context.jsonl` lines to
/// hand to the sink.
#[wasm_bindgen]
pub struct ContextCore {
    inner: Context,
}

#[wasm_bindgen]
impl ContextCore {
    #[wasm_bindgen(constructor)]
    pub fn new() -> ContextCore {
        ContextCore { inner: Context::new() }
    }

    #[wasm_bindgen(js_name = fromJSONL)]
    pub fn from_jsonl(text: &str) -> Result<ContextCore, JsValue> {
        Context::from_jsonl(text).map(|inner| ContextCore { inner }).map_err(|e| js_sys::Error::new(&e).into())
    }

    #[wasm_bindgen(js_name = historyJson)]
    pub fn history_json(&self) -> String {
        serde_json::to_string(self.inner.history()).unwrap_or_else(|_| "[]".into())
    }

    #[wasm_bindgen(getter, js_name = tokenCount)]
    pub fn token_count(&self) -> f64 {
        self.inner.token_count() as f64
    }

    #[wasm_bindgen(getter, js_name = nCheckpoints)]
    pub fn n_checkpoints(&self) -> f64 {
        self.inner.n_checkpoints() as f64
    }

    #[wasm_bindgen(getter, js_name = systemPrompt)]
    pub fn system_prompt(&self) -> Option<String> {
        self.inner.system_prompt().map(str::to_owned)
    }

    #[wasm_bindgen(js_name = writeSystemPrompt)]
    pub fn write_system_prompt(&mut self, prompt: &str) -> String {
        self.inner.write_system_prompt(prompt)
    }

    /// `[id, line]`
    pub fn checkpoint(&mut self) -> Array {
        let (id, line) = self.inner.checkpoint();
        Array::of2(&JsValue::from(id as f64), &JsValue::from_str(&line))
    }

    /// Appends messages given as a JSON array; returns their lines.
    pub fn append(&mut self, messages_json: &str) -> Result<Array, JsValue> {
        let messages: Vec<Message> = serde_json::from_str(messages_json).map_err(|e| bad_input("message", e))?;
        Ok(lines(self.inner.append(messages)))
    }

    #[wasm_bindgen(js_name = updateTokenCount)]
    pub fn update_token_count(&mut self, n: f64) -> String {
        let n = if n.is_finite() && n > 0.0 { n as u64 } else { 0 };
        self.inner.update_token_count(n)
    }

    #[wasm_bindgen(js_name = revertTo)]
    pub fn revert_to(&mut self, id: f64) -> Result<(), JsValue> {
        if !(id.is_finite() && id >= 0.0 && id.fract() == 0.0) {
            return Err(js_sys::RangeError::new(&format!("Checkpoint {id} does not exist")).into());
        }
        self.inner.revert_to(id as u64).map_err(|e| js_sys::RangeError::new(&e).into())
    }

    pub fn clear(&mut self) {
        self.inner.clear();
    }

    #[wasm_bindgen(js_name = toJSONL)]
    pub fn to_jsonl(&self) -> String {
        self.inner.to_jsonl()
    }
}

impl Default for ContextCore {
    fn default() -> Self {
        Self::new()
    }
}

/// The tool message for a tool result (both JSON).
#[wasm_bindgen(js_name = toolResultToMessage)]
pub fn tool_result_to_message_json(result_json: &str) -> Result<String, JsValue> {
    let r: ToolResult = serde_json::from_str(result_json).map_err(|e| bad_input("tool result", e))?;
    serde_json::to_string(&tool_result_to_message(&r)).map_err(|e| bad_input("tool result", e))
}

/// Milliseconds to wait before retry `attempt` (from 1), or -1 when the error is not
/// retryable. `initial`, `max` and `jitter` (ms) shape the backoff; NaN means the default.
#[wasm_bindgen(js_name = retryWaitMs)]
#[allow(clippy::too_many_arguments)]
pub fn retry_wait(
    error_class: &str,
    status: Option<u16>,
    attempt: u32,
    retry_after_ms: Option<f64>,
    random: f64,
    initial: f64,
    max: f64,
    jitter: f64,
) -> f64 {
    if !crate::core::agent::is_retryable(error_class, status) {
        return -1.0;
    }
    let d = Backoff::default();
    let pick = |v: f64, default: f64| if v.is_finite() && v >= 0.0 { v } else { default };
    let b = Backoff {
        initial_ms: pick(initial, d.initial_ms),
        max_ms: pick(max, d.max_ms),
        jitter_ms: pick(jitter, d.jitter_ms),
    };
    retry_wait_ms(attempt, retry_after_ms, random, b)
}

#[wasm_bindgen(js_name = missingCapabilities)]
pub fn missing_capabilities_json(message_json: &str, capabilities: Vec<String>) -> Result<Vec<String>, JsValue> {
    let m: Message = serde_json::from_str(message_json).map_err(|e| bad_input("message", e))?;
    Ok(missing_capabilities(&m, &capabilities))
}

#[wasm_bindgen(js_name = shouldCompact)]
pub fn should_compact(token_count: f64, max_context_tokens: f64) -> bool {
    let clamp = |v: f64| if v.is_finite() && v > 0.0 { v as u64 } else { 0 };
    compaction::should_compact(clamp(token_count), clamp(max_context_tokens))
}

/// `[askJson, keptJson]`, or `undefined` when there is nothing to compact.
#[wasm_bindgen(js_name = compactionPrepare)]
pub fn compaction_prepare(history_json: &str) -> Result<Option<Array>, JsValue> {
    let h: Vec<Message> = serde_json::from_str(history_json).map_err(|e| bad_input("history", e))?;
    Ok(compaction::prepare(&h, compaction::DEFAULT_PRESERVED_MESSAGES).map(|(ask, kept)| {
        Array::of2(
            &JsValue::from_str(&serde_json::to_string(&ask).unwrap_or_default()),
            &JsValue::from_str(&serde_json::to_string(&kept).unwrap_or_default()),
        )
    }))
}

/// The compacted history (JSON) from the summary message and the kept messages.
#[wasm_bindgen(js_name = compactionBuild)]
pub fn compaction_build(summary_json: &str, kept_json: &str) -> Result<String, JsValue> {
    let summary: Message = serde_json::from_str(summary_json).map_err(|e| bad_input("message", e))?;
    let kept: Vec<Message> = serde_json::from_str(kept_json).map_err(|e| bad_input("history", e))?;
    serde_json::to_string(&compaction::build(&summary, kept)).map_err(|e| bad_input("history", e))
}

#[wasm_bindgen(js_name = compactionSystemPrompt)]
pub fn compaction_system_prompt() -> String {
    compaction::COMPACTION_SYSTEM_PROMPT.to_owned()
}

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
