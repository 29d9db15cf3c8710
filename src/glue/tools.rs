//! JavaScript tools as the core's `ToolDispatch`: any object with kosong's `Toolset` shape
//! (`tools`, `handle(call, ctx)`), and a `SimpleToolset` run from its core's registry. Sync
//! results and Promises become one kind of future; a `handle` that throws or rejects becomes an
//! error result, never a failed step. A call dropped unfinished aborts its signal.

use std::cell::RefCell;

use futures::future::LocalBoxFuture;
use futures::FutureExt;
use js_sys::{Function, Object, Reflect};
use wasm_bindgen::prelude::*;

use super::convert::{error_text, from_js};
use super::signals::{AbortOnDrop, StopReason};
use super::simple_toolset::{normalize_return, registry, Registry};
use super::sys::{self, AbortSignal};
use crate::engine::json::Arguments;
use crate::engine::message::ToolCall;
use crate::engine::providers::ToolDefinition;
use crate::engine::step::ToolDispatch;
use crate::engine::toolset::{
    check_timeout_ms, default_parameters, settle, ToolFailure, ToolResult, ToolReturnValue, ToolTimeouts,
};

/// The `toolTimeoutMs` option (`who` names it): none, or a positive number of milliseconds.
pub fn read_tool_timeouts(v: Option<JsValue>, who: &str) -> Result<ToolTimeouts, JsValue> {
    Ok(ToolTimeouts { default_ms: read_time_limit(v, &format!("{who}: toolTimeoutMs"))? })
}

/// A time limit option (`what` names it): none, or a positive number of milliseconds (the
/// core's rule, [`check_timeout_ms`]).
pub fn read_time_limit(v: Option<JsValue>, what: &str) -> Result<Option<f64>, JsValue> {
    let Some(v) = v else { return Ok(None) };
    let ms = v.as_f64().ok_or_else(|| js_sys::TypeError::new(&format!("{what} must be a number")))?;
    check_timeout_ms(ms, what).map(Some).map_err(|m| JsValue::from(js_sys::TypeError::new(&m)))
}

/// A value or a Promise of one, as a future of the settled outcome.
fn settle_js(v: Result<JsValue, JsValue>) -> LocalBoxFuture<'static, Result<JsValue, JsValue>> {
    match v {
        Ok(v) if super::is_thenable(&v) => super::signals::Awaited::new(&v).boxed_local(),
        other => futures::future::ready(other).boxed_local(),
    }
}

#[wasm_bindgen]
extern "C" {
    /// The JS end of one toolset's calls in one step or turn (`ToolPort` in js/tools.js, made by
    /// the factory the JS layer installs): it builds each call's context (inside an agent run,
    /// with the run's `send`, `requestApproval` and `rejection`) and answers it — a
    /// `SimpleToolset`'s handler when its core found the tool, else `toolset.handle`.
    pub type ToolPort;

    /// One call, one crossing: the call's id and name, its `extras` as JSON text (`null` when it
    /// has none: the rare case, so the common call is parsed nowhere), the arguments as a string
    /// of their own (they may be megabytes: escaping them into a JSON text and parsing them out
    /// again cost more than the rest of a dispatch) or `null`, and the call's signal — or,
    /// without one, the number `slot`: the port makes the call's own controller, kept under that
    /// number until the handler settles (`abort` reaches it; a number passes without a crossing
    /// of its own). Returns what the tool answered, or a Promise of it.
    #[wasm_bindgen(method, catch)]
    fn invoke(
        this: &ToolPort,
        id: &str,
        name: &str,
        extras: Option<String>,
        args: &JsValue,
        signal: Option<&AbortSignal>,
        slot: u32,
    ) -> Result<JsValue, JsValue>;

    /// Aborts the controller `invoke` made for call `slot` with `reason`, if the call has not
    /// settled (then nothing is kept under it).
    #[wasm_bindgen(method)]
    fn abort(this: &ToolPort, slot: u32, reason: &JsValue);

    /// A tool's own `needsApproval(args)`: a boolean, or a Promise of one.
    #[wasm_bindgen(method, catch, js_name = needsApproval)]
    fn needs_approval(this: &ToolPort, name: &str, args: &str) -> Result<JsValue, JsValue>;
}

/// What a tool's context gains inside an agent run: `{send(message), requestApproval(toolCallId,
/// req), rejection(toolCallId)}`, one object for the run (the JS invoker binds each call's id).
pub struct RunFunctions(pub Object);

/// Where a tool's signal comes from.
pub enum ToolSignals {
    /// One signal for every call (`step`'s own controller).
    Shared(AbortSignal),
    /// A controller per call, aborted when the engine drops the call unfinished (an agent
    /// run; the run's signal gives the reason, else the run's own: a turn past its time limit).
    PerCall(Option<AbortSignal>, StopReason),
}

/// Any JS object with the `Toolset` shape. A `SimpleToolset` (not subclassed) is run by its
/// core's registry: definitions, lookup and results are read here, and a call crosses out once
/// to its handler and back once with what the handler returned.
pub struct JsToolset {
    toolset: JsValue,
    simple: Option<Registry>,
    lazy: RefCell<Vec<String>>,
    /// The tools a custom toolset declares `idempotent: true` (read with the definitions).
    idempotent: RefCell<Vec<String>>,
    /// The tools a custom toolset declares `needsApproval: true` (read with the definitions).
    ask_first: RefCell<Vec<String>>,
    /// A custom toolset's tools' own `timeoutMs` (read with the definitions).
    own_timeouts: RefCell<Vec<(String, f64)>>,
    timeouts: ToolTimeouts,
    signals: ToolSignals,
    /// The number of the next call whose controller the port makes (`ToolSignals::PerCall`).
    slots: std::cell::Cell<u32>,
    /// `(message, fields) => void`, for calls the engine settles itself.
    warn: Option<Function>,
    port: ToolPort,
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
        timeouts: ToolTimeouts,
    ) -> Result<JsToolset, JsValue> {
        if !Reflect::get(&toolset, &"handle".into())?.is_function() {
            return Err(js_sys::TypeError::new("toolset.handle must be a function").into());
        }
        let factory = super::tool_port_factory().ok_or_else(|| js_sys::Error::new("kosong-wasm is not initialized"))?;
        let run = run.map_or(JsValue::UNDEFINED, |r| r.0.into());
        let simple = simple.and_then(registry);
        let port =
            factory.call3(&JsValue::UNDEFINED, &toolset, &run, &JsValue::from_bool(simple.is_some()))?.unchecked_into();
        Ok(JsToolset {
            toolset,
            simple,
            lazy: RefCell::default(),
            idempotent: RefCell::default(),
            ask_first: RefCell::default(),
            own_timeouts: RefCell::default(),
            timeouts,
            signals,
            slots: std::cell::Cell::new(0),
            warn,
            port,
        })
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
        let mut idempotent = Vec::new();
        let mut ask_first = Vec::new();
        let mut own_timeouts = Vec::new();
        let mut defs = Vec::with_capacity(list.len());
        for t in list {
            let serde_json::Value::Object(mut t) = t else { continue };
            let Some(serde_json::Value::String(name)) = t.remove("name") else { continue };
            if t.get("eager").and_then(serde_json::Value::as_bool) == Some(false) {
                lazy.push(name.clone());
            }
            if t.get("idempotent").and_then(serde_json::Value::as_bool) == Some(true) {
                idempotent.push(name.clone());
            }
            if t.get("needsApproval").and_then(serde_json::Value::as_bool) == Some(true) {
                ask_first.push(name.clone());
            }
            // A limit that is not a positive number is left out here (the toolset is the
            // caller's own object; a SimpleToolset refuses one when it is added).
            if let Some(ms) =
                t.get("timeoutMs").and_then(serde_json::Value::as_f64).and_then(|v| check_timeout_ms(v, "").ok())
            {
                own_timeouts.push((name.clone(), ms));
            }
            let parameters =
                t.remove("parameters").filter(serde_json::Value::is_object).unwrap_or_else(default_parameters);
            let description = match t.remove("description") {
                Some(serde_json::Value::String(d)) => d,
                _ => String::new(),
            };
            defs.push(ToolDefinition { name, description, parameters });
        }
        *self.lazy.borrow_mut() = lazy;
        *self.idempotent.borrow_mut() = idempotent;
        *self.ask_first.borrow_mut() = ask_first;
        *self.own_timeouts.borrow_mut() = own_timeouts;
        defs
    }
}

impl JsToolset {
    /// A custom toolset's own limit for `name` (a SimpleToolset's is read with its lookup).
    fn own_timeout(&self, name: &str) -> Option<f64> {
        self.own_timeouts.borrow().iter().find(|(n, _)| n == name).map(|(_, ms)| *ms)
    }

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

    fn is_idempotent(&self, name: &str) -> bool {
        match &self.simple {
            Some(reg) => reg.borrow().is_idempotent(name),
            None => self.idempotent.borrow().iter().any(|n| n == name),
        }
    }

    fn needs_approval(
        &self,
        call: &ToolCall,
        args: &Arguments<'_>,
    ) -> Option<LocalBoxFuture<'static, Result<bool, String>>> {
        use crate::engine::toolset::NeedsApproval;
        let needs = match &self.simple {
            Some(reg) => reg.borrow().spec(&call.function.name).map_or(NeedsApproval::No, |s| s.needs_approval),
            None if self.ask_first.borrow().contains(&call.function.name) => NeedsApproval::Always,
            None => NeedsApproval::No,
        };
        match needs {
            NeedsApproval::No => None,
            NeedsApproval::Always => Some(futures::future::ready(Ok(true)).boxed_local()),
            NeedsApproval::Decide => {
                let port: ToolPort = self.port.clone().unchecked_into();
                let (name, args) = (call.function.name.clone(), args.text().to_owned());
                // Asked at the first poll: once the call is stored.
                Some(
                    async move {
                        match settle_js(port.needs_approval(&name, &args)).await {
                            Ok(v) => Ok(v.is_truthy()),
                            Err(e) => Err(error_text(&e)),
                        }
                    }
                    .boxed_local(),
                )
            }
        }
    }

    fn on_malformed_arguments(&self, call: &ToolCall) {
        self.warn_call(
            call,
            "kosong-wasm: a tool call's arguments are not valid JSON; the model was asked to send it again",
            None,
        );
    }

    fn on_late_fragment(&self, call: &ToolCall, bytes: usize) {
        self.warn_call(
            call,
            &format!("kosong-wasm: {bytes} bytes of this tool call's arguments came after the call had started; they were dropped, so the history holds the arguments it ran with"),
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

    fn dispatch(&self, call: &ToolCall, checked: &Arguments<'_>) -> LocalBoxFuture<'static, ToolResult> {
        let id = call.id.clone();
        let simple = self.simple.is_some();
        // One lookup: the tool (else "not found") and its own time limit.
        let own = match &self.simple {
            Some(reg) => match reg.borrow().spec(&call.function.name) {
                Some(spec) => spec.timeout_ms,
                None => {
                    let r =
                        ToolResult { tool_call_id: id, return_value: ToolReturnValue::not_found(&call.function.name) };
                    return futures::future::ready(r).boxed_local();
                }
            },
            None => self.own_timeout(&call.function.name),
        };
        let limit = self.timeouts.for_tool(own);
        let failed =
            |e: JsValue| futures::future::ready(settle(call.id.clone(), Err(ToolFailure::Runtime(error_text(&e)))));
        let ((signal, slot), mut guard) = match &self.signals {
            ToolSignals::Shared(s) if limit.is_none() => ((Some(s.clone()), 0), None),
            // A step's call with a time limit: a signal of its own (aborted when it runs past the
            // limit) that also follows the step's.
            ToolSignals::Shared(shared) => match sys::abort_controller() {
                Ok(ctrl) => {
                    let own = ctrl.signal();
                    let signal = sys::either_signal(shared, &own).unwrap_or(own);
                    ((Some(signal), 0), Some(AbortOnDrop::new(ctrl, Some(shared.clone()))))
                }
                Err(e) => return failed(e).boxed_local(),
            },
            // The tool's own signal: its controller is made by the port as it calls the handler
            // (no crossing of its own), and aborted when the engine drops the call unfinished
            // (the run was cancelled, or the step failed), with the run's reason.
            ToolSignals::PerCall(run_signal, stop) => {
                let slot = self.slots.get();
                self.slots.set(slot.wrapping_add(1));
                let port: ToolPort = self.port.clone().unchecked_into();
                let abort = Box::new(move |reason: &JsValue| port.abort(slot, reason));
                ((None, slot), Some(AbortOnDrop::far(abort, run_signal.clone()).or_reason(stop)))
            }
        };
        // One crossing, where building the call and its context field by field took about 20
        // (bench/crossings.mjs). The arguments were checked as the call completed (the engine's
        // `Arguments`): a SimpleToolset's handler gets the checked text (`{}` for none: the rule
        // is the core's, the JS only parses); a toolset's own `handle` gets the call as the
        // model sent it.
        let args = if simple {
            JsValue::from_str(checked.text())
        } else {
            call.function.arguments.as_deref().map_or(JsValue::NULL, JsValue::from_str)
        };
        // The handler is called at the future's first poll (the engine's contract: a session
        // holds a call back until it is stored; a plain step polls at once).
        let port: ToolPort = self.port.clone().unchecked_into();
        let name = call.function.name.clone();
        let extras = call.extras.as_ref().map(|e| serde_json::to_string(e).unwrap_or_else(|_| "{}".into()));
        async move {
            let fut = settle_js(port.invoke(&id, &name, extras, &args, signal.as_ref(), slot));
            let outcome = match limit {
                None => fut.await,
                Some(ms) => {
                    let timer = gloo_timers::future::TimeoutFuture::new(ms.min(f64::from(u32::MAX)) as u32);
                    match futures::future::select(fut, timer).await {
                        futures::future::Either::Left((outcome, _)) => outcome,
                        futures::future::Either::Right(_) => {
                            // Past its time: its signal aborts with a TimeoutError, the handler's
                            // Promise is let go, and the timed-out result is the call's result.
                            let result =
                                ToolResult { tool_call_id: id, return_value: ToolReturnValue::timed_out(&name, ms) };
                            if let Some(g) = guard.as_mut() {
                                g.abort_with(&sys::timeout_error(&result.return_value.message));
                            }
                            return result;
                        }
                    }
                }
            };
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
