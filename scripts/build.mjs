#!/usr/bin/env node
// `npm run build`: compiles the crate to wasm32 (release, size-tuned), runs wasm-bindgen
// --target web and writes the package's files under pkg/. Installs the wasm32 target and
// the pinned wasm-bindgen-cli when they are missing. Skips the work when pkg/ is newer than
// every source file (pass --force to rebuild anyway).
import { execFileSync, spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readdirSync, rmSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const WASM_BINDGEN_VERSION = "0.2.130";
const pkg = join(root, "pkg");
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

function upToDate() {
  const stamp = join(pkg, "wasm", "kosong_wasm_bg.wasm");
  if (!existsSync(stamp) || !existsSync(join(pkg, "node.js"))) return false;
  const built = statSync(stamp).mtimeMs;
  const sources = ["src", "Cargo.toml", "Cargo.lock", "scripts/build.mjs"].map((p) => join(root, p)).filter(existsSync);
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

export function build() {
  if (!force && upToDate()) {
    console.error("kosong-wasm: pkg/ is up to date");
    return;
  }
  const bindgen = ensureToolchain();
  run("cargo", ["build", "--release", "--target", "wasm32-unknown-unknown", "--lib"]);
  const wasmFile = join(root, "target", "wasm32-unknown-unknown", "release", "kosong_wasm.wasm");
  rmSync(pkg, { recursive: true, force: true });
  mkdirSync(join(pkg, "wasm"), { recursive: true });
  run(bindgen, ["--target", "web", "--weak-refs", "--remove-name-section", "--remove-producers-section", "--out-dir", join(pkg, "wasm"), "--out-name", "kosong_wasm", wasmFile]);
  for (const [from, to] of [
    ["api.js", "api.js"],
    ["soul.js", "soul.js"],
    ["chaos.js", "chaos.js"],
    ["util.js", "util.js"],
    ["entry-node.js", "node.js"],
    ["entry-workerd.js", "workerd.js"],
    ["entry-browser.js", "browser.js"],
  ]) {
    copyFileSync(join(root, "src", "js", from), join(pkg, to));
  }
  bundleNodeEntry();
  const size = statSync(join(pkg, "wasm", "kosong_wasm_bg.wasm")).size;
  console.error(`kosong-wasm: built pkg/ (${(size / 1024).toFixed(1)} KiB of wasm)`);
}

/**
 * Node loads one file faster than five (about 3 ms of a cold start): the `node` entry is
 * bundled into one module with esbuild (a devDependency; without it the entry stays as is).
 * It still reads `./wasm/kosong_wasm_bg.wasm` next to itself.
 */
function bundleNodeEntry() {
  let esbuild;
  try {
    esbuild = createRequire(import.meta.url)("esbuild");
  } catch {
    console.error("kosong-wasm: esbuild is not installed; pkg/node.js is left unbundled");
    return;
  }
  esbuild.buildSync({ entryPoints: [join(pkg, "node.js")], bundle: true, format: "esm", platform: "node", outfile: join(pkg, "node.js"), allowOverwrite: true, logLevel: "error", legalComments: "none", minifyWhitespace: true, minifySyntax: true });
}

if (import.meta.url === `file://${process.argv[1]}`) {
  (await import("./setup.mjs")).ensureNpmPackages();
  build();
}
