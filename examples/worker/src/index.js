// An agent chat on Cloudflare Workers, in the shape of Cloudflare's Agents SDK but on
// kosong-wasm: each chat session is a Durable Object that keeps the session's Context
// (kimi-cli `context.jsonl` lines, in its storage) and runs the agent turn itself, so a
// conversation continues on whichever isolate serves the next request.
//
//   POST /chat    {session, message}  starts a turn; the response streams the turn's wire
//                                      messages as Server-Sent Events, each with an `id:`
//   GET  /chat?session=…  (header Last-Event-ID: n)
//                                      resumes: the messages after n, then the live rest
//   POST /cancel  {session}            stops the running turn (the page's Stop)
//   GET  /                             a small page that chats through all of the above
//
// Turns keep running while no client listens: every message is recorded, and the recording
// is what a reconnecting client is served from.
import { DurableObject } from "cloudflare:workers";
import * as kosong from "kosong-wasm";

const SYSTEM_PROMPT = "You are a helpful assistant running on Cloudflare Workers. Use the tools when they help.";

function makeProvider(env) {
  const opts = { model: env.LLM_MODEL ?? "gpt-4.1-mini", baseUrl: env.LLM_BASE_URL || undefined, apiKey: env.LLM_API_KEY || undefined };
  switch (env.LLM_KIND ?? "openai") {
    case "anthropic":
      return new kosong.AnthropicProvider(opts);
    case "openai_responses":
      return new kosong.OpenAIResponsesProvider(opts);
    case "gemini":
      return new kosong.GeminiProvider(opts);
    case "kimi":
      return new kosong.KimiProvider(opts);
    default:
      return new kosong.OpenAIChatProvider(opts);
  }
}

const tools = () =>
  new kosong.SimpleToolset([
    {
      name: "clock",
      description: "The current time in an IANA time zone.",
      parameters: { type: "object", properties: { timezone: { type: "string" } }, required: ["timezone"] },
      handler: ({ timezone }) => `${timezone}: ${new Date().toLocaleTimeString("en-GB", { timeZone: timezone })}`,
    },
    {
      name: "add",
      description: "Adds numbers.",
      parameters: { type: "object", properties: { numbers: { type: "array", items: { type: "number" } } }, required: ["numbers"] },
      handler: ({ numbers }) => String(numbers.reduce((a, b) => a + b, 0)),
    },
  ]);

const json = (status, body) => new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
const encoder = new TextEncoder();

export class ChatSession extends DurableObject {
  /**
   * The recorded events of the latest turn: `{id, event, data}`. Each is also written to
   * storage (`e:<id>`), so a client can still resume after this object was evicted and
   * started again; `null` until loaded.
   */
  events = null;
  /** Stream controllers of the clients listening to the running turn. */
  listeners = new Set();
  running = null;
  controller = null;

  async fetch(request) {
    const url = new URL(request.url);
    if (url.pathname === "/chat" && request.method === "POST") {
      const { message } = await request.json().catch(() => ({}));
      if (typeof message !== "string" || !message) return json(400, { error: "`message` must be a non-empty string" });
      if (this.running) return json(409, { error: "a turn is already running in this session; resume it with GET /chat" });
      const first = await this.startTurn(message);
      return this.stream(first - 1);
    }
    if (url.pathname === "/chat" && request.method === "GET") {
      const last = Number(request.headers.get("last-event-id") ?? url.searchParams.get("lastEventId") ?? 0);
      await this.loadEvents();
      return this.stream(Number.isFinite(last) ? last : 0);
    }
    if (url.pathname === "/cancel" && request.method === "POST") {
      if (!this.running) return json(200, { cancelled: false });
      this.controller.abort(new Error("cancelled by the client"));
      await this.running;
      return json(200, { cancelled: true });
    }
    if (url.pathname === "/history") {
      const ctx = await this.loadContext();
      return json(200, { history: ctx.history, tokenCount: ctx.tokenCount });
    }
    return json(404, { error: "not found" });
  }

  /** The session's context from storage; every new line is appended to storage as it is written. */
  async loadContext() {
    let text = (await this.ctx.storage.get("context.jsonl")) ?? "";
    const save = () => this.ctx.storage.put("context.jsonl", text);
    const sink = (line) => {
      text += `${line}\n`;
      save();
    };
    const onRewrite = (whole) => {
      text = whole;
      save();
    };
    return text ? kosong.Context.fromJSONL(text, { sink, onRewrite }) : new kosong.Context({ systemPrompt: SYSTEM_PROMPT, sink, onRewrite });
  }

  /** The latest turn's recording, from storage when this object has just started. */
  async loadEvents() {
    if (this.events) return;
    const stored = await this.ctx.storage.list({ prefix: "e:" });
    this.events = [...stored.values()];
  }

  /** Starts a turn; resolves with the id of its first event once it is under way. */
  async startTurn(message) {
    let nextId = ((await this.ctx.storage.get("nextEventId")) ?? 0) + 1;
    const firstId = nextId;
    // The previous turn's recording makes way for this one's.
    const old = await this.ctx.storage.list({ prefix: "e:" });
    for (let keys = [...old.keys()]; keys.length; keys = keys.slice(128)) await this.ctx.storage.delete(keys.slice(0, 128));
    this.events = [];
    const publish = (event, data) => {
      const e = { id: nextId++, event, data: JSON.stringify(data) };
      this.events.push(e);
      this.ctx.storage.put(`e:${String(e.id).padStart(12, "0")}`, e);
      this.ctx.storage.put("nextEventId", e.id);
      const bytes = encoder.encode(frame(e));
      for (const c of this.listeners) {
        try {
          c.enqueue(bytes);
        } catch {
          this.listeners.delete(c); // that client went away; the turn goes on
        }
      }
    };
    const context = await this.loadContext();
    const agent = new kosong.Agent({ name: "worker", provider: makeProvider(this.env), systemPrompt: SYSTEM_PROMPT, toolset: tools(), context });
    this.controller = new AbortController();
    const signal = this.controller.signal;
    const ui = async (wire) => {
      for await (const m of wire.uiSide({ merge: true })) publish("wire", m);
    };
    this.running = (async () => {
      let end;
      try {
        await kosong.runSoul(agent, message, ui, signal);
        end = { outcome: "done" };
      } catch (e) {
        end = e instanceof kosong.RunCancelled ? { outcome: "cancelled" } : { outcome: "failed", error: `${e?.name}: ${e?.message}` };
      }
      publish("end", end);
      for (const c of this.listeners) {
        try {
          c.close();
        } catch {}
      }
      this.listeners.clear();
      this.running = null;
      this.controller = null;
    })();
    // The turn outlives the request that started it.
    this.ctx.waitUntil(this.running);
    return firstId;
  }

  /** The latest turn's events after `lastId`, then (while it runs) the live rest. */
  stream(lastId) {
    let self;
    const body = new ReadableStream({
      start: (controller) => {
        self = controller;
        for (const e of this.events ?? []) if (e.id > lastId) controller.enqueue(encoder.encode(frame(e)));
        if (this.running) this.listeners.add(controller);
        else controller.close();
      },
      cancel: () => {
        this.listeners.delete(self);
      },
    });
    return new Response(body, { headers: { "content-type": "text/event-stream", "cache-control": "no-cache" } });
  }
}

const frame = (e) => `id: ${e.id}\nevent: ${e.event}\ndata: ${e.data}\n\n`;

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === "/" && request.method === "GET") return new Response(PAGE, { headers: { "content-type": "text/html; charset=utf-8" } });
    if (url.pathname !== "/chat" && url.pathname !== "/cancel" && url.pathname !== "/history") return json(404, { error: "not found" });
    let session = url.searchParams.get("session");
    let forward = request;
    if (request.method === "POST") {
      const body = await request.text();
      try {
        session ??= JSON.parse(body).session;
      } catch {
        return json(400, { error: "the body must be JSON: {session, message}" });
      }
      forward = new Request(request.url, { method: "POST", headers: request.headers, body });
    }
    if (typeof session !== "string" || !/^[\w-]{1,64}$/.test(session)) return json(400, { error: "`session` must be 1-64 letters, digits, - or _" });
    return env.SESSIONS.get(env.SESSIONS.idFromName(session)).fetch(forward);
  },
};

// A minimal client: posts a message, reads the stream, and on a dropped connection resumes
// with Last-Event-ID.
const PAGE = `<!doctype html><meta charset="utf-8"><title>kosong-wasm on Workers</title>
<style>body{font:15px system-ui;max-width:40rem;margin:2rem auto}pre{white-space:pre-wrap;background:#f6f6f6;padding:.5rem}</style>
<h1>Agent chat on a Durable Object</h1>
<form id="f"><input id="m" size="40" value="What time is it in Tokyo?"> <button>Send</button> <button id="stop" type="button">Stop</button></form>
<pre id="out"></pre>
<script type="module">
const session = sessionStorage.session ??= crypto.randomUUID();
const out = document.getElementById("out");
let lastId = 0;
async function read(res) {
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    let i;
    while ((i = buf.indexOf("\\n\\n")) >= 0) {
      const ev = buf.slice(0, i); buf = buf.slice(i + 2);
      const id = /^id: (.*)$/m.exec(ev)?.[1]; const data = /^data: (.*)$/m.exec(ev)?.[1];
      if (id) lastId = Number(id);
      if (!data) continue;
      const m = JSON.parse(data);
      if (m.type === "ContentPart" && m.payload.type === "text") out.textContent += m.payload.text;
      else if (m.type === "ToolCall") out.textContent += "\\n[" + m.payload.function.name + " " + (m.payload.function.arguments ?? "") + "]\\n";
      else if (m.outcome) out.textContent += "\\n(" + m.outcome + ")\\n";
    }
  }
}
async function follow(res) {
  for (let attempt = 0; attempt < 5; attempt++) {
    try { await read(res); return; } catch { res = await fetch("/chat?session=" + session, { headers: { "last-event-id": String(lastId) } }); }
  }
}
document.getElementById("f").onsubmit = async (e) => {
  e.preventDefault();
  out.textContent += "\\n> " + document.getElementById("m").value + "\\n";
  follow(await fetch("/chat", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ session, message: document.getElementById("m").value }) }));
};
document.getElementById("stop").onclick = () => fetch("/cancel", { method: "POST", body: JSON.stringify({ session }) });
</script>`;
