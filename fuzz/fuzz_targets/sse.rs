//! The SSE decoder never panics, and gives the same events however the bytes are split (with
//! the data buffers of read events given back for reuse).
#![no_main]
use kosong_wasm::engine::sse::SseDecoder;
use libfuzzer_sys::fuzz_target;

/// The events, each data buffer given back to the decoder once read (as the engine does), so
/// the reuse of buffers is part of what is checked.
fn events(chunks: &[&[u8]]) -> Vec<kosong_wasm::engine::sse::SseEvent> {
    let mut d = SseDecoder::with_limit(1 << 16);
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for c in chunks {
        let r = d.feed(c, &mut out);
        for ev in out.drain(..) {
            seen.push(ev.clone());
            d.give_back(ev.data);
        }
        if r.is_err() {
            return seen;
        }
    }
    let _ = d.finish(&mut out);
    seen.extend(out);
    seen
}

fuzz_target!(|data: &[u8]| {
    let Some((&cut, rest)) = data.split_first() else { return };
    let at = (cut as usize) % (rest.len() + 1);
    assert_eq!(events(&[&rest[..at], &rest[at..]]), events(&[rest]));
});
