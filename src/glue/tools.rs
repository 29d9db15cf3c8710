//! JavaScript tools: any object with kosong's `Toolset` shape (`tools`, `handle(call, ctx)`),
//! and the core of `SimpleToolset`. Sync results and Promises become one kind of future;
//! a `handle` that throws or rejects becomes an error result, never a failed step.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::{Rc, Weak};

use futures::future::LocalBoxFuture;
use futures::FutureExt;
use js_sys::{Array, Function, Object, Reflect, JSON};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use super::signals::AbortOnDrop;
use super::sys::{self, AbortSignal};
use crate::core::json::Arguments;
use crate::core::message::{ContentPart, ToolCall};
use crate::core::providers::ToolDefinition;
use crate::core::step::ToolDispatch;
use crate::core::toolset::{
    default_parameters, settle, Prepared, SimpleToolset, ToolFailure, ToolOutput, ToolResult, ToolReturnValue,
    ToolsetError,
};

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

/// The registry of a `SimpleToolset` (its handlers stay in JavaScript).
pub type Registry = Rc<RefCell<SimpleToolset<()>>>;

/// Any JS object with the `Toolset` shape. A `SimpleToolset` (not subclassed) is run by its
/// core's registry: definitions, lookup and results are read here, and a call crosses out once
/// to its handler and back once with what the handler returned.
pub struct JsToolset {
    toolset: JsValue,
    simple: Option<Registry>,
    lazy: RefCell<Vec<String>>,
    signals: ToolSignals,
    /// `(message, fields) => void`, for calls the engine settles itself.
    warn: Option<Function>,
    run: JsValue,
    /// `invokeTool` of the JS layer (installed when the module is loaded).
    invoker: Function,
}

impl JsToolset {
    /// `simple`: the id of the toolset's registry when it is a `SimpleToolset` (see
    /// [`SimpleToolsetCore::id`]).
    pub fn new(
        toolset: JsValue,
        simple: Option<u32>,
        signals: ToolSignals,
        warn: Option<Function>,
        run: Option<RunFunctions>,
    ) -> Result<JsToolset, JsValue> {
        if !Reflect::get(&toolset, &"handle".into())?.is_function() {
            return Err(js_sys::TypeError::new("toolset.handle must be a function").into());
        }
        let invoker = super::tool_invoker().ok_or_else(|| js_sys::Error::new("kosong-wasm is not initialized"))?;
        let run = run.map_or(JsValue::UNDEFINED, |r| r.0.into());
        let simple = simple.and_then(registry);
        Ok(JsToolset { toolset, simple, lazy: RefCell::default(), signals, warn, run, invoker })
    }

    /// The toolset's tools now (a toolset may change between steps); remembers which are lazy.
    /// A `SimpleToolset`'s come from its registry; another's from its `tools`, read in one
    /// crossing (`JSON.stringify`), a tool without parameters taking the default ones.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        if let Some(reg) = &self.simple {
            return reg.borrow().specs().map(|t| t.definition.clone()).collect();
        }
        let tools = Reflect::get(&self.toolset, &"tools".into()).unwrap_or(JsValue::UNDEFINED);
        let list: Vec<serde_json::Value> = from_js(&tools).unwrap_or_default();
        let mut lazy = Vec::new();
        let mut defs = Vec::with_capacity(list.len());
        for t in list {
            let serde_json::Value::Object(mut t) = t else { continue };
            let Some(serde_json::Value::String(name)) = t.remove("name") else { continue };
            if t.get("eager").and_then(serde_json::Value::as_bool) == Some(false) {
                lazy.push(name.clone());
            }
            let parameters = t.remove("parameters").filter(serde_json::Value::is_object).unwrap_or_else(default_parameters);
            let description = match t.remove("description") {
                Some(serde_json::Value::String(d)) => d,
                _ => String::new(),
            };
            defs.push(ToolDefinition { name, description, parameters });
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
        match &self.simple {
            Some(reg) => reg.borrow().is_eager(name),
            None => !self.lazy.borrow().iter().any(|n| n == name),
        }
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

    fn dispatch(&self, call: &ToolCall, _args: &Arguments) -> LocalBoxFuture<'static, ToolResult> {
        let id = call.id.clone();
        let simple = self.simple.is_some();
        if let Some(reg) = &self.simple {
            if reg.borrow().get(&call.function.name).is_none() {
                let r = ToolResult { tool_call_id: id, return_value: ToolReturnValue::not_found(&call.function.name) };
                return futures::future::ready(r).boxed_local();
            }
        }
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
        // The arguments were checked as the call completed (the engine's `Arguments`): the
        // handler's are the model's text, parsed by the invoker.
        let outcome = self.invoker.call6(
            &JsValue::UNDEFINED,
            &self.toolset,
            &head,
            &args,
            &signal,
            &self.run,
            &JsValue::from_bool(simple),
        );
        let fut = settle_js(outcome);
        async move {
            let outcome = fut.await;
            if let Some(g) = guard.as_mut() {
                g.disarm(); // finished: nothing to abort
            }
            match outcome {
                // What the handler returned, read once.
                Ok(v) if simple => settle(id, normalize_return(&v)),
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

fn registry(id: u32) -> Option<Registry> {
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

    /// The tools as `SimpleToolset.tools` gives them: `{name, description, parameters}`, plus
    /// `eager: false` for the tools that wait for a whole answer.
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
            Prepared::Run((), _) => JsValue::from_str(call.function.arguments.as_deref().filter(|a| !a.is_empty()).unwrap_or("{}")),
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
