// The same context.jsonl read by kimi-cli 1.52's own `Context.restore` and by `Context.fromJSONL`.
// Runs when KIMI_PYTHON names a Python with kimi-cli==1.52.0 installed (see DEVELOPERS notes:
// `python3.13 -m venv v && v/bin/pip install kosong==0.56.0 kimi-cli==1.52.0 anthropic==0.78.0`);
// skipped otherwise, so `npm test` needs no Python.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as k from "kosong-wasm";

const python = process.env.KIMI_PYTHON;

const READ = `
import asyncio, json, sys
from pathlib import Path
from kimi_cli.soul.context import Context
async def main():
    c = Context(Path(sys.argv[1]))
    await c.restore()
    print(json.dumps({"history": [m.model_dump(mode="json", exclude_none=True) for m in c.history], "tokens": c.token_count}))
asyncio.run(main())
`;

test("a session file with damaged lines reads the same here and in kimi-cli", { skip: python ? false : "KIMI_PYTHON is not set" }, () => {
  const dir = mkdtempSync(join(tmpdir(), "kimi-ctx-"));
  const lines = [
    '{"role":"_system_prompt","content":"be kind"}',
    '{"role":"user","content":"a"}',
    "{bad",
    "[1]",
    '{"role":"_mystery","content":"z"}',
    '{"role":"_usage","token_count":7.5}',
    '{"role":"_usage","token_count":12}',
    '{"role":"wizard","content":"x"}',
    '{"role":"_checkpoint","id":"one"}',
    '{"role":"assistant","content":"y"}',
  ];
  const file = join(dir, "context.jsonl");
  writeFileSync(file, lines.join("\n") + "\n");
  const theirs = JSON.parse(execFileSync(python, ["-c", READ, file], { encoding: "utf8" }));
  const ours = k.Context.fromJSONL(lines.join("\n"), { logger: { warn() {} } });
  assert.deepEqual(ours.history.map((m) => [m.role, m.content]), theirs.history.map((m) => [m.role, typeof m.content === "string" ? m.content : m.content.map((p) => p.text).join("")]));
  assert.equal(ours.systemPrompt, "be kind");
});
