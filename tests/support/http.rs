//! A fake transport: scripted HTTP answers (status, headers, body chunks, how the body ends),
//! each request it was sent kept (URL, headers, body as JSON).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use futures::future::LocalBoxFuture;
use futures::FutureExt;
use serde_json::Value;

use kosong_wasm::engine::error::ChatProviderError;
use kosong_wasm::engine::generate::{ByteSource, Limits};
use kosong_wasm::engine::model::transport::{send, Detached};
use kosong_wasm::engine::model::{HttpResponse, Provider, ProviderModel, Transport};
use kosong_wasm::engine::providers::{HttpRequest, Method};
use kosong_wasm::engine::secrets::Secrets;

use super::yield_now;

#[derive(Clone, Debug)]
pub enum End {
    Done,
    /// The server drops the connection.
    Drop,
    /// The body never answers again (until the turn is cancelled).
    Stall,
}

/// One scripted answer.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub chunks: Vec<String>,
    pub end: End,
}

/// A 200 answer streaming `chunks`, then ending as `end` says.
pub fn ok(chunks: Vec<String>, end: End) -> Reply {
    Reply { status: 200, headers: vec![("content-type".into(), "text/event-stream".into())], chunks, end }
}

/// An error status with a JSON body and these headers.
pub fn status(status: u16, body: &str, headers: &[(&str, &str)]) -> Reply {
    Reply {
        status,
        headers: headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        chunks: vec![body.to_owned()],
        end: End::Done,
    }
}

/// A request as the transport saw it.
#[derive(Clone, Debug)]
pub struct Sent {
    pub method: Method,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

#[derive(Default)]
struct State {
    replies: RefCell<VecDeque<Reply>>,
    sent: RefCell<Vec<Sent>>,
    env: RefCell<Vec<(String, String)>>,
    /// Body chunks handed to the engine so far, across responses.
    delivered: std::cell::Cell<usize>,
}

/// The fake transport (clones share their state).
#[derive(Clone, Default)]
pub struct FakeHttp(Rc<State>);

impl FakeHttp {
    pub fn new(replies: Vec<Reply>) -> FakeHttp {
        let t = FakeHttp::default();
        *t.0.replies.borrow_mut() = replies.into();
        t
    }
    pub fn set_env(&self, name: &str, value: &str) {
        self.0.env.borrow_mut().push((name.into(), value.into()));
    }
    pub fn sent(&self) -> Vec<Sent> {
        self.0.sent.borrow().clone()
    }
    pub fn bodies(&self) -> Vec<Value> {
        self.0.sent.borrow().iter().map(|s| s.body.clone()).collect()
    }
    pub fn delivered(&self) -> usize {
        self.0.delivered.get()
    }
    pub fn left(&self) -> usize {
        self.0.replies.borrow().len()
    }
}

pub struct FakeResponse {
    reply: Reply,
    state: Rc<State>,
}

impl HttpResponse for FakeResponse {
    type Body = FakeBody;
    fn status(&self) -> u16 {
        self.reply.status
    }
    fn header(&self, name: &str) -> Option<String> {
        self.reply.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone())
    }
    fn into_body(self) -> FakeBody {
        FakeBody { chunks: self.reply.chunks.into(), end: self.reply.end, yields: 1, state: self.state }
    }
}

pub struct FakeBody {
    chunks: VecDeque<String>,
    end: End,
    yields: u32,
    state: Rc<State>,
}

impl ByteSource for FakeBody {
    type Error = ChatProviderError;
    async fn read_into(&mut self, buf: &mut Vec<u8>) -> Result<bool, ChatProviderError> {
        // Each read lets other tasks (the tools) run a little, as a network read would.
        for _ in 0..self.yields {
            yield_now().await;
        }
        if let Some(c) = self.chunks.pop_front() {
            self.state.delivered.set(self.state.delivered.get() + 1);
            *buf = c.into_bytes();
            return Ok(true);
        }
        match self.end {
            End::Done => Ok(false),
            End::Drop => Err(ChatProviderError::Connection("Connection error: the socket was destroyed".into())),
            End::Stall => futures::future::pending().await,
        }
    }
}

impl Transport for FakeHttp {
    type Error = ChatProviderError;
    type Body = FakeBody;
    type Response = FakeResponse;
    fn post<'a>(
        &'a self,
        url: &'a str,
        request: &'a HttpRequest,
    ) -> LocalBoxFuture<'a, Result<FakeResponse, ChatProviderError>> {
        // A GET (an answer read again) has no body.
        let body = match request.method {
            Method::Get => Value::Null,
            Method::Post => serde_json::from_str(&request.body).expect("a request body is JSON"),
        };
        self.0.sent.borrow_mut().push(Sent {
            method: request.method,
            url: url.to_owned(),
            headers: request.headers.clone(),
            body,
        });
        let next = self.0.replies.borrow_mut().pop_front();
        let state = self.0.clone();
        async move {
            let reply =
                next.ok_or_else(|| ChatProviderError::Connection("Connection error: no more replies".into()))?;
            Ok(FakeResponse { reply, state })
        }
        .boxed_local()
    }
    fn now_ms(&self) -> Option<f64> {
        Some(0.0)
    }
    fn env_var(&self, name: &str) -> Option<String> {
        self.0.env.borrow().iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }
    /// Later requests (an answer read again) go through the same scripted replies.
    fn detached(&self) -> Option<Detached<FakeBody, ChatProviderError>> {
        let t = self.clone();
        Some(Rc::new(move |request: HttpRequest, secrets: Secrets| {
            let t = t.clone();
            async move { send(&t, &request, &secrets).await }.boxed_local()
        }))
    }
}

/// An HTTP provider of `kind` (model `m`, key `sk-test`) with `more` options.
pub fn provider(kind: &str, more: Value) -> Provider {
    let mut spec = serde_json::json!({"kind": kind, "model": "m", "apiKey": "sk-test"});
    if let (Some(o), Value::Object(m)) = (spec.as_object_mut(), more) {
        o.extend(m);
    }
    Provider::from_json(&spec.to_string()).expect("provider")
}

/// `provider` over `http`, with the default limits.
pub fn model<'a>(provider: &'a Provider, http: &FakeHttp) -> ProviderModel<'a, FakeHttp> {
    ProviderModel::new(provider, http.clone(), Limits::default())
}
