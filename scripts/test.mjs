#!/usr/bin/env node
// `npm test`: installs what is missing (npm packages, the wasm32 target, the pinned
// wasm-bindgen-cli, Node's LTS binary), builds the .wasm once, then runs the native core tests
// and the JavaScript tests against that one build: on the machine's Node, then on Node 24.
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "./build.mjs";
import { fuzz } from "./fuzz.mjs";
import { ensureNpmPackages, ensureChromium, ensureNodeLts, NODE_LTS } from "./setup.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const run = (cmd, args) => {
  console.error(`$ ${cmd} ${args.join(" ")}`);
  execFileSync(cmd, args, { stdio: "inherit", cwd: root });
};

ensureNpmPackages();
ensureChromium();
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
