// The JavaScript face of kosong-wasm (API.md). It owns the public classes and converts
// options; the work — HTTP, SSE decoding, assembly, tool dispatch, cancellation — is done by
// the wasm module. Data crosses as JSON text, parsed once on each side.
import wasmInit, * as wasm from "./wasm/kosong_wasm.js";

// ---- errors ---------------------------------------------------------------------------

export class ChatProviderError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = "ChatProviderError";
  }
}
export class APIConnectionError extends ChatProviderError {
  constructor(message, options) {
    super(message, options);
    this.name = "APIConnectionError";
  }
}
export class APITimeoutError extends ChatProviderError {
  constructor(message, options) {
    super(message, options);
    this.name = "APITimeoutError";
  }
}
export class APIEmptyResponseError extends ChatProviderError {
  constructor(message, options) {
    super(message, options);
    this.name = "APIEmptyResponseError";
  }
}
export class APIStatusError extends ChatProviderError {
  constructor(message, { status, requestId = null, retryAfterMs = null } = {}) {
    super(message);
    this.name = "APIStatusError";
    this.status = status;
    this.requestId = requestId;
    this.retryAfterMs = retryAfterMs;
  }
}

const errorClasses = { ChatProviderError, APIConnectionError, APITimeoutError, APIEmptyResponseError };

function makeError(className, message, status, requestId, retryAfterMs) {
  if (className === "APIStatusError") return new APIStatusError(message, { status, requestId, retryAfterMs });
  return new (errorClasses[className] ?? ChatProviderError)(message);
}

// ---- loading --------------------------------------------------------------------------

let ready = false;
let instance = null;

const NOT_READY = Symbol("not ready");
const MAX_BATCH = 1 << 10;

/**
 * @internal The engine's body reader: waits for the next chunk, then takes the chunks the
 * stream already holds without waiting again, and hands them over as one, so the engine
 * crosses into JavaScript and back once per batch, not once per network chunk. Batches stop at
 * 1 KiB (larger batches decode no faster, measured): a tool whose call closes in a batch starts
 * once that batch is decoded, so the reader must not run far ahead of the engine. `st` keeps a
 * read that was started but not ready for the next call. Resolves `null` at the end.
 */
async function readBatch(reader, st) {
  if (st.ended) return null;
  const first = await (st.pending ?? reader.read());
  st.pending = null;
  if (first.done) return null;
  const chunks = [first.value];
  let size = first.value.byteLength;
  while (size < MAX_BATCH) {
    const next = reader.read();
    // A read the stream can answer at once is settled already: its reaction runs before this
    // function resumes from `await null`. One still waiting is kept for the next call.
    let r = NOT_READY;
    next.then(
      (x) => (r = x),
      () => {}, // awaited (and so reported) by the next call
    );
    await null;
    if (r === NOT_READY) {
      st.pending = next;
      break;
    }
    if (r.done) {
      st.ended = true;
      break;
    }
    chunks.push(r.value);
    size += r.value.byteLength;
  }
  // One chunk as is; several as a list, copied by the engine straight into its own memory.
  return chunks.length === 1 ? chunks[0] : chunks;
}

/** @internal Marks the module ready once a runtime entry (or `init`) instantiated it. */
export function _markReady(exports) {
  instance = exports;
  wasm.installErrorFactory(makeError);
  wasm.installBodyReader(readBatch);
  wasm.installPanicReporter((message) => {
    poisoned ??= new Error(message);
  });
  ready = true;
}

/**
 * Instantiates the wasm module (browsers and bundlers; Node and workerd are ready on import).
 * Accepts nothing (the packaged .wasm next to this module), a URL, a Response, bytes or a
 * compiled WebAssembly.Module. Idempotent.
 */
let initializing = null;
export async function init(source) {
  if (ready) return;
  initializing ??= wasmInit(source === undefined ? undefined : { module_or_path: source }).then(_markReady, (e) => {
    initializing = null; // a failed load may be retried (say, with another source)
    throw e;
  });
  await initializing;
}

// A trap in the wasm instance (a bug: the engine never panics on input) leaves it unusable.
// Say so on every later call instead of failing with a confusing error somewhere unrelated.
let poisoned = null;

function notePoison(e) {
  if (e instanceof WebAssembly.RuntimeError) poisoned ??= e;
  return e;
}

/** @internal The instance's linear memory in bytes (it never shrinks: growth is what leaks show as). */
export function _memoryBytes() {
  return instance?.memory?.buffer.byteLength ?? 0;
}

function ensureReady() {
  if (poisoned) {
    throw new Error(`kosong-wasm: the WebAssembly instance crashed earlier (${poisoned.message}) and cannot be used again; reload the page or restart the process. Please report this bug.`, { cause: poisoned });
  }
  if (!ready) throw new Error("kosong-wasm is not initialized yet: `await init()` once before using it");
}

/** Calls into the wasm instance, noting a trap. */
function callWasm(f) {
  ensureReady();
  try {
    const r = f();
    return r instanceof Promise ? r.catch((e) => Promise.reject(notePoison(e))) : r;
  } catch (e) {
    throw notePoison(e);
  }
}

// For the soul runtime (soul.js), not for users: the wasm exports and the guarded call.
export { callWasm as _callWasm, wasm as _wasm };

// ---- tools ----------------------------------------------------------------------------

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

function definitionOf(tool) {
  return { name: tool.name, description: tool.description ?? "", parameters: tool.parameters ?? { type: "object", properties: {} } };
}

/** Tools by name, with kosong's error results (see API.md). */
export class SimpleToolset {
  #core;
  #tools = new Map();
  #validate;

  constructor(tools = [], options = {}) {
    this.#core = callWasm(() => new wasm.SimpleToolsetCore());
    this.#validate = options?.validate;
    if (this.#validate !== undefined && typeof this.#validate !== "function") {
      throw new TypeError("SimpleToolset: options.validate must be a function");
    }
    for (const t of tools ?? []) this.add(t);
  }

  get tools() {
    return [...this.#tools.values()].map((t) => ({ ...definitionOf(t), ...(t.eager === false ? { eager: false } : {}) }));
  }

  add(tool) {
    if (!tool || typeof tool.name !== "string" || !tool.name) throw new TypeError("SimpleToolset.add: a tool needs a non-empty string `name`");
    if (typeof tool.handler !== "function") throw new TypeError(`SimpleToolset.add: tool \`${tool.name}\` needs a \`handler\` function`);
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
    let out;
    try {
      out = runHandler(this.#tools.get(call.function.name), this.#validate, args, context);
    } catch (e) {
      return callWasm(() => core.settleThrown(id, e));
    }
    if (out !== null && typeof out === "object" && typeof out.then === "function") {
      return Promise.resolve(out).then(
        (v) => callWasm(() => core.settle(id, v)),
        (e) => callWasm(() => core.settleThrown(id, e)),
      );
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

// ---- argument previews ----------------------------------------------------------------

/**
 * A best-effort preview of JSON that is still streaming, such as a tool call's arguments.
 * `feed(piece)` returns the edits the piece made, and `value` is kept up to date in place:
 * strings cut mid-way, numbers, arrays and objects so far. Feeding n bytes costs O(n) in
 * total. Text that is not JSON stops the preview (it never throws).
 */
export class PartialJson {
  #core;
  #value = undefined;

  constructor() {
    this.#core = callWasm(() => new wasm.PartialJsonCore());
  }

  /** @returns {Array<{op: "set", path: (string|number)[], value: unknown} | {op: "append", path: (string|number)[], text: string}>} */
  feed(piece) {
    if (typeof piece !== "string") throw new TypeError("PartialJson.feed takes a string");
    const edits = JSON.parse(callWasm(() => this.#core.feed(piece)));
    for (const e of edits) this.#apply(e);
    return edits;
  }

  #apply(e) {
    const { path } = e;
    if (path.length === 0) {
      this.#value = e.op === "set" ? e.value : this.#value + e.text;
      return;
    }
    let parent = this.#value;
    for (let i = 0; i < path.length - 1; i++) parent = parent?.[path[i]];
    if (parent === null || typeof parent !== "object") return;
    const key = path[path.length - 1];
    if (e.op === "set") parent[key] = e.value;
    else parent[key] += e.text;
  }

  /** The value so far (`undefined` before anything could be formed). */
  get value() {
    return this.#value;
  }
  /** The value is complete. */
  get done() {
    return this.#core.done;
  }
  /** The text is not JSON; the preview stopped where it was. */
  get failed() {
    return this.#core.failed;
  }
}

// ---- providers ------------------------------------------------------------------------

const EFFORTS = ["off", "low", "medium", "high", "xhigh", "max"];

function checkEffort(effort) {
  if (!EFFORTS.includes(effort)) throw new TypeError(`thinking effort must be one of ${EFFORTS.join(", ")}; got ${String(effort)}`);
  return effort;
}

function checkHttpOptions(opts, who) {
  if (!opts || typeof opts.model !== "string" || !opts.model) throw new TypeError(`${who}: \`model\` must be a non-empty string`);
  if (opts.fetch !== undefined && typeof opts.fetch !== "function") throw new TypeError(`${who}: \`fetch\` must be a function`);
  if (opts.timeoutMs !== undefined && !(typeof opts.timeoutMs === "number" && opts.timeoutMs > 0)) {
    throw new TypeError(`${who}: \`timeoutMs\` must be a positive number`);
  }
}

function checkProviderOptions(opts, who) {
  checkHttpOptions(opts, who);
  if (opts.thinking !== undefined) checkEffort(opts.thinking);
  if (opts.maxTokens !== undefined && !(Number.isInteger(opts.maxTokens) && opts.maxTokens > 0)) {
    throw new TypeError(`${who}: \`maxTokens\` must be a positive integer`);
  }
  if (opts.temperature !== undefined && typeof opts.temperature !== "number") {
    throw new TypeError(`${who}: \`temperature\` must be a number`);
  }
  if (opts.headers !== undefined) {
    if (opts.headers === null || typeof opts.headers !== "object" || Object.values(opts.headers).some((v) => typeof v !== "string")) {
      throw new TypeError(`${who}: \`headers\` must be an object of strings`);
    }
  }
  if (opts.extraBody !== undefined && (opts.extraBody === null || typeof opts.extraBody !== "object" || Array.isArray(opts.extraBody))) {
    throw new TypeError(`${who}: \`extraBody\` must be an object`);
  }
  for (const k of ["apiKey", "baseUrl", "reasoningKey", "reasoningEffort"]) {
    if (opts[k] !== undefined && typeof opts[k] !== "string") throw new TypeError(`${who}: \`${k}\` must be a string`);
  }
  if (opts.adaptiveThinking !== undefined && typeof opts.adaptiveThinking !== "boolean") {
    throw new TypeError(`${who}: \`adaptiveThinking\` must be a boolean`);
  }
}

/** The HTTP providers: one class per wire format, the options checked once, immutable. */
class HttpProvider {
  #opts;
  constructor(opts, who) {
    checkProviderOptions(opts, who);
    this.#opts = { ...opts };
  }
  get modelName() {
    return this.#opts.model;
  }
  get thinkingEffort() {
    return this.#opts.thinking ?? null;
  }
  /** A new provider of the same kind that thinks with `effort`; this one is unchanged. */
  withThinking(effort) {
    return new this.constructor({ ...this.#opts, thinking: checkEffort(effort) });
  }
  /** @internal What the engine needs for one request. */
  _request() {
    const o = this.#opts;
    const spec = {
      kind: this._kind,
      model: o.model,
      apiKey: o.apiKey,
      baseUrl: o.baseUrl,
      headers: o.headers,
      maxTokens: o.maxTokens,
      temperature: o.temperature,
      reasoningKey: o.reasoningKey,
      reasoningEffort: o.reasoningEffort,
      adaptiveThinking: o.adaptiveThinking,
      extraBody: o.extraBody,
      thinkingEffort: o.thinking,
    };
    return { spec: JSON.stringify(spec), fetch: o.fetch, timeoutMs: o.timeoutMs };
  }
  toJSON() {
    return { name: this.name, modelName: this.modelName };
  }
}

/** OpenAI Chat Completions, and every OpenAI-compatible server. */
export class OpenAIChatProvider extends HttpProvider {
  constructor(opts) {
    super(opts, "OpenAIChatProvider");
  }
  get name() {
    return "openai";
  }
  get _kind() {
    return "openai";
  }
}

/** Moonshot's Kimi API (OpenAI-compatible with Moonshot's rules); base URL https://api.moonshot.ai/v1. */
export class KimiProvider extends HttpProvider {
  constructor(opts) {
    super(opts, "KimiProvider");
  }
  get name() {
    return "kimi";
  }
  get _kind() {
    return "kimi";
  }
}

/** Anthropic's Messages API; base URL https://api.anthropic.com/v1. */
export class AnthropicProvider extends HttpProvider {
  constructor(opts) {
    super(opts, "AnthropicProvider");
  }
  get name() {
    return "anthropic";
  }
  get _kind() {
    return "anthropic";
  }
}

/** OpenAI's Responses API (stateless: `store: false`, reasoning carried as encrypted content). */
export class OpenAIResponsesProvider extends HttpProvider {
  constructor(opts) {
    super(opts, "OpenAIResponsesProvider");
  }
  get name() {
    return "openai-responses";
  }
  get _kind() {
    return "openai_responses";
  }
}

/** Google's Gemini API (generativelanguage.googleapis.com/v1beta). */
export class GeminiProvider extends HttpProvider {
  constructor(opts) {
    super(opts, "GeminiProvider");
  }
  get name() {
    return "gemini";
  }
  get _kind() {
    return "gemini";
  }
}

/** kosong's scripted echo provider: each call streams the next script (echo DSL); no network. */
export class ScriptedProvider {
  #scripts;
  #turn = 0;
  constructor(scripts) {
    if (!Array.isArray(scripts) || scripts.some((s) => typeof s !== "string")) {
      throw new TypeError("ScriptedProvider: scripts must be an array of strings");
    }
    this.#scripts = [...scripts];
  }
  get name() {
    return "scripted_echo";
  }
  get modelName() {
    return "scripted_echo";
  }
  get thinkingEffort() {
    return null;
  }
  withThinking(effort) {
    checkEffort(effort);
    return new ScriptedProvider(this.#scripts);
  }
  /** @internal */
  _request() {
    if (this.#scripts.length === 0) throw new ChatProviderError(`ScriptedProvider exhausted at call ${this.#turn + 1}.`);
    this.#turn += 1;
    return { spec: JSON.stringify({ kind: "scripted", script: this.#scripts.shift() }) };
  }
}

// ---- generate and step ----------------------------------------------------------------

function requestOf(provider) {
  if (!provider || typeof provider._request !== "function") {
    throw new TypeError("provider must be one of this package's providers (OpenAIChatProvider, ScriptedProvider, …)");
  }
  return provider._request();
}

function checkLogger(logger) {
  if (logger !== undefined && logger !== null && typeof logger.warn !== "function") {
    throw new TypeError("options.logger must have a warn(message, fields) method");
  }
}

const LIMIT_KEYS = ["maxEventBytes", "maxToolArgumentsBytes", "maxMessageBytes"];

function checkLimits(limits) {
  if (limits === undefined || limits === null) return;
  if (typeof limits !== "object") throw new TypeError("options.limits must be an object");
  for (const [key, v] of Object.entries(limits)) {
    if (!LIMIT_KEYS.includes(key)) throw new TypeError(`options.limits: unknown limit \`${key}\` (known: ${LIMIT_KEYS.join(", ")})`);
    if (v !== undefined && !(Number.isInteger(v) && v > 0)) throw new TypeError(`options.limits.${key} must be a positive integer`);
  }
}

function checkSignal(signal) {
  if (signal !== undefined && signal !== null && !(typeof signal === "object" && "aborted" in signal && typeof signal.addEventListener === "function")) {
    throw new TypeError("options.signal must be an AbortSignal");
  }
}

function jsonHook(cb) {
  return typeof cb === "function" ? (json) => cb(JSON.parse(json)) : undefined;
}

/** The part hook: `(json)` for most parts, `(id, kind, text)` for deltas (see `call_part_hook`). */
function partHook(cb) {
  if (typeof cb !== "function") return undefined;
  return (json, kind, text) => {
    if (kind === undefined) return cb(JSON.parse(json));
    if (kind === "text") return cb({ type: "text", text });
    if (kind === "think") return cb({ type: "think", think: text });
    return cb({ type: "tool_call_part", arguments_part: text, tool_call_id: json });
  };
}

function historyJson(history) {
  if (!Array.isArray(history)) throw new TypeError("history must be an array of messages");
  return JSON.stringify(history);
}

/** Checks everything first, so a bad argument never uses up a scripted answer. */
function common(provider, systemPrompt, historyJson, options) {
  ensureReady();
  if (typeof systemPrompt !== "string") throw new TypeError("systemPrompt must be a string");
  checkSignal(options.signal);
  checkLogger(options.logger);
  checkLimits(options.limits);
  const req = requestOf(provider);
  return {
    req,
    history: historyJson,
    hooks: {
      onPart: partHook(options.onMessagePart),
      signal: options.signal ?? undefined,
      warn: options.logger ? (message, fields) => options.logger.warn(message, fields) : undefined,
      limits: options.limits ?? undefined,
      fetch: req.fetch,
      timeoutMs: req.timeoutMs,
    },
  };
}

/** One generation (kosong's `generate`). */
export async function generate(provider, systemPrompt, tools, history, options = {}) {
  if (!Array.isArray(tools)) throw new TypeError("tools must be an array of tool definitions");
  const { req, history: h, hooks } = common(provider, systemPrompt, historyJson(history), options);
  hooks.onToolCall = jsonHook(options.onToolCall);
  const raw = await callWasm(() => wasm.runGenerate(req.spec, systemPrompt, JSON.stringify(tools.map(definitionOf)), h, hooks));
  return { id: raw.id, message: JSON.parse(raw.message), usage: raw.usage, finishReason: raw.finishReason };
}

/** The outcome of `step`: the message, and its tools' results in call order. */
export class StepResult {
  #results;
  constructor(raw, results) {
    this.id = raw.id;
    this.message = JSON.parse(raw.message);
    this.usage = raw.usage;
    this.finishReason = raw.finishReason;
    this.toolCalls = this.message.tool_calls ?? [];
    this.#results = results;
    Object.freeze(this);
  }
  /** Results in call order, whatever order the tools finished in. */
  toolResults() {
    return this.#results;
  }
}

/** One step (kosong's `step`): tools start as soon as their calls are complete. */
export async function step(provider, systemPrompt, toolset, history, options = {}) {
  if (!toolset || typeof toolset.handle !== "function" || !Array.isArray(toolset.tools)) {
    throw new TypeError("toolset must have a `tools` array and a `handle(call, ctx)` method");
  }
  const { req, history: h, hooks } = common(provider, systemPrompt, historyJson(history), options);
  const tools = toolset.tools;
  hooks.toolset = toolset;
  hooks.lazyTools = tools.filter((t) => t.eager === false).map((t) => t.name);
  if (typeof options.onToolResult === "function") hooks.onToolResult = jsonHook(options.onToolResult);
  const raw = await callWasm(() => wasm.runStep(req.spec, systemPrompt, JSON.stringify(tools.map(definitionOf)), h, hooks));
  const results = raw.results.then((json) => JSON.parse(json), (e) => Promise.reject(notePoison(e)));
  results.catch(() => {}); // a caller who never asks for the results must not see an unhandled rejection
  return new StepResult(raw, results);
}
