//! Glue for the soul runtime: thin handles on the core's Wire, Context and agent turn
//! (`src/core/soul/`). Plain data crosses as JSON text (see `tools::to_js`); the turn's seams
//! are filled with the JS provider, the JS toolset, `setTimeout` and `Math.random`.

use std::cell::RefCell;
use std::rc::Rc;

use futures::future::LocalBoxFuture;
use futures::FutureExt;
use js_sys::{Function, Promise};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::{future_to_promise, spawn_local};

use super::signals::{AbortWatch, Awaited};
use super::sys::{self, AbortSignal};
use super::tools::{read_js, to_js, JsToolset, RunFunctions, ToolSignals};
use super::{get, open_prepared, prepare_request, read_limits, AnySource, GlueError, Prepared, ProviderSpec};
use crate::core::error::ChatProviderError;
use crate::core::generate::Limits;
use crate::core::message::Message;
use crate::core::providers::ToolDefinition;
use crate::core::soul::agent::{self, AgentConfig, Env, Model, SeamError, Turn, TurnError, TurnTools, UserInput};
use crate::core::soul::approval::{ApprovalState, Approvals};
use crate::core::soul::context::{Context, ContextWrite, SharedContext};
use crate::core::soul::rules::Backoff;
use crate::core::soul::run::{self, RunOutcome};
use crate::core::soul::wire::{self, ApprovalResponse, Recorder, UiSide, Wire, WireMessage};

fn type_error(msg: &str) -> JsValue {
    js_sys::TypeError::new(msg).into()
}

// ---- the wire -------------------------------------------------------------------------------

/// The state behind the JS `Wire`.
#[wasm_bindgen]
pub struct WireCore {
    wire: Wire,
}

#[wasm_bindgen]
impl WireCore {
    #[wasm_bindgen(constructor)]
    pub fn new() -> WireCore {
        WireCore { wire: Wire::new() }
    }

    #[wasm_bindgen(js_name = uiSide)]
    pub fn ui_side(&self, merge: bool) -> WireSideCore {
        WireSideCore { side: self.wire.ui_side(merge) }
    }

    /// Publishes `{type, payload}`.
    pub fn send(&self, message: JsValue) -> Result<(), JsValue> {
        let m: WireMessage =
            read_js(&message).map_err(|_| type_error("a wire message is {type: string, payload: object}"))?;
        self.wire.send(m);
        Ok(())
    }

    pub fn respond(&self, request_id: &str, response: &str, feedback: &str) -> Result<(), JsValue> {
        let r = ApprovalResponse::parse(response).ok_or_else(|| {
            type_error(&format!("response must be \"approve\", \"approve_for_session\" or \"reject\"; got {response}"))
        })?;
        self.wire.respond(request_id, r, feedback).map_err(|e| js_sys::Error::new(&e.to_string()).into())
    }

    /// Publishes an `ApprovalRequest` (`payload.id` names it); resolves `{response, feedback}`.
    #[wasm_bindgen(js_name = requestApproval)]
    pub fn request_approval(&self, payload: JsValue) -> Result<Promise, JsValue> {
        let payload: serde_json::Value =
            read_js(&payload).map_err(|e| type_error(&format!("invalid approval request: {e}")))?;
        let id =
            payload.get("id").and_then(|v| v.as_str()).ok_or_else(|| type_error("an approval request needs an id"))?;
        let answer = self.wire.request_approval(id.to_owned(), payload.clone());
        Ok(future_to_promise(async move {
            let a = answer.await;
            Ok(to_js(&serde_json::json!({"response": a.response.as_str(), "feedback": a.feedback})))
        }))
    }

    /// Rejects every waiting approval request (the run was cancelled).
    #[wasm_bindgen(js_name = rejectPending)]
    pub fn reject_pending(&self) {
        self.wire.reject_pending();
    }

    pub fn shutdown(&self) {
        self.wire.shutdown();
    }

    pub fn flush(&self) {
        self.wire.flush();
    }

    /// Records the merged messages as `wire.jsonl` lines through `sink(line)`.
    #[wasm_bindgen(js_name = setRecorder)]
    pub fn set_recorder(&self, sink: Function) {
        let write = move |line: String| {
            let _ = sink.call1(&JsValue::UNDEFINED, &JsValue::from_str(&line));
        };
        self.wire.set_recorder(Recorder::new(Box::new(write), Box::new(|| sys::date_now() / 1000.0)));
    }

    #[wasm_bindgen(getter)]
    pub fn recorded(&self) -> f64 {
        self.wire.recorded() as f64
    }
}

impl Default for WireCore {
    fn default() -> Self {
        Self::new()
    }
}

/// One subscriber of a wire.
#[wasm_bindgen]
pub struct WireSideCore {
    side: UiSide,
}

#[wasm_bindgen]
impl WireSideCore {
    /// Every message that is ready, as the JSON text of an array (`undefined` when none is).
    /// JSON text on purpose: a batch crosses in 2 calls this way, where building it field by
    /// field (serde-wasm-bindgen) took about 15 calls per message (bench/crossings.mjs).
    pub fn take(&self) -> Option<String> {
        let ready = self.side.take_ready();
        if ready.is_empty() {
            return None;
        }
        serde_json::to_string(&ready).ok()
    }

    /// Resolves when a message is ready or the side is finished.
    pub fn wait(&self) -> Promise {
        let ready = self.side.ready();
        future_to_promise(async move {
            ready.await;
            Ok(JsValue::UNDEFINED)
        })
    }

    #[wasm_bindgen(getter)]
    pub fn finished(&self) -> bool {
        self.side.is_finished()
    }

    pub fn detach(&self) {
        self.side.detach();
    }
}

/// `wire.jsonl` back into messages, as the JSON text of an array of the recorded messages
/// (parsed by `JSON.parse`, whose numbers are exact: serde_json's are not without its
/// `float_roundtrip` feature, 18 KB of .wasm).
#[wasm_bindgen(js_name = readWireRecord)]
pub fn read_wire_record(jsonl: &str) -> String {
    wire::wire_record_json(jsonl)
}

/// Runs a soul beside its UI loop (the core's `run_soul`): `soul` and `ui` are their promises,
/// `recorded()` the promise that every recorded line is written. Resolves `true` when `signal`
/// cancelled the run, `false` when the soul finished; rejects with the soul's own error.
#[wasm_bindgen(js_name = runSoul)]
pub fn run_soul(
    wire: &WireCore,
    soul: Promise,
    ui: Promise,
    signal: AbortSignal,
    recorded: Option<Function>,
) -> Promise {
    let wire = wire.wire.clone();
    future_to_promise(async move {
        let watch = AbortWatch::new(signal);
        let soul = Awaited::new(&soul);
        let ui = async move {
            let _ = Awaited::new(&ui).await;
        };
        let cancel = async {
            watch.fired().await;
        };
        let recorded = move || async move {
            if let Some(p) = recorded.and_then(|f| f.call0(&JsValue::UNDEFINED).ok()) {
                let _ = Awaited::new(&p).await;
            }
        };
        match run::run_soul(&wire, async { soul.await.map(|_| ()) }, ui, cancel, recorded, &WebEnv).await {
            RunOutcome::Done => Ok(JsValue::FALSE),
            RunOutcome::Cancelled => Ok(JsValue::TRUE),
            RunOutcome::Failed(e) => Err(e),
        }
    })
}

// ---- the context ----------------------------------------------------------------------------

/// The state behind the JS `Context`.
#[wasm_bindgen]
pub struct ContextCore {
    ctx: SharedContext,
    /// What the store threw when a write failed (thrown to whoever changed the context).
    store_error: Rc<RefCell<Option<JsValue>>>,
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
            let Some(f) = f else { return true };
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
            return Err(js_sys::RangeError::new(&format!("Checkpoint {id} does not exist")).into());
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

// ---- the agent's seams ----------------------------------------------------------------------

impl SeamError for GlueError {
    fn provider_error(&self) -> Option<&ChatProviderError> {
        match self {
            GlueError::Provider(e) | GlueError::Caused(e, _) => Some(e),
            GlueError::Js(_) => None,
        }
    }
}

/// The JS provider object (`provider._request()` describes each request).
struct JsModel {
    provider: JsValue,
    limits: Limits,
    /// The API key of the last request, to clean it out of any error.
    secret: RefCell<Option<String>>,
}

impl Model for JsModel {
    type Request = Prepared;
    type Source = AnySource;

    fn model_name(&self) -> String {
        get(&self.provider, "modelName").and_then(|v| v.as_string()).unwrap_or_default()
    }

    fn prepare(
        &self,
        system_prompt: &str,
        tools: &[ToolDefinition],
        history: &[Message],
    ) -> Result<Prepared, GlueError> {
        let request = get(&self.provider, "_request")
            .and_then(|f| f.dyn_into::<Function>().ok())
            .ok_or_else(|| GlueError::Js(type_error("provider must be one of this package's providers")))?;
        let r = request.call0(&self.provider).map_err(GlueError::Js)?;
        let spec = get(&r, "spec").and_then(|s| s.as_string()).unwrap_or_default();
        let spec =
            ProviderSpec::parse(&spec).map_err(|e| GlueError::Js(type_error(&format!("invalid provider: {e}"))))?;
        if let ProviderSpec::Http(cfg) = &spec {
            *self.secret.borrow_mut() = cfg.api_key().map(str::to_owned);
        }
        let fetch = get(&r, "fetch").and_then(|f| f.dyn_into::<Function>().ok());
        let timeout_ms = get(&r, "timeoutMs").and_then(|v| v.as_f64()).filter(|v| *v > 0.0);
        prepare_request(spec, fetch, timeout_ms, system_prompt, tools, history)
    }

    fn open(&self, p: Prepared) -> LocalBoxFuture<'_, Result<AnySource, GlueError>> {
        open_prepared(p, self.limits).boxed_local()
    }
}

impl TurnTools for JsToolset {
    fn definitions(&self) -> Vec<ToolDefinition> {
        JsToolset::definitions(self)
    }
}

/// Timers from `setTimeout`, jitter from `Math.random`, tasks on the microtask queue.
struct WebEnv;

impl Env for WebEnv {
    fn sleep(&self, ms: f64) -> LocalBoxFuture<'static, ()> {
        gloo_timers::future::TimeoutFuture::new(ms.clamp(0.0, u32::MAX as f64) as u32).boxed_local()
    }
    fn random(&self) -> f64 {
        js_sys::Math::random()
    }
    fn spawn(&self, task: LocalBoxFuture<'static, ()>) {
        spawn_local(task)
    }
}

// ---- the agent ------------------------------------------------------------------------------

/// The state behind the JS `Agent`: its configuration and what it remembers between turns.
#[wasm_bindgen]
pub struct AgentCore {
    config: Rc<AgentConfig>,
    approvals: Rc<RefCell<ApprovalState>>,
    /// A turn is running: a second one is refused (two turns would interleave in one context).
    busy: Rc<std::cell::Cell<bool>>,
}

/// Marks an agent busy until dropped (the turn's future ended, however it ended).
struct Busy(Rc<std::cell::Cell<bool>>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.set(false);
    }
}

#[wasm_bindgen]
impl AgentCore {
    /// `opts`: `{name, systemPrompt, maxStepsPerTurn, maxRetriesPerStep, maxContextTokens,
    /// capabilities, yolo, retryBackoff: {initialMs, maxMs, jitterMs}}`, checked by the JS layer.
    #[wasm_bindgen(constructor)]
    pub fn new(opts: JsValue) -> Result<AgentCore, JsValue> {
        // Read field by field (the JS layer checked every one): no derived deserializer.
        let (d, b) = (AgentConfig::default(), Backoff::default());
        let field = |obj: &JsValue, key: &str| super::get(obj, key).unwrap_or(JsValue::UNDEFINED);
        let number = |obj: &JsValue, key: &str| field(obj, key).as_f64();
        let non_negative = |v: Option<f64>| v.filter(|v| v.is_finite() && *v >= 0.0);
        let count = |key: &str, default: u32| non_negative(number(&opts, key)).map_or(default, |v| v as u32);
        let backoff = field(&opts, "retryBackoff");
        let capabilities = field(&opts, "capabilities");
        let capabilities = js_sys::Array::is_array(&capabilities)
            .then(|| js_sys::Array::from(&capabilities).iter().filter_map(|c| c.as_string()).collect());
        let config = AgentConfig {
            name: field(&opts, "name").as_string().unwrap_or(d.name),
            system_prompt: field(&opts, "systemPrompt").as_string().unwrap_or_default(),
            max_steps_per_turn: count("maxStepsPerTurn", d.max_steps_per_turn),
            max_retries_per_step: count("maxRetriesPerStep", d.max_retries_per_step),
            max_context_tokens: non_negative(number(&opts, "maxContextTokens")).map_or(0, |v| v as u64),
            capabilities,
            backoff: Backoff {
                initial_ms: non_negative(number(&backoff, "initialMs")).unwrap_or(b.initial_ms),
                max_ms: non_negative(number(&backoff, "maxMs")).unwrap_or(b.max_ms),
                jitter_ms: non_negative(number(&backoff, "jitterMs")).unwrap_or(b.jitter_ms),
            },
        };
        let yolo = field(&opts, "yolo").as_bool().unwrap_or(false);
        Ok(AgentCore {
            config: Rc::new(config),
            approvals: Rc::new(RefCell::new(ApprovalState::new(yolo))),
            busy: Rc::default(),
        })
    }

    /// kimi-cli's status snapshot for this agent on `context`.
    pub fn status(&self, context: &ContextCore) -> JsValue {
        to_js(&agent::status(&self.config, &context.ctx, self.approvals.borrow().yolo))
    }

    /// Runs one turn. `hooks`: `{signal, warn, limits}`. Resolves when the turn ended well;
    /// rejects with the provider's error, the signal's reason when cancelled, or
    /// `{turnError, …fields}` for the runtime's own errors (made into classes by the JS layer).
    pub fn run(
        &self,
        user_input: JsValue,
        wire: &WireCore,
        context: &ContextCore,
        provider: JsValue,
        toolset: JsValue,
        hooks: JsValue,
    ) -> Result<Promise, JsValue> {
        if self.busy.get() {
            return Err(js_sys::Error::new(&format!(
                "Agent `{}` is already running a turn: one turn at a time (wait for it, or abort it, before starting another)",
                self.config.name
            ))
            .into());
        }
        let input: UserInput =
            read_js(&user_input).map_err(|_| type_error("userInput must be a string or an array of content parts"))?;
        let signal: Option<AbortSignal> = get(&hooks, "signal").map(|s| s.unchecked_into());
        let warn = get(&hooks, "warn").and_then(|f| f.dyn_into::<Function>().ok());
        let limits = read_limits(get(&hooks, "limits"));
        let wire = wire.wire.clone();
        let approvals = Rc::new(Approvals::new(
            wire.clone(),
            self.approvals.clone(),
            self.config.name.clone(),
            Box::new(sys::random_uuid),
        ));
        let run_fns = RunClosures::new(&wire, &approvals);
        let tools =
            JsToolset::new(toolset, Vec::new(), ToolSignals::PerCall(signal.clone()), warn, Some(run_fns.functions()))?;
        let model = (!provider.is_null() && !provider.is_undefined()).then(|| JsModel {
            provider,
            limits,
            secret: RefCell::new(None),
        });
        let (config, store_error, context) = (self.config.clone(), context.store_error.clone(), context.ctx.clone());
        self.busy.set(true);
        let busy = Busy(self.busy.clone());
        Ok(future_to_promise(async move {
            let _busy = busy;
            let _run_fns = run_fns; // the tools' `send`/`requestApproval`/`rejection` live as long as the run
            let watch = signal.clone().map(AbortWatch::new);
            let cancel = async {
                match &watch {
                    Some(w) => {
                        w.fired().await;
                    }
                    None => futures::future::pending::<()>().await,
                }
            };
            let turn = Turn {
                config: &config,
                context: &context,
                model: model.as_ref(),
                tools: &tools,
                wire: &wire,
                approvals: &approvals,
                env: &WebEnv,
            };
            let outcome = turn.run(input, cancel).await;
            let secret = model.as_ref().and_then(|m| m.secret.borrow().clone());
            outcome.map(|()| JsValue::UNDEFINED).map_err(|e| match e {
                TurnError::ContextStore => store_error.borrow_mut().take().unwrap_or(JsValue::UNDEFINED),
                e => turn_error_to_js(e, signal.as_ref(), secret.as_deref()),
            })
        }))
    }
}

fn turn_error_to_js(e: TurnError<GlueError>, signal: Option<&AbortSignal>, secret: Option<&str>) -> JsValue {
    let fields = |kind: &str, more: serde_json::Value| {
        let mut v = serde_json::json!({ "turnError": kind });
        if let (Some(o), serde_json::Value::Object(m)) = (v.as_object_mut(), more) {
            o.extend(m);
        }
        to_js(&v)
    };
    match e {
        TurnError::Seam(e) => e.redact(secret).into_js(),
        TurnError::Cancelled => signal.map(|s| s.reason()).unwrap_or(JsValue::UNDEFINED),
        TurnError::ContextStore => js_sys::Error::new("the context's store refused a write").into(),
        TurnError::LLMNotSet => fields("LLMNotSet", serde_json::json!({})),
        TurnError::LLMNotSupported { model_name, capabilities } => {
            fields("LLMNotSupported", serde_json::json!({"modelName": model_name, "capabilities": capabilities}))
        }
        TurnError::MaxStepsReached(n) => fields("MaxStepsReached", serde_json::json!({ "nSteps": n })),
        TurnError::RepeatedToolCall { tool_name, count } => {
            fields("RepeatedToolCallError", serde_json::json!({"toolName": tool_name, "count": count}))
        }
    }
}

/// The functions a run's tools get in their context, as closures over the run.
struct RunClosures {
    send: Closure<dyn Fn(JsValue) -> Result<(), JsValue>>,
    request_approval: Closure<dyn Fn(String, JsValue) -> Promise>,
    rejection: Closure<dyn Fn(String) -> JsValue>,
}

impl RunClosures {
    fn new(wire: &Wire, approvals: &Rc<Approvals>) -> RunClosures {
        let w = wire.clone();
        let send = Closure::<dyn Fn(JsValue) -> Result<(), JsValue>>::new(move |m: JsValue| {
            let m: WireMessage =
                read_js(&m).map_err(|_| type_error("a wire message is {type: string, payload: object}"))?;
            w.send(m);
            Ok(())
        });
        let a = approvals.clone();
        let request_approval =
            Closure::<dyn Fn(String, JsValue) -> Promise>::new(move |call_id: String, req: JsValue| {
                let action = get(&req, "action").and_then(|v| v.as_string()).unwrap_or_default();
                let description = get(&req, "description").and_then(|v| v.as_string()).unwrap_or_default();
                match a.request(&call_id, &action, &description) {
                    Ok(answer) => future_to_promise(async move { Ok(JsValue::from_bool(answer.await)) }),
                    Err(e) => Promise::reject(&type_error(&e.to_string())),
                }
            });
        let a = approvals.clone();
        let rejection = Closure::<dyn Fn(String) -> JsValue>::new(move |call_id: String| to_js(&a.rejection(&call_id)));
        RunClosures { send, request_approval, rejection }
    }

    fn functions(&self) -> RunFunctions {
        let o = js_sys::Object::new();
        let set = |k: &str, c: &JsValue| {
            let _ = js_sys::Reflect::set(&o, &JsValue::from_str(k), c);
        };
        set("send", self.send.as_ref());
        set("requestApproval", self.request_approval.as_ref());
        set("rejection", self.rejection.as_ref());
        RunFunctions(o)
    }
}
