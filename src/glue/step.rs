//! `runGenerate` and `runStep`: kosong's `generate` and `step` for the JS layer (`js/step.js`),
//! over the core's model of the provider. The glue's part: reading the call's options, racing the
//! work against the caller's signal, and the results as JS values.

use std::rc::Rc;

use futures::future::{select, Either, LocalBoxFuture};
use futures::FutureExt;
use js_sys::{Array, Function, Object, Promise, Reflect};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::{future_to_promise, spawn_local};

use super::error::{type_error, GlueError};
use super::output::OutputOption;
use super::parts::{call_json_hook, PartBatch};
use super::provider::{Members, ProviderCore};
use super::signals::AbortWatch;
use super::sys::{self, AbortController, AbortSignal};
use super::tools::{self, JsToolset};
use super::transport::{BodySource, FetchTransport};
use super::{get, read_limits};
use crate::engine::generate::{generate, GenerateOutput, Limits};
use crate::engine::message::{ContentPart, Message, ToolCall};
use crate::engine::model::fallback::open_with_fallback;
use crate::engine::model::{Fallback, Model, ModelSource, ProviderModel};
use crate::engine::output::answer_json;
use crate::engine::providers::{Prompt, ToolDefinition};
use crate::engine::step::{collect_results, step, StepFailure, ToolResultCallback};
use crate::engine::toolset::ToolResult;

/// What one call runs over: the provider's members (one, unless it is a `FallbackProvider`).
type CallModel<'a> = Fallback<ProviderModel<'a, FetchTransport>>;

/// Options read from the JS layer's hooks object.
struct Hooks {
    on_part: Option<Function>,
    on_tool_call: Option<Function>,
    on_tool_result: Option<Function>,
    signal: Option<AbortSignal>,
    toolset: JsValue,
    /// The toolset's registry id when it is a `SimpleToolset`.
    simple: Option<u32>,
    warn: Option<Function>,
    limits: Limits,
    output: Option<OutputOption>,
    tool_timeouts: crate::engine::toolset::ToolTimeouts,
}

impl Hooks {
    fn read(hooks: &JsValue) -> Result<Hooks, JsValue> {
        let func = |k: &str| get(hooks, k).and_then(|v| v.dyn_into::<Function>().ok());
        let limits = read_limits(get(hooks, "limits"), "options")?;
        Ok(Hooks {
            on_part: func("onPart"),
            on_tool_call: func("onToolCall"),
            on_tool_result: func("onToolResult"),
            signal: get(hooks, "signal").map(|s| s.unchecked_into()),
            toolset: get(hooks, "toolset").unwrap_or(JsValue::UNDEFINED),
            simple: get(hooks, "simple").and_then(|v| v.as_f64()).map(|v| v as u32),
            warn: func("warn"),
            limits,
            output: OutputOption::read(hooks, "options")?,
            tool_timeouts: tools::read_tool_timeouts(get(hooks, "toolTimeoutMs"), "step: options")?,
        })
    }
}

/// Races `fut` against the caller's signal. On abort or error the tools' controller is aborted
/// (every started tool's signal); the request closes its connection when its future is dropped.
async fn guarded<T>(
    fut: LocalBoxFuture<'_, Result<T, GlueError>>,
    watch: Option<&AbortWatch>,
    tools_ctrl: &AbortController,
) -> Result<T, JsValue> {
    let outcome = match watch {
        Some(w) => match select(fut, Box::pin(w.fired())).await {
            Either::Left((r, _)) => r.map_err(GlueError::into_js),
            Either::Right((reason, _)) => Err(reason),
        },
        None => fut.await.map_err(GlueError::into_js),
    };
    if let Err(reason) = &outcome {
        tools_ctrl.abort_with_reason(reason);
    }
    outcome
}

/// Which member of a fallback provider answered (`answeredBy`, its index; `step.js` gives the
/// provider itself).
fn set_answered_by(obj: &Object, model: &CallModel<'_>) {
    let _ = Reflect::set(obj, &JsValue::from_str("answeredBy"), &JsValue::from(model.active() as u32));
}

/// `result_object`, with `output` (the answer's structured output, checked) when one was asked
/// for and the answer carries it; a broken one is the `malformed_output` error.
fn result_with_output(out: GenerateOutput, output: Option<&OutputOption>) -> Result<Object, GlueError> {
    let checked = output.map(|opt| {
        answer_json(&out.message).map_err(GlueError::from).and_then(|json| json.map(|j| opt.accept(j)).transpose())
    });
    let value = match checked {
        Some(Ok(value)) => value,
        None => None,
        // An answer that calls tools is not the final one: its text need not be the output
        // (and its tools have started).
        Some(Err(_)) if out.message.tool_calls.as_ref().is_some_and(|c| !c.is_empty()) => None,
        Some(Err(e)) => return Err(e),
    };
    let o = result_object(out);
    if let Some(value) = value {
        let _ = Reflect::set(&o, &JsValue::from_str("output"), &value);
    }
    Ok(o)
}

/// `{id, message (JSON), usage, finishReason}`, and `content` when the message's content is one
/// plain text (the usual answer): that text crosses as a string of its own and `message` holds
/// `""` in its place (`step.js`' `messageOf` puts it back), so the answer's text is neither
/// escaped into JSON here nor parsed out of it there (220 KB of text: about half a millisecond).
/// The tool calls' arguments cross the same way, as `callArguments` (call order; `undefined` for
/// a call without; `null` in `message`): they are JSON text with a quote every few characters,
/// and escaping them into the message and parsing them back out was ~6% of a step of 8 calls of
/// 4 KB.
pub fn result_object(mut out: GenerateOutput) -> Object {
    let o = Object::new();
    let set = |k: &str, v: JsValue| {
        let _ = Reflect::set(&o, &JsValue::from_str(k), &v);
    };
    set("id", out.id.as_deref().map(JsValue::from_str).unwrap_or(JsValue::NULL));
    let text = match out.message.content.as_mut_slice() {
        [ContentPart::Text { text, extras: None }] => Some(std::mem::take(text)),
        _ => None,
    };
    let arguments = Array::new();
    for c in out.message.tool_calls.iter_mut().flatten() {
        arguments.push(&c.function.arguments.take().into());
    }
    set("message", JsValue::from_str(&serde_json::to_string(&out.message).unwrap_or_default()));
    if let Some(text) = text {
        set("content", JsValue::from_str(&text));
    }
    set("callArguments", arguments.into());
    set("usage", out.usage.map(|u| super::convert::to_js(&u)).unwrap_or(JsValue::NULL));
    set("finishReason", out.finish_reason.as_deref().map(JsValue::from_str).unwrap_or(JsValue::NULL));
    o
}

/// What one call of the engine works with: its inputs, the provider with its transport, the
/// tools' controller, and the watch on the caller's signal.
struct Call {
    members: Members,
    system_prompt: String,
    tools: Vec<ToolDefinition>,
    history: Vec<Message>,
    hooks: Hooks,
    tools_ctrl: AbortController,
    watch: Option<AbortWatch>,
}

impl Call {
    /// Reads the inputs (`tools`: the definitions as JSON text, or the toolset's when `None`); a
    /// signal that has already aborted rejects with its reason at once.
    fn begin(
        provider: &ProviderCore,
        system_prompt: String,
        tools: Option<&str>,
        history: &str,
        hooks: JsValue,
    ) -> Result<(Call, Option<JsToolset>), JsValue> {
        let hooks = Hooks::read(&hooks)?;
        if let Some(s) = hooks.signal.as_ref().filter(|s| s.aborted()) {
            return Err(s.reason());
        }
        let tools_ctrl = sys::abort_controller()?;
        let bad = |what: &str, e: &dyn std::fmt::Display| -> JsValue { type_error(&format!("invalid {what}: {e}")) };
        let (tools, toolset) = match tools {
            Some(t) => (serde_json::from_str::<Vec<ToolDefinition>>(t).map_err(|e| bad("tools", &e))?, None),
            None => {
                let toolset = JsToolset::new(
                    hooks.toolset.clone(),
                    hooks.simple,
                    tools::ToolSignals::Shared(tools_ctrl.signal()),
                    hooks.warn.clone(),
                    None,
                    hooks.tool_timeouts,
                )?;
                (toolset.definitions(), Some(toolset))
            }
        };
        let history: Vec<Message> = super::convert::read_json_text(history).map_err(|e| bad("history", &e))?;
        let watch = hooks.signal.clone().map(AbortWatch::new);
        let call =
            Call { members: provider.members_for_call(), system_prompt, tools, history, hooks, tools_ctrl, watch };
        Ok((call, toolset))
    }

    /// Prepares the request and opens its stream: of a fallback provider's next member while the
    /// one before fails before its answer began (the rule is the core's, `Fallback`; `model`
    /// then says which member answers).
    async fn open(&self, model: &CallModel<'_>) -> Result<ModelSource<BodySource>, GlueError> {
        let output = self.hooks.output.as_ref().map(|o| &o.format);
        let prompt = Prompt::new(&self.system_prompt, &self.tools, &self.history).with_output(output);
        open_with_fallback(model, || async { model.open(model.prepare(&prompt)?).await }).await
    }

    fn model(&self) -> CallModel<'_> {
        self.members.model(self.hooks.limits, self.hooks.warn.as_ref())
    }

    async fn guard<T>(&self, fut: LocalBoxFuture<'_, Result<T, GlueError>>) -> Result<T, JsValue> {
        guarded(fut, self.watch.as_ref(), &self.tools_ctrl).await
    }
}

/// A failed step as the JS error: the provider's error, carrying the salvaged round as
/// `salvaged`: the generation's object (as `runStep` gives it) plus `results` (JSON text;
/// `step.js` makes it the documented object) when a call had been handed on.
fn step_failure_to_js(f: StepFailure<GlueError>) -> JsValue {
    let e = f.error.into_js();
    if let Some(s) = f.salvaged {
        let o = result_object(s.generated);
        let results = serde_json::to_string(&s.results).unwrap_or_else(|_| "[]".into());
        let _ = Reflect::set(&o, &JsValue::from_str("results"), &JsValue::from_str(&results));
        if e.is_object() {
            let _ = Reflect::set(&e, &JsValue::from_str("salvaged"), &o);
        }
    }
    e
}

/// One generation: `{id, message (JSON), usage, finishReason}`.
#[wasm_bindgen(js_name = runGenerate)]
pub fn run_generate(
    provider: &ProviderCore,
    system_prompt: String,
    tools: String,
    history: String,
    hooks: JsValue,
) -> Result<Promise, JsValue> {
    let call = Call::begin(provider, system_prompt, Some(&tools), &history, hooks);
    Ok(future_to_promise(async move {
        let (call, _) = call?;
        let hooks = &call.hooks;
        let model = call.model();
        let work = async {
            let mut source = call.open(&model).await?;
            generate(&mut source, PartBatch::new(&hooks.on_part), |c: &ToolCall| call_json_hook(&hooks.on_tool_call, c))
                .await
        };
        let out = call.guard(work.boxed_local()).await?;
        let obj = result_with_output(out, hooks.output.as_ref()).map_err(GlueError::into_js)?;
        set_answered_by(&obj, &model);
        Ok(obj.into())
    }))
}

/// One step (the tools are the toolset's): the generation's object plus `results`, a Promise of the tool results (JSON,
/// call order) that rejects with the signal's reason if the signal aborts first.
#[wasm_bindgen(js_name = runStep)]
pub fn run_step(
    provider: &ProviderCore,
    system_prompt: String,
    history: String,
    hooks: JsValue,
) -> Result<Promise, JsValue> {
    let call = Call::begin(provider, system_prompt, None, &history, hooks);
    Ok(future_to_promise(async move {
        let (call, toolset) = call?;
        let toolset = toolset.ok_or_else(|| type_error("step needs a toolset"))?;
        let hooks = &call.hooks;
        let on_tool_result: Option<ToolResultCallback> = hooks.on_tool_result.clone().map(|f| {
            Rc::new(move |r: &ToolResult| {
                // A throwing onToolResult cannot fail a tool that already finished.
                let _ = call_json_hook(&Some(f.clone()), r);
            }) as ToolResultCallback
        });
        let spawn = |f: LocalBoxFuture<'static, ()>| spawn_local(f);
        let model = call.model();
        let work = async {
            let mut source = call.open(&model).await?;
            Ok(step(&mut source, &toolset, &spawn, PartBatch::new(&hooks.on_part), on_tool_result).await)
        };
        let out = match call.guard(work.boxed_local()).await? {
            Ok(out) => out,
            Err(f) => {
                // The started tools have settled (a salvage awaits them): the error goes out with
                // the round, and nothing is left for the tools' controller to stop.
                call.tools_ctrl.abort();
                return Err(step_failure_to_js(f));
            }
        };
        let obj = result_with_output(out.generated, hooks.output.as_ref()).map_err(GlueError::into_js)?;
        set_answered_by(&obj, &model);
        let results = out.results;
        let drivers = out.drivers;
        let results_promise = future_to_promise(async move {
            let _drivers = drivers; // dropping them stops waiting on the tools
            let gathered = async { Ok::<_, GlueError>(collect_results(results).await) }.boxed_local();
            let rs = call.guard(gathered).await?;
            drop(call); // the abort listener goes with it
            Ok(JsValue::from_str(&serde_json::to_string(&rs).unwrap_or_else(|_| "[]".into())))
        });
        let _ = Reflect::set(&obj, &"results".into(), &results_promise);
        Ok(obj.into())
    }))
}

/// The tool messages of a step's results (`results`: their JSON text, call order) as a turn
/// appends them to its context — kimi-cli's words for an error, an empty output, a message — so a
/// loop of one's own around `step` sends the model what an `Agent` would.
#[wasm_bindgen(js_name = toolMessages)]
pub fn tool_messages(results: &str) -> Result<String, JsValue> {
    let results: Vec<ToolResult> = serde_json::from_str(results)
        .map_err(|e| type_error(&format!("toolMessages: not a list of tool results: {e}")))?;
    let messages: Vec<Message> = results.iter().map(crate::engine::soul::rules::tool_result_to_message).collect();
    serde_json::to_string(&messages).map_err(|e| type_error(&e.to_string()))
}
