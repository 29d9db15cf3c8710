// The UI message stream from a plain Node server running an agent (`uiMessageStream` +
// `uiMessageStreamResponse`), read by the AI SDK's own client code: `DefaultChatTransport` posts
// and parses the stream, `readUIMessageStream` builds the message as `useChat` does.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { Readable } from "node:stream";
import * as k from "kosong-wasm";
import { DefaultChatTransport, readUIMessageStream } from "ai";

let http;
let base;
/** What the next POST runs: `(signal) => Agent`, and what the server saw. */
let nextAgent;
const seen = { aborted: 0, requests: [] };

before(async () => {
  http = createServer(async (req, res) => {
    let text = "";
    for await (const c of req) text += c;
    const body = JSON.parse(text);
    seen.requests.push(body);
    const ac = new AbortController();
    // The client went away (useChat's stop): the run is cancelled.
    res.on("close", () => {
      if (!res.writableFinished) {
        seen.aborted++;
        ac.abort(new Error("client went away"));
      }
    });
    const last = body.messages.at(-1);
    const input = last.parts.filter((p) => p.type === "text").map((p) => p.text).join("");
    const response = k.uiMessageStreamResponse(k.uiMessageStream(nextAgent(), input, ac.signal, { messageId: "msg-1" }));
    res.writeHead(response.status, Object.fromEntries(response.headers));
    Readable.fromWeb(response.body).pipe(res);
  });
  await new Promise((r) => http.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${http.address().port}`;
});
after(() => new Promise((r) => http.close(r)));

const user = (text) => ({ id: `u${Math.random()}`, role: "user", parts: [{ type: "text", text }] });
const send = (text, abortSignal) =>
  new DefaultChatTransport({ api: `${base}/api/chat` }).sendMessages({ trigger: "submit-message", chatId: "c1", messageId: undefined, messages: [user(text)], abortSignal });
async function messageOf(stream) {
  let m;
  for await (const x of readUIMessageStream({ stream })) m = x;
  return m;
}
const adder = () => new k.SimpleToolset([{ name: "add", description: "Adds", parameters: { type: "object" }, handler: ({ a, b }) => String(a + b) }]);

test("a turn as useChat sees it: reasoning, text, a tool's input and output, two steps", async () => {
  nextAgent = () =>
    new k.Agent({
      provider: new k.ScriptedProvider(['think: The user wants a sum.\ntext: Let me add.\ntool_call: {"id":"c1","name":"add","arguments":"{\\"a\\":1,\\"b\\":2}"}', "text: It is 3."]),
      systemPrompt: "",
      toolset: adder(),
    });
  const m = await messageOf(await send("1+2?"));
  assert.equal(m.id, "msg-1");
  assert.deepEqual(m.parts.map((p) => p.type), ["step-start", "reasoning", "text", "tool-add", "step-start", "text"]);
  assert.equal(m.parts[1].text, "The user wants a sum.");
  assert.deepEqual([m.parts[3].state, m.parts[3].input, m.parts[3].output], ["output-available", { a: 1, b: 2 }, "3"]);
  assert.equal(m.parts[5].text, "It is 3.");
});

test("a retried step's void attempt is dropped (reset-step); a tool error is output-error; a failed run is an error chunk", async () => {
  nextAgent = () =>
    new k.Agent({
      provider: new k.ScriptedProvider(["text: half an answer\nerror: 503 overloaded", 'tool_call: {"id":"c1","name":"missing","arguments":"{}"}', "text: Done."]),
      systemPrompt: "",
      toolset: adder(),
      retryBackoff: { initialMs: 0, maxMs: 0, jitterMs: 0 },
    });
  const m = await messageOf(await send("go"));
  assert.ok(!JSON.stringify(m.parts).includes("half an answer"), JSON.stringify(m.parts));
  const tool = m.parts.find((p) => p.type === "tool-missing");
  assert.equal(tool.state, "output-error");
  assert.match(tool.errorText, /not found/);
  assert.equal(m.parts.at(-1).text, "Done.");

  nextAgent = () => new k.Agent({ provider: new k.ScriptedProvider(["error: 401 bad key"]), systemPrompt: "", maxRetriesPerStep: 1 });
  const chunks = [];
  for await (const c of await send("go")) chunks.push(c);
  assert.equal(chunks.at(-1).type, "error");
  assert.equal(chunks.at(-1).errorText, "APIStatusError: bad key");
});

test("useChat's stop (the request aborted) cancels the run on the server: the tool's signal aborts", async () => {
  let toolSignal;
  let started;
  const running = new Promise((r) => (started = r));
  nextAgent = () =>
    new k.Agent({
      provider: new k.ScriptedProvider(['tool_call: {"id":"c1","name":"wait","arguments":"{}"}']),
      systemPrompt: "",
      toolset: new k.SimpleToolset([{ name: "wait", description: "", parameters: { type: "object" }, handler: (_a, ctx) => {
        toolSignal = ctx.signal;
        started();
        return new Promise((resolve) => ctx.signal.addEventListener("abort", () => resolve("stopped")));
      } }]),
    });
  const ac = new AbortController();
  const stream = await send("wait", ac.signal);
  const reading = (async () => {
    try {
      for await (const _ of stream);
    } catch {}
  })();
  await running;
  ac.abort();
  await reading;
  for (let i = 0; i < 200 && !toolSignal.aborted; i++) await new Promise((r) => setTimeout(r, 10));
  assert.equal(toolSignal.aborted, true, "nothing keeps running on the server");
  assert.ok(seen.aborted >= 1);
});

test("a refused approval: the call is denied when its result is the refusal; a tool that went on after the refusal shows what it returned", async () => {
  const toolset = new k.SimpleToolset([{
    name: "rm", description: "", parameters: { type: "object" },
    handler: async ({ path }, ctx) => ((await ctx.requestApproval({ action: "delete", description: path })) ? `deleted ${path}` : path === "keep" ? "kept it, as asked" : ctx.rejection()),
  }]);
  const call = (id, path) => `tool_call: ${JSON.stringify({ id, name: "rm", arguments: JSON.stringify({ path }) })}`;
  const agent = new k.Agent({ provider: new k.ScriptedProvider([`${call("c1", "keep")}\n${call("c2", "drop")}`, "text: ok"]), systemPrompt: "", toolset });
  const chunks = [];
  const stream = k.uiMessageStream(agent, "go", new AbortController().signal, {
    onWire: (wire) => {
      (async () => {
        for await (const m of wire.uiSide({ merge: true })) if (m.type === "ApprovalRequest") wire.respond(m.payload.id, "reject");
      })();
    },
  });
  for await (const c of stream) chunks.push(c);
  const outputs = chunks.filter((c) => c.type.startsWith("tool-output-")).map((c) => [c.toolCallId, c.type, c.output]);
  assert.deepEqual(outputs.sort(), [["c1", "tool-output-available", "kept it, as asked"], ["c2", "tool-output-denied", undefined]]);
});
