//! Repeated tool calls, as kimi-cli's toolset tracks them within a turn.
//!
//! A call's key is its tool name and its arguments in canonical form (`json::Arguments`: parsed
//! once when the call completed, keys sorted, compact). The *streak* is how many calls in a row, across steps, had the same key. A call
//! whose key an earlier step already made gets a `<system-reminder>` appended to its output
//! from a streak of 3 (stronger at 5 and 8); at 12 the turn stops after that step. Two calls
//! with the same key in one step run the tool once: the second gets the first one's result.

use std::collections::HashSet;

use crate::engine::message::ContentPart;
use crate::engine::toolset::{ToolOutput, ToolReturnValue};

pub const REMINDER_1_START: u32 = 3;
pub const REMINDER_2_START: u32 = 5;
pub const REMINDER_3_START: u32 = 8;
/// The streak that stops the turn.
pub const FORCE_STOP_STREAK: u32 = 12;

const REMINDER_1: &str =
    "\n\n<system-reminder>\nYou are repeating the exact same tool call with identical parameters. \
Please carefully analyze the previous result. If the task is not yet complete, try a different method or \
parameters instead of repeating the same call.\n</system-reminder>";

const REMINDER_3: &str =
    "\n\n<system-reminder>\nYou are stuck in a dead end and have repeatedly made the same function \
call without progress.\nStop all function calls immediately. Do not call any tool in your next response.\nIn \
analysis, review the current execution state and identify why progress is blocked.\nThen return a text-only \
summary to the user that reports the current problem, what has already been tried, and what information or \
decision is needed next.\n</system-reminder>";

fn reminder_2(tool: &str, count: u32, args: &str) -> String {
    format!(
        "\n\n<system-reminder>\nYou have repeatedly called the same tool with identical parameters many times.\n\
Repeated tool call detected:\n- tool: {tool}\n- repeated_times: {count}\n- arguments: {args}\n\
The previous repeated calls did not make progress. Do not call this exact same tool with the exact same \
arguments again.\nCarefully inspect the latest tool result and choose a different next action, different \
parameters, or finish the task if enough evidence has been gathered.\n</system-reminder>"
    )
}

/// A call's identity for repeat detection: the tool's name and canonical arguments.
pub type CallKey = (String, String);

/// What the tracker says of a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The same key was called earlier in this step: give it that call's result.
    SameStep,
    /// Run it; append `reminder` to its output when there is one.
    Run { reminder: Option<String> },
}

/// The repeat state of a turn. Every call costs O(1) (sets and running counts, no scans).
#[derive(Default)]
pub struct RepeatTracker {
    /// Keys of the calls of earlier steps.
    seen: HashSet<CallKey>,
    /// The streak as the last finished step left it.
    streak_key: Option<CallKey>,
    streak: u32,
    /// This step's calls so far, and the streak through them.
    current: Vec<CallKey>,
    current_set: HashSet<CallKey>,
    run_key: Option<CallKey>,
    run: u32,
    force_stop: Option<(String, u32)>,
}

impl RepeatTracker {
    /// A step (or a retried attempt of it) begins: its calls so far are forgotten.
    pub fn begin_attempt(&mut self) {
        self.current.clear();
        self.current_set.clear();
        self.run_key = self.streak_key.clone();
        self.run = self.streak;
        self.force_stop = None;
    }

    /// Classifies the next call of this step.
    pub fn on_call(&mut self, key: &CallKey) -> Verdict {
        if self.run_key.as_ref() == Some(key) {
            self.run += 1;
        } else {
            self.run_key = Some(key.clone());
            self.run = 1;
        }
        self.current.push(key.clone());
        if !self.current_set.insert(key.clone()) {
            return Verdict::SameStep;
        }
        if !self.seen.contains(key) {
            return Verdict::Run { reminder: None };
        }
        let streak = self.run;
        let (tool, args) = key;
        let reminder = if streak >= REMINDER_3_START {
            Some(REMINDER_3.to_owned())
        } else if streak >= REMINDER_2_START {
            Some(reminder_2(tool, streak, args))
        } else if streak >= REMINDER_1_START {
            Some(REMINDER_1.to_owned())
        } else {
            None
        };
        if streak >= FORCE_STOP_STREAK {
            self.force_stop = Some((tool.clone(), streak));
        }
        Verdict::Run { reminder }
    }

    /// The step is over: its calls extend the streak and become "seen".
    pub fn end_step(&mut self) {
        self.streak_key = self.run_key.clone();
        self.streak = self.run;
        self.seen.extend(self.current.drain(..));
        self.current_set.clear();
    }

    /// The tool and streak that stop the turn, if this step reached [`FORCE_STOP_STREAK`].
    pub fn force_stop(&self) -> Option<(String, u32)> {
        self.force_stop.clone()
    }
}

/// Appends a reminder to a tool's output: to a text output, or to its last text part (a new
/// text part when the last part is not text).
pub fn append_reminder(rv: &mut ToolReturnValue, reminder: &str) {
    match &mut rv.output {
        ToolOutput::Text(t) => t.push_str(reminder),
        ToolOutput::Parts(parts) => match parts.last_mut() {
            Some(ContentPart::Text { text, .. }) => text.push_str(reminder),
            _ => parts.push(ContentPart::text(reminder)),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(args: &str) -> CallKey {
        ("plus".into(), crate::engine::json::Arguments::check(Some(args)).unwrap().canonical())
    }

    #[test]
    fn reminders_grow_with_the_streak_and_twelve_stops() {
        let mut t = RepeatTracker::default();
        let mut seen = Vec::new();
        for step in 1..=12 {
            t.begin_attempt();
            let v = t.on_call(&key(r#"{"a":1}"#));
            seen.push(match v {
                Verdict::Run { reminder: None } => 0,
                Verdict::Run { reminder: Some(r) } if r.contains("exact same tool call") => 1,
                Verdict::Run { reminder: Some(r) } if r.contains("repeated_times: ") => {
                    assert!(r.contains(&format!("repeated_times: {step}")) && r.contains(r#"arguments: {"a":1}"#));
                    2
                }
                Verdict::Run { reminder: Some(r) } if r.contains("dead end") => 3,
                other => panic!("{other:?}"),
            });
            assert_eq!(t.force_stop().is_some(), step == 12);
            t.end_step();
        }
        assert_eq!(seen, [0, 0, 1, 1, 2, 2, 2, 3, 3, 3, 3, 3]);
    }

    #[test]
    fn another_call_breaks_the_streak_and_duplicates_in_a_step_share_a_result() {
        let mut t = RepeatTracker::default();
        t.begin_attempt();
        assert_eq!(t.on_call(&key(r#"{"a":1}"#)), Verdict::Run { reminder: None });
        assert_eq!(t.on_call(&key(r#"{ "a" : 1 }"#)), Verdict::SameStep);
        t.end_step();
        t.begin_attempt();
        // streak 3 (two calls in step 1, this one): seen before, so a reminder
        assert!(matches!(t.on_call(&key(r#"{"a":1}"#)), Verdict::Run { reminder: Some(_) }));
        t.end_step();
        t.begin_attempt();
        assert_eq!(t.on_call(&key(r#"{"a":2}"#)), Verdict::Run { reminder: None });
        t.end_step();
        t.begin_attempt();
        assert_eq!(t.on_call(&key(r#"{"a":1}"#)), Verdict::Run { reminder: None }, "the streak was broken");
    }

    #[test]
    fn reminders_go_after_the_output() {
        let mut rv = ToolReturnValue::ok(ToolOutput::Text("42".into()), "", "");
        append_reminder(&mut rv, "!");
        assert_eq!(rv.output, ToolOutput::Text("42!".into()));
        let mut rv = ToolReturnValue::ok(ToolOutput::Parts(vec![ContentPart::think("x")]), "", "");
        append_reminder(&mut rv, "!");
        assert_eq!(rv.output, ToolOutput::Parts(vec![ContentPart::think("x"), ContentPart::text("!")]));
    }
}
