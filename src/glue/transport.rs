//! The core's [`Transport`] over `fetch` (web-sys), and a response body read incrementally,
//! a batch of chunks at a time, as it arrives. Redirects, error statuses and their bodies are
//! the core's (`engine::model::transport`); this file only moves bytes.
//!
//! `timeoutMs` bounds the wait for the response headers and each wait for the next body
//! chunk (an idle stream), not the whole answer, which may legitimately stream for minutes.
//! Each exchange has an `AbortController` of its own: aborting it (a dropped request, response
//! or body; a timeout) makes the runtime close the connection.

use std::cell::RefCell;
use std::rc::Rc;
use std::task::{Poll, Waker};

use futures::future::{select, Either, LocalBoxFuture};
use futures::FutureExt;
use js_sys::{Function, Object, Reflect, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

use super::error::GlueError;
use super::get;
use super::signals::AbortOnDrop;
use super::sys::{self, AbortController, Headers, Reader, RequestInit, Response};
use crate::engine::error::ChatProviderError;
use crate::engine::generate::ByteSource;
use crate::engine::model::transport::{send, Detached};
use crate::engine::model::{Deadlines, HttpResponse, ModelError, Transport};
use crate::engine::providers::{HttpRequest, Method};
use crate::engine::secrets::Secrets;

/// When one model call was sent, and the limits it waits within (the rule is the core's).
#[derive(Clone, Copy)]
struct Clock {
    deadlines: Deadlines,
    sent_ms: f64,
}

impl Clock {
    /// Awaits `fut` within the tightest limit that applies now (`first`: no chunk of the body has
    /// come yet), or fails with that limit's timeout error and aborts the exchange.
    async fn wait(
        &self,
        fut: impl std::future::Future<Output = Result<JsValue, JsValue>>,
        first: bool,
        ctrl: &AbortController,
        what: &str,
    ) -> Result<Result<JsValue, JsValue>, ChatProviderError> {
        let d = &self.deadlines;
        // The clock is read only when a limit counts from the sending.
        let elapsed =
            if d.first_chunk_ms.is_some() || d.step_ms.is_some() { sys::date_now() - self.sent_ms } else { 0.0 };
        let Some((ms, which)) = d.next_wait(elapsed, first) else { return Ok(fut.await) };
        let timer = gloo_timers::future::TimeoutFuture::new(ms.ceil().clamp(0.0, u32::MAX as f64) as u32);
        let fut = std::pin::pin!(fut);
        match select(fut, timer).await {
            Either::Left((r, _)) => Ok(r),
            Either::Right(_) => {
                ctrl.abort();
                Err(d.error(which, what))
            }
        }
    }
}

/// What a rejected `fetch` or `read` says, with its `cause` (Node puts `ECONNREFUSED` there).
fn describe_js_error(e: &JsValue) -> String {
    let msg = get(e, "message")
        .and_then(|m| m.as_string())
        .or_else(|| e.as_string())
        .unwrap_or_else(|| "unknown error".into());
    match get(e, "cause") {
        Some(cause) => {
            let c = get(&cause, "code")
                .and_then(|c| c.as_string())
                .or_else(|| get(&cause, "message").and_then(|m| m.as_string()));
            match c {
                Some(c) => format!("{msg} ({c})"),
                None => msg,
            }
        }
        None => msg,
    }
}

/// Where a request went, for an error: the URL without its credentials or query (a key may ride
/// in either), as `POST scheme://host/path`.
fn where_to(url: &str) -> String {
    let no_query = url.split(['?', '#']).next().unwrap_or(url);
    let shown = match no_query.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_once('/').map_or((rest, ""), |(a, p)| (a, p));
            let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
            if path.is_empty() {
                format!("{scheme}://{host}")
            } else {
                format!("{scheme}://{host}/{path}")
            }
        }
        None => no_query.to_owned(),
    };
    format!("POST {shown}")
}

/// What a browser's fetch says when it fails without a status (Chromium, Firefox, Safari): most
/// often the server did not allow the page's origin (CORS).
fn cors_hint(message: &str) -> &'static str {
    let in_browser = get(&js_sys::global(), "document").is_some_and(|d| !d.is_undefined());
    let opaque =
        ["Failed to fetch", "NetworkError when attempting to fetch resource.", "Load failed"].contains(&message);
    if in_browser && opaque {
        " (in a browser, a fetch that fails with no status is most often CORS: the server did not allow this page's origin; or the network is down)"
    } else {
        ""
    }
}

/// The core's transport over the caller's `fetch` (or the runtime's): each exchange with an
/// `AbortController` of its own, redirects handed back to the core (`redirect: "manual"`), the
/// response headers awaited within `timeoutMs`.
#[derive(Clone)]
pub struct FetchTransport {
    /// The caller's; `None`: the runtime's, looked up when a request is sent.
    fetch: Option<Function>,
    deadlines: Deadlines,
    /// The caller's `logger.warn(message, fields)`, when it gave one.
    warn: Option<Function>,
}

impl FetchTransport {
    pub fn new(fetch: Option<Function>, deadlines: Deadlines) -> FetchTransport {
        FetchTransport { fetch, deadlines, warn: None }
    }

    /// This transport, telling `warn` (the caller's logger) what it gives up on.
    pub fn with_warn(mut self, warn: Option<Function>) -> FetchTransport {
        self.warn = warn;
        self
    }

    fn fetch(&self) -> Result<Function, ChatProviderError> {
        match &self.fetch {
            Some(f) => Ok(f.clone()),
            None => get(&js_sys::global(), "fetch").and_then(|f| f.dyn_into::<Function>().ok()).ok_or_else(|| {
                ChatProviderError::Other(
                    "no fetch function in this runtime; pass `fetch` in the provider options".into(),
                )
            }),
        }
    }

    async fn exchange(&self, url: &str, req: &HttpRequest) -> Result<FetchResponse, GlueError> {
        let fetch = self.fetch()?;
        let clock = Clock { deadlines: self.deadlines, sent_ms: sys::date_now() };
        let ctrl = sys::abort_controller().map_err(GlueError::Js)?;
        // Dropped while waiting for the response headers, the request closes its connection;
        // after that, the response (and then its body) does it when dropped early.
        let mut armed = AbortOnDrop::new(ctrl.clone(), None);
        let headers = Headers::new().map_err(GlueError::Js)?;
        for (k, v) in &req.headers {
            headers.set(k, v).map_err(GlueError::Js)?;
        }
        let init = RequestInit::new();
        init.set_headers(&headers);
        match req.method {
            Method::Post => {
                init.set_method("POST");
                init.set_body(&JsValue::from_str(&req.body));
            }
            Method::Get => init.set_method("GET"),
        }
        init.set_signal(Some(&ctrl.signal()));
        // Redirects are not left to fetch, which would carry `x-api-key` and the conversation to
        // any host: the core follows one only within the origin the caller named.
        init.set_redirect(web_sys::RequestRedirect::Manual);
        let connection = |e: JsValue| {
            let said = describe_js_error(&e);
            let hint = cors_hint(&said);
            GlueError::Caused(
                ChatProviderError::Connection(format!("Connection error: {}: {said}{hint}", where_to(url))),
                e,
            )
        };
        let called = fetch.call2(&JsValue::UNDEFINED, &JsValue::from_str(url), &init).map_err(connection)?;
        let promise = called
            .dyn_into::<js_sys::Promise>()
            .map_err(|_| ChatProviderError::Other("the fetch function did not return a Promise".into()))?;
        let response = clock
            .wait(JsFuture::from(promise), true, &ctrl, "response headers")
            .await?
            .map_err(connection)?
            .unchecked_into::<Response>();
        armed.disarm(); // the response owns the connection now
        Ok(FetchResponse { response: Some(response), ctrl, clock })
    }
}

/// How long a task the transport runs on its own may take (see [`Transport::spawner`]).
const DETACHED_TASK_MS: u32 = 10_000;

impl Transport for FetchTransport {
    type Error = GlueError;
    type Body = BodySource;
    type Response = FetchResponse;

    fn post<'a>(
        &'a self,
        url: &'a str,
        request: &'a HttpRequest,
    ) -> LocalBoxFuture<'a, Result<FetchResponse, GlueError>> {
        self.exchange(url, request).boxed_local()
    }

    fn now_ms(&self) -> Option<f64> {
        Some(sys::date_now())
    }

    /// A copy of this transport (the same `fetch` and time limits) that sends later requests:
    /// an answer read again after its stream broke.
    /// An answer that cannot be read again (a GET refused with a 4xx but 408 and 429: expired, or
    /// a server that keeps no answers) is said once through the logger: the round is then salvaged
    /// and the model asked again, as for any broken stream.
    fn detached(&self) -> Option<Detached<BodySource, GlueError>> {
        let transport = self.clone();
        Some(std::rc::Rc::new(move |request: HttpRequest, secrets: Secrets| {
            let transport = transport.clone();
            async move {
                let sent = send(&transport, &request, &secrets).await;
                if let (Err(e), Method::Get, Some(warn)) = (&sent, request.method, &transport.warn) {
                    if let Some(&ChatProviderError::Status { status, .. }) = e.provider_error() {
                        if crate::engine::model::provider::answer_gone(status) {
                            let fields = Object::new();
                            let _ = Reflect::set(&fields, &"status".into(), &JsValue::from(status));
                            let message = format!("kosong-wasm: a broken answer could not be read again ({status}); handled as any broken stream");
                            let _ = warn.call2(&JsValue::UNDEFINED, &JsValue::from_str(&message), &fields);
                        }
                    }
                }
                sent
            }
            .boxed_local()
        }))
    }

    /// A task run on its own for at most 10 s (a server-side cancel: bounded, and never an error
    /// anyone hears).
    fn spawner(&self) -> Box<dyn Fn(LocalBoxFuture<'static, ()>)> {
        Box::new(|task| {
            wasm_bindgen_futures::spawn_local(async move {
                let limit = gloo_timers::future::TimeoutFuture::new(DETACHED_TASK_MS);
                let _ = select(task, limit).await;
            })
        })
    }

    fn sleeper(&self) -> Box<dyn Fn(u64) -> LocalBoxFuture<'static, ()>> {
        Box::new(|ms| gloo_timers::future::TimeoutFuture::new(ms.min(u64::from(u32::MAX)) as u32).boxed_local())
    }

    /// `process.env[name]` (Node, and Workers with `nodejs_compat`).
    fn env_var(&self, name: &str) -> Option<String> {
        let env = get(&js_sys::global(), "process").and_then(|p| get(&p, "env"))?;
        get(&env, name).and_then(|v| v.as_string()).filter(|v| !v.is_empty())
    }
}

/// A response whose headers are in. Dropped without its body taken (a redirect, say), it closes
/// the connection.
pub struct FetchResponse {
    response: Option<Response>,
    ctrl: AbortController,
    clock: Clock,
}

impl Drop for FetchResponse {
    fn drop(&mut self) {
        if self.response.take().is_some() {
            self.ctrl.abort();
        }
    }
}

impl HttpResponse for FetchResponse {
    type Body = BodySource;

    fn status(&self) -> u16 {
        self.response.as_ref().map_or(0, |r| r.status())
    }

    fn opaque_redirect(&self) -> bool {
        let kind = self.response.as_ref().and_then(|r| get(r, "type")).and_then(|t| t.as_string());
        kind.as_deref() == Some("opaqueredirect")
    }

    fn header(&self, name: &str) -> Option<String> {
        self.response.as_ref()?.headers().get(name).ok().flatten()
    }

    fn into_body(mut self) -> BodySource {
        let reader = self.response.take().and_then(|r| r.body()).map(|b| b.get_reader().unchecked_into::<Reader>());
        BodySource::new(reader, self.ctrl.clone(), self.clock)
    }
}

/// Where a read's outcome lands, put there by the two callbacks a body makes once: a read
/// costs no closure and no Promise wrapper on the engine's side.
#[derive(Default)]
struct Landing {
    outcome: Option<Result<JsValue, JsValue>>,
    waker: Option<Waker>,
}

impl BodySource {
    fn new(reader: Option<Reader>, ctrl: AbortController, clock: Clock) -> BodySource {
        let landing = Rc::new(RefCell::new(Landing::default()));
        let land = |ok: bool| {
            let landing = landing.clone();
            Closure::<dyn FnMut(JsValue)>::new(move |v: JsValue| {
                let waker = {
                    let mut l = landing.borrow_mut();
                    l.outcome = Some(if ok { Ok(v) } else { Err(v) });
                    l.waker.take()
                };
                if let Some(w) = waker {
                    w.wake();
                }
            })
        };
        let (on_value, on_error) = (land(true), land(false));
        BodySource {
            reader,
            state: Object::new(),
            batch: super::body_reader(),
            ctrl,
            clock,
            first: true,
            landing,
            on_value,
            on_error,
            max_batch: SMALL_BATCH,
        }
    }
}

/// The body of a streaming response, read a batch of chunks at a time (see `readBatch` in
/// internal.js): one crossing per batch, not per network chunk.
pub struct BodySource {
    reader: Option<Reader>,
    state: Object,
    /// `readBatch` of the JS layer (installed when the module is loaded).
    batch: Option<Function>,
    ctrl: AbortController,
    clock: Clock,
    /// No chunk of the body has come yet (the first-chunk limit still applies).
    first: bool,
    landing: Rc<RefCell<Landing>>,
    on_value: Closure<dyn FnMut(JsValue)>,
    on_error: Closure<dyn FnMut(JsValue)>,
    /// The most bytes one read gathers (of what has arrived already; it never waits for more).
    max_batch: f64,
}

/// While a tool call streams, a read gathers about 1 KiB: the call's end reaches the engine
/// with little read after it, so its tool starts at once. Otherwise 16 KiB: text decodes with
/// fewer reads (20,000 OpenAI text chunks take ~15% less time at 16 KiB). The small size is a
/// trade measured in `npm run bench`'s tool rows (one event a read, two runs a size): at 1 KiB
/// the steps are 0.67–0.79× the bare loop's and the tools start 0.07–0.09 ms after their end;
/// at 4 KiB the OpenAI steps 0.60–0.65× but interleaved calls start 0.17 ms after; at 16 KiB
/// 0.54–0.63× and 0.14–0.23 ms (2 of 8 interleaved calls start before the stream ends); the
/// Anthropic step stays 0.67–0.79× at every size (most of its time is the platform's reads).
const SMALL_BATCH: f64 = 1024.0;
const LARGE_BATCH: f64 = 16384.0;

/// A body dropped before its end (the turn was cancelled, the step failed) closes the
/// connection, and tells the JS layer not to call its callbacks again.
impl Drop for BodySource {
    fn drop(&mut self) {
        let _ = Reflect::set(&self.state, &JsValue::from_str("dropped"), &JsValue::TRUE);
        if self.reader.is_some() {
            self.ctrl.abort();
        }
    }
}

impl ByteSource for BodySource {
    type Error = GlueError;

    async fn read_into(&mut self, buf: &mut Vec<u8>) -> Result<bool, GlueError> {
        let Some(reader) = &self.reader else { return Ok(false) };
        let broke = |e: JsValue| {
            let err =
                ChatProviderError::Connection(format!("the connection broke mid-stream: {}", describe_js_error(&e)));
            GlueError::Caused(err, e)
        };
        self.landing.borrow_mut().outcome = None;
        let max = JsValue::from_f64(self.max_batch);
        let batch =
            self.batch.as_ref().ok_or_else(|| ChatProviderError::Other("kosong-wasm is not initialized".into()))?;
        batch
            .call5(&JsValue::UNDEFINED, reader, &self.state, self.on_value.as_ref(), self.on_error.as_ref(), &max)
            .map_err(broke)?;
        let landing = &self.landing;
        let landed = std::future::poll_fn(|cx| {
            let mut l = landing.borrow_mut();
            match l.outcome.take() {
                Some(o) => Poll::Ready(o),
                None => {
                    l.waker = Some(cx.waker().clone());
                    Poll::Pending
                }
            }
        });
        let r = self.clock.wait(landed, self.first, &self.ctrl, "stream data").await?;
        self.first = false;
        let value = r.map_err(broke)?;
        if value.is_null() || value.is_undefined() {
            self.reader = None;
            return Ok(false);
        }
        let not_bytes = || ChatProviderError::Other("the response body yielded a chunk that is not bytes".into());
        let chunk: Uint8Array = value.dyn_into().map_err(|_| not_bytes())?;
        buf.resize(chunk.length() as usize, 0);
        chunk.copy_to(buf);
        Ok(true)
    }

    fn calls_streaming(&mut self, open: bool) {
        self.max_batch = if open { SMALL_BATCH } else { LARGE_BATCH };
    }
}
