//! The streams of each wire format this package decodes, as SSE text a fake server sends.

use serde_json::{json, Value};

pub const KINDS: [&str; 4] = ["openai", "anthropic", "openai_responses", "gemini"];

/// Whether the format shows a call before its input is whole: Gemini's decoder holds a call
/// whose `partialArgs` still stream until it closes, so a cut-off one never reaches the engine
/// (nor the wire) and needs no answer.
pub fn shows_open_calls(kind: &str) -> bool {
    kind != "gemini"
}

pub fn data(v: Value) -> String {
    format!("data: {v}\n\n")
}

/// Text, one complete `send_email` call (`call_1`, to a@b.c), and — where the format streams a
/// call's input — the start of a second (`call_2`) cut off inside its arguments.
pub fn broken_after_a_call(kind: &str, id: &str) -> Vec<String> {
    let (c1, c2) = (format!("{id}_1"), format!("{id}_2"));
    match kind {
        "openai" => vec![
            data(json!({"id": "r", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Sending."}}]})),
            data(
                json!({"id": "r", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": c1, "type": "function",
                "function": {"name": "send_email", "arguments": "{\"to\":\"a@b.c\"}"}}]}}]}),
            ),
            data(
                json!({"id": "r", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1, "id": c2, "type": "function",
                "function": {"name": "send_email", "arguments": "{\"to\":\"x@"}}]}}]}),
            ),
        ],
        "anthropic" => vec![
            data(
                json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [],
                "model": "m", "usage": {"input_tokens": 10, "output_tokens": 1}}}),
            ),
            data(json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})),
            data(
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Sending."}}),
            ),
            data(json!({"type": "content_block_stop", "index": 0})),
            data(
                json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": c1, "name": "send_email", "input": {}}}),
            ),
            data(
                json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"to\":\"a@b.c\"}"}}),
            ),
            data(json!({"type": "content_block_stop", "index": 1})),
            data(
                json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": c2, "name": "send_email", "input": {}}}),
            ),
            data(
                json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{\"to\":\"x@"}}),
            ),
        ],
        "openai_responses" => vec![
            data(json!({"type": "response.created", "response": {"id": "resp_1", "output": []}})),
            data(
                json!({"type": "response.output_item.added", "output_index": 0, "item": {"id": "msg_1", "type": "message", "role": "assistant", "content": []}}),
            ),
            data(
                json!({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": "Sending."}),
            ),
            data(
                json!({"type": "response.output_item.done", "output_index": 0, "item": {"id": "msg_1", "type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": "Sending."}]}}),
            ),
            data(
                json!({"type": "response.output_item.added", "output_index": 1, "item": {"id": "fc_1", "type": "function_call", "call_id": c1, "name": "send_email", "arguments": ""}}),
            ),
            data(
                json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 1, "delta": "{\"to\":\"a@b.c\"}"}),
            ),
            data(
                json!({"type": "response.output_item.done", "output_index": 1, "item": {"id": "fc_1", "type": "function_call", "call_id": c1, "name": "send_email", "arguments": "{\"to\":\"a@b.c\"}"}}),
            ),
            data(
                json!({"type": "response.output_item.added", "output_index": 2, "item": {"id": "fc_2", "type": "function_call", "call_id": c2, "name": "send_email", "arguments": ""}}),
            ),
            data(
                json!({"type": "response.function_call_arguments.delta", "item_id": "fc_2", "output_index": 2, "delta": "{\"to\":\"x@"}),
            ),
        ],
        "gemini" => {
            let chunk = |parts: Value| {
                data(json!({"responseId": "g1", "candidates": [{"content": {"role": "model", "parts": parts}}]}))
            };
            vec![
                chunk(json!([{"text": "Sending."}])),
                chunk(json!([{"functionCall": {"id": c1, "name": "send_email", "args": {"to": "a@b.c"}}}])),
                chunk(json!([{"functionCall": {"id": c2, "name": "send_email", "willContinue": true}}])),
                chunk(
                    json!([{"functionCall": {"partialArgs": [{"jsonPath": "$.to", "stringValue": "x@", "willContinue": true}], "willContinue": true}}]),
                ),
            ]
        }
        _ => unreachable!(),
    }
}

/// Text only, and no end: the stream is cut off before the model said it was done.
pub fn text_only(kind: &str) -> Vec<String> {
    broken_after_a_call(kind, "unused")
        .into_iter()
        .take(match kind {
            "openai" => 1,
            "anthropic" => 3,
            "openai_responses" => 3,
            _ => 1,
        })
        .collect()
}

/// A whole answer: `text`, then the format's end.
pub fn answer(kind: &str, text: &str) -> Vec<String> {
    match kind {
        "openai" => vec![
            data(json!({"id": "r2", "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]})),
            data(json!({"id": "r2", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})),
            "data: [DONE]\n\n".into(),
        ],
        "anthropic" => vec![
            data(
                json!({"type": "message_start", "message": {"id": "msg_2", "type": "message", "role": "assistant", "content": [],
                "model": "m", "usage": {"input_tokens": 10, "output_tokens": 1}}}),
            ),
            data(json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})),
            data(json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}})),
            data(json!({"type": "content_block_stop", "index": 0})),
            data(json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}})),
            data(json!({"type": "message_stop"})),
        ],
        "openai_responses" => vec![
            data(json!({"type": "response.created", "response": {"id": "resp_2", "output": []}})),
            data(
                json!({"type": "response.output_item.added", "output_index": 0, "item": {"id": "msg_2", "type": "message", "role": "assistant", "content": []}}),
            ),
            data(
                json!({"type": "response.output_text.delta", "item_id": "msg_2", "output_index": 0, "content_index": 0, "delta": text}),
            ),
            data(
                json!({"type": "response.output_item.done", "output_index": 0, "item": {"id": "msg_2", "type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": text}]}}),
            ),
            data(
                json!({"type": "response.completed", "response": {"id": "resp_2", "status": "completed", "output": [],
                "usage": {"input_tokens": 10, "output_tokens": 3}}}),
            ),
        ],
        "gemini" => vec![data(
            json!({"responseId": "g2", "candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
            "finishReason": "STOP"}]}),
        )],
        _ => unreachable!(),
    }
}

/// A whole answer that calls `name` once (`id`, with `args`), then the format's end — its last
/// events after the call's own, so a tool that starts at the call's end starts mid-stream.
pub fn one_call(kind: &str, id: &str, name: &str, args: &str) -> Vec<String> {
    match kind {
        "openai" => vec![
            data(
                json!({"id": "r", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Let me add."}}]}),
            ),
            data(
                json!({"id": "r", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": id, "type": "function",
                "function": {"name": name, "arguments": ""}}]}}]}),
            ),
            data(
                json!({"id": "r", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": args}}]}}]}),
            ),
            data(json!({"id": "r", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})),
            data(json!({"id": "r", "choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 5}})),
            "data: [DONE]\n\n".into(),
        ],
        "anthropic" => vec![
            data(
                json!({"type": "message_start", "message": {"id": "msg_c", "type": "message", "role": "assistant", "content": [],
                "model": "m", "usage": {"input_tokens": 11, "output_tokens": 1}}}),
            ),
            data(json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})),
            data(
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Let me add."}}),
            ),
            data(json!({"type": "content_block_stop", "index": 0})),
            data(
                json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
            ),
            data(
                json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": args}}),
            ),
            data(json!({"type": "content_block_stop", "index": 1})),
            data(json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 5}})),
            data(json!({"type": "message_stop"})),
        ],
        "openai_responses" => vec![
            data(json!({"type": "response.created", "response": {"id": "resp_c", "output": []}})),
            data(
                json!({"type": "response.output_item.added", "output_index": 0, "item": {"id": "msg_c", "type": "message", "role": "assistant", "content": []}}),
            ),
            data(
                json!({"type": "response.output_text.delta", "item_id": "msg_c", "output_index": 0, "content_index": 0, "delta": "Let me add."}),
            ),
            data(
                json!({"type": "response.output_item.done", "output_index": 0, "item": {"id": "msg_c", "type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": "Let me add."}]}}),
            ),
            data(
                json!({"type": "response.output_item.added", "output_index": 1, "item": {"id": "fc_c", "type": "function_call", "call_id": id, "name": name, "arguments": ""}}),
            ),
            data(
                json!({"type": "response.function_call_arguments.delta", "item_id": "fc_c", "output_index": 1, "delta": args}),
            ),
            data(
                json!({"type": "response.output_item.done", "output_index": 1, "item": {"id": "fc_c", "type": "function_call", "call_id": id, "name": name, "arguments": args}}),
            ),
            data(
                json!({"type": "response.completed", "response": {"id": "resp_c", "status": "completed", "output": [],
                "usage": {"input_tokens": 11, "output_tokens": 5}}}),
            ),
        ],
        "gemini" => {
            let args: Value = serde_json::from_str(args).expect("args are JSON");
            vec![
                data(
                    json!({"responseId": "gc", "candidates": [{"content": {"role": "model", "parts": [{"text": "Let me add."}]}}]}),
                ),
                data(
                    json!({"responseId": "gc", "candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"id": id, "name": name, "args": args}}]}}]}),
                ),
                data(
                    json!({"responseId": "gc", "candidates": [{"content": {"role": "model", "parts": []}, "finishReason": "STOP"}],
                    "usageMetadata": {"promptTokenCount": 11, "candidatesTokenCount": 5}}),
                ),
            ]
        }
        _ => unreachable!(),
    }
}

/// `chunks` joined and cut again into pieces of `n` bytes (the decoders must not care where).
pub fn resplit(chunks: &[String], n: usize) -> Vec<String> {
    let all: Vec<u8> = chunks.concat().into_bytes();
    // Cut on bytes; a piece that would split a UTF-8 sequence runs on to its end.
    let mut out = Vec::new();
    let mut start = 0;
    while start < all.len() {
        let mut end = (start + n).min(all.len());
        while end < all.len() && (all[end] & 0xC0) == 0x80 {
            end += 1;
        }
        out.push(String::from_utf8(all[start..end].to_vec()).expect("whole characters"));
        start = end;
    }
    out
}
