#!/usr/bin/env node
// `npm run demo`: builds what is missing, then serves www/ and the built package on
// 127.0.0.1 together with an embedded mock model (an OpenAI-compatible endpoint streaming a
// scripted tool-calling conversation at a realistic pace), and prints the URL.
import { createServer } from "node:http";
import { readFile } from "node:fs/promises";
import { dirname, extname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "./build.mjs";
import { think, text, toolStart, toolArgs, finish, usage, done, sleep } from "../tests/js/mock-openai.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

const TYPES = { ".html": "text/html; charset=utf-8", ".js": "text/javascript", ".mjs": "text/javascript", ".css": "text/css", ".wasm": "application/wasm", ".json": "application/json" };

/** Pieces of `s` of about `n` characters: how a model streams tool arguments. */
const pieces = (s, n) => s.match(new RegExp(`[\\s\\S]{1,${n}}`, "g")) ?? [];

async function mockModel(req, res) {
  let body = "";
  for await (const c of req) body += c;
  const { messages = [] } = JSON.parse(body || "{}");
  const last = messages.at(-1);
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  const send = async (s, ms = 30) => {
    if (res.destroyed) return;
    res.write(s);
    await sleep(ms);
  };
  if (last?.role === "tool") {
    const results = messages.filter((m) => m.role === "tool").map((m) => m.content);
    for (const w of pieces("The user wants the weather and the time. I have both results now.", 12)) await send(think(w), 25);
    for (const w of pieces(`Here is what I found: ${results.join("; ")}. Anything else?`, 6)) await send(text(w), 35);
    await send(finish("stop"), 0);
    await send(usage(420, 64, 256), 0);
  } else {
    for (const w of pieces("I should look up the weather and the clock at the same time.", 12)) await send(think(w), 25);
    for (const w of pieces("Let me check the weather in Paris and the time in Tokyo.", 6)) await send(text(w), 35);
    await send(toolStart(0, "call_weather", "weather", ""));
    for (const a of pieces(JSON.stringify({ city: "Paris", unit: "celsius" }), 5)) await send(toolArgs(0, a), 60);
    await send(toolStart(1, "call_clock", "clock", ""));
    for (const a of pieces(JSON.stringify({ timezone: "Asia/Tokyo" }), 5)) await send(toolArgs(1, a), 60);
    await send(finish("tool_calls"), 0);
    await send(usage(310, 48, 0), 0);
  }
  res.end(done());
}

/** The demo's one server: the page, the package and the mock model. */
export function createDemoServer() {
  return createServer(handle);
}

async function handle(req, res) {
  const url = new URL(req.url, "http://127.0.0.1");
  if (req.method === "POST" && url.pathname === "/mock/v1/chat/completions") return mockModel(req, res);
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

if (import.meta.url === `file://${process.argv[1]}`) {
  build();
  const server = createDemoServer();
  const port = Number(process.env.PORT ?? 8787);
  server.listen(port, "127.0.0.1", () => console.log(`kosong-wasm demo: http://127.0.0.1:${server.address().port}/`));
}
