#!/usr/bin/env node
// `npm test`: installs what is missing (npm packages, the wasm32 target, the pinned
// wasm-bindgen-cli, Node's LTS binary), builds the .wasm once, then runs the native core tests
// and the JavaScript tests against that one build: on the machine's Node, then on Node 24.
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "./build.mjs";
import { fuzz } from "./fuzz.mjs";
import { ensureNpmPackages, ensureChromium, ensureNodeLts, NODE_LTS } from "./setup.mjs";

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
// The gates first: the code as rustfmt.toml formats it, and no clippy warning (native, tests
// included, and the wasm32 build the package ships). The components come with rustup.
ensureRustComponents();
run("cargo", ["fmt", "--check"]);
run("cargo", ["clippy", "--quiet", "--all-targets", "--", "-D", "warnings"]);
run("cargo", ["clippy", "--quiet", "--lib", "--target", "wasm32-unknown-unknown", "--", "-D", "warnings"]);
build();
build({ testHooks: true });
run("cargo", ["test", "--quiet"]);
await fuzz(5); // a smoke: each fuzz target for 5 s (`npm run fuzz` runs them longer)
const jsTests = readdirSync(join(root, "tests", "js")).filter((f) => f.endsWith(".test.mjs")).map((f) => join("tests", "js", f));
run(process.execPath, ["--test", "--test-reporter=spec", ...jsTests]);
// The same suites on the Node LTS (the machine's own Node may be an older one the package still supports).
const lts = ensureNodeLts();
if (lts === null && process.platform === "linux" && process.arch === "x64") throw new Error(`npm test: Node ${NODE_LTS} could not be installed (see above)`);
if (lts === null) console.error(`npm test: Node ${NODE_LTS} is not run here (the registry's binary is for Linux x64)`);
else if (process.version !== `v${NODE_LTS}`) run(lts, ["--test", "--test-reporter=spec", ...jsTests]);
