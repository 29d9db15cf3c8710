//! Futures over an `AbortSignal` and over `setTimeout`, each of which cleans up after itself
//! when dropped: the abort listener is removed, the timer is cleared. Nothing the engine
//! registers outlives the operation that registered it.

use js_sys::{Function, Promise};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

use super::sys::{self, AbortSignal};

/// Watches a signal. `fired()` resolves with the signal's reason once it aborts.
pub struct AbortWatch {
    signal: AbortSignal,
    promise: Promise,
    listener: Option<Closure<dyn FnMut()>>,
}

impl AbortWatch {
    pub fn new(signal: AbortSignal) -> AbortWatch {
        let mut resolve: Option<Function> = None;
        let promise = Promise::new(&mut |res, _rej| resolve = Some(res));
        let listener = resolve.map(|resolve| {
            let l = Closure::<dyn FnMut()>::new(move || {
                let _ = resolve.call0(&JsValue::UNDEFINED);
            });
            signal.add_event_listener("abort", l.as_ref().unchecked_ref());
            l
        });
        AbortWatch { signal, promise, listener }
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
            self.signal.remove_event_listener("abort", l.as_ref().unchecked_ref());
        }
    }
}

/// A one-shot timer; dropping it clears the timeout.
pub struct Timer {
    id: JsValue,
    promise: Promise,
    _callback: Closure<dyn FnMut()>,
}

impl Timer {
    pub fn new(ms: f64) -> Timer {
        let mut resolve: Option<Function> = None;
        let promise = Promise::new(&mut |res, _rej| resolve = Some(res));
        let callback = Closure::<dyn FnMut()>::new(move || {
            if let Some(r) = &resolve {
                let _ = r.call0(&JsValue::UNDEFINED);
            }
        });
        let id = sys::set_timeout(callback.as_ref().unchecked_ref(), ms);
        Timer { id, promise, _callback: callback }
    }

    pub async fn elapsed(&self) {
        let _ = JsFuture::from(self.promise.clone()).await;
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        sys::clear_timeout(&self.id);
    }
}
