//! What an agent is told: its configuration, the user's input, and its status snapshot.

use serde::{Deserialize, Serialize};

use crate::engine::message::{ContentPart, Message, Role, TextOrParts};
use crate::engine::output::OutputFormat;
use crate::engine::soul::context::SharedContext;
use crate::engine::soul::rules::Backoff;
use crate::engine::soul::wire::Status;

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
    /// Every step asks for this structured output; the turn's is its final answer's.
    pub output: Option<OutputFormat>,
    /// How long a tool call may run (a tool's own limit comes first).
    pub tool_timeouts: crate::engine::toolset::ToolTimeouts,
    /// How long a whole turn may run, in milliseconds: past it, the turn is stopped as a cancel
    /// stops it (what is open is closed) and fails with [`super::TurnError::TimedOut`].
    pub turn_timeout_ms: Option<f64>,
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
            output: None,
            tool_timeouts: Default::default(),
            turn_timeout_ms: None,
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
    pub fn message(&self) -> Message {
        let content = match self {
            UserInput::Text(t) => vec![ContentPart::text(t.clone())],
            UserInput::Parts(p) => p.clone(),
        };
        Message::new(Role::User, content)
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
