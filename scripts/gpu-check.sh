#!/usr/bin/env bash
# The day a GPU is lent (issue 27, docs/GPU.md "The GPU check"): one prepared check in two halves,
# so that the device machine's short budget goes to running, not building.
#
#   scripts/gpu-check.sh build   here (nvcc, no GPU needed): builds moesplit, test_gpu_kernels and
#                                test_cuda_backend for sm_90 in build/gpu-check and gathers what the
#                                device runs into .gpucheck/ (git-ignored: binaries and their non-CUDA shared
#                                libraries; the device image has CUDA 13's own). Prints the size
#                                (the device tool carries at most 64 MiB).
#   scripts/gpu-check.sh run     on the device machine, from the repository root, with .gpucheck
#                                carried: device tool run(command="bash scripts/gpu-check.sh run",
#                                carry=[".gpucheck"], timeout_s=590). Every figure goes to files
#                                under $OUT (default ./gpu-check-out), each step under its own
#                                time limit, so a hung step costs its limit, not the call.
#
# Steps of `run`, in priority order (seconds at most): machine (nvidia-smi, lscpu) 10 + 10; GPU
# tests 120 + 60; compute-sanitizer memcheck 90 and racecheck 60 on kernel tests; make-model ds-v3
# --layers 6 (the real MLA widths the kernels take; ~22 GB) 150; eval --device cpu / cuda (experts
# where auto puts them: in VRAM on a big GPU) 2 x 45 and their Pearson per position (the hybrid
# oracle) 15; greedy `run` on cpu / cuda --cpu-moe (experts on the CPU) 2 x 45;
# bench pp512 tg128 -v CPU-only, hybrid with experts on the CPU, hybrid with experts in VRAM
# 3 x 60. That is more than one call's 590 s: what does not fit is skipped and listed as such in
# summary.txt; MOESPLIT_GPU_CHECK_SKIP_TESTS=1 starts at the model (a second call).
set -uo pipefail
cd "$(dirname "$0")/.."
MODE="${1:-}"
PACK=.gpucheck

build() {
  set -e
  local dir=build/gpu-check
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMOESPLIT_CUDA=ON \
    -DMOESPLIT_CUDA_ARCHS=90 -DMOESPLIT_CUDA_EMU=OFF -DMOESPLIT_BUILD_BENCH=OFF >/dev/null
  cmake --build "$dir" -j "${MOESPLIT_JOBS:-$(nproc)}" --target moesplit test_gpu_kernels \
    test_cuda_backend
  rm -rf "$PACK"
  mkdir -p "$PACK/bin" "$PACK/lib"
  cp "$dir/apps/moesplit" "$dir/tests/gpu_kernels/test_gpu_kernels" \
    "$dir/tests/core/engine/test_cuda_backend" "$PACK/bin/"
  strip "$PACK"/bin/*
  # Shared libraries outside glibc, libstdc++ and CUDA (the device image has those, newer).
  for b in "$PACK"/bin/*; do
    ldd "$b" | awk '/=> \// {print $3}'
  done | sort -u | grep -vE '/(libc|libm|libdl|librt|libpthread|libgcc_s|libstdc\+\+|ld-linux[^/]*|libcuda|libcudart|libcublas|libcublasLt)\.so' |
    while read -r lib; do cp -L "$lib" "$PACK/lib/"; done
  du -sh "$PACK"
  ls -l "$PACK/bin" "$PACK/lib"
}

run() {
  local out="${OUT:-./gpu-check-out}"
  mkdir -p "$out"
  export LD_LIBRARY_PATH="$PWD/$PACK/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
  local bin="$PWD/$PACK/bin" m=/tmp/ds-v3-6l.gguf
  # The whole run stays inside one device call: steps go in priority order, each under its own
  # limit cut to what is left of MOESPLIT_GPU_CHECK_SECONDS (default 570); a step with less than
  # 10 s left is skipped and says so.
  local deadline=$((SECONDS + ${MOESPLIT_GPU_CHECK_SECONDS:-570}))
  step() {  # step FILE SECONDS CMD...: appends the command, its output and its status to FILE
    local file="$out/$1" secs="$2" left=$((deadline - SECONDS))
    shift 2
    if [ "$left" -lt 10 ]; then
      echo "$(basename "$file"): $(echo "$*" | tr '\n' ' ' | cut -c1-160) -> skipped (no time left)" \
        >>"$out/summary.txt"
      return
    fi
    [ "$secs" -gt "$left" ] && secs=$left
    echo "### $* (limit ${secs}s)" >>"$file"
    local t0=$SECONDS
    timeout -k 5 "$secs" "$@" >>"$file" 2>&1
    local rc=$?
    echo "### rc=$rc after $((SECONDS - t0))s" >>"$file"
    echo "$(basename "$file"): $(echo "$*" | tr '\n' ' ' | cut -c1-160) -> rc=$rc ($((SECONDS - t0))s)" \
      >>"$out/summary.txt"
  }
  step machine.txt 10 nvidia-smi
  step machine.txt 10 lscpu
  if [ "${MOESPLIT_GPU_CHECK_SKIP_TESTS:-0}" != 1 ]; then
  step tests.txt 120 "$bin/test_gpu_kernels"
  step tests.txt 60 "$bin/test_cuda_backend"
  local san
  san="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
  step sanitizer.txt 90 "$san" --tool memcheck --error-exitcode 3 "$bin/test_gpu_kernels" \
    --gtest_filter='GpuOps.*:GpuRouter.*:GpuQuant/QGemv.*:QGemvIdsGpu.*:GpuMlaAttention.Decode*'
  step sanitizer.txt 60 "$san" --tool racecheck --error-exitcode 3 "$bin/test_gpu_kernels" \
    --gtest_filter='GpuOps.*:GpuRouter.*:GpuQuant/QGemv.OddShapes*:GpuMlaAttention.DecodeMatchesReference'
  fi
  step model.txt 150 "$bin/moesplit" make-model --preset ds-v3 --layers 6 --quant Q4_K_M \
    --threads 16 --force -o "$m"
  local toks=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16
  step hybrid.txt 45 "$bin/moesplit" eval -m "$m" --tokens "$toks" --device cpu \
    --logits-out /tmp/cpu.f32
  step hybrid.txt 45 "$bin/moesplit" eval -m "$m" --tokens "$toks" --device cuda \
    --logits-out /tmp/gpu.f32
  step hybrid.txt 15 python3 -c '
import numpy as np, sys
c = np.fromfile("/tmp/cpu.f32", np.float32).reshape(16, -1)
for name in ("/tmp/gpu.f32",):
    g = np.fromfile(name, np.float32).reshape(16, -1)
    r = [float(np.corrcoef(c[i], g[i])[0, 1]) for i in range(16)]
    print(name, "Pearson per position vs --device cpu: min %.6f" % min(r), " ".join("%.5f" % x for x in r))
'
  # eval takes no placement flags: experts on the CPU are checked by greedy generation instead.
  step hybrid.txt 45 "$bin/moesplit" run -m "$m" -p "The capital of France is" -n 16 --temp 0 \
    --device cpu
  step hybrid.txt 45 "$bin/moesplit" run -m "$m" -p "The capital of France is" -n 16 --temp 0 \
    --device cuda --cpu-moe
  step bench.txt 60 "$bin/moesplit" bench -m "$m" -p 512 -n 128 -r 1 -v --device cpu
  step bench.txt 60 "$bin/moesplit" bench -m "$m" -p 512 -n 128 -r 1 -v --device cuda --cpu-moe
  step bench.txt 60 "$bin/moesplit" bench -m "$m" -p 512 -n 128 -r 1 -v --device cuda
  cat "$out/summary.txt"
}

case "$MODE" in
  build) build ;;
  run) run ;;
  *)
    echo "usage: scripts/gpu-check.sh build | run   (see the top of this file)" >&2
    exit 2
    ;;
esac
