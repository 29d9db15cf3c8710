import * as kosong from "kosong-wasm";
import { toolsFixture, followUp, fixtureFetch } from "/work/main/bench/lib.mjs";
const format = process.argv[2] ?? "openai";
const fixture = toolsFixture(format, {});
const schema = { type: "object", properties: { items: { type: "array" } } };
const user = [{ role: "user", content: "go" }];
const all = { sinceClose: [], sinceBatch: [] };
for (let r = 0; r < 30; r++) {
  const { fetch, state } = fixtureFetch(fixture, followUp(format));
  const started = new Map();
  const provider = format === "openai"
    ? new kosong.OpenAIChatProvider({ model: "gpt-4.1-mini", apiKey: "k", baseUrl: "http://x.invalid/v1", fetch })
    : new kosong.AnthropicProvider({ model: "claude-sonnet-4-6", apiKey: "k", baseUrl: "http://x.invalid/v1", fetch });
  const tools = new kosong.SimpleToolset(fixture.calls.map((c) => ({ name: c.name, description: "", parameters: schema, handler: (args, ctx) => { started.set(ctx.toolCallId, [performance.now(), globalThis.__batchAt]); return "ok"; } })));
  const s = await kosong.step(provider, "", tools, user);
  await s.toolResults();
  if (r < 5) continue;
  for (const c of fixture.calls) { const [t, b] = started.get(c.id); all.sinceClose.push(t - state.handed[c.closeEvent]); all.sinceBatch.push(t - b); }
}
const med = (a) => a.sort((x, y) => x - y)[a.length >> 1];
console.log(format, "since close", med(all.sinceClose).toFixed(3), "since batch landed", med(all.sinceBatch).toFixed(3));
