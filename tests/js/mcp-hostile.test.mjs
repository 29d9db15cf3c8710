// McpToolset against a hostile MCP server: the SDK's low-level `Server` over Streamable HTTP on
// 127.0.0.1, whose `tools/list` answers late, out of order, with colliding names, with 200,000
// tools on a page, or with a cursor that never ends. The toolset stays correct, bounded and says
// what it cut.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import * as k from "kosong-wasm";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { startMcpServer } from "./mcp-server.mjs";

const open = [];
after(async () => {
  for (const c of open) await c.close().catch(() => {});
});

/** A server whose `tools/list` is `list(n, cursor)` (n: the how-manyth listing) and whose calls echo their name. */
async function hostile(list) {
  let listings = 0;
  const http = await startMcpServer(() => {
    const server = new Server({ name: "hostile", version: "1.0.0" }, { capabilities: { tools: { listChanged: true } } });
    server.setRequestHandler(ListToolsRequestSchema, async (req) => list(++listings, req.params?.cursor));
    server.setRequestHandler(CallToolRequestSchema, async (req) => {
      if (req.params.name === "slowpoke") throw new Error("Request timeout while waiting");
      return { content: [{ type: "text", text: `ran ${req.params.name}` }] };
    });
    return server;
  });
  open.push(http);
  const client = new Client({ name: "kosong-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(http.url)));
  open.push(client);
  return { client, http, server: () => http.state.servers[0] };
}
const tool = (name) => ({ name, inputSchema: { type: "object" } });
const callOf = (id, name) => `tool_call: ${JSON.stringify({ id, name, arguments: "{}" })}`;
const run = async (toolset, name) => (await (await k.step(new k.ScriptedProvider([callOf("c1", name)]), "", toolset, [])).toolResults())[0].return_value;
const wait = (ms) => new Promise((r) => setTimeout(r, ms));

test("two list_changed in a row, the first re-list answering late: the last listing wins and its tool can be called", async () => {
  const { client, server } = await hostile(async (n) => {
    if (n === 2) await wait(400); // the first re-list answers after the second
    return { tools: [tool(n === 1 ? "tool_v0" : n === 2 ? "tool_v1" : "tool_v2")] };
  });
  const changes = [];
  const toolset = await k.McpToolset.fromClient(client, { onToolsChanged: (l) => changes.push(l.map((t) => t.name)) });
  await server().sendToolListChanged();
  await wait(50);
  await server().sendToolListChanged();
  await wait(700);
  assert.deepEqual(toolset.tools.map((t) => t.name), ["tool_v2"]);
  assert.deepEqual(changes.at(-1), ["tool_v2"], `changes: ${JSON.stringify(changes)}`);
  assert.equal((await run(toolset, "tool_v2")).output, "ran tool_v2");
});

test("names that collide once made valid map to the same server tool whatever order the server lists them in, and the collision is reported", async () => {
  const orders = [["a.b", "a_b", "a/b"], ["a/b", "a_b", "a.b"]];
  const { client, server } = await hostile(async (n) => ({ tools: orders[Math.min(n, 2) - 1].map(tool) }));
  const warnings = [];
  const toolset = await k.McpToolset.fromClient(client, { logger: { warn: (m) => warnings.push(m) } });
  const first = Object.fromEntries(await Promise.all(toolset.tools.map(async (t) => [t.name, (await run(toolset, t.name)).output])));
  await server().sendToolListChanged();
  await wait(300);
  const second = Object.fromEntries(await Promise.all(toolset.tools.map(async (t) => [t.name, (await run(toolset, t.name)).output])));
  assert.deepEqual(second, first, "each name still reaches the same server tool");
  assert.equal(first.a_b, "ran a_b", "the name that needed no change keeps it");
  assert.equal(Object.keys(first).length, 3, "none dropped");
  assert.ok(warnings.some((w) => /collide/.test(w)), warnings.join("\n"));
});

test("200,000 tools on one page are listed without overflowing the stack, capped at 10,000 with a warning; 2,000 colliding names are all kept", async () => {
  const { client } = await hostile(async () => ({ tools: Array.from({ length: 200_000 }, (_, i) => tool(`t.${i}`)).concat(Array.from({ length: 2000 }, (_, i) => tool(`t_${i}`))) }));
  const warnings = [];
  const toolset = await k.McpToolset.fromClient(client, { logger: { warn: (m) => warnings.push(m) } });
  assert.equal(toolset.tools.length, 10_000);
  assert.ok(warnings.some((w) => /more than 10000 tools/.test(w)), warnings.join("\n"));
  const { client: c2 } = await hostile(async () => ({ tools: Array.from({ length: 1000 }, (_, i) => [tool(`c.${i}`), tool(`c_${i}`)]).flat() }));
  const t2 = await k.McpToolset.fromClient(c2, { logger: { warn: (m) => warnings.push(m) } });
  assert.equal(t2.tools.length, 2000, "every colliding name is kept, told apart");
  assert.equal(new Set(t2.tools.map((t) => t.name)).size, 2000);
});

test("a cursor that never ends is cut at 1,000 pages with a warning; a timeout without timeoutMs says whose it was", async () => {
  const { client } = await hostile(async (n, cursor) => ({ tools: cursor ? [] : [tool("slowpoke")], nextCursor: `page-${Number(String(cursor ?? "page-0").slice(5)) + 1}` }));
  const warnings = [];
  const toolset = await k.McpToolset.fromClient(client, { logger: { warn: (m) => warnings.push(m) } });
  assert.deepEqual(toolset.tools.map((t) => t.name), ["slowpoke"]);
  assert.ok(warnings.some((w) => /did not end after 1000 pages/.test(w)), warnings.join("\n"));
  const rv = await run(toolset, "slowpoke");
  assert.equal(rv.is_error, true);
  assert.doesNotMatch(rv.message, /undefined/);
  assert.match(rv.message, /timed out \(the MCP client's own timeout\)/);
});
