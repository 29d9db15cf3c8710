// OpenTelemetry GenAI spans through the package, recorded by @opentelemetry/sdk-trace-base's
// in-memory exporter (the real SDK; the package itself depends on none of it), against a loopback
// server streaming a recorded Anthropic answer with two tool calls. The server holds the stream
// open until the first tool has run, so the tool's span starts inside the model call's.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import * as k from "kosong-wasm";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { startMockServer, gate, text, finish, done, toolStart } from "./mock-openai.mjs";
import { answerEvents, backgroundServer } from "./background-server.mjs";

let server;
before(async () => (server = await startMockServer()));
after(async () => server.close());

const KEY = "sk-ant-telemetry-secret";
const exporter = new InMemorySpanExporter();
const tracer = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }).getTracer("kosong-wasm-test");
const ns = ([s, n]) => s * 1e9 + n;
const parentOf = (span) => span.parentSpanContext?.spanId;

function anthropicEvents() {
  const raw = readFileSync(new URL("../fixtures/anthropic.sse", import.meta.url), "utf8");
  return raw.split("\n\n").filter((e) => e.trim()).map((e) => `${e}\n\n`);
}

/** The recorded answer, held open after its first call until `ran` opens (the first tool ran). */
function heldUntil(ran) {
  const steps = [];
  for (const e of anthropicEvents()) {
    steps.push(e);
    if (e.includes('"type":"content_block_stop","index":2')) steps.push({ wait: ran.promise, maxWait: 10_000 });
  }
  return steps;
}

const weather = (ran) => new k.SimpleToolset([{
  name: "get_weather",
  description: "The weather in a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  handler: async ({ city }) => {
    if (city === "Paris") ran.open();
    return city === "Paris" ? "Sunny, 24°C" : k.toolError({ message: "no station in Tokyo" });
  },
}]);

test("step: a chat span with the GenAI attributes, and a child execute_tool span per call that starts while the model still streams", async () => {
  exporter.reset();
  const ran = gate();
  const steps = heldUntil(ran);
  server.respond({ steps });
  const provider = new k.AnthropicProvider({ model: "claude-sonnet-4-5", apiKey: KEY, baseUrl: server.baseUrl });
  const r = await k.step(provider, "You are terse.", weather(ran), [{ role: "user", content: "Weather in Paris and Tokyo?" }], { telemetry: { tracer } });
  await r.toolResults();
  const spans = exporter.getFinishedSpans();
  const chat = spans.find((s) => s.name === "chat claude-sonnet-4-5");
  assert.ok(chat, spans.map((s) => s.name).join(", "));
  assert.equal(chat.kind, 2, "a client span");
  const a = chat.attributes;
  assert.equal(a["gen_ai.operation.name"], "chat");
  assert.equal(a["gen_ai.provider.name"], "anthropic");
  assert.equal(a["gen_ai.request.model"], "claude-sonnet-4-5");
  assert.equal(a["server.address"], "127.0.0.1");
  assert.equal(a["server.port"], Number(new URL(server.baseUrl).port));
  assert.equal(a["gen_ai.response.id"], r.id);
  assert.equal(a["gen_ai.usage.output_tokens"], r.usage.output);
  assert.equal(a["gen_ai.usage.input_tokens"], r.usage.input_other + r.usage.input_cache_read + r.usage.input_cache_creation);
  assert.deepEqual(a["gen_ai.response.finish_reasons"], [r.finishReason]);
  assert.ok(a["gen_ai.response.time_to_first_chunk"] > 0);
  assert.ok(!("gen_ai.input.messages" in a), "no content unless asked for");
  const tools = spans.filter((s) => s.name === "execute_tool get_weather");
  assert.equal(tools.length, 2);
  for (const t of tools) {
    assert.equal(parentOf(t), chat.spanContext().spanId, "a child of the model call that started it");
    assert.equal(t.spanContext().traceId, chat.spanContext().traceId);
    assert.equal(t.attributes["gen_ai.operation.name"], "execute_tool");
  }
  const [paris, tokyo] = [...tools].sort((x, y) => ns(x.startTime) - ns(y.startTime));
  assert.equal(paris.attributes["gen_ai.tool.call.id"], r.toolCalls[0].id);
  assert.ok(ns(paris.startTime) < ns(chat.endTime), "the first tool started while the model was still streaming");
  assert.equal(tokyo.attributes["error.type"], "tool_error", "an error result marks its span");
  assert.equal(tokyo.status.code, 2);
  assert.ok(!JSON.stringify(spans.map((s) => s.attributes)).includes(KEY), "no key in any span");
});

test("recordContent puts the prompt, the answer, a call's arguments and result into the spans; a failed call is an error span", async () => {
  exporter.reset();
  server.respond({ steps: [text("Hello there"), finish("stop"), done()] });
  const provider = new k.OpenAIChatProvider({ model: "gpt-4.1-mini", apiKey: KEY, baseUrl: server.baseUrl });
  await k.generate(provider, "Be brief.", [], [{ role: "user", content: "hi" }], { telemetry: { tracer, recordContent: true } });
  const [chat] = exporter.getFinishedSpans();
  assert.equal(chat.name, "chat gpt-4.1-mini");
  assert.equal(chat.attributes["gen_ai.provider.name"], "openai");
  assert.match(chat.attributes["gen_ai.input.messages"], /"hi"/);
  assert.match(chat.attributes["gen_ai.system_instructions"], /Be brief\./);
  assert.match(chat.attributes["gen_ai.output.messages"], /Hello there/);
  assert.ok(!JSON.stringify(chat.attributes).includes(KEY));

  exporter.reset();
  server.respond({ status: 503, body: { error: { message: "overloaded" } } });
  const e = await k.generate(provider, "", [], [{ role: "user", content: "hi" }], { telemetry: { tracer } }).then(() => null, (x) => x);
  assert.ok(e instanceof k.APIStatusError);
  const [failed] = exporter.getFinishedSpans();
  assert.equal(failed.status.code, 2);
  assert.equal(failed.attributes["error.type"], "status");
  assert.match(failed.status.message, /503/);
});

test("the telemetry option is checked where it is given", async () => {
  const scripted = () => new k.ScriptedProvider(["text: hi"]);
  await assert.rejects(k.generate(scripted(), "", [], [], { telemetry: {} }), /telemetry\.tracer must be an OpenTelemetry Tracer/);
  await assert.rejects(k.generate(scripted(), "", [], [], { telemetry: { tracer, recordcontent: true } }), /did you mean `recordContent`/);
});

test("Agent: an invoke_agent span per turn; a chat span per attempt of each step, its child; the tools' spans children of the chat that started them, overlapping it", async () => {
  exporter.reset();
  const ran = gate();
  const steps = heldUntil(ran);
  server.respond({ status: 503, body: { type: "error", error: { type: "overloaded_error", message: "busy" } } });
  server.respond({ steps });
  server.respond({ steps: ["event: message_start\ndata: " + JSON.stringify({ type: "message_start", message: { id: "msg_final", type: "message", role: "assistant", content: [], usage: { input_tokens: 50, output_tokens: 1 } } }) + "\n\n",
    "event: content_block_start\ndata: " + JSON.stringify({ type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }) + "\n\n",
    "event: content_block_delta\ndata: " + JSON.stringify({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "Sunny in Paris." } }) + "\n\n",
    "event: content_block_stop\ndata: " + JSON.stringify({ type: "content_block_stop", index: 0 }) + "\n\n",
    "event: message_delta\ndata: " + JSON.stringify({ type: "message_delta", delta: { stop_reason: "end_turn" }, usage: { output_tokens: 5 } }) + "\n\n",
    "event: message_stop\ndata: " + JSON.stringify({ type: "message_stop" }) + "\n\n"] });
  const provider = new k.AnthropicProvider({ model: "claude-sonnet-4-5", apiKey: KEY, baseUrl: server.baseUrl });
  const agent = new k.Agent({ name: "weather-bot", provider, systemPrompt: "terse", toolset: weather(ran), retryBackoff: { initialMs: 1, jitterMs: 0 }, telemetry: { tracer } });
  await k.runSoul(agent, "Weather in Paris and Tokyo?", async (w) => { for await (const _ of w.uiSide({ merge: true })); }, new AbortController().signal);
  const spans = exporter.getFinishedSpans();
  const turn = spans.find((s) => s.name === "invoke_agent weather-bot");
  assert.ok(turn, spans.map((s) => s.name).join(", "));
  assert.equal(turn.attributes["gen_ai.operation.name"], "invoke_agent");
  assert.equal(turn.attributes["gen_ai.agent.name"], "weather-bot");
  assert.equal(turn.attributes["gen_ai.request.model"], "claude-sonnet-4-5");
  assert.equal(parentOf(turn), undefined, "the turn is the root");
  const chats = spans.filter((s) => s.name === "chat claude-sonnet-4-5").sort((a, b) => ns(a.startTime) - ns(b.startTime));
  assert.equal(chats.length, 3, "the failed attempt, the step with the calls, the answer");
  assert.ok(chats.every((c) => parentOf(c) === turn.spanContext().spanId && c.spanContext().traceId === turn.spanContext().traceId));
  assert.equal(chats[0].attributes["error.type"], "APIStatusError");
  assert.equal(chats[0].status.code, 2);
  const hist = agent.context.history;
  assert.equal(chats[1].attributes["gen_ai.response.id"], "msg_01XFDUDYJgAACzvnptvVoYEL");
  assert.equal(chats[2].attributes["gen_ai.response.id"], "msg_final");
  assert.equal(chats[2].attributes["gen_ai.usage.output_tokens"], 5);
  assert.ok(chats[1].attributes["gen_ai.response.time_to_first_chunk"] > 0);
  const tools = spans.filter((s) => s.name === "execute_tool get_weather");
  assert.equal(tools.length, 2);
  for (const t of tools) assert.equal(parentOf(t), chats[1].spanContext().spanId, "a child of the chat that started it");
  const paris = tools.find((t) => ns(t.startTime) === Math.min(...tools.map((x) => ns(x.startTime))));
  assert.ok(ns(paris.startTime) < ns(chats[1].endTime), "the first tool started while its model call still streamed");
  assert.ok(tools.some((t) => t.attributes["error.type"] === "tool_error"), "Tokyo's error result");
  assert.ok(ns(turn.endTime) >= Math.max(...spans.map((s) => ns(s.endTime))) - 1e6, "the turn's span closes last");
  assert.deepEqual(hist.map((m) => m.role), ["user", "assistant", "tool", "tool", "assistant"]);
  assert.ok(!JSON.stringify(spans.map((s) => s.attributes)).includes(KEY));
});

test("Agent: a failed turn's span says why; telemetry is checked", async () => {
  exporter.reset();
  const agent = new k.Agent({ provider: new k.ScriptedProvider(["error: 400 bad"]), telemetry: { tracer, recordContent: true } });
  await assert.rejects(k.runSoul(agent, "hi", async (w) => { for await (const _ of w.uiSide()); }, new AbortController().signal));
  const turn = exporter.getFinishedSpans().find((s) => s.name === "invoke_agent agent");
  assert.equal(turn.status.code, 2);
  assert.equal(turn.attributes["error.type"], "status");
  assert.match(turn.attributes["gen_ai.input.messages"], /"hi"/);
  assert.equal(exporter.getFinishedSpans().filter((s) => s.name === "chat scripted_echo").length, 1);
  assert.throws(() => new k.Agent({ provider: null, telemetry: { tracer: {} } }), /Agent: telemetry.tracer must be an OpenTelemetry Tracer/);
});

test("Session: a turn is an invoke_agent span with its chat and execute_tool spans, as in runSoul", async () => {
  exporter.reset();
  const toolset = new k.SimpleToolset([{ name: "plus", description: "", parameters: { type: "object" }, handler: ({ a }) => String(a + 1) }]);
  const provider = new k.ScriptedProvider(['tool_call: {"id": "p1", "name": "plus", "arguments": "{\\"a\\": 1}"}', "text: 2"]);
  const s = await k.Session.open(new k.MemorySessionStore(), { name: "sess", provider, systemPrompt: "", toolset, telemetry: { tracer } });
  assert.deepEqual(await s.send("add"), { outcome: "done" });
  await s.close();
  const spans = exporter.getFinishedSpans();
  const agent = spans.find((x) => x.name === "invoke_agent sess");
  assert.ok(agent, spans.map((x) => x.name).join(", "));
  const chats = spans.filter((x) => x.name.startsWith("chat ") && parentOf(x) === agent.spanContext().spanId);
  assert.equal(chats.length, 2, "one chat span a step, in the turn's");
  const tool = spans.find((x) => x.name === "execute_tool plus");
  assert.ok(tool, "the tool's span");
  assert.ok(chats.some((c) => parentOf(tool) === c.spanContext().spanId), "the tool's span is a child of the chat that started it");
});

test("agent: an answer cut three times and read again each time (Responses in the background) is one chat span with three reconnect events, its usage counted once", async () => {
  exporter.reset();
  const s = await backgroundServer({ events: (id) => answerEvents(id), cuts: [4, 7, 9], get: "resume" });
  try {
    const provider = new k.OpenAIResponsesProvider({ model: "gpt-5-mini", apiKey: "sk-test", baseUrl: s.baseUrl, background: true });
    const agent = new k.Agent({ name: "bg", provider, systemPrompt: "", telemetry: { tracer } });
    await k.runSoul(agent, "go", async (w) => { for await (const _ of w.uiSide({ merge: true })); }, new AbortController().signal);
    assert.deepEqual(s.requests.map((q) => q.method), ["POST", "GET", "GET", "GET"]);
    const chats = exporter.getFinishedSpans().filter((x) => x.name === "chat gpt-5-mini");
    assert.equal(chats.length, 1, "one model call, not one per connection");
    const events = chats[0].events.filter((e) => e.name === "kosong.answer.reconnect");
    assert.deepEqual(events.map((e) => e.attributes["kosong.answer.starting_after"]), [3, 6, 8]);
    assert.equal(chats[0].attributes["gen_ai.usage.output_tokens"], 40, "the answer's usage, once");
    assert.equal(chats[0].attributes["gen_ai.usage.input_tokens"], 100);
  } finally {
    await s.close();
  }
});

test("generate: an answer read again after its stream broke is one chat span with a reconnect event; onMessagePart sees parts only", async () => {
  exporter.reset();
  const s = await backgroundServer({ events: (id) => answerEvents(id), cuts: [6], get: "resume" });
  try {
    const provider = new k.OpenAIResponsesProvider({ model: "gpt-5-mini", apiKey: "sk-test", baseUrl: s.baseUrl, background: true });
    const parts = [];
    const r = await k.generate(provider, "", [], [{ role: "user", content: "go" }], { telemetry: { tracer }, onMessagePart: (p) => parts.push(p) });
    assert.deepEqual(s.requests.map((q) => q.method), ["POST", "GET"]);
    assert.ok(parts.every((p) => p.type === "text"), JSON.stringify(parts));
    assert.equal(parts.map((p) => p.text).join(""), "The answer goes on after the cut.");
    assert.equal(r.usage.output, 40);
    const chats = exporter.getFinishedSpans().filter((x) => x.name === "chat gpt-5-mini");
    assert.equal(chats.length, 1);
    assert.deepEqual(chats[0].events.filter((e) => e.name === "kosong.answer.reconnect").map((e) => e.attributes["kosong.answer.starting_after"]), [5]);
  } finally {
    await s.close();
  }
});

test("a sub-agent's turn is an invoke_agent span inside the caller's execute_tool span, with its own chat span; it takes the caller's telemetry when it has none", async () => {
  exporter.reset();
  const long = Array(40).fill("found").join(" ");
  const child = new k.Agent({ name: "explore", provider: new k.ScriptedProvider([`text: ${long}`]) });
  server.respond({ steps: [toolStart(0, "c1", "explore", '{"prompt":"look"}'), finish("tool_calls"), done()] });
  server.respond({ steps: [text("done"), finish(), done()] });
  const provider = new k.OpenAIChatProvider({ model: "m", baseUrl: server.baseUrl, apiKey: "sk-x" });
  const parent = new k.Agent({ name: "lead", provider, toolset: new k.SimpleToolset([child.asTool()]), telemetry: { tracer } });
  await k.runSoul(parent, "go", async (w) => { for await (const _ of w.uiSide({ merge: true })); }, new AbortController().signal);
  const spans = exporter.getFinishedSpans();
  const named = (n) => spans.filter((s) => s.name === n);
  const [lead] = named("invoke_agent lead");
  const [exec] = named("execute_tool explore");
  const [sub] = named("invoke_agent explore");
  assert.ok(lead && exec && sub, spans.map((s) => s.name).join(", "));
  assert.equal(parentOf(sub), exec.spanContext().spanId, "the sub-agent's turn is inside the call that ran it");
  assert.equal(sub.spanContext().traceId, lead.spanContext().traceId, "one trace");
  const subChats = spans.filter((s) => s.name.startsWith("chat") && parentOf(s) === sub.spanContext().spanId);
  assert.equal(subChats.length, 1, "the sub-agent's model call is its own span's child");
});
