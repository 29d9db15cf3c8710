// The package as users get it: `npm pack`, installed from the tarball into a temporary
// project, then imported from a Node ESM script, from a Vite build of a small page, from the
// Worker example (bundled by `wrangler deploy --dry-run` and run in real workerd through
// miniflare, against the loopback mock LLM), and type-checked with `tsc --strict`.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { extname, join } from "node:path";
import { gzipSync } from "node:zlib";
import { Miniflare } from "miniflare";
import { startMockServer, text, toolStart, toolArgs, finish, usage, done, gate, sleep } from "./mock-openai.mjs";

const root = join(import.meta.dirname, "..", "..");
const bin = (name) => join(root, "node_modules", ".bin", name);
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

let dir, tarball, llm, mf, workerOptions;
const sh = (cmd, args, cwd = dir) => execFileSync(cmd, args, { cwd, encoding: "utf8", env: { ...process.env, WRANGLER_SEND_METRICS: "false", NO_UPDATE_NOTIFIER: "1" } });

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "kosong-packed-"));
  const packed = JSON.parse(sh("npm", ["pack", "--json", "--pack-destination", dir], root));
  tarball = join(dir, packed[0].filename);
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
  sh("npm", ["install", "--no-audit", "--no-fund", "--offline", tarball]);
  llm = await startMockServer();
});
after(async () => {
  await mf?.dispose();
  await llm?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test("the tarball holds the package and nothing else; its size", () => {
  const packed = JSON.parse(sh("npm", ["pack", "--dry-run", "--json"], root))[0];
  const files = packed.files.map((f) => f.path).sort();
  assert.ok(files.includes("pkg/wasm/kosong_wasm_bg.wasm") && files.includes("index.d.ts") && files.includes("pkg/node.js"));
  assert.ok(files.every((f) => f.startsWith("pkg/") || ["index.d.ts", "README.md", "package.json", "LICENSE"].includes(f)), files.join(", "));
  const wasm = readFileSync(join(dir, "node_modules", "kosong-wasm", "pkg", "wasm", "kosong_wasm_bg.wasm"));
  console.log(`packed: ${statSync(tarball).size} bytes; .wasm ${wasm.length} bytes, ${gzipSync(wasm, { level: 9 }).length} gzip`);
});

test("a Node ESM script imports it by name and runs a step", () => {
  writeFileSync(
    join(dir, "node-script.mjs"),
    `import { ScriptedProvider, SimpleToolset, step } from "kosong-wasm";
const tools = new SimpleToolset([{ name: "add", description: "", parameters: {}, handler: ({ a, b }) => String(a + b) }]);
const r = await step(new ScriptedProvider(['tool_call: {"id": "c1", "name": "add", "arguments": "{\\\\"a\\\\": 2, \\\\"b\\\\": 3}"}']), "", tools, []);
console.log(JSON.stringify((await r.toolResults())[0].return_value.output));`,
  );
  assert.equal(sh(process.execPath, ["node-script.mjs"]).trim(), '"5"');
});

test("tsc --noEmit --strict accepts a program that uses every export of the API", () => {
  cpSync(join(root, "examples", "typescript", "all-exports.ts"), join(dir, "all-exports.ts"));
  writeFileSync(
    join(dir, "tsconfig.json"),
    JSON.stringify({ compilerOptions: { strict: true, noEmit: true, target: "es2022", module: "nodenext", moduleResolution: "nodenext", lib: ["es2022", "dom", "dom.iterable"], skipLibCheck: false }, files: ["all-exports.ts"] }),
  );
  sh(process.execPath, [join(root, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.json"]);
});

test("a Vite build of a small page bundles it, and the built page runs a step in Chromium with the .wasm resolved", async (t) => {
  const app = join(dir, "vite-app");
  cpSync(join(root, "tests", "js", "vite-app"), app, { recursive: true });
  sh(process.execPath, [join(root, "node_modules", "vite", "bin", "vite.js"), "build", "--logLevel", "warn"], app);
  const assets = readdirSync(join(app, "dist", "assets"));
  const wasm = assets.find((f) => f.endsWith(".wasm"));
  assert.ok(wasm, `a .wasm asset is emitted: ${assets.join(", ")}`);
  const js = assets.filter((f) => f.endsWith(".js")).map((f) => readFileSync(join(app, "dist", "assets", f), "utf8")).join("\n");
  assert.ok(js.includes(wasm), "the bundle refers to the emitted .wasm");
  if (!existsSync(CHROMIUM)) {
    if (process.env.CI) assert.fail(`Chromium is missing at ${CHROMIUM}`);
    t.skip(`no Chromium at ${CHROMIUM}`);
    return;
  }
  const types = { ".html": "text/html", ".js": "text/javascript", ".wasm": "application/wasm" };
  const server = createServer((req, res) => {
    const path = join(app, "dist", req.url === "/" ? "index.html" : req.url.split("?")[0]);
    if (!path.startsWith(join(app, "dist")) || !existsSync(path)) return res.writeHead(404).end();
    res.writeHead(200, { "content-type": types[extname(path)] ?? "application/octet-stream" }).end(readFileSync(path));
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const { chromium } = await import("playwright-core");
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync"] });
  try {
    const page = await browser.newPage();
    await page.goto(`http://127.0.0.1:${server.address().port}/`);
    await page.waitForFunction(() => document.title.startsWith("result:") || document.title.startsWith("error:"), null, { timeout: 20_000 });
    assert.equal(await page.title(), "result: 5");
  } finally {
    await browser.close();
    server.close();
  }
});

// ---- the Worker ---------------------------------------------------------------------------

async function startWorker() {
  const app = join(dir, "worker");
  cpSync(join(root, "examples", "worker", "src"), join(app, "src"), { recursive: true });
  cpSync(join(root, "examples", "worker", "wrangler.toml"), join(app, "wrangler.toml"));
  // The worker imports "kosong-wasm" by name: from the consumer project's node_modules.
  sh(bin("wrangler"), ["deploy", "--dry-run", "--outdir", "dist"], app);
  const script = join(app, "dist", "index.js");
  assert.match(readFileSync(script, "utf8"), /\.wasm"/, "the .wasm is bundled as a module");
  workerOptions = {
    scriptPath: script,
    modulesRoot: join(app, "dist"),
    modules: true,
    modulesRules: [
      { type: "ESModule", include: ["**/*.js"] },
      { type: "CompiledWasm", include: ["**/*.wasm"] },
    ],
    compatibilityDate: "2026-04-01",
    durableObjects: { SESSIONS: { className: "ChatSession", useSQLite: true } },
    bindings: { LLM_KIND: "openai", LLM_MODEL: "mock-model", LLM_BASE_URL: llm.baseUrl, LLM_API_KEY: "sk-worker-secret" },
    // Durable Object storage on disk, so a restarted runtime finds it again.
    durableObjectsPersist: join(app, "do-storage"),
  };
  mf = new Miniflare(workerOptions);
  await mf.ready;
}

/** Reads SSE events from a response until it ends, or until `stopAfter` events. */
async function readEvents(res, { stopAfter = Infinity } = {}) {
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  const events = [];
  let buf = "";
  while (events.length < stopAfter) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value;
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0 && events.length < stopAfter) {
      const raw = buf.slice(0, i);
      buf = buf.slice(i + 2);
      const field = (k) => new RegExp(`^${k}: (.*)$`, "m").exec(raw)?.[1];
      events.push({ id: Number(field("id")), event: field("event"), data: JSON.parse(field("data")) });
    }
  }
  if (events.length >= stopAfter) await reader.cancel();
  return events;
}

const post = (path, body) => mf.dispatchFetch(`http://worker.local${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

/** Two steps: a text and a call to `add`, then the answer. */
function queueAddConversation({ holdAfterCall } = {}) {
  const steps = [text("Let me add "), text("those."), toolStart(0, "call_add", "add", ""), toolArgs(0, '{"numbers":'), toolArgs(0, "[1,2,3]}")];
  if (holdAfterCall) steps.push({ wait: holdAfterCall.promise, maxWait: 10_000 });
  steps.push(finish("tool_calls"), usage(50, 10), done());
  llm.respond({ steps });
  llm.respond({ steps: [text("The sum "), text("is 6."), finish("stop"), usage(80, 5), done()] });
}

/** The message types of a turn's events. The tool's result and step 1's usage may come in either order (the tool runs while the stream ends): they are listed sorted. */
function types(events) {
  const t = events.map((e) => (e.event === "end" ? `end:${e.data.outcome}` : e.data.type));
  const i = t.indexOf("ToolCall");
  return [...t.slice(0, i + 1), ...t.slice(i + 1, i + 3).sort(), ...t.slice(i + 3)];
}
const EXPECTED_TURN = [
  "TurnBegin", "StepBegin", "ContentPart", "ToolCall", "StatusUpdate", "ToolResult",
  "StepBegin", "ContentPart", "StatusUpdate", "TurnEnd", "end:done",
];

test("worker: a turn streams its wire as SSE with ids; the Durable Object keeps the history for the next turn", async () => {
  await startWorker();
  queueAddConversation();
  const res = await post("/chat", { session: "s1", message: "add 1, 2 and 3" });
  assert.equal(res.status, 200);
  assert.match(res.headers.get("content-type"), /text\/event-stream/);
  const events = await readEvents(res);
  assert.deepEqual(types(events), EXPECTED_TURN);
  assert.deepEqual(events.map((e) => e.id), events.map((_, i) => events[0].id + i), "ids are consecutive");
  assert.equal(events.find((e) => e.data.type === "ToolResult").data.payload.return_value.output, "6");
  assert.equal(events.find((e) => e.data.type === "ContentPart" && e.data.payload.text === "The sum is 6.") !== undefined, true);
  assert.equal(llm.requests.at(-1).headers.authorization, "Bearer sk-worker-secret");

  // The second turn's request to the model carries the first turn, from the Durable Object.
  llm.respond({ steps: [text("You asked me to add numbers."), finish("stop"), done()] });
  const second = await readEvents(await post("/chat", { session: "s1", message: "what did I ask?" }));
  assert.equal(second.at(-1).data.outcome, "done");
  assert.ok(second[0].id > events.at(-1).id, "ids keep growing across turns");
  const sent = llm.requests.at(-1).body.messages;
  assert.deepEqual(sent.filter((m) => m.role === "user").map((m) => m.content), ["add 1, 2 and 3", "what did I ask?"]);
  assert.ok(sent.some((m) => m.role === "tool" && m.content === "6"));
  const { history } = await (await mf.dispatchFetch("http://worker.local/history?session=s1")).json();
  assert.equal(history.length, 6);
  // Another session starts empty.
  llm.respond({ steps: [text("Hello."), finish("stop"), done()] });
  await readEvents(await post("/chat", { session: "s2", message: "hi" }));
  assert.equal(llm.requests.at(-1).body.messages.filter((m) => m.role === "user").length, 1);
});

test("worker: a client that drops mid-turn and reconnects with Last-Event-ID gets exactly what it missed, then the rest", async () => {
  const hold = gate();
  queueAddConversation({ holdAfterCall: hold });
  const first = await readEvents(await post("/chat", { session: "resume", message: "add 1, 2 and 3" }), { stopAfter: 3 });
  assert.equal(first.length, 3);
  // The client is gone; the turn goes on without it.
  hold.open();
  await sleep(50);
  const rest = await readEvents(await mf.dispatchFetch("http://worker.local/chat?session=resume", { headers: { "last-event-id": String(first.at(-1).id) } }));
  const all = [...first, ...rest];
  assert.deepEqual(all.map((e) => e.id), all.map((_, i) => first[0].id + i), "no message missing or repeated");
  assert.equal(all.at(-1).data.outcome, "done");
  // The whole recording, replayed from the start, is the same sequence.
  const replay = await readEvents(await mf.dispatchFetch("http://worker.local/chat?session=resume", { headers: { "last-event-id": String(first[0].id - 1) } }));
  assert.deepEqual(replay, all);
  assert.deepEqual(types(all), EXPECTED_TURN);
});

test("worker: POST /cancel stops the running turn and the model's connection is closed", async () => {
  llm.respond({ steps: [text("Thinking about it"), { hang: true }] });
  const res = await post("/chat", { session: "cancel-me", message: "take your time" });
  const reading = readEvents(res);
  // Wait until the model has been asked.
  for (let i = 0; i < 200 && !llm.requests.at(-1)?.body?.messages?.some((m) => m.content === "take your time"); i++) await sleep(10);
  const req = llm.requests.at(-1);
  const cancel = await post("/cancel", { session: "cancel-me" });
  assert.deepEqual(await cancel.json(), { cancelled: true });
  const events = await reading;
  assert.equal(events.at(-1).data.outcome, "cancelled");
  await Promise.race([req.closed, sleep(5000)]);
  assert.equal(req.clientClosed, true, "the mock LLM saw its connection closed");
  // The session is usable again.
  llm.respond({ steps: [text("Ready."), finish("stop"), done()] });
  const again = await readEvents(await post("/chat", { session: "cancel-me", message: "again" }));
  assert.equal(again.at(-1).data.outcome, "done");
});

test("worker: after the runtime restarts, a client still resumes from the stored recording and the history is kept", async () => {
  queueAddConversation();
  const all = await readEvents(await post("/chat", { session: "evicted", message: "add 1, 2 and 3" }));
  assert.equal(all.at(-1).data.outcome, "done");
  // A new workerd process: every Durable Object starts again from its storage.
  await mf.dispose();
  mf = new Miniflare(workerOptions);
  await mf.ready;
  const rest = await readEvents(await mf.dispatchFetch("http://worker.local/chat?session=evicted", { headers: { "last-event-id": String(all[3].id) } }));
  assert.deepEqual(rest, all.slice(4));
  const { history } = await (await mf.dispatchFetch("http://worker.local/history?session=evicted")).json();
  assert.equal(history.length, 4);
});

test("worker: bad requests get clear errors", async () => {
  assert.equal((await post("/chat", { session: "x" })).status, 400);
  assert.equal((await post("/chat", { session: "../etc", message: "hi" })).status, 400);
  assert.equal((await mf.dispatchFetch("http://worker.local/nope")).status, 404);
  const page = await mf.dispatchFetch("http://worker.local/");
  assert.match(await page.text(), /Last-Event-ID|last-event-id/);
});
