//! Tool results and the `SimpleToolset` rules, with kosong's exact error results:
//! unknown name → "Tool `x` not found"; arguments that are not JSON → "Error parsing JSON
//! arguments: …"; a validator's message → "Error validating JSON arguments: …"; a handler
//! that failed → "Error running tool: …". Missing or empty arguments mean `{}`.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::engine::json::Arguments;
use crate::engine::message::{ContentPart, ToolCall};

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ToolOutput {
    Text(String),
    Parts(Vec<ContentPart>),
}

impl<'de> Deserialize<'de> for ToolOutput {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use crate::engine::message::TextOrParts;
        Ok(match TextOrParts::deserialize(d)? {
            TextOrParts::Text(t) => ToolOutput::Text(t),
            TextOrParts::Parts(p) => ToolOutput::Parts(p),
            TextOrParts::Null => ToolOutput::Text(String::new()),
        })
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolReturnValue {
    pub is_error: bool,
    pub output: ToolOutput,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub display: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extras: Option<Map<String, Value>>,
}

fn brief_block(brief: &str) -> Vec<Value> {
    if brief.is_empty() {
        Vec::new()
    } else {
        vec![json!({"type": "brief", "text": brief})]
    }
}

impl ToolReturnValue {
    /// kosong's `ToolOk`.
    pub fn ok(output: ToolOutput, message: &str, brief: &str) -> Self {
        ToolReturnValue { is_error: false, output, message: message.into(), display: brief_block(brief), extras: None }
    }
    /// kosong's `ToolError`.
    pub fn error(message: &str, brief: &str, output: ToolOutput) -> Self {
        ToolReturnValue { is_error: true, output, message: message.into(), display: brief_block(brief), extras: None }
    }

    pub fn not_found(name: &str) -> Self {
        let text = format!("Tool `{name}` not found");
        Self::error(&text, &text, ToolOutput::Text(String::new()))
    }
    pub fn parse_error(detail: &str) -> Self {
        Self::error(
            &format!("Error parsing JSON arguments: {detail}"),
            "Invalid arguments",
            ToolOutput::Text(String::new()),
        )
    }
    pub fn validate_error(detail: &str) -> Self {
        Self::error(
            &format!("Error validating JSON arguments: {detail}"),
            "Invalid arguments",
            ToolOutput::Text(String::new()),
        )
    }
    /// A tool stopped because it ran past its time: its signal was aborted, and this is its
    /// result (it counts like any other).
    pub fn timed_out(name: &str, ms: f64) -> Self {
        Self::error(
            &format!(
                "Tool `{name}` timed out after {} ms and was stopped.",
                crate::engine::json::number_text(ms.round())
            ),
            "Timed out",
            ToolOutput::Text(String::new()),
        )
    }
    pub fn runtime_error(detail: &str) -> Self {
        Self::error(&format!("Error running tool: {detail}"), "Tool runtime error", ToolOutput::Text(String::new()))
    }

    /// The text of the `brief` display block, if any.
    pub fn brief(&self) -> &str {
        self.display
            .iter()
            .find(|b| b.get("type").and_then(Value::as_str) == Some("brief"))
            .and_then(|b| b.get("text"))
            .and_then(Value::as_str)
            .unwrap_or("")
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    pub tool_call_id: String,
    pub return_value: ToolReturnValue,
}

/// How a handler can fail, short of returning an error result itself.
#[derive(Clone, Debug, PartialEq)]
pub enum ToolFailure {
    /// The arguments did not satisfy the tool's schema.
    Validate(String),
    /// The handler threw or rejected.
    Runtime(String),
}

/// The parameters of a tool that declares none: an object with any properties.
pub fn default_parameters() -> Value {
    json!({"type": "object", "properties": {}})
}

/// A tool name the providers accept (`$`: Moonshot's builtins): `^\$?[a-zA-Z0-9_-]{1,64}$`.
pub fn valid_tool_name(name: &str) -> bool {
    let bare = name.strip_prefix('$').unwrap_or(name);
    (1..=64).contains(&bare.len()) && bare.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Why the toolset refused a change.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolsetError {
    /// A tool that cannot be added (its name or parameters); a `TypeError` in JavaScript.
    Invalid(String),
    /// No tool of that name to remove.
    NotFound(String),
}

impl ToolsetError {
    pub fn message(&self) -> &str {
        match self {
            ToolsetError::Invalid(m) | ToolsetError::NotFound(m) => m,
        }
    }
}

/// A tool as the toolset keeps it: what the model is told, and whether it may start mid-stream.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    pub definition: crate::engine::providers::ToolDefinition,
    /// `false`: the tool starts only after the stream ended well.
    pub eager: bool,
    /// Running it twice for one call id does what running it once does: a call its runtime died
    /// under runs again when the turn is recovered (`soul::recovery`).
    pub idempotent: bool,
    /// How long a call may run before it is stopped ([`ToolTimeouts`]); `None`: the default.
    pub timeout_ms: Option<f64>,
    /// Asked through the wire before the handler starts (`needsApproval`).
    pub needs_approval: NeedsApproval,
}

/// Whether a tool's call is approved before its handler starts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NeedsApproval {
    #[default]
    No,
    Always,
    /// The tool's own function of the arguments decides.
    Decide,
}

/// How long a tool call may run: its tool's own limit, else the step's or agent's default, else
/// none. A call past it has its signal aborted (a `TimeoutError`) and gets
/// [`ToolReturnValue::timed_out`] as its result.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ToolTimeouts {
    pub default_ms: Option<f64>,
}

impl ToolTimeouts {
    /// The limit for a call of a tool whose own limit is `own`.
    pub fn for_tool(&self, own: Option<f64>) -> Option<f64> {
        own.or(self.default_ms)
    }
}

/// A time limit as the options take it (`what` names it in the error): a positive, finite
/// number of milliseconds.
pub fn check_timeout_ms(v: f64, what: &str) -> Result<f64, String> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(format!("{what} must be a positive number of milliseconds; got {}", crate::engine::json::number_text(v)))
    }
}

/// kosong's `SimpleToolset`: tools by name, each a spec and a handler. A name is added once
/// (`remove` it first to replace it).
pub struct SimpleToolset<H> {
    tools: Vec<(ToolSpec, H)>,
}

impl<H> Default for SimpleToolset<H> {
    fn default() -> Self {
        SimpleToolset { tools: Vec::new() }
    }
}

/// What `SimpleToolset::prepare` decides for a call.
pub enum Prepared<'a, H> {
    /// Run this handler with these (checked) arguments.
    Run(&'a H, Arguments<'a>),
    /// The call is answered already (unknown tool, arguments not JSON).
    Done(ToolResult),
}

impl<H> SimpleToolset<H> {
    /// Adds a tool. `parameters`: its JSON Schema, an object schema (`None`: any object).
    pub fn add(
        &mut self,
        name: &str,
        description: String,
        parameters: Option<Value>,
        eager: bool,
        handler: H,
    ) -> Result<(), ToolsetError> {
        let invalid = |m: String| Err(ToolsetError::Invalid(format!("SimpleToolset.add: {m}")));
        if !valid_tool_name(name) {
            return invalid(format!(
                "tool name `{name}` must match ^\\$?[a-zA-Z0-9_-]{{1,64}}$ (what the providers accept; `$`: Moonshot's builtins)"
            ));
        }
        if self.get(name).is_some() {
            return invalid(format!("there is already a tool named `{name}`"));
        }
        let parameters = match parameters {
            None => default_parameters(),
            Some(Value::Object(o)) if o.get("type").is_none_or(|t| t == "object") => Value::Object(o),
            Some(_) => {
                return invalid(format!(
                    "tool `{name}`: parameters must be a JSON Schema object ({{type: \"object\", properties: …}})"
                ))
            }
        };
        let definition = crate::engine::providers::ToolDefinition { name: name.to_owned(), description, parameters };
        self.tools.push((
            ToolSpec { definition, eager, idempotent: false, timeout_ms: None, needs_approval: NeedsApproval::No },
            handler,
        ));
        Ok(())
    }

    pub fn remove(&mut self, name: &str) -> Result<(), ToolsetError> {
        let before = self.tools.len();
        self.tools.retain(|(t, _)| t.definition.name != name);
        if self.tools.len() == before {
            return Err(ToolsetError::NotFound(format!("Tool `{name}` not found in the toolset.")));
        }
        Ok(())
    }

    pub fn get(&self, name: &str) -> Option<&H> {
        self.tools.iter().find(|(t, _)| t.definition.name == name).map(|(_, h)| h)
    }

    /// The tools, in the order they were added.
    pub fn specs(&self) -> impl Iterator<Item = &ToolSpec> {
        self.tools.iter().map(|(t, _)| t)
    }

    pub fn is_eager(&self, name: &str) -> bool {
        self.specs().find(|t| t.definition.name == name).is_none_or(|t| t.eager)
    }

    /// Declares the tool `name` idempotent (or not).
    pub fn set_idempotent(&mut self, name: &str, idempotent: bool) {
        if let Some((t, _)) = self.tools.iter_mut().find(|(t, _)| t.definition.name == name) {
            t.idempotent = idempotent;
        }
    }

    pub fn set_needs_approval(&mut self, name: &str, needs: NeedsApproval) {
        if let Some((t, _)) = self.tools.iter_mut().find(|(t, _)| t.definition.name == name) {
            t.needs_approval = needs;
        }
    }

    /// The tool `name`'s own time limit (checked: [`check_timeout_ms`]).
    pub fn set_timeout(&mut self, name: &str, ms: f64) -> Result<(), ToolsetError> {
        let ms = check_timeout_ms(ms, &format!("tool `{name}`: timeoutMs")).map_err(ToolsetError::Invalid)?;
        if let Some((t, _)) = self.tools.iter_mut().find(|(t, _)| t.definition.name == name) {
            t.timeout_ms = Some(ms);
        }
        Ok(())
    }

    /// The tool `name`, as the toolset keeps it.
    pub fn spec(&self, name: &str) -> Option<&ToolSpec> {
        self.specs().find(|t| t.definition.name == name)
    }

    pub fn timeout_ms(&self, name: &str) -> Option<f64> {
        self.spec(name).and_then(|t| t.timeout_ms)
    }

    pub fn is_idempotent(&self, name: &str) -> bool {
        self.specs().any(|t| t.definition.name == name && t.idempotent)
    }

    /// What a call needs before its handler runs: the tool (else "not found") and its arguments
    /// checked ([`Arguments::check`]; else a parse error result).
    pub fn prepare<'a>(&'a self, call: &'a ToolCall) -> Prepared<'a, H> {
        let Some(handler) = self.get(&call.function.name) else {
            return Prepared::Done(ToolResult {
                tool_call_id: call.id.clone(),
                return_value: ToolReturnValue::not_found(&call.function.name),
            });
        };
        match Arguments::check(call.function.arguments.as_deref()) {
            Ok(args) => Prepared::Run(handler, args),
            Err(e) => Prepared::Done(ToolResult {
                tool_call_id: call.id.clone(),
                return_value: ToolReturnValue::parse_error(&e),
            }),
        }
    }
}

/// Maps a handler's outcome to the result kosong gives.
pub fn settle(tool_call_id: String, outcome: Result<ToolReturnValue, ToolFailure>) -> ToolResult {
    let return_value = match outcome {
        Ok(v) => v,
        Err(ToolFailure::Validate(m)) => ToolReturnValue::validate_error(&m),
        Err(ToolFailure::Runtime(m)) => ToolReturnValue::runtime_error(&m),
    };
    ToolResult { tool_call_id, return_value }
}
