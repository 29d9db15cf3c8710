//! An answer read again from its first event by a turn recovered after its runtime died (the
//! server kept the answer: OpenAI's Responses API in the background). The recording holds the
//! answer as far as it was stored; the answer read again holds all of it. [`Replay`] drops from
//! what arrives what the recording holds already — checked byte for byte — so nothing is told or
//! assembled twice, and the rest goes on as any stream.
//!
//! What the recording holds is compared by kind, each in its order: the text, the thinking, the
//! calls (by position: their name, and their arguments byte for byte), and every other part whole.
//! Parts may be cut differently by the two readings (a read's parts handed over together, a
//! connection's pieces): only the bytes count. A call is known by the id it was recorded with,
//! whatever id the server sends it under (a call renamed in the turn keeps its new id).

use std::collections::HashMap;

use crate::engine::error::{ChatProviderError, FailureKind};
use crate::engine::message::{ContentPart, StreamedMessagePart, ToolCallPart};

/// The error of an answer read again that is not the one recorded.
#[cold]
#[inline(never)]
fn differs() -> ChatProviderError {
    ChatProviderError::failed(FailureKind::Malformed, "the answer read again is not the one the recording holds")
}

/// What a recording holds of an answer, and how much of it an answer read again has covered.
#[derive(Debug, Default)]
pub struct Replay {
    text: Seen<String>,
    think: Seen<String>,
    others: Seen<Vec<ContentPart>>,
    /// The recorded calls: id, name, arguments; and how many bytes of each were read again.
    calls: Vec<(String, String, String, usize)>,
    /// Each recorded call's index by its id (a fragment that names its call finds it in O(1)).
    recorded_ids: HashMap<String, usize>,
    /// How many of the recorded calls were read again (their start).
    calls_seen: usize,
    /// The server's id of each call read again → its index.
    ids: HashMap<String, usize>,
    /// The call the last part read again belongs to (a fragment without an id is its).
    current: Option<usize>,
}

#[derive(Debug, Default)]
struct Seen<T> {
    have: T,
    at: usize,
}

impl Seen<String> {
    /// The part of `new` past what the recording holds (`None`: `new` is not what it holds).
    fn rest<'a>(&mut self, new: &'a str) -> Option<&'a str> {
        let n = (self.have.len() - self.at).min(new.len());
        if self.have.as_bytes().get(self.at..self.at + n)? != new.as_bytes().get(..n)? {
            return None;
        }
        self.at += n;
        new.get(n..)
    }
}

fn plain(p: &ContentPart) -> Option<(bool, &str)> {
    match p {
        ContentPart::Text { text, extras: None } => Some((true, text)),
        ContentPart::Think { think, encrypted: None } => Some((false, think)),
        _ => None,
    }
}

impl Replay {
    /// Notes a part the recording holds (in the order it was recorded).
    pub fn record(&mut self, p: &StreamedMessagePart) {
        match p {
            StreamedMessagePart::Content(c) => match plain(c) {
                Some((true, t)) => self.text.have.push_str(t),
                Some((false, t)) => self.think.have.push_str(t),
                None => self.others.have.push(c.clone()),
            },
            StreamedMessagePart::ToolCall(c) => {
                self.recorded_ids.insert(c.id.clone(), self.calls.len());
                self.calls.push((
                    c.id.clone(),
                    c.function.name.clone(),
                    c.function.arguments.clone().unwrap_or_default(),
                    0,
                ))
            }
            StreamedMessagePart::ToolCallPart(f) => {
                let target = match &f.tool_call_id {
                    Some(id) => self.recorded_ids.get(id).copied().and_then(|i| self.calls.get_mut(i)),
                    None => self.calls.last_mut(),
                };
                if let (Some(c), Some(a)) = (target, &f.arguments_part) {
                    c.2.push_str(a);
                }
            }
        }
    }

    /// What of `p` the recording does not hold yet (`None`: all of it is held); an error when the
    /// answer read again is not the one recorded.
    pub fn part(&mut self, p: StreamedMessagePart) -> Result<Option<StreamedMessagePart>, ChatProviderError> {
        #[cfg(feature = "planted-bugs")]
        if crate::engine::session::planted::replay_not_dropped() {
            return Ok(Some(p));
        }
        Ok(match p {
            StreamedMessagePart::Content(c) => {
                self.current = None;
                match plain(&c) {
                    Some((is_text, t)) => {
                        let seen = if is_text { &mut self.text } else { &mut self.think };
                        let rest = seen.rest(t).ok_or_else(differs)?;
                        if rest.len() == t.len() {
                            return Ok(Some(StreamedMessagePart::Content(c)));
                        }
                        let rest = rest.to_owned();
                        (!rest.is_empty()).then(|| {
                            StreamedMessagePart::Content(if is_text {
                                ContentPart::Text { text: rest, extras: None }
                            } else {
                                ContentPart::Think { think: rest, encrypted: None }
                            })
                        })
                    }
                    None if self.others.at < self.others.have.len() => {
                        if self.others.have[self.others.at] != c {
                            return Err(differs());
                        }
                        self.others.at += 1;
                        None
                    }
                    None => Some(StreamedMessagePart::Content(c)),
                }
            }
            StreamedMessagePart::ToolCall(mut c) => {
                let i = self.calls_seen;
                let Some(rec) = self.calls.get(i) else {
                    self.current = None;
                    return Ok(Some(StreamedMessagePart::ToolCall(c)));
                };
                if rec.1 != c.function.name {
                    return Err(differs());
                }
                self.calls_seen += 1;
                self.ids.insert(std::mem::take(&mut c.id), i);
                self.current = Some(i);
                self.arguments(i, c.function.arguments.as_deref().unwrap_or_default()).ok_or_else(differs)?
            }
            StreamedMessagePart::ToolCallPart(f) => {
                let target = match &f.tool_call_id {
                    Some(id) => self.ids.get(id).copied(),
                    None => self.current,
                };
                match target {
                    Some(i) => {
                        self.arguments(i, f.arguments_part.as_deref().unwrap_or_default()).ok_or_else(differs)?
                    }
                    None => Some(StreamedMessagePart::ToolCallPart(f)),
                }
            }
        })
    }

    /// Arguments of recorded call `i` read again: what is past the recording goes on as a
    /// fragment of that call, under its recorded id.
    fn arguments(&mut self, i: usize, new: &str) -> Option<Option<StreamedMessagePart>> {
        let (id, _, have, at) = self.calls.get_mut(i)?;
        let n = (have.len() - *at).min(new.len());
        if have.as_bytes().get(*at..*at + n)? != new.as_bytes().get(..n)? {
            return None;
        }
        *at += n;
        let rest = new.get(n..)?;
        Some((!rest.is_empty()).then(|| {
            StreamedMessagePart::ToolCallPart(ToolCallPart {
                arguments_part: Some(rest.to_owned()),
                tool_call_id: Some(id.clone()),
            })
        }))
    }

    /// The id a call read again is known by (a completion names the server's id).
    pub fn id(&self, server: String) -> String {
        match self.ids.get(&server) {
            Some(&i) => self.calls.get(i).map_or(server, |c| c.0.clone()),
            None => server,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::message::{FunctionBody, ToolCall};

    fn text(t: &str) -> StreamedMessagePart {
        StreamedMessagePart::Content(ContentPart::Text { text: t.into(), extras: None })
    }
    fn call(id: &str, name: &str, args: &str) -> StreamedMessagePart {
        StreamedMessagePart::ToolCall(ToolCall {
            kind: Default::default(),
            id: id.into(),
            function: FunctionBody { name: name.into(), arguments: Some(args.into()) },
            extras: None,
        })
    }
    fn frag(args: &str) -> StreamedMessagePart {
        StreamedMessagePart::ToolCallPart(ToolCallPart { arguments_part: Some(args.into()), tool_call_id: None })
    }

    #[test]
    fn what_the_recording_holds_is_dropped_whatever_the_cuts() {
        let mut r = Replay::default();
        for p in [text("Hel"), text("lo wo"), call("c1_2", "add", "{\"a\""), frag(":1")] {
            r.record(&p);
        }
        assert_eq!(r.part(text("Hello")).unwrap(), None);
        assert_eq!(r.part(text(" world")).unwrap(), Some(text("rld")));
        assert_eq!(r.part(call("c1", "add", "")).unwrap(), None);
        assert_eq!(r.part(frag("{\"a\":")).unwrap(), None);
        let rest = r.part(frag("1,\"b\":2}")).unwrap();
        assert_eq!(
            rest,
            Some(StreamedMessagePart::ToolCallPart(ToolCallPart {
                arguments_part: Some(",\"b\":2}".into()),
                tool_call_id: Some("c1_2".into())
            }))
        );
        assert_eq!(r.id("c1".into()), "c1_2");
        // A call past the recording goes on as it came.
        assert_eq!(r.part(call("c2", "add", "{}")).unwrap(), Some(call("c2", "add", "{}")));
        assert_eq!(r.id("c2".into()), "c2");
    }

    #[test]
    fn another_answer_is_refused() {
        let mut r = Replay::default();
        r.record(&text("Hello"));
        assert!(r.part(text("Help")).is_err());
        let mut r = Replay::default();
        r.record(&call("c1", "add", "{}"));
        assert!(r.part(call("c1", "sub", "{}")).is_err());
        let mut r = Replay::default();
        r.record(&call("c1", "add", "{\"a\":1}"));
        assert!(r.part(call("c1", "add", "{\"a\":2}")).is_err());
    }
}
