//! The transport seam: one HTTP exchange at a time, and what the core makes of its answers.
//!
//! A [`Transport`] posts a request and hands back the response as soon as its headers are in
//! (never following a redirect itself); [`send`] applies this package's rules on top: a redirect
//! is followed only within the origin the caller named (at most [`MAX_REDIRECTS`] times), a
//! non-2xx answer becomes a [`ChatProviderError::Status`] with the server's message, request id
//! and `Retry-After`, and a 2xx answer's body is what the decoder reads.
//!
//! Drop behaviour, which every transport must keep: dropping the future of `post` before it
//! resolves aborts the request; dropping a response (a redirect, an error whose body was read)
//! or its body closes the connection.

use futures::future::LocalBoxFuture;

use super::ModelError;
use crate::engine::error::{parse_retry_after, ChatProviderError, FailureKind};
use crate::engine::generate::ByteSource;
use crate::engine::providers::{error_message_from_body, origin_of, same_origin_redirect, HttpRequest, MAX_REDIRECTS};
use crate::engine::secrets::Secrets;

/// A response whose headers have arrived.
pub trait HttpResponse {
    type Body;
    fn status(&self) -> u16;
    /// A browser's `opaqueredirect` answer: a redirect whose target the runtime hides.
    fn opaque_redirect(&self) -> bool {
        false
    }
    /// A response header (case-insensitive), `None` when absent.
    fn header(&self, name: &str) -> Option<String>;
    fn into_body(self) -> Self::Body;
}

/// How requests leave the core, and the little of the environment a request needs.
pub trait Transport {
    type Error: ModelError + 'static;
    type Body: ByteSource<Error = Self::Error> + 'static;
    type Response: HttpResponse<Body = Self::Body>;
    /// Sends `request` — its method, headers and (for a POST) body — to `url` (the request's own
    /// URL, or a redirect's).
    fn post<'a>(
        &'a self,
        url: &'a str,
        request: &'a HttpRequest,
    ) -> LocalBoxFuture<'a, Result<Self::Response, Self::Error>>;
    /// Milliseconds since the epoch (a `Retry-After` date is read against it).
    fn now_ms(&self) -> Option<f64> {
        None
    }
    /// An environment variable (where an API key may come from), `None` when unset or empty.
    fn env_var(&self, _name: &str) -> Option<String> {
        None
    }
    /// This transport as an owned sender of later requests, with this package's rules ([`send`]):
    /// an answer read again after its stream broke is asked for after the call that opened it
    /// returned. `None`: this transport cannot be kept (its answers are never read again).
    fn detached(&self) -> Option<Detached<Self::Body, Self::Error>> {
        None
    }
    /// What runs a task on its own, after the call that made it is gone (a server-side cancel),
    /// within a time limit of the transport's; the task's outcome is nobody's. A transport that
    /// cannot run one drops it.
    fn spawner(&self) -> Box<dyn Fn(LocalBoxFuture<'static, ()>)> {
        Box::new(drop)
    }
    /// What waits `ms` milliseconds (a reconnect's backoff); a transport without a clock does not.
    fn sleeper(&self) -> Box<dyn Fn(u64) -> LocalBoxFuture<'static, ()>> {
        Box::new(|_| Box::pin(std::future::ready(())))
    }
}

/// See [`Transport::detached`].
pub type Detached<B, E> = std::rc::Rc<dyn Fn(HttpRequest, Secrets) -> LocalBoxFuture<'static, Result<B, E>>>;

/// The response headers that carry a request id: OpenAI and most others `x-request-id`,
/// Anthropic `request-id`, Moonshot `x-trace-id`.
const REQUEST_ID_HEADERS: [&str; 3] = ["x-request-id", "request-id", "x-trace-id"];

/// At most this much of an error body is read (its message is at the start).
const MAX_ERROR_BODY: usize = 64 << 10;

/// Sends `request` through `transport` with this package's rules (see the module's text): the
/// body of the 2xx answer, or the error.
pub async fn send<T: Transport>(transport: &T, request: &HttpRequest, secrets: &Secrets) -> Result<T::Body, T::Error> {
    let mut url = request.url.clone();
    let mut hops = 0;
    let response = loop {
        let response = transport.post(&url, request).await?;
        if response.opaque_redirect() {
            return Err(ChatProviderError::Redirect(
                "the server answered with a redirect whose target this runtime hides; it was not followed".into(),
            )
            .into());
        }
        let status = response.status();
        if !matches!(status, 301 | 302 | 303 | 307 | 308) {
            break response;
        }
        url = same_origin_redirect(&url, response.header("location").as_deref(), status)?;
        hops += 1;
        if hops > MAX_REDIRECTS {
            let within = origin_of(&url).unwrap_or_default();
            return Err(
                ChatProviderError::Redirect(format!("more than {MAX_REDIRECTS} redirects within {within}")).into()
            );
        }
    };
    let status = response.status();
    if (200..300).contains(&status) {
        let Some(essence) = response.header("content-type").as_deref().and_then(document_type) else {
            return Ok(response.into_body());
        };
        // A page or a whole JSON document where a stream belongs (a base URL that reaches a web
        // page, a proxy's login screen, a server that ignored `stream: true`): said as such, with
        // how it begins, instead of a stream that "ended before the model finished".
        let body = read_error_body(response.into_body(), secrets).await;
        let begins = first_chars(&body, 300);
        return Err(ChatProviderError::failed(
            FailureKind::Malformed,
            format!(
                "the server answered {essence}, not an event stream ({}); it began: {begins}",
                request_line(&url, secrets)
            ),
        )
        .into());
    }
    let request_id = REQUEST_ID_HEADERS.iter().find_map(|h| response.header(h));
    let retry_after_ms = parse_retry_after(
        response.header("retry-after-ms").as_deref(),
        response.header("retry-after").as_deref(),
        transport.now_ms(),
    );
    // Clean, then cut: the body is cleaned of the request's secrets before a message is picked out
    // of it and shortened (and the message once more, for a key escaped inside a JSON string).
    let body = read_error_body(response.into_body(), secrets).await;
    let detail = error_message_from_body(&body).map(|m| secrets.clean(m)).unwrap_or_else(|| "no error message".into());
    let detail = format!("{detail} ({})", request_line(&url, secrets));
    Err(ChatProviderError::status(status, detail, request_id, retry_after_ms).into())
}

/// A 2xx answer's content type when it names a document, not a stream (`text/html`,
/// `application/json`, XML); any other type, or none, is read as the stream it should be.
fn document_type(content_type: &str) -> Option<String> {
    let essence = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    matches!(
        essence.as_str(),
        "text/html" | "application/xhtml+xml" | "application/json" | "application/xml" | "text/xml"
    )
    .then_some(essence)
}

/// Where a request went, as an error says it: `POST scheme://host[:port]/path` — never the query
/// or the fragment (a key may travel there) nor credentials, and cleaned of the request's secrets
/// besides.
fn request_line(url: &str, secrets: &Secrets) -> String {
    let bare = &url[..url.find(['?', '#']).unwrap_or(url.len())];
    let shown = match (origin_of(bare), bare.split_once("://")) {
        (Some(origin), Some((_, rest))) => format!("{origin}{}", rest.find('/').map_or("", |i| &rest[i..])),
        _ => "a URL that cannot be read".to_owned(),
    };
    secrets.clean(format!("POST {shown}"))
}

/// At most `n` characters of `text`, blanks run together, `…` when cut.
fn first_chars(text: &str, n: usize) -> String {
    let mut out = String::new();
    let mut words = text.split_whitespace().peekable();
    while let Some(w) = words.next() {
        if out.chars().count() + w.chars().count() > n {
            out.extend(w.chars().take(n.saturating_sub(out.chars().count())));
            out.push('…');
            return out;
        }
        out.push_str(w);
        if words.peek().is_some() {
            out.push(' ');
        }
    }
    if out.is_empty() {
        out.push_str("(nothing)");
    }
    out
}

/// The start of an error answer's body as text ("" when it cannot be read), cleaned of `secrets`
/// (a secret cut at the cap included).
async fn read_error_body<B: ByteSource>(mut body: B, secrets: &Secrets) -> String {
    let (mut text, mut chunk) = (Vec::new(), Vec::new());
    while text.len() < MAX_ERROR_BODY {
        match body.read_into(&mut chunk).await {
            Ok(true) => text.extend_from_slice(&chunk),
            Ok(false) | Err(_) => break,
        }
    }
    let cut = text.len() >= MAX_ERROR_BODY;
    text.truncate(MAX_ERROR_BODY);
    let text = String::from_utf8_lossy(&text).into_owned();
    if cut {
        secrets.clean_cut(text)
    } else {
        secrets.clean(text)
    }
}

/// How long one model call may wait, by this package's rule: `chunk_ms` for the response headers
/// and for each chunk after them (`timeoutMs`), `first_chunk_ms` from sending until the first
/// chunk of the body (`firstChunkTimeoutMs`), `step_ms` from sending until the stream's end
/// (`stepTimeoutMs`). Each wait takes the tightest that applies; the one that fires names itself
/// in the `Timeout` error, which the agent retries as a step.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Deadlines {
    pub chunk_ms: Option<f64>,
    pub first_chunk_ms: Option<f64>,
    pub step_ms: Option<f64>,
}

/// Which limit a wait ran into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deadline {
    Chunk,
    FirstChunk,
    Step,
}

impl Deadlines {
    /// How long the next wait may take, `elapsed_ms` after sending, and which limit that is;
    /// `None`: no limit. `first`: no chunk of the body has come yet. (Nothing is allocated: this
    /// runs for every chunk.)
    pub fn next_wait(&self, elapsed_ms: f64, first: bool) -> Option<(f64, Deadline)> {
        let left = |limit: Option<f64>| limit.map(|ms| (ms - elapsed_ms).max(0.0));
        let mut best = self.chunk_ms.map(|ms| (ms, Deadline::Chunk));
        let first_chunk = if first { left(self.first_chunk_ms) } else { None };
        for (wait, which) in [(first_chunk, Deadline::FirstChunk), (left(self.step_ms), Deadline::Step)] {
            if let Some(w) = wait {
                if best.is_none_or(|(b, _)| w < b) {
                    best = Some((w, which));
                }
            }
        }
        best
    }

    /// The error for a wait that ran into `which` (`what`: what was awaited, for `Chunk`).
    pub fn error(&self, which: Deadline, what: &str) -> ChatProviderError {
        let whole = |ms: Option<f64>| ms.unwrap_or(0.0).ceil() as u64;
        ChatProviderError::Timeout(match which {
            Deadline::Chunk => format!("Request timed out: no {what} within {} ms", whole(self.chunk_ms)),
            Deadline::FirstChunk => format!(
                "Request timed out: no first chunk of the answer within {} ms (firstChunkTimeoutMs)",
                whole(self.first_chunk_ms)
            ),
            Deadline::Step => {
                format!("Request timed out: the model call ran past {} ms (stepTimeoutMs)", whole(self.step_ms))
            }
        })
    }
}

/// No transport: every request fails with a connection error. For a model that only ever
/// streams scripts (and tests that must not reach a network).
pub struct Offline;

/// The body an [`Offline`] response would have.
pub struct NoBody;

impl ByteSource for NoBody {
    type Error = ChatProviderError;
    async fn read_into(&mut self, _buf: &mut Vec<u8>) -> Result<bool, ChatProviderError> {
        Ok(false)
    }
}

impl HttpResponse for NoBody {
    type Body = NoBody;
    fn status(&self) -> u16 {
        0
    }
    fn header(&self, _name: &str) -> Option<String> {
        None
    }
    fn into_body(self) -> NoBody {
        self
    }
}

impl Transport for Offline {
    type Error = ChatProviderError;
    type Body = NoBody;
    type Response = NoBody;
    fn post<'a>(
        &'a self,
        url: &'a str,
        _request: &'a HttpRequest,
    ) -> LocalBoxFuture<'a, Result<NoBody, ChatProviderError>> {
        let e = ChatProviderError::Connection(format!("Connection error: no transport to reach {url}"));
        Box::pin(futures::future::ready(Err(e)))
    }
}

#[cfg(test)]
mod deadline_tests {
    use super::{Deadline, Deadlines};

    #[test]
    fn each_wait_takes_the_tightest_limit_and_names_it() {
        let d = Deadlines { chunk_ms: Some(1000.0), first_chunk_ms: Some(300.0), step_ms: Some(5000.0) };
        assert_eq!(d.next_wait(0.0, true), Some((300.0, Deadline::FirstChunk)));
        assert_eq!(d.next_wait(200.0, true), Some((100.0, Deadline::FirstChunk)));
        assert_eq!(d.next_wait(200.0, false), Some((1000.0, Deadline::Chunk)), "the first chunk came");
        assert_eq!(d.next_wait(4500.0, false), Some((500.0, Deadline::Step)));
        assert_eq!(d.next_wait(6000.0, false), Some((0.0, Deadline::Step)), "past it: no wait at all");
        assert_eq!(Deadlines::default().next_wait(1e9, true), None);
        assert!(d.error(Deadline::Step, "stream data").message().contains("ran past 5000 ms (stepTimeoutMs)"));
        assert_eq!(
            d.error(Deadline::Chunk, "stream data").message(),
            "Request timed out: no stream data within 1000 ms"
        );
    }
}
