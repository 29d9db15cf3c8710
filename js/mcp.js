// McpToolset: the Toolset protocol over a connected MCP client (`@modelcontextprotocol/sdk`'s
// `Client`, or any object with its `listTools`/`callTool`/`setNotificationHandler` shape). The
// package depends on no MCP code: the caller brings the client and its transport.
import { SimpleToolset, toolError, toolOk } from "./tools.js";
import { checkLogger, checkOptionNames, describeThrown } from "./util.js";

const LIST_CHANGED = "notifications/tools/list_changed";
/**
 * The notification's schema as the SDK's `setNotificationHandler` reads one (a Zod v3 object's
 * shape: `shape.method._def.value`, and `safeParse`), without depending on Zod.
 */
const LIST_CHANGED_SCHEMA = Object.freeze({
  method: LIST_CHANGED,
  shape: { method: { _def: { value: LIST_CHANGED } } },
  safeParse: (data) => ({ success: true, data }),
});

/** Bounds on one listing: pages of a cursor, and tools kept (each cut is told to the logger). */
const MAX_PAGES = 1000;
const MAX_TOOLS = 10_000;

/** An MCP content block as kosong parts (text, images and audio as data URLs, resources as text). */
function partsOf(block) {
  switch (block?.type) {
    case "text":
      return [{ type: "text", text: String(block.text ?? "") }];
    case "image":
      return [{ type: "image_url", image_url: { url: `data:${block.mimeType ?? "image/png"};base64,${block.data ?? ""}` } }];
    case "audio":
      return [{ type: "audio_url", audio_url: { url: `data:${block.mimeType ?? "audio/wav"};base64,${block.data ?? ""}` } }];
    case "resource_link": {
      const about = [block.mimeType, block.description].filter(Boolean).join("; ");
      return [{ type: "text", text: `Resource link: ${block.name ?? block.uri} <${block.uri}>${about ? ` (${about})` : ""}` }];
    }
    case "resource": {
      const r = block.resource ?? {};
      if (typeof r.text === "string") return [{ type: "text", text: `Resource ${r.uri}${r.mimeType ? ` (${r.mimeType})` : ""}:\n${r.text}` }];
      if (typeof r.blob === "string" && /^image\//.test(r.mimeType ?? "")) return [{ type: "image_url", image_url: { url: `data:${r.mimeType};base64,${r.blob}` } }];
      return [{ type: "text", text: `Resource ${r.uri} (${r.mimeType ?? "binary"}, ${Math.floor(((r.blob ?? "").length * 3) / 4)} bytes, not shown)` }];
    }
    default:
      return [{ type: "text", text: JSON.stringify(block) }];
  }
}

/** A `tools/call` result as a kosong return value. */
function returnValueOf(result, name) {
  const parts = (Array.isArray(result?.content) ? result.content : []).flatMap(partsOf);
  if (parts.length === 0 && result?.structuredContent !== undefined) parts.push({ type: "text", text: JSON.stringify(result.structuredContent) });
  const output = parts.length === 1 && parts[0].type === "text" ? parts[0].text : parts;
  const text = parts.filter((p) => p.type === "text").map((p) => p.text).join("\n");
  if (result?.isError) return toolError({ message: text || `MCP tool \`${name}\` reported an error`, brief: "MCP tool error", output });
  return toolOk({ output });
}

/** What a thrown error from `callTool` says. */
const said = describeThrown;

export class McpToolset {
  #client;
  #prefix;
  #timeoutMs;
  #onChanged;
  #logger;
  #tools = Object.freeze([]);
  #byName = new Map(); // our name -> the server's
  /** The listed tools as a SimpleToolset: names, definitions, lookup, arguments and results by the core's rules. */
  #set = new SimpleToolset();
  /** Each refresh's number: a listing applies only if no later one began (the last one wins). */
  #generation = 0;

  constructor(client, options = {}) {
    if (!client || typeof client.listTools !== "function" || typeof client.callTool !== "function") {
      throw new TypeError("McpToolset needs a connected MCP client (an object with listTools and callTool, like @modelcontextprotocol/sdk's Client)");
    }
    const { prefix = "", timeoutMs, onToolsChanged, logger, ...rest } = options ?? {};
    checkOptionNames(rest, "McpToolset", ["prefix", "timeoutMs", "onToolsChanged", "logger"]);
    const log = checkLogger(logger, "McpToolset: logger");
    if (typeof prefix !== "string" || (prefix && !/^[a-zA-Z0-9_-]{1,32}$/.test(prefix))) throw new TypeError("McpToolset: prefix must be up to 32 letters, digits, `_` or `-`");
    if (timeoutMs !== undefined && !(Number.isFinite(timeoutMs) && timeoutMs > 0)) throw new TypeError("McpToolset: timeoutMs must be a positive number");
    if (onToolsChanged !== undefined && typeof onToolsChanged !== "function") throw new TypeError("McpToolset: onToolsChanged must be a function");
    this.#client = client;
    this.#prefix = prefix;
    this.#timeoutMs = timeoutMs;
    this.#onChanged = onToolsChanged;
    this.#logger = log ?? { warn: () => {} };
  }

  /**
   * A toolset over `client` (connected), with its tools listed. The list is fetched again when the
   * server sends `notifications/tools/list_changed` (this replaces any handler the client had for
   * that notification); a step that begins before the new list arrived sees the old one.
   */
  static async fromClient(client, options) {
    const t = new McpToolset(client, options);
    await t.refresh();
    if (typeof client.setNotificationHandler === "function") {
      client.setNotificationHandler(LIST_CHANGED_SCHEMA, () => {
        t.refresh().catch(() => {}); // the old list stays; the next change tries again
      });
    }
    return t;
  }

  /**
   * Lists the server's tools again (every page, within bounds). Re-lists may overlap (two
   * `list_changed` in a row): the one begun last wins, whatever order they answer in. Names are
   * made stable: a tool keeps the name it had; names that collide once made valid (`a.b`, `a_b`)
   * are told apart in the order of the server's names, not of the listing, and reported.
   */
  refresh() {
    const generation = ++this.#generation;
    return (async () => {
      const listed = [];
      let cursor;
      let page = 0;
      for (; page < MAX_PAGES; page++) {
        const r = await this.#client.listTools(cursor === undefined ? {} : { cursor });
        for (const t of Array.isArray(r?.tools) ? r.tools : []) if (listed.length < MAX_TOOLS + 1) listed.push(t); // no spread: a page may hold 200,000
        cursor = r?.nextCursor;
        if (!cursor) break;
      }
      if (generation !== this.#generation) return this.#tools; // a later listing began: it decides
      if (page === MAX_PAGES) this.#logger.warn(`kosong-wasm: McpToolset: the server's tool list did not end after ${MAX_PAGES} pages; the tools listed so far are used`, { pages: MAX_PAGES });
      if (listed.length > MAX_TOOLS) {
        this.#logger.warn(`kosong-wasm: McpToolset: the server lists more than ${MAX_TOOLS} tools; the first ${MAX_TOOLS} are used`, { limit: MAX_TOOLS });
        listed.length = MAX_TOOLS;
      }
      const { set, byName } = this.#named(listed);
      this.#set = set;
      this.#tools = Object.freeze(set.tools.map((t) => Object.freeze(t)));
      this.#byName = byName;
      this.#onChanged?.(this.#tools);
      return this.#tools;
    })();
  }

  /** Our names for the server's tools: the prefix, invalid characters as `_`, at most 64, unique and stable. */
  #named(listed) {
    const valid = (s) => `${this.#prefix}${s}`.replace(/[^a-zA-Z0-9_-]/g, "_").slice(0, 64);
    const before = new Map([...this.#byName].map(([ours, theirs]) => [theirs, ours]));
    const seen = new Set();
    const entries = [];
    for (const t of listed) {
      if (typeof t?.name !== "string" || t.name === "" || seen.has(t.name)) continue;
      seen.add(t.name);
      entries.push(t);
    }
    const byName = new Map();
    const taken = new Set();
    const ours = new Map(); // the server's name -> ours
    // A tool keeps its name from the last listing when it still fits.
    for (const t of entries) {
      const kept = before.get(t.name);
      if (kept !== undefined && !taken.has(kept)) {
        taken.add(kept);
        ours.set(t.name, kept);
      }
    }
    // The rest: a name that needed no change gets it (when free); the others their made-valid name,
    // or with a suffix when that is taken, in the order of the server's names.
    const rest = entries.filter((t) => !ours.has(t.name)).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    let collided = 0;
    for (const t of rest.filter((t) => valid(t.name) === `${this.#prefix}${t.name}`)) {
      if (!taken.has(valid(t.name))) {
        taken.add(valid(t.name));
        ours.set(t.name, valid(t.name));
      }
    }
    for (const t of rest) {
      if (ours.has(t.name)) continue;
      const base = valid(t.name);
      let name = base;
      for (let n = 2; taken.has(name); n++) name = `${base.slice(0, 64 - String(n).length - 1)}_${n}`;
      if (name !== base) collided++;
      taken.add(name);
      ours.set(t.name, name);
    }
    if (collided) this.#logger.warn(`kosong-wasm: McpToolset: ${collided} tool name(s) collide once made valid for the providers; they are told apart with a suffix (_2, _3, …)`, { collided });
    // The core's registry takes each tool by its rules (the name, an object schema, the default
    // parameters for none); a schema it refuses is replaced by the default one, and said.
    const set = new SimpleToolset();
    for (const t of entries) {
      const name = ours.get(t.name);
      const original = t.name;
      const about = [t.description, t.title].find((d) => typeof d === "string") ?? "";
      const tool = { name, description: about, parameters: t.inputSchema ?? undefined, handler: (args, ctx) => this.#call(original, args, ctx) };
      try {
        set.add(tool);
      } catch (e) {
        this.#logger.warn(`kosong-wasm: McpToolset: tool \`${original}\`: ${said(e)}; it is offered with the default parameters`, { tool: original });
        set.add({ ...tool, parameters: undefined });
      }
      byName.set(name, original);
    }
    return { set, byName };
  }

  get tools() {
    return this.#tools;
  }

  /**
   * kosong's Toolset `handle`, by the same rules as a SimpleToolset's (an unknown tool, arguments
   * that are not JSON, what the result is): the listing is one.
   */
  handle(call, ctx) {
    return this.#set.handle(call, ctx);
  }

  /** Calls the tool on the server, with the call's signal (an abort is MCP cancellation) and the timeout. */
  async #call(original, args, ctx) {
    const options = { signal: ctx?.signal };
    if (this.#timeoutMs !== undefined) options.timeout = this.#timeoutMs;
    try {
      return returnValueOf(await this.#client.callTool({ name: original, arguments: args }, undefined, options), original);
    } catch (e) {
      if (ctx?.signal?.aborted) throw ctx.signal.reason;
      const timedOut = /timed out|timeout/i.test(said(e)) || e?.code === -32001;
      const after = this.#timeoutMs === undefined ? "(the MCP client's own timeout)" : `after ${this.#timeoutMs} ms`;
      const message = timedOut ? `MCP tool \`${original}\` timed out ${after}` : `MCP tool \`${original}\` failed: ${said(e)}`;
      return toolError({ message, brief: timedOut ? "MCP tool timed out" : "MCP tool failed" });
    }
  }
}
