#!/usr/bin/env node
// `npm run fuzz [-- --seconds N]`: runs every cargo-fuzz target for N seconds (default 60)
// and prints how many inputs each tried. `npm test` runs it as a short smoke (--seconds 5).
// Installs cargo-fuzz into .tools/ when missing. libFuzzer's -Z flags need nightly; on a
// stable toolchain RUSTC_BOOTSTRAP=1 unlocks them.
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const argSeconds = process.argv.indexOf("--seconds");
const seconds = argSeconds > 0 ? Number(process.argv[argSeconds + 1]) : 60;
if (!(seconds > 0)) throw new Error("--seconds must be a positive number");

function cargoFuzz() {
  const local = join(root, ".tools", "bin", "cargo-fuzz");
  if (existsSync(local)) return local;
  if (spawnSync("cargo", ["fuzz", "--version"], { encoding: "utf8" }).status === 0) return null; // on PATH
  console.error("$ cargo install cargo-fuzz --root .tools");
  execFileSync("cargo", ["install", "cargo-fuzz", "--root", join(root, ".tools")], { stdio: "inherit" });
  return local;
}

export function fuzz(secs = seconds) {
  const bin = cargoFuzz();
  const cmd = bin ? [bin, ["fuzz"]] : ["cargo", ["fuzz"]];
  const env = { ...process.env, RUSTC_BOOTSTRAP: "1" };
  const targets = readdirSync(join(root, "fuzz", "fuzz_targets")).filter((f) => f.endsWith(".rs")).map((f) => f.slice(0, -3)).sort();
  const totals = {};
  for (const t of targets) {
    console.error(`$ cargo fuzz run -O ${t} -- -max_total_time=${secs}`);
    const r = spawnSync(cmd[0], [...cmd[1], "run", "-O", t, "--", `-max_total_time=${secs}`, "-max_len=4096"], { cwd: root, env, encoding: "utf8" });
    const out = `${r.stdout}\n${r.stderr}`;
    const done = out.match(/Done (\d+) runs/);
    if (r.status !== 0 || !done) {
      console.error(out.split("\n").slice(-40).join("\n"));
      throw new Error(`fuzz target ${t} failed (see fuzz/artifacts/${t}/)`);
    }
    totals[t] = Number(done[1]);
    console.error(`fuzz ${t}: ${totals[t]} inputs in ${secs} s, no failure`);
  }
  return totals;
}

if (import.meta.url === `file://${process.argv[1]}`) fuzz();
