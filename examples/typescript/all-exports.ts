// Every export of the package (index.d.ts), used the way its contract says: checked with
// `tsc -p examples/typescript` (npm test runs it first, and again against the packed package in tests/js/packed.test.mjs).
import * as kosong from "kosong-wasm";
import {
  init, toolOk, toolError, SimpleToolset, OpenAIChatProvider, KimiProvider, AnthropicProvider,
  OpenAIResponsesProvider, GeminiProvider, ScriptedProvider, ChaosProvider, FallbackProvider, ChatProviderError,
  APIConnectionError, APITimeoutError, APIEmptyResponseError, APIStatusError, generate, step,
  Agent, runSoul, RunCancelled, MaxStepsReached, LLMNotSet, LLMNotSupported, Wire, WireRecorder,
  readWireRecord, closeInterruptedTurn, resumeSoul, unfinishedTurn, TurnNotRecovered, TurnTimeoutError, Context, memoryBytes, setMemoryBudget, memoryBudget, PartialJson, StepResult as StepResultClass, RepeatedToolCallError, QueueShutDown,
  McpToolset, UIMessageChunker, uiMessageStream, uiMessageStreamResponse, UI_MESSAGE_STREAM_HEADERS,
  Session, MemorySessionStore, FileSessionStore, IndexedDBSessionStore, SessionBusyError, SessionLockedError, SessionLimitError,
} from "kosong-wasm";
import type {
  Role, TextPart, ThinkPart, ImageURLPart, AudioURLPart, VideoURLPart, ContentPart, ToolCall, ToolCallPart,
  Message, StreamedMessagePart, TokenUsage, ThinkingEffort, ToolDefinition, ToolReturnValue, ToolResult,
  ToolContext, Tool, Toolset, StandardSchemaParameters, ChatProvider, HttpOptions, StepResult, Soul, StatusSnapshot, WireMessage, WireUISide, OtherWireMessage, TurnBeginPayload, StepRetryPayload, StatusUpdatePayload, ApprovalRequestPayload, NotificationPayload,
  PartialJsonEdit, JsonSchema, InferSchema, OutputOption, McpClientLike, UIMessageChunk,
  SessionStore, SessionOp, StoredSession, SessionEvent, TurnOutcome, AgentOptions,
} from "kosong-wasm";

/** A session in memory, a turn, its events from the start; and a store of one's own (an array of writes). */
export async function sessions(provider: ScriptedProvider): Promise<number> {
  const options: AgentOptions = { provider, systemPrompt: "terse" };
  const session: Session = await Session.open(new MemorySessionStore(), options, { maxTurns: 10, stallMs: 60_000 });
  const outcome: TurnOutcome = await session.send("hi");
  let n = 0;
  for await (const e of session.events({ after: 0 })) {
    const ev: SessionEvent = e;
    if ("end" in ev) break;
    n += ev.message.type.length;
  }
  await session.cancel();
  await session.close();
  const written: SessionOp[][] = [];
  const mine: SessionStore = {
    open: async (): Promise<StoredSession> => ({ context: [], events: [], meta: null }),
    write: async (ops: SessionOp[]) => void written.push(ops),
    close: async () => {},
  };
  const other = await Session.open(mine, options);
  await other.close();
  const refusals = [new SessionBusyError(), new SessionLockedError(), new SessionLimitError("x")];
  void [new FileSessionStore("./chat"), new IndexedDBSessionStore("chat", { wait: true }), refusals, session.history.length, session.running, await session.recovered];
  return n + (outcome.outcome === "done" ? 1 : 0) + written.length;
}

export async function main(): Promise<string> {
  await init();
  const role: Role = "user";
  const text: TextPart = { type: "text", text: "hi" };
  const think: ThinkPart = { type: "think", think: "hmm", encrypted: null };
  const image: ImageURLPart = { type: "image_url", image_url: { url: "data:image/png;base64,AA==" } };
  const audio: AudioURLPart = { type: "audio_url", audio_url: { url: "https://example.com/a.mp3", id: null } };
  const video: VideoURLPart = { type: "video_url", video_url: { url: "https://example.com/v.mp4" } };
  const parts: ContentPart[] = [text, think, image, audio, video];
  const call: ToolCall = { type: "function", id: "c1", function: { name: "add", arguments: '{"a":1,"b":2}' }, extras: null };
  const fragment: ToolCallPart = { type: "tool_call_part", arguments_part: "{}", tool_call_id: "c1" };
  const streamed: StreamedMessagePart[] = [text, call, fragment];
  const history: Message[] = [{ role, content: parts.slice(0, 1) }, { role: "assistant", content: "", tool_calls: [call] }];
  const effort: ThinkingEffort = "medium";

  const add: Tool = {
    name: "add",
    description: "Adds two numbers",
    parameters: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } } },
    handler: async (args: { a: number; b: number }, ctx: ToolContext) => {
      if (ctx.signal.aborted) return toolError({ message: "aborted", brief: "Aborted" });
      if (ctx.requestApproval && !(await ctx.requestApproval({ action: "add", description: "adds" }))) {
        return ctx.rejection?.() ?? toolError({ message: "refused", brief: "Refused" });
      }
      ctx.send?.({ type: "Note", payload: { text: "adding" } });
      return toolOk({ output: String(args.a + args.b), brief: "added" });
    },
  };
  // The AI SDK's names for the schema and the handler, with its `abortSignal`.
  const sdkShaped: Tool = {
    name: "echo",
    description: "Echoes.",
    inputSchema: { type: "object", properties: { text: { type: "string" } } },
    execute: (args: { text: string }, { abortSignal }) => (abortSignal.aborted ? "" : args.text),
  };
  // A Standard Schema's type reaches the handler (a stand-in for zod ≥ 4.2's, without the dependency).
  const cityOnly: StandardSchemaParameters<{ city: string }> = {
    "~standard": { version: 1, vendor: "example", validate: (v) => ({ value: v }) },
  };
  new SimpleToolset().add({ name: "weather", description: "", parameters: cityOnly, handler: (args) => args.city.toUpperCase() });
  // @ts-expect-error: the handler's arguments are the schema's type (`city` is a string)
  new SimpleToolset().add({ name: "weather", description: "", parameters: cityOnly, handler: (args) => args.city.toFixed() });
  // A JSON Schema written `as const` types the handler's arguments too (required keys required).
  const sumSchema = { type: "object", properties: { a: { type: "number" }, b: { type: "number" }, note: { type: "string" } }, required: ["a", "b"] } as const;
  new SimpleToolset().add({ name: "sum", description: "", parameters: sumSchema, handler: ({ a, b, note }) => `${a + b}${note?.trim() ?? ""}` });
  // @ts-expect-error: `a` is a number, not a string
  new SimpleToolset().add({ name: "sum", description: "", parameters: sumSchema, handler: ({ a }) => a.toUpperCase() });
  // Not `as const`: the schema's `type` is a string, and the arguments stay `any` (as before).
  new SimpleToolset().add({ name: "loose", description: "", parameters: { type: "object", properties: { q: { type: "string" } } }, handler: (args) => String(args.anything) });
  const definitions: ToolDefinition[] = new SimpleToolset([add, sdkShaped]).tools;
  const toolset: Toolset = new SimpleToolset([add], { validate: () => null }).add(add).remove("nothing");

  const http: HttpOptions = { apiKey: "k", baseUrl: "http://127.0.0.1:1/v1", headers: { "x-a": "b" }, fetch, timeoutMs: 1000 };
  const providers: ChatProvider[] = [
    new OpenAIChatProvider({ model: "m", ...http, maxTokens: 100, temperature: 0, reasoningKey: "reasoning_content", extraBody: {} }),
    new KimiProvider({ model: "kimi-k2", ...http, thinking: effort }),
    new AnthropicProvider({ model: "claude-sonnet-4-5", ...http, maxTokens: 1024, thinking: "low" }),
    new OpenAIResponsesProvider({ model: "gpt-5", ...http, reasoningEffort: "low" }),
    new GeminiProvider({ model: "gemini-2.5-flash", ...http, thinking: "high" }),
  ];
  const scripted = new ScriptedProvider(['tool_call: {"id": "c1", "name": "add", "arguments": "{\\"a\\": 1, \\"b\\": 2}"}', "text: 3"]);
  const chaos: ChatProvider = new ChaosProvider(scripted, { errorProbability: 0, errorTypes: [429], retryAfterS: 1, seed: 1, corruptToolCallProbability: 0, truncateStreamProbability: 0 });
  const thinking: ChatProvider = providers[0].withThinking("high");
  const fallback = new FallbackProvider([new ScriptedProvider(["error: 503"]), new ScriptedProvider(["text: backup"])], { fallbackOn: ["status", 401] });
  const answeredBy: ChatProvider = (await step(fallback, "", new SimpleToolset(), [])).provider;
  const member: readonly ChatProvider[] = fallback.providers;

  const out = await generate(new ScriptedProvider(["text: hello"]), "sys", definitions, [], {
    onMessagePart: (p: StreamedMessagePart) => void p,
    onToolCall: (c: ToolCall) => void c,
    signal: new AbortController().signal,
  });
  const usage: TokenUsage | null = out.usage;
  const result: StepResult = await step(new ScriptedProvider(['tool_call: {"id": "c2", "name": "add", "arguments": "{\\"a\\": 2, \\"b\\": 2}"}']), "sys", toolset, history, {
    onToolResult: (r: ToolResult) => void r,
  });
  const results: ToolResult[] = await result.toolResults();
  const next: Message[] = await result.messages();
  void next;

  // Structured output: the type comes from a const schema, or is given.
  const forecast = await generate(new ScriptedProvider(['text: {"city": "Paris", "days": [{"high": 21}]}']), "", [], [], {
    output: {
      schema: { type: "object", properties: { city: { type: "string" }, days: { type: "array", items: { type: "object", properties: { high: { type: "number" } }, required: ["high"] } }, note: { type: "string" } }, required: ["city", "days"] },
      name: "forecast",
      strict: true,
      validate: (_schema, v) => (typeof v === "object" ? null : "not an object"),
    },
    onPartialOutput: (v) => void v.days?.[0]?.high,
  });
  if (forecast.output) {
    const city: string = forecast.output.city;
    const high: number = forecast.output.days[0].high;
    const note: string | undefined = forecast.output.note;
    void [city, high, note];
  }
  interface Item { n: number }
  const listed = await step<Item[]>(new ScriptedProvider(['text: [{"n": 1}]']), "", new SimpleToolset(), [], {
    output: { schema: { type: "array" } },
    onOutputElement: (item: Item) => void item.n,
  });
  const items: Item[] | undefined = listed.output;
  const edits: PartialJsonEdit[] = new PartialJson().feed("{}");
  const previewed: unknown = PartialJson.applyEdits(undefined, edits);
  void [items, previewed];

  // MCP tools, and the UI message stream a useChat page reads.
  const mcpClient: McpClientLike = {
    listTools: async () => ({ tools: [{ name: "echo", description: "Echoes", inputSchema: { type: "object" } }] }),
    callTool: async () => ({ content: [{ type: "text", text: "hi" }] }),
  };
  const mcp: Toolset = await McpToolset.fromClient(mcpClient, { prefix: "srv_", timeoutMs: 5000, onToolsChanged: (t) => void t.length });
  const chunker = new UIMessageChunker({ messageId: "m1" });
  const chunks: UIMessageChunk[] = [...chunker.start(), ...chunker.push({ type: "TurnBegin", payload: {} }), ...chunker.end({ cancelled: true })];
  const uiAgent = new Agent({ provider: new ScriptedProvider(["text: hi"]), systemPrompt: "", toolset: mcp });
  const response: Response = uiMessageStreamResponse(uiMessageStream(uiAgent, "hi", new AbortController().signal, { messageId: "m2" }), { headers: UI_MESSAGE_STREAM_HEADERS });
  await response.text();
  void chunks;
  const value: ToolReturnValue = results[0].return_value;

  const context = new Context({ systemPrompt: "sys", sink: (line: string) => void line });
  const cp: number = context.checkpoint();
  context.revertTo(cp);
  const copy: Context = Context.fromJSONL(context.toJSONL());
  const agent = new Agent({ name: "a", provider: chaos, systemPrompt: "sys", toolset, context: copy, maxStepsPerTurn: 5, maxRetriesPerStep: 2, maxContextTokens: 100_000, capabilities: [], yolo: false });
  const soul: Soul = agent;
  // An agent as a tool: a sub-agent on the caller's provider.
  const helper = new Agent({ name: "explore", provider: null, systemPrompt: "You explore." });
  const asTool: Tool = helper.asTool({ description: "Explores.", maxDepth: 2, timeoutMs: 60_000 });
  new SimpleToolset([asTool]);
  const status: StatusSnapshot = soul.status;
  const lines: string[] = [];
  await runSoul(soul, "add 1 and 2", async (wire: Wire) => {
    const side: WireUISide = wire.uiSide({ merge: true });
    for await (const m of side) {
      const msg: WireMessage = m;
      // Narrowed on `type`, each payload is typed.
      if (msg.type === "ApprovalRequest") wire.respond(msg.payload.id, "approve");
      if (msg.type === "StatusUpdate") {
        const out: number | undefined = msg.payload.token_usage?.output;
        void out;
      }
      if (msg.type === "TurnBegin") {
        const begin: TurnBeginPayload = msg.payload;
        void begin.turn_id;
      }
      if (msg.type === "SubagentEvent") {
        const inner: WireMessage = msg.payload.event;
        const who: string = `${msg.payload.parent_tool_call_id} ${msg.payload.agent_id} ${msg.payload.subagent_type}`;
        void inner, who;
      }
      if (msg.type === "StepBegin") {
        // @ts-expect-error a step's number is a number, not a string: payloads are not `any`
        const n: string = msg.payload.n;
        void n;
      }
    }
  }, new AbortController().signal, { recorder: new WireRecorder((l: string) => void lines.push(l)) });
  // Messages of a kind of one's own: sent as they are, named to be read typed.
  type Progress = { type: "Progress"; payload: { pct: number } };
  await runSoul(soul, "again", async (wire: Wire) => {
    for await (const m of wire.uiSide<Progress>()) if (m.type === "Progress") { const pct: number = m.payload.pct; void pct; }
  }, new AbortController().signal);
  const own: OtherWireMessage = { type: "Progress", payload: { pct: 50 } };
  const retry: StepRetryPayload | null = null, status2: StatusUpdatePayload | null = null, asked: ApprovalRequestPayload | null = null, note: NotificationPayload | null = null;
  void [own, retry, status2, asked, note];
  const replayed: WireMessage[] = readWireRecord(lines.join("\n"));
  const closing: WireMessage[] = closeInterruptedTurn(replayed);
  // A turn whose process died, gone on with from its recording (none here: the turn above ended).
  const unfinished = unfinishedTurn(lines.join("\n"));
  if (unfinished !== null) {
    const waiting: string[] = unfinished.waitingApprovals.map((a) => a.requestId);
    await resumeSoul(agent, lines.join("\n"), async (wire: Wire) => {
      for await (const m of wire.uiSide()) if (m.type === "Notification" && waiting[0]) wire.respond(waiting[0], "approve");
    }, new AbortController().signal, { recorder: new WireRecorder((l: string) => void lines.push(l), { append: true }), maxResumes: 3 })
      .catch((e: unknown) => (e instanceof TurnNotRecovered ? undefined : Promise.reject(e)));
  }

  const errors: Error[] = [
    new ChatProviderError("x"), new APIConnectionError("x"), new APITimeoutError("x"), new APIEmptyResponseError("x"),
    new RunCancelled("x"), new LLMNotSet(), new MaxStepsReached(3), new LLMNotSupported("m", ["image_in"]), new TurnTimeoutError(5000),
  ];
  const isStatus = (e: unknown): number | null => (e instanceof APIStatusError ? e.status : null);
  const kind: string = new ChatProviderError("x", { kind: "limit" }).kind + new APIStatusError("x", { status: 429 }).kind;
  const more = [new RepeatedToolCallError("f", 12).count, new QueueShutDown().message, memoryBytes(), memoryBudget().limitBytes, (setMemoryBudget(1 << 30), 0), new PartialJson().done, StepResultClass.name, kind];
  const isMax = (e: unknown): number | null => (e instanceof MaxStepsReached ? e.nSteps : null);
  const isUnsupported = (e: unknown): string[] => (e instanceof LLMNotSupported ? e.capabilities : []);
  void [streamed, thinking, usage, value, status, errors, isStatus, isMax, isUnsupported, kosong.WIRE_PROTOCOL_VERSION, more];
  return `${value.output} ${replayed.length} ${closing.length} ${agent.context.history.length} ${copy.tokenCount} ${copy.nCheckpoints}`;
}
