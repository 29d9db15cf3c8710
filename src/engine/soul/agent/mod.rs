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
//! The turn is generic over its seams — the model ([`Model`], `engine::model`), the tools
//! ([`ToolDispatch`]), timers and randomness ([`Env`]) — so `cargo test` runs it with fakes.
//!
//! | file | what |
//! |---|---|
//! | `config.rs` | `AgentConfig`, `UserInput`, the status snapshot |
//! | `seams.rs` | `TurnTools`, `Env` (the model's seam is `engine::model`) |
//! | `dispatch.rs` | the toolset as a turn hands it to `step` (duplicates, reminders, replays) |
//! | `error.rs` | `TurnError` and the runtime's wording |
//! | `turn.rs` | `Turn`: the steps, retries, salvage, compaction, cancellation |
//! | `subagent.rs` | a sub-agent call: its wire into the parent's, the summary continuation, kimi-cli's failure words |

mod config;
mod dispatch;
mod error;
mod resume;
mod seams;
mod subagent;
mod turn;

pub use config::{status, AgentConfig, StatusSnapshot, UserInput};
pub use dispatch::{aborted_result, close_interrupted_turn, interrupted_result};
pub use error::TurnError;
pub use seams::{Env, TurnTools};
pub use subagent::{add_usage, not_resumable, run_subagent, Begin, SubagentRun, SUMMARY_MIN_CHARS, SUMMARY_PROMPT};
pub use turn::Turn;
