// A turn outlives its process: a real Node child runs a turn against a loopback server streaming
// real SSE, with its recording and context in files; it is killed with SIGKILL mid-turn; the next
// start goes on with the turn through `resumeSoul`. After it: the wire, the history, the model's
// next request and what the tool did (a file it appends to) all agree.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { appendFileSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as k from "kosong-wasm";
import { startMockServer, text, toolStart, finish, done } from "./mock-openai.mjs";

const CHILD = new URL("./durable-child.mjs", import.meta.url).pathname;
const root = new URL("../..", import.meta.url).pathname;
let server;
before(async () => {
  server = await startMockServer();
});
after(async () => {
  await server.close();
});

/**
 * Runs one life of the child; `killWhen(event, dir)` says, for each line it prints (and each
 * check of its files), when to SIGKILL it. Resolves with what it printed and how it ended.
 */
function life(dir, mode, flags = {}, killWhen = () => false) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CHILD, dir, server.baseUrl, mode, JSON.stringify(flags)], { cwd: root, stdio: ["ignore", "pipe", "pipe"] });
    const events = [];
    let buf = "";
    let stderr = "";
    let killed = false;
    const check = (e) => {
      if (!killed && killWhen(e, dir)) {
        killed = true;
        child.kill("SIGKILL");
      }
    };
    const poll = setInterval(() => check(null), 5);
    child.stdout.on("data", (d) => {
      buf += d;
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        const e = JSON.parse(buf.slice(0, i));
        buf = buf.slice(i + 1);
        events.push(e);
        check(e);
      }
    });
    child.stderr.on("data", (d) => (stderr += d));
    child.on("error", reject);
    child.on("exit", (code, sig) => {
      clearInterval(poll);
      resolve({ events, code, signal: sig, stderr, killed });
    });
  });
}

const wireOf = (dir) => k.readWireRecord(readFileSync(join(dir, "wire.jsonl"), "utf8"));
const kinds = (dir) => wireOf(dir).map((m) => m.type);
const historyOf = (dir) => k.Context.fromJSONL(readFileSync(join(dir, "context.jsonl"), "utf8"), { logger: { warn() {} } }).history;
const sentLines = (dir) => (existsSync(join(dir, "sent.log")) ? readFileSync(join(dir, "sent.log"), "utf8").trim().split("\n").filter(Boolean) : []);
const recorded = (dir, kind) => existsSync(join(dir, "wire.jsonl")) && readFileSync(join(dir, "wire.jsonl"), "utf8").includes(`"type":"${kind}"`);
const resultsFor = (dir, id) => wireOf(dir).filter((m) => m.type === "ToolResult" && m.payload.tool_call_id === id);
const textOf = (m) => (typeof m.content === "string" ? m.content : m.content.map((p) => p.text ?? "").join(""));

function queueTurn(answer) {
  server.respond({ steps: [text("Sending."), toolStart(0, "call_1", "send_email", '{"to":"a@b.c"}'), finish("tool_calls"), done()] });
  server.respond({ steps: [text(answer), finish("stop"), done()] });
}

/** One call has one result on the wire and in the history; every TurnBegin has its TurnEnd. */
function assertConsistent(dir) {
  const history = historyOf(dir);
  for (const m of history) for (const c of m.tool_calls ?? []) assert.equal(history.filter((t) => t.tool_call_id === c.id).length, 1, `${c.id} in the history`);
  for (const c of wireOf(dir).filter((m) => m.type === "ToolCall")) assert.equal(resultsFor(dir, c.payload.id).length, 1, `${c.payload.id} on the wire`);
  const ks = kinds(dir);
  assert.equal(ks.filter((x) => x === "TurnBegin").length, ks.filter((x) => x === "TurnEnd").length);
}

test("SIGKILL while a tool runs: the next start answers it interrupted, never runs it again, and the turn goes on", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kosong-durable-"));
  queueTurn("I could not tell whether it went.");
  const n = server.requests.length;
  const first = await life(dir, "start", { hold: true }, (e) => e?.sent === "call_1");
  assert.ok(first.killed && first.signal === "SIGKILL", `killed: ${first.stderr}`);
  // Before: the call is recorded (before the tool started), no result; the context has only the user message.
  assert.ok(kinds(dir).includes("ToolCall") && !kinds(dir).includes("ToolResult"), kinds(dir).join());
  assert.deepEqual(historyOf(dir).map((m) => m.role), ["user"]);
  assert.deepEqual(sentLines(dir), ["call_1 a@b.c"]);

  const second = await life(dir, "resume");
  assert.equal(second.code, 0, second.stderr);
  const out = Object.assign({}, ...second.events);
  assert.equal(out.done, true, JSON.stringify(second.events));
  assert.equal(out.unfinished.step, 1);
  assert.deepEqual(out.roles, ["user", "assistant", "tool", "assistant"]);
  // After: the tool ran once; its result says the runtime stopped; the model was asked again with the round.
  assert.deepEqual(sentLines(dir), ["call_1 a@b.c"], "never run twice");
  const [result] = resultsFor(dir, "call_1");
  assert.match(result.payload.return_value.message, /interrupted.*may have taken effect/);
  assert.doesNotMatch(result.payload.return_value.message, /cancelled/);
  const history = historyOf(dir);
  assert.equal(textOf(history[1]), "Sending.");
  assert.equal(history[1].tool_calls[0].id, "call_1");
  const next = server.requests[n + 1].body.messages;
  assert.deepEqual(next.map((m) => m.role), ["system", "user", "assistant", "tool"]);
  assert.match(next[3].content, /interrupted/);
  assert.ok(kinds(dir).includes("Notification"), "the resume is on the wire");
  assertConsistent(dir);
});

test("an idempotent tool runs again after the kill, with the same ctx.toolCallId", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kosong-durable-"));
  queueTurn("Sent.");
  await life(dir, "start", { hold: true, idempotent: true }, (e) => e?.sent === "call_1");
  const second = await life(dir, "resume", { idempotent: true });
  assert.equal(Object.assign({}, ...second.events).done, true, JSON.stringify(second.events));
  assert.deepEqual(sentLines(dir), ["call_1 a@b.c", "call_1 a@b.c"], "the same call id both times (a tool keys its side effect on it)");
  assert.equal(resultsFor(dir, "call_1")[0].payload.return_value.output, "sent to a@b.c");
  assertConsistent(dir);
});

test("SIGKILL while an approval waits: after the restart the same request id is answered and the tool runs once", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kosong-durable-"));
  queueTurn("Sent it.");
  await life(dir, "start", { ask: true }, (_, d) => recorded(d, "ApprovalRequest"));
  const requestId = wireOf(dir).find((m) => m.type === "ApprovalRequest").payload.id;
  // Killed once more while it waits again, with nobody answering.
  const again = await life(dir, "resume", { ask: true }, (e) => e?.wire === "Notification");
  assert.ok(again.killed);
  const last = await life(dir, "resume", { ask: true, approve: true });
  const out = Object.assign({}, ...last.events);
  assert.equal(out.done, true, JSON.stringify(last.events));
  assert.deepEqual(out.unfinished.waitingApprovals.map((a) => a.requestId), [requestId]);
  assert.deepEqual(sentLines(dir), ["call_1 a@b.c"]);
  const ks = kinds(dir);
  assert.equal(ks.filter((x) => x === "ApprovalRequest").length, 1, "asked once");
  assert.equal(wireOf(dir).find((m) => m.type === "ApprovalResponse").payload.request_id, requestId);
  assertConsistent(dir);
});

test("a recording whose last line was cut mid-write recovers from the lines before it and says so", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kosong-durable-"));
  queueTurn("Done.");
  await life(dir, "start", { hold: true }, (e) => e?.sent === "call_1");
  appendFileSync(join(dir, "wire.jsonl"), '{"timestamp":1.5,"message":{"type":"ToolRes');
  appendFileSync(join(dir, "context.jsonl"), '{"role":"assis');
  const second = await life(dir, "resume");
  const warns = second.events.filter((e) => e.warn).map((e) => e.warn);
  assert.ok(warns.some((w) => /recording's last line .* cut mid-write/.test(w)), warns.join("\n"));
  assert.ok(warns.some((w) => /line/.test(w) && /context|skipped/i.test(w)), warns.join("\n"));
  assert.equal(Object.assign({}, ...second.events).done, true, JSON.stringify(second.events));
  assert.deepEqual(sentLines(dir), ["call_1 a@b.c"]);
  assertConsistent(dir);
});

test("a recording that is not this context's is refused with a clear error, and nothing is written", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kosong-durable-"));
  queueTurn("never");
  await life(dir, "start", { hold: true }, (e) => e?.sent === "call_1");
  server.clearQueue();
  writeFileSync(join(dir, "context.jsonl"), '{"role":"_system_prompt","content":"x"}\n{"role":"_checkpoint","id":0}\n{"role":"user","content":"another session"}\n');
  const before = [readFileSync(join(dir, "wire.jsonl"), "utf8"), readFileSync(join(dir, "context.jsonl"), "utf8")];
  const n = server.requests.length;
  const second = await life(dir, "resume");
  const out = Object.assign({}, ...second.events);
  assert.equal(out.error, "TurnNotRecovered", JSON.stringify(second.events));
  assert.match(out.message, /does not belong to this context/);
  assert.deepEqual([readFileSync(join(dir, "wire.jsonl"), "utf8"), readFileSync(join(dir, "context.jsonl"), "utf8")], before);
  assert.equal(server.requests.length, n, "the model was not asked");
});

test("another session's recording that began with the same message is refused whole (48 D2), and each session goes on with its own", async () => {
  const [a, b] = [0, 1].map(() => mkdtempSync(join(tmpdir(), "kosong-durable-")));
  for (const dir of [a, b]) {
    queueTurn("never");
    await life(dir, "start", { hold: true }, (e) => e?.sent === "call_1");
    server.clearQueue();
  }
  // Both turns began "Mail a@b.c" and hold the same call id: only the turn's id tells them apart.
  const mixed = mkdtempSync(join(tmpdir(), "kosong-durable-"));
  writeFileSync(join(mixed, "context.jsonl"), readFileSync(join(a, "context.jsonl")));
  writeFileSync(join(mixed, "wire.jsonl"), readFileSync(join(b, "wire.jsonl")));
  const before = [readFileSync(join(mixed, "wire.jsonl"), "utf8"), readFileSync(join(mixed, "context.jsonl"), "utf8")];
  const n = server.requests.length;
  const refused = Object.assign({}, ...(await life(mixed, "resume")).events);
  assert.equal(refused.error, "TurnNotRecovered", JSON.stringify(refused));
  assert.match(refused.message, /does not belong to this context \(the context's last turn is/);
  assert.deepEqual([readFileSync(join(mixed, "wire.jsonl"), "utf8"), readFileSync(join(mixed, "context.jsonl"), "utf8")], before);
  assert.equal(server.requests.length, n, "the model was not asked");
  assert.equal(sentLines(mixed).length, 0);
  for (const dir of [a, b]) {
    server.respond({ steps: [text("It may have gone out."), finish("stop"), done()] });
    const out = Object.assign({}, ...(await life(dir, "resume")).events);
    assert.equal(out.done, true, JSON.stringify(out));
    assert.deepEqual(sentLines(dir), ["call_1 a@b.c"], "its tool ran once, in its first life");
    assertConsistent(dir);
  }
});

test("unfinishedTurn: null for a finished recording, the step and waiting approvals otherwise", () => {
  assert.equal(k.unfinishedTurn('{"type":"metadata","protocol_version":"1.10"}\n{"timestamp":1,"message":{"type":"TurnBegin","payload":{"user_input":"x"}}}\n{"timestamp":1,"message":{"type":"TurnEnd","payload":{}}}\n'), null);
  const t = k.unfinishedTurn([{ type: "TurnBegin", payload: { user_input: "x" } }, { type: "StepBegin", payload: { n: 1 } }]);
  assert.deepEqual(t, { userInput: "x", step: 1, resumes: 0, waitingApprovals: [] });
  assert.throws(() => k.unfinishedTurn(42), TypeError);
});
