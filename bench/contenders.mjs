// Each contender consumes one model answer through a custom `fetch` (or a base URL) the way
// its users would, and returns what it assembled, so every contender is checked to have done
// the whole job. Tool contenders run real handlers and note when each one started.
import { createParser } from "eventsource-parser";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { streamText, tool as aiTool, jsonSchema } from "ai";
import { createOpenAI } from "@ai-sdk/openai";
import { createAnthropic } from "@ai-sdk/anthropic";
import { Agent as OAAgent, run as oaRun, tool as oaTool, OpenAIChatCompletionsModel, setTracingDisabled } from "@openai/agents";
import * as kosong from "kosong-wasm";

setTracingDisabled(true);
const KEY = "sk-bench";
const user = [{ role: "user", content: "go" }];

/** The AI SDK's text of one answer from `model`, read from its full stream. */
async function aiSdkText(model) {
  const r = streamText({ model, messages: user, maxRetries: 0 });
  let text = "";
  for await (const p of r.fullStream) if (p.type === "text-delta") text += p.text;
  return text;
}

/** Text contenders for one format: name → async ({fetch, baseUrl}) => assembled text. */
export function textContenders(format) {
  const common = {
    "read the body only (floor)": async ({ fetch, baseUrl }) => {
      const res = await fetch(`${baseUrl}/x`, { method: "POST", body: "{}" });
      const reader = res.body.getReader();
      let n = 0;
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return n;
        n += value.length;
      }
    },
    "eventsource-parser + JSON.parse": async ({ fetch, baseUrl }) => {
      const res = await fetch(`${baseUrl}/x`, { method: "POST", body: "{}" });
      let text = "";
      const parser = createParser({
        onEvent(ev) {
          if (ev.data === "[DONE]") return;
          const v = JSON.parse(ev.data);
          if (format === "openai") text += v.choices?.[0]?.delta?.content ?? "";
          else if (format === "responses") text += v.type === "response.output_text.delta" ? v.delta : "";
          else if (format === "gemini") for (const p of v.candidates?.[0]?.content?.parts ?? []) text += p.text ?? "";
          else if (v.type === "content_block_delta" && v.delta.type === "text_delta") text += v.delta.text;
        },
      });
      const dec = new TextDecoder();
      for await (const chunk of res.body) parser.feed(dec.decode(chunk, { stream: true }));
      return text;
    },
  };
  const kosongProvider = ({ fetch, baseUrl }) => {
    const make = { openai: kosong.OpenAIChatProvider, anthropic: kosong.AnthropicProvider, responses: kosong.OpenAIResponsesProvider, gemini: kosong.GeminiProvider }[format];
    return new make({ model: format === "gemini" ? "gemini-2.5-flash" : "bench-model", apiKey: KEY, baseUrl, fetch });
  };
  const kosongText = (r) => (typeof r.message.content === "string" ? r.message.content : r.message.content.map((p) => p.text ?? "").join(""));
  const ours = {
    "kosong-wasm generate": async (io) => kosongText(await kosong.generate(kosongProvider(io), "", [], user)),
    "kosong-wasm generate + onMessagePart": async (io) => {
      let text = "";
      const r = await kosong.generate(kosongProvider(io), "", [], user, { onMessagePart: (p) => void (text += p.text ?? "") });
      return text === kosongText(r) ? text : "mismatch";
    },
  };
  const peers =
    format === "responses"
      ? {
          "openai SDK responses.create({stream: true})": async ({ fetch, baseUrl }) => {
            const client = new OpenAI({ apiKey: KEY, baseURL: baseUrl, fetch, maxRetries: 0 });
            let text = "";
            const stream = await client.responses.create({ model: "gpt-5-mini", input: "go", stream: true });
            for await (const e of stream) if (e.type === "response.output_text.delta") text += e.delta;
            return text;
          },
          "AI SDK streamText fullStream": ({ fetch, baseUrl }) => aiSdkText(createOpenAI({ apiKey: KEY, baseURL: baseUrl, fetch }).responses("gpt-5-mini")),
        }
      : format === "gemini"
      ? {}
      : format === "openai"
      ? {
          "openai SDK create({stream: true})": async ({ fetch, baseUrl }) => {
            const client = new OpenAI({ apiKey: KEY, baseURL: baseUrl, fetch, maxRetries: 0 });
            let text = "";
            const stream = await client.chat.completions.create({ model: "gpt-4.1-mini", messages: user, stream: true });
            for await (const c of stream) text += c.choices[0]?.delta?.content ?? "";
            return text;
          },
          "@openai/agents run (stream)": async ({ fetch, baseUrl }) => {
            const client = new OpenAI({ apiKey: KEY, baseURL: baseUrl, fetch, maxRetries: 0 });
            const agent = new OAAgent({ name: "bench", instructions: "", model: new OpenAIChatCompletionsModel(client, "gpt-4.1-mini") });
            const result = await oaRun(agent, "go", { stream: true });
            let text = "";
            for await (const ev of result) if (ev.type === "raw_model_stream_event" && ev.data.type === "output_text_delta") text += ev.data.delta;
            await result.completed;
            return text;
          },
          "AI SDK streamText fullStream": ({ fetch, baseUrl }) => aiSdkText(createOpenAI({ apiKey: KEY, baseURL: baseUrl, fetch }).chat("gpt-4.1-mini")),
        }
      : {
          "@anthropic-ai/sdk create({stream: true})": async ({ fetch, baseUrl }) => {
            const client = new Anthropic({ apiKey: KEY, baseURL: baseUrl.replace(/\/v1$/, ""), fetch, maxRetries: 0 });
            let text = "";
            const stream = await client.messages.create({ model: "claude-sonnet-4-6", max_tokens: 100, messages: user, stream: true });
            for await (const e of stream) if (e.type === "content_block_delta" && e.delta.type === "text_delta") text += e.delta.text;
            return text;
          },
          "AI SDK streamText fullStream": ({ fetch, baseUrl }) => aiSdkText(createAnthropic({ apiKey: KEY, baseURL: baseUrl, fetch })("claude-sonnet-4-6")),
        };
  return { ...common, ...peers, ...ours };
}

/**
 * Tool contenders: name → async ({fetch, baseUrl, calls, onStart}) => number of results.
 * `onStart(id)` is called by each tool handler as it begins.
 */
/**
 * The bare JavaScript baseline for tool calls: eventsource-parser + `JSON.parse` per event, the
 * arguments gathered per call, each call's handler run once the stream says the call is over
 * (Anthropic: `content_block_stop`; Chat Completions: the next call's start or the finish) —
 * the least a hand-written client does. `handler(args, id)` is each tool.
 */
export async function bareToolStream(format, { fetch, baseUrl }, handler) {
  const res = await fetch(`${baseUrl}/x`, { method: "POST", body: "{}" });
  const calls = new Map();
  const runs = [];
  const start = (c) => {
    if (c.started) return;
    c.started = true;
    runs.push(Promise.resolve(handler(JSON.parse(c.args || "{}"), c.id)));
  };
  const parser = createParser({
    onEvent(ev) {
      if (ev.data === "[DONE]") return;
      const v = JSON.parse(ev.data);
      if (format === "openai") {
        const ch = v.choices?.[0];
        for (const t of ch?.delta?.tool_calls ?? []) {
          let c = calls.get(t.index);
          if (!c) {
            for (const prev of calls.values()) if (prev.args) try { JSON.parse(prev.args); start(prev); } catch {}
            calls.set(t.index, (c = { id: t.id, args: "" }));
          }
          c.args += t.function?.arguments ?? "";
        }
        if (ch?.finish_reason) for (const c of calls.values()) start(c);
      } else if (v.type === "content_block_start" && v.content_block.type === "tool_use") {
        calls.set(v.index, { id: v.content_block.id, args: "" });
      } else if (v.type === "content_block_delta" && v.delta.type === "input_json_delta") {
        calls.get(v.index).args += v.delta.partial_json;
      } else if (v.type === "content_block_stop" && calls.has(v.index)) {
        start(calls.get(v.index));
      }
    },
  });
  const dec = new TextDecoder();
  for await (const chunk of res.body) parser.feed(dec.decode(chunk, { stream: true }));
  return Promise.all(runs);
}

export function toolContenders(format) {
  const schema = { type: "object", properties: { query: { type: "string" }, items: { type: "array" } }, additionalProperties: true };
  const out = {
    "eventsource-parser + JSON.parse": async ({ fetch, baseUrl, onStart }) =>
      (await bareToolStream(format, { fetch, baseUrl }, (args, id) => (onStart(id), `ok ${args.items.length}`))).length,
    "kosong-wasm step": async ({ fetch, baseUrl, calls, onStart }) => {
      const provider = format === "openai"
        ? new kosong.OpenAIChatProvider({ model: "gpt-4.1-mini", apiKey: KEY, baseUrl, fetch })
        : new kosong.AnthropicProvider({ model: "claude-sonnet-4-6", apiKey: KEY, baseUrl, fetch });
      const tools = new kosong.SimpleToolset(calls.map((c) => ({ name: c.name, description: "", parameters: schema, handler: (args, ctx) => (onStart(ctx.toolCallId), `ok ${args.items.length}`) })));
      const r = await kosong.step(provider, "", tools, user);
      return (await r.toolResults()).filter((x) => !x.return_value.is_error).length;
    },
    "AI SDK streamText (tools with execute)": async ({ fetch, baseUrl, calls, onStart }) => {
      const model = format === "openai" ? createOpenAI({ apiKey: KEY, baseURL: baseUrl, fetch }).chat("gpt-4.1-mini") : createAnthropic({ apiKey: KEY, baseURL: baseUrl, fetch })("claude-sonnet-4-6");
      const tools = Object.fromEntries(calls.map((c) => [c.name, aiTool({ description: "", inputSchema: jsonSchema(schema), execute: async (args, { toolCallId }) => (onStart(toolCallId), `ok ${args.items.length}`) })]));
      const r = streamText({ model, messages: user, tools, maxRetries: 0 });
      let n = 0;
      for await (const p of r.fullStream) if (p.type === "tool-result") n++;
      return n;
    },
  };
  if (format === "openai") {
    out["@openai/agents run (stream)"] = async ({ fetch, baseUrl, calls, onStart }) => {
      const client = new OpenAI({ apiKey: KEY, baseURL: baseUrl, fetch, maxRetries: 0 });
      const tools = calls.map((c) => oaTool({ name: c.name, description: "", parameters: schema, strict: false, execute: async (args) => (onStart(c.id), `ok ${args.items.length}`) }));
      const agent = new OAAgent({ name: "bench", instructions: "", model: new OpenAIChatCompletionsModel(client, "gpt-4.1-mini"), tools });
      const result = await oaRun(agent, "go", { stream: true, maxTurns: 2 });
      let n = 0;
      for await (const ev of result) if (ev.type === "run_item_stream_event" && ev.name === "tool_output") n++;
      await result.completed;
      return n;
    };
  }
  return out;
}
