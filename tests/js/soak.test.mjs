// Long sessions and hostile timing: hundreds of runs aborted at every kind of point, ten
// thousand steps in one instance, and an API key that must never leak. Counts are printed.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import { execFileSync } from "node:child_process";
import * as k from "kosong-wasm";
import { startMockServer, text, toolStart, toolArgs, finish, usage, done, sse, sleep } from "./mock-openai.mjs";
import { mulberry32 } from "../../pkg/chaos.js";

let server;
before(async () => (server = await startMockServer()));
after(async () => server.close());

/** A small deterministic PRNG, so a failure can be replayed: the package's own (`ChaosProvider`'s). */
const rng = mulberry32;

async function within(promise, ms) {
  let timer;
  try {
    return await Promise.race([promise.then(() => "settled", () => "settled"), new Promise((r) => (timer = setTimeout(() => r("pending"), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

const call = (id, name, args) => `tool_call: ${JSON.stringify({ id, name, arguments: JSON.stringify(args) })}`;

/** Every assistant tool call in the history is followed by exactly one result. */
function assertConsistent(history) {
  const open = new Set();
  for (const m of history) {
    if (m.role === "assistant") {
      assert.equal(open.size, 0, "a new assistant message while tool calls lack results");
      for (const c of m.tool_calls ?? []) open.add(c.id);
    } else if (m.role === "tool") {
      assert.ok(open.delete(m.tool_call_id), `a result for an unknown call ${m.tool_call_id}`);
    }
  }
  assert.equal(open.size, 0, `tool calls without results: ${[...open]}`);
}

test("cancellation soak: runs aborted at random points settle, abort every tool, leave nothing behind", async () => {
  const random = rng(20261130);
  const RUNS = 300;
  const timersBefore = process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;
  const memoryBefore = k.memoryBytes();
  const tally = { cancelled: 0, completed: 0, toolSignalsAborted: 0 };
  for (let i = 0; i < RUNS; i++) {
    const running = []; // {signal, settled, hangs}: a tool still running at the abort must see it
    // A stubborn tool may never settle: then the user presses Stop once nothing else moves — the
    // moment every other tool has settled (an event, not a timer).
    const stopWhenStuck = () => {
      if (running.some((t) => t.hangs) && running.every((t) => t.settled || t.hangs)) abort(new Error("stop"));
    };
    const track = (ctx, work, hangs = false) => {
      const t = { signal: ctx.signal, settled: false, hangs };
      running.push(t);
      const p = Promise.resolve(work()).finally(() => {
        t.settled = true;
        stopWhenStuck();
      });
      stopWhenStuck();
      return p;
    };
    const toolset = new k.SimpleToolset([
      { name: "polite", description: "", parameters: {}, handler: (_a, ctx) => track(ctx, async () => { await sleep(random() * 3); return "polite done"; }) },
      { name: "stubborn", description: "", parameters: {}, handler: (_a, ctx) => (random() < 0.5 ? track(ctx, () => new Promise(() => {}), true) : track(ctx, () => "quick")) },
      { name: "ask", description: "", parameters: {}, handler: (_a, ctx) => track(ctx, async () => String(await ctx.requestApproval({ action: "ask", description: "may I?" }))) },
    ]);
    const provider = new k.ScriptedProvider([
      `think: plan ${i}\ntext: working\n${call(`p${i}`, "polite", {})}\n${call(`s${i}`, "stubborn", {})}\n${call(`a${i}`, "ask", {})}`,
      "text: all done",
    ]);
    const agent = new k.Agent({ provider, systemPrompt: "", toolset });
    const ctrl = new AbortController();
    const abortAt = Math.floor(random() * 22); // 0: before the run; later: at the n-th wire message (a run has ~17)
    if (abortAt === 0) ctrl.abort(new Error("early"));
    let seen = 0;
    let unsettledAtAbort = [];
    const abort = (reason) => {
      if (ctrl.signal.aborted) return; // the first abort is the one the run saw
      unsettledAtAbort = running.filter((t) => !t.settled);
      ctrl.abort(reason);
    };
    const run = k.runSoul(agent, `task ${i}`, async (wire) => {
      for await (const m of wire.uiSide({ merge: false })) {
        seen++;
        if (seen === abortAt) abort(new Error(`at message ${seen}`));
        if (m.type === "ApprovalRequest" && !ctrl.signal.aborted) setTimeout(() => { try { wire.respond(m.payload.id, "approve"); } catch {} }, 0);
      }
    }, ctrl.signal);
    const settledIn = await within(run, 5000);
    assert.equal(settledIn, "settled", `run ${i} (abort at ${abortAt}) did not settle`);
    const outcome = await run.then(() => "ok", (e) => e);
    if (outcome === "ok") {
      tally.completed++;
    } else {
      assert.ok(outcome instanceof k.RunCancelled, `run ${i}: ${outcome}`);
      tally.cancelled++;
      for (const t of unsettledAtAbort) {
        assert.equal(t.signal.aborted, true, `run ${i}: a running tool's signal was not aborted`);
        tally.toolSignalsAborted++;
      }
    }
    assert.equal(getEventListeners(ctrl.signal, "abort").length, 0, `run ${i}: a listener was left on the signal`);
    assertConsistent(agent.context.history);
  }
  await sleep(20); // the "polite" tools' own timers run out
  const timersAfter = process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;
  assert.ok(timersAfter <= timersBefore, `timers left behind: ${timersAfter - timersBefore}`);
  const grown = k.memoryBytes() - memoryBefore;
  console.log(`# soak: ${RUNS} runs, ${tally.cancelled} cancelled, ${tally.completed} completed, ${tally.toolSignalsAborted} tool signals aborted; wasm memory ${memoryBefore} → ${k.memoryBytes()} bytes`);
  assert.ok(tally.cancelled > RUNS / 2);
  assert.ok(grown <= 4 << 20, `wasm memory grew by ${grown} bytes`);
});

test("mid-stream aborts over HTTP: the connection closes and the run settles, every time", async () => {
  const random = rng(7);
  const tally = { closed: 0, settled: 0 };
  for (let i = 0; i < 30; i++) {
    const steps = [];
    for (let j = 0; j < 20; j++) steps.push(j % 5 === 4 ? toolArgs(0, '"x",') : text(`w${j} `), { pause: 1 });
    server.clearQueue();
    server.respond({ steps: [toolStart(0, `c${i}`, "none", "["), ...steps, { hang: true }] });
    const sent = server.requests.length;
    const ctrl = new AbortController();
    const p = k.step(new k.OpenAIChatProvider({ model: "m", baseUrl: server.baseUrl }), "", new k.SimpleToolset(), [{ role: "user", content: "x" }], { signal: ctrl.signal });
    p.catch(() => {});
    while (server.requests.length === sent) await sleep(1); // mid-stream: once the server has it
    await sleep(random() * 25);
    ctrl.abort();
    assert.equal(await within(p, 5000), "settled");
    await assert.rejects(p, (e) => e?.name === "AbortError", `run ${i}: rejected with something else than the abort`);
    const closed = await within(server.requests.at(-1).closed, 5000);
    tally.settled++;
    if (closed === "settled" && server.requests.at(-1).clientClosed) tally.closed++;
    assert.equal(getEventListeners(ctrl.signal, "abort").length, 0);
  }
  server.clearQueue();
  console.log(`# http aborts: ${tally.settled} runs settled, ${tally.closed} connections seen closed by the client's abort`);
  // Counted from what the server saw (the client went away before the response ended), not from
  // the loop's own iterations.
  assert.equal(tally.closed, 30);
});

test("a long-lived isolate: 10,000 steps in one instance, wasm memory flat", async () => {
  const N = 10_000;
  const script = `text: thinking about it\n${call("c", "echo", { v: "x".repeat(200) })}\nusage: input_other=100 output=20`;
  const toolset = new k.SimpleToolset([{ name: "echo", description: "", parameters: {}, handler: ({ v }) => v }]);
  const history = [{ role: "user", content: "go" }];
  const runSteps = async (n) => {
    const provider = new k.ScriptedProvider(Array.from({ length: n }, () => script));
    for (let i = 0; i < n; i++) {
      const r = await k.step(provider, "sys", toolset, history, { onMessagePart: () => {} });
      const [res] = await r.toolResults();
      assert.equal(res.return_value.output.length, 200);
    }
  };
  await runSteps(500); // warm up: the allocator reaches its working size
  const before = k.memoryBytes();
  await runSteps(N);
  const after = k.memoryBytes();
  console.log(`# long isolate: ${N} steps; wasm memory ${before} → ${after} bytes`);
  assert.ok(after - before <= 1 << 20, `wasm memory grew by ${after - before} bytes over ${N} steps`);
});

test("the API key appears in no error message, recording or log line, on any error path", async () => {
  const KEY = "sk-live-SECRET-0123456789abcdef";
  const seen = [];
  const note = (x) => seen.push(typeof x === "string" ? x : `${x?.name}: ${x?.message} ${JSON.stringify(x)} ${String(x?.stack)}`);
  const provider = (extra = {}) => new k.OpenAIChatProvider({ model: "m", apiKey: KEY, baseUrl: server.baseUrl, ...extra });
  const echoKey = { error: { message: `Incorrect API key provided: ${KEY}. Bearer ${KEY}` } };
  server.respond({ status: 401, headers: { "x-request-id": KEY }, body: echoKey });
  server.respond({ status: 429, body: echoKey });
  server.respond({ status: 500, body: `upstream said ${KEY}` });
  server.respond({ steps: [text("hi"), sse({ error: { message: `bad key ${KEY}`, code: 403 } })] });
  server.respond({ steps: [text("cut")] });
  server.respond({ steps: [sse(`{not json ${KEY}`)] });
  for (let i = 0; i < 6; i++) await k.generate(provider(), "", [], [{ role: "user", content: "x" }]).catch(note);
  server.respond({ noHeaders: true });
  await k.generate(provider({ timeoutMs: 50 }), "", [], [{ role: "user", content: "x" }]).catch(note);
  await k.generate(new k.OpenAIChatProvider({ model: "m", apiKey: KEY, baseUrl: "http://127.0.0.1:9/v1" }), "", [], [{ role: "user", content: "x" }]).catch(note);
  // A recorded agent run that fails, and its logger.
  const lines = [];
  server.respond({ status: 400, body: echoKey });
  const agent = new k.Agent({ provider: provider(), systemPrompt: "", logger: { warn: (m, f) => note(`${m} ${JSON.stringify(f)}`) } });
  await k.runSoul(agent, "hello", async (w) => { for await (const m of w.uiSide({ merge: true })) note(JSON.stringify(m)); }, new AbortController().signal, { recorder: new k.WireRecorder((l) => lines.push(l)) }).catch(note);
  seen.push(...lines, agent.context.toJSONL(), JSON.stringify(provider()), String(provider()));
  assert.ok(seen.length >= 12);
  for (const s of seen) assert.ok(!s.includes(KEY), `the key leaked: ${s.slice(0, 200)}`);
  assert.ok(seen.some((s) => s.includes("[redacted]")), "the server's echo was redacted, not dropped");
});

test("memory stays flat across cancelled runs whose tools never settle (after garbage collection)", () => {
  // In a child with --expose-gc, so the measurement is after the GC has had its say.
  const script = `
    import * as k from "kosong-wasm";
    const call = (id) => "tool_call: " + JSON.stringify({ id, name: "stuck", arguments: "{}" });
    const toolset = () => new k.SimpleToolset([{ name: "stuck", description: "", parameters: {}, handler: () => new Promise(() => {}) }]);
    async function run(i) {
      const agent = new k.Agent({ provider: new k.ScriptedProvider(["text: a\\n" + call("c" + i), "text: b"]), systemPrompt: "", toolset: toolset() });
      const ctrl = new AbortController();
      const p = k.runSoul(agent, "x", async (w) => { for await (const m of w.uiSide()) if (m.type === "ToolCall") setTimeout(() => ctrl.abort(), 0); }, ctrl.signal);
      await p.catch(() => {});
    }
    const settle = async () => { for (let j = 0; j < 3; j++) { globalThis.gc(); await new Promise((r) => setTimeout(r, 20)); } };
    const sizes = [];
    for (let round = 0; round < 4; round++) {
      for (let i = 0; i < 400; i++) await run(i);
      await settle();
      sizes.push(k.memoryBytes());
    }
    console.log(JSON.stringify(sizes));
  `;
  const out = execFileSync(process.execPath, ["--expose-gc", "--input-type=module", "-e", script], { encoding: "utf8", cwd: new URL("../..", import.meta.url) });
  const sizes = JSON.parse(out.trim().split("\n").at(-1));
  console.log(`# cancelled runs with stuck tools: wasm memory by round of 400: ${sizes.join(", ")}`);
  assert.ok(sizes[3] - sizes[1] <= 64 * 1024, `wasm memory kept growing: ${sizes}`);
});
