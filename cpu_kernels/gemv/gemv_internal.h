// Per-ISA kernel entry points behind GemvKernels. Internal to cpu_kernels/gemv/.
//
// Each ISA lives in its own .cc compiled with its own -m flags (cpu_kernels/CMakeLists.txt).
// Those files must not call inline or template functions from shared headers (float16.h,
// <algorithm>, ...): the linker keeps one copy of such a function, and it could be the copy
// compiled with AVX-512 flags, which would then run on a CPU without AVX-512. Helpers they need
// come from gemv_isa_common.h, whose functions have internal linkage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cpu_kernels/gemv/gemv.h"
#include "cpu_kernels/quant/repack.h"

namespace moesplit::gemv::internal {

// Kernel families. Each fills its weight types' TypeKernels for one tier into *k; KernelsFor
// calls all three once per tier when it builds the tables. A family owns its files:
//   K-quants (Q4_K/Q5_K/Q6_K x Q8_K): gemv_kquants.cc, gemv_{scalar,avx2,avx512,avx512vnni}.cc,
//                                    gemv_avx512_impl.inc
//   legacy (Q8_0/Q4_0/Q5_0 x Q8_0):  gemv_legacy*.cc (and the Q8_0 dots in the files above)
//   float (F32/F16/BF16 x F32):      gemv_float*.cc
void AddKQuantKernels(cpu::IsaTier tier, GemvKernels* k);
void AddLegacyKernels(cpu::IsaTier tier, GemvKernels* k);
// The VNNI tier's table k switched to DecodeRead::kHardware's kernels (gemv.h).
void UseHardwareDecodeReads(GemvKernels* k);
void AddFloatKernels(cpu::IsaTier tier, GemvKernels* k);
// The AMX tier: *k holds the AVX-512 VNNI table; replaces the gemms that AMX tiles run faster
// (gemv_amx.cc).
void AddAmxKernels(GemvKernels* k);
// scaled_softmax and swiglu from kAvx512 on (softmax_avx512.cc).
float ScaledSoftmax_Avx512(float* x, int64_t valid, int64_t n, float scale);
float ScaledSoftmax_Avx2(float* x, int64_t valid, int64_t n, float scale);
// GemvKernels::row_scores (row_scores_avx512.cc, row_scores_avx2.cc).
void RowScores_Avx512(const float* q, int64_t ldq, int64_t n_q, const float* rows, int64_t ld_rows,
                      int64_t n, int64_t d, float* s, int64_t lds);
void RowScores_Avx2(const float* q, int64_t ldq, int64_t n_q, const float* rows, int64_t ld_rows,
                    int64_t n, int64_t d, float* s, int64_t lds);
// GemvKernels::row_mix (row_mix_avx512.cc, row_mix_avx2.cc).
void RowMix_Avx512(const float* p, int64_t ldp, int64_t n_out, const float* rows, int64_t ld_rows,
                   int64_t n, int64_t d, float* y, int64_t ldy);
void RowMix_Avx2(const float* p, int64_t ldp, int64_t n_out, const float* rows, int64_t ld_rows,
                 int64_t n, int64_t d, float* y, int64_t ldy);
void SwiGlu_Avx2(float* gate, const float* up, int64_t n);
void SwiGlu_Avx512(float* gate, const float* up, int64_t n);
// The AMX tier's F32 x F32 GEMM on AMX-BF16 tiles (gemv_float_amx.cc): f32_gemm_bf16x3.
void AddAmxFloatKernels(GemvKernels* k);

// A GemmFn made of one dot per (row, token): for a type/tier without a tiled kernel yet. Defined
// here (not in gemv_isa_common.h) because it is instantiated only in the generic-flag
// registration files: the loop is plain C++, the dot it calls is the tier's.
template <DotFn kDot>
void GemmByDots(const void* w, size_t w_stride, int64_t n_rows, const void* a, size_t a_stride,
                int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* ab = static_cast<const uint8_t*>(a);
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t t = 0; t < n_tok; ++t) {
      y[t * ldy + r] =
          kDot(wb + static_cast<size_t>(r) * w_stride, ab + static_cast<size_t>(t) * a_stride, n);
    }
  }
}

// A repacked layout (kR16, cpu_kernels/quant/repack.h) on a tier without its own tiles: each
// 16-row group unpacked back to the file type's rows (std::vector: the reference / fallback
// path, not a hot one; LoadLayout repacks only where the tier's native_layout says so) and the
// tier's gemm of the file type, kBaseGemm. Generic-flag registration files only (as above).
template <GgmlType kR16, GemmFn kBaseGemm>
void GemmR16ByUnpack(const void* w, size_t w_stride, int64_t n_rows, const void* a, size_t a_stride,
                     int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  const size_t row_bytes = static_cast<size_t>(RowBytes(quant::UnpackedType(kR16), n));
  std::vector<uint8_t> rows(quant::kR16Rows * row_bytes);  // [16 rows x row_bytes] file type
  for (int64_t r0 = 0; r0 < n_rows; r0 += quant::kR16Rows) {
    quant::UnpackRows16(kR16, static_cast<const uint8_t*>(w) + static_cast<size_t>(r0) * w_stride,
                        n, rows.data(), row_bytes);
    kBaseGemm(rows.data(), row_bytes, quant::kR16Rows, a, a_stride, n_tok, n, y + r0, ldy);
  }
}

float DotQ8_0_Q8_0_Scalar(const void* w_row, const void* a_row, int64_t n);

#if defined(MOESPLIT_GEMV_X86)
float DotQ8_0_Q8_0_Avx2(const void* w_row, const void* a_row, int64_t n);
float DotQ8_0_Q8_0_Avx512(const void* w_row, const void* a_row, int64_t n);
float DotQ8_0_Q8_0_Avx512Vnni(const void* w_row, const void* a_row, int64_t n);
#endif

// ---- legacy family (Q8_0 / Q4_0 / Q5_0 weights x Q8_0 activations) -------------------------
// Dots: gemv_legacy_scalar.cc, gemv_legacy_avx2.cc, gemv_legacy_avx512{,vnni}.cc (the Q8_0 dots
// are the ones above). Gemms: tiles that unpack each weight block once for several tokens
// (avx2: gemv_legacy_avx2_gemm.cc; avx512: gemv_legacy_avx512_gemm.inc).
float DotQ4_0_Q8_0_Scalar(const void* w_row, const void* a_row, int64_t n);
float DotQ5_0_Q8_0_Scalar(const void* w_row, const void* a_row, int64_t n);
// Q5_1 (value d * u + m; Q5_K's fallback in llama-quantize's mixes) and Q4_1 (the same with
// 4-bit u): the scalar dots and one AVX2 dot each that every x86 tier uses; tiles:
// GemmQ5_1_Q8_0_Avx2 / GemmQ4_1_Q8_0_Avx2 (the AVX2 and AVX-512 tiers), the VNNI tier's row-lane
// tile and kQ5_1_R16 / kQ4_1_R16 further down.
float DotQ5_1_Q8_0_Scalar(const void* w_row, const void* a_row, int64_t n);
float DotQ4_1_Q8_0_Scalar(const void* w_row, const void* a_row, int64_t n);
// IQ4_NL: Q4_0's block with the nibbles indexing kIq4Values (same Q8_0 activations).
float DotIQ4NL_Q8_0_Scalar(const void* w_row, const void* a_row, int64_t n);
// MXFP4: Q4_0's nibbles (after a 1-byte E8M0 exponent) indexing the doubled E2M1 levels.
float DotMXFP4_Q8_0_Scalar(const void* w_row, const void* a_row, int64_t n);

#if defined(MOESPLIT_GEMV_X86)
float DotQ4_0_Q8_0_Avx2(const void* w_row, const void* a_row, int64_t n);
float DotQ5_0_Q8_0_Avx2(const void* w_row, const void* a_row, int64_t n);
float DotQ5_1_Q8_0_Avx2(const void* w_row, const void* a_row, int64_t n);
void GemmQ5_1_Q8_0_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                        size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
float DotQ4_1_Q8_0_Avx2(const void* w_row, const void* a_row, int64_t n);
void GemmQ4_1_Q8_0_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                        size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
float DotQ4_0_Q8_0_Avx512(const void* w_row, const void* a_row, int64_t n);
float DotQ5_0_Q8_0_Avx512(const void* w_row, const void* a_row, int64_t n);
float DotQ4_0_Q8_0_Avx512Vnni(const void* w_row, const void* a_row, int64_t n);
float DotQ5_0_Q8_0_Avx512Vnni(const void* w_row, const void* a_row, int64_t n);

void GemmQ8_0_Q8_0_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                        size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmQ4_0_Q8_0_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                        size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmQ5_0_Q8_0_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                        size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmQ8_0_Q8_0_Avx512(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                          size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmQ4_0_Q8_0_Avx512(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                          size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmQ5_0_Q8_0_Avx512(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                          size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmQ8_0_Q8_0_Avx512Vnni(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                              size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmQ4_0_Q8_0_Avx512Vnni(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                              size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmQ5_0_Q8_0_Avx512Vnni(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                              size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
// IQ4_NL: the Q4_0 tiles with a vpshufb table lookup (avx2, avx512, avx512vnni) and, for
// kIQ4_NL_R16, Q4_0_R16's VNNI kernels with the lookup (gemv_legacy_r16_avx512vnni.inc).
float DotIQ4NL_Q8_0_Avx2(const void* w_row, const void* a_row, int64_t n);
float DotIQ4NL_Q8_0_Avx512(const void* w_row, const void* a_row, int64_t n);
float DotIQ4NL_Q8_0_Avx512Vnni(const void* w_row, const void* a_row, int64_t n);
void GemmIQ4NL_Q8_0_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                         size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmIQ4NL_Q8_0_Avx512(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                           size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmIQ4NL_Q8_0_Avx512Vnni(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                               size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
// kIQ4_NL_R16 / kIQ4_XS_R16 on the AVX2 tier (gemv_iq4nl_r16_avx2.inc, gemv_iq4xs_r16_avx2.inc):
// the groups read once per token pair (then one token for an odd count), no lane reductions.
void GemmIQ4NLR16_Q8_0_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                            size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmIQ4XSR16_Q8K_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                           size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmIQ4NLR16_Q8_0_Avx512Vnni(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                                  size_t a_stride, int64_t n_tok, int64_t n, float* y,
                                  int64_t ldy);
// MXFP4: IQ4_NL's tiles with kMxfp4Values and the E8M0 scale; kMXFP4_R16 (16-row groups): the
// VNNI tiles of gemv_legacy_r16_avx512vnni.inc, GemmR16ByUnpack elsewhere.
float DotMXFP4_Q8_0_Avx2(const void* w_row, const void* a_row, int64_t n);
float DotMXFP4_Q8_0_Avx512Vnni(const void* w_row, const void* a_row, int64_t n);
void GemmMXFP4_Q8_0_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                         size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmMXFP4_Q8_0_Avx512Vnni(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                               size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmMXFP4R16_Q8_0_Avx512Vnni(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                                  size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
// The legacy blocks repacked in 16-row groups (kQ8_0_R16 / kQ5_0_R16 / kQ4_0_R16): the AVX-512
// VNNI tiles (gemv_legacy_r16_avx512vnni.inc); other tiers take GemmR16ByUnpack.
void GemmQ8_0R16_Q8_0_Avx512Vnni(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                                 size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmQ5_0R16_Q8_0_Avx512Vnni(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                                 size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
// kQ4_0_R16 / kQ5_0_R16 / kQ4_1_R16 / kQ5_1_R16 / kQ2_K_R16 on the AVX2 tier
// (gemv_legacy_r16_avx2.inc, gemv_q2k_r16_avx2.inc): a one- and two-token kernel on the groups
// as they stand, the wide path from 3 tokens.
void GemmQ4_0R16_Q8_0_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                           size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmQ5_0R16_Q8_0_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                           size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmQ4_1R16_Q8_0_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                           size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmQ5_1R16_Q8_0_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                           size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmQ2KR16_Q8K_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                         size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
// kQ3_K_R16 on the AVX2 tier (gemv_q3k_r16_avx2.inc): one token on the groups, the wide path
// from 2 tokens.
void GemmQ3KR16_Q8K_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                         size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmQ4_0R16_Q8_0_Avx512Vnni(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                                 size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
// Q5_1 / Q4_1 on the AVX-512 VNNI tier: the file layout (the row-lane tile for 16-row groups and
// 4+ tokens, GemmQ5_1_Q8_0_Avx2 / GemmQ4_1_Q8_0_Avx2 for the rest) and kQ5_1_R16 / kQ4_1_R16.
void GemmQ5_1_Q8_0_Avx512Vnni(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                              size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmQ5_1R16_Q8_0_Avx512Vnni(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                                 size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmQ4_1_Q8_0_Avx512Vnni(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                              size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmQ4_1R16_Q8_0_Avx512Vnni(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                                 size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
// ... the seven *R16_Q8_0_Avx512Vnni gemms above in their DecodeRead::kHardware forms (decode one
// group at a time; gemv_legacy_r16_avx512vnni.inc).
#define MOESPLIT_LEGACY_R16_HW_DECLARE(Name)                                                       \
  void Gemm##Name##R16_Q8_0_Avx512VnniHw(const void* w, size_t w_stride, int64_t n_rows,           \
                                         const void* a, size_t a_stride, int64_t n_tok, int64_t n, \
                                         float* y, int64_t ldy);
MOESPLIT_LEGACY_R16_HW_DECLARE(Q8_0)
MOESPLIT_LEGACY_R16_HW_DECLARE(Q5_0)
MOESPLIT_LEGACY_R16_HW_DECLARE(Q4_0)
MOESPLIT_LEGACY_R16_HW_DECLARE(Q5_1)
MOESPLIT_LEGACY_R16_HW_DECLARE(Q4_1)
MOESPLIT_LEGACY_R16_HW_DECLARE(IQ4NL)
MOESPLIT_LEGACY_R16_HW_DECLARE(MXFP4)
#undef MOESPLIT_LEGACY_R16_HW_DECLARE
#endif
// ---- end of legacy family ------------------------------------------------------------------
// ---- K-quant family (Q2_K / Q3_K / Q4_K / Q5_K / Q6_K / IQ4_XS weights x Q8_K activations) --------------------------
// Scalar reference dots: gemv_scalar.cc (integer sums per block, exact; one float term per
// block). SIMD tiers: gemv_kquants_avx2.cc and gemv_kquants_avx512{,vnni}.cc (bodies in
// gemv_kquants_avx512.inc, loops in gemv_kquants_tiles.inc, the one-token Q4_K tile in
// gemv_kquants_decode_avx512.inc); per tier, Dot == Gemm with one token bit for bit. Gemm tiles of
// several tokens agree with Dot to 1e-5 of sum |w a| (Q4_K's decode tile sums in another order).
float DotQ4K_Q8K_Scalar(const void* w_row, const void* a_row, int64_t n);
float DotQ5K_Q8K_Scalar(const void* w_row, const void* a_row, int64_t n);
float DotQ6K_Q8K_Scalar(const void* w_row, const void* a_row, int64_t n);
// IQ4_XS (256-value super-blocks, 8 signed 6-bit sub-block scales, kIq4Values levels) x Q8_K.
float DotIQ4XS_Q8K_Scalar(const void* w_row, const void* a_row, int64_t n);
// Q2_K (d s_j q - dmin m_j, 16 sub-blocks of 16) and Q3_K (d (s_j - 32)(q - 4)) x Q8_K.
float DotQ2K_Q8K_Scalar(const void* w_row, const void* a_row, int64_t n);
float DotQ3K_Q8K_Scalar(const void* w_row, const void* a_row, int64_t n);

#if defined(MOESPLIT_GEMV_X86)
#define MOESPLIT_KQUANT_DECLARE(Type, Tier)                                                   \
  float Dot##Type##_Q8K_##Tier(const void* w_row, const void* a_row, int64_t n);              \
  void Gemm##Type##_Q8K_##Tier(const void* w, size_t w_stride, int64_t n_rows, const void* a, \
                               size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
MOESPLIT_KQUANT_DECLARE(Q4K, Avx2)
MOESPLIT_KQUANT_DECLARE(Q5K, Avx2)
MOESPLIT_KQUANT_DECLARE(Q6K, Avx2)
MOESPLIT_KQUANT_DECLARE(Q4K, Avx512)
MOESPLIT_KQUANT_DECLARE(Q6K, Avx512)
MOESPLIT_KQUANT_DECLARE(Q4K, Avx512Vnni)
// Q4_K repacked in 16-row groups (kQ4_K_R16): the AVX-512 VNNI tiles
// (gemv_kquants_r16_avx512vnni.inc); every other tier takes GemmR16ByUnpack with its Q4_K gemm.
void GemmQ4KR16_Q8K_Avx512Vnni(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                               size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
// ... its DecodeRead::kHardware form (decode one group at a time, no software prefetch).
void GemmQ4KR16_Q8K_Avx512VnniHw(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                                 size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
MOESPLIT_KQUANT_DECLARE(Q5K, Avx512Vnni)
MOESPLIT_KQUANT_DECLARE(Q6K, Avx512Vnni)
// Q6_K repacked in 16-row groups (kQ6_K_R16): the AVX-512 VNNI group tile, 1, 2 or 4 tokens per
// pass over a group (gemv_kquants_q6k_r16_avx512vnni.inc).
void GemmQ6KR16_Q8K_Avx512Vnni(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                               size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
// ... its DecodeRead::kHardware form (no software prefetch in decode).
void GemmQ6KR16_Q8K_Avx512VnniHw(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                                 size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
// Q5_K repacked in 16-row groups (kQ5_K_R16): one token on the group kernel, several on the
// Q5_K row-lane tile filled from the groups (gemv_kquants_q5k_r16_avx512vnni.inc).
void GemmQ5KR16_Q8K_Avx512Vnni(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                               size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
// IQ4_XS: the AVX2 dot and token tiles (also the AVX-512 tier's; gemv_kquants_avx2.cc), the
// AVX-512 VNNI dot and the kIQ4_XS_R16 kernels (gemv_iq4xs_avx512vnni.cc), whose file layout's
// gemm is GemmByDots.
float DotIQ4XS_Q8K_Avx2(const void* w_row, const void* a_row, int64_t n);
void GemmIQ4XS_Q8K_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                        size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
float DotIQ4XS_Q8K_Avx512Vnni(const void* w_row, const void* a_row, int64_t n);
void GemmIQ4XSR16_Q8K_Avx512Vnni(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                                 size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
// The same with vpermb lookups (gemv_iq4xs_avx512vbmi.cc): the VNNI tier's entries where
// cpu::DetectCpuFeatures().avx512vbmi.
float DotIQ4XS_Q8K_Avx512Vbmi(const void* w_row, const void* a_row, int64_t n);
void GemmIQ4XSR16_Q8K_Avx512Vbmi(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                                 size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
// Q2_K / Q3_K: the AVX2 dots and token tiles (gemv_kquants_avx2.cc; also the avx512 tier's), the
// VNNI dots and the VNNI kQ2_K_R16 / kQ3_K_R16 kernels (gemv_q23k_avx512{vnni,gfni}.cc, bodies in
// gemv_q23k_avx512.inc); the VNNI tier's file-layout gemm is GemmByDots.
float DotQ2K_Q8K_Avx2(const void* w_row, const void* a_row, int64_t n);
float DotQ3K_Q8K_Avx2(const void* w_row, const void* a_row, int64_t n);
void GemmQ2K_Q8K_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                      size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmQ3K_Q8K_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                      size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
float DotQ2K_Q8K_Avx512Vnni(const void* w_row, const void* a_row, int64_t n);
float DotQ3K_Q8K_Avx512Vnni(const void* w_row, const void* a_row, int64_t n);
void GemmQ2KR16_Q8K_Avx512Vnni(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                               size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmQ3KR16_Q8K_Avx512Vnni(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                               size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
// The kQ3_K_R16 kernel with GFNI bit picks (gemv_q23k_avx512gfni.cc): the VNNI tier's choice
// where Q3KUsesGfni(DetectCpuFeatures()) (GFNI, and not AMD Zen 4, where the picks share
// vpdpbusd's pipes). (kQ2_K_R16's extractions are one shift and four ANDs per vector, so it
// has the one kernel.)
bool Q3KUsesGfni(const cpu::CpuFeatures& features);
void GemmQ3KR16_Q8K_Avx512Gfni(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                               size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
#undef MOESPLIT_KQUANT_DECLARE
#endif
// ---- lattice family (IQ2_XXS / IQ1_S / IQ1_M / IQ3_XXS / IQ3_S / IQ2_XS / IQ2_S x Q8_K) ------
// Scalar reference dots and the tables below: gemv_iq_scalar.cc (generic flags). AVX2 dots
// (also the AVX-512 tier's, and the VNNI tier's without VBMI): gemv_iq_avx2.cc. The VNNI tier
// with VBMI: gemv_iq_avx512vbmi.cc (vpermi2b / vpmultishiftqb lookups, a tile of 1-8 tokens per
// decoded block). All compute, per block, the same integer as the scalar dot:
//   IQ2_XXS  sum_j (2 s_j + 1) sum_i grid_i sign_i q8_i                     times d d_a / 8
//   IQ1_S/M  sum_h (2 s_h + 1) sum_i (8 (grid_i + delta_i)) q8_i            times d d_a / 8
// (delta_i = +-1/8, so 8 (grid + delta) is an integer in [-9, 9]); tiers differ only in the
// float order of the per-block terms. The SIMD tiers negate activations, so they need the
// Q8_K quants in [-127, 127] (gemv.h's contract).
float DotIQ2XXS_Q8K_Scalar(const void* w_row, const void* a_row, int64_t n);
float DotIQ1S_Q8K_Scalar(const void* w_row, const void* a_row, int64_t n);
float DotIQ1M_Q8K_Scalar(const void* w_row, const void* a_row, int64_t n);

// Lookup tables derived once from the lattice grids (quant/iq_grids.h) for the SIMD tiers.
// Built on first use by IqTables() in a generic-flag file (never in an ISA file's static
// initializer, which could run AVX-512 code on any CPU).
struct IqTables {
  // IQ2_XXS: entry e of kIq2XxsGrid as 2-bit level codes (byte 8 -> 0, 25 -> 1, 43 -> 2),
  // value k of the group in bits 2k..2k+1: lo = values 0-3, hi = values 4-7.
  alignas(64) uint8_t iq2xxs_lo[256];
  alignas(64) uint8_t iq2xxs_hi[256];
  // ksigns: Iq2SignByte(s) for the 7-bit sign index s (bit k set: value k negative).
  alignas(64) uint8_t ksigns[128];
  // The same as byte masks: byte k of sign_mask[s] is 0xFF where value k is negative.
  alignas(64) uint64_t sign_mask[128];
  // IQ1_S / IQ1_M: entry e of kIq1SGrid (int8 -1 / 0 / +1) as level bytes 8 grid + 16 in
  // {8, 16, 24}, value k in byte k (the VBMI IQ1 decode loads a whole group's bytes at once).
  alignas(64) uint64_t iq1_levels[2048];
  // IQ3_XXS / IQ3_S: entry e of kIq3XxsGrid / kIq3SGrid as 3-bit level codes, value k in bits
  // 3k..3k+2 (IQ3_XXS levels 4, 12, .., 52, 62 -> 0..7; IQ3_S 1, 3, .., 15 -> 0..7): lo = the
  // low 8 bits of the 12-bit code, hi = its top 4 bits. Filled by AddIq23Codes
  // (gemv_iq23_scalar.cc).
  alignas(64) uint8_t iq3xxs_lo[256];
  alignas(64) uint8_t iq3xxs_hi[256];
  // IQ3_XXS's code bits 6-11 (the levels of values 2-3), for the 16-row kernel's second
  // lookup (gemv_iq_r16_avx512vbmi.cc; its first is iq3xxs_lo, of which it reads bits 0-5).
  alignas(64) uint8_t iq3xxs_b[256];
  alignas(64) uint8_t iq3s_lo[512];
  alignas(64) uint8_t iq3s_hi[512];
  // IQ3_S's code bits 6-11, as iq3xxs_b (the 16-row kernel's second lookup).
  alignas(64) uint8_t iq3s_b[512];
  // IQ2_XS / IQ2_S: as iq2xxs_lo / hi for kIq2XsGrid / kIq2SGrid (2-bit codes of 8, 25, 43).
  alignas(64) uint8_t iq2xs_lo[512];
  alignas(64) uint8_t iq2xs_hi[512];
  alignas(64) uint8_t iq2s_lo[1024];
  alignas(64) uint8_t iq2s_hi[1024];
};
void AddIq23Codes(IqTables* t);
// An IQ2 grid (8 bytes of levels 8, 25, 43 per entry) as 16-bit codes of 2-bit levels 0, 1, 2
// (value k in bits 2k..2k+1): lo[e] = the low byte, hi[e] = the high byte (gemv_iq23_scalar.cc;
// CHECKs that every byte is a level).
void Iq2LevelCodes(const uint64_t* grid, int size, uint8_t* lo, uint8_t* hi);
const IqTables& GetIqTables();

#if defined(MOESPLIT_GEMV_X86)
float DotIQ2XXS_Q8K_Avx2(const void* w_row, const void* a_row, int64_t n);
float DotIQ1S_Q8K_Avx2(const void* w_row, const void* a_row, int64_t n);
float DotIQ1M_Q8K_Avx2(const void* w_row, const void* a_row, int64_t n);
// kIQ2_XXS_R16 on the AVX2 tier (gemv_iq_r16_avx2.cc): 1-4 tokens per pass over the groups,
// the wide path from 8.
void GemmIQ2XXSR16_Q8K_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                            size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
// kIQ1_S_R16 / kIQ1_M_R16 on the AVX2 tier (gemv_iq1_r16_avx2.cc): its digits carried out by
// multiplications by 3, 1-2 tokens per pass over the groups, the wide path from 8.
void GemmIQ1SR16_Q8K_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                          size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmIQ1MR16_Q8K_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                          size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
// IQ2_XXS / IQ1_S / IQ1_M on the AVX2 token tiles (gemv_avx2_tile.inc): 4 tokens per decoded
// block.
void GemmIQ2XXS_Q8K_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                         size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmIQ1S_Q8K_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                       size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmIQ1M_Q8K_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                       size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
// VNNI + VBMI: the dot and a tiled gemm (each weight block decoded once per 4 tokens).
float DotIQ2XXS_Q8K_Avx512Vbmi(const void* w_row, const void* a_row, int64_t n);
float DotIQ1S_Q8K_Avx512Vbmi(const void* w_row, const void* a_row, int64_t n);
float DotIQ1M_Q8K_Avx512Vbmi(const void* w_row, const void* a_row, int64_t n);
void GemmIQ2XXS_Q8K_Avx512Vbmi(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                               size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmIQ1S_Q8K_Avx512Vbmi(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                             size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmIQ1M_Q8K_Avx512Vbmi(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                             size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
// kIQ2_XXS_R16 / kIQ3_XXS_R16 (16-row groups, cpu_kernels/quant/repack.h): one code lookup per
// 64 groups, one level op per value of them (gemv_iq_r16_avx512vbmi.cc; VNNI + VBMI + GFNI).
void GemmIQ2XXSR16_Q8K_Avx512Vbmi(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                                  size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmIQ3XXSR16_Q8K_Avx512Vbmi(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                                  size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
// kIQ2_XS_R16: IQ2_XXS's kernel with 512-entry lookups and a scale pair per lane (vpmaddubsw +
// vpdpwssd in place of vpdpbusd).
void GemmIQ2XSR16_Q8K_Avx512Vbmi(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                                 size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
// kIQ2_S_R16: the same over IQ2_S's 1024-entry grid (eight vpermi2b and seven blends per table).
void GemmIQ2SR16_Q8K_Avx512Vbmi(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                                size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
// kIQ3_S_R16: IQ3_XXS's kernel with 512-entry lookups (two more vpermi2b and blends per table).
void GemmIQ3SR16_Q8K_Avx512Vbmi(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                                size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
// kIQ1_S_R16: base-3 digits, two byte lookups and one field lookup per 64 groups.
void GemmIQ1SR16_Q8K_Avx512Vbmi(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                                size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
// kIQ1_M_R16: the same with a scale per 16 values (two products per value) and a delta per group.
void GemmIQ1MR16_Q8K_Avx512Vbmi(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                                size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
#endif
// IQ3_XXS / IQ3_S / IQ2_XS / IQ2_S: scalar reference dots in gemv_iq23_scalar.cc (generic
// flags), AVX2 dots in gemv_iq23_avx2.cc (scalar grid loads, maddubs / madd: the avx2 and
// avx512 tiers', and the VNNI tier's without VBMI), VNNI + VBMI dots in gemv_iq23_avx512vbmi.cc
// (grid level codes by vpermi2b, 64-bit sign masks, vpdpwssd scales, and a gemm decoding each
// block once per 1-4 tokens: the avx512vnni / amx tiers' where the CPU has VBMI); elsewhere
// the gemm is GemmByDots. Per block:
//   IQ3_XXS  sum_j (2 s_j + 1) sum_i grid_i sign_i q8_i  (32 values per s_j) times d d_a / 4
//   IQ3_S    the same                                                         times d d_a
//   IQ2_XS/S sum_h (2 s_h + 1) sum_i grid_i sign_i q8_i  (16 values per s_h) times d d_a / 8
float DotIQ3XXS_Q8K_Scalar(const void* w_row, const void* a_row, int64_t n);
float DotIQ3S_Q8K_Scalar(const void* w_row, const void* a_row, int64_t n);
float DotIQ2XS_Q8K_Scalar(const void* w_row, const void* a_row, int64_t n);
float DotIQ2S_Q8K_Scalar(const void* w_row, const void* a_row, int64_t n);
#if defined(MOESPLIT_GEMV_X86)
float DotIQ3XXS_Q8K_Avx2(const void* w_row, const void* a_row, int64_t n);
float DotIQ3S_Q8K_Avx2(const void* w_row, const void* a_row, int64_t n);
float DotIQ2XS_Q8K_Avx2(const void* w_row, const void* a_row, int64_t n);
float DotIQ2S_Q8K_Avx2(const void* w_row, const void* a_row, int64_t n);
// ... and their AVX2 token tiles (gemv_iq23_avx2.cc on gemv_avx2_tile.inc).
void GemmIQ3XXS_Q8K_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                         size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmIQ3S_Q8K_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                       size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmIQ2XS_Q8K_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                        size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmIQ2S_Q8K_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                       size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
float DotIQ3XXS_Q8K_Avx512Vbmi(const void* w_row, const void* a_row, int64_t n);
float DotIQ3S_Q8K_Avx512Vbmi(const void* w_row, const void* a_row, int64_t n);
float DotIQ2XS_Q8K_Avx512Vbmi(const void* w_row, const void* a_row, int64_t n);
float DotIQ2S_Q8K_Avx512Vbmi(const void* w_row, const void* a_row, int64_t n);
void GemmIQ3XXS_Q8K_Avx512Vbmi(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                               size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmIQ3S_Q8K_Avx512Vbmi(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                             size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmIQ2XS_Q8K_Avx512Vbmi(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                              size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmIQ2S_Q8K_Avx512Vbmi(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                             size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
#endif
// ---- end of the lattice family --------------------------------------------------------------
// ---- end of the K-quant family ------------------------------------------------------------
// ---- float family (F32 / F16 / BF16 weights x F32 activations): gemv_float*.cc ----------------
// Weights are n values of 4 (F32) or 2 (F16 / BF16) bytes per row, activations n f32 (a_row,
// 4-byte aligned); block size 1, so any n >= 1. Each is widened exactly to f32 and multiplied in
// f32; tiers differ only in summation order (and FMA's single rounding).
float DotF32_F32_Scalar(const void* w_row, const void* a_row, int64_t n);
float DotF16_F32_Scalar(const void* w_row, const void* a_row, int64_t n);
float DotBF16_F32_Scalar(const void* w_row, const void* a_row, int64_t n);

#if defined(MOESPLIT_GEMV_X86)
float DotF32_F32_Avx2(const void* w_row, const void* a_row, int64_t n);
float DotF16_F32_Avx2(const void* w_row, const void* a_row, int64_t n);
float DotBF16_F32_Avx2(const void* w_row, const void* a_row, int64_t n);
void GemmF32_F32_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                      size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmF16_F32_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                      size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmBF16_F32_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                       size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
// The AVX-512 VNNI tier reuses these (float FMA has no VNNI form).
float DotF32_F32_Avx512(const void* w_row, const void* a_row, int64_t n);
float DotF16_F32_Avx512(const void* w_row, const void* a_row, int64_t n);
float DotBF16_F32_Avx512(const void* w_row, const void* a_row, int64_t n);
void GemmF32_F32_Avx512(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                        size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmF16_F32_Avx512(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                        size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
void GemmBF16_F32_Avx512(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                         size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy);
#endif
// ---- end of the float family ------------------------------------------------------------------
// ---- activation quantizers (Q8_K / Q8_0): gemv_quantize_{avx2,avx512}.cc -----------------------
// QuantizeFn per tier, byte-identical to quant::QuantizeRow(kQ8_K / kQ8_0) (the scalar tier's
// entries) for every input, NaN/inf included. n is a multiple of 256 (Q8_K) / 32 (Q8_0); dst
// needs no alignment. The AVX-512 VNNI tier uses the AVX-512 ones (no VNNI step in them).
#if defined(MOESPLIT_GEMV_X86)
void QuantizeQ8K_Avx2(const float* x, void* dst, int64_t n);
void QuantizeQ8_0_Avx2(const float* x, void* dst, int64_t n);
void QuantizeQ8K_Avx512(const float* x, void* dst, int64_t n);
void QuantizeQ8_0_Avx512(const float* x, void* dst, int64_t n);
#endif
// ---- end of the activation quantizers ---------------------------------------------------------

}  // namespace moesplit::gemv::internal
