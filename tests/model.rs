//! Whole turns from SSE bytes to the context, natively: the core's own providers (request
//! builders, decoders, the model) over a fake transport (`tests/support/http.rs`), for every wire
//! format — text at every split, a tool started mid-stream and its result sent back, retries
//! with `Retry-After`, errors that are not retried (cleaned of the key), an abort mid-stream, and
//! the transport rules (redirects, the API key's source).

mod support;

use std::cell::Cell;
use std::rc::Rc;

use serde_json::{json, Value};

use kosong_wasm::engine::error::ChatProviderError;
use kosong_wasm::engine::generate::Limits;
use kosong_wasm::engine::message::Role;
use kosong_wasm::engine::model::{Model, Provider, ProviderModel};
use kosong_wasm::engine::providers::Prompt;
use kosong_wasm::engine::soul::agent::TurnError;
use support::http::{model, ok, provider, status, End, FakeHttp, Reply};
use support::streams::{answer, one_call, resplit, KINDS};
use support::{never, yield_now, Harness};

fn roles(h: &Harness) -> Vec<Role> {
    h.history().iter().map(|m| m.role).collect()
}

#[test]
fn text_streams_from_bytes_into_the_context_for_every_format_at_every_split() {
    for kind in KINDS {
        for piece in [1, 7, 64, 1 << 20] {
            let p = provider(kind, json!({}));
            let http = FakeHttp::new(vec![ok(resplit(&answer(kind, "héllo wörld"), piece), End::Done)]);
            let mut h = Harness::new();
            let o = h.turn(Some(&model(&p, &http)), "hi", never(), |_, _| {});
            assert!(o.result.is_ok(), "{kind}/{piece}: {:?}", o.result);
            assert_eq!(
                o.kinds(),
                ["TurnBegin", "StepBegin", "ContentPart", "StatusUpdate", "TurnEnd"],
                "{kind}/{piece}"
            );
            assert_eq!(o.payloads("ContentPart")[0]["text"], "héllo wörld", "{kind}/{piece}");
            let history = h.history();
            assert_eq!(roles(&h), [Role::User, Role::Assistant], "{kind}/{piece}");
            assert_eq!(history[1].extract_text(""), "héllo wörld");
            // The request the core built carries the user's text.
            assert_eq!(http.sent().len(), 1);
            assert!(http.bodies()[0].to_string().contains("\"hi\""), "{kind}: {}", http.bodies()[0]);
        }
    }
}

#[test]
fn a_tool_starts_mid_stream_and_its_result_goes_back_in_the_next_request() {
    for kind in KINDS {
        let p = provider(kind, json!({}));
        let first = one_call(kind, "call_1", "plus", r#"{"a":2,"b":3}"#);
        let total = first.len();
        let http = FakeHttp::new(vec![ok(first, End::Done), ok(answer(kind, "It is 5."), End::Done)]);
        let mut h = Harness::new();
        let started_at: Rc<Cell<Option<usize>>> = Rc::default();
        let (at, seen) = (started_at.clone(), http.clone());
        h.tools.sync("plus", move |a| {
            at.set(Some(seen.delivered()));
            (a["a"].as_i64().unwrap_or(0) + a["b"].as_i64().unwrap_or(0)).to_string()
        });
        let o = h.turn(Some(&model(&p, &http)), "add 2 and 3", never(), |_, _| {});
        assert!(o.result.is_ok(), "{kind}: {:?}", o.result);
        let at = started_at.get().expect("the tool ran");
        assert!(at < total, "{kind}: the tool started after {at} of {total} chunks, before the stream ended");
        assert_eq!(roles(&h), [Role::User, Role::Assistant, Role::Tool, Role::Assistant], "{kind}: {:?}", h.history());
        assert_eq!(h.history()[1].tool_calls.as_ref().map(|c| c.len()), Some(1));
        assert_eq!(o.payloads("ToolResult")[0]["return_value"]["output"], "5", "{kind}");
        // The second request carries the call and its result, in the format's own shape.
        let second = http.bodies()[1].to_string();
        // (Gemini answers a call by its name, the others by its id.)
        let by = if kind == "gemini" { "\"plus\"" } else { "call_1" };
        assert!(second.contains(by) && second.contains("\"5\""), "{kind}: {second}");
        assert_eq!(h.history()[3].extract_text(""), "It is 5.");
        // The usage the stream reported became the context's token count.
        assert!(h.context.read(|c| c.token_count()) > 0, "{kind}");
    }
}

#[test]
fn a_429_with_retry_after_is_retried_after_the_servers_wait_with_the_same_request() {
    for kind in KINDS {
        let p = provider(kind, json!({}));
        let http = FakeHttp::new(vec![
            status(
                429,
                r#"{"error":{"message":"slow down","type":"rate_limit_error"}}"#,
                &[("retry-after", "2"), ("x-request-id", "req_1")],
            ),
            status(503, "upstream is down", &[]),
            ok(answer(kind, "fine"), End::Done),
        ]);
        let mut h = Harness::new();
        let o = h.turn(Some(&model(&p, &http)), "hi", never(), |_, _| {});
        assert!(o.result.is_ok(), "{kind}: {:?}", o.result);
        let retries = o.payloads("StepRetry");
        assert_eq!(retries.len(), 2, "{kind}");
        assert_eq!(retries[0]["status_code"], 429);
        assert_eq!(retries[0]["wait_s"], 2.0, "{kind}: the server's Retry-After");
        assert_eq!(retries[1]["status_code"], 503);
        assert_eq!(h.env.sleeps.borrow()[0], 2000.0);
        let bodies = http.bodies();
        assert_eq!(bodies.len(), 3);
        assert!(bodies[0] == bodies[1] && bodies[1] == bodies[2], "{kind}: a retry sends the same request");
        assert_eq!(roles(&h), [Role::User, Role::Assistant]);
    }
}

#[test]
fn an_error_not_worth_retrying_ends_the_turn_at_once_cleaned_of_the_key() {
    for kind in KINDS {
        let p = provider(kind, json!({}));
        let http = FakeHttp::new(vec![
            status(401, r#"{"error":{"message":"Incorrect API key provided: sk-test"}}"#, &[("request-id", "req_9")]),
            ok(answer(kind, "never"), End::Done),
        ]);
        let mut h = Harness::new();
        let o = h.turn(Some(&model(&p, &http)), "hi", never(), |_, _| {});
        match &o.result {
            Err(TurnError::Seam(ChatProviderError::Status { status: 401, message, request_id, .. })) => {
                let line =
                    message.strip_prefix("Error code: 401 - Incorrect API key provided: [redacted] (POST https://");
                assert!(line.is_some_and(|l| l.ends_with(')') && !l.contains('?')), "{kind}: {message}");
                assert!(!message.contains("sk-test"), "{kind}: {message}");
                assert_eq!(request_id.as_deref(), Some("req_9"));
            }
            other => panic!("{kind}: {other:?}"),
        }
        assert_eq!(http.left(), 1, "{kind}: not retried");
        assert_eq!(o.kinds().last().map(String::as_str), Some("TurnEnd"));
        assert!(o.kinds().contains(&"StepInterrupted".to_owned()));
    }
}

/// Clean, then cut: a key echoed at the end of a long plain-text body, cut in half at the error
/// body's cap, echoed base64-encoded (as a `Bearer`/`Basic` echo looks), or given only as a header
/// or the baseUrl's `?key=`, leaves no 8 characters of itself in the error.
#[test]
fn a_key_echoed_in_any_form_or_place_never_survives_in_the_error() {
    use base64_check::encode as b64;
    let key = "sk-live-0123456789abcdefghijklmnop";
    for kind in KINDS.iter().copied().chain(["kimi"]) {
        let bodies = [
            format!("{}{key}", "x".repeat(471)),
            format!("<html><pre>{}authorization: Bearer {key}</pre></html>", "y".repeat(600)),
            format!("echo {}", b64(&format!("Bearer {key}"))),
            format!("echo {}", b64(&format!("user:{key}"))),
            format!("{}{key}", "z".repeat((64 << 10) - 10)), // the key cut at the body's cap
        ];
        let options = [
            json!({"apiKey": key}),
            json!({"apiKey": "unused-other", "headers": {"x-api-key": key, "authorization": format!("Bearer {key}")}}),
            json!({"baseUrl": format!("http://127.0.0.1:9/v1?key={key}")}),
        ];
        for (i, body) in bodies.iter().enumerate() {
            for opts in &options {
                let p = provider(kind, opts.clone());
                let http = FakeHttp::new(vec![status(400, body, &[("content-type", "text/plain")])]);
                let mut h = Harness::new();
                let o = h.turn(Some(&model(&p, &http)), "hi", never(), |_, _| {});
                let Err(TurnError::Seam(e)) = &o.result else { panic!("{kind}: {:?}", o.result) };
                let text = format!("{e:?} {}", serde_json::to_string(&o.raw).unwrap());
                for w in key.as_bytes().windows(8) {
                    let w = std::str::from_utf8(w).unwrap();
                    assert!(
                        !text.contains(w),
                        "{kind} {opts}: {w:?} of the key survives in {}",
                        &text[text.len().saturating_sub(300)..]
                    );
                }
                if body.len() < 500 {
                    assert!(e.message().contains("[redacted]"), "{kind} {opts} body {i}: {}", e.message());
                }
            }
        }
    }
}

mod base64_check {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    pub fn encode(s: &str) -> String {
        let mut out = String::new();
        for c in s.as_bytes().chunks(3) {
            let v = (c[0] as u32) << 16 | (*c.get(1).unwrap_or(&0) as u32) << 8 | *c.get(2).unwrap_or(&0) as u32;
            for i in 0..4 {
                out.push(if i <= c.len() { A[(v >> (18 - 6 * i) & 63) as usize] as char } else { '=' });
            }
        }
        out
    }
}

#[test]
fn an_abort_mid_stream_keeps_the_text_so_far_and_closes_the_call_it_showed() {
    for kind in KINDS {
        let p = provider(kind, json!({}));
        // The call's input streams and the stream then stalls: the tool never started.
        let mut chunks = one_call(kind, "call_1", "plus", r#"{"a":1,"b":1}"#);
        let keep = match kind {
            "openai" => 2,
            "anthropic" => 5,
            "openai_responses" => 5,
            _ => 1,
        };
        chunks.truncate(keep);
        let http = FakeHttp::new(vec![ok(chunks, End::Stall)]);
        let mut h = Harness::new();
        support::plus(&h);
        let seen = http.clone();
        let cancel = async move {
            while seen.delivered() < keep {
                yield_now().await;
            }
            for _ in 0..10 {
                yield_now().await;
            }
        };
        let o = h.turn(Some(&model(&p, &http)), "hi", cancel, |_, _| {});
        assert!(matches!(o.result, Err(TurnError::Cancelled)), "{kind}: {:?}", o.result);
        assert!(h.tools.runs.borrow().is_empty(), "{kind}: a call whose input never closed does not run");
        let history = h.history();
        assert_eq!(history[1].extract_text(""), "Let me add.", "{kind}");
        let calls = history[1].tool_calls.clone().unwrap_or_default();
        let results: Vec<Value> = o.payloads("ToolResult");
        assert_eq!(calls.len(), results.len(), "{kind}: every call the wire showed has a result");
        assert_eq!(history.len(), 2 + calls.len(), "{kind}: {history:?}");
        assert_eq!(o.kinds().last().map(String::as_str), Some("TurnEnd"));
    }
}

#[test]
fn a_redirect_is_followed_within_the_origin_and_refused_beyond_it() {
    let p = provider("openai", json!({"baseUrl": "https://api.example.com/v1"}));
    let http = FakeHttp::new(vec![
        status(307, "", &[("location", "/v2/chat/completions")]),
        ok(answer("openai", "moved"), End::Done),
    ]);
    let mut h = Harness::new();
    let o = h.turn(Some(&model(&p, &http)), "hi", never(), |_, _| {});
    assert!(o.result.is_ok(), "{:?}", o.result);
    let urls: Vec<String> = http.sent().into_iter().map(|s| s.url).collect();
    assert_eq!(urls, ["https://api.example.com/v1/chat/completions", "https://api.example.com/v2/chat/completions"]);

    let http = FakeHttp::new(vec![
        status(302, "", &[("location", "https://evil.example.net/steal")]),
        ok(answer("openai", "x"), End::Done),
    ]);
    let mut h = Harness::new();
    let o = h.turn(Some(&model(&p, &http)), "hi", never(), |_, _| {});
    assert!(matches!(o.result, Err(TurnError::Seam(ChatProviderError::Redirect(_)))), "{:?}", o.result);
    assert_eq!(http.sent().len(), 1, "nothing went to the other host, and a redirect is not retried");
}

#[test]
fn the_api_key_comes_from_the_options_else_the_environment_else_nothing_is_sent() {
    let bare = Provider::from_json(&json!({"kind": "anthropic", "model": "m"}).to_string()).unwrap();
    let http = FakeHttp::new(vec![ok(answer("anthropic", "hi"), End::Done)]);
    let m = ProviderModel::new(&bare, http.clone(), Limits::default());
    let e = m.prepare(&Prompt::new("", &[], &[])).err().expect("no key");
    assert_eq!(e.kind(), "missing_key");
    assert!(!kosong_wasm::engine::soul::rules::is_retryable(&e), "not worth a retry");
    assert_eq!(
        e.message(),
        "AnthropicProvider: no API key: pass `apiKey` or set ANTHROPIC_API_KEY (or a `baseUrl` of a server that needs none)"
    );
    assert!(http.sent().is_empty());

    http.set_env("ANTHROPIC_API_KEY", "sk-ant-from-env");
    let mut h = Harness::new();
    let o = h.turn(Some(&m), "hi", never(), |_, _| {});
    assert!(o.result.is_ok(), "{:?}", o.result);
    let sent = &http.sent()[0];
    assert!(sent.headers.iter().any(|(k, v)| k == "x-api-key" && v == "sk-ant-from-env"), "{:?}", sent.headers);

    // A custom baseUrl may need no key: nothing is read from the environment.
    let local =
        Provider::from_json(&json!({"kind": "openai", "model": "m", "baseUrl": "http://127.0.0.1:9/v1"}).to_string())
            .unwrap();
    let http = FakeHttp::new(vec![ok(answer("openai", "hi"), End::Done)]);
    http.set_env("OPENAI_API_KEY", "sk-should-not-leave");
    let mut h = Harness::new();
    let o = h.turn(Some(&model(&local, &http)), "hi", never(), |_, _| {});
    assert!(o.result.is_ok(), "{:?}", o.result);
    assert!(!format!("{:?}", http.sent()[0].headers).contains("sk-should-not-leave"));
}

#[test]
fn a_scripted_provider_is_used_up_once_and_says_so() {
    let p = Provider::scripted(["text: one"]);
    let first = p.prepare::<ChatProviderError>(|_| None, &Prompt::new("", &[], &[]));
    assert!(first.is_ok());
    let second = p.prepare::<ChatProviderError>(|_| None, &Prompt::new("", &[], &[])).err().expect("used up");
    assert_eq!(second.message(), "ScriptedProvider exhausted at call 2.");
    assert_eq!(p.model_name(), "scripted_echo");
}

#[test]
fn a_script_served_as_chat_completions_decodes_to_the_same_answer() {
    use kosong_wasm::engine::providers::echo::parse_echo_script;
    let script = "id: chatcmpl-7\ntext: Hel\ntext: lo\nthink: hm\ntool_call: {\"id\": \"c1\", \"name\": \"plus\", \"arguments\": \"{\\\"a\\\":\"}\ntool_call_part: 1}\nusage: input_other=3 input_cache_read=4 output=5";
    let sse = parse_echo_script(script).unwrap().to_chat_sse();
    let p = provider("openai", json!({}));
    let http = FakeHttp::new(vec![ok(resplit(&[sse], 5), End::Done), ok(answer("openai", "done"), End::Done)]);
    let mut h = Harness::new();
    support::plus(&h);
    let o = h.turn(Some(&model(&p, &http)), "hi", never(), |_, _| {});
    assert!(o.result.is_ok(), "{:?}", o.result);
    let m = &h.history()[1];
    assert_eq!(m.extract_text(""), "Hello");
    let calls = m.tool_calls.clone().unwrap();
    assert_eq!((calls[0].id.as_str(), calls[0].function.arguments.as_deref()), ("c1", Some("{\"a\":1}")));
    let status = &o.payloads("StatusUpdate")[0];
    assert_eq!(status["message_id"], "chatcmpl-7");
    assert_eq!(
        status["token_usage"],
        json!({"input_other": 3, "output": 5, "input_cache_read": 4, "input_cache_creation": 0})
    );
}

/// A call id the model repeats from an earlier step, cancelled mid-stream in the later step: the
/// wire and the history both close the later call with an aborted result (the earlier step keeps
/// its own), for every wire format that shows an open call.
#[test]
fn a_repeated_call_id_cancelled_mid_step_is_closed_on_the_wire_and_in_the_history_alike() {
    for kind in ["openai", "anthropic", "openai_responses"] {
        let p = provider(kind, json!({}));
        let mut second = one_call(kind, "c1", "plus", r#"{"a":1,"b":2}"#);
        // Up to the call's start: the stream then stalls with the call open.
        let start = second.iter().position(|c| c.contains("\"c1\"")).unwrap();
        second.truncate(start + 1);
        let http = FakeHttp::new(vec![
            ok(one_call(kind, "c1", "plus", r#"{"a":1,"b":1}"#), End::Done),
            ok(second, End::Stall),
        ]);
        let mut h = Harness::new();
        support::plus(&h);
        let h2 = http.clone();
        let cancel = async move {
            while h2.sent().len() < 2 {
                yield_now().await;
            }
            for _ in 0..50 {
                yield_now().await;
            }
        };
        let o = h.turn(Some(&model(&p, &http)), "add", cancel, |_, _| {});
        assert!(matches!(o.result, Err(TurnError::Cancelled)), "{kind}: {:?}", o.result);
        let calls = o.raw.iter().filter(|m| m.kind() == "ToolCall").count();
        let results: Vec<Value> = o.payloads("ToolResult");
        assert_eq!(calls, 2, "{kind}: the call shown in both steps");
        assert_eq!(results.len(), 2, "{kind}: each showing has its result on the wire: {:?}", o.kinds());
        assert!(results[1]["return_value"]["message"].as_str().unwrap().contains("aborted"), "{kind}: {results:?}");
        let history = h.history();
        let tools: Vec<_> = history.iter().filter(|m| m.role == Role::Tool).collect();
        assert_eq!(tools.len(), 2, "{kind}: two rounds, one result each");
    }
}

/// Chat Completions: `c0` arrives whole (`{"a":1}`), `c1` begins (so `c0` is handed on and runs
/// with `{"a":1}`), then a fragment for `c0` comes late. The history, the wire and the next request
/// hold the arguments `c0` ran with — never `{"a":1},"b":2}` — and the late fragment is dropped.
#[test]
fn a_fragment_for_a_call_already_handed_on_is_dropped_so_the_history_holds_what_ran() {
    use support::streams::data;
    let chunk = |i: u32, id: Option<&str>, args: &str| {
        let mut call = json!({"index": i, "function": {"arguments": args}});
        if let Some(id) = id {
            call["id"] = json!(id);
            call["type"] = json!("function");
            call["function"]["name"] = json!("plus");
        }
        data(json!({"id": "r", "choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}))
    };
    let first = vec![
        chunk(0, Some("c0"), r#"{"a":1}"#),
        chunk(1, Some("c1"), r#"{"a":2,"b":2}"#),
        chunk(0, None, r#","b":2}"#),
        data(json!({"id": "r", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})),
        "data: [DONE]\n\n".to_owned(),
    ];
    let p = provider("openai", json!({}));
    let http = FakeHttp::new(vec![ok(first, End::Done), ok(answer("openai", "done"), End::Done)]);
    let mut h = Harness::new();
    let seen = Rc::new(std::cell::RefCell::new(Vec::new()));
    let s2 = seen.clone();
    h.tools.sync("plus", move |a| {
        s2.borrow_mut().push(a.to_string());
        (a["a"].as_i64().unwrap_or(0) + a["b"].as_i64().unwrap_or(0)).to_string()
    });
    let o = h.turn(Some(&model(&p, &http)), "add", never(), |_, _| {});
    assert!(o.result.is_ok(), "{:?}", o.result);
    assert_eq!(*seen.borrow(), [r#"{"a":1}"#, r#"{"a":2,"b":2}"#], "c0 ran with what it had");
    let calls = h.history()[1].tool_calls.clone().unwrap();
    assert_eq!(calls[0].function.arguments.as_deref(), Some(r#"{"a":1}"#), "the history holds what ran");
    let on_wire: Vec<String> =
        o.payloads("ToolCall").iter().map(|c| c["function"]["arguments"].as_str().unwrap_or("").to_owned()).collect();
    assert_eq!(on_wire[0], r#"{"a":1}"#);
    let late = o
        .raw
        .iter()
        .map(|m| serde_json::to_value(m).unwrap())
        .filter(|v| v["payload"]["arguments_part"] == r#","b":2}"#)
        .count();
    assert_eq!(late, 0, "the late fragment never reached the wire");
    let next = &http.bodies()[1];
    assert_eq!(next["messages"][1]["tool_calls"][0]["function"]["arguments"], r#"{"a":1}"#);
}

#[test]
fn a_status_error_names_the_origin_and_path_it_came_from_never_the_query_or_a_key() {
    for kind in KINDS {
        let p = provider(kind, json!({"baseUrl": "https://proxy.example:8443/llm/v1"}));
        let http = FakeHttp::new(vec![status(404, r#"{"error":{"message":"not found"}}"#, &[])]);
        let m = model(&p, &http);
        let err = futures::executor::block_on(m.open(m.prepare(&Prompt::new("", &[], &[])).unwrap())).err();
        let sent = http.sent()[0].url.clone();
        let path = sent.split('?').next().unwrap().trim_start_matches("https://proxy.example:8443");
        match err {
            Some(ChatProviderError::Status { status: 404, message, .. }) => {
                assert_eq!(
                    message,
                    format!("Error code: 404 - not found (POST https://proxy.example:8443{path})"),
                    "{kind}"
                );
                assert!(!message.contains("sk-test") && !message.contains('?'), "{kind}: {message}");
            }
            other => panic!("{kind}: {other:?}"),
        }
    }
}

#[test]
fn a_page_where_a_stream_belongs_is_said_to_be_one_with_how_it_began() {
    for kind in KINDS {
        let p = provider(kind, json!({"baseUrl": "https://portal.example/v1"}));
        for (ct, body, begins) in [
            (
                "text/html; charset=utf-8",
                "<!doctype html>\n<html>\n  <title>Sign in</title> sk-test",
                "<!doctype html> <html> <title>Sign in</title> [redacted]",
            ),
            ("application/json", r#"{"id":"x","choices":[]}"#, r#"{"id":"x","choices":[]}"#),
        ] {
            let page = Reply {
                status: 200,
                headers: vec![("content-type".into(), ct.into())],
                chunks: vec![body.into()],
                end: End::Done,
            };
            let http = FakeHttp::new(vec![page]);
            let m = model(&p, &http);
            let err = futures::executor::block_on(m.open(m.prepare(&Prompt::new("", &[], &[])).unwrap())).err();
            let essence = ct.split(';').next().unwrap();
            match err {
                Some(ChatProviderError::Failed { message, .. }) => {
                    assert!(
                        message.starts_with(&format!(
                            "the server answered {essence}, not an event stream (POST https://portal.example/v1/"
                        )),
                        "{kind}: {message}"
                    );
                    assert!(message.ends_with(&format!("; it began: {begins}")), "{kind}: {message}");
                }
                other => panic!("{kind} {ct}: {other:?}"),
            }
        }
    }
}
