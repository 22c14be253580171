#!/usr/bin/env bash
# The serving issue's single-stream target: the server's decode rate (its own timings, streamed
# and not) against `moesplit bench` tg64 on the same build, alternating so both see the same
# minutes of a noisy machine. One server at a time (each holds the repacked experts).
#   MODEL=x.gguf [MOESPLIT_BIN=build/release/apps/moesplit] [THREADS=2] [ROUNDS=3] scripts/serve-vs-bench.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
: "${MODEL:?set MODEL}"
B="${MOESPLIT_BIN:-$root/build/release/apps/moesplit}"
THREADS="${THREADS:-2}"; ROUNDS="${ROUNDS:-3}"
# 16 prompt tokens (ids, so the tokenizer plays no part), 64 generated.
ids=$(python3 -c "import random; random.seed(5); print(','.join(str(random.randint(100,20000)) for _ in range(16)))")
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
for r in $(seq "$ROUNDS"); do
  port=$(free_port)
  "$B" serve -m "$MODEL" --host 127.0.0.1 --port "$port" -np 4 -c 4096 -t "$THREADS" 2>/dev/null &
  spid=$!
  for _ in $(seq 1200); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.5; done
  for s in true false true false; do
    curl -s "http://127.0.0.1:$port/v1/completions" -d "{\"prompt\": [$ids], \"max_tokens\": 64, \
\"ignore_eos\": true, \"temperature\": 0, \"stream\": $s, \"stream_options\": {\"include_usage\": true}}" |
      grep -o '"predicted_per_second":[0-9.]*' | tail -1 | sed "s/^/round $r server stream=$s /"
  done
  kill $spid; wait $spid 2>/dev/null || true
  "$B" bench -m "$MODEL" -p 0 -n 64 -t "$THREADS" -r 3 2>/dev/null | grep tg64 | sed "s/^/round $r bench /"
done
