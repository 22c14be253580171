#!/usr/bin/env bash
# Fuzzes the GGUF parser, the tokenizer and the server's request parser with libFuzzer
# (+ ASan/UBSan) for SECONDS each (default 60), starting from copies of the seed corpora in
# tests/fuzz/corpus, tests/fuzz/tokenizer_corpus and tests/fuzz/request_corpus. Exits non-zero on
# any crash, leak or timeout; the input that triggered it is left in build-fuzz/fuzz-artifacts/.
#   scripts/fuzz.sh [SECONDS]
set -euo pipefail

secs="${1:-60}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build-fuzz"

mkdir -p "$build"
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMOESPLIT_FUZZ=ON -DMOESPLIT_CUDA=OFF -DMOESPLIT_BUILD_TESTS=ON -DMOESPLIT_BUILD_BENCH=OFF \
  > "$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
cmake --build "$build" --target gguf_fuzz tokenizer_fuzz request_fuzz -j2

artifacts="$build/fuzz-artifacts"
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
