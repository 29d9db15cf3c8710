//! The toolset as one turn hands it to `step`: same-step duplicates share one run, repeated calls
//! get kimi-cli's reminders, a call replayed under the same id gets the result it has, and what a
//! turn keeps across its steps for the cleanup after a cancel.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use futures::future::{LocalBoxFuture, Shared};
use futures::FutureExt;

use crate::engine::json::Arguments;
use crate::engine::message::{Message, TokenUsage, ToolCall};
use crate::engine::soul::approval::Approvals;
use crate::engine::soul::context::TurnMark;
use crate::engine::soul::repeat::{append_reminder, RepeatTracker, Verdict};
use crate::engine::soul::wire::WireMessage;
use crate::engine::step::ToolDispatch;
use crate::engine::toolset::{ToolOutput, ToolResult, ToolReturnValue};

/// The result a call gets when the run was cancelled before it finished.
pub fn aborted_result(call_id: &str) -> ToolResult {
    ToolResult {
        tool_call_id: call_id.to_owned(),
        return_value: ToolReturnValue::error(
            "The tool call was aborted: the user cancelled the run before it finished. \
             It may have taken effect; check before calling it again.",
            "Aborted",
            ToolOutput::Text(String::new()),
        ),
    }
}

/// The result a call gets when its call could not be stored (the session's store refused a
/// write): the tool never started, and the turn stops.
pub fn unstored_result(call_id: &str) -> ToolResult {
    ToolResult {
        tool_call_id: call_id.to_owned(),
        return_value: ToolReturnValue::error(
            "The tool did not run: the session could not store its call.",
            "Not run",
            ToolOutput::Text(String::new()),
        ),
    }
}

/// The result a call of a tool that asks before it starts gets when its turn is closed before it
/// was approved (a cancel, a turn given up after deaths): the tool never started.
pub fn unapproved_result(call_id: &str) -> ToolResult {
    ToolResult {
        tool_call_id: call_id.to_owned(),
        return_value: ToolReturnValue::error(
            "The tool did not run: the turn stopped before the call was approved.",
            "Not run",
            ToolOutput::Text(String::new()),
        ),
    }
}

/// What an approval asked before a call starts describes: the tool and its arguments (cut at
/// 500 characters).
fn approval_description(call: &ToolCall) -> String {
    let args = call.function.arguments.as_deref().unwrap_or("{}");
    let cut: String = args.chars().take(500).collect();
    let more = if cut.len() < args.len() { "…" } else { "" };
    format!("{}({cut}{more})", call.function.name)
}

/// The result a call gets when the turn ran past its time limit (`ms`) before the call finished.
pub fn timed_out_result(call_id: &str, ms: f64) -> ToolResult {
    ToolResult {
        tool_call_id: call_id.to_owned(),
        return_value: ToolReturnValue::error(
            &format!(
                "The tool call was stopped: the turn ran past its time limit ({} ms) before it finished.",
                crate::engine::json::number_text(ms)
            ),
            "Timed out",
            ToolOutput::Text(String::new()),
        ),
    }
}

/// The result a call gets when the runtime running it stopped (a deploy, an eviction, a crash)
/// before its result was recorded: it may have run to the end, part of the way, or not at all.
pub fn interrupted_result(call_id: &str) -> ToolResult {
    ToolResult {
        tool_call_id: call_id.to_owned(),
        return_value: ToolReturnValue::error(
            "The tool call was interrupted: the runtime running it stopped before its result was recorded. \
             It may have taken effect; check before calling it again.",
            "Interrupted",
            ToolOutput::Text(String::new()),
        ),
    }
}

/// How a turn whose runtime died mid-way (an isolate evicted, a tab closed) is closed from its
/// recording without going on: an interrupted result ([`interrupted_result`]) for every call the
/// wire showed without a result, then `TurnEnd`. (To go on with the turn instead, see
/// `soul::recovery`.) `messages`: the turn's recorded messages, in order.
pub fn close_interrupted_turn(messages: &[WireMessage]) -> Vec<WireMessage> {
    let mut open: Vec<String> = Vec::new();
    for m in messages {
        match m {
            WireMessage::Part(crate::engine::message::StreamedMessagePart::ToolCall(c)) => open.push(c.id.clone()),
            WireMessage::ToolResult(r) => open.retain(|id| *id != r.tool_call_id),
            WireMessage::Other { kind, payload } if kind == "ToolResult" => {
                if let Some(id) = payload.get("tool_call_id").and_then(|v| v.as_str()) {
                    open.retain(|o| o != id);
                }
            }
            _ => {}
        }
    }
    let mut out: Vec<WireMessage> = open.iter().map(|id| WireMessage::ToolResult(interrupted_result(id))).collect();
    out.push(WireMessage::TurnEnd);
    out
}

/// A step's end on the wire: set once its `StatusUpdate` is sent; what a tool that waits for the
/// stream's end waits on.
#[derive(Default)]
pub(super) struct StreamEnd {
    ended: std::cell::Cell<bool>,
    wakers: RefCell<Vec<std::task::Waker>>,
}

impl StreamEnd {
    pub(super) fn set(&self) {
        self.ended.set(true);
        for w in self.wakers.take() {
            w.wake();
        }
    }

    fn poll(&self, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        if self.ended.get() {
            return std::task::Poll::Ready(());
        }
        self.wakers.borrow_mut().push(cx.waker().clone());
        std::task::Poll::Pending
    }
}

/// One turn's shared state (what outlives a dropped step, for the cleanup after a cancel).
pub(super) struct TurnState {
    pub(super) repeats: RepeatTracker,
    /// A step whose message is complete but not yet in the context.
    pub(super) in_flight: Option<(Message, Option<TokenUsage>)>,
    /// The message in flight is in the context already (a recovered round the dead runtime wrote),
    /// with results for these calls: a cancel writes only the results it lacks.
    pub(super) in_context: Option<Vec<String>>,
    /// Results by call id, across the attempts and steps of the turn.
    pub(super) finished: HashMap<String, ToolResult>,
    /// Calls by id, across attempts and steps: one that streams the very same call again
    /// gets the result it already has instead of running the tool again.
    pub(super) calls: HashMap<String, ToolCall>,
    /// Results published on the wire in this step.
    pub(super) published: HashSet<String>,
    /// This attempt's running calls by key, for duplicates within the step.
    pub(super) by_key: HashMap<(String, String), Shared<LocalBoxFuture<'static, ToolResult>>>,
    /// The attempt whose stream broke last, when the steps since have all broken: the next
    /// step's first attempt is the one after it, so a provider that keeps breaking uses up the
    /// retry budget across salvaged steps too (0 after a step that streamed whole).
    pub(super) broken_attempts: u32,
    /// The ids of the calls in the turn's closed rounds: a later call the server gives one of
    /// them is renamed (call ids are unique per turn).
    pub(super) earlier_ids: HashSet<String>,
    /// Renamed calls: the call's id → the id the server gave it (a call sent again under its
    /// old id with the same function is that call: it gets the result it has).
    pub(super) renamed: HashMap<String, String>,
    /// The turn's id (its `TurnBegin`'s), which its checkpoints carry; none for a turn resumed
    /// from a recording that had none.
    pub(super) turn_id: Option<String>,
}

impl TurnState {
    pub(super) fn new() -> TurnState {
        TurnState {
            repeats: RepeatTracker::default(),
            in_flight: None,
            in_context: None,
            finished: HashMap::new(),
            calls: HashMap::new(),
            published: HashSet::new(),
            by_key: HashMap::new(),
            broken_attempts: 0,
            earlier_ids: HashSet::new(),
            renamed: HashMap::new(),
            turn_id: None,
        }
    }

    /// The mark of a checkpoint the turn writes in step `step` (0: before its user message).
    pub(super) fn mark(&self, step: u32) -> Option<TurnMark> {
        self.turn_id.as_ref().map(|t| TurnMark { turn: t.clone(), step })
    }

    /// A new id for a call the server named `id`, when the turn used `id` already.
    pub(super) fn rename(&mut self, id: &str) -> Option<String> {
        if id.is_empty() || !self.earlier_ids.contains(id) {
            return None;
        }
        let free = |n: &String| !self.earlier_ids.contains(n) && !self.renamed.contains_key(n);
        let new = (2u32..).map(|k| format!("{id}_{k}")).find(free)?;
        self.renamed.insert(new.clone(), id.to_owned());
        Some(new)
    }

    /// The result the turn has for `call` already: under its id, or under the id the server
    /// gave it when it was renamed — only when the function is the same.
    pub(super) fn had(&self, call: &ToolCall) -> Option<&ToolResult> {
        let key = self.renamed.get(&call.id).unwrap_or(&call.id);
        let done = self.finished.get(key)?;
        self.calls.get(key).filter(|c| c.function == call.function).map(|_| done)
    }
}

/// The toolset as one turn hands it to `step`: same-step duplicates share one run, repeated
/// calls get their reminders, results already had in an earlier attempt are reused.
pub(super) struct TurnDispatch<'a, T> {
    pub(super) inner: &'a T,
    pub(super) state: Rc<RefCell<TurnState>>,
    /// The turn's wire: flushed before a call is handed to its tool, so the call (with its whole
    /// input) is recorded before the tool can do anything — what a recovery reads back.
    pub(super) wire: crate::engine::soul::wire::Wire,
    /// Where a tool that needs approval before it starts asks.
    pub(super) approvals: Rc<Approvals>,
    /// Resolves once the step's end (its `StatusUpdate`) is on the wire: a tool that waits for the
    /// stream's end (`eager: false`) starts only after that is recorded and stored, so a recovery
    /// that finds no end knows no such tool started, and one that finds it never says "did not
    /// run". `None` where the end is recorded already (a resumed round).
    pub(super) stream_end: Option<Rc<StreamEnd>>,
}

impl<T: ToolDispatch> ToolDispatch for TurnDispatch<'_, T> {
    fn is_eager(&self, name: &str) -> bool {
        self.inner.is_eager(name)
    }

    fn is_idempotent(&self, name: &str) -> bool {
        self.inner.is_idempotent(name)
    }

    fn on_malformed_arguments(&self, call: &ToolCall) {
        self.inner.on_malformed_arguments(call)
    }

    fn on_cut_off(&self, call: &ToolCall, chars: usize) {
        self.inner.on_cut_off(call, chars)
    }

    fn on_late_fragment(&self, call: &ToolCall, bytes: usize) {
        self.inner.on_late_fragment(call, bytes)
    }

    fn had(&self, call: &ToolCall) -> Option<ToolResult> {
        let st = self.state.borrow();
        st.had(call).map(|r| ToolResult { tool_call_id: call.id.clone(), return_value: r.return_value.clone() })
    }

    fn dispatch(&self, call: &ToolCall, args: &Arguments<'_>) -> LocalBoxFuture<'static, ToolResult> {
        // Write before tell: the call (with its whole input) is recorded, and the tool is held
        // back until that record is stored — what a recovery reads back to know it started. A
        // tool that waits for the stream's end is held until that end is recorded too.
        let after_end = self.stream_end.clone().filter(|_| !self.inner.is_eager(&call.function.name));
        #[cfg(feature = "planted-bugs")]
        let after_end = after_end.filter(|_| !crate::engine::session::planted::skip_stream_end());
        let wire = self.wire.clone();
        let stored = async move {
            if let Some(end) = after_end {
                futures::future::poll_fn(|cx| end.poll(cx)).await;
            }
            wire.flush();
            wire.stored().await
        };
        // A call that has its result already (replayed under its id) is not asked again.
        let had = self.state.borrow().had(call).is_some();
        let need = if had { None } else { self.inner.needs_approval(call, args) };
        let fut = self.dispatch_now(call, args);
        let id = call.id.clone();
        let ask =
            need.map(|need| (need, self.approvals.clone(), call.function.name.clone(), approval_description(call)));
        async move {
            if !stored.await {
                return unstored_result(&id);
            }
            // Asked before the handler starts: nothing of the tool runs until it is approved.
            if let Some((need, approvals, name, description)) = ask {
                match need.await {
                    Ok(false) => {}
                    Ok(true) => match approvals.request(&id, &name, &description, true) {
                        Ok(answer) => {
                            if !answer.await {
                                return ToolResult { return_value: approvals.rejection(&id), tool_call_id: id };
                            }
                        }
                        Err(e) => {
                            return ToolResult {
                                tool_call_id: id,
                                return_value: ToolReturnValue::runtime_error(&e.to_string()),
                            }
                        }
                    },
                    Err(e) => {
                        return ToolResult {
                            tool_call_id: id,
                            return_value: ToolReturnValue::runtime_error(&format!("needsApproval failed: {e}")),
                        }
                    }
                }
            }
            fut.await
        }
        .boxed_local()
    }
}

impl<T: ToolDispatch> TurnDispatch<'_, T> {
    fn dispatch_now(&self, call: &ToolCall, args: &Arguments<'_>) -> LocalBoxFuture<'static, ToolResult> {
        let mut st = self.state.borrow_mut();
        let key = (call.function.name.clone(), args.canonical());
        let verdict = st.repeats.on_call(&key);
        if let Some(done) = st.had(call) {
            let done = ToolResult { tool_call_id: call.id.clone(), return_value: done.return_value.clone() };
            return futures::future::ready(done).boxed_local();
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
