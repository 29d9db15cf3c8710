#!/usr/bin/env node
// Counts calls across the wasm boundary: every import the instance calls (wasm → JS) and
// every export JS calls (JS → wasm), by wrapping the instance's imports and exports. Reports
// the calls one more text delta costs, and one more tool call (in `step` and in an agent
// turn), as the difference between two runs of different sizes.
//
//   node bench/crossings.mjs [pkg-dir]     (default: pkg/; the browser entry is used, unbundled)
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const pkg = resolve(process.argv[2] ?? join(root, "pkg"));
const counts = { toWasm: 0, toJs: 0 };

function wrapAll(obj, key) {
  const out = {};
  for (const [name, v] of Object.entries(obj)) {
    out[name] = typeof v === "function" ? function (...args) { counts[key]++; return v.apply(this, args); } : v;
  }
  return out;
}
const instantiate = WebAssembly.instantiate;
WebAssembly.instantiate = async (module, imports) => {
  const wrapped = Object.fromEntries(Object.entries(imports).map(([ns, fns]) => [ns, wrapAll(fns, "toJs")]));
  const instance = await instantiate(module, wrapped);
  return { instance: { exports: wrapAll(instance.exports, "toWasm") }, module };
};

const k = await import(pathToFileURL(join(pkg, "browser.js")).href);
await k.init(await WebAssembly.compile(readFileSync(join(pkg, "wasm", "kosong_wasm_bg.wasm"))));

const sse = (obj) => `data: ${JSON.stringify(obj)}\n\n`;
function openaiText(n) {
  let s = "";
  for (let i = 0; i < n; i++) s += sse({ id: "c", choices: [{ index: 0, delta: { content: `word${i} ` } }] });
  return s + sse({ id: "c", choices: [{ index: 0, delta: {}, finish_reason: "stop" }] }) + "data: [DONE]\n\n";
}
/** A fetch that serves `text` one event per chunk. */
function fetchOf(text) {
  return async () => {
    const chunks = text.split(/(?<=\n\n)/).map((c) => new TextEncoder().encode(c));
    let i = 0;
    const body = new ReadableStream({ pull(ctrl) { if (i < chunks.length) ctrl.enqueue(chunks[i++]); else ctrl.close(); } });
    return new Response(body, { status: 200, headers: { "content-type": "text/event-stream" } });
  };
}

async function measure(run) {
  await run(); // warm: one-time setup is not counted
  counts.toWasm = counts.toJs = 0;
  await run();
  return { ...counts };
}
const per = (a, b, n) => ({ toWasm: (b.toWasm - a.toWasm) / n, toJs: (b.toJs - a.toJs) / n, total: (b.toWasm + b.toJs - a.toWasm - a.toJs) / n });

async function textStep(n, onPart) {
  const provider = new k.OpenAIChatProvider({ model: "m", apiKey: "k", baseUrl: "http://x/v1", fetch: fetchOf(openaiText(n)) });
  await k.step(provider, "", new k.SimpleToolset(), [{ role: "user", content: "hi" }], onPart ? { onMessagePart: () => {} } : {});
}
const plus = { name: "plus", description: "", parameters: { type: "object" }, handler: ({ a }) => String(a + 1) };
const calls = (n) => Array.from({ length: n }, (_, i) => `tool_call: ${JSON.stringify({ id: `c${i}`, name: "plus", arguments: JSON.stringify({ a: i }) })}`).join("\n");
async function toolStep(n) {
  const r = await k.step(new k.ScriptedProvider([calls(n)]), "", new k.SimpleToolset([plus]), [{ role: "user", content: "go" }]);
  await r.toolResults();
}
async function agentTurn(n) {
  const agent = new k.Agent({ provider: new k.ScriptedProvider([calls(n), "text: done"]), systemPrompt: "", toolset: new k.SimpleToolset([plus]) });
  await k.runSoul(agent, "go", async (wire) => { for await (const _ of wire.uiSide({ merge: true })); }, new AbortController().signal);
}

async function sessionTurn(n) {
  const s = await k.Session.open(new k.MemorySessionStore(), { provider: new k.ScriptedProvider([calls(n), "text: done"]), systemPrompt: "", toolset: new k.SimpleToolset([plus]) });
  await s.send("go");
  await s.close();
}

const rows = [];
const [t1, t2] = [await measure(() => textStep(100)), await measure(() => textStep(1100))];
rows.push(["one text delta (step, no callback)", per(t1, t2, 1000)]);
const [u1, u2] = [await measure(() => textStep(100, true)), await measure(() => textStep(1100, true))];
rows.push(["one text delta (step, onMessagePart)", per(u1, u2, 1000)]);
const [s1, s2] = [await measure(() => toolStep(1)), await measure(() => toolStep(11))];
rows.push(["one tool call (step)", per(s1, s2, 10)]);
const [a1, a2] = [await measure(() => agentTurn(1)), await measure(() => agentTurn(11))];
rows.push(["one tool call (agent turn, merged UI side)", per(a1, a2, 10)]);
rows.push(["a whole agent turn with one tool call", { ...a1, total: a1.toWasm + a1.toJs }]);
const [m1, m2] = [await measure(() => sessionTurn(1)), await measure(() => sessionTurn(11))];
rows.push(["one tool call (Session, memory store)", per(m1, m2, 10)]);
rows.push(["a whole Session turn with one tool call", { ...m1, total: m1.toWasm + m1.toJs }]);

console.log(`crossings of ${pkg}`);
for (const [what, c] of rows) console.log(`${what.padEnd(44)} JS→wasm ${String(c.toWasm).padStart(6)}  wasm→JS ${String(c.toJs).padStart(6)}  total ${c.total}`);
