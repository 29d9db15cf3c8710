// The whole chain in Node, through the built package (imported by its name): a real
// loopback HTTP server streams real SSE bytes; tools are plain JavaScript functions.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:net";
import { getEventListeners } from "node:events";
import * as k from "kosong-wasm";
import { startMockServer, text, think, toolStart, toolArgs, finish, usage, done, gate, sleep, chunk, within } from "./mock-openai.mjs";

let server;
before(async () => (server = await startMockServer()));
after(async () => server.close());

const API_KEY = "sk-test-abcdef123456";
const provider = (extra = {}) => new k.OpenAIChatProvider({ model: "mock-model", apiKey: API_KEY, baseUrl: server.baseUrl, ...extra });
const user = (t) => ({ role: "user", content: t });

test("generate streams text, think parts and usage with cached tokens", async () => {
  server.respond({ steps: [think("Let me "), think("think."), text("Hello, "), text("world!"), finish("stop"), usage(100, 7, 60), done()] });
  const parts = [];
  const r = await k.generate(provider(), "Be brief.", [], [user("hi")], { onMessagePart: (p) => parts.push(p) });
  assert.deepEqual(r.message, {
    role: "assistant",
    content: [
      { type: "think", think: "Let me think." },
      { type: "text", text: "Hello, world!" },
    ],
  });
  assert.deepEqual(r.usage, { input_other: 40, output: 7, input_cache_read: 60, input_cache_creation: 0 });
  assert.equal(r.finishReason, "stop");
  assert.equal(r.id, "chatcmpl-test");
  assert.equal(parts.length, 4);
  const req = server.requests.at(-1);
  assert.equal(req.url, "/v1/chat/completions");
  assert.equal(req.headers.authorization, `Bearer ${API_KEY}`);
  assert.equal(req.body.stream, true);
  assert.deepEqual(req.body.messages, [
    { role: "system", content: "Be brief." },
    { role: "user", content: "hi" },
  ]);
});

test("parallel tool calls: the first tool starts while the answer is still streaming", async () => {
  const firstToolStarted = gate();
  let streamEnded = false;
  let startedBeforeEnd = null;
  server.respond({
    steps: [
      text("Checking both."),
      toolStart(0, "call_w", "weather", ""),
      toolArgs(0, '{"city":'),
      toolArgs(0, '"Paris"}'),
      toolStart(1, "call_t", "clock", '{"tz":'), // a later index begins: call_w is complete
      { wait: firstToolStarted.promise },
      toolArgs(1, '"UTC"}'),
      finish("tool_calls"),
      { mark: () => (streamEnded = true) },
      done(),
    ],
  });
  const toolset = new k.SimpleToolset([
    {
      name: "weather",
      description: "weather in a city",
      parameters: { type: "object", properties: { city: { type: "string" } } },
      handler: async ({ city }) => {
        startedBeforeEnd = !streamEnded;
        firstToolStarted.open();
        return `sunny in ${city}`;
      },
    },
    { name: "clock", description: "time", parameters: { type: "object" }, handler: ({ tz }) => `12:00 ${tz}` },
  ]);
  const r = await k.step(provider(), "", toolset, [user("weather and time?")]);
  assert.equal(startedBeforeEnd, true, "the weather tool ran before the stream ended");
  assert.deepEqual(r.toolCalls.map((c) => [c.id, c.function.name, c.function.arguments]), [
    ["call_w", "weather", '{"city":"Paris"}'],
    ["call_t", "clock", '{"tz":"UTC"}'],
  ]);
  const results = await r.toolResults();
  assert.deepEqual(results.map((x) => [x.tool_call_id, x.return_value.output, x.return_value.is_error]), [
    ["call_w", "sunny in Paris", false],
    ["call_t", "12:00 UTC", false],
  ]);
  // The tools' definitions went to the server.
  assert.deepEqual(server.requests.at(-1).body.tools.map((t) => t.function.name), ["weather", "clock"]);
});

test("results come back in call order when tools finish out of order", async () => {
  server.respond({
    steps: [toolStart(0, "a", "slow", "{}"), toolStart(1, "b", "fast", "{}"), toolStart(2, "c", "slow", "{}"), finish("tool_calls"), done()],
  });
  const fastDone = gate();
  const toolset = new k.SimpleToolset([
    { name: "slow", description: "", parameters: {}, handler: async (_a, ctx) => { await fastDone.promise; return `slow ${ctx.toolCallId}`; } },
    { name: "fast", description: "", parameters: {}, handler: async () => { setTimeout(fastDone.open, 10); return "fast"; } },
  ]);
  const finished = [];
  const r = await k.step(provider(), "", toolset, [user("go")], { onToolResult: (res) => finished.push(res.tool_call_id) });
  const results = await r.toolResults();
  assert.deepEqual(results.map((x) => x.return_value.output), ["slow a", "fast", "slow c"]);
  assert.equal(finished[0], "b", "the fast tool finished first");
  assert.deepEqual([...finished].sort(), ["a", "b", "c"]);
});

test("a tool that throws, an unknown tool and arguments that are not JSON become error results", async () => {
  server.respond({
    steps: [
      toolStart(0, "c1", "explode", "{}"),
      toolStart(1, "c2", "nope", "{}"),
      toolStart(2, "c3", "explode", "{bad json"),
      toolStart(3, "c4", "rejects", "{}"),
      finish("tool_calls"),
      done(),
    ],
  });
  const toolset = new k.SimpleToolset([
    { name: "explode", description: "", parameters: {}, handler: () => { throw new Error("boom"); } },
    { name: "rejects", description: "", parameters: {}, handler: async () => { throw new TypeError("async boom"); } },
  ]);
  const r = await k.step(provider(), "", toolset, [user("go")]);
  const rv = (await r.toolResults()).map((x) => x.return_value);
  assert.equal(rv[0].is_error, true);
  assert.equal(rv[0].message, "Error running tool: boom");
  assert.deepEqual(rv[0].display, [{ type: "brief", text: "Tool runtime error" }]);
  assert.equal(rv[1].message, "Tool `nope` not found");
  assert.match(rv[2].message, /^Error parsing JSON arguments: /);
  assert.deepEqual(rv[2].display, [{ type: "brief", text: "Invalid arguments" }]);
  assert.equal(rv[3].message, "Error running tool: TypeError: async boom", "the class of a subclass is kept");
});

test("a validator's message becomes kosong's validation error", async () => {
  server.respond({ steps: [toolStart(0, "v1", "echo", '{"n": "not a number"}'), finish("tool_calls"), done()] });
  const toolset = new k.SimpleToolset(
    [{ name: "echo", description: "", parameters: { type: "object" }, handler: ({ n }) => String(n) }],
    { validate: (_schema, args) => (typeof args.n === "number" ? null : "n must be a number") },
  );
  const r = await k.step(provider(), "", toolset, [user("go")]);
  const [res] = await r.toolResults();
  assert.equal(res.return_value.message, "Error validating JSON arguments: n must be a number");
});

test("an eager: false tool waits for the stream to end well", async () => {
  let streamEnded = false;
  let sawEnd = null;
  server.respond({
    steps: [toolStart(0, "l1", "lazy", "{}"), toolStart(1, "l2", "lazy", "{}"), { pause: 50 }, finish("tool_calls"), { mark: () => (streamEnded = true) }, done()],
  });
  const toolset = new k.SimpleToolset([{ name: "lazy", description: "", parameters: {}, eager: false, handler: () => { sawEnd ??= streamEnded; return "ok"; } }]);
  const r = await k.step(provider(), "", toolset, [user("go")]);
  await r.toolResults();
  assert.equal(sawEnd, true);
});

test("step never changes the history it is given", async () => {
  server.respond({ steps: [text("ok"), finish(), done()] });
  const history = [user("a"), { role: "assistant", content: [{ type: "text", text: "b" }] }, user("c")];
  const copy = structuredClone(history);
  await k.step(provider(), "", new k.SimpleToolset(), history);
  assert.deepEqual(history, copy);
});

test("abort before the request: rejects with the signal's reason and sends nothing", async () => {
  const before = server.requests.length;
  const reason = new Error("user pressed stop");
  const r = await within(k.step(provider(), "", new k.SimpleToolset(), [user("x")], { signal: AbortSignal.abort(reason) }));
  assert.equal(r.error, reason);
  assert.equal(server.requests.length, before);
});

test("abort mid-stream: rejects with the reason and the server sees the connection closed", async () => {
  const midway = gate();
  server.respond({ steps: [text("Hel"), { mark: midway.open }, { hang: true }] });
  const ctrl = new AbortController();
  const parts = [];
  const p = k.step(provider(), "", new k.SimpleToolset(), [user("x")], { signal: ctrl.signal, onMessagePart: (x) => parts.push(x) });
  await midway.promise;
  await sleep(20);
  const reason = new DOMException("stopped", "AbortError");
  ctrl.abort(reason);
  const r = await within(p);
  assert.equal(r.error, reason);
  const req = server.requests.at(-1);
  assert.equal((await within(req.closed)).pending, undefined, "the connection was closed");
  assert.equal(req.clientClosed, true);
});

test("abort mid-tool while streaming: the tool's signal aborts and step rejects though the tool never settles", async () => {
  const toolRunning = gate();
  server.respond({ steps: [toolStart(0, "t1", "stuck", "{}"), toolStart(1, "t2", "stuck", "{"), { wait: toolRunning.promise }, { hang: true }] });
  let toolSignal;
  const toolset = new k.SimpleToolset([{
    name: "stuck", description: "", parameters: {},
    handler: (_args, ctx) => { toolSignal = ctx.signal; toolRunning.open(); return new Promise(() => {}); },
  }]);
  const ctrl = new AbortController();
  const p = k.step(provider(), "", toolset, [user("x")], { signal: ctrl.signal });
  await toolRunning.promise;
  assert.equal(toolSignal.aborted, false);
  ctrl.abort("stop!");
  const r = await within(p);
  assert.equal(r.error, "stop!");
  assert.equal(toolSignal.aborted, true);
  assert.equal(toolSignal.reason, "stop!");
});

test("abort mid-tool after the stream: toolResults() rejects promptly though the tool ignores its signal", async () => {
  server.respond({ steps: [toolStart(0, "t1", "stuck", "{}"), finish("tool_calls"), done()] });
  let toolSignal;
  const toolset = new k.SimpleToolset([{ name: "stuck", description: "", parameters: {}, handler: (_a, ctx) => { toolSignal = ctx.signal; return new Promise(() => {}); } }]);
  const ctrl = new AbortController();
  const r = await k.step(provider(), "", toolset, [user("x")], { signal: ctrl.signal });
  assert.ok(toolSignal, "the tool started");
  const reason = new Error("cancelled");
  ctrl.abort(reason);
  const out = await within(r.toolResults());
  assert.equal(out.error, reason);
  assert.equal(toolSignal.aborted, true);
});

test("HTTP errors: 401 with the server's message and request id, the key never shown", async () => {
  server.respond({
    status: 401,
    headers: { "x-request-id": "req_123" },
    body: { error: { message: `Incorrect API key provided: ${API_KEY}`, type: "invalid_request_error" } },
  });
  const r = await within(k.generate(provider(), "", [], [user("x")]));
  assert.ok(r.error instanceof k.APIStatusError);
  assert.ok(r.error instanceof k.ChatProviderError);
  assert.equal(r.error.name, "APIStatusError");
  assert.equal(r.error.status, 401);
  assert.equal(r.error.requestId, "req_123");
  assert.equal(r.error.retryAfterMs, null);
  assert.match(r.error.message, /Incorrect API key provided/);
  assert.ok(!r.error.message.includes(API_KEY), "the key is redacted");
  assert.ok(!JSON.stringify(provider()).includes(API_KEY));
});

test("HTTP errors: 429 with Retry-After and retry-after-ms, 500", async () => {
  server.respond({ status: 429, headers: { "retry-after": "2" }, body: { error: { message: "Rate limit reached" } } });
  let r = await within(k.generate(provider(), "", [], [user("x")]));
  assert.equal(r.error.status, 429);
  assert.equal(r.error.retryAfterMs, 2000);
  assert.match(r.error.message, /Rate limit reached/);
  server.respond({ status: 429, headers: { "retry-after-ms": "1500", "retry-after": "9" }, body: { error: { message: "slow down" } } });
  r = await within(k.generate(provider(), "", [], [user("x")]));
  assert.equal(r.error.retryAfterMs, 1500);
  server.respond({ status: 500, body: "upstream exploded" });
  r = await within(k.step(provider(), "", new k.SimpleToolset(), [user("x")]));
  assert.ok(r.error instanceof k.APIStatusError);
  assert.equal(r.error.status, 500);
  assert.match(r.error.message, /upstream exploded/);
});

test("a refused connection is an APIConnectionError", async () => {
  const port = await new Promise((resolve) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const p = s.address().port;
      s.close(() => resolve(p));
    });
  });
  const p = new k.OpenAIChatProvider({ model: "m", baseUrl: `http://127.0.0.1:${port}/v1`, apiKey: API_KEY });
  const r = await within(k.generate(p, "", [], [user("x")]));
  assert.ok(r.error instanceof k.APIConnectionError, String(r.error));
  assert.match(r.error.message, /ECONNREFUSED|fetch failed/);
  // Where it went (method and URL), never a key: a query (where a key may ride) is left out.
  assert.match(r.error.message, new RegExp(`^Connection error: POST http://127\\.0\\.0\\.1:${port}/v1/chat/completions: `));
  const secret = new k.OpenAIChatProvider({ model: "m", baseUrl: `http://127.0.0.1:${port}/v1?token=q-secret`, apiKey: API_KEY });
  const r2 = await within(k.generate(secret, "", [], [user("x")]));
  assert.ok(r2.error instanceof k.APIConnectionError, String(r2.error));
  assert.ok(!/pw-secret|q-secret/.test(r2.error.message), r2.error.message);
});

test("timeoutMs: no response headers in time is an APITimeoutError", async () => {
  server.respond({ noHeaders: true });
  const r = await within(k.generate(provider({ timeoutMs: 100 }), "", [], [user("x")]));
  assert.ok(r.error instanceof k.APITimeoutError, String(r.error));
  const req = server.requests.at(-1);
  assert.equal((await within(req.closed)).pending, undefined, "the request was abandoned");
});

test("a stream that stops before finish_reason or [DONE] is an error, not a success", async () => {
  server.respond({ steps: [text("The answer is"), chunk({ content: " 4" })] });
  const r = await within(k.generate(provider(), "", [], [user("2+2?")]));
  assert.ok(r.error instanceof k.ChatProviderError, String(r.error));
  assert.equal(r.error.name, "ChatProviderError");
  assert.match(r.error.message, /ended before the model finished/);
});

test("an empty answer and a think-only answer are APIEmptyResponseError", async () => {
  server.respond({ steps: [finish("stop"), done()] });
  let r = await within(k.generate(provider(), "", [], [user("x")]));
  assert.ok(r.error instanceof k.APIEmptyResponseError);
  server.respond({ steps: [think("hmm"), text("  "), finish("stop"), done()] });
  r = await within(k.generate(provider(), "", [], [user("x")]));
  assert.ok(r.error instanceof k.APIEmptyResponseError);
  assert.match(r.error.message, /only thinking/);
});

test("an onMessagePart that throws ends the step with its error; an async one is awaited in order", async () => {
  server.respond({ steps: [text("a"), text("b"), finish(), done()] });
  const boom = new Error("ui failed");
  let r = await within(k.generate(provider(), "", [], [user("x")], { onMessagePart: () => { throw boom; } }));
  assert.equal(r.error, boom);
  server.respond({ steps: [text("a"), text("b"), text("c"), finish(), done()] });
  const seen = [];
  await k.generate(provider(), "", [], [user("x")], {
    onMessagePart: async (p) => { await sleep(5); seen.push(p.text); },
  });
  assert.deepEqual(seen, ["a", "b", "c"]);
});



test("parts reach onMessagePart in stream order, a call's parts before its tool starts, sync or async, with any text", async () => {
  for (const asyncCb of [false, true]) {
    server.respond({
      steps: [text("Añ 😀 "), toolStart(0, "c1", "t", ""), toolArgs(0, '{"x":'), toolArgs(0, '"é"}'), toolStart(1, "c2", "t", ""), toolArgs(1, '{"x":2}'), finish("tool_calls"), done()],
    });
    const log = [];
    const tools = new k.SimpleToolset([{ name: "t", description: "", parameters: { type: "object" }, handler: (a, ctx) => (log.push(`start ${ctx.toolCallId}`), "ok") }]);
    const note = (p) => log.push(p.type === "text" ? `text ${p.text}` : p.type === "function" ? `call ${p.id}` : `args ${p.tool_call_id} ${p.arguments_part}`);
    const r = await k.step(provider(), "", tools, [user("x")], { onMessagePart: asyncCb ? async (p) => { await sleep(1); note(p); } : note });
    await r.toolResults();
    assert.deepEqual(log, ["text Añ 😀 ", "call c1", 'args c1 {"x":', 'args c1 "é"}', "call c2", "start c1", 'args c2 {"x":2}', "start c2"], `async: ${asyncCb}`);
  }
});

test("interleaved fragments: an earlier call starts once its last fragment arrives after a later call began", async () => {
  const aStarted = gate();
  let streamEnded = false;
  let aBeforeEnd = null;
  server.respond({
    steps: [
      toolStart(0, "a", "record", '{"n":'),
      toolStart(1, "b", "record", '{"n": 2'), // a is not complete yet: its arguments do not parse
      toolArgs(0, " 1}"), // now a parses, and a later call has begun: a starts
      { wait: aStarted.promise },
      toolArgs(1, "}"),
      finish("tool_calls"),
      { mark: () => (streamEnded = true) },
      done(),
    ],
  });
  const order = [];
  const toolset = new k.SimpleToolset([{
    name: "record", description: "", parameters: {},
    handler: ({ n }, ctx) => {
      order.push(ctx.toolCallId);
      if (ctx.toolCallId === "a") { aBeforeEnd = !streamEnded; aStarted.open(); }
      return String(n);
    },
  }]);
  const r = await k.step(provider(), "", toolset, [user("go")]);
  assert.equal(aBeforeEnd, true);
  assert.deepEqual(order, ["a", "b"]);
  assert.deepEqual(r.toolCalls.map((c) => c.function.arguments), ['{"n": 1}', '{"n": 2}']);
  assert.deepEqual((await r.toolResults()).map((x) => x.return_value.output), ["1", "2"]);
});

test("no abort listener is left on the caller's signal after a step, its results or an abort", async () => {
  const ctrl = new AbortController();
  server.respond({ steps: [toolStart(0, "t1", "quick", "{}"), finish("tool_calls"), done()] });
  const toolset = new k.SimpleToolset([{ name: "quick", description: "", parameters: {}, handler: async () => "ok" }]);
  const r = await k.step(provider(), "", toolset, [user("x")], { signal: ctrl.signal });
  await r.toolResults();
  await sleep(0);
  assert.equal(getEventListeners(ctrl.signal, "abort").length, 0);

  server.respond({ steps: [text("a"), finish(), done()] });
  await k.generate(provider(), "", [], [user("x")], { signal: ctrl.signal });
  assert.equal(getEventListeners(ctrl.signal, "abort").length, 0);

  const hung = gate();
  server.respond({ steps: [text("a"), { mark: hung.open }, { hang: true }] });
  const ctrl2 = new AbortController();
  const p = k.generate(provider(), "", [], [user("x")], { signal: ctrl2.signal });
  await hung.promise;
  assert.equal(getEventListeners(ctrl2.signal, "abort").length, 1, "the engine listens while it works");
  ctrl2.abort();
  await assert.rejects(p);
  assert.equal(getEventListeners(ctrl2.signal, "abort").length, 0);
});

test("timeoutMs: a stream that goes quiet is an APITimeoutError", async () => {
  server.respond({ steps: [text("partial"), { hang: true }] });
  const r = await within(k.generate(provider({ timeoutMs: 400 }), "", [], [user("x")]));
  assert.ok(r.error instanceof k.APITimeoutError, String(r.error));
  assert.match(r.error.message, /stream data/);
});

test("a call whose arguments never became JSON is settled by the engine: the tool does not run, the model is asked to resend, the log has no contents", async () => {
  const secret = "hunter2-secret-argument";
  server.respond({ steps: [toolStart(0, "bad1", "write", `{"text": "${secret}`), toolStart(1, "ok1", "write", '{"text": "fine"}'), finish("tool_calls"), done()] });
  const ran = [];
  const logged = [];
  const toolset = new k.SimpleToolset([{ name: "write", description: "", parameters: {}, handler: ({ text }) => { ran.push(text); return "written"; } }]);
  const r = await k.step(provider(), "", toolset, [user("x")], { logger: { warn: (message, fields) => logged.push({ message, fields }) } });
  const [bad, good] = await r.toolResults();
  assert.deepEqual(ran, ["fine"]);
  assert.equal(bad.return_value.is_error, true);
  assert.match(bad.return_value.message, /^Error parsing JSON arguments: .*send the call again with complete, valid JSON arguments\.$/s);
  assert.equal(good.return_value.output, "written");
  assert.equal(logged.length, 1);
  assert.deepEqual(logged[0].fields, { tool: "write", id: "bad1", bytes: `{"text": "${secret}`.length });
  assert.ok(!JSON.stringify(logged).includes(secret));
});

for (const hook of [false, true]) {
  test(`fragments that come after their call was handed on are dropped: the tool ran with what it had, the message holds that, one log line tells the late bytes${hook ? " (with a part hook)" : ""}`, async () => {
    const late = ["  ", '{"x"', ":1}"];
    // c1 is complete (its arguments parse) once c2 begins: what comes for it after that is late.
    server.respond({ steps: [toolStart(0, "c1", "write", '{"text": "fine"}'), toolStart(1, "c2", "write", '{"text": "next"}'), { pause: 5 }, ...late.flatMap((a) => [toolArgs(0, a), { pause: 2 }]), finish("tool_calls"), done()] });
    const ran = [];
    const logged = [];
    const parts = [];
    const toolset = new k.SimpleToolset([{ name: "write", description: "", parameters: {}, handler: ({ text }) => (ran.push(text), "written") }]);
    const r = await k.step(provider(), "", toolset, [user("x")], {
      logger: { warn: (message, fields) => logged.push({ message, fields }) },
      onMessagePart: hook ? (p) => parts.push(p) : undefined,
    });
    await r.toolResults();
    assert.deepEqual(ran, ["fine", "next"]);
    assert.deepEqual(r.message.tool_calls.map((c) => c.function.arguments), ['{"text": "fine"}', '{"text": "next"}']);
    assert.equal(logged.length, 1, JSON.stringify(logged));
    assert.match(logged[0].message, new RegExp(`^kosong-wasm: ${late.join("").length} bytes of this tool call's arguments came after the call had started`));
    assert.deepEqual(logged[0].fields, { tool: "write", id: "c1", bytes: '{"text": "fine"}'.length });
    // The hook never hears what the call did not run with.
    if (hook) assert.ok(!parts.some((p) => p.type === "tool_call_part" && late.includes(p.arguments_part)), JSON.stringify(parts));
  });
}

test("limits: an oversized event, tool arguments or message is a clear error, and the request is dropped", async () => {
  server.respond({ steps: [text("x".repeat(5000)), finish(), done()] });
  let r = await within(k.generate(provider(), "", [], [user("x")], { limits: { maxEventBytes: 1024 } }));
  assert.ok(r.error instanceof k.ChatProviderError, String(r.error));
  assert.match(r.error.message, /exceeded the limit of 1024 bytes/);

  const pieces = Array.from({ length: 200 }, () => toolArgs(0, '"aaaaaaaaaa",'));
  server.respond({ steps: [toolStart(0, "big", "f", "["), ...pieces, { hang: true }] });
  r = await within(k.step(provider(), "", new k.SimpleToolset(), [user("x")], { limits: { maxToolArgumentsBytes: 1000 } }));
  assert.match(String(r.error?.message), /tool call's arguments exceeded the limit of 1000 bytes \(limits.maxToolArgumentsBytes\)/);
  assert.equal((await within(server.requests.at(-1).closed)).pending, undefined, "the hung stream was closed");

  server.respond({ steps: [...Array.from({ length: 50 }, () => text("y".repeat(100))), finish(), done()] });
  r = await within(k.generate(provider(), "", [], [user("x")], { limits: { maxMessageBytes: 2000 } }));
  assert.match(String(r.error?.message), /message exceeded the limit of 2000 bytes/);

  await assert.rejects(k.generate(provider(), "", [], [user("x")], { limits: { maxBytes: 5 } }), /unknown limit `maxBytes`/);
  await assert.rejects(k.generate(provider(), "", [], [user("x")], { limits: { maxEventBytes: -1 } }), /positive integer/);
  await assert.rejects(k.step(provider(), "", new k.SimpleToolset(), [user("x")], { limits: { maxToolCallsPerStep: 2.5 } }), (e) => e instanceof TypeError && /options\.limits\.maxToolCallsPerStep must be a positive integer/.test(e.message));
  // The same rule for an Agent, at construction.
  assert.throws(() => new k.Agent({ provider: provider(), limits: { maxEventByte: 1 } }), (e) => e instanceof TypeError && /Agent\.limits: unknown limit `maxEventByte`/.test(e.message));
  assert.throws(() => new k.Agent({ provider: provider(), limits: "big" }), /Agent\.limits must be an object/);
});

test("result.text: the answer's text parts joined, thinking left out, on generate and step (as the AI SDK's)", async () => {
  const g = await k.generate(new k.ScriptedProvider(["think: hmm\ntext: Hel\ntext: lo"]), "", [], [{ role: "user", content: "hi" }]);
  assert.equal(g.text, "Hello");
  const s = await k.step(new k.ScriptedProvider(['text: Adding.\ntool_call: {"id": "c1", "name": "x", "arguments": "{}"}']), "", new k.SimpleToolset(), [{ role: "user", content: "hi" }]);
  assert.equal(s.text, "Adding.");
  const none = await k.generate(new k.ScriptedProvider(['tool_call: {"id": "c1", "name": "x", "arguments": "{}"}']), "", [], [{ role: "user", content: "hi" }]);
  assert.equal(none.text, "");
});

test("positional mistakes name the argument and the signature: an AI SDK-shaped call to step or generate", async () => {
  const p = new k.ScriptedProvider(["text: x"]);
  await assert.rejects(k.step(p, { system: "s", messages: [] }), /^TypeError: step\(provider, systemPrompt, toolset, history, options\?\): systemPrompt \(the 2nd argument\) must be a string; got an object\. The arguments are positional/);
  await assert.rejects(k.generate(p, { messages: [] }), /generate\(provider, systemPrompt, tools, history, options\?\): systemPrompt .* positional/);
  await assert.rejects(k.step(p, 5, new k.SimpleToolset(), []), /systemPrompt \(the 2nd argument\) must be a string; got number$/);
});

test("in a plain step a tool's ctx has the run's methods (typed as present, never undefined): send reaches nobody, asking says there is no wire", async () => {
  const seen = {};
  const tools = new k.SimpleToolset([{
    name: "ask", description: "", parameters: {},
    handler: async (_, ctx) => {
      seen.kinds = [typeof ctx.send, typeof ctx.requestApproval, typeof ctx.rejection];
      seen.send = ctx.send({ type: "MyNote", payload: {} });
      seen.rejection = (() => { try { ctx.rejection(); } catch (e) { return e.message; } })();
      return (await ctx.requestApproval({ action: "ask", description: "may I?" })) ? "approved" : "refused";
    },
  }]);
  const r = await k.step(new k.ScriptedProvider(['tool_call: {"id":"c1","name":"ask","arguments":"{}"}']), "", tools, [user("go")]);
  const [res] = await r.toolResults();
  assert.deepEqual(seen.kinds, ["function", "function", "function"]);
  assert.equal(seen.send, undefined);
  for (const m of [seen.rejection, res.return_value.message]) assert.match(m, /a plain step has no wire: run the tool in an agent run/);
  assert.equal(res.return_value.is_error, true, "the handler's rejected approval is its error result, never an approval");
});

test("a loop of one's own: result.messages() appended to the history sends the model what an Agent's turn sends", async () => {
  const tools = () => new k.SimpleToolset([
    { name: "plus", description: "", parameters: {}, handler: ({ a, b }) => String(a + b) },
    { name: "fails", description: "", parameters: {}, handler: () => { throw new Error("no disk"); } },
    { name: "quiet", description: "", parameters: {}, handler: () => "" },
  ], { logger: null });
  const queue = () => {
    server.respond({ steps: [text("Working."), toolStart(0, "c1", "plus", '{"a":1,"b":2}'), toolStart(1, "c2", "fails", "{}"), toolStart(2, "c3", "quiet", "{}"), finish("tool_calls"), done()] });
    server.respond({ steps: [text("3, and one failed."), finish("stop"), done()] });
  };
  // By hand: step, append, step again.
  queue();
  const n = server.requests.length;
  const history = [user("add 1 and 2")];
  const first = await k.step(provider(), "Be terse.", tools(), history);
  const appended = await first.messages();
  assert.deepEqual(appended.map((m) => [m.role, m.tool_call_id ?? null]), [["assistant", null], ["tool", "c1"], ["tool", "c2"], ["tool", "c3"]]);
  history.push(...appended);
  const second = await k.step(provider(), "Be terse.", tools(), history);
  assert.equal(second.text, "3, and one failed.");
  const byHand = server.requests[n + 1].body.messages;
  // The same conversation as an Agent's turn.
  queue();
  const agent = new k.Agent({ provider: provider(), systemPrompt: "Be terse.", toolset: tools() });
  await k.runSoul(agent, "add 1 and 2", async (w) => { for await (const _ of w.uiSide()); }, new AbortController().signal);
  const byAgent = server.requests[n + 3].body.messages;
  assert.deepEqual(byHand, byAgent);
  assert.match(JSON.stringify(byHand), /ERROR: .*no disk/);
  assert.match(JSON.stringify(byHand), /Tool output is empty/);
});

test("a body whose chunks are all there at once (joined into batches in one buffer the body keeps): any mix of chunk sizes, a part callback that makes the instance allocate — text, calls, arguments and the tools' inputs are the stream's, byte for byte", async () => {
  // Two calls whose arguments stream in small pieces (batches of ~1 KiB while calls stream), then
  // text (batches of 16 KiB), cut into chunks of 1 byte to 40 KB that a pull answers at once.
  const argsOf = (i) => JSON.stringify({ i, items: Array.from({ length: 300 }, (_, n) => ({ n, s: `é${i}-${n}` })) });
  const a0 = argsOf(0), a1 = argsOf(1);
  const sse = (d) => `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: "m", choices: d === null ? [] : [d] })}\n\n`;
  const events = [sse({ index: 0, delta: { role: "assistant", content: null }, finish_reason: null })];
  for (const [i, a] of [a0, a1].entries()) {
    events.push(sse({ index: 0, delta: { tool_calls: [{ index: i, id: `call_${i}`, type: "function", function: { name: "echo", arguments: "" } }] }, finish_reason: null }));
    for (let at = 0; at < a.length; at += 7) events.push(sse({ index: 0, delta: { tool_calls: [{ index: i, function: { arguments: a.slice(at, at + 7) } }] }, finish_reason: null }));
  }
  const words = Array.from({ length: 3000 }, (_, n) => ` w${n}ü`);
  for (const w of words) events.push(sse({ index: 0, delta: { content: w }, finish_reason: null }));
  events.push(sse({ index: 0, delta: {}, finish_reason: "tool_calls" }), "data: [DONE]\n\n");
  const bytes = new TextEncoder().encode(events.join(""));
  const sizes = [1, 3, 17, 200, 1500, 9000, 40000, 2, 64, 5000];
  const body = () => {
    let at = 0, k = 0;
    return new ReadableStream({
      pull(c) {
        if (at >= bytes.length) return c.close();
        const n = sizes[k++ % sizes.length];
        c.enqueue(bytes.slice(at, at + n));
        at += n;
      },
    }, { highWaterMark: 0 });
  };
  const fetch = async () => new Response(body(), { headers: { "content-type": "text/event-stream" } });
  const got = [];
  const tools = new k.SimpleToolset([{ name: "echo", description: "", parameters: { type: "object" }, handler: (args) => (got.push(JSON.stringify(args)), "ok") }]);
  const kept = [];
  let text = "";
  const r = await k.step(new k.OpenAIChatProvider({ model: "m", apiKey: API_KEY, baseUrl: "http://127.0.0.1:1/v1", fetch }), "", tools, [user("go")], {
    onMessagePart: (p) => {
      if (p.type === "text") text += p.text;
      // The instance allocates between batches (every view of its memory is renewed).
      if (kept.length < 24) kept.push(k.Context.fromJSONL(JSON.stringify({ role: "user", content: "x".repeat(1 << 20) })));
    },
  });
  await r.toolResults();
  assert.equal(r.text, words.join(""));
  assert.equal(text, words.join(""));
  assert.deepEqual(r.toolCalls.map((c) => c.function.arguments), [a0, a1]);
  assert.deepEqual(got.sort(), [a0, a1].map((a) => JSON.stringify(JSON.parse(a))).sort());
});

test("a step no part hook hears (its decoder joins fragments and deltas) gives what a step with onMessagePart gives: message, calls, tool inputs, for Chat Completions calls that interleave and for Anthropic thinking, text, citations and calls", async () => {
  const chat = (d) => `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: d, finish_reason: null }] })}\n\n`;
  const args = (i) => JSON.stringify({ i, s: `é"${i}\n`.repeat(40) });
  const chatEvents = [chat({ role: "assistant", content: "" }), chat({ reasoning_content: "hm" }), chat({ reasoning_content: "m." }), chat({ content: "Two " }), chat({ content: "calls." })];
  for (const i of [0, 1]) chatEvents.push(chat({ tool_calls: [{ index: i, id: `call_${i}`, type: "function", function: { name: "echo", arguments: "" } }] }));
  // The two calls' fragments alternate: a join must never run one into the other.
  const [a0, a1] = [args(0), args(1)];
  for (let at = 0; at < a0.length; at += 5) for (const [i, a] of [a0, a1].entries()) if (at < a.length) chatEvents.push(chat({ tool_calls: [{ index: i, function: { arguments: a.slice(at, at + 5) } }] }));
  chatEvents.push(`data: ${JSON.stringify({ id: "c", choices: [{ index: 0, delta: {}, finish_reason: "tool_calls" }] })}\n\n`, "data: [DONE]\n\n");
  const an = (type, body) => `event: ${type}\ndata: ${JSON.stringify({ type, ...body })}\n\n`;
  const delta = (index, d) => an("content_block_delta", { index, delta: d });
  const antEvents = [an("message_start", { message: { id: "msg_1", usage: { input_tokens: 3 } } })];
  antEvents.push(an("content_block_start", { index: 0, content_block: { type: "thinking", thinking: "" } }));
  for (const t of ["Let ", "me ", "see."]) antEvents.push(delta(0, { type: "thinking_delta", thinking: t }));
  antEvents.push(delta(0, { type: "signature_delta", signature: "sig" }), an("content_block_stop", { index: 0 }));
  antEvents.push(an("content_block_start", { index: 1, content_block: { type: "text", text: "" } }));
  antEvents.push(delta(1, { type: "text_delta", text: "It " }), delta(1, { type: "citations_delta", citation: { type: "char_location", cited_text: "x" } }), delta(1, { type: "text_delta", text: "says " }), delta(1, { type: "text_delta", text: "so." }), an("content_block_stop", { index: 1 }));
  for (const i of [0, 1]) {
    antEvents.push(an("content_block_start", { index: 2 + i, content_block: { type: "tool_use", id: `toolu_${i}`, name: "echo", input: {} } }));
    const a = args(i);
    for (let at = 0; at < a.length; at += 5) antEvents.push(delta(2 + i, { type: "input_json_delta", partial_json: a.slice(at, at + 5) }));
    antEvents.push(an("content_block_stop", { index: 2 + i }));
  }
  antEvents.push(an("message_delta", { delta: { stop_reason: "tool_use" }, usage: { output_tokens: 9 } }), an("message_stop", {}));
  for (const [make, events] of [[(fetch) => new k.KimiProvider({ model: "m", apiKey: API_KEY, baseUrl: "http://127.0.0.1:1/v1", fetch }), chatEvents], [(fetch) => new k.AnthropicProvider({ model: "m", apiKey: API_KEY, baseUrl: "http://127.0.0.1:1/v1", fetch }), antEvents]]) {
    // All there at once, in 700-byte reads: a read holds many events (what the decoder joins).
    const bytes = new TextEncoder().encode(events.join(""));
    const fetch = async () => {
      let at = 0;
      const body = new ReadableStream({ pull: (c) => (at >= bytes.length ? c.close() : (c.enqueue(bytes.slice(at, at + 700)), (at += 700))) }, { highWaterMark: 0 });
      return new Response(body, { headers: { "content-type": "text/event-stream" } });
    };
    const run = async (hear) => {
      const got = [];
      const tools = new k.SimpleToolset([{ name: "echo", description: "", parameters: { type: "object" }, handler: (a) => (got.push(JSON.stringify(a)), "ok") }]);
      let parts = 0;
      const r = await k.step(make(fetch), "", tools, [user("go")], hear ? { onMessagePart: () => void parts++ } : {});
      await r.toolResults();
      return { message: r.message, got, parts };
    };
    const heard = await run(true);
    const joined = await run(false);
    assert.deepEqual(joined.message, heard.message);
    assert.deepEqual(joined.got, heard.got);
    assert.deepEqual(heard.message.tool_calls.map((c) => c.function.arguments), [a0, a1]);
    assert.ok(heard.parts > 100, `${heard.parts} parts heard`);
  }
});
