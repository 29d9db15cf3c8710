//! A model made of models, tried in order: the rule of `FallbackProvider`.
//!
//! A call starts on the first member. It moves on to the next one when an error outlasts its
//! retries (an error the turn retries — [`is_retryable`] — that is still there when the attempts
//! are spent; `step` and `generate` make no retries, so for them the first such error), or at once
//! when the error is one the caller named (a kind, `"missing_key"`, or a status, `401`). Once moved
//! on, the call stays on that member: the next step of a turn goes to the provider that answered
//! the last one. The request is built by the member that sends it, so each gets the history, the
//! tools and structured output in its own wire format.

use std::cell::Cell;

use futures::future::LocalBoxFuture;

use super::{Model, ModelError};
use crate::engine::error::{ChatProviderError, ERROR_KINDS};
use crate::engine::generate::EventSource;
use crate::engine::providers::Prompt;
use crate::engine::soul::rules::is_retryable;

/// An error that moves a fallback model on at once, without the member's retries.
#[derive(Clone, Debug, PartialEq)]
pub enum Trigger {
    /// An error of this kind (`ChatProviderError::kind`).
    Kind(String),
    /// A status error with this HTTP status.
    Status(u16),
}

impl Trigger {
    /// A trigger as a caller writes it: a kind's name or an HTTP status (100-599).
    pub fn read(v: &serde_json::Value) -> Result<Trigger, String> {
        match v {
            serde_json::Value::String(k) if ERROR_KINDS.contains(&k.as_str()) => Ok(Trigger::Kind(k.clone())),
            serde_json::Value::String(k) => {
                Err(format!("unknown error kind `{k}` (known: {})", ERROR_KINDS.join(", ")))
            }
            v => v
                .as_u64()
                .and_then(|s| u16::try_from(s).ok())
                .filter(|s| (100..=599).contains(s))
                .map(Trigger::Status)
                .ok_or_else(|| format!("{v} is neither an error kind nor an HTTP status")),
        }
    }

    fn matches(&self, e: &ChatProviderError) -> bool {
        match (self, e) {
            (Trigger::Kind(k), e) => e.kind() == k,
            (Trigger::Status(s), ChatProviderError::Status { status, .. }) => status == s,
            (Trigger::Status(_), _) => false,
        }
    }
}

/// Which member a fallback model has moved on to, or answered from: its place in the list and
/// its model's name.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Member {
    pub index: usize,
    pub model: String,
}

/// The members, in order, and where the call is.
pub struct Fallback<M> {
    members: Vec<M>,
    at_once: Vec<Trigger>,
    active: Cell<usize>,
}

impl<M: Model> Fallback<M> {
    /// `first`, then `rest` in order; `at_once`: the errors that move on without retries.
    pub fn new(first: M, rest: impl IntoIterator<Item = M>, at_once: Vec<Trigger>) -> Self {
        let members = std::iter::once(first).chain(rest).collect();
        Fallback { members, at_once, active: Cell::new(0) }
    }

    fn current(&self) -> &M {
        &self.members[self.active.get()]
    }

    /// Where the call is now (the member that answered, after a call).
    pub fn active(&self) -> usize {
        self.active.get()
    }
}

impl<M: Model> Model for Fallback<M> {
    type Request = (usize, M::Request);
    type Source = M::Source;

    fn model_name(&self) -> String {
        self.current().model_name()
    }

    fn prepare(&self, prompt: &Prompt<'_>) -> Result<Self::Request, <M::Source as EventSource>::Error> {
        let i = self.active.get();
        Ok((i, self.members[i].prepare(prompt)?))
    }

    fn open(
        &self,
        (i, request): Self::Request,
    ) -> LocalBoxFuture<'_, Result<M::Source, <M::Source as EventSource>::Error>> {
        self.members[i].open(request)
    }

    /// Through the member that answers now (the first, in a new runtime): an answer another
    /// member was writing is asked again.
    fn reopen(&self, answer: &str) -> Option<Result<Self::Request, <M::Source as EventSource>::Error>> {
        let i = self.active.get();
        Some(self.members[i].reopen(answer)?.map(|r| (i, r)))
    }

    fn fall_back(&self, error: &ChatProviderError, spent: bool) -> Option<Member> {
        let next = self.active.get() + 1;
        let to = self.members.get(next)?;
        let moves = self.at_once.iter().any(|t| t.matches(error)) || (spent && is_retryable(error));
        if !moves {
            return None;
        }
        self.active.set(next);
        Some(Member { index: next, model: to.model_name() })
    }

    fn answered_by(&self) -> Option<Member> {
        (self.members.len() > 1).then(|| Member { index: self.active.get(), model: self.model_name() })
    }
}

/// `attempt` on the model, moved on to the next member after each error the rule says to move on
/// from (`step` and `generate`, which make no retries: every retryable error counts as spent).
pub async fn open_with_fallback<M, R, E, F, Fut>(model: &M, mut attempt: F) -> Result<R, E>
where
    M: Model,
    E: ModelError,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<R, E>>,
{
    loop {
        match attempt().await {
            Err(e) if e.provider_error().is_some_and(|pe| model.fall_back(pe, true).is_some()) => {}
            other => return other,
        }
    }
}
