//! `SessionCore`: the core's sans-IO `Session` (`engine::session`) for the JS `Session`, which
//! performs its writes through a store, tells its events and keeps its timers. Values cross as
//! JSON text: a write's ops, an event, what a store held.

use std::rc::Rc;

use js_sys::Function;
use serde_json::{json, Value};
use wasm_bindgen::prelude::*;

use super::context::ContextCore;
use super::error::type_error;
use super::get;
use super::wire::WireCore;
use crate::engine::session::{Event, EventKind, Op, Refused, Session, SessionLimits, Stop, Stored};
use crate::engine::soul::context::SharedContext;

#[wasm_bindgen]
pub struct SessionCore {
    pub(crate) session: Session,
}

fn event_json(e: &Event) -> Value {
    let kind = match e.kind {
        EventKind::Wire => "wire",
        EventKind::End => "end",
    };
    json!({"id": e.id, "kind": kind, "data": e.data})
}

/// What a store holds, as the JS store gives it: `{context: string[], events: [{id, kind,
/// data}], meta: string | null}`.
fn read_stored(text: &str) -> Result<Stored, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let strings = |k: &str| -> Result<Vec<String>, String> {
        match v.get(k) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(a)) => a
                .iter()
                .map(|l| l.as_str().map(str::to_owned).ok_or_else(|| format!("`{k}` must hold strings")))
                .collect(),
            Some(_) => Err(format!("`{k}` must be an array")),
        }
    };
    let context = strings("context")?;
    let mut events = Vec::new();
    if let Some(Value::Array(list)) = v.get("events") {
        for e in list {
            let id = e.get("id").and_then(Value::as_u64).ok_or("an event needs an integer `id`")?;
            let kind = match e.get("kind").and_then(Value::as_str) {
                Some("wire") => EventKind::Wire,
                Some("end") => EventKind::End,
                _ => return Err("an event's `kind` is \"wire\" or \"end\"".into()),
            };
            let data = e.get("data").and_then(Value::as_str).ok_or("an event needs a string `data`")?.to_owned();
            events.push(Event { id, kind, data });
        }
    }
    // In id order, whatever order the store kept them in.
    events.sort_by_key(|e| e.id);
    let meta = match v.get("meta") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err("`meta` must be a string or null".into()),
    };
    Ok(Stored { context, events, meta })
}

/// The limits as the JS options give them (`{maxMessageBytes, maxSessionBytes, maxTurns,
/// maxResumes, stallMs}`; the JS layer checked each).
fn read_limits(v: &JsValue) -> SessionLimits {
    let d = SessionLimits::default();
    let n = |k: &str| get(v, k).and_then(|x| x.as_f64()).filter(|x| x.is_finite() && *x >= 0.0);
    SessionLimits {
        max_message_bytes: n("maxMessageBytes").map_or(d.max_message_bytes, |x| x as usize),
        max_session_bytes: n("maxSessionBytes").map_or(d.max_session_bytes, |x| x as usize),
        max_turns: n("maxTurns").map_or(d.max_turns, |x| x as u32),
        max_resumes: n("maxResumes").map_or(d.max_resumes, |x| x as u32),
        stall_ms: n("stallMs").map_or(d.stall_ms, |x| x),
        ..d
    }
}

/// A refusal as the JS layer throws it: `{refused: kind, message}`.
pub(crate) fn refusal_to_js(r: &Refused) -> JsValue {
    let kind = match r {
        Refused::Busy(_) => "busy",
        Refused::Empty => "empty",
        Refused::MessageTooLarge { .. } | Refused::SessionTooLarge { .. } | Refused::TooManyTurns { .. } => "limit",
    };
    let o = js_sys::Object::new();
    let _ = js_sys::Reflect::set(&o, &"refused".into(), &kind.into());
    let _ = js_sys::Reflect::set(&o, &"message".into(), &r.to_string().into());
    o.into()
}

#[wasm_bindgen]
impl SessionCore {
    /// Opens the session over what its store held (`stored`: JSON text, see `read_stored`).
    #[wasm_bindgen(constructor)]
    pub fn new(stored: &str, limits: JsValue, now_ms: f64) -> Result<SessionCore, JsValue> {
        let stored = read_stored(stored).map_err(|e| type_error(&format!("SessionStore.open() gave {e}")))?;
        Ok(SessionCore { session: Session::open(stored, read_limits(&limits), now_ms) })
    }

    /// `notify()` is called (synchronously; it should only schedule) whenever there may be work.
    #[wasm_bindgen(js_name = setNotify)]
    pub fn set_notify(&self, notify: Function) {
        self.session.set_notify(Rc::new(move || {
            let _ = notify.call0(&JsValue::UNDEFINED);
        }));
    }

    /// A new context holding the session's stored one (a turn runs on it).
    pub fn context(&self) -> ContextCore {
        ContextCore { ctx: SharedContext::new(self.session.context()), store_error: Default::default() }
    }

    /// The next write: `{seq, ops}` as JSON text (`ops`: `{op: "event", id, kind, data}`,
    /// `{op: "trimEvents", before}`, `{op: "truncateEvents", after}`, `{op: "context", line}`,
    /// `{op: "truncateContext", keep}`, `{op: "meta", value}` — the last op, the commit record).
    #[wasm_bindgen(js_name = pollWrite)]
    pub fn poll_write(&self) -> Option<String> {
        let w = self.session.poll_write()?;
        let ops: Vec<Value> = w
            .ops
            .iter()
            .map(|op| match op {
                Op::Event(e) => {
                    let mut v = event_json(e);
                    v["op"] = "event".into();
                    v
                }
                Op::TrimEvents { before } => json!({"op": "trimEvents", "before": before}),
                Op::TruncateEvents { after } => json!({"op": "truncateEvents", "after": after}),
                Op::Context(line) => json!({"op": "context", "line": line}),
                Op::TruncateContext { keep } => json!({"op": "truncateContext", "keep": keep}),
                Op::Meta(m) => json!({"op": "meta", "value": m}),
            })
            .collect();
        Some(json!({"seq": w.seq, "ops": ops}).to_string())
    }

    #[wasm_bindgen(js_name = writeDone)]
    pub fn write_done(&self, seq: f64, ok: bool, now_ms: f64) {
        self.session.write_done(seq as u64, ok, now_ms);
    }

    /// The next event a client may be told (`{id, kind, data}` as JSON text), in id order.
    #[wasm_bindgen(js_name = pollEvent)]
    pub fn poll_event(&self) -> Option<String> {
        self.session.poll_event().map(|e| event_json(&e).to_string())
    }

    /// The stored events after `after`, as the JSON text of an array.
    #[wasm_bindgen(js_name = eventsAfter)]
    pub fn events_after(&self, after: f64) -> String {
        let list: Vec<Value> = self.session.events_after(after.max(0.0) as u64).iter().map(event_json).collect();
        Value::Array(list).to_string()
    }

    /// `"cancel"` or `"drop"` (see `engine::session::Stop`), once.
    #[wasm_bindgen(js_name = pollStop)]
    pub fn poll_stop(&self) -> Option<String> {
        self.session.poll_stop().map(|s| match s {
            Stop::Cancel => "cancel".into(),
            Stop::Drop => "drop".into(),
        })
    }

    #[wasm_bindgen(js_name = pollCancelStored)]
    pub fn poll_cancel_stored(&self) -> bool {
        self.session.poll_cancel_stored()
    }

    #[wasm_bindgen(js_name = pollTimeout)]
    pub fn poll_timeout(&self) -> Option<f64> {
        self.session.poll_timeout()
    }

    #[wasm_bindgen(js_name = handleTimeout)]
    pub fn handle_timeout(&self, now_ms: f64) {
        self.session.handle_timeout(now_ms);
    }

    /// While a turn runs that is not waiting on a person: when to look again (a Durable Object's
    /// alarm), in ms since the epoch.
    pub fn watch(&self) -> Option<f64> {
        self.session.watch()
    }

    /// Asks the running turn to stop (stored first); `false` when none runs.
    pub fn cancel(&self) -> bool {
        self.session.cancel()
    }

    #[wasm_bindgen(getter)]
    pub fn running(&self) -> bool {
        self.session.running()
    }

    /// A turn is to be resumed (or closed) from the store.
    #[wasm_bindgen(js_name = hasResume)]
    pub fn has_resume(&self) -> bool {
        self.session.has_resume()
    }

    #[wasm_bindgen(js_name = lastEventId, getter)]
    pub fn last_event_id(&self) -> f64 {
        self.session.last_event_id() as f64
    }

    /// The id before the running (or last) turn's first event.
    #[wasm_bindgen(js_name = turnStart, getter)]
    pub fn turn_start(&self) -> f64 {
        self.session.turn_start() as f64
    }

    #[wasm_bindgen(getter)]
    pub fn turns(&self) -> u32 {
        self.session.turns()
    }

    /// Installs the session on a turn's wire and context (before the turn starts).
    pub fn attach(&self, wire: &WireCore, context: &ContextCore) {
        self.session.attach(&wire.wire, &context.ctx);
    }
}
