//! Wire messages as the AI SDK's UI message chunks (the protocol `useChat` reads): the one reader
//! of a turn's messages for a UI, so every host (a `Response` in Node, a Worker's session, a
//! page) makes the same chunks of the same messages. Text and thinking become `text-*` and
//! `reasoning-*` blocks; a call streams as `tool-input-start`/`-delta`, its input is
//! `tool-input-available` once the call is complete (its result, an approval request, or the end
//! of its step), its result `tool-output-available`/`-error`, or `tool-output-denied` when it is
//! the rejection of a refused approval (a tool that asked mid-run and returned something of its own
//! after the refusal shows what it returned); approvals are `tool-approval-request`/`-response`;
//! steps are `start-step`/`finish-step`, a retried step's void attempt a `reset-step`.

use serde_json::{Map, Value};

use super::soul::approval::rejection;
use super::soul::wire::record_message;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Block {
    Text,
    Reasoning,
}

impl Block {
    fn name(self) -> &'static str {
        match self {
            Block::Text => "text",
            Block::Reasoning => "reasoning",
        }
    }
}

struct Call {
    id: String,
    name: String,
    args: String,
    available: bool,
}

/// How the message ends: `finish` (done, or `pause`: an approval the client answers in its next
/// request), `abort` (cancelled, with a reason), or `error` with its words.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UiEnd {
    pub cancelled: Option<String>,
    pub error: Option<String>,
    pub pause: bool,
}

/// One assistant message's chunker: `push` each wire message in order, `end` once. Chunks come
/// out as JSON text (written by hand: no derived writer is compiled for them).
#[derive(Default)]
pub struct UiChunker {
    message_id: Option<String>,
    started: bool,
    n: u32,
    block: Option<(Block, String)>,
    step_open: bool,
    calls: Vec<Call>,
    last_call: Option<String>,
    /// Approval request id → the call it asked about.
    approvals: Vec<(String, String)>,
    /// Calls whose approval was refused, with the user's feedback.
    denied: Vec<(String, String)>,
    /// Sub-agent calls' text so far, and how much of it was shown.
    subagents: Vec<(String, String, usize)>,
}

const FINISH_STEP: &str = "{\"type\":\"finish-step\"}";

/// `text` as a JSON string.
fn q(text: &str) -> String {
    Value::from(text).to_string()
}

fn delta(id: &str, part: &str) -> String {
    format!("{{\"type\":\"tool-input-delta\",\"toolCallId\":{},\"inputTextDelta\":{}}}", q(id), q(part))
}

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or_default()
}

impl UiChunker {
    pub fn new(message_id: Option<String>) -> UiChunker {
        UiChunker { message_id, ..UiChunker::default() }
    }

    /// The chunk that opens the message (once; empty after).
    pub fn start(&mut self) -> Vec<String> {
        if self.started {
            return Vec::new();
        }
        self.started = true;
        vec![match &self.message_id {
            Some(id) => format!("{{\"type\":\"start\",\"messageId\":{}}}", q(id)),
            None => "{\"type\":\"start\"}".to_owned(),
        }]
    }

    fn close(&mut self, out: &mut Vec<String>) {
        if let Some((kind, id)) = self.block.take() {
            out.push(format!("{{\"type\":\"{}-end\",\"id\":\"{id}\"}}", kind.name()));
        }
    }

    fn open(&mut self, kind: Block, out: &mut Vec<String>) -> String {
        if let Some((k, id)) = &self.block {
            if *k == kind {
                return id.clone();
            }
        }
        self.close(out);
        self.n += 1;
        let id = format!("b{}", self.n);
        out.push(format!("{{\"type\":\"{}-start\",\"id\":\"{id}\"}}", kind.name()));
        self.block = Some((kind, id.clone()));
        id
    }

    fn available(&mut self, id: &str, out: &mut Vec<String>) {
        let Some(c) = self.calls.iter_mut().find(|c| c.id == id) else { return };
        if c.available {
            return;
        }
        c.available = true;
        let head = format!("\"toolCallId\":{},\"toolName\":{}", q(id), q(&c.name));
        let input =
            if c.args.is_empty() { Ok(Value::Object(Map::new())) } else { serde_json::from_str::<Value>(&c.args) };
        out.push(match input {
            Ok(input) => format!("{{\"type\":\"tool-input-available\",{head},\"input\":{input}}}"),
            Err(e) => format!(
                "{{\"type\":\"tool-input-error\",{head},\"input\":{},\"errorText\":{}}}",
                q(&c.args),
                q(&format!("the arguments are not JSON: {e}"))
            ),
        });
    }

    fn end_step(&mut self, out: &mut Vec<String>) {
        self.close(out);
        let ids: Vec<String> = self.calls.iter().map(|c| c.id.clone()).collect();
        for id in ids {
            self.available(&id, out);
        }
        if self.step_open {
            out.push(FINISH_STEP.to_owned());
        }
        self.step_open = false;
    }

    /// The chunks of one `wire.jsonl` record line (nothing but the start for a line that is not
    /// a record).
    pub fn push_line(&mut self, line: &str) -> Vec<String> {
        match record_message(line).and_then(|m| serde_json::from_str::<Value>(m.get()).ok()) {
            Some(v) => self.push_value(&v),
            None => self.start(),
        }
    }

    /// The chunks of one wire message as JSON (`{type, payload}`).
    pub fn push_value(&mut self, m: &Value) -> Vec<String> {
        let mut out = self.start();
        let empty = Value::Object(Map::new());
        let p = m.get("payload").filter(|p| p.is_object()).unwrap_or(&empty);
        match s(m, "type") {
            "StepBegin" => {
                self.end_step(&mut out);
                self.calls.clear();
                out.push("{\"type\":\"start-step\"}".to_owned());
                self.step_open = true;
            }
            "StepRetry" => {
                // The failed attempt's parts are void (as a UI drops them at a StepRetry).
                self.block = None;
                self.calls.clear();
                out.push("{\"type\":\"reset-step\"}".to_owned());
            }
            "ContentPart" => match s(p, "type") {
                "text" if !s(p, "text").is_empty() && p.get("extras").and_then(|e| e.get("server_tool")).is_none() => {
                    let id = self.open(Block::Text, &mut out);
                    out.push(format!("{{\"type\":\"text-delta\",\"id\":\"{id}\",\"delta\":{}}}", q(s(p, "text"))));
                }
                "think" if !s(p, "think").is_empty() => {
                    let id = self.open(Block::Reasoning, &mut out);
                    out.push(format!(
                        "{{\"type\":\"reasoning-delta\",\"id\":\"{id}\",\"delta\":{}}}",
                        q(s(p, "think"))
                    ));
                }
                _ => {}
            },
            "ToolCall" => {
                self.close(&mut out);
                let id = s(p, "id").to_owned();
                let function = p.get("function").unwrap_or(&empty);
                let (name, args) = (s(function, "name").to_owned(), s(function, "arguments").to_owned());
                out.push(format!(
                    "{{\"type\":\"tool-input-start\",\"toolCallId\":{},\"toolName\":{}}}",
                    q(&id),
                    q(&name)
                ));
                if !args.is_empty() {
                    out.push(delta(&id, &args));
                }
                self.calls.retain(|c| c.id != id);
                self.calls.push(Call { id: id.clone(), name, args, available: false });
                self.last_call = Some(id);
            }
            "ToolCallPart" => {
                // A fragment that names no call joins the last one (kosong's merge rule).
                let id =
                    p.get("tool_call_id").and_then(Value::as_str).map(str::to_owned).or_else(|| self.last_call.clone());
                let part = s(p, "arguments_part");
                if let Some(c) = id.and_then(|id| self.calls.iter_mut().find(|c| c.id == id)) {
                    if !c.available && !part.is_empty() {
                        c.args.push_str(part);
                        out.push(delta(&c.id, part));
                    }
                }
            }
            "ApprovalRequest" => {
                self.close(&mut out);
                let (id, call) = (s(p, "id").to_owned(), s(p, "tool_call_id").to_owned());
                self.available(&call, &mut out);
                out.push(format!(
                    "{{\"type\":\"tool-approval-request\",\"approvalId\":{},\"toolCallId\":{}}}",
                    q(&id),
                    q(&call)
                ));
                self.approvals.push((id, call));
            }
            "ApprovalResponse" => {
                let id = s(p, "request_id");
                let approved = s(p, "response") != "reject";
                let feedback = s(p, "feedback");
                if !approved {
                    if let Some((_, call)) = self.approvals.iter().find(|(a, _)| a == id) {
                        self.denied.push((call.clone(), feedback.to_owned()));
                    }
                }
                let reason = if feedback.is_empty() { String::new() } else { format!(",\"reason\":{}", q(feedback)) };
                out.push(format!(
                    "{{\"type\":\"tool-approval-response\",\"approvalId\":{},\"approved\":{approved}{reason}}}",
                    q(id)
                ));
            }
            "ToolResult" => {
                let id = s(p, "tool_call_id").to_owned();
                self.close(&mut out);
                self.available(&id, &mut out);
                let rv = p.get("return_value").unwrap_or(&empty);
                // Denied only when the result is the refusal's own: a handler that asked mid-run
                // and went on after a refusal returned something of its own, which is shown.
                let refusal = self.denied.iter().find(|(call, _)| *call == id).is_some_and(|(_, feedback)| {
                    rv.get("is_error").and_then(Value::as_bool) == Some(true)
                        && s(rv, "message") == rejection(feedback).message
                });
                if refusal {
                    out.push(format!("{{\"type\":\"tool-output-denied\",\"toolCallId\":{}}}", q(&id)));
                } else if rv.get("is_error").and_then(Value::as_bool).unwrap_or(false) {
                    let message = s(rv, "message");
                    let text = if !message.is_empty() {
                        message
                    } else {
                        rv.get("output").and_then(Value::as_str).unwrap_or("error")
                    };
                    out.push(format!(
                        "{{\"type\":\"tool-output-error\",\"toolCallId\":{},\"errorText\":{}}}",
                        q(&id),
                        q(text)
                    ));
                } else {
                    let output = rv.get("output").unwrap_or(&Value::Null);
                    out.push(format!(
                        "{{\"type\":\"tool-output-available\",\"toolCallId\":{},\"output\":{output}}}",
                        q(&id)
                    ));
                }
            }
            "StatusUpdate" => {
                if let Some(usage) = p.get("token_usage").filter(|u| !u.is_null()) {
                    let tokens = p.get("context_tokens").unwrap_or(&Value::Null);
                    out.push(format!(
                        "{{\"type\":\"message-metadata\",\"messageMetadata\":{{\"usage\":{usage},\"contextTokens\":{tokens}}}}}"
                    ));
                }
            }
            // A sub-agent's text is its call's preliminary output (the AI SDK's streaming tool
            // output), shown when it has doubled since last shown and at each of its steps' ends:
            // what is written stays linear in the text however finely it comes.
            "SubagentEvent" => {
                let call = s(p, "parent_tool_call_id");
                let event = p.get("event").unwrap_or(&empty);
                let kind = s(event, "type");
                let payload = event.get("payload").unwrap_or(&empty);
                let i = match self.subagents.iter().position(|(c, _, _)| c == call) {
                    Some(i) => i,
                    None => {
                        self.subagents.push((call.to_owned(), String::new(), 0));
                        self.subagents.len() - 1
                    }
                };
                let (_, text, shown) = &mut self.subagents[i];
                if kind == "ContentPart" && s(payload, "type") == "text" {
                    text.push_str(s(payload, "text"));
                }
                let step_end = kind == "StatusUpdate" || kind == "TurnEnd";
                if text.len() > *shown && (step_end || text.len() >= 2 * *shown) {
                    *shown = text.len();
                    let chunk = format!(
                        "{{\"type\":\"tool-output-available\",\"toolCallId\":{},\"output\":{},\"preliminary\":true}}",
                        q(call),
                        q(text)
                    );
                    let call = call.to_owned();
                    self.close(&mut out);
                    self.available(&call, &mut out);
                    out.push(chunk);
                }
            }
            "TurnEnd" => self.end_step(&mut out),
            _ => {} // TurnBegin, StepInterrupted, compaction, a tool's own messages: nothing to show
        }
        out
    }

    /// The chunks that end the message.
    pub fn end(&mut self, end: &UiEnd) -> Vec<String> {
        let mut out = self.start();
        self.close(&mut out);
        if self.step_open && (end.error.is_some() || end.cancelled.is_some() || end.pause) {
            out.push(FINISH_STEP.to_owned());
            self.step_open = false;
        }
        out.push(if let Some(reason) = &end.cancelled {
            format!("{{\"type\":\"abort\",\"reason\":{}}}", q(reason))
        } else if let Some(error) = &end.error {
            format!("{{\"type\":\"error\",\"errorText\":{}}}", q(error))
        } else {
            let why = if end.pause { "tool-calls" } else { "stop" };
            format!("{{\"type\":\"finish\",\"finishReason\":\"{why}\"}}")
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use serde_json::json;

    fn parse(chunks: Vec<String>) -> Vec<Value> {
        chunks.iter().map(|c| serde_json::from_str(c).expect("each chunk is JSON")).collect()
    }
    fn kinds(chunks: &[Value]) -> Vec<&str> {
        chunks.iter().map(|c| s(c, "type")).collect()
    }

    #[test]
    fn a_refused_call_is_denied_only_when_its_result_is_the_refusal() {
        let mut c = UiChunker::new(Some("m1".into()));
        let msg = |t: &str, p: Value| json!({"type": t, "payload": p});
        c.push_value(&msg("StepBegin", json!({"n": 1})));
        c.push_value(&msg(
            "ToolCall",
            json!({"type": "function", "id": "a", "function": {"name": "pay", "arguments": "{}"}}),
        ));
        c.push_value(&msg(
            "ToolCall",
            json!({"type": "function", "id": "b", "function": {"name": "pay", "arguments": "{}"}}),
        ));
        for (req, call) in [("r1", "a"), ("r2", "b")] {
            c.push_value(&msg("ApprovalRequest", json!({"id": req, "tool_call_id": call, "sender": "pay", "action": "pay", "description": "", "display": []})));
            c.push_value(&msg("ApprovalResponse", json!({"request_id": req, "response": "reject", "feedback": "no"})));
        }
        let refused = serde_json::to_value(rejection("no")).unwrap_or_default();
        let a = parse(c.push_value(&msg("ToolResult", json!({"tool_call_id": "a", "return_value": refused}))));
        assert_eq!(kinds(&a), ["tool-output-denied"]);
        let own = json!({"is_error": false, "output": "not paid, as asked", "message": "", "display": []});
        let b = parse(c.push_value(&msg("ToolResult", json!({"tool_call_id": "b", "return_value": own}))));
        assert_eq!(kinds(&b), ["tool-output-available"], "the handler's own answer after a refusal is shown");
        assert_eq!(b[0]["output"], "not paid, as asked");
    }

    #[test]
    fn a_sub_agents_text_is_its_calls_preliminary_output_written_in_linear_bytes() {
        let mut c = UiChunker::new(None);
        let msg = |t: &str, p: Value| json!({"type": t, "payload": p});
        let sub = |e: Value| {
            msg(
                "SubagentEvent",
                json!({"parent_tool_call_id": "c1", "agent_id": "a1", "subagent_type": "x", "event": e}),
            )
        };
        c.push_value(&msg("StepBegin", json!({"n": 1})));
        c.push_value(&msg(
            "ToolCall",
            json!({"type": "function", "id": "c1", "function": {"name": "x", "arguments": "{\"prompt\":\"p\"}"}}),
        ));
        let mut chunks = Vec::new();
        let n = 20_000;
        for _ in 0..n {
            chunks.extend(c.push_value(&sub(msg("ContentPart", json!({"type": "text", "text": "a"})))));
        }
        chunks.extend(c.push_value(&sub(msg("StatusUpdate", json!({"token_usage": null})))));
        let bytes: usize = chunks.iter().map(String::len).sum();
        assert!(bytes < 4 * n + 10_000, "{bytes} bytes for {n} characters: linear");
        let v = parse(chunks);
        assert_eq!(v[0]["type"], "tool-input-available", "the call's input before its first output");
        let outputs: Vec<&Value> = v.iter().filter(|c| c["type"] == "tool-output-available").collect();
        assert!(outputs.len() <= 20, "{}", outputs.len());
        assert!(outputs.iter().all(|o| o["preliminary"] == true && o["toolCallId"] == "c1"));
        assert_eq!(outputs.last().unwrap()["output"].as_str().unwrap().len(), n, "the step's end shows all of it");
        // Its result comes after, whole and final.
        let r = json!({"is_error": false, "output": "agent_id: a1", "message": "", "display": []});
        let done = parse(c.push_value(&msg("ToolResult", json!({"tool_call_id": "c1", "return_value": r}))));
        assert_eq!(kinds(&done), ["tool-output-available"]);
        assert!(done[0].get("preliminary").is_none());
    }

    #[test]
    fn a_fragment_with_no_id_joins_the_last_call_and_a_retry_voids_its_attempt() {
        let mut c = UiChunker::new(None);
        let msg = |t: &str, p: Value| json!({"type": t, "payload": p});
        assert_eq!(kinds(&parse(c.push_value(&msg("StepBegin", json!({"n": 1}))))), ["start", "start-step"]);
        c.push_value(&msg(
            "ToolCall",
            json!({"type": "function", "id": "x", "function": {"name": "f", "arguments": "{\"a\""}}),
        ));
        let d = parse(c.push_value(&msg("ToolCallPart", json!({"arguments_part": ":1}"}))));
        assert_eq!(d[0]["toolCallId"], "x");
        let r = parse(c.push_value(&msg("StepRetry", json!({"n": 1}))));
        assert_eq!(kinds(&r), ["reset-step"]);
        // The void attempt's call is gone: the step's end makes nothing of it.
        let e = parse(c.push_value(&msg("TurnEnd", json!({}))));
        assert_eq!(kinds(&e), ["finish-step"]);
        let end = parse(c.end(&UiEnd::default()));
        assert_eq!(kinds(&end), ["finish"]);
        // A line that is not a record is nothing.
        assert!(c.push_line("{damaged").is_empty());
    }
}
