//! kosong's own test cases, run against the pure core on a native executor.

use std::cell::RefCell;
use std::rc::Rc;

use futures::executor::LocalPool;
use futures::future::LocalBoxFuture;
use futures::task::LocalSpawnExt;
use futures::FutureExt;
use serde_json::Value;

use kosong_wasm::engine::error::ChatProviderError;
use kosong_wasm::engine::generate::{generate, GenerateOutput, VecEventSource};
use kosong_wasm::engine::json::Arguments;
use kosong_wasm::engine::message::{ContentPart, MediaUrl, StreamedMessagePart, ToolCall, ToolCallPart};
use kosong_wasm::engine::providers::echo::{parse_echo_script, EchoScript};
use kosong_wasm::engine::providers::StreamEvent;
use kosong_wasm::engine::step::{collect_results, step, ToolDispatch, ToolResultCallback};
use kosong_wasm::engine::toolset::{
    settle, Prepared, SimpleToolset, ToolFailure, ToolOutput, ToolResult, ToolReturnValue,
};

fn text(t: &str) -> StreamedMessagePart {
    StreamedMessagePart::Content(ContentPart::text(t))
}
fn think(t: &str) -> StreamedMessagePart {
    StreamedMessagePart::Content(ContentPart::think(t))
}
fn call(id: &str, name: &str, args: Option<&str>) -> StreamedMessagePart {
    StreamedMessagePart::ToolCall(ToolCall::new(id, name, args.map(str::to_owned)))
}
fn frag(a: Option<&str>) -> StreamedMessagePart {
    StreamedMessagePart::ToolCallPart(ToolCallPart { arguments_part: a.map(str::to_owned), tool_call_id: None })
}

/// Parts as a provider streams them, with kosong's completion points.
fn source(parts: Vec<StreamedMessagePart>) -> VecEventSource<ChatProviderError> {
    let script = EchoScript { parts, id: None, usage: None };
    VecEventSource::new(script.events(), None, None)
}

fn run_generate(
    parts: Vec<StreamedMessagePart>,
) -> (Result<GenerateOutput, ChatProviderError>, Vec<StreamedMessagePart>, Vec<ToolCall>) {
    let seen = RefCell::new(Vec::new());
    let calls = RefCell::new(Vec::new());
    let mut src = source(parts);
    let out = futures::executor::block_on(generate(
        &mut src,
        |p: &StreamedMessagePart| {
            seen.borrow_mut().push(p.clone());
            Ok(None)
        },
        |c: &ToolCall| {
            calls.borrow_mut().push(c.clone());
            Ok(None)
        },
    ));
    (out, seen.into_inner(), calls.into_inner())
}

#[test]
fn generate_merges_as_kosong_does() {
    let input = vec![
        text("Hello, "),
        text("world"),
        text("!"),
        StreamedMessagePart::Content(ContentPart::ImageUrl {
            image_url: MediaUrl { url: "https://example.com/image.png".into(), id: None },
        }),
        text("Another text."),
        text(""),
        call("get_weather#123", "get_weather", None),
        frag(Some("{")),
        frag(Some("\"city\":")),
        frag(Some("\"Beijing\"")),
        frag(Some("}")),
        frag(None),
    ];
    let (out, seen, calls) = run_generate(input.clone());
    let m = out.unwrap().message;
    assert_eq!(
        m.content,
        vec![
            ContentPart::text("Hello, world!"),
            ContentPart::ImageUrl { image_url: MediaUrl { url: "https://example.com/image.png".into(), id: None } },
            ContentPart::text("Another text."),
        ]
    );
    let expected_call = ToolCall::new("get_weather#123", "get_weather", Some("{\"city\":\"Beijing\"}".into()));
    assert_eq!(m.tool_calls, Some(vec![expected_call.clone()]));
    assert_eq!(seen, input, "on_message_part sees exactly the input parts");
    assert_eq!(calls, vec![expected_call]);
}

#[test]
fn on_tool_call_sees_each_complete_call() {
    let input = vec![
        call("get_weather#123", "get_weather", None),
        frag(Some("{\"city\":\"Beijing\"}")),
        call("get_time#123", "get_time", Some("")),
    ];
    let (out, seen, calls) = run_generate(input.clone());
    let m = out.unwrap().message;
    assert_eq!(seen, input);
    assert_eq!(Some(calls), m.tool_calls);
}

#[test]
fn think_only_is_an_empty_response_and_think_with_more_is_not() {
    let (out, _, _) = run_generate(vec![think("Deep thinking about the problem...")]);
    assert!(matches!(out, Err(ChatProviderError::EmptyResponse(m)) if m.contains("only thinking content")));
    let (out, _, _) = run_generate(vec![think("Thinking..."), text("  \n  ")]);
    assert!(matches!(out, Err(ChatProviderError::EmptyResponse(m)) if m.contains("only thinking content")));
    let (out, _, _) = run_generate(vec![]);
    assert!(matches!(out, Err(ChatProviderError::EmptyResponse(_))));

    let m = run_generate(vec![think("Let me think..."), text("Here is the answer.")]).0.unwrap().message;
    assert!(matches!(m.content[0], ContentPart::Think { .. }) && matches!(m.content[1], ContentPart::Text { .. }));
    let m =
        run_generate(vec![think("I should call a tool..."), call("tool#1", "read_file", Some("{\"path\": \"/tmp\"}"))])
            .0
            .unwrap()
            .message;
    assert!(matches!(m.content[0], ContentPart::Think { .. }));
    assert_eq!(m.tool_calls.unwrap().len(), 1);
}

// ---- tools ------------------------------------------------------------------------------

/// A Rust handler: parses the arguments and runs a closure.
struct FnTool(Rc<dyn Fn(Value) -> Result<ToolReturnValue, ToolFailure>>);

/// kosong's `SimpleToolset.handle` over Rust handlers: the toolset's rules, then the handler.
fn handle(ts: &SimpleToolset<FnTool>, call: &ToolCall) -> LocalBoxFuture<'static, ToolResult> {
    match ts.prepare(call) {
        Prepared::Done(r) => async move { r }.boxed_local(),
        Prepared::Run(FnTool(f), args) => {
            let (f, id) = (f.clone(), call.id.clone());
            let args: Value = serde_json::from_str(args.text()).unwrap_or(Value::Null);
            async move { settle(id, f(args)) }.boxed_local()
        }
    }
}

fn plus_toolset() -> SimpleToolset<FnTool> {
    let mut ts = SimpleToolset::default();
    ts.add(
        "plus",
        String::new(),
        None,
        true,
        FnTool(Rc::new(|v: Value| {
            let a = v["a"].as_i64().ok_or_else(|| ToolFailure::Validate("'a' is a required integer".into()))?;
            let b = v["b"].as_i64().ok_or_else(|| ToolFailure::Validate("'b' is a required integer".into()))?;
            Ok(ToolReturnValue::ok(ToolOutput::Text((a + b).to_string()), "", ""))
        })),
    )
    .unwrap();
    ts.add("explode", String::new(), None, true, FnTool(Rc::new(|_| Err(ToolFailure::Runtime("boom".into())))))
        .unwrap();
    ts
}

struct Dispatch(SimpleToolset<FnTool>);
impl ToolDispatch for Dispatch {
    fn is_eager(&self, _name: &str) -> bool {
        true
    }
    fn dispatch(&self, call: &ToolCall, _args: &Arguments<'_>) -> LocalBoxFuture<'static, ToolResult> {
        handle(&self.0, call)
    }
}

#[test]
fn step_plus_gives_tool_ok_3() {
    let plus = ToolCall::new("plus#123", "plus", Some("{\"a\": 1, \"b\": 2}".into()));
    let input = vec![text("Hello, world!"), StreamedMessagePart::ToolCall(plus.clone())];
    let mut pool = LocalPool::new();
    let spawner = pool.spawner();
    let spawn = move |f: LocalBoxFuture<'static, ()>| {
        let _ = spawner.spawn_local(f);
    };
    let seen = Rc::new(RefCell::new(Vec::new()));
    let results_cb = Rc::new(RefCell::new(Vec::new()));
    let rc = results_cb.clone();
    let on_result: ToolResultCallback = Rc::new(move |r: &ToolResult| rc.borrow_mut().push(r.clone()));
    let dispatch = Dispatch(plus_toolset());
    let s2 = seen.clone();
    let (out, results) = pool.run_until(async {
        let mut src = source(input.clone());
        let out = step(
            &mut src,
            &dispatch,
            &spawn,
            |p: &StreamedMessagePart| {
                s2.borrow_mut().push(p.clone());
                Ok(None)
            },
            Some(on_result),
        )
        .await
        .unwrap();
        let results = collect_results(out.results.clone()).await;
        (out, results)
    });
    pool.run_until_stalled();
    assert_eq!(out.generated.message.content, vec![ContentPart::text("Hello, world!")]);
    assert_eq!(out.generated.message.tool_calls.as_deref(), Some(&[plus][..]));
    assert_eq!(*seen.borrow(), input);
    let expected = vec![ToolResult {
        tool_call_id: "plus#123".into(),
        return_value: ToolReturnValue::ok(ToolOutput::Text("3".into()), "", ""),
    }];
    assert_eq!(results, expected);
    assert_eq!(*results_cb.borrow(), expected);
}

fn handle_now(ts: &SimpleToolset<FnTool>, c: ToolCall) -> ToolReturnValue {
    futures::executor::block_on(handle(ts, &c)).return_value
}

#[test]
fn simple_toolset_error_kinds() {
    let ts = plus_toolset();
    let r = handle_now(&ts, ToolCall::new("1", "minus", Some("{}".into())));
    assert!(r.is_error);
    assert_eq!(r.message, "Tool `minus` not found");
    assert_eq!(r.brief(), "Tool `minus` not found");

    let r = handle_now(&ts, ToolCall::new("2", "plus", Some("{\"a\": 1,".into())));
    assert!(r.is_error);
    assert!(r.message.starts_with("Error parsing JSON arguments: "), "{}", r.message);
    assert_eq!(r.brief(), "Invalid arguments");

    let r = handle_now(&ts, ToolCall::new("3", "plus", Some("{\"a\": \"x\", \"b\": 2}".into())));
    assert_eq!(r.message, "Error validating JSON arguments: 'a' is a required integer");
    assert_eq!(r.brief(), "Invalid arguments");

    let r = handle_now(&ts, ToolCall::new("4", "explode", None));
    assert_eq!(r.message, "Error running tool: boom");
    assert_eq!(r.brief(), "Tool runtime error");

    // Missing and empty arguments mean `{}` (the handler sees an object, not a parse error).
    let r = handle_now(&ts, ToolCall::new("5", "plus", Some(String::new())));
    assert_eq!(r.message, "Error validating JSON arguments: 'a' is a required integer");
}

#[test]
fn scripted_echo_round_trip_through_generate() {
    let script = parse_echo_script(
        "id: echo-1\nusage: input_other=3 output=2\nthink: hmm\ntext: Hi\ntool_call: {\"id\": \"c1\", \"name\": \"plus\", \"arguments\": \"{\\\"a\\\"\"}\ntool_call_part: {\"arguments_part\": \": 1}\"}",
    )
    .unwrap();
    let events = script.events();
    assert_eq!(events.last(), Some(&StreamEvent::ToolCallComplete("c1".into(), None)));
    let mut src: VecEventSource<ChatProviderError> = VecEventSource::new(events, script.id.clone(), script.usage);
    let out =
        futures::executor::block_on(generate(&mut src, |_: &StreamedMessagePart| Ok(None), |_: &ToolCall| Ok(None)))
            .unwrap();
    assert_eq!(out.id.as_deref(), Some("echo-1"));
    assert_eq!(out.usage.unwrap().output, 2);
    assert_eq!(out.message.tool_calls.unwrap()[0].function.arguments.as_deref(), Some("{\"a\": 1}"));
}

/// A body that yields the given chunks.
struct Chunks(std::collections::VecDeque<Vec<u8>>);

impl kosong_wasm::engine::generate::ByteSource for Chunks {
    type Error = ChatProviderError;
    async fn read_into(&mut self, buf: &mut Vec<u8>) -> Result<bool, ChatProviderError> {
        match self.0.pop_front() {
            Some(c) => {
                *buf = c;
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

#[test]
fn parts_before_an_error_in_the_same_chunk_reach_the_callback() {
    use kosong_wasm::engine::generate::SseEventSource;
    use kosong_wasm::engine::providers::openai_chat::OpenAIChatConfig;
    let body = "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\n\ndata: {\"error\":{\"message\":\"Rate limit\",\"code\":429}}\n\n";
    let decoder = OpenAIChatConfig::for_model("m").decoder();
    let mut src = SseEventSource::new(Chunks([body.as_bytes().to_vec()].into()), decoder);
    let seen = RefCell::new(Vec::new());
    let out = futures::executor::block_on(generate(
        &mut src,
        |p: &StreamedMessagePart| {
            seen.borrow_mut().push(p.clone());
            Ok(None)
        },
        |_: &ToolCall| Ok(None),
    ));
    assert!(matches!(out, Err(ChatProviderError::Status { status: 429, .. })));
    assert_eq!(*seen.borrow(), vec![text("Hel"), text("lo")]);
}

#[test]
fn missing_or_empty_arguments_mean_an_empty_object_but_whitespace_is_not_json() {
    use kosong_wasm::engine::step::malformed_arguments_result;
    assert!(Arguments::check(None).is_ok());
    assert!(Arguments::check(Some("")).is_ok());
    let call = ToolCall::new("c", "f", Some("  ".into()));
    let e = Arguments::check(call.function.arguments.as_deref()).unwrap_err();
    let r = malformed_arguments_result(&call, &e);
    assert!(r.return_value.message.starts_with("Error parsing JSON arguments:"));
}

/// Counts the events a decoder was given: how much of the body was decoded at some moment.
struct Counting<D>(D, Rc<std::cell::Cell<usize>>);

impl<D: kosong_wasm::engine::providers::StreamDecoder> kosong_wasm::engine::providers::StreamDecoder for Counting<D> {
    fn on_event(
        &mut self,
        event: &kosong_wasm::engine::sse::SseEvent,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), ChatProviderError> {
        self.1.set(self.1.get() + 1);
        self.0.on_event(event, out)
    }
    fn finish(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), ChatProviderError> {
        self.0.finish(out)
    }
    fn state(&self) -> &kosong_wasm::engine::providers::StreamState {
        self.0.state()
    }
}

/// A large network chunk is decoded a piece at a time: a call that completes near its start is
/// handed on before the rest of the chunk (here 30 KB of text) is decoded.
#[test]
fn a_call_early_in_a_large_chunk_is_handed_on_before_the_rest_is_decoded() {
    use kosong_wasm::engine::generate::SseEventSource;
    use kosong_wasm::engine::providers::openai_chat::OpenAIChatConfig;
    let mut body = String::from("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_a\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"x\\\":1}\"}}]}}]}\n\n");
    for i in 0..300 {
        body += &format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"word {i:05} of the text after the call, \"}}}}]}}\n\n");
    }
    body += "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n";
    let decoded = Rc::new(std::cell::Cell::new(0));
    let decoder = Counting(OpenAIChatConfig::for_model("m").decoder(), decoded.clone());
    let mut src = SseEventSource::new(Chunks([body.into_bytes()].into()), decoder);
    let at_dispatch = std::cell::Cell::new(None);
    let out = futures::executor::block_on(generate(
        &mut src,
        |_: &StreamedMessagePart| Ok(None),
        |_: &ToolCall| {
            at_dispatch.set(Some(decoded.get()));
            Ok(None)
        },
    ))
    .unwrap();
    assert_eq!(out.message.tool_calls.unwrap().len(), 1);
    let n = at_dispatch.get().expect("the call was handed on");
    assert!(n < 30, "{n} of 303 events were decoded before the call was handed on");
    assert_eq!(decoded.get(), 303);
}

/// A part sink that holds parts until the generation flushes it, as the package's part hook
/// does; `batches` is what each flush handed over.
struct Held {
    held: Vec<StreamedMessagePart>,
    batches: Rc<RefCell<Vec<Vec<StreamedMessagePart>>>>,
}

impl kosong_wasm::engine::generate::PartSink<ChatProviderError> for Held {
    fn part(&mut self, p: &StreamedMessagePart) -> kosong_wasm::engine::generate::CallbackResult<ChatProviderError> {
        self.held.push(p.clone());
        Ok(None)
    }
    fn flush(&mut self) -> kosong_wasm::engine::generate::CallbackResult<ChatProviderError> {
        if !self.held.is_empty() {
            self.batches.borrow_mut().push(std::mem::take(&mut self.held));
        }
        Ok(None)
    }
}

fn chat_text_events(n: usize, from: usize) -> String {
    (from..from + n)
        .map(|i| format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"word {i:05} \"}}}}]}}\n\n"))
        .collect()
}

/// A read is decoded a piece at a time, but its parts reach a sink that holds them in one
/// handing-over when the read is done (before the generation waits for the next one): one
/// crossing to the JS part hook a read, not one a 1 KB piece. A call's parts are still handed
/// over before the call is, wherever in the read it ends.
#[test]
fn a_holding_sink_is_flushed_once_a_read_and_before_each_call() {
    use kosong_wasm::engine::generate::SseEventSource;
    use kosong_wasm::engine::providers::openai_chat::OpenAIChatConfig;
    let first = chat_text_events(300, 0); // about 18 KB: many pieces
    let call = "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_a\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}}]}\n\n";
    let second = format!(
        "{}{call}{}data: {{\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"tool_calls\"}}]}}\n\ndata: [DONE]\n\n",
        chat_text_events(100, 300),
        chat_text_events(100, 400)
    );
    assert!(first.len() > 16 * 1024);
    let batches = Rc::new(RefCell::new(Vec::new()));
    let sink = Held { held: Vec::new(), batches: batches.clone() };
    let decoder = OpenAIChatConfig::for_model("m").decoder();
    let mut src = SseEventSource::new(Chunks([first.into_bytes(), second.into_bytes()].into()), decoder);
    let at_call = Rc::new(std::cell::Cell::new(0));
    let out = futures::executor::block_on(generate(&mut src, sink, |_: &ToolCall| {
        at_call.set(batches.borrow().iter().map(Vec::len).sum());
        Ok(None)
    }))
    .unwrap();
    let sizes: Vec<usize> = batches.borrow().iter().map(Vec::len).collect();
    // The first read whole; the second up to the call (its 100 text parts and the call's own);
    // the rest of the second read.
    assert_eq!(sizes, vec![300, 101, 100], "{sizes:?}");
    assert_eq!(at_call.get(), 401, "the call's parts were all handed over before the call");
    let all: String = batches
        .borrow()
        .iter()
        .flatten()
        .filter_map(|p| match p {
            StreamedMessagePart::Content(ContentPart::Text { text, .. }) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(all, (0..500).map(|i| format!("word {i:05} ")).collect::<String>());
    assert!(out.message.tool_calls.is_some());
}

/// An error met in a later piece of a read (after pieces whose parts the sink still holds) comes
/// after those parts: the sink is flushed before the error is returned.
#[test]
fn a_holding_sink_hears_the_parts_before_an_error_later_in_the_same_read() {
    use kosong_wasm::engine::generate::SseEventSource;
    use kosong_wasm::engine::providers::openai_chat::OpenAIChatConfig;
    // 200 events, then one padded so that the error starts a piece of its own (pieces as the
    // engine's `next_piece` cuts them), after the pieces whose parts the sink holds.
    let err = "data: {\"error\":{\"message\":\"Rate limit\",\"code\":429}}\n\n";
    let starts = |b: &[u8]| {
        let (mut pos, mut out) = (0, Vec::new());
        while pos < b.len() {
            out.push(pos);
            pos += kosong_wasm::engine::generate::next_piece(b, pos).len();
        }
        out
    };
    let body = (0..2048)
        .map(|pad| {
            let last = format!(
                "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{}\"}}}}]}}\n\n",
                "x".repeat(pad)
            );
            chat_text_events(200, 0) + &last
        })
        .find(|b| starts((b.clone() + err).as_bytes()).contains(&b.len()))
        .expect("a padding that ends a piece")
        + err;
    let batches = Rc::new(RefCell::new(Vec::new()));
    let sink = Held { held: Vec::new(), batches: batches.clone() };
    let decoder = OpenAIChatConfig::for_model("m").decoder();
    let mut src = SseEventSource::new(Chunks([body.into_bytes()].into()), decoder);
    let out = futures::executor::block_on(generate(&mut src, sink, |_: &ToolCall| Ok(None)));
    assert!(matches!(out, Err(ChatProviderError::Status { status: 429, .. })), "{out:?}");
    assert_eq!(batches.borrow().iter().map(Vec::len).sum::<usize>(), 201);
}

/// A body that yields one event per read and notes, before each read, whether the source said
/// a tool call was streaming.
struct Hinted(std::collections::VecDeque<Vec<u8>>, Rc<RefCell<Vec<bool>>>, bool);

impl kosong_wasm::engine::generate::ByteSource for Hinted {
    type Error = ChatProviderError;
    async fn read_into(&mut self, buf: &mut Vec<u8>) -> Result<bool, ChatProviderError> {
        self.1.borrow_mut().push(self.2);
        match self.0.pop_front() {
            Some(c) => {
                *buf = c;
                Ok(true)
            }
            None => Ok(false),
        }
    }
    fn calls_streaming(&mut self, open: bool) {
        self.2 = open;
    }
}

#[test]
fn the_body_hears_when_a_tool_call_is_streaming_and_when_none_is() {
    use kosong_wasm::engine::generate::SseEventSource;
    let ev = |t: &str, d: &str| format!("event: {t}\ndata: {d}\n\n").into_bytes();
    let body: std::collections::VecDeque<Vec<u8>> = [
        ev("message_start", r#"{"type":"message_start","message":{"id":"m","usage":{"input_tokens":1,"output_tokens":0}}}"#),
        ev("content_block_start", r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#),
        ev("content_block_delta", r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}"#),
        ev("content_block_stop", r#"{"type":"content_block_stop","index":0}"#),
        ev("content_block_start", r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t1","name":"f","input":{}}}"#),
        ev("content_block_delta", r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{}"}}"#),
        ev("content_block_stop", r#"{"type":"content_block_stop","index":1}"#),
        ev("message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":3}}"#),
        ev("message_stop", r#"{"type":"message_stop"}"#),
    ]
    .into();
    let seen = Rc::new(RefCell::new(Vec::new()));
    let decoder = kosong_wasm::engine::providers::anthropic::AnthropicDecoder::default();
    let mut src = SseEventSource::new(Hinted(body, seen.clone(), false), decoder);
    let out =
        futures::executor::block_on(generate(&mut src, |_: &StreamedMessagePart| Ok(None), |_: &ToolCall| Ok(None)));
    assert!(out.is_ok());
    // Read 1–5: text (the 5th read brings the call's start); 6–7 while the call streams; after
    // its end, none again.
    assert_eq!(*seen.borrow(), vec![false, false, false, false, false, true, true, false, false, false]);
}

/// A surrogate pair split across two deltas (`"\ud83d"` then `"\ude00"`, which `JSON.parse`
/// joins) is one character, for every split of the bytes; a lone half is U+FFFD.
#[test]
fn a_surrogate_pair_split_across_deltas_is_joined() {
    use kosong_wasm::engine::generate::SseEventSource;
    use kosong_wasm::engine::providers::openai_chat::OpenAIChatConfig;
    let body = concat!(
        "data: {\"choices\":[{\"delta\":{\"content\":\"smile \\ud83d\"}}]}\n\n",
        "data: {\"choices\":[{\"delta\":{\"content\":\"\\ude00 and \\udc00 alone\"}}]}\n\n",
        "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"
    );
    for cut in 0..=body.len() {
        let chunks = [body.as_bytes()[..cut].to_vec(), body.as_bytes()[cut..].to_vec()];
        let mut src = SseEventSource::new(Chunks(chunks.into()), OpenAIChatConfig::for_model("m").decoder());
        let out = futures::executor::block_on(generate(
            &mut src,
            |_: &StreamedMessagePart| Ok(None),
            |_: &ToolCall| Ok(None),
        ))
        .unwrap_or_else(|e| panic!("cut {cut}: {e}"));
        assert_eq!(out.message.extract_text(""), "smile \u{1F600} and \u{FFFD} alone", "cut {cut}");
    }
}

#[test]
fn simple_toolset_registry_rules() {
    let mut ts = plus_toolset();
    let e = ts.add("plus", String::new(), None, true, FnTool(Rc::new(|_| Err(ToolFailure::Runtime("x".into()))))).err();
    assert_eq!(
        e.map(|e| e.message().to_owned()).as_deref(),
        Some("SimpleToolset.add: there is already a tool named `plus`")
    );
    for bad in ["", "has space", "dot.name", &"x".repeat(65)] {
        assert!(
            ts.add(bad, String::new(), None, true, FnTool(Rc::new(|_| Err(ToolFailure::Runtime("x".into()))))).is_err(),
            "{bad:?}"
        );
    }
    assert!(ts
        .add("$web_search", String::new(), None, true, FnTool(Rc::new(|_| Err(ToolFailure::Runtime("x".into())))))
        .is_ok());
    let e = ts
        .add(
            "s",
            String::new(),
            Some(serde_json::json!({"type": "string"})),
            true,
            FnTool(Rc::new(|_| Err(ToolFailure::Runtime("x".into())))),
        )
        .err();
    assert!(e.is_some_and(|e| e.message().contains("parameters must be a JSON Schema object")));
    assert!(ts
        .add("lazy", String::new(), None, false, FnTool(Rc::new(|_| Err(ToolFailure::Runtime("x".into())))))
        .is_ok());
    assert!(!ts.is_eager("lazy") && ts.is_eager("plus"));
    let defs: Vec<_> = ts.specs().map(|t| t.definition.clone()).collect();
    assert_eq!(defs[0].parameters, serde_json::json!({"type": "object", "properties": {}}), "the default parameters");
    assert_eq!(
        ts.remove("nope").err().map(|e| e.message().to_owned()).as_deref(),
        Some("Tool `nope` not found in the toolset.")
    );
    assert!(ts.remove("plus").is_ok() && ts.get("plus").is_none());
}

#[test]
fn a_tools_own_time_limit_comes_before_the_default_and_must_be_a_positive_number() {
    use kosong_wasm::engine::toolset::{check_timeout_ms, SimpleToolset, ToolReturnValue, ToolTimeouts};
    let mut ts: SimpleToolset<()> = SimpleToolset::default();
    ts.add("slow", String::new(), None, true, ()).unwrap();
    ts.add("plain", String::new(), None, true, ()).unwrap();
    ts.set_timeout("slow", 5000.0).unwrap();
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert!(ts.set_timeout("plain", bad).is_err(), "{bad}");
        assert!(check_timeout_ms(bad, "x").is_err(), "{bad}");
    }
    let timeouts = ToolTimeouts { default_ms: Some(30.0) };
    assert_eq!(timeouts.for_tool(ts.timeout_ms("slow")), Some(5000.0));
    assert_eq!(timeouts.for_tool(ts.timeout_ms("plain")), Some(30.0));
    assert_eq!(ToolTimeouts::default().for_tool(ts.timeout_ms("plain")), None);
    let r = ToolReturnValue::timed_out("slow", 5000.0);
    assert!(r.is_error);
    assert_eq!(r.message, "Tool `slow` timed out after 5000 ms and was stopped.");
    assert_eq!(r.brief(), "Timed out");
}

/// The events a stream source reads by the decoder's learned shape from their bytes as sent
/// ([`kosong_wasm::engine::providers::StreamDecoder::on_raw_data`]) give the answer the general
/// path gives, for every cut of the body in two: a surrogate pair split across deltas, a half
/// pair before a plain delta, bytes that are not UTF-8 in a delta (U+FFFD, as the general path
/// reads them), CRLF events, `event:`/`id:` lines and comments between, a delta of two `data:`
/// lines, text with escapes, and call fragments.
#[test]
fn events_read_from_their_bytes_give_the_general_paths_answer() {
    use kosong_wasm::engine::generate::SseEventSource;
    use kosong_wasm::engine::providers::anthropic::AnthropicDecoder;
    use kosong_wasm::engine::providers::openai_chat::OpenAIChatConfig;
    use kosong_wasm::engine::providers::openai_responses::ResponsesDecoder;
    use kosong_wasm::engine::providers::StreamDecoder;

    fn answer<D: StreamDecoder>(body: &[u8], cut: usize, decoder: D) -> String {
        let chunks = [body[..cut].to_vec(), body[cut..].to_vec()];
        let mut src = SseEventSource::new(Chunks(chunks.into()), decoder);
        let parts = RefCell::new(Vec::new());
        let out = futures::executor::block_on(generate(
            &mut src,
            |p: &StreamedMessagePart| {
                parts.borrow_mut().push(format!("{p:?}"));
                Ok(None)
            },
            |c: &ToolCall| {
                parts.borrow_mut().push(format!("complete {}", c.id));
                Ok(None)
            },
        ));
        format!("{:?}\n{:?}", parts.into_inner(), out.map(|o| (o.message, o.id, o.usage, o.finish_reason)))
    }
    fn same<D: StreamDecoder>(name: &str, body: &[u8], make: impl Fn(bool) -> D) -> String {
        let general = answer(body, body.len(), make(false));
        for cut in 0..=body.len() {
            assert_eq!(answer(body, cut, make(true)), general, "{name}, cut at {cut}");
        }
        general
    }
    fn check<D: StreamDecoder>(name: &str, body: &[u8], make: impl Fn(bool) -> D) {
        let general = same(name, body, make);
        assert!(!general.contains("Err"), "{name}: {general}");
    }

    let chat = |content: &str| {
        format!("data: {{\"id\":\"c1\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{content}\"}},\"finish_reason\":null}}]}}\n\n")
    };
    let frag = |index: usize, args: &str| {
        format!("data: {{\"id\":\"c1\",\"choices\":[{{\"index\":0,\"delta\":{{\"tool_calls\":[{{\"index\":{index},\"function\":{{\"arguments\":\"{args}\"}}}}]}},\"finish_reason\":null}}]}}\r\n\r\n")
    };
    let mut body = Vec::new();
    for piece in [
        "one ",
        "two ",
        "smile \\ud83d",
        "\\ude00 three",
        "half \\ud83d",
        "plain",
        "\\ude00 late",
        "a \\\"quoted\\\"\\n line",
    ] {
        body.extend_from_slice(chat(piece).as_bytes());
    }
    body.extend_from_slice(b": a comment\nid: 7\nevent: x\n");
    let mut bad = chat("bad ").into_bytes();
    let at = bad.len() - 40;
    bad.splice(at..at, [0xff, 0xfe]);
    body.extend_from_slice(&bad);
    body.extend_from_slice(chat("after").as_bytes());
    body.extend_from_slice(b"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":\ndata: {\"content\":\"two lines\"},\"finish_reason\":null}]}\n\n");
    body.extend_from_slice(b"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"\"}}]},\"finish_reason\":null}]}\n\n");
    body.extend_from_slice(b"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_2\",\"type\":\"function\",\"function\":{\"name\":\"g\",\"arguments\":\"\"}}]},\"finish_reason\":null}]}\n\n");
    // The two calls' fragments alternate (the index is a hole of the shape).
    for (i, a) in [(0, "{\\\"a\\\":"), (1, "{\\\"b\\\":"), (0, " \\\"x\\u00e9"), (1, "2}"), (0, "\\\"}")] {
        body.extend_from_slice(frag(i, a).as_bytes());
    }
    body.extend_from_slice(b"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n");
    let chat_decoder = |fast| {
        let mut d = OpenAIChatConfig::for_model("m").decoder();
        d.fast = fast;
        d
    };
    check("chat", &body, chat_decoder);
    // A line that ends where a hole begins (the next line is not the event's), after a delta that
    // taught the shape; and an event of two `data:` lines, whose shape has a line end in its fixed
    // bytes, then a line and a next line of that shape: the general path reads each first line as
    // the whole event (malformed), and so must the shape.
    for (name, tail) in [
        ("a line ending at a hole", "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\n\"sneaky\"},\"finish_reason\":null}]}\n\n"),
        ("a line ending at a hole, after spaces", "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\": \r\n\"sneaky\"},\"finish_reason\":null}]}\r\n\r\n"),
        ("two data lines, then two lines", "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":\ndata: {\"content\":\"two\"},\"finish_reason\":null}]}\n\ndata: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":\n{\"content\":\"evil\"},\"finish_reason\":null}]}\n\n"),
    ] {
        let body = chat("one ") + tail + &chat("two") + "data: [DONE]\n\n";
        let general = same(name, body.as_bytes(), chat_decoder);
        assert!(!general.contains("sneaky") && !general.contains("evil"), "{name}: {general}");
    }

    let an = |ty: &str, json: &str| format!("event: {ty}\ndata: {json}\n\n");
    let text = |t: &str| {
        an("content_block_delta", &format!("{{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"{t}\"}}}}"))
    };
    let json = |t: &str| {
        an("content_block_delta", &format!("{{\"type\":\"content_block_delta\",\"index\":1,\"delta\":{{\"type\":\"input_json_delta\",\"partial_json\":\"{t}\"}}}}"))
    };
    let mut body = an(
        "message_start",
        "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"content\":[],\"usage\":{\"input_tokens\":3}}}",
    );
    body += &an(
        "content_block_start",
        "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}",
    );
    for t in ["one ", "smile \\ud83d", "\\ude00 two", "half \\uD83D", "plain", "tab\\t"] {
        body += &text(t);
    }
    body += &an("content_block_stop", "{\"type\":\"content_block_stop\",\"index\":0}");
    body += &an("content_block_start", "{\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"f\",\"input\":{}}}");
    for t in ["{\\\"a\\\"", ":\\\"b\\\"}"] {
        body += &json(t);
    }
    body += &an("content_block_stop", "{\"type\":\"content_block_stop\",\"index\":1}");
    body += &an(
        "message_delta",
        "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":9}}",
    );
    body += &an("message_stop", "{\"type\":\"message_stop\"}");
    check("anthropic", body.as_bytes(), |fast| {
        let mut d = AnthropicDecoder::default();
        d.fast = fast;
        d
    });

    let rs = |seq: u32, t: &str| {
        format!("event: response.output_text.delta\ndata: {{\"type\":\"response.output_text.delta\",\"sequence_number\":{seq},\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"{t}\"}}\r\n\r\n")
    };
    let mut body = String::from("event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\",\"output\":[]}}\n\n");
    body += "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":1,\"output_index\":0,\"item\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[]}}\n\n";
    for (i, t) in ["one ", "smile \\ud83d", "\\ude00 two", "plain \\u00e9"].iter().enumerate() {
        body += &rs(2 + i as u32, t);
    }
    body += "event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":9,\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"usage\":{\"input_tokens\":1,\"output_tokens\":2,\"total_tokens\":3}}}\n\n";
    check("responses", body.as_bytes(), |fast| {
        let mut d = ResponsesDecoder::default();
        d.fast = fast;
        d
    });
}
