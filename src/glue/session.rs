//! `SessionCore`: the core's sans-IO `Session` (`engine::session`) for the JS `Session`, which
//! performs its writes through a store, tells its events and keeps its timers. Values cross as
//! JSON text: a write's ops, an event, what a store held.

use std::rc::Rc;

use js_sys::Function;
use serde_json::Value;
use wasm_bindgen::prelude::*;

use super::context::ContextCore;
use super::error::type_error;
use super::get;
use crate::engine::session::{Event, EventKind, Op, Refused, Session, SessionLimits, Stop, Stored};
use crate::engine::soul::context::SharedContext;

#[wasm_bindgen]
pub struct SessionCore {
    pub(crate) session: Session,
}

/// A JSON string: `s` quoted and escaped.
fn quoted(s: &str) -> String {
    Value::from(s).to_string()
}

fn event_json(e: &Event) -> String {
    let kind = match e.kind {
        EventKind::Wire => "wire",
        EventKind::End => "end",
    };
    format!("{{\"id\":{},\"kind\":\"{kind}\",\"data\":{}}}", e.id, quoted(&e.data))
}

/// What a store holds, as the JS store gives it: `{context: string[], events: [{id, kind,
/// data}], meta: string | null, agents?: {[agentId]: string[]}}`.
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
    if events.windows(2).any(|w| w[0].id >= w[1].id) {
        return Err("events out of id order (a store gives them oldest first)".into());
    }
    let meta = match v.get("meta") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err("`meta` must be a string or null".into()),
    };
    // Sub-agents' contexts: `{agentId: string[]}`; absent in a store that keeps none.
    let agents = match v.get("agents") {
        None | Some(Value::Null) => None,
        Some(Value::Object(o)) => Some(
            o.iter()
                .map(|(id, lines)| match lines {
                    Value::Array(a) => a
                        .iter()
                        .map(|l| l.as_str().map(str::to_owned).ok_or("`agents` must hold arrays of strings"))
                        .collect::<Result<Vec<String>, &str>>()
                        .map(|l| (id.clone(), l)),
                    _ => Err("`agents` must hold arrays of strings"),
                })
                .collect::<Result<Vec<_>, &str>>()?,
        ),
        Some(_) => return Err("`agents` must be an object (agent id: its context's lines)".into()),
    };
    Ok(Stored { context, events, meta, agents })
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
        watch_ms: n("watchMs").map_or(d.watch_ms, |x| x),
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
    // A limit says which one, and its value.
    let limit = match r {
        Refused::MessageTooLarge { max, .. } => Some(("maxMessageBytes", *max as f64)),
        Refused::SessionTooLarge { max } => Some(("maxSessionBytes", *max as f64)),
        Refused::TooManyTurns { max } => Some(("maxTurns", *max as f64)),
        _ => None,
    };
    if let Some((option, max)) = limit {
        let _ = js_sys::Reflect::set(&o, &"option".into(), &option.into());
        let _ = js_sys::Reflect::set(&o, &"limit".into(), &max.into());
    }
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

    /// `notify()` is called (synchronously; it should only schedule) whenever there may be work;
    /// `undefined` lets it go (a closed session: nothing holds the JS side through the core).
    #[wasm_bindgen(js_name = setNotify)]
    pub fn set_notify(&self, notify: Option<Function>) {
        self.session.set_notify(notify.map(|f| -> Rc<dyn Fn()> {
            Rc::new(move || {
                let _ = f.call0(&JsValue::UNDEFINED);
            })
        }));
    }

    /// A new context holding the session's stored one (a turn runs on it).
    pub fn context(&self) -> ContextCore {
        ContextCore { ctx: SharedContext::new(self.session.context()), store_error: Default::default() }
    }

    /// Everything the session asks of its host now, in one crossing, as JSON text:
    /// `{write?: {seq, ops}, events: [{id, kind, data}], stop?: "cancel" | "drop", flush?: true
    /// (flush the turn's wire), cancelStored?: true, resume?: true, timeout?: ms, wake?: ms | null (a
    /// host that can die unnoticed is to look again by then, or need not: only when that is news,
    /// [`crate::engine::session::Session::poll_wake`])}` — a write only when no events wait (they come after it
    /// commits). `ops`: `{op: "event", id, kind, data}`, `{op: "trimEvents", before}`, `{op:
    /// "truncateEvents", after}`, `{op: "context", line}`, `{op: "truncateContext", keep}`, `{op:
    /// "agentContext", agent, line}`, `{op: "truncateAgentContext", agent, keep}`, `{op: "meta",
    /// value}` (the last op: the commit record).
    pub fn poll(&self) -> String {
        let s = &self.session;
        let mut out = String::from("{\"events\":[");
        let mut first = true;
        while let Some(e) = s.poll_event() {
            if !first {
                out.push(',');
            }
            first = false;
            out.push_str(&event_json(&e));
        }
        out.push(']');
        if let Some(w) = s.poll_write() {
            let ops: Vec<String> = w
                .ops
                .iter()
                .map(|op| match op {
                    Op::Event(e) => format!("{{\"op\":\"event\",{}", &event_json(e)[1..]),
                    Op::TrimEvents { before } => format!("{{\"op\":\"trimEvents\",\"before\":{before}}}"),
                    Op::TruncateEvents { after } => format!("{{\"op\":\"truncateEvents\",\"after\":{after}}}"),
                    Op::Context(line) => format!("{{\"op\":\"context\",\"line\":{}}}", quoted(line)),
                    Op::TruncateContext { keep } => format!("{{\"op\":\"truncateContext\",\"keep\":{keep}}}"),
                    Op::AgentContext { agent, line } => {
                        format!("{{\"op\":\"agentContext\",\"agent\":{},\"line\":{}}}", quoted(agent), quoted(line))
                    }
                    Op::TruncateAgentContext { agent, keep } => {
                        format!("{{\"op\":\"truncateAgentContext\",\"agent\":{},\"keep\":{keep}}}", quoted(agent))
                    }
                    Op::Meta(m) => format!("{{\"op\":\"meta\",\"value\":{}}}", quoted(m)),
                })
                .collect();
            out.push_str(&format!(",\"write\":{{\"seq\":{},\"ops\":[{}]}}", w.seq, ops.join(",")));
        }
        match s.poll_stop() {
            Some(Stop::Cancel) => out.push_str(",\"stop\":\"cancel\""),
            Some(Stop::Drop) => out.push_str(",\"stop\":\"drop\""),
            None => {}
        }
        if s.poll_flush() {
            out.push_str(",\"flush\":true");
        }
        if s.poll_cancel_stored() {
            out.push_str(",\"cancelStored\":true");
        }
        if let Some(end) = s.poll_unstored_end() {
            out.push_str(",\"unstoredEnd\":");
            out.push_str(&end.to_json());
        }
        if s.has_resume() {
            out.push_str(",\"resume\":true");
        }
        if let Some(at) = s.poll_timeout() {
            out.push_str(&format!(",\"timeout\":{}", crate::engine::json::number_text(at)));
        }
        match s.poll_wake() {
            Some(Some(at)) => out.push_str(&format!(",\"wake\":{}", crate::engine::json::number_text(at))),
            Some(None) => out.push_str(",\"wake\":null"),
            None => {}
        }
        out.push('}');
        out
    }

    /// The outcome of the write `seq` (`ok`: it committed whole), and then what the session asks
    /// now (as [`SessionCore::poll`]: one crossing for both).
    #[wasm_bindgen(js_name = writeDone)]
    pub fn write_done(&self, seq: f64, ok: bool, now_ms: f64) -> String {
        self.session.write_done(seq as u64, ok, now_ms);
        self.poll()
    }

    /// The stored events after `after`, as the JSON text of an array.
    #[wasm_bindgen(js_name = eventsAfter)]
    pub fn events_after(&self, after: f64) -> String {
        let list: Vec<String> = self.session.events_after(after.max(0.0) as u64).iter().map(event_json).collect();
        format!("[{}]", list.join(","))
    }

    #[wasm_bindgen(js_name = handleTimeout)]
    pub fn handle_timeout(&self, now_ms: f64) {
        self.session.handle_timeout(now_ms);
    }

    /// Asks the running turn to stop (stored first); `false` when none runs.
    pub fn cancel(&self) -> bool {
        self.session.cancel()
    }

    #[wasm_bindgen(getter)]
    pub fn running(&self) -> bool {
        self.session.running()
    }

    /// No turn runs and every event is stored and told.
    #[wasm_bindgen(getter)]
    pub fn settled(&self) -> bool {
        self.session.settled()
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
}
