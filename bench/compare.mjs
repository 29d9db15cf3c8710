// One comparison, all its contenders side by side in this one process:
//   node --expose-gc bench/compare.mjs <comparison> [runs]
// Prints one JSON object on stdout. Comparisons: text-openai, text-anthropic, text-openai-http,
// tools-openai-sequential, tools-openai-interleaved, tools-anthropic-sequential, bigarg, memory.
import * as kosong from "kosong-wasm";
import { streamText, tool as aiTool, jsonSchema } from "ai";
import { createOpenAI } from "@ai-sdk/openai";
import { textFixture, toolsFixture, bigArgFixture, nestedArgFixture, followUp, fixtureFetch, fixtureServer, stats } from "./lib.mjs";
import { textContenders, toolContenders } from "./contenders.mjs";

const [which, runsArg] = process.argv.slice(2);
const RUNS = Number(runsArg ?? 7);
const gc = () => global.gc?.();

const WARMUP = 3;

/**
 * Times `runs` runs of `fn(setup())` after three warm-up runs (V8 tiers hot code up, JS and
 * WebAssembly alike, over the first runs); setup is not timed.
 */
async function measure(setup, fn, runs = RUNS) {
  for (let i = 0; i < WARMUP; i++) await fn(setup());
  const ms = [];
  for (let i = 0; i < runs; i++) {
    const io = setup();
    gc();
    const t = performance.now();
    await fn(io);
    ms.push(performance.now() - t);
  }
  return ms;
}

/**
 * Times every contender round-robin: warm-ups first, then each measured round runs every
 * contender once, so all of them see the same process state (heap, JIT feedback) on average.
 */
async function roundRobin(contenders, setup, runs = RUNS) {
  const entries = Object.entries(contenders);
  for (let w = 0; w < WARMUP; w++) for (const [, fn] of entries) await fn(setup());
  const times = Object.fromEntries(entries.map(([name]) => [name, []]));
  for (let r = 0; r < runs; r++) {
    for (const [name, fn] of entries) {
      const io = setup();
      gc();
      const t = performance.now();
      await fn(io);
      times[name].push(performance.now() - t);
    }
  }
  return times;
}

async function textComparison(format, { http = false } = {}) {
  const fixture = textFixture(format);
  const bytes = fixture.events.reduce((n, e) => n + Buffer.byteLength(e), 0);
  const server = http ? await fixtureServer(fixture, followUp(format)) : null;
  const setup = () => {
    if (server) {
      server.reset();
      return { fetch: globalThis.fetch, baseUrl: server.baseUrl };
    }
    return { fetch: fixtureFetch(fixture, followUp(format)).fetch, baseUrl: "http://bench.invalid/v1" };
  };
  const contenders = Object.fromEntries(Object.entries(textContenders(format)).filter(([name]) => !(http && /agents/.test(name))));
  for (const [name, fn] of Object.entries(contenders)) {
    const got = await fn(setup());
    const ok = name.includes("floor") ? got === bytes : got === fixture.text;
    if (!ok) throw new Error(`${name} did not assemble the whole text (${typeof got === "string" ? got.length : got} vs ${fixture.text.length})`);
  }
  const times = await roundRobin(contenders, setup);
  const rows = Object.entries(times).map(([name, ms]) => {
    const s = stats(ms);
    return { name, ...s, usPerEvent: (s.median * 1000) / fixture.events.length };
  });
  await server?.close();
  return { comparison: `text-${format}${http ? "-http" : ""}`, events: fixture.events.length, bytes, rows };
}

async function toolsComparison(format, interleaved) {
  const fixture = toolsFixture(format, { interleaved });
  const rows = [];
  for (const [name, fn] of Object.entries(toolContenders(format))) {
    const latencies = [];
    const before = [];
    const totals = [];
    for (let r = 0; r < RUNS + WARMUP; r++) {
      const { fetch, state } = fixtureFetch(fixture, followUp(format));
      const started = new Map();
      gc();
      const t = performance.now();
      const n = await fn({ fetch, baseUrl: "http://bench.invalid/v1", calls: fixture.calls, onStart: (id) => started.has(id) || started.set(id, performance.now()) });
      const total = performance.now() - t;
      if (n !== fixture.calls.length) throw new Error(`${name}: ${n} of ${fixture.calls.length} tools gave results`);
      if (r < WARMUP) continue; // warm-up
      totals.push(total);
      let early = 0;
      for (const c of fixture.calls) {
        const s = started.get(c.id);
        latencies.push(s - state.handed[c.closeEvent]);
        if (s < state.endedAt) early++;
      }
      before.push(early);
    }
    const lat = stats(latencies);
    rows.push({ name, latencyMs: lat, startedBeforeEnd: stats(before).median, of: fixture.calls.length, totalMs: stats(totals) });
  }
  return { comparison: fixture.name, events: fixture.events.length, rows };
}

/** The 1 MB-class argument: kosong with argument previews off and on, the AI SDK likewise (to 128 KB). */
/**
 * One `step` over a fixture's fetch with `tool`, argument previews (a PartialJson fed every
 * piece) on or off; `check(preview)` looks at the preview when it was on.
 */
function argStep(tool, check) {
  return (previews) => async (fetch) => {
    const provider = new kosong.OpenAIChatProvider({ model: "m", apiKey: "k", baseUrl: "http://bench.invalid/v1", fetch });
    const tools = new kosong.SimpleToolset([tool]);
    let preview = null;
    const onMessagePart = previews
      ? (p) => {
          if (p.type === "function") preview = new kosong.PartialJson();
          else if (p.type === "tool_call_part" && p.arguments_part) preview.feed(p.arguments_part);
        }
      : undefined;
    const r = await kosong.step(provider, "", tools, [{ role: "user", content: "go" }], { onMessagePart });
    await r.toolResults();
    if (previews) check(preview);
  };
}

/** Deeply nested arguments, previews on and off: previews must stay linear for this shape too. */
async function nestedArgComparison() {
  const rows = [];
  for (const size of [24, 48, 96, 256, 1024].map((k) => k * 1024)) {
    const fixture = nestedArgFixture(size);
    const setup = () => fixtureFetch(fixture, followUp("openai")).fetch;
    const tool = { name: "nest", description: "", parameters: { type: "object" }, handler: () => "ok" };
    const run = argStep(tool, (preview) => {
      if (!preview.depthLimited) throw new Error("the preview should say it is depth-limited");
    });
    rows.push({ size, events: fixture.events.length, kosongOff: stats(await measure(setup, run(false), 5)), kosongOn: stats(await measure(setup, run(true), 5)) });
  }
  return { comparison: "bigarg-nested", rows };
}

async function bigArgComparison() {
  const sizes = [64, 128, 256, 512, 1024].map((k) => k * 1024);
  const rows = [];
  let aiTooSlow = false;
  const schema = { type: "object", properties: { path: { type: "string" }, content: { type: "string" } } };
  for (const size of sizes) {
    const fixture = bigArgFixture(size);
    const setup = () => fixtureFetch(fixture, followUp("openai")).fetch;
    const tool = { name: "write_file", description: "", parameters: schema, handler: (a) => String(a.content.length) };
    const kosongRun = argStep(tool, (preview) => {
      if (typeof preview.value?.content !== "string") throw new Error("no preview");
    });
    const off = stats(await measure(setup, kosongRun(false), 5));
    const on = stats(await measure(setup, kosongRun(true), 5));
    const row = { size, events: fixture.events.length, kosongOff: off, kosongOn: on };
    // The AI SDK re-parsed the whole argument per piece in earlier releases (~44 s at 128 KB):
    // once one size takes over 10 s, the larger ones are not run.
    if (!aiTooSlow) {
      const aiRun = (previews) => async (fetch) => {
        const model = createOpenAI({ apiKey: "k", baseURL: "http://bench.invalid/v1", fetch }).chat("m");
        const tools = { write_file: aiTool({ description: "", inputSchema: jsonSchema(schema), execute: async (a) => String(a.content.length) }) };
        const r = streamText({ model, messages: [{ role: "user", content: "go" }], tools, maxRetries: 0 });
        if (previews) for await (const _ of r.toUIMessageStream());
        else for await (const _ of r.fullStream);
      };
      row.aiSdkOff = stats(await measure(setup, aiRun(false), 3));
      row.aiSdkOn = stats(await measure(setup, aiRun(true), 3));
      aiTooSlow = row.aiSdkOn.median > 10_000;
    }
    rows.push(row);
  }
  return { comparison: "bigarg", rows };
}

async function memoryComparison() {
  const tools = new kosong.SimpleToolset([{ name: "add", description: "", parameters: {}, handler: ({ a, b }) => String(a + b) }]);
  const script = 'text: adding\ntool_call: {"id": "c1", "name": "add", "arguments": "{\\"a\\": 1, \\"b\\": 2}"}';
  const oneStep = async () => (await (await kosong.step(new kosong.ScriptedProvider([script]), "", tools, [{ role: "user", content: "1+2" }])).toolResults()).length;
  for (let i = 0; i < 100; i++) await oneStep();
  const before = kosong.memoryBytes();
  for (let i = 0; i < 10_000; i++) await oneStep();
  gc();
  return { comparison: "memory", steps: 10_000, wasmMemoryBefore: before, wasmMemoryAfter: kosong.memoryBytes() };
}

const jobs = {
  "text-openai": () => textComparison("openai"),
  "text-anthropic": () => textComparison("anthropic"),
  "text-openai-http": () => textComparison("openai", { http: true }),
  "tools-openai-sequential": () => toolsComparison("openai", false),
  "tools-openai-interleaved": () => toolsComparison("openai", true),
  "tools-anthropic-sequential": () => toolsComparison("anthropic", false),
  bigarg: bigArgComparison,
  "bigarg-nested": nestedArgComparison,
  memory: memoryComparison,
};
if (!jobs[which]) {
  console.error(`unknown comparison ${which}; one of ${Object.keys(jobs).join(", ")}`);
  process.exit(2);
}
process.stdout.write(`${JSON.stringify(await jobs[which]())}\n`);
