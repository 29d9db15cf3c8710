//! Tool results and the `SimpleToolset` rules, with kosong's exact error results:
//! unknown name → "Tool `x` not found"; arguments that are not JSON → "Error parsing JSON
//! arguments: …"; a validator's message → "Error validating JSON arguments: …"; a handler
//! that failed → "Error running tool: …". Missing or empty arguments mean `{}`.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::core::message::{ContentPart, ToolCall};

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ToolOutput {
    Text(String),
    Parts(Vec<ContentPart>),
}

impl<'de> Deserialize<'de> for ToolOutput {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use crate::core::message::TextOrParts;
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

/// Tools by name. Adding a tool with a taken name replaces it.
pub struct SimpleToolset<H> {
    tools: Vec<(String, H)>,
}

impl<H> Default for SimpleToolset<H> {
    fn default() -> Self {
        SimpleToolset { tools: Vec::new() }
    }
}

/// What `SimpleToolset::prepare` decides for a call.
pub enum Prepared<'a, H> {
    /// Run this handler with these arguments.
    Run(&'a H, &'a str),
    /// The call is answered already (unknown tool, arguments not JSON).
    Done(ToolResult),
}

impl<H> SimpleToolset<H> {
    pub fn add(&mut self, name: String, handler: H) {
        match self.tools.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = handler,
            None => self.tools.push((name, handler)),
        }
    }

    /// Removes a tool; false when there was none of that name.
    pub fn remove(&mut self, name: &str) -> bool {
        let before = self.tools.len();
        self.tools.retain(|(n, _)| n != name);
        self.tools.len() != before
    }

    pub fn get(&self, name: &str) -> Option<&H> {
        self.tools.iter().find(|(n, _)| n == name).map(|(_, h)| h)
    }

    pub fn prepare<'a>(&'a self, call: &'a ToolCall) -> Prepared<'a, H> {
        let Some(handler) = self.get(&call.function.name) else {
            return Prepared::Done(ToolResult {
                tool_call_id: call.id.clone(),
                return_value: ToolReturnValue::not_found(&call.function.name),
            });
        };
        let raw = match call.function.arguments.as_deref() {
            None | Some("") => "{}",
            Some(a) => a,
        };
        if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(raw) {
            return Prepared::Done(ToolResult {
                tool_call_id: call.id.clone(),
                return_value: ToolReturnValue::parse_error(&e.to_string()),
            });
        }
        Prepared::Run(handler, raw)
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
