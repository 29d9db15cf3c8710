//! A request through `fetch` and its body read incrementally, chunk by chunk, as it arrives.
//!
//! `timeoutMs` bounds the wait for the response headers and each wait for the next body
//! chunk (an idle stream), not the whole answer, which may legitimately stream for minutes.
//! The request has an `AbortController` of its own: aborting it (on the caller's abort, a
//! timeout or an error) makes the runtime close the connection.

use std::cell::RefCell;
use std::rc::Rc;
use std::task::{Poll, Waker};

use futures::future::{select, Either};
use js_sys::{Function, Object, Reflect, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

use super::sys::{self, AbortController, Headers, Reader, RequestInit, Response};
use super::GlueError;
use crate::core::error::{parse_retry_after, ChatProviderError};
use crate::core::generate::ByteSource;
use crate::core::providers::{error_message_from_body, HttpRequest};

/// Awaits `fut`, or fails with a timeout error after `ms` (when given).
async fn with_timeout(
    fut: impl std::future::Future<Output = Result<JsValue, JsValue>>,
    ms: Option<f64>,
    ctrl: &AbortController,
    what: &str,
) -> Result<Result<JsValue, JsValue>, ChatProviderError> {
    let Some(ms) = ms else { return Ok(fut.await) };
    let timer = gloo_timers::future::TimeoutFuture::new(ms.clamp(0.0, u32::MAX as f64) as u32);
    let fut = std::pin::pin!(fut);
    let outcome = match select(fut, timer).await {
        Either::Left((r, _)) => Some(r),
        Either::Right(_) => None,
    };
    match outcome {
        Some(r) => Ok(r),
        None => {
            ctrl.abort();
            Err(ChatProviderError::Timeout(format!("Request timed out: no {what} within {ms} ms")))
        }
    }
}

/// What a rejected `fetch` or `read` says, with its `cause` (Node puts `ECONNREFUSED` there).
fn describe_js_error(e: &JsValue) -> String {
    use super::get;
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

/// Sends the request; on a 2xx answer returns its body as a byte source. (Errors are
/// cleaned of the API key by the caller, in one place for every path.)
pub async fn send(
    fetch: &Function,
    req: &HttpRequest,
    ctrl: &AbortController,
    timeout_ms: Option<f64>,
) -> Result<BodySource, GlueError> {
    let headers = Headers::new().map_err(GlueError::Js)?;
    for (k, v) in &req.headers {
        headers.set(k, v).map_err(GlueError::Js)?;
    }
    let init = RequestInit::new();
    init.set_method("POST");
    init.set_headers(&headers);
    init.set_body(&JsValue::from_str(&req.body));
    init.set_signal(Some(&ctrl.signal()));
    // Redirects are not left to fetch, which would carry `x-api-key` and the conversation to
    // any host: one is followed only within the origin the caller named.
    init.set_redirect(web_sys::RequestRedirect::Manual);
    let mut url = req.url.clone();
    let mut hops = 0;
    let response = loop {
        let called = fetch.call2(&JsValue::UNDEFINED, &JsValue::from_str(&url), &init).map_err(|e| {
            GlueError::Caused(ChatProviderError::Connection(format!("Connection error: {}", describe_js_error(&e))), e)
        })?;
        let promise = called
            .dyn_into::<js_sys::Promise>()
            .map_err(|_| ChatProviderError::Other("the fetch function did not return a Promise".into()))?;
        let response = match with_timeout(JsFuture::from(promise), timeout_ms, ctrl, "response headers").await? {
            Ok(r) => r.unchecked_into::<Response>(),
            Err(e) => {
                let err = ChatProviderError::Connection(format!("Connection error: {}", describe_js_error(&e)));
                return Err(GlueError::Caused(err, e));
            }
        };
        let status = response.status();
        // Browsers hide a manual redirect's target (an "opaqueredirect" response, status 0).
        let opaque = js_sys::Reflect::get(&response, &"type".into()).ok().and_then(|t| t.as_string());
        if opaque.as_deref() == Some("opaqueredirect") {
            return Err(ChatProviderError::Redirect(
                "the server answered with a redirect whose target this runtime hides; it was not followed".into(),
            )
            .into());
        }
        if !matches!(status, 301 | 302 | 303 | 307 | 308) {
            break response;
        }
        let location = response.headers().get("location").ok().flatten();
        url = crate::core::providers::same_origin_redirect(&url, location.as_deref(), status)?;
        hops += 1;
        if hops > crate::core::providers::MAX_REDIRECTS {
            return Err(ChatProviderError::Redirect(format!(
                "more than {} redirects within {}",
                crate::core::providers::MAX_REDIRECTS,
                crate::core::providers::origin_of(&url).unwrap_or_default()
            ))
            .into());
        }
        if let Some(body) = response.body() {
            let _ = body.cancel();
        }
    };
    let status = response.status();
    let headers = response.headers();
    // OpenAI and most others: x-request-id; Anthropic: request-id; Moonshot: x-trace-id.
    let header = |name: &str| headers.get(name).ok().flatten();
    let request_id = ["x-request-id", "request-id", "x-trace-id"].iter().find_map(|h| header(h));
    if !(200..300).contains(&status) {
        let text = response.text().map_err(GlueError::Js)?;
        let body = match with_timeout(JsFuture::from(text), timeout_ms, ctrl, "error body").await? {
            Ok(t) => t.as_string().unwrap_or_default(),
            Err(_) => String::new(),
        };
        let detail = error_message_from_body(&body).unwrap_or_else(|| "no error message".into());
        let retry_after_ms = parse_retry_after(
            header("retry-after-ms").as_deref(),
            header("retry-after").as_deref(),
            Some(sys::date_now()),
        );
        return Err(ChatProviderError::Status {
            status,
            message: format!("Error code: {status} - {detail}"),
            request_id,
            retry_after_ms,
        }
        .into());
    }
    let reader = response.body().map(|b| b.get_reader().unchecked_into::<Reader>());
    let batch =
        super::body_reader().ok_or_else(|| ChatProviderError::Other("kosong-wasm is not initialized".into()))?;
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
    Ok(BodySource {
        reader,
        state: Object::new(),
        batch,
        ctrl: ctrl.clone(),
        timeout_ms,
        landing,
        on_value,
        on_error,
        max_batch: SMALL_BATCH,
    })
}

/// Where a read's outcome lands, put there by the two callbacks a body makes once: a read
/// costs no closure and no Promise wrapper on the engine's side.
#[derive(Default)]
struct Landing {
    outcome: Option<Result<JsValue, JsValue>>,
    waker: Option<Waker>,
}

/// The body of a streaming response, read a batch of chunks at a time (see `readBatch` in
/// internal.js): one crossing per batch, not per network chunk.
pub struct BodySource {
    reader: Option<Reader>,
    state: Object,
    /// `readBatch` of the JS layer (installed when the module is loaded).
    batch: Function,
    ctrl: AbortController,
    timeout_ms: Option<f64>,
    landing: Rc<RefCell<Landing>>,
    on_value: Closure<dyn FnMut(JsValue)>,
    on_error: Closure<dyn FnMut(JsValue)>,
    /// The most bytes one read gathers (of what has arrived already; it never waits for more).
    max_batch: f64,
}

/// While a tool call streams, a read gathers about 1 KiB: the call's end reaches the engine
/// with little read after it, so its tool starts at once. Otherwise 16 KiB: text decodes with
/// fewer reads (measured in `npm run bench`: 8 interleaved calls start 0.2 ms after their end
/// at 1 KiB, 0.45 ms at 4 KiB; 20,000 OpenAI text chunks take ~15% less time at 16 KiB).
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
        self.batch
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
        let r = with_timeout(landed, self.timeout_ms, &self.ctrl, "stream data").await?;
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
