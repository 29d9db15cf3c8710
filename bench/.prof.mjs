import * as kosong from "kosong-wasm";
import { textFixture, fixtureFetch } from "./lib.mjs";
const fixture = textFixture("openai");
const user = [{ role: "user", content: "hi" }];
for (let i = 0; i < 15; i++) {
  const { fetch } = fixtureFetch(fixture, []);
  const p = new kosong.OpenAIChatProvider({ model: "m", apiKey: "k", baseUrl: "http://bench.invalid/v1", fetch });
  const t = performance.now();
  await kosong.generate(p, "", [], user);
  if (i > 4) console.log((performance.now() - t).toFixed(1));
}
