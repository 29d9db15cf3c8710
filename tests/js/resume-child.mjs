// One life of a Node process running a Session in a directory (FileSessionStore) against a
// loopback server that keeps its answers (OpenAIResponsesProvider with `background: true`). It
// opens the session (a turn its last life left unfinished goes on by itself), starts a turn if the
// session has none, and prints what happened as JSON lines. The parent SIGKILLs it mid-answer.
// Usage: node resume-child.mjs <dir> <baseUrl>
import { appendFileSync } from "node:fs";
import { join } from "node:path";
import * as k from "kosong-wasm";

const [dir, baseUrl] = process.argv.slice(2);
const say = (o) => process.stdout.write(JSON.stringify(o) + "\n");
const toolset = new k.SimpleToolset([
  {
    name: "send_email",
    description: "Sends an email",
    parameters: { type: "object", properties: { to: { type: "string" } }, required: ["to"] },
    handler: async ({ to }, ctx) => {
      appendFileSync(join(dir, "sent.log"), `${ctx.toolCallId} ${to}\n`);
      return `sent to ${to}`;
    },
  },
]);
const provider = new k.OpenAIResponsesProvider({ model: "gpt-5-mini", apiKey: "sk-test", baseUrl, background: true });
const session = await k.Session.open(new k.FileSessionStore(dir), { provider, systemPrompt: "You send emails.", toolset });
say({ opened: true, running: session.running });
const recovered = await session.recovered;
say({ recovered });
if (recovered === null && session.history.length === 0) say({ outcome: await session.send("Mail a@b.c") });
say({ history: session.history });
await session.close();
process.exit(0);
