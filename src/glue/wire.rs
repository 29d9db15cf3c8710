//! `WireCore`, `WireSideCore`, `readWireRecord` and `runSoul`: thin handles on the core's Wire
//! (`engine::soul::wire`) and `run_soul` for the JS `Wire`, `WireRecorder` and `runSoul`.

use js_sys::{Function, Promise};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

use super::agent::WebEnv;
use super::convert::read_js;
use super::error::type_error;
use super::get;
use super::signals::{AbortWatch, Awaited};
use super::sys::{self, AbortSignal};
use crate::engine::soul::run::{self, RunOutcome};
use crate::engine::soul::wire::{self, ApprovalRequest, ApprovalResponse, Recorder, UiSide, Wire, WireMessage};

/// The state behind the JS `Wire`.
#[wasm_bindgen]
pub struct WireCore {
    pub(crate) wire: Wire,
}

#[wasm_bindgen]
impl WireCore {
    #[wasm_bindgen(constructor)]
    pub fn new() -> WireCore {
        WireCore { wire: Wire::new() }
    }

    #[wasm_bindgen(js_name = uiSide)]
    pub fn ui_side(&self, merge: bool) -> WireSideCore {
        WireSideCore { side: self.wire.ui_side(merge) }
    }

    /// Publishes `{type, payload}`.
    pub fn send(&self, message: JsValue) -> Result<(), JsValue> {
        let m: WireMessage =
            read_js(&message).map_err(|_| type_error("a wire message is {type: string, payload: object}"))?;
        self.wire.send(m);
        Ok(())
    }

    pub fn respond(&self, request_id: &str, response: &str, feedback: &str) -> Result<(), JsValue> {
        let r = ApprovalResponse::parse(response).ok_or_else(|| {
            type_error(&format!("response must be \"approve\", \"approve_for_session\" or \"reject\"; got {response}"))
        })?;
        self.wire.respond(request_id, r, feedback).map_err(|e| js_sys::Error::new(&e.to_string()).into())
    }

    /// Announces a recovered turn's waiting approval request before the turn runs: an answer
    /// given from now on is taken (see `Wire::expect_approval`).
    #[wasm_bindgen(js_name = expectApproval)]
    pub fn expect_approval(&self, request_id: &str) {
        self.wire.expect_approval(request_id)
    }

    /// Whether an approval request of this id waits for its answer.
    #[wasm_bindgen(js_name = isWaiting)]
    pub fn is_waiting(&self, request_id: &str) -> bool {
        self.wire.is_waiting(request_id)
    }

    /// Publishes an `ApprovalRequest` (the core names it and shapes it: kimi-cli's payload, no
    /// display blocks); resolves `{response, feedback}`. `req`: `{tool_call_id, sender, action,
    /// description}`, strings.
    #[wasm_bindgen(js_name = requestApproval)]
    pub fn request_approval(&self, req: JsValue) -> Result<Promise, JsValue> {
        let field = |k: &str| {
            get(&req, k)
                .map(|v| v.as_string().ok_or_else(|| type_error(&format!("requestApproval: `{k}` must be a string"))))
        };
        let text = |k: &str| field(k).transpose().map(Option::unwrap_or_default);
        let request = ApprovalRequest {
            id: sys::random_uuid(),
            tool_call_id: text("tool_call_id")?,
            sender: text("sender")?,
            action: text("action")?,
            description: text("description")?,
            display: Vec::new(),
            before_start: false,
            agent_id: None,
            subagent_type: None,
        };
        let answer = self.wire.request_approval(request);
        Ok(future_to_promise(async move {
            let a = answer.await;
            let o = js_sys::Object::new();
            let _ = js_sys::Reflect::set(&o, &"response".into(), &a.response.as_str().into());
            let _ = js_sys::Reflect::set(&o, &"feedback".into(), &a.feedback.into());
            Ok(o.into())
        }))
    }

    /// Rejects every waiting approval request (the run was cancelled).
    #[wasm_bindgen(js_name = rejectPending)]
    pub fn reject_pending(&self) {
        self.wire.reject_pending();
    }

    pub fn shutdown(&self) {
        self.wire.shutdown();
    }

    pub fn flush(&self) {
        self.wire.flush();
    }

    /// Records the merged messages as `wire.jsonl` lines through `sink(line)`; `append`: the
    /// recording goes on one begun before (its metadata line is not written again).
    #[wasm_bindgen(js_name = setRecorder)]
    pub fn set_recorder(&self, sink: Function, append: bool) {
        let write = move |line: String| {
            let _ = sink.call1(&JsValue::UNDEFINED, &JsValue::from_str(&line));
        };
        let clock = Box::new(|| sys::date_now() / 1000.0);
        self.wire.set_recorder(if append {
            Recorder::appending(Box::new(write), clock)
        } else {
            Recorder::new(Box::new(write), clock)
        });
    }

    #[wasm_bindgen(getter)]
    pub fn recorded(&self) -> f64 {
        self.wire.recorded() as f64
    }
}

impl Default for WireCore {
    fn default() -> Self {
        Self::new()
    }
}

/// One subscriber of a wire.
#[wasm_bindgen]
pub struct WireSideCore {
    side: UiSide,
}

#[wasm_bindgen]
impl WireSideCore {
    /// Every message that is ready, as the JSON text of an array (`undefined` when none is).
    /// JSON text on purpose: a batch crosses in 2 calls this way, where building it field by
    /// field (serde-wasm-bindgen) took about 15 calls per message (bench/crossings.mjs).
    pub fn take(&self) -> Option<String> {
        let ready = self.side.take_ready();
        if ready.is_empty() {
            return None;
        }
        serde_json::to_string(&ready).ok()
    }

    /// Resolves when a message is ready or the side is finished.
    pub fn wait(&self) -> Promise {
        let ready = self.side.ready();
        future_to_promise(async move {
            ready.await;
            Ok(JsValue::UNDEFINED)
        })
    }

    #[wasm_bindgen(getter)]
    pub fn finished(&self) -> bool {
        self.side.is_finished()
    }

    pub fn detach(&self) {
        self.side.detach();
    }
}

/// `wire.jsonl` back into messages, as the JSON text of an array of the recorded messages
/// (parsed by `JSON.parse`, whose numbers are exact: serde_json's are not without its
/// `float_roundtrip` feature, 18 KB of .wasm).
#[wasm_bindgen(js_name = readWireRecord)]
pub fn read_wire_record(jsonl: &str) -> String {
    wire::wire_record_json(jsonl)
}

/// What closes a turn whose runtime died mid-way, from its recorded messages (JSON text of an
/// array): the messages to publish (JSON text), as the core closes a cancelled turn.
#[wasm_bindgen(js_name = closeInterruptedTurn)]
pub fn close_interrupted_turn(messages: &str) -> Result<String, JsValue> {
    let list: Vec<WireMessage> =
        serde_json::from_str(messages).map_err(|e| type_error(&format!("closeInterruptedTurn: {e}")))?;
    Ok(serde_json::to_string(&crate::engine::soul::agent::close_interrupted_turn(&list))
        .unwrap_or_else(|_| "[]".into()))
}

/// Runs a soul beside its UI loop (the core's `run_soul`): `soul` and `ui` are their promises,
/// `recorded()` the promise that every recorded line is written. Resolves `true` when `signal`
/// cancelled the run, `false` when the soul finished; rejects with the soul's own error.
#[wasm_bindgen(js_name = runSoul)]
pub fn run_soul(
    wire: &WireCore,
    soul: Promise,
    ui: Promise,
    signal: AbortSignal,
    recorded: Option<Function>,
) -> Promise {
    let wire = wire.wire.clone();
    future_to_promise(async move {
        let watch = AbortWatch::new(signal);
        let soul = Awaited::new(&soul);
        let ui = async move {
            let _ = Awaited::new(&ui).await;
        };
        let cancel = async {
            watch.fired().await;
        };
        let recorded = move || async move {
            if let Some(p) = recorded.and_then(|f| f.call0(&JsValue::UNDEFINED).ok()) {
                let _ = Awaited::new(&p).await;
            }
        };
        match run::run_soul(&wire, async { soul.await.map(|_| ()) }, ui, cancel, recorded, &WebEnv).await {
            RunOutcome::Done => Ok(JsValue::FALSE),
            RunOutcome::Cancelled => Ok(JsValue::TRUE),
            RunOutcome::Failed(e) => Err(e),
        }
    })
}
