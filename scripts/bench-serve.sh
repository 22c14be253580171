#!/usr/bin/env bash
# The serving benchmark: moesplit serve and llama-server (built outside this repository) on the
# same model, threads and context, one after the other on loopback, driven by
# scripts/bench_serve.mjs (Node, no packages): aggregate generated tokens/s and time to first
# token at concurrency 1, 2, 4, 8 (streamed, 64 tokens, ignore_eos), the second turn of a
# conversation with a 2,000-token history (time to first token against the cold first turn), and
# the inter-token latency of decoding streams while a 4,000-token prompt is prefilled.
#   MODEL=x.gguf LLAMA_SERVER=/path/llama-server [MOESPLIT_BIN=...] [THREADS=2] [NP=4] [CTX=16384]
#   [ROUNDS=1] [SERVERS="moesplit llama"] scripts/bench-serve.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
: "${MODEL:?set MODEL}"
MOESPLIT_BIN="${MOESPLIT_BIN:-$root/build/release/apps/moesplit}"
THREADS="${THREADS:-2}"; NP="${NP:-4}"; CTX="${CTX:-16384}"; ROUNDS="${ROUNDS:-1}"
SERVERS="${SERVERS:-moesplit llama}"
CLIENT_ARGS="${CLIENT_ARGS:-}"
# llama-server's web UI off where this build has the flag
LLAMA_FLAGS=""
if [ -n "${LLAMA_SERVER:-}" ] && [[ "$("$LLAMA_SERVER" --help 2>&1 || true)" == *--no-webui* ]]; then
  LLAMA_FLAGS="--no-webui"
fi
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
out="${OUT:-$(mktemp -d)}"
mkdir -p "$out"
pid=""
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; wait 2>/dev/null || true' EXIT

start() {  # start NAME, on a fresh port each time (llama-server was seen failing to bind the
           # port the previous server had just left, with its connections in TIME_WAIT)
  port=$(free_port)
  case "$1" in
    moesplit) "$MOESPLIT_BIN" serve -m "$MODEL" --host 127.0.0.1 --port "$port" -np "$NP" -c "$CTX" \
                -t "$THREADS" 2>"$out/$1.log" & ;;
    llama) : "${LLAMA_SERVER:?set LLAMA_SERVER}"
           "$LLAMA_SERVER" -m "$MODEL" --host 127.0.0.1 --port "$port" -np "$NP" -c "$CTX" \
             -t "$THREADS" -tb "$THREADS" $LLAMA_FLAGS >"$out/$1.log" 2>&1 & ;;
  esac
  pid=$!
  for _ in $(seq 1200); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null && return 0
    kill -0 $pid 2>/dev/null || { cat "$out/$1.log"; exit 1; }
    sleep 0.25
  done
  echo "bench-serve: $1 did not become ready" >&2; exit 1
}

for round in $(seq "$ROUNDS"); do
  for s in $SERVERS; do
    start "$s"
    node "$root/scripts/bench_serve.mjs" "http://127.0.0.1:$port" $CLIENT_ARGS > "$out/$s.$round.json"
    kill $pid; wait $pid 2>/dev/null || true; pid=""
    echo "bench-serve: round $round $s done" >&2
  done
done

python3 - "$out" $SERVERS <<'PY'
import json, sys, glob, statistics as st
out, servers = sys.argv[1], sys.argv[2:]
runs = {s: [json.load(open(f)) for f in sorted(glob.glob(f"{out}/{s}.*.json"))] for s in servers}
med = lambda xs: st.median(xs) if xs else float("nan")
first = runs[servers[0]][0]
levels = first.get("levels", [])
head = [f"c={l['concurrency']} tok/s (TTFT ms)" for l in levels]
if "second_turn" in first: head.append("2nd turn TTFT / cold (ms)")
if "long_prefill" in first: head.append("ITL during long prefill: median, mean (max) / idle median, mean (ms)")
print("| server | " + " | ".join(head) + " |")
print("|---" * (len(head) + 1) + "|")
for s in servers:
    r = runs[s]
    cells = [f"{med([x['levels'][i]['tok_s'] for x in r]):.2f} ({med([x['levels'][i]['ttft_ms_median'] for x in r]):.0f})"
             for i in range(len(levels))]
    if "second_turn" in first:
        cells.append(f"{med([x['second_turn']['second_turn_ttft_ms'] for x in r]):.0f} / {med([x['second_turn']['cold_ttft_ms'] for x in r]):.0f}")
    if "long_prefill" in first:
        g = lambda k: med([x['long_prefill'][k] for x in r])
        cells.append(f"{g('during_itl_ms_median'):.0f}, {g('during_itl_ms_mean'):.0f} (max {g('during_itl_ms_max'):.0f})"
                     f" / {g('idle_itl_ms_median'):.0f}, {g('idle_itl_ms_mean'):.0f}")
    print(f"| {s} | " + " | ".join(cells) + " |")
print()
if len(servers) == 2:
    a, b = runs[servers[0]], runs[servers[1]]
    for i, l in enumerate(levels):
        ra = med([x['levels'][i]['tok_s'] for x in a]); rb = med([x['levels'][i]['tok_s'] for x in b])
        print(f"c={l['concurrency']}: {servers[0]} / {servers[1]} aggregate tok/s = {ra / rb:.2f}x")
for s in servers:
    r = runs[s]
    if "second_turn" in first:
        print(f"{s}: second turn TTFT / cold = {med([x['second_turn']['ratio'] for x in r]):.3f}")
    if "long_prefill" in first:
        print(f"{s}: ITL during prefill / idle = {med([x['long_prefill']['ratio_median'] for x in r]):.2f} (median gap), "
              f"{med([x['long_prefill']['ratio_mean'] for x in r]):.2f} (mean gap), "
              f"{med([x['long_prefill']['ratio_max'] for x in r]):.2f} (longest gap / idle median)")
print(f"\nraw: {out}")
PY
