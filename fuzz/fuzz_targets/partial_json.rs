//! Argument previews never panic, and end the same however the text is split.
#![no_main]
use kosong_wasm::core::partial_json::{apply, PartialJson};
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
    // Complete JSON previews to itself.
    if let Ok(v) = serde_json::from_str::<Value>(text) {
        if matches!(v, Value::Object(_) | Value::Array(_)) {
            let (got, done, failed) = preview(&[text]);
            assert!(done && !failed);
            assert_eq!(got, v);
        }
    }
});
