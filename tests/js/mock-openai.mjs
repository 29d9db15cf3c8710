// A real HTTP server on 127.0.0.1 that speaks the OpenAI Chat Completions streaming format.
// Each test queues responses; each response is a list of steps: SSE events to write, pauses,
// waits on a promise the test controls (a gate), and how the response ends. The server
// records every request body and whether the client closed the connection early.
import { createServer } from "node:http";

export const sse = (obj) => `data: ${typeof obj === "string" ? obj : JSON.stringify(obj)}\n\n`;

const base = { id: "chatcmpl-test", object: "chat.completion.chunk", model: "mock" };
export const chunk = (delta, extra = {}) => sse({ ...base, choices: [{ index: 0, delta, finish_reason: null }], ...extra });
export const text = (t) => chunk({ content: t });
export const think = (t) => chunk({ reasoning_content: t });
export const toolStart = (index, id, name, args = "") =>
  chunk({ tool_calls: [{ index, id, type: "function", function: { name, arguments: args } }] });
export const toolArgs = (index, args) => chunk({ tool_calls: [{ index, function: { arguments: args } }] });
export const finish = (reason = "stop") => sse({ ...base, choices: [{ index: 0, delta: {}, finish_reason: reason }] });
export const usage = (prompt, completion, cached = 0) =>
  sse({ ...base, choices: [], usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion, prompt_tokens_details: { cached_tokens: cached } } });
export const done = () => "data: [DONE]\n\n";

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Settles with the promise's outcome, or "still pending" after `ms` (a bound, not a timing). */
export async function within(promise, ms = 5000) {
  let timer;
  const timeout = new Promise((r) => (timer = setTimeout(() => r({ pending: true }), ms)));
  try {
    return await Promise.race([promise.then((value) => ({ value }), (error) => ({ error })), timeout]);
  } finally {
    clearTimeout(timer);
  }
}


/** A promise with its resolve function, for gating the stream on test events. */
export function gate() {
  let open;
  const p = new Promise((r) => (open = r));
  return { promise: p, open };
}

export async function startMockServer() {
  const queue = [];
  const requests = [];
  const sockets = new Set();
  const server = createServer(async (req, res) => {
    // Recorded on arrival, so a request aborted while its body is still coming is seen too.
    const record = { method: req.method, url: req.url, headers: req.headers, body: undefined, clientClosed: false, ended: false };
    requests.push(record);
    record.closed = new Promise((r) => (record.closedResolve = r));
    res.on("close", () => {
      if (!record.ended) record.clientClosed = true;
      record.closedResolve();
    });
    let body = "";
    try {
      for await (const c of req) body += c;
    } catch {
      return; // the client went away mid-body
    }
    record.body = safeJson(body);
    if (res.destroyed || record.clientClosed) return; // gone before asking: take no response
    const script = queue.shift() ?? { status: 500, body: { error: { message: "mock server: no response queued" } } };
    if (script.status && script.status !== 200) {
      res.writeHead(script.status, { "content-type": "application/json", ...(script.headers ?? {}) });
      record.ended = true;
      res.end(typeof script.body === "string" ? script.body : JSON.stringify(script.body ?? {}));
      return;
    }
    if (script.noHeaders) return; // never answer: for timeouts
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", ...(script.headers ?? {}) });
    res.flushHeaders();
    for (const step of script.steps ?? []) {
      if (res.destroyed) return;
      if (typeof step === "string") {
        res.write(step);
      } else if (step.pause) {
        await sleep(step.pause);
      } else if (step.wait) {
        // Bounded, so a test whose gate never opens fails its assertion instead of hanging.
        let timer;
        await Promise.race([step.wait, new Promise((r) => (timer = setTimeout(r, step.maxWait ?? 5000)))]);
        clearTimeout(timer);
      } else if (step.hang) {
        return; // keep the response open until the client goes away
      } else if (step.destroy) {
        res.destroy();
        return;
      } else if (step.mark) {
        step.mark(); // tell the test how far the stream got
      }
    }
    record.ended = true;
    res.end();
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address();
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    /** Queue the next response: `{steps: [...]}` for a stream, `{status, body, headers}` for an error. */
    respond(script) {
      queue.push(script);
    },
    /** Drops responses no request took (after a test that aborts before sending). */
    clearQueue() {
      queue.length = 0;
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}

function safeJson(s) {
  try {
    return JSON.parse(s);
  } catch {
    return s;
  }
}
