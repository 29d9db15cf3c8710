//! The wasm-bindgen glue: converts between JavaScript and the core and does the I/O (fetch,
//! timers, abort signals). Data crosses the boundary as JSON text, parsed once on each side.
//!
//! `runGenerate`/`runStep` are called by the JS layer (`src/js/step.js`), which owns the
//! public classes; errors are built by the factory it installs, so they are the exported
//! `Error` subclasses.

mod http;
mod preview;
mod signals;
mod soul;
mod sys;
mod tools;

use std::cell::RefCell;
use std::rc::Rc;

use futures::future::{select, Either, LocalBoxFuture};
use futures::FutureExt;
use js_sys::{Array, Function, Object, Promise, Reflect};
use serde::Deserialize;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::{future_to_promise, spawn_local};

use crate::core::error::ChatProviderError;
use crate::core::generate::{generate, CallbackResult, EventSource, Limits, SseEventSource, VecEventSource};
use crate::core::message::{Message, StreamedMessagePart, ToolCall};
use crate::core::providers::echo::script_for_stream;
use crate::core::providers::{HttpProvider, HttpRequest, StreamDecoder, StreamEvent, ToolDefinition};
use crate::core::step::{collect_results, step, StepFailure, ToolResultCallback};
use crate::core::toolset::ToolResult;
use signals::AbortWatch;
use sys::{AbortController, AbortSignal};

/// An error on its way to JavaScript: a provider error (made into its class at the end),
/// with the JS error that caused it when there was one (a failed `fetch`), or a JS value
/// thrown by user code, passed through unchanged.
pub enum GlueError {
    Provider(ChatProviderError),
    Caused(ChatProviderError, JsValue),
    Js(JsValue),
}

impl GlueError {
    /// The provider error, cleaned of the API key.
    fn redact(self, secret: Option<&str>) -> GlueError {
        match self {
            GlueError::Provider(e) => GlueError::Provider(e.redact(secret)),
            GlueError::Caused(e, cause) => GlueError::Caused(e.redact(secret), cause),
            other => other,
        }
    }
}

impl From<ChatProviderError> for GlueError {
    fn from(e: ChatProviderError) -> Self {
        GlueError::Provider(e)
    }
}

/// The JS layer's functions the engine calls, installed once when the module is loaded.
struct JsHooks {
    /// `(className, message, fields) => Error`; `fields` holds `kind`, `status`, `requestId`,
    /// `retryAfterMs` and `cause`.
    error_factory: Function,
    /// `(reader, state, onValue, onError, max)`: reads a body's next batch (see `readBatch`).
    body_reader: Function,
    /// `(toolset, headJson, args, signal, run) => result`: builds a call and its context and
    /// calls `toolset.handle` — one crossing out per tool call.
    tool_invoker: Function,
}

thread_local! {
    static HOOKS: RefCell<Option<JsHooks>> = const { RefCell::new(None) };
}

#[wasm_bindgen(js_name = installHooks)]
pub fn install_hooks(error_factory: Function, body_reader: Function, tool_invoker: Function) {
    HOOKS.with(|h| *h.borrow_mut() = Some(JsHooks { error_factory, body_reader, tool_invoker }));
}

fn hook(pick: fn(&JsHooks) -> &Function) -> Option<Function> {
    HOOKS.with(|h| h.borrow().as_ref().map(|h| pick(h).clone()))
}

pub(crate) fn body_reader() -> Option<Function> {
    hook(|h| &h.body_reader)
}

pub(crate) fn tool_invoker() -> Option<Function> {
    hook(|h| &h.tool_invoker)
}

fn provider_error_to_js(e: &ChatProviderError, cause: Option<&JsValue>) -> JsValue {
    let fields = Object::new();
    let set = |k: &str, v: &JsValue| {
        let _ = Reflect::set(&fields, &JsValue::from_str(k), v);
    };
    set("kind", &JsValue::from_str(e.kind()));
    if let ChatProviderError::Status { status, request_id, retry_after_ms, .. } = e {
        set("status", &JsValue::from(*status));
        set("requestId", &request_id.as_deref().map(JsValue::from_str).unwrap_or(JsValue::NULL));
        set("retryAfterMs", &retry_after_ms.map(|ms| JsValue::from(ms as f64)).unwrap_or(JsValue::NULL));
    }
    if let Some(c) = cause {
        set("cause", c);
    }
    let factory = hook(|h| &h.error_factory);
    // The factory is installed when the module is loaded, before anything can fail.
    factory
        .and_then(|f| f.call3(&JsValue::UNDEFINED, &e.class_name().into(), &e.message().into(), &fields).ok())
        .unwrap_or_else(|| js_sys::Error::new(e.message()).into())
}

impl GlueError {
    fn into_js(self) -> JsValue {
        match self {
            GlueError::Provider(e) => provider_error_to_js(&e, None),
            GlueError::Caused(e, cause) => provider_error_to_js(&e, Some(&cause)),
            GlueError::Js(v) => v,
        }
    }
}

/// The provider, as the JS layer describes it: `{kind: "scripted", script}` or one of the
/// HTTP providers (see [`HttpProvider`]).
#[derive(Clone)]
enum ProviderSpec {
    Http(Box<HttpProvider>),
    Scripted { script: String },
}

impl ProviderSpec {
    fn parse(text: &str) -> Result<ProviderSpec, serde_json::Error> {
        #[derive(Deserialize)]
        struct Scripted {
            kind: String,
            #[serde(default)]
            script: String,
        }
        if let Ok(s) = serde_json::from_str::<Scripted>(text) {
            if s.kind == "scripted" {
                return Ok(ProviderSpec::Scripted { script: s.script });
            }
        }
        Ok(ProviderSpec::Http(Box::new(HttpProvider::from_json(text)?)))
    }
}

/// Options read from the JS layer's hooks object.
struct Hooks {
    on_part: Option<Function>,
    on_tool_call: Option<Function>,
    on_tool_result: Option<Function>,
    signal: Option<AbortSignal>,
    fetch: Option<Function>,
    timeout_ms: Option<f64>,
    toolset: JsValue,
    lazy_tools: Vec<String>,
    warn: Option<Function>,
    limits: Limits,
}

/// The field `k` of a JS object, `None` when it is missing, `undefined` or `null` (or `o` is
/// not an object).
pub(crate) fn get(o: &JsValue, k: &str) -> Option<JsValue> {
    Reflect::get(o, &JsValue::from_str(k)).ok().filter(|v| !v.is_undefined() && !v.is_null())
}

impl Hooks {
    fn read(hooks: &JsValue) -> Hooks {
        let func = |k: &str| get(hooks, k).and_then(|v| v.dyn_into::<Function>().ok());
        Hooks {
            on_part: func("onPart"),
            on_tool_call: func("onToolCall"),
            on_tool_result: func("onToolResult"),
            signal: get(hooks, "signal").map(|s| s.unchecked_into()),
            fetch: func("fetch"),
            timeout_ms: get(hooks, "timeoutMs").and_then(|v| v.as_f64()).filter(|v| *v > 0.0),
            toolset: get(hooks, "toolset").unwrap_or(JsValue::UNDEFINED),
            lazy_tools: get(hooks, "lazyTools")
                .map(|v| Array::from(&v).iter().filter_map(|n| n.as_string()).collect())
                .unwrap_or_default(),
            warn: func("warn"),
            limits: read_limits(get(hooks, "limits")),
        }
    }
}

/// `{maxEventBytes, maxToolArgumentsBytes, maxMessageBytes, maxToolCallsPerStep}`, each optional (checked by the JS layer).
fn read_limits(v: Option<JsValue>) -> Limits {
    let mut l = Limits::default();
    let Some(v) = v else { return l };
    let num = |k: &str| get(&v, k).and_then(|x| x.as_f64()).filter(|x| x.is_finite() && *x >= 1.0).map(|x| x as usize);
    if let Some(n) = num("maxEventBytes") {
        l.max_event_bytes = n;
    }
    if let Some(n) = num("maxToolArgumentsBytes") {
        l.max_tool_arguments_bytes = n;
    }
    if let Some(n) = num("maxMessageBytes") {
        l.max_message_bytes = n;
    }
    if let Some(n) = num("maxToolCallsPerStep") {
        l.max_tool_calls_per_step = n;
    }
    l
}

/// Calls a JS callback with a JSON argument; a returned Promise is awaited by the engine.
fn call_json_hook<T: serde::Serialize>(f: &Option<Function>, value: &T) -> CallbackResult<GlueError> {
    let Some(f) = f else { return Ok(None) };
    let json = serde_json::to_string(value).map_err(|e| ChatProviderError::Other(e.to_string()))?;
    let ret = f.call1(&JsValue::UNDEFINED, &JsValue::from_str(&json)).map_err(GlueError::Js)?;
    if ret.is_object() && get(&ret, "then").is_some_and(|t| t.is_function()) {
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

/// The parts of a step held for the part hook until the engine flushes them (before a tool is
/// handed on, and before it waits for more bytes). Kinds: 0 text, 1 think, 2 an argument
/// fragment (with its call's id), 3 any other part as JSON.
struct PartBatch<'a> {
    hook: Option<&'a PartHook>,
    text: String,
    meta: Vec<u32>,
}

impl<'a> PartBatch<'a> {
    fn new(f: &'a Option<Function>) -> Self {
        PartBatch { hook: f.as_ref().map(|f| f.unchecked_ref()), text: String::new(), meta: Vec::new() }
    }

    fn push(&mut self, kind: u32, id: &str, text: &str) {
        let units = |s: &str| if s.is_ascii() { s.len() } else { s.encode_utf16().count() } as u32;
        self.meta.extend([kind, units(id), units(text)]);
        self.text.push_str(id);
        self.text.push_str(text);
    }
}

impl crate::core::generate::PartSink<GlueError> for PartBatch<'_> {
    fn part(&mut self, part: &StreamedMessagePart) -> CallbackResult<GlueError> {
        use crate::core::message::{ContentPart, ToolCallPart};
        if self.hook.is_none() {
            return Ok(None);
        }
        match part {
            StreamedMessagePart::Content(ContentPart::Text { text, extras: None }) => self.push(0, "", text),
            StreamedMessagePart::Content(ContentPart::Think { think, encrypted: None }) => self.push(1, "", think),
            StreamedMessagePart::ToolCallPart(ToolCallPart { arguments_part: Some(a), tool_call_id: Some(id) }) => {
                self.push(2, id, a)
            }
            _ => {
                let json = serde_json::to_string(part).map_err(|e| ChatProviderError::Other(e.to_string()))?;
                self.push(3, "", &json)
            }
        }
        Ok(None)
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

/// A boxed event source, so one code path serves every provider.
enum AnySource {
    Http(Box<SseEventSource<http::BodySource, Box<dyn StreamDecoder>>>),
    Scripted(VecEventSource<GlueError>),
}

impl EventSource for AnySource {
    type Error = GlueError;
    async fn next_batch(&mut self, out: &mut Vec<StreamEvent>) -> Result<bool, GlueError> {
        match self {
            AnySource::Http(s) => s.next_batch(out).await,
            AnySource::Scripted(s) => s.next_batch(out).await,
        }
    }
    fn id(&self) -> Option<String> {
        match self {
            AnySource::Http(s) => s.id(),
            AnySource::Scripted(s) => s.id(),
        }
    }
    fn usage(&self) -> Option<crate::core::message::TokenUsage> {
        match self {
            AnySource::Http(s) => s.usage(),
            AnySource::Scripted(s) => s.usage(),
        }
    }
    fn finish_reason(&self) -> Option<String> {
        match self {
            AnySource::Http(s) => s.finish_reason(),
            AnySource::Scripted(s) => s.finish_reason(),
        }
    }
    fn limits(&self) -> Limits {
        match self {
            AnySource::Http(s) => s.limits(),
            AnySource::Scripted(s) => s.limits(),
        }
    }
}

/// One request, prepared from the context (the body is built; nothing is sent yet).
enum Prepared {
    Http { provider: Box<HttpProvider>, request: HttpRequest, fetch: Function, timeout_ms: Option<f64> },
    Scripted(crate::core::providers::echo::EchoScript),
}

/// Builds the request for `spec` (or reads its script): the one way every path prepares one.
fn prepare_request(
    spec: ProviderSpec,
    fetch: Option<Function>,
    timeout_ms: Option<f64>,
    system_prompt: &str,
    tools: &[ToolDefinition],
    history: &[Message],
) -> Result<Prepared, GlueError> {
    match spec {
        ProviderSpec::Scripted { script } => Ok(Prepared::Scripted(script_for_stream(&script)?)),
        ProviderSpec::Http(provider) => {
            let request = provider.build_request(system_prompt, tools, history)?;
            let fetch = match fetch {
                Some(f) => f,
                None => {
                    get(&js_sys::global(), "fetch").and_then(|f| f.dyn_into::<Function>().ok()).ok_or_else(|| {
                        ChatProviderError::Other(
                            "no fetch function in this runtime; pass `fetch` in the provider options".into(),
                        )
                    })?
                }
            };
            Ok(Prepared::Http { provider, request, fetch, timeout_ms })
        }
    }
}

/// Opens a prepared request's stream: sends it (or streams the script).
async fn open_prepared(p: Prepared, limits: Limits) -> Result<AnySource, GlueError> {
    match p {
        Prepared::Scripted(s) => Ok(AnySource::Scripted(VecEventSource::new(s.events(), s.id, s.usage))),
        Prepared::Http { provider, request, fetch, timeout_ms } => {
            let ctrl = sys::abort_controller().map_err(GlueError::Js)?;
            // Dropped while waiting for the response headers, the request closes its connection;
            // after that, the body does it when dropped early.
            let mut armed = signals::AbortOnDrop::new(ctrl.clone(), None);
            let body = http::send(&fetch, &request, &ctrl, timeout_ms).await?;
            armed.disarm(); // the body owns the connection now
            Ok(AnySource::Http(Box::new(SseEventSource::new(body, provider.decoder()).with_limits(limits))))
        }
    }
}

fn parse_inputs(
    spec: &str,
    tools: &str,
    history: &str,
) -> Result<(ProviderSpec, Vec<ToolDefinition>, Vec<Message>), JsValue> {
    let bad = |what: &str, e: serde_json::Error| -> JsValue {
        js_sys::TypeError::new(&format!("invalid {what}: {e}")).into()
    };
    let spec = ProviderSpec::parse(spec).map_err(|e| bad("provider", e))?;
    let tools: Vec<ToolDefinition> = serde_json::from_str(tools).map_err(|e| bad("tools", e))?;
    let history: Vec<Message> = serde_json::from_str(history).map_err(|e| bad("history", e))?;
    Ok((spec, tools, history))
}

/// Races `fut` against the caller's signal. On abort or error the request is aborted (so
/// the connection closes) and so is `tools_ctrl` (every started tool's signal). Provider
/// errors leave here cleaned of the API key: one place for every error path.
async fn guarded<T>(
    fut: LocalBoxFuture<'_, Result<T, GlueError>>,
    watch: Option<&AbortWatch>,
    tools_ctrl: &AbortController,
    secret: Option<&str>,
) -> Result<T, JsValue> {
    let to_js = |e: GlueError| match e {
        e => e.redact(secret).into_js(),
    };
    let outcome = match watch {
        Some(w) => match select(fut, Box::pin(w.fired())).await {
            Either::Left((r, _)) => r.map_err(to_js),
            Either::Right((reason, _)) => Err(reason),
        },
        None => fut.await.map_err(to_js),
    };
    if let Err(reason) = &outcome {
        tools_ctrl.abort_with_reason(&reason);
    }
    outcome
}

fn result_object(out: &crate::core::generate::GenerateOutput) -> Object {
    let o = Object::new();
    let set = |k: &str, v: JsValue| {
        let _ = Reflect::set(&o, &JsValue::from_str(k), &v);
    };
    set("id", out.id.as_deref().map(JsValue::from_str).unwrap_or(JsValue::NULL));
    set("message", JsValue::from_str(&serde_json::to_string(&out.message).unwrap_or_default()));
    set("usage", out.usage.map(|u| tools::to_js(&u)).unwrap_or(JsValue::NULL));
    set("finishReason", out.finish_reason.as_deref().map(JsValue::from_str).unwrap_or(JsValue::NULL));
    o
}

/// What one call of the engine works with: its inputs, its two controllers (the request's
/// and the tools'), and the watch on the caller's signal.
struct Call {
    spec: ProviderSpec,
    system_prompt: String,
    tools: Vec<ToolDefinition>,
    history: Vec<Message>,
    hooks: Hooks,
    tools_ctrl: AbortController,
    watch: Option<AbortWatch>,
}

impl Call {
    /// Reads the inputs; a signal that has already aborted rejects with its reason at once.
    fn begin(spec: &str, system_prompt: String, tools: &str, history: &str, hooks: &JsValue) -> Result<Call, JsValue> {
        let hooks = Hooks::read(hooks);
        if let Some(s) = hooks.signal.as_ref().filter(|s| s.aborted()) {
            return Err(s.reason());
        }
        let (spec, tools, history) = parse_inputs(spec, tools, history)?;
        let watch = hooks.signal.clone().map(AbortWatch::new);
        Ok(Call { spec, system_prompt, tools, history, hooks, tools_ctrl: sys::abort_controller()?, watch })
    }

    async fn open(&self) -> Result<AnySource, GlueError> {
        let p = prepare_request(
            self.spec.clone(),
            self.hooks.fetch.clone(),
            self.hooks.timeout_ms,
            &self.system_prompt,
            &self.tools,
            &self.history,
        )?;
        open_prepared(p, self.hooks.limits).await
    }

    fn secret(&self) -> Option<&str> {
        match &self.spec {
            ProviderSpec::Http(cfg) => cfg.api_key(),
            ProviderSpec::Scripted { .. } => None,
        }
    }

    async fn guard<T>(&self, fut: LocalBoxFuture<'_, Result<T, GlueError>>) -> Result<T, JsValue> {
        guarded(fut, self.watch.as_ref(), &self.tools_ctrl, self.secret()).await
    }
}

/// A failed step as the JS error: the provider's error (cleaned of the key), carrying the
/// salvaged round as `salvaged`: the generation's object (as `runStep` gives it) plus `results`
/// (JSON text; `step.js` makes it the documented object) when a call had been handed on.
fn step_failure_to_js(f: StepFailure<GlueError>, secret: Option<&str>) -> JsValue {
    let e = f.error.redact(secret).into_js();
    if let Some(s) = f.salvaged {
        let o = result_object(&s.generated);
        let results = serde_json::to_string(&s.results).unwrap_or_else(|_| "[]".into());
        let _ = Reflect::set(&o, &JsValue::from_str("results"), &JsValue::from_str(&results));
        if e.is_object() {
            let _ = Reflect::set(&e, &JsValue::from_str("salvaged"), &o);
        }
    }
    e
}

/// One generation: `{id, message (JSON), usage, finishReason}`.
#[wasm_bindgen(js_name = runGenerate)]
pub fn run_generate(spec: String, system_prompt: String, tools: String, history: String, hooks: JsValue) -> Promise {
    future_to_promise(async move {
        let call = Call::begin(&spec, system_prompt, &tools, &history, &hooks)?;
        let hooks = &call.hooks;
        let work = async {
            let mut source = call.open().await?;
            generate(&mut source, PartBatch::new(&hooks.on_part), |c: &ToolCall| call_json_hook(&hooks.on_tool_call, c))
                .await
        };
        let out = call.guard(work.boxed_local()).await?;
        Ok(result_object(&out).into())
    })
}

/// One step: the generation's object plus `results`, a Promise of the tool results (JSON,
/// call order) that rejects with the signal's reason if the signal aborts first.
#[wasm_bindgen(js_name = runStep)]
pub fn run_step(spec: String, system_prompt: String, tools: String, history: String, hooks: JsValue) -> Promise {
    future_to_promise(async move {
        let call = Call::begin(&spec, system_prompt, &tools, &history, &hooks)?;
        let hooks = &call.hooks;
        let toolset = tools::JsToolset::new(
            hooks.toolset.clone(),
            hooks.lazy_tools.clone(),
            tools::ToolSignals::Shared(call.tools_ctrl.signal()),
            hooks.warn.clone(),
            None,
        )?;
        let on_tool_result: Option<ToolResultCallback> = hooks.on_tool_result.clone().map(|f| {
            Rc::new(move |r: &ToolResult| {
                // A throwing onToolResult cannot fail a tool that already finished.
                let _ = call_json_hook(&Some(f.clone()), r);
            }) as ToolResultCallback
        });
        let spawn = |f: LocalBoxFuture<'static, ()>| spawn_local(f);
        let work = async {
            let mut source = call.open().await?;
            Ok(step(&mut source, &toolset, &spawn, PartBatch::new(&hooks.on_part), on_tool_result).await)
        };
        let out = match call.guard(work.boxed_local()).await? {
            Ok(out) => out,
            Err(f) => {
                // The started tools have settled (a salvage awaits them): the error goes out with
                // the round, and nothing is left for the tools' controller to stop.
                call.tools_ctrl.abort();
                return Err(step_failure_to_js(f, call.secret()));
            }
        };
        let obj = result_object(&out.generated);
        let results = out.results;
        let drivers = out.drivers;
        let results_promise = future_to_promise(async move {
            let _drivers = drivers; // dropping them stops waiting on the tools
            let gathered = async { Ok::<_, GlueError>(collect_results(results).await) }.boxed_local();
            let rs = call.guard(gathered).await?;
            drop(call); // the abort listener goes with it
            Ok(JsValue::from_str(&serde_json::to_string(&rs).unwrap_or_else(|_| "[]".into())))
        });
        let _ = Reflect::set(&obj, &"results".into(), &results_promise);
        Ok(obj.into())
    })
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

/// Why a provider's `baseUrl` cannot be used (`null` when it can): the core's one rule, checked by
/// the provider constructors so a bad URL fails up front, before any request.
#[wasm_bindgen(js_name = baseUrlProblem)]
pub fn base_url_problem(url: &str) -> Option<String> {
    crate::core::providers::base_url_problem(url)
}

/// The instance-wide memory budget (see `core::budget`), in bytes.
#[wasm_bindgen(js_name = setMemoryBudget)]
pub fn set_memory_budget(bytes: f64) {
    crate::core::budget::set_limit(if bytes.is_finite() && bytes >= 1.0 { bytes as usize } else { 1 });
}

#[wasm_bindgen(js_name = memoryBudgetLimit)]
pub fn memory_budget_limit() -> f64 {
    crate::core::budget::limit() as f64
}

#[wasm_bindgen(js_name = memoryBudgetUsed)]
pub fn memory_budget_used() -> f64 {
    crate::core::budget::used() as f64
}
