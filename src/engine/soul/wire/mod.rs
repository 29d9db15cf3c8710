//! The Wire: the channel between a soul and its UI for one run, as kimi-cli's `Wire` is.
//!
//! The soul side publishes [`WireMessage`]s (`message.rs`). Each UI side (`side.rs`) is a queue
//! of the messages published after it subscribed: a *raw* side sees every message as it was
//! sent; a *merged* side sees consecutive text, think and tool-call fragments joined (the merge
//! rules of [`StreamedMessagePart::merge_in_place`], the same ones `generate` assembles a
//! message with), flushed by any other message and at shutdown. The recorder (`recorder.rs`)
//! writes the merged messages as kimi-cli's `wire.jsonl` (`jsonl.rs`).
//!
//! Approval requests travel on the wire too: [`Wire::request_approval`] publishes an
//! `ApprovalRequest` and waits; [`Wire::respond`] publishes the `ApprovalResponse` and wakes
//! the waiter. Shutdown answers every waiting request with a rejection.
//!
//! Nothing here calls out while a `RefCell` is borrowed: callbacks (the recorder's sink) run
//! after the wire's state is released, so a sink may publish on the wire again.

mod jsonl;
mod message;
mod recorder;
mod side;

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;

use futures::channel::oneshot;

#[allow(unused_imports)]
use crate::engine::message::StreamedMessagePart;

pub use jsonl::{
    metadata_line, read_wire_record, record_line, record_message, wire_record_json, WIRE_PROTOCOL_VERSION,
};
pub use message::{ApprovalRequest, Status, StatusUpdate, StepRetry, SubagentOf, WireMessage};
pub use recorder::Recorder;
pub use side::{Ready, UiSide};

/// The user's answer to an approval request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApprovalResponse {
    Approve,
    ApproveForSession,
    Reject,
}

impl ApprovalResponse {
    pub fn parse(s: &str) -> Option<ApprovalResponse> {
        match s {
            "approve" => Some(ApprovalResponse::Approve),
            "approve_for_session" => Some(ApprovalResponse::ApproveForSession),
            "reject" => Some(ApprovalResponse::Reject),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalResponse::Approve => "approve",
            ApprovalResponse::ApproveForSession => "approve_for_session",
            ApprovalResponse::Reject => "reject",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApprovalAnswer {
    pub response: ApprovalResponse,
    pub feedback: String,
}

#[derive(Debug, PartialEq, Eq)]
pub enum WireError {
    /// `respond` named a request that is not waiting (answered already, or never asked).
    NoSuchRequest(String),
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::NoSuchRequest(id) => write!(f, "No approval request {id} is waiting on this wire"),
        }
    }
}

#[derive(Default)]
struct WireState {
    raw: Vec<UiSide>,
    merged: Vec<UiSide>,
    buffer: Option<WireMessage>,
    /// Preview edits (`PartialOutput`) of the part in `buffer`, published after it.
    partial: Option<WireMessage>,
    shut: bool,
    pending: Vec<(String, oneshot::Sender<ApprovalAnswer>)>,
    /// A recovered turn's requests, announced before the turn waits on them again: an answer
    /// given in the meantime is taken ([`Wire::expect_approval`]).
    expected: Vec<String>,
    /// Answers to expected requests given before their wait began.
    early: Vec<(String, ApprovalAnswer)>,
    recorder: Option<Recorder>,
    /// A recorder is set (it is taken out of `recorder` while it writes).
    recording: bool,
    /// Merged messages waiting for the recorder (written once the state is released).
    to_record: Vec<WireMessage>,
    recorded: u64,
    /// What says when everything recorded so far is durably stored (a session's store): a tool
    /// starts only after its call is.
    gate: Option<Gate>,
    /// A sub-agent's wire: each raw message also goes to the parent's raw sides, wrapped (its
    /// merged ones go to the parent's merged sides and recording through its recorder).
    raw_to: Option<(Wire, Wrap)>,
    /// The sub-agents' wires forwarding here: a flush of this one flushes theirs first.
    children: Vec<std::rc::Weak<RefCell<WireState>>>,
}

/// What a sub-agent's message becomes on its parent's wire.
pub type Wrap = Rc<dyn Fn(&WireMessage) -> WireMessage>;

/// Resolves `true` once everything recorded so far is stored, `false` if a write of it failed.
pub type Gate = Rc<dyn Fn() -> futures::future::LocalBoxFuture<'static, bool>>;

impl WireState {
    fn publish_merged(&mut self, m: WireMessage) {
        self.merged.retain(|s| !s.0.borrow().closed);
        for s in &self.merged {
            s.push(m.clone());
        }
        // A preview is derived from the parts: a recording keeps kimi-cli's messages only.
        if self.recording && !matches!(m, WireMessage::PartialOutput(_)) {
            self.to_record.push(m);
        }
    }

    fn flush(&mut self) {
        if let Some(b) = self.buffer.take() {
            self.publish_merged(b);
        }
        if let Some(p) = self.partial.take() {
            self.publish_merged(p);
        }
    }
}

/// The channel of one run. Cheap to clone (a shared handle).
#[derive(Clone, Default)]
pub struct Wire(Rc<RefCell<WireState>>);

impl Wire {
    pub fn new() -> Wire {
        Wire::default()
    }

    /// A new subscriber: it sees what is published from now on. After shutdown it is
    /// finished at once.
    pub fn ui_side(&self, merge: bool) -> UiSide {
        let side = UiSide::default();
        let mut st = self.0.borrow_mut();
        if st.shut {
            side.close();
        } else if merge {
            st.merged.push(side.clone());
        } else {
            st.raw.push(side.clone());
        }
        side
    }

    /// Records every merged message from now on.
    pub fn set_recorder(&self, recorder: Recorder) {
        let mut st = self.0.borrow_mut();
        st.recorder = Some(recorder);
        st.recording = true;
    }

    /// Makes this a sub-agent's wire: what it publishes goes on `parent` — each message to the
    /// parent's raw sides as it comes (as `raw` makes it), the merged ones to its merged sides and
    /// its recording (as `merged` makes them) — and it is stored when the parent's recording is.
    pub fn forward_to(&self, parent: &Wire, raw: Wrap, merged: impl Fn(&WireMessage) -> WireMessage + 'static) {
        let p = parent.clone();
        self.set_recorder(Recorder::forward(Box::new(move |m| p.send_merged(merged(m)))));
        let p = parent.clone();
        let mut st = self.0.borrow_mut();
        st.gate = Some(Rc::new(move || p.stored()));
        st.raw_to = Some((parent.clone(), raw));
        let mut up = parent.0.borrow_mut();
        up.children.retain(|c| c.strong_count() > 0);
        up.children.push(Rc::downgrade(&self.0));
    }

    /// Publishes `m` to the raw sides (and, on a sub-agent's wire, to its parent's, wrapped);
    /// `false` after shutdown.
    #[inline]
    fn send_raw(&self, m: &WireMessage) -> bool {
        let up = {
            let mut st = self.0.borrow_mut();
            if st.shut {
                return false;
            }
            st.raw.retain(|s| !s.0.borrow().closed);
            for s in &st.raw {
                s.push(m.clone());
            }
            st.raw_to.as_ref().map(|(p, wrap)| (p.clone(), wrap(m)))
        };
        if let Some((parent, wrapped)) = up {
            parent.send_raw(&wrapped);
        }
        true
    }

    /// Publishes `m` to the merged sides and the recording only, after what the merge buffer
    /// holds (a sub-agent's merged message).
    fn send_merged(&self, m: WireMessage) {
        {
            let mut st = self.0.borrow_mut();
            if st.shut {
                return;
            }
            st.flush();
            st.publish_merged(m);
        }
        self.record();
    }

    /// Sets what [`Wire::stored`] waits on.
    pub fn set_gate(&self, gate: Gate) {
        self.0.borrow_mut().gate = Some(gate);
    }

    /// Resolves once everything recorded so far is durably stored (`true`), or a write of it
    /// failed (`false`); at once (`true`) on a wire without a store behind its recorder.
    pub fn stored(&self) -> futures::future::LocalBoxFuture<'static, bool> {
        use futures::FutureExt;
        let gate = self.0.borrow().gate.clone();
        match gate {
            Some(g) => g(),
            None => futures::future::ready(true).boxed_local(),
        }
    }

    /// Messages the recorder has written.
    pub fn recorded(&self) -> u64 {
        self.0.borrow().recorded
    }

    pub fn is_shut(&self) -> bool {
        self.0.borrow().shut
    }

    /// Publishes a message (ignored after shutdown).
    pub fn send(&self, m: WireMessage) {
        if !self.send_raw(&m) {
            return;
        }
        {
            let mut st = self.0.borrow_mut();
            if let WireMessage::Part(_) = m {
                // A part joins the part before it even when that part's preview edits came
                // between: those stay after it (one list) and go out with it.
                if let Some(b) = st.buffer.as_mut() {
                    if b.merge(&m) {
                        return;
                    }
                }
                st.flush();
                st.buffer = Some(m);
            } else if let (WireMessage::PartialOutput(_), true) = (&m, st.buffer.is_some()) {
                if let Some(p) = st.partial.as_mut() {
                    p.merge(&m);
                } else {
                    st.partial = Some(m);
                }
                return;
            } else {
                st.flush();
                st.publish_merged(m);
            }
        }
        self.record();
    }

    /// Hands pending merged messages to the recorder, outside the state's borrow.
    fn record(&self) {
        let (mut recorder, todo) = {
            let mut st = self.0.borrow_mut();
            if st.to_record.is_empty() {
                return;
            }
            match st.recorder.take() {
                Some(r) => {
                    let todo = std::mem::take(&mut st.to_record);
                    (r, todo)
                }
                None => return,
            }
        };
        for m in &todo {
            recorder.write(m);
        }
        let more = {
            let mut st = self.0.borrow_mut();
            st.recorded = recorder.count;
            st.recorder = Some(recorder);
            !st.to_record.is_empty()
        };
        if more {
            self.record(); // published by the sink while it wrote
        }
    }

    /// Publishes an `ApprovalRequest` and resolves with the answer; a rejection without
    /// feedback if the wire shuts down first.
    pub fn request_approval(&self, request: ApprovalRequest) -> impl Future<Output = ApprovalAnswer> {
        let (tx, rx) = oneshot::channel();
        let shut = {
            let mut st = self.0.borrow_mut();
            if !st.shut {
                st.pending.push((request.id.clone(), tx));
            }
            st.shut
        };
        if !shut {
            self.send(WireMessage::ApprovalRequest(request));
        }
        async move { rx.await.unwrap_or(ApprovalAnswer { response: ApprovalResponse::Reject, feedback: String::new() }) }
    }

    /// Waits again for a request that was published before (a recovered turn's): the request
    /// is waiting under `request_id` and is answered by [`Wire::respond`] as any other, but nothing
    /// is published now (a client was sent the request already).
    pub fn await_approval(&self, request_id: &str) -> impl Future<Output = ApprovalAnswer> {
        let (tx, rx) = oneshot::channel();
        {
            let mut st = self.0.borrow_mut();
            st.expected.retain(|id| id != request_id);
            if let Some(i) = st.early.iter().position(|(id, _)| id == request_id) {
                // Answered before the wait began: taken now.
                let _ = tx.send(st.early.remove(i).1);
            } else if !st.shut {
                st.pending.push((request_id.to_owned(), tx));
            }
        }
        async move { rx.await.unwrap_or(ApprovalAnswer { response: ApprovalResponse::Reject, feedback: String::new() }) }
    }

    /// Announces a recovered turn's waiting request before the turn waits on it again (its UI
    /// may answer at once, as soon as it is handed the wire): [`Wire::respond`] takes an answer
    /// to it from now on, and the wait that follows gets it.
    pub fn expect_approval(&self, request_id: &str) {
        let mut st = self.0.borrow_mut();
        let known = st.pending.iter().any(|(id, _)| id == request_id) || st.expected.iter().any(|id| id == request_id);
        if !st.shut && !known {
            st.expected.push(request_id.to_owned());
        }
    }

    /// An approval request of this id is waiting for its answer ([`Wire::respond`] would take
    /// one): asked and not answered yet, or a recovered turn's request waited on again.
    pub fn is_waiting(&self, request_id: &str) -> bool {
        let st = self.0.borrow();
        st.pending.iter().any(|(id, _)| id == request_id) || st.expected.iter().any(|id| id == request_id)
    }

    /// Answers a waiting approval request: publishes the `ApprovalResponse`, then wakes the
    /// tool that asked.
    pub fn respond(&self, request_id: &str, response: ApprovalResponse, feedback: &str) -> Result<(), WireError> {
        let answer = ApprovalAnswer { response, feedback: feedback.to_owned() };
        let tx = {
            let mut st = self.0.borrow_mut();
            match st.pending.iter().position(|(id, _)| id == request_id) {
                Some(i) => Some(st.pending.remove(i).1),
                None => {
                    // An expected request (a recovered turn's, not waited on again yet): kept
                    // for its wait.
                    let i = st
                        .expected
                        .iter()
                        .position(|id| id == request_id)
                        .ok_or_else(|| WireError::NoSuchRequest(request_id.to_owned()))?;
                    st.expected.remove(i);
                    st.early.push((request_id.to_owned(), answer.clone()));
                    None
                }
            }
        };
        self.send(WireMessage::ApprovalResponse {
            request_id: request_id.to_owned(),
            response,
            feedback: feedback.to_owned(),
        });
        if let Some(tx) = tx {
            let _ = tx.send(answer);
        }
        Ok(())
    }

    /// Closes request `request_id` refused, on the record: answered so if it is waiting (or
    /// expected), else its refusal recorded (a request a dead runtime left that nobody waits on).
    pub fn close_request(&self, request_id: &str) {
        if self.respond(request_id, ApprovalResponse::Reject, "").is_err() {
            self.send(WireMessage::ApprovalResponse {
                request_id: request_id.to_owned(),
                response: ApprovalResponse::Reject,
                feedback: String::new(),
            });
        }
    }

    /// Rejects every waiting approval request (the run was cancelled), each with its response —
    /// an expected one too (a recovered turn's, not waited on again yet).
    pub fn reject_pending(&self) {
        let ids: Vec<String> = {
            let st = self.0.borrow();
            st.pending.iter().map(|(id, _)| id.clone()).chain(st.expected.iter().cloned()).collect()
        };
        for id in ids {
            let _ = self.respond(&id, ApprovalResponse::Reject, "");
        }
    }

    /// Hands what the merge buffer holds to the merged sides (and the recorder) now; the next
    /// fragments start a new merged message. For a UI that wants merged text but at least
    /// every so often (a Worker streaming to its clients).
    pub fn flush(&self) {
        // What a sub-agent is still joining first: it reaches this wire's merged sides now too.
        let children: Vec<Wire> = self.0.borrow().children.iter().filter_map(|c| c.upgrade()).map(Wire).collect();
        for c in children {
            c.flush();
        }
        self.0.borrow_mut().flush();
        self.record();
    }

    /// Flushes the merge buffer, rejects waiting approvals and ends every side (each keeps
    /// what it already holds). Idempotent.
    pub fn shutdown(&self) {
        if self.is_shut() {
            return;
        }
        self.reject_pending();
        let sides = {
            let mut st = self.0.borrow_mut();
            st.flush();
            st.shut = true;
            let mut sides = std::mem::take(&mut st.raw);
            sides.append(&mut st.merged);
            sides
        };
        self.record();
        for s in sides {
            s.close();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::executor::block_on;
    use serde_json::{json, Value};

    fn other(kind: &str) -> WireMessage {
        WireMessage::Other { kind: kind.into(), payload: json!({}) }
    }

    fn ask(id: &str) -> ApprovalRequest {
        ApprovalRequest {
            id: id.into(),
            tool_call_id: "c".into(),
            sender: "agent".into(),
            action: "a".into(),
            description: String::new(),
            display: Vec::new(),
            before_start: false,
            agent_id: None,
            subagent_type: None,
        }
    }

    fn part(kind: &str, payload: Value) -> WireMessage {
        WireMessage::from_parts(kind.into(), payload)
    }

    #[test]
    fn a_sub_agents_wire_forwards_raw_as_it_comes_merged_when_flushed_and_a_flush_of_the_parent_flushes_it() {
        let parent = Wire::new();
        let (merged, raw) = (parent.ui_side(true), parent.ui_side(false));
        let child = Wire::new();
        let wrap =
            |m: &WireMessage| WireMessage::Other { kind: "Sub".into(), payload: serde_json::to_value(m).unwrap() };
        child.forward_to(&parent, Rc::new(wrap), wrap);
        for t in ["a", "b", "c"] {
            child.send(part("ContentPart", json!({"type": "text", "text": t})));
        }
        assert_eq!(raw.take_ready().len(), 3, "each piece reaches the parent's raw side as it comes");
        assert!(merged.take_ready().is_empty(), "still joining");
        // The parent's flush (a Worker's timer) flushes what the sub-agent is joining.
        parent.flush();
        let m = merged.take_ready();
        assert_eq!(m.len(), 1);
        assert_eq!(serde_json::to_value(&m[0]).unwrap()["payload"]["payload"]["text"], "abc");
        // And a parent's own text stays in order around it.
        parent.send(part("ContentPart", json!({"type": "text", "text": "p"})));
        child.send(part("ContentPart", json!({"type": "text", "text": "d"})));
        parent.flush();
        let kinds: Vec<String> = merged.take_ready().iter().map(|m| m.kind().to_owned()).collect();
        assert_eq!(
            kinds,
            ["ContentPart", "Sub"],
            "in the order they were sent: the parent's own, then the sub-agent's"
        );
        drop(child);
        parent.flush(); // a gone sub-agent's wire is skipped
    }

    #[test]
    fn merged_and_raw_sides_late_subscribers_and_shutdown() {
        let wire = Wire::new();
        let early = wire.ui_side(true);
        let raw = wire.ui_side(false);
        wire.send(WireMessage::TurnBegin {
            user_input: crate::engine::soul::agent::UserInput::Text("x".into()),
            turn_id: None,
            after_turn_id: None,
        });
        let late = wire.ui_side(true);
        let parts = [
            part("ContentPart", json!({"type": "think", "think": "a"})),
            part("ContentPart", json!({"type": "think", "think": "b", "encrypted": "sig"})),
            part("ContentPart", json!({"type": "think", "think": "c"})),
            part("ContentPart", json!({"type": "text", "text": "Hel"})),
            part("ContentPart", json!({"type": "text", "text": "lo"})),
            part("ToolCall", json!({"type": "function", "id": "t1", "function": {"name": "f", "arguments": null}})),
            part("ToolCallPart", json!({"type": "tool_call_part", "arguments_part": "{\"a\":", "tool_call_id": "t1"})),
            part("ToolCallPart", json!({"type": "tool_call_part", "arguments_part": "1}"})),
            part("ToolCallPart", json!({"type": "tool_call_part", "arguments_part": "{}", "tool_call_id": "t0"})),
        ];
        for p in &parts {
            assert!(matches!(p, WireMessage::Part(_)));
            wire.send(p.clone());
        }
        wire.send(WireMessage::TurnEnd);
        wire.shutdown();
        wire.send(other("TurnBegin"));
        assert_eq!(raw.take_ready().len(), 11);
        let l: Vec<String> = late.take_ready().iter().map(|m| m.kind().to_owned()).collect();
        assert_eq!(l, ["ContentPart", "ContentPart", "ContentPart", "ToolCall", "ToolCallPart", "TurnEnd"]);
        let e = early.take_ready();
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v[1]["payload"], json!({"type": "think", "think": "ab", "encrypted": "sig"}));
        assert_eq!(v[3]["payload"]["text"], "Hello");
        assert_eq!(v[4]["payload"]["function"]["arguments"], "{\"a\":1}");
        assert_eq!(v[5]["payload"]["arguments_part"], "{}");
        assert!(early.is_finished());
        assert_eq!(block_on(early.receive()), None);
        assert_eq!(wire.respond("nope", ApprovalResponse::Approve, ""), Err(WireError::NoSuchRequest("nope".into())));
    }

    #[test]
    fn flush_hands_over_what_is_merged_so_far() {
        let wire = Wire::new();
        let side = wire.ui_side(true);
        let text = |t: &str| part("ContentPart", json!({"type": "text", "text": t}));
        wire.send(text("Hel"));
        wire.send(text("lo"));
        assert!(side.take_ready().is_empty(), "still merging");
        wire.flush();
        wire.flush(); // nothing more to hand over
        wire.send(text(" world"));
        wire.shutdown();
        let texts: Vec<Value> =
            side.take_ready().iter().map(|m| serde_json::to_value(m).unwrap()["payload"]["text"].clone()).collect();
        assert_eq!(texts, [json!("Hello"), json!(" world")]);
    }

    #[test]
    fn a_message_that_is_not_a_part_shape_is_kept_as_it_came() {
        let m = part("ContentPart", json!({"type": "text", "text": 5}));
        assert!(matches!(&m, WireMessage::Other { kind, .. } if kind == "ContentPart"));
        let wire = Wire::new();
        let side = wire.ui_side(true);
        wire.send(m.clone());
        wire.send(m);
        assert_eq!(side.take_ready().len(), 2, "not merged");
    }

    #[test]
    fn approvals_are_answered_once_and_rejected_at_shutdown() {
        let wire = Wire::new();
        let side = wire.ui_side(true);
        let a = wire.request_approval(ask("r1"));
        wire.respond("r1", ApprovalResponse::Reject, "no").unwrap();
        assert_eq!(block_on(a), ApprovalAnswer { response: ApprovalResponse::Reject, feedback: "no".into() });
        assert!(wire.respond("r1", ApprovalResponse::Approve, "").is_err());
        let b = wire.request_approval(ask("r2"));
        wire.shutdown();
        assert_eq!(block_on(b).response, ApprovalResponse::Reject);
        let kinds: Vec<String> = side.take_ready().iter().map(|m| m.kind().to_owned()).collect();
        assert_eq!(kinds, ["ApprovalRequest", "ApprovalResponse", "ApprovalRequest", "ApprovalResponse"]);
    }

    /// A recovered turn's request announced before its wait: answered early, the answer is
    /// published then and handed to the wait when it begins; answered once only; an id nobody
    /// announced is refused as before.
    #[test]
    fn an_expected_request_answered_before_its_wait_gets_the_answer_when_the_wait_begins() {
        let wire = Wire::new();
        let side = wire.ui_side(true);
        wire.expect_approval("r1");
        assert!(wire.is_waiting("r1"));
        assert!(wire.respond("other", ApprovalResponse::Approve, "").is_err());
        wire.respond("r1", ApprovalResponse::Approve, "go").unwrap();
        assert!(!wire.is_waiting("r1"));
        assert!(wire.respond("r1", ApprovalResponse::Reject, "").is_err(), "the first answer counts");
        let answer = block_on(wire.await_approval("r1"));
        assert_eq!(answer, ApprovalAnswer { response: ApprovalResponse::Approve, feedback: "go".into() });
        // Not answered early: the wait takes it over and is answered as any other.
        wire.expect_approval("r2");
        let b = wire.await_approval("r2");
        assert!(wire.is_waiting("r2"));
        wire.respond("r2", ApprovalResponse::Reject, "").unwrap();
        assert_eq!(block_on(b).response, ApprovalResponse::Reject);
        let kinds: Vec<String> = side.take_ready().iter().map(|m| m.kind().to_owned()).collect();
        assert_eq!(kinds, ["ApprovalResponse", "ApprovalResponse"], "each answer published once, nothing asked again");
    }

    /// What a session asks before it hands an answer on: waiting from the moment the request
    /// is recorded (a recorder asking then sees it), not once answered or shut down; a
    /// recovered request waited on again is waiting without being published again.
    #[test]
    fn a_request_is_waiting_until_answered_or_shut_down() {
        let wire = Wire::new();
        let seen = Rc::new(RefCell::new(Vec::new()));
        let (w2, s2) = (wire.clone(), seen.clone());
        wire.set_recorder(Recorder::new(
            Box::new(move |line| {
                if line.contains("\"ApprovalRequest\"") {
                    s2.borrow_mut().push(w2.is_waiting("r1"));
                }
            }),
            Box::new(|| 0.0),
        ));
        assert!(!wire.is_waiting("r1"));
        let _a = wire.request_approval(ask("r1"));
        assert_eq!(*seen.borrow(), [true], "waiting when its request is recorded");
        assert!(wire.is_waiting("r1") && !wire.is_waiting("r2"));
        wire.respond("r1", ApprovalResponse::Approve, "").unwrap();
        assert!(!wire.is_waiting("r1"));
        let _b = wire.await_approval("r0");
        assert!(wire.is_waiting("r0"));
        assert_eq!(seen.borrow().len(), 1, "a request waited on again is not published again");
        wire.shutdown();
        assert!(!wire.is_waiting("r0"));
    }

    #[test]
    fn the_recording_replays_to_the_merged_sequence_and_a_sink_may_publish() {
        let wire = Wire::new();
        let lines = Rc::new(RefCell::new(Vec::new()));
        let l2 = lines.clone();
        let w2 = wire.clone();
        wire.set_recorder(Recorder::new(
            Box::new(move |line| {
                if line.contains("\"StepBegin\"") {
                    w2.send(other("Note")); // re-entrant publish
                }
                l2.borrow_mut().push(line)
            }),
            Box::new(|| 12.5),
        ));
        let side = wire.ui_side(true);
        wire.send(WireMessage::StepBegin { n: 1 });
        wire.send(part("ContentPart", json!({"type": "text", "text": "a"})));
        wire.send(part("ContentPart", json!({"type": "text", "text": "b"})));
        wire.shutdown();
        let merged = side.take_ready();
        let text = lines.borrow().join("\n") + "\n{damaged\n";
        assert_eq!(lines.borrow()[0], r#"{"type":"metadata","protocol_version":"1.10"}"#);
        assert!(lines.borrow()[1].starts_with(r#"{"timestamp":12.5,"message":{"type":"StepBegin""#));
        // Read back, a message is the same JSON (parts typed again, the rest kept as it came).
        let json_of = |ms: &[WireMessage]| serde_json::to_value(ms).unwrap();
        assert_eq!(json_of(&read_wire_record(&text)), json_of(&merged));
        let as_json: Vec<WireMessage> = serde_json::from_str(&wire_record_json(&text)).unwrap();
        assert_eq!(json_of(&as_json), json_of(&merged));
        assert_eq!(wire_record_json("{\"message\":{\"type\":\"X\",\"payload\":[]}}\nnope\n"), "[]");
        assert_eq!(wire.recorded(), 3);
    }
}
