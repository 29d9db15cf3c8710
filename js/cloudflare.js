// kosong-wasm/cloudflare: an agent chat session as a Cloudflare Durable Object, so a Worker writes
// only its model, tools, system prompt and auth. The session keeps its Context (kimi-cli
// `context.jsonl` lines in SQLite, a long one across rows) and the running turn's recording (its
// wire messages, each an event with an id), and runs the turn itself:
//
// - every message is recorded before any client is sent it (the recorder writes it synchronously,
//   so a tool's call is stored before the tool starts);
// - clients resume by `Last-Event-ID`, or as the AI SDK's UI message stream (`useChat`);
// - approvals are answered by request id, and a turn can be cancelled;
// - while a turn runs an alarm stays set: when the runtime that ran it dies (a deploy, an
//   eviction, a crash), the alarm wakes the object with no client connected and the turn goes on
//   from its recording (`resumeSoul`: the round kept, a call that ran without a recorded result
//   answered as interrupted unless its tool is idempotent, a waiting approval still waiting under
//   its id). A request to the session does the same at once.
//
// Routes the session answers (the Worker in front of it checks who may call them):
//   POST /session                  creates the session (201; 409 if it exists)
//   POST /chat {message}           starts a turn and streams its events as SSE, each with an `id:`
//   GET  /chat (Last-Event-ID: n)  the events after n, then the live rest
//   POST /api/chat {messages}      useChat: the last message starts a turn, or answers approvals
//   GET  /api/chat/stream          useChat's resume: the running turn's message (204 when none)
//   POST /approve {requestId, response, feedback?}
//   POST /cancel                   GET /history
import { DurableObject } from "cloudflare:workers";
import * as kosong from "./workerd.js";

/** Caps, in bytes of UTF-8 unless said otherwise; each can be set as a var of the same name. */
export const SESSION_LIMITS = Object.freeze({
  MAX_MESSAGE_BYTES: 1 << 20, // one user message
  MAX_SESSION_BYTES: 16 << 20, // a session's whole context
  MAX_TURNS_PER_SESSION: 200,
  MAX_TURNS_PER_CLIENT_PER_HOUR: 120,
  MAX_SESSIONS_PER_CLIENT_PER_HOUR: 30,
  /** How soon the alarm looks at a running turn, in ms: a dead runtime's turn goes on after at most this. */
  RECOVERY_ALARM_MS: 5000,
});
/** A cap: the var of that name when it is a positive number, else its default. */
export function sessionLimit(env, name) {
  const v = Number(env?.[name]);
  return Number.isFinite(v) && v > 0 ? v : SESSION_LIMITS[name];
}
/** Text reaches clients at least this often while the model writes (merged in between). */
const FLUSH_MS = 50;

const encoder = new TextEncoder();
/** A JSON response. */
export const json = (status, body, headers = {}) =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } });
const frame = (e) => `id: ${e.id}\nevent: ${e.event}\ndata: ${e.data}\n\n`;

/** Reads a request body of at most `max` bytes, or returns null past it (however it was sent). */
export async function readCapped(request, max) {
  const declared = Number(request.headers.get("content-length"));
  if (Number.isFinite(declared) && declared > max) return drained(request, declared);
  if (!request.body) return "";
  const reader = request.body.getReader();
  const chunks = [];
  let size = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await drainReader(reader, size);
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
 * A body refused for its size is read to its end and dropped (up to DRAIN_BYTES), so the client
 * gets the 413 instead of a connection reset while it is still sending; past that it is cut.
 */
const DRAIN_BYTES = 32 << 20;
async function drained(request, declared) {
  if (!request.body) return null;
  const reader = request.body.getReader();
  if (declared > DRAIN_BYTES) {
    await reader.cancel();
    return null;
  }
  await drainReader(reader, 0);
  return null;
}
async function drainReader(reader, seen) {
  for (let size = seen; ; ) {
    const { value, done } = await reader.read();
    if (done) return;
    size += value.byteLength;
    if (size > DRAIN_BYTES) return void (await reader.cancel());
  }
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

// ---- session tokens -------------------------------------------------------------------------

const b64url = (bytes) => btoa(String.fromCharCode(...new Uint8Array(bytes))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
const unb64url = (s) => {
  try {
    return Uint8Array.from(atob(s.replace(/-/g, "+").replace(/_/g, "/")), (c) => c.charCodeAt(0));
  } catch {
    return null;
  }
};
const hmacKey = (secret) => crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign", "verify"]);
/** A new session id: 128 random bits, as hex. */
export const newSessionId = () => [...crypto.getRandomValues(new Uint8Array(16))].map((b) => b.toString(16).padStart(2, "0")).join("");
/** `v1.<session>.<HMAC-SHA-256(secret, "v1.<session>.<client>")>`: names the session, and binds it to the client. */
export async function issueToken(secret, session, client) {
  const sig = await crypto.subtle.sign("HMAC", await hmacKey(secret), encoder.encode(`v1.${session}.${client ?? ""}`));
  return `v1.${session}.${b64url(sig)}`;
}
/** The session the request's `Authorization: Bearer` token names, if it is genuine and was issued to `client`. */
export async function verifyToken(secret, request, client) {
  // The scheme is case-insensitive (RFC 9110): `bearer` and `BEARER` are `Bearer`.
  const m = /^Bearer +v1\.([0-9a-f]{32})\.([\w-]{43})$/i.exec(request.headers.get("authorization") ?? "");
  if (!m) return null;
  const sig = unb64url(m[2]);
  if (!sig) return null;
  // verify() compares in constant time.
  const ok = await crypto.subtle.verify("HMAC", await hmacKey(secret), sig, encoder.encode(`v1.${m[1]}.${client ?? ""}`));
  return ok ? m[1] : null;
}

/**
 * Counts a client's uses over the last hour (one object per client; bind it and call `take`
 * through RPC: `env.LIMITS.get(id).take("turn", max)`).
 */
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

// ---- storage across rows --------------------------------------------------------------------

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
export const uiText = (m) => (Array.isArray(m?.parts) ? m.parts.filter((p) => p?.type === "text" && typeof p.text === "string").map((p) => p.text).join("") : "");

// ---- the session ----------------------------------------------------------------------------

/**
 * A chat session as a Durable Object (bind it with SQLite storage). Subclass it and define
 * `agentOptions()`: the options of the `Agent` each turn runs (`provider`, `systemPrompt`,
 * `toolset`, …; no `context`, the session's is given). `this.env` holds the Worker's bindings.
 */
export class AgentSession extends DurableObject {
  /** The clients listening to the running turn: each is called with every event published. */
  listeners = new Set();
  /** The running turn's wire (it keeps the approval requests the turn waits on). */
  wire = null;
  running = null;
  controller = null;
  /** The last event id, once read from storage (see `lastEventId`). */
  lastId = null;
  /** Resolves once a turn being recovered has taken up its waiting approvals. */
  recovering = null;

  constructor(ctx, env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec(`CREATE TABLE IF NOT EXISTS context (seq INTEGER PRIMARY KEY, line TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS context_pieces (seq INTEGER NOT NULL, n INTEGER NOT NULL, line TEXT NOT NULL, PRIMARY KEY (seq, n));
      CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY, event TEXT NOT NULL, data TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS event_pieces (id INTEGER NOT NULL, n INTEGER NOT NULL, data TEXT NOT NULL, PRIMARY KEY (id, n));
      CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)`);
  }

  /** The options of each turn's `Agent`: at least `{provider, systemPrompt}`. */
  agentOptions() {
    throw new Error("AgentSession: a subclass defines agentOptions() → {provider, systemPrompt, toolset?, …}");
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
    await this.recoverOrphanedTurn();
    switch (route) {
      case "POST /chat": {
        // Read capped and checked here, before anything counts or is erased (whatever Worker is in front).
        const maxMessage = sessionLimit(this.env, "MAX_MESSAGE_BYTES");
        const { body, error } = await readJsonBody(request, 2 * maxMessage + 1024, "{message}");
        if (error) return error;
        const { message } = body;
        if (typeof message !== "string" || !message.trim()) return json(400, { error: "`message` must be a non-empty string" });
        if (encoder.encode(message).byteLength > maxMessage) return json(413, { error: `a message is at most ${maxMessage} bytes`, limit: maxMessage });
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
        const maxMessage = sessionLimit(this.env, "MAX_MESSAGE_BYTES");
        const { body, error } = await readJsonBody(request, sessionLimit(this.env, "MAX_SESSION_BYTES") + maxMessage, "{messages}");
        if (error) return error;
        const { messages } = body;
        if (!Array.isArray(messages) || !messages.length) return json(400, { error: "`messages` must be a non-empty array of UI messages" });
        const last = messages.at(-1);
        if (this.running) {
          // The answers to the approvals the turn waits on, in the tool parts of the last message;
          // one answer a request (the first), and `approved` only when it is `true`.
          const seen = new Set();
          const answers = (last?.parts ?? []).filter((p) => p?.state === "approval-responded" && this.waiting(p.approval?.id) && !seen.has(p.approval.id) && seen.add(p.approval.id));
          if (!answers.length) return json(409, { error: "a turn is already running in this session; resume it with GET /api/chat/{id}/stream" });
          const after = this.lastEventId();
          for (const p of answers) this.wire.respond(p.approval.id, p.approval.approved === true ? "approve" : "reject", typeof p.approval.reason === "string" ? p.approval.reason : "");
          return this.uiStream(after);
        }
        const message = uiText(last);
        if (last?.role !== "user" || !message.trim()) return json(400, { error: "the last message must be the user's, with text" });
        if (encoder.encode(message).byteLength > maxMessage) return json(413, { error: `a message is at most ${maxMessage} bytes`, limit: maxMessage });
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
        const { body, error } = await readJsonBody(request, 64 << 10, "{requestId, response, feedback?}");
        if (error) return error;
        const { requestId, response, feedback = "" } = body;
        if (typeof requestId !== "string" || !["approve", "approve_for_session", "reject"].includes(response) || typeof feedback !== "string") {
          return json(400, { error: 'the body is {requestId: string, response: "approve" | "approve_for_session" | "reject", feedback?: string}' });
        }
        if (!this.running || !this.waiting(requestId)) return json(404, { error: "no approval request of that id is waiting" });
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

  /** Whether the running turn waits on the approval request of this id (its wire knows). */
  waiting(requestId) {
    return typeof requestId === "string" && this.wire !== null && this.wire._isWaiting(requestId);
  }

  /** The alarm set while a turn runs: a live runtime sets it again; a dead one's turn goes on. */
  async alarm() {
    if (!this.meta("turn")?.running) return;
    if (this.running) return this.armAlarm();
    await this.recoverOrphanedTurn();
  }

  armAlarm() {
    return this.ctx.storage.setAlarm(Date.now() + sessionLimit(this.env, "RECOVERY_ALARM_MS"));
  }

  /**
   * A turn the storage says is running while this object runs none: the runtime that ran it
   * died. It goes on from its recording (the waiting approvals are waiting again at once, under
   * their ids). Resolves once it has.
   */
  recoverOrphanedTurn() {
    const turn = this.meta("turn");
    if (!turn?.running || this.running) return this.recovering ?? Promise.resolve();
    const messages = this.recorded(turn.firstId - 1).filter((r) => r.event === "wire").map((r) => JSON.parse(r.data));
    const unfinished = kosong.unfinishedTurn(messages);
    if (!unfinished) {
      // It ended (TurnEnd is recorded) but its end was not: the runtime died right after.
      this.publish("end", { outcome: "interrupted", error: "the runtime stopped as the turn ended" });
      this.setMeta("turn", { ...turn, running: false });
      return Promise.resolve();
    }
    let ready;
    this.recovering = new Promise((r) => (ready = r));
    this.runTurn(turn, (agent, ui, signal, recorder) => kosong.resumeSoul(agent, messages, ui, signal, { recorder }), ready);
    return this.recovering;
  }

  /** Why a new turn on `message` is refused (a response), or null; counts the turn when it is not. */
  refuseTurn(message) {
    const turns = this.meta("turns") ?? 0;
    if (turns >= sessionLimit(this.env, "MAX_TURNS_PER_SESSION")) return json(429, { error: `this session has had its ${turns} turns; start a new one` });
    const size = this.contextBytes() + encoder.encode(message).byteLength;
    const max = sessionLimit(this.env, "MAX_SESSION_BYTES");
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
    const budget = { used: this.contextBytes(), max: sessionLimit(this.env, "MAX_SESSION_BYTES") };
    const sink = guarded((line) => this.insertLine(line, budget));
    const onRewrite = guarded((whole) => {
      this.ctx.storage.transactionSync(() => {
        this.sql.exec("DELETE FROM context");
        this.sql.exec("DELETE FROM context_pieces");
        for (const line of whole.split("\n")) if (line) this.insertLine(line);
      });
    });
    const systemPrompt = this.agentOptions().systemPrompt ?? "";
    return lines.length ? kosong.Context.fromJSONL(lines.join("\n"), { sink, onRewrite }) : new kosong.Context({ systemPrompt, sink, onRewrite });
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

  /** The recorded events after `lastId`, each joined from its rows. */
  recorded(lastId) {
    const rows = this.sql.exec("SELECT id AS key, event, data AS value FROM events WHERE id > ? ORDER BY id", lastId).toArray();
    const more = this.sql.exec("SELECT id AS key, n, data AS value FROM event_pieces WHERE id > ? ORDER BY id, n", lastId).toArray();
    return joinPieces(rows, more).map((r) => ({ id: r.key, event: r.event, data: r.value }));
  }

  /** Starts a turn; returns the id of its first event. */
  startTurn(message) {
    // The turn before the last makes way; the last stays, so a client that saw part of it and comes
    // back (Last-Event-ID) gets its rest before this turn's events.
    const keepFrom = this.meta("turn")?.firstId ?? 1;
    this.sql.exec("DELETE FROM events WHERE id < ?", keepFrom);
    this.sql.exec("DELETE FROM event_pieces WHERE id < ?", keepFrom);
    const turn = {
      running: true,
      firstId: this.lastEventId() + 1,
      messageId: `msg-${crypto.randomUUID()}`,
      contextRows: this.sql.exec("SELECT COALESCE(MAX(seq), 0) AS n FROM context").one().n,
    };
    this.runTurn(turn, (agent, ui, signal, recorder) => kosong.runSoul(agent, message, ui, signal, { recorder }));
    return turn.firstId;
  }

  /**
   * Runs a turn (`start` calls `runSoul` or `resumeSoul`) with the session's context, recording
   * every message as an event the moment the wire has it; the alarm stays set until it ends.
   * `onResumed`: called once a resumed turn said so on the wire (its approvals are waiting again).
   */
  runTurn(turn, start, onResumed) {
    this.setMeta("turn", turn);
    const rows = turn.contextRows ?? this.sql.exec("SELECT COALESCE(MAX(seq), 0) AS n FROM context").one().n;
    this.armAlarm();
    let storageError = null;
    this.controller = new AbortController();
    const signal = this.controller.signal;
    // A context write that fails (for any reason) stops the turn (the core stops at a refused
    // write) and is reported and taken back like a failed event write.
    const context = this.loadContext((e) => {
      storageError ??= e;
    });
    const agent = new kosong.Agent({ name: "session", ...this.agentOptions(), context });
    const send = (data) => {
      try {
        this.publish("wire", data);
      } catch (e) {
        // Nothing more can be recorded: the turn stops, and ends below with this error.
        storageError ??= e;
        this.controller.abort(e);
      }
      if (data?.type === "Notification" && data.payload?.type === "turn_resumed") queueMicrotask(() => onResumed?.());
    };
    // Written as the wire has it (before a tool or a client is told): the recorder's lines.
    const recorder = new kosong.WireRecorder((line) => {
      const m = JSON.parse(line).message;
      if (m) send(m);
    }, { append: true });
    // The merged side is read so the wire can be flushed every FLUSH_MS: clients get what the
    // model wrote so far without an event per token.
    const ui = async (wire) => {
      this.wire = wire;
      const timer = setInterval(() => wire.flush(), FLUSH_MS);
      try {
        for await (const _ of wire.uiSide({ merge: true }));
      } finally {
        clearInterval(timer);
      }
    };
    this.running = (async () => {
      let end;
      try {
        await start(agent, ui, signal, recorder);
        end = storageError ? null : { outcome: "done" };
      } catch (e) {
        if (!storageError) end = e instanceof kosong.RunCancelled ? { outcome: "cancelled" } : { outcome: "failed", error: `${e?.name}: ${e?.message}` };
      }
      try {
        await this.finishTurn(turn, rows, end, storageError, onResumed);
      } finally {
        // Whatever the storage did above, the session takes its next turn (never 409 until an eviction).
        this.wire = null;
        this.recovering = null;
        this.closeListeners();
        this.running = null;
        this.controller = null;
      }
    })();
    // The turn outlives the request that started it.
    this.ctx.waitUntil(this.running);
  }

  /** A turn's end: taken back if storage failed, stored, told; the turn marked ended; the alarm off. */
  async finishTurn(turn, rows, end, storageError, onResumed) {
    onResumed?.(); // a resume that failed before saying so
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
    this.setMeta("turn", { ...turn, running: false });
    await this.ctx.storage.deleteAlarm();
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
            if (data.type === "ApprovalRequest" && this.waiting(data.payload.id)) finish(chunker.end({ pause: true }));
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
