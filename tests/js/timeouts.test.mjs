// Tool time limits: a tool's own `timeoutMs`, and `toolTimeoutMs` as the default of a step or an
// agent. A call past its limit has its signal aborted with a TimeoutError and gets the timed-out
// result; the wire, the history and what the tools did agree. The hanging tools never settle on
// their own, so nothing here depends on how fast the machine is.
import { test, before, after } from "node:test";
import { startMockServer, gate, text, toolStart, toolArgs, finish, done } from "./mock-openai.mjs";
import assert from "node:assert/strict";
import * as k from "kosong-wasm";

const call = (id, name, args = {}) => `tool_call: ${JSON.stringify({ id, name, arguments: JSON.stringify(args) })}`;
const user = [{ role: "user", content: "go" }];

/** A tool that never settles unless its signal aborts; it notes the abort's reason. */
function hanging(name, seen, extra = {}) {
  return {
    name,
    ...extra,
    handler: (_args, { signal }) =>
      new Promise((_, reject) => {
        signal.addEventListener("abort", () => {
          seen.push({ name, reason: signal.reason?.name });
          reject(signal.reason);
        });
      }),
  };
}

test("a tool's own timeoutMs: its signal aborts with a TimeoutError, its result says so, the others are untouched", async () => {
  const seen = [];
  const tools = new k.SimpleToolset([hanging("hang", seen, { timeoutMs: 40 }), { name: "quick", handler: () => "fine" }]);
  assert.equal(tools.tools.find((t) => t.name === "hang").timeoutMs, 40);
  const r = await k.step(new k.ScriptedProvider([[call("c1", "hang"), call("c2", "quick")].join("\n")]), "", tools, user);
  const [hang, quick] = await r.toolResults();
  assert.deepEqual(seen, [{ name: "hang", reason: "TimeoutError" }]);
  assert.equal(hang.tool_call_id, "c1");
  assert.equal(hang.return_value.is_error, true);
  assert.equal(hang.return_value.message, "Tool `hang` timed out after 40 ms and was stopped.");
  assert.deepEqual(hang.return_value.display, [{ type: "brief", text: "Timed out" }]);
  assert.equal(quick.return_value.output, "fine");
});

test("toolTimeoutMs is the default; a tool's own limit wins over it", async () => {
  const seen = [];
  const slowButAllowed = { name: "slow", timeoutMs: 60_000, handler: () => new Promise((r) => setTimeout(() => r("made it"), 80)) };
  const tools = new k.SimpleToolset([hanging("hang", seen), slowButAllowed]);
  const r = await k.step(new k.ScriptedProvider([[call("c1", "hang"), call("c2", "slow")].join("\n")]), "", tools, user, { toolTimeoutMs: 30 });
  const [hang, slow] = await r.toolResults();
  assert.match(hang.return_value.message, /timed out after 30 ms/);
  assert.equal(slow.return_value.output, "made it", "its own 60 s limit, not the step's 30 ms");
  assert.deepEqual(seen, [{ name: "hang", reason: "TimeoutError" }]);
});

test("a toolset of its own declares timeoutMs in its tools; the step's signal still reaches the tool", async () => {
  const seen = [];
  const custom = {
    tools: [{ name: "hang", description: "", parameters: { type: "object" }, timeoutMs: 25 }],
    handle: (c, { signal }) =>
      new Promise((resolve) => signal.addEventListener("abort", () => {
        seen.push(signal.reason?.name);
        resolve({ tool_call_id: c.id, return_value: k.toolError({ message: "stopped" }) });
      })),
  };
  const r = await k.step(new k.ScriptedProvider([call("c1", "hang")]), "", custom, user);
  const [res] = await r.toolResults();
  assert.equal(res.return_value.message, "Tool `hang` timed out after 25 ms and was stopped.");
  assert.deepEqual(seen, ["TimeoutError"]);

  // Without a limit of its own, a call still follows the step's signal when the caller aborts.
  const ac = new AbortController();
  const reasons = [];
  const tools = new k.SimpleToolset([hanging("hang", reasons, { timeoutMs: 60_000 })]);
  const stepping = k.step(new k.ScriptedProvider([call("c1", "hang")]), "", tools, user, { signal: ac.signal });
  const r2 = await stepping;
  const results = r2.toolResults();
  ac.abort(new Error("user stop"));
  await results.then(() => {}, () => {});
  assert.equal(reasons.length, 1, "the tool was told to stop when the step's signal aborted");
  assert.notEqual(reasons[0].reason, "TimeoutError");
});

test("an agent's toolTimeoutMs: the timed-out call is a result like any other and the turn goes on; wire and history agree", async () => {
  const seen = [];
  const provider = new k.ScriptedProvider([call("c1", "hang"), "text: The lookup took too long."]);
  const agent = new k.Agent({ provider, toolset: new k.SimpleToolset([hanging("hang", seen)]), toolTimeoutMs: 30 });
  const wire = [];
  await k.runSoul(agent, "look it up", async (w) => { for await (const m of w.uiSide({ merge: true })) wire.push(m); }, new AbortController().signal);
  const result = wire.find((m) => m.type === "ToolResult").payload;
  assert.equal(result.return_value.message, "Tool `hang` timed out after 30 ms and was stopped.");
  assert.deepEqual(seen, [{ name: "hang", reason: "TimeoutError" }]);
  const history = agent.context.history;
  assert.deepEqual(history.map((m) => m.role), ["user", "assistant", "tool", "assistant"]);
  assert.match(JSON.stringify(history[2].content), /timed out after 30 ms/);
  assert.match(JSON.stringify(history[3].content), /took too long/);
  assert.equal(wire.at(-1).type, "TurnEnd");
});

test("a time limit that is not a positive number is refused where it is given", async () => {
  assert.throws(() => new k.SimpleToolset([{ name: "t", handler: () => "", timeoutMs: 0 }]), (e) => e instanceof TypeError && /timeoutMs must be a positive number/.test(e.message));
  assert.throws(() => new k.SimpleToolset([{ name: "t", handler: () => "", timeoutMs: "5s" }]), TypeError);
  const tools = new k.SimpleToolset();
  assert.throws(() => tools.add({ name: "t", handler: () => "", timeoutMs: -1 }), TypeError);
  assert.equal(tools.tools.length, 0, "a refused tool is not half-added");
  await assert.rejects(k.step(new k.ScriptedProvider(["text: hi"]), "", tools, user, { toolTimeoutMs: Infinity }), (e) => e instanceof TypeError && /toolTimeoutMs/.test(e.message));
  assert.throws(() => new k.Agent({ provider: new k.ScriptedProvider([]), toolTimeoutMs: "1s" }), (e) => e instanceof TypeError && /toolTimeoutMs/.test(e.message));
});

// ---- the model call's own limits: until the first chunk, and for the whole call -------------


let server;
before(async () => (server = await startMockServer()));
after(async () => server.close());

test("firstChunkTimeoutMs: a server that answers nothing in time is a timeout error naming the limit; the request is closed", async () => {
  const held = gate();
  server.respond({ steps: [{ wait: held.promise, maxWait: 20_000 }, text("too late"), finish("stop"), done()] });
  const provider = new k.OpenAIChatProvider({ model: "m", apiKey: "sk-1", baseUrl: server.baseUrl, firstChunkTimeoutMs: 80 });
  try {
    const e = await k.generate(provider, "", [], user).then(() => null, (x) => x);
    assert.ok(e instanceof k.APITimeoutError && e.kind === "timeout", String(e));
    assert.match(e.message, /no first chunk of the answer within 80 ms \(firstChunkTimeoutMs\)/);
  } finally {
    held.open();
  }
});

test("stepTimeoutMs: a stream that keeps trickling past the limit is cut and is a timeout; a quick one is untouched", async () => {
  const trickle = [];
  for (let i = 0; i < 200; i++) trickle.push(text("x"), { pause: 20 });
  server.respond({ steps: [...trickle, finish("stop"), done()] });
  const provider = new k.OpenAIChatProvider({ model: "m", apiKey: "sk-1", baseUrl: server.baseUrl, stepTimeoutMs: 250, timeoutMs: 5000 });
  const e = await k.generate(provider, "", [], user).then(() => null, (x) => x);
  assert.ok(e instanceof k.APITimeoutError, String(e));
  assert.match(e.message, /the model call ran past 250 ms \(stepTimeoutMs\)/);
  server.respond({ steps: [text("quick"), finish("stop"), done()] });
  const r = await k.generate(provider, "", [], user);
  assert.match(JSON.stringify(r.message.content), /quick/);
});

test("in an agent turn a step past stepTimeoutMs is retried as a step, and the turn ends with the retry's answer", async () => {
  const trickle = [];
  for (let i = 0; i < 200; i++) trickle.push(text("y"), { pause: 20 });
  server.respond({ steps: [...trickle, finish("stop"), done()] });
  server.respond({ steps: [text("second try"), finish("stop"), done()] });
  const provider = new k.OpenAIChatProvider({ model: "m", apiKey: "sk-1", baseUrl: server.baseUrl, stepTimeoutMs: 250 });
  const agent = new k.Agent({ provider, retryBackoff: { initialMs: 1, maxMs: 1, jitterMs: 0 } });
  const wire = [];
  await k.runSoul(agent, "hi", async (w) => { for await (const m of w.uiSide({ merge: true })) wire.push(m); }, new AbortController().signal);
  const retries = wire.filter((m) => m.type === "StepRetry");
  assert.equal(retries.length, 1);
  assert.equal(retries[0].payload.error_type, "APITimeoutError");
  assert.deepEqual(agent.context.history.map((m) => m.role), ["user", "assistant"]);
  assert.match(JSON.stringify(agent.context.history[1].content), /second try/);
});

test("the model call's limits must be positive numbers", () => {
  assert.throws(() => new k.OpenAIChatProvider({ model: "m", stepTimeoutMs: 0 }), (e) => e instanceof TypeError && /stepTimeoutMs/.test(e.message));
  assert.throws(() => new k.AnthropicProvider({ model: "m", firstChunkTimeoutMs: "1s" }), (e) => e instanceof TypeError && /firstChunkTimeoutMs/.test(e.message));
  assert.throws(() => new k.OpenAIChatProvider({ model: "m", stepTimeoutMS: 5 }), /did you mean `stepTimeoutMs`/);
});

test("a step cut by stepTimeoutMs after a call was handed on: the round is kept — the started tool ran once, the cut-off call did not — and wire, history and tools agree", async () => {
  const trickle = [toolStart(0, "c1", "note", '{"text":"a"}'), toolStart(1, "c2", "note", "")];
  for (let i = 0; i < 200; i++) trickle.push(toolArgs(1, " "), { pause: 20 });
  server.respond({ steps: trickle });
  server.respond({ steps: [text("Noted one."), finish("stop"), done()] });
  const ran = [];
  const tools = new k.SimpleToolset([{ name: "note", parameters: { type: "object", properties: { text: { type: "string" } } }, handler: ({ text: t }, { toolCallId }) => (ran.push(toolCallId), `noted ${t}`) }]);
  const provider = new k.OpenAIChatProvider({ model: "m", apiKey: "sk-1", baseUrl: server.baseUrl, stepTimeoutMs: 300 });
  const agent = new k.Agent({ provider, toolset: tools, retryBackoff: { initialMs: 1, maxMs: 1, jitterMs: 0 } });
  const wire = [];
  await k.runSoul(agent, "note a", async (w) => { for await (const m of w.uiSide({ merge: true })) wire.push(m); }, new AbortController().signal);
  assert.deepEqual(ran, ["c1"], "the started tool ran once; the cut-off call never ran");
  const results = wire.filter((m) => m.type === "ToolResult").map((m) => [m.payload.tool_call_id, m.payload.return_value.is_error]);
  assert.deepEqual(results, [["c1", false], ["c2", true]]);
  const history = agent.context.history;
  assert.deepEqual(history.map((m) => m.role), ["user", "assistant", "tool", "tool", "assistant"]);
  assert.deepEqual(history[1].tool_calls.map((c) => c.id), ["c1", "c2"]);
  assert.deepEqual(history.filter((m) => m.role === "tool").map((m) => m.tool_call_id), ["c1", "c2"]);
  assert.match(JSON.stringify(history[2].content), /noted a/);
  assert.match(JSON.stringify(history[4].content), /Noted one/);
});

test("turnTimeoutMs: a turn past it is stopped — the running tool's signal aborts with a TimeoutError, its result says so, the history is consistent — and runSoul rejects with TurnTimeoutError", async () => {
  const seen = [];
  const tools = new k.SimpleToolset([{ name: "quick", handler: () => "done" }, hanging("hang", seen)]);
  const agent = new k.Agent({ provider: new k.ScriptedProvider([`text: Working.\n${call("c1", "quick")}\n${call("c2", "hang")}`]), toolset: tools, turnTimeoutMs: 60 });
  const wire = [];
  const err = await k.runSoul(agent, "go", async (w) => {
    for await (const m of w.uiSide({ merge: true })) wire.push(m);
  }, new AbortController().signal).then(() => null, (e) => e);
  assert.ok(err instanceof k.TurnTimeoutError, String(err));
  assert.equal(err.timeoutMs, 60);
  assert.equal(err.message, "The turn ran past its time limit of 60 ms (turnTimeoutMs) and was stopped.");
  assert.deepEqual(seen, [{ name: "hang", reason: "TimeoutError" }]);
  const h = agent.context.history;
  assert.deepEqual(h.map((m) => m.role), ["user", "assistant", "tool", "tool"]);
  assert.match(JSON.stringify(h[3].content), /the turn ran past its time limit \(60 ms\) before it finished/);
  const results = wire.filter((m) => m.type === "ToolResult").map((m) => m.payload);
  assert.deepEqual(results.map((r) => [r.tool_call_id, r.return_value.is_error]), [["c1", false], ["c2", true]]);
  assert.equal(wire.at(-1).type, "TurnEnd");
  // The agent takes its next turn as usual.
  assert.equal(new k.TurnTimeoutError(5).message, "The turn ran past its time limit of 5 ms (turnTimeoutMs) and was stopped.");
  assert.throws(() => new k.Agent({ provider: new k.ScriptedProvider([]), turnTimeoutMs: 0 }), (e) => e instanceof TypeError && /turnTimeoutMs must be a positive number of milliseconds; got 0/.test(e.message));
  assert.throws(() => new k.Agent({ provider: new k.ScriptedProvider([]), turnTimeoutMS: 5 }), /did you mean `turnTimeoutMs`/);
});

test("turnTimeoutMs: a turn that ends in time is untouched, and its timer does not outlive it", async () => {
  const agent = new k.Agent({ provider: new k.ScriptedProvider(["text: quick"]), turnTimeoutMs: 60_000 });
  const started = performance.now();
  await k.runSoul(agent, "go", async (w) => { for await (const _ of w.uiSide({ merge: true })); }, new AbortController().signal);
  assert.equal(agent.context.history.at(-1).content, "quick");
  assert.ok(performance.now() - started < 30_000, "did not wait for the limit");
});
