//! `AgentCore`: the state behind the JS `Agent`, and one turn of the core's agent over the
//! provider's model, the JS toolset and the web environment (`WebEnv`: `setTimeout`,
//! `Math.random`, the microtask queue).

use std::cell::RefCell;
use std::rc::Rc;

use futures::future::LocalBoxFuture;
use futures::FutureExt;
use js_sys::{Function, Promise};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::{future_to_promise, spawn_local};

use super::context::ContextCore;
use super::convert::{read_js, to_js};
use super::error::{type_error, GlueError};
use super::output::{OutputOption, Problem};
use super::provider::{Members, ProviderCore};
use super::session::{refusal_to_js, SessionCore};
use super::signals::AbortWatch;
use super::signals::StopReason;
use super::sys::{self, AbortSignal};
use super::tools::{JsToolset, RunFunctions, ToolSignals};
use super::wire::WireCore;
use super::{get, read_limits};
use crate::engine::generate::Limits;
use crate::engine::providers::ToolDefinition;
use crate::engine::session::{Refused, Session, TurnOutcome};
use crate::engine::soul::agent::{self, AgentConfig, Env, Turn, TurnError, TurnTools, UserInput};
use crate::engine::soul::approval::{ApprovalState, Approvals};
use crate::engine::soul::context::SharedContext;
use crate::engine::soul::recovery::{RecordedTurn, RecoveryBudget};
use crate::engine::soul::rules::Backoff;
use crate::engine::soul::wire::{Wire, WireMessage};

impl TurnTools for JsToolset {
    fn definitions(&self) -> Vec<ToolDefinition> {
        JsToolset::definitions(self)
    }
}

/// Timers from `setTimeout`, jitter from `Math.random`, tasks on the microtask queue.
pub struct WebEnv;

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
    fn now_s(&self) -> f64 {
        sys::date_now() / 1000.0
    }
}

/// An agent's environment: the web's, and its structured output's check (the value kept for
/// `AgentCore.output`).
struct AgentEnv {
    output: Option<Rc<OutputOption>>,
    last: Rc<RefCell<JsValue>>,
    /// What the tools' signals abort with when the turn stops itself.
    stop: StopReason,
    /// What the run's sub-agents used so far.
    subagents: super::subagent::Usage,
}

impl Env for AgentEnv {
    fn sleep(&self, ms: f64) -> LocalBoxFuture<'static, ()> {
        WebEnv.sleep(ms)
    }
    fn random(&self) -> f64 {
        WebEnv.random()
    }
    fn spawn(&self, task: LocalBoxFuture<'static, ()>) {
        WebEnv.spawn(task)
    }
    fn now_s(&self) -> f64 {
        WebEnv.now_s()
    }
    fn subagent_usage(&self) -> Option<crate::engine::message::TokenUsage> {
        *self.subagents.borrow()
    }
    fn turn_timed_out(&self, ms: f64) {
        let why =
            format!("the turn ran past its time limit of {} ms (turnTimeoutMs)", crate::engine::json::number_text(ms));
        self.stop.replace(Some(sys::timeout_error(&why)));
    }
    fn accept_output(&self, json: &str) -> Result<(), String> {
        let Some(o) = &self.output else { return Ok(()) };
        match o.check(json) {
            Ok(v) => {
                self.last.replace(v);
                Ok(())
            }
            Err(Problem::Why(why)) => Err(why),
            Err(Problem::Thrown(e)) => {
                let said = get(&e, "message").and_then(|m| m.as_string()).or_else(|| e.as_string());
                Err(format!("the validator threw: {}", said.unwrap_or_else(|| "a value that is not an Error".into())))
            }
        }
    }
}

// ---- the agent ------------------------------------------------------------------------------

/// The state behind the JS `Agent`: its configuration and what it remembers between turns.
#[wasm_bindgen]
pub struct AgentCore {
    pub(super) config: Rc<AgentConfig>,
    approvals: Rc<RefCell<ApprovalState>>,
    /// A turn is running: a second one is refused (two turns would interleave in one context).
    busy: Rc<std::cell::Cell<bool>>,
    /// The agent's provider, read once (`None`: the turn fails with `LLMNotSet`).
    pub(super) provider: Option<Members>,
    limits: Limits,
    /// The structured output every turn asks for, with the caller's validator.
    output: Option<Rc<OutputOption>>,
    /// The last turn's structured output (`undefined` until a turn gave one).
    last_output: Rc<RefCell<JsValue>>,
    /// The sub-agent instances its turns started (their contexts, by agent id).
    instances: super::subagent::Instances,
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
    /// capabilities, yolo, retryBackoff: {initialMs, maxMs, jitterMs}, limits}`, checked by the JS
    /// layer (the limits by the core: [`Limits::set`]).
    #[wasm_bindgen(constructor)]
    pub fn new(opts: JsValue) -> Result<AgentCore, JsValue> {
        // Read field by field (the JS layer checked every one): no derived deserializer.
        let (d, b) = (AgentConfig::default(), Backoff::default());
        let field = |obj: &JsValue, key: &str| get(obj, key).unwrap_or(JsValue::UNDEFINED);
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
            output: None,
            tool_timeouts: super::tools::read_tool_timeouts(get(&opts, "toolTimeoutMs"), "Agent")?,
            turn_timeout_ms: super::tools::read_time_limit(get(&opts, "turnTimeoutMs"), "Agent: turnTimeoutMs")?,
        };
        let yolo = field(&opts, "yolo").as_bool().unwrap_or(false);
        let output = OutputOption::read(&opts, "Agent")?.map(Rc::new);
        let config = AgentConfig { output: output.as_ref().map(|o| o.format.clone()), ..config };
        Ok(AgentCore {
            output,
            last_output: Rc::new(RefCell::new(JsValue::UNDEFINED)),
            config: Rc::new(config),
            approvals: Rc::new(RefCell::new(ApprovalState::new(yolo))),
            busy: Rc::default(),
            instances: Rc::default(),
            provider: None,
            limits: read_limits(get(&opts, "limits"), "Agent")?,
        })
    }

    /// The provider every turn of this agent runs over.
    #[wasm_bindgen(js_name = setProvider)]
    pub fn set_provider(&mut self, provider: &ProviderCore) {
        self.provider = Some(provider.members_for_call());
    }

    /// The last turn's structured output (`undefined` when that turn gave none or failed).
    #[wasm_bindgen(getter)]
    pub fn output(&self) -> JsValue {
        self.last_output.borrow().clone()
    }

    /// kimi-cli's status snapshot for this agent on `context`.
    pub fn status(&self, context: &ContextCore) -> JsValue {
        to_js(&agent::status(&self.config, &context.ctx, self.approvals.borrow().yolo))
    }

    /// Runs one turn. `hooks`: `{signal, warn, simple}` (`simple`: the toolset's registry id
    /// when it is a `SimpleToolset`). Resolves when the turn ended well;
    /// rejects with the provider's error, the signal's reason when cancelled, or
    /// `{turnError, …fields}` for the runtime's own errors (made into classes by the JS layer).
    pub fn run(
        &self,
        user_input: JsValue,
        wire: &WireCore,
        context: &ContextCore,
        toolset: JsValue,
        hooks: JsValue,
    ) -> Result<Promise, JsValue> {
        let input: UserInput =
            read_js(&user_input).map_err(|_| type_error("userInput must be a string or an array of content parts"))?;
        self.start(Start::Run(input), wire, context.parts(), toolset, hooks, None)
    }

    /// Starts a turn of `session` on `user_input` (refused, nothing counted, with `{refused,
    /// message}` thrown), attached to the session (its writes, its gate), on `wire` and `context`
    /// (the session's, from `SessionCore.context`). The turn's end goes to the session; the
    /// promise settles as `run`'s.
    #[wasm_bindgen(js_name = runSession)]
    pub fn run_session(
        &self,
        session: &SessionCore,
        user_input: JsValue,
        wire: &WireCore,
        context: &ContextCore,
        toolset: JsValue,
        hooks: JsValue,
    ) -> Result<Promise, JsValue> {
        let input: UserInput = read_js(&user_input)
            .map_err(|_| type_error("the message must be a string or an array of content parts"))?;
        if self.busy.get() {
            return Err(refusal_to_js(&Refused::Busy("a turn is already running in this session".into())));
        }
        session.session.submit(&input, sys::date_now()).map_err(|r| refusal_to_js(&r))?;
        session.session.attach(&wire.wire, &context.ctx);
        // A new session's context starts with its system prompt, as kimi-cli's does.
        let (prompt, ctx) = (&self.config.system_prompt, &context.ctx);
        if !prompt.is_empty() && ctx.read(|c| c.system_prompt().is_none() && c.history().is_empty()) {
            ctx.write_system_prompt(prompt);
        }
        self.start(Start::Run(input), wire, context.parts(), toolset, hooks, Some(session.session.clone()))
    }

    /// Goes on with (or closes) the turn the session's store holds unfinished; `null` when there
    /// is none to take up now.
    #[wasm_bindgen(js_name = resumeSession)]
    pub fn resume_session(
        &self,
        session: &SessionCore,
        wire: &WireCore,
        context: &ContextCore,
        toolset: JsValue,
        hooks: JsValue,
    ) -> Result<Option<Promise>, JsValue> {
        if self.busy.get() {
            return Ok(None);
        }
        let Some((turn, budget)) = session.session.poll_resume() else { return Ok(None) };
        session.session.attach(&wire.wire, &context.ctx);
        self.start(
            Start::Resume(Box::new(turn), budget),
            wire,
            context.parts(),
            toolset,
            hooks,
            Some(session.session.clone()),
        )
        .map(Some)
    }

    /// Goes on with the turn its runtime died in, from the turn's recorded messages (`recorded`:
    /// the JSON text of an array of wire messages, oldest first) and this agent's context (see
    /// `engine::soul::recovery`). `hooks` as for `run`, plus `maxResumes`. Throws a
    /// `TurnNotRecovered` error, with nothing applied, when the recording has no unfinished turn
    /// or is not this context's.
    pub fn resume(
        &self,
        recorded: &str,
        wire: &WireCore,
        context: &ContextCore,
        toolset: JsValue,
        hooks: JsValue,
    ) -> Result<Promise, JsValue> {
        let not_recovered = |why: String| {
            GlueError::Runtime { class: "TurnNotRecovered", message: why, fields: js_sys::Object::new() }.into_js()
        };
        let messages: Vec<WireMessage> = serde_json::from_str(recorded)
            .map_err(|e| type_error(&format!("the recording is not a list of wire messages: {e}")))?;
        let turn = RecordedTurn::read(&messages).map_err(|e| not_recovered(e.to_string()))?;
        context.ctx.read(|c| turn.check_context(c)).map_err(|e| not_recovered(e.to_string()))?;
        let mut budget = RecoveryBudget::default();
        if let Some(n) = get(&hooks, "maxResumes").and_then(|v| v.as_f64()).filter(|n| n.is_finite() && *n >= 0.0) {
            budget.max_resumes = n as u32;
        }
        self.start(Start::Resume(Box::new(turn), budget), wire, context.parts(), toolset, hooks, None)
    }

    /// Starts a turn: a user's, a recovered one, or a sub-agent call's (then on its parent's
    /// approvals and provider, without the one-turn-at-a-time rule: each call is its own
    /// instance, and it resolves with the call's result).
    pub(super) fn start(
        &self,
        start: Start,
        wire: &WireCore,
        context: (SharedContext, Rc<RefCell<Option<JsValue>>>),
        toolset: JsValue,
        hooks: JsValue,
        session: Option<Session>,
    ) -> Result<Promise, JsValue> {
        let sub = matches!(start, Start::Subagent(_));
        if self.busy.get() && !sub {
            return Err(js_sys::Error::new(&format!(
                "Agent `{}` is already running a turn: one turn at a time (wait for it, or abort it, before starting another)",
                self.config.name
            ))
            .into());
        }
        let signal: Option<AbortSignal> = get(&hooks, "signal").map(|s| s.unchecked_into());
        let warn = get(&hooks, "warn").and_then(|f| f.dyn_into::<Function>().ok());
        let limits = self.limits;
        let wire = wire.wire.clone();
        // A turn of this agent's own: its approvals on its wire, and the run its tools' calls are in.
        let root = |job: Job, recorded: (Vec<_>, RecoveryBudget)| {
            // approve_for_session is the session's: across turns and deaths.
            for action in session.iter().flat_map(Session::approved_for_session) {
                self.approvals.borrow_mut().approve_for_session(&action);
            }
            let approvals = Rc::new(Approvals::new(
                wire.clone(),
                self.approvals.clone(),
                self.config.name.clone(),
                Rc::new(sys::random_uuid),
            ));
            let used = super::subagent::Usage::default();
            let handle = super::subagent::RunHandle::root(
                wire.clone(),
                approvals.clone(),
                self.provider.clone(),
                used.clone(),
                self.instances.clone(),
                session.clone(),
                recorded,
            );
            (job, approvals, handle, used)
        };
        let (start, approvals, handle, subagents) = match start {
            Start::Subagent(call) => {
                let super::subagent::Call { run, begin, approvals, handle, used, running } = *call;
                (Job::Subagent(run, begin, running), approvals, handle, used)
            }
            Start::Run(input) => root(Job::Run(input), (Vec::new(), RecoveryBudget::default())),
            Start::Resume(mut turn, budget) => {
                let recorded = std::mem::take(&mut turn.subagents);
                root(Job::Resume(turn, budget), (recorded, budget))
            }
        };
        let provider = handle.provider();
        let run_fns = RunClosures::new(&wire, &approvals);
        let stop = StopReason::default();
        let simple = get(&hooks, "simple").and_then(|v| v.as_f64()).map(|v| v as u32);
        let tools = JsToolset::new(
            toolset,
            simple,
            ToolSignals::PerCall(signal.clone(), stop.clone()),
            warn.clone(),
            Some(run_fns.functions(handle)),
            self.config.tool_timeouts,
        )?;
        let config = self.config.clone();
        let (context, store_error) = context;
        let last = if sub { Rc::default() } else { self.last_output.clone() };
        last.replace(JsValue::UNDEFINED);
        let env = AgentEnv { output: self.output.clone(), last, stop, subagents };
        let busy = (!sub).then(|| {
            self.busy.set(true);
            Busy(self.busy.clone())
        });
        Ok(future_to_promise(async move {
            let _busy = busy;
            let _run_fns = run_fns; // the tools' `send`/`requestApproval`/`rejection` live as long as the run
            let watch = signal.clone().map(AbortWatch::new);
            // Boxed, and made anew for each turn a sub-agent's call runs.
            let cancel = || {
                async {
                    match &watch {
                        Some(w) => {
                            w.fired().await;
                        }
                        None => futures::future::pending::<()>().await,
                    }
                }
                .boxed_local()
            };
            let model = provider.as_ref().map(|m| m.model(limits, warn.as_ref()));
            let turn = Turn {
                config: &config,
                context: &context,
                model: model.as_ref(),
                tools: &tools,
                wire: &wire,
                approvals: &approvals,
                env: &env,
            };
            let outcome = match start {
                Job::Run(input) => turn.run(input, cancel()).await,
                Job::Resume(recorded, budget) => turn.resume(*recorded, budget, cancel()).await,
                Job::Subagent(run, begin, _running) => {
                    let words = |e: &GlueError| {
                        let (class, message) = seam_words(e);
                        format!("{class}: {message}")
                    };
                    let rv = agent::run_subagent(&turn, &run, begin, cancel, words).await;
                    approvals.close_asked();
                    wire.shutdown();
                    return Ok(to_js(&rv));
                }
            };
            if let Some(session) = &session {
                // Everything the turn published is recorded, then its end is stored and told.
                wire.shutdown();
                session.turn_ended(TurnOutcome::of(&outcome, seam_words));
            }
            outcome.map(|()| JsValue::UNDEFINED).map_err(|e| turn_error_to_js(e, signal.as_ref(), &store_error))
        }))
    }
}

/// A seam's error as a session's outcome says it: its class and message.
fn seam_words(e: &GlueError) -> (String, String) {
    match e {
        GlueError::Provider(p) | GlueError::Caused(p, _) => (p.class_name().to_owned(), p.to_string()),
        GlueError::Runtime { class, message, .. } => ((*class).to_owned(), message.clone()),
        GlueError::Js(v) => {
            let name = get(v, "name").and_then(|n| n.as_string()).unwrap_or_else(|| "Error".into());
            (name, super::convert::error_text(v))
        }
    }
}

/// What a run of an agent starts with: a user's input, a recorded turn to go on with, or a
/// sub-agent call.
pub(super) enum Start {
    Run(UserInput),
    Resume(Box<RecordedTurn>, RecoveryBudget),
    Subagent(Box<super::subagent::Call>),
}

/// What the started run does.
enum Job {
    Run(UserInput),
    Resume(Box<RecordedTurn>, RecoveryBudget),
    Subagent(crate::engine::soul::agent::SubagentRun, agent::Begin, super::subagent::Running),
}

/// The unfinished turn of a recording (`recorded`: the JSON text of an array of wire messages),
/// for a caller deciding whether to resume: `{userInput, step, resumes, waitingApprovals:
/// [{requestId, toolCallId, action}]}` as JSON text, or `null` when its last turn ended (or it
/// has none).
#[wasm_bindgen(js_name = unfinishedTurn)]
pub fn unfinished_turn(recorded: &str) -> Result<String, JsValue> {
    let messages: Vec<WireMessage> = serde_json::from_str(recorded)
        .map_err(|e| type_error(&format!("the recording is not a list of wire messages: {e}")))?;
    let Ok(t) = RecordedTurn::read(&messages) else { return Ok("null".into()) };
    let waiting: Vec<serde_json::Value> = t
        .approvals
        .iter()
        .filter(|a| a.answer.is_none())
        .map(|a| serde_json::json!({"requestId": a.request_id, "toolCallId": a.tool_call_id, "action": a.action}))
        .collect();
    // The input through its own writer (the text one the core already has), the rest as `Value`s.
    let input = serde_json::to_string(&t.user_input).unwrap_or_else(|_| "null".into());
    Ok(format!(
        r#"{{"userInput":{input},"step":{},"resumes":{},"waitingApprovals":{}}}"#,
        t.step,
        t.resumes,
        serde_json::Value::Array(waiting)
    ))
}

fn turn_error_to_js(
    e: TurnError<GlueError>,
    signal: Option<&AbortSignal>,
    store_error: &RefCell<Option<JsValue>>,
) -> JsValue {
    if let Some((class, message)) = e.runtime_error() {
        return GlueError::Runtime { class, message, fields: runtime_fields(&e) }.into_js();
    }
    match e {
        TurnError::Seam(e) => e.into_js(),
        TurnError::Cancelled => signal.map(|s| s.reason()).unwrap_or(JsValue::UNDEFINED),
        // What the store threw.
        TurnError::ContextStore => store_error.borrow_mut().take().unwrap_or(JsValue::UNDEFINED),
        _ => JsValue::UNDEFINED, // every other kind is a runtime error, above
    }
}

/// The fields a runtime error's JS class carries (`nSteps`, `modelName` and `capabilities`,
/// `toolName` and `count`).
fn runtime_fields<E>(e: &TurnError<E>) -> js_sys::Object {
    let o = js_sys::Object::new();
    let set = |k: &str, v: JsValue| {
        let _ = js_sys::Reflect::set(&o, &JsValue::from_str(k), &v);
    };
    match e {
        TurnError::LLMNotSupported { model_name, capabilities } => {
            set("modelName", JsValue::from_str(model_name));
            set("capabilities", capabilities.iter().map(|c| JsValue::from_str(c)).collect::<js_sys::Array>().into());
        }
        TurnError::MaxStepsReached(n) => set("nSteps", JsValue::from(*n)),
        TurnError::TimedOut(ms) => set("timeoutMs", JsValue::from(*ms)),
        TurnError::RepeatedToolCall { tool_name, count } => {
            set("toolName", JsValue::from_str(tool_name));
            set("count", JsValue::from(*count));
        }
        _ => {}
    }
    o
}

/// The message of a runtime error's JS class made by the caller (`new MaxStepsReached(5)`): the
/// core words every one ([`TurnError::runtime_error`]). `fields` as [`runtime_fields`] gives them.
#[wasm_bindgen(js_name = runtimeErrorMessage)]
pub fn runtime_error_message(class: &str, fields: JsValue) -> String {
    let text = |k: &str| get(&fields, k).and_then(|v| v.as_string()).unwrap_or_default();
    let number =
        |k: &str| get(&fields, k).and_then(|v| v.as_f64()).filter(|n| n.is_finite() && *n >= 0.0).unwrap_or(0.0) as u32;
    let e: TurnError<()> = match class {
        "LLMNotSupported" => TurnError::LLMNotSupported {
            model_name: text("modelName"),
            capabilities: get(&fields, "capabilities")
                .map(|v| {
                    js_sys::Array::from(&v)
                        .iter()
                        .map(|c| c.as_string().unwrap_or_else(|| String::from(js_sys::JsString::from(c))))
                        .collect()
                })
                .unwrap_or_default(),
        },
        "MaxStepsReached" => TurnError::MaxStepsReached(number("nSteps")),
        "TurnTimeoutError" => TurnError::TimedOut(get(&fields, "timeoutMs").and_then(|v| v.as_f64()).unwrap_or(0.0)),
        "RepeatedToolCallError" => TurnError::RepeatedToolCall { tool_name: text("toolName"), count: number("count") },
        _ => TurnError::LLMNotSet,
    };
    e.runtime_error().map(|(_, m)| m).unwrap_or_default()
}

/// The message types only the runtime publishes (a UI takes them as the turn's truth), or `None`
/// for one a tool may send (parts of its own, notes, its own kinds).
fn reserved_for_the_runtime(m: &WireMessage) -> Option<&str> {
    const RESERVED: [&str; 14] = [
        "TurnBegin",
        "TurnEnd",
        "StepBegin",
        "StepInterrupted",
        "StepRetry",
        "StatusUpdate",
        "ToolCall",
        "ToolCallPart",
        "ToolResult",
        "ApprovalRequest",
        "ApprovalResponse",
        "CompactionBegin",
        "CompactionEnd",
        "PartialOutput",
    ];
    let kind = m.kind();
    let resumed = matches!(m, WireMessage::Other { kind, payload } if kind == "Notification"
        && payload.get("type").and_then(|t| t.as_str()) == Some(crate::engine::soul::recovery::RESUMED));
    (RESERVED.contains(&kind) || resumed).then_some(kind)
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
            if let Some(kind) = reserved_for_the_runtime(&m) {
                return Err(type_error(&format!(
                    "ctx.send: a tool cannot publish `{kind}`: the runtime publishes the turn's own messages (a tool's result is what it returns)"
                )));
            }
            w.send(m);
            Ok(())
        });
        let a = approvals.clone();
        let request_approval =
            Closure::<dyn Fn(String, JsValue) -> Promise>::new(move |call_id: String, req: JsValue| {
                let action = get(&req, "action").and_then(|v| v.as_string()).unwrap_or_default();
                let description = get(&req, "description").and_then(|v| v.as_string()).unwrap_or_default();
                match a.request(&call_id, &action, &description, false) {
                    Ok(answer) => future_to_promise(async move { Ok(JsValue::from_bool(answer.await)) }),
                    Err(e) => Promise::reject(&type_error(&e.to_string())),
                }
            });
        let a = approvals.clone();
        let rejection = Closure::<dyn Fn(String) -> JsValue>::new(move |call_id: String| to_js(&a.rejection(&call_id)));
        RunClosures { send, request_approval, rejection }
    }

    /// The object a run's tools' contexts are made from; `handle`: what a sub-agent tool runs in.
    fn functions(&self, handle: super::subagent::RunHandle) -> RunFunctions {
        let o = js_sys::Object::new();
        let set = |k: &str, c: &JsValue| {
            let _ = js_sys::Reflect::set(&o, &JsValue::from_str(k), c);
        };
        set("handle", &JsValue::from(handle));
        set("send", self.send.as_ref());
        set("requestApproval", self.request_approval.as_ref());
        set("rejection", self.rejection.as_ref());
        RunFunctions(o)
    }
}
