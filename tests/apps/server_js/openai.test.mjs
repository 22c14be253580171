// The official openai client against moesplit serve: chat and completions, streamed and not,
// usage, prefix reuse, concurrency, an aborted stream, authentication, bad requests.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { startServer, metrics } from "./server.mjs";

const KEY = "test-key-123";
let srv, client;

before(async () => {
  srv = await startServer(["-np", "4", "-c", "2048", "-t", "2", "--api-key", KEY, "--metrics"]);
  client = new OpenAI({ baseURL: srv.base + "/v1", apiKey: KEY, maxRetries: 0, timeout: 60000 });
});
after(async () => { await srv?.stop(); });

const greedy = { temperature: 0, seed: 7, max_tokens: 24 };
const messages = [{ role: "system", content: "You are terse." }, { role: "user", content: "Tell me about rivers." }];

async function streamText(stream) {
  let text = "", usage = null, finish = null, chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    const c = chunk.choices[0];
    if (!c) continue;
    text += c.delta?.content ?? c.text ?? "";
    if (c.finish_reason) finish = c.finish_reason;
  }
  return { text, usage, finish, chunks };
}

test("chat completion, not streamed", async () => {
  const r = await client.chat.completions.create({ model: "any", messages, ...greedy });
  assert.equal(r.object, "chat.completion");
  assert.equal(r.choices[0].message.role, "assistant");
  assert.ok(r.choices[0].message.content.length > 0);
  assert.ok(["stop", "length"].includes(r.choices[0].finish_reason));
  assert.ok(r.usage.prompt_tokens > 0);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  assert.ok(r.usage.completion_tokens <= 24);
  assert.ok(r.timings.predicted_per_second > 0);
});

test("the streamed text equals the non-streamed text for a greedy request", async () => {
  const whole = await client.chat.completions.create({ model: "any", messages, ...greedy });
  const s = await streamText(await client.chat.completions.create({
    model: "any", messages, ...greedy, stream: true, stream_options: { include_usage: true },
  }));
  assert.equal(s.text, whole.choices[0].message.content);
  assert.equal(s.finish, whole.choices[0].finish_reason);
  assert.equal(s.usage.completion_tokens, whole.usage.completion_tokens);
  assert.equal(s.usage.prompt_tokens, whole.usage.prompt_tokens);
});

test("completions, streamed and not", async () => {
  const prompt = "The quick brown fox";
  const whole = await client.completions.create({ model: "any", prompt, ...greedy });
  assert.equal(whole.object, "text_completion");
  const s = await streamText(await client.completions.create({ model: "any", prompt, ...greedy, stream: true }));
  assert.equal(s.text, whole.choices[0].text);
  assert.ok(s.chunks >= 2);
});

test("a repeated long prompt reuses the cached prefix", async () => {
  const long = [{ role: "user", content: "word ".repeat(150) + "end." }];
  const first = await client.chat.completions.create({ model: "any", messages: long, ...greedy, max_tokens: 4 });
  const second = await client.chat.completions.create({ model: "any", messages: long, ...greedy, max_tokens: 4 });
  assert.equal(first.usage.prompt_tokens_details.cached_tokens, 0);
  assert.ok(second.usage.prompt_tokens_details.cached_tokens >= 128, JSON.stringify(second.usage));
  assert.ok(second.usage.prompt_tokens_details.cached_tokens < second.usage.prompt_tokens);
  assert.equal(second.choices[0].message.content, first.choices[0].message.content);
});

test("six concurrent requests against -np 4 all finish", async () => {
  const rs = await Promise.all(Array.from({ length: 6 }, (_, i) => client.chat.completions.create({
    model: "any", messages: [{ role: "user", content: `Question number ${i}` }], max_tokens: 16, seed: i,
  })));
  for (const r of rs) assert.ok(r.usage.completion_tokens > 0);
  const m = await metrics(srv.base, { Authorization: `Bearer ${KEY}` });
  assert.equal(m.requests_processing, 0);
  assert.equal(m.kv_blocks_used, 0);
});

test("an aborted stream stops its sequence and the server keeps serving", async () => {
  const before = await metrics(srv.base, { Authorization: `Bearer ${KEY}` });
  const ac = new AbortController();
  const stream = await client.chat.completions.create(
    { model: "any", messages, max_tokens: 1500, stream: true, ignore_eos: true }, { signal: ac.signal });
  let n = 0;
  try {
    // (The openai client ends the iteration quietly on its own abort; some versions throw.)
    for await (const chunk of stream) { if (++n === 3) ac.abort(); }
  } catch (e) {
    assert.ok(e.name === "AbortError" || e instanceof OpenAI.APIUserAbortError, String(e));
  }
  // Chunks already in the client's buffer when the abort lands are still handed out: one read
  // can carry ~100 SSE events from a fast server (a CI run read 103). What must hold is that the
  // iteration ends before the 1500 tokens asked for, and that the server stops (below).
  assert.ok(n >= 3 && n < 1500, `${n} chunks read`);
  let m;
  for (let i = 0; i < 100; i++) {
    m = await metrics(srv.base, { Authorization: `Bearer ${KEY}` });
    if (m.requests_cancelled_total > before.requests_cancelled_total && m.requests_processing === 0) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.equal(m.requests_cancelled_total, before.requests_cancelled_total + 1);
  assert.equal(m.requests_processing, 0);
  assert.ok(m.tokens_predicted_total - before.tokens_predicted_total < 1500);
  const r = await client.chat.completions.create({ model: "any", messages, max_tokens: 4 });
  assert.ok(r.choices[0].message.content !== undefined);
});

test("a wrong or missing key is refused with 401", async () => {
  const wrong = new OpenAI({ baseURL: srv.base + "/v1", apiKey: "nope", maxRetries: 0 });
  await assert.rejects(wrong.chat.completions.create({ model: "any", messages }),
    (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
  const r = await fetch(srv.base + "/v1/models");
  assert.equal(r.status, 401);
  assert.equal((await r.json()).error.type, "authentication_error");
  assert.equal((await fetch(srv.base + "/health")).status, 200);
});

test("bad requests get 400 naming the field", async () => {
  const bad = async (body, param) => {
    await assert.rejects(client.chat.completions.create(body),
      (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === param);
  };
  await bad({ model: "any", messages, max_tokens: 0 }, "max_tokens");
  await bad({ model: "any", messages: [] }, "messages");
  await bad({ model: "any", messages: [{ role: "wizard", content: "x" }] }, "messages[0].role");
  await bad({ model: "any", messages, temperature: -1 }, "temperature");
  const r = await fetch(srv.base + "/v1/chat/completions", {
    method: "POST", headers: { Authorization: `Bearer ${KEY}`, "Content-Type": "application/json" },
    body: "{\"messages\": [",
  });
  assert.equal(r.status, 400);
  assert.match((await r.json()).error.message, /not valid JSON/);
});

test("logprobs come with each token", async () => {
  const r = await client.chat.completions.create({ model: "any", messages, ...greedy, max_tokens: 5, logprobs: true, top_logprobs: 2 });
  const lp = r.choices[0].logprobs.content;
  assert.equal(lp.length, r.usage.completion_tokens);
  for (const t of lp) {
    assert.ok(t.logprob <= 0);
    assert.equal(t.top_logprobs.length, 2);
    assert.ok(t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob);
  }
});

test("models endpoint", async () => {
  const list = await client.models.list();
  assert.equal(list.data.length, 1);
  assert.equal(list.data[0].object, "model");
});
