// Sessions in real Chromium: a page keeps its session in IndexedDB (IndexedDBSessionStore) and
// talks to a loopback model streaming real SSE; the page is reloaded while an approval waits,
// while a tool runs and mid-stream, and the reloaded page goes on with its turn by itself. The
// tools' starts are counted by the server (a ledger outside the browser). Two tabs: one owner. And a
// cross-origin fetch the server does not allow: its error names the URL and says CORS.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { existsSync, readFileSync } from "node:fs";
import { extname, join, normalize } from "node:path";
import { chromium } from "playwright-core";
import { answerEvents, backgroundServer } from "./background-server.mjs";
import { CHROMIUM, SKIP_BROWSER } from "../../scripts/setup.mjs";

const root = join(import.meta.dirname, "..", "..");
const haveBrowser = existsSync(CHROMIUM);
if (!haveBrowser && !SKIP_BROWSER) throw new Error(`Chromium is missing at ${CHROMIUM}: npm test installs it; KOSONG_SKIP_BROWSER=1 leaves the browser suites out`);
const opts = { skip: haveBrowser ? false : "KOSONG_SKIP_BROWSER=1: the browser suites are NOT run", timeout: 60_000 };

const PAGE = `<!doctype html><meta charset="utf-8"><body><script type="module">
import * as k from "/pkg/browser.js";
await k.init();
const name = new URLSearchParams(location.search).get("name");
const ledger = (tool, id) => fetch("/ledger", { method: "POST", body: JSON.stringify({ tool, id }) });
const tools = new k.SimpleToolset([
  { name: "send_email", description: "", parameters: {}, needsApproval: true,
    handler: async ({ to }, ctx) => (await ledger("send_email", ctx.toolCallId), "sent to " + to) },
  { name: "slow", description: "", parameters: {},
    handler: async (_a, ctx) => { await ledger("slow", ctx.toolCallId); await fetch("/hang", { signal: ctx.signal }); return "slow done"; } },
]);
// A session whose name starts with "kept" talks to a server that keeps its answers (Responses in
// the background).
const provider = name.startsWith("kept")
  ? new k.OpenAIResponsesProvider({ model: "gpt-5-mini", apiKey: "sk-test", baseUrl: location.origin + "/kept/v1", background: true })
  : new k.OpenAIChatProvider({ model: "m", apiKey: "sk-test", baseUrl: location.origin + "/v1" });
window.__events = [];
try {
  const s = await k.Session.open(new k.IndexedDBSessionStore(name), { provider, systemPrompt: "", toolset: tools });
  window.__session = s;
  window.__recovered = s.recovered;
  (async () => { for await (const e of s.events()) window.__events.push(e); })();
  document.body.dataset.ready = "true";
} catch (e) {
  document.body.dataset.error = e.name;
}
</script>`;

let server, base, browser, kept;
const ledger = [];
let requests = 0;
let held = false;
before(async () => {
  if (!haveBrowser) return;
  // The answer of 40 pieces stops after its 20th until its page goes away.
  const text = Array.from({ length: 40 }, (_, i) => `w${i} `);
  kept = await backgroundServer({ events: (id) => answerEvents(id, { text }), cuts: [], get: "resume", holdFirstAt: 22, delayMs: 5, onHold: () => (held = true) });
  server = createServer(async (req, res) => {
    const url = new URL(req.url, "http://x");
    if (url.pathname.startsWith("/kept/")) {
      // To the background server, as the page's own origin (no CORS to set up).
      const to = await fetch(kept.baseUrl.replace(/\/v1$/, "") + url.pathname.slice("/kept".length) + url.search, { method: req.method, headers: { "content-type": "application/json" }, body: req.method === "POST" ? req : undefined, duplex: "half" });
      res.writeHead(to.status, { "content-type": to.headers.get("content-type") ?? "text/plain" });
      const reader = to.body.getReader();
      res.on("close", () => reader.cancel().catch(() => {}));
      for (;;) {
        const { value, done } = await reader.read().catch(() => ({ done: true }));
        if (done || res.destroyed) break;
        res.write(value);
      }
      return res.end();
    }
    let body = "";
    for await (const c of req) body += c;
    if (url.pathname === "/") return res.writeHead(200, { "content-type": "text/html" }).end(PAGE);
    if (url.pathname === "/ledger") {
      ledger.push(JSON.parse(body));
      return res.end("ok");
    }
    if (url.pathname === "/hang") return; // never answers: the tool runs until its page goes away
    if (url.pathname.startsWith("/pkg/")) {
      const file = normalize(join(root, url.pathname));
      if (!file.startsWith(join(root, "pkg")) || !existsSync(file)) return res.writeHead(404).end();
      const type = { ".js": "text/javascript", ".wasm": "application/wasm" }[extname(file)] ?? "application/octet-stream";
      return res.writeHead(200, { "content-type": type }).end(readFileSync(file));
    }
    if (url.pathname === "/v1/chat/completions") {
      requests++;
      const messages = JSON.parse(body).messages;
      const chunk = (delta, finish = null) => `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", model: "m", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
      res.writeHead(200, { "content-type": "text/event-stream" });
      const last = messages.at(-1);
      const user = [...messages].reverse().find((m) => m.role === "user")?.content ?? "";
      const text = typeof user === "string" ? user : JSON.stringify(user);
      if (last.role === "tool") {
        res.write(chunk({ role: "assistant", content: "Done." }));
      } else if (text.includes("stream")) {
        // Slow: a reload lands mid-answer.
        for (let i = 0; i < 40 && !res.destroyed; i++) {
          res.write(chunk({ content: `w${i} ` }));
          await new Promise((r) => setTimeout(r, 50));
        }
      } else {
        const name = text.includes("mail") ? "send_email" : "slow";
        res.write(chunk({ tool_calls: [{ index: 0, id: `call_${name}`, type: "function", function: { name, arguments: '{"to":"a@b.c"}' } }] }));
        res.write(chunk({}, "tool_calls"));
        return res.end("data: [DONE]\n\n");
      }
      res.write(chunk({}, "stop"));
      return res.end("data: [DONE]\n\n");
    }
    res.writeHead(404).end();
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${server.address().port}`;
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
});
after(async () => {
  await browser?.close();
  await kept?.close();
  if (server) {
    server.closeAllConnections?.();
    await new Promise((r) => server.close(r));
  }
});

async function open(context, name) {
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(e));
  await page.goto(`${base}/?name=${name}`);
  await page.waitForFunction(() => document.body.dataset.ready || document.body.dataset.error);
  return { page, errors };
}
const events = (page) => page.evaluate(() => window.__events.map((e) => (e.end ? { id: e.id, end: e.end } : { id: e.id, type: e.message.type, payload: e.message.payload })));
const until = async (page, pred, what) => {
  for (let i = 0; i < 400; i++) {
    const es = await events(page);
    if (pred(es)) return es;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`never: ${what}; events: ${JSON.stringify(await events(page)).slice(0, 2000)}`);
};
async function reload(page) {
  await page.reload();
  await page.waitForFunction(() => document.body.dataset.ready || document.body.dataset.error);
  assert.equal(await page.evaluate(() => document.body.dataset.error ?? null), null);
}
/** Ids from 1 up by one, one end per TurnBegin, one result per call. */
function assertConsistent(es) {
  assert.deepEqual(es.map((e) => e.id), es.map((_, i) => i + 1), "ids go up by one across the reload");
  assert.equal(es.filter((e) => e.end).length, es.filter((e) => e.type === "TurnBegin").length);
  for (const c of es.filter((e) => e.type === "ToolCall")) assert.equal(es.filter((e) => e.type === "ToolResult" && e.payload.tool_call_id === c.payload.id).length, 1, c.payload.id);
}

test("Chromium: reloaded while a needsApproval tool waits, the reloaded page's session waits again under the same id; answered there, the tool runs once", opts, async () => {
  const context = await browser.newContext();
  const { page, errors } = await open(context, "approval");
  await page.evaluate(() => void window.__session.send("mail a@b.c"));
  const asked = (await until(page, (es) => es.some((e) => e.type === "ApprovalRequest"), "the approval request")).find((e) => e.type === "ApprovalRequest");
  await reload(page);
  await until(page, (es) => es.some((e) => e.type === "ApprovalRequest"), "the request, replayed");
  await page.evaluate((id) => window.__session.respond(id, "approve"), asked.payload.id);
  assert.deepEqual(await page.evaluate(() => window.__recovered), { outcome: "done" });
  const es = await until(page, (es) => es.some((e) => e.end), "the end");
  assert.equal(es.filter((e) => e.type === "ApprovalRequest").length, 1, "asked once");
  assert.deepEqual(ledger.filter((l) => l.tool === "send_email").map((l) => l.id), ["call_send_email"]);
  assertConsistent(es);
  assert.deepEqual(errors, []);
  await context.close();
});

test("Chromium: reloaded while a tool runs, the reloaded page answers it interrupted (never runs it again) and the turn ends done", opts, async () => {
  const context = await browser.newContext();
  const { page, errors } = await open(context, "tool");
  await page.evaluate(() => void window.__session.send("slow please"));
  while (!ledger.some((l) => l.tool === "slow")) await new Promise((r) => setTimeout(r, 20));
  await reload(page);
  assert.deepEqual(await page.evaluate(() => window.__recovered), { outcome: "done" });
  const es = await until(page, (es) => es.some((e) => e.end), "the end");
  const result = es.find((e) => e.type === "ToolResult").payload.return_value;
  assert.match(result.message, /interrupted/);
  assert.equal(ledger.filter((l) => l.tool === "slow").length, 1, "the tool ran once");
  assertConsistent(es);
  assert.deepEqual(errors, []);
  await context.close();
});

test("Chromium: reloaded mid-stream, the reloaded page asks the model again and the turn ends with a whole answer", opts, async () => {
  const context = await browser.newContext();
  const { page, errors } = await open(context, "stream");
  const before = requests;
  await page.evaluate(() => void window.__session.send("stream it"));
  await until(page, (es) => es.some((e) => e.type === "ContentPart"), "text streaming");
  await reload(page);
  assert.deepEqual(await page.evaluate(() => window.__recovered), { outcome: "done" });
  const es = await until(page, (es) => es.some((e) => e.end), "the end");
  assert.ok(es.some((e) => e.type === "StepRetry"), "the cut answer is void, asked again");
  assert.equal(requests - before, 2);
  const history = await page.evaluate(() => window.__session.history);
  assert.match(history.at(-1).content.map?.((p) => p.text).join("") ?? history.at(-1).content, /w39 $/);
  assertConsistent(es);
  assert.deepEqual(errors, []);
  await context.close();
});

test("Chromium: reloaded mid-answer with a server that keeps its answers (Responses in the background), the reloaded page reads the same answer again — one POST, one GET with starting_after, one answer in the history", opts, async () => {
  const context = await browser.newContext();
  const { page, errors } = await open(context, "kept");
  await page.evaluate(() => void window.__session.send("stream it"));
  await until(page, (es) => held && es.some((e) => e.type === "Notification" && e.payload.type === "answer_kept") && es.some((e) => e.type === "ContentPart"), "the answer held mid-way, its id stored");
  await reload(page);
  assert.deepEqual(await page.evaluate(() => window.__recovered), { outcome: "done" });
  const es = await until(page, (es) => es.some((e) => e.end), "the end");
  assert.deepEqual(kept.requests.map((q) => `${q.method} ${q.path}`), ["POST /v1/responses", "GET /v1/responses/resp_1"]);
  assert.deepEqual(kept.requests[1].query, { stream: "true", starting_after: "0" });
  assert.ok(!es.some((e) => e.type === "StepRetry"), "not asked again");
  const whole = Array.from({ length: 40 }, (_, i) => `w${i} `).join("");
  assert.equal(es.filter((e) => e.type === "ContentPart").map((e) => e.payload.text).join(""), whole, "each piece told once, across the reload");
  const history = await page.evaluate(() => window.__session.history);
  assert.deepEqual(history.map((m) => m.role), ["user", "assistant"]);
  assert.equal(history[1].content.map?.((p) => p.text).join("") ?? history[1].content, whole);
  assertConsistent(es);
  assert.deepEqual(errors, []);
  await context.close();
});

test("Chromium: two tabs on one session — the second is refused with SessionLockedError; once the first goes, a new tab takes it", opts, async () => {
  const context = await browser.newContext();
  const first = await open(context, "tabs");
  const second = await open(context, "tabs");
  assert.equal(await second.page.evaluate(() => document.body.dataset.error ?? null), "SessionLockedError");
  await first.page.close();
  const third = await open(context, "tabs");
  assert.equal(await third.page.evaluate(() => document.body.dataset.error ?? null), null);
  await context.close();
});

test("Chromium: a cross-origin fetch the server does not allow fails naming the method and URL, and says CORS is the likely cause", opts, async () => {
  const context = await browser.newContext();
  const { page } = await open(context, "cors");
  // Another origin (another port) that answers without any CORS header.
  const other = createServer((req, res) => res.writeHead(200, { "content-type": "text/event-stream" }).end("data: [DONE]\n\n"));
  await new Promise((r) => other.listen(0, "127.0.0.1", r));
  try {
    const url = `http://127.0.0.1:${other.address().port}/v1`;
    const message = await page.evaluate(async (baseUrl) => {
      const k = await import("/pkg/browser.js");
      const p = new k.OpenAIChatProvider({ model: "m", apiKey: "sk-test", baseUrl });
      return k.generate(p, "", [], [{ role: "user", content: "hi" }]).then(() => "no error", (e) => `${e.name}: ${e.message}`);
    }, url);
    assert.match(message, new RegExp(`^APIConnectionError: Connection error: POST ${url.replace(/\./g, "\\.")}/chat/completions: Failed to fetch \\(in a browser, .*CORS`));
    assert.ok(!message.includes("sk-test"));
  } finally {
    other.closeAllConnections?.();
    await new Promise((r) => other.close(r));
    await context.close();
  }
});
