//! Structured output: the answer asked for as JSON that matches a schema, and the checks on the
//! answer that came back.
//!
//! [`OutputFormat`] is the caller's `output` option (`{schema, name?, strict?}`), read once; each
//! provider's request builder sends it in that provider's native form. [`answer_json`] reads an
//! answer's text as the output: one scan ([`crate::engine::json::is_json`]), no value is
//! built here (the JS layer parses the text once, as it does a tool call's arguments).

use serde_json::{Map, Value};

use crate::engine::error::ChatProviderError;
use crate::engine::message::{ContentPart, Message};

/// The name sent where a provider wants one and the caller gave none.
pub const DEFAULT_NAME: &str = "output";

/// The `output` option, read once.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputFormat {
    /// A JSON Schema (an object).
    pub schema: Value,
    /// `^[A-Za-z0-9_-]{1,64}$`, what OpenAI accepts as a schema's name.
    pub name: Option<String>,
    /// Sent only when the caller set it (each provider's own default applies otherwise).
    pub strict: Option<bool>,
}

impl OutputFormat {
    /// Reads `{schema, name?, strict?}` as JSON text; the error says what is wrong, for `{what}.output`.
    pub fn from_json(text: &str, what: &str) -> Result<OutputFormat, String> {
        let bad = |m: &str| format!("{what}.output{m}");
        let mut o: Map<String, Value> = match serde_json::from_str(text) {
            Ok(Value::Object(o)) => o,
            _ => return Err(bad(" must be an object {schema, name?, strict?}")),
        };
        let schema = match o.remove("schema") {
            Some(s @ Value::Object(_)) => s,
            _ => return Err(bad(".schema must be a JSON Schema object")),
        };
        let name = match o.remove("name") {
            None | Some(Value::Null) => None,
            Some(Value::String(n)) if valid_name(&n) => Some(n),
            Some(_) => return Err(bad(".name must be 1 to 64 letters, digits, `_` or `-`")),
        };
        let strict = match o.remove("strict") {
            None | Some(Value::Null) => None,
            Some(Value::Bool(b)) => Some(b),
            Some(_) => return Err(bad(".strict must be a boolean")),
        };
        if let Some(k) = o.keys().next() {
            return Err(bad(&format!(": unknown option `{k}` (known: schema, name, strict)")));
        }
        Ok(OutputFormat { schema, name, strict })
    }

    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or(DEFAULT_NAME)
    }

    /// The schema's top-level `type`, when it names one.
    pub fn top_type(&self) -> Option<&str> {
        self.schema.get("type").and_then(Value::as_str)
    }

    /// OpenAI's `{name, schema, strict?}` (Chat Completions' `json_schema`, and the fields the
    /// Responses API's `text.format` takes beside its `type`).
    pub fn openai_fields(&self) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("name".into(), Value::String(self.name().to_owned()));
        m.insert("schema".into(), self.schema.clone());
        if let Some(s) = self.strict {
            m.insert("strict".into(), Value::Bool(s));
        }
        m
    }
}

fn valid_name(n: &str) -> bool {
    !n.is_empty() && n.len() <= 64 && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The answer's text: its text parts, joined.
pub fn answer_text(message: &Message) -> String {
    let mut out = String::new();
    for p in &message.content {
        if let ContentPart::Text { text, .. } = p {
            out.push_str(text);
        }
    }
    out
}

/// The output an answer carries, as JSON text: `Ok(Some(text))` when its text is one JSON value;
/// `Ok(None)` when the answer calls tools and its text is not the output (the output comes in a
/// later step); otherwise the `malformed_output` error, which keeps the text.
pub fn answer_json(message: &Message) -> Result<Option<String>, ChatProviderError> {
    let text = answer_text(message);
    let calls = message.tool_calls.as_ref().is_some_and(|c| !c.is_empty());
    let trimmed = text.trim();
    if !trimmed.is_empty() && crate::engine::json::is_json(trimmed) {
        return Ok(Some(if trimmed.len() == text.len() { text } else { trimmed.to_owned() }));
    }
    if calls {
        return Ok(None);
    }
    let why = if trimmed.is_empty() { "the answer has no text" } else { "the answer's text is not JSON" };
    Err(malformed(why, text))
}

/// The `malformed_output` error: `why` (what is wrong), and the answer's text.
pub fn malformed(why: &str, text: String) -> ChatProviderError {
    ChatProviderError::MalformedOutput { message: format!("structured output: {why}"), text }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::message::{Role, ToolCall};

    fn answer(text: &str) -> Message {
        Message::new(Role::Assistant, vec![ContentPart::text(text)])
    }

    #[test]
    fn reads_the_option() {
        let f = OutputFormat::from_json(r#"{"schema":{"type":"object"},"name":"city_list","strict":true}"#, "options")
            .unwrap();
        assert_eq!(f.name(), "city_list");
        assert_eq!(f.strict, Some(true));
        assert_eq!(f.top_type(), Some("object"));
        let f = OutputFormat::from_json(r#"{"schema":{}}"#, "options").unwrap();
        assert_eq!((f.name(), f.strict), ("output", None));
        for (text, says) in [
            ("[]", "options.output must be an object"),
            (r#"{"schema":"x"}"#, "options.output.schema must be"),
            (r#"{"schema":{},"name":"a b"}"#, "options.output.name must be"),
            (r#"{"schema":{},"name":""}"#, "options.output.name must be"),
            (r#"{"schema":{},"strict":1}"#, "options.output.strict must be"),
            (r#"{"schema":{},"schemas":{}}"#, "unknown option `schemas`"),
        ] {
            let e = OutputFormat::from_json(text, "options").unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
        assert!(OutputFormat::from_json(&format!(r#"{{"schema":{{}},"name":"{}"}}"#, "a".repeat(65)), "o").is_err());
    }

    #[test]
    fn an_answer_is_its_text_as_json() {
        assert_eq!(answer_json(&answer(" {\"a\": [1, 2]}\n")), Ok(Some("{\"a\": [1, 2]}".into())));
        assert_eq!(answer_json(&answer("[1]")), Ok(Some("[1]".into())));
        let e = answer_json(&answer("Sure! {\"a\": 1}")).unwrap_err();
        assert_eq!(e.kind(), "malformed_output");
        assert!(matches!(&e, ChatProviderError::MalformedOutput { text, .. } if text == "Sure! {\"a\": 1}"));
        assert_eq!(answer_json(&answer("{\"a\": ")).unwrap_err().kind(), "malformed_output");
        assert!(answer_json(&answer("")).unwrap_err().message().contains("no text"));
        // An answer that calls tools carries the output only when its text is one.
        let mut m = answer("Let me look.");
        m.tool_calls = Some(vec![ToolCall::new("c1", "f", Some("{}".into()))]);
        assert_eq!(answer_json(&m), Ok(None));
        m.content = vec![ContentPart::text("{\"a\":1}")];
        assert_eq!(answer_json(&m), Ok(Some("{\"a\":1}".into())));
    }
}
