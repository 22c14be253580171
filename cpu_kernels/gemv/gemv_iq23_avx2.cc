// IQ3_XXS / IQ3_S / IQ2_XS / IQ2_S weights x Q8_K activations, AVX2 + FMA tier (also the
// AVX-512 tier's and the AVX-512 VNNI tier's). Compiled with MOESPLIT_FLAGS_AVX2
// (gemv/kquants.cmake). The integers per block are the scalar dot's (gemv_iq23_scalar.cc).
//
// Per sub-block of 32 values, the grid entries come from scalar loads into one ymm (the grids
// are 1-8 KB, L1-resident): eight 4-byte entries (IQ3) or four 8-byte entries (IQ2_XS/S):
//   m    = [32] u8 grid magnitudes (IQ3_XXS <= 62, IQ3_S <= 15, IQ2 <= 43)
//   neg  = 0xFF bytes where the value is negative: IqTables sign_mask of the 7-bit sign index
//          (IQ3_XXS, IQ2_XS), or the 32 explicit sign bits spread to bytes (IQ3_S, IQ2_S)
//   p    = maddubs(m, a negated under neg)  [16] i16, |pair| <= 2 * 62 * 127 < 2^15
//   s   += madd(p, 2 s + 1 per 16 values)   [8] i32
// and once per block acc += cvt(s) * d * d_a * (1/4 IQ3_XXS, 1 IQ3_S, 1/8 IQ2_XS / IQ2_S).
// The negation is exact because Q8_K quants are in [-127, 127] (gemv.h's contract).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cpu_kernels/gemv/gemv_internal.h"
#include "cpu_kernels/gemv/gemv_isa_common.h"
#include "cpu_kernels/quant/blocks.h"
#include "cpu_kernels/quant/blocks_iq.h"
#include "cpu_kernels/quant/iq_grids.h"

namespace moesplit::gemv::internal {
namespace {

using quant::BlockIQ2_S;
using quant::BlockIQ2_XS;
using quant::BlockIQ3_S;
using quant::BlockIQ3_XXS;
using quant::BlockQ8_K;
using quant::kQkK;
namespace qi = quant::internal;

#define IQ_INLINE [[gnu::always_inline]] inline

IQ_INLINE float HorizontalSum(__m256 v) {  // v: [8] f32
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

IQ_INLINE __m256i Grid4(const uint64_t* grid, int i0, int i1, int i2, int i3) {
  return _mm256_set_epi64x(static_cast<int64_t>(grid[i3]), static_cast<int64_t>(grid[i2]),
                           static_cast<int64_t>(grid[i1]), static_cast<int64_t>(grid[i0]));
}

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

// madd(maddubs(m, a * (neg ? -1 : 1)), scale): [8] i32 of one sub-block of 32 values.
IQ_INLINE __m256i SubBlock(__m256i m, __m256i neg, const int8_t* q8, __m256i scale) {
  const __m256i act = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8));
  const __m256i sgn = _mm256_or_si256(neg, _mm256_set1_epi8(1));
  return _mm256_madd_epi16(_mm256_maddubs_epi16(m, _mm256_sign_epi8(act, sgn)), scale);
}

// 2 s + 1 of values 0-15 (lo) and 16-31 (hi) of a sub-block, as the madd operand.
IQ_INLINE __m256i Scale2(int lo, int hi) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(2 * hi + 1)),
                          _mm_set1_epi16(static_cast<int16_t>(2 * lo + 1)));
}

// Each Block* returns [8] i32 summing to the scalar dot's block integer.
IQ_INLINE __m256i BlockIQ3XXS(const BlockIQ3_XXS& w, const int8_t* q8, const uint64_t* smask) {
  __m256i s = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    const uint8_t* q = w.qs + 8 * j;
    const int idx[8] = {q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7]};
    const uint32_t aux = LoadU32(w.qs + kQkK / 4 + 4 * j);
    const __m256i neg =
        Grid4(smask, aux & 127, (aux >> 7) & 127, (aux >> 14) & 127, (aux >> 21) & 127);
    const __m256i sc = _mm256_set1_epi16(static_cast<int16_t>(2 * (aux >> 28) + 1));
    s = _mm256_add_epi32(s, SubBlock(Grid8(qi::kIq3XxsGrid, idx), neg, q8 + 32 * j, sc));
  }
  return s;
}

IQ_INLINE __m256i BlockIQ3S(const BlockIQ3_S& w, const int8_t* q8) {
  __m256i s = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    const uint8_t* q = w.qs + 8 * j;
    const unsigned h = w.qh[j];  // 9th index bit of entry k at bit k
    int idx[8];
    for (int k = 0; k < 8; ++k) idx[k] = q[k] | ((h >> k) & 1) << 8;
    const int sj = (w.scales[j / 2] >> (4 * (j % 2))) & 0xF;
    const __m256i sc = _mm256_set1_epi16(static_cast<int16_t>(2 * sj + 1));
    s = _mm256_add_epi32(s, SubBlock(Grid8(qi::kIq3SGrid, idx),
                                     NegFromBits(LoadU32(w.signs + 4 * j)), q8 + 32 * j, sc));
  }
  return s;
}

IQ_INLINE __m256i BlockIQ2XS(const BlockIQ2_XS& w, const int8_t* q8, const uint64_t* smask) {
  __m256i s = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    const uint16_t* q = w.qs + 4 * j;  // 9-bit grid index | 7-bit sign index << 9
    const __m256i m = Grid4(qi::kIq2XsGrid, q[0] & 511, q[1] & 511, q[2] & 511, q[3] & 511);
    const __m256i neg = Grid4(smask, q[0] >> 9, q[1] >> 9, q[2] >> 9, q[3] >> 9);
    const __m256i sc = Scale2(w.scales[j] & 0xF, w.scales[j] >> 4);
    s = _mm256_add_epi32(s, SubBlock(m, neg, q8 + 32 * j, sc));
  }
  return s;
}

IQ_INLINE __m256i BlockIQ2S(const BlockIQ2_S& w, const int8_t* q8) {
  __m256i s = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    const uint8_t* q = w.qs + 4 * j;
    const unsigned h = w.qh[j];  // 2 high index bits of group g at bits 2g
    const __m256i m = Grid4(qi::kIq2SGrid, q[0] | (h & 3) << 8, q[1] | (h >> 2 & 3) << 8,
                            q[2] | (h >> 4 & 3) << 8, q[3] | (h >> 6) << 8);
    const __m256i sc = Scale2(w.scales[j] & 0xF, w.scales[j] >> 4);
    s = _mm256_add_epi32(
        s, SubBlock(m, NegFromBits(LoadU32(w.qs + kQkK / 8 + 4 * j)), q8 + 32 * j, sc));
  }
  return s;
}

}  // namespace

float DotIQ3XXS_Q8K_Avx2(const void* w_row, const void* a_row, int64_t n) {
  const auto* w = static_cast<const BlockIQ3_XXS*>(w_row);  // [n / 256]
  const auto* a = static_cast<const BlockQ8_K*>(a_row);     // [n / 256]
  const uint64_t* smask = GetIqTables().sign_mask;
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQkK; ++b) {
    const __m256i s = BlockIQ3XXS(w[b], a[b].qs, smask);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(0.25f * _cvtsh_ss(w[b].d) * a[b].d), _mm256_cvtepi32_ps(s),
                          acc);
  }
  return HorizontalSum(acc);
}

float DotIQ3S_Q8K_Avx2(const void* w_row, const void* a_row, int64_t n) {
  const auto* w = static_cast<const BlockIQ3_S*>(w_row);  // [n / 256]
  const auto* a = static_cast<const BlockQ8_K*>(a_row);   // [n / 256]
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQkK; ++b) {
    const __m256i s = BlockIQ3S(w[b], a[b].qs);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(w[b].d) * a[b].d), _mm256_cvtepi32_ps(s), acc);
  }
  return HorizontalSum(acc);
}

float DotIQ2XS_Q8K_Avx2(const void* w_row, const void* a_row, int64_t n) {
  const auto* w = static_cast<const BlockIQ2_XS*>(w_row);  // [n / 256]
  const auto* a = static_cast<const BlockQ8_K*>(a_row);    // [n / 256]
  const uint64_t* smask = GetIqTables().sign_mask;
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQkK; ++b) {
    const __m256i s = BlockIQ2XS(w[b], a[b].qs, smask);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(0.125f * _cvtsh_ss(w[b].d) * a[b].d),
                          _mm256_cvtepi32_ps(s), acc);
  }
  return HorizontalSum(acc);
}

float DotIQ2S_Q8K_Avx2(const void* w_row, const void* a_row, int64_t n) {
  const auto* w = static_cast<const BlockIQ2_S*>(w_row);  // [n / 256]
  const auto* a = static_cast<const BlockQ8_K*>(a_row);   // [n / 256]
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQkK; ++b) {
    const __m256i s = BlockIQ2S(w[b], a[b].qs);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(0.125f * _cvtsh_ss(w[b].d) * a[b].d),
                          _mm256_cvtepi32_ps(s), acc);
  }
  return HorizontalSum(acc);
}

#undef IQ_INLINE

}  // namespace moesplit::gemv::internal
