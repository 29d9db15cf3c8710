//! Incremental previews of JSON that is still streaming (a tool call's arguments).
//!
//! [`PartialJson::feed`] takes the next piece of text and returns *edits* that bring a
//! best-effort value up to date: `Set` a value at a path (a finished scalar, or an empty
//! object/array/string that has just begun) and `Append` text to the string at a path.
//! Applying the edits in order to a value keeps it equal to "everything parsed so far",
//! strings cut mid-way included. Each byte is looked at once, so feeding n bytes in any
//! number of pieces costs O(n) in total — there is no re-parse of the buffer per piece.
//! Partial numbers are previewed at the end of a piece when they are short; keys appear
//! once complete. Input that is not JSON stops the preview (no more edits); it never panics.
//!
//! An edit names its whole path, so a value nested d levels deep costs d per edit: what lies
//! deeper than [`MAX_PREVIEW_DEPTH`] levels is not previewed (and [`PartialJson::depth_limited`]
//! says so), which keeps the cost linear in the bytes fed for every shape — nesting, long
//! strings, many keys, long numbers, in pieces of any size. The structure is still followed
//! at any depth, so what comes after a deep part is previewed again.

use crate::engine::json::scan::stop_byte;
use serde_json::Value;

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(untagged)]
pub enum PathSeg {
    Key(String),
    Index(usize),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Edit {
    /// `number`: a non-integer number's own text, which the edit's JSON carries as it was written
    /// (a reader with an exact number parser, JavaScript's `JSON.parse`, gets it exactly; `value`
    /// is serde_json's reading of it).
    Set {
        path: Vec<PathSeg>,
        value: Value,
        number: Option<String>,
    },
    Append {
        path: Vec<PathSeg>,
        text: String,
    },
}

/// `{"op": "set", "path", "value"}` or `{"op": "append", "path", "text"}`.
impl serde::Serialize for Edit {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(3))?;
        match self {
            Edit::Set { path, value, number } => {
                m.serialize_entry("op", "set")?;
                m.serialize_entry("path", path)?;
                match number.as_deref().and_then(|n| serde_json::value::RawValue::from_string(n.to_owned()).ok()) {
                    Some(raw) => m.serialize_entry("value", &raw)?,
                    None => m.serialize_entry("value", value)?,
                }
            }
            Edit::Append { path, text } => {
                m.serialize_entry("op", "append")?;
                m.serialize_entry("path", path)?;
                m.serialize_entry("text", text)?;
            }
        }
        m.end()
    }
}

/// Appends `next` to `edits`, an append to the path the last edit appended to joining it: the
/// edits of consecutive pieces as one list, applied to the same effect.
pub fn join_edits(edits: &mut Vec<Edit>, next: &[Edit]) {
    let mut rest = next;
    if let (Some(Edit::Append { path, text }), Some(Edit::Append { path: p2, text: t2 })) =
        (edits.last_mut(), next.first())
    {
        if path == p2 {
            text.push_str(t2);
            rest = &next[1..];
        }
    }
    edits.extend_from_slice(rest);
}

/// Applies one edit to `value` (what `PartialJson.applyEdits` does in JavaScript): a path into
/// a value it does not reach is ignored, an index one past an array's end appends.
pub fn apply_edit(value: &mut Value, edit: Edit) {
    let (path, set) = match edit {
        Edit::Set { path, value, .. } => (path, Ok(value)),
        Edit::Append { path, text } => (path, Err(text)),
    };
    let mut at = value;
    for seg in &path {
        at = match (seg, at) {
            (PathSeg::Key(k), Value::Object(m)) => m.entry(k.clone()).or_insert(Value::Null),
            (PathSeg::Index(i), Value::Array(a)) => {
                if *i == a.len() {
                    a.push(Value::Null);
                }
                match a.get_mut(*i) {
                    Some(v) => v,
                    None => return,
                }
            }
            _ => return,
        };
    }
    match set {
        Ok(v) => *at = v,
        Err(text) => {
            if let Value::String(s) = at {
                s.push_str(&text);
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ObjState {
    KeyOrEnd,
    Key,
    Colon,
    Value,
    After,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ArrState {
    ValueOrEnd,
    Value,
    After,
}

#[derive(Clone, Debug)]
enum Frame {
    Object(ObjState),
    Array(ArrState, usize),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Escape {
    None,
    Backslash,
    /// `\u` and the hex digits so far, plus a high surrogate waiting for its pair.
    Unicode(String, Option<u16>),
    /// A high surrogate was read; expecting `\` then `u` of its low half.
    Pair(u16, u8),
}

#[derive(Clone, Debug)]
enum Token {
    None,
    /// A string; `key` when it is an object key (kept, not previewed).
    Str {
        key: bool,
        esc: Escape,
    },
    Number(String),
    Literal(String),
}

const NUMBER_PREVIEW_MAX: usize = 64;

/// Values nested deeper than this are not previewed.
pub const MAX_PREVIEW_DEPTH: usize = 64;

#[derive(Clone, Debug)]
pub struct PartialJson {
    stack: Vec<Frame>,
    path: Vec<PathSeg>,
    token: Token,
    key: String,
    /// Text for the string being read, not yet handed out as an edit.
    pending: String,
    root_done: bool,
    failed: bool,
    depth_limited: bool,
    /// Units of work done so far: bytes looked at, path segments and edits handed out. For
    /// the tests that prove the cost linear.
    work: u64,
}

impl Default for PartialJson {
    fn default() -> Self {
        Self::new()
    }
}

impl PartialJson {
    pub fn new() -> Self {
        PartialJson {
            stack: Vec::new(),
            path: Vec::new(),
            token: Token::None,
            key: String::new(),
            pending: String::new(),
            root_done: false,
            failed: false,
            depth_limited: false,
            work: 0,
        }
    }

    /// Some of the value lies deeper than [`MAX_PREVIEW_DEPTH`] and was not previewed.
    pub fn depth_limited(&self) -> bool {
        self.depth_limited
    }

    /// The work done so far (bytes looked at, path segments and edits handed out).
    pub fn work(&self) -> u64 {
        self.work
    }

    /// The path of an edit at the current depth, or `None` when it is too deep to preview.
    fn edit_path(&mut self) -> Option<Vec<PathSeg>> {
        if self.path.len() > MAX_PREVIEW_DEPTH {
            self.depth_limited = true;
            return None;
        }
        self.work += self.path.len() as u64 + 1;
        Some(self.path.clone())
    }

    fn set(&mut self, out: &mut Vec<Edit>, value: Value) {
        if let Some(path) = self.edit_path() {
            out.push(Edit::Set { path, value, number: None });
        }
    }

    /// Sets the number `text` (valid JSON) as its value; a non-integer keeps its text too.
    fn set_number(&mut self, out: &mut Vec<Edit>, text: &str, value: Value) {
        let exact = matches!(&value, Value::Number(n) if n.is_f64()).then(|| text.to_owned());
        if let Some(path) = self.edit_path() {
            out.push(Edit::Set { path, value, number: exact });
        }
    }

    /// The input so far is not JSON: no more edits will come.
    pub fn failed(&self) -> bool {
        self.failed
    }

    /// The top-level value is complete.
    pub fn done(&self) -> bool {
        self.root_done && matches!(self.token, Token::None)
    }

    /// Inside a string value that is previewed, past any escape: text without quotes,
    /// backslashes or control characters fed now is appended to it as it is.
    pub fn in_plain_string(&self) -> bool {
        !self.failed
            && matches!(self.token, Token::Str { key: false, esc: Escape::None })
            && self.path.len() <= MAX_PREVIEW_DEPTH
    }

    pub fn feed(&mut self, piece: &str) -> Vec<Edit> {
        let mut out = Vec::new();
        self.work += piece.len() as u64 + 1;
        if self.failed {
            return out;
        }
        let mut i = 0;
        while i < piece.len() {
            // Inside a string, a run without quotes, escapes or control characters is taken
            // whole (a streamed argument is mostly such runs), not a character at a time.
            if matches!(self.token, Token::Str { esc: Escape::None, .. }) {
                let end = stop_byte(piece.as_bytes(), i).unwrap_or(piece.len());
                if end > i {
                    if let Some(run) = piece.get(i..end) {
                        self.plain_run(run);
                        i = end;
                        continue;
                    }
                }
            }
            let Some(c) = piece.get(i..).and_then(|rest| rest.chars().next()) else { break };
            i += c.len_utf8();
            if !self.step(c, &mut out) {
                // What was read before the fault still stands (the same for any split).
                self.failed = true;
                self.flush_pending(&mut out);
                return out;
            }
        }
        self.flush_pending(&mut out);
        if let Token::Number(n) = &self.token {
            // Number characters are ASCII, so any byte offset is a char boundary. Looking at
            // a bounded head keeps a huge number fed in tiny pieces linear.
            let head = &n[..n.len().min(NUMBER_PREVIEW_MAX)];
            self.work += head.len() as u64;
            let text = head[..json_number_prefix_len(head)].to_owned();
            if let Some(v) = number_value(&text) {
                self.set_number(&mut out, &text, v);
            }
        }
        out
    }

    fn flush_pending(&mut self, out: &mut Vec<Edit>) {
        if !self.pending.is_empty() {
            let text = std::mem::take(&mut self.pending);
            if let Some(path) = self.edit_path() {
                out.push(Edit::Append { path, text });
            }
        }
    }

    /// Handles one character; false when the text cannot be JSON.
    fn step(&mut self, c: char, out: &mut Vec<Edit>) -> bool {
        match &mut self.token {
            Token::Str { .. } => return self.string_char(c, out),
            Token::Number(n) => {
                if matches!(c, '0'..='9' | '-' | '+' | '.' | 'e' | 'E') {
                    n.push(c);
                    return true;
                }
                let text = std::mem::take(n);
                self.token = Token::None;
                match number_value(&text) {
                    Some(v) => self.set_number(out, &text, v),
                    None => {
                        // Show the number as far as it was one, as a preview at any earlier
                        // piece boundary could have: the outcome must not depend on the split.
                        let valid = json_number_prefix_len(&text);
                        if let Some(v) = number_value(&text[..valid]) {
                            self.set_number(out, &text[..valid], v);
                        }
                        return false;
                    }
                }
                if !self.value_done() {
                    return false;
                }
                // the character that ended the number is structure: handle it below
            }
            Token::Literal(l) => {
                if c.is_ascii_alphabetic() {
                    l.push(c);
                    return ["true", "false", "null"].iter().any(|w| w.starts_with(l.as_str()));
                }
                let v = match l.as_str() {
                    "true" => Value::Bool(true),
                    "false" => Value::Bool(false),
                    "null" => Value::Null,
                    _ => return false,
                };
                self.token = Token::None;
                self.set(out, v);
                if !self.value_done() {
                    return false;
                }
            }
            Token::None => {}
        }
        if c.is_whitespace() {
            return true;
        }
        if self.root_done {
            return false;
        }
        match self.stack.last().cloned() {
            None => self.begin_value(c, out),
            Some(Frame::Object(st)) => match (st, c) {
                (ObjState::KeyOrEnd, '}') => self.close(out),
                (ObjState::KeyOrEnd | ObjState::Key, '"') => {
                    self.set_obj(ObjState::Key);
                    self.key.clear();
                    self.token = Token::Str { key: true, esc: Escape::None };
                    true
                }
                (ObjState::Colon, ':') => {
                    self.set_obj(ObjState::Value);
                    true
                }
                (ObjState::Value, _) => {
                    self.path.push(PathSeg::Key(std::mem::take(&mut self.key)));
                    self.set_obj(ObjState::After);
                    self.begin_value(c, out)
                }
                (ObjState::After, ',') => {
                    self.set_obj(ObjState::Key);
                    true
                }
                (ObjState::After, '}') => self.close(out),
                _ => false,
            },
            Some(Frame::Array(st, i)) => match (st, c) {
                (ArrState::ValueOrEnd, ']') | (ArrState::After, ']') => self.close(out),
                (ArrState::ValueOrEnd | ArrState::Value, _) => {
                    self.path.push(PathSeg::Index(i));
                    if let Some(Frame::Array(s, _)) = self.stack.last_mut() {
                        *s = ArrState::After;
                    }
                    self.begin_value(c, out)
                }
                (ArrState::After, ',') => {
                    if let Some(Frame::Array(s, n)) = self.stack.last_mut() {
                        *s = ArrState::Value;
                        *n += 1;
                    }
                    true
                }
                _ => false,
            },
        }
    }

    fn set_obj(&mut self, st: ObjState) {
        if let Some(Frame::Object(s)) = self.stack.last_mut() {
            *s = st;
        }
    }

    /// A value starts with `c` at the current path.
    fn begin_value(&mut self, c: char, out: &mut Vec<Edit>) -> bool {
        match c {
            '{' => {
                self.set(out, Value::Object(Default::default()));
                self.stack.push(Frame::Object(ObjState::KeyOrEnd));
            }
            '[' => {
                self.set(out, Value::Array(Vec::new()));
                self.stack.push(Frame::Array(ArrState::ValueOrEnd, 0));
            }
            '"' => {
                self.set(out, Value::String(String::new()));
                self.token = Token::Str { key: false, esc: Escape::None };
            }
            '-' | '0'..='9' => self.token = Token::Number(c.to_string()),
            't' | 'f' | 'n' => self.token = Token::Literal(c.to_string()),
            _ => return false,
        }
        true
    }

    /// Closes the innermost container, which is itself a finished value.
    fn close(&mut self, _out: &mut Vec<Edit>) -> bool {
        self.stack.pop();
        self.value_done()
    }

    /// The value at the current path is complete: leave it.
    fn value_done(&mut self) -> bool {
        if self.stack.is_empty() {
            self.root_done = true;
            return true;
        }
        self.path.pop().is_some()
    }

    /// Characters of a string that need no decoding: kept as [`Self::string_char`] keeps them.
    fn plain_run(&mut self, run: &str) {
        if let Token::Str { key: true, .. } = self.token {
            self.key.push_str(run);
        } else if self.path.len() <= MAX_PREVIEW_DEPTH {
            self.pending.push_str(run);
        }
    }

    fn string_char(&mut self, c: char, out: &mut Vec<Edit>) -> bool {
        let Token::Str { key, esc } = &mut self.token else { return false };
        let key = *key;
        let mut emit: Option<char> = None;
        match esc {
            Escape::None => match c {
                '"' => {
                    self.token = Token::None;
                    if key {
                        self.set_obj(ObjState::Colon);
                        return true;
                    }
                    self.flush_pending(out);
                    return self.value_done();
                }
                '\\' => *esc = Escape::Backslash,
                c if (c as u32) < 0x20 => return false,
                c => emit = Some(c),
            },
            Escape::Backslash => {
                let ch = match c {
                    '"' => '"',
                    '\\' => '\\',
                    '/' => '/',
                    'b' => '\u{8}',
                    'f' => '\u{c}',
                    'n' => '\n',
                    'r' => '\r',
                    't' => '\t',
                    'u' => {
                        *esc = Escape::Unicode(String::new(), None);
                        return true;
                    }
                    _ => return false,
                };
                *esc = Escape::None;
                emit = Some(ch);
            }
            Escape::Unicode(hex, high) => {
                if !c.is_ascii_hexdigit() {
                    return false;
                }
                hex.push(c);
                if hex.len() < 4 {
                    return true;
                }
                let Ok(unit) = u16::from_str_radix(hex, 16) else { return false };
                // A lone surrogate (JSON.parse keeps it; a Rust string cannot) is U+FFFD, as
                // `TextEncoder` makes it.
                match (*high, unit) {
                    (None, 0xD800..=0xDBFF) => *esc = Escape::Pair(unit, 0),
                    (None, 0xDC00..=0xDFFF) => {
                        emit = Some('\u{FFFD}');
                        *esc = Escape::None;
                    }
                    (None, u) => {
                        emit = char::from_u32(u as u32);
                        *esc = Escape::None;
                    }
                    (Some(h), 0xDC00..=0xDFFF) => {
                        let cp = 0x10000 + (((h as u32) - 0xD800) << 10) + ((unit as u32) - 0xDC00);
                        emit = char::from_u32(cp);
                        *esc = Escape::None;
                    }
                    (Some(_), 0xD800..=0xDBFF) => {
                        // The high before it was lone; this one waits for its own pair.
                        *esc = Escape::Pair(unit, 0);
                        self.push_char(key, '\u{FFFD}');
                        return true;
                    }
                    (Some(_), u) => {
                        self.push_char(key, '\u{FFFD}');
                        emit = char::from_u32(u as u32);
                        if let Token::Str { esc, .. } = &mut self.token {
                            *esc = Escape::None;
                        }
                    }
                }
            }
            Escape::Pair(h, seen) => {
                let h = *h;
                match (*seen, c) {
                    (0, '\\') => *esc = Escape::Pair(h, 1),
                    (1, 'u') => *esc = Escape::Unicode(String::new(), Some(h)),
                    // The high surrogate was lone: U+FFFD for it, and `c` read as it comes.
                    (seen, c) => {
                        *esc = if seen == 0 { Escape::None } else { Escape::Backslash };
                        self.push_char(key, '\u{FFFD}');
                        return self.string_char(c, out);
                    }
                }
            }
        }
        if let Some(ch) = emit {
            self.push_char(key, ch);
        }
        true
    }

    fn push_char(&mut self, key: bool, ch: char) {
        if key {
            self.key.push(ch);
        } else if self.path.len() <= MAX_PREVIEW_DEPTH {
            self.pending.push(ch);
        }
    }
}

/// The length of the longest prefix of `n` that is a whole JSON number
/// (`-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`), in one pass.
fn json_number_prefix_len(n: &str) -> usize {
    let b = n.as_bytes();
    let mut i = 0;
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i > start
    };
    if b.first() == Some(&b'-') {
        i += 1;
    }
    match b.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => {
            digits(&mut i);
        }
        _ => return 0,
    }
    let mut best = i;
    if b.get(i) == Some(&b'.') {
        let mut j = i + 1;
        if !digits(&mut j) {
            return best;
        }
        i = j;
        best = i;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        let mut j = i + 1;
        if matches!(b.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        if digits(&mut j) {
            best = j;
        }
    }
    best
}

fn is_json_number(n: &str) -> bool {
    !n.is_empty() && json_number_prefix_len(n) == n.len()
}

/// A number's value, exactly as written where a double can hold it.
fn number_value(n: &str) -> Option<Value> {
    if !is_json_number(n) {
        return None;
    }
    if !n.contains(['.', 'e', 'E']) {
        if n == "-0" {
            return serde_json::Number::from_f64(-0.0).map(Value::Number); // as serde_json reads it
        }
        if let Ok(i) = n.parse::<i64>() {
            return Some(Value::from(i));
        }
        if let Ok(u) = n.parse::<u64>() {
            return Some(Value::from(u));
        }
    }
    // A valid number too large for a double (`1e400`) has no JSON value here: it previews as
    // `null`, the same whether it arrived whole or in pieces.
    // (Read by serde_json's number parser, which the .wasm has anyway, not core's `f64` parser.)
    Some(serde_json::from_str::<f64>(n).ok().and_then(serde_json::Number::from_f64).map_or(Value::Null, Value::Number))
}

/// The slot at `path`, made when it is the next key or index of its container.
fn slot<'a>(v: &'a mut Value, path: &[PathSeg]) -> Option<&'a mut Value> {
    let Some((seg, rest)) = path.split_first() else { return Some(v) };
    let next = match (v, seg) {
        (Value::Object(m), PathSeg::Key(k)) => {
            if rest.is_empty() && !m.contains_key(k) {
                m.insert(k.clone(), Value::Null);
            }
            m.get_mut(k)?
        }
        (Value::Array(a), PathSeg::Index(ix)) => {
            if rest.is_empty() && *ix == a.len() {
                a.push(Value::Null);
            }
            a.get_mut(*ix)?
        }
        _ => return None,
    };
    slot(next, rest)
}

/// Applies edits to a value (what the JS layer does; used by tests).
pub fn apply(root: &mut Value, edits: &[Edit]) {
    for e in edits {
        match e {
            Edit::Set { path, value, .. } => {
                if let Some(s) = slot(root, path) {
                    *s = value.clone();
                }
            }
            Edit::Append { path, text } => {
                if let Some(Value::String(s)) = slot(root, path) {
                    s.push_str(text);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn preview(pieces: &[&str]) -> (Value, Vec<Vec<Edit>>) {
        let mut p = PartialJson::new();
        let mut v = Value::Null;
        let mut all = Vec::new();
        for piece in pieces {
            let e = p.feed(piece);
            apply(&mut v, &e);
            all.push(e);
        }
        (v, all)
    }

    #[test]
    fn previews_grow_with_the_stream() {
        let (v, edits) =
            preview(&["{\"city\": \"Par", "is\", \"days\": [1, 2", "3, 4], \"ok\": tr", "ue, \"n\": -1.5e2}"]);
        assert_eq!(v, json!({"city": "Paris", "days": [1, 23, 4], "ok": true, "n": -150.0}));
        // After the first piece the string is there, cut mid-way.
        let mut first = Value::Null;
        apply(&mut first, &edits[0]);
        assert_eq!(first, json!({"city": "Par"}));
        let mut second = first.clone();
        apply(&mut second, &edits[1]);
        assert_eq!(second, json!({"city": "Paris", "days": [1, 2]}), "a short partial number is shown");
    }

    #[test]
    fn escapes_across_pieces_and_failure() {
        let (v, _) = preview(&["[\"a\\", "n\\u00", "e9\\ud83d", "\\ude00\", {\"k\\\"ey\": null}, 1e400, 2E5]"]);
        assert_eq!(v, json!(["a\né😀", {"k\"ey": null}, null, 200000.0]));
        let mut p = PartialJson::new();
        assert!(!p.feed("{\"a\": 1").is_empty());
        let e = p.feed("}}");
        assert!(p.failed(), "a second close is not JSON");
        assert_eq!(
            e,
            vec![Edit::Set { path: vec![PathSeg::Key("a".into())], value: json!(1), number: None }],
            "what came before it counts"
        );
        assert!(p.feed("more").is_empty());
        let mut q = PartialJson::new();
        assert!(q.feed("{\"a\": tru").iter().all(|e| !matches!(e, Edit::Set { value: Value::Bool(_), .. })));
        assert!(q.feed("x").is_empty() && q.failed());
    }
}
