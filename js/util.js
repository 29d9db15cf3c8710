// Small helpers shared by the JS layer's modules.

/** Waits `ms`, or rejects with the signal's reason the moment it aborts; leaves nothing behind. */
export function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Where warnings go when no `logger` is given: the console (`logger: null` silences them). */
export const DEFAULT_LOGGER = Object.freeze({
  warn(message, fields) {
    // Never throws, whatever it is handed (an error whose getters throw is told by its message only).
    try {
      if (fields?.error !== undefined) return void console.warn(message, fields.error);
    } catch {}
    try {
      console.warn(message);
    } catch {}
  },
});

/**
 * A `logger` option, checked: `undefined` for none (`null` too), else an object with
 * `warn(message, fields)`; `who` names the option in the TypeError.
 */
export function checkLogger(logger, who) {
  if (logger === null) return undefined; // silenced
  if (logger === undefined) return DEFAULT_LOGGER;
  if (typeof logger.warn !== "function") throw new TypeError(`${who} must have a warn(message, fields) method`);
  return logger;
}

/**
 * Whether a value is awaited: a thenable as Promises/A+ says, an object or a function with a
 * callable `then` (the engine's `is_thenable` in src/glue is the same rule). Reading `then` may
 * throw, as it would for `await`.
 */
export function isThenable(v) {
  return v !== null && (typeof v === "object" || typeof v === "function") && typeof v.then === "function";
}

/**
 * What a thrown value says, whatever it is: an Error's message (a getter that throws, a revoked
 * Proxy, a Symbol, an object with no string form are described, never rethrown).
 */
export function describeThrown(e) {
  try {
    if (typeof e === "string") return e;
    if (typeof e === "symbol") return "a symbol";
    const message = e?.message;
    if (typeof message === "string") return message;
    return String(e);
  } catch {
    return "a thrown value that could not be read";
  }
}

/** `e.stack` when it can be read, else undefined. */
export function stackOf(e) {
  try {
    const s = e?.stack;
    return typeof s === "string" ? s : undefined;
  } catch {
    return undefined;
  }
}

/** A function declared `async`: its answer is a Promise, which a synchronous hook cannot take. */
export const isAsyncFunction = (f) => typeof f === "function" && (f.constructor?.name === "AsyncFunction" || f.constructor?.name === "AsyncGeneratorFunction");

/** The known name closest to `name`: the same letters in another case or spelling, or a near typo. */
export function closest(name, known) {
  const norm = (k) => k.toLowerCase().replace(/[_-]/g, "");
  const same = known.find((k) => norm(k) === norm(name));
  if (same) return same;
  // A shortened name (`maxSteps` for `maxStepsPerTurn`).
  const longer = norm(name).length >= 4 ? known.find((k) => norm(k).startsWith(norm(name))) : undefined;
  if (longer) return longer;
  const distance = (a, b) => {
    const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array(b.length).fill(0)]);
    for (let j = 1; j <= b.length; j++) d[0][j] = j;
    for (let i = 1; i <= a.length; i++) {
      for (let j = 1; j <= b.length; j++) d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    return d[a.length][b.length];
  };
  let best = null;
  for (const k of known) {
    const dist = distance(norm(name), norm(k));
    if (dist <= 3 && (!best || dist < best.dist)) best = { k, dist };
  }
  return best?.k ?? null;
}

/** Unknown option names are mistakes (a request would go out without them): say which. */
export function checkOptionNames(opts, who, known) {
  for (const name of Object.keys(opts)) {
    if (known.includes(name)) continue;
    const near = closest(name, known);
    throw new TypeError(`${who}: unknown option \`${name}\`${near ? `; did you mean \`${near}\`?` : ""} (known: ${known.join(", ")})`);
  }
}

/** The fields of kosong's `Message`. */
const MESSAGE_KEYS = ["role", "content", "name", "tool_calls", "tool_call_id", "partial"];

/**
 * Refuses messages in the AI SDK's shapes, which a `Message` would read as empty: a `UIMessage`
 * (`{role, parts}`, what `useChat` sends) and a `ModelMessage` with the SDK's tool parts
 * (`tool-call`, `tool-result`), and a user's or system message without content (a misspelt key).
 * A `Message` is kosong's `{role, content, tool_calls?, tool_call_id?}`.
 */
export function checkMessages(list, where) {
  for (let i = 0; i < list.length; i++) {
    const m = list[i];
    if (!m || typeof m !== "object") continue;
    if (Array.isArray(m.parts) && m.content == null) {
      throw new TypeError(
        `${where}[${i}] is an AI SDK UIMessage ({role, parts}); a message here is {role, content}: for a user's text, {role: "user", content: parts.filter((p) => p.type === "text").map((p) => p.text).join("")} (a Session or the Worker's AgentSession keeps the history for you)`,
      );
    }
    // A user's or system message without content would go out empty: a misspelt key is named.
    if (m.content == null && (m.role === "user" || m.role === "system")) {
      const near = Object.keys(m).map((key) => [key, MESSAGE_KEYS.includes(key) ? null : closest(key, MESSAGE_KEYS)]).find(([, n]) => n);
      throw new TypeError(
        `${where}[${i}] (role "${m.role}") has no \`content\`${near ? `; \`${near[0]}\` is not a field of a message: did you mean \`${near[1]}\`?` : ""} (a message is {role, content, tool_calls?, tool_call_id?})`,
      );
    }
    const sdkPart = Array.isArray(m.content) ? m.content.find((p) => p?.type === "tool-call" || p?.type === "tool-result") : undefined;
    if (sdkPart) {
      throw new TypeError(
        `${where}[${i}] holds an AI SDK ModelMessage part \`${sdkPart.type}\`; here a call is in the assistant message's tool_calls ({id, type: "function", function: {name, arguments}}) and a result is a message {role: "tool", tool_call_id, content}`,
      );
    }
  }
}
