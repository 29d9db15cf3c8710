//! Bugs planted on purpose (the `planted-bugs` feature, never in a shipped build), so the
//! deterministic simulation (`tests/session_sim.rs`) shows it catches each kind of mistake.

use super::{EventKind, State};
use crate::engine::message::StreamedMessagePart;
use crate::engine::soul::agent::interrupted_result;
use crate::engine::soul::wire::{record_line, WireMessage};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bug {
    /// The gate opens at once: a tool starts before its call is stored.
    ToolBeforeStored,
    /// A cancel is acknowledged when asked, before it is stored.
    CancelAckedBeforeStored,
    /// The next event id is taken from the number of stored events (older turns were trimmed).
    IdFromEventCount,
    /// A turn that ended without its end stored gets an interrupted result for every call of
    /// its last step, answered or not.
    ResultTwiceAfterEnd,
    /// A tool that waits for the stream's end (`eager: false`) starts without waiting for that
    /// end to be stored (the turn's `TurnDispatch::stream_end` hold skipped).
    NonEagerBeforeStreamEnd,
    /// A recovered turn is not told that the session knows its approvals for the session, so a
    /// `needsApproval` call never asked is judged "interrupted" though it cannot have started.
    AskFirstForgotten,
    /// A recovered turn asks the model again instead of reading again the answer its server kept.
    KeptAnswerAskedAgain,
    /// An answer read again is told and assembled whole: what the recording held comes twice.
    ReplayNotDropped,
    /// A recovered turn takes a dead sub-agent's question for its own: it waits on it again
    /// (anyone may still approve it) instead of closing it refused.
    SubagentQuestionWaited,
    /// A recovered turn does not read what it recorded of its sub-agent calls: a call run again
    /// begins its sub-agent anew instead of going on with it.
    SubagentBegunAgain,
}

pub const ALL: [Bug; 10] = [
    Bug::ToolBeforeStored,
    Bug::CancelAckedBeforeStored,
    Bug::IdFromEventCount,
    Bug::ResultTwiceAfterEnd,
    Bug::NonEagerBeforeStreamEnd,
    Bug::AskFirstForgotten,
    Bug::KeptAnswerAskedAgain,
    Bug::ReplayNotDropped,
    Bug::SubagentQuestionWaited,
    Bug::SubagentBegunAgain,
];

thread_local! {
    /// Set by the session opened last on this thread: the bug the turn's own code plays.
    static IN_TURN: std::cell::Cell<Option<Bug>> = const { std::cell::Cell::new(None) };
}

pub(super) fn plant(bug: Option<Bug>) {
    IN_TURN.with(|c| c.set(bug));
}

fn planted(bug: Bug) -> bool {
    IN_TURN.with(std::cell::Cell::get) == Some(bug)
}

/// Whether the turn skips its stream-end hold (the planted [`Bug::NonEagerBeforeStreamEnd`]).
pub fn skip_stream_end() -> bool {
    planted(Bug::NonEagerBeforeStreamEnd)
}

/// [`Bug::KeptAnswerAskedAgain`].
pub fn ask_kept_again() -> bool {
    planted(Bug::KeptAnswerAskedAgain)
}

/// [`Bug::ReplayNotDropped`].
pub fn replay_not_dropped() -> bool {
    planted(Bug::ReplayNotDropped)
}

/// [`Bug::SubagentQuestionWaited`].
pub fn subagent_question_waited() -> bool {
    planted(Bug::SubagentQuestionWaited)
}

/// [`Bug::SubagentBegunAgain`].
pub fn subagent_begun_again() -> bool {
    planted(Bug::SubagentBegunAgain)
}

pub(super) fn close_again(st: &mut State, messages: &[WireMessage]) {
    let last_step = messages.iter().rposition(|m| m.kind() == "StepBegin").unwrap_or(0);
    for m in &messages[last_step..] {
        if let WireMessage::Part(StreamedMessagePart::ToolCall(c)) = m {
            let r = WireMessage::ToolResult(interrupted_result(&c.id));
            st.event(EventKind::Wire, record_line(st.now_ms / 1000.0, &r));
        }
    }
}
