//! Why a turn ended early, and how the runtime words its own errors (one place: the JS classes
//! take these words).

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
    /// A recovered turn was given up (why): its resumes made no progress, or it was already
    /// failing when its runtime stopped.
    NotRecovered(String),
    Cancelled,
    /// The turn ran past its time limit (`turn_timeout_ms`, in milliseconds) and was stopped.
    TimedOut(f64),
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
            TurnError::TimedOut(ms) => (
                "TurnTimeoutError",
                format!(
                    "The turn ran past its time limit of {} ms (turnTimeoutMs) and was stopped.",
                    crate::engine::json::number_text(*ms)
                ),
            ),
            TurnError::NotRecovered(why) => ("TurnNotRecovered", format!("The turn could not go on after its runtime stopped: {why}.")),
            TurnError::Seam(_) | TurnError::ContextStore | TurnError::Cancelled => return None,
        })
    }
}
