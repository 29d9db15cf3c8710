// A Session followed over HTTP, on any host with the Fetch API's Request, Response and
// ReadableStream (workerd, Node 20+, browsers' service workers): request bodies read with a cap,
// JSON answers, a turn's start refused with the right status, and the session's events as
// Server-Sent Events (resumable by `Last-Event-ID`) or as the AI SDK's UI message stream
// (`useChat`). Nothing here decides a session's rule: the events, their ids, what waits and how
// a turn ended are the core's (session.js); this file only says them in HTTP.
import { SessionBusyError, SessionLimitError, messageText } from "./session.js";
import { UIMessageChunker, UI_MESSAGE_STREAM_HEADERS, UI_MESSAGE_STREAM_END, uiMessageEvent } from "./ui-stream.js";

const encoder = new TextEncoder();
/** A JSON response. */
export const json = (status, body, headers = {}) =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } });

/**
 * Reads a request body of at most `max` bytes, or returns null past it (however it was sent). A
 * body refused for its size is still read to its end and dropped (up to 32 MiB, then cut), so the
 * client gets the 413 instead of a connection reset while it is still sending.
 */
export async function readCapped(request, max) {
  const declared = Number(request.headers.get("content-length"));
  if (!request.body) return declared > max ? null : "";
  const reader = request.body.getReader();
  const chunks = [];
  let size = declared > 32 << 20 ? Infinity : 0;
  for (let r; size <= 32 << 20 && !(r = await reader.read()).done; ) {
    size += r.value.byteLength;
    if (size <= max) chunks.push(r.value);
  }
  if (size > 32 << 20) await reader.cancel();
  return size > max || declared > max ? null : new Blob(chunks).text();
}

/** Reads a JSON object body of at most `max` bytes: `{body}`, or `{error}` (a response to send). */
export async function readJsonBody(request, max, what) {
  const text = await readCapped(request, max);
  if (text === null) return { error: json(413, { error: `the request body is over ${max} bytes`, limit: max }) };
  let body;
  try {
    body = JSON.parse(text);
  } catch {
    return { error: json(400, { error: `the body must be JSON: ${what}` }) };
  }
  if (body === null || typeof body !== "object" || Array.isArray(body)) return { error: json(400, { error: `the body must be a JSON object: ${what}` }) };
  return { body };
}

/** The text of a UI message (`useChat`'s `{role, parts}`): its text parts, joined. */
export const uiText = (m) => (Array.isArray(m?.parts) ? m.parts.filter((p) => p?.type === "text" && typeof p.text === "string").map((p) => p.text).join("") : "");

/**
 * Answers the approvals the running turn waits on with those in the tool parts of a UI message
 * (`state: "approval-responded"`; the first per request id, `approve` only when `approved` is
 * `true`), then streams the rest of the turn; 409 when the message answers none of them.
 */
export async function answerFromUI(s, message) {
  const seen = new Set();
  const answers = [];
  for (const p of Array.isArray(message?.parts) ? message.parts : []) {
    const a = p?.state === "approval-responded" ? p.approval : undefined;
    if (typeof a?.id !== "string" || seen.has(a.id)) continue;
    seen.add(a.id);
    if (await s._whenWaiting(a.id)) answers.push(a);
  }
  if (!answers.length) return json(409, { error: "a turn is already running in this session; resume it with GET /api/chat/{id}/stream" });
  const after = s._lastEventId;
  try {
    for (const a of answers) await s.respond(a.id, a.approved === true ? "approve" : "reject", typeof a.reason === "string" ? a.reason : "");
  } catch (e) {
    return json(400, { error: e.message });
  }
  return uiResponse(s, after);
}

/** Answers an approval request from a body `{requestId, response, feedback?}`: 200, 400 (the body) or 404 (none of that id waits). */
export async function answer(s, { requestId, response, feedback = "" }) {
  if (typeof requestId !== "string" || !["approve", "approve_for_session", "reject"].includes(response) || typeof feedback !== "string") {
    return json(400, { error: 'the body is {requestId: string, response: "approve" | "approve_for_session" | "reject", feedback?: string}' });
  }
  const gone = () => json(404, { error: "no approval request of that id is waiting" });
  if (!(await s._whenWaiting(requestId))) return gone();
  try {
    await s.respond(requestId, response, feedback);
  } catch {
    return gone(); // answered a moment ago by another request
  }
  return json(200, { answered: true });
}

/** Cancels the running turn and answers once it has ended: `{cancelled: true}`, or `false` when none ran. */
export async function cancelTurn(s) {
  if (!s.running) return json(200, { cancelled: false });
  const ended = s._turnEnd();
  await s.cancel();
  await ended;
  return json(200, { cancelled: true });
}

/**
 * Starts a turn on `message` and answers with `respond(id before it)`; a refusal at once as its
 * status: 503 (the store refused a write a moment ago: retry), 409 (a turn runs: resume it at
 * `resumeRoute`), 429 (the session's turns), 413 (a size limit), 400 (the message).
 */
export async function startTurn(s, message, resumeRoute, respond) {
  const after = s._lastEventId;
  try {
    await Promise.race([s.send(message), null]); // a refusal is there at once; an accepted turn's end is not
  } catch (e) {
    if (e instanceof SessionBusyError && !s.running) return json(503, { error: e.message }, { "retry-after": "1" });
    if (e instanceof SessionBusyError) return json(409, { error: `a turn is already running in this session; resume it with ${resumeRoute}` });
    if (e instanceof SessionLimitError) return json(e.option === "maxTurns" ? 429 : 413, { error: e.message, limit: e.limit });
    return json(400, { error: e.message });
  }
  return respond(after);
}

/** A turn's end as a follower is told it: `{outcome, error?: "<name>: <message>"}` (a store's refusal: `storage: …`). */
function endOf(data) {
  const { outcome, error } = JSON.parse(data);
  if (!error) return { outcome };
  const named = error.message.startsWith(`${error.name}:`) ? error.message : `${error.name}: ${error.message}`;
  return { outcome, error: /^Session(Storage|Limit)Error$/.test(error.name) ? `storage: ${error.message}` : named };
}

/**
 * A response streaming the session's events after `after` — the recorded ones, then the live
 * ones until the running turn ends (at once when none runs) — each as `frames(e)` gives it
 * (`[text, true]`: the stream ends after it); `last()` is the stream's last text.
 */
function follow(s, after, headers, frames, last = () => "") {
  let stop = () => {};
  const body = new ReadableStream({
    start: (c) => {
      let done = false;
      const from = s._turnStart;
      const end = () => {
        if (done) return;
        done = true;
        stop();
        c.enqueue(encoder.encode(last()));
        c.close();
      };
      const event = (e) => {
        if (done) return;
        const out = frames(e);
        const [text, stops] = typeof out === "string" ? [out, false] : out;
        if (text) c.enqueue(encoder.encode(text));
        if (stops || (e.kind === "end" && e.id > from)) end();
      };
      const settled = s._settled;
      // A turn refused before anything of it was stored has no stored end: its end is told
      // without an id (a client that comes back finds nothing of it).
      const unstored = (data) => !done && (event({ id: null, kind: "end", data }), end());
      stop = s._listen({ event, close: end, unstored });
      for (const e of s._recorded(after)) event(e);
      if (settled) end();
    },
    cancel: () => stop(),
  });
  return new Response(body, { headers });
}

/** The session's events after `lastId` as SSE (`id:`, `event: wire | end`, `data:`), then the live rest. */
export function sseResponse(s, lastId) {
  return follow(s, lastId, { "content-type": "text/event-stream", "cache-control": "no-cache" }, (e) => {
    const data = e.kind === "end" ? JSON.stringify(endOf(e.data)) : messageText(e);
    return `${e.id === null ? "" : `id: ${e.id}\n`}event: ${e.kind}\ndata: ${data}\n\n`;
  });
}

/**
 * The running (or last) turn's assistant message as the AI SDK's UI message stream: every event
 * of the turn goes through one chunker (so block ids and open calls are the same on every
 * replay); what comes after `after` is sent, live while the turn runs. The stream finishes at
 * an approval request the turn waits on (the client answers in its next POST) or at the end.
 */
export function uiResponse(s, after) {
  const from = Math.min(s._turnStart, after);
  const chunker = new UIMessageChunker({ messageId: `msg-${from + 1}` });
  const sse = (chunks) => chunks.map(uiMessageEvent).join("");
  let head = sse(chunker.start());
  return follow(s, from, UI_MESSAGE_STREAM_HEADERS, (e) => {
    let text = head;
    head = "";
    if (e.kind === "end") {
      const { outcome, error } = endOf(e.data);
      return text + sse(chunker.end(outcome === "done" ? {} : outcome === "cancelled" ? { cancelled: true } : { error: error ?? `the turn was ${outcome}` }));
    }
    const chunks = chunker._pushLine(e.data);
    if (e.id <= after) return text; // already sent: it only moves the chunker on
    const asked = chunks.find((c) => c.type === "tool-approval-request" && s._waiting(c.approvalId));
    return asked ? [text + sse([...chunks, ...chunker.end({ pause: true })]), true] : text + sse(chunks);
  }, () => head + UI_MESSAGE_STREAM_END);
}
