// An agent whose tools come from an MCP server, through the official SDK's client. Runs as is:
// the server is the SDK's McpServer in the same process (an in-memory transport) and the model
// is scripted. For a real server, connect the client with
// `new StreamableHTTPClientTransport(new URL("https://…/mcp"))` instead.
import { Agent, McpToolset, ScriptedProvider, runSoul } from "kosong-wasm";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { z } from "zod";

const server = new McpServer({ name: "weather", version: "1.0.0" });
server.registerTool("forecast", { description: "Tomorrow's weather in a city", inputSchema: { city: z.string() } }, async ({ city }) => ({
  content: [{ type: "text", text: `${city}: sunny, 24°C` }],
}));
const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
await server.connect(serverSide);
const client = new Client({ name: "mcp-tools-example", version: "1.0.0" });
await client.connect(clientSide);

const toolset = await McpToolset.fromClient(client, { prefix: "weather_", timeoutMs: 10_000 });
console.log("tools:", toolset.tools.map((t) => t.name).join(", "));
const provider = new ScriptedProvider([
  'tool_call: {"id": "c1", "name": "weather_forecast", "arguments": "{\\"city\\": \\"Paris\\"}"}',
  "text: Tomorrow in Paris: sunny, 24°C.",
]);
const agent = new Agent({ provider, systemPrompt: "You answer with the forecast tool.", toolset });
await runSoul(agent, "Weather in Paris tomorrow?", async (wire) => {
  for await (const msg of wire.uiSide({ merge: true })) {
    if (msg.type === "ToolResult") console.log("result:", msg.payload.return_value.output);
    if (msg.type === "ContentPart") console.log("answer:", msg.payload.text);
  }
}, new AbortController().signal);
await client.close();
