// The chat page in a real browser (Debian's chromium via playwright-core): type, send, see the
// streamed answer and its tokens/s; no console errors.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { chromium } from "playwright-core";
import { startServer } from "./server.mjs";

const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
let srv, browser;
after(async () => { await browser?.close(); await srv?.stop(); });

test("the chat page streams an answer with its tokens/s", { timeout: 120000 }, async (t) => {
  assert.ok(existsSync(CHROMIUM), `no browser at ${CHROMIUM} (apt-get install chromium)`);
  srv = await startServer(["-np", "2", "-c", "1024", "-t", "2"]);
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
  const page = await browser.newPage();
  const errors = [];
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(srv.base + "/");
  await page.waitForFunction(() => document.getElementById("model").textContent.length > 0 &&
                                   !document.getElementById("model").textContent.includes("connecting"));
  assert.match(await page.textContent("#model"), /ds-tiny/);
  await page.fill("#system", "Be brief.");
  await page.fill("#maxtokens", "24");
  await page.fill("#input", "Hello, who are you?");
  await page.click("#send");
  await page.waitForSelector(".assistant .stats", { timeout: 60000 });
  const answer = await page.textContent(".assistant .content");
  assert.ok(answer.length > 0, "empty answer");
  assert.match(await page.textContent(".assistant .stats"), /tokens\/s/);
  assert.equal(await page.textContent(".user"), "Hello, who are you?");
  // A second turn reuses the first turn's cached prefix.
  await page.fill("#input", "And then?");
  await page.press("#input", "Enter");
  await page.waitForFunction(() => document.querySelectorAll(".assistant .stats").length === 2, null, { timeout: 60000 });
  assert.match(await page.locator(".assistant .stats").nth(1).textContent(), /\d+ cached/);
  assert.deepEqual(errors, []);
});
