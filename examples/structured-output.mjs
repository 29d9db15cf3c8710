// Structured output: the answer as JSON matching a schema, its partial object printed as it fills
// in, then the parsed value. Runs as is (a scripted model streaming the JSON in pieces); swap in
// `new OpenAIChatProvider({ model, apiKey })` (or any provider) for a real one.
import { ScriptedProvider, generate } from "kosong-wasm";

const provider = new ScriptedProvider([
  ['{"city": "Pa', 'ris", "days": [{"day": "Mon", "hi', 'gh": 21}, {"day": "Tu', 'e", "high": 18}], "summary": "Mild', ', then cooler."}']
    .map((piece) => `text: ${piece}`)
    .join("\n"),
]);
const schema = {
  type: "object",
  properties: {
    city: { type: "string" },
    days: { type: "array", items: { type: "object", properties: { day: { type: "string" }, high: { type: "number" } }, required: ["day", "high"] } },
    summary: { type: "string" },
  },
  required: ["city", "days", "summary"],
};

const { output } = await generate(provider, "Answer as JSON.", [], [{ role: "user", content: "Two days of weather in Paris." }], {
  output: { schema, name: "forecast" },
  onPartialOutput: (partial) => console.log("partial:", JSON.stringify(partial)),
});
console.log("output:", JSON.stringify(output));
