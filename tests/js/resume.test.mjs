// Resumable answers (OpenAIResponsesProvider with `background: true`) against a real loopback
// server that implements OpenAI's background streaming protocol: `POST /responses` with
// `background: true` keeps the answer server-side, every event carries a `sequence_number`, and
// `GET /responses/{id}?stream=true&starting_after=n` streams the rest. The server cuts its streams
// where a test says (the socket destroyed in the middle of an event), and records every request,
// so each test checks what the server saw as well as the answer.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import * as kosong from "../../pkg/node.js";

/** The events of one answer: some text, optionally a function call first, then the end. */
function answerEvents(id, { text = ["The ", "answer ", "goes ", "on ", "after ", "the ", "cut."], call = null } = {}) {
  const ev = [];
  const add = (type, fields) => ev.push({ type, sequence_number: ev.length, ...fields });
  add("response.created", { response: { id, object: "response", status: "in_progress", output: [] } });
  let out = 0;
  if (call) {
    const item = { id: "fc_1", type: "function_call", status: "in_progress", arguments: "", call_id: call.id, name: call.name };
    add("response.output_item.added", { output_index: out, item });
    add("response.function_call_arguments.delta", { item_id: "fc_1", output_index: out, delta: call.args });
    add("response.function_call_arguments.done", { item_id: "fc_1", output_index: out, arguments: call.args });
    add("response.output_item.done", { output_index: out, item: { ...item, status: "completed", arguments: call.args } });
    out++;
  }
  const msg = { id: "msg_1", type: "message", status: "in_progress", role: "assistant", content: [] };
  add("response.output_item.added", { output_index: out, item: msg });
  add("response.content_part.added", { item_id: "msg_1", output_index: out, content_index: 0, part: { type: "output_text", text: "", annotations: [] } });
  for (const t of text) add("response.output_text.delta", { item_id: "msg_1", output_index: out, content_index: 0, delta: t, logprobs: [], obfuscation: "x1" });
  const whole = text.join("");
  add("response.output_text.done", { item_id: "msg_1", output_index: out, content_index: 0, text: whole });
  add("response.output_item.done", { output_index: out, item: { ...msg, status: "completed", content: [{ type: "output_text", text: whole, annotations: [] }] } });
  add("response.completed", {
    response: { id, object: "response", status: "completed", usage: { input_tokens: 100, input_tokens_details: { cached_tokens: 0 }, output_tokens: 40, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 140 } },
  });
  return ev;
}

const frame = (e) => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`;

/**
 * The server. `plan.cuts`: for each connection to an answer (the POST, then each GET), the
 * sequence number of the event it is cut in the middle of (`Infinity`: not cut). `plan.get`:
 * `"resume"` (as OpenAI documents), `"replay"` (ignores starting_after: streams from 0), or a
 * status to answer every GET with (404: the answer expired).
 */
async function backgroundServer(plan) {
  const requests = [];
  const answers = new Map();
  let connections = 0;
  const server = createServer(async (req, res) => {
    let body = "";
    for await (const c of req) body += c;
    const url = new URL(req.url, "http://x");
    requests.push({ method: req.method, path: url.pathname, query: Object.fromEntries(url.searchParams), body: body ? JSON.parse(body) : null, at: Date.now() });
    let events;
    let from = 0;
    if (req.method === "POST" && url.pathname === "/v1/responses") {
      const id = `resp_${answers.size + 1}`;
      events = plan.events(id, answers.size + 1);
      answers.set(id, events);
    } else if (req.method === "POST" && /^\/v1\/responses\/[^/]+\/cancel$/.test(url.pathname)) {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ id: url.pathname.split("/")[3], status: "cancelled" }));
      plan.onCancel?.();
      return;
    } else if (req.method === "GET" && url.pathname.startsWith("/v1/responses/")) {
      events = answers.get(decodeURIComponent(url.pathname.slice("/v1/responses/".length)));
      const refusal = plan.getFailures?.shift();
      if (refusal) {
        // A GET that fails before the answer is read again (a 503 with its Retry-After).
        res.writeHead(refusal.status, { "content-type": "application/json", ...(refusal.retryAfter ? { "retry-after": String(refusal.retryAfter) } : {}) });
        res.end(JSON.stringify({ error: { message: "busy", type: "server_error" } }));
        return;
      }
      if (typeof plan.get === "number" || !events) {
        res.writeHead(typeof plan.get === "number" ? plan.get : 404, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { message: "Response not found", type: "invalid_request_error" } }));
        return;
      }
      if (plan.get === "resume") from = Number(url.searchParams.get("starting_after")) + 1;
    } else {
      res.writeHead(404).end();
      return;
    }
    const cut = plan.cuts[connections++] ?? Infinity;
    res.writeHead(200, { "content-type": "text/event-stream" });
    for (const e of events.slice(from)) {
      const text = frame(e);
      if (e.sequence_number === plan.holdAt) await new Promise((r) => res.on("close", r)); // until the client goes away
      if (e.sequence_number === cut) {
        // Half of this event, then the socket destroyed (or, `plan.endCleanly`, the body ended as
        // if the answer were whole): the client reads a broken stream.
        if (plan.endCleanly) return void res.end(text.slice(0, Math.floor(text.length / 2)));
        res.write(text.slice(0, Math.floor(text.length / 2)));
        await new Promise((r) => setTimeout(r, 20));
        res.socket.destroy();
        return;
      }
      res.write(text);
    }
    res.end();
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return {
    baseUrl: `http://127.0.0.1:${server.address().port}/v1`,
    requests,
    close: () => new Promise((r) => server.close(r)),
  };
}

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
