// A two-step agent turn with a tool, printing the wire. Runs as is (a scripted model);
// swap in `new OpenAIChatProvider({ model, apiKey })` for a real one.
import { Agent, ScriptedProvider, SimpleToolset, runSoul } from "kosong-wasm";

const provider = new ScriptedProvider([
  'text: Let me add them.\ntool_call: {"id": "c1", "name": "plus", "arguments": "{\\"a\\": 2, \\"b\\": 40}"}',
  "text: 2 + 40 = 42.",
]);
const tools = new SimpleToolset([{
  name: "plus", description: "Adds two numbers",
  parameters: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } } },
  handler: ({ a, b }) => String(a + b),
}]);
const agent = new Agent({ provider, systemPrompt: "You are a calculator.", toolset: tools });

await runSoul(agent, "What is 2 + 40?", async (wire) => {
  for await (const msg of wire.uiSide({ merge: true })) console.log(msg.type, JSON.stringify(msg.payload));
}, new AbortController().signal);
