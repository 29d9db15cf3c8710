// The Wire between a soul and its UI (merged and raw sides), its recorder and replay: thin
// wrappers over the core's WireCore (src/engine/soul/wire.rs), which owns the merge rules, the
// approval requests and the wire.jsonl format.
import { callWasm, wasm } from "./internal.js";
import { isThenable } from "./util.js";

/** `receive()` on a wire side after the wire shut down and every message was read. */
export class QueueShutDown extends Error {
  constructor() {
    super("The wire has shut down");
    this.name = "QueueShutDown";
  }
}

let coreOfWire;

/** @internal The core of a Wire (for the agent and runSoul; not exported by the package). */
export function wireCore(wire) {
  return coreOfWire(wire);
}


/** One subscriber: messages published after it subscribed, taken from the core in batches. */
class WireUISide {
  #core;
  #batch = [];
  #head = 0;

  constructor(core) {
    this.#core = core;
  }

  /** The next message; rejects with `QueueShutDown` once the wire has shut down and all were read. */
  async receive() {
    for (;;) {
      if (this.#head < this.#batch.length) {
        const m = this.#batch[this.#head];
        this.#batch[this.#head++] = undefined;
        return m;
      }
      const ready = callWasm(() => this.#core.take()); // every message that is ready, in one call
      if (ready !== undefined) {
        this.#batch = JSON.parse(ready);
        this.#head = 0;
        continue;
      }
      if (this.#core.finished) throw new QueueShutDown();
      await this.#core.wait();
    }
  }

  /** @internal Resolves when a message is ready or the wire has shut down. */
  _ready() {
    return this.#core.wait();
  }
  /** @internal The wire shut down and every message was read. */
  get _finished() {
    return this.#head >= this.#batch.length && this.#core.finished;
  }
  /** @internal Every message ready now, without waiting (telemetry reads a turn's last ones so). */
  _takeReady() {
    const out = this.#batch.slice(this.#head);
    this.#batch = [];
    this.#head = 0;
    const ready = callWasm(() => this.#core.take());
    return ready === undefined ? out : out.concat(JSON.parse(ready));
  }

  [Symbol.asyncIterator]() {
    return {
      next: async () => {
        try {
          return { value: await this.receive(), done: false };
        } catch (e) {
          if (e instanceof QueueShutDown) return { value: undefined, done: true };
          throw e;
        }
      },
      return: async () => {
        this.#core.detach();
        return { value: undefined, done: true };
      },
    };
  }
}

/**
 * The channel between a soul and its UI for one run. The raw side sees every message; the
 * merged side joins consecutive text, think and tool-call fragments and flushes on any
 * other message. A subscriber sees what is published after it subscribed.
 */
export class Wire {
  #core = callWasm(() => new wasm.WireCore());

  static {
    coreOfWire = (w) => w.#core;
  }

  uiSide({ merge = false } = {}) {
    return new WireUISide(this.#core.uiSide(Boolean(merge)));
  }

  /** The soul side: publish a message (`{type, payload}`). Ignored after shutdown. */
  send(msg) {
    if (!msg || typeof msg.type !== "string") throw new TypeError("a wire message is {type: string, payload: object}");
    callWasm(() => this.#core.send(msg));
  }

  /** Answers an `ApprovalRequest` published on this wire. */
  respond(requestId, response, feedback = "") {
    if (typeof response !== "string") {
      throw new TypeError(`response must be "approve", "approve_for_session" or "reject"; got ${String(response)}`);
    }
    callWasm(() => this.#core.respond(String(requestId), response, String(feedback ?? "")));
  }

  /** @internal Whether the approval request of this id waits for its answer (the wire keeps the waiting ones). */
  _isWaiting(requestId) {
    return callWasm(() => this.#core.isWaiting(String(requestId)));
  }

  /**
   * Hands what the merged sides are still joining to them now (the next fragments start a new
   * message): call it on a timer to get merged text at least that often.
   */
  flush() {
    callWasm(() => this.#core.flush());
  }

  /** Flushes the merge buffer and ends every side (after what they already hold). */
  shutdown() {
    callWasm(() => this.#core.shutdown());
  }
}

// kimi-cli's wire protocol version: the core's, written in by the build.
export const WIRE_PROTOCOL_VERSION = "@core:WIRE_PROTOCOL_VERSION@";

/**
 * Writes a run's merged messages in kimi-cli's `wire.jsonl` format through `sink(line)`.
 * `options.append`: the sink goes on with a recording begun before (a resumed turn's), so the
 * metadata line is not written again.
 */
export class WireRecorder {
  #sink;
  #append;
  #done = Promise.resolve();
  #wire = null;
  #pending = 0;
  error = null;

  constructor(sink, options = {}) {
    if (typeof sink !== "function") throw new TypeError("WireRecorder needs a sink function (jsonLine) => void | Promise<void>");
    if (options?.append !== undefined && typeof options.append !== "boolean") throw new TypeError("WireRecorder: options.append must be a boolean");
    this.#sink = sink;
    this.#append = options?.append === true;
  }

  /** How many messages have been written. */
  get count() {
    return this.#wire ? this.#wire.recorded : 0;
  }

  /**
   * @internal Records every merged message of `wire`. Lines reach the sink in order, one write at
   * a time; when no write is pending the sink is called at once, so a synchronous sink has the
   * line before anything else happens (a call is recorded before its tool starts).
   */
  _attach(wire) {
    this.#wire = coreOfWire(wire);
    const failed = (e) => {
      this.error ??= e;
    };
    const write = (line) => {
      let r;
      try {
        r = this.#sink(line);
      } catch (e) {
        failed(e);
        return;
      }
      if (isThenable(r)) {
        this.#pending++;
        this.#done = Promise.resolve(r)
          .catch(failed)
          .finally(() => {
            this.#pending--;
          });
      }
    };
    this.#wire.setRecorder((line) => {
      if (this.#pending === 0) return write(line);
      this.#pending++;
      this.#done = this.#done
        .then(() => write(line))
        .finally(() => {
          this.#pending--;
        });
    }, this.#append);
  }

  /** @internal The run ended: a sink still writing (it hangs) is reported as the recorder's error. */
  _ended() {
    if (this.#pending > 0) {
      this.error ??= new Error(`kosong-wasm: the recorder's sink had not finished writing when the run ended (${this.#pending} line(s) unwritten)`);
    }
  }

  /** @internal Resolves when every line handed over so far was written. */
  _written() {
    return this.#done;
  }
}

/** Reads `wire.jsonl` back into messages, skipping the metadata line and damaged lines. */
export function readWireRecord(jsonl) {
  if (typeof jsonl !== "string") throw new TypeError("readWireRecord takes the text of a wire.jsonl file");
  return JSON.parse(callWasm(() => wasm.readWireRecord(jsonl)));
}

/**
 * The messages that close a turn whose runtime died before it ended (an evicted isolate, a
 * closed tab), from the messages recorded for it, without going on: an interrupted `ToolResult`
 * for every call without a result, then `TurnEnd`. (`resumeSoul` goes on with the turn instead.)
 */
export function closeInterruptedTurn(messages) {
  if (!Array.isArray(messages)) throw new TypeError("closeInterruptedTurn takes the turn's recorded messages (an array)");
  return JSON.parse(callWasm(() => wasm.closeInterruptedTurn(JSON.stringify(messages))));
}

/**
 * A recording's messages, for a recovery: the text of a `wire.jsonl` (a last line cut mid-write
 * is told to `warn` and the lines before it are read) or an array of messages as recorded.
 */
export function recordedMessages(recording, who, warn) {
  if (Array.isArray(recording)) return recording;
  if (typeof recording !== "string") throw new TypeError(`${who}: the recording must be the text of a wire.jsonl file or an array of wire messages`);
  let end = recording.length;
  while (end > 0 && /\s/.test(recording[end - 1])) end--;
  const start = recording.lastIndexOf("\n", end - 1) + 1;
  const last = recording.slice(start, end);
  if (last) {
    try {
      JSON.parse(last);
    } catch {
      const line = recording.slice(0, start).split("\n").length;
      warn?.(`kosong-wasm: the recording's last line (line ${line}) was cut mid-write; the turn is recovered from the lines before it`, { line });
    }
  }
  return readWireRecord(recording);
}

/**
 * The unfinished turn of a recording (`wire.jsonl` text or messages): `{userInput, step, resumes,
 * waitingApprovals: [{requestId, toolCallId, action}]}`, or `null` when its last turn ended.
 */
export function unfinishedTurn(recording) {
  const messages = recordedMessages(recording, "unfinishedTurn");
  return JSON.parse(callWasm(() => wasm.unfinishedTurn(JSON.stringify(messages))));
}
