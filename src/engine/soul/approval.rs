//! Approvals, as kimi-cli's soul runs them: a tool asks, the user answers on the wire, and the
//! *tool* decides what to return. `yolo` approves everything; `approve_for_session`
//! remembers the action for the agent's later calls. A tool that was refused may return
//! kimi-cli's rejection result ([`rejection`]): without the user's feedback that ends the
//! turn; with feedback the model reads it and goes on.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet, VecDeque};
use std::rc::Rc;

use crate::engine::soul::recovery::RecordedApproval;
use crate::engine::soul::wire::{ApprovalAnswer, ApprovalRequest, ApprovalResponse, SubagentOf, Wire};
use crate::engine::toolset::{ToolOutput, ToolReturnValue};
use futures::future::{LocalBoxFuture, Shared};
use futures::FutureExt;

/// What an agent remembers between turns.
#[derive(Debug, Default)]
pub struct ApprovalState {
    pub yolo: bool,
    approved_for_session: HashSet<String>,
}

impl ApprovalState {
    pub fn new(yolo: bool) -> ApprovalState {
        ApprovalState { yolo, approved_for_session: HashSet::new() }
    }

    /// Approves `action` for the rest of the session (a session's stored answer, taken up again).
    pub fn approve_for_session(&mut self, action: &str) {
        self.approved_for_session.insert(action.to_owned());
    }
}

/// kimi-cli's `ToolRejectedError`: with the user's feedback when there was some.
pub fn rejection(feedback: &str) -> ToolReturnValue {
    if feedback.is_empty() {
        ToolReturnValue::error(
            "The tool call is rejected by the user. Stop what you are doing and wait for the user to tell you how to proceed.",
            "Rejected by user",
            ToolOutput::Text(String::new()),
        )
    } else {
        ToolReturnValue::error(
            &format!("The tool call is rejected by the user. User feedback: {feedback}"),
            &format!("Rejected: {feedback}"),
            ToolOutput::Text(String::new()),
        )
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum ApprovalError {
    /// `requestApproval` without an action.
    MissingAction,
}

impl std::fmt::Display for ApprovalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("requestApproval needs an `action` string")
    }
}

/// A recovered request's answer: its request id's, shared by the reruns that ask.
type SharedAnswer = Shared<LocalBoxFuture<'static, ApprovalAnswer>>;

/// The approval side of one run: asks on the run's wire, remembers who was refused.
pub struct Approvals {
    wire: Wire,
    state: Rc<RefCell<ApprovalState>>,
    sender: String,
    /// A sub-agent's approvals: who asks, and the requests it made.
    subagent: Option<SubagentOf>,
    asked: RefCell<Vec<String>>,
    new_id: Rc<dyn Fn() -> String>,
    /// Calls the user refused in this run, with the feedback given.
    refused: RefCell<HashMap<String, String>>,
    /// A recovered turn's approvals by call id, in the order they were asked: each request the
    /// call asked before the runtime died, still waiting (or answered, when the answer was
    /// recorded). The call, run again, gets them in order instead of asking anew.
    resumed: RefCell<HashMap<String, VecDeque<(String, SharedAnswer)>>>,
}

impl Approvals {
    pub fn new(wire: Wire, state: Rc<RefCell<ApprovalState>>, sender: String, new_id: Rc<dyn Fn() -> String>) -> Self {
        Approvals {
            wire,
            state,
            sender,
            subagent: None,
            asked: RefCell::default(),
            new_id,
            refused: RefCell::new(HashMap::new()),
            resumed: RefCell::default(),
        }
    }

    /// A sub-agent's approvals (`sender`: its name; `who`: the instance): asked on this run's
    /// wire, answered by its `respond`, with this run's `approve_for_session` (kimi-cli: one
    /// approval runtime a session).
    pub fn child(&self, sender: String, who: SubagentOf) -> Approvals {
        Approvals {
            subagent: Some(who),
            ..Approvals::new(self.wire.clone(), self.state.clone(), sender, self.new_id.clone())
        }
    }

    /// The wire the requests are asked on.
    pub fn wire(&self) -> &Wire {
        &self.wire
    }

    /// A new request's id; a sub-agent's are kept, to be closed when its run ends.
    fn new_request_id(&self) -> String {
        let id = (self.new_id)();
        if self.subagent.is_some() {
            self.asked.borrow_mut().push(id.clone());
        }
        id
    }

    /// A sub-agent's run ended (its answer, a failure, its time limit): a question of it still
    /// waiting is answered refused, so the caller's UI is not left with a question nobody will act on.
    pub fn close_asked(&self) {
        for id in self.asked.take() {
            if self.wire.is_waiting(&id) {
                let _ = self.wire.respond(&id, ApprovalResponse::Reject, "");
            }
        }
    }

    /// A recovered turn's approval: from now on the request waits under its recorded id (a
    /// client may answer it before the tool asks again); when the tool of `a.tool_call_id` asks,
    /// it gets this request's answer. An answer that was recorded is the answer.
    pub fn resume(&self, a: &RecordedApproval) {
        // A sub-agent's, waiting again: closed with its run as the ones it asks.
        if self.subagent.is_some() && a.answer.is_none() {
            self.asked.borrow_mut().push(a.request_id.clone());
        }
        let answer = match &a.answer {
            Some((response, feedback)) => {
                futures::future::ready(ApprovalAnswer { response: *response, feedback: feedback.clone() }).boxed_local()
            }
            None => self.wire.await_approval(&a.request_id).boxed_local(),
        };
        self.resumed
            .borrow_mut()
            .entry(a.tool_call_id.clone())
            .or_default()
            .push_back((a.request_id.clone(), answer.shared()));
    }

    /// Asks the user about `action` for the tool call `call_id`; true when approved.
    /// `before_start`: asked before the tool's handler starts (`needsApproval`).
    /// Whether a request for `action` would be answered without asking (`yolo`, or approved for
    /// the session): then no request is recorded before its tool starts.
    pub fn asks_nobody(&self, action: &str) -> bool {
        let st = self.state.borrow();
        st.yolo || st.approved_for_session.contains(action)
    }

    pub fn request(
        self: &Rc<Self>,
        call_id: &str,
        action: &str,
        description: &str,
        before_start: bool,
    ) -> Result<LocalBoxFuture<'static, bool>, ApprovalError> {
        if action.is_empty() {
            return Err(ApprovalError::MissingAction);
        }
        let resumed = self.resumed.borrow_mut().get_mut(call_id).and_then(VecDeque::pop_front);
        // An answer the user gave to this very request (recorded before the runtime died) is
        // the answer, whatever was approved for the session since.
        let answered = resumed.as_ref().is_some_and(|(id, _)| !self.wire.is_waiting(id));
        if self.asks_nobody(action) && !answered {
            // A recovered request still waiting is answered by the session's approval (and the
            // recording says so), not left to be refused when the run ends.
            if let Some((request_id, _)) = &resumed {
                if self.wire.is_waiting(request_id) {
                    let _ = self.wire.respond(request_id, ApprovalResponse::Approve, "");
                    // Write before tell: the tool goes on once that answer is stored (a death
                    // before would leave the request waiting and the tool started).
                    let stored = self.wire.stored();
                    return Ok(stored.boxed_local());
                }
            }
            return Ok(futures::future::ready(true).boxed_local());
        }
        let answer = match resumed {
            Some((_, answer)) => answer.boxed_local(),
            None => self
                .wire
                .request_approval(ApprovalRequest {
                    id: self.new_request_id(),
                    tool_call_id: call_id.to_owned(),
                    sender: self.sender.clone(),
                    action: action.to_owned(),
                    description: description.to_owned(),
                    display: Vec::new(),
                    before_start,
                    agent_id: self.subagent.as_ref().map(|s| s.agent_id.clone()),
                    subagent_type: self.subagent.as_ref().map(|s| s.subagent_type.clone()),
                })
                .boxed_local(),
        };
        let this = self.clone();
        let (call_id, action) = (call_id.to_owned(), action.to_owned());
        Ok(async move {
            let a = answer.await;
            // Write before tell: the tool goes on only once its answer is stored (a session's
            // store refused it: the turn is stopping, and nothing was approved).
            if !this.wire.stored().await {
                return false;
            }
            match a.response {
                ApprovalResponse::Approve => true,
                ApprovalResponse::ApproveForSession => {
                    this.state.borrow_mut().approved_for_session.insert(action);
                    true
                }
                ApprovalResponse::Reject => {
                    this.refused.borrow_mut().insert(call_id, a.feedback);
                    false
                }
            }
        }
        .boxed_local())
    }

    /// kimi-cli's rejection result for `call_id`, with the feedback the user gave for it.
    pub fn rejection(&self, call_id: &str) -> ToolReturnValue {
        rejection(self.refused.borrow().get(call_id).map_or("", String::as_str))
    }

    /// Is `rv` the rejection result of a refused call? `Some(has_feedback)` when it is: a tool
    /// that returned something else after a refusal keeps its result and its turn.
    pub fn rejected(&self, call_id: &str, rv: &ToolReturnValue) -> Option<bool> {
        let refused = self.refused.borrow();
        let feedback = refused.get(call_id)?;
        (*rv == rejection(feedback)).then_some(!feedback.is_empty())
    }
}
