// One life of a Node process that runs an agent turn with its recording and context in files,
// as an app would: `start` runs a new turn, `resume` goes on with the one a killed process left.
// Used by durable.test.mjs, which kills it with SIGKILL. Prints one JSON object a line.
//   node durable-child.mjs <dir> <baseUrl> start|resume '<flags JSON>'
// flags: {hold: the tool keeps running after its side effect, ask: it asks for approval first,
//         idempotent: the tool is declared idempotent, approve: answer a waiting approval on resume}
import * as k from "kosong-wasm";
import { appendFileSync, existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

const [dir, baseUrl, mode, flagsJson] = process.argv.slice(2);
const flags = JSON.parse(flagsJson ?? "{}");
const say = (o) => process.stdout.write(JSON.stringify(o) + "\n");
const files = { context: join(dir, "context.jsonl"), wire: join(dir, "wire.jsonl"), sent: join(dir, "sent.log") };
const logger = { warn: (message) => say({ warn: message }) };
const sink = (line) => appendFileSync(files.context, line + "\n");
// A line cut mid-write is ended before anything is appended after it.
const endLine = (file) => {
  if (existsSync(file)) {
    const text = readFileSync(file, "utf8");
    if (text && !text.endsWith("\n")) appendFileSync(file, "\n");
  }
};
endLine(files.context);
const context = existsSync(files.context)
  ? k.Context.fromJSONL(readFileSync(files.context, "utf8"), { sink, logger })
  : new k.Context({ systemPrompt: "You send emails.", sink });

const tools = new k.SimpleToolset([
  {
    name: "send_email",
    description: "Sends an email",
    parameters: { type: "object", properties: { to: { type: "string" } }, required: ["to"] },
    idempotent: Boolean(flags.idempotent),
    // Asked before the handler starts: the way an approval survives a SIGKILL.
    needsApproval: Boolean(flags.ask),
    handler: async ({ to }, ctx) => {
      appendFileSync(files.sent, `${ctx.toolCallId} ${to}\n`);
      say({ sent: ctx.toolCallId });
      if (flags.hold) await new Promise(() => {}); // still running when the process is killed
      return `sent to ${to}`;
    },
  },
]);
const agent = new k.Agent({
  provider: new k.OpenAIChatProvider({ model: "m", apiKey: "sk-test", baseUrl }),
  systemPrompt: "You send emails.",
  toolset: tools,
  context,
  logger,
});
if (flags.hold || flags.ask) setInterval(() => {}, 1000); // the process lives until it is killed

const ui = (turn) => async (wire) => {
  for await (const m of wire.uiSide({ merge: true })) {
    say({ wire: m.type });
    if (m.type === "Notification" && flags.approve) wire.respond(turn.waitingApprovals[0].requestId, "approve");
  }
};
const signal = new AbortController().signal;
try {
  if (mode === "start") {
    const recorder = new k.WireRecorder((line) => appendFileSync(files.wire, line + "\n"));
    await k.runSoul(agent, "Mail a@b.c", ui(null), signal, { recorder });
  } else {
    endLine(files.wire);
    const recording = readFileSync(files.wire, "utf8");
    const turn = k.unfinishedTurn(recording);
    say({ unfinished: turn });
    const recorder = new k.WireRecorder((line) => appendFileSync(files.wire, line + "\n"), { append: true });
    await k.resumeSoul(agent, recording, ui(turn), signal, { recorder, logger });
  }
  say({ done: true, roles: agent.context.history.map((m) => m.role) });
} catch (e) {
  say({ error: e.name, message: e.message });
}
process.exit(0);
