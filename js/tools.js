// Tools: kosong's ToolOk/ToolError, and SimpleToolset over its core (registry, rules and results
// in Rust; the handlers here).
import { callWasm, wasm } from "./internal.js";
import { checkLogger, checkOptionNames, describeThrown, isAsyncFunction, isThenable, stackOf } from "./util.js";


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

/** Where a tool's context keeps the run it is called in (for `Agent.asTool`; not enumerable by JSON). */
export const RUN = Symbol("kosong-wasm run");

/**
 * A plain step's tool context has the run's methods too (so they are typed as present): a step has
 * no wire, so `send` publishes to nobody (as a run's does once nobody listens), and asking
 * (`requestApproval`, `rejection`) fails saying why — a tool never runs as if approved. One class:
 * a context is made as cheaply as an object literal.
 */
const NO_RUN = "a plain step has no wire: run the tool in an agent run (runSoul, a Session, AgentSession)";
class StepContext {
  constructor(toolCallId, signal) {
    this.toolCallId = toolCallId;
    this.signal = signal;
    this.abortSignal = signal;
  }
  send() {}
  requestApproval() {
    return Promise.reject(new Error(`kosong-wasm: ctx.requestApproval: ${NO_RUN}`));
  }
  rejection() {
    throw new Error(`kosong-wasm: ctx.rejection: ${NO_RUN}`);
  }
}

/**
 * The JS end of one toolset's calls in one step or turn; the engine makes one through
 * `toolPort` (installed when the module loads) and holds it (glue/tools.rs `ToolPort`, whose
 * binding names `invoke` and its arguments). `run` (inside an agent run) has the run's `send`,
 * `requestApproval(id, req)` and `rejection(id)`. `simple`: the toolset is a SimpleToolset run by
 * its core — a call the core found a tool for runs its handler here and what it returned goes back
 * as it is (the engine reads it once); otherwise `toolset.handle` answers.
 */
export class ToolPort {
  #toolset;
  #run;
  #simple;
  /** Calls' own controllers, by the engine's number for the call, until each call settles. */
  #own = new Map();

  constructor(toolset, run, simple) {
    this.#toolset = toolset;
    this.#run = run;
    this.#simple = simple;
  }

  /**
   * One call, one crossing: the call's id and name, its `extras` as JSON text (null when it has
   * none), its arguments as a string (checked by the engine as the call completed: for a
   * SimpleToolset the checked text, `{}` for none; for a toolset's own `handle` the model's text,
   * or null), and the call's signal — or, inside a run, none and the call's number `slot`: the
   * call gets a controller of its own, made here (so making it costs the engine no crossing) and
   * aborted through `abort(slot, reason)`. Its context is built here.
   */
  invoke(toolCallId, name, extras, args, signal, slot) {
    const own = signal == null;
    if (own) {
      const ctrl = new AbortController();
      this.#own.set(slot, ctrl);
      signal = ctrl.signal;
    }
    const settled = () => own && this.#own.delete(slot);
    const call = { type: "function", id: toolCallId, function: { name, arguments: args } };
    if (extras != null) call.extras = JSON.parse(extras);
    const toolset = this.#toolset;
    const answer = this.#simple ? (ctx) => toolset._run(call, ctx) : (ctx) => toolset.handle(call, ctx);
    const run = this.#run;
    // `abortSignal`: the AI SDK's name for the signal (its `execute` reads it there).
    // A plain step's calls share its signal (a number comes only inside a run).
    if (run === undefined) return answer(new StepContext(toolCallId, signal));
    // The run's functions serve this call while it runs: once its result is in (or its signal
    // aborted: the engine gave up on it, and the run may be over), `send` is ignored with a
    // warning and `requestApproval` rejects — a tool that kept its ctx cannot reach a finished run.
    let over = false;
    const ended = (what) => `kosong-wasm: ctx.${what} was called after the tool call ${toolCallId} ended (its result was in, or it was aborted)`;
    const live = () => !over && !signal.aborted;
    const ctx = {
      toolCallId,
      signal,
      abortSignal: signal,
      send: (message) => {
        if (live()) return run.send(message);
        console.warn(`${ended("send")}; the message was not sent`);
      },
      requestApproval: (req) => (live() ? run.requestApproval(toolCallId, req) : Promise.reject(new Error(ended("requestApproval")))),
      rejection: () => {
        if (live()) return run.rejection(toolCallId);
        throw new Error(ended("rejection"));
      },
      [RUN]: run.handle,
    };
    let out;
    try {
      out = answer(ctx);
    } catch (e) {
      over = true;
      settled();
      throw e;
    }
    if (isThenable(out)) {
      return Promise.resolve(out).finally(() => {
        over = true;
        settled();
      });
    }
    over = true;
    settled();
    return out;
  }

  /** Aborts call `slot`'s own controller with `reason`, unless the call has settled. */
  abort(slot, reason) {
    const ctrl = this.#own.get(slot);
    if (ctrl === undefined) return;
    this.#own.delete(slot);
    ctrl.abort(reason);
  }

  /** A tool's own `needsApproval(args)` (a SimpleToolset's): a boolean, or a Promise of one. */
  needsApproval(name, args) {
    return this.#toolset._needsApproval(name, JSON.parse(args));
  }
}

/** The engine's factory of ports (installed when the module loads). */
export function toolPort(toolset, run, simple) {
  return new ToolPort(toolset, run, simple);
}

/** A tool definition as the engine takes it: the fields it reads (the core fills in defaults). */
export function definitionOf(tool) {
  return { name: tool?.name, description: tool?.description, parameters: tool?.parameters };
}

/**
 * Tools by name, with kosong's error results (index.d.ts has each one). The registry — names, the rule for
 * them, duplicates, definitions, which tools are eager — and every result are the core's
 * (`SimpleToolsetCore`); the handlers stay here.
 */
/** The keys of a tool definition (`execute` and `inputSchema`: the AI SDK's names for `handler` and `parameters`). */
const TOOL_KEYS = ["name", "description", "parameters", "handler", "eager", "idempotent", "timeoutMs", "needsApproval", "execute", "inputSchema"];

export class SimpleToolset {
  #core;
  #handlers = new Map(); // name -> {handler, parameters}
  #validate;
  #logger;

  constructor(tools = [], options = {}) {
    if (options !== null && options !== undefined) checkOptionNames(options, "SimpleToolset: options", ["validate", "logger"]);
    this.#core = callWasm(() => new wasm.SimpleToolsetCore());
    this.#validate = options?.validate;
    if (this.#validate !== undefined && typeof this.#validate !== "function") {
      throw new TypeError("SimpleToolset: options.validate must be a function");
    }
    if (isAsyncFunction(this.#validate)) throw new TypeError("SimpleToolset: options.validate must answer synchronously (schema, args) => problem; an async function's answer would be a Promise");
    this.#logger = checkLogger(options?.logger, "SimpleToolset: options.logger");
    if (tools !== null && tools !== undefined && !Array.isArray(tools)) throw new TypeError("SimpleToolset: tools must be an array");
    for (const t of tools ?? []) this.add(t);
  }

  /** The validation hook, for structured output checked the same way (internal). */
  get _validate() {
    return this.#validate;
  }

  get tools() {
    return callWasm(() => this.#core.tools());
  }

  /**
   * Adds a tool; a name already taken is a TypeError (`remove` it first to replace it). Every key
   * is checked; the AI SDK's names are taken too: `execute` for `handler`, `inputSchema` for
   * `parameters` (one of each pair).
   */
  add(tool) {
    if (!tool || typeof tool.name !== "string" || !tool.name) throw new TypeError("SimpleToolset.add: a tool needs a non-empty string `name`");
    checkOptionNames(tool, `SimpleToolset.add: tool \`${tool.name}\``, TOOL_KEYS);
    for (const [ours, theirs] of [["handler", "execute"], ["parameters", "inputSchema"]]) {
      if (tool[ours] !== undefined && tool[theirs] !== undefined) throw new TypeError(`SimpleToolset.add: tool \`${tool.name}\` has both \`${ours}\` and \`${theirs}\` (the AI SDK's name for it): give one`);
    }
    if (tool.execute !== undefined || tool.inputSchema !== undefined) {
      const { execute, inputSchema, ...rest } = tool;
      tool = { ...rest, handler: tool.handler ?? execute, parameters: tool.parameters ?? inputSchema };
    }
    if (typeof tool.handler !== "function") throw new TypeError(`SimpleToolset.add: tool \`${tool.name}\` needs a \`handler\` function (or \`execute\`, the AI SDK's name)`);
    if (tool.description !== undefined && typeof tool.description !== "string") throw new TypeError(`SimpleToolset.add: tool \`${tool.name}\`: description must be a string`);
    const [p, standard] = standardSchema(tool.name, tool.parameters);
    const json = p === undefined ? undefined : JSON.stringify(p) ?? "null";
    if (tool.idempotent !== undefined && typeof tool.idempotent !== "boolean") throw new TypeError(`SimpleToolset.add: tool \`${tool.name}\`: idempotent must be a boolean`);
    if (tool.timeoutMs !== undefined && typeof tool.timeoutMs !== "number") throw new TypeError(`SimpleToolset.add: tool \`${tool.name}\`: timeoutMs must be a number`);
    const na = tool.needsApproval;
    if (na !== undefined && typeof na !== "boolean" && typeof na !== "function") throw new TypeError(`SimpleToolset.add: tool \`${tool.name}\`: needsApproval must be a boolean or a function (args) => boolean | Promise<boolean>`);
    callWasm(() => this.#core.add(tool.name, tool.description ?? "", json, tool.eager !== false));
    if (tool.idempotent) callWasm(() => this.#core.setIdempotent(tool.name, true));
    if (na) callWasm(() => this.#core.setNeedsApproval(tool.name, typeof na === "function" ? 2 : 1));
    if (tool.timeoutMs !== undefined) {
      try {
        callWasm(() => this.#core.setTimeoutMs(tool.name, tool.timeoutMs)); // the core's rule
      } catch (e) {
        callWasm(() => this.#core.remove(tool.name));
        throw e;
      }
    }
    this.#handlers.set(tool.name, { name: tool.name, handler: tool.handler, parameters: p, needsApproval: na, standard });
    return this;
  }

  remove(name) {
    callWasm(() => this.#core.remove(name));
    this.#handlers.delete(name);
    return this;
  }

  /**
   * @internal The registry the engine reads (its id), for a SimpleToolset itself; a subclass
   * (which may answer `tools` or `handle` its own way) is run through `tools` and `handle`.
   */
  get _simpleId() {
    return Object.getPrototypeOf(this) === SimpleToolset.prototype && !Object.hasOwn(this, "handle") ? this.#core.id : undefined;
  }

  /** @internal A tool's own `needsApproval` function, asked by the engine before its handler starts. */
  _needsApproval(name, args) {
    const na = this.#handlers.get(name)?.needsApproval;
    return typeof na === "function" ? na(args) : Boolean(na);
  }

  /** @internal The engine's path: a call the core found a tool for; what the handler returned. */
  _run(call, ctx) {
    const tool = this.#handlers.get(call.function.name);
    // The core's checked arguments (`{}` for none: its rule, not repeated here).
    const args = JSON.parse(call.function.arguments);
    try {
      const out = this.#runHandler(tool, args, ctx);
      if (isThenable(out)) {
        return Promise.resolve(out).catch((e) => {
          this.#thrown(call, e);
          throw e;
        });
      }
      return out;
    } catch (e) {
      this.#thrown(call, e);
      throw e;
    }
  }

  handle(call, ctx) {
    const core = this.#core;
    const prepared = callWasm(() => core.prepare(call));
    if (typeof prepared !== "string") return prepared; // answered already: a ToolResult
    const id = call.id;
    const context = { toolCallId: id, ...(ctx && typeof ctx === "object" ? ctx : {}) };
    const thrown = (e) => {
      this.#thrown(call, e);
      return callWasm(() => core.settleThrown(id, e));
    };
    let out;
    try {
      out = this.#runHandler(this.#handlers.get(call.function.name), JSON.parse(prepared), context);
    } catch (e) {
      return thrown(e);
    }
    if (isThenable(out)) {
      return Promise.resolve(out).then((v) => callWasm(() => core.settle(id, v)), thrown);
    }
    return callWasm(() => core.settle(id, out));
  }

  #thrown(call, e) {
    this.#logger?.warn(`kosong-wasm: tool \`${call.function.name}\` threw`, { tool: call.function.name, id: call.id, error: e, stack: stackOf(e) });
  }

  /** Validates and runs a tool's handler (a validator's message becomes kosong's validation error). */
  #runHandler(tool, args, ctx) {
    // In an agent run the engine asked before the handler was called; a plain step has no wire to
    // ask through, and such a tool never runs unapproved.
    if (tool.needsApproval && (typeof ctx?.requestApproval !== "function" || ctx instanceof StepContext)) {
      throw new Error(`tool \`${tool.name}\` has needsApproval: it runs only in an agent run (runSoul, AgentSession), where an approval has a wire to be asked on; a plain step cannot ask`);
    }
    if (this.#validate) {
      const problem = this.#validate(tool.parameters, args);
      if (isThenable(problem)) {
        return callWasm(() => wasm.validationFailed("the validate hook returned a Promise: it must answer synchronously"));
      }
      if (problem) return callWasm(() => wasm.validationFailed(describeThrown(problem)));
    }
    if (tool.standard) {
      // A Standard Schema checks the arguments first; the handler gets what it validated to.
      const checked = (r) => (r?.issues ? callWasm(() => wasm.validationFailed(issuesText(r.issues))) : tool.handler(r?.value, ctx));
      const r = tool.standard.validate(args);
      return isThenable(r) ? Promise.resolve(r).then(checked) : checked(r);
    }
    return tool.handler(args, ctx);
  }
}

/**
 * A tool's `parameters` as a JSON Schema, and its Standard Schema when it is one (zod ≥ 4.2,
 * arktype ≥ 2.1.28, valibot through `toStandardJsonSchema`): the JSON Schema it carries
 * (`~standard.jsonSchema.input`, draft 2020-12, its `$schema` left out) goes to the model.
 */
function standardSchema(name, p) {
  const std = p !== null && typeof p === "object" ? p["~standard"] : undefined;
  if (std === undefined) return [p, null];
  if (!std || typeof std !== "object" || typeof std.validate !== "function") {
    throw new TypeError(`SimpleToolset.add: tool \`${name}\`: parameters has a \`~standard\` that is not a Standard Schema (no validate function)`);
  }
  if (typeof std.jsonSchema?.input !== "function") {
    throw new TypeError(
      `SimpleToolset.add: tool \`${name}\`: parameters is a Standard Schema (${std.vendor}) that carries no JSON Schema (\`~standard.jsonSchema\`) for the model: use zod ≥ 4.2, arktype ≥ 2.1.28 or valibot's toStandardJsonSchema, or give a JSON Schema`,
    );
  }
  const json = std.jsonSchema.input({ target: "draft-2020-12" });
  if (json === null || typeof json !== "object" || Array.isArray(json)) throw new TypeError(`SimpleToolset.add: tool \`${name}\`: its Standard Schema gave no JSON Schema object`);
  const { $schema, ...schema } = json;
  return [schema, std];
}

/** A Standard Schema's issues as one line: `path: message; …`. */
function issuesText(issues) {
  return issues
    .map((i) => {
      const path = Array.isArray(i?.path) ? i.path.map((s) => (s !== null && typeof s === "object" ? s.key : s)).join(".") : "";
      return path ? `${path}: ${i?.message}` : String(i?.message);
    })
    .join("; ");
}
