// kosong-wasm/cloudflare: the agent chat session as a Cloudflare Durable Object (workerd only).
import type { Agent, SessionStore, SessionOp, StoredSession } from "./index.js";

type AgentOptions = ConstructorParameters<typeof Agent>[0];

/** Caps, in bytes of UTF-8 unless said otherwise; each can be set as a Worker var of the same name. */
export const SESSION_LIMITS: Readonly<{
  MAX_MESSAGE_BYTES: number;
  MAX_SESSION_BYTES: number;
  MAX_TURNS_PER_SESSION: number;
  MAX_TURNS_PER_CLIENT_PER_HOUR: number;
  MAX_SESSIONS_PER_CLIENT_PER_HOUR: number;
  /** How soon the alarm looks at a running turn (ms): a dead runtime's turn goes on after at most this. Default 5000. */
  RECOVERY_ALARM_MS: number;
  /** A turn that records nothing for this long (ms), while no person is awaited, is stopped (a model stream stuck open). Default 300,000. */
  TURN_STALL_MS: number;
}>;
/** A cap: the var of that name when it is a positive number, else its default. */
export function sessionLimit(env: Record<string, unknown>, name: keyof typeof SESSION_LIMITS): number;

/**
 * A `SessionStore` on a Durable Object's SQLite (every write one transaction; a value over a row's
 * 2 MB stored across rows) and its alarm (the session's `wake`). One object, one session: no lock.
 */
export class DurableObjectSessionStore implements SessionStore {
  constructor(ctx: unknown);
  open(): Promise<StoredSession>;
  write(ops: SessionOp[]): Promise<void>;
  close(): Promise<void>;
  wake(at: number | null): Promise<void>;
}

/**
 * A chat session as a Durable Object (bind it with SQLite storage, `new_sqlite_classes`). Subclass it
 * and define `agentOptions()`. It is the package's `Session` on `DurableObjectSessionStore`: the
 * session's Context and the running turn's recording (one event a wire message, ids increasing) in
 * SQLite, resume by `Last-Event-ID`, the AI SDK UI message stream and its resume route, approvals,
 * cancel, and recovery: while a turn runs that waits on no person an alarm stays set, so when the
 * runtime that ran it dies the turn goes on by itself from its recording, with no client connected.
 * Its `fetch` answers the session's routes (see the module's text); the Worker in front of it
 * decides who may call them.
 */
export class AgentSession {
  constructor(ctx: unknown, env: unknown);
  readonly ctx: any;
  readonly env: any;
  /** The session's store (`sessionStore()`'s). */
  readonly store: SessionStore;
  /** The options of the Agent each turn runs (the session gives `context`). */
  agentOptions(): Omit<AgentOptions, "context">;
  /** Where the session is kept (called once, in the constructor): this object's SQLite and alarm; a subclass may wrap or replace it. */
  sessionStore(): SessionStore;
  fetch(request: Request): Promise<Response>;
  alarm(): Promise<void>;
}

/** Counts a client's uses over the last hour, one object per client (call `take` through RPC). */
export class ClientLimits {
  constructor(ctx: unknown, env: unknown);
  take(kind: string, max: number): { ok: true } | { ok: false; retryAfter: number };
}

/** A JSON response. */
export function json(status: number, body: unknown, headers?: Record<string, string>): Response;
/** A request body of at most `max` bytes as text, or null past it (however it was sent). */
export function readCapped(request: Request, max: number): Promise<string | null>;
/** A JSON object body of at most `max` bytes: `{body}`, or `{error}`, a 400/413 response to send. */
export function readJsonBody(request: Request, max: number, what: string): Promise<{ body: Record<string, any>; error?: undefined } | { body?: undefined; error: Response }>;
/** A new session id: 128 random bits as hex. */
export function newSessionId(): string;
/** `v1.<session>.<HMAC-SHA-256(secret, "v1.<session>.<client>")>`: names the session and binds it to the client. */
export function issueToken(secret: string, session: string, client: string | null): Promise<string>;
/** The session the request's `Authorization: Bearer` token names, if genuine and issued to `client`. */
export function verifyToken(secret: string, request: Request, client: string | null): Promise<string | null>;
/** The text of a UI message (`useChat`'s `{role, parts}`). */
export function uiText(message: unknown): string;
