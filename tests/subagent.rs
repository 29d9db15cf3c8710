//! Sub-agents (`soul::agent::subagent`), natively: a parent turn whose tool runs a child turn on
//! the core's rule — its events on the parent's wire as kimi-cli's `SubagentEvent`, its approvals
//! asked and answered on the parent's wire, kimi-cli's summary continuation and failure words,
//! the parent's `StatusUpdate` counting what its sub-agents used, a cancel reaching the child.

mod support;

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use futures::future::LocalBoxFuture;
use futures::FutureExt;
use serde_json::{json, Value};

use kosong_wasm::engine::soul::agent::{
    add_usage, run_subagent, AgentConfig, Begin, SubagentRun, Turn, UserInput, SUMMARY_PROMPT,
};
use kosong_wasm::engine::soul::context::SharedContext;
use kosong_wasm::engine::soul::wire::{ApprovalResponse, SubagentOf, Wire, WireMessage};
use kosong_wasm::engine::toolset::{ToolOutput, ToolReturnValue};
use support::http::{model as http_model, ok, provider, End, FakeHttp};
use support::streams::{answer, one_call, KINDS};
use support::{call, never, Echo, FakeEnv, Harness, Tools};

/// What each child run saw: its prompt(s), its context afterwards, its tools' runs.
#[derive(Default)]
struct Children {
    contexts: RefCell<HashMap<String, SharedContext>>,
    prompts: RefCell<Vec<(String, usize)>>,
}

/// What a child's turn runs with, besides its model and environment.
struct Child<'a> {
    config: &'a AgentConfig,
    context: &'a SharedContext,
    tools: &'a Tools,
    wire: &'a Wire,
    approvals: &'a Rc<kosong_wasm::engine::soul::approval::Approvals>,
}

impl Child<'_> {
    /// The sub-agent call's result: the child's turn on `prompt` by the core's rule, never cancelled.
    async fn run<M>(
        &self,
        model: &M,
        env: &dyn kosong_wasm::engine::soul::agent::Env,
        run: &SubagentRun,
        prompt: &str,
    ) -> ToolReturnValue
    where
        M: kosong_wasm::engine::model::Model,
        M::Source: kosong_wasm::engine::generate::EventSource<Error = kosong_wasm::engine::error::ChatProviderError>,
    {
        let turn = Turn {
            config: self.config,
            context: self.context,
            model: Some(model),
            tools: self.tools,
            wire: self.wire,
            approvals: self.approvals,
            env,
        };
        let cancel = || -> LocalBoxFuture<'static, ()> { never().boxed_local() };
        run_subagent(&turn, run, Begin::Run(UserInput::Text(prompt.into())), cancel, |e| e.to_string()).await
    }
}

/// Adds a sub-agent tool `name` to the parent: a call `{prompt}` runs a child turn scripted by
/// `scripts[prompt]` with `child_tools`, as the glue does (a wire into the parent's, approvals on
/// the parent's, usage into the parent's total). The child's cancel is `cancel` (never, if none).
fn subagent_tool(
    h: &Harness,
    name: &'static str,
    scripts: HashMap<&'static str, Vec<String>>,
    child_tools: Tools,
    children: Rc<Children>,
    max_steps: u32,
) {
    let env: Rc<FakeEnv> = h.env.clone();
    let scripts = Rc::new(scripts);
    h.tools.add(name, move |c, approvals| {
        let args: Value = serde_json::from_str(c.function.arguments.as_deref().unwrap()).unwrap();
        let prompt = args["prompt"].as_str().unwrap().to_owned();
        let model = Echo::new(scripts.get(prompt.as_str()).cloned().unwrap_or_default());
        let agent_id = format!("a-{}", c.id);
        let run = SubagentRun {
            parent_tool_call_id: c.id.clone(),
            agent_id: agent_id.clone(),
            subagent_type: name.into(),
            resumed: false,
        };
        let total = env.subagent_usage.clone();
        let wire = Wire::new();
        run.forward(&wire, approvals.wire(), move |u| add_usage(&mut total.borrow_mut(), u));
        let who = SubagentOf { agent_id: run.agent_id.clone(), subagent_type: name.into() };
        let child_approvals = Rc::new(approvals.child(name.into(), who));
        *child_tools.approvals.borrow_mut() = Some(child_approvals.clone());
        let (tools, env, children) = (child_tools.clone(), env.clone(), children.clone());
        async move {
            let context = SharedContext::default();
            children.contexts.borrow_mut().insert(agent_id, context.clone());
            let config = AgentConfig { max_steps_per_turn: max_steps, ..AgentConfig::default() };
            let child =
                Child { config: &config, context: &context, tools: &tools, wire: &wire, approvals: &child_approvals };
            let rv = child.run(&model, &*env, &run, &prompt).await;
            children.prompts.borrow_mut().push((prompt, model.seen.borrow().len()));
            rv
        }
        .boxed_local()
    });
}

fn long(words: &str) -> String {
    std::iter::repeat_n(words, 30).collect::<Vec<_>>().join(" ")
}

fn payload(m: &WireMessage) -> Value {
    serde_json::to_value(m).unwrap()["payload"].clone()
}

#[test]
fn two_sub_agents_in_one_round_their_events_approvals_summary_and_usage_on_the_parent() {
    let mut h = Harness::new();
    let child_tools = Tools::default();
    let ran = Rc::new(RefCell::new(Vec::new()));
    let r2 = ran.clone();
    child_tools.add("rm", move |c, approvals| {
        let asked = approvals.request(&c.id, "delete file", "rm x", false).unwrap();
        let ran = r2.clone();
        async move {
            if !asked.await {
                return ToolReturnValue::error("refused", "", ToolOutput::Text(String::new()));
            }
            ran.borrow_mut().push("rm");
            ToolReturnValue::ok(ToolOutput::Text("deleted".into()), "", "")
        }
        .boxed_local()
    });
    let children = Rc::new(Children::default());
    let a_answer = long("finding");
    let scripts = HashMap::from([
        ("look", vec![format!("usage: input_other=100 output=10\ntext: {a_answer}")]),
        (
            "clean",
            vec![
                format!("usage: input_other=50 output=5\n{}", call("k1", "rm", json!({}))),
                "usage: input_other=60 output=2\ntext: Done.".into(),
                format!("usage: input_other=70 output=40\ntext: {}", long("cleaned")),
            ],
        ),
    ]);
    subagent_tool(&h, "explore", scripts, child_tools, children.clone(), 10);
    let parent = Echo::new([
        format!(
            "usage: input_other=10 output=3\n{}\n{}",
            call("c1", "explore", json!({"prompt": "look"})),
            call("c2", "explore", json!({"prompt": "clean"}))
        ),
        "usage: input_other=20 output=4\ntext: All done.".into(),
    ]);
    let o = h.turn(Some(&parent), "go", never(), |m, wire: &Wire| {
        if m.kind() == "ApprovalRequest" {
            let id = payload(m)["id"].as_str().unwrap().to_owned();
            wire.respond(&id, ApprovalResponse::Approve, "").unwrap();
        }
    });
    assert!(o.result.is_ok(), "{:?}", o.result);
    assert_eq!(*ran.borrow(), ["rm"], "the child's tool ran once, after the parent's UI approved it");

    // The child's approval was asked on the parent's wire, as it is (kimi-cli: not wrapped).
    let asked = o.payloads("ApprovalRequest");
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0]["sender"], "explore");
    assert_eq!(asked[0]["tool_call_id"], "k1");
    assert_eq!(
        (&asked[0]["agent_id"], &asked[0]["subagent_type"]),
        (&json!("a-c2"), &json!("explore")),
        "kimi-cli's fields say whose"
    );
    assert_eq!(o.payloads("ApprovalResponse").len(), 1);

    // Each child's turn is on the parent's wire as SubagentEvents, whole and in order.
    let events = o.payloads("SubagentEvent");
    for (call_id, kinds) in [
        ("c1", vec!["TurnBegin", "StepBegin", "ContentPart", "StatusUpdate", "TurnEnd"]),
        (
            "c2",
            vec![
                "TurnBegin",
                "StepBegin",
                "ToolCall",
                "StatusUpdate",
                "ToolResult",
                "StepBegin",
                "ContentPart",
                "StatusUpdate",
                "TurnEnd",
                // kimi-cli's summary continuation: "Done." is under 200 characters.
                "TurnBegin",
                "StepBegin",
                "ContentPart",
                "StatusUpdate",
                "TurnEnd",
            ],
        ),
    ] {
        let mine: Vec<&Value> = events.iter().filter(|e| e["parent_tool_call_id"] == call_id).collect();
        let seen: Vec<&str> = mine.iter().map(|e| e["event"]["type"].as_str().unwrap()).collect();
        assert_eq!(seen, kinds, "{call_id}");
        assert!(mine.iter().all(|e| e["agent_id"] == format!("a-{call_id}") && e["subagent_type"] == "explore"));
    }
    let c2: Vec<&Value> = events.iter().filter(|e| e["parent_tool_call_id"] == "c2").collect();
    assert_eq!(c2[9]["event"]["payload"]["user_input"], SUMMARY_PROMPT);

    // The results: kimi-cli's output lines, the summary being the last answer.
    let results = o.payloads("ToolResult");
    let text = |id: &str| {
        results.iter().find(|r| r["tool_call_id"] == id).unwrap()["return_value"]["output"].as_str().unwrap().to_owned()
    };
    assert_eq!(
        text("c1"),
        format!(
            "agent_id: a-c1\nresumed: false\nactual_subagent_type: explore\nstatus: completed\n\n[summary]\n{a_answer}"
        )
    );
    assert!(text("c2").ends_with(&format!("[summary]\n{}", long("cleaned"))), "{}", text("c2"));

    // The parent's last StatusUpdate counts what both children used; its own usage is its own.
    let status = o.payloads("StatusUpdate");
    assert!(status[0].get("subagent_token_usage").is_none() || status[0]["subagent_token_usage"]["input_other"] != 0);
    assert_eq!(
        status.last().unwrap()["subagent_token_usage"],
        json!({"input_other": 280, "output": 57, "input_cache_read": 0, "input_cache_creation": 0})
    );
    assert_eq!(status.last().unwrap()["token_usage"]["input_other"], 20);

    // Each child's context holds its own turn; the parent's holds the two results.
    let ctx = children.contexts.borrow();
    let roles = |id: &str| -> Vec<String> {
        ctx[id].read(|c| c.history().iter().map(|m| m.role.as_str().to_owned()).collect())
    };
    assert_eq!(roles("a-c1"), ["user", "assistant"]);
    assert_eq!(roles("a-c2"), ["user", "assistant", "tool", "assistant", "user", "assistant"]);
    let parent_roles: Vec<&str> = h.history().iter().map(|m| m.role.as_str()).collect();
    assert_eq!(parent_roles, ["user", "assistant", "tool", "tool", "assistant"]);
}

#[test]
fn failures_are_kimi_clis_error_results() {
    for (script, message, brief) in [
        (
            vec!["error: 500 the server broke".to_owned(); 3],
            "LLM API error (HTTP 500) when running agent: the server broke",
            "API error (500)",
        ),
        (vec!["error: connection reset".into(); 3], "LLM provider error when running agent: ", "LLM provider error"),
        (
            vec![call("x1", "missing", json!({})), call("x2", "missing", json!({"n": 2}))],
            "Max steps 1 reached when running agent. Please try splitting the task into smaller subtasks.",
            "Max steps reached",
        ),
        (
            vec!["text: short".into(), "error: 400 no".into()],
            "LLM API error (HTTP 400) when continuing the agent summary: no",
            "API error (400)",
        ),
    ] {
        let mut h = Harness::new();
        subagent_tool(&h, "explore", HashMap::from([("p", script)]), Tools::default(), Rc::default(), 1);
        let parent = Echo::new([call("c1", "explore", json!({"prompt": "p"})), "text: ok".into()]);
        let o = h.turn(Some(&parent), "go", never(), |_, _| {});
        assert!(o.result.is_ok());
        let rv = &o.payloads("ToolResult")[0]["return_value"];
        assert_eq!(rv["is_error"], true, "{rv}");
        assert!(rv["message"].as_str().unwrap().starts_with(message), "{rv}");
        assert_eq!(rv["display"][0]["text"], brief, "{rv}");
    }
}

#[test]
fn a_parent_cancelled_mid_sub_agent_ends_both_turns_and_their_histories_agree() {
    let mut h = Harness::new();
    let child_tools = Tools::default();
    let (tx, rx) = futures::channel::oneshot::channel::<()>();
    let tx = RefCell::new(Some(tx));
    // The child's tool never ends on its own: the cancel comes while it runs.
    child_tools.add("wait", move |_, _| {
        if let Some(tx) = tx.borrow_mut().take() {
            let _ = tx.send(());
        }
        futures::future::pending().boxed_local()
    });
    let children = Rc::new(Children::default());
    subagent_tool(
        &h,
        "explore",
        HashMap::from([("p", vec![call("w1", "wait", json!({}))])]),
        child_tools.clone(),
        children.clone(),
        10,
    );
    let parent = Echo::new([call("c1", "explore", json!({"prompt": "p"}))]);
    let o = h.turn(Some(&parent), "go", rx.map(|_| ()), |_, _| {});
    assert!(matches!(o.result, Err(kosong_wasm::engine::soul::agent::TurnError::Cancelled)));
    // The parent's call is answered "aborted"; the child's tool future was dropped (its signal
    // aborts in the glue) and nothing of either runs on.
    let results = o.payloads("ToolResult");
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0]["return_value"]["display"][0]["text"], "Aborted");
    assert_eq!(*child_tools.dropped.borrow(), ["w1"]);
    assert_eq!(o.kinds().last().unwrap(), "TurnEnd");
    let parent_roles: Vec<&str> = h.history().iter().map(|m| m.role.as_str()).collect();
    assert_eq!(parent_roles, ["user", "assistant", "tool"]);
}

#[test]
fn every_wire_format_as_parent_and_as_child() {
    for parent_kind in KINDS {
        for child_kind in KINDS {
            let mut h = Harness::new();
            let env = h.env.clone();
            let report = long(&format!("{child_kind}-report"));
            let child_http = FakeHttp::new(vec![ok(answer(child_kind, &report), End::Done)]);
            let http2 = child_http.clone();
            h.tools.add("explore", move |c, approvals| {
                let run = SubagentRun {
                    parent_tool_call_id: c.id.clone(),
                    agent_id: "a1".into(),
                    subagent_type: "explore".into(),
                    resumed: false,
                };
                let wire = Wire::new();
                run.forward(&wire, approvals.wire(), |_| {});
                let who = SubagentOf { agent_id: "a1".into(), subagent_type: "explore".into() };
                let child_approvals = Rc::new(approvals.child("explore".into(), who));
                let (env, http) = (env.clone(), http2.clone());
                async move {
                    let p = provider(child_kind, json!({}));
                    let model = http_model(&p, &http);
                    let (context, config, tools) = (SharedContext::default(), AgentConfig::default(), Tools::default());
                    *tools.approvals.borrow_mut() = Some(child_approvals.clone());
                    let child = Child {
                        config: &config,
                        context: &context,
                        tools: &tools,
                        wire: &wire,
                        approvals: &child_approvals,
                    };
                    child.run(&model, &*env, &run, "look").await
                }
                .boxed_local()
            });
            let parent_http = FakeHttp::new(vec![
                ok(one_call(parent_kind, "c1", "explore", r#"{"prompt":"look"}"#), End::Done),
                ok(answer(parent_kind, "done"), End::Done),
            ]);
            let p = provider(parent_kind, json!({}));
            let parent = http_model(&p, &parent_http);
            let o = h.turn(Some(&parent), "go", never(), |_, _| {});
            assert!(o.result.is_ok(), "{parent_kind}/{child_kind}: {:?}", o.result);
            let rv = &o.payloads("ToolResult")[0]["return_value"];
            assert!(
                rv["output"].as_str().unwrap().ends_with(&format!("[summary]\n{report}")),
                "{parent_kind}/{child_kind}: {rv}"
            );
            let text: String = o
                .payloads("SubagentEvent")
                .iter()
                .filter(|e| e["event"]["type"] == "ContentPart")
                .map(|e| e["event"]["payload"]["text"].as_str().unwrap_or_default().to_owned())
                .collect();
            assert_eq!(text, report, "{parent_kind}/{child_kind}: the child's text, once, on the parent's wire");
            assert_eq!(child_http.sent().len(), 1, "{parent_kind}/{child_kind}: one child request");
            // The parent's second request carries the sub-agent's result as the tool message.
            assert!(
                parent_http.bodies()[1].to_string().contains(&format!("{child_kind}-report")),
                "{parent_kind}/{child_kind}"
            );
        }
    }
}
