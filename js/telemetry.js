// OpenTelemetry spans by the GenAI semantic conventions, without a dependency: the caller gives an
// @opentelemetry/api Tracer (or anything of its shape) as `telemetry: {tracer}`. A model call is a
// `chat {model}` span; each tool call an `execute_tool {name}` span, a child of the model call that
// started it — it starts while that call still streams, which any trace viewer shows. Prompts,
// arguments and results go into spans only with `recordContent: true`; keys never do.
import { checkOptionNames, describeThrown, isThenable } from "./util.js";

/** `server.address` and `server.port` of the origin `provider` sends to (none for a scripted one). */
function serverOf(provider) {
  const origin = provider._core?.origin;
  if (!origin) return {};
  const url = new URL(origin);
  return { "server.address": url.hostname, "server.port": Number(url.port || (url.protocol === "https:" ? 443 : 80)) };
}

/** `gen_ai.provider.name` and the server of `provider` (a fallback provider's first member's). */
function modelAttributes(provider) {
  const attributes = {};
  const first = provider?.providers?.[0] ?? provider;
  const providerName = PROVIDER_NAMES[first?.name];
  if (providerName) attributes["gen_ai.provider.name"] = providerName;
  return first ? Object.assign(attributes, serverOf(first)) : attributes;
}

/**
 * @opentelemetry/api keeps the active span in a Context under this key, created with `Symbol.for`
 * so that every copy of the API reads the others' contexts: a context built here is one the SDK
 * reads as the parent.
 */
const SPAN_KEY = Symbol.for("OpenTelemetry Context Key SPAN");
/** Where a tool call's context keeps its `execute_tool` span's telemetry (a sub-agent's turn is traced inside it). */
export const TRACE = Symbol("kosong-wasm trace");
const SPAN_KIND_INTERNAL = 0;
const SPAN_KIND_CLIENT = 2;
const STATUS_ERROR = 2;

/** A Context (the API's shape) holding `values`, over `base` (the caller's, when given). */
function contextOf(values, base) {
  return {
    getValue: (key) => (values.has(key) ? values.get(key) : base?.getValue?.(key)),
    setValue: (key, value) => contextOf(new Map(values).set(key, value), base),
    deleteValue: (key) => {
      const next = new Map(values);
      next.set(key, undefined);
      return contextOf(next, base);
    },
  };
}

/** `gen_ai.provider.name` for each provider class's `name`. */
const PROVIDER_NAMES = { openai: "openai", openai_responses: "openai", kimi: "moonshot_ai", anthropic: "anthropic", gemini: "gcp.gemini" };

/** The `telemetry` option, checked (`who` names it): `undefined` for none. */
export function telemetryOption(option, who) {
  if (option === undefined || option === null) return undefined;
  if (typeof option !== "object") throw new TypeError(`${who}: telemetry must be an object {tracer, recordContent?, context?}`);
  checkOptionNames(option, `${who}: telemetry`, ["tracer", "recordContent", "context"]);
  if (typeof option.tracer?.startSpan !== "function") throw new TypeError(`${who}: telemetry.tracer must be an OpenTelemetry Tracer (with startSpan)`);
  if (option.recordContent !== undefined && typeof option.recordContent !== "boolean") throw new TypeError(`${who}: telemetry.recordContent must be a boolean`);
  return new Telemetry(option);
}

function failed(span, e) {
  span.setAttribute("error.type", e?.kind ?? e?.name ?? "Error");
  try {
    span.recordException(e instanceof Error ? e : String(describeThrown(e)));
  } catch {}
  span.setStatus({ code: STATUS_ERROR, message: describeThrown(e) });
}

class Telemetry {
  #tracer;
  #content;
  #context;
  /** The model call whose tools are starting now (a tool's span is its child). */
  current = null;

  constructor({ tracer, recordContent = false, context }) {
    this.#tracer = tracer;
    this.#content = recordContent;
    this.#context = context;
  }

  /** The same telemetry for another run (its own current model call): a sub-agent's, traced with its caller's. */
  fork() {
    return new Telemetry({ tracer: this.#tracer, recordContent: this.#content, context: this.#context });
  }

  /**
   * A `chat {model}` span for one model call of `provider`; `end(result)` or `fail(error)` closes
   * it. `within`: the parent's context (an agent turn's span), `startTime` when it began earlier or
   * begins later than now (an attempt after its retry wait). `history` undefined: not known here.
   */
  chat(provider, systemPrompt, history, { within = this.#context, startTime } = {}) {
    const model = provider.modelName;
    const attributes = { "gen_ai.operation.name": "chat", "gen_ai.request.model": model, ...modelAttributes(provider) };
    if (this.#content && history !== undefined) {
      if (systemPrompt) attributes["gen_ai.system_instructions"] = JSON.stringify([{ type: "text", content: systemPrompt }]);
      attributes["gen_ai.input.messages"] = JSON.stringify(history);
    }
    const span = this.#tracer.startSpan(`chat ${model}`, { kind: SPAN_KIND_CLIENT, attributes, ...(startTime ? { startTime } : {}) }, within);
    const started = startTime ? startTime - performance.timeOrigin : performance.now();
    let first = false;
    const call = {
      span,
      /** A part arrived: the first one marks the time to first chunk. */
      part: () => {
        if (first) return;
        first = true;
        span.setAttribute("gen_ai.response.time_to_first_chunk", (performance.now() - started) / 1000);
      },
      /** The answer's stream broke and the same answer is read again after `after`: an event of this span, not a second call. */
      reconnected: (after) => span.addEvent("kosong.answer.reconnect", { "kosong.answer.starting_after": after }),
      end: (result) => {
        if (result?.id) span.setAttribute("gen_ai.response.id", result.id);
        // A fallback provider's member that answered.
        const by = result?.provider;
        if (by?.modelName) span.setAttribute("gen_ai.response.model", by.modelName);
        if (by && by !== provider) span.setAttributes(serverOf(by));
        if (result?.usage) {
          const u = result.usage;
          span.setAttribute("gen_ai.usage.input_tokens", (u.input_other ?? 0) + (u.input_cache_read ?? 0) + (u.input_cache_creation ?? 0));
          span.setAttribute("gen_ai.usage.output_tokens", u.output ?? 0);
        }
        const reason = result?.finishReason ?? result?.finish_reason;
        if (reason) span.setAttribute("gen_ai.response.finish_reasons", [reason]);
        if (this.#content && result?.message) span.setAttribute("gen_ai.output.messages", JSON.stringify([result.message]));
        span.end();
      },
      fail: (e) => {
        failed(span, e);
        span.end();
      },
    };
    this.current = call;
    return call;
  }

  /**
   * One agent turn: an `invoke_agent {name}` span, and — read from the turn's wire as it runs — a
   * `chat {model}` span per attempt of each step (its child: from `StepBegin`, or from the end of a
   * retry's wait, to its `StatusUpdate` — usage, message id, the fallback member that answered — or
   * its `StepRetry`, which marks it failed with the error's class). The tools' spans are children of
   * the chat span that started them (`wrap`). `end()` or `fail(error)` closes what is open.
   */
  turn(agent, provider, wire, userInput, parent = this.#context) {
    const attributes = { "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent.name, ...modelAttributes(provider) };
    if (provider?.modelName) attributes["gen_ai.request.model"] = provider.modelName;
    if (this.#content && userInput !== undefined) {
      const content = typeof userInput === "string" ? [{ type: "text", content: userInput }] : userInput;
      attributes["gen_ai.input.messages"] = JSON.stringify([{ role: "user", parts: content }]);
    }
    const span = this.#tracer.startSpan(`invoke_agent ${agent.name}`, { kind: SPAN_KIND_INTERNAL, attributes }, parent);
    const within = contextOf(new Map([[SPAN_KEY, span]]), parent);
    const side = wire.uiSide({ merge: false });
    let call = null;
    // A fallback provider's chat spans name the member asked (the first, until a StepRetry moves on).
    const members = provider?.providers;
    let current = members?.[0] ?? provider;
    const begin = (startTime) => (call = current ? this.chat(current, "", undefined, { within, startTime }) : null);
    let closed = false;
    const handle = (m) => {
      if (closed) return;
      const p = m.payload;
      if (m.type === "StepBegin") begin();
      else if (m.type === "ContentPart" || m.type === "ToolCall" || m.type === "ToolCallPart") call?.part();
      else if (m.type === "StatusUpdate") {
        const by = (p?.provider && members?.[p.provider.index]) || current;
        call?.end({ id: p?.message_id, usage: p?.token_usage, provider: by });
        call = null;
      } else if (m.type === "Notification" && p?.type === "answer_reconnected") {
        call?.reconnected(p.payload?.starting_after ?? 0);
      } else if (m.type === "StepRetry") {
        call?.fail({ kind: p?.error_type, message: p?.status_code ? `status ${p.status_code}` : p?.error_type });
        if (p?.fallback && members?.[p.fallback.index]) current = members[p.fallback.index];
        begin(performance.timeOrigin + performance.now() + (p?.wait_s ?? 0) * 1000);
      }
    };
    // Read in batches, each handled as it is taken: a message is never between the side and here
    // when the turn's end reads the rest.
    (async () => {
      while (!closed && !side._finished) {
        for (const m of side._takeReady()) handle(m);
        await side._ready();
      }
    })().catch(() => {});
    const close = (e) => {
      // What the turn published last and this loop has not read yet.
      for (const m of side._takeReady()) handle(m);
      closed = true;
      if (call) {
        if (e) call.fail(e);
        else call.end({});
        call = null;
      }
      if (e) failed(span, e);
      span.end();
    };
    return { end: () => close(null), fail: (e) => close(e) };
  }

  /**
   * Runs `answer(ctx)` (a tool call; `ctx` its context, which keeps the span's telemetry for a
   * sub-agent's turn under `TRACE`) inside an `execute_tool {name}` span, a child of the current model call.
   */
  tool(call, ctx, answer) {
    const attributes = { "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.function.name, "gen_ai.tool.call.id": call.id, "gen_ai.tool.type": "function" };
    if (this.#content) attributes["gen_ai.tool.call.arguments"] = call.function.arguments ?? "{}";
    const parent = this.current?.span;
    const within = parent ? contextOf(new Map([[SPAN_KEY, parent]]), this.#context) : this.#context;
    const span = this.#tracer.startSpan(`execute_tool ${call.function.name}`, { kind: SPAN_KIND_INTERNAL, attributes }, within);
    if (ctx) ctx[TRACE] = { telemetry: this, context: contextOf(new Map([[SPAN_KEY, span]]), this.#context) };
    const done = (value) => {
      // A handler's error result (toolError) or a toolset's ToolResult with one.
      const rv = value?.return_value ?? value;
      if (rv?.is_error === true) {
        span.setAttribute("error.type", "tool_error");
        span.setStatus({ code: STATUS_ERROR, message: String(rv.message ?? "") });
      }
      if (this.#content && value !== undefined) span.setAttribute("gen_ai.tool.call.result", typeof value === "string" ? value : JSON.stringify(value));
      span.end();
      return value;
    };
    const thrown = (e) => {
      failed(span, e);
      span.end();
      throw e;
    };
    let out;
    try {
      out = answer(ctx);
    } catch (e) {
      thrown(e);
    }
    return isThenable(out) ? Promise.resolve(out).then(done, thrown) : done(out);
  }

  /** The toolset as the engine runs it, each call inside its span (the registry path and `handle` alike). */
  wrap(toolset) {
    const t = this;
    return {
      get tools() {
        return toolset.tools;
      },
      _run: (call, ctx) => t.tool(call, ctx, (c) => toolset._run(call, c)),
      handle: (call, ctx) => t.tool(call, ctx, (c) => toolset.handle(call, c)),
    };
  }
}
