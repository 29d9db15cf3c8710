// A Worker that traces a step and an agent turn with @opentelemetry/sdk-trace-base's in-memory
// exporter (bundled by wrangler, run in workerd): `GET /?llm=<base url>` streams both answers from
// the loopback OpenAI-compatible server the test scripts, and answers with the finished spans.
import * as kosong from "kosong-wasm";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";

export default {
  async fetch(request) {
    const exporter = new InMemorySpanExporter();
    const tracer = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }).getTracer("kosong-worker");
    const baseUrl = new URL(request.url).searchParams.get("llm");
    const provider = new kosong.OpenAIChatProvider({ model: "mock-model", apiKey: "sk-worker-telemetry", baseUrl });
    const toolset = new kosong.SimpleToolset([{ name: "add", parameters: { type: "object" }, handler: ({ a, b }) => String(a + b) }]);
    try {
      const r = await kosong.step(provider, "", toolset, [{ role: "user", content: "1+2?" }], { telemetry: { tracer } });
      await r.toolResults();
      const agent = new kosong.Agent({ name: "worker-agent", provider, toolset, telemetry: { tracer } });
      await kosong.runSoul(agent, "2+3?", async (w) => { for await (const _ of w.uiSide({ merge: true })); }, new AbortController().signal);
      const spans = exporter.getFinishedSpans().map((s) => ({
        name: s.name,
        kind: s.kind,
        id: s.spanContext().spanId,
        trace: s.spanContext().traceId,
        parent: s.parentSpanContext?.spanId ?? null,
        start: s.startTime[0] * 1e9 + s.startTime[1],
        end: s.endTime[0] * 1e9 + s.endTime[1],
        attributes: s.attributes,
      }));
      return Response.json({ spans, history: agent.context.history.map((m) => m.role) });
    } catch (e) {
      return Response.json({ error: `${e?.name}: ${e?.message}` }, { status: 500 });
    }
  },
};
