// Sessions on every host: one Session over the core's sans-IO session (SessionCore over
// src/engine/session), which owns every rule — what is stored and in which order, event ids,
// write before tell, what a death or a refused write leaves, the limits, the outcome. This file
// performs what the core asks (writes through the store, events to listeners, timers) and
// decides nothing. The stores are adapters: memory here, files in session-file.js (Node).
import { callWasm, wasm } from "./internal.js";
import { Agent, RunCancelled } from "./agent.js";
import { Context } from "./context.js";
import { Wire } from "./wire.js";
import { checkLogger, checkOptionNames } from "./util.js";

/** A turn is running in this session (one at a time), or its store is being repaired. */
export class SessionBusyError extends Error {
  constructor(message = "a turn is already running in this session") {
    super(message);
    this.name = "SessionBusyError";
  }
}
/** Another runtime owns this session's store (a second tab, a second process). */
export class SessionLockedError extends Error {
  constructor(message = "another runtime owns this session") {
    super(message);
    this.name = "SessionLockedError";
  }
}
/** A message or the session is over one of the session's limits; nothing was counted. */
export class SessionLimitError extends Error {
  /** @param option which limit: "maxMessageBytes" | "maxSessionBytes" | "maxTurns"; @param limit its value */
  constructor(message, option, limit) {
    super(message);
    this.name = "SessionLimitError";
    this.option = option;
    this.limit = limit;
  }
}

const SESSION_OPTIONS = ["maxResumes", "logger", "maxMessageBytes", "maxSessionBytes", "maxTurns", "stallMs", "watchMs"];
const RESPONSES = ["approve", "approve_for_session", "reject"];

function refusal(e) {
  if (e && typeof e === "object" && typeof e.refused === "string") {
    if (e.refused === "busy") return new SessionBusyError(e.message);
    if (e.refused === "limit") return new SessionLimitError(e.message, e.option, e.limit);
    return new TypeError(`Session.send: ${e.message}`);
  }
  return e;
}

/** A stored event as a listener gets it: `{id, message}` or `{id, end}`. */
function sessionEvent(e) {
  if (e.kind === "end") return { id: e.id, end: JSON.parse(e.data) };
  return { id: e.id, message: JSON.parse(e.data).message };
}
/**
 * The JSON text of a stored wire event's message, cut from its `wire.jsonl` line without
 * parsing it (the core writes `{"timestamp":<n>,"message":<message>}`, the message last).
 */
export const messageText = (e) => e.data.slice(e.data.indexOf(',"message":') + 11, -1);

/**
 * A chat session: its context and its running turn's recording, in a store; one turn at a time;
 * reopened after its runtime died (a reload, a SIGKILL, an eviction), the unfinished turn goes on
 * by itself (`recovered`). See docs/sessions.md.
 */
export class Session {
  #core;
  #store;
  #agentOptions;
  #logger;
  #turn = null; // {wire, controller, dropped}
  #listeners = new Set();
  #ends = []; // {after, resolve}
  #cancels = []; // resolvers of cancel() waiting for the cancel to be stored
  #pumping = false;
  #again = false;
  #timer = null;
  #closed = false;
  /** The unfinished turn found at open, resumed and ended; null when there was none. */
  recovered;

  constructor(token) {
    if (token !== SESSION_TOKEN) throw new TypeError("use `await Session.open(store, agentOptions)`");
  }

  /**
   * Opens the session kept in `store` (taking it: a second owner is refused with
   * `SessionLockedError`) with the agent each turn runs (`agent`: what `new Agent(...)` takes,
   * without `context`: the session's is given; or a function that returns them, called for each
   * turn, so each turn gets its own provider and tools).
   */
  static async open(store, agent, options = {}) {
    if (!store || typeof store.open !== "function" || typeof store.write !== "function" || typeof store.close !== "function") {
      throw new TypeError("Session.open: store must be a SessionStore ({open(), write(ops), close()})");
    }
    const optionsOf = typeof agent === "function" ? agent : () => agent;
    agent = optionsOf();
    if (!agent || typeof agent !== "object") throw new TypeError("Session.open: agent must be the options of an Agent ({provider, systemPrompt, toolset?, …}) or a function that returns them");
    if ("context" in agent) throw new TypeError("Session.open: agent options take no `context`: the session's is given");
    checkOptionNames(options ?? {}, "Session.open: options", SESSION_OPTIONS);
    const o = options ?? {};
    const logger = checkLogger(o.logger, "Session.open: options.logger");
    for (const k of ["maxResumes", "maxMessageBytes", "maxSessionBytes", "maxTurns", "stallMs", "watchMs"]) {
      if (o[k] !== undefined && !(Number.isInteger(o[k]) && o[k] >= 0)) throw new TypeError(`Session.open: options.${k} must be an integer ≥ 0`);
    }
    // Checked now, so a bad option is an error here, not at the first turn.
    new Agent({ ...agent, context: new Context() });
    const stored = await store.open();
    let core;
    try {
      core = callWasm(() => new wasm.SessionCore(JSON.stringify(stored), o, Date.now()));
    } catch (e) {
      await store.close();
      throw e;
    }
    const s = new Session(SESSION_TOKEN);
    s.#core = core;
    s.#store = store;
    s.#agentOptions = optionsOf;
    s.#logger = logger;
    core.setNotify(() => s.#schedule());
    s.recovered = core.running ? s.#nextEnd(core.turnStart) : Promise.resolve(null);
    s.#schedule();
    return s;
  }

  /** The stored history (what the next turn starts from). */
  get history() {
    return new Context(undefined, this.#core.context()).history;
  }

  /** A turn runs (or is being resumed or closed). */
  get running() {
    return this.#core.running;
  }

  /** Starts a turn (`SessionBusyError` while one runs; `SessionLimitError` past a limit) and resolves with its outcome when it ends. */
  send(input) {
    if (this.#closed) return Promise.reject(new Error("the session is closed"));
    const after = this.#core.lastEventId;
    try {
      this.#run(input);
    } catch (e) {
      return Promise.reject(refusal(e));
    }
    return this.#nextEnd(after);
  }

  /** The recorded events after `after` (an event id), then the live ones; ends when the session closes. */
  events({ after = 0 } = {}) {
    if (!(Number.isInteger(after) && after >= 0)) throw new TypeError("Session.events: after must be an event id (an integer ≥ 0)");
    const queue = this._recorded(after).map(sessionEvent);
    let last = queue.length ? queue[queue.length - 1].id : after;
    let wake = null;
    let done = this.#closed;
    const listener = {
      event: (e) => {
        if (e.id <= last) return;
        last = e.id;
        queue.push(sessionEvent(e));
        wake?.();
      },
      close: () => {
        done = true;
        wake?.();
      },
    };
    this.#listeners.add(listener);
    const listeners = this.#listeners;
    return {
      [Symbol.asyncIterator]() {
        return this;
      },
      async next() {
        for (;;) {
          if (queue.length) return { value: queue.shift(), done: false };
          if (done) {
            listeners.delete(listener);
            return { value: undefined, done: true };
          }
          await new Promise((r) => (wake = r));
          wake = null;
        }
      },
      async return() {
        listeners.delete(listener);
        return { value: undefined, done: true };
      },
    };
  }

  // ---- for hosts in this package (AgentSession) ------------------------------------------------

  /** The stored events after `after`, as stored: `{id, kind: "wire" | "end", data}`. */
  _recorded(after) {
    return JSON.parse(callWasm(() => this.#core.eventsAfter(after)));
  }
  /**
   * Hears every stored event as stored (`{event(e), close(), unstored?(endData)}`: `unstored`, a
   * turn that ended before anything of it was stored, with its end's data); returns a function
   * that stops.
   */
  _listen(listener) {
    if (this.#closed) {
      listener.close();
      return () => {};
    }
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
  /** No turn runs and every event is stored and told (a follower has nothing more to wait for). */
  get _settled() {
    return this.#core.settled;
  }
  get _lastEventId() {
    return this.#core.lastEventId;
  }
  /** The id before the running (or last) turn's first event. */
  get _turnStart() {
    return this.#core.turnStart;
  }
  /** Whether the running turn waits on the approval request `requestId` now. */
  _waiting(requestId) {
    return typeof requestId === "string" && !!this.#turn?.wire._isWaiting(requestId);
  }
  /**
   * Whether the running turn waits on `requestId`: a recovered turn waits again once it is taken
   * up, so a request of a running turn is looked for a moment (1 s) before it is called unknown.
   */
  async _whenWaiting(requestId) {
    for (let i = 0; i < 200 && !this.#closed; i++) {
      if (this._waiting(requestId)) return true;
      if (!this.#core.running) return false;
      await new Promise((r) => setTimeout(r, 5));
    }
    return false;
  }
  /** Resolves with the running turn's outcome once it ends (at once with null when none runs). */
  _turnEnd() {
    return this.#core.running ? this.#nextEnd(this.#core.turnStart) : Promise.resolve(null);
  }
  /** The stored context (its history and token count). */
  _context() {
    return new Context(undefined, this.#core.context());
  }
  /** Answers an approval request the running turn waits on (the first answer counts). */
  async respond(requestId, response, feedback = "") {
    if (typeof requestId !== "string") throw new TypeError("Session.respond: requestId must be a string");
    if (!RESPONSES.includes(response)) throw new TypeError(`Session.respond: response must be "approve", "approve_for_session" or "reject"; got ${JSON.stringify(response)}`);
    if (typeof feedback !== "string") throw new TypeError("Session.respond: feedback must be a string");
    if (await this._whenWaiting(requestId)) return this.#turn.wire.respond(requestId, response, feedback);
    throw new Error(`No approval request ${requestId} is waiting in this session`);
  }

  /** Resolves once the cancel is stored: a turn cancelled before its runtime died ends cancelled. */
  cancel() {
    if (this.#closed || !callWasm(() => this.#core.cancel())) return Promise.resolve();
    return new Promise((resolve) => this.#cancels.push(resolve));
  }

  /** Lets the store go; a running turn is left as a dead runtime leaves it (the next open resumes it). */
  async close() {
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#core.setNotify(undefined);
    if (this.#turn) {
      this.#turn.dropped = true;
      this.#turn.controller.abort(new RunCancelled("the session was closed"));
    }
    for (const l of this.#listeners) l.close();
    this.#listeners.clear();
    for (const r of this.#cancels.splice(0)) r();
    await this.#store.close();
  }

  // ---- what the core asks ----------------------------------------------------------------------

  #schedule() {
    if (this.#pumping) {
      this.#again = true;
      return;
    }
    this.#pumping = true;
    queueMicrotask(() => this.#pump());
  }

  async #pump() {
    try {
      do {
        this.#again = false;
        if (this.#closed) return;
        // Everything the core asks now, in one crossing (a write's outcome and the next ask share one).
        let asked = JSON.parse(callWasm(() => this.#core.poll()));
        for (;;) {
          for (const e of asked.events) this.#tell(e);
          if (asked.wake !== undefined) this.#wake(asked.wake);
          if (asked.flush) this.#turn?.wire.flush();
          if (asked.cancelStored) for (const r of this.#cancels.splice(0)) r();
          if (asked.unstoredEnd) this.#unstored(asked.unstoredEnd);
          if (asked.stop !== undefined && this.#turn) {
            if (asked.stop === "drop") this.#turn.dropped = true;
            this.#turn.controller.abort(new RunCancelled(asked.stop === "drop" ? "the session's store refused a write" : "cancelled"));
          }
          if (!asked.write) break;
          let ok = true;
          try {
            await this.#store.write(asked.write.ops);
          } catch (e) {
            ok = false;
            this.#logger?.warn?.("kosong-wasm: the session's store refused a write", { error: e });
          }
          if (this.#closed) return;
          asked = JSON.parse(callWasm(() => this.#core.writeDone(asked.write.seq, ok, Date.now())));
        }
        if (!this.#turn && asked.resume) this.#run(undefined);
        this.#arm(asked.timeout);
      } while (this.#again);
    } finally {
      this.#pumping = false;
      if (this.#again && !this.#closed) this.#schedule();
    }
  }

  #arm(at) {
    clearTimeout(this.#timer);
    if (at === undefined) return;
    this.#timer = setTimeout(() => {
      callWasm(() => this.#core.handleTimeout(Date.now()));
      this.#schedule();
    }, Math.max(0, at - Date.now()));
    // A timer of the session's keeps a process alive only while a turn is to end (a refused
    // write's retry closes it): an idle session's never does.
    if (!this.#core.running) this.#timer?.unref?.();
  }

  /**
   * A store that can wake its host (a Durable Object's alarm) is told when to look again, or
   * `null` (not needed), when the core says it is news.
   */
  #wake(at) {
    if (typeof this.#store.wake !== "function") return;
    Promise.resolve()
      .then(() => this.#store.wake(at === null ? null : Math.max(at, Date.now() + 1)))
      .catch((e) => this.#logger?.warn?.("kosong-wasm: the session's store could not set its wake-up", { error: e }));
  }

  /** Hands a stored event (`{id, kind, data}`) to every listener, and resolves what waited on an end. */
  #tell(e) {
    for (const l of this.#listeners) {
      try {
        l.event(e);
      } catch {
        this.#listeners.delete(l);
      }
    }
    if (e.kind === "end") {
      const end = JSON.parse(e.data);
      for (const w of this.#ends.filter((w) => e.id > w.after)) w.resolve(end);
      this.#ends = this.#ends.filter((w) => !(e.id > w.after));
      for (const r of this.#cancels.splice(0)) r();
    }
  }

  /**
   * The end of a turn the core dropped before anything of it was stored (its first write was
   * refused): no stored end will come, so whoever waits on the turn, and a follower of it (a
   * Worker's stream), is told this one.
   */
  #unstored(end) {
    for (const w of this.#ends.splice(0)) w.resolve(end);
    for (const l of this.#listeners) {
      try {
        l.unstored?.(JSON.stringify(end));
      } catch {
        this.#listeners.delete(l);
      }
    }
  }

  #nextEnd(after) {
    return new Promise((resolve) => this.#ends.push({ after, resolve }));
  }

  /** Starts a turn: a new one on `input`, or (`undefined`) the one the store holds unfinished. */
  #run(input) {
    const context = new Context(undefined, this.#core.context());
    const agent = new Agent({ ...this.#agentOptions(), context });
    const controller = new AbortController();
    const wire = new Wire();
    const run = { wire, signal: controller.signal };
    const turn = { wire, controller, dropped: false };
    const started = agent._session(this.#core, input, run);
    if (started === null) return;
    this.#turn = turn;
    // A turn that keeps a person waiting keeps a Node process alive, as a server socket would.
    const alive = setInterval(() => {}, 1 << 30);
    started
      .catch(() => {}) // its outcome is the session's end event
      .finally(() => {
        clearInterval(alive);
        if (this.#turn === turn) this.#turn = null;
        this.#schedule();
      });
  }
}
const SESSION_TOKEN = Symbol("Session");

/**
 * A session's store in memory (tests, a page that keeps nothing): one owner at a time; `close()`
 * lets it go, and a new `Session.open` over it goes on where the last one left off.
 */
export class MemorySessionStore {
  #context = [];
  #events = [];
  #meta = null;
  #agents = new Map();
  #open = false;

  async open() {
    if (this.#open) throw new SessionLockedError("this MemorySessionStore is open in another Session");
    this.#open = true;
    const agents = Object.fromEntries([...this.#agents].map(([id, lines]) => [id, [...lines]]));
    return { context: [...this.#context], events: this.#events.map((e) => ({ ...e })), meta: this.#meta, agents };
  }

  async write(ops) {
    applyOps(ops, { context: this.#context, events: this.#events, agents: this.#agents, setMeta: (m) => (this.#meta = m) });
  }

  async close() {
    this.#open = false;
  }
}

/** Keeps the elements of `list` that pass `keep`, in place (no spread: a list may be long). */
function keepWhere(list, keep) {
  let j = 0;
  for (const x of list) if (keep(x)) list[j++] = x;
  list.length = j;
}

/**
 * Applies a write's ops in order to arrays (`context`: lines; `events`: `{id, kind, data}` in id
 * order; `agents`: a Map of agent id to its context's lines).
 */
export function applyOps(ops, { context, events, agents, setMeta }) {
  for (const op of ops) {
    switch (op.op) {
      case "event":
        events.push({ id: op.id, kind: op.kind, data: op.data });
        break;
      case "trimEvents":
        keepWhere(events, (e) => e.id >= op.before);
        break;
      case "truncateEvents":
        keepWhere(events, (e) => e.id <= op.after);
        break;
      case "context":
        context.push(op.line);
        break;
      case "truncateContext":
        context.length = Math.min(context.length, op.keep);
        break;
      case "agentContext": {
        const lines = agents.get(op.agent);
        if (lines) lines.push(op.line);
        else agents.set(op.agent, [op.line]);
        break;
      }
      case "truncateAgentContext": {
        const lines = agents.get(op.agent);
        if (lines) lines.length = Math.min(lines.length, op.keep);
        break;
      }
      case "meta":
        setMeta(op.value);
        break;
      default:
        throw new TypeError(`a session write has an op this store does not know: ${op.op}`);
    }
  }
}
