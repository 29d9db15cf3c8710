//! The Wire: the channel between a soul and its UI for one run, as kimi-cli's `Wire` is.
//!
//! The soul side publishes [`WireMessage`]s. Each UI side is a queue of the messages
//! published after it subscribed: a *raw* side sees every message as it was sent; a *merged*
//! side sees consecutive text, think and tool-call fragments joined (the merge rules of
//! [`StreamedMessagePart::merge_in_place`], the same ones `generate` assembles a message
//! with), flushed by any other message and at shutdown. The recorder writes the merged
//! messages as kimi-cli's `wire.jsonl`.
//!
//! Approval requests travel on the wire too: [`Wire::request_approval`] publishes an
//! `ApprovalRequest` and waits; [`Wire::respond`] publishes the `ApprovalResponse` and wakes
//! the waiter. Shutdown answers every waiting request with a rejection.
//!
//! Nothing here calls out while a `RefCell` is borrowed: callbacks (the recorder's sink) run
//! after the wire's state is released, so a sink may publish on the wire again.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context as TaskContext, Poll, Waker};

use futures::channel::oneshot;
use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{json, Value};

use crate::core::message::StreamedMessagePart;

/// kimi-cli's wire protocol version, written in the recording's first line.
pub const WIRE_PROTOCOL_VERSION: &str = "1.10";

/// One message on the wire: `{type, payload}`. The parts a merged side joins are typed; every
/// other message keeps its payload as JSON.
#[derive(Clone, Debug, PartialEq)]
pub enum WireMessage {
    /// `ContentPart`, `ToolCall` or `ToolCallPart`.
    Part(StreamedMessagePart),
    Event {
        kind: String,
        payload: Value,
    },
}

impl WireMessage {
    pub fn event(kind: &str, payload: Value) -> WireMessage {
        WireMessage::Event { kind: kind.to_owned(), payload }
    }

    /// A message read from JSON (`{type, payload}`): parts whose payload has their shape are
    /// typed (so they merge); anything else is kept as it came.
    pub fn from_parts(kind: String, payload: Value) -> WireMessage {
        // Read from the payload's text: the message model's readers are then compiled for
        // one deserializer (text) instead of two (text and `Value`), which the .wasm feels.
        fn typed<T: serde::de::DeserializeOwned>(payload: &Value) -> Option<T> {
            serde_json::from_str(&payload.to_string()).ok()
        }
        let typed = match kind.as_str() {
            "ContentPart" => typed(&payload).map(StreamedMessagePart::Content),
            "ToolCall" => typed(&payload).map(StreamedMessagePart::ToolCall),
            "ToolCallPart" => typed(&payload).map(StreamedMessagePart::ToolCallPart),
            _ => None,
        };
        match typed {
            Some(p) => WireMessage::Part(p),
            None => WireMessage::Event { kind, payload },
        }
    }

    pub fn kind(&self) -> &str {
        match self {
            WireMessage::Part(StreamedMessagePart::Content(_)) => "ContentPart",
            WireMessage::Part(StreamedMessagePart::ToolCall(_)) => "ToolCall",
            WireMessage::Part(StreamedMessagePart::ToolCallPart(_)) => "ToolCallPart",
            WireMessage::Event { kind, .. } => kind,
        }
    }

    /// Absorbs `next` when the merge rules join them.
    fn merge(&mut self, next: &WireMessage) -> bool {
        match (self, next) {
            (WireMessage::Part(a), WireMessage::Part(b)) => a.merge_in_place(b),
            _ => false,
        }
    }
}

impl Serialize for WireMessage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("WireMessage", 2)?;
        st.serialize_field("type", self.kind())?;
        match self {
            WireMessage::Part(p) => st.serialize_field("payload", p)?,
            WireMessage::Event { payload, .. } => st.serialize_field("payload", payload)?,
        }
        st.end()
    }
}

impl<'de> Deserialize<'de> for WireMessage {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Raw {
            #[serde(rename = "type")]
            kind: String,
            payload: Value,
        }
        let r = Raw::deserialize(d)?;
        if !r.payload.is_object() {
            return Err(serde::de::Error::custom("a wire message's payload must be an object"));
        }
        Ok(WireMessage::from_parts(r.kind, r.payload))
    }
}

/// The first line of `wire.jsonl`.
pub fn metadata_line() -> String {
    format!("{{\"type\":\"metadata\",\"protocol_version\":\"{WIRE_PROTOCOL_VERSION}\"}}")
}

/// One record line of `wire.jsonl`: `{"timestamp": <seconds>, "message": …}`.
pub fn record_line(timestamp_s: f64, message: &WireMessage) -> String {
    #[derive(Serialize)]
    struct Record<'a> {
        timestamp: f64,
        message: &'a WireMessage,
    }
    serde_json::to_string(&Record { timestamp: timestamp_s, message }).unwrap_or_default()
}

/// The `message` of a `wire.jsonl` line, as its raw JSON text, when the line is a record of a
/// message (`{type: string, payload: object}`); `None` for the metadata line, blank lines and
/// lines that are not records (a damaged line, a write cut short).
pub fn record_message(line: &str) -> Option<&serde_json::value::RawValue> {
    #[derive(Deserialize)]
    struct Record<'a> {
        #[serde(borrow)]
        message: &'a serde_json::value::RawValue,
    }
    let r: Record<'_> = serde_json::from_str(line).ok()?;
    // Checked through a `Value` (its reader is in the .wasm anyway), not a derived shape.
    let Ok(Value::Object(m)) = serde_json::from_str::<Value>(r.message.get()) else { return None };
    (m.get("type").is_some_and(Value::is_string) && m.get("payload").is_some_and(Value::is_object)).then_some(r.message)
}

/// Reads `wire.jsonl` back into messages (the records [`record_message`] accepts).
pub fn read_wire_record(jsonl: &str) -> Vec<WireMessage> {
    jsonl.lines().filter_map(record_message).filter_map(|m| serde_json::from_str(m.get()).ok()).collect()
}

/// The same messages as the JSON text of an array, each exactly as it was recorded (for a
/// reader with an exact number parser of its own: JavaScript's `JSON.parse`).
pub fn wire_record_json(jsonl: &str) -> String {
    let mut out = String::from("[");
    for m in jsonl.lines().filter_map(record_message) {
        if out.len() > 1 {
            out.push(',');
        }
        out.push_str(m.get());
    }
    out.push(']');
    out
}

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
struct SideState {
    items: VecDeque<WireMessage>,
    closed: bool,
    waker: Option<Waker>,
}

/// One subscriber's queue. Dropping every handle to it (or [`UiSide::detach`]) stops the
/// wire from filling it.
#[derive(Clone, Default)]
pub struct UiSide(Rc<RefCell<SideState>>);

impl UiSide {
    fn push(&self, m: WireMessage) {
        let waker = {
            let mut st = self.0.borrow_mut();
            if st.closed {
                return;
            }
            st.items.push_back(m);
            st.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    fn close(&self) {
        let waker = {
            let mut st = self.0.borrow_mut();
            st.closed = true;
            st.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Every message that is ready, oldest first (empty when none is).
    pub fn take_ready(&self) -> Vec<WireMessage> {
        self.0.borrow_mut().items.drain(..).collect()
    }

    /// The wire has shut down and every message was taken.
    pub fn is_finished(&self) -> bool {
        let st = self.0.borrow();
        st.closed && st.items.is_empty()
    }

    /// Resolves when a message is ready or the side is finished.
    pub fn ready(&self) -> Ready {
        Ready(self.clone())
    }

    /// The next message, or `None` once the wire has shut down and all were read.
    pub async fn receive(&self) -> Option<WireMessage> {
        self.ready().await;
        self.0.borrow_mut().items.pop_front()
    }

    /// Stops receiving: the queue is emptied and closed.
    pub fn detach(&self) {
        let mut st = self.0.borrow_mut();
        st.items.clear();
        st.closed = true;
    }
}

/// See [`UiSide::ready`].
pub struct Ready(UiSide);

impl Future for Ready {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<()> {
        let mut st = self.0 .0.borrow_mut();
        if !st.items.is_empty() || st.closed {
            return Poll::Ready(());
        }
        st.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// Writes the merged messages of a wire as `wire.jsonl` lines through a sink.
pub struct Recorder {
    sink: Box<dyn FnMut(String)>,
    now_s: Box<dyn Fn() -> f64>,
    wrote_header: bool,
    count: u64,
}

impl Recorder {
    /// `now_s` gives the timestamp of each record, in seconds.
    pub fn new(sink: Box<dyn FnMut(String)>, now_s: Box<dyn Fn() -> f64>) -> Recorder {
        Recorder { sink, now_s, wrote_header: false, count: 0 }
    }

    fn write(&mut self, m: &WireMessage) {
        if !self.wrote_header {
            self.wrote_header = true;
            (self.sink)(metadata_line());
        }
        let line = record_line((self.now_s)(), m);
        (self.sink)(line);
        self.count += 1;
    }
}

#[derive(Default)]
struct WireState {
    raw: Vec<UiSide>,
    merged: Vec<UiSide>,
    buffer: Option<WireMessage>,
    shut: bool,
    pending: Vec<(String, oneshot::Sender<ApprovalAnswer>)>,
    recorder: Option<Recorder>,
    /// A recorder is set (it is taken out of `recorder` while it writes).
    recording: bool,
    /// Merged messages waiting for the recorder (written once the state is released).
    to_record: Vec<WireMessage>,
    recorded: u64,
}

impl WireState {
    fn publish_merged(&mut self, m: WireMessage) {
        self.merged.retain(|s| !s.0.borrow().closed);
        for s in &self.merged {
            s.push(m.clone());
        }
        if self.recording {
            self.to_record.push(m);
        }
    }

    fn flush(&mut self) {
        if let Some(b) = self.buffer.take() {
            self.publish_merged(b);
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

    /// Messages the recorder has written.
    pub fn recorded(&self) -> u64 {
        self.0.borrow().recorded
    }

    pub fn is_shut(&self) -> bool {
        self.0.borrow().shut
    }

    /// Publishes a message (ignored after shutdown).
    pub fn send(&self, m: WireMessage) {
        {
            let mut st = self.0.borrow_mut();
            if st.shut {
                return;
            }
            st.raw.retain(|s| !s.0.borrow().closed);
            for s in &st.raw {
                s.push(m.clone());
            }
            let mergeable = matches!(m, WireMessage::Part(_));
            if mergeable {
                if let Some(b) = st.buffer.as_mut() {
                    if b.merge(&m) {
                        return;
                    }
                }
                st.flush();
                st.buffer = Some(m);
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

    /// Publishes an `ApprovalRequest` (`payload` must carry its `id`) and resolves with the
    /// answer; a rejection without feedback if the wire shuts down first.
    pub fn request_approval(&self, id: String, payload: Value) -> impl Future<Output = ApprovalAnswer> {
        let (tx, rx) = oneshot::channel();
        let shut = {
            let mut st = self.0.borrow_mut();
            if !st.shut {
                st.pending.push((id, tx));
            }
            st.shut
        };
        if !shut {
            self.send(WireMessage::event("ApprovalRequest", payload));
        }
        async move { rx.await.unwrap_or(ApprovalAnswer { response: ApprovalResponse::Reject, feedback: String::new() }) }
    }

    /// Answers a waiting approval request: publishes the `ApprovalResponse`, then wakes the
    /// tool that asked.
    pub fn respond(&self, request_id: &str, response: ApprovalResponse, feedback: &str) -> Result<(), WireError> {
        let tx = {
            let mut st = self.0.borrow_mut();
            let i = st
                .pending
                .iter()
                .position(|(id, _)| id == request_id)
                .ok_or_else(|| WireError::NoSuchRequest(request_id.to_owned()))?;
            st.pending.remove(i).1
        };
        self.send(WireMessage::event(
            "ApprovalResponse",
            json!({"request_id": request_id, "response": response.as_str(), "feedback": feedback}),
        ));
        let _ = tx.send(ApprovalAnswer { response, feedback: feedback.to_owned() });
        Ok(())
    }

    /// Rejects every waiting approval request (the run was cancelled), each with its response.
    pub fn reject_pending(&self) {
        let ids: Vec<String> = self.0.borrow().pending.iter().map(|(id, _)| id.clone()).collect();
        for id in ids {
            let _ = self.respond(&id, ApprovalResponse::Reject, "");
        }
    }

    /// Hands what the merge buffer holds to the merged sides (and the recorder) now; the next
    /// fragments start a new merged message. For a UI that wants merged text but at least
    /// every so often (a Worker streaming to its clients).
    pub fn flush(&self) {
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

    fn part(kind: &str, payload: Value) -> WireMessage {
        WireMessage::from_parts(kind.into(), payload)
    }

    #[test]
    fn merged_and_raw_sides_late_subscribers_and_shutdown() {
        let wire = Wire::new();
        let early = wire.ui_side(true);
        let raw = wire.ui_side(false);
        wire.send(WireMessage::event("TurnBegin", json!({"user_input": "x"})));
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
        wire.send(WireMessage::event("TurnEnd", json!({})));
        wire.shutdown();
        wire.send(WireMessage::event("TurnBegin", json!({})));
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
        assert!(matches!(&m, WireMessage::Event { kind, .. } if kind == "ContentPart"));
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
        let a = wire.request_approval("r1".into(), json!({"id": "r1"}));
        wire.respond("r1", ApprovalResponse::Reject, "no").unwrap();
        assert_eq!(block_on(a), ApprovalAnswer { response: ApprovalResponse::Reject, feedback: "no".into() });
        assert!(wire.respond("r1", ApprovalResponse::Approve, "").is_err());
        let b = wire.request_approval("r2".into(), json!({"id": "r2"}));
        wire.shutdown();
        assert_eq!(block_on(b).response, ApprovalResponse::Reject);
        let kinds: Vec<String> = side.take_ready().iter().map(|m| m.kind().to_owned()).collect();
        assert_eq!(kinds, ["ApprovalRequest", "ApprovalResponse", "ApprovalRequest", "ApprovalResponse"]);
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
                    w2.send(WireMessage::event("Note", json!({}))); // re-entrant publish
                }
                l2.borrow_mut().push(line)
            }),
            Box::new(|| 12.5),
        ));
        let side = wire.ui_side(true);
        wire.send(WireMessage::event("StepBegin", json!({"n": 1})));
        wire.send(part("ContentPart", json!({"type": "text", "text": "a"})));
        wire.send(part("ContentPart", json!({"type": "text", "text": "b"})));
        wire.shutdown();
        let merged = side.take_ready();
        let text = lines.borrow().join("\n") + "\n{damaged\n";
        assert_eq!(lines.borrow()[0], r#"{"type":"metadata","protocol_version":"1.10"}"#);
        assert!(lines.borrow()[1].starts_with(r#"{"timestamp":12.5,"message":{"type":"StepBegin""#));
        assert_eq!(read_wire_record(&text), merged);
        let as_json: Vec<WireMessage> = serde_json::from_str(&wire_record_json(&text)).unwrap();
        assert_eq!(as_json, merged);
        assert_eq!(wire_record_json("{\"message\":{\"type\":\"X\",\"payload\":[]}}\nnope\n"), "[]");
        assert_eq!(wire.recorded(), 3);
    }
}
