// The demo: an agent (kimi-cli's soul loop on kosong-wasm) running in the page, its conversation
// a `Session` kept in IndexedDB: a reload mid-turn goes on with the turn by itself. Everything on
// screen is drawn from the turn's wire messages (the session's events), so a downloaded
// wire.jsonl replays to the same page.
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
  mock: { label: "Embedded mock (no key)", make: () => mockProvider() },
  openai: { label: "OpenAI Chat Completions", model: "gpt-4.1-mini", make: (o) => new kosong.OpenAIChatProvider(o) },
  "openai-responses": { label: "OpenAI Responses", model: "gpt-5-mini", make: (o) => new kosong.OpenAIResponsesProvider(o) },
  anthropic: { label: "Anthropic", model: "claude-sonnet-4-5", make: (o) => new kosong.AnthropicProvider(o) },
  gemini: { label: "Gemini", model: "gemini-2.5-flash", make: (o) => new kosong.GeminiProvider(o) },
  kimi: { label: "Kimi (Moonshot)", model: "kimi-k2-turbo-preview", make: (o) => new kosong.KimiProvider(o) },
};
const mockProvider = () => new kosong.OpenAIChatProvider({ model: "mock", baseUrl: new URL("/mock/v1", location.href).href });
for (const [k, v] of Object.entries(KINDS)) $("kind").append(new Option(v.label, k));
const saved = JSON.parse(sessionStorage.getItem("kosong-demo-settings") ?? "{}");
$("kind").value = KINDS[saved.kind] ? saved.kind : "mock";
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

/** The fields of a real provider are disabled (not just faded) while the mock is chosen. */
function syncSettings() {
  for (const id of ["model", "baseUrl", "apiKey"]) $(id).disabled = $("kind").value === "mock";
}

/**
 * The options of each turn's agent: the settings as they are when the turn starts (or resumes).
 * Its tools include a sub-agent (`researcher`, on the same provider) that searches one city and
 * reports: calls of it run at once, each on its own card and timeline lane.
 */
const agentOptions = () => {
  const tools = demoTools({ onNote: (t) => $("notes").append(el("li", "", t)), toolError: kosong.toolError });
  const researcher = new kosong.Agent({
    name: "researcher",
    provider: null,
    systemPrompt: "You are a researcher sub-agent: search for the one city you are given and report what you found in a few sentences.",
    toolset: new kosong.SimpleToolset(tools.filter((t) => t.name === "search")),
    maxStepsPerTurn: 4,
  });
  return {
    name: "demo",
    provider: providerFromSettings(),
    systemPrompt: "You are a helpful assistant in a browser demo. Use the tools when they help; call independent tools in parallel. To research several cities, start one researcher per city.",
    toolset: new kosong.SimpleToolset([...tools, researcher.asTool({ description: "Starts a researcher sub-agent on one city; returns its report." })]),
    maxStepsPerTurn: 8,
  };
};
let settingsText = JSON.stringify(settingsNow());
function settingsNow() {
  return { kind: $("kind").value, model: $("model").value, baseUrl: $("baseUrl").value, apiKey: $("apiKey").value };
}
$("settings").addEventListener("change", () => {
  const now = settingsNow();
  if (JSON.stringify(now) === settingsText) return;
  settingsText = JSON.stringify(now);
  // The key stays in this tab only (sessionStorage), never in a URL or a recording.
  sessionStorage.setItem("kosong-demo-settings", settingsText);
  syncSettings();
  clearComparison();
  newConversation().then(() =>
    $("chat").append(el("div", "msg notice settings-changed", `Settings changed: a new conversation starts (${KINDS[now.kind].label}).`)),
  );
});
syncSettings();

// ---- timelines ------------------------------------------------------------------------------

const LEGEND = [["model streaming", "var(--model)"], ["tool running", "var(--tool)"], ["sub-agent's turn", "var(--sub)"]];

/** A tick step (ms) that gives at most six intervals over `span`. */
function tickStep(span) {
  for (const step of [50, 100, 200, 250, 500, 1000, 2000, 2500, 5000, 10000, 20000, 60000]) if (span / step <= 6) return step;
  return Math.ceil(span / 6 / 60000) * 60000;
}
const ms = (v) => `${Math.round(v)} ms`;

/**
 * Draws rows of bars on one time axis, from 0 to `span` ms: `rows` are `{label, bars: [{from,
 * to, cls, text}], mark}`; each bar says what it is and when (start–end), the axis has ticks in
 * milliseconds, and a legend names the colours. `mark` draws a line (a turn's end).
 */
function drawTimeline(box, rows, span) {
  span = Math.max(span, 1);
  const pct = (v) => `${Math.min(Math.max(v / span, 0), 1) * 100}%`;
  const out = [];
  for (const row of rows) {
    const r = el("div", "tl-row");
    r.dataset.lane = row.label;
    const lane = el("div", "lane");
    for (const b of row.bars) {
      const bar = el("div", `bar ${b.cls}`);
      bar.style.left = pct(b.from);
      bar.style.width = `max(2px, ${((b.to - b.from) / span) * 100}%)`;
      bar.dataset.start = String(Math.round(b.from));
      bar.dataset.end = String(Math.round(b.to));
      bar.title = `${b.text}: ${Math.round(b.from)}–${ms(b.to)}`;
      const label = el("span", "bar-text", `${b.text} ${Math.round(b.from)}–${ms(b.to)}`);
      // Anchored on the side with room, so it stays inside the lane at any width.
      if (b.from / span < 0.5) label.style.left = pct(b.from);
      else label.style.right = `${(1 - Math.min(b.to / span, 1)) * 100}%`;
      lane.append(bar, label);
    }
    if (row.note) lane.append(el("span", "lane-note", row.note));
    if (row.mark !== undefined) {
      const m = el("div", "end-mark");
      m.style.left = pct(row.mark);
      m.title = row.markTitle ?? `turn ended at ${ms(row.mark)}`;
      lane.append(m);
    }
    r.append(el("div", "tl-label", row.label), lane);
    out.push(r);
  }
  const axisRow = el("div", "tl-row");
  const axis = el("div", "axis");
  const step = tickStep(span);
  // No tick in the last tenth: its label would run into the one before or out of the lane.
  for (let v = 0; v <= span * 0.9; v += step) {
    const t = el("span", "tick", v === 0 ? "0" : ms(v));
    t.style.left = pct(v);
    axis.append(t);
  }
  axisRow.append(el("div", "tl-label", "ms"), axis);
  const legend = el("div", "legend");
  // A colour is named when a bar of it is drawn (the sub-agents' only where one ran).
  const used = new Set(rows.flatMap((r) => r.bars.map((b) => b.cls)));
  for (const [name, colour] of LEGEND.filter(([, c]) => c !== "var(--sub)" || used.has("subagent"))) {
    const item = el("span", "", name);
    item.style.setProperty("--c", colour);
    legend.append(item);
  }
  box.replaceChildren(...out, axisRow, legend);
}

// ---- drawing the wire ---------------------------------------------------------------------

/** Draws one run's wire messages into the page. `t` is each message's time in ms. */
class RunView {
  constructor(root, { live }) {
    this.root = root;
    this.live = live;
    this.step = null;
    this.cards = new Map();
  }

  draw(msg, t, wire) {
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
        this.resumed(s, t);
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
        this.resumed(s, t);
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
        const rv = p.return_value ?? {};
        const brief = (rv.display ?? []).find((d) => d.type === "brief")?.text ?? "";
        const status = brief === "Aborted" ? "aborted" : brief === "Input cut off" ? "cut off" : brief.startsWith("Rejected") ? "rejected" : rv.is_error ? "failed" : "done";
        if (status === "cut off") {
          // It never ran: no bar (its lane says why), and the model's stream ended where its
          // last part came, which is where the connection dropped — not when the round was kept.
          card.cutOff = true;
          this.brokeOff(card.step ?? this.step);
        } else {
          card.end = t;
          card.start ??= t;
        }
        this.setStatus(card, status);
        const out = typeof rv.output === "string" ? rv.output : JSON.stringify(rv.output);
        // A refusal and a cut-off call as a person says them (the model-facing words stay in the
        // wire and the log).
        card.result.textContent =
          card.sub && !rv.is_error ? `→ ${card.sub.type} ${card.sub.agentId} gave its report (above) to the model.`
          : status === "rejected" ? `You said no${card.feedback ? `: “${card.feedback}”` : ""}, so it did not run.`
          : status === "cut off" ? "Not run: the connection dropped while its input was still arriving. The model was asked to send it again."
          : rv.is_error ? `${rv.message}` : out || rv.message;
        break;
      }
      case "SubagentEvent": {
        // A sub-agent's turn, on the card of the call that runs it: its text, its tools, its lane.
        const card = this.cards.get(p.parent_tool_call_id);
        if (card) this.subagent(card, p, t);
        break;
      }
      case "ApprovalRequest": {
        // The question sits on the card of the call that asks it (a sub-agent's, on its box), and the card waits for it.
        const card = this.cards.get(p.tool_call_id) ?? (p.agent_id ? [...this.cards.values()].find((c) => c.sub?.agentId === p.agent_id) : undefined);
        if (card) this.setStatus(card, "waiting for approval");
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
        if (card) {
          card.card.insertBefore(box, card.result);
          card.approval = p.id;
        } else (this.step?.box ?? this.root).append(box);
        break;
      }
      case "ApprovalResponse": {
        const box = this.root.querySelector(`.approval[data-request-id="${CSS.escape(p.request_id)}"]`);
        if (box) {
          for (const b of box.querySelectorAll("button")) b.disabled = true;
          box.append(el("b", "answer", p.response === "reject" ? " rejected" : " approved"));
        }
        const card = [...this.cards.values()].find((c) => c.approval === p.request_id);
        if (card) {
          card.feedback = p.feedback || "";
          // Approved, the tool goes on; refused, its result comes next.
          if (p.response !== "reject") this.setStatus(card, "running");
        }
        break;
      }
      case "StepInterrupted":
        this.root.append(el("div", "msg notice", "■ The step was interrupted."));
        break;
      case "StepRetry": {
        // The failed attempt is void: what it showed goes, the notice stays where it happened,
        // and the step's bars start again with the next attempt (not with the failed one and the wait).
        const what = p.status_code ?? p.error_type ?? "error";
        const wait = typeof p.wait_s === "number" ? `${p.wait_s.toFixed(1)} s` : "a moment";
        const notice = el("div", "msg notice retry", `↻ ${what} — retrying in ${wait}, attempt ${p.next_attempt} of ${p.max_attempts}`);
        const s = this.step;
        if (!s) {
          this.root.append(notice);
          break;
        }
        s.text.textContent = "";
        s.thinkText.textContent = "";
        s.think.hidden = true;
        for (const x of s.tools) {
          x.card.remove();
          for (const [id, c] of this.cards) if (c === x) this.cards.delete(id);
        }
        s.tools = [];
        s.box.insertBefore(notice, s.think);
        s.restart = true;
        s.streamEnd = null;
        break;
      }
      case "StatusUpdate":
        // Published when the step's stream has ended (the tools may still run); a stream that
        // broke off ended earlier, at its last part.
        if (this.step && !this.step.broken) this.step.streamEnd = t;
        if (p.max_context_tokens > 0) $("usage").textContent = `context ${(p.context_usage * 100).toFixed(1)}%`;
        break;
      case "TurnEnd":
        break;
    }
    this.drawTimelines(t);
  }

  newStep(n, t) {
    if (this.step) this.drawTimelines(t, true);
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
    box.append(think, text, cards, timeline);
    this.root.append(box);
    this.step = { n, box, think, thinkText, text, cards, timeline, start: t, modelEnd: t, streamEnd: null, tools: [] };
    return this.step;
  }

  /** The first part after a retry: the step's bars start here. */
  resumed(s, t) {
    if (!s.restart) return;
    s.restart = false;
    s.start = t;
  }

  newCard(s, call, t) {
    const card = el("div", "card");
    card.dataset.toolCallId = call.id;
    const status = el("span", "status streaming", "streaming");
    const args = el("code", "args", call.function?.arguments ?? "");
    const result = el("div", "result");
    card.append(status, el("b", "name", call.function?.name ?? "?"), args, result);
    s.cards.append(card);
    const entry = { card, status, args, result, name: call.function?.name ?? "?", begun: t, start: null, end: null, step: s };
    this.cards.set(call.id, entry);
    s.tools.push(entry);
  }

  /** One message of a sub-agent's turn, drawn in its call's card (`card.sub`). */
  subagent(card, p, t) {
    if (!card.sub) {
      const box = el("div", "subagent");
      box.dataset.agentId = p.agent_id;
      const text = el("div", "sub-text");
      const tools = el("ul", "sub-tools");
      box.append(el("div", "sub-head", `↳ ${p.subagent_type} ${p.agent_id}`), tools, text);
      card.card.insertBefore(box, card.result);
      card.sub = { agentId: p.agent_id, type: p.subagent_type, box, text, tools, calls: new Map(), start: t, end: null };
      // The call runs from its sub-agent's first message.
      if (card.start === null) {
        card.start = t;
        this.setStatus(card, "running");
      }
    }
    const sub = card.sub;
    const e = p.event ?? {};
    const q = e.payload ?? {};
    if (e.type === "TurnBegin") {
      // A summary asked for again: its answer is the one that counts, so the text starts anew.
      if (sub.end !== null) sub.text.textContent = "";
      sub.end = null;
    } else if (e.type === "StepBegin" && sub.text.textContent && !sub.text.textContent.endsWith("\n")) {
      sub.text.textContent += "\n";
    } else if (e.type === "ContentPart" && q.type === "text") sub.text.textContent += q.text ?? "";
    else if (e.type === "StepRetry") sub.text.textContent = "";
    else if (e.type === "ToolCall") {
      const li = el("li", "", `${q.function?.name ?? "?"} ${q.function?.arguments ?? ""}`);
      sub.tools.append(li);
      sub.calls.set(q.id, li);
    } else if (e.type === "ToolCallPart") {
      const li = [...sub.calls.values()].at(-1);
      if (li) li.textContent += q.arguments_part ?? "";
    } else if (e.type === "ToolResult") {
      const li = sub.calls.get(q.tool_call_id);
      if (li) li.append(q.return_value?.is_error ? " ✗" : " ✓");
    } else if (e.type === "TurnEnd") sub.end = t;
  }

  /** The stream of step `s` broke off and its round was kept: said once, and its bar ends there. */
  brokeOff(s) {
    if (!s || s.broken) return;
    s.broken = true;
    s.streamEnd = s.modelEnd;
    const notice = el("div", "msg notice broken", "⚡ Connection lost — round kept: what finished stays, and the turn goes on.");
    s.box.insertBefore(notice, s.timeline);
  }

  setStatus(card, status) {
    card.status.textContent = status;
    card.status.className = `status ${status.replace(/ /g, "-")}`;
    card.card.dataset.status = status;
  }

  /**
   * The current step's timeline: the model's stream and each tool from start to result, from
   * the step's start to its last bar's end (`now` stands in for what is still running).
   */
  drawTimelines(now, final = false) {
    const s = this.step;
    if (!s) return;
    const open = !final && this.live;
    const streamEnd = s.streamEnd ?? (open ? now : s.modelEnd);
    const rows = [{ label: "model", bars: [{ from: 0, to: streamEnd - s.start, cls: "model", text: s.broken ? "stream ⚡ cut" : "stream" }] }];
    if (s.broken) Object.assign(rows[0], { mark: streamEnd - s.start, markTitle: `connection lost at ${ms(streamEnd - s.start)}` });
    for (const x of s.tools) {
      const bars = x.start === null ? [] : [{ from: x.start - s.start, to: (x.end ?? (open ? now : x.start)) - s.start, cls: "tool", text: x.name }];
      rows.push({ label: x.name, bars, note: x.cutOff ? "not run: input cut off" : undefined });
      // A sub-agent's turn in a lane of its own, under the call that runs it.
      if (x.sub) rows.push({ label: `↳ ${x.sub.agentId}`, bars: [{ from: x.sub.start - s.start, to: (x.sub.end ?? (open ? now : x.sub.start)) - s.start, cls: "subagent", text: x.sub.type }] });
    }
    const span = Math.max(...rows.flatMap((r) => r.bars.map((b) => b.to)), 1);
    drawTimeline(s.timeline, rows, span);
  }

  /** After the run: every card still open says what happened to its tool; a stop is said. */
  settle(outcome, now) {
    for (const c of this.cards.values()) {
      if (c.end !== null || c.cutOff) continue;
      this.setStatus(c, c.start === null ? "not started" : "aborted");
      if (c.start !== null) c.end = now ?? c.start;
    }
    this.drawTimelines(now ?? 0, true);
    if (outcome === "cancelled") (this.step?.box ?? this.root).append(el("div", "notice stopped", "■ Stopped: you stopped this answer before it was finished."));
  }
}

// ---- the session ----------------------------------------------------------------------------

/**
 * The conversation is a `Session` in this tab's IndexedDB (its name kept in sessionStorage, so a
 * reload opens the same one). Opening it goes on with a turn the page was running when it was
 * reloaded; one loop draws every event, the stored ones first.
 */
let session = null;
let recording = [];
let turnView = null;
const SESSION_KEY = "kosong-demo-session";
const wireLog = (line) => {
  const pre = $("wirelog");
  pre.textContent += `${line}\n`;
  pre.scrollTop = pre.scrollHeight;
};
/** A recording line of a message, as WireRecorder writes one. */
const recordLine = (message) => {
  if (!recording.length) recording.push(JSON.stringify({ type: "metadata", protocol_version: kosong.WIRE_PROTOCOL_VERSION }));
  const line = JSON.stringify({ timestamp: Date.now() / 1000, message });
  recording.push(line);
  wireLog(line);
  $("download").disabled = false;
};
const responder = { respond: (id, answer) => session?.respond(id, answer).catch(() => {}) };

async function openSession() {
  let name = sessionStorage.getItem(SESSION_KEY);
  for (;;) {
    name ??= `demo-${crypto.randomUUID()}`;
    sessionStorage.setItem(SESSION_KEY, name);
    try {
      session = await kosong.Session.open(new kosong.IndexedDBSessionStore(name), agentOptions, { logger: null });
      break;
    } catch (e) {
      // A duplicated tab carries this tab's session name: it starts a conversation of its own.
      if (!(e instanceof kosong.SessionLockedError)) throw e;
      name = null;
    }
  }
  const s = session;
  if (s.running) {
    document.body.dataset.state = "running";
    setRunning(true);
    $("chat").append(el("div", "msg notice resumed", "↺ This page was reloaded while a turn ran: the turn goes on from where it was (kept in this tab's IndexedDB)."));
  }
  follow(s);
}

/** Draws the session's events as they are stored: a view per turn, its end settling it. */
async function follow(s) {
  for await (const e of s.events({ after: 0 })) {
    if (s !== session) return;
    const t = performance.now();
    if (e.message) {
      if (e.message.type === "TurnBegin" || !turnView) turnView = new RunView($("chat"), { live: true });
      recordLine(e.message);
      turnView.draw(e.message, t, responder);
      continue;
    }
    const { outcome, error } = e.end;
    turnView?.settle(outcome, t);
    turnView = null;
    if (error && outcome !== "cancelled") $("chat").append(el("div", "msg error", `${error.name}: ${error.message}`));
    setRunning(false);
    document.body.dataset.state = outcome;
  }
}

/** Closes the conversation (forgetting what it kept) and opens a new one. */
async function newConversation() {
  const old = session;
  session = null;
  const name = sessionStorage.getItem(SESSION_KEY);
  sessionStorage.removeItem(SESSION_KEY);
  if (old) {
    if (old.running) await old.cancel().catch(() => {});
    await old.close().catch(() => {});
    if (name) indexedDB.deleteDatabase(`kosong-session:${name}`);
  }
  turnView = null;
  await openSession();
}

// ---- running ------------------------------------------------------------------------------

/** Send and Stop swap while a run goes; focus follows the button that stays usable. */
function setRunning(running) {
  const focused = document.activeElement;
  $("stop").disabled = !running;
  $("send").disabled = running;
  $("compare").disabled = running;
  if (running && (focused === $("send") || focused === $("compare"))) $("stop").focus();
  if (!running && focused === $("stop")) $("q").focus();
}

async function run(input) {
  document.body.dataset.state = "running";
  setRunning(true);
  try {
    // The outcome is drawn by `follow` from the turn's stored end.
    await session.send(input);
  } catch (e) {
    $("chat").append(el("div", "msg error", `${e.name}: ${e.message}`));
    setRunning(session?.running ?? false);
    document.body.dataset.state = "failed";
  }
}

const busy = () => session?.running || ctrl !== null;
$("ask").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const q = $("q").value.trim();
  if (q && !busy()) run(q);
});
// A comparison started by Compare has its controller; a turn is the session's to cancel.
let ctrl = null;
const stop = () => (ctrl ? ctrl.abort(new DOMException("Stopped by the user", "AbortError")) : session?.cancel());
$("stop").addEventListener("click", stop);
document.addEventListener("keydown", (ev) => {
  if (ev.key === "Escape" && busy()) {
    ev.preventDefault();
    stop();
  }
});
$("clear").addEventListener("click", async () => {
  if (busy()) return;
  $("chat").replaceChildren();
  $("wirelog").textContent = "";
  $("notes").replaceChildren();
  $("usage").textContent = "";
  recording = [];
  $("download").disabled = true;
  document.body.dataset.state = "idle";
  clearComparison();
  await newConversation();
});

// ---- the comparison ---------------------------------------------------------------------------

const COMPARE_QUESTION = "What's the weather in Paris, and what time is it in Tokyo?";

/**
 * Runs the scripted turn on one agent and returns its timings (ms from `t0`): each step's
 * stream, each tool's run, and the turn's end.
 */
async function timedTurn(eager, t0, signal) {
  const tools = demoTools({ onNote: () => {}, toolError: kosong.toolError }).map((t) => (eager ? t : { ...t, eager: false }));
  const a = new kosong.Agent({ name: eager ? "eager" : "deferred", provider: mockProvider(), systemPrompt: "", toolset: new kosong.SimpleToolset(tools) });
  const steps = [];
  const calls = new Map();
  let end = null;
  const ui = async (wire) => {
    for await (const m of wire.uiSide()) {
      const t = performance.now() - t0;
      const p = m.payload ?? {};
      const step = steps.at(-1);
      if (m.type === "StepBegin") steps.push({ start: t, end: t });
      // The stream's end is its last part: the StatusUpdate comes after the step's stream is done,
      // and after the tools that wait for a whole answer have started.
      else if (m.type === "ContentPart" || m.type === "ToolCallPart") step && (step.end = t);
      else if (m.type === "ToolCall") {
        if (step) step.end = t;
        calls.set(p.id, { name: p.function.name, start: null, end: null });
      } else if (m.type === "DemoToolStart") calls.get(p.tool_call_id).start = t;
      else if (m.type === "ToolResult") calls.get(p.tool_call_id).end = t;
      else if (m.type === "TurnEnd") end = t;
    }
  };
  await kosong.runSoul(a, COMPARE_QUESTION, ui, signal);
  return { steps, calls: [...calls.values()], end };
}

/**
 * The comparison. `onLoad`: the one a first visit sees without a click, run beside the chat (Send
 * stays usable, the page's state is left alone); Compare, New chat and a change of model stop it.
 */
let loadCompare = null;
async function compare({ onLoad = false } = {}) {
  loadCompare?.abort();
  const own = new AbortController();
  if (onLoad) loadCompare = own;
  else {
    loadCompare = null;
    ctrl = own;
    document.body.dataset.state = "comparing";
    setRunning(true);
  }
  const section = $("comparison");
  section.hidden = false;
  delete section.dataset.savedMs;
  section.dataset.onLoad = String(onLoad);
  $("comparison-chart").replaceChildren();
  $("saved").textContent = onLoad
    ? "Running the same turn twice, side by side, as the page opens…"
    : "Running the same turn twice, side by side…";
  const t0 = performance.now();
  try {
    const [eager, deferred] = await Promise.all([timedTurn(true, t0, own.signal), timedTurn(false, t0, own.signal)]);
    const span = Math.max(eager.end, deferred.end);
    const chart = $("comparison-chart");
    chart.replaceChildren();
    for (const [title, r, cls] of [
      ["kosong-wasm: each tool starts when its call is complete", eager, "eager"],
      ["after the stream ends (how the AI SDK and the OpenAI Agents SDK run tools)", deferred, "deferred"],
    ]) {
      const head = el("div", `run-title ${cls}`, `${title} — turn ${ms(r.end)}`);
      const box = el("div", `timeline ${cls}`);
      box.dataset.end = String(Math.round(r.end));
      const rows = [{ label: "model", bars: r.steps.map((s, i) => ({ from: s.start, to: s.end, cls: "model", text: `step ${i + 1}` })), mark: r.end }];
      for (const c of r.calls) rows.push({ label: c.name, bars: c.start === null ? [] : [{ from: c.start, to: c.end ?? c.start, cls: "tool", text: c.name }] });
      drawTimeline(box, rows, span);
      chart.append(head, box);
    }
    // Whole milliseconds first, so the figures on the page add up.
    const [eagerMs, deferredMs] = [Math.round(eager.end), Math.round(deferred.end)];
    const saved = deferredMs - eagerMs;
    section.dataset.eagerMs = String(eagerMs);
    section.dataset.deferredMs = String(deferredMs);
    section.dataset.savedMs = String(saved);
    $("saved").textContent =
      saved > 0
        ? `Starting tools mid-stream finished the turn ${ms(saved)} sooner (${Math.round((saved / deferred.end) * 100)}% of ${ms(deferred.end)}).`
        : `No time saved on this run (${ms(eager.end)} against ${ms(deferred.end)}).`;
    if (!onLoad) document.body.dataset.state = "compared";
  } catch (e) {
    if (onLoad) {
      // Stopped by Compare, New chat or a new model: what replaced it is on the page.
      if (!(e instanceof kosong.RunCancelled)) $("saved").textContent = `${e.name}: ${e.message}`;
      return;
    }
    $("saved").textContent = e instanceof kosong.RunCancelled ? "■ Stopped: the comparison did not finish." : `${e.name}: ${e.message}`;
    document.body.dataset.state = e instanceof kosong.RunCancelled ? "cancelled" : "failed";
  } finally {
    if (onLoad) {
      if (loadCompare === own) loadCompare = null;
    } else {
      ctrl = null;
      setRunning(false);
    }
  }
}
$("compare").addEventListener("click", () => {
  if (!busy()) compare();
});
/** Hides the comparison (and stops one running as the page opened). */
function clearComparison() {
  loadCompare?.abort();
  $("comparison").hidden = true;
  $("comparison-chart").replaceChildren();
  $("saved").textContent = "";
}
// The first screen shows what is special without a click: against the embedded mock, the
// comparison runs as the page opens.
if ($("kind").value === "mock") compare({ onLoad: true });

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
export async function replay(text, name = "the file") {
  let messages;
  try {
    messages = kosong.readWireRecord(text);
  } catch {
    messages = [];
  }
  if (messages.length === 0) {
    // Nothing on the page changes: the file is not a recording.
    const notice = el("div", "msg notice load-error", `${name} holds no wire record: load a wire.jsonl downloaded from this page (or one kimi-cli wrote).`);
    notice.setAttribute("role", "alert");
    $("chat").append(notice);
    return;
  }
  const times = text.split(/\r?\n/).flatMap((l) => {
    try {
      const r = JSON.parse(l);
      return r && r.message ? [r.timestamp * 1000] : [];
    } catch {
      return [];
    }
  });
  $("chat").replaceChildren(el("div", "msg replay-label", "Replay of a recorded run: nothing is sent to a model and no tool runs."));
  $("wirelog").textContent = text;
  document.body.dataset.state = "replaying";
  let view = null;
  for (let i = 0; i < messages.length; i++) {
    if (messages[i].type === "TurnBegin" || !view) view = new RunView($("chat"), { live: false });
    view.draw(messages[i], times[i] ?? i);
    if (i % 20 === 0) await new Promise((r) => setTimeout(r, 0));
  }
  view?.settle("replayed", times.at(-1));
  document.body.dataset.state = "replayed";
}
$("load").addEventListener("change", async () => {
  const file = $("load").files[0];
  if (file) await replay(await file.text(), file.name);
  $("load").value = ""; // the same file can be chosen again
});
window.kosongDemo = { replay, get recording() { return recording.join("\n"); } };
await openSession();
document.body.dataset.ready = "true";
