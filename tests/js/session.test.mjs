// Sessions in Node: the core's Session through the package's stores. In memory: a turn, its
// events from any id, the limits, a store that refuses writes, a death while a tool runs or an
// approval waits, a stored cancel. In files: a real Node child, against a loopback server
// streaming real SSE, SIGKILLed before and after each write of a turn; the next life goes on by
// itself; the tool's own log, the files kimi-cli reads and the history agree. And one owner.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createServer } from "node:http";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as k from "kosong-wasm";

const CHILD = new URL("./session-child.mjs", import.meta.url).pathname;
const root = new URL("../..", import.meta.url).pathname;

// ---- a loopback model that answers from the conversation -------------------------------------

/** Chat Completions over real SSE: a call to send_email first, "Sent." once its result is in. */
let server;
let requests = 0;
before(async () => {
  server = createServer(async (req, res) => {
    let body = "";
    for await (const c of req) body += c;
    requests++;
    const messages = JSON.parse(body).messages;
    const answered = messages.at(-1)?.role === "tool";
    const chunk = (delta, finish = null) => `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", model: "m", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
    res.writeHead(200, { "content-type": "text/event-stream" });
    if (answered) {
      res.write(chunk({ role: "assistant", content: "Sent." }));
      res.write(chunk({}, "stop"));
    } else {
      res.write(chunk({ role: "assistant", content: "Sending." }));
      await new Promise((r) => setTimeout(r, 5));
      res.write(chunk({ tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "send_email", arguments: '{"to":"a@b.c"}' } }] }));
      res.write(chunk({}, "tool_calls"));
    }
    res.end("data: [DONE]\n\n");
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
});
after(() => new Promise((r) => server.close(r)));
const baseUrl = () => `http://127.0.0.1:${server.address().port}/v1`;

// ---- helpers ----------------------------------------------------------------------------------

const call = (id, name, args) => `tool_call: ${JSON.stringify({ id, name, arguments: JSON.stringify(args) })}`;

/** Every call in the history has exactly one result right after its message; ids are unique. */
function assertValidHistory(history) {
  const seen = new Set();
  for (let i = 0; i < history.length; i++) {
    const calls = (history[i].tool_calls ?? []).map((c) => c.id);
    const answers = [];
    let j = i + 1;
    while (j < history.length && history[j].role === "tool") answers.push(history[j++].tool_call_id);
    if (history[i].role === "tool") assert.fail(`a tool message at ${i} answers no call before it`);
    assert.deepEqual([...answers].sort(), [...calls].sort(), `the calls of message ${i} are answered once each`);
    for (const c of calls) {
      assert.ok(!seen.has(c), `call id ${c} once`);
      seen.add(c);
    }
    i = j - 1;
  }
}

async function collect(session, after = 0) {
  const out = [];
  const it = session.events({ after })[Symbol.asyncIterator]();
  for (;;) {
    const r = await Promise.race([it.next(), new Promise((res) => setTimeout(() => res({ done: true, idle: true }), 50))]);
    if (r.done) {
      await it.return();
      return out;
    }
    out.push(r.value);
  }
}

/** A memory store whose writes can be refused, counting them. */
class FlakyStore extends k.MemorySessionStore {
  refuse = 0;
  writes = 0;
  async write(ops) {
    this.writes++;
    if (this.refuse > 0) {
      this.refuse--;
      throw new Error("ENOSPC: no space left on device");
    }
    return super.write(ops);
  }
}

// ---- in memory --------------------------------------------------------------------------------

test("a session's turn: stored before told, event ids from 1 that a client resumes from any point; limits and a second turn refused before anything counts", async () => {
  const store = new k.MemorySessionStore();
  const ran = [];
  const toolset = new k.SimpleToolset([{ name: "plus", description: "", parameters: {}, handler: ({ a, b }) => (ran.push([a, b]), String(a + b)) }]);
  const provider = new k.ScriptedProvider([`text: Adding.\n${call("c1", "plus", { a: 2, b: 40 })}`, "text: 42."]);
  const s = await k.Session.open(store, { provider, systemPrompt: "terse", toolset }, { maxMessageBytes: 64, maxTurns: 1 });
  assert.equal(await s.recovered, null);
  const live = collect(s);
  const pending = s.send("add 2 and 40");
  await assert.rejects(s.send("again"), k.SessionBusyError);
  assert.deepEqual(await pending, { outcome: "done" });
  assert.deepEqual(ran, [[2, 40]]);
  const events = await live;
  assert.deepEqual(events.map((e) => e.id), events.map((_, i) => i + 1), "ids go up by one from 1");
  assert.deepEqual(events.at(-1), { id: events.length, end: { outcome: "done" } });
  assert.deepEqual(events.filter((e) => e.message).map((e) => e.message.type), ["TurnBegin", "StepBegin", "ContentPart", "ToolCall", "StatusUpdate", "ToolResult", "StepBegin", "ContentPart", "StatusUpdate", "TurnEnd"]);
  for (const after of [0, 3, events.length - 1, events.length]) assert.deepEqual(await collect(s, after), events.slice(after), `from ${after}`);
  assertValidHistory(s.history);
  assert.deepEqual(s.history.map((m) => m.role), ["user", "assistant", "tool", "assistant"]);
  // Refused before anything counts: too long, then the turn limit (one turn was had).
  await s.close();
  const s2 = await k.Session.open(store, { provider, systemPrompt: "terse", toolset }, { maxMessageBytes: 8, maxTurns: 2 });
  await assert.rejects(s2.send("a message longer than eight bytes"), (e) => e instanceof k.SessionLimitError && /over the session's limit of 8/.test(e.message));
  await assert.rejects(s2.send("   "), TypeError);
  await s2.close();
  const s3 = await k.Session.open(store, { provider, systemPrompt: "terse", toolset }, { maxTurns: 1 });
  await assert.rejects(s3.send("more"), (e) => e instanceof k.SessionLimitError && /1 turns/.test(e.message));
  assert.equal((await collect(s3)).length, events.length, "nothing was recorded for the refused messages");
  await s3.close();
});

test("a store that refuses a write: the turn is closed from what was stored (failed, SessionStorageError), the history stays valid, and the session takes the next turn", async () => {
  const store = new FlakyStore();
  const ran = [];
  const toolset = new k.SimpleToolset([{ name: "charge", description: "", parameters: {}, handler: async () => (ran.push("charge"), await new Promise((r) => setTimeout(r, 20)), "charged") }]);
  const provider = new k.ScriptedProvider([`text: Charging.\n${call("c1", "charge", {})}`, "text: done", "text: second turn."]);
  const s = await k.Session.open(store, { provider, systemPrompt: "", toolset });
  const ended = s.send("charge me");
  // The call's write is refused while the tool waits for it: the tool never starts.
  await new Promise((r) => setTimeout(r, 0));
  store.refuse = 1;
  const out = await ended;
  assert.equal(out.outcome, "failed", JSON.stringify(out));
  assert.equal(out.error.name, "SessionStorageError");
  assertValidHistory(s.history);
  assert.ok(ran.length <= 1);
  assert.deepEqual(await s.send("next"), { outcome: "done" }, "usable again, not wedged");
  assertValidHistory(s.history);
  const all = await collect(s);
  assert.deepEqual(all.map((e) => e.id), all.map((_, i) => i + 1));
  await s.close();
});

test("a store that refuses a turn's first write: the core tells that turn's end (nothing of it was stored, so none will be), once, to the sender and to a follower; nothing of it is kept, and the next turn runs", async () => {
  const store = new FlakyStore();
  const ran = [];
  const toolset = new k.SimpleToolset([{ name: "charge", description: "", parameters: {}, handler: () => (ran.push("charge"), "charged") }]);
  const provider = new k.ScriptedProvider([`text: Charging.\n${call("c1", "charge", {})}`, "text: done", "text: second turn."]);
  const s = await k.Session.open(store, { provider, systemPrompt: "", toolset, logger: null });
  const told = [];
  const stop = s._listen({ event() {}, close() {}, unstored: (data) => told.push(JSON.parse(data)) });
  store.refuse = 1;
  const out = await s.send("charge me");
  assert.deepEqual(out, { outcome: "failed", error: { name: "SessionStorageError", message: "the session's store refused a write before the turn was stored" } });
  assert.deepEqual(told, [out], "the follower heard the same end, once");
  assert.deepEqual(ran, [], "the tool never started");
  assert.deepEqual(s.history, [], "nothing of the turn is kept");
  // The session tries its store again after a moment, then takes the next turn.
  let next;
  for (let i = 0; i < 40 && !next; i++) {
    next = await s.send("again").catch((e) => (e instanceof k.SessionBusyError ? new Promise((r) => setTimeout(r, 100)).then(() => undefined) : Promise.reject(e)));
  }
  assert.deepEqual(next, { outcome: "done" });
  assert.deepEqual(ran, [], "the dropped turn's call never ran, then or later");
  assert.equal(told.length, 1, "told once");
  assert.deepEqual(s.history.map((m) => m.role), ["user", "assistant"], "only the next turn is kept");
  stop();
  await s.close();
});

test("Node: a turn closed after a refused write ends in a process nothing else keeps alive (the retry's timer holds it while a turn is to end)", async () => {
  const script = `
    import * as k from "kosong-wasm";
    const store = new k.MemorySessionStore();
    let refuse = 0;
    const write = store.write.bind(store);
    store.write = async (ops) => { if (refuse > 0) { refuse--; throw new Error("refused"); } return write(ops); };
    let release;
    const tool = { name: "slow", description: "", parameters: {}, handler: () => new Promise((r) => (release = r)) };
    const s = await k.Session.open(store, { provider: new k.ScriptedProvider(['tool_call: {"id": "c1", "name": "slow", "arguments": "{}"}', "text: x"]), systemPrompt: "", toolset: new k.SimpleToolset([tool]) });
    const ended = s.send("go");
    while (!release) await new Promise((r) => setTimeout(r, 5));
    refuse = 1;
    release("done");
    console.log(JSON.stringify(await ended));
    await s.close();`;
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], { cwd: root });
  let out = "";
  let err = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (err += d));
  const code = await new Promise((r) => child.on("exit", r));
  assert.equal(code, 0, out + err);
  assert.equal(JSON.parse(out).error.name, "SessionStorageError", out);
  assert.match(err, /the session's store refused a write/, "told on the console (the default logger)");
});

test("a death while a tool runs (close leaves the turn as a dead runtime does): the next open goes on by itself, the call answered interrupted, never run again", async () => {
  const store = new k.MemorySessionStore();
  const started = [];
  let hold = true;
  const toolset = () =>
    new k.SimpleToolset([
      { name: "charge", description: "", parameters: {}, handler: async (_a, ctx) => (started.push(ctx.toolCallId), hold && (await new Promise(() => {})), "charged") },
    ]);
  const provider = () => new k.ScriptedProvider([`text: Charging.\n${call("c1", "charge", {})}`, "text: I could not tell whether it went."]);
  const s = await k.Session.open(store, { provider: provider(), systemPrompt: "", toolset: toolset() });
  s.send("charge me");
  while (!started.length) await new Promise((r) => setTimeout(r, 1));
  await s.close();
  hold = false;
  // The model is asked again for the next step: the scripts' second answer.
  const again = new k.ScriptedProvider(["text: I could not tell whether it went."]);
  const s2 = await k.Session.open(store, { provider: again, systemPrompt: "", toolset: toolset() });
  assert.deepEqual(await s2.recovered, { outcome: "done" });
  assert.deepEqual(started, ["c1"], "charge ran once");
  const tool = s2.history.find((m) => m.role === "tool");
  assert.match(JSON.stringify(tool.content), /interrupted/);
  assertValidHistory(s2.history);
  const events = await collect(s2);
  assert.deepEqual(events.map((e) => e.id), events.map((_, i) => i + 1), "ids continue across the death");
  assert.equal(events.filter((e) => e.message?.type === "Notification").length, 1);
  await s2.close();
});

test("a turn that compacted and then died goes on by itself: the compacted context and the recording belong together, the call answered interrupted, nothing twice (48 C)", async () => {
  const store = new k.MemorySessionStore();
  const started = [];
  let hold = true;
  const toolset = () =>
    new k.SimpleToolset([
      { name: "lookup", description: "", parameters: {}, handler: () => "found" },
      { name: "charge", description: "", parameters: {}, handler: async (_a, ctx) => (started.push(ctx.toolCallId), hold && (await new Promise(() => {})), "charged") },
    ]);
  const agent = (answers) => ({ provider: new k.ScriptedProvider(answers), systemPrompt: "sys", toolset: toolset(), maxContextTokens: 100_000 });
  // A first turn gives the context something older to compact. In the second, step 1 reports a
  // context near its window, so step 2 compacts first (the summary is the third answer), then
  // calls charge, which is running when the runtime dies.
  const s = await k.Session.open(store, agent(["text: Hello back.", `usage: {"input_other": 95000, "output": 2}\n${call("l1", "lookup", {})}`, "text: SUMMARY of the lookup", `text: Charging.\n${call("c1", "charge", {})}`]));
  assert.deepEqual(await s.send("hello"), { outcome: "done" });
  s.send("look it up, then charge");
  for (let i = 0; i < 500 && !started.length; i++) await new Promise((r) => setTimeout(r, 10));
  assert.deepEqual(started, ["c1"], "charge started after the compaction");
  const before = await collect(s);
  assert.ok(before.some((e) => e.message?.type === "CompactionEnd"), "the turn compacted before the death");
  assert.ok(!JSON.stringify(s.history).includes("Hello back."), "the first turn was compacted away");
  await s.close();
  hold = false;
  const s2 = await k.Session.open(store, agent(["text: I could not tell whether the charge went."]));
  assert.deepEqual(await s2.recovered, { outcome: "done" });
  assert.deepEqual(started, ["c1"], "charge ran once");
  const h = s2.history;
  assertValidHistory(h);
  assert.match(JSON.stringify(h[0]), /SUMMARY of the lookup/, "the compacted history is the one gone on with");
  assert.equal(h.filter((m) => (m.tool_calls ?? []).some((c) => c.id === "c1")).length, 1, "the cut round is in the history once");
  assert.match(JSON.stringify(h.find((m) => m.tool_call_id === "c1").content), /interrupted/);
  assert.equal(h.at(-1).content, "I could not tell whether the charge went.");
  const events = await collect(s2);
  assert.deepEqual(events.map((e) => e.id), events.map((_, i) => i + 1), "ids continue across the death");
  assert.equal(events.filter((e) => e.message?.type === "ToolResult" && e.message.payload.tool_call_id === "c1").length, 1, "one result for c1 on the wire");
  await s2.close();
});

test("a turn that compacted, then ran past maxSessionBytes or met a refused write: taken back to the compacted history (every call answered), the session takes the next turn (48 C)", async () => {
  for (const fault of ["limit", "refusal"]) {
    const store = new FlakyStore();
    const big = "x".repeat(40_000);
    const toolset = new k.SimpleToolset([
      { name: "lookup", description: "", parameters: {}, handler: () => "found" },
      { name: "fetch_big", description: "", parameters: {}, handler: () => (fault === "refusal" && (store.refuse = 1), big) },
    ]);
    const provider = new k.ScriptedProvider(["text: Hello back.", `usage: {"input_other": 95000, "output": 2}\n${call("l1", "lookup", {})}`, "text: SUMMARY of the lookup", call("b1", "fetch_big", {}), "text: next turn's answer (or a summary)", "text: next turn's answer"]);
    const s = await k.Session.open(store, { provider, systemPrompt: "sys", toolset, maxContextTokens: 100_000 }, { maxSessionBytes: fault === "limit" ? 20_000 : 1 << 20, logger: null });
    assert.deepEqual(await s.send("hello"), { outcome: "done" });
    const end = await s.send("look it up, then fetch the big one");
    assert.equal(end.outcome, "failed", `${fault}: ${JSON.stringify(end)}`);
    assert.equal(end.error.name, fault === "limit" ? "SessionLimitError" : "SessionStorageError", fault);
    store.refuse = 0;
    const h = s.history;
    assertValidHistory(h);
    assert.match(JSON.stringify(h), /SUMMARY of the lookup/, `${fault}: the compacted history stays`);
    assert.ok(!JSON.stringify(h).includes(big), `${fault}: the line past the limit is not in it`);
    assert.deepEqual(await s.send("and now?"), { outcome: "done" }, `${fault}: the next turn runs`);
    assertValidHistory(s.history);
    await s.close();
    // Read back as the next life reads it: the same valid history.
    const s2 = await k.Session.open(store, { provider: new k.ScriptedProvider([]), systemPrompt: "sys", toolset }, { logger: null });
    assert.deepEqual(s2.history, s.history, fault);
    await s2.close();
  }
});

test("approve_for_session is the session's: remembered by the next turn and by the next life of the session, never asked again (48 B)", async () => {
  const store = new k.MemorySessionStore();
  const ran = [];
  const toolset = new k.SimpleToolset([{ name: "pay", description: "", parameters: {}, needsApproval: true, handler: ({ n }) => (ran.push(n), `paid ${n}`) }]);
  const asked = (events) => events.filter((e) => e.message?.type === "ApprovalRequest").length;
  const s = await k.Session.open(store, { provider: new k.ScriptedProvider([call("p1", "pay", { n: 1 }), "text: paid.", call("p2", "pay", { n: 2 }), "text: paid again."]), systemPrompt: "", toolset });
  const first = s.send("pay 1");
  for await (const e of s.events()) {
    if (e.message?.type === "ApprovalRequest") {
      await s.respond(e.message.payload.id, "approve_for_session");
      break;
    }
  }
  assert.deepEqual(await first, { outcome: "done" });
  assert.deepEqual(await s.send("pay 2"), { outcome: "done" });
  assert.deepEqual(ran, [1, 2]);
  assert.equal(asked(await collect(s)), 1, "the second turn did not ask");
  await s.close();
  // A new life of the session (a new process, an evicted Worker): still the session's.
  const s2 = await k.Session.open(store, { provider: new k.ScriptedProvider([call("p3", "pay", { n: 3 }), "text: paid a third time."]), systemPrompt: "", toolset });
  assert.deepEqual(await s2.send("pay 3"), { outcome: "done" });
  assert.deepEqual(ran, [1, 2, 3]);
  assert.equal(asked(await collect(s2)), 0, "the third turn, in a new life, did not ask");
  await s2.close();
});

test("two questions in one call, the first refused, a death while the second waits: the idempotent rerun gets the refusal again (the refused action is never done) and the second question waits under its id, asked once (48 B)", async () => {
  const store = new k.MemorySessionStore();
  const done = [];
  const toolset = new k.SimpleToolset([{
    name: "release", description: "", parameters: {}, idempotent: true,
    handler: async (_a, ctx) => {
      if (await ctx.requestApproval({ action: "tag", description: "tag the release" })) done.push("tag");
      if (await ctx.requestApproval({ action: "publish", description: "publish it" })) done.push("publish");
      return `done: ${done.join(",")}`;
    },
  }]);
  const asked = (events) => events.filter((e) => e.message?.type === "ApprovalRequest").map((e) => e.message.payload);
  const s = await k.Session.open(store, { provider: new k.ScriptedProvider([call("r1", "release", {})]), systemPrompt: "", toolset });
  s.send("release it");
  let second;
  for await (const e of s.events()) {
    if (e.message?.type !== "ApprovalRequest") continue;
    if (e.message.payload.action === "tag") await s.respond(e.message.payload.id, "reject");
    else {
      second = e.message.payload;
      break;
    }
  }
  await s.close(); // the runtime dies while "publish" waits
  assert.deepEqual(done, []);
  const s2 = await k.Session.open(store, { provider: new k.ScriptedProvider(["text: published, not tagged."]), systemPrompt: "", toolset });
  await s2.respond(second.id, "approve"); // taken: the second question waits under its id
  assert.deepEqual(await s2.recovered, { outcome: "done" });
  assert.deepEqual(done, ["publish"], "the refused tag was never done; publish once");
  const requests = asked(await collect(s2));
  assert.deepEqual([...new Set(requests.map((r) => r.id))].length, 2, `two questions, each asked once: ${JSON.stringify(requests)}`);
  assert.match(JSON.stringify(s2.history.find((m) => m.role === "tool").content), /done: publish/);
  assertValidHistory(s2.history);
  await s2.close();
});

test("needsApproval survives a death: the request waits again under its id, is answered in the next life, and the tool runs once; a stored cancel is never undone", async () => {
  const store = new k.MemorySessionStore();
  const ran = [];
  const toolset = new k.SimpleToolset([{ name: "pay", description: "", parameters: {}, needsApproval: true, handler: ({ n }) => (ran.push(n), `paid ${n}`) }]);
  const s = await k.Session.open(store, { provider: new k.ScriptedProvider([call("p1", "pay", { n: 1 })]), systemPrompt: "", toolset });
  s.send("pay");
  let request;
  for await (const e of s.events()) {
    if (e.message?.type === "ApprovalRequest") {
      request = e.message.payload;
      break;
    }
  }
  assert.equal(request.before_start, true);
  await s.close();
  const s2 = await k.Session.open(store, { provider: new k.ScriptedProvider(["text: paid."]), systemPrompt: "", toolset });
  await s2.respond(request.id, "approve");
  assert.deepEqual(await s2.recovered, { outcome: "done" });
  assert.deepEqual(ran, [1]);
  const events = await collect(s2);
  assert.equal(events.filter((e) => e.message?.type === "ApprovalRequest").length, 1, "asked once");
  await s2.close();

  // A cancel stored before the death: the turn ends cancelled when the session opens again.
  const store2 = new k.MemorySessionStore();
  const s3 = await k.Session.open(store2, { provider: new k.ScriptedProvider([call("p2", "pay", { n: 2 })]), systemPrompt: "", toolset });
  s3.send("pay again");
  for await (const e of s3.events()) if (e.message?.type === "ApprovalRequest") break;
  const cancelled = s3.cancel();
  await cancelled;
  await s3.close();
  const s4 = await k.Session.open(store2, { provider: new k.ScriptedProvider(["text: never"]), systemPrompt: "", toolset });
  const end = await s4.recovered;
  assert.equal(end?.outcome, "cancelled", JSON.stringify(end));
  assert.deepEqual(ran, [1], "pay 2 never ran");
  assertValidHistory(s4.history);
  await s4.close();
});

// ---- files, SIGKILL ---------------------------------------------------------------------------

function life(dir, killAt, when, approve = false) {
  return new Promise((resolve, reject) => {
    const env = { ...process.env, SESSION_APPROVE: approve ? "1" : "" };
    const child = spawn(process.execPath, [CHILD, dir, baseUrl(), String(killAt), when], { cwd: root, env, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    child.on("error", reject);
    child.on("exit", (code, signal) => resolve({ events: out.trim().split("\n").filter(Boolean).map((l) => JSON.parse(l)), code, signal, err, child }));
  });
}

const sent = (dir) => (existsSync(join(dir, "sent.log")) ? readFileSync(join(dir, "sent.log"), "utf8").trim().split("\n").filter(Boolean) : []);

for (const approve of [false, true]) {
  const asked = approve ? ", its send_email approved first (needsApproval)" : "";
  test(`FileSessionStore: a Node process SIGKILLed before, in the middle of (data without its commit record) and after each write of a turn${asked}; the next process goes on by itself: the tool ran at most once, the turn ends done, kimi-cli's files read whole`, { timeout: 240_000 }, async () => {
    // How many writes a whole turn makes in one life.
    const probe = mkdtempSync(join(tmpdir(), "kosong-session-"));
    const whole = await life(probe, -1, "none", approve);
    assert.equal(whole.code, 0, whole.err);
    assert.deepEqual(whole.events.find((e) => e.outcome)?.outcome, { outcome: "done" }, JSON.stringify(whole.events));
    const writes = Object.assign({}, ...whole.events).writes;
    assert.ok(writes >= 3, `a turn with a tool call is stored in several writes: ${writes}`);
    let n = 0;
    for (let at = 1; at <= writes; at++) {
      for (const when of ["before", "torn", "after"]) {
        const dir = mkdtempSync(join(tmpdir(), "kosong-session-"));
        const first = await life(dir, at, when, approve);
        if (first.signal !== "SIGKILL") {
          // This life stored its turn in fewer writes (how many a turn takes depends on how its
          // messages fall between writes): it never reached write `at`, and ran whole.
          assert.equal(first.code, 0, `${at} ${when}: ${first.err}`);
          assert.deepEqual(Object.assign({}, ...first.events).ends, [{ outcome: "done" }]);
          continue;
        }
        n++;
        const second = await life(dir, -1, "none", approve);
        assert.equal(second.code, 0, `${at} ${when}: ${second.err}`);
        const o = Object.assign({}, ...second.events);
        // Killed before its first write committed, the turn never was: the second life starts it.
        // Killed after its end was stored, there is nothing to resume: the stored end says done.
        assert.deepEqual(o.ends, [{ outcome: "done" }], `${at} ${when}: one turn, ended done: ${JSON.stringify(second.events)}`);
        if (o.recovered) assert.deepEqual(o.recovered, { outcome: "done" });
        assert.ok(sent(dir).length <= 1, `${at} ${when}: send_email ran ${sent(dir).length} times`);
        const history = k.Context.fromJSONL(readFileSync(join(dir, "context.jsonl"), "utf8")).history;
        assertValidHistory(history);
        assert.equal(history.at(-1).role, "assistant");
        // wire.jsonl as kimi-cli reads it: records with the event ids kimi-cli reads past.
        const wire = readFileSync(join(dir, "wire.jsonl"), "utf8").trim().split("\n");
        assert.equal(wire[0], '{"type":"metadata","protocol_version":"1.10"}');
        const ids = wire.slice(1).map((l) => JSON.parse(l).id);
        assert.ok(ids.every((id, i) => i === 0 || id > ids[i - 1]), `${at} ${when}: ids increase: ${ids}`);
        const msgs = k.readWireRecord(readFileSync(join(dir, "wire.jsonl"), "utf8"));
        assert.equal(msgs.filter((m) => m.type === "TurnBegin").length, 1, `${at} ${when}: one turn`);
        assert.equal(msgs.filter((m) => m.type === "ToolResult").length, 1, `${at} ${when}: one result`);
        if (approve) {
          // Asked once, before the handler; it ran only once approved (what the log holds is the
          // approved call, or nothing when a death left it interrupted before it started).
          const requests = msgs.filter((m) => m.type === "ApprovalRequest").map((m) => m.payload.id);
          assert.equal(new Set(requests).size, 1, `${at} ${when}: one request: ${requests}`);
          const answers = msgs.filter((m) => m.type === "ApprovalResponse");
          if (sent(dir).length) assert.ok(answers.some((a) => a.payload.response === "approve"), `${at} ${when}: sent only once approved`);
        }
      }
    }
    // Nearly every point was a death (the last write or two may not come in a shorter life).
    assert.ok(n >= 3 * (writes - 2), `${n} deaths of ${3 * writes} points`);
  });
}

test("FileSessionStore: one owner — a second process is refused while the first lives, and takes over the lock once it is dead", { timeout: 30_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "kosong-session-"));
  const holder = spawn(process.execPath, [CHILD, dir, baseUrl(), "-1", "hold"], { cwd: root, stdio: ["ignore", "pipe", "pipe"] });
  await new Promise((resolve) => holder.stdout.on("data", (d) => String(d).includes("holding") && resolve()));
  const refused = await life(dir, -1, "none");
  assert.equal(refused.events[0]?.error, "SessionLockedError", JSON.stringify(refused.events));
  holder.kill("SIGKILL");
  await new Promise((r) => holder.on("exit", r));
  const next = await life(dir, -1, "none");
  assert.equal(next.code, 0, next.err);
  assert.deepEqual(Object.assign({}, ...next.events).outcome, { outcome: "done" }, JSON.stringify(next.events));
});
