// The public API (index.d.ts): exactly these names. Every runtime entry re-exports this file.
export { init, memoryBytes, setMemoryBudget, memoryBudget } from "./internal.js";
export { ChatProviderError, APIConnectionError, APITimeoutError, APIEmptyResponseError, APIStatusError } from "./errors.js";
export { toolOk, toolError, SimpleToolset } from "./tools.js";
export { PartialJson } from "./preview.js";
export { OpenAIChatProvider, KimiProvider, AnthropicProvider, OpenAIResponsesProvider, GeminiProvider, ScriptedProvider, FallbackProvider } from "./providers.js";
export { ChaosProvider } from "./chaos.js";
export { generate, step, StepResult } from "./step.js";
export { Wire, WireRecorder, readWireRecord, closeInterruptedTurn, unfinishedTurn, WIRE_PROTOCOL_VERSION, QueueShutDown } from "./wire.js";
export { Context } from "./context.js";
export { Agent, runSoul, resumeSoul, RunCancelled, MaxStepsReached, LLMNotSet, LLMNotSupported, RepeatedToolCallError, TurnNotRecovered, TurnTimeoutError } from "./agent.js";
export { UIMessageChunker, uiMessageStream, uiMessageStreamResponse, UI_MESSAGE_STREAM_HEADERS } from "./ui-stream.js";
export { McpToolset } from "./mcp.js";
export { Session, MemorySessionStore, SessionBusyError, SessionLockedError, SessionLimitError } from "./session.js";
export { FileSessionStore } from "./session-file.js";
export { IndexedDBSessionStore } from "./session-idb.js";
