//! The messages of the wire, one variant per kimi-cli message type this runtime publishes, and
//! one writer for all of them (`{"type": …, "payload": …}`, kimi-cli's envelope).
//!
//! A message that comes from outside — a `wire.jsonl` line, or one a tool or a soul of the
//! caller's sends — is read back as a part when its payload has a part's shape (so a merged side
//! joins it), and otherwise kept exactly as it came ([`WireMessage::Other`]): nothing the core
//! does not write itself is reshaped.

use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

use crate::engine::message::{StreamedMessagePart, TokenUsage};
use crate::engine::model::Member;
use crate::engine::partial_json::Edit;
use crate::engine::soul::agent::UserInput;
use crate::engine::toolset::ToolResult;

use super::ApprovalResponse;

#[derive(Clone, Debug, PartialEq)]
pub enum WireMessage {
    TurnBegin {
        user_input: UserInput,
        /// The turn's id, which the context's checkpoints of the turn carry too (this runtime's;
        /// kimi-cli reads past it): a recording and a context belong together by it.
        turn_id: Option<String>,
        /// The id of the turn the context was last in when this one began (none: a context no
        /// turn had marked yet).
        after_turn_id: Option<String>,
    },
    TurnEnd,
    StepBegin {
        n: u32,
    },
    StepInterrupted,
    StepRetry(StepRetry),
    CompactionBegin,
    CompactionEnd,
    StatusUpdate(StatusUpdate),
    /// `ContentPart`, `ToolCall` or `ToolCallPart`: what a merged side joins.
    Part(StreamedMessagePart),
    ToolResult(ToolResult),
    ApprovalRequest(ApprovalRequest),
    ApprovalResponse {
        request_id: String,
        response: ApprovalResponse,
        feedback: String,
    },
    /// This runtime's own (not kimi-cli's): the edits the step's text made to the structured
    /// output's preview (`{edits}`, [`crate::engine::partial_json`]'s edits), sent after the parts
    /// that made them when the agent asks for structured output. Derived from the parts, so a
    /// recording leaves it out; a merged side joins consecutive ones.
    PartialOutput(Vec<Edit>),
    /// Any other message, or one read from outside that is not a part: type and payload as
    /// they came.
    Other {
        kind: String,
        payload: Value,
    },
}

/// A step's failed attempt, and the wait before the next one.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StepRetry {
    pub n: u32,
    pub next_attempt: u32,
    pub max_attempts: u32,
    pub wait_s: f64,
    /// The error's class (`APIStatusError`, …).
    pub error_type: String,
    pub status_code: Option<u16>,
    /// A `FallbackProvider` moved on: the member the next attempt goes to (attempts count from 1
    /// again, with no wait). kimi-cli's `StepRetry` ignores the field.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<Member>,
}

/// The context's state: kimi-cli's status snapshot (`Agent.status`) and, with the step's usage
/// and message id, its `StatusUpdate`. One shape for both: `context_usage` and
/// `max_context_tokens` are 0 when the model's window is not known.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Status {
    pub context_usage: f64,
    pub context_tokens: u64,
    pub max_context_tokens: u64,
}

impl Status {
    pub fn of(context_tokens: u64, max_context_tokens: u64) -> Status {
        let context_usage =
            if max_context_tokens > 0 { context_tokens as f64 / max_context_tokens as f64 } else { 0.0 };
        Status { context_usage, context_tokens, max_context_tokens }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StatusUpdate {
    #[serde(flatten)]
    pub status: Status,
    pub token_usage: Option<TokenUsage>,
    pub message_id: Option<String>,
    /// The member of a `FallbackProvider` that answered the step (absent for one provider).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<Member>,
    /// What the turn's sub-agents used so far, all of them, nested ones too (absent when none
    /// ran). kimi-cli reads past the field.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subagent_token_usage: Option<TokenUsage>,
}

/// A tool asks the user (`id` names the request; the answer is an `ApprovalResponse`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ApprovalRequest {
    pub id: String,
    pub tool_call_id: String,
    pub sender: String,
    pub action: String,
    pub description: String,
    pub display: Vec<Value>,
    /// Asked before the tool's handler started (`needsApproval`): after a death, nothing of the
    /// tool has run, so its call waits again. kimi-cli reads past the field.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub before_start: bool,
    /// A sub-agent's request (kimi-cli's `agent_id`): its turn is not the wire's own, so a
    /// recovery of the wire's turn does not wait on it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// A sub-agent's request: its type (kimi-cli's `subagent_type`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subagent_type: Option<String>,
}

/// Which sub-agent asks (kimi-cli's `ApprovalRequest.agent_id` and `subagent_type`).
#[derive(Clone, Debug, PartialEq)]
pub struct SubagentOf {
    pub agent_id: String,
    pub subagent_type: String,
}

impl WireMessage {
    /// kimi-cli's name of the message's type.
    pub fn kind(&self) -> &str {
        match self {
            WireMessage::TurnBegin { .. } => "TurnBegin",
            WireMessage::TurnEnd => "TurnEnd",
            WireMessage::StepBegin { .. } => "StepBegin",
            WireMessage::StepInterrupted => "StepInterrupted",
            WireMessage::StepRetry(_) => "StepRetry",
            WireMessage::CompactionBegin => "CompactionBegin",
            WireMessage::CompactionEnd => "CompactionEnd",
            WireMessage::StatusUpdate(_) => "StatusUpdate",
            WireMessage::Part(StreamedMessagePart::Content(_)) => "ContentPart",
            WireMessage::Part(StreamedMessagePart::ToolCall(_)) => "ToolCall",
            WireMessage::Part(StreamedMessagePart::ToolCallPart(_)) => "ToolCallPart",
            WireMessage::ToolResult(_) => "ToolResult",
            WireMessage::ApprovalRequest(_) => "ApprovalRequest",
            WireMessage::ApprovalResponse { .. } => "ApprovalResponse",
            WireMessage::PartialOutput(_) => "PartialOutput",
            WireMessage::Other { kind, .. } => kind,
        }
    }

    /// A message from outside (`{type, payload}`): a part when its payload has that part's
    /// shape, otherwise kept as it came.
    pub fn from_parts(kind: String, payload: Value) -> WireMessage {
        // Read from the payload's text: the message model's readers are then compiled for
        // one deserializer (text) instead of two (text and `Value`), which the .wasm feels.
        fn typed<T: serde::de::DeserializeOwned>(payload: &Value) -> Option<T> {
            serde_json::from_str(&payload.to_string()).ok()
        }
        let typed = match kind.as_str() {
            "ContentPart" => typed(&payload).map(StreamedMessagePart::Content),
            "ToolCall" => typed(&payload).map(StreamedMessagePart::ToolCall),
            "ToolCallPart" => typed(&payload).map(StreamedMessagePart::ToolCallPart),
            _ => None,
        };
        match typed {
            Some(p) => WireMessage::Part(p),
            None => WireMessage::Other { kind, payload },
        }
    }

    /// Absorbs `next` when the merge rules join them.
    pub(super) fn merge(&mut self, next: &WireMessage) -> bool {
        match (self, next) {
            (WireMessage::Part(a), WireMessage::Part(b)) => a.merge_in_place(b),
            (WireMessage::PartialOutput(a), WireMessage::PartialOutput(b)) => {
                crate::engine::partial_json::join_edits(a, b);
                true
            }
            _ => false,
        }
    }
}

/// `{}`: the payload of a message that carries nothing.
struct Empty;

impl Serialize for Empty {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_map(Some(0))?.end()
    }
}

/// The one writer: kimi-cli's envelope for every message.
impl Serialize for WireMessage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct TurnBegin<'a> {
            user_input: &'a UserInput,
            #[serde(skip_serializing_if = "Option::is_none")]
            turn_id: &'a Option<String>,
            #[serde(skip_serializing_if = "Option::is_none")]
            after_turn_id: &'a Option<String>,
        }
        #[derive(Serialize)]
        struct StepBegin {
            n: u32,
        }
        #[derive(Serialize)]
        struct PartialOutput<'a> {
            edits: &'a [Edit],
        }
        #[derive(Serialize)]
        struct ApprovalResponse<'a> {
            request_id: &'a str,
            response: &'a str,
            feedback: &'a str,
        }
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("type", self.kind())?;
        match self {
            WireMessage::TurnBegin { user_input, turn_id, after_turn_id } => {
                m.serialize_entry("payload", &TurnBegin { user_input, turn_id, after_turn_id })?
            }
            WireMessage::StepBegin { n } => m.serialize_entry("payload", &StepBegin { n: *n })?,
            WireMessage::TurnEnd
            | WireMessage::StepInterrupted
            | WireMessage::CompactionBegin
            | WireMessage::CompactionEnd => m.serialize_entry("payload", &Empty)?,
            WireMessage::StepRetry(r) => m.serialize_entry("payload", r)?,
            WireMessage::StatusUpdate(u) => m.serialize_entry("payload", u)?,
            WireMessage::Part(p) => m.serialize_entry("payload", p)?,
            WireMessage::ToolResult(r) => m.serialize_entry("payload", r)?,
            WireMessage::ApprovalRequest(r) => m.serialize_entry("payload", r)?,
            WireMessage::ApprovalResponse { request_id, response, feedback } => {
                m.serialize_entry("payload", &ApprovalResponse { request_id, response: response.as_str(), feedback })?
            }
            WireMessage::PartialOutput(edits) => m.serialize_entry("payload", &PartialOutput { edits })?,
            WireMessage::Other { payload, .. } => m.serialize_entry("payload", payload)?,
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for WireMessage {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let bad = || serde::de::Error::custom("a wire message is {type: string, payload: object}");
        let Value::Object(mut m) = Value::deserialize(d)? else { return Err(bad()) };
        let (Some(Value::String(kind)), Some(payload @ Value::Object(_))) = (m.remove("type"), m.remove("payload"))
        else {
            return Err(bad());
        };
        Ok(WireMessage::from_parts(kind, payload))
    }
}
