#!/usr/bin/env node
// `npm test`: installs what is missing (npm packages, the wasm32 target, the pinned
// wasm-bindgen-cli, Chromium, Node 20 and 24 when the machine's Node is another), runs the gates,
// builds the .wasm once, then runs the native core tests and the JavaScript tests against that
// one build, on Node 20 and on Node 24.
import { execFileSync, spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "./build.mjs";
import { fuzz } from "./fuzz.mjs";
import { ensureNpmPackages, ensureChromium, ensureNode, TESTED_NODES } from "./setup.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

/** rustfmt and clippy, added through rustup when the toolchain lacks them; the wasm32 target too. */
function ensureRustComponents() {
  const has = (cmd) => spawnSync("cargo", [cmd, "--version"], { stdio: "ignore" }).status === 0;
  const missing = ["rustfmt", "clippy"].filter((c) => !has(c === "rustfmt" ? "fmt" : "clippy"));
  if (missing.length) execFileSync("rustup", ["component", "add", ...missing], { stdio: "inherit" });
  const targets = spawnSync("rustup", ["target", "list", "--installed"], { encoding: "utf8" }).stdout ?? "";
  if (!targets.split("\n").includes("wasm32-unknown-unknown")) execFileSync("rustup", ["target", "add", "wasm32-unknown-unknown"], { stdio: "inherit" });
}
const run = (cmd, args) => {
  console.error(`$ ${cmd} ${args.join(" ")}`);
  execFileSync(cmd, args, { stdio: "inherit", cwd: root });
};

ensureNpmPackages();
ensureChromium();
// Both Nodes first: a run that cannot have one fails now, not after the builds.
const nodes = TESTED_NODES.map((version) => [version, ensureNode(version)]);
// The gates first: the code as rustfmt.toml formats it, and no clippy warning (native, tests
// included, and the wasm32 build the package ships). The components come with rustup.
ensureRustComponents();
run("cargo", ["fmt", "--check"]);
run("cargo", ["clippy", "--quiet", "--all-targets", "--", "-D", "warnings"]);
run("cargo", ["clippy", "--quiet", "--lib", "--target", "wasm32-unknown-unknown", "--", "-D", "warnings"]);
// index.d.ts and cloudflare.d.ts under \`tsc --strict\`, through the typed example that uses every export.
run(process.execPath, [join(root, "node_modules", "typescript", "bin", "tsc"), "-p", join("examples", "typescript")]);
// Every JavaScript and TypeScript snippet in README.md and docs/ under `tsc --strict --checkJs`.
run(process.execPath, [join(root, "scripts", "snippets.mjs")]);
// Each single-provider feature set type-checks and lints clean for wasm32 (a left-out format must
// leave no dead code or broken cfg behind), and one is built for its test (single-provider.test.mjs).
for (const only of ["openai", "anthropic", "responses", "gemini"]) {
  run("cargo", ["clippy", "--quiet", "--lib", "--target", "wasm32-unknown-unknown", "--no-default-features", "--features", only, "--", "-D", "warnings"]);
}
build();
build({ testHooks: true });
build({ only: "anthropic" });
run("cargo", ["test", "--quiet"]);
// The session's simulation with bugs planted on purpose: each must be caught (its seed printed).
run("cargo", ["test", "--quiet", "--features", "planted-bugs", "--test", "session_sim", "planted", "--", "--nocapture"]);
await fuzz(5); // a smoke: each fuzz target for 5 s (`npm run fuzz` runs them longer)
const jsTests = readdirSync(join(root, "tests", "js")).filter((f) => f.endsWith(".test.mjs")).map((f) => join("tests", "js", f));
// The same suites on each Node the package is tested on (fetched when the machine's is another).
for (const [version, node] of nodes) {
  console.error(`npm test: the JavaScript suites on Node ${version}`);
  run(node, ["--test", "--test-reporter=spec", ...jsTests]);
}
