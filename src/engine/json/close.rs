//! Tracks, byte by byte, whether a streamed JSON text has closed its top-level object or
//! array. It is the cheap structural half of "a Chat Completions tool call is complete when
//! a later call has begun *and* its arguments parse": the full parse runs only once the
//! brackets balance, so following n streamed bytes costs O(n) in total.

#[derive(Clone, Debug, Default)]
pub struct JsonCloseTracker {
    depth: u32,
    in_string: bool,
    escaped: bool,
    started: bool,
    closed: bool,
    /// Something other than whitespace came after the top-level value closed, or the text
    /// does not start with `{`/`[`: it can only be judged by a full parse at the end.
    irregular: bool,
}

impl JsonCloseTracker {
    pub fn feed(&mut self, piece: &str) {
        if self.irregular {
            return;
        }
        for &b in piece.as_bytes() {
            if self.closed {
                if !b.is_ascii_whitespace() {
                    self.irregular = true;
                    self.closed = false;
                    return;
                }
                continue;
            }
            if !self.started {
                match b {
                    b'{' | b'[' => {
                        self.started = true;
                        self.depth = 1;
                    }
                    b if b.is_ascii_whitespace() => {}
                    _ => {
                        self.irregular = true;
                        return;
                    }
                }
                continue;
            }
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                }
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth = self.depth.saturating_add(1),
                b'}' | b']' => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.depth == 0 {
                        self.closed = true;
                    }
                }
                _ => {}
            }
        }
    }

    /// The top-level object or array has closed (and nothing but whitespace followed).
    pub fn is_closed(&self) -> bool {
        self.closed
    }
}

/// True when `text` is one complete JSON object or array. Checked without building the value
/// (a call's arguments may be megabytes; validating them allocates nothing).
pub fn parses_as_container(text: &str) -> bool {
    matches!(text.trim_start().as_bytes().first(), Some(b'{' | b'['))
        && (crate::engine::json::scan::accepts_json(text)
            || serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn closed_after(pieces: &[&str]) -> bool {
        let mut t = JsonCloseTracker::default();
        for p in pieces {
            t.feed(p);
        }
        t.is_closed()
    }

    #[test]
    fn brackets_inside_strings_do_not_count() {
        assert!(closed_after(&["{\"a\":", "\"}\\\"]\"", "}"]));
        assert!(!closed_after(&["{\"a\":\"}\""]));
        assert!(closed_after(&[" [1,{\"b\":[]}] \n"]));
        assert!(!closed_after(&["{}", "x"]));
        assert!(!closed_after(&["42"]));
        assert!(!closed_after(&[""]));
    }

    #[test]
    fn containers_parse_and_nothing_else_does() {
        for ok in ["{}", " [1,{\"b\":[]}] \n", "{\"a\":\"}\\\"\"}", "[\"\\u00e9\"]"] {
            assert!(parses_as_container(ok), "{ok}");
        }
        for bad in ["", "  ", "42", "\"x\"", "null", "{\"a\":", "{} x", "{}{}", "[1,]", "{\"a\" 1}", "\u{a0}{}"] {
            assert!(!parses_as_container(bad), "{bad}");
        }
    }
}
