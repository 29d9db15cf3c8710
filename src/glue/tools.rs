//! JavaScript tools: any object with kosong's `Toolset` shape (`tools`, `handle(call, ctx)`),
//! and the core of `SimpleToolset`. Sync results and Promises become one kind of future;
//! a `handle` that throws or rejects becomes an error result, never a failed step.

use futures::future::LocalBoxFuture;
use futures::FutureExt;
use js_sys::{Array, Function, Object, Reflect, JSON};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use super::signals::AbortOnDrop;
use super::sys::{self, AbortSignal};
use crate::core::message::{ContentPart, ToolCall};
use crate::core::step::ToolDispatch;
use crate::core::toolset::{settle, Prepared, SimpleToolset, ToolFailure, ToolOutput, ToolResult, ToolReturnValue};

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
    serde_json::from_str(&text).map_err(|e| e.to_string())
}

pub fn from_js<T: serde::de::DeserializeOwned>(v: &JsValue) -> Option<T> {
    read_js(v).ok()
}

/// `error.message` for an `Error`, with its class when it is a subclass (`TypeError: x is
/// undefined`); `String(value)` for anything else.
pub fn error_text(e: &JsValue) -> String {
    if let Some(err) = e.dyn_ref::<js_sys::Error>() {
        let (name, message) = (String::from(err.name()), String::from(err.message()));
        return if name.is_empty() || name == "Error" { message } else { format!("{name}: {message}") };
    }
    if let Some(s) = e.as_string() {
        return s;
    }
    Reflect::get(e, &"message".into())
        .ok()
        .and_then(|m| m.as_string())
        .or_else(|| js_sys::JSON::stringify(e).ok().and_then(|s| s.as_string()))
        .unwrap_or_else(|| "unknown error".into())
}

fn is_thenable(v: &JsValue) -> bool {
    v.is_object() && Reflect::get(v, &"then".into()).map(|t| t.is_function()).unwrap_or(false)
}

/// A value or a Promise of one, as a future of the settled outcome.
fn settle_js(v: Result<JsValue, JsValue>) -> LocalBoxFuture<'static, Result<JsValue, JsValue>> {
    match v {
        Ok(v) if is_thenable(&v) => super::signals::Awaited::new(&v).boxed_local(),
        other => futures::future::ready(other).boxed_local(),
    }
}

/// What a tool's context gains inside an agent run: `{send(message), requestApproval(toolCallId,
/// req), rejection(toolCallId)}`, one object for the run (the JS invoker binds each call's id).
pub struct RunFunctions(pub Object);

/// Where a tool's signal comes from.
pub enum ToolSignals {
    /// One signal for every call (`step`'s own controller).
    Shared(AbortSignal),
    /// A controller per call, aborted when the engine drops the call unfinished (an agent
    /// run; the run's signal gives the reason).
    PerCall(Option<AbortSignal>),
}

/// Any JS object with the `Toolset` shape.
pub struct JsToolset {
    toolset: JsValue,
    lazy: std::cell::RefCell<Vec<String>>,
    signals: ToolSignals,
    /// `(message, fields) => void`, for calls the engine settles itself.
    warn: Option<Function>,
    run: JsValue,
    /// `invokeTool` of the JS layer (installed when the module is loaded).
    invoker: Function,
}

impl JsToolset {
    /// `lazy` names the tools declared `eager: false`.
    pub fn new(
        toolset: JsValue,
        lazy: Vec<String>,
        signals: ToolSignals,
        warn: Option<Function>,
        run: Option<RunFunctions>,
    ) -> Result<JsToolset, JsValue> {
        if !Reflect::get(&toolset, &"handle".into())?.is_function() {
            return Err(js_sys::TypeError::new("toolset.handle must be a function").into());
        }
        let invoker = super::tool_invoker().ok_or_else(|| js_sys::Error::new("kosong-wasm is not initialized"))?;
        let run = run.map_or(JsValue::UNDEFINED, |r| r.0.into());
        Ok(JsToolset { toolset, lazy: std::cell::RefCell::new(lazy), signals, warn, run, invoker })
    }

    /// The toolset's `tools` now (a toolset may change between steps); remembers which are lazy.
    pub fn definitions(&self) -> Vec<crate::core::providers::ToolDefinition> {
        let tools = Reflect::get(&self.toolset, &"tools".into()).unwrap_or(JsValue::UNDEFINED);
        let list = Array::from(&tools);
        let mut lazy = Vec::new();
        let mut defs = Vec::with_capacity(list.length() as usize);
        for t in list.iter() {
            let get = |k: &str| Reflect::get(&t, &JsValue::from_str(k)).unwrap_or(JsValue::UNDEFINED);
            let Some(name) = get("name").as_string() else { continue };
            if get("eager").as_bool() == Some(false) {
                lazy.push(name.clone());
            }
            let parameters = from_js::<serde_json::Value>(&get("parameters"))
                .filter(serde_json::Value::is_object)
                .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}}));
            let description = get("description").as_string().unwrap_or_default();
            defs.push(crate::core::providers::ToolDefinition { name, description, parameters });
        }
        *self.lazy.borrow_mut() = lazy;
        defs
    }
}

impl JsToolset {
    /// `warn(message, {tool, id, bytes[, chars]})`: a call's name, id and size, never its arguments.
    fn warn_call(&self, call: &ToolCall, message: &str, chars: Option<usize>) {
        let Some(warn) = &self.warn else { return };
        let fields = Object::new();
        let _ = Reflect::set(&fields, &"tool".into(), &JsValue::from_str(&call.function.name));
        let _ = Reflect::set(&fields, &"id".into(), &JsValue::from_str(&call.id));
        let bytes = call.function.arguments.as_deref().map_or(0, str::len);
        let _ = Reflect::set(&fields, &"bytes".into(), &JsValue::from(bytes as f64));
        if let Some(chars) = chars {
            let _ = Reflect::set(&fields, &"chars".into(), &JsValue::from(chars as f64));
        }
        let _ = warn.call2(&JsValue::UNDEFINED, &JsValue::from_str(message), &fields);
    }
}

/// Reads a `ToolResult` the toolset gave back; anything else becomes an error result.
fn to_tool_result(v: &JsValue, call_id: &str) -> ToolResult {
    match from_js::<ToolResult>(v) {
        Some(mut r) => {
            r.tool_call_id = call_id.to_owned();
            r
        }
        None => ToolResult {
            tool_call_id: call_id.to_owned(),
            return_value: ToolReturnValue::runtime_error(
                "the toolset's handle() returned something that is not a ToolResult",
            ),
        },
    }
}

impl ToolDispatch for JsToolset {
    fn is_eager(&self, name: &str) -> bool {
        !self.lazy.borrow().iter().any(|n| n == name)
    }

    fn on_malformed_arguments(&self, call: &ToolCall) {
        self.warn_call(
            call,
            "kosong-wasm: a tool call's arguments are not valid JSON; the model was asked to send it again",
            None,
        );
    }

    fn on_cut_off(&self, call: &ToolCall, chars: usize) {
        self.warn_call(
            call,
            "kosong-wasm: the model's stream broke before this tool call could start; it did not run, and the model was asked to send it again",
            Some(chars),
        );
    }

    fn dispatch(&self, call: &ToolCall) -> LocalBoxFuture<'static, ToolResult> {
        let id = call.id.clone();
        let (signal, mut guard) = match &self.signals {
            ToolSignals::Shared(s) => (s.clone(), None),
            ToolSignals::PerCall(run_signal) => match sys::abort_controller() {
                Ok(ctrl) => {
                    let signal = ctrl.signal();
                    // The tool's own signal: aborted when the engine drops the call unfinished
                    // (the run was cancelled, or the step failed), with the run's reason.
                    (signal, Some(AbortOnDrop::new(ctrl, run_signal.clone())))
                }
                Err(e) => {
                    let r = settle(id, Err(ToolFailure::Runtime(error_text(&e))));
                    return futures::future::ready(r).boxed_local();
                }
            },
        };
        // One crossing, where building the call and its context field by field took about 20
        // (bench/crossings.mjs): the call without its arguments as JSON text, parsed by the
        // invoker, and the arguments as a string of their own (they may be megabytes; escaping
        // them into the JSON and parsing them out again cost more than the rest of a dispatch).
        let head = JsValue::from_str(&call_head_json(call));
        let args = call.function.arguments.as_deref().map_or(JsValue::NULL, JsValue::from_str);
        let outcome = self.invoker.call5(&JsValue::UNDEFINED, &self.toolset, &head, &args, &signal, &self.run);
        let fut = settle_js(outcome);
        async move {
            let outcome = fut.await;
            if let Some(g) = guard.as_mut() {
                g.disarm(); // finished: nothing to abort
            }
            match outcome {
                Ok(v) => to_tool_result(&v, &id),
                Err(e) => settle(id, Err(ToolFailure::Runtime(error_text(&e)))),
            }
        }
        .boxed_local()
    }
}

/// `call` as JSON without `function.arguments` (the invoker puts them back).
fn call_head_json(call: &ToolCall) -> String {
    let text = |s: &str| serde_json::to_string(s).unwrap_or_default();
    let mut out =
        format!(r#"{{"type":"function","id":{},"function":{{"name":{}}}"#, text(&call.id), text(&call.function.name));
    if let Some(extras) = &call.extras {
        out.push_str(r#","extras":"#);
        out.push_str(&serde_json::to_string(extras).unwrap_or_else(|_| "{}".into()));
    }
    out.push('}');
    out
}

/// What a handler returned, as kosong reads it: a string or parts are a success with that
/// output, `undefined` an empty success, a `ToolReturnValue` is kept, the rest is an error.
fn normalize_return(v: &JsValue) -> Result<ToolReturnValue, ToolFailure> {
    if let Some(s) = v.as_string() {
        return Ok(ToolReturnValue::ok(ToolOutput::Text(s), "", ""));
    }
    if v.is_undefined() || v.is_null() {
        return Ok(ToolReturnValue::ok(ToolOutput::Text(String::new()), "", ""));
    }
    if let Some(m) = Reflect::get(v, &"__kosongValidate".into()).ok().and_then(|m| m.as_string()) {
        return Err(ToolFailure::Validate(m));
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

/// The core of the JS `SimpleToolset`: kosong's lookup, argument and error rules.
#[wasm_bindgen]
pub struct SimpleToolsetCore {
    inner: SimpleToolset<()>,
}

#[wasm_bindgen]
impl SimpleToolsetCore {
    #[wasm_bindgen(constructor)]
    pub fn new() -> SimpleToolsetCore {
        SimpleToolsetCore { inner: SimpleToolset::default() }
    }

    pub fn add(&mut self, name: String) {
        self.inner.add(name, ());
    }

    pub fn remove(&mut self, name: &str) -> bool {
        self.inner.remove(name)
    }

    /// kosong's checks on a call: a `ToolResult` when they answer it already (unknown tool,
    /// arguments that are not JSON), or the raw JSON arguments to run the handler with.
    /// (The handlers stay on the JS side: holding JS functions here would keep the toolset
    /// alive through the instance, beyond the garbage collector's sight.)
    pub fn prepare(&self, call: JsValue) -> JsValue {
        let Some(call) = from_js::<ToolCall>(&call) else {
            return js_sys::TypeError::new("handle(call): call is not a ToolCall").into();
        };
        match self.inner.prepare(&call) {
            Prepared::Done(r) => to_js(&r),
            Prepared::Run((), raw) => JsValue::from_str(raw),
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

impl Default for SimpleToolsetCore {
    fn default() -> Self {
        Self::new()
    }
}
