//! OpenAI's Responses API (`POST {base}/responses`, `stream: true`, `store: false`).
//!
//! Request: the history becomes input items: messages, `function_call` and
//! `function_call_output` items, and `reasoning` items for think parts that carry
//! `encrypted_content` (requested with `include: ["reasoning.encrypted_content"]` whenever
//! reasoning is on, since nothing is stored server-side).
//!
//! Stream: `response.created`, `response.output_item.added/done`,
//! `response.output_text.delta`, `response.function_call_arguments.delta/done`,
//! `response.reasoning_summary_text.delta`, `response.completed` / `response.incomplete`
//! (usage), `response.failed` and `error`. A call is complete at its `output_item.done`.

use super::{truncated, Prompt, StreamState, WireFormat};
use crate::engine::json::scan::{Hole, HoleSpans, Is, Scan, Shape};
use crate::engine::json::Arguments;
use serde_json::{json, Map, Value};

use super::{CallIds, Fields, HttpOptions, HttpRequest, StreamDecoder, StreamEvent};
use crate::engine::error::ChatProviderError;
use crate::engine::message::{ContentPart, Message, Role, StreamedMessagePart, TokenUsage, ToolCall, ToolCallPart};
use crate::engine::sse::{RawEvent, SseEvent};

pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

#[derive(Clone, Debug, Default)]
pub struct ResponsesConfig {
    /// What every HTTP provider takes.
    pub http: HttpOptions,
    /// Sent as `reasoning.effort` as given (`none`, `minimal`, `low`, `medium`, `high`, …).
    pub reasoning_effort: Option<String>,
    /// Background streaming (`background: true`, `store: true`): a broken connection reads the
    /// rest of the same answer again after its last `sequence_number`.
    pub background: bool,
}

/// OpenAI's own models take the system prompt as a `developer` message.
fn is_openai_model(model: &str) -> bool {
    let m = model.rsplit('/').next().unwrap_or(model);
    m.starts_with("gpt-") || m.starts_with("o1") || m.starts_with("o3") || m.starts_with("o4") || m.starts_with("codex")
}

impl WireFormat for ResponsesConfig {
    fn identity(&self) -> (&'static str, &'static [&'static str]) {
        ("OpenAIResponsesProvider", &["OPENAI_API_KEY"])
    }
    super::http_field!(DEFAULT_BASE_URL);
    fn build_request(&self, prompt: &Prompt<'_>) -> Result<HttpRequest, ChatProviderError> {
        super::check_files(prompt.history, "the Responses API", |_| Ok(()))?;
        Ok(self.request(prompt))
    }
    fn decoder(&self) -> Box<dyn StreamDecoder> {
        Box::new(ResponsesDecoder { background: self.background, ..ResponsesDecoder::default() })
    }
    fn keeps_answers(&self) -> bool {
        self.background
    }
}

impl ResponsesConfig {
    /// Reads the constructor's options: the common ones, then this provider's own.
    pub(crate) fn from_spec(spec: &super::Spec) -> Result<ResponsesConfig, serde_json::Error> {
        Ok(ResponsesConfig {
            http: spec.http()?,
            reasoning_effort: spec.string("reasoningEffort")?,
            background: spec.get("background", "a boolean", Value::as_bool)?.unwrap_or(false),
        })
    }

    /// Settings for `model` and nothing else (tests, fuzzing).
    pub fn for_model(model: &str) -> ResponsesConfig {
        ResponsesConfig { http: HttpOptions { model: model.into(), ..Default::default() }, ..Default::default() }
    }

    fn effort(&self) -> Option<String> {
        if let Some(e) = &self.reasoning_effort {
            return Some(e.clone());
        }
        Some(
            match self.http.thinking_effort.as_deref()? {
                "off" => "none",
                "low" => "low",
                "medium" => "medium",
                _ => "high",
            }
            .to_owned(),
        )
    }

    /// The request; `output` goes as `text.format` (`json_schema`, with its name and schema).
    fn request(&self, prompt: &Prompt<'_>) -> HttpRequest {
        let Prompt { system: system_prompt, tools, history, output } = *prompt;
        let openai = is_openai_model(&self.http.model);
        let mut input = Vec::with_capacity(history.len() + 1);
        if !system_prompt.is_empty() {
            let role = if openai { "developer" } else { "system" };
            input.push(json!({"role": role, "content": system_prompt}));
        }
        for m in history {
            message_to_items(m, openai, &mut input);
        }
        let mut body = Map::new();
        body.insert("model".into(), json!(self.http.model));
        body.insert("input".into(), Value::Array(input));
        body.insert("stream".into(), json!(true));
        // A background answer is kept by the server (it can be read again, and cancelled).
        body.insert("store".into(), json!(self.background));
        if self.background {
            body.insert("background".into(), json!(true));
        }
        if !tools.is_empty() {
            let tools: Vec<Value> = tools
                .iter()
                .map(|t| {
                    json!({"type": "function", "name": t.name, "description": t.description,
                           "parameters": t.parameters, "strict": false})
                })
                .collect();
            body.insert("tools".into(), Value::Array(tools));
        }
        match self.effort() {
            Some(e) if e == "none" => {
                body.insert("reasoning".into(), json!({"effort": "none"}));
            }
            Some(e) => {
                body.insert("reasoning".into(), json!({"effort": e, "summary": "auto"}));
                body.insert("include".into(), json!(["reasoning.encrypted_content"]));
            }
            None => {}
        }
        if let Some(n) = self.http.max_tokens {
            body.insert("max_output_tokens".into(), json!(n));
        }
        if let Some(t) = self.http.temperature {
            body.insert("temperature".into(), json!(t));
        }
        if let Some(o) = output {
            let mut format = o.openai_fields();
            format.insert("type".into(), json!("json_schema"));
            body.insert("text".into(), json!({ "format": format }));
        }
        super::merge_extra_body(&mut body, &self.http.extra_body);
        let base = self.http.base_url.as_deref().unwrap_or(DEFAULT_BASE_URL).trim_end_matches('/');
        let auth =
            self.http.api_key.as_deref().filter(|k| !k.is_empty()).map(|k| ("authorization", format!("Bearer {k}")));
        let headers = super::request_headers(&[], auth, &self.http.headers);
        HttpRequest {
            method: super::Method::Post,
            url: format!("{base}/responses"),
            headers,
            body: Value::Object(body).to_string(),
        }
    }
}

fn input_content(parts: &[&ContentPart]) -> Vec<Value> {
    parts
        .iter()
        .filter_map(|p| match p {
            ContentPart::Text { text, .. } if !text.is_empty() => Some(json!({"type": "input_text", "text": text})),
            ContentPart::ImageUrl { image_url } => {
                Some(json!({"type": "input_image", "detail": "auto", "image_url": image_url.url}))
            }
            ContentPart::AudioUrl { audio_url } if audio_url.url.starts_with("http") => {
                Some(json!({"type": "input_file", "file_url": audio_url.url}))
            }
            ContentPart::AudioUrl { audio_url } => super::split_data_url(&audio_url.url)
                .map(|(mime, data)| json!({"type": "input_file", "file_data": format!("data:{mime};base64,{data}")})),
            ContentPart::File { file } => {
                let mut f = match file.data() {
                    Some(_) => json!({"type": "input_file", "file_data": file.url}),
                    None => json!({"type": "input_file", "file_url": file.url}),
                };
                if let Some(name) = &file.filename {
                    f["filename"] = json!(name);
                }
                Some(f)
            }
            _ => None,
        })
        .collect()
}

/// One history message as Responses input items, in order: reasoning items where the think
/// parts were (consecutive think parts with the same `encrypted` form one item with several
/// summaries), message items for the rest, then the function calls.
pub fn message_to_items(m: &Message, openai: bool, out: &mut Vec<Value>) {
    if m.role == Role::Tool {
        let output: Value = match m.content.as_slice() {
            [ContentPart::Text { text, .. }] => json!(text),
            parts => Value::Array(input_content(&parts.iter().collect::<Vec<_>>())),
        };
        out.push(json!({"type": "function_call_output", "call_id": m.tool_call_id.as_deref().unwrap_or(""), "output": output}));
        return;
    }
    let role = match m.role {
        Role::System if openai => "developer",
        Role::System => "system",
        Role::Assistant => "assistant",
        _ => "user",
    };
    let mut pending: Vec<&ContentPart> = Vec::new();
    let flush = |pending: &mut Vec<&ContentPart>, out: &mut Vec<Value>| {
        if pending.is_empty() {
            return;
        }
        if role == "assistant" {
            let content: Vec<Value> = pending
                .iter()
                .filter_map(|p| match p {
                    ContentPart::Text { text, .. } if !text.is_empty() => {
                        let annotations = p.text_extra_list("annotations").cloned().unwrap_or_default();
                        Some(json!({"type": "output_text", "text": text, "annotations": annotations}))
                    }
                    _ => None,
                })
                .collect();
            if !content.is_empty() {
                out.push(json!({"type": "message", "role": "assistant", "content": content}));
            }
        } else {
            out.push(json!({"type": "message", "role": role, "content": input_content(pending)}));
        }
        pending.clear();
    };
    let mut i = 0;
    while i < m.content.len() {
        match &m.content[i] {
            ContentPart::Think { encrypted, .. } => {
                flush(&mut pending, out);
                let mut summary = Vec::new();
                while let Some(ContentPart::Think { think, encrypted: e }) = m.content.get(i) {
                    if e != encrypted {
                        break;
                    }
                    if !think.is_empty() {
                        summary.push(json!({"type": "summary_text", "text": think}));
                    }
                    i += 1;
                }
                // Without encrypted content the server has nothing to resume from (nothing is
                // stored): such reasoning is left out.
                if let Some(enc) = encrypted.as_deref().filter(|e| !e.is_empty()) {
                    out.push(json!({"type": "reasoning", "summary": summary, "encrypted_content": enc}));
                }
            }
            p if p.is_server_tool() => {
                // A hosted tool's item goes back in its place; another provider's is left out.
                if let Some(item) = p.server_tool_for("openai_responses") {
                    flush(&mut pending, out);
                    out.push(item.clone());
                }
                i += 1;
            }
            p => {
                pending.push(p);
                i += 1;
            }
        }
    }
    flush(&mut pending, out);
    for call in m.tool_calls.iter().flatten() {
        out.push(json!({
            "type": "function_call",
            "call_id": call.id,
            "name": call.function.name,
            "arguments": Arguments::as_sent(call.function.arguments.as_deref()),
        }));
    }
}

// ---- stream decoding -------------------------------------------------------------------

/// The event types the decoder reads; any other is skipped.
const KNOWN_EVENTS: &[&str] = &[
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.output_item.done",
    "response.output_text.delta",
    "response.output_text.annotation.added",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.reasoning_summary_text.delta",
    "response.reasoning_text.delta",
    "response.refusal.delta",
    "response.completed",
    "response.incomplete",
    "response.failed",
    "error",
];

/// An event the fast path left, read field by field ([`super::Fields`]).
struct Event {
    kind: String,
    sequence_number: Option<u64>,
    item_id: Option<String>,
    output_index: Option<u64>,
    summary_index: Option<u64>,
    delta: Option<String>,
    arguments: Option<String>,
    item: Option<Value>,
    annotation: Option<Value>,
    response: Option<Value>,
    code: Option<Value>,
    message: Option<String>,
    error: Option<Value>,
}

impl Event {
    fn read(f: Fields<'_>) -> Result<Event, String> {
        Ok(Event {
            kind: f.str("type")?.unwrap_or_default().to_owned(),
            // Read past as serde reads past it, when it is not a number.
            sequence_number: f.any("sequence_number").and_then(Value::as_u64),
            item_id: f.string("item_id")?,
            output_index: f.u64("output_index")?,
            summary_index: f.u64("summary_index")?,
            delta: f.string("delta")?,
            arguments: f.string("arguments")?,
            item: f.any("item").cloned(),
            annotation: f.any("annotation").cloned(),
            response: f.any("response").cloned(),
            code: f.any("code").cloned(),
            message: f.string("message")?,
            error: f.any("error").cloned(),
        })
    }
}

#[derive(Debug)]
struct Item {
    kind: ItemKind,
}

#[derive(Debug)]
enum ItemKind {
    Call {
        id: String,
        arguments_seen: bool,
        done: bool,
    },
    Reasoning {
        last_summary: Option<u64>,
    },
    /// An item of a hosted tool (`web_search_call`, `code_interpreter_call`, …): kept whole
    /// at `output_item.done` and sent back as it came.
    Hosted,
    Other,
}

/// Item types the caller must answer (and so cannot be kept and replayed as they are); every
/// other type beyond messages, calls and reasoning is a hosted tool's item. `custom_tool_call`
/// is not among them: this package declares function tools only, so such an item is one the
/// server ran itself (xAI's `x_search`), kept and sent back like any hosted tool's.
const CLIENT_ITEMS: &[&str] =
    &["message", "function_call", "reasoning", "computer_call", "local_shell_call", "apply_patch_call"];

#[derive(Debug)]
pub struct ResponsesDecoder {
    /// Text deltas take [`super::fast_delta`] (on by default; tests compare both paths).
    pub fast: bool,
    /// The shape of the last text delta the fast path's scan read ([`Shape`]).
    shape: Shape,
    /// The answer\'s id, usage and finish reason.
    state: StreamState,
    ended: bool,
    items: Vec<Item>,
    /// Each item id's and output index's latest item: O(1) lookups however many items come.
    by_item_id: std::collections::HashMap<String, usize>,
    by_output_index: std::collections::HashMap<u64, usize>,
    /// Items before this one were completed by `complete_all` already.
    completed_upto: usize,
    any_call: bool,
    /// Output messages begun so far.
    messages: u32,
    /// The refusal streamed so far (`response.refusal.delta`, or a `refusal` content part).
    refusal: String,
    refused: bool,
    /// `response.output_text.annotation.added` came: the finished message's own list of
    /// annotations is not read again.
    annotations_streamed: bool,
    ids: CallIds,
    /// A background answer: events at or below the last sequence number read are repeats (a
    /// server that replays them after a reconnect), and a broken stream can be resumed.
    pub background: bool,
    last_seq: Option<u64>,
    /// Fragments and deltas join the part before them ([`StreamDecoder::join_parts`]).
    join: bool,
}

impl Default for ResponsesDecoder {
    fn default() -> Self {
        ResponsesDecoder {
            fast: true,
            shape: Shape::default(),
            state: StreamState::default(),
            ended: false,
            items: Vec::new(),
            by_item_id: Default::default(),
            by_output_index: Default::default(),
            completed_upto: 0,
            any_call: false,
            messages: 0,
            refusal: String::new(),
            refused: false,
            annotations_streamed: false,
            ids: CallIds::default(),
            background: false,
            last_seq: None,
            join: false,
        }
    }
}

fn text_with_list(key: &str, list: Vec<Value>) -> StreamEvent {
    StreamEvent::Part(StreamedMessagePart::Content(ContentPart::text_with_list("", key, list)))
}

fn usage_of(u: &Value) -> TokenUsage {
    let n = |p: &str| u.pointer(p).and_then(Value::as_u64).unwrap_or(0);
    let input = n("/input_tokens");
    let cached = n("/input_tokens_details/cached_tokens").min(input);
    TokenUsage {
        input_other: input - cached,
        output: n("/output_tokens"),
        input_cache_read: cached,
        input_cache_creation: 0,
    }
}

fn error_of(err: &Value, fallback: &str) -> ChatProviderError {
    let code = err.get("code").and_then(Value::as_str);
    let status = err.get("code").and_then(Value::as_u64).and_then(|c| u16::try_from(c).ok());
    let msg = err.get("message").and_then(Value::as_str).unwrap_or(fallback);
    super::mid_stream_error(code, status, msg)
}

impl ResponsesDecoder {
    fn find(&mut self, item_id: Option<&str>, output_index: Option<u64>) -> Option<&mut Item> {
        let pos = match item_id.filter(|s| !s.is_empty()) {
            Some(id) => self.by_item_id.get(id).copied(),
            None => None,
        }
        .or_else(|| output_index.and_then(|o| self.by_output_index.get(&o).copied()))?;
        self.items.get_mut(pos)
    }

    fn on_item_added(&mut self, ev: &Event, out: &mut Vec<StreamEvent>) {
        let Some(item) = ev.item.as_ref() else { return };
        if item.get("type").and_then(Value::as_str) == Some("message") {
            if self.messages > 0 {
                // A second output message: its text is a part of its own, not run into the first.
                out.push(StreamEvent::Boundary);
            }
            self.messages += 1;
        }
        let item_id = item.get("id").and_then(Value::as_str).unwrap_or("").to_owned();
        let kind = match item.get("type").and_then(Value::as_str).unwrap_or("") {
            "function_call" => {
                let id = self.ids.assign(item.get("call_id").and_then(Value::as_str), "call_");
                let name = item.get("name").and_then(Value::as_str).unwrap_or("").to_owned();
                let args = item.get("arguments").and_then(Value::as_str).filter(|a| !a.is_empty()).map(str::to_owned);
                let arguments_seen = args.is_some();
                out.push(StreamEvent::Part(StreamedMessagePart::ToolCall(ToolCall::new(id.clone(), name, args))));
                ItemKind::Call { id, arguments_seen, done: false }
            }
            // Its summaries stream as think parts; the encrypted content closes them at
            // `output_item.done`.
            "reasoning" => ItemKind::Reasoning { last_summary: None },
            t if !t.is_empty() && !CLIENT_ITEMS.contains(&t) => ItemKind::Hosted,
            _ => ItemKind::Other,
        };
        self.any_call |= matches!(kind, ItemKind::Call { .. });
        self.by_item_id.insert(item_id, self.items.len());
        if let Some(o) = ev.output_index {
            self.by_output_index.insert(o, self.items.len());
        }
        self.items.push(Item { kind });
    }

    fn on_item_done(&mut self, ev: &Event, out: &mut Vec<StreamEvent>) {
        let Some(item) = ev.item.as_ref() else { return };
        let item_id = item.get("id").and_then(Value::as_str);
        let item_type = item.get("type").and_then(Value::as_str).unwrap_or("");
        if item_type == "message" && !self.annotations_streamed {
            // A server that lists annotations only in the finished message.
            let listed: Vec<Value> = item
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|part| part.get("annotations").and_then(Value::as_array))
                .flatten()
                .cloned()
                .collect();
            if !listed.is_empty() {
                out.push(text_with_list("annotations", listed));
            }
        }
        if item_type == "message" && self.refusal.is_empty() {
            // A refusal given as a content part of the finished message (no refusal deltas).
            for part in item.get("content").and_then(Value::as_array).into_iter().flatten() {
                if part.get("type").and_then(Value::as_str) == Some("refusal") {
                    self.refusal.push_str(part.get("refusal").and_then(Value::as_str).unwrap_or(""));
                    self.refused = true;
                }
            }
        }
        let known = self.find(item_id, ev.output_index).is_some();
        if !known && item_type != "message" {
            // A call never announced by `output_item.added`: take it whole.
            self.on_item_added(ev, out);
        }
        let Some(entry) = self.find(item_id, ev.output_index) else { return };
        match &mut entry.kind {
            ItemKind::Call { id, arguments_seen, done } => {
                if *done {
                    return;
                }
                if !*arguments_seen {
                    if let Some(a) = item.get("arguments").and_then(Value::as_str).filter(|a| !a.is_empty()) {
                        out.push(StreamEvent::Part(StreamedMessagePart::ToolCallPart(ToolCallPart {
                            arguments_part: Some(a.to_owned()),
                            tool_call_id: Some(id.clone()),
                        })));
                    }
                }
                *done = true;
                out.push(StreamEvent::ToolCallComplete(id.clone(), None));
            }
            ItemKind::Reasoning { .. } => {
                if let Some(enc) = item.get("encrypted_content").and_then(Value::as_str).filter(|e| !e.is_empty()) {
                    out.push(StreamEvent::Part(StreamedMessagePart::Content(ContentPart::Think {
                        think: String::new(),
                        encrypted: Some(enc.to_owned()),
                    })));
                }
            }
            ItemKind::Hosted => {
                entry.kind = ItemKind::Other;
                out.push(StreamEvent::Part(StreamedMessagePart::Content(ContentPart::server_tool(
                    "openai_responses",
                    item.clone(),
                ))));
            }
            ItemKind::Other => {}
        }
    }

    fn complete_all(&mut self, out: &mut Vec<StreamEvent>) {
        for item in self.items.iter_mut().skip(self.completed_upto) {
            if let ItemKind::Call { id, done, .. } = &mut item.kind {
                if !*done {
                    *done = true;
                    out.push(StreamEvent::ToolCallComplete(id.clone(), None));
                }
            }
        }
        self.completed_upto = self.items.len();
    }

    fn has_calls(&self) -> bool {
        self.any_call
    }

    /// A background answer's event at or below the last sequence number read: a repeat (a
    /// server may replay from the start after a reconnect), skipped. Otherwise notes it.
    fn repeated(&mut self, seq: Option<u64>) -> bool {
        match (self.background, seq, self.last_seq) {
            (true, Some(s), Some(last)) if s <= last => true,
            (true, Some(s), _) => {
                self.last_seq = Some(s);
                false
            }
            _ => false,
        }
    }
}

impl ResponsesDecoder {
    /// A text delta read by a fast path, with its sequence number.
    fn on_text_delta(&mut self, d: String, seq: Option<u64>, out: &mut Vec<StreamEvent>) {
        if !self.repeated(seq) && !d.is_empty() {
            super::push_content(out, self.join, ContentPart::text(d));
        }
    }
}

impl StreamDecoder for ResponsesDecoder {
    fn join_parts(&mut self, join: bool) {
        self.join = join;
    }

    fn reads_raw(&self) -> bool {
        self.fast
    }

    fn on_raw_data(&mut self, ev: &RawEvent, out: &mut Vec<StreamEvent>) -> Option<usize> {
        if self.ended || !self.fast {
            return None;
        }
        let (f, used) = self.shape.read_raw(ev)?;
        self.on_text_delta(f.text?, f.uints[0], out);
        Some(used)
    }

    fn on_event(&mut self, event: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<(), ChatProviderError> {
        let data = event.data.trim();
        if data.is_empty() || data == "[DONE]" || self.ended {
            return Ok(());
        }
        if self.fast {
            // The text, and the sequence number (the shape's one integer hole).
            let delta = match self.shape.read(data) {
                Some(filled) => filled.text.map(|t| (t, filled.uints[0])),
                None => delta_with_spans(data).map(|(text, spans)| {
                    self.shape.learn(data, &spans);
                    let seq =
                        spans.iter().find(|s| s.2 == Hole::Uint).and_then(|&(a, z, _)| data.get(a..z)?.parse().ok());
                    (text, seq)
                }),
            };
            if let Some((d, seq)) = delta {
                self.on_text_delta(d, seq, out);
                return Ok(());
            }
        }
        let Some(ev) = super::typed_event(data, KNOWN_EVENTS, Event::read)? else { return Ok(()) };
        if self.repeated(ev.sequence_number) {
            return Ok(());
        }
        match ev.kind.as_str() {
            "response.created" | "response.in_progress" => {
                if let Some(id) = ev.response.as_ref().and_then(|r| r.get("id")).and_then(Value::as_str) {
                    self.state.id = Some(id.to_owned());
                }
            }
            "response.output_item.added" => self.on_item_added(&ev, out),
            "response.output_item.done" => self.on_item_done(&ev, out),
            "response.output_text.delta" => {
                if let Some(d) = ev.delta.filter(|d| !d.is_empty()) {
                    super::push_content(out, self.join, ContentPart::text(d));
                }
            }
            "response.output_text.annotation.added" => {
                if let Some(a) = ev.annotation.filter(Value::is_object) {
                    self.annotations_streamed = true;
                    out.push(text_with_list("annotations", vec![a]));
                }
            }
            "response.function_call_arguments.delta" | "response.function_call_arguments.done" => {
                let is_delta = ev.kind.ends_with("delta");
                let piece = if is_delta { ev.delta.clone() } else { ev.arguments.clone() };
                let join = self.join;
                let Some(item) = self.find(ev.item_id.as_deref(), ev.output_index) else { return Ok(()) };
                if let ItemKind::Call { id, arguments_seen, done: false } = &mut item.kind {
                    // `.done` repeats the whole arguments: they are taken only if no delta came.
                    if let Some(p) = piece.filter(|p| !p.is_empty() && (is_delta || !*arguments_seen)) {
                        *arguments_seen = true;
                        super::push_fragment(out, join, id, p);
                    }
                }
            }
            "response.refusal.delta" => {
                self.refused = true;
                self.refusal.push_str(ev.delta.as_deref().unwrap_or(""));
            }
            // Raw reasoning (gpt-oss behind LM Studio, vLLM, Ollama): think parts as they come.
            "response.reasoning_text.delta" => {
                if let Some(d) = ev.delta.filter(|d| !d.is_empty()) {
                    out.push(StreamEvent::Part(StreamedMessagePart::Content(ContentPart::think(d))));
                }
            }
            "response.reasoning_summary_text.delta" => {
                let summary = ev.summary_index;
                let Some(item) = self.find(ev.item_id.as_deref(), ev.output_index) else { return Ok(()) };
                if let ItemKind::Reasoning { last_summary } = &mut item.kind {
                    let mut text = String::new();
                    // A new summary part of the same reasoning starts a new paragraph.
                    if last_summary.is_some() && *last_summary != summary {
                        text.push_str("\n\n");
                    }
                    *last_summary = summary;
                    text.push_str(ev.delta.as_deref().unwrap_or(""));
                    if !text.is_empty() {
                        out.push(StreamEvent::Part(StreamedMessagePart::Content(ContentPart::think(text))));
                    }
                }
            }
            "response.completed" | "response.incomplete" => {
                let r = ev.response.unwrap_or(Value::Null);
                if let Some(id) = r.get("id").and_then(Value::as_str) {
                    self.state.id = Some(id.to_owned());
                }
                if let Some(u) = r.get("usage").filter(|u| u.is_object()) {
                    self.state.usage = Some(usage_of(u));
                }
                let reason = if ev.kind == "response.incomplete" {
                    r.pointer("/incomplete_details/reason").and_then(Value::as_str).unwrap_or("incomplete").to_owned()
                } else if self.has_calls() {
                    "tool_calls".to_owned()
                } else {
                    "stop".to_owned()
                };
                self.state.finish_reason = Some(reason);
                self.ended = true;
                self.complete_all(out);
            }
            "response.failed" => {
                let err = ev.response.as_ref().and_then(|r| r.get("error")).cloned().unwrap_or(Value::Null);
                return Err(error_of(&err, "the response failed"));
            }
            "error" => {
                let err = match ev.error {
                    Some(e) if e.is_object() => e,
                    _ => json!({"code": ev.code, "message": ev.message}),
                };
                return Err(error_of(&err, "unknown error"));
            }
            _ => {}
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), ChatProviderError> {
        if !self.ended {
            return Err(truncated("no response.completed"));
        }
        if self.refused {
            return Err(super::refusal(&self.refusal));
        }
        self.complete_all(out);
        Ok(())
    }

    fn state(&self) -> &StreamState {
        &self.state
    }

    fn resume_point(&self) -> Option<(&str, u64)> {
        if !self.background || self.ended {
            return None;
        }
        Some((self.state.id.as_deref()?, self.last_seq?))
    }

    fn read_again(&mut self, id: &str) {
        self.state.id = Some(id.to_owned());
    }
}

// ---- the fast path ------------------------------------------------------------------------------
//
// The commonest event of this stream, read by one strict scan ([`crate::engine::json::scan`]) instead
// of serde's derived visitors (most of the decode time); anything else is `None` and takes the
// general path. The property tests and the `fast_delta` fuzz target check that both paths leave
// the decoder in the same state.
/// A Responses `response.output_text.delta` event: its text, or `None` for the general path.
/// The fields the general path types (`item_id`, `output_index`, `delta`) must have its
/// types; a field it reads for other events (`summary_index`, `arguments`, `item`, …) sends the
/// event to it; others (`sequence_number`, `content_index`, `logprobs`, `obfuscation`) are
/// skipped, as serde ignores them.
pub fn responses_text_delta(data: &str) -> Option<String> {
    delta_with_spans(data).map(|(text, _)| text)
}

/// [`responses_text_delta`], and where its holes lie for a [`Shape`]: the text, and the sequence
/// number and the `obfuscation` padding when there are (the item's id and indices stay fixed).
fn delta_with_spans(data: &str) -> Option<(String, HoleSpans)> {
    let mut s = Scan { s: data, b: data.as_bytes(), i: 0 };
    let (mut seen_type, mut seen_item, mut seen_index, mut seen_delta) = (false, false, false, false);
    let (mut seen_seq, mut seen_pad) = (false, false);
    let mut text = None;
    let mut spans = Vec::with_capacity(3);
    s.object(|s, key| match () {
        _ if key.is("type") && !std::mem::replace(&mut seen_type, true) => {
            s.plain_str()?.is("response.output_text.delta").then_some(())
        }
        _ if key.is("item_id") && !std::mem::replace(&mut seen_item, true) => s.plain_str().map(|_| ()),
        _ if key.is("output_index") && !std::mem::replace(&mut seen_index, true) => s.uint(),
        _ if key.is("delta") && !std::mem::replace(&mut seen_delta, true) => {
            s.ws();
            let at = s.i;
            text = Some(s.content()?);
            spans.push((at, s.i, Hole::Text));
            Some(())
        }
        // Skipped as serde skips them (any value); holes when they are what a hole holds: the
        // sequence number an integer of at most 15 digits, the padding a string (the scan skips
        // plain strings only).
        _ if (key.is("sequence_number") && !std::mem::replace(&mut seen_seq, true))
            || (key.is("obfuscation") && !std::mem::replace(&mut seen_pad, true)) =>
        {
            s.ws();
            let at = s.i;
            s.skip()?;
            let value = s.b.get(at..s.i)?;
            if !key.is("sequence_number") && value.first() == Some(&b'"') {
                spans.push((at, s.i, Hole::Pad));
            } else if key.is("sequence_number") && value.len() <= 15 && value.iter().all(u8::is_ascii_digit) {
                spans.push((at, s.i, Hole::Uint));
            }
            Some(())
        }
        _ if key.is_any(&[
            "summary_index",
            "arguments",
            "item",
            "annotation",
            "response",
            "code",
            "message",
            "error",
            "type",
            "item_id",
            "output_index",
            "delta",
        ]) =>
        {
            None
        }
        _ => s.skip(),
    })?;
    s.ws();
    if s.i != s.b.len() || !seen_type {
        return None;
    }
    Some((text?, spans))
}

#[cfg(test)]
mod fast_tests {
    use super::*;

    #[test]
    fn responses_text_deltas() {
        let e = r#"{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":" the \"fox\"","logprobs":[],"obfuscation":"a1"}"#;
        assert_eq!(responses_text_delta(e).as_deref(), Some(" the \"fox\""));
        for e in [
            r#"{"type":"response.reasoning_text.delta","item_id":"r","delta":"x"}"#,
            r#"{"type":"response.output_text.delta","item_id":"m"}"#,
            r#"{"type":"response.output_text.delta","delta":{"x":1}}"#,
            r#"{"type":"response.output_text.delta","delta":"a","delta":"b"}"#,
            r#"{"type":"response.output_text.delta","item_id":1,"delta":"a"}"#,
            r#"{"type":"response.output_text.delta","output_index":-1,"delta":"a"}"#,
            r#"{"type":"response.output_text.delta","output_index":12345678901234567890,"delta":"a"}"#,
            r#"{"type":"response.output_text.delta","delta":"a","message":3}"#,
            r#"{"delta":"a"}"#,
            r#"{"type":"response.output_text.delta","delta":"a"} x"#,
        ] {
            assert_eq!(responses_text_delta(e), None, "{e}");
        }
    }

    /// A delta as the API writes it, learned as a shape: another sequence number, text and
    /// padding read by comparing bytes, as the scan reads them; another item or field is not it.
    #[test]
    fn a_delta_of_the_learned_shape_reads_as_the_scan_does() {
        let sent = |seq: &str, text: &str, pad: &str| {
            format!(
                r#"{{"type":"response.output_text.delta","sequence_number":{seq},"item_id":"msg_1","output_index":0,"content_index":0,"delta":"{text}","logprobs":[],"obfuscation":"{pad}"}}"#
            )
        };
        let mut shape = Shape::default();
        let first = sent("4", "first", "a1");
        shape.learn(&first, &delta_with_spans(&first).unwrap().1);
        for (seq, text, pad) in [("5", " the", "x"), ("123456", r#"\"q\" \u00e9"#, ""), ("0", "", "pad9pad9")] {
            let e = sent(seq, text, pad);
            let got = shape.read(&e).expect(&e);
            assert_eq!(got.text, responses_text_delta(&e), "{e}");
            assert_eq!(got.uints[0], seq.parse().ok(), "{e}");
        }
        for e in [
            sent("-1", "x", "a"),
            sent("1.5", "x", "a"),
            sent("1", "x", r#"\u0041"#),
            sent("1", "x", "a").replace("msg_1", "msg_2"),
            sent("1", "x", "a").replace(r#""content_index":0"#, r#""content_index":1"#),
            sent("1", "x", "a") + " ",
        ] {
            assert_eq!(shape.read(&e), None, "{e}");
        }
    }
}
