// kimi-cli's soul runtime for the web: Agent (a Soul), runSoul, the Wire (merged and raw
// sides, recording and replay) and Context. Thin wrappers: the turn loop, the wire's merge
// rules, approvals, the recorder and the context are the wasm core's (src/core/soul/).
import { callWasm, wasm } from "./internal.js";
import { SimpleToolset } from "./tools.js";
import { within } from "./util.js";

// ---- errors -----------------------------------------------------------------------------

export class RunCancelled extends Error {
  constructor(message = "The run was cancelled", options) {
    super(message, options);
    this.name = "RunCancelled";
  }
}
export class MaxStepsReached extends Error {
  constructor(nSteps) {
    super(`Max number of steps reached: ${nSteps}`);
    this.name = "MaxStepsReached";
    this.nSteps = nSteps;
  }
}
export class LLMNotSet extends Error {
  constructor() {
    super("LLM not set");
    this.name = "LLMNotSet";
  }
}
export class LLMNotSupported extends Error {
  constructor(modelName, capabilities) {
    const noun = capabilities.length === 1 ? "capability" : "capabilities";
    super(`LLM model '${modelName}' does not support required ${noun}: ${capabilities.join(", ")}.`);
    this.name = "LLMNotSupported";
    this.modelName = modelName;
    this.capabilities = capabilities;
  }
}
/** The model called the same tool with the same arguments too many times in a row. */
export class RepeatedToolCallError extends Error {
  constructor(toolName, count) {
    super(`The model called \`${toolName}\` with the same arguments ${count} times in a row; the turn was stopped.`);
    this.name = "RepeatedToolCallError";
    this.toolName = toolName;
    this.count = count;
  }
}
/** `receive()` on a wire side after the wire shut down and every message was read. */
export class QueueShutDown extends Error {
  constructor() {
    super("The wire has shut down");
    this.name = "QueueShutDown";
  }
}

/** The core's `{turnError, …}` as this module's error classes. */
function turnError(e) {
  switch (e !== null && typeof e === "object" ? e.turnError : undefined) {
    case "LLMNotSet":
      return new LLMNotSet();
    case "LLMNotSupported":
      return new LLMNotSupported(e.modelName, e.capabilities);
    case "MaxStepsReached":
      return new MaxStepsReached(e.nSteps);
    case "RepeatedToolCallError":
      return new RepeatedToolCallError(e.toolName, e.count);
    default:
      return e;
  }
}

// ---- the wire -----------------------------------------------------------------------------

let wireCoreOf;
let contextCoreOf;

/** One subscriber: messages published after it subscribed, taken from the core in batches. */
class WireUISide {
  #core;
  #batch = [];
  #head = 0;

  constructor(core) {
    this.#core = core;
  }

  /** The next message; rejects with `QueueShutDown` once the wire has shut down and all were read. */
  async receive() {
    for (;;) {
      if (this.#head < this.#batch.length) {
        const m = this.#batch[this.#head];
        this.#batch[this.#head++] = undefined;
        return m;
      }
      const batch = callWasm(() => this.#core.take()); // every message that is ready, in one call
      if (batch.length) {
        this.#batch = batch;
        this.#head = 0;
        continue;
      }
      if (this.#core.finished) throw new QueueShutDown();
      await this.#core.wait();
    }
  }

  [Symbol.asyncIterator]() {
    return {
      next: async () => {
        try {
          return { value: await this.receive(), done: false };
        } catch (e) {
          if (e instanceof QueueShutDown) return { value: undefined, done: true };
          throw e;
        }
      },
      return: async () => {
        this.#core.detach();
        return { value: undefined, done: true };
      },
    };
  }
}

/**
 * The channel between a soul and its UI for one run. The raw side sees every message; the
 * merged side joins consecutive text, think and tool-call fragments and flushes on any
 * other message. A subscriber sees what is published after it subscribed.
 */
export class Wire {
  #core = callWasm(() => new wasm.WireCore());

  static {
    wireCoreOf = (w) => w.#core;
  }

  uiSide({ merge = false } = {}) {
    return new WireUISide(this.#core.uiSide(Boolean(merge)));
  }

  /** The soul side: publish a message (`{type, payload}`). Ignored after shutdown. */
  send(msg) {
    if (!msg || typeof msg.type !== "string") throw new TypeError("a wire message is {type: string, payload: object}");
    callWasm(() => this.#core.send(msg));
  }

  /** Answers an `ApprovalRequest` published on this wire. */
  respond(requestId, response, feedback = "") {
    if (typeof response !== "string") {
      throw new TypeError(`response must be "approve", "approve_for_session" or "reject"; got ${String(response)}`);
    }
    callWasm(() => this.#core.respond(String(requestId), response, String(feedback ?? "")));
  }

  /** Flushes the merge buffer and ends every side (after what they already hold). */
  shutdown() {
    callWasm(() => this.#core.shutdown());
  }
}

// ---- recording and replay -------------------------------------------------------------------

export const WIRE_PROTOCOL_VERSION = "1.10";

/** Writes a run's merged messages in kimi-cli's `wire.jsonl` format through `sink(line)`. */
export class WireRecorder {
  #sink;
  #done = Promise.resolve();
  #wire = null;
  error = null;

  constructor(sink) {
    if (typeof sink !== "function") throw new TypeError("WireRecorder needs a sink function (jsonLine) => void | Promise<void>");
    this.#sink = sink;
  }

  /** How many messages have been written. */
  get count() {
    return this.#wire ? this.#wire.recorded : 0;
  }

  /** @internal Records every merged message of `wire` (lines reach the sink in order, one write at a time). */
  _attach(wire) {
    this.#wire = wireCoreOf(wire);
    this.#wire.setRecorder((line) => {
      this.#done = this.#done.then(() => this.#sink(line)).catch((e) => {
        this.error ??= e;
      });
    });
  }

  /** @internal Resolves when every line handed over so far was written. */
  _written() {
    return this.#done;
  }
}

/** Reads `wire.jsonl` back into messages, skipping the metadata line and damaged lines. */
export function readWireRecord(jsonl) {
  if (typeof jsonl !== "string") throw new TypeError("readWireRecord takes the text of a wire.jsonl file");
  return callWasm(() => wasm.readWireRecord(jsonl));
}

// ---- context --------------------------------------------------------------------------------

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
    contextCoreOf = (c) => c.#core;
  }

  constructor({ systemPrompt, sink, onRewrite } = {}, core) {
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
    if (typeof text !== "string") throw new TypeError("Context.fromJSONL takes the text of a context.jsonl file");
    const core = callWasm(() => wasm.ContextCore.fromJSONL(text));
    return new Context({ sink: options.sink, onRewrite: options.onRewrite }, core);
  }
}

// ---- the agent ------------------------------------------------------------------------------

const BACKOFF_KEYS = ["initialMs", "maxMs", "jitterMs"];

/**
 * A Soul: each turn steps until the model stops calling tools, publishing every part, tool
 * result and status on the run's wire, with kimi-cli's retries, compaction, approvals and
 * repeated-call rules. The turn runs in the wasm core; this class holds its options.
 */
export class Agent {
  #core;
  #name;
  #provider;
  #toolset;
  #context;
  #logger;
  #limits;

  constructor(opts) {
    if (!opts || typeof opts !== "object") throw new TypeError("Agent needs options: {provider, systemPrompt, …}");
    const { name = "agent", provider = null, systemPrompt = "", toolset, context, maxStepsPerTurn = 100, maxRetriesPerStep = 3,
      maxContextTokens = 0, capabilities, yolo = false, logger, limits, retryBackoff = {} } = opts;
    if (typeof name !== "string") throw new TypeError("Agent: name must be a string");
    if (typeof systemPrompt !== "string") throw new TypeError("Agent: systemPrompt must be a string");
    if (!Number.isInteger(maxStepsPerTurn) || maxStepsPerTurn < 1) throw new TypeError("Agent: maxStepsPerTurn must be a positive integer");
    if (!Number.isInteger(maxRetriesPerStep) || maxRetriesPerStep < 1) throw new TypeError("Agent: maxRetriesPerStep must be a positive integer (attempts per step)");
    if (!(typeof maxContextTokens === "number" && maxContextTokens >= 0)) throw new TypeError("Agent: maxContextTokens must be a number ≥ 0");
    if (capabilities !== undefined && !(Array.isArray(capabilities) && capabilities.every((c) => typeof c === "string"))) {
      throw new TypeError("Agent: capabilities must be an array of strings");
    }
    if (provider !== null && typeof provider?._request !== "function") {
      throw new TypeError("Agent: provider must be one of this package's providers (OpenAIChatProvider, ScriptedProvider, …) or null");
    }
    const tools = toolset ?? new SimpleToolset();
    if (typeof tools.handle !== "function" || !Array.isArray(tools.tools)) {
      throw new TypeError("Agent: toolset must have a `tools` array and a `handle(call, ctx)` method");
    }
    if (context !== undefined && !(context instanceof Context)) throw new TypeError("Agent: context must be a Context");
    if (logger !== undefined && logger !== null && typeof logger.warn !== "function") {
      throw new TypeError("Agent: logger must have a warn(message, fields) method");
    }
    for (const [key, v] of Object.entries(retryBackoff ?? {})) {
      if (!BACKOFF_KEYS.includes(key)) throw new TypeError(`Agent: retryBackoff has no \`${key}\` (initialMs, maxMs, jitterMs)`);
      if (!(typeof v === "number" && v >= 0)) throw new TypeError(`Agent: retryBackoff.${key} must be a number ≥ 0`);
    }
    this.#name = name;
    this.#provider = provider;
    this.#toolset = tools;
    this.#context = context ?? new Context();
    this.#logger = logger;
    this.#limits = limits;
    this.#core = callWasm(() => new wasm.AgentCore({ name, systemPrompt, maxStepsPerTurn, maxRetriesPerStep, maxContextTokens, capabilities,
      yolo: Boolean(yolo), retryBackoff }));
  }

  get name() {
    return this.#name;
  }
  get modelName() {
    return this.#provider?.modelName ?? "";
  }
  get context() {
    return this.#context;
  }
  get status() {
    return callWasm(() => this.#core.status(contextCoreOf(this.#context)));
  }

  /** Runs one turn. `run` comes from `runSoul`: `{wire, signal, send, requestApproval}`. */
  async run(userInput, run) {
    if (!run || !(run.wire instanceof Wire)) throw new TypeError("Agent.run needs the run context runSoul gives it ({wire, signal, …})");
    const logger = this.#logger;
    const hooks = { signal: run.signal ?? undefined, warn: logger ? (message, fields) => logger.warn(message, fields) : undefined, limits: this.#limits };
    try {
      await callWasm(() => this.#core.run(userInput, wireCoreOf(run.wire), contextCoreOf(this.#context), this.#provider, this.#toolset, hooks));
    } catch (e) {
      throw turnError(e);
    }
  }
}

// ---- runSoul --------------------------------------------------------------------------------

const UI_LOOP_GRACE_MS = 500;
const SOUL_CANCEL_GRACE_MS = 1000;

/**
 * Runs `soul` on `userInput`, connecting it to `uiLoop` through a new Wire. When `signal`
 * aborts, the soul is cancelled (every tool's signal aborts) and this rejects with
 * `RunCancelled`; otherwise the soul's own error is rethrown. Always: the wire is shut down
 * (its merge buffer flushed), the recorder has written every message, and the UI loop had
 * up to 0.5 s to finish.
 */
export async function runSoul(soul, userInput, uiLoop, signal, options = {}) {
  if (!soul || typeof soul.run !== "function") throw new TypeError("runSoul: soul must have a run(userInput, run) method");
  if (typeof uiLoop !== "function") throw new TypeError("runSoul: uiLoop must be a function (wire) => Promise<void>");
  if (!signal || typeof signal.addEventListener !== "function" || !("aborted" in signal)) throw new TypeError("runSoul: signal must be an AbortSignal");
  const { recorder } = options;
  if (recorder !== undefined && !(recorder instanceof WireRecorder)) throw new TypeError("runSoul: options.recorder must be a WireRecorder");

  const wire = new Wire();
  const core = wireCoreOf(wire);
  recorder?._attach(wire);
  const run = {
    wire,
    signal,
    send: (message) => wire.send(message),
    requestApproval: (req) => callWasm(() => core.requestApproval({ id: crypto.randomUUID(), display: [], ...req })),
  };
  // The UI loop starts first: its synchronous part subscribes before the soul publishes.
  // Its own failure does not fail the run.
  let uiDone;
  try {
    uiDone = Promise.resolve(uiLoop(wire)).catch(() => {});
  } catch {
    uiDone = Promise.resolve();
  }
  const soulDone = Promise.resolve().then(() => soul.run(userInput, run));
  soulDone.catch(() => {});

  let onAbort;
  const aborted = new Promise((resolve) => {
    onAbort = () => {
      core.rejectPending(); // a soul waiting on an approval is answered "reject"
      resolve();
    };
    if (signal.aborted) onAbort();
    else signal.addEventListener("abort", onAbort, { once: true });
  });
  let outcome;
  try {
    outcome = await Promise.race([soulDone.then(() => ({ ok: true }), (error) => ({ error })), aborted.then(() => ({ cancelled: true }))]);
    if (outcome.cancelled) {
      // Let the soul finish its cleanup (it publishes TurnEnd), but never wait forever.
      await within(soulDone.catch(() => {}), SOUL_CANCEL_GRACE_MS);
    }
  } finally {
    signal.removeEventListener("abort", onAbort);
    wire.shutdown();
    if (recorder) await recorder._written();
    await within(uiDone, UI_LOOP_GRACE_MS);
  }
  if (outcome.cancelled) throw new RunCancelled("The run was cancelled", { cause: signal.reason });
  if (outcome.error !== undefined) throw outcome.error;
}
