// IQ4_XS weights x Q8_K activations, AVX2 + FMA tier (also the AVX-512 tier's kernel: nothing
// here gains from 512-bit lanes without VNNI). Compiled with MOESPLIT_FLAGS_AVX2
// (gemv/kquants.cmake); reached only through KernelsFor(IsaTier::kAvx2 / kAvx512).
//
// Per 256-value block and sub-block j (32 values, 16 index bytes at qs + 16j):
//   q  = vpshufb(kIq4Values, the 32 indices in value order)  [32] i8 in [-127, 113]
//   p  = maddubs(|q|, a with q's sign)                        [16] i16, |pair| <= 2 * 127 * 127
//   s += madd(p, s_j - 32)                                    [8] i32, |lane| <= 8 * 2 * 32258 * 32
// and once per block acc += cvt(s) * d * d_a. The integer lanes are exact; converting them
// rounds above 2^24 (relative 6e-8), so results agree with the scalar dot to ~1e-6 of
// sum |w a|, not bit for bit.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cpu_kernels/gemv/gemv_internal.h"
#include "cpu_kernels/quant/blocks.h"

namespace moesplit::gemv::internal {
namespace {

using quant::BlockIQ4_XS;
using quant::BlockQ8_K;
using quant::kQkK;

[[gnu::always_inline]] inline float HorizontalSum(__m256 v) {  // v: [8] f32
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// The f16 bits h as f32 (F16C).
[[gnu::always_inline]] inline float Half(uint16_t h) { return _cvtsh_ss(h); }

// [8] i32 whose sum is block w . block a as integers: sum_j (s_j - 32) sum_i kIq4Values[q_i] a_i.
[[gnu::always_inline]] inline __m256i BlockDot(const BlockIQ4_XS& w, const BlockQ8_K& a,
                                               __m256i table) {
  const __m256i nib = _mm256_set1_epi8(0x0F);
  __m256i s = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    const int ls = ((w.scales_l[j / 2] >> 4 * (j % 2)) & 0xF) | ((w.scales_h >> 2 * j) & 3) << 4;
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.qs + 16 * j));
    // values 0..15: low nibbles, 16..31: high nibbles
    const __m256i idx = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(x, 4), x), nib);
    const __m256i q = _mm256_shuffle_epi8(table, idx);
    const __m256i act = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs + 32 * j));
    const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(q), _mm256_sign_epi8(act, q));
    s = _mm256_add_epi32(s, _mm256_madd_epi16(p, _mm256_set1_epi16(static_cast<int16_t>(ls - 32))));
  }
  return s;
}

}  // namespace

// Two blocks per step into two FMA chains.
float DotIQ4XS_Q8K_Avx2(const void* w_row, const void* a_row, int64_t n) {
  const auto* w = static_cast<const BlockIQ4_XS*>(w_row);  // [n / 256]
  const auto* a = static_cast<const BlockQ8_K*>(a_row);    // [n / 256]
  const int64_t nb = n / kQkK;
  const __m256i table = _mm256_broadcastsi128_si256(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(quant::kIq4Values)));
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 1 < nb; b += 2) {
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(Half(w[b].d) * a[b].d),
                           _mm256_cvtepi32_ps(BlockDot(w[b], a[b], table)), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_set1_ps(Half(w[b + 1].d) * a[b + 1].d),
                           _mm256_cvtepi32_ps(BlockDot(w[b + 1], a[b + 1], table)), acc1);
  }
  if (b < nb) {
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(Half(w[b].d) * a[b].d),
                           _mm256_cvtepi32_ps(BlockDot(w[b], a[b], table)), acc0);
  }
  return HorizontalSum(_mm256_add_ps(acc0, acc1));
}

}  // namespace moesplit::gemv::internal
