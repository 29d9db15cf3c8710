// Types of kosong-wasm's public API (see docs/api.md). Data is kosong-shaped JSON (snake_case);
// options are JavaScript-shaped (camelCase, AbortSignal, Promises).

/** Browsers/bundlers: instantiate once before anything else. Node and workerd are ready on import. Idempotent. */
export function init(source?: URL | string | Response | BufferSource | WebAssembly.Module): Promise<void>;
/** The wasm instance's linear memory in bytes. It never shrinks, so steady growth over many runs is what a leak looks like. */
export function memoryBytes(): number;
/**
 * The instance-wide budget for what in-flight calls hold (answers and arguments as they stream).
 * A call whose growth would pass it fails with a ChatProviderError of kind "limit"; the others go on.
 * Default 1 GiB, a quarter of a wasm32 instance's 4 GiB.
 */
export function setMemoryBudget(bytes: number): void;
export function memoryBudget(): { limitBytes: number; usedBytes: number };

// ---- message model ----------------------------------------------------------------------

export type Role = "system" | "user" | "assistant" | "tool";
/**
 * `extras` holds what a provider attached to the text, under the provider's own names:
 * `citations` (Anthropic citation objects; Perplexity's source URLs, with `search_results`) and
 * `annotations` (OpenAI's `url_citation`s and others). An empty text whose `extras.server_tool`
 * is `{provider, value}` is a block of the provider's own tools (Anthropic `server_tool_use`,
 * `web_search_tool_result`, code execution; a Responses `web_search_call` or other hosted-tool
 * item): kept in order, never given to the toolset, sent back only to that provider.
 */
export type TextPart = { type: "text"; text: string; extras?: TextExtras | null };
export interface TextExtras {
  citations?: unknown[];
  annotations?: unknown[];
  search_results?: unknown[];
  server_tool?: { provider: "anthropic" | "openai_responses"; value: Record<string, unknown> };
  [key: string]: unknown;
}
export type ThinkPart = { type: "think"; think: string; encrypted?: string | null };
export type ImageURLPart = { type: "image_url"; image_url: { url: string; id?: string | null } };
export type AudioURLPart = { type: "audio_url"; audio_url: { url: string; id?: string | null } };
export type VideoURLPart = { type: "video_url"; video_url: { url: string; id?: string | null } };
/**
 * A document (a PDF, say): `url` is a `data:<type>;base64,…` URL or an `http(s)` URL; `media_type`
 * defaults to a data URL's. Each provider sends it in its own form — Chat Completions a `file` part
 * (data only), Responses `input_file`, Anthropic a `document` block (PDF data, or a link), Gemini
 * `inlineData`/`fileData` (a link needs `media_type`) — and the Kimi API takes none: a file a provider
 * cannot take is a ChatProviderError of kind `invalid_request` before anything is sent.
 */
export type FilePart = { type: "file"; file: { url: string; media_type?: string; filename?: string } };
export type ContentPart = TextPart | ThinkPart | ImageURLPart | AudioURLPart | VideoURLPart | FilePart;

export interface ToolCall {
  type: "function";
  id: string;
  function: { name: string; arguments: string | null };
  extras?: Record<string, unknown> | null;
}
/** A streamed fragment of a tool call's arguments; `tool_call_id` names the call when the wire format says which. */
export interface ToolCallPart {
  type: "tool_call_part";
  arguments_part: string | null;
  tool_call_id?: string;
}
export interface Message {
  role: Role;
  /** A lone text part may be given as a string. */
  content: string | ContentPart[];
  name?: string;
  tool_calls?: ToolCall[];
  tool_call_id?: string;
  partial?: boolean;
}
export type StreamedMessagePart = ContentPart | ToolCall | ToolCallPart;
export interface TokenUsage {
  input_other: number;
  output: number;
  input_cache_read: number;
  input_cache_creation: number;
}
export type ThinkingEffort = "off" | "low" | "medium" | "high" | "xhigh" | "max";

// ---- tools --------------------------------------------------------------------------------

export interface ToolDefinition {
  name: string;
  description: string;
  /** JSON Schema */
  parameters: object;
}
export interface ToolReturnValue {
  is_error: boolean;
  output: string | ContentPart[];
  message: string;
  display: Array<{ type: string; [k: string]: unknown }>;
  extras?: Record<string, unknown> | null;
}
export interface ToolResult {
  tool_call_id: string;
  return_value: ToolReturnValue;
}
export function toolOk(init?: { output?: string | ContentPart[]; message?: string; brief?: string }): ToolReturnValue;
export function toolError(init: { message: string; brief: string; output?: string | ContentPart[] }): ToolReturnValue;

export interface ToolContext {
  toolCallId: string;
  /** Aborted when the step/run is cancelled or fails. */
  signal: AbortSignal;
  /** The same signal, under the AI SDK's name (its `execute(args, {toolCallId, abortSignal})`). */
  abortSignal: AbortSignal;
  /**
   * Publishes on the agent run's wire (ignored, with a console warning, once this call ended). In a
   * plain `step` there is no wire and nobody to tell: it does nothing (while `requestApproval`
   * rejects and `rejection` throws, saying there is no wire: a tool never runs as if approved).
   */
  send(message: WireMessage | OtherWireMessage): void;
  /**
   * Inside an agent run: ask the user (through the wire); true when approved. `yolo` and an earlier
   * `approve_for_session` of the same action skip the question. The tool decides what to return.
   * Rejects once this call ended (its result is in, or it was aborted).
   */
  requestApproval(req: { action: string; description: string }): Promise<boolean>;
  /**
   * Inside an agent run: kimi-cli's rejection result for this call ("The tool call is rejected by the
   * user. …", brief "Rejected by user"; with the user's feedback, "… User feedback: {feedback}",
   * brief "Rejected: {feedback}"). Returned by a tool, it ends the turn when the user gave no
   * feedback; with feedback the model reads it and the turn goes on.
   */
  rejection(): ToolReturnValue;
}
/** What a tool's handler may return (a string, content parts, a `toolOk`/`toolError` value, nothing), or a Promise of it. */
export type ToolHandler<Args = any> = (args: Args, ctx: ToolContext) => string | ContentPart[] | ToolReturnValue | void | Promise<string | ContentPart[] | ToolReturnValue | void>;
/**
 * A Standard Schema that carries its JSON Schema (Standard JSON Schema: zod ≥ 4.2, arktype ≥
 * 2.1.28, valibot through `toStandardJsonSchema`). As a tool's `parameters`, its JSON Schema goes
 * to the model and it checks the arguments before the handler runs (a failure is an error result
 * "Error validating JSON arguments: path: message"); the handler gets the validated value.
 */
export interface StandardSchemaParameters<Output = unknown> {
  readonly "~standard": {
    readonly version: 1;
    readonly vendor: string;
    validate(value: unknown): unknown;
    readonly types?: { readonly input: unknown; readonly output: Output } | undefined;
  };
}
/**
 * The arguments a handler gets: a Standard Schema's output type; a JSON Schema object written
 * `as const` (so its `type` is the literal "object"), the type it describes (`InferSchema`, as for
 * structured output); else `any`.
 */
export type ToolArgs<P> = P extends { readonly "~standard": { readonly types?: { readonly output: infer O } | undefined } }
  ? O
  : P extends { readonly type: "object"; readonly properties: object }
    ? InferSchema<P>
    : any;
/**
 * A tool: its `name`, `description`, `parameters` (a JSON Schema, or a Standard Schema whose type
 * the handler's arguments take) and `handler` — or, in the AI SDK's names, `inputSchema` and
 * `execute` (one of each pair). Every key is checked: an unknown one is a TypeError with "did you
 * mean".
 */
export type Tool<P = object> = ToolOptions &
  ({ handler: ToolHandler<ToolArgs<P>>; execute?: undefined } | { execute: ToolHandler<ToolArgs<P>>; handler?: undefined }) &
  ({ parameters?: P; inputSchema?: undefined } | { inputSchema: P; parameters?: undefined });
export interface ToolOptions {
  name: string;
  description?: string;
  /** Default true: may start as soon as its call is complete, mid-stream. */
  eager?: boolean;
  /**
   * Default false. True: running it twice for one call does what running it once does, so when a
   * recovered turn (`resumeSoul`) finds a call of it that its runtime died under, it runs it again
   * with the same `ctx.toolCallId` (key a side effect on it). Otherwise such a call is answered
   * "interrupted … it may have taken effect" and never runs again.
   */
  idempotent?: boolean;
  /**
   * How long a call may run, in ms (overrides `toolTimeoutMs`). Past it the call's `ctx.signal`
   * aborts with a `TimeoutError` and its result is an error "Tool `name` timed out after N ms and
   * was stopped." (brief "Timed out"), which counts like any other result.
   */
  timeoutMs?: number;
  /**
   * Asked through the wire before the handler starts (an `ApprovalRequest` with `action` the tool's
   * name, `description` its call, and `before_start: true`): nothing of the tool runs until it is
   * approved, and a refusal is kimi-cli's rejection result. Such a wait survives any death of its
   * runtime (the call waits again under the same request id), where a handler that asked with
   * `ctx.requestApproval` has started and is answered "interrupted" unless it is `idempotent`.
   * A function decides per call from the arguments. In an agent run only: under a plain `step` the
   * call is an error result (there is no wire to ask on).
   */
  needsApproval?: boolean | ((args: any) => boolean | Promise<boolean>);
}
/** kosong's protocol: any object of this shape works. */
export interface Toolset {
  readonly tools: Array<ToolDefinition & { eager?: boolean; idempotent?: boolean; timeoutMs?: number; needsApproval?: boolean }>;
  /** `ctx` is a ToolContext: its `send`, `requestApproval` and `rejection` serve inside an agent run (in a plain step they say there is no wire). */
  handle(call: ToolCall, ctx: ToolContext): ToolResult | Promise<ToolResult>;
}
/**
 * Tools by name. A name must match `^[a-zA-Z0-9_-]{1,64}$` (a leading `$` is allowed for Moonshot's
 * builtins), be unique, and `parameters` must be a JSON Schema object: anything else is a TypeError
 * at construction. A handler that throws gives "Error running tool: …" with the error's class when
 * it is a subclass (`TypeError: …`), and the error, with its stack, goes to `logger.warn`.
 */
export class SimpleToolset implements Toolset {
  constructor(tools?: Tool[], options?: { validate?(schema: object, args: unknown): string | null | undefined; logger?: Logger | null });
  readonly tools: Array<ToolDefinition & { eager?: boolean; idempotent?: boolean; timeoutMs?: number; needsApproval?: boolean }>;
  /** Throws when the name is taken or invalid. (Generic, so a Standard Schema's type reaches the handler.) */
  add<P extends object>(tool: Tool<P>): this;
  /** Throws when no tool has that name. */
  remove(name: string): this;
  handle(call: ToolCall, ctx?: Partial<ToolContext>): ToolResult | Promise<ToolResult>;
}

// ---- argument previews ----

export type PartialJsonEdit =
  | { op: "set"; path: Array<string | number>; value: unknown }
  | { op: "append"; path: Array<string | number>; text: string };
/**
 * A best-effort preview of JSON that is still streaming (a tool call's arguments): strings cut
 * mid-way, numbers, arrays and objects so far. Feeding n bytes costs O(n) in total for any shape
 * and any piece size (what nests deeper than 64 levels is not previewed: see `depthLimited`);
 * `value` is updated in place. Text that is not JSON stops the preview; it never throws.
 */
export class PartialJson {
  constructor();
  /**
   * Applies edits (as `feed` gives them, or a wire's `PartialOutput` message carries them in
   * `payload.edits`) to `value`, in place where it can; returns the value they make.
   */
  static applyEdits(value: unknown, edits: PartialJsonEdit[]): unknown;
  /** The edits this piece made to `value`. */
  feed(piece: string): PartialJsonEdit[];
  readonly value: unknown;
  readonly done: boolean;
  readonly failed: boolean;
  /**
   * Part of the value nests deeper than 64 levels and is not previewed (it stays an empty array or
   * object there; what comes after it is previewed again). This keeps a preview linear in the bytes
   * fed for any shape; the tool still gets its whole arguments.
   */
  readonly depthLimited: boolean;
}

// ---- providers ----------------------------------------------------------------------------

export interface ChatProvider {
  readonly name: string;
  readonly modelName: string;
  readonly thinkingEffort: ThinkingEffort | null;
  /** A new provider; the old one is unchanged. */
  withThinking(effort: ThinkingEffort): ChatProvider;
}
/**
 * An unknown option name is a TypeError that names the closest known one. Without `apiKey` and
 * `baseUrl`, a request reads the key from the environment as the official SDKs do
 * (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, `GEMINI_API_KEY`/`GOOGLE_API_KEY`, `MOONSHOT_API_KEY`),
 * and without one fails with a TypeError before anything is sent.
 */
export interface HttpOptions {
  apiKey?: string;
  baseUrl?: string;
  /** The OpenAI SDK's spelling of `baseUrl`, taken as an alias. */
  baseURL?: string;
  headers?: Record<string, string>;
  /** Used instead of the global fetch. */
  fetch?: typeof fetch;
  /** Longest wait for the response headers, and for each next chunk of the stream. */
  timeoutMs?: number;
  /** From sending until the answer's first chunk, in ms: past it, an APITimeoutError "(firstChunkTimeoutMs)". */
  firstChunkTimeoutMs?: number;
  /**
   * From sending until the stream's end, in ms: past it the call is cut and is an APITimeoutError
   * "(stepTimeoutMs)", which an agent retries as a step (and salvages, when a tool already ran).
   */
  stepTimeoutMs?: number;
}
/** Options every HTTP provider takes. `extraBody` is merged into the request body, key by key. */
export interface ProviderOptions extends HttpOptions {
  model: string;
  /** The answer's token limit (`max_tokens`, `max_output_tokens`, `maxOutputTokens`). */
  maxTokens?: number;
  temperature?: number;
  /** Same as calling `withThinking(effort)`. */
  thinking?: ThinkingEffort;
  extraBody?: Record<string, unknown>;
}
/** OpenAI Chat Completions, and every OpenAI-compatible server. */
export class OpenAIChatProvider implements ChatProvider {
  constructor(opts: ProviderOptions & {
    /** Where think parts travel (default: read `reasoning_content`, send none back). */
    reasoningKey?: string;
  });
  readonly name: string;
  readonly modelName: string;
  readonly thinkingEffort: ThinkingEffort | null;
  withThinking(effort: ThinkingEffort): OpenAIChatProvider;
}
/**
 * Moonshot's Kimi API (base URL https://api.moonshot.ai/v1): think parts as `reasoning_content`
 * both ways, `$`-named builtin tools, schemas given the `type` Moonshot requires, thinking as
 * `thinking: {type: "enabled" | "disabled"}`; `maxTokens` as `max_completion_tokens`; like kosong 0.56, no
 * token limit or temperature is sent unless given.
 */
export class KimiProvider implements ChatProvider {
  constructor(opts: ProviderOptions);
  readonly name: string;
  readonly modelName: string;
  readonly thinkingEffort: ThinkingEffort | null;
  withThinking(effort: ThinkingEffort): KimiProvider;
}
/**
 * Anthropic's Messages API (base URL https://api.anthropic.com/v1). `maxTokens` defaults to 8192
 * (32000 for models with adaptive thinking). Thinking is adaptive (with `output_config.effort`) on
 * Claude 4.6 and later, a token budget on older models; `adaptiveThinking` forces either.
 */
export class AnthropicProvider implements ChatProvider {
  constructor(opts: ProviderOptions & { adaptiveThinking?: boolean });
  readonly name: string;
  readonly modelName: string;
  readonly thinkingEffort: ThinkingEffort | null;
  withThinking(effort: ThinkingEffort): AnthropicProvider;
}
/**
 * OpenAI's Responses API, stateless (`store: false`): reasoning comes back as encrypted content and
 * is sent back with the history. `reasoningEffort` is passed as `reasoning.effort` as given.
 *
 * `background: true` sends background streaming requests (`background: true, store: true`): when
 * the answer's stream breaks (a socket destroyed, a chunk timeout, the body ending before
 * `response.completed`), the rest of the same answer is read again after its last
 * `sequence_number` (`GET {baseUrl}/responses/{id}?stream=true&starting_after=n`, up to 3 times an
 * answer, after a failed one waiting 0.25 s doubling or the server's `Retry-After`; events a server
 * repeats are skipped) — no second POST, no retry, no salvage. An answer
 * that cannot be read again (404: expired; another 4xx) fails as any broken stream does. An answer
 * nobody reads any more (an abort, a time limit, a break given up on) is cancelled server-side
 * (`POST {baseUrl}/responses/{id}/cancel`, at most 10 s, never an error the caller hears). A turn
 * recovered after its runtime died (a `Session`, `resumeSoul`) reads the answer it was reading
 * again from its start (`starting_after=0`) instead of asking the model again: the answer's id is
 * recorded as a `Notification` of type `answer_kept`, each reconnect as one of type
 * `answer_reconnected` (an event of the telemetry `chat` span).
 */
export class OpenAIResponsesProvider implements ChatProvider {
  constructor(opts: ProviderOptions & { reasoningEffort?: string; background?: boolean });
  readonly name: string;
  readonly modelName: string;
  readonly thinkingEffort: ThinkingEffort | null;
  withThinking(effort: ThinkingEffort): OpenAIResponsesProvider;
}
/**
 * Google's Gemini API (base URL https://generativelanguage.googleapis.com/v1beta), key sent as
 * `x-goog-api-key`. A call's `thoughtSignature` is kept in `extras.thought_signature_b64`, as kosong keeps it
 * (`extras.thought_signature` is read too).
 */
export class GeminiProvider implements ChatProvider {
  constructor(opts: ProviderOptions);
  readonly name: string;
  readonly modelName: string;
  readonly thinkingEffort: ThinkingEffort | null;
  withThinking(effort: ThinkingEffort): GeminiProvider;
}
/**
 * kosong's echo DSL, one script a call; no network. `error: 429 slow down` fails that call with an
 * `APIStatusError` (status 429; `error: 503` with kosong's "Simulated 503 error"), `error: connection
 * …` with an `APIConnectionError`, `error: timeout …` with an `APITimeoutError`: how kosong's and
 * kimi-cli's own tests script retries and failures.
 */
export class ScriptedProvider implements ChatProvider {
  constructor(scripts: string[]);
  readonly name: string;
  readonly modelName: string;
  readonly thinkingEffort: ThinkingEffort | null;
  withThinking(effort: ThinkingEffort): ScriptedProvider;
}

/**
 * Providers tried in order: a step moves on to the next member when its error outlasts its retries
 * (an error the agent retries — a 429/5xx, a dropped connection, a timeout, a cut-off or garbled
 * stream — still there when `maxRetriesPerStep` is spent; `step` and `generate` make no retries, so
 * for them the first such error), or at once when its kind or HTTP status is in `fallbackOn`. Once
 * moved on, the rest of the call (the turn's later steps) stays on that member. Each member builds
 * its own request (its wire format, key, `fetch`, structured output). `result.provider` (step,
 * generate) and the wire (`StepRetry.fallback`, `StatusUpdate.provider`) say which one answered.
 * A `FallbackProvider` among the members gives its members (its own `fallbackOn` does not apply).
 */
export class FallbackProvider implements ChatProvider {
  constructor(providers: ChatProvider[], options?: {
    /** Kinds (`"missing_key"`, `"status"`, … — see ChatProviderError.kind) and HTTP statuses (`401`) that move on without retries. */
    fallbackOn?: Array<ProviderErrorKind | number>;
  });
  /** The members, in the order they are tried. */
  readonly providers: readonly ChatProvider[];
  readonly name: "fallback";
  /** The first member's. */
  readonly modelName: string;
  readonly thinkingEffort: ThinkingEffort | null;
  withThinking(effort: ThinkingEffort): FallbackProvider;
}

/** Which member of a `FallbackProvider` a step moved on to (`StepRetry.fallback`) or was answered by (`StatusUpdate.provider`). */
export interface FallbackMember {
  index: number;
  model: string;
}

/**
 * Wraps a provider and injects faults through its real fetch path (a ScriptedProvider inside is
 * served as an OpenAI-compatible SSE stream): HTTP errors (429 with Retry-After), a stream cut
 * mid-event or between events (a connection error), a tool call missing its final `}`, slow
 * chunks. Repeatable with `seed`. A request that failed by an injected fault is replayed on the
 * next call, as a transient fault would be.
 */
export class ChaosProvider implements ChatProvider {
  constructor(inner: ChatProvider, opts?: {
    errorProbability?: number;
    /** HTTP statuses to pick from; default [429, 500, 502, 503]. */
    errorTypes?: number[];
    /** The injected 429's Retry-After; default 1. */
    retryAfterS?: number;
    seed?: number;
    corruptToolCallProbability?: number;
    truncateStreamProbability?: number;
    slowChunkProbability?: number;
    slowChunkMs?: number;
  });
  readonly name: string;
  readonly modelName: string;
  readonly thinkingEffort: ThinkingEffort | null;
  withThinking(effort: ThinkingEffort): ChaosProvider;
  /** What was injected so far. */
  readonly injected: { http: number; truncateMidEvent: number; truncateBetweenEvents: number; corruptToolCall: number; slowChunks: number };
}

/** What went wrong, for a program to tell failures apart without reading their message. */
export type ProviderErrorKind =
  | "connection" | "timeout" | "empty" | "status"
  /** The server redirected the request to another origin; nothing was sent there (an APIConnectionError, never retried). */
  | "redirect"
  /** The server sent something that is not its wire format. */
  | "malformed"
  /** The stream ended before the model finished its answer. */
  | "truncated"
  /** A `limits` cap was passed. */
  | "limit"
  /** The server reported an error inside the stream. */
  | "server"
  /** The history or the options cannot be sent to this provider. */
  | "invalid_request"
  /** The model refused to answer; the message carries its words. The agent does not retry it. */
  | "refused"
  /** The provider's own host needs an API key and there was none (no `apiKey`, nothing in the environment variable its SDK reads); nothing was sent. Not retried. */
  | "missing_key"
  /** The answer is not the structured output asked for (not JSON, or refused by the validator); `text` keeps it. Not retried. */
  | "malformed_output"
  | "other";
export class ChatProviderError extends Error {
  constructor(message?: string, options?: { cause?: unknown; kind?: ProviderErrorKind; text?: string });
  readonly kind: ProviderErrorKind;
  /** For `malformed_output`: the answer's text. */
  readonly text?: string;
  /**
   * Set when `step()` failed after a tool call was handed on: the round as it ended. The started
   * tools ran to their end; calls that never started (input cut off) have an error result and never ran.
   */
  salvaged?: SalvagedRound;
}
/** A step's round whose stream broke after a tool call was handed on (`error.salvaged`). */
export interface SalvagedRound {
  readonly id: string | null;
  /** What arrived: text, thinking, server-tool parts and every call the stream showed. */
  readonly message: Message;
  readonly usage: TokenUsage | null;
  readonly finishReason: string | null;
  readonly toolCalls: ToolCall[];
  /** One result per call, in call order; already settled. */
  toolResults(): Promise<ToolResult[]>;
}
/** Refused or broken connection; `cause` is the error `fetch` or the body stream gave. */
export class APIConnectionError extends ChatProviderError {}
export class APITimeoutError extends ChatProviderError {}
export class APIEmptyResponseError extends ChatProviderError {}
export class APIStatusError extends ChatProviderError {
  constructor(message: string, init: { status: number; requestId?: string | null; retryAfterMs?: number | null; cause?: unknown });
  status: number;
  requestId: string | null;
  retryAfterMs: number | null;
}

// ---- structured output ----------------------------------------------------------------------

/** A JSON Schema (an object). Written `as const` (or inline), its type is what `output` is typed from. */
export type JsonSchema = { readonly [key: string]: unknown };
type Mutable<T> = { -readonly [K in keyof T]: T[K] };
type Flatten<T> = { [K in keyof T]: T[K] };
type RequiredOf<S> = S extends { required: readonly (infer R)[] } ? R : never;
type SchemaObject<P, R> = Mutable<
  { [K in keyof P as K extends R ? K : never]: InferSchema<P[K]> } & { [K in keyof P as K extends R ? never : K]?: InferSchema<P[K]> }
>;
/** The TypeScript type of the values a JSON Schema describes (`const`, `enum`, `type` with `properties`/`required`/`items`); `unknown` beyond that. */
export type InferSchema<S> = S extends { const: infer C }
  ? C
  : S extends { enum: readonly (infer E)[] }
    ? E
    : S extends { type: "string" }
      ? string
      : S extends { type: "number" | "integer" }
        ? number
        : S extends { type: "boolean" }
          ? boolean
          : S extends { type: "null" }
            ? null
            : S extends { type: "array"; items: infer I }
              ? InferSchema<I>[]
              : S extends { type: "array" }
                ? unknown[]
                : S extends { type: "object"; properties: infer P }
                  ? Flatten<SchemaObject<P, RequiredOf<S>>>
                  : S extends { type: "object" }
                    ? Record<string, unknown>
                    : unknown;
/** A value still streaming: any part of it may be missing yet. */
export type DeepPartial<T> = T extends (infer I)[] ? DeepPartial<I>[] : T extends object ? { [K in keyof T]?: DeepPartial<T[K]> } : T;
/** The output's type: the caller's `T` when given, else the schema's. */
type OutputOf<T, S> = [T] extends [never] ? InferSchema<S> : T;

/**
 * Structured output: the answer asked for as JSON that matches `schema`, in each provider's native
 * form (Chat Completions `response_format` json_schema, Responses `text.format`, Anthropic
 * `output_config.format`, Gemini `responseJsonSchema`, Kimi's JSON mode with the schema in the
 * system prompt: see the README's provider table).
 */
export interface OutputOption<S extends JsonSchema = JsonSchema> {
  schema: S;
  /** Where the provider wants one (OpenAI): 1 to 64 letters, digits, `_` or `-`. Default "output". */
  name?: string;
  /** Sent only when given (the provider's default applies otherwise). */
  strict?: boolean;
  /**
   * Checks the parsed value: a string says what is wrong (a `malformed_output` error). The package
   * ships no validator; `step` and `Agent` fall back to the `SimpleToolset`'s `validate` hook.
   */
  validate?(schema: S, value: unknown): string | null | undefined;
}
/** The streaming callbacks of structured output. */
export interface OutputCallbacks<T> {
  /**
   * The output so far, whenever the answer's text changed it. The same object each time, updated in
   * place (the work stays linear in the answer's bytes); copy it (`structuredClone`) to keep a snapshot.
   */
  onPartialOutput?(value: DeepPartial<T>): void;
  /** For a top-level array: each item once the next one begins (it is complete), the rest when the answer ends. */
  onOutputElement?(item: T extends readonly (infer I)[] ? I : never): void;
}

// ---- one generation, one step ---------------------------------------------------------------

export interface GenerateResult {
  id: string | null;
  message: Message;
  /** The answer's text parts joined (thinking left out), as the AI SDK's `result.text`. */
  text: string;
  usage: TokenUsage | null;
  finishReason: string | null;
  /** The provider that answered: the one given, or the member of a `FallbackProvider`. */
  provider: ChatProvider;
}
/**
 * OpenTelemetry spans by the GenAI semantic conventions, with no dependency of this package: `tracer`
 * is an `@opentelemetry/api` Tracer (`trace.getTracer(…)`), or anything with its `startSpan`. A model
 * call is a `chat {model}` client span (`gen_ai.request.model`, `gen_ai.provider.name`,
 * `server.address`/`server.port`, `gen_ai.response.id`, `gen_ai.usage.input_tokens`/`output_tokens`,
 * `gen_ai.response.finish_reasons`, `gen_ai.response.time_to_first_chunk`, `error.type` on failure);
 * each tool call an `execute_tool {name}` span (`gen_ai.tool.name`, `gen_ai.tool.call.id`,
 * `error.type` for an error result or a throw), a child of the model call that started it.
 * On an `Agent`, each turn is an `invoke_agent {name}` span (`gen_ai.agent.name`, `error.type` when
 * the turn fails) with a `chat` span per attempt of each step as its children (a retried attempt
 * marked failed with the error's class; the member of a `FallbackProvider` that answered in
 * `gen_ai.response.model`), and the tools' spans children of the chat that started them.
 * `recordContent: true` adds the prompt, the answer, arguments and results; keys are never recorded.
 * `context`: the parent context of the model call's span (default: the active one).
 */
export interface TelemetryOption {
  tracer: { startSpan(name: string, options?: object, context?: unknown): unknown };
  recordContent?: boolean;
  context?: unknown;
}
export interface GenerateOptions {
  /** Each part as it streams; a promise it returns holds the stream until it settles (any other value is ignored). */
  onMessagePart?(p: StreamedMessagePart): unknown;
  onToolCall?(c: ToolCall): void | Promise<void>;
  signal?: AbortSignal;
  limits?: Limits;
  telemetry?: TelemetryOption;
}
/**
 * With `output`: `result.output` is the parsed answer (`undefined` when the answer calls tools and its
 * text is not the output). Text that is not JSON, or that the validator refuses, is a
 * `ChatProviderError` of kind `malformed_output` keeping the text; a refusal stays `refused`.
 * The output's type comes from a `const` schema, or is given: `generate<Forecast>(…)`.
 */
export function generate<T = never, const S extends JsonSchema = JsonSchema>(
  provider: ChatProvider,
  systemPrompt: string,
  tools: ToolDefinition[],
  history: Message[],
  options: GenerateOptions & OutputCallbacks<OutputOf<T, S>> & { output: OutputOption<S> },
): Promise<GenerateResult & { output?: OutputOf<T, S> }>;
export function generate(
  provider: ChatProvider,
  systemPrompt: string,
  tools: ToolDefinition[],
  history: Message[],
  options?: GenerateOptions,
): Promise<GenerateResult>;

export class StepResult<T = unknown> {
  readonly id: string | null;
  readonly message: Message;
  /** The answer's text parts joined (thinking left out), as the AI SDK's `result.text`. */
  readonly text: string;
  readonly usage: TokenUsage | null;
  readonly finishReason: string | null;
  readonly toolCalls: ToolCall[];
  /** The provider that answered: the one given, or the member of a `FallbackProvider`. */
  readonly provider: ChatProvider;
  /** With `output`: the parsed answer, as `generate` gives it. */
  readonly output?: T;
  /** In call order, whatever order they finished in. Rejects with the signal's reason if it aborts first. */
  toolResults(): Promise<ToolResult[]>;
  /**
   * For a loop of one's own around `step` (the AI SDK's `response.messages`): this step's message,
   * then one tool message per result in call order, worded as an `Agent` words them (an error is
   * `<system>ERROR: …</system>`, an empty output says so) — append them to the history and step again.
   */
  messages(): Promise<Message[]>;
}
export interface StepOptions {
  /** Each part as it streams; a promise it returns holds the stream until it settles (any other value is ignored). */
  onMessagePart?(p: StreamedMessagePart): unknown;
  onToolResult?(r: ToolResult): void;
  signal?: AbortSignal;
  /**
   * Told (name, id, size — never contents) when a call's arguments were not JSON, or the stream broke
   * before a call could start (`{tool, id, bytes, chars}`), and the engine asked the model to resend it.
   */
  logger?: Logger | null;
  limits?: Limits;
  /** How long each tool call may run, in ms, unless its tool says otherwise (`Tool.timeoutMs`). Default: no limit. */
  toolTimeoutMs?: number;
  telemetry?: TelemetryOption;
}
export function step<T = never, const S extends JsonSchema = JsonSchema>(
  provider: ChatProvider,
  systemPrompt: string,
  toolset: Toolset,
  history: Message[],
  options: StepOptions & OutputCallbacks<OutputOf<T, S>> & { output: OutputOption<S> },
): Promise<StepResult<OutputOf<T, S>>>;
export function step(
  provider: ChatProvider,
  systemPrompt: string,
  toolset: Toolset,
  history: Message[],
  options?: StepOptions,
): Promise<StepResult>;

/** Caps that keep a broken or hostile stream from exhausting memory; going past one is a ChatProviderError naming it. */
export interface Limits {
  /** One Server-Sent Event. Default 16 MiB. */
  maxEventBytes?: number;
  /** One tool call's arguments. Default 16 MiB. */
  maxToolArgumentsBytes?: number;
  /** The whole message (text, thinking, arguments). Default 64 MiB. */
  maxMessageBytes?: number;
  /** Tool calls one step starts; calls past it get an error result ("Too many calls") and never run. Default 256. */
  maxToolCallsPerStep?: number;
}

/**
 * Where warnings go (a tool that threw, a recorded line skipped, a store that refused a write).
 * Every `logger` option defaults to the console; `logger: null` silences it.
 */
export interface Logger {
  warn(message: string, fields?: Record<string, unknown>): void;
}

// ---- the agent runtime (kimi-cli's soul) ---------------------------------------------------

/**
 * A message the runtime publishes on the wire, in kimi-cli's envelope `{type, payload}`: narrow on
 * `type` and the payload is typed. A message of a kind a tool or a soul of yours sends (`ctx.send`)
 * comes through too, as it was sent; the types leave it out unless you name it:
 * `wire.uiSide<MyMessage>()`, `readWireRecord<MyMessage>(text)` (or compare `m.type as string`).
 */
export type WireMessage =
  | { type: "TurnBegin"; payload: TurnBeginPayload }
  | { type: "TurnEnd"; payload: {} }
  | { type: "StepBegin"; payload: { n: number } }
  | { type: "StepInterrupted"; payload: {} }
  | { type: "StepRetry"; payload: StepRetryPayload }
  | { type: "CompactionBegin"; payload: {} }
  | { type: "CompactionEnd"; payload: {} }
  | { type: "StatusUpdate"; payload: StatusUpdatePayload }
  | { type: "ContentPart"; payload: ContentPart }
  | { type: "ToolCall"; payload: ToolCall }
  | { type: "ToolCallPart"; payload: ToolCallPart }
  | { type: "ToolResult"; payload: ToolResult }
  | { type: "ApprovalRequest"; payload: ApprovalRequestPayload }
  | { type: "ApprovalResponse"; payload: { request_id: string; response: "approve" | "approve_for_session" | "reject"; feedback: string } }
  | { type: "PartialOutput"; payload: { edits: PartialJsonEdit[] } }
  | { type: "Notification"; payload: NotificationPayload }
  | { type: "SubagentEvent"; payload: SubagentEventPayload };
/**
 * kimi-cli's `SubagentEvent`: a message of a sub-agent's turn (`Agent.asTool`) on its parent's wire.
 * A raw side gets each as it comes, a merged side and a recording the merged ones. A sub-agent's
 * `ApprovalRequest` is not wrapped: it is the parent's to answer, with `respond`.
 */
export interface SubagentEventPayload {
  /** The parent's call that runs the sub-agent. */
  parent_tool_call_id: string;
  /** The instance (`resume` names it). */
  agent_id: string;
  /** The tool's name. */
  subagent_type: string;
  event: WireMessage;
}
/** Any message in the envelope: what the wire takes (`send`), and a message of a kind of your own. */
export type OtherWireMessage = { type: string; payload: unknown };
export interface TurnBeginPayload {
  user_input: string | ContentPart[];
  /** The turn's id: the context's checkpoints of the turn carry it too (how a recording and its context belong together). */
  turn_id?: string;
  /** The turn the context was last in when this one began. */
  after_turn_id?: string;
}
/** A step's failed attempt and the wait before the next; `fallback`: a `FallbackProvider` moved on to that member. */
export interface StepRetryPayload {
  n: number;
  next_attempt: number;
  max_attempts: number;
  wait_s: number;
  error_type: string;
  status_code: number | null;
  fallback?: FallbackMember;
}
/** A step's end: the context's state, the step's usage and message id, and who answered (a `FallbackProvider`'s member). */
export interface StatusUpdatePayload {
  context_usage: number;
  context_tokens: number;
  max_context_tokens: number;
  token_usage: TokenUsage | null;
  message_id: string | null;
  provider?: FallbackMember;
  /** What the turn's sub-agents used so far, nested ones too (absent until one ran a step). */
  subagent_token_usage?: TokenUsage;
}
/** A tool asks the user; answer with `wire.respond(id, …)` (a session's `respond`). */
export interface ApprovalRequestPayload {
  id: string;
  tool_call_id: string;
  sender: string;
  action: string;
  description: string;
  display: unknown[];
  /** Asked before the handler started (`needsApproval`): nothing of the tool has run. */
  before_start?: true;
  /** A sub-agent's question (kimi-cli's fields): the instance that asks and its type; `tool_call_id` is the sub-agent's own call. */
  agent_id?: string;
  subagent_type?: string;
}
/**
 * kimi-cli's notification. The runtime sends one of `type: "turn_resumed"` when a turn goes on after
 * its runtime died; with a provider whose server keeps its answers (`OpenAIResponsesProvider` with
 * `background: true`), one of `type: "answer_kept"` (`payload.response_id`) once an answer's id is
 * known, and one of `type: "answer_reconnected"` (`payload.starting_after`) each time its broken
 * stream is read again.
 */
export interface NotificationPayload {
  id: string;
  category: string;
  type: string;
  source_kind: string;
  source_id: string;
  title: string;
  body: string;
  severity: string;
  created_at: number;
  payload: { [key: string]: unknown };
}

/** The context's state; `context_usage` and `max_context_tokens` are 0 when the model's window is not known. A `StatusUpdate`'s payload has the same fields (and `token_usage`, `message_id`, and `provider`: a `FallbackMember` when the agent's provider is a `FallbackProvider`). */
export interface StatusSnapshot {
  context_usage: number;
  context_tokens: number;
  max_context_tokens: number;
  yolo_enabled: boolean;
}
/** What `runSoul` hands a soul for one run. */
export interface RunContext {
  wire: Wire;
  signal: AbortSignal;
  send(message: WireMessage | OtherWireMessage): void;
  requestApproval(req: { tool_call_id: string; sender: string; action: string; description: string }): Promise<{
    response: "approve" | "approve_for_session" | "reject";
    feedback: string;
  }>;
}
export interface Soul {
  readonly name: string;
  readonly modelName: string;
  readonly status: StatusSnapshot;
  run(userInput: string | ContentPart[], run: RunContext): Promise<void>;
}
/** A tool's context in an agent run: the same `ToolContext` (its run's methods serve there). */
export type AgentToolContext = ToolContext;
export class Agent implements Soul {
  constructor(opts: {
    name?: string;
    provider: ChatProvider | null;
    /** Default "" (none). */
    systemPrompt?: string;
    toolset?: Toolset;
    context?: Context;
    /** Default 100. */
    maxStepsPerTurn?: number;
    /** Attempts per step, the first included (kimi-cli's `max_retries_per_step`). Default 3. */
    maxRetriesPerStep?: number;
    /** The model's context window; compaction starts at 85% of it (or 50,000 tokens before it). 0: never. */
    maxContextTokens?: number;
    /** e.g. ["image_in", "video_in", "thinking"]; when given, input the model cannot take is refused. */
    capabilities?: string[];
    yolo?: boolean;
    logger?: Logger | null;
    limits?: Limits;
    /** The retry backoff; default kimi-cli's: 300 ms doubling to at most 5,000 ms, plus up to 500 ms of jitter. */
    retryBackoff?: { initialMs?: number; maxMs?: number; jitterMs?: number };
    /** How long each tool call may run, in ms, unless its tool says otherwise (`Tool.timeoutMs`). Default: no limit. */
    toolTimeoutMs?: number;
    /** OpenTelemetry spans of each turn (`invoke_agent`), its model calls and its tools: see `TelemetryOption`. */
    telemetry?: TelemetryOption;
    /**
     * How long a whole turn may run, in ms. Past it the turn is stopped as an abort stops it (every
     * running tool's `ctx.signal` aborts with a `TimeoutError`, each open call gets a "timed out"
     * result, the history stays consistent, `TurnEnd` is sent) and `runSoul` rejects with
     * `TurnTimeoutError`. Default: no limit.
     */
    turnTimeoutMs?: number;
    /**
     * Structured output: every step asks for it, and a turn's output is its final answer's (tools
     * work in between). The wire carries the preview as `{type: "PartialOutput", payload: {edits}}`
     * after the parts that made it (apply with `PartialJson.applyEdits`, from each `StepBegin`;
     * left out of recordings); a broken final answer ends the turn with `malformed_output`, the
     * answer kept in the context as text.
     */
    output?: OutputOption;
  });
  readonly name: string;
  readonly modelName: string;
  readonly status: StatusSnapshot;
  readonly context: Context;
  /** With `output`: the last turn's parsed output (`undefined` before one, or when the turn failed). */
  readonly output: unknown;
  /** One turn at a time: while a turn runs, another is refused at once with an Error. */
  run(userInput: string | ContentPart[], run: RunContext): Promise<void>;
  /** Goes on with a recorded turn (`resumeSoul` calls it). */
  resume(messages: readonly (WireMessage | OtherWireMessage)[], run: RunContext, options?: { maxResumes?: number }): Promise<void>;
  /**
   * This agent as a tool: a sub-agent, as kimi-cli's `Agent` tool runs one. A call `{prompt,
   * description?, resume?}` runs one turn of this agent in a new instance (its own context, agent
   * id `a` + 8 hex digits), or goes on with the instance `resume` names; with `provider: null` the
   * agent runs on the caller's provider. Its messages go on the caller's wire as `SubagentEvent`s;
   * its tools' approvals are asked there (the caller's `respond` answers them; `approve_for_session`
   * holds for the caller's run). The result is kimi-cli's text (`agent_id`, `resumed`,
   * `actual_subagent_type`, `status: completed`, then `[summary]` and the final answer); an answer
   * under 200 characters is asked once more to be fuller. Failures are error results in kimi-cli's
   * words (max steps, an API error with its status, a provider error, an unexpected error). Cancel
   * the caller and every sub-agent and its tools stop. Calls in one round run at once.
   * Only inside an agent run (runSoul, a Session, AgentSession): in a plain `step` the call is an
   * error result. In a session the instance's context is kept in the session's store by agent id:
   * a turn recovered after a death goes on with the sub-agent where it stopped (the tool is
   * `idempotent`: its call runs again with its id and resumes the sub-agent; no tool of it runs
   * twice, a question it asked waits again), and `resume` works in any later turn or process.
   */
  asTool(opts?: {
    /** The tool's name; default the agent's. */
    name?: string;
    description?: string;
    /** How many sub-agents deep a call may run (the caller's turn is depth 0). Default 2. */
    maxDepth?: number;
    /** The call's own time limit (as `Tool.timeoutMs`). */
    timeoutMs?: number;
  }): Tool;
}
/**
 * After a `StepRetry`, the parts published since the last `StepBegin` are void (the failed attempt's):
 * a UI drops them. A round salvaged after a broken stream is not retried and keeps its parts.
 */
export function runSoul(
  soul: Soul,
  userInput: string | ContentPart[],
  uiLoop: (wire: Wire) => Promise<void>,
  signal: AbortSignal,
  options?: { recorder?: WireRecorder },
): Promise<void>;

/**
 * Goes on with a turn whose runtime died (a deploy, an eviction, a killed process), from its
 * recording — the text of its `wire.jsonl`, or its messages — and the agent's context (restored from
 * its `context.jsonl`), on a new wire like `runSoul`'s (same promise). The recorded round is kept:
 * recorded results stay; a call whose input was cut off is answered "cut off"; a call that may have
 * run without a recorded result is answered "interrupted" unless its tool is `idempotent` (then it
 * runs again, same `ctx.toolCallId`); a waiting approval waits again under its request id (answer it
 * with `wire.respond` — from the moment the UI loop is handed the wire, before the turn reaches its
 * wait; nothing is asked twice). Then the turn goes on with its next step. The wire
 * says the turn was resumed (a kimi-cli `Notification` of type `turn_resumed`) and sends no
 * `TurnBegin` again. Rejects with `TurnNotRecovered`, having applied nothing, when the recording has
 * no unfinished turn or is not this context's (the two belong together by the turn's id, which its
 * `TurnBegin` and the context's checkpoints carry: another session's recording, or a context a step
 * behind or ahead of its recording, is refused whole; a recording or a context without ids, written
 * before turns had them or restored from a history alone, is matched by the turn's user message); and when `maxResumes` (default 3) resumes in a row
 * made no progress (a resume while an approval waits costs nothing): then the round is closed with
 * interrupted results and the turn ends. A recording whose last line was cut mid-write is read up to
 * it, and `logger.warn` is told (end such a line before appending to the file again).
 */
export function resumeSoul(
  soul: Agent,
  recording: string | readonly (WireMessage | OtherWireMessage)[],
  uiLoop: (wire: Wire) => Promise<void>,
  signal: AbortSignal,
  options?: { recorder?: WireRecorder; logger?: Logger | null; maxResumes?: number },
): Promise<void>;
/** The unfinished turn of a recording, or null when its last turn ended (or it has none). */
export function unfinishedTurn(recording: string | readonly (WireMessage | OtherWireMessage)[]): null | {
  userInput: string | ContentPart[];
  /** The step the runtime was in (0: none had begun). */
  step: number;
  /** How many times it was resumed already. */
  resumes: number;
  waitingApprovals: Array<{ requestId: string; toolCallId: string; action: string }>;
};
/** A turn could not go on after its runtime stopped (see `resumeSoul`). */
export class TurnNotRecovered extends Error {
  constructor(message?: string);
}

/** A turn ran past its agent's `turnTimeoutMs` and was stopped. */
export class TurnTimeoutError extends Error {
  constructor(timeoutMs: number, message?: string);
  readonly timeoutMs: number;
}

export class RunCancelled extends Error {
  constructor(message?: string, options?: { cause?: unknown });
}
export class MaxStepsReached extends Error {
  constructor(nSteps: number);
  nSteps: number;
}
export class LLMNotSet extends Error {
  constructor();
}
export class LLMNotSupported extends Error {
  constructor(modelName: string, capabilities: string[]);
  modelName: string;
  capabilities: string[];
}
/**
 * The same tool call (name and canonical arguments) 12 times in a row stops the turn. Before that,
 * as in kimi-cli, a call repeated from an earlier step gets a `<system-reminder>` appended to its
 * output from the 3rd time in a row (stronger at the 5th and the 8th); the same call twice in one
 * step runs the tool once and both calls get its result.
 */
export class RepeatedToolCallError extends Error {
  constructor(toolName: string, count: number);
  toolName: string;
  count: number;
}
/** `receive()` after the wire shut down and every message was read. */
export class QueueShutDown extends Error {
  constructor();
}

export class Wire {
  /** A subscriber sees messages published after it subscribed. */
  uiSide<Own extends OtherWireMessage = never>(opts?: { merge?: boolean }): WireUISide<Own>;
  /** The soul side. Ignored after shutdown. */
  send(message: WireMessage | OtherWireMessage): void;
  respond(requestId: string, response: "approve" | "approve_for_session" | "reject", feedback?: string): void;
  /** Hands what the merged sides are still joining to them now; call it on a timer to get merged text at least that often. */
  flush(): void;
  /** Flushes the merge buffer and ends every side after what it already holds. */
  shutdown(): void;
}
/** Iteration ends at shutdown. `Own`: the messages of your own kinds it also carries (see `WireMessage`). */
export interface WireUISide<Own extends OtherWireMessage = never> extends AsyncIterable<WireMessage | Own> {
  receive(): Promise<WireMessage | Own>;
}
export const WIRE_PROTOCOL_VERSION: string;
/** Writes kimi-cli's wire.jsonl: a metadata line, then `{"timestamp", "message"}` lines of merged messages. */
export class WireRecorder {
  /**
   * Each line reaches the sink after the one before it was written (a returned Promise is awaited);
   * when no write is pending, at once (a synchronous sink has a tool's call before the tool starts).
   * `append`: the sink goes on with a recording begun before (a resumed turn's): no metadata line.
   */
  constructor(sink: (jsonLine: string) => void | Promise<void>, options?: { append?: boolean });
  /** Messages written so far. */
  readonly count: number;
  /** The first error the sink threw, if any. */
  error: unknown;
}
/** Reads wire.jsonl back (a damaged line is skipped). */
export function readWireRecord<Own extends OtherWireMessage = never>(jsonl: string): (WireMessage | Own)[];
/**
 * The messages that close a turn whose runtime died before it ended, from the messages recorded
 * for it, without going on: an interrupted `ToolResult` for each call without a result, then
 * `TurnEnd`. (`resumeSoul` goes on with the turn instead.)
 */
export function closeInterruptedTurn(messages: readonly (WireMessage | OtherWireMessage)[]): WireMessage[];

export class Context {
  /**
   * `sink` gets each new context.jsonl line; after `revertTo`/`clear`, `onRewrite` gets the whole new text.
   * A sink that throws is never silent: the change that failed to be stored throws the sink's error,
   * and an agent turn stops with it (after `StepInterrupted` and `TurnEnd`).
   */
  constructor(opts?: { systemPrompt?: string; sink?: (jsonLine: string) => void; onRewrite?: (jsonl: string) => void });
  readonly history: Message[];
  /** The last reported usage plus characters/4 of what came after it. */
  readonly tokenCount: number;
  readonly nCheckpoints: number;
  readonly systemPrompt: string | null;
  checkpoint(): number;
  revertTo(id: number): void;
  append(messages: Message | Message[]): void;
  updateTokenCount(n: number): void;
  clear(): void;
  toJSONL(): string;
  /** A damaged last line is skipped. */
  /**
   * Reads kimi-cli's `context.jsonl` as kimi-cli does: a line that is not JSON, not an object, has no
   * role, is an unknown `_` record or an invalid message or record is skipped, each told to
   * `logger.warn(message, {line, reason})` (else `console.warn`); a leading BOM is ignored.
   */
  static fromJSONL(text: string, opts?: { sink?: (jsonLine: string) => void; onRewrite?: (jsonl: string) => void; logger?: Logger | null }): Context;
}

// ---- tools from MCP servers -----------------------------------------------------------------

/** What McpToolset uses of an MCP client: `@modelcontextprotocol/sdk`'s `Client`, connected, has it. */
export interface McpClientLike {
  listTools(params?: { cursor?: string }): Promise<{ tools: Array<{ name: string; title?: string; description?: string; inputSchema?: object }>; nextCursor?: string }>;
  callTool(params: { name: string; arguments?: Record<string, unknown> }, resultSchema?: unknown, options?: { signal?: AbortSignal; timeout?: number }): Promise<unknown>;
  setNotificationHandler?(schema: any, handler: (notification: any) => void | Promise<void>): void;
}
/**
 * The Toolset protocol over a connected MCP client. A call goes to `client.callTool` with the
 * call's signal (an abort is MCP cancellation) and `timeoutMs`; text, images and audio (data URLs)
 * and resources (as text) become kosong parts; `isError` is an error result. Names get `prefix`,
 * and characters providers refuse become `_`; names that collide then get `_2`, `_3`, … in the order
 * of the server's names (stable across re-lists: a tool keeps its name), reported to `logger`. The
 * list is fetched again on `notifications/tools/list_changed` (a step that begins before it arrived
 * sees the old one; of overlapping re-lists the one begun last wins). A listing stops at 1,000
 * pages and 10,000 tools, each cut reported to `logger` (default `console.warn`).
 * In Cloudflare Workers give the client `jsonSchemaValidator: new CfWorkerJsonSchemaValidator()`
 * (the default compiles with `new Function`, which Workers refuse).
 */
export class McpToolset implements Toolset {
  static fromClient(client: McpClientLike, options?: { prefix?: string; timeoutMs?: number; onToolsChanged?(tools: ToolDefinition[]): void; logger?: Logger | null }): Promise<McpToolset>;
  readonly tools: ToolDefinition[];
  handle(call: ToolCall, ctx: ToolContext): Promise<ToolResult>;
  /** Lists the server's tools again. */
  refresh(): Promise<ToolDefinition[]>;
}

// ---- sessions on every host -----------------------------------------------------------------

/** What `new Agent(...)` takes, without `context` (a session gives its own). */
export type AgentOptions = Omit<ConstructorParameters<typeof Agent>[0], "context">;
/** How a turn ended. `error` says why it failed (`SessionStorageError`: its store refused a write). */
export type TurnOutcome = { outcome: "done" | "cancelled" | "failed" | "not_recovered"; error?: { name: string; message: string } };
/** A session's event: a recorded wire message, or a turn's end. Ids go up by one and never repeat. */
export type SessionEvent = { id: number; message: WireMessage; end?: undefined } | { id: number; end: TurnOutcome; message?: undefined };
/** One operation of a store's write (see `SessionStore.write`). */
export type SessionOp =
  | { op: "event"; id: number; kind: "wire" | "end"; data: string }
  | { op: "trimEvents"; before: number }
  | { op: "truncateEvents"; after: number }
  | { op: "context"; line: string }
  | { op: "truncateContext"; keep: number }
  /** A line of sub-agent `agent`'s context (`Agent.asTool`: its agent id). */
  | { op: "agentContext"; agent: string; line: string }
  /** Keep the first `keep` lines of sub-agent `agent`'s context. */
  | { op: "truncateAgentContext"; agent: string; keep: number }
  | { op: "meta"; value: string };
/**
 * What a store holds: context lines (kimi-cli's `context.jsonl`), events in id order, the last
 * commit record, and each sub-agent's context lines by agent id (a store that gives no `agents`
 * keeps no sub-agents: a sub-agent call in its session is an error result saying so).
 */
export interface StoredSession {
  context: string[];
  events: Array<{ id: number; kind: "wire" | "end"; data: string }>;
  meta: string | null;
  agents?: Record<string, string[]>;
}
/**
 * Where a session is kept. The rules are the session's; a store only performs: `open` takes the
 * session (one owner: another runtime holding it is `SessionLockedError`) and gives what it holds;
 * `write` applies the ops in order, all or nothing — or, when it cannot be atomic, in order with
 * the `meta` op last: that is the commit record, and anything written past the last one is taken
 * back when the session opens; a write that throws is a refused write. `close` lets the session go.
 * docs/sessions.md has a worked example of a store of one's own.
 */
export interface SessionStore {
  open(): Promise<StoredSession>;
  write(ops: SessionOp[]): Promise<void>;
  close(): Promise<void>;
  /**
   * Optional, for a store whose runtime can die unnoticed and that can wake it (a Durable Object's
   * alarm): while a turn runs that waits on no person, `at` (ms since the epoch) is when to wake
   * the host and open the session again (its unfinished turn then goes on); `null` when no
   * wake-up is needed. Told again, later, before `at` passes while the session is alive; a host
   * that wakes opens the session if it has none open (its unfinished turn then goes on).
   */
  wake?(at: number | null): Promise<void> | void;
}
/**
 * A chat session: its context and its running turn's recording in a store, one turn at a time.
 * Opened again after its runtime died (a reload, a SIGKILL, an eviction), the unfinished turn goes
 * on by itself: every recorded result kept, a call that may have run answered "interrupted" unless
 * its tool is idempotent, a `needsApproval` wait waiting again under its request id, a stored cancel
 * ending it cancelled. Every event is stored before it is told, and a tool starts only once its call
 * is stored. docs/sessions.md.
 */
export class Session {
  static open(
    store: SessionStore,
    /** The options of the Agent each turn runs (no `context`), or a function that returns them (called for each turn). */
    agent: AgentOptions | (() => AgentOptions),
    options?: {
      /** Resumes in a row without progress before the unfinished turn is given up. Default 3. */
      maxResumes?: number;
      logger?: Logger | null;
      /** One message, in bytes of UTF-8. Default 1 MiB. */
      maxMessageBytes?: number;
      /** The whole context, in bytes. Default 16 MiB. */
      maxSessionBytes?: number;
      /** Default 200. */
      maxTurns?: number;
      /** A turn that records nothing for this long (ms), while no person is awaited, is stopped. Default 300,000. */
      stallMs?: number;
      /** For a store with `wake`: how far ahead (ms) the wake-up is set while a turn runs. Default 5,000. */
      watchMs?: number;
    },
  ): Promise<Session>;
  /** The unfinished turn found at open, resumed and ended; null when there was none. */
  readonly recovered: Promise<TurnOutcome | null>;
  /** Starts a turn (`SessionBusyError` while one runs, `SessionLimitError` past a limit: nothing counted) and resolves when it ends. */
  send(input: string | ContentPart[]): Promise<TurnOutcome>;
  /** The stored events after `after` (an event id), then the live ones; ends when the session closes. */
  events(options?: { after?: number }): AsyncIterable<SessionEvent>;
  /** Answers an approval request the running (or recovered) turn waits on; the first answer counts. */
  respond(requestId: string, response: "approve" | "approve_for_session" | "reject", feedback?: string): Promise<void>;
  /** Resolves once the cancel is stored: a turn cancelled before its runtime died ends cancelled. */
  cancel(): Promise<void>;
  /** The stored history. */
  readonly history: Message[];
  readonly running: boolean;
  /** Lets the store go; a running turn is left as a dead runtime leaves it (the next open resumes it). */
  close(): Promise<void>;
}
/** A turn runs in this session (one at a time), or its store is being repaired. */
export class SessionBusyError extends Error {}
/** Another runtime owns the session's store (a second tab, a second process). */
export class SessionLockedError extends Error {}
/** A message or the session is over one of its limits; nothing was counted. */
export class SessionLimitError extends Error {
  /** Which limit refused it. */
  readonly option: "maxMessageBytes" | "maxSessionBytes" | "maxTurns";
  /** That limit's value (bytes, or turns). */
  readonly limit: number;
}
/** A session in memory (tests; a page that keeps nothing): one owner at a time. */
export class MemorySessionStore implements SessionStore {
  constructor();
  open(): Promise<StoredSession>;
  write(ops: SessionOp[]): Promise<void>;
  close(): Promise<void>;
}
/**
 * Browsers: a session in an IndexedDB database (`kosong-session:<name>`), one owner across tabs: a
 * Web Lock held from `open` to `close` (released with the page, so a reloaded page takes it and its
 * unfinished turn goes on). A second tab is refused with `SessionLockedError`, or waits for the
 * lock with `{wait: true}`. Every write is one IndexedDB transaction.
 */
export class IndexedDBSessionStore implements SessionStore {
  constructor(name: string, options?: { wait?: boolean });
  open(): Promise<StoredSession>;
  write(ops: SessionOp[]): Promise<void>;
  close(): Promise<void>;
}
/**
 * Node: a session in a directory as kimi-cli keeps one — `context.jsonl` and `wire.jsonl` (which
 * kimi-cli 1.52 reads; each record carries its event id) — plus `session.jsonl` (turn ends and
 * commit records) and a lock: a second process is refused with `SessionLockedError`; a lock left
 * by a dead process is taken over. A sub-agent's context is kimi-cli's
 * `subagents/<agent id>/context.jsonl`. Every write is made durable (fsync) before it is reported.
 * Node only: the browser entry's throws a `TypeError` naming `IndexedDBSessionStore`.
 */
export class FileSessionStore implements SessionStore {
  constructor(dir: string);
  open(): Promise<StoredSession>;
  write(ops: SessionOp[]): Promise<void>;
  close(): Promise<void>;
}

// ---- the AI SDK's UI message stream (useChat) ------------------------------------------------

/** One chunk of the AI SDK's UI message stream (`start`, `text-delta`, `tool-input-available`, `finish`, …). */
export type UIMessageChunk = { type: string; [field: string]: unknown };
/** `content-type: text/event-stream`, `x-vercel-ai-ui-message-stream: v1`, … */
export const UI_MESSAGE_STREAM_HEADERS: Readonly<Record<string, string>>;
/**
 * Turns wire messages into UI message chunks: text and thinking as `text-*`/`reasoning-*` blocks,
 * calls as `tool-input-start`/`-delta`/`-available`, results as `tool-output-available`/`-error`/
 * `-denied`, approvals as `tool-approval-request`/`-response`, steps as `start-step`/`finish-step`
 * (a retried step's void attempt as `reset-step`). The same messages give the same chunks, so a
 * recording replays as the live stream did.
 */
export class UIMessageChunker {
  constructor(opts?: { messageId?: string });
  /** `start` (once). */
  start(): UIMessageChunk[];
  push(message: WireMessage | OtherWireMessage): UIMessageChunk[];
  /** `finish`; `abort` when cancelled; `error` with the error's words; `pause`: an approval the client answers next (`finish`). */
  end(outcome?: { error?: unknown; cancelled?: boolean; reason?: string; pause?: boolean }): UIMessageChunk[];
}
/**
 * Runs `soul` (through `runSoul`) and yields its wire as UI message chunks, then `finish`, `abort`
 * (cancelled through `signal`) or `error`. With `uiMessageStreamResponse` a server serves `useChat`.
 */
export function uiMessageStream(
  soul: Soul,
  userInput: string | ContentPart[],
  signal: AbortSignal,
  options?: { messageId?: string; merge?: boolean; recorder?: WireRecorder; onWire?(wire: Wire): void },
): AsyncIterable<UIMessageChunk>;
/** A `Response` serving `chunks` as the UI message stream (SSE, one chunk a `data:` line, then `[DONE]`). */
export function uiMessageStreamResponse(chunks: AsyncIterable<UIMessageChunk>, init?: { status?: number; headers?: Record<string, string> }): Response;
