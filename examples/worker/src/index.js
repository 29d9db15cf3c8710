// An agent chat on Cloudflare Workers, in the shape of Cloudflare's Agents SDK but on
// kosong-wasm: each chat session is a Durable Object that keeps the session's Context
// (kimi-cli `context.jsonl` lines in its SQLite storage, a long one across rows) and runs the agent turn
// itself, so a conversation continues on whichever isolate serves the next request.
//
//   POST /session                      a new session: 201 {session, token}; the id is
//                                      random (128 bits), the token an HMAC-SHA-256 over it
//   POST /chat    {message}            starts a turn; the response streams the turn's wire
//                                      messages as Server-Sent Events, each with an `id:`
//   GET  /chat    (Last-Event-ID: n)   resumes: the messages after n, then the live rest
//   POST /approve {requestId, response, feedback?}
//                                      answers a tool's approval request ("approve",
//                                      "approve_for_session" or "reject")
//   POST /cancel                       stops the running turn (the page's Stop)
//   GET  /history                      the session's messages and token count
//   GET  /                             a small page that chats through all of the above
//
// The same sessions speak the AI SDK's UI message stream, so a page built on `useChat` talks to
// them unchanged (`useChat({id: session, transport: new DefaultChatTransport({headers:
// {authorization: "Bearer " + token}})})`; `api` defaults to `/api/chat`):
//
//   POST /api/chat {id, messages, trigger}
//                                      the chat `id` is the session: its last user message
//                                      starts a turn, streamed as UI message chunks; while a
//                                      turn waits for an approval, the stream finishes there,
//                                      and the next POST carries the answer (a tool part in
//                                      state `approval-responded`) and streams the rest
//   GET  /api/chat/{id}/stream         resumes: the running turn's message from its start
//                                      (204 when no turn runs)
//
// Every route but `/` and `POST /session` takes `Authorization: Bearer <token>`. Turns keep
// running while no client listens: every message is recorded before it is sent, and the
// recording is what a reconnecting client is served from. A turn whose isolate died is closed
// on the session's next request (its unfinished tool calls answered as aborted, `TurnEnd`
// recorded, outcome `interrupted`).
import { DurableObject } from "cloudflare:workers";
import * as kosong from "kosong-wasm";

const SYSTEM_PROMPT = "You are a helpful assistant running on Cloudflare Workers. Use the tools when they help.";

/** Caps, in bytes of UTF-8 unless said otherwise; each can be set as a var of the same name. */
const DEFAULT_LIMITS = {
  MAX_MESSAGE_BYTES: 1 << 20, // one user message
  MAX_SESSION_BYTES: 16 << 20, // a session's whole context
  MAX_TURNS_PER_SESSION: 200,
  MAX_TURNS_PER_CLIENT_PER_HOUR: 120,
  MAX_SESSIONS_PER_CLIENT_PER_HOUR: 30,
};
const limit = (env, name) => {
  const v = Number(env[name]);
  return Number.isFinite(v) && v > 0 ? v : DEFAULT_LIMITS[name];
};
/** Text reaches clients at least this often while the model writes (merged in between). */
const FLUSH_MS = 50;

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
    {
      name: "send_email",
      description: "Sends an email (the user approves each one first).",
      parameters: { type: "object", properties: { to: { type: "string" }, subject: { type: "string" } }, required: ["to", "subject"] },
      handler: async ({ to, subject }, ctx) => {
        if (!(await ctx.requestApproval({ action: "send email", description: `Send "${subject}" to ${to}` }))) return ctx.rejection();
        return `sent to ${to}`;
      },
    },
  ]);

const json = (status, body, headers = {}) =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } });
const encoder = new TextEncoder();
const frame = (e) => `id: ${e.id}\nevent: ${e.event}\ndata: ${e.data}\n\n`;

/** Reads a request body of at most `max` bytes, or returns null past it (however it was sent). */
async function readCapped(request, max) {
  const declared = Number(request.headers.get("content-length"));
  if (Number.isFinite(declared) && declared > max) return null;
  if (!request.body) return "";
  const reader = request.body.getReader();
  const chunks = [];
  let size = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await reader.cancel();
      return null;
    }
    chunks.push(value);
  }
  const all = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) all.set(c, (at += c.byteLength) - c.byteLength);
  return new TextDecoder().decode(all);
}

/**
 * A SQLite row holds at most 2 MB: a value longer than this many UTF-16 units (at most 3 bytes of
 * UTF-8 each, so under 2 MB) is stored across rows — its first piece in its own row, the rest in
 * a table of pieces — and joined again when read. No piece ends between the two halves of a
 * surrogate pair (each half alone would be stored as U+FFFD).
 */
const PIECE = 600_000;
function piecesOf(s) {
  const out = [];
  for (let i = 0; i < s.length; ) {
    let end = Math.min(i + PIECE, s.length);
    const last = s.charCodeAt(end - 1);
    if (end < s.length && last >= 0xd800 && last < 0xdc00) end--;
    out.push(s.slice(i, end));
    i = end;
  }
  return out.length ? out : [""];
}
/** `rows` ({key, value}) with their further pieces (`more`: {key, n, value}, ordered) joined on. */
function joinPieces(rows, more) {
  const rest = new Map();
  for (const m of more) {
    const list = rest.get(m.key) ?? [];
    list.push(m.value);
    rest.set(m.key, list);
  }
  return rows.map((r) => (rest.has(r.key) ? { ...r, value: r.value + rest.get(r.key).join("") } : r));
}

/** What a UI message stream ends with, from the turn's `end` event. */
const outcomeOf = (end) =>
  end.outcome === "done" ? {} : end.outcome === "cancelled" ? { cancelled: true } : { error: end.error ?? `the turn was ${end.outcome}` };
/** The text of a UI message (`useChat`'s `{role, parts}`): its text parts, joined. */
const uiText = (m) => (Array.isArray(m?.parts) ? m.parts.filter((p) => p?.type === "text" && typeof p.text === "string").map((p) => p.text).join("") : "");

export class ChatSession extends DurableObject {
  /** The clients listening to the running turn: each is called with every event published. */
  listeners = new Set();
  /** The running turn's wire, and the approval requests it waits on (their ids). */
  wire = null;
  pending = new Set();
  running = null;
  controller = null;
  /** The last event id, once read from storage (see `lastEventId`). */
  lastId = null;

  constructor(ctx, env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec(`CREATE TABLE IF NOT EXISTS context (seq INTEGER PRIMARY KEY, line TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS context_pieces (seq INTEGER NOT NULL, n INTEGER NOT NULL, line TEXT NOT NULL, PRIMARY KEY (seq, n));
      CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY, event TEXT NOT NULL, data TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS event_pieces (id INTEGER NOT NULL, n INTEGER NOT NULL, data TEXT NOT NULL, PRIMARY KEY (id, n));
      CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)`);
  }

  meta(key) {
    const row = this.sql.exec("SELECT value FROM meta WHERE key = ?", key).toArray()[0];
    return row ? JSON.parse(row.value) : undefined;
  }
  setMeta(key, value) {
    this.sql.exec("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value", key, JSON.stringify(value));
  }

  async fetch(request) {
    const url = new URL(request.url);
    const route = `${request.method} ${url.pathname}`;
    if (route === "POST /session") {
      if (this.meta("created")) return json(409, { error: "the session exists already" });
      this.setMeta("created", Date.now());
      return json(201, {});
    }
    if (!this.meta("created")) return json(404, { error: "no such session" });
    this.closeInterruptedTurn();
    switch (route) {
      case "POST /chat": {
        const { message } = await request.json();
        if (this.running) return json(409, { error: "a turn is already running in this session; resume it with GET /chat" });
        const refused = this.refuseTurn(message);
        if (refused) return refused;
        const first = this.startTurn(message);
        return this.stream(first - 1);
      }
      case "GET /chat": {
        const last = Number(request.headers.get("last-event-id") ?? url.searchParams.get("lastEventId") ?? 0);
        return this.stream(Number.isFinite(last) ? last : 0);
      }
      case "POST /api/chat": {
        const { messages } = await request.json();
        const last = messages.at(-1);
        if (this.running) {
          // The answers to the approvals the turn waits on, in the tool parts of the last message.
          const answers = (last?.parts ?? []).filter((p) => p?.state === "approval-responded" && this.pending.has(p.approval?.id));
          if (!answers.length) return json(409, { error: "a turn is already running in this session; resume it with GET /api/chat/{id}/stream" });
          const after = this.lastEventId();
          for (const p of answers) this.wire.respond(p.approval.id, p.approval.approved ? "approve" : "reject", p.approval.reason ?? "");
          return this.uiStream(after);
        }
        const message = uiText(last);
        if (last?.role !== "user" || !message) return json(400, { error: "the last message must be the user's, with text" });
        const refused = this.refuseTurn(message);
        if (refused) return refused;
        const first = this.startTurn(message);
        return this.uiStream(first - 1);
      }
      case "GET /api/chat/stream": {
        if (!this.running) return new Response(null, { status: 204 });
        return this.uiStream(this.meta("turn").firstId - 1);
      }
      case "POST /approve": {
        const { requestId, response, feedback = "" } = await request.json();
        if (!this.running || !this.pending.has(requestId)) return json(404, { error: "no approval request of that id is waiting" });
        try {
          this.wire.respond(requestId, response, feedback);
        } catch (e) {
          return json(400, { error: e.message });
        }
        return json(200, { answered: true });
      }
      case "POST /cancel": {
        if (!this.running) return json(200, { cancelled: false });
        this.controller.abort(new Error("cancelled by the client"));
        await this.running;
        return json(200, { cancelled: true });
      }
      case "GET /history": {
        const ctx = this.loadContext();
        return json(200, { history: ctx.history, tokenCount: ctx.tokenCount });
      }
    }
    return json(404, { error: "not found" });
  }

  /** Why a new turn on `message` is refused (a response), or null; counts the turn when it is not. */
  refuseTurn(message) {
    const turns = this.meta("turns") ?? 0;
    if (turns >= limit(this.env, "MAX_TURNS_PER_SESSION")) return json(429, { error: `this session has had its ${turns} turns; start a new one` });
    const size = this.contextBytes() + encoder.encode(message).byteLength;
    const max = limit(this.env, "MAX_SESSION_BYTES");
    if (size > max) return json(413, { error: `the session would exceed ${max} bytes; start a new one`, limit: max });
    this.setMeta("turns", turns + 1);
    return null;
  }

  contextBytes() {
    const bytes = (table) => this.sql.exec(`SELECT COALESCE(SUM(LENGTH(CAST(line AS BLOB))), 0) AS n FROM ${table}`).one().n;
    return bytes("context") + bytes("context_pieces");
  }

  /**
   * Stores one context line (across rows when it is longer than a row holds), in one transaction.
   * A line that would take the session past MAX_SESSION_BYTES is refused like a failed write.
   */
  insertLine(line, budget) {
    if (budget) {
      budget.used += encoder.encode(line).byteLength;
      if (budget.used > budget.max) throw new Error(`the session would exceed ${budget.max} bytes (MAX_SESSION_BYTES)`);
    }
    const [first, ...rest] = piecesOf(line);
    this.ctx.storage.transactionSync(() => {
      const seq = this.sql.exec("INSERT INTO context (line) VALUES (?) RETURNING seq", first).one().seq;
      rest.forEach((piece, n) => this.sql.exec("INSERT INTO context_pieces (seq, n, line) VALUES (?, ?, ?)", seq, n + 1, piece));
    });
  }

  /**
   * The session's context from its rows; every new line is stored before the turn goes on.
   * `onStoreError` hears a write that failed (the turn then stops and is taken back).
   */
  loadContext(onStoreError) {
    const rows = this.sql.exec("SELECT seq AS key, line AS value FROM context ORDER BY seq").toArray();
    const more = this.sql.exec("SELECT seq AS key, n, line AS value FROM context_pieces ORDER BY seq, n").toArray();
    const lines = joinPieces(rows, more).map((r) => r.value);
    const guarded = (write) => (arg) => {
      try {
        write(arg);
      } catch (e) {
        onStoreError?.(e);
        throw e;
      }
    };
    const budget = { used: this.contextBytes(), max: limit(this.env, "MAX_SESSION_BYTES") };
    const sink = guarded((line) => this.insertLine(line, budget));
    const onRewrite = guarded((whole) => {
      this.ctx.storage.transactionSync(() => {
        this.sql.exec("DELETE FROM context");
        this.sql.exec("DELETE FROM context_pieces");
        for (const line of whole.split("\n")) if (line) this.insertLine(line);
      });
    });
    return lines.length ? kosong.Context.fromJSONL(lines.join("\n"), { sink, onRewrite }) : new kosong.Context({ systemPrompt: SYSTEM_PROMPT, sink, onRewrite });
  }

  /** The id of the last event recorded (kept in storage across turns; read from it once). */
  lastEventId() {
    return (this.lastId ??= this.meta("lastEventId") ?? 0);
  }

  /** Records an event (the row is written before anyone is sent it), then sends it to the listeners. */
  publish(event, data) {
    const id = this.lastEventId() + 1;
    const e = { id, event, data: JSON.stringify(data) };
    const [first, ...rest] = piecesOf(e.data);
    this.ctx.storage.transactionSync(() => {
      this.sql.exec("INSERT INTO events (id, event, data) VALUES (?, ?, ?)", e.id, e.event, first);
      rest.forEach((piece, n) => this.sql.exec("INSERT INTO event_pieces (id, n, data) VALUES (?, ?, ?)", e.id, n + 1, piece));
      this.setMeta("lastEventId", id);
    });
    this.lastId = id;
    this.tell(e);
    return id;
  }

  /** Hands an event to every listener (one whose client went away leaves; the turn goes on). */
  tell(e) {
    for (const l of this.listeners) {
      try {
        l.event(e);
      } catch {
        this.listeners.delete(l);
      }
    }
  }

  closeListeners() {
    for (const l of this.listeners) {
      try {
        l.close();
      } catch {}
    }
    this.listeners.clear();
  }

  /**
   * A turn the storage says is running while this object runs none: its isolate died. It is
   * closed as the package closes a cancelled turn (`closeInterruptedTurn`: every call without a
   * result gets an aborted one, then `TurnEnd`), then the end event (outcome `interrupted`).
   */
  closeInterruptedTurn() {
    const turn = this.meta("turn");
    if (!turn?.running || this.running) return;
    const recorded = this.recorded(turn.firstId - 1).filter((r) => r.event === "wire").map((r) => JSON.parse(r.data));
    for (const m of kosong.closeInterruptedTurn(recorded)) this.publish("wire", m);
    this.publish("end", { outcome: "interrupted" });
    this.setMeta("turn", { running: false, firstId: turn.firstId });
  }

  /** The recorded events after `lastId`, each joined from its rows. */
  recorded(lastId) {
    const rows = this.sql.exec("SELECT id AS key, event, data AS value FROM events WHERE id > ? ORDER BY id", lastId).toArray();
    const more = this.sql.exec("SELECT id AS key, n, data AS value FROM event_pieces WHERE id > ? ORDER BY id, n", lastId).toArray();
    return joinPieces(rows, more).map((r) => ({ id: r.key, event: r.event, data: r.value }));
  }

  /** Starts a turn; returns the id of its first event. */
  startTurn(message) {
    // The previous turn's recording makes way for this one's.
    this.sql.exec("DELETE FROM events");
    this.sql.exec("DELETE FROM event_pieces");
    const firstId = this.lastEventId() + 1;
    this.setMeta("turn", { running: true, firstId, messageId: `msg-${crypto.randomUUID()}` });
    let storageError = null;
    this.controller = new AbortController();
    const signal = this.controller.signal;
    // A context write that fails (for any reason) stops the turn (the core stops at a refused
    // write) and is reported and taken back like a failed event write.
    const context = this.loadContext((e) => {
      storageError ??= e;
    });
    const rows = this.sql.exec("SELECT COALESCE(MAX(seq), 0) AS n FROM context").one().n;
    const agent = new kosong.Agent({ name: "worker", provider: makeProvider(this.env), systemPrompt: SYSTEM_PROMPT, toolset: tools(), context });
    const send = (event, data) => {
      if (data?.type === "ApprovalRequest") this.pending.add(data.payload.id);
      if (data?.type === "ApprovalResponse") this.pending.delete(data.payload.request_id);
      try {
        this.publish(event, data);
      } catch (e) {
        // Nothing more can be recorded: the turn stops, and ends below with this error.
        storageError ??= e;
        this.controller.abort(e);
      }
    };
    // The merged side joins text, thinking and a call's argument fragments; flushing the wire
    // every FLUSH_MS hands clients what the model wrote so far without an event per token.
    const ui = async (wire) => {
      this.wire = wire;
      const timer = setInterval(() => wire.flush(), FLUSH_MS);
      try {
        for await (const m of wire.uiSide({ merge: true })) send("wire", m);
      } finally {
        clearInterval(timer);
      }
    };
    this.running = (async () => {
      let end;
      try {
        await kosong.runSoul(agent, message, ui, signal);
        end = storageError ? null : { outcome: "done" };
      } catch (e) {
        if (!storageError) end = e instanceof kosong.RunCancelled ? { outcome: "cancelled" } : { outcome: "failed", error: `${e?.name}: ${e?.message}` };
      }
      if (storageError || !end) {
        // What this turn wrote to the context is taken back: the history is as before it.
        this.ctx.storage.transactionSync(() => {
          this.sql.exec("DELETE FROM context WHERE seq > ?", rows);
          this.sql.exec("DELETE FROM context_pieces WHERE seq > ?", rows);
        });
        end = { outcome: "failed", error: `storage: ${storageError?.message ?? "a write failed"}` };
      }
      try {
        this.publish("end", end);
      } catch {
        // Even the end could not be stored: the listeners still hear it.
        this.tell({ id: this.lastEventId() + 1, event: "end", data: JSON.stringify(end) });
      }
      this.wire = null;
      this.pending.clear();
      this.setMeta("turn", { running: false, firstId });
      this.closeListeners();
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
        self = { event: (e) => controller.enqueue(encoder.encode(frame(e))), close: () => controller.close() };
        for (const e of this.recorded(lastId)) self.event(e);
        if (this.running) this.listeners.add(self);
        else controller.close();
      },
      cancel: () => {
        this.listeners.delete(self);
      },
    });
    return new Response(body, { headers: { "content-type": "text/event-stream", "cache-control": "no-cache" } });
  }

  /**
   * The running (or last) turn's assistant message as the AI SDK's UI message stream: every event
   * of the turn goes through one chunker (so block ids and open calls are the same on every
   * replay); what comes after `after` is sent, live while the turn runs. The stream finishes at
   * an approval request the turn waits on (the client answers in its next POST) or at the end.
   */
  uiStream(after) {
    const turn = this.meta("turn");
    const chunker = new kosong.UIMessageChunker({ messageId: turn?.messageId });
    let self;
    const body = new ReadableStream({
      start: (controller) => {
        let done = false;
        const send = (chunks) => {
          for (const c of chunks) controller.enqueue(encoder.encode(`data: ${JSON.stringify(c)}\n\n`));
        };
        const finish = (chunks) => {
          send(chunks);
          controller.enqueue(encoder.encode("data: [DONE]\n\n"));
          controller.close();
          done = true;
          this.listeners.delete(self);
        };
        self = {
          event: (e) => {
            if (done) return;
            const data = JSON.parse(e.data);
            if (e.event === "end") return finish(chunker.end(outcomeOf(data)));
            const chunks = chunker.push(data);
            if (e.id <= after) return; // already sent: it only moves the chunker on
            send(chunks);
            if (data.type === "ApprovalRequest" && this.pending.has(data.payload.id)) finish(chunker.end({ pause: true }));
          },
          close: () => {
            if (!done) finish([]);
          },
        };
        send(chunker.start());
        for (const e of this.recorded((turn?.firstId ?? 1) - 1)) self.event(e);
        if (done) return;
        if (this.running) this.listeners.add(self);
        else finish([]);
      },
      cancel: () => {
        this.listeners.delete(self);
      },
    });
    return new Response(body, { headers: kosong.UI_MESSAGE_STREAM_HEADERS });
  }
}

/** Counts a client's turns and new sessions over the last hour (one object per client). */
export class ClientLimits extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS uses (kind TEXT NOT NULL, at INTEGER NOT NULL)");
  }
  /** Takes one use of `kind` if fewer than `max` were taken in the last hour; else says when to retry (seconds). */
  take(kind, max) {
    const sql = this.ctx.storage.sql;
    const now = Date.now();
    sql.exec("DELETE FROM uses WHERE at <= ?", now - 3600_000);
    const rows = sql.exec("SELECT at FROM uses WHERE kind = ? ORDER BY at", kind).toArray();
    if (rows.length >= max) return { ok: false, retryAfter: Math.max(1, Math.ceil((rows[rows.length - max].at + 3600_000 - now) / 1000)) };
    sql.exec("INSERT INTO uses (kind, at) VALUES (?, ?)", kind, now);
    return { ok: true };
  }
}

// ---- who may do what ----------------------------------------------------------------------

/**
 * Who the client is: `{client}` (a stable id, or null for "anyone holding a session's token"),
 * or null to refuse the request (401). The default lets anyone start sessions and protects each
 * session by its token; with `AUTH = "cloudflare-access"` the Worker must sit behind Cloudflare
 * Access, the client is the signed-in user's email, and a token only works for the user it was
 * issued to. Replace this function to use your own sign-in.
 */
export async function authorize(request, env) {
  if (env.AUTH === "cloudflare-access") {
    // Cloudflare Access sets this header on requests it let through (and strips a client's own).
    const email = request.headers.get("cf-access-authenticated-user-email");
    return email ? { client: email.toLowerCase() } : null;
  }
  return { client: null };
}

const b64url = (bytes) => btoa(String.fromCharCode(...new Uint8Array(bytes))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
const unb64url = (s) => {
  try {
    return Uint8Array.from(atob(s.replace(/-/g, "+").replace(/_/g, "/")), (c) => c.charCodeAt(0));
  } catch {
    return null;
  }
};

async function hmacKey(env) {
  return crypto.subtle.importKey("raw", encoder.encode(env.SESSION_SECRET), { name: "HMAC", hash: "SHA-256" }, false, ["sign", "verify"]);
}
/** `v1.<session>.<HMAC-SHA-256(secret, "v1.<session>.<client>")>`: names the session, and binds it to the client. */
async function issueToken(env, session, client) {
  const sig = await crypto.subtle.sign("HMAC", await hmacKey(env), encoder.encode(`v1.${session}.${client ?? ""}`));
  return `v1.${session}.${b64url(sig)}`;
}
/** The session the request's token names, if the token is genuine and was issued to this client. */
async function verifyToken(env, request, client) {
  // The scheme is case-insensitive (RFC 9110): `bearer` and `BEARER` are `Bearer`.
  const m = /^Bearer +v1\.([0-9a-f]{32})\.([\w-]{43})$/i.exec(request.headers.get("authorization") ?? "");
  if (!m) return null;
  const sig = unb64url(m[2]);
  if (!sig) return null;
  // verify() compares in constant time.
  const ok = await crypto.subtle.verify("HMAC", await hmacKey(env), sig, encoder.encode(`v1.${m[1]}.${client ?? ""}`));
  return ok ? m[1] : null;
}

const limits = (env, key) => env.LIMITS.get(env.LIMITS.idFromName(key));
const tooMany = (what, retryAfter) => json(429, { error: `too many ${what}; try again in ${retryAfter} s` }, { "retry-after": String(retryAfter) });

const ROUTES = { "/session": ["POST"], "/chat": ["GET", "POST"], "/approve": ["POST"], "/cancel": ["POST"], "/history": ["GET"], "/api/chat": ["POST"] };
/** `/api/chat/{id}/stream` (the AI SDK's resume route) names its chat in the path. */
const RESUME = /^\/api\/chat\/([0-9a-f]{32})\/stream$/;

/** Reads a JSON object body of at most `max` bytes: `{body}`, or `{error}` (a response). */
async function jsonBody(request, max, what) {
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

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === "/") {
      if (request.method !== "GET" && request.method !== "HEAD") return json(405, { error: "use GET" }, { allow: "GET, HEAD" });
      return new Response(PAGE, { headers: { "content-type": "text/html; charset=utf-8" } });
    }
    const resumed = RESUME.exec(url.pathname);
    const path = url.pathname;
    const allowed = resumed ? ["GET"] : ROUTES[path];
    if (!allowed) return json(404, { error: "not found" });
    if (!allowed.includes(request.method)) return json(405, { error: `use ${allowed.join(" or ")}` }, { allow: allowed.join(", ") });
    if (!env.SESSION_SECRET || env.SESSION_SECRET.length < 32) {
      return json(500, { error: "the Worker is not configured: set the secret SESSION_SECRET (32 or more characters)" });
    }
    const who = await authorize(request, env);
    if (!who) return json(401, { error: "sign in first" });
    // Limits count per signed-in client, or per address for anonymous ones. Served on a loopback
    // host (`wrangler dev`, never a deployed Worker) the per-client hourly limits do not apply, so
    // local development is never locked out; the per-session caps still do.
    const limitKey = who.client ?? `ip:${request.headers.get("cf-connecting-ip") ?? "unknown"}`;
    const local = ["localhost", "127.0.0.1", "[::1]"].includes(url.hostname);

    if (url.pathname === "/session") {
      const taken = local ? { ok: true } : await limits(env, limitKey).take("session", limit(env, "MAX_SESSIONS_PER_CLIENT_PER_HOUR"));
      if (!taken.ok) return tooMany("new sessions", taken.retryAfter);
      const session = [...crypto.getRandomValues(new Uint8Array(16))].map((b) => b.toString(16).padStart(2, "0")).join("");
      const created = await env.SESSIONS.get(env.SESSIONS.idFromName(session)).fetch(new Request(url, { method: "POST" }));
      if (created.status !== 201) return created;
      return json(201, { session, token: await issueToken(env, session, who.client) });
    }

    const session = await verifyToken(env, request, who.client);
    if (!session) return json(401, { error: "a valid session token is required: Authorization: Bearer <token from POST /session>" });
    const stub = env.SESSIONS.get(env.SESSIONS.idFromName(session));
    const headers = new Headers({ "last-event-id": request.headers.get("last-event-id") ?? "" });
    const toSession = (route, method, body) =>
      stub.fetch(new Request(new URL(route, url), { method, headers: { "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) }));
    if (resumed) {
      if (resumed[1] !== session) return json(403, { error: "the token is for another chat" });
      return toSession("/api/chat/stream", "GET");
    }
    if (path === "/api/chat") {
      // `useChat` sends the whole conversation each time; the session keeps its own, so only the
      // last message is read (a user message starts a turn, an assistant one answers approvals).
      const max = limit(env, "MAX_MESSAGE_BYTES");
      const { body, error } = await jsonBody(request, limit(env, "MAX_SESSION_BYTES") + max, "{id, messages}");
      if (error) return error;
      if (body.id !== session) return json(403, { error: "the chat id must be the session the token names (useChat({id: session}))" });
      if (body.trigger !== undefined && body.trigger !== "submit-message") return json(400, { error: `trigger \`${body.trigger}\` is not supported: send a new message` });
      const last = Array.isArray(body.messages) ? body.messages.at(-1) : undefined;
      if (!last || typeof last !== "object" || !Array.isArray(last.parts)) return json(400, { error: "`messages` must end with a UI message {role, parts}" });
      if (last.role === "user") {
        const text = uiText(last);
        if (!text) return json(400, { error: "the last message has no text" });
        if (encoder.encode(text).byteLength > max) return json(413, { error: `a message is at most ${max} bytes`, limit: max });
        const taken = local ? { ok: true } : await limits(env, limitKey).take("turn", limit(env, "MAX_TURNS_PER_CLIENT_PER_HOUR"));
        if (!taken.ok) return tooMany("turns", taken.retryAfter);
      }
      return toSession("/api/chat", "POST", { messages: [last] });
    }
    if (path === "/approve") {
      const { body, error } = await jsonBody(request, 64 << 10, "{requestId, response, feedback?}");
      if (error) return error;
      const { requestId, response, feedback } = body;
      if (typeof requestId !== "string" || !["approve", "approve_for_session", "reject"].includes(response)) {
        return json(400, { error: '`requestId` must be a string and `response` one of "approve", "approve_for_session", "reject"' });
      }
      if (feedback !== undefined && typeof feedback !== "string") return json(400, { error: "`feedback` must be a string" });
      return toSession("/approve", "POST", { requestId, response, feedback });
    }
    if (url.pathname === "/chat" && request.method === "POST") {
      const max = limit(env, "MAX_MESSAGE_BYTES");
      const text = await readCapped(request, max + 1024);
      if (text === null) return json(413, { error: `the request body is over ${max + 1024} bytes`, limit: max + 1024 });
      let body;
      try {
        body = JSON.parse(text);
      } catch {
        return json(400, { error: "the body must be JSON: {message}" });
      }
      if (body === null || typeof body !== "object" || Array.isArray(body)) return json(400, { error: "the body must be a JSON object: {message}" });
      const { message } = body;
      if (typeof message !== "string" || !message) return json(400, { error: "`message` must be a non-empty string" });
      if (encoder.encode(message).byteLength > max) return json(413, { error: `a message is at most ${max} bytes`, limit: max });
      const taken = local ? { ok: true } : await limits(env, limitKey).take("turn", limit(env, "MAX_TURNS_PER_CLIENT_PER_HOUR"));
      if (!taken.ok) return tooMany("turns", taken.retryAfter);
      return stub.fetch(new Request(url, { method: "POST", headers, body: JSON.stringify({ message }) }));
    }
    return stub.fetch(new Request(url, { method: request.method, headers }));
  },
};

// A minimal client: starts a session, posts a message, reads the stream, and on a dropped
// connection resumes with Last-Event-ID.
const PAGE = `<!doctype html><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>kosong-wasm on Workers</title>
<style>body{font:15px system-ui;max-width:40rem;margin:2rem auto;padding:0 1rem}pre{white-space:pre-wrap;background:#f6f6f6;padding:.5rem}#err{color:#b00020}</style>
<h1>Agent chat on a Durable Object</h1>
<form id="f"><label for="m">Message</label> <input id="m" size="40" value="What time is it in Tokyo?"> <button>Send</button> <button id="stop" type="button">Stop</button></form>
<p id="err" role="alert"></p>
<pre id="out" aria-live="polite"></pre>
<script type="module">
const out = document.getElementById("out");
const err = document.getElementById("err");
let lastId = 0;
const calls = new Map();
let lastCall = null;
async function token() {
  if (sessionStorage.token) return sessionStorage.token;
  const res = await fetch("/session", { method: "POST" });
  const body = await res.json();
  if (!res.ok) throw new Error(body.error);
  return (sessionStorage.token = body.token);
}
const auth = async () => ({ authorization: "Bearer " + (await token()) });
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
      if (m.type === "ContentPart" && m.payload.type === "text") out.append(m.payload.text);
      else if (m.type === "ToolCall") {
        // A call's arguments keep streaming in ToolCallParts after it: each goes to its call's line.
        const line = document.createElement("div");
        const args = document.createElement("code");
        args.textContent = m.payload.function.arguments ?? "";
        line.append("[" + m.payload.function.name + " ", args, "]");
        calls.set(m.payload.id, { line, args });
        lastCall = m.payload.id;
        out.append(line);
      } else if (m.type === "ToolCallPart") {
        const c = calls.get(m.payload.tool_call_id ?? lastCall);
        if (c) c.args.textContent += m.payload.arguments_part ?? "";
      } else if (m.type === "ToolResult") {
        const c = calls.get(m.payload.tool_call_id);
        const rv = m.payload.return_value;
        const output = typeof rv.output === "string" ? rv.output : JSON.stringify(rv.output);
        const res = document.createElement("div");
        res.className = rv.is_error ? "error" : "result";
        res.textContent = "→ " + (rv.is_error ? rv.message : output || rv.message);
        (c ? c.line : out).append(res);
      } else if (m.outcome) { out.append("\\n(" + m.outcome + (m.error ? ": " + m.error : "") + ")\\n"); return "end"; }
    }
  }
}
async function follow(res) {
  for (let attempt = 0; attempt < 5; attempt++) {
    try { if (await read(res) === "end") return; } catch {}
    res = await fetch("/chat", { headers: { ...(await auth()), "last-event-id": String(lastId) } });
    if (!res.ok) return;
  }
}
document.getElementById("f").onsubmit = async (e) => {
  e.preventDefault();
  err.textContent = "";
  try {
    const res = await fetch("/chat", { method: "POST", headers: { "content-type": "application/json", ...(await auth()) }, body: JSON.stringify({ message: document.getElementById("m").value }) });
    if (res.status === 401 || res.status === 404) { delete sessionStorage.token; }
    if (!res.ok) { err.textContent = (await res.json()).error; return; }
    out.append("\\n> " + document.getElementById("m").value + "\\n");
    follow(res);
  } catch (e) { err.textContent = e.message; }
};
document.getElementById("stop").onclick = async () => fetch("/cancel", { method: "POST", headers: await auth() });
</script>`;
