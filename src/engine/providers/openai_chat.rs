//! OpenAI Chat Completions (`POST {base}/chat/completions`, `stream: true`) and every server
//! that speaks it.
//!
//! Stream decoding: `choices[0].delta` carries `content` (text), the reasoning key (think
//! parts; `reasoning_content` unless configured) and `tool_calls` fragments keyed by
//! `index` — the first fragment of a call has its `id` and `function.name`, later ones only
//! `function.arguments` pieces, and fragments of several calls may interleave. Usage comes in
//! a chunk of its own (`stream_options.include_usage`), cached prompt tokens in
//! `prompt_tokens_details.cached_tokens`. The stream ends with `finish_reason` and
//! `data: [DONE]`; a stream that stops before either is an error.
//!
//! Tool-call completion: a call is complete at `finish_reason`, at `[DONE]`, at the end of
//! the stream, or once a later index has begun *and* its arguments parse as a JSON object or
//! array. The parse runs only when its brackets balance ([`JsonCloseTracker`]).

use super::{truncated, Prompt, StreamState, WireFormat};
use crate::engine::json::Arguments;
use serde_json::{json, Map, Value};

use super::{Fields, HttpOptions, HttpRequest, StreamDecoder, StreamEvent};
use crate::engine::error::{ChatProviderError, FailureKind};
use crate::engine::json::close::{parses_as_container, JsonCloseTracker};
use crate::engine::json::scan::{same_long_bytes, Filled, Hole, Is, Scan, Shape};
use crate::engine::message::{ContentPart, Message, StreamedMessagePart, TokenUsage, ToolCall};
use crate::engine::sse::{RawEvent, SseEvent};

pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
pub const DEFAULT_REASONING_KEY: &str = "reasoning_content";

/// Whose Chat Completions: the rules that differ live in the dialect's module.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Dialect {
    #[default]
    OpenAI,
    /// Moonshot's Kimi API.
    Kimi,
}

/// The provider's settings, as the JS constructor takes them (camelCase).
#[derive(Clone, Debug, Default)]
pub struct OpenAIChatConfig {
    /// What every HTTP provider takes.
    pub http: HttpOptions,
    /// Where think parts travel: read from `delta[key]`, and written back into history
    /// messages under this key. Unset: `reasoning_content` is read, nothing is written.
    pub reasoning_key: Option<String>,
    /// The server's dialect: OpenAI's own, or Moonshot's ([`super::kimi`]).
    pub dialect: Dialect,
}

impl WireFormat for OpenAIChatConfig {
    fn identity(&self) -> (&'static str, &'static [&'static str]) {
        match self.dialect {
            Dialect::OpenAI => ("OpenAIChatProvider", &["OPENAI_API_KEY"]),
            Dialect::Kimi => ("KimiProvider", &["MOONSHOT_API_KEY"]),
        }
    }
    super::http_field!(DEFAULT_BASE_URL);
    fn build_request(&self, prompt: &Prompt<'_>) -> Result<HttpRequest, ChatProviderError> {
        self.request(prompt)
    }
    fn decoder(&self) -> Box<dyn StreamDecoder> {
        Box::new(OpenAIChatConfig::decoder(self))
    }
}

impl OpenAIChatConfig {
    /// Reads the constructor's options: the common ones, then this provider's own.
    pub(crate) fn from_spec(spec: &super::Spec) -> Result<OpenAIChatConfig, serde_json::Error> {
        Ok(OpenAIChatConfig {
            http: spec.http()?,
            reasoning_key: spec.string("reasoningKey")?,
            dialect: Dialect::OpenAI,
        })
    }

    /// Settings for `model` and nothing else (tests, fuzzing).
    pub fn for_model(model: &str) -> OpenAIChatConfig {
        OpenAIChatConfig { http: HttpOptions { model: model.into(), ..Default::default() }, ..Default::default() }
    }

    /// Moonshot's dialect of Chat Completions (see [`super::kimi`]).
    pub fn into_kimi(self) -> Self {
        super::kimi::into_kimi(self)
    }

    pub fn reasoning_effort(&self) -> Option<&'static str> {
        match self.http.thinking_effort.as_deref()? {
            "low" => Some("low"),
            "medium" => Some("medium"),
            "high" | "xhigh" | "max" => Some("high"),
            _ => None,
        }
    }

    /// The request; `output` asks for structured output: `response_format` with the schema
    /// (`json_schema`), or in Moonshot's dialect its JSON mode (see [`super::kimi::json_mode`]).
    fn request(&self, prompt: &Prompt<'_>) -> Result<HttpRequest, ChatProviderError> {
        let Prompt { system: system_prompt, tools, history, output } = *prompt;
        match self.dialect {
            Dialect::OpenAI => super::check_files(history, "Chat Completions", |f| match f.data() {
                Some(_) => Ok(()),
                None => Err("Chat Completions takes a file's data (a base64 data: URL), not a link to it"),
            })?,
            Dialect::Kimi => super::check_files(history, "the Kimi API", |_| {
                Err("it reads files only through its own file upload, not in a message")
            })?,
        }
        let mut messages = Vec::with_capacity(history.len() + 1);
        let (response_format, system_prompt) = match (output, self.dialect) {
            (None, _) => (None, std::borrow::Cow::Borrowed(system_prompt)),
            (Some(o), Dialect::Kimi) => {
                let (format, prompt) = super::kimi::json_mode(o, system_prompt)?;
                (Some(format), std::borrow::Cow::Owned(prompt))
            }
            (Some(o), Dialect::OpenAI) => (
                Some(json!({"type": "json_schema", "json_schema": Value::Object(o.openai_fields())})),
                std::borrow::Cow::Borrowed(system_prompt),
            ),
        };
        if !system_prompt.is_empty() {
            messages.push(json!({"role": "system", "content": system_prompt}));
        }
        messages.extend(history.iter().map(|m| message_to_openai(m, self.reasoning_key.as_deref())));
        let mut body = Map::new();
        body.insert("model".into(), json!(self.http.model));
        body.insert("messages".into(), Value::Array(messages));
        body.insert("stream".into(), json!(true));
        body.insert("stream_options".into(), json!({"include_usage": true}));
        if !tools.is_empty() {
            let tools: Vec<Value> = tools
                .iter()
                .map(|t| match self.dialect {
                    Dialect::Kimi => super::kimi::tool(t),
                    Dialect::OpenAI => json!({"type": "function", "function": {
                        "name": t.name, "description": t.description, "parameters": t.parameters}}),
                })
                .collect();
            body.insert("tools".into(), Value::Array(tools));
        }
        if let Some(n) = self.http.max_tokens {
            // kosong's Kimi provider sends the limit as `max_completion_tokens`.
            let key = if self.dialect == Dialect::Kimi { "max_completion_tokens" } else { "max_tokens" };
            body.insert(key.into(), json!(n));
        }
        if let Some(t) = self.http.temperature {
            body.insert("temperature".into(), json!(t));
        }
        if let Some(f) = response_format {
            body.insert("response_format".into(), f);
        }
        match self.dialect {
            Dialect::Kimi => {
                if let Some(thinking) = super::kimi::thinking(self.http.thinking_effort.as_deref()) {
                    body.insert("thinking".into(), thinking);
                }
            }
            Dialect::OpenAI => {
                if let Some(e) = self.reasoning_effort() {
                    body.insert("reasoning_effort".into(), json!(e));
                }
            }
        }
        super::merge_extra_body(&mut body, &self.http.extra_body);
        let base = self.http.base_url.as_deref().unwrap_or(DEFAULT_BASE_URL).trim_end_matches('/');
        let auth =
            self.http.api_key.as_deref().filter(|k| !k.is_empty()).map(|k| ("authorization", format!("Bearer {k}")));
        let headers = super::request_headers(&[], auth, &self.http.headers);
        Ok(HttpRequest {
            method: super::Method::Post,
            url: format!("{base}/chat/completions"),
            headers,
            body: Value::Object(body).to_string(),
        })
    }

    pub fn decoder(&self) -> OpenAIChatDecoder {
        let mut d =
            OpenAIChatDecoder::new(self.reasoning_key.clone().unwrap_or_else(|| DEFAULT_REASONING_KEY.to_owned()));
        // Moonshot's empty `reasoning_content` still marks a think part.
        d.empty_think = self.dialect == Dialect::Kimi;
        d
    }
}

fn part_to_openai(part: &ContentPart) -> Option<Value> {
    Some(match part {
        ContentPart::Text { text, .. } => json!({"type": "text", "text": text}),
        ContentPart::Think { .. } => return None,
        ContentPart::ImageUrl { image_url } => json!({"type": "image_url", "image_url": {"url": image_url.url}}),
        ContentPart::AudioUrl { audio_url } => json!({"type": "audio_url", "audio_url": {"url": audio_url.url}}),
        ContentPart::VideoUrl { video_url } => json!({"type": "video_url", "video_url": {"url": video_url.url}}),
        // Checked before (`check_files`): a data URL.
        ContentPart::File { file } => {
            let mut f = json!({"file_data": file.url});
            if let Some(name) = &file.filename {
                f["filename"] = json!(name);
            }
            json!({"type": "file", "file": f})
        }
    })
}

/// One history message in Chat Completions form. Think parts are dropped unless a
/// reasoning key is configured, in which case they travel joined under that key.
pub fn message_to_openai(m: &Message, reasoning_key: Option<&str>) -> Value {
    let role = m.role.as_str();
    let mut out = Map::new();
    out.insert("role".into(), json!(role));
    // Think parts travel under the reasoning key; another provider's server-tool blocks stay out.
    let visible: Vec<&ContentPart> =
        m.content.iter().filter(|p| !matches!(p, ContentPart::Think { .. }) && !p.is_server_tool()).collect();
    let content = match visible.as_slice() {
        [] if m.tool_calls.as_ref().is_some_and(|c| !c.is_empty()) => Value::Null,
        [] => json!(""),
        [ContentPart::Text { text, .. }] => json!(text),
        parts => Value::Array(parts.iter().filter_map(|p| part_to_openai(p)).collect()),
    };
    out.insert("content".into(), content);
    if let Some(name) = &m.name {
        out.insert("name".into(), json!(name));
    }
    if let Some(calls) = m.tool_calls.as_ref().filter(|c| !c.is_empty()) {
        let calls: Vec<Value> = calls
            .iter()
            .map(|c| {
                json!({"type": "function", "id": c.id, "function": {
                    "name": c.function.name,
                    "arguments": Arguments::as_sent(c.function.arguments.as_deref())}})
            })
            .collect();
        out.insert("tool_calls".into(), Value::Array(calls));
    }
    if let Some(id) = &m.tool_call_id {
        out.insert("tool_call_id".into(), json!(id));
    }
    if let Some(key) = reasoning_key {
        let think: String = m
            .content
            .iter()
            .filter_map(|p| match p {
                ContentPart::Think { think, .. } => Some(think.as_str()),
                _ => None,
            })
            .collect();
        if !think.is_empty() {
            out.insert(key.to_owned(), json!(think));
        }
    }
    Value::Object(out)
}

// ---- stream decoding -------------------------------------------------------------------

/// A chunk the fast path left (a call's start, reasoning, a finish, usage, an error, …), read
/// through a `Value` field by field ([`super::Fields`]).
struct Chunk {
    id: Option<String>,
    choices: Vec<Choice>,
    usage: Option<Usage>,
    error: Option<Value>,
    /// Perplexity: the sources of the answer so far (URLs), repeated in each chunk.
    citations: Option<Vec<Value>>,
    search_results: Option<Vec<Value>>,
}

struct Choice {
    /// Which of the `n` answers this is; only the first (0) is assembled.
    index: Option<u64>,
    delta: Option<Delta>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
}

struct Delta {
    /// A string, or (Mistral's reasoning models) a list of text and thinking parts.
    content: Option<Value>,
    reasoning_content: Option<String>,
    /// A refusal, in place of content.
    refusal: Option<String>,
    reasoning: Option<Value>,
    /// OpenRouter (and Snowflake): reasoning as a list of `reasoning.text`, `reasoning.summary`
    /// and `reasoning.encrypted` items, read when the reasoning key gave nothing.
    reasoning_details: Option<Vec<Value>>,
    tool_calls: Option<Vec<ToolCallDelta>>,
    /// OpenAI's search models: `url_citation` annotations of the text.
    annotations: Option<Vec<Value>>,
}

struct ToolCallDelta {
    index: Option<u64>,
    id: Option<String>,
    function: Option<FunctionDelta>,
}

struct FunctionDelta {
    name: Option<String>,
    arguments: Option<String>,
}

#[derive(Clone, Copy, Default)]
struct Usage {
    prompt_tokens: u64,
    completion_tokens: u64,
    /// `prompt_tokens_details.cached_tokens`.
    details_cached_tokens: Option<u64>,
    /// Moonshot reports cache hits at the top level.
    cached_tokens: Option<u64>,
}

type Read<T> = Result<T, String>;

/// Each item of the list `key` read by `read`.
fn each<T>(f: Fields<'_>, key: &str, read: impl Fn(&Value) -> Read<T>) -> Read<Option<Vec<T>>> {
    f.list(key)?.map(|items| items.iter().map(read).collect()).transpose()
}

impl Chunk {
    fn read(data: &str) -> Read<Chunk> {
        let v: Value = serde_json::from_str(data).map_err(|e| e.to_string())?;
        let f = Fields::of(&v, "a stream chunk")?;
        Ok(Chunk {
            id: f.string("id")?,
            choices: each(f, "choices", Choice::read)?.unwrap_or_default(),
            // Groq sends its counts only in `x_groq.usage`.
            usage: match f.object("usage")? {
                Some(u) => Some(u),
                None => f.object("x_groq")?.map(|x| x.object("usage")).transpose()?.flatten(),
            }
            .map(Usage::read)
            .transpose()?,
            error: f.any("error").cloned(),
            citations: f.list("citations")?.cloned(),
            search_results: f.list("search_results")?.cloned(),
        })
    }
}

impl Choice {
    fn read(v: &Value) -> Read<Choice> {
        let f = Fields::of(v, "a choice")?;
        Ok(Choice {
            index: f.u64("index")?,
            delta: f.object("delta")?.map(Delta::read).transpose()?,
            finish_reason: f.string("finish_reason")?,
            usage: f.object("usage")?.map(Usage::read).transpose()?,
        })
    }
}

impl Delta {
    fn read(f: Fields<'_>) -> Read<Delta> {
        Ok(Delta {
            content: f.any("content").cloned(),
            reasoning_content: f.string("reasoning_content")?,
            refusal: f.string("refusal")?,
            reasoning: f.any("reasoning").cloned(),
            reasoning_details: f.list("reasoning_details")?.cloned(),
            tool_calls: each(f, "tool_calls", ToolCallDelta::read)?,
            annotations: f.list("annotations")?.cloned(),
        })
    }
}

impl ToolCallDelta {
    fn read(v: &Value) -> Read<ToolCallDelta> {
        let f = Fields::of(v, "a tool call")?;
        let function = f
            .object("function")?
            .map(|g| Ok::<_, String>(FunctionDelta { name: g.string("name")?, arguments: g.string("arguments")? }))
            .transpose()?;
        Ok(ToolCallDelta { index: f.u64("index")?, id: f.string("id")?, function })
    }
}

impl Usage {
    fn read(f: Fields<'_>) -> Read<Usage> {
        Ok(Usage {
            prompt_tokens: f.u64("prompt_tokens")?.unwrap_or(0),
            completion_tokens: f.u64("completion_tokens")?.unwrap_or(0),
            details_cached_tokens: f
                .object("prompt_tokens_details")?
                .map(|d| d.u64("cached_tokens"))
                .transpose()?
                .flatten(),
            cached_tokens: f.u64("cached_tokens")?,
        })
    }
}

impl Usage {
    fn to_token_usage(self) -> TokenUsage {
        let cached = self.details_cached_tokens.or(self.cached_tokens).unwrap_or(0).min(self.prompt_tokens);
        TokenUsage {
            input_other: self.prompt_tokens - cached,
            output: self.completion_tokens,
            input_cache_read: cached,
            input_cache_creation: 0,
        }
    }
}

/// The text of a string, or of a list of `{type: "text", text}` parts joined.
fn text_of_parts(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) => items.iter().filter_map(|i| i.get("text").and_then(Value::as_str)).collect(),
        _ => String::new(),
    }
}

/// One item of `reasoning_details` as a think part: the text (`reasoning.text`) or summary
/// (`reasoning.summary`), a signature or encrypted reasoning (`reasoning.encrypted`) as the part's
/// `encrypted`; `None` for an item with neither, or of a type not known.
fn reasoning_detail(item: &Value) -> Option<ContentPart> {
    let s = |k: &str| item.get(k).and_then(Value::as_str);
    let (think, encrypted) = match s("type")? {
        "reasoning.text" => (s("text").unwrap_or(""), s("signature")),
        "reasoning.summary" => (s("summary").unwrap_or(""), None),
        "reasoning.encrypted" => ("", s("data")),
        _ => return None,
    };
    let encrypted = encrypted.filter(|e| !e.is_empty());
    (!think.is_empty() || encrypted.is_some())
        .then(|| ContentPart::Think { think: think.to_owned(), encrypted: encrypted.map(str::to_owned) })
}

/// An error the server sent as a stream chunk. One that carries an HTTP status (`code` or
/// `status`, as OpenRouter and others send rate limits mid-stream) or a known error type is an
/// `APIStatusError` with that status, so the agent's retry rules apply to it.
fn mid_stream_error(err: &Value) -> ChatProviderError {
    let msg =
        super::error_message_from_body(&json!({"error": err}).to_string()).unwrap_or_else(|| "unknown error".into());
    let status = ["code", "status", "status_code"].iter().find_map(|k| {
        let v = err.get(*k)?;
        v.as_u64().or_else(|| v.as_str().and_then(|s| s.parse().ok())).and_then(|s| u16::try_from(s).ok())
    });
    let kind = ["type", "code"].iter().find_map(|k| err.get(*k)?.as_str());
    super::mid_stream_error(kind, status, &msg)
}

#[derive(Debug)]
struct OpenCall {
    /// Unique within the answer (see [`super::CallIds`]).
    id: String,
    arguments: String,
    tracker: JsonCloseTracker,
    /// A later index has begun: the call completes as soon as its arguments parse.
    superseded: bool,
    completed: bool,
    /// The arguments closed and did not parse: whitespace after them cannot change that, and
    /// anything else makes them irregular, so they are never parsed again.
    parse_failed: bool,
}

#[derive(Debug)]
pub struct OpenAIChatDecoder {
    reasoning_key: String,
    /// A reasoning field that is present but empty still yields a think part (Moonshot).
    pub empty_think: bool,
    /// Plain text deltas take [`super::fast_delta`] (on by default; tests compare both paths).
    pub fast: bool,
    ids: super::CallIds,
    /// The answer\'s id, usage and finish reason.
    state: StreamState,
    done: bool,
    /// The refusal streamed so far (`delta.refusal`).
    refusal: String,
    /// Perplexity's `citations` and `search_results`, as the latest chunk had them; they join
    /// the text at the end.
    sources: Option<serde_json::Map<String, Value>>,
    calls: Vec<OpenCall>,
    /// The shape of the last chunk the fast path read, to match the next one against.
    shape: ChunkShape,
    /// Each index's call, and the server ids seen: O(1) lookups however many calls come.
    by_index: std::collections::HashMap<u64, usize>,
    /// The last index looked up and its call (a call's fragments mostly come one after another:
    /// no hash of the index for each of them).
    last_index: Option<(u64, usize)>,
    server_ids: std::collections::HashSet<String>,
    /// Calls before this one are superseded already (a new call supersedes only the newer).
    superseded_upto: usize,
    /// Calls before this one are completed already.
    completed_upto: usize,
    /// Fragments and deltas join the part before them ([`StreamDecoder::join_parts`]).
    join: bool,
}

impl OpenAIChatDecoder {
    pub fn new(reasoning_key: String) -> Self {
        OpenAIChatDecoder {
            reasoning_key,
            empty_think: false,
            fast: true,
            ids: super::CallIds::default(),
            state: StreamState::default(),
            done: false,
            refusal: String::new(),
            sources: None,
            calls: Vec::new(),
            shape: ChunkShape::default(),
            by_index: std::collections::HashMap::new(),
            last_index: None,
            server_ids: std::collections::HashSet::new(),
            superseded_upto: 0,
            completed_upto: 0,
            join: false,
        }
    }

    fn complete_all(&mut self, out: &mut Vec<StreamEvent>) {
        for c in self.calls.iter_mut().skip(self.completed_upto).filter(|c| !c.completed) {
            c.completed = true;
            out.push(StreamEvent::ToolCallComplete(c.id.clone(), None));
        }
        self.completed_upto = self.calls.len();
    }

    fn try_complete(call: &mut OpenCall, out: &mut Vec<StreamEvent>) {
        if !call.superseded || call.completed || call.parse_failed || !call.tracker.is_closed() {
            return;
        }
        if parses_as_container(&call.arguments) {
            call.completed = true;
            out.push(StreamEvent::ToolCallComplete(call.id.clone(), Some(call.arguments.len())));
        } else {
            call.parse_failed = true;
        }
    }

    /// A text or think part, which ends the calls before it.
    fn push_content(&mut self, p: ContentPart, out: &mut Vec<StreamEvent>) {
        self.content_after_calls(out);
        super::push_content(out, self.join, p);
    }

    /// Text or thinking after the calls: as in kosong, a part that is not a fragment of a call
    /// ends the calls before it, which complete as soon as their arguments parse.
    fn content_after_calls(&mut self, out: &mut Vec<StreamEvent>) {
        if self.superseded_upto == self.calls.len() && self.calls.iter().skip(self.completed_upto).all(|c| c.completed)
        {
            return;
        }
        for call in self.calls.iter_mut().skip(self.superseded_upto) {
            call.superseded = true;
            Self::try_complete(call, out);
        }
        self.superseded_upto = self.calls.len();
    }

    fn on_tool_call_delta(&mut self, d: ToolCallDelta, out: &mut Vec<StreamEvent>) {
        let (name, args) = match d.function {
            Some(f) => (f.name, f.arguments),
            None => (None, None),
        };
        let known = match d.index {
            Some(i) => match self.last_index {
                Some((last, pos)) if last == i => Some(pos),
                _ => {
                    let pos = self.by_index.get(&i).copied();
                    self.last_index = pos.map(|p| (i, p));
                    pos
                }
            },
            // No index (some servers): a new id starts a call, otherwise the last one goes on.
            None => match &d.id {
                Some(id) if !self.server_ids.contains(id) => None,
                _ => self.calls.len().checked_sub(1),
            },
        };
        match known {
            Some(pos) => {
                let Some(piece) = args.filter(|a| !a.is_empty()) else { return };
                let call = &mut self.calls[pos];
                call.tracker.feed(&piece);
                call.arguments.push_str(&piece);
                super::push_fragment(out, self.join, &call.id, piece);
                Self::try_complete(call, out);
            }
            None => {
                let index = d.index.unwrap_or(self.calls.len() as u64);
                let server_id = d.id.unwrap_or_default();
                let id = self.ids.assign(Some(&server_id), "call_");
                let mut tracker = JsonCloseTracker::default();
                if let Some(a) = &args {
                    tracker.feed(a);
                }
                out.push(StreamEvent::Part(StreamedMessagePart::ToolCall(ToolCall::new(
                    id.clone(),
                    name.unwrap_or_default(),
                    args.clone(),
                ))));
                // Every call begun before this one may now complete once it parses (those before
                // the last new call were superseded then, and are tried by their own fragments).
                for earlier in self.calls.iter_mut().skip(self.superseded_upto) {
                    earlier.superseded = true;
                    Self::try_complete(earlier, out);
                }
                self.superseded_upto = self.calls.len();
                self.by_index.insert(index, self.calls.len());
                self.last_index = Some((index, self.calls.len()));
                self.server_ids.insert(server_id);
                self.calls.push(OpenCall {
                    id,
                    arguments: args.unwrap_or_default(),
                    tracker,
                    superseded: false,
                    completed: false,
                    parse_failed: false,
                });
            }
        }
    }
}

impl OpenAIChatDecoder {
    /// A chunk of the learned shape, whose changing string is `value`.
    fn on_shaped(&mut self, (value, fragment): (String, Option<u64>), out: &mut Vec<StreamEvent>) {
        if let Some(id) = &self.shape.id {
            note_id(&mut self.state, id);
        }
        match fragment {
            Some(index) => {
                let function = Some(FunctionDelta { name: None, arguments: Some(value) });
                self.on_tool_call_delta(ToolCallDelta { index: Some(index), id: None, function }, out);
            }
            None if !value.is_empty() => self.push_content(ContentPart::text(value), out),
            None => {}
        }
    }
}

impl StreamDecoder for OpenAIChatDecoder {
    fn join_parts(&mut self, join: bool) {
        self.join = join;
    }

    fn reads_raw(&self) -> bool {
        self.fast
    }

    fn on_raw_data(&mut self, ev: &RawEvent, out: &mut Vec<StreamEvent>) -> Option<usize> {
        if self.done || !self.fast {
            return None;
        }
        let (f, used) = self.shape.shape.read_raw(ev)?;
        let read = self.shape.filled(f)?;
        self.on_shaped(read, out);
        Some(used)
    }

    fn on_event(&mut self, event: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<(), ChatProviderError> {
        if self.done {
            return Ok(());
        }
        let data = event.data.trim();
        if data == "[DONE]" {
            self.done = true;
            self.complete_all(out);
            return Ok(());
        }
        if data.is_empty() {
            return Ok(());
        }
        if self.fast {
            if let Some(value) = self.shape.read(data) {
                self.on_shaped(value, out);
                return Ok(());
            }
            if let Some(delta) = chat_text_delta(data) {
                // A call's first chunk is not learned (its id and name are not the next chunk's):
                // the shape stays the one its fragments will have, as the general path leaves it.
                if delta.start.is_none() {
                    self.shape.learn(data, &delta);
                }
                if let Some(id) = delta.id {
                    note_id(&mut self.state, id);
                }
                if let Some(text) = delta.content.filter(|c| !c.is_empty()) {
                    self.push_content(ContentPart::text(text), out);
                }
                if let Some((index, arguments)) = delta.fragment {
                    let CallStart { id, name } = delta.start.unwrap_or(CallStart { id: None, name: None });
                    let d = ToolCallDelta {
                        index: Some(index),
                        id,
                        function: Some(FunctionDelta { name, arguments: Some(arguments) }),
                    };
                    self.on_tool_call_delta(d, out);
                }
                return Ok(());
            }
        }
        let chunk = Chunk::read(data).map_err(|e| {
            ChatProviderError::failed(FailureKind::Malformed, format!("malformed stream chunk from the server: {e}"))
        })?;
        if let Some(err) = chunk.error {
            return Err(mid_stream_error(&err));
        }
        if let Some(id) = chunk.id.as_deref() {
            note_id(&mut self.state, id);
        }
        if let Some(u) = chunk.usage {
            self.state.usage = Some(u.to_token_usage());
        }
        for (key, list) in [("citations", chunk.citations), ("search_results", chunk.search_results)] {
            if let Some(list) = list.filter(|l| !l.is_empty()) {
                self.sources.get_or_insert_with(Map::new).insert(key.into(), Value::Array(list));
            }
        }
        // With `n > 1` (through `extraBody`) the choices stream side by side: the first is the
        // answer, the others are skipped.
        let Some((pos, choice)) = chunk.choices.into_iter().enumerate().find(|(_, c)| c.index.unwrap_or(0) == 0) else {
            return Ok(());
        };
        if let Some(u) = choice.usage {
            self.state.usage = Some(u.to_token_usage());
        }
        if let Some(delta) = choice.delta {
            let think = match self.reasoning_key.as_str() {
                "reasoning_content" => delta.reasoning_content,
                "reasoning" => match delta.reasoning {
                    Some(Value::String(s)) => Some(s),
                    _ => None,
                },
                // A custom reasoning key: look it up in the raw chunk (the rare path).
                key => serde_json::from_str::<Value>(data)
                    .ok()
                    .and_then(|v| v.pointer(&format!("/choices/{pos}/delta"))?.get(key)?.as_str().map(str::to_owned)),
            };
            let details = if think.is_none() { delta.reasoning_details } else { None };
            if let Some(t) = think.filter(|t| self.empty_think || !t.is_empty()) {
                if !t.is_empty() {
                    self.content_after_calls(out);
                }
                out.push(StreamEvent::Part(StreamedMessagePart::Content(ContentPart::think(t))));
            }
            for part in details.iter().flatten().filter_map(reasoning_detail) {
                if matches!(&part, ContentPart::Think { think, .. } if !think.is_empty()) {
                    self.content_after_calls(out);
                }
                out.push(StreamEvent::Part(StreamedMessagePart::Content(part)));
            }
            if let Some(r) = &delta.refusal {
                self.refusal.push_str(r);
            }
            if let Some(list) = delta.annotations.filter(|l| !l.is_empty()) {
                out.push(StreamEvent::Part(StreamedMessagePart::Content(ContentPart::text_with_list(
                    "",
                    "annotations",
                    list,
                ))));
            }
            match delta.content {
                Some(Value::String(c)) if !c.is_empty() => self.push_content(ContentPart::text(c), out),
                // Mistral's reasoning models stream content as parts: text, and thinking (itself
                // a list of text parts).
                Some(Value::Array(items)) => {
                    for item in &items {
                        let part = match item.get("type").and_then(Value::as_str) {
                            Some("text") => item.get("text").and_then(Value::as_str).map(ContentPart::text),
                            Some("thinking") => Some(ContentPart::think(text_of_parts(item.get("thinking")))),
                            _ => None,
                        };
                        if let Some(p) = part.filter(|p| !matches!(p, ContentPart::Text { text, .. } | ContentPart::Think { think: text, .. } if text.is_empty())) {
                            self.push_content(p, out);
                        }
                    }
                }
                _ => {}
            }
            for d in delta.tool_calls.unwrap_or_default() {
                self.on_tool_call_delta(d, out);
            }
        }
        if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
            self.state.finish_reason = Some(reason);
            self.complete_all(out);
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), ChatProviderError> {
        if !self.done && self.state.finish_reason.is_none() {
            return Err(truncated("no finish_reason and no [DONE]"));
        }
        if !self.refusal.is_empty() {
            return Err(super::refusal(&self.refusal));
        }
        if let Some(sources) = self.sources.take() {
            out.push(StreamEvent::Part(StreamedMessagePart::Content(ContentPart::Text {
                text: String::new(),
                extras: Some(sources),
            })));
        }
        self.complete_all(out);
        Ok(())
    }

    fn state(&self) -> &StreamState {
        &self.state
    }
}

// ---- the fast path ------------------------------------------------------------------------------
//
// The commonest events of this stream (a text delta, a fragment of a call's arguments, a call's
// first chunk), read by one strict scan ([`crate::engine::json::scan`]) instead of a
// `serde_json::Value` of the chunk (most of the decode time: a call's first chunk read that way
// cost 65k native instructions, about 20 µs in wasm on its tool's way to its handler, where the
// scan costs 10k); anything else is `None` and takes the general path. The property tests and
// the `fast_delta` fuzz target check that both paths leave
// the decoder in the same state.
/// A text delta: the chunk's id and the delta's content (`None` when null or absent).
#[derive(Debug, PartialEq)]
pub struct TextDelta<'a> {
    pub id: Option<&'a str>,
    pub content: Option<String>,
    /// A fragment of a call's arguments: `tool_calls: [{index, function: {arguments}}]`.
    pub fragment: Option<(u64, String)>,
    /// The fragment's `id` and `function.name`, when it has either (a call's first chunk).
    pub start: Option<CallStart>,
    /// Where the chunk's one string that changes from chunk to chunk lies (the content's or the
    /// fragment's, quotes included), when there is exactly one; and where the value of a
    /// top-level `obfuscation` string lies. What [`ChunkShape`] learns a chunk's shape by.
    pub spans: Spans,
}

/// A call's id and name, as its first chunk gives them (see [`TextDelta::start`]).
#[derive(Debug, PartialEq)]
pub struct CallStart {
    pub id: Option<String>,
    pub name: Option<String>,
}

/// Byte ranges in a chunk (see [`TextDelta::spans`]).
#[derive(Debug, PartialEq, Default, Clone, Copy)]
pub struct Spans {
    pub value: Option<(usize, usize)>,
    pub pad: Option<(usize, usize)>,
    /// The fragment's call index.
    pub index: Option<(usize, usize)>,
}

/// The chunk's id: every chunk repeats it, so it is copied only when it changes.
fn note_id(state: &mut StreamState, id: &str) {
    if !id.is_empty() && !state.id.as_deref().is_some_and(|have| same_long_bytes(have.as_bytes(), id.as_bytes())) {
        state.id = Some(id.to_owned());
    }
}

/// The shape of the last chunk [`chat_text_delta`] read ([`Shape`]): its one string that changes
/// (the text or the arguments fragment), a fragment's call index (calls streamed side by side
/// alternate) and its `obfuscation` padding are the holes; the id, the model, the fingerprint and
/// the nulls are fixed bytes. What a chunk of this shape means besides its string: whether it is a
/// fragment of a call's arguments, and the chunk's id.
#[derive(Debug, Default)]
pub struct ChunkShape {
    shape: Shape,
    /// The changing string is a fragment of the arguments of the call its integer hole names.
    fragment: bool,
    /// The chunk's id.
    id: Option<String>,
}

impl ChunkShape {
    /// The changing string of `data` and the call it is a fragment of, when `data` has this
    /// shape.
    fn read(&mut self, data: &str) -> Option<(String, Option<u64>)> {
        let f = self.shape.read(data)?;
        self.filled(f)
    }

    /// What a chunk of this shape says, from its holes.
    fn filled(&self, f: Filled) -> Option<(String, Option<u64>)> {
        let index = if self.fragment { Some(f.uints[0]?) } else { None };
        Some((f.text?, index))
    }

    /// Learns the shape of a chunk [`chat_text_delta`] read as `d`.
    fn learn(&mut self, data: &str, d: &TextDelta) {
        let Some((a, z)) = d.spans.value else { return self.shape.unlearn() };
        // The holes in the chunk's order (each put in its place as it comes: at most three).
        let mut holes = [(a, z, Hole::Text); 3];
        let mut n = 1;
        // (An index span is read only with a fragment: `chat_text_delta` gives none otherwise.)
        let index = d.spans.index.map(|(p, q)| (p, q, Hole::Uint));
        for (p, q, hole) in [d.spans.pad.map(|(p, q)| (p, q, Hole::Pad)), index].into_iter().flatten() {
            let mut k = n;
            while k > 0 && holes[k - 1].0 > p {
                holes[k] = holes[k - 1];
                k -= 1;
            }
            holes[k] = (p, q, hole);
            n += 1;
        }
        self.shape.learn(data, &holes[..n]);
        self.fragment = d.fragment.is_some();
        self.id = d.id.map(str::to_owned);
    }
}

/// The Chat Completions chunk as a plain text delta, a call's fragment or a call's first chunk, or
/// `None` for the general path.
pub fn chat_text_delta(data: &str) -> Option<TextDelta<'_>> {
    let mut s = Scan { s: data, b: data.as_bytes(), i: 0 };
    let mut id = None;
    let mut seen_id = false;
    let mut content = None;
    let mut fragment = None;
    let mut start = None;
    let mut seen_choices = false;
    let mut seen_usage = false;
    let mut spans = Spans::default();
    let (mut content_span, mut fragment_span) = (None, None);
    s.object(|s, key| match () {
        _ if key.is("id") => {
            if std::mem::replace(&mut seen_id, true) {
                return None;
            }
            if s.peek()? == b'n' {
                return s.literal(b"null");
            }
            id = Some(s.plain_str()?);
            Some(())
        }
        _ if key.is("choices") => {
            if std::mem::replace(&mut seen_choices, true) {
                return None;
            }
            s.eat(b'[')?;
            let (mut seen_index, mut seen_delta, mut seen_finish, mut seen_logprobs) = (false, false, false, false);
            s.object(|s, key| match () {
                // Only the first choice is assembled (`n > 1` streams the others beside it): a
                // chunk of another choice takes the general path, which skips it.
                _ if key.is("index") && !std::mem::replace(&mut seen_index, true) => s.literal(b"0"),
                _ if key.is("logprobs") && !std::mem::replace(&mut seen_logprobs, true) => s.literal(b"null"),
                _ if key.is("finish_reason") && !std::mem::replace(&mut seen_finish, true) => s.literal(b"null"),
                _ if key.is("delta") && !std::mem::replace(&mut seen_delta, true) => {
                    let (mut seen_content, mut seen_role, mut seen_refusal, mut seen_calls) =
                        (false, false, false, false);
                    s.object(|s, key| match () {
                        // One fragment of one call's arguments (the frequent tool-call chunk), or
                        // a call's start: its id, its type and its name beside them.
                        _ if key.is("tool_calls") && !std::mem::replace(&mut seen_calls, true) => {
                            s.eat(b'[')?;
                            let (mut index, mut arguments, mut call_id, mut name) = (None, None, None, None);
                            let (mut seen_type, mut seen_function) = (false, false);
                            s.object(|s, key| match () {
                                _ if key.is("index") && index.is_none() => {
                                    s.ws();
                                    let at = s.i;
                                    index = Some(s.uint_value()?);
                                    spans.index = Some((at, s.i));
                                    Some(())
                                }
                                _ if key.is("id") && call_id.is_none() => {
                                    call_id = Some(s.content()?);
                                    Some(())
                                }
                                // The general path does not read it.
                                _ if key.is("type") && !std::mem::replace(&mut seen_type, true) => {
                                    s.plain_str().map(|_| ())
                                }
                                _ if key.is("function") && !std::mem::replace(&mut seen_function, true) => {
                                    s.object(|s, key| match () {
                                        _ if key.is("name") && name.is_none() => {
                                            name = Some(s.content()?);
                                            Some(())
                                        }
                                        _ if key.is("arguments") && arguments.is_none() => {
                                            s.ws();
                                            let at = s.i;
                                            arguments = Some(s.content()?);
                                            fragment_span = Some((at, s.i));
                                            Some(())
                                        }
                                        _ => None,
                                    })?;
                                    arguments.is_some().then_some(())
                                }
                                _ => None,
                            })?;
                            fragment = Some((index?, arguments?));
                            start = match (call_id, name) {
                                (None, None) => None,
                                (id, name) => Some(CallStart { id, name }),
                            };
                            s.eat(b']')
                        }
                        _ if key.is("content") && !std::mem::replace(&mut seen_content, true) => {
                            if s.peek()? == b'n' {
                                return s.literal(b"null");
                            }
                            let at = s.i;
                            content = Some(s.content()?);
                            content_span = Some((at, s.i));
                            Some(())
                        }
                        _ if key.is("role") && !std::mem::replace(&mut seen_role, true) => s.plain_str().map(|_| ()),
                        _ if key.is("refusal") && !std::mem::replace(&mut seen_refusal, true) => s.literal(b"null"),
                        _ => None,
                    })
                }
                _ => None,
            })?;
            s.eat(b']')
        }
        _ if key.is("usage") => {
            if std::mem::replace(&mut seen_usage, true) {
                return None;
            }
            s.literal(b"null")
        }
        // Fields the general path reads: never skipped here.
        _ if key.is_any(&["error", "citations", "search_results", "x_groq"]) => None,
        // A string that changes with every chunk (OpenAI pads chunks to hide their length).
        _ if key.is("obfuscation") && spans.pad.is_none() && s.peek()? == b'"' => {
            let at = s.i;
            s.skip()?;
            spans.pad = Some((at, s.i));
            Some(())
        }
        _ => s.skip(),
    })?;
    s.ws();
    if s.i != s.b.len() || !seen_choices {
        return None;
    }
    spans.value = match (content_span, fragment_span) {
        (Some(v), None) | (None, Some(v)) => Some(v),
        _ => None,
    };
    Some(TextDelta { id, content, fragment, start, spans })
}

#[cfg(test)]
mod fast_tests {
    use super::*;

    #[test]
    fn the_common_chunk_is_read() {
        let c = r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1764000000,"model":"gpt-4.1","system_fingerprint":"fp_1","service_tier":"default","choices":[{"index":0,"delta":{"content":" the fox"},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"a1b2"}"#;
        let d = chat_text_delta(c).unwrap();
        assert_eq!((d.id, d.content.as_deref(), d.fragment), (Some("chatcmpl-1"), Some(" the fox"), None));
        let (value, pad) = (d.spans.value.unwrap(), d.spans.pad.unwrap());
        assert_eq!((&c[value.0..value.1], &c[pad.0..pad.1]), (r#"" the fox""#, r#""a1b2""#));
        let c = r#"{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":3,"function":{"arguments":"{\"a\":"}}]},"finish_reason":null}]}"#;
        assert_eq!(chat_text_delta(c).unwrap().fragment, Some((3, "{\"a\":".into())));
        // A call's first chunk: its id (escapes decoded, as the general path decodes them), type
        // and name, in any order.
        let c = r#"{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"type":"function","function":{"arguments":"","name":"f\u00e9"},"id":"call_\"1","index":2}]},"finish_reason":null}]}"#;
        let d = chat_text_delta(c).unwrap();
        let start = CallStart { id: Some("call_\"1".into()), name: Some("fé".into()) };
        assert_eq!((d.fragment, d.start), (Some((2, String::new())), Some(start)));
        let c = r#"{ "choices" : [ { "delta" : { "role":"assistant", "content" : "a\n\"b\"\u00e9" } } ] }"#;
        assert_eq!(chat_text_delta(c).unwrap().content.as_deref(), Some("a\n\"b\"é"));
    }

    /// A chunk shaped like OpenAI's, with this content and padding.
    fn openai(content: &str, pad: &str) -> String {
        format!(
            r#"{{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1764000000,"model":"gpt-4.1","system_fingerprint":"fp_1","service_tier":"default","choices":[{{"index":0,"delta":{{"content":"{content}"}},"logprobs":null,"finish_reason":null}}],"usage":null,"obfuscation":"{pad}"}}"#
        )
    }

    fn learned(data: &str) -> ChunkShape {
        let mut shape = ChunkShape::default();
        shape.learn(data, &chat_text_delta(data).unwrap());
        shape
    }

    #[test]
    fn a_chunk_of_the_last_ones_shape_is_read_by_comparing_bytes() {
        let mut shape = learned(&openai(" the", "a1b2"));
        assert!(shape.shape.known() && !shape.fragment);
        assert_eq!(shape.id.as_deref(), Some("chatcmpl-1"));
        // Another text and another padding, of other lengths, escapes decoded.
        assert_eq!(shape.read(&openai(r#" quick \"brown\"\u00e9"#, "")), Some((" quick \"brown\"é".into(), None)));
        assert_eq!(shape.read(&openai("", "x9y8z7w6")), Some(("".into(), None)));
        // Not this shape: a byte of the metadata differs, a member is added, the padding is not
        // a string the scan takes, the text is not one.
        for other in [
            openai(" fox", "a1").replace("fp_1", "fp_2"),
            openai(" fox", "a1").replace(r#""usage":null"#, r#""usage":null,"usage":null"#),
            openai(" fox", "a1").replace(r#""content":" fox""#, r#""content":" fox","content":"x""#),
            openai(" fox", r"\u0041"),
            openai(r"\x", "a1"),
            openai(" fox", "a1") + " ",
        ] {
            assert_eq!(shape.read(&other), None, "{other}");
        }
        // A fragment of a call's arguments has its own shape, the call's index a hole (calls
        // streamed side by side alternate).
        let call = |index: &str, args: &str| {
            format!(
                r#"{{"id":"c","choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":{index},"function":{{"arguments":"{args}"}}}}]}}}}]}}"#
            )
        };
        let mut shape = learned(&call("3", r#"{\"a\":"#));
        assert_eq!((shape.shape.known(), shape.fragment), (true, true));
        assert_eq!(shape.read(&call("3", "1}")), Some(("1}".into(), Some(3))));
        assert_eq!(shape.read(&call("12", "x")), Some(("x".into(), Some(12))));
        for other in [call("-1", "x"), call("1.5", "x"), call("\"1\"", "x"), call("null", "x"), openai("x", "y")] {
            assert_eq!(shape.read(&other), None, "{other}");
        }
    }

    #[test]
    fn a_shape_is_learned_from_one_changing_string_only() {
        // Content and a fragment in one chunk; no content.
        for data in [
            r#"{"choices":[{"delta":{"content":"a","tool_calls":[{"index":0,"function":{"arguments":"x"}}]}}]}"#,
            r#"{"choices":[{"delta":{"content":null}}]}"#,
        ] {
            assert!(!learned(data).shape.known(), "{data}");
        }
        // The holes in the chunk's order, whatever it is: padding before the content, the index
        // after the fragment.
        let mut shape = learned(r#"{"obfuscation":"ab","choices":[{"delta":{"content":"a"}}]}"#);
        assert_eq!(
            shape.read(r#"{"obfuscation":"abcd","choices":[{"delta":{"content":"xy"}}]}"#),
            Some(("xy".into(), None))
        );
        let mut shape = learned(r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"a"},"index":1}]}}]}"#);
        let other = r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"bc"},"index":20}]}}]}"#;
        assert_eq!(shape.read(other), Some(("bc".into(), Some(20))));
        // A stream whose chunks keep differing elsewhere stops learning after eight misses.
        let mut shape = ChunkShape::default();
        for i in 0..20 {
            let data = openai("x", "p").replace("1764000000", &format!("{}", 1764000000 + i));
            assert_eq!(shape.read(&data), None);
            shape.learn(&data, &chat_text_delta(&data).unwrap());
            assert_eq!(shape.shape.known(), i < 8, "chunk {i}");
        }
    }

    #[test]
    fn anything_else_takes_the_general_path() {
        for c in [
            r#"{"choices":[{"delta":{"content":"x"},"finish_reason":"stop"}]}"#,
            r#"{"choices":[{"delta":{"reasoning_content":"x"}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[]}}]}"#,
            // A call's first chunk with an id, a type or a name that is not a string, without
            // its arguments, or with a member twice.
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":null,"function":{"arguments":"x"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","type":1,"function":{"arguments":"x"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":null,"arguments":"x"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","id":"b","function":{"arguments":"x"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"f","name":"g","arguments":"x"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"f"},"function":{"arguments":"x"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","extra":1,"function":{"arguments":"x"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"x"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"x"}},{"index":1,"function":{"arguments":"y"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":null}}]}}]}"#,
            r#"{"choices":[]}"#,
            r#"{"choices":[{"delta":{}},{"delta":{}}]}"#,
            r#"{"choices":[{"delta":{"content":"x"}}],"usage":{"prompt_tokens":1}}"#,
            r#"{"error":{"message":"x"},"choices":[{"delta":{}}]}"#,
            r#"{"choices":[{"delta":{"content":"x","content":"y"}}]}"#,
            r#"{"choices":[{"delta":{"content":"x"}}]} trailing"#,
            r#"{"choices":[{"delta":{"content":"x"}}],"n":01}"#,
            r#"{"choices":[{"delta":{"content":"x"}}],"n":nullx}"#,
            "{\"choices\":[{\"delta\":{\"content\":\"a\u{1}\"}}]}",
            r#"{"model":"a\"b","choices":[{"delta":{"content":"x"}}]}"#,
            r#"{"id":"a","choices":[{"delta":{"content":"x"}}],"id":"b"}"#,
            r#"{"choices":[{"delta":{"content":"x"}}],"big":12345678901234567890}"#,
            "[1]",
            "",
        ] {
            assert_eq!(chat_text_delta(c), None, "{c}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::message::Role;
    use crate::engine::sse::SseDecoder;

    fn run(stream: &str) -> (Vec<StreamEvent>, Result<(), ChatProviderError>, OpenAIChatDecoder) {
        let mut sse = SseDecoder::new();
        let mut events = Vec::new();
        sse.feed(stream.as_bytes(), &mut events).unwrap();
        sse.finish(&mut events).unwrap();
        let mut dec = OpenAIChatConfig::for_model("m").decoder();
        let mut out = Vec::new();
        for e in &events {
            if let Err(err) = dec.on_event(e, &mut out) {
                return (out, Err(err), dec);
            }
        }
        let r = dec.finish(&mut out);
        (out, r, dec)
    }

    fn data(v: Value) -> String {
        format!("data: {v}\n\n")
    }

    fn tc(index: u64, id: Option<&str>, name: Option<&str>, args: &str) -> String {
        let mut f = json!({"arguments": args});
        if let Some(n) = name {
            f["name"] = json!(n);
        }
        let mut d = json!({"index": index, "function": f});
        if let Some(id) = id {
            d["id"] = json!(id);
            d["type"] = json!("function");
        }
        data(json!({"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {"tool_calls": [d]}}]}))
    }

    fn completions(out: &[StreamEvent]) -> Vec<(usize, String)> {
        out.iter()
            .enumerate()
            .filter_map(|(i, e)| match e {
                StreamEvent::ToolCallComplete(id, _) => Some((i, id.clone())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn interleaved_parallel_calls_complete_structurally() {
        let mut s = String::new();
        s += &data(
            json!({"id":"chatcmpl-1","choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"let me think"}}]}),
        );
        s += &data(json!({"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"Checking."}}]}));
        s += &tc(0, Some("call_a"), Some("weather"), "");
        s += &tc(0, None, None, "{\"city\":");
        s += &tc(1, Some("call_b"), Some("time"), "{\"tz\":"); // a later index begins; a is unparsable
        s += &tc(0, None, None, "\"Paris\"}"); // a's last fragment arrives after b began
        s += &tc(1, None, None, "\"UTC\"}");
        s += &tc(2, Some("call_c"), Some("noop"), "{}");
        s += &data(json!({"id":"chatcmpl-1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}));
        s += &data(
            json!({"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":100,"completion_tokens":20,"prompt_tokens_details":{"cached_tokens":60}}}),
        );
        s += "data: [DONE]\n\n";
        let (out, r, dec) = run(&s);
        r.unwrap();
        assert_eq!(
            dec.usage(),
            Some(TokenUsage { input_other: 40, output: 20, input_cache_read: 60, input_cache_creation: 0 })
        );
        assert_eq!(dec.finish_reason(), Some("tool_calls"));
        assert_eq!(dec.id(), Some("chatcmpl-1"));
        assert!(
            matches!(&out[0], StreamEvent::Part(StreamedMessagePart::Content(ContentPart::Think { think, .. })) if think == "let me think")
        );
        let done = completions(&out);
        let ids: Vec<&str> = done.iter().map(|(_, id)| id.as_str()).collect();
        assert_eq!(ids, ["call_a", "call_b", "call_c"]);
        // call_a completes right after its closing fragment, call_b when call_c begins,
        // call_c only at finish_reason: each before the stream's end.
        let pos = |pred: &dyn Fn(&StreamEvent) -> bool| out.iter().position(pred).unwrap();
        let a_close = pos(
            &|e| matches!(e, StreamEvent::Part(StreamedMessagePart::ToolCallPart(p)) if p.arguments_part.as_deref() == Some("\"Paris\"}")),
        );
        assert_eq!(done[0].0, a_close + 1);
        let c_start = pos(&|e| matches!(e, StreamEvent::Part(StreamedMessagePart::ToolCall(c)) if c.id == "call_c"));
        assert_eq!(done[1].0, c_start + 1);
        assert_eq!(done[2].0, out.len() - 1);
    }

    #[test]
    fn empty_arguments_stay_empty_as_in_kosong() {
        let mut s = tc(0, Some("call_a"), Some("now"), "");
        s += &data(json!({"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}));
        s += "data: [DONE]\n\n";
        let (out, r, _) = run(&s);
        r.unwrap();
        assert!(
            matches!(&out[0], StreamEvent::Part(StreamedMessagePart::ToolCall(c)) if c.function.arguments.as_deref() == Some(""))
        );
    }

    #[test]
    fn parsing_alone_never_completes_a_call() {
        let s = tc(0, Some("call_a"), Some("f"), "{\"x\":1}");
        let (out, r, _) = run(&s);
        assert!(r.is_err(), "no finish_reason, no [DONE]: truncated");
        assert!(completions(&out).is_empty());
    }

    /// kosong hands a call on when a part that does not merge into it arrives: text after the
    /// calls ends them (each once its arguments parse; one still open waits).
    #[test]
    fn content_after_calls_completes_those_whose_arguments_parse() {
        let mut s = tc(0, Some("call_a"), Some("f"), "{\"x\":1}");
        s += &tc(1, Some("call_b"), Some("g"), "{\"y\":");
        s += &data(json!({"choices":[{"index":0,"delta":{"content":"While those run"}}]}));
        let ids = |out: &[StreamEvent]| completions(out).into_iter().map(|(_, id)| id).collect::<Vec<_>>();
        let (out, _, _) = run(&s);
        assert_eq!(ids(&out), ["call_a"]);
        let text_at = out.iter().position(|e| matches!(e, StreamEvent::Part(StreamedMessagePart::Content(_)))).unwrap();
        assert!(completions(&out)[0].0 < text_at, "completed before the text is handed on");
        let mut s2 = s.clone();
        s2 += &tc(1, None, None, "2}");
        let (out, _, _) = run(&s2);
        assert_eq!(ids(&out), ["call_a", "call_b"], "the open one completes when its last fragment comes");
    }

    #[test]
    fn truncated_stream_is_an_error_and_done_alone_is_enough() {
        let s = data(json!({"choices":[{"index":0,"delta":{"content":"Hel"}}]}));
        let (_, r, _) = run(&s);
        assert!(
            matches!(r, Err(ChatProviderError::Failed { kind: FailureKind::Truncated, message: m }) if m.contains("ended before"))
        );
        let s = s + "data: [DONE]\n\n";
        assert!(run(&s).1.is_ok());
    }

    #[test]
    fn error_chunk_and_malformed_chunk() {
        let s = data(json!({"error":{"message":"overloaded","type":"server_error"}}));
        assert!(
            matches!(run(&s).1, Err(ChatProviderError::Status { status: 500, message, .. }) if message.contains("overloaded"))
        );
        let s = data(json!({"error":{"message":"something odd"}}));
        assert!(
            matches!(run(&s).1, Err(ChatProviderError::Failed { kind: FailureKind::Server, message: m }) if m.contains("something odd"))
        );
        let s = data(json!({"error":{"message":"Rate limit exceeded","code":429}}));
        assert!(
            matches!(run(&s).1, Err(ChatProviderError::Status { status: 429, message, .. }) if message.contains("Rate limit"))
        );
        assert!(
            matches!(run("data: {nope\n\n").1, Err(ChatProviderError::Failed { kind: FailureKind::Malformed, message: m }) if m.contains("malformed"))
        );
    }

    #[test]
    fn request_body_shape() {
        let cfg = OpenAIChatConfig {
            http: HttpOptions {
                model: "gpt-x".into(),
                api_key: Some("sk-test".into()),
                base_url: Some("http://127.0.0.1:9/v1/".into()),
                max_tokens: Some(100),
                ..Default::default()
            },
            reasoning_key: Some("reasoning_content".into()),
            ..Default::default()
        };
        let mut assistant = Message::new(Role::Assistant, vec![ContentPart::think("hmm"), ContentPart::text("ok")]);
        assistant.tool_calls = Some(vec![ToolCall::new("c1", "f", None)]);
        let mut tool = Message::new(Role::Tool, vec![ContentPart::text("42")]);
        tool.tool_call_id = Some("c1".into());
        let history = vec![Message::new(Role::User, vec![ContentPart::text("hi")]), assistant, tool];
        let tools = vec![super::super::ToolDefinition {
            name: "f".into(),
            description: "d".into(),
            parameters: json!({"type":"object"}),
        }];
        let req = cfg.build_request(&super::Prompt::new("be brief", &tools, &history)).unwrap();
        assert_eq!(req.url, "http://127.0.0.1:9/v1/chat/completions");
        assert!(req.headers.contains(&("authorization".into(), "Bearer sk-test".into())));
        let body: Value = serde_json::from_str(&req.body).unwrap();
        assert_eq!(body["messages"][0], json!({"role":"system","content":"be brief"}));
        assert_eq!(
            body["messages"][2],
            json!({"role":"assistant","content":"ok","reasoning_content":"hmm",
            "tool_calls":[{"type":"function","id":"c1","function":{"name":"f","arguments":"{}"}}]})
        );
        assert_eq!(body["messages"][3], json!({"role":"tool","content":"42","tool_call_id":"c1"}));
        assert_eq!(body["tools"][0]["function"]["name"], "f");
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
        assert_eq!(body["max_tokens"], 100);
    }
}
