//! The step engine: one generation whose tool calls are handed to the toolset the moment
//! the stream shows each complete, while the model keeps streaming.
//!
//! Each dispatched call becomes a shared future driven by a task of its own (so
//! `on_tool_result` fires as each tool finishes, in completion order), and the results are
//! gathered in call order. A tool whose toolset says it is not eager waits until the stream
//! has ended well.
//!
//! **Salvage.** If the generation fails after at least one call was handed on, the round is
//! kept: the message is what arrived (text, thinking, server-tool parts, every call the stream
//! showed), the started tools are awaited (never aborted: the caller's signal is what stops
//! them), and every call that did not start — its input cut off, or a tool that waits for the
//! stream's end — is answered with an error result telling the model to send it again; such a
//! call never runs. The error comes back with that round ([`StepFailure::salvaged`]). Before
//! any call was handed on, the error comes back alone and nothing ran. If the step's future is
//! dropped (an abort), every driver task is dropped with it: stopping the tools themselves
//! (their `AbortSignal`) is the caller's part, since only it knows how.

use std::cell::RefCell;
use std::rc::Rc;

use futures::future::Either;
use futures::future::{AbortHandle, Abortable, LocalBoxFuture, Shared};
use futures::FutureExt;

use crate::engine::generate::{generate_in, CallbackResult, EventSource, GenerateOutput, MessageAssembler};
use crate::engine::json::Arguments;
use crate::engine::message::ToolCall;
use crate::engine::toolset::{ToolOutput, ToolResult, ToolReturnValue};

/// Where tool calls go: kosong's `Toolset` protocol as the engine sees it.
pub trait ToolDispatch {
    /// May the tool start mid-stream? (`eager: false` tools wait for the stream's end.)
    fn is_eager(&self, name: &str) -> bool;
    /// May the tool run again for a call it may already have run (its runtime died while it ran)?
    /// A tool says so when running it twice with the same call id does what running it once does.
    fn is_idempotent(&self, _name: &str) -> bool {
        false
    }
    /// The call, whose arguments the engine has checked (once, as the call completed); the
    /// future yields its result (tool failures are results, not errors). The tool starts at the
    /// future's first poll, not before: an agent turn in a session holds a call back until the
    /// call is durably stored (the engine polls at once otherwise).
    fn dispatch(&self, call: &ToolCall, args: &Arguments<'_>) -> LocalBoxFuture<'static, ToolResult>;
    /// Must the call be approved before its handler starts (`needsApproval`)? `None`: no. The
    /// future answers (a tool's own function may take its time); `Err`: that function failed.
    /// Only an agent turn asks (it has a wire); a plain step's toolset refuses such a tool itself.
    fn needs_approval(
        &self,
        _call: &ToolCall,
        _args: &Arguments<'_>,
    ) -> Option<LocalBoxFuture<'static, Result<bool, String>>> {
        None
    }
    /// The engine settled a call itself because its arguments never became JSON. For a log
    /// line: the call's name, id and size, never its contents.
    fn on_malformed_arguments(&self, _call: &ToolCall) {}
    /// A fragment of this call's arguments came after the call was handed on with the arguments
    /// it had (`bytes` of it): dropped, so the history holds what ran. For a log line.
    fn on_late_fragment(&self, _call: &ToolCall, _bytes: usize) {}
    /// The stream broke before this call could start, so the engine answered it itself
    /// ([`cut_off_result`]); `chars` is how much of its input had arrived. For a log line: the
    /// call's name, id and size, never its contents.
    fn on_cut_off(&self, _call: &ToolCall, _chars: usize) {}
    /// The result the caller has for this very call already (same id, function and arguments: a
    /// recovered turn's call that may have run before its runtime died), which a broken round
    /// answers it with instead of "did not run".
    fn had(&self, _call: &ToolCall) -> Option<ToolResult> {
        None
    }
}

/// The result for a call the stream showed but broke before it could start: the tool did not
/// run, and the model is told to send the call again. `complete`: its input had arrived whole
/// (a tool that starts only after the stream ends well); otherwise it was cut off.
pub fn cut_off_result(call: &ToolCall, complete: bool) -> ToolResult {
    let message = if complete {
        "The tool did not run: the model's answer broke off before it ended, and this tool runs only \
         after a whole answer. Call it again if it is still needed."
            .to_owned()
    } else {
        let chars = call.function.arguments.as_deref().map_or(0, |a| a.chars().count());
        format!(
            "The tool did not run: the model's answer broke off while this call's input was streaming \
             ({chars} characters of it arrived). Call the tool again with its complete input."
        )
    };
    ToolResult {
        tool_call_id: call.id.clone(),
        return_value: ToolReturnValue::error(&message, "Input cut off", ToolOutput::Text(String::new())),
    }
}

/// A round whose stream broke after a call was handed on, as it ended: what was generated (the
/// message as far as it arrived) and one settled result per call, in call order.
#[derive(Clone, Debug, PartialEq)]
pub struct Salvaged {
    pub generated: GenerateOutput,
    pub results: Vec<ToolResult>,
}

/// Why a step failed: the error, and the salvaged round when a call had been handed on.
#[derive(Debug)]
pub struct StepFailure<E> {
    pub error: E,
    pub salvaged: Option<Salvaged>,
}

impl<E> From<E> for StepFailure<E> {
    fn from(error: E) -> Self {
        StepFailure { error, salvaged: None }
    }
}

/// The result for a complete call whose arguments are not JSON ([`Arguments::check`] said why):
/// the tool does not run, and the model is told to send the call again. kosong's parse error
/// ([`ToolReturnValue::parse_error`], the one wording a toolset's `handle` gives too) with that
/// request after it.
pub fn malformed_arguments_result(call: &ToolCall, err: &str) -> ToolResult {
    ToolResult {
        tool_call_id: call.id.clone(),
        return_value: ToolReturnValue::parse_error(&format!(
            "{err}. The arguments of this call were not valid JSON, so the tool did not run; send the \
             call again with complete, valid JSON arguments."
        )),
    }
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

/// The result for a call past [`crate::engine::generate::Limits::max_tool_calls_per_step`].
pub fn too_many_calls_result(call: &ToolCall, limit: usize) -> ToolResult {
    ToolResult {
        tool_call_id: call.id.clone(),
        return_value: ToolReturnValue::error(
            &format!(
                "The tool did not run: this answer made more tool calls than one step runs ({limit}, \
                 limits.maxToolCallsPerStep). Make fewer calls at a time."
            ),
            "Too many calls",
            ToolOutput::Text(String::new()),
        ),
    }
}

/// Calls a step has started, against its cap.
struct CallCap {
    started: usize,
    limit: usize,
}

/// `parsed`: the stream's decoder parsed the call's arguments as they are (they are not checked
/// again: on a tool's way to its handler, a check of 4 KB of arguments is a good part of the time).
fn start(
    dispatch: &impl ToolDispatch,
    call: &ToolCall,
    parsed: bool,
    spawn: Spawner<'_>,
    on_tool_result: &Option<ToolResultCallback>,
    drivers: &mut Drivers,
    cap: &mut CallCap,
) -> ToolFuture {
    let checked = match call.function.arguments.as_deref() {
        Some(text) if parsed => Ok(Arguments::parsed(text)),
        raw => Arguments::check(raw),
    };
    let fut = match checked {
        Err(e) => {
            dispatch.on_malformed_arguments(call);
            futures::future::ready(malformed_arguments_result(call, &e)).boxed_local()
        }
        Ok(_) if cap.started >= cap.limit => {
            futures::future::ready(too_many_calls_result(call, cap.limit)).boxed_local()
        }
        Ok(args) => {
            cap.started += 1;
            dispatch.dispatch(call, &args)
        }
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
) -> Result<StepOutput, StepFailure<S::Error>>
where
    S: EventSource,
    D: ToolDispatch,
    FP: crate::engine::generate::PartSink<S::Error>,
{
    step_in(source, &RefCell::new(MessageAssembler::new()), dispatch, spawn, on_part, on_tool_result).await
}

/// [`step`], assembling into `asm`, which the caller keeps: if the step's future is dropped (an
/// abort), it still holds the round as far as it got.
pub async fn step_in<S, D, FP>(
    source: &mut S,
    asm: &RefCell<MessageAssembler>,
    dispatch: &D,
    spawn: Spawner<'_>,
    on_part: FP,
    on_tool_result: Option<ToolResultCallback>,
) -> Result<StepOutput, StepFailure<S::Error>>
where
    S: EventSource,
    D: ToolDispatch,
    FP: crate::engine::generate::PartSink<S::Error>,
{
    let started: RefCell<Vec<Started>> = RefCell::new(Vec::new());
    let drivers: RefCell<Drivers> = RefCell::new(Drivers::default());
    let cap = RefCell::new(CallCap { started: 0, limit: source.limits().max_tool_calls_per_step });
    // A message read again (a recovered turn's) holds calls that are whole already: handed on
    // first, as they would have been when they came.
    let whole = asm.borrow().whole_before_reading_again();
    for call in whole {
        let future =
            start(dispatch, &call, false, spawn, &on_tool_result, &mut drivers.borrow_mut(), &mut cap.borrow_mut());
        started.borrow_mut().push(Started { id: call.id, future });
    }
    let outcome = generate_in(source, asm, on_part, |call: &ToolCall| -> CallbackResult<S::Error> {
        if dispatch.is_eager(&call.function.name) {
            let parsed = asm.borrow().arguments_parsed(call);
            let future =
                start(dispatch, call, parsed, spawn, &on_tool_result, &mut drivers.borrow_mut(), &mut cap.borrow_mut());
            started.borrow_mut().push(Started { id: call.id.clone(), future });
        }
        Ok(None)
    })
    .await;
    let mut drivers = drivers.into_inner();
    let generated = match outcome {
        Ok(g) => g,
        // Void only when nothing may have run: a message read again (a recovered turn's) holds
        // calls a dead runtime may have started, and is salvaged.
        Err(error) if started.borrow().is_empty() && !asm.borrow().holds_calls_read_again() => {
            return Err(StepFailure { error, salvaged: None })
        }
        Err(error) => {
            let salvaged = salvage(source, asm, dispatch, started.into_inner(), on_tool_result.as_ref()).await;
            drop(drivers);
            return Err(StepFailure { error, salvaged: Some(salvaged) });
        }
    };
    for (id, bytes) in &generated.late_fragments {
        if let Some(call) = generated.message.tool_calls.iter().flatten().find(|c| c.id == *id) {
            dispatch.on_late_fragment(call, *bytes);
        }
    }
    let mut early = by_id(started.into_inner());
    let mut results = Vec::new();
    for call in generated.message.tool_calls.as_deref().unwrap_or(&[]) {
        let future = match early.get_mut(&call.id).and_then(Vec::pop) {
            Some(f) => f,
            None => start(dispatch, call, false, spawn, &on_tool_result, &mut drivers, &mut cap.borrow_mut()),
        };
        results.push(future);
    }
    Ok(StepOutput { generated, results, drivers })
}

/// The calls started early, by id (latest last), so each call of the message finds its own in
/// O(1) however many there are.
fn by_id(started: Vec<Started>) -> std::collections::HashMap<String, Vec<ToolFuture>> {
    let mut early: std::collections::HashMap<String, Vec<ToolFuture>> = std::collections::HashMap::new();
    for s in started.into_iter().rev() {
        early.entry(s.id).or_default().push(s.future);
    }
    early
}

/// Closes a broken round (see the module's docs): calls that did not start are answered at
/// once, then the started ones are awaited; results in call order.
async fn salvage<S: EventSource, D: ToolDispatch>(
    source: &S,
    asm: &RefCell<MessageAssembler>,
    dispatch: &D,
    started: Vec<Started>,
    on_tool_result: Option<&ToolResultCallback>,
) -> Salvaged {
    let (message, completed) = {
        let a = asm.borrow();
        let completed: Vec<bool> = (0..a.calls().len()).map(|i| a.is_complete(i)).collect();
        (a.message_so_far(), completed)
    };
    let mut early = by_id(started);
    let mut pending: Vec<Either<ToolFuture, ToolResult>> = Vec::new();
    for (call, complete) in message.tool_calls.iter().flatten().zip(completed) {
        match early.get_mut(&call.id).and_then(Vec::pop) {
            Some(f) => pending.push(Either::Left(f)),
            None => {
                let r = match dispatch.had(call) {
                    Some(r) => r,
                    None => {
                        dispatch.on_cut_off(call, call.function.arguments.as_deref().map_or(0, |a| a.chars().count()));
                        cut_off_result(call, complete)
                    }
                };
                if let Some(cb) = on_tool_result {
                    cb(&r);
                }
                pending.push(Either::Right(r));
            }
        }
    }
    let mut results = Vec::with_capacity(pending.len());
    for p in pending {
        results.push(match p {
            Either::Left(f) => f.await,
            Either::Right(r) => r,
        });
    }
    let late_fragments = asm.borrow_mut().take_late();
    let generated = GenerateOutput {
        id: source.id(),
        message,
        usage: source.usage(),
        finish_reason: source.finish_reason(),
        late_fragments,
    };
    Salvaged { generated, results }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::error::ChatProviderError;
    use crate::engine::generate::{ByteSource, SseEventSource};
    use crate::engine::json::scan::ACCEPTS_JSON_CALLS;
    use crate::engine::message::StreamedMessagePart;
    use crate::engine::providers::openai_chat::OpenAIChatConfig;
    use crate::engine::toolset::{ToolOutput, ToolReturnValue};
    use std::rc::Rc;

    struct Body(Option<Vec<u8>>);
    impl ByteSource for Body {
        type Error = ChatProviderError;
        async fn read_into(&mut self, buf: &mut Vec<u8>) -> Result<bool, ChatProviderError> {
            match self.0.take() {
                Some(b) => {
                    *buf = b;
                    Ok(true)
                }
                None => Ok(false),
            }
        }
    }

    /// Records the arguments each call was started with.
    struct Seen(Rc<RefCell<Vec<String>>>);
    impl ToolDispatch for Seen {
        fn is_eager(&self, _name: &str) -> bool {
            true
        }
        fn dispatch(&self, call: &ToolCall, args: &Arguments<'_>) -> LocalBoxFuture<'static, ToolResult> {
            self.0.borrow_mut().push(args.text().to_owned());
            let r = ToolResult {
                tool_call_id: call.id.clone(),
                return_value: ToolReturnValue::ok(ToolOutput::Text("ok".into()), "", ""),
            };
            futures::future::ready(r).boxed_local()
        }
    }

    /// A Chat Completions call whose arguments the decoder parsed to find it complete (a later
    /// call began) starts without a second check; a call completed by the stream's end, or whose
    /// arguments did not parse, is checked by the step — each call's arguments are checked once.
    #[test]
    fn arguments_the_decoder_parsed_are_not_checked_again() {
        let chunk = |delta: &str| format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{delta}}}]}}\n\n");
        let begin = |i: usize, id: &str| {
            chunk(&format!("{{\"tool_calls\":[{{\"index\":{i},\"id\":\"{id}\",\"function\":{{\"name\":\"f\",\"arguments\":\"\"}}}}]}}"))
        };
        let frag = |i: usize, a: &str| {
            chunk(&format!("{{\"tool_calls\":[{{\"index\":{i},\"function\":{{\"arguments\":\"{a}\"}}}}]}}"))
        };
        let mut body = String::new();
        body += &begin(0, "a");
        body += &frag(0, "{\\\"x\\\": [1, ");
        body += &frag(0, "2]}");
        body += &begin(1, "b");
        body += &frag(1, "{\\\"x\\\": tru}");
        body += &begin(2, "c");
        body += &frag(2, "{\\\"y\\\": 3}");
        body += "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n";
        let seen = Rc::new(RefCell::new(Vec::new()));
        let dispatch = Seen(seen.clone());
        let mut src = SseEventSource::new(Body(Some(body.into_bytes())), OpenAIChatConfig::for_model("m").decoder());
        let spawn = |_: LocalBoxFuture<'static, ()>| panic!("every tool here finishes at once");
        ACCEPTS_JSON_CALLS.with(|n| n.set(0));
        let out =
            futures::executor::block_on(step(&mut src, &dispatch, &spawn, |_: &StreamedMessagePart| Ok(None), None));
        let out = out.unwrap_or_else(|f| panic!("{:?}", f.error));
        let results = futures::executor::block_on(futures::future::join_all(out.results));
        let errors: Vec<_> = results.iter().map(|r| r.return_value.is_error).collect();
        assert_eq!(errors, [false, true, false]);
        assert_eq!(*seen.borrow(), ["{\"x\": [1, 2]}", "{\"y\": 3}"]);
        // a: parsed by the decoder as b began; b: tried by the decoder as c began (it does not
        // parse), then checked by the step (malformed); c: completed by the stream's end, checked
        // by the step.
        assert_eq!(ACCEPTS_JSON_CALLS.with(|n| n.get()), 4);
    }
}
