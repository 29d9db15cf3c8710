// One comparison, all its contenders side by side in this one process:
//   node --expose-gc bench/compare.mjs <comparison> [runs]
// Prints one JSON object on stdout. Comparisons: text-openai, text-anthropic, text-openai-http,
// tools-openai-sequential, tools-openai-interleaved, tools-anthropic-sequential, bigarg, memory.
import * as kosong from "kosong-wasm";
import { streamText, tool as aiTool, jsonSchema, stepCountIs, Output } from "ai";
import { createParser } from "eventsource-parser";
import OpenAI from "openai";
import { Agent as OAAgent, run as oaRun, tool as oaTool, OpenAIChatCompletionsModel, setTracingDisabled } from "@openai/agents";
import { createOpenAI } from "@ai-sdk/openai";
import { oa, sequenceFetch, textFixture, toolsFixture, bigArgFixture, nestedArgFixture, structuredFixture, followUp, fixtureFetch, fixtureServer, stats, settle } from "./lib.mjs";
import { textContenders, toolContenders, bareToolStream } from "./contenders.mjs";

const [which, runsArg] = process.argv.slice(2);
const RUNS = Number(runsArg ?? 7);
const gc = () => global.gc?.();

const WARMUP = 3;

/**
 * Times `runs` runs of `fn(setup())` after three warm-up runs (V8 tiers hot code up, JS and
 * WebAssembly alike, over the first runs); setup is not timed.
 */
async function measure(setup, fn, runs = RUNS, warmup = WARMUP) {
  for (let i = 0; i < warmup; i++) await fn(setup());
  const ms = [];
  for (let i = 0; i < runs; i++) {
    await settle();
    const io = setup();
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
      await settle();
      const io = setup();
      const t = performance.now();
      await fn(io);
      times[name].push(performance.now() - t);
    }
  }
  return times;
}

/**
 * Each contender's time over the bare reference's (`base`) in the same round, as `perRound`
 * stats. A round runs every contender back to back, so each ratio pairs two runs that shared the
 * machine's state (on these VMs single runs of one step spread 2-3x from round to round, ours and
 * the reference's alike).
 */
function withPerRound(rows, times, base) {
  const b = times[base];
  return rows.map((r) => ({ ...r, perRound: b ? stats(times[r.name].map((x, i) => x / b[i])) : undefined }));
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
  const contenders = Object.entries(toolContenders(format));
  const seen = Object.fromEntries(contenders.map(([name]) => [name, { latencies: [], before: [], totals: [] }]));
  // Round-robin, like the text comparisons: each round runs every contender once, so all of
  // them see the same machine state on average.
  // At least 31 rounds: a step here takes 15–50 ms, and on this kind of shared 2-core machine
  // single runs of the same step (ours and the bare client's alike) spread from 7 to 30 ms; with
  // 15 rounds the Anthropic row's ratio of medians read anywhere from 0.71 to 0.96 run to run.
  const runs = Math.max(RUNS, 31);
  for (let r = 0; r < runs + WARMUP; r++) {
    for (const [name, fn] of contenders) {
      const { fetch, state } = fixtureFetch(fixture, followUp(format));
      const started = new Map();
      await settle();
      const t = performance.now();
      const n = await fn({ fetch, baseUrl: "http://bench.invalid/v1", calls: fixture.calls, onStart: (id) => started.has(id) || started.set(id, performance.now()) });
      const total = performance.now() - t;
      if (n !== fixture.calls.length) throw new Error(`${name}: ${n} of ${fixture.calls.length} tools gave results`);
      if (r < WARMUP) continue; // warm-up
      const m = seen[name];
      m.totals.push(total);
      let early = 0;
      for (const c of fixture.calls) {
        const s = started.get(c.id);
        m.latencies.push(s - state.handed[c.closeEvent]);
        if (s < state.endedAt) early++;
      }
      m.before.push(early);
    }
  }
  const rows = contenders.map(([name]) => {
    const m = seen[name];
    return { name, latencyMs: stats(m.latencies), startedBeforeEnd: stats(m.before).median, of: fixture.calls.length, totalMs: stats(m.totals) };
  });
  const bare = contenders.find(([name]) => name.startsWith("eventsource-parser"))?.[0];
  const totals = Object.fromEntries(Object.entries(seen).map(([name, m]) => [name, m.totals]));
  return { comparison: fixture.name, events: fixture.events.length, rows: withPerRound(rows, totals, bare) };
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
    const bare = stats(await measure(setup, async (fetch) => {
      const [n] = await bareToolStream("openai", { fetch, baseUrl: "http://bench.invalid/v1" }, (a) => a.content.length);
      if (n !== JSON.parse(fixture.calls[0].args).content.length) throw new Error("bare: wrong argument");
    }, 5));
    const row = { size, events: fixture.events.length, kosongOff: off, kosongOn: on, bare };
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

/**
 * A structured answer (64 KB to 1 MB of JSON in 40-character text deltas), read as structured
 * output: eventsource-parser + JSON.parse of the whole text at the end (the floor, no partial
 * values); kosong-wasm `generate` with `output`, partial objects off and on (`onPartialOutput`);
 * the AI SDK's `streamText` with `Output.object`, its `partialOutputStream` read. Every contender's
 * final value is checked.
 */
async function structuredComparison() {
  const rows = [];
  let aiTooSlow = false;
  const schema = { type: "object", properties: { title: { type: "string" }, items: { type: "array" } }, required: ["title", "items"] };
  for (const size of [64, 256, 1024].map((k) => k * 1024)) {
    const fixture = structuredFixture(size);
    const setup = () => fixtureFetch(fixture, []).fetch;
    const check = (v, who) => {
      if (v?.items?.length !== fixture.items) throw new Error(`${who}: ${v?.items?.length} of ${fixture.items} items`);
    };
    const kosongRun = (partials) => async (fetch) => {
      const provider = new kosong.OpenAIChatProvider({ model: "m", apiKey: "k", baseUrl: "http://bench.invalid/v1", fetch });
      let seen = 0;
      const r = await kosong.generate(provider, "", [], [{ role: "user", content: "go" }], {
        output: { schema, name: "report" },
        onPartialOutput: partials ? (v) => (seen = v.items?.length ?? 0) : undefined,
      });
      check(r.output, "kosong-wasm");
      if (partials && seen !== fixture.items) throw new Error(`kosong-wasm: the last preview had ${seen} items`);
    };
    const bare = stats(await measure(setup, async (fetch) => {
      const res = await fetch("http://bench.invalid/v1/chat/completions", { method: "POST", body: "{}" });
      let text = "";
      const parser = createParser({ onEvent(ev) { if (ev.data !== "[DONE]") text += JSON.parse(ev.data).choices?.[0]?.delta?.content ?? ""; } });
      const dec = new TextDecoder();
      for await (const chunk of res.body) parser.feed(dec.decode(chunk, { stream: true }));
      check(JSON.parse(text), "eventsource-parser");
    }, 5));
    const row = { size, events: fixture.events.length, bare, kosongOff: stats(await measure(setup, kosongRun(false), 5)), kosongOn: stats(await measure(setup, kosongRun(true), 5)) };
    // The AI SDK parses the whole text so far at every delta (its time grows with the square of
    // the size): after a size that took over 2 s the next is run once, without warm-ups; after
    // one that took over 10 s the larger ones are not run.
    if (!aiTooSlow) {
      const slow = rows.at(-1)?.aiSdk?.median > 2000;
      row.aiSdk = stats(await measure(setup, async (fetch) => {
        const model = createOpenAI({ apiKey: "k", baseURL: "http://bench.invalid/v1", fetch }).chat("m");
        const r = streamText({ model, messages: [{ role: "user", content: "go" }], output: Output.object({ schema: jsonSchema(schema) }), maxRetries: 0 });
        let last;
        for await (const p of r.partialOutputStream) last = p;
        check(last, "AI SDK");
      }, slow ? 1 : 3, slow ? 0 : WARMUP));
      aiTooSlow = row.aiSdk.median > 10_000;
    }
    rows.push(row);
  }
  return { comparison: "structured", rows };
}

/**
 * An agent turn of 10 steps: 9 that call a tool (a short text, then one call with small
 * arguments) and a final answer, through each runtime's own loop. kosong-wasm: `runSoul` with
 * the UI reading a merged side; the AI SDK: `streamText` with `stopWhen: stepCountIs(10)`; the
 * OpenAI Agents SDK: `run` with `maxTurns`.
 */
async function agentTurnComparison() {
  const STEPS = 10;
  const callStep = (i) => [
    oa({ role: "assistant", content: `Step ${i}: checking.` }),
    oa({ tool_calls: [{ index: 0, id: `call_${i}`, type: "function", function: { name: "lookup", arguments: "" } }] }),
    ...['{"key":', `"k${i}"}`].map((a) => oa({ tool_calls: [{ index: 0, function: { arguments: a } }] })),
    oa({}, "tool_calls", { usage: { prompt_tokens: 100, completion_tokens: 10, total_tokens: 110 } }),
    "data: [DONE]\n\n",
  ];
  const answer = [oa({ role: "assistant", content: "All done." }), oa({}, "stop", { usage: { prompt_tokens: 100, completion_tokens: 3, total_tokens: 103 } }), "data: [DONE]\n\n"];
  const setup = () => sequenceFetch([...Array.from({ length: STEPS - 1 }, (_, i) => callStep(i + 1)), answer]);
  const lookup = ({ key }) => `value of ${key}`;
  const schema = { type: "object", properties: { key: { type: "string" } }, required: ["key"] };
  const contenders = {
    "kosong-wasm runSoul (merged UI side)": async (fetch) => {
      const agent = new kosong.Agent({ provider: new kosong.OpenAIChatProvider({ model: "m", apiKey: "k", baseUrl: "http://bench.invalid/v1", fetch }), systemPrompt: "", toolset: new kosong.SimpleToolset([{ name: "lookup", description: "", parameters: schema, handler: lookup }]), maxStepsPerTurn: STEPS + 1 });
      let seen = 0;
      await kosong.runSoul(agent, "go", async (wire) => { for await (const _ of wire.uiSide({ merge: true })) seen++; }, new AbortController().signal);
      const calls = agent.context.history.filter((m) => m.role === "tool").length;
      if (calls !== STEPS - 1 || seen === 0) throw new Error(`kosong: ${calls} tool results`);
    },
    "AI SDK streamText (stopWhen: 10 steps)": async (fetch) => {
      const model = createOpenAI({ apiKey: "k", baseURL: "http://bench.invalid/v1", fetch }).chat("m");
      const r = streamText({ model, messages: [{ role: "user", content: "go" }], tools: { lookup: aiTool({ description: "", inputSchema: jsonSchema(schema), execute: async (a) => lookup(a) }) }, stopWhen: stepCountIs(STEPS), maxRetries: 0 });
      let results = 0;
      for await (const p of r.fullStream) if (p.type === "tool-result") results++;
      if (results !== STEPS - 1) throw new Error(`AI SDK: ${results} tool results`);
    },
    "@openai/agents run (stream)": async (fetch) => {
      const client = new OpenAI({ apiKey: "k", baseURL: "http://bench.invalid/v1", fetch, maxRetries: 0 });
      const agent = new OAAgent({ name: "bench", instructions: "", model: new OpenAIChatCompletionsModel(client, "m"), tools: [oaTool({ name: "lookup", description: "", parameters: { ...schema, additionalProperties: false }, strict: true, execute: async (a) => lookup(a) })] });
      const result = await oaRun(agent, "go", { stream: true, maxTurns: STEPS + 1 });
      for await (const _ of result);
      await result.completed;
      if (result.finalOutput !== "All done.") throw new Error(`agents: ${result.finalOutput}`);
    },
  };
  const times = await roundRobin(contenders, setup);
  return { comparison: "agent-turn", steps: STEPS, rows: Object.entries(times).map(([name, ms]) => ({ name, ...stats(ms) })) };
}

async function memoryComparison() {
  const tools = new kosong.SimpleToolset([{ name: "add", description: "", parameters: {}, handler: ({ a, b }) => String(a + b) }]);
  const script = 'text: adding\ntool_call: {"id": "c1", "name": "add", "arguments": "{\\"a\\": 1, \\"b\\": 2}"}';
  const oneStep = async () => (await (await kosong.step(new kosong.ScriptedProvider([script]), "", tools, [{ role: "user", content: "1+2" }])).toolResults()).length;
  // The wasm objects of a finished step or turn (here a ScriptedProvider a step) are freed by
  // FinalizationRegistry callbacks, which run in a later task than the GC that found them: 10,000
  // steps awaited back to back hold all of theirs until then, and the linear memory keeps the
  // high-water mark that leaves. So the first 10,000 find that steady state and the callbacks run
  // before each reading; the next 10,000 must not grow it.
  const settle = async () => {
    gc();
    await new Promise((r) => setTimeout(r, 50));
    gc();
  };
  for (let i = 0; i < 10_000; i++) await oneStep();
  await settle();
  const before = kosong.memoryBytes();
  for (let i = 0; i < 10_000; i++) await oneStep();
  await settle();
  const after = kosong.memoryBytes();
  // Agent turns, each on a fresh context: a scripted call and an answer, the UI reading a merged side.
  const oneTurn = async () => {
    const agent = new kosong.Agent({ provider: new kosong.ScriptedProvider([script, "text: 3"]), systemPrompt: "", toolset: tools });
    await kosong.runSoul(agent, "1+2", async (wire) => { for await (const _ of wire.uiSide({ merge: true })); }, new AbortController().signal);
  };
  // A fresh Agent (context, wire) per turn: the first thousand turns find the allocator's and
  // the GC's steady state; the next thousand must not grow it.
  for (let i = 0; i < 1_000; i++) await oneTurn();
  await settle();
  const turnsBefore = kosong.memoryBytes();
  for (let i = 0; i < 1_000; i++) await oneTurn();
  await settle();
  return { comparison: "memory", steps: 10_000, wasmMemoryBefore: before, wasmMemoryAfter: after, turns: 1_000, turnsBefore, turnsAfter: kosong.memoryBytes() };
}

/**
 * Every wire format's text fixture handed over in 16 KB reads cut anywhere (as undici hands a
 * real response over), where what a read costs is gone and each contender's own decoding is what
 * is left: eventsource-parser + JSON.parse against this package, with and without the part hook.
 */
async function text16kComparison() {
  const formats = [];
  for (const format of ["openai", "anthropic", "responses", "gemini"]) {
    const fixture = textFixture(format);
    const setup = () => ({ fetch: fixtureFetch(fixture, followUp(format), { readBytes: 16384 }).fetch, baseUrl: "http://bench.invalid/v1" });
    const contenders = Object.fromEntries(Object.entries(textContenders(format)).filter(([name]) => /^(read the body|eventsource-parser|kosong-wasm)/.test(name)));
    const bytes = fixture.events.reduce((n, e) => n + Buffer.byteLength(e), 0);
    for (const [name, fn] of Object.entries(contenders)) {
      const got = await fn(setup());
      if (!(name.includes("floor") ? got === bytes : got === fixture.text)) throw new Error(`${format} in 16 KB reads: ${name} did not assemble the whole text`);
    }
    const times = await roundRobin(contenders, setup);
    const rows = Object.entries(times).map(([name, ms]) => ({ name, ...stats(ms) }));
    formats.push({ format, events: fixture.events.length, bytes, rows: withPerRound(rows, times, Object.keys(times).find((n) => n.startsWith("eventsource-parser"))) });
  }
  return { comparison: "text-16k", formats };
}

/**
 * Each tool fixture handed over in 16 KB reads cut anywhere, as `text16kComparison` does the text
 * ones: the whole step, eventsource-parser + JSON.parse against this package (the tool start is
 * not timed here: a read holds many events, a call's end among them).
 */
async function tools16kComparison() {
  const fixtures = [];
  for (const [format, interleaved] of [["openai", false], ["openai", true], ["anthropic", false]]) {
    const fixture = toolsFixture(format, { interleaved });
    const contenders = Object.fromEntries(Object.entries(toolContenders(format)).filter(([name]) => /^(eventsource-parser|kosong-wasm)/.test(name)));
    const setup = () => ({ fetch: fixtureFetch(fixture, followUp(format), { readBytes: 16384 }).fetch, baseUrl: "http://bench.invalid/v1", calls: fixture.calls, onStart: () => {} });
    const checked = Object.fromEntries(
      Object.entries(contenders).map(([name, fn]) => [
        name,
        async (io) => {
          const n = await fn(io);
          if (n !== fixture.calls.length) throw new Error(`${fixture.name} in 16 KB reads: ${name}: ${n} of ${fixture.calls.length} tools gave results`);
        },
      ]),
    );
    // As many rounds as the tool comparisons (a step here is a few ms, its rounds spread wide).
    const times = await roundRobin(checked, setup, Math.max(RUNS, 31));
    const rows = Object.entries(times).map(([name, ms]) => ({ name, ...stats(ms) }));
    fixtures.push({ key: `tools-${format}-${interleaved ? "interleaved" : "sequential"}`, events: fixture.events.length, rows: withPerRound(rows, times, Object.keys(times).find((n) => n.startsWith("eventsource-parser"))) });
  }
  return { comparison: "tools-16k", fixtures };
}

const jobs = {
  "text-openai": () => textComparison("openai"),
  "text-16k": text16kComparison,
  "text-anthropic": () => textComparison("anthropic"),
  "text-responses": () => textComparison("responses"),
  "text-gemini": () => textComparison("gemini"),
  "agent-turn": agentTurnComparison,
  "text-openai-http": () => textComparison("openai", { http: true }),
  "tools-openai-sequential": () => toolsComparison("openai", false),
  "tools-openai-interleaved": () => toolsComparison("openai", true),
  "tools-anthropic-sequential": () => toolsComparison("anthropic", false),
  "tools-16k": tools16kComparison,
  bigarg: bigArgComparison,
  "bigarg-nested": nestedArgComparison,
  structured: structuredComparison,
  memory: memoryComparison,
};
if (!jobs[which]) {
  console.error(`unknown comparison ${which}; one of ${Object.keys(jobs).join(", ")}`);
  process.exit(2);
}
process.stdout.write(`${JSON.stringify(await jobs[which]())}\n`);
