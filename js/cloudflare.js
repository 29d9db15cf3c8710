// kosong-wasm/cloudflare: an agent chat session as a Cloudflare Durable Object, so a Worker writes
// only its model, tools, system prompt and auth. The session is the package's `Session` (its
// rules are the core's: ids, write before tell, recovery, limits, the outcome); this file is its
// store on the object's SQLite and alarm, and the routes:
//
// - every message is stored before any client is sent it, and a tool starts only once its call is;
// - clients resume by `Last-Event-ID`, or as the AI SDK's UI message stream (`useChat`);
// - approvals are answered by request id, and a turn can be cancelled;
// - while a turn runs that waits on no person, the alarm stays set: when the runtime that ran it
//   dies (a deploy, an eviction, a crash), the alarm wakes the object with no client connected
//   and the turn goes on from its recording. A request to the session does the same at once.
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
import { answer, answerFromUI, cancelTurn, json, readCapped, readJsonBody, sseResponse, startTurn, uiResponse, uiText } from "./session-http.js";

export { json, readCapped, readJsonBody, uiText };

/** Caps, in bytes of UTF-8 unless said otherwise; each can be set as a var of the same name. */
export const SESSION_LIMITS = Object.freeze({
  MAX_MESSAGE_BYTES: 1 << 20, // one user message
  MAX_SESSION_BYTES: 16 << 20, // a session's whole context
  MAX_TURNS_PER_SESSION: 200,
  MAX_TURNS_PER_CLIENT_PER_HOUR: 120,
  MAX_SESSIONS_PER_CLIENT_PER_HOUR: 30,
  /** How soon the alarm looks at a running turn, in ms: a dead runtime's turn goes on after at most this. */
  RECOVERY_ALARM_MS: 5000,
  /** A turn that records nothing for this long (ms), while no person is awaited, is stopped (a stream stuck open). */
  TURN_STALL_MS: 300_000,
});
/** A cap: the var of that name when it is a positive number, else its default. */
export function sessionLimit(env, name) {
  const v = Number(env?.[name]);
  return Number.isFinite(v) && v > 0 ? v : SESSION_LIMITS[name];
}
const encoder = new TextEncoder();

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

// ---- the store: SQLite rows and the alarm ----------------------------------------------------

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

/**
 * A `SessionStore` on a Durable Object's SQLite (every write one transaction) and its alarm (the
 * session's wake-up). One object is one session, so it needs no lock.
 */
export class DurableObjectSessionStore {
  constructor(ctx) {
    this.ctx = ctx;
    this.sql = ctx.storage.sql;
    this.sql.exec(`CREATE TABLE IF NOT EXISTS context (seq INTEGER PRIMARY KEY, line TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS context_pieces (seq INTEGER NOT NULL, n INTEGER NOT NULL, line TEXT NOT NULL, PRIMARY KEY (seq, n));
      CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY, event TEXT NOT NULL, data TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS event_pieces (id INTEGER NOT NULL, n INTEGER NOT NULL, data TEXT NOT NULL, PRIMARY KEY (id, n));
      CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS agent_context (agent TEXT NOT NULL, n INTEGER NOT NULL, piece INTEGER NOT NULL, line TEXT NOT NULL, PRIMARY KEY (agent, n, piece))`);
  }
  meta(key) {
    return this.sql.exec("SELECT value FROM meta WHERE key = ?", key).toArray()[0]?.value;
  }
  setMeta(key, value) {
    this.sql.exec("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value", key, value);
  }
  /** The rows of `table` (`k`, `v`) in order, each joined with its further pieces. */
  joined(table, pieces, key, col) {
    const more = new Map();
    for (const p of this.sql.exec(`SELECT ${key} AS k, ${col} AS v FROM ${pieces} ORDER BY ${key}, n`)) more.set(p.k, (more.get(p.k) ?? "") + p.v);
    return this.sql.exec(`SELECT *, ${key} AS k, ${col} AS v FROM ${table} ORDER BY ${key}`).toArray().map((r) => ({ ...r, v: r.v + (more.get(r.k) ?? "") }));
  }
  async open() {
    if (this.meta("session") === undefined && this.meta("created") !== undefined) this.upgrade();
    return {
      context: this.joined("context", "context_pieces", "seq", "line").map((r) => r.v),
      events: this.joined("events", "event_pieces", "id", "data").map((r) => ({ id: r.k, kind: r.event, data: r.v })),
      meta: this.meta("session") ?? null,
      agents: this.agents(),
    };
  }
  /** Sub-agents' contexts: `{agentId: lines}` (a line over a row's size in pieces). */
  agents() {
    const out = {};
    for (const r of this.sql.exec("SELECT agent, n, piece, line FROM agent_context ORDER BY agent, n, piece")) {
      const lines = (out[r.agent] ??= []);
      if (r.piece === 0) lines.push(r.line);
      else lines[lines.length - 1] += r.line;
    }
    return out;
  }
  /**
   * A session stored by a version before `Session`: its history is kept, its event ids go on
   * after its last one; its events (another shape) make way, and a turn it was running is ended.
   */
  upgrade() {
    const old = (k) => JSON.parse(this.meta(k) ?? "null");
    let lastId = old("lastEventId") ?? 0;
    this.ctx.storage.transactionSync(() => {
      this.sql.exec("DELETE FROM events");
      this.sql.exec("DELETE FROM event_pieces");
      if (old("turn")?.running) {
        const end = { outcome: "not_recovered", error: { name: "TurnNotRecovered", message: "the turn was running when the session's package was upgraded" } };
        this.sql.exec("INSERT INTO events (id, event, data) VALUES (?, 'end', ?)", ++lastId, JSON.stringify(end));
      }
      const lines = this.sql.exec("SELECT COUNT(*) AS n FROM context").one().n;
      this.setMeta("session", JSON.stringify({ v: 1, last_id: lastId, context_lines: lines, turns: old("turns") ?? 0, approved_for_session: [] }));
    });
  }
  async write(ops) {
    const sql = this.sql;
    this.ctx.storage.transactionSync(() => {
      for (const op of ops) {
        if (op.op === "event") {
          const [first, ...rest] = piecesOf(op.data);
          sql.exec("INSERT INTO events (id, event, data) VALUES (?, ?, ?)", op.id, op.kind, first);
          rest.forEach((piece, n) => sql.exec("INSERT INTO event_pieces (id, n, data) VALUES (?, ?, ?)", op.id, n + 1, piece));
        } else if (op.op === "trimEvents" || op.op === "truncateEvents") {
          const cut = op.op === "trimEvents" ? ["id < ?", op.before] : ["id > ?", op.after];
          sql.exec(`DELETE FROM events WHERE ${cut[0]}`, cut[1]);
          sql.exec(`DELETE FROM event_pieces WHERE ${cut[0]}`, cut[1]);
        } else if (op.op === "context") {
          const [first, ...rest] = piecesOf(op.line);
          const seq = sql.exec("INSERT INTO context (line) VALUES (?) RETURNING seq", first).one().seq;
          rest.forEach((piece, n) => sql.exec("INSERT INTO context_pieces (seq, n, line) VALUES (?, ?, ?)", seq, n + 1, piece));
        } else if (op.op === "truncateContext") {
          // The first `keep` lines stay.
          const after = op.keep === 0 ? -1 : sql.exec("SELECT seq FROM context ORDER BY seq LIMIT 1 OFFSET ?", op.keep - 1).toArray()[0]?.seq;
          if (after === undefined) continue;
          sql.exec("DELETE FROM context WHERE seq > ?", after);
          sql.exec("DELETE FROM context_pieces WHERE seq > ?", after);
        } else if (op.op === "agentContext") {
          const n = sql.exec("SELECT COALESCE(MAX(n) + 1, 0) AS n FROM agent_context WHERE agent = ?", op.agent).one().n;
          piecesOf(op.line).forEach((piece, i) => sql.exec("INSERT INTO agent_context (agent, n, piece, line) VALUES (?, ?, ?, ?)", op.agent, n, i, piece));
        } else if (op.op === "truncateAgentContext") {
          sql.exec("DELETE FROM agent_context WHERE agent = ? AND n >= ?", op.agent, op.keep);
        } else if (op.op === "meta") this.setMeta("session", op.value);
        else throw new TypeError(`a session write has an op this store does not know: ${op.op}`);
      }
    });
  }
  async close() {}
  /** The alarm: set while a turn runs that waits on no person, so a dead runtime's turn goes on. */
  async wake(at) {
    if (at === null) await this.ctx.storage.deleteAlarm();
    else await this.ctx.storage.setAlarm(at);
  }
}

// ---- the session ----------------------------------------------------------------------------

/**
 * A chat session as a Durable Object (bind it with SQLite storage). Subclass it and define
 * `agentOptions()`: the options of the `Agent` each turn runs (`provider`, `systemPrompt`,
 * `toolset`, …; no `context`, the session's is given). `this.env` holds the Worker's bindings.
 */
export class AgentSession extends DurableObject {
  #opening = null;

  constructor(ctx, env) {
    super(ctx, env);
    this.store = this.sessionStore();
  }

  /** The options of each turn's `Agent`: at least `{provider, systemPrompt}`. */
  agentOptions() {
    throw new Error("AgentSession: a subclass defines agentOptions() → {provider, systemPrompt, toolset?, …}");
  }

  /** Where the session is kept: this object's SQLite and alarm (a subclass may wrap it). */
  sessionStore() {
    return new DurableObjectSessionStore(this.ctx);
  }

  /** The session, opened once per runtime: opening it goes on with a turn a dead runtime left. */
  session() {
    const limit = (name) => sessionLimit(this.env, name);
    const options = { maxMessageBytes: limit("MAX_MESSAGE_BYTES"), maxSessionBytes: limit("MAX_SESSION_BYTES"), maxTurns: limit("MAX_TURNS_PER_SESSION"), watchMs: limit("RECOVERY_ALARM_MS"), stallMs: limit("TURN_STALL_MS") };
    return (this.#opening ??= kosong.Session.open(this.store, () => this.agentOptions(), options).catch((e) => {
      this.#opening = null;
      throw e;
    }));
  }

  /** The alarm: a runtime that died left a turn running; opening the session goes on with it. */
  async alarm() {
    await this.session();
  }

  async fetch(request) {
    const url = new URL(request.url);
    const route = `${request.method} ${url.pathname}`;
    const created = this.store.meta("created") !== undefined;
    if (route === "POST /session") {
      if (created) return json(409, { error: "the session exists already" });
      this.store.setMeta("created", JSON.stringify(Date.now()));
      return json(201, {});
    }
    if (!created) return json(404, { error: "no such session" });
    const s = await this.session();
    const maxMessage = sessionLimit(this.env, "MAX_MESSAGE_BYTES");
    switch (route) {
      case "POST /chat": {
        // Read capped and checked here, before anything counts or is erased (whatever Worker is in front).
        const { body, error } = await readJsonBody(request, 2 * maxMessage + 1024, "{message}");
        if (error) return error;
        if (typeof body.message !== "string" || !body.message.trim()) return json(400, { error: "`message` must be a non-empty string" });
        return startTurn(s, body.message, "GET /chat", (after) => sseResponse(s, after));
      }
      case "GET /chat": {
        const last = Number(request.headers.get("last-event-id") ?? url.searchParams.get("lastEventId") ?? 0);
        return sseResponse(s, Number.isInteger(last) && last > 0 ? last : 0);
      }
      case "POST /api/chat": {
        const { body, error } = await readJsonBody(request, sessionLimit(this.env, "MAX_SESSION_BYTES") + maxMessage, "{messages}");
        if (error) return error;
        const { messages } = body;
        if (!Array.isArray(messages) || !messages.length) return json(400, { error: "`messages` must be a non-empty array of UI messages" });
        const last = messages.at(-1);
        if (s.running) return answerFromUI(s, last);
        const message = uiText(last);
        if (last?.role !== "user" || !message.trim()) return json(400, { error: "the last message must be the user's, with text" });
        return startTurn(s, message, "GET /api/chat/{id}/stream", (after) => uiResponse(s, after));
      }
      case "GET /api/chat/stream":
        return s.running ? uiResponse(s, s._turnStart) : new Response(null, { status: 204 });
      case "POST /approve": {
        const { body, error } = await readJsonBody(request, 64 << 10, "{requestId, response, feedback?}");
        return error ?? answer(s, body);
      }
      case "POST /cancel":
        return cancelTurn(s);
      case "GET /history": {
        const ctx = s._context();
        return json(200, { history: ctx.history, tokenCount: ctx.tokenCount });
      }
    }
    return json(404, { error: "not found" });
  }
}
