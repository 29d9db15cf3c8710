//! A conversation's context, as kimi-cli keeps it: the history, checkpoints, the token
//! count, and its `context.jsonl` line format.
//!
//! Lines are JSON objects: `{"role":"_system_prompt","content":…}`, one message a line
//! (kosong's shape, `null` fields left out), `{"role":"_checkpoint","id":N}` and
//! `{"role":"_usage","token_count":N}`. A checkpoint an agent's turn writes also names the turn
//! and its step (`"turn":"…","step":n`, fields kimi-cli reads past): the id a recording of that
//! turn carries, by which the two are known to belong together ([`TurnMark`]). The context is sans-IO: every change returns the
//! lines to append to the store, and `revert_to` says the store must be rewritten whole.
//!
//! Token count: the count the provider reported last, plus an estimate (characters / 4) of
//! the text appended since.

use serde_json::Value;

use crate::engine::message::{ContentPart, Message};

#[derive(Clone, Debug, PartialEq)]
enum Record {
    SystemPrompt(String),
    Message(Message),
    Checkpoint(u64, Option<TurnMark>),
    Usage(u64),
}

/// The turn (its id, as its `TurnBegin` recorded it) and the step a checkpoint was written in
/// (0: at the turn's start, before its user message).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TurnMark {
    pub turn: String,
    pub step: u32,
}

impl Record {
    fn to_line(&self) -> String {
        match self {
            // `role` first, as kimi-cli writes them.
            Record::SystemPrompt(p) => {
                format!("{{\"role\":\"_system_prompt\",\"content\":{}}}", Value::from(p.as_str()))
            }
            Record::Message(m) => serde_json::to_string(m).unwrap_or_else(|_| "{}".into()),
            Record::Checkpoint(id, None) => format!("{{\"role\":\"_checkpoint\",\"id\":{id}}}"),
            Record::Checkpoint(id, Some(m)) => format!(
                "{{\"role\":\"_checkpoint\",\"id\":{id},\"turn\":{},\"step\":{}}}",
                Value::from(m.turn.as_str()),
                m.step
            ),
            Record::Usage(n) => format!("{{\"role\":\"_usage\",\"token_count\":{n}}}"),
        }
    }

    fn from_line(line: &str) -> Result<Record, String> {
        match Record::read_line(line) {
            // A lone surrogate escape (kimi-cli's Python writes them for a cut string): U+FFFD.
            Err(e) => {
                crate::engine::json::lone_surrogates_replaced(line).map_or(Err(e), |fixed| Record::read_line(&fixed))
            }
            ok => ok,
        }
    }

    fn read_line(line: &str) -> Result<Record, String> {
        let v: Value = serde_json::from_str(line).map_err(|e| format!("malformed: {e}"))?;
        if !v.is_object() {
            return Err("not a JSON object".into());
        }
        let role = v.get("role").and_then(Value::as_str).ok_or("missing or invalid role")?;
        match role {
            "_system_prompt" => Ok(Record::SystemPrompt(
                v.get("content").and_then(Value::as_str).ok_or("a system prompt without content")?.to_owned(),
            )),
            "_checkpoint" => {
                let id = v.get("id").and_then(Value::as_u64).ok_or("a checkpoint without an id")?;
                let mark = v.get("turn").and_then(Value::as_str).map(|t| TurnMark {
                    turn: t.to_owned(),
                    step: v.get("step").and_then(Value::as_u64).map_or(0, |n| n.min(u32::MAX as u64) as u32),
                });
                Ok(Record::Checkpoint(id, mark))
            }
            // An integer, as kimi-cli takes it (a float such as 5.0 is not one); below 0 reads as 0.
            "_usage" => Ok(Record::Usage(
                v.get("token_count").and_then(Value::as_i64).ok_or("an invalid usage line")?.max(0) as u64,
            )),
            // Parsed again from the text: cheaper in the .wasm than going through `Value`.
            _ => serde_json::from_str(line).map(Record::Message).map_err(|e| e.to_string()),
        }
    }
}

/// Characters of text in a message, for the token estimate.
fn text_chars(m: &Message) -> u64 {
    m.content
        .iter()
        .map(|p| match p {
            ContentPart::Text { text, .. } => text.chars().count() as u64,
            ContentPart::Think { think, .. } => think.chars().count() as u64,
            _ => 0,
        })
        .sum::<u64>()
        + m.tool_calls
            .iter()
            .flatten()
            .map(|c| c.function.arguments.as_deref().map_or(0, |a| a.chars().count() as u64))
            .sum::<u64>()
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Context {
    records: Vec<Record>,
    history: Vec<Message>,
    usage_tokens: u64,
    pending_chars: u64,
    next_checkpoint: u64,
    system_prompt: Option<String>,
    /// The mark of the last checkpoint that carried one.
    mark: Option<TurnMark>,
}

impl Context {
    pub fn new() -> Context {
        Context::default()
    }

    pub fn history(&self) -> &[Message] {
        &self.history
    }

    pub fn system_prompt(&self) -> Option<&str> {
        self.system_prompt.as_deref()
    }

    /// Last reported usage plus characters/4 of what came after it.
    pub fn token_count(&self) -> u64 {
        self.usage_tokens.saturating_add(self.pending_chars / 4)
    }

    pub fn n_checkpoints(&self) -> u64 {
        self.next_checkpoint
    }

    /// The messages written since the last checkpoint (all of them when there is none): in a
    /// turn, what the running step has written of its round.
    pub fn since_last_checkpoint(&self) -> Vec<&Message> {
        let start = self.records.iter().rposition(|r| matches!(r, Record::Checkpoint(..))).map_or(0, |i| i + 1);
        self.records[start..]
            .iter()
            .filter_map(|r| match r {
                Record::Message(m) => Some(m),
                _ => None,
            })
            .collect()
    }

    fn push(&mut self, r: Record) -> String {
        self.apply(&r);
        let line = r.to_line();
        self.records.push(r);
        line
    }

    fn apply(&mut self, r: &Record) {
        match r {
            Record::SystemPrompt(p) => self.system_prompt = Some(p.clone()),
            Record::Message(m) => {
                self.pending_chars = self.pending_chars.saturating_add(text_chars(m));
                self.history.push(m.clone());
            }
            Record::Checkpoint(id, mark) => {
                self.next_checkpoint = id.saturating_add(1);
                if mark.is_some() {
                    self.mark = mark.clone();
                }
            }
            Record::Usage(n) => {
                self.usage_tokens = *n;
                self.pending_chars = 0;
            }
        }
    }

    pub fn write_system_prompt(&mut self, prompt: &str) -> String {
        self.push(Record::SystemPrompt(prompt.to_owned()))
    }

    /// Starts a new checkpoint; returns its id and the line to store.
    pub fn checkpoint(&mut self) -> (u64, String) {
        self.checkpoint_marked(None)
    }

    /// A checkpoint of a turn's (`mark`: which turn, which step), or a plain one.
    pub fn checkpoint_marked(&mut self, mark: Option<TurnMark>) -> (u64, String) {
        let id = self.next_checkpoint;
        (id, self.push(Record::Checkpoint(id, mark)))
    }

    /// The mark of the last checkpoint a turn wrote: which turn the context was last in, and
    /// which of its steps had begun.
    pub fn turn_mark(&self) -> Option<&TurnMark> {
        self.mark.as_ref()
    }

    pub fn append(&mut self, messages: Vec<Message>) -> Vec<String> {
        messages.into_iter().map(|m| self.push(Record::Message(m))).collect()
    }

    pub fn update_token_count(&mut self, n: u64) -> String {
        self.push(Record::Usage(n))
    }

    /// Drops the checkpoint `id` and everything after it. The store must then be rewritten
    /// from [`Context::to_jsonl`].
    pub fn revert_to(&mut self, id: u64) -> Result<(), String> {
        if id >= self.next_checkpoint {
            return Err(format!("Checkpoint {id} does not exist"));
        }
        let cut = self
            .records
            .iter()
            .position(|r| matches!(r, Record::Checkpoint(i, _) if *i == id))
            .ok_or_else(|| format!("Checkpoint {id} does not exist"))?;
        let kept: Vec<Record> = self.records.drain(..cut).collect();
        *self = Context::default();
        for r in kept {
            self.apply(&r);
            self.records.push(r);
        }
        Ok(())
    }

    /// Empties the context (history, checkpoints, usage and system prompt).
    pub fn clear(&mut self) {
        *self = Context::default();
    }

    pub fn to_jsonl(&self) -> String {
        let mut s = String::new();
        for r in &self.records {
            s.push_str(&r.to_line());
            s.push('\n');
        }
        s
    }

    /// Reads `context.jsonl`. Blank lines are skipped, and so is a damaged *last* line (a
    /// write cut short); a damaged line before others is an error naming it.
    /// Reads `context.jsonl` as kimi-cli's `Context.restore` does: a line that is not JSON, not
    /// an object, without a role, an unknown `_` record or an invalid message or record is skipped
    /// — each one given back with its 1-based number and why — and the rest is read. A leading BOM
    /// is ignored (kimi-cli would skip the first line for it).
    pub fn from_jsonl(text: &str) -> (Context, Vec<(usize, String)>) {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let mut ctx = Context::default();
        let mut skipped = Vec::new();
        for (lineno, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            match Record::from_line(line) {
                Ok(r) => {
                    ctx.apply(&r);
                    ctx.records.push(r);
                }
                Err(e) => skipped.push((lineno + 1, e)),
            }
        }
        (ctx, skipped)
    }
}

/// What a [`SharedContext`] tells its store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContextWrite<'a> {
    /// Append this line.
    Line(&'a str),
    /// Replace the whole file with this text (after a revert or a clear).
    Rewrite(&'a str),
}

/// The store: `false` when a write failed (the store keeps its own account of why).
type ContextSink = Box<dyn FnMut(ContextWrite<'_>) -> bool>;

struct ContextCell {
    ctx: Context,
    sink: Option<ContextSink>,
    /// Bumped on every change, so a reader can tell a cached copy is stale.
    version: u64,
    /// A write to the store failed and nobody has been told yet.
    store_failed: bool,
}

/// A context shared by an agent and whoever else holds it, that reports every change to its
/// store (the sink). The sink runs after the context is released, so it may read it.
#[derive(Clone)]
pub struct SharedContext(std::rc::Rc<std::cell::RefCell<ContextCell>>);

impl Default for SharedContext {
    fn default() -> Self {
        SharedContext::new(Context::new())
    }
}

impl SharedContext {
    pub fn new(ctx: Context) -> SharedContext {
        SharedContext(std::rc::Rc::new(std::cell::RefCell::new(ContextCell {
            ctx,
            sink: None,
            version: 0,
            store_failed: false,
        })))
    }

    pub fn set_sink(&self, sink: Option<ContextSink>) {
        self.0.borrow_mut().sink = sink;
    }

    /// Reads the context.
    pub fn read<R>(&self, f: impl FnOnce(&Context) -> R) -> R {
        f(&self.0.borrow().ctx)
    }

    pub fn version(&self) -> u64 {
        self.0.borrow().version
    }

    fn change<R>(&self, f: impl FnOnce(&mut Context) -> (R, Vec<String>, Option<String>)) -> R {
        let (r, lines, rewrite, mut sink) = {
            let mut cell = self.0.borrow_mut();
            cell.version += 1;
            let (r, lines, rewrite) = f(&mut cell.ctx);
            let sink = cell.sink.take();
            (r, lines, rewrite, sink)
        };
        let mut stored = true;
        if let Some(s) = sink.as_mut() {
            if let Some(text) = &rewrite {
                stored &= s(ContextWrite::Rewrite(text));
            }
            for l in &lines {
                stored &= s(ContextWrite::Line(l));
            }
        }
        let mut cell = self.0.borrow_mut();
        if cell.sink.is_none() {
            cell.sink = sink;
        }
        cell.store_failed |= !stored;
        r
    }

    /// Did a write to the store fail since the last time this was asked? (The context itself
    /// has the change; the store does not.)
    pub fn take_store_failure(&self) -> bool {
        std::mem::take(&mut self.0.borrow_mut().store_failed)
    }

    pub fn write_system_prompt(&self, prompt: &str) {
        self.change(|c| ((), vec![c.write_system_prompt(prompt)], None))
    }

    pub fn checkpoint(&self) -> u64 {
        self.checkpoint_marked(None)
    }

    pub fn checkpoint_marked(&self, mark: Option<TurnMark>) -> u64 {
        self.change(|c| {
            let (id, line) = c.checkpoint_marked(mark);
            (id, vec![line], None)
        })
    }

    pub fn append(&self, messages: Vec<Message>) {
        self.change(|c| ((), c.append(messages), None))
    }

    pub fn update_token_count(&self, n: u64) {
        self.change(|c| ((), vec![c.update_token_count(n)], None))
    }

    pub fn revert_to(&self, id: u64) -> Result<(), String> {
        self.change(|c| match c.revert_to(id) {
            Ok(()) => (Ok(()), Vec::new(), Some(c.to_jsonl())),
            Err(e) => (Err(e), Vec::new(), None),
        })
    }

    pub fn clear(&self) {
        self.change(|c| {
            c.clear();
            ((), Vec::new(), Some(String::new()))
        })
    }

    /// Changes the context by `f` and tells the store the whole new file in one rewrite (a
    /// compaction: the store never holds the cleared context without what replaces it).
    pub fn rebuild(&self, f: impl FnOnce(&mut Context)) {
        self.change(|c| {
            f(c);
            ((), Vec::new(), Some(c.to_jsonl()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::message::Role;

    fn user(t: &str) -> Message {
        Message::new(Role::User, vec![ContentPart::text(t)])
    }

    #[test]
    fn lines_checkpoints_revert_and_round_trip() {
        let mut c = Context::new();
        let mut lines = vec![c.write_system_prompt("be brief")];
        lines.push(c.checkpoint().1);
        lines.extend(c.append(vec![user("hello there")]));
        lines.push(c.update_token_count(100));
        assert_eq!(c.token_count(), 100);
        lines.push(c.checkpoint().1);
        lines.extend(c.append(vec![user("12345678")]));
        assert_eq!(c.token_count(), 102, "usage plus characters/4");
        assert_eq!(c.n_checkpoints(), 2);
        assert_eq!(lines[0], r#"{"role":"_system_prompt","content":"be brief"}"#);
        assert_eq!(lines[1], r#"{"role":"_checkpoint","id":0}"#);
        assert_eq!(lines[2], r#"{"role":"user","content":"hello there"}"#);
        assert_eq!(lines[3], r#"{"role":"_usage","token_count":100}"#);
        let text = lines.join("\n") + "\n";
        assert_eq!(c.to_jsonl(), text);
        assert_eq!(Context::from_jsonl(&text), (c.clone(), Vec::new()));

        c.revert_to(1).unwrap();
        assert_eq!(c.history().len(), 1);
        assert_eq!(c.n_checkpoints(), 1);
        assert_eq!(c.token_count(), 100);
        assert_eq!(c.system_prompt(), Some("be brief"));
        assert!(c.revert_to(1).is_err());
        c.revert_to(0).unwrap();
        assert!(c.history().is_empty());
        assert_eq!(c.to_jsonl(), "{\"role\":\"_system_prompt\",\"content\":\"be brief\"}\n");
    }

    #[test]
    fn a_shared_context_tells_its_sink_every_change_and_the_sink_may_read_it() {
        let shared = SharedContext::default();
        let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let (s2, c2) = (seen.clone(), shared.clone());
        shared.set_sink(Some(Box::new(move |w| {
            let n = c2.read(|c| c.history().len());
            s2.borrow_mut().push(format!("{w:?} with {n}"));
            !matches!(w, ContextWrite::Rewrite(_))
        })));
        shared.checkpoint();
        shared.append(vec![user("hi")]);
        assert!(!shared.take_store_failure());
        shared.revert_to(0).unwrap();
        assert!(shared.take_store_failure(), "the store refused the rewrite");
        assert!(!shared.take_store_failure());
        assert!(shared.revert_to(3).is_err());
        let seen = seen.borrow();
        assert_eq!(seen[0], r#"Line("{\"role\":\"_checkpoint\",\"id\":0}") with 0"#);
        assert!(seen[1].ends_with("with 1"));
        assert_eq!(seen[2], r#"Rewrite("") with 0"#);
        assert_eq!(seen.len(), 3);
    }

    #[test]
    fn damaged_lines() {
        let good = "{\"role\":\"user\",\"content\":\"a\"}\n";
        let (c, skipped) = Context::from_jsonl(&format!("{good}{{\"role\":\"user\",\"cont"));
        assert_eq!((c.history().len(), skipped.len(), skipped[0].0), (1, 1, 2));
        let file = format!(
            "\u{feff}{good}{{broken\n[1,2]\n{{\"content\":\"x\"}}\n{{\"role\":\"_mystery\"}}\n{{\"role\":\"_usage\",\"token_count\":5.0}}\n{{\"role\":\"wizard\",\"content\":\"x\"}}\n{good}"
        );
        let (c, skipped) = Context::from_jsonl(&file);
        assert_eq!(c.history().len(), 2, "the BOM line and the last line are read");
        assert_eq!(skipped.iter().map(|(n, _)| *n).collect::<Vec<_>>(), [2, 3, 4, 5, 6, 7]);
        assert_eq!(c.token_count(), 0, "a float count is skipped, as kimi-cli does");
        assert!(Context::from_jsonl("").0.history().is_empty());
    }
}
