// IndexedDBSessionStore (browsers): a session in an IndexedDB database, one owner across tabs.
//
// Ownership is a Web Lock named after the session, held from `open` to `close` (or until the page
// goes away: a reloaded page's lock is released with it, and the reloaded page takes it). A second
// tab is refused with SessionLockedError, or waits for the lock with `{wait: true}`. A write is one
// IndexedDB transaction over the four object stores (the context, the events, the meta, and
// sub-agents' contexts keyed [agent id, line number]): all of it is stored, or none.
import { SessionLockedError } from "./session.js";

const STORES = ["context", "events", "meta", "agents"];

function request(req) {
  return new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
}

export class IndexedDBSessionStore {
  #name;
  #wait;
  #db = null;
  #release = null;
  #contextLength = 0;
  /** Each sub-agent's context lines, by agent id: how many. */
  #agentLengths = new Map();

  constructor(name, options = {}) {
    if (typeof name !== "string" || !name) throw new TypeError("IndexedDBSessionStore: name must be a non-empty string");
    if (options !== null && typeof options !== "object") throw new TypeError("IndexedDBSessionStore: options must be an object");
    const unknown = Object.keys(options ?? {}).filter((k) => k !== "wait");
    if (unknown.length) throw new TypeError(`IndexedDBSessionStore: options has no \`${unknown[0]}\` (wait)`);
    this.#name = name;
    this.#wait = Boolean(options?.wait);
  }

  /** Takes the session's lock; gives what the database holds. */
  async open() {
    if (typeof indexedDB === "undefined") throw new TypeError("IndexedDBSessionStore needs IndexedDB (a browser); in Node, use FileSessionStore");
    if (this.#db) throw new SessionLockedError("this IndexedDBSessionStore is open already");
    const lockName = `kosong-session:${this.#name}`;
    if (globalThis.navigator?.locks) {
      this.#release = await new Promise((taken, refused) => {
        navigator.locks
          .request(lockName, { ifAvailable: !this.#wait }, (lock) => {
            if (!lock) {
              refused(new SessionLockedError(`the session "${this.#name}" is open in another tab or window`));
              return undefined;
            }
            // Held until close() resolves it (or the page goes away).
            return new Promise((release) => taken(release));
          })
          .catch(refused);
      });
    }
    try {
      // Version 2 added the sub-agents' store (a version-1 database is upgraded in place).
      const openReq = indexedDB.open(`kosong-session:${this.#name}`, 2);
      openReq.onupgradeneeded = () => {
        for (const s of STORES) if (!openReq.result.objectStoreNames.contains(s)) openReq.result.createObjectStore(s);
      };
      this.#db = await request(openReq);
      const tx = this.#db.transaction(STORES, "readonly");
      const [context, events, meta, agentKeys, agentLines] = await Promise.all([
        request(tx.objectStore("context").getAll()),
        request(tx.objectStore("events").getAll()),
        request(tx.objectStore("meta").get("meta")),
        request(tx.objectStore("agents").getAllKeys()),
        request(tx.objectStore("agents").getAll()),
      ]);
      this.#contextLength = context.length;
      const agents = {};
      agentKeys.forEach(([id], i) => (agents[id] ??= []).push(agentLines[i]));
      this.#agentLengths = new Map(Object.entries(agents).map(([id, l]) => [id, l.length]));
      return { context, events, meta: meta ?? null, agents };
    } catch (e) {
      await this.close();
      throw e;
    }
  }

  /** One transaction: every op is stored, or none. */
  write(ops) {
    if (!this.#db) return Promise.reject(new Error("IndexedDBSessionStore: write before open (or after close)"));
    return new Promise((resolve, reject) => {
      const tx = this.#db.transaction(STORES, "readwrite");
      const context = tx.objectStore("context");
      const events = tx.objectStore("events");
      const agents = tx.objectStore("agents");
      let length = this.#contextLength;
      const agentLengths = new Map(this.#agentLengths);
      tx.oncomplete = () => {
        this.#contextLength = length;
        this.#agentLengths = agentLengths;
        resolve();
      };
      tx.onerror = () => reject(tx.error);
      tx.onabort = () => reject(tx.error ?? new Error("the IndexedDB transaction was aborted"));
      try {
        for (const op of ops) {
          switch (op.op) {
            case "event":
              events.put({ id: op.id, kind: op.kind, data: op.data }, op.id);
              break;
            case "trimEvents":
              events.delete(IDBKeyRange.upperBound(op.before, true));
              break;
            case "truncateEvents":
              events.delete(IDBKeyRange.lowerBound(op.after, true));
              break;
            case "context":
              context.put(op.line, length++);
              break;
            case "truncateContext":
              if (op.keep < length) context.delete(IDBKeyRange.lowerBound(op.keep));
              length = Math.min(length, op.keep);
              break;
            case "agentContext": {
              const n = agentLengths.get(op.agent) ?? 0;
              agents.put(op.line, [op.agent, n]);
              agentLengths.set(op.agent, n + 1);
              break;
            }
            case "truncateAgentContext": {
              const n = agentLengths.get(op.agent) ?? 0;
              if (op.keep < n) agents.delete(IDBKeyRange.bound([op.agent, op.keep], [op.agent, Infinity]));
              agentLengths.set(op.agent, Math.min(n, op.keep));
              break;
            }
            case "meta":
              tx.objectStore("meta").put(op.value, "meta");
              break;
            default:
              throw new TypeError(`a session write has an op this store does not know: ${op.op}`);
          }
        }
      } catch (e) {
        tx.abort();
        reject(e);
      }
    });
  }

  async close() {
    this.#db?.close();
    this.#db = null;
    this.#release?.();
    this.#release = null;
  }
}
