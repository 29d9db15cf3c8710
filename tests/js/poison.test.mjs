// A broken wasm instance is never silent: every later call says so clearly.
// Each case runs in a child process, since the instance stays broken. The instance is broken
// through the `test-hooks` build (pkg-test/), which `npm test` builds beside the shipped one.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";

function afterBreaking(kind) {
  const script = `
    import * as k from "./pkg-test/node.js";
    import { breakInstance } from "./pkg-test/test-hooks.js";
    // Nothing may reach the process: a trap inside a task is caught by the guarded glue.
    const uncaught = [];
    process.on("uncaughtException", (e) => uncaught.push(String(e)));
    process.on("unhandledRejection", (e) => uncaught.push(String(e)));
    const ok = (await k.generate(new k.ScriptedProvider(["text: fine"]), "", [], [])).message.content;
    // A call waiting on the instance when it breaks (its fetch never answers) is rejected at once.
    const waiting = k.generate(new k.OpenAIChatProvider({ model: "m", apiKey: "sk-x", fetch: () => new Promise(() => {}) }), "", [], [{ role: "user", content: "x" }])
      .then(() => "resolved", (e) => e.message);
    try { breakInstance(${kind}); } catch {}
    await new Promise((r) => setTimeout(r, 20));
    const pendingOutcome = await Promise.race([waiting, new Promise((r) => setTimeout(() => r("still pending"), 2000))]);
    const errors = [];
    for (const f of [
      () => k.generate(new k.ScriptedProvider(["text: x"]), "", [], []),
      () => k.step(new k.ScriptedProvider(["text: x"]), "", { tools: [], handle() {} }, []),
      () => new k.SimpleToolset(),
      () => new k.Context(),
      () => new k.PartialJson(),
    ]) {
      try { await f(); errors.push("no error"); } catch (e) { errors.push(e.message); }
    }
    console.log(JSON.stringify({ ok, errors, pendingOutcome, uncaught }));
  `;
  const out = execFileSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8", cwd: new URL("../..", import.meta.url) });
  return JSON.parse(out.trim().split("\n").at(-1));
}

for (const [kind, what, cause] of [
  [0, "a trap", /unreachable/],
  [1, "a panic", /deliberate test panic/],
  [2, "a panic inside an async task", /deliberate test panic in a task/],
  [3, "a trap inside an async task (as running out of memory there is)", /unreachable/],
]) {
  test(`after ${what}, every call fails with an error that says the instance crashed`, () => {
    const { ok, errors, pendingOutcome, uncaught } = afterBreaking(kind);
    assert.equal(ok, "fine");
    assert.match(pendingOutcome, /the WebAssembly instance crashed earlier/, "the waiting call was rejected at once");
    assert.deepEqual(uncaught, [], "the process saw nothing uncaught");
    assert.equal(errors.length, 5);
    for (const e of errors) {
      assert.match(e, /the WebAssembly instance crashed earlier \(.*\) and cannot be used again/s);
      assert.match(e, cause);
    }
  });
}
