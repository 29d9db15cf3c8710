// The demo page in real Chromium (Debian's, driven by playwright-core), against the demo
// server and its embedded mock model. Under CI a missing browser is a failure, never a skip.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { createDemoServer } from "../../scripts/demo.mjs";

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const ARTIFACTS = join(import.meta.dirname, "..", "..", "test-artifacts");
const haveBrowser = existsSync(CHROMIUM);
if (!haveBrowser && process.env.CI) throw new Error(`Chromium is missing at ${CHROMIUM}; npm test installs it (apt-get install chromium)`);

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

const opts = { skip: haveBrowser ? false : `no Chromium at ${CHROMIUM}` };

async function openDemo() {
  const context = await browser.newContext({ acceptDownloads: true, viewport: { width: 1100, height: 1400 } });
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

  // Download the recording, then replay it on a fresh page: the same conversation.
  const liveChat = await page.innerText("#chat");
  const [download] = await Promise.all([page.waitForEvent("download"), page.click("#download")]);
  const file = join(ARTIFACTS, "wire.jsonl");
  await download.saveAs(file);
  const lines = readFileSync(file, "utf8").trim().split("\n");
  assert.deepEqual(JSON.parse(lines[0]), { type: "metadata", protocol_version: "1.10" });
  assert.ok(lines.slice(1).every((l) => typeof JSON.parse(l).timestamp === "number"));
  await page.click("#clear");
  assert.equal(await page.innerText("#chat"), "");
  await page.setInputFiles("#load", file);
  await page.waitForSelector("body[data-state=replayed]");
  assert.equal(await page.innerText("#chat"), liveChat);
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
  await page.click(".approval button.approve");
  await page.waitForSelector("body[data-state=done]", { timeout: 30_000 });
  assert.deepEqual(await page.$$eval("#notes li", (l) => l.map((x) => x.textContent)), ["buy croissants"]);
  assert.match(await page.innerText(".approval"), /approved/);
  assert.equal((await cards(page))[0].status, "done");
  assert.deepEqual(errors, []);
  await context.close();
});
