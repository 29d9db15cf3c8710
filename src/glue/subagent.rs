//! A sub-agent call (`Agent.asTool`): the run a tool's call is made in (`RunHandle`, in the
//! call's context, hidden) and `AgentCore.runSubagent`, one turn of the child agent by the core's
//! rule (`engine::soul::agent::subagent`) — its wire into the parent's, its approvals on the
//! parent's wire, its tools' signals under the parent call's, its usage counted up the chain.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use futures::FutureExt;
use js_sys::Promise;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::future_to_promise;

use super::agent::{seam_words, AgentCore, AgentEnv, RunClosures};
use super::convert::to_js;
use super::get;
use super::provider::Members;
use super::signals::{AbortWatch, StopReason};
use super::sys::{self, AbortSignal};
use super::tools::{JsToolset, ToolSignals};
use crate::engine::message::TokenUsage;
use crate::engine::soul::agent::{add_usage, run_subagent, SubagentRun, Turn, UserInput};
use crate::engine::soul::approval::Approvals;
use crate::engine::soul::context::SharedContext;
use crate::engine::toolset::{ToolOutput, ToolReturnValue};

/// What a run's sub-agents used so far.
pub type Usage = Rc<RefCell<Option<TokenUsage>>>;

/// A sub-agent instance: its type (the tool that made it), its context, whether a call runs it.
pub struct Instance {
    kind: String,
    context: SharedContext,
    running: bool,
}

/// The instances an agent's turns made, by agent id (shared with its sub-agents' runs).
pub type Instances = Rc<RefCell<HashMap<String, Instance>>>;

/// The run a tool call is made in, for a sub-agent tool: where its approvals are asked, the
/// provider it inherits, how deep it is, whose totals its usage adds to, where instances are kept.
#[wasm_bindgen]
pub struct RunHandle {
    approvals: Rc<Approvals>,
    provider: Option<Members>,
    depth: u32,
    /// This run's total and every ancestor's.
    totals: Vec<Usage>,
    instances: Instances,
}

impl RunHandle {
    pub(super) fn root(
        approvals: Rc<Approvals>,
        provider: Option<Members>,
        total: Usage,
        instances: Instances,
    ) -> RunHandle {
        RunHandle { approvals, provider, depth: 0, totals: vec![total], instances }
    }
}

fn refused(message: &str, brief: &str) -> Promise {
    Promise::resolve(&to_js(&ToolReturnValue::error(message, brief, ToolOutput::Text(String::new()))))
}

/// Marks an instance free again when its call ends, however it ends.
struct Running(Instances, String);

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(i) = self.0.borrow_mut().get_mut(&self.1) {
            i.running = false;
        }
    }
}

#[wasm_bindgen]
impl AgentCore {
    /// Runs this agent as the sub-agent of the call `call_id` made in `run`, on `wire` (new; made
    /// the sub-agent's here): a new instance, or
    /// the one `resume` names; resolves with the call's result (a `ToolReturnValue`), never
    /// rejects for the run's own failures (they are error results). `kind`: the tool's name;
    /// `hooks`: `{signal (the call's), warn, simple}`.
    #[wasm_bindgen(js_name = runSubagent)]
    #[allow(clippy::too_many_arguments)]
    pub fn run_subagent(
        &self,
        run: &RunHandle,
        wire: &super::wire::WireCore,
        call_id: String,
        prompt: String,
        resume: Option<String>,
        kind: String,
        max_depth: u32,
        toolset: JsValue,
        hooks: JsValue,
    ) -> Result<Promise, JsValue> {
        if run.depth >= max_depth {
            return Ok(refused(
                &format!("Sub-agents cannot launch other sub-agents here: `{kind}` would run {} levels deep, and the limit is {max_depth}.", run.depth + 1),
                "Agent unavailable",
            ));
        }
        let (agent_id, context, resumed) = {
            let mut instances = run.instances.borrow_mut();
            match resume {
                Some(id) => match instances.get_mut(&id) {
                    None => return Ok(refused(&format!("No agent instance `{id}` to resume."), "Unknown agent")),
                    Some(i) if i.running => {
                        return Ok(refused(
                            &format!("Agent instance {id} is still running and cannot be resumed concurrently."),
                            "Agent busy",
                        ))
                    }
                    Some(i) if i.kind != kind => {
                        return Ok(refused(
                            &format!("Agent instance {id} is a `{}` agent: resume it with that tool.", i.kind),
                            "Wrong agent type",
                        ))
                    }
                    Some(i) => {
                        i.running = true;
                        (id, i.context.clone(), true)
                    }
                },
                None => {
                    let id = format!("a{}", sys::random_uuid().replace('-', "").get(..8).unwrap_or_default());
                    let context = SharedContext::default();
                    instances
                        .insert(id.clone(), Instance { kind: kind.clone(), context: context.clone(), running: true });
                    (id, context, false)
                }
            }
        };
        let running = Running(run.instances.clone(), agent_id.clone());
        let sub = SubagentRun { parent_tool_call_id: call_id, agent_id, subagent_type: kind, resumed };
        let totals = run.totals.clone();
        let wire = wire.wire.clone();
        sub.forward(&wire, run.approvals.wire(), move |u| {
            for t in &totals {
                add_usage(&mut t.borrow_mut(), u);
            }
        });
        let approvals = Rc::new(run.approvals.child(self.config.name.clone()));
        let provider = self.provider.clone().or_else(|| run.provider.clone());
        let mine = Usage::default();
        let handle = RunHandle {
            approvals: approvals.clone(),
            provider: provider.clone(),
            depth: run.depth + 1,
            totals: std::iter::once(mine.clone()).chain(run.totals.iter().cloned()).collect(),
            instances: run.instances.clone(),
        };
        let run_fns = RunClosures::new(&wire, &approvals);
        let signal: Option<AbortSignal> = get(&hooks, "signal").map(|s| s.unchecked_into());
        let warn = get(&hooks, "warn").and_then(|f| f.dyn_into::<js_sys::Function>().ok());
        let simple = get(&hooks, "simple").and_then(|v| v.as_f64()).map(|v| v as u32);
        let stop = StopReason::default();
        let tools = JsToolset::new(
            toolset,
            simple,
            ToolSignals::PerCall(signal.clone(), stop.clone()),
            warn.clone(),
            Some(run_fns.functions(handle)),
            self.config.tool_timeouts,
        )?;
        let (config, limits) = (self.config.clone(), self.limits);
        let env = AgentEnv { output: self.output.clone(), last: Rc::default(), stop, subagents: mine };
        Ok(future_to_promise(async move {
            let _running = running;
            let _run_fns = run_fns;
            let cancel = async move {
                match signal {
                    Some(s) => {
                        AbortWatch::new(s).fired().await;
                    }
                    None => futures::future::pending::<()>().await,
                }
            };
            let model = provider.as_ref().map(|m| m.model(limits, warn.as_ref()));
            let turn = Turn {
                config: &config,
                context: &context,
                model: model.as_ref(),
                tools: &tools,
                wire: &wire,
                approvals: &approvals,
                env: &env,
            };
            let words = |e: &super::error::GlueError| {
                let (class, message) = seam_words(e);
                format!("{class}: {message}")
            };
            let rv = run_subagent(&turn, &sub, UserInput::Text(prompt), cancel.boxed_local().shared(), words).await;
            wire.shutdown();
            Ok(to_js(&rv))
        }))
    }
}
