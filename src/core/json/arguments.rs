//! A completed tool call's arguments, checked once: the one rule for them (missing or empty
//! arguments mean `{}`; anything else must be JSON — whitespace alone is not), applied when the
//! call completes. The malformed-arguments result, repeat detection (the canonical form) and the
//! handler's arguments all come from this one parse.

use serde_json::Value;

/// Arguments that are JSON.
#[derive(Clone, Debug, PartialEq)]
pub struct Arguments {
    value: Value,
}

impl Arguments {
    /// Parses `raw` once; the error is the parser's own message.
    pub fn check(raw: Option<&str>) -> Result<Arguments, String> {
        match raw {
            None | Some("") => Ok(Arguments { value: Value::Object(Default::default()) }),
            Some(text) => serde_json::from_str(text).map(|value| Arguments { value }).map_err(|e| e.to_string()),
        }
    }

    /// The canonical form: object keys sorted, compact (serde_json's map is ordered by key, so
    /// printing the parsed value sorts it). Printed, not parsed again.
    pub fn canonical(&self) -> String {
        self.value.to_string()
    }

    pub fn value(&self) -> &Value {
        &self.value
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
