// The demo server serves what the page needs, and its mock model carries a two-step,
// two-tool conversation. (The page itself in real Chromium is the browser tests' job.)
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import * as k from "kosong-wasm";
import { createDemoServer } from "../../scripts/demo.mjs";

let server;
let base;
before(async () => {
  server = createDemoServer();
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${server.address().port}`;
});
after(() => new Promise((r) => server.close(r)));

test("the page and everything it imports are served, with the right types", async () => {
  const page = await fetch(`${base}/`);
  assert.equal(page.status, 200);
  assert.match(page.url, /\/www\/index\.html$/, "the page is at a URL its relative imports resolve from");
  const html = await page.text();
  const script = new URL(html.match(/<script type="module" src="([^"]+)"/)[1], page.url);
  // The module graph as the browser walks it: every relative static import, re-export and
  // dynamic import, from the page's script down, fetched (no hand-kept list to fall behind).
  const seen = new Set();
  const walk = async (url) => {
    if (seen.has(url.href)) return;
    seen.add(url.href);
    const res = await fetch(url);
    assert.equal(res.status, 200, url.pathname);
    assert.match(res.headers.get("content-type") ?? "", /javascript/, `${url.pathname} is served as JavaScript`);
    const code = await res.text();
    for (const [, spec] of code.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)["'](\.{1,2}\/[^"']+)["']/g)) await walk(new URL(spec, url));
  };
  await walk(script);
  const paths = [...seen].map((u) => new URL(u).pathname);
  // The browser entry is one bundled module (scripts/build.mjs): the graph reaches it and stops.
  assert.ok(paths.includes("/pkg/browser.js"), `the browser entry is in the graph: ${paths.join(", ")}`);
  assert.ok(!paths.some((p) => p.startsWith("/pkg/") && p !== "/pkg/browser.js"), `the browser entry imports nothing more: ${paths.join(", ")}`);
  // …and names its .wasm beside itself, where the server has it.
  const entry = await (await fetch(new URL("/pkg/browser.js", script))).text();
  assert.match(entry, /new URL\("\.\/wasm\/kosong_wasm_bg\.wasm", import\.meta\.url\)/);
  const wasm = await fetch(new URL("/pkg/wasm/kosong_wasm_bg.wasm", script));
  assert.equal(wasm.status, 200);
  assert.equal(wasm.headers.get("content-type"), "application/wasm");
  assert.equal((await fetch(`${base}/../package.json`)).status, 404);
});

test("the mock model streams a two-step conversation with two parallel tool calls", async () => {
  const provider = new k.OpenAIChatProvider({ model: "mock", baseUrl: `${base}/mock/v1` });
  const tools = new k.SimpleToolset([
    { name: "search", description: "", parameters: {}, handler: ({ query }) => `${query}: sunny` },
    { name: "clock", description: "", parameters: {}, handler: ({ timezone }) => `${timezone}: noon` },
  ]);
  const agent = new k.Agent({ provider, systemPrompt: "", toolset: tools });
  const seen = [];
  await k.runSoul(agent, "weather and time?", async (w) => { for await (const m of w.uiSide({ merge: true })) seen.push(m); }, new AbortController().signal);
  const calls = seen.filter((m) => m.type === "ToolCall").map((m) => m.payload.function.name);
  assert.deepEqual(calls, ["search", "clock"]);
  assert.match(JSON.stringify(agent.context.history.at(-1)), /Paris: sunny.*Asia\/Tokyo: noon/);
});

test("the mock model's broken stream: the connection drops mid-way through the second call, the round is salvaged, the turn goes on", async () => {
  const provider = new k.OpenAIChatProvider({ model: "mock", baseUrl: `${base}/mock/v1` });
  const ran = [];
  const tools = new k.SimpleToolset([
    { name: "search", description: "", parameters: {}, handler: ({ query }) => (ran.push("search"), `${query}: sunny`) },
    { name: "clock", description: "", parameters: {}, handler: ({ timezone }) => (ran.push("clock"), `${timezone}: noon`) },
  ]);
  const agent = new k.Agent({ provider, systemPrompt: "", toolset: tools });
  const seen = [];
  await k.runSoul(agent, "a broken stream, please", async (w) => { for await (const m of w.uiSide({ merge: true })) seen.push(m); }, new AbortController().signal);
  assert.deepEqual(ran, ["search"], "the cut-off call never ran");
  const results = seen.filter((m) => m.type === "ToolResult").map((m) => [m.payload.tool_call_id, m.payload.return_value.display[0]?.text ?? ""]);
  assert.deepEqual(results, [["call_search", ""], ["call_clock", "Input cut off"]]);
  assert.deepEqual(agent.context.history.map((m) => m.role), ["user", "assistant", "tool", "tool", "assistant"]);
  assert.match(JSON.stringify(agent.context.history.at(-1)), /Paris: sunny/);
});

test("the mock model's scripted failures happen every time they are asked for, not once per server", async () => {
  const provider = new k.OpenAIChatProvider({ model: "mock", baseUrl: `${base}/mock/v1` });
  for (let ask = 1; ask <= 3; ask++) {
    const ran = [];
    const tools = new k.SimpleToolset([
      { name: "search", description: "", parameters: {}, handler: ({ query }) => (ran.push("search"), `${query}: sunny`) },
      { name: "clock", description: "", parameters: {}, handler: ({ timezone }) => (ran.push("clock"), `${timezone}: noon`) },
    ]);
    // A new conversation each time: the same question, so the same first request.
    const flaky = new k.Agent({ provider, systemPrompt: "", toolset: tools, retryBackoff: { initialMs: 1, maxMs: 1, jitterMs: 0 } });
    const seen = [];
    await k.runSoul(flaky, "a flaky question", async (w) => { for await (const m of w.uiSide({ merge: true })) seen.push(m); }, new AbortController().signal);
    const retries = seen.filter((m) => m.type === "StepRetry").map((m) => m.payload.status_code);
    assert.deepEqual(retries, [500], `ask ${ask}: the 500, then the retry through`);
    const broken = new k.Agent({ provider, systemPrompt: "", toolset: tools });
    const cut = [];
    await k.runSoul(broken, "a broken stream, please", async (w) => { for await (const m of w.uiSide({ merge: true })) cut.push(m); }, new AbortController().signal);
    const cutOff = cut.filter((m) => m.type === "ToolResult" && m.payload.return_value.display[0]?.text === "Input cut off");
    assert.equal(cutOff.length, 1, `ask ${ask}: the stream broke again`);
  }
});

test("offered the Worker's tools (examples/worker), the mock model calls them: clock and add at once, send_email with its approval", async () => {
  const provider = new k.OpenAIChatProvider({ model: "mock", baseUrl: `${base}/mock/v1` });
  const asked = [];
  const tools = () => new k.SimpleToolset([
    { name: "clock", parameters: { type: "object", properties: { timezone: { type: "string" } } }, handler: ({ timezone }) => `${timezone}: noon` },
    { name: "add", parameters: { type: "object", properties: { numbers: { type: "array" } } }, handler: ({ numbers }) => String(numbers.reduce((a, b) => a + b, 0)) },
    { name: "send_email", parameters: { type: "object", properties: { to: { type: "string" }, subject: { type: "string" } } }, handler: async ({ to, subject }, ctx) => {
      asked.push(subject);
      return (await ctx.requestApproval({ action: "send email", description: `Send "${subject}" to ${to}` })) ? `sent to ${to}` : ctx.rejection();
    } },
  ]);
  const turn = async (question) => {
    const agent = new k.Agent({ provider, systemPrompt: "", toolset: tools() });
    const seen = [];
    await k.runSoul(agent, question, async (w) => {
      for await (const m of w.uiSide({ merge: true })) {
        seen.push(m);
        if (m.type === "ApprovalRequest") w.respond(m.payload.id, "approve");
      }
    }, new AbortController().signal);
    return { agent, seen };
  };
  const first = await turn("what time is it?");
  assert.deepEqual(first.seen.filter((m) => m.type === "ToolCall").map((m) => m.payload.function.name), ["clock", "add"]);
  assert.match(JSON.stringify(first.agent.context.history.at(-1)), /Europe\/Paris: noon.*42/);
  const sum = await turn("3 + 4 + 5?");
  assert.match(JSON.stringify(sum.agent.context.history.at(-1)), /12/);
  const mail = await turn("send an email: the report is ready");
  assert.deepEqual(asked, ["the report is ready"]);
  assert.equal(mail.seen.filter((m) => m.type === "ApprovalRequest").length, 1, "the email waited for its approval");
  assert.match(JSON.stringify(mail.agent.context.history.at(-1)), /sent to ada@example\.com/);
});

test("the demo's tools: the calculator parses arithmetic without eval and rejects anything else", async () => {
  const { calculate } = await import("../../www/tools.js");
  assert.equal(calculate("17 * 23 + 4"), 395);
  assert.equal(calculate("2 ^ 3 ^ 2"), 512);
  assert.equal(calculate("-(1.5 + 2.5) / 2"), -2);
  assert.throws(() => calculate("alert(1)"), /expected a number/);
  assert.throws(() => calculate("1 + 2)"), /unexpected character/);
});

test("npm run demo takes the next free port when its port is taken", async () => {
  const { listenFrom } = await import("../../scripts/demo.mjs");
  const { createServer } = await import("node:http");
  const taken = createServer();
  await new Promise((r) => taken.listen(0, "127.0.0.1", r));
  const busy = taken.address().port;
  const demo = createDemoServer();
  try {
    const port = await listenFrom(demo, busy);
    assert.notEqual(port, busy);
    assert.ok(port > busy && port <= busy + 20, `got ${port} after ${busy}`);
    assert.equal((await fetch(`http://127.0.0.1:${port}/www/index.html`)).status, 200);
  } finally {
    await new Promise((r) => demo.close(r));
    await new Promise((r) => taken.close(r));
  }
});
