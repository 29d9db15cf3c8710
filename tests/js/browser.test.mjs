// The demo page in real Chromium (Debian's, driven by playwright-core), against the demo
// server and its embedded mock model. A missing browser is a failure, never a quiet skip
// (KOSONG_SKIP_BROWSER=1 is the one, loud, way to leave these out).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { createDemoServer } from "../../scripts/demo.mjs";
import { CHROMIUM, SKIP_BROWSER } from "../../scripts/setup.mjs";

const ARTIFACTS = join(import.meta.dirname, "..", "..", "test-artifacts");
const haveBrowser = existsSync(CHROMIUM);
if (!haveBrowser && !SKIP_BROWSER) throw new Error(`Chromium is missing at ${CHROMIUM}: npm test installs it (apt-get install chromium); KOSONG_SKIP_BROWSER=1 leaves the browser suites out`);

let server, base, browser;
before(async () => {
  if (!haveBrowser) return;
  server = createDemoServer();
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${server.address().port}`;
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  mkdirSync(ARTIFACTS, { recursive: true });
});
after(async () => {
  await browser?.close();
  if (server) await new Promise((r) => server.close(r));
});

const opts = { skip: haveBrowser ? false : "KOSONG_SKIP_BROWSER=1: the browser suites are NOT run" };

async function openDemo(viewport = { width: 1100, height: 1400 }) {
  const context = await browser.newContext({ acceptDownloads: true, viewport });
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(e));
  page.on("console", (m) => m.type() === "error" && errors.push(new Error(m.text())));
  await page.goto(`${base}/`);
  await page.waitForSelector("body[data-ready=true]");
  return { page, context, errors };
}

async function ask(page, question) {
  await page.fill("#q", question);
  await page.click("#send");
}

/** Every card's tool name, status, arguments and result, in page order. */
const cards = (page) =>
  page.$$eval(".card", (cs) =>
    cs.map((c) => ({
      name: c.querySelector(".name").textContent,
      status: c.querySelector(".status").textContent,
      args: c.querySelector(".args").textContent,
      result: c.querySelector(".result").textContent,
      step: c.closest(".step").dataset.step,
    })),
  );

test("a scripted run completes: tool cards filled, tools start while the model streams, the recording replays the same page", opts, async () => {
  const { page, context, errors } = await openDemo();
  await ask(page, "What's the weather in Paris, and what time is it in Tokyo?");
  await page.waitForSelector("body[data-state=done]", { timeout: 30_000 });

  const all = await cards(page);
  assert.deepEqual(all.map((c) => [c.name, c.status]), [["search", "done"], ["clock", "done"]]);
  assert.deepEqual(JSON.parse(all[0].args), { query: "Paris" });
  assert.deepEqual(JSON.parse(all[1].args), { timezone: "Asia/Tokyo" });
  assert.match(all[0].result, /Paris \(France\): 18 °C/);
  assert.match(all[1].result, /^Asia\/Tokyo: \d\d:\d\d:\d\d$/);
  const steps = await page.$$eval(".step", (ss) => ss.map((s) => ({ think: s.querySelector(".think-text").textContent, text: s.querySelector(".text").textContent })));
  assert.equal(steps.length, 2);
  assert.match(steps[0].think, /look up the city and the clock/);
  assert.match(steps[1].text, /Here is what I found:\n• Paris \(France\)/);
  assert.equal(await page.$eval(".step details.think", (d) => d.open), false, "think blocks start folded");

  // The timeline of step 1: the first tool's bar starts before the model's bar ends.
  const bars = await page.$$eval('.step[data-step="1"] .bar', (bs) => bs.map((b) => ({ cls: b.className, start: Number(b.dataset.start), end: Number(b.dataset.end) })));
  const model = bars.find((b) => b.cls.includes("model"));
  const tools = bars.filter((b) => b.cls.includes("tool"));
  assert.equal(tools.length, 2);
  assert.ok(tools[0].start < model.end, `search started at ${tools[0].start} ms, the model streamed until ${model.end} ms`);
  await page.screenshot({ path: join(ARTIFACTS, "demo-run.png"), fullPage: true });

  // The timeline is readable without hovering: an axis with millisecond ticks, labelled bars,
  // a legend, and it ends with its last bar (no gap after it).
  const tl = await page.$eval('.step[data-step="1"] .timeline', (t) => ({
    ticks: [...t.querySelectorAll(".tick")].map((x) => x.textContent),
    labels: [...t.querySelectorAll(".bar-text")].map((x) => x.textContent),
    legend: t.querySelector(".legend")?.textContent,
    ends: [...t.querySelectorAll(".bar")].map((b) => Number(b.dataset.end)),
    widths: [...t.querySelectorAll(".bar")].map((b) => parseFloat(b.style.left) + parseFloat(b.style.width.replace(/^max\(2px, /, ""))),
  }));
  assert.ok(tl.ticks.length >= 3 && tl.ticks[0] === "0" && tl.ticks.slice(1).every((x) => / ms$/.test(x)), `ticks: ${tl.ticks}`);
  assert.ok(tl.labels.some((l) => /^stream 0–\d+ ms$/.test(l)) && tl.labels.some((l) => /^search \d+–\d+ ms$/.test(l)), `labels: ${tl.labels}`);
  assert.match(tl.legend, /model streaming.*tool running/);
  assert.ok(Math.abs(Math.max(...tl.widths) - 100) < 0.5, `the last bar ends at the axis's end: ${tl.widths}`);

  // Download the recording, then replay it on a fresh page: the same conversation.
  const chatText = () => page.$eval("#chat", (c) => [...c.children].filter((x) => !x.classList.contains("replay-label")).map((x) => {
    const copy = x.cloneNode(true);
    for (const t of copy.querySelectorAll(".timeline")) t.remove();
    return copy.textContent;
  }).join("\n"));
  const liveChat = await chatText();
  const [download] = await Promise.all([page.waitForEvent("download"), page.click("#download")]);
  const file = join(ARTIFACTS, "wire.jsonl");
  await download.saveAs(file);
  const lines = readFileSync(file, "utf8").trim().split("\n");
  assert.deepEqual(JSON.parse(lines[0]), { type: "metadata", protocol_version: "1.10" });
  assert.ok(lines.slice(1).every((l) => typeof JSON.parse(l).timestamp === "number"));
  await page.click("#clear");
  assert.equal(await page.innerText("#chat"), "");
  // A file that holds no wire record says so, and changes nothing else.
  const notWire = join(ARTIFACTS, "notes.txt");
  writeFileSync(notWire, "shopping list\nmilk\n");
  await page.setInputFiles("#load", notWire);
  await page.waitForSelector("#chat .load-error");
  assert.match(await page.innerText("#chat .load-error"), /^notes\.txt holds no wire record/);
  assert.notEqual(await page.evaluate(() => document.body.dataset.state), "replayed");
  await page.click("#clear");
  await page.setInputFiles("#load", file);
  await page.waitForSelector("body[data-state=replayed]");
  assert.equal(await chatText(), liveChat);
  assert.match(await page.innerText("#chat .replay-label"), /Replay of a recorded run/, "a replay says it is one");
  assert.deepEqual(errors, []);
  await context.close();
});

test("Stop in the middle of a tool leaves every card saying what happened, and the page usable", opts, async () => {
  const { page, context, errors } = await openDemo();
  await ask(page, "What's the weather in Paris, and what time is it in Tokyo?");
  await page.waitForSelector('.card[data-status="running"]', { timeout: 30_000 });
  await page.click("#stop");
  await page.waitForSelector("body[data-state=cancelled]", { timeout: 10_000 });
  const all = await cards(page);
  assert.ok(all.length >= 1);
  for (const c of all) assert.ok(["done", "aborted", "not started"].includes(c.status), `${c.name}: ${c.status}`);
  assert.ok(all.some((c) => c.status === "aborted"), "the running tool was aborted");
  assert.match(await page.innerText(".stopped"), /Stopped/, "the answer says it was stopped");
  assert.equal(await page.$eval("#stop", (b) => b.disabled), true);
  assert.equal(await page.$eval("#send", (b) => b.disabled), false);
  // Nothing keeps drawing after the stop.
  const after = await page.innerText("#chat");
  await page.waitForTimeout(300);
  assert.equal(await page.innerText("#chat"), after);
  // And the next run works.
  await ask(page, "What is 17 * 23 + 4?");
  await page.waitForSelector("body[data-state=done]", { timeout: 30_000 });
  assert.match((await cards(page)).at(-1).result, /17 \* 23 \+ 4 = 395/);
  assert.deepEqual(errors, []);
  await context.close();
});

test("a tool that asks for approval waits for the user; approving runs it", opts, async () => {
  const { page, context, errors } = await openDemo();
  await ask(page, "Save a note: buy croissants");
  await page.waitForSelector(".approval button.approve:not([disabled])", { timeout: 30_000 });
  assert.equal(await page.$$eval("#notes li", (l) => l.length), 0, "nothing saved before the answer");
  // The question sits on the card that asks it, and the card says it waits for the answer.
  assert.equal(await page.$$eval(".card .approval", (l) => l.length), 1, "the approval is inside its call's card");
  assert.equal((await cards(page))[0].status, "waiting for approval");
  await page.click(".approval button.approve");
  await page.waitForSelector("body[data-state=done]", { timeout: 30_000 });
  assert.deepEqual(await page.$$eval("#notes li", (l) => l.map((x) => x.textContent)), ["buy croissants"]);
  assert.match(await page.innerText(".approval"), /approved/);
  assert.equal((await cards(page))[0].status, "done");
  assert.deepEqual(errors, []);
  await context.close();
});

test("two researcher sub-agents run at once: each its own box in its call's card, its tools and report, and a lane of its own on the timeline", opts, async () => {
  const { page, context, errors } = await openDemo();
  await ask(page, "Research Paris and Tokyo");
  await page.waitForSelector("body[data-state=done]", { timeout: 60_000 });
  const subs = await page.$$eval(".card .subagent", (bs) =>
    bs.map((b) => ({ head: b.querySelector(".sub-head").textContent, tools: [...b.querySelectorAll(".sub-tools li")].map((l) => l.textContent), text: b.querySelector(".sub-text").textContent })));
  assert.equal(subs.length, 2, JSON.stringify(subs));
  for (const [i, city] of [[0, "Paris"], [1, "Tokyo"]]) {
    assert.match(subs[i].head, /^↳ researcher a[0-9a-f]{8}$/);
    assert.match(subs[i].tools[0], new RegExp(`search .*${city}.*✓`));
    assert.match(subs[i].text, new RegExp(`Report on ${city}:`));
  }
  const done = await cards(page);
  assert.deepEqual(done.filter((c) => c.name === "researcher").map((c) => c.status), ["done", "done"]);
  // Each sub-agent's turn has a lane; the two overlap (they ran at once).
  const lanes = await page.$$eval(".step[data-step='1'] .tl-row", (rows) =>
    rows.filter((r) => r.dataset.lane?.startsWith("↳")).map((r) => { const b = r.querySelector(".bar.subagent"); return { from: Number(b.dataset.start), to: Number(b.dataset.end) }; }));
  assert.equal(lanes.length, 2, JSON.stringify(lanes));
  assert.ok(lanes[0].from < lanes[1].to && lanes[1].from < lanes[0].to, `the sub-agents overlap: ${JSON.stringify(lanes)}`);
  // The answer retells both reports.
  assert.match(await page.innerText(".step[data-step='2'] .text"), /Report on Paris[\s\S]*Report on Tokyo/);
  assert.deepEqual(errors, []);
  await page.screenshot({ path: join(ARTIFACTS, "demo-subagents.png"), fullPage: true });
  await context.close();
});

test("reloaded while two researcher sub-agents run: their boxes are drawn again from the stored events, and both go on where they were (their contexts from IndexedDB, their turns resumed, not begun again) to their reports", opts, async () => {
  const { page, context, errors } = await openDemo();
  await ask(page, "Research Paris and Tokyo");
  // Both sub-agents' searches are running (listed, no result yet).
  await page.waitForFunction(() => [...document.querySelectorAll(".subagent .sub-tools li")].filter((l) => !/[✓✗]$/.test(l.textContent)).length === 2, null, { timeout: 30_000 });
  await page.reload();
  await page.waitForSelector("body[data-ready=true]");
  await page.waitForSelector("body[data-state=done]", { timeout: 30_000 });
  const subs = await page.$$eval(".card .subagent .sub-head", (h) => h.map((x) => x.textContent));
  assert.equal(subs.length, 2, "each sub-agent's box, drawn from what was stored before the reload");
  const cs = (await cards(page)).filter((c) => c.name === "researcher");
  assert.deepEqual(cs.map((c) => c.status), ["done", "done"], JSON.stringify(cs));
  assert.ok(cs.every((c) => /^→ researcher a[0-9a-f]{8} gave its report/.test(c.result)), JSON.stringify(cs));
  // Each sub-agent's turn began once (before the reload) and was resumed after it.
  const log = await page.innerText("#wirelog");
  assert.equal((log.match(/SubagentEvent[^\n]*TurnBegin/g) ?? []).length, 2, log.slice(-3000));
  assert.match(await page.innerText(".step[data-step='2'] .text"), /Report on Paris[\s\S]*Report on Tokyo/);
  assert.match(await page.innerText("#wirelog"), /turn_resumed/);
  assert.equal(await page.$$eval("#chat .msg.user", (l) => l.length), 1);
  assert.deepEqual(errors, []);
  await context.close();
});

test("Compare runs the turn twice on one axis: tools started mid-stream finish the turn first, and the time saved is written out", opts, async () => {
  const { page, context, errors } = await openDemo();
  await page.click("#compare");
  await page.waitForSelector("body[data-state=compared]", { timeout: 30_000 });
  const r = await page.$eval("#comparison", (s) => ({ ...s.dataset }));
  const eager = Number(r.eagerMs), deferred = Number(r.deferredMs), saved = Number(r.savedMs);
  assert.ok(eager < deferred, `eager ${eager} ms, deferred ${deferred} ms`);
  assert.equal(saved, deferred - eager);
  assert.match(await page.innerText("#saved"), new RegExp(`finished the turn ${saved} ms sooner`));
  // In the eager run both tools start before step 1's stream ends; in the other, after it.
  const bars = (which) => page.$$eval(`#comparison .timeline.${which} .bar`, (bs) => bs.map((b) => ({ lane: b.closest(".tl-row").dataset.lane, start: Number(b.dataset.start), end: Number(b.dataset.end) })));
  for (const [which, before] of [["eager", true], ["deferred", false]]) {
    const b = await bars(which);
    const step1 = b.find((x) => x.lane === "model");
    const tools = b.filter((x) => x.lane === "search" || x.lane === "clock");
    assert.equal(tools.length, 2, which);
    for (const t of tools) assert.equal(t.start < step1.end, before, `${which}: ${t.lane} started at ${t.start} ms, step 1 streamed until ${step1.end} ms`);
  }
  assert.ok((await page.$$("#comparison .axis .tick")).length >= 4);
  await page.screenshot({ path: join(ARTIFACTS, "demo-compare.png"), fullPage: true });
  assert.deepEqual(errors, []);
  await context.close();
});

test("the first screen shows the comparison without a click, beside a usable chat; New chat clears everything; no panel is empty without saying what goes in it", opts, async () => {
  const { page, context, errors } = await openDemo();
  // Nothing clicked: the comparison runs as the page opens, and Send is not held up by it.
  assert.equal(await page.$eval("#comparison", (s) => s.hidden), false);
  assert.equal(await page.$eval("#send", (b) => b.disabled), false);
  assert.equal(await page.evaluate(() => document.body.dataset.state), "idle");
  await page.waitForSelector("#comparison[data-saved-ms]", { timeout: 30_000 });
  const r = await page.$eval("#comparison", (s) => ({ ...s.dataset }));
  assert.equal(r.onLoad, "true");
  assert.ok(Number(r.eagerMs) < Number(r.deferredMs), JSON.stringify(r));
  assert.match(await page.innerText("#saved"), /finished the turn \d+ ms sooner/);
  // The notes panel says what it is for while it is empty, and not once a note is in it.
  assert.match(await page.innerText("#notes-hint"), /save_note/);
  await ask(page, "Save a note: buy croissants");
  await page.waitForSelector(".approval button.approve:not([disabled])", { timeout: 30_000 });
  await page.click(".approval button.approve");
  await page.waitForSelector("body[data-state=done]", { timeout: 30_000 });
  assert.equal(await page.$eval("#notes-hint", (p) => getComputedStyle(p).display), "none");
  // New chat: the conversation, the wire log, the notes and the comparison are gone.
  await page.click("#clear");
  const left = await page.evaluate(() => ({
    chat: document.querySelector("#chat").children.length,
    wire: document.querySelector("#wirelog").textContent,
    notes: document.querySelectorAll("#notes li").length,
    comparison: document.querySelector("#comparison").hidden,
    hint: getComputedStyle(document.querySelector("#notes-hint")).display,
  }));
  assert.deepEqual(left, { chat: 0, wire: "", notes: 0, comparison: true, hint: "block" });
  assert.deepEqual(errors, []);
  await context.close();
});

test("reloaded while its tools run, the page goes on with the turn by itself and says so (a Session in IndexedDB); a duplicated tab gets a conversation of its own", opts, async () => {
  const { page, context, errors } = await openDemo();
  await ask(page, "What's the weather in Paris, and what time is it in Tokyo?");
  // Reloaded while search (1.5 s) runs, after clock (0.3 s) finished.
  await page.waitForSelector('.card[data-status="done"] >> text=clock', { timeout: 30_000 });
  assert.equal(await page.$eval(".card:has(.name:text-is('search'))", (c) => c.dataset.status), "running");
  await page.reload();
  await page.waitForSelector("body[data-ready=true]");
  assert.match(await page.innerText(".resumed"), /reloaded while a turn ran: the turn goes on/);
  await page.waitForSelector("body[data-state=done]", { timeout: 30_000 });
  // The question drawn once; search (read-only, idempotent) ran again and finished; clock's result
  // was kept; the model's answer came.
  assert.equal(await page.$$eval("#chat .msg.user", (l) => l.length), 1);
  const cs = await cards(page);
  assert.deepEqual(cs.map((c) => [c.name, c.status]).sort(), [["clock", "done"], ["search", "done"]], JSON.stringify(cs));
  assert.match(await page.innerText("#wirelog"), /turn_resumed/);
  // The next question runs in the same conversation.
  await ask(page, "What is 17 * 23 + 4?");
  await page.waitForSelector(".card[data-status=done] >> text=calculator", { timeout: 30_000 });
  await page.waitForSelector("body[data-state=done]", { timeout: 30_000 });
  // A second tab on the same session name (a duplicated tab copies sessionStorage) opens its own.
  const name = await page.evaluate(() => sessionStorage.getItem("kosong-demo-session"));
  const second = await context.newPage();
  await second.addInitScript((n) => sessionStorage.setItem("kosong-demo-session", n), name);
  await second.goto(`${base}/`);
  await second.waitForSelector("body[data-ready=true]");
  assert.notEqual(await second.evaluate(() => sessionStorage.getItem("kosong-demo-session")), name);
  assert.deepEqual(errors, []);
  await context.close();
});

test("at phone size (390 x 844) nothing scrolls sideways, labels sit by their inputs, and the panels stack below the chat", opts, async () => {
  const { page, context, errors } = await openDemo({ width: 390, height: 844 });
  await ask(page, "What's the weather in Paris, and what time is it in Tokyo?");
  await page.waitForSelector("body[data-state=done]", { timeout: 30_000 });
  await page.click("#compare");
  await page.waitForSelector("body[data-state=compared]", { timeout: 30_000 });
  const width = await page.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(width <= 390, `the page is ${width} px wide`);
  // Nothing is cut off at the edge either: every control, tick and bar label lies inside the viewport.
  const outside = await page.evaluate(() =>
    [...document.querySelectorAll("button, input, select, .tick, .bar-text")]
      .filter((e) => e.offsetParent !== null)
      .map((e) => ({ what: e.id || e.className || e.tagName, r: e.getBoundingClientRect(), text: !e.matches("button, input, select") }))
      .filter(({ r, text }) => r.left < 0 || r.right > 390 || (text && r.height > 20))
      .map(({ what, r }) => `${what} ${Math.round(r.left)}..${Math.round(r.right)} h${Math.round(r.height)}`),
  );
  assert.deepEqual(outside, [], "cut off or wrapped");
  // A bar's label never spills past its lane or over the next lane's.
  const spill = await page.evaluate(() =>
    [...document.querySelectorAll(".lane")].flatMap((lane) => {
      const l = lane.getBoundingClientRect();
      return [...lane.querySelectorAll(".bar-text, .lane-note")].map((t) => [t.textContent, t.getBoundingClientRect(), l]).filter(([, r]) => r.left < l.left - 0.5 || r.right > l.right + 0.5 || r.top < l.top - 0.5 || r.bottom > l.bottom + 0.5).map(([x]) => x);
    }),
  );
  assert.deepEqual(spill, [], "labels inside their lanes");
  const geo = await page.evaluate(() => {
    const r = (s) => document.querySelector(s).getBoundingClientRect();
    const label = [...document.querySelectorAll("#settings label")].find((l) => l.textContent.startsWith("Model"));
    const text = label.firstChild;
    const range = document.createRange();
    range.selectNodeContents(text);
    return { labelText: range.getBoundingClientRect(), input: label.querySelector("input").getBoundingClientRect(), chat: r("#chat"), wire: r("#wirelog"), notes: r("#notes") };
  });
  assert.ok(Math.abs(geo.labelText.top - geo.input.top) < geo.input.height, "the label is beside its input");
  assert.ok(geo.wire.top > geo.chat.bottom && geo.notes.top > geo.wire.bottom, "wire log, then notes, below the chat");
  await page.screenshot({ path: join(ARTIFACTS, "demo-phone.png"), fullPage: true });
  assert.deepEqual(errors, []);
  await context.close();
});

test("a broken stream: the page shows the salvaged round — the first card done, the second cut off, the turn going on", opts, async () => {
  const { page, context, errors } = await openDemo();
  await ask(page, "a broken stream");
  await page.waitForSelector("body[data-state=done]", { timeout: 30_000 });
  const cs = await cards(page);
  assert.deepEqual(cs.map((c) => [c.name, c.status, c.step]), [["search", "done", "1"], ["clock", "cut off", "1"]]);
  assert.match(cs[1].result, /^Not run: the connection dropped while its input was still arriving/, "said as a person would");
  assert.equal(await page.$$eval(".step", (x) => x.length), 2, "the turn went on with a second step");
  const answer = await page.innerText('.step[data-step="2"] .text');
  assert.match(answer, /Paris/);
  assert.doesNotMatch(answer, /<\/?system>/, "no model-facing wrapper in the answer");
  assert.match(await page.innerText('.step[data-step="1"] .notice.broken'), /Connection lost — round kept/);
  // The model's bar ends where its last part came (the drop), before the cut-off round was kept;
  // the cut-off call has no bar, its lane says why.
  const tl = await page.$eval('.step[data-step="1"] .timeline', (box) => {
    const lane = (name) => box.querySelector(`.tl-row[data-lane="${name}"]`);
    const model = lane("model").querySelector(".bar");
    const search = lane("search").querySelector(".bar");
    return { modelEnd: Number(model.dataset.end), searchEnd: Number(search.dataset.end), mark: !!lane("model").querySelector(".end-mark"),
      clockBars: lane("clock").querySelectorAll(".bar").length, clockNote: lane("clock").querySelector(".lane-note")?.textContent };
  });
  assert.equal(tl.clockBars, 0, "no zero-length bar for a tool that never ran");
  assert.equal(tl.clockNote, "not run: input cut off");
  assert.ok(tl.mark, "the drop is marked on the model's lane");
  assert.ok(tl.modelEnd < tl.searchEnd, `the stream ended (${tl.modelEnd} ms) before the started tool finished (${tl.searchEnd} ms) and the round was kept`);
  // The dropped connection is the one thing the browser reports.
  assert.deepEqual(errors.filter((e) => !/ERR_INCOMPLETE_CHUNKED_ENCODING/.test(String(e))), []);
  await context.close();
});

test("the page says what happened: the retry notice, a rejected approval, settings that start a new conversation, New chat clearing the notes", opts, async () => {
  const { page, context, errors } = await openDemo();
  await ask(page, "a flaky question");
  await page.waitForSelector("body[data-state=done]", { timeout: 30_000 });
  assert.match(await page.innerText(".retry"), /^↻ 500 — retrying in \d+\.\d s, attempt 2 of \d+$/);

  await ask(page, "Save a note: buy croissants");
  await page.waitForSelector(".approval button.reject:not([disabled])", { timeout: 30_000 });
  await page.click(".approval button.reject");
  await page.waitForSelector("body[data-state=done]", { timeout: 30_000 });
  assert.equal((await cards(page)).at(-1).status, "rejected");
  // A refusal reads as a person says it; the model's words stay in the wire log.
  assert.equal((await cards(page)).at(-1).result, "You said no, so it did not run.");
  assert.match(await page.innerText("#wirelog"), /rejected/i);

  await ask(page, "Save a note: pain au chocolat");
  await page.waitForSelector(".approval button.approve:not([disabled])", { timeout: 30_000 });
  await page.click(".approval >> nth=-1 >> button.approve");
  await page.waitForSelector("body[data-state=done]", { timeout: 30_000 });
  assert.equal(await page.$$eval("#notes li", (l) => l.length), 1);
  await page.click("#clear");
  assert.equal(await page.$$eval("#notes li", (l) => l.length), 0, "New chat clears the notes");

  // The real-provider fields are disabled with the mock; choosing a provider says a new conversation starts.
  assert.equal(await page.$eval("#apiKey", (i) => i.disabled), true);
  await page.selectOption("#kind", "anthropic");
  assert.match(await page.innerText(".settings-changed"), /new conversation/);
  assert.equal(await page.$eval("#apiKey", (i) => i.disabled), false);
  await page.selectOption("#kind", "mock");
  // The browser logs the mock's deliberate 500; nothing else went wrong.
  assert.deepEqual(errors.filter((e) => !/status of 500/.test(e.message)), []);
  await context.close();
});

test("keyboard and screen readers: Escape stops a run, focus stays on a usable control, the question is labelled, the answer is a polite live region", opts, async () => {
  const { page, context, errors } = await openDemo();
  assert.equal(await page.$eval("#q", (q) => q.labels[0]?.textContent), "Your question");
  assert.equal(await page.$eval("#chat", (c) => c.getAttribute("aria-live")), "polite");
  await page.fill("#q", "What's the weather in Paris, and what time is it in Tokyo?");
  await page.focus("#send");
  await page.keyboard.press("Enter");
  await page.waitForSelector('.card[data-status="running"]', { timeout: 30_000 });
  assert.equal(await page.evaluate(() => document.activeElement.id), "stop", "focus moved from Send to Stop");
  await page.keyboard.press("Escape");
  await page.waitForSelector("body[data-state=cancelled]", { timeout: 10_000 });
  assert.equal(await page.evaluate(() => document.activeElement.id), "q", "focus moved from Stop to the question");
  assert.ok(!(await page.innerText("body")).includes("\u23f9"), "no glyph Debian's fonts lack");
  assert.deepEqual(errors, []);
  await context.close();
});
