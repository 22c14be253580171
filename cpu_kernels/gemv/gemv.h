// Quantized dot products and GEMV for the CPU expert kernels: one weight row (GGUF blocks, read in
// place) times one activation row quantized once per token.
//
//   weights   activations   kernel
//   Q4_K      Q8_K          DotQ4K_Q8K    (integer math per 256-value block as ggml's
//                                          vec_dot_q4_K_q8_K; mins via the Q8_K bsums)
//   Q8_0      Q8_0          DotQ8_0_Q8_0  (integer dot per 32-value block, one f32 scale each)
//
// Every ISA tier computes the same integers per block; only the float summation order of the
// per-block terms differs, so tiers agree with the scalar reference to ~1e-6 of sum |w_i a_i|
// (tests/cpu_kernels/gemv_test.cc).
//
// Usage:
//   const cpu::CpuFeatures f = cpu::DetectCpuFeatures();
//   MOESPLIT_ASSIGN_OR_RETURN(cpu::IsaTier tier,
//                             cpu::EffectiveIsaTier(f, std::getenv("MOESPLIT_MAX_ISA")));
//   const gemv::GemvKernels& k = gemv::KernelsFor(tier);   // keep the reference in your context
//   k.quantize_q8k(x, a_q8k, n);                          // x: [n] f32 -> [n / 256] BlockQ8_K
//   float y = k.dot_q4k_q8k(w_row, a_q8k, n);
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/base/dtype.h"
#include "cpu_kernels/cpu_features.h"

namespace moesplit::gemv {

// Dot of n values: w_row holds n / block_size weight blocks, a_row the activation blocks.
// n is a multiple of the weight block size (256 for Q4_K, 32 for Q8_0); not checked per call.
// Quants of Q8_0/Q8_K inputs must lie in [-127, 127] (ggml's quantizers guarantee it; the SIMD
// tiers use the sign trick, which cannot represent -128 * -128 as ggml's x86 kernels can't).
using DotFn = float (*)(const void* w_row, const void* a_row, int64_t n);
// Quantizes x[0..n) to activation blocks at dst (RowBytes(type, n) bytes, 4-byte aligned).
using QuantizeFn = void (*)(const float* x, void* dst, int64_t n);

// Function pointers for one ISA tier. Static tables: taking a reference is free.
struct GemvKernels {
  cpu::IsaTier tier;
  DotFn dot_q4k_q8k;         // w: Q4_K row,  a: Q8_K row
  DotFn dot_q8_0_q8_0;       // w: Q8_0 row,  a: Q8_0 row
  QuantizeFn quantize_q8k;   // activations for dot_q4k_q8k (ggml's quantize_row_q8_K)
  QuantizeFn quantize_q8_0;  // activations for dot_q8_0_q8_0 (ggml's quantize_row_q8_0)
};

// The kernels of `tier`. The tier must be supported by this CPU (the caller gets it from
// cpu::EffectiveIsaTier); running a higher tier's kernels faults with SIGILL.
const GemvKernels& KernelsFor(cpu::IsaTier tier);

// The activation type a weight type's kernels take: Q4_K -> Q8_K, Q8_0 -> Q8_0. Returns false
// for weight types without a kernel here.
bool ActivationTypeFor(GgmlType weight_type, GgmlType* activation_type);

// y[r] = dot(row r of w, a_q) for r in [0, rows): a [rows, n] weight matrix whose rows are
// row_stride_bytes apart (>= RowBytes(weight_type, n)), times one activation row `a_q`
// quantized to ActivationTypeFor(weight_type). weight_type must have a kernel (CHECKed).
// y: [rows] f32.
void Gemv(const GemvKernels& kernels, GgmlType weight_type, const void* w, size_t row_stride_bytes,
          int64_t rows, int64_t n, const void* a_q, float* y);

}  // namespace moesplit::gemv
