// Every provider through the built package against a loopback server speaking its format:
// the fixture streams of tests/fixtures (the same answer in each provider's documented
// format), served event by event. After the event that completes the first tool call, the
// server waits until that tool has run: a tool dispatched only at the end of the stream
// would leave the server waiting, and the test fails.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import * as k from "kosong-wasm";
import { startMockServer, gate, text, finish, done } from "./mock-openai.mjs";

let server;
before(async () => (server = await startMockServer()));
after(async () => server.close());

const KEY = "sk-provider-secret-0123456789";

/** A fixture split into its events, each with its blank line. */
function events(name) {
  const text = readFileSync(new URL(`../fixtures/${name}.sse`, import.meta.url), "utf8");
  return text.split("\n\n").filter((e) => e.trim()).map((e) => `${e}\n\n`);
}

const cases = [
  { name: "anthropic", make: (o) => new k.AnthropicProvider(o), model: "claude-sonnet-4-5", firstCallDone: '"type":"content_block_stop","index":2', path: "/v1/messages", keyHeader: ["x-api-key", KEY], ids: ["toolu_01A", "toolu_01B"] },
  { name: "responses", make: (o) => new k.OpenAIResponsesProvider(o), model: "gpt-5", firstCallDone: '"sequence_number":19,', path: "/v1/responses", keyHeader: ["authorization", `Bearer ${KEY}`], ids: ["call_A", "call_B"] },
  { name: "gemini", make: (o) => new k.GeminiProvider(o), model: "gemini-2.5-flash", firstCallDone: "CiQBVKhc7sigParis", path: "/v1/models/gemini-2.5-flash:streamGenerateContent?alt=sse", keyHeader: ["x-goog-api-key", KEY], ids: null },
  { name: "kimi", make: (o) => new k.KimiProvider(o), model: "kimi-k2-thinking", firstCallDone: '"id":"get_weather:1"', path: "/v1/chat/completions", keyHeader: ["authorization", `Bearer ${KEY}`], ids: ["get_weather:0", "get_weather:1"] },
];

for (const c of cases) {
  test(`${c.name}: a step streams think, text and two calls; the first tool runs while the model still streams`, async () => {
    const order = [];
    const firstToolRan = gate();
    const steps = [];
    for (const e of events(c.name)) {
      steps.push(e);
      if (e.includes(c.firstCallDone)) {
        steps.push({ mark: () => order.push("server: first call complete, waiting") });
        steps.push({ wait: firstToolRan.promise, maxWait: 10_000 });
        steps.push({ mark: () => order.push("server: rest of the stream") });
      }
    }
    server.respond({ steps });
    const toolset = new k.SimpleToolset([
      {
        name: "get_weather",
        description: "The weather in a city",
        parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
        handler: async ({ city }) => {
          order.push(`tool: ${city}`);
          if (city === "Paris") firstToolRan.open();
          return city === "Paris" ? "Sunny, 24°C" : "Rain, 18°C";
        },
      },
    ]);
    const parts = [];
    const provider = c.make({ model: c.model, apiKey: KEY, baseUrl: server.baseUrl, thinking: "high" });
    const result = await k.step(provider, "You are terse.", toolset, [{ role: "user", content: "Weather in Paris and Tokyo?" }], {
      onMessagePart: (p) => parts.push(p),
    });
    const results = await result.toolResults();

    assert.deepEqual(order.slice(0, 3), ["server: first call complete, waiting", "tool: Paris", "server: rest of the stream"]);
    assert.equal(result.message.content[0].type, "think");
    assert.equal(result.message.content[0].think, "The user wants the weather.");
    assert.deepEqual(result.message.content[1], { type: "text", text: "Checking both cities." });
    assert.equal(result.toolCalls.length, 2);
    if (c.ids) assert.deepEqual(result.toolCalls.map((t) => t.id), c.ids);
    assert.deepEqual(result.toolCalls.map((t) => JSON.parse(t.function.arguments).city), ["Paris", "Tokyo"]);
    assert.deepEqual(results.map((r) => r.tool_call_id), result.toolCalls.map((t) => t.id));
    assert.deepEqual(results.map((r) => r.return_value.output), ["Sunny, 24°C", "Rain, 18°C"]);
    assert.equal(result.usage.input_cache_read, 2000);
    assert.ok(parts.some((p) => p.type === "think"));

    const req = server.requests.at(-1);
    assert.equal(req.url, c.path);
    assert.equal(req.headers[c.keyHeader[0]], c.keyHeader[1]);
    assert.ok(!req.url.includes(KEY), "the key is never in the URL");
  });
}

test("a second turn sends the first turn back in each provider's shape", async () => {
  for (const c of cases) {
    server.respond({ steps: events(c.name) });
    const toolset = new k.SimpleToolset([{ name: "get_weather", description: "", parameters: { type: "object" }, handler: ({ city }) => `ok ${city}` }]);
    const provider = c.make({ model: c.model, apiKey: KEY, baseUrl: server.baseUrl, thinking: "low" });
    const history = [{ role: "user", content: "Weather?" }];
    const r = await k.step(provider, "", toolset, history);
    history.push(r.message);
    for (const res of await r.toolResults()) history.push({ role: "tool", content: res.return_value.output, tool_call_id: res.tool_call_id });
    server.respond({ steps: events(c.name) });
    await k.step(provider, "", toolset, history);
    const body = server.requests.at(-1).body;
    const text = JSON.stringify(body);
    // The call ids and the results made it back, and so did the signed reasoning.
    for (const call of r.toolCalls) {
      if (c.name !== "gemini") assert.ok(text.includes(call.id), `${c.name}: ${call.id} sent back`);
    }
    assert.ok(text.includes("ok Paris") && text.includes("ok Tokyo"), `${c.name}: results sent back`);
    if (c.name === "anthropic") assert.ok(text.includes("EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"));
    if (c.name === "responses") assert.ok(text.includes("gAAAAABoEncryptedReasoning=="));
    if (c.name === "gemini") assert.ok(text.includes("CiQBVKhc7sigParis"));
    if (c.name === "kimi") assert.ok(text.includes('"reasoning_content":"The user wants the weather."'));
  }
});

test("Anthropic web search: server-tool blocks and cited text reach the caller, no tool runs for them, and the next turn sends them back", async () => {
  const ev = (o) => `event: ${o.type}\ndata: ${JSON.stringify(o)}\n\n`;
  const cite = { type: "web_search_result_location", url: "https://example.org/shannon", title: "Shannon", encrypted_index: "Eo8B", cited_text: "born April 30, 1916" };
  const result = { type: "web_search_tool_result", tool_use_id: "srvtoolu_1", content: [{ type: "web_search_result", title: "Shannon", url: "https://example.org/shannon", encrypted_content: "EqgfCio" }] };
  server.respond({
    steps: [
      ev({ type: "message_start", message: { id: "msg_1", content: [], usage: { input_tokens: 10, output_tokens: 1 } } }),
      ev({ type: "content_block_start", index: 0, content_block: { type: "server_tool_use", id: "srvtoolu_1", name: "web_search", input: {} } }),
      ev({ type: "content_block_delta", index: 0, delta: { type: "input_json_delta", partial_json: '{"query":"shannon"}' } }),
      ev({ type: "content_block_stop", index: 0 }),
      ev({ type: "content_block_start", index: 1, content_block: result }),
      ev({ type: "content_block_stop", index: 1 }),
      ev({ type: "content_block_start", index: 2, content_block: { type: "text", text: "" } }),
      ev({ type: "content_block_delta", index: 2, delta: { type: "citations_delta", citation: cite } }),
      ev({ type: "content_block_delta", index: 2, delta: { type: "text_delta", text: "He was born in 1916." } }),
      ev({ type: "content_block_stop", index: 2 }),
      ev({ type: "message_delta", delta: { stop_reason: "end_turn" }, usage: { output_tokens: 20 } }),
      ev({ type: "message_stop" }),
    ],
  });
  let ran = 0;
  const toolset = new k.SimpleToolset([{ name: "web_search", description: "a client tool of the same name", parameters: { type: "object" }, handler: () => (ran++, "client") }]);
  const provider = new k.AnthropicProvider({ model: "claude-sonnet-4-5", apiKey: KEY, baseUrl: server.baseUrl });
  const parts = [];
  const history = [{ role: "user", content: "When was Shannon born?" }];
  const r = await k.step(provider, "", toolset, history, { onMessagePart: (p) => parts.push(p) });
  assert.deepEqual(r.toolCalls, []);
  assert.equal(ran, 0, "a server tool never reaches the toolset");
  const content = r.message.content;
  assert.equal(content.length, 3);
  assert.deepEqual(content[0].extras.server_tool, { provider: "anthropic", value: { type: "server_tool_use", id: "srvtoolu_1", name: "web_search", input: { query: "shannon" } } });
  assert.deepEqual(content[1].extras.server_tool.value, result);
  assert.deepEqual(content[2], { type: "text", text: "He was born in 1916.", extras: { citations: [cite] } });
  assert.ok(parts.some((p) => p.extras?.citations), "the citation streams to onMessagePart");
  history.push(r.message, { role: "user", content: "Thanks" });
  server.respond({ steps: events("anthropic") });
  await k.step(provider, "", toolset, history);
  const sent = server.requests.at(-1).body.messages[1].content;
  assert.deepEqual(sent.map((b) => b.type), ["server_tool_use", "web_search_tool_result", "text"]);
  assert.deepEqual(sent[2].citations, [cite]);
});

test("errors are the same classes for every provider, with status, request id, retry-after and no key", async () => {
  const idHeader = { anthropic: "request-id", responses: "x-request-id", gemini: "x-request-id", kimi: "x-trace-id" };
  for (const c of cases) {
    server.respond({
      status: 429,
      headers: { "retry-after": "2", [idHeader[c.name]]: `req-${c.name}` },
      body: { error: { type: "rate_limit_error", message: `Slow down, ${KEY}` } },
    });
    const provider = c.make({ model: c.model, apiKey: KEY, baseUrl: server.baseUrl });
    const err = await k.generate(provider, "", [], [{ role: "user", content: "hi" }]).then(() => null, (e) => e);
    assert.ok(err instanceof k.APIStatusError, `${c.name}: ${err}`);
    assert.equal(err.status, 429);
    assert.equal(err.retryAfterMs, 2000);
    assert.equal(err.requestId, `req-${c.name}`);
    assert.match(err.message, /Slow down/);
    assert.ok(!err.message.includes(KEY), `${c.name}: the key is redacted`);
  }
  // Error events inside a 200 stream.
  const midStream = {
    anthropic: ['event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n', 529],
    responses: ['event: error\ndata: {"type":"error","code":"rate_limit_exceeded","message":"Rate limit reached"}\n\n', 429],
    gemini: ['data: {"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}\n\n', 503],
    kimi: ['data: {"error":{"message":"engine overloaded","type":"engine_overloaded_error","code":429}}\n\n', 429],
  };
  for (const c of cases) {
    const [event, status] = midStream[c.name];
    server.respond({ steps: [event] });
    const err = await k.generate(c.make({ model: c.model, baseUrl: server.baseUrl }), "", [], [{ role: "user", content: "hi" }]).then(() => null, (e) => e);
    assert.ok(err instanceof k.APIStatusError, `${c.name}: ${err}`);
    assert.equal(err.status, status, c.name);
  }
  // A stream that stops short.
  for (const c of cases) {
    server.respond({ steps: events(c.name).slice(0, 3) });
    const err = await k.generate(c.make({ model: c.model, baseUrl: server.baseUrl }), "", [], [{ role: "user", content: "hi" }]).then(() => null, (e) => e);
    assert.ok(err instanceof k.ChatProviderError && err.name === "ChatProviderError", `${c.name}: ${err}`);
    assert.match(err.message, /ended before/);
  }
  // Nobody listening, and a server that never answers.
  for (const c of cases) {
    const err = await k.generate(c.make({ model: c.model, baseUrl: "http://127.0.0.1:9/v1" }), "", [], [{ role: "user", content: "hi" }]).then(() => null, (e) => e);
    assert.ok(err instanceof k.APIConnectionError, `${c.name}: ${err}`);
    server.respond({ noHeaders: true });
    const t = await k.generate(c.make({ model: c.model, baseUrl: server.baseUrl, timeoutMs: 200 }), "", [], [{ role: "user", content: "hi" }]).then(() => null, (e) => e);
    assert.ok(t instanceof k.APITimeoutError, `${c.name}: ${t}`);
  }
});

test("provider options are checked, and withThinking gives a new provider of the same kind", () => {
  for (const c of cases) {
    const p = c.make({ model: c.model });
    const q = p.withThinking("medium");
    assert.equal(q.constructor, p.constructor);
    assert.equal(q.thinkingEffort, "medium");
    assert.equal(p.thinkingEffort, null);
    assert.equal(q.modelName, c.model);
    assert.throws(() => c.make({ model: c.model, thinking: "loud" }), TypeError);
    assert.throws(() => c.make({ model: c.model, maxTokens: -1 }), TypeError);
    assert.throws(() => c.make({ model: c.model, headers: { a: 1 } }), TypeError);
    assert.throws(() => c.make({}), TypeError);
  }
  assert.equal(new k.KimiProvider({ model: "m" }).name, "kimi");
  assert.equal(new k.AnthropicProvider({ model: "m" }).name, "anthropic");
  assert.equal(new k.OpenAIResponsesProvider({ model: "m" }).name, "openai-responses");
  assert.equal(new k.GeminiProvider({ model: "m" }).name, "gemini");
});

test("history the provider cannot express is a clear error before anything is sent", async () => {
  const before = server.requests.length;
  const history = [
    { role: "user", content: "hi" },
    { role: "assistant", content: "", tool_calls: [{ type: "function", id: "a", function: { name: "f", arguments: "{}" } }] },
  ];
  const err = await k.generate(new k.GeminiProvider({ model: "gemini-2.5-flash", baseUrl: server.baseUrl }), "", [], history).then(() => null, (e) => e);
  assert.ok(err instanceof k.ChatProviderError);
  assert.match(err.message, /no result for tool call `a`/);
  const audio = [{ role: "user", content: [{ type: "audio_url", audio_url: { url: "https://x/a.mp3" } }] }];
  const err2 = await k.generate(new k.AnthropicProvider({ model: "claude-sonnet-4-5", baseUrl: server.baseUrl }), "", [], audio).then(() => null, (e) => e);
  assert.match(err2.message, /no audio or video/);
  assert.equal(server.requests.length, before);
});

test("a file part reaches a Chat Completions server as its file part; a provider that cannot take it refuses before sending", async () => {
  const pdf = `data:application/pdf;base64,${Buffer.from("%PDF-1.4 tiny").toString("base64")}`;
  const history = [{ role: "user", content: [{ type: "text", text: "Summarise this." }, { type: "file", file: { url: pdf, filename: "report.pdf" } }] }];
  server.respond({ steps: [text("A tiny PDF."), finish("stop"), done()] });
  const r = await k.generate(new k.OpenAIChatProvider({ model: "m", baseUrl: server.baseUrl, apiKey: "sk-1" }), "", [], history);
  assert.match(JSON.stringify(r.message.content), /A tiny PDF/);
  const sent = server.requests.at(-1).body.messages[0].content;
  assert.deepEqual(sent[1], { type: "file", file: { file_data: pdf, filename: "report.pdf" } });
  const before = server.requests.length;
  const err = await k.generate(new k.KimiProvider({ model: "kimi-k2.6", baseUrl: server.baseUrl, apiKey: "sk-1" }), "", [], history).then(() => null, (e) => e);
  assert.ok(err instanceof k.ChatProviderError && err.kind === "invalid_request", String(err));
  assert.match(err.message, /the Kimi API cannot take the file `report\.pdf`/);
  assert.equal(server.requests.length, before, "nothing was sent");
});

test("options a new user gets wrong fail loudly: unknown names say the closest, baseURL is an alias, a missing key is an error before any request", async () => {
  for (const [bad, near] of [["base_url", "baseUrl"], ["api_key", "apiKey"], ["apikey", "apiKey"], ["maxtokens", "maxTokens"], ["timeout", "timeoutMs"]]) {
    assert.throws(() => new k.OpenAIChatProvider({ model: "m", [bad]: "x" }), (e) => e instanceof TypeError && e.message.includes(`unknown option \`${bad}\``) && e.message.includes(`did you mean \`${near}\``), bad);
  }
  assert.throws(() => new k.AnthropicProvider({ model: "m", onPart: () => {} }), /unknown option `onPart`/);
  // The name is checked before the values: `modle` is a misspelt `model`, not a missing one.
  assert.throws(() => new k.OpenAIChatProvider({ modle: "gpt-4.1" }), (e) => e instanceof TypeError && /unknown option `modle`; did you mean `model`\?/.test(e.message));
  // Every options bag of the package says the same of a misspelt name.
  const didYouMean = (bad, near) => (e) => e instanceof TypeError && e.message.includes(`unknown option \`${bad}\`; did you mean \`${near}\`?`);
  const scripted = () => new k.ScriptedProvider(["text: hi"]);
  const go = [{ role: "user", content: "go" }];
  await assert.rejects(k.generate(scripted(), "", [], go, { onMessagepart: () => {} }), didYouMean("onMessagepart", "onMessagePart"));
  await assert.rejects(k.step(scripted(), "", new k.SimpleToolset(), go, { onToolResults: () => {} }), didYouMean("onToolResults", "onToolResult"));
  await assert.rejects(k.step(scripted(), "", new k.SimpleToolset(), go, { singal: AbortSignal.timeout(1000) }), didYouMean("singal", "signal"));
  assert.throws(() => new k.Agent({ provider: scripted(), sytemPrompt: "x" }), didYouMean("sytemPrompt", "systemPrompt"));
  assert.throws(() => new k.Agent({ provider: scripted(), maxSteps: 3 }), didYouMean("maxSteps", "maxStepsPerTurn"));
  assert.throws(() => new k.SimpleToolset([], { validator: () => null }), didYouMean("validator", "validate"));
  await assert.rejects(k.McpToolset.fromClient({ listTools: async () => ({ tools: [] }), callTool: async () => ({}) }, { timeout: 5 }), didYouMean("timeout", "timeoutMs"));
  await assert.rejects(k.runSoul(new k.Agent({ provider: scripted() }), "hi", async () => {}, AbortSignal.timeout(5000), { recoder: null }), didYouMean("recoder", "recorder"));
  assert.throws(() => k.Context.fromJSONL("", { onrewrite: () => {} }), didYouMean("onrewrite", "onRewrite"));
  assert.throws(() => new k.Context({ systemprompt: "x" }), didYouMean("systemprompt", "systemPrompt"));
  assert.throws(() => new k.ChaosProvider(scripted(), { errorProbabilty: 0.5 }), didYouMean("errorProbabilty", "errorProbability"));
  await assert.rejects(k.uiMessageStream(new k.Agent({ provider: scripted() }), "hi", AbortSignal.timeout(5000), { messageID: "m" }).next(), didYouMean("messageID", "messageId"));
  // What each accepts still works.
  const fine = await k.generate(scripted(), "", [], go, { onMessagePart: () => {}, limits: {}, signal: AbortSignal.timeout(5000) });
  assert.match(JSON.stringify(fine.message.content), /hi/);
  assert.throws(() => new k.AnthropicProvider({ model: "m", reasoningKey: "r" }), /unknown option `reasoningKey`/, "an option of another provider");
  assert.throws(() => new k.OpenAIChatProvider({ model: "m", baseUrl: "http://a/v1", baseURL: "http://b/v1" }), /differ/);

  // baseURL, the OpenAI SDK's spelling, works.
  server.respond({ steps: [text("aliased"), finish(), done()] });
  const r = await k.generate(new k.OpenAIChatProvider({ model: "m", baseURL: server.baseUrl, apiKey: "sk-1" }), "", [], [{ role: "user", content: "hi" }]);
  assert.equal(r.message.content, "aliased");

  // No key for the provider's own host: the environment (as the SDKs read it), else an error, and nothing sent.
  const seen = [];
  const fetch = async (url, init) => {
    seen.push({ url, auth: new Headers(init.headers).get("authorization") ?? new Headers(init.headers).get("x-api-key") });
    throw new Error("offline");
  };
  const saved = { OPENAI_API_KEY: process.env.OPENAI_API_KEY, ANTHROPIC_API_KEY: process.env.ANTHROPIC_API_KEY };
  try {
    delete process.env.OPENAI_API_KEY;
    delete process.env.ANTHROPIC_API_KEY;
    const e = await k.generate(new k.OpenAIChatProvider({ model: "m", fetch }), "", [], [{ role: "user", content: "hi" }]).then(() => null, (x) => x);
    assert.ok(e instanceof k.ChatProviderError && e.kind === "missing_key" && /OPENAI_API_KEY/.test(e.message), String(e));
    assert.equal(seen.length, 0, "nothing was sent");
    // An empty or blank key (an .env line `OPENAI_API_KEY=`) is a missing one, never sent.
    for (const apiKey of ["", "  "]) {
      const empty = await k.generate(new k.OpenAIChatProvider({ model: "m", apiKey, fetch }), "", [], [{ role: "user", content: "hi" }]).then(() => null, (x) => x);
      assert.ok(empty instanceof k.ChatProviderError && empty.kind === "missing_key" && /`apiKey` is empty/.test(empty.message), String(empty));
    }
    assert.equal(seen.length, 0, "nothing was sent");
    process.env.ANTHROPIC_API_KEY = "sk-ant-from-env";
    await k.generate(new k.AnthropicProvider({ model: "m", fetch }), "", [], [{ role: "user", content: "hi" }]).catch(() => {});
    assert.deepEqual(seen, [{ url: "https://api.anthropic.com/v1/messages", auth: "sk-ant-from-env" }]);
  } finally {
    for (const [n, v] of Object.entries(saved)) v === undefined ? delete process.env[n] : (process.env[n] = v);
  }
});
