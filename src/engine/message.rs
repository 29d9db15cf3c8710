//! The message model: kosong's content parts, tool calls, messages and token usage, with
//! kosong's JSON shapes (snake_case, `type` tags) and merge rules.
//!
//! Merging: consecutive text parts merge; a think part absorbs the next think part until it
//! carries `encrypted` (a signature closes it); a tool call absorbs the tool-call parts that
//! follow it. Merges append to a `String`, so assembling n bytes costs O(n).

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MediaUrl {
    pub url: String,
    #[serde(default)]
    pub id: Option<String>,
}

/// One part of a message's content.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type")]
pub enum ContentPart {
    /// `extras` keeps what a provider attaches to the text: `citations` (Anthropic, Perplexity),
    /// `annotations` (OpenAI Responses), or, on an empty text, `server_tool`: a block the
    /// provider's own tools produced (see [`ContentPart::server_tool`]).
    #[serde(rename = "text")]
    Text {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        extras: Option<Map<String, Value>>,
    },
    #[serde(rename = "think")]
    Think {
        think: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        encrypted: Option<String>,
    },
    #[serde(rename = "image_url")]
    ImageUrl { image_url: MediaUrl },
    #[serde(rename = "audio_url")]
    AudioUrl { audio_url: MediaUrl },
    #[serde(rename = "video_url")]
    VideoUrl { video_url: MediaUrl },
    /// A document (a PDF, say): `file.url` is a `data:<type>;base64,…` URL or an `http(s)` URL.
    /// Each provider sends it in its own form, or refuses it before anything is sent.
    #[serde(rename = "file")]
    File { file: FileRef },
}

/// A file part's file: where it is, its media type (read from a data URL when not given) and,
/// optionally, its name.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FileRef {
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
}

impl FileRef {
    /// Reads `{url, media_type?, filename?}` (by hand: a derived reader costs 2.6 KB of .wasm).
    fn read(v: Value) -> Result<FileRef, &'static str> {
        let Value::Object(mut o) = v else { return Err("a file part's `file` must be an object") };
        let mut text = |k: &str| match o.remove(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err("a file part's url, media_type and filename must be strings"),
        };
        Ok(FileRef {
            url: text("url")?.ok_or("a file part needs `file.url`")?,
            media_type: text("media_type")?,
            filename: text("filename")?,
        })
    }

    /// The media type: the one given, else a data URL's.
    pub fn media_type(&self) -> Option<&str> {
        self.media_type.as_deref().or_else(|| crate::engine::providers::split_data_url(&self.url).map(|(m, _)| m))
    }

    /// `(media type, base64 data)` when the file is a base64 data URL.
    pub fn data(&self) -> Option<(&str, &str)> {
        let (mime, data) = crate::engine::providers::split_data_url(&self.url)?;
        Some((self.media_type.as_deref().unwrap_or(mime), data))
    }
}

impl ContentPart {
    pub fn text(s: impl Into<String>) -> Self {
        ContentPart::Text { text: s.into(), extras: None }
    }

    /// A text part carrying a list a provider attached to it (`citations`, `annotations`); an
    /// empty text merges into the text before it, lists appended.
    pub fn text_with_list(text: impl Into<String>, key: &str, list: Vec<Value>) -> Self {
        let mut extras = Map::new();
        extras.insert(key.into(), Value::Array(list));
        ContentPart::Text { text: text.into(), extras: Some(extras) }
    }

    /// A provider-run tool's block or item (`provider` names whose shape `value` has), kept in
    /// the message as an empty text part so the message stays kosong's: kept in order, never
    /// dispatched to the toolset, sent back only to the provider that produced it.
    pub fn server_tool(provider: &str, value: Value) -> Self {
        let mut inner = Map::new();
        inner.insert("provider".into(), Value::from(provider));
        inner.insert("value".into(), value);
        let mut extras = Map::new();
        extras.insert("server_tool".into(), Value::Object(inner));
        ContentPart::Text { text: String::new(), extras: Some(extras) }
    }

    /// The provider-run tool block this part carries, when it is one made for `provider`.
    pub fn server_tool_for(&self, provider: &str) -> Option<&Value> {
        let st = self.server_tool_extras()?;
        (st.get("provider").and_then(Value::as_str) == Some(provider)).then(|| st.get("value")).flatten()
    }

    fn server_tool_extras(&self) -> Option<&Map<String, Value>> {
        match self {
            ContentPart::Text { extras: Some(e), .. } => e.get("server_tool").and_then(Value::as_object),
            _ => None,
        }
    }

    /// True for a part that carries a provider-run tool's block rather than text.
    pub fn is_server_tool(&self) -> bool {
        self.server_tool_extras().is_some()
    }

    /// A list kept in a text part's extras (`citations`, `annotations`).
    pub fn text_extra_list(&self, key: &str) -> Option<&Vec<Value>> {
        match self {
            ContentPart::Text { extras: Some(e), .. } => e.get(key).and_then(Value::as_array),
            _ => None,
        }
    }
    pub fn think(s: impl Into<String>) -> Self {
        ContentPart::Think { think: s.into(), encrypted: None }
    }

    /// kosong's `merge_in_place`: true when `other` was absorbed into `self`.
    pub fn merge_in_place(&mut self, other: &ContentPart) -> bool {
        // A provider-run tool's block stands alone.
        if self.is_server_tool() || other.is_server_tool() {
            return false;
        }
        match (self, other) {
            (ContentPart::Text { text, extras }, ContentPart::Text { text: more, extras: more_extras }) => {
                text.push_str(more);
                if let Some(more_extras) = more_extras {
                    merge_extras(extras.get_or_insert_with(Map::new), more_extras);
                }
                true
            }
            (ContentPart::Think { think, encrypted }, ContentPart::Think { think: more, encrypted: more_enc }) => {
                if encrypted.as_deref().is_some_and(|e| !e.is_empty()) {
                    return false;
                }
                think.push_str(more);
                if more_enc.as_deref().is_some_and(|e| !e.is_empty()) {
                    encrypted.clone_from(more_enc);
                }
                true
            }
            _ => false,
        }
    }
}

/// Lists (citations, annotations) are appended; any other key takes the later value.
fn merge_extras(into: &mut Map<String, Value>, more: &Map<String, Value>) {
    for (k, v) in more {
        match (into.get_mut(k), v) {
            (Some(Value::Array(have)), Value::Array(add)) => have.extend(add.iter().cloned()),
            _ => {
                into.insert(k.clone(), v.clone());
            }
        }
    }
}

/// Read through a flat struct rather than serde's internally tagged enums, whose buffering
/// machinery is large in the .wasm and slow.
impl<'de> Deserialize<'de> for ContentPart {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Raw {
            #[serde(rename = "type")]
            kind: String,
            #[serde(default)]
            text: Option<String>,
            #[serde(default)]
            extras: Option<Map<String, Value>>,
            #[serde(default)]
            think: Option<String>,
            #[serde(default)]
            encrypted: Option<String>,
            #[serde(default)]
            image_url: Option<MediaUrl>,
            #[serde(default)]
            audio_url: Option<MediaUrl>,
            #[serde(default)]
            video_url: Option<MediaUrl>,
            #[serde(default)]
            file: Option<Value>,
        }
        let r = Raw::deserialize(d)?;
        let need = |v: Option<MediaUrl>, f: &'static str| v.ok_or_else(|| D::Error::missing_field(f));
        Ok(match r.kind.as_str() {
            "text" => {
                ContentPart::Text { text: r.text.ok_or_else(|| D::Error::missing_field("text"))?, extras: r.extras }
            }
            "think" => ContentPart::Think {
                think: r.think.ok_or_else(|| D::Error::missing_field("think"))?,
                encrypted: r.encrypted,
            },
            "image_url" => ContentPart::ImageUrl { image_url: need(r.image_url, "image_url")? },
            "audio_url" => ContentPart::AudioUrl { audio_url: need(r.audio_url, "audio_url")? },
            "video_url" => ContentPart::VideoUrl { video_url: need(r.video_url, "video_url")? },
            "file" => ContentPart::File {
                file: FileRef::read(r.file.ok_or_else(|| D::Error::missing_field("file"))?)
                    .map_err(D::Error::custom)?,
            },
            other => {
                return Err(D::Error::unknown_variant(
                    other,
                    &["text", "think", "image_url", "audio_url", "video_url", "file"],
                ))
            }
        })
    }
}

/// A string or a list of parts, as kosong accepts content (`null` is `Null`), read without
/// serde's untagged-enum buffering.
pub enum TextOrParts {
    Text(String),
    Parts(Vec<ContentPart>),
    Null,
}

impl<'de> Deserialize<'de> for TextOrParts {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = TextOrParts;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string or a list of content parts")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<TextOrParts, E> {
                Ok(TextOrParts::Text(v.to_owned()))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<TextOrParts, E> {
                Ok(TextOrParts::Text(v))
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<TextOrParts, E> {
                Ok(TextOrParts::Null)
            }
            fn visit_none<E: serde::de::Error>(self) -> Result<TextOrParts, E> {
                Ok(TextOrParts::Null)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<TextOrParts, D::Error> {
                d.deserialize_any(V)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<TextOrParts, A::Error> {
                let mut parts = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
                while let Some(p) = seq.next_element::<ContentPart>()? {
                    parts.push(p);
                }
                Ok(TextOrParts::Parts(parts))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionBody {
    pub name: String,
    #[serde(default)]
    pub arguments: Option<String>,
}

/// A tool call requested by the assistant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    #[serde(rename = "type", default)]
    pub kind: ToolCallType,
    pub id: String,
    pub function: FunctionBody,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extras: Option<Map<String, Value>>,
}

/// The only kind of tool call there is: `"function"`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ToolCallType {
    #[default]
    #[serde(rename = "function")]
    Function,
}

impl ToolCall {
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: Option<String>) -> Self {
        ToolCall {
            kind: ToolCallType::Function,
            id: id.into(),
            function: FunctionBody { name: name.into(), arguments },
            extras: None,
        }
    }

    /// Appends a streamed fragment of the arguments (kosong: `None` adds nothing).
    pub fn append_arguments(&mut self, piece: Option<&str>) {
        match (&mut self.function.arguments, piece) {
            (_, None) => {}
            (Some(args), Some(p)) => args.push_str(p),
            (slot @ None, Some(p)) => *slot = Some(p.to_owned()),
        }
    }
}

/// A streamed fragment of the arguments of an open tool call. `tool_call_id` names the call
/// when the wire format says which one (several calls may stream interleaved); without it
/// the fragment belongs to the tool call right before it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCallPart {
    pub arguments_part: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

/// What a provider streams: content parts, tool calls and tool-call fragments.
#[derive(Clone, Debug, PartialEq)]
pub enum StreamedMessagePart {
    Content(ContentPart),
    ToolCall(ToolCall),
    ToolCallPart(ToolCallPart),
}

impl StreamedMessagePart {
    /// kosong's merge rules for streamed parts: content merges as [`ContentPart::merge_in_place`];
    /// a tool call absorbs a fragment that names it or names no call; a fragment absorbs the
    /// next fragment of the same call. True when `other` was absorbed.
    pub fn merge_in_place(&mut self, other: &StreamedMessagePart) -> bool {
        use StreamedMessagePart as P;
        match (self, other) {
            (P::Content(a), P::Content(b)) => a.merge_in_place(b),
            (P::ToolCall(call), P::ToolCallPart(p)) if p.tool_call_id.as_ref().is_none_or(|id| *id == call.id) => {
                call.append_arguments(p.arguments_part.as_deref());
                true
            }
            (P::ToolCallPart(a), P::ToolCallPart(b)) if a.tool_call_id == b.tool_call_id => {
                match (&mut a.arguments_part, b.arguments_part.as_deref()) {
                    (_, None) => {}
                    (Some(x), Some(y)) => x.push_str(y),
                    (slot @ None, Some(y)) => *slot = Some(y.to_owned()),
                }
                true
            }
            _ => false,
        }
    }
}

impl Serialize for StreamedMessagePart {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            StreamedMessagePart::Content(p) => p.serialize(s),
            StreamedMessagePart::ToolCall(c) => c.serialize(s),
            StreamedMessagePart::ToolCallPart(p) => {
                #[derive(Serialize)]
                struct Tagged<'a> {
                    #[serde(rename = "type")]
                    kind: &'static str,
                    #[serde(flatten)]
                    part: &'a ToolCallPart,
                }
                Tagged { kind: "tool_call_part", part: p }.serialize(s)
            }
        }
    }
}

impl<'de> Deserialize<'de> for StreamedMessagePart {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        match v.get("type").and_then(Value::as_str) {
            Some("function") => serde_json::from_value(v).map(StreamedMessagePart::ToolCall),
            Some("tool_call_part") => serde_json::from_value(v).map(StreamedMessagePart::ToolCallPart),
            _ => serde_json::from_value(v).map(StreamedMessagePart::Content),
        }
        .map_err(D::Error::custom)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

impl Role {
    /// The role as kosong (and serde, above) names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// A message in a conversation. `content` serializes as a plain string when it is a lone
/// text part, as kosong does, and accepts a string, `null` or a list of parts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(serialize_with = "ser_content", deserialize_with = "de_content", default)]
    pub content: Vec<ContentPart>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial: Option<bool>,
}

impl Message {
    pub fn new(role: Role, content: Vec<ContentPart>) -> Self {
        Message { role, name: None, content, tool_calls: None, tool_call_id: None, partial: None }
    }

    /// Concatenates the text parts.
    pub fn extract_text(&self, sep: &str) -> String {
        let texts: Vec<&str> = self
            .content
            .iter()
            .filter_map(|p| match p {
                ContentPart::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        texts.join(sep)
    }
}

fn ser_content<S: Serializer>(content: &[ContentPart], s: S) -> Result<S::Ok, S::Error> {
    match content {
        [ContentPart::Text { text, extras: None }] => s.serialize_str(text),
        parts => parts.serialize(s),
    }
}

fn de_content<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<ContentPart>, D::Error> {
    Ok(match TextOrParts::deserialize(d)? {
        TextOrParts::Text(text) => vec![ContentPart::text(text)],
        TextOrParts::Parts(parts) => parts,
        TextOrParts::Null => Vec::new(),
    })
}

/// kimi-cli's wrapper for what the runtime says rather than the user or a tool (a tool's status,
/// a compaction's preface, a system message where a provider has no system role):
/// `<system>…</system>`.
pub fn system_text(text: &str) -> String {
    format!("<system>{text}</system>")
}

impl ContentPart {
    /// A text part of what the runtime says: [`system_text`].
    pub fn system(text: &str) -> ContentPart {
        ContentPart::text(system_text(text))
    }
}

/// Token usage of one generation, split as kosong splits it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    #[serde(default)]
    pub input_other: u64,
    #[serde(default)]
    pub output: u64,
    #[serde(default)]
    pub input_cache_read: u64,
    #[serde(default)]
    pub input_cache_creation: u64,
}

impl TokenUsage {
    /// The input tokens, cached or not (what kimi-cli counts as the context's size).
    pub fn input(&self) -> u64 {
        self.input_other + self.input_cache_read + self.input_cache_creation
    }

    pub fn total(&self) -> u64 {
        self.input() + self.output
    }

    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &TokenUsage) {
        self.input_other += other.input_other;
        self.output += other.output;
        self.input_cache_read += other.input_cache_read;
        self.input_cache_creation += other.input_cache_creation;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn think_merges_until_encrypted() {
        let mut a = ContentPart::think("a");
        assert!(a.merge_in_place(&ContentPart::Think { think: "b".into(), encrypted: Some("sig".into()) }));
        assert!(!a.merge_in_place(&ContentPart::think("c")));
        assert_eq!(a, ContentPart::Think { think: "ab".into(), encrypted: Some("sig".into()) });
        assert!(!ContentPart::text("x").merge_in_place(&ContentPart::think("y")));
    }

    #[test]
    fn json_shapes_round_trip() {
        let m: Message = serde_json::from_str(
            r#"{"role":"assistant","content":[{"type":"think","think":"hm"},{"type":"text","text":"hi"}],
               "tool_calls":[{"type":"function","id":"c1","function":{"name":"f","arguments":"{}"}}]}"#,
        )
        .unwrap();
        assert_eq!(m.content.len(), 2);
        let back = serde_json::to_value(&m).unwrap();
        assert_eq!(back["tool_calls"][0]["type"], "function");
        assert_eq!(back["content"][0], serde_json::json!({"type":"think","think":"hm"}));
        let lone: Message = serde_json::from_str(r#"{"role":"user","content":"hello"}"#).unwrap();
        assert_eq!(serde_json::to_string(&lone).unwrap(), r#"{"role":"user","content":"hello"}"#);
        let none: Message = serde_json::from_str(r#"{"role":"assistant","content":null}"#).unwrap();
        assert!(none.content.is_empty());
        let part: StreamedMessagePart =
            serde_json::from_str(r#"{"type":"tool_call_part","arguments_part":null}"#).unwrap();
        assert_eq!(part, StreamedMessagePart::ToolCallPart(ToolCallPart { arguments_part: None, tool_call_id: None }));
        assert_eq!(serde_json::to_string(&part).unwrap(), r#"{"type":"tool_call_part","arguments_part":null}"#);
    }
}
