//! Durable turns: a turn whose runtime died goes on from its recording and its context.
//!
//! Each "life" of a runtime here is what an isolate or a process is: a fresh executor, wire,
//! context and approvals, built from what the previous life left in its stores (the recording's
//! `wire.jsonl` lines and the context's `context.jsonl` lines). A life is killed by dropping its
//! turn mid-way: no cleanup runs, nothing more is written — what a deploy, an eviction or a
//! SIGKILL does. The next life resumes the turn. Afterwards the recording, the history and what
//! the tools did must agree: one result per call, no tool run twice unless it is idempotent, the
//! model asked again with the round so far.

mod support;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use futures::executor::{LocalPool, LocalSpawner};
use futures::future::{select, Either, LocalBoxFuture};
use futures::task::LocalSpawnExt;
use futures::FutureExt;
use serde_json::{json, Value};

use kosong_wasm::engine::error::ChatProviderError;
use kosong_wasm::engine::generate::EventSource;
use kosong_wasm::engine::json::Arguments;
use kosong_wasm::engine::message::{Message, Role, ToolCall};
use kosong_wasm::engine::model::Model;
use kosong_wasm::engine::providers::ToolDefinition;
use kosong_wasm::engine::soul::agent::{AgentConfig, Env, Turn, TurnError, TurnTools, UserInput};
use kosong_wasm::engine::soul::approval::{ApprovalState, Approvals};
use kosong_wasm::engine::soul::context::{Context, ContextWrite, SharedContext};
use kosong_wasm::engine::soul::recovery::{RecordedTurn, RecoveryBudget, RecoveryError};
use kosong_wasm::engine::soul::wire::{read_wire_record, ApprovalResponse, Recorder, UiSide, Wire, WireMessage};
use kosong_wasm::engine::step::ToolDispatch;
use kosong_wasm::engine::toolset::{ToolOutput, ToolResult, ToolReturnValue};

use support::http::{ok, End, FakeHttp};
use support::streams::{answer, broken_after_a_call, one_call, shows_open_calls, KINDS};
use support::{call, Echo};

// ---- the tools ------------------------------------------------------------------------------

/// `send_email` (not idempotent; needs approval before it starts when `ask` is set: the way an
/// approval survives a death) and `lookup` (idempotent).
/// `hold` makes a run wait forever (the runtime dies under it). Every start is logged.
#[derive(Clone, Default)]
struct Desk {
    started: Rc<RefCell<Vec<(String, String)>>>,
    finished: Rc<RefCell<Vec<(String, String)>>>,
    hold: Rc<Cell<bool>>,
    ask: Rc<Cell<bool>>,
    approvals: Rc<RefCell<Option<Rc<Approvals>>>>,
}

impl Desk {
    fn starts(&self, name: &str) -> Vec<String> {
        self.started.borrow().iter().filter(|(n, _)| n == name).map(|(_, id)| id.clone()).collect()
    }
    fn finishes(&self, name: &str) -> Vec<String> {
        self.finished.borrow().iter().filter(|(n, _)| n == name).map(|(_, id)| id.clone()).collect()
    }
}

impl ToolDispatch for Desk {
    fn is_eager(&self, _name: &str) -> bool {
        true
    }
    fn is_idempotent(&self, name: &str) -> bool {
        name == "lookup"
    }
    fn needs_approval(
        &self,
        call: &ToolCall,
        _args: &Arguments<'_>,
    ) -> Option<LocalBoxFuture<'static, Result<bool, String>>> {
        (self.ask.get() && call.function.name == "send_email").then(|| futures::future::ready(Ok(true)).boxed_local())
    }
    fn dispatch(&self, call: &ToolCall, _args: &Arguments<'_>) -> LocalBoxFuture<'static, ToolResult> {
        let (name, id) = (call.function.name.clone(), call.id.clone());
        let (hold, started, finished) = (self.hold.get(), self.started.clone(), self.finished.clone());
        // The tool starts at the first poll (the engine's contract).
        async move {
            started.borrow_mut().push((name.clone(), id.clone()));
            if hold {
                futures::future::pending::<()>().await;
            }
            finished.borrow_mut().push((name.clone(), id.clone()));
            ToolResult {
                tool_call_id: id,
                return_value: ToolReturnValue::ok(ToolOutput::Text(format!("{name} done")), "", ""),
            }
        }
        .boxed_local()
    }
}

impl TurnTools for Desk {
    fn definitions(&self) -> Vec<ToolDefinition> {
        ["send_email", "lookup"]
            .iter()
            .map(|n| ToolDefinition {
                name: (*n).into(),
                description: String::new(),
                parameters: json!({"type": "object"}),
            })
            .collect()
    }
}

struct FakeEnv(LocalSpawner);

thread_local! {
    /// The harness's random numbers: a fixed sequence (every run the same), different at each
    /// draw, as two runtimes' ids would be.
    static DRAWS: Cell<u64> = const { Cell::new(0x9e37_79b9_7f4a_7c15) };
}

impl Env for FakeEnv {
    fn sleep(&self, _ms: f64) -> LocalBoxFuture<'static, ()> {
        futures::future::ready(()).boxed_local()
    }
    fn random(&self) -> f64 {
        DRAWS.with(|d| {
            let x = d.get().wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            d.set(x);
            (x >> 11) as f64 / (1u64 << 53) as f64
        })
    }
    fn spawn(&self, task: LocalBoxFuture<'static, ()>) {
        self.0.spawn_local(task).unwrap();
    }
}

// ---- the stores and the lives of a runtime ---------------------------------------------------

/// What outlives a runtime: the recording's lines and the context's lines.
#[derive(Clone, Default)]
struct Store {
    wire: Rc<RefCell<Vec<String>>>,
    context: Rc<RefCell<Vec<String>>>,
    lives: Rc<Cell<u32>>,
    /// Flush the wire's merge buffer just before a kill, as a live runtime's flush timer would
    /// have (the Worker flushes every 50 ms).
    flush_on_kill: Rc<Cell<bool>>,
}

impl Store {
    fn recording(&self) -> Vec<WireMessage> {
        read_wire_record(&self.wire.borrow().join("\n"))
    }
    fn history(&self) -> Vec<Message> {
        Context::from_jsonl(&self.context.borrow().join("\n")).0.history().to_vec()
    }
    fn kinds(&self) -> Vec<String> {
        self.recording().iter().map(|m| m.kind().to_owned()).collect()
    }
    fn results_for(&self, id: &str) -> Vec<Value> {
        self.recording()
            .iter()
            .map(|m| serde_json::to_value(m).unwrap())
            .filter(|v| v["type"] == "ToolResult" && v["payload"]["tool_call_id"] == id)
            .map(|v| v["payload"]["return_value"].clone())
            .collect()
    }
}

enum Start<'a> {
    New(&'a str),
    Resume,
}

/// How a life ended: the turn's result, or killed (`None`).
type Ended = Option<Result<(), TurnError<ChatProviderError>>>;

/// One life of the runtime over `store`: a new turn or the resumed one, killed as soon as `kill`
/// says so of the messages published in this life (checked between polls). `ui` sees each merged
/// message and may answer on the wire.
fn life<M>(
    store: &Store,
    model: &M,
    desk: &Desk,
    start: Start<'_>,
    kill: impl Fn(&[WireMessage]) -> bool,
    ui: impl Fn(&WireMessage, &Wire) + 'static,
) -> Result<Ended, RecoveryError>
where
    M: Model,
    M::Source: EventSource<Error = ChatProviderError>,
{
    let n = store.lives.get() + 1;
    store.lives.set(n);
    let mut pool = LocalPool::new();
    let env = FakeEnv(pool.spawner());
    let (ctx, _) = Context::from_jsonl(&store.context.borrow().join("\n"));
    let context = SharedContext::new(ctx);
    let lines = store.context.clone();
    context.set_sink(Some(Box::new(move |w| {
        match w {
            ContextWrite::Line(l) => lines.borrow_mut().push(l.to_owned()),
            ContextWrite::Rewrite(all) => *lines.borrow_mut() = all.lines().map(str::to_owned).collect(),
        }
        true
    })));
    let wire = Wire::new();
    let sink = store.wire.clone();
    let write: Box<dyn FnMut(String)> = Box::new(move |l| sink.borrow_mut().push(l));
    let clock: Box<dyn Fn() -> f64> = Box::new(|| 1.0);
    wire.set_recorder(if store.wire.borrow().is_empty() {
        Recorder::new(write, clock)
    } else {
        Recorder::appending(write, clock)
    });
    let raw = wire.ui_side(false);
    let merged = wire.ui_side(true);
    let ids = Cell::new(0);
    let approvals = Rc::new(Approvals::new(
        wire.clone(),
        Rc::new(RefCell::new(ApprovalState::new(false))),
        "agent".into(),
        Rc::new(move || {
            ids.set(ids.get() + 1);
            format!("life{n}-req-{}", ids.get())
        }),
    ));
    *desk.approvals.borrow_mut() = Some(approvals.clone());
    {
        let (merged, wire) = (merged.clone(), wire.clone());
        pool.spawner()
            .spawn_local(async move {
                while let Some(m) = UiSide::receive(&merged).await {
                    ui(&m, &wire);
                }
            })
            .unwrap();
    }
    let config = AgentConfig::default();
    let turn = Turn {
        config: &config,
        context: &context,
        model: Some(model),
        tools: desk,
        wire: &wire,
        approvals: &approvals,
        env: &env,
    };
    let fut: LocalBoxFuture<'_, Result<(), TurnError<ChatProviderError>>> = match start {
        Start::New(input) => turn.run(UserInput::Text(input.into()), futures::future::pending()).boxed_local(),
        Start::Resume => {
            let recorded = RecordedTurn::read(&store.recording())?;
            context.read(|c| recorded.check_context(c))?;
            turn.resume(recorded, RecoveryBudget::default(), futures::future::pending()).boxed_local()
        }
    };
    let seen: RefCell<Vec<WireMessage>> = RefCell::default();
    let polls = Cell::new(0u32);
    let killer = futures::future::poll_fn(|cx| {
        seen.borrow_mut().extend(raw.take_ready());
        if kill(&seen.borrow()) {
            return std::task::Poll::Ready(());
        }
        polls.set(polls.get() + 1);
        assert!(polls.get() < 100_000, "the kill point never came; the life saw {:?}", kinds(&seen.borrow()));
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    });
    let ended = pool.run_until(async {
        match select(fut, Box::pin(killer)).await {
            Either::Left((r, _)) => {
                wire.shutdown();
                Some(r)
            }
            Either::Right(((), fut)) => {
                if store.flush_on_kill.get() {
                    wire.flush();
                }
                drop(fut); // the runtime dies: nothing of it runs or writes again
                None
            }
        }
    });
    if ended.is_some() {
        pool.run_until_stalled();
    }
    Ok(ended)
}

fn kinds(ms: &[WireMessage]) -> Vec<String> {
    ms.iter().map(|m| m.kind().to_owned()).collect()
}

fn never_kill(_: &[WireMessage]) -> bool {
    false
}

fn no_ui(_: &WireMessage, _: &Wire) {}

fn has(ms: &[WireMessage], kind: &str) -> bool {
    ms.iter().any(|m| m.kind() == kind)
}

fn text_of(m: &Message) -> String {
    serde_json::to_value(&m.content)
        .ok()
        .map(|v| match v {
            Value::String(s) => s,
            Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
            _ => String::new(),
        })
        .unwrap_or_default()
}

fn roles(h: &[Message]) -> Vec<&'static str> {
    h.iter().map(|m| m.role.as_str()).collect()
}

/// Every call in the history has exactly one tool message, and every call the recording shows has
/// exactly one result there; no event is there twice (the recording's events are its lines).
fn assert_consistent(store: &Store) {
    let history = store.history();
    let mut results: HashMap<String, usize> = HashMap::new();
    for m in &history {
        if m.role == Role::Tool {
            *results.entry(m.tool_call_id.clone().unwrap()).or_default() += 1;
        }
    }
    for m in &history {
        for c in m.tool_calls.iter().flatten() {
            assert_eq!(results.get(&c.id), Some(&1), "call {} has one result in the history: {history:?}", c.id);
        }
    }
    let rec = store.recording();
    let mut shown: Vec<String> = Vec::new();
    for m in &rec {
        if let WireMessage::Part(kosong_wasm::engine::message::StreamedMessagePart::ToolCall(c)) = m {
            shown.push(c.id.clone());
        }
    }
    for id in &shown {
        assert_eq!(store.results_for(id).len(), 1, "call {id} has one result on the wire: {:?}", store.kinds());
    }
    assert_eq!(
        kinds(&rec).iter().filter(|k| *k == "TurnBegin").count(),
        kinds(&rec).iter().filter(|k| *k == "TurnEnd").count()
    );
}

// ---- the tests ------------------------------------------------------------------------------

#[test]
fn a_tool_cut_off_by_the_runtime_is_answered_interrupted_and_the_model_is_asked_again() {
    let store = Store::default();
    let desk = Desk::default();
    desk.hold.set(true);
    let model = Echo::new([
        format!("text: Sending.\n{}", call("c1", "send_email", json!({"to": "a@b.c"}))),
        "text: I could not tell whether it went.".to_owned(),
    ]);
    let ended = life(&store, &model, &desk, Start::New("mail a@b.c"), |_| !desk.starts("send_email").is_empty(), no_ui)
        .unwrap();
    assert!(ended.is_none(), "killed");
    // Before: the call is recorded (it is on the wire before the tool starts); the context holds
    // only the user message.
    assert!(store.kinds().contains(&"ToolCall".to_owned()), "{:?}", store.kinds());
    assert_eq!(roles(&store.history()), ["user"]);

    desk.hold.set(false);
    let ended = life(&store, &model, &desk, Start::Resume, never_kill, no_ui).unwrap();
    assert!(matches!(ended, Some(Ok(()))), "{ended:?}");
    assert_eq!(desk.starts("send_email"), ["c1"], "never run twice");
    let history = store.history();
    assert_eq!(roles(&history), ["user", "assistant", "tool", "assistant"]);
    assert_eq!(text_of(&history[1]), "Sending.");
    let result = text_of(&history[2]);
    assert!(result.contains("interrupted") && result.contains("may have taken effect"), "{result}");
    assert!(!result.contains("cancelled"), "{result}");
    // The model's next request held the round so far.
    assert_eq!(*model.seen.borrow(), vec![1, 3]);
    assert_consistent(&store);
    let k = store.kinds();
    assert_eq!(k.iter().filter(|k| *k == "StepBegin").count(), 2);
    assert!(k.contains(&"Notification".to_owned()), "the UI can tell the turn was resumed: {k:?}");
}

#[test]
fn an_idempotent_tool_runs_again_with_the_same_call_id() {
    let store = Store::default();
    let desk = Desk::default();
    desk.hold.set(true);
    let model = Echo::new([call("k1", "lookup", json!({"q": "x"})), "text: found".to_owned()]);
    life(&store, &model, &desk, Start::New("look"), |_| !desk.starts("lookup").is_empty(), no_ui).unwrap();
    desk.hold.set(false);
    let ended = life(&store, &model, &desk, Start::Resume, never_kill, no_ui).unwrap();
    assert!(matches!(ended, Some(Ok(()))), "{ended:?}");
    assert_eq!(desk.starts("lookup"), ["k1", "k1"]);
    assert_eq!(desk.finishes("lookup"), ["k1"]);
    assert_eq!(text_of(&store.history()[2]), "lookup done");
    assert_consistent(&store);
}

#[test]
fn a_recorded_result_is_kept_and_never_run_again() {
    let store = Store::default();
    let desk = Desk::default();
    let model = Echo::new([
        format!("{}\n{}", call("a1", "lookup", json!({"q": 1})), call("m1", "send_email", json!({"to": "x"}))),
        "text: ok".to_owned(),
    ]);
    // lookup finishes (its result is recorded); send_email waits for an approval before it starts;
    // the runtime dies.
    desk.ask.set(true);
    let d2 = desk.clone();
    let kill = move |ms: &[WireMessage]| {
        assert!(d2.starts("send_email").is_empty(), "nothing of send_email runs before it is approved");
        has(ms, "ToolResult") && has(ms, "ApprovalRequest")
    };
    life(&store, &model, &desk, Start::New("both"), kill, no_ui).unwrap();
    let ended = life(&store, &model, &desk, Start::Resume, never_kill, |m, wire| {
        if m.kind() == "Notification" {
            wire.respond("life1-req-1", ApprovalResponse::Approve, "").unwrap();
        }
    })
    .unwrap();
    assert!(matches!(ended, Some(Ok(()))), "{ended:?}");
    assert_eq!(desk.starts("send_email"), ["m1"], "started once, once approved");
    assert_eq!(desk.finishes("send_email"), ["m1"]);
    assert_eq!(desk.starts("lookup"), ["a1"], "the recorded result is kept; lookup never ran again");
    assert_consistent(&store);
}

#[test]
fn a_waiting_approval_still_waits_under_its_id_and_an_answer_after_the_restart_is_taken() {
    let store = Store::default();
    let desk = Desk::default();
    desk.ask.set(true);
    let model = Echo::new([call("m1", "send_email", json!({"to": "a@b.c"})), "text: sent it".to_owned()]);
    let ended = life(&store, &model, &desk, Start::New("mail"), |ms| has(ms, "ApprovalRequest"), no_ui).unwrap();
    assert!(ended.is_none());
    let request_id = "life1-req-1";
    // Kill it again while it waits (twice in one turn), with nobody answering.
    let ended = life(&store, &model, &desk, Start::Resume, |ms| has(ms, "Notification"), no_ui).unwrap();
    assert!(ended.is_none());
    // The third life: the client answers the request it was sent in the first.
    let ended = life(&store, &model, &desk, Start::Resume, never_kill, move |m, wire| {
        if m.kind() == "Notification" {
            wire.respond(request_id, ApprovalResponse::Approve, "").expect("the request is waiting under its id");
        }
    })
    .unwrap();
    assert!(matches!(ended, Some(Ok(()))), "{ended:?}");
    let k = store.kinds();
    assert_eq!(k.iter().filter(|k| *k == "ApprovalRequest").count(), 1, "asked once: {k:?}");
    assert_eq!(k.iter().filter(|k| *k == "ApprovalResponse").count(), 1, "{k:?}");
    assert_eq!(desk.finishes("send_email"), ["m1"], "sent once, after the approval");
    assert_eq!(text_of(&store.history()[2]), "send_email done");
    assert_consistent(&store);
}

#[test]
fn a_call_and_an_approval_request_recorded_twice_are_one_call_and_one_request() {
    let store = Store::default();
    let desk = Desk::default();
    desk.ask.set(true);
    let model = Echo::new([call("m1", "send_email", json!({"to": "a@b.c"})), "text: sent it".to_owned()]);
    let ended = life(&store, &model, &desk, Start::New("mail"), |ms| has(ms, "ApprovalRequest"), no_ui).unwrap();
    assert!(ended.is_none());
    // Edited by hand (or a line written again): the call's line and the request's line twice each.
    {
        let mut lines = store.wire.borrow_mut();
        let twice: Vec<String> = lines
            .iter()
            .filter(|l| l.contains("\"type\":\"ToolCall\"") || l.contains("\"type\":\"ApprovalRequest\""))
            .cloned()
            .collect();
        assert_eq!(twice.len(), 2, "{lines:?}");
        lines.extend(twice);
    }
    let ended = life(&store, &model, &desk, Start::Resume, never_kill, |m, wire| {
        if m.kind() == "Notification" {
            wire.respond("life1-req-1", ApprovalResponse::Approve, "").expect("waiting under its id");
        }
    })
    .unwrap();
    assert!(matches!(ended, Some(Ok(()))), "the turn ends, never waiting on the second line: {ended:?}");
    assert_eq!(desk.starts("send_email"), ["m1"], "sent once");
    let history = store.history();
    assert_eq!(roles(&history), ["user", "assistant", "tool", "assistant"]);
    assert_eq!(history[1].tool_calls.as_ref().map(Vec::len), Some(1), "one call of that id to the model");
}

#[test]
fn a_crash_loop_while_an_approval_waits_ends_after_four_times_the_budget_and_the_tool_never_starts() {
    let store = Store::default();
    let desk = Desk::default();
    desk.ask.set(true);
    let model = Echo::new([call("m1", "send_email", json!({"to": "a@b.c"})), "text: never".to_owned()]);
    life(&store, &model, &desk, Start::New("mail"), |ms| has(ms, "ApprovalRequest"), no_ui).unwrap();
    // Every life dies at the same point, while the request waits and nobody answers: a person's
    // wait is not "no progress" at first, but a crash loop cannot go on for ever.
    let limit = RecoveryBudget::default().max_resumes * 4;
    for n in 0..limit {
        let ended = life(&store, &model, &desk, Start::Resume, |ms| has(ms, "Notification"), no_ui).unwrap();
        assert!(ended.is_none(), "life {n} was to die");
    }
    let ended = life(&store, &model, &desk, Start::Resume, never_kill, no_ui).unwrap();
    match ended {
        Some(Err(TurnError::NotRecovered(why))) => assert!(why.contains("without progress"), "{why}"),
        other => panic!("the turn is given up after {limit} resumes: {other:?}"),
    }
    assert!(desk.starts("send_email").is_empty(), "never approved, never started");
    let k = store.kinds();
    assert_eq!(k.iter().filter(|k| *k == "ApprovalRequest").count(), 1, "asked once in all those lives: {k:?}");
    assert_eq!(roles(&store.history()), ["user", "assistant", "tool"]);
    assert!(text_of(&store.history()[2]).contains("did not run"), "{}", text_of(&store.history()[2]));
    assert_consistent(&store);
}

#[test]
fn a_turn_that_makes_no_progress_is_given_up_after_its_budget_with_a_consistent_history() {
    let store = Store::default();
    let desk = Desk::default();
    desk.hold.set(true);
    let model = Echo::new([call("k1", "lookup", json!({})), "text: never".to_owned()]);
    life(&store, &model, &desk, Start::New("look"), |_| !desk.starts("lookup").is_empty(), no_ui).unwrap();
    // Each resume runs the idempotent lookup again, which dies with its runtime again.
    for _ in 0..RecoveryBudget::default().max_resumes {
        let before = desk.starts("lookup").len();
        let ended =
            life(&store, &model, &desk, Start::Resume, |_| desk.starts("lookup").len() > before, no_ui).unwrap();
        assert!(ended.is_none());
    }
    let ended = life(&store, &model, &desk, Start::Resume, never_kill, no_ui).unwrap();
    match ended {
        Some(Err(TurnError::NotRecovered(why))) => assert!(why.contains("without progress"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(desk.starts("lookup").len(), 1 + RecoveryBudget::default().max_resumes as usize);
    assert_eq!(roles(&store.history()), ["user", "assistant", "tool"]);
    assert!(text_of(&store.history()[2]).contains("interrupted"));
    assert_consistent(&store);
    assert_eq!(*store.kinds().last().unwrap(), "TurnEnd");
}

#[test]
fn a_runtime_killed_during_the_next_step_resumes_from_the_round_in_the_context() {
    for kind in KINDS {
        let store = Store::default();
        let desk = Desk::default();
        let provider = support::http::provider(kind, json!({}));
        let http = FakeHttp::new(vec![
            ok(one_call(kind, "k1", "lookup", "{}"), End::Done),
            ok(vec![], End::Stall), // the second step's answer never comes: the runtime dies
            ok(answer(kind, "done"), End::Done),
        ]);
        let model = support::http::model(&provider, &http);
        life(
            &store,
            &model,
            &desk,
            Start::New("look"),
            |ms| ms.iter().filter(|m| m.kind() == "StepBegin").count() == 2,
            no_ui,
        )
        .unwrap();
        assert_eq!(roles(&store.history()), ["user", "assistant", "tool"], "{kind}");
        let ended = life(&store, &model, &desk, Start::Resume, never_kill, no_ui).unwrap();
        assert!(matches!(ended, Some(Ok(()))), "{kind}: {ended:?}");
        assert_eq!(desk.starts("lookup"), ["k1"], "{kind}");
        assert_eq!(roles(&store.history()), ["user", "assistant", "tool", "assistant"], "{kind}");
        assert_eq!(http.bodies().len(), 3, "{kind}");
        assert_eq!(
            http.bodies()[1],
            http.bodies()[2],
            "{kind}: the model is asked again what it was asked when the runtime died"
        );
        assert_consistent(&store);
        let steps: Vec<u64> = store
            .recording()
            .iter()
            .map(|m| serde_json::to_value(m).unwrap())
            .filter(|v| v["type"] == "StepBegin")
            .map(|v| v["payload"]["n"].as_u64().unwrap())
            .collect();
        assert_eq!(steps, [1, 2, 3], "{kind}: step numbers keep increasing");
    }
}

#[test]
fn a_recording_that_is_not_this_contexts_is_refused_and_nothing_is_applied() {
    let store = Store::default();
    let desk = Desk::default();
    desk.hold.set(true);
    let model = Echo::new([call("c1", "send_email", json!({})), "text: x".to_owned()]);
    life(&store, &model, &desk, Start::New("mine"), |_| !desk.starts("send_email").is_empty(), no_ui).unwrap();
    // Another session's context: a different user message.
    let other = Store { wire: store.wire.clone(), ..Store::default() };
    other.context.borrow_mut().extend([
        r#"{"role":"_checkpoint","id":0}"#.to_owned(),
        r#"{"role":"user","content":"someone else's"}"#.to_owned(),
    ]);
    let before = (other.wire.borrow().len(), other.context.borrow().len());
    let e = life(&other, &model, &desk, Start::Resume, never_kill, no_ui).unwrap_err();
    assert!(matches!(e, RecoveryError::NotThisContext(_)), "{e:?}");
    assert!(e.to_string().contains("does not belong to this context"), "{e}");
    assert_eq!((other.wire.borrow().len(), other.context.borrow().len()), before, "nothing was written");
    // A finished turn has nothing to resume.
    let done = Store::default();
    life(&done, &Echo::new(["text: hi"]), &desk, Start::New("x"), never_kill, no_ui).unwrap();
    assert!(matches!(life(&done, &model, &desk, Start::Resume, never_kill, no_ui), Err(RecoveryError::Finished)));
}

/// 48 D2: two sessions whose turns began with the same message, each killed while its tool
/// runs. One's recording with the other's context is refused whole (it used to be taken: the
/// text matched), nothing written; each with its own goes on.
#[test]
fn another_sessions_recording_that_began_with_the_same_message_is_refused_whole() {
    let (a, b) = (Store::default(), Store::default());
    let desks = [Desk::default(), Desk::default()];
    for (s, desk) in [&a, &b].into_iter().zip(&desks) {
        desk.hold.set(true);
        let model = Echo::new([call("c1", "send_email", json!({})), "text: sent".to_owned()]);
        life(s, &model, desk, Start::New("mail a@b.c"), |_| !desk.starts("send_email").is_empty(), no_ui).unwrap();
        desk.hold.set(false);
    }
    let mixed = Store { wire: Rc::new(RefCell::new(b.wire.borrow().clone())), ..Store::default() };
    *mixed.context.borrow_mut() = a.context.borrow().clone();
    let before = (mixed.wire.borrow().clone(), mixed.context.borrow().clone());
    let model = Echo::new(["text: sent".to_owned()]);
    let e = life(&mixed, &model, &desks[0], Start::Resume, never_kill, no_ui).unwrap_err();
    assert!(matches!(&e, RecoveryError::NotThisContext(why) if why.contains("last turn is")), "{e}");
    assert_eq!((mixed.wire.borrow().clone(), mixed.context.borrow().clone()), before, "nothing was written");
    for (s, desk) in [&a, &b].into_iter().zip(&desks) {
        let ended = life(s, &Echo::new(["text: sent".to_owned()]), desk, Start::Resume, never_kill, no_ui).unwrap();
        assert!(matches!(ended, Some(Ok(()))), "{ended:?}");
        assert_consistent(s);
        assert_eq!(desk.starts("send_email"), ["c1"], "each session's tool ran once, in its first life");
    }
}

/// 48 C4 for a recording and a context kept by hand: a context that lost its last writes (the
/// first step's round and the second step's checkpoint) is one step behind its recording. It is
/// refused whole: the step whose tool ran would otherwise vanish from the history.
#[test]
fn a_context_a_step_behind_its_recording_is_refused_whole() {
    let store = Store::default();
    let desk = Desk::default();
    let provider = support::http::provider("openai", json!({}));
    let http = FakeHttp::new(vec![
        ok(one_call("openai", "k1", "send_email", "{}"), End::Done),
        ok(vec![], End::Stall),
        ok(answer("openai", "done"), End::Done),
    ]);
    let model = support::http::model(&provider, &http);
    life(
        &store,
        &model,
        &desk,
        Start::New("mail"),
        |ms| ms.iter().filter(|m| m.kind() == "StepBegin").count() == 2,
        no_ui,
    )
    .unwrap();
    assert_eq!(roles(&store.history()), ["user", "assistant", "tool"]);
    // The context's sink lost the round and the next checkpoint (an async writer that died).
    let kept = store.context.borrow().iter().position(|l| l.contains(r#""role":"user""#)).unwrap() + 1;
    store.context.borrow_mut().truncate(kept);
    assert_eq!(roles(&store.history()), ["user"]);
    let before = store.context.borrow().clone();
    let e = life(&store, &model, &desk, Start::Resume, never_kill, no_ui).unwrap_err();
    assert!(matches!(&e, RecoveryError::NotThisContext(why) if why.contains("up to step 0")), "{e}");
    assert_eq!(*store.context.borrow(), before, "nothing was written");
    assert_eq!(desk.starts("send_email"), ["k1"]);
    assert_eq!(http.bodies().len(), 2, "the model was not asked again");
}

/// The same death, when only the second step's checkpoint was lost: the first step's round is in
/// the context whole, so the checkpoint is written again and the turn goes on exactly — the round
/// once in the history, the tool once (it used to be read as the second step's round and
/// written twice).
#[test]
fn a_context_that_lost_only_a_steps_checkpoint_goes_on_exactly() {
    for kind in KINDS {
        let store = Store::default();
        let desk = Desk::default();
        let provider = support::http::provider(kind, json!({}));
        let http = FakeHttp::new(vec![
            ok(one_call(kind, "k1", "lookup", "{}"), End::Done),
            ok(vec![], End::Stall),
            ok(answer(kind, "done"), End::Done),
        ]);
        let model = support::http::model(&provider, &http);
        life(
            &store,
            &model,
            &desk,
            Start::New("look"),
            |ms| ms.iter().filter(|m| m.kind() == "StepBegin").count() == 2,
            no_ui,
        )
        .unwrap();
        let last = store.context.borrow_mut().pop().unwrap();
        assert!(last.contains("_checkpoint") && last.contains(r#""step":2"#), "{kind}: {last}");
        let ended = life(&store, &model, &desk, Start::Resume, never_kill, no_ui).unwrap();
        assert!(matches!(ended, Some(Ok(()))), "{kind}: {ended:?}");
        assert_eq!(roles(&store.history()), ["user", "assistant", "tool", "assistant"], "{kind}");
        assert_eq!(desk.starts("lookup"), ["k1"], "{kind}");
        assert_eq!(http.bodies()[1], http.bodies()[2], "{kind}: asked again what it was asked");
        assert_consistent(&store);
    }
}

/// From each wire format's bytes: text, a complete `send_email` (held: the runtime dies while it
/// runs) and — where the format shows an open call — a second call cut off mid-input. After the
/// restart: the text kept, the first call interrupted (it may have been sent), the second cut off
/// (it never ran), the model asked again with that round.
#[test]
fn every_wire_format_resumes_a_round_cut_by_the_runtime() {
    for kind in KINDS {
        let store = Store::default();
        let desk = Desk::default();
        desk.hold.set(true);
        let provider = support::http::provider(kind, json!({}));
        let http =
            FakeHttp::new(vec![ok(broken_after_a_call(kind, "call"), End::Stall), ok(answer(kind, "done"), End::Done)]);
        let model = support::http::model(&provider, &http);
        let open = shows_open_calls(kind);
        // Killed once the second call's input began to arrive (where the format shows it).
        let kill = |ms: &[WireMessage]| {
            !desk.starts("send_email").is_empty() && (!open || serde_json::to_string(ms).unwrap().contains("x@"))
        };
        store.flush_on_kill.set(true);
        life(&store, &model, &desk, Start::New("mail"), kill, no_ui).unwrap();
        desk.hold.set(false);
        let ended = life(&store, &model, &desk, Start::Resume, never_kill, no_ui).unwrap();
        assert!(matches!(ended, Some(Ok(()))), "{kind}: {ended:?}");
        assert_eq!(desk.starts("send_email"), ["call_1"], "{kind}: the email never went twice");
        let history = store.history();
        let expected: &[&str] = if open {
            &["user", "assistant", "tool", "tool", "assistant"]
        } else {
            &["user", "assistant", "tool", "assistant"]
        };
        assert_eq!(roles(&history), expected, "{kind}");
        assert!(text_of(&history[2]).contains("interrupted"), "{kind}: {}", text_of(&history[2]));
        if open {
            assert!(text_of(&history[3]).contains("broke off"), "{kind}: {}", text_of(&history[3]));
        }
        let bodies = http.bodies();
        assert_eq!(bodies.len(), 2, "{kind}");
        let sent = bodies[1].to_string();
        assert!(
            sent.contains("Sending.") && sent.contains("a@b.c") && sent.contains("interrupted"),
            "{kind}: the next request holds the round: {sent}"
        );
        assert_consistent(&store);
    }
}

/// An answer cut off by the runtime before any call is void, as a failed attempt is: the wire
/// says so (`StepRetry`, which a UI drops the attempt's parts at) and the step is asked again.
#[test]
fn an_answer_cut_before_any_call_is_asked_again_as_a_retry() {
    for kind in KINDS {
        let store = Store::default();
        store.flush_on_kill.set(true);
        let desk = Desk::default();
        let provider = support::http::provider(kind, json!({}));
        let mut half = answer(kind, "never finished");
        half.truncate(half.len() / 2 + 1);
        let http = FakeHttp::new(vec![ok(half, End::Stall), ok(answer(kind, "whole"), End::Done)]);
        let model = support::http::model(&provider, &http);
        life(&store, &model, &desk, Start::New("hi"), |ms| has(ms, "ContentPart"), no_ui).unwrap();
        let ended = life(&store, &model, &desk, Start::Resume, never_kill, no_ui).unwrap();
        assert!(matches!(ended, Some(Ok(()))), "{kind}: {ended:?}");
        let history = store.history();
        assert_eq!(roles(&history), ["user", "assistant"], "{kind}");
        assert_eq!(text_of(&history[1]), "whole", "{kind}");
        let k = store.kinds();
        let at = k.iter().position(|x| x == "Notification").unwrap();
        assert_eq!(&k[at..at + 2], ["Notification", "StepRetry"], "{kind}: {k:?}");
        assert_eq!(k.iter().filter(|x| *x == "StepBegin").count(), 1, "{kind}: the same step, tried again");
        assert_consistent(&store);
    }
}

/// The events of a background Responses answer (the server keeps it): "Sending." then
/// `send_email` and `lookup`, each event with its sequence number.
fn kept_answer() -> Vec<String> {
    let mut ev = vec![
        json!({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}}),
        json!({"type": "response.output_item.added", "output_index": 0, "item": {"id": "msg_1", "type": "message", "role": "assistant", "content": []}}),
    ];
    for t in ["Send", "ing", "."] {
        ev.push(json!({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": t}));
    }
    ev.push(json!({"type": "response.output_item.done", "output_index": 0, "item": {"id": "msg_1", "type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Sending."}]}}));
    for (i, (id, name, parts)) in
        [("call_1", "send_email", ["{\"to\":", "\"a@b.c\"}"]), ("call_2", "lookup", ["{\"q\":", "\"b.c\"}"])]
            .into_iter()
            .enumerate()
    {
        let item = format!("fc_{}", i + 1);
        let out = i + 1;
        ev.push(json!({"type": "response.output_item.added", "output_index": out, "item": {"id": item, "type": "function_call", "call_id": id, "name": name, "arguments": ""}}));
        for p in parts {
            ev.push(json!({"type": "response.function_call_arguments.delta", "item_id": item, "output_index": out, "delta": p}));
        }
        let args = parts.concat();
        ev.push(json!({"type": "response.function_call_arguments.done", "item_id": item, "output_index": out, "arguments": args}));
        ev.push(json!({"type": "response.output_item.done", "output_index": out, "item": {"id": item, "type": "function_call", "call_id": id, "name": name, "arguments": args, "status": "completed"}}));
    }
    ev.push(json!({"type": "response.completed", "response": {"id": "resp_1", "status": "completed", "output": [],
        "usage": {"input_tokens": 100, "output_tokens": 40, "total_tokens": 140}}}));
    ev.into_iter()
        .enumerate()
        .map(|(n, mut e)| {
            e["sequence_number"] = json!(n);
            format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap())
        })
        .collect()
}

/// A runtime killed while the model wrote an answer its server keeps (Responses in the
/// background): the next life reads the same answer again from its start — one GET, no second
/// POST for the step — and goes on where the recording stopped. The text is told once, the call
/// that may have run is answered interrupted (never run again), the call whose input was still
/// arriving runs once when it is whole, the usage is the answer's, once.
#[test]
fn a_kept_answer_is_read_again_by_the_next_life_instead_of_asked_again() {
    // Killed at each point of the answer: after its text, while a call is whole and its tool runs,
    // while the next call's input arrives.
    for cut in 2usize..kept_answer().len() - 1 {
        let events = kept_answer();
        let store = Store::default();
        store.flush_on_kill.set(true);
        let desk = Desk::default();
        desk.hold.set(true);
        let provider = support::http::provider("openai_responses", json!({"background": true}));
        let http = FakeHttp::new(vec![
            ok(events[..cut].to_vec(), End::Stall),
            ok(events.clone(), End::Done),
            ok(answer("openai_responses", "Sent."), End::Done),
        ]);
        let model = support::http::model(&provider, &http);
        // Killed once the life has taken all the first reply holds (and its tools started).
        let kill = |_: &[WireMessage]| http.delivered() >= cut && http.left() == 2;
        life(&store, &model, &desk, Start::New("mail"), kill, no_ui).unwrap();
        let started_before = desk.starts("send_email").len();
        desk.hold.set(false);
        let ended = life(&store, &model, &desk, Start::Resume, never_kill, no_ui).unwrap();
        assert!(matches!(ended, Some(Ok(()))), "cut {cut}: {ended:?}");
        let sent = http.sent();
        let methods: Vec<_> = sent.iter().map(|s| format!("{:?}", s.method)).collect();
        assert_eq!(methods, ["Post", "Get", "Post"], "cut {cut}: the step asked once, its answer read again once");
        assert!(sent[1].url.ends_with("/responses/resp_1?stream=true&starting_after=0"), "{}", sent[1].url);
        // The wire tells the text once, and each call once.
        let rec = store.recording();
        let text: String = rec
            .iter()
            .filter_map(|m| match m {
                WireMessage::Part(kosong_wasm::engine::message::StreamedMessagePart::Content(
                    kosong_wasm::engine::message::ContentPart::Text { text, .. },
                )) => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(text, "Sending.Sent.", "cut {cut}: {:?}", store.kinds());
        let history = store.history();
        assert_eq!(roles(&history), ["user", "assistant", "tool", "tool", "assistant"], "cut {cut}");
        assert_eq!(text_of(&history[1]), "Sending.");
        let calls = history[1].tool_calls.clone().unwrap_or_else(|| panic!("cut {cut}: {history:?}"));
        assert_eq!(
            calls.iter().map(|c| c.function.arguments.clone().unwrap_or_default()).collect::<Vec<_>>(),
            ["{\"to\":\"a@b.c\"}", "{\"q\":\"b.c\"}"]
        );
        // send_email whole in the recording may have run: it is answered interrupted and never
        // runs again; one whose input came only in the answer read again runs once.
        if cut > 8 {
            assert_eq!(desk.starts("send_email").len(), started_before, "cut {cut}: never run again");
            assert!(text_of(&history[2]).contains("interrupted"), "cut {cut}: {}", text_of(&history[2]));
        } else {
            assert_eq!(desk.starts("send_email").len(), 1, "cut {cut}");
            assert_eq!(text_of(&history[2]), "send_email done", "cut {cut}");
        }
        assert_eq!(desk.finishes("lookup"), ["call_2"], "cut {cut}");
        let usage: Vec<Value> = rec
            .iter()
            .map(|m| serde_json::to_value(m).unwrap())
            .filter(|v| v["type"] == "StatusUpdate")
            .map(|v| v["payload"]["token_usage"].clone())
            .collect();
        assert_eq!(usage[0]["output"], json!(40), "cut {cut}: the answer's usage, once: {usage:?}");
        assert_eq!(usage.len(), 2, "cut {cut}");
        assert_consistent(&store);
    }
}

#[test]
fn a_sub_agents_question_whose_call_cannot_go_on_is_closed_refused_and_the_recovered_turn_does_not_wait_on_it() {
    // (A call whose tool is not idempotent, and no record of its sub-agent: nothing resumes it.)
    use kosong_wasm::engine::soul::wire::ApprovalRequest;
    let store = Store::default();
    let desk = Desk::default();
    desk.hold.set(true);
    // The call runs a sub-agent (held: the runtime dies under it) whose tool asks the parent's UI.
    let model = Echo::new([call("m1", "send_email", json!({"to": "a@b.c"})), "text: told you".to_owned()]);
    let asked = Rc::new(Cell::new(false));
    let a2 = asked.clone();
    let ended = life(
        &store,
        &model,
        &desk,
        Start::New("mail"),
        |ms| has(ms, "ApprovalRequest"),
        move |m, wire| {
            if m.kind() == "ToolCall" && !a2.replace(true) {
                drop(wire.request_approval(ApprovalRequest {
                    id: "sub-req".into(),
                    tool_call_id: "k1".into(),
                    sender: "explore".into(),
                    action: "rm".into(),
                    description: String::new(),
                    display: Vec::new(),
                    before_start: true,
                    agent_id: Some("a1234abcd".into()),
                    subagent_type: Some("explore".into()),
                }));
            }
        },
    )
    .unwrap();
    assert!(ended.is_none());
    let recorded = RecordedTurn::read(&store.recording()).unwrap();
    assert!(recorded.approvals.is_empty(), "a sub-agent's question is not the turn's own");
    assert!(recorded.subagents.is_empty(), "no sub-agent call was recorded");
    assert_eq!(recorded.subagent_asked, [("sub-req".to_owned(), String::new())]);
    desk.hold.set(false);
    let ended = life(&store, &model, &desk, Start::Resume, never_kill, no_ui).unwrap();
    assert!(matches!(ended, Some(Ok(()))), "{ended:?}");
    let responses: Vec<Value> = store
        .recording()
        .iter()
        .map(|m| serde_json::to_value(m).unwrap())
        .filter(|v| v["type"] == "ApprovalResponse")
        .map(|v| v["payload"].clone())
        .collect();
    assert_eq!(responses, [json!({"request_id": "sub-req", "response": "reject", "feedback": ""})]);
    assert_eq!(store.results_for("m1")[0]["display"][0]["text"], "Interrupted", "the call that ran the sub-agent");
    assert_eq!(desk.starts("send_email"), ["m1"], "not run again");
    assert_consistent(&store);
}
