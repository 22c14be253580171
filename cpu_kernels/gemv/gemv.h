// Quantized dot products, GEMV and GEMM tiles for the CPU kernels: weight rows (GGUF blocks, read
// in place) times activation rows quantized once per token.
//
//   weights                 activations   how
//   Q4_K, Q5_K, Q6_K        Q8_K          integer math per 256-value block (ggml's
//                                         vec_dot_qX_K_q8_K); Q4_K/Q5_K mins via the Q8_K bsums
//   Q8_0, Q4_0, Q5_0        Q8_0          integer dot per 32-value block, one f32 scale each
//   F32, F16, BF16          F32           float FMA (weights widened to f32); the amx tier's
//                                         F16 / BF16 gemm: AMX-BF16 tiles, f32-level results
//
// Every ISA tier computes the same integers per block; only the float summation order of the
// per-block terms differs, so tiers agree with the scalar reference to ~1e-6 of sum |w_i a_i|
// (tests/cpu_kernels/gemv_*_test.cc).
//
// Usage:
//   const cpu::CpuFeatures f = cpu::DetectCpuFeatures();
//   MOESPLIT_ASSIGN_OR_RETURN(cpu::IsaTier tier,
//                             cpu::EffectiveIsaTier(f, std::getenv("MOESPLIT_MAX_ISA")));
//   const gemv::GemvKernels& k = gemv::KernelsFor(tier);   // keep the reference in your context
//   const gemv::TypeKernels* tk = k.For(GgmlType::kQ4_K);  // nullptr: no kernel for that type
//   k.Quantizer(tk->act_type)(x, a_q, n);                  // x: [n] f32 -> activation blocks
//   float y = tk->dot(w_row, a_q, n);
//   tk->gemm(w, w_stride, rows, a_q, a_stride, n_tok, n, y, ldy);   // rows x tokens tile
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/base/dtype.h"
#include "cpu_kernels/cpu_features.h"

namespace moesplit::gemv {

// Dot of n values: w_row holds n / block_size weight blocks, a_row the activation blocks.
// n is a multiple of the weight block size (256 for K-quants, 32 for Q8_0/Q4_0/Q5_0, 1 for
// float types); not checked per call. Quants of Q8_0/Q8_K inputs must lie in [-127, 127]
// (ggml's quantizers guarantee it; the SIMD tiers use the sign trick).
using DotFn = float (*)(const void* w_row, const void* a_row, int64_t n);

// The tile form: y[t * ldy + r] = dot(row r of w, row t of a) for r < n_rows, t < n_tok.
// Weight rows are w_stride bytes apart, activation rows a_stride bytes apart (both >= the row
// bytes of n values). Reads every weight byte once however many tokens there are (prefill);
// n_tok == 1 is the GEMV of decode. n_rows >= 1, n_tok >= 1, any values (no multiple of a tile
// size required). Results equal `dot` per (r, t) up to float summation order.
// Returns the row's log-sum-exp, log sum_{i < valid} e^(scale x_i) (-inf for valid == 0): what
// the pieces of a row split over positions need to be combined (MLA's long-context decode).
using ScaledSoftmaxFn = float (*)(float* x, int64_t valid, int64_t n, float scale);
using SwiGluFn = void (*)(float* gate, const float* up, int64_t n);
// y[t * ldy + j] = sum_{s < n} p[t * ldp + s] * rows[s * ld_rows + j] for t < n_out, j < d.
using RowMixFn = void (*)(const float* p, int64_t ldp, int64_t n_out, const float* rows,
                          int64_t ld_rows, int64_t n, int64_t d, float* y, int64_t ldy);
// s[j * lds + p] = sum_{k < d} q[j * ldq + k] * rows[p * ld_rows + k] for j < n_q, p < n.
using RowScoresFn = void (*)(const float* q, int64_t ldq, int64_t n_q, const float* rows,
                             int64_t ld_rows, int64_t n, int64_t d, float* s, int64_t lds);
using GemmFn = void (*)(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                        size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);

// Quantizes x[0..n) to activation blocks at dst (RowBytes(act_type, n) bytes, 4-byte aligned).
using QuantizeFn = void (*)(const float* x, void* dst, int64_t n);

// The kernels of one weight type at one tier. act_type == kF32 means the activations are plain
// f32 rows (no quantization step).
// Row-interleaved layouts (RowGroup(type) > 1, e.g. kQ4_K_R16) have no row on its own: their
// dot is nullptr and their gemm takes n_rows and the row offset of w in multiples of the group.
struct TypeKernels {
  GgmlType act_type = GgmlType::kF32;
  DotFn dot = nullptr;    // set for every GGUF type that has a kernel; nullptr for row groups
  GemmFn gemm = nullptr;  // nullptr: this type has no kernel
  // The gemm blocks for the caches itself (the AMX tier's F16 / BF16 tiles: K chunks whose
  // packed tokens stay in L2): callers hand it every token and a big row range at once instead
  // of L2-sized token chunks and row slabs, which would repeat its per-call token packing.
  bool self_blocking = false;
};

// How the one-token (decode) kernels of the 4- to 6-bit K-quants' 16-row layouts (kQ4_K_R16,
// kQ6_K_R16, at the AVX-512 VNNI tier) read their weights. A GEMV reads every weight byte once,
// so decode runs as fast as one core streams memory, and which access pattern streams fastest
// differs between CPUs:
//   kPrefetched: Q4_K_R16 two 16-row groups at once (two streams sharing each activation
//     broadcast), each prefetching its next block into L2; Q6_K_R16 one group, prefetching 6
//     blocks ahead. The Intel Xeon VM (docs/PERFORMANCE.md 2026-11-24 (n)): two streams +9%,
//     no software prefetch -13%.
//   kHardware: one group at a time, no software prefetch: the hardware prefetcher alone on one
//     sequential stream. The Zen 4 VM (docs/PERFORMANCE.md 2026-12-01, eighteenth session):
//     a plain read of one stream 33-35 GB/s per core, of two 18-31; the V3 q4_K-q6_K MoE
//     layer's decode 1.40x kPrefetched on one thread (q4_K-q4_K 1.43x).
// The legacy 16-row layouts (kQ4_0_R16 .. kMXFP4_R16) decode two groups side by side in
// kPrefetched, one at a time in kHardware, with software prefetch in both (on Zen 5 the two
// streams read 1.02-1.45x one, cold: gemv_legacy_r16_avx512vnni.inc). Every other kernel reads
// the same way in both modes (on Zen 4 their prefetch still paid: Q2_K / Q3_K / IQ4_XS /
// IQ2_XXS / IQ1_S layers 0.59-1.02x without it; on Zen 5 IQ2_XXS / IQ1_S 0.32-0.56x, one
// group or two). The AMX tier, Intel's, keeps kPrefetched's kernels in both.
enum class DecodeRead : uint8_t { kPrefetched = 0, kHardware = 1 };
inline constexpr int kNumDecodeReads = 2;

// Function pointers for one ISA tier. Built once per process (immutable afterwards): taking a
// reference is free.
struct GemvKernels {
  cpu::IsaTier tier = cpu::IsaTier::kScalar;
  DecodeRead decode_read = DecodeRead::kPrefetched;  // the mode its decode kernels read in
  std::array<TypeKernels, kTypeIdLimit> by_type{};  // indexed by weight type id
  QuantizeFn quantize_q8k = nullptr;                // Q8_K activations (ggml's quantize_row_q8_K)
  QuantizeFn quantize_q8_0 = nullptr;               // Q8_0 activations (ggml's quantize_row_q8_0)
  // [repacked type id] its gemm is this tier's own tile (AVX-512 VNNI), not the unpack-to-file-
  // type fallback every other tier has: repacking at load pays only there (LoadLayout).
  std::array<bool, kTypeIdLimit> native_layout{};
  // The AMX tier: F32 x F32 products on AMX-BF16 tiles, each value split into two bf16
  // (gemv_float_amx.cc): ~1.5e-5 of sum |w a| instead of f32's ~1e-7, so not the F32 kernel
  // itself (a sharp 27-layer F32 model drifts past the oracle's bound with it); taken where that
  // precision is ample: MLA's expanded-form attention (softmax inputs, llama.cpp runs them in
  // f16). nullptr on the other tiers.
  GemmFn f32_gemm_bf16x3 = nullptr;
  // x[0..valid) = softmax(scale * x[0..valid)), x[valid..n) = 0: an attention score row with
  // its causal tail; returns log sum_{i < valid} e^(scale x_i) (ScaledSoftmaxFn). Every tier: the
  // scalar reference (ops::Softmax), AVX-512 from kAvx512 on.
  ScaledSoftmaxFn scaled_softmax = nullptr;
  // gate[i] = silu(gate[i]) * up[i] for i < n: the SwiGLU of the FFNs (moe/fused_ffn.cc). Every
  // tier: the scalar reference (ops::SwiGluInPlace, expf), AVX-512 from kAvx512 on.
  SwiGluFn swiglu = nullptr;
  // Weighted sums of f32 rows, n_out outputs of d values over n rows (RowMixFn): MLA's absorbed
  // decode output p C from the latent cache rows as they lie. Every tier: the scalar reference
  // (positions in order, one f32 sum per output), AVX2 and AVX-512 from their tiers on.
  RowMixFn row_mix = nullptr;
  // Scores of n_q f32 queries against n f32 rows (RowScoresFn): MLA's absorbed decode scores
  // q_abs C^T from the latent cache rows as they lie. Every tier: the scalar reference (one f32
  // sum per score, values in order), AVX2 and AVX-512 from their tiers on.
  RowScoresFn row_scores = nullptr;

  // The kernels for weight type t, or nullptr when there are none.
  const TypeKernels* For(GgmlType t) const;
  // The quantizer producing act_type (kQ8_K or kQ8_0); nullptr for kF32 (no quantization).
  QuantizeFn Quantizer(GgmlType act_type) const;
};

// The kernels of `tier`, their decode reading weights as `read` says. The tier must be
// supported by this CPU (the caller gets it from cpu::EffectiveIsaTier); running a higher
// tier's kernels faults with SIGILL.
const GemvKernels& KernelsFor(cpu::IsaTier tier, DecodeRead read = DecodeRead::kPrefetched);
// "prefetched", "hardware" (the MOESPLIT_DECODE_READ spellings).
std::string_view DecodeReadName(DecodeRead read);
// The mode measured faster on this CPU: kHardware on AMD family 0x19 (Zen 4; Zen 3 has no
// AVX-512, so its tiers never run the kernels that differ), kPrefetched elsewhere: measured on
// an Intel Xeon, and on Zen 5 (family 0x1A; docs/PERFORMANCE.md 2026-12-02, twenty-fifth
// session: the V3 q4_K-q6_K / q4_K-q4_K layer decode, GB/s_med prefetched over hardware in 3
// alternated rounds: 1 thread 1.32-1.49x / 1.35-1.60x, 2 threads medians 1.33x / 1.77x).
DecodeRead PreferredDecodeRead(const cpu::CpuFeatures& features);
// PreferredDecodeRead(features) unless `env`, the raw value of the MOESPLIT_DECODE_READ
// environment variable (nullptr or "" = unset), names a mode; other values are an
// InvalidArgument error naming the variable and the spellings.
StatusOr<DecodeRead> EffectiveDecodeRead(const cpu::CpuFeatures& features, const char* env);

// The activation type a weight type's kernels take (Q4_K -> Q8_K, Q8_0 -> Q8_0, BF16 -> F32...).
// Returns false for weight types without a kernel at any tier.
bool ActivationTypeFor(GgmlType weight_type, GgmlType* activation_type);

// The layout a weight matrix of `type` and `rows` rows should be repacked into at load for
// these kernels (quant::RepackedType, e.g. kQ4_K_R16 for Q4_K with rows a multiple of 16, where
// the tier has native tiles for it), or `type` itself (no repacking pays).
GgmlType LoadLayout(const GemvKernels& kernels, GgmlType type, int64_t rows);

// y[r] = dot(row r of w, a_q) for r in [0, rows): a [rows, n] weight matrix whose rows are
// row_stride_bytes apart (>= RowBytes(weight_type, n)), times one activation row `a_q` of
// ActivationTypeFor(weight_type). weight_type must have a kernel (CHECKed). y: [rows] f32.
void Gemv(const GemvKernels& kernels, GgmlType weight_type, const void* w, size_t row_stride_bytes,
          int64_t rows, int64_t n, const void* a_q, float* y);

}  // namespace moesplit::gemv
