//! The step engine: one generation whose tool calls are handed to the toolset the moment
//! the stream shows each complete, while the model keeps streaming.
//!
//! Each dispatched call becomes a shared future driven by a task of its own (so
//! `on_tool_result` fires as each tool finishes, in completion order), and the results are
//! gathered in call order. A tool whose toolset says it is not eager waits until the stream
//! has ended well. If the generation fails, every driver task is dropped at once and the
//! error is returned without waiting on any tool: stopping the tools themselves (their
//! `AbortSignal`) is the caller's part, since only it knows how.

use std::cell::RefCell;
use std::rc::Rc;

use futures::future::{AbortHandle, Abortable, LocalBoxFuture, Shared};
use futures::FutureExt;

use crate::core::generate::{generate, CallbackResult, EventSource, GenerateOutput};
use crate::core::message::ToolCall;
use crate::core::toolset::{ToolOutput, ToolResult, ToolReturnValue};

/// Where tool calls go: kosong's `Toolset` protocol as the engine sees it.
pub trait ToolDispatch {
    /// May the tool start mid-stream? (`eager: false` tools wait for the stream's end.)
    fn is_eager(&self, name: &str) -> bool;
    /// Starts the call; the future yields its result (tool failures are results, not errors).
    fn dispatch(&self, call: &ToolCall) -> LocalBoxFuture<'static, ToolResult>;
    /// The engine settled a call itself because its arguments never became JSON. For a log
    /// line: the call's name, id and size, never its contents.
    fn on_malformed_arguments(&self, _call: &ToolCall) {}
}

/// The result for a complete call whose arguments are not JSON: the tool does not run, and
/// the model is told to send the call again. `None` when the arguments are fine (missing
/// or empty arguments mean `{}`, as in kosong; whitespace alone is not JSON).
pub fn malformed_arguments_result(call: &ToolCall) -> Option<ToolResult> {
    let raw = call.function.arguments.as_deref().filter(|a| !a.is_empty())?;
    if crate::core::providers::fast_delta::accepts_json(raw) {
        return None;
    }
    let err = serde_json::from_str::<serde::de::IgnoredAny>(raw).err()?;
    Some(ToolResult {
        tool_call_id: call.id.clone(),
        return_value: ToolReturnValue::error(
            &format!(
                "Error parsing JSON arguments: {err}. The arguments of this call were not valid JSON, \
                 so the tool did not run; send the call again with complete, valid JSON arguments."
            ),
            "Invalid arguments",
            ToolOutput::Text(String::new()),
        ),
    })
}

pub type ToolFuture = Shared<LocalBoxFuture<'static, ToolResult>>;
pub type Spawner<'a> = &'a dyn Fn(LocalBoxFuture<'static, ()>);
pub type ToolResultCallback = Rc<dyn Fn(&ToolResult)>;

/// The driver tasks of a step's tools. Dropping it stops them (the tools' own work is
/// stopped through their signal by whoever gave them one).
#[derive(Default)]
pub struct Drivers(Vec<AbortHandle>);

impl Drop for Drivers {
    fn drop(&mut self) {
        for h in &self.0 {
            h.abort();
        }
    }
}

/// A finished generation and its tools, started or running.
pub struct StepOutput {
    pub generated: GenerateOutput,
    /// One future per tool call of the message, in call order.
    pub results: Vec<ToolFuture>,
    /// Keep alive while the results matter; drop to stop waiting on the tools.
    pub drivers: Drivers,
}

/// Results in call order, whatever order the tools finished in.
pub async fn collect_results(results: Vec<ToolFuture>) -> Vec<ToolResult> {
    futures::future::join_all(results).await
}

struct Started {
    id: String,
    future: ToolFuture,
}

fn start(
    dispatch: &impl ToolDispatch,
    call: &ToolCall,
    spawn: Spawner<'_>,
    on_tool_result: &Option<ToolResultCallback>,
    drivers: &mut Drivers,
) -> ToolFuture {
    let fut = match malformed_arguments_result(call) {
        Some(r) => {
            dispatch.on_malformed_arguments(call);
            futures::future::ready(r).boxed_local()
        }
        None => dispatch.dispatch(call),
    };
    let cb = on_tool_result.clone();
    let shared = async move {
        let r = fut.await;
        if let Some(cb) = cb {
            cb(&r);
        }
        r
    }
    .boxed_local()
    .shared();
    // A tool that finishes at once (a synchronous handler) reports its result now, before
    // the stream goes on; any other is driven by a task of its own.
    if shared.clone().now_or_never().is_some() {
        return shared;
    }
    let (handle, reg) = AbortHandle::new_pair();
    drivers.0.push(handle);
    spawn(Abortable::new(shared.clone(), reg).map(|_| ()).boxed_local());
    shared
}

/// Runs one step. `on_part` sees every streamed part exactly as it came.
pub async fn step<S, D, FP>(
    source: &mut S,
    dispatch: &D,
    spawn: Spawner<'_>,
    on_part: FP,
    on_tool_result: Option<ToolResultCallback>,
) -> Result<StepOutput, S::Error>
where
    S: EventSource,
    D: ToolDispatch,
    FP: crate::core::generate::PartSink<S::Error>,
{
    let started: RefCell<Vec<Started>> = RefCell::new(Vec::new());
    let drivers: RefCell<Drivers> = RefCell::new(Drivers::default());
    let outcome = generate(source, on_part, |call: &ToolCall| -> CallbackResult<S::Error> {
        if dispatch.is_eager(&call.function.name) {
            let future = start(dispatch, call, spawn, &on_tool_result, &mut drivers.borrow_mut());
            started.borrow_mut().push(Started { id: call.id.clone(), future });
        }
        Ok(None)
    })
    .await;
    let mut drivers = drivers.into_inner();
    // On an error, returning drops `drivers`, which stops every driver task.
    let generated = outcome?;
    // The calls started early, by id (latest last), so each call of the message finds its own
    // in O(1) however many there are.
    let mut early: std::collections::HashMap<String, Vec<ToolFuture>> = std::collections::HashMap::new();
    for s in started.into_inner().into_iter().rev() {
        early.entry(s.id).or_default().push(s.future);
    }
    let mut results = Vec::new();
    for call in generated.message.tool_calls.as_deref().unwrap_or(&[]) {
        let future = match early.get_mut(&call.id).and_then(Vec::pop) {
            Some(f) => f,
            None => start(dispatch, call, spawn, &on_tool_result, &mut drivers),
        };
        results.push(future);
    }
    Ok(StepOutput { generated, results, drivers })
}
