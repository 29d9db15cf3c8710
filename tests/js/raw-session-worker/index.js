// A Worker that hands every request to an AgentSession as it came, with no checks of its own in
// front: what the package's Durable Object does by itself with malformed and oversized bodies.
// Routes under /test/ steer it: the next turns' scripts, a tool that waits to be released, and
// storage writes that fail.
import { AgentSession } from "kosong-wasm/cloudflare";
import { ScriptedProvider, SimpleToolset } from "kosong-wasm";

export class RawSession extends AgentSession {
  script = ["text: ok"];
  ran = 0;
  release = null;
  failWrites = 0;
  /** Refuse the first write that holds a tool call's event (then take writes again). */
  failCall = false;

  agentOptions() {
    const tool = {
      name: "slow",
      description: "Waits until the test releases it.",
      parameters: { type: "object" },
      handler: async () => {
        this.ran++;
        await new Promise((r) => (this.release = r));
        return "released";
      },
    };
    const gated = { name: "gated", description: "Asks before it starts.", parameters: { type: "object" }, needsApproval: true, handler: () => "gated ran" };
    return { provider: new ScriptedProvider(this.script), systemPrompt: "", toolset: new SimpleToolset([tool, gated]) };
  }

  /** The package's store, with writes that fail while `failWrites` counts down. */
  sessionStore() {
    const store = super.sessionStore();
    const write = store.write.bind(store);
    store.write = async (ops) => {
      if (this.failCall && ops.some((o) => o.op === "event" && o.data.includes('"type":"ToolCall"'))) {
        this.failCall = false;
        throw new Error("the test failed the write of a tool call");
      }
      if (this.failWrites > 0) {
        this.failWrites--;
        throw new Error("the test failed this write");
      }
      return write(ops);
    };
    return store;
  }

  async fetch(request) {
    const path = new URL(request.url).pathname;
    if (path === "/test/script") this.script = await request.json();
    else if (path === "/test/fail") this.failWrites = (await request.json()).n;
    else if (path === "/test/failCall") this.failCall = true;
    else if (path === "/test/release") this.release?.();
    else if (path === "/test/legacy") {
      // A session as the version before `Session` stored it (its tables, its meta keys).
      const sql = this.ctx.storage.sql;
      sql.exec("INSERT INTO meta (key, value) VALUES ('created', '1'), ('turns', '3'), ('lastEventId', '7'), ('turn', ?)", JSON.stringify({ running: false, firstId: 4 }));
      for (const m of [{ role: "user", content: "old question" }, { role: "assistant", content: "old answer" }]) sql.exec("INSERT INTO context (line) VALUES (?)", JSON.stringify(m));
      sql.exec("INSERT INTO events (id, event, data) VALUES (7, 'end', ?)", JSON.stringify({ outcome: "done" }));
    }
    else if (path === "/test/state") return Response.json({ ran: this.ran, waiting: this.release !== null, alarm: await this.ctx.storage.getAlarm() });
    else return super.fetch(request);
    return Response.json({ ok: true });
  }
}

export default {
  fetch(request, env) {
    return env.RAW.get(env.RAW.idFromName(new URL(request.url).searchParams.get("s") ?? "one")).fetch(request);
  },
};
