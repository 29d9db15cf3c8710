// kimi-cli's soul runtime for the web: Agent (a Soul) and runSoul. Thin wrappers: the turn
// loop, its retries, approvals, compaction and repeated-call rules run in the wasm core
// (src/engine/soul/); this module checks the options' types (the runtime's errors are errors.js's).
import { callWasm, wasm } from "./internal.js";
import { SimpleToolset, RUN, toolError } from "./tools.js";
import { coreOf, outputOption } from "./step.js";
import { Wire, WireRecorder, wireCore, recordedMessages, unfinishedTurn } from "./wire.js";
import { Context, contextCore } from "./context.js";
import { checkLogger, checkOptionNames } from "./util.js";
import { telemetryOption, TRACE } from "./telemetry.js";

export { MaxStepsReached, LLMNotSet, LLMNotSupported, RepeatedToolCallError, TurnNotRecovered, TurnTimeoutError } from "./errors.js";

export class RunCancelled extends Error {
  constructor(message = "The run was cancelled", options) {
    super(message, options);
    this.name = "RunCancelled";
  }
}
// ---- the agent ------------------------------------------------------------------------------

const BACKOFF_KEYS = ["initialMs", "maxMs", "jitterMs"];

/**
 * A Soul: each turn steps until the model stops calling tools, publishing every part, tool
 * result and status on the run's wire, with kimi-cli's retries, compaction, approvals and
 * repeated-call rules. The turn runs in the wasm core; this class holds its options.
 */
const AGENT_OPTIONS = ["name", "provider", "systemPrompt", "toolset", "context", "maxStepsPerTurn", "maxRetriesPerStep", "maxContextTokens", "capabilities", "yolo", "logger", "limits", "retryBackoff", "output", "toolTimeoutMs", "turnTimeoutMs", "telemetry"];

export class Agent {
  #core;
  #name;
  #provider;
  #toolset;
  #context;
  #logger;
  #telemetry;

  constructor(opts) {
    if (!opts || typeof opts !== "object") throw new TypeError("Agent needs options: {provider, systemPrompt, …}");
    checkOptionNames(opts, "Agent", AGENT_OPTIONS);
    const { name = "agent", provider = null, systemPrompt = "", toolset, context, maxStepsPerTurn, maxRetriesPerStep,
      maxContextTokens = 0, capabilities, yolo = false, logger, limits, retryBackoff = {}, output, toolTimeoutMs, turnTimeoutMs, telemetry } = opts;
    if (typeof name !== "string") throw new TypeError("Agent: name must be a string");
    if (typeof systemPrompt !== "string") throw new TypeError("Agent: systemPrompt must be a string");
    // Left out, they take the core's defaults (AgentConfig::default; index.d.ts documents them).
    if (maxStepsPerTurn !== undefined && (!Number.isInteger(maxStepsPerTurn) || maxStepsPerTurn < 1)) throw new TypeError("Agent: maxStepsPerTurn must be a positive integer");
    if (maxRetriesPerStep !== undefined && (!Number.isInteger(maxRetriesPerStep) || maxRetriesPerStep < 1)) throw new TypeError("Agent: maxRetriesPerStep must be a positive integer (attempts per step)");
    if (!(typeof maxContextTokens === "number" && maxContextTokens >= 0)) throw new TypeError("Agent: maxContextTokens must be a number ≥ 0");
    if (capabilities !== undefined && !(Array.isArray(capabilities) && capabilities.every((c) => typeof c === "string"))) {
      throw new TypeError("Agent: capabilities must be an array of strings");
    }
    const providerCore = provider === null ? null : coreOf(provider, "Agent: provider", " or null");
    const tools = toolset ?? new SimpleToolset();
    if (typeof tools.handle !== "function" || !Array.isArray(tools.tools)) {
      throw new TypeError("Agent: toolset must have a `tools` array and a `handle(call, ctx)` method");
    }
    if (context !== undefined && !(context instanceof Context)) throw new TypeError("Agent: context must be a Context");
    const log = checkLogger(logger, "Agent: logger");
    for (const [key, v] of Object.entries(retryBackoff ?? {})) {
      if (!BACKOFF_KEYS.includes(key)) throw new TypeError(`Agent: retryBackoff has no \`${key}\` (initialMs, maxMs, jitterMs)`);
      if (!(typeof v === "number" && v >= 0)) throw new TypeError(`Agent: retryBackoff.${key} must be a number ≥ 0`);
    }
    this.#name = name;
    this.#provider = provider;
    this.#toolset = tools;
    this.#context = context ?? new Context();
    this.#logger = log;
    this.#telemetry = telemetryOption(telemetry, "Agent");
    const outputSpec = outputOption(output, "Agent", tools._validate);
    this.#core = callWasm(() => new wasm.AgentCore({ name, systemPrompt, maxStepsPerTurn, maxRetriesPerStep, maxContextTokens, capabilities,
      yolo: Boolean(yolo), retryBackoff, limits, output: outputSpec, toolTimeoutMs, turnTimeoutMs }));
    if (providerCore !== null) this.#core.setProvider(providerCore);
  }

  get name() {
    return this.#name;
  }
  get modelName() {
    return this.#provider?.modelName ?? "";
  }
  get context() {
    return this.#context;
  }
  get status() {
    return callWasm(() => this.#core.status(contextCore(this.#context)));
  }
  /** With `output`: the last turn's structured output, parsed (`undefined` before one, or when it failed). */
  get output() {
    return this.#core.output;
  }

  /** Runs one turn. `run` comes from `runSoul`: `{wire, signal, send, requestApproval}`. */
  async run(userInput, run) {
    if (!run || !(run.wire instanceof Wire)) throw new TypeError("Agent.run needs the run context runSoul gives it ({wire, signal, …})");
    await this.#traced(run, userInput, (toolset) =>
      callWasm(() => this.#core.run(userInput, wireCore(run.wire), contextCore(this.#context), toolset, this.#hooks(run))));
  }

  /**
   * Goes on with the turn whose runtime died, from its recorded messages (`resumeSoul` gives
   * them, with the run). Rejects with `TurnNotRecovered`, applying nothing, when the recording
   * holds no unfinished turn or is not this agent's context's.
   */
  async resume(messages, run, { maxResumes } = {}) {
    if (!run || !(run.wire instanceof Wire)) throw new TypeError("Agent.resume needs the run context resumeSoul gives it ({wire, signal, …})");
    const hooks = { ...this.#hooks(run), maxResumes };
    await this.#traced(run, undefined, (toolset) =>
      callWasm(() => this.#core.resume(JSON.stringify(messages), wireCore(run.wire), contextCore(this.#context), toolset, hooks)));
  }

  /**
   * @internal A turn of a Session (`js/session.js`): `input` starts one (refused, nothing counted,
   * with `{refused, message}` thrown), `undefined` takes up the one its store holds unfinished.
   * Returns the turn's promise, or null when there is nothing to take up.
   */
  _session(sessionCore, input, run) {
    const t = this.#telemetry;
    // With telemetry, the turn is an `invoke_agent` span and each tool call an `execute_tool` one in it.
    const toolset = t ? t.wrap(this.#toolset) : this.#toolset;
    const hooks = this.#hooks(run);
    const wc = wireCore(run.wire);
    const cc = contextCore(this.#context);
    const span = t?.turn(this, this.#provider, run.wire, input);
    let started;
    try {
      started =
        input === undefined
          ? callWasm(() => this.#core.resumeSession(sessionCore, wc, cc, toolset, hooks))
          : callWasm(() => this.#core.runSession(sessionCore, input, wc, cc, toolset, hooks));
    } catch (e) {
      span?.fail(e);
      throw e;
    }
    if (!started) {
      span?.end();
      return null;
    }
    if (!span) return started;
    return started.then(
      () => span.end(),
      async (e) => {
        await span.fail(e);
        throw e;
      },
    );
  }

  /** `turn(toolset)`, inside an `invoke_agent` span when the agent has `telemetry` (its tools' calls inside theirs). */
  async #traced(run, userInput, turn) {
    const t = this.#telemetry;
    if (!t) return turn(this.#toolset);
    const span = t.turn(this, this.#provider, run.wire, userInput);
    try {
      await turn(t.wrap(this.#toolset));
    } catch (e) {
      await span.fail(e);
      throw e;
    }
    await span.end();
  }

  /**
   * This agent as a tool (a sub-agent, as kimi-cli's `Agent` tool runs one): a call `{prompt,
   * description?, resume?}` runs one turn of this agent in a new instance (or the one `resume`
   * names) with its own context, on the caller's provider when it has none; its events go on the
   * caller's wire as `SubagentEvent`s, its approvals are asked there; the result is its final
   * answer (asked once more when under 200 characters). `maxDepth` (default 2): how many
   * sub-agents deep a call may run.
   */
  asTool({ name = this.#name, description, maxDepth = 2, timeoutMs } = {}) {
    if (typeof name !== "string") throw new TypeError("Agent.asTool: name must be a string");
    if (description !== undefined && typeof description !== "string") throw new TypeError("Agent.asTool: description must be a string");
    if (!Number.isInteger(maxDepth) || maxDepth < 1) throw new TypeError("Agent.asTool: maxDepth must be a positive integer");
    const tool = {
      name,
      description: description ?? `Starts the \`${name}\` sub-agent on a task and returns its final answer. Resume an instance by its agent_id to go on with its context.`,
      parameters: {
        type: "object",
        properties: {
          prompt: { type: "string", description: "The task for the agent to perform" },
          description: { type: "string", description: "A short (3-5 word) description of the task" },
          resume: { type: "string", description: "Optional agent ID to resume instead of creating a new instance." },
        },
        required: ["prompt"],
      },
      handler: (args, ctx) => this.#runAsTool(name, maxDepth, args, ctx),
      // Run again after a death with the same call id, the call goes on with what its sub-agent
      // recorded (its context in the session's store): nothing of it runs twice.
      idempotent: true,
    };
    if (timeoutMs !== undefined) tool.timeoutMs = timeoutMs;
    return tool;
  }

  #runAsTool(name, maxDepth, args, ctx) {
    const run = ctx?.[RUN];
    if (!run) return toolError({ message: `The \`${name}\` sub-agent runs only inside an agent run (runSoul, a Session, AgentSession), not in a plain step.`, brief: "Agent unavailable" });
    if (typeof args?.prompt !== "string") return toolError({ message: "The sub-agent needs a `prompt` string.", brief: "Invalid arguments" });
    const resume = typeof args.resume === "string" && args.resume !== "" ? args.resume : null;
    const trace = ctx[TRACE];
    const t = this.#telemetry ?? trace?.telemetry.fork();
    const wire = new Wire();
    const toolset = t ? t.wrap(this.#toolset) : this.#toolset;
    const span = t?.turn(this, this.#provider, wire, args.prompt, trace?.context);
    const call = { ...this.#hooks({ signal: ctx.signal }), callId: ctx.toolCallId, prompt: args.prompt, resume, kind: name, maxDepth };
    const started = callWasm(() => this.#core.runSubagent(run, wireCore(wire), toolset, call));
    if (!span) return started;
    return started.then((rv) => {
      if (rv?.is_error) span.fail({ name: "ToolError", message: rv.message });
      else span.end();
      return rv;
    });
  }

  #hooks(run) {
    const logger = this.#logger;
    return { signal: run.signal ?? undefined, warn: logger ? (message, fields) => logger.warn(message, fields) : undefined, simple: this.#toolset._simpleId };
  }
}

// ---- runSoul --------------------------------------------------------------------------------

/**
 * Runs `soul` on `userInput`, connecting it to `uiLoop` through a new Wire (the core's
 * `run_soul`). When `signal` aborts, the soul is cancelled (every tool's signal aborts) and this
 * rejects with `RunCancelled`; otherwise the soul's own error is rethrown. Always: the wire is
 * shut down (its merge buffer flushed), the recorder has written every message, and the UI loop
 * had up to 0.5 s to finish.
 */
export async function runSoul(soul, userInput, uiLoop, signal, options = {}) {
  if (!soul || typeof soul.run !== "function") throw new TypeError("runSoul: soul must have a run(userInput, run) method");
  checkRun("runSoul", uiLoop, signal, options);
  return runOnWire((run) => soul.run(userInput, run), uiLoop, signal, options.recorder);
}

/**
 * Goes on with a turn whose runtime died (a deploy, an eviction, a killed process), from its
 * recording (`recording`: the text of its `wire.jsonl`, or its messages) and the agent's context
 * (restored from its `context.jsonl`), as `runSoul` runs a turn — same wire, same promise. The
 * recorded round is kept; a call that ran without a recorded result is answered "interrupted"
 * (it runs again only if its tool is `idempotent`); a waiting approval waits again under its
 * request id; then the turn goes on with its next step. `options.recorder` should append to the
 * same recording (`new WireRecorder(sink, {append: true})`). `options.maxResumes` (default 3):
 * resumes in a row without progress before the turn is given up (`TurnNotRecovered`).
 * A recording whose last line was cut mid-write is read up to it, told to `options.logger`.
 */
export async function resumeSoul(soul, recording, uiLoop, signal, options = {}) {
  if (!soul || typeof soul.resume !== "function") throw new TypeError("resumeSoul: soul must have a resume(messages, run) method (an Agent)");
  checkRun("resumeSoul", uiLoop, signal, options);
  const { logger, maxResumes } = options;
  const log = checkLogger(logger, "resumeSoul: options.logger");
  if (maxResumes !== undefined && !(Number.isInteger(maxResumes) && maxResumes >= 0)) throw new TypeError("resumeSoul: options.maxResumes must be an integer ≥ 0");
  const warn = log ? (m, f) => log.warn(m, f) : () => {};
  const messages = recordedMessages(recording, "resumeSoul", warn);
  // The approvals the recorded turn waits on can be answered at once, before the turn reaches them.
  let waiting = [];
  try {
    waiting = (unfinishedTurn(messages)?.waitingApprovals ?? []).map((a) => a.requestId);
  } catch {} // a recording the resume refuses: it says why
  return runOnWire((run) => soul.resume(messages, run, { maxResumes }), uiLoop, signal, options.recorder, waiting);
}

function checkRun(who, uiLoop, signal, options) {
  checkOptionNames(options ?? {}, `${who}: options`, who === "resumeSoul" ? ["recorder", "logger", "maxResumes"] : ["recorder"]);
  if (typeof uiLoop !== "function") throw new TypeError(`${who}: uiLoop must be a function (wire) => Promise<void>`);
  if (!signal || typeof signal.addEventListener !== "function" || !("aborted" in signal)) throw new TypeError(`${who}: signal must be an AbortSignal`);
  if (options?.recorder !== undefined && !(options.recorder instanceof WireRecorder)) throw new TypeError(`${who}: options.recorder must be a WireRecorder`);
}

/** One run of `start(run)` over a new wire beside `uiLoop` (the core's `run_soul`). */
async function runOnWire(start, uiLoop, signal, recorder, expected = []) {
  const wire = new Wire();
  const core = wireCore(wire);
  recorder?._attach(wire);
  for (const id of expected) core.expectApproval(id);
  const run = {
    wire,
    signal,
    send: (message) => wire.send(message),
    requestApproval: (req) => callWasm(() => core.requestApproval(req ?? {})),
  };
  // The UI loop starts first: its synchronous part subscribes before the soul publishes.
  // Its own failure does not fail the run.
  let uiDone;
  try {
    uiDone = Promise.resolve(uiLoop(wire)).catch(() => {});
  } catch {
    uiDone = Promise.resolve();
  }
  const soulDone = Promise.resolve().then(() => start(run));
  // A run keeps a Node process alive while it lasts, as a server socket would: a turn waiting on a
  // person (an approval) has nothing else pending, and the process would exit mid-turn.
  const alive = setInterval(() => {}, 1 << 30);
  let cancelled;
  try {
    cancelled = await callWasm(() => wasm.runSoul(core, soulDone, uiDone, signal, recorder ? () => recorder._written() : undefined));
  } finally {
    clearInterval(alive);
    recorder?._ended();
  }
  if (cancelled) throw new RunCancelled("The run was cancelled", { cause: signal.reason });
}
