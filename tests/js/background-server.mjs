// A loopback server that implements OpenAI's background streaming protocol as OpenAI documents
// it: `POST /responses` with `background: true` keeps the answer server-side, every event carries
// a `sequence_number`, `GET /responses/{id}?stream=true&starting_after=n` streams the rest, and
// `POST /responses/{id}/cancel` stops it. It cuts its streams where a test says and records every
// request. Shared by the resume tests on Node, in Chromium and in workerd.
import { createServer } from "node:http";

/** The events of one answer: some text, optionally a function call first, then the end. */
export function answerEvents(id, { text = ["The ", "answer ", "goes ", "on ", "after ", "the ", "cut."], call = null } = {}) {
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

export const frame = (e) => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`;

/**
 * The server. `plan.cuts`: for each connection to an answer (the POST, then each GET), the
 * sequence number of the event it is cut in the middle of (`Infinity`: not cut). `plan.get`:
 * `"resume"` (as OpenAI documents), `"replay"` (ignores starting_after: streams from 0), or a
 * status to answer every GET with (404: the answer expired). `getFailures`: statuses the next GETs
 * get first; `redirectGets`: how many GETs are redirected (307, same origin) first; `holdAt` /
 * `holdFirstAt`: where a stream stops until its reader goes away; `delayMs` between events.
 */
export async function backgroundServer(plan) {
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
    let answer = null;
    if (req.method === "POST" && url.pathname === "/v1/responses") {
      const id = `resp_${answers.size + 1}`;
      answer = id;
      events = plan.events(id, answers.size + 1);
      answers.set(id, events);
    } else if (req.method === "POST" && /^\/v1\/responses\/[^/]+\/cancel$/.test(url.pathname)) {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ id: url.pathname.split("/")[3], status: "cancelled" }));
      plan.onCancel?.();
      return;
    } else if (req.method === "GET" && url.pathname.startsWith("/v1/responses/")) {
      answer = decodeURIComponent(url.pathname.slice("/v1/responses/".length));
      events = answers.get(answer);
      if (plan.redirectGets > 0) {
        // A same-origin redirect first (a proxy's): followed, nothing read yet.
        plan.redirectGets--;
        res.writeHead(307, { location: `${url.pathname}${url.search}&hop=1` }).end();
        return;
      }
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
    const connection = connections++;
    // `onlyFirstAnswer`: the cuts are the first answer's connections' (a later step streams whole).
    const cut = plan.onlyFirstAnswer && answer !== "resp_1" ? Infinity : (plan.cuts[connection] ?? Infinity);
    res.writeHead(200, { "content-type": "text/event-stream" });
    for (const e of events.slice(from)) {
      const text = frame(e);
      // Until the client goes away: on every connection (`holdAt`), or on the first only
      // (`holdFirstAt`: the runtime reading it dies there, and the next one reads it again).
      if (e.sequence_number === plan.holdAt || (connection === 0 && e.sequence_number === plan.holdFirstAt)) {
        plan.onHold?.();
        await new Promise((r) => res.on("close", r));
        return;
      }
      if (plan.delayMs) await new Promise((r) => setTimeout(r, plan.delayMs));
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

