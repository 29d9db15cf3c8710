#!/usr/bin/env node
// `npm run fuzz [-- --seconds N] [--runs M]`: runs every cargo-fuzz target for N seconds
// (default 60), or until it has tried M inputs, and prints how many inputs each tried. `npm test` runs it as a short smoke (--seconds 5).
// Installs cargo-fuzz into .tools/ when missing. libFuzzer's -Z flags need nightly; on a
// stable toolchain RUSTC_BOOTSTRAP=1 unlocks them.
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const argSeconds = process.argv.indexOf("--seconds");
const seconds = argSeconds > 0 ? Number(process.argv[argSeconds + 1]) : 60;
if (!(seconds > 0)) throw new Error("--seconds must be a positive number");
// `--runs N`: each target runs until it has tried N inputs (at most --seconds, then it fails).
const argRuns = process.argv.indexOf("--runs");
const runs = argRuns > 0 ? Number(process.argv[argRuns + 1]) : undefined;
if (runs !== undefined && !(runs > 0)) throw new Error("--runs must be a positive number");

function cargoFuzz() {
  const local = join(root, ".tools", "bin", "cargo-fuzz");
  if (existsSync(local)) return local;
  if (spawnSync("cargo", ["fuzz", "--version"], { encoding: "utf8" }).status === 0) return null; // on PATH
  console.error("$ cargo install cargo-fuzz --root .tools");
  execFileSync("cargo", ["install", "cargo-fuzz", "--root", join(root, ".tools")], { stdio: "inherit" });
  return local;
}

/** Per target: long inputs and a per-input time limit where slowness is what to find. */
const TARGET_FLAGS = {
  // Argument previews must stay linear for any shape: long inputs, and a slow input fails.
  partial_json: ["-max_len=262144", "-timeout=10"],
};
const DEFAULT_FLAGS = ["-max_len=4096", "-timeout=10"];

/**
 * Runs one target, streaming libFuzzer's output (it prints for as long as it runs: collecting
 * it whole overflowed spawnSync's buffer on long runs) and keeping only the tail.
 */
function runTarget(cmd, args, env) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: root, env, stdio: ["ignore", "pipe", "pipe"] });
    const tail = [];
    let partial = "";
    const take = (chunk) => {
      const lines = (partial + chunk).split("\n");
      partial = lines.pop();
      tail.push(...lines);
      if (tail.length > 200) tail.splice(0, tail.length - 200);
    };
    child.stdout.setEncoding("utf8").on("data", take);
    child.stderr.setEncoding("utf8").on("data", take);
    child.on("error", reject);
    child.on("close", (status) => resolve({ status, tail: [...tail, partial] }));
  });
}

/**
 * Seeds `fuzz/corpus/<target>/` (git-ignored) from the real recorded provider streams beside the
 * checkout (`../shared/recorded-streams`, or `KOSONG_RECORDED_STREAMS`), when they are there:
 * `fast_delta` gets each stream's events' data, NUL-separated (the target reads them as events in
 * turn, so the learned shapes see real streams' event sequences), `sse` the raw bytes, each cut
 * into inputs of at most 4 KB at event boundaries. Nothing is copied into the repository.
 */
function seedFromRecordedStreams() {
  const dir = process.env.KOSONG_RECORDED_STREAMS ?? join(root, "..", "shared", "recorded-streams");
  const manifest = join(dir, "manifest.json");
  if (!existsSync(manifest)) {
    console.error(`fuzz: no recorded streams at ${dir}: the targets start from their own corpus only`);
    return 0;
  }
  const MAX = 4096;
  let seeds = 0;
  const write = (target, name, text) => {
    const out = join(root, "fuzz", "corpus", target);
    mkdirSync(out, { recursive: true });
    writeFileSync(join(out, `recorded-${name}`), text);
    seeds++;
  };
  /** `parts` joined by `sep` into pieces of at most MAX bytes (a longer part is one piece, cut). */
  const pack = (parts, sep) => {
    const out = [];
    let cur = "";
    for (const p of parts) {
      if (cur && Buffer.byteLength(cur) + Buffer.byteLength(p) + 1 > MAX) (out.push(cur), (cur = ""));
      cur = cur ? cur + sep + p : p;
    }
    if (cur) out.push(cur);
    return out.map((t) => Buffer.from(t).subarray(0, MAX));
  };
  for (const f of JSON.parse(readFileSync(manifest, "utf8")).fixtures ?? []) {
    for (const file of f.files) {
      const text = readFileSync(join(dir, file), "utf8");
      const events = text.split(/\r\n\r\n|\n\n|\r\r/).filter((e) => e.trim());
      const data = events.map((e) => e.split(/\r\n|\n|\r/).filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, "")).join("\n"));
      const name = file.replace(/[^A-Za-z0-9.-]+/g, "_");
      pack(data.filter(Boolean), "\0").forEach((b, i) => write("fast_delta", `${name}-${i}`, b));
      pack(events.map((e) => e + "\n\n"), "").forEach((b, i) => write("sse", `${name}-${i}`, b));
    }
  }
  console.error(`fuzz: ${seeds} seeds from the recorded streams in ${dir}`);
  return seeds;
}

export async function fuzz(secs = seconds, wantRuns = undefined) {
  seedFromRecordedStreams();
  const bin = cargoFuzz();
  const cmd = bin ? [bin, ["fuzz"]] : ["cargo", ["fuzz"]];
  const env = { ...process.env, RUSTC_BOOTSTRAP: "1" };
  const targets = readdirSync(join(root, "fuzz", "fuzz_targets")).filter((f) => f.endsWith(".rs")).map((f) => f.slice(0, -3)).sort();
  const totals = {};
  for (const t of targets) {
    const flags = [`-max_total_time=${secs}`, ...(wantRuns ? [`-runs=${wantRuns}`] : []), ...(TARGET_FLAGS[t] ?? DEFAULT_FLAGS)];
    console.error(`$ cargo fuzz run -O ${t} -- ${flags.join(" ")}`);
    const r = await runTarget(cmd[0], [...cmd[1], "run", "-O", t, "--", ...flags], env);
    const done = r.tail.join("\n").match(/Done (\d+) runs/);
    if (r.status !== 0 || !done) {
      console.error(r.tail.slice(-40).join("\n"));
      throw new Error(`fuzz target ${t} failed (see fuzz/artifacts/${t}/)`);
    }
    totals[t] = Number(done[1]);
    if (wantRuns && totals[t] < wantRuns) throw new Error(`fuzz target ${t}: only ${totals[t]} of ${wantRuns} inputs in ${secs} s`);
    console.error(`fuzz ${t}: ${totals[t]} inputs, no failure`);
  }
  return totals;
}

if (import.meta.url === `file://${process.argv[1]}`) await fuzz(seconds, runs);
