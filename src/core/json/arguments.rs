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

    pub fn text(&self) -> &'a str {
        self.text
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
}
