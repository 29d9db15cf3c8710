import { createServer } from "node:http";
import { spawnSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
const server = createServer(async (req, res) => {
  let body = ""; for await (const c of req) body += c;
  const messages = JSON.parse(body).messages;
  const answered = messages.at(-1)?.role === "tool";
  const chunk = (delta, finish = null) => `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", model: "m", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
  res.writeHead(200, { "content-type": "text/event-stream" });
  if (answered) { res.write(chunk({ role: "assistant", content: "Sent." })); res.write(chunk({}, "stop")); }
  else { res.write(chunk({ role: "assistant", content: "Sending." })); await new Promise((r) => setTimeout(r, 5));
    res.write(chunk({ tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "send_email", arguments: '{"to":"a@b.c"}' } }] })); res.write(chunk({}, "tool_calls")); }
  res.end("data: [DONE]\n\n");
});
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const base = `http://127.0.0.1:${server.address().port}/v1`;
const dir = mkdtempSync(join(tmpdir(), "dbg-"));
const env = { ...process.env, SESSION_APPROVE: "1" };
const life = (at, when) => new Promise((res) => { const c = spawn(process.execPath, ["tests/js/session-child.mjs", dir, base, String(at), when], { env }); let o = ""; c.stdout.on("data", (d) => (o += d)); c.stderr.on("data", (d) => (o += d)); c.on("exit", (code, sig) => res({ o, code, sig })); });
const [at, when] = process.argv.slice(2);
console.log(await life(Number(at), when));
console.log("--- wire after life 1\n" + readFileSync(join(dir, "wire.jsonl"), "utf8"));
console.log(await life(-1, "none"));
console.log("--- wire\n" + readFileSync(join(dir, "wire.jsonl"), "utf8"));
console.log("--- sent", existsSync(join(dir, "sent.log")) ? readFileSync(join(dir, "sent.log"), "utf8") : "(none)");
server.close();
