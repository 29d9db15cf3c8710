//! Argument previews never panic, end the same however the text is split, and do work
//! linear in the bytes fed (run with long inputs and a per-input time limit).
#![no_main]
use kosong_wasm::engine::partial_json::{apply, PartialJson, MAX_PREVIEW_DEPTH};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fn preview(pieces: &[&str]) -> (Value, bool, bool) {
    let mut p = PartialJson::new();
    let mut v = Value::Null;
    for piece in pieces {
        apply(&mut v, &p.feed(piece));
    }
    (v, p.done(), p.failed())
}

fuzz_target!(|data: &[u8]| {
    let Some((&cut, rest)) = data.split_first() else { return };
    let Ok(text) = std::str::from_utf8(rest) else { return };
    let mut at = (cut as usize) % (text.len() + 1);
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    assert_eq!(preview(&[&text[..at], &text[at..]]), preview(&[text]));
    // Complete JSON previews to itself (up to the preview depth).
    if let Ok(v) = serde_json::from_str::<Value>(text) {
        if matches!(v, Value::Object(_) | Value::Array(_)) {
            let mut p = PartialJson::new();
            let mut got = Value::Null;
            apply(&mut got, &p.feed(text));
            assert!(p.done() && !p.failed());
            if !p.depth_limited() {
                assert_eq!(got, v);
            }
        }
    }
    // The work stays within a constant times the input, whatever its shape.
    let mut p = PartialJson::new();
    for chunk in rest.chunks(3) {
        if let Ok(piece) = std::str::from_utf8(chunk) {
            p.feed(piece);
        }
    }
    assert!(p.work() <= 2 * 3 * (MAX_PREVIEW_DEPTH as u64 + 4) * (rest.len() as u64 + 1));
});
