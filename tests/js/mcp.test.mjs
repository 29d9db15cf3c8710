// McpToolset against a real MCP server: the SDK's McpServer over Streamable HTTP on 127.0.0.1,
// reached by the SDK's own Client. Tools listed (prefixed, names made valid), results as kosong
// parts, errors, an abort that reaches the server as MCP cancellation, a per-call timeout, and a
// changed tool list seen by the next step.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import * as k from "kosong-wasm";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { startMcpServer } from "./mcp-server.mjs";
import { startMockServer, toolStart, finish, done } from "./mock-openai.mjs";

let server;
const clients = [];
before(async () => (server = await startMcpServer()));
after(async () => {
  for (const c of clients) await c.close().catch(() => {});
  await server.close();
});

async function connect() {
  const client = new Client({ name: "kosong-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(server.url)));
  clients.push(client);
  return client;
}
const call = (id, name, args = {}) => `tool_call: ${JSON.stringify({ id, name, arguments: JSON.stringify(args) })}`;
const runStep = async (toolset, script, options) => {
  const r = await k.step(new k.ScriptedProvider([script]), "", toolset, [{ role: "user", content: "go" }], options);
  return r.toolResults();
};

test("McpToolset lists the server's tools, prefixed, with their schemas; names providers refuse are made valid", async () => {
  const tools = await k.McpToolset.fromClient(await connect(), { prefix: "srv_" });
  const names = tools.tools.map((t) => t.name);
  assert.deepEqual(names.sort(), ["srv_add_tool", "srv_dotted_name_v2", "srv_echo", "srv_fail", "srv_measure", "srv_picture", "srv_readme", "srv_slow"]);
  const echo = tools.tools.find((t) => t.name === "srv_echo");
  assert.equal(echo.description, "Echoes the text.");
  assert.equal(echo.parameters.properties.text.type, "string");
  assert.deepEqual(echo.parameters.required, ["text"]);
  // What a provider is sent: the same definitions.
  for (const t of tools.tools) assert.match(t.name, /^[a-zA-Z0-9_-]{1,64}$/);
  await assert.rejects(() => k.McpToolset.fromClient({}), TypeError);
  await assert.rejects(async () => k.McpToolset.fromClient(await connect(), { prefixx: "a" }), /unknown option `prefixx`/);
});

test("McpToolset: results become kosong parts; isError is an error result; a renamed tool calls its server name", async () => {
  const tools = await k.McpToolset.fromClient(await connect());
  const script = [call("c1", "echo", { text: "hi" }), call("c2", "picture"), call("c3", "readme"), call("c4", "fail"), call("c5", "dotted_name_v2"), call("c6", "nope"), call("c7", "measure", { city: "Oslo" })].join("\n");
  const [echo, picture, readme, fail, dotted, nope, measure] = await runStep(tools, script);
  assert.equal(measure.return_value.output, "Oslo: 21.5 °C", "a structured result validated by the client, its text kept");
  assert.equal(echo.return_value.output, "echo: hi");
  assert.equal(echo.return_value.is_error, false);
  assert.equal(picture.return_value.output[0].text, "a red dot");
  assert.equal(picture.return_value.output[1].type, "image_url");
  assert.match(picture.return_value.output[1].image_url.url, /^data:image\/png;base64,iVBOR/);
  assert.match(readme.return_value.output[0].text, /^Resource file:\/\/\/README.md \(text\/markdown\):\n# Hello$/);
  assert.match(readme.return_value.output[1].text, /LICENSE <file:\/\/\/LICENSE>/);
  assert.equal(fail.return_value.is_error, true);
  assert.equal(fail.return_value.message, "the disk is full");
  assert.equal(dotted.return_value.output, "renamed fine");
  assert.equal(nope.return_value.is_error, true);
  assert.match(nope.return_value.message, /Tool `nope` not found/);
});

test("McpToolset answers by SimpleToolset's rules: an unknown tool, arguments that are not JSON, missing arguments as {}", async () => {
  const mcp = await k.McpToolset.fromClient(await connect());
  const seen = [];
  const simple = new k.SimpleToolset([{ name: "echo", parameters: { type: "object", properties: { text: { type: "string" } } }, handler: (args) => (seen.push(args), "ok") }]);
  const raw = (id, name, args) => `tool_call: ${JSON.stringify({ id, name, ...(args === undefined ? {} : { arguments: args }) })}`;
  const script = [raw("c1", "nope", "{}"), raw("c2", "echo", "{not json"), raw("c3", "picture")].join("\n");
  const [m1, m2, m3] = await runStep(mcp, script);
  const [s1, s2] = await runStep(simple, script);
  assert.deepEqual(m1.return_value, s1.return_value, "one wording for an unknown tool");
  assert.match(m1.return_value.message, /Tool `nope` not found/);
  assert.deepEqual(m2.return_value, s2.return_value, "one wording for arguments that are not JSON");
  assert.match(m2.return_value.message, /^Error parsing JSON arguments/);
  assert.equal(m3.return_value.is_error, false, "a call without arguments reached the server as {}");
  assert.equal(m3.return_value.output[0].text, "a red dot");
  // The same calls through each toolset's own handle (no engine in between).
  const direct = (name, args) => ({ id: "d1", type: "function", function: { name, arguments: args } });
  assert.deepEqual(await mcp.handle(direct("nope", "{}"), {}), await simple.handle(direct("nope", "{}"), {}));
  assert.deepEqual(await mcp.handle(direct("picture", "{not json"), {}), await simple.handle(direct("echo", "{not json"), {}));
  assert.equal((await mcp.handle(direct("picture", ""), {})).return_value.output[0].text, "a red dot", "empty arguments mean {}");
  await simple.handle(direct("echo", ""), {});
  assert.deepEqual(seen.at(-1), {}, "and the same for a SimpleToolset");
  // A tool without a schema gets the core's default parameters, as a SimpleToolset's does.
  const plain = new k.SimpleToolset([{ name: "x", handler: () => "" }]);
  assert.deepEqual(mcp.tools.find((t) => t.name === "fail").parameters, plain.tools[0].parameters);
});

test("McpToolset: an abort reaches the server as MCP cancellation; a per-call timeout is an error result", async () => {
  const tools = await k.McpToolset.fromClient(await connect());
  const ac = new AbortController();
  const before = { ...server.state };
  const stepping = runStep(tools, call("c1", "slow", { ms: 30_000 }), { signal: ac.signal });
  for (let i = 0; i < 500 && server.state.slowStarted === before.slowStarted; i++) await new Promise((r) => setTimeout(r, 10));
  ac.abort(new Error("stop"));
  await assert.rejects(stepping, /stop/);
  for (let i = 0; i < 500 && server.state.cancelled === before.cancelled; i++) await new Promise((r) => setTimeout(r, 10));
  assert.equal(server.state.cancelled, before.cancelled + 1, "the server's handler saw its signal abort (notifications/cancelled)");

  const timed = await k.McpToolset.fromClient(await connect(), { timeoutMs: 150 });
  const [r] = await runStep(timed, call("c2", "slow", { ms: 30_000 }));
  assert.equal(r.return_value.is_error, true);
  assert.match(r.return_value.message, /timed out after 150 ms/);
  for (let i = 0; i < 500 && server.state.cancelled < before.cancelled + 2; i++) await new Promise((r) => setTimeout(r, 10));
  assert.equal(server.state.cancelled, before.cancelled + 2, "a timed-out call is cancelled on the server too");
});

test("McpToolset: after notifications/tools/list_changed the next step sends the new list to the model and can call it", async () => {
  let changed;
  const seen = new Promise((r) => (changed = r));
  const tools = await k.McpToolset.fromClient(await connect(), { onToolsChanged: (list) => list.some((t) => t.name === "late") && changed() });
  assert.ok(!tools.tools.some((t) => t.name === "late"));
  const [added] = await runStep(tools, call("c1", "add_tool"));
  assert.equal(added.return_value.output, "added");
  await seen; // the server's notification, then the list fetched again
  const llm = await startMockServer();
  try {
    llm.respond({ steps: [toolStart(0, "c2", "late", "{}"), finish("tool_calls"), done()] });
    const provider = new k.OpenAIChatProvider({ model: "m", apiKey: "sk-test-0123456789", baseUrl: llm.baseUrl });
    const r = await k.step(provider, "", tools, [{ role: "user", content: "go" }]);
    assert.ok(llm.requests.at(-1).body.tools.some((t) => t.function.name === "late"), "the model was told of the new tool");
    assert.equal((await r.toolResults())[0].return_value.output, "late and here");
  } finally {
    await llm.close();
  }
});
