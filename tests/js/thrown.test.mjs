// Whatever a tool, a callback or a validator throws — an Error whose `message` or `name` getter
// throws, a revoked Proxy, a non-Error — becomes that call's error: it never reaches the process,
// never leaves a promise pending, and never wedges the instance for the next call.
// Each case runs in a child process, so a crash is seen as a crash and not as this file dying.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";

const root = new URL("../..", import.meta.url);

function inChild(body) {
  const script = `
    import * as k from "kosong-wasm";
    const uncaught = [];
    process.on("uncaughtException", (e) => uncaught.push("uncaught: " + safe(e)));
    process.on("unhandledRejection", (e) => uncaught.push("unhandled: " + safe(e)));
    function safe(e) { try { return String(e?.message ?? e); } catch { return "(unprintable)"; } }
    const within = (p, ms = 3000) => Promise.race([p, new Promise((r) => setTimeout(() => r("still pending"), ms))]);
    const hostile = {
      messageGetter() { const e = new Error("x"); Object.defineProperty(e, "message", { get() { throw new Error("getter"); } }); return e; },
      nameGetter() { const e = new TypeError("bad input"); Object.defineProperty(e, "name", { get() { throw new Error("getter"); } }); return e; },
      revoked() { const { proxy, revoke } = Proxy.revocable({}, {}); revoke(); return proxy; },
      symbol() { return Symbol("s"); },
    };
    const out = {};
    ${body}
    // The instance still serves an unrelated call.
    out.next = (await k.generate(new k.ScriptedProvider(["text: still fine"]), "", [], [])).message.content;
    await new Promise((r) => setTimeout(r, 50));
    out.uncaught = uncaught;
    console.log(JSON.stringify(out));
  `;
  const text = execFileSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8", cwd: root, timeout: 60_000 });
  return JSON.parse(text.trim().split("\n").at(-1));
}

const CALL = 'tool_call: {"id": "c1", "name": "t", "arguments": "{}"}';

for (const kind of ["messageGetter", "nameGetter", "revoked", "symbol"]) {
  for (const mode of ["sync", "async"]) {
    test(`a ${mode} tool throwing ${kind} is that call's error result (SimpleToolset and a custom toolset)`, () => {
      const r = inChild(`
        const thrower = ${mode === "async" ? "async " : ""}() => { throw hostile.${kind}(); };
        const simple = new k.SimpleToolset([{ name: "t", description: "", parameters: { type: "object" }, handler: thrower }]);
        const custom = { tools: [{ name: "t", description: "", parameters: { type: "object" } }], handle: thrower };
        for (const [name, ts] of [["simple", simple], ["custom", custom]]) {
          const s = await k.step(new k.ScriptedProvider([${JSON.stringify(CALL)}]), "", ts, []);
          const results = await within(s.toolResults());
          out[name] = results === "still pending" ? results : results.map((x) => [x.tool_call_id, x.return_value.is_error, x.return_value.message]);
        }
      `);
      assert.deepEqual(r.uncaught, []);
      for (const name of ["simple", "custom"]) {
        assert.ok(Array.isArray(r[name]), `${name}: ${r[name]}`);
        assert.equal(r[name].length, 1);
        assert.equal(r[name][0][0], "c1");
        assert.equal(r[name][0][1], true, `${name}: an error result`);
        assert.match(r[name][0][2], /^Error running tool: /, name);
      }
      if (kind === "nameGetter") assert.match(r.simple[0][2], /bad input/, "the message is kept when only the name throws");
      assert.equal(r.next, "still fine");
    });
  }
}

test("an agent turn whose tool throws a hostile error ends done, the error in the history", () => {
  const r = inChild(`
    const tools = new k.SimpleToolset([{ name: "t", description: "", parameters: { type: "object" }, handler: () => { throw hostile.messageGetter(); } }]);
    const agent = new k.Agent({ provider: new k.ScriptedProvider([${JSON.stringify(CALL)}, "text: done"]), systemPrompt: "", toolset: tools });
    out.turn = await within(k.runSoul(agent, "go", async (w) => { for await (const _ of w.uiSide()) {} }, new AbortController().signal).then(() => "done", (e) => "rejected: " + safe(e)));
    out.roles = agent.context.history.map((m) => m.role);
  `);
  assert.equal(r.turn, "done");
  assert.deepEqual(r.roles, ["user", "assistant", "tool", "assistant"]);
  assert.deepEqual(r.uncaught, []);
});

for (const kind of ["revoked", "messageGetter"]) {
  test(`generate settles when onMessagePart, the output validator or the abort reason is ${kind}`, () => {
    const r = inChild(`
      const schema = { type: "object", properties: { a: { type: "number" } } };
      out.part = await within(k.generate(new k.ScriptedProvider(["text: hello"]), "", [], [], { onMessagePart() { throw hostile.${kind}(); } }).then(() => "resolved", () => "rejected"));
      out.validate = await within(k.generate(new k.ScriptedProvider(['text: {"a": 1}']), "", [], [], { output: { schema, validate() { throw hostile.${kind}(); } } }).then(() => "resolved", () => "rejected"));
      const ctrl = new AbortController();
      const p = k.generate(new k.OpenAIChatProvider({ model: "m", apiKey: "sk-x", fetch: (u, init) => new Promise((_, rej) => init.signal.addEventListener("abort", () => rej(init.signal.reason))) }), "", [], [{ role: "user", content: "x" }], { signal: ctrl.signal });
      ctrl.abort(hostile.${kind}());
      out.abort = await within(p.then(() => "resolved", () => "rejected"));
    `);
    assert.equal(r.part, "rejected");
    assert.equal(r.validate, "rejected");
    assert.equal(r.abort, "rejected");
    assert.deepEqual(r.uncaught, []);
    assert.equal(r.next, "still fine");
  });
}
