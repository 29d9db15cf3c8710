//! The agent turn, as kimi-cli's soul runs it: steps until the model stops calling tools.
//!
//! A turn publishes `TurnBegin`, checks that the model can take the input, checkpoints the
//! context and appends the user's message; then each step publishes `StepBegin`, compacts
//! the context when it nears its limit, checkpoints, and runs one `step` — retried with
//! backoff (and the server's `Retry-After`) on errors worth retrying, each retry announced
//! with `StepRetry` — then publishes `StatusUpdate`, waits for the tools' results, and
//! grows the context by the message, its usage and one tool message per result. The turn
//! ends when a step made no tool calls, when the user refused a call without feedback, at
//! `max_steps_per_turn` (an error), or when the same call was repeated 12 times (an error).
//! A step that fails publishes `StepInterrupted`; every turn ends with `TurnEnd`.
//!
//! A step whose stream breaks after a tool call was handed on is not retried: `step` salvages the
//! round (started tools awaited, calls that never started answered "cut off"), the round goes
//! into the context, and the turn goes on with the next step. A salvaged step counts as a step
//! and as a failed attempt: the next step's first attempt is the one after it, so
//! `max_retries_per_step` broken streams in a row end the turn with the provider error.
//!
//! Cancellation: when `cancel` resolves, the turn's work is dropped at once (its tools'
//! futures with it, which is how their signals abort), waiting approvals are rejected, the
//! round as far as it got — the message (complete, or what had streamed) with every call the
//! wire showed — is written to the context with a result for every call (an "aborted" one for
//! those that had not finished, also published), and the turn ends with `TurnEnd` and
//! [`TurnError::Cancelled`].
//!
//! The turn is generic over its seams — the model ([`Model`], `core::model`), the tools
//! ([`ToolDispatch`]), timers and randomness ([`Env`]) — so `cargo test` runs it with fakes.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::rc::Rc;

use futures::future::{select, Either, LocalBoxFuture, Shared};
use futures::FutureExt;
use serde::{Deserialize, Serialize};

use crate::core::error::ChatProviderError;
use crate::core::generate::{generate, EventSource, GenerateOutput, MessageAssembler};
use crate::core::json::Arguments;
use crate::core::message::{ContentPart, Message, Role, StreamedMessagePart, TextOrParts, TokenUsage, ToolCall};
use crate::core::model::{Model, ModelError};
use crate::core::providers::ToolDefinition;
use crate::core::soul::approval::Approvals;
use crate::core::soul::compaction;
use crate::core::soul::context::SharedContext;
use crate::core::soul::repeat::{append_reminder, RepeatTracker, Verdict};
use crate::core::soul::rules::{is_retryable, missing_capabilities, retry_wait_ms, tool_result_to_message, Backoff};
use crate::core::soul::wire::{Status, StatusUpdate, StepRetry, Wire, WireMessage};
use crate::core::step::{
    collect_results, step_in, Salvaged, StepFailure, StepOutput, ToolDispatch, ToolResultCallback,
};
use crate::core::toolset::{ToolOutput, ToolResult, ToolReturnValue};

/// The tools as a turn sees them: kosong's toolset plus the definitions sent to the model
/// (read again at every step, so a toolset may change between steps).
pub trait TurnTools: ToolDispatch {
    fn definitions(&self) -> Vec<ToolDefinition>;
}

/// Time, randomness and tasks.
pub trait Env {
    /// Resolves after `ms` milliseconds (dropping it cancels the timer).
    fn sleep(&self, ms: f64) -> LocalBoxFuture<'static, ()>;
    /// Uniform in [0, 1): the backoff's jitter.
    fn random(&self) -> f64;
    /// Runs a task beside the turn (a tool's driver).
    fn spawn(&self, task: LocalBoxFuture<'static, ()>);
}

/// How an agent runs its turns.
#[derive(Clone, Debug)]
pub struct AgentConfig {
    pub name: String,
    pub system_prompt: String,
    pub max_steps_per_turn: u32,
    /// Attempts per step, the first included.
    pub max_retries_per_step: u32,
    /// The model's context window; 0 means unknown (never compact).
    pub max_context_tokens: u64,
    /// When given, input the model cannot take is refused.
    pub capabilities: Option<Vec<String>>,
    pub backoff: Backoff,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            name: "agent".into(),
            system_prompt: String::new(),
            max_steps_per_turn: 100,
            max_retries_per_step: 3,
            max_context_tokens: 0,
            capabilities: None,
            backoff: Backoff::default(),
        }
    }
}

/// What the user said: text, or content parts.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum UserInput {
    Text(String),
    Parts(Vec<ContentPart>),
}

impl<'de> Deserialize<'de> for UserInput {
    /// Read in one pass by the message model's string-or-parts reader (an untagged derive
    /// buffers the input and tries each variant: more code in the .wasm, and twice the work).
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match TextOrParts::deserialize(d)? {
            TextOrParts::Text(t) => Ok(UserInput::Text(t)),
            TextOrParts::Parts(p) => Ok(UserInput::Parts(p)),
            TextOrParts::Null => Err(serde::de::Error::custom("user input is a string or a list of content parts")),
        }
    }
}

impl UserInput {
    fn message(&self) -> Message {
        let content = match self {
            UserInput::Text(t) => vec![ContentPart::text(t.clone())],
            UserInput::Parts(p) => p.clone(),
        };
        Message::new(Role::User, content)
    }
}

/// Why a turn ended early.
#[derive(Debug)]
#[non_exhaustive]
pub enum TurnError<E> {
    /// A seam failed (the provider, after its retries): its error, unchanged.
    Seam(E),
    LLMNotSet,
    LLMNotSupported {
        model_name: String,
        capabilities: Vec<String>,
    },
    MaxStepsReached(u32),
    /// The same call (name and arguments) this many times in a row.
    RepeatedToolCall {
        tool_name: String,
        count: u32,
    },
    /// The context's store refused a write: the turn stops rather than go on unrecorded.
    ContextStore,
    Cancelled,
}

impl<E> From<E> for TurnError<E> {
    fn from(e: E) -> Self {
        TurnError::Seam(e)
    }
}

impl<E> TurnError<E> {
    /// The runtime's own errors, as kimi-cli words them: the JS class's name and the message
    /// (`None` for a seam's error, a cancel or a store's refusal, which keep their own).
    pub fn runtime_error(&self) -> Option<(&'static str, String)> {
        Some(match self {
            TurnError::LLMNotSet => ("LLMNotSet", "LLM not set".into()),
            TurnError::LLMNotSupported { model_name, capabilities } => {
                let noun = if capabilities.len() == 1 { "capability" } else { "capabilities" };
                let list = capabilities.join(", ");
                ("LLMNotSupported", format!("LLM model '{model_name}' does not support required {noun}: {list}."))
            }
            TurnError::MaxStepsReached(n) => ("MaxStepsReached", format!("Max number of steps reached: {n}")),
            TurnError::RepeatedToolCall { tool_name, count } => (
                "RepeatedToolCallError",
                format!(
                    "The model called `{tool_name}` with the same arguments {count} times in a row; the turn was stopped."
                ),
            ),
            TurnError::Seam(_) | TurnError::ContextStore | TurnError::Cancelled => return None,
        })
    }
}

/// kimi-cli's status snapshot (`Agent.status`): the same shape as a `StatusUpdate`'s status,
/// with the agent's yolo setting.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StatusSnapshot {
    #[serde(flatten)]
    pub status: Status,
    pub yolo_enabled: bool,
}

pub fn status(cfg: &AgentConfig, context: &SharedContext, yolo: bool) -> StatusSnapshot {
    StatusSnapshot { status: Status::of(context.read(|c| c.token_count()), cfg.max_context_tokens), yolo_enabled: yolo }
}

/// The result a call gets when the run was cancelled before it finished.
pub fn aborted_result(call_id: &str) -> ToolResult {
    ToolResult {
        tool_call_id: call_id.to_owned(),
        return_value: ToolReturnValue::error(
            "The tool call was aborted: the user cancelled the run before it finished.",
            "Aborted",
            ToolOutput::Text(String::new()),
        ),
    }
}

/// One turn's shared state (what outlives a dropped step, for the cleanup after a cancel).
struct TurnState {
    repeats: RepeatTracker,
    /// A step whose message is complete but not yet in the context.
    in_flight: Option<(Message, Option<TokenUsage>)>,
    /// Results by call id, across the attempts and steps of the turn.
    finished: HashMap<String, ToolResult>,
    /// Calls by id, across attempts and steps: one that streams the very same call again
    /// gets the result it already has instead of running the tool again.
    calls: HashMap<String, ToolCall>,
    /// Results published on the wire in this step.
    published: HashSet<String>,
    /// This attempt's running calls by key, for duplicates within the step.
    by_key: HashMap<(String, String), Shared<LocalBoxFuture<'static, ToolResult>>>,
    /// The attempt whose stream broke last, when the steps since have all broken: the next
    /// step's first attempt is the one after it, so a provider that keeps breaking uses up the
    /// retry budget across salvaged steps too (0 after a step that streamed whole).
    broken_attempts: u32,
}

/// The toolset as one turn hands it to `step`: same-step duplicates share one run, repeated
/// calls get their reminders, results already had in an earlier attempt are reused.
struct TurnDispatch<'a, T> {
    inner: &'a T,
    state: Rc<RefCell<TurnState>>,
}

impl<T: ToolDispatch> ToolDispatch for TurnDispatch<'_, T> {
    fn is_eager(&self, name: &str) -> bool {
        self.inner.is_eager(name)
    }

    fn on_malformed_arguments(&self, call: &ToolCall) {
        self.inner.on_malformed_arguments(call)
    }

    fn on_cut_off(&self, call: &ToolCall, chars: usize) {
        self.inner.on_cut_off(call, chars)
    }

    fn dispatch(&self, call: &ToolCall, args: &Arguments) -> LocalBoxFuture<'static, ToolResult> {
        let mut st = self.state.borrow_mut();
        let key = (call.function.name.clone(), args.canonical());
        let verdict = st.repeats.on_call(&key);
        if let (Some(done), Some(before)) = (st.finished.get(&call.id), st.calls.get(&call.id)) {
            if before.function == call.function {
                return futures::future::ready(done.clone()).boxed_local();
            }
        }
        st.calls.insert(call.id.clone(), call.clone());
        match verdict {
            Verdict::SameStep => {
                let original = st.by_key.get(&key).cloned();
                let id = call.id.clone();
                match original {
                    Some(f) => {
                        async move { ToolResult { tool_call_id: id, return_value: f.await.return_value } }.boxed_local()
                    }
                    None => {
                        drop(st);
                        self.inner.dispatch(call, args)
                    }
                }
            }
            Verdict::Run { reminder } => {
                drop(st);
                let fut = self.inner.dispatch(call, args);
                let shared = async move {
                    let mut r = fut.await;
                    if let Some(text) = reminder {
                        append_reminder(&mut r.return_value, &text);
                    }
                    r
                }
                .boxed_local()
                .shared();
                self.state.borrow_mut().by_key.insert(key, shared.clone());
                shared.boxed_local()
            }
        }
    }
}

/// One turn's inputs.
pub struct Turn<'a, M, T> {
    pub config: &'a AgentConfig,
    pub context: &'a SharedContext,
    /// `None`: no model is set (the turn fails with [`TurnError::LLMNotSet`]).
    pub model: Option<&'a M>,
    pub tools: &'a T,
    pub wire: &'a Wire,
    pub approvals: &'a Rc<Approvals>,
    pub env: &'a dyn Env,
}

type ErrOf<M> = <<M as Model>::Source as EventSource>::Error;

impl<'a, M, T> Turn<'a, M, T>
where
    M: Model,
    ErrOf<M>: ModelError,
    T: TurnTools,
{
    fn send(&self, m: WireMessage) {
        self.wire.send(m);
    }

    /// Runs the turn until it ends or `cancel` resolves.
    pub async fn run(&self, input: UserInput, cancel: impl Future<Output = ()>) -> Result<(), TurnError<ErrOf<M>>> {
        self.send(WireMessage::TurnBegin { user_input: input.clone() });
        let state = Rc::new(RefCell::new(TurnState {
            repeats: RepeatTracker::default(),
            in_flight: None,
            finished: HashMap::new(),
            calls: HashMap::new(),
            published: HashSet::new(),
            by_key: HashMap::new(),
            broken_attempts: 0,
        }));
        let round = Rc::new(RefCell::new(MessageAssembler::new()));
        let body = self.body(input, state.clone(), round.clone());
        let outcome = match select(Box::pin(body), Box::pin(cancel)).await {
            Either::Left((r, _)) => r,
            Either::Right(((), _)) => {
                self.after_cancel(&state, &round);
                Err(TurnError::Cancelled)
            }
        };
        self.send(WireMessage::TurnEnd);
        outcome
    }

    /// What a cancelled turn leaves: refused approvals, the round as far as it got (the text so
    /// far and every call the wire showed), and no call without a result — its own if it
    /// finished, an aborted one (also published) if not. The same wherever the cancel lands:
    /// mid-stream, mid-tool, mid-salvage, mid-approval; while waiting to retry, the failed
    /// attempt was already void and nothing of it is kept.
    fn after_cancel(&self, state: &Rc<RefCell<TurnState>>, round: &RefCell<MessageAssembler>) {
        self.wire.reject_pending();
        let (in_flight, finished) = {
            let mut st = state.borrow_mut();
            (st.in_flight.take(), std::mem::take(&mut st.finished))
        };
        let (message, usage) = match in_flight {
            Some(m) => m,
            None => {
                let asm = std::mem::take(&mut *round.borrow_mut());
                if !asm.has_substance() {
                    return;
                }
                (asm.into_message(), None)
            }
        };
        let results: Vec<ToolResult> = message
            .tool_calls
            .iter()
            .flatten()
            .map(|c| match finished.get(&c.id) {
                Some(r) => r.clone(),
                None => {
                    let r = aborted_result(&c.id);
                    self.wire.send(WireMessage::ToolResult(r.clone()));
                    r
                }
            })
            .collect();
        self.grow(message, usage, &results);
    }

    fn check_store(&self) -> Result<(), TurnError<ErrOf<M>>> {
        if self.context.take_store_failure() {
            return Err(TurnError::ContextStore);
        }
        Ok(())
    }

    fn check_capabilities(&self, m: &Message) -> Result<(), TurnError<ErrOf<M>>> {
        let Some(caps) = &self.config.capabilities else { return Ok(()) };
        let missing = missing_capabilities(m, caps);
        if missing.is_empty() {
            return Ok(());
        }
        let model_name = self.model.map(|m| m.model_name()).unwrap_or_default();
        Err(TurnError::LLMNotSupported { model_name, capabilities: missing })
    }

    async fn body(
        &self,
        input: UserInput,
        state: Rc<RefCell<TurnState>>,
        round: Rc<RefCell<MessageAssembler>>,
    ) -> Result<(), TurnError<ErrOf<M>>> {
        let model = self.model.ok_or(TurnError::LLMNotSet)?;
        let user = input.message();
        self.check_capabilities(&user)?;
        self.context.checkpoint();
        self.context.append(vec![user]);
        self.check_store()?;
        for n in 1.. {
            if n > self.config.max_steps_per_turn {
                return Err(TurnError::MaxStepsReached(self.config.max_steps_per_turn));
            }
            self.send(WireMessage::StepBegin { n });
            match self.step(model, n, &state, &round).await.and_then(|done| self.check_store().map(|()| done)) {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(e) => {
                    self.send(WireMessage::StepInterrupted);
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Calls `attempt` with kimi-cli's retry rules, from attempt `first` (counting from 1);
    /// `announce` names the step whose retries are published as `StepRetry`. A failure that
    /// salvaged a round is never retried: something ran. Gives the attempt last made.
    async fn with_retries<R, F, Fut>(
        &self,
        announce: Option<u32>,
        first: u32,
        mut attempt: F,
    ) -> (Result<R, StepFailure<ErrOf<M>>>, u32)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<R, StepFailure<ErrOf<M>>>>,
    {
        let max = self.config.max_retries_per_step.max(1);
        let mut i = first.max(1);
        loop {
            let f = match attempt().await {
                Ok(v) => return (Ok(v), i),
                Err(f) => f,
            };
            let retry = f.salvaged.is_none() && i < max;
            let Some(pe) = f.error.provider_error().filter(|pe| retry && is_retryable(pe)) else { return (Err(f), i) };
            let retry_after = match pe {
                ChatProviderError::Status { retry_after_ms, .. } => retry_after_ms.map(|ms| ms as f64),
                _ => None,
            };
            let wait = retry_wait_ms(i, retry_after, self.env.random(), self.config.backoff);
            if let Some(n) = announce {
                let status_code = match pe {
                    ChatProviderError::Status { status, .. } => Some(*status),
                    _ => None,
                };
                self.send(WireMessage::StepRetry(StepRetry {
                    n,
                    next_attempt: i + 1,
                    max_attempts: max,
                    wait_s: wait / 1000.0,
                    error_type: pe.class_name().to_owned(),
                    status_code,
                }));
            }
            self.env.sleep(wait).await;
            i += 1;
        }
    }

    async fn compact(&self, model: &M, n: u32) -> Result<(), TurnError<ErrOf<M>>> {
        self.send(WireMessage::CompactionBegin);
        let prepared = self.context.read(|c| compaction::prepare(c.history(), compaction::DEFAULT_PRESERVED_MESSAGES));
        if let Some((ask, kept)) = prepared {
            let ask = [ask];
            let (summary, _) = self
                .with_retries(None, 1, || async {
                    let req = model.prepare(compaction::COMPACTION_SYSTEM_PROMPT, &[], &ask)?;
                    let mut source = model.open(req).await?;
                    Ok(generate(&mut source, |_: &StreamedMessagePart| Ok(None), |_: &ToolCall| Ok(None)).await?)
                })
                .await;
            let summary: GenerateOutput = summary.map_err(|f| TurnError::Seam(f.error))?;
            let compacted = compaction::build(&summary.message, kept);
            // kimi-cli writes the prompt again after clearing: a context restored from the
            // file keeps it.
            let prompt = match self.config.system_prompt.as_str() {
                "" => self.context.read(|c| c.system_prompt().map(str::to_owned)),
                p => Some(p.to_owned()),
            };
            self.context.clear();
            if let Some(p) = prompt {
                self.context.write_system_prompt(&p);
            }
            self.context.checkpoint();
            self.context.append(compacted);
        }
        let _ = n;
        self.send(WireMessage::CompactionEnd);
        Ok(())
    }

    /// One step; `Ok(true)` when the turn is over.
    async fn step(
        &self,
        model: &M,
        n: u32,
        state: &Rc<RefCell<TurnState>>,
        round: &Rc<RefCell<MessageAssembler>>,
    ) -> Result<bool, TurnError<ErrOf<M>>> {
        let tokens = self.context.read(|c| c.token_count());
        if compaction::should_compact(tokens, self.config.max_context_tokens) {
            self.compact(model, n).await?;
        }
        self.context.checkpoint();
        // `finished` and `calls` are kept across the turn's steps: a call the model (or a proxy
        // replaying an answer) sends again under the same id with the same function after a
        // salvaged round gets the result it has instead of running twice.
        let first_attempt = {
            let mut st = state.borrow_mut();
            st.published.clear();
            st.broken_attempts + 1
        };
        let dispatch = TurnDispatch { inner: self.tools, state: state.clone() };
        let wire = self.wire.clone();
        let on_result_state = state.clone();
        let on_tool_result: ToolResultCallback = Rc::new(move |r: &ToolResult| {
            let fresh = {
                let mut st = on_result_state.borrow_mut();
                st.finished.insert(r.tool_call_id.clone(), r.clone());
                st.published.insert(r.tool_call_id.clone())
            };
            if fresh {
                wire.send(WireMessage::ToolResult(r.clone()));
            }
        });
        let spawn = |f: LocalBoxFuture<'static, ()>| self.env.spawn(f);
        let (out, attempt) = self
            .with_retries(Some(n), first_attempt, || {
                {
                    let mut st = state.borrow_mut();
                    st.repeats.begin_attempt();
                    st.by_key.clear();
                }
                let defs = self.tools.definitions();
                let prepared = self.context.read(|c| model.prepare(&self.config.system_prompt, &defs, c.history()));
                let dispatch = &dispatch;
                let on_tool_result = on_tool_result.clone();
                let spawn = &spawn;
                let round = &**round;
                async move {
                    let mut source = model.open(prepared?).await?;
                    let on_part = |p: &StreamedMessagePart| {
                        self.wire.send(WireMessage::Part(p.clone()));
                        Ok(None)
                    };
                    let out = step_in(&mut source, round, dispatch, spawn, on_part, Some(on_tool_result)).await;
                    if out.as_ref().is_err_and(|f| f.salvaged.is_none()) {
                        // A failed attempt is void (a UI drops its parts at the `StepRetry`): a
                        // cancel while waiting to retry keeps nothing of it.
                        *round.borrow_mut() = MessageAssembler::new();
                    }
                    out
                }
            })
            .await;
        let StepOutput { generated, results, drivers } = match out {
            Ok(out) => {
                state.borrow_mut().broken_attempts = 0;
                out
            }
            Err(StepFailure { error, salvaged: None }) => return Err(TurnError::Seam(error)),
            Err(StepFailure { error, salvaged: Some(salvaged) }) => {
                return self.after_salvage(error, salvaged, attempt, state, round);
            }
        };
        let GenerateOutput { id: message_id, message, usage, finish_reason } = generated;
        let has_calls = message.tool_calls.as_ref().is_some_and(|c| !c.is_empty());
        // Anthropic paused a long server-tool turn (`pause_turn`): the paused content goes back
        // as it is (it is in the context now) and the model goes on in the next step, within
        // `max_steps_per_turn`.
        let paused = finish_reason.as_deref() == Some("pause_turn");
        // Kept here (not copied) while the tools run, so a cancel can still write it down.
        state.borrow_mut().in_flight = Some((message, usage));
        self.status_update(message_id, usage);

        let results = collect_results(results).await;
        drop(drivers);
        // Only a cancel takes the message out, and a cancelled step never gets here.
        let Some((message, usage)) = state.borrow_mut().in_flight.take() else { return Err(TurnError::Cancelled) };
        let over = self.close_round(message, usage, &results, state)?;
        Ok(over || (!has_calls && !paused))
    }

    /// A step whose stream broke after a call was handed on: its round goes into the context
    /// (the message as far as it arrived, a result for every call), and the turn goes on with
    /// the next step if the error is one worth retrying and the retry budget allows (see
    /// [`TurnState::broken_attempts`]); otherwise the turn fails with the error.
    fn after_salvage(
        &self,
        error: ErrOf<M>,
        salvaged: Salvaged,
        attempt: u32,
        state: &Rc<RefCell<TurnState>>,
        round: &Rc<RefCell<MessageAssembler>>,
    ) -> Result<bool, TurnError<ErrOf<M>>> {
        *round.borrow_mut() = MessageAssembler::new();
        let Salvaged { generated: GenerateOutput { id, message, usage, .. }, results } = salvaged;
        self.status_update(id, usage);
        let over = self.close_round(message, usage, &results, state)?;
        let go_on = attempt < self.config.max_retries_per_step && error.provider_error().is_some_and(is_retryable);
        if !go_on {
            return Err(TurnError::Seam(error));
        }
        state.borrow_mut().broken_attempts = attempt;
        Ok(over)
    }

    /// kimi-cli: the context's count becomes the step's input tokens, then the status.
    fn status_update(&self, message_id: Option<String>, usage: Option<TokenUsage>) {
        if let Some(u) = &usage {
            self.context.update_token_count(u.input());
        }
        let status = Status::of(self.context.read(|c| c.token_count()), self.config.max_context_tokens);
        self.send(WireMessage::StatusUpdate(StatusUpdate { status, token_usage: usage, message_id }));
    }

    /// Writes a round into the context — its message, usage and one tool message per result —
    /// and applies the rules that may end the turn; `Ok(true)` when the user refused a call
    /// without feedback (the turn goes back to the user).
    fn close_round(
        &self,
        message: Message,
        usage: Option<TokenUsage>,
        results: &[ToolResult],
        state: &Rc<RefCell<TurnState>>,
    ) -> Result<bool, TurnError<ErrOf<M>>> {
        state.borrow_mut().repeats.end_step();
        let tool_messages: Vec<Message> = results.iter().map(tool_result_to_message).collect();
        for m in &tool_messages {
            self.check_capabilities(m)?;
        }
        self.grow_messages(message, usage, tool_messages);

        let rejected: Vec<bool> =
            results.iter().filter_map(|r| self.approvals.rejected(&r.tool_call_id, &r.return_value)).collect();
        if !rejected.is_empty() && !rejected.iter().any(|&feedback| feedback) {
            return Ok(true);
        }
        if let Some((tool_name, count)) = state.borrow().repeats.force_stop() {
            return Err(TurnError::RepeatedToolCall { tool_name, count });
        }
        Ok(false)
    }

    fn grow(&self, message: Message, usage: Option<TokenUsage>, results: &[ToolResult]) {
        self.grow_messages(message, usage, results.iter().map(tool_result_to_message).collect());
    }

    /// Appends a step's message, its usage and its tool messages.
    fn grow_messages(&self, message: Message, usage: Option<TokenUsage>, tool_messages: Vec<Message>) {
        self.context.append(vec![message]);
        if let Some(u) = &usage {
            self.context.update_token_count(u.total());
        }
        self.context.append(tool_messages);
    }
}
