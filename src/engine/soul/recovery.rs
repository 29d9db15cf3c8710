//! A turn whose runtime died (a deploy, an eviction, a crash), read back from its recording.
//!
//! The recording is the source of truth while a turn runs: every part, call, result and approval
//! request is on the wire before anyone is told (`Turn` flushes the wire before it hands a call
//! to a tool). [`RecordedTurn::read`] reads the unfinished turn's messages back into the turn's
//! own state — the step it was in, the round so far of that step's attempt (text, thinking, every
//! call the wire showed), which calls have results, which approval waits — and `Turn::resume`
//! hands that to the broken-round rule:
//!
//! - text and thinking so far are kept; every call with a recorded result keeps it and never
//!   runs again;
//! - a call whose input was cut off gets the cut-off result (it never ran); so does a call of a
//!   tool that waits for a whole answer when the answer never ended;
//! - a call that may have started and has no recorded result gets the interrupted result
//!   ([`interrupted_result`](super::agent::interrupted_result): it may have taken effect), unless
//!   its tool is idempotent: then it runs again, with the same call id;
//! - a call waiting for its approval runs again and finds its request still waiting under the same
//!   id (answered already, if the answer was recorded): nothing is asked twice.
//!
//! Then the turn goes on with the next step. A resume is published as a kimi-cli `Notification`
//! (`type: "turn_resumed"`), which is also how a later recovery counts the resumes that made no
//! progress ([`RecoveryBudget`]).

use std::collections::HashMap;

use serde_json::{json, Value};

use crate::engine::generate::{Heard, Limits, MessageAssembler};
use crate::engine::message::{Message, Role, StreamedMessagePart, TokenUsage};
use crate::engine::replay::Replay;
use crate::engine::soul::agent::UserInput;
use crate::engine::soul::context::Context;
use crate::engine::soul::wire::{ApprovalResponse, WireMessage};
use crate::engine::toolset::ToolResult;

/// The `Notification` type a resume is published as.
pub const RESUMED: &str = "turn_resumed";

/// The `Notification` type that records the id of an answer the server keeps (`payload.
/// response_id`): a turn recovered while that answer streamed reads it again instead of asking
/// the model again.
pub const ANSWER_KEPT: &str = "answer_kept";

/// The `Notification` type that says an answer's broken stream is read again after a sequence
/// number (`payload.starting_after`): the same answer goes on.
pub const ANSWER_RECONNECTED: &str = "answer_reconnected";

/// How many resumes in a row may make no progress before the turn is given up, by default. A
/// resume makes progress when a stream ends or a call gets its result after it; a resume of a
/// turn that waits on a person costs nothing.
pub const DEFAULT_MAX_RESUMES: u32 = 3;

/// The resumes a turn may use while it makes no progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecoveryBudget {
    pub max_resumes: u32,
}

impl Default for RecoveryBudget {
    fn default() -> Self {
        RecoveryBudget { max_resumes: DEFAULT_MAX_RESUMES }
    }
}

/// An approval a tool asked for in the unfinished round.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedApproval {
    pub request_id: String,
    pub tool_call_id: String,
    pub action: String,
    /// The answer, when it was recorded (the tool had not finished yet).
    pub answer: Option<(ApprovalResponse, String)>,
    /// Asked before the tool's handler started (`needsApproval`).
    pub before_start: bool,
}

/// The unfinished turn, as its recording left it.
#[derive(Debug)]
pub struct RecordedTurn {
    pub user_input: UserInput,
    /// The turn's id (its `TurnBegin`'s), which its context's checkpoints carry; none in a
    /// recording written before turns had ids (or by kimi-cli): it is then matched by its text.
    pub turn_id: Option<String>,
    /// The turn the context was last in when this one began.
    pub after_turn_id: Option<String>,
    /// The last step that began (0: none did).
    pub step: u32,
    /// The round of that step's last attempt, as far as the wire showed it.
    pub round: MessageAssembler,
    /// The same round, as an answer read again compares it ([`Replay`]).
    pub replay: Replay,
    /// The id of the attempt's answer, when the server keeps it (it can be read again).
    pub answer: Option<String>,
    /// The attempt's stream ended (its `StatusUpdate` was recorded), with this usage and id.
    pub stream_ended: bool,
    pub usage: Option<TokenUsage>,
    pub message_id: Option<String>,
    /// Every result recorded in the turn, by call id.
    pub results: HashMap<String, ToolResult>,
    /// The approvals asked in the last step whose call has no result.
    pub approvals: Vec<RecordedApproval>,
    /// Sub-agents' requests (`agent_id` set) not answered, with the call whose sub-agent asked
    /// (empty: none recorded): each waits again when that call goes on (it runs again and its
    /// sub-agent is resumed), and is answered "reject" on resume otherwise.
    pub subagent_asked: Vec<(String, String)>,
    /// What the turn recorded of each sub-agent call (`SubagentEvent`s, unwrapped), in order.
    pub subagents: Vec<RecordedSubagent>,
    /// The step failed (`StepInterrupted`) and the turn was ending.
    pub failing: bool,
    /// Resumes since the last progress that were not waiting on a person.
    pub resumes_without_progress: u32,
    /// Every resume of this turn.
    pub resumes: u32,
    /// Resumes since the last progress, a person's wait included (a crash loop while an approval
    /// waits ends too, after [`RecoveryBudget::max_resumes`] × 4).
    pub resumes_in_a_row: u32,
    /// How the turn is to end instead of going on (set by whoever resumes it: a session that
    /// stored a cancel, or whose store refused a write): nothing runs again.
    pub stop: Option<RecoveryStop>,
    /// Whoever resumes it knows every action approved for the session before the death (a
    /// session keeps them with its commit record): a call of a tool that asks before it starts
    /// with no question recorded can then be known not to have started.
    pub knows_session_approvals: bool,
}

/// What a turn recorded of one sub-agent call: its `SubagentEvent`s unwrapped, and the questions
/// it (or a sub-agent of its) asked on the turn's wire, in order — the sub-agent's own recording,
/// as [`RecordedTurn::read`] reads it when the call goes on after a death.
#[derive(Clone, Debug)]
pub struct RecordedSubagent {
    pub call_id: String,
    pub agent_id: String,
    /// The agent ids of its own sub-agents, nested ones too.
    pub within: Vec<String>,
    /// The requests it (or one within it) asked.
    pub asked: Vec<String>,
    pub messages: Vec<WireMessage>,
}

impl RecordedSubagent {
    /// A request of `agent` is this call's: its sub-agent's, or one within it.
    pub fn owns(&self, agent: &str) -> bool {
        self.agent_id == agent || self.within.iter().any(|a| a == agent)
    }
}

/// The agent ids of the sub-agents an event of a sub-agent's carries, nested ones too.
fn nested_agents(event: &Value, out: &mut Vec<String>) {
    if event.get("type").and_then(Value::as_str) != Some("SubagentEvent") {
        return;
    }
    let Some(p) = event.get("payload") else { return };
    if let Some(id) = p.get("agent_id").and_then(Value::as_str) {
        if !out.iter().any(|a| a == id) {
            out.push(id.to_owned());
        }
    }
    if let Some(e) = p.get("event") {
        nested_agents(e, out);
    }
}

/// The planted [`crate::engine::session::planted::Bug::SubagentQuestionWaited`] (never in a shipped build).
fn planted_waited() -> bool {
    #[cfg(feature = "planted-bugs")]
    return crate::engine::session::planted::subagent_question_waited();
    #[cfg(not(feature = "planted-bugs"))]
    false
}

/// The planted [`crate::engine::session::planted::Bug::SubagentBegunAgain`].
fn planted_begun_again() -> bool {
    #[cfg(feature = "planted-bugs")]
    return crate::engine::session::planted::subagent_begun_again();
    #[cfg(not(feature = "planted-bugs"))]
    false
}

/// A recovered turn that is closed from its recording instead of going on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecoveryStop {
    /// A cancel was stored before the runtime stopped: the turn ends cancelled.
    Cancelled,
    /// The turn is given up (why), and ends not recovered.
    GiveUp(String),
}

/// A kimi-cli `Notification` of the runtime's, from agent `source`: `(title, body)`.
fn notice(
    id: String,
    kind: &str,
    (title, body): (&str, &str),
    severity: &str,
    source: &str,
    now_s: f64,
    payload: Value,
) -> WireMessage {
    WireMessage::Other {
        kind: "Notification".into(),
        payload: json!({
            "id": id,
            "category": "runtime",
            "type": kind,
            "source_kind": "agent",
            "source_id": source,
            "title": title,
            "body": body,
            "severity": severity,
            "created_at": now_s,
            "payload": payload,
        }),
    }
}

/// Why a recording cannot be resumed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecoveryError {
    /// The recording has no `TurnBegin`.
    NoTurn,
    /// Its last turn ended (`TurnEnd` recorded): there is nothing to recover.
    Finished,
    /// The recording is not this context's: what the context holds of the turn is not what the
    /// recording says happened.
    NotThisContext(String),
}

impl std::fmt::Display for RecoveryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecoveryError::NoTurn => f.write_str("the recording holds no turn (no TurnBegin)"),
            RecoveryError::Finished => f.write_str("the recording's last turn has ended: there is nothing to resume"),
            RecoveryError::NotThisContext(why) => {
                write!(f, "the recording does not belong to this context ({why}); nothing was applied")
            }
        }
    }
}

/// A value read from a payload through its text: the message model's readers stay compiled for
/// one deserializer (text), as everywhere in the core.
fn typed<T: serde::de::DeserializeOwned>(v: &Value) -> Option<T> {
    serde_json::from_str(&v.to_string()).ok()
}

impl RecordedTurn {
    /// The last turn of `messages` (a recording, oldest first), if it did not end.
    pub fn read(messages: &[WireMessage]) -> Result<RecordedTurn, RecoveryError> {
        // A recording read back keeps the runtime's own messages as they came (`Other`), parts
        // typed: each is read here by its type and payload, whichever way it arrived.
        let read: Vec<(String, Value, Option<&StreamedMessagePart>)> = messages
            .iter()
            .map(|m| match m {
                WireMessage::Part(p) => (m.kind().to_owned(), Value::Null, Some(p)),
                WireMessage::Other { kind, payload } => (kind.clone(), payload.clone(), None),
                other => {
                    // Through the text (the writer the recorder uses): cheaper in the .wasm than
                    // a second, `Value`-shaped, serializer.
                    let v: Value = serde_json::to_string(other)
                        .ok()
                        .and_then(|t| serde_json::from_str(&t).ok())
                        .unwrap_or(Value::Null);
                    (other.kind().to_owned(), v.get("payload").cloned().unwrap_or(Value::Null), None)
                }
            })
            .collect();
        let begin = read.iter().rposition(|(k, _, _)| k == "TurnBegin").ok_or(RecoveryError::NoTurn)?;
        let user_input: UserInput = read[begin].1.get("user_input").and_then(typed).ok_or(RecoveryError::NoTurn)?;
        let id_of = |k: &str| read[begin].1.get(k).and_then(Value::as_str).map(str::to_owned);
        let fresh = || {
            MessageAssembler::with_limits(Limits {
                max_message_bytes: usize::MAX,
                max_tool_arguments_bytes: usize::MAX,
                ..Limits::default()
            })
        };
        let mut t = RecordedTurn {
            user_input,
            turn_id: id_of("turn_id"),
            after_turn_id: id_of("after_turn_id"),
            step: 0,
            round: fresh(),
            replay: Replay::default(),
            answer: None,
            stream_ended: false,
            usage: None,
            message_id: None,
            results: HashMap::new(),
            approvals: Vec::new(),
            subagent_asked: Vec::new(),
            subagents: Vec::new(),
            failing: false,
            resumes_without_progress: 0,
            resumes: 0,
            resumes_in_a_row: 0,
            stop: None,
            knows_session_approvals: false,
        };
        let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
        for (kind, payload, part) in &read[begin + 1..] {
            if let Some(p) = part {
                // A call recorded twice (a line written again) is one call: the round would
                // otherwise send the model two calls of one id, each with its own result.
                if let StreamedMessagePart::ToolCall(c) = p {
                    if t.round.calls().iter().any(|r| r.id == c.id) {
                        continue;
                    }
                }
                if t.round.try_push((*p).clone()).is_ok() {
                    t.replay.record(p);
                }
                continue;
            }
            match kind.as_str() {
                "TurnEnd" => return Err(RecoveryError::Finished),
                "StepBegin" => {
                    t.step = payload.get("n").and_then(Value::as_u64).map_or(t.step + 1, |n| n as u32);
                    t.round = fresh();
                    t.replay = Replay::default();
                    t.answer = None;
                    t.stream_ended = false;
                    t.usage = None;
                    t.message_id = None;
                    t.approvals.clear();
                    t.failing = false;
                }
                // A failed attempt is void: its parts are dropped (nothing of it ran).
                "StepRetry" => {
                    t.round = fresh();
                    t.replay = Replay::default();
                    t.answer = None;
                    t.stream_ended = false;
                }
                "Notification" if payload.get("type").and_then(Value::as_str) == Some(ANSWER_KEPT) => {
                    t.answer = payload.pointer("/payload/response_id").and_then(Value::as_str).map(str::to_owned);
                }
                "StepInterrupted" => t.failing = true,
                "StatusUpdate" => {
                    t.stream_ended = true;
                    t.usage = payload.get("token_usage").and_then(typed);
                    t.message_id = payload.get("message_id").and_then(Value::as_str).map(str::to_owned);
                    t.resumes_without_progress = 0;
                    t.resumes_in_a_row = 0;
                }
                "ToolResult" => {
                    if let Some(r) = typed::<ToolResult>(payload) {
                        t.approvals.retain(|a| a.tool_call_id != r.tool_call_id);
                        t.results.insert(r.tool_call_id.clone(), r);
                        t.resumes_without_progress = 0;
                        t.resumes_in_a_row = 0;
                    }
                }
                "SubagentEvent" if !planted_begun_again() => {
                    let (call, agent) = (text(payload, "parent_tool_call_id"), text(payload, "agent_id"));
                    let Some(event) = payload.get("event") else { continue };
                    let i = match t.subagents.iter().position(|s| s.call_id == call && s.agent_id == agent) {
                        Some(i) => i,
                        None => {
                            t.subagents.push(RecordedSubagent {
                                call_id: call,
                                agent_id: agent,
                                within: Vec::new(),
                                asked: Vec::new(),
                                messages: Vec::new(),
                            });
                            t.subagents.len() - 1
                        }
                    };
                    let s = &mut t.subagents[i];
                    nested_agents(event, &mut s.within);
                    if let Ok(m) = serde_json::from_str(&event.to_string()) {
                        s.messages.push(m);
                    }
                }
                "ApprovalRequest" if payload.get("agent_id").is_some_and(|a| !a.is_null()) && !planted_waited() => {
                    let id = text(payload, "id");
                    let agent = text(payload, "agent_id");
                    let mut call = String::new();
                    if let Some(s) = t.subagents.iter_mut().rev().find(|s| s.owns(&agent)) {
                        call.clone_from(&s.call_id);
                        // The sub-agent's own question is its own to it; a nested one's stays its
                        // sub-agent's.
                        let mut payload = payload.clone();
                        if s.agent_id == agent {
                            payload["agent_id"] = Value::Null;
                            payload["subagent_type"] = Value::Null;
                        }
                        // As a recording read back holds it: the runtime's own message.
                        s.messages.push(WireMessage::Other { kind: kind.clone(), payload });
                        s.asked.push(id.clone());
                    }
                    t.subagent_asked.push((id, call));
                }
                // A request recorded twice is one request (its second line would wait forever).
                "ApprovalRequest" if t.approvals.iter().any(|a| a.request_id == text(payload, "id")) => {}
                "ApprovalRequest" => t.approvals.push(RecordedApproval {
                    request_id: text(payload, "id"),
                    tool_call_id: text(payload, "tool_call_id"),
                    action: text(payload, "action"),
                    answer: None,
                    before_start: payload.get("before_start").and_then(Value::as_bool).unwrap_or(false),
                }),
                "ApprovalResponse" => {
                    let id = text(payload, "request_id");
                    t.subagent_asked.retain(|(a, _)| *a != id);
                    if let Some(s) = t.subagents.iter_mut().find(|s| s.asked.contains(&id)) {
                        s.messages.push(WireMessage::Other { kind: kind.clone(), payload: payload.clone() });
                    }
                    let response =
                        ApprovalResponse::parse(&text(payload, "response")).unwrap_or(ApprovalResponse::Reject);
                    if let Some(a) = t.approvals.iter_mut().find(|a| a.request_id == id) {
                        a.answer = Some((response, text(payload, "feedback")));
                    }
                    t.resumes_without_progress = 0;
                    t.resumes_in_a_row = 0;
                }
                "Notification" if payload.get("type").and_then(Value::as_str) == Some(RESUMED) => {
                    t.resumes += 1;
                    t.resumes_in_a_row += 1;
                    if !payload.pointer("/payload/waiting_on_person").and_then(Value::as_bool).unwrap_or(false) {
                        t.resumes_without_progress += 1;
                    }
                }
                _ => {}
            }
        }
        Ok(t)
    }

    /// The turn waits on a person: an approval is asked and not answered.
    pub fn waiting_on_person(&self) -> bool {
        self.approvals.iter().any(|a| a.answer.is_none()) || !self.subagent_asked.is_empty()
    }

    /// The `Notification` that says the turn was resumed.
    pub fn resumed_notice(&self, source: &str, now_s: f64) -> WireMessage {
        let n = self.resumes + 1;
        let payload = json!({"step": self.step, "resume": n, "waiting_on_person": self.waiting_on_person()});
        let text = ("Turn resumed", "The runtime running this turn stopped; the turn goes on from its recording.");
        notice(format!("turn-resumed-{n}"), RESUMED, text, "info", source, now_s, payload)
    }

    /// The `Notification` of what became of step `n`'s answer: kept by its server under an id
    /// (recorded: a runtime that dies while it streams is followed by one that reads it again),
    /// or read again after its stream broke.
    pub fn answer_notice(news: Heard<'_>, n: u32, source: &str, now_s: f64) -> WireMessage {
        let (kind, text, payload) = match news {
            Heard::Kept(id) => (
                ANSWER_KEPT,
                (
                    "Answer kept by the server",
                    "The model's answer is kept by its server: a runtime that stops while it streams reads it again.",
                ),
                json!({"step": n, "response_id": id}),
            ),
            Heard::Reconnected(after) => (
                ANSWER_RECONNECTED,
                ("Answer read again", "The model's answer broke off and is read again where it broke."),
                json!({"step": n, "starting_after": after}),
            ),
        };
        notice(format!("{kind}-{n}"), kind, text, "debug", source, now_s, payload)
    }

    /// Checks that `context` is this recording's, exactly: by the turn's id when both carry it
    /// (the context's last marked checkpoint is this turn's, at the recorded step or the one
    /// before it with that step's round whole; or, before the first step, the context is still
    /// where it was when the turn began), and by the turn's user message otherwise (a recording
    /// without ids, or a context restored from its history alone). Every call and result the
    /// context holds of the running step must be one the recording shows.
    pub fn check_context(&self, context: &Context) -> Result<(), RecoveryError> {
        let not = |why: String| Err(RecoveryError::NotThisContext(why));
        let marked = context.turn_mark().is_some() || context.history().is_empty();
        let Some(id) = self.turn_id.as_ref().filter(|_| marked) else {
            return self.check_by_text(context.history());
        };
        let mark = context.turn_mark();
        match mark {
            Some(m) if m.turn == *id => {
                let tail = context.since_last_checkpoint();
                if m.step == self.step {
                    return self.check_calls(tail);
                }
                // The step began on the wire and not in the context: what the context holds
                // after its last checkpoint must be the whole of the step before (the user
                // message, or a round with a result for each call). Any other gap: refused.
                let whole = m.step + 1 == self.step
                    && tail.first().is_some_and(|a| {
                        (a.role == Role::User && m.step == 0 && tail.len() == 1)
                            || (a.role == Role::Assistant
                                && m.step > 0
                                && a.tool_calls.iter().flatten().all(|c| {
                                    tail.iter().filter(|r| r.tool_call_id.as_deref() == Some(c.id.as_str())).count()
                                        == 1
                                }))
                    });
                if whole {
                    return Ok(());
                }
                not(format!(
                    "the context holds this turn up to step {}, its recording up to step {}",
                    m.step, self.step
                ))
            }
            _ if self.step == 0 && mark.map(|m| &m.turn) == self.after_turn_id.as_ref() => Ok(()),
            Some(m) => not(format!("the context's last turn is {}, the recording's {id}", m.turn)),
            None => not("the context holds no turn of its own".into()),
        }
    }

    /// Every call and result in `messages` is one the recording shows.
    fn check_calls<'m>(&self, messages: impl IntoIterator<Item = &'m Message>) -> Result<(), RecoveryError> {
        let known = |id: &str| self.results.contains_key(id) || self.round.calls().iter().any(|r| r.id == id);
        for m in messages {
            for c in m.tool_calls.iter().flatten() {
                if !known(&c.id) {
                    return Err(RecoveryError::NotThisContext(format!(
                        "the context holds a call {} the recording does not show",
                        c.id
                    )));
                }
            }
            if let Some(id) = m.tool_call_id.as_deref().filter(|_| m.role == Role::Tool) {
                if !known(id) {
                    return Err(RecoveryError::NotThisContext(format!(
                        "the context holds a result for {id} the recording does not show"
                    )));
                }
            }
        }
        Ok(())
    }

    /// The check of a recording or a context without turn ids: the turn's user message is the
    /// context's last, and every call of the turn the context holds is one the recording shows.
    fn check_by_text(&self, history: &[Message]) -> Result<(), RecoveryError> {
        let user = self.user_input.message();
        let Some(at) = history.iter().rposition(|m| m.role == Role::User && m.tool_call_id.is_none()) else {
            return if self.step == 0 {
                Ok(())
            } else {
                Err(RecoveryError::NotThisContext("the context has no user message".into()))
            };
        };
        if history[at].content != user.content {
            // Before the first step the turn may have died before its user message was written.
            if self.step == 0 {
                return Ok(());
            }
            return Err(RecoveryError::NotThisContext(
                "the context's last user message is not the one the recorded turn began with".into(),
            ));
        }
        self.check_calls(&history[at + 1..])
    }

    /// Whether the context's user message of this turn is written (the turn died after it).
    pub fn user_message_written(&self, context: &Context) -> bool {
        if let (Some(id), Some(m)) = (&self.turn_id, context.turn_mark()) {
            return m.turn == *id
                && (m.step > 0 || context.since_last_checkpoint().iter().any(|m| m.role == Role::User));
        }
        let history = context.history();
        let user = self.user_input.message();
        history
            .iter()
            .rposition(|m| m.role == Role::User && m.tool_call_id.is_none())
            .is_some_and(|i| history[i].content == user.content)
    }

    /// Whether the context holds the turn's checkpoint of the recorded step (false: the step
    /// began on the wire only, and its checkpoint is still to write).
    pub fn step_checkpointed(&self, context: &Context) -> bool {
        match (&self.turn_id, context.turn_mark()) {
            (Some(id), Some(m)) if m.turn == *id => m.step >= self.step,
            _ => true,
        }
    }
}
