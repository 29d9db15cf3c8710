//! Argument previews stay linear for every input shape: the work `PartialJson` does (bytes
//! looked at, path segments and edits handed out) is counted, not timed, for each shape at
//! several sizes and in pieces of several sizes.

use kosong_wasm::engine::partial_json::{apply, PartialJson, MAX_PREVIEW_DEPTH};
use serde_json::Value;

/// Text of about `n` bytes for each shape a stream may take.
fn shapes(n: usize) -> Vec<(&'static str, String)> {
    let depth = n / 6;
    let mut nested_objects = "{\"a\":".repeat(depth);
    nested_objects.push('1');
    nested_objects.push_str(&"}".repeat(depth));
    let alternating = "[{\"a\":".repeat(n / 6);
    let mut escapes = String::from("\"");
    while escapes.len() < n {
        escapes.push_str("\\u00e9\\n\\ud83d\\ude00\\\"x\\\\");
    }
    escapes.push('"');
    let mut keys = String::from("{");
    let mut i = 0;
    while keys.len() < n {
        keys.push_str(&format!("\"k{i}\":{i},"));
        i += 1;
    }
    keys.push_str("\"end\":0}");
    let long_number = format!("[{}]", "7".repeat(n));
    let long_string_deep =
        format!("{}\"{}\"{}", "[".repeat(MAX_PREVIEW_DEPTH), "s".repeat(n), "]".repeat(MAX_PREVIEW_DEPTH));
    vec![
        ("nested objects", nested_objects),
        ("open arrays", "[".repeat(n)),
        ("alternating arrays and objects", alternating),
        ("a string of escapes and surrogate pairs", escapes),
        ("many keys", keys),
        ("a long number", long_number),
        ("a long string at the preview depth", long_string_deep),
    ]
}

fn work(text: &str, piece: usize) -> (u64, PartialJson) {
    let mut p = PartialJson::new();
    let mut at = 0;
    while at < text.len() {
        let mut end = (at + piece).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        p.feed(&text[at..end]);
        at = end;
    }
    (p.work(), p)
}

#[test]
fn work_is_within_a_constant_times_the_input_for_every_shape_and_piece_size() {
    for piece in [1, 7, 100, usize::MAX] {
        for size in [24 << 10, 48 << 10, 96 << 10] {
            for ((name, small), (_, large)) in shapes(size).into_iter().zip(shapes(2 * size)) {
                let (w1, p) = work(&small, piece);
                let (w2, _) = work(&large, piece);
                let per_byte = w1 as f64 / small.len() as f64;
                assert!(per_byte <= 2.0 * MAX_PREVIEW_DEPTH as f64, "{name}, pieces of {piece}: {per_byte} per byte");
                let growth = w2 as f64 / w1 as f64;
                let input_growth = large.len() as f64 / small.len() as f64;
                assert!(
                    growth <= input_growth * 1.1,
                    "{name}, pieces of {piece}, {size} B: work grew {growth}× for {input_growth}× the input"
                );
                assert!(!p.failed(), "{name} is JSON so far");
            }
        }
    }
}

#[test]
fn a_megabyte_of_nesting_in_one_byte_pieces_stays_linear() {
    let text = "{\"a\":[".repeat((1 << 20) / 6);
    let (w, p) = work(&text, 1);
    assert!(w <= 2 * MAX_PREVIEW_DEPTH as u64 * text.len() as u64);
    assert!(p.depth_limited());
}

#[test]
fn what_lies_deeper_than_the_limit_is_not_previewed_and_what_follows_it_is() {
    let deep = |d: usize| format!("{}1{}", "[".repeat(d), "]".repeat(d));
    let text = format!("{{\"deep\": {}, \"after\": \"seen\"}}", deep(MAX_PREVIEW_DEPTH + 10));
    let mut p = PartialJson::new();
    let mut v = Value::Null;
    apply(&mut v, &p.feed(&text));
    assert!(p.done() && !p.failed() && p.depth_limited());
    assert_eq!(v["after"], "seen");
    let mut inner = &v["deep"];
    let mut levels = 0;
    while let Value::Array(a) = inner {
        levels += 1;
        match a.first() {
            Some(x) => inner = x,
            None => break,
        }
    }
    assert_eq!(levels, MAX_PREVIEW_DEPTH, "the arrays down to the limit are there, empty below it");
    // Up to the limit, a value previews to itself.
    let mut q = PartialJson::new();
    let mut w = Value::Null;
    let shallow = format!("{{\"x\": {}}}", deep(MAX_PREVIEW_DEPTH - 1));
    apply(&mut w, &q.feed(&shallow));
    assert!(!q.depth_limited());
    assert_eq!(w, serde_json::from_str::<Value>(&shallow).unwrap());
}
