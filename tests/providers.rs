//! Every provider against byte streams in its documented format (fixtures in
//! `tests/fixtures/*.sse`, each the same answer: a think part, text, two parallel calls, usage
//! with cache) and request bodies against reviewed snapshots (`tests/fixtures/*.request.json`).
//!
//! Snapshots: `UPDATE_SNAPSHOTS=1 cargo test` rewrites them; a missing one fails.

use serde_json::{json, Value};

use kosong_wasm::engine::error::{ChatProviderError, FailureKind};
use kosong_wasm::engine::generate::MessageAssembler;
use kosong_wasm::engine::message::{ContentPart, FileRef, MediaUrl, Message, Role, TokenUsage, ToolCall};
use kosong_wasm::engine::providers::{HttpProvider, Prompt, StreamDecoder, StreamEvent, ToolDefinition};
use kosong_wasm::engine::sse::SseDecoder;

fn provider(spec: Value) -> HttpProvider {
    HttpProvider::from_json(&spec.to_string()).expect("provider spec")
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))).expect("fixture")
}

/// What decoding gave: the events, the assembled message, and how it ended.
#[derive(Debug, PartialEq)]
struct Outcome {
    events: Vec<StreamEvent>,
    message: Message,
    end: Result<(), ChatProviderError>,
    id: Option<String>,
    usage: Option<TokenUsage>,
    finish_reason: Option<String>,
}

impl Outcome {
    fn completed(&self) -> Vec<String> {
        self.events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::ToolCallComplete(id, _) => Some(id.clone()),
                _ => None,
            })
            .collect()
    }
    /// Where in the event list the call `id` completed.
    fn completed_at(&self, id: &str) -> usize {
        self.events.iter().position(|e| matches!(e, StreamEvent::ToolCallComplete(c, _) if c == id)).unwrap()
    }
}

fn decode(p: &HttpProvider, chunks: &[&[u8]]) -> Outcome {
    let mut sse = SseDecoder::new();
    let mut dec = p.decoder();
    let mut sse_events = Vec::new();
    let mut events = Vec::new();
    let mut end = Ok(());
    'outer: for (i, c) in chunks.iter().enumerate() {
        sse.feed(c, &mut sse_events).unwrap();
        if i == chunks.len() - 1 {
            sse.finish(&mut sse_events).unwrap();
        }
        for e in sse_events.drain(..) {
            if let Err(err) = dec.on_event(&e, &mut events) {
                end = Err(err);
                break 'outer;
            }
        }
    }
    if end.is_ok() {
        end = dec.finish(&mut events);
    }
    let mut asm = MessageAssembler::new();
    for e in &events {
        match e {
            StreamEvent::Part(p) => asm.try_push(p.clone()).unwrap(),
            StreamEvent::Boundary => asm.boundary(),
            StreamEvent::Reconnected(_) => {}
            StreamEvent::ToolCallComplete(..) => {}
        }
    }
    Outcome {
        message: asm.into_message(),
        end,
        id: dec.id().map(str::to_owned),
        usage: dec.usage(),
        finish_reason: dec.finish_reason().map(str::to_owned),
        events,
    }
}

/// Decodes the whole input, then every split of it in two, and checks they all agree.
fn decode_every_split(p: &HttpProvider, bytes: &[u8]) -> Outcome {
    let whole = decode(p, &[bytes]);
    for cut in 1..bytes.len() {
        let split = decode(p, &[&bytes[..cut], &bytes[cut..]]);
        assert_eq!(split, whole, "split at byte {cut} changed the outcome");
    }
    whole
}

fn think(m: &Message) -> (&str, Option<&str>) {
    match &m.content[0] {
        ContentPart::Think { think, encrypted } => (think.as_str(), encrypted.as_deref()),
        other => panic!("not a think part: {other:?}"),
    }
}

/// The answer every fixture streams.
fn assert_weather_answer(o: &Outcome, ids: [&str; 2]) {
    assert_eq!(o.end, Ok(()));
    assert_eq!(o.message.role, Role::Assistant);
    assert_eq!(think(&o.message).0, "The user wants the weather.");
    assert_eq!(o.message.content[1], ContentPart::text("Checking both cities."));
    assert_eq!(o.message.content.len(), 2);
    let calls = o.message.tool_calls.as_ref().unwrap();
    assert_eq!(calls.len(), 2);
    for (call, (id, city)) in calls.iter().zip(ids.iter().zip(["Paris", "Tokyo"])) {
        assert_eq!(call.id, *id);
        assert_eq!(call.function.name, "get_weather");
        let args: Value = serde_json::from_str(call.function.arguments.as_deref().unwrap()).unwrap();
        assert_eq!(args, json!({"city": city}));
    }
    assert_eq!(o.completed(), ids);
}

// ---- stream decoding ----------------------------------------------------------------------

#[test]
fn anthropic_stream() {
    let p = provider(json!({"kind": "anthropic", "model": "claude-sonnet-4-5"}));
    let bytes = fixture("anthropic.sse");
    let o = decode_every_split(&p, &bytes);
    assert_weather_answer(&o, ["toolu_01A", "toolu_01B"]);
    assert_eq!(think(&o.message).1, Some("EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"));
    assert_eq!(o.id.as_deref(), Some("msg_01XFDUDYJgAACzvnptvVoYEL"));
    assert_eq!(o.finish_reason.as_deref(), Some("tool_use"));
    assert_eq!(
        o.usage,
        Some(TokenUsage { input_other: 12, output: 89, input_cache_read: 2000, input_cache_creation: 100 })
    );
    // The first call is complete at its content_block_stop, before the second one begins.
    let second_begins = o
        .events
        .iter()
        .position(|e| matches!(e, StreamEvent::Part(kosong_wasm::engine::message::StreamedMessagePart::ToolCall(c)) if c.id == "toolu_01B"))
        .unwrap();
    assert!(o.completed_at("toolu_01A") < second_begins);

    // Cut before message_stop: the first call already completed, the answer is an error.
    let text = String::from_utf8(bytes).unwrap();
    let cut = text.find("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":3").unwrap();
    let o = decode(&p, &[&text.as_bytes()[..cut]]);
    assert!(
        matches!(&o.end, Err(ChatProviderError::Failed { kind: FailureKind::Truncated, message: m }) if m.contains("message_stop")),
        "{:?}",
        o.end
    );
    assert_eq!(o.completed(), ["toolu_01A"]);
}

#[test]
fn anthropic_error_event_redacted_thinking_and_repeated_ids() {
    let p = provider(json!({"kind": "anthropic", "model": "claude-sonnet-4-5"}));
    let body = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}\n\n",
        "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
    );
    let o = decode(&p, &[body.as_bytes()]);
    assert_eq!(o.message.content, vec![ContentPart::text("Hel")]);
    assert!(
        matches!(&o.end, Err(ChatProviderError::Status { status: 529, message, .. }) if message.contains("Overloaded")),
        "{:?}",
        o.end
    );

    let body = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_2\",\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"redacted_thinking\",\"data\":\"EmwKAhgBEgy3va3pzix\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_X\",\"name\":\"a\",\"input\":{}}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_X\",\"name\":\"b\",\"input\":{}}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":7}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );
    let o = decode_every_split(&p, body.as_bytes());
    assert_eq!(
        o.message.content,
        vec![ContentPart::Think { think: String::new(), encrypted: Some("EmwKAhgBEgy3va3pzix".into()) }]
    );
    let calls = o.message.tool_calls.clone().unwrap();
    assert_eq!(calls[0].id, "toolu_X");
    assert_eq!(calls[1].id, "toolu_X_2", "a repeated id is made unique");
    assert_eq!(calls[1].function.arguments.as_deref(), Some("{}"));
    assert_eq!(o.completed(), ["toolu_X", "toolu_X_2"]);
    // And it round-trips as redacted_thinking.
    let history = vec![Message::new(Role::Assistant, o.message.content.clone())];
    let req = p.build_request("", &[], &history).unwrap();
    let body: Value = serde_json::from_str(&req.body).unwrap();
    assert_eq!(body["messages"][0]["content"][0], json!({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"}));
}

#[test]
fn responses_stream() {
    let p = provider(json!({"kind": "openai_responses", "model": "gpt-5"}));
    let bytes = fixture("responses.sse");
    let o = decode_every_split(&p, &bytes);
    assert_weather_answer(&o, ["call_A", "call_B"]);
    assert_eq!(think(&o.message).1, Some("gAAAAABoEncryptedReasoning=="));
    assert_eq!(o.id.as_deref(), Some("resp_67c9fdcecf488190"));
    assert_eq!(o.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(
        o.usage,
        Some(TokenUsage { input_other: 112, output: 89, input_cache_read: 2000, input_cache_creation: 0 })
    );
    // Arguments are not doubled by `function_call_arguments.done`.
    assert_eq!(o.message.tool_calls.as_ref().unwrap()[0].function.arguments.as_deref(), Some("{\"city\": \"Paris\"}"));
    // call_A is complete at its output_item.done, before call_B is announced.
    let text = String::from_utf8(bytes).unwrap();
    let cut = text
        .find(
            "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":20",
        )
        .unwrap();
    let o = decode(&p, &[&text.as_bytes()[..cut]]);
    assert_eq!(o.completed(), ["call_A"]);
    assert!(
        matches!(&o.end, Err(ChatProviderError::Failed { kind: FailureKind::Truncated, message: m }) if m.contains("response.completed"))
    );
}

#[test]
fn responses_errors() {
    let p = provider(json!({"kind": "openai_responses", "model": "gpt-5"}));
    let body = "event: error\ndata: {\"type\":\"error\",\"code\":\"rate_limit_exceeded\",\"message\":\"Rate limit reached\",\"param\":null,\"sequence_number\":1}\n\n";
    let o = decode(&p, &[body.as_bytes()]);
    assert!(
        matches!(&o.end, Err(ChatProviderError::Status { status: 429, message, .. }) if message.contains("Rate limit reached"))
    );
    let body = "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"id\":\"resp_1\",\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"The model failed to generate\"}}}\n\n";
    let o = decode(&p, &[body.as_bytes()]);
    assert!(
        matches!(&o.end, Err(ChatProviderError::Status { status: 500, message, .. }) if message.contains("failed to generate"))
    );
    let body = "event: response.incomplete\ndata: {\"type\":\"response.incomplete\",\"response\":{\"id\":\"resp_2\",\"status\":\"incomplete\",\"incomplete_details\":{\"reason\":\"max_output_tokens\"},\"usage\":{\"input_tokens\":3,\"output_tokens\":9}}}\n\n";
    let o = decode(&p, &[body.as_bytes()]);
    assert_eq!(o.end, Ok(()));
    assert_eq!(o.finish_reason.as_deref(), Some("max_output_tokens"));
}

#[test]
fn gemini_stream() {
    let p = provider(json!({"kind": "gemini", "model": "gemini-2.5-flash"}));
    let bytes = fixture("gemini.sse");
    let o = decode_every_split(&p, &bytes);
    let ids: Vec<String> = o.message.tool_calls.as_ref().unwrap().iter().map(|c| c.id.clone()).collect();
    assert_ne!(ids[0], ids[1]);
    assert!(ids[0].starts_with("call_mJm8aOa0KdLw"), "{ids:?}");
    assert_weather_answer(&o, [ids[0].as_str(), ids[1].as_str()]);
    let calls = o.message.tool_calls.as_ref().unwrap();
    assert_eq!(calls[0].extras.as_ref().unwrap()["thought_signature_b64"], "CiQBVKhc7sigParis==", "kosong's key");
    assert_eq!(calls[1].extras, None);
    assert_eq!(o.finish_reason.as_deref(), Some("STOP"));
    assert_eq!(
        o.usage,
        Some(TokenUsage { input_other: 112, output: 89, input_cache_read: 2000, input_cache_creation: 0 })
    );
    // The first call is complete as soon as its part arrives, before the stream ends.
    let text = String::from_utf8(bytes).unwrap();
    let last = text.rfind("data: ").unwrap();
    let o = decode(&p, &[&text.as_bytes()[..last]]);
    assert_eq!(o.completed().len(), 1);
    assert!(
        matches!(&o.end, Err(ChatProviderError::Failed { kind: FailureKind::Truncated, message: m }) if m.contains("finishReason"))
    );
    // An error sent inside the stream.
    let body = "data: {\"error\": {\"code\": 503, \"message\": \"The model is overloaded.\", \"status\": \"UNAVAILABLE\"}}\n\n";
    let o = decode(&p, &[body.as_bytes()]);
    assert!(matches!(&o.end, Err(ChatProviderError::Status { status: 503, .. })), "{:?}", o.end);
}

#[test]
fn openai_stream() {
    // Chat Completions as OpenAI streams it: the fields beside the format (refusal, logprobs,
    // service_tier, obfuscation), each call's id and name first and its arguments in pieces, the
    // usage in a last chunk with no choices (stream_options.include_usage).
    let p = provider(json!({"kind": "openai", "model": "gpt-4.1"}));
    let o = decode_every_split(&p, &fixture("openai.sse"));
    assert_eq!(o.end, Ok(()));
    assert_eq!(o.message.content, vec![ContentPart::text("Checking both cities.")], "no think part, no empty text");
    let calls = o.message.tool_calls.as_ref().unwrap();
    let got: Vec<(&str, &str, Value)> = calls
        .iter()
        .map(|c| {
            (
                c.id.as_str(),
                c.function.name.as_str(),
                serde_json::from_str(c.function.arguments.as_deref().unwrap()).unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("call_PAR1s", "get_weather", json!({"city": "Paris"})),
            ("call_T0kyo", "get_weather", json!({"city": "Tokyo"}))
        ]
    );
    assert_eq!(o.completed(), ["call_PAR1s", "call_T0kyo"]);
    assert_eq!(o.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(o.id.as_deref(), Some("chatcmpl-CXo1weatherA"));
    assert_eq!(
        o.usage,
        Some(TokenUsage { input_other: 112, output: 89, input_cache_read: 2000, input_cache_creation: 0 })
    );
}

#[test]
fn kimi_stream() {
    let p = provider(json!({"kind": "kimi", "model": "kimi-k2-thinking"}));
    let o = decode_every_split(&p, &fixture("kimi.sse"));
    assert_weather_answer(&o, ["get_weather:0", "get_weather:1"]);
    assert_eq!(think(&o.message).1, None);
    assert_eq!(o.finish_reason.as_deref(), Some("tool_calls"));
    // Usage inside choices[0], cache hits at its top level.
    assert_eq!(
        o.usage,
        Some(TokenUsage { input_other: 112, output: 89, input_cache_read: 2000, input_cache_creation: 0 })
    );
    // An empty reasoning_content is still a think part; an absent one is none.
    let body = "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"\",\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
    let o = decode(&p, &[body.as_bytes()]);
    assert_eq!(o.message.content, vec![ContentPart::think(""), ContentPart::text("hi")]);
    let body = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
    let o = decode(&p, &[body.as_bytes()]);
    assert_eq!(o.message.content, vec![ContentPart::text("hi")]);
    // Plain OpenAI ignores an empty reasoning field.
    let openai = provider(json!({"kind": "openai", "model": "gpt-4o"}));
    let body = "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"\",\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
    assert_eq!(decode(&openai, &[body.as_bytes()]).message.content, vec![ContentPart::text("hi")]);
}

#[test]
fn missing_and_repeated_ids_are_made_unique() {
    let p = provider(json!({"kind": "openai", "model": "m"}));
    let tc = |i: u64, id: &str, args: &str| {
        format!(
            "data: {}\n\n",
            json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":i,"id":id,"function":{"name":"f","arguments":args}}]}}]})
        )
    };
    let body = tc(0, "dup", "{}")
        + &tc(1, "dup", "{}")
        + &tc(2, "", "{}")
        + "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n";
    let o = decode(&p, &[body.as_bytes()]);
    let ids: Vec<&str> = o.message.tool_calls.as_ref().unwrap().iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["dup", "dup_2", "call_1"]);
    assert_eq!(o.completed(), ids);
}

// ---- request bodies -----------------------------------------------------------------------

fn tools() -> Vec<ToolDefinition> {
    vec![
        ToolDefinition {
            name: "get_weather".into(),
            description: "The weather in a city".into(),
            parameters: json!({"type": "object", "properties": {
                "city": {"type": "string"},
                "unit": {"enum": ["celsius", "fahrenheit"]},
                "days": {"items": {"const": 1}},
                "where": {"properties": {"lat": {"type": "number"}}}
            }, "required": ["city"]}),
        },
        ToolDefinition { name: "$web_search".into(), description: "builtin".into(), parameters: json!({}) },
    ]
}

/// A history with everything a request must carry: text, an image, think parts with and
/// without a signature, two calls, their results, a later answer and a new question.
fn history() -> Vec<Message> {
    let mut user = Message::new(
        Role::User,
        vec![
            ContentPart::text("What's the weather in Paris and Tokyo?"),
            ContentPart::ImageUrl {
                image_url: MediaUrl { url: "data:image/png;base64,iVBORw0KGgo=".into(), id: None },
            },
        ],
    );
    user.name = None;
    let mut a = Message::new(
        Role::Assistant,
        vec![
            ContentPart::Think { think: "The user wants the weather.".into(), encrypted: Some("sig-1".into()) },
            ContentPart::text("Checking both cities."),
        ],
    );
    let mut paris = ToolCall::new("call_A", "get_weather", Some("{\"city\": \"Paris\"}".into()));
    paris.extras = Some(serde_json::from_value(json!({"thought_signature": "gem-sig"})).unwrap());
    a.tool_calls = Some(vec![paris, ToolCall::new("call_B", "get_weather", Some("{\"city\": \"Tokyo\"}".into()))]);
    let result = |id: &str, text: &str| {
        let mut m = Message::new(Role::Tool, vec![ContentPart::text(text)]);
        m.tool_call_id = Some(id.into());
        m
    };
    vec![
        user,
        a,
        result("call_A", "Sunny, 24°C"),
        result("call_B", "Rain, 18°C"),
        Message::new(
            Role::Assistant,
            vec![ContentPart::think("unsigned thoughts"), ContentPart::text("Paris is sunny; Tokyo is rainy.")],
        ),
        Message::new(Role::User, vec![ContentPart::text("Thanks!")]),
    ]
}

fn snapshot(name: &str, actual: &Value) {
    let path = format!("{}/tests/fixtures/{name}.request.json", env!("CARGO_MANIFEST_DIR"));
    let pretty = serde_json::to_string_pretty(actual).unwrap() + "\n";
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, &pretty).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("no snapshot {path}; run with UPDATE_SNAPSHOTS=1 and review it"));
    let expected: Value = serde_json::from_str(&expected).unwrap();
    assert_eq!(actual, &expected, "request body differs from {path}:\n{pretty}");
}

fn request(spec: Value) -> (kosong_wasm::engine::providers::HttpRequest, Value) {
    let req = provider(spec).build_request("You are terse.", &tools(), &history()).unwrap();
    let body = serde_json::from_str(&req.body).unwrap();
    (req, body)
}

fn header<'a>(req: &'a kosong_wasm::engine::providers::HttpRequest, name: &str) -> Option<&'a str> {
    req.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

#[test]
fn anthropic_request() {
    let (req, body) = request(json!({"kind": "anthropic", "model": "claude-sonnet-4-5", "apiKey": "sk-ant-1",
        "thinkingEffort": "medium", "headers": {"x-extra": "1"}}));
    assert_eq!(req.url, "https://api.anthropic.com/v1/messages");
    assert_eq!(header(&req, "x-api-key"), Some("sk-ant-1"));
    assert_eq!(header(&req, "anthropic-version"), Some("2023-06-01"));
    assert_eq!(header(&req, "x-extra"), Some("1"));
    assert_eq!(body["system"][0]["cache_control"], json!({"type": "ephemeral"}));
    assert_eq!(body["tools"][1]["cache_control"], json!({"type": "ephemeral"}));
    assert!(body["tools"][0].get("cache_control").is_none());
    let messages = body["messages"].as_array().unwrap();
    // user, assistant, one user message with both results, assistant, user.
    assert_eq!(messages.len(), 5);
    assert_eq!(messages[2]["content"].as_array().unwrap().len(), 2);
    assert_eq!(messages[4]["content"][0]["cache_control"], json!({"type": "ephemeral"}));
    assert_eq!(body["thinking"], json!({"type": "enabled", "budget_tokens": 4096}));
    snapshot("anthropic", &body);

    // Adaptive thinking on a model that has it.
    let (_, body) = request(json!({"kind": "anthropic", "model": "claude-opus-4-6", "thinkingEffort": "high"}));
    assert_eq!(body["thinking"], json!({"type": "adaptive"}));
    assert_eq!(body["output_config"], json!({"effort": "high"}));
    // A given max_tokens bounds the budget.
    let (_, body) =
        request(json!({"kind": "anthropic", "model": "claude-3-7-sonnet", "thinkingEffort": "max", "maxTokens": 5000}));
    assert_eq!(body["max_tokens"], 5000);
    assert_eq!(body["thinking"]["budget_tokens"], 4999);
}

#[test]
fn responses_request() {
    let (req, body) =
        request(json!({"kind": "openai_responses", "model": "gpt-5", "apiKey": "sk-1", "thinkingEffort": "low"}));
    assert_eq!(req.url, "https://api.openai.com/v1/responses");
    assert_eq!(header(&req, "authorization"), Some("Bearer sk-1"));
    assert_eq!(body["store"], false);
    assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(body["input"][0], json!({"role": "developer", "content": "You are terse."}));
    snapshot("responses", &body);
    let (_, body) = request(json!({"kind": "openai_responses", "model": "gpt-5", "reasoningEffort": "minimal"}));
    assert_eq!(body["reasoning"]["effort"], "minimal");
}

#[test]
fn gemini_request() {
    let (req, body) =
        request(json!({"kind": "gemini", "model": "gemini-2.5-flash", "apiKey": "AIza-1", "thinkingEffort": "high"}));
    assert_eq!(
        req.url,
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
    assert_eq!(header(&req, "x-goog-api-key"), Some("AIza-1"));
    assert!(!req.url.contains("AIza"), "the key never goes in the URL");
    let contents = body["contents"].as_array().unwrap();
    let roles: Vec<&str> = contents.iter().map(|c| c["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "model", "user", "model", "user"]);
    let responses: Vec<&str> = contents[2]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["functionResponse"]["response"]["output"].as_str().unwrap())
        .collect();
    assert_eq!(responses, ["Sunny, 24°C", "Rain, 18°C"]);
    snapshot("gemini", &body);
}

#[test]
fn gemini_packs_results_in_call_order_and_rejects_gaps() {
    let p = provider(json!({"kind": "gemini", "model": "gemini-2.5-flash"}));
    let mut h = history();
    h.swap(2, 3); // results arrive out of order
    let body: Value = serde_json::from_str(&p.build_request("", &[], &h).unwrap().body).unwrap();
    let names: Vec<&str> = body["contents"][2]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["functionResponse"]["response"]["output"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Sunny, 24°C", "Rain, 18°C"], "packed in call order");

    let mut missing = history();
    missing.remove(3);
    let err = p.build_request("", &[], &missing).unwrap_err();
    assert!(err.message().contains("no result for tool call `call_B`"), "{err}");

    let mut twice = history();
    twice.insert(3, twice[2].clone());
    let err = p.build_request("", &[], &twice).unwrap_err();
    assert!(err.message().contains("two results for tool call `call_A`"), "{err}");
}

#[test]
fn openai_request() {
    let (req, body) = request(
        json!({"kind": "openai", "model": "gpt-4.1", "apiKey": "sk-openai-1", "maxTokens": 500, "headers": {"x-extra": "1"}}),
    );
    assert_eq!(req.url, "https://api.openai.com/v1/chat/completions");
    assert_eq!(header(&req, "authorization"), Some("Bearer sk-openai-1"));
    assert_eq!(header(&req, "x-extra"), Some("1"));
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}), "usage is asked for");
    assert_eq!(body["messages"][0], json!({"role": "system", "content": "You are terse."}));
    // The two results of the parallel calls are two tool messages, in call order.
    let roles: Vec<&str> = body["messages"].as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "tool", "assistant", "user"]);
    assert_eq!(body["tools"][0]["type"], "function");
    snapshot("openai", &body);
}

#[test]
fn kimi_request() {
    let (req, body) =
        request(json!({"kind": "kimi", "model": "kimi-k2-thinking", "apiKey": "sk-kimi", "thinkingEffort": "high"}));
    assert_eq!(req.url, "https://api.moonshot.ai/v1/chat/completions");
    assert_eq!(body["thinking"], json!({"type": "enabled"}));
    // As kosong 0.56 sends it: no token limit and no temperature unless given.
    assert!(
        body.get("max_tokens").is_none()
            && body.get("max_completion_tokens").is_none()
            && body.get("temperature").is_none()
    );
    assert_eq!(body["tools"][1], json!({"type": "builtin_function", "function": {"name": "$web_search"}}));
    let params = &body["tools"][0]["function"]["parameters"];
    assert_eq!(params["properties"]["unit"]["type"], "string");
    assert_eq!(params["properties"]["days"], json!({"type": "array", "items": {"const": 1, "type": "integer"}}));
    assert_eq!(params["properties"]["where"]["type"], "object");
    assert_eq!(body["messages"][2]["reasoning_content"], "The user wants the weather.");
    assert!(tools()[0].parameters["properties"]["unit"].get("type").is_none(), "the caller's schema is untouched");
    snapshot("kimi", &body);
    let (_, body) =
        request(json!({"kind": "kimi", "model": "kimi-k2-turbo-preview", "thinkingEffort": "off", "maxTokens": 500}));
    assert_eq!(body["thinking"], json!({"type": "disabled"}));
    assert_eq!(body["max_completion_tokens"], 500, "kosong's name for the limit");
}

/// A message with thousands of tool calls, each streamed in pieces, decodes and assembles with
/// every call complete exactly once, in order. (Each fragment and each completion finds its
/// call by a map, not by a scan of the calls so far.)
#[test]
fn thousands_of_tool_calls_in_one_message() {
    const N: usize = 5_000;
    let line = |v: Value| format!("data: {v}\n\n");
    let ev = |kind: &str, v: Value| format!("event: {kind}\ndata: {v}\n\n");
    let args = |i: usize| format!("{{\"n\": {i}}}");

    let mut chat = String::new();
    for i in 0..N {
        chat += &line(
            json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":i,"id":format!("c{i}"),"function":{"name":"f","arguments":""}}]}}]}),
        );
        chat += &line(
            json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":i,"function":{"arguments":"{\"n\": "}}]}}]}),
        );
        chat += &line(
            json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":i,"function":{"arguments":format!("{i}}}")}}]}}]}),
        );
    }
    chat += &line(json!({"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}));
    chat += "data: [DONE]\n\n";

    let mut anthropic = ev(
        "message_start",
        json!({"type":"message_start","message":{"id":"m","content":[],"usage":{"input_tokens":1,"output_tokens":1}}}),
    );
    for i in 0..N {
        anthropic += &ev(
            "content_block_start",
            json!({"type":"content_block_start","index":i,"content_block":{"type":"tool_use","id":format!("c{i}"),"name":"f","input":{}}}),
        );
        anthropic += &ev(
            "content_block_delta",
            json!({"type":"content_block_delta","index":i,"delta":{"type":"input_json_delta","partial_json":"{\"n\": "}}),
        );
        anthropic += &ev(
            "content_block_delta",
            json!({"type":"content_block_delta","index":i,"delta":{"type":"input_json_delta","partial_json":format!("{i}}}")}}),
        );
        anthropic += &ev("content_block_stop", json!({"type":"content_block_stop","index":i}));
    }
    anthropic += &ev(
        "message_delta",
        json!({"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":5}}),
    );
    anthropic += &ev("message_stop", json!({"type":"message_stop"}));

    let mut responses = String::new();
    for i in 0..N {
        let item = |status: &str, a: &str| json!({"id":format!("fc_{i}"),"type":"function_call","status":status,"arguments":a,"call_id":format!("c{i}"),"name":"f"});
        responses += &ev(
            "response.output_item.added",
            json!({"type":"response.output_item.added","output_index":i,"item":item("in_progress", "")}),
        );
        responses += &ev(
            "response.function_call_arguments.delta",
            json!({"type":"response.function_call_arguments.delta","item_id":format!("fc_{i}"),"output_index":i,"delta":"{\"n\": "}),
        );
        responses += &ev(
            "response.function_call_arguments.delta",
            json!({"type":"response.function_call_arguments.delta","item_id":format!("fc_{i}"),"output_index":i,"delta":format!("{i}}}")}),
        );
        responses += &ev(
            "response.output_item.done",
            json!({"type":"response.output_item.done","output_index":i,"item":item("completed", &args(i))}),
        );
    }
    responses += &ev(
        "response.completed",
        json!({"type":"response.completed","response":{"id":"r","status":"completed","usage":{"input_tokens":1,"output_tokens":1}}}),
    );

    for (kind, text) in [("openai", chat), ("anthropic", anthropic), ("openai_responses", responses)] {
        let o = decode(&provider(json!({"kind": kind, "model": "m"})), &[text.as_bytes()]);
        assert!(o.end.is_ok(), "{kind}: {:?}", o.end);
        let calls = o.message.tool_calls.as_deref().unwrap_or(&[]);
        assert_eq!(calls.len(), N, "{kind}");
        let expected: Vec<String> = (0..N).map(|i| format!("c{i}")).collect();
        assert_eq!(o.completed(), expected, "{kind}: each call completes once, in order");
        for (i, c) in calls.iter().enumerate() {
            assert_eq!(c.id, format!("c{i}"), "{kind}");
            assert_eq!(
                serde_json::from_str::<Value>(c.function.arguments.as_deref().unwrap()).unwrap(),
                json!({"n": i}),
                "{kind}"
            );
        }
    }
}

/// Real servers send event types beyond the docs, with payloads of their own: a type the
/// decoder does not read is skipped whatever its shape; a type it reads with the wrong shape is
/// an error that names the type. Raw reasoning (gpt-oss behind LM Studio, vLLM, Ollama) is
/// thinking.
#[test]
fn responses_unknown_event_shapes_and_raw_reasoning() {
    let p = provider(json!({"kind": "openai_responses", "model": "gpt-oss"}));
    let ev = |v: Value| format!("event: {}\ndata: {v}\n\n", v["type"].as_str().unwrap());
    let mut s = ev(json!({"type":"response.created","response":{"id":"resp_x"}}));
    s += &ev(
        json!({"type":"response.output_item.added","output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}}),
    );
    s += &ev(
        json!({"type":"response.reasoning_text.delta","item_id":"rs_1","output_index":0,"content_index":0,"delta":"Let me "}),
    );
    s += &ev(
        json!({"type":"response.reasoning_text.delta","item_id":"rs_1","output_index":0,"content_index":0,"delta":"think."}),
    );
    s += &ev(
        json!({"type":"response.reasoning_text.done","item_id":"rs_1","output_index":0,"content_index":0,"text":"Let me think."}),
    );
    s += &ev(
        json!({"type":"response.shell_call_output_content.delta","item_id":"sh_1","output_index":1,"delta":{"stdout":"hi\n"}}),
    );
    s += &ev(json!({"type":"response.some_future_event","delta":[1, 2, 3],"message":{"x":1}}));
    s += &ev(
        json!({"type":"response.output_item.added","output_index":2,"item":{"id":"msg_1","type":"message","role":"assistant","content":[]}}),
    );
    s += &ev(
        json!({"type":"response.output_text.delta","item_id":"msg_1","output_index":2,"content_index":0,"delta":"Hello"}),
    );
    s += &ev(
        json!({"type":"response.completed","response":{"id":"resp_x","status":"completed","usage":{"input_tokens":1,"output_tokens":2}}}),
    );
    let o = decode_every_split(&p, s.as_bytes());
    assert!(o.end.is_ok(), "{:?}", o.end);
    assert_eq!(think(&o.message).0, "Let me think.");
    assert_eq!(o.message.extract_text(""), "Hello");

    let bad = ev(json!({"type":"response.output_text.delta","delta":{"text":"x"}}));
    let o = decode(&p, &[bad.as_bytes()]);
    assert!(
        matches!(&o.end, Err(ChatProviderError::Failed { kind: FailureKind::Malformed, message }) if message.contains("`response.output_text.delta`")),
        "{:?}",
        o.end
    );
}

/// Anthropic beyond the docs: a pending `tool_use` inside `message_start` (a resumed turn of
/// programmatic tool calling) is read; a second `message_start` before `message_stop` is a
/// stream error; an event type the decoder does not read is skipped whatever its shape.
#[test]
fn anthropic_content_in_message_start_and_a_second_start() {
    let p = provider(json!({"kind": "anthropic", "model": "claude-sonnet-4-5"}));
    let ev = |v: Value| format!("event: {}\ndata: {v}\n\n", v["type"].as_str().unwrap());
    let start = |content: Value| {
        ev(
            json!({"type":"message_start","message":{"id":"msg_1","content":content,"usage":{"input_tokens":3,"output_tokens":1}}}),
        )
    };
    let mut s = start(json!([{"type":"tool_use","id":"toolu_9","name":"run_code","input":{"code":"print(1)"}}]));
    s += &ev(json!({"type":"some_new_event","message":"not a message","usage":[1, 2]}));
    s += &ev(json!({"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":1}}));
    s += &ev(json!({"type":"message_stop"}));
    let o = decode_every_split(&p, s.as_bytes());
    assert!(o.end.is_ok(), "{:?}", o.end);
    let calls = o.message.tool_calls.as_deref().unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!((calls[0].id.as_str(), calls[0].function.name.as_str()), ("toolu_9", "run_code"));
    assert_eq!(
        serde_json::from_str::<Value>(calls[0].function.arguments.as_deref().unwrap()).unwrap(),
        json!({"code": "print(1)"})
    );
    assert_eq!(o.completed(), ["toolu_9"]);

    let mut s = start(json!([]));
    s += &ev(
        json!({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"f","input":{}}}),
    );
    s += &ev(
        json!({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}),
    );
    s += &start(json!([]));
    let o = decode(&p, &[s.as_bytes()]);
    assert!(
        matches!(&o.end, Err(ChatProviderError::Failed { kind: FailureKind::Malformed, message }) if message.contains("second message_start")),
        "{:?}",
        o.end
    );
    assert!(o.completed().is_empty(), "the truncated call never completes");
}

/// Chat Completions beyond the docs: Mistral's reasoning models stream `delta.content` as a
/// list of text and thinking parts; with `n > 1` (through `extraBody`) only the first choice is
/// assembled, not all of them run together.
#[test]
fn chat_content_parts_and_several_choices() {
    let p = provider(json!({"kind": "openai", "model": "magistral-medium"}));
    let line = |v: Value| format!("data: {v}\n\n");
    let mut s = line(
        json!({"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","content":[{"type":"thinking","thinking":[{"type":"text","text":"Let me "}]}]}}]}),
    );
    s += &line(
        json!({"id":"c1","choices":[{"index":0,"delta":{"content":[{"type":"thinking","thinking":[{"type":"text","text":"think."}]},{"type":"text","text":"The answer"}]}}]}),
    );
    s += &line(json!({"id":"c1","choices":[{"index":0,"delta":{"content":[{"type":"text","text":" is 4."}]}}]}));
    s += &line(json!({"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}));
    s += "data: [DONE]\n\n";
    let o = decode_every_split(&p, s.as_bytes());
    assert!(o.end.is_ok(), "{:?}", o.end);
    assert_eq!(think(&o.message).0, "Let me think.");
    assert_eq!(o.message.extract_text(""), "The answer is 4.");

    let mut s = String::new();
    for (i, w) in ["The ", "cit", "y"].iter().enumerate() {
        for choice in 0..3 {
            s += &line(
                json!({"id":"c2","choices":[{"index":choice,"delta":{"content":format!("{w}")},"finish_reason":null}]}),
            );
        }
        if i == 0 {
            s += &line(
                json!({"id":"c2","choices":[{"index":2,"delta":{"content":"!"}},{"index":0,"delta":{"content":""}}]}),
            );
        }
    }
    for choice in 0..3 {
        s += &line(json!({"id":"c2","choices":[{"index":choice,"delta":{},"finish_reason":"stop"}]}));
    }
    s += "data: [DONE]\n\n";
    let o = decode_every_split(&p, s.as_bytes());
    assert!(o.end.is_ok(), "{:?}", o.end);
    assert_eq!(o.message.extract_text(""), "The city", "only choice 0");
}

/// A Gemini thought signature under kosong's key (`thought_signature_b64`, as kimi-cli writes
/// it in context.jsonl) or this package's earlier key is sent back either way.
#[test]
fn gemini_thought_signatures_under_either_key_go_back() {
    let p = provider(json!({"kind": "gemini", "model": "gemini-2.5-flash"}));
    for key in ["thought_signature_b64", "thought_signature"] {
        let mut a = Message::new(Role::Assistant, vec![]);
        let mut call = ToolCall::new("c1", "f", Some("{}".into()));
        call.extras = Some(serde_json::from_value(json!({ key: "c2lnbmF0dXJl" })).unwrap());
        a.tool_calls = Some(vec![call]);
        let mut r = Message::new(Role::Tool, vec![ContentPart::text("ok")]);
        r.tool_call_id = Some("c1".into());
        let history = [Message::new(Role::User, vec![ContentPart::text("hi")]), a, r];
        let req = p.build_request("", &[], &history).unwrap();
        assert!(req.body.contains("\"thoughtSignature\":\"c2lnbmF0dXJl\""), "{key}: {}", req.body);
    }
}

/// kosong's and the SDKs' base URLs leave out the version segment; both forms work.
#[test]
fn base_urls_with_or_without_the_version_segment() {
    let url = |kind: &str, base: Option<&str>| {
        let mut spec = json!({"kind": kind, "model": "gemini-2.5-flash"});
        if let Some(b) = base {
            spec["baseUrl"] = json!(b);
        }
        provider(spec).build_request("", &[], &[Message::new(Role::User, vec![ContentPart::text("hi")])]).unwrap().url
    };
    assert_eq!(url("anthropic", None), "https://api.anthropic.com/v1/messages");
    assert_eq!(url("anthropic", Some("https://api.anthropic.com")), "https://api.anthropic.com/v1/messages");
    assert_eq!(url("anthropic", Some("https://api.anthropic.com/")), "https://api.anthropic.com/v1/messages");
    assert_eq!(url("anthropic", Some("https://api.anthropic.com/v1")), "https://api.anthropic.com/v1/messages");
    assert_eq!(url("anthropic", Some("http://127.0.0.1:8080/proxy/v1")), "http://127.0.0.1:8080/proxy/v1/messages");
    let g = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse";
    assert_eq!(url("gemini", None), g);
    assert_eq!(url("gemini", Some("https://generativelanguage.googleapis.com")), g);
    assert_eq!(url("gemini", Some("https://generativelanguage.googleapis.com/v1beta/")), g);
}

/// A refusal reaches the caller as an error of kind `refused` carrying the model's words (not an
/// empty answer, which the agent would retry): Chat Completions' `delta.refusal`, a Responses
/// refusal (streamed, or a content part of the finished message), Anthropic's `stop_reason:
/// "refusal"`.
#[test]
fn refusals_are_errors_that_carry_the_text() {
    let refused = |o: &Outcome, words: &str| matches!(&o.end, Err(ChatProviderError::Failed { kind: FailureKind::Refused, message }) if message.contains(words));
    let line = |v: Value| format!("data: {v}\n\n");
    let ev = |v: Value| format!("event: {}\ndata: {v}\n\n", v["type"].as_str().unwrap());

    let chat = provider(json!({"kind": "openai", "model": "gpt-4o"}));
    let mut s =
        line(json!({"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":""}}]}));
    s += &line(json!({"id":"c","choices":[{"index":0,"delta":{"refusal":"I can't help "}}]}));
    s += &line(json!({"id":"c","choices":[{"index":0,"delta":{"refusal":"with that."}}]}));
    s += &line(json!({"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}));
    s += "data: [DONE]\n\n";
    let o = decode_every_split(&chat, s.as_bytes());
    assert!(refused(&o, "I can't help with that."), "{:?}", o.end);

    let responses = provider(json!({"kind": "openai_responses", "model": "gpt-5"}));
    let mut s = ev(
        json!({"type":"response.output_item.added","output_index":0,"item":{"id":"msg_1","type":"message","role":"assistant","content":[]}}),
    );
    s += &ev(
        json!({"type":"response.refusal.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"No, "}),
    );
    s += &ev(
        json!({"type":"response.refusal.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"sorry."}),
    );
    s += &ev(json!({"type":"response.completed","response":{"id":"r","status":"completed"}}));
    assert!(refused(&decode_every_split(&responses, s.as_bytes()), "No, sorry."));
    let mut s = ev(
        json!({"type":"response.output_item.done","output_index":0,"item":{"id":"msg_2","type":"message","role":"assistant","content":[{"type":"refusal","refusal":"Not that."}]}}),
    );
    s += &ev(json!({"type":"response.completed","response":{"id":"r","status":"completed"}}));
    assert!(refused(&decode(&responses, &[s.as_bytes()]), "Not that."));

    let anthropic = provider(json!({"kind": "anthropic", "model": "claude-sonnet-4-5"}));
    let mut s = ev(
        json!({"type":"message_start","message":{"id":"m","content":[],"usage":{"input_tokens":1,"output_tokens":1}}}),
    );
    s += &ev(json!({"type":"message_delta","delta":{"stop_reason":"refusal"},"usage":{"output_tokens":1}}));
    s += &ev(json!({"type":"message_stop"}));
    assert!(refused(&decode(&anthropic, &[s.as_bytes()]), "refused"));
    assert!(!kosong_wasm::engine::soul::rules::is_retryable(&kosong_wasm::engine::providers::refusal("x")));
}

/// Two output messages in one Responses answer stay two text parts ("Got it" and "Here are…"),
/// not one run-together text.
#[test]
fn responses_output_messages_stay_apart() {
    let p = provider(json!({"kind": "openai_responses", "model": "gpt-5"}));
    let ev = |v: Value| format!("event: {}\ndata: {v}\n\n", v["type"].as_str().unwrap());
    let mut s = String::new();
    for (i, t) in ["Got it.", "Here are the results."].iter().enumerate() {
        let id = format!("msg_{i}");
        s += &ev(
            json!({"type":"response.output_item.added","output_index":i,"item":{"id":id,"type":"message","role":"assistant","content":[]}}),
        );
        s +=
            &ev(json!({"type":"response.output_text.delta","item_id":id,"output_index":i,"content_index":0,"delta":t}));
    }
    s += &ev(json!({"type":"response.completed","response":{"id":"r","status":"completed"}}));
    let o = decode_every_split(&p, s.as_bytes());
    assert!(o.end.is_ok(), "{:?}", o.end);
    assert_eq!(o.message.content, vec![ContentPart::text("Got it."), ContentPart::text("Here are the results.")]);
}

/// Vertex's streamed function-call arguments (`partialArgs` with `jsonPath`, `willContinue`)
/// are assembled into one call with its full arguments, handed on only when its last piece came;
/// a stream that ends inside such a call is an error, and no tool runs on it.
#[test]
fn gemini_streamed_function_call_arguments() {
    let p = provider(json!({"kind": "gemini", "model": "gemini-3-pro"}));
    let chunk = |parts: Value, finish: Option<&str>| {
        let mut c = json!({"responseId": "resp1", "candidates": [{"content": {"role": "model", "parts": parts}}]});
        if let Some(f) = finish {
            c["candidates"][0]["finishReason"] = json!(f);
        }
        format!("data: {c}\n\n")
    };
    let mut s = chunk(json!([{"text": "Checking."}]), None);
    s += &chunk(
        json!([{"functionCall": {"name": "get_weather", "willContinue": true}, "thoughtSignature": "c2ln"}]),
        None,
    );
    s += &chunk(
        json!([{"functionCall": {"partialArgs": [{"jsonPath": "$.location", "stringValue": "San Fr", "willContinue": true}], "willContinue": true}}]),
        None,
    );
    s += &chunk(
        json!([{"functionCall": {"partialArgs": [{"jsonPath": "$.location", "stringValue": "ancisco"}], "willContinue": true}}]),
        None,
    );
    s += &chunk(
        json!([{"functionCall": {"partialArgs": [
        {"jsonPath": "$.days", "numberValue": 3},
        {"jsonPath": "$.units['temp']", "stringValue": "C"},
        {"jsonPath": "$.hours[0]", "numberValue": 9},
        {"jsonPath": "$.hours[1]", "numberValue": 18},
        {"jsonPath": "$.alerts", "boolValue": true}
    ], "willContinue": true}}]),
        None,
    );
    s += &chunk(json!([{"functionCall": {}}]), Some("STOP"));
    let o = decode_every_split(&p, s.as_bytes());
    assert!(o.end.is_ok(), "{:?}", o.end);
    let calls = o.message.tool_calls.as_deref().unwrap();
    assert_eq!(calls.len(), 1, "one call, not one per piece");
    assert_eq!(calls[0].function.name, "get_weather");
    assert_eq!(
        serde_json::from_str::<Value>(calls[0].function.arguments.as_deref().unwrap()).unwrap(),
        json!({"location": "San Francisco", "days": 3, "units": {"temp": "C"}, "hours": [9, 18], "alerts": true})
    );
    assert_eq!(calls[0].extras.as_ref().unwrap()["thought_signature_b64"], "c2ln");
    assert_eq!(o.completed(), vec![calls[0].id.clone()]);
    let complete_at = o.completed_at(&calls[0].id);
    assert_eq!(complete_at, o.events.len() - 1, "complete only once its last piece came");

    let mut cut = chunk(json!([{"functionCall": {"name": "f", "willContinue": true}}]), None);
    cut += &chunk(
        json!([{"functionCall": {"partialArgs": [{"jsonPath": "$.a", "stringValue": "x", "willContinue": true}], "willContinue": true}}]),
        Some("STOP"),
    );
    let o = decode(&p, &[cut.as_bytes()]);
    assert!(matches!(&o.end, Err(ChatProviderError::Failed { kind: FailureKind::Truncated, .. })), "{:?}", o.end);
    assert!(o.completed().is_empty());

    let bad = chunk(
        json!([{"functionCall": {"name": "f", "partialArgs": [{"jsonPath": "$.a[99999999]", "numberValue": 1}]}}]),
        Some("STOP"),
    );
    let o = decode(&p, &[bad.as_bytes()]);
    assert!(
        matches!(&o.end, Err(ChatProviderError::Failed { kind: FailureKind::Malformed, .. })),
        "an index past the next one: {:?}",
        o.end
    );
}

/// The parts of `m` that carry a provider-run tool's block, as (provider, value).
fn server_tools(m: &Message) -> Vec<Value> {
    m.content.iter().filter(|p| p.is_server_tool()).map(|p| serde_json::to_value(p).unwrap()).collect()
}

fn sse(events: &[Value]) -> String {
    events.iter().map(|v| format!("event: {}\ndata: {v}\n\n", v["type"].as_str().unwrap())).collect()
}

/// Anthropic web search: `server_tool_use` (its input streamed), `web_search_tool_result` and
/// cited text blocks. The server blocks stay in the message in order, are never dispatched, and
/// go back as they came on the next request; each text block keeps its own citations, which go
/// back with it. Another provider leaves the blocks out.
#[test]
fn anthropic_server_tools_and_citations_are_kept_and_sent_back() {
    let p = provider(json!({"kind": "anthropic", "model": "claude-sonnet-4-5"}));
    let cite = json!({"type": "web_search_result_location", "url": "https://en.wikipedia.org/wiki/Claude_Shannon",
        "title": "Claude Shannon", "encrypted_index": "Eo8BCioIAhgBIiQ", "cited_text": "Claude Elwood Shannon (April 30, 1916 –"});
    let result = json!({"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01", "content": [
        {"type": "web_search_result", "title": "Claude Shannon", "url": "https://en.wikipedia.org/wiki/Claude_Shannon",
         "encrypted_content": "EqgfCioIARgBIiQ3", "page_age": "April 30, 2025"}]});
    let s = sse(&[
        json!({"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"usage":{"input_tokens":2679,"output_tokens":3}}}),
        json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
        json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"I'll search for that."}}),
        json!({"type":"content_block_stop","index":0}),
        json!({"type":"content_block_start","index":1,"content_block":{"type":"server_tool_use","id":"srvtoolu_01","name":"web_search","input":{}}}),
        json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"query\": \"claude "}}),
        json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"shannon birth date\"}"}}),
        json!({"type":"content_block_stop","index":1}),
        json!({"type":"content_block_start","index":2,"content_block": result}),
        json!({"type":"content_block_stop","index":2}),
        json!({"type":"content_block_start","index":3,"content_block":{"type":"text","text":""}}),
        json!({"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"Here is what I found: "}}),
        json!({"type":"content_block_stop","index":3}),
        json!({"type":"content_block_start","index":4,"content_block":{"type":"text","text":"","citations":[]}}),
        json!({"type":"content_block_delta","index":4,"delta":{"type":"citations_delta","citation": cite}}),
        json!({"type":"content_block_delta","index":4,"delta":{"type":"text_delta","text":"Shannon was born on April 30, 1916."}}),
        json!({"type":"content_block_stop","index":4}),
        json!({"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":510,"server_tool_use":{"web_search_requests":1}}}),
        json!({"type":"message_stop"}),
    ]);
    let o = decode_every_split(&p, s.as_bytes());
    assert!(o.end.is_ok(), "{:?}", o.end);
    assert!(o.message.tool_calls.is_none(), "a server tool is not the toolset's: {:?}", o.message.tool_calls);
    let m = &o.message;
    assert_eq!(m.content.len(), 5, "{:#?}", m.content);
    assert_eq!(m.content[0], ContentPart::text("I'll search for that."));
    let st = server_tools(m);
    assert_eq!(st[0]["extras"]["server_tool"]["provider"], "anthropic");
    assert_eq!(
        st[0]["extras"]["server_tool"]["value"],
        json!({"type":"server_tool_use","id":"srvtoolu_01","name":"web_search","input":{"query":"claude shannon birth date"}})
    );
    assert_eq!(st[1]["extras"]["server_tool"]["value"], result);
    assert_eq!(
        m.content[3],
        ContentPart::text("Here is what I found: "),
        "a plain block is not merged with a cited one"
    );
    assert_eq!(m.content[4].text_extra_list("citations"), Some(&vec![cite.clone()]));
    assert_eq!(m.extract_text(""), "I'll search for that.Here is what I found: Shannon was born on April 30, 1916.");

    // The message in a context file reads back the same.
    let line = serde_json::to_string(m).unwrap();
    assert_eq!(&serde_json::from_str::<Message>(&line).unwrap(), m);

    // Next turn: the assistant message goes back block for block.
    let history = vec![Message::new(Role::User, vec![ContentPart::text("When was Shannon born?")]), m.clone()];
    let req = p.build_request("", &[], &history).unwrap();
    let body: Value = serde_json::from_str(&req.body).unwrap();
    let sent = &body["messages"][1]["content"];
    assert_eq!(sent[0], json!({"type":"text","text":"I'll search for that."}));
    assert_eq!(sent[1]["type"], "server_tool_use");
    assert_eq!(sent[1]["input"], json!({"query":"claude shannon birth date"}));
    assert_eq!(sent[2], result);
    assert_eq!(sent[3]["text"], "Here is what I found: ");
    assert!(sent[3].get("citations").is_none());
    assert_eq!(sent[4]["citations"], json!([cite]));
    assert_eq!(sent.as_array().unwrap().len(), 5);

    // Chat Completions has no place for them: only the text goes.
    let chat = provider(json!({"kind": "openai", "model": "gpt-4o"}));
    let body: Value = serde_json::from_str(&chat.build_request("", &[], &history).unwrap().body).unwrap();
    let texts: Vec<&str> =
        body["messages"][1]["content"].as_array().unwrap().iter().map(|p| p["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["I'll search for that.", "Here is what I found: ", "Shannon was born on April 30, 1916."]);
}

/// A server block whose streamed input is not JSON is a malformed stream, not a silent `{}`.
#[test]
fn anthropic_server_tool_with_broken_input_is_an_error() {
    let p = provider(json!({"kind": "anthropic", "model": "claude-sonnet-4-5"}));
    let s = sse(&[
        json!({"type":"message_start","message":{"id":"m","content":[],"usage":{"input_tokens":1}}}),
        json!({"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"code_execution","input":{}}}),
        json!({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"code\": \"print("}}),
        json!({"type":"content_block_stop","index":0}),
        json!({"type":"message_stop"}),
    ]);
    let o = decode(&p, &[s.as_bytes()]);
    let err = o.end.unwrap_err();
    assert_eq!(err.kind(), "malformed", "{err}");
    assert!(err.to_string().contains("server tool"), "{err}");
}

/// Responses: `web_search_call` items and `url_citation` annotations. The item stays in the
/// message and goes back as an input item in its place; annotations stay with their text and
/// go back in `output_text.annotations`. A server that lists annotations only in the finished
/// message is read too (once).
#[test]
fn responses_hosted_tools_and_annotations_are_kept_and_sent_back() {
    let p = provider(json!({"kind": "openai_responses", "model": "gpt-5"}));
    let ws = json!({"id":"ws_1","type":"web_search_call","status":"completed","action":{"type":"search","query":"positive news today"}});
    let ann = json!({"type":"url_citation","start_index":0,"end_index":10,"url":"https://example.com/a","title":"A"});
    for streamed in [true, false] {
        let mut evs = vec![
            json!({"type":"response.created","response":{"id":"resp_1"}}),
            json!({"type":"response.output_item.added","output_index":0,"item":{"id":"ws_1","type":"web_search_call","status":"in_progress"}}),
            json!({"type":"response.web_search_call.searching","output_index":0,"item_id":"ws_1"}),
            json!({"type":"response.output_item.done","output_index":0,"item": ws}),
            json!({"type":"response.output_item.added","output_index":1,"item":{"id":"msg_1","type":"message","role":"assistant","content":[]}}),
            json!({"type":"response.output_text.delta","item_id":"msg_1","output_index":1,"content_index":0,"delta":"Good news: the river is clean."}),
        ];
        if streamed {
            evs.push(json!({"type":"response.output_text.annotation.added","item_id":"msg_1","output_index":1,"content_index":0,"annotation_index":0,"annotation": ann}));
        }
        evs.push(json!({"type":"response.output_item.done","output_index":1,"item":{"id":"msg_1","type":"message","role":"assistant",
            "content":[{"type":"output_text","text":"Good news: the river is clean.","annotations":[ann]}]}}));
        evs.push(json!({"type":"response.completed","response":{"id":"resp_1","status":"completed"}}));
        let o = decode_every_split(&p, sse(&evs).as_bytes());
        assert!(o.end.is_ok(), "{:?}", o.end);
        let m = &o.message;
        assert!(m.tool_calls.is_none());
        assert_eq!(m.content.len(), 2, "{:#?}", m.content);
        assert_eq!(server_tools(m)[0]["extras"]["server_tool"], json!({"provider":"openai_responses","value": ws}));
        assert_eq!(m.content[1].text_extra_list("annotations"), Some(&vec![ann.clone()]), "streamed: {streamed}");

        let history = vec![Message::new(Role::User, vec![ContentPart::text("news?")]), m.clone()];
        let body: Value = serde_json::from_str(&p.build_request("", &[], &history).unwrap().body).unwrap();
        let input = body["input"].as_array().unwrap();
        assert_eq!(input[1], ws);
        assert_eq!(input[2]["type"], "message");
        assert_eq!(input[2]["content"][0]["annotations"], json!([ann]));
        // Anthropic has no use for OpenAI's item: it is left out, the text goes.
        let a = provider(json!({"kind": "anthropic", "model": "claude-sonnet-4-5"}));
        let body: Value = serde_json::from_str(&a.build_request("", &[], &history).unwrap().body).unwrap();
        let sent = body["messages"][1]["content"].as_array().unwrap();
        assert_eq!((sent.len(), &sent[0]["text"]), (1, &json!("Good news: the river is clean.")));
    }
}

/// Perplexity repeats the answer's sources (`citations`, `search_results`) in every chunk; they
/// are kept once, with the text. OpenAI's search models send `annotations` in the delta.
#[test]
fn chat_sources_stay_with_the_text() {
    let p = provider(json!({"kind": "openai", "model": "sonar", "baseUrl": "https://api.perplexity.ai"}));
    let cites = json!(["https://a.example/1", "https://b.example/2"]);
    let results = json!([{"title":"One","url":"https://a.example/1","date":"2025-01-01"}]);
    let chunk = |content: &str, finish: Option<&str>| {
        format!(
            "data: {}\n\n",
            json!({"id":"p1","model":"sonar","citations": cites, "search_results": results,
                "choices":[{"index":0,"delta":{"role":"assistant","content":content},"finish_reason":finish}]})
        )
    };
    let s = chunk("The answer ", None) + &chunk("is 42 [1].", None) + &chunk("", Some("stop")) + "data: [DONE]\n\n";
    let o = decode_every_split(&p, s.as_bytes());
    assert!(o.end.is_ok(), "{:?}", o.end);
    assert_eq!(o.message.content.len(), 1, "{:#?}", o.message.content);
    assert_eq!(o.message.extract_text(""), "The answer is 42 [1].");
    assert_eq!(o.message.content[0].text_extra_list("citations"), cites.as_array());
    assert_eq!(o.message.content[0].text_extra_list("search_results"), results.as_array());

    let ann = json!({"type":"url_citation","url_citation":{"start_index":0,"end_index":5,"url":"https://x.example","title":"X"}});
    let s = format!(
        "data: {}\n\ndata: {}\n\ndata: [DONE]\n\n",
        json!({"id":"c","choices":[{"index":0,"delta":{"content":"Hello"}}]}),
        json!({"id":"c","choices":[{"index":0,"delta":{"annotations":[ann]},"finish_reason":"stop"}]})
    );
    let o = decode_every_split(&provider(json!({"kind": "openai", "model": "gpt-4o-search-preview"})), s.as_bytes());
    assert_eq!(o.message.content.len(), 1);
    assert_eq!(o.message.content[0].text_extra_list("annotations"), Some(&vec![ann]));
}

#[test]
fn a_provider_spec_is_read_field_by_field_with_errors_that_name_the_field() {
    let err = |spec: Value| HttpProvider::from_json(&spec.to_string()).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err(json!({"kind": "openai"})).contains("missing field `model`"));
    assert!(err(json!({"model": "m"})).contains("missing field `kind`"));
    assert!(err(json!({"kind": "nope", "model": "m"})).contains("unknown variant `nope`"));
    assert!(err(json!({"kind": "openai", "model": "m", "maxTokens": 1.5}))
        .contains("`maxTokens` must be a positive integer"));
    assert!(
        err(json!({"kind": "openai", "model": "m", "maxTokens": 0})).contains("`maxTokens` must be a positive integer")
    );
    assert!(err(json!({"kind": "anthropic", "model": "m", "adaptiveThinking": "yes"}))
        .contains("`adaptiveThinking` must be a boolean"));
    assert!(err(json!({"kind": "gemini", "model": "m", "headers": []})).contains("`headers` must be an object"));
    assert!(err(json!([1])).contains("must be a JSON object"));
    assert!(HttpProvider::from_json("{").is_err());
    // `null` is as good as absent; every field reaches the request.
    let p = provider(json!({"kind": "anthropic", "model": "claude-x", "apiKey": "k", "baseUrl": null, "maxTokens": 77,
        "headers": {"x-h": "1"}, "extraBody": {"metadata": {"user_id": "u"}}, "adaptiveThinking": null, "temperature": 0.5}));
    assert_eq!(p.http().api_key.as_deref(), Some("k"));
    let req = p.build_request("", &[], &[Message::new(Role::User, vec![ContentPart::text("hi")])]).unwrap();
    let body: Value = serde_json::from_str(&req.body).unwrap();
    assert_eq!(
        (body["model"].as_str(), body["max_tokens"].as_u64(), body["temperature"].as_f64()),
        (Some("claude-x"), Some(77), Some(0.5))
    );
    assert_eq!(body["metadata"]["user_id"], "u");
    assert!(req.headers.iter().any(|(k, v)| k == "x-h" && v == "1"));
}

/// What real servers send beyond the docs: an identical second `message_start` before any
/// content is ignored (vercel/ai#18331) while another message's start stays `malformed`; a
/// `tool_use` with no input deltas keeps `""` as kosong does; xAI's `custom_tool_call` items
/// (run by xAI) are kept as server-tool parts and sent back.
#[test]
fn anthropic_repeated_message_start_and_empty_tool_input() {
    let p = provider(json!({"kind": "anthropic", "model": "claude-sonnet-4-5"}));
    let start = |id: &str| json!({"type":"message_start","message":{"id": id,"type":"message","role":"assistant","content":[],"usage":{"input_tokens":3,"output_tokens":1}}});
    let text = [
        json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
        json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}),
        json!({"type":"content_block_stop","index":0}),
    ];
    let tool = [
        json!({"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"now","input":{}}}),
        json!({"type":"content_block_stop","index":1}),
    ];
    let end = [
        json!({"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":2}}),
        json!({"type":"message_stop"}),
    ];
    let all = |evs: Vec<Value>| evs;
    let twice: Vec<Value> = [vec![start("msg_1"), start("msg_1")], text.to_vec(), tool.to_vec(), end.to_vec()].concat();
    let o = decode_every_split(&p, sse(&all(twice)).as_bytes());
    assert!(o.end.is_ok(), "{:?}", o.end);
    assert_eq!(o.message.extract_text(""), "Hi");
    let calls = o.message.tool_calls.as_deref().unwrap();
    assert_eq!(calls[0].function.arguments.as_deref(), Some(""), "no input delta: kosong keeps \"\"");

    for bad in [
        [vec![start("msg_1"), start("msg_2")], text.to_vec(), end.to_vec()].concat(),
        [vec![start("msg_1")], text.to_vec(), vec![start("msg_1")], end.to_vec()].concat(),
    ] {
        let o = decode_every_split(&p, sse(&bad).as_bytes());
        assert!(matches!(&o.end, Err(ChatProviderError::Failed { kind: FailureKind::Malformed, .. })), "{:?}", o.end);
    }
}

#[test]
fn responses_custom_tool_call_items_are_kept_as_server_tools() {
    let p = provider(json!({"kind": "openai_responses", "model": "grok-4"}));
    let item = json!({"id":"ctc_1","type":"custom_tool_call","call_id":"xs_1","name":"x_search","input":"{\"query\":\"kosong\"}","status":"completed"});
    let evs = vec![
        json!({"type":"response.created","response":{"id":"resp_x"}}),
        json!({"type":"response.output_item.added","output_index":0,"item":{"id":"ctc_1","type":"custom_tool_call","call_id":"xs_1","name":"x_search","input":""}}),
        json!({"type":"response.output_item.done","output_index":0,"item": item}),
        json!({"type":"response.output_item.added","output_index":1,"item":{"id":"msg_1","type":"message","role":"assistant","content":[]}}),
        json!({"type":"response.output_text.delta","item_id":"msg_1","output_index":1,"content_index":0,"delta":"Found it."}),
        json!({"type":"response.completed","response":{"id":"resp_x","status":"completed"}}),
    ];
    let o = decode_every_split(&p, sse(&evs).as_bytes());
    assert!(o.end.is_ok(), "{:?}", o.end);
    assert!(o.message.tool_calls.is_none(), "not a call for the caller's tools");
    assert_eq!(server_tools(&o.message)[0]["extras"]["server_tool"]["value"], item);
    let history = vec![Message::new(Role::User, vec![ContentPart::text("?")]), o.message.clone()];
    let body: Value = serde_json::from_str(&p.build_request("", &[], &history).unwrap().body).unwrap();
    assert_eq!(body["input"][1], item, "sent back as it came");
}

#[test]
fn redirects_are_followed_only_to_the_same_origin() {
    use kosong_wasm::engine::providers::{origin_of, same_origin_redirect};
    assert_eq!(origin_of("https://API.example.com:443/v1/x?q").as_deref(), Some("https://api.example.com"));
    assert_eq!(origin_of("http://u:p@127.0.0.1:8080/v1").as_deref(), Some("http://127.0.0.1:8080"));
    let from = "http://127.0.0.1:8080/v1/chat/completions";
    for status in [301, 302, 307, 308] {
        assert_eq!(same_origin_redirect(from, Some("/v2/chat"), status).unwrap(), "http://127.0.0.1:8080/v2/chat");
        assert_eq!(
            same_origin_redirect(from, Some("completions2"), status).unwrap(),
            "http://127.0.0.1:8080/v1/chat/completions2"
        );
        assert_eq!(
            same_origin_redirect(from, Some("http://127.0.0.1:8080/x"), status).unwrap(),
            "http://127.0.0.1:8080/x"
        );
        for elsewhere in
            ["http://127.0.0.1:9090/v1", "https://127.0.0.1:8080/v1", "//evil.example/v1", "http://evil.example/"]
        {
            let e = same_origin_redirect(from, Some(elsewhere), status).unwrap_err();
            assert_eq!((e.kind(), e.class_name()), ("redirect", "APIConnectionError"), "{elsewhere}");
            assert!(e.message().contains("nothing was sent there"), "{e}");
        }
        assert!(same_origin_redirect(from, None, status).is_err());
    }
    // A userinfo trick does not make another host the same origin.
    assert!(same_origin_redirect(from, Some("http://127.0.0.1:8080@evil.example/"), 307).is_err());
}

#[test]
fn urls_keep_their_shape_and_their_secrets() {
    // A Gemini model name is one path segment, whatever it holds.
    let url = |model: &str| {
        provider(json!({"kind": "gemini", "model": model, "baseUrl": "http://127.0.0.1:1/v1beta"}))
            .build_request("", &[], &[Message::new(Role::User, vec![ContentPart::text("hi")])])
            .map(|r| r.url)
    };
    assert_eq!(
        url("../../admin/delete").unwrap(),
        "http://127.0.0.1:1/v1beta/models/..%2F..%2Fadmin%2Fdelete:streamGenerateContent?alt=sse"
    );
    assert_eq!(url("m#frag").unwrap(), "http://127.0.0.1:1/v1beta/models/m%23frag:streamGenerateContent?alt=sse");
    assert_eq!(
        url("models/gemini-2.5-flash").unwrap(),
        "http://127.0.0.1:1/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
    assert!(url("..").is_err());
    // Credentials in a baseUrl are refused, and the refusal does not repeat them.
    let e = HttpProvider::from_json(
        &json!({"kind": "openai", "model": "m", "baseUrl": "https://user:hunter22@api.example.com/v1"}).to_string(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("must not carry credentials") && !e.contains("hunter22"), "{e}");
    assert!(
        HttpProvider::from_json(&json!({"kind": "openai", "model": "m", "baseUrl": "ftp://x/v1"}).to_string()).is_err()
    );
    // A key echoed URL-encoded is redacted too.
    let key = "sk-ab/c+d=e";
    let e = ChatProviderError::Status {
        status: 401,
        message: "bad key sk-ab%2Fc%2Bd%3De and sk-ab/c+d=e".into(),
        request_id: None,
        retry_after_ms: None,
    };
    assert_eq!(
        e.redact(&kosong_wasm::engine::secrets::Secrets::of_key(key)).message(),
        "bad key [redacted] and [redacted]"
    );
}

// ---- structured output ----------------------------------------------------------------------
// Each provider's streamed structured answer (`tests/fixtures/structured/*.sse`, the same answer
// `answer.json`, cut mid-key, mid-number, mid-escape and between the escapes of a surrogate pair)
// and its request with `output` (`tests/fixtures/*.output.request.json`).

fn output_format() -> kosong_wasm::engine::output::OutputFormat {
    kosong_wasm::engine::output::OutputFormat::from_json(
        &json!({"schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
                "name": "forecast", "strict": true})
        .to_string(),
        "options",
    )
    .unwrap()
}

#[test]
fn structured_answers_decode_at_every_split() {
    use kosong_wasm::engine::output::answer_json;
    use kosong_wasm::engine::partial_json::PartialJson;
    let answer = String::from_utf8(fixture("structured/answer.json")).unwrap().trim_end().to_owned();
    let expected: Value = serde_json::from_str(&answer).unwrap();
    for (kind, model, file) in [
        ("openai", "gpt-5.1-mini", "openai"),
        ("kimi", "kimi-k2.6", "kimi"),
        ("anthropic", "claude-sonnet-4-6", "anthropic"),
        ("openai_responses", "gpt-5.1-mini", "responses"),
        ("gemini", "gemini-2.5-flash", "gemini"),
    ] {
        let p = provider(json!({"kind": kind, "model": model}));
        let o = decode_every_split(&p, &fixture(&format!("structured/{file}.sse")));
        assert_eq!(o.end, Ok(()), "{file}");
        assert_eq!(answer_json(&o.message), Ok(Some(answer.clone())), "{file}");
        let parsed: Value = serde_json::from_str(&answer_json(&o.message).unwrap().unwrap()).unwrap();
        assert_eq!(parsed, expected, "{file}");
        // The preview over the streamed text parts ends at the parsed value.
        let mut pj = PartialJson::new();
        let mut preview = Value::Null;
        for e in &o.events {
            if let StreamEvent::Part(kosong_wasm::engine::message::StreamedMessagePart::Content(ContentPart::Text {
                text,
                ..
            })) = e
            {
                for edit in pj.feed(text) {
                    kosong_wasm::engine::partial_json::apply_edit(&mut preview, edit);
                }
            }
        }
        assert!(pj.done(), "{file}");
        assert_eq!(preview, expected, "{file}");
        assert_eq!(o.usage.map(|u| u.output), Some(58), "{file}");
    }
}

#[test]
fn structured_output_requests() {
    let output = output_format();
    let body = |spec: Value| -> Value {
        let req = provider(spec)
            .build(&Prompt::new("You are terse.", &tools(), &history()).with_output(Some(&output)))
            .unwrap();
        serde_json::from_str(&req.body).unwrap()
    };
    let schema = output.schema.clone();
    let chat = body(json!({"kind": "openai", "model": "gpt-5.1-mini"}));
    assert_eq!(
        chat["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "forecast", "schema": schema, "strict": true}})
    );
    snapshot("openai.output", &chat);
    let responses = body(json!({"kind": "openai_responses", "model": "gpt-5.1-mini"}));
    assert_eq!(
        responses["text"],
        json!({"format": {"type": "json_schema", "name": "forecast", "schema": schema, "strict": true}})
    );
    snapshot("responses.output", &responses);
    let anthropic = body(json!({"kind": "anthropic", "model": "claude-sonnet-4-6", "thinkingEffort": "high"}));
    // Beside the effort the adaptive thinking puts there.
    assert_eq!(
        anthropic["output_config"],
        json!({"effort": "high", "format": {"type": "json_schema", "schema": schema}})
    );
    snapshot("anthropic.output", &anthropic);
    let plain = body(json!({"kind": "anthropic", "model": "claude-sonnet-4-5"}));
    assert_eq!(plain["output_config"], json!({"format": {"type": "json_schema", "schema": schema}}));
    let gemini = body(json!({"kind": "gemini", "model": "gemini-2.5-flash"}));
    assert_eq!(gemini["generationConfig"]["responseMimeType"], "application/json");
    assert_eq!(gemini["generationConfig"]["responseJsonSchema"], schema);
    snapshot("gemini.output", &gemini);
    // Kimi: JSON mode, the schema told in the system prompt after the caller's.
    let kimi = body(json!({"kind": "kimi", "model": "kimi-k2.6"}));
    assert_eq!(kimi["response_format"], json!({"type": "json_object"}));
    let prompt = kimi["messages"][0]["content"].as_str().unwrap();
    assert!(prompt.starts_with("You are terse.\n\n"), "{prompt}");
    assert!(prompt.ends_with(&schema.to_string()), "{prompt}");
    snapshot("kimi.output", &kimi);
    // Without a system prompt the schema is the whole of it.
    let req = provider(json!({"kind": "kimi", "model": "kimi-k2.6"}))
        .build(&Prompt::new("", &[], &history()).with_output(Some(&output)))
        .unwrap();
    let b: Value = serde_json::from_str(&req.body).unwrap();
    assert!(b["messages"][0]["content"].as_str().unwrap().starts_with("Answer with one JSON object"));
    // JSON mode answers objects only: an array schema is refused before anything is sent.
    let array =
        kosong_wasm::engine::output::OutputFormat::from_json(r#"{"schema":{"type":"array"}}"#, "options").unwrap();
    let e = provider(json!({"kind": "kimi", "model": "kimi-k2.6"}))
        .build(&Prompt::new("", &[], &history()).with_output(Some(&array)))
        .unwrap_err();
    assert_eq!(e.kind(), "invalid_request");
    assert!(e.message().contains("wrap it in an object"), "{e}");
    // No output, no trace of it.
    for kind in ["openai", "kimi", "anthropic", "openai_responses", "gemini"] {
        let b: Value = serde_json::from_str(
            &provider(json!({"kind": kind, "model": "m"})).build(&Prompt::new("", &[], &history())).unwrap().body,
        )
        .unwrap();
        for key in ["response_format", "text", "output_config"] {
            assert!(b.get(key).is_none(), "{kind}: {key}");
        }
    }
}

/// A user message with a PDF as data and one by link (what each format is given below).
fn file_history(linked: bool) -> Vec<Message> {
    let pdf = "data:application/pdf;base64,JVBERi0xLjQK";
    let mut content = vec![
        ContentPart::text("Summarise these."),
        ContentPart::File { file: FileRef { url: pdf.into(), media_type: None, filename: Some("report.pdf".into()) } },
    ];
    if linked {
        content.push(ContentPart::File {
            file: FileRef {
                url: "https://example.com/spec.pdf".into(),
                media_type: Some("application/pdf".into()),
                filename: None,
            },
        });
    }
    vec![Message::new(Role::User, content)]
}

#[test]
fn file_parts_go_out_in_each_formats_own_form() {
    // Responses, Anthropic and Gemini take a file as data and by link; Chat Completions as data.
    for (kind, model, linked) in [
        ("openai", "gpt-4.1", false),
        ("openai_responses", "gpt-5", true),
        ("anthropic", "claude-sonnet-4-5", true),
        ("gemini", "gemini-2.5-flash", true),
    ] {
        let req = provider(json!({"kind": kind, "model": model, "apiKey": "k"}))
            .build_request("", &[], &file_history(linked))
            .unwrap_or_else(|e| panic!("{kind}: {e:?}"));
        let body: Value = serde_json::from_str(&req.body).unwrap();
        let sent = match kind {
            "gemini" => body["contents"].clone(),
            "openai_responses" => body["input"].clone(),
            _ => body["messages"].clone(),
        };
        snapshot(&format!("{kind}.file"), &sent);
    }
}

#[test]
fn a_file_a_format_cannot_take_is_refused_before_anything_is_sent() {
    let refused = |spec: Value, history: Vec<Message>| -> String {
        match provider(spec).build_request("", &[], &history) {
            Err(e) => {
                assert_eq!(e.kind(), "invalid_request", "{e:?}");
                e.message().to_owned()
            }
            Ok(_) => panic!("sent"),
        }
    };
    let one = |file: FileRef| vec![Message::new(Role::User, vec![ContentPart::File { file }])];
    let link = |media: Option<&str>| FileRef {
        url: "https://example.com/a.pdf".into(),
        media_type: media.map(Into::into),
        filename: Some("a.pdf".into()),
    };
    assert_eq!(
        refused(json!({"kind": "openai", "model": "m"}), one(link(None))),
        "Chat Completions cannot take the file `a.pdf`: Chat Completions takes a file's data (a base64 data: URL), not a link to it; nothing was sent"
    );
    assert!(refused(json!({"kind": "kimi", "model": "m"}), file_history(false))
        .contains("the Kimi API cannot take the file `report.pdf`"));
    let csv = FileRef { url: "data:text/csv;base64,YSxiCg==".into(), media_type: None, filename: None };
    assert!(refused(json!({"kind": "anthropic", "model": "m"}), one(csv)).contains("as a PDF (application/pdf) only"));
    assert!(refused(json!({"kind": "gemini", "model": "m"}), one(link(None))).contains("needs its media_type"));
    let nowhere = FileRef { url: "file:///etc/passwd".into(), media_type: None, filename: None };
    for kind in ["openai", "openai_responses", "anthropic", "gemini"] {
        let m = refused(json!({"kind": kind, "model": "m"}), one(nowhere.clone()));
        assert!(m.contains("must be a base64 data: URL or an http(s) URL"), "{kind}: {m}");
    }
}

#[test]
fn a_file_part_reads_and_writes_as_kosong_shaped_json() {
    let v = json!({"type": "file", "file": {"url": "data:application/pdf;base64,AAAA", "filename": "x.pdf"}});
    let part: ContentPart = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(serde_json::to_value(&part).unwrap(), v);
    let ContentPart::File { file } = &part else { panic!() };
    assert_eq!(file.media_type(), Some("application/pdf"));
    assert!(serde_json::from_value::<ContentPart>(json!({"type": "file"})).is_err());
}

/// Groq (through Chat Completions) sends its token counts only in `x_groq.usage` on the last
/// chunk, and an `x_groq` object on the first; the counts are read, the text is whole.
#[test]
fn groq_usage_in_x_groq_is_counted() {
    let p = provider(
        json!({"kind": "openai", "model": "llama-3.3-70b-versatile", "baseUrl": "https://api.groq.com/openai/v1"}),
    );
    let c = |delta: Value, finish: Value, extra: Option<Value>| {
        let mut v = json!({"id":"chatcmpl-g1","object":"chat.completion.chunk","created":1770000000,
            "model":"llama-3.3-70b-versatile","system_fingerprint":"fp_x",
            "choices":[{"index":0,"delta":delta,"logprobs":null,"finish_reason":finish}]});
        if let Some(x) = extra {
            v["x_groq"] = x;
        }
        format!("data: {v}\n\n")
    };
    let s = c(json!({"role":"assistant","content":""}), Value::Null, Some(json!({"id":"req_1","seed":42})))
        + &c(json!({"content":"Hello"}), Value::Null, None)
        + &c(json!({"content":" there"}), Value::Null, None)
        + &c(
            json!({}),
            json!("stop"),
            Some(json!({"id":"req_1","usage":{"queue_time":0.04,"prompt_tokens":45,"prompt_time":0.003,
                "completion_tokens":662,"completion_time":2.6,"total_tokens":707,"total_time":2.65}})),
        )
        + "data: [DONE]\n\n";
    let o = decode_every_split(&p, s.as_bytes());
    assert!(o.end.is_ok(), "{:?}", o.end);
    assert_eq!(o.message.extract_text(""), "Hello there");
    assert_eq!(
        o.usage,
        Some(TokenUsage { input_other: 45, output: 662, input_cache_read: 0, input_cache_creation: 0 })
    );
    // A top-level `usage` wins where both are sent.
    let both =
        c(json!({"content":"x"}), json!("stop"), Some(json!({"usage":{"prompt_tokens":1,"completion_tokens":1}})))
            .replace("\"x_groq\"", "\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":3},\"x_groq\"");
    let o = decode_every_split(&p, both.as_bytes());
    assert_eq!(o.usage.map(|u| (u.input_other, u.output)), Some((7, 3)));
}

/// OpenRouter (and Snowflake) stream reasoning as `delta.reasoning_details`: without a
/// `reasoningKey` its text, summaries, signature and encrypted reasoning are think parts; beside a
/// `reasoning` string that the configured key reads, it is not counted twice.
#[test]
fn reasoning_details_are_think_parts() {
    let c = |delta: Value, finish: Value| {
        format!(
            "data: {}\n\n",
            json!({"id":"gen-1","provider":"Anthropic","model":"anthropic/claude-sonnet-4.5","object":"chat.completion.chunk",
                "created":1770000000,"choices":[{"index":0,"delta":delta,"finish_reason":finish,"native_finish_reason":finish}]})
        )
    };
    let text = |t: &str, sig: Value| {
        json!({"role":"assistant","content":"","reasoning":t,
            "reasoning_details":[{"type":"reasoning.text","text":t,"signature":sig,"format":"anthropic-claude-v1","index":0}]})
    };
    let s = c(text("Let me ", Value::Null), Value::Null)
        + &c(text("add them.", Value::Null), Value::Null)
        + &c(text("", json!("EqQBCkYIBxgCKkBsig")), Value::Null)
        + &c(json!({"role":"assistant","content":"2 + 2 = 4"}), Value::Null)
        + &c(json!({"role":"assistant","content":""}), json!("stop"))
        + "data: [DONE]\n\n";
    let p = provider(
        json!({"kind": "openai", "model": "anthropic/claude-sonnet-4.5", "baseUrl": "https://openrouter.ai/api/v1"}),
    );
    let o = decode_every_split(&p, s.as_bytes());
    assert!(o.end.is_ok(), "{:?}", o.end);
    assert_eq!(o.message.content.len(), 2, "{:#?}", o.message.content);
    assert_eq!(think(&o.message), ("Let me add them.", Some("EqQBCkYIBxgCKkBsig")));
    assert_eq!(o.message.content[1], ContentPart::text("2 + 2 = 4"));

    // `reasoningKey: "reasoning"` reads the string; the details beside it are the same text.
    let p = provider(json!({"kind": "openai", "model": "m", "reasoningKey": "reasoning"}));
    let o = decode_every_split(&p, s.as_bytes());
    assert_eq!(think(&o.message), ("Let me add them.", None));

    // A summary, and reasoning that comes only encrypted (OpenAI's models through OpenRouter).
    let s = c(
        json!({"content":null,"reasoning_details":[{"type":"reasoning.summary","summary":"Adding.","format":"openai-responses-v1"}]}),
        Value::Null,
    ) + &c(
        json!({"content":null,"reasoning_details":[{"type":"reasoning.encrypted","data":"gAAAAB-enc","format":"openai-responses-v1"},
            {"type":"reasoning.unknown-kind","text":"ignored"}]}),
        Value::Null,
    ) + &c(json!({"content":"4"}), json!("stop"))
        + "data: [DONE]\n\n";
    let p = provider(json!({"kind": "openai", "model": "openai/gpt-5"}));
    let o = decode_every_split(&p, s.as_bytes());
    assert!(o.end.is_ok(), "{:?}", o.end);
    assert_eq!(think(&o.message), ("Adding.", Some("gAAAAB-enc")));
    assert_eq!(o.message.extract_text(""), "4");
}

/// Gemini's code-execution tool: `executableCode` and `codeExecutionResult` parts stay in the
/// answer, in order, as server-tool parts; they go back to Gemini as they came and never to
/// another provider.
#[test]
fn gemini_code_execution_parts_are_kept_and_sent_back() {
    let p = provider(json!({"kind": "gemini", "model": "gemini-2.5-flash"}));
    let code = json!({"executableCode":{"language":"PYTHON","code":"print(sum(range(1, 101)))\n"}});
    let result = json!({"codeExecutionResult":{"outcome":"OUTCOME_OK","output":"5050\n"}});
    let chunk = |parts: Value, finish: Option<&str>| {
        let mut cand = json!({"content":{"parts":parts,"role":"model"},"index":0});
        if let Some(f) = finish {
            cand["finishReason"] = json!(f);
        }
        format!("data: {}\r\n\r\n", json!({"candidates":[cand],"modelVersion":"gemini-2.5-flash","responseId":"r-ce"}))
    };
    let s = chunk(json!([{"text":"I'll compute it."}]), None)
        + &chunk(json!([code]), None)
        + &chunk(json!([result]), None)
        + &chunk(json!([{"text":"The sum is 5050."}]), Some("STOP"));
    let o = decode_every_split(&p, s.as_bytes());
    assert!(o.end.is_ok(), "{:?}", o.end);
    let m = &o.message;
    assert_eq!(m.content.len(), 4, "{:#?}", m.content);
    let st = server_tools(m);
    assert_eq!(st.len(), 2);
    assert_eq!(st[0]["extras"]["server_tool"], json!({"provider":"gemini","value":code}));
    assert_eq!(st[1]["extras"]["server_tool"], json!({"provider":"gemini","value":result}));
    assert!(m.tool_calls.is_none());
    assert_eq!(m.extract_text(""), "I'll compute it.The sum is 5050.");
    let line = serde_json::to_string(m).unwrap();
    assert_eq!(&serde_json::from_str::<Message>(&line).unwrap(), m);

    let history = vec![Message::new(Role::User, vec![ContentPart::text("Sum 1..100 with code.")]), m.clone()];
    let body: Value = serde_json::from_str(&p.build_request("", &[], &history).unwrap().body).unwrap();
    assert_eq!(
        body["contents"][1]["parts"],
        json!([{"text":"I'll compute it."}, code, result, {"text":"The sum is 5050."}])
    );
    let chat = provider(json!({"kind": "anthropic", "model": "claude-x"}));
    let body: Value = serde_json::from_str(&chat.build_request("", &[], &history).unwrap().body).unwrap();
    assert!(!body.to_string().contains("executableCode"), "{body}");

    // An answer of code execution alone is an answer, not an empty one.
    let o = decode(&p, &[(chunk(json!([code]), None) + &chunk(json!([result]), Some("STOP"))).as_bytes()]);
    assert!(o.end.is_ok());
    assert_eq!(server_tools(&o.message).len(), 2);
}
