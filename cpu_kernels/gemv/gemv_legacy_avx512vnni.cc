// Legacy-block kernels (Q8_0 / Q4_0 / Q4_1 / Q5_0 / Q5_1 / IQ4_NL / MXFP4 weights x Q8_0
// activations), AVX-512 VNNI tier (vpdpbusd integer dots). Compiled with MOESPLIT_FLAGS_AVX512VNNI
// (gemv/legacy.cmake); reached only through KernelsFor(IsaTier::kAvx512Vnni). The bodies are in
// gemv_legacy_avx512_impl.inc.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cpu_kernels/gemv/gemv_internal.h"
#include "cpu_kernels/gemv/gemv_isa_common.h"
#include "cpu_kernels/quant/blocks.h"
#include "cpu_kernels/quant/blocks_iq.h"

namespace moesplit::gemv::internal {

#include "cpu_kernels/gemv/gemv_avx512_reduce.inc"
#include "cpu_kernels/gemv/gemv_legacy_avx512_impl.inc"
#include "cpu_kernels/gemv/gemv_legacy_gm_avx512vnni.inc"
#include "cpu_kernels/gemv/gemv_legacy_rowlane_avx512vnni.inc"

// After the row-lane tiles: the repacked kernels reuse their buffer and token loops.
#include "cpu_kernels/gemv/gemv_legacy_r16_avx512vnni.inc"

float DotQ4_0_Q8_0_Avx512Vnni(const void* w_row, const void* a_row, int64_t n) {
  return DotImpl<KindQ4_0<true>>(w_row, a_row, n);
}

float DotQ5_0_Q8_0_Avx512Vnni(const void* w_row, const void* a_row, int64_t n) {
  return DotImpl<KindQ5_0<true>>(w_row, a_row, n);
}

// Several tokens: 16-row groups in the row-lane tile (gemv_legacy_rowlane_avx512vnni.inc); the
// remaining rows, and fewer tokens, in the block-major tile (full 16-token tiles) and the pair
// tiles (the rest).
template <class Block, class Gm, class Kind>
void LegacyGemm(const void* w, size_t w_stride, int64_t n_rows, const void* a, size_t a_stride,
                int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  int64_t r = 0;
  // (Rows of more than kLegacyTokValues blocks, 262144 values, would not fit the row-lane tile's
  // per-pass token data: no model has them, the other tiles take them.)
  if (n_tok >= kLegacyRowLaneMinTokens && n / kQk <= kLegacyTokValues) {
    r = n_rows / kRowLaneRows * kRowLaneRows;
    LegacyRowLaneGemm<Block>(w, w_stride, r, a, a_stride, n_tok, n, y, ldy);
  }
  if (r == n_rows) return;
  const auto* wr = static_cast<const uint8_t*>(w) + r * w_stride;
  const int64_t done = GmGemm16<Gm>(wr, w_stride, n_rows - r, a, a_stride, n_tok, n, y + r, ldy);
  if (done < n_tok) {
    GemmImpl<Kind>(wr, w_stride, n_rows - r, static_cast<const uint8_t*>(a) + done * a_stride,
                   a_stride, n_tok - done, n, y + r + done * ldy, ldy);
  }
}

void GemmQ8_0_Q8_0_Avx512Vnni(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                              size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  LegacyGemm<BlockQ8_0, GmQ8_0, KindQ8_0<true>>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}

void GemmQ4_0_Q8_0_Avx512Vnni(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                              size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  LegacyGemm<BlockQ4_0, GmQ4Q5<false>, KindQ4_0<true>>(w, w_stride, n_rows, a, a_stride, n_tok, n,
                                                       y, ldy);
}

void GemmQ5_0_Q8_0_Avx512Vnni(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                              size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  LegacyGemm<BlockQ5_0, GmQ4Q5<true>, KindQ5_0<true>>(w, w_stride, n_rows, a, a_stride, n_tok, n, y,
                                                      ldy);
}

// Blocks with no block-major tile here (IQ4_NL, MXFP4, Q4_1, Q5_1) in the file layout (tensors
// that are not repacked; experts are, to their *_R16 layouts): 16-row groups in the row-lane tile
// for several tokens, kRest for one token and the remaining rows (IQ4_NL / MXFP4: the pair tiles
// of gemv_legacy_avx512_impl.inc; Q4_1 / Q5_1: the AVX2 tiles, a call into gemv_legacy_avx2.cc, so
// no template of another tier is instantiated under this file's flags).
namespace {  // internal linkage: this file's ISA flags stay in it (gemv_internal.h)
template <class Block, GemmFn kRest>
void RowLaneFileGemm(const void* w, size_t w_stride, int64_t n_rows, const void* a, size_t a_stride,
                     int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  int64_t r = 0;
  if (n_tok >= kLegacyRowLaneMinTokens && n / kQk <= kLegacyTokValues) {
    r = n_rows / kRowLaneRows * kRowLaneRows;
    LegacyRowLaneGemm<Block>(w, w_stride, r, a, a_stride, n_tok, n, y, ldy);
  }
  if (r == n_rows) return;
  kRest(static_cast<const uint8_t*>(w) + r * w_stride, w_stride, n_rows - r, a, a_stride, n_tok, n,
        y + r, ldy);
}
}  // namespace

void GemmQ5_1_Q8_0_Avx512Vnni(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                              size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  RowLaneFileGemm<quant::BlockQ5_1, GemmQ5_1_Q8_0_Avx2>(w, w_stride, n_rows, a, a_stride, n_tok, n,
                                                        y, ldy);
}

void GemmQ4_1_Q8_0_Avx512Vnni(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                              size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  RowLaneFileGemm<quant::BlockQ4_1, GemmQ4_1_Q8_0_Avx2>(w, w_stride, n_rows, a, a_stride, n_tok, n,
                                                        y, ldy);
}

float DotIQ4NL_Q8_0_Avx512Vnni(const void* w_row, const void* a_row, int64_t n) {
  return DotImpl<KindIQ4NL<true>>(w_row, a_row, n);
}

void GemmIQ4NL_Q8_0_Avx512Vnni(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                               size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  RowLaneFileGemm<quant::BlockIQ4_NL, GemmImpl<KindIQ4NL<true>>>(w, w_stride, n_rows, a, a_stride,
                                                                 n_tok, n, y, ldy);
}

float DotMXFP4_Q8_0_Avx512Vnni(const void* w_row, const void* a_row, int64_t n) {
  return DotImpl<KindMXFP4<true>>(w_row, a_row, n);
}

void GemmMXFP4_Q8_0_Avx512Vnni(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                               size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  RowLaneFileGemm<quant::BlockMXFP4, GemmImpl<KindMXFP4<true>>>(w, w_stride, n_rows, a, a_stride,
                                                                n_tok, n, y, ldy);
}

// The 16-row legacy layouts' gemms, each in both decode read modes (gemv.h; the VNNI tier's
// table takes the Hw forms in DecodeRead::kHardware, UseHardwareDecodeReads).
#define MOESPLIT_LEGACY_R16_GEMMS(Name, kT, Block)                                                 \
  void Gemm##Name##R16_Q8_0_Avx512Vnni(const void* w, size_t w_stride, int64_t n_rows,             \
                                       const void* a, size_t a_stride, int64_t n_tok, int64_t n,   \
                                       float* y, int64_t ldy) {                                    \
    LegacyR16Gemm<kT, Block, DecodeRead::kPrefetched>(w, w_stride, n_rows, a, a_stride, n_tok, n,  \
                                                      y, ldy);                                     \
  }                                                                                                \
  void Gemm##Name##R16_Q8_0_Avx512VnniHw(const void* w, size_t w_stride, int64_t n_rows,           \
                                         const void* a, size_t a_stride, int64_t n_tok, int64_t n, \
                                         float* y, int64_t ldy) {                                  \
    LegacyR16Gemm<kT, Block, DecodeRead::kHardware>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, \
                                                    ldy);                                          \
  }
MOESPLIT_LEGACY_R16_GEMMS(Q8_0, GgmlType::kQ8_0_R16, BlockQ8_0)
MOESPLIT_LEGACY_R16_GEMMS(Q5_0, GgmlType::kQ5_0_R16, BlockQ5_0)
MOESPLIT_LEGACY_R16_GEMMS(Q4_0, GgmlType::kQ4_0_R16, BlockQ4_0)
MOESPLIT_LEGACY_R16_GEMMS(Q5_1, GgmlType::kQ5_1_R16, quant::BlockQ5_1)
MOESPLIT_LEGACY_R16_GEMMS(Q4_1, GgmlType::kQ4_1_R16, quant::BlockQ4_1)
MOESPLIT_LEGACY_R16_GEMMS(IQ4NL, GgmlType::kIQ4_NL_R16, quant::BlockIQ4_NL)
MOESPLIT_LEGACY_R16_GEMMS(MXFP4, GgmlType::kMXFP4_R16, quant::BlockMXFP4)
#undef MOESPLIT_LEGACY_R16_GEMMS

}  // namespace moesplit::gemv::internal
