// Resumable answers (OpenAIResponsesProvider with `background: true`) against a real loopback
// server that implements OpenAI's background streaming protocol: `POST /responses` with
// `background: true` keeps the answer server-side, every event carries a `sequence_number`, and
// `GET /responses/{id}?stream=true&starting_after=n` streams the rest. The server cuts its streams
// where a test says (the socket destroyed in the middle of an event), and records every request,
// so each test checks what the server saw as well as the answer.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { answerEvents, backgroundServer } from "./background-server.mjs";
import * as kosong from "../../pkg/node.js";
import { mulberry32 } from "../../pkg/chaos.js";

/** Resolves once `pred()` holds, checked every 10 ms, or after `ms` (a bound, not a timing). */
async function until(pred, ms = 5000) {
  for (const end = Date.now() + ms; !pred() && Date.now() < end; ) await new Promise((r) => setTimeout(r, 10));
}

const user = [{ role: "user", content: "go" }];
const textOf = (m) => (typeof m.content === "string" ? m.content : m.content.map((p) => p.text ?? "").join(""));
const provider = (baseUrl, background = true) => new kosong.OpenAIResponsesProvider({ model: "gpt-5-mini", apiKey: "sk-test", baseUrl, background });

test("background: a stream cut mid-event is read again after its last sequence number — one POST, one GET, the whole answer once, usage once", async () => {
  const s = await backgroundServer({ events: (id) => answerEvents(id), cuts: [6], get: "resume" });
  try {
    const r = await kosong.generate(provider(s.baseUrl), "", [], user);
    assert.equal(textOf(r.message), "The answer goes on after the cut.");
    assert.deepEqual(r.usage && [r.usage.input_other + (r.usage.input_cache_read ?? 0), r.usage.output], [100, 40]);
    assert.deepEqual(s.requests.map((q) => q.method), ["POST", "GET"]);
    assert.equal(s.requests[0].body.background, true);
    assert.equal(s.requests[0].body.store, true, "a background answer is stored");
    // Event 6 was cut in the middle: 5 was the last whole one.
    assert.deepEqual(s.requests[1].query, { stream: "true", starting_after: "5" });
    assert.equal(s.requests[1].path, "/v1/responses/resp_1");
  } finally {
    await s.close();
  }
});

test("background: a body that ends cleanly before response.completed (a proxy that closed it) is read again too", async () => {
  const s = await backgroundServer({ events: (id) => answerEvents(id), cuts: [6], get: "resume", endCleanly: true });
  try {
    const r = await kosong.generate(provider(s.baseUrl), "", [], user);
    assert.equal(textOf(r.message), "The answer goes on after the cut.");
    assert.deepEqual(s.requests.map((q) => `${q.method} ${q.query.starting_after ?? ""}`), ["POST ", "GET 5"]);
  } finally {
    await s.close();
  }
});

test("background: a reconnect that fails (503) is tried again after the server's Retry-After; three that fail end it as the break it was", async () => {
  const s = await backgroundServer({ events: (id) => answerEvents(id), cuts: [6], get: "resume", getFailures: [{ status: 503, retryAfter: 1 }] });
  try {
    const r = await kosong.generate(provider(s.baseUrl), "", [], user);
    assert.equal(textOf(r.message), "The answer goes on after the cut.");
    assert.deepEqual(s.requests.map((q) => q.method), ["POST", "GET", "GET"]);
    assert.ok(s.requests[2].at - s.requests[1].at >= 950, `the second GET waited the Retry-After (${s.requests[2].at - s.requests[1].at} ms)`);
  } finally {
    await s.close();
  }
  const failures = Array.from({ length: 3 }, () => ({ status: 503 }));
  const down = await backgroundServer({ events: (id) => answerEvents(id), cuts: [6], get: "resume", getFailures: failures });
  try {
    await assert.rejects(kosong.generate(provider(down.baseUrl), "", [], user), (e) => e.name === "APIConnectionError");
    await until(() => down.requests.length >= 5);
    assert.deepEqual(down.requests.map((q) => `${q.method} ${q.path.endsWith("/cancel") ? "cancel" : ""}`), ["POST ", "GET ", "GET ", "GET ", "POST cancel"]);
  } finally {
    await down.close();
  }
});

test("background: cut three times (the POST and two GETs), the answer still comes whole from 1 POST and 3 GETs", async () => {
  const s = await backgroundServer({ events: (id) => answerEvents(id), cuts: [4, 7, 9], get: "resume" });
  try {
    const r = await kosong.generate(provider(s.baseUrl), "", [], user);
    assert.equal(textOf(r.message), "The answer goes on after the cut.");
    assert.deepEqual(s.requests.map((q) => `${q.method} ${q.query.starting_after ?? ""}`), ["POST ", "GET 3", "GET 6", "GET 8"]);
    assert.deepEqual([r.usage.input_other + (r.usage.input_cache_read ?? 0), r.usage.output], [100, 40], "the tokens counted once");
  } finally {
    await s.close();
  }
});

test("background: a server that ignores starting_after and replays from the start — what was read already is skipped, not repeated", async () => {
  const s = await backgroundServer({ events: (id) => answerEvents(id), cuts: [7], get: "replay" });
  try {
    const parts = [];
    const r = await kosong.generate(provider(s.baseUrl), "", [], user, { onMessagePart: (p) => void (p.type === "text" && parts.push(p.text)) });
    assert.equal(textOf(r.message), "The answer goes on after the cut.");
    assert.equal(parts.join(""), "The answer goes on after the cut.", "the part hook saw each piece once");
    assert.equal(s.requests.length, 2);
  } finally {
    await s.close();
  }
});

test("background: an answer that cannot be read again (404) fails as a broken stream does, after one GET, said once through the logger", async () => {
  const s = await backgroundServer({ events: (id) => answerEvents(id), cuts: [6], get: 404 });
  try {
    const warned = [];
    const logger = { warn: (message, fields) => warned.push([message, fields]) };
    await assert.rejects(kosong.generate(provider(s.baseUrl), "", [], user, { logger }), (e) => e.name === "APIConnectionError");
    assert.equal(warned.length, 1, JSON.stringify(warned));
    assert.match(warned[0][0], /could not be read again \(404\)/);
    assert.deepEqual(warned[0][1], { status: 404 });
    // Given up on, the answer is cancelled (whatever is left of it).
    await until(() => s.requests.length >= 3);
    assert.deepEqual(s.requests.map((q) => `${q.method} ${q.path}`), ["POST /v1/responses", "GET /v1/responses/resp_1", "POST /v1/responses/resp_1/cancel"]);
  } finally {
    await s.close();
  }
});

test("without background, a broken stream is never read again (no GET)", async () => {
  const s = await backgroundServer({ events: (id) => answerEvents(id), cuts: [6], get: "resume" });
  try {
    await assert.rejects(kosong.generate(provider(s.baseUrl, false), "", [], user), (e) => e.name === "APIConnectionError");
    assert.deepEqual(s.requests.map((q) => q.method), ["POST"]);
    assert.equal(s.requests[0].body.store, false);
    assert.equal("background" in s.requests[0].body, false);
  } finally {
    await s.close();
  }
});

test("background: a tool whose call completed before the cut runs once, the answer goes on after it, and its result is there", async () => {
  const call = { id: "call_A", name: "lookup", args: '{"q":"x"}' };
  // The call's output_item.done is event 4; the cut is in the text after it.
  const s = await backgroundServer({ events: (id) => answerEvents(id, { call }), cuts: [9], get: "resume" });
  try {
    let runs = 0;
    const tools = new kosong.SimpleToolset([{ name: "lookup", description: "", parameters: { type: "object" }, handler: async () => (runs++, "found") }]);
    const r = await kosong.step(provider(s.baseUrl), "", tools, user);
    const results = await r.toolResults();
    assert.equal(runs, 1, "the tool ran once");
    assert.equal(results.length, 1);
    assert.equal(results[0].return_value.output, "found");
    assert.equal(textOf(r.message), "The answer goes on after the cut.");
    assert.deepEqual(s.requests.map((q) => q.method), ["POST", "GET"]);
  } finally {
    await s.close();
  }
});

test("background, in a turn: the cut answer goes on where it broke — no StepRetry, no salvage, the tool once, one assistant message per step", async () => {
  const call = { id: "call_A", name: "lookup", args: '{"q":"x"}' };
  const s = await backgroundServer({
    events: (id, n) => (n === 1 ? answerEvents(id, { call }) : answerEvents(id, { text: ["done"] })),
    cuts: [9],
    get: "resume",
  });
  try {
    let runs = 0;
    const toolset = new kosong.SimpleToolset([{ name: "lookup", description: "", parameters: { type: "object" }, handler: async () => (runs++, "found") }]);
    const agent = new kosong.Agent({ provider: provider(s.baseUrl), systemPrompt: "", toolset });
    const seen = [];
    await kosong.runSoul(agent, "go", async (wire) => {
      for await (const m of wire.uiSide({ merge: true })) seen.push(m);
    }, new AbortController().signal);
    const types = seen.map((m) => m.type);
    assert.ok(!types.includes("StepRetry"), types.join(","));
    assert.equal(runs, 1);
    const h = agent.context.history;
    assert.deepEqual(h.map((m) => m.role), ["user", "assistant", "tool", "assistant"]);
    assert.equal(textOf(h[1]), "The answer goes on after the cut.");
    assert.equal(textOf(h[3]), "done");
    const shown = seen.filter((m) => m.type === "ContentPart").map((m) => m.payload.text).join("");
    assert.equal(shown, "The answer goes on after the cut.done", "the wire showed each piece once");
    assert.deepEqual(s.requests.map((q) => q.method), ["POST", "GET", "POST"]);
  } finally {
    await s.close();
  }
});

test("background: an abort stops the answer server-side too (POST …/cancel), and a finished answer is never cancelled", async () => {
  let cancelled;
  const seenCancel = new Promise((r) => (cancelled = r));
  const s = await backgroundServer({ events: (id) => answerEvents(id), cuts: [], get: "resume", holdAt: 5, onCancel: () => cancelled() });
  try {
    const ctrl = new AbortController();
    const run = kosong.generate(provider(s.baseUrl), "", [], user, { signal: ctrl.signal, onMessagePart: (p) => p.type === "text" && p.text.includes("answer") && ctrl.abort() });
    await assert.rejects(run, (e) => e.name === "AbortError" || /abort/i.test(String(e)));
    const outcome = await Promise.race([seenCancel.then(() => "cancelled"), new Promise((r) => setTimeout(() => r("no cancel within 5 s"), 5000))]);
    assert.equal(outcome, "cancelled");
    assert.deepEqual(s.requests.map((q) => `${q.method} ${q.path}`), ["POST /v1/responses", "POST /v1/responses/resp_1/cancel"]);
  } finally {
    await s.close();
  }
  const done = await backgroundServer({ events: (id) => answerEvents(id), cuts: [], get: "resume" });
  try {
    await kosong.generate(provider(done.baseUrl), "", [], user);
    await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(done.requests.map((q) => q.method), ["POST"], "nothing cancelled after response.completed");
  } finally {
    await done.close();
  }
});

test("background: a turn's time limit and a cancelled turn stop the answer server-side too (POST …/cancel, once)", async () => {
  for (const how of ["turnTimeoutMs", "cancel"]) {
    let cancelled;
    const seenCancel = new Promise((r) => (cancelled = r));
    const s = await backgroundServer({ events: (id) => answerEvents(id), cuts: [], get: "resume", holdAt: 5, onCancel: () => cancelled() });
    try {
      const ctrl = new AbortController();
      const agent = new kosong.Agent({ provider: provider(s.baseUrl), systemPrompt: "", ...(how === "turnTimeoutMs" ? { turnTimeoutMs: 300 } : {}) });
      const run = kosong.runSoul(agent, "go", async (wire) => {
        for await (const m of wire.uiSide({ merge: false })) if (how === "cancel" && m.type === "ContentPart") ctrl.abort();
      }, ctrl.signal);
      await assert.rejects(run, (e) => (how === "cancel" ? e instanceof kosong.RunCancelled : e instanceof kosong.TurnTimeoutError), how);
      const outcome = await Promise.race([seenCancel.then(() => "cancelled"), new Promise((r) => setTimeout(() => r("no cancel within 5 s"), 5000))]);
      assert.equal(outcome, "cancelled", how);
      await new Promise((r) => setTimeout(r, 50));
      assert.deepEqual(s.requests.map((q) => `${q.method} ${q.path}`), ["POST /v1/responses", "POST /v1/responses/resp_1/cancel"], how);
    } finally {
      await s.close();
    }
  }
});

test("background: a 2.5 MB answer cut in the middle is read again whole, each piece once, while the part callback makes the package allocate", { timeout: 60_000 }, async () => {
  const piece = (i) => `${String(i).padStart(5, "0")}:${"é漢x".repeat(300)}|`;
  const text = Array.from({ length: 2000 }, (_, i) => piece(i));
  const whole = text.join("");
  assert.ok(Buffer.byteLength(whole) > 2.5e6, `${Buffer.byteLength(whole)} bytes`);
  const s = await backgroundServer({ events: (id) => answerEvents(id, { text }), cuts: [1000], get: "resume" });
  try {
    let seen = "";
    let records = 0;
    const r = await kosong.generate(provider(s.baseUrl), "", [], user, {
      onMessagePart: (p) => {
        seen += p.text ?? "";
        // A callback that makes the package allocate while a read is being handed over.
        records += kosong.readWireRecord(`{"timestamp":1,"message":{"type":"StepBegin","payload":{"n":${records + 1}}}}`).length;
      },
    });
    assert.equal(textOf(r.message), whole, "the answer whole, once");
    assert.equal(seen, whole, "each piece told once, in order");
    assert.ok(records > 0);
    assert.deepEqual(s.requests.map((q) => q.method), ["POST", "GET"]);
    assert.equal(r.usage.output, 40, "usage once");
  } finally {
    await s.close();
  }
});

// ---- a recovered turn reads its kept answer again ------------------------------------------

const CHILD = new URL("./resume-child.mjs", import.meta.url).pathname;
const root = new URL("../..", import.meta.url).pathname;

function life(dir, baseUrl) {
  const child = spawn(process.execPath, [CHILD, dir, baseUrl], { cwd: root, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (err += d));
  const ended = new Promise((resolve, reject) => {
    child.on("error", reject);
    child.on("exit", (code, signal) => resolve({ lines: out.trim().split("\n").filter(Boolean).map((l) => JSON.parse(l)), code, signal, err }));
  });
  return { child, ended };
}

test("background: a Node process SIGKILLed mid-answer; the next process reads the same answer again (one POST, one GET with starting_after, the text once) — the call that ran is never run again", { timeout: 60_000 }, async () => {
  const call = { id: "call_1", name: "send_email", args: '{"to":"a@b.c"}' };
  let held = false;
  const s = await backgroundServer({
    events: (id, n) => (n === 1 ? answerEvents(id, { call }) : answerEvents(id, { text: ["Sent."] })),
    cuts: [],
    get: "resume",
    // The first answer stops in the middle of its text (after its call), until its reader dies.
    holdFirstAt: 10,
    delayMs: 5,
    onHold: () => (held = true),
  });
  const dir = mkdtempSync(join(tmpdir(), "kosong-resume-"));
  try {
    const first = life(dir, s.baseUrl);
    // Killed once the call ran and the answer's id and part of its text are stored.
    const wire = () => (existsSync(join(dir, "wire.jsonl")) ? readFileSync(join(dir, "wire.jsonl"), "utf8") : "");
    await until(() => held && existsSync(join(dir, "sent.log")) && wire().includes("answer_kept") && /"text":"[^"]*answer/.test(wire()), 20_000);
    assert.ok(held && wire().includes("answer_kept"), `the first life got to the hold: ${wire().slice(-400)}`);
    first.child.kill("SIGKILL");
    assert.equal((await first.ended).signal, "SIGKILL");
    const second = await life(dir, s.baseUrl).ended;
    assert.equal(second.code, 0, second.err);
    const o = Object.assign({}, ...second.lines);
    assert.deepEqual(o.recovered, { outcome: "done" });
    // The model was asked once for the step: its answer read again, not asked again.
    assert.deepEqual(s.requests.map((q) => `${q.method} ${q.path}`), ["POST /v1/responses", "GET /v1/responses/resp_1", "POST /v1/responses"]);
    assert.deepEqual(s.requests[1].query, { stream: "true", starting_after: "0" });
    assert.equal(readFileSync(join(dir, "sent.log"), "utf8").trim().split("\n").length, 1, "the email went once");
    const h = o.history;
    assert.deepEqual(h.map((m) => m.role), ["user", "assistant", "tool", "assistant"]);
    assert.equal(textOf(h[1]), "The answer goes on after the cut.", "the text once, whole");
    // The call ran in the dead process: its result, when that life stored it, or interrupted.
    assert.match(textOf(h[2]), /^sent to a@b\.c$|interrupted/);
    assert.equal(textOf(h[3]), "Sent.");
    // The wire tells each piece of the text once; the step's usage is the answer's, once.
    const msgs = kosong.readWireRecord(readFileSync(join(dir, "wire.jsonl"), "utf8"));
    const told = msgs.filter((m) => m.type === "ContentPart").map((m) => m.payload.text).join("");
    assert.equal(told, "The answer goes on after the cut.Sent.");
    assert.equal(msgs.filter((m) => m.type === "StepRetry").length, 0);
    const usage = msgs.filter((m) => m.type === "StatusUpdate").map((m) => m.payload.token_usage.output);
    assert.deepEqual(usage, [40, 40]);
  } finally {
    await s.close();
  }
});

// ---- the fault tests, on this path -----------------------------------------------------------

test("background, in a turn, through every fault the fault tests know — cuts mid-event and between events, a clean early end, a stall past timeoutMs, 503 and 500 on the read, a redirect, a server that replays from 0 — the answer goes on: the text once, the tool once, usage once, no StepRetry, one POST a step", { timeout: 120_000 }, async () => {
  const call = { id: "call_A", name: "lookup", args: '{"q":"x"}' };
  const rand = mulberry32(45);
  const pick = (xs) => xs[Math.floor(rand() * xs.length)];
  const drawn = new Set();
  for (let round = 0; round < 24; round++) {
    const faults = [];
    // Within an answer's budget of three reads again (a failed read counts): up to three of its
    // connections broken, each later than the last (a server that replays from 0 sends the events
    // read already again, and only what is past them is progress).
    const failedRead = rand() < 0.3;
    const n = 1 + Math.floor(rand() * (failedRead ? 2 : 3));
    const cuts = [...new Set(Array.from({ length: n }, () => 1 + Math.floor(rand() * 13)))].sort((a, b) => a - b);
    const plan = { events: (id, n) => (n === 1 ? answerEvents(id, { call }) : answerEvents(id, { text: ["done"] })), cuts, onlyFirstAnswer: true, get: pick(["resume", "resume", "replay"]) };
    faults.push(`cuts ${cuts} ${plan.get}`);
    if (rand() < 0.3) (plan.endCleanly = true), faults.push("clean end");
    if (failedRead) (plan.getFailures = [{ status: pick([500, 503]), retryAfter: pick([0, 1]) }]), faults.push(`read ${plan.getFailures[0].status}`);
    if (rand() < 0.3) (plan.redirectGets = 1), faults.push("redirect");
    const stall = rand() < 0.2;
    if (stall) (plan.cuts = []), (plan.holdFirstAt = cuts[0]), faults.push(`stall at ${cuts[0]}`);
    const s = await backgroundServer(plan);
    try {
      let runs = 0;
      const toolset = new kosong.SimpleToolset([{ name: "lookup", description: "", parameters: { type: "object" }, handler: async () => (runs++, "found") }]);
      const provider = new kosong.OpenAIResponsesProvider({ model: "gpt-5-mini", apiKey: "sk-test", baseUrl: s.baseUrl, background: true, ...(stall ? { timeoutMs: 300 } : {}) });
      const agent = new kosong.Agent({ provider, systemPrompt: "", toolset });
      const seen = [];
      await kosong.runSoul(agent, "go", async (wire) => {
        for await (const m of wire.uiSide({ merge: false })) seen.push(m);
      }, new AbortController().signal);
      const what = `round ${round} (${faults.join(", ")})`;
      assert.ok(!seen.some((m) => m.type === "StepRetry"), `${what}: ${seen.map((m) => m.type)}`);
      assert.equal(runs, 1, what);
      const h = agent.context.history;
      assert.deepEqual(h.map((m) => m.role), ["user", "assistant", "tool", "assistant"], what);
      assert.equal(textOf(h[1]), "The answer goes on after the cut.", what);
      assert.equal(seen.filter((m) => m.type === "ContentPart").map((m) => m.payload.text).join(""), "The answer goes on after the cut.done", `${what}: each piece told once`);
      assert.deepEqual(seen.filter((m) => m.type === "StatusUpdate").map((m) => m.payload.token_usage.output), [40, 40], `${what}: usage once a step`);
      assert.equal(s.requests.filter((q) => q.method === "POST").length, 2, `${what}: one POST a step`);
      const reconnects = seen.filter((m) => m.type === "Notification" && m.payload.type === "answer_reconnected").length;
      assert.ok(reconnects >= 1 && reconnects <= 3, `${what}: ${reconnects} reconnects`);
      for (const f of faults) drawn.add(f.split(" ")[0] === "cuts" ? `cuts ${plan.get}` : f.replace(/ at \d+$/, "").replace(/ \d+$/, ""));
    } finally {
      await s.close();
    }
  }
  // Every kind of fault came up.
  assert.deepEqual([...drawn].sort(), ["clean end", "cuts replay", "cuts resume", "read", "redirect", "stall"]);
});
