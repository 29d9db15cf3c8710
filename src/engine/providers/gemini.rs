//! Google's Gemini API (`POST {base}/models/{model}:streamGenerateContent?alt=sse`, the key
//! in `x-goog-api-key`).
//!
//! Request: roles `user` and `model`; an assistant turn's tool calls are `functionCall`
//! parts (with their `thoughtSignature`, kept in the call's `extras.thought_signature_b64` as
//! kosong keeps it; `extras.thought_signature`, this package's earlier key, is read too), and
//! the results of one turn are packed into one `user` content of `functionResponse` parts, in
//! call order. A result missing from the history or given twice is an error before anything
//! is sent: Gemini matches results by position, so a gap would pair a result with the wrong
//! call.
//!
//! Stream: each event is a whole `GenerateContentResponse`; thought parts (`thought: true`)
//! are think parts, `functionCall` parts arrive whole and are complete at once; usage comes
//! from `usageMetadata` (cached tokens split out, thinking tokens counted as output); the
//! answer ends with a `finishReason`. The code-execution tool's `executableCode` and
//! `codeExecutionResult` parts are server-tool parts ([`ContentPart::server_tool`]), sent back
//! to Gemini as they came.

use super::{truncated, Prompt, StreamState, WireFormat};
use crate::engine::json::Arguments;
use serde_json::{json, Map, Value};

use super::{CallIds, Fields, HttpOptions, HttpRequest, StreamDecoder, StreamEvent};
use crate::engine::error::{ChatProviderError, FailureKind};
use crate::engine::json::scan::{Hole, HoleSpans, Is, Scan, Shape};
use crate::engine::message::{ContentPart, Message, Role, StreamedMessagePart, TokenUsage, ToolCall};
use crate::engine::sse::SseEvent;

pub const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com/v1beta";
/// The key under which a call's thought signature travels in `ToolCall.extras`.
/// kosong's key for a call's thought signature (base64, as the REST API sends it).
pub const THOUGHT_SIGNATURE: &str = "thought_signature_b64";
/// The key this package used before; still read, so older histories keep their signatures.
const OLD_THOUGHT_SIGNATURE: &str = "thought_signature";

#[derive(Clone, Debug, Default)]
pub struct GeminiConfig {
    /// What every HTTP provider takes.
    pub http: HttpOptions,
}

fn is_gemini_3(model: &str) -> bool {
    model.contains("gemini-3")
}

impl WireFormat for GeminiConfig {
    fn identity(&self) -> (&'static str, &'static [&'static str]) {
        ("GeminiProvider", &["GEMINI_API_KEY", "GOOGLE_API_KEY"])
    }
    super::http_field!(DEFAULT_BASE_URL);
    fn build_request(&self, prompt: &Prompt<'_>) -> Result<HttpRequest, ChatProviderError> {
        self.request(prompt)
    }
    fn decoder(&self) -> Box<dyn StreamDecoder> {
        Box::new(GeminiDecoder::default())
    }
}

impl GeminiConfig {
    /// Reads the constructor's options: the common ones, then this provider's own.
    pub(crate) fn from_spec(spec: &super::Spec) -> Result<GeminiConfig, serde_json::Error> {
        Ok(GeminiConfig { http: spec.http()? })
    }

    /// Settings for `model` and nothing else (tests, fuzzing).
    pub fn for_model(model: &str) -> GeminiConfig {
        GeminiConfig { http: HttpOptions { model: model.into(), ..Default::default() } }
    }

    fn thinking_config(&self) -> Option<Value> {
        let effort = self.http.thinking_effort.as_deref()?;
        if is_gemini_3(&self.http.model) {
            // Gemini 3 takes a level and cannot switch thinking off: `off` asks for the least.
            let level = match effort {
                "off" | "low" => "low",
                _ => "high",
            };
            return Some(json!({"thinkingLevel": level, "includeThoughts": effort != "off"}));
        }
        let budget: i64 = match effort {
            "off" => 0,
            "low" => 1024,
            "medium" => 8192,
            "high" => 24576,
            _ => -1, // dynamic: as much as the model decides
        };
        Some(json!({"thinkingBudget": budget, "includeThoughts": effort != "off"}))
    }

    fn request(&self, prompt: &Prompt<'_>) -> Result<HttpRequest, ChatProviderError> {
        let Prompt { system: system_prompt, tools, history, output } = *prompt;
        super::check_files(history, "the Gemini API", |f| match f.media_type() {
            Some(_) => Ok(()),
            None => Err("a linked file needs its media_type"),
        })?;
        let mut body = Map::new();
        body.insert("contents".into(), Value::Array(contents(history, is_gemini_3(&self.http.model))?));
        if !system_prompt.is_empty() {
            body.insert("systemInstruction".into(), json!({"parts": [{"text": system_prompt}]}));
        }
        if !tools.is_empty() {
            let decls: Vec<Value> = tools
                .iter()
                .map(|t| json!({"name": t.name, "description": t.description, "parametersJsonSchema": t.parameters}))
                .collect();
            body.insert("tools".into(), json!([{"functionDeclarations": decls}]));
        }
        let mut gen = Map::new();
        if let Some(n) = self.http.max_tokens {
            gen.insert("maxOutputTokens".into(), json!(n));
        }
        if let Some(t) = self.http.temperature {
            gen.insert("temperature".into(), json!(t));
        }
        if let Some(t) = self.thinking_config() {
            gen.insert("thinkingConfig".into(), t);
        }
        if let Some(o) = output {
            gen.insert("responseMimeType".into(), json!("application/json"));
            gen.insert("responseJsonSchema".into(), o.schema.clone());
        }
        if !gen.is_empty() {
            body.insert("generationConfig".into(), Value::Object(gen));
        }
        super::merge_extra_body(&mut body, &self.http.extra_body);
        let base = super::versioned_base(self.http.base_url.as_deref(), DEFAULT_BASE_URL, "v1beta");
        let model = self.http.model.strip_prefix("models/").unwrap_or(&self.http.model);
        // One path segment, whatever the name holds (`../../admin`, `m#frag`, `m?x`).
        if model.is_empty() || model.chars().all(|c| c == '.') {
            return Err(ChatProviderError::failed(
                crate::engine::error::FailureKind::InvalidRequest,
                format!("{model:?} is not a Gemini model name"),
            ));
        }
        let model = super::percent_encode(model);
        let auth = self.http.api_key.as_deref().filter(|k| !k.is_empty()).map(|k| ("x-goog-api-key", k.to_owned()));
        let headers = super::request_headers(&[], auth, &self.http.headers);
        Ok(HttpRequest {
            method: super::Method::Post,
            url: format!("{base}/models/{model}:streamGenerateContent?alt=sse"),
            headers,
            body: Value::Object(body).to_string(),
        })
    }
}

fn media_part(url: &str, default_mime: &str) -> Value {
    match super::split_data_url(url) {
        Some((mime, data)) => json!({"inlineData": {"mimeType": mime, "data": data}}),
        None => json!({"fileData": {"fileUri": url, "mimeType": default_mime}}),
    }
}

fn parts_of(content: &[ContentPart]) -> Vec<Value> {
    content
        .iter()
        .filter_map(|p| match p {
            ContentPart::Text { .. } if p.is_server_tool() => p.server_tool_for("gemini").cloned(),
            ContentPart::Text { text, .. } if text.is_empty() => None,
            ContentPart::Text { text, .. } => Some(json!({"text": text})),
            ContentPart::Think { think, encrypted } => {
                if think.is_empty() && encrypted.is_none() {
                    return None;
                }
                let mut part = json!({"text": think, "thought": true});
                if let Some(sig) = encrypted {
                    part["thoughtSignature"] = json!(sig);
                }
                Some(part)
            }
            ContentPart::ImageUrl { image_url } => Some(media_part(&image_url.url, "image/png")),
            ContentPart::AudioUrl { audio_url } => Some(media_part(&audio_url.url, "audio/mpeg")),
            ContentPart::VideoUrl { video_url } => Some(media_part(&video_url.url, "video/mp4")),
            // Checked before (`check_files`): data, or a link with its media type.
            ContentPart::File { file } => Some(match file.data() {
                Some((mime, data)) => json!({"inlineData": {"mimeType": mime, "data": data}}),
                None => json!({"fileData": {"fileUri": file.url, "mimeType": file.media_type().unwrap_or_default()}}),
            }),
        })
        .collect()
}

fn function_response(call: &ToolCall, result: &Message) -> Value {
    let text = result.extract_text("\n");
    let mut parts = vec![json!({"functionResponse": {"name": call.function.name, "response": {"output": text}}})];
    // Media a tool returned travels next to its response.
    for p in &result.content {
        if let ContentPart::ImageUrl { image_url } = p {
            parts.push(media_part(&image_url.url, "image/png"));
        }
    }
    Value::Array(parts)
}

/// The history as Gemini contents (see the module docs for how results are packed).
pub fn contents(history: &[Message], gemini_3: bool) -> Result<Vec<Value>, ChatProviderError> {
    let mut out = Vec::with_capacity(history.len());
    let mut i = 0;
    while i < history.len() {
        let m = &history[i];
        i += 1;
        match m.role {
            Role::User | Role::System => {
                let mut parts = parts_of(&m.content);
                if m.role == Role::System {
                    parts = vec![json!({"text": crate::engine::message::system_text(&m.extract_text("\n"))})];
                }
                if !parts.is_empty() {
                    out.push(json!({"role": "user", "parts": parts}));
                }
            }
            Role::Tool => {
                return Err(ChatProviderError::failed(
                    FailureKind::InvalidRequest,
                    format!(
                        "a tool result (tool_call_id {:?}) in the history follows no assistant message that called it",
                        m.tool_call_id.as_deref().unwrap_or("")
                    ),
                ))
            }
            Role::Assistant => {
                let mut parts = parts_of(&m.content);
                let calls: &[ToolCall] = m.tool_calls.as_deref().unwrap_or(&[]);
                let any_signature = calls.iter().any(|c| signature_of(c).is_some());
                for (n, call) in calls.iter().enumerate() {
                    let args = Arguments::as_object(call.function.arguments.as_deref());
                    let mut part = json!({"functionCall": {"name": call.function.name, "args": args}});
                    match signature_of(call) {
                        Some(sig) => part["thoughtSignature"] = json!(sig),
                        // Gemini 3 requires a signature on a turn's first call; calls made by
                        // another model have none, and Google documents this value for them.
                        None if gemini_3 && n == 0 && !any_signature => {
                            part["thoughtSignature"] = json!("skip_thought_signature_validator")
                        }
                        None => {}
                    }
                    parts.push(part);
                }
                if !parts.is_empty() {
                    out.push(json!({"role": "model", "parts": parts}));
                }
                if calls.is_empty() {
                    continue;
                }
                // The results of this turn: the tool messages that follow it.
                let mut results: Vec<Option<&Message>> = vec![None; calls.len()];
                while let Some(r) = history.get(i).filter(|r| r.role == Role::Tool) {
                    i += 1;
                    let id = r.tool_call_id.as_deref().unwrap_or("");
                    let Some(pos) = calls.iter().position(|c| c.id == id) else {
                        return Err(ChatProviderError::failed(FailureKind::InvalidRequest, format!(
                            "the history has a tool result for `{id}`, which the assistant message before it did not call"
                        )));
                    };
                    if results[pos].is_some() {
                        return Err(ChatProviderError::failed(
                            FailureKind::InvalidRequest,
                            format!("the history has two results for tool call `{id}`"),
                        ));
                    }
                    results[pos] = Some(r);
                }
                let mut parts = Vec::with_capacity(calls.len());
                for (call, result) in calls.iter().zip(results) {
                    let Some(result) = result else {
                        return Err(ChatProviderError::failed(
                            FailureKind::InvalidRequest,
                            format!(
                                "the history has no result for tool call `{}` ({}); Gemini needs one for every call",
                                call.id, call.function.name
                            ),
                        ));
                    };
                    if let Value::Array(p) = function_response(call, result) {
                        parts.extend(p);
                    }
                }
                out.push(json!({"role": "user", "parts": parts}));
            }
        }
    }
    Ok(out)
}

fn signature_of(call: &ToolCall) -> Option<&str> {
    let extras = call.extras.as_ref()?;
    extras.get(THOUGHT_SIGNATURE).or_else(|| extras.get(OLD_THOUGHT_SIGNATURE))?.as_str()
}

// ---- stream decoding -------------------------------------------------------------------

/// A chunk the fast path left, read field by field ([`super::Fields`]): only the first
/// candidate is assembled.
struct Chunk {
    /// The first candidate's parts and finish reason.
    candidate: Option<(Vec<Value>, Option<String>)>,
    usage_metadata: Option<Value>,
    response_id: Option<String>,
    error: Option<Value>,
    prompt_feedback: Option<Value>,
}

impl Chunk {
    fn read(data: &str) -> Result<Chunk, String> {
        let v: Value = serde_json::from_str(data).map_err(|e| e.to_string())?;
        let f = Fields::of(&v, "a stream chunk")?;
        let mut candidate = None;
        for (i, c) in f.list("candidates")?.into_iter().flatten().enumerate() {
            let c = Fields::of(c, "a candidate")?;
            let parts = match c.object("content")? {
                Some(content) => content.list("parts")?.cloned().unwrap_or_default(),
                None => Vec::new(),
            };
            let finish = c.string("finishReason")?;
            if i == 0 {
                candidate = Some((parts, finish));
            }
        }
        Ok(Chunk {
            candidate,
            usage_metadata: f.any("usageMetadata").cloned(),
            response_id: f.string("responseId")?,
            error: f.any("error").cloned(),
            prompt_feedback: f.any("promptFeedback").cloned(),
        })
    }
}

#[derive(Debug)]
pub struct GeminiDecoder {
    /// Plain text chunks take [`super::fast_delta`] (on by default; tests compare both paths).
    pub fast: bool,
    /// The answer\'s id, usage and finish reason.
    state: StreamState,
    ids: CallIds,
    /// A call whose arguments stream in pieces (Vertex's `streamFunctionCallArguments`), until
    /// a part without `willContinue` closes it.
    pending: Option<StreamedCall>,
    /// The `usageMetadata` text `usage` was last read from by the fast path: every chunk repeats
    /// it, mostly unchanged, and it is read again only when it changes.
    usage_text: String,
    /// The shape of the last plain text chunk the fast path's scan read ([`Shape`]): the text a
    /// hole, `usageMetadata` an object hole, the rest fixed bytes.
    shape: Shape,
}

impl Default for GeminiDecoder {
    fn default() -> Self {
        GeminiDecoder {
            fast: true,
            state: StreamState::default(),
            ids: CallIds::default(),
            pending: None,
            usage_text: String::new(),
            shape: Shape::default(),
        }
    }
}

/// A function call being assembled from `partialArgs`.
#[derive(Debug, Default)]
struct StreamedCall {
    id: Option<String>,
    name: String,
    args: Map<String, Value>,
    signature: Option<String>,
    /// The JSON path of a string value whose next piece is still to come.
    continuing: Option<String>,
}

/// One step of a JSON path (RFC 9535, the subset function arguments use).
enum PathStep {
    Key(String),
    Index(usize),
}

/// `$.foo.bar[0]['x y']` into its steps; `None` for what is not such a path.
fn parse_json_path(path: &str) -> Option<Vec<PathStep>> {
    let mut rest = path.strip_prefix('$')?;
    let mut steps = Vec::new();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            if end == 0 {
                return None;
            }
            steps.push(PathStep::Key(r[..end].to_owned()));
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let inner = &r[..end];
            let quoted = |q: char| inner.strip_prefix(q).and_then(|s| s.strip_suffix(q));
            match quoted('\'').or_else(|| quoted('"')) {
                Some(k) => steps.push(PathStep::Key(k.to_owned())),
                None => steps.push(PathStep::Index(inner.parse().ok()?)),
            }
            rest = &r[end + 1..];
        } else {
            return None;
        }
    }
    Some(steps)
}

/// The slot at `steps` under `root`, made as needed (an object, or the next element of an
/// array); `None` when the path skips ahead or crosses a value of another kind.
fn slot_at<'a>(root: &'a mut Map<String, Value>, steps: &[PathStep]) -> Option<&'a mut Value> {
    let (first, rest) = steps.split_first()?;
    let PathStep::Key(k) = first else { return None };
    let mut v = root.entry(k.clone()).or_insert(Value::Null);
    for step in rest {
        v = match step {
            PathStep::Key(k) => {
                if !v.is_object() {
                    *v = Value::Object(Map::new());
                }
                v.as_object_mut()?.entry(k.clone()).or_insert(Value::Null)
            }
            PathStep::Index(i) => {
                if !v.is_array() {
                    *v = Value::Array(Vec::new());
                }
                let a = v.as_array_mut()?;
                // An element is set in order: an index past the next one is refused (a stream
                // must not make us allocate what it names).
                if *i == a.len() {
                    a.push(Value::Null);
                }
                a.get_mut(*i)?
            }
        };
    }
    Some(v)
}

fn usage_of(u: &Value) -> TokenUsage {
    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
    let prompt = n("promptTokenCount");
    let cached = n("cachedContentTokenCount").min(prompt);
    TokenUsage {
        input_other: prompt - cached,
        output: n("candidatesTokenCount") + n("thoughtsTokenCount"),
        input_cache_read: cached,
        input_cache_creation: 0,
    }
}

impl GeminiDecoder {
    /// The id for a call: Gemini rarely sends one, so ours carry the response id and stay
    /// distinct across the turns of a conversation.
    fn call_id(&mut self, given: Option<&str>) -> String {
        let prefix = match &self.state.id {
            Some(r) => format!("call_{}_", r.chars().filter(char::is_ascii_alphanumeric).take(12).collect::<String>()),
            None => "call_".to_owned(),
        };
        self.ids.assign(given, &prefix)
    }

    /// A piece of a streamed call; the call is handed on, whole, when its last piece came.
    fn on_streamed_call(
        &mut self,
        call: &Value,
        sig: Option<&str>,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), ChatProviderError> {
        let malformed = |what: String| ChatProviderError::failed(FailureKind::Malformed, what);
        let p = self.pending.get_or_insert_with(StreamedCall::default);
        if let Some(name) = call.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()) {
            p.name = name.to_owned();
        }
        if let Some(id) = call.get("id").and_then(Value::as_str).filter(|i| !i.is_empty()) {
            p.id = Some(id.to_owned());
        }
        if let Some(sig) = sig {
            p.signature = Some(sig.to_owned());
        }
        if let Some(Value::Object(args)) = call.get("args") {
            p.args.extend(args.clone());
        }
        for pa in call.get("partialArgs").and_then(Value::as_array).into_iter().flatten() {
            let path = pa.get("jsonPath").and_then(Value::as_str).unwrap_or("");
            let steps = parse_json_path(path).filter(|s| !s.is_empty()).ok_or_else(|| {
                malformed(format!(
                    "a streamed function-call argument has a JSON path this decoder cannot follow: {path:?}"
                ))
            })?;
            let continues = p.continuing.as_deref() == Some(path);
            let slot = slot_at(&mut p.args, &steps)
                .ok_or_else(|| malformed(format!("JSON path {path:?} does not fit the arguments so far")))?;
            if let Some(s) = pa.get("stringValue").and_then(Value::as_str) {
                match slot {
                    Value::String(prev) if continues => prev.push_str(s),
                    _ => *slot = Value::String(s.to_owned()),
                }
            } else if let Some(n) = pa.get("numberValue").filter(|n| n.is_number()) {
                *slot = n.clone();
            } else if let Some(b) = pa.get("boolValue").and_then(Value::as_bool) {
                *slot = Value::Bool(b);
            } else if pa.get("nullValue").is_some() {
                *slot = Value::Null;
            }
            p.continuing = (pa.get("willContinue").and_then(Value::as_bool) == Some(true)).then(|| path.to_owned());
        }
        if call.get("willContinue").and_then(Value::as_bool) == Some(true) {
            return Ok(());
        }
        let Some(done) = self.pending.take() else { return Ok(()) };
        let id = self.call_id(done.id.as_deref());
        let mut tc = ToolCall::new(id.clone(), done.name, Some(Value::Object(done.args).to_string()));
        if let Some(sig) = done.signature {
            let mut extras = Map::new();
            extras.insert(THOUGHT_SIGNATURE.into(), json!(sig));
            tc.extras = Some(extras);
        }
        out.push(StreamEvent::Part(StreamedMessagePart::ToolCall(tc)));
        out.push(StreamEvent::ToolCallComplete(id, None));
        Ok(())
    }

    fn on_part(&mut self, part: &Value, out: &mut Vec<StreamEvent>) -> Result<(), ChatProviderError> {
        let sig = part.get("thoughtSignature").and_then(Value::as_str).filter(|s| !s.is_empty());
        if let Some(call) = part.get("functionCall") {
            let streamed = self.pending.is_some()
                || call.get("willContinue").and_then(Value::as_bool) == Some(true)
                || call.get("partialArgs").is_some();
            if streamed {
                return self.on_streamed_call(call, sig, out);
            }
            let name = call.get("name").and_then(Value::as_str).unwrap_or("").to_owned();
            let args = call.get("args").filter(|a| !a.is_null()).map(|a| a.to_string()).unwrap_or_else(|| "{}".into());
            let id = self.call_id(call.get("id").and_then(Value::as_str));
            let mut tc = ToolCall::new(id.clone(), name, Some(args));
            if let Some(sig) = sig {
                let mut extras = Map::new();
                extras.insert(THOUGHT_SIGNATURE.into(), json!(sig));
                tc.extras = Some(extras);
            }
            out.push(StreamEvent::Part(StreamedMessagePart::ToolCall(tc)));
            // A call arrives whole in one part: it is complete as it stands.
            out.push(StreamEvent::ToolCallComplete(id, None));
            return Ok(());
        }
        // The code-execution tool's code and its result: Gemini's own tool, kept in the answer in
        // order and sent back to Gemini as it came (signature included).
        if part.get("executableCode").is_some() || part.get("codeExecutionResult").is_some() {
            out.push(StreamEvent::Part(StreamedMessagePart::Content(ContentPart::server_tool("gemini", part.clone()))));
            return Ok(());
        }
        let Some(text) = part.get("text").and_then(Value::as_str) else { return Ok(()) };
        if part.get("thought").and_then(Value::as_bool) == Some(true) {
            out.push(StreamEvent::Part(StreamedMessagePart::Content(ContentPart::Think {
                think: text.to_owned(),
                encrypted: sig.map(str::to_owned),
            })));
        } else if !text.is_empty() {
            out.push(StreamEvent::Part(StreamedMessagePart::Content(ContentPart::text(text))));
        }
        Ok(())
    }
}

impl StreamDecoder for GeminiDecoder {
    fn on_event(&mut self, event: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<(), ChatProviderError> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(());
        }
        if self.fast {
            if let Some(g) = self.text_chunk(data) {
                if let Some(id) = g.response_id.filter(|s| !s.is_empty()) {
                    if !self.state.id.as_deref().is_some_and(|have| have.is(id)) {
                        self.state.id = Some(id.to_owned());
                    }
                }
                if let Some(raw) = g.usage {
                    if !(self.state.usage.is_some() && self.usage_text.is(raw)) {
                        let u: Value = serde_json::from_str(raw).map_err(|e| {
                            ChatProviderError::failed(FailureKind::Malformed, format!("malformed usageMetadata: {e}"))
                        })?;
                        self.state.usage = Some(usage_of(&u));
                        raw.clone_into(&mut self.usage_text);
                    }
                }
                if !g.text.is_empty() {
                    out.push(StreamEvent::Part(StreamedMessagePart::Content(ContentPart::text(g.text))));
                }
                if let Some(r) = g.finish_reason.filter(|r| !r.is_empty()) {
                    self.state.finish_reason = Some(r.to_owned());
                }
                return Ok(());
            }
        }
        let chunk = Chunk::read(data).map_err(|e| {
            ChatProviderError::failed(FailureKind::Malformed, format!("malformed stream chunk from the server: {e}"))
        })?;
        if let Some(err) = chunk.error {
            let status = err.get("code").and_then(Value::as_u64).and_then(|c| u16::try_from(c).ok());
            let kind = err.get("status").and_then(Value::as_str);
            let msg = err.get("message").and_then(Value::as_str).unwrap_or("unknown error");
            return Err(super::mid_stream_error(kind, status, msg));
        }
        if let Some(id) = chunk.response_id.filter(|s| !s.is_empty()) {
            self.state.id = Some(id);
        }
        if let Some(u) = chunk.usage_metadata.filter(Value::is_object) {
            self.state.usage = Some(usage_of(&u));
            self.usage_text.clear();
        }
        if let Some(reason) = chunk.prompt_feedback.as_ref().and_then(|f| f.get("blockReason")).and_then(Value::as_str)
        {
            self.state.finish_reason = Some(reason.to_owned());
        }
        let Some((parts, finish_reason)) = chunk.candidate else { return Ok(()) };
        for part in parts {
            self.on_part(&part, out)?;
        }
        if let Some(r) = finish_reason.filter(|r| !r.is_empty()) {
            self.state.finish_reason = Some(r);
        }
        Ok(())
    }

    fn finish(&mut self, _out: &mut Vec<StreamEvent>) -> Result<(), ChatProviderError> {
        if self.pending.is_some() {
            return Err(ChatProviderError::failed(
                FailureKind::Truncated,
                "the stream ended inside a function call whose arguments were still streaming (willContinue)",
            ));
        }
        if self.state.finish_reason.is_none() {
            return Err(truncated("no finishReason"));
        }
        Ok(())
    }

    fn state(&self) -> &StreamState {
        &self.state
    }
}

// ---- the fast path ------------------------------------------------------------------------------
//
// The commonest event of this stream, read by one strict scan ([`crate::engine::json::scan`]) instead
// of serde's derived visitors (most of the decode time); anything else is `None` and takes the
// general path. The property tests and the `fast_delta` fuzz target check that both paths leave
// the decoder in the same state.
/// A Gemini chunk that carries one candidate with one plain text part: what the decoder takes
/// from it. `usage` is the `usageMetadata` object's own text (read by the decoder).
#[derive(Debug, PartialEq)]
pub struct GeminiText<'a> {
    pub text: String,
    pub usage: Option<&'a str>,
    pub response_id: Option<&'a str>,
    pub finish_reason: Option<&'a str>,
}

/// A Gemini `streamGenerateContent` chunk of plain text, or `None` for the general path: one
/// candidate whose content has exactly one part `{"text": …}`; `usageMetadata` an object,
/// `responseId` and `finishReason` plain strings; `error` or `promptFeedback` → general path.
pub fn gemini_text_chunk(data: &str) -> Option<GeminiText<'_>> {
    gemini_text_chunk_at(data, &mut Vec::new())
}

impl GeminiDecoder {
    /// A plain text chunk, read by the learned shape when it has it, else by the scan (which
    /// teaches the shape; a chunk with a `finishReason` teaches nothing: the last one mostly).
    fn text_chunk<'a>(&mut self, data: &'a str) -> Option<GeminiText<'a>> {
        if let Some(f) = self.shape.read(data) {
            // The fixed bytes (`responseId` among them) are those of the chunk the shape was
            // learned from, which the decoder took in then, and nothing came between.
            return Some(GeminiText {
                text: f.text?,
                usage: f.object.and_then(|(a, z)| data.get(a..z)),
                response_id: None,
                finish_reason: None,
            });
        }
        let mut spans = Vec::new();
        let g = gemini_text_chunk_at(data, &mut spans);
        match &g {
            Some(g) if g.finish_reason.is_none() => self.shape.learn(data, &spans),
            _ => self.shape.unlearn(),
        }
        g
    }
}

/// [`gemini_text_chunk`], and its holes' spans in `spans` (the text, `usageMetadata`), in order.
fn gemini_text_chunk_at<'a>(data: &'a str, spans: &mut HoleSpans) -> Option<GeminiText<'a>> {
    let mut s = Scan { s: data, b: data.as_bytes(), i: 0 };
    let (mut seen_candidates, mut seen_usage, mut seen_id) = (false, false, false);
    let mut out = GeminiText { text: String::new(), usage: None, response_id: None, finish_reason: None };
    let mut text = None;
    s.object(|s, key| match () {
        _ if key.is("candidates") && !std::mem::replace(&mut seen_candidates, true) => {
            s.eat(b'[')?;
            let (mut seen_content, mut seen_finish) = (false, false);
            s.object(|s, key| match () {
                _ if key.is("content") && !std::mem::replace(&mut seen_content, true) => {
                    let mut seen_parts = false;
                    s.object(|s, key| match () {
                        _ if key.is("parts") && !std::mem::replace(&mut seen_parts, true) => {
                            s.eat(b'[')?;
                            let mut span = None;
                            text = Some(s.sole_string_at("text", &mut span)?);
                            let (a, z) = span?;
                            spans.push((a, z, Hole::Text));
                            s.eat(b']')
                        }
                        _ if key.is("parts") => None,
                        _ => s.skip(),
                    })?;
                    seen_parts.then_some(())
                }
                _ if key.is("finishReason") && !std::mem::replace(&mut seen_finish, true) => {
                    out.finish_reason = Some(s.plain_str()?);
                    Some(())
                }
                _ if key.is_any(&["content", "finishReason"]) => None,
                _ => s.skip(),
            })?;
            s.eat(b']')
        }
        _ if key.is("usageMetadata") && !std::mem::replace(&mut seen_usage, true) => {
            if s.peek()? != b'{' {
                return None;
            }
            let start = s.i;
            s.skip()?;
            out.usage = Some(s.s.get(start..s.i)?);
            spans.push((start, s.i, Hole::Object));
            Some(())
        }
        _ if key.is("responseId") && !std::mem::replace(&mut seen_id, true) => {
            out.response_id = Some(s.plain_str()?);
            Some(())
        }
        _ if key.is_any(&["candidates", "usageMetadata", "responseId", "error", "promptFeedback"]) => None,
        _ => s.skip(),
    })?;
    s.ws();
    if s.i != s.b.len() {
        return None;
    }
    out.text = text?;
    Some(out)
}

#[cfg(test)]
mod fast_tests {
    use super::*;

    #[test]
    fn gemini_text_chunks() {
        let c = r#"{"candidates":[{"content":{"parts":[{"text":" the \"fox\""}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":12,"totalTokenCount":12},"modelVersion":"gemini-2.5-flash","responseId":"r1"}"#;
        let g = gemini_text_chunk(c).unwrap();
        assert_eq!(g.text, " the \"fox\"");
        assert_eq!(g.usage, Some(r#"{"promptTokenCount":12,"totalTokenCount":12}"#));
        assert_eq!((g.response_id, g.finish_reason), (Some("r1"), None));
        let c = r#"{"candidates":[{"content":{"parts":[{"text":"."}]},"finishReason":"STOP"}]}"#;
        assert_eq!(gemini_text_chunk(c).unwrap().finish_reason, Some("STOP"));
        for c in [
            r#"{"candidates":[{"content":{"parts":[{"text":"a","thought":true}]}}]}"#,
            r#"{"candidates":[{"content":{"parts":[{"text":"a"},{"text":"b"}]}}]}"#,
            r#"{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f"}}]}}]}"#,
            r#"{"candidates":[{"content":{"parts":[]}}]}"#,
            r#"{"candidates":[{"content":{}}]}"#,
            r#"{"candidates":[{"content":{"parts":[{"text":"a"}]}},{"content":{}}]}"#,
            r#"{"candidates":[{"content":{"parts":[{"text":"a"}]}}],"usageMetadata":null}"#,
            r#"{"candidates":[{"content":{"parts":[{"text":"a"}]}}],"responseId":null}"#,
            r#"{"candidates":[{"content":{"parts":[{"text":"a"}]}}],"error":{"code":429}}"#,
            r#"{"candidates":[{"content":{"parts":[{"text":"a"}]},"finishReason":1}]}"#,
            r#"{"candidates":[],"usageMetadata":{}}"#,
        ] {
            assert_eq!(gemini_text_chunk(c), None, "{c}");
        }
    }

    /// Every chunk of a stream past the first is read by the learned shape — its text and its
    /// running usage in holes — and leaves the decoder as the scan would.
    #[test]
    fn the_shape_reads_a_running_usage() {
        let chunk = |text: &str, out: u32| {
            format!(
                r#"{{"candidates":[{{"content":{{"parts":[{{"text":"{text}"}}],"role":"model"}},"index":0}}],"usageMetadata":{{"promptTokenCount":12,"candidatesTokenCount":{out},"totalTokenCount":{}}},"modelVersion":"gemini-2.5-flash","responseId":"r1"}}"#,
                12 + out
            )
        };
        let mut d = GeminiDecoder::default();
        let mut texts = String::new();
        for (i, t) in ["The", r#" \"fox\""#, r" \u00e9", ""].iter().enumerate() {
            let mut out = Vec::new();
            let ev = SseEvent { event: None, data: chunk(t, i as u32 + 1), id: None };
            d.on_event(&ev, &mut out).unwrap();
            assert!(d.shape.known(), "chunk {i}");
            for e in out {
                if let StreamEvent::Part(StreamedMessagePart::Content(ContentPart::Text { text, .. })) = e {
                    texts += &text;
                }
            }
            assert_eq!(d.state.usage.map(|u| u.output), Some(i as u64 + 1));
        }
        assert_eq!(texts, "The \"fox\" é");
        assert_eq!(d.state.id.as_deref(), Some("r1"));
        // Another response id: not this shape (the scan reads it, and learns it).
        let mut out = Vec::new();
        let other = chunk("x", 9).replace("\"r1\"", "\"r2\"");
        d.on_event(&SseEvent { event: None, data: other, id: None }, &mut out).unwrap();
        assert_eq!(d.state.id.as_deref(), Some("r2"));
    }
}
