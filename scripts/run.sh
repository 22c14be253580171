#!/usr/bin/env bash
# README command 1: set up, then run moesplit's main job on a model: inspect it, generate a short
# completion and run a short llama-bench-style benchmark. Without an argument it uses the embedded
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
"$BIN" bench -m "$MODEL" -p 64 -n 16 -r 3
