// Tools: kosong's ToolOk/ToolError, and SimpleToolset with kosong's error results (the core
// words the errors; known tools' arguments are parsed here, once, for the handler).
import { callWasm, wasm } from "./internal.js";


function briefDisplay(brief) {
  return brief ? [{ type: "brief", text: brief }] : [];
}

/** kosong's ToolOk. */
export function toolOk({ output = "", message = "", brief = "" } = {}) {
  return { is_error: false, output, message, display: briefDisplay(brief) };
}

/** kosong's ToolError. */
export function toolError({ message, brief, output = "" }) {
  if (typeof message !== "string") throw new TypeError("toolError: message must be a string");
  return { is_error: true, output, message, display: briefDisplay(brief ?? "") };
}

/**
 * The engine's tool call (installed when the module loads): the call arrives as JSON text
 * without its arguments, which come as a string of their own (or null), and
 * its context is built here, so a call leaves wasm once; `run` (inside an agent run) has the
 * run's `send`, `requestApproval(id, req)` and `rejection(id)`.
 */
export function invokeTool(toolset, headJson, args, signal, run) {
  const call = JSON.parse(headJson);
  call.function.arguments = args;
  const toolCallId = call.id;
  if (run === undefined) return toolset.handle(call, { toolCallId, signal });
  // The run's functions serve this call while it runs: once its result is in (or its signal
  // aborted: the engine gave up on it, and the run may be over), `send` is ignored with a warning
  // and `requestApproval` rejects — a tool that kept its ctx cannot reach a finished run.
  let over = false;
  const ended = (what) => `kosong-wasm: ctx.${what} was called after the tool call ${toolCallId} ended (its result was in, or it was aborted)`;
  const live = () => !over && !signal.aborted;
  const ctx = {
    toolCallId,
    signal,
    send: (message) => {
      if (live()) return run.send(message);
      console.warn(`${ended("send")}; the message was not sent`);
    },
    requestApproval: (req) => (live() ? run.requestApproval(toolCallId, req) : Promise.reject(new Error(ended("requestApproval")))),
    rejection: () => {
      if (live()) return run.rejection(toolCallId);
      throw new Error(ended("rejection"));
    },
  };
  let out;
  try {
    out = toolset.handle(call, ctx);
  } catch (e) {
    over = true;
    throw e;
  }
  if (out !== null && typeof out === "object" && typeof out.then === "function") {
    return Promise.resolve(out).finally(() => {
      over = true;
    });
  }
  over = true;
  return out;
}

export function definitionOf(tool) {
  return { name: tool.name, description: tool.description ?? "", parameters: tool.parameters ?? { type: "object", properties: {} } };
}

/** Tools by name, with kosong's error results (see API.md). */
const TOOL_NAME = /^\$?[a-zA-Z0-9_-]{1,64}$/; // what the providers accept (`$`: Moonshot's builtins)

export class SimpleToolset {
  #core;
  #tools = new Map();
  #validate;
  #logger;

  constructor(tools = [], options = {}) {
    this.#core = callWasm(() => new wasm.SimpleToolsetCore());
    this.#validate = options?.validate;
    if (this.#validate !== undefined && typeof this.#validate !== "function") {
      throw new TypeError("SimpleToolset: options.validate must be a function");
    }
    this.#logger = options?.logger ?? undefined;
    if (this.#logger !== undefined && typeof this.#logger?.warn !== "function") {
      throw new TypeError("SimpleToolset: options.logger must have a warn(message, fields) method");
    }
    if (tools !== null && tools !== undefined && !Array.isArray(tools)) throw new TypeError("SimpleToolset: tools must be an array");
    for (const t of tools ?? []) this.add(t);
  }

  get tools() {
    return [...this.#tools.values()].map((t) => ({ ...definitionOf(t), ...(t.eager === false ? { eager: false } : {}) }));
  }

  /** Adds a tool; a name already taken is a TypeError (`remove` it first to replace it). */
  add(tool) {
    if (!tool || typeof tool.name !== "string" || !tool.name) throw new TypeError("SimpleToolset.add: a tool needs a non-empty string `name`");
    if (!TOOL_NAME.test(tool.name)) {
      throw new TypeError(`SimpleToolset.add: tool name \`${tool.name}\` must match ^[a-zA-Z0-9_-]{1,64}$ (what the providers accept)`);
    }
    if (this.#tools.has(tool.name)) throw new TypeError(`SimpleToolset.add: there is already a tool named \`${tool.name}\``);
    if (typeof tool.handler !== "function") throw new TypeError(`SimpleToolset.add: tool \`${tool.name}\` needs a \`handler\` function`);
    const p = tool.parameters;
    if (p !== undefined && (p === null || typeof p !== "object" || Array.isArray(p) || (p.type !== undefined && p.type !== "object"))) {
      throw new TypeError(`SimpleToolset.add: tool \`${tool.name}\`: parameters must be a JSON Schema object ({type: "object", properties: …})`);
    }
    this.#tools.set(tool.name, tool);
    callWasm(() => this.#core.add(tool.name));
    return this;
  }

  remove(name) {
    if (!this.#tools.delete(name)) throw new Error(`Tool \`${name}\` not found in the toolset.`);
    callWasm(() => this.#core.remove(name));
    return this;
  }

  handle(call, ctx) {
    const core = this.#core;
    const id = call?.id;
    const tool = typeof call?.function?.name === "string" ? this.#tools.get(call.function.name) : undefined;
    const raw = call?.function?.arguments;
    // The common case stays in JavaScript: a known tool and arguments that parse (missing or
    // empty arguments mean `{}`). Anything else goes to the core, which words kosong's error.
    let args = UNPARSED;
    if (tool && typeof id === "string" && (raw === undefined || raw === null || typeof raw === "string")) {
      if (!raw) args = {};
      else {
        try {
          args = JSON.parse(raw);
        } catch {}
      }
    }
    if (args === UNPARSED) {
      const prepared = callWasm(() => core.prepare(call));
      if (typeof prepared !== "string") return prepared; // answered already: a ToolResult
      args = JSON.parse(prepared);
    }
    const context = { toolCallId: id, ...(ctx && typeof ctx === "object" ? ctx : {}) };
    const thrown = (e) => {
      this.#logger?.warn(`kosong-wasm: tool \`${call.function.name}\` threw`, { tool: call.function.name, id, error: e, stack: e?.stack });
      return callWasm(() => core.settleThrown(id, e));
    };
    let out;
    try {
      out = runHandler(this.#tools.get(call.function.name), this.#validate, args, context);
    } catch (e) {
      return thrown(e);
    }
    if (out !== null && typeof out === "object" && typeof out.then === "function") {
      return Promise.resolve(out).then((v) => callWasm(() => core.settle(id, v)), thrown);
    }
    return callWasm(() => core.settle(id, out));
  }
}

const UNPARSED = Symbol("unparsed");

/** Validates and runs a tool's handler (a validator's message becomes kosong's validation error). */
function runHandler(tool, validate, args, ctx) {
  if (validate) {
    const problem = validate(tool.parameters, args);
    if (problem) return { __kosongValidate: String(problem) };
  }
  return tool.handler(args, ctx);
}
