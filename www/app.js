// The demo: a multi-step loop over `step` with two tools, streamed into the page.
import * as kosong from "../pkg/browser.js";

await kosong.init();
const $ = (id) => document.getElementById(id);
const log = (s) => { const d = document.createElement("div"); d.textContent = `${(performance.now() / 1000).toFixed(2)}s ${s}`; $("log").prepend(d); };
const el = (tag, cls, text = "") => { const e = document.createElement(tag); if (cls) e.className = cls; e.textContent = text; return e; };

const tools = new kosong.SimpleToolset([
  {
    name: "weather", description: "Current weather in a city",
    parameters: { type: "object", properties: { city: { type: "string" }, unit: { type: "string" } }, required: ["city"] },
    handler: async ({ city, unit }, { signal }) => {
      await new Promise((r, j) => { const t = setTimeout(r, 900); signal.addEventListener("abort", () => { clearTimeout(t); j(signal.reason); }); });
      return `${city}: 18° ${unit === "fahrenheit" ? "F" : "C"}, light rain`;
    },
  },
  {
    name: "clock", description: "Current time in a timezone",
    parameters: { type: "object", properties: { timezone: { type: "string" } }, required: ["timezone"] },
    handler: ({ timezone }) => `${timezone}: ${new Date().toLocaleTimeString("en-GB", { timeZone: timezone })}`,
  },
]);
const provider = new kosong.OpenAIChatProvider({ model: "mock", baseUrl: new URL("/mock/v1", location.href).href });
const history = [];
let ctrl = null;

$("ask").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const q = $("q").value.trim();
  if (!q || ctrl) return;
  history.push({ role: "user", content: q });
  $("chat").append(el("div", "msg user", q));
  ctrl = new AbortController();
  $("stop").disabled = false;
  const allCards = [];
  try {
    for (let n = 1; n <= 5; n++) {
      log(`step ${n} begins`);
      const box = el("div", "msg assistant");
      const thinking = el("details", "think"); thinking.append(el("summary", "", "thinking…"));
      const thinkText = el("div"); thinking.append(thinkText);
      const answer = el("div");
      box.append(thinking, answer);
      $("chat").append(box);
      const cards = new Map();
      const result = await kosong.step(provider, "You are a helpful assistant.", tools, history, {
        signal: ctrl.signal,
        onMessagePart: (p) => {
          if (p.type === "think") thinkText.textContent += p.think;
          else if (p.type === "text") answer.textContent += p.text;
          else if (p.type === "function") {
            const card = el("div", "card"); const status = el("span", "status running", "streaming…");
            const args = el("div", "", p.function.arguments ?? "");
            card.append(status, el("b", "", `${p.function.name}`), args);
            cards.set(p.id, { status, args }); allCards.push(status); box.append(card);
            log(`tool call ${p.function.name} begins`);
          } else if (p.type === "tool_call_part" && p.tool_call_id) {
            cards.get(p.tool_call_id).args.textContent += p.arguments_part ?? "";
          }
        },
        onToolResult: (r) => {
          const c = cards.get(r.tool_call_id);
          c.status.textContent = r.return_value.is_error ? "failed" : "done";
          c.status.className = `status ${r.return_value.is_error ? "failed" : "done"}`;
          c.args.append(el("div", "", `→ ${typeof r.return_value.output === "string" ? r.return_value.output : JSON.stringify(r.return_value.output)}`));
          log(`tool ${r.tool_call_id} finished`);
        },
      });
      for (const c of cards.values()) if (c.status.textContent === "streaming…") { c.status.textContent = "running"; }
      history.push(result.message);
      if (result.toolCalls.length === 0) break;
      for (const r of await result.toolResults()) {
        history.push({ role: "tool", tool_call_id: r.tool_call_id, content: r.return_value.output || r.return_value.message });
      }
    }
  } catch (e) {
    for (const status of allCards) {
      if (!["done", "failed"].includes(status.textContent)) { status.textContent = "aborted"; status.className = "status aborted"; }
    }
    log(`stopped: ${e?.name ?? ""} ${e?.message ?? e}`);
    $("chat").append(el("div", "msg", `⏹ ${e?.message ?? e}`));
    history.length = 0;
  } finally {
    ctrl = null;
    $("stop").disabled = true;
  }
});
$("stop").addEventListener("click", () => ctrl?.abort(new DOMException("Stopped by the user", "AbortError")));
