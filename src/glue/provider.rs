//! `ProviderCore`: a JS provider object read once into the core's [`Provider`], with the fetch
//! and the timeout its transport uses. Made when the provider is first used; freed by the
//! garbage collector with its provider (wasm-bindgen's weak references).

use std::rc::Rc;

use js_sys::Function;
use wasm_bindgen::prelude::*;

use super::error::{type_error, GlueError};
use super::transport::FetchTransport;
use crate::engine::generate::Limits;
use crate::engine::model::{Deadlines, Fallback, Provider, ProviderModel, Trigger};

/// One provider and what its transport needs.
#[derive(Clone)]
struct Single {
    provider: Rc<Provider>,
    fetch: Option<Function>,
    timeout_ms: Option<f64>,
}

impl Single {
    /// The transport one call sends through (the runtime's `fetch` found now, when none was
    /// given), with the provider's time limits.
    fn transport(&self) -> FetchTransport {
        let mut deadlines = Deadlines { chunk_ms: self.timeout_ms, ..Deadlines::default() };
        if let Provider::Http(p) = &*self.provider {
            deadlines.first_chunk_ms = p.http().first_chunk_timeout_ms;
            deadlines.step_ms = p.http().step_timeout_ms;
        }
        FetchTransport::new(self.fetch.clone(), deadlines)
    }
}

/// A provider, or a `FallbackProvider`'s members in order (`first`, then `rest`) with the errors
/// that move on from a member at once.
#[wasm_bindgen]
pub struct ProviderCore {
    first: Single,
    rest: Vec<Single>,
    at_once: Vec<Trigger>,
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
        Ok(ProviderCore::one(Single {
            provider: Rc::new(provider),
            fetch,
            timeout_ms: timeout_ms.filter(|t| *t > 0.0),
        }))
    }

    /// `scheme://host[:port]` an HTTP provider's requests go to (a fallback provider's first
    /// member's); `undefined` for a scripted one.
    #[wasm_bindgen(getter)]
    pub fn origin(&self) -> Option<String> {
        match &*self.first.provider {
            Provider::Http(p) => p.origin(),
            Provider::Scripted(_) => None,
        }
    }

    /// The same provider sending through `fetch` instead (`ChaosProvider` puts its faults there;
    /// for a fallback provider, every member's requests go through it).
    #[wasm_bindgen(js_name = withFetch)]
    pub fn with_fetch(&self, fetch: Function) -> ProviderCore {
        let with = |s: &Single| Single { fetch: Some(fetch.clone()), ..s.clone() };
        ProviderCore {
            first: with(&self.first),
            rest: self.rest.iter().map(with).collect(),
            at_once: self.at_once.clone(),
        }
    }

    /// A scripted provider's next script, used up (throws when none is left).
    #[wasm_bindgen(js_name = takeScript)]
    pub fn take_script(&self) -> Result<String, JsValue> {
        self.first.provider.take_script().map_err(|e| GlueError::from(e).into_js())
    }

    /// A scripted provider: `next()` gives its next script (`undefined` when none is left).
    pub fn scripted(next: Function) -> ProviderCore {
        let provider =
            Provider::scripted_from(move || next.call0(&JsValue::UNDEFINED).ok().and_then(|s| s.as_string()));
        ProviderCore::one(Single { provider: Rc::new(provider), fetch: None, timeout_ms: None })
    }

    /// A fallback provider that begins with `first`'s members; `at_once` (JSON): the kinds
    /// (strings) and statuses (numbers) that move on from a member without its retries.
    pub fn fallback(first: &ProviderCore, at_once: &str) -> Result<ProviderCore, JsValue> {
        let bad = |why: String| type_error(&format!("FallbackProvider: `fallbackOn`: {why}"));
        let list: Vec<serde_json::Value> =
            serde_json::from_str(at_once).map_err(|_| bad("must be a list of error kinds and HTTP statuses".into()))?;
        let at_once = list.iter().map(Trigger::read).collect::<Result<Vec<_>, _>>().map_err(bad)?;
        Ok(ProviderCore { first: first.first.clone(), rest: first.rest.clone(), at_once })
    }

    /// Adds `next`'s members after these (a fallback provider among the members adds its own).
    #[wasm_bindgen(js_name = addMember)]
    pub fn add_member(&mut self, next: &ProviderCore) {
        self.rest.push(next.first.clone());
        self.rest.extend(next.rest.iter().cloned());
    }
}

/// Each member's provider with the transport one call sends through, and the triggers.
#[derive(Clone)]
pub struct Members {
    first: (Rc<Provider>, FetchTransport),
    rest: Vec<(Rc<Provider>, FetchTransport)>,
    at_once: Vec<Trigger>,
}

impl Members {
    /// The model one call runs over: the members in order, with the call's limits; `warn`, the
    /// caller's logger, hears what the transport gives up on (an answer that cannot be read again).
    pub fn model(&self, limits: Limits, warn: Option<&Function>) -> Fallback<ProviderModel<'_, FetchTransport>> {
        fn model<'a>(
            m: &'a (Rc<Provider>, FetchTransport),
            limits: Limits,
            warn: Option<&Function>,
        ) -> ProviderModel<'a, FetchTransport> {
            ProviderModel::new(&m.0, m.1.clone().with_warn(warn.cloned()), limits)
        }
        Fallback::new(
            model(&self.first, limits, warn),
            self.rest.iter().map(|m| model(m, limits, warn)),
            self.at_once.clone(),
        )
    }
}

impl ProviderCore {
    fn one(single: Single) -> ProviderCore {
        ProviderCore { first: single, rest: Vec::new(), at_once: Vec::new() }
    }

    /// What one call runs over (the runtime's `fetch` found now, for a member given none).
    pub fn members_for_call(&self) -> Members {
        let pair = |s: &Single| (s.provider.clone(), s.transport());
        Members { first: pair(&self.first), rest: self.rest.iter().map(pair).collect(), at_once: self.at_once.clone() }
    }
}
