//! Futures over an `AbortSignal` and over a JS promise, each of which cleans up after itself
//! when dropped: the abort listener is removed, the awaited race is settled. (Timers are
//! `gloo-timers`' `TimeoutFuture`, which clears its timeout when dropped.) Nothing the engine
//! registers outlives the operation that registered it.

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::{Function, Promise};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

use super::sys::{AbortController, AbortSignal};

/// Watches a signal. `fired()` resolves with the signal's reason once it aborts.
pub struct AbortWatch {
    signal: AbortSignal,
    promise: Promise,
    resolve: Option<Function>,
    listener: Option<Closure<dyn FnMut()>>,
}

impl AbortWatch {
    pub fn new(signal: AbortSignal) -> AbortWatch {
        let mut resolve: Option<Function> = None;
        let promise = Promise::new(&mut |res, _rej| resolve = Some(res));
        let listener = resolve.clone().map(|resolve| {
            let l = Closure::<dyn FnMut()>::new(move || {
                let _ = resolve.call0(&JsValue::UNDEFINED);
            });
            let _ = signal.add_event_listener_with_callback("abort", l.as_ref().unchecked_ref());
            l
        });
        AbortWatch { signal, promise, resolve, listener }
    }

    /// Resolves with `signal.reason` when the signal aborts (at once if it already has).
    pub async fn fired(&self) -> JsValue {
        if !self.signal.aborted() {
            let _ = JsFuture::from(self.promise.clone()).await;
        }
        self.signal.reason()
    }
}

impl Drop for AbortWatch {
    fn drop(&mut self) {
        if let Some(l) = self.listener.take() {
            let _ = self.signal.remove_event_listener_with_callback("abort", l.as_ref().unchecked_ref());
        }
        // Settle the promise so no `JsFuture` still waiting on it is left behind.
        if let Some(r) = self.resolve.take() {
            let _ = r.call0(&JsValue::UNDEFINED);
        }
    }
}

/// Aborts a controller when dropped before [`AbortOnDrop::disarm`]: whatever the engine drops
/// unfinished — a request still waiting for its headers, a tool whose run was cancelled or whose
/// step failed — is told to stop. The reason is `reason_from`'s when that signal has aborted.
pub struct AbortOnDrop {
    ctrl: Option<Target>,
    reason_from: Option<AbortSignal>,
    /// The reason when `reason_from` has none: the run's own (a turn past its time limit).
    reason_else: Option<StopReason>,
}

/// What an [`AbortOnDrop`] aborts: a controller of the engine's, or one the JS side keeps (a tool
/// call's own controller, made by the tool port as it calls the handler, so making it costs no
/// crossing): `abort(reason)` reaches it, crossing only when something is aborted.
enum Target {
    Ctrl(AbortController),
    Far(Box<dyn FnOnce(&JsValue)>),
}

impl Target {
    fn abort(self, reason: &JsValue) {
        match self {
            Target::Ctrl(c) => c.abort_with_reason(reason),
            Target::Far(abort) => abort(reason),
        }
    }
}

/// Why a run stopped itself (set by the runtime before it drops the calls still running).
pub type StopReason = Rc<RefCell<Option<JsValue>>>;

impl AbortOnDrop {
    pub fn new(ctrl: AbortController, reason_from: Option<AbortSignal>) -> AbortOnDrop {
        AbortOnDrop { ctrl: Some(Target::Ctrl(ctrl)), reason_from, reason_else: None }
    }

    /// Aborts through `abort(reason)`: a controller the JS side keeps.
    pub fn far(abort: Box<dyn FnOnce(&JsValue)>, reason_from: Option<AbortSignal>) -> AbortOnDrop {
        AbortOnDrop { ctrl: Some(Target::Far(abort)), reason_from, reason_else: None }
    }

    /// With the run's own reason for when `reason_from` has not aborted.
    pub fn or_reason(mut self, reason: &StopReason) -> AbortOnDrop {
        self.reason_else = Some(reason.clone());
        self
    }

    /// It finished (or something else owns the controller now): nothing to abort.
    pub fn disarm(&mut self) {
        self.ctrl = None;
    }

    /// Aborts now with `reason` (a tool that ran past its time), and never again.
    pub fn abort_with(&mut self, reason: &JsValue) {
        if let Some(ctrl) = self.ctrl.take() {
            ctrl.abort(reason);
        }
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(ctrl) = self.ctrl.take() {
            let reason = self.reason_from.as_ref().filter(|s| s.aborted()).map(|s| s.reason());
            let reason = reason.or_else(|| self.reason_else.as_ref().and_then(|r| r.borrow().clone()));
            ctrl.abort(&reason.unwrap_or(JsValue::UNDEFINED));
        }
    }
}

/// Awaits a JS promise (or thenable). If this future is dropped before the promise settles,
/// it settles the awaited race itself: a `JsFuture` keeps its callbacks (and itself) alive
/// until its promise settles, so one left on a promise that never settles — a tool that
/// ignores its signal — would stay in the instance's memory for good.
pub struct Awaited {
    future: JsFuture,
    cancel: Option<Function>,
}

impl Awaited {
    pub fn new(thenable: &JsValue) -> Awaited {
        let mut cancel: Option<Function> = None;
        let canceller = Promise::new(&mut |_resolve, reject| cancel = Some(reject));
        let race = Promise::race(&js_sys::Array::of2(&Promise::resolve(thenable), &canceller));
        Awaited { future: JsFuture::from(race), cancel }
    }
}

impl std::future::Future for Awaited {
    type Output = Result<JsValue, JsValue>;
    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        let out = std::pin::Pin::new(&mut self.future).poll(cx);
        if out.is_ready() {
            self.cancel = None; // settled: nothing to clean up
        }
        out
    }
}

impl Drop for Awaited {
    fn drop(&mut self) {
        if let Some(cancel) = self.cancel.take() {
            let _ = cancel.call0(&JsValue::UNDEFINED);
        }
    }
}
