//! The agent loop's rules, as kimi-cli's soul applies them: how a tool result becomes the
//! tool message the model sees, which errors a step retries and how long it waits, and
//! which message parts a model must be able to take.

use crate::engine::error::{ChatProviderError, FailureKind};
use crate::engine::message::{ContentPart, Message, Role};
use crate::engine::toolset::{ToolOutput, ToolResult};

fn output_parts(output: &ToolOutput) -> Vec<ContentPart> {
    match output {
        ToolOutput::Text(t) if t.is_empty() => Vec::new(),
        ToolOutput::Text(t) => vec![ContentPart::text(t.clone())],
        ToolOutput::Parts(p) => p.clone(),
    }
}

/// The tool message for a result: an error is `<system>ERROR: message</system>` followed by
/// any output (a runtime failure adds that the tool is probably not working); a success is
/// its message (as `<system>…</system>`) and output, or `<system>Tool output is empty.</system>`.
pub fn tool_result_to_message(result: &ToolResult) -> Message {
    let rv = &result.return_value;
    let mut content = Vec::new();
    if rv.is_error {
        let mut message = rv.message.clone();
        if message.is_empty() {
            message = "The tool failed.".into();
        }
        if rv.brief() == "Tool runtime error" {
            message.push_str("\nThis is an unexpected error and the tool is probably not working.");
        }
        content.push(ContentPart::system(&format!("ERROR: {message}")));
        content.extend(output_parts(&rv.output));
    } else {
        if !rv.message.is_empty() {
            content.push(ContentPart::system(&rv.message));
        }
        content.extend(output_parts(&rv.output));
        if content.is_empty() {
            content.push(ContentPart::system("Tool output is empty."));
        }
    }
    let mut m = Message::new(Role::Tool, content);
    m.tool_call_id = Some(result.tool_call_id.clone());
    m
}

/// Is this provider error worth another attempt? (kimi-cli: connection, timeout and empty
/// answers, and HTTP 429, 500, 502, 503, 504; here also Anthropic's 529 `overloaded_error`, and
/// a stream that was cut short or garbled — `truncated`, `malformed` — since the next attempt
/// may well stream whole. A step retries them only when nothing ran: see `step`'s salvage.)
pub fn is_retryable(e: &ChatProviderError) -> bool {
    match e {
        ChatProviderError::Connection(_) | ChatProviderError::Timeout(_) | ChatProviderError::EmptyResponse(_) => true,
        ChatProviderError::Status { status, .. } => matches!(status, 429 | 500 | 502 | 503 | 504 | 529),
        ChatProviderError::Failed { kind, .. } => matches!(kind, FailureKind::Truncated | FailureKind::Malformed),
        ChatProviderError::Redirect(_) | ChatProviderError::MalformedOutput { .. } | ChatProviderError::Other(_) => {
            false
        }
    }
}

/// The longest wait before a retry, even when the server asks for more.
pub const MAX_RETRY_WAIT_MS: f64 = 60_000.0;

/// kimi-cli's backoff: 0.3 s doubling, at most 5 s, plus up to 0.5 s of jitter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Backoff {
    pub initial_ms: f64,
    pub max_ms: f64,
    pub jitter_ms: f64,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { initial_ms: 300.0, max_ms: 5_000.0, jitter_ms: 500.0 }
    }
}

/// Exponential backoff with jitter (`random` in [0, 1)), or the server's `Retry-After` when
/// it asks for longer, capped at [`MAX_RETRY_WAIT_MS`]. `attempt` counts from 1.
pub fn retry_wait_ms(attempt: u32, retry_after_ms: Option<f64>, random: f64, b: Backoff) -> f64 {
    let exp = b.initial_ms * 2f64.powi(attempt.saturating_sub(1).min(30) as i32);
    let jitter = b.jitter_ms * random.clamp(0.0, 1.0);
    let own = (exp + jitter).min(b.max_ms);
    let wait = match retry_after_ms {
        Some(ms) if ms.is_finite() && ms > own => ms,
        _ => own,
    };
    wait.min(MAX_RETRY_WAIT_MS)
}

/// The capabilities a message needs that `capabilities` lacks: `image_in` for images,
/// `video_in` for videos, `thinking` for think parts.
pub fn missing_capabilities(message: &Message, capabilities: &[String]) -> Vec<String> {
    let mut missing: Vec<String> = Vec::new();
    for part in &message.content {
        let need = match part {
            ContentPart::ImageUrl { .. } => "image_in",
            ContentPart::VideoUrl { .. } => "video_in",
            ContentPart::Think { .. } => "thinking",
            _ => continue,
        };
        if !capabilities.iter().any(|c| c == need) && !missing.iter().any(|m| m == need) {
            missing.push(need.to_owned());
        }
    }
    missing
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::message::MediaUrl;
    use crate::engine::toolset::ToolReturnValue;

    fn result(rv: ToolReturnValue) -> ToolResult {
        ToolResult { tool_call_id: "c1".into(), return_value: rv }
    }

    #[test]
    fn tool_messages() {
        let m = tool_result_to_message(&result(ToolReturnValue::ok(ToolOutput::Text(String::new()), "", "")));
        assert_eq!(m.extract_text(""), "<system>Tool output is empty.</system>");
        assert_eq!(m.tool_call_id.as_deref(), Some("c1"));
        let m = tool_result_to_message(&result(ToolReturnValue::ok(ToolOutput::Text("42".into()), "done", "")));
        assert_eq!(m.extract_text("|"), "<system>done</system>|42");
        let m = tool_result_to_message(&result(ToolReturnValue::error(
            "no such file",
            "Not found",
            ToolOutput::Text("partial".into()),
        )));
        assert_eq!(m.extract_text("|"), "<system>ERROR: no such file</system>|partial");
        let m = tool_result_to_message(&result(ToolReturnValue::runtime_error("boom")));
        assert_eq!(
            m.extract_text(""),
            "<system>ERROR: Error running tool: boom\nThis is an unexpected error and the tool is probably not working.</system>"
        );
    }

    #[test]
    fn retry_rules() {
        let status = |status| ChatProviderError::Status {
            status,
            message: String::new(),
            request_id: None,
            retry_after_ms: None,
        };
        assert!(is_retryable(&ChatProviderError::Connection(String::new())));
        assert!(is_retryable(&status(429)) && is_retryable(&status(504)));
        assert!(!is_retryable(&status(400)) && !is_retryable(&ChatProviderError::Other(String::new())));
        assert_eq!(retry_wait_ms(1, None, 0.0, Backoff::default()), 300.0);
        assert_eq!(retry_wait_ms(2, None, 1.0, Backoff::default()), 1100.0);
        assert_eq!(retry_wait_ms(10, None, 0.5, Backoff::default()), 5000.0);
        assert_eq!(retry_wait_ms(1, Some(2000.0), 0.0, Backoff::default()), 2000.0);
        assert_eq!(retry_wait_ms(1, Some(1e9), 0.0, Backoff::default()), MAX_RETRY_WAIT_MS);
        assert_eq!(retry_wait_ms(1, Some(f64::NAN), 0.0, Backoff::default()), 300.0);
    }

    #[test]
    fn capabilities() {
        let m = Message::new(
            Role::User,
            vec![
                ContentPart::text("look"),
                ContentPart::ImageUrl { image_url: MediaUrl { url: "x".into(), id: None } },
                ContentPart::think("t"),
                ContentPart::ImageUrl { image_url: MediaUrl { url: "y".into(), id: None } },
            ],
        );
        assert_eq!(missing_capabilities(&m, &[]), vec!["image_in", "thinking"]);
        assert!(missing_capabilities(&m, &["image_in".into(), "thinking".into()]).is_empty());
    }
}
