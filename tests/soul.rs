//! The agent turn, run natively on `futures`' `LocalPool` with fake seams (`tests/support/`): a
//! scripted model (the core's echo provider), tools that are Rust closures, timers that resolve
//! when the test says.

mod support;

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use futures::channel::oneshot;
use futures::executor::LocalPool;
use futures::FutureExt;
use serde_json::{json, Value};

use kosong_wasm::engine::message::Message;
use kosong_wasm::engine::soul::agent::{TurnError, UserInput};
use kosong_wasm::engine::soul::context::Context;
use kosong_wasm::engine::soul::wire::{ApprovalResponse, Wire, WireMessage};
use kosong_wasm::engine::toolset::{ToolOutput, ToolReturnValue};
use support::{call, never, plus, Echo, FakeEnv, Harness};

#[test]
fn a_two_step_turn_publishes_the_exact_sequence_and_grows_the_context() {
    let mut h = Harness::new();
    plus(&h);
    let model = Echo::new([
        format!(
            "usage: input_other=10 output=5\nthink: I should add.\ntext: Let me add.\n{}",
            call("c1", "plus", json!({"a": 1, "b": 2}))
        ),
        "usage: input_other=30 output=3\ntext: It is 3.".into(),
    ]);
    let o = h.turn(Some(&model), "1+2?", never(), |_, _| {});
    assert!(o.result.is_ok());
    assert_eq!(
        o.kinds(),
        [
            "TurnBegin",
            "StepBegin",
            "ContentPart",
            "ContentPart",
            "ToolCall",
            "ToolResult",
            "StatusUpdate",
            "StepBegin",
            "ContentPart",
            "StatusUpdate",
            "TurnEnd"
        ]
    );
    let begin = &o.payloads("TurnBegin")[0];
    assert_eq!(begin["user_input"], "1+2?");
    // The turn's id: on its TurnBegin and on the checkpoints it wrote (none before it).
    let id = begin["turn_id"].as_str().expect("a turn id");
    assert!(begin.get("after_turn_id").is_none(), "{begin}");
    assert_eq!(h.context.read(|c| c.turn_mark().map(|m| (m.turn.clone(), m.step))), Some((id.to_owned(), 2)));
    assert_eq!(o.payloads("ToolResult")[0]["return_value"]["output"], "3");
    let status = &o.payloads("StatusUpdate")[0];
    assert_eq!(
        status["token_usage"],
        json!({"input_other": 10, "output": 5, "input_cache_read": 0, "input_cache_creation": 0})
    );
    assert_eq!(status["context_tokens"], 10, "the step's input tokens, as kimi-cli counts them");
    let roles: Vec<String> =
        h.history().iter().map(|m| serde_json::to_value(m.role).unwrap().as_str().unwrap().to_owned()).collect();
    assert_eq!(roles, ["user", "assistant", "tool", "assistant"]);
    assert_eq!(
        serde_json::to_value(&h.history()[2]).unwrap(),
        json!({"role": "tool", "content": "3", "tool_call_id": "c1"})
    );
    assert_eq!(h.context.read(|c| (c.n_checkpoints(), c.token_count())), (3, 33));
    // The second request carried the whole history, tool message included.
    assert_eq!(model.seen.borrow()[1], 3);
    assert_eq!(h.lines.borrow().len(), h.context.read(|c| c.to_jsonl()).lines().count());
    assert!(o.raw.len() >= o.merged.len());
}

#[test]
fn a_429_from_the_echo_dsl_is_retried_once_then_the_text() {
    let mut h = Harness::new();
    let model = Echo::new(["error: 429 slow down", "text: done"]);
    let o = h.turn(Some(&model), "hi", never(), |_, _| {});
    assert!(o.result.is_ok());
    assert_eq!(o.kinds(), ["TurnBegin", "StepBegin", "StepRetry", "ContentPart", "StatusUpdate", "TurnEnd"]);
    let retry = &o.payloads("StepRetry")[0];
    assert_eq!(retry["status_code"], 429);
    assert_eq!(retry["next_attempt"], 2);
    assert_eq!(retry["max_attempts"], 3);
    assert_eq!(retry["error_type"], "APIStatusError");
    assert_eq!(retry["wait_s"], 0.3);
    assert_eq!(*h.env.sleeps.borrow(), [300.0]);
    assert_eq!(o.payloads("ContentPart")[0]["text"], "done");
}

#[test]
fn retries_stop_at_the_attempt_limit_and_errors_not_worth_retrying_fail_at_once() {
    let mut h = Harness::new();
    let model = Echo::new(["error: 503", "error: connection reset", "error: timeout", "text: never"]);
    let o = h.turn(Some(&model), "x", never(), |_, _| {});
    assert!(matches!(o.result, Err(TurnError::Seam(kosong_wasm::engine::error::ChatProviderError::Timeout(_)))));
    assert_eq!(o.kinds(), ["TurnBegin", "StepBegin", "StepRetry", "StepRetry", "StepInterrupted", "TurnEnd"]);
    assert_eq!(*h.env.sleeps.borrow(), [300.0, 600.0]);

    let model = Echo::new(["error: 400 bad request", "text: never"]);
    let o = h.turn(Some(&model), "x", never(), |_, _| {});
    assert!(matches!(o.result, Err(TurnError::Seam(_))));
    assert_eq!(o.kinds(), ["TurnBegin", "StepBegin", "StepInterrupted", "TurnEnd"]);
}

#[test]
fn no_model_and_input_the_model_cannot_take() {
    let mut h = Harness::new();
    let o = h.turn(None::<&Echo>, "hi", never(), |_, _| {});
    assert!(matches!(o.result, Err(TurnError::LLMNotSet)));
    assert_eq!(o.kinds(), ["TurnBegin", "TurnEnd"]);

    h.config.capabilities = Some(vec!["thinking".into()]);
    plus(&h);
    let model = Echo::new([
        r#"image_url: {"url": "data:image/png;base64,AA"}"#.to_owned() + "\n" + &call("c", "plus", json!({})),
        "text: ok".into(),
    ]);
    let o = h.turn(Some(&model), "look", never(), |_, _| {});
    assert!(o.result.is_ok(), "the assistant's own image is not checked; tool messages and input are");
    let mut h = Harness::new();
    h.config.capabilities = Some(vec![]);
    h.tools.add("img", |_, _| {
        async {
            ToolReturnValue::ok(
                ToolOutput::Parts(vec![kosong_wasm::engine::message::ContentPart::ImageUrl {
                    image_url: kosong_wasm::engine::message::MediaUrl { url: "x".into(), id: None },
                }]),
                "",
                "",
            )
        }
        .boxed_local()
    });
    let model = Echo::new([call("i", "img", json!({})), "text: never".into()]);
    let o = h.turn(Some(&model), "pic", never(), |_, _| {});
    match o.result {
        Err(TurnError::LLMNotSupported { model_name, capabilities }) => {
            assert_eq!((model_name.as_str(), capabilities), ("scripted_echo", vec!["image_in".to_owned()]))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn max_steps() {
    let mut h = Harness::new();
    plus(&h);
    h.config.max_steps_per_turn = 2;
    let model = Echo::new((1..=3).map(|i| call(&format!("c{i}"), "plus", json!({"a": i}))));
    let o = h.turn(Some(&model), "loop", never(), |_, _| {});
    assert!(matches!(o.result, Err(TurnError::MaxStepsReached(2))));
    assert_eq!(o.kinds().iter().filter(|k| *k == "StepBegin").count(), 2);
    assert_eq!(o.kinds().last().unwrap(), "TurnEnd");
}

#[test]
fn repeated_calls_get_kimi_clis_reminders_and_twelve_stop_the_turn() {
    let mut h = Harness::new();
    plus(&h);
    let model = Echo::new((0..20).map(|i| call(&format!("s{i}"), "plus", json!({"a": 1, "b": 1}))));
    let o = h.turn(Some(&model), "again", never(), |_, _| {});
    match &o.result {
        Err(TurnError::RepeatedToolCall { tool_name, count }) => assert_eq!((tool_name.as_str(), *count), ("plus", 12)),
        other => panic!("{other:?}"),
    }
    assert_eq!(o.kinds().iter().filter(|k| *k == "StepBegin").count(), 12);
    let outputs: Vec<String> =
        o.payloads("ToolResult").iter().map(|p| p["return_value"]["output"].as_str().unwrap().to_owned()).collect();
    assert_eq!(outputs[0], "2");
    assert_eq!(outputs[1], "2");
    assert!(outputs[2].starts_with("2\n\n<system-reminder>\nYou are repeating the exact same tool call"));
    assert!(outputs[4].contains("- repeated_times: 5\n- arguments: {\"a\":1,\"b\":1}"));
    assert!(outputs[7].contains("You are stuck in a dead end"));
    // The model read the reminder: it is in the tool message of the context.
    let tool_msgs: Vec<Message> = h.history().into_iter().filter(|m| m.tool_call_id.is_some()).collect();
    assert_eq!(tool_msgs.len(), 12, "the twelfth step's result is in the context too");
    assert!(tool_msgs[2].extract_text("").contains("<system-reminder>"));
}

#[test]
fn the_same_call_twice_in_one_step_runs_the_tool_once() {
    let mut h = Harness::new();
    plus(&h);
    let model = Echo::new([
        format!(
            "{}\n{}\n{}",
            call("a", "plus", json!({"a": 1, "b": 2})),
            call("b", "plus", json!({"b": 2, "a": 1})),
            call("c", "plus", json!({"a": 5}))
        ),
        "text: done".into(),
    ]);
    let o = h.turn(Some(&model), "x", never(), |_, _| {});
    assert!(o.result.is_ok());
    assert_eq!(h.tools.runs.borrow().len(), 2, "a and c ran; b got a's result");
    let results = o.payloads("ToolResult");
    assert_eq!(results.len(), 3);
    let b = results.iter().find(|r| r["tool_call_id"] == "b").unwrap();
    assert_eq!(b["return_value"]["output"], "3");
}

#[test]
fn cancel_during_a_tool_drops_it_answers_the_call_as_aborted_and_ends_the_turn() {
    let mut h = Harness::new();
    let (started_tx, started_rx) = oneshot::channel::<()>();
    let started_tx = RefCell::new(Some(started_tx));
    h.tools.add("wait", move |_, _| {
        if let Some(tx) = started_tx.borrow_mut().take() {
            let _ = tx.send(());
        }
        futures::future::pending().boxed_local()
    });
    plus(&h);
    let model = Echo::new([format!("{}\n{}", call("p", "plus", json!({"a": 1})), call("w", "wait", json!({})))]);
    let cancel = async move {
        let _ = started_rx.await;
    };
    let o = h.turn(Some(&model), "wait", cancel, |_, _| {});
    assert!(matches!(o.result, Err(TurnError::Cancelled)));
    assert_eq!(*h.tools.dropped.borrow(), ["w"], "the waiting tool's future was dropped (its signal aborts)");
    let kinds = o.kinds();
    assert!(!kinds.contains(&"StepInterrupted".to_owned()));
    assert_eq!(&kinds[kinds.len() - 2..], ["ToolResult", "TurnEnd"]);
    let h2 = h.history();
    assert_eq!(h2.len(), 4, "user, assistant, and a result for each call");
    assert!(h2[3].extract_text("").contains("aborted: the user cancelled the run"));
    assert_eq!(
        o.payloads("ToolResult").last().unwrap()["return_value"]["display"],
        json!([{"type": "brief", "text": "Aborted"}])
    );
}

#[test]
fn cancel_while_waiting_to_retry_ends_at_once() {
    let mut h = Harness::new();
    h.env.hold.set(true);
    let model = Echo::new(["error: 429", "text: never"]);
    let (tx, rx) = oneshot::channel::<()>();
    let tx = RefCell::new(Some(tx));
    let o = h.turn(
        Some(&model),
        "x",
        async move {
            let _ = rx.await;
        },
        move |m, _| {
            if m.kind() == "StepRetry" {
                if let Some(tx) = tx.borrow_mut().take() {
                    let _ = tx.send(());
                }
            }
        },
    );
    assert!(matches!(o.result, Err(TurnError::Cancelled)));
    assert_eq!(o.kinds(), ["TurnBegin", "StepBegin", "StepRetry", "TurnEnd"]);
}

fn approving_tool(h: &Harness, ran: Rc<RefCell<Vec<String>>>) {
    h.tools.add("rm", move |c, approvals| {
        let args: Value = serde_json::from_str(c.function.arguments.as_deref().unwrap()).unwrap();
        let path = args["path"].as_str().unwrap().to_owned();
        let asked = approvals.request(&c.id, "delete file", &format!("rm {path}"), false).unwrap();
        let (approvals, id, ran) = (approvals.clone(), c.id.clone(), ran.clone());
        async move {
            if !asked.await {
                if path == "keep-result" {
                    return ToolReturnValue::ok(ToolOutput::Text("not deleted".into()), "", "");
                }
                return approvals.rejection(&id);
            }
            ran.borrow_mut().push(path.clone());
            ToolReturnValue::ok(ToolOutput::Text(format!("deleted {path}")), "", "")
        }
        .boxed_local()
    });
}

fn answer(answers: Vec<(&'static str, &'static str)>) -> impl Fn(&WireMessage, &Wire) {
    let answers = RefCell::new(answers.into_iter());
    move |m, wire| {
        if m.kind() == "ApprovalRequest" {
            let id = serde_json::to_value(m).unwrap()["payload"]["id"].as_str().unwrap().to_owned();
            let (response, feedback) = answers.borrow_mut().next().unwrap();
            wire.respond(&id, ApprovalResponse::parse(response).unwrap(), feedback).unwrap();
        }
    }
}

#[test]
fn approvals_approve_for_session_is_remembered_and_the_tool_decides_its_result() {
    let mut h = Harness::new();
    let ran = Rc::new(RefCell::new(Vec::new()));
    approving_tool(&h, ran.clone());
    let model = Echo::new([
        call("r1", "rm", json!({"path": "a"})),
        call("r2", "rm", json!({"path": "b"})),
        call("r3", "rm", json!({"path": "c"})),
        "text: ok".into(),
    ]);
    let o = h.turn(Some(&model), "clean", never(), answer(vec![("approve", ""), ("approve_for_session", "")]));
    assert!(o.result.is_ok());
    assert_eq!(*ran.borrow(), ["a", "b", "c"]);
    assert_eq!(o.payloads("ApprovalRequest").len(), 2, "c was approved for the session");
    let req = &o.payloads("ApprovalRequest")[0];
    assert_eq!(
        req,
        &json!({"id": "req-1", "tool_call_id": "r1", "sender": "agent", "action": "delete file", "description": "rm a", "display": []})
    );
    assert_eq!(
        o.payloads("ApprovalResponse")[0],
        json!({"request_id": "req-1", "response": "approve", "feedback": ""})
    );
    let kinds = o.kinds();
    let (req, resp) =
        (kinds.iter().position(|k| k == "ApprovalRequest"), kinds.iter().position(|k| k == "ApprovalResponse"));
    assert!(req < resp);
}

#[test]
fn a_rejection_without_feedback_ends_the_turn_with_feedback_it_goes_on() {
    let mut h = Harness::new();
    approving_tool(&h, Rc::default());
    let model = Echo::new([call("x1", "rm", json!({"path": "z"})), "text: never".into()]);
    let o = h.turn(Some(&model), "delete z", never(), answer(vec![("reject", "")]));
    assert!(o.result.is_ok());
    assert_eq!(o.kinds().iter().filter(|k| *k == "StepBegin").count(), 1);
    let rv = &o.payloads("ToolResult")[0]["return_value"];
    assert_eq!(rv["message"], "The tool call is rejected by the user. Stop what you are doing and wait for the user to tell you how to proceed.");
    assert_eq!(rv["display"], json!([{"type": "brief", "text": "Rejected by user"}]));

    let model = Echo::new([call("x2", "rm", json!({"path": "z"})), "text: I will keep z.".into()]);
    let o = h.turn(Some(&model), "delete z", never(), answer(vec![("reject", "keep z")]));
    assert!(o.result.is_ok());
    assert_eq!(o.kinds().iter().filter(|k| *k == "StepBegin").count(), 2, "the model read the feedback and answered");
    let rv = &o.payloads("ToolResult")[0]["return_value"];
    assert_eq!(rv["message"], "The tool call is rejected by the user. User feedback: keep z");
    assert_eq!(rv["display"], json!([{"type": "brief", "text": "Rejected: keep z"}]));

    // A tool that returns something else after a refusal keeps its result, and the turn goes on.
    let model = Echo::new([call("x3", "rm", json!({"path": "keep-result"})), "text: fine".into()]);
    let o = h.turn(Some(&model), "delete", never(), answer(vec![("reject", "")]));
    assert_eq!(o.payloads("ToolResult")[0]["return_value"]["output"], "not deleted");
    assert_eq!(o.kinds().iter().filter(|k| *k == "StepBegin").count(), 2);
}

#[test]
fn yolo_approves_and_cancelling_during_an_approval_rejects_it() {
    let mut h = Harness::new();
    let ran = Rc::new(RefCell::new(Vec::new()));
    approving_tool(&h, ran.clone());
    h.approval_state.borrow_mut().yolo = true;
    let model = Echo::new([call("y", "rm", json!({"path": "q"})), "text: ok".into()]);
    let o = h.turn(Some(&model), "go", never(), |_, _| {});
    assert!(o.result.is_ok() && o.payloads("ApprovalRequest").is_empty());
    assert_eq!(*ran.borrow(), ["q"]);

    let mut h = Harness::new();
    approving_tool(&h, Rc::default());
    let model = Echo::new([call("y", "rm", json!({"path": "q"})), "text: ok".into()]);
    let (tx, rx) = oneshot::channel::<()>();
    let tx = RefCell::new(Some(tx));
    let o = h.turn(
        Some(&model),
        "go",
        async move {
            let _ = rx.await;
        },
        move |m, _| {
            if m.kind() == "ApprovalRequest" {
                if let Some(tx) = tx.borrow_mut().take() {
                    let _ = tx.send(());
                }
            }
        },
    );
    assert!(matches!(o.result, Err(TurnError::Cancelled)));
    assert_eq!(o.payloads("ApprovalResponse")[0]["response"], "reject");
    assert_eq!(o.kinds().last().unwrap(), "TurnEnd");
}

#[test]
fn compaction_keeps_the_system_prompt_and_the_last_two_messages() {
    let mut h = Harness::new();
    h.config.system_prompt = "You are terse.".into();
    h.config.max_context_tokens = 100_000;
    h.context.write_system_prompt("You are terse.");
    let m = |role: &str, t: &str| serde_json::from_value::<Message>(json!({"role": role, "content": t})).unwrap();
    h.context.append(vec![
        m("user", "old question"),
        m("assistant", "old answer"),
        m("user", "recent question"),
        m("assistant", "recent answer"),
    ]);
    h.context.update_token_count(90_000);
    let model = Echo::new(["text: SUMMARY of the old part", "text: fine"]);
    let o = h.turn(Some(&model), "next", never(), |_, _| {});
    assert!(o.result.is_ok());
    assert_eq!(&o.kinds()[..4], ["TurnBegin", "StepBegin", "CompactionBegin", "CompactionEnd"]);
    let hist = h.history();
    assert!(hist[0].extract_text("").contains("SUMMARY of the old part"));
    assert_eq!(hist[1].extract_text(""), "recent answer");
    assert_eq!(hist[2].extract_text(""), "next");
    assert_eq!(hist.last().unwrap().extract_text(""), "fine");
    assert_eq!(h.context.read(|c| c.system_prompt().map(str::to_owned)).as_deref(), Some("You are terse."));
    let (restored, skipped) = Context::from_jsonl(&h.context.read(|c| c.to_jsonl()));
    assert!(skipped.is_empty());
    assert_eq!(restored.system_prompt(), Some("You are terse."));
    assert_eq!(restored.history(), hist.as_slice());
    // The file as the sink wrote it after the clear: the prompt comes first.
    assert!(h.lines.borrow().iter().any(|l| l == r#"{"role":"_system_prompt","content":"You are terse."}"#));
}

#[test]
fn a_store_that_refuses_a_write_stops_the_turn() {
    let mut h = Harness::new();
    plus(&h);
    let writes = Rc::new(Cell::new(0));
    let w2 = writes.clone();
    h.context.set_sink(Some(Box::new(move |_| {
        w2.set(w2.get() + 1);
        w2.get() < 4 // the 4th write (the step's assistant message) fails
    })));
    let model = Echo::new([call("c", "plus", json!({"a": 1})), "text: never".into()]);
    let o = h.turn(Some(&model), "x", never(), |_, _| {});
    assert!(matches!(o.result, Err(TurnError::ContextStore)));
    assert_eq!(&o.kinds()[o.kinds().len() - 2..], ["StepInterrupted", "TurnEnd"]);
    assert_eq!(o.kinds().iter().filter(|k| *k == "StepBegin").count(), 1, "no step ran unrecorded");
}

#[test]
fn a_thousand_turns_on_one_context_stay_consistent() {
    let mut h = Harness::new();
    plus(&h);
    let mut scripts = Vec::new();
    for i in 0..1000 {
        scripts.push(call(&format!("c{i}"), "plus", json!({"a": i, "b": 1})));
        scripts.push(format!("text: {}", i + 1));
    }
    let model = Echo::new(scripts);
    for i in 0..1000 {
        let o = h.turn(Some(&model), &format!("{i}+1?"), never(), |_, _| {});
        assert!(o.result.is_ok());
    }
    assert_eq!(h.history().len(), 4000);
    assert_eq!(h.context.read(|c| c.n_checkpoints()), 3000);
    let (restored, skipped) = Context::from_jsonl(&h.context.read(|c| c.to_jsonl()));
    assert!(skipped.is_empty());
    assert_eq!(restored.history().len(), 4000);
    // The model saw the whole history each time (it is never trimmed behind its back).
    assert_eq!(*model.seen.borrow().last().unwrap(), 3999);
}

mod run_soul {
    use super::*;
    use kosong_wasm::engine::soul::run::{
        run_soul, RunOutcome, RECORDER_CANCEL_GRACE_MS, SOUL_CANCEL_GRACE_MS, UI_LOOP_GRACE_MS,
    };

    fn env(pool: &LocalPool) -> FakeEnv {
        FakeEnv::new(pool.spawner())
    }

    #[test]
    fn the_wire_shuts_down_the_recording_is_awaited_and_the_ui_gets_its_grace() {
        let mut pool = LocalPool::new();
        let env = env(&pool);
        let wire = Wire::new();
        let side = wire.ui_side(true);
        let order = Rc::new(RefCell::new(Vec::new()));
        let (o1, o2, w2) = (order.clone(), order.clone(), wire.clone());
        let soul = async move {
            w2.send(WireMessage::TurnEnd);
            Ok::<(), String>(())
        };
        let ui = futures::future::pending::<()>(); // a UI loop that never ends on its own
        let out = pool.run_until(run_soul(
            &wire,
            soul,
            ui,
            never(),
            move || {
                o1.borrow_mut().push("recorded");
                async move { o2.borrow_mut().push("written") }
            },
            &env,
        ));
        assert_eq!(out, RunOutcome::Done);
        assert!(wire.is_shut());
        assert_eq!(*order.borrow(), ["recorded", "written"]);
        assert_eq!(*env.sleeps.borrow(), [UI_LOOP_GRACE_MS], "the UI loop was given its grace, then left");
        assert_eq!(side.take_ready().len(), 1);
    }

    #[test]
    fn a_soul_error_is_returned_and_a_cancel_refuses_approvals_and_waits_for_the_soul_a_moment() {
        let mut pool = LocalPool::new();
        let env = env(&pool);
        let wire = Wire::new();
        let out = pool.run_until(run_soul(&wire, async { Err::<(), _>("boom") }, async {}, never(), || async {}, &env));
        assert_eq!(out, RunOutcome::Failed("boom"));
        env.sleeps.borrow_mut().clear();

        let wire = Wire::new();
        let side = wire.ui_side(true);
        let asked = wire.request_approval(kosong_wasm::engine::soul::wire::ApprovalRequest {
            id: "r".into(),
            tool_call_id: "c".into(),
            sender: "agent".into(),
            action: "a".into(),
            description: String::new(),
            display: Vec::new(),
            before_start: false,
            agent_id: None,
            subagent_type: None,
        });
        let (tx, rx) = oneshot::channel::<()>();
        let soul = async move {
            let answer = asked.await; // refused when the run is cancelled
            assert_eq!(answer.response, ApprovalResponse::Reject);
            futures::future::pending::<Result<(), ()>>().await // then ignores the cancel
        };
        let _ = tx.send(());
        let out = pool.run_until(run_soul(
            &wire,
            soul,
            async {},
            async move {
                let _ = rx.await;
            },
            || async {},
            &env,
        ));
        assert_eq!(out, RunOutcome::Cancelled);
        assert_eq!(*env.sleeps.borrow(), [SOUL_CANCEL_GRACE_MS, RECORDER_CANCEL_GRACE_MS, UI_LOOP_GRACE_MS]);
        let kinds: Vec<String> = side.take_ready().iter().map(|m| m.kind().to_owned()).collect();
        assert_eq!(kinds, ["ApprovalRequest", "ApprovalResponse"]);
    }

    #[test]
    fn a_recording_that_never_finishes_cannot_outlive_the_cancel() {
        // The soul finished; the recorder's sink hangs; the cancel ends the wait.
        let mut pool = LocalPool::new();
        let first_env = env(&pool);
        let wire = Wire::new();
        let (tx, rx) = oneshot::channel::<()>();
        let recorded = move || {
            let _ = tx.send(()); // cancel once the run waits for the recording
            futures::future::pending::<()>()
        };
        let cancel = async move {
            let _ = rx.await;
        };
        let out = pool.run_until(run_soul(&wire, async { Ok::<(), ()>(()) }, async {}, cancel, recorded, &first_env));
        assert_eq!(out, RunOutcome::Cancelled);
        // Cancelled before it ended: the recording gets its grace, then the run ends anyway.
        let mut pool = LocalPool::new();
        let env = env(&pool);
        let wire = Wire::new();
        let out = pool.run_until(run_soul(
            &wire,
            futures::future::pending::<Result<(), ()>>(),
            async {},
            async {},
            futures::future::pending::<()>,
            &env,
        ));
        assert_eq!(out, RunOutcome::Cancelled);
        assert_eq!(*env.sleeps.borrow(), [SOUL_CANCEL_GRACE_MS, RECORDER_CANCEL_GRACE_MS, UI_LOOP_GRACE_MS]);
    }
}

#[test]
fn user_input_is_text_or_content_parts_and_nothing_else() {
    let read = |j: &str| serde_json::from_str::<UserInput>(j);
    assert_eq!(read(r#""hi""#).unwrap(), UserInput::Text("hi".into()));
    assert_eq!(
        read(r#"[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"u"}}]"#).unwrap(),
        UserInput::Parts(vec![
            kosong_wasm::engine::message::ContentPart::text("a"),
            kosong_wasm::engine::message::ContentPart::ImageUrl {
                image_url: kosong_wasm::engine::message::MediaUrl { url: "u".into(), id: None }
            }
        ])
    );
    for bad in ["null", "3", "{}", r#"[{"type":"nope"}]"#, r#"[1]"#] {
        assert!(read(bad).is_err(), "{bad}");
    }
}

// ---- structured output ----------------------------------------------------------------------

fn output_config(h: &mut Harness) {
    h.config.output =
        Some(kosong_wasm::engine::output::OutputFormat::from_json(r#"{"schema":{"type":"object"}}"#, "Agent").unwrap());
}

/// The preview a UI builds from the wire's `PartialOutput` edits, from one `StepBegin` on.
fn previews(msgs: &[WireMessage]) -> Vec<Value> {
    let mut out = Vec::new();
    for m in msgs {
        match m {
            WireMessage::StepBegin { .. } => out.push(Value::Null),
            WireMessage::PartialOutput(edits) => {
                if let Some(v) = out.last_mut() {
                    for e in edits.clone() {
                        kosong_wasm::engine::partial_json::apply_edit(v, e);
                    }
                }
            }
            _ => {}
        }
    }
    out
}

#[test]
fn a_structured_turn_calls_tools_then_answers_and_the_wire_carries_the_preview() {
    let mut h = Harness::new();
    plus(&h);
    output_config(&mut h);
    let model = Echo::new([
        call("c1", "plus", json!({"a": 1, "b": 2})),
        "text: {\"sum\": 3, \"wor\ntext: ds\": [\"th\ntext: ree\"]}".into(),
    ]);
    let o = h.turn(Some(&model), "1+2?", never(), |_, _| {});
    assert!(o.result.is_ok(), "{:?}", o.result.err());
    assert_eq!(*h.env.outputs.borrow(), [r#"{"sum": 3, "words": ["three"]}"#]);
    // A merged side: the step's text as one part, then its preview edits as one message.
    assert_eq!(
        o.kinds(),
        [
            "TurnBegin",
            "StepBegin",
            "ToolCall",
            "ToolResult",
            "StatusUpdate",
            "StepBegin",
            "ContentPart",
            "PartialOutput",
            "StatusUpdate",
            "TurnEnd"
        ]
    );
    let preview = previews(&o.merged);
    assert_eq!(preview.last().unwrap(), &json!({"sum": 3, "words": ["three"]}));
    // A raw side: each part, then the edits it made.
    let raw_kinds: Vec<&str> = o.raw.iter().map(|m| m.kind()).collect();
    assert_eq!(raw_kinds.iter().filter(|k| **k == "PartialOutput").count(), 3, "{raw_kinds:?}");
    assert_eq!(previews(&o.raw).last(), preview.last());
    // The context keeps the answer as text (kimi-cli reads it as any answer).
    let last = serde_json::to_value(h.history().last().unwrap()).unwrap();
    assert_eq!(last["content"], r#"{"sum": 3, "words": ["three"]}"#);
    // The model was asked for the output at every step.
    assert_eq!(model.seen.borrow().len(), 2);
}

#[test]
fn a_structured_turn_fails_on_a_broken_or_refused_answer_and_keeps_it_in_the_context() {
    for (answer, refuse, says) in [
        ("text: Sure! Here it is.", None, "not JSON"),
        ("text: {\"sum\": ", None, "not JSON"),
        ("text: {\"sum\": \"three\"}", Some("sum must be a number"), "sum must be a number"),
    ] {
        let mut h = Harness::new();
        output_config(&mut h);
        *h.env.refuse_output.borrow_mut() = refuse.map(str::to_owned);
        let model = Echo::new([answer.to_owned()]);
        let o = h.turn(Some(&model), "1+2?", never(), |_, _| {});
        let Err(TurnError::Seam(e)) = &o.result else { panic!("{answer}: {:?}", o.result.is_ok()) };
        assert_eq!(e.kind(), "malformed_output", "{answer}");
        assert!(e.message().contains(says), "{answer}: {e}");
        let text = answer.trim_start_matches("text: ").trim_end();
        assert!(
            matches!(e, kosong_wasm::engine::error::ChatProviderError::MalformedOutput { text: t, .. } if t == text),
            "{e:?}"
        );
        assert!(o.kinds().ends_with(&["StepInterrupted".to_owned(), "TurnEnd".to_owned()]), "{:?}", o.kinds());
        assert_eq!(serde_json::to_value(h.history().last().unwrap()).unwrap()["content"], text);
        // Not worth a retry: the model was asked once.
        assert_eq!(model.seen.borrow().len(), 1, "{answer}");
    }
}

#[test]
fn preview_edits_join_on_a_merged_side_and_stay_out_of_a_recording() {
    use kosong_wasm::engine::message::{ContentPart, StreamedMessagePart};
    use kosong_wasm::engine::partial_json::PartialJson;
    use kosong_wasm::engine::soul::wire::Recorder;
    let wire = Wire::new();
    let merged = wire.ui_side(true);
    let lines: Rc<RefCell<Vec<String>>> = Rc::default();
    let l2 = lines.clone();
    wire.set_recorder(Recorder::new(Box::new(move |l| l2.borrow_mut().push(l)), Box::new(|| 0.0)));
    let mut pj = PartialJson::new();
    let pieces = ["{\"a\": \"x", "yz", "\", \"b\": [1", ", 2]}"];
    for p in pieces {
        wire.send(WireMessage::Part(StreamedMessagePart::Content(ContentPart::text(p))));
        let edits = pj.feed(p);
        if !edits.is_empty() {
            wire.send(WireMessage::PartialOutput(edits));
        }
    }
    wire.send(WireMessage::TurnEnd);
    let got = merged.take_ready();
    let kinds: Vec<&str> = got.iter().map(|m| m.kind()).collect();
    assert_eq!(kinds, ["ContentPart", "PartialOutput", "TurnEnd"]);
    // The appends to "a" were joined into one edit.
    let WireMessage::PartialOutput(edits) = &got[1] else { unreachable!() };
    let appends = edits.iter().filter(|e| matches!(e, kosong_wasm::engine::partial_json::Edit::Append { .. })).count();
    assert_eq!(appends, 1, "{edits:?}");
    assert_eq!(previews(&[WireMessage::StepBegin { n: 1 }, got[1].clone()])[0], json!({"a": "xyz", "b": [1, 2]}));
    let recorded = lines.borrow();
    assert!(recorded.iter().all(|l| !l.contains("PartialOutput")), "{recorded:?}");
    assert!(recorded.iter().any(|l| l.contains("ContentPart")));
}

/// `turn_timeout_ms`: a turn still running at its limit is stopped as a cancel stops it — the
/// finished call keeps its result, the running one gets a "timed out" result (and is dropped:
/// the glue aborts its signal), the history is one consistent round — and fails with
/// `TimedOut`; a turn that ends in time is untouched by it.
#[test]
fn a_turn_past_its_time_limit_is_stopped_with_a_consistent_history() {
    let mut h = Harness::new();
    plus(&h);
    h.tools.add("hang", |_, _| futures::future::pending().boxed_local());
    h.config.turn_timeout_ms = Some(1500.0);
    let model = Echo::new([format!(
        "text: Working.\n{}\n{}",
        call("c1", "plus", json!({"a": 1, "b": 2})),
        call("c2", "hang", json!({}))
    )]);
    let o = h.turn(Some(&model), "go", never(), |_, _| {});
    assert!(matches!(o.result, Err(TurnError::TimedOut(ms)) if ms == 1500.0), "{:?}", o.result);
    let msg = o.result.as_ref().err().and_then(|e| e.runtime_error()).unwrap();
    assert_eq!(
        msg,
        ("TurnTimeoutError", "The turn ran past its time limit of 1500 ms (turnTimeoutMs) and was stopped.".into())
    );
    assert!(h.env.sleeps.borrow().contains(&1500.0), "the limit's timer: {:?}", h.env.sleeps.borrow());
    assert_eq!(*h.tools.dropped.borrow(), ["c2"], "the running call was stopped");
    let history = h.history();
    let roles: Vec<_> = history.iter().map(|m| format!("{:?}", m.role)).collect();
    assert_eq!(roles, ["User", "Assistant", "Tool", "Tool"]);
    assert_eq!(history[2].extract_text(""), "3");
    assert_eq!(
        history[3].extract_text(""),
        "<system>ERROR: The tool call was stopped: the turn ran past its time limit (1500 ms) before it finished.</system>"
    );
    let results: Vec<Value> = o.payloads("ToolResult");
    assert_eq!(results.len(), 2);
    assert_eq!(results[1]["return_value"]["display"][0]["text"], "Timed out");
    assert_eq!(o.kinds().last().map(String::as_str), Some("TurnEnd"));

    // In time: the limit changes nothing.
    let mut h = Harness::new();
    h.config.turn_timeout_ms = Some(1500.0);
    h.env.hold.set(true); // the limit's timer never fires
    let o = h.turn(Some(&Echo::new(["text: done"])), "go", never(), |_, _| {});
    assert!(o.result.is_ok(), "{:?}", o.result);
}

#[test]
fn a_server_that_repeats_call_ids_across_steps_gets_ids_unique_per_turn_and_each_call_its_own_result() {
    let mut h = Harness::new();
    plus(&h);
    // Ids start again each answer (`call_1`, …), as some servers send them.
    let model = Echo::new([
        call("call_1", "plus", json!({"a": 1, "b": 2})),
        call("call_1", "plus", json!({"a": 10, "b": 20})),
        format!("{}\n{}", call("call_1", "plus", json!({"a": 5, "b": 5})), call("call_1_2", "plus", json!({"a": 7}))),
        "text: done".into(),
    ]);
    let o = h.turn(Some(&model), "x", never(), |_, _| {});
    assert!(o.result.is_ok(), "{:?}", o.result);
    assert_eq!(h.tools.runs.borrow().len(), 4, "each call ran: none got another's result");
    let calls: Vec<String> =
        o.payloads("ToolCall").iter().map(|c| c["id"].as_str().unwrap_or_default().to_owned()).collect();
    let mut unique = calls.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), calls.len(), "one id a call on the wire: {calls:?}");
    assert_eq!(calls[0], "call_1", "a first use keeps the server's id");
    let results = o.payloads("ToolResult");
    let output =
        |id: &str| results.iter().find(|r| r["tool_call_id"] == id).map(|r| r["return_value"]["output"].clone());
    assert_eq!(output(&calls[0]), Some(json!("3")));
    assert_eq!(output(&calls[1]), Some(json!("30")));
    // The history: every call id once, each followed by its own result.
    let history = h.context.read(|c| c.history().to_vec());
    let ids: Vec<String> = history.iter().flat_map(|m| m.tool_calls.iter().flatten().map(|c| c.id.clone())).collect();
    assert_eq!(ids, calls);
    for id in &ids {
        assert_eq!(history.iter().filter(|m| m.tool_call_id.as_deref() == Some(id.as_str())).count(), 1, "{id}");
    }
}
