// The provider errors: `Error` subclasses exported by name, each with a machine-readable
// `kind` ("connection", "timeout", "empty", "status", "malformed", "truncated", "limit",
// "server", "invalid_request", "refused", "malformed_output", "other") and the `cause` that led
// to it when there is one. A `malformed_output` error keeps the answer's text as `text`.

export class ChatProviderError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = "ChatProviderError";
    this.kind = options?.kind ?? "other";
    if (options?.text !== undefined) this.text = options.text;
  }
}
export class APIConnectionError extends ChatProviderError {
  constructor(message, options) {
    super(message, { kind: "connection", ...options });
    this.name = "APIConnectionError";
  }
}
export class APITimeoutError extends ChatProviderError {
  constructor(message, options) {
    super(message, { kind: "timeout", ...options });
    this.name = "APITimeoutError";
  }
}
export class APIEmptyResponseError extends ChatProviderError {
  constructor(message, options) {
    super(message, { kind: "empty", ...options });
    this.name = "APIEmptyResponseError";
  }
}
export class APIStatusError extends ChatProviderError {
  constructor(message, { status, requestId = null, retryAfterMs = null, cause } = {}) {
    super(message, cause === undefined ? { kind: "status" } : { kind: "status", cause });
    this.name = "APIStatusError";
    this.status = status;
    this.requestId = requestId;
    this.retryAfterMs = retryAfterMs;
  }
}

// The agent runtime's own errors: their messages are the core's (worded once, in Rust); `message`
// is given by the engine, else asked for.
let wording = null;
/** Installed when the module loads: `(className, fields) => message`. */
export function setRuntimeErrorWording(f) {
  wording = f;
}
const worded = (className, fields, message) => message ?? wording?.(className, fields) ?? className;

export class MaxStepsReached extends Error {
  constructor(nSteps, message) {
    super(worded("MaxStepsReached", { nSteps }, message));
    this.name = "MaxStepsReached";
    this.nSteps = nSteps;
  }
}
export class LLMNotSet extends Error {
  constructor(message) {
    super(worded("LLMNotSet", {}, message));
    this.name = "LLMNotSet";
  }
}
export class LLMNotSupported extends Error {
  constructor(modelName, capabilities, message) {
    super(worded("LLMNotSupported", { modelName, capabilities }, message));
    this.name = "LLMNotSupported";
    this.modelName = modelName;
    this.capabilities = capabilities;
  }
}
/**
 * A turn could not go on after its runtime stopped: its recording holds no unfinished turn, is
 * not this context's (nothing was applied), or its resumes made no progress.
 */
export class TurnNotRecovered extends Error {
  constructor(message) {
    super(message ?? "The turn could not go on after its runtime stopped.");
    this.name = "TurnNotRecovered";
  }
}
/** A turn ran past the agent's `turnTimeoutMs` and was stopped (what was open closed, as a cancel closes it). */
export class TurnTimeoutError extends Error {
  constructor(timeoutMs, message) {
    super(worded("TurnTimeoutError", { timeoutMs }, message));
    this.name = "TurnTimeoutError";
    this.timeoutMs = timeoutMs;
  }
}
/** The model called the same tool with the same arguments too many times in a row. */
export class RepeatedToolCallError extends Error {
  constructor(toolName, count, message) {
    super(worded("RepeatedToolCallError", { toolName, count }, message));
    this.name = "RepeatedToolCallError";
    this.toolName = toolName;
    this.count = count;
  }
}

const errorClasses = { ChatProviderError, APIConnectionError, APITimeoutError, APIEmptyResponseError };
const runtimeErrors = {
  MaxStepsReached: (m, f) => new MaxStepsReached(f.nSteps, m),
  LLMNotSet: (m) => new LLMNotSet(m),
  LLMNotSupported: (m, f) => new LLMNotSupported(f.modelName, f.capabilities, m),
  RepeatedToolCallError: (m, f) => new RepeatedToolCallError(f.toolName, f.count, m),
  TurnNotRecovered: (m) => new TurnNotRecovered(m),
  TurnTimeoutError: (m, f) => new TurnTimeoutError(f.timeoutMs, m),
};

/**
 * The engine's error factory, the one place a class is chosen: a provider error's `fields` hold
 * `kind`, `status`, `requestId`, `retryAfterMs`, `cause`; a runtime error's its class's fields.
 */
export function makeError(className, message, fields) {
  if (className in runtimeErrors) return runtimeErrors[className](message, fields);
  const { kind, cause, text } = fields;
  const options = cause === undefined ? { kind } : { kind, cause };
  if (text !== undefined) options.text = text;
  if (className === "APIStatusError") {
    return new APIStatusError(message, { status: fields.status, requestId: fields.requestId, retryAfterMs: fields.retryAfterMs, cause });
  }
  return new (errorClasses[className] ?? ChatProviderError)(message, options);
}
