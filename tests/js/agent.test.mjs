// The soul runtime: Agent turns over ScriptedProvider and the loopback SSE server, the
// Wire's merged and raw sides, recording and replay, Context, retries, compaction,
// approvals and cancellation.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import * as k from "kosong-wasm";
import { startMockServer, text, toolStart, toolArgs, finish, usage, done, gate, sleep, sse, within } from "./mock-openai.mjs";

let server;
before(async () => (server = await startMockServer()));
after(async () => server.close());

const call = (id, name, args) => `tool_call: ${JSON.stringify({ id, name, arguments: JSON.stringify(args) })}`;
const plusTool = { name: "plus", description: "adds", parameters: { type: "object" }, handler: ({ a, b }) => String(a + b) };

/** Runs one turn and collects what a merged UI (and optionally a raw UI) saw. */
async function runTurn(agent, input, { signal = new AbortController().signal, raw = false, recorder, onMessage } = {}) {
  const merged = [];
  const rawSeen = [];
  let error;
  try {
    await k.runSoul(agent, input, async (wire) => {
      const m = wire.uiSide({ merge: true });
      const r = raw ? wire.uiSide({ merge: false }) : null;
      const rawLoop = r && (async () => { for await (const x of r) rawSeen.push(x); })();
      for await (const x of m) {
        merged.push(x);
        onMessage?.(x, wire);
      }
      await rawLoop;
    }, signal, { recorder });
  } catch (e) {
    error = e;
  }
  return { merged, raw: rawSeen, error, types: merged.map((x) => x.type) };
}

test("a two-step turn with a tool: the exact merged wire sequence, and the context it leaves", async () => {
  const provider = new k.ScriptedProvider([
    `usage: input_other=10 output=5\nthink: I should add.\ntext: Let me add.\n${call("c1", "plus", { a: 1, b: 2 })}`,
    "usage: input_other=30 output=3\ntext: It is 3.",
  ]);
  const agent = new k.Agent({ provider, systemPrompt: "You add.", toolset: new k.SimpleToolset([plusTool]) });
  const { merged, error } = await runTurn(agent, "1+2?");
  assert.equal(error, undefined);
  // The plus tool is synchronous and starts the moment its call is complete, so its
  // result is published before the step's StatusUpdate.
  assert.deepEqual(merged.map((m) => m.type), [
    "TurnBegin", "StepBegin", "ContentPart", "ContentPart", "ToolCall", "ToolResult", "StatusUpdate",
    "StepBegin", "ContentPart", "StatusUpdate", "TurnEnd",
  ]);
  // The turn's id: the context's checkpoints of the turn carry it too (how a recording and its
  // context are known to belong together).
  const { turn_id, ...begin } = merged[0].payload;
  assert.deepEqual(begin, { user_input: "1+2?" });
  assert.match(turn_id, /^[0-9a-f]+-[0-9a-f]+-[0-9a-f]+$/);
  assert.deepEqual(merged[1].payload, { n: 1 });
  assert.deepEqual(merged[2].payload, { type: "think", think: "I should add." });
  assert.deepEqual(merged[3].payload, { type: "text", text: "Let me add." });
  assert.equal(merged[4].payload.id, "c1");
  assert.deepEqual(merged[5].payload, { tool_call_id: "c1", return_value: k.toolOk({ output: "3" }) });
  assert.deepEqual(merged[6].payload.token_usage, { input_other: 10, output: 5, input_cache_read: 0, input_cache_creation: 0 });
  assert.deepEqual(merged[7].payload, { n: 2 });
  assert.deepEqual(merged.at(-1), { type: "TurnEnd", payload: {} });

  const h = agent.context.history;
  assert.deepEqual(h.map((m) => m.role), ["user", "assistant", "tool", "assistant"]);
  assert.deepEqual(h[2], { role: "tool", content: "3", tool_call_id: "c1" });
  assert.equal(agent.context.nCheckpoints, 3, "one for the turn, one per step");
  assert.equal(agent.context.tokenCount, 33);
});

test("tool results become kimi-cli's tool messages: errors and empty output", async () => {
  const provider = new k.ScriptedProvider([
    `${call("e1", "fail", {})}\n${call("e2", "empty", {})}\n${call("e3", "nope", {})}`,
    "text: done",
  ]);
  const toolset = new k.SimpleToolset([
    { name: "fail", description: "", parameters: {}, handler: () => k.toolError({ message: "disk full", brief: "Failed", output: "partial" }) },
    { name: "empty", description: "", parameters: {}, handler: () => "" },
  ]);
  const agent = new k.Agent({ provider, systemPrompt: "", toolset });
  await runTurn(agent, "go");
  const tools = agent.context.history.filter((m) => m.role === "tool");
  assert.deepEqual(tools[0].content, [{ type: "text", text: "<system>ERROR: disk full</system>" }, { type: "text", text: "partial" }]);
  assert.equal(tools[1].content, "<system>Tool output is empty.</system>");
  assert.equal(tools[2].content, "<system>ERROR: Tool `nope` not found</system>");
});

test("a failing step sends StepInterrupted then TurnEnd, and runSoul rethrows the soul's error", async () => {
  const provider = new k.ScriptedProvider(["sparkle: not a kind"]);
  const agent = new k.Agent({ provider, systemPrompt: "" });
  const { types, error } = await runTurn(agent, "x");
  assert.ok(error instanceof k.ChatProviderError);
  assert.deepEqual(types, ["TurnBegin", "StepBegin", "StepInterrupted", "TurnEnd"]);
});

test("no provider → LLMNotSet; an image for a text-only model → LLMNotSupported naming what is missing", async () => {
  let r = await runTurn(new k.Agent({ provider: null, systemPrompt: "" }), "hi");
  assert.ok(r.error instanceof k.LLMNotSet);
  assert.deepEqual(r.types, ["TurnBegin", "TurnEnd"]);
  const agent = new k.Agent({ provider: new k.ScriptedProvider(["text: x"]), systemPrompt: "", capabilities: ["thinking"] });
  r = await runTurn(agent, [{ type: "text", text: "see" }, { type: "image_url", image_url: { url: "data:image/png;base64,AA" } }]);
  assert.ok(r.error instanceof k.LLMNotSupported);
  assert.deepEqual(r.error.capabilities, ["image_in"]);
  assert.equal(r.error.modelName, "scripted_echo");
  assert.equal(agent.context.history.length, 0);
});

test("MaxStepsReached after maxStepsPerTurn steps", async () => {
  const provider = new k.ScriptedProvider([call("a", "plus", { a: 1, b: 1 }), call("b", "plus", { a: 2, b: 2 }), call("c", "plus", { a: 3, b: 3 })]);
  const agent = new k.Agent({ provider, systemPrompt: "", toolset: new k.SimpleToolset([plusTool]), maxStepsPerTurn: 2 });
  const { error, types } = await runTurn(agent, "loop");
  assert.ok(error instanceof k.MaxStepsReached);
  assert.equal(error.nSteps, 2);
  assert.equal(types.filter((t) => t === "StepBegin").length, 2);
  assert.equal(types.at(-1), "TurnEnd");
});

test("left out, maxStepsPerTurn and maxRetriesPerStep are the core's defaults: 100 steps, 3 attempts a step", async () => {
  const scripts = Array.from({ length: 101 }, (_, i) => call(`c${i}`, "plus", { a: i, b: 1 }));
  const agent = new k.Agent({ provider: new k.ScriptedProvider(scripts), systemPrompt: "", toolset: new k.SimpleToolset([plusTool]) });
  const { error, types } = await runTurn(agent, "loop");
  assert.ok(error instanceof k.MaxStepsReached, String(error));
  assert.equal(error.nSteps, 100);
  assert.equal(types.filter((t) => t === "StepBegin").length, 100);
  const failing = new k.Agent({ provider: new k.ScriptedProvider(["error: 500 one", "error: 500 two", "error: 500 three", "text: never"]), systemPrompt: "", retryBackoff: { initialMs: 1, jitterMs: 0 } });
  const r = await runTurn(failing, "hi");
  assert.ok(r.error instanceof k.APIStatusError, String(r.error));
  assert.equal(r.types.filter((t) => t === "StepRetry").length, 2, "three attempts: two retries");
  assert.throws(() => new k.Agent({ provider: new k.ScriptedProvider([]), systemPrompt: "", maxStepsPerTurn: 0 }), /maxStepsPerTurn must be a positive integer/);
  assert.throws(() => new k.Agent({ provider: new k.ScriptedProvider([]), systemPrompt: "", maxRetriesPerStep: 1.5 }), /maxRetriesPerStep must be a positive integer/);
});

test("the same tool call 12 times in a row stops the turn", async () => {
  const scripts = Array.from({ length: 20 }, () => call("same", "plus", { a: 1, b: 1 }));
  const agent = new k.Agent({ provider: new k.ScriptedProvider(scripts), systemPrompt: "", toolset: new k.SimpleToolset([plusTool]) });
  const { error, types } = await runTurn(agent, "again and again");
  assert.ok(error instanceof k.RepeatedToolCallError);
  assert.equal(error.count, 12);
  assert.equal(types.filter((t) => t === "StepBegin").length, 12);
});

test("cancel during a tool: RunCancelled, the tool's signal aborted, TurnEnd without StepInterrupted", async () => {
  const started = gate();
  let toolSignal;
  const toolset = new k.SimpleToolset([{ name: "wait", description: "", parameters: {}, handler: (_a, ctx) => { toolSignal = ctx.signal; started.open(); return new Promise(() => {}); } }]);
  const agent = new k.Agent({ provider: new k.ScriptedProvider([call("w", "wait", {})]), systemPrompt: "", toolset });
  const ctrl = new AbortController();
  const p = runTurn(agent, "wait", { signal: ctrl.signal });
  await started.promise;
  ctrl.abort(new Error("stop"));
  const { error, types, merged } = await p;
  assert.ok(error instanceof k.RunCancelled);
  assert.equal(error.cause.message, "stop");
  assert.equal(toolSignal.aborted, true);
  assert.ok(!types.includes("StepInterrupted"));
  assert.equal(types.at(-1), "TurnEnd");
  // No tool call is left without a result: the dispatched call got an "aborted" one.
  assert.deepEqual(agent.context.history.map((m) => m.role), ["user", "assistant", "tool"]);
  // The words never say it did not happen: the model must check before doing it again (48 F).
  assert.match(JSON.stringify(agent.context.history[2]), /aborted: the user cancelled the run before it finished\. It may have taken effect; check before calling it again/);
  const aborted = merged.find((m) => m.type === "ToolResult");
  assert.deepEqual(aborted.payload.return_value.display, [{ type: "brief", text: "Aborted" }], "the UI is told too");
  assert.deepEqual(types.slice(-2), ["ToolResult", "TurnEnd"]);
  assert.equal(getEventListeners(ctrl.signal, "abort").length, 0);
});

test("a stream that sends parts then fails with 429 is retried; the merged UI sees both attempts in order", async () => {
  server.respond({ steps: [text("Hel"), text("lo"), sse({ error: { message: "Rate limit exceeded", code: 429 } })] });
  server.respond({ steps: [text("Hello"), text(" again"), finish(), usage(5, 2), done()] });
  const before = server.requests.length;
  const provider = new k.OpenAIChatProvider({ model: "m", baseUrl: server.baseUrl, apiKey: "sk-x" });
  const agent = new k.Agent({ provider, systemPrompt: "" });
  const { merged, error } = await runTurn(agent, "hi");
  assert.equal(error, undefined);
  assert.equal(server.requests.length - before, 2);
  const seq = merged.map((m) => (m.type === "ContentPart" ? `text:${m.payload.text}` : m.type));
  assert.deepEqual(seq, ["TurnBegin", "StepBegin", "text:Hello", "StepRetry", "text:Hello again", "StatusUpdate", "TurnEnd"]);
  const retry = merged.find((m) => m.type === "StepRetry").payload;
  assert.deepEqual({ ...retry, wait_s: typeof retry.wait_s }, { n: 1, next_attempt: 2, max_attempts: 3, wait_s: "number", error_type: "APIStatusError", status_code: 429 });
  assert.equal(agent.context.history.at(-1).content, "Hello again");
});

test("503 twice then success; a 400 fails at once", async () => {
  const provider = new k.OpenAIChatProvider({ model: "m", baseUrl: server.baseUrl });
  server.respond({ status: 503, body: { error: { message: "overloaded" } } });
  server.respond({ status: 503, body: { error: { message: "overloaded" } } });
  server.respond({ steps: [text("finally"), finish(), done()] });
  let r = await runTurn(new k.Agent({ provider, systemPrompt: "" }), "x");
  assert.equal(r.error, undefined);
  assert.equal(r.types.filter((t) => t === "StepRetry").length, 2);

  const before = server.requests.length;
  server.respond({ status: 400, body: { error: { message: "bad request" } } });
  r = await runTurn(new k.Agent({ provider, systemPrompt: "" }), "x");
  assert.ok(r.error instanceof k.APIStatusError);
  assert.equal(r.error.status, 400);
  assert.equal(server.requests.length - before, 1);
  assert.ok(!r.types.includes("StepRetry"));
  assert.deepEqual(r.types.slice(-2), ["StepInterrupted", "TurnEnd"]);
});

test("cancel during a retry wait ends at once", async () => {
  server.respond({ status: 429, headers: { "retry-after": "30" }, body: { error: { message: "slow down" } } });
  const provider = new k.OpenAIChatProvider({ model: "m", baseUrl: server.baseUrl });
  const ctrl = new AbortController();
  const t0 = Date.now();
  const r = await runTurn(new k.Agent({ provider, systemPrompt: "" }), "x", {
    signal: ctrl.signal,
    onMessage: (m) => m.type === "StepRetry" && ctrl.abort(),
  });
  assert.ok(r.error instanceof k.RunCancelled);
  assert.ok(Date.now() - t0 < 10_000, "did not sit out the 30 s Retry-After");
  const retry = r.merged.find((m) => m.type === "StepRetry");
  assert.equal(retry.payload.wait_s, 30);
});

test("approvals: approve, approve_for_session remembers the action; the tool decides what a refusal returns", async () => {
  const ran = [];
  const toolset = new k.SimpleToolset([{
    name: "rm", description: "", parameters: {},
    handler: async ({ path }, ctx) => {
      if (!(await ctx.requestApproval({ action: "delete file", description: `rm ${path}` }))) return path === "keep" ? "not deleted" : ctx.rejection();
      ran.push(path);
      return `deleted ${path}`;
    },
  }]);
  const provider = new k.ScriptedProvider([
    call("r1", "rm", { path: "a" }), call("r2", "rm", { path: "b" }), call("r3", "rm", { path: "c" }), "text: ok",
    call("r4", "rm", { path: "d" }), "text: never",
  ]);
  const agent = new k.Agent({ provider, systemPrompt: "", toolset });
  const answers = ["approve", "approve_for_session"];
  let r = await runTurn(agent, "clean up", {
    onMessage: (m, wire) => {
      if (m.type === "ApprovalRequest") wire.respond(m.payload.id, answers.shift());
    },
  });
  assert.equal(r.error, undefined);
  assert.deepEqual(ran, ["a", "b", "c"], "c was approved for the session without asking");
  assert.equal(r.types.filter((t) => t === "ApprovalRequest").length, 2);
  const req = r.merged.find((m) => m.type === "ApprovalRequest").payload;
  assert.deepEqual({ ...req, id: typeof req.id }, { id: "string", tool_call_id: "r1", sender: "agent", action: "delete file", description: "rm a", display: [] });
  assert.deepEqual(r.merged.find((m) => m.type === "ApprovalResponse").payload, { request_id: req.id, response: "approve", feedback: "" });

  // A refusal without feedback: kimi-cli's rejection is what the model is told, and the turn returns to the user.
  const agent2 = new k.Agent({ provider: new k.ScriptedProvider([call("x1", "rm", { path: "z" }), "text: never"]), systemPrompt: "", toolset });
  r = await runTurn(agent2, "delete z", { onMessage: (m, wire) => m.type === "ApprovalRequest" && wire.respond(m.payload.id, "reject") });
  assert.equal(r.error, undefined);
  let result = r.merged.find((m) => m.type === "ToolResult").payload.return_value;
  assert.equal(result.is_error, true);
  assert.equal(result.message, "The tool call is rejected by the user. Stop what you are doing and wait for the user to tell you how to proceed.");
  assert.deepEqual(result.display, [{ type: "brief", text: "Rejected by user" }]);
  assert.equal(r.types.filter((t) => t === "StepBegin").length, 1);
  assert.match(JSON.stringify(agent2.context.history.at(-1)), /rejected by the user/);

  // With feedback the model reads it and the turn goes on.
  const agent3 = new k.Agent({ provider: new k.ScriptedProvider([call("x2", "rm", { path: "z" }), "text: keeping z"]), systemPrompt: "", toolset });
  r = await runTurn(agent3, "delete z", { onMessage: (m, wire) => m.type === "ApprovalRequest" && wire.respond(m.payload.id, "reject", "keep z") });
  result = r.merged.find((m) => m.type === "ToolResult").payload.return_value;
  assert.equal(result.message, "The tool call is rejected by the user. User feedback: keep z");
  assert.deepEqual(result.display, [{ type: "brief", text: "Rejected: keep z" }]);
  assert.equal(r.types.filter((t) => t === "StepBegin").length, 2);
  assert.equal(agent3.context.history.at(-1).content, "keeping z");

  // A tool that returns something else after a refusal keeps its result.
  const agent4 = new k.Agent({ provider: new k.ScriptedProvider([call("x3", "rm", { path: "keep" }), "text: ok"]), systemPrompt: "", toolset });
  r = await runTurn(agent4, "delete", { onMessage: (m, wire) => m.type === "ApprovalRequest" && wire.respond(m.payload.id, "reject") });
  assert.equal(r.merged.find((m) => m.type === "ToolResult").payload.return_value.output, "not deleted");
  assert.equal(r.types.filter((t) => t === "StepBegin").length, 2);
});

test("ScriptedProvider's error: directives drive the retries: one StepRetry (429, next attempt 2), then the text", async () => {
  const agent = new k.Agent({ provider: new k.ScriptedProvider(["error: 429 slow down", "text: done"]), systemPrompt: "", retryBackoff: { initialMs: 1, jitterMs: 0 } });
  const r = await runTurn(agent, "hi");
  assert.equal(r.error, undefined);
  assert.deepEqual(r.types, ["TurnBegin", "StepBegin", "StepRetry", "ContentPart", "StatusUpdate", "TurnEnd"]);
  const retry = r.merged.find((m) => m.type === "StepRetry").payload;
  assert.equal(retry.status_code, 429);
  assert.equal(retry.next_attempt, 2);
  assert.equal(retry.error_type, "APIStatusError");
  assert.equal(r.merged.find((m) => m.type === "ContentPart").payload.text, "done");
  const e = await k.step(new k.ScriptedProvider(["error: connection reset"]), "", new k.SimpleToolset(), []).catch((x) => x);
  assert.ok(e instanceof k.APIConnectionError);
  assert.equal(e.message, "reset");
});

test("needsApproval: asked before the handler starts (before_start), nothing of the tool runs until approved; a function of the arguments decides; a refusal is the rejection; under a plain step it is an error result", async () => {
  const ran = [];
  const toolset = new k.SimpleToolset([
    { name: "pay", description: "", parameters: {}, needsApproval: ({ amount }) => Promise.resolve(amount > 100), handler: ({ amount }) => (ran.push(amount), `paid ${amount}`) },
    { name: "wipe", description: "", parameters: {}, needsApproval: true, handler: () => (ran.push("wipe"), "wiped") },
  ]);
  assert.deepEqual(toolset.tools.map((t) => t.needsApproval), [true, true]);
  const seen = [];
  const provider = new k.ScriptedProvider([call("p1", "pay", { amount: 5 }), call("p2", "pay", { amount: 500 }), "text: ok"]);
  let r = await runTurn(new k.Agent({ provider, systemPrompt: "", toolset }), "pay", {
    onMessage: (m, wire) => {
      if (m.type !== "ApprovalRequest") return;
      seen.push({ ran: [...ran], request: m.payload });
      wire.respond(m.payload.id, "approve");
    },
  });
  assert.equal(r.error, undefined);
  assert.deepEqual(ran, [5, 500]);
  assert.equal(seen.length, 1, "the small amount was not asked about");
  assert.deepEqual(seen[0].ran, [5], "pay 500 had not run when it was asked");
  const { id, ...req } = seen[0].request;
  assert.deepEqual(req, { tool_call_id: "p2", sender: "agent", action: "pay", description: 'pay({"amount":500})', display: [], before_start: true });
  ran.length = 0;
  r = await runTurn(new k.Agent({ provider: new k.ScriptedProvider([call("w1", "wipe", {}), "text: never"]), systemPrompt: "", toolset }), "wipe", {
    onMessage: (m, wire) => m.type === "ApprovalRequest" && wire.respond(m.payload.id, "reject"),
  });
  assert.deepEqual(ran, [], "refused: the handler never ran");
  assert.match(r.merged.find((m) => m.type === "ToolResult").payload.return_value.message, /rejected by the user/);
  assert.equal(r.types.filter((t) => t === "StepBegin").length, 1, "a refusal without feedback ends the turn");
  const stepped = await k.step(new k.ScriptedProvider([call("w2", "wipe", {})]), "", toolset, [{ role: "user", content: "wipe" }]);
  const [res] = await stepped.toolResults();
  assert.equal(res.return_value.is_error, true);
  assert.match(res.return_value.message, /needsApproval: it runs only in an agent run/);
  assert.deepEqual(ran, [], "never unapproved");
  assert.throws(() => new k.SimpleToolset([{ name: "x", description: "", parameters: {}, needsApproval: "yes", handler: () => "" }]), /needsApproval must be a boolean or a function/);
});

test("yolo approves everything; cancelling during an approval resolves it as rejected and cancels the run", async () => {
  const toolset = new k.SimpleToolset([{ name: "act", description: "", parameters: {}, handler: async (_a, ctx) => String(await ctx.requestApproval({ action: "act", description: "" })) }]);
  let r = await runTurn(new k.Agent({ provider: new k.ScriptedProvider([call("y", "act", {}), "text: ok"]), systemPrompt: "", toolset, yolo: true }), "go");
  assert.ok(!r.types.includes("ApprovalRequest"));
  assert.equal(r.merged.find((m) => m.type === "ToolResult").payload.return_value.output, "true");

  const ctrl = new AbortController();
  r = await runTurn(new k.Agent({ provider: new k.ScriptedProvider([call("y", "act", {}), "text: ok"]), systemPrompt: "", toolset }), "go", {
    signal: ctrl.signal,
    onMessage: (m) => m.type === "ApprovalRequest" && ctrl.abort(),
  });
  assert.ok(r.error instanceof k.RunCancelled);
  assert.deepEqual(r.merged.find((m) => m.type === "ApprovalResponse")?.payload.response, "reject");
  assert.equal(r.types.at(-1), "TurnEnd");
});

test("two runs at once keep their messages apart; tools publish on their own run's wire with ctx.send", async () => {
  const mk = (label) => {
    const toolset = new k.SimpleToolset([{
      name: "note", description: "", parameters: {},
      handler: async (_a, ctx) => {
        await sleep(5);
        ctx.send({ type: "ContentPart", payload: { type: "text", text: `[note from ${label}]` } });
        await sleep(5);
        return label;
      },
    }]);
    return new k.Agent({
      provider: new k.ScriptedProvider([`text: I am ${label}\n${call(`${label}-1`, "note", {})}`, `text: ${label} done`]),
      systemPrompt: "",
      toolset,
    });
  };
  const [a, b] = await Promise.all([runTurn(mk("A"), "a", { raw: true }), runTurn(mk("B"), "b", { raw: true })]);
  for (const [r, me, other] of [[a, "A", "B"], [b, "B", "A"]]) {
    const all = JSON.stringify(r.merged) + JSON.stringify(r.raw);
    assert.ok(all.includes(`[note from ${me}]`));
    assert.ok(!all.includes(`from ${other}`) && !all.includes(`I am ${other}`), `${me} saw nothing of ${other}`);
  }
});

test("the raw side sees every part; the merged side joins them; the recording replays to the merged sequence", async () => {
  const lines = [];
  const recorder = new k.WireRecorder((line) => { lines.push(line); });
  const provider = new k.ScriptedProvider([
    'text: Hel\ntext: lo\ntool_call: {"id": "p1", "name": "plus", "arguments": "{\\"a\\": 1,"}\ntool_call_part: " \\"b\\": 2}"',
    "text: 3",
  ]);
  const agent = new k.Agent({ provider, systemPrompt: "", toolset: new k.SimpleToolset([plusTool]) });
  const r = await runTurn(agent, "1+2", { raw: true, recorder });
  assert.equal(r.error, undefined);
  assert.ok(r.raw.filter((m) => m.type === "ContentPart").length === 3 && r.raw.some((m) => m.type === "ToolCallPart"));
  const call1 = r.merged.find((m) => m.type === "ToolCall").payload;
  assert.equal(call1.function.arguments, '{"a": 1, "b": 2}');
  assert.ok(!r.merged.some((m) => m.type === "ToolCallPart"));
  assert.equal(JSON.parse(lines[0]).type, "metadata");
  assert.equal(JSON.parse(lines[0]).protocol_version, "1.10");
  assert.ok(lines.slice(1).every((l) => typeof JSON.parse(l).timestamp === "number"));
  assert.equal(recorder.count, r.merged.length);
  const replay = k.readWireRecord(lines.join("\n") + "\n{damaged line\n");
  assert.deepEqual(replay, r.merged);
});

test("Context: a store with a sink and no onRewrite refuses a rewrite loudly (appending the new file after the old would leave both)", () => {
  const lines = [];
  const ctx = new k.Context({ systemPrompt: "p", sink: (l) => lines.push(l) });
  const id = ctx.checkpoint();
  ctx.append({ role: "user", content: "a" });
  assert.throws(() => ctx.revertTo(id), /only a sink, which appends: give onRewrite/);
  assert.ok(!lines.some((l) => l.includes('"_system_prompt"') && lines.indexOf(l) > 0), "nothing was appended for the rewrite");
});

test("Context: JSONL round trip with checkpoints and revertTo, sink and onRewrite", async () => {
  const sunk = [];
  let rewritten = null;
  const ctx = new k.Context({ systemPrompt: "be kind", sink: (l) => sunk.push(l), onRewrite: (t) => (rewritten = t) });
  assert.equal(ctx.checkpoint(), 0);
  ctx.append({ role: "user", content: "first" });
  ctx.updateTokenCount(40);
  assert.equal(ctx.checkpoint(), 1);
  ctx.append([{ role: "assistant", content: "12345678" }]);
  assert.equal(ctx.tokenCount, 42);
  assert.equal(sunk.join("\n") + "\n", ctx.toJSONL());
  const back = k.Context.fromJSONL(ctx.toJSONL() + '{"role":"user","cont', { logger: { warn() {} } });
  assert.deepEqual(back.history, ctx.history);
  assert.equal(back.nCheckpoints, 2);
  assert.equal(back.systemPrompt, "be kind");
  ctx.revertTo(1);
  assert.deepEqual(ctx.history, [{ role: "user", content: "first" }]);
  assert.equal(rewritten, ctx.toJSONL());
  assert.throws(() => ctx.revertTo(5), /Checkpoint 5 does not exist/);
  // Read as kimi-cli reads it: damaged, non-object, unknown and invalid lines are skipped, each named.
  const warned = [];
  const file = '\ufeff{"role":"user","content":"a"}\n{bad\n[1]\n{"role":"_mystery"}\n{"role":"_usage","token_count":7.5}\n{"role":"user","content":"x"}';
  const read = k.Context.fromJSONL(file, { logger: { warn: (m, f) => warned.push(f) } });
  assert.deepEqual(read.history, [{ role: "user", content: "a" }, { role: "user", content: "x" }]);
  assert.deepEqual(warned.map((f) => f.line), [2, 3, 4, 5]);
  assert.match(warned[0].reason, /malformed/);
});

test("compaction at the threshold: CompactionBegin/End, the summary plus the last two messages", async () => {
  const context = new k.Context();
  context.append([
    { role: "user", content: "old question" }, { role: "assistant", content: "old answer" },
    { role: "user", content: "recent question" }, { role: "assistant", content: "recent answer" },
  ]);
  context.updateTokenCount(90_000);
  const provider = new k.ScriptedProvider(["text: SUMMARY of the old part", "text: fine"]);
  const agent = new k.Agent({ provider, systemPrompt: "", context, maxContextTokens: 100_000 });
  const { types, error } = await runTurn(agent, "next");
  assert.equal(error, undefined);
  assert.deepEqual(types.slice(0, 4), ["TurnBegin", "StepBegin", "CompactionBegin", "CompactionEnd"]);
  const h = agent.context.history;
  assert.match(JSON.stringify(h[0]), /Previous context has been compacted.*SUMMARY of the old part/);
  assert.deepEqual(h.slice(1, 3).map((m) => m.content), ["recent answer", "next"]);
  assert.equal(h.at(-1).content, "fine");
  assert.ok(!JSON.stringify(h).includes("old question"));
});

test("Wire: a late subscriber sees only what follows; merging joins text, think (until a signature) and a call's fragments", async () => {
  const wire = new k.Wire();
  const early = wire.uiSide({ merge: true });
  const raw = wire.uiSide();
  wire.send({ type: "TurnBegin", payload: { user_input: "x" } });
  const late = wire.uiSide({ merge: true });
  const parts = [
    { type: "ContentPart", payload: { type: "think", think: "a" } },
    { type: "ContentPart", payload: { type: "think", think: "b", encrypted: "sig" } },
    { type: "ContentPart", payload: { type: "think", think: "c" } },
    { type: "ContentPart", payload: { type: "text", text: "Hel" } },
    { type: "ContentPart", payload: { type: "text", text: "lo" } },
    { type: "ToolCall", payload: { type: "function", id: "t1", function: { name: "f", arguments: null } } },
    { type: "ToolCallPart", payload: { type: "tool_call_part", arguments_part: "{\"a\":", tool_call_id: "t1" } },
    { type: "ToolCallPart", payload: { type: "tool_call_part", arguments_part: "1}" } },
    { type: "ToolCallPart", payload: { type: "tool_call_part", arguments_part: "{}", tool_call_id: "t0" } },
  ];
  for (const p of parts) wire.send(p);
  wire.send({ type: "TurnEnd", payload: {} });
  wire.shutdown();
  wire.send({ type: "TurnBegin", payload: {} }); // after shutdown: ignored
  const drain = async (side) => { const out = []; for await (const m of side) out.push(m); return out; };
  const [e, r, l] = await Promise.all([drain(early), drain(raw), drain(late)]);
  assert.equal(r.length, 11);
  assert.deepEqual(l.map((m) => m.type), ["ContentPart", "ContentPart", "ContentPart", "ToolCall", "ToolCallPart", "TurnEnd"]);
  assert.deepEqual(e.slice(1).map((m) => m.payload.think ?? m.payload.text ?? m.payload.function?.arguments ?? m.payload.arguments_part ?? m.type), [
    "ab", "c", "Hello", '{"a":1}', "{}", "TurnEnd",
  ]);
  assert.equal(e[1].payload.encrypted, "sig");
  assert.deepEqual(parts[0].payload, { type: "think", think: "a" }, "what the raw side got was not changed by merging");
  await assert.rejects(early.receive(), k.QueueShutDown);
  assert.throws(() => wire.respond("nope", "approve"), /No approval request nope/);
});

test("a context store that throws is never silent: append throws its error, and a turn stops with it", async () => {
  const full = new Error("disk full");
  let writes = 0;
  const ctx = new k.Context({ sink: () => { if (++writes > 2) throw full; } });
  ctx.append({ role: "user", content: "one" });
  ctx.checkpoint();
  assert.throws(() => ctx.append({ role: "user", content: "two" }), (e) => e === full);
  assert.equal(ctx.history.length, 2, "the context has the change; the store said it did not");

  writes = 0;
  const context = new k.Context({ sink: () => { if (++writes === 4) throw full; } });
  const provider = new k.ScriptedProvider([call("c1", "plus", { a: 1, b: 2 }), "text: never"]);
  const agent = new k.Agent({ provider, systemPrompt: "", toolset: new k.SimpleToolset([plusTool]), context });
  const r = await runTurn(agent, "1+2?");
  assert.equal(r.error, full);
  assert.deepEqual(r.types.slice(-2), ["StepInterrupted", "TurnEnd"]);
  assert.equal(r.types.filter((t) => t === "StepBegin").length, 1);
});

test("a refusal is not retried: the turn ends with an error of kind `refused` that carries the model's words", async () => {
  server.respond({ steps: [sse({ id: "c", choices: [{ index: 0, delta: { refusal: "I can't help with that." } }] }), finish("stop"), done()] });
  const before = server.requests.length;
  const agent = new k.Agent({ provider: new k.OpenAIChatProvider({ model: "m", baseUrl: server.baseUrl }), systemPrompt: "" });
  const r = await runTurn(agent, "something");
  assert.ok(r.error instanceof k.ChatProviderError);
  assert.equal(r.error.kind, "refused");
  assert.match(r.error.message, /I can't help with that\./);
  assert.equal(server.requests.length - before, 1, "asked once");
  assert.ok(!r.types.includes("StepRetry"));
});

test("the runtime's errors made by a caller carry the core's wording, the same as the turn's", () => {
  assert.equal(new k.MaxStepsReached(5).message, "Max number of steps reached: 5");
  assert.equal(new k.LLMNotSet().message, "LLM not set");
  assert.equal(new k.LLMNotSupported("m", ["image_in"]).message, "LLM model 'm' does not support required capability: image_in.");
  assert.equal(new k.LLMNotSupported("m", ["a", "b"]).message, "LLM model 'm' does not support required capabilities: a, b.");
  const e = new k.RepeatedToolCallError("t", 12);
  assert.equal(e.message, "The model called `t` with the same arguments 12 times in a row; the turn was stopped.");
  assert.ok(e instanceof Error && e.name === "RepeatedToolCallError" && e.toolName === "t" && e.count === 12);
});

test("closeInterruptedTurn: an interrupted result for each call the recording shows without one, then TurnEnd — not the words of a cancel nobody made", () => {
  const call = (id) => ({ type: "ToolCall", payload: { type: "function", id, function: { name: "f", arguments: "{}" } } });
  const recorded = [{ type: "TurnBegin", payload: { user_input: "x" } }, call("c1"), call("c2"),
    { type: "ToolResult", payload: { tool_call_id: "c1", return_value: { is_error: false, output: "ok", message: "", display: [] } } }, call("c3")];
  const out = k.closeInterruptedTurn(recorded);
  assert.deepEqual(out.map((m) => m.type), ["ToolResult", "ToolResult", "TurnEnd"]);
  assert.deepEqual(out.slice(0, 2).map((m) => m.payload.tool_call_id), ["c2", "c3"]);
  assert.equal(out[0].payload.return_value.is_error, true);
  assert.match(out[0].payload.return_value.message, /^The tool call was interrupted: the runtime running it stopped .* may have taken effect/);
  assert.doesNotMatch(out[0].payload.return_value.message, /cancelled/);
  assert.deepEqual(k.closeInterruptedTurn([]), [{ type: "TurnEnd", payload: {} }]);
  assert.throws(() => k.closeInterruptedTurn("nope"), TypeError);
});

test("a Node process whose turn waits on an approval stays alive (it does not exit mid-turn with code 13)", async () => {
  const { spawn } = await import("node:child_process");
  const script = `
    import * as k from "kosong-wasm";
    const toolset = new k.SimpleToolset([{ name: "pay", description: "", parameters: {}, needsApproval: true, handler: () => "paid" }]);
    const agent = new k.Agent({ provider: new k.ScriptedProvider(['tool_call: {"id": "p1", "name": "pay", "arguments": "{}"}', "text: ok"]), systemPrompt: "", toolset });
    await k.runSoul(agent, "pay", async (wire) => {
      for await (const m of wire.uiSide()) if (m.type === "ApprovalRequest") process.stdout.write("waiting\\n");
    }, new AbortController().signal);
  `;
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], { cwd: new URL("../..", import.meta.url).pathname, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  const exited = new Promise((r) => child.on("exit", (code, signal) => r({ code, signal })));
  const state = await Promise.race([exited, new Promise((r) => setTimeout(() => r("alive"), 1500))]);
  assert.equal(state, "alive", `exited while waiting: ${JSON.stringify(state)} ${out}`);
  assert.match(out, /waiting/);
  child.kill("SIGKILL");
  await exited;
});

test("resumeSoul: a recorded waiting approval is answered at once, before the resumed turn reaches its wait; the tool runs once", async () => {
  const lines = [];
  const started = [];
  const tools = () => new k.SimpleToolset([{ name: "send", description: "", parameters: {}, needsApproval: true, handler: (_, ctx) => (started.push(ctx.toolCallId), "sent") }]);
  const ctx = new k.Context();
  const first = new k.Agent({ provider: new k.ScriptedProvider(['tool_call: {"id":"c1","name":"send","arguments":"{}"}']), toolset: tools(), context: ctx });
  const ac = new AbortController();
  let requestId;
  await k.runSoul(first, "go", async (w) => {
    for await (const m of w.uiSide()) if (m.type === "ApprovalRequest") (requestId = m.payload.id), ac.abort();
  }, ac.signal, { recorder: new k.WireRecorder((l) => void lines.push(l)) }).catch(() => {});
  // The runtime died while the request waited: the recording ends at it.
  const recording = lines.slice(0, lines.findIndex((l) => l.includes('"ApprovalRequest"')) + 1).join("\n");
  const second = new k.Agent({ provider: new k.ScriptedProvider(["text: done"]), toolset: tools(), context: k.Context.fromJSONL(ctx.toJSONL()) });
  const seen = [];
  let answered, refusedOther;
  await within(k.resumeSoul(second, recording, async (w) => {
    // At once, as a UI that read `unfinishedTurn` would: the turn has not reached its wait yet.
    try {
      w.respond("nope", "approve");
    } catch (e) {
      refusedOther = e.message;
    }
    answered = w.respond(requestId, "approve");
    for await (const m of w.uiSide()) seen.push(m.type);
  }, new AbortController().signal), 5000);
  assert.equal(answered, undefined, "respond took the answer");
  assert.deepEqual(started, ["c1"], "the tool ran once, after the answer");
  const last = second.context.history.at(-1);
  assert.equal(typeof last.content === "string" ? last.content : last.content.map((p) => p.text).join(""), "done");
  assert.ok(seen.includes("TurnEnd"));
  // An id no recorded turn waits on is still refused, at once.
  assert.match(refusedOther, /No approval request nope is waiting/);
});
