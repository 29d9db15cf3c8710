// McpToolset in a browser: the SDK's client on a page, an MCP server on another origin (CORS,
// with Mcp-Session-Id exposed). `?mcp=<url>`; the title says the results.
import { init, McpToolset, ScriptedProvider, step } from "kosong-wasm";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const call = (id, name, args = {}) => `tool_call: ${JSON.stringify({ id, name, arguments: JSON.stringify(args) })}`;
try {
  await init();
  const client = new Client({ name: "kosong-page", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(new URLSearchParams(location.search).get("mcp"))));
  const tools = await McpToolset.fromClient(client);
  const r = await step(new ScriptedProvider([[call("c1", "echo", { text: "from the page" }), call("c2", "picture")].join("\n")]), "", tools, []);
  const [echo, picture] = await r.toolResults();
  document.title = `result: ${echo.return_value.output} | ${picture.return_value.output[1].image_url.url.slice(0, 22)}`;
  await client.close();
} catch (e) {
  document.title = `error: ${e}`;
}
