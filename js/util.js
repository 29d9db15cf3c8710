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

/**
 * A `logger` option, checked: `undefined` for none (`null` too), else an object with
 * `warn(message, fields)`; `who` names the option in the TypeError.
 */
export function checkLogger(logger, who) {
  if (logger === undefined || logger === null) return undefined;
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
