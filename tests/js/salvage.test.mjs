// A round that breaks keeps what already happened, over loopback HTTP with a server that destroys
// the socket: the tool ran once, its result is in the history and in the next request; a call cut
// off mid-input gets an error result and never runs; argument previews (a PartialJson fed from
// onMessagePart or the wire) agree with the kept round when the socket dies inside an argument
// string; an abort closes every call the wire showed;
// one turn at a time per Agent; a hanging recorder cannot outlive the signal; a kept ctx cannot
// reach a finished run.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import * as k from "kosong-wasm";
import { startMockServer, text, toolStart, toolArgs, finish, done, gate, sse, within } from "./mock-openai.mjs";

let server;
before(async () => (server = await startMockServer()));
after(async () => server.close());

const API_KEY = "sk-test-abcdef123456";
const openai = () => new k.OpenAIChatProvider({ model: "mock-model", apiKey: API_KEY, baseUrl: server.baseUrl });
const anthropic = () => new k.AnthropicProvider({ model: "claude-mock", apiKey: API_KEY, baseUrl: server.baseUrl });
const user = (t) => ({ role: "user", content: t });
/** A message's text (a lone text part may be given as a string). */
const textOf = (m) => (typeof m.content === "string" ? m.content : m.content.map((p) => p.text ?? "").join(""));
const noRetryWait = { initialMs: 0, maxMs: 0, jitterMs: 0 };

/** `send_email`, counting what it sent; `hold` keeps it running until its signal aborts. */
function mailer({ hold = false, onStart = () => {} } = {}) {
  const sent = [];
  const started = [];
  const tool = {
    name: "send_email",
    description: "Sends an email",
    parameters: { type: "object", properties: { to: { type: "string" } } },
    handler: async ({ to }, { signal }) => {
      started.push(to);
      onStart(to);
      if (hold) await new Promise((_, reject) => signal.addEventListener("abort", () => reject(signal.reason)));
      await new Promise((r) => setTimeout(r, 20)); // still running when the stream breaks
      sent.push(to);
      return `sent to ${to}`;
    },
  };
  return { sent, started, toolset: new k.SimpleToolset([tool]) };
}

// Text, one complete call, the start of a second call (each call's arguments in the pieces
// given); then the socket is destroyed.
const brokenOpenAI = (first = ['{"to":"a@b.c"}'], second = ['{"to":"x@']) => ({
  steps: [
    text("Sending."),
    ...[first, second].flatMap((pieces, i) => [toolStart(i, `call_${i + 1}`, "send_email", pieces[0]), ...pieces.slice(1).map((a) => toolArgs(i, a))]),
    { pause: 30 },
    { destroy: true },
  ],
});
const answerOpenAI = (t) => ({ steps: [text(t), finish("stop"), done()] });

const ev = (type, obj) => `event: ${type}\ndata: ${JSON.stringify({ type, ...obj })}\n\n`;
const messageStart = (id) => ev("message_start", { message: { id, type: "message", role: "assistant", content: [], model: "m", usage: { input_tokens: 5, output_tokens: 1 } } });
const toolBlock = (index, pieces) => [
  ev("content_block_start", { index, content_block: { type: "tool_use", id: `toolu_${index}`, name: "send_email", input: {} } }),
  ...pieces.map((a) => ev("content_block_delta", { index, delta: { type: "input_json_delta", partial_json: a } })),
];
const brokenAnthropic = (first = ['{"to":"a@b.c"}'], second = ['{"to":"x@']) => ({
  steps: [
    messageStart("msg_1"),
    ev("content_block_start", { index: 0, content_block: { type: "text", text: "" } }),
    ev("content_block_delta", { index: 0, delta: { type: "text_delta", text: "Sending." } }),
    ev("content_block_stop", { index: 0 }),
    ...toolBlock(1, first),
    ev("content_block_stop", { index: 1 }),
    ...toolBlock(2, second),
    { pause: 30 },
    { destroy: true },
  ],
});
const answerAnthropic = (t) => ({
  steps: [
    messageStart("msg_2"),
    ev("content_block_start", { index: 0, content_block: { type: "text", text: "" } }),
    ev("content_block_delta", { index: 0, delta: { type: "text_delta", text: t } }),
    ev("content_block_stop", { index: 0 }),
    ev("message_delta", { delta: { stop_reason: "end_turn" }, usage: { output_tokens: 2 } }),
    ev("message_stop", {}),
  ],
});

async function runTurn(agent, input, signal = new AbortController().signal, options = {}, merge = true) {
  const seen = [];
  let error;
  try {
    await k.runSoul(agent, input, async (wire) => {
      for await (const m of wire.uiSide({ merge })) seen.push(m);
    }, signal, options);
  } catch (e) {
    error = e;
  }
  return { seen, error, types: seen.map((m) => m.type) };
}

/** Every ToolCall the wire showed has one ToolResult. */
function assertEveryCallClosed(seen) {
  const calls = seen.filter((m) => m.type === "ToolCall").map((m) => m.payload.id).sort();
  const results = seen.filter((m) => m.type === "ToolResult").map((m) => m.payload.tool_call_id).sort();
  assert.deepEqual(results, calls);
}

for (const [name, provider, broken, answer, ids] of [
  ["OpenAI", openai, brokenOpenAI, answerOpenAI, ["call_1", "call_2"]],
  ["Anthropic", anthropic, brokenAnthropic, answerAnthropic, ["toolu_1", "toolu_2"]],
]) {
  test(`${name}: a socket destroyed after a call ran — the turn keeps the result, the cut-off call never runs, the turn goes on`, async () => {
    const before = server.requests.length;
    server.respond(broken());
    server.respond(answer("done"));
    const { sent, started, toolset } = mailer();
    const warnings = [];
    const agent = new k.Agent({ provider: provider(), systemPrompt: "", toolset, logger: { warn: (m, f) => warnings.push([m, f]) }, retryBackoff: noRetryWait });
    const r = await runTurn(agent, "mail them");
    assert.equal(r.error, undefined, String(r.error));
    assert.deepEqual(sent, ["a@b.c"], "the email went once");
    assert.deepEqual(started, ["a@b.c"], "the cut-off call never ran");
    const h = agent.context.history;
    assert.deepEqual(h.map((m) => m.role), ["user", "assistant", "tool", "tool", "assistant"]);
    assert.deepEqual(h[1].tool_calls.map((c) => c.id), ids);
    assert.match(JSON.stringify(h[2].content), /sent to a@b\.c/);
    assert.match(JSON.stringify(h[3].content), /broke off .*9 characters of it arrived/);
    assertEveryCallClosed(r.seen);
    assert.equal(r.types.filter((t) => t === "StepBegin").length, 2);
    assert.ok(!r.types.includes("StepRetry"));
    // The next request tells the model what happened.
    const second = JSON.stringify(server.requests[before + 1].body);
    assert.match(second, /sent to a@b\.c/);
    assert.match(second, /characters of it arrived/);
    // The warning names the tool, the id and the size — never the input.
    assert.equal(warnings.length, 1);
    assert.deepEqual(warnings[0][1], { tool: "send_email", id: ids[1], bytes: 9, chars: 9 });
    assert.ok(!JSON.stringify(warnings).includes("x@"));
  });

  test(`${name}: step() rejects with the provider error carrying the salvaged round, after the started tool finished`, async () => {
    server.respond(broken());
    const { sent, toolset } = mailer();
    const heard = [];
    const r = await within(k.step(provider(), "", toolset, [user("mail them")], { onToolResult: (x) => heard.push(x.tool_call_id) }));
    assert.ok(r.error instanceof k.APIConnectionError, String(r.error));
    assert.deepEqual(sent, ["a@b.c"], "settled before step() rejected");
    const s = r.error.salvaged;
    assert.deepEqual(s.toolCalls.map((c) => c.id), ids);
    // The arguments as they came: the whole first call's, the cut-off call's 9 characters.
    assert.deepEqual(s.toolCalls.map((c) => c.function.arguments), ['{"to":"a@b.c"}', '{"to":"x@']);
    assert.deepEqual(s.message.tool_calls, s.toolCalls);
    assert.equal(textOf(s.message), "Sending.");
    const results = await s.toolResults();
    assert.deepEqual(results.map((x) => [x.tool_call_id, x.return_value.is_error]), [[ids[0], false], [ids[1], true]]);
    assert.deepEqual(heard.sort(), [...ids].sort());
  });
}

// The same break, each call's arguments streamed in pieces and the second cut off inside a string.
const pieced = ['{"to":', '"a@b.c",', '"body":"he', 'llo"}'];
const cut = ['{"to', '":"x@', "ex"];
const piecedOpenAI = () => brokenOpenAI(pieced, cut);
const piecedAnthropic = () => brokenAnthropic(pieced, cut);

/**
 * Argument previews as a UI keeps them: a PartialJson per call, fed every piece `onMessagePart`
 * (or the wire) shows, and the text fed to it.
 */
function previewer() {
  const calls = new Map();
  let last;
  const feed = (id, piece) => {
    const c = calls.get(id);
    c.text += piece;
    c.preview.feed(piece);
  };
  return {
    calls,
    onPart(p) {
      if (p.type === "function") {
        calls.set((last = p.id), { preview: new k.PartialJson(), text: "" });
        if (p.function.arguments) feed(p.id, p.function.arguments);
      } else if (p.type === "tool_call_part" && p.arguments_part) feed(p.tool_call_id ?? last, p.arguments_part);
    },
  };
}

/** What a preview shows agrees with the call the round kept, and with what its tool was given. */
function assertPreviewsAgree(calls, kept, given) {
  assert.deepEqual([...calls.keys()], kept.map((c) => c.id));
  const [whole, cutOff] = kept.map((c) => calls.get(c.id));
  assert.equal(whole.text, kept[0].function.arguments);
  assert.equal(whole.text, pieced.join(""));
  assert.ok(whole.preview.done && !whole.preview.failed);
  assert.deepEqual(whole.preview.value, { to: "a@b.c", body: "hello" });
  assert.deepEqual(given, [whole.preview.value], "the tool got what the preview showed, once");
  // The cut-off call: the preview holds what arrived — a prefix of nothing the tool ever saw.
  assert.equal(cutOff.text, kept[1].function.arguments);
  assert.equal(cutOff.text, cut.join(""));
  assert.ok(!cutOff.preview.done && !cutOff.preview.failed);
  assert.deepEqual(cutOff.preview.value, { to: "x@ex" });
}

for (const [name, provider, broken, answer, ids] of [
  ["OpenAI", openai, piecedOpenAI, answerOpenAI, ["call_1", "call_2"]],
  ["Anthropic", anthropic, piecedAnthropic, answerAnthropic, ["toolu_1", "toolu_2"]],
]) {
  const recording = () => {
    const given = [];
    const toolset = new k.SimpleToolset([{ name: "send_email", description: "", parameters: { type: "object" }, handler: async (args) => (given.push(args), "sent") }]);
    return { given, toolset };
  };

  test(`${name}: a socket destroyed inside a cut-off call's argument string — previews fed from onMessagePart agree with the salvaged round and with what the tool got`, async () => {
    server.respond(broken());
    const { given, toolset } = recording();
    const ui = previewer();
    const r = await within(k.step(provider(), "", toolset, [user("mail them")], { onMessagePart: (p) => ui.onPart(p) }));
    assert.ok(r.error instanceof k.APIConnectionError, String(r.error));
    const s = r.error.salvaged;
    assert.deepEqual(s.toolCalls.map((c) => c.id), ids);
    assertPreviewsAgree(ui.calls, s.toolCalls, given);
    const results = await s.toolResults();
    assert.deepEqual(results.map((x) => [x.tool_call_id, x.return_value.is_error]), [[ids[0], false], [ids[1], true]]);
  });

  test(`${name}: the same break in a step no part hook hears (its decoder joins the pieces that came in one read) — the salvaged round holds each piece once, the whole call's tool got it once, the cut-off call never ran`, async () => {
    server.respond(broken());
    const { given, toolset } = recording();
    const r = await within(k.step(provider(), "", toolset, [user("mail them")]));
    assert.ok(r.error instanceof k.APIConnectionError, String(r.error));
    const s = r.error.salvaged;
    assert.deepEqual(s.toolCalls.map((c) => c.id), ids);
    assert.deepEqual(s.toolCalls.map((c) => c.function.arguments), [pieced.join(""), cut.join("")]);
    assert.deepEqual(s.message.tool_calls, s.toolCalls);
    assert.deepEqual(given, [{ to: "a@b.c", body: "hello" }]);
    const results = await s.toolResults();
    assert.deepEqual(results.map((x) => [x.tool_call_id, x.return_value.is_error]), [[ids[0], false], [ids[1], true]]);
    assert.match(JSON.stringify(results[1].return_value), new RegExp(`${cut.join("").length} characters of it arrived`));
  });

  test(`${name}: the same break in a turn — previews fed from the wire agree with the history, and the turn goes on`, async () => {
    server.respond(broken());
    server.respond(answer("done"));
    const { given, toolset } = recording();
    const ui = previewer();
    const agent = new k.Agent({ provider: provider(), systemPrompt: "", toolset, logger: { warn: () => {} }, retryBackoff: noRetryWait });
    const r = await runTurn(agent, "mail them", new AbortController().signal, {}, false);
    assert.equal(r.error, undefined, String(r.error));
    // The wire, unmerged, as a UI reads it: the parts up to the break feed the previews.
    const steps = r.seen.flatMap((m, i) => (m.type === "StepBegin" ? [i] : []));
    assert.equal(steps.length, 2);
    const upToBreak = r.seen.slice(steps[0], steps[1]);
    for (const m of upToBreak) if (m.type === "ToolCall" || m.type === "ToolCallPart") ui.onPart(m.payload);
    const h = agent.context.history;
    assert.deepEqual(h.map((m) => m.role), ["user", "assistant", "tool", "tool", "assistant"]);
    assertPreviewsAgree(ui.calls, h[1].tool_calls, given);
    assert.match(JSON.stringify(h[3].content), new RegExp(`broke off .*${cut.join("").length} characters of it arrived`));
    assertEveryCallClosed(r.seen);
  });
}

test("a break before any call started is retried as before; the failed attempt's text is void after the StepRetry", async () => {
  server.respond({ steps: [text("Half an ans"), { pause: 20 }, { destroy: true }] });
  server.respond(answerOpenAI("A whole answer."));
  const agent = new k.Agent({ provider: openai(), systemPrompt: "", retryBackoff: noRetryWait });
  const r = await runTurn(agent, "hi");
  assert.equal(r.error, undefined, String(r.error));
  assert.deepEqual(agent.context.history.map((m) => m.role), ["user", "assistant"]);
  assert.equal(textOf(agent.context.history[1]), "A whole answer.");
  const retry = r.types.indexOf("StepRetry");
  assert.ok(retry > r.types.indexOf("ContentPart"), r.types.join());
  // What a UI shows if it drops the parts since StepBegin at each StepRetry:
  let shown = "";
  for (const m of r.seen) {
    if (m.type === "StepBegin" || m.type === "StepRetry") shown = "";
    if (m.type === "ContentPart" && m.payload.type === "text") shown += m.payload.text;
  }
  assert.equal(shown, "A whole answer.");
});

test("HTTP 529 and Anthropic's overloaded_error mid-stream are retried like a 503", async () => {
  server.respond({ status: 529, body: { type: "error", error: { type: "overloaded_error", message: "Overloaded" } } });
  server.respond({ steps: [messageStart("m0"), ev("error", { error: { type: "overloaded_error", message: "Overloaded" } })] });
  server.respond(answerAnthropic("fine"));
  const agent = new k.Agent({ provider: anthropic(), systemPrompt: "", retryBackoff: noRetryWait });
  const r = await runTurn(agent, "hi");
  assert.equal(r.error, undefined, String(r.error));
  const retries = r.seen.filter((m) => m.type === "StepRetry").map((m) => m.payload.status_code);
  assert.deepEqual(retries, [529, 529]);
  assert.equal(textOf(agent.context.history[1]), "fine");
});

test("an abort mid-stream closes every call the wire showed, and the history holds the round", async () => {
  const g = gate();
  server.respond({ steps: [text("Sending."), toolStart(0, "c1", "send_email", '{"to":"a@b.c"}'), toolStart(1, "c2", "send_email", '{"to":"x@'), { mark: g.open }, { hang: true }] });
  const ctrl = new AbortController();
  // Stopped once the server has sent the second call's start (the mark) and the first call's
  // tool has begun: events, not a timer.
  let toolBegan;
  const began = new Promise((r) => (toolBegan = r));
  Promise.all([g.promise, began]).then(() => ctrl.abort(new Error("stop")));
  const { sent, started, toolset } = mailer({ hold: true, onStart: () => toolBegan() });
  const agent = new k.Agent({ provider: openai(), systemPrompt: "", toolset });
  const r = await within(runTurn(agent, "mail them", ctrl.signal));
  assert.ok(r.value.error instanceof k.RunCancelled, String(r.value.error));
  assert.deepEqual(started, ["a@b.c"]);
  assert.deepEqual(sent, []);
  assertEveryCallClosed(r.value.seen);
  const h = agent.context.history;
  assert.deepEqual(h.map((m) => m.role), ["user", "assistant", "tool", "tool"]);
  assert.equal(textOf(h[1]), "Sending.");
  assert.match(JSON.stringify(h[2].content), /aborted/);
  // The recording replays with a result for every call.
  const lines = [];
  server.respond(answerOpenAI("ok"));
  const agent2 = new k.Agent({ provider: openai(), systemPrompt: "", toolset });
  await runTurn(agent2, "x", new AbortController().signal, { recorder: new k.WireRecorder((l) => lines.push(l)) });
  assert.ok(k.readWireRecord(lines.join("\n")).length > 0);
});

test("an abort while salvage waits on a started tool aborts its signal and ends at once", async () => {
  server.respond(brokenOpenAI());
  let toolSignal;
  let started;
  const toolStarted = new Promise((r) => (started = r));
  const toolset = new k.SimpleToolset([{ name: "send_email", description: "", parameters: {}, handler: (_a, ctx) => { toolSignal = ctx.signal; started(); return new Promise(() => {}); } }]);
  const ctrl = new AbortController();
  const p = k.step(openai(), "", toolset, [user("x")], { signal: ctrl.signal });
  // Gated on events, not a timer: the tool has started and the server has cut the stream.
  const before = server.requests.length;
  await within(toolStarted);
  while (server.requests.length === before) await new Promise((r) => setImmediate(r));
  await within(server.requests.at(-1).closed);
  ctrl.abort(new Error("enough"));
  const r = await within(p);
  assert.equal(r.error?.message, "enough");
  assert.equal(toolSignal.aborted, true);
});

test("two runSoul calls on one Agent: the second is refused at once, the first is untouched", async () => {
  const agent = new k.Agent({ provider: new k.ScriptedProvider(["text: first answer", "text: third"]), systemPrompt: "" });
  const first = runTurn(agent, "first");
  const second = await within(runTurn(agent, "second"));
  assert.match(String(second.value.error?.message), /already running a turn/);
  assert.equal((await first).error, undefined);
  assert.deepEqual(agent.context.history.map((m) => [m.role, textOf(m)]), [["user", "first"], ["assistant", "first answer"]]);
  assert.equal((await runTurn(agent, "third")).error, undefined, "the next turn after the first ended is taken");
});

test("a recorder whose sink never settles cannot keep runSoul alive past its signal", async () => {
  const agent = new k.Agent({ provider: new k.ScriptedProvider(["text: hi"]), systemPrompt: "" });
  let wrote;
  const firstWrite = new Promise((r) => (wrote = r));
  const recorder = new k.WireRecorder(() => {
    wrote();
    return new Promise(() => {});
  });
  const ctrl = new AbortController();
  const p = runTurn(agent, "x", ctrl.signal, { recorder });
  await within(firstWrite); // the sink holds a write that never settles: then the user stops
  ctrl.abort();
  const r = await within(p);
  assert.ok(!r.pending, "runSoul ended");
  assert.ok(r.value.error instanceof k.RunCancelled, String(r.value.error));
  assert.match(String(recorder.error?.message), /had not finished writing/);
});

test("a tool that keeps its ctx: send after its run is ignored, requestApproval rejects, each saying why", async () => {
  let kept;
  const toolset = new k.SimpleToolset([{ name: "keep", description: "", parameters: {}, handler: (_a, ctx) => { kept = ctx; return "ok"; } }]);
  const agent = new k.Agent({ provider: new k.ScriptedProvider(['tool_call: {"id": "c1", "name": "keep", "arguments": "{}"}', "text: done"]), systemPrompt: "", toolset });
  assert.equal((await runTurn(agent, "x")).error, undefined);
  const warned = [];
  const warn = console.warn;
  console.warn = (m) => warned.push(m);
  try {
    kept.send({ type: "ContentPart", payload: { type: "text", text: "late" } });
  } finally {
    console.warn = warn;
  }
  assert.match(warned[0], /ctx\.send was called after the tool call c1 ended/);
  await assert.rejects(kept.requestApproval({ action: "a", description: "d" }), /ctx\.requestApproval was called after the tool call c1 ended/);
});
