// Q2_K / Q3_K weights x Q8_K activations, AVX2 + FMA tier. Compiled with MOESPLIT_FLAGS_AVX2
// (gemv/kquants.cmake); reached only through KernelsFor(IsaTier::kAvx2).
//
// Both types keep their 2-bit low parts in 64 bytes: byte l of half h holds values
// 128h + 32k + l at bits 2k, so per (h, k) one 32-byte load shifted by 2k and masked (& 3) is
// the u8 vector of values 128h + 32k .. +31 = sub-blocks j = 8h + 2k (bytes 0-15) and j + 1
// (16-31), and per (h, k):
//   p  = maddubs(q, a)                 [16] i16, lanes 0-7 sub-block j, 8-15 j + 1
//                                      (|pair| <= 2 * 7 * 127: no saturation)
//   s += madd(p, (scale_j x8 | scale_j+1 x8))   [8] i32
// Q2_K: w = d s_j q - dmin m_j, so the mins come once per block from the Q8_K block sums:
//   acc += cvt(s) d d_a - cvt(madd(m_j, bsum_j)) dmin d_a
// Q3_K: q3 = low + 4 hbit in [0, 7] (hbit: bit 4h + k of hmask[l]), w = d (s_j - 32)(q3 - 4):
//   acc += cvt(s - 4 madd(s_j - 32, bsum_j)) d d_a
// Integer lanes are exact; cvt rounds above 2^24: agreement with the scalar dot to ~1e-6 of
// sum |w a|.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cpu_kernels/gemv/gemv_internal.h"
#include "cpu_kernels/gemv/gemv_isa_common.h"
#include "cpu_kernels/quant/blocks.h"

namespace moesplit::gemv::internal {
namespace {

using quant::BlockQ2_K;
using quant::BlockQ3_K;
using quant::BlockQ8_K;
using quant::kQkK;

#define Q23_INLINE inline __attribute__((always_inline))

Q23_INLINE float HorizontalSum(__m256 v) {  // v: [8] f32
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// (s_j x8 | s_j+1 x8) as i16.
Q23_INLINE __m256i ScalePair(int s0, int s1) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(s1)),
                          _mm_set1_epi16(static_cast<int16_t>(s0)));
}

// [8] i32 summing to sum_j sc[j] sum_{i in j} q_i a_i, q_i the low 2 bits (+ 4 hbit for Q3_K,
// hm = hmask) and sc the 16 sub-block scales.
template <bool kQ3>
Q23_INLINE __m256i LowDot(const uint8_t* qs, const uint8_t* hm_bytes, const int8_t* q8,
                          const int* sc) {
  const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
  __m256i hm = _mm256_setzero_si256();
  if (kQ3) hm = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(hm_bytes));
  __m256i s = _mm256_setzero_si256();
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * h));
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      __m256i q = _mm256_and_si256(_mm256_srli_epi16(x, 2 * k), m3);
      if (kQ3) {  // bit 4h + k of each hmask byte -> bit 2
        const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + k), one);
        q = _mm256_or_si256(q, _mm256_slli_epi16(hb, 2));
      }
      const __m256i act =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8 + 128 * h + 32 * k));
      const __m256i p = _mm256_maddubs_epi16(q, act);
      s = _mm256_add_epi32(
          s, _mm256_madd_epi16(p, ScalePair(sc[8 * h + 2 * k], sc[8 * h + 2 * k + 1])));
    }
  }
  return s;
}

}  // namespace

float DotQ2K_Q8K_Avx2(const void* w_row, const void* a_row, int64_t n) {
  const auto* w = static_cast<const BlockQ2_K*>(w_row);  // [n / 256]
  const auto* a = static_cast<const BlockQ8_K*>(a_row);  // [n / 256]
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQkK; ++b) {
    int sc[16];
    for (int j = 0; j < 16; ++j) sc[j] = w[b].scales[j] & 0xF;
    const __m256i s = LowDot<false>(w[b].qs, nullptr, a[b].qs, sc);
    // mins: [16] u8 m_j -> i16, times the [16] i16 block sums
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].scales));
    const __m256i mins =
        _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(0x0F)));
    const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].bsums));
    const __m256i m = _mm256_madd_epi16(mins, bs);  // [8] i32
    const float d = _cvtsh_ss(w[b].d) * a[b].d, dmin = _cvtsh_ss(w[b].dmin) * a[b].d;
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(d), acc);
    acc = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(m), _mm256_set1_ps(dmin), acc);
  }
  return HorizontalSum(acc);
}

float DotQ3K_Q8K_Avx2(const void* w_row, const void* a_row, int64_t n) {
  const auto* w = static_cast<const BlockQ3_K*>(w_row);  // [n / 256]
  const auto* a = static_cast<const BlockQ8_K*>(a_row);  // [n / 256]
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQkK; ++b) {
    int8_t s8[16];  // s_j - 32
    UnpackQ3KScales(w[b].scales, s8);
    int sc[16];
    for (int j = 0; j < 16; ++j) sc[j] = s8[j];
    const __m256i s = LowDot<true>(w[b].qs, w[b].hmask, a[b].qs, sc);
    // the -4 of every q3: 4 sum_j (s_j - 32) bsum_j
    const __m256i scales =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s8)));
    const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].bsums));
    const __m256i corr = _mm256_slli_epi32(_mm256_madd_epi16(scales, bs), 2);
    const float d = _cvtsh_ss(w[b].d) * a[b].d;
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(s, corr)), _mm256_set1_ps(d), acc);
  }
  return HorizontalSum(acc);
}

#undef Q23_INLINE

}  // namespace moesplit::gemv::internal
