// One life of a Node process running a Session (FileSessionStore) whose agent calls a sub-agent
// (`Agent.asTool`) against a loopback model. `mode`:
// - `approval`: the sub-agent's `rm` asks first (needsApproval); this life SIGKILLs itself once
//   the question is stored (told through `session.events()`), nobody answering;
// - `tool`: the sub-agent's `rm` logs its start and this life SIGKILLs itself inside it;
// - `none`: opens the session (the turn the last life left goes on by itself) and reports;
// - `answer`: as `none`, approving every question it is told of (one the last life left waiting
//   too: it waits again under its id);
// - `pair`: two sub-agent calls run at once — one's `rm` asks first, the other's `ls` logs its
//   start and runs on — and this life SIGKILLs itself once the question is stored and `ls` runs.
// A fourth argument, `pair` or `nested`, keeps `rm` asking first in a later life; `helper` also has
// a sub-agent of its own, `deep` (its own `rm`), for a nested run.
// Usage: node subagent-child.mjs <dir> <baseUrl> <approval|tool|none|answer|pair> [pair|nested]
import { appendFileSync, readFileSync } from "node:fs";
import { join } from "node:path";
import * as k from "kosong-wasm";

const [dir, baseUrl, mode, pair] = process.argv.slice(2);
const pairs = mode === "pair" || pair === "pair" || pair === "nested";
const say = (o) => process.stdout.write(JSON.stringify(o) + "\n");
const provider = new k.OpenAIChatProvider({ model: "m", apiKey: "sk-test", baseUrl });
const rm = {
  name: "rm",
  description: "Removes a file",
  parameters: { type: "object", properties: { path: { type: "string" } } },
  needsApproval: mode === "approval" || pairs,
  handler: ({ path }, ctx) => {
    appendFileSync(join(dir, "ran.log"), `${ctx.toolCallId} ${path}\n`);
    if (mode === "tool") process.kill(process.pid, "SIGKILL");
    return `removed ${path}`;
  },
};
const deep = new k.Agent({ name: "deep", provider: null, systemPrompt: "You dig.", toolset: new k.SimpleToolset([rm]) });
const helper = new k.Agent({
  name: "helper",
  provider: null,
  systemPrompt: "You clean up.",
  toolset: new k.SimpleToolset([rm, deep.asTool(), {
    name: "ls",
    description: "Lists a directory",
    parameters: { type: "object", properties: { path: { type: "string" } } },
    handler: async ({ path }, ctx) => {
      appendFileSync(join(dir, "ran.log"), `${ctx.toolCallId} ${path}\n`);
      if (mode === "pair") await new Promise(() => {}); // runs until the runtime dies
      return `x y z in ${path}`;
    },
  }]),
});
const agent = { provider, systemPrompt: "You lead.", toolset: new k.SimpleToolset([helper.asTool()]) };
const session = await k.Session.open(new k.FileSessionStore(dir), agent);
say({ opened: true, running: session.running });
const ran = () => { try { return readFileSync(join(dir, "ran.log"), "utf8"); } catch { return ""; } };
if (mode === "approval" || mode === "answer" || mode === "pair") {
  (async () => {
    for await (const e of session.events()) {
      if (e.message?.type !== "ApprovalRequest") continue;
      if (mode === "approval") process.kill(process.pid, "SIGKILL");
      if (mode === "pair") {
        while (!ran().includes(" /tmp\n")) await new Promise((r) => setTimeout(r, 5));
        process.kill(process.pid, "SIGKILL");
      }
      await session.respond(e.message.payload.id, "approve");
    }
  })();
}
const recovered = await session.recovered;
say({ recovered });
if (recovered === null && session.history.length === 0) say({ outcome: await session.send("Clean up") });
const events = [];
const it = session.events()[Symbol.asyncIterator]();
for (;;) {
  const r = await Promise.race([it.next(), new Promise((res) => setTimeout(() => res({ done: true }), 50))]);
  if (r.done) break;
  events.push(r.value.message ?? { end: r.value.end });
}
await it.return();
say({ events, history: session.history.map((m) => ({ role: m.role, content: typeof m.content === "string" ? m.content : m.content?.map((p) => p.text ?? "").join("") })) });
await session.close();
process.exit(0);
