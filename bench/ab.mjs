// The same-process A/B: the package at a base git ref beside the working tree's, on every bench
// fixture, interleaved, in both orders. How a change is shown not to slow anything down (these
// machines move 2-3x between runs, so separate-process numbers cannot say).
//   npm run bench -- --base <ref> [--runs 11] [--only text-anthropic,tools-openai-sequential]
// Builds <ref>'s package in a temporary worktree (its own scripts/build.mjs, with this checkout's
// toolchain; its target dir kept in target/ab-base), then measures in two processes, each loading
// both packages (two module graphs, two wasm instances): one imports the base first, the other
// the new (the package imported second runs a few percent faster, whichever it is). Each runs
// every fixture's rounds in both orders (base first, new first). Prints new/base per fixture: the
// geometric mean of the four ratios of medians, and the four; each package's ratio to the bare JS
// reference (eventsource-parser + JSON.parse) timed in the same rounds. Also writes bench/ab.json.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { build } from "../scripts/build.mjs";
import { ensureNpmPackages } from "../scripts/setup.mjs";
import { textFixture, toolsFixture, fixtureFetch, followUp, stats, settle } from "./lib.mjs";
import { textContenders, bareToolStream } from "./contenders.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..");
const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const base = arg("base");
const RUNS = Number(arg("runs", 11));
const ONLY = arg("only", null)?.split(",");

/** Builds `ref`'s package in a worktree; returns its pkg/node.js path and a cleanup. */
function buildBase(ref) {
  const sha = execFileSync("git", ["rev-parse", "--verify", `${ref}^{commit}`], { cwd: root, encoding: "utf8" }).trim();
  const dir = mkdtempSync(join(tmpdir(), "kosong-ab-"));
  execFileSync("git", ["worktree", "add", "--detach", dir, sha], { cwd: root, stdio: "ignore" });
  // This checkout's toolchain and packages; a target dir kept under this one's, so the base's
  // dependencies are compiled once across A/B runs.
  for (const shared of [".tools", "node_modules"]) if (existsSync(join(root, shared))) symlinkSync(join(root, shared), join(dir, shared), "dir");
  mkdirSync(join(root, "target", "ab-base"), { recursive: true });
  symlinkSync(join(root, "target", "ab-base"), join(dir, "target"), "dir");
  console.error(`bench ab: building ${ref} (${sha.slice(0, 7)}) in ${dir}`);
  execFileSync(process.execPath, [join(dir, "scripts", "build.mjs")], {
    cwd: dir,
    stdio: ["ignore", "ignore", "inherit"],
  });
  const cleanup = () => {
    try {
      execFileSync("git", ["worktree", "remove", "--force", dir], { cwd: root, stdio: "ignore" });
    } catch {
      rmSync(dir, { recursive: true, force: true });
    }
  };
  return { entry: join(dir, "pkg", "node.js"), sha, cleanup };
}

const KEY = "sk-bench-0123456789abcdef";
const user = [{ role: "user", content: "go" }];
const PROVIDERS = { openai: "OpenAIChatProvider", anthropic: "AnthropicProvider", responses: "OpenAIResponsesProvider", gemini: "GeminiProvider" };
const text = (r) => (typeof r.message.content === "string" ? r.message.content : r.message.content.map((p) => p.text ?? "").join(""));

const BASE_URL = "http://bench.invalid/v1";

/**
 * Each fixture: `setup()` (untimed), `run(k, io)` for a package `k`, checked to do the whole job,
 * and `ref(io)`: the bare JavaScript reference (eventsource-parser + JSON.parse) on the same
 * bytes, timed in the same rounds, so each package's ratio to it comes from this process too.
 */
function fixtures() {
  const out = {};
  for (const format of Object.keys(PROVIDERS)) {
    const fx = textFixture(format);
    const setup = () => fixtureFetch(fx, followUp(format)).fetch;
    const provider = (k, fetch) => new k[PROVIDERS[format]]({ model: "m", apiKey: KEY, baseUrl: BASE_URL, fetch });
    const reference = textContenders(format)["eventsource-parser + JSON.parse"];
    const ref = (fetch) => reference({ fetch, baseUrl: BASE_URL });
    out[`text-${format}`] = { setup, ref, check: (got) => got === fx.text, run: async (k, fetch) => text(await k.generate(provider(k, fetch), "", [], user)) };
    const withParts = async (k, fetch) => {
      let t = "";
      await k.generate(provider(k, fetch), "", [], user, { onMessagePart: (p) => void (t += p.text ?? "") });
      return t;
    };
    out[`text-${format} + onMessagePart`] = { setup, ref, check: (got) => got === fx.text, run: withParts };
    // The same bytes in 16 KB reads, as undici hands a real response over: here the cost of a
    // read (the floor of the one-event-a-read fixtures above) is gone, and what is left is each
    // contender's own decoding.
    const netSetup = () => fixtureFetch(fx, followUp(format), { readBytes: 16384 }).fetch;
    const netRun = out[`text-${format}`].run;
    out[`text-${format}, 16 KB reads`] = { setup: netSetup, ref, check: (got) => got === fx.text, run: netRun };
    out[`text-${format}, 16 KB reads + onMessagePart`] = { setup: netSetup, ref, check: (got) => got === fx.text, run: withParts };
  }
  // The same text through an agent turn: every part published on the wire, read on a merged and
  // a raw side (the turn's own hot path: the wire's send, merge and flush).
  {
    const fx = textFixture("openai");
    const reference = textContenders("openai")["eventsource-parser + JSON.parse"];
    out["turn-openai (runSoul, merged + raw sides)"] = {
      setup: () => fixtureFetch(fx, followUp("openai")).fetch,
      ref: (fetch) => reference({ fetch, baseUrl: BASE_URL }),
      check: (got) => got === fx.text,
      run: async (k, fetch) => {
        const agent = new k.Agent({ provider: new k[PROVIDERS.openai]({ model: "m", apiKey: KEY, baseUrl: BASE_URL, fetch }), systemPrompt: "" });
        let t = "";
        await k.runSoul(agent, "go", async (wire) => {
          const raw = wire.uiSide({ merge: false });
          const drain = (async () => { for await (const _ of raw); })();
          for await (const m of wire.uiSide({ merge: true })) if (m.type === "ContentPart") t += m.payload.text ?? "";
          await drain;
        }, new AbortController().signal);
        return t;
      },
    };
  }
  const schema = { type: "object", properties: { query: { type: "string" }, items: { type: "array" } }, additionalProperties: true };
  for (const [name, format, interleaved] of [["tools-openai-sequential", "openai", false], ["tools-openai-interleaved", "openai", true], ["tools-anthropic-sequential", "anthropic", false]]) {
    const fx = toolsFixture(format, { interleaved });
    // Each run notes when each handler started (`io.started`), so the tool start — from the
    // moment a call's closing bytes are handed to the reader to its handler's first line — is
    // compared in the same rounds as the step's time.
    const onStart = (io, id) => io.started.has(id) || io.started.set(id, performance.now());
    const row = (readBytes) => ({
      setup: () => ({ ...fixtureFetch(fx, followUp(format), { readBytes }), started: new Map() }),
      ref: async (io) => (await bareToolStream(format, { fetch: io.fetch, baseUrl: BASE_URL }, (args, id) => (onStart(io, id), `ok ${args.items.length}`))).length,
      check: (n) => n === fx.calls.length,
      run: async (k, io) => {
        const provider = new k[PROVIDERS[format]]({ model: "m", apiKey: KEY, baseUrl: BASE_URL, fetch: io.fetch });
        const tools = new k.SimpleToolset(fx.calls.map((c) => ({ name: c.name, description: "", parameters: schema, handler: (args, ctx) => (onStart(io, ctx.toolCallId), `ok ${args.items.length}`) })));
        const r = await k.step(provider, "", tools, user);
        return (await r.toolResults()).filter((x) => !x.return_value.is_error).length;
      },
    });
    out[name] = { ...row(0), starts: (io) => fx.calls.map((c) => io.started.get(c.id) - io.state.handed[c.closeEvent]) };
    // The same bytes in 16 KB reads: what a read costs is gone, each one's own decoding is left
    // (a tool start is not timed here: a read holds many events).
    out[`${name}, 16 KB reads`] = row(16384);
  }
  return out;
}

/** Medians of `runs` interleaved rounds, `order` ([name, run(io)]) deciding who goes first in each round. */
async function rounds(fx, order, runs) {
  const times = Object.fromEntries(order.map(([name]) => [name, []]));
  const starts = Object.fromEntries(order.map(([name]) => [name, []]));
  for (let w = 0; w < 3; w++) for (const [, run] of order) await run(fx.setup());
  for (let r = 0; r < runs; r++) {
    for (const [name, run] of order) {
      await settle();
      const io = fx.setup();
      const t = performance.now();
      await run(io);
      times[name].push(performance.now() - t);
      if (fx.starts) starts[name].push(...fx.starts(io));
    }
  }
  const medians = Object.fromEntries(Object.entries(times).map(([n, ms]) => [n, stats(ms).median]));
  if (fx.starts) medians.start = Object.fromEntries(Object.entries(starts).map(([n, ms]) => [n, stats(ms).median]));
  return medians;
}

/**
 * One process's A/B: imports the two packages (`newFirst`: the working tree's first), then
 * times each fixture in rounds of both run orders. Rows of ratios; the lines go to stderr.
 */
async function measure(baseEntry, newEntry, newFirst) {
  const entries = newFirst ? [newEntry, baseEntry] : [baseEntry, newEntry];
  const loaded = [];
  for (const e of entries) loaded.push(await import(pathToFileURL(e).href));
  const [baseK, newK] = newFirst ? [loaded[1], loaded[0]] : loaded;
  const rows = [];
  for (const [name, fx] of Object.entries(fixtures())) {
    if (ONLY && !ONLY.some((o) => name.startsWith(o))) continue;
    for (const [who, k] of [["base", baseK], ["new", newK]]) {
      const got = await fx.run(k, fx.setup());
      if (!fx.check(got)) throw new Error(`${name}: the ${who} package did not do the whole job (${got})`);
    }
    if (!fx.check(await fx.ref(fx.setup()))) throw new Error(`${name}: the reference did not do the whole job`);
    const half = Math.ceil(RUNS / 2);
    const [pBase, pNew, pRef] = [["base", (io) => fx.run(baseK, io)], ["new", (io) => fx.run(newK, io)], ["ref", fx.ref]];
    // The reference goes between the two packages, so neither always follows it.
    const baseFirst = await rounds(fx, [pBase, pRef, pNew], half);
    const newRunFirst = await rounds(fx, [pNew, pRef, pBase], half);
    const ratios = [baseFirst.new / baseFirst.base, newRunFirst.new / newRunFirst.base];
    const mean = (k) => (baseFirst[k] + newRunFirst[k]) / 2;
    const row = { fixture: name, baseMs: mean("base"), newMs: mean("new"), refMs: mean("ref"), ratios, newToRef: mean("new") / mean("ref"), baseToRef: mean("base") / mean("ref") };
    if (baseFirst.start) {
      // The median tool start (ms after the call's closing bytes were handed over) in each order.
      const st = (k) => [baseFirst.start[k], newRunFirst.start[k]];
      row.startMs = { base: st("base"), new: st("new"), ref: st("ref") };
    }
    rows.push(row);
    console.error(`bench ab: ${newFirst ? "new" : "base"} imported first: ${name} new/base ${ratios.map((r) => r.toFixed(3)).join(" / ")}`);
  }
  return rows;
}

const geomean = (xs) => Math.exp(xs.reduce((a, x) => a + Math.log(x), 0) / xs.length);
const f3 = (xs) => xs.map((x) => x.toFixed(3)).join(" / ");

/**
 * The A/B. The package imported second into a process runs a few percent faster (an A/A of one
 * package against itself read 0.87–0.91 on a tools row), whichever it is; running the rounds in
 * both orders does not cancel that. So two processes measure, one importing the base first and
 * one the new, and each fixture's verdict is the geometric mean of the four ratios (two run
 * orders in each process).
 */
export async function ab() {
  if (!base) throw new Error("bench ab: --base <git ref> is required");
  ensureNpmPackages();
  build();
  const b = buildBase(base);
  try {
    const newEntry = join(root, "pkg", "node.js");
    const child = (newFirst) => {
      const out = execFileSync(process.execPath, ["--expose-gc", fileURLToPath(import.meta.url), "--measure", b.entry, newEntry, newFirst ? "new" : "base", ...process.argv.slice(2)], {
        cwd: root,
        encoding: "utf8",
        stdio: ["ignore", "pipe", "inherit"],
        maxBuffer: 16 << 20,
      });
      return JSON.parse(out);
    };
    const [baseImportedFirst, newImportedFirst] = [child(false), child(true)];
    const rows = baseImportedFirst.map((a, i) => {
      const z = newImportedFirst[i];
      const all = [...a.ratios, ...z.ratios];
      const row = { fixture: a.fixture, newToBase: geomean(all), ratios: { baseImportedFirst: a.ratios, newImportedFirst: z.ratios }, baseMs: (a.baseMs + z.baseMs) / 2, newMs: (a.newMs + z.newMs) / 2, refMs: (a.refMs + z.refMs) / 2 };
      row.newToRef = row.newMs / row.refMs;
      row.baseToRef = row.baseMs / row.refMs;
      console.log(
        `${a.fixture.padEnd(48)} new/base ${row.newToBase.toFixed(3)} (geometric mean of ${f3(a.ratios)} with base imported first, ${f3(z.ratios)} with new imported first; base run first / new run first)` +
          `  base ${row.baseMs.toFixed(1)} ms, new ${row.newMs.toFixed(1)} ms; ×ref: base ${row.baseToRef.toFixed(2)}, new ${row.newToRef.toFixed(2)}`,
      );
      if (a.startMs) {
        const st = (k) => [...a.startMs[k], ...z.startMs[k]];
        row.startMs = { base: st("base"), new: st("new"), ref: st("ref") };
        console.log(`${"".padEnd(48)} tool start ms (base imported first: base run first / new run first; then new imported first): base ${f3(st("base"))}, new ${f3(st("new"))}, bare loop ${f3(st("ref"))}`);
      }
      return row;
    });
    writeFileSync(join(here, "ab.json"), JSON.stringify({ date: new Date().toISOString(), node: process.version, base: { ref: base, sha: b.sha }, runs: RUNS, rows }, null, 2) + "\n");
    return rows;
  } finally {
    b.cleanup();
  }
}

if (process.argv[2] === "--measure") {
  // A measuring child: its JSON rows on stdout.
  const [baseEntry, newEntry, first] = process.argv.slice(3, 6);
  process.stdout.write(JSON.stringify(await measure(baseEntry, newEntry, first === "new")));
} else if (import.meta.url === pathToFileURL(process.argv[1]).href) await ab();
