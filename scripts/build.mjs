#!/usr/bin/env node
// `npm run build`: compiles the crate to wasm32 (release, size-tuned), runs wasm-bindgen
// --target web and writes the package's files under pkg/. Installs the wasm32 target and
// the pinned wasm-bindgen-cli when they are missing. Skips the work when pkg/ is newer than
// every source file (pass --force to rebuild anyway).
import { execFileSync, spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";
import { createHash } from "node:crypto";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const WASM_BINDGEN_VERSION = "0.2.130";
const force = process.argv.includes("--force");

function run(cmd, args, opts = {}) {
  console.error(`$ ${cmd} ${args.join(" ")}`);
  execFileSync(cmd, args, { stdio: "inherit", cwd: root, ...opts });
}

function newestMtime(path) {
  const st = statSync(path);
  if (!st.isDirectory()) return st.mtimeMs;
  return Math.max(st.mtimeMs, ...readdirSync(path).map((n) => newestMtime(join(path, n))));
}

/**
 * The wire formats to build in (cargo features): all by default; `KOSONG_WASM_PROVIDERS=openai`
 * (or a comma-separated list of openai, anthropic, responses, gemini) builds a smaller .wasm
 * without the others (see the README's size table).
 */
const ALL_PROVIDERS = ["openai", "anthropic", "responses", "gemini"];
function providers() {
  const list = (process.env.KOSONG_WASM_PROVIDERS ?? "").split(",").map((p) => p.trim()).filter(Boolean);
  for (const p of list) if (!ALL_PROVIDERS.includes(p)) throw new Error(`KOSONG_WASM_PROVIDERS: unknown provider \`${p}\` (${ALL_PROVIDERS.join(", ")})`);
  return list.length ? [...new Set(list)].sort() : ALL_PROVIDERS;
}

/** What `pkg/wasm/providers.txt` records of a build: its providers, and `+names` for a profiling one. */
function buildKind(list = providers()) {
  return list.join(",") + (process.env.KOSONG_WASM_NAMES === "1" ? "+names" : "");
}

/**
 * The record of a build: its kind, then its .wasm's SHA-256 — a .wasm put into `pkg/` by hand (a
 * profiling build copied in and back) has a fresh mtime but is not the build, and is built again.
 */
function buildRecord(list, wasmFile) {
  return `${buildKind(list)}\n${createHash("sha256").update(readFileSync(wasmFile)).digest("hex")}\n`;
}

function upToDate(pkg, extra, list) {
  const stamp = join(pkg, "wasm", "kosong_wasm_bg.wasm");
  if (!existsSync(stamp) || !existsSync(join(pkg, "node.js"))) return false;
  const chosen = join(pkg, "wasm", "providers.txt");
  if (!existsSync(chosen) || readFileSync(chosen, "utf8") !== buildRecord(list, stamp)) return false;
  const built = statSync(stamp).mtimeMs;
  const sources = ["src", "js", "Cargo.toml", "Cargo.lock", "scripts/build.mjs", ...extra].map((p) => join(root, p)).filter(existsSync);
  return sources.every((p) => newestMtime(p) <= built);
}

export function ensureToolchain() {
  const targets = spawnSync("rustup", ["target", "list", "--installed"], { encoding: "utf8" });
  if (!(targets.stdout ?? "").split("\n").includes("wasm32-unknown-unknown")) {
    run("rustup", ["target", "add", "wasm32-unknown-unknown"]);
  }
  return wasmBindgen();
}

function wasmBindgen() {
  const local = join(root, ".tools", "bin", "wasm-bindgen");
  for (const candidate of [local, "wasm-bindgen"]) {
    const v = spawnSync(candidate, ["--version"], { encoding: "utf8" });
    if (v.status === 0 && v.stdout.trim().endsWith(WASM_BINDGEN_VERSION)) return candidate;
  }
  // Not on the machine at the pinned version: install it into the repository (about 5 min).
  run("cargo", ["install", "wasm-bindgen-cli", "--version", WASM_BINDGEN_VERSION, "--root", join(root, ".tools")]);
  return local;
}

/**
 * Builds the package into `pkg/`. With `{testHooks: true}` it builds a second copy into
 * `pkg-test/` with the cargo feature `test-hooks` (a function that breaks the instance on
 * purpose, for the tests that prove a broken instance is reported) and `tests/js/test-hooks.js`
 * beside it; the shipped build never has them. With `{only: "anthropic"}` (any one wire format)
 * it builds the package for that format alone into `pkg-<format>/` (what KOSONG_WASM_PROVIDERS
 * does to pkg/), for the test of a single-provider build.
 */
export function build({ testHooks = false, only = null } = {}) {
  if (only !== null && !ALL_PROVIDERS.includes(only)) throw new Error(`build: unknown provider \`${only}\` (${ALL_PROVIDERS.join(", ")})`);
  const name = testHooks ? "pkg-test" : only ? `pkg-${only}` : "pkg";
  const out = join(root, name);
  const extra = testHooks ? ["tests/js/test-hooks.js"] : [];
  const list = only ? [only] : providers();
  if (!force && upToDate(out, extra, list)) {
    console.error(`kosong-wasm: ${name}/ is up to date`);
    return;
  }
  // Both builds share the target directory (and so the compiled dependencies): only this crate
  // is compiled again for the other feature set, and its .wasm is taken right after.
  rmSync(out, { recursive: true, force: true });
  compileWasm([...list, ...(testHooks ? ["test-hooks"] : [])], join(out, "wasm"), "kosong_wasm", {
    names: process.env.KOSONG_WASM_NAMES === "1",
  });
  writeFileSync(join(out, "wasm", "providers.txt"), buildRecord(list, join(out, "wasm", "kosong_wasm_bg.wasm")));
  // Every module of the JS layer as it is, the entries under their runtime's name; the constants
  // the core owns written in from its source (one place for each).
  const entries = { "entry-node.js": "node.js", "entry-workerd.js": "workerd.js", "entry-browser.js": "browser.js" };
  const constants = coreConstants();
  for (const file of readdirSync(join(root, "js")).filter((f) => f.endsWith(".js"))) {
    const text = readFileSync(join(root, "js", file), "utf8").replace(/"@core:([A-Z_]+)@"/g, (_, name) => {
      if (!(name in constants)) throw new Error(`kosong-wasm build: js/${file} names a core constant \`${name}\` the build does not know`);
      return JSON.stringify(constants[name]);
    });
    writeFileSync(join(out, entries[file] ?? file), text);
  }
  if (testHooks) copyFileSync(join(root, "tests", "js", "test-hooks.js"), join(out, "test-hooks.js"));
  else bundleEntries(out);
  const size = statSync(join(out, "wasm", "kosong_wasm_bg.wasm")).size;
  console.error(`kosong-wasm: built ${name}/ (${(size / 1024).toFixed(1)} KiB of wasm)`);
}

/**
 * The constants the JS layer takes from the core's source (`pub const NAME: … = <a string, a
 * number or an array of strings>;`), so a rule both sides need is written once, in Rust.
 */
const CORE_CONSTANTS = {
  WIRE_PROTOCOL_VERSION: "src/engine/soul/wire/jsonl.rs",
  THINKING_EFFORTS: "src/engine/providers/mod.rs",
  PART_TEXT: "src/glue/parts.rs",
  PART_THINK: "src/glue/parts.rs",
  PART_ARGUMENTS: "src/glue/parts.rs",
  PART_RECONNECT: "src/glue/parts.rs",
};

function coreConstants() {
  const out = {};
  for (const [name, file] of Object.entries(CORE_CONSTANTS)) {
    const src = readFileSync(join(root, file), "utf8");
    const m = new RegExp(`pub const ${name}: [^=]+= ([^;]+);`).exec(src);
    if (!m) throw new Error(`kosong-wasm build: the constant ${name} is not in ${file}`);
    out[name] = JSON.parse(m[1].replace(/,\s*\]$/, "]"));
  }
  return out;
}

/**
 * Compiles the crate with `features` (and no others) and runs wasm-bindgen into `outDir` as
 * `<outName>_bg.wasm` + glue. `names` keeps the function names (for a profiler or twiggy; never
 * shipped so). Also used by `npm run bench` for the one-provider builds.
 */
export function compileWasm(features, outDir, outName, { names = false, quiet = false } = {}) {
  const bindgen = ensureToolchain();
  const opts = quiet ? { stdio: ["ignore", "ignore", "inherit"] } : {};
  run("cargo", ["build", "--release", "--target", "wasm32-unknown-unknown", "--lib", "--no-default-features", "--features", features.join(",")], opts);
  vendoredPatchUsed();
  const wasmFile = join(root, "target", "wasm32-unknown-unknown", "release", "kosong_wasm.wasm");
  mkdirSync(outDir, { recursive: true });
  run(bindgen, ["--target", "web", "--weak-refs", ...(names ? [] : ["--remove-name-section"]), "--remove-producers-section", "--out-dir", outDir, "--out-name", outName, wasmFile], opts);
  guardGlue(join(outDir, `${outName}.js`));
  shrink(join(outDir, `${outName}_bg.wasm`), { names, opts });
}

/**
 * Cargo builds vendor/serde_core (`[patch.crates-io]`) only while serde pins its version; past it,
 * cargo warns and takes the registry's copy, and the .wasm carries core's float formatting again
 * (+10 KB gzip). The build stops there instead (Cargo.lock's entry for a patched crate names no
 * registry source). `lock`: Cargo.lock's text (the test gives its own).
 */
export function vendoredPatchUsed(lock = readFileSync(join(root, "Cargo.lock"), "utf8")) {
  const entries = lock.split(/^\[\[/m).filter((e) => e.startsWith("package]]") && /^name = "serde_core"$/m.test(e));
  if (entries.length !== 1 || /^source = /m.test(entries[0])) {
    throw new Error("kosong-wasm build: vendor/serde_core is not the serde_core built (serde moved past its version?): scripts/vendor-serde-core.mjs says how to write it again");
  }
}

/**
 * binaryen's `wasm-opt` (the npm package `binaryen`, a devDependency) over the finished .wasm, with
 * its inlining held back: LLVM has inlined at `opt-level = "z"` already, and binaryen's own
 * inlining is what made `-Oz` grow the gzip file (measured on this binary with gzip(1) -9: as built
 * 270,677; `-Oz` 282,895; `-Os` 282,314; `-O2 -fimfs 0 -ocimfs 0` 265,157). Without binaryen
 * installed the .wasm is left as wasm-bindgen wrote it, and the build says so.
 */
const WASM_OPT_FLAGS = ["-O2", "-fimfs", "0", "-ocimfs", "0"];
// What rustc's wasm32-unknown-unknown target emits today; wasm-opt refuses features it is not told of.
const WASM_FEATURES = ["--enable-bulk-memory", "--enable-nontrapping-float-to-int", "--enable-sign-ext", "--enable-mutable-globals", "--enable-reference-types", "--enable-multivalue"];
function shrink(wasmFile, { names, opts }) {
  let wasmOpt;
  try {
    wasmOpt = createRequire(import.meta.url).resolve("binaryen/bin/wasm-opt");
  } catch {
    console.error("kosong-wasm: binaryen is not installed (npm install); the .wasm is left unoptimized by wasm-opt");
    return;
  }
  // `-g` keeps the function names of a profiling build (KOSONG_WASM_NAMES=1); wasm-opt drops them otherwise.
  run(process.execPath, [wasmOpt, ...WASM_OPT_FLAGS, ...WASM_FEATURES, ...(names ? ["-g"] : []), wasmFile, "-o", wasmFile], opts);
}

/**
 * A trap inside a background task (a future woken by a timer, a body read, a tool's result) runs
 * in a closure wasm-bindgen calls from a JS callback: its `RuntimeError` would be uncaught (Node
 * dies) and the calls waiting on the instance would hang. The glue's closure invokers are wrapped
 * so that a trap there is handed to the JS layer (`__kosongOnTrap`: the instance is marked broken,
 * every pending call rejected at once) instead of thrown into the void. The wrapper takes its
 * arguments by name (a rest parameter allocated an array on every wake of a future).
 *
 * The futures' task queue schedules its run with `queueMicrotask`. Node's is written in
 * JavaScript and makes an `AsyncResource` per call (its async hooks' bookkeeping, then a destroy
 * event when it ran): that is once per body batch and per tool result. A reaction on a resolved
 * promise is the same microtask queue in the same order, native everywhere; the glue's import
 * schedules with that instead (a tool step on Node: 5–20% of its time, bench/ab.json).
 */
function guardGlue(file) {
  let glue = readFileSync(file, "utf8");
  const hook = "    wasm = instance.exports;";
  if (!glue.includes(hook)) throw new Error(`kosong-wasm build: the wasm-bindgen glue changed shape (no \`${hook.trim()}\`)`);
  const microtask = /(__wbg_queueMicrotask_[0-9a-f]+: function\(arg0\) \{\s*)queueMicrotask\(arg0\);/;
  if (!microtask.test(glue)) throw new Error("kosong-wasm build: the wasm-bindgen glue changed shape (no queueMicrotask import)");
  glue = glue.replace(microtask, "$1kosongResolved.then(arg0);");
  const guard = `
let kosongOnTrap = null;
const kosongResolved = Promise.resolve();
/** kosong-wasm: called with the RuntimeError when the instance traps inside a background task. */
export function __kosongOnTrap(f) { kosongOnTrap = f; }
function kosongGuard(exports) {
    const out = Object.create(null);
    for (const [name, f] of Object.entries(exports)) {
        const closure = typeof f === "function" && name.startsWith("wasm_bindgen__convert__closures");
        if (closure && f.length > 5) throw new Error(\`kosong-wasm: \${name} takes \${f.length} arguments (the guard passes 5)\`);
        out[name] = closure
            ? function (a, b, c, d, e) {
                try { return f(a, b, c, d, e); } catch (err) {
                    if (!(err instanceof WebAssembly.RuntimeError) || !kosongOnTrap) throw err;
                    kosongOnTrap(err);
                    return [0, 0];
                }
            }
            : f;
    }
    return out;
}
`;
  writeFileSync(file, glue.replace(hook, "    wasm = kosongGuard(instance.exports);") + guard);
}

/**
 * One file loads faster than twenty: the `node` and `browser` entries are each bundled into one
 * module with esbuild (a devDependency; without it the entries stay as they are). Node: about 3 ms
 * of a cold start. A browser that imports `pkg/browser.js` as it is (an import map, a CDN that
 * serves the files as published) walks the module graph one request after another: in Chromium,
 * page load to the first text delta went from 235 to 118 ms (bench's `browser-first-token`; the
 * AI SDK's bundled page: 167–171 ms).
 * Each still reads `./wasm/kosong_wasm_bg.wasm` next to itself; the browser's default URL is
 * written as `new URL("./wasm/…", import.meta.url)`, the form bundlers (Vite, webpack, esbuild's
 * users) take as an asset. Not minified: Node prints the source line an error was thrown from, and
 * one minified line was the whole 46 KB file (measured: the readable bundle's cold import is within
 * the noise of the minified one, ~28 ms here); an app's own bundler minifies the browser's.
 */
function bundleEntries(pkg) {
  let esbuild;
  try {
    esbuild = createRequire(import.meta.url)("esbuild");
  } catch {
    console.error("kosong-wasm: esbuild is not installed; pkg/node.js and pkg/browser.js are left unbundled");
    return;
  }
  for (const platform of ["node", "browser"]) {
    const file = join(pkg, `${platform}.js`);
    const { outputFiles } = esbuild.buildSync({ entryPoints: [file], bundle: true, format: "esm", platform, write: false, logLevel: "error", legalComments: "none" });
    let text = outputFiles[0].text;
    if (platform === "browser") {
      const wasmUrl = 'new URL("kosong_wasm_bg.wasm", import.meta.url)';
      if (text.split(wasmUrl).length !== 2) throw new Error(`kosong-wasm build: the browser bundle does not name its .wasm once as ${wasmUrl}`);
      text = text.replace(wasmUrl, 'new URL("./wasm/kosong_wasm_bg.wasm", import.meta.url)');
    }
    writeFileSync(file, text);
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  (await import("./setup.mjs")).ensureNpmPackages({ devtools: false });
  build();
}
