//! The fast path for text deltas leaves a decoder in the same state as the general path, for
//! any event text (Chat Completions, Anthropic, Responses and Gemini).
#![no_main]
use kosong_wasm::core::providers::anthropic::AnthropicDecoder;
use kosong_wasm::core::providers::openai_chat::OpenAIChatConfig;
use kosong_wasm::core::providers::gemini::GeminiDecoder;
use kosong_wasm::core::providers::openai_responses::ResponsesDecoder;
use kosong_wasm::core::providers::StreamDecoder;
use kosong_wasm::core::sse::SseEvent;
use libfuzzer_sys::fuzz_target;

fn state(d: &mut dyn StreamDecoder, data: &str) -> String {
    let mut out = Vec::new();
    let r = d.on_event(&SseEvent { event: None, data: data.to_owned(), id: None }, &mut out);
    format!("{out:?} {:?} {:?} {:?} {:?}", r.is_ok(), d.id(), d.usage(), d.finish_reason())
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let chat = |fast: bool| {
        let mut d = OpenAIChatConfig::for_model("m").decoder();
        d.fast = fast;
        state(&mut d, text)
    };
    assert_eq!(chat(true), chat(false));
    let anthropic = |fast: bool| {
        let mut d = AnthropicDecoder::default();
        d.fast = fast;
        state(&mut d, text)
    };
    assert_eq!(anthropic(true), anthropic(false));
    let responses = |fast: bool| {
        let mut d = ResponsesDecoder::default();
        d.fast = fast;
        state(&mut d, text)
    };
    assert_eq!(responses(true), responses(false));
    let gemini = |fast: bool| {
        let mut d = GeminiDecoder::default();
        d.fast = fast;
        state(&mut d, text)
    };
    assert_eq!(gemini(true), gemini(false));
});
