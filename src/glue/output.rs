//! The `output` option as the glue reads it (`{json, schema, validate}` from `js/step.js`), and
//! the check of an answer's output: parsed once (`JSON.parse`), then the caller's validator.

use js_sys::Function;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use super::error::{type_error, GlueError};
use super::get;
use crate::engine::output::{malformed, OutputFormat};

/// Structured output, as one call (or an agent) asks for it.
pub struct OutputOption {
    pub format: OutputFormat,
    /// `validate(schema, value)`: a string says what is wrong (the toolset's hook, or the
    /// caller's own); the schema as the caller gave it.
    validator: Option<(Function, JsValue)>,
}

impl OutputOption {
    /// Reads `hooks.output` (`what` names the option in errors: `options`, `Agent`).
    pub fn read(hooks: &JsValue, what: &str) -> Result<Option<OutputOption>, JsValue> {
        let Some(o) = get(hooks, "output") else { return Ok(None) };
        let json = get(&o, "json").and_then(|j| j.as_string()).unwrap_or_default();
        let format = OutputFormat::from_json(&json, what).map_err(|e| type_error(&e))?;
        let validator = get(&o, "validate")
            .and_then(|f| f.dyn_into::<Function>().ok())
            .map(|f| (f, get(&o, "schema").unwrap_or(JsValue::UNDEFINED)));
        Ok(Some(OutputOption { format, validator }))
    }

    /// The output `json` (an answer's text, one JSON value) as a JS value, once the validator
    /// passed it; otherwise what is wrong, or what the validator threw.
    pub fn check(&self, json: &str) -> Result<JsValue, Problem> {
        let value = js_sys::JSON::parse(json).map_err(|_| Problem::Why("the answer's text is not JSON".into()))?;
        if let Some((validate, schema)) = &self.validator {
            let problem = validate.call2(&JsValue::UNDEFINED, schema, &value).map_err(Problem::Thrown)?;
            if problem.is_instance_of::<js_sys::Promise>() {
                return Err(Problem::Why(
                    "the validator returned a Promise: it must answer synchronously (a message, or nothing when the value is good)".into(),
                ));
            }
            if let Some(why) = problem.as_string().filter(|w| !w.is_empty()) {
                return Err(Problem::Why(format!("the answer does not match the schema: {why}")));
            }
        }
        Ok(value)
    }

    /// [`Self::check`] for a call: a problem is the `malformed_output` error with the text; a
    /// validator that throws fails the call with what it threw.
    pub fn accept(&self, json: String) -> Result<JsValue, GlueError> {
        self.check(&json).map_err(|p| match p {
            Problem::Why(why) => malformed(&why, json).into(),
            Problem::Thrown(e) => GlueError::Js(e),
        })
    }
}

/// Why an output was refused.
pub enum Problem {
    Why(String),
    Thrown(JsValue),
}
