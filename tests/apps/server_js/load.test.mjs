// Load and faults, bounded and on loopback: LOAD_REQUESTS (default 500) streamed requests at
// concurrency LOAD_CONCURRENCY (16) against -np 4 and a short queue, a fifth of them aborted
// mid-stream. Every request must end in a full answer, a 503 (queue full) or its abort; then
// nothing runs, every KV block is free or cached, and resident memory is within 10% of where it
// was after a warm-up.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { startServer, metrics } from "./server.mjs";

const N = Number(process.env.LOAD_REQUESTS ?? 500);
const CONCURRENCY = Number(process.env.LOAD_CONCURRENCY ?? 16);
const MAX_TOKENS = 12;
let srv;
after(async () => { await srv?.stop(); });

async function one(i) {
  const abort = i % 5 === 4;
  const ac = new AbortController();
  const r = await fetch(srv.base + "/v1/chat/completions", {
    method: "POST", signal: ac.signal, headers: { "Content-Type": "application/json" },
    body: JSON.stringify({
      messages: [{ role: "user", content: `request ${i}: ` + "tell me more ".repeat(i % 7) }],
      max_tokens: MAX_TOKENS, ignore_eos: true, stream: true, seed: i,
    }),
  });
  if (r.status === 503) {
    assert.ok(r.headers.get("retry-after"), "503 without Retry-After");
    await r.text();
    return "busy";
  }
  assert.equal(r.status, 200, `request ${i}: HTTP ${r.status}`);
  const reader = r.body.getReader();
  const decoder = new TextDecoder();
  let text = "", chunks = 0, finish = null, done = false;
  try {
    while (!done) {
      const { value, done: end } = await reader.read();
      if (end) break;
      text += decoder.decode(value, { stream: true });
      for (const ev of text.split("\n\n").slice(0, -1)) {
        if (ev === "data: [DONE]") done = true;
        else if (ev.startsWith("data: ")) {
          chunks++;
          const c = JSON.parse(ev.slice(6)).choices[0];
          if (c?.finish_reason) finish = c.finish_reason;
        }
      }
      text = text.slice(text.lastIndexOf("\n\n") + 2);
      if (abort && chunks >= 2) { ac.abort(); return "aborted"; }
    }
  } catch (e) {
    if (abort && e.name === "AbortError") return "aborted";
    throw e;
  }
  if (abort) return "aborted";  // finished before it could be aborted: counts as its abort
  assert.ok(done, `request ${i}: no [DONE]`);
  assert.equal(finish, "length", `request ${i}: finish ${finish}`);
  return "full";
}

test(`${N} requests at concurrency ${CONCURRENCY}, a fifth aborted`, { timeout: 600000 }, async () => {
  srv = await startServer(["-np", "4", "-c", "4096", "-t", "2", "--max-queue", "6", "--metrics"]);
  const outcomes = { full: 0, busy: 0, aborted: 0 };
  const run = async (count) => {
    let next = 0;
    const worker = async () => {
      while (next < count) {
        const i = next++;
        outcomes[await one(i)]++;
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  };
  // Warm-up at the same concurrency: the HTTP threads and their allocator arenas exist after it.
  await run(4 * CONCURRENCY);
  const rss0 = srv.rssKiB();
  for (const k of Object.keys(outcomes)) outcomes[k] = 0;
  await run(N);
  assert.equal(outcomes.full + outcomes.busy + outcomes.aborted, N);
  assert.ok(outcomes.full > 0 && outcomes.aborted > 0, JSON.stringify(outcomes));
  let m;
  for (let k = 0; k < 100; k++) {
    m = await metrics(srv.base);
    if (m.requests_processing === 0 && m.requests_deferred === 0) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.equal(m.requests_processing, 0);
  assert.equal(m.requests_deferred, 0);
  assert.equal(m.kv_blocks_used, 0);
  assert.equal(m.kv_blocks_cached + m.kv_blocks_free, m.kv_blocks_total);
  const rss1 = srv.rssKiB();
  assert.ok(rss1 <= rss0 * 1.1, `resident memory grew from ${rss0} to ${rss1} KiB`);
  console.log(`load: ${JSON.stringify(outcomes)}, rss ${rss0} -> ${rss1} KiB, ` +
              `${m.requests_cancelled_total} cancelled, ${m.prefix_cache_hits_total} prefix hits`);
  assert.equal((await fetch(srv.base + "/health")).status, 200);
});
