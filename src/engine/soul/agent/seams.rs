//! The turn's seams besides the model (`engine::model`): the tools as a turn sees them, and the
//! environment (timers, randomness, tasks). `cargo test` fills them with fakes; the glue with
//! the JS toolset and `setTimeout`, `Math.random`, the microtask queue.

use futures::future::LocalBoxFuture;

use crate::engine::providers::ToolDefinition;
use crate::engine::step::ToolDispatch;

/// The tools as a turn sees them: kosong's toolset plus the definitions sent to the model
/// (read again at every step, so a toolset may change between steps).
pub trait TurnTools: ToolDispatch {
    fn definitions(&self) -> Vec<ToolDefinition>;
}

/// Time, randomness, tasks, and the caller's check of a structured answer.
pub trait Env {
    /// Resolves after `ms` milliseconds (dropping it cancels the timer).
    fn sleep(&self, ms: f64) -> LocalBoxFuture<'static, ()>;
    /// Uniform in [0, 1): the backoff's jitter.
    fn random(&self) -> f64;
    /// Runs a task beside the turn (a tool's driver).
    fn spawn(&self, task: LocalBoxFuture<'static, ()>);
    /// The time, in seconds since the epoch (a notice's `created_at`); 0 where no clock is given.
    fn now_s(&self) -> f64 {
        0.0
    }
    /// The turn's structured output (`json`: the final answer's text, one JSON value) passed the
    /// caller's validator, or what is wrong with it. Without a validator every value passes.
    fn accept_output(&self, _json: &str) -> Result<(), String> {
        Ok(())
    }
    /// What the turn's sub-agents used so far (a `StatusUpdate` shows it); `None` when none ran.
    fn subagent_usage(&self) -> Option<crate::engine::message::TokenUsage> {
        None
    }
    /// The turn ran past its time limit (`ms`): the tools still running are stopped next (the glue
    /// gives their signals a `TimeoutError` as the reason).
    fn turn_timed_out(&self, _ms: f64) {}
}
