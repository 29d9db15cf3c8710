import * as kosong from "kosong-wasm";
import { textFixture, followUp, fixtureServer } from "/work/main/bench/lib.mjs";
const format = process.argv[2] ?? "openai";
const fixture = textFixture(format);
const server = await fixtureServer(fixture, followUp(format));
const user = [{ role: "user", content: "go" }];
const ts = [];
for (let r = 0; r < 40; r++) {
  server.reset();
  const p = new kosong.OpenAIChatProvider({ model: "m", apiKey: "k", baseUrl: server.baseUrl });
  const t = performance.now();
  await kosong.generate(p, "", [], user);
  ts.push(performance.now() - t);
}
console.log(format, ts.sort((a, b) => a - b)[20].toFixed(1), "ms median");
await server.close();
