// The peer Worker of the startup bench: what a user of Cloudflare's Agents SDK writes for the chat
// examples/worker serves — an AIChatAgent per session, the AI SDK's streamText over an
// OpenAI-compatible model, and the same three tools (a clock, an adder, an email that asks first).
import { AIChatAgent } from "@cloudflare/ai-chat";
import { routeAgentRequest } from "agents";
import { convertToModelMessages, stepCountIs, streamText, tool } from "ai";
import { createOpenAI } from "@ai-sdk/openai";
import { z } from "zod";

const tools = {
  clock: tool({ description: "The current time (UTC)", inputSchema: z.object({}), execute: async () => new Date().toISOString() }),
  add: tool({ description: "Adds two numbers", inputSchema: z.object({ a: z.number(), b: z.number() }), execute: async ({ a, b }) => String(a + b) }),
  send_email: tool({
    description: "Sends an email (asks the user first)",
    inputSchema: z.object({ to: z.string(), body: z.string() }),
    needsApproval: true,
    execute: async ({ to }) => `sent to ${to}`,
  }),
};

export class Chat extends AIChatAgent {
  async onChatMessage() {
    const openai = createOpenAI({ apiKey: this.env.LLM_API_KEY, baseURL: this.env.LLM_BASE_URL });
    const result = streamText({
      model: openai.chat(this.env.LLM_MODEL ?? "gpt-4.1-mini"),
      system: "You are a helpful assistant.",
      messages: await convertToModelMessages(this.messages),
      tools,
      stopWhen: stepCountIs(8),
    });
    return result.toUIMessageStreamResponse();
  }
}

export default {
  async fetch(request, env) {
    return (await routeAgentRequest(request, env)) ?? new Response("not found", { status: 404 });
  },
};
