// The provider errors: `Error` subclasses exported by name, each with a machine-readable
// `kind` ("connection", "timeout", "empty", "status", "malformed", "truncated", "limit",
// "server", "invalid_request", "other") and the `cause` that led to it when there is one.

export class ChatProviderError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = "ChatProviderError";
    this.kind = options?.kind ?? "other";
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

const errorClasses = { ChatProviderError, APIConnectionError, APITimeoutError, APIEmptyResponseError };

/** The engine's error factory: `fields` holds `kind`, `status`, `requestId`, `retryAfterMs`, `cause`. */
export function makeError(className, message, fields) {
  const { kind, cause } = fields;
  const options = cause === undefined ? { kind } : { kind, cause };
  if (className === "APIStatusError") {
    return new APIStatusError(message, { status: fields.status, requestId: fields.requestId, retryAfterMs: fields.retryAfterMs, cause });
  }
  return new (errorClasses[className] ?? ChatProviderError)(message, options);
}
