#!/usr/bin/env node
// `npm run dev:mock`: the Worker on `wrangler dev` against the demo's mock model (which calls the Worker's own tools — clock, add, and send_email with its approval — when the request offers them), with nothing to
// configure. Starts the mock (an OpenAI-compatible endpoint streaming a scripted tool-calling
// conversation) on a free loopback port, writes `.dev.vars` with a fresh SESSION_SECRET when there
// is none, and runs `wrangler dev` with LLM_BASE_URL pointed at the mock.
import { spawn } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { createDemoServer } from "../../../scripts/demo.mjs";

const here = join(dirname(fileURLToPath(import.meta.url)), "..");
const vars = join(here, ".dev.vars");
if (!existsSync(vars)) {
  writeFileSync(vars, `SESSION_SECRET=${randomBytes(36).toString("base64url")}\n`);
  console.log("wrote .dev.vars with a new SESSION_SECRET (git ignores it)");
}
const mock = createDemoServer();
await new Promise((r) => mock.listen(0, "127.0.0.1", r));
const base = `http://127.0.0.1:${mock.address().port}/mock/v1`;
console.log(`mock model at ${base}`);
const wrangler = spawn("npx", ["wrangler", "dev", "--var", `LLM_BASE_URL:${base}`, "--var", "LLM_KIND:openai", "--var", "LLM_MODEL:mock", ...process.argv.slice(2)], {
  cwd: here,
  stdio: "inherit",
});
const stop = () => {
  wrangler.kill("SIGINT");
  mock.close();
};
process.on("SIGINT", stop);
process.on("SIGTERM", stop);
wrangler.on("exit", (code) => {
  mock.close();
  process.exit(code ?? 0);
});
