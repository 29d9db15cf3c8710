//! A round that breaks keeps what already happened: every rule driven from SSE bytes through the
//! agent turn, for every wire format. A model here is a real provider's request builder and
//! decoder over a byte body that this test scripts: chunks, then the end, a dropped connection,
//! or a stall (for an abort).

mod support;

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::rc::Rc;

use futures::executor::{LocalPool, LocalSpawner};
use futures::future::LocalBoxFuture;
use futures::task::LocalSpawnExt;
use futures::FutureExt;
use serde_json::{json, Value};

use kosong_wasm::engine::error::ChatProviderError;
use kosong_wasm::engine::json::Arguments;
use kosong_wasm::engine::message::{Message, Role, ToolCall};
use kosong_wasm::engine::model::{Fallback, Model, Provider, ProviderModel, Trigger};
use kosong_wasm::engine::providers::{Prompt, ToolDefinition};
use kosong_wasm::engine::soul::agent::{AgentConfig, Env, Turn, TurnError, TurnTools, UserInput};
use kosong_wasm::engine::soul::approval::{ApprovalState, Approvals};
use kosong_wasm::engine::soul::context::SharedContext;
use kosong_wasm::engine::soul::wire::{Wire, WireMessage};
use kosong_wasm::engine::step::{step, ToolDispatch};
use kosong_wasm::engine::toolset::{ToolOutput, ToolResult, ToolReturnValue};

use support::http::{ok, End, FakeHttp, Reply};
use support::streams::{answer, broken_after_a_call, data, one_call, shows_open_calls, text_only, KINDS};
use support::yield_now;

fn resp(chunks: Vec<String>, end: End) -> Reply {
    ok(chunks, end)
}

/// A real provider of `kind` (its request builder and decoder, in the core's model) over a fake
/// transport that answers with `replies`.
struct SseModel {
    provider: Provider,
    http: FakeHttp,
}

impl SseModel {
    fn new(kind: &str, replies: Vec<Reply>) -> SseModel {
        SseModel { provider: support::http::provider(kind, json!({})), http: FakeHttp::new(replies) }
    }
    fn model(&self) -> ProviderModel<'_, FakeHttp> {
        support::http::model(&self.provider, &self.http)
    }
    fn bodies(&self) -> Vec<Value> {
        self.http.bodies()
    }
}

// ---- tools, timers, the turn -----------------------------------------------------------------------

/// `send_email`: records each run (with its arguments) when it *finishes*; `hold` makes it wait
/// until the turn is cancelled; each run first yields `delay` times (it is still running when a
/// stream that follows its start breaks).
#[derive(Clone, Default)]
struct Mail {
    started: Rc<RefCell<Vec<String>>>,
    sent: Rc<RefCell<Vec<String>>>,
    hold: Rc<Cell<bool>>,
    delay: Rc<Cell<u32>>,
}

impl ToolDispatch for Mail {
    fn is_eager(&self, _name: &str) -> bool {
        true
    }
    fn dispatch(&self, call: &ToolCall, _args: &Arguments<'_>) -> LocalBoxFuture<'static, ToolResult> {
        let args = call.function.arguments.clone().unwrap_or_default();
        self.started.borrow_mut().push(args.clone());
        let (sent, hold, delay, id) = (self.sent.clone(), self.hold.get(), self.delay.get(), call.id.clone());
        async move {
            for _ in 0..delay {
                yield_now().await;
            }
            if hold {
                futures::future::pending::<()>().await;
            }
            sent.borrow_mut().push(args.clone());
            ToolResult {
                tool_call_id: id,
                return_value: ToolReturnValue::ok(ToolOutput::Text(format!("sent {args}")), "", ""),
            }
        }
        .boxed_local()
    }
}

impl TurnTools for Mail {
    fn definitions(&self) -> Vec<ToolDefinition> {
        vec![ToolDefinition {
            name: "send_email".into(),
            description: "Sends an email".into(),
            parameters: json!({"type": "object", "properties": {"to": {"type": "string"}}}),
        }]
    }
}

struct FakeEnv {
    spawner: LocalSpawner,
    sleeps: RefCell<Vec<f64>>,
}

impl Env for FakeEnv {
    fn sleep(&self, ms: f64) -> LocalBoxFuture<'static, ()> {
        self.sleeps.borrow_mut().push(ms);
        futures::future::ready(()).boxed_local()
    }
    fn random(&self) -> f64 {
        0.0
    }
    fn spawn(&self, task: LocalBoxFuture<'static, ()>) {
        self.spawner.spawn_local(task).unwrap();
    }
}

struct Ran {
    wire: Vec<WireMessage>,
    result: Result<(), TurnError<ChatProviderError>>,
    history: Vec<Message>,
}

impl Ran {
    fn kinds(&self) -> Vec<String> {
        self.wire.iter().map(|m| m.kind().to_owned()).collect()
    }
    fn payloads(&self, kind: &str) -> Vec<Value> {
        self.wire
            .iter()
            .filter(|m| m.kind() == kind)
            .map(|m| serde_json::to_value(m).unwrap()["payload"].clone())
            .collect()
    }
    /// Every call the wire showed has exactly one result on the wire.
    fn assert_every_call_closed(&self) {
        let calls: Vec<String> =
            self.payloads("ToolCall").iter().map(|p| p["id"].as_str().unwrap().to_owned()).collect();
        let results: Vec<String> =
            self.payloads("ToolResult").iter().map(|p| p["tool_call_id"].as_str().unwrap().to_owned()).collect();
        let mut a = calls.clone();
        let mut b = results.clone();
        a.sort();
        b.sort();
        assert_eq!(a, b, "each ToolCall on the wire has one ToolResult: calls {calls:?}, results {results:?}");
    }
    /// The history's tool messages answer exactly the calls its assistant messages made, in order.
    fn assert_history_consistent(&self) {
        let mut open: Vec<String> = Vec::new();
        for m in &self.history {
            match m.role {
                Role::Assistant => {
                    assert!(open.is_empty(), "calls without results before an assistant message: {open:?}");
                    open = m.tool_calls.iter().flatten().map(|c| c.id.clone()).collect();
                }
                Role::Tool => {
                    assert_eq!(m.tool_call_id.as_deref(), open.first().map(String::as_str), "results in call order");
                    open.remove(0);
                }
                _ => assert!(open.is_empty(), "calls without results: {open:?}"),
            }
        }
        assert!(open.is_empty(), "calls without results at the end: {open:?}");
    }
    fn roles(&self) -> Vec<&'static str> {
        self.history
            .iter()
            .map(|m| match m.role {
                Role::System => "system",
                Role::User => "user",
                Role::Assistant => "assistant",
                Role::Tool => "tool",
            })
            .collect()
    }
}

fn run_turn(model: &SseModel, tools: &Mail, config: AgentConfig, cancel: impl Future<Output = ()> + 'static) -> Ran {
    run_turn_on(&model.model(), tools, config, cancel)
}

fn run_turn_on<M>(model: &M, tools: &Mail, config: AgentConfig, cancel: impl Future<Output = ()> + 'static) -> Ran
where
    M: Model,
    M::Source: kosong_wasm::engine::generate::EventSource<Error = ChatProviderError>,
{
    let mut pool = LocalPool::new();
    let env = FakeEnv { spawner: pool.spawner(), sleeps: RefCell::default() };
    let context = SharedContext::default();
    let wire = Wire::new();
    let side = wire.ui_side(false);
    let approvals = Rc::new(Approvals::new(
        wire.clone(),
        Rc::new(RefCell::new(ApprovalState::new(false))),
        "agent".into(),
        Rc::new(|| "req".into()),
    ));
    let turn = Turn {
        config: &config,
        context: &context,
        model: Some(model),
        tools,
        wire: &wire,
        approvals: &approvals,
        env: &env,
    };
    let result = pool.run_until(turn.run(UserInput::Text("mail them".into()), cancel));
    wire.shutdown();
    pool.run_until_stalled();
    Ran { wire: side.take_ready(), result, history: context.read(|c| c.history().to_vec()) }
}

/// A cancel that fires a few polls after the first tool started.
fn after_first_start(tools: &Mail) -> impl Future<Output = ()> + 'static {
    let started = tools.started.clone();
    async move {
        while started.borrow().is_empty() {
            yield_now().await;
        }
        for _ in 0..20 {
            yield_now().await;
        }
    }
}

fn text_of(m: &Message) -> String {
    m.extract_text("")
}

// ---- the rules ---------------------------------------------------------------------------------------

#[test]
fn a_break_after_a_complete_call_keeps_its_result_and_the_turn_goes_on() {
    for kind in KINDS {
        for delay in [0, 3] {
            let model = SseModel::new(
                kind,
                vec![resp(broken_after_a_call(kind, "call"), End::Drop), resp(answer(kind, "done"), End::Done)],
            );
            let tools = Mail::default();
            tools.delay.set(delay); // 3: the tool is still running when the stream breaks
            let ran = run_turn(&model, &tools, AgentConfig::default(), futures::future::pending());
            assert!(ran.result.is_ok(), "{kind}: {:?}", ran.result);
            assert_eq!(
                *tools.sent.borrow(),
                vec![r#"{"to":"a@b.c"}"#],
                "{kind}: the email went once, the cut-off call never"
            );
            assert_eq!(*tools.started.borrow(), vec![r#"{"to":"a@b.c"}"#], "{kind}");
            let open = shows_open_calls(kind);
            let expected: &[&str] = if open {
                &["user", "assistant", "tool", "tool", "assistant"]
            } else {
                &["user", "assistant", "tool", "assistant"]
            };
            assert_eq!(ran.roles(), expected, "{kind}");
            let round = &ran.history[1];
            assert_eq!(text_of(round), "Sending.", "{kind}");
            let calls = round.tool_calls.as_deref().unwrap();
            let ids: &[&str] = if open { &["call_1", "call_2"] } else { &["call_1"] };
            assert_eq!(calls.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), ids, "{kind}");
            assert!(text_of(&ran.history[2]).contains(r#"sent {"to":"a@b.c"}"#), "{kind}");
            if open {
                let cut = text_of(&ran.history[3]);
                assert!(cut.contains("broke off") && cut.contains("(9 characters of it arrived)"), "{kind}: {cut}");
            }
            assert_eq!(text_of(ran.history.last().unwrap()), "done", "{kind}");
            ran.assert_every_call_closed();
            ran.assert_history_consistent();
            // No StepRetry: the round was kept, the next step is a step of its own.
            assert_eq!(ran.payloads("StepBegin").len(), 2, "{kind}");
            assert!(!ran.kinds().contains(&"StepRetry".to_owned()), "{kind}");
            // The next request tells the model what happened.
            let bodies = model.bodies();
            assert_eq!(bodies.len(), 2, "{kind}");
            let second = bodies[1].to_string();
            assert!(second.contains(r#"sent {\"to\":\"a@b.c\"}"#), "{kind}: {second}");
            assert_eq!(second.contains("characters of it arrived"), open, "{kind}");
            assert_ne!(bodies[0], bodies[1], "{kind}");
        }
    }
}

#[test]
fn a_break_after_text_only_is_retried_and_the_text_is_not_kept_twice() {
    for kind in KINDS {
        let model =
            SseModel::new(kind, vec![resp(text_only(kind), End::Drop), resp(answer(kind, "Sending. done"), End::Done)]);
        let tools = Mail::default();
        let ran = run_turn(&model, &tools, AgentConfig::default(), futures::future::pending());
        assert!(ran.result.is_ok(), "{kind}: {:?}", ran.result);
        assert_eq!(ran.roles(), ["user", "assistant"], "{kind}");
        assert_eq!(text_of(&ran.history[1]), "Sending. done", "{kind}");
        // On the wire: the failed attempt's parts, then StepRetry (which voids them), then the answer.
        let kinds = ran.kinds();
        let retry = kinds.iter().position(|k| k == "StepRetry").unwrap_or_else(|| panic!("{kind}: {kinds:?}"));
        assert_eq!(kinds.iter().filter(|k| *k == "StepBegin").count(), 1, "{kind}");
        assert!(kinds[..retry].contains(&"ContentPart".to_owned()), "{kind}");
        assert!(tools.started.borrow().is_empty(), "{kind}");
        assert_eq!(model.bodies()[0], model.bodies()[1], "{kind}: the retry sends the same request");
    }
}

#[test]
fn truncated_streams_are_retried_when_nothing_ran() {
    for kind in KINDS {
        // The body ends well, but the answer never said it was done: `truncated`.
        let model = SseModel::new(kind, vec![resp(text_only(kind), End::Done), resp(answer(kind, "whole"), End::Done)]);
        let ran = run_turn(&model, &Mail::default(), AgentConfig::default(), futures::future::pending());
        assert!(ran.result.is_ok(), "{kind}: {:?}", ran.result);
        assert_eq!(text_of(&ran.history[1]), "whole", "{kind}");
        assert_eq!(ran.payloads("StepRetry").len(), 1, "{kind}");
    }
}

#[test]
fn an_abort_during_salvage_closes_every_call() {
    for kind in KINDS {
        let model = SseModel::new(kind, vec![resp(broken_after_a_call(kind, "call"), End::Drop)]);
        let tools = Mail::default();
        tools.hold.set(true);
        // Cancel once the first tool has started and the stream has broken (a few polls later).
        let ran = run_turn(&model, &tools, AgentConfig::default(), after_first_start(&tools));
        assert!(matches!(ran.result, Err(TurnError::Cancelled)), "{kind}");
        assert!(tools.sent.borrow().is_empty(), "{kind}");
        assert_eq!(tools.started.borrow().len(), 1, "{kind}");
        let expected: &[&str] = if shows_open_calls(kind) {
            &["user", "assistant", "tool", "tool"]
        } else {
            &["user", "assistant", "tool"]
        };
        assert_eq!(ran.roles(), expected, "{kind}");
        assert!(text_of(&ran.history[2]).contains("aborted"), "{kind}: {}", text_of(&ran.history[2]));
        if shows_open_calls(kind) {
            assert!(text_of(&ran.history[3]).contains("broke off"), "{kind}");
        }
        ran.assert_every_call_closed();
        ran.assert_history_consistent();
        assert_eq!(ran.kinds().last().map(String::as_str), Some("TurnEnd"));
    }
}

#[test]
fn an_abort_mid_stream_closes_every_call_the_wire_showed() {
    for kind in KINDS {
        for hold in [false, true] {
            // The stream stalls after the second call began; the first tool finished (or not).
            let model = SseModel::new(kind, vec![resp(broken_after_a_call(kind, "call"), End::Stall)]);
            let tools = Mail::default();
            tools.hold.set(hold);
            let ran = run_turn(&model, &tools, AgentConfig::default(), after_first_start(&tools));
            assert!(matches!(ran.result, Err(TurnError::Cancelled)), "{kind}");
            let expected: &[&str] = if shows_open_calls(kind) {
                &["user", "assistant", "tool", "tool"]
            } else {
                &["user", "assistant", "tool"]
            };
            assert_eq!(ran.roles(), expected, "{kind} hold={hold}");
            assert_eq!(text_of(&ran.history[1]), "Sending.", "{kind}");
            let first = text_of(&ran.history[2]);
            if hold {
                assert!(first.contains("aborted"), "{kind}: {first}");
            } else {
                assert!(first.contains("sent"), "{kind}: its real result: {first}");
            }
            if shows_open_calls(kind) {
                assert!(text_of(&ran.history[3]).contains("aborted"), "{kind}");
            }
            ran.assert_every_call_closed();
            ran.assert_history_consistent();
        }
    }
}

#[test]
fn a_provider_that_breaks_every_time_still_ends_the_turn() {
    for kind in KINDS {
        let responses = (0..10).map(|i| resp(broken_after_a_call(kind, &format!("c{i}")), End::Drop)).collect();
        let model = SseModel::new(kind, responses);
        let tools = Mail::default();
        let config = AgentConfig { max_retries_per_step: 3, ..AgentConfig::default() };
        let ran = run_turn(&model, &tools, config, futures::future::pending());
        assert!(
            matches!(&ran.result, Err(TurnError::Seam(ChatProviderError::Connection(_)))),
            "{kind}: {:?}",
            ran.result
        );
        // Three broken steps in a row use up the three attempts; each ran its complete call once.
        assert_eq!(tools.sent.borrow().len(), 3, "{kind}");
        assert_eq!(ran.payloads("StepBegin").len(), 3, "{kind}");
        let per_step = if shows_open_calls(kind) { 3 } else { 2 };
        assert_eq!(ran.history.len(), 1 + 3 * per_step, "{kind}: {:?}", ran.roles());
        assert_eq!(ran.kinds().iter().filter(|k| *k == "StepInterrupted").count(), 1, "{kind}");
        ran.assert_every_call_closed();
        ran.assert_history_consistent();
    }
}

#[test]
fn step_rejects_with_the_salvaged_round_after_the_started_tools_settled() {
    for kind in KINDS {
        let model = SseModel::new(kind, vec![resp(broken_after_a_call(kind, "call"), End::Drop)]);
        let tools = Mail::default();
        tools.delay.set(3);
        let mut pool = LocalPool::new();
        let spawner = pool.spawner();
        let seen: Rc<RefCell<Vec<String>>> = Rc::default();
        let seen2 = seen.clone();
        let outcome = pool.run_until(async {
            let m = model.model();
            let req = m.prepare(&Prompt::new("", &tools.definitions(), &[Message::new(Role::User, vec![])])).unwrap();
            let mut source = m.open(req).await.unwrap();
            let spawn = |f: LocalBoxFuture<'static, ()>| spawner.spawn_local(f).unwrap();
            let cb: kosong_wasm::engine::step::ToolResultCallback =
                Rc::new(move |r: &ToolResult| seen2.borrow_mut().push(r.tool_call_id.clone()));
            step(&mut source, &tools, &spawn, |_: &_| Ok(None), Some(cb)).await
        });
        let failure = outcome.err().unwrap_or_else(|| panic!("{kind}: the step fails"));
        assert!(matches!(failure.error, ChatProviderError::Connection(_)), "{kind}");
        let s = failure.salvaged.unwrap_or_else(|| panic!("{kind}: salvaged"));
        assert_eq!(*tools.sent.borrow(), vec![r#"{"to":"a@b.c"}"#], "{kind}: settled before the step returned");
        let ids: &[&str] = if shows_open_calls(kind) { &["call_1", "call_2"] } else { &["call_1"] };
        assert_eq!(s.results.iter().map(|r| r.tool_call_id.as_str()).collect::<Vec<_>>(), ids, "{kind}");
        assert!(!s.results[0].return_value.is_error, "{kind}");
        assert!(s.results.iter().skip(1).all(|r| r.return_value.is_error), "{kind}");
        assert_eq!(s.generated.message.tool_calls.as_ref().map(Vec::len), Some(ids.len()), "{kind}");
        let mut seen = seen.borrow().clone();
        seen.sort();
        assert_eq!(seen, ids, "{kind}: on_tool_result heard each");
    }
}

/// Anthropic `pause_turn`: the paused server-tool content goes back as it is and the turn goes
/// on with the next step (bounded by max steps).
#[test]
fn anthropic_pause_turn_is_continued() {
    let paused = vec![
        data(
            json!({"type": "message_start", "message": {"id": "msg_p", "type": "message", "role": "assistant", "content": [],
            "model": "m", "usage": {"input_tokens": 10, "output_tokens": 1}}}),
        ),
        data(
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}}),
        ),
        data(
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"query\":\"kosong\"}"}}),
        ),
        data(json!({"type": "content_block_stop", "index": 0})),
        data(json!({"type": "message_delta", "delta": {"stop_reason": "pause_turn"}, "usage": {"output_tokens": 3}})),
        data(json!({"type": "message_stop"})),
    ];
    let model = SseModel::new(
        "anthropic",
        vec![resp(paused.clone(), End::Done), resp(answer("anthropic", "found"), End::Done)],
    );
    let ran = run_turn(&model, &Mail::default(), AgentConfig::default(), futures::future::pending());
    assert!(ran.result.is_ok(), "{:?}", ran.result);
    assert_eq!(ran.roles(), ["user", "assistant", "assistant"]);
    assert_eq!(text_of(&ran.history[2]), "found");
    let second = model.bodies()[1].to_string();
    assert!(
        second.contains("srvtoolu_1") && second.contains("server_tool_use"),
        "the paused content went back: {second}"
    );
    // A model that pauses forever still ends the turn at max steps.
    let model = SseModel::new("anthropic", vec![resp(paused, End::Done); 5]);
    let config = AgentConfig { max_steps_per_turn: 3, ..AgentConfig::default() };
    let ran = run_turn(&model, &Mail::default(), config, futures::future::pending());
    assert!(matches!(ran.result, Err(TurnError::MaxStepsReached(3))), "{:?}", ran.result);
}

/// An answer with more calls than a step starts (256 by default): the rest are answered with an
/// error result and never run.
#[test]
fn calls_past_the_per_step_cap_are_answered_not_run() {
    let n = 300;
    let mut chunks: Vec<String> = (0..n)
        .map(|i| {
            data(json!({"id": "r", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": i, "id": format!("c{i}"), "type": "function",
                "function": {"name": "send_email", "arguments": format!("{{\"to\":\"{i}@b.c\"}}")}}]}}]}))
        })
        .collect();
    chunks.push(data(json!({"id": "r", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})));
    chunks.push("data: [DONE]\n\n".into());
    let model = SseModel::new("openai", vec![resp(chunks, End::Done), resp(answer("openai", "done"), End::Done)]);
    let tools = Mail::default();
    let ran = run_turn(&model, &tools, AgentConfig::default(), futures::future::pending());
    assert!(ran.result.is_ok(), "{:?}", ran.result);
    assert_eq!(tools.started.borrow().len(), 256, "the cap");
    let results = ran.payloads("ToolResult");
    assert_eq!(results.len(), n);
    let over = results
        .iter()
        .filter(|r| r["return_value"]["message"].as_str().unwrap_or("").contains("maxToolCallsPerStep"))
        .count();
    assert_eq!(over, n - 256);
    ran.assert_every_call_closed();
    ran.assert_history_consistent();
}

// ---- structured output under faults --------------------------------------------------------------------

fn structured() -> AgentConfig {
    let output = kosong_wasm::engine::output::OutputFormat::from_json(
        r#"{"schema":{"type":"object"},"name":"receipt"}"#,
        "Agent",
    );
    AgentConfig { output: Some(output.unwrap()), ..AgentConfig::default() }
}

/// The preview a UI keeps from the wire: edits applied from each `StepBegin`, dropped at a `StepRetry`.
fn preview_of(wire: &[WireMessage]) -> Value {
    let mut v = Value::Null;
    for m in wire {
        match m {
            WireMessage::StepBegin { .. } | WireMessage::StepRetry(_) => v = Value::Null,
            WireMessage::PartialOutput(edits) => {
                for e in edits.clone() {
                    kosong_wasm::engine::partial_json::apply_edit(&mut v, e);
                }
            }
            _ => {}
        }
    }
    v
}

/// `answer(kind, text)` cut off after its text: no end marker.
fn cut_answer(kind: &str, text: &str) -> Vec<String> {
    if kind == "gemini" {
        return vec![data(
            json!({"responseId": "g2", "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}}]}),
        )];
    }
    answer(kind, text).into_iter().take(if kind == "openai" { 1 } else { 3 }).collect()
}

#[test]
fn a_structured_turn_through_a_broken_stream_a_cut_answer_and_a_retry_keeps_wire_history_and_tools_in_agreement() {
    for kind in KINDS {
        let model = SseModel::new(
            kind,
            vec![
                resp(broken_after_a_call(kind, "call"), End::Drop),
                resp(cut_answer(kind, r#"{"sent": true, "to": "a@"#), End::Drop),
                resp(answer(kind, r#"{"sent": true, "to": "a@b.c"}"#), End::Done),
            ],
        );
        let tools = Mail::default();
        let ran = run_turn(&model, &tools, structured(), futures::future::pending());
        assert!(ran.result.is_ok(), "{kind}: {:?}", ran.result);
        // The tool ran once; every call the wire showed has its result; the history agrees.
        assert_eq!(*tools.sent.borrow(), vec![r#"{"to":"a@b.c"}"#], "{kind}");
        ran.assert_every_call_closed();
        ran.assert_history_consistent();
        // The void attempt's preview went out, then the StepRetry; what a UI keeps is the answer.
        let kinds = ran.kinds();
        let retry = kinds.iter().position(|k| k == "StepRetry").unwrap_or_else(|| panic!("{kind}: {kinds:?}"));
        let last_begin = kinds.iter().rposition(|k| k == "StepBegin").unwrap();
        assert!(kinds[last_begin..retry].contains(&"PartialOutput".to_owned()), "{kind}: {kinds:?}");
        assert_eq!(preview_of(&ran.wire), json!({"sent": true, "to": "a@b.c"}), "{kind}");
        // The context keeps the final answer as text, once.
        assert_eq!(text_of(ran.history.last().unwrap()), r#"{"sent": true, "to": "a@b.c"}"#, "{kind}");
        assert!(
            ran.history.iter().all(|m| !text_of(m).ends_with(r#""to": "a@"#)),
            "{kind}: the cut attempt is not kept"
        );
        assert_eq!(model.bodies().len(), 3, "{kind}: the cut answer was retried");
        // Every request asked for the output in the provider's form.
        for body in model.bodies() {
            let b = body.to_string();
            assert!(
                b.contains("receipt") || b.contains("responseJsonSchema") || b.contains("output_config"),
                "{kind}: {b}"
            );
        }
    }
}

#[test]
fn a_structured_turn_whose_final_answer_is_not_json_fails_after_the_salvaged_round_and_keeps_it() {
    for kind in KINDS {
        let model = SseModel::new(
            kind,
            vec![resp(broken_after_a_call(kind, "call"), End::Drop), resp(answer(kind, "All sent!"), End::Done)],
        );
        let tools = Mail::default();
        let ran = run_turn(&model, &tools, structured(), futures::future::pending());
        let Err(TurnError::Seam(e)) = &ran.result else { panic!("{kind}: {:?}", ran.result.is_ok()) };
        assert_eq!(e.kind(), "malformed_output", "{kind}");
        assert_eq!(*tools.sent.borrow(), vec![r#"{"to":"a@b.c"}"#], "{kind}: the tool's work is kept, not redone");
        ran.assert_every_call_closed();
        ran.assert_history_consistent();
        assert_eq!(text_of(ran.history.last().unwrap()), "All sent!", "{kind}");
        assert_eq!(model.bodies().len(), 2, "{kind}: not retried");
    }
}

// ---- fallback: a provider made of providers ------------------------------------------------------------

/// A primary of one wire format and a backup of another, each with its own scripted server.
struct Pair {
    primary: SseModel,
    backup: SseModel,
}

impl Pair {
    fn new(a: &str, b: &str, first: Vec<Reply>, second: Vec<Reply>) -> Pair {
        let member = |kind: &str, model: &str, replies| SseModel {
            provider: support::http::provider(kind, json!({"model": model})),
            http: FakeHttp::new(replies),
        };
        Pair { primary: member(a, "primary-model", first), backup: member(b, "backup-model", second) }
    }
    fn model(&self, at_once: Vec<Trigger>) -> Fallback<ProviderModel<'_, FakeHttp>> {
        Fallback::new(self.primary.model(), [self.backup.model()], at_once)
    }
}

fn unavailable() -> Reply {
    support::http::status(503, r#"{"error":{"message":"overloaded"}}"#, &[])
}

/// Every pair of wire formats: the primary answers the first step with a call (the tool runs), then
/// fails the second step with a 503 until its retries are spent; the backup answers it. One
/// consistent turn: the backup's request carries the primary's call and the tool's result in its
/// own format, the tool ran once, the wire says where the step went and who answered each step.
#[test]
fn a_step_whose_error_outlasts_its_retries_goes_to_the_next_provider_for_every_pair_of_formats() {
    for a in KINDS {
        for b in KINDS {
            let first = vec![
                resp(one_call(a, "call_1", "send_email", r#"{"to":"a@b.c"}"#), End::Done),
                unavailable(),
                unavailable(),
                unavailable(),
            ];
            let pair = Pair::new(a, b, first, vec![resp(answer(b, "done"), End::Done)]);
            let tools = Mail::default();
            let ran = run_turn_on(&pair.model(vec![]), &tools, AgentConfig::default(), futures::future::pending());
            let at = format!("{a} then {b}");
            assert!(ran.result.is_ok(), "{at}: {:?}", ran.result);
            assert_eq!(*tools.sent.borrow(), vec![r#"{"to":"a@b.c"}"#], "{at}: the tool ran once");
            assert_eq!(ran.roles(), ["user", "assistant", "tool", "assistant"], "{at}");
            assert_eq!(text_of(&ran.history[3]), "done", "{at}");
            ran.assert_every_call_closed();
            ran.assert_history_consistent();
            assert_eq!(pair.primary.bodies().len(), 4, "{at}: one step, then three attempts of the next");
            let backup = pair.backup.bodies();
            assert_eq!(backup.len(), 1, "{at}");
            let sent = backup[0].to_string();
            // (Gemini pairs calls and results by name and place: no ids.)
            assert!(sent.contains("send_email") && (b == "gemini" || sent.contains("call_1")), "{at}: {sent}");
            assert!(sent.contains(r#"sent {\"to\":\"a@b.c\"}"#), "{at}: {sent}");
            let url = &pair.backup.http.sent()[0].url;
            assert!(sent.contains("backup-model") || url.contains("backup-model"), "{at}: the backup's own model");
            // Two retries on the primary, then the move: attempts count from 1 again, no wait.
            let retries = ran.payloads("StepRetry");
            assert_eq!(retries.len(), 3, "{at}: {retries:?}");
            assert!(retries[..2].iter().all(|r| r.get("fallback").is_none()), "{at}");
            assert_eq!(retries[2]["fallback"], json!({"index": 1, "model": "backup-model"}), "{at}");
            assert_eq!((retries[2]["next_attempt"].as_u64(), retries[2]["wait_s"].as_f64()), (Some(1), Some(0.0)));
            let by: Vec<Value> = ran.payloads("StatusUpdate").iter().map(|u| u["provider"].clone()).collect();
            assert_eq!(
                by,
                [json!({"index": 0, "model": "primary-model"}), json!({"index": 1, "model": "backup-model"})],
                "{at}"
            );
        }
    }
}

/// A round that broke after its tool ran is kept, and the turn goes on with the next provider when
/// the error is one the caller named (or the retries are spent): for every pair of formats.
#[test]
fn a_salvaged_round_goes_on_with_the_next_provider() {
    for a in KINDS {
        for b in KINDS {
            for (at_once, max) in [(vec![Trigger::Kind("connection".into())], 3), (vec![], 1)] {
                let pair = Pair::new(
                    a,
                    b,
                    vec![resp(broken_after_a_call(a, "call"), End::Drop)],
                    vec![resp(answer(b, "done"), End::Done)],
                );
                let tools = Mail::default();
                let config = AgentConfig { max_retries_per_step: max, ..AgentConfig::default() };
                let ran = run_turn_on(&pair.model(at_once), &tools, config, futures::future::pending());
                let at = format!("{a} then {b} (max {max})");
                assert!(ran.result.is_ok(), "{at}: {:?}", ran.result);
                assert_eq!(*tools.sent.borrow(), vec![r#"{"to":"a@b.c"}"#], "{at}: the email went once");
                assert_eq!(*tools.started.borrow(), vec![r#"{"to":"a@b.c"}"#], "{at}: the cut-off call never ran");
                assert_eq!(text_of(ran.history.last().unwrap()), "done", "{at}");
                ran.assert_every_call_closed();
                ran.assert_history_consistent();
                assert!(!ran.kinds().contains(&"StepRetry".to_owned()), "{at}: the kept round is not void");
                assert_eq!(pair.primary.bodies().len(), 1, "{at}");
                let sent = pair.backup.bodies()[0].to_string();
                assert!(sent.contains(r#"sent {\"to\":\"a@b.c\"}"#), "{at}: {sent}");
                let by: Vec<Value> =
                    ran.payloads("StatusUpdate").iter().map(|u| u["provider"]["index"].clone()).collect();
                assert_eq!(by, [json!(0), json!(1)], "{at}");
            }
        }
    }
}

/// Only what the rule names moves on: a 400 (not retried, not named) ends the turn on the
/// primary; a named status moves on at once, without the primary's retries.
#[test]
fn fallback_moves_on_only_for_what_its_rule_names() {
    let bad = || support::http::status(400, r#"{"error":{"message":"bad request"}}"#, &[]);
    let pair = Pair::new("openai", "anthropic", vec![bad()], vec![resp(answer("anthropic", "done"), End::Done)]);
    let ran = run_turn_on(&pair.model(vec![]), &Mail::default(), AgentConfig::default(), futures::future::pending());
    assert!(
        matches!(&ran.result, Err(TurnError::Seam(ChatProviderError::Status { status: 400, .. }))),
        "{:?}",
        ran.result
    );
    assert_eq!(pair.backup.bodies().len(), 0);

    let pair = Pair::new("openai", "anthropic", vec![bad()], vec![resp(answer("anthropic", "done"), End::Done)]);
    let ran = run_turn_on(
        &pair.model(vec![Trigger::Status(400)]),
        &Mail::default(),
        AgentConfig::default(),
        futures::future::pending(),
    );
    assert!(ran.result.is_ok(), "{:?}", ran.result);
    assert_eq!((pair.primary.bodies().len(), pair.backup.bodies().len()), (1, 1));
    let retries = ran.payloads("StepRetry");
    assert_eq!(retries.len(), 1);
    assert_eq!(retries[0]["fallback"]["index"], 1);

    // The last member has nowhere to go: its error ends the turn after its own retries.
    let pair = Pair::new(
        "gemini",
        "openai_responses",
        vec![unavailable(), unavailable(), unavailable()],
        vec![unavailable(), unavailable(), unavailable()],
    );
    let ran = run_turn_on(&pair.model(vec![]), &Mail::default(), AgentConfig::default(), futures::future::pending());
    assert!(
        matches!(&ran.result, Err(TurnError::Seam(ChatProviderError::Status { status: 503, .. }))),
        "{:?}",
        ran.result
    );
    assert_eq!((pair.primary.bodies().len(), pair.backup.bodies().len()), (3, 3));
    assert_eq!(ran.payloads("StepRetry").len(), 5, "two retries, the move, two retries");
}
