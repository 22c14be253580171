#!/usr/bin/env bash
# README command 2: set up, then run the whole test suite (ctest) in the release build, the
# server's tests with outside clients (scripts/test-server.sh), the suite again under
# AddressSanitizer + UndefinedBehaviorSanitizer (debug preset), then fuzz the parsers (GGUF,
# tokenizer, requests, chat templates, YAML files, topologies) for a bounded time.
#   MOESPLIT_SANITIZER_PASS=0   skips the sanitizer pass
#   MOESPLIT_FUZZ_SECONDS=N     fuzzing time per target (default 30; 0 skips it)
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS="${MOESPLIT_JOBS:-$(nproc)}"

scripts/setup.sh release -DMOESPLIT_REQUIRE_TESTDATA=ON
ctest --test-dir build/release --output-on-failure -j "$JOBS"
# The server with the openai npm client, a load test, Chromium and nginx.
scripts/test-server.sh build/release/apps/moesplit

if [ "${MOESPLIT_SANITIZER_PASS:-1}" != 0 ]; then
  echo "test: sanitizer pass (ASan + UBSan, build/debug)" >&2
  scripts/setup.sh debug -DMOESPLIT_REQUIRE_TESTDATA=ON
  ctest --test-dir build/debug --output-on-failure -j "$JOBS"
fi

FUZZ_SECONDS="${MOESPLIT_FUZZ_SECONDS:-30}"
if [ "$FUZZ_SECONDS" != 0 ]; then
  scripts/fuzz.sh "$FUZZ_SECONDS"
fi
