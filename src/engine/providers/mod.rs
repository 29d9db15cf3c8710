//! Wire formats, one file each: the request body going out, the stream events coming in,
//! and the errors. Each decoder turns Server-Sent Events into [`StreamEvent`]s and says,
//! structurally, when a tool call is complete.

// Each wire format is a cargo feature (all on by default), so a build for one provider can
// leave the others out (`cargo build --no-default-features --features anthropic`).
#[cfg(feature = "anthropic")]
pub mod anthropic;
pub mod echo;
#[cfg(feature = "gemini")]
pub mod gemini;
#[cfg(feature = "openai")]
pub mod kimi;
#[cfg(feature = "openai")]
pub mod openai_chat;
#[cfg(feature = "responses")]
pub mod openai_responses;

use std::collections::HashSet;

use serde_json::Value;

pub(crate) use crate::engine::json::fields::{Fields, Spec};

use crate::engine::error::{ChatProviderError, FailureKind};
use crate::engine::message::{Message, StreamedMessagePart, TokenUsage};
use crate::engine::output::OutputFormat;
use crate::engine::sse::{RawEvent, SseEvent};

/// What a provider's stream yields, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum StreamEvent {
    Part(StreamedMessagePart),
    /// The stream shows the tool call with this id complete: it may be dispatched now. With the
    /// length of its arguments when the decoder found them, as they stand, to parse as JSON (it
    /// parsed them to decide the call was complete): they are not checked a second time.
    ToolCallComplete(String, Option<usize>),
    /// What follows is a part of its own, not merged into the one before (a second output
    /// message of a Responses answer).
    Boundary,
    /// The stream broke and the same answer is read again after this sequence number.
    Reconnected(u64),
}

/// What every decoder keeps of an answer besides its parts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StreamState {
    pub id: Option<String>,
    pub usage: Option<TokenUsage>,
    pub finish_reason: Option<String>,
}

/// The error for a stream that ended before the model said it was done; `missing` names what
/// the format would have sent (`no message_stop`).
pub fn truncated(missing: &str) -> ChatProviderError {
    ChatProviderError::failed(
        FailureKind::Truncated,
        format!("the stream ended before the model finished its answer ({missing})"),
    )
}

/// Decodes one provider's event stream.
pub trait StreamDecoder {
    fn on_event(&mut self, event: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<(), ChatProviderError>;
    /// An event's `data:` line as the stream sent it (not yet checked as UTF-8, surrogate
    /// escapes not yet joined, its end not yet found): taken when the decoder reads it by the
    /// shape it learned and it is the event's only line — as [`StreamDecoder::on_event`] would
    /// have read it, without the line search, the copy, and the whole event's UTF-8 check and
    /// escape search. Gives how many bytes it took; `None` and untouched otherwise, and the event
    /// comes to `on_event` as every event does.
    fn on_raw_data(&mut self, _ev: &RawEvent, _out: &mut Vec<StreamEvent>) -> Option<usize> {
        None
    }
    /// Whether [`StreamDecoder::on_raw_data`] may take events (a source offers none otherwise).
    fn reads_raw(&self) -> bool {
        false
    }
    /// The byte stream ended. An answer that never said it was finished is an error.
    fn finish(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), ChatProviderError>;
    fn state(&self) -> &StreamState;
    fn id(&self) -> Option<&str> {
        self.state().id.as_deref()
    }
    fn usage(&self) -> Option<TokenUsage> {
        self.state().usage
    }
    fn finish_reason(&self) -> Option<&str> {
        self.state().finish_reason.as_deref()
    }
    /// Where the answer can be read again from, when its stream breaks: the answer's id and the
    /// last sequence number read (a Responses answer in the background); `None` for the rest.
    fn resume_point(&self) -> Option<(&str, u64)> {
        None
    }
    /// The decoder reads answer `id` again from its start (its first event may not be sent).
    fn read_again(&mut self, _id: &str) {}
    /// Nobody hears each part (a step with no part hook and no wire): the decoder may join a
    /// call's fragment, or a text or thinking delta, to the part right before it in the batch
    /// when the message would join the two ([`push_fragment`], [`push_content`]) — a part not
    /// made is an event, an id copy and an assembling step saved. A decoder that never joins
    /// ignores it.
    fn join_parts(&mut self, _join: bool) {}
}

impl StreamDecoder for Box<dyn StreamDecoder> {
    fn on_event(&mut self, event: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<(), ChatProviderError> {
        (**self).on_event(event, out)
    }
    fn on_raw_data(&mut self, ev: &RawEvent, out: &mut Vec<StreamEvent>) -> Option<usize> {
        (**self).on_raw_data(ev, out)
    }
    fn reads_raw(&self) -> bool {
        (**self).reads_raw()
    }
    fn finish(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), ChatProviderError> {
        (**self).finish(out)
    }
    fn state(&self) -> &StreamState {
        (**self).state()
    }
    fn id(&self) -> Option<&str> {
        (**self).id()
    }
    fn usage(&self) -> Option<TokenUsage> {
        (**self).usage()
    }
    fn finish_reason(&self) -> Option<&str> {
        (**self).finish_reason()
    }
    fn resume_point(&self) -> Option<(&str, u64)> {
        (**self).resume_point()
    }
    fn read_again(&mut self, id: &str) {
        (**self).read_again(id)
    }
    fn join_parts(&mut self, join: bool) {
        (**self).join_parts(join)
    }
}

/// Hands on a fragment `piece` of call `id`'s arguments: with `join`
/// ([`StreamDecoder::join_parts`]), appended to the part before it when that is a fragment of the
/// same call.
#[cfg(any(feature = "anthropic", feature = "openai", feature = "responses"))]
pub(crate) fn push_fragment(out: &mut Vec<StreamEvent>, join: bool, id: &str, piece: String) {
    use crate::engine::message::ToolCallPart;
    if join {
        if let Some(StreamEvent::Part(StreamedMessagePart::ToolCallPart(ToolCallPart {
            arguments_part: Some(a),
            tool_call_id: Some(last),
        }))) = out.last_mut()
        {
            if last == id {
                a.push_str(&piece);
                return;
            }
        }
    }
    out.push(StreamEvent::Part(StreamedMessagePart::ToolCallPart(ToolCallPart {
        arguments_part: Some(piece),
        tool_call_id: Some(id.to_owned()),
    })));
}

/// Hands on content `part`: with `join` ([`StreamDecoder::join_parts`]), merged into the content
/// part right before it when the message's rule merges them (`ContentPart::merge_in_place`: text
/// into text, thinking into thinking not yet signed) — what the message would do with the two, in
/// the same order.
#[cfg(any(feature = "anthropic", feature = "openai", feature = "responses"))]
pub(crate) fn push_content(out: &mut Vec<StreamEvent>, join: bool, part: crate::engine::message::ContentPart) {
    if join {
        if let Some(StreamEvent::Part(StreamedMessagePart::Content(last))) = out.last_mut() {
            if last.merge_in_place(&part) {
                return;
            }
        }
    }
    out.push(StreamEvent::Part(StreamedMessagePart::Content(part)));
}

/// The error a refusal ends a stream with: the model's own words when it gave some.
pub fn refusal(text: &str) -> ChatProviderError {
    let text = text.trim();
    let message = if text.is_empty() {
        "The model refused to answer.".to_owned()
    } else {
        format!("The model refused to answer: {text}")
    };
    ChatProviderError::failed(crate::engine::error::FailureKind::Refused, message)
}

/// The base URL to send to: a configured one that is only a host (`https://api.anthropic.com`,
/// as kosong and the official SDKs take it) gets the API's version segment; one with a path is
/// taken as it is.
#[cfg(any(feature = "anthropic", feature = "gemini"))]
pub(crate) fn versioned_base(configured: Option<&str>, default: &str, version: &str) -> String {
    let Some(base) = configured else { return default.to_owned() };
    let base = base.trim_end_matches('/');
    let after_scheme = base.find("://").map_or(0, |i| i + 3);
    if base[after_scheme..].contains('/') {
        base.to_owned()
    } else {
        format!("{base}/{version}")
    }
}

/// Reads a stream event's `type` before its payload: `Ok(None)` for a type not in `known`,
/// skipped whatever its shape (servers add event types with payloads of their own); for a
/// known type what `read` makes of its fields, or an error that names the type when their
/// shape is not the one documented.
#[cfg(any(feature = "anthropic", feature = "responses"))]
pub(crate) fn typed_event<T>(
    data: &str,
    known: &[&str],
    read: impl FnOnce(Fields<'_>) -> Result<T, String>,
) -> Result<Option<T>, ChatProviderError> {
    let malformed = |what: String| ChatProviderError::failed(crate::engine::error::FailureKind::Malformed, what);
    let unreadable = |e: String| malformed(format!("malformed stream event from the server: {e}"));
    let v: Value = serde_json::from_str(data).map_err(|e| unreadable(e.to_string()))?;
    let fields = Fields::of(&v, "a stream event").map_err(unreadable)?;
    let kind = fields.str("type").map_err(unreadable)?.unwrap_or("");
    if !known.contains(&kind) {
        return Ok(None);
    }
    read(fields).map(Some).map_err(|e| malformed(format!("malformed `{kind}` event from the server: {e}")))
}

/// The thinking efforts a provider takes (each wire format maps them to its own).
pub const THINKING_EFFORTS: [&str; 6] = ["off", "low", "medium", "high", "xhigh", "max"];

/// What every HTTP provider's constructor takes (camelCase in JS).
#[derive(Clone, Debug, Default)]
pub struct HttpOptions {
    pub model: String,
    pub api_key: Option<String>,
    pub base_url: Option<String>,
    pub headers: serde_json::Map<String, serde_json::Value>,
    /// The answer's token limit.
    pub max_tokens: Option<u64>,
    pub temperature: Option<f64>,
    /// `off`, `low`, `medium`, `high`, `xhigh`, `max` (the constructor's `thinking`, or
    /// `withThinking`).
    pub thinking_effort: Option<String>,
    /// Merged into the request body, key by key.
    pub extra_body: Option<serde_json::Map<String, serde_json::Value>>,
    /// From sending until the answer's first chunk, in ms (`firstChunkTimeoutMs`).
    pub first_chunk_timeout_ms: Option<f64>,
    /// From sending until the stream's end, in ms (`stepTimeoutMs`).
    pub step_timeout_ms: Option<f64>,
}

impl HttpOptions {
    fn from_spec(spec: &Spec) -> Result<HttpOptions, serde_json::Error> {
        Ok(HttpOptions {
            model: spec.string("model")?.ok_or_else(|| serde::de::Error::missing_field("model"))?,
            api_key: spec.string("apiKey")?,
            base_url: match spec.string("baseUrl")? {
                Some(u) => match base_url_problem(&u) {
                    Some(problem) => return Err(serde::de::Error::custom(problem)),
                    None => Some(u),
                },
                None => None,
            },
            headers: spec.object("headers")?.unwrap_or_default(),
            max_tokens: spec.get("maxTokens", "a positive integer", |v| v.as_u64().filter(|n| *n > 0))?,
            temperature: spec.get("temperature", "a number", Value::as_f64)?,
            thinking_effort: match spec.string("thinkingEffort")? {
                Some(e) if !THINKING_EFFORTS.contains(&e.as_str()) => {
                    return Err(serde::de::Error::custom(format!(
                        "thinking effort must be one of {}; got {e}",
                        THINKING_EFFORTS.join(", ")
                    )))
                }
                e => e,
            },
            extra_body: spec.object("extraBody")?,
            first_chunk_timeout_ms: spec.get(
                "firstChunkTimeoutMs",
                "a positive number of milliseconds",
                positive_ms,
            )?,
            step_timeout_ms: spec.get("stepTimeoutMs", "a positive number of milliseconds", positive_ms)?,
        })
    }
}

fn positive_ms(v: &Value) -> Option<f64> {
    v.as_f64().filter(|ms| ms.is_finite() && *ms > 0.0)
}

impl Spec {
    /// The options every HTTP provider takes.
    pub(crate) fn http(&self) -> Result<HttpOptions, serde_json::Error> {
        HttpOptions::from_spec(self)
    }
}

/// What one model call is asked: the system prompt, the tools, the history and, when the caller
/// wants a document of a given shape, structured output.
#[derive(Clone, Copy, Debug)]
pub struct Prompt<'a> {
    pub system: &'a str,
    pub tools: &'a [ToolDefinition],
    pub history: &'a [Message],
    pub output: Option<&'a OutputFormat>,
}

impl<'a> Prompt<'a> {
    pub fn new(system: &'a str, tools: &'a [ToolDefinition], history: &'a [Message]) -> Prompt<'a> {
        Prompt { system, tools, history, output: None }
    }

    /// The same prompt asking for structured output (`None`: free text).
    pub fn with_output(self, output: Option<&'a OutputFormat>) -> Prompt<'a> {
        Prompt { output, ..self }
    }
}

/// One wire format: the request a provider of that format sends for a prompt, and the decoder
/// its answer's stream is read with. Each provider is one type implementing it (one file each);
/// the build's cargo features choose which exist ([`FORMATS`]).
pub trait WireFormat: WireClone {
    /// The JavaScript class of this provider, and the environment variables its official SDK
    /// reads the key from.
    fn identity(&self) -> (&'static str, &'static [&'static str]);
    /// The options every HTTP provider takes.
    fn http(&self) -> &HttpOptions;
    fn http_mut(&mut self) -> &mut HttpOptions;
    /// Where requests go when no `baseUrl` is given.
    fn default_base_url(&self) -> &'static str;
    /// The request for this prompt; `prompt.output` asks for structured output in the format's
    /// native form.
    fn build_request(&self, prompt: &Prompt<'_>) -> Result<HttpRequest, ChatProviderError>;
    /// A decoder for one answer's stream.
    fn decoder(&self) -> Box<dyn StreamDecoder>;
    /// The server keeps the answers it is asked for: one can be read again by its id.
    fn keeps_answers(&self) -> bool {
        false
    }
}

/// What every format's [`WireFormat`] impl says alike: its `http` field as [`WireFormat::http`]
/// and [`WireFormat::http_mut`] (every format keeps the common options there), and `$base` as
/// [`WireFormat::default_base_url`].
macro_rules! http_field {
    ($base:expr) => {
        fn http(&self) -> &super::HttpOptions {
            &self.http
        }
        fn http_mut(&mut self) -> &mut super::HttpOptions {
            &mut self.http
        }
        fn default_base_url(&self) -> &'static str {
            $base
        }
    };
}
pub(crate) use http_field;

/// A wire format's settings copied into a box of their own (a provider given a key from the
/// environment is a copy).
pub trait WireClone {
    fn boxed_clone(&self) -> Box<dyn WireFormat>;
}

impl<T: WireFormat + Clone + 'static> WireClone for T {
    fn boxed_clone(&self) -> Box<dyn WireFormat> {
        Box::new(self.clone())
    }
}

/// How a wire format's options are read from a provider spec.
type Reader = fn(&Spec) -> Result<Box<dyn WireFormat>, serde_json::Error>;

/// `Some(read)` when this build has the cargo feature, else `None`.
macro_rules! built_with {
    ($feature:tt, $read:expr) => {{
        #[cfg(feature = $feature)]
        let read: Option<Reader> = Some($read);
        #[cfg(not(feature = $feature))]
        let read: Option<Reader> = None;
        read
    }};
}

/// Every wire format a provider spec may name: its `kind`, the cargo feature that builds it, and
/// how its options are read (`None`: this build leaves it out).
pub(crate) const FORMATS: [(&str, &str, Option<Reader>); 5] = [
    ("openai", "openai", built_with!("openai", |s| Ok(Box::new(openai_chat::OpenAIChatConfig::from_spec(s)?)))),
    (
        "kimi",
        "openai",
        built_with!("openai", |s| Ok(Box::new(openai_chat::OpenAIChatConfig::from_spec(s)?.into_kimi()))),
    ),
    ("anthropic", "anthropic", built_with!("anthropic", |s| Ok(Box::new(anthropic::AnthropicConfig::from_spec(s)?)))),
    (
        "openai_responses",
        "responses",
        built_with!("responses", |s| Ok(Box::new(openai_responses::ResponsesConfig::from_spec(s)?))),
    ),
    ("gemini", "gemini", built_with!("gemini", |s| Ok(Box::new(gemini::GeminiConfig::from_spec(s)?)))),
];

/// A provider that talks HTTP, as the JS layer describes it (`kind` picks the wire format from
/// [`FORMATS`]; the rest are the constructor's options, camelCase).
pub struct HttpProvider(Box<dyn WireFormat>);

/// The class and the model, never the options (they hold the key): and no formatting code for
/// every wire format's settings in the .wasm.
impl std::fmt::Debug for HttpProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}({})", self.identity().0, self.http().model)
    }
}

impl Clone for HttpProvider {
    fn clone(&self) -> Self {
        HttpProvider(self.0.boxed_clone())
    }
}

impl HttpProvider {
    /// Reads a provider spec: `kind` first, then the options of that kind from the same text
    /// (two small parses, cheaper in the .wasm than a tagged enum or a `Value` round trip).
    pub fn from_json(text: &str) -> Result<HttpProvider, serde_json::Error> {
        HttpProvider::from_spec(&Spec::parse(text)?)
    }

    pub(crate) fn from_spec(spec: &Spec) -> Result<HttpProvider, serde_json::Error> {
        use serde::de::Error;
        let kind = spec.string("kind")?.ok_or_else(|| serde_json::Error::missing_field("kind"))?;
        let Some((_, feature, read)) = FORMATS.iter().find(|(k, _, _)| *k == kind) else {
            let kinds: Vec<String> = FORMATS.iter().map(|(k, _, _)| format!("`{k}`")).collect();
            return Err(serde_json::Error::custom(format!(
                "unknown variant `{kind}`, expected one of {}",
                kinds.join(", ")
            )));
        };
        match read {
            Some(read) => Ok(HttpProvider(read(spec)?)),
            None => Err(serde_json::Error::custom(format!(
                "this build of kosong-wasm leaves out the `{kind}` wire format (cargo feature `{feature}`)"
            ))),
        }
    }

    /// The request for this context, without structured output.
    pub fn build_request(
        &self,
        system_prompt: &str,
        tools: &[ToolDefinition],
        history: &[Message],
    ) -> Result<HttpRequest, ChatProviderError> {
        self.0.build_request(&Prompt::new(system_prompt, tools, history))
    }

    /// The request for this prompt (structured output in the provider's native form when asked).
    pub fn build(&self, prompt: &Prompt<'_>) -> Result<HttpRequest, ChatProviderError> {
        self.0.build_request(prompt)
    }

    pub fn decoder(&self) -> Box<dyn StreamDecoder> {
        self.0.decoder()
    }

    /// See [`WireFormat::keeps_answers`].
    pub fn keeps_answers(&self) -> bool {
        self.0.keeps_answers()
    }

    /// The options every HTTP provider takes.
    pub fn http(&self) -> &HttpOptions {
        self.0.http()
    }

    /// The JavaScript class of this provider, and the environment variables its official SDK
    /// reads the key from.
    pub fn identity(&self) -> (&'static str, &'static [&'static str]) {
        self.0.identity()
    }

    /// `scheme://host[:port]` requests go to (a telemetry span's `server.address`).
    pub fn origin(&self) -> Option<String> {
        origin_of(self.http().base_url.as_deref().unwrap_or(self.0.default_base_url()))
    }

    /// The key for one request, by this package's one rule: the provider's own host needs one —
    /// from the options, else the environment (read now, through `env`), else an error before
    /// anything is sent; a custom `baseUrl` may need none. `Ok(None)`: this provider as it is.
    pub fn key_for_request(&self, env: impl Fn(&str) -> Option<String>) -> Result<Option<HttpProvider>, String> {
        let o = self.http();
        // An empty or blank key (an `.env` line `OPENAI_API_KEY=`) is no key: for the provider's
        // own host it is looked up as a missing one, never sent.
        let blank = o.api_key.as_deref().is_some_and(|k| k.trim().is_empty());
        if (o.api_key.is_some() && !blank) || o.base_url.is_some() {
            return Ok(None);
        }
        let (who, names) = self.identity();
        let found = names.iter().find_map(|n| env(n).filter(|k| !k.trim().is_empty()));
        if blank && found.is_none() {
            return Err(format!(
                "{who}: `apiKey` is empty: pass a key, or set {} (an empty key is never sent)",
                names.join(" or ")
            ));
        }
        match found {
            Some(key) => {
                let mut with_key = self.clone();
                with_key.0.http_mut().api_key = Some(key);
                Ok(Some(with_key))
            }
            None => Err(format!(
                "{who}: no API key: pass `apiKey` or set {} (or a `baseUrl` of a server that needs none)",
                names.join(" or ")
            )),
        }
    }
}

/// Tool-call ids as the toolset sees them: unique within one answer. A call the server sent
/// without an id gets `{prefix}{n}`; an id the server repeats gets a suffix, so two calls'
/// results can never mix.
#[derive(Debug, Default)]
pub struct CallIds {
    used: HashSet<String>,
    n: usize,
}

impl CallIds {
    pub fn assign(&mut self, server_id: Option<&str>, prefix: &str) -> String {
        let base = match server_id.map(str::trim).filter(|s| !s.is_empty()) {
            Some(id) => id.to_owned(),
            None => {
                self.n += 1;
                format!("{prefix}{}", self.n)
            }
        };
        let mut id = base.clone();
        let mut k = 1;
        while self.used.contains(&id) {
            k += 1;
            id = format!("{base}_{k}");
        }
        self.used.insert(id.clone());
        id
    }
}

/// Every file part of `history` checked by a wire format's rule (`accepts`: `Err(why)` for one it
/// cannot send) before anything is sent; a file whose URL is neither a base64 `data:` URL nor an
/// `http(s)` URL is refused by every format. The error is `invalid_request` and names the format
/// (`who`) and the file.
pub fn check_files(
    history: &[Message],
    who: &str,
    accepts: fn(&crate::engine::message::FileRef) -> Result<(), &'static str>,
) -> Result<(), ChatProviderError> {
    for m in history {
        for part in &m.content {
            let crate::engine::message::ContentPart::File { file } = part else { continue };
            let web = file.url.starts_with("https://") || file.url.starts_with("http://");
            let why = if file.data().is_none() && !web {
                Err("a file's url must be a base64 data: URL or an http(s) URL")
            } else {
                accepts(file)
            };
            if let Err(why) = why {
                let name = file.filename.as_deref().unwrap_or("");
                return Err(ChatProviderError::failed(
                    FailureKind::InvalidRequest,
                    format!("{who} cannot take the file `{name}`: {why}; nothing was sent"),
                ));
            }
        }
    }
    Ok(())
}

/// `data:<mime>;base64,<data>` split into its media type and data.
pub fn split_data_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("data:")?;
    let (mime, data) = rest.split_once(";base64,")?;
    Some((mime, data))
}

/// A streaming JSON request's headers: content type and `accept: text/event-stream`, the
/// provider's own `fixed` ones, the key under `auth` (when there is one) and, last, the
/// caller's `headers` (which replace any of the above with the same name).
pub fn request_headers(
    fixed: &[(&str, &str)],
    auth: Option<(&str, String)>,
    extra: &serde_json::Map<String, serde_json::Value>,
) -> Vec<(String, String)> {
    let mut headers: Vec<(String, String)> = [("content-type", "application/json"), ("accept", "text/event-stream")]
        .iter()
        .chain(fixed)
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    if let Some((name, value)) = auth {
        headers.push((name.to_owned(), value));
    }
    push_headers(&mut headers, extra);
    headers
}

/// Copies the string values of a JS `headers` object into a request's headers.
pub fn push_headers(headers: &mut Vec<(String, String)>, extra: &serde_json::Map<String, serde_json::Value>) {
    for (k, v) in extra {
        if let Some(v) = v.as_str() {
            headers.retain(|(h, _)| !h.eq_ignore_ascii_case(k));
            headers.push((k.clone(), v.to_owned()));
        }
    }
}

/// Merges `extraBody` into a request body, key by key.
pub fn merge_extra_body(
    body: &mut serde_json::Map<String, serde_json::Value>,
    extra: &Option<serde_json::Map<String, serde_json::Value>>,
) {
    if let Some(extra) = extra {
        for (k, v) in extra {
            body.insert(k.clone(), v.clone());
        }
    }
}

/// An HTTP status for an error the server sent inside a 200 stream, from the error's type or
/// code as Anthropic and OpenAI name them: the agent's retry rules then treat it like the
/// same error sent as a status.
pub fn status_for_error_type(kind: &str) -> Option<u16> {
    Some(match kind {
        "invalid_request_error" | "invalid_argument" | "INVALID_ARGUMENT" => 400,
        "authentication_error" | "invalid_api_key" | "UNAUTHENTICATED" => 401,
        "permission_error" | "PERMISSION_DENIED" => 403,
        "not_found_error" | "NOT_FOUND" => 404,
        "request_too_large" => 413,
        "rate_limit_error" | "rate_limit_exceeded" | "RESOURCE_EXHAUSTED" => 429,
        "api_error" | "server_error" | "internal_error" | "INTERNAL" => 500,
        "UNAVAILABLE" | "service_unavailable" => 503,
        "timeout_error" | "DEADLINE_EXCEEDED" => 504,
        "overloaded_error" => 529,
        _ => return None,
    })
}

/// The error for an error event inside a 200 stream: a status error when the kind maps to
/// one (so it is retried like one), otherwise a plain provider error.
pub fn mid_stream_error(kind: Option<&str>, status: Option<u16>, message: &str) -> ChatProviderError {
    let status = status.filter(|s| (400..600).contains(s)).or_else(|| kind.and_then(status_for_error_type));
    let what = match kind {
        Some(k) => format!("{k}: {message}"),
        None => message.to_owned(),
    };
    match status {
        Some(status) => ChatProviderError::status(status, format!("{what} (sent mid-stream)"), None, None),
        None => {
            ChatProviderError::failed(FailureKind::Server, format!("the server reported an error mid-stream: {what}"))
        }
    }
}

/// Everything the glue needs to send a request: how, where, which headers, what body.
#[derive(Clone, Debug, PartialEq)]
pub struct HttpRequest {
    pub method: Method,
    pub url: String,
    pub headers: Vec<(String, String)>,
    /// Sent with a POST; a GET has none.
    pub body: String,
}

/// An HTTP method: a model is asked by POST; a resumed answer is read again by GET.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Method {
    #[default]
    Post,
    Get,
}

/// A tool as the model sees it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ToolDefinition {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default = "crate::engine::toolset::default_parameters")]
    pub parameters: serde_json::Value,
}

/// Pulls a human message out of an error body: `{"error":{"message":…}}`, `{"message":…}`,
/// `{"error":"…"}`, or the text itself (shortened).
pub fn error_message_from_body(body: &str) -> Option<String> {
    let mut v: serde_json::Value = match serde_json::from_str(body) {
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
    // Google sends `[{"error": {...}}]`.
    if let serde_json::Value::Array(items) = &mut v {
        if let Some(first) = items.first_mut() {
            v = first.take();
        }
    }
    let pick =
        |v: &serde_json::Value| -> Option<String> { v.get("message").and_then(|m| m.as_str()).map(str::to_owned) };
    match v.get("error") {
        Some(serde_json::Value::String(s)) => Some(s.clone()),
        Some(e @ serde_json::Value::Object(_)) => pick(e).or_else(|| Some(e.to_string())),
        _ => pick(&v),
    }
}

/// Redirects followed for one request at most (each to the same origin).
pub const MAX_REDIRECTS: usize = 5;

/// `scheme://host[:port]` of an absolute `http(s)` URL, lowercased, without a default port and
/// without any `user:password@` (never part of an origin).
pub fn origin_of(url: &str) -> Option<String> {
    let (scheme, authority) = scheme_and_authority(url)?;
    let scheme = scheme.to_ascii_lowercase();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h).to_ascii_lowercase();
    let host_port = match (scheme.as_str(), host_port.rsplit_once(':')) {
        ("https", Some((h, "443"))) | ("http", Some((h, "80"))) => h.to_owned(),
        _ => host_port,
    };
    (!host_port.is_empty()).then(|| format!("{scheme}://{host_port}"))
}

/// An absolute URL's scheme and authority (`user:password@host:port`), as written.
fn scheme_and_authority(url: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = url.split_once("://")?;
    Some((scheme, rest.split(['/', '?', '#']).next().unwrap_or("")))
}

/// Where a redirect from `from` to `location` (a `Location` header) goes, if it may be followed:
/// only to the same origin. A redirect elsewhere is refused before anything is sent there —
/// the API key, a password and the conversation stay at the origin the caller named.
pub fn same_origin_redirect(from: &str, location: Option<&str>, status: u16) -> Result<String, ChatProviderError> {
    let location = location.map(str::trim).filter(|l| !l.is_empty()).ok_or_else(|| {
        ChatProviderError::Redirect(format!("the server answered {status} (a redirect) without a Location header"))
    })?;
    let origin = origin_of(from).unwrap_or_default();
    let target = if location.contains("://") {
        location.to_owned()
    } else if let Some(rest) = location.strip_prefix("//") {
        format!("{}://{rest}", from.split("://").next().unwrap_or("https"))
    } else if location.starts_with('/') {
        format!("{origin}{location}")
    } else {
        let path_end = from.find(['?', '#']).unwrap_or(from.len());
        let dir = from[..path_end].rfind('/').map_or(from, |i| &from[..=i]);
        format!("{dir}{location}")
    };
    match origin_of(&target) {
        Some(to) if to == origin => Ok(target),
        to => Err(ChatProviderError::Redirect(format!(
            "the server redirected the request ({status}) to another origin, {}; nothing was sent there (requests follow redirects only within {origin})",
            to.unwrap_or_else(|| "one that cannot be read".into())
        ))),
    }
}

/// Percent-encodes everything but RFC 3986's unreserved characters: a value put into a URL path
/// (a model name) stays one segment, whatever it holds (`/`, `?`, `#`, `..`).
pub fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Why a `baseUrl` cannot be used, if it cannot: it must be an `http(s)` URL and must not carry
/// credentials (`user:password@`), which would travel with every request and show in errors. The
/// message never repeats the credentials.
pub fn base_url_problem(url: &str) -> Option<String> {
    let web = |s: &str| s.eq_ignore_ascii_case("http") || s.eq_ignore_ascii_case("https");
    let Some((_, authority)) = scheme_and_authority(url).filter(|(s, _)| web(s)) else {
        return Some("`baseUrl` must be an absolute http:// or https:// URL".into());
    };
    if authority.contains('@') {
        return Some(
            "`baseUrl` must not carry credentials (user:password@host): pass the key as `apiKey`, or a header in `headers`"
                .into(),
        );
    }
    None
}
