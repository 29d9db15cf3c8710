#!/usr/bin/env node
// `npm run demo`: builds what is missing, then serves www/ and the built package on
// 127.0.0.1 together with an embedded mock model (an OpenAI-compatible endpoint streaming a
// scripted tool-calling conversation at a realistic pace), and prints the URL.
import { createServer } from "node:http";
import { readFile } from "node:fs/promises";
import { dirname, extname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "./build.mjs";
import { ensureNpmPackages } from "./setup.mjs";
import { think, text, toolStart, toolArgs, finish, usage, done, sleep } from "../tests/js/mock-openai.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

const TYPES = { ".html": "text/html; charset=utf-8", ".js": "text/javascript", ".mjs": "text/javascript", ".css": "text/css", ".wasm": "application/wasm", ".json": "application/json" };

/** Pieces of `s` of about `n` characters: how a model streams tool arguments. */
const pieces = (s, n) => s.match(new RegExp(`[\\s\\S]{1,${n}}`, "g")) ?? [];

const textOf = (m) => (typeof m?.content === "string" ? m.content : (m?.content ?? []).map((p) => p.text ?? "").join(""));

/**
 * A scripted failure happens every time it is asked for; only the engine's retry of the request
 * that just failed (the same body, within `RETRY_WINDOW_MS`) gets through, so the page shows the
 * retry working — and the next ask fails again.
 */
const RETRY_WINDOW_MS = 15_000;
function isRetryOf(failed, body) {
  const at = failed.get(body);
  failed.delete(body);
  if (at !== undefined && Date.now() - at < RETRY_WINDOW_MS) return true;
  failed.set(body, Date.now());
  return false;
}

/**
 * The embedded model: a scripted agent conversation, chosen by the last message. A tool result
 * gets an answer that uses it; a note to save calls `save_note` (which asks for approval);
 * arithmetic calls `calculator`; a "flaky" question fails once with a 500; a "broken" stream drops
 * the connection after the first call, mid-way through the second (the round is salvaged: the first
 * tool's result is kept, the second is told its input was cut off); anything else calls
 * `search` and `clock` in parallel, their arguments streamed in small pieces at a realistic
 * pace, and then says a sentence more — so both tools start while the model still writes.
 */
async function mockModel(req, res, failed) {
  let body = "";
  for await (const c of req) body += c;
  let messages = [];
  let offered = [];
  try {
    const request = JSON.parse(body || "{}");
    messages = request.messages ?? [];
    offered = (request.tools ?? []).map((t) => t.function?.name);
  } catch {}
  const last = messages.at(-1);
  if (/\bflaky\b/i.test(textOf(last)) && last?.role === "user" && !isRetryOf(failed.flaky, body)) {
    res.writeHead(500, { "content-type": "application/json" }).end(JSON.stringify({ error: { message: "mock: the server had a bad moment", type: "server_error" } }));
    return;
  }
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  const send = async (s, ms = 30) => {
    if (res.destroyed) return;
    res.write(s);
    await sleep(ms);
  };
  const thinkAndSay = async (thought, said) => {
    for (const w of pieces(thought, 12)) await send(think(w), 25);
    for (const w of pieces(said, 6)) await send(text(w), 35);
  };
  const call = async (index, id, name, args, ms = 60) => {
    await send(toolStart(index, id, name, ""));
    for (const a of pieces(JSON.stringify(args), 5)) await send(toolArgs(index, a), ms);
  };
  const question = textOf([...messages].reverse().find((m) => m.role === "user"));
  if (/researcher sub-agent/.test(textOf(messages.find((m) => m.role === "system")))) {
    await researcherScript(messages, last, thinkAndSay, call, send);
    res.end(done());
    return;
  }
  if (last?.role === "tool") {
    // The results as a person would retell them: a tool message's `<system>` wrapper (kimi-cli's
    // words for the model) never reaches the answer.
    const retell = (r) =>
      r.replace(/<system>ERROR:\s*([\s\S]*?)<\/system>/g, (_, m) => (/broke off/.test(m) ? "(one call did not run: the connection dropped while its input was arriving)" : `(a tool failed: ${m.trim()})`))
        .replace(/<\/?system>/g, "")
        // A sub-agent's result: its report, without kimi-cli's header lines.
        .replace(/^agent_id:[\s\S]*?\[summary\]\n/, "")
        .trim();
    const results = messages.slice(messages.findLastIndex((m) => m.role === "assistant") + 1).map((m) => retell(textOf(m))).filter(Boolean);
    await thinkAndSay("I have the results; let me put them together.", `Here is what I found:\n${results.map((r) => `• ${r}`).join("\n")}`);
    await send(finish("stop"), 0);
    await send(usage(420 + Math.round(body.length / 8), 64, 256), 0);
  } else if (/\bbroken\b/i.test(question) && last?.role === "user") {
    // Every time: the first call is complete before the drop, so the engine salvages the round and
    // the next request carries it (never this one again).
    await thinkAndSay("I should look up the city and the clock at the same time.", "Let me search for Paris and check the time in Tokyo.");
    await call(0, "call_search", "search", { query: "Paris" });
    await send(toolStart(1, "call_clock", "clock", ""));
    for (const a of pieces('{"timezone": "Asi', 5)) await send(toolArgs(1, a), 60);
    res.destroy(); // the connection drops mid-call
    return;
  } else if (offered.includes("send_email")) {
    await workerScript(question, thinkAndSay, call, send);
  } else if (/\bnote\b/i.test(question)) {
    const note = question.replace(/^.*?note\s*:?\s*/i, "").trim() || "(empty)";
    await thinkAndSay("The user wants a note saved. That needs their approval.", "I'll save that note for you.");
    await call(0, "call_note", "save_note", { text: note });
    await send(finish("tool_calls"), 0);
    await send(usage(300, 30, 0), 0);
  } else if (/\bresearch\b/i.test(question) && offered.includes("researcher")) {
    // Two sub-agents at once, one a city, each started the moment its call is complete.
    await thinkAndSay("Two cities: one researcher each, in parallel.", "I'll send a researcher to each city.");
    await call(0, "call_research_paris", "researcher", { prompt: "Research Paris", description: "research Paris" });
    await call(1, "call_research_tokyo", "researcher", { prompt: "Research Tokyo", description: "research Tokyo" });
    await send(finish("tool_calls"), 0);
    await send(usage(320, 52, 0), 0);
  } else if (/\d\s*[-+*/^]\s*\d/.test(question)) {
    const expression = question.match(/[-+*/^().\d\s]{3,}/)[0].trim();
    await thinkAndSay("Arithmetic: the calculator is exact.", "Let me calculate that.");
    await call(0, "call_calc", "calculator", { expression });
    await send(finish("tool_calls"), 0);
    await send(usage(300, 30, 0), 0);
  } else {
    await thinkAndSay("I should look up the city and the clock at the same time.", "Let me search for Paris and check the time in Tokyo.");
    await call(0, "call_search", "search", { query: "Paris" });
    await call(1, "call_clock", "clock", { timezone: "Asia/Tokyo" });
    for (const w of pieces(" While those run: Tokyo is 8 hours ahead of Paris in winter.", 6)) await send(text(w), 35);
    await send(finish("tool_calls"), 0);
    await send(usage(310, 48, 0), 0);
  }
  res.end(done());
}

/**
 * The script for the Worker's tools (`examples/worker`: `clock`, `add`, `send_email`), chosen when
 * the request offers them: "email" or "send" calls `send_email` (which asks for approval), numbers
 * with `+` call `add`, anything else calls `clock` and `add` in parallel.
 */
async function workerScript(question, thinkAndSay, call, send) {
  if (/\b(e-?mail|send)\b/i.test(question)) {
    const subject = question.replace(/^.*\b(e-?mail|send)\b\s*:?\s*/i, "").trim() || "Hello from the Worker";
    await thinkAndSay("Sending an email needs the user's approval.", "I'll send that email once you approve it.");
    await call(0, "call_email", "send_email", { to: "ada@example.com", subject });
  } else if (/\d\s*\+\s*\d/.test(question)) {
    const numbers = question.match(/\d+(\.\d+)?/g).map(Number);
    await thinkAndSay("A sum: the add tool is exact.", "Let me add those.");
    await call(0, "call_add", "add", { numbers });
  } else {
    await thinkAndSay("I can check the clock and do a sum at the same time.", "Let me check the time in Paris and add 2 and 40.");
    await call(0, "call_clock", "clock", { timezone: "Europe/Paris" });
    await call(1, "call_add", "add", { numbers: [2, 40] });
  }
  await send(finish("tool_calls"), 0);
  await send(usage(300, 30, 0), 0);
}

/**
 * The researcher sub-agent's script (the demo's `researcher` tool runs it): it searches its city,
 * then reports in more than 200 characters (so no summary is asked again); asked again anyway, it
 * says the same at more length.
 */
async function researcherScript(messages, last, thinkAndSay, call, send) {
  const task = textOf(messages.find((m) => m.role === "user"));
  const city = task.replace(/^research\s*/i, "").trim() || "Paris";
  if (last?.role === "user" && messages.filter((m) => m.role === "assistant").length === 0) {
    await thinkAndSay(`One city: ${city}. A search will do.`, `Searching for ${city}.`);
    await call(0, "call_search", "search", { query: city });
    await send(finish("tool_calls"), 0);
    await send(usage(180, 20, 0), 0);
    return;
  }
  const found = textOf(messages.filter((m) => m.role === "tool").at(-1)).replace(/<\/?system>/g, "").trim();
  const report = `Report on ${city}: ${found} In short, ${city} is worth knowing about, and the search above is what the local database holds on it today; nothing else was looked up, so treat the figures as the database's.`;
  await thinkAndSay("I have what I need; a short report.", report);
  await send(finish("stop"), 0);
  await send(usage(260, 70, 0), 0);
}

/** The demo's one server: the page, the package and the mock model. */
export function createDemoServer() {
  // Each server keeps its own memory of the failures it just scripted.
  const failed = { flaky: new Map() };
  return createServer((req, res) => handle(req, res, failed));
}

async function handle(req, res, failed) {
  const url = new URL(req.url, "http://127.0.0.1");
  if (req.method === "POST" && url.pathname === "/mock/v1/chat/completions") return mockModel(req, res, failed);
  if (url.pathname === "/favicon.ico") return res.writeHead(204).end();
  if (url.pathname === "/" || url.pathname === "/www" || url.pathname === "/www/") {
    res.writeHead(302, { location: "/www/index.html" }).end(); // so the page's relative imports resolve
    return;
  }
  let path = url.pathname;
  path = normalize(path).replace(/^(\.\.[/\\])+/, "");
  if (!path.startsWith("/www/") && !path.startsWith("/pkg/")) {
    res.writeHead(404).end("not found");
    return;
  }
  try {
    const data = await readFile(join(root, path));
    res.writeHead(200, { "content-type": TYPES[extname(path)] ?? "application/octet-stream" }).end(data);
  } catch {
    res.writeHead(404).end("not found");
  }
}

/**
 * Listens on `port`, or on the next free one when it is taken (8787 is also `wrangler dev`'s
 * default); resolves with the port it got.
 */
export function listenFrom(server, port, tries = 20) {
  return new Promise((resolve, reject) => {
    const attempt = (p, left) => {
      const onError = (e) => {
        server.off("listening", onListening);
        if (e.code === "EADDRINUSE" && left > 0) attempt(p + 1, left - 1);
        else reject(e);
      };
      const onListening = () => {
        server.off("error", onError);
        resolve(server.address().port);
      };
      server.once("error", onError);
      server.once("listening", onListening);
      server.listen(p, "127.0.0.1");
    };
    attempt(port, tries);
  });
}

if (import.meta.url === `file://${process.argv[1]}`) {
  ensureNpmPackages();
  build();
  const server = createDemoServer();
  const wanted = Number(process.env.PORT ?? 8787);
  const port = await listenFrom(server, wanted);
  if (port !== wanted) console.log(`kosong-wasm demo: port ${wanted} is taken; using ${port}`);
  console.log(`kosong-wasm demo: http://127.0.0.1:${port}/`);
}
