// A Worker that uses an MCP server's tools through the official SDK client (bundled by wrangler,
// run in workerd): `GET /?mcp=<url>` lists the server's tools and runs one step calling three.
import * as kosong from "kosong-wasm";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CfWorkerJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/cfworker-provider.js";

const call = (id, name, args = {}) => `tool_call: ${JSON.stringify({ id, name, arguments: JSON.stringify(args) })}`;

export default {
  async fetch(request) {
    const url = new URL(request.url);
    const validator = url.searchParams.get("validator") !== "default";
    // Workers refuse `new Function`, which the SDK's default (Ajv) validator compiles with.
    const client = new Client({ name: "kosong-worker", version: "1.0.0" }, validator ? { jsonSchemaValidator: new CfWorkerJsonSchemaValidator() } : {});
    try {
      await client.connect(new StreamableHTTPClientTransport(new URL(url.searchParams.get("mcp"))));
      const toolset = await kosong.McpToolset.fromClient(client, { prefix: "srv_" });
      const script = [call("c1", "srv_echo", { text: "from workerd" }), call("c2", "srv_measure", { city: "Oslo" }), call("c3", "srv_fail")].join("\n");
      const r = await kosong.step(new kosong.ScriptedProvider([script]), "", toolset, [{ role: "user", content: "go" }]);
      const results = await r.toolResults();
      return Response.json({ tools: toolset.tools.map((t) => t.name), results: results.map((x) => x.return_value) });
    } catch (e) {
      return Response.json({ error: `${e?.name}: ${e?.message}` }, { status: 500 });
    } finally {
      await client.close().catch(() => {});
    }
  },
};
