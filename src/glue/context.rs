//! `ContextCore`: the state behind the JS `Context` (`engine::soul::context`), with the store's
//! sink and what it threw when a write failed.

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::Function;
use wasm_bindgen::prelude::*;

use super::convert::{read_js, to_js};
use super::error::type_error;
use crate::engine::message::Message;
use crate::engine::soul::context::{Context, ContextWrite, SharedContext};

/// The state behind the JS `Context`.
#[wasm_bindgen]
pub struct ContextCore {
    pub(crate) ctx: SharedContext,
    /// What the store threw when a write failed (thrown to whoever changed the context).
    pub(crate) store_error: Rc<RefCell<Option<JsValue>>>,
}

impl ContextCore {
    /// The context and where its store's error is kept, as a turn takes them.
    pub(crate) fn parts(&self) -> (SharedContext, Rc<RefCell<Option<JsValue>>>) {
        (self.ctx.clone(), self.store_error.clone())
    }
}

#[wasm_bindgen]
impl ContextCore {
    #[wasm_bindgen(constructor)]
    pub fn new() -> ContextCore {
        ContextCore { ctx: SharedContext::default(), store_error: Rc::default() }
    }

    /// Reads `context.jsonl` as kimi-cli does; each skipped line is told to `warn(message, {line, reason})`.
    #[wasm_bindgen(js_name = fromJSONL)]
    pub fn from_jsonl(text: &str, warn: Option<Function>) -> ContextCore {
        let (ctx, skipped) = Context::from_jsonl(text);
        if let Some(warn) = warn {
            for (line, reason) in skipped {
                let fields = js_sys::Object::new();
                let _ = js_sys::Reflect::set(&fields, &"line".into(), &JsValue::from(line as f64));
                let _ = js_sys::Reflect::set(&fields, &"reason".into(), &JsValue::from_str(&reason));
                let msg = format!("kosong-wasm: skipping context.jsonl line {line}: {reason}");
                let _ = warn.call2(&JsValue::UNDEFINED, &JsValue::from_str(&msg), &fields);
            }
        }
        ContextCore { ctx: SharedContext::new(ctx), store_error: Rc::default() }
    }

    /// `sink(line)` for each new line, `onRewrite(text)` after a revert or a clear.
    #[wasm_bindgen(js_name = setSink)]
    pub fn set_sink(&self, sink: Option<Function>, on_rewrite: Option<Function>) {
        if sink.is_none() && on_rewrite.is_none() {
            self.ctx.set_sink(None);
            return;
        }
        let store_error = self.store_error.clone();
        self.ctx.set_sink(Some(Box::new(move |w| {
            let (f, text) = match w {
                ContextWrite::Line(l) => (&sink, l),
                ContextWrite::Rewrite(t) => (&on_rewrite, t),
            };
            let Some(f) = f else {
                if let ContextWrite::Rewrite(_) = w {
                    // A store that can only append cannot take a rewrite: appending the new file
                    // after the old one would leave both in it. Refused, loudly.
                    store_error.borrow_mut().get_or_insert(
                        js_sys::Error::new(
                            "Context: the context was rewritten (a compaction, revertTo or clear) and its store has \
                             only a sink, which appends: give onRewrite(text) to replace the stored file",
                        )
                        .into(),
                    );
                    return false;
                }
                return true;
            };
            match f.call1(&JsValue::UNDEFINED, &JsValue::from_str(text)) {
                Ok(_) => true,
                Err(e) => {
                    store_error.borrow_mut().get_or_insert(e);
                    false
                }
            }
        })));
    }

    /// Throws what the store threw, if a write of the last change failed.
    fn stored(&self) -> Result<(), JsValue> {
        if self.ctx.take_store_failure() {
            return Err(self.store_error.borrow_mut().take().unwrap_or(JsValue::UNDEFINED));
        }
        Ok(())
    }

    pub fn history(&self) -> JsValue {
        self.ctx.read(|c| to_js(c.history()))
    }

    /// Changes on every write (a cached `history` is stale when it moved).
    #[wasm_bindgen(getter)]
    pub fn version(&self) -> f64 {
        self.ctx.version() as f64
    }

    #[wasm_bindgen(getter, js_name = tokenCount)]
    pub fn token_count(&self) -> f64 {
        self.ctx.read(|c| c.token_count()) as f64
    }

    #[wasm_bindgen(getter, js_name = nCheckpoints)]
    pub fn n_checkpoints(&self) -> f64 {
        self.ctx.read(|c| c.n_checkpoints()) as f64
    }

    #[wasm_bindgen(getter, js_name = systemPrompt)]
    pub fn system_prompt(&self) -> Option<String> {
        self.ctx.read(|c| c.system_prompt().map(str::to_owned))
    }

    #[wasm_bindgen(js_name = writeSystemPrompt)]
    pub fn write_system_prompt(&self, prompt: &str) -> Result<(), JsValue> {
        self.ctx.write_system_prompt(prompt);
        self.stored()
    }

    pub fn checkpoint(&self) -> Result<f64, JsValue> {
        let id = self.ctx.checkpoint() as f64;
        self.stored().map(|()| id)
    }

    /// Appends one message or an array of them.
    pub fn append(&self, messages: JsValue) -> Result<(), JsValue> {
        let list = if js_sys::Array::is_array(&messages) { messages } else { js_sys::Array::of1(&messages).into() };
        let parsed: Vec<Message> = read_js(&list).map_err(|e| type_error(&format!("invalid message: {e}")))?;
        self.ctx.append(parsed);
        self.stored()
    }

    #[wasm_bindgen(js_name = updateTokenCount)]
    pub fn update_token_count(&self, n: f64) -> Result<(), JsValue> {
        self.ctx.update_token_count(if n.is_finite() && n > 0.0 { n as u64 } else { 0 });
        self.stored()
    }

    #[wasm_bindgen(js_name = revertTo)]
    pub fn revert_to(&self, id: f64) -> Result<(), JsValue> {
        if !(id.is_finite() && id >= 0.0 && id.fract() == 0.0) {
            // The number as JavaScript prints it (and no float formatting in the .wasm).
            let shown = js_sys::Number::from(id).to_string_with_radix(10).map(String::from).unwrap_or_default();
            return Err(js_sys::RangeError::new(&format!("Checkpoint {shown} does not exist")).into());
        }
        self.ctx.revert_to(id as u64).map_err(|e| JsValue::from(js_sys::RangeError::new(&e)))?;
        self.stored()
    }

    pub fn clear(&self) -> Result<(), JsValue> {
        self.ctx.clear();
        self.stored()
    }

    #[wasm_bindgen(js_name = toJSONL)]
    pub fn to_jsonl(&self) -> String {
        self.ctx.read(|c| c.to_jsonl())
    }
}

impl Default for ContextCore {
    fn default() -> Self {
        Self::new()
    }
}
