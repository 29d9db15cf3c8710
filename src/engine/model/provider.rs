//! A provider read once into a core value, and the model one call runs over it.
//!
//! [`Provider`] is what the JS provider object becomes when it is first used: an HTTP provider's
//! options parsed (request builder and decoder chosen by its wire format), or a scripted
//! provider's queue of echo scripts. [`ProviderModel`] is that provider for one `generate`, `step`
//! or turn: with the transport it sends through and the limits the call set.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;

use futures::future::LocalBoxFuture;
use futures::FutureExt;

use super::source::ModelSource;
use super::transport::{self, Transport};
use super::{Model, ModelError};
use crate::engine::error::{ChatProviderError, FailureKind};
use crate::engine::generate::{Cancel, Limits, Reconnect, Reopened, SseEventSource, VecEventSource};
use crate::engine::providers::echo::{script_for_stream, EchoScript};
use crate::engine::providers::{HttpProvider, HttpRequest, Method, Prompt, Spec, StreamDecoder};
use crate::engine::secrets::Secrets;

/// A provider, read once.
pub enum Provider {
    Http(Box<HttpProvider>),
    /// kosong's `ScriptedEchoChatProvider`: each request streams the next script.
    Scripted(Scripts),
}

/// Where a scripted provider's scripts come from (the caller keeps them: a JS provider's stay in
/// JavaScript, not in the instance's memory), and how many requests it served.
pub struct Scripts {
    next: Box<dyn Fn() -> Option<String>>,
    calls: Cell<usize>,
}

impl Provider {
    /// Reads an HTTP provider's spec (see [`HttpProvider::from_json`]).
    pub fn from_json(text: &str) -> Result<Provider, serde_json::Error> {
        Ok(Provider::Http(Box::new(HttpProvider::from_spec(&Spec::parse(text)?)?)))
    }

    /// A scripted provider whose next script `next` gives (`None`: there is none left).
    pub fn scripted_from(next: impl Fn() -> Option<String> + 'static) -> Provider {
        Provider::Scripted(Scripts { next: Box::new(next), calls: Cell::new(0) })
    }

    /// A scripted provider over these scripts.
    pub fn scripted<S: Into<String>>(scripts: impl IntoIterator<Item = S>) -> Provider {
        let queue: RefCell<VecDeque<String>> = RefCell::new(scripts.into_iter().map(Into::into).collect());
        Provider::scripted_from(move || queue.borrow_mut().pop_front())
    }

    pub fn model_name(&self) -> String {
        match self {
            Provider::Http(p) => p.http().model.clone(),
            Provider::Scripted(_) => "scripted_echo".into(),
        }
    }

    /// The next script of a scripted provider (it is used up), or the error kosong raises when
    /// none is left.
    pub fn take_script(&self) -> Result<String, ChatProviderError> {
        let Provider::Scripted(s) = self else {
            return Err(ChatProviderError::Other("only a scripted provider has scripts".into()));
        };
        let n = s.calls.get() + 1;
        s.calls.set(n);
        (s.next)().ok_or_else(|| ChatProviderError::Other(format!("ScriptedProvider exhausted at call {n}.")))
    }

    /// The request for this context: its body built (nothing is sent yet). `env` reads an
    /// environment variable (an API key may come from one); `output` asks for structured output
    /// (a scripted provider's script is its answer, whatever was asked).
    pub fn prepare<E: ModelError>(
        &self,
        env: impl Fn(&str) -> Option<String>,
        prompt: &Prompt<'_>,
    ) -> Result<Prepared, E> {
        match self {
            Provider::Scripted(_) => Ok(Prepared::Scripted(script_for_stream(&self.take_script()?)?)),
            Provider::Http(p) => {
                let keyed = p
                    .key_for_request(env)
                    .map_err(|m| E::from(ChatProviderError::failed(FailureKind::MissingKey, m)))?;
                let p = keyed.as_ref().unwrap_or(p);
                let key = p.http().api_key.as_deref();
                let request =
                    p.build(prompt).map_err(|e| E::from(e).redact(&key.map(Secrets::of_key).unwrap_or_default()))?;
                let mut secrets = Secrets::of_request(key, &request);
                if let Some(base) = &p.http().base_url {
                    secrets.add_url_params(base);
                }
                Ok(Prepared::Http { request, decoder: p.decoder(), secrets, answer: None })
            }
        }
    }

    /// The request that reads answer `id` again from its start, when this provider's answers are
    /// kept by the server (a Responses provider in the background).
    pub fn reopen<E: ModelError>(&self, env: impl Fn(&str) -> Option<String>, id: &str) -> Option<Result<Prepared, E>> {
        match self {
            Provider::Http(p) if p.keeps_answers() => {
                Some(self.prepare(env, &Prompt::new("", &[], &[])).map(|mut r| {
                    if let Prepared::Http { answer, decoder, .. } = &mut r {
                        *answer = Some(id.to_owned());
                        decoder.read_again(id);
                    }
                    r
                }))
            }
            _ => None,
        }
    }
}

/// One request, prepared from the context.
pub enum Prepared {
    Http {
        request: HttpRequest,
        decoder: Box<dyn StreamDecoder>,
        /// The API key and credentials the request carries, cleaned out of every error.
        secrets: Secrets,
        /// The answer this request reads again from its start instead (`GET {url}/{id}?stream=
        /// true&starting_after=0`), where `request` says where answers are and how to ask.
        answer: Option<String>,
    },
    Scripted(EchoScript),
}

/// How an answer is read again after its stream broke: `GET {the request's URL}/{id}?stream=true&
/// starting_after={n}` with the request's headers (OpenAI's Responses API for an answer made in
/// the background). The first try goes at once (the connection just broke); one after a failed
/// try waits [`RECONNECT_WAIT_MS`] doubling, or the server's `Retry-After` when it said one (at
/// most [`RECONNECT_WAIT_MAX_MS`]). A status of 4xx but 408 and 429 says it cannot be read again
/// (the answer expired, the server keeps no answers); anything else is worth another try.
fn reconnect<B: 'static, E: ModelError + 'static>(
    send: super::transport::Detached<B, E>,
    sleep: Box<dyn Fn(u64) -> LocalBoxFuture<'static, ()>>,
    request: &HttpRequest,
    secrets: &Secrets,
) -> Reconnect<B> {
    let (url, headers, secrets) = (request.url.clone(), request.headers.clone(), secrets.clone());
    let wait = std::rc::Rc::new(Cell::new(0u64));
    Box::new(move |id, after, attempt| {
        let to = answer_url(&url, id, "", &format!("stream=true&starting_after={after}"));
        let req = HttpRequest { method: Method::Get, url: to, headers: headers.clone(), body: String::new() };
        let (send, secrets, wait) = (send.clone(), secrets.clone(), wait.clone());
        let pause = (wait.get() > 0).then(|| sleep(wait.get()));
        async move {
            if let Some(pause) = pause {
                pause.await;
            }
            let (status, retry_after) = match send(req, secrets).await {
                Ok(body) => return Reopened::Body(body),
                Err(e) => match e.provider_error() {
                    Some(ChatProviderError::Status { status, retry_after_ms, .. }) => (Some(*status), *retry_after_ms),
                    _ => (None, None),
                },
            };
            if status.is_some_and(answer_gone) {
                return Reopened::Not;
            }
            let doubled = RECONNECT_WAIT_MS.saturating_mul(1 << attempt.saturating_sub(1).min(8));
            wait.set(retry_after.unwrap_or(doubled).min(RECONNECT_WAIT_MAX_MS));
            Reopened::Again
        }
        .boxed_local()
    })
}

/// A status that says an answer cannot be read again: a 4xx but 408 and 429 (it expired, or the
/// server keeps no answers); anything else is worth another try. The one rule for both the
/// reconnect and the glue's logger line.
pub fn answer_gone(status: u16) -> bool {
    (400..500).contains(&status) && !matches!(status, 408 | 429)
}

/// The wait before a reconnect after a failed one, doubling with each; and the longest (a
/// server's `Retry-After` included).
const RECONNECT_WAIT_MS: u64 = 250;
const RECONNECT_WAIT_MAX_MS: u64 = 30_000;

/// `{the request's path}/{id}{tail}`, with `query` and then the request's own query (an API
/// version a base URL carries).
fn answer_url(url: &str, id: &str, tail: &str, query: &str) -> String {
    let (path, own) = url.split_once('?').unwrap_or((url, ""));
    let mut to = format!("{path}/{}{tail}", crate::engine::providers::percent_encode(id));
    for q in [query, own].into_iter().filter(|q| !q.is_empty()) {
        to.push(if to.contains('?') { '&' } else { '?' });
        to.push_str(q);
    }
    to
}

/// How an answer is stopped server-side once nobody reads it: `POST {the request's URL}/{id}/cancel`
/// with the request's headers, sent on its own (see [`Transport::spawner`]).
fn cancel<B: 'static, E: ModelError + 'static>(
    send: super::transport::Detached<B, E>,
    request: &HttpRequest,
    secrets: &Secrets,
    spawn: Box<dyn Fn(LocalBoxFuture<'static, ()>)>,
) -> Cancel {
    let (url, headers, secrets) = (request.url.clone(), request.headers.clone(), secrets.clone());
    Box::new(move |id| {
        let req = HttpRequest {
            method: Method::Post,
            url: answer_url(&url, id, "/cancel", ""),
            headers,
            body: String::new(),
        };
        let sent = send(req, secrets);
        spawn(async move { drop(sent.await) }.boxed_local());
    })
}

/// A provider as one call uses it: with a transport and the call's limits.
pub struct ProviderModel<'a, T> {
    pub provider: &'a Provider,
    pub transport: T,
    pub limits: Limits,
}

impl<'a, T: Transport> ProviderModel<'a, T> {
    pub fn new(provider: &'a Provider, transport: T, limits: Limits) -> Self {
        ProviderModel { provider, transport, limits }
    }
}

impl<T: Transport> Model for ProviderModel<'_, T> {
    type Request = Prepared;
    type Source = ModelSource<T::Body>;

    fn model_name(&self) -> String {
        self.provider.model_name()
    }

    fn prepare(&self, prompt: &Prompt<'_>) -> Result<Prepared, T::Error> {
        self.provider.prepare(|n| self.transport.env_var(n), prompt)
    }

    fn reopen(&self, answer: &str) -> Option<Result<Prepared, T::Error>> {
        self.provider.reopen(|n| self.transport.env_var(n), answer)
    }

    fn open(&self, request: Prepared) -> LocalBoxFuture<'_, Result<ModelSource<T::Body>, T::Error>> {
        async move {
            match request {
                Prepared::Scripted(s) => Ok(ModelSource::Scripted(VecEventSource::new(s.events(), s.id, s.usage))),
                Prepared::Http { request, decoder, secrets, answer } => {
                    let detached = self.transport.detached();
                    let mut again =
                        detached.clone().map(|send| reconnect(send, self.transport.sleeper(), &request, &secrets));
                    // An answer read again from its start is a reconnect after sequence number 0.
                    let sent = match (&answer, &mut again) {
                        (None, _) => transport::send(&self.transport, &request, &secrets).await,
                        (Some(id), Some(again)) => match again(id, 0, 1).await {
                            Reopened::Body(body) => Ok(body),
                            _ => {
                                Err(ChatProviderError::Other(format!("the answer {id} could not be read again")).into())
                            }
                        },
                        (Some(_), None) => {
                            Err(ChatProviderError::Other("this transport cannot read an answer again".into()).into())
                        }
                    };
                    let body = match sent {
                        Ok(body) => body,
                        Err(e) => return Err(e.redact(&secrets)),
                    };
                    let mut source = SseEventSource::new(body, decoder).with_limits(self.limits);
                    if let (Some(send), Some(again)) = (detached, again) {
                        let cancel = cancel(send, &request, &secrets, self.transport.spawner());
                        source = source.with_reconnect(again, cancel);
                    }
                    Ok(ModelSource::Sse { source: Box::new(source), secrets })
                }
            }
        }
        .boxed_local()
    }
}

#[cfg(test)]
mod tests {
    use super::answer_url;

    #[test]
    fn an_answer_is_read_again_and_cancelled_at_its_own_url() {
        let base = "https://api.example/v1/responses";
        assert_eq!(
            answer_url(base, "resp_1", "", "stream=true&starting_after=5"),
            "https://api.example/v1/responses/resp_1?stream=true&starting_after=5"
        );
        assert_eq!(answer_url(base, "resp_1", "/cancel", ""), "https://api.example/v1/responses/resp_1/cancel");
        // A base URL's own query (an API version) is kept; an id cannot leave its path segment.
        let versioned = "https://x.example/openai/responses?api-version=2025-04-01";
        assert_eq!(
            answer_url(versioned, "a/b?c", "", "stream=true&starting_after=0"),
            "https://x.example/openai/responses/a%2Fb%3Fc?stream=true&starting_after=0&api-version=2025-04-01"
        );
        assert_eq!(
            answer_url(versioned, "r", "/cancel", ""),
            "https://x.example/openai/responses/r/cancel?api-version=2025-04-01"
        );
    }
}
