//! Wire formats, one file each: the request body going out, the stream events coming in,
//! and the errors. Each decoder turns Server-Sent Events into [`StreamEvent`]s and says,
//! structurally, when a tool call is complete.

pub mod echo;
pub mod openai_chat;

use crate::core::error::ChatProviderError;
use crate::core::message::{StreamedMessagePart, TokenUsage};
use crate::core::sse::SseEvent;

/// What a provider's stream yields, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum StreamEvent {
    Part(StreamedMessagePart),
    /// The stream shows the tool call with this id complete: it may be dispatched now.
    ToolCallComplete(String),
}

/// Decodes one provider's event stream.
pub trait StreamDecoder {
    fn on_event(&mut self, event: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<(), ChatProviderError>;
    /// The byte stream ended. An answer that never said it was finished is an error.
    fn finish(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), ChatProviderError>;
    fn id(&self) -> Option<&str>;
    fn usage(&self) -> Option<TokenUsage>;
    fn finish_reason(&self) -> Option<&str>;
}

/// Everything the glue needs to send a request: where, which headers, what body.
#[derive(Clone, Debug, PartialEq)]
pub struct HttpRequest {
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

/// A tool as the model sees it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ToolDefinition {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default = "empty_object")]
    pub parameters: serde_json::Value,
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(Default::default())
}

/// Pulls a human message out of an error body: `{"error":{"message":…}}`, `{"message":…}`,
/// `{"error":"…"}`, or the text itself (shortened).
pub fn error_message_from_body(body: &str) -> Option<String> {
    let v: serde_json::Value = match serde_json::from_str(body) {
        Ok(v) => v,
        Err(_) => {
            let t = body.trim();
            if t.is_empty() {
                return None;
            }
            let mut s: String = t.chars().take(500).collect();
            if s.len() < t.len() {
                s.push('…');
            }
            return Some(s);
        }
    };
    let pick =
        |v: &serde_json::Value| -> Option<String> { v.get("message").and_then(|m| m.as_str()).map(str::to_owned) };
    match v.get("error") {
        Some(serde_json::Value::String(s)) => Some(s.clone()),
        Some(e @ serde_json::Value::Object(_)) => pick(e).or_else(|| Some(e.to_string())),
        _ => pick(&v),
    }
}
