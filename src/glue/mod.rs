//! The wasm-bindgen glue: the core's seams filled with JavaScript — the transport over `fetch`
//! (`transport.rs`), the JS toolset (`tools.rs`), timers, randomness and tasks (`agent.rs`'s
//! `WebEnv`) — and thin handles on the core's values for the JS layer (`js/`). Data crosses the
//! boundary as JSON text, parsed once on each side. Errors leave through one conversion
//! (`error.rs`), so they are the exported `Error` subclasses.
//!
//! | file | what |
//! |---|---|
//! | `provider.rs` | `ProviderCore`: a JS provider read once into the core's `Provider` |
//! | `step.rs` | `runGenerate`, `runStep` |
//! | `parts.rs` | the part hook's batches, JSON callbacks |
//! | `output.rs` | the `output` option, and the check of a structured answer |
//! | `agent.rs` | `AgentCore` (one turn), `WebEnv` |
//! | `session.rs` | `SessionCore`: the core's `Session` for the JS `Session` and its stores |
//! | `wire.rs`, `context.rs` | `WireCore`/`WireSideCore`/`runSoul`, `ContextCore` |
//! | `tools.rs`, `simple_toolset.rs` | the JS toolset as the core's `ToolDispatch`; `SimpleToolsetCore` |
//! | `preview.rs`, `convert.rs` | `PartialJson`, `ChaosProvider`'s scripts; plain data as JSON text |
//! | `transport.rs`, `signals.rs`, `sys.rs` | fetch and bodies; abort signals and promises; web-sys |

mod agent;
mod context;
mod convert;
mod error;
mod output;
mod parts;
mod preview;
mod provider;
mod session;
mod signals;
mod simple_toolset;
mod step;
mod subagent;
mod sys;
mod tools;
mod transport;
mod ui_stream;
mod wire;

use std::cell::RefCell;

use js_sys::{Function, Reflect};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
#[cfg(feature = "test-hooks")]
use wasm_bindgen_futures::spawn_local;

use crate::engine::generate::Limits;

/// The JS layer's functions the engine calls, installed once when the module is loaded.
struct JsHooks {
    /// `(className, message, fields) => Error`; `fields` holds `kind`, `status`, `requestId`,
    /// `retryAfterMs` and `cause`.
    error_factory: Function,
    /// `(reader, state, onValue, onError, max)`: reads a body's next batch (see `readBatch`).
    body_reader: Function,
    /// `(toolset, run, simple) => ToolPort`: the JS end of one toolset's calls (see
    /// [`tools::ToolPort`]), made once per step or turn.
    tool_port: Function,
}

thread_local! {
    static HOOKS: RefCell<Option<JsHooks>> = const { RefCell::new(None) };
}

#[wasm_bindgen(js_name = installHooks)]
pub fn install_hooks(error_factory: Function, body_reader: Function, tool_port: Function) {
    HOOKS.with(|h| *h.borrow_mut() = Some(JsHooks { error_factory, body_reader, tool_port }));
}

fn hook(pick: fn(&JsHooks) -> &Function) -> Option<Function> {
    HOOKS.with(|h| h.borrow().as_ref().map(|h| pick(h).clone()))
}

pub(crate) fn body_reader() -> Option<Function> {
    hook(|h| &h.body_reader)
}

pub(crate) fn tool_port_factory() -> Option<Function> {
    hook(|h| &h.tool_port)
}

/// The field `k` of a JS object, `None` when it is missing, `undefined` or `null` (or `o` is
/// not an object).
pub(crate) fn get(o: &JsValue, k: &str) -> Option<JsValue> {
    Reflect::get(o, &JsValue::from_str(k)).ok().filter(|v| !v.is_undefined() && !v.is_null())
}

/// Whether the engine awaits `v`: a thenable as Promises/A+ says, an object or a function with
/// a callable `then` (a `then` that cannot be read is none). The JS layer's `isThenable`
/// (js/util.js) is the same rule.
pub(crate) fn is_thenable(v: &JsValue) -> bool {
    (v.is_object() || v.is_function()) && get(v, "then").is_some_and(|t| t.is_function())
}

/// The `limits` option (`{maxEventBytes, maxToolArgumentsBytes, maxMessageBytes,
/// maxToolCallsPerStep}`, each optional) by the core's rule ([`Limits::set`]); `what` names the
/// option's owner in the `TypeError` (`options`, `Agent`).
fn read_limits(v: Option<JsValue>, what: &str) -> Result<Limits, JsValue> {
    let mut l = Limits::default();
    let Some(v) = v else { return Ok(l) };
    if !v.is_object() {
        return Err(error::type_error(&format!("{what}.limits must be an object")));
    }
    for entry in js_sys::Object::entries(v.unchecked_ref()).iter() {
        let pair: js_sys::Array = entry.unchecked_into();
        let (name, value) = (pair.get(0).as_string().unwrap_or_default(), pair.get(1));
        if value.is_undefined() {
            continue;
        }
        l.set(what, &name, value.as_f64()).map_err(|e| error::type_error(&e))?;
    }
    Ok(l)
}

thread_local! {
    static PANIC_REPORTER: RefCell<Option<Function>> = const { RefCell::new(None) };
}

/// Installs `report(message)`, called when the instance panics (just before it traps), from
/// whatever task the panic happens in, so the JS layer can refuse later calls clearly.
#[wasm_bindgen(js_name = installPanicReporter)]
pub fn install_panic_reporter(report: Function) {
    PANIC_REPORTER.with(|r| *r.borrow_mut() = Some(report));
    std::panic::set_hook(Box::new(|info| {
        let msg = info.to_string();
        PANIC_REPORTER.with(|r| {
            if let Ok(r) = r.try_borrow() {
                if let Some(f) = r.as_ref() {
                    let _ = f.call1(&JsValue::UNDEFINED, &JsValue::from_str(&msg));
                }
            }
        });
    }));
}

/// Breaks the instance on purpose: 0 traps, 1 panics, 2 panics inside a spawned task, 3 traps
/// inside a spawned task (what running out of memory there does: no panic hook runs). Only
/// in the `test-hooks` build, for the tests that prove a broken instance is reported clearly.
#[cfg(feature = "test-hooks")]
#[wasm_bindgen(js_name = __kosongTestTrap)]
pub fn test_trap(kind: u32) {
    match kind {
        0 => core::arch::wasm32::unreachable(),
        1 => panic!("deliberate test panic"),
        2 => spawn_local(async { panic!("deliberate test panic in a task") }),
        _ => spawn_local(async { core::arch::wasm32::unreachable() }),
    }
}

/// The instance-wide memory budget (see `engine::budget`), in bytes.
#[wasm_bindgen(js_name = setMemoryBudget)]
pub fn set_memory_budget(bytes: f64) {
    crate::engine::budget::set_limit(if bytes.is_finite() && bytes >= 1.0 { bytes as usize } else { 1 });
}

#[wasm_bindgen(js_name = memoryBudgetLimit)]
pub fn memory_budget_limit() -> f64 {
    crate::engine::budget::limit() as f64
}

#[wasm_bindgen(js_name = memoryBudgetUsed)]
pub fn memory_budget_used() -> f64 {
    crate::engine::budget::used() as f64
}
