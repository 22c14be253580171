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
t0=$SECONDS
phases=()
phase() {
  phases+=("$1 done after $((SECONDS - t0)) s")
  echo "test: ${phases[-1]}" >&2
}
# Every phase's time again at the very end (also after a failure), where a CI log's tail shows it.
trap 'status=$?; printf "test: %s\n" "${phases[@]}" "exit $status after $((SECONDS - t0)) s" >&2' EXIT

# Without a GPU the CUDA code is only compiled (its tests skip): one architecture checks it at a
# third of the nvcc time of the four the release default builds; with one, its own ("native").
ARCHS=90
if command -v nvidia-smi > /dev/null && nvidia-smi -L 2> /dev/null | grep -q '^GPU'; then
  ARCHS=native
fi
scripts/setup.sh release -DMOESPLIT_REQUIRE_TESTDATA=ON -DMOESPLIT_CUDA_ARCHS="$ARCHS"
phase "release build"
ctest --test-dir build/release --output-on-failure -j "$JOBS"
phase "release ctest"
# The server with the openai npm client, a load test, Chromium and nginx.
scripts/test-server.sh build/release/apps/moesplit
phase "server tests"

if [ "${MOESPLIT_SANITIZER_PASS:-1}" != 0 ]; then
  echo "test: sanitizer pass (ASan + UBSan, build/debug)" >&2
  scripts/setup.sh debug -DMOESPLIT_REQUIRE_TESTDATA=ON
  phase "sanitizer build"
  # The model-level suites run at every ISA tier in the release pass above. Under the sanitizers
  # (about 10x slower) they run at the scalar tier and the machine's VNNI/AMX tiers, which use
  # the repacked layouts and the most kernel code; the middle tiers' kernels still run under
  # ASan in their kernel tests. On a machine without VNNI every tier runs.
  skip='^$'
  if grep -q avx512_vnni /proc/cpuinfo; then
    skip='(ExpertEngineTest|TinyModelsTest|Q23ModelTest|Iq4ModelTest)[.].*[/_](avx2|avx512)([_ ]|$)'
  fi
  ctest --test-dir build/debug --output-on-failure -j "$JOBS" -E "$skip"
  phase "sanitizer ctest"
fi

FUZZ_SECONDS="${MOESPLIT_FUZZ_SECONDS:-30}"
if [ "$FUZZ_SECONDS" != 0 ]; then
  scripts/fuzz.sh "$FUZZ_SECONDS"
  phase "fuzzing"
fi
