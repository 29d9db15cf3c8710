// A build for one wire format (`KOSONG_WASM_PROVIDERS=anthropic`; `npm test` builds it into
// pkg-anthropic/ beside the full package): the format it has streams from a real loopback server,
// the ones it left out fail before anything is sent with the error the README promises, and the
// .wasm is smaller than the full one.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { statSync } from "node:fs";
import { join } from "node:path";
import { startMockServer } from "./mock-openai.mjs";

const root = join(import.meta.dirname, "..", "..");
const k = await import(join(root, "pkg-anthropic", "node.js"));
const mock = await startMockServer();
after(() => mock.close());

const an = (type, body) => `event: ${type}\ndata: ${JSON.stringify({ type, ...body })}\n\n`;
const user = [{ role: "user", content: "hi" }];

test("a single-provider build streams its own format from a real server", async () => {
  mock.respond({
    steps: [
      an("message_start", { message: { id: "msg_1", type: "message", role: "assistant", model: "claude", content: [], usage: { input_tokens: 3, output_tokens: 1 } } }),
      an("content_block_start", { index: 0, content_block: { type: "text", text: "" } }),
      an("content_block_delta", { index: 0, delta: { type: "text_delta", text: "Hello " } }),
      an("content_block_delta", { index: 0, delta: { type: "text_delta", text: "there" } }),
      an("content_block_stop", { index: 0 }),
      an("message_delta", { delta: { stop_reason: "end_turn" }, usage: { output_tokens: 2 } }),
      an("message_stop", {}),
    ],
  });
  const p = new k.AnthropicProvider({ model: "claude-sonnet-4-5", apiKey: "sk-ant-test", baseUrl: mock.baseUrl });
  const r = await k.generate(p, "", [], user);
  const content = typeof r.message.content === "string" ? r.message.content : r.message.content.map((x) => x.text).join("");
  assert.equal(content, "Hello there");
  assert.equal(r.usage.output, 2);
  assert.equal(mock.requests.at(-1).url, "/v1/messages");
});

for (const [cls, format, feature] of [
  ["OpenAIChatProvider", "openai", "openai"],
  ["KimiProvider", "kimi", "openai"],
  ["OpenAIResponsesProvider", "openai_responses", "responses"],
  ["GeminiProvider", "gemini", "gemini"],
]) {
  test(`a single-provider build refuses ${cls} when it is made, naming the cargo feature`, () => {
    const before = mock.requests.length;
    assert.throws(
      () => new k[cls]({ model: "m", apiKey: "sk-test", baseUrl: mock.baseUrl }),
      (e) => e instanceof TypeError && e.message === `${cls}: this build of kosong-wasm leaves out the \`${format}\` wire format (cargo feature \`${feature}\`)`,
    );
    assert.equal(mock.requests.length, before, "no request went out");
  });
}

test("the single-provider .wasm is smaller than the full one", () => {
  const one = statSync(join(root, "pkg-anthropic", "wasm", "kosong_wasm_bg.wasm")).size;
  const all = statSync(join(root, "pkg", "wasm", "kosong_wasm_bg.wasm")).size;
  assert.ok(one < all * 0.95, `anthropic only: ${one} bytes; every provider: ${all}`);
});
