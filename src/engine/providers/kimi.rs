//! Moonshot's Kimi API: Chat Completions in Moonshot's dialect (`KimiProvider`).
//!
//! What differs from OpenAI's: think parts travel as `reasoning_content` both ways (an empty
//! one still yields a think part); tools named `$…` are Moonshot's builtin functions; every
//! parameter schema needs a `type`, which is filled in (the caller's object is not
//! changed); thinking is switched with `thinking: {type: enabled | disabled}`; the token
//! limit is sent as `max_completion_tokens`. As in kosong 0.56's `Kimi` provider, the only
//! default is the base URL: no token limit and no temperature are sent unless given (the
//! server's own defaults apply). Structured output goes as Moonshot's JSON mode (see
//! [`json_mode`]).

use serde_json::{json, Value};

use super::openai_chat::{Dialect, OpenAIChatConfig, DEFAULT_REASONING_KEY};
use super::ToolDefinition;
use crate::engine::error::{ChatProviderError, FailureKind};
use crate::engine::output::OutputFormat;

pub const KIMI_BASE_URL: &str = "https://api.moonshot.ai/v1";

/// The settings in Moonshot's dialect (the base URL defaults to Moonshot's).
pub fn into_kimi(mut c: OpenAIChatConfig) -> OpenAIChatConfig {
    c.dialect = Dialect::Kimi;
    c.reasoning_key.get_or_insert_with(|| DEFAULT_REASONING_KEY.to_owned());
    c.http.base_url.get_or_insert_with(|| KIMI_BASE_URL.to_owned());
    c
}

/// A tool as Moonshot takes it: `$`-named ones are builtin functions.
pub fn tool(t: &ToolDefinition) -> Value {
    if t.name.starts_with('$') {
        return json!({"type": "builtin_function", "function": {"name": t.name}});
    }
    json!({"type": "function", "function": {
        "name": t.name, "description": t.description, "parameters": with_schema_types(&t.parameters)}})
}

/// Structured output in Moonshot's form: the Kimi API documents JSON mode,
/// `response_format: {type: "json_object"}`, not a schema field, and asks that the prompt describe
/// the document. So the schema is told in the system prompt (after the caller's), and the answer
/// is one JSON object; a schema whose top level is not an object is refused before anything is
/// sent (JSON mode answers with objects only). Gives the `response_format` and the system prompt.
pub fn json_mode(output: &OutputFormat, system_prompt: &str) -> Result<(Value, String), ChatProviderError> {
    if let Some(t) = output.top_type().filter(|t| *t != "object") {
        return Err(ChatProviderError::failed(
            FailureKind::InvalidRequest,
            format!(
                "KimiProvider: the Kimi API's JSON mode answers with a JSON object, and this output schema's top level is `{t}`; wrap it in an object (`{{\"type\": \"object\", \"properties\": {{\"items\": …}}}}`)"
            ),
        ));
    }
    let mut prompt = String::with_capacity(system_prompt.len() + 160);
    if !system_prompt.is_empty() {
        prompt.push_str(system_prompt);
        prompt.push_str("\n\n");
    }
    prompt.push_str("Answer with one JSON object and nothing else. It must match this JSON Schema (");
    prompt.push_str(output.name());
    prompt.push_str("):\n");
    prompt.push_str(&output.schema.to_string());
    Ok((json!({"type": "json_object"}), prompt))
}

/// `thinking: {type}` for an effort (`off` disables it).
pub fn thinking(effort: Option<&str>) -> Option<Value> {
    let kind = if effort? == "off" { "disabled" } else { "enabled" };
    Some(json!({ "type": kind }))
}

/// A copy of a JSON Schema where every schema that lacks `type` gets one, inferred from its
/// `enum`/`const` values or its structure (`properties` → object, `items` → array).
/// Moonshot rejects schemas without it; the caller's object is not changed.
pub fn with_schema_types(schema: &Value) -> Value {
    let mut s = schema.clone();
    fill_types(&mut s, 0);
    s
}

fn json_type(v: &Value) -> Option<&'static str> {
    Some(match v {
        Value::String(_) => "string",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::Null => "null",
    })
}

fn fill_types(schema: &mut Value, depth: usize) {
    // Schemas nest as deep as the caller wrote them; a bound keeps hostile input from
    // exhausting the stack.
    if depth > 64 {
        return;
    }
    let Value::Object(obj) = schema else { return };
    for key in ["properties", "$defs", "definitions", "patternProperties"] {
        if let Some(Value::Object(props)) = obj.get_mut(key) {
            for v in props.values_mut() {
                fill_types(v, depth + 1);
            }
        }
    }
    for key in ["items", "additionalProperties", "not"] {
        if let Some(v) = obj.get_mut(key) {
            match v {
                Value::Array(items) => items.iter_mut().for_each(|i| fill_types(i, depth + 1)),
                v => fill_types(v, depth + 1),
            }
        }
    }
    for key in ["anyOf", "oneOf", "allOf", "prefixItems"] {
        if let Some(Value::Array(items)) = obj.get_mut(key) {
            items.iter_mut().for_each(|i| fill_types(i, depth + 1));
        }
    }
    if obj.contains_key("type") || obj.contains_key("$ref") {
        return;
    }
    let inferred = if let Some(c) = obj.get("const") {
        json_type(c)
    } else if let Some(Value::Array(values)) = obj.get("enum") {
        let kinds: Vec<&'static str> = values.iter().filter_map(json_type).collect();
        match kinds.first() {
            Some(first) if kinds.iter().all(|k| k == first) => Some(*first),
            Some(_) if kinds.iter().all(|k| *k == "integer" || *k == "number") => Some("number"),
            _ => None,
        }
    } else if obj.contains_key("properties") {
        Some("object")
    } else if obj.contains_key("items") {
        Some("array")
    } else {
        None
    };
    if let Some(t) = inferred {
        obj.insert("type".into(), json!(t));
    }
}
