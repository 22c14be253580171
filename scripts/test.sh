#!/usr/bin/env bash
# README command 2: set up, then run the whole test suite (ctest), then fuzz the GGUF parser
# for a bounded time (MOESPLIT_FUZZ_SECONDS, default 60; 0 skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh release -DMOESPLIT_REQUIRE_TESTDATA=ON
ctest --test-dir build/release --output-on-failure -j "$(nproc)"
FUZZ_SECONDS="${MOESPLIT_FUZZ_SECONDS:-60}"
if [ "$FUZZ_SECONDS" != 0 ]; then
  scripts/fuzz.sh "$FUZZ_SECONDS"
fi
