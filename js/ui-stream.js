// A run's wire as the AI SDK's UI message stream (the protocol `useChat` reads): chunks, and a
// `Response` that serves them as Server-Sent Events with the protocol's headers.
import { runSoul, RunCancelled } from "./agent.js";
import { checkOptionNames } from "./util.js";

/** The headers of a UI message stream response (the AI SDK's `UI_MESSAGE_STREAM_HEADERS`). */
export const UI_MESSAGE_STREAM_HEADERS = Object.freeze({
  "content-type": "text/event-stream",
  "cache-control": "no-cache",
  connection: "keep-alive",
  "x-vercel-ai-ui-message-stream": "v1",
  "x-accel-buffering": "no",
});

const isServerTool = (p) => p.type === "text" && p.extras?.server_tool !== undefined;

/**
 * Turns wire messages into UI message chunks, one message at a time (`push(m)` returns the chunks
 * it makes; `end(outcome)` closes what is open). Text and thinking become `text-*` and
 * `reasoning-*` blocks; a call streams as `tool-input-start`/`-delta`, its input is
 * `tool-input-available` once the call is complete (its result, an approval request, or the end of
 * its step), its result `tool-output-available`/`-error` (`tool-output-denied` when the user
 * refused it); approvals are `tool-approval-request`/`-response`; steps are `start-step`/
 * `finish-step`, a retried step's void attempt a `reset-step`.
 */
export class UIMessageChunker {
  #n = 0;
  #block = null; // {kind: "text" | "reasoning", id}
  #stepOpen = false;
  #calls = new Map(); // id -> {name, args, available}
  #lastCall = null;
  #denied = new Set();
  #approvals = new Map(); // approval id -> tool call id
  #started = false;

  constructor({ messageId } = {}) {
    this.messageId = messageId;
  }

  #id() {
    return `b${++this.#n}`;
  }

  #close(out) {
    if (this.#block) out.push({ type: `${this.#block.kind}-end`, id: this.#block.id });
    this.#block = null;
  }

  #open(kind, out) {
    if (this.#block?.kind === kind) return this.#block.id;
    this.#close(out);
    this.#block = { kind, id: this.#id() };
    out.push({ type: `${kind}-start`, id: this.#block.id });
    return this.#block.id;
  }

  #available(id, out) {
    const c = this.#calls.get(id);
    if (!c || c.available) return;
    c.available = true;
    let input;
    try {
      input = c.args === "" ? {} : JSON.parse(c.args);
    } catch (e) {
      out.push({ type: "tool-input-error", toolCallId: id, toolName: c.name, input: c.args, errorText: `the arguments are not JSON: ${e.message}` });
      return;
    }
    out.push({ type: "tool-input-available", toolCallId: id, toolName: c.name, input });
  }

  #endStep(out) {
    this.#close(out);
    for (const id of this.#calls.keys()) this.#available(id, out);
    if (this.#stepOpen) out.push({ type: "finish-step" });
    this.#stepOpen = false;
  }

  /** The chunks a `start` opens the message with (once). */
  start() {
    if (this.#started) return [];
    this.#started = true;
    return [this.messageId ? { type: "start", messageId: this.messageId } : { type: "start" }];
  }

  /** The chunks one wire message makes. */
  push(m) {
    const out = this.start();
    const p = m?.payload ?? {};
    switch (m?.type) {
      case "StepBegin":
        this.#endStep(out);
        this.#calls.clear();
        out.push({ type: "start-step" });
        this.#stepOpen = true;
        break;
      case "StepRetry":
        // The failed attempt's parts are void (as a UI drops them at a StepRetry).
        this.#block = null;
        this.#calls.clear();
        out.push({ type: "reset-step" });
        break;
      case "ContentPart":
        if (p.type === "text" && !isServerTool(p) && p.text) out.push({ type: "text-delta", id: this.#open("text", out), delta: p.text });
        else if (p.type === "think" && p.think) out.push({ type: "reasoning-delta", id: this.#open("reasoning", out), delta: p.think });
        break;
      case "ToolCall": {
        this.#close(out);
        const args = p.function?.arguments ?? "";
        this.#calls.set(p.id, { name: p.function?.name ?? "", args, available: false });
        this.#lastCall = p.id;
        out.push({ type: "tool-input-start", toolCallId: p.id, toolName: p.function?.name ?? "" });
        if (args) out.push({ type: "tool-input-delta", toolCallId: p.id, inputTextDelta: args });
        break;
      }
      case "ToolCallPart": {
        const id = p.tool_call_id ?? this.#lastCall;
        const c = this.#calls.get(id);
        if (c && !c.available && p.arguments_part) {
          c.args += p.arguments_part;
          out.push({ type: "tool-input-delta", toolCallId: id, inputTextDelta: p.arguments_part });
        }
        break;
      }
      case "ApprovalRequest":
        this.#close(out);
        this.#available(p.tool_call_id, out);
        this.#approvals.set(p.id, p.tool_call_id);
        out.push({ type: "tool-approval-request", approvalId: p.id, toolCallId: p.tool_call_id });
        break;
      case "ApprovalResponse": {
        const approved = p.response !== "reject";
        if (!approved) this.#denied.add(this.#approvals.get(p.request_id));
        out.push({ type: "tool-approval-response", approvalId: p.request_id, approved, ...(p.feedback ? { reason: p.feedback } : {}) });
        break;
      }
      case "ToolResult": {
        const id = p.tool_call_id;
        this.#close(out);
        this.#available(id, out);
        const rv = p.return_value ?? {};
        if (this.#denied.has(id)) out.push({ type: "tool-output-denied", toolCallId: id });
        else if (rv.is_error) out.push({ type: "tool-output-error", toolCallId: id, errorText: rv.message || (typeof rv.output === "string" ? rv.output : "error") });
        else out.push({ type: "tool-output-available", toolCallId: id, output: rv.output });
        break;
      }
      case "StatusUpdate":
        if (p.token_usage) out.push({ type: "message-metadata", messageMetadata: { usage: p.token_usage, contextTokens: p.context_tokens } });
        break;
      case "TurnEnd":
        this.#endStep(out);
        break;
      default:
        break; // TurnBegin, StepInterrupted, compaction, a tool's own messages: nothing to show
    }
    return out;
  }

  /**
   * The chunks that end the message: `finish` when the run ended well, `abort` when it was
   * cancelled (`outcome.cancelled`), `error` with the error's words otherwise; `pause` (an
   * approval the client answers in its next request) ends with `finish` too.
   */
  end(outcome = {}) {
    const out = this.start();
    this.#close(out);
    if (this.#stepOpen && (outcome.error !== undefined || outcome.cancelled || outcome.pause)) {
      out.push({ type: "finish-step" });
      this.#stepOpen = false;
    }
    if (outcome.cancelled) out.push({ type: "abort", reason: outcome.reason ?? "cancelled" });
    else if (outcome.error !== undefined) {
      const e = outcome.error;
      out.push({ type: "error", errorText: e instanceof Error ? `${e.name}: ${e.message}` : String(e) });
    } else out.push({ type: "finish", finishReason: outcome.pause ? "tool-calls" : "stop" });
    return out;
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
