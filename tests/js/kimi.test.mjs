// The same context.jsonl read by kimi-cli 1.52's own `Context.restore` and by `Context.fromJSONL`.
// Runs when KIMI_PYTHON names a Python with kimi-cli==1.52.0 installed (see DEVELOPERS notes:
// `python3.13 -m venv v && v/bin/pip install kosong==0.56.0 kimi-cli==1.52.0 anthropic==0.78.0`);
// skipped otherwise, so `npm test` needs no Python.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as k from "kosong-wasm";
import { answerEvents, backgroundServer } from "./background-server.mjs";

const python = process.env.KIMI_PYTHON;

const READ = `
import asyncio, json, sys
from pathlib import Path
from kimi_cli.soul.context import Context
async def main():
    c = Context(Path(sys.argv[1]))
    await c.restore()
    print(json.dumps({"history": [m.model_dump(mode="json", exclude_none=True) for m in c.history], "tokens": c.token_count}))
asyncio.run(main())
`;

test("a session file with damaged lines reads the same here and in kimi-cli", { skip: python ? false : "KIMI_PYTHON is not set" }, () => {
  const dir = mkdtempSync(join(tmpdir(), "kimi-ctx-"));
  const lines = [
    '{"role":"_system_prompt","content":"be kind"}',
    '{"role":"user","content":"a"}',
    "{bad",
    "[1]",
    '{"role":"_mystery","content":"z"}',
    '{"role":"_usage","token_count":7.5}',
    '{"role":"_usage","token_count":12}',
    '{"role":"wizard","content":"x"}',
    '{"role":"_checkpoint","id":"one"}',
    '{"role":"assistant","content":"y"}',
  ];
  const file = join(dir, "context.jsonl");
  writeFileSync(file, lines.join("\n") + "\n");
  const theirs = JSON.parse(execFileSync(python, ["-c", READ, file], { encoding: "utf8" }));
  const ours = k.Context.fromJSONL(lines.join("\n"), { logger: { warn() {} } });
  assert.deepEqual(ours.history.map((m) => [m.role, m.content]), theirs.history.map((m) => [m.role, typeof m.content === "string" ? m.content : m.content.map((p) => p.text).join("")]));
  assert.equal(ours.systemPrompt, "be kind");
});

const READ_WIRE = `
import json, sys
from kimi_cli.wire.serde import deserialize_wire_message
kinds = []
for line in open(sys.argv[1]):
    rec = json.loads(line)
    if rec.get("type") == "metadata":
        continue
    kinds.append(type(deserialize_wire_message(rec["message"])).__name__)
print(json.dumps(kinds))
`;

test("kimi-cli reads every message of a recording this runtime wrote (a tool call, a retry, the status)", { skip: python ? false : "KIMI_PYTHON is not set" }, async () => {
  const lines = [];
  const record = () => ({ recorder: new k.WireRecorder((l) => void lines.push(l)) });
  const drain = async (w) => { for await (const _ of w.uiSide({ merge: true })); };
  const toolset = new k.SimpleToolset([{ name: "plus", description: "", parameters: {}, handler: ({ a, b }) => String(a + b) }]);
  const script = 'text: adding\ntool_call: {"id":"c1","name":"plus","arguments":"{\\"a\\":1,\\"b\\":2}"}\nusage: input_other=5 output=3';
  await k.runSoul(new k.Agent({ provider: new k.ScriptedProvider([script, "text: 3"]), toolset }), "add", drain, new AbortController().signal, record());
  const retrying = new k.Agent({ provider: new k.ScriptedProvider(["error: 429 slow", "text: ok"]), retryBackoff: { initialMs: 0, maxMs: 0, jitterMs: 0 } });
  await k.runSoul(retrying, "x", drain, new AbortController().signal, record());
  // A fallback provider's move (StepRetry.fallback) and who answered (StatusUpdate.provider).
  const fallback = new k.FallbackProvider([new k.ScriptedProvider(["error: 429 slow"]), new k.ScriptedProvider(["text: ok"])], { fallbackOn: [429] });
  await k.runSoul(new k.Agent({ provider: fallback }), "y", drain, new AbortController().signal, record());
  assert.ok(lines.some((l) => l.includes('"fallback":{"index":1')) && lines.some((l) => l.includes('"provider":{"index":1')), "the fallback's fields are recorded");
  const file = join(mkdtempSync(join(tmpdir(), "kimi-wire-")), "wire.jsonl");
  writeFileSync(file, lines.join("\n") + "\n");
  const theirs = JSON.parse(execFileSync(python, ["-c", READ_WIRE, file], { encoding: "utf8" }));
  const ours = k.readWireRecord(lines.join("\n")).map((m) => m.type);
  assert.equal(theirs.length, ours.length);
  for (const kind of ["TurnBegin", "StepBegin", "ToolResult", "StatusUpdate", "StepRetry", "TurnEnd"]) assert.ok(theirs.includes(kind), `${kind} in ${theirs}`);
});

test("kimi-cli reads a resumed turn's recording (the resume notice, the interrupted result) and its context", { skip: python ? false : "KIMI_PYTHON is not set" }, async () => {
  const wire = [];
  const ctxLines = [];
  const drain = async (w) => { for await (const _ of w.uiSide({ merge: true })); };
  const mail = (hold) => new k.SimpleToolset([{ name: "send_email", description: "", parameters: {}, handler: () => (hold ? new Promise(() => {}) : "sent") }]);
  const script = 'text: sending\ntool_call: {"id":"c1","name":"send_email","arguments":"{}"}';
  const ctrl = new AbortController();
  const first = new k.Agent({ provider: new k.ScriptedProvider([script]), toolset: mail(true), context: new k.Context({ systemPrompt: "s", sink: (l) => void ctxLines.push(l) }) });
  // The "runtime" stops once the call is recorded; what it left is the files.
  const running = k.runSoul(first, "mail", drain, ctrl.signal, { recorder: new k.WireRecorder((l) => void wire.push(l)) });
  while (!wire.some((l) => l.includes('"ToolCall"'))) await new Promise((r) => setTimeout(r, 5));
  const left = { wire: [...wire], ctx: [...ctxLines] };
  ctrl.abort();
  await running.catch(() => {});
  const resumedCtx = [...left.ctx];
  const again = new k.Agent({ provider: new k.ScriptedProvider(["text: it may have gone"]), toolset: mail(false), context: k.Context.fromJSONL(left.ctx.join("\n"), { sink: (l) => void resumedCtx.push(l) }) });
  const resumedWire = [...left.wire];
  await k.resumeSoul(again, left.wire.join("\n"), drain, new AbortController().signal, { recorder: new k.WireRecorder((l) => void resumedWire.push(l), { append: true }) });
  const dir = mkdtempSync(join(tmpdir(), "kimi-resumed-"));
  writeFileSync(join(dir, "wire.jsonl"), resumedWire.join("\n") + "\n");
  writeFileSync(join(dir, "context.jsonl"), resumedCtx.join("\n") + "\n");
  const theirs = JSON.parse(execFileSync(python, ["-c", READ_WIRE, join(dir, "wire.jsonl")], { encoding: "utf8" }));
  assert.equal(theirs.length, k.readWireRecord(resumedWire.join("\n")).length, "every line read");
  assert.ok(theirs.includes("Notification") && theirs.filter((t) => t === "TurnBegin").length === 1, theirs.join());
  const ctx = JSON.parse(execFileSync(python, ["-c", READ, join(dir, "context.jsonl")], { encoding: "utf8" }));
  assert.deepEqual(ctx.history.map((m) => m.role), ["user", "assistant", "tool", "assistant"]);
});

const READ_SESSION = `
import asyncio, json, sys
from pathlib import Path
from kimi_cli.soul.context import Context
from kimi_cli.wire.file import WireFile
async def main():
    c = Context(Path(sys.argv[1]) / "context.jsonl")
    await c.restore()
    kinds = [r.message.type async for r in WireFile(Path(sys.argv[1]) / "wire.jsonl").iter_records()]
    print(json.dumps({"roles": [m.role for m in c.history], "kinds": kinds}))
asyncio.run(main())
`;

test("a FileSessionStore directory (a turn with a tool call asked with needsApproval) reads in kimi-cli as it reads here", { skip: python ? false : "KIMI_PYTHON is not set" }, async () => {
  const dir = join(mkdtempSync(join(tmpdir(), "kimi-session-")), "s");
  const toolset = new k.SimpleToolset([{ name: "pay", description: "", parameters: {}, needsApproval: true, handler: () => "paid" }]);
  const provider = new k.ScriptedProvider([`tool_call: ${JSON.stringify({ id: "p1", name: "pay", arguments: "{}" })}`, "text: paid."]);
  const s = await k.Session.open(new k.FileSessionStore(dir), { provider, systemPrompt: "be kind", toolset });
  const ended = s.send("pay");
  for await (const e of s.events()) {
    if (e.message?.type === "ApprovalRequest") {
      await s.respond(e.message.payload.id, "approve");
      break;
    }
  }
  assert.deepEqual(await ended, { outcome: "done" });
  const here = { roles: s.history.map((m) => m.role), kinds: k.readWireRecord(readFileSync(join(dir, "wire.jsonl"), "utf8")).map((m) => m.type) };
  await s.close();
  const there = JSON.parse(execFileSync(python, ["-c", READ_SESSION, dir], { encoding: "utf8" }));
  assert.deepEqual(there, here);
  assert.ok(here.kinds.includes("ApprovalRequest") && here.kinds.includes("ToolResult"));
});

test("kimi-cli reads a recording of a background answer cut and read again (the answer_kept and answer_reconnected notices)", { skip: python ? false : "KIMI_PYTHON is not set" }, async () => {
  const s = await backgroundServer({ events: (id) => answerEvents(id), cuts: [6], get: "resume" });
  try {
    const lines = [];
    const provider = new k.OpenAIResponsesProvider({ model: "gpt-5-mini", apiKey: "sk-test", baseUrl: s.baseUrl, background: true });
    await k.runSoul(new k.Agent({ provider }), "go", async (w) => { for await (const _ of w.uiSide({ merge: true })); }, new AbortController().signal, { recorder: new k.WireRecorder((l) => void lines.push(l)) });
    const file = join(mkdtempSync(join(tmpdir(), "kimi-wire-")), "wire.jsonl");
    writeFileSync(file, lines.join("\n") + "\n");
    const theirs = JSON.parse(execFileSync(python, ["-c", READ_WIRE, file], { encoding: "utf8" }));
    const ours = k.readWireRecord(lines.join("\n"));
    assert.equal(theirs.length, ours.length);
    assert.deepEqual(ours.filter((m) => m.type === "Notification").map((m) => m.payload.type), ["answer_kept", "answer_reconnected"]);
    assert.equal(theirs.filter((t) => t === "Notification").length, 2, theirs.join());
  } finally {
    await s.close();
  }
});

const READ_SUBAGENTS = `
import json, sys
from kimi_cli.wire.serde import deserialize_wire_message
from kimi_cli.wire.types import SubagentEvent
out = []
for line in open(sys.argv[1]):
    rec = json.loads(line)
    if rec.get("type") == "metadata":
        continue
    m = deserialize_wire_message(rec["message"])
    if isinstance(m, SubagentEvent):
        out.append([m.parent_tool_call_id, m.agent_id, m.subagent_type, type(m.event).__name__])
    else:
        out.append([type(m).__name__])
print(json.dumps(out))
`;

test("kimi-cli reads a recording with two sub-agents' SubagentEvents (one asked for approval at the parent's UI) as this runtime wrote it", { skip: python ? false : "KIMI_PYTHON is not set" }, async () => {
  const lines = [];
  const long = Array(40).fill("found").join(" ");
  const child = new k.Agent({
    name: "explore",
    provider: new k.ScriptedProvider([`tool_call: {"id":"k1","name":"rm","arguments":"{}"}`, `text: ${long}`, `text: ${long}`]),
    toolset: new k.SimpleToolset([{ name: "rm", description: "", parameters: {}, needsApproval: true, handler: () => "removed" }]),
  });
  const calls = ['{"id":"c1","name":"explore","arguments":"{\\"prompt\\":\\"a\\"}"}', '{"id":"c2","name":"explore","arguments":"{\\"prompt\\":\\"b\\"}"}'].map((c) => `tool_call: ${c}`).join("\n");
  const parent = new k.Agent({ provider: new k.ScriptedProvider([calls, "text: done"]), toolset: new k.SimpleToolset([child.asTool()]) });
  await k.runSoul(parent, "go", async (w) => {
    for await (const m of w.uiSide({ merge: true })) if (m.type === "ApprovalRequest") w.respond(m.payload.id, "approve");
  }, new AbortController().signal, { recorder: new k.WireRecorder((l) => void lines.push(l)) });
  const file = join(mkdtempSync(join(tmpdir(), "kimi-wire-")), "wire.jsonl");
  writeFileSync(file, lines.join("\n") + "\n");
  const theirs = JSON.parse(execFileSync(python, ["-c", READ_SUBAGENTS, file], { encoding: "utf8" }));
  const ours = k.readWireRecord(lines.join("\n")).map((m) => (m.type === "SubagentEvent" ? [m.payload.parent_tool_call_id, m.payload.agent_id, m.payload.subagent_type, m.payload.event.type] : [m.type]));
  // kimi-cli names a part's class (TextPart) where the wire says ContentPart; otherwise the same.
  const name = (t) => (t === "TextPart" || t === "ThinkPart" ? "ContentPart" : t);
  assert.deepEqual(theirs.map((row) => row.map(name)), ours);
  assert.ok(ours.filter((r) => r.length === 4).length >= 8, "both sub-agents' turns are in it");
  assert.ok(ours.some((r) => r[0] === "ApprovalRequest"), "the child's approval is the parent's, unwrapped");
});

test("kimi-cli reads a session's sub-agent context (FileSessionStore's subagents/<agent id>/context.jsonl, kimi-cli's own layout) as it reads here", { skip: python ? false : "KIMI_PYTHON is not set" }, async () => {
  const dir = join(mkdtempSync(join(tmpdir(), "kimi-subagent-session-")), "s");
  const long = Array(40).fill("found").join(" ");
  const child = new k.Agent({
    name: "explore",
    systemPrompt: "You explore.",
    provider: new k.ScriptedProvider([`tool_call: {"id":"k1","name":"ls","arguments":"{}"}`, `text: ${long}`]),
    toolset: new k.SimpleToolset([{ name: "ls", description: "", parameters: {}, handler: () => "a b c" }]),
  });
  const provider = new k.ScriptedProvider([`tool_call: {"id":"c1","name":"explore","arguments":"{\\"prompt\\":\\"look around\\"}"}`, "text: done"]);
  const s = await k.Session.open(new k.FileSessionStore(dir), { provider, systemPrompt: "You lead.", toolset: new k.SimpleToolset([child.asTool()]) });
  assert.deepEqual(await s.send("go"), { outcome: "done" });
  await s.close();
  const [id] = readdirSync(join(dir, "subagents"));
  const file = join(dir, "subagents", id, "context.jsonl");
  const here = k.Context.fromJSONL(readFileSync(file, "utf8")).history.map((m) => m.role);
  const there = JSON.parse(execFileSync(python, ["-c", READ, file], { encoding: "utf8" })).history.map((m) => m.role);
  assert.deepEqual(there, here);
  assert.deepEqual(here, ["user", "assistant", "tool", "assistant"]);
});
