//! The fast path for text deltas leaves a decoder in the same state as the general path, for
//! any event text (Chat Completions, Anthropic, Responses and Gemini). The input's NUL-separated
//! parts are events in turn, so what a fast path keeps from one event to the next (Chat Completions'
//! chunk shape) is fuzzed too.
#![no_main]
use kosong_wasm::engine::providers::anthropic::AnthropicDecoder;
use kosong_wasm::engine::providers::gemini::GeminiDecoder;
use kosong_wasm::engine::providers::openai_chat::OpenAIChatConfig;
use kosong_wasm::engine::providers::openai_responses::ResponsesDecoder;
use kosong_wasm::engine::providers::StreamDecoder;
use kosong_wasm::engine::sse::{RawEvent, SseEvent};
use libfuzzer_sys::fuzz_target;

/// Each event as a stream source hands it over: with the fast paths on, its bytes go to the
/// learned shape first (`on_raw_data`), and an event not taken there is delivered.
fn state(d: &mut dyn StreamDecoder, text: &str, fast: bool) -> String {
    let mut states = String::new();
    for data in text.split('\0') {
        let mut out = Vec::new();
        let line = format!("{data}\n\n");
        let one_line = !data.contains(['\n', '\r']); // an SSE line's data holds no line end
        let r = if fast && one_line && d.on_raw_data(&RawEvent::new(line.as_bytes(), usize::MAX), &mut out).is_some() {
            Ok(())
        } else {
            d.on_event(&SseEvent { event: None, data: data.to_owned(), id: None }, &mut out)
        };
        states += &format!("{out:?} {:?} {:?} {:?} {:?}\n", r.is_ok(), d.id(), d.usage(), d.finish_reason());
    }
    states
}

/// The decoder `make` builds, with the fast path on and then off, must end in the same state.
macro_rules! agree {
    ($make:expr, $text:expr) => {{
        let run = |fast: bool| {
            let mut d = $make;
            d.fast = fast;
            state(&mut d, $text, fast)
        };
        assert_eq!(run(true), run(false));
    }};
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    agree!(OpenAIChatConfig::for_model("m").decoder(), text);
    agree!(AnthropicDecoder::default(), text);
    agree!(ResponsesDecoder::default(), text);
    agree!(GeminiDecoder::default(), text);
    // The scanner's check of a call's arguments accepts only what serde_json reads.
    if kosong_wasm::engine::json::scan::accepts_json(text) {
        assert!(serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok());
    }
});
