//! `ProviderCore`: a JS provider object read once into the core's [`Provider`], with the fetch
//! and the timeout its transport uses. Made when the provider is first used; freed by the
//! garbage collector with its provider (wasm-bindgen's weak references).

use std::rc::Rc;

use js_sys::Function;
use wasm_bindgen::prelude::*;

use super::error::{type_error, GlueError};
use super::transport::FetchTransport;
use crate::engine::model::{Deadlines, Provider};

#[wasm_bindgen]
pub struct ProviderCore {
    provider: Rc<Provider>,
    fetch: Option<Function>,
    timeout_ms: Option<f64>,
}

#[wasm_bindgen]
impl ProviderCore {
    /// `spec`: an HTTP provider's options as JSON (see `Provider::from_json`; the core's rules for
    /// their values fail here, as a `TypeError` naming `who`, the provider's class).
    #[wasm_bindgen(constructor)]
    pub fn new(
        who: &str,
        spec: &str,
        fetch: Option<Function>,
        timeout_ms: Option<f64>,
    ) -> Result<ProviderCore, JsValue> {
        let provider = Provider::from_json(spec).map_err(|e| type_error(&format!("{who}: {e}")))?;
        Ok(ProviderCore { provider: Rc::new(provider), fetch, timeout_ms: timeout_ms.filter(|t| *t > 0.0) })
    }

    /// `scheme://host[:port]` an HTTP provider's requests go to; `undefined` for a scripted one.
    #[wasm_bindgen(getter)]
    pub fn origin(&self) -> Option<String> {
        match &*self.provider() {
            crate::engine::model::Provider::Http(p) => p.origin(),
            crate::engine::model::Provider::Scripted(_) => None,
        }
    }

    /// The same provider sending through `fetch` instead (`ChaosProvider` puts its faults there).
    #[wasm_bindgen(js_name = withFetch)]
    pub fn with_fetch(&self, fetch: Function) -> ProviderCore {
        ProviderCore { provider: self.provider.clone(), fetch: Some(fetch), timeout_ms: self.timeout_ms }
    }

    /// A scripted provider's next script, used up (throws when none is left).
    #[wasm_bindgen(js_name = takeScript)]
    pub fn take_script(&self) -> Result<String, JsValue> {
        self.provider.take_script().map_err(|e| GlueError::from(e).into_js())
    }

    /// A scripted provider: `next()` gives its next script (`undefined` when none is left).
    pub fn scripted(next: Function) -> ProviderCore {
        let provider =
            Provider::scripted_from(move || next.call0(&JsValue::UNDEFINED).ok().and_then(|s| s.as_string()));
        ProviderCore { provider: Rc::new(provider), fetch: None, timeout_ms: None }
    }
}

impl ProviderCore {
    pub fn provider(&self) -> Rc<Provider> {
        self.provider.clone()
    }

    /// The transport one call sends through (the runtime's `fetch` found now, when none was given),
    /// with the provider's time limits.
    pub fn transport(&self) -> FetchTransport {
        let mut deadlines = Deadlines { chunk_ms: self.timeout_ms, ..Deadlines::default() };
        if let Provider::Http(p) = &*self.provider {
            deadlines.first_chunk_ms = p.http().first_chunk_timeout_ms;
            deadlines.step_ms = p.http().step_timeout_ms;
        }
        FetchTransport::new(self.fetch.clone(), deadlines)
    }
}
