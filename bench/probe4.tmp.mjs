import * as kosong from "kosong-wasm";
import { bigArgFixture, followUp, fixtureFetch } from "/work/main/bench/lib.mjs";
const fixture = bigArgFixture(1 << 20);
const on = process.argv[2] === "on";
const ts = [];
for (let r = 0; r < 8; r++) {
  const { fetch } = fixtureFetch(fixture, followUp("openai"));
  const provider = new kosong.OpenAIChatProvider({ model: "m", apiKey: "k", baseUrl: "http://bench.invalid/v1", fetch });
  const tools = new kosong.SimpleToolset([{ name: "write_file", description: "", parameters: { type: "object" }, handler: (a) => "ok" }]);
  let preview = null;
  const onMessagePart = on ? (p) => { if (p.type === "function") preview = new kosong.PartialJson(); else if (p.type === "tool_call_part" && p.arguments_part) preview.feed(p.arguments_part); } : undefined;
  const t = performance.now();
  const s = await kosong.step(provider, "", tools, [{ role: "user", content: "go" }], { onMessagePart });
  await s.toolResults();
  ts.push(performance.now() - t);
}
console.log(on ? "on" : "off", ts.sort((a, b) => a - b)[4].toFixed(1));
