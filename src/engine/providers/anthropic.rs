//! Anthropic's Messages API (`POST {base}/messages`, `stream: true`).
//!
//! Request: the system prompt is a text block with an ephemeral `cache_control`, as are the
//! last block of the last message and the last tool (prompt caching); tool results become
//! `tool_result` blocks of one user message (consecutive ones merged); think parts with a
//! signature go back as `thinking` blocks, a think part with no text but a signature is a
//! `redacted_thinking` block (its data), think parts without a signature are dropped.
//!
//! Stream: `message_start` (id, input usage), `content_block_start` / `_delta` / `_stop`
//! (text, thinking with `signature_delta`, redacted thinking, `tool_use` with
//! `input_json_delta`), `message_delta` (stop reason, usage), `message_stop`, `ping`, and
//! `error` events. A tool call is complete at its `content_block_stop`.

use super::{truncated, Prompt, StreamState, WireFormat};
use crate::engine::json::scan::{stop_byte, Filled, Hole, HoleSpans, Is, Scan, Shape};
use crate::engine::json::Arguments;
use serde_json::{json, Map, Value};

use super::{CallIds, Fields, HttpOptions, HttpRequest, StreamDecoder, StreamEvent};
use crate::engine::error::{ChatProviderError, FailureKind};
use crate::engine::message::{ContentPart, Message, Role, StreamedMessagePart, TokenUsage, ToolCall};
use crate::engine::sse::{RawEvent, SseEvent};

pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com/v1";
pub const API_VERSION: &str = "2023-06-01";
const DEFAULT_MAX_TOKENS: u64 = 8192;
/// Models with adaptive thinking have large output limits; their thinking counts against it.
const ADAPTIVE_MAX_TOKENS: u64 = 32000;

#[derive(Clone, Debug, Default)]
pub struct AnthropicConfig {
    /// What every HTTP provider takes.
    pub http: HttpOptions,
    /// Force adaptive thinking on (`true`) or off (`false`); by default it is used for the
    /// models that support it (Claude 4.6 and later).
    pub adaptive_thinking: Option<bool>,
}

/// Whether a model takes `thinking: {type: "adaptive"}`: Claude 4.6 and later (and the
/// families named without a version number that only exist from then on).
pub fn supports_adaptive_thinking(model: &str) -> bool {
    let m = model.to_ascii_lowercase();
    if m.contains("mythos") || m.contains("fable") {
        return true;
    }
    // claude-{family}-{major}[-{minor}][-date], or the older claude-{major}[-{minor}]-{family}
    let Some(rest) = m.split("claude-").nth(1) else { return false };
    let mut parts = rest.split(['-', '.']).skip_while(|p| p.parse::<u32>().is_err());
    let major: u32 = match parts.next().and_then(|p| p.parse().ok()) {
        Some(n) => n,
        None => return false,
    };
    let minor: u32 = parts.next().and_then(|p| if p.len() <= 2 { p.parse().ok() } else { None }).unwrap_or(0);
    (major, minor) >= (4, 6)
}

impl WireFormat for AnthropicConfig {
    fn identity(&self) -> (&'static str, &'static [&'static str]) {
        ("AnthropicProvider", &["ANTHROPIC_API_KEY"])
    }
    super::http_field!(DEFAULT_BASE_URL);
    fn build_request(&self, prompt: &Prompt<'_>) -> Result<HttpRequest, ChatProviderError> {
        self.request(prompt)
    }
    fn decoder(&self) -> Box<dyn StreamDecoder> {
        Box::new(AnthropicDecoder::default())
    }
}

impl AnthropicConfig {
    /// Reads the constructor's options: the common ones, then this provider's own.
    pub(crate) fn from_spec(spec: &super::Spec) -> Result<AnthropicConfig, serde_json::Error> {
        Ok(AnthropicConfig {
            http: spec.http()?,
            adaptive_thinking: spec.get("adaptiveThinking", "a boolean", Value::as_bool)?,
        })
    }

    /// Settings for `model` and nothing else (tests, fuzzing).
    pub fn for_model(model: &str) -> AnthropicConfig {
        AnthropicConfig { http: HttpOptions { model: model.into(), ..Default::default() }, ..Default::default() }
    }

    fn adaptive(&self) -> bool {
        self.adaptive_thinking.unwrap_or_else(|| supports_adaptive_thinking(&self.http.model))
    }

    /// `thinking` (and `output_config`) for the body, and the `max_tokens` to send.
    fn thinking(&self) -> (Option<Value>, Option<Value>, u64) {
        let effort = self.http.thinking_effort.as_deref();
        let adaptive = self.adaptive();
        let default_max = if adaptive { ADAPTIVE_MAX_TOKENS } else { DEFAULT_MAX_TOKENS };
        match effort {
            None => (None, None, self.http.max_tokens.unwrap_or(default_max)),
            Some("off") => (Some(json!({"type": "disabled"})), None, self.http.max_tokens.unwrap_or(default_max)),
            Some(e) if adaptive => {
                let effort = match e {
                    "low" => "low",
                    "medium" => "medium",
                    "max" => "max",
                    _ => "high",
                };
                (
                    Some(json!({"type": "adaptive"})),
                    Some(json!({"effort": effort})),
                    self.http.max_tokens.unwrap_or(default_max),
                )
            }
            Some(e) => {
                let budget: u64 = match e {
                    "low" => 1024,
                    "medium" => 4096,
                    "high" => 16000,
                    "xhigh" => 24000,
                    _ => 32000,
                };
                // The budget must stay below max_tokens: a given max_tokens wins and the budget
                // shrinks (not below Anthropic's minimum, 1024); otherwise max_tokens grows.
                let (budget, max) = match self.http.max_tokens {
                    Some(max) => (budget.min(max.saturating_sub(1)).max(1024), max),
                    None => (budget, (budget + DEFAULT_MAX_TOKENS).max(default_max)),
                };
                (Some(json!({"type": "enabled", "budget_tokens": budget})), None, max)
            }
        }
    }

    fn request(&self, prompt: &Prompt<'_>) -> Result<HttpRequest, ChatProviderError> {
        let Prompt { system: system_prompt, tools, history, output } = *prompt;
        super::check_files(history, "the Anthropic Messages API", |f| match f.data() {
            Some(("application/pdf", _)) | None => Ok(()),
            Some(_) => Err("it takes a document's data as a PDF (application/pdf) only"),
        })?;
        let mut messages = messages_to_anthropic(history)?;
        if let Some(last) = messages.last_mut().and_then(|m| m.get_mut("content")).and_then(Value::as_array_mut) {
            if let Some(block) = last.last_mut() {
                let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
                if kind != "thinking" && kind != "redacted_thinking" {
                    block["cache_control"] = json!({"type": "ephemeral"});
                }
            }
        }
        let (thinking, output_config, max_tokens) = self.thinking();
        let mut body = Map::new();
        body.insert("model".into(), json!(self.http.model));
        body.insert("max_tokens".into(), json!(max_tokens));
        if !system_prompt.is_empty() {
            body.insert(
                "system".into(),
                json!([{"type": "text", "text": system_prompt, "cache_control": {"type": "ephemeral"}}]),
            );
        }
        body.insert("messages".into(), Value::Array(messages));
        if !tools.is_empty() {
            let mut list: Vec<Value> = tools
                .iter()
                .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
                .collect();
            if let Some(last) = list.last_mut() {
                last["cache_control"] = json!({"type": "ephemeral"});
            }
            body.insert("tools".into(), Value::Array(list));
        }
        body.insert("stream".into(), json!(true));
        let budget_thinking = thinking.as_ref().is_some_and(|t| t["type"] == "enabled");
        if let Some(t) = thinking {
            body.insert("thinking".into(), t);
        }
        // Structured output: `output_config.format` (beside the effort, when there is one).
        let output_config = match (output_config, output) {
            (config, None) => config,
            (config, Some(o)) => {
                let mut config = config.unwrap_or_else(|| json!({}));
                config["format"] = json!({"type": "json_schema", "schema": o.schema});
                Some(config)
            }
        };
        if let Some(o) = output_config {
            body.insert("output_config".into(), o);
        }
        if let Some(t) = self.http.temperature {
            body.insert("temperature".into(), json!(t));
        }
        super::merge_extra_body(&mut body, &self.http.extra_body);

        let base = super::versioned_base(self.http.base_url.as_deref(), DEFAULT_BASE_URL, "v1");
        let mut fixed = vec![
            ("anthropic-version", API_VERSION),
            // This package runs in browsers by design; the key is the caller's to expose.
            ("anthropic-dangerous-direct-browser-access", "true"),
        ];
        if budget_thinking {
            fixed.push(("anthropic-beta", "interleaved-thinking-2025-05-14"));
        }
        let auth = self.http.api_key.as_deref().filter(|k| !k.is_empty()).map(|k| ("x-api-key", k.to_owned()));
        let headers = super::request_headers(&fixed, auth, &self.http.headers);
        Ok(HttpRequest {
            method: super::Method::Post,
            url: format!("{base}/messages"),
            headers,
            body: Value::Object(body).to_string(),
        })
    }
}

fn media_block(kind: &str, url: &str) -> Result<Value, ChatProviderError> {
    if url.starts_with("data:") {
        let (mime, data) = super::split_data_url(url).ok_or_else(|| {
            ChatProviderError::failed(
                FailureKind::InvalidRequest,
                format!("an {kind} data URL must be base64: data:<type>;base64,…"),
            )
        })?;
        return Ok(json!({"type": kind, "source": {"type": "base64", "media_type": mime, "data": data}}));
    }
    Ok(json!({"type": kind, "source": {"type": "url", "url": url}}))
}

fn content_blocks(parts: &[ContentPart], in_tool_result: bool) -> Result<Vec<Value>, ChatProviderError> {
    let mut blocks = Vec::with_capacity(parts.len());
    for part in parts {
        match part {
            ContentPart::Text { .. } if part.is_server_tool() => {
                if let (Some(block), false) = (part.server_tool_for("anthropic"), in_tool_result) {
                    blocks.push(block.clone());
                }
            }
            ContentPart::Text { text, .. } if text.is_empty() => {}
            ContentPart::Text { text, .. } => {
                let mut b = json!({"type": "text", "text": text});
                // Anthropic's own citation objects go back with their text.
                if let Some(cites) = part.text_extra_list("citations") {
                    let own: Vec<Value> = cites.iter().filter(|c| text_of(c, "type").is_some()).cloned().collect();
                    if !own.is_empty() {
                        b["citations"] = Value::Array(own);
                    }
                }
                blocks.push(b)
            }
            ContentPart::ImageUrl { image_url } => blocks.push(media_block("image", &image_url.url)?),
            // Checked before (`check_files`): a PDF's data, or a link.
            ContentPart::File { file } => {
                let source = match file.data() {
                    Some((mime, data)) => json!({"type": "base64", "media_type": mime, "data": data}),
                    None => json!({"type": "url", "url": file.url}),
                };
                let mut doc = Map::new();
                doc.insert("type".into(), json!("document"));
                doc.insert("source".into(), source);
                if let Some(name) = &file.filename {
                    doc.insert("title".into(), json!(name));
                }
                blocks.push(Value::Object(doc))
            }
            ContentPart::Think { think, encrypted } if !in_tool_result => match encrypted.as_deref() {
                Some(sig) if !sig.is_empty() && think.is_empty() => {
                    blocks.push(json!({"type": "redacted_thinking", "data": sig}))
                }
                Some(sig) if !sig.is_empty() => {
                    blocks.push(json!({"type": "thinking", "thinking": think, "signature": sig}))
                }
                // Without a signature Anthropic would reject the block: it is left out.
                _ => {}
            },
            ContentPart::Think { .. } => {}
            ContentPart::AudioUrl { .. } | ContentPart::VideoUrl { .. } => {
                return Err(ChatProviderError::failed(
                    FailureKind::InvalidRequest,
                    "the Anthropic Messages API accepts no audio or video parts; remove them from the history",
                ))
            }
        }
    }
    Ok(blocks)
}

fn tool_result_block(m: &Message) -> Result<Value, ChatProviderError> {
    let id = m.tool_call_id.as_deref().ok_or_else(|| {
        ChatProviderError::failed(FailureKind::InvalidRequest, "a tool message in the history has no `tool_call_id`")
    })?;
    let content = match m.content.as_slice() {
        [ContentPart::Text { text, .. }] => json!(text),
        parts => Value::Array(content_blocks(parts, true)?),
    };
    Ok(json!({"type": "tool_result", "tool_use_id": id, "content": content}))
}

/// The history as Anthropic messages. Consecutive tool messages become one user message of
/// `tool_result` blocks; a system message in the history becomes a `<system>` user text;
/// messages left empty are skipped (Anthropic rejects them).
pub fn messages_to_anthropic(history: &[Message]) -> Result<Vec<Value>, ChatProviderError> {
    let mut out: Vec<Value> = Vec::with_capacity(history.len());
    let mut results: Vec<Value> = Vec::new();
    for m in history {
        if m.role == Role::Tool {
            results.push(tool_result_block(m)?);
            continue;
        }
        if !results.is_empty() {
            out.push(json!({"role": "user", "content": std::mem::take(&mut results)}));
        }
        let (role, blocks) = match m.role {
            Role::System => (
                "user",
                vec![json!({"type": "text", "text": crate::engine::message::system_text(&m.extract_text("\n"))})],
            ),
            Role::User => ("user", content_blocks(&m.content, false)?),
            _ => {
                let mut blocks = content_blocks(&m.content, false)?;
                for call in m.tool_calls.iter().flatten() {
                    // Anthropic only takes an object here.
                    let input = Arguments::as_object(call.function.arguments.as_deref());
                    blocks.push(json!({"type": "tool_use", "id": call.id, "name": call.function.name, "input": input}));
                }
                ("assistant", blocks)
            }
        };
        if !blocks.is_empty() {
            out.push(json!({"role": role, "content": blocks}));
        }
    }
    if !results.is_empty() {
        out.push(json!({"role": "user", "content": results}));
    }
    Ok(out)
}

// ---- stream decoding -------------------------------------------------------------------

// ---- the fast path ------------------------------------------------------------------------------
//
// The commonest event of this stream, read by one strict scan ([`crate::engine::json::scan`]) instead
// of serde's derived visitors (most of the decode time); anything else is `None` and takes the
// general path. The property tests and the `fast_delta` fuzz target check that both paths leave
// the decoder in the same state.
/// The two frequent `content_block_delta` events of Anthropic's stream.
#[derive(Debug, PartialEq)]
pub enum AnthropicDelta {
    Text(String),
    /// A fragment of a `tool_use` (or server tool) block's input.
    Json {
        index: Option<u64>,
        partial_json: String,
    },
}

/// An Anthropic `content_block_delta` carrying a `text_delta` or an `input_json_delta`, or
/// `None` for the general path.
pub fn anthropic_delta(data: &str) -> Option<AnthropicDelta> {
    delta_with_spans(data).map(|(d, _)| d)
}

/// [`anthropic_delta`], of any member order and whitespace, and where its holes lie for a
/// [`Shape`]: the index (when there is one) and the string.
fn delta_with_spans(data: &str) -> Option<(AnthropicDelta, HoleSpans)> {
    let mut s = Scan { s: data, b: data.as_bytes(), i: 0 };
    let (mut seen_type, mut seen_delta) = (false, false);
    let mut index = None;
    let (mut dtype, mut text, mut json) = (None, None, None);
    let mut spans = Vec::with_capacity(2);
    s.object(|s, key| match () {
        _ if key.is("type") && !std::mem::replace(&mut seen_type, true) => {
            s.plain_str()?.is("content_block_delta").then_some(())
        }
        _ if key.is("index") && index.is_none() => {
            s.ws();
            let at = s.i;
            index = Some(s.uint_value()?);
            spans.push((at, s.i, Hole::Uint));
            Some(())
        }
        _ if key.is("delta") && !std::mem::replace(&mut seen_delta, true) => s.object(|s, key| match () {
            _ if key.is("type") && dtype.is_none() => {
                dtype = Some(s.plain_str()?);
                Some(())
            }
            _ if (key.is("text") && text.is_none()) || (key.is("partial_json") && json.is_none()) => {
                s.ws();
                let at = s.i;
                let value = Some(s.content()?);
                spans.push((at, s.i, Hole::Text));
                *(if key.is("text") { &mut text } else { &mut json }) = value;
                Some(())
            }
            _ => None,
        }),
        _ => None,
    })?;
    s.ws();
    if s.i != s.b.len() || !seen_type || !seen_delta {
        return None;
    }
    let delta = match (dtype?, text, json) {
        ("text_delta", Some(t), None) => AnthropicDelta::Text(t),
        ("input_json_delta", None, Some(partial_json)) => AnthropicDelta::Json { index, partial_json },
        _ => return None,
    };
    Some((delta, spans))
}

/// A block's start or end, as [`block_event`] reads it.
#[derive(Debug, PartialEq)]
enum BlockEvent {
    /// `content_block_stop`: the block at this index ends (a call's arguments are complete).
    Stop(u64),
    /// `content_block_start` of a `tool_use` block whose input is `{}` (every call's start, as
    /// Anthropic's API sends it).
    ToolStart { index: u64, id: String, name: String },
}

/// A call's start and a block's end as Anthropic's API writes them (these members in this order,
/// no whitespace; an id and a name without escapes): what the general path reads of them, without
/// a `serde_json::Value` of the event (the end of a call's block is on its tool's way to its
/// handler). Anything else is `None`, for the general path.
fn block_event(data: &str) -> Option<BlockEvent> {
    let b = data.as_bytes();
    let mut s = Scan { s: data, b, i: 0 };
    // After `prefix`, the index: what follows it.
    let mut index_after = |prefix: &[u8]| {
        s.i = prefix.len();
        let index = b.starts_with(prefix).then(|| s.uint_value())??;
        Some((index, b.get(s.i..)?))
    };
    if let Some((index, rest)) = index_after(br#"{"type":"content_block_stop","index":"#) {
        return (rest == b"}").then_some(BlockEvent::Stop(index));
    }
    let (index, rest) = index_after(br#"{"type":"content_block_start","index":"#)?;
    /// A string without escapes or control characters, and what follows its closing quote.
    fn plain(rest: &[u8]) -> Option<(String, &[u8])> {
        let end = stop_byte(rest, 0)?;
        (rest.get(end) == Some(&b'"')).then_some(())?;
        Some((std::str::from_utf8(rest.get(..end)?).ok()?.to_owned(), rest.get(end + 1..)?))
    }
    let (id, rest) = plain(rest.strip_prefix(br#","content_block":{"type":"tool_use","id":""#)?)?;
    let (name, rest) = plain(rest.strip_prefix(br#","name":""#)?)?;
    (rest == br#","input":{}}}"#).then_some(BlockEvent::ToolStart { index, id, name })
}

#[cfg(test)]
mod fast_tests {
    use super::*;

    #[test]
    fn a_calls_start_and_a_blocks_end_are_read_by_the_scan() {
        let start = r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01","name":"get_weather","input":{}}}"#;
        let tool = |index, id: &str, name: &str| BlockEvent::ToolStart { index, id: id.into(), name: name.into() };
        assert_eq!(block_event(start), Some(tool(1, "toolu_01", "get_weather")));
        assert_eq!(block_event(&start.replace("get_weather", "é")), Some(tool(1, "toolu_01", "é")));
        assert_eq!(block_event(r#"{"type":"content_block_stop","index":12}"#), Some(BlockEvent::Stop(12)));
        for other in [
            // Members in another order, whitespace, escapes: the general path's.
            r#"{"index":0,"type":"content_block_stop"}"#,
            r#"{"type":"content_block_stop", "index":0}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t\"1","name":"f","input":{}}}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"f\u00e9","input":{}}}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","name":"f","id":"t","input":{}}}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"f","input":{ }}}"#,
            r#"{"type":"content_block_stop","index":01}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"s","name":"web_search","input":{}}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f","input":{"a":1}}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f"}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":null,"name":"f","input":{}}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f","input":{},"caller":{}}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","id":"u","name":"f","input":{}}}"#,
            r#"{"type":"content_block_start","content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}"#,
            r#"{"type":"content_block_stop","index":0,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}"#,
            r#"{"type":"content_block_start","index":0}"#,
            r#"{"type":"content_block_stop"}"#,
            r#"{"type":"content_block_stop","index":-1}"#,
            r#"{"type":"content_block_stop","index":1.0}"#,
            r#"{"type":"content_block_stop","index":"1"}"#,
            r#"{"type":"content_block_stop","index":0,"index":1}"#,
            r#"{"type":"content_block_stop","index":0,"extra":null}"#,
            r#"{"type":"content_block_stop","index":0} x"#,
            r#"{"type":"message_stop"}"#,
        ] {
            assert_eq!(block_event(other), None, "{other}");
        }
    }

    /// A delta as Anthropic's API writes one, learned as a shape, reads every other of that shape
    /// as the scan does; what it refuses is the scan's to read (or to refuse).
    #[test]
    fn a_delta_of_the_learned_shape_reads_as_the_scan_does() {
        let sent = |index: &str, kind: &str, key: &str, text: &str| {
            format!(r#"{{"type":"content_block_delta","index":{index},"delta":{{"type":"{kind}","{key}":"{text}"}}}}"#)
        };
        for (kind, key) in [("text_delta", "text"), ("input_json_delta", "partial_json")] {
            let mut shape = Shape::default();
            let first = sent("0", kind, key, "first");
            shape.learn(&first, &delta_with_spans(&first).unwrap().1);
            for (index, text) in
                [("0", "plain"), ("12", ""), ("3", r#"esc \"q\" \\ \n \u00e9 \ud83d\ude00"#), ("0", "é✓😀")]
            {
                let e = sent(index, kind, key, text);
                let got = shape.read(&e).expect(&e);
                let want = anthropic_delta(&e).unwrap();
                let (got_text, want_text) = match &want {
                    AnthropicDelta::Text(t) => (got.text.unwrap(), t.clone()),
                    AnthropicDelta::Json { index: i, partial_json } => {
                        assert_eq!(got.uints[0], *i, "{e}");
                        (got.text.unwrap(), partial_json.clone())
                    }
                };
                assert_eq!(got_text, want_text, "{e}");
            }
            for e in [
                sent("01", kind, key, "x"),
                sent("1.0", kind, key, "x"),
                sent("-1", kind, key, "x"),
                sent("1234567890123456", kind, key, "x"),
                sent("0", kind, key, r#"bad \x escape"#),
                sent("0", kind, key, "x") + "}",
                sent("0", kind, key, "x").replace("}}", "} }"),
                sent("0", kind, key, "x").replace(&format!(r#""{key}":"x""#), &format!(r#""{key}":"x","{key}":"y""#)),
                sent("0", kind, key, "x").replace(r#"{"type""#, r#"{ "type""#),
                sent("0", if key == "text" { "input_json_delta" } else { "text_delta" }, key, "x"),
                format!(r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"{kind}","{key}":"x"}}"#),
            ] {
                assert_eq!(shape.read(&e), None, "{e}");
            }
        }
    }

    #[test]
    fn anthropic_text_deltas() {
        let e = r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" the \"fox\""}}"#;
        assert_eq!(anthropic_delta(e), Some(AnthropicDelta::Text(" the \"fox\"".into())));
        for e in [
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"x"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{"}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta"}}"#,
            r#"{"type":"content_block_delta","delta":{"type":"text_delta","text":"a","text":"b"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"},"type":"x"}"#,
        ] {
            assert!(!matches!(anthropic_delta(e), Some(AnthropicDelta::Text(_))), "{e}");
        }
    }

    #[test]
    fn anthropic_input_json_deltas() {
        let e = r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"city\": \"Pa"}}"#;
        assert_eq!(
            anthropic_delta(e),
            Some(AnthropicDelta::Json { index: Some(2), partial_json: "{\"city\": \"Pa".into() })
        );
        for e in [
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"a","text":"b"}}"#,
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta"}}"#,
            r#"{"type":"content_block_delta","index":2,"index":3,"delta":{"type":"input_json_delta","partial_json":"a"}}"#,
            r#"{"type":"content_block_delta","index":-2,"delta":{"type":"input_json_delta","partial_json":"a"}}"#,
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":1}}"#,
        ] {
            assert_eq!(anthropic_delta(e), None, "{e}");
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn adaptive_thinking_models() {
        for m in [
            "claude-opus-4-6",
            "claude-sonnet-4-6",
            "claude-opus-4-7-20260101",
            "claude-opus-5",
            "claude-mythos-preview",
        ] {
            assert!(super::supports_adaptive_thinking(m), "{m}");
        }
        for m in [
            "claude-sonnet-4-5-20250929",
            "claude-3-7-sonnet-20250219",
            "claude-sonnet-4-20250514",
            "claude-opus-4-1",
            "gpt-4o",
        ] {
            assert!(!super::supports_adaptive_thinking(m), "{m}");
        }
    }
}

/// The event types the decoder reads (`ping` and any other is skipped).
const KNOWN_EVENTS: &[&str] = &[
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
    "error",
];

/// An event the fast path left, read field by field ([`super::Fields`]).
struct Event {
    kind: String,
    index: Option<u64>,
    message: Option<StartMessage>,
    content_block: Option<Value>,
    delta: Option<Value>,
    usage: Option<Usage>,
    error: Option<Value>,
}

struct StartMessage {
    id: Option<String>,
    /// Blocks that come whole with the start (a resumed turn of programmatic tool calling
    /// sends its pending `tool_use` here, with no content-block events after it).
    content: Vec<Value>,
    usage: Option<Usage>,
}

impl Event {
    fn read(f: Fields<'_>) -> Result<Event, String> {
        let message = f
            .object("message")?
            .map(|m| {
                Ok::<_, String>(StartMessage {
                    id: m.string("id")?,
                    content: m.list("content")?.cloned().unwrap_or_default(),
                    usage: m.object("usage")?.map(Usage::read).transpose()?,
                })
            })
            .transpose()?;
        Ok(Event {
            kind: f.str("type")?.unwrap_or_default().to_owned(),
            index: f.u64("index")?,
            message,
            content_block: f.any("content_block").cloned(),
            delta: f.any("delta").cloned(),
            usage: f.object("usage")?.map(Usage::read).transpose()?,
            error: f.any("error").cloned(),
        })
    }
}

#[derive(Default, Clone, Copy)]
struct Usage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
}

impl Usage {
    fn read(f: Fields<'_>) -> Result<Usage, String> {
        Ok(Usage {
            input_tokens: f.u64("input_tokens")?,
            output_tokens: f.u64("output_tokens")?,
            cache_read_input_tokens: f.u64("cache_read_input_tokens")?,
            cache_creation_input_tokens: f.u64("cache_creation_input_tokens")?,
        })
    }
}

#[derive(Debug)]
enum Block {
    Text,
    Thinking,
    Tool {
        id: String,
        done: bool,
    },
    /// A block of Anthropic's own tools (`server_tool_use`, `web_search_tool_result`, code
    /// execution, …): kept whole, its streamed `input` gathered, delivered at its stop.
    Server {
        block: Value,
        input: String,
        sent: bool,
    },
    Other,
}

#[derive(Debug)]
pub struct AnthropicDecoder {
    /// Text deltas take [`super::fast_delta`] (on by default; tests compare both paths).
    pub fast: bool,
    /// The answer\'s id, usage and finish reason.
    state: StreamState,
    stopped: bool,
    /// A `message_start` was read.
    started: bool,
    blocks: Vec<(u64, Block)>,
    /// Each index's latest block, found in O(1) however many blocks come.
    by_index: std::collections::HashMap<u64, usize>,
    /// Blocks before this one were completed by `complete_all` already.
    completed_upto: usize,
    ids: CallIds,
    /// The shape of the last delta the fast path's scan read ([`Shape`]), and whether it was an
    /// `input_json_delta` (else a `text_delta`).
    shape: Shape,
    shape_json: bool,
    /// Fragments and deltas join the part before them ([`StreamDecoder::join_parts`]).
    join: bool,
}

impl Default for AnthropicDecoder {
    fn default() -> Self {
        AnthropicDecoder {
            fast: true,
            state: StreamState::default(),
            stopped: false,
            started: false,
            blocks: Vec::new(),
            by_index: std::collections::HashMap::new(),
            completed_upto: 0,
            ids: CallIds::default(),
            shape: Shape::default(),
            shape_json: false,
            join: false,
        }
    }
}

fn text_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

impl AnthropicDecoder {
    fn update_usage(&mut self, u: Usage) {
        let cur = self.state.usage.get_or_insert_with(TokenUsage::default);
        if let Some(n) = u.input_tokens {
            cur.input_other = n;
        }
        if let Some(n) = u.output_tokens {
            cur.output = n;
        }
        if let Some(n) = u.cache_read_input_tokens {
            cur.input_cache_read = n;
        }
        if let Some(n) = u.cache_creation_input_tokens {
            cur.input_cache_creation = n;
        }
    }

    fn block(&mut self, index: Option<u64>) -> Option<&mut Block> {
        let index = index?;
        // The newest block is the latest at its index: most events are for it (no hashing).
        let pos = match self.blocks.last() {
            Some((i, _)) if *i == index => self.blocks.len() - 1,
            _ => *self.by_index.get(&index)?,
        };
        self.blocks.get_mut(pos).map(|(_, b)| b)
    }

    /// A fragment of the input of the block at `index` (a call's arguments, or a server tool's input).
    fn on_input_json(&mut self, index: Option<u64>, piece: String, out: &mut Vec<StreamEvent>) {
        if piece.is_empty() {
            return;
        }
        let join = self.join;
        match self.block(index) {
            Some(Block::Tool { id, done: false }) => super::push_fragment(out, join, id, piece),
            Some(Block::Server { input, sent: false, .. }) => input.push_str(&piece),
            _ => {}
        }
    }

    fn on_block_stop(&mut self, index: Option<u64>, out: &mut Vec<StreamEvent>) -> Result<(), ChatProviderError> {
        match self.block(index) {
            Some(Block::Tool { id, done }) if !*done => {
                *done = true;
                let id = id.clone();
                out.push(StreamEvent::ToolCallComplete(id, None));
            }
            Some(Block::Server { block, input, sent }) if !*sent => {
                *sent = true;
                let mut block = std::mem::take(block);
                if !input.trim().is_empty() {
                    let parsed: Value = serde_json::from_str(input).map_err(|e| {
                        ChatProviderError::failed(
                            FailureKind::Malformed,
                            format!("the input of a server tool block is not JSON: {e}"),
                        )
                    })?;
                    if let Some(obj) = block.as_object_mut() {
                        obj.insert("input".into(), parsed);
                    }
                }
                out.push(StreamEvent::Part(StreamedMessagePart::Content(ContentPart::server_tool("anthropic", block))));
            }
            _ => {}
        }
        Ok(())
    }

    fn complete_all(&mut self, out: &mut Vec<StreamEvent>) {
        for (_, b) in self.blocks.iter_mut().skip(self.completed_upto) {
            if let Block::Tool { id, done } = b {
                if !*done {
                    *done = true;
                    out.push(StreamEvent::ToolCallComplete(id.clone(), None));
                }
            }
        }
        self.completed_upto = self.blocks.len();
    }

    /// A `tool_use` block begins: its call, with `args` so far.
    fn tool_use(&mut self, id: Option<&str>, name: &str, args: String, out: &mut Vec<StreamEvent>) -> Block {
        let id = self.ids.assign(id, "toolu_");
        out.push(StreamEvent::Part(StreamedMessagePart::ToolCall(ToolCall::new(
            id.clone(),
            name.to_owned(),
            Some(args),
        ))));
        Block::Tool { id, done: false }
    }

    /// A block begun at `index`, kept (the last one at that index is the one its events go to).
    fn add_block(&mut self, index: u64, b: Block) {
        self.by_index.insert(index, self.blocks.len());
        self.blocks.push((index, b));
    }

    fn on_block_start(&mut self, index: u64, block: &Value, out: &mut Vec<StreamEvent>) {
        let content = |p: ContentPart| StreamEvent::Part(StreamedMessagePart::Content(p));
        let b = match text_of(block, "type").unwrap_or("") {
            "text" => {
                // Each text block is a part of its own, so citations stay with their text.
                out.push(StreamEvent::Boundary);
                let cites = block.get("citations").and_then(Value::as_array).filter(|c| !c.is_empty());
                let t = text_of(block, "text").unwrap_or("");
                match cites {
                    Some(c) => out.push(content(ContentPart::text_with_list(t, "citations", c.clone()))),
                    None if !t.is_empty() => out.push(content(ContentPart::text(t))),
                    None => {}
                }
                Block::Text
            }
            "thinking" => {
                let think = text_of(block, "thinking").unwrap_or("");
                let sig = text_of(block, "signature").filter(|s| !s.is_empty()).map(str::to_owned);
                out.push(content(ContentPart::Think { think: think.to_owned(), encrypted: sig }));
                Block::Thinking
            }
            "redacted_thinking" => {
                let data = text_of(block, "data").unwrap_or("").to_owned();
                out.push(content(ContentPart::Think { think: String::new(), encrypted: Some(data) }));
                Block::Other
            }
            "tool_use" => {
                // Some compatible servers send the whole input at the start; otherwise the input
                // starts empty (`""`, as kosong keeps it when no input delta follows).
                let args = block
                    .get("input")
                    .filter(|i| i.as_object().is_some_and(|o| !o.is_empty()))
                    .map_or_else(String::new, |i| i.to_string());
                self.tool_use(text_of(block, "id"), text_of(block, "name").unwrap_or(""), args, out)
            }
            // A block type with no `type` is nothing anyone can send back.
            "" => Block::Other,
            // server_tool_use, web_search_tool_result, code execution, mcp, …
            _ => Block::Server { block: block.clone(), input: String::new(), sent: false },
        };
        self.add_block(index, b);
    }

    fn on_delta(&mut self, index: Option<u64>, delta: &Value, out: &mut Vec<StreamEvent>) {
        let content = |p: ContentPart| StreamEvent::Part(StreamedMessagePart::Content(p));
        match text_of(delta, "type").unwrap_or("") {
            "text_delta" => {
                if let Some(t) = text_of(delta, "text").filter(|t| !t.is_empty()) {
                    super::push_content(out, self.join, ContentPart::text(t));
                }
            }
            "thinking_delta" => {
                if let Some(t) = text_of(delta, "thinking").filter(|t| !t.is_empty()) {
                    super::push_content(out, self.join, ContentPart::think(t));
                }
            }
            "signature_delta" => {
                if let Some(s) = text_of(delta, "signature").filter(|s| !s.is_empty()) {
                    out.push(content(ContentPart::Think { think: String::new(), encrypted: Some(s.to_owned()) }));
                }
            }
            "input_json_delta" => {
                if let Some(piece) = text_of(delta, "partial_json") {
                    self.on_input_json(index, piece.to_owned(), out);
                }
            }
            "citations_delta" => {
                if let Some(c) = delta.get("citation").filter(|c| c.is_object()) {
                    out.push(content(ContentPart::text_with_list("", "citations", vec![c.clone()])));
                }
            }
            // Future kinds carry nothing kosong keeps.
            _ => {}
        }
    }
}

impl AnthropicDecoder {
    /// The delta an event of the learned shape is.
    fn shaped(&self, f: Filled) -> Option<AnthropicDelta> {
        match f {
            Filled { text: Some(t), uints: [index, _], .. } if self.shape_json => {
                Some(AnthropicDelta::Json { index, partial_json: t })
            }
            Filled { text: Some(t), .. } => Some(AnthropicDelta::Text(t)),
            _ => None,
        }
    }

    fn on_fast_delta(&mut self, d: AnthropicDelta, out: &mut Vec<StreamEvent>) {
        match d {
            AnthropicDelta::Text(text) => {
                if !text.is_empty() {
                    super::push_content(out, self.join, ContentPart::text(text));
                }
            }
            AnthropicDelta::Json { index, partial_json } => self.on_input_json(index, partial_json, out),
        }
    }
}

impl StreamDecoder for AnthropicDecoder {
    fn join_parts(&mut self, join: bool) {
        self.join = join;
    }

    fn reads_raw(&self) -> bool {
        self.fast
    }

    fn on_raw_data(&mut self, ev: &RawEvent, out: &mut Vec<StreamEvent>) -> Option<usize> {
        if self.stopped || !self.fast {
            return None;
        }
        let (f, used) = self.shape.read_raw(ev)?;
        let d = self.shaped(f)?;
        self.on_fast_delta(d, out);
        Some(used)
    }

    fn on_event(&mut self, event: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<(), ChatProviderError> {
        let data = event.data.trim();
        if data.is_empty() || self.stopped {
            return Ok(());
        }
        if self.fast {
            let delta = match self.shape.read(data).and_then(|f| self.shaped(f)) {
                Some(d) => Some(d),
                None => delta_with_spans(data).map(|(d, spans)| {
                    self.shape.learn(data, &spans);
                    self.shape_json = matches!(d, AnthropicDelta::Json { .. });
                    d
                }),
            };
            if let Some(d) = delta {
                self.on_fast_delta(d, out);
                return Ok(());
            }
            match block_event(data) {
                Some(BlockEvent::Stop(index)) => return self.on_block_stop(Some(index), out),
                Some(BlockEvent::ToolStart { index, id, name }) => {
                    let b = self.tool_use(Some(&id), &name, String::new(), out);
                    self.add_block(index, b);
                    return Ok(());
                }
                None => {}
            }
        }
        let Some(ev) = super::typed_event(data, KNOWN_EVENTS, Event::read)? else { return Ok(()) };
        match ev.kind.as_str() {
            "message_start" => {
                if self.started {
                    // Some compatible endpoints repeat the very same start before any content
                    // (vercel/ai#18331): that one is ignored; another message's start, or one
                    // after content, means the stream mixes two messages.
                    let id = ev.message.as_ref().and_then(|m| m.id.as_deref()).filter(|s| !s.is_empty());
                    let repeated = id.is_some() && id == self.state.id.as_deref() && self.blocks.is_empty();
                    if repeated && ev.message.as_ref().is_some_and(|m| m.content.is_empty()) {
                        return Ok(());
                    }
                    return Err(ChatProviderError::failed(
                        FailureKind::Malformed,
                        "a second message_start before message_stop: the stream mixes two messages",
                    ));
                }
                self.started = true;
                if let Some(m) = ev.message {
                    self.state.id = m.id.filter(|s| !s.is_empty());
                    if let Some(u) = m.usage {
                        self.update_usage(u);
                    }
                    for (i, block) in m.content.iter().enumerate() {
                        // Out of the range of the stream's own block indexes.
                        let index = u64::MAX - i as u64;
                        self.on_block_start(index, block, out);
                        self.on_block_stop(Some(index), out)?;
                    }
                }
            }
            "content_block_start" => {
                if let (Some(i), Some(b)) = (ev.index, ev.content_block.as_ref()) {
                    self.on_block_start(i, b, out);
                }
            }
            "content_block_delta" => {
                if let Some(d) = ev.delta.as_ref() {
                    self.on_delta(ev.index, d, out);
                }
            }
            "content_block_stop" => self.on_block_stop(ev.index, out)?,
            "message_delta" => {
                if let Some(r) = ev.delta.as_ref().and_then(|d| text_of(d, "stop_reason")) {
                    self.state.finish_reason = Some(r.to_owned());
                }
                if let Some(u) = ev.usage {
                    self.update_usage(u);
                }
            }
            "message_stop" => {
                self.stopped = true;
                self.complete_all(out);
            }
            "error" => {
                let err = ev.error.unwrap_or(Value::Null);
                let kind = text_of(&err, "type");
                let msg = text_of(&err, "message").unwrap_or("unknown error");
                return Err(super::mid_stream_error(kind, None, msg));
            }
            // ping, and event types added later.
            _ => {}
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), ChatProviderError> {
        if !self.stopped {
            return Err(truncated("no message_stop"));
        }
        if self.state.finish_reason.as_deref() == Some("refusal") {
            return Err(super::refusal(""));
        }
        self.complete_all(out);
        Ok(())
    }

    fn state(&self) -> &StreamState {
        &self.state
    }
}
