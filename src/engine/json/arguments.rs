//! A completed tool call's arguments, checked once: the one rule for them (missing or empty
//! arguments mean `{}`; anything else must be JSON — whitespace alone is not), applied when the
//! call completes, by one scan (`scan::accepts_json`; serde_json only decides what the scanner
//! cannot). The malformed-arguments result and the handler's arguments come from that check; the
//! canonical form repeat detection keys on is made once, when a turn asks for it.

use serde_json::Value;

use super::scan::accepts_json;

/// Arguments that are JSON: the call's own text (`{}` for none).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Arguments<'a> {
    text: &'a str,
}

impl<'a> Arguments<'a> {
    /// Checks `raw`; the error is serde_json's own message.
    pub fn check(raw: Option<&'a str>) -> Result<Arguments<'a>, String> {
        let text = match raw {
            None | Some("") => "{}",
            Some(t) => t,
        };
        if !accepts_json(text) {
            serde_json::from_str::<serde::de::IgnoredAny>(text).map_err(|e| e.to_string())?;
        }
        Ok(Arguments { text })
    }

    /// Arguments the stream's decoder already parsed as JSON (a non-empty text).
    pub(crate) fn parsed(text: &'a str) -> Arguments<'a> {
        Arguments { text }
    }

    pub fn text(&self) -> &'a str {
        self.text
    }

    /// A call's arguments as a history sends them back in a format that takes text (Chat
    /// Completions, Responses) or shows them (a compaction's summary request): the rule's `{}`
    /// for none, the model's own text otherwise, even when it was not JSON (what the model wrote
    /// is what it is shown).
    pub fn as_sent(raw: Option<&str>) -> &str {
        match raw {
            None | Some("") => "{}",
            Some(t) => t,
        }
    }

    /// A call's arguments as a format that takes only a JSON object sends them back (Anthropic's
    /// `input`, Gemini's `args`): the object when the arguments are one; `{}` for none, and for
    /// arguments that never were an object (malformed, or a bare array or string: the call got
    /// an error result, and the model was asked to send them again).
    pub fn as_object(raw: Option<&str>) -> Value {
        Arguments::check(raw)
            .ok()
            .and_then(|a| serde_json::from_str::<Value>(a.text).ok())
            .filter(Value::is_object)
            .unwrap_or_else(|| Value::Object(serde_json::Map::new()))
    }

    /// The canonical form: object keys sorted at every depth, compact. (serde_json keeps a map's
    /// keys in the order they came, so a caller's schema goes out as written: they are sorted here.)
    pub fn canonical(&self) -> String {
        serde_json::from_str::<Value>(self.text).map_or_else(
            |_| self.text.to_owned(),
            |mut v| {
                sort_keys(&mut v);
                v.to_string()
            },
        )
    }
}

fn sort_keys(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.sort_keys();
            m.values_mut().for_each(sort_keys);
        }
        Value::Array(a) => a.iter_mut().for_each(sort_keys),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_and_the_canonical_form() {
        assert_eq!(Arguments::check(None).unwrap().canonical(), "{}");
        assert_eq!(Arguments::check(Some("")).unwrap().canonical(), "{}");
        assert_eq!(
            Arguments::check(Some(r#"{ "b": 1, "a": {"y": [1, 2], "x": "é"} }"#)).unwrap().canonical(),
            r#"{"a":{"x":"é","y":[1,2]},"b":1}"#
        );
        assert!(Arguments::check(Some("  ")).is_err(), "whitespace alone is not JSON");
        assert!(Arguments::check(Some("{bad")).unwrap_err().contains("line 1"));
    }

    #[test]
    fn the_wire_forms_take_the_same_rule() {
        use serde_json::json;
        for none in [None, Some("")] {
            assert_eq!(Arguments::as_sent(none), "{}");
            assert_eq!(Arguments::as_object(none), json!({}));
        }
        assert_eq!(Arguments::as_sent(Some(r#"{"a":1}"#)), r#"{"a":1}"#);
        assert_eq!(Arguments::as_sent(Some("{bad")), "{bad", "the model is shown what it wrote");
        assert_eq!(Arguments::as_object(Some(r#"{"a":[1]}"#)), json!({"a": [1]}));
        for not_an_object in ["{bad", "[1,2]", "\"x\"", "  ", "null"] {
            assert_eq!(Arguments::as_object(Some(not_an_object)), json!({}), "{not_an_object}");
        }
    }
}
