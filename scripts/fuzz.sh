#!/usr/bin/env bash
# Fuzzes the GGUF parser, the tokenizer, the server's request parser, the chat templates, the
# YAML loaders (rule files, plans, machine profiles) and the topology loader (hwloc XML and
# synthetic descriptions) with libFuzzer (+ ASan/UBSan) for SECONDS each (default 30: six
# targets in CI's time), starting from copies of the seed corpora in tests/fuzz/*corpus. Exits
# non-zero on any crash, leak or timeout; the input that triggered it is left in
# build-fuzz/fuzz-artifacts/.
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#   MOESPLIT_FUZZ_CAMPAIGN=1  the long campaign: go on after a finding, keep each target's grown
#                             corpus in build-fuzz/campaign/, and print a table of executions and
#                             findings per target at the end (docs/FUZZING.md records one).
#   MOESPLIT_FUZZ_SEED=N      libFuzzer's seed (default: 1 in the short runs, so that CI repeats
#                             the same mutations and a red run can be replayed; random in a
#                             campaign, which is there to find new inputs)
set -euo pipefail

secs="${1:-30}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build-fuzz"

mkdir -p "$build"
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMOESPLIT_FUZZ=ON -DMOESPLIT_CUDA=OFF -DMOESPLIT_BUILD_TESTS=ON -DMOESPLIT_BUILD_BENCH=OFF \
  > "$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
# One build call for every target: one ninja graph, both cores busy until the last link.
cmake --build "$build" -j2 --target gguf_fuzz tokenizer_fuzz request_fuzz chat_template_fuzz \
  yaml_fuzz topology_fuzz

artifacts="$build/fuzz-artifacts"
# A leak inside libhwloc's XML error path that we cannot free (tests/fuzz/lsan.supp says which).
export LSAN_OPTIONS="suppressions=$root/tests/fuzz/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
mkdir -p "$artifacts"

# libFuzzer exits non-zero on a crash, a leak, a timeout (>10 s for one input) or an input that
# needs more than 2 GB; set -e turns that into our exit status (campaign: into the table).
campaign="${MOESPLIT_FUZZ_CAMPAIGN:-0}"
seed_default=1
[ "$campaign" = 1 ] && seed_default=0  # 0: libFuzzer picks one
seed="${MOESPLIT_FUZZ_SEED:-$seed_default}"
summary="$build/fuzz-summary.md"
echo "| target | seconds | executions | exec/s | corpus | findings |" > "$summary"
echo "| --- | ---: | ---: | ---: | ---: | --- |" >> "$summary"
failed=0
fuzz() {  # fuzz TARGET CORPUS MAX_LEN
  local work log rc=0 execs rate findings
  if [ "$campaign" = 1 ]; then
    work="$build/campaign/$1"
    mkdir -p "$work"
  else
    work="$(mktemp -d)"
  fi
  cp "$root/tests/fuzz/$2"/* "$work/"
  log="$build/$1.log"
  : > "$log"
  local before
  before=$(ls "$artifacts" | grep -c "^$1-" || true)
  # After a finding the campaign restarts the target on its grown corpus for the time left.
  local start=$SECONDS left=$secs
  while :; do
    rc=0
    "$build/tests/fuzz/$1" "$work" \
      -max_total_time="$left" -max_len="$3" -rss_limit_mb=2048 -timeout=10 -seed="$seed" \
      -artifact_prefix="$artifacts/$1-" -print_final_stats=1 >> "$log" 2>&1 || rc=$?
    left=$((secs - (SECONDS - start)))
    if [ "$rc" = 0 ] || [ "$campaign" != 1 ] || [ "$left" -le 5 ]; then break; fi
  done
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | awk '{s += $2} END {print s + 0}')
  rate=$((execs / (SECONDS - start > 0 ? SECONDS - start : 1)))
  findings=$(( $(ls "$artifacts" | grep -c "^$1-" || true) - before ))
  echo "| $1 | $((SECONDS - start)) | $execs | $rate | $(ls "$work" | wc -l) | $findings |" >> "$summary"
  [ "$campaign" = 1 ] || rm -rf "$work"
  if [ "$rc" != 0 ] || [ "$findings" != 0 ]; then
    tail -n 60 "$log"
    echo "fuzz.sh: $1: finding(s) in $artifacts/$1-*" >&2
    failed=1
    [ "$campaign" = 1 ] || { cat "$summary"; exit 1; }
  else
    echo "fuzz.sh: $1: no findings in ${secs}s ($execs executions)"
  fi
}
want() { [ ${#targets[@]} = 0 ] || [[ " ${targets[*]} " == *" $1 "* ]]; }
targets=("${@:2}")
want gguf_fuzz && fuzz gguf_fuzz corpus 65536
want tokenizer_fuzz && fuzz tokenizer_fuzz tokenizer_corpus 4096
want request_fuzz && fuzz request_fuzz request_corpus 16384
want chat_template_fuzz && fuzz chat_template_fuzz chat_template_corpus 4096
want yaml_fuzz && fuzz yaml_fuzz yaml_corpus 8192
want topology_fuzz && fuzz topology_fuzz topology_corpus 65536
cat "$summary"
exit "$failed"
