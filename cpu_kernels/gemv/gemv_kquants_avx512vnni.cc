// AVX-512 VNNI tier of the K-quant kernels (maddubs + vpdpwssd). Compiled with
// MOESPLIT_FLAGS_AVX512VNNI (gemv/kquants.cmake); reached only through
// KernelsFor(IsaTier::kAvx512Vnni).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "cpu_kernels/gemv/gemv_internal.h"
#include "cpu_kernels/gemv/gemv_isa_common.h"
#include "cpu_kernels/gemv/q6k_r16_values_avx512.h"
#include "cpu_kernels/quant/blocks.h"
#include "cpu_kernels/quant/repack.h"

namespace moesplit::gemv::internal {

#include "cpu_kernels/gemv/gemv_kquants_avx512.inc"
#include "cpu_kernels/gemv/gemv_kquants_decode_avx512.inc"
#include "cpu_kernels/gemv/gemv_kquants_q6k_decode_avx512.inc"
#include "cpu_kernels/gemv/gemv_kquants_rowlane_avx512vnni.inc"

// After the row-lane tiles: the repacked kernels reuse their buffer and token loops.
// q4_K_r16's first: the others use its helpers (BsumPairs, FillRowLaneFromR16, ...).
// clang-format off
#include "cpu_kernels/gemv/gemv_kquants_r16_avx512vnni.inc"
#include "cpu_kernels/gemv/gemv_kquants_q6k_r16_avx512vnni.inc"
#include "cpu_kernels/gemv/gemv_kquants_q5k_r16_avx512vnni.inc"
// clang-format on

using CoreAvx512Vnni = Avx512Core<true>;

float DotQ4K_Q8K_Avx512Vnni(const void* w_row, const void* a_row, int64_t n) {
  return Q4KDecodeDot<true>(w_row, a_row, n);
}
float DotQ5K_Q8K_Avx512Vnni(const void* w_row, const void* a_row, int64_t n) {
  return KQuantDot<CoreAvx512Vnni, Q5KFmt>(w_row, a_row, n);
}
float DotQ6K_Q8K_Avx512Vnni(const void* w_row, const void* a_row, int64_t n) {
  return Q6KDecodeDot<true>(w_row, a_row, n);
}

// Several tokens, Q4_K / Q5_K: groups of 16 rows in the row-lane tile
// (gemv_kquants_rowlane_avx512vnni.inc) from kRowLaneMinTokens tokens; the remaining rows (and
// fewer tokens) in the group-major token tile.
template <class Block, class Fmt>
void RowLaneThenTokenTiles(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                           size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  int64_t r = 0;
  if (n_tok >= kRowLaneMinTokens) {
    r = n_rows / kRowLaneRows * kRowLaneRows;
    KQuantRowLaneGemm<Block>(w, w_stride, r, a, a_stride, n_tok, n, y, ldy);
  }
  if (r < n_rows) {
    KQuantGemm<CoreAvx512Vnni, Fmt>(static_cast<const uint8_t*>(w) + r * w_stride, w_stride,
                                    n_rows - r, a, a_stride, n_tok, n, y + r, ldy);
  }
}

void GemmQ4K_Q8K_Avx512Vnni(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                            size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  if (n_tok == 1) {  // decode: the nibble-native tile (gemv_kquants_decode_avx512.inc)
    Q4KDecodeGemv<true>(w, w_stride, n_rows, a, n, y);
    return;
  }
  RowLaneThenTokenTiles<BlockQ4_K, Q4KFmt>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}
// Q4_K repacked into 16-row groups (gemv_kquants_r16_avx512vnni.inc); n_rows a multiple of 16.
void GemmQ4KR16_Q8K_Avx512Vnni(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                               size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  GemmQ4KR16Impl<DecodeRead::kPrefetched>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}
void GemmQ4KR16_Q8K_Avx512VnniHw(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                                 size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  GemmQ4KR16Impl<DecodeRead::kHardware>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}
void GemmQ5K_Q8K_Avx512Vnni(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                            size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  RowLaneThenTokenTiles<BlockQ5_K, Q5KFmt>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}
void GemmQ6K_Q8K_Avx512Vnni(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                            size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  if (n_tok == 1) {  // decode: the packed-order tile (gemv_kquants_q6k_decode_avx512.inc)
    Q6KDecodeGemv<true>(w, w_stride, n_rows, a, n, y);
    return;
  }
  KQuantGemm<CoreAvx512Vnni, Q6KFmt>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}

}  // namespace moesplit::gemv::internal
