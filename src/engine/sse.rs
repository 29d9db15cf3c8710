//! An incremental Server-Sent Events decoder: bytes in, events out.
//!
//! It follows the WHATWG `text/event-stream` parsing rules and gives the same events for any
//! split of the input into chunks: lines end in LF, CRLF or CR (a CR at the end of a chunk
//! waits to see whether an LF follows), a line is decoded as UTF-8 only once it is complete
//! (so a chunk boundary inside a multi-byte character is harmless), a leading BOM is skipped,
//! `:` lines are comments, `data:` lines join with `\n`, and `event:`/`id:` are kept.
//! Unlike a browser's `EventSource`, [`SseDecoder::finish`] also delivers a final event that
//! the stream ended without a blank line after: for a model's answer that event is data.
//!
//! Work is linear in the bytes fed: each byte is scanned once and copied at most once.

/// One dispatched event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, if the event had one (the spec's default type is `message`). Shared
    /// with the events before it of the same name: a stream that names every event (Anthropic,
    /// Responses) allocates no name per event.
    pub event: Option<std::rc::Rc<str>>,
    pub data: String,
    /// The last `id:` seen so far in the stream.
    /// The last event id, shared by every event after it (an id is not copied per event: a
    /// long id followed by many events stays linear).
    pub id: Option<std::rc::Rc<str>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SseError {
    /// One event's data grew past the decoder's limit.
    EventTooLarge { limit: usize },
}

impl std::fmt::Display for SseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SseError::EventTooLarge { limit } => {
                write!(f, "a Server-Sent Event exceeded the limit of {limit} bytes")
            }
        }
    }
}

/// What [`SseDecoder::feed_with`] offers a `data:` line to: the events decoded before it (to
/// take first), and the line; how many bytes of [`RawEvent::bytes`] it took, when it took them.
pub type RawEvents<'a> = dyn FnMut(&mut Vec<SseEvent>, &RawEvent) -> Option<usize> + 'a;

/// The bytes of a chunk from a `data:` line's value on, not yet searched for the line's end: a
/// reader that reads a value from their start (by a learned shape, which meets no line end in a
/// value it takes) asks [`RawEvent::ends_at`] whether the event ends right after it.
pub struct RawEvent<'a> {
    rest: &'a [u8],
    max: usize,
}

impl<'a> RawEvent<'a> {
    /// `rest`: the bytes from the value on; `max`: the limit on one event's data.
    pub fn new(rest: &'a [u8], max: usize) -> Self {
        RawEvent { rest, max }
    }

    pub fn bytes(&self) -> &'a [u8] {
        self.rest
    }

    /// How many bytes the event takes when a value of `n` bytes is all its data: the value, its
    /// line end and the blank line right after it (`\n\n` or `\r\n\r\n`), both in this chunk,
    /// and the value within the limit. `None`: the event is to be decoded line by line.
    pub fn ends_at(&self, n: usize) -> Option<usize> {
        if n + 1 > self.max {
            return None;
        }
        let after = self.rest.get(n..)?;
        let end = [&b"\n\n"[..], b"\r\n\r\n"].into_iter().find(|e| after.starts_with(e))?;
        Some(n + end.len())
    }
}

/// Default cap on one event's size (the `maxEventBytes` limit's default): far beyond any real
/// model event, well short of an OOM.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 16 << 20;

#[derive(Debug)]
pub struct SseDecoder {
    /// Bytes of a line that has not ended yet.
    line: Vec<u8>,
    /// The previous chunk ended in CR: an LF at the start of the next one is part of it.
    after_cr: bool,
    /// How many bytes of the stream's start were checked for a BOM (0..=3), or 3 when done.
    bom_checked: usize,
    data: String,
    has_data: bool,
    event: Option<std::rc::Rc<str>>,
    /// The last `event:` name seen, handed out again while the stream repeats it.
    last_event: Option<std::rc::Rc<str>>,
    last_id: Option<std::rc::Rc<str>>,
    max_event_bytes: usize,
    /// Data buffers of delivered events, given back by [`SseDecoder::give_back`] for the next
    /// events: a stream of many small events allocates none per event.
    spare: Vec<String>,
}

impl Default for SseDecoder {
    fn default() -> Self {
        Self::new()
    }
}

const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];

impl SseDecoder {
    pub fn new() -> Self {
        Self::with_limit(DEFAULT_MAX_EVENT_BYTES)
    }

    pub fn with_limit(max_event_bytes: usize) -> Self {
        SseDecoder {
            line: Vec::new(),
            after_cr: false,
            bom_checked: 0,
            data: String::new(),
            has_data: false,
            event: None,
            last_event: None,
            last_id: None,
            max_event_bytes,
            spare: Vec::new(),
        }
    }

    /// Feeds one chunk; complete events are appended to `out`.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        self.feed_with(chunk, out, None)
    }

    /// [`SseDecoder::feed`], offering `raw` (when given) first each `data:` line that starts an
    /// event in this chunk, or follows the `event:` line that starts it (see [`RawEvent`]), with
    /// the events decoded before it in `out` (for `raw` to take them first, so events keep their
    /// order). An event `raw` took is not decoded or delivered; its `event:` name is dropped (its
    /// line not even read) and the last event id stays, as a delivered event would leave them.
    pub fn feed_with(
        &mut self,
        mut chunk: &[u8],
        out: &mut Vec<SseEvent>,
        mut raw: Option<&mut RawEvents>,
    ) -> Result<(), SseError> {
        // A BOM may itself be split across chunks: hold its bytes in `line` until decided.
        while self.bom_checked < 3 && !chunk.is_empty() {
            if chunk[0] == BOM[self.bom_checked] {
                self.line.push(chunk[0]);
                self.bom_checked += 1;
                chunk = &chunk[1..];
                if self.bom_checked == 3 {
                    self.line.clear();
                }
            } else {
                self.bom_checked = 3; // not a BOM: what was held is ordinary line content
            }
        }
        if self.bom_checked < 3 {
            return Ok(());
        }
        if self.after_cr {
            self.after_cr = false;
            if chunk.first() == Some(&b'\n') {
                chunk = &chunk[1..];
            }
        }
        loop {
            // A `data:` line at the start of an event, whole in this chunk: offered as it is,
            // before its end is searched for.
            if let (Some(raw), true) = (raw.as_deref_mut(), self.line.is_empty() && !self.has_data) {
                // An `event:` line (LF-ended) right before it goes with it: a taken event's name
                // is dropped anyway, so the line is not read unless the data is not taken.
                let data = match chunk.strip_prefix(b"event:") {
                    Some(rest) => match crate::engine::bytes::find2(b'\n', b'\r', rest) {
                        Some(end) if rest.get(end) == Some(&b'\n') => rest.get(end + 1..).unwrap_or_default(),
                        _ => chunk,
                    },
                    None => chunk,
                };
                if let Some(value) = data.strip_prefix(b"data:") {
                    let value = value.strip_prefix(b" ").unwrap_or(value);
                    if let Some(used) = raw(out, &RawEvent::new(value, self.max_event_bytes)) {
                        self.event = None; // as the event's dispatch leaves it
                        chunk = value.get(used..).unwrap_or_default();
                        continue;
                    }
                }
            }
            let Some(pos) = crate::engine::bytes::find2(b'\n', b'\r', chunk) else { break };
            if self.line.is_empty() {
                self.process_line(&chunk[..pos], out)?;
            } else {
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(&chunk[..pos]);
                let r = self.process_line(&line, out);
                line.clear();
                self.line = line; // keep the allocation
                r?;
            }
            let was_cr = chunk[pos] == b'\r';
            chunk = &chunk[pos + 1..];
            if was_cr {
                match chunk.first() {
                    Some(b'\n') => chunk = &chunk[1..],
                    None => self.after_cr = true,
                    Some(_) => {}
                }
            }
        }
        if self.line.len() + chunk.len() > self.max_event_bytes.saturating_add(16) {
            return Err(SseError::EventTooLarge { limit: self.max_event_bytes });
        }
        self.line.extend_from_slice(chunk);
        Ok(())
    }

    /// Ends the stream: a last line without a line end is processed, and an event that was
    /// not followed by a blank line is delivered.
    pub fn finish(&mut self, out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if self.bom_checked < 3 {
            self.bom_checked = 3; // a stream of one or two BOM-like bytes: plain content
        }
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.process_line(&line, out)?;
        }
        self.dispatch(out);
        Ok(())
    }

    fn process_line(&mut self, line: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match name {
            b"data" => {
                if self.data.len() + value.len() + 1 > self.max_event_bytes {
                    return Err(SseError::EventTooLarge { limit: self.max_event_bytes });
                }
                if self.has_data {
                    self.data.push('\n');
                }
                self.has_data = true;
                match std::str::from_utf8(value) {
                    Ok(s) => self.data.push_str(s),
                    Err(_) => self.data.push_str(&String::from_utf8_lossy(value)),
                }
            }
            b"event" => {
                let same = self.last_event.as_ref().filter(|e| e.as_bytes() == value);
                let name = match same {
                    Some(e) => e.clone(),
                    None => {
                        let e: std::rc::Rc<str> = match std::str::from_utf8(value) {
                            Ok(v) => v.into(),
                            Err(_) => String::from_utf8_lossy(value).into(),
                        };
                        self.last_event = Some(e.clone());
                        e
                    }
                };
                self.event = Some(name);
            }
            b"id" if !value.contains(&0) => self.last_id = Some(String::from_utf8_lossy(value).into()),
            _ => {} // `retry` and unknown fields do not matter to a one-shot stream
        }
        Ok(())
    }

    /// Forgets what was read of a line and an event not yet complete (a new connection begins a
    /// new stream), keeping the limit and the last event id.
    pub fn reset(&mut self) {
        self.line.clear();
        self.after_cr = false;
        self.bom_checked = 0;
        self.data.clear();
        self.has_data = false;
        self.event = None;
    }

    /// Takes back a delivered event's data buffer for a later event (at most 16 are kept, none
    /// larger than 16 KiB: what a decoder holds on to stays small).
    pub fn give_back(&mut self, mut data: String) {
        if self.spare.len() < 16 && data.capacity() <= 16 * 1024 {
            data.clear();
            self.spare.push(data);
        }
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        if !self.has_data {
            self.event = None;
            return;
        }
        self.has_data = false;
        let data = std::mem::replace(&mut self.data, self.spare.pop().unwrap_or_default());
        out.push(SseEvent { event: self.event.take(), data, id: self.last_id.clone() });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_id_is_shared_by_the_events_after_it_not_copied() {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        let mut text = format!("id: {}\n", "i".repeat(1 << 20)).into_bytes();
        for _ in 0..10_000 {
            text.extend_from_slice(b"data: x\n\n");
        }
        d.feed(&text, &mut out).unwrap();
        assert_eq!(out.len(), 10_000);
        let first = out[0].id.clone().unwrap();
        assert!(out.iter().all(|e| e.id.as_ref().is_some_and(|id| std::rc::Rc::ptr_eq(id, &first))));
    }

    fn decode_chunks(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        for c in chunks {
            d.feed(c, &mut out).unwrap();
        }
        d.finish(&mut out).unwrap();
        out
    }

    fn ev(event: Option<&str>, data: &str, id: Option<&str>) -> SseEvent {
        SseEvent { event: event.map(Into::into), data: data.into(), id: id.map(Into::into) }
    }

    /// Every way of cutting `input` in two and in three gives the same events as one chunk.
    fn assert_split_invariant(input: &[u8], expected: &[SseEvent]) {
        assert_eq!(decode_chunks(&[input]), expected, "whole input");
        for i in 0..=input.len() {
            assert_eq!(decode_chunks(&[&input[..i], &input[i..]]), expected, "split at {i}");
            for j in i..=input.len() {
                let got = decode_chunks(&[&input[..i], &input[i..j], &input[j..]]);
                assert_eq!(got, expected, "split at {i},{j}");
            }
        }
        let bytes: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(decode_chunks(&bytes), expected, "byte by byte");
    }

    #[test]
    fn line_ends_comments_fields_and_multiline_data() {
        let input = "\u{FEFF}: hello comment\r\ndata: one\r\n\r\nevent: custom\rdata: two\rdata:three\r\rid: 7\ndata: é✓😀\n\ndata: last-without-blank";
        assert_split_invariant(
            input.as_bytes(),
            &[
                ev(None, "one", None),
                ev(Some("custom"), "two\nthree", None),
                ev(None, "é✓😀", Some("7")),
                ev(None, "last-without-blank", Some("7")),
            ],
        );
    }

    #[test]
    fn bom_only_at_start_and_odd_fields() {
        let input = b"data\n\ndata:  two spaces\nretry: 10\nfoo: bar\n\n\n\nevent: x\n\n";
        assert_split_invariant(input, &[ev(None, "", None), ev(None, " two spaces", None)]);
        // A stream that starts with only part of a BOM keeps those bytes as content.
        assert_eq!(decode_chunks(&[b"\xEF", b"data: x\n\n"]).len(), 0);
        assert_eq!(decode_chunks(&[b"\xEF\xBB\xBF\xEF\xBB\xBFdata: y\n\n"]), vec![]);
    }

    #[test]
    fn openai_style_stream() {
        let input = b"data: {\"a\":1}\n\ndata: {\"b\":2}\n\ndata: [DONE]\n\n";
        assert_split_invariant(
            input,
            &[ev(None, "{\"a\":1}", None), ev(None, "{\"b\":2}", None), ev(None, "[DONE]", None)],
        );
    }

    #[test]
    fn limit_is_an_error_not_an_oom() {
        let mut d = SseDecoder::with_limit(8);
        let mut out = Vec::new();
        assert!(d.feed(b"data: 0123456789\n\n", &mut out).is_err());
        let mut d = SseDecoder::with_limit(8);
        assert!(d.feed(b"data: 0123456789012345678901234567890", &mut out).is_err());
    }

    /// What the raw lane takes is gone; every other event comes out as `feed` gives it, its
    /// `event:` name kept, in order, for every cut of the stream in two: data after an LF-ended
    /// `event:` line (the line goes with a taken event, unread), after a CR-ended one and after
    /// an `id:` line between (those lines are read first), and events the lane declines.
    #[test]
    fn the_raw_lane_takes_its_events_and_their_event_lines_and_leaves_the_rest_named() {
        let input = b"event: a\ndata: take 1\n\nevent: b\ndata: keep 2\n\nevent: c\r\ndata: take 3\n\nevent: d\nid: 4\ndata: take 4\n\ndata: take 5\n\nevent: e\ndata: keep 6\n\nevent: f\n\ndata: keep 7\n\n";
        let mut all = Vec::new();
        SseDecoder::new().feed(input, &mut all).unwrap();
        for cut in 0..=input.len() {
            let mut d = SseDecoder::new();
            let (mut out, mut taken) = (Vec::new(), Vec::new());
            let mut raw = |out: &mut Vec<SseEvent>, ev: &RawEvent| {
                let b = ev.bytes();
                let n = b.iter().position(|&c| c == b'\n')?;
                let used = b.starts_with(b"take").then(|| ev.ends_at(n)).flatten()?;
                taken.push((out.len(), String::from_utf8_lossy(&b[..n]).into_owned()));
                Some(used)
            };
            d.feed_with(&input[..cut], &mut out, Some(&mut raw)).unwrap();
            d.feed_with(&input[cut..], &mut out, Some(&mut raw)).unwrap();
            d.finish(&mut out).unwrap();
            // The lane sees only events whole in one chunk; what it did not take is decoded.
            let names: Vec<&str> = taken.iter().map(|(_, t)| t.as_str()).collect();
            let expected: Vec<SseEvent> = all.iter().filter(|e| !names.contains(&e.data.as_str())).cloned().collect();
            assert_eq!(out, expected, "cut at {cut}");
            assert!(taken.iter().all(|(_, t)| t.starts_with("take")), "cut at {cut}");
            if cut == 0 || cut == input.len() {
                // Whole in one chunk: every event it would take (after a CR-ended `event:` line
                // or an `id:` line, once the decoder read those lines).
                assert_eq!(names, ["take 1", "take 3", "take 4", "take 5"], "cut at {cut}");
            }
            // Order: each taken event came after the events delivered before it.
            for (before, t) in &taken {
                let at = all.iter().position(|e| e.data == *t).unwrap();
                let delivered_before = all[..at].iter().filter(|e| !names.contains(&e.data.as_str())).count();
                assert_eq!(*before, delivered_before, "cut at {cut}: {t}");
            }
        }
    }
}
