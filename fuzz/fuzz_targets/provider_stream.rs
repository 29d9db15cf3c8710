//! SSE + every provider's stream decoder + message assembly never panic on any bytes, and the
//! outcome does not depend on where the bytes are split. The first byte picks the provider.
#![no_main]
use kosong_wasm::engine::generate::MessageAssembler;
use kosong_wasm::engine::providers::{HttpProvider, StreamDecoder, StreamEvent};
use kosong_wasm::engine::sse::SseDecoder;
use libfuzzer_sys::fuzz_target;

fn provider(pick: u8) -> HttpProvider {
    let kind = ["openai", "kimi", "anthropic", "openai_responses", "gemini"][pick as usize % 5];
    HttpProvider::from_json(&format!("{{\"kind\":\"{kind}\",\"model\":\"m\"}}")).unwrap()
}

fn outcome(p: &HttpProvider, chunks: &[&[u8]]) -> String {
    let mut sse = SseDecoder::new();
    let mut dec = p.decoder();
    let mut asm = MessageAssembler::new();
    let mut joiner = kosong_wasm::engine::surrogates::SurrogateJoiner::default();
    let mut events = Vec::new();
    let mut out = Vec::new();
    let mut result = Ok(());
    'outer: for (i, c) in chunks.iter().enumerate() {
        let fed = sse.feed(c, &mut events).map_err(|e| e.to_string());
        if let Err(e) = fed {
            result = Err(e);
            break;
        }
        if i + 1 == chunks.len() {
            let _ = sse.finish(&mut events);
        }
        for mut e in events.drain(..) {
            // As the engine does: surrogate pairs split across events joined first.
            let fixed = joiner.fix(&e.data).into_owned();
            e.data = fixed;
            if let Err(e) = dec.on_event(&e, &mut out) {
                result = Err(e.to_string());
                break 'outer;
            }
        }
    }
    if result.is_ok() {
        result = dec.finish(&mut out).map_err(|e| e.to_string());
    }
    let mut completed = Vec::new();
    for ev in out {
        match ev {
            StreamEvent::Part(p) => {
                if let Err(e) = asm.try_push(p) {
                    result = Err(e.to_string());
                    break;
                }
            }
            StreamEvent::ToolCallComplete(id) => completed.push(id),
            StreamEvent::Boundary => asm.boundary(),
            StreamEvent::Reconnected(_) => {}
        }
    }
    let empty = asm.check_not_empty().err().map(|e| e.to_string());
    format!("{result:?} {completed:?} {empty:?} {:?}", asm.into_message())
}

fuzz_target!(|data: &[u8]| {
    let [pick, cut, rest @ ..] = data else { return };
    let p = provider(*pick);
    let at = (*cut as usize) % (rest.len() + 1);
    assert_eq!(outcome(&p, &[&rest[..at], &rest[at..]]), outcome(&p, &[rest]));
});
