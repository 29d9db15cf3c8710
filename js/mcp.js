// McpToolset: the Toolset protocol over a connected MCP client (`@modelcontextprotocol/sdk`'s
// `Client`, or any object with its `listTools`/`callTool`/`setNotificationHandler` shape). The
// package depends on no MCP code: the caller brings the client and its transport.
import { toolError, toolOk } from "./tools.js";
import { describeThrown } from "./util.js";

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

const NAME_RULE = /^[a-zA-Z0-9_-]{1,64}$/;

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
  #tools = [];
  #byName = new Map(); // our name -> the server's

  constructor(client, options = {}) {
    if (!client || typeof client.listTools !== "function" || typeof client.callTool !== "function") {
      throw new TypeError("McpToolset needs a connected MCP client (an object with listTools and callTool, like @modelcontextprotocol/sdk's Client)");
    }
    const { prefix = "", timeoutMs, onToolsChanged, ...rest } = options ?? {};
    const unknown = Object.keys(rest)[0];
    if (unknown) throw new TypeError(`McpToolset: unknown option \`${unknown}\` (prefix, timeoutMs, onToolsChanged)`);
    if (typeof prefix !== "string" || (prefix && !/^[a-zA-Z0-9_-]{1,32}$/.test(prefix))) throw new TypeError("McpToolset: prefix must be up to 32 letters, digits, `_` or `-`");
    if (timeoutMs !== undefined && !(Number.isFinite(timeoutMs) && timeoutMs > 0)) throw new TypeError("McpToolset: timeoutMs must be a positive number");
    if (onToolsChanged !== undefined && typeof onToolsChanged !== "function") throw new TypeError("McpToolset: onToolsChanged must be a function");
    this.#client = client;
    this.#prefix = prefix;
    this.#timeoutMs = timeoutMs;
    this.#onChanged = onToolsChanged;
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

  /** Lists the server's tools again (every page). */
  refresh() {
    return (async () => {
      const listed = [];
      let cursor;
      for (let page = 0; page < 1000; page++) {
        const r = await this.#client.listTools(cursor === undefined ? {} : { cursor });
        listed.push(...(r?.tools ?? []));
        cursor = r?.nextCursor;
        if (!cursor) break;
      }
      const tools = [];
      const byName = new Map();
      for (const t of listed) {
        if (typeof t?.name !== "string") continue;
        // A name the providers take: the prefix, invalid characters as `_`, 64 characters, unique.
        let name = `${this.#prefix}${t.name}`.replace(/[^a-zA-Z0-9_-]/g, "_").slice(0, 64);
        for (let n = 2; byName.has(name); n++) name = `${name.slice(0, 60)}_${n}`;
        if (!NAME_RULE.test(name)) continue;
        byName.set(name, t.name);
        const parameters = t.inputSchema && typeof t.inputSchema === "object" ? t.inputSchema : { type: "object", properties: {} };
        tools.push(Object.freeze({ name, description: t.description ?? t.title ?? "", parameters }));
      }
      this.#tools = Object.freeze(tools);
      this.#byName = byName;
      this.#onChanged?.(this.#tools);
      return this.#tools;
    })();
  }

  get tools() {
    return this.#tools;
  }

  /** Calls the tool on the server, with the call's signal (an abort is MCP cancellation) and the timeout. */
  async handle(call, ctx) {
    const name = call?.function?.name;
    const result = (rv) => ({ tool_call_id: call.id, return_value: rv });
    const original = this.#byName.get(name);
    if (original === undefined) return result(toolError({ message: `Tool \`${name}\` not found`, brief: `Tool \`${name}\` not found` }));
    let args;
    try {
      args = call.function.arguments ? JSON.parse(call.function.arguments) : {};
    } catch (e) {
      return result(toolError({ message: `Error parsing JSON arguments: ${e.message}`, brief: "Invalid arguments" }));
    }
    const options = { signal: ctx?.signal };
    if (this.#timeoutMs !== undefined) options.timeout = this.#timeoutMs;
    try {
      return result(returnValueOf(await this.#client.callTool({ name: original, arguments: args }, undefined, options), name));
    } catch (e) {
      if (ctx?.signal?.aborted) throw ctx.signal.reason;
      const timedOut = /timed out|timeout/i.test(said(e)) || e?.code === -32001;
      const message = timedOut ? `MCP tool \`${original}\` timed out after ${this.#timeoutMs} ms` : `MCP tool \`${original}\` failed: ${said(e)}`;
      return result(toolError({ message, brief: timedOut ? "MCP tool timed out" : "MCP tool failed" }));
    }
  }
}
