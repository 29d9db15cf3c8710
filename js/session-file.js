// FileSessionStore (Node): a session in a directory, as kimi-cli keeps one — `context.jsonl` and
// `wire.jsonl`, which kimi-cli 1.52 reads as they are — plus `session.jsonl` (each turn's end and
// the commit records) and a lock, so one process owns the session at a time.
//
// A write appends to the files in order and makes each durable (fsync) before the next; its last
// op, the meta, is the commit record appended to `session.jsonl`. A process killed mid-write
// leaves lines past the last commit record: the session takes them back when it opens (it knows
// from the record how many context lines and which events were committed). A line cut mid-write
// (no newline) is dropped when read. A wire event is a `wire.jsonl` record with its event id
// added (`"id": n`, which kimi-cli reads past). A sub-agent's context is kimi-cli's
// `subagents/<agent id>/context.jsonl`, written before the commit record as the session's is.
//
// Every entry exports it (one API everywhere); Node's modules are loaded when a store is opened,
// so a browser bundle never resolves them (a browser keeps sessions in IndexedDBSessionStore).
import { SessionLockedError } from "./session.js";

let fs, os, path;
async function nodeModules() {
  if (!fs) {
    const names = ["node:fs/promises", "node:os", "node:path"];
    [fs, os, path] = await Promise.all(names.map((n) => import(/* @vite-ignore */ n)));
  }
}
const openFile = (...a) => fs.open(...a);
const readFile = (...a) => fs.readFile(...a);
const readdir = (...a) => fs.readdir(...a);
const rename = (...a) => fs.rename(...a);
const rm = (...a) => fs.rm(...a);
const mkdir = (...a) => fs.mkdir(...a);
const writeFile = (...a) => fs.writeFile(...a);
const hostname = () => os.hostname();
const join = (...a) => path.join(...a);

/** A sub-agent id as a directory name. */
const AGENT_ID = /^[A-Za-z0-9_-]{1,64}$/;

const METADATA = '{"type":"metadata","protocol_version":"1.10"}';

/**
 * The lines of a file that end with a newline; none if it is missing. A line cut mid-write (no
 * newline) is dropped, and the file is written again without it, so the next append starts clean.
 */
async function lines(path) {
  let text;
  try {
    text = await readFile(path, "utf8");
  } catch (e) {
    if (e.code === "ENOENT") return [];
    throw e;
  }
  const all = text.split("\n");
  const cut = all.pop(); // after the last newline: empty, or a line cut mid-write
  if (cut) await replace(path, all.length ? `${all.join("\n")}\n` : "");
  return all;
}

/** Writes text to a file (`flag` "a": appends; "w": truncates) and makes it durable. */
async function durable(path, text, flag) {
  const fh = await openFile(path, flag);
  try {
    await fh.write(text);
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/** Appends text to a file and makes it durable. */
const append = (path, text) => durable(path, text, "a");

/** Replaces a file whole (a temporary file, made durable, renamed over it). */
async function replace(path, text) {
  await durable(`${path}.tmp`, text, "w");
  await rename(`${path}.tmp`, path);
}

/** Whether a process of this id runs on this machine. */
function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === "EPERM";
  }
}

export class FileSessionStore {
  #dir;
  #owned = false;
  /** Context lines and events as the files hold them, kept to rewrite them after a take-back. */
  #context = [];
  #events = [];
  /** Sub-agents' context lines, by agent id. */
  #agents = new Map();
  /** The last commit record read or written (kept first when session.jsonl is rewritten). */
  #lastMeta = null;

  constructor(dir) {
    if (typeof dir !== "string" || !dir) throw new TypeError("FileSessionStore: dir must be a directory path");
    this.#dir = dir;
  }

  get #files() {
    const d = this.#dir;
    return { context: join(d, "context.jsonl"), wire: join(d, "wire.jsonl"), session: join(d, "session.jsonl"), lock: join(d, "lock") };
  }

  /** Takes the lock: a live process holding it refuses; a dead one's lock is taken over. */
  async #lock() {
    const { lock } = this.#files;
    const me = JSON.stringify({ pid: process.pid, host: hostname(), at: Date.now() });
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        await writeFile(lock, me, { flag: "wx" });
        return;
      } catch (e) {
        if (e.code !== "EEXIST") throw e;
      }
      let holder = null;
      try {
        holder = JSON.parse(await readFile(lock, "utf8"));
      } catch {}
      if (holder && holder.host === hostname() && alive(holder.pid)) {
        throw new SessionLockedError(`the session in ${this.#dir} is owned by process ${holder.pid}`);
      }
      if (holder && holder.host !== hostname()) {
        throw new SessionLockedError(`the session in ${this.#dir} is owned by process ${holder.pid} on ${holder.host}`);
      }
      // Its owner is dead (or the lock was cut mid-write): take it over. A takeover lock makes two
      // processes doing so at once take turns; the loser finds the winner alive and is refused.
      const takeover = `${lock}.takeover`;
      try {
        await writeFile(takeover, me, { flag: "wx" });
      } catch (e) {
        if (e.code !== "EEXIST") throw e;
        throw new SessionLockedError(`the session in ${this.#dir} is being taken over by another process`);
      }
      try {
        const again = await readFile(lock, "utf8").catch(() => null);
        if (again === null || again === JSON.stringify(holder) || !holder) await rm(lock, { force: true });
      } finally {
        await rm(takeover, { force: true });
      }
    }
    throw new SessionLockedError(`the session in ${this.#dir} could not be taken`);
  }

  async open() {
    if (this.#owned) throw new SessionLockedError("this FileSessionStore is open already");
    if (typeof process === "undefined" || !process.versions?.node) throw new TypeError("FileSessionStore keeps sessions in files: it runs in Node (in a browser, use IndexedDBSessionStore)");
    await nodeModules();
    await mkdir(this.#dir, { recursive: true });
    await this.#lock();
    this.#owned = true;
    const f = this.#files;
    this.#context = await lines(f.context);
    this.#agents = new Map();
    let ids = [];
    try {
      ids = await readdir(join(this.#dir, "subagents"));
    } catch (e) {
      if (e.code !== "ENOENT") throw e;
    }
    for (const id of ids) if (AGENT_ID.test(id)) this.#agents.set(id, await lines(this.#agentFile(id)));
    const events = [];
    for (const line of await lines(f.wire)) {
      const m = /,"id":(\d+)\}$/.exec(line);
      if (m) events.push({ id: Number(m[1]), kind: "wire", data: `${line.slice(0, m.index)}}` });
    }
    let meta = null;
    for (const line of await lines(f.session)) {
      let v;
      try {
        v = JSON.parse(line);
      } catch {
        continue;
      }
      if (typeof v.meta === "string" || v.meta === null) meta = v.meta;
      else if (Number.isInteger(v.id) && typeof v.end === "string") events.push({ id: v.id, kind: "end", data: v.end });
      else if (Number.isInteger(v.trimBefore)) keepWhere(events, (e) => e.id >= v.trimBefore);
    }
    events.sort((a, b) => a.id - b.id);
    this.#events = events;
    this.#lastMeta = meta;
    const agents = Object.fromEntries([...this.#agents].map(([id, l]) => [id, [...l]]));
    return { context: [...this.#context], events: events.map((e) => ({ ...e })), meta, agents };
  }

  #agentFile(id) {
    // An agent id is the session's own (`a` and hex); anything else must not name a path.
    if (!AGENT_ID.test(id)) throw new TypeError(`FileSessionStore: a sub-agent id must be letters, digits, _ or -: ${JSON.stringify(id)}`);
    return join(this.#dir, "subagents", id, "context.jsonl");
  }

  async write(ops) {
    if (!this.#owned) throw new Error("FileSessionStore: write before open (or after close)");
    const f = this.#files;
    let wire = "";
    let context = "";
    let ends = "";
    let commit = "";
    let rewriteContext = false;
    let rewriteEvents = false;
    /** Per sub-agent: its lines to append, or to write whole (`rewrite`). */
    const agentWrites = new Map();
    const agentWrite = (id) => {
      let w = agentWrites.get(id);
      if (!w) agentWrites.set(id, (w = { text: "", rewrite: false }));
      if (!this.#agents.has(id)) this.#agents.set(id, []);
      return w;
    };
    for (const op of ops) {
      switch (op.op) {
        case "event":
          this.#events.push({ id: op.id, kind: op.kind, data: op.data });
          if (op.kind === "wire") wire += `${op.data.slice(0, -1)},"id":${op.id}}\n`;
          else ends += `${JSON.stringify({ id: op.id, end: op.data })}\n`;
          break;
        case "trimEvents":
          keepWhere(this.#events, (e) => e.id >= op.before);
          rewriteEvents = true;
          break;
        case "truncateEvents":
          keepWhere(this.#events, (e) => e.id <= op.after);
          rewriteEvents = true;
          break;
        case "context":
          this.#context.push(op.line);
          context += `${op.line}\n`;
          break;
        case "truncateContext":
          this.#context.length = Math.min(this.#context.length, op.keep);
          rewriteContext = true;
          context = this.#context.length ? `${this.#context.join("\n")}\n` : "";
          break;
        case "agentContext": {
          const w = agentWrite(op.agent);
          this.#agents.get(op.agent).push(op.line);
          w.text += `${op.line}\n`;
          break;
        }
        case "truncateAgentContext": {
          const w = agentWrite(op.agent);
          const l = this.#agents.get(op.agent);
          l.length = Math.min(l.length, op.keep);
          w.rewrite = true;
          w.text = l.length ? `${l.join("\n")}\n` : "";
          break;
        }
        case "meta":
          commit = `${JSON.stringify({ meta: op.value })}\n`;
          break;
        default:
          throw new TypeError(`a session write has an op this store does not know: ${op.op}`);
      }
    }
    // The events first, then the context, then the commit record (in session.jsonl, last).
    if (rewriteEvents) {
      const w = this.#events.filter((e) => e.kind === "wire").map((e) => `${e.data.slice(0, -1)},"id":${e.id}}\n`);
      await replace(f.wire, `${METADATA}\n${w.join("")}`);
      const kept = this.#events.filter((e) => e.kind === "end").map((e) => `${JSON.stringify({ id: e.id, end: e.data })}\n`);
      const first = this.#events.length ? this.#events[0].id : 0;
      // The commit record is not in it yet: a death now leaves the last one (read before it).
      await replace(f.session, `${JSON.stringify({ meta: this.#lastMeta })}\n${JSON.stringify({ trimBefore: first })}\n${kept.join("")}`);
      ends = "";
    } else if (wire) {
      const fresh = (await lines(f.wire)).length === 0;
      await append(f.wire, fresh ? `${METADATA}\n${wire}` : wire);
    }
    if (rewriteContext) await replace(f.context, context);
    else if (context) await append(f.context, context);
    for (const [id, w] of agentWrites) {
      const file = this.#agentFile(id);
      await mkdir(join(this.#dir, "subagents", id), { recursive: true });
      if (w.rewrite) await replace(file, w.text);
      else if (w.text) await append(file, w.text);
    }
    await append(f.session, ends + commit);
    if (commit) this.#lastMeta = JSON.parse(commit).meta;
  }

  async close() {
    if (!this.#owned) return;
    this.#owned = false;
    await rm(this.#files.lock, { force: true });
  }
}

function keepWhere(list, keep) {
  let j = 0;
  for (const x of list) if (keep(x)) list[j++] = x;
  list.length = j;
}
