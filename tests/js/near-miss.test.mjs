// Near-miss shapes, as a user who knows another SDK writes them: a history message, a tool
// definition and a step's options, each mutated at random (a key renamed to another SDK's name or a
// typo, a part of another shape, a role spelt otherwise, a key too many). Each must be used whole —
// what it carries reaches the model (the request a real loopback server receives), or the callback
// it names is called — or refused with a TypeError naming what is wrong. Never half-used: accepted
// and then sent without the user's text, the tool's schema or its description.
//
// Seeded: `NEAR_MISS_SEED=n node --test tests/js/near-miss.test.mjs` replays a run; a failure
// prints the case (its seed and the shape handed in).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import * as k from "kosong-wasm";
import { startMockServer, text, finish, done } from "./mock-openai.mjs";

const SEED = Number(process.env.NEAR_MISS_SEED ?? 20261204);
let server;
before(async () => {
  server = await startMockServer();
});
after(async () => {
  await server.close();
});

/** mulberry32: a small seeded generator. */
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const pick = (r, xs) => xs[Math.floor(r() * xs.length)];
const provider = () => new k.OpenAIChatProvider({ model: "m", apiKey: "sk-test", baseUrl: server.baseUrl });
const answer = () => server.respond({ steps: [text("ok"), finish("stop"), done()] });
/** Runs `f`; `{refused: error}` when it threw a TypeError, else `{request}`: the body the server got (or none). */
async function attempt(f) {
  const n = server.requests.length;
  answer();
  try {
    await f();
  } catch (e) {
    server.clearQueue();
    if (e instanceof TypeError) return { refused: e };
    throw e;
  }
  server.clearQueue();
  return { request: server.requests[n]?.body };
}

// ---- history messages ------------------------------------------------------------------------

const MESSAGE_MUTATIONS = [
  ["content as parts", (m) => ({ ...m, content: [{ type: "text", text: m.content }] })],
  ["content renamed text", ({ content, ...m }) => ({ ...m, text: content })],
  ["content renamed contents", ({ content, ...m }) => ({ ...m, contents: content })],
  ["content renamed message", ({ content, ...m }) => ({ ...m, message: content })],
  ["a UIMessage (parts)", ({ content, ...m }) => ({ ...m, parts: [{ type: "text", text: content }] })],
  ["a UIMessage with its id", ({ content, ...m }) => ({ id: "u1", ...m, parts: [{ type: "text", text: content }] })],
  ["an input_text part", (m) => ({ ...m, content: [{ type: "input_text", text: m.content }] })],
  ["a text part with value", (m) => ({ ...m, content: [{ type: "text", value: m.content }] })],
  ["a part without its type", (m) => ({ ...m, content: [{ text: m.content }] })],
  ["one part, not a list", (m) => ({ ...m, content: { type: "text", text: m.content } })],
  ["role User", (m) => ({ ...m, role: "User" })],
  ["role human", (m) => ({ ...m, role: "human" })],
  ["role model", (m) => ({ ...m, role: "model" })],
  ["role renamed type", ({ role, ...m }) => ({ ...m, type: role })],
  ["an id beside it", (m) => ({ ...m, id: "m1" })],
  ["createdAt beside it", (m) => ({ ...m, createdAt: new Date(0) })],
  ["providerOptions on a part", (m) => ({ ...m, content: [{ type: "text", text: m.content, providerOptions: {} }] })],
  ["an AI SDK image part first", (m) => ({ ...m, content: [{ type: "image", image: "data:image/png;base64,AA==" }, { type: "text", text: m.content }] })],
  ["content null and parts", ({ content, ...m }) => ({ ...m, content: null, parts: [{ type: "text", text: content }] })],
];

test("history messages: every near-miss shape is used whole or refused naming the field, never sent without the user's text", async () => {
  const r = rng(SEED);
  const outcomes = { used: 0, refused: 0 };
  for (let i = 0; i < 150; i++) {
    const token = `tok${SEED % 997}x${i}`;
    const muts = [pick(r, MESSAGE_MUTATIONS), ...(r() < 0.4 ? [pick(r, MESSAGE_MUTATIONS)] : [])];
    let message = { role: "user", content: `say ${token}` };
    for (const [, f] of muts) message = f(message);
    const what = `case ${i} (NEAR_MISS_SEED=${SEED}): ${muts.map(([n]) => n).join(" + ")} → ${JSON.stringify(message)}`;
    const got = await attempt(() => k.generate(provider(), "", [], [message]));
    if (got.refused) {
      outcomes.refused++;
      assert.match(got.refused.message, /\b(content|role|parts?|text|message|type|history)\b/i, `${what}: the refusal names no field: ${got.refused.message}`);
      continue;
    }
    outcomes.used++;
    assert.ok(got.request, `${what}: accepted, yet no request reached the server`);
    assert.ok(JSON.stringify(got.request.messages).includes(token), `${what}: accepted, and the model was sent ${JSON.stringify(got.request.messages)} — the user's text is not in it`);
  }
  // Both ways are taken: the property is not true by refusing everything, nor by taking everything.
  assert.ok(outcomes.used > 10 && outcomes.refused > 10, JSON.stringify(outcomes));
});

// ---- tool definitions ------------------------------------------------------------------------

const TOOL_MUTATIONS = [
  ["parameters as inputSchema", ({ parameters, ...t }) => ({ ...t, inputSchema: parameters })],
  ["parameters as input_schema", ({ parameters, ...t }) => ({ ...t, input_schema: parameters })],
  ["parameters as schema", ({ parameters, ...t }) => ({ ...t, schema: parameters })],
  ["parameters as params", ({ parameters, ...t }) => ({ ...t, params: parameters })],
  ["parameters as a JSON string", (t) => ({ ...t, parameters: JSON.stringify(t.parameters) })],
  ["handler as execute", ({ handler, ...t }) => ({ ...t, execute: handler })],
  ["handler as run", ({ handler, ...t }) => ({ ...t, run: handler })],
  ["handler as fn", ({ handler, ...t }) => ({ ...t, fn: handler })],
  ["description as desc", ({ description, ...t }) => ({ ...t, desc: description })],
  ["description as summary", ({ description, ...t }) => ({ ...t, summary: description })],
  ["timeout for timeoutMs", (t) => ({ ...t, timeout: 5000 })],
  ["timeoutMs", (t) => ({ ...t, timeoutMs: 5000 })],
  ["idempotent", (t) => ({ ...t, idempotent: true })],
  ["needsApproval false", (t) => ({ ...t, needsApproval: false })],
  ["eager false", (t) => ({ ...t, eager: false })],
  ["type function", (t) => ({ ...t, type: "function" })],
  ["strict", (t) => ({ ...t, strict: true })],
  ["name as toolName", ({ name, ...t }) => ({ ...t, toolName: name })],
  ["wrapped as OpenAI's function", (t) => ({ type: "function", function: { name: t.name, description: t.description, parameters: t.parameters }, handler: t.handler })],
];

test("tool definitions: every near-miss shape is used whole (its description and schema reach the model) or refused naming the key", async () => {
  const r = rng(SEED + 1);
  const outcomes = { used: 0, refused: 0 };
  for (let i = 0; i < 150; i++) {
    const token = `tok${SEED % 997}t${i}`;
    const muts = [pick(r, TOOL_MUTATIONS), ...(r() < 0.4 ? [pick(r, TOOL_MUTATIONS)] : [])];
    let tool = {
      name: "lookup",
      description: `Finds ${token}`,
      parameters: { type: "object", properties: { [`q_${token}`]: { type: "string" } }, required: [`q_${token}`] },
      handler: () => "found",
    };
    for (const [, f] of muts) tool = f(tool);
    const what = `case ${i} (NEAR_MISS_SEED=${SEED}): ${muts.map(([n]) => n).join(" + ")} → ${Object.keys(tool).join(", ")}`;
    const got = await attempt(() => k.step(provider(), "", new k.SimpleToolset([tool]), [{ role: "user", content: "go" }]));
    if (got.refused) {
      outcomes.refused++;
      assert.match(got.refused.message, /`?\w+`?/, what);
      assert.ok(muts.some(([n]) => got.refused.message.includes(n.split(" ")[0]) || /did you mean|needs|must|unknown|not a/i.test(got.refused.message)), `${what}: the refusal does not say what is wrong: ${got.refused.message}`);
      continue;
    }
    outcomes.used++;
    const sent = got.request?.tools?.[0]?.function;
    assert.ok(sent, `${what}: accepted, yet no tool reached the model: ${JSON.stringify(got.request?.tools)}`);
    assert.equal(sent.description, `Finds ${token}`, `${what}: the description was not sent whole`);
    assert.ok(sent.parameters?.properties?.[`q_${token}`], `${what}: accepted, and the model got the schema ${JSON.stringify(sent.parameters)}`);
  }
  assert.ok(outcomes.used > 10 && outcomes.refused > 10, JSON.stringify(outcomes));
});

// ---- a step's options ------------------------------------------------------------------------

const OPTION_NAMES = ["onMessagePart", "onPart", "onmessagepart", "onMessageParts", "onChunk", "onToken", "onText"];

test("a step's options: a callback under a near-miss name is called, or the name is refused with the one it may mean", async () => {
  const r = rng(SEED + 2);
  for (let i = 0; i < 30; i++) {
    const name = pick(r, OPTION_NAMES);
    let calls = 0;
    const got = await attempt(() => k.step(provider(), "", new k.SimpleToolset([]), [{ role: "user", content: "go" }], { [name]: () => void calls++ }));
    const what = `case ${i} (NEAR_MISS_SEED=${SEED}): option ${name}`;
    if (got.refused) {
      assert.match(got.refused.message, new RegExp(name), `${what}: the refusal does not name it: ${got.refused.message}`);
      continue;
    }
    assert.ok(calls > 0, `${what}: accepted, and never called`);
  }
});
