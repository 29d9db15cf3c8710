//! A turn that goes on after the runtime that ran it died: its recorded round closed by the
//! broken-round rule (see `soul::recovery`), then the next step, on the same code path as
//! any turn.

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;

use futures::future::{join_all, LocalBoxFuture};
use futures::FutureExt;

use super::dispatch::{interrupted_result, unapproved_result, TurnDispatch, TurnState};
use super::error::TurnError;
use super::seams::TurnTools;
use super::turn::{ErrOf, Turn};
use crate::engine::generate::MessageAssembler;
use crate::engine::json::Arguments;
use crate::engine::message::{Message, Role, ToolCall};
use crate::engine::model::{Model, ModelError};
use crate::engine::soul::recovery::{RecordedApproval, RecordedTurn, RecoveryBudget, RecoveryStop};
use crate::engine::soul::wire::ApprovalResponse;
use crate::engine::soul::wire::{StepRetry, WireMessage};
use crate::engine::step::{cut_off_result, malformed_arguments_result, ToolDispatch};
use crate::engine::toolset::ToolResult;

/// A recovered step's answer, read again from its start (see [`Turn::read_again`]); the round as
/// recorded is the turn's round.
pub(crate) struct ReadAgain<S> {
    pub(super) source: S,
}

/// What the recorded round leaves the turn to do.
enum Closed {
    /// The round ended the turn (a final answer, or a refusal without feedback).
    Over,
    /// The turn goes on with the next step.
    Next,
    /// The round was an answer cut off before any call: void, as a failed attempt is; the step
    /// is tried again.
    Retry,
}

/// What becomes of one call of the recorded round.
enum Close {
    Have(ToolResult),
    /// The engine answers it now (it never ran, or it may have: interrupted).
    Answer(ToolResult),
    /// Its tool runs (again): it is idempotent, or it was waiting for its approval.
    Rerun,
}

impl<'a, M, T> Turn<'a, M, T>
where
    M: Model,
    ErrOf<M>: ModelError,
    T: TurnTools,
{
    /// Goes on with a turn whose runtime died, from what its recording shows (`recorded`, read
    /// from the recording, checked against this turn's context by the caller). Publishes a
    /// `Notification` that the turn was resumed, closes the recorded round, then runs the next
    /// steps until the turn ends, within `max_steps_per_turn` and `budget`. `TurnBegin` is not
    /// sent again; `TurnEnd` ends it as any turn. A cancel is handled as in [`Turn::run`].
    pub async fn resume(
        &self,
        recorded: RecordedTurn,
        budget: RecoveryBudget,
        cancel: impl Future<Output = ()>,
    ) -> Result<(), TurnError<ErrOf<M>>> {
        self.send(recorded.resumed_notice(&self.config.name, self.env.now_s()));
        self.until_cancelled(|state, round| self.resume_body(recorded, budget, state, round), cancel).await
    }

    async fn resume_body(
        &self,
        mut recorded: RecordedTurn,
        budget: RecoveryBudget,
        state: Rc<RefCell<TurnState>>,
        round: Rc<RefCell<MessageAssembler>>,
    ) -> Result<(), TurnError<ErrOf<M>>> {
        let model = self.model.ok_or(TurnError::LLMNotSet)?;
        // Results the turn recorded are had: a call the model sends again under the same id gets
        // the result it has.
        {
            let mut st = state.borrow_mut();
            st.finished.extend(recorded.results.iter().map(|(k, v)| (k.clone(), v.clone())));
            // Ids the turn used before its death stay used: a later call given one is renamed.
            st.earlier_ids.extend(recorded.results.keys().cloned());
            st.turn_id = recorded.turn_id.clone();
        }
        let cancelled = recorded.stop == Some(RecoveryStop::Cancelled);
        let give_up_why = if let Some(RecoveryStop::GiveUp(why)) = &recorded.stop {
            Some(why.clone())
        } else if cancelled {
            Some(String::new())
        } else if recorded.failing {
            Some("it was ending with an error when its runtime stopped".to_owned())
        } else if recorded.resumes_without_progress >= budget.max_resumes && !recorded.waiting_on_person() {
            Some(format!("it was resumed {} times in a row without progress", recorded.resumes_without_progress))
        } else if recorded.resumes_in_a_row >= budget.max_resumes.saturating_mul(4) {
            Some(format!("it was resumed {} times in a row without progress", recorded.resumes_in_a_row))
        } else {
            None
        };
        // A sub-agent's question waits again when its call goes on (its tool runs again and the
        // sub-agent is resumed from its recording): otherwise it is closed with its call, refused
        // on the record, and nobody is left waiting on it.
        let _ = self.tools.definitions(); // (a toolset says which tools are idempotent once read)
        for (id, call) in &recorded.subagent_asked {
            let goes_on = give_up_why.is_none()
                && !recorded.results.contains_key(call)
                && recorded.round.calls().iter().any(|c| c.id == *call && self.tools.is_idempotent(&c.function.name));
            if goes_on {
                // Waiting from now on (answered before its sub-agent waits on it again, the
                // answer is kept for that wait; a cancel first refuses it).
                self.approvals.wire().expect_approval(id);
                continue;
            }
            // On the wire the questions are asked on (a sub-agent's: its caller's).
            self.approvals.wire().close_request(id);
        }
        // A cancel stored before the runtime stopped: what ran is closed, nothing runs again.
        let give_up = |why: String| if cancelled { TurnError::Cancelled } else { TurnError::NotRecovered(why) };
        if recorded.step == 0 {
            if give_up_why.is_none() && !self.context.read(|c| recorded.user_message_written(c)) {
                let user = recorded.user_input.message();
                self.check_capabilities(&user)?;
                // The turn's first checkpoint, unless the context has it already.
                let id = recorded.turn_id.as_ref();
                if id.is_none() || self.context.read(|c| c.turn_mark().map(|m| &m.turn) != id) {
                    let mark = state.borrow().mark(0);
                    self.context.checkpoint_marked(mark);
                }
                self.context.append(vec![user]);
                self.check_store()?;
            }
        } else {
            // The step began on the wire and died before its checkpoint reached the context
            // (which holds the step before whole, checked): the checkpoint is written now, so
            // what the context holds of the step is what follows it.
            if !self.context.read(|c| recorded.step_checkpointed(c)) {
                let mark = state.borrow().mark(recorded.step);
                self.context.checkpoint_marked(mark);
            }
            // The results the recording holds for the round's calls are on the wire already (in
            // the life that ran them): a cancel from here keeps them, never sends them again.
            {
                let mut st = state.borrow_mut();
                let had = recorded.round.calls().iter().filter(|c| recorded.results.contains_key(&c.id));
                st.published.extend(had.map(|c| c.id.clone()));
            }
            if give_up_why.is_none() {
                // Before anything is awaited: an answer the person gives while the turn gets
                // going is taken.
                self.resume_approvals(&recorded);
                // The answer is read again while the dead runtime wrote none of its round to the
                // context (a round written there is closed as written).
                let written = self.round_in_context().0.is_some();
                if !recorded.stream_ended && !written {
                    if let Some(again) = self.read_again(model, &mut recorded, &state, &round).await {
                        return self.steps_from(model, recorded.step, false, &state, &round, Some(again)).await;
                    }
                }
            }
            let closed = self.close_recorded_round(&recorded, give_up_why.is_some(), &state).await?;
            self.check_store()?;
            if let Some(why) = give_up_why.clone() {
                self.send(WireMessage::StepInterrupted);
                return Err(give_up(why));
            }
            match closed {
                Closed::Over => return Ok(()),
                Closed::Next => {}
                Closed::Retry => {
                    // The UI drops the void attempt's parts at the `StepRetry`, as after a failed
                    // attempt; the step is asked again.
                    self.send(WireMessage::StepRetry(StepRetry {
                        n: recorded.step,
                        next_attempt: 2,
                        max_attempts: self.config.max_retries_per_step.max(2),
                        wait_s: 0.0,
                        error_type: "RuntimeStopped".into(),
                        status_code: None,
                        fallback: None,
                    }));
                    // The void attempt counts as the step's first: the next is the second.
                    state.borrow_mut().broken_attempts = 1;
                    return self.steps_from(model, recorded.step, false, &state, &round, None).await;
                }
            }
        }
        if let Some(why) = give_up_why {
            self.send(WireMessage::StepInterrupted);
            return Err(give_up(why));
        }
        self.steps_from(model, recorded.step + 1, true, &state, &round, None).await
    }

    /// The recorded round written into the context with one result per call (see the module
    /// `soul::recovery` for which). `no_reruns`: the turn is given up, so nothing runs again (an
    /// unfinished call is interrupted).
    async fn close_recorded_round(
        &self,
        recorded: &RecordedTurn,
        no_reruns: bool,
        state: &Rc<RefCell<TurnState>>,
    ) -> Result<Closed, TurnError<ErrOf<M>>> {
        // What the context holds of the round already (the runtime died after writing it, or
        // part of it): its message, and the results written after it.
        let (written, written_results) = self.round_in_context();
        let recorded_ids: Vec<&str> = recorded.round.calls().iter().map(|c| c.id.as_str()).collect();
        let written = written.filter(|m| {
            let ids: Vec<&str> = m.tool_calls.iter().flatten().map(|c| c.id.as_str()).collect();
            ids == recorded_ids || !recorded.round.has_substance()
        });
        let message: Message = match &written {
            Some(m) => m.clone(),
            None if recorded.round.has_substance() => recorded.round.message_so_far(),
            // The step began and nothing of it arrived: nothing to close.
            None => return Ok(Closed::Next),
        };
        let calls = message.tool_calls.clone().unwrap_or_default();
        if calls.is_empty() {
            // An answer without calls: whole, it was the turn's last (written now if it was not);
            // cut off, it is void and the step is asked again.
            if written.is_some() {
                return Ok(Closed::Over);
            }
            if !recorded.stream_ended {
                return Ok(if no_reruns { Closed::Next } else { Closed::Retry });
            }
            self.close_round(message, recorded.usage, &[], state)?;
            return Ok(Closed::Over);
        }
        // From here the round is in flight (a tool's `needsApproval` may take a while to say): a
        // cancel closes it — its recorded results stand, every other call gets an aborted one,
        // and a message the context holds already is not written again.
        {
            let mut st = state.borrow_mut();
            st.in_flight = Some((message.clone(), recorded.usage));
            st.in_context = written.as_ref().map(|_| written_results.clone());
        }
        // Read now: a toolset says which of its tools wait for a whole answer or are idempotent
        // with its definitions.
        let _ = self.tools.definitions();
        let not_started = self.not_started(recorded, &calls).await;
        let plan: Vec<Close> = calls
            .iter()
            .zip(not_started)
            .map(|(c, not_started)| {
                if let Some(r) = recorded.results.get(&c.id) {
                    return Close::Have(r.clone());
                }
                let args = match Arguments::check(c.function.arguments.as_deref()) {
                    Ok(a) => a,
                    Err(e) if recorded.stream_ended => return Close::Answer(malformed_arguments_result(c, &e)),
                    Err(_) => {
                        let chars = c.function.arguments.as_deref().map_or(0, |a| a.chars().count());
                        self.tools.on_cut_off(c, chars);
                        return Close::Answer(cut_off_result(c, false));
                    }
                };
                let _ = args;
                if !recorded.stream_ended && !self.tools.is_eager(&c.function.name) {
                    Close::Answer(cut_off_result(c, true))
                } else if !no_reruns && (not_started || self.tools.is_idempotent(&c.function.name)) {
                    Close::Rerun
                } else if not_started {
                    Close::Answer(unapproved_result(&c.id))
                } else {
                    Close::Answer(interrupted_result(&c.id))
                }
            })
            .collect();
        // While the reruns run, the round is in flight: a cancel writes it with aborted results.
        state.borrow_mut().in_flight = Some((message.clone(), recorded.usage));
        for (c, p) in calls.iter().zip(&plan) {
            match p {
                Close::Have(r) => {
                    // On the wire already (in the life that ran it).
                    let mut st = state.borrow_mut();
                    st.finished.insert(c.id.clone(), r.clone());
                    st.published.insert(c.id.clone());
                }
                Close::Answer(r) => self.publish_result(state, r),
                Close::Rerun => {}
            }
        }
        let dispatch = TurnDispatch {
            inner: self.tools,
            state: state.clone(),
            wire: self.wire.clone(),
            approvals: self.approvals.clone(),
            stream_end: None, // a rerun round's end is recorded (or it reruns no such tool)
        };
        let runs: Vec<LocalBoxFuture<'_, ToolResult>> = calls
            .iter()
            .zip(plan)
            .map(|(c, p)| match p {
                Close::Have(r) | Close::Answer(r) => futures::future::ready(r).boxed_local(),
                Close::Rerun => {
                    let fut = match Arguments::check(c.function.arguments.as_deref()) {
                        Ok(args) => {
                            state.borrow_mut().finished.remove(&c.id);
                            dispatch.dispatch(c, &args)
                        }
                        Err(e) => futures::future::ready(malformed_arguments_result(c, &e)).boxed_local(),
                    };
                    async move {
                        let r = fut.await;
                        self.publish_result(state, &r);
                        r
                    }
                    .boxed_local()
                }
            })
            .collect();
        let results = join_all(runs).await;
        let Some((message, usage)) = state.borrow_mut().in_flight.take() else { return Err(TurnError::Cancelled) };
        state.borrow_mut().in_context = None;
        if written.is_some() {
            // The message is in the context: only the results it lacks are written.
            let missing: Vec<Message> = results
                .iter()
                .filter(|r| !written_results.contains(&r.tool_call_id))
                .map(crate::engine::soul::rules::tool_result_to_message)
                .collect();
            self.context.append(missing);
            state.borrow_mut().repeats.end_step();
            return Ok(Closed::Next);
        }
        Ok(if self.close_round(message, usage, &results, state)? { Closed::Over } else { Closed::Next })
    }

    /// What the context holds of the step's round already (the dead runtime wrote it, or part
    /// of it): its message, and the calls it has results for.
    fn round_in_context(&self) -> (Option<Message>, Vec<String>) {
        self.context.read(|c| {
            let tail = c.since_last_checkpoint();
            let message = tail.iter().find(|m| m.role == Role::Assistant).map(|m| (*m).clone());
            (message, tail.iter().filter_map(|m| m.tool_call_id.clone()).collect())
        })
    }

    /// Approvals asked in the recorded round wait again under their ids (answered already, if
    /// the answer was recorded): a call that runs again finds its request, nothing is asked twice.
    fn resume_approvals(&self, recorded: &RecordedTurn) {
        let _ = self.tools.definitions();
        for a in &recorded.approvals {
            self.approvals.resume(a);
        }
    }

    /// For each of `calls` (the recorded round's): whether it surely did not start. What a death
    /// leaves is decided by what was recorded, never by running a handler again to find out.
    async fn not_started(&self, recorded: &RecordedTurn, calls: &[ToolCall]) -> Vec<bool> {
        let mut out = Vec::with_capacity(calls.len());
        for c in calls {
            // A call of a tool that asks before it starts (`needsApproval`), with no question of
            // it recorded, has not started: its tool would have asked first, and that question is
            // recorded (and stored: write before tell) before anyone can answer it — unless nobody
            // is asked (approved for the session, yolo), when the tool starts once its call is
            // stored. Only a session knows every approval for the session given before the death.
            let unasked = recorded.knows_session_approvals
                && !recorded.results.contains_key(&c.id)
                && !recorded.approvals.iter().any(|a| a.tool_call_id == c.id)
                && !self.approvals.asks_nobody(&c.function.name);
            let need = match Arguments::check(c.function.arguments.as_deref()) {
                Ok(args) if unasked => self.tools.needs_approval(c, &args),
                _ => None,
            };
            let asks_first = match need {
                Some(need) => need.await.unwrap_or(false),
                None => false,
            };
            // A call whose only question was asked before its handler started (`needsApproval`)
            // and not approved has not run, so it waits (or takes its refusal) again; a handler
            // that asked mid-run has started.
            let asked: Vec<&RecordedApproval> = recorded.approvals.iter().filter(|a| a.tool_call_id == c.id).collect();
            out.push(
                asks_first
                    || !asked.is_empty()
                        && asked.iter().all(|a| {
                            a.before_start
                                && !matches!(
                                    a.answer,
                                    Some((ApprovalResponse::Approve | ApprovalResponse::ApproveForSession, _))
                                )
                        }),
            );
        }
        out
    }

    /// The recorded round goes on with its answer, read again from its start (the server kept
    /// it: [`RecordedTurn::answer`]) instead of being closed and asked again. The calls the
    /// recording shows whole are answered as the broken-round rule says — a recorded result is
    /// had, one that may have started is interrupted unless its tool is idempotent (then it runs
    /// again), one that surely did not start or whose tool waits for the stream's end runs — and
    /// the rest of the answer streams as in any step. `None`: the answer cannot be read again (the
    /// model keeps no answers, or the server refused: then the round is closed as before).
    async fn read_again(
        &self,
        model: &M,
        recorded: &mut RecordedTurn,
        state: &Rc<RefCell<TurnState>>,
        round: &Rc<RefCell<MessageAssembler>>,
    ) -> Option<ReadAgain<M::Source>> {
        let id = recorded.answer.clone()?;
        #[cfg(feature = "planted-bugs")]
        if crate::engine::session::planted::ask_kept_again() {
            return None;
        }
        let request = model.reopen(&id)?.ok()?;
        // The round as recorded is the turn's from here: a cancel closes it (its recorded results
        // stand, every other call gets an aborted one).
        *round.borrow_mut() = std::mem::take(&mut recorded.round);
        let calls: Vec<ToolCall> = round.borrow().calls().to_vec();
        let source = match model.open(request).await {
            Ok(source) => source,
            Err(_) => {
                recorded.round = std::mem::take(&mut *round.borrow_mut());
                return None;
            }
        };
        let not_started = self.not_started(recorded, &calls).await;
        let mut asm = round.borrow_mut();
        let mut st = state.borrow_mut();
        for (i, (c, not_started)) in calls.iter().zip(not_started).enumerate() {
            // A call is whole when one came after it, or when its input is a whole JSON value
            // (nothing can follow one). A last call whose input is still empty may go on: if the
            // answer read again adds to it, it was not whole when the runtime died (a call is
            // handed on once whole), so it never ran and runs now with its whole input; if it adds
            // nothing, what the call has here (below) stands — a turn's result is had only by a
            // call with the very same function and arguments.
            let parsed = Arguments::check(c.function.arguments.as_deref()).is_ok();
            let empty = c.function.arguments.as_deref().is_none_or(|a| a.trim().is_empty());
            if i + 1 < calls.len() || (parsed && !empty) {
                asm.complete(&c.id, None);
            }
            let had = match recorded.results.get(&c.id) {
                Some(r) => Some(r.clone()),
                None if !parsed || not_started || !self.tools.is_eager(&c.function.name) => None,
                None if self.tools.is_idempotent(&c.function.name) => None,
                None => Some(interrupted_result(&c.id)),
            };
            if let Some(r) = had {
                st.finished.insert(c.id.clone(), r);
                st.calls.insert(c.id.clone(), c.clone());
            }
        }
        asm.read_again(std::mem::take(&mut recorded.replay));
        Some(ReadAgain { source })
    }

    /// A result of the recovered round, on the wire (once) and kept for a cancel.
    fn publish_result(&self, state: &Rc<RefCell<TurnState>>, r: &ToolResult) {
        let fresh = {
            let mut st = state.borrow_mut();
            st.finished.insert(r.tool_call_id.clone(), r.clone());
            st.published.insert(r.tool_call_id.clone())
        };
        if fresh {
            self.send(WireMessage::ToolResult(r.clone()));
        }
    }
}
