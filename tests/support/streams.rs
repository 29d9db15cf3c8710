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

