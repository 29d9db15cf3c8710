// kosong's generate and step: options checked and converted, the work done by the engine.
import { callWasm, ensureReady, guardPromise, wasm } from "./internal.js";
import { definitionOf } from "./tools.js";
import { PartialJson } from "./preview.js";
import { checkLogger, checkMessages, checkOptionNames, isAsyncFunction, isThenable } from "./util.js";
import { telemetryOption } from "./telemetry.js";


/** The core's value of one of this package's providers. */
export function coreOf(provider, who = "provider", alternative = "") {
  const core = provider !== null && typeof provider === "object" ? provider._core : undefined;
  if (!(core instanceof wasm.ProviderCore)) {
    throw new TypeError(`${who} must be one of this package's providers (OpenAIChatProvider, ScriptedProvider, …)${alternative}`);
  }
  return core;
}

function checkSignal(signal) {
  if (signal !== undefined && signal !== null && !(typeof signal === "object" && "aborted" in signal && typeof signal.addEventListener === "function")) {
    throw new TypeError("options.signal must be an AbortSignal");
  }
}

function jsonHook(cb) {
  return typeof cb === "function" ? (json) => cb(JSON.parse(json)) : undefined;
}

// The part kinds of a batch, the engine's (src/glue/parts.rs), put in when the package is built.
const PART_TEXT = "@core:PART_TEXT@";
const PART_THINK = "@core:PART_THINK@";
const PART_ARGUMENTS = "@core:PART_ARGUMENTS@";
const PART_RECONNECT = "@core:PART_RECONNECT@";
/** The option key under which telemetry hears that the answer's stream was read again. */
const RECONNECTED = Symbol("reconnected");

/**
 * The part hook: a batch of parts as `(text, meta)` (see `PartHook` in the engine), each part
 * built here and handed to `cb` in order. A callback that returns a Promise is awaited before
 * the next part, and the hook then returns a Promise the engine awaits.
 */
function partHook(cb, onReconnect) {
  if (typeof cb !== "function") return undefined;
  return (text, meta) => {
    let at = 0;
    let i = 0;
    // The next part, or `null` for a reconnect (told to `onReconnect`, not a part).
    const next = () => {
      const kind = meta[i];
      const id = text.slice(at, (at += meta[i + 1]));
      const t = text.slice(at, (at += meta[i + 2]));
      i += 3;
      if (kind === PART_TEXT) return { type: "text", text: t };
      if (kind === PART_THINK) return { type: "think", think: t };
      if (kind === PART_ARGUMENTS) return { type: "tool_call_part", arguments_part: t, tool_call_id: id };
      if (kind === PART_RECONNECT) {
        onReconnect?.(Number(t));
        return null;
      }
      return JSON.parse(t);
    };
    while (i < meta.length) {
      const part = next();
      const waiting = part === null ? undefined : cb(part);
      if (isThenable(waiting)) {
        return (async () => {
          await waiting;
          while (i < meta.length) {
            const part = next();
            if (part !== null) await cb(part);
          }
        })();
      }
    }
    return undefined;
  };
}

/**
 * The `output` option as the engine takes it (`who` names it in errors): the spec as JSON (the
 * core reads and checks it), the schema, and the validator — the caller's, else `fallback` (a
 * `SimpleToolset`'s hook).
 */
export function outputOption(output, who, fallback) {
  if (output === undefined || output === null) return undefined;
  if (typeof output !== "object" || Array.isArray(output)) throw new TypeError(`${who}.output must be an object {schema, name?, strict?, validate?}`);
  const { schema, name, strict, validate, ...rest } = output;
  if (validate !== undefined && typeof validate !== "function") throw new TypeError(`${who}.output.validate must be a function (schema, value) => problem`);
  if (isAsyncFunction(validate)) throw new TypeError(`${who}.output.validate must answer synchronously (schema, value) => problem; an async function's answer would be a Promise`);
  let json;
  try {
    json = JSON.stringify({ schema, name, strict, ...rest });
  } catch (e) {
    throw new TypeError(`${who}.output.schema must be JSON: ${e.message}`);
  }
  return { json, schema, validate: validate ?? (typeof fallback === "function" ? fallback : undefined) };
}

/**
 * `onPartialOutput` and `onOutputElement` over the answer's text parts: one PartialJson, whose
 * value grows in place (the callback gets the same object each time: its work stays linear in
 * the text); for an array, each item once the next one begins, the rest when the answer ends.
 */
function outputWatch(options) {
  const { onPartialOutput: onPartial, onOutputElement: onElement } = options;
  for (const [k, f] of [["onPartialOutput", onPartial], ["onOutputElement", onElement]]) {
    if (f !== undefined && typeof f !== "function") throw new TypeError(`options.${k} must be a function`);
  }
  if (!onPartial && !onElement) return undefined;
  if (!options.output) throw new TypeError("options.onPartialOutput and onOutputElement need options.output");
  let preview = new PartialJson();
  let given = 0;
  return {
    part(p) {
      if (p.type !== "text" || preview === null) return;
      if (preview.feed(p.text).length === 0) return;
      const v = preview.value;
      if (onElement && Array.isArray(v)) while (given < v.length - 1) onElement(v[given++]);
      if (onPartial) onPartial(v);
    },
    end(output) {
      preview = null;
      if (onElement && Array.isArray(output)) while (given < output.length) onElement(output[given++]);
    },
  };
}

/** The part callback: the caller's, after the output's watch saw the part. */
function withWatch(cb, watch) {
  if (!watch) return cb;
  if (typeof cb !== "function") return (p) => watch.part(p);
  return (p) => {
    watch.part(p);
    return cb(p);
  };
}

function historyJson(history) {
  if (!Array.isArray(history)) throw new TypeError("history must be an array of messages");
  checkMessages(history, "history");
  return JSON.stringify(history);
}

/** Checks everything first, so a bad argument never uses up a scripted answer. */
const COMMON_STEP_OPTIONS = ["signal", "logger", "limits", "output", "onMessagePart", "onPartialOutput", "onOutputElement", "telemetry"];

/**
 * With `telemetry`: the options with a part hook that marks the model call's first chunk (before
 * the caller's own), and `call` to be set once the span has begun.
 */
function observed(options, telemetry) {
  if (!telemetry) return { opts: options, span: {} };
  const span = {};
  const own = options.onMessagePart;
  const onMessagePart = (p) => {
    span.call?.part();
    return typeof own === "function" ? own(p) : undefined;
  };
  return { opts: { ...options, onMessagePart, [RECONNECTED]: (after) => span.call?.reconnected(after) }, span };
}
const GENERATE_OPTIONS = [...COMMON_STEP_OPTIONS, "onToolCall"];
const STEP_OPTIONS = [...COMMON_STEP_OPTIONS, "onToolResult", "toolTimeoutMs"];

function common(provider, systemPrompt, historyJson, options, validateFallback) {
  ensureReady();
  if (typeof systemPrompt !== "string") throw new TypeError("systemPrompt must be a string");
  checkSignal(options.signal);
  const logger = checkLogger(options.logger, "options.logger");
  const core = coreOf(provider);
  const watch = outputWatch(options);
  return {
    core,
    history: historyJson,
    watch,
    hooks: {
      output: outputOption(options.output, "options", validateFallback),
      onPart: partHook(withWatch(options.onMessagePart, watch), options[RECONNECTED]),
      signal: options.signal ?? undefined,
      warn: logger ? (message, fields) => logger.warn(message, fields) : undefined,
      limits: options.limits ?? undefined,
    },
  };
}

/**
 * The arguments are positional: a call shaped like the AI SDK's (one object of `{system, messages,
 * tools, …}`) is refused naming the argument and the signature, not with a complaint about another.
 */
function checkPositional(signature, systemPrompt) {
  if (typeof systemPrompt === "string") return;
  const objectCall = systemPrompt !== null && typeof systemPrompt === "object" && ["system", "messages", "prompt", "tools", "model"].some((k) => k in systemPrompt);
  const got = systemPrompt === null ? "null" : Array.isArray(systemPrompt) ? "an array" : typeof systemPrompt === "object" ? "an object" : typeof systemPrompt;
  throw new TypeError(
    `${signature}: systemPrompt (the 2nd argument) must be a string; got ${got}` +
      (objectCall ? ". The arguments are positional: this looks like the AI SDK's one-object call ({system, messages, …})" : ""),
  );
}

/** One generation (kosong's `generate`). */
export async function generate(provider, systemPrompt, tools, history, options = {}) {
  checkPositional("generate(provider, systemPrompt, tools, history, options?)", systemPrompt);
  if (!Array.isArray(tools)) throw new TypeError("tools must be an array of tool definitions");
  checkOptionNames(options ?? {}, "generate: options", GENERATE_OPTIONS);
  const telemetry = telemetryOption(options.telemetry, "generate: options");
  const { opts, span } = observed(options, telemetry);
  const { core, history: h, hooks, watch } = common(provider, systemPrompt, historyJson(history), opts);
  hooks.onToolCall = jsonHook(options.onToolCall);
  span.call = telemetry?.chat(provider, systemPrompt, history);
  let raw;
  try {
    raw = await callWasm(() => wasm.runGenerate(core, systemPrompt, JSON.stringify(tools.map(definitionOf)), h, hooks));
  } catch (e) {
    span.call?.fail(e);
    throw e;
  }
  watch?.end(raw.output);
  const message = messageOf(raw);
  const out = { id: raw.id, message, text: textOf(message), usage: raw.usage, finishReason: raw.finishReason, provider: answeredBy(provider, raw) };
  span.call?.end(out);
  if (hooks.output) out.output = raw.output;
  return out;
}

/**
 * The engine's message (JSON text); an answer of one plain text has its text beside it
 * (`raw.content`, a string of its own: neither escaped into the JSON nor parsed out of it), and
 * so have its tool calls' arguments (`raw.callArguments`, call order; not a string: it has none).
 */
function messageOf(raw) {
  const message = JSON.parse(raw.message);
  if (typeof raw.content === "string") message.content = raw.content;
  const args = raw.callArguments ?? [];
  message.tool_calls?.forEach((c, i) => typeof args[i] === "string" && (c.function.arguments = args[i]));
  return message;
}

/** The answer's text: its text parts joined (thinking left out), as the AI SDK's `result.text`. */
function textOf(message) {
  const c = message.content;
  return typeof c === "string" ? c : Array.isArray(c) ? c.filter((p) => p?.type === "text").map((p) => p.text).join("") : "";
}

/** The provider that answered: a fallback provider's member by the engine's `answeredBy`, else the provider. */
function answeredBy(provider, raw) {
  return typeof provider._member === "function" ? provider._member(raw.answeredBy) : provider;
}

/** The outcome of `step`: the message, and its tools' results in call order. */
export class StepResult {
  #results;
  constructor(raw, results, provider, message = messageOf(raw)) {
    this.id = raw.id;
    /** The provider that answered (a `FallbackProvider`'s member). */
    this.provider = provider;
    this.message = message;
    this.text = textOf(this.message);
    this.usage = raw.usage;
    this.finishReason = raw.finishReason;
    this.toolCalls = this.message.tool_calls ?? [];
    if ("output" in raw) this.output = raw.output;
    this.#results = results;
    Object.freeze(this);
  }
  /** Results in call order, whatever order the tools finished in. */
  toolResults() {
    return this.#results;
  }
  /**
   * What to append to the history for the next step of a loop of one's own: this step's message,
   * then one tool message per result in call order, worded as an Agent's turn words them.
   */
  async messages() {
    const results = await this.#results;
    return [this.message, ...JSON.parse(callWasm(() => wasm.toolMessages(JSON.stringify(results))))];
  }
}

/** One step (kosong's `step`): tools start as soon as their calls are complete. */
export async function step(provider, systemPrompt, toolset, history, options = {}) {
  checkPositional("step(provider, systemPrompt, toolset, history, options?)", systemPrompt);
  // A SimpleToolset the engine runs by its registry has its `tools` array (reading it crosses
  // every definition out of the instance: ~40 µs a step for 8 tools).
  if (!toolset || typeof toolset.handle !== "function" || (toolset._simpleId === undefined && !Array.isArray(toolset.tools))) {
    throw new TypeError("toolset must have a `tools` array and a `handle(call, ctx)` method");
  }
  checkOptionNames(options ?? {}, "step: options", STEP_OPTIONS);
  const telemetry = telemetryOption(options.telemetry, "step: options");
  const { opts, span } = observed(options, telemetry);
  const { core, history: h, hooks, watch } = common(provider, systemPrompt, historyJson(history), opts, toolset._validate);
  // With telemetry each call runs inside its span (the engine still runs a SimpleToolset by its registry).
  hooks.toolset = telemetry ? telemetry.wrap(toolset) : toolset;
  hooks.toolTimeoutMs = options.toolTimeoutMs; // the core checks it
  hooks.simple = toolset._simpleId;
  if (typeof options.onToolResult === "function") hooks.onToolResult = jsonHook(options.onToolResult);
  span.call = telemetry?.chat(provider, systemPrompt, history);
  let raw;
  try {
    raw = await callWasm(() => wasm.runStep(core, systemPrompt, h, hooks));
  } catch (e) {
    span.call?.fail(e);
    throw withSalvaged(e);
  }
  const answered = answeredBy(provider, raw);
  // The message is read once, for the span (which writes it out at once) and the result.
  const message = messageOf(raw);
  span.call?.end({ id: raw.id, usage: raw.usage, finishReason: raw.finishReason, message, provider: answered });
  watch?.end(raw.output);
  const results = guardPromise(raw.results).then((json) => JSON.parse(json));
  results.catch(() => {}); // a caller who never asks for the results must not see an unhandled rejection
  return new StepResult(raw, results, answered, message);
}

/**
 * A step that failed after a tool call was handed on carries its round (the engine gives it as
 * JSON text): `error.salvaged = {message, toolCalls, toolResults()}`, the results in call order
 * and already settled — the tools that started ran to their end, the calls that did not start
 * have an error result and never ran.
 */
function withSalvaged(e) {
  const raw = e !== null && typeof e === "object" ? e.salvaged : undefined;
  if (!raw || typeof raw.message !== "string") return e;
  const message = messageOf(raw);
  const results = Promise.resolve(JSON.parse(raw.results));
  e.salvaged = Object.freeze({
    id: raw.id,
    message,
    usage: raw.usage,
    finishReason: raw.finishReason,
    toolCalls: message.tool_calls ?? [],
    toolResults: () => results,
  });
  return e;
}
