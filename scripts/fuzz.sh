#!/usr/bin/env bash
# Fuzzes the GGUF parser with libFuzzer (+ ASan/UBSan) for SECONDS (default 60), starting from a
# copy of the seed corpus in tests/fuzz/corpus. Exits non-zero on any crash, leak or timeout;
# the input that triggered it is left in build-fuzz/fuzz-artifacts/.
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
cmake --build "$build" --target gguf_fuzz -j2

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp "$root"/tests/fuzz/corpus/* "$work/"
artifacts="$build/fuzz-artifacts"
mkdir -p "$artifacts"

# libFuzzer exits non-zero on a crash, a leak, a timeout (>10 s for one input) or an input that
# needs more than 2 GB; set -e turns that into our exit status.
"$build/tests/fuzz/gguf_fuzz" "$work" \
  -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
  -artifact_prefix="$artifacts/" -print_final_stats=1
echo "fuzz.sh: no findings in ${secs}s"
