//! Context compaction, as kimi-cli's `SimpleCompaction` does it: when the context nears its
//! limit, everything but the last two user/assistant messages is summarized by one model
//! call with no tools, and the context becomes the summary plus the kept messages.

use crate::engine::json::Arguments;
use crate::engine::message::{ContentPart, Message, Role};

pub const COMPACTION_SYSTEM_PROMPT: &str = "You are a helpful assistant that compacts conversation context.";
pub const COMPACTION_OUTPUT_PREFIX: &str = "Previous context has been compacted. Here is the compaction output:";
/// Compaction starts at this share of the context window…
pub const TRIGGER_RATIO: f64 = 0.85;
/// …or when fewer than this many tokens are left.
pub const RESERVED_TOKENS: u64 = 50_000;
pub const DEFAULT_PRESERVED_MESSAGES: usize = 2;

const COMPACT_INSTRUCTION: &str = "\
Summarize the conversation above so that it can continue from your summary alone. Keep, in \
order of importance: the user's goals and explicit requests; decisions made and why; facts, \
names, numbers, identifiers and file or resource names that later steps may need; what tools \
were called and what they returned, where it still matters; and what remains to be done. \
Drop greetings, repetition and anything already superseded. Write plain prose and short \
lists, without preamble.";

/// Should the context be compacted before the next step? (Never when no limit is known.)
pub fn should_compact(token_count: u64, max_context_tokens: u64) -> bool {
    max_context_tokens > 0
        && (token_count as f64 >= max_context_tokens as f64 * TRIGGER_RATIO
            || token_count.saturating_add(RESERVED_TOKENS) >= max_context_tokens)
}

/// Splits the history: the message asking the model for a summary of the older part, and
/// the messages kept as they are. `None` when there is nothing to compact.
pub fn prepare(history: &[Message], preserve: usize) -> Option<(Message, Vec<Message>)> {
    if history.is_empty() || preserve == 0 {
        return None;
    }
    let mut seen = 0;
    let mut start = None;
    for (i, m) in history.iter().enumerate().rev() {
        if matches!(m.role, Role::User | Role::Assistant) {
            seen += 1;
            if seen == preserve {
                start = Some(i);
                break;
            }
        }
    }
    let start = start?;
    let (older, kept) = history.split_at(start);
    if older.is_empty() {
        return None;
    }
    let mut content = Vec::new();
    for (i, m) in older.iter().enumerate() {
        let role = m.role.as_str();
        content.push(ContentPart::text(format!("## Message {}\nRole: {role}\nContent:\n", i + 1)));
        content.extend(
            m.content
                .iter()
                .filter(|p| matches!(p, ContentPart::Text { text, .. } if !text.trim().is_empty()))
                .cloned(),
        );
        for call in m.tool_calls.iter().flatten() {
            content.push(ContentPart::text(format!(
                "Tool call `{}`: {}",
                call.function.name,
                Arguments::as_sent(call.function.arguments.as_deref())
            )));
        }
    }
    if !content.iter().any(|p| matches!(p, ContentPart::Text { text, .. } if !text.starts_with("## Message"))) {
        return None; // nothing but headers: an empty summary request would be refused
    }
    content.push(ContentPart::text(format!("\n{COMPACT_INSTRUCTION}")));
    Some((Message::new(Role::User, content), kept.to_vec()))
}

/// The compacted context: the summary (think parts dropped) as a user message, then the
/// kept messages.
pub fn build(summary: &Message, kept: Vec<Message>) -> Vec<Message> {
    let mut content = vec![ContentPart::system(COMPACTION_OUTPUT_PREFIX)];
    content.extend(summary.content.iter().filter(|p| !matches!(p, ContentPart::Think { .. })).cloned());
    let mut out = vec![Message::new(Role::User, content)];
    out.extend(kept);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(role: Role, t: &str) -> Message {
        Message::new(role, vec![ContentPart::text(t)])
    }

    #[test]
    fn thresholds() {
        assert!(!should_compact(10, 0));
        assert!(should_compact(85_000, 100_000) && !should_compact(40_000, 100_000));
        assert!(should_compact(160_000, 200_000) && !should_compact(149_999, 200_000));
        assert!(should_compact(950_000, 1_000_000) && !should_compact(800_000, 1_000_000));
    }

    #[test]
    fn keeps_the_last_two_user_or_assistant_messages() {
        let mut tool = m(Role::Tool, "42");
        tool.tool_call_id = Some("c".into());
        let h =
            vec![m(Role::User, "q1"), m(Role::Assistant, "a1"), m(Role::User, "q2"), tool, m(Role::Assistant, "a2")];
        let (ask, kept) = prepare(&h, 2).unwrap();
        assert_eq!(kept.len(), 3, "q2, the tool result and a2");
        assert!(ask.extract_text("").contains("## Message 2\nRole: assistant"));
        let out =
            build(&Message::new(Role::Assistant, vec![ContentPart::think("hm"), ContentPart::text("summary")]), kept);
        assert_eq!(out.len(), 4);
        assert_eq!(out[0].extract_text(""), format!("<system>{COMPACTION_OUTPUT_PREFIX}</system>summary"));
        assert!(prepare(&h[..2], 2).is_none(), "nothing older than the kept two");
    }
}
