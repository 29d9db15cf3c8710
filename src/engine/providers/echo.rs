//! kosong's echo DSL: a script of `kind: payload` lines that a scripted provider streams
//! back as message parts, with no network. Blank lines, `#` comments, ``` fences and a bare
//! `echo` line are skipped. Kinds: `id`, `usage` (JSON or `key=value` pairs), `text`,
//! `think`, `image_url`/`audio_url`/`video_url` (a URL or `{"url","id"}`), `tool_call`
//! (JSON or `key=value`: `id`, `name` or `function.name`, optional `arguments`, `extras`) and
//! `tool_call_part` (a string, or `{"arguments_part": …}`; `null` or empty is no fragment).
//!
//! A tool call in a script is complete when the next part is not one of its fragments, or
//! at the end of the script — the order kosong's `generate` completes them in.

use serde_json::{Map, Value};

use super::StreamEvent;
use crate::engine::error::ChatProviderError;
use crate::engine::message::{ContentPart, MediaUrl, StreamedMessagePart, TokenUsage, ToolCall, ToolCallPart};

#[derive(Clone, Debug, Default, PartialEq)]
pub struct EchoScript {
    pub parts: Vec<StreamedMessagePart>,
    pub id: Option<String>,
    pub usage: Option<TokenUsage>,
}

impl EchoScript {
    /// The script's parts as stream events, with kosong's completion points.
    pub fn events(&self) -> Vec<StreamEvent> {
        let mut out = Vec::with_capacity(self.parts.len() + 4);
        let mut open: Option<String> = None;
        for p in &self.parts {
            if !matches!(p, StreamedMessagePart::ToolCallPart(_)) {
                if let Some(id) = open.take() {
                    out.push(StreamEvent::ToolCallComplete(id, None));
                }
            }
            if let StreamedMessagePart::ToolCall(c) = p {
                open = Some(c.id.clone());
            }
            out.push(StreamEvent::Part(p.clone()));
        }
        if let Some(id) = open {
            out.push(StreamEvent::ToolCallComplete(id, None));
        }
        out
    }

    /// The script as an OpenAI Chat Completions stream (SSE text): what `ChaosProvider` serves a
    /// scripted answer as, so it goes through a real provider's fetch path and decoder. Text and
    /// think parts, calls and their fragments; the other parts have no Chat Completions form.
    pub fn to_chat_sse(&self) -> String {
        let id = self.id.as_deref().unwrap_or("chatcmpl-chaos");
        let mut out = String::new();
        let mut event = |choices: Value, usage: Option<Value>| {
            let mut chunk = serde_json::json!({"id": id, "object": "chat.completion.chunk", "model": "scripted_echo", "choices": choices});
            if let Some(u) = usage {
                chunk["usage"] = u;
            }
            out.push_str("data: ");
            out.push_str(&chunk.to_string());
            out.push_str("\n\n");
        };
        let delta = |d: Value| serde_json::json!([{"index": 0, "delta": d, "finish_reason": null}]);
        let mut index: i64 = -1;
        for p in &self.parts {
            match p {
                StreamedMessagePart::Content(ContentPart::Text { text, .. }) => {
                    event(delta(serde_json::json!({"content": text})), None)
                }
                StreamedMessagePart::Content(ContentPart::Think { think, .. }) => {
                    event(delta(serde_json::json!({"reasoning_content": think})), None)
                }
                StreamedMessagePart::ToolCall(c) => {
                    index += 1;
                    let args = c.function.arguments.as_deref().unwrap_or("");
                    let call = serde_json::json!({"index": index, "id": c.id, "type": "function",
                        "function": {"name": c.function.name, "arguments": args}});
                    event(delta(serde_json::json!({"tool_calls": [call]})), None)
                }
                StreamedMessagePart::ToolCallPart(ToolCallPart { arguments_part: Some(a), .. })
                    if index >= 0 && !a.is_empty() =>
                {
                    event(
                        delta(serde_json::json!({"tool_calls": [{"index": index, "function": {"arguments": a}}]})),
                        None,
                    )
                }
                _ => {}
            }
        }
        let finish = if index >= 0 { "tool_calls" } else { "stop" };
        event(serde_json::json!([{"index": 0, "delta": {}, "finish_reason": finish}]), None);
        if let Some(u) = &self.usage {
            let usage = serde_json::json!({"prompt_tokens": u.input(), "completion_tokens": u.output,
                "prompt_tokens_details": {"cached_tokens": u.input_cache_read}});
            event(serde_json::json!([]), Some(usage));
        }
        out.push_str("data: [DONE]\n\n");
        out
    }
}

/// A script ready to stream: parsed, and not empty.
pub fn script_for_stream(script: &str) -> Result<EchoScript, ChatProviderError> {
    let s = parse_echo_script(script)?;
    if s.parts.is_empty() {
        return Err(err("ScriptedProvider DSL produced no streamable parts.".into()));
    }
    Ok(s)
}

fn err(msg: String) -> ChatProviderError {
    ChatProviderError::Other(msg)
}

pub fn parse_echo_script(script: &str) -> Result<EchoScript, ChatProviderError> {
    let mut s = EchoScript::default();
    for (n, raw) in script.lines().enumerate() {
        let lineno = n + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with("```") || line.eq_ignore_ascii_case("echo") {
            continue;
        }
        let Some((key, payload)) = line.split_once(':') else {
            return Err(err(format!("Invalid echo DSL at line {lineno}: {raw:?}")));
        };
        let kind = key.trim().to_ascii_lowercase();
        let payload = payload.strip_prefix(' ').unwrap_or(payload);
        match kind.as_str() {
            "error" => return Err(simulated_error(payload.trim(), lineno, raw)),
            "id" => s.id = Some(strip_quotes(payload.trim()).to_owned()),
            "usage" => s.usage = Some(parse_usage(payload)?),
            "text" => s.parts.push(StreamedMessagePart::Content(ContentPart::text(strip_quotes(payload)))),
            "think" => s.parts.push(StreamedMessagePart::Content(ContentPart::think(strip_quotes(payload)))),
            "image_url" => s
                .parts
                .push(StreamedMessagePart::Content(ContentPart::ImageUrl { image_url: parse_url(payload, &kind)? })),
            "audio_url" => s
                .parts
                .push(StreamedMessagePart::Content(ContentPart::AudioUrl { audio_url: parse_url(payload, &kind)? })),
            "video_url" => s
                .parts
                .push(StreamedMessagePart::Content(ContentPart::VideoUrl { video_url: parse_url(payload, &kind)? })),
            "tool_call" => s.parts.push(StreamedMessagePart::ToolCall(parse_tool_call(payload, lineno, raw)?)),
            "tool_call_part" => s.parts.push(StreamedMessagePart::ToolCallPart(parse_tool_call_part(payload))),
            other => return Err(err(format!("Unknown echo DSL kind '{other}' at line {lineno}: {raw:?}"))),
        }
    }
    Ok(s)
}

/// kosong's `error:` directive: `error: 429 slow down` is an HTTP status error, `error: 503`
/// one with kosong's default message, `error: connection …` / `error: timeout …` the
/// connection and timeout errors; an empty or unreadable spec is a plain provider error.
fn simulated_error(spec: &str, lineno: usize, raw: &str) -> ChatProviderError {
    if spec.is_empty() {
        return err(format!("Empty error payload at line {lineno}: {raw:?}"));
    }
    let (first, rest) = spec.split_once(' ').unwrap_or((spec, ""));
    let message = rest.trim();
    let or = |default: String| if message.is_empty() { default } else { message.to_owned() };
    match first.to_ascii_lowercase().as_str() {
        "connection" => ChatProviderError::Connection(or("Simulated connection error".into())),
        "timeout" => ChatProviderError::Timeout(or("Simulated timeout error".into())),
        _ => match first.parse::<u16>() {
            Ok(status) => ChatProviderError::Status {
                status,
                message: or(format!("Simulated {status} error")),
                request_id: None,
                retry_after_ms: None,
            },
            Err(_) => err(format!(
                "Invalid error spec at line {lineno}: expected status code or 'connection'/'timeout', got {first:?}"
            )),
        },
    }
}

fn strip_quotes(v: &str) -> &str {
    let b = v.as_bytes();
    if b.len() >= 2 && b[0] == b[b.len() - 1] && (b[0] == b'"' || b[0] == b'\'') {
        &v[1..v.len() - 1]
    } else {
        v
    }
}

fn parse_value(raw: &str) -> Value {
    let raw = raw.trim();
    if raw.is_empty() || raw.eq_ignore_ascii_case("null") || raw.eq_ignore_ascii_case("none") {
        return Value::Null;
    }
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(strip_quotes(raw).to_owned()))
}

fn parse_mapping(raw: &str, context: &str) -> Result<Map<String, Value>, ChatProviderError> {
    let raw = raw.trim();
    match serde_json::from_str::<Value>(raw) {
        Ok(Value::Object(m)) => return Ok(m),
        Ok(other) => return Err(err(format!("{context} payload must be an object, got {other}"))),
        Err(_) => {}
    }
    let mut m = Map::new();
    for token in raw.split(|c: char| c == ',' || c.is_whitespace()).filter(|t| !t.is_empty()) {
        let Some((k, v)) = token.split_once('=') else {
            return Err(err(format!("Invalid token '{token}' in {context} payload.")));
        };
        m.insert(k.trim().to_owned(), parse_value(v));
    }
    if m.is_empty() {
        return Err(err(format!("{context} payload cannot be empty.")));
    }
    Ok(m)
}

fn parse_usage(payload: &str) -> Result<TokenUsage, ChatProviderError> {
    let m = parse_mapping(payload, "usage")?;
    let get = |k: &str| -> Result<u64, ChatProviderError> {
        match m.get(k) {
            None | Some(Value::Null) => Ok(0),
            Some(v) => v
                .as_u64()
                .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
                .ok_or_else(|| err(format!("Usage field '{k}' must be an integer, got {v}"))),
        }
    };
    Ok(TokenUsage {
        input_other: get("input_other")?,
        output: get("output")?,
        input_cache_read: get("input_cache_read")?,
        input_cache_creation: get("input_cache_creation")?,
    })
}

fn parse_url(payload: &str, kind: &str) -> Result<MediaUrl, ChatProviderError> {
    match parse_value(payload) {
        Value::Object(m) => {
            let url = m
                .get("url")
                .and_then(Value::as_str)
                .ok_or_else(|| err(format!("{kind} requires a url field, got {}", Value::Object(m.clone()))))?;
            let id = match m.get("id") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(_) => return Err(err(format!("{kind} id must be a string when provided."))),
            };
            Ok(MediaUrl { url: url.to_owned(), id })
        }
        Value::String(url) => Ok(MediaUrl { url, id: None }),
        other => Err(err(format!("{kind} expects url string or object, got {other}"))),
    }
}

fn parse_tool_call(payload: &str, lineno: usize, raw: &str) -> Result<ToolCall, ChatProviderError> {
    let m = parse_mapping(payload, "tool_call")?;
    let function = m.get("function").and_then(Value::as_object);
    let id = m.get("id").and_then(Value::as_str);
    let name =
        m.get("name").and_then(Value::as_str).or_else(|| function.and_then(|f| f.get("name")).and_then(Value::as_str));
    let (Some(id), Some(name)) = (id, name) else {
        return Err(err(format!("tool_call requires string id and name at line {lineno}: {raw:?}")));
    };
    let arguments = match m.get("arguments").or_else(|| function.and_then(|f| f.get("arguments"))) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => return Err(err(format!("tool_call.arguments must be a string at line {lineno}, got {other}"))),
    };
    let extras = m.get("extras").or_else(|| function.and_then(|f| f.get("extras"))).and_then(Value::as_object).cloned();
    let mut call = ToolCall::new(id, name, arguments);
    call.extras = extras;
    Ok(call)
}

fn parse_tool_call_part(payload: &str) -> ToolCallPart {
    let v = match parse_value(payload) {
        Value::Object(mut m) => m.remove("arguments_part").unwrap_or(Value::Null),
        v => v,
    };
    let part = match v {
        Value::Null => None,
        Value::String(s) if s.is_empty() => None,
        Value::String(s) => Some(s),
        other => Some(other.to_string()),
    };
    ToolCallPart { arguments_part: part, tool_call_id: None }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_example() {
        let script = r#"
id: echo-42
usage: {"input_other": 10, "output": 2}
think: thinking...
text: Hello,
text:  world!
image_url: {"url": "https://example.com/image.png", "id": "img-1"}
tool_call: {"id": "call-1", "name": "search", "arguments": "{\"query"}
tool_call_part: {"arguments_part": "\": \"what time is"}
tool_call_part: {"arguments_part": " it?\"}"}
"#;
        let s = parse_echo_script(script).unwrap();
        assert_eq!(s.id.as_deref(), Some("echo-42"));
        assert_eq!(s.usage.unwrap().input_other, 10);
        assert_eq!(s.parts.len(), 7);
        assert_eq!(s.parts[2], StreamedMessagePart::Content(ContentPart::text(" world!")));
        let ev = s.events();
        assert_eq!(ev.last(), Some(&StreamEvent::ToolCallComplete("call-1".into(), None)));
    }

    #[test]
    fn key_value_forms_and_errors() {
        let s = parse_echo_script("usage: input_other=1 output=2 input_cache_read=3\ntool_call: id=c1 name=plus arguments='{\"a\":1}'\ntext: 'quoted'").unwrap();
        assert_eq!(s.usage.unwrap().input_cache_read, 3);
        assert!(
            matches!(&s.parts[0], StreamedMessagePart::ToolCall(c) if c.function.arguments.as_deref() == Some("{\"a\":1}"))
        );
        assert_eq!(s.events()[1], StreamEvent::ToolCallComplete("c1".into(), None));
        assert!(parse_echo_script("nonsense line").is_err());
        assert!(parse_echo_script("sparkle: x").is_err());
        assert!(parse_echo_script("tool_call: {\"id\": 1}").is_err());
        assert!(parse_echo_script("usage: output=lots").is_err());
    }

    #[test]
    fn error_directives_raise_as_kosong_does() {
        let e = |s: &str| parse_echo_script(s).unwrap_err();
        assert_eq!(
            e("error: 429 slow down"),
            ChatProviderError::Status {
                status: 429,
                message: "slow down".into(),
                request_id: None,
                retry_after_ms: None
            }
        );
        assert!(
            matches!(e("text: hi\nerror: 503"), ChatProviderError::Status { status: 503, message, .. } if message == "Simulated 503 error")
        );
        assert_eq!(e("error: connection reset by peer"), ChatProviderError::Connection("reset by peer".into()));
        assert_eq!(e("error: timeout"), ChatProviderError::Timeout("Simulated timeout error".into()));
        assert!(matches!(e("error:"), ChatProviderError::Other(m) if m.starts_with("Empty error payload at line 1")));
        assert!(matches!(e("error: teapot"), ChatProviderError::Other(m) if m.contains("Invalid error spec")));
    }
}
