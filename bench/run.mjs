#!/usr/bin/env node
// `npm run bench`: builds what is missing, runs every comparison (each in one process of its
// own, all its contenders side by side in it), measures sizes, cold starts and memory, and
// writes bench/results.json, bench/results.md and the table in docs/benchmarks.md.
//   npm run bench -- --runs 7 --only text-openai,size
//   npm run bench -- --base <git ref>    the A/B: that ref's package beside this one (bench/ab.mjs)
import { execFileSync, spawnSync } from "node:child_process";
import { cpSync, existsSync, readFileSync, writeFileSync, readdirSync, mkdtempSync, mkdirSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir, cpus } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { gzipSync } from "node:zlib";
import { build, compileWasm } from "../scripts/build.mjs";
import { ensureNpmPackages } from "../scripts/setup.mjs";
import { stats } from "./lib.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..");
const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const RUNS = Number(arg("runs", 7));
const ONLY = arg("only", null)?.split(",");
const want = (name) => !ONLY || ONLY.includes(name);

// `--base <ref>`: the same-process A/B of that ref's package and this one (bench/ab.mjs), alone.
if (arg("base", null) !== null) {
  const r = spawnSync(process.execPath, ["--expose-gc", join(here, "ab.mjs"), ...process.argv.slice(2)], { cwd: root, stdio: "inherit" });
  process.exit(r.status ?? 1);
}

ensureNpmPackages();
build();

const results = { date: new Date().toISOString(), node: process.version, cpus: cpus().length, cpu: cpus()[0]?.model, runs: RUNS, versions: {}, comparisons: {} };
for (const p of ["ai", "@ai-sdk/openai", "@ai-sdk/anthropic", "openai", "@anthropic-ai/sdk", "@openai/agents", "eventsource-parser", "agents", "@cloudflare/ai-chat", "wrangler"]) {
  results.versions[p] = JSON.parse(readFileSync(join(root, "node_modules", p, "package.json"), "utf8")).version;
}

function compare(name) {
  console.error(`bench: ${name}`);
  const r = spawnSync(process.execPath, ["--expose-gc", join(here, "compare.mjs"), name, String(RUNS)], { cwd: root, encoding: "utf8", maxBuffer: 64 << 20 });
  if (r.status !== 0) throw new Error(`${name} failed:\n${r.stderr}`);
  return JSON.parse(r.stdout.trim().split("\n").at(-1));
}

for (const c of ["text-openai", "text-anthropic", "text-responses", "text-gemini", "text-16k", "text-openai-http", "agent-turn", "tools-openai-sequential", "tools-openai-interleaved", "tools-anthropic-sequential", "tools-16k", "bigarg", "bigarg-nested", "structured", "memory"]) {
  if (want(c)) results.comparisons[c] = compare(c);
}

// ---- sizes: minified bundles of what a page needs to stream with one provider --------------
if (want("size")) {
  console.error("bench: size");
  const esbuild = await import("esbuild");
  const dir = mkdtempSync(join(tmpdir(), "kosong-bench-size-"));
  const entries = {
    "kosong-wasm (JS + .wasm, every provider)": 'export * from "kosong-wasm";',
    "AI SDK streamText + @ai-sdk/openai": 'export { streamText } from "ai"; export { createOpenAI } from "@ai-sdk/openai";',
    "openai": 'export { default } from "openai";',
    "@anthropic-ai/sdk": 'export { default } from "@anthropic-ai/sdk";',
    "@openai/agents": 'export { Agent, run, tool } from "@openai/agents";',
  };
  const sizes = [];
  for (const [name, code] of Object.entries(entries)) {
    const r = await esbuild.build({
      stdin: { contents: code, resolveDir: root, loader: "js" },
      bundle: true, minify: true, format: "esm", platform: "browser", write: false, outdir: dir, logLevel: "silent",
      conditions: ["browser"], loader: { ".wasm": "file" }, external: ["node:*"],
    });
    let js = 0, wasm = 0, jsRaw = 0, wasmRaw = 0;
    for (const f of r.outputFiles) {
      if (f.path.endsWith(".wasm")) (wasm += gzipSync(f.contents, { level: 9 }).length), (wasmRaw += f.contents.length);
      else if (f.path.endsWith(".js")) (js += gzipSync(f.contents, { level: 9 }).length), (jsRaw += f.contents.length);
    }
    if (name.startsWith("kosong-wasm")) {
      // The browser entry loads its .wasm by URL (`new URL(..., import.meta.url)`), which a
      // bundler copies as an asset: count it here.
      const bytes = readFileSync(join(root, "pkg", "wasm", "kosong_wasm_bg.wasm"));
      wasm += gzipSync(bytes, { level: 9 }).length;
      wasmRaw += bytes.length;
    }
    sizes.push({ name, gzip: js + wasm, jsGzip: js, wasmGzip: wasm, raw: jsRaw + wasmRaw });
    if (name.startsWith("kosong-wasm")) {
      // The same JS with a .wasm built for one wire format (cargo features; the package's
      // build takes them from KOSONG_WASM_PROVIDERS). pkg/ is left as it is.
      for (const only of ["openai", "anthropic", "responses", "gemini"]) {
        const out = join(dir, `only-${only}`);
        compileWasm([only], out, "k", { quiet: true });
        const bytes = readFileSync(join(out, "k_bg.wasm"));
        const w = gzipSync(bytes, { level: 9 }).length;
        sizes.push({ name: `kosong-wasm built for ${only} only (KOSONG_WASM_PROVIDERS=${only})`, gzip: js + w, jsGzip: js, wasmGzip: w, raw: jsRaw + bytes.length });
      }
    }
  }
  rmSync(dir, { recursive: true, force: true });
  // With the ratchet's budget for the .wasm, as tests/js/packed.test.mjs enforces it.
  // `const BUDGET = 306 * 1024;` or `const BUDGET = 313_856;`
  const budget = readFileSync(join(root, "tests", "js", "packed.test.mjs"), "utf8").match(/const BUDGET = ([\d_]+)( \* 1024)?;/);
  results.comparisons.size = { comparison: "size", rows: sizes, wasmBudget: budget ? Number(budget[1].replaceAll("_", "")) * (budget[2] ? 1024 : 1) : null };
}

// ---- cold start: import + init + one provider in a fresh Node process ------------------------
// Every contender is one bundled file (esbuild, platform node; kosong-wasm's pkg/node.js is one
// already, beside its .wasm), so no contender pays for resolving a node_modules tree; the
// processes take turns, so a slow moment of the machine falls on all of them alike.
if (want("coldstart")) {
  console.error("bench: cold start");
  const esbuild = await import("esbuild");
  const dir = join(root, "target", "bench-coldstart");
  mkdirSync(dir, { recursive: true });
  const contenders = {
    "kosong-wasm": { entry: join(root, "pkg", "node.js"), code: (m) => `new m.OpenAIChatProvider({ model: "gpt-4.1-mini", apiKey: "sk-x" })` },
    "AI SDK (ai + @ai-sdk/openai)": { bundle: 'export { streamText } from "ai"; export { createOpenAI } from "@ai-sdk/openai";', code: (m) => `m.createOpenAI({ apiKey: "sk-x" }).chat("gpt-4.1-mini")` },
    "openai": { bundle: 'export { default } from "openai";', code: (m) => `new m.default({ apiKey: "sk-x" })` },
    "@anthropic-ai/sdk": { bundle: 'export { default } from "@anthropic-ai/sdk";', code: (m) => `new m.default({ apiKey: "sk-x" })` },
    "@openai/agents": { bundle: 'export { Agent, run, tool } from "@openai/agents";', code: (m) => `new m.Agent({ name: "a", model: "gpt-4.1-mini" })` },
  };
  const scripts = {};
  for (const [name, c] of Object.entries(contenders)) {
    let entry = c.entry;
    if (!entry) {
      entry = join(dir, `${name.replace(/[^a-z0-9]+/gi, "_")}.mjs`);
      // The banner lets the CommonJS inside a bundle require Node's built-in modules.
      const banner = { js: 'import { createRequire as __cr } from "node:module"; const require = __cr(import.meta.url);' };
      await esbuild.build({ stdin: { contents: c.bundle, resolveDir: root, loader: "js" }, bundle: true, format: "esm", platform: "node", outfile: entry, banner, logLevel: "silent" });
    }
    scripts[name] = `const t = performance.now(); const m = await import(${JSON.stringify(pathToFileURL(entry).href)}); ${c.code("m")}; console.log(performance.now() - t);`;
  }
  const ms = Object.fromEntries(Object.keys(scripts).map((n) => [n, []]));
  for (let i = 0; i < RUNS + 1; i++) {
    for (const [name, code] of Object.entries(scripts)) {
      const out = execFileSync(process.execPath, ["--input-type=module", "-e", code], { cwd: dir, encoding: "utf8" });
      if (i > 0) ms[name].push(Number(out.trim()));
    }
  }
  results.comparisons.coldstart = { comparison: "coldstart", rows: Object.entries(ms).map(([name, xs]) => ({ name, ...stats(xs) })) };
}

// ---- Worker startup: `wrangler check startup` on examples/worker and on its peer ----------------
// The same chat session Worker twice — this package's example (AgentSession, its tools) and
// bench/worker-peer (Cloudflare's AIChatAgent with the AI SDK's streamText and the same tools) —
// each built by wrangler and started in workerd under its CPU profiler, taking turns. From each
// profile: its span (endTime - startTime) and its busy time (samples not idle). The bench fails
// when this package's median span passes 0.3× the peer's.
if (want("worker-startup")) {
  console.error("bench: worker startup");
  const wrangler = join(root, "node_modules", ".bin", "wrangler");
  const base = join(root, "target", "bench-worker-startup");
  rmSync(base, { recursive: true, force: true });
  const workers = {
    "kosong-wasm (examples/worker: AgentSession)": join(root, "examples", "worker"),
    "agents + @cloudflare/ai-chat + ai (AIChatAgent)": join(here, "worker-peer"),
  };
  const dirs = {};
  for (const [name, from] of Object.entries(workers)) {
    const dir = join(base, name.split(" ")[0].replace(/[^a-z0-9]+/gi, "-"));
    mkdirSync(join(dir, "node_modules"), { recursive: true });
    cpSync(join(from, "src"), join(dir, "src"), { recursive: true });
    cpSync(join(from, "wrangler.toml"), join(dir, "wrangler.toml"));
    // The example imports the package by name; everything else resolves from the repository's node_modules.
    symlinkSync(root, join(dir, "node_modules", "kosong-wasm"), "dir");
    dirs[name] = dir;
  }
  const profileOf = (file) => {
    const p = JSON.parse(readFileSync(file, "utf8"));
    const idle = new Set(p.nodes.filter((n) => n.callFrame.functionName === "(idle)").map((n) => n.id));
    const busy = p.samples.reduce((sum, id, i) => sum + (idle.has(id) ? 0 : p.timeDeltas[i]), 0);
    return { span: (p.endTime - p.startTime) / 1000, busy: busy / 1000 };
  };
  const runs = Object.fromEntries(Object.keys(dirs).map((n) => [n, { span: [], busy: [] }]));
  for (let i = 0; i < RUNS; i++) {
    for (const [name, dir] of i % 2 ? Object.entries(dirs).reverse() : Object.entries(dirs)) {
      const out = join(dir, "startup.cpuprofile");
      execFileSync(wrangler, ["check", "startup", "--outfile", out], { cwd: dir, stdio: "ignore", env: { ...process.env, WRANGLER_SEND_METRICS: "false" } });
      const p = profileOf(out);
      runs[name].span.push(p.span);
      runs[name].busy.push(p.busy);
    }
  }
  const rows = Object.entries(runs).map(([name, r]) => ({ name, ...stats(r.span), busy: stats(r.busy).median }));
  results.comparisons["worker-startup"] = { comparison: "worker-startup", rows };
  const [ours, peer] = rows;
  console.error(`bench: worker startup — ${ours.median.toFixed(1)} ms against ${peer.median.toFixed(1)} ms (${(ours.median / peer.median).toFixed(2)}×)`);
  if (ours.median > 0.3 * peer.median) {
    console.error(`bench: FAILED — the Worker's startup span (${ours.median.toFixed(1)} ms) passed 0.3× its peer's (${peer.median.toFixed(1)} ms)`);
    process.exitCode = 1;
  }
}

// ---- In Chromium: page load to the first text delta ---------------------------------------------
// Two pages on one loopback server that also streams an OpenAI-compatible answer: one loads this
// package's browser build (its JS and .wasm), the other an esbuild bundle of the AI SDK
// (streamText + @ai-sdk/openai); each asks for one answer and notes when its first text delta
// arrives (ms since navigation began). A fresh browser context each time (nothing cached), the
// pages taking turns.
if (want("browser-first-token")) {
  console.error("bench: browser first token");
  const { chromium } = await import("playwright-core");
  const { CHROMIUM, ensureChromium } = await import("../scripts/setup.mjs");
  ensureChromium();
  const esbuild = await import("esbuild");
  const { createServer } = await import("node:http");
  const aiBundle = (await esbuild.build({
    stdin: {
      contents: `import { streamText } from "ai"; import { createOpenAI } from "@ai-sdk/openai";
        const r = streamText({ model: createOpenAI({ apiKey: "sk-x", baseURL: location.origin + "/v1" }).chat("m"), prompt: "hi" });
        for await (const d of r.textStream) { if (d) { window.firstToken = performance.now(); break; } }`,
      resolveDir: root, loader: "js",
    },
    bundle: true, minify: true, format: "esm", platform: "browser", write: false, logLevel: "silent",
  })).outputFiles[0].contents;
  const kosongPage = `<script type="module">import * as k from "/pkg/browser.js"; await k.init();
    const p = new k.OpenAIChatProvider({ model: "m", apiKey: "sk-x", baseUrl: location.origin + "/v1" });
    await k.generate(p, "", [], [{ role: "user", content: "hi" }], { onMessagePart(x) { if (x.type === "text" && !window.firstToken) window.firstToken = performance.now(); } });
  </script>`;
  const chunk = (d, f = null) => `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: d, finish_reason: f }] })}\n\n`;
  const types = { ".js": "text/javascript", ".wasm": "application/wasm" };
  const server = createServer((req, res) => {
    const url = new URL(req.url, "http://x");
    if (url.pathname === "/v1/chat/completions") {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end(chunk({ role: "assistant", content: "Hello" }) + chunk({ content: " there." }) + chunk({}, "stop") + "data: [DONE]\n\n");
    } else if (url.pathname === "/kosong.html") {
      res.writeHead(200, { "content-type": "text/html" }).end(kosongPage);
    } else if (url.pathname === "/ai.html") {
      res.writeHead(200, { "content-type": "text/html" }).end('<script type="module" src="/ai.js"></script>');
    } else if (url.pathname === "/ai.js") {
      res.writeHead(200, { "content-type": "text/javascript" }).end(aiBundle);
    } else if (url.pathname.startsWith("/pkg/") && !url.pathname.includes("..") && existsSync(join(root, url.pathname))) {
      res.writeHead(200, { "content-type": types[url.pathname.slice(url.pathname.lastIndexOf("."))] ?? "application/octet-stream" });
      res.end(readFileSync(join(root, url.pathname)));
    } else res.writeHead(404).end();
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const origin = `http://127.0.0.1:${server.address().port}`;
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  const pages = { "kosong-wasm (browser build: JS + .wasm)": "/kosong.html", "AI SDK streamText + @ai-sdk/openai (esbuild bundle)": "/ai.html" };
  const ms = Object.fromEntries(Object.keys(pages).map((n) => [n, []]));
  try {
    for (let i = 0; i < RUNS + 1; i++) {
      for (const [name, path] of i % 2 ? Object.entries(pages).reverse() : Object.entries(pages)) {
        const context = await browser.newContext();
        const page = await context.newPage();
        await page.goto(origin + path);
        const t = await page.waitForFunction(() => window.firstToken, null, { timeout: 30_000 }).then((h) => h.jsonValue());
        await context.close();
        if (i > 0) ms[name].push(t);
      }
    }
  } finally {
    await browser.close();
    server.close();
  }
  results.comparisons["browser-first-token"] = { comparison: "browser-first-token", rows: Object.entries(ms).map(([name, xs]) => ({ name, ...stats(xs) })) };
}

// Each comparison carries when it was measured (`at`). `--only a,b` measures those again and keeps
// the others of the last run, with their own dates (the report names them).
for (const c of Object.values(results.comparisons)) c.at = results.date;
if (ONLY && existsSync(join(here, "results.json"))) {
  const previous = JSON.parse(readFileSync(join(here, "results.json"), "utf8"));
  for (const c of Object.values(previous.comparisons)) c.at ??= previous.date;
  results.comparisons = { ...previous.comparisons, ...results.comparisons };
}
writeFileSync(join(here, "results.json"), `${JSON.stringify(results, null, 2)}\n`);
const md = (await import("./report.mjs")).report(results);
writeFileSync(join(here, "results.md"), md);
const readme = readFileSync(join(root, "docs", "benchmarks.md"), "utf8");
const start = "<!-- bench:start -->";
const end = "<!-- bench:end -->";
if (readme.includes(start)) {
  writeFileSync(join(root, "docs", "benchmarks.md"), readme.slice(0, readme.indexOf(start) + start.length) + "\n" + md + readme.slice(readme.indexOf(end)));
}
console.log(md);
