#!/usr/bin/env bash
# README command 1: set up, then run moesplit's main job on a model: inspect it, generate a short
# completion, serve it (OpenAI API on loopback: one streamed chat request with curl, then the
# server stops) and run a short llama-bench-style benchmark. Without an argument it uses the embedded
# default model, a synthetic DeepSeek-V3-structured `ds-tiny` (a few MB, random weights: the
# generated text is gibberish by design), creating it on first use.
#
#   scripts/run.sh [MODEL.gguf]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh release >&2
BIN=build/release/apps/moesplit

MODEL="${1:-}"
if [ -z "$MODEL" ]; then
  MODEL=models/ds-tiny-Q4_K_M.gguf
  if [ ! -f "$MODEL" ]; then
    mkdir -p models
    echo "run: creating the default model $MODEL" >&2
    "$BIN" make-model --preset ds-tiny --quant Q4_K_M --seed 1234 -o "$MODEL"
  fi
fi

"$BIN" version
"$BIN" inspect "$MODEL"
echo
"$BIN" run -m "$MODEL" -p "MoE test: 42 experts!" -n 32 --seed 1234
echo
# Serve it for one request: the OpenAI API on a free loopback port, a streamed chat completion.
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$BIN" serve -m "$MODEL" --port "$PORT" -np 2 -c 1024 2>serve.log.tmp &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true; rm -f serve.log.tmp' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break; sleep 0.1; done
echo "run: POST http://127.0.0.1:$PORT/v1/chat/completions (stream, 8 tokens):"
curl -sfN "http://127.0.0.1:$PORT/v1/chat/completions" -H "Content-Type: application/json" \
  -d '{"messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 8, "seed": 1, "stream": true}'
kill $SERVER; wait $SERVER 2>/dev/null || true
echo
"$BIN" bench -m "$MODEL" -p 64 -n 16 -r 3
