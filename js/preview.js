// Argument previews: PartialJson over the core's incremental partial-JSON reader.
import { callWasm, wasm } from "./internal.js";


/**
 * A best-effort preview of JSON that is still streaming, such as a tool call's arguments.
 * `feed(piece)` returns the edits the piece made, and `value` is kept up to date in place:
 * strings cut mid-way, numbers, arrays and objects so far. Feeding n bytes costs O(n) in
 * total, whatever the shape: what nests deeper than 64 levels is not previewed (`depthLimited`
 * says so). Text that is not JSON stops the preview (it never throws).
 */
/** What a piece must not hold to be appended as it is: it could end or escape the string. */
const STOPS = /["\\\u0000-\u001f]/;
/**
 * A piece of string content the preview decodes itself: plain characters and whole two-character
 * escapes (a `\u` escape, a lone backslash at its end, a quote or a control character: the core's).
 */
const SIMPLE = /^(?:[^"\\\u0000-\u001f]|\\["\\/bfnrt])*$/;
/** A SIMPLE piece decoded by the platform's own JSON string reader (it cannot throw on one). */
const decodeEscapes = (piece) => JSON.parse(`"${piece}"`);

/** `o[key]` when it is `o`'s own: an edit never reaches a prototype (`__proto__`, `constructor`). */
const own = (o, key) => (o !== null && typeof o === "object" && Object.hasOwn(o, key) ? o[key] : undefined);
/** `o[key] = value` as an own data property, as `JSON.parse` makes each key (`__proto__` included). */
const define = (o, key, value) => Object.defineProperty(o, key, { value, writable: true, enumerable: true, configurable: true });

/** One edit applied to `root`; the root it leaves. Never throws, never touches a prototype. */
function applyEdit(root, e) {
  const path = Array.isArray(e?.path) ? e.path : null;
  if (path === null) return root;
  if (path.length === 0) return e.op === "set" ? e.value : typeof root === "string" ? root + e.text : root;
  let parent = root;
  for (let i = 0; i < path.length - 1; i++) parent = own(parent, path[i]);
  if (parent === null || typeof parent !== "object") return root;
  const key = path[path.length - 1];
  if (typeof key !== "string" && typeof key !== "number") return root;
  if (e.op === "set") define(parent, key, e.value);
  else {
    // An append lands on a string this preview set as an own data property: assigned in place
    // (a `defineProperty` per piece was the preview's largest cost).
    const text = own(parent, key);
    if (typeof text === "string") parent[key] = text + e.text;
  }
  return root;
}

export class PartialJson {
  #core;
  #value = undefined;
  /** The path of the last edit, when it was an append: what a `+text` answer appends to. */
  #lastAppend = null;
  /** The core's last answer was `+text`: the string at `#lastAppend` is open, past any escape. */
  #open = false;
  /** Pieces appended here and not yet fed to the core (fed before anything else is)… */
  #deferred = "";
  /** …and how long their text is, decoded (what the core's next append starts with). */
  #deferredText = 0;

  constructor() {
    this.#core = callWasm(() => new wasm.PartialJsonCore());
  }

  /** @returns {Array<{op: "set", path: (string|number)[], value: unknown} | {op: "append", path: (string|number)[], text: string}>} */
  feed(piece) {
    if (typeof piece !== "string") throw new TypeError("PartialJson.feed takes a string");
    const text = this.#open && piece !== "" ? (!STOPS.test(piece) ? piece : SIMPLE.test(piece) ? decodeEscapes(piece) : null) : null;
    if (text !== null) {
      // Inside an open string, a piece without quotes or control characters, whose escapes are
      // whole and not `\u`, is appended decoded: the edit the core would give, made here. The
      // core reads it later, with the next piece it must see (its result is the same for any
      // split).
      this.#deferred += piece;
      this.#deferredText += text.length;
      const e = { op: "append", path: [...this.#lastAppend], text };
      this.#apply(e);
      return [e];
    }
    // What was appended here goes to the core with this piece, in one call. The core's first
    // edit is then the append to that string (nothing else can come before the string ends),
    // and its text starts with what was already appended: that much is cut off.
    const deferred = this.#deferred;
    const done = this.#deferredText;
    this.#deferred = "";
    this.#deferredText = 0;
    const out = callWasm(() => this.#core.feed(deferred + piece));
    this.#open = out.charCodeAt(0) === 43; /* "+" */
    if (this.#open) {
      const text = out.slice(1 + done);
      if (text === "") return [];
      const e = { op: "append", path: [...this.#lastAppend], text };
      this.#apply(e);
      return [e];
    }
    const edits = JSON.parse(out);
    if (deferred !== "" && edits.length > 0) {
      edits[0].text = edits[0].text.slice(done);
      if (edits[0].text === "") edits.shift();
    }
    for (const e of edits) this.#apply(e);
    const last = edits.at(-1);
    if (last) this.#lastAppend = last.op === "append" ? [...last.path] : null;
    return edits;
  }

  /** Feeds the core what was appended without it (its edits were made already). */
  #catchUp() {
    if (this.#deferred === "") return;
    const text = this.#deferred;
    this.#deferred = "";
    this.#deferredText = 0;
    callWasm(() => this.#core.feed(text));
  }

  #apply(e) {
    this.#value = applyEdit(this.#value, e);
  }

  /**
   * Applies edits (as `feed` gives them, or a wire's `PartialOutput` carries them) to `value`, in
   * place where it can: returns the value they make (a new one when an edit sets the root).
   */
  static applyEdits(value, edits) {
    if (!Array.isArray(edits)) throw new TypeError("PartialJson.applyEdits takes an array of edits");
    for (const e of edits) value = applyEdit(value, e);
    return value;
  }

  /** The value so far (`undefined` before anything could be formed). */
  get value() {
    return this.#value;
  }
  /** The value is complete. */
  get done() {
    this.#catchUp();
    return this.#core.done;
  }
  /** The text is not JSON; the preview stopped where it was. */
  get failed() {
    this.#catchUp();
    return this.#core.failed;
  }
  /** Part of the value nests deeper than 64 levels and is not previewed (the tool still gets the whole arguments). */
  get depthLimited() {
    this.#catchUp();
    return this.#core.depthLimited;
  }
}
