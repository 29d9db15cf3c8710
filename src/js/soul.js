// kimi-cli's soul runtime for the web: Agent (a Soul), runSoul, the Wire (merged and raw
// sides, recording and replay), Context and approvals. The loop runs here, over `step`;
// its rules (tool messages, retries, capabilities, compaction, context.jsonl) are the wasm
// core's.
import { _callWasm as callWasm, _wasm as wasm, _stepWithHistoryJson, generate, SimpleToolset, toolError } from "./api.js";
import { sleep, within } from "./util.js";

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

// ---- small helpers ------------------------------------------------------------------------

/** The wire envelope of a streamed part. */
function partMessage(part) {
  if (part.type === "function") return { type: "ToolCall", payload: part };
  if (part.type === "tool_call_part") return { type: "ToolCallPart", payload: part };
  return { type: "ContentPart", payload: part };
}

// ---- the wire -----------------------------------------------------------------------------

/** One subscriber's queue: messages published after it subscribed, in order. */
class WireUISide {
  #items = [];
  #head = 0;
  #waiters = [];
  #closed = false;
  #onDetach;

  constructor(onDetach) {
    this.#onDetach = onDetach;
  }

  _push(msg) {
    if (this.#closed) return;
    const w = this.#waiters.shift();
    if (w) w.resolve(msg);
    else this.#items.push(msg);
  }

  _close() {
    this.#closed = true;
    for (const w of this.#waiters.splice(0)) w.reject(new QueueShutDown());
  }

  /** The next message; rejects with `QueueShutDown` once the wire has shut down and all were read. */
  receive() {
    if (this.#head < this.#items.length) {
      const msg = this.#items[this.#head];
      this.#items[this.#head++] = undefined;
      if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
        this.#items = this.#items.slice(this.#head);
        this.#head = 0;
      }
      return Promise.resolve(msg);
    }
    if (this.#closed) return Promise.reject(new QueueShutDown());
    return new Promise((resolve, reject) => this.#waiters.push({ resolve, reject }));
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
        this._close();
        this.#onDetach(this);
        return { value: undefined, done: true };
      },
    };
  }
}

function mergeInto(buffer, msg) {
  const a = buffer.payload;
  const b = msg.payload;
  if (buffer.type === "ContentPart" && msg.type === "ContentPart") {
    if (a.type === "text" && b.type === "text") {
      a.text += b.text;
      return true;
    }
    if (a.type === "think" && b.type === "think" && !a.encrypted) {
      a.think += b.think;
      if (b.encrypted) a.encrypted = b.encrypted;
      return true;
    }
    return false;
  }
  if (msg.type !== "ToolCallPart") return false;
  const piece = b.arguments_part;
  if (buffer.type === "ToolCall" && (b.tool_call_id === undefined || b.tool_call_id === a.id)) {
    if (piece != null) a.function.arguments = (a.function.arguments ?? "") + piece;
    return true;
  }
  if (buffer.type === "ToolCallPart" && b.tool_call_id === a.tool_call_id) {
    if (piece != null) a.arguments_part = (a.arguments_part ?? "") + piece;
    return true;
  }
  return false;
}

const MERGEABLE = new Set(["ContentPart", "ToolCall", "ToolCallPart"]);

/**
 * The channel between a soul and its UI for one run. The raw side sees every message; the
 * merged side joins consecutive text, think and tool-call fragments and flushes on any
 * other message. A subscriber sees what is published after it subscribed.
 */
export class Wire {
  #raw = new Set();
  #merged = new Set();
  #buffer = null;
  #shut = false;
  #pending = new Map();

  uiSide({ merge = false } = {}) {
    const set = merge ? this.#merged : this.#raw;
    const side = new WireUISide((s) => set.delete(s));
    if (this.#shut) side._close();
    else set.add(side);
    return side;
  }

  /** The soul side: publish a message (`{type, payload}`). Ignored after shutdown. */
  send(msg) {
    if (this.#shut) return;
    if (!msg || typeof msg.type !== "string") throw new TypeError("a wire message is {type: string, payload: object}");
    for (const s of this.#raw) s._push(msg);
    if (MERGEABLE.has(msg.type)) {
      if (this.#buffer && mergeInto(this.#buffer, msg)) return;
      this.#flush();
      this.#buffer = structuredClone(msg);
    } else {
      this.#flush();
      this.#publishMerged(msg);
    }
  }

  #flush() {
    if (this.#buffer) {
      const b = this.#buffer;
      this.#buffer = null;
      this.#publishMerged(b);
    }
  }

  #publishMerged(msg) {
    for (const s of this.#merged) s._push(msg);
  }

  /** Answers an `ApprovalRequest` published on this wire. */
  respond(requestId, response, feedback = "") {
    if (!["approve", "approve_for_session", "reject"].includes(response)) {
      throw new TypeError(`response must be "approve", "approve_for_session" or "reject"; got ${String(response)}`);
    }
    const waiter = this.#pending.get(requestId);
    if (!waiter) throw new Error(`No approval request ${requestId} is waiting on this wire`);
    waiter({ response, feedback: String(feedback ?? "") });
  }

  /** @internal Publishes an `ApprovalRequest` and waits; cancellation or shutdown rejects it. */
  async _requestApproval(payload, signal) {
    const id = payload.id;
    let settle;
    const answered = new Promise((r) => (settle = r));
    const onAbort = () => settle({ response: "reject", feedback: "" });
    this.#pending.set(id, settle);
    signal?.addEventListener("abort", onAbort, { once: true });
    if (signal?.aborted || this.#shut) onAbort();
    try {
      this.send({ type: "ApprovalRequest", payload });
      const answer = await answered;
      this.send({ type: "ApprovalResponse", payload: { request_id: id, response: answer.response, feedback: answer.feedback } });
      return answer;
    } finally {
      this.#pending.delete(id);
      signal?.removeEventListener("abort", onAbort);
    }
  }

  /** Flushes the merge buffer and ends every side (after what they already hold). */
  shutdown() {
    if (this.#shut) return;
    this.#flush();
    this.#shut = true;
    for (const settle of this.#pending.values()) settle({ response: "reject", feedback: "" });
    for (const s of [...this.#raw, ...this.#merged]) s._close();
  }
}

// ---- recording and replay -------------------------------------------------------------------

export const WIRE_PROTOCOL_VERSION = "1.10";

/** Writes a run's merged messages in kimi-cli's `wire.jsonl` format through `sink(line)`. */
export class WireRecorder {
  #sink;
  #wroteHeader = false;
  #done = Promise.resolve();
  #count = 0;
  error = null;

  constructor(sink) {
    if (typeof sink !== "function") throw new TypeError("WireRecorder needs a sink function (jsonLine) => void | Promise<void>");
    this.#sink = sink;
  }

  /** How many messages have been written. */
  get count() {
    return this.#count;
  }

  #write(line) {
    this.#done = this.#done.then(() => this.#sink(line)).catch((e) => {
      this.error ??= e;
    });
  }

  /** @internal Records every merged message of `wire`; resolves when all are written. */
  _attach(wire) {
    const side = wire.uiSide({ merge: true });
    return (async () => {
      for await (const message of side) {
        if (!this.#wroteHeader) {
          this.#wroteHeader = true;
          this.#write(JSON.stringify({ type: "metadata", protocol_version: WIRE_PROTOCOL_VERSION }));
        }
        this.#write(JSON.stringify({ timestamp: Date.now() / 1000, message }));
        this.#count++;
      }
      await this.#done;
    })();
  }
}

/** Reads `wire.jsonl` back into messages, skipping the metadata line and damaged lines. */
export function readWireRecord(jsonl) {
  if (typeof jsonl !== "string") throw new TypeError("readWireRecord takes the text of a wire.jsonl file");
  const out = [];
  for (const line of jsonl.split(/\r?\n/)) {
    if (!line.trim()) continue;
    let rec;
    try {
      rec = JSON.parse(line);
    } catch {
      continue;
    }
    const m = rec?.message;
    if (rec?.type === "metadata" || !m || typeof m.type !== "string" || typeof m.payload !== "object" || m.payload === null) continue;
    out.push(m);
  }
  return out;
}

// ---- context --------------------------------------------------------------------------------

/**
 * A conversation's history with checkpoints and a token count, stored as kimi-cli's
 * `context.jsonl` lines through `sink`. After `revertTo` or `clear`, `onRewrite(text)` gets
 * the whole new file (a sink can only append).
 */
export class Context {
  #core;
  #sink;
  #onRewrite;
  #history = null;

  constructor({ systemPrompt, sink, onRewrite } = {}, core) {
    if (sink !== undefined && typeof sink !== "function") throw new TypeError("Context: sink must be a function");
    if (onRewrite !== undefined && typeof onRewrite !== "function") throw new TypeError("Context: onRewrite must be a function");
    this.#core = core ?? callWasm(() => new wasm.ContextCore());
    this.#sink = sink;
    this.#onRewrite = onRewrite;
    if (typeof systemPrompt === "string") this.#emit(callWasm(() => this.#core.writeSystemPrompt(systemPrompt)));
  }

  #emit(line) {
    this.#history = null;
    this.#sink?.(line);
  }

  /** The messages, oldest first (a frozen snapshot). */
  get history() {
    this.#history ??= Object.freeze(JSON.parse(this._historyJson()));
    return this.#history;
  }

  /** @internal */
  _historyJson() {
    return callWasm(() => this.#core.historyJson());
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
    const [id, line] = callWasm(() => this.#core.checkpoint());
    this.#emit(line);
    return id;
  }

  /** Drops checkpoint `id` and everything after it. */
  revertTo(id) {
    callWasm(() => this.#core.revertTo(id));
    this.#history = null;
    this.#onRewrite?.(this.toJSONL());
  }

  /** Appends one message or several. */
  append(messages) {
    const list = Array.isArray(messages) ? messages : [messages];
    for (const line of callWasm(() => this.#core.append(JSON.stringify(list)))) this.#emit(line);
  }

  /** Records the token count the provider reported. */
  updateTokenCount(n) {
    this.#emit(callWasm(() => this.#core.updateTokenCount(n)));
  }

  clear() {
    callWasm(() => this.#core.clear());
    this.#history = null;
    this.#onRewrite?.("");
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

const REPEAT_LIMIT = 12;

function usageTotal(u) {
  return u.input_other + u.input_cache_read + u.input_cache_creation + u.output;
}

/**
 * A Soul: each turn loops `step` until the model stops calling tools, publishing every
 * part, tool result and status on the run's wire. Retries, compaction and approvals as
 * kimi-cli does them.
 */
export class Agent {
  #name;
  #provider;
  #systemPrompt;
  #toolset;
  #context;
  #maxSteps;
  #maxRetries;
  #maxContextTokens;
  #capabilities;
  #yolo;
  #logger;
  #limits;
  #backoff;
  #approvedForSession = new Set();

  constructor(opts) {
    if (!opts || typeof opts !== "object") throw new TypeError("Agent needs options: {provider, systemPrompt, …}");
    const { name = "agent", provider = null, systemPrompt = "", toolset, context, maxStepsPerTurn = 100, maxRetriesPerStep = 3,
      maxContextTokens = 0, capabilities, yolo = false, logger, limits, retryBackoff = {} } = opts;
    if (typeof systemPrompt !== "string") throw new TypeError("Agent: systemPrompt must be a string");
    if (!Number.isInteger(maxStepsPerTurn) || maxStepsPerTurn < 1) throw new TypeError("Agent: maxStepsPerTurn must be a positive integer");
    if (!Number.isInteger(maxRetriesPerStep) || maxRetriesPerStep < 1) throw new TypeError("Agent: maxRetriesPerStep must be a positive integer (attempts per step)");
    if (capabilities !== undefined && !Array.isArray(capabilities)) throw new TypeError("Agent: capabilities must be an array of strings");
    this.#name = name;
    this.#provider = provider;
    this.#systemPrompt = systemPrompt;
    this.#toolset = toolset ?? new SimpleToolset();
    this.#context = context ?? new Context();
    this.#maxSteps = maxStepsPerTurn;
    this.#maxRetries = maxRetriesPerStep;
    this.#maxContextTokens = maxContextTokens;
    this.#capabilities = capabilities;
    this.#yolo = Boolean(yolo);
    this.#logger = logger;
    this.#limits = limits;
    for (const [key, v] of Object.entries(retryBackoff ?? {})) {
      if (!["initialMs", "maxMs", "jitterMs"].includes(key)) throw new TypeError(`Agent: retryBackoff has no \`${key}\` (initialMs, maxMs, jitterMs)`);
      if (!(typeof v === "number" && v >= 0)) throw new TypeError(`Agent: retryBackoff.${key} must be a number ≥ 0`);
    }
    this.#backoff = { initialMs: NaN, maxMs: NaN, jitterMs: NaN, ...retryBackoff };
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
    const tokens = this.#context.tokenCount;
    const max = this.#maxContextTokens;
    return { context_usage: max > 0 ? tokens / max : 0, context_tokens: tokens, max_context_tokens: max, yolo_enabled: this.#yolo };
  }

  #checkCapabilities(message) {
    if (!this.#capabilities) return;
    const missing = callWasm(() => wasm.missingCapabilities(JSON.stringify(message), this.#capabilities));
    if (missing.length) throw new LLMNotSupported(this.modelName, missing);
  }

  /** Runs one turn. `run` comes from `runSoul`: `{wire, signal, send, requestApproval}`. */
  async run(userInput, run) {
    const { wire, signal } = run;
    const send = (type, payload = {}) => wire.send({ type, payload });
    send("TurnBegin", { user_input: userInput });
    try {
      if (!this.#provider) throw new LLMNotSet();
      const userMessage = { role: "user", content: userInput };
      this.#checkCapabilities(userMessage);
      this.#context.checkpoint();
      this.#context.append(userMessage);
      const repeat = { key: null, count: 0 };
      for (let n = 1; ; n++) {
        if (n > this.#maxSteps) throw new MaxStepsReached(this.#maxSteps);
        send("StepBegin", { n });
        let finished;
        try {
          if (callWasm(() => wasm.shouldCompact(this.#context.tokenCount, this.#maxContextTokens))) await this.#compact(run, n);
          this.#context.checkpoint();
          finished = await this.#step(run, n, repeat);
        } catch (e) {
          if (!signal?.aborted) send("StepInterrupted", {});
          throw e;
        }
        if (finished) break;
      }
    } finally {
      send("TurnEnd", {});
    }
  }

  /** Calls `attempt` with kimi-cli's retry rules, announcing each retry on the wire. */
  async #withRetries(run, n, attempt) {
    for (let i = 1; ; i++) {
      try {
        return await attempt();
      } catch (e) {
        if (run.signal?.aborted) throw run.signal.reason;
        const status = typeof e?.status === "number" ? e.status : undefined;
        const retryAfter = typeof e?.retryAfterMs === "number" ? e.retryAfterMs : undefined;
        const b = this.#backoff;
        const wait = i >= this.#maxRetries ? -1 : callWasm(() => wasm.retryWaitMs(String(e?.name), status, i, retryAfter, Math.random(), b.initialMs, b.maxMs, b.jitterMs));
        if (wait < 0) throw e;
        run.wire.send({
          type: "StepRetry",
          payload: { n, next_attempt: i + 1, max_attempts: this.#maxRetries, wait_s: wait / 1000, error_type: String(e?.name), status_code: status ?? null },
        });
        await sleep(wait, run.signal);
      }
    }
  }

  /** One step; true when the turn is over. */
  async #step(run, n, repeat) {
    const { wire, signal } = run;
    const rejected = new Map();
    // Results by call id, across this step's attempts: a retried attempt that streams the
    // very same call (same id, name and arguments) gets the result it already has instead
    // of running the tool a second time, and the UI is not told twice.
    const finished = new Map();
    const calls = new Map();
    const toolset = this.#runToolset(run, rejected, calls, finished);
    const settle = (r) => (rejected.has(r.tool_call_id) ? rejectedResult(r, rejected) : r);
    const published = new Set();
    const result = await this.#withRetries(run, n, () =>
      _stepWithHistoryJson(this.#provider, this.#systemPrompt, toolset, this.#context._historyJson(), {
        signal,
        logger: this.#logger,
        limits: this.#limits,
        onMessagePart: (part) => wire.send(partMessage(part)),
        onToolResult: (r) => {
          finished.set(r.tool_call_id, r);
          if (published.has(r.tool_call_id)) return;
          published.add(r.tool_call_id);
          wire.send({ type: "ToolResult", payload: settle(r) });
        },
      }),
    );
    const tokens = result.usage ? usageTotal(result.usage) : this.#context.tokenCount;
    const max = this.#maxContextTokens;
    wire.send({
      type: "StatusUpdate",
      payload: { context_usage: max > 0 ? tokens / max : null, context_tokens: tokens, max_context_tokens: max || null, token_usage: result.usage, message_id: result.id },
    });
    let results;
    try {
      results = (await result.toolResults()).map(settle);
    } catch (e) {
      if (signal?.aborted) {
        // Cancelled while tools ran: the context keeps the call and a result for each one
        // (what finished, and "aborted" for the rest), so no tool call is left unanswered.
        const settled = result.toolCalls.map((c) => {
          if (finished.has(c.id)) return settle(finished.get(c.id));
          const aborted = abortedResult(c.id);
          wire.send({ type: "ToolResult", payload: aborted });
          return aborted;
        });
        this.#grow(result, settled);
      }
      throw e;
    }
    this.#grow(result, results);
    for (const call of result.toolCalls) {
      const key = `${call.function.name}\u0000${call.function.arguments ?? ""}`;
      repeat.count = key === repeat.key ? repeat.count + 1 : 1;
      repeat.key = key;
      if (repeat.count >= REPEAT_LIMIT) throw new RepeatedToolCallError(call.function.name, repeat.count);
    }
    // A rejected call returns the turn to the user, as kimi-cli does.
    return result.toolCalls.length === 0 || rejected.size > 0;
  }

  /** Appends a step's message, its usage and one tool message per result. */
  #grow(result, results) {
    const toolMessages = results.map((r) => JSON.parse(callWasm(() => wasm.toolResultToMessage(JSON.stringify(r)))));
    for (const m of toolMessages) this.#checkCapabilities(m);
    this.#context.append(result.message);
    if (result.usage) this.#context.updateTokenCount(usageTotal(result.usage));
    this.#context.append(toolMessages);
  }

  /** The toolset as this run's tools see it: their context gains `send` and `requestApproval`. */
  #runToolset(run, rejected, calls, finished) {
    const inner = this.#toolset;
    const sameCall = (a, b) => a && a.function.name === b.function.name && (a.function.arguments ?? "") === (b.function.arguments ?? "");
    return {
      tools: inner.tools,
      handle: (call, ctx) => {
        if (finished.has(call.id) && sameCall(calls.get(call.id), call)) return finished.get(call.id);
        calls.set(call.id, call);
        return inner.handle(call, {
          ...ctx,
          send: run.send,
          requestApproval: async ({ action, description } = {}) => {
            if (typeof action !== "string" || !action) throw new TypeError("requestApproval needs an `action` string");
            if (this.#yolo || this.#approvedForSession.has(action)) return true;
            const { response, feedback } = await run.requestApproval({
              tool_call_id: ctx.toolCallId,
              sender: this.#name,
              action,
              description: String(description ?? ""),
            });
            if (response === "approve_for_session") this.#approvedForSession.add(action);
            if (response === "reject") rejected.set(ctx.toolCallId, feedback);
            return response !== "reject";
          },
        });
      },
    };
  }

  async #compact(run, n) {
    run.wire.send({ type: "CompactionBegin", payload: {} });
    const prepared = callWasm(() => wasm.compactionPrepare(this.#context._historyJson()));
    if (prepared) {
      const [askJson, keptJson] = prepared;
      const summary = await this.#withRetries(run, n, () =>
        generate(this.#provider, callWasm(() => wasm.compactionSystemPrompt()), [], [JSON.parse(askJson)], { signal: run.signal }),
      );
      const compacted = JSON.parse(callWasm(() => wasm.compactionBuild(JSON.stringify(summary.message), keptJson)));
      this.#context.clear();
      this.#context.checkpoint();
      this.#context.append(compacted);
    }
    run.wire.send({ type: "CompactionEnd", payload: {} });
  }
}

function abortedResult(toolCallId) {
  return {
    tool_call_id: toolCallId,
    return_value: toolError({ message: "The tool call was aborted: the user cancelled the run before it finished.", brief: "Aborted" }),
  };
}

function rejectedResult(r, rejected) {
  const feedback = rejected.get(r.tool_call_id);
  const message = feedback
    ? `The user rejected this tool call. Their feedback: ${feedback}`
    : "The user rejected this tool call. Wait for new instructions from the user.";
  return { tool_call_id: r.tool_call_id, return_value: toolError({ message, brief: "Rejected by user" }) };
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
  const recording = recorder?._attach(wire);
  const run = {
    wire,
    signal,
    send: (message) => wire.send(message),
    requestApproval: (req) => wire._requestApproval({ id: crypto.randomUUID(), display: [], ...req }, signal),
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
    onAbort = resolve;
    if (signal.aborted) resolve();
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
    if (recording) await recording;
    await within(uiDone, UI_LOOP_GRACE_MS);
  }
  if (outcome.cancelled) throw new RunCancelled("The run was cancelled", { cause: signal.reason });
  if (outcome.error !== undefined) throw outcome.error;
}
