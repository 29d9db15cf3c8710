// A run's wire as the AI SDK's UI message stream (the protocol `useChat` reads): chunks, and a
// `Response` that serves them as Server-Sent Events with the protocol's headers.
import { runSoul, RunCancelled } from "./agent.js";
import { callWasm, wasm } from "./internal.js";
import { checkOptionNames } from "./util.js";

/** The headers of a UI message stream response (the AI SDK's `UI_MESSAGE_STREAM_HEADERS`). */
export const UI_MESSAGE_STREAM_HEADERS = Object.freeze({
  "content-type": "text/event-stream",
  "cache-control": "no-cache",
  connection: "keep-alive",
  "x-vercel-ai-ui-message-stream": "v1",
  "x-accel-buffering": "no",
});

/**
 * Turns wire messages into UI message chunks, one message at a time (`push(m)` returns the chunks
 * it makes; `end(outcome)` closes what is open). The rules are the core's (`engine/ui_stream.rs`),
 * the one reader of a turn's messages for a UI: text and thinking become `text-*` and
 * `reasoning-*` blocks; a call streams as `tool-input-start`/`-delta`, its input is
 * `tool-input-available` once the call is complete (its result, an approval request, or the end of
 * its step), its result `tool-output-available`/`-error` (`tool-output-denied` when it is the
 * refusal of a refused approval); approvals are `tool-approval-request`/`-response`; steps are
 * `start-step`/`finish-step`, a retried step's void attempt a `reset-step`.
 */
export class UIMessageChunker {
  #core;

  constructor({ messageId } = {}) {
    this.messageId = messageId;
    this.#core = callWasm(() => new wasm.UiChunkerCore(typeof messageId === "string" ? messageId : undefined));
  }

  /** The chunks a `start` opens the message with (once). */
  start() {
    return JSON.parse(this.#core.start());
  }

  /** The chunks one wire message makes. */
  push(m) {
    return JSON.parse(callWasm(() => this.#core.push(JSON.stringify(m ?? null))));
  }

  /** @internal The chunks of one `wire.jsonl` record line (a session's stored event). */
  _pushLine(line) {
    return JSON.parse(callWasm(() => this.#core.pushLine(line)));
  }

  /**
   * The chunks that end the message: `finish` when the run ended well, `abort` when it was
   * cancelled (`outcome.cancelled`), `error` with the error's words otherwise; `pause` (an
   * approval the client answers in its next request) ends with `finish` too.
   */
  end(outcome = {}) {
    const e = outcome.error;
    const error = e === undefined ? undefined : e instanceof Error ? `${e.name}: ${e.message}` : String(e);
    return JSON.parse(callWasm(() => this.#core.end(outcome.cancelled ? String(outcome.reason ?? "cancelled") : undefined, error, !!outcome.pause)));
  }
}

/** One chunk as the protocol's SSE event. */
export const uiMessageEvent = (chunk) => `data: ${JSON.stringify(chunk)}\n\n`;
/** The event that ends a UI message stream. */
export const UI_MESSAGE_STREAM_END = "data: [DONE]\n\n";

/**
 * A run as UI message chunks: runs `soul` on `userInput` (through `runSoul`, with `signal`) and
 * yields the chunks of its wire as they come, then its end (`finish`, `abort` or `error`).
 * `options`: `messageId` (the assistant message's id), `merge` (read a merged side: default true),
 * `recorder`, `onWire(wire)` (the run's wire, e.g. to answer approvals from another request).
 * A server that answers approvals from `useChat`'s next request keeps the run between requests
 * and feeds a `UIMessageChunker` itself (the Worker example does).
 */
export async function* uiMessageStream(soul, userInput, signal, options = {}) {
  checkOptionNames(options ?? {}, "uiMessageStream: options", ["messageId", "merge", "recorder", "onWire"]);
  const chunker = new UIMessageChunker({ messageId: options.messageId });
  const queue = [];
  let head = 0;
  let wake = null;
  let finished = false;
  let outcome = {};
  const notify = () => {
    wake?.();
    wake = null;
  };
  const run = runSoul(soul, userInput, async (wire) => {
    options.onWire?.(wire);
    for await (const m of wire.uiSide({ merge: options.merge ?? true })) {
      queue.push(m);
      notify();
    }
  }, signal, options.recorder ? { recorder: options.recorder } : undefined);
  run.then(
    () => {},
    (e) => {
      outcome = e instanceof RunCancelled ? { cancelled: true, reason: e.message } : { error: e };
    },
  ).finally(() => {
    finished = true;
    notify();
  });
  yield* chunker.start();
  for (;;) {
    while (head < queue.length) {
      const m = queue[head];
      queue[head++] = undefined;
      yield* chunker.push(m);
    }
    if (finished) break;
    await new Promise((r) => (wake = r));
  }
  yield* chunker.end(outcome);
}

/** A `Response` serving `chunks` (an async iterable) as a UI message stream. */
export function uiMessageStreamResponse(chunks, init = {}) {
  const enc = new TextEncoder();
  const it = chunks[Symbol.asyncIterator]();
  const body = new ReadableStream({
    async pull(controller) {
      try {
        const { value, done } = await it.next();
        if (done) {
          controller.enqueue(enc.encode(UI_MESSAGE_STREAM_END));
          controller.close();
        } else controller.enqueue(enc.encode(uiMessageEvent(value)));
      } catch (e) {
        controller.enqueue(enc.encode(uiMessageEvent({ type: "error", errorText: `${e?.name ?? "Error"}: ${e?.message ?? e}` })));
        controller.enqueue(enc.encode(UI_MESSAGE_STREAM_END));
        controller.close();
      }
    },
    cancel() {
      it.return?.();
    },
  });
  return new Response(body, { status: init.status ?? 200, headers: { ...UI_MESSAGE_STREAM_HEADERS, ...(init.headers ?? {}) } });
}
