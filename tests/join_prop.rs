//! Property test: when nobody hears each part (a step with no part hook and no wire), a decoder
//! joins a call's fragments and text deltas that come one after another in a batch
//! (`StreamDecoder::join_parts`) — and the message, the late fragments, the calls handed on and
//! the failures are what they are when every part is heard one by one, for any stream of the
//! formats that join (Anthropic, Chat Completions, Kimi, Responses), any byte cuts, any limits.

use std::cell::RefCell;

use proptest::prelude::*;

use kosong_wasm::engine::error::{ChatProviderError, FailureKind};
use kosong_wasm::engine::generate::{
    generate_in, ByteSource, CallbackResult, GenerateOutput, Limits, MessageAssembler, PartSink, SseEventSource,
};
use kosong_wasm::engine::message::{Message, StreamedMessagePart, ToolCall};
use kosong_wasm::engine::providers::HttpProvider;

/// The body, in the chunks it was cut into.
struct Chunks<'a>(std::slice::Iter<'a, Vec<u8>>);

impl ByteSource for Chunks<'_> {
    type Error = ChatProviderError;
    async fn read_into(&mut self, buf: &mut Vec<u8>) -> Result<bool, ChatProviderError> {
        match self.0.next() {
            Some(c) => {
                buf.clone_from(c);
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

/// A sink that hears no part one by one (so its source may join them); it counts what it gets.
struct Deaf<'a>(&'a RefCell<usize>);

impl PartSink<ChatProviderError> for Deaf<'_> {
    fn part(&mut self, _p: &StreamedMessagePart) -> CallbackResult<ChatProviderError> {
        *self.0.borrow_mut() += 1;
        Ok(None)
    }
    fn hears_each(&self) -> bool {
        false
    }
}

/// What a run gave: its outcome (a limit's failure as just that: a joined run may trip the
/// message's limit where the one-by-one run tripped the call's, in the same fragment run), the
/// calls handed on with their arguments, the message as far as it got (what a salvage of a
/// failed round closes), and how many parts the sink got.
#[derive(Debug, PartialEq)]
enum Outcome {
    Done(GenerateOutput),
    Limit,
    Failed(String),
}

fn run(kind: &str, chunks: &[Vec<u8>], limits: Limits, deaf: bool) -> (Outcome, Vec<(String, String)>, Message, usize) {
    let provider = HttpProvider::from_json(&serde_json::json!({"kind": kind, "model": "m"}).to_string()).unwrap();
    let mut source = SseEventSource::new(Chunks(chunks.iter()), provider.decoder()).with_limits(limits);
    let calls = RefCell::new(Vec::new());
    let parts = RefCell::new(0);
    let on_call = |c: &ToolCall| {
        calls.borrow_mut().push((c.id.clone(), c.function.arguments.clone().unwrap_or_default()));
        Ok(None)
    };
    let asm = RefCell::new(MessageAssembler::new());
    let result = if deaf {
        futures::executor::block_on(generate_in(&mut source, &asm, Deaf(&parts), on_call))
    } else {
        let hear = |_: &StreamedMessagePart| {
            *parts.borrow_mut() += 1;
            Ok(None)
        };
        futures::executor::block_on(generate_in(&mut source, &asm, hear, on_call))
    };
    let outcome = match result {
        Ok(out) => Outcome::Done(out),
        Err(e) if e.kind() == FailureKind::Limit.as_str() => Outcome::Limit,
        Err(e) => Outcome::Failed(e.to_string()),
    };
    let so_far = asm.borrow().message_so_far();
    (outcome, calls.into_inner(), so_far, parts.into_inner())
}

/// One thing a model's answer does.
#[derive(Clone, Debug)]
enum Act {
    Text(String),
    Think(String),
    /// A new call begins.
    Call,
    /// A fragment of the arguments of the open call `k % open` (the latest when `k` is 0).
    Frag(usize, String),
    /// The open call `k % open` ends (a format that says so: Anthropic, Responses).
    Stop(usize),
    /// An event nobody reads (a ping, a type from the future).
    Noise,
    /// A citation of the text (Anthropic's `citations_delta`, Responses' annotation; Chat
    /// Completions has none): a text part with a list, which text before and after merges with.
    Cite,
}

fn piece() -> impl Strategy<Value = String> {
    let bit = prop_oneof![
        Just("{".to_owned()),
        Just("}".to_owned()),
        Just("\"a\":".to_owned()),
        Just("\"x\\\"y\"".to_owned()),
        Just("[1,".to_owned()),
        Just("2]".to_owned()),
        Just("é😀".to_owned()),
        Just("\\n".to_owned()),
        Just("\n".to_owned()),
        Just(" ".to_owned()),
        "[a-z]{1,6}",
    ];
    proptest::collection::vec(bit, 1..4).prop_map(|v| v.concat())
}

fn acts() -> impl Strategy<Value = Vec<Act>> {
    let act = prop_oneof![
        3 => piece().prop_map(Act::Text),
        1 => piece().prop_map(Act::Think),
        2 => Just(Act::Call),
        6 => (0usize..4, piece()).prop_map(|(k, p)| Act::Frag(k, p)),
        1 => (0usize..4).prop_map(Act::Stop),
        1 => Just(Act::Noise),
        1 => Just(Act::Cite),
    ];
    proptest::collection::vec(act, 0..40)
}

/// An event with its type as its `event:` line (as Anthropic and Responses send it), or a
/// `data:` line alone.
fn data(named: bool, v: serde_json::Value) -> String {
    match v["type"].as_str().filter(|_| named) {
        Some(k) => format!("event: {k}\ndata: {v}\n\n"),
        None => format!("data: {v}\n\n"),
    }
}

/// The acts as an Anthropic stream.
fn anthropic(acts: &[Act]) -> String {
    use serde_json::json;
    let ev = |v: serde_json::Value| data(true, v);
    let mut s = ev(json!({"type": "message_start", "message": {"id": "msg_1", "usage": {"input_tokens": 3}}}));
    // Open blocks: (index, is a call); calls still open, by block index.
    let mut next = 0u64;
    let mut current: Option<(u64, &str)> = None;
    let mut open: Vec<u64> = Vec::new();
    let block = |s: &mut String, kind: &'static str, current: &mut Option<(u64, &str)>, next: &mut u64| {
        if current.is_some_and(|(_, k)| k == kind) {
            return current.unwrap().0;
        }
        let i = *next;
        *next += 1;
        let cb = match kind {
            "text" => json!({"type": "text", "text": ""}),
            _ => json!({"type": "thinking", "thinking": ""}),
        };
        s.push_str(&ev(json!({"type": "content_block_start", "index": i, "content_block": cb})));
        *current = Some((i, kind));
        i
    };
    for a in acts {
        match a {
            Act::Text(t) => {
                let i = block(&mut s, "text", &mut current, &mut next);
                s.push_str(&ev(
                    json!({"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": t}}),
                ));
            }
            Act::Think(t) => {
                let i = block(&mut s, "thinking", &mut current, &mut next);
                s.push_str(&ev(
                    json!({"type": "content_block_delta", "index": i, "delta": {"type": "thinking_delta", "thinking": t}}),
                ));
            }
            Act::Call => {
                let i = next;
                next += 1;
                let cb = json!({"type": "tool_use", "id": format!("toolu_{i}"), "name": "f", "input": {}});
                s.push_str(&ev(json!({"type": "content_block_start", "index": i, "content_block": cb})));
                open.push(i);
                current = Some((i, "call"));
            }
            Act::Frag(k, p) => {
                let Some(&i) = (if *k == 0 { open.last() } else { open.get(k % open.len().max(1)) }) else { continue };
                s.push_str(&ev(json!({"type": "content_block_delta", "index": i,
                    "delta": {"type": "input_json_delta", "partial_json": p}})));
            }
            Act::Stop(k) => {
                if open.is_empty() {
                    continue;
                }
                let i = open.remove(k % open.len());
                s.push_str(&ev(json!({"type": "content_block_stop", "index": i})));
            }
            Act::Noise => s.push_str(&ev(json!({"type": "ping"}))),
            Act::Cite => {
                let i = block(&mut s, "text", &mut current, &mut next);
                s.push_str(&ev(json!({"type": "content_block_delta", "index": i, "delta": {"type": "citations_delta",
                    "citation": {"type": "char_location", "cited_text": "x", "document_index": 0}}})));
            }
        }
    }
    s.push_str(&ev(
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 9}}),
    ));
    s.push_str(&ev(json!({"type": "message_stop"})));
    s
}

/// The acts as a Chat Completions stream (thinking as `reasoning_content`, read by Kimi).
fn chat(acts: &[Act]) -> String {
    use serde_json::json;
    let chunk = |delta: serde_json::Value| data(false, json!({"id": "c1", "choices": [{"index": 0, "delta": delta}]}));
    let mut s = String::new();
    let mut calls = 0usize;
    for a in acts {
        match a {
            Act::Text(t) => s.push_str(&chunk(json!({"content": t}))),
            Act::Think(t) => s.push_str(&chunk(json!({"reasoning_content": t}))),
            Act::Call => {
                s.push_str(&chunk(json!({"tool_calls": [{"index": calls, "id": format!("call_{calls}"),
                    "type": "function", "function": {"name": "f", "arguments": ""}}]})));
                calls += 1;
            }
            Act::Frag(k, p) => {
                if calls == 0 {
                    continue;
                }
                let i = if *k == 0 { calls - 1 } else { k % calls };
                s.push_str(&chunk(json!({"tool_calls": [{"index": i, "function": {"arguments": p}}]})));
            }
            Act::Stop(_) | Act::Cite => {}
            Act::Noise => s.push_str(": keep-alive\n\n"),
        }
    }
    s.push_str(&data(false, json!({"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})));
    s.push_str("data: [DONE]\n\n");
    s
}

/// The acts as a Responses stream.
fn responses(acts: &[Act]) -> String {
    use serde_json::json;
    let ev = |v: serde_json::Value| data(true, v);
    let mut s = ev(json!({"type": "response.created", "response": {"id": "resp_1"}}));
    let mut open: Vec<(usize, String)> = Vec::new();
    let mut calls = 0usize;
    let mut outputs = 0usize;
    let mut message: Option<usize> = None;
    for a in acts {
        match a {
            Act::Text(t) => {
                let o = *message.get_or_insert_with(|| {
                    let o = outputs;
                    outputs += 1;
                    s.push_str(&ev(json!({"type": "response.output_item.added", "output_index": o,
                        "item": {"id": format!("msg_{o}"), "type": "message", "role": "assistant", "content": []}})));
                    o
                });
                s.push_str(&ev(json!({"type": "response.output_text.delta", "item_id": format!("msg_{o}"),
                    "output_index": o, "content_index": 0, "delta": t})));
            }
            Act::Think(t) => s.push_str(&ev(json!({"type": "response.reasoning_text.delta", "item_id": "rs",
                "output_index": 99, "delta": t}))),
            Act::Call => {
                let o = outputs;
                outputs += 1;
                message = None;
                s.push_str(&ev(json!({"type": "response.output_item.added", "output_index": o,
                    "item": {"id": format!("fc_{o}"), "type": "function_call", "call_id": format!("call_{calls}"),
                        "name": "f", "arguments": ""}})));
                calls += 1;
                open.push((o, String::new()));
            }
            Act::Frag(k, p) => {
                let n = open.len();
                if n == 0 {
                    continue;
                }
                let (o, args) = &mut open[if *k == 0 { n - 1 } else { k % n }];
                args.push_str(p);
                s.push_str(&ev(json!({"type": "response.function_call_arguments.delta",
                    "item_id": format!("fc_{o}"), "output_index": *o, "delta": p})));
            }
            Act::Stop(k) => {
                if open.is_empty() {
                    continue;
                }
                let (o, args) = open.remove(k % open.len());
                s.push_str(&ev(json!({"type": "response.output_item.done", "output_index": o,
                    "item": {"id": format!("fc_{o}"), "type": "function_call", "call_id": "x", "name": "f",
                        "arguments": args}})));
            }
            Act::Noise => s.push_str(&ev(json!({"type": "response.future_thing.delta", "delta": {"x": 1}}))),
            Act::Cite => {
                if let Some(o) = message {
                    s.push_str(&ev(
                        json!({"type": "response.output_text.annotation.added", "item_id": format!("msg_{o}"),
                        "output_index": o, "content_index": 0, "annotation": {"type": "url_citation", "url": "u"}}),
                    ));
                }
            }
        }
    }
    s.push_str(&ev(json!({"type": "response.completed", "response": {"id": "resp_1", "status": "completed",
        "usage": {"input_tokens": 1, "output_tokens": 2}}})));
    s
}

fn stream(format: usize, acts: &[Act]) -> (&'static str, String) {
    match format {
        0 => ("anthropic", anthropic(acts)),
        1 => ("openai", chat(acts)),
        2 => ("kimi", chat(acts)),
        _ => ("openai_responses", responses(acts)),
    }
}

fn cut(bytes: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    points.sort_unstable();
    let mut chunks = Vec::new();
    let mut last = 0;
    for p in points {
        chunks.push(bytes[last..p].to_vec());
        last = p;
    }
    chunks.push(bytes[last..].to_vec());
    chunks
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 768, ..ProptestConfig::default() })]

    #[test]
    fn joined_parts_make_what_parts_one_by_one_make(
        format in 0usize..4,
        acts in acts(),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
        limits in proptest::option::of((1usize..200, 1usize..400)),
        truncate in proptest::option::of(any::<usize>()),
    ) {
        let (kind, mut body) = stream(format, &acts);
        // A stream that breaks off anywhere (a char boundary: the bytes are cut, not the text).
        if let Some(at) = truncate {
            let mut at = at % (body.len() + 1);
            while !body.is_char_boundary(at) {
                at -= 1;
            }
            body.truncate(at);
        }
        let chunks = cut(body.as_bytes(), &cuts);
        let limits = match limits {
            Some((args, message)) => Limits { max_tool_arguments_bytes: args, max_message_bytes: message, ..Limits::default() },
            None => Limits::default(),
        };
        let (heard, heard_calls, heard_so_far, heard_parts) = run(kind, &chunks, limits, false);
        let (joined, joined_calls, joined_so_far, joined_parts) = run(kind, &chunks, limits, true);
        prop_assert_eq!(&joined, &heard, "{} stream:\n{}", kind, body);
        prop_assert_eq!(joined_calls, heard_calls);
        // A limit's failure may come a few bytes apart (see `Outcome`): what arrived is compared
        // when the run did not stop on a limit.
        if heard != Outcome::Limit {
            prop_assert_eq!(joined_so_far, heard_so_far);
        }
        prop_assert!(joined_parts <= heard_parts);
    }
}

/// The join happens: a call's fragments in one read are one part when nobody hears each, and
/// each one when someone does (so the property above compares two different paths).
#[test]
fn fragments_in_one_read_join_only_when_nobody_hears_each() {
    let acts = [
        Act::Text("a".into()),
        Act::Text("b".into()),
        Act::Call,
        Act::Frag(0, "{\"x\":".into()),
        Act::Frag(0, "\"y\\\"".into()),
        Act::Frag(0, "z\"}".into()),
        Act::Stop(0),
    ];
    for format in 0..4 {
        let (kind, body) = stream(format, &acts);
        let body_len = body.len();
        let (heard, _, _, heard_parts) = run(kind, &[body.clone().into_bytes()], Limits::default(), false);
        let (joined, calls, _, joined_parts) = run(kind, &[body.into_bytes()], Limits::default(), true);
        assert_eq!(joined, heard, "{kind}");
        assert_eq!(calls, vec![(calls[0].0.clone(), "{\"x\":\"y\\\"z\"}".to_owned())], "{kind}");
        // Text "a", "b"; the call; its three fragments: 6 heard, 3 joined (text, call, fragments)
        // when the stream is decoded in one batch (a read is decoded 1 KB at a time: Responses'
        // events are long, and its batch ends between them).
        assert_eq!(heard_parts, 6, "{kind}");
        assert!(joined_parts == 3 || body_len > 1024 && joined_parts < 6, "{kind}: {joined_parts} parts");
    }
}
