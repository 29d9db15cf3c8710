//! A sub-agent call (`Agent.asTool`): the run a tool's call is made in (`RunHandle`, kept in the
//! call's context out of sight) and `AgentCore.runSubagent`, which starts one call of the child
//! agent through the agent's own `start` — a turn by the core's rule
//! (`engine::soul::agent::subagent`): its wire into the parent's, its approvals on the parent's
//! wire, its tools' signals under the parent call's, its usage counted up the chain.

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::Promise;
use wasm_bindgen::prelude::*;

use super::agent::{AgentCore, Start};
use super::convert::to_js;
use super::get;
use super::provider::Members;
use super::sys;
use super::wire::WireCore;
use crate::engine::message::TokenUsage;
use crate::engine::session::Session;
use crate::engine::soul::agent::{add_usage, not_resumable, Begin, SubagentRun, UserInput};
use crate::engine::soul::approval::Approvals;
use crate::engine::soul::context::SharedContext;
use crate::engine::soul::recovery::{RecordedSubagent, RecoveryBudget};
use crate::engine::soul::wire::{SubagentOf, Wire};
use crate::engine::toolset::{ToolOutput, ToolReturnValue};

/// What a run's sub-agents used so far.
pub type Usage = Rc<RefCell<Option<TokenUsage>>>;

/// A run's total and, up the chain, its callers' (a nested sub-agent's step counts for each).
pub struct Totals {
    used: Usage,
    up: Option<Rc<Totals>>,
}

impl Totals {
    fn add(&self, u: &TokenUsage) {
        add_usage(&mut self.used.borrow_mut(), u);
        if let Some(up) = &self.up {
            up.add(u);
        }
    }
}

/// A sub-agent instance: its agent id, its type (the tool that made it), its context, whether a
/// call runs it now.
pub struct Instance {
    id: String,
    kind: String,
    context: SharedContext,
    running: bool,
}

/// The instances an agent's turns made (shared with its sub-agents' runs). Few: a list.
pub type Instances = Rc<RefCell<Vec<Instance>>>;

/// The run a tool call is made in, for a sub-agent tool: where its approvals are asked, the
/// provider it inherits, how deep it is, whose totals its usage adds to, where instances are kept.
#[wasm_bindgen]
pub struct RunHandle {
    /// The run's wire (a sub-agent's events go on it; its approvals go where the run's do).
    wire: Wire,
    approvals: Rc<Approvals>,
    provider: Option<Members>,
    depth: u32,
    /// This run's total and its callers'.
    totals: Rc<Totals>,
    instances: Instances,
    /// The session the run's turn is in: sub-agents' contexts are kept in its store.
    session: Option<Session>,
    /// A recovered turn's record of its sub-agent calls (each taken by the call run again).
    recorded: Rc<RefCell<Vec<RecordedSubagent>>>,
    /// The recovered turn's budget, for its sub-agents' turns.
    budget: RecoveryBudget,
}

impl RunHandle {
    pub(super) fn root(
        wire: Wire,
        approvals: Rc<Approvals>,
        provider: Option<Members>,
        total: Usage,
        instances: Instances,
        session: Option<Session>,
        recorded: (Vec<RecordedSubagent>, RecoveryBudget),
    ) -> RunHandle {
        RunHandle {
            wire,
            approvals,
            provider,
            depth: 0,
            totals: Rc::new(Totals { used: total, up: None }),
            instances,
            session,
            recorded: Rc::new(RefCell::new(recorded.0)),
            budget: recorded.1,
        }
    }

    /// The provider the run's turn asks.
    pub(super) fn provider(&self) -> Option<Members> {
        self.provider.clone()
    }
}

/// One sub-agent call, as `AgentCore::start` takes it.
pub struct Call {
    pub(super) run: SubagentRun,
    pub(super) begin: Begin,
    /// The child's approvals: asked on the parent's wire.
    pub(super) approvals: Rc<Approvals>,
    /// The run the child's own tools' calls are made in.
    pub(super) handle: RunHandle,
    /// What the child's sub-agents use.
    pub(super) used: Usage,
    pub(super) running: Running,
}

/// Marks an instance free again when its call ends, however it ends.
pub struct Running(Instances, String);

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(i) = self.0.borrow_mut().iter_mut().find(|i| i.id == self.1) {
            i.running = false;
        }
    }
}

fn refused(message: &str, brief: &str) -> Promise {
    Promise::resolve(&to_js(&ToolReturnValue::error(message, brief, ToolOutput::Text(String::new()))))
}

#[wasm_bindgen]
impl AgentCore {
    /// Runs this agent as a sub-agent, for a call made in `run`, on `wire` (new; made the
    /// sub-agent's here): a new instance, or the one `resume` names. `call`: `{callId, prompt,
    /// resume, kind (the tool's name), maxDepth, signal (the call's), warn, simple}`. Resolves with
    /// the call's result (a `ToolReturnValue`); the run's failures are error results.
    #[wasm_bindgen(js_name = runSubagent)]
    pub fn run_subagent(
        &self,
        run: &RunHandle,
        wire: &WireCore,
        toolset: JsValue,
        call: JsValue,
    ) -> Result<Promise, JsValue> {
        let text = |k: &str| get(&call, k).and_then(|v| v.as_string());
        let (call_id, prompt, kind) =
            (text("callId").unwrap_or_default(), text("prompt").unwrap_or_default(), text("kind").unwrap_or_default());
        let max_depth = get(&call, "maxDepth").and_then(|v| v.as_f64()).map_or(2, |v| v as u32);
        if run.depth >= max_depth {
            return Ok(refused(
                &format!("Sub-agents cannot launch other sub-agents here: `{kind}` would run {} levels deep, and the limit is {max_depth}.", run.depth + 1),
                "Agent unavailable",
            ));
        }
        if run.session.as_ref().is_some_and(|s| !s.keeps_agents()) {
            return Ok(refused(
                &format!("`{kind}` cannot run in this session: its store keeps no sub-agent contexts (its `open()` gives no `agents`; see docs/sessions.md, \"A store of your own\")."),
                "Agent unavailable",
            ));
        }
        // The call a runtime that died recorded: it goes on with the instance it ran.
        let record = {
            let mut recorded = run.recorded.borrow_mut();
            recorded.iter().position(|r| r.call_id == call_id).map(|i| recorded.remove(i))
        };
        let resume = record.as_ref().map(|r| r.agent_id.clone()).or_else(|| text("resume"));
        let resumed = text("resume").is_some();
        let (agent_id, context) = {
            let mut instances = run.instances.borrow_mut();
            match resume {
                // An instance of this tool's, not running now: this run's, or one the session stored.
                Some(id) => {
                    // In a session, what its store holds (what a write the store refused left in
                    // memory is not the instance's).
                    if let Some((k, ctx)) = run.session.as_ref().and_then(|s| s.agent(&id)) {
                        match instances.iter_mut().find(|i| i.id == id) {
                            Some(i) if !i.running => i.context = SharedContext::new(ctx),
                            Some(_) => {}
                            None => instances.push(Instance {
                                id: id.clone(),
                                kind: k,
                                context: SharedContext::new(ctx),
                                running: false,
                            }),
                        }
                    } else if run.session.is_some() {
                        instances.retain(|i| i.id != id || i.running);
                    }
                    match instances.iter_mut().find(|i| i.id == id && i.kind == kind && !i.running) {
                        Some(i) => {
                            i.running = true;
                            (id, i.context.clone())
                        }
                        None => {
                            if let Some(r) = &record {
                                // Its context was not kept (no session): closed as interrupted.
                                let rv = not_resumable(r, run.approvals.wire());
                                return Ok(Promise::resolve(&to_js(&rv)));
                            }
                            return Ok(refused(
                                &format!("No agent instance `{id}` of `{kind}` to resume (none such, or it is still running and cannot be resumed concurrently)."),
                                "Agent unavailable",
                            ));
                        }
                    }
                }
                None => {
                    let id = format!("a{}", sys::random_uuid().replace('-', "").get(..8).unwrap_or_default());
                    let context = SharedContext::default();
                    instances.push(Instance {
                        id: id.clone(),
                        kind: kind.clone(),
                        context: context.clone(),
                        running: true,
                    });
                    (id, context)
                }
            }
        };
        if let Some(s) = &run.session {
            s.attach_agent(&agent_id, &kind, &context);
        }
        let (begin, nested) = match record {
            Some(r) => Begin::from_record(r, run.budget, run.session.is_some()),
            None => (Begin::Run(UserInput::Text(prompt)), Vec::new()),
        };
        let running = Running(run.instances.clone(), agent_id.clone());
        let sub = SubagentRun { parent_tool_call_id: call_id, agent_id, subagent_type: kind, resumed };
        let totals = run.totals.clone();
        sub.forward(&wire.wire, &run.wire, move |u| totals.add(u));
        let who = SubagentOf { agent_id: sub.agent_id.clone(), subagent_type: sub.subagent_type.clone() };
        let approvals = Rc::new(run.approvals.child(self.config.name.clone(), who));
        let used = Usage::default();
        let handle = RunHandle {
            wire: wire.wire.clone(),
            approvals: approvals.clone(),
            provider: self.provider.clone().or_else(|| run.provider.clone()),
            depth: run.depth + 1,
            totals: Rc::new(Totals { used: used.clone(), up: Some(run.totals.clone()) }),
            instances: run.instances.clone(),
            session: run.session.clone(),
            recorded: Rc::new(RefCell::new(nested)),
            budget: run.budget,
        };
        let call_ = Call { run: sub, begin, approvals, handle, used, running };
        self.start(Start::Subagent(Box::new(call_)), wire, (context, Rc::default()), toolset, call, None)
    }
}
