#!/usr/bin/env node
// `npm run stress`: 64 answers of 60 MB streaming at once over loopback HTTP — each under the
// 64 MiB per-message limit, together past a wasm32 instance's 4 GiB. With the instance's memory
// budget (default 1 GiB) each ends whole or with a clear `limit` error; nothing is uncaught, the
// budget is given back and the instance works afterwards. Too heavy for `npm test` (about 4 GB
// through loopback); run it on its own.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import * as k from "kosong-wasm";

// BUDGET_BYTES=4294967295 shows what happens without a budget (the instance runs out of memory).
if (process.env.BUDGET_BYTES) k.setMemoryBudget(Number(process.env.BUDGET_BYTES));
const N = Number(process.env.ANSWERS ?? 64);
const MB = Number(process.env.ANSWER_MB ?? 60);
const uncaught = [];
process.on("uncaughtException", (e) => uncaught.push(e));
process.on("unhandledRejection", (e) => uncaught.push(e));

const piece = "z".repeat(64 << 10);
const event = `data: ${JSON.stringify({ id: "s", choices: [{ index: 0, delta: { content: piece } }] })}\n\n`;
const pieces = Math.floor((MB << 20) / piece.length);
// Every answer holds its end until all of them streamed their text (or were stopped), so all 64
// are at their full size at once: 3.75 GB of answers in one instance.
let settled = 0;
const allThere = [];
const arrive = () => {
  if (++settled === N) for (const r of allThere) r();
};
const server = createServer(async (req, res) => {
  for await (const _ of req);
  res.writeHead(200, { "content-type": "text/event-stream" });
  let counted = false;
  const count = () => counted || ((counted = true), arrive());
  res.on("close", count);
  for (let i = 0; i < pieces; i++) {
    if (res.destroyed) return;
    if (!res.write(event)) await new Promise((r) => res.once("drain", r));
  }
  const everyone = new Promise((r) => allThere.push(r));
  count();
  await everyone;
  if (res.destroyed) return;
  res.end(`data: ${JSON.stringify({ id: "s", choices: [{ index: 0, delta: {}, finish_reason: "stop" }] })}\n\ndata: [DONE]\n\n`);
});
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const provider = new k.OpenAIChatProvider({ model: "m", apiKey: "sk-stress", baseUrl: `http://127.0.0.1:${server.address().port}/v1` });

const t0 = performance.now();
const outcomes = await Promise.all(
  Array.from({ length: N }, () =>
    k.generate(provider, "", [], [{ role: "user", content: "a long answer" }]).then(
      (r) => (r.message.content.length === pieces * piece.length ? "whole" : `short ${r.message.content.length}`),
      (e) => (e instanceof k.ChatProviderError && e.kind === "limit" ? "limit" : `error ${e?.name}: ${e?.message}`),
    ),
  ),
);
const tally = outcomes.reduce((t, o) => ((t[o] = (t[o] ?? 0) + 1), t), {});
console.log(`${N} answers of ${MB} MB in ${((performance.now() - t0) / 1000).toFixed(1)} s: ${JSON.stringify(tally)}; wasm memory ${(k.memoryBytes() / 2 ** 20).toFixed(0)} MiB`);
try {
  assert.deepEqual(Object.keys(tally).filter((o) => o !== "whole" && o !== "limit"), [], "only whole answers or limit errors");
  assert.equal(uncaught.length, 0, String(uncaught[0]));
  assert.equal(k.memoryBudget().usedBytes, 0, "the budget was given back");
  const after = await k.generate(new k.ScriptedProvider(["text: still here"]), "", [], []);
  assert.equal(after.message.content, "still here", "the instance works afterwards");
  console.log("ok");
} catch (e) {
  console.error(e.message);
  process.exitCode = 1;
}
server.closeAllConnections();
server.close();
