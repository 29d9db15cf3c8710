// Sub-agents (`Agent.asTool`) through the built package, over a real loopback HTTP server that
// streams Chat Completions SSE and answers each request by who asks (the system prompt) and what
// (the last user message): two sub-agents called in one round run at once, their events on the
// parent's wire, one's approval answered at the parent's UI, the summary continuation, usage
// totals, depth, resume by id, cancel reaching every tool, kimi-cli's failure words.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as k from "kosong-wasm";
import { text, toolStart, finish, usage, done, gate, within } from "./mock-openai.mjs";

const servers = [];
after(() => Promise.all(servers.map((s) => new Promise((r) => s.close(r)))));

/** Yielded by a route: the socket is destroyed there, mid-answer. */
const DESTROY = Symbol("destroy");

/** A loopback server whose answer to each request `route(body)` writes (strings) or waits on (promises). */
async function router(route) {
  const requests = [];
  const server = createServer(async (req, res) => {
    let body = "";
    for await (const c of req) body += c;
    const json = JSON.parse(body);
    const r = { json, closed: false };
    requests.push(r);
    res.on("close", () => (r.closed = true));
    const pieces = route(json);
    if (pieces.status) {
      res.writeHead(pieces.status, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: pieces.message } }));
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream" });
    for await (const p of pieces) {
      if (r.closed) return;
      if (p === DESTROY) return void res.destroy();
      res.write(p);
    }
    res.end();
  });
  servers.push(server);
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return { requests, baseUrl: `http://127.0.0.1:${server.address().port}/v1` };
}

const system = (body) => body.messages.find((m) => m.role === "system")?.content ?? "";
const lastUser = (body) => body.messages.filter((m) => m.role === "user").at(-1)?.content;
const assistants = (body) => body.messages.filter((m) => m.role === "assistant").length;
const answer = (t, u = [10, 5]) => [text(t), finish(), usage(...u), done()];
const calls = (list, u = [10, 5]) => [...list.map(([id, name, args], i) => toolStart(i, id, name, JSON.stringify(args))), finish("tool_calls"), usage(...u), done()];
const long = (w) => Array(40).fill(w).join(" ");

async function runTurn(agent, input, { signal = new AbortController().signal, onMessage, recorder } = {}) {
  const merged = [];
  const raw = [];
  let error;
  try {
    await k.runSoul(agent, input, async (wire) => {
      const r = wire.uiSide({ merge: false });
      const rawLoop = (async () => { for await (const x of r) raw.push(x); })();
      for await (const x of wire.uiSide({ merge: true })) {
        merged.push(x);
        onMessage?.(x, wire);
      }
      await rawLoop;
    }, signal, { recorder });
  } catch (e) {
    error = e;
  }
  return { merged, raw, error, types: merged.map((x) => x.type) };
}

test("two sub-agents in one round run at once: their events on the parent's wire, one's approval answered by the parent's UI, the summary continuation, the usage total, the results", async () => {
  const both = gate();
  const first = gate();
  let started = 0;
  const server = await router(async function* (body) {
    if (system(body) === "You lead.") {
      if (assistants(body) === 0) {
        // Both calls, then the stream holds until the first sub-agent has asked the model: it
        // started mid-stream, the moment its call was complete (the last call of a Chat
        // Completions stream is complete at its end).
        yield toolStart(0, "c1", "explore", JSON.stringify({ prompt: "look", description: "look around" }));
        yield toolStart(1, "c2", "explore", JSON.stringify({ prompt: "clean" }));
        await first.promise;
        yield* [finish("tool_calls"), usage(100, 10), done()];
      } else yield* answer("All done.", [200, 20]);
      return;
    }
    // The explorer: both calls are in flight before either answers (they run at once).
    const task = lastUser(body);
    if (assistants(body) === 0) {
      first.open();
      if (++started === 2) both.open();
      await both.promise;
    }
    if (task === "look") yield* answer(long("finding"), [50, 30]);
    else if (assistants(body) === 0) yield* calls([["k1", "rm", { path: "tmp" }]], [40, 4]);
    else if (assistants(body) === 1) yield* answer("Done.", [60, 2]);
    else yield* answer(long("cleaned"), [70, 40]);
  });
  const provider = new k.OpenAIChatProvider({ model: "m", baseUrl: server.baseUrl, apiKey: "sk-x" });
  const ran = [];
  const explorer = new k.Agent({
    name: "explore",
    provider: null,
    systemPrompt: "You explore.",
    toolset: new k.SimpleToolset([{ name: "rm", description: "", parameters: {}, needsApproval: true, handler: ({ path }) => (ran.push(path), `removed ${path}`) }]),
  });
  const parent = new k.Agent({ name: "lead", provider, systemPrompt: "You lead.", toolset: new k.SimpleToolset([explorer.asTool({ description: "Explores." })]) });
  const asked = [];
  const r = await runTurn(parent, "go", {
    onMessage: (m, wire) => {
      if (m.type !== "ApprovalRequest") return;
      asked.push({ ran: [...ran], request: m.payload });
      wire.respond(m.payload.id, "approve");
    },
  });
  assert.equal(r.error, undefined, String(r.error?.stack));
  assert.deepEqual(ran, ["tmp"]);
  assert.equal(asked.length, 1);
  assert.deepEqual(asked[0].ran, [], "asked before the sub-agent's tool ran");
  assert.equal(asked[0].request.sender, "explore");
  assert.equal(asked[0].request.tool_call_id, "k1");

  // Each sub-agent's turn on the parent's wire, as kimi-cli's SubagentEvent.
  const events = r.merged.filter((m) => m.type === "SubagentEvent").map((m) => m.payload);
  const of = (id) => events.filter((e) => e.parent_tool_call_id === id);
  assert.deepEqual(of("c1").map((e) => e.event.type), ["TurnBegin", "StepBegin", "ContentPart", "StatusUpdate", "TurnEnd"]);
  assert.deepEqual(of("c2").map((e) => e.event.type).filter((t) => t === "TurnBegin").length, 2, "asked once more: 'Done.' is under 200 characters");
  const ids = new Set(events.map((e) => `${e.parent_tool_call_id}:${e.agent_id}`));
  assert.equal(ids.size, 2, [...ids].join());
  for (const e of events) {
    assert.equal(e.subagent_type, "explore");
    assert.match(e.agent_id, /^a[0-9a-f]{8}$/);
  }
  // The raw side saw the child's text as it came (wrapped too).
  assert.ok(r.raw.some((m) => m.type === "SubagentEvent" && m.payload.event.type === "ContentPart"));

  // The results: kimi-cli's lines; the summary the last answer.
  const results = Object.fromEntries(r.merged.filter((m) => m.type === "ToolResult").map((m) => [m.payload.tool_call_id, m.payload.return_value]));
  const c1Agent = of("c1")[0].agent_id;
  assert.equal(results.c1.output, `agent_id: ${c1Agent}\nresumed: false\nactual_subagent_type: explore\nstatus: completed\n\n[summary]\n${long("finding")}`);
  assert.ok(results.c2.output.endsWith(`[summary]\n${long("cleaned")}`));
  assert.equal(results.k1, undefined, "the child's own result is inside its SubagentEvent, not the parent's");

  // The parent's last StatusUpdate counts both sub-agents' steps: 50+40+60+70 in, 30+4+2+40 out.
  const last = r.merged.filter((m) => m.type === "StatusUpdate").at(-1).payload;
  assert.deepEqual(last.subagent_token_usage, { input_other: 220, output: 76, input_cache_read: 0, input_cache_creation: 0 });
  assert.equal(last.token_usage.input_other, 200);

  // Requests: the explorer inherited the parent's provider; its system prompt and prompt are its own.
  const childFirst = server.requests.filter((q) => system(q.json) === "You explore." && assistants(q.json) === 0);
  assert.deepEqual(childFirst.map((q) => lastUser(q.json)).sort(), ["clean", "look"]);
  assert.deepEqual(parent.context.history.map((m) => m.role), ["user", "assistant", "tool", "tool", "assistant"]);
});

test("resume by agent id goes on with the instance's context; an unknown id, a busy one and one past the depth limit are error results", async () => {
  const server = await router(async function* (body) {
    const s = system(body);
    if (s === "You lead.") {
      const n = assistants(body);
      const resumeId = body.messages.filter((m) => m.role === "tool").at(-1)?.content?.match(/agent_id: (a[0-9a-f]{8})/)?.[1];
      if (n === 0) yield* calls([["c1", "note", { prompt: "remember 7" }]]);
      else if (n === 1) yield* calls([["c2", "note", { prompt: "what did I say?", resume: resumeId }], ["c3", "note", { prompt: "x", resume: "a00000000" }]]);
      else yield* answer("ok");
      return;
    }
    // The note-taker answers with how many user messages its context holds.
    yield* answer(`${long("noted")} (${body.messages.filter((m) => m.role === "user").length} user messages)`);
  });
  const provider = new k.OpenAIChatProvider({ model: "m", baseUrl: server.baseUrl, apiKey: "sk-x" });
  const noter = new k.Agent({ name: "note", provider: null, systemPrompt: "You note." });
  const parent = new k.Agent({ provider, systemPrompt: "You lead.", toolset: new k.SimpleToolset([noter.asTool()]) });
  const r = await runTurn(parent, "go");
  assert.equal(r.error, undefined);
  const results = Object.fromEntries(r.merged.filter((m) => m.type === "ToolResult").map((m) => [m.payload.tool_call_id, m.payload.return_value]));
  assert.match(results.c1.output, /resumed: false[\s\S]*\(1 user messages\)$/);
  assert.match(results.c2.output, /resumed: true[\s\S]*\(2 user messages\)$/, "the resumed instance kept its first turn");
  assert.equal(results.c2.output.split("\n")[0], results.c1.output.split("\n")[0], "the same agent id");
  assert.equal(results.c3.is_error, true);
  assert.equal(results.c3.message, "No agent instance `a00000000` of `note` to resume (none such, or it is still running and cannot be resumed concurrently).");

  // Depth: a sub-agent that calls itself stops at maxDepth.
  const deep = await router(async function* (body) {
    const depth = (lastUser(body) ?? "").split("x").length - 1;
    if (assistants(body) === 0 && system(body) === "You recurse.") yield* calls([[`d${depth}`, "recurse", { prompt: "x".repeat(depth + 1) }]]);
    else yield* answer(long("bottom"));
  });
  const toolsetOf = new k.SimpleToolset([]);
  const top = new k.Agent({ name: "recurse", provider: new k.OpenAIChatProvider({ model: "m", baseUrl: deep.baseUrl, apiKey: "sk-x" }), systemPrompt: "You recurse.", toolset: toolsetOf });
  toolsetOf.add(top.asTool({ maxDepth: 2 }));
  const d = await runTurn(top, "go");
  assert.equal(d.error, undefined);
  // depth 0 (the turn) → its call runs depth 1 → its call runs depth 2 → its call is refused.
  const refused = d.merged.filter((m) => m.type === "SubagentEvent").map((m) => m.payload).flatMap(function flat(e) {
    return e.event.type === "SubagentEvent" ? flat(e.event.payload) : [e.event];
  }).filter((m) => m.type === "ToolResult" && m.payload.return_value.is_error);
  assert.equal(refused.length, 1);
  assert.ok(d.raw.some((m) => m.type === "SubagentEvent" && m.payload.event.type === "SubagentEvent" && m.payload.event.payload.event.type === "ContentPart"),
    "a nested sub-agent's text reaches the top raw side as it comes, wrapped twice");
  assert.match(refused[0].payload.return_value.message, /3 levels deep, and the limit is 2/);
});

test("cancelling the parent mid-sub-agent aborts the sub-agent's tools, ends both turns, and the histories agree", async () => {
  const toolStarted = gate();
  const server = await router(async function* (body) {
    if (system(body) === "You lead.") yield* calls([["c1", "work", { prompt: "slow" }]]);
    else yield* calls([["w1", "wait", {}]]);
  });
  let aborted;
  const worker = new k.Agent({
    name: "work",
    provider: null,
    systemPrompt: "You work.",
    toolset: new k.SimpleToolset([{ name: "wait", description: "", parameters: {}, handler: (_a, ctx) => new Promise((_, reject) => {
      toolStarted.open();
      ctx.signal.addEventListener("abort", () => { aborted = ctx.signal.reason; reject(ctx.signal.reason); });
    }) }]),
  });
  const parent = new k.Agent({ provider: new k.OpenAIChatProvider({ model: "m", baseUrl: server.baseUrl, apiKey: "sk-x" }), systemPrompt: "You lead.", toolset: new k.SimpleToolset([worker.asTool()]) });
  const ctrl = new AbortController();
  const run = runTurn(parent, "go", { signal: ctrl.signal });
  await toolStarted.promise;
  ctrl.abort(new Error("stop"));
  const r = await within(run);
  assert.ok(!r.pending, "the run ended");
  assert.ok(r.value.error instanceof k.RunCancelled);
  assert.ok(aborted, "the sub-agent's tool saw its signal abort");
  const results = r.value.merged.filter((m) => m.type === "ToolResult");
  assert.equal(results.at(-1).payload.return_value.display[0].text, "Aborted");
  assert.deepEqual(parent.context.history.map((m) => m.role), ["user", "assistant", "tool"]);
});

test("a sub-agent call past its time limit (asTool timeoutMs) is timed out like any tool: its tools' signals abort with a TimeoutError, the turn goes on", async () => {
  const server = await router(async function* (body) {
    if (system(body) === "You lead.") {
      if (assistants(body) === 0) yield* calls([["c1", "slow", { prompt: "wait" }]]);
      else yield* answer("It took too long.");
      return;
    }
    yield* calls([["w1", "wait", {}]]);
  });
  let reason;
  const slow = new k.Agent({
    name: "slow",
    provider: null,
    systemPrompt: "You wait.",
    toolset: new k.SimpleToolset([{ name: "wait", description: "", parameters: {}, handler: (_a, ctx) => new Promise((_, reject) => ctx.signal.addEventListener("abort", () => reject((reason = ctx.signal.reason)))) }]),
  });
  const parent = new k.Agent({ provider: new k.OpenAIChatProvider({ model: "m", baseUrl: server.baseUrl, apiKey: "sk-x" }), systemPrompt: "You lead.", toolset: new k.SimpleToolset([slow.asTool({ timeoutMs: 200 })]) });
  const r = await runTurn(parent, "go");
  assert.equal(r.error, undefined);
  const result = r.merged.find((m) => m.type === "ToolResult" && m.payload.tool_call_id === "c1").payload.return_value;
  assert.equal(result.display[0].text, "Timed out");
  assert.match(result.message, /Tool `slow` timed out after 200 ms/);
  assert.equal(reason?.name, "TimeoutError", "the sub-agent's tool was stopped with the call's reason");
  assert.deepEqual(parent.context.history.map((m) => m.role), ["user", "assistant", "tool", "assistant"]);
});

test("the caller's stream destroyed after a sub-agent's call was handed on: the round is salvaged, the sub-agent runs once to its answer, the cut-off call never runs, and the wire, the history and the sub-agent agree", async () => {
  const server = await router(async function* (body) {
    if (system(body) === "You lead.") {
      if (assistants(body) === 0) {
        // The first call is whole (a second begins), the second is cut inside its arguments.
        yield toolStart(0, "c1", "helper", JSON.stringify({ prompt: "look" }));
        yield toolStart(1, "c2", "helper", '{"prompt":"lo');
        await new Promise((r) => setTimeout(r, 50)); // the pieces reach the client first
        yield DESTROY;
      } else yield* answer("One of them answered.");
      return;
    }
    yield* answer(long("seen it"));
  });
  const helper = new k.Agent({ name: "helper", provider: null, systemPrompt: "You help." });
  const parent = new k.Agent({ provider: new k.OpenAIChatProvider({ model: "m", baseUrl: server.baseUrl, apiKey: "sk-x" }), systemPrompt: "You lead.", toolset: new k.SimpleToolset([helper.asTool()]) });
  const r = await runTurn(parent, "go");
  assert.equal(r.error, undefined, String(r.error));
  const results = Object.fromEntries(r.merged.filter((m) => m.type === "ToolResult").map((m) => [m.payload.tool_call_id, m.payload.return_value]));
  assert.match(results.c1.output, /status: completed[\s\S]*\[summary\]\nseen/);
  assert.equal(results.c2.is_error, true, "the cut-off call is answered, never run");
  assert.ok(!r.types.includes("StepRetry"), "a salvaged round is not retried");
  // The sub-agent asked the model once, for c1 only; its turn is on the wire once.
  const childAsks = server.requests.filter((q) => system(q.json) === "You help.");
  assert.equal(childAsks.length, 1);
  const subs = r.merged.filter((m) => m.type === "SubagentEvent");
  assert.deepEqual([...new Set(subs.map((m) => m.payload.parent_tool_call_id))], ["c1"]);
  assert.equal(subs.filter((m) => m.payload.event.type === "TurnBegin").length, 1);
  // History: one result a call, the model asked again with both.
  const h = parent.context.history;
  assert.deepEqual(h.map((m) => m.role), ["user", "assistant", "tool", "tool", "assistant"]);
  assert.deepEqual(h[1].tool_calls.map((c) => c.id), ["c1", "c2"]);
  assert.equal(server.requests.filter((q) => system(q.json) === "You lead.").length, 2);
});

test("a sub-agent timed out while its question waits: the question is closed refused on the caller's wire, its tool never runs, the caller's turn goes on", async () => {
  const server = await router(async function* (body) {
    if (system(body) === "You lead.") {
      if (assistants(body) === 0) yield* calls([["c1", "asker", { prompt: "delete it" }]]);
      else yield* answer("It timed out.");
      return;
    }
    yield* calls([["k1", "rm", {}]]);
  });
  const ran = [];
  const asker = new k.Agent({
    name: "asker",
    provider: null,
    systemPrompt: "You ask.",
    toolset: new k.SimpleToolset([{ name: "rm", description: "", parameters: {}, needsApproval: true, handler: () => (ran.push("rm"), "removed") }]),
  });
  const parent = new k.Agent({ provider: new k.OpenAIChatProvider({ model: "m", baseUrl: server.baseUrl, apiKey: "sk-x" }), systemPrompt: "You lead.", toolset: new k.SimpleToolset([asker.asTool({ timeoutMs: 300 })]) });
  const r = await runTurn(parent, "go");
  assert.equal(r.error, undefined);
  const asked = r.merged.filter((m) => m.type === "ApprovalRequest");
  assert.equal(asked.length, 1);
  const closed = r.merged.filter((m) => m.type === "ApprovalResponse").map((m) => [m.payload.request_id, m.payload.response]);
  assert.deepEqual(closed, [[asked[0].payload.id, "reject"]]);
  // Closed when the sub-agent's run ended, not left for the caller's turn's end to refuse.
  assert.ok(r.merged.findIndex((m) => m.type === "ApprovalResponse") < r.merged.findIndex((m) => m.type === "TurnEnd"), r.types.join());
  assert.deepEqual(ran, []);
  assert.equal(r.merged.find((m) => m.type === "ToolResult" && m.payload.tool_call_id === "c1").payload.return_value.display[0].text, "Timed out");
});

test("approve_for_session given to a sub-agent's question holds for the run: the next sub-agent call's same action is not asked again", async () => {
  const ran = [];
  const long40 = Array(40).fill("done").join(" ");
  const helper = new k.Agent({
    name: "helper",
    provider: new k.ScriptedProvider([`tool_call: {"id":"k1","name":"rm","arguments":"{}"}`, `text: ${long40}`, `tool_call: {"id":"k2","name":"rm","arguments":"{}"}`, `text: ${long40}`]),
    toolset: new k.SimpleToolset([{ name: "rm", description: "", parameters: {}, needsApproval: true, handler: (_a, ctx) => (ran.push(ctx.toolCallId), "removed") }]),
  });
  const call = (id) => `tool_call: {"id":"${id}","name":"helper","arguments":"{\\"prompt\\":\\"x\\"}"}`;
  const parent = new k.Agent({ provider: new k.ScriptedProvider([call("c1"), call("c2"), "text: ok"]), toolset: new k.SimpleToolset([helper.asTool()]) });
  const r = await runTurn(parent, "go", { onMessage: (m, wire) => m.type === "ApprovalRequest" && wire.respond(m.payload.id, "approve_for_session") });
  assert.equal(r.error, undefined, String(r.error));
  assert.deepEqual(ran, ["k1", "k2"]);
  assert.equal(r.types.filter((t) => t === "ApprovalRequest").length, 1, "asked once for the run");
});

test("failures are kimi-cli's error results: an API error with its status, max steps; a sub-agent tool in a plain step says why it cannot run", async () => {
  const server = await router((body) => {
    if (system(body) === "You lead.") {
      return (async function* () {
        if (assistants(body) === 0) yield* calls([["c1", "flaky", { prompt: "p" }], ["c2", "busy", { prompt: "p" }]]);
        else yield* answer("ok");
      })();
    }
    if (system(body) === "You fail.") return { status: 401, message: "bad key" };
    return (async function* () { yield* calls([[`x${assistants(body)}`, "nothing", { n: assistants(body) }]]); })();
  });
  const provider = new k.OpenAIChatProvider({ model: "m", baseUrl: server.baseUrl, apiKey: "sk-x" });
  const flaky = new k.Agent({ name: "flaky", provider: null, systemPrompt: "You fail." });
  const busy = new k.Agent({ name: "busy", provider: null, systemPrompt: "You loop.", maxStepsPerTurn: 2 });
  const parent = new k.Agent({ provider, systemPrompt: "You lead.", toolset: new k.SimpleToolset([flaky.asTool(), busy.asTool()]) });
  const r = await runTurn(parent, "go");
  assert.equal(r.error, undefined);
  const results = Object.fromEntries(r.merged.filter((m) => m.type === "ToolResult").map((m) => [m.payload.tool_call_id, m.payload.return_value]));
  assert.equal(results.c1.is_error, true);
  assert.match(results.c1.message, /^LLM API error \(HTTP 401\) when running agent: Error code: 401 - bad key/);
  assert.equal(results.c1.display[0].text, "API error (401)");
  assert.equal(results.c2.message, "Max steps 2 reached when running agent. Please try splitting the task into smaller subtasks.");
  assert.equal(results.c2.display[0].text, "Max steps reached");

  const stepped = await k.step(new k.ScriptedProvider([`tool_call: ${JSON.stringify({ id: "s1", name: "flaky", arguments: '{"prompt":"p"}' })}`]), "", new k.SimpleToolset([flaky.asTool()]), [{ role: "user", content: "x" }]);
  const [res] = await stepped.toolResults();
  assert.equal(res.return_value.is_error, true);
  assert.match(res.return_value.message, /runs only inside an agent run/);
  assert.throws(() => flaky.asTool({ maxDepth: 0 }), /maxDepth must be a positive integer/);
});

test("a session's sub-agent is resumed by its agent id in a later turn opened by another Session (the first let go): its context comes from the FileSessionStore; a store of one's own that keeps no sub-agents answers the call with an error that says so", async () => {
  let id = null;
  const server = await router(async function* (body) {
    if (system(body) === "You lead.") {
      const turn = body.messages.slice(body.messages.findLastIndex((m) => m.role === "user"));
      if (turn.some((m) => m.role === "assistant")) return yield* answer("Noted.");
      if (lastUser(body) === "remember") yield* calls([["c1", "keeper", { prompt: "Remember the number 42." }]]);
      else yield* calls([["c2", "keeper", { prompt: "Which number did I give you?", resume: id }]]);
      return;
    }
    yield* answer(long(lastUser(body) === "Which number did I give you?" ? "the number is 42" : "remembered"));
  });
  const provider = new k.OpenAIChatProvider({ model: "m", baseUrl: server.baseUrl, apiKey: "sk-x" });
  const agent = () => {
    const keeper = new k.Agent({ name: "keeper", provider: null, systemPrompt: "You keep numbers." });
    return { provider, systemPrompt: "You lead.", toolset: new k.SimpleToolset([keeper.asTool()]) };
  };
  const dir = mkdtempSync(join(tmpdir(), "kosong-subagent-resume-"));
  const one = await k.Session.open(new k.FileSessionStore(dir), agent());
  assert.deepEqual(await one.send("remember"), { outcome: "done" });
  const first = one.history.find((m) => m.role === "tool").content;
  id = /agent_id: (a[0-9a-f]{8})/.exec(JSON.stringify(first))[1];
  await one.close();
  // Another Session, other Agent objects: nothing of the first is in memory.
  const two = await k.Session.open(new k.FileSessionStore(dir), agent());
  assert.deepEqual(await two.send("recall"), { outcome: "done" });
  const second = JSON.stringify(two.history.filter((m) => m.role === "tool").at(-1).content);
  assert.match(second, new RegExp(`agent_id: ${id}\\\\nresumed: true\\\\nactual_subagent_type: keeper`));
  await two.close();
  const asked = server.requests.filter((q) => system(q.json) === "You keep numbers.").at(-1).json.messages;
  assert.deepEqual(asked.filter((m) => m.role === "user").map((m) => m.content), ["Remember the number 42.", "Which number did I give you?"], "the instance's stored conversation, then the new prompt");
  const lines = readFileSync(join(dir, "subagents", id, "context.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l));
  assert.deepEqual(lines.filter((m) => m.role === "user").map((m) => m.content), ["Remember the number 42.", "Which number did I give you?"]);

  // A store of one's own written before stores kept sub-agents: loud, not lossy.
  const inner = new k.MemorySessionStore();
  const plain = { open: async () => { const { agents, ...rest } = await inner.open(); return rest; }, write: (ops) => inner.write(ops), close: () => inner.close() };
  const three = await k.Session.open(plain, agent());
  assert.deepEqual(await three.send("remember"), { outcome: "done" });
  const refused = three.history.find((m) => m.role === "tool").content;
  assert.match(JSON.stringify(refused), /`keeper` cannot run in this session: its store keeps no sub-agent contexts/);
  await three.close();
});

test("resumeSoul (no session: a sub-agent's context is in memory only) of a turn whose runtime died mid-sub-agent: the call is answered interrupted by a new process's agent and the sub-agent's waiting question closed refused; nothing of it runs", async () => {
  const ran = [];
  const helper = () => new k.Agent({
    name: "helper",
    provider: new k.ScriptedProvider([`tool_call: {"id":"k1","name":"rm","arguments":"{}"}`, `text: ${long("done")}`]),
    toolset: new k.SimpleToolset([{ name: "rm", description: "", parameters: {}, needsApproval: true, handler: (_a, ctx) => (ran.push(ctx.toolCallId), "removed") }]),
  });
  const call = `tool_call: {"id":"c1","name":"helper","arguments":"{\\"prompt\\":\\"x\\"}"}`;
  const ctx = new k.Context();
  const first = new k.Agent({ provider: new k.ScriptedProvider([call]), toolset: new k.SimpleToolset([helper().asTool()]), context: ctx });
  const lines = [];
  const ac = new AbortController();
  let recording, snapshot, asked;
  await k.runSoul(first, "go", async (w) => {
    for await (const m of w.uiSide()) {
      if (m.type !== "ApprovalRequest" || recording) continue;
      // The runtime dies here: what it leaves is the recording so far and the context.
      asked = m.payload.id;
      recording = lines.join("\n");
      snapshot = ctx.toJSONL();
      ac.abort();
    }
  }, ac.signal, { recorder: new k.WireRecorder((l) => void lines.push(l)) }).catch(() => {});
  assert.ok(recording.includes('"SubagentEvent"') && recording.includes(asked));
  const second = new k.Agent({ provider: new k.ScriptedProvider(["text: checked"]), toolset: new k.SimpleToolset([helper().asTool()]), context: k.Context.fromJSONL(snapshot) });
  const seen = [];
  await within(k.resumeSoul(second, recording, async (w) => { for await (const m of w.uiSide()) seen.push(m); }, new AbortController().signal), 10_000);
  assert.deepEqual(seen.filter((m) => m.type === "ApprovalResponse").map((m) => [m.payload.request_id, m.payload.response]), [[asked, "reject"]]);
  const result = seen.find((m) => m.type === "ToolResult" && m.payload.tool_call_id === "c1").payload.return_value;
  assert.equal(result.display[0].text, "Interrupted");
  assert.ok(!seen.some((m) => m.type === "SubagentEvent"), "the sub-agent did not run again");
  assert.deepEqual(ran, []);
  assert.deepEqual(second.context.history.map((m) => m.role), ["user", "assistant", "tool", "assistant"]);
});

// ---- a session's runtime killed mid-sub-agent ---------------------------------------------------

const CHILD = new URL("./subagent-child.mjs", import.meta.url).pathname;

function life(dir, baseUrl, mode, ...more) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CHILD, dir, baseUrl, mode, ...more], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    child.on("error", reject);
    child.on("exit", (code, signal) => resolve({ said: out.trim().split("\n").filter(Boolean).map((l) => JSON.parse(l)), code, signal, err }));
  });
}

for (const mode of ["approval", "tool"]) {
  test(`a Node process running a Session SIGKILLed mid-sub-agent (${mode === "approval" ? "while its tool's question waits" : "inside its tool"}): the next process goes on with the sub-agent where it was — its context from the session's store, ${mode === "approval" ? "its question waiting again under its id and answered there" : "its cut-off tool answered interrupted"} — no tool of either runs twice, and the wire, the history, the store and the tool agree`, { timeout: 60_000 }, async () => {
    const server = await router(async function* (body) {
      if (system(body) === "You lead.") {
        if (assistants(body) === 0) yield* calls([["c1", "helper", { prompt: "clean /tmp/x" }]]);
        else yield* answer("The helper reported back.");
        return;
      }
      if (assistants(body) === 0) yield* calls([["k1", "rm", { path: "/tmp/x" }]]);
      else yield* answer(long("removed"));
    });
    const dir = mkdtempSync(join(tmpdir(), "kosong-subagent-"));
    const first = await life(dir, server.baseUrl, mode);
    assert.equal(first.signal, "SIGKILL", first.err + JSON.stringify(first.said));
    const ran = () => (existsSync(join(dir, "ran.log")) ? readFileSync(join(dir, "ran.log"), "utf8").trim().split("\n").filter(Boolean) : []);
    assert.deepEqual(ran(), mode === "tool" ? ["k1 /tmp/x"] : [], "the tool started once in the first life (or not at all: it was asked first)");
    // The sub-agent's context is in the session's directory, where kimi-cli keeps one.
    const [agentId] = readdirSync(join(dir, "subagents"));
    assert.match(agentId, /^a[0-9a-f]{8}$/);
    const before = readFileSync(join(dir, "subagents", agentId, "context.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l));
    assert.deepEqual(before.filter((m) => m.role === "user").map((m) => m.content), ["clean /tmp/x"]);
    assert.ok(!before.some((m) => m.role === "assistant"), "a round is written with its results: the recording holds the call");

    const second = await life(dir, server.baseUrl, mode === "approval" ? "answer" : "none");
    assert.equal(second.code, 0, second.err);
    const recovered = second.said.find((s) => "recovered" in s).recovered;
    assert.deepEqual(recovered, { outcome: "done" });
    assert.deepEqual(ran(), ["k1 /tmp/x"], "the sub-agent's tool ran once across both lives");
    const { events, history } = second.said.at(-1);
    const asked = events.filter((m) => m.type === "ApprovalRequest");
    const answered = events.filter((m) => m.type === "ApprovalResponse");
    if (mode === "approval") {
      // One question, asked in the first life, answered in the second under the same id.
      assert.equal(asked.length, 1);
      assert.equal(asked[0].payload.agent_id, agentId);
      assert.deepEqual(answered.map((a) => [a.payload.request_id, a.payload.response]), [[asked[0].payload.id, "approve"]]);
    } else {
      assert.equal(asked.length, 0);
    }
    // The sub-agent went on: resumed once, on the wire as its own events; the call is its answer.
    const sub = events.filter((m) => m.type === "SubagentEvent" && m.payload.parent_tool_call_id === "c1");
    assert.ok(sub.every((m) => m.payload.agent_id === agentId), "one instance");
    assert.equal(sub.filter((m) => m.payload.event.type === "TurnBegin").length, 1, "its turn was not begun again");
    assert.equal(sub.filter((m) => m.payload.event.type === "Notification" && m.payload.event.payload.type === "turn_resumed").length, 1);
    const rmResult = sub.find((m) => m.payload.event.type === "ToolResult")?.payload.event.payload.return_value;
    if (mode === "tool") assert.equal(rmResult.display[0].text, "Interrupted", "rm died mid-run: not run again");
    else assert.equal(rmResult.output, "removed /tmp/x");
    const result = events.find((m) => m.type === "ToolResult" && m.payload.tool_call_id === "c1").payload.return_value;
    assert.equal(result.is_error, false, JSON.stringify(result));
    assert.match(result.output, new RegExp(`^agent_id: ${agentId}\nresumed: false\nactual_subagent_type: helper\nstatus: completed`));
    assert.deepEqual(history.filter((m) => m.role !== "system").map((m) => m.role), ["user", "assistant", "tool", "assistant"]);
    // The model: the sub-agent was asked for its first step once (in the first life) and its
    // second once; the parent twice.
    const helperAsked = server.requests.filter((q) => system(q.json) === "You clean up.");
    assert.deepEqual(helperAsked.map((q) => assistants(q.json)), [0, 1]);
    assert.equal(server.requests.filter((q) => system(q.json) === "You lead.").length, 2);
    // The stored sub-agent context is its whole conversation, every call answered once.
    const after = readFileSync(join(dir, "subagents", agentId, "context.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l));
    const msgs = after.filter((m) => !m.role.startsWith("_"));
    assert.deepEqual(msgs.map((m) => m.role), ["system", "user", "assistant", "tool", "assistant"].slice(msgs[0].role === "system" ? 0 : 1));
    assert.equal(msgs.filter((m) => m.role === "tool" && m.tool_call_id === "k1").length, 1);
  });
}

/** What a session directory holds, in brief: the wire's events (a sub-agent's as `agent:type`), each context's roles, the tools' ledger. */
function snapshot(dir) {
  const read = (f) => (existsSync(f) ? readFileSync(f, "utf8").trim().split("\n").filter(Boolean) : []);
  const wire = read(join(dir, "wire.jsonl")).slice(1).map((l) => JSON.parse(l).message).map((m) => {
    if (m.type !== "SubagentEvent") return m.type + (m.type === "ApprovalResponse" ? `(${m.payload.response})` : "");
    const e = m.payload.event;
    return `${m.payload.agent_id}:${e.type}${e.type === "Notification" ? `(${e.payload.type})` : ""}`;
  });
  const roles = (f) => read(f).map((l) => JSON.parse(l)).map((m) => m.role + (m.tool_call_id ? `(${m.tool_call_id})` : ""));
  const agents = existsSync(join(dir, "subagents")) ? readdirSync(join(dir, "subagents")) : [];
  return {
    wire,
    context: roles(join(dir, "context.jsonl")),
    subagents: Object.fromEntries(agents.map((a) => [a, roles(join(dir, "subagents", a, "context.jsonl"))])),
    ledger: read(join(dir, "ran.log")),
  };
}

test("a recorded turn with two sub-agents running at once — one waiting on its question, the other inside its tool — killed while both run: the next process goes on with both, the question answered there runs its tool once, the cut-off tool is answered interrupted and not run again; the store, the wire and the tools' ledger agree", { timeout: 60_000 }, async () => {
  const server = await router(async function* (body) {
    const task = body.messages.find((m) => m.role === "user")?.content;
    if (system(body) === "You lead.") {
      if (assistants(body) === 0) yield* calls([["c1", "helper", { prompt: "clean /tmp/x" }], ["c2", "helper", { prompt: "list /tmp" }]]);
      else yield* answer("Both helpers reported back.");
      return;
    }
    if (assistants(body) === 0) yield* calls([task === "clean /tmp/x" ? ["k1", "rm", { path: "/tmp/x" }] : ["k2", "ls", { path: "/tmp" }]]);
    else yield* answer(long(task === "clean /tmp/x" ? "removed" : "listed"));
  });
  const dir = mkdtempSync(join(tmpdir(), "kosong-subagent-pair-"));
  const first = await life(dir, server.baseUrl, "pair");
  assert.equal(first.signal, "SIGKILL", first.err + JSON.stringify(first.said));
  const before = snapshot(dir);
  assert.deepEqual(before.ledger, ["k2 /tmp"], "ls started; rm waits on its question");
  const ids = Object.keys(before.subagents);
  assert.equal(ids.length, 2, "both sub-agents' contexts are in the store");
  assert.ok(before.wire.includes("ApprovalRequest") && !before.wire.some((w) => w.startsWith("ApprovalResponse")));

  const second = await life(dir, server.baseUrl, "answer", "pair");
  assert.equal(second.code, 0, second.err);
  assert.deepEqual(second.said.find((s) => "recovered" in s).recovered, { outcome: "done" });
  const after = snapshot(dir);
  if (process.env.KOSONG_NOTE) console.log(JSON.stringify({ before, after }, null, 1));
  assert.deepEqual(after.ledger, ["k2 /tmp", "k1 /tmp/x"], "ls ran once (before the death), rm once (approved after it)");
  const { events } = second.said.at(-1);
  assert.deepEqual(events.filter((m) => m.type === "ApprovalResponse").map((m) => m.payload.response), ["approve"], "the one question, answered once, after the death");
  for (const [call, out] of [["c1", /^removed \/tmp\/x$/], ["c2", null]]) {
    const sub = events.filter((m) => m.type === "SubagentEvent" && m.payload.parent_tool_call_id === call);
    assert.equal(sub.filter((m) => m.payload.event.type === "TurnBegin").length, 1, `${call}'s sub-agent began once`);
    assert.equal(sub.filter((m) => m.payload.event.payload?.type === "turn_resumed").length, 1, `${call}'s sub-agent was resumed`);
    const rv = sub.find((m) => m.payload.event.type === "ToolResult").payload.event.payload.return_value;
    if (out) assert.match(rv.output, out);
    else assert.equal(rv.display[0].text, "Interrupted");
    const result = events.find((m) => m.type === "ToolResult" && m.payload.tool_call_id === call).payload.return_value;
    assert.match(result.output, /^agent_id: a[0-9a-f]{8}\nresumed: false\nactual_subagent_type: helper\nstatus: completed/);
  }
  // Each sub-agent's stored context is its whole conversation, every call answered once.
  for (const roles of Object.values(after.subagents)) {
    assert.deepEqual(roles.filter((r) => !r.startsWith("_")), ["user", "assistant", roles.find((r) => r.startsWith("tool(")), "assistant"]);
  }
  assert.deepEqual(after.context.filter((r) => !r.startsWith("_")), ["user", "assistant", "tool(c1)", "tool(c2)", "assistant"]);
});

test("a nested sub-agent (a sub-agent's own sub-agent) waiting on its question when the process is SIGKILLed: the next process goes on with both levels — each resumed, neither begun again — the question answered there runs its tool once", { timeout: 60_000 }, async () => {
  const server = await router(async function* (body) {
    const who = system(body);
    if (who === "You lead.") {
      if (assistants(body) === 0) yield* calls([["c1", "helper", { prompt: "get deep to clean /tmp/x" }]]);
      else yield* answer("Done.");
    } else if (who === "You clean up.") {
      if (assistants(body) === 0) yield* calls([["h1", "deep", { prompt: "clean /tmp/x" }]]);
      else yield* answer(long("delegated"));
    } else {
      if (assistants(body) === 0) yield* calls([["d1", "rm", { path: "/tmp/x" }]]);
      else yield* answer(long("removed"));
    }
  });
  const dir = mkdtempSync(join(tmpdir(), "kosong-subagent-nested-"));
  const first = await life(dir, server.baseUrl, "approval", "nested");
  assert.equal(first.signal, "SIGKILL", first.err + JSON.stringify(first.said));
  assert.equal(readdirSync(join(dir, "subagents")).length, 2, "both levels' contexts are stored");
  const second = await life(dir, server.baseUrl, "answer", "nested");
  assert.equal(second.code, 0, second.err);
  assert.deepEqual(second.said.find((s) => "recovered" in s).recovered, { outcome: "done" });
  assert.deepEqual(readFileSync(join(dir, "ran.log"), "utf8").trim().split("\n"), ["d1 /tmp/x"], "rm ran once, after the death");
  const { events } = second.said.at(-1);
  const asked = events.filter((m) => m.type === "ApprovalRequest");
  assert.equal(asked.length, 1);
  assert.equal(asked[0].payload.subagent_type, "deep");
  assert.deepEqual(events.filter((m) => m.type === "ApprovalResponse").map((m) => [m.payload.request_id, m.payload.response]), [[asked[0].payload.id, "approve"]]);
  const outer = events.filter((m) => m.type === "SubagentEvent" && m.payload.parent_tool_call_id === "c1").map((m) => m.payload.event);
  const inner = outer.filter((e) => e.type === "SubagentEvent").map((e) => e.payload.event);
  for (const [level, evs] of [["helper", outer], ["deep", inner]]) {
    assert.equal(evs.filter((e) => e.type === "TurnBegin").length, 1, `${level} began once`);
    assert.equal(evs.filter((e) => e.type === "Notification" && e.payload.type === "turn_resumed").length, 1, `${level} was resumed`);
  }
  const result = events.find((m) => m.type === "ToolResult" && m.payload.tool_call_id === "c1").payload.return_value;
  assert.match(result.output, /^agent_id: a[0-9a-f]{8}\nresumed: false\nactual_subagent_type: helper\nstatus: completed/);
  const deepResult = outer.find((e) => e.type === "ToolResult" && e.payload.tool_call_id === "h1").payload.return_value;
  assert.match(deepResult.output, /actual_subagent_type: deep\nstatus: completed\n\n\[summary\]\nremoved/);
});
