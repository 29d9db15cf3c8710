// Argument previews: PartialJson over the core's incremental partial-JSON reader.
import { callWasm, wasm } from "./internal.js";


/**
 * A best-effort preview of JSON that is still streaming, such as a tool call's arguments.
 * `feed(piece)` returns the edits the piece made, and `value` is kept up to date in place:
 * strings cut mid-way, numbers, arrays and objects so far. Feeding n bytes costs O(n) in
 * total, whatever the shape: what nests deeper than 64 levels is not previewed (`depthLimited`
 * says so). Text that is not JSON stops the preview (it never throws).
 */
export class PartialJson {
  #core;
  #value = undefined;
  /** The path of the last edit, when it was an append: what a `+text` answer appends to. */
  #lastAppend = null;

  constructor() {
    this.#core = callWasm(() => new wasm.PartialJsonCore());
  }

  /** @returns {Array<{op: "set", path: (string|number)[], value: unknown} | {op: "append", path: (string|number)[], text: string}>} */
  feed(piece) {
    if (typeof piece !== "string") throw new TypeError("PartialJson.feed takes a string");
    const out = callWasm(() => this.#core.feed(piece));
    if (out.charCodeAt(0) === 43 /* "+" */) {
      const e = { op: "append", path: [...this.#lastAppend], text: out.slice(1) };
      this.#apply(e);
      return [e];
    }
    const edits = JSON.parse(out);
    for (const e of edits) this.#apply(e);
    const last = edits.at(-1);
    if (last) this.#lastAppend = last.op === "append" ? [...last.path] : null;
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
  /** Part of the value nests deeper than 64 levels and is not previewed (the tool still gets the whole arguments). */
  get depthLimited() {
    return this.#core.depthLimited;
  }
}
