//! A strict, allocation-free JSON scanner: what the fast paths of the decoders read the
//! commonest events with (each provider's matcher is beside its decoder), and the check
//! [`accepts_json`]. It answers only for input it reads by the same rules serde_json applies;
//! anything else is left to serde_json.

/// Key comparison without a call: under opt-level "z" `==` on strings is a call to `eq` and
/// then to `memcmp` for every arm a key is tried against; most differ in length at once.
pub(crate) trait Is {
    fn is(&self, lit: &str) -> bool;
    /// One of `lits` (the members that send an event to the general path).
    // Each scanner below is used by some wire formats only; a build without them (cargo
    // features) does not call it.
    #[cfg_attr(not(any(feature = "openai", feature = "responses", feature = "gemini")), allow(dead_code))]
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
pub(crate) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
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

/// [`same_bytes`], eight bytes a step: for a shape's fixed bytes, which run to a hundred and more
/// an event, and a chunk's id (not inlined, unlike `same_bytes`, which every key comparison
/// inlines).
pub(crate) fn same_long_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while let (Some(&[a0, a1, a2, a3, a4, a5, a6, a7]), Some(&[b0, b1, b2, b3, b4, b5, b6, b7])) =
        (a.get(i..i + 8), b.get(i..i + 8))
    {
        // Byte by byte: under opt-level "z" a copy into an array is a call per word.
        if u64::from_le_bytes([a0, a1, a2, a3, a4, a5, a6, a7]) != u64::from_le_bytes([b0, b1, b2, b3, b4, b5, b6, b7])
        {
            return false;
        }
        i += 8;
    }
    while let (Some(x), Some(y)) = (a.get(i), b.get(i)) {
        if x != y {
            return false;
        }
        i += 1;
    }
    true
}

pub(crate) struct Scan<'a> {
    /// The event's data: valid UTF-8 already, so a slice between two ASCII quotes is a `str`
    /// by a boundary check, never a second validation.
    pub(crate) s: &'a str,
    pub(crate) b: &'a [u8],
    pub(crate) i: usize,
}

pub(crate) type R<T> = Option<T>;

impl<'a> Scan<'a> {
    #[inline(always)]
    pub(crate) fn ws(&mut self) {
        self.i = skip_ws(self.b, self.i);
    }

    #[inline(always)]
    pub(crate) fn eat(&mut self, c: u8) -> R<()> {
        self.ws();
        if matches!(self.b.get(self.i), Some(&x) if x == c) {
            self.i += 1;
            Some(())
        } else {
            None
        }
    }

    #[inline(always)]
    pub(crate) fn peek(&mut self) -> R<u8> {
        self.ws();
        self.b.get(self.i).copied()
    }

    /// A string without escapes or control characters, borrowed. (Escapes send the chunk to
    /// the general path, except in the content, see [`Scan::content`].)
    #[inline(always)]
    pub(crate) fn plain_str(&mut self) -> R<&'a str> {
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

    /// The content string: copied when plain; with escapes, decoded as it is read
    /// ([`unescape_at`]).
    pub(crate) fn content(&mut self) -> R<String> {
        self.content_of(false)
    }

    /// [`Scan::content`]; `raw`: read from the bytes as the stream sent them (`s` unused), the
    /// string's own bytes checked as UTF-8, and an escape that may be half of a surrogate pair is
    /// `None` (the stream's surrogate joiner reads those events). One pass: the runs between
    /// escapes are found eight bytes a step and copied, each escape decoded where it is met.
    fn content_of(&mut self, raw: bool) -> R<String> {
        self.ws();
        if !matches!(self.b.get(self.i), Some(b'"')) {
            return None;
        }
        let b = self.b;
        let start = self.i + 1;
        let mut i = stop_byte(b, start)?;
        // A plain string (most text deltas): copied as it is.
        if b.get(i) == Some(&b'"') {
            let text = if raw { std::str::from_utf8(b.get(start..i)?).ok()? } else { self.s.get(start..i)? };
            self.i = i + 1;
            return Some(text.to_owned());
        }
        let mut out = Vec::with_capacity(i - start + 16);
        let mut run = start;
        loop {
            match b.get(i)? {
                b'"' => break,
                b'\\' => {
                    out.extend_from_slice(b.get(run..i)?);
                    i = unescape_at(b, i, raw, &mut out)?;
                    run = i;
                }
                _ => return None,
            }
            i = stop_byte(b, i)?;
        }
        out.extend_from_slice(b.get(run..i)?);
        self.i = i + 1;
        // An escape gives whole characters: the text is UTF-8 when its own bytes are (they always
        // are unless `raw`: they came from a `str`).
        String::from_utf8(out).ok()
    }

    /// `word` (`null`, or a number as the stream writes it), not run on into letters or digits.
    #[cfg_attr(not(feature = "openai"), allow(dead_code))]
    #[inline(always)]
    pub(crate) fn literal(&mut self, word: &[u8]) -> R<()> {
        self.ws();
        self.i = literal_end(self.b, self.i, word)?;
        Some(())
    }

    pub(crate) fn digits(&mut self) -> usize {
        let start = self.i;
        while self.b.get(self.i).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
        }
        self.i - start
    }

    /// The integer part of a number: `0`, or up to 15 digits not starting with `0` (longer
    /// ones could overflow or round differently: left to serde).
    pub(crate) fn int_part(&mut self) -> R<()> {
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

    /// A non-negative integer that fits a u64 comfortably (what `Option<u64>` accepts).
    pub(crate) fn uint(&mut self) -> R<()> {
        self.ws();
        self.int_part()?;
        (!matches!(self.b.get(self.i), Some(b'.' | b'e' | b'E'))).then_some(())
    }

    /// An unsigned integer of at most 15 digits, and its value.
    #[cfg_attr(not(any(feature = "openai", feature = "anthropic")), allow(dead_code))]
    pub(crate) fn uint_value(&mut self) -> R<u64> {
        self.ws();
        let start = self.i;
        self.uint()?;
        // At most 15 digits, checked by `uint`: the value fits, and is read without `str::parse`.
        Some(self.b.get(start..self.i)?.iter().fold(0, |v, d| v * 10 + u64::from(d - b'0')))
    }

    /// Skips any value, strictly ([`value_end`]); strings with escapes are not read here (→ `None`).
    pub(crate) fn skip(&mut self) -> R<()> {
        self.i = value_end(self.b, self.i, false)?;
        Some(())
    }

    /// An object whose one member is `key`, a string: `{"text": "…"}`; where the string lies
    /// (quotes included) in `span`.
    #[cfg_attr(not(feature = "gemini"), allow(dead_code))]
    pub(crate) fn sole_string_at(&mut self, key: &str, span: &mut Option<(usize, usize)>) -> R<String> {
        let mut value = None;
        self.object(|s, k| match () {
            _ if k.is(key) && value.is_none() => {
                s.ws();
                let at = s.i;
                value = Some(s.content()?);
                *span = Some((at, s.i));
                Some(())
            }
            _ => None,
        })?;
        value
    }

    /// Members of an object, each handed to `f(self, key)`.
    pub(crate) fn object(&mut self, mut f: impl FnMut(&mut Self, &'a str) -> R<()>) -> R<()> {
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

/// True when `text` is one JSON value, checked by the scanner: strings with any escapes,
/// objects with plain keys, numbers of at most 15 integer digits without an exponent, up to 32
/// levels. False says only that the scanner could not tell (serde_json then decides): a call's
/// arguments are checked this way at a few bytes a nanosecond, where serde_json's own check took
/// tens of microseconds per 4 KB under opt-level "z". Read by `value_end`, as `Scan::skip`
/// reads, string escapes besides.
pub fn accepts_json(text: &str) -> bool {
    #[cfg(test)]
    ACCEPTS_JSON_CALLS.with(|n| n.set(n.get() + 1));
    let b = text.as_bytes();
    matches!(value_end(b, 0, true), Some(end) if skip_ws(b, end) == b.len())
}

/// Where the JSON value at `b[i]` (after any whitespace) ends: strings (with escapes when
/// `escapes`, else none), objects with plain keys, numbers of at most 15 integer digits without
/// an exponent, `null`, `true`, `false`, up to 32 levels; `None` for anything else. One loop with
/// the open containers as bits: arguments are mostly short tokens, and the recursive scan with a
/// closure per member this replaced cost ~19 native instructions a byte on the bench's 4 KB
/// arguments (78.9k per check), this ~13 (53.7k).
fn value_end(b: &[u8], mut i: usize, escapes: bool) -> Option<usize> {
    // The open containers, innermost in the lowest bit: 1 for an object, 0 for an array.
    let mut objects: u64 = 0;
    let mut depth = 0u32;
    'value: loop {
        i = skip_ws(b, i);
        if depth > 32 {
            return None;
        }
        i = match b.get(i)? {
            &open @ (b'{' | b'[') => {
                i = skip_ws(b, i + 1);
                // `}` and `]` are two past `{` and `[`.
                if b.get(i) == Some(&(open + 2)) {
                    i + 1
                } else {
                    let object = open == b'{';
                    depth += 1;
                    objects = objects << 1 | u64::from(object);
                    if object {
                        i = key_end(b, i)?;
                    }
                    continue 'value;
                }
            }
            b'"' => string_end(b, i + 1, escapes)?,
            b'n' => literal_end(b, i, b"null")?,
            b't' => literal_end(b, i, b"true")?,
            b'f' => literal_end(b, i, b"false")?,
            _ => number_end(b, i)?,
        };
        // After a value: a separator, or the end of its container (and maybe of those around it).
        loop {
            if depth == 0 {
                return Some(i);
            }
            i = skip_ws(b, i);
            let object = objects & 1 == 1;
            match b.get(i)? {
                b',' if object => {
                    i = key_end(b, skip_ws(b, i + 1))?;
                    continue 'value;
                }
                b',' => {
                    i += 1;
                    continue 'value;
                }
                b'}' if object => {}
                b']' if !object => {}
                _ => return None,
            }
            i += 1;
            depth -= 1;
            objects >>= 1;
        }
    }
}

#[inline(always)]
fn skip_ws(b: &[u8], mut i: usize) -> usize {
    if matches!(b.get(i), Some(&c) if c > b' ') {
        return i;
    }
    while matches!(b.get(i), Some(b' ' | b'\n' | b'\r' | b'\t')) {
        i += 1;
    }
    i
}

/// A plain key at `b[i]` (no escapes, as [`Scan::plain_str`] reads keys), its colon and the
/// space around it: where its value begins.
#[inline(always)]
fn key_end(b: &[u8], i: usize) -> Option<usize> {
    if b.get(i) != Some(&b'"') {
        return None;
    }
    let end = stop_byte(b, i + 1)?;
    if b.get(end) != Some(&b'"') {
        return None;
    }
    let colon = skip_ws(b, end + 1);
    (b.get(colon) == Some(&b':')).then_some(colon + 1)
}

/// The end of a string whose content begins at `b[i]`; with `escapes`, any escapes serde_json
/// takes (`\u` with four hex digits, unchecked for surrogates as serde_json leaves them when it
/// ignores a string), without, none.
fn string_end(b: &[u8], mut i: usize, escapes: bool) -> Option<usize> {
    loop {
        i = stop_byte(b, i)?;
        match b.get(i)? {
            b'"' => return Some(i + 1),
            b'\\' if escapes => match b.get(i + 1)? {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
                b'u' => {
                    hex4(b, i + 2)?;
                    i += 6;
                }
                _ => return None,
            },
            _ => return None,
        }
    }
}

/// The end of `word` at `b[i]`, not run on into letters or digits (`nullx` is not `null`).
#[inline(always)]
fn literal_end(b: &[u8], i: usize, word: &[u8]) -> Option<usize> {
    let end = i + word.len();
    if !same_bytes(b.get(i..end)?, word) || matches!(b.get(end), Some(b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9')) {
        return None;
    }
    Some(end)
}

/// The end of a number at `b[i]`: JSON's grammar without an exponent, at most 15 integer digits
/// (longer ones could overflow or round differently: left to serde_json).
fn number_end(b: &[u8], mut i: usize) -> Option<usize> {
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    match b.get(i)? {
        b'0' => i += 1,
        b'1'..=b'9' => {
            let start = i;
            while matches!(b.get(i), Some(b'0'..=b'9')) {
                i += 1;
            }
            if i - start > 15 {
                return None;
            }
        }
        _ => return None,
    }
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        i = start;
        while matches!(b.get(i), Some(b'0'..=b'9')) {
            i += 1;
        }
        if i == start {
            return None;
        }
    }
    (!matches!(b.get(i), Some(b'e' | b'E'))).then_some(i)
}

#[cfg(test)]
thread_local! {
    /// How many times [`accepts_json`] ran on this thread (the unit tests count checks with it).
    pub(crate) static ACCEPTS_JSON_CALLS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// What a hole of a learned [`Shape`] holds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) enum Hole {
    /// The string the event carries (a text delta, a fragment of a call's arguments): read and
    /// decoded as [`Scan::content`] reads it. Its span includes the quotes.
    #[default]
    Text,
    /// An unsigned integer of at most 15 digits (an index, a sequence number), as
    /// [`Scan::uint_value`] reads it.
    Uint,
    /// A string without escapes that changes with every event and means nothing (padding), as
    /// [`Scan::plain_str`] skips it. Its span includes the quotes.
    #[cfg_attr(not(any(feature = "openai", feature = "responses")), allow(dead_code))]
    Pad,
    /// An object that may change from event to event (Gemini's running `usageMetadata`), skipped
    /// as [`Scan::skip`] skips it; its span is handed back for its reader to compare or read.
    #[cfg_attr(not(feature = "gemini"), allow(dead_code))]
    Object,
}

/// Where an event's holes lie, in order: `(start, end, hole)` byte ranges.
#[cfg_attr(not(any(feature = "anthropic", feature = "responses", feature = "gemini")), allow(dead_code))]
pub(crate) type HoleSpans = Vec<(usize, usize, Hole)>;

/// At most this many holes in a shape, and this many of them [`Hole::Uint`]s.
const MAX_HOLES: usize = 4;
const MAX_UINTS: usize = 2;

/// What [`Shape::read`] found in an event's holes: the first [`Hole::Text`], the
/// [`Hole::Uint`]s in the order they come, and where the first [`Hole::Object`] lies.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Filled {
    pub text: Option<String>,
    pub uints: [Option<u64>; MAX_UINTS],
    #[cfg_attr(not(feature = "gemini"), allow(dead_code))]
    pub object: Option<(usize, usize)>,
}

/// One event's bytes around its holes, learned from an event a wire format's own scanner read: a
/// stream repeats the same metadata in every event (ids, types, indices, nulls), so an event that
/// has exactly these fixed bytes, with a value of the same kind in each hole, is the same event to
/// that scanner, which decides nothing by what a hole holds. It is read by comparing bytes and
/// reading the holes, not by a second scan; anything else is `None` (the format's scanner then
/// reads it, and the shape may be learned again).
#[derive(Debug, Default)]
pub(crate) struct Shape {
    /// Every fixed byte, in order.
    fixed: String,
    /// Each hole, after how many of `fixed`'s bytes; the rest of `fixed` follows the last.
    holes: [(usize, Hole); MAX_HOLES],
    n: usize,
    known: bool,
    /// Shapes learned and never matched since the last match: a stream whose events differ
    /// elsewhere (a changing field the format's scanner does not name) stops the learning.
    misses: u8,
    /// [`Shape::read_raw`] may read events: no backslash or line end in the fixed bytes, no
    /// object hole.
    raw_ok: bool,
}

/// A shape is learned only while its fixed bytes stay this small.
const SHAPE_MAX: usize = 2048;

impl Shape {
    /// The holes of `data` when `data` has this shape.
    pub(crate) fn read(&mut self, data: &str) -> Option<Filled> {
        let (filled, _) = self.read_in(data, data.as_bytes(), false, &|n| (n == data.len()).then_some(n))?;
        Some(filled)
    }

    /// [`Shape::read`] of the event a `data:` line starts, its bytes as the stream sent them
    /// (before they were checked as UTF-8 or had their surrogate escapes joined, and before the
    /// end of their line was looked for): the holes found and how many bytes the event takes,
    /// when it has this shape and ends right after
    /// ([`crate::engine::sse::RawEvent::ends_at`]). The fixed bytes are the learned event's
    /// (UTF-8 already, on one line) and each hole is checked as it is read (strings end at a
    /// control character), so no line end lies inside. `None` (the event then goes the way every
    /// event goes) also for a hole that is not UTF-8, an escape that may be half of a surrogate
    /// pair, and a shape whose fixed bytes hold a backslash or that has an object hole.
    #[cfg_attr(not(any(feature = "openai", feature = "anthropic", feature = "responses")), allow(dead_code))]
    pub(crate) fn read_raw(&mut self, ev: &crate::engine::sse::RawEvent) -> Option<(Filled, usize)> {
        if !self.raw_ok {
            return None;
        }
        self.read_in("", ev.bytes(), true, &|n| ev.ends_at(n))
    }

    /// The holes of the event at the start of `b` and `ends(n)`, how many bytes the event takes
    /// when its data ends after `n` bytes (`None`: it does not end there); `raw`: `b` is as the
    /// stream sent it, not known to be UTF-8 (`text`, the same as a `str`, only for an object
    /// hole).
    fn read_in(
        &mut self,
        text: &str,
        b: &[u8],
        raw: bool,
        ends: &dyn Fn(usize) -> Option<usize>,
    ) -> Option<(Filled, usize)> {
        if !self.known {
            return None;
        }
        let f = self.fixed.as_bytes();
        let mut s = Scan { s: text, b, i: 0 };
        let (mut at, mut filled, mut u) = (0, Filled::default(), 0);
        // The fixed bytes before a hole, then the hole.
        let fixed = |s: &mut Scan, lit: &[u8]| {
            let ok = same_long_bytes(s.b.get(s.i..s.i + lit.len())?, lit);
            s.i += lit.len();
            ok.then_some(())
        };
        for &(end, hole) in &self.holes[..self.n] {
            fixed(&mut s, f.get(at..end)?)?;
            at = end;
            // The whitespace a hole's reader skips must not run over a line's end: the bytes
            // after it are not this line's.
            if raw && b.get(s.i..)?.iter().take_while(|c| c.is_ascii_whitespace()).any(|&c| c == b'\n' || c == b'\r') {
                return None;
            }
            match hole {
                Hole::Text => {
                    let t = s.content_of(raw)?;
                    filled.text.get_or_insert(t);
                }
                Hole::Uint => {
                    *filled.uints.get_mut(u)? = Some(s.uint_value()?);
                    u += 1;
                }
                // A string without escapes (as `plain_str`), checked as UTF-8.
                Hole::Pad => {
                    s.eat(b'"')?;
                    let start = s.i;
                    s.i = stop_byte(b, start)?;
                    if b.get(s.i) != Some(&b'"') {
                        return None;
                    }
                    std::str::from_utf8(b.get(start..s.i)?).ok()?;
                    s.i += 1;
                }
                Hole::Object => {
                    let at = s.i;
                    if s.b.get(at) != Some(&b'{') {
                        return None;
                    }
                    s.skip()?;
                    filled.object.get_or_insert((at, s.i));
                }
            }
        }
        fixed(&mut s, f.get(at..)?)?;
        let used = ends(s.i)?;
        self.misses = 0;
        Some((filled, used))
    }

    /// Learns the shape of `data`, which a format's scanner read, from the spans of its holes
    /// (in order, not overlapping). Nothing is learned from spans out of order, from more holes
    /// than a shape keeps, from fixed bytes past `SHAPE_MAX`, or after eight shapes in a row
    /// were learned and never matched.
    pub(crate) fn learn(&mut self, data: &str, spans: &[(usize, usize, Hole)]) {
        self.unlearn();
        let holes = spans.iter().filter(|(_, _, h)| *h == Hole::Uint).count();
        if self.misses >= 8 || spans.len() > MAX_HOLES || holes > MAX_UINTS {
            return;
        }
        let hole_bytes: usize = spans.iter().map(|(a, z, _)| z.saturating_sub(*a)).sum();
        if data.len().saturating_sub(hole_bytes) > SHAPE_MAX {
            return;
        }
        self.fixed.clear();
        let mut at = 0;
        for (k, &(a, z, hole)) in spans.iter().enumerate() {
            let Some(piece) = data.get(at..a).filter(|_| a < z) else { return };
            self.fixed.push_str(piece);
            self.holes[k] = (self.fixed.len(), hole);
            at = z;
        }
        let Some(rest) = data.get(at..) else { return };
        self.fixed.push_str(rest);
        self.n = spans.len();
        self.known = true;
        // (Fixed bytes with a line end were learned from an event of several `data:` lines.)
        self.raw_ok = !self.fixed.contains(['\\', '\n', '\r']) && spans.iter().all(|&(_, _, h)| h != Hole::Object);
    }

    /// Forgets the shape: an event the format's scanner read but that gives no shape to learn.
    pub(crate) fn unlearn(&mut self) {
        if self.known {
            // The last shape did not match this event.
            self.misses = self.misses.saturating_add(1);
        }
        self.known = false;
    }

    /// A shape is known (it was learned, and not forgotten since).
    #[cfg(test)]
    pub(crate) fn known(&self) -> bool {
        self.known
    }
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
pub(crate) fn hex4(b: &[u8], i: usize) -> Option<u32> {
    let digits = b.get(i..i + 4)?;
    let mut v = 0;
    for &d in digits {
        v = v * 16 + (d as char).to_digit(16)?;
    }
    Some(v)
}

/// The escape at `b[i]` (a backslash) decoded onto `out`; where the bytes after it begin.
/// Anything serde_json might read differently (an unknown escape, a lone surrogate) is `None`:
/// the general path decides those.
/// `raw`: also `None` for a `\u` escape whose first digit is `d`/`D` (it may be half of a
/// surrogate pair, which the stream's surrogate joiner reads: see
/// [`crate::engine::surrogates::may_hold_surrogate`]).
fn unescape_at(b: &[u8], i: usize, raw: bool, out: &mut Vec<u8>) -> Option<usize> {
    let (c, len) = match *b.get(i + 1)? {
        b'"' => ('"', 2),
        b'\\' => ('\\', 2),
        b'/' => ('/', 2),
        b'b' => ('\u{8}', 2),
        b'f' => ('\u{c}', 2),
        b'n' => ('\n', 2),
        b'r' => ('\r', 2),
        b't' => ('\t', 2),
        b'u' => {
            let hi = hex4(b, i + 2)?;
            if raw && hi >> 12 == 0xD {
                return None;
            }
            match hi {
                0xD800..=0xDBFF => {
                    if b.get(i + 6..i + 8)? != b"\\u" {
                        return None;
                    }
                    let lo = hex4(b, i + 8)?;
                    if !(0xDC00..=0xDFFF).contains(&lo) {
                        return None;
                    }
                    (char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))?, 12)
                }
                0xDC00..=0xDFFF => return None,
                _ => (char::from_u32(hi)?, 6),
            }
        }
        _ => return None,
    };
    // One byte as a byte (a tool's arguments have a `\"` every few characters).
    if c.is_ascii() {
        out.push(c as u8);
    } else {
        out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
    }
    Some(i + len)
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// Where a value ends by the rules `value_end` reads by, written the plain recursive way (as
    /// `Scan::skip` was before): the oracle for the loop.
    fn reference_end(b: &[u8], i: usize, depth: usize, escapes: bool) -> Option<usize> {
        let ws = |mut i: usize| {
            while matches!(b.get(i), Some(b' ' | b'\n' | b'\r' | b'\t')) {
                i += 1;
            }
            i
        };
        // A string's end, from just after its opening quote.
        let string = |mut i: usize, escapes: bool| loop {
            match *b.get(i)? {
                b'"' => return Some(i + 1),
                b'\\' if escapes => match *b.get(i + 1)? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
                    b'u' if b.get(i + 2..i + 6)?.iter().all(u8::is_ascii_hexdigit) => i += 6,
                    _ => return None,
                },
                c if c < 0x20 || c == b'\\' => return None,
                _ => i += 1,
            }
        };
        if depth > 32 {
            return None;
        }
        let i = ws(i);
        match *b.get(i)? {
            b'"' => string(i + 1, escapes),
            b'{' => {
                let mut i = ws(i + 1);
                if b.get(i) == Some(&b'}') {
                    return Some(i + 1);
                }
                loop {
                    if b.get(i) != Some(&b'"') {
                        return None;
                    }
                    i = ws(string(i + 1, false)?);
                    if b.get(i) != Some(&b':') {
                        return None;
                    }
                    i = ws(reference_end(b, i + 1, depth + 1, escapes)?);
                    match *b.get(i)? {
                        b',' => i = ws(i + 1),
                        b'}' => return Some(i + 1),
                        _ => return None,
                    }
                }
            }
            b'[' => {
                let mut i = ws(i + 1);
                if b.get(i) == Some(&b']') {
                    return Some(i + 1);
                }
                loop {
                    i = ws(reference_end(b, i, depth + 1, escapes)?);
                    match *b.get(i)? {
                        b',' => i += 1,
                        b']' => return Some(i + 1),
                        _ => return None,
                    }
                }
            }
            b'n' | b't' | b'f' => {
                let word: &[u8] = [&b"null"[..], b"true", b"false"].into_iter().find(|w| w[0] == b[i])?;
                let end = i + word.len();
                (b.get(i..end)? == word && !b.get(end).is_some_and(u8::is_ascii_alphanumeric)).then_some(end)
            }
            _ => {
                let mut j = i + usize::from(b[i] == b'-');
                let start = j;
                if b.get(j) == Some(&b'0') {
                    j += 1;
                } else {
                    while b.get(j).is_some_and(u8::is_ascii_digit) {
                        j += 1;
                    }
                    if j == start || j - start > 15 {
                        return None;
                    }
                }
                if b.get(j) == Some(&b'.') {
                    j += 1;
                    let frac = j;
                    while b.get(j).is_some_and(u8::is_ascii_digit) {
                        j += 1;
                    }
                    if j == frac {
                        return None;
                    }
                }
                (!matches!(b.get(j), Some(b'e' | b'E'))).then_some(j)
            }
        }
    }

    /// `accepts_json` and `Scan::skip` against the recursive reference on every one-byte change,
    /// insertion, deletion and cut of a few documents (escapes, depth, numbers, literals); what
    /// `accepts_json` accepts serde_json reads.
    #[test]
    fn value_end_reads_as_the_recursive_reference() {
        let whole = |text: &str, escapes: bool| {
            let b = text.as_bytes();
            matches!(reference_end(b, 0, 0, escapes), Some(end) if skip_ws(b, end) == b.len())
        };
        let docs = [
            r#"{"query":"q0","items":[{"n":0,"text":"the the","ok":true},{"n":-1.25,"t":null,"f":false}],"e":{},"a":[]}"#,
            " [ 1 , { \"a\" : [ true ] } , \"x\" ] ",
            r#"[[[[{"k":[0.5,-0,"v\"\\\/\b\f\n\r\t\u00e9"]}]]]]"#,
            "123456789012345",
        ];
        let bytes = [
            b'{', b'}', b'[', b']', b'"', b':', b',', b' ', b'\n', b'0', b'1', b'-', b'.', b'e', b'n', b't', b'a',
            b'\\', b'u', b'F', 0x01,
        ];
        let mut checked = 0;
        for doc in docs {
            let mut variants = vec![doc.to_string()];
            for i in 0..doc.len() {
                variants.push(doc[..i].to_string());
                variants.push(format!("{}{}", &doc[..i], &doc[i + 1..]));
                for &c in &bytes {
                    let mut v = doc.as_bytes().to_vec();
                    v[i] = c;
                    variants.push(String::from_utf8(v).unwrap());
                    let mut v = doc.as_bytes().to_vec();
                    v.insert(i, c);
                    variants.push(String::from_utf8(v).unwrap());
                }
            }
            for v in &variants {
                assert_eq!(accepts_json(v), whole(v, true), "{v:?}");
                if accepts_json(v) {
                    assert!(serde_json::from_str::<serde::de::IgnoredAny>(v).is_ok(), "{v:?}");
                }
                let mut s = Scan { s: v, b: v.as_bytes(), i: 0 };
                let skipped = s.skip().map(|()| s.i);
                assert_eq!(skipped, reference_end(v.as_bytes(), 0, 0, false), "{v:?}");
                checked += 1;
            }
        }
        assert!(checked > 5000);
        // Depth: a value inside 32 containers is read, inside 33 it is not; an empty container
        // counts as a value of the level it is at.
        for (open, close) in [("[", "]"), ("{\"a\":", "}")] {
            for n in [31, 32, 33] {
                for inner in ["1", "[]", "{}", "\"s\\n\""] {
                    let text = format!("{}{inner}{}", open.repeat(n), close.repeat(n));
                    assert_eq!(accepts_json(&text), n <= 32, "{n} {inner}");
                    let mut s = Scan { s: &text, b: text.as_bytes(), i: 0 };
                    assert_eq!(s.skip().is_some(), n <= 32 && !inner.contains('\\'), "{n} {inner}");
                }
            }
        }
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
    fn a_shape_reads_the_holes_of_an_event_with_the_same_fixed_bytes() {
        let data = r#"{"n":12,"t":"ab","p":"xy","z":[]}"#;
        let at = |needle: &str| {
            let a = data.find(needle).unwrap();
            (a, a + needle.len())
        };
        let ((n0, n1), (t0, t1), (p0, p1)) = (at("12"), at(r#""ab""#), at(r#""xy""#));
        let mut shape = Shape::default();
        shape.learn(data, &[(n0, n1, Hole::Uint), (t0, t1, Hole::Text), (p0, p1, Hole::Pad)]);
        assert!(shape.known());
        let read = |shape: &mut Shape, d: &str| shape.read(d);
        assert_eq!(
            read(&mut shape, r#"{"n":7,"t":"\"é\"","p":"","z":[]}"#),
            Some(Filled { text: Some("\"é\"".into()), uints: [Some(7), None], object: None })
        );
        for other in [
            r#"{"n":7,"t":"a","p":"b","z":[1]}"#,
            r#"{"n":-7,"t":"a","p":"b","z":[]}"#,
            r#"{"n":7,"t":1,"p":"b","z":[]}"#,
            r#"{"n":7,"t":"a","p":"\n","z":[]}"#,
            r#"{"n":7,"t":"a","p":"b","z":[]} "#,
            r#"{"n":7,"t":"a","p":"b","z":["#,
        ] {
            assert_eq!(read(&mut shape, other), None, "{other}");
        }
        // Spans out of order, overlapping or empty teach nothing; nor too many holes.
        for spans in [
            vec![(t0, t1, Hole::Text), (n0, n1, Hole::Uint)],
            vec![(n0, t1, Hole::Uint), (t0, t1, Hole::Text)],
            vec![(n0, n0, Hole::Uint)],
            vec![(n0, n1, Hole::Uint); 5],
        ] {
            let mut s = Shape::default();
            s.learn(data, &spans);
            assert!(!s.known(), "{spans:?}");
        }
        // Fixed bytes past the limit are not learned.
        let long = format!(r#"{{"t":"a","pad":"{}"}}"#, "x".repeat(SHAPE_MAX));
        let mut s = Shape::default();
        s.learn(&long, &[(5, 8, Hole::Text)]);
        assert!(!s.known());
    }

    #[test]
    fn unescape_reads_what_serde_json_reads() {
        // The contents of a quoted string, as the scan reads them (and the scan must end after
        // the string's closing quote).
        fn unescape(inner: &str, raw: bool) -> Option<String> {
            let text = format!("\"{inner}\" ");
            let mut s = Scan { s: &text, b: text.as_bytes(), i: 0 };
            let out = s.content_of(raw);
            assert!(out.is_none() || s.i == text.len() - 1, "{inner}");
            out
        }
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
        // Runs after an escape around the length where the loop stops going a byte at a time,
        // with an escape, a control character or a multi-byte character where the run ends.
        let mut runs = Vec::new();
        for n in [0, 1, 7, 8, 15, 16, 17, 24, 40, 300] {
            for tail in [r#"\""#, r#"\u00e9"#, "é", ""] {
                runs.push(format!(r#"a\n{}{tail}{}\t"#, "x".repeat(n), "y".repeat(n / 2)));
            }
        }
        for c in well_formed.iter().copied().chain(runs.iter().map(String::as_str)) {
            let serde = serde_json::from_str::<String>(&format!("\"{c}\"")).ok();
            assert!(serde.is_some(), "{c}");
            assert_eq!(unescape(c, false), serde, "{c}");
        }
        // What serde_json refuses (or might read its own way) is left to the general path.
        for c in [r#"\ud800"#, r#"\ude00"#, r#"\ud800\u0041"#, r#"\ud800x"#, r#"\u12"#, r#"\x"#, r#"\"#, r#"\u12g4"#] {
            assert_eq!(unescape(c, false), None, "{c}");
        }
        // A control character is refused wherever it comes after an escape.
        for n in [0, 3, 15, 16, 17, 40] {
            assert_eq!(unescape(&format!("a\\n{}\u{1}b", "x".repeat(n)), false), None, "{n}");
        }
        assert_eq!(unescape(r#"\ud83d\ude00"#, false).as_deref(), Some("😀"));
        // Read from the stream's bytes, an escape that may be half of a pair is the joiner's.
        for c in [r#"\ud83d\ude00"#, r#"a\uD800"#, r#"\ud000"#, r#"\uDfff"#] {
            assert_eq!(unescape(c, true), None, "{c}");
        }
        assert_eq!(unescape(r#"\\ud83d \u00e9\uc000"#, true).as_deref(), Some("\\ud83d é\u{c000}"));
    }
}
