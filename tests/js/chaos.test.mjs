// ChaosProvider: faults injected through the real fetch path, survived by the agent.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import * as k from "kosong-wasm";
import { startMockServer, text, toolStart, toolArgs, finish, usage, done } from "./mock-openai.mjs";

let server;
before(async () => (server = await startMockServer()));
after(async () => server.close());

const call = (id, name, args) => `tool_call: ${JSON.stringify({ id, name, arguments: JSON.stringify(args) })}`;

function task() {
  const scripts = [];
  for (let i = 1; i <= 6; i++) {
    scripts.push(`think: step ${i}\ntext: Working on part ${i}.\n${call(`c${i}a`, "record", { part: i, half: "a" })}\n${call(`c${i}b`, "record", { part: i, half: "b" })}\nusage: input_other=${100 * i} output=10`);
  }
  scripts.push("text: All six parts are recorded.");
  return scripts;
}

test("an agent completes a multi-step task through ChaosProvider at a 30% fault rate; the recording loses and repeats nothing", async () => {
  const total = { http: 0, truncateMidEvent: 0, truncateBetweenEvents: 0, corruptToolCall: 0, slowChunks: 0, retries: 0 };
  for (const seed of [12, 15, 22, 27, 38]) {
    const recorded = [];
    const toolset = new k.SimpleToolset([{ name: "record", description: "", parameters: {}, handler: ({ part, half }) => { recorded.push(`${part}${half}`); return "ok"; } }]);
    const provider = new k.ChaosProvider(new k.ScriptedProvider(task()), {
      seed, errorProbability: 0.1, truncateStreamProbability: 0.1, corruptToolCallProbability: 0.1, retryAfterS: 0.05, slowChunkProbability: 0.05, slowChunkMs: 2,
    });
    const agent = new k.Agent({ provider, systemPrompt: "", toolset, maxRetriesPerStep: 12, retryBackoff: { initialMs: 5, maxMs: 50, jitterMs: 5 } });
    const lines = [];
    const ui = [];
    await k.runSoul(agent, "record all parts", async (wire) => { for await (const m of wire.uiSide({ merge: true })) ui.push(m); },
      new AbortController().signal, { recorder: new k.WireRecorder((l) => lines.push(l)) });
    for (const [key, n] of Object.entries(provider.injected)) total[key] += n;
    total.retries += ui.filter((m) => m.type === "StepRetry").length;
    assert.deepEqual(k.readWireRecord(lines.join("\n")), ui, `seed ${seed}: the recording is exactly what the UI saw`);
    assert.equal(ui.filter((m) => m.type === "TurnBegin").length, 1);
    assert.equal(ui.at(-1).type, "TurnEnd");
    assert.equal(agent.context.history.at(-1).content, "All six parts are recorded.");
    // Every call got exactly one result in its step; a corrupted call got the "send it again"
    // error instead of running. A stream cut after a call ran is salvaged (the round kept, the
    // cut-off call answered "cut off") and the chaos proxy then replays the same answer as the
    // next step: the call that ran gets its result again without running again.
    let calls = new Set();
    let answered = new Set();
    for (const m of ui) {
      // A retried attempt ran nothing (its parts are void); a round that ran something is kept.
      if (m.type === "StepRetry") assert.equal(answered.size, 0, `seed ${seed}: a retried attempt ran nothing`);
      if (m.type === "StepBegin") assert.deepEqual([...answered].sort(), [...calls].sort(), `seed ${seed}: every call of the round was answered once`);
      if (m.type === "StepBegin" || m.type === "StepRetry") {
        calls = new Set();
        answered = new Set();
      }
      if (m.type === "ToolCall") calls.add(m.payload.id);
      if (m.type === "ToolResult") {
        assert.ok(!answered.has(m.payload.tool_call_id), `seed ${seed}: no result twice in a round`);
        answered.add(m.payload.tool_call_id);
      }
    }
    const results = ui.filter((m) => m.type === "ToolResult");
    // A call the proxy replays in the next step has the id the turn used already: it gets a new
    // one (`c1a_2`, ids are unique per turn) and the result it has. Twelve calls in all.
    assert.equal(new Set(results.map((m) => m.payload.tool_call_id)).size, results.length, `seed ${seed}: one result an id`);
    const ids = new Set(results.map((m) => m.payload.tool_call_id.replace(/_\d+$/, "")));
    assert.equal(ids.size, 12);
    const malformed = results.filter((m) => /send the call again/.test(m.payload.return_value.message));
    assert.ok(recorded.length + malformed.length >= 12);
    assert.equal(new Set(recorded).size, recorded.length, `seed ${seed}: no tool ran twice`);
  }
  console.log(`# chaos: 5 runs, injected ${JSON.stringify(total)}`);
  assert.ok(total.http > 0 && total.truncateMidEvent > 0 && total.truncateBetweenEvents > 0 && total.corruptToolCall > 0 && total.retries > 0);
});

test("the same seed injects the same faults", async () => {
  const run = async () => {
    const p = new k.ChaosProvider(new k.ScriptedProvider(Array.from({ length: 40 }, () => "text: hi")), { seed: 7, errorProbability: 0.3, truncateStreamProbability: 0.3, retryAfterS: 0 });
    const outcomes = [];
    for (let i = 0; i < 20; i++) outcomes.push(await k.generate(p, "", [], []).then(() => "ok", (e) => `${e.name}:${e.status ?? ""}`));
    return outcomes;
  };
  const a = await run();
  assert.deepEqual(await run(), a);
  assert.ok(a.includes("ok") && a.some((x) => x.startsWith("APIStatusError")) && a.includes("APIConnectionError:"));
});

test("over HTTP: an injected 429 carries Retry-After, a cut stream is a connection error, a clean one passes through", async () => {
  const inner = new k.OpenAIChatProvider({ model: "m", baseUrl: server.baseUrl });
  let p = new k.ChaosProvider(inner, { seed: 1, errorProbability: 1, errorTypes: [429], retryAfterS: 3 });
  let r = await k.generate(p, "", [], [{ role: "user", content: "x" }]).catch((e) => e);
  assert.ok(r instanceof k.APIStatusError);
  assert.equal(r.status, 429);
  assert.equal(r.retryAfterMs, 3000);

  server.respond({ steps: [text("Hello "), text("there, "), text("friend."), finish(), usage(3, 3), done()] });
  p = new k.ChaosProvider(inner, { seed: 2, truncateStreamProbability: 1 });
  r = await k.generate(p, "", [], [{ role: "user", content: "x" }]).catch((e) => e);
  assert.ok(r instanceof k.APIConnectionError, String(r));

  server.respond({ steps: [toolStart(0, "c1", "f", '{"a":'), toolArgs(0, " 1}"), finish("tool_calls"), done()] });
  p = new k.ChaosProvider(inner, { seed: 3, corruptToolCallProbability: 1 });
  r = await k.generate(p, "", [], [{ role: "user", content: "x" }]);
  assert.equal(r.message.tool_calls[0].function.arguments, '{"a": 1', "its final } is gone");

  server.respond({ steps: [text("fine"), finish(), done()] });
  r = await k.generate(new k.ChaosProvider(inner, { seed: 4 }), "", [], [{ role: "user", content: "x" }]);
  assert.equal(r.message.content, "fine");
  assert.throws(() => new k.ChaosProvider(inner, { errorProbability: 2 }), /from 0 to 1/);
  assert.throws(() => new k.ChaosProvider({}), /wraps one of this package's providers/);
});
