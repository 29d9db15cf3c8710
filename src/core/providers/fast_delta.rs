//! A fast path for the commonest events of a stream: a text delta, and a fragment of a call's
//! arguments. Most of a Chat Completions stream is chunks like `{"id":…,"object":…,"choices":
//! [{"index":0,"delta":{"content":"…"},"finish_reason":null}],…}`, and most of an Anthropic one
//! `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"…"}}`; going
//! through serde's derived visitors for each one is most of the decode time.
//!
//! [`chat_text_delta`], [`anthropic_delta`], [`responses_text_delta`] and
//! [`gemini_text_chunk`] scan such an event once, strictly, and answer only when it has exactly
//! that shape and is valid JSON by the same rules serde_json applies. Anything else —
//! reasoning, a finish reason, usage, errors, an escape or control character they do not decode
//! themselves, a duplicate field — is `None`, and the caller takes the general path. Property
//! tests and the `fast_delta` fuzz target check that both paths leave a decoder in the same
//! state.

/// A text delta: the chunk's id and the delta's content (`None` when null or absent).
#[derive(Debug, PartialEq)]
pub struct TextDelta<'a> {
    pub id: Option<&'a str>,
    pub content: Option<String>,
    /// A fragment of a call's arguments: `tool_calls: [{index, function: {arguments}}]`.
    pub fragment: Option<(u64, String)>,
}

/// Key comparison without a call: under opt-level "z" `==` on strings is a call to `eq` and
/// then to `memcmp` for every arm a key is tried against; most differ in length at once.
pub(crate) trait Is {
    fn is(&self, lit: &str) -> bool;
    /// One of `lits` (the members that send an event to the general path).
    fn is_any(&self, lits: &[&str]) -> bool;
}

impl Is for str {
    #[inline(always)]
    fn is(&self, lit: &str) -> bool {
        same_bytes(self.as_bytes(), lit.as_bytes())
    }

    #[inline(always)]
    fn is_any(&self, lits: &[&str]) -> bool {
        let mut i = 0;
        while i < lits.len() {
            if self.is(lits[i]) {
                return true;
            }
            i += 1;
        }
        false
    }
}

#[inline(always)]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

struct Scan<'a> {
    /// The event's data: valid UTF-8 already, so a slice between two ASCII quotes is a `str`
    /// by a boundary check, never a second validation.
    s: &'a str,
    b: &'a [u8],
    i: usize,
    /// [`Scan::skip`] checks escapes in string values instead of giving up on them (validation
    /// only: nothing is decoded).
    escapes: bool,
}

type R<T> = Option<T>;

impl<'a> Scan<'a> {
    #[inline(always)]
    fn ws(&mut self) {
        while let Some(c) = self.b.get(self.i) {
            if matches!(c, b' ' | b'\n' | b'\r' | b'\t') {
                self.i += 1;
            } else {
                break;
            }
        }
    }

    #[inline(always)]
    fn eat(&mut self, c: u8) -> R<()> {
        self.ws();
        if matches!(self.b.get(self.i), Some(&x) if x == c) {
            self.i += 1;
            Some(())
        } else {
            None
        }
    }

    #[inline(always)]
    fn peek(&mut self) -> R<u8> {
        self.ws();
        self.b.get(self.i).copied()
    }

    /// A string without escapes or control characters, borrowed. (Escapes send the chunk to
    /// the general path, except in the content, see [`Scan::content`].)
    #[inline(always)]
    fn plain_str(&mut self) -> R<&'a str> {
        self.eat(b'"')?;
        let start = self.i;
        self.i = stop_byte(self.b, self.i)?;
        if !matches!(self.b.get(self.i), Some(b'"')) {
            return None;
        }
        let s = self.s.get(start..self.i)?;
        self.i += 1;
        Some(s)
    }

    /// The content string: copied when plain; with escapes, decoded by [`unescape`].
    fn content(&mut self) -> R<String> {
        self.ws();
        if !matches!(self.b.get(self.i), Some(b'"')) {
            return None;
        }
        let start = self.i;
        self.i += 1;
        let mut escaped = false;
        loop {
            self.i = stop_byte(self.b, self.i)?;
            match self.b.get(self.i)? {
                b'"' => break,
                b'\\' => {
                    escaped = true;
                    self.i += 2;
                }
                _ => return None,
            }
        }
        self.i += 1;
        let raw = self.s.get(start..self.i)?;
        let inner = raw.get(1..raw.len() - 1)?;
        if escaped {
            unescape(inner)
        } else {
            Some(inner.to_owned())
        }
    }

    #[inline(always)]
    fn literal(&mut self, word: &[u8]) -> R<()> {
        self.ws();
        if same_bytes(self.b.get(self.i..self.i + word.len())?, word) {
            self.i += word.len();
            // A literal must not run on into letters (`nullx`).
            match self.b.get(self.i) {
                Some(c) if c.is_ascii_alphanumeric() => None,
                _ => Some(()),
            }
        } else {
            None
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.i;
        while self.b.get(self.i).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
        }
        self.i - start
    }

    /// The integer part of a number: `0`, or up to 15 digits not starting with `0` (longer
    /// ones could overflow or round differently: left to serde).
    fn int_part(&mut self) -> R<()> {
        match self.b.get(self.i)? {
            b'0' => self.i += 1,
            b'1'..=b'9' => {
                if self.digits() > 15 {
                    return None;
                }
            }
            _ => return None,
        }
        Some(())
    }

    /// A number by JSON's grammar, without an exponent: small integers and plain decimals.
    fn number(&mut self) -> R<()> {
        self.ws();
        if matches!(self.b.get(self.i), Some(b'-')) {
            self.i += 1;
        }
        self.int_part()?;
        if matches!(self.b.get(self.i), Some(b'.')) {
            self.i += 1;
            if self.digits() == 0 {
                return None;
            }
        }
        (!matches!(self.b.get(self.i), Some(b'e' | b'E'))).then_some(())
    }

    /// A non-negative integer that fits a u64 comfortably (what `Option<u64>` accepts).
    fn uint(&mut self) -> R<()> {
        self.ws();
        self.int_part()?;
        (!matches!(self.b.get(self.i), Some(b'.' | b'e' | b'E'))).then_some(())
    }

    /// An unsigned integer of at most 15 digits, and its value.
    fn uint_value(&mut self) -> R<u64> {
        self.ws();
        let start = self.i;
        self.uint()?;
        self.s.get(start..self.i)?.parse().ok()
    }

    /// Skips any value, strictly; strings with escapes are not decoded here (→ `None`).
    fn skip(&mut self, depth: usize) -> R<()> {
        if depth > 32 {
            return None;
        }
        match self.peek()? {
            b'"' if self.escapes => self.any_str(),
            b'"' => self.plain_str().map(|_| ()),
            b'n' => self.literal(b"null"),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'{' => self.object(|s, _| s.skip(depth + 1)),
            b'[' => {
                self.i += 1;
                if self.peek()? == b']' {
                    self.i += 1;
                    return Some(());
                }
                loop {
                    self.skip(depth + 1)?;
                    match self.peek()? {
                        b',' => self.i += 1,
                        b']' => {
                            self.i += 1;
                            return Some(());
                        }
                        _ => return None,
                    }
                }
            }
            _ => self.number(),
        }
    }

    /// A string with any escapes serde_json takes (`\u` with four hex digits, unchecked for
    /// surrogates as serde_json leaves them when it ignores a string), skipped.
    fn any_str(&mut self) -> R<()> {
        self.eat(b'"')?;
        loop {
            self.i = stop_byte(self.b, self.i)?;
            match self.b.get(self.i)? {
                b'"' => {
                    self.i += 1;
                    return Some(());
                }
                b'\\' => match self.b.get(self.i + 1)? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.i += 2,
                    b'u' => {
                        hex4(self.b, self.i + 2)?;
                        self.i += 6;
                    }
                    _ => return None,
                },
                _ => return None,
            }
        }
    }

    /// An object whose one member is `key`, a string: `{"text": "…"}`.
    fn sole_string(&mut self, key: &str) -> R<String> {
        let mut value = None;
        self.object(|s, k| match () {
            _ if k.is(key) && value.is_none() => {
                value = Some(s.content()?);
                Some(())
            }
            _ => None,
        })?;
        value
    }

    /// Members of an object, each handed to `f(self, key)`.
    fn object(&mut self, mut f: impl FnMut(&mut Self, &'a str) -> R<()>) -> R<()> {
        self.eat(b'{')?;
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(());
        }
        loop {
            let key = self.plain_str()?;
            self.eat(b':')?;
            f(self, key)?;
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }
}

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
    let mut s = Scan { s: data, b: data.as_bytes(), i: 0, escapes: false };
    let (mut seen_type, mut seen_delta) = (false, false);
    let mut index = None;
    let (mut dtype, mut text, mut json) = (None, None, None);
    s.object(|s, key| match () {
        _ if key.is("type") && !std::mem::replace(&mut seen_type, true) => {
            s.plain_str()?.is("content_block_delta").then_some(())
        }
        _ if key.is("index") && index.is_none() => {
            index = Some(s.uint_value()?);
            Some(())
        }
        _ if key.is("delta") && !std::mem::replace(&mut seen_delta, true) => s.object(|s, key| match () {
            _ if key.is("type") && dtype.is_none() => {
                dtype = Some(s.plain_str()?);
                Some(())
            }
            _ if key.is("text") && text.is_none() => {
                text = Some(s.content()?);
                Some(())
            }
            _ if key.is("partial_json") && json.is_none() => {
                json = Some(s.content()?);
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
    match (dtype?, text, json) {
        ("text_delta", Some(t), None) => Some(AnthropicDelta::Text(t)),
        ("input_json_delta", None, Some(partial_json)) => Some(AnthropicDelta::Json { index, partial_json }),
        _ => None,
    }
}

/// A Responses `response.output_text.delta` event: its text, or `None` for the general path.
/// The fields the general path types (`item_id`, `output_index`, `delta`) must have its
/// types; a field it reads for other events (`summary_index`, `arguments`, `item`, …) sends the
/// event to it; others (`sequence_number`, `content_index`, `logprobs`, `obfuscation`) are
/// skipped, as serde ignores them.
pub fn responses_text_delta(data: &str) -> Option<String> {
    let mut s = Scan { s: data, b: data.as_bytes(), i: 0, escapes: false };
    let (mut seen_type, mut seen_item, mut seen_index, mut seen_delta) = (false, false, false, false);
    let mut text = None;
    s.object(|s, key| match () {
        _ if key.is("type") && !std::mem::replace(&mut seen_type, true) => {
            s.plain_str()?.is("response.output_text.delta").then_some(())
        }
        _ if key.is("item_id") && !std::mem::replace(&mut seen_item, true) => s.plain_str().map(|_| ()),
        _ if key.is("output_index") && !std::mem::replace(&mut seen_index, true) => s.uint(),
        _ if key.is("delta") && !std::mem::replace(&mut seen_delta, true) => {
            text = Some(s.content()?);
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
        _ => s.skip(0),
    })?;
    s.ws();
    if s.i != s.b.len() || !seen_type {
        return None;
    }
    text
}

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
    let mut s = Scan { s: data, b: data.as_bytes(), i: 0, escapes: false };
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
                            text = Some(s.sole_string("text")?);
                            s.eat(b']')
                        }
                        _ if key.is("parts") => None,
                        _ => s.skip(0),
                    })?;
                    seen_parts.then_some(())
                }
                _ if key.is("finishReason") && !std::mem::replace(&mut seen_finish, true) => {
                    out.finish_reason = Some(s.plain_str()?);
                    Some(())
                }
                _ if key.is_any(&["content", "finishReason"]) => None,
                _ => s.skip(0),
            })?;
            s.eat(b']')
        }
        _ if key.is("usageMetadata") && !std::mem::replace(&mut seen_usage, true) => {
            if s.peek()? != b'{' {
                return None;
            }
            let start = s.i;
            s.skip(0)?;
            out.usage = Some(s.s.get(start..s.i)?);
            Some(())
        }
        _ if key.is("responseId") && !std::mem::replace(&mut seen_id, true) => {
            out.response_id = Some(s.plain_str()?);
            Some(())
        }
        _ if key.is_any(&["candidates", "usageMetadata", "responseId", "error", "promptFeedback"]) => None,
        _ => s.skip(0),
    })?;
    s.ws();
    if s.i != s.b.len() {
        return None;
    }
    out.text = text?;
    Some(out)
}

/// The Chat Completions chunk as a plain text delta, or `None` for the general path.
pub fn chat_text_delta(data: &str) -> Option<TextDelta<'_>> {
    let mut s = Scan { s: data, b: data.as_bytes(), i: 0, escapes: false };
    let mut id = None;
    let mut seen_id = false;
    let mut content = None;
    let mut fragment = None;
    let mut seen_choices = false;
    let mut seen_usage = false;
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
                        // One fragment of one call's arguments (the frequent tool-call chunk).
                        _ if key.is("tool_calls") && !std::mem::replace(&mut seen_calls, true) => {
                            s.eat(b'[')?;
                            let (mut index, mut arguments) = (None, None);
                            s.object(|s, key| match () {
                                _ if key.is("index") && index.is_none() => {
                                    index = Some(s.uint_value()?);
                                    Some(())
                                }
                                _ if key.is("function") && arguments.is_none() => {
                                    arguments = Some(s.sole_string("arguments")?);
                                    Some(())
                                }
                                _ => None,
                            })?;
                            fragment = Some((index?, arguments?));
                            s.eat(b']')
                        }
                        _ if key.is("content") && !std::mem::replace(&mut seen_content, true) => {
                            if s.peek()? == b'n' {
                                return s.literal(b"null");
                            }
                            content = Some(s.content()?);
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
        _ if key.is_any(&["error", "citations", "search_results"]) => None,
        _ => s.skip(0),
    })?;
    s.ws();
    if s.i != s.b.len() || !seen_choices {
        return None;
    }
    Some(TextDelta { id, content, fragment })
}

/// True when `text` is one JSON value, checked by the scanner: strings with any escapes,
/// objects with plain keys, numbers of at most 15 integer digits without an exponent, up to 32
/// levels. False says only that the scanner could not tell (serde_json then decides): a call's
/// arguments are checked this way at a few bytes a nanosecond, where serde_json's own check took
/// tens of microseconds per 4 KB under opt-level "z".
pub fn accepts_json(text: &str) -> bool {
    let mut s = Scan { s: text, b: text.as_bytes(), i: 0, escapes: true };
    if s.skip(0).is_none() {
        return false;
    }
    s.ws();
    s.i == s.b.len()
}

/// The index of the first quote, backslash or control character in `b` at or after `i`: the
/// bytes that end or interrupt a plain JSON string. Eight bytes a step (the word tricks flag a
/// byte only at or after a real match, so the lowest flag is exact).
pub(crate) fn stop_byte(b: &[u8], mut i: usize) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    while let Some(&[b0, b1, b2, b3, b4, b5, b6, b7]) = b.get(i..i + 8) {
        // Byte by byte: under opt-level "z" a copy into an array is a call per word.
        let x = u64::from_le_bytes([b0, b1, b2, b3, b4, b5, b6, b7]);
        let quote = x ^ (ONES * u64::from(b'"'));
        let slash = x ^ (ONES * u64::from(b'\\'));
        let flags = ((quote.wrapping_sub(ONES) & !quote)
            | (slash.wrapping_sub(ONES) & !slash)
            | (x.wrapping_sub(ONES * 0x20) & !x))
            & HIGH;
        if flags != 0 {
            return Some(i + (flags.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    while let Some(&c) = b.get(i) {
        if c == b'"' || c == b'\\' || c < 0x20 {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// The four hex digits of a `\u` escape at `b[i..]`.
fn hex4(b: &[u8], i: usize) -> Option<u32> {
    let digits = b.get(i..i + 4)?;
    let mut v = 0;
    for &d in digits {
        v = v * 16 + (d as char).to_digit(16)?;
    }
    Some(v)
}

/// A JSON string's contents (between the quotes) with its escapes decoded. Anything serde_json
/// might read differently (an unknown escape, a lone surrogate) is `None`: the general path
/// decides those.
fn unescape(inner: &str) -> Option<String> {
    let b = inner.as_bytes();
    let mut out = String::with_capacity(b.len());
    let (mut i, mut run) = (0, 0);
    while let Some(at) = memchr::memchr(b'\\', b.get(i..)?) {
        i += at;
        out.push_str(inner.get(run..i)?);
        let e = *b.get(i + 1)?;
        i += 2;
        let c = match e {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let hi = hex4(b, i)?;
                i += 4;
                let code = match hi {
                    0xD800..=0xDBFF => {
                        if b.get(i..i + 2)? != b"\\u" {
                            return None;
                        }
                        let lo = hex4(b, i + 2)?;
                        if !(0xDC00..=0xDFFF).contains(&lo) {
                            return None;
                        }
                        i += 6;
                        0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                    }
                    0xDC00..=0xDFFF => return None,
                    _ => hi,
                };
                char::from_u32(code)?
            }
            _ => return None,
        };
        out.push(c);
        run = i;
    }
    out.push_str(inner.get(run..)?);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_common_chunk_is_read() {
        let c = r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1764000000,"model":"gpt-4.1","system_fingerprint":"fp_1","service_tier":"default","choices":[{"index":0,"delta":{"content":" the fox"},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"a1b2"}"#;
        assert_eq!(
            chat_text_delta(c),
            Some(TextDelta { id: Some("chatcmpl-1"), content: Some(" the fox".into()), fragment: None })
        );
        let c = r#"{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":3,"function":{"arguments":"{\"a\":"}}]},"finish_reason":null}]}"#;
        assert_eq!(chat_text_delta(c).unwrap().fragment, Some((3, "{\"a\":".into())));
        let c = r#"{ "choices" : [ { "delta" : { "role":"assistant", "content" : "a\n\"b\"\u00e9" } } ] }"#;
        assert_eq!(chat_text_delta(c).unwrap().content.as_deref(), Some("a\n\"b\"é"));
    }

    #[test]
    fn stop_byte_finds_the_first_quote_backslash_or_control_character() {
        let naive = |b: &[u8], i: usize| (i..b.len()).find(|&k| b[k] == b'"' || b[k] == b'\\' || b[k] < 0x20);
        // Every byte value at every position of a word and past it, over plain ASCII and over
        // bytes that differ from a stop byte only in the high bit.
        for filler in [b'a', 0xA2, 0xDC, 0x9F, 0xFF, 0x20] {
            for len in 0..20 {
                for at in 0..len {
                    for v in 0..=255u8 {
                        let mut b = vec![filler; len];
                        b[at] = v;
                        for from in [0, 1, at] {
                            assert_eq!(stop_byte(&b, from), naive(&b, from), "{filler} {len} {at} {v} {from}");
                        }
                    }
                }
            }
        }
        // Two stop bytes in one word: the first one wins.
        assert_eq!(stop_byte(b"ab\\cd\"efgh", 0), Some(2));
        assert_eq!(stop_byte(b"abcdefg\x01\"", 0), Some(7));
    }

    #[test]
    fn accepts_json_only_what_serde_json_reads() {
        for ok in [
            r#"{"a":"x\"y\\z\/\b\f\n\r\t\u00e9\ud83d\ude00","b":[1,-2.5,0,true,false,null],"c":{}}"#,
            " [ ] ",
            r#""just a string""#,
            "12",
            r#"{"nested":[[[{"k":["v"]}]]]}"#,
        ] {
            assert!(accepts_json(ok), "{ok}");
            assert!(serde_json::from_str::<serde::de::IgnoredAny>(ok).is_ok(), "{ok}");
        }
        // Refused, or left to serde_json (which also refuses or reads them).
        for other in [
            "",
            "{",
            r#"{"a":1,}"#,
            r#"{"a" 1}"#,
            r#"["\x"]"#,
            r#"["\u12"]"#,
            "[1e5]",
            "[01]",
            "nul",
            "[1] [2]",
            "{\"a\":\"\u{1}\"}",
            r#"{"k\"ey":1}"#,
            "1234567890123456",
        ] {
            if accepts_json(other) {
                assert!(serde_json::from_str::<serde::de::IgnoredAny>(other).is_ok(), "{other}");
            }
        }
        for bad in ["", "{", r#"{"a":1,}"#, r#"["\x"]"#, r#"["\u12"]"#, "[01]", "nul", "[1] [2]", "{\"a\":\"\u{1}\"}"] {
            assert!(!accepts_json(bad), "{bad}");
        }
    }

    #[test]
    fn unescape_reads_what_serde_json_reads() {
        let well_formed = [
            r#"plain"#,
            r#"a\"b\\c\/d\b\f\n\r\t"#,
            r#"\u00e9\u00E9x"#,
            r#"\ud83d\ude00!"#,
            r#"\uD83D\uDE00"#,
            r#"é\u4e2d文"#,
            r#"end\\"#,
            r#"\u0000"#,
            r#"{\"a\":[1,{\"b\":\"c\"}]}"#,
            "",
        ];
        for c in well_formed {
            let serde = serde_json::from_str::<String>(&format!("\"{c}\"")).ok();
            assert!(serde.is_some(), "{c}");
            assert_eq!(unescape(c), serde, "{c}");
        }
        // What serde_json refuses (or might read its own way) is left to the general path.
        for c in [r#"\ud800"#, r#"\ude00"#, r#"\ud800\u0041"#, r#"\ud800x"#, r#"\u12"#, r#"\x"#, r#"\"#, r#"\u12g4"#] {
            assert_eq!(unescape(c), None, "{c}");
        }
        assert_eq!(unescape(r#"\ud83d\ude00"#).as_deref(), Some("😀"));
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

    #[test]
    fn anything_else_takes_the_general_path() {
        for c in [
            r#"{"choices":[{"delta":{"content":"x"},"finish_reason":"stop"}]}"#,
            r#"{"choices":[{"delta":{"reasoning_content":"x"}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"arguments":"x"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"x"}}]}}]}"#,
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
