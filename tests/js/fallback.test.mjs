// FallbackProvider over real loopback servers: a primary that fails, a backup of another wire
// format that answers. What the caller sees (result.provider, the wire's StepRetry and
// StatusUpdate), what each server was sent (the backup's request in its own format, structured
// output in its native form) and what the tools did must agree.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import * as k from "kosong-wasm";
import { startMockServer, text, toolStart, toolArgs, finish, done, sse } from "./mock-openai.mjs";

let primary;
let backup;
before(async () => {
  primary = await startMockServer();
  backup = await startMockServer();
});
after(async () => {
  await primary.close();
  await backup.close();
});

const user = [{ role: "user", content: "hi" }];
const textOf = (m) => (typeof m.content === "string" ? m.content : m.content.map((p) => p.text ?? "").join(""));
const unavailable = { status: 503, body: { error: { message: "overloaded", type: "server_error" } } };

/** An Anthropic Messages stream answering `words`. */
function anthropicAnswer(words) {
  const ev = (type, data) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
  return {
    steps: [
      ev("message_start", { message: { id: "msg_b", type: "message", role: "assistant", content: [], model: "claude-backup", usage: { input_tokens: 9, output_tokens: 1 } } }),
      ev("content_block_start", { index: 0, content_block: { type: "text", text: "" } }),
      ev("content_block_delta", { index: 0, delta: { type: "text_delta", text: words } }),
      ev("content_block_stop", { index: 0 }),
      ev("message_delta", { delta: { stop_reason: "end_turn" }, usage: { output_tokens: 4 } }),
      ev("message_stop", {}),
    ],
  };
}

/** A Gemini stream answering `words`. */
const geminiAnswer = (words) => ({
  steps: [`data: ${JSON.stringify({ responseId: "g1", candidates: [{ content: { role: "model", parts: [{ text: words }] }, finishReason: "STOP" }] })}\r\n\r\n`],
});

function pair(second, opts) {
  const first = new k.OpenAIChatProvider({ model: "primary-model", apiKey: "sk-primary", baseUrl: primary.baseUrl });
  return { first, second, fallback: new k.FallbackProvider([first, second], opts) };
}

test("step: a 503 from the primary goes to the backup in its own wire format; result.provider is the backup", async () => {
  const { second, fallback } = pair(new k.AnthropicProvider({ model: "claude-backup", apiKey: "sk-backup", baseUrl: backup.baseUrl }));
  const [p0, b0] = [primary.requests.length, backup.requests.length];
  primary.respond(unavailable);
  backup.respond(anthropicAnswer("from the backup"));
  const r = await k.step(fallback, "Be brief.", new k.SimpleToolset([]), user);
  assert.equal(r.provider, second);
  assert.equal(textOf(r.message), "from the backup");
  assert.equal(primary.requests.length - p0, 1, "step makes no retries: the first 503 moves on");
  const sent = backup.requests.slice(b0);
  assert.equal(sent.length, 1);
  assert.equal(sent[0].url, "/v1/messages");
  assert.equal(sent[0].headers["x-api-key"], "sk-backup", "each member sends its own key");
  assert.equal(sent[0].body.system[0].text, "Be brief.");
  assert.deepEqual(sent[0].body.messages.map((m) => [m.role, m.content[0].text]), [["user", "hi"]]);

  // When the primary answers, it is the one.
  primary.respond({ steps: [text("from the primary"), finish(), done()] });
  const r2 = await k.step(fallback, "", new k.SimpleToolset([]), user);
  assert.equal(r2.provider, fallback.providers[0]);
  assert.equal(textOf(r2.message), "from the primary");
  // generate says it too.
  primary.respond(unavailable);
  backup.respond(anthropicAnswer("generated"));
  const g = await k.generate(fallback, "", [], user);
  assert.equal(g.provider, second);
});

test("structured output goes to each member in its native form", async () => {
  const { fallback } = pair(new k.GeminiProvider({ model: "gemini-backup", apiKey: "g-key", baseUrl: backup.baseUrl }));
  const schema = { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false };
  const [p0, b0] = [primary.requests.length, backup.requests.length];
  primary.respond(unavailable);
  backup.respond(geminiAnswer('{"city":"Paris"}'));
  const r = await k.step(fallback, "", new k.SimpleToolset([]), user, { output: { schema, name: "place" } });
  assert.deepEqual(r.output, { city: "Paris" });
  assert.equal(primary.requests[p0].body.response_format.type, "json_schema", "Chat Completions: response_format");
  const g = backup.requests[b0].body.generationConfig;
  assert.equal(g.responseMimeType, "application/json", "Gemini: generationConfig");
  assert.deepEqual(g.responseJsonSchema.properties, schema.properties);
});

test("fallbackOn names what moves on at once; what it does not name, and is not retried, fails on the primary", async () => {
  const saved = process.env.ANTHROPIC_API_KEY;
  delete process.env.ANTHROPIC_API_KEY;
  try {
    const keyless = new k.AnthropicProvider({ model: "claude-primary" });
    const answer = new k.OpenAIChatProvider({ model: "backup-model", apiKey: "sk-b", baseUrl: backup.baseUrl });
    const b0 = backup.requests.length;
    await assert.rejects(k.step(new k.FallbackProvider([keyless, answer]), "", new k.SimpleToolset([]), user), (e) => e.kind === "missing_key");
    assert.equal(backup.requests.length, b0, "a missing key is not an error that is retried: no move");
    backup.respond({ steps: [text("backup here"), finish(), done()] });
    const r = await k.step(new k.FallbackProvider([keyless, answer], { fallbackOn: ["missing_key"] }), "", new k.SimpleToolset([]), user);
    assert.equal(r.provider, answer);
    assert.equal(textOf(r.message), "backup here");
  } finally {
    if (saved !== undefined) process.env.ANTHROPIC_API_KEY = saved;
  }
  // A status, named by its number.
  const { second, fallback } = pair(new k.OpenAIChatProvider({ model: "backup-model", apiKey: "sk-b", baseUrl: backup.baseUrl }), { fallbackOn: [401] });
  primary.respond({ status: 401, body: { error: { message: "bad key" } } });
  backup.respond({ steps: [text("ok"), finish(), done()] });
  assert.equal((await k.step(fallback, "", new k.SimpleToolset([]), user)).provider, second);
  // The last member's error is the caller's.
  primary.respond(unavailable);
  backup.respond(unavailable);
  await assert.rejects(k.step(new k.FallbackProvider([fallback.providers[0], second]), "", new k.SimpleToolset([]), user), (e) => e instanceof k.APIStatusError && e.status === 503 && e.message.includes(backup.baseUrl.replace("/v1", "")));
});

test("an agent turn: the tool runs once on the primary, the next step moves to the backup; wire, history and servers agree", async () => {
  const { fallback } = pair(new k.AnthropicProvider({ model: "claude-backup", apiKey: "sk-backup", baseUrl: backup.baseUrl }));
  const ran = [];
  const toolset = new k.SimpleToolset([{ name: "plus", parameters: { type: "object" }, handler: ({ a, b }) => (ran.push([a, b]), String(a + b)) }]);
  const agent = new k.Agent({ provider: fallback, systemPrompt: "You add.", toolset, maxRetriesPerStep: 2, retryBackoff: { initialMs: 1, jitterMs: 0 } });
  const [p0, b0] = [primary.requests.length, backup.requests.length];
  primary.respond({ steps: [text("Adding."), toolStart(0, "call_1", "plus"), toolArgs(0, '{"a":2,"b":3}'), finish("tool_calls"), done()] });
  primary.respond(unavailable);
  primary.respond(unavailable);
  backup.respond(anthropicAnswer("It is 5."));
  const wire = [];
  await k.runSoul(agent, "2+3?", async (w) => {
    for await (const m of w.uiSide({ merge: true })) wire.push(m);
  }, new AbortController().signal);
  assert.deepEqual(ran, [[2, 3]], "the tool ran once");
  const h = agent.context.history;
  assert.deepEqual(h.map((m) => m.role), ["user", "assistant", "tool", "assistant"]);
  assert.equal(textOf(h[3]), "It is 5.");
  assert.equal(primary.requests.length - p0, 3, "one step, then two attempts of the next");
  const sent = backup.requests.slice(b0);
  assert.equal(sent.length, 1);
  const msgs = sent[0].body.messages;
  assert.deepEqual(msgs.map((m) => m.role), ["user", "assistant", "user"], "the primary's round in Anthropic's form");
  assert.equal(msgs[1].content.find((c) => c.type === "tool_use").id, "call_1");
  assert.deepEqual([msgs[2].content[0].type, msgs[2].content[0].tool_use_id, msgs[2].content[0].content], ["tool_result", "call_1", "5"]);
  const retries = wire.filter((m) => m.type === "StepRetry").map((m) => m.payload);
  assert.equal(retries.length, 2);
  assert.equal(retries[0].fallback, undefined);
  assert.deepEqual(retries[1].fallback, { index: 1, model: "claude-backup" });
  assert.equal(retries[1].next_attempt, 1);
  const by = wire.filter((m) => m.type === "StatusUpdate").map((m) => m.payload.provider);
  assert.deepEqual(by, [{ index: 0, model: "primary-model" }, { index: 1, model: "claude-backup" }]);
});

test("FallbackProvider checks what it is given", () => {
  const one = new k.ScriptedProvider(["text: x"]);
  assert.throws(() => new k.FallbackProvider([]), /non-empty array of providers/);
  assert.throws(() => new k.FallbackProvider([one, {}]), /providers\[1\] is not one of this package's providers/);
  assert.throws(() => new k.FallbackProvider([one], { fallbackOn: ["statsu"] }), /unknown error kind `statsu` \(known: status, connection/);
  assert.throws(() => new k.FallbackProvider([one], { fallbackOn: [99] }), /99 is neither an error kind nor an HTTP status/);
  assert.throws(() => new k.FallbackProvider([one], { fallbackOn: "status" }), /must be a list/);
  assert.throws(() => new k.FallbackProvider([one], { falbackOn: [] }), /did you mean `fallbackOn`/);
  // A fallback among the members gives its own members, in order.
  const two = new k.ScriptedProvider(["text: y"]);
  const nested = new k.FallbackProvider([new k.FallbackProvider([one, two])]);
  assert.deepEqual(nested.providers, [one, two]);
  assert.equal(nested.modelName, "scripted_echo");
  // Chaos goes on a member, whose own fetch it wraps; a fallback provider's members each have theirs.
  assert.throws(() => new k.ChaosProvider(nested), /wrap its members/);
});

test("a ChaosProvider member: its injected 503 moves the step to the next member", async () => {
  const flaky = new k.ChaosProvider(new k.ScriptedProvider(["text: never"]), { errorProbability: 1, errorTypes: [503], seed: 3 });
  const steady = new k.ScriptedProvider(["text: steady"]);
  const r = await k.step(new k.FallbackProvider([flaky, steady]), "", new k.SimpleToolset([]), user);
  assert.equal(r.provider, steady);
  assert.equal(textOf(r.message), "steady");
  assert.equal(flaky.injected.http, 1, "one injected 503, then the next member");
});

test("an agent turn whose primary's socket is destroyed after a call was handed on: the round is kept, the tool ran once, the backup answers the next step; wire, history and servers agree", async () => {
  const { fallback } = pair(new k.AnthropicProvider({ model: "claude-backup", apiKey: "sk-backup", baseUrl: backup.baseUrl }), { fallbackOn: ["connection"] });
  const ran = [];
  const toolset = new k.SimpleToolset([{ name: "plus", parameters: { type: "object" }, handler: ({ a, b }) => (ran.push([a, b]), String(a + b)) }]);
  const agent = new k.Agent({ provider: fallback, toolset, retryBackoff: { initialMs: 1, jitterMs: 0 } });
  const [p0, b0] = [primary.requests.length, backup.requests.length];
  // The first call is whole (its arguments parse and a second call begins); the socket dies inside the second.
  primary.respond({ steps: [text("Adding."), toolStart(0, "call_1", "plus"), toolArgs(0, '{"a":2,"b":3}'), toolStart(1, "call_2", "plus"), toolArgs(1, '{"a":'), { pause: 30 }, { destroy: true }] });
  backup.respond(anthropicAnswer("It is 5."));
  const wire = [];
  await k.runSoul(agent, "2+3?", async (w) => {
    for await (const m of w.uiSide({ merge: true })) wire.push(m);
  }, new AbortController().signal);
  assert.deepEqual(ran, [[2, 3]], "the whole call ran once; the cut-off one never");
  const h = agent.context.history;
  assert.deepEqual(h.map((m) => m.role), ["user", "assistant", "tool", "tool", "assistant"]);
  assert.deepEqual(h[1].tool_calls.map((c) => c.id), ["call_1", "call_2"]);
  assert.equal(textOf(h[2]), "5");
  assert.match(textOf(h[3]), /broke off/);
  assert.equal(textOf(h[4]), "It is 5.");
  assert.equal(wire.filter((m) => m.type === "StepRetry").length, 0, "the kept round is not void");
  const results = wire.filter((m) => m.type === "ToolResult").map((m) => m.payload.tool_call_id);
  assert.deepEqual(results.sort(), ["call_1", "call_2"], "each call the wire showed has one result");
  assert.deepEqual(wire.filter((m) => m.type === "StatusUpdate").map((m) => m.payload.provider.index), [0, 1]);
  assert.equal(primary.requests.length - p0, 1);
  const sent = backup.requests.slice(b0);
  assert.equal(sent.length, 1);
  const body = JSON.stringify(sent[0].body);
  assert.ok(body.includes("call_1") && body.includes("broke off"), "the backup is told what happened");
});
