//! What the native tests of the turn share: tools that are Rust closures, timers the test
//! controls, a harness that runs one turn on `futures`' `LocalPool` and keeps what the wire and
//! the context saw; a scripted model (kosong's echo DSL) and a fake HTTP transport (`http`) under
//! the core's real providers; each wire format's streams (`streams`).
#![allow(dead_code)]

pub mod http;
pub mod streams;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::rc::Rc;

use futures::executor::{LocalPool, LocalSpawner};
use futures::future::LocalBoxFuture;
use futures::task::LocalSpawnExt;
use futures::FutureExt;
use serde_json::{json, Value};

use kosong_wasm::engine::error::ChatProviderError;
use kosong_wasm::engine::generate::{EventSource, Limits};
use kosong_wasm::engine::json::Arguments;
use kosong_wasm::engine::message::{Message, ToolCall};
use kosong_wasm::engine::model::{Model, Offline, Prepared, Provider, ProviderModel};
use kosong_wasm::engine::providers::{Prompt, ToolDefinition};
use kosong_wasm::engine::soul::agent::{AgentConfig, Env, Turn, TurnError, TurnTools, UserInput};
use kosong_wasm::engine::soul::approval::{ApprovalState, Approvals};
use kosong_wasm::engine::soul::context::SharedContext;
use kosong_wasm::engine::soul::wire::{UiSide, Wire, WireMessage};
use kosong_wasm::engine::step::ToolDispatch;
use kosong_wasm::engine::toolset::{ToolOutput, ToolResult, ToolReturnValue};

/// Lets other tasks run once (as a network read would).
pub async fn yield_now() {
    let mut done = false;
    futures::future::poll_fn(|cx| {
        if done {
            std::task::Poll::Ready(())
        } else {
            done = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    })
    .await
}

/// kosong's scripted echo provider as a model (the core's own scripted provider, no transport),
/// keeping how many messages of history each request was given.
pub struct Echo {
    pub provider: Provider,
    pub seen: RefCell<Vec<usize>>,
}

impl Echo {
    pub fn new<S: Into<String>>(scripts: impl IntoIterator<Item = S>) -> Echo {
        Echo { provider: Provider::scripted(scripts), seen: RefCell::default() }
    }
    fn model(&self) -> ProviderModel<'_, Offline> {
        ProviderModel::new(&self.provider, Offline, Limits::default())
    }
}

impl Model for Echo {
    type Request = Prepared;
    type Source = <ProviderModel<'static, Offline> as Model>::Source;
    fn model_name(&self) -> String {
        self.provider.model_name()
    }
    fn prepare(&self, prompt: &Prompt<'_>) -> Result<Prepared, ChatProviderError> {
        self.seen.borrow_mut().push(prompt.history.len());
        self.model().prepare(prompt)
    }
    fn open(&self, request: Prepared) -> LocalBoxFuture<'_, Result<Self::Source, ChatProviderError>> {
        async move { self.model().open(request).await }.boxed_local()
    }
}

pub type Handler = Rc<dyn Fn(&ToolCall, &Rc<Approvals>) -> LocalBoxFuture<'static, ToolReturnValue>>;

/// Tools by name; each counts its runs.
#[derive(Clone, Default)]
pub struct Tools {
    pub handlers: Rc<RefCell<HashMap<String, Handler>>>,
    pub runs: Rc<RefCell<Vec<String>>>,
    pub approvals: Rc<RefCell<Option<Rc<Approvals>>>>,
    /// Calls whose future was dropped before it finished (the glue aborts their signal then).
    pub dropped: Rc<RefCell<Vec<String>>>,
}

impl Tools {
    pub fn add(
        &self,
        name: &str,
        h: impl Fn(&ToolCall, &Rc<Approvals>) -> LocalBoxFuture<'static, ToolReturnValue> + 'static,
    ) {
        self.handlers.borrow_mut().insert(name.into(), Rc::new(h));
    }
    pub fn sync(&self, name: &str, f: impl Fn(&Value) -> String + 'static) {
        self.add(name, move |c, _| {
            let args: Value =
                serde_json::from_str(c.function.arguments.as_deref().unwrap_or("{}")).unwrap_or(Value::Null);
            let out = f(&args);
            async move { ToolReturnValue::ok(ToolOutput::Text(out), "", "") }.boxed_local()
        });
    }
}

pub struct DropGuard(pub Option<(String, Rc<RefCell<Vec<String>>>)>);
impl DropGuard {
    fn disarm(&mut self) {
        self.0 = None;
    }
}
impl Drop for DropGuard {
    fn drop(&mut self) {
        if let Some((id, log)) = self.0.take() {
            log.borrow_mut().push(id);
        }
    }
}

impl ToolDispatch for Tools {
    fn is_eager(&self, _name: &str) -> bool {
        true
    }
    fn dispatch(&self, call: &ToolCall, _args: &Arguments<'_>) -> LocalBoxFuture<'static, ToolResult> {
        self.runs.borrow_mut().push(call.function.name.clone());
        let id = call.id.clone();
        let h = self.handlers.borrow().get(&call.function.name).cloned();
        let approvals = self.approvals.borrow().clone().unwrap();
        let fut = match h {
            Some(h) => h(call, &approvals),
            None => {
                let rv = ToolReturnValue::not_found(&call.function.name);
                async move { rv }.boxed_local()
            }
        };
        let mut guard = DropGuard(Some((id.clone(), self.dropped.clone())));
        async move {
            let rv = fut.await;
            guard.disarm();
            ToolResult { tool_call_id: id, return_value: rv }
        }
        .boxed_local()
    }
}

impl TurnTools for Tools {
    fn definitions(&self) -> Vec<ToolDefinition> {
        self.handlers
            .borrow()
            .keys()
            .map(|n| ToolDefinition { name: n.clone(), description: String::new(), parameters: json!({}) })
            .collect()
    }
}

/// Timers: each sleep is recorded; it resolves at once unless `hold` is set.
pub struct FakeEnv {
    pub spawner: LocalSpawner,
    pub sleeps: RefCell<Vec<f64>>,
    pub hold: Cell<bool>,
    /// The structured outputs the turn handed to the validator, and what it answers (`Some`: refused).
    pub outputs: RefCell<Vec<String>>,
    pub refuse_output: RefCell<Option<String>>,
    /// What the turn's sub-agents used (a test's sub-agent tool adds to it).
    pub subagent_usage: Rc<RefCell<Option<kosong_wasm::engine::message::TokenUsage>>>,
}

impl FakeEnv {
    pub fn new(spawner: LocalSpawner) -> FakeEnv {
        FakeEnv {
            spawner,
            sleeps: RefCell::default(),
            hold: Cell::new(false),
            outputs: RefCell::default(),
            refuse_output: RefCell::default(),
            subagent_usage: Rc::default(),
        }
    }
}

impl Env for FakeEnv {
    fn sleep(&self, ms: f64) -> LocalBoxFuture<'static, ()> {
        self.sleeps.borrow_mut().push(ms);
        if self.hold.get() {
            futures::future::pending().boxed_local()
        } else {
            futures::future::ready(()).boxed_local()
        }
    }
    fn random(&self) -> f64 {
        0.0
    }
    fn spawn(&self, task: LocalBoxFuture<'static, ()>) {
        self.spawner.spawn_local(task).unwrap();
    }
    fn subagent_usage(&self) -> Option<kosong_wasm::engine::message::TokenUsage> {
        *self.subagent_usage.borrow()
    }
    fn accept_output(&self, json: &str) -> Result<(), String> {
        self.outputs.borrow_mut().push(json.to_owned());
        self.refuse_output.borrow().clone().map_or(Ok(()), Err)
    }
}

pub struct Harness {
    pub pool: LocalPool,
    pub env: Rc<FakeEnv>,
    pub config: AgentConfig,
    pub context: SharedContext,
    pub tools: Tools,
    pub approval_state: Rc<RefCell<ApprovalState>>,
    pub lines: Rc<RefCell<Vec<String>>>,
}

pub struct Outcome {
    pub merged: Vec<WireMessage>,
    pub raw: Vec<WireMessage>,
    pub result: Result<(), TurnError<kosong_wasm::engine::error::ChatProviderError>>,
}

impl Outcome {
    pub fn kinds(&self) -> Vec<String> {
        self.merged.iter().map(|m| m.kind().to_owned()).collect()
    }
    pub fn payloads(&self, kind: &str) -> Vec<Value> {
        self.merged
            .iter()
            .filter(|m| m.kind() == kind)
            .map(|m| serde_json::to_value(m).unwrap()["payload"].clone())
            .collect()
    }
}

impl Harness {
    pub fn new() -> Harness {
        let pool = LocalPool::new();
        let env = Rc::new(FakeEnv::new(pool.spawner()));
        let context = SharedContext::default();
        let lines = Rc::new(RefCell::new(Vec::new()));
        let l2 = lines.clone();
        context.set_sink(Some(Box::new(move |w| {
            if let kosong_wasm::engine::soul::context::ContextWrite::Line(l) = w {
                l2.borrow_mut().push(l.to_owned())
            }
            true
        })));
        Harness {
            pool,
            env,
            config: AgentConfig::default(),
            context,
            tools: Tools::default(),
            approval_state: Rc::new(RefCell::new(ApprovalState::new(false))),
            lines,
        }
    }

    /// Runs one turn; `ui` sees each merged message as it is read and may answer on the wire.
    pub fn turn<M>(
        &mut self,
        model: Option<&M>,
        input: &str,
        cancel: impl Future<Output = ()> + 'static,
        ui: impl Fn(&WireMessage, &Wire) + 'static,
    ) -> Outcome
    where
        M: Model,
        M::Source: EventSource<Error = ChatProviderError>,
    {
        let wire = Wire::new();
        let merged_side = wire.ui_side(true);
        let raw_side = wire.ui_side(false);
        let ids = Cell::new(0);
        let approvals = Rc::new(Approvals::new(
            wire.clone(),
            self.approval_state.clone(),
            self.config.name.clone(),
            Rc::new(move || {
                ids.set(ids.get() + 1);
                format!("req-{}", ids.get())
            }),
        ));
        *self.tools.approvals.borrow_mut() = Some(approvals.clone());
        let merged: Rc<RefCell<Vec<WireMessage>>> = Rc::default();
        let ui_task = {
            let (side, merged, wire) = (merged_side.clone(), merged.clone(), wire.clone());
            async move {
                while let Some(m) = UiSide::receive(&side).await {
                    ui(&m, &wire);
                    merged.borrow_mut().push(m);
                }
            }
        };
        self.pool.spawner().spawn_local(ui_task).unwrap();
        let turn = Turn {
            config: &self.config,
            context: &self.context,
            model,
            tools: &self.tools,
            wire: &wire,
            approvals: &approvals,
            env: &*self.env,
        };
        let result = self.pool.run_until(async {
            let r = turn.run(UserInput::Text(input.into()), cancel).await;
            wire.shutdown();
            r
        });
        self.pool.run_until_stalled();
        let merged = merged.borrow().clone();
        Outcome { merged, raw: raw_side.take_ready(), result }
    }

    pub fn history(&self) -> Vec<Message> {
        self.context.read(|c| c.history().to_vec())
    }
}

pub fn never() -> impl Future<Output = ()> {
    futures::future::pending()
}

pub fn call(id: &str, name: &str, args: Value) -> String {
    format!("tool_call: {}", json!({"id": id, "name": name, "arguments": args.to_string()}))
}

pub fn plus(h: &Harness) {
    h.tools.sync("plus", |a| (a["a"].as_i64().unwrap_or(0) + a["b"].as_i64().unwrap_or(0)).to_string());
}
