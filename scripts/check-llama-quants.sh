#!/usr/bin/env bash
# Logits of moesplit against llama.cpp on files that llama.cpp's own llama-quantize wrote, for
# llama.cpp's IQ mixes: make-model writes the DeepSeek-V2-Lite structure at hidden 256
# (ds-v2-lite-tiny, 27 layers, so that llama.cpp reads it as V2-Lite) in F16, llama-imatrix
# computes an importance matrix on generated text (the IQ2 types need one), llama-quantize writes
# each mix, and both programs evaluate the same token ids in one batch; compare_logits.py prints
# Pearson and argmax per file (docs/PERFORMANCE.md, "IQ3_S and IQ2_XS in 16-row groups ...",
# quotes its output). Then make-model writes the same mix itself: its tensor types must be
# llama-quantize's, tensor by tensor, and its file gets the same logits check.
#
#   scripts/check-llama-quants.sh [MIX ...]        (default: IQ2_XS IQ2_M IQ3_M IQ3_XXS)
#
# Environment: MOESPLIT (default build/apps/moesplit), LLAMA_BIN (a llama.cpp build's bin folder
# with llama-quantize, llama-imatrix and libllama; required), LLAMA_SRC (its source tree, for the
# headers of tests/apps/llama_compat/llama_eval_logits.c and its gguf-py; default
# LLAMA_BIN/../..), WORK (default
# a temporary folder, removed at the end). Exit status 1 if any file's minimum Pearson is below
# 0.999 or an argmax disagrees.
set -euo pipefail

ms=${MOESPLIT:-build/apps/moesplit}
bin=${LLAMA_BIN:?set LLAMA_BIN to a llama.cpp build bin folder}
src=${LLAMA_SRC:-$bin/../..}
mixes=("$@")
[[ ${#mixes[@]} -gt 0 ]] || mixes=(IQ2_XS IQ2_M IQ3_M IQ3_XXS)
for tool in "$bin/llama-quantize" "$bin/llama-imatrix" "$ms"; do
  [[ -x $tool ]] || { echo "check-llama-quants: no executable '$tool'" >&2; exit 1; }
done
work=${WORK:-$(mktemp -d)}
[[ -n ${WORK:-} ]] || trap 'rm -rf "$work"' EXIT
export LD_LIBRARY_PATH=$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

gcc -O1 -I"$src/include" -I"$src/ggml/include" tests/apps/llama_compat/llama_eval_logits.c \
  -L"$bin" -lllama -lggml -lggml-base -lm -o "$work/llama_eval_logits"
"$ms" make-model --preset ds-v2-lite-tiny --quant F16 -o "$work/f16.gguf" --force > /dev/null
/usr/bin/python3 -c "
import random
random.seed(1)
w = ('the of and to in is was for on that with as by at from his her it an were are which this '
     'be or has had first one their its new after who they have two been other all also').split()
print('\n'.join(' '.join(random.choice(w) for _ in range(60)) for _ in range(40)))" > "$work/text.txt"
"$bin/llama-imatrix" -m "$work/f16.gguf" -f "$work/text.txt" -o "$work/imatrix.gguf" -c 128 \
  > "$work/imatrix.log" 2>&1 || { tail -5 "$work/imatrix.log" >&2; exit 1; }

ids=1,15,27,300,511,42,77,900,1000,5,88,123,456,789,1011,64
vocab=1024
status=0
# Logits of moesplit and llama.cpp on file $1 (label $2); sets status=1 below the floor.
check_logits() {
  local f=$1 label=$2 layouts line
  "$work/llama_eval_logits" "$f" "$ids" "$work/ref.f32" batch > /dev/null 2>&1
  "$ms" eval -m "$f" --tokens "$ids" --logits-out "$work/ours.f32" > /dev/null
  layouts=$("$ms" run -m "$f" -p Hi -n 1 2>&1 | grep -E 'repacked at load' | sed 's/^numa: //' |
            tr '\n' ' ')
  line=$(/usr/bin/python3 tests/apps/llama_compat/compare_logits.py "$work/ours.f32" \
         "$work/ref.f32" "$vocab")
  echo "$label: $line"
  echo "  $layouts"
  /usr/bin/python3 - "$line" <<'EOF' || status=1
import re, sys
line = sys.argv[1]
pmin = float(re.search(r"Pearson min ([0-9.]+)", line).group(1))
agree, decided = map(int, re.search(r"argmax agrees at (\d+)/(\d+)", line).groups())
sys.exit(0 if pmin >= 0.999 and agree == decided else 1)
EOF
}

for mix in "${mixes[@]}"; do
  f=$work/$mix.gguf
  "$bin/llama-quantize" --imatrix "$work/imatrix.gguf" "$work/f16.gguf" "$f" "$mix" 2 \
    > "$work/quantize-$mix.log" 2>&1 || { tail -5 "$work/quantize-$mix.log" >&2; exit 1; }
  check_logits "$f" "$mix"
  m=$work/make-$mix.gguf
  "$ms" make-model --preset ds-v2-lite-tiny --quant "$mix" -o "$m" --force > /dev/null
  PYTHONPATH=$src/gguf-py /usr/bin/python3 - "$f" "$m" "$mix" <<'EOF' || status=1
import sys, gguf
theirs, ours, mix = sys.argv[1:]
a = {t.name: t.tensor_type.name for t in gguf.GGUFReader(theirs).tensors}
b = {t.name: t.tensor_type.name for t in gguf.GGUFReader(ours).tensors}
diff = sorted(n for n in set(a) | set(b) if a.get(n) != b.get(n))
print(f"make-model {mix}: {len(b)} tensors, types as llama-quantize's: "
      + ("yes" if not diff else f"NO ({len(diff)} differ, e.g. {diff[:3]})"))
sys.exit(1 if diff else 0)
EOF
  check_logits "$m" "make-model $mix"
done
exit $status
