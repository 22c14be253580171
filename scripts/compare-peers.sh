#!/usr/bin/env bash
# Alternating decode (or prefill) runs of moesplit and the CPU peers on one model, for a noisy
# shared machine: short runs, the order rotated every round, medians and per-round ratios at the
# end (docs/PERFORMANCE.md quotes its output).
#
#   scripts/compare-peers.sh MODEL.gguf [ROUNDS]
#
# Environment: MOESPLIT (default build/apps/moesplit), LLAMA_BENCH (llama.cpp's llama-bench),
# IK_BENCH (ik_llama.cpp's llama-bench, run with IK_ARGS, default "-rtr 1": its run-time repack;
# its defaults already fuse the MoE and use MLA attention with flash attention); a peer whose
# variable is unset or not executable is skipped. THREADS (default 2), TEST (default
# "-p 0 -n 64": tg64; "-p 512 -n 0": pp512; "-p 512 -n 64": both from one load, reported test by
# test), REPS (default 2: -r of each run).
set -euo pipefail

model=${1:?usage: scripts/compare-peers.sh MODEL.gguf [ROUNDS]}
rounds=${2:-8}
[[ -r $model ]] || { echo "compare-peers: cannot read model '$model'" >&2; exit 1; }
ms=${MOESPLIT:-build/apps/moesplit}
[[ -x $ms ]] || { echo "compare-peers: no moesplit binary at '$ms' (set MOESPLIT)" >&2; exit 1; }
threads=${THREADS:-2}
test_args=${TEST:--p 0 -n 64}
reps=${REPS:-2}
ik_args=${IK_ARGS:--rtr 1}

peers=(ms)
[[ -x ${LLAMA_BENCH:-} ]] && peers+=(ll)
[[ -x ${IK_BENCH:-} ]] && peers+=(ik)
declare -A name=([ms]=moesplit [ll]=llama.cpp [ik]=ik_llama.cpp)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# "test t/s" for every test row (pp512, tg64, ...) of a markdown table from bench / llama-bench.
rows() {
  grep -E '\| +(tg|pp)[0-9]+ +\|' | awk -F'|' '{t = $(NF-2); v = $(NF-1); gsub(/ /, "", t);
                                                split(v, f, " "); print t, f[1]}'
}

run() {
  # shellcheck disable=SC2086  # test_args and ik_args are lists of flags
  case $1 in
    ms) "$ms" bench -m "$model" $test_args -t "$threads" -r "$reps" 2>/dev/null | rows ;;
    ll) "$LLAMA_BENCH" -m "$model" $test_args -t "$threads" -r "$reps" 2>/dev/null | rows ;;
    ik) "$IK_BENCH" -m "$model" $test_args -t "$threads" -r "$reps" $ik_args 2>/dev/null | rows ;;
  esac
}

median() { sort -n "$1" | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

echo "model $model, $threads threads, '$test_args', -r $reps, $rounds rounds, ik_llama.cpp: '$ik_args'"
tests=()
for ((i = 0; i < rounds; ++i)); do
  line="round $((i + 1)):"
  n=${#peers[@]}
  for ((j = 0; j < n; ++j)); do
    p=${peers[$(((i + j) % n))]}
    out=$(run "$p")
    [[ -n $out ]] || { echo "compare-peers: ${name[$p]} printed no result" >&2; exit 1; }
    line+=" ${name[$p]}"
    while read -r test v; do
      echo "$v" >> "$tmp/$p.$test"
      line+=" $test $v"
      [[ " ${tests[*]} " == *" $test "* ]] || tests+=("$test")
    done <<< "$out"
  done
  echo "$line"
done
for test in "${tests[@]}"; do
  for p in "${peers[@]}"; do
    [[ -s $tmp/$p.$test ]] || { echo "compare-peers: ${name[$p]} has no $test row" >&2; exit 1; }
    echo "$test ${name[$p]}: median $(median "$tmp/$p.$test") t/s"
  done
  for p in "${peers[@]}"; do
    [[ $p == ms ]] && continue
    paste "$tmp/ms.$test" "$tmp/$p.$test" | awk '{print $1 / $2}' > "$tmp/ratio_$p.$test"
    echo "$test moesplit / ${name[$p]}: median of the per-round ratios $(median "$tmp/ratio_$p.$test")"
  done
done
