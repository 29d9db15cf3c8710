// A real MCP server for the tests: the SDK's own `McpServer` over Streamable HTTP on 127.0.0.1
// (one server and transport per MCP session), with CORS for a page on another origin (the
// session id exposed, as a browser client needs). `node tests/js/mcp-server.mjs` runs it alone
// and prints its URL.
import { createServer } from "node:http";
import { randomUUID } from "node:crypto";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";

const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

/** The tools every session's server has; `state` records what the tools saw. */
function makeServer(state) {
  const server = new McpServer({ name: "kosong-test-server", version: "1.0.0" }, { capabilities: { tools: { listChanged: true } } });
  server.registerTool("echo", { description: "Echoes the text.", inputSchema: { text: z.string() } }, async ({ text }) => ({ content: [{ type: "text", text: `echo: ${text}` }] }));
  server.registerTool("picture", { description: "A tiny picture and its caption." }, async () => ({
    content: [{ type: "text", text: "a red dot" }, { type: "image", data: PNG, mimeType: "image/png" }],
  }));
  server.registerTool("readme", { description: "An embedded resource and a link." }, async () => ({
    content: [
      { type: "resource", resource: { uri: "file:///README.md", mimeType: "text/markdown", text: "# Hello" } },
      { type: "resource_link", uri: "file:///LICENSE", name: "LICENSE", mimeType: "text/plain" },
    ],
  }));
  // With an output schema: the client validates the structured result (Ajv by default, which
  // compiles with `new Function`; in workerd the cfworker validator).
  server.registerTool("measure", { description: "A temperature, structured.", inputSchema: { city: z.string() }, outputSchema: { city: z.string(), celsius: z.number() } }, async ({ city }) => ({
    content: [{ type: "text", text: `${city}: 21.5 °C` }],
    structuredContent: { city, celsius: 21.5 },
  }));
  server.registerTool("fail", { description: "Always fails." }, async () => ({ isError: true, content: [{ type: "text", text: "the disk is full" }] }));
  server.registerTool("slow", { description: "Waits until cancelled, or ms." , inputSchema: { ms: z.number() } }, async ({ ms }, extra) => {
    state.slowStarted++;
    await new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      extra.signal.addEventListener("abort", () => {
        state.cancelled++;
        clearTimeout(t);
        resolve();
      });
    });
    return { content: [{ type: "text", text: "finished" }] };
  });
  server.registerTool("dotted.name/v2", { description: "A name the providers refuse as it is." }, async () => ({ content: [{ type: "text", text: "renamed fine" }] }));
  server.registerTool("add_tool", { description: "Adds a tool `late` to this server (the list changes)." }, async () => {
    server.registerTool("late", { description: "Added later." }, async () => ({ content: [{ type: "text", text: "late and here" }] }));
    return { content: [{ type: "text", text: "added" }] };
  });
  return server;
}

/**
 * The server on loopback HTTP. `make(state)` builds each session's server (default: the tools
 * above); `startMcpServer((state) => hostile(state))` serves another, e.g. a low-level `Server`
 * that answers `tools/list` as a hostile server does. `servers` holds each session's server.
 */
export async function startMcpServer(make = makeServer) {
  const state = { slowStarted: 0, cancelled: 0, sessions: 0, servers: [] };
  const transports = new Map();
  const cors = {
    "access-control-allow-origin": "*",
    "access-control-allow-methods": "GET, POST, DELETE, OPTIONS",
    "access-control-allow-headers": "content-type, mcp-session-id, mcp-protocol-version, last-event-id, authorization",
    "access-control-expose-headers": "mcp-session-id, mcp-protocol-version",
  };
  const http = createServer(async (req, res) => {
    for (const [k, v] of Object.entries(cors)) res.setHeader(k, v);
    if (req.method === "OPTIONS") return res.writeHead(204).end();
    let body;
    if (req.method === "POST") {
      let text = "";
      for await (const c of req) text += c;
      body = text ? JSON.parse(text) : undefined;
    }
    const id = req.headers["mcp-session-id"];
    let transport = id ? transports.get(id) : undefined;
    if (!transport) {
      if (id || body?.method !== "initialize") return res.writeHead(400, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message: "no such session" }, id: null }));
      transport = new StreamableHTTPServerTransport({ sessionIdGenerator: randomUUID, onsessioninitialized: (sid) => transports.set(sid, transport) });
      state.sessions++;
      const server = make(state);
      state.servers.push(server);
      await server.connect(transport);
    }
    await transport.handleRequest(req, res, body);
  });
  await new Promise((r) => http.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${http.address().port}/mcp`,
    state,
    async close() {
      for (const t of transports.values()) await t.close().catch(() => {});
      http.closeAllConnections?.();
      await new Promise((r) => http.close(r));
    },
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const s = await startMcpServer();
  console.log(s.url);
}
