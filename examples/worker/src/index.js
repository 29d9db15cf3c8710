// An agent chat on Cloudflare Workers, in the shape of Cloudflare's Agents SDK but on kosong-wasm.
// Each chat session is a Durable Object (`AgentSession` from kosong-wasm/cloudflare) that keeps its
// Context in SQLite and runs the agent turn itself; a turn whose runtime died (a deploy, an
// eviction) goes on by itself from its recording. This file is what a Worker writes: the model,
// the tools, the system prompt, who may do what, and a page. Routes (all but `/` and
// `POST /session` take `Authorization: Bearer <token>`):
//   POST /session → 201 {session, token}      POST /chat {message} → the turn's wire as SSE (ids)
//   GET /chat (Last-Event-ID: n) → the rest    POST /approve {requestId, response, feedback?}
//   POST /cancel   GET /history   GET /        POST /api/chat, GET /api/chat/{id}/stream: useChat
import * as kosong from "kosong-wasm";
import { AgentSession, ClientLimits, issueToken, json, newSessionId, readJsonBody, sessionLimit, uiText, verifyToken } from "kosong-wasm/cloudflare";

export { ClientLimits };

const SYSTEM_PROMPT = "You are a helpful assistant running on Cloudflare Workers. Use the tools when they help.";

const PROVIDERS = { anthropic: kosong.AnthropicProvider, openai_responses: kosong.OpenAIResponsesProvider, gemini: kosong.GeminiProvider, kimi: kosong.KimiProvider };
/**
 * Any OpenAI-compatible endpoint by default; `LLM_KIND` picks another wire format. With
 * `LLM_KIND = "openai_responses"`, `LLM_BACKGROUND = "true"` has the server keep each answer: a
 * broken stream, or a Worker evicted mid-answer, reads it again instead of asking again.
 */
const makeProvider = (env) => {
  const options = { model: env.LLM_MODEL ?? "gpt-4.1-mini", baseUrl: env.LLM_BASE_URL || undefined, apiKey: env.LLM_API_KEY || undefined };
  if (env.LLM_KIND === "openai_responses" && env.LLM_BACKGROUND === "true") options.background = true;
  return new (PROVIDERS[env.LLM_KIND] ?? kosong.OpenAIChatProvider)(options);
};

const sendEmail = {
  name: "send_email",
  description: "Sends an email (the user approves each one first).",
  parameters: { type: "object", properties: { to: { type: "string" }, subject: { type: "string" } }, required: ["to", "subject"] },
  // Asked before the handler starts: such a wait survives any restart of the runtime, and
  // nothing of the tool runs until the user answers (a refusal is kimi-cli's rejection).
  needsApproval: true,
  handler: async ({ to }) => `sent to ${to}`,
};

/**
 * A sub-agent (kimi-cli's `Agent` tool): the model hands it a whole errand; it runs on the
 * session's provider with its own context and tools, its messages on the session's wire, its
 * email approved by the same user.
 */
const mailer = () =>
  new kosong.Agent({
    name: "mailer",
    provider: null,
    systemPrompt: "You are a mail sub-agent: write and send the one email you are asked to, then say what you sent.",
    toolset: new kosong.SimpleToolset([sendEmail]),
  }).asTool({ description: "Delegates an email errand (who, what) to a sub-agent that writes and sends it." });

const tools = () =>
  new kosong.SimpleToolset([
    {
      name: "clock",
      description: "The current time in an IANA time zone.",
      parameters: { type: "object", properties: { timezone: { type: "string" } }, required: ["timezone"] },
      idempotent: true,
      handler: ({ timezone }) => `${timezone}: ${new Date().toLocaleTimeString("en-GB", { timeZone: timezone })}`,
    },
    {
      name: "add",
      description: "Adds numbers.",
      parameters: { type: "object", properties: { numbers: { type: "array", items: { type: "number" } } }, required: ["numbers"] },
      idempotent: true,
      handler: ({ numbers }) => String(numbers.reduce((a, b) => a + b, 0)),
    },
    sendEmail,
    mailer(),
  ]);

/** One chat session: its turns run this agent (storage, resume, approvals and recovery are the package's). */
export class ChatSession extends AgentSession {
  agentOptions() {
    return { name: "worker", provider: makeProvider(this.env), systemPrompt: SYSTEM_PROMPT, toolset: tools() };
  }
}

// ---- who may do what ----------------------------------------------------------------------

/**
 * Who the client is: `{client}` (a stable id, or null: anyone holding a session's token), or null
 * to refuse (401). With `AUTH = "cloudflare-access"` the client is the email Cloudflare Access
 * signed in, and a token works only for its user. Replace this function to use your own sign-in.
 */
export async function authorize(request, env) {
  if (env.AUTH === "cloudflare-access") {
    // Cloudflare Access sets this header on requests it let through (and strips a client's own).
    const email = request.headers.get("cf-access-authenticated-user-email");
    return email ? { client: email.toLowerCase() } : null;
  }
  return { client: null };
}

const encoder = new TextEncoder();
const limits = (env, key) => env.LIMITS.get(env.LIMITS.idFromName(key));
const tooMany = (what, retryAfter) => json(429, { error: `too many ${what}; try again in ${retryAfter} s` }, { "retry-after": String(retryAfter) });

const ROUTES = { "/session": ["POST"], "/chat": ["GET", "POST"], "/approve": ["POST"], "/cancel": ["POST"], "/history": ["GET"], "/api/chat": ["POST"] };
/** `/api/chat/{id}/stream` (the AI SDK's resume route) names its chat in the path. */
const RESUME = /^\/api\/chat\/([0-9a-f]{32})\/stream$/;

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === "/") {
      if (request.method !== "GET" && request.method !== "HEAD") return json(405, { error: "use GET" }, { allow: "GET, HEAD" });
      return new Response(PAGE, { headers: { "content-type": "text/html; charset=utf-8" } });
    }
    const path = url.pathname;
    const resumed = RESUME.exec(path);
    const allowed = resumed ? ["GET"] : ROUTES[path];
    if (!allowed) return json(404, { error: "not found" });
    if (!allowed.includes(request.method)) return json(405, { error: `use ${allowed.join(" or ")}` }, { allow: allowed.join(", ") });
    if (!env.SESSION_SECRET || env.SESSION_SECRET.length < 32) {
      return json(500, { error: "the Worker is not configured: set the secret SESSION_SECRET (32 or more characters)" });
    }
    const who = await authorize(request, env);
    if (!who) return json(401, { error: "sign in first" });
    // Hourly limits count per signed-in client (else per address), but not on a loopback host
    // (`wrangler dev`): local development is never locked out. The per-session caps still apply.
    const limitKey = who.client ?? `ip:${request.headers.get("cf-connecting-ip") ?? "unknown"}`;
    const local = ["localhost", "127.0.0.1", "[::1]"].includes(url.hostname);
    const take = async (kind, cap) => (local ? { ok: true } : limits(env, limitKey).take(kind, sessionLimit(env, cap)));

    if (path === "/session") {
      const taken = await take("session", "MAX_SESSIONS_PER_CLIENT_PER_HOUR");
      if (!taken.ok) return tooMany("new sessions", taken.retryAfter);
      const session = newSessionId();
      const created = await env.SESSIONS.get(env.SESSIONS.idFromName(session)).fetch(new Request(url, { method: "POST" }));
      if (created.status !== 201) return created;
      return json(201, { session, token: await issueToken(env.SESSION_SECRET, session, who.client) });
    }

    const session = await verifyToken(env.SESSION_SECRET, request, who.client);
    if (!session) return json(401, { error: "a valid session token is required: Authorization: Bearer <token from POST /session>" });
    const stub = env.SESSIONS.get(env.SESSIONS.idFromName(session));
    const toSession = (route, method, body) =>
      stub.fetch(new Request(new URL(route, url), {
        method,
        headers: { "content-type": "application/json", "last-event-id": request.headers.get("last-event-id") ?? "" },
        body: body === undefined ? undefined : JSON.stringify(body),
      }));
    if (resumed) return resumed[1] === session ? toSession("/api/chat/stream", "GET") : json(403, { error: "the token is for another chat" });
    const max = sessionLimit(env, "MAX_MESSAGE_BYTES");
    /** A user message of at most MAX_MESSAGE_BYTES, counted against the client's hourly turns: an error response, or null. */
    const refuseMessage = async (text) => {
      if (encoder.encode(text).byteLength > max) return json(413, { error: `a message is at most ${max} bytes`, limit: max });
      const taken = await take("turn", "MAX_TURNS_PER_CLIENT_PER_HOUR");
      return taken.ok ? null : tooMany("turns", taken.retryAfter);
    };
    if (path === "/api/chat") {
      // `useChat` sends the whole conversation each time; the session keeps its own, so only the
      // last message is read (a user message starts a turn, an assistant one answers approvals).
      const { body, error } = await readJsonBody(request, sessionLimit(env, "MAX_SESSION_BYTES") + max, "{id, messages}");
      if (error) return error;
      if (body.id !== session) return json(403, { error: "the chat id must be the session the token names (useChat({id: session}))" });
      if (body.trigger !== undefined && body.trigger !== "submit-message") return json(400, { error: `trigger \`${body.trigger}\` is not supported: send a new message` });
      const last = Array.isArray(body.messages) ? body.messages.at(-1) : undefined;
      if (!last || typeof last !== "object" || !Array.isArray(last.parts)) return json(400, { error: "`messages` must end with a UI message {role, parts}" });
      if (last.role === "user") {
        const text = uiText(last);
        if (!text) return json(400, { error: "the last message has no text" });
        const refused = await refuseMessage(text);
        if (refused) return refused;
      }
      return toSession("/api/chat", "POST", { messages: [last] });
    }
    if (path === "/approve") {
      const { body, error } = await readJsonBody(request, 64 << 10, "{requestId, response, feedback?}");
      if (error) return error;
      const { requestId, response, feedback } = body;
      if (typeof requestId !== "string" || !["approve", "approve_for_session", "reject"].includes(response)) {
        return json(400, { error: '`requestId` must be a string and `response` one of "approve", "approve_for_session", "reject"' });
      }
      if (feedback !== undefined && typeof feedback !== "string") return json(400, { error: "`feedback` must be a string" });
      return toSession("/approve", "POST", { requestId, response, feedback });
    }
    if (path === "/chat" && request.method === "POST") {
      const { body, error } = await readJsonBody(request, max + 1024, "{message}");
      if (error) return error;
      if (typeof body.message !== "string" || !body.message) return json(400, { error: "`message` must be a non-empty string" });
      return (await refuseMessage(body.message)) ?? toSession("/chat", "POST", { message: body.message });
    }
    return toSession(path, request.method);
  },
};

// A minimal client: starts a session, posts a message and reads the answer as the AI SDK's UI
// message stream (the chunks the package's core makes of the turn's messages: the page keeps no
// rules of its own about them). An approval is answered as useChat answers it (the next POST
// carries the answer and streams the rest); after a dropped connection it follows the resume
// route, which gives the turn's message again from its start.
const PAGE = `<!doctype html><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>kosong-wasm on Workers</title>
<style>body{font:15px system-ui;max-width:40rem;margin:2rem auto;padding:0 1rem}pre{white-space:pre-wrap;background:#f6f6f6;padding:.5rem}#err{color:#b00020}</style>
<h1>Agent chat on a Durable Object</h1>
<form id="f"><label for="m">Message</label> <input id="m" size="40" value="What time is it in Tokyo?"> <button>Send</button> <button id="stop" type="button">Stop</button></form>
<p id="err" role="alert"></p>
<pre id="out" aria-live="polite"></pre>
<script type="module">
const out = document.getElementById("out");
const err = document.getElementById("err");
async function token() {
  if (sessionStorage.token) return sessionStorage.token;
  const res = await fetch("/session", { method: "POST" });
  const body = await res.json();
  if (!res.ok) throw new Error(body.error);
  return (sessionStorage.token = body.token);
}
const auth = async () => ({ authorization: "Bearer " + (await token()) });
const session = async () => (await token()).split(".")[1];
let answer = null; // the assistant message being shown
const calls = new Map();
/** Draws a UI message stream's chunks (\`more\`: the rest of the message shown, else all of it). */
async function read(res, more) {
  if (!more || !answer) {
    answer?.remove();
    answer = document.createElement("div");
    out.append(answer);
    calls.clear();
  }
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return false;
    buf += value;
    let i;
    while ((i = buf.indexOf("\\n\\n")) >= 0) {
      const ev = buf.slice(0, i); buf = buf.slice(i + 2);
      // Fields as the SSE spec reads them: lines end at \\n only (U+2028 in an answer is text).
      const data = ev.split("\\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, "")).join("\\n");
      if (!data || data === "[DONE]") continue;
      const c = JSON.parse(data);
      const call = calls.get(c.toolCallId);
      if (c.type === "text-delta") answer.append(c.delta);
      else if (c.type === "tool-input-start") {
        const line = document.createElement("div");
        const args = document.createElement("code");
        line.append("[" + c.toolName + " ", args, "]");
        calls.set(c.toolCallId, { line, args, name: c.toolName });
        answer.append(line);
      } else if (c.type === "tool-input-delta" && call) call.args.textContent += c.inputTextDelta;
      else if (c.type === "tool-input-available" && call) call.args.textContent = JSON.stringify(c.input);
      else if (c.type === "tool-output-available" || c.type === "tool-output-error" || c.type === "tool-output-denied") {
        const res = document.createElement("div");
        res.className = c.type === "tool-output-available" ? "result" : "error";
        const output = typeof c.output === "string" ? c.output : JSON.stringify(c.output);
        res.textContent = "→ " + (c.type === "tool-output-available" ? output : c.type === "tool-output-denied" ? "refused" : c.errorText);
        (call ? call.line : answer).append(res);
      } else if (c.type === "tool-approval-request") {
        // The turn waits for this answer: what the tool would do, with the three answers as buttons.
        const box = document.createElement("div");
        box.className = "approval";
        box.id = "approval-" + c.approvalId;
        box.setAttribute("role", "group");
        box.setAttribute("aria-label", "Approval");
        box.append("⏸ " + (call ? call.name + "(" + call.args.textContent + ")" : "a tool") + " — approve? ");
        for (const [response, label] of [["approve", "Approve"], ["reject", "Reject"]]) {
          const b = document.createElement("button");
          b.type = "button";
          b.textContent = label;
          b.dataset.response = response;
          b.onclick = async () => {
            for (const x of box.querySelectorAll("button")) x.disabled = true;
            // As useChat answers: the tool part with its approval answered, in the next POST.
            const part = { type: "tool-" + (call ? call.name : "tool"), toolCallId: c.toolCallId, state: "approval-responded", approval: { id: c.approvalId, approved: response === "approve" } };
            const messages = [{ id: crypto.randomUUID(), role: "assistant", parts: [part] }];
            const r = await fetch("/api/chat", { method: "POST", headers: { "content-type": "application/json", ...(await auth()) }, body: JSON.stringify({ id: await session(), messages }) });
            if (!r.ok) return box.append(" (" + (await r.json()).error + ")");
            follow(r, true);
          };
          box.append(b, " ");
        }
        (call ? call.line : answer).append(box);
      } else if (c.type === "tool-approval-response") {
        const box = document.getElementById("approval-" + c.approvalId);
        if (box) box.replaceChildren("✓ " + (c.approved ? "approved" : "refused"));
      } else if (c.type === "finish" && c.finishReason !== "tool-calls") { answer.append("\\n(done)\\n"); return true; }
      else if (c.type === "abort") { answer.append("\\n(cancelled)\\n"); return true; }
      else if (c.type === "error") { answer.append("\\n(failed: " + c.errorText + ")\\n"); return true; }
    }
  }
}
/** Follows the turn; a dropped connection resumes on useChat's resume route (204: no turn runs). */
async function follow(res, more = false) {
  for (let attempt = 0; attempt < 5 && res.status === 200; attempt++) {
    try { await read(res, more); return; } catch {}
    res = await fetch("/api/chat/" + (await session()) + "/stream", { headers: await auth() });
    more = false;
  }
}
document.getElementById("f").onsubmit = async (e) => {
  e.preventDefault();
  err.textContent = "";
  const text = document.getElementById("m").value;
  try {
    const messages = [{ id: crypto.randomUUID(), role: "user", parts: [{ type: "text", text }] }];
    const res = await fetch("/api/chat", { method: "POST", headers: { "content-type": "application/json", ...(await auth()) }, body: JSON.stringify({ id: await session(), messages }) });
    if (res.status === 401 || res.status === 404) { delete sessionStorage.token; }
    if (!res.ok) { err.textContent = (await res.json()).error; return; }
    answer = null;
    out.append("\\n> " + text + "\\n");
    follow(res);
  } catch (e) { err.textContent = e.message; }
};
document.getElementById("stop").onclick = async () => fetch("/cancel", { method: "POST", headers: await auth() });
</script>`;
