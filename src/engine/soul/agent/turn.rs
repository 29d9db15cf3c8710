//! One turn: steps until the model stops calling tools (see the module `agent`'s text for the
//! rules).

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;

use futures::future::{select, Either, LocalBoxFuture};

use super::config::{AgentConfig, UserInput};
use super::dispatch::{aborted_result, timed_out_result, StreamEnd, TurnDispatch, TurnState};
use super::error::TurnError;
use super::resume::ReadAgain;
use super::seams::{Env, TurnTools};
use crate::engine::error::ChatProviderError;
use crate::engine::generate::{
    generate, EventSource, GenerateOutput, Heard, Hearing, MessageAssembler, Renamer, Unheard,
};
use crate::engine::message::{ContentPart, Message, StreamedMessagePart, TokenUsage, ToolCall};
use crate::engine::model::{Model, ModelError};
use crate::engine::output::{answer_json, malformed};
use crate::engine::partial_json::PartialJson;
use crate::engine::providers::Prompt;
use crate::engine::soul::approval::Approvals;
use crate::engine::soul::compaction;
use crate::engine::soul::context::{SharedContext, TurnMark};
use crate::engine::soul::recovery::RecordedTurn;
use crate::engine::soul::rules::{is_retryable, missing_capabilities, retry_wait_ms, tool_result_to_message};
use crate::engine::soul::wire::{Status, StatusUpdate, StepRetry, Wire, WireMessage};
use crate::engine::step::{collect_results, step_in, Salvaged, StepFailure, StepOutput, ToolResultCallback};
use crate::engine::toolset::ToolResult;

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

pub(super) type ErrOf<M> = <<M as Model>::Source as EventSource>::Error;

impl<'a, M, T> Turn<'a, M, T>
where
    M: Model,
    ErrOf<M>: ModelError,
    T: TurnTools,
{
    pub(super) fn send(&self, m: WireMessage) {
        self.wire.send(m);
    }

    /// Runs the turn until it ends or `cancel` resolves.
    pub async fn run(&self, input: UserInput, cancel: impl Future<Output = ()>) -> Result<(), TurnError<ErrOf<M>>> {
        // The turn's id, on its `TurnBegin` and on every checkpoint it writes: a recording and a
        // context belong together by it, not by comparing messages.
        let bits = |r: f64| (r.clamp(0.0, 1.0) * (1u64 << 52) as f64) as u64;
        let n = self.context.read(|c| c.n_checkpoints());
        let turn_id = format!("{n:x}-{:x}-{:x}", bits(self.env.random()), bits(self.env.random()));
        let after_turn_id = self.context.read(|c| c.turn_mark().map(|m| m.turn.clone()));
        self.send(WireMessage::TurnBegin { user_input: input.clone(), turn_id: Some(turn_id.clone()), after_turn_id });
        self.until_cancelled(
            |state, round| {
                state.borrow_mut().turn_id = Some(turn_id);
                self.body(input, state, round)
            },
            cancel,
        )
        .await
    }

    /// A turn's body (`body(state, round)`) until it ends or `cancel` resolves (then the round is
    /// closed as [`Self::after_cancel`] says), and `TurnEnd`: how a new turn and a resumed one run.
    pub(super) async fn until_cancelled<F, Fut>(
        &self,
        body: F,
        cancel: impl Future<Output = ()>,
    ) -> Result<(), TurnError<ErrOf<M>>>
    where
        F: FnOnce(Rc<RefCell<TurnState>>, Rc<RefCell<MessageAssembler>>) -> Fut,
        Fut: Future<Output = Result<(), TurnError<ErrOf<M>>>>,
    {
        let state = Rc::new(RefCell::new(TurnState::new()));
        let round = Rc::new(RefCell::new(MessageAssembler::new()));
        let body = body(state.clone(), round.clone());
        // The turn's own time limit races the caller's cancel: `Some(ms)` when it fired.
        let (limit, env) = (self.config.turn_timeout_ms, self.env);
        let time_up = async move {
            match limit {
                Some(ms) => {
                    env.sleep(ms).await;
                    ms
                }
                None => futures::future::pending().await,
            }
        };
        let stop = async {
            match select(Box::pin(cancel), Box::pin(time_up)).await {
                Either::Left(((), _)) => None,
                Either::Right((ms, _)) => Some(ms),
            }
        };
        let outcome = match select(Box::pin(body), Box::pin(stop)).await {
            Either::Left((r, _)) => r,
            Either::Right((timed_out, body)) => {
                if let Some(ms) = timed_out {
                    self.env.turn_timed_out(ms);
                }
                self.after_cancel(&state, &round, timed_out);
                drop(body);
                Err(timed_out.map_or(TurnError::Cancelled, TurnError::TimedOut))
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
    /// `timed_out`: the turn's time limit stopped it (in ms), not the caller.
    pub(super) fn after_cancel(
        &self,
        state: &Rc<RefCell<TurnState>>,
        round: &RefCell<MessageAssembler>,
        timed_out: Option<f64>,
    ) {
        self.wire.reject_pending();
        let (in_flight, in_context, finished, published) = {
            let mut st = state.borrow_mut();
            let (f, p) = (std::mem::take(&mut st.finished), std::mem::take(&mut st.published));
            (st.in_flight.take(), st.in_context.take(), f, p)
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
            // A result counts when the wire showed it in this step: an id the model repeats from an
            // earlier step keeps that step's result there, and gets an aborted one here.
            .map(|c| match finished.get(&c.id).filter(|_| published.contains(&c.id)) {
                Some(r) => r.clone(),
                None => {
                    let r = match timed_out {
                        Some(ms) => timed_out_result(&c.id, ms),
                        None => aborted_result(&c.id),
                    };
                    self.wire.send(WireMessage::ToolResult(r.clone()));
                    r
                }
            })
            .collect();
        match in_context {
            // The message is in the context already: only the results it lacks are written.
            Some(written) => self.context.append(
                results.iter().filter(|r| !written.contains(&r.tool_call_id)).map(tool_result_to_message).collect(),
            ),
            None => self.grow(message, usage, &results),
        }
    }

    pub(super) fn check_store(&self) -> Result<(), TurnError<ErrOf<M>>> {
        if self.context.take_store_failure() {
            return Err(TurnError::ContextStore);
        }
        Ok(())
    }

    pub(super) fn check_capabilities(&self, m: &Message) -> Result<(), TurnError<ErrOf<M>>> {
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
        let mark = state.borrow().mark(0);
        self.context.checkpoint_marked(mark);
        self.context.append(vec![user]);
        self.check_store()?;
        self.steps_from(model, 1, true, &state, &round, None).await
    }

    /// The turn's steps from step `first` on, until one ends the turn; `begin_first: false`: step
    /// `first` began already (a recovered turn asks it again after a `StepRetry`, or goes on with
    /// the answer it was reading: `again`).
    pub(super) async fn steps_from(
        &self,
        model: &M,
        first: u32,
        begin_first: bool,
        state: &Rc<RefCell<TurnState>>,
        round: &Rc<RefCell<MessageAssembler>>,
        mut again: Option<ReadAgain<M::Source>>,
    ) -> Result<(), TurnError<ErrOf<M>>> {
        for n in first.. {
            if n > self.config.max_steps_per_turn {
                return Err(TurnError::MaxStepsReached(self.config.max_steps_per_turn));
            }
            if n != first || begin_first {
                self.send(WireMessage::StepBegin { n });
            }
            let step = self.step(model, n, state, round, again.take()).await;
            match step.and_then(|done| self.check_store().map(|()| done)) {
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
        model: &M,
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
            let Some(pe) = f.error.provider_error().filter(|_| f.salvaged.is_none()) else { return (Err(f), i) };
            let retry = i < max && is_retryable(pe);
            let status_code = match pe {
                ChatProviderError::Status { status, .. } => Some(*status),
                _ => None,
            };
            let retry_after = match pe {
                ChatProviderError::Status { retry_after_ms, .. } => retry_after_ms.map(|ms| ms as f64),
                _ => None,
            };
            let error_type = pe.class_name();
            // A fallback model moves on when the error outlasted its retries (or is one the
            // caller named): the step is asked again of the next provider, at once, from its
            // first attempt.
            if let Some(to) = model.fall_back(pe, !retry) {
                if let Some(n) = announce {
                    self.send(WireMessage::StepRetry(StepRetry {
                        n,
                        next_attempt: 1,
                        max_attempts: max,
                        wait_s: 0.0,
                        error_type: error_type.to_owned(),
                        status_code,
                        fallback: Some(to),
                    }));
                }
                i = 1;
                continue;
            }
            if !retry {
                return (Err(f), i);
            }
            let wait = retry_wait_ms(i, retry_after, self.env.random(), self.config.backoff);
            if let Some(n) = announce {
                self.send(WireMessage::StepRetry(StepRetry {
                    n,
                    next_attempt: i + 1,
                    max_attempts: max,
                    wait_s: wait / 1000.0,
                    error_type: error_type.to_owned(),
                    status_code,
                    fallback: None,
                }));
            }
            self.env.sleep(wait).await;
            i += 1;
        }
    }

    /// Compacts the context; `Ok(true)` when it was rewritten, ending with the step's checkpoint
    /// (`mark`): the compacted history is the step's starting point.
    async fn compact(&self, model: &M, mark: Option<TurnMark>) -> Result<bool, TurnError<ErrOf<M>>> {
        self.send(WireMessage::CompactionBegin);
        let prepared = self.context.read(|c| compaction::prepare(c.history(), compaction::DEFAULT_PRESERVED_MESSAGES));
        if let Some((ask, kept)) = prepared {
            let ask = [ask];
            let (summary, _) = self
                .with_retries(model, None, 1, || async {
                    let req = model.prepare(&Prompt::new(compaction::COMPACTION_SYSTEM_PROMPT, &[], &ask))?;
                    let mut source = model.open(req).await?;
                    Ok(generate(&mut source, Unheard, |_: &ToolCall| Ok(None)).await?)
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
            // One rewrite: the cleared context and what replaces it are stored together.
            self.context.rebuild(|c| {
                c.clear();
                if let Some(p) = &prompt {
                    c.write_system_prompt(p);
                }
                c.checkpoint();
                c.append(compacted);
                c.checkpoint_marked(mark);
            });
            self.send(WireMessage::CompactionEnd);
            return Ok(true);
        }
        self.send(WireMessage::CompactionEnd);
        Ok(false)
    }

    /// One step; `Ok(true)` when the turn is over. `again`: the step began in a runtime that
    /// died, and its first attempt goes on with the answer that runtime was reading.
    pub(super) async fn step(
        &self,
        model: &M,
        n: u32,
        state: &Rc<RefCell<TurnState>>,
        round: &Rc<RefCell<MessageAssembler>>,
        again: Option<ReadAgain<M::Source>>,
    ) -> Result<bool, TurnError<ErrOf<M>>> {
        // A step read again is checkpointed (by the runtime that began it, or by the resume), and
        // its results so far are on the wire.
        if again.is_none() {
            let tokens = self.context.read(|c| c.token_count());
            let mark = state.borrow().mark(n);
            let compacted = compaction::should_compact(tokens, self.config.max_context_tokens)
                && self.compact(model, mark.clone()).await?;
            if !compacted {
                self.context.checkpoint_marked(mark);
            }
            state.borrow_mut().published.clear();
        }
        let again = RefCell::new(again);
        // `finished` and `calls` are kept across the turn's steps: a call the model (or a proxy
        // replaying an answer) sends again under the same id with the same function after a
        // salvaged round gets the result it has instead of running twice.
        let first_attempt = state.borrow().broken_attempts + 1;
        // The step's end, once its `StatusUpdate` is sent: what a tool that waits for the stream's
        // end waits for (a step that never gets there never starts one).
        let stream_end = Rc::new(StreamEnd::default());
        let dispatch = TurnDispatch {
            inner: self.tools,
            state: state.clone(),
            wire: self.wire.clone(),
            approvals: self.approvals.clone(),
            stream_end: Some(stream_end.clone()),
        };
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
            .with_retries(model, Some(n), first_attempt, || {
                {
                    let mut st = state.borrow_mut();
                    st.repeats.begin_attempt();
                    st.by_key.clear();
                }
                let opened = match again.borrow_mut().take() {
                    Some(a) => Either::Left(a),
                    None => {
                        let defs = self.tools.definitions();
                        Either::Right(self.context.read(|c| {
                            model.prepare(
                                &Prompt::new(&self.config.system_prompt, &defs, c.history())
                                    .with_output(self.config.output.as_ref()),
                            )
                        }))
                    }
                };
                let dispatch = &dispatch;
                let on_tool_result = on_tool_result.clone();
                let spawn = &spawn;
                let round = &**round;
                async move {
                    let mut source = match opened {
                        Either::Left(a) => a.source,
                        Either::Right(prepared) => model.open(prepared?).await?,
                    };
                    // With structured output, the text's preview goes on the wire after the part.
                    let mut preview = self.config.output.as_ref().map(|_| PartialJson::new());
                    let on_part = |p: &StreamedMessagePart| {
                        self.wire.send(WireMessage::Part(p.clone()));
                        if let (Some(pj), StreamedMessagePart::Content(ContentPart::Text { text, .. })) =
                            (&mut preview, p)
                        {
                            let edits = pj.feed(text);
                            if !edits.is_empty() {
                                self.wire.send(WireMessage::PartialOutput(edits));
                            }
                        }
                        Ok(None)
                    };
                    // The id of an answer the server keeps is recorded: a runtime that dies while
                    // it streams is followed by one that reads it again.
                    // A reconnect is told too (telemetry shows it on the model call's span).
                    let heard = |news: Heard<'_>| {
                        self.send(RecordedTurn::answer_notice(news, n, &self.config.name, self.env.now_s()))
                    };
                    let on_part = Hearing(on_part, heard);
                    // Call ids are unique per turn, whatever the server sends.
                    let st = state.clone();
                    round.borrow_mut().set_renamer(Some(Renamer(Rc::new(move |id: &str| st.borrow_mut().rename(id)))));
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
                return self.after_salvage(model, error, salvaged, attempt, state, round);
            }
        };
        let GenerateOutput { id: message_id, message, usage, finish_reason, .. } = generated;
        let has_calls = message.tool_calls.as_ref().is_some_and(|c| !c.is_empty());
        // Anthropic paused a long server-tool turn (`pause_turn`): the paused content goes back
        // as it is (it is in the context now) and the model goes on in the next step, within
        // `max_steps_per_turn`.
        let paused = finish_reason.as_deref() == Some("pause_turn");
        // The turn's structured output is its final answer's.
        let output = (self.config.output.is_some() && !has_calls && !paused).then(|| answer_json(&message));
        // Kept here (not copied) while the tools run, so a cancel can still write it down.
        state.borrow_mut().in_flight = Some((message, usage));
        self.status_update(message_id, usage, model.answered_by());
        stream_end.set();

        let results = collect_results(results).await;
        drop(drivers);
        // Only a cancel takes the message out, and a cancelled step never gets here.
        let Some((message, usage)) = state.borrow_mut().in_flight.take() else { return Err(TurnError::Cancelled) };
        let over = self.close_round(message, usage, &results, state)?;
        // A broken answer stays in the context (it was said), and the turn fails with it.
        match output {
            Some(Err(e)) => return Err(TurnError::Seam(e.into())),
            Some(Ok(Some(json))) => {
                if let Err(why) = self.env.accept_output(&json) {
                    return Err(TurnError::Seam(malformed(&why, json).into()));
                }
            }
            Some(Ok(None)) | None => {}
        }
        Ok(over || (!has_calls && !paused))
    }

    /// A step whose stream broke after a call was handed on: its round goes into the context
    /// (the message as far as it arrived, a result for every call), and the turn goes on with
    /// the next step if the error is one worth retrying and the retry budget allows (see
    /// [`TurnState::broken_attempts`]); otherwise the turn fails with the error.
    fn after_salvage(
        &self,
        model: &M,
        error: ErrOf<M>,
        salvaged: Salvaged,
        attempt: u32,
        state: &Rc<RefCell<TurnState>>,
        round: &Rc<RefCell<MessageAssembler>>,
    ) -> Result<bool, TurnError<ErrOf<M>>> {
        *round.borrow_mut() = MessageAssembler::new();
        let Salvaged { generated: GenerateOutput { id, message, usage, .. }, results } = salvaged;
        self.status_update(id, usage, model.answered_by());
        let over = self.close_round(message, usage, &results, state)?;
        let Some(pe) = error.provider_error() else { return Err(TurnError::Seam(error)) };
        let go_on = attempt < self.config.max_retries_per_step && is_retryable(pe);
        // The round is kept either way; a fallback model that moves on asks the next step of its
        // next provider, from that provider's first attempt.
        if model.fall_back(pe, !go_on).is_some() {
            state.borrow_mut().broken_attempts = 0;
            return Ok(over);
        }
        if !go_on {
            return Err(TurnError::Seam(error));
        }
        state.borrow_mut().broken_attempts = attempt;
        Ok(over)
    }

    /// kimi-cli: the context's count becomes the step's input tokens, then the status.
    pub(super) fn status_update(
        &self,
        message_id: Option<String>,
        usage: Option<TokenUsage>,
        provider: Option<crate::engine::model::Member>,
    ) {
        if let Some(u) = &usage {
            self.context.update_token_count(u.input());
        }
        let status = Status::of(self.context.read(|c| c.token_count()), self.config.max_context_tokens);
        let subagent_token_usage = self.env.subagent_usage();
        self.send(WireMessage::StatusUpdate(StatusUpdate {
            status,
            token_usage: usage,
            message_id,
            provider,
            subagent_token_usage,
        }));
    }

    /// Writes a round into the context — its message, usage and one tool message per result —
    /// and applies the rules that may end the turn; `Ok(true)` when the user refused a call
    /// without feedback (the turn goes back to the user).
    pub(super) fn close_round(
        &self,
        message: Message,
        usage: Option<TokenUsage>,
        results: &[ToolResult],
        state: &Rc<RefCell<TurnState>>,
    ) -> Result<bool, TurnError<ErrOf<M>>> {
        {
            let mut st = state.borrow_mut();
            st.repeats.end_step();
            st.earlier_ids.extend(message.tool_calls.iter().flatten().map(|c| c.id.clone()));
        }
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

    pub(super) fn grow(&self, message: Message, usage: Option<TokenUsage>, results: &[ToolResult]) {
        self.grow_messages(message, usage, results.iter().map(tool_result_to_message).collect());
    }

    /// Appends a step's message, its usage and its tool messages.
    pub(super) fn grow_messages(&self, message: Message, usage: Option<TokenUsage>, tool_messages: Vec<Message>) {
        self.context.append(vec![message]);
        if let Some(u) = &usage {
            self.context.update_token_count(u.total());
        }
        self.context.append(tool_messages);
    }
}
