//! Assembly of one streamed message, as kosong's `generate` does it, and the sources that
//! feed it.
//!
//! Parts merge into the part before them when they can (see [`crate::engine::message`]);
//! a tool-call fragment that names its call goes to that call wherever it is, one without a
//! name goes to the tool call right before it (or is dropped as an orphan, as in kosong).
//! Tool calls are reported complete when the *source* says so — never because their
//! arguments happen to parse — and any still open when the stream ends well complete then.

use futures::future::LocalBoxFuture;

use crate::engine::error::{ChatProviderError, FailureKind};
use crate::engine::message::{ContentPart, Message, Role, StreamedMessagePart, TokenUsage, ToolCall, ToolCallPart};
use crate::engine::providers::{StreamDecoder, StreamEvent};
use crate::engine::sse::SseDecoder;

/// Caps that keep a hostile or broken stream from exhausting memory. Going past one is an
/// error that names the limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// One Server-Sent Event's data.
    pub max_event_bytes: usize,
    /// One tool call's arguments.
    pub max_tool_arguments_bytes: usize,
    /// The whole message: text, thinking and arguments.
    pub max_message_bytes: usize,
    /// Tool calls one step starts; the calls past it are answered with an error result and
    /// never run (an answer with 100,000 calls must not start 100,000 handlers at once).
    pub max_tool_calls_per_step: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_event_bytes: crate::engine::sse::DEFAULT_MAX_EVENT_BYTES,
            max_tool_arguments_bytes: 16 << 20,
            max_message_bytes: 64 << 20,
            max_tool_calls_per_step: 256,
        }
    }
}

impl Limits {
    /// The limits' names, as the JS options spell them.
    pub const NAMES: [&'static str; 4] =
        ["maxEventBytes", "maxToolArgumentsBytes", "maxMessageBytes", "maxToolCallsPerStep"];

    /// Sets the limit `name` (`value`: a positive integer) — the one rule for the `limits` option;
    /// the error says what is wrong, for `{what}.limits`.
    pub fn set(&mut self, what: &str, name: &str, value: Option<f64>) -> Result<(), String> {
        let slot = match name {
            "maxEventBytes" => &mut self.max_event_bytes,
            "maxToolArgumentsBytes" => &mut self.max_tool_arguments_bytes,
            "maxMessageBytes" => &mut self.max_message_bytes,
            "maxToolCallsPerStep" => &mut self.max_tool_calls_per_step,
            _ => return Err(format!("{what}.limits: unknown limit `{name}` (known: {})", Self::NAMES.join(", "))),
        };
        match value {
            Some(v) if v.is_finite() && v >= 1.0 && v.fract() == 0.0 => {
                *slot = v as usize;
                Ok(())
            }
            _ => Err(format!("{what}.limits.{name} must be a positive integer")),
        }
    }
}

/// A callback's answer: nothing to wait for, or a future to await before going on.
pub type CallbackResult<E> = Result<Option<LocalBoxFuture<'static, Result<(), E>>>, E>;

/// Where a generation hands its streamed parts, in order. A sink may hold parts back and hand
/// them over at `flush`, which the generation calls before it hands on a completed tool call and
/// before it waits for more of the stream: so a caller sees a call's parts before its tool
/// starts, and sees every part as soon as the bytes that made it were decoded.
pub trait PartSink<E> {
    fn part(&mut self, p: &StreamedMessagePart) -> CallbackResult<E>;
    fn flush(&mut self) -> CallbackResult<E> {
        Ok(None)
    }
    /// Whether the sink hears [`Heard::Kept`] (a generation that has no one to tell does not ask
    /// its source).
    const HEARS_KEPT: bool = false;
    /// What became of the answer besides its parts ([`Heard`]).
    fn heard(&mut self, _news: Heard<'_>) {}
    /// Whether anyone hears each part as it came (a sink that drops them all says no, and its
    /// source may join a call's fragments and text deltas before they are parts:
    /// [`EventSource::join_parts`]).
    fn hears_each(&self) -> bool {
        true
    }
}

/// What a generation hears of its answer besides its parts.
pub enum Heard<'a> {
    /// The answer can be read again by this id after its runtime died
    /// ([`EventSource::resumable`]); told once, when it first can.
    Kept(&'a str),
    /// Its stream broke and it is read again after this sequence number.
    Reconnected(u64),
}

/// A part sink (`.0`) that also hears what becomes of the answer (`.1`).
pub struct Hearing<F, R>(pub F, pub R);

impl<E, F: FnMut(&StreamedMessagePart) -> CallbackResult<E>, R: FnMut(Heard<'_>)> PartSink<E> for Hearing<F, R> {
    fn part(&mut self, p: &StreamedMessagePart) -> CallbackResult<E> {
        (self.0)(p)
    }
    const HEARS_KEPT: bool = true;
    fn heard(&mut self, news: Heard<'_>) {
        (self.1)(news)
    }
}

/// A sink nobody listens through: it drops every part, and its source may join a call's fragments
/// and text deltas ([`PartSink::hears_each`]): a generation whose message alone is wanted.
pub struct Unheard;

impl<E> PartSink<E> for Unheard {
    fn part(&mut self, _p: &StreamedMessagePart) -> CallbackResult<E> {
        Ok(None)
    }
    fn hears_each(&self) -> bool {
        false
    }
}

/// A closure is a sink that holds nothing back.
impl<E, F: FnMut(&StreamedMessagePart) -> CallbackResult<E>> PartSink<E> for F {
    fn part(&mut self, p: &StreamedMessagePart) -> CallbackResult<E> {
        self(p)
    }
}

/// A stream of provider events, pulled a batch at a time.
#[allow(async_fn_in_trait)]
pub trait EventSource {
    type Error: From<ChatProviderError>;
    /// Appends the next batch of events to `out`; `Ok(false)` once the stream has ended well.
    async fn next_batch(&mut self, out: &mut Vec<StreamEvent>) -> Result<bool, Self::Error>;
    fn id(&self) -> Option<String>;
    fn usage(&self) -> Option<TokenUsage>;
    fn finish_reason(&self) -> Option<String>;
    fn limits(&self) -> Limits {
        Limits::default()
    }
    /// Bytes already read are still to be decoded: the next batch comes without waiting for the
    /// network, so a part sink need not hand its parts over yet.
    fn buffered(&self) -> bool {
        false
    }
    /// The answer's id when the server keeps it, and it can be read again from its start by a
    /// turn recovered after its runtime died ([`crate::engine::model::Model::reopen`]).
    fn resumable(&self) -> Option<&str> {
        None
    }
    /// Nobody hears each part: a decoder may join what the message would join anyway
    /// ([`crate::engine::providers::StreamDecoder::join_parts`]).
    fn join_parts(&mut self, _join: bool) {}
}

/// Bytes of a response body, pulled as they arrive.
#[allow(async_fn_in_trait)]
pub trait ByteSource {
    type Error: From<ChatProviderError>;
    /// Replaces `buf` with the next chunk; `Ok(false)` at the end of the body.
    async fn read_into(&mut self, buf: &mut Vec<u8>) -> Result<bool, Self::Error>;
    /// Whether a tool call is streaming: a source that gathers what has arrived into one
    /// chunk keeps chunks small then (a call's end reaches the engine, and its tool starts,
    /// without waiting for more to be read) and may make them large otherwise (fewer, cheaper
    /// reads for text).
    fn calls_streaming(&mut self, _open: bool) {}
}

/// An HTTP body of Server-Sent Events, decoded by a provider's [`StreamDecoder`].
pub struct SseEventSource<B, D: StreamDecoder> {
    body: B,
    sse: SseDecoder,
    decoder: D,
    chunk: Vec<u8>,
    /// How much of `chunk` was decoded: a large chunk is decoded a piece per call, so what a
    /// piece completes (a tool call) is handed on before the rest is decoded.
    pos: usize,
    events: Vec<crate::engine::sse::SseEvent>,
    /// The data buffers of a piece's delivered events, given back to the SSE decoder after it.
    spent: Vec<String>,
    ended: bool,
    /// An error met after some events of the same chunk: those are delivered first.
    failed: Option<ChatProviderError>,
    limits: Limits,
    /// Calls begun and not yet reported complete (see [`ByteSource::calls_streaming`]).
    open_calls: usize,
    /// Surrogate pairs split across events, joined (see [`crate::engine::surrogates`]).
    surrogates: crate::engine::surrogates::SurrogateJoiner,
    /// How the answer is read again when its stream breaks (see [`Reconnect`]), and how many
    /// times it was.
    reconnect: Option<Reconnect<B>>,
    reconnects: u32,
    /// A reconnect not yet told (the sequence number it read after).
    reconnected: Option<u64>,
    /// Stops the answer server-side (`cancel(id)`) when the source is dropped before the answer
    /// finished: an abort, a time limit, a break given up on.
    cancel: Option<Cancel>,
}

/// Stops an answer server-side by its id (see [`SseEventSource::with_reconnect`]).
pub type Cancel = Box<dyn FnOnce(&str)>;

impl<B, D: StreamDecoder> Drop for SseEventSource<B, D> {
    fn drop(&mut self) {
        if let (Some(cancel), Some((id, _))) = (self.cancel.take(), self.decoder.resume_point()) {
            cancel(id);
        }
    }
}

/// What a reconnect gave: the body of the answer read again after its last event, a failure
/// worth another try (a connection error, a 5xx), or none: the answer cannot be read again (gone,
/// refused).
pub enum Reopened<B> {
    Body(B),
    Again,
    Not,
}

/// Reads an answer again after its stream broke: `(id, after, attempt)` — the answer, the last
/// sequence number read, which try this is (from 1) — to the body of the rest.
pub type Reconnect<B> = Box<dyn FnMut(&str, u64, u32) -> futures::future::LocalBoxFuture<'static, Reopened<B>>>;

/// At most this many reconnects an answer; then the break is the answer's error.
pub const MAX_RECONNECTS: u32 = 3;

impl<B: ByteSource, D: StreamDecoder> SseEventSource<B, D> {
    pub fn new(body: B, decoder: D) -> Self {
        SseEventSource {
            body,
            sse: SseDecoder::new(),
            decoder,
            chunk: Vec::new(),
            pos: 0,
            events: Vec::new(),
            spent: Vec::new(),
            ended: false,
            failed: None,
            limits: Limits::default(),
            open_calls: 0,
            surrogates: Default::default(),
            reconnect: None,
            reconnects: 0,
            reconnected: None,
            cancel: None,
        }
    }

    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.sse = SseDecoder::with_limit(limits.max_event_bytes);
        self.limits = limits;
        self
    }

    /// Reads the answer again through `reconnect` when its stream breaks and its decoder says
    /// where it can be resumed ([`StreamDecoder::resume_point`]); stops it through `cancel` when
    /// the source is dropped before the answer finished.
    pub fn with_reconnect(mut self, reconnect: Reconnect<B>, cancel: Cancel) -> Self {
        self.reconnect = Some(reconnect);
        self.cancel = Some(cancel);
        self
    }

    /// The next chunk of the body (`Ok(false)` at its end). When the stream breaks — a read
    /// fails, or the body ends before the answer said it was finished — and the answer can be
    /// read again, the rest comes from a new connection: what was cut of the last event is
    /// dropped (the server sends it again whole), the decoder goes on as it was. When it cannot
    /// (no resume point, the budget spent, the answer gone), the break is what it was.
    async fn read_chunk(&mut self) -> Result<bool, B::Error> {
        loop {
            self.pos = 0;
            self.body.calls_streaming(self.open_calls > 0);
            let broke = match self.body.read_into(&mut self.chunk).await {
                Ok(true) => return Ok(true),
                Ok(false) => None,
                Err(e) => Some(e),
            };
            let as_it_was = |broke: Option<B::Error>| broke.map_or(Ok(false), Err);
            let Some(reconnect) = self.reconnect.as_mut() else { return as_it_was(broke) };
            let Some((id, after)) = self.decoder.resume_point().map(|(id, n)| (id.to_owned(), n)) else {
                return as_it_was(broke);
            };
            loop {
                if self.reconnects >= MAX_RECONNECTS {
                    return as_it_was(broke);
                }
                self.reconnects += 1;
                match reconnect(&id, after, self.reconnects).await {
                    Reopened::Body(body) => {
                        self.body = body;
                        self.sse.reset();
                        self.reconnected = Some(after);
                        break;
                    }
                    Reopened::Again => continue,
                    Reopened::Not => return as_it_was(broke),
                }
            }
        }
    }
}

/// About this many bytes are decoded per call (then the piece runs on to the end of its line, and
/// over a blank line right after it).
const PIECE: usize = 1 << 10;

/// The next piece of `chunk` from `pos`: up to [`PIECE`] bytes, ended at a line's end when
/// one comes soon after (and after the blank line that follows it, so an event whose end is
/// in this chunk is read in one piece). Public for the tests that place an event at a piece's start.
pub fn next_piece(chunk: &[u8], pos: usize) -> &[u8] {
    let rest = chunk.get(pos..).unwrap_or_default();
    if rest.len() <= PIECE {
        return rest;
    }
    let end = match rest.get(PIECE..).and_then(|tail| crate::engine::bytes::find(b'\n', tail)) {
        // With the blank line after it, when one follows: an event's end in the same piece.
        Some(nl) => {
            let after = rest.get(PIECE + nl + 1..).unwrap_or_default();
            PIECE + nl + 1 + [&b"\n"[..], b"\r\n"].iter().find(|b| after.starts_with(b)).map_or(0, |b| b.len())
        }
        None => rest.len(),
    };
    rest.get(..end).unwrap_or(rest)
}

/// Hands `events` to `decoder` in order, their surrogate escapes joined first (none once
/// `outcome` is an error: it is the first one's), keeping their data buffers in `spent`.
fn deliver<D: StreamDecoder>(
    decoder: &mut D,
    surrogates: &mut crate::engine::surrogates::SurrogateJoiner,
    events: &mut Vec<crate::engine::sse::SseEvent>,
    out: &mut Vec<StreamEvent>,
    outcome: &mut Result<(), ChatProviderError>,
    spent: &mut Vec<String>,
) {
    for mut ev in events.drain(..) {
        if outcome.is_ok() {
            if let std::borrow::Cow::Owned(d) = surrogates.fix(&ev.data) {
                ev.data = d;
            }
            *outcome = decoder.on_event(&ev, out);
        }
        spent.push(ev.data);
    }
}

impl<B: ByteSource, D: StreamDecoder> EventSource for SseEventSource<B, D> {
    type Error = B::Error;

    async fn next_batch(&mut self, out: &mut Vec<StreamEvent>) -> Result<bool, B::Error> {
        if let Some(e) = self.failed.take() {
            self.ended = true;
            return Err(e.into());
        }
        if self.ended {
            return Ok(false);
        }
        let more = if self.pos < self.chunk.len() { true } else { self.read_chunk().await? };
        if let Some(after) = self.reconnected.take() {
            out.push(StreamEvent::Reconnected(after));
        }
        let sse_err = |e: crate::engine::sse::SseError| ChatProviderError::failed(FailureKind::Limit, e.to_string());
        let from = out.len();
        let mut outcome = Ok(());
        let mut spent = std::mem::take(&mut self.spent);
        let (decoder, surrogates) = (&mut self.decoder, &mut self.surrogates);
        let decoded = if more {
            let piece = next_piece(&self.chunk, self.pos);
            self.pos += piece.len();
            // An event of the decoder's learned shape is read from the piece's bytes as they are
            // (its holes checked), after the events decoded before it; an event read there has no
            // surrogate escape to join, so the joiner forgets a half pair, as it does for any
            // event without one.
            let reads_raw = decoder.reads_raw();
            let mut raw = |before: &mut Vec<crate::engine::sse::SseEvent>, ev: &crate::engine::sse::RawEvent| {
                deliver(decoder, surrogates, before, out, &mut outcome, &mut spent);
                let took = if outcome.is_ok() { decoder.on_raw_data(ev, out) } else { None };
                if took.is_some() {
                    surrogates.forget();
                }
                took
            };
            let raw: Option<&mut crate::engine::sse::RawEvents> = if reads_raw { Some(&mut raw) } else { None };
            self.sse.feed_with(piece, &mut self.events, raw).map_err(sse_err)
        } else {
            self.sse.finish(&mut self.events).map_err(sse_err)
        };
        // A piece the SSE decoder failed in delivers the events it read before the failure.
        deliver(decoder, surrogates, &mut self.events, out, &mut outcome, &mut spent);
        if outcome.is_ok() {
            outcome = decoded;
        }
        for data in spent.drain(..) {
            self.sse.give_back(data);
        }
        self.spent = spent;
        for ev in out.get(from..).unwrap_or_default() {
            match ev {
                StreamEvent::Part(StreamedMessagePart::ToolCall(_)) => self.open_calls += 1,
                StreamEvent::ToolCallComplete(..) => self.open_calls = self.open_calls.saturating_sub(1),
                _ => {}
            }
        }
        if outcome.is_ok() && !more {
            outcome = self.decoder.finish(out);
        }
        match outcome {
            // What came before the error in this chunk is delivered; the error comes next.
            Err(e) if !out.is_empty() => {
                self.failed = Some(e);
                Ok(true)
            }
            Err(e) => {
                self.ended = true;
                Err(e.into())
            }
            Ok(()) => {
                self.ended = !more;
                Ok(more)
            }
        }
    }

    fn id(&self) -> Option<String> {
        self.decoder.id().map(str::to_owned)
    }
    fn usage(&self) -> Option<TokenUsage> {
        self.decoder.usage()
    }
    fn finish_reason(&self) -> Option<String> {
        self.decoder.finish_reason().map(str::to_owned)
    }
    fn limits(&self) -> Limits {
        self.limits
    }
    fn buffered(&self) -> bool {
        self.failed.is_none() && !self.ended && self.pos < self.chunk.len()
    }
    fn resumable(&self) -> Option<&str> {
        self.reconnect.as_ref().and(self.decoder.resume_point()).map(|(id, _)| id)
    }
    fn join_parts(&mut self, join: bool) {
        self.decoder.join_parts(join)
    }
}

/// A source that already holds all its events (the scripted provider).
pub struct VecEventSource<E> {
    pub events: Option<Vec<StreamEvent>>,
    pub id: Option<String>,
    pub usage: Option<TokenUsage>,
    _e: std::marker::PhantomData<E>,
}

impl<E> VecEventSource<E> {
    pub fn new(events: Vec<StreamEvent>, id: Option<String>, usage: Option<TokenUsage>) -> Self {
        VecEventSource { events: Some(events), id, usage, _e: std::marker::PhantomData }
    }
}

impl<E: From<ChatProviderError>> EventSource for VecEventSource<E> {
    type Error = E;
    async fn next_batch(&mut self, out: &mut Vec<StreamEvent>) -> Result<bool, E> {
        match self.events.take() {
            Some(ev) => {
                out.extend(ev);
                Ok(true)
            }
            None => Ok(false),
        }
    }
    fn id(&self) -> Option<String> {
        self.id.clone()
    }
    fn usage(&self) -> Option<TokenUsage> {
        self.usage
    }
    fn finish_reason(&self) -> Option<String> {
        None
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pending {
    None,
    Content,
    Call(usize),
}

/// Gives a call's id a new one when the turn used it already (`None`: the id stays). A server
/// that starts its ids again each answer (`call_1`, …) would otherwise give two calls of one
/// turn one id.
#[derive(Clone)]
pub struct Renamer(pub std::rc::Rc<RenameFn>);

/// What a [`Renamer`] calls: the server's id → the call's new id, if it needs one.
pub type RenameFn = dyn Fn(&str) -> Option<String>;

impl std::fmt::Debug for Renamer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Renamer")
    }
}

/// Builds the assistant message from streamed parts.
#[derive(Debug)]
pub struct MessageAssembler {
    content: Vec<ContentPart>,
    calls: Vec<ToolCall>,
    completed: Vec<bool>,
    /// The call completed last, when the stream's decoder found its arguments, as they are here,
    /// to parse as JSON (see [`StreamEvent::ToolCallComplete`]): it is handed on right after.
    parsed: Option<usize>,
    /// Each id's latest call: a fragment or a completion finds its call in O(1), however
    /// many calls the message has.
    by_id: std::collections::HashMap<String, usize>,
    /// The call a fragment named last (always the latest call with its id: a new call resets
    /// it): fragments mostly name the call before them, found by one comparison, not a hash.
    last_named: std::cell::Cell<usize>,
    pending: Pending,
    limits: Limits,
    bytes: usize,
    /// Fragments that came for a call already complete (dropped): `(call id, bytes)`.
    late: Vec<(String, usize)>,
    /// What this message holds of the instance's memory budget ([`crate::engine::budget`]).
    charge: crate::engine::budget::Charge,
    /// The turn's renamer (kept when the assembler starts a new message), and this message's
    /// renames: the id the server sent → the id the call has.
    renamer: Option<Renamer>,
    renames: std::collections::HashMap<String, String>,
    /// The message is a recorded answer's, read again from its start: what arrives is what
    /// [`Replay`](crate::engine::replay::Replay) leaves of it.
    replay: Option<Box<crate::engine::replay::Replay>>,
}

impl Default for MessageAssembler {
    fn default() -> Self {
        Self::new()
    }
}

fn part_bytes(p: &StreamedMessagePart) -> usize {
    match p {
        StreamedMessagePart::Content(ContentPart::Text { text, .. }) => text.len(),
        StreamedMessagePart::Content(ContentPart::Think { think, encrypted }) => {
            think.len() + encrypted.as_deref().map_or(0, str::len)
        }
        StreamedMessagePart::Content(ContentPart::ImageUrl { image_url: u })
        | StreamedMessagePart::Content(ContentPart::AudioUrl { audio_url: u })
        | StreamedMessagePart::Content(ContentPart::VideoUrl { video_url: u }) => u.url.len(),
        StreamedMessagePart::Content(ContentPart::File { file }) => file.url.len(),
        StreamedMessagePart::ToolCall(c) => {
            c.id.len() + c.function.name.len() + c.function.arguments.as_deref().map_or(0, str::len)
        }
        StreamedMessagePart::ToolCallPart(p) => p.arguments_part.as_deref().map_or(0, str::len),
    }
}

impl MessageAssembler {
    pub fn new() -> Self {
        Self::with_limits(Limits::default())
    }

    pub fn with_limits(limits: Limits) -> Self {
        MessageAssembler {
            content: Vec::new(),
            calls: Vec::new(),
            completed: Vec::new(),
            parsed: None,
            by_id: std::collections::HashMap::new(),
            last_named: std::cell::Cell::new(0),
            pending: Pending::None,
            limits,
            bytes: 0,
            late: Vec::new(),
            charge: Default::default(),
            renamer: None,
            renames: std::collections::HashMap::new(),
            replay: None,
        }
    }

    /// This message (a recorded answer's, as far as it was recorded) goes on with the same answer
    /// read again from its start: the next generation keeps it, and drops from what arrives what
    /// `replay` holds.
    pub fn read_again(&mut self, replay: crate::engine::replay::Replay) {
        self.replay = Some(Box::new(replay));
    }

    /// What of `p` a message read again does not hold yet (out of line: every generation inlines
    /// its loop, and few read an answer again).
    #[inline(never)]
    fn replayed(&mut self, p: StreamedMessagePart) -> Result<Option<StreamedMessagePart>, ChatProviderError> {
        match self.replay.as_mut() {
            Some(r) => r.part(p),
            None => Ok(Some(p)),
        }
    }

    #[inline(never)]
    fn replayed_id(&self, id: String) -> String {
        match self.replay.as_ref() {
            Some(r) => r.id(id),
            None => id,
        }
    }

    /// Whether this is a message read again that holds calls (a dead runtime may have started
    /// them: a failure of the answer read again salvages the round, never voids it).
    pub fn holds_calls_read_again(&self) -> bool {
        self.replay.is_some() && !self.calls.is_empty()
    }

    /// The calls already whole in a message read again ([`Self::read_again`]), before its answer
    /// goes on: they are handed on before anything else arrives.
    pub fn whole_before_reading_again(&self) -> Vec<ToolCall> {
        match self.replay {
            Some(_) => (0..self.calls.len()).filter(|&i| self.completed[i]).map(|i| self.calls[i].clone()).collect(),
            None => Vec::new(),
        }
    }

    /// Calls whose id the turn used already get a new one ([`Renamer`]).
    pub fn set_renamer(&mut self, renamer: Option<Renamer>) {
        self.renamer = renamer;
    }

    /// Gives the part the ids its call has: a call the renamer renames gets its new id, and so do
    /// the fragments that name it. (In place: a part is moved as little as it can be.)
    fn rename(&mut self, part: &mut StreamedMessagePart) {
        let Some(renamer) = &self.renamer else { return };
        match part {
            StreamedMessagePart::ToolCall(c) => match (renamer.0)(&c.id) {
                Some(new) => {
                    self.renames.insert(std::mem::replace(&mut c.id, new.clone()), new);
                }
                None => {
                    self.renames.remove(&c.id);
                }
            },
            StreamedMessagePart::ToolCallPart(p) => {
                if let Some(new) = p.tool_call_id.as_ref().and_then(|id| self.renames.get(id)) {
                    p.tool_call_id = Some(new.clone());
                }
            }
            StreamedMessagePart::Content(_) => {}
        }
    }

    /// The id a call the server named `id` has in this message.
    fn renamed_id(&self, id: String) -> String {
        self.renames.get(&id).cloned().unwrap_or(id)
    }

    /// The call a fragment belongs to: the one it names, else the call right before it.
    fn target_of(&self, p: &ToolCallPart) -> Option<usize> {
        match &p.tool_call_id {
            Some(id) => self.index_of(id),
            None => match self.pending {
                Pending::Call(i) => Some(i),
                _ => None,
            },
        }
    }

    /// The latest call with id `id`.
    fn index_of(&self, id: &str) -> Option<usize> {
        let last = self.last_named.get();
        if self.calls.get(last).is_some_and(|c| c.id == id) {
            return Some(last);
        }
        let i = self.by_id.get(id).copied()?;
        self.last_named.set(i);
        Some(i)
    }

    /// A fragment for a call that is already complete (its arguments were handed on): it is not
    /// added — the call keeps the arguments it ran with — and is noted (see [`Self::take_late`]).
    pub fn is_late(&mut self, part: &StreamedMessagePart) -> bool {
        let StreamedMessagePart::ToolCallPart(p) = part else { return false };
        match self.target_of(p) {
            Some(i) if self.completed.get(i).copied().unwrap_or(false) => {
                // One note for a call's late fragments that come one after another (one log line
                // for a call, not one a fragment).
                let bytes = p.arguments_part.as_deref().map_or(0, str::len);
                match self.late.last_mut() {
                    Some((id, n)) if *id == self.calls[i].id => *n += bytes,
                    _ => self.late.push((self.calls[i].id.clone(), bytes)),
                }
                true
            }
            _ => false,
        }
    }

    /// The late fragments noted so far (see [`Self::is_late`]).
    pub fn take_late(&mut self) -> Vec<(String, usize)> {
        std::mem::take(&mut self.late)
    }

    /// Adds a part, or fails when it would take the message past a limit.
    pub fn try_push(&mut self, part: StreamedMessagePart) -> Result<(), ChatProviderError> {
        let n = part_bytes(&part);
        self.charge.grow(n)?;
        self.bytes = self.bytes.saturating_add(n);
        if self.bytes > self.limits.max_message_bytes {
            return Err(ChatProviderError::failed(
                FailureKind::Limit,
                format!(
                    "the model's message exceeded the limit of {} bytes (limits.maxMessageBytes)",
                    self.limits.max_message_bytes
                ),
            ));
        }
        let len = |a: Option<&str>| a.map_or(0, str::len);
        let (args_len, target) = match &part {
            StreamedMessagePart::ToolCall(c) => (len(c.function.arguments.as_deref()), None),
            // A fragment of no call is dropped: no call's arguments grow (its bytes still count
            // toward the message's).
            StreamedMessagePart::ToolCallPart(p) => {
                let target = self.target_of(p);
                let grown =
                    |i: usize| len(self.calls[i].function.arguments.as_deref()) + len(p.arguments_part.as_deref());
                (target.map_or(0, grown), target)
            }
            StreamedMessagePart::Content(_) => (0, None),
        };
        if args_len > self.limits.max_tool_arguments_bytes {
            return Err(ChatProviderError::failed(
                FailureKind::Limit,
                format!(
                    "a tool call's arguments exceeded the limit of {} bytes (limits.maxToolArgumentsBytes)",
                    self.limits.max_tool_arguments_bytes
                ),
            ));
        }
        self.insert(part, target);
        Ok(())
    }

    /// `target`: for a fragment, the call it belongs to (from [`Self::target_of`]), found once.
    fn insert(&mut self, part: StreamedMessagePart, target: Option<usize>) {
        match part {
            StreamedMessagePart::Content(p) => {
                if self.pending == Pending::Content {
                    if let Some(last) = self.content.last_mut() {
                        if last.merge_in_place(&p) {
                            return;
                        }
                    }
                }
                self.content.push(p);
                self.pending = Pending::Content;
            }
            StreamedMessagePart::ToolCall(c) => {
                self.by_id.insert(c.id.clone(), self.calls.len());
                self.last_named.set(self.calls.len());
                self.calls.push(c);
                self.completed.push(false);
                self.pending = Pending::Call(self.calls.len() - 1);
            }
            StreamedMessagePart::ToolCallPart(p) => match target {
                Some(i) => self.calls[i].append_arguments(p.arguments_part.as_deref()),
                // An orphaned fragment: nothing to attach it to (kosong drops it too).
                None if p.tool_call_id.is_none() => self.pending = Pending::None,
                None => {}
            },
        }
    }

    /// The next content part starts a part of its own.
    pub fn boundary(&mut self) {
        if self.pending == Pending::Content {
            self.pending = Pending::None;
        }
    }

    /// Marks the call complete; its index the first time only (the call stays in the assembler,
    /// so a caller holding the assembler in a `RefCell` can lend it out without copying it).
    /// `parsed`: the decoder parsed the call's arguments when they were this many bytes long —
    /// noted when the call's are that long (a message read again is not trusted so: part of it
    /// came from the recording).
    pub fn complete(&mut self, id: &str, parsed: Option<usize>) -> Option<usize> {
        let i = self.index_of(id)?;
        if std::mem::replace(&mut self.completed[i], true) {
            return None;
        }
        let len = self.calls[i].function.arguments.as_deref().map_or(0, str::len);
        self.parsed = (self.replay.is_none() && len > 0 && parsed == Some(len)).then_some(i);
        Some(i)
    }

    /// Whether `call` (as this assembler lends it) is the call completed last, and the decoder
    /// parsed its arguments as they are.
    pub fn arguments_parsed(&self, call: &ToolCall) -> bool {
        self.parsed.and_then(|i| self.calls.get(i)).is_some_and(|c| std::ptr::eq(c, call))
    }

    /// Indices of calls not yet reported complete.
    pub fn open_calls(&self) -> Vec<usize> {
        (0..self.calls.len()).filter(|&i| !self.completed[i]).collect()
    }

    /// Whether the stream showed the call at `i` complete.
    pub fn is_complete(&self, i: usize) -> bool {
        self.completed.get(i).copied().unwrap_or(false)
    }

    pub fn call(&self, i: usize) -> &ToolCall {
        &self.calls[i]
    }

    /// Every call the stream has shown so far, complete or not, in order.
    pub fn calls(&self) -> &[ToolCall] {
        &self.calls
    }

    /// The message as far as it arrived — text, thinking, server-tool parts and every call the
    /// stream showed — for a round that broke or was aborted.
    pub fn message_so_far(&self) -> Message {
        let mut m = Message::new(Role::Assistant, self.content.clone());
        if !self.calls.is_empty() {
            m.tool_calls = Some(self.calls.clone());
        }
        m
    }

    /// Whether what arrived is an answer (kosong's rule, the one both a broken round's salvage
    /// and [`Self::check_not_empty`] apply): a call, or content beyond thinking and blank text.
    pub fn has_substance(&self) -> bool {
        !self.calls.is_empty()
            || self.content.iter().any(|p| match p {
                ContentPart::Think { .. } => false,
                ContentPart::Text { text, .. } => !text.trim().is_empty() || p.is_server_tool(),
                _ => true,
            })
    }

    pub fn into_message(self) -> Message {
        let mut m = Message::new(Role::Assistant, self.content);
        if !self.calls.is_empty() {
            m.tool_calls = Some(self.calls);
        }
        m
    }

    /// kosong's rule: an answer with nothing, or with only thinking, is an empty response.
    pub fn check_not_empty(&self) -> Result<(), ChatProviderError> {
        if self.has_substance() {
            return Ok(());
        }
        if self.content.iter().any(|p| matches!(p, ContentPart::Think { .. })) {
            return Err(ChatProviderError::EmptyResponse(
                "The API returned a response with only thinking content and no text or tool calls.".into(),
            ));
        }
        Err(ChatProviderError::EmptyResponse("The API returned an empty response.".into()))
    }
}

/// What `generate` gives back.
#[derive(Clone, Debug, PartialEq)]
pub struct GenerateOutput {
    pub id: Option<String>,
    pub message: Message,
    pub usage: Option<TokenUsage>,
    pub finish_reason: Option<String>,
    /// Fragments of arguments that came for a call already complete (handed on with the arguments
    /// it had): dropped, so the message holds what ran; `(call id, bytes)` for a log line.
    pub late_fragments: Vec<(String, usize)>,
}

/// Streams one message from `source`, calling `on_part` with every part exactly as it came
/// and `on_tool_call` with every call the moment the stream shows it complete (calls still
/// open when the stream ends well complete then, in order). A callback's future is awaited
/// before the next part; a callback's error ends the generation with that error.
pub async fn generate<S, P, FC>(source: &mut S, parts: P, on_tool_call: FC) -> Result<GenerateOutput, S::Error>
where
    S: EventSource,
    P: PartSink<S::Error>,
    FC: FnMut(&ToolCall) -> CallbackResult<S::Error>,
{
    generate_in(source, &std::cell::RefCell::new(MessageAssembler::new()), parts, on_tool_call).await
}

/// [`generate`], assembling into `asm`, which the caller keeps: when the stream fails (or the
/// future is dropped) it still holds what arrived, for a salvage or an abort to close the round.
/// `asm` is started afresh with the source's limits; it is borrowed only between awaits.
pub async fn generate_in<S, P, FC>(
    source: &mut S,
    asm: &std::cell::RefCell<MessageAssembler>,
    mut parts: P,
    mut on_tool_call: FC,
) -> Result<GenerateOutput, S::Error>
where
    S: EventSource,
    P: PartSink<S::Error>,
    FC: FnMut(&ToolCall) -> CallbackResult<S::Error>,
{
    {
        let mut a = asm.borrow_mut();
        if a.replay.is_some() {
            a.limits = source.limits();
        } else {
            let renamer = a.renamer.take();
            *a = MessageAssembler::with_limits(source.limits());
            a.renamer = renamer;
        }
        // A message read again matches its parts to those it had one by one.
        source.join_parts(!parts.hears_each() && a.replay.is_none());
    }
    let mut told = !P::HEARS_KEPT;
    let mut batch = Vec::new();
    loop {
        // A failed batch appends nothing (the events before an error in the same piece come in
        // a batch of their own first).
        let next = source.next_batch(&mut batch).await;
        // Once the answer can be read again, its id is told (a recording keeps it), before the
        // parts it covers.
        if !told {
            if let Some(id) = source.resumable() {
                parts.heard(Heard::Kept(id));
                told = true;
            }
        }
        for ev in batch.drain(..) {
            match ev {
                StreamEvent::Part(p) => {
                    let mut p = if asm.borrow().replay.is_none() {
                        p
                    } else {
                        match asm.borrow_mut().replayed(p)? {
                            Some(p) => p,
                            None => continue,
                        }
                    };
                    asm.borrow_mut().rename(&mut p);
                    // Neither the message nor the part hook (the wire) gets what a call that
                    // was handed on did not run with.
                    if matches!(p, StreamedMessagePart::ToolCallPart(_)) && asm.borrow_mut().is_late(&p) {
                        continue;
                    }
                    if let Some(f) = parts.part(&p)? {
                        f.await?;
                    }
                    asm.borrow_mut().try_push(p)?;
                }
                StreamEvent::ToolCallComplete(id, parsed) => {
                    let id = {
                        let a = asm.borrow();
                        let id = if a.replay.is_none() { id } else { a.replayed_id(id) };
                        a.renamed_id(id)
                    };
                    let done = asm.borrow_mut().complete(&id, parsed);
                    if let Some(i) = done {
                        if let Some(f) = parts.flush()? {
                            f.await?;
                        }
                        // Lent, not copied (a call's arguments may be megabytes); the borrow ends
                        // before the callback's future is awaited.
                        let waiting = on_tool_call(asm.borrow().call(i))?;
                        if let Some(f) = waiting {
                            f.await?;
                        }
                    }
                }
                StreamEvent::Boundary => asm.borrow_mut().boundary(),
                StreamEvent::Reconnected(after) => parts.heard(Heard::Reconnected(after)),
            }
        }
        // Handed over before the generation waits for more bytes, and before an error (as they
        // would have been had the error come in a later read); while a read's pieces are still
        // being decoded (a batch is one piece of a read) they are gathered: one crossing to the
        // part hook a read, not a piece.
        if next.is_err() || !source.buffered() {
            if let Some(f) = parts.flush()? {
                f.await?;
            }
        }
        if !next? {
            break;
        }
    }
    let open = asm.borrow().open_calls();
    for i in open {
        let newly = {
            let mut a = asm.borrow_mut();
            let id = a.call(i).id.clone();
            a.complete(&id, None).is_some()
        };
        if newly {
            let waiting = on_tool_call(asm.borrow().call(i))?;
            if let Some(f) = waiting {
                f.await?;
            }
        }
    }
    let mut asm = std::mem::take(&mut *asm.borrow_mut());
    asm.check_not_empty()?;
    let late_fragments = asm.take_late();
    Ok(GenerateOutput {
        id: source.id(),
        usage: source.usage(),
        finish_reason: source.finish_reason(),
        message: asm.into_message(),
        late_fragments,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frag(id: Option<&str>, s: &str) -> StreamedMessagePart {
        StreamedMessagePart::ToolCallPart(ToolCallPart {
            arguments_part: Some(s.into()),
            tool_call_id: id.map(Into::into),
        })
    }

    fn call(id: &str) -> StreamedMessagePart {
        StreamedMessagePart::ToolCall(ToolCall::new(id, "f", None))
    }

    /// Fragments reach the call they name — interleaved, named after a later call began, a
    /// repeated id's latest call — however the last-named shortcut was left.
    #[test]
    fn fragments_reach_the_call_they_name() {
        let mut a = MessageAssembler::new();
        for p in [
            call("x"),
            frag(Some("x"), "1"),
            call("y"),
            frag(Some("y"), "a"),
            frag(Some("x"), "2"),
            frag(Some("y"), "b"),
            frag(None, "c"),
            frag(Some("x"), "3"),
            call("x"),
            frag(Some("x"), "new"),
            frag(Some("y"), "d"),
            frag(Some("x"), "!"),
            frag(Some("zz"), "lost"),
        ] {
            a.try_push(p).unwrap();
        }
        let args: Vec<_> = a.calls().iter().map(|c| c.function.arguments.clone().unwrap_or_default()).collect();
        assert_eq!(args, ["123", "abcd", "new!"]);
        assert_eq!(a.complete("x", None), Some(2));
        assert_eq!(a.complete("y", None), Some(1));
        assert!(a.is_late(&frag(Some("x"), "late")));
        assert!(!a.is_late(&frag(Some("zz"), "none")));
    }

    /// A fragment of no call is dropped: it grows no call's arguments, so it is not held to the
    /// arguments limit (its bytes count toward the message's); a call's own still are.
    #[test]
    fn a_fragment_of_no_call_is_not_held_to_the_arguments_limit() {
        let limits = Limits { max_tool_arguments_bytes: 4, max_message_bytes: 12, ..Limits::default() };
        let mut a = MessageAssembler::with_limits(limits);
        a.try_push(frag(Some("nobody"), "123456")).unwrap();
        a.try_push(frag(None, "abcdef")).unwrap();
        assert!(a.calls().is_empty());
        let e = a.try_push(frag(None, "x")).unwrap_err().to_string();
        assert!(e.contains("message exceeded the limit of 12 bytes"), "{e}");
        let mut b = MessageAssembler::with_limits(limits);
        b.try_push(call("x")).unwrap();
        b.try_push(frag(Some("x"), "1234")).unwrap();
        let e = b.try_push(frag(None, "5")).unwrap_err().to_string();
        assert!(e.contains("arguments exceeded the limit of 4 bytes"), "{e}");
    }

    /// A call's late fragments one after another make one note (one log line), with their bytes.
    #[test]
    fn late_fragments_one_after_another_make_one_note() {
        let mut a = MessageAssembler::new();
        for p in [call("x"), frag(Some("x"), "{}"), call("y")] {
            a.try_push(p).unwrap();
        }
        a.complete("x", None);
        a.complete("y", None);
        for (id, piece) in [("x", "ab"), ("x", "c"), ("y", "d"), ("x", "ef")] {
            assert!(a.is_late(&frag(Some(id), piece)));
        }
        assert_eq!(a.take_late(), [("x".into(), 3), ("y".into(), 1), ("x".into(), 2)]);
    }

    /// A decoder's parse of a call's arguments is trusted only for the arguments it parsed: as
    /// long as the call's, not empty, and not in a message read again.
    #[test]
    fn a_decoders_parse_is_trusted_only_for_the_arguments_it_parsed() {
        let mut a = MessageAssembler::new();
        for p in
            [call("x"), frag(Some("x"), "{\"a\":"), frag(Some("x"), "1}"), call("y"), frag(Some("y"), "{}"), call("z")]
        {
            a.try_push(p).unwrap();
        }
        let mut parsed = Vec::new();
        for (id, len) in [("x", 7), ("y", 3), ("z", 0)] {
            a.complete(id, Some(len));
            parsed.push([0, 1, 2].map(|i| a.arguments_parsed(a.call(i))));
        }
        // Only the call completed last, and only when its arguments are as long as parsed.
        assert_eq!(parsed, [[true, false, false], [false; 3], [false; 3]]);
        let mut again = MessageAssembler::new();
        again.read_again(crate::engine::replay::Replay::default());
        again.try_push(call("w")).unwrap();
        again.try_push(frag(Some("w"), "{}")).unwrap();
        assert_eq!(again.complete("w", Some(2)), Some(0));
        assert!(!again.arguments_parsed(again.call(0)));
        // A copy of the call is not the call the assembler lends.
        let mut b = MessageAssembler::new();
        b.try_push(call("v")).unwrap();
        b.try_push(frag(Some("v"), "{}")).unwrap();
        b.complete("v", Some(2));
        assert!(b.arguments_parsed(b.call(0)) && !b.arguments_parsed(&b.call(0).clone()));
    }
}
