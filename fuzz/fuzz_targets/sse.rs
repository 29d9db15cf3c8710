//! The SSE decoder never panics, and gives the same events however the bytes are split.
#![no_main]
use kosong_wasm::core::sse::SseDecoder;
use libfuzzer_sys::fuzz_target;

fn events(chunks: &[&[u8]]) -> Vec<kosong_wasm::core::sse::SseEvent> {
    let mut d = SseDecoder::with_limit(1 << 16);
    let mut out = Vec::new();
    for c in chunks {
        if d.feed(c, &mut out).is_err() {
            return out;
        }
    }
    let _ = d.finish(&mut out);
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&cut, rest)) = data.split_first() else { return };
    let at = (cut as usize) % (rest.len() + 1);
    assert_eq!(events(&[&rest[..at], &rest[at..]]), events(&[rest]));
});
