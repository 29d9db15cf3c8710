// The README's examples run as written.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";

test("examples/agent-turn.mjs runs a two-step turn with a tool and prints the wire", () => {
  const script = fileURLToPath(new URL("../../examples/agent-turn.mjs", import.meta.url));
  const out = execFileSync(process.execPath, [script], { encoding: "utf8" }).trim().split("\n");
  assert.deepEqual(out.map((l) => l.split(" ")[0]), [
    "TurnBegin", "StepBegin", "ContentPart", "ToolCall", "ToolResult", "StatusUpdate", "StepBegin", "ContentPart", "StatusUpdate", "TurnEnd",
  ]);
  assert.match(out[4], /"output":"42"/);
  assert.match(out[7], /2 \+ 40 = 42\./);
});

test("examples/mcp-tools.mjs lists an MCP server's tools and calls one in an agent turn", () => {
  const script = fileURLToPath(new URL("../../examples/mcp-tools.mjs", import.meta.url));
  const out = execFileSync(process.execPath, [script], { encoding: "utf8" }).trim().split("\n");
  assert.deepEqual(out, ["tools: weather_forecast", "result: Paris: sunny, 24°C", "answer: Tomorrow in Paris: sunny, 24°C."]);
});

test("examples/structured-output.mjs prints a partial object filling in, then the parsed output", () => {
  const script = fileURLToPath(new URL("../../examples/structured-output.mjs", import.meta.url));
  const out = execFileSync(process.execPath, [script], { encoding: "utf8" }).trim().split("\n");
  const partials = out.filter((l) => l.startsWith("partial: ")).map((l) => JSON.parse(l.slice(9)));
  assert.ok(partials.length >= 4, out.join("\n"));
  assert.deepEqual(partials[0], { city: "Pa" });
  const final = { city: "Paris", days: [{ day: "Mon", high: 21 }, { day: "Tue", high: 18 }], summary: "Mild, then cooler." };
  assert.deepEqual(partials.at(-1), final);
  assert.deepEqual(JSON.parse(out.at(-1).replace(/^output: /, "")), final);
});

test("examples/worker's lock file is what npm install writes: its entry for this package mirrors package.json", async () => {
  const { readFileSync } = await import("node:fs");
  const root = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8"));
  const lock = JSON.parse(readFileSync(new URL("../../examples/worker/package-lock.json", import.meta.url), "utf8"));
  const entry = lock.packages["../.."];
  // npm copies these fields of a linked package into the lock; when package.json moves on (a
  // devDependency added), \`npm install\` in the example rewrites the committed lock file.
  for (const field of ["name", "version", "license", "dependencies", "devDependencies", "engines"]) {
    assert.deepEqual(entry[field], root[field], `examples/worker/package-lock.json's "../.." ${field}: run npm install in examples/worker and commit the lock`);
  }
});

test("docs/api.md's table names every export of the package, and nothing that is not one", async () => {
  const { readFileSync } = await import("node:fs");
  const k = await import("kosong-wasm");
  const doc = readFileSync(new URL("../../docs/api.md", import.meta.url), "utf8");
  const table = doc.slice(doc.indexOf("## Every export"), doc.indexOf("## Loading"));
  const listed = [...table.matchAll(/^\| `([A-Za-z_]+)` \|/gm)].map((m) => m[1]);
  assert.deepEqual([...listed].sort(), Object.keys(k).sort());
});
