// ChaosProvider: wraps a provider and injects, with given probabilities and a seed, the
// faults real networks and models produce — HTTP 429 (with Retry-After) and 5xx answers, a
// stream cut mid-event or between events, a tool call whose final `}` is lost, slow chunks —
// through the provider's real fetch path, so retries and error classes run for real. A
// ScriptedProvider inside is served as an OpenAI-compatible SSE stream for the same reason.
import { callWasm, wasm } from "./internal.js";
import { checkOptionNames, sleep } from "./util.js";
import { FallbackProvider, ScriptedProvider } from "./providers.js";

/** mulberry32: small, fast, and the same sequence for the same seed everywhere (the soak test's too). */
export function mulberry32(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const DEFAULT_ERROR_TYPES = [429, 500, 502, 503];

function probability(v, name) {
  if (v === undefined) return 0;
  if (typeof v !== "number" || !(v >= 0 && v <= 1)) throw new TypeError(`ChaosProvider: ${name} must be a number from 0 to 1`);
  return v;
}

/** Removes the final `}` of one tool call's arguments in an SSE body; null when it has no call. */
function corruptToolCall(sse, random) {
  const events = sse.split("\n\n");
  const lastFragment = new Map(); // call index -> [event position, parsed chunk]
  for (let i = 0; i < events.length; i++) {
    const data = events[i].startsWith("data: ") ? events[i].slice(6) : null;
    if (!data || data === "[DONE]") continue;
    let chunk;
    try {
      chunk = JSON.parse(data);
    } catch {
      continue;
    }
    for (const tc of chunk.choices?.[0]?.delta?.tool_calls ?? []) {
      if (typeof tc.function?.arguments === "string" && tc.function.arguments.includes("}")) lastFragment.set(tc.index, [i, chunk]);
    }
  }
  if (lastFragment.size === 0) return null;
  const keys = [...lastFragment.keys()];
  const target = keys[Math.floor(random() * keys.length)];
  const [pos, chunk] = lastFragment.get(target);
  for (const tc of chunk.choices[0].delta.tool_calls) {
    if (tc.index === target) {
      const a = tc.function.arguments;
      const cut = a.lastIndexOf("}");
      tc.function.arguments = a.slice(0, cut) + a.slice(cut + 1);
    }
  }
  events[pos] = `data: ${JSON.stringify(chunk)}`;
  return events.join("\n\n");
}

/**
 * Wraps any provider of this package and injects faults (see the file's header). Options:
 * `errorProbability` (an HTTP error instead of an answer), `errorTypes` (statuses, default
 * 429/500/502/503), `retryAfterS` (the 429's `Retry-After`, default 1), `truncateStreamProbability`
 * (the connection breaks mid-event or between events), `corruptToolCallProbability`,
 * `slowChunkProbability` and `slowChunkMs`, and `seed` for repeatable runs. A request that
 * failed by an injected fault is replayed on the next call, as a transient fault would be. The
 * fault is drawn when a request is sent (each redirect hop is a request).
 */
/**
 * The faults a ChaosProvider injects, and their state. Kept apart from the provider: the core
 * holds the fetch that reaches them, and a provider reachable from its own core would never be
 * collected.
 */
class Faults {
  constructor(inner, opts) {
    this.inner = inner;
    this.opts = opts;
    this.random = mulberry32(opts.seed);
    this.replay = null;
    this.injected = { http: 0, truncateMidEvent: 0, truncateBetweenEvents: 0, corruptToolCall: 0, slowChunks: 0 };
  }

  /** Which fault the next response gets (drawn when its request is sent). */
  plan() {
    const r = this.random;
    const o = this.opts;
    const plan = { error: null, truncate: null, corrupt: false, slow: o.slowChunkProbability };
    if (r() < o.errorProbability) plan.error = o.errorTypes[Math.floor(r() * o.errorTypes.length)];
    else if (r() < o.truncateStreamProbability) plan.truncate = r() < 0.5 ? "mid" : "between";
    else if (r() < o.corruptToolCallProbability) plan.corrupt = true;
    return plan;
  }

  async fetch(url, init, scripted, innerFetch) {
    const signal = init?.signal;
    if (signal?.aborted) throw signal.reason;
    const r = this.random;
    const o = this.opts;
    const plan = this.plan();
    if (plan.error) {
      this.injected.http += 1;
      const headers = { "content-type": "application/json" };
      if (plan.error === 429) headers["retry-after"] = String(o.retryAfterS);
      return new Response(JSON.stringify({ error: { message: `chaos: injected HTTP ${plan.error}`, type: "chaos" } }), { status: plan.error, headers });
    }
    let text;
    let headers;
    if (scripted) {
      // A transient fault: the retry sees the same answer.
      text = this.replay ?? callWasm(() => wasm.echoScriptSse(this.inner._core.takeScript()));
      this.replay = plan.truncate ? text : null;
      headers = { "content-type": "text/event-stream" };
    } else {
      const res = await innerFetch(url, init);
      if (!res.ok || !res.body) return res;
      text = await res.text();
      headers = res.headers;
    }
    if (plan.corrupt) {
      const corrupted = corruptToolCall(text, r);
      if (corrupted !== null) {
        text = corrupted;
        this.injected.corruptToolCall += 1;
      }
    }
    let cutAt = null;
    if (plan.truncate) {
      const boundaries = [];
      for (let i = text.indexOf("\n\n"); i !== -1; i = text.indexOf("\n\n", i + 2)) boundaries.push(i + 2);
      const k = Math.floor(r() * Math.max(1, boundaries.length - 1));
      if (plan.truncate === "between") {
        cutAt = boundaries[k] ?? 0;
        this.injected.truncateBetweenEvents += 1;
      } else {
        const start = boundaries[k - 1] ?? 0;
        const end = boundaries[k] ?? text.length;
        cutAt = start + 1 + Math.floor(r() * Math.max(1, end - start - 2));
        this.injected.truncateMidEvent += 1;
      }
    }
    const bytes = new TextEncoder().encode(cutAt === null ? text : text.slice(0, cutAt));
    // Random chunk sizes: the decoders must not care where the bytes are cut.
    const chunks = [];
    for (let i = 0; i < bytes.length; ) {
      const n = 1 + Math.floor(r() * 64);
      chunks.push(bytes.subarray(i, i + n));
      i += n;
    }
    const slowness = chunks.map(() => r() < plan.slow);
    let next = 0;
    const stream = new ReadableStream({
      pull: async (controller) => {
        try {
          if (signal?.aborted) throw signal.reason;
          if (next >= chunks.length) {
            if (cutAt !== null) controller.error(new TypeError("chaos: the connection was reset"));
            else controller.close();
            return;
          }
          if (slowness[next]) {
            this.injected.slowChunks += 1;
            await sleep(o.slowChunkMs, signal);
          }
          controller.enqueue(chunks[next++]);
        } catch (e) {
          controller.error(e);
        }
      },
    });
    return new Response(stream, { status: 200, headers });
  }
}

export class ChaosProvider {
  #inner;
  #opts;
  #faults;
  /** What was injected so far, by kind. */
  injected;

  constructor(inner, opts = {}) {
    if (inner === null || typeof inner !== "object" || !("_core" in inner)) throw new TypeError("ChaosProvider wraps one of this package's providers");
    // Its faults go through one fetch: a fallback provider's members each send through their own.
    if (inner instanceof FallbackProvider) throw new TypeError("ChaosProvider wraps one provider, not a FallbackProvider: wrap its members (new FallbackProvider([new ChaosProvider(a), b]))");
    checkOptionNames(opts ?? {}, "ChaosProvider", ["errorProbability", "truncateStreamProbability", "corruptToolCallProbability", "slowChunkProbability", "slowChunkMs", "errorTypes", "retryAfterS", "seed"]);
    const errorTypes = opts.errorTypes ?? DEFAULT_ERROR_TYPES;
    if (!Array.isArray(errorTypes) || errorTypes.length === 0 || errorTypes.some((s) => !Number.isInteger(Number(s)) || Number(s) < 400 || Number(s) > 599)) {
      throw new TypeError("ChaosProvider: errorTypes must be HTTP error statuses (400-599)");
    }
    this.#inner = inner;
    this.#opts = {
      errorProbability: probability(opts.errorProbability, "errorProbability"),
      truncateStreamProbability: probability(opts.truncateStreamProbability, "truncateStreamProbability"),
      corruptToolCallProbability: probability(opts.corruptToolCallProbability, "corruptToolCallProbability"),
      slowChunkProbability: probability(opts.slowChunkProbability, "slowChunkProbability"),
      slowChunkMs: opts.slowChunkMs ?? 50,
      errorTypes: errorTypes.map(Number),
      retryAfterS: opts.retryAfterS ?? 1,
      seed: opts.seed ?? Math.floor(Math.random() * 2 ** 32),
    };
    this.#faults = new Faults(inner, this.#opts);
    this.injected = this.#faults.injected;
  }

  get name() {
    return `chaos(${this.#inner.name})`;
  }
  get modelName() {
    return this.#inner.modelName;
  }
  get thinkingEffort() {
    return this.#inner.thinkingEffort;
  }
  withThinking(effort) {
    return new ChaosProvider(this.#inner.withThinking(effort), this.#opts);
  }

  /**
   * @internal The inner provider as the core reads it, sending through the faults: an HTTP
   * provider's own request builder and decoder over its own fetch; a ScriptedProvider's scripts
   * (its core's queue) served as Chat Completions SSE to an OpenAI-compatible provider.
   */
  get _core() {
    if (this.#core === null) {
      const inner = this.#inner;
      const scripted = inner instanceof ScriptedProvider;
      const innerFetch = scripted ? null : (inner._fetch ?? globalThis.fetch);
      const faults = this.#faults;
      const fetch = (url, init) => faults.fetch(url, init, scripted, innerFetch);
      this.#core = scripted
        ? callWasm(() => new wasm.ProviderCore("ChaosProvider", JSON.stringify({ kind: "openai", model: "scripted_echo", baseUrl: "http://chaos.invalid/v1" }), fetch))
        : inner._core.withFetch(fetch);
    }
    return this.#core;
  }
  #core = null;

}
