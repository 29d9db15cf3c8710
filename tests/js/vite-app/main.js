// A page bundled by Vite that uses kosong-wasm from node_modules: init() must find the .wasm.
import { init, ScriptedProvider, SimpleToolset, step } from "kosong-wasm";

try {
  await init();
  const tools = new SimpleToolset([{ name: "add", description: "", parameters: {}, handler: ({ a, b }) => String(a + b) }]);
  const r = await step(new ScriptedProvider(['tool_call: {"id": "c1", "name": "add", "arguments": "{\\"a\\": 2, \\"b\\": 3}"}']), "", tools, []);
  document.title = `result: ${(await r.toolResults())[0].return_value.output}`;
} catch (e) {
  document.title = `error: ${e}`;
}
