#!/usr/bin/env node
// `npm run sim [-- <seeds> [<from>]]`: the session's deterministic simulation, long (10⁶ seeds by
// default, optimized build, four parts at once). A failing seed prints the command that replays it.
// `npm test` runs 10,000 seeds (`cargo test`) and the planted bugs.
import { execFileSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const [seeds = "1000000", from = "0"] = process.argv.slice(2);
if (!/^\d+$/.test(seeds) || !/^\d+$/.test(from)) {
  console.error("usage: npm run sim -- [seeds] [from]");
  process.exit(2);
}
const started = Date.now();
execFileSync("cargo", ["test", "--release", "--test", "session_sim", "seeds_", "--", "--nocapture"], {
  cwd: root,
  stdio: "inherit",
  env: { ...process.env, SIM_SEEDS: seeds, SIM_FROM: from },
});
console.error(`session simulation: ${seeds} seeds from ${from} passed in ${((Date.now() - started) / 1000).toFixed(0)} s`);
