// The serving benchmark's client (run by scripts/bench-serve.sh against one server at a time):
// streamed /v1/completions with token-id prompts (exact lengths on any vocabulary; both
// llama-server and moesplit take them), tokens counted from usage (or chunks), times from the
// client's clock. Prints one JSON object.
//   node bench_serve.mjs BASE_URL [--levels 1,2,4,8] [--gen 64] [--history 2000] [--long 4000]
//                            [--idle-seconds 20] [--parts levels,turn,prefill]
const args = process.argv.slice(2);
const base = args[0];
const opt = (name, def) => {
  const i = args.indexOf("--" + name);
  return i >= 0 ? args[i + 1] : def;
};
const LEVELS = opt("levels", "1,2,4,8").split(",").map(Number);
const GEN = Number(opt("gen", 64));
const HISTORY = Number(opt("history", 2000));
const LONG = Number(opt("long", 4000));
// Tokens the background and measured streams ask for: they are aborted once the long prompt is in.
const BG = Number(opt("bg-tokens", 6000));
// Seconds of idle decoding measured before and after the long prompt (--parts prefill).
const IDLE_S = Number(opt("idle-seconds", 20));
const PARTS = opt("parts", "levels,turn,prefill").split(",");
const VOCAB_LO = Number(opt("vocab-lo", 200)), VOCAB_HI = Number(opt("vocab-hi", 20000));  // ids in the vocabulary

let seed = 12345;
const rand = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
const prompt = (n) => Array.from({ length: n }, () => VOCAB_LO + Math.floor(rand() * (VOCAB_HI - VOCAB_LO)));
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s.length ? s[Math.floor((s.length - 1) / 2)] : NaN; };
const now = () => performance.now();

// One streamed completion: {ttft_ms, tokens, total_ms, itl_ms: [...], token_times: [...]}
async function complete(tokens, max, { signal, onToken } = {}) {
  const t0 = now();
  const r = await fetch(base + "/v1/completions", {
    method: "POST", signal, headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ prompt: tokens, max_tokens: max, temperature: 0, stream: true,
                           ignore_eos: true, stream_options: { include_usage: true },
                           cache_prompt: true }),
  });
  if (!r.ok) throw new Error(`HTTP ${r.status}: ${await r.text()}`);
  const reader = r.body.getReader();
  const dec = new TextDecoder();
  let buf = "", chunks = 0, usage = null, first = 0;
  const times = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const ev = buf.slice(0, i);
      buf = buf.slice(i + 2);
      if (!ev.startsWith("data: ") || ev === "data: [DONE]") continue;
      const j = JSON.parse(ev.slice(6));
      if (j.usage) usage = j.usage;
      const c = j.choices?.[0];
      if (c && !c.finish_reason) {  // a token (its text may be empty on a random model)
        const t = now();
        if (onToken) onToken(t);
        if (!first) first = t;
        times.push(t);
        chunks++;
      }
    }
  }
  const tokens_out = usage?.completion_tokens ?? chunks;
  const itl = times.slice(1).map((t, k) => t - times[k]);
  return { ttft_ms: first - t0, tokens: tokens_out, total_ms: now() - t0, itl_ms: itl, times };
}

async function level(c) {
  const per = 2;  // requests per client
  const t0 = now();
  const results = await Promise.all(Array.from({ length: c }, async () => {
    const out = [];
    for (let k = 0; k < per; k++) out.push(await complete(prompt(128), GEN));
    return out;
  }));
  const flat = results.flat();
  const wall = (now() - t0) / 1000;
  const tokens = flat.reduce((a, r) => a + r.tokens, 0);
  // One stream's decode rate: its tokens after the first over the time after the first.
  const decode = flat.map((r) => (r.tokens - 1) / ((r.total_ms - r.ttft_ms) / 1000));
  return { concurrency: c, requests: flat.length, tokens, seconds: wall, tok_s: tokens / wall,
           stream_decode_tok_s_median: median(decode),
           ttft_ms_median: median(flat.map((r) => r.ttft_ms)),
           itl_ms_median: median(flat.flatMap((r) => r.itl_ms)) };
}

async function secondTurn() {
  const history = prompt(HISTORY);
  const cold = await complete(history, 16);
  // The second turn: the history, an answer (here: fixed ids standing for it), a new question.
  const turn2 = [...history, ...prompt(16), ...prompt(24)];
  const warm = await complete(turn2, 16);
  // For comparison: the same second-turn prompt cold (another history, same length).
  return { history_tokens: HISTORY, cold_ttft_ms: cold.ttft_ms, second_turn_ttft_ms: warm.ttft_ms,
           ratio: warm.ttft_ms / cold.ttft_ms };
}

async function longPrefill() {
  // Two background streams and a measured one decode throughout. The measured stream's token
  // gaps are taken in three windows: IDLE_S seconds before a LONG-token prompt is sent (idle),
  // from then until that prompt's first token (during), and IDLE_S seconds after (idle again).
  // Idle on both sides: the VMs this runs on swing in memory bandwidth by up to 3x over a few
  // seconds (docs/PERFORMANCE.md), so one short idle sample next to a 90-s window is a coin toss.
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  const abort = new AbortController();
  const times = [];
  let failed = null;
  const streams = [0, 1, 2].map((k) => complete(prompt(64), BG, {
    signal: abort.signal, onToken: k === 2 ? (t) => times.push(t) : undefined,
  }).catch((e) => { if (e.name !== "AbortError") failed = e; }));
  while (times.length < 5) {
    if (failed) throw failed;
    await sleep(20);
  }
  const tIdle = now();
  await sleep(IDLE_S * 1000);
  const tLong = now();
  const long = await complete(prompt(LONG), 1);
  const end = tLong + long.ttft_ms;
  await sleep(IDLE_S * 1000);
  const tAfter = now();
  abort.abort();
  await Promise.all(streams);
  if (failed) throw failed;
  // A token's gap is counted in the window its token lands in; the gap still open when the long
  // prompt's first token arrives counts too (a stalled stream shows there).
  const gapsIn = (a, b) => {
    const g = [];
    for (let k = 1; k < times.length; k++) if (times[k] > a && times[k] <= b) g.push(times[k] - times[k - 1]);
    return g;
  };
  const idle = [...gapsIn(tIdle, tLong), ...gapsIn(end, tAfter)];
  const during = gapsIn(tLong, end);
  const lastBefore = times.filter((t) => t <= end).pop();
  if (lastBefore !== undefined) during.push(end - Math.max(lastBefore, tLong));
  const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const idleMed = median(idle), idleMean = mean(idle);
  return { long_prompt_tokens: LONG, long_ttft_ms: long.ttft_ms, idle_gaps: idle.length,
           idle_itl_ms_median: idleMed, idle_itl_ms_mean: idleMean,
           during_itl_ms_median: median(during), during_itl_ms_mean: mean(during),
           during_itl_ms_max: Math.max(...during), tokens_in_window: during.length - 1,
           ratio_median: median(during) / idleMed, ratio_mean: mean(during) / idleMean,
           ratio_max: Math.max(...during) / idleMed };
}

const out = { base, gen_tokens: GEN, levels: [] };
await complete(prompt(32), 8);  // warm-up
if (PARTS.includes("levels")) for (const c of LEVELS) out.levels.push(await level(c));
if (PARTS.includes("turn")) out.second_turn = await secondTurn();
if (PARTS.includes("prefill")) out.long_prefill = await longPrefill();
console.log(JSON.stringify(out));
