#!/usr/bin/env bash
# Fuzzes the GGUF parser, the tokenizer, the server's request parser, the chat templates, the
# YAML loaders (rule files, plans, machine profiles) and the topology loader (hwloc XML and
# synthetic descriptions) with libFuzzer (+ ASan/UBSan) for SECONDS each (default 30: six
# targets in CI's time), starting from copies of the seed corpora in tests/fuzz/*corpus. Exits
# non-zero on any crash, leak or timeout; the input that triggered it is left in
# build-fuzz/fuzz-artifacts/.
#   scripts/fuzz.sh [SECONDS]
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
# needs more than 2 GB; set -e turns that into our exit status.
fuzz() {  # fuzz TARGET CORPUS MAX_LEN
  local work
  work="$(mktemp -d)"
  cp "$root/tests/fuzz/$2"/* "$work/"
  "$build/tests/fuzz/$1" "$work" \
    -max_total_time="$secs" -max_len="$3" -rss_limit_mb=2048 -timeout=10 \
    -artifact_prefix="$artifacts/$1-" -print_final_stats=1
  rm -rf "$work"
  echo "fuzz.sh: $1: no findings in ${secs}s"
}
fuzz gguf_fuzz corpus 65536
fuzz tokenizer_fuzz tokenizer_corpus 4096
fuzz request_fuzz request_corpus 16384
fuzz chat_template_fuzz chat_template_corpus 4096
fuzz yaml_fuzz yaml_corpus 8192
fuzz topology_fuzz topology_corpus 65536
