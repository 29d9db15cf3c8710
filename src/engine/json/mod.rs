//! JSON beyond serde's derives: a completed call's arguments checked once (`arguments`), whether
//! streamed arguments have closed (`close`), the strict scanner the decoders' fast paths and
//! `accepts_json` use (`scan`), the field reader (`fields`).

pub mod arguments;
pub mod close;
pub mod fields;
pub mod scan;

pub use arguments::Arguments;

/// True when `text` is one JSON value: the scanner's answer, and serde_json's where the scanner
/// cannot tell.
pub fn is_json(text: &str) -> bool {
    scan::accepts_json(text) || serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
}

/// A number as JavaScript prints it (`5`, `0.5`, `-1e21`, `NaN`, `Infinity`), without core's float
/// formatting (~23 KB of .wasm that nothing else brings in: vendor/serde_core): whole numbers by
/// the integer formatter, others by serde_json's (ryu), which the package carries anyway.
pub fn number_text(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if v.fract() == 0.0 && v.abs() < 1e15 {
        return (v as i64).to_string();
    }
    serde_json::to_string(&v).unwrap_or_default()
}

/// `text` (JSON) with every `\u` escape of a lone surrogate — one JavaScript's `JSON.stringify`
/// writes for a string cut between the halves of a pair — made `\uFFFD`, as `TextEncoder` makes
/// such a half; `None` when there is none. serde_json refuses those escapes, so a reader retries
/// with this when a parse fails: nothing is paid when the text is well-formed. One pass, linear.
pub fn lone_surrogates_replaced(text: &str) -> Option<String> {
    let b = text.as_bytes();
    let unit = |i: usize| -> Option<u16> {
        let hex = b.get(i..i + 6)?;
        if hex[0] != b'\\' || hex[1] != b'u' {
            return None;
        }
        u16::from_str_radix(std::str::from_utf8(&hex[2..]).ok()?, 16).ok()
    };
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        // An escape: `\\` and the rest skip two bytes; `\uXXXX` six (twelve for a whole pair).
        match unit(i) {
            Some(h @ 0xD800..=0xDBFF) if matches!(unit(i + 6), Some(0xDC00..=0xDFFF)) => {
                let _ = h;
                i += 12;
            }
            Some(0xD800..=0xDFFF) => {
                let o = out.get_or_insert_with(|| String::with_capacity(text.len()));
                o.push_str(&text[copied..i]);
                o.push_str("\\ufffd");
                i += 6;
                copied = i;
            }
            Some(_) => i += 6,
            None => i += 2,
        }
    }
    let mut o = out?;
    o.push_str(&text[copied..]);
    Some(o)
}

#[cfg(test)]
mod tests {
    #[test]
    fn numbers_read_as_in_javascript() {
        for (v, t) in
            [(5.0, "5"), (-5.0, "-5"), (0.0, "0"), (0.5, "0.5"), (f64::NAN, "NaN"), (f64::NEG_INFINITY, "-Infinity")]
        {
            assert_eq!(super::number_text(v), t);
        }
    }

    /// vendor/serde_core's edit (scripts/vendor-serde-core.mjs): serde's own Display of an
    /// unexpected float no longer formats the number; serde_json's errors, which write a float
    /// themselves (ryu), read as before — from text and from a `Value`, whole and fractional.
    #[test]
    fn an_unexpected_float_is_told_as_serde_json_tells_it() {
        let text = |json: &str| serde_json::from_str::<String>(json).unwrap_err().to_string();
        assert_eq!(text("0.1"), "invalid type: floating point `0.1`, expected a string at line 1 column 3");
        assert_eq!(text("-1e300"), "invalid type: floating point `-1e+300`, expected a string at line 1 column 6");
        let e = serde_json::from_value::<u32>(serde_json::json!(2.0)).unwrap_err().to_string();
        assert_eq!(e, "invalid type: floating point `2.0`, expected u32");
        let e = serde_json::from_str::<crate::engine::message::Message>(r#"{"role":"user","content":2.5}"#)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("invalid type: floating point `2.5`, expected "), "{e}");
    }

    use super::lone_surrogates_replaced as fix;

    #[test]
    fn lone_surrogate_escapes_become_the_replacement_character() {
        assert_eq!(fix(r#"{"a":"x\ud83d"}"#).as_deref(), Some(r#"{"a":"x\ufffd"}"#));
        assert_eq!(fix(r#""\udc00\ud83d\ude00\ud800""#).as_deref(), Some(r#""\ufffd\ud83d\ude00\ufffd""#));
        assert_eq!(fix(r#""\\ud83d""#), None, "an escaped backslash, then text");
        assert_eq!(fix(r#""\ud83d\ude00 é \n""#), None, "a whole pair is kept");
        assert_eq!(fix("\"\\"), None);
        assert_eq!(fix("\"\\ud8"), None);
        let fixed = fix(r#"["\udfff","\\\ud800"]"#).unwrap();
        assert_eq!(serde_json::from_str::<Vec<String>>(&fixed).unwrap(), ["\u{FFFD}", "\\\u{FFFD}"]);
    }
}
