//! `SimpleToolsetCore`: the registry and the results of the JS `SimpleToolset` (its handlers
//! stay in JavaScript), and how a handler's return value is read.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::{Rc, Weak};

use js_sys::{Array, Reflect};
use wasm_bindgen::prelude::*;

use super::convert::{error_text, from_js, to_js};
use crate::engine::message::{ContentPart, ToolCall};
use crate::engine::toolset::{settle, Prepared, SimpleToolset, ToolFailure, ToolOutput, ToolReturnValue, ToolsetError};

/// The registry of a `SimpleToolset`, shared with the engine (see [`registry`]).
pub type Registry = Rc<RefCell<SimpleToolset<()>>>;

/// What a handler returned, as kosong reads it: a string or parts are a success with that
/// output, `undefined` an empty success, a `ToolReturnValue` is kept, the rest is an error.
pub(crate) fn normalize_return(v: &JsValue) -> Result<ToolReturnValue, ToolFailure> {
    if let Some(s) = v.as_string() {
        return Ok(ToolReturnValue::ok(ToolOutput::Text(s), "", ""));
    }
    if v.is_undefined() || v.is_null() {
        return Ok(ToolReturnValue::ok(ToolOutput::Text(String::new()), "", ""));
    }
    let invalid = |what: &str| {
        Ok(ToolReturnValue::error(
            &format!(
                "Invalid return type: {what}; a tool returns a string, an array of content parts or a ToolReturnValue (toolOk/toolError)"
            ),
            "Invalid return type",
            ToolOutput::Text(String::new()),
        ))
    };
    if Array::is_array(v) {
        return match from_js::<Vec<ContentPart>>(v) {
            Some(parts) => Ok(ToolReturnValue::ok(ToolOutput::Parts(parts), "", "")),
            None => invalid("an array that is not content parts"),
        };
    }
    if v.is_object() && Reflect::get(v, &"is_error".into()).map(|b| b.as_bool().is_some()).unwrap_or(false) {
        return match from_js::<ToolReturnValue>(v) {
            Some(r) => Ok(r),
            None => invalid("a malformed ToolReturnValue"),
        };
    }
    invalid(&v.js_typeof().as_string().unwrap_or_default())
}

thread_local! {
    /// The registries of the live `SimpleToolsetCore`s, by id: how the engine finds the one a
    /// call's toolset owns without holding the JS object.
    static REGISTRIES: RefCell<HashMap<u32, Weak<RefCell<SimpleToolset<()>>>>> = RefCell::default();
    static NEXT_ID: Cell<u32> = const { Cell::new(1) };
}

pub(crate) fn registry(id: u32) -> Option<Registry> {
    REGISTRIES.with(|r| r.borrow().get(&id).and_then(Weak::upgrade))
}

fn toolset_error(e: ToolsetError) -> JsValue {
    match e {
        ToolsetError::Invalid(m) => js_sys::TypeError::new(&m).into(),
        e => js_sys::Error::new(e.message()).into(),
    }
}

/// The core of the JS `SimpleToolset`: its registry (names, definitions, which tools are eager)
/// and kosong's rules and results. The handlers stay on the JS side: holding JS functions here
/// would keep the toolset alive through the instance, beyond the garbage collector's sight.
#[wasm_bindgen]
pub struct SimpleToolsetCore {
    id: u32,
    inner: Registry,
}

#[wasm_bindgen]
impl SimpleToolsetCore {
    #[wasm_bindgen(constructor)]
    pub fn new() -> SimpleToolsetCore {
        let id = NEXT_ID.with(|n| {
            let id = n.get();
            n.set(id.wrapping_add(1).max(1));
            id
        });
        let inner: Registry = Rc::default();
        REGISTRIES.with(|r| r.borrow_mut().insert(id, Rc::downgrade(&inner)));
        SimpleToolsetCore { id, inner }
    }

    /// What the engine is told to find this registry by.
    #[wasm_bindgen(getter)]
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Adds a tool (`parameters`: its schema as JSON text, or none); throws kosong-wasm's
    /// `TypeError` for a name the providers refuse, a name taken, or parameters that are not an
    /// object schema.
    pub fn add(&self, name: &str, description: String, parameters: Option<String>, eager: bool) -> Result<(), JsValue> {
        let parameters = match parameters {
            Some(text) => Some(serde_json::from_str(&text).map_err(|e| js_sys::TypeError::new(&e.to_string()))?),
            None => None,
        };
        self.inner.borrow_mut().add(name, description, parameters, eager, ()).map_err(toolset_error)
    }

    pub fn remove(&self, name: &str) -> Result<(), JsValue> {
        self.inner.borrow_mut().remove(name).map_err(toolset_error)
    }

    /// Declares a tool idempotent: a recovered turn runs it again for a call its runtime died under.
    #[wasm_bindgen(js_name = setIdempotent)]
    pub fn set_idempotent(&self, name: &str, idempotent: bool) {
        self.inner.borrow_mut().set_idempotent(name, idempotent);
    }

    /// Whether the tool's calls are approved before its handler starts: 0 no, 1 always, 2 its
    /// own function decides (asked through the tool port).
    #[wasm_bindgen(js_name = setNeedsApproval)]
    pub fn set_needs_approval(&self, name: &str, kind: u8) {
        let needs = match kind {
            1 => crate::engine::toolset::NeedsApproval::Always,
            2 => crate::engine::toolset::NeedsApproval::Decide,
            _ => crate::engine::toolset::NeedsApproval::No,
        };
        self.inner.borrow_mut().set_needs_approval(name, needs);
    }

    /// The tool's own time limit in milliseconds (a `TypeError` for one that is not positive).
    #[wasm_bindgen(js_name = setTimeoutMs)]
    pub fn set_timeout_ms(&self, name: &str, ms: f64) -> Result<(), JsValue> {
        self.inner.borrow_mut().set_timeout(name, ms).map_err(toolset_error)
    }

    /// The tools as `SimpleToolset.tools` gives them: `{name, description, parameters}`, plus
    /// `eager: false` for the tools that wait for a whole answer, `needsApproval: true` for those
    /// approved before they start.
    pub fn tools(&self) -> JsValue {
        let list: Vec<serde_json::Value> = self
            .inner
            .borrow()
            .specs()
            .map(|t| {
                let mut v = serde_json::json!({"name": t.definition.name, "description": t.definition.description,
                    "parameters": t.definition.parameters});
                if !t.eager {
                    v["eager"] = serde_json::Value::Bool(false);
                }
                if t.idempotent {
                    v["idempotent"] = serde_json::Value::Bool(true);
                }
                if let Some(ms) = t.timeout_ms {
                    v["timeoutMs"] = serde_json::json!(ms);
                }
                // A tool whose own function decides is asked every time through a subclass's `tools`
                // (what is read there is a boolean).
                if t.needs_approval != crate::engine::toolset::NeedsApproval::No {
                    v["needsApproval"] = serde_json::Value::Bool(true);
                }
                v
            })
            .collect();
        to_js(&list)
    }

    /// kosong's checks on a call given to `handle`: a `ToolResult` when they answer it already
    /// (unknown tool, arguments that are not JSON), or the arguments' JSON text to run the
    /// handler with.
    pub fn prepare(&self, call: JsValue) -> JsValue {
        let Some(call) = from_js::<ToolCall>(&call) else {
            return js_sys::TypeError::new("handle(call): call is not a ToolCall").into();
        };
        match self.inner.borrow().prepare(&call) {
            Prepared::Done(r) => to_js(&r),
            // The checked text (`{}` for none: `Arguments`' rule, not spelled here).
            Prepared::Run((), args) => JsValue::from_str(args.text()),
        }
    }

    /// The result for what a handler returned (kosong's reading of strings, parts,
    /// `ToolReturnValue`s and anything else).
    pub fn settle(&self, id: String, value: JsValue) -> JsValue {
        to_js(&settle(id, normalize_return(&value)))
    }

    /// The result for a handler that threw or rejected.
    #[wasm_bindgen(js_name = settleThrown)]
    pub fn settle_thrown(&self, id: String, error: JsValue) -> JsValue {
        to_js(&settle(id, Err(ToolFailure::Runtime(error_text(&error)))))
    }
}

impl Drop for SimpleToolsetCore {
    fn drop(&mut self) {
        REGISTRIES.with(|r| r.borrow_mut().remove(&self.id));
    }
}

impl Default for SimpleToolsetCore {
    fn default() -> Self {
        Self::new()
    }
}

/// kosong's result for arguments the `validate` hook refused (`message` says why): a
/// `ToolReturnValue` a handler's place returns.
#[wasm_bindgen(js_name = validationFailed)]
pub fn validation_failed(message: &str) -> JsValue {
    to_js(&ToolReturnValue::validate_error(message))
}
