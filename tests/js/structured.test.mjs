// Structured output through the built package against a loopback server: each provider's
// streamed structured answer (tests/fixtures/structured), served event by event, comes back as
// `result.output`; the request carries the provider's native form; `onPartialOutput` sees the
// object grow, with work counted (not timed) linear in the answer's bytes; broken answers are
// `malformed_output` with their text; a refusal stays `refused`; an Agent's turn ends on its
// final answer's output, with tools in between and the preview on the wire.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import * as k from "kosong-wasm";
import { wasm } from "../../pkg/internal.js";
import { startMockServer, text, finish, done, chunk } from "./mock-openai.mjs";

let server;
before(async () => (server = await startMockServer()));
after(async () => server.close());

const fixture = (name) => readFileSync(new URL(`../fixtures/structured/${name}`, import.meta.url), "utf8");
const events = (name) => fixture(`${name}.sse`).split("\n\n").filter((e) => e.trim()).map((e) => `${e}\n\n`);
const ANSWER = JSON.parse(fixture("answer.json"));
const SCHEMA = {
  type: "object",
  properties: { city: { type: "string" }, days: { type: "array" }, note: { type: "string" } },
  required: ["city", "days", "note"],
};
const history = [{ role: "user", content: "The forecast for Paris, as JSON." }];
const textOf = (m) => (typeof m.content === "string" ? m.content : m.content.filter((p) => p.type === "text").map((p) => p.text).join(""));

const cases = [
  { name: "openai", make: (o) => new k.OpenAIChatProvider(o), model: "gpt-5.1-mini",
    native: (b) => assert.deepEqual(b.response_format, { type: "json_schema", json_schema: { name: "forecast", schema: SCHEMA, strict: true } }) },
  { name: "kimi", make: (o) => new k.KimiProvider(o), model: "kimi-k2.6",
    native: (b) => {
      assert.deepEqual(b.response_format, { type: "json_object" });
      const prompt = b.messages[0].content;
      assert.match(prompt, /^Answer with one JSON object/);
      assert.deepEqual(JSON.parse(prompt.slice(prompt.indexOf("{"))), SCHEMA, "the schema is told in the system prompt");
    } },
  { name: "anthropic", make: (o) => new k.AnthropicProvider(o), model: "claude-sonnet-4-6",
    native: (b) => assert.deepEqual(b.output_config.format, { type: "json_schema", schema: SCHEMA }) },
  { name: "responses", make: (o) => new k.OpenAIResponsesProvider(o), model: "gpt-5.1-mini",
    native: (b) => assert.deepEqual(b.text, { format: { type: "json_schema", name: "forecast", schema: SCHEMA, strict: true } }) },
  { name: "gemini", make: (o) => new k.GeminiProvider(o), model: "gemini-2.5-flash",
    native: (b) => {
      assert.equal(b.generationConfig.responseMimeType, "application/json");
      assert.deepEqual(b.generationConfig.responseJsonSchema, SCHEMA);
    } },
];

for (const c of cases) {
  test(`${c.name}: generate returns the parsed output and the preview grows to it`, async () => {
    server.respond({ steps: events(c.name) });
    const provider = c.make({ model: c.model, apiKey: "sk-test-0123456789", baseUrl: server.baseUrl });
    const partials = [];
    const result = await k.generate(provider, "", [], history, {
      output: { schema: SCHEMA, name: "forecast", strict: true },
      onPartialOutput: (v) => partials.push(structuredClone(v)),
    });
    assert.deepEqual(result.output, ANSWER);
    assert.equal(textOf(result.message), fixture("answer.json").trim());
    c.native(server.requests.at(-1).body);
    // A growing object: each preview has at least the keys of the one before, and the last is the answer.
    assert.ok(partials.length >= 10, `${partials.length} previews`);
    for (let i = 1; i < partials.length; i++) {
      for (const key of Object.keys(partials[i - 1] ?? {})) assert.ok(key in partials[i], `preview ${i} lost ${key}`);
    }
    assert.deepEqual(partials.at(-1), ANSWER);
  });
}

/** Serves `answer` as Chat Completions text deltas of `size` characters. */
function serveText(answer, size = 97) {
  const steps = [];
  for (let i = 0; i < answer.length; i += size) steps.push(text(answer.slice(i, i + size)));
  steps.push(finish(), done());
  server.respond({ steps });
  return steps.length - 2;
}

/** Counts the characters the core's preview reads, while `fn` runs. */
async function countFed(fn) {
  const proto = wasm.PartialJsonCore.prototype;
  const feed = proto.feed;
  let fed = 0;
  proto.feed = function (piece) {
    fed += piece.length;
    return feed.call(this, piece);
  };
  try {
    return { out: await fn(), fed: () => fed };
  } finally {
    proto.feed = feed;
  }
}

test("onPartialOutput: the work stays linear in the answer's bytes, for every shape", async () => {
  const provider = new k.OpenAIChatProvider({ model: "m", apiKey: "sk-test-0123456789", baseUrl: server.baseUrl });
  const shapes = {
    "many keys": (n) => JSON.stringify(Object.fromEntries(Array.from({ length: n }, (_, i) => [`key_${i}`, i * 1.5]))),
    "one long string": (n) => JSON.stringify({ text: "word \"quoted\" \\ ".repeat(n) }),
    "many objects": (n) => JSON.stringify({ items: Array.from({ length: n }, (_, i) => ({ id: i, name: `item ${i}`, tags: ["a", "b"] })) }),
    "deep nesting": (n) => "[".repeat(Math.min(n, 2000)) + "]".repeat(Math.min(n, 2000)),
  };
  for (const [shape, make] of Object.entries(shapes)) {
    const work = [];
    for (const n of [2000, 8000]) {
      const answer = make(n);
      const deltas = serveText(answer);
      let calls = 0;
      let same = true;
      let first;
      const { out, fed } = await countFed(() =>
        k.generate(provider, "", [], history, {
          output: { schema: { type: shape === "deep nesting" ? "array" : "object" } },
          onPartialOutput: (v) => {
            calls++;
            first ??= v;
            if (typeof v === "object" && v !== first) same = false;
          },
        }),
      );
      assert.equal(JSON.stringify(out.output), JSON.stringify(JSON.parse(answer)), shape);
      // Each byte is read by the core at most once, whatever the cuts; one callback at most per delta.
      assert.ok(fed() <= answer.length, `${shape}: the core read ${fed()} of ${answer.length} characters`);
      assert.ok(calls <= deltas, `${shape}: ${calls} callbacks for ${deltas} deltas`);
      // The value grows in place: the callback gets the same object (no copy per callback).
      assert.ok(same, `${shape}: a new object per callback`);
      work.push(fed() + calls);
    }
    // Four times the bytes, at most about four times the work.
    assert.ok(work[1] <= 4.5 * work[0], `${shape}: work ${work[0]} → ${work[1]}`);
  }
});

test("onOutputElement: each item of a top-level array once it closes, then the rest at the end", async () => {
  const provider = new k.OpenAIChatProvider({ model: "m", apiKey: "sk-test-0123456789", baseUrl: server.baseUrl });
  const items = Array.from({ length: 50 }, (_, i) => ({ n: i, word: `w${i}`.repeat(i % 7) }));
  serveText(JSON.stringify(items), 13);
  const seen = [];
  const partialLengths = [];
  const r = await k.generate(provider, "", [], history, {
    output: { schema: { type: "array", items: { type: "object" } } },
    onOutputElement: (item) => seen.push(structuredClone(item)),
    onPartialOutput: (v) => partialLengths.push([v.length, seen.length]),
  });
  assert.deepEqual(seen, items);
  assert.deepEqual(r.output, items);
  // While streaming, an item is handed on only once the next one began (it is complete).
  for (const [len, given] of partialLengths) assert.ok(given <= Math.max(0, len - 1), `${given} given with ${len} begun`);
  assert.ok(partialLengths.some(([, given]) => given > 10), "items were handed on while the answer streamed");
});

test("broken answers are malformed_output with their text; a validator's refusal too; a refusal stays refused", async () => {
  const provider = new k.OpenAIChatProvider({ model: "m", apiKey: "sk-test-0123456789", baseUrl: server.baseUrl });
  const output = { schema: { type: "object" } };
  for (const answer of ["Sure! Here is the JSON: {\"a\": 1}", "{\"a\": [1, 2", "{\"a\": 1} {\"b\": 2}"]) {
    server.respond({ steps: [text(answer), finish(), done()] });
    await assert.rejects(k.generate(provider, "", [], history, { output }), (e) => {
      assert.ok(e instanceof k.ChatProviderError, String(e));
      assert.equal(e.kind, "malformed_output");
      assert.equal(e.text, answer);
      return true;
    });
  }
  // The caller's validator, or the toolset's hook in a step.
  const validate = (schema, v) => (typeof v.a === "number" ? null : "a must be a number");
  server.respond({ steps: [text('{"a": "one"}'), finish(), done()] });
  await assert.rejects(k.generate(provider, "", [], history, { output: { ...output, validate } }), (e) => {
    assert.equal(e.kind, "malformed_output");
    assert.match(e.message, /does not match the schema: a must be a number/);
    assert.equal(e.text, '{"a": "one"}');
    return true;
  });
  server.respond({ steps: [text('{"a": "one"}'), finish(), done()] });
  await assert.rejects(k.step(provider, "", new k.SimpleToolset([], { validate }), history, { output }), (e) => e.kind === "malformed_output");
  server.respond({ steps: [text('{"a": 1}'), finish(), done()] });
  const ok = await k.step(provider, "", new k.SimpleToolset([], { validate }), history, { output });
  assert.deepEqual(ok.output, { a: 1 });
  // A refusal is the model's, not a broken answer.
  server.respond({ steps: [chunk({ refusal: "I can't help with that." }), finish(), done()] });
  await assert.rejects(k.generate(provider, "", [], history, { output }), (e) => {
    assert.equal(e.kind, "refused");
    assert.match(e.message, /I can't help with that/);
    return true;
  });
  // Bad options fail before anything is sent.
  const before = server.requests.length;
  for (const [bad, says] of [
    [{ schema: "x" }, /output.schema must be a JSON Schema object/],
    [{ schema: {}, name: "two words" }, /output.name/],
    [{ schema: {}, strict: "yes" }, /output.strict/],
    [{ schema: {}, validate: 1 }, /output.validate/],
    [{ schema: {}, schemas: {} }, /unknown option `schemas`/],
  ]) {
    await assert.rejects(k.generate(provider, "", [], history, { output: bad }), (e) => e instanceof TypeError && says.test(e.message));
  }
  await assert.rejects(k.generate(provider, "", [], history, { onPartialOutput: () => {} }), /need options.output/);
  assert.equal(server.requests.length, before);
});

test("a step that calls tools carries no output; the next one does", async () => {
  const provider = new k.OpenAIChatProvider({ model: "m", apiKey: "sk-test-0123456789", baseUrl: server.baseUrl });
  const toolset = new k.SimpleToolset([{ name: "lookup", description: "d", parameters: { type: "object" }, handler: () => "21.5" }]);
  server.respond({ steps: [text("Let me look."), chunk({ tool_calls: [{ index: 0, id: "c1", type: "function", function: { name: "lookup", arguments: "{}" } }] }), finish("tool_calls"), done()] });
  const first = await k.step(provider, "", toolset, history, { output: { schema: { type: "object" } } });
  assert.equal(first.output, undefined);
  assert.equal((await first.toolResults())[0].return_value.output, "21.5");
});

test("an Agent: tools, then the final answer's output; the wire carries the preview; the context keeps the text", async () => {
  const provider = new k.OpenAIChatProvider({ model: "m", apiKey: "sk-test-0123456789", baseUrl: server.baseUrl });
  const toolset = new k.SimpleToolset([{ name: "lookup", description: "d", parameters: { type: "object" }, handler: () => "21.5" }]);
  server.respond({ steps: [chunk({ tool_calls: [{ index: 0, id: "c1", type: "function", function: { name: "lookup", arguments: "{}" } }] }), finish("tool_calls"), done()] });
  const answer = JSON.stringify({ city: "Paris", high: 21.5, note: "mild ".repeat(200) });
  serveText(answer, 11);
  const agent = new k.Agent({ provider, systemPrompt: "Be exact.", toolset, output: { schema: SCHEMA, name: "forecast" } });
  let preview;
  let previews = 0;
  const lines = [];
  await k.runSoul(agent, "Paris?", async (wire) => {
    for await (const m of wire.uiSide({ merge: false })) {
      if (m.type === "StepBegin") preview = undefined;
      if (m.type === "PartialOutput") {
        preview = k.PartialJson.applyEdits(preview, m.payload.edits);
        previews++;
      }
    }
  }, new AbortController().signal, { recorder: new k.WireRecorder((l) => lines.push(l)) });
  assert.deepEqual(agent.output, JSON.parse(answer));
  assert.deepEqual(preview, JSON.parse(answer));
  assert.ok(previews > 10, `${previews} previews`);
  assert.ok(lines.length > 5 && lines.every((l) => !l.includes("PartialOutput")), "a recording keeps kimi-cli's messages only");
  // Both requests asked for the output.
  for (const r of server.requests.slice(-2)) assert.equal(r.body.response_format.json_schema.name, "forecast");
  const last = agent.context.history.at(-1);
  assert.equal(last.role, "assistant");
  assert.equal(textOf(last), answer);

  // A broken final answer ends the turn with malformed_output, and the answer is in the context.
  server.respond({ steps: [text("Paris is mild."), finish(), done()] });
  await assert.rejects(
    k.runSoul(agent, "Again?", async (wire) => {
      for await (const _ of wire.uiSide()) { /* drain */ }
    }, new AbortController().signal),
    (e) => e.kind === "malformed_output" && e.text === "Paris is mild.",
  );
  assert.equal(agent.output, undefined);
  assert.equal(agent.context.history.at(-1).content, "Paris is mild.");
});
