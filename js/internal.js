// Loading the wasm instance and calling into it: not part of the public API (the entries
// re-export `index.js` only). A trap in the instance is noted, and every later call says so.
import wasmInit, * as wasm from "./wasm/kosong_wasm.js";
import { makeError, setRuntimeErrorWording } from "./errors.js";
import { toolPort } from "./tools.js";

export { wasm };

let ready = false;
let instance = null;

const NOT_READY = Symbol("not ready");

/**
 * The engine's body reader: waits for the next chunk, then takes the chunks the
 * stream already holds without waiting again, up to `max` bytes, and hands them over as one, so
 * the engine crosses into JavaScript and back once per batch, not once per network chunk. The
 * engine asks for small batches (1 KiB) while a tool call streams, so a call's end is not held
 * behind the chunks read after it, and large ones (16 KiB) otherwise (the sizes, and what each
 * was measured to cost, are `SMALL_BATCH` and `LARGE_BATCH` in src/glue/transport.rs). `st`
 * keeps a read that was started but not ready for the next call. Resolves `null` at the end.
 */
function readBatch(reader, st, onValue, onError, max) {
  // The engine's two callbacks, made once per body; once the body is dropped (`st.dropped`,
  // set by the engine) they are gone and are not called.
  nextBatch(reader, st, max).then(
    (v) => st.dropped || onValue(v),
    (e) => st.dropped || onError(e),
  );
}

async function nextBatch(reader, st, max) {
  if (st.ended) return null;
  const first = await (st.pending ?? reader.read());
  st.pending = null;
  if (first.done) return null;
  const chunks = [first.value];
  let size = first.value.byteLength;
  // The reactions that note a read's outcome, made once per body (not two closures per chunk).
  const seen = (st.seen ??= { r: NOT_READY, ok: null, bad: () => {} });
  seen.ok ??= (x) => (seen.r = x);
  while (size < max) {
    const next = reader.read();
    // A read the stream can answer at once is settled already: its reaction runs before this
    // function resumes from `await null`. One still waiting is kept for the next call (whose
    // `await` of it resumes after this reaction ran, so a late one never lands on a newer read).
    seen.r = NOT_READY;
    next.then(seen.ok, seen.bad); // a failure is awaited (and so reported) by the next call
    await null;
    const r = seen.r;
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
  // One chunk as is; several joined here, so the engine copies one array into its memory (three
  // crossings a batch, where a list cost five a chunk). They are joined in one buffer the body
  // keeps (a new ArrayBuffer a batch cost more than the rest of this function): the engine has
  // copied a batch out before it asks for the next one, so the next batch may overwrite it.
  if (chunks.length === 1) return chunks[0];
  if (!st.buf || st.buf.byteLength < size) st.buf = new Uint8Array(Math.max(size, 2 * max));
  const all = st.buf;
  let at = 0;
  for (const c of chunks) {
    all.set(c, at);
    at += c.byteLength;
  }
  return all.subarray(0, size);
}

/** Marks the module ready once a runtime entry (or `init`) instantiated it. */
export function markReady(exports) {
  instance = exports;
  wasm.installHooks(makeError, readBatch, toolPort);
  setRuntimeErrorWording((className, fields) => callWasm(() => wasm.runtimeErrorMessage(className, fields)));
  wasm.installPanicReporter((message) => poison(new Error(message)));
  wasm.__kosongOnTrap?.((e) => poison(e));
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
  initializing ??= wasmInit(source === undefined ? undefined : { module_or_path: source }).then(markReady, (e) => {
    initializing = null; // a failed load may be retried (say, with another source)
    throw e;
  });
  await initializing;
}

// A trap in the wasm instance (a bug: the engine never panics on input) leaves it unusable.
// Say so on every later call instead of failing with a confusing error somewhere unrelated.
let poisoned = null;

/** Calls waiting on the instance: rejected at once when it breaks (they would never settle). */
const pending = new Set();

function crashed() {
  return new Error(`kosong-wasm: the WebAssembly instance crashed earlier (${poisoned.message}) and cannot be used again; reload the page or restart the process. Please report this bug.`, { cause: poisoned });
}

function poison(e) {
  if (poisoned) return;
  poisoned = e;
  const err = crashed();
  for (const reject of pending) reject(err);
  pending.clear();
}

/** Whether `e` is a wasm trap; never throws (a revoked Proxy makes `instanceof` throw). */
function isTrap(e) {
  try {
    return e instanceof WebAssembly.RuntimeError;
  } catch {
    return false;
  }
}

/** A trap is noted (the instance is broken from now on) and answered with the clear error. */
export function notePoison(e) {
  if (!isTrap(e)) return e;
  poison(e);
  return crashed();
}

/** A promise of the instance's, rejected at once if the instance breaks before it settles. */
export function guardPromise(p) {
  if (poisoned) return Promise.reject(crashed());
  return new Promise((resolve, reject) => {
    pending.add(reject);
    p.then(
      (v) => {
        pending.delete(reject);
        resolve(v);
      },
      (e) => {
        pending.delete(reject);
        reject(notePoison(e));
      },
    );
  });
}

/** The instance's linear memory in bytes (it never shrinks: growth is what leaks show as). */
export function memoryBytes() {
  return instance?.memory?.buffer.byteLength ?? 0;
}

/**
 * The instance-wide memory budget for what in-flight calls hold (their answers and arguments as
 * they stream): a call whose growth would pass it fails with a ChatProviderError of kind `limit`,
 * the others go on. Default 1 GiB (a quarter of a wasm32 instance's 4 GiB).
 */
export function setMemoryBudget(bytes) {
  if (!(Number.isInteger(bytes) && bytes > 0)) throw new TypeError("setMemoryBudget: bytes must be a positive integer");
  callWasm(() => wasm.setMemoryBudget(bytes));
}

/** `{limitBytes, usedBytes}`: the budget and what in-flight calls hold of it now. */
export function memoryBudget() {
  return callWasm(() => ({ limitBytes: wasm.memoryBudgetLimit(), usedBytes: wasm.memoryBudgetUsed() }));
}

export function ensureReady() {
  if (poisoned) throw crashed();
  if (!ready) throw new Error("kosong-wasm is not initialized yet: `await init()` once before using it");
}

/** Calls into the wasm instance, noting a trap. */
export function callWasm(f) {
  ensureReady();
  try {
    const r = f();
    if (poisoned) throw crashed();
    return r instanceof Promise ? guardPromise(r) : r;
  } catch (e) {
    const noted = notePoison(e);
    throw poisoned ? crashed() : noted;
  }
}
