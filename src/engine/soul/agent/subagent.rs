//! Sub-agents as kimi-cli 1.52 runs them (`subagents/runner.py`): a tool call that runs a turn of
//! another agent — its own context, system prompt, tools, provider and step limit — whose wire
//! forwards to the parent's as kimi-cli's `SubagentEvent`, whose approvals are asked on the
//! parent's wire (one approval runtime for the run), and whose final answer is the call's result,
//! asked once more when it is under 200 characters. A failure is an error result in kimi-cli's
//! words. What makes the child's turn (its model, tools, context) is the caller's; this is the
//! rule of one sub-agent call over a [`Turn`] the caller built on a wire made the sub-agent's by
//! [`SubagentRun::forward`].

use futures::future::LocalBoxFuture;

use super::config::UserInput;
use super::error::TurnError;
use super::seams::TurnTools;
use super::turn::{ErrOf, Turn};
use crate::engine::error::ChatProviderError;
use crate::engine::message::{Role, TokenUsage};
use crate::engine::model::{Model, ModelError};
use crate::engine::soul::recovery::{RecordedSubagent, RecordedTurn, RecoveryBudget, RecoveryError};
use crate::engine::soul::wire::{Wire, WireMessage};
use crate::engine::toolset::{ToolOutput, ToolReturnValue};

/// An answer shorter than this (in characters) is asked to be fuller, once.
pub const SUMMARY_MIN_CHARS: usize = 200;

/// kimi-cli's `SUMMARY_CONTINUATION_PROMPT`.
pub const SUMMARY_PROMPT: &str =
    "Your previous response was too brief. Please provide a more comprehensive summary that includes:\n\n\
1. Specific technical details and implementations\n\
2. Detailed findings and analysis\n\
3. All important information that the parent agent should know";

/// One sub-agent call: who it is on the parent's wire.
#[derive(Clone, Debug)]
pub struct SubagentRun {
    /// The parent's call that runs it.
    pub parent_tool_call_id: String,
    /// The instance (its context is kept under it; `resume` names it).
    pub agent_id: String,
    /// Its type: the tool's name.
    pub subagent_type: String,
    /// An instance that ran before goes on with its context.
    pub resumed: bool,
}

impl SubagentRun {
    /// `m` as kimi-cli's `SubagentEvent` on the parent's wire.
    pub fn event(&self, m: &WireMessage) -> WireMessage {
        // Written as text and read back: a `Value` serializer would compile every message's
        // writer a second time (the .wasm feels it); the text writer and the `Value` reader are
        // there already.
        let text = |s: &str| serde_json::to_string(s).unwrap_or_default();
        let event = serde_json::to_string(m).unwrap_or_else(|_| "{}".into());
        let payload = format!(
            r#"{{"parent_tool_call_id":{},"agent_id":{},"subagent_type":{},"event":{event}}}"#,
            text(&self.parent_tool_call_id),
            text(&self.agent_id),
            text(&self.subagent_type)
        );
        WireMessage::Other {
            kind: "SubagentEvent".into(),
            payload: serde_json::from_str(&payload).unwrap_or(serde_json::Value::Null),
        }
    }

    /// Makes `wire` the sub-agent's: what it publishes goes on `parent` as `SubagentEvent`s
    /// (stored when the parent's recording is); each step's usage is handed to `used` as it is
    /// published.
    pub fn forward(&self, wire: &Wire, parent: &Wire, used: impl Fn(&TokenUsage) + 'static) {
        let (me, merged) = (self.clone(), self.clone());
        // Counted as each message comes (once: the merged side sees it again).
        let raw = move |m: &WireMessage| {
            if let WireMessage::StatusUpdate(u) = m {
                if let Some(t) = &u.token_usage {
                    used(t);
                }
            }
            me.event(m)
        };
        wire.forward_to(parent, std::rc::Rc::new(raw), move |m| merged.event(m))
    }

    /// kimi-cli's `ToolOk` output for a completed run.
    fn completed(&self, answer: &str) -> ToolReturnValue {
        let text = format!(
            "agent_id: {}\nresumed: {}\nactual_subagent_type: {}\nstatus: completed\n\n[summary]\n{answer}",
            self.agent_id, self.resumed, self.subagent_type
        );
        ToolReturnValue::ok(ToolOutput::Text(text), "", "")
    }
}

/// How a sub-agent call begins: anew, or where a runtime that died left it.
pub enum Begin {
    /// Its first turn, on the call's prompt.
    Run(UserInput),
    /// Goes on with its unfinished turn (`bool`: the turn is the summary's continuation).
    Resume(Box<RecordedTurn>, RecoveryBudget, bool),
    /// Its last turn ended: its answer is in its context (a question of it left open by an
    /// earlier death is closed).
    Ended(bool, Box<RecordedSubagent>),
    /// Its recording cannot be read as a turn: it is closed as interrupted.
    Closed(Box<RecordedSubagent>),
}

impl Begin {
    /// The call `record` was recorded by a runtime that died, and goes on with `budget` (its
    /// caller's); `knows_session_approvals` as its caller's turn (a session's: true). Also gives
    /// what its own unfinished turn recorded of its sub-agents' calls (for its tools' run).
    pub fn from_record(
        record: RecordedSubagent,
        budget: RecoveryBudget,
        knows_session_approvals: bool,
    ) -> (Begin, Vec<RecordedSubagent>) {
        let again = record.messages.iter().filter(|m| m.kind() == "TurnBegin").count() > 1;
        match RecordedTurn::read(&record.messages) {
            Ok(mut r) => {
                r.knows_session_approvals = knows_session_approvals;
                // Its own questions of a step before the last, never answered (their calls were
                // closed when it resumed before): closed refused when it resumes now, with the
                // questions of its sub-agents that do not go on.
                let answered = answered(&record);
                for id in &record.asked {
                    let open = !answered.contains(&id.as_str())
                        && !r.approvals.iter().any(|a| a.request_id == *id)
                        && !r.subagent_asked.iter().any(|(a, _)| a == id);
                    if open {
                        r.subagent_asked.push((id.clone(), String::new()));
                    }
                }
                let nested = std::mem::take(&mut r.subagents);
                (Begin::Resume(Box::new(r), budget, again), nested)
            }
            Err(RecoveryError::Finished) => (Begin::Ended(again, Box::new(record)), Vec::new()),
            Err(_) => (Begin::Closed(Box::new(record)), Vec::new()),
        }
    }
}

/// A sub-agent call recorded by a runtime that died, which cannot go on here (its context was
/// not kept: no session, or a store that lost it): its waiting questions are answered refused on
/// `wire` (the caller's) and the call is interrupted, as any call that may have taken effect.
pub fn not_resumable(record: &RecordedSubagent, wire: &Wire) -> ToolReturnValue {
    close_questions(record, wire);
    super::dispatch::interrupted_result(&record.call_id).return_value
}

/// The requests the record holds an answer to.
fn answered(record: &RecordedSubagent) -> Vec<&str> {
    record
        .messages
        .iter()
        .filter_map(|m| match m {
            // (The record holds the caller's answers as a recording read back does.)
            WireMessage::Other { kind, payload } if kind == "ApprovalResponse" => {
                payload.get("request_id").and_then(serde_json::Value::as_str)
            }
            _ => None,
        })
        .collect()
}

fn close_questions(record: &RecordedSubagent, wire: &Wire) {
    let answered = answered(record);
    for id in record.asked.iter().filter(|id| !answered.contains(&id.as_str())) {
        wire.close_request(id);
    }
}

/// The call's result: `turn` (the child's, on a wire [`SubagentRun::forward`] made its) run on
/// the prompt, then once more on [`SUMMARY_PROMPT`] when its answer is under
/// [`SUMMARY_MIN_CHARS`] (not for structured output: its answer is the value). A call that a dead
/// runtime recorded ([`Begin::from_record`]) goes on where its recording stopped, on the context its
/// turns wrote: a turn it ended is not run again, an unfinished one is resumed by the recovery
/// rules (no tool of it runs twice; a question it asked waits again under its id). `cancel`
/// makes, for each turn, what resolves when the call is given up (the parent's cancel, the tool's
/// time limit). `unexpected` words a seam's error that is not the provider's.
pub async fn run_subagent<'c, M, T>(
    turn: &Turn<'_, M, T>,
    run: &SubagentRun,
    begin: Begin,
    cancel: impl Fn() -> LocalBoxFuture<'c, ()>,
    unexpected: impl Fn(&ErrOf<M>) -> String,
) -> ToolReturnValue
where
    M: Model,
    ErrOf<M>: ModelError,
    T: TurnTools,
{
    let mut asked_again = matches!(begin, Begin::Resume(_, _, true) | Begin::Ended(true, _));
    let mut first = Some(begin);
    let mut phase = if asked_again { "continuing the agent summary" } else { "running agent" };
    loop {
        let ran = match first.take() {
            Some(Begin::Run(input)) => turn.run(input, cancel()).await,
            Some(Begin::Resume(r, budget, _)) => turn.resume(*r, budget, cancel()).await,
            Some(Begin::Closed(record)) => return not_resumable(&record, turn.approvals.wire()),
            Some(Begin::Ended(_, record)) => {
                close_questions(&record, turn.approvals.wire());
                Ok(())
            }
            None => Ok(()),
        };
        if let Err(e) = ran {
            return failure(&e, phase, &unexpected);
        }
        let last = turn.context.read(|c| c.history().last().filter(|m| m.role == Role::Assistant).cloned());
        let Some(last) = last else {
            return ToolReturnValue::error(
                "The agent did not produce a valid assistant response.",
                "Invalid agent result",
                ToolOutput::Text(String::new()),
            );
        };
        let answer = last.extract_text("\n");
        if asked_again || turn.config.output.is_some() || answer.chars().count() >= SUMMARY_MIN_CHARS {
            if answer.is_empty() {
                return ToolReturnValue::error(
                    "Agent completed but produced no output.",
                    "Empty agent output",
                    ToolOutput::Text(String::new()),
                );
            }
            return run.completed(&answer);
        }
        asked_again = true;
        phase = "continuing the agent summary";
        first = Some(Begin::Run(UserInput::Text(SUMMARY_PROMPT.into())));
    }
}

/// A failed run as kimi-cli's `ToolError`: max steps, an API error with its status, a provider
/// error, anything else unexpected.
fn failure<E: ModelError>(e: &TurnError<E>, phase: &str, unexpected: &dyn Fn(&E) -> String) -> ToolReturnValue {
    let (message, brief) = match e {
        TurnError::MaxStepsReached(n) => (
            format!("Max steps {n} reached when {phase}. Please try splitting the task into smaller subtasks."),
            "Max steps reached".to_owned(),
        ),
        TurnError::Seam(e) => match e.provider_error() {
            Some(ChatProviderError::Status { status, message, .. }) => {
                (format!("LLM API error (HTTP {status}) when {phase}: {message}"), format!("API error ({status})"))
            }
            Some(p) => (format!("LLM provider error when {phase}: {}", p.message()), "LLM provider error".to_owned()),
            None => (format!("Unexpected error when {phase}: {}", unexpected(e)), "Agent run error".to_owned()),
        },
        TurnError::Cancelled => ("Subagent run was cancelled.".to_owned(), "Cancelled".to_owned()),
        other => {
            let why = other.runtime_error().map_or_else(|| "its context could not be stored".to_owned(), |(_, m)| m);
            (format!("Unexpected error when {phase}: {why}"), "Agent run error".to_owned())
        }
    };
    ToolReturnValue::error(&message, &brief, ToolOutput::Text(String::new()))
}

/// The usage a sub-agent's step adds, for a `StatusUpdate`'s total (`None` until one ran).
pub fn add_usage(total: &mut Option<TokenUsage>, step: &TokenUsage) {
    total.get_or_insert_with(TokenUsage::default).add(step);
}
