//! Property tests: the decoders give the same result for any split of their input and never
//! panic on arbitrary bytes.

use proptest::prelude::*;

use kosong_wasm::core::providers::openai_chat::OpenAIChatConfig;
use kosong_wasm::core::providers::{echo::parse_echo_script, StreamDecoder, StreamEvent};
use kosong_wasm::core::sse::{SseDecoder, SseEvent};

fn sse_events(chunks: &[&[u8]]) -> Vec<SseEvent> {
    let mut d = SseDecoder::new();
    let mut out = Vec::new();
    for c in chunks {
        d.feed(c, &mut out).unwrap();
    }
    d.finish(&mut out).unwrap();
    out
}

/// Runs bytes through SSE + the OpenAI decoder; the outcome as comparable text.
fn openai_outcome(chunks: &[&[u8]]) -> String {
    let mut sse = SseDecoder::new();
    let mut dec = OpenAIChatConfig { model: "m".into(), ..Default::default() }.decoder();
    let mut events = Vec::new();
    let mut out: Vec<StreamEvent> = Vec::new();
    for c in chunks {
        sse.feed(c, &mut events).unwrap();
        for e in events.drain(..) {
            if let Err(err) = dec.on_event(&e, &mut out) {
                return format!("{out:?} / {err}");
            }
        }
    }
    sse.finish(&mut events).unwrap();
    for e in events.drain(..) {
        if let Err(err) = dec.on_event(&e, &mut out) {
            return format!("{out:?} / {err}");
        }
    }
    let end = dec.finish(&mut out);
    format!("{out:?} / {end:?} / {:?}", dec.usage())
}

fn sse_like() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(b"data: ".to_vec()),
        Just(b"data:".to_vec()),
        Just(b"event: x".to_vec()),
        Just(b": c".to_vec()),
        Just(b"id: 1".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"\r".to_vec()),
        Just(b"\r\n".to_vec()),
        Just("é😀".as_bytes().to_vec()),
        Just(b"\xEF\xBB\xBF".to_vec()),
        Just(br#"{"choices":[{"delta":{"content":"hi","tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{\"x\":"}}]}}]}"#.to_vec()),
        Just(br#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"b","function":{"name":"g","arguments":"{}"}}]},"finish_reason":null}]}"#.to_vec()),
        Just(br#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]}}]}"#.to_vec()),
        Just(br#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#.to_vec()),
        Just(b"[DONE]".to_vec()),
        proptest::collection::vec(any::<u8>(), 0..8),
    ];
    proptest::collection::vec(piece, 0..40).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn sse_any_split_same_events(input in sse_like(), cuts in proptest::collection::vec(any::<usize>(), 0..6)) {
        let whole = sse_events(&[&input]);
        let mut points: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
        points.sort();
        let mut chunks = Vec::new();
        let mut last = 0;
        for p in points { chunks.push(&input[last..p]); last = p; }
        chunks.push(&input[last..]);
        prop_assert_eq!(sse_events(&chunks), whole);
    }

    #[test]
    fn openai_any_split_same_outcome(input in sse_like(), cut in any::<usize>()) {
        let cut = cut % (input.len() + 1);
        prop_assert_eq!(openai_outcome(&[&input[..cut], &input[cut..]]), openai_outcome(&[&input]));
    }

    #[test]
    fn decoders_never_panic_on_arbitrary_bytes(input in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = openai_outcome(&[&input]);
        let _ = parse_echo_script(&String::from_utf8_lossy(&input));
    }
}
