// The Context: a conversation's history, checkpoints and token count as kimi-cli's
// context.jsonl, owned by the core (ContextCore over src/engine/soul/context.rs).
import { callWasm, wasm } from "./internal.js";
import { checkLogger, checkMessages, checkOptionNames } from "./util.js";

let coreOfContext;

/** @internal The core of a Context (for the agent; not exported by the package). */
export function contextCore(context) {
  return coreOfContext(context);
}

/**
 * A conversation's history with checkpoints and a token count, stored as kimi-cli's
 * `context.jsonl` lines through `sink`. After `revertTo` or `clear`, `onRewrite(text)` gets
 * the whole new file (a sink can only append).
 */
export class Context {
  #core;
  #history = null;
  #version = -1;

  static {
    coreOfContext = (c) => c.#core;
  }

  constructor(options = {}, core) {
    checkOptionNames(options ?? {}, "Context", ["systemPrompt", "sink", "onRewrite"]);
    const { systemPrompt, sink, onRewrite } = options ?? {};
    if (sink !== undefined && typeof sink !== "function") throw new TypeError("Context: sink must be a function");
    if (onRewrite !== undefined && typeof onRewrite !== "function") throw new TypeError("Context: onRewrite must be a function");
    this.#core = core ?? callWasm(() => new wasm.ContextCore());
    if (sink || onRewrite) this.#core.setSink(sink, onRewrite);
    if (typeof systemPrompt === "string") callWasm(() => this.#core.writeSystemPrompt(systemPrompt));
  }

  /** The messages, oldest first (a frozen snapshot, made again only after a change). */
  get history() {
    const v = this.#core.version;
    if (v !== this.#version) {
      this.#history = Object.freeze(callWasm(() => this.#core.history()));
      this.#version = v;
    }
    return this.#history;
  }

  get tokenCount() {
    return this.#core.tokenCount;
  }
  get nCheckpoints() {
    return this.#core.nCheckpoints;
  }
  get systemPrompt() {
    return this.#core.systemPrompt ?? null;
  }

  /** Starts a checkpoint; returns its id. */
  checkpoint() {
    return callWasm(() => this.#core.checkpoint());
  }

  /** Drops checkpoint `id` and everything after it. */
  revertTo(id) {
    if (typeof id !== "number") throw new RangeError(`Checkpoint ${String(id)} does not exist`);
    callWasm(() => this.#core.revertTo(id));
  }

  /** Appends one message or several. */
  append(messages) {
    checkMessages(Array.isArray(messages) ? messages : [messages], "Context.append: message");
    callWasm(() => this.#core.append(messages));
  }

  /** Records the token count the provider reported. */
  updateTokenCount(n) {
    callWasm(() => this.#core.updateTokenCount(Number(n)));
  }

  clear() {
    callWasm(() => this.#core.clear());
  }

  toJSONL() {
    return callWasm(() => this.#core.toJSONL());
  }

  static fromJSONL(text, options = {}) {
    checkOptionNames(options ?? {}, "Context.fromJSONL: options", ["logger", "sink", "onRewrite"]);
    if (typeof text !== "string") throw new TypeError("Context.fromJSONL takes the text of a context.jsonl file");
    const logger = checkLogger(options.logger, "Context.fromJSONL: options.logger");
    // Read as kimi-cli reads it: a damaged or unknown line is skipped (told to the logger: the console by default).
    const warn = logger ? (m, f) => logger.warn(m, f) : () => {};
    const core = callWasm(() => wasm.ContextCore.fromJSONL(text, warn));
    return new Context({ sink: options.sink, onRewrite: options.onRewrite }, core);
  }
}
