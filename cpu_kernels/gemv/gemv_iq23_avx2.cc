// IQ3_XXS / IQ3_S / IQ2_XS / IQ2_S weights x Q8_K activations, AVX2 + FMA tier (also the
// AVX-512 tier's and the AVX-512 VNNI tier's without VBMI). Compiled with MOESPLIT_FLAGS_AVX2
// (gemv/kquants.cmake). The integers per block are the scalar dot's (gemv_iq23_scalar.cc).
// Each type is a format of the AVX2 token tile (gemv_avx2_tile.inc): a block's sub-blocks are
// decoded once per row and used by the tile's 4 tokens in prefill.
//
// Per sub-block of 32 values, the grid entries come from scalar loads into one ymm (the grids
// are 1-8 KB, L1-resident): eight 4-byte entries (IQ3) or four 8-byte entries (IQ2_XS/S):
//   m    = [32] u8 grid magnitudes (IQ3_XXS <= 62, IQ3_S <= 15, IQ2 <= 43)
//   neg  = 0xFF bytes where the value is negative: IqTables sign_mask of the 7-bit sign index
//          (IQ3_XXS, IQ2_XS), or the 32 explicit sign bits spread to bytes (IQ3_S, IQ2_S)
//   p    = maddubs(m, a negated under neg)  [16] i16, |pair| <= 2 * 62 * 127 < 2^15
//   s   += madd(p, 2 s + 1 per 16 values)   [8] i32
// and once per block acc += cvt(s) * d * d_a * (1/4 IQ3_XXS, 1 IQ3_S, 1/8 IQ2_XS / IQ2_S).
// The sign indices' masks come from kIqSignMask (iq_sign_masks.h).
// The negation is exact because Q8_K quants are in [-127, 127] (gemv.h's contract).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cpu_kernels/gemv/gemv_internal.h"
#include "cpu_kernels/gemv/gemv_isa_common.h"
#include "cpu_kernels/gemv/iq_sign_masks.h"
#include "cpu_kernels/quant/blocks.h"
#include "cpu_kernels/quant/blocks_iq.h"
#include "cpu_kernels/quant/iq_grids.h"

namespace moesplit::gemv::internal {
namespace {

#include "cpu_kernels/gemv/gemv_avx2_tile.inc"
#include "cpu_kernels/gemv/gemv_avx2_wide.inc"

using quant::BlockIQ2_S;
using quant::BlockIQ2_XS;
using quant::BlockIQ3_S;
using quant::BlockIQ3_XXS;
using quant::kQkK;
namespace qi = quant::internal;

#define IQ_INLINE [[gnu::always_inline]] inline

// Eight 4-byte IQ3 entries, entry k at bytes 4k .. 4k + 3.
IQ_INLINE __m256i Grid8(const uint32_t* grid, const int* i) {
  return _mm256_setr_epi32(static_cast<int>(grid[i[0]]), static_cast<int>(grid[i[1]]),
                           static_cast<int>(grid[i[2]]), static_cast<int>(grid[i[3]]),
                           static_cast<int>(grid[i[4]]), static_cast<int>(grid[i[5]]),
                           static_cast<int>(grid[i[6]]), static_cast<int>(grid[i[7]]));
}

// 32 sign bits (bit k: value k negative) -> [32] bytes, 0xFF where negative: byte k takes
// byte k / 8 of the word (vpshufb within each lane of the broadcast) and tests bit k % 8.
IQ_INLINE __m256i NegFromBits(uint32_t bits) {
  const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x(0x8040201008040201LL);
  const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), spread);
  return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

// 2 s + 1 of values 0-15 (lo) and 16-31 (hi) of a sub-block, as the madd operand.
IQ_INLINE __m256i Scale2(int lo, int hi) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(2 * hi + 1)),
                          _mm_set1_epi16(static_cast<int16_t>(2 * lo + 1)));
}

// Per type: Sub(w, j, &m, &neg) gives sub-block j's [32] u8 magnitudes and [32] 0xFF-where-
// negative bytes; Scale(w, j) its [16] i16 madd operand (2 s + 1 per 16 values); kD the factor
// of d in the block's scale.
struct Iq3XxsL {
  using Block = BlockIQ3_XXS;
  static constexpr int kMaxMag = 62;  // the grid's largest magnitude
  static constexpr float kD = 0.25f;
  static MOESPLIT_KQ_INLINE void Sub(const Block& w, int j, __m256i* m, __m256i* neg) {
    const uint8_t* q = w.qs + 8 * j;
    const int idx[8] = {q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7]};
    const uint32_t aux = LoadU32(w.qs + kQkK / 4 + 4 * j);
    *m = Grid8(qi::kIq3XxsGrid, idx);
    *neg = Grid4(kIqSignMask.v, aux & 127, (aux >> 7) & 127, (aux >> 14) & 127, (aux >> 21) & 127);
  }
  static MOESPLIT_KQ_INLINE __m256i Scale(const Block& w, int j) {
    return _mm256_set1_epi16(
        static_cast<int16_t>(2 * (LoadU32(w.qs + kQkK / 4 + 4 * j) >> 28) + 1));
  }
};

struct Iq3SL {
  using Block = BlockIQ3_S;
  static constexpr int kMaxMag = 15;  // the grid's largest magnitude
  static constexpr float kD = 1.0f;
  static MOESPLIT_KQ_INLINE void Sub(const Block& w, int j, __m256i* m, __m256i* neg) {
    const uint8_t* q = w.qs + 8 * j;
    const unsigned h = w.qh[j];  // 9th index bit of entry k at bit k
    int idx[8];
    for (int k = 0; k < 8; ++k) idx[k] = q[k] | ((h >> k) & 1) << 8;
    *m = Grid8(qi::kIq3SGrid, idx);
    *neg = NegFromBits(LoadU32(w.signs + 4 * j));
  }
  static MOESPLIT_KQ_INLINE __m256i Scale(const Block& w, int j) {
    const int sj = (w.scales[j / 2] >> (4 * (j % 2))) & 0xF;
    return _mm256_set1_epi16(static_cast<int16_t>(2 * sj + 1));
  }
};

struct Iq2XsL {
  using Block = BlockIQ2_XS;
  static constexpr int kMaxMag = 43;  // the grid's largest magnitude
  static constexpr float kD = 0.125f;
  static MOESPLIT_KQ_INLINE void Sub(const Block& w, int j, __m256i* m, __m256i* neg) {
    const uint16_t* q = w.qs + 4 * j;  // 9-bit grid index | 7-bit sign index << 9
    *m = Grid4(qi::kIq2XsGrid, q[0] & 511, q[1] & 511, q[2] & 511, q[3] & 511);
    *neg = Grid4(kIqSignMask.v, q[0] >> 9, q[1] >> 9, q[2] >> 9, q[3] >> 9);
  }
  static MOESPLIT_KQ_INLINE __m256i Scale(const Block& w, int j) {
    return Scale2(w.scales[j] & 0xF, w.scales[j] >> 4);
  }
};

struct Iq2SL {
  using Block = BlockIQ2_S;
  static constexpr int kMaxMag = 43;  // the grid's largest magnitude
  static constexpr float kD = 0.125f;
  static MOESPLIT_KQ_INLINE void Sub(const Block& w, int j, __m256i* m, __m256i* neg) {
    const uint8_t* q = w.qs + 4 * j;
    const unsigned h = w.qh[j];  // 2 high index bits of group g at bits 2g
    *m = Grid4(qi::kIq2SGrid, q[0] | (h & 3) << 8, q[1] | (h >> 2 & 3) << 8,
               q[2] | (h >> 4 & 3) << 8, q[3] | (h >> 6) << 8);
    *neg = NegFromBits(LoadU32(w.qs + kQkK / 8 + 4 * j));
  }
  static MOESPLIT_KQ_INLINE __m256i Scale(const Block& w, int j) {
    return Scale2(w.scales[j] & 0xF, w.scales[j] >> 4);
  }
};

}  // namespace

float DotIQ3XXS_Q8K_Avx2(const void* w_row, const void* a_row, int64_t n) {
  return KQuantDot<Avx2Core, LatticeFmt<Iq3XxsL>>(w_row, a_row, n);
}
void GemmIQ3XXS_Q8K_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                         size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  Avx2Gemm<LatticeFmt<Iq3XxsL>>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}
float DotIQ3S_Q8K_Avx2(const void* w_row, const void* a_row, int64_t n) {
  return KQuantDot<Avx2Core, LatticeFmt<Iq3SL>>(w_row, a_row, n);
}
void GemmIQ3S_Q8K_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                       size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  Avx2Gemm<LatticeFmt<Iq3SL>>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}
float DotIQ2XS_Q8K_Avx2(const void* w_row, const void* a_row, int64_t n) {
  return KQuantDot<Avx2Core, LatticeFmt<Iq2XsL>>(w_row, a_row, n);
}
void GemmIQ2XS_Q8K_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                        size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  Avx2Gemm<LatticeFmt<Iq2XsL>>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}
float DotIQ2S_Q8K_Avx2(const void* w_row, const void* a_row, int64_t n) {
  return KQuantDot<Avx2Core, LatticeFmt<Iq2SL>>(w_row, a_row, n);
}
void GemmIQ2S_Q8K_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                       size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  Avx2Gemm<LatticeFmt<Iq2SL>>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}

#undef IQ_INLINE
#undef MOESPLIT_KQ_INLINE

}  // namespace moesplit::gemv::internal
