// Hostile environments: a redirect never carries the key or the conversation to another origin;
// a callback that makes wasm memory grow sees every part.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import * as k from "kosong-wasm";
import { startMockServer, text, finish, done, within } from "./mock-openai.mjs";

let home;
let elsewhere;
before(async () => {
  home = await startMockServer();
  elsewhere = await startMockServer();
});
after(async () => {
  await home.close();
  await elsewhere.close();
});

const KEY = "sk-test-redirect-0123456789";
const PROVIDERS = [
  ["OpenAIChatProvider", (o) => new k.OpenAIChatProvider({ model: "m", ...o })],
  ["AnthropicProvider", (o) => new k.AnthropicProvider({ model: "m", ...o })],
  ["OpenAIResponsesProvider", (o) => new k.OpenAIResponsesProvider({ model: "m", ...o })],
  ["GeminiProvider", (o) => new k.GeminiProvider({ model: "m", ...o })],
];

for (const [name, make] of PROVIDERS) {
  test(`${name}: a redirect to another origin is refused with nothing sent there (301, 302, 307, 308)`, async () => {
    for (const status of [301, 302, 307, 308]) {
      const target = `${elsewhere.baseUrl}/steal`;
      home.respond({ status, headers: { location: target }, body: {} });
      const p = make({ apiKey: KEY, baseUrl: home.baseUrl });
      const e = await k.generate(p, "secret system prompt", [], [{ role: "user", content: "the conversation" }]).then(() => null, (x) => x);
      assert.ok(e instanceof k.APIConnectionError, `${status}: ${e}`);
      assert.equal(e.kind, "redirect");
      assert.match(e.message, new RegExp(`another origin, ${elsewhere.baseUrl.replace("/v1", "").replace(/[.]/g, "\\.")}`));
      assert.ok(!e.message.includes(KEY));
      assert.equal(elsewhere.requests.length, 0, `${status}: nothing reached the other origin`);
    }
  });
}

test("a redirect within the same origin is followed, body and key included", async () => {
  home.respond({ status: 307, headers: { location: "/v1/moved/chat/completions" }, body: {} });
  home.respond({ steps: [text("here"), finish("stop"), done()] });
  const n = home.requests.length;
  const r = await k.generate(new k.OpenAIChatProvider({ model: "m", apiKey: KEY, baseUrl: home.baseUrl }), "", [], [{ role: "user", content: "hi" }]);
  assert.equal(r.message.content, "here");
  const second = home.requests[n + 1];
  assert.equal(second.url, "/v1/moved/chat/completions");
  assert.equal(second.headers.authorization, `Bearer ${KEY}`);
  assert.equal(second.body.messages[0].content, "hi");
});

test("onMessagePart sees every part when the callback makes wasm memory grow", async () => {
  const n = 10;
  home.respond({ steps: [...Array.from({ length: n }, (_, i) => text(`p${i};`)), finish("stop"), done()] });
  const seen = [];
  const big = "x".repeat(4 << 20);
  const r = await k.generate(new k.OpenAIChatProvider({ model: "m", apiKey: KEY, baseUrl: home.baseUrl }), "", [], [{ role: "user", content: "hi" }], {
    onMessagePart: (part) => {
      seen.push(part.text);
      // Calls into the package with megabytes: the instance's memory grows under the batch.
      k.Context.fromJSONL(JSON.stringify({ role: "user", content: big + seen.length }));
    },
  });
  assert.equal(r.message.content, Array.from({ length: n }, (_, i) => `p${i};`).join(""));
  assert.equal(seen.join(""), r.message.content, "no part was skipped");
});

test("a baseUrl with credentials is refused up front, without repeating them", () => {
  for (const make of PROVIDERS.map(([, m]) => m)) {
    assert.throws(() => make({ apiKey: KEY, baseUrl: "https://user:hunter22@api.example.com/v1" }), (e) => e instanceof TypeError && /must not carry credentials/.test(e.message) && !e.message.includes("hunter22"));
  }
  assert.throws(() => new k.OpenAIChatProvider({ model: "m", baseUrl: "api.example.com/v1" }), /absolute http/);
});

test("an error thrown from the package prints a short, pointed stack in Node (not the whole bundled file)", async () => {
  const { execFileSync } = await import("node:child_process");
  let stderr = "";
  try {
    execFileSync(process.execPath, ["--input-type=module", "-e", 'import { OpenAIChatProvider, generate } from "kosong-wasm"; await generate(new OpenAIChatProvider({ model: "m" }), "", [], []);'], {
      env: { ...process.env, OPENAI_API_KEY: "" },
      stdio: ["ignore", "ignore", "pipe"],
      encoding: "utf8",
    });
  } catch (e) {
    stderr = e.stderr;
  }
  assert.match(stderr, /no API key/);
  assert.ok(stderr.length < 2000, `${stderr.length} bytes on stderr`);
  assert.match(stderr, /at .*node\.js:\d+:\d+/, "the stack names a line of its own");
});

test("the memory budget: answers past it fail with a limit error naming it, the others are whole, and the instance works on", async () => {
  k.setMemoryBudget(1 << 20); // 1 MiB for what streams at once
  try {
    const piece = "y".repeat(16 << 10);
    const n = 6;
    const size = 40; // pieces: 640 KiB an answer, so two fit at once and six do not
    const gates = [];
    for (let i = 0; i < n; i++) {
      const g = { steps: [] };
      for (let j = 0; j < size; j++) g.steps.push(text(piece), { pause: 2 });
      g.steps.push(finish("stop"), done());
      home.respond(g);
    }
    const p = new k.OpenAIChatProvider({ model: "m", apiKey: KEY, baseUrl: home.baseUrl });
    const outcomes = await Promise.all(
      Array.from({ length: n }, () => k.generate(p, "", [], [{ role: "user", content: "big" }]).then((r) => r.message.content.length, (e) => e)),
    );
    const whole = outcomes.filter((o) => o === size * piece.length);
    const limited = outcomes.filter((o) => o instanceof k.ChatProviderError && o.kind === "limit");
    assert.equal(whole.length + limited.length, n, String(outcomes));
    assert.ok(whole.length >= 1 && limited.length >= 1, `${whole.length} whole, ${limited.length} stopped`);
    assert.match(limited[0].message, /memory budget of 1048576 bytes \(setMemoryBudget\)/);
    assert.deepEqual(k.memoryBudget(), { limitBytes: 1 << 20, usedBytes: 0 }, "everything was given back");
    home.respond({ steps: [text("still fine"), finish("stop"), done()] });
    assert.equal((await k.generate(p, "", [], [{ role: "user", content: "x" }])).message.content, "still fine");
  } finally {
    k.setMemoryBudget(1 << 30);
  }
});

test("an async onMessagePart sees every part while other code makes the instance allocate", async () => {
  const n = 10;
  home.respond({ steps: [...Array.from({ length: n }, (_, i) => text(`q${i};`)), finish("stop"), done()] });
  const seen = [];
  let growing = true;
  const big = "w".repeat(4 << 20);
  // Unrelated code elsewhere restores large contexts, and keeps them, while the first callback
  // waits: the instance's memory grows under the stream (every view of it is renewed). 64 of them
  // pass whatever memory the instance has free, so it grows whatever ran before.
  const kept = [];
  const start = k.memoryBytes();
  let grew;
  const hasGrown = new Promise((r) => (grew = r));
  const elsewhere = (async () => {
    for (let i = 0; growing && i < 64; i++) {
      kept.push(k.Context.fromJSONL(JSON.stringify({ role: "user", content: big + i })));
      if (k.memoryBytes() > start) grew();
      await new Promise((r) => setTimeout(r, 1));
    }
  })();
  const memory = [];
  const r = await k.generate(new k.OpenAIChatProvider({ model: "m", apiKey: KEY, baseUrl: home.baseUrl }), "", [], [{ role: "user", content: "hi" }], {
    onMessagePart: async (part) => {
      seen.push(part.text);
      memory.push(k.memoryBytes());
      if (seen.length === 1) await within(hasGrown); // gated on the growth, bounded
      await new Promise((res) => setTimeout(res, 3));
    },
  });
  growing = false;
  await elsewhere;
  assert.equal(seen.join(""), r.message.content, "no part was skipped");
  assert.equal(seen.length, n, "one callback a part");
  assert.ok(memory.at(-1) > memory[0], `the instance's memory grew while the parts were handed over (${memory[0]} → ${memory.at(-1)} bytes)`);
  kept.length = 0;
});
