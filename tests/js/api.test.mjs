// The package's JavaScript surface without a network: ScriptedProvider, SimpleToolset,
// toolOk/toolError, argument checking.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as k from "kosong-wasm";

const plus = {
  name: "plus",
  description: "Adds two integers",
  parameters: { type: "object", properties: { a: { type: "integer" }, b: { type: "integer" } } },
  handler: ({ a, b }) => k.toolOk({ output: String(a + b) }),
};

test("kosong's step test: plus#123 gives ToolOk('3') through toolResults() and onToolResult", async () => {
  const provider = new k.ScriptedProvider([
    'text: Hello, world!\ntool_call: {"id": "plus#123", "name": "plus", "arguments": "{\\"a\\": 1, \\"b\\": 2}"}',
  ]);
  const parts = [];
  const collected = [];
  const r = await k.step(provider, "", new k.SimpleToolset([plus]), [], {
    onMessagePart: (p) => parts.push(p),
    onToolResult: (x) => collected.push(x),
  });
  assert.deepEqual(r.message.content, "Hello, world!");
  assert.deepEqual(r.toolCalls, [{ type: "function", id: "plus#123", function: { name: "plus", arguments: '{"a": 1, "b": 2}' } }]);
  assert.deepEqual(parts, [{ type: "text", text: "Hello, world!" }, r.toolCalls[0]]);
  const results = await r.toolResults();
  assert.deepEqual(results, [{ tool_call_id: "plus#123", return_value: k.toolOk({ output: "3" }) }]);
  assert.deepEqual(collected, results);
});

test("ScriptedProvider: one script a call, then a clear error; withThinking copies the queue", async () => {
  const p = new k.ScriptedProvider(["text: one", "text: two"]);
  const copy = p.withThinking("high");
  assert.equal((await k.generate(p, "", [], [])).message.content, "one");
  assert.equal((await k.generate(p, "", [], [])).message.content, "two");
  await assert.rejects(k.generate(p, "", [], []), (e) => e instanceof k.ChatProviderError && /exhausted at call 3/.test(e.message));
  assert.equal((await k.generate(copy, "", [], [])).message.content, "one");
  await assert.rejects(k.generate(new k.ScriptedProvider(["sparkle: x"]), "", [], []), /Unknown echo DSL kind 'sparkle'/);
});

test("SimpleToolset.handle: sync results stay sync, async ones are Promises, outputs are normalized", async () => {
  const ts = new k.SimpleToolset([
    plus,
    { name: "str", description: "", parameters: {}, handler: () => "plain" },
    { name: "parts", description: "", parameters: {}, handler: async () => [{ type: "text", text: "a" }, { type: "image_url", image_url: { url: "data:," } }] },
    { name: "nothing", description: "", parameters: {}, handler: () => undefined },
    { name: "number", description: "", parameters: {}, handler: () => 42 },
    { name: "err", description: "", parameters: {}, handler: () => k.toolError({ message: "no such file", brief: "Not found" }) },
    { name: "args", description: "", parameters: {}, handler: (args) => `${Object.getPrototypeOf(args) === Object.prototype}:${JSON.stringify(args)}` },
  ]);
  const call = (name, args = "{}") => ({ type: "function", id: `id-${name}`, function: { name, arguments: args } });
  const sync = ts.handle(call("plus", '{"a": 2, "b": 40}'));
  assert.ok(!(sync instanceof Promise));
  assert.equal(sync.return_value.output, "42");
  assert.equal(ts.handle(call("str")).return_value.output, "plain");
  const parts = ts.handle(call("parts"));
  assert.ok(parts instanceof Promise);
  assert.deepEqual((await parts).return_value.output, [{ type: "text", text: "a" }, { type: "image_url", image_url: { url: "data:,", id: null } }]);
  assert.deepEqual(ts.handle(call("nothing")).return_value, k.toolOk());
  const num = ts.handle(call("number")).return_value;
  assert.equal(num.is_error, true);
  assert.match(num.message, /^Invalid return type/);
  assert.deepEqual(ts.handle(call("err")).return_value, { is_error: true, output: "", message: "no such file", display: [{ type: "brief", text: "Not found" }] });
  // Missing or empty arguments mean {}: the handler gets an empty object (one that reads its arguments).
  for (const args of [null, undefined, ""]) {
    assert.equal(ts.handle({ type: "function", id: "x", function: { name: "args", arguments: args } }).return_value.output, "true:{}", `arguments ${JSON.stringify(args)}`);
  }
  assert.equal(ts.handle(call("args", '{"k":1}')).return_value.output, 'true:{"k":1}');
  assert.deepEqual(ts.tools.map((t) => t.name), ["plus", "str", "parts", "nothing", "number", "err", "args"]);
});

test("SimpleToolset add/remove and the tool context", async () => {
  let seen;
  const ts = new k.SimpleToolset().add({ name: "ctx", description: "d", parameters: { type: "object" }, handler: (_a, ctx) => { seen = ctx; return "ok"; } });
  const ctrl = new AbortController();
  ts.handle({ type: "function", id: "c9", function: { name: "ctx", arguments: "{}" } }, { signal: ctrl.signal });
  assert.equal(seen.toolCallId, "c9");
  assert.equal(seen.signal, ctrl.signal);
  assert.deepEqual(ts.tools, [{ name: "ctx", description: "d", parameters: { type: "object" } }]);
  ts.remove("ctx");
  assert.deepEqual(ts.tools, []);
  assert.throws(() => ts.remove("ctx"), /Tool `ctx` not found/);
  assert.equal(ts.handle({ type: "function", id: "c10", function: { name: "ctx", arguments: "{}" } }).return_value.message, "Tool `ctx` not found");
});

test("bad arguments are TypeErrors with a clear message, not crashes", async () => {
  assert.throws(() => new k.OpenAIChatProvider({}), /model/);
  assert.throws(() => new k.OpenAIChatProvider({ model: "m", timeoutMs: -1 }), /timeoutMs/);
  assert.throws(() => new k.OpenAIChatProvider({ model: "m" }).withThinking("huge"), /thinking effort/);
  assert.throws(() => new k.ScriptedProvider("text: x"), /array of strings/);
  assert.throws(() => new k.SimpleToolset([{ name: "x" }]), /handler/);
  const p = new k.ScriptedProvider(["text: x", "text: y", "text: z"]);
  await assert.rejects(k.generate(p, 42, [], []), TypeError);
  await assert.rejects(k.step(p, "", {}, []), /toolset must have/);
  await assert.rejects(k.generate({ name: "fake" }, "", [], []), /provider must be/);
  await assert.rejects(k.generate(p, "", [], [{ role: "wizard", content: "x" }]), /invalid history/);
  await assert.rejects(k.generate(p, "", [], [], { signal: "nope" }), /AbortSignal/);
  // The instance still works after all of that.
  assert.equal((await k.generate(new k.ScriptedProvider(["text: fine"]), "", [], [])).message.content, "fine");
});

test("OpenAIChatProvider: withThinking returns a new provider and leaves the old one unchanged", () => {
  const p = new k.OpenAIChatProvider({ model: "gpt-x", apiKey: "sk-secret-value" });
  const q = p.withThinking("high");
  assert.equal(p.thinkingEffort, null);
  assert.equal(q.thinkingEffort, "high");
  assert.equal(q.modelName, "gpt-x");
  assert.equal(p.name, "openai");
  assert.ok(!JSON.stringify(q).includes("sk-secret-value"));
});

test("PartialJson: a live preview of streaming arguments, kept in place; garbage stops it without throwing", () => {
  const p = new k.PartialJson();
  assert.equal(p.value, undefined);
  p.feed('{"query": "weather in Pa');
  assert.deepEqual(p.value, { query: "weather in Pa" });
  const same = p.value;
  p.feed('ris", "days": [1, 2');
  assert.equal(p.value, same, "the same object, updated in place");
  assert.deepEqual(p.value, { query: "weather in Paris", days: [1, 2] });
  p.feed('0], "deep": {"a": [{"b": "\\u00e9"}]}, "ok": false}');
  assert.deepEqual(p.value, { query: "weather in Paris", days: [1, 20], deep: { a: [{ b: "é" }] }, ok: false });
  assert.equal(p.done, true);

  const bad = new k.PartialJson();
  bad.feed('{"a": 1, "b": "x');
  assert.doesNotThrow(() => bad.feed('"} oops'));
  assert.equal(bad.failed, true);
  assert.deepEqual(bad.value, { a: 1, b: "x" });
  assert.deepEqual(bad.feed("more"), []);
  assert.throws(() => bad.feed(42), TypeError);
});

test("every entry exports exactly the names index.d.ts declares: no internals, nothing undeclared", async () => {
  const { readFileSync } = await import("node:fs");
  const dts = readFileSync(new URL("../../index.d.ts", import.meta.url), "utf8");
  const declared = [...new Set([...dts.matchAll(/^export (?:declare )?(?:abstract )?(?:class|function|const|let|var) (\w+)/gm)].map((m) => m[1]))].sort(); // overloads once
  assert.ok(declared.length > 30);
  assert.deepEqual(Object.keys(k).sort(), declared, "the node entry");
  const browser = await import("../../pkg/browser.js");
  assert.deepEqual(Object.keys(browser).sort(), declared, "the browser entry");
  assert.ok(!Object.keys(k).some((n) => n.startsWith("_")));
  // The browser's FileSessionStore: Node's files have no place there, so it refuses, naming the
  // browser's store (its code is left out of a browser bundle).
  assert.throws(() => new browser.FileSessionStore("./s"), (e) => e instanceof TypeError && /runs in Node.*IndexedDBSessionStore/.test(e.message));
});

test("PartialJson: the edits it returns rebuild its value exactly, piece by piece (strings that keep streaming, keys, arrays)", () => {
  const doc = JSON.stringify({ path: "a/b.txt", content: "line one\nline \"two\" é😀 ".repeat(40), list: [{ k: "v".repeat(300) }, 2, "x".repeat(90)], n: -12.5e3, ok: true });
  for (const size of [1, 3, 7, 20, 64]) {
    const p = new k.PartialJson();
    let mirror;
    const apply = (e) => {
      if (e.path.length === 0) return void (mirror = e.op === "set" ? structuredClone(e.value) : mirror + e.text);
      let parent = mirror;
      for (const seg of e.path.slice(0, -1)) parent = parent[seg];
      const key = e.path.at(-1);
      if (e.op === "set") parent[key] = structuredClone(e.value);
      else parent[key] += e.text;
    };
    const chars = Array.from(doc); // pieces of whole code points, as a model's pieces are
    for (let i = 0; i < chars.length; i += size) {
      for (const e of p.feed(chars.slice(i, i + size).join(""))) apply(e);
      assert.deepEqual(mirror, p.value, `piece size ${size}, at ${i}`);
    }
    assert.deepEqual(p.value, JSON.parse(doc));
    assert.equal(p.done, true);
  }
});

test("PartialJson: plain pieces inside an open string are appended at once, and the preview stays exact around them", () => {
  const p = new k.PartialJson();
  p.feed('{"a": "x');
  assert.deepEqual(p.feed("yy"), [{ op: "append", path: ["a"], text: "yy" }]);
  assert.deepEqual(p.feed("zz"), [{ op: "append", path: ["a"], text: "zz" }]);
  assert.equal(p.done, false);
  assert.equal(p.failed, false);
  assert.deepEqual(p.feed('w"'), [{ op: "append", path: ["a"], text: "w" }]);
  // The string closed with that piece: whitespace after it is not part of it.
  assert.deepEqual(p.feed(" "), []);
  p.feed(', "b": "q\\');
  assert.deepEqual(p.feed("n"), [{ op: "append", path: ["b"], text: "\n" }], "an escape's second half is read by the core");
  p.feed("r");
  assert.deepEqual(p.feed('s", "c": 1}'), [{ op: "append", path: ["b"], text: "s" }, { op: "set", path: ["c"], value: 1 }]);
  assert.deepEqual(p.value, { a: "xyyzzw", b: "q\nrs", c: 1 });
  assert.equal(p.done, true);

  const bad = new k.PartialJson();
  bad.feed('{"a": "x');
  bad.feed("y");
  bad.feed("y");
  bad.feed('"} oops');
  assert.equal(bad.failed, true);
  assert.deepEqual(bad.value, { a: "xyy" });
  const mid = new k.PartialJson();
  mid.feed('["x');
  mid.feed("y");
  assert.equal(mid.done, false);
  mid.feed('"]');
  assert.equal(mid.done, true);
  assert.deepEqual(mid.value, ["xy"]);
});

test("PartialJson: deep nesting is previewed down to 64 levels, says so, and what follows is previewed again", () => {
  const depth = 8000; // 48 KB of nested arguments, fed in 100-byte pieces
  const text = `{"deep": ${'{"a":'.repeat(depth)}1${"}".repeat(depth)}, "after": "seen"}`;
  const p = new k.PartialJson();
  for (let i = 0; i < text.length; i += 100) p.feed(text.slice(i, i + 100));
  assert.equal(p.done, true);
  assert.equal(p.failed, false);
  assert.equal(p.depthLimited, true);
  assert.equal(p.value.after, "seen");
  let levels = 0;
  for (let v = p.value.deep; v && typeof v === "object"; v = v.a) levels++;
  assert.equal(levels, 64, "objects down to the 64th level below the root");
  const shallow = new k.PartialJson();
  shallow.feed('{"a": {"b": [1, 2]}}');
  assert.equal(shallow.depthLimited, false);
});

test("SimpleToolset refuses what the providers would: duplicate names, invalid names, parameters that are not a schema object; a thrown error keeps its class and reaches the logger", async () => {
  const t = (name, extra = {}) => ({ name, description: "", parameters: { type: "object" }, handler: () => "ok", ...extra });
  assert.throws(() => new k.SimpleToolset([t("a"), t("a")]), /already a tool named `a`/);
  assert.throws(() => new k.SimpleToolset([t("has space")]), /must match/);
  assert.throws(() => new k.SimpleToolset([t("x".repeat(65))]), /must match/);
  assert.throws(() => new k.SimpleToolset([t("p", { parameters: [] })]), /JSON Schema object/);
  assert.throws(() => new k.SimpleToolset([t("p", { parameters: { type: "string" } })]), /JSON Schema object/);
  new k.SimpleToolset([t("$web_search"), t("ok-name_1"), t("noparams", { parameters: undefined })]); // all fine

  const warned = [];
  const ts = new k.SimpleToolset([
    t("typo", { handler: (a) => a.missing.field }),
    t("num", { handler: () => 42 }),
  ], { logger: { warn: (message, fields) => warned.push({ message, fields }) } });
  const r = ts.handle({ type: "function", id: "c1", function: { name: "typo", arguments: "{}" } });
  assert.match(r.return_value.message, /^Error running tool: TypeError: Cannot read properties of undefined/);
  assert.equal(warned.length, 1);
  assert.equal(warned[0].fields.tool, "typo");
  assert.match(warned[0].fields.stack, /TypeError/);
  const n = ts.handle({ type: "function", id: "c2", function: { name: "num", arguments: "{}" } });
  assert.match(n.return_value.message, /^Invalid return type: number; a tool returns a string, an array of content parts or a ToolReturnValue/);
});

test("PartialJson previews a number exactly as JSON.parse reads it, however the text is cut", () => {
  const text = '{"a": 973347.3247970713, "b": [0.1, -0, 1e-7, 12345678901234567890, 2.5e300]}';
  for (let cut = 1; cut < text.length; cut++) {
    const p = new k.PartialJson();
    p.feed(text.slice(0, cut));
    p.feed(text.slice(cut));
    assert.ok(p.done, `cut ${cut}`);
    assert.deepEqual(p.value, JSON.parse(text), `cut ${cut}`);
    assert.ok(Object.is(p.value.b[1], -0));
  }
});

test("a thenable is what Promises/A+ says at every entry point: a function with a then is awaited too", async () => {
  // A function carrying a callable `then` (Promises/A+ calls it a thenable), settled a tick later.
  const later = (value) => Object.assign(() => {}, { then: (resolve) => setTimeout(() => resolve(value), 5) });
  const call = (id) => `tool_call: ${JSON.stringify({ id, name: "f", arguments: "{}" })}`;
  // A SimpleToolset handler, and a toolset's own handle.
  const simple = new k.SimpleToolset([{ name: "f", description: "", parameters: {}, handler: () => later("from a handler") }]);
  const r1 = await k.step(new k.ScriptedProvider([call("c1")]), "", simple, []);
  assert.deepEqual((await r1.toolResults()).map((x) => [x.return_value.is_error, x.return_value.output]), [[false, "from a handler"]]);
  class Own extends k.SimpleToolset {
    handle(c) {
      return later({ tool_call_id: c.id, return_value: k.toolOk({ output: `handled ${c.id}` }) });
    }
  }
  const r2 = await k.step(new k.ScriptedProvider([call("c2")]), "", new Own([{ name: "f", description: "", parameters: {}, handler: () => "unused" }]), []);
  assert.deepEqual((await r2.toolResults()).map((x) => x.return_value.output), ["handled c2"]);
  // onMessagePart: the next part waits for the thenable.
  const order = [];
  await k.generate(new k.ScriptedProvider(["text: a\ntext: b"]), "", [], [], {
    onMessagePart: (p) => {
      order.push(`part ${p.text}`);
      return Object.assign(() => {}, { then: (resolve) => setTimeout(() => (order.push(`settled ${p.text}`), resolve()), 5) });
    },
  });
  assert.deepEqual(order, ["part a", "settled a", "part b", "settled b"]);
});

test("AI SDK shapes: a tool's inputSchema and execute are taken (with ctx.abortSignal), an unknown key is refused with did-you-mean, a UIMessage or a ModelMessage tool part in a history is refused, never sent empty", async () => {
  // The schema reaches the model whole, the handler runs under its AI SDK name.
  let seen = null;
  const sdk = new k.SimpleToolset([{
    name: "echo",
    description: "Echoes",
    inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
    execute: ({ text }, { abortSignal, toolCallId }) => ((seen = { aborted: abortSignal.aborted, toolCallId }), text),
  }]);
  assert.deepEqual(sdk.tools[0].parameters, { type: "object", properties: { text: { type: "string" } }, required: ["text"] });
  const r = await k.step(new k.ScriptedProvider(['tool_call: {"id": "e1", "name": "echo", "arguments": "{\\"text\\": \\"hi\\"}"}']), "", sdk, [{ role: "user", content: "go" }]);
  assert.equal((await r.toolResults())[0].return_value.output, "hi");
  assert.deepEqual(seen, { aborted: false, toolCallId: "e1" });
  // Every key checked; both names of one thing refused.
  const handler = () => "";
  assert.throws(() => new k.SimpleToolset([{ name: "a", description: "", parameters: {}, handler, timeout: 5 }]), /unknown option `timeout`; did you mean `timeoutMs`/);
  assert.throws(() => new k.SimpleToolset([{ name: "a", description: "", parameters: {}, handler, execute: handler }]), /both `handler` and `execute`/);
  assert.throws(() => new k.SimpleToolset([{ name: "a", description: "", parameters: {}, inputSchema: {}, handler }]), /both `parameters` and `inputSchema`/);
  assert.throws(() => new k.SimpleToolset([{ name: "a", description: "" }]), /needs a `handler` function \(or `execute`/);
  // Histories in the AI SDK's shapes: refused, naming the message and the fix.
  const provider = new k.ScriptedProvider(["text: never"]);
  await assert.rejects(k.step(provider, "", sdk, [{ id: "u1", role: "user", parts: [{ type: "text", text: "hello" }] }]), /history\[0\] is an AI SDK UIMessage/);
  const modelMessages = [{ role: "user", content: "hi" }, { role: "assistant", content: [{ type: "tool-call", toolCallId: "c", toolName: "echo", input: {} }] }];
  await assert.rejects(k.generate(provider, "", [], modelMessages), /history\[1\] holds an AI SDK ModelMessage part `tool-call`/);
  assert.throws(() => new k.Context().append({ role: "user", parts: [{ type: "text", text: "x" }] }), /UIMessage/);
});

test("a tool that throws is told on the console by default (no logger given); logger: null silences it", async () => {
  const run = async (opts) => {
    const toolset = new k.SimpleToolset([{ name: "boom", description: "", parameters: {}, handler: () => { throw new RangeError("kaput"); } }], opts);
    const agent = new k.Agent({ provider: new k.ScriptedProvider(['tool_call: {"id": "b1", "name": "boom", "arguments": "{}"}', "text: ok"]), systemPrompt: "", toolset });
    const warned = [];
    const warn = console.warn;
    console.warn = (...args) => warned.push(args);
    try {
      await k.runSoul(agent, "go", async (w) => { for await (const _ of w.uiSide()); }, new AbortController().signal);
    } finally {
      console.warn = warn;
    }
    return warned;
  };
  const told = await run({});
  assert.equal(told.length, 1, JSON.stringify(told));
  assert.match(told[0][0], /tool `boom` threw/);
  assert.ok(told[0].some((a) => a instanceof RangeError), "the error itself, with its stack");
  assert.deepEqual(await run({ logger: null }), []);
});

test("a Standard Schema tool (zod 4): its JSON Schema goes to the model, the arguments are checked before the handler (a failure is an error result the model can act on), the handler gets the validated value", async () => {
  const { z } = await import("zod");
  const ran = [];
  const toolset = new k.SimpleToolset([{
    name: "weather",
    description: "The weather",
    parameters: z.object({ city: z.string().describe("A city"), days: z.number().int().min(1).default(1) }),
    handler: (args) => (ran.push(args), `${args.city}: sunny for ${args.days} day(s)`),
  }]);
  const schema = toolset.tools[0].parameters;
  assert.deepEqual(Object.keys(schema), ["type", "properties", "required"], "verbatim, in its key order, without $schema");
  assert.deepEqual(schema.properties.city, { type: "string", description: "A city" });
  const r = await k.step(new k.ScriptedProvider([
    'tool_call: {"id": "bad", "name": "weather", "arguments": "{\\"city\\": 5, \\"days\\": 0}"}\ntool_call: {"id": "good", "name": "weather", "arguments": "{\\"city\\": \\"Paris\\"}"}',
  ]), "", toolset, [{ role: "user", content: "weather?" }]);
  const [bad, good] = await r.toolResults();
  assert.equal(bad.return_value.is_error, true);
  assert.match(bad.return_value.message, /^Error validating JSON arguments: city: .*expected string.*; days: /);
  assert.equal(good.return_value.output, "Paris: sunny for 1 day(s)");
  assert.deepEqual(ran, [{ city: "Paris", days: 1 }], "only the valid call ran, with the schema's default applied");
  // A Standard Schema that carries no JSON Schema cannot be described to the model: refused.
  const bare = { "~standard": { version: 1, vendor: "bare", validate: (v) => ({ value: v }) } };
  assert.throws(() => new k.SimpleToolset([{ name: "x", description: "", parameters: bare, handler: () => "" }]), /Standard Schema \(bare\) that carries no JSON Schema/);
});
