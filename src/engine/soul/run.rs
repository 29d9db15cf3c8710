//! `run_soul`, as kimi-cli runs a soul for a UI: the soul and the UI loop run beside each other
//! over one wire; when the run is cancelled, waiting approvals are refused and the soul gets a
//! moment to finish its cleanup (it publishes `TurnEnd`); then, always, the wire shuts down
//! (its merge buffer flushed), the recording is written, and the UI loop gets a moment to read
//! what is left.

use std::future::Future;

use futures::future::{select, Either};

use crate::engine::soul::agent::Env;
use crate::engine::soul::wire::Wire;

/// How long a cancelled soul may take to finish its cleanup.
pub const SOUL_CANCEL_GRACE_MS: f64 = 1000.0;
/// How long the UI loop may take to finish after the wire shut down.
pub const UI_LOOP_GRACE_MS: f64 = 500.0;

#[derive(Debug, PartialEq, Eq)]
pub enum RunOutcome<E> {
    Done,
    /// The soul failed: its own error.
    Failed(E),
    /// `cancel` resolved first.
    Cancelled,
}

/// How long a cancelled run waits for the recording to be written.
pub const RECORDER_CANCEL_GRACE_MS: f64 = 1000.0;

/// Runs the soul's turn (`soul`) beside the UI loop (`ui`) over `wire`. `recorded` is asked,
/// after the shutdown, for a future that resolves when every line is written. A recording that
/// never finishes (a sink that hangs) cannot keep the run alive past `cancel`: once cancelled,
/// the run waits [`RECORDER_CANCEL_GRACE_MS`] for it at most, and a cancel while waiting for it
/// ends the wait (the run then counts as cancelled).
pub async fn run_soul<E, R: Future<Output = ()>>(
    wire: &Wire,
    soul: impl Future<Output = Result<(), E>>,
    ui: impl Future<Output = ()>,
    cancel: impl Future<Output = ()>,
    recorded: impl FnOnce() -> R,
    env: &dyn Env,
) -> RunOutcome<E> {
    let mut soul = Box::pin(soul);
    let mut cancel = Box::pin(cancel);
    let mut outcome = match select(soul.as_mut(), cancel.as_mut()).await {
        Either::Left((Ok(()), _)) => RunOutcome::Done,
        Either::Left((Err(e), _)) => RunOutcome::Failed(e),
        Either::Right(((), _)) => {
            wire.reject_pending();
            let _ = select(soul, env.sleep(SOUL_CANCEL_GRACE_MS)).await;
            RunOutcome::Cancelled
        }
    };
    wire.shutdown();
    let written = Box::pin(recorded());
    if matches!(outcome, RunOutcome::Cancelled) {
        let _ = select(written, env.sleep(RECORDER_CANCEL_GRACE_MS)).await;
    } else if let Either::Right(_) = select(written, cancel).await {
        if let RunOutcome::Done = outcome {
            outcome = RunOutcome::Cancelled;
        }
    }
    let _ = select(Box::pin(ui), env.sleep(UI_LOOP_GRACE_MS)).await;
    outcome
}
