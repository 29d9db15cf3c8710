// The providers: immutable option holders, checked once, and read once by the core when first
// used (`_core`, a `ProviderCore`): the core builds every request, reads every answer and owns
// the API-key rule.
import { callWasm, wasm } from "./internal.js";
import { checkOptionNames } from "./util.js";


// The core's list (src/engine/providers/mod.rs), put in when the package is built.
const EFFORTS = "@core:THINKING_EFFORTS@";

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

const COMMON_OPTIONS = ["model", "apiKey", "baseUrl", "headers", "fetch", "timeoutMs", "firstChunkTimeoutMs", "stepTimeoutMs", "maxTokens", "temperature", "thinking", "extraBody"];

function checkProviderOptions(opts, who, known) {
  if (!opts || typeof opts !== "object") throw new TypeError(`${who}: options must be an object ({model, …})`);
  // Names first: a misspelt \`modle\` is told as that, with the name it was meant to be.
  checkOptionNames(opts, who, known);
  checkHttpOptions(opts, who);
  if (opts.thinking !== undefined) checkEffort(opts.thinking);
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
  for (const k of ["adaptiveThinking", "background"]) {
    if (opts[k] !== undefined && typeof opts[k] !== "boolean") throw new TypeError(`${who}: \`${k}\` must be a boolean`);
  }
}

/**
 * The HTTP providers: one class per wire format, the options checked once, immutable. `own`:
 * the options this provider takes besides the common ones, and the environment variables its
 * official SDK reads the key from.
 */
class HttpProvider {
  #opts;
  constructor(opts, who, { options = [] } = {}) {
    if (opts && typeof opts === "object" && "baseURL" in opts) {
      // The OpenAI SDK's spelling, taken as an alias.
      const { baseURL, ...rest } = opts;
      if (rest.baseUrl !== undefined && rest.baseUrl !== baseURL) throw new TypeError(`${who}: \`baseUrl\` and \`baseURL\` differ; give one`);
      opts = { ...rest, baseUrl: baseURL };
    }
    checkProviderOptions(opts, who, [...COMMON_OPTIONS, ...options]);
    this.#opts = { ...opts };
    // Read once by the core, now: its rules for the values (a positive `maxTokens`, an http(s)
    // `baseUrl` without credentials, …) fail here, in the constructor.
    this.#core = this.#read(who);
  }
  #core;
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
  /**
   * @internal The provider read once by the core (when it was made): its request builder, its
   * decoder and the rule for its API key (from the options, else the environment when a request
   * is made, else an error before anything is sent).
   */
  get _core() {
    return this.#core;
  }
  #read(who) {
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
      background: o.background,
      extraBody: o.extraBody,
      thinkingEffort: o.thinking,
      firstChunkTimeoutMs: o.firstChunkTimeoutMs,
      stepTimeoutMs: o.stepTimeoutMs,
    };
    return callWasm(() => new wasm.ProviderCore(who, JSON.stringify(spec), o.fetch, o.timeoutMs));
  }
  /** @internal The `fetch` this provider was given (`ChaosProvider` sends through it). */
  get _fetch() {
    return this.#opts.fetch;
  }
  toJSON() {
    return { name: this.name, modelName: this.modelName };
  }
}

/** OpenAI Chat Completions, and every OpenAI-compatible server. */
export class OpenAIChatProvider extends HttpProvider {
  constructor(opts) {
    super(opts, "OpenAIChatProvider", { options: ["reasoningKey"] });
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
    super(opts, "KimiProvider", { options: [] });
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
    super(opts, "AnthropicProvider", { options: ["adaptiveThinking"] });
  }
  get name() {
    return "anthropic";
  }
  get _kind() {
    return "anthropic";
  }
}

/**
 * OpenAI's Responses API (stateless: `store: false`, reasoning carried as encrypted content; with
 * `background: true` the answer is kept server-side, read again after a broken stream, cancelled
 * when nobody reads it).
 */
export class OpenAIResponsesProvider extends HttpProvider {
  constructor(opts) {
    super(opts, "OpenAIResponsesProvider", { options: ["reasoningEffort", "background"] });
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
    super(opts, "GeminiProvider", { options: [] });
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
  #core;
  constructor(scripts) {
    if (!Array.isArray(scripts) || scripts.some((s) => typeof s !== "string")) {
      throw new TypeError("ScriptedProvider: scripts must be an array of strings");
    }
    const queue = [...scripts];
    this.#scripts = queue;
    // The function holds the queue, not this provider: the core holds the function, and a
    // provider reachable from its own core would never be collected.
    this.#core = callWasm(() => wasm.ProviderCore.scripted(() => queue.shift()));
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
  /** A new provider with the scripts this one has not used yet. */
  withThinking(effort) {
    checkEffort(effort);
    return new ScriptedProvider(this.#scripts);
  }
  /**
   * @internal The core's scripted provider: it takes each script from here when a request is
   * made (the scripts stay in JavaScript) and says when none is left.
   */
  get _core() {
    return this.#core;
  }
}

/**
 * Providers tried in order (`new FallbackProvider([primary, backup], {fallbackOn})`): a step moves
 * on to the next when an error outlasts its retries, or at once when its kind (`"missing_key"`) or
 * HTTP status (`401`) is in `fallbackOn`, and stays on it for the rest of the call. The rule is the
 * core's (src/engine/model/fallback.rs); `result.provider` and the wire say which one answered.
 */
export class FallbackProvider {
  #providers;
  #fallbackOn;
  #core;
  constructor(providers, options = {}) {
    const who = "FallbackProvider";
    if (!Array.isArray(providers) || providers.length === 0) throw new TypeError(`${who}: give a non-empty array of providers`);
    if (options === null || typeof options !== "object") throw new TypeError(`${who}: options must be an object ({fallbackOn})`);
    checkOptionNames(options, `${who}: options`, ["fallbackOn"]);
    const fallbackOn = options.fallbackOn ?? [];
    if (!Array.isArray(fallbackOn)) throw new TypeError(`${who}: \`fallbackOn\` must be a list of error kinds and HTTP statuses`);
    const cores = providers.map((p, i) => {
      const core = p !== null && typeof p === "object" ? p._core : undefined;
      if (!(core instanceof wasm.ProviderCore)) throw new TypeError(`${who}: providers[${i}] is not one of this package's providers`);
      return core;
    });
    // A fallback provider among them gives its own members, in its order.
    this.#providers = Object.freeze(providers.flatMap((p) => (p instanceof FallbackProvider ? p.providers : [p])));
    this.#fallbackOn = [...fallbackOn];
    this.#core = callWasm(() => {
      const core = wasm.ProviderCore.fallback(cores[0], JSON.stringify(fallbackOn));
      for (const c of cores.slice(1)) core.addMember(c);
      return core;
    });
  }
  /** The members, in the order they are tried. */
  get providers() {
    return this.#providers;
  }
  get name() {
    return "fallback";
  }
  /** The first member's model. */
  get modelName() {
    return this.#providers[0].modelName;
  }
  get thinkingEffort() {
    return this.#providers[0].thinkingEffort;
  }
  /** A new fallback provider whose members think with `effort`; this one is unchanged. */
  withThinking(effort) {
    return new FallbackProvider(this.#providers.map((p) => p.withThinking(effort)), { fallbackOn: this.#fallbackOn });
  }
  /** @internal The core's value: each member's, and the rule for moving on. */
  get _core() {
    return this.#core;
  }
  /** @internal The member that answered, by its place (`answeredBy` from the engine). */
  _member(index) {
    return this.#providers[index] ?? this;
  }
  toJSON() {
    return { name: this.name, providers: this.#providers.map((p) => p.toJSON?.() ?? p.name) };
  }
}
