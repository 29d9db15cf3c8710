// One life of a Node process running a Session in a directory (FileSessionStore) against a
// loopback model: it opens the session (a turn its last life left unfinished goes on by itself),
// starts a turn if the session has none, and prints what happened as JSON lines. It SIGKILLs
// itself at write `killAt` of this life, before or after the store performs it, or torn: its
// data written and its commit record not (`when`).
// With SESSION_APPROVE=1, send_email asks first (needsApproval) and this life approves every
// request it sees (one answered in an earlier life is refused again here: caught).
// Usage: node session-child.mjs <dir> <baseUrl> <killAt> <before|after|torn|hold|none>
import { appendFileSync } from "node:fs";
import { join } from "node:path";
import * as k from "kosong-wasm";

const [dir, baseUrl, killAtText, when] = process.argv.slice(2);
const killAt = Number(killAtText);
const approve = process.env.SESSION_APPROVE === "1";
const say = (o) => process.stdout.write(JSON.stringify(o) + "\n");

const files = new k.FileSessionStore(dir);
let writes = 0;
const store = {
  open: () => files.open(),
  close: () => files.close(),
  async write(ops) {
    writes++;
    if (writes === killAt && when === "before") process.kill(process.pid, "SIGKILL");
    // Torn: the data reaches the files and the commit record does not (a death between appends).
    if (writes === killAt && when === "torn") {
      await files.write(ops.filter((o) => o.op !== "meta"));
      process.kill(process.pid, "SIGKILL");
    }
    await files.write(ops);
    if (writes === killAt && when === "after") process.kill(process.pid, "SIGKILL");
  },
};

const toolset = new k.SimpleToolset([
  {
    name: "send_email",
    description: "Sends an email",
    parameters: { type: "object", properties: { to: { type: "string" } }, required: ["to"] },
    needsApproval: approve,
    handler: async ({ to }, ctx) => {
      appendFileSync(join(dir, "sent.log"), `${ctx.toolCallId} ${to}\n`);
      await new Promise((r) => setTimeout(r, 20));
      return `sent to ${to}`;
    },
  },
]);
const agent = { provider: new k.OpenAIChatProvider({ model: "m", apiKey: "sk-test", baseUrl }), systemPrompt: "You send emails.", toolset };

let session;
try {
  session = await k.Session.open(store, agent);
} catch (e) {
  say({ error: e.name, message: e.message });
  process.exit(0);
}
say({ opened: true, running: session.running });
if (when === "hold") {
  say({ holding: true });
  setInterval(() => {}, 1000);
  await new Promise(() => {}); // owns the session until it is killed
}
if (approve) {
  (async () => {
    for await (const e of session.events()) {
      if (e.message?.type === "ApprovalRequest") await session.respond(e.message.payload.id, "approve").catch(() => {});
    }
  })();
}
const recovered = await session.recovered;
say({ recovered });
if (recovered === null && session.history.length === 0) say({ outcome: await session.send("Mail a@b.c") });
// The turn's stored end (a life killed right after storing it leaves nothing to resume).
const ends = [];
const it = session.events()[Symbol.asyncIterator]();
for (;;) {
  const r = await Promise.race([it.next(), new Promise((res) => setTimeout(() => res({ done: true }), 20))]);
  if (r.done) break;
  if (r.value.end) ends.push(r.value.end);
}
await it.return();
say({ ends, roles: session.history.map((m) => m.role), writes });
await session.close();
process.exit(0);
