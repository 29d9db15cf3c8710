// Shared by the benchmarks: fixture streams (OpenAI Chat Completions and Anthropic Messages
// formats), a custom `fetch` that hands the same bytes to every contender and notes when each
// event was handed over, a loopback HTTP server serving them, and statistics.
import { createServer } from "node:http";

export const enc = new TextEncoder();

// ---- fixtures ---------------------------------------------------------------------------------

const WORDS = "the quick brown fox jumps over a lazy dog while streaming tokens arrive one after another in order".split(" ");
/** A deterministic text delta of a few words. */
const delta = (i) => ` ${WORDS[i % WORDS.length]} ${WORDS[(i * 7) % WORDS.length]}`;

const oaBase = { id: "chatcmpl-bench0123456789abcdef", object: "chat.completion.chunk", created: 1764000000, model: "gpt-4.1-mini-2025-04-14", system_fingerprint: "fp_bench01" };
/** One Chat Completions chunk: `delta`, a finish reason, fields to add. */
export const oa = (delta, finish = null, extra = {}) =>
  `data: ${JSON.stringify({ ...oaBase, service_tier: "default", choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }], usage: null, obfuscation: "a1b2c3d4", ...extra })}\n\n`;
const oaUsage = () => `data: ${JSON.stringify({ ...oaBase, choices: [], usage: { prompt_tokens: 1200, completion_tokens: 20000, total_tokens: 21200, prompt_tokens_details: { cached_tokens: 1024, audio_tokens: 0 }, completion_tokens_details: { reasoning_tokens: 0 } } })}\n\n`;

const an = (type, body) => `event: ${type}\ndata: ${JSON.stringify({ type, ...body })}\n\n`;
const anStart = () => an("message_start", { message: { id: "msg_bench0123456789", type: "message", role: "assistant", model: "claude-sonnet-4-5-20250929", content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 1200, cache_creation_input_tokens: 0, cache_read_input_tokens: 1024, output_tokens: 1 } } });
const anEnd = (reason, out) => [an("message_delta", { delta: { stop_reason: reason, stop_sequence: null }, usage: { output_tokens: out } }), an("message_stop", {})];

/** `s` cut into pieces of `n` characters. */
const pieces = (s, n) => s.match(new RegExp(`[\\s\\S]{1,${n}}`, "g")) ?? [];

/** About `bytes` of JSON arguments for a tool call. */
function argsOf(bytes, seed) {
  const items = [];
  let i = 0;
  while (JSON.stringify({ query: `q${seed}`, items }).length < bytes) items.push({ n: i, text: delta(i + seed).trim(), ok: i++ % 3 === 0 });
  return JSON.stringify({ query: `q${seed}`, items });
}

/**
 * A fixture: `events` (each one SSE event as a string), and for tool fixtures `calls`:
 * `{id, name, args, closeEvent}` where closeEvent is the index of the event that carries the
 * call's closing bytes.
 */
export function textFixture(format, n = 20_000) {
  const events = [];
  if (format === "responses") {
    // OpenAI Responses: created, the message item and its text part, n deltas, done events, completed.
    let seq = 0;
    const rs = (type, body) => `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: seq++, ...body })}\n\n`;
    const item = { id: "msg_bench0123456789", type: "message", status: "in_progress", role: "assistant", content: [] };
    events.push(rs("response.created", { response: { id: "resp_bench0123456789", object: "response", created_at: 1764000000, status: "in_progress", model: "gpt-5-mini", output: [] } }));
    events.push(rs("response.output_item.added", { output_index: 0, item }));
    events.push(rs("response.content_part.added", { item_id: item.id, output_index: 0, content_index: 0, part: { type: "output_text", text: "", annotations: [] } }));
    for (let i = 0; i < n; i++) events.push(rs("response.output_text.delta", { item_id: item.id, output_index: 0, content_index: 0, delta: delta(i), logprobs: [], obfuscation: "a1b2c3" }));
    const text = Array.from({ length: n }, (_, i) => delta(i)).join("");
    events.push(rs("response.output_text.done", { item_id: item.id, output_index: 0, content_index: 0, text, logprobs: [] }));
    events.push(rs("response.output_item.done", { output_index: 0, item: { ...item, status: "completed", content: [{ type: "output_text", text, annotations: [] }] } }));
    events.push(rs("response.completed", { response: { id: "resp_bench0123456789", object: "response", created_at: 1764000000, status: "completed", model: "gpt-5-mini", usage: { input_tokens: 1200, input_tokens_details: { cached_tokens: 1024 }, output_tokens: n, total_tokens: 1200 + n } } }));
  } else if (format === "gemini") {
    const chunk = (parts, finish) => `data: ${JSON.stringify({ candidates: [{ content: { parts, role: "model" }, ...(finish ? { finishReason: finish } : {}), index: 0 }], usageMetadata: { promptTokenCount: 1200, totalTokenCount: 1200 }, modelVersion: "gemini-2.5-flash", responseId: "bench0123456789" })}\r\n\r\n`;
    for (let i = 0; i < n; i++) events.push(chunk([{ text: delta(i) }], i === n - 1 ? "STOP" : null));
  } else if (format === "openai") {
    events.push(oa({ role: "assistant", content: "", refusal: null }));
    for (let i = 0; i < n; i++) events.push(oa({ content: delta(i) }));
    events.push(oa({}, "stop"), oaUsage(), "data: [DONE]\n\n");
  } else {
    events.push(anStart(), an("content_block_start", { index: 0, content_block: { type: "text", text: "" } }), an("ping", {}));
    for (let i = 0; i < n; i++) events.push(an("content_block_delta", { index: 0, delta: { type: "text_delta", text: delta(i) } }));
    events.push(an("content_block_stop", { index: 0 }), ...anEnd("end_turn", n));
  }
  return { name: `${format}-text`, events, calls: [], text: Array.from({ length: n }, (_, i) => delta(i)).join("") };
}

/** 8 parallel calls of ~4 KB arguments in ~10-character pieces, one after another or interleaved. */
export function toolsFixture(format, { interleaved = false, calls = 8, argBytes = 4096, piece = 10 } = {}) {
  const list = Array.from({ length: calls }, (_, i) => ({ id: `call_${i}_bench`, name: `tool_${i}`, args: argsOf(argBytes, i), index: i }));
  const events = [];
  if (format === "openai") {
    events.push(oa({ role: "assistant", content: null }));
    const frags = list.map((c) => pieces(c.args, piece));
    const start = (c) => oa({ tool_calls: [{ index: c.index, id: c.id, type: "function", function: { name: c.name, arguments: "" } }] });
    const frag = (c, a) => oa({ tool_calls: [{ index: c.index, function: { arguments: a } }] });
    if (!interleaved) {
      for (const c of list) {
        events.push(start(c));
        for (const a of frags[c.index]) events.push(frag(c, a));
        c.closeEvent = events.length - 1;
      }
    } else {
      for (const c of list) events.push(start(c));
      const max = Math.max(...frags.map((f) => f.length));
      for (let k = 0; k < max; k++) {
        for (const c of list) {
          if (k < frags[c.index].length) {
            events.push(frag(c, frags[c.index][k]));
            if (k === frags[c.index].length - 1) c.closeEvent = events.length - 1;
          }
        }
      }
    }
    events.push(oa({}, "tool_calls"), oaUsage(), "data: [DONE]\n\n");
  } else {
    events.push(anStart());
    for (const c of list) {
      events.push(an("content_block_start", { index: c.index, content_block: { type: "tool_use", id: c.id, name: c.name, input: {} } }));
      for (const a of pieces(c.args, piece)) events.push(an("content_block_delta", { index: c.index, delta: { type: "input_json_delta", partial_json: a } }));
      events.push(an("content_block_stop", { index: c.index }));
      c.closeEvent = events.length - 1;
    }
    events.push(...anEnd("tool_use", 9000));
  }
  return { name: `${format}-tools-${interleaved ? "interleaved" : "sequential"}`, events, calls: list };
}

/** One call whose argument of `bytes` streams in 20-character pieces. */
/** One call whose arguments nest `{"a":` about `bytes / 6` deep, in 100-byte pieces. */
export function nestedArgFixture(bytes) {
  const depth = Math.floor(bytes / 6);
  const c = { id: "call_nested", name: "nest", args: `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`, index: 0 };
  const events = [oa({ role: "assistant", content: null }), oa({ tool_calls: [{ index: 0, id: c.id, type: "function", function: { name: c.name, arguments: "" } }] })];
  for (const a of pieces(c.args, 100)) events.push(oa({ tool_calls: [{ index: 0, function: { arguments: a } }] }));
  c.closeEvent = events.length - 1;
  events.push(oa({}, "tool_calls"), oaUsage(), "data: [DONE]\n\n");
  return { name: `openai-nested-${bytes}`, events, calls: [c] };
}

export function bigArgFixture(bytes) {
  const c = { id: "call_big", name: "write_file", args: JSON.stringify({ path: "big.txt", content: "x".repeat(Math.max(0, bytes - 40)).replace(/x{50}/g, (m) => `${m.slice(0, 49)}\n`) }), index: 0 };
  const events = [oa({ role: "assistant", content: null }), oa({ tool_calls: [{ index: 0, id: c.id, type: "function", function: { name: c.name, arguments: "" } }] })];
  for (const a of pieces(c.args, 20)) events.push(oa({ tool_calls: [{ index: 0, function: { arguments: a } }] }));
  c.closeEvent = events.length - 1;
  events.push(oa({}, "tool_calls"), oaUsage(), "data: [DONE]\n\n");
  return { name: `openai-arg-${bytes}`, events, calls: [c] };
}

/**
 * A structured answer of about `bytes` (an object with a list of records) as Chat Completions
 * text deltas of `piece` characters: what a model streams under `response_format` json_schema.
 */
export function structuredFixture(bytes, piece = 40) {
  const items = [];
  let i = 0;
  while (JSON.stringify({ title: "report", items }).length < bytes) {
    items.push({ id: i, name: delta(i).trim(), note: `line ${i}: ${delta(i * 3).trim()} "quoted"`, score: (i % 97) / 8, tags: ["a", "b"].slice(0, 1 + (i % 2)) });
    i++;
  }
  const answer = JSON.stringify({ title: "report", items });
  const events = [oa({ role: "assistant", content: "" })];
  for (const p of pieces(answer, piece)) events.push(oa({ content: p }));
  events.push(oa({}, "stop"), oaUsage(), "data: [DONE]\n\n");
  return { name: `openai-structured-${bytes}`, events, answer, items: items.length };
}

/** A short final answer, for a contender's follow-up request (an agent loop's second step). */
export function followUp(format) {
  if (format === "responses" || format === "gemini") return [];
  return format === "openai"
    ? [oa({ role: "assistant", content: "Done." }), oa({}, "stop"), "data: [DONE]\n\n"]
    : [anStart(), an("content_block_start", { index: 0, content_block: { type: "text", text: "" } }), an("content_block_delta", { index: 0, delta: { type: "text_delta", text: "Done." } }), an("content_block_stop", { index: 0 }), ...anEnd("end_turn", 2)];
}

// ---- fetch ------------------------------------------------------------------------------------

/**
 * A `fetch` that answers every request with a stream of `events` (one event per chunk,
 * pulled by the reader), then `followUp` events for later requests. `handed[i]` is when event
 * i was handed to the reader (performance.now()); `done` when the stream ended.
 */
/** A streaming response of `chunks`, one per read; `onPull(i)` notes each hand-over (`i` = length at the end). */
function streamResponse(chunks, onPull) {
  let i = 0;
  const body = new ReadableStream({
    pull(c) {
      onPull?.(i);
      if (i < chunks.length) c.enqueue(chunks[i++]);
      else c.close();
    },
  }, { highWaterMark: 0 });
  return new Response(body, { status: 200, headers: { "content-type": "text/event-stream", "x-request-id": "req_bench" } });
}

/** Drains a request body like a real client would have sent it. */
async function drain(init) {
  if (init?.body && typeof init.body !== "string" && init.body.getReader) await new Response(init.body).arrayBuffer();
}

export function fixtureFetch(fixture, followUpEvents, { readBytes = 0 } = {}) {
  const bytes = readBytes > 0 ? networkReads(fixture.events, readBytes) : fixture.events.map((e) => enc.encode(e));
  const state = { handed: new Float64Array(bytes.length), endedAt: 0, requests: 0 };
  const track = (i) => {
    if (i < bytes.length) state.handed[i] = performance.now();
    else state.endedAt = performance.now();
  };
  const fetch = async (_url, init) => {
    await drain(init);
    state.requests++;
    if (state.requests === 1) return streamResponse(bytes, track);
    return streamResponse((followUpEvents ?? []).map((e) => enc.encode(e)));
  };
  return { fetch, state };
}

/**
 * The events' bytes as a network hands them over: joined, then cut every `size` bytes wherever
 * that falls (inside an event, a line or a UTF-8 character). undici's reads of a real response
 * are of this kind (one TLS record or socket read, often 16 KB), where the fixtures' one event a
 * read measures mostly what each contender pays per read.
 */
export function networkReads(events, size) {
  const all = enc.encode(events.join(""));
  const out = [];
  for (let at = 0; at < all.length; at += size) out.push(all.subarray(at, at + size));
  return out;
}

/** A `fetch` that answers its n-th request with the n-th list of events (the last one again after that). */
export function sequenceFetch(responses) {
  const encoded = responses.map((events) => events.map((e) => enc.encode(e)));
  let n = 0;
  return async (_url, init) => {
    await drain(init);
    return streamResponse(encoded[Math.min(n++, encoded.length - 1)]);
  };
}

/** A loopback HTTP server that streams the fixture's events (first request) and follow-ups. */
export async function fixtureServer(fixture, followUpEvents) {
  let n = 0;
  const body = Buffer.from(fixture.events.join(""));
  const follow = Buffer.from((followUpEvents ?? []).join(""));
  const server = createServer(async (req, res) => {
    for await (const _ of req);
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.end(n++ === 0 ? body : follow);
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return {
    baseUrl: `http://127.0.0.1:${server.address().port}/v1`,
    reset() {
      n = 0;
    },
    close: () => new Promise((r) => server.close(r)),
  };
}

// ---- statistics -------------------------------------------------------------------------------

/**
 * Between timed runs: a GC, then one task turn, in which the FinalizationRegistry callbacks the GC
 * queued free the last run's wasm objects (and let go of what they hold: a provider's `fetch`, and
 * with it a fixture's bytes), then a GC again. Without the task turn a bench whose runs never leave
 * the microtask queue (the fixtures' `fetch`) frees none of them: the A/B of every fixture grew to
 * 7 GB here, and each later fixture was timed in a heavier heap.
 */
export async function settle() {
  globalThis.gc?.();
  await new Promise((r) => setTimeout(r, 0));
  globalThis.gc?.();
}

export function stats(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.floor(p * (s.length - 1) + 0.5))];
  return { median: q(0.5), min: s[0], max: s.at(-1), n: s.length };
}

/** Runs `fn` `warmup` + `runs` times; the timings (ms) of the measured runs. */
export async function time(fn, { runs = 7, warmup = 1 } = {}) {
  for (let i = 0; i < warmup; i++) await fn();
  const out = [];
  for (let i = 0; i < runs; i++) {
    await settle();
    const t = performance.now();
    await fn();
    out.push(performance.now() - t);
  }
  return out;
}
