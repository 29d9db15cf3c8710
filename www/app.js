// The demo: an agent (kimi-cli's soul loop on kosong-wasm) running in the page. Everything
// on screen is drawn from the run's wire messages, so a downloaded wire.jsonl replays to the
// same page.
import * as kosong from "../pkg/browser.js";
import { demoTools } from "./tools.js";

await kosong.init();
const $ = (id) => document.getElementById(id);
const el = (tag, cls, text) => {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
};

// ---- settings ---------------------------------------------------------------------------

const KINDS = {
  mock: { label: "Embedded mock (no key)", make: () => new kosong.OpenAIChatProvider({ model: "mock", baseUrl: new URL("/mock/v1", location.href).href }) },
  openai: { label: "OpenAI Chat Completions", model: "gpt-4.1-mini", make: (o) => new kosong.OpenAIChatProvider(o) },
  "openai-responses": { label: "OpenAI Responses", model: "gpt-5-mini", make: (o) => new kosong.OpenAIResponsesProvider(o) },
  anthropic: { label: "Anthropic", model: "claude-sonnet-4-5", make: (o) => new kosong.AnthropicProvider(o) },
  gemini: { label: "Gemini", model: "gemini-2.5-flash", make: (o) => new kosong.GeminiProvider(o) },
  kimi: { label: "Kimi (Moonshot)", model: "kimi-k2-turbo-preview", make: (o) => new kosong.KimiProvider(o) },
};
for (const [k, v] of Object.entries(KINDS)) $("kind").append(new Option(v.label, k));
const saved = JSON.parse(sessionStorage.getItem("kosong-demo-settings") ?? "{}");
$("kind").value = saved.kind ?? "mock";
$("model").value = saved.model ?? "";
$("baseUrl").value = saved.baseUrl ?? "";
$("apiKey").value = saved.apiKey ?? "";

function providerFromSettings() {
  const kind = $("kind").value;
  const spec = KINDS[kind];
  if (kind === "mock") return spec.make();
  const opts = { model: $("model").value.trim() || spec.model };
  if ($("apiKey").value.trim()) opts.apiKey = $("apiKey").value.trim();
  if ($("baseUrl").value.trim()) opts.baseUrl = $("baseUrl").value.trim();
  return spec.make(opts);
}

let agent = null;
function newAgent() {
  const notes = $("notes");
  agent = new kosong.Agent({
    name: "demo",
    provider: providerFromSettings(),
    systemPrompt: "You are a helpful assistant in a browser demo. Use the tools when they help; call independent tools in parallel.",
    toolset: new kosong.SimpleToolset(demoTools({ onNote: (t) => notes.append(el("li", "", t)), toolError: kosong.toolError })),
    maxStepsPerTurn: 8,
  });
}
$("settings").addEventListener("change", () => {
  // The key stays in this tab only (sessionStorage), never in a URL or a recording.
  sessionStorage.setItem("kosong-demo-settings", JSON.stringify({ kind: $("kind").value, model: $("model").value, baseUrl: $("baseUrl").value, apiKey: $("apiKey").value }));
  $("settings").dataset.real = String($("kind").value !== "mock");
  newAgent();
});
$("settings").dataset.real = String($("kind").value !== "mock");
newAgent();

// ---- drawing the wire ---------------------------------------------------------------------

/** Draws one run's wire messages into the page. `t` is each message's time in ms. */
class RunView {
  constructor(root, { live }) {
    this.root = root;
    this.live = live;
    this.step = null;
    this.cards = new Map();
    this.t0 = null;
  }

  draw(msg, t, wire) {
    this.t0 ??= t;
    const p = msg.payload ?? {};
    switch (msg.type) {
      case "TurnBegin": {
        const input = typeof p.user_input === "string" ? p.user_input : (p.user_input ?? []).map((x) => x.text ?? "").join("");
        this.root.append(el("div", "msg user", input));
        break;
      }
      case "StepBegin":
        this.newStep(p.n, t);
        break;
      case "ContentPart": {
        const s = this.step ?? this.newStep(1, t);
        s.modelEnd = t;
        if (p.type === "think") {
          s.think.hidden = false;
          s.thinkText.textContent += p.think ?? "";
        } else if (p.type === "text") {
          s.text.textContent += p.text;
        }
        break;
      }
      case "ToolCall": {
        const s = this.step ?? this.newStep(1, t);
        s.modelEnd = t;
        this.newCard(s, p, t);
        break;
      }
      case "ToolCallPart": {
        const s = this.step;
        if (!s) break;
        s.modelEnd = t;
        const card = this.cards.get(p.tool_call_id) ?? [...this.cards.values()].at(-1);
        if (card) card.args.textContent += p.arguments_part ?? "";
        break;
      }
      case "DemoToolStart": {
        const card = this.cards.get(p.tool_call_id);
        if (card) {
          card.start = t;
          this.setStatus(card, "running");
        }
        break;
      }
      case "ToolResult": {
        const card = this.cards.get(p.tool_call_id);
        if (!card) break;
        card.end = t;
        card.start ??= t;
        const rv = p.return_value ?? {};
        const brief = (rv.display ?? []).find((d) => d.type === "brief")?.text;
        const aborted = brief === "Aborted";
        this.setStatus(card, aborted ? "aborted" : rv.is_error ? "failed" : "done");
        const out = typeof rv.output === "string" ? rv.output : JSON.stringify(rv.output);
        card.result.textContent = rv.is_error ? `${rv.message}` : out || rv.message;
        break;
      }
      case "ApprovalRequest": {
        const box = el("div", "approval");
        box.dataset.requestId = p.id;
        box.append(el("span", "", `Allow ${p.action}? ${p.description} `));
        for (const [label, answer] of [["Approve", "approve"], ["Reject", "reject"]]) {
          const b = el("button", answer, label);
          b.type = "button";
          b.disabled = !this.live;
          b.addEventListener("click", () => wire?.respond(p.id, answer));
          box.append(b);
        }
        (this.step?.box ?? this.root).append(box);
        break;
      }
      case "ApprovalResponse": {
        const box = this.root.querySelector(`.approval[data-request-id="${CSS.escape(p.request_id)}"]`);
        if (box) {
          for (const b of box.querySelectorAll("button")) b.disabled = true;
          box.append(el("b", "answer", p.response === "reject" ? " rejected" : " approved"));
        }
        break;
      }
      case "StepInterrupted":
        this.root.append(el("div", "msg notice", "⏹ step interrupted"));
        break;
      case "StepRetry":
        this.root.append(el("div", "msg notice", `↻ retrying step (${p.error ?? "error"})`));
        break;
      case "StatusUpdate":
        if (typeof p.context_usage === "number") $("usage").textContent = `context ${(p.context_usage * 100).toFixed(1)}%`;
        break;
      case "TurnEnd":
        break;
    }
    this.drawTimelines(t);
  }

  newStep(n, t) {
    const box = el("div", "msg assistant step");
    box.dataset.step = String(n);
    const think = el("details", "think");
    think.hidden = true;
    think.append(el("summary", "", "thinking"));
    const thinkText = el("div", "think-text");
    think.append(thinkText);
    const text = el("div", "text");
    const cards = el("div", "cards");
    const timeline = el("div", "timeline");
    timeline.append(el("div", "lane-label", "model"), el("div", "lane model-lane"));
    box.append(think, text, cards, timeline);
    this.root.append(box);
    this.step = { n, box, think, thinkText, text, cards, timeline, start: t, modelEnd: t, tools: [] };
    return this.step;
  }

  newCard(s, call, t) {
    const card = el("div", "card");
    card.dataset.toolCallId = call.id;
    const status = el("span", "status streaming", "streaming");
    const args = el("code", "args", call.function?.arguments ?? "");
    const result = el("div", "result");
    card.append(status, el("b", "name", call.function?.name ?? "?"), args, result);
    s.cards.append(card);
    const label = el("div", "lane-label", call.function?.name ?? "?");
    const lane = el("div", "lane tool-lane");
    s.timeline.append(label, lane);
    const entry = { card, status, args, result, lane, begun: t, start: null, end: null, step: s };
    this.cards.set(call.id, entry);
    s.tools.push(entry);
  }

  setStatus(card, status) {
    card.status.textContent = status;
    card.status.className = `status ${status}`;
    card.card.dataset.status = status;
  }

  /** Bars on one time axis per step: the model's stream, and each tool from start to result. */
  drawTimelines(now) {
    const s = this.step;
    if (!s) return;
    const end = Math.max(now, s.modelEnd, ...s.tools.map((x) => x.end ?? now));
    const span = Math.max(end - s.start, 1);
    const bar = (lane, from, to, cls) => {
      let b = lane.querySelector(".bar");
      if (!b) lane.append((b = el("div", `bar ${cls}`)));
      b.style.left = `${((from - s.start) / span) * 100}%`;
      b.style.width = `${Math.max(((to - from) / span) * 100, 0.5)}%`;
      b.dataset.start = String(Math.round(from - s.start));
      b.dataset.end = String(Math.round(to - s.start));
      b.title = `${Math.round(from - s.start)}–${Math.round(to - s.start)} ms`;
    };
    bar(s.timeline.querySelector(".model-lane"), s.start, s.modelEnd, "model");
    for (const x of s.tools) if (x.start !== null) bar(x.lane, x.start, x.end ?? now, "tool");
  }

  /** After a stop: every card still open says what happened to its tool. */
  settle() {
    for (const c of this.cards.values()) if (c.end === null) this.setStatus(c, c.start === null ? "not started" : "aborted");
  }
}

// ---- running ------------------------------------------------------------------------------

let recording = [];
let ctrl = null;
const wireLog = (line) => {
  const pre = $("wirelog");
  pre.textContent += `${line}\n`;
  pre.scrollTop = pre.scrollHeight;
};

async function run(input) {
  ctrl = new AbortController();
  document.body.dataset.state = "running";
  $("stop").disabled = false;
  $("send").disabled = true;
  const view = new RunView($("chat"), { live: true });
  const recorder = new kosong.WireRecorder((line) => {
    recording.push(line);
    wireLog(line);
  });
  const ui = async (wire) => {
    for await (const msg of wire.uiSide({ merge: false })) view.draw(msg, performance.now(), wire);
  };
  let outcome = "done";
  try {
    await kosong.runSoul(agent, input, ui, ctrl.signal, { recorder });
  } catch (e) {
    outcome = e instanceof kosong.RunCancelled ? "cancelled" : "failed";
    if (outcome === "failed") $("chat").append(el("div", "msg error", `${e.name}: ${e.message}`));
  } finally {
    view.settle();
    view.drawTimelines(performance.now());
    ctrl = null;
    $("stop").disabled = true;
    $("send").disabled = false;
    $("download").disabled = recording.length === 0;
    document.body.dataset.state = outcome;
  }
}

$("ask").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const q = $("q").value.trim();
  if (q && !ctrl) run(q);
});
$("stop").addEventListener("click", () => ctrl?.abort(new DOMException("Stopped by the user", "AbortError")));
$("clear").addEventListener("click", () => {
  if (ctrl) return;
  $("chat").replaceChildren();
  $("wirelog").textContent = "";
  recording = [];
  $("download").disabled = true;
  newAgent();
});

// ---- recordings ---------------------------------------------------------------------------

$("download").addEventListener("click", () => {
  // A recording holds the whole session: the metadata line once, then every run's messages.
  const lines = recording.filter((l, i) => i === 0 || !l.startsWith('{"type":"metadata"'));
  const url = URL.createObjectURL(new Blob([`${lines.join("\n")}\n`], { type: "application/x-ndjson" }));
  const a = el("a");
  a.href = url;
  a.download = "wire.jsonl";
  a.click();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
});

/** Replays a wire.jsonl: the same drawing, in the recorded order and timing (compressed). */
export async function replay(text) {
  const messages = kosong.readWireRecord(text);
  const times = text.split(/\r?\n/).flatMap((l) => {
    try {
      const r = JSON.parse(l);
      return r && r.message ? [r.timestamp * 1000] : [];
    } catch {
      return [];
    }
  });
  $("chat").replaceChildren();
  $("wirelog").textContent = text;
  document.body.dataset.state = "replaying";
  let view = null;
  for (let i = 0; i < messages.length; i++) {
    if (messages[i].type === "TurnBegin" || !view) view = new RunView($("chat"), { live: false });
    view.draw(messages[i], times[i] ?? i);
    if (i % 20 === 0) await new Promise((r) => setTimeout(r, 0));
  }
  view?.settle();
  document.body.dataset.state = "replayed";
}
$("load").addEventListener("change", async () => {
  const file = $("load").files[0];
  if (file) await replay(await file.text());
});
window.kosongDemo = { replay, get recording() { return recording.join("\n"); } };
document.body.dataset.ready = "true";
