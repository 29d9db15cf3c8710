//! The model: a provider read once into a core value ([`Provider`]), and what one request does
//! with it — the body built from the context, sent through a [`Transport`] (redirects, error
//! statuses and `Retry-After` read here), the response's bytes decoded into stream events by the
//! provider's decoder ([`ModelSource`]). `generate`, `step` and the agent turn run over a
//! [`Model`]; the glue only implements the transport (over the caller's `fetch`).
//!
//! Contract of the seam: a request is prepared synchronously (the context is only borrowed for
//! that), then opened; dropping the opening future or the source closes the connection (the
//! transport's response and body do that when dropped). Every error that leaves a model is cleaned
//! of the API key it used ([`ModelError::redact`]).

pub mod fallback;
pub mod provider;
pub mod source;
pub mod transport;

use futures::future::LocalBoxFuture;

use crate::engine::error::ChatProviderError;
use crate::engine::generate::EventSource;
use crate::engine::providers::Prompt;

pub use fallback::{Fallback, Member, Trigger};
pub use provider::{Prepared, Provider, ProviderModel};
pub use source::ModelSource;
pub use transport::{Deadline, Deadlines, HttpResponse, Offline, Transport};

/// An error a model (and the seams beside it) reports: a provider error, or the environment's
/// own (a JS value, in the glue). The turn asks it whether it is a provider error, to retry it.
pub trait ModelError: From<ChatProviderError> {
    fn provider_error(&self) -> Option<&ChatProviderError>;
    /// The same error, with the request's secrets cleaned out of every text it carries.
    fn redact(self, secrets: &crate::engine::secrets::Secrets) -> Self;
}

impl ModelError for ChatProviderError {
    fn provider_error(&self) -> Option<&ChatProviderError> {
        Some(self)
    }
    fn redact(self, secrets: &crate::engine::secrets::Secrets) -> Self {
        ChatProviderError::redact(self, secrets)
    }
}

/// What a turn (or `generate`/`step`) calls a model through.
pub trait Model {
    type Request;
    type Source: EventSource;
    fn model_name(&self) -> String;
    fn prepare(&self, prompt: &Prompt<'_>) -> Result<Self::Request, <Self::Source as EventSource>::Error>;
    fn open(
        &self,
        request: Self::Request,
    ) -> LocalBoxFuture<'_, Result<Self::Source, <Self::Source as EventSource>::Error>>;
    /// The request that reads answer `answer` again from its start (a turn recovered after its
    /// runtime died goes on with the answer it was reading: [`EventSource::resumable`]); `None`
    /// when this model's answers cannot be read again.
    fn reopen(&self, _answer: &str) -> Option<Result<Self::Request, <Self::Source as EventSource>::Error>> {
        None
    }
    /// A model made of models ([`Fallback`]): moves on to its next member when `error` calls for
    /// it — `spent`: the error outlasted its retries — and says which; a single model never does.
    fn fall_back(&self, _error: &ChatProviderError, _spent: bool) -> Option<Member> {
        None
    }
    /// The member that answers now, for a model made of several (`None` otherwise).
    fn answered_by(&self) -> Option<Member> {
        None
    }
}
