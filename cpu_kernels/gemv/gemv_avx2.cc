// AVX2 + FMA tier. Compiled with -mavx2 -mfma -mf16c (cpu_kernels/CMakeLists.txt); only reached
// through KernelsFor(IsaTier::kAvx2), which the caller picks after CPUID says AVX2 is there.
#include <immintrin.h>

#include <cstdint>

#include "cpu_kernels/gemv/gemv_internal.h"
#include "cpu_kernels/gemv/gemv_isa_common.h"
#include "cpu_kernels/quant/blocks.h"

namespace moesplit::gemv::internal {
namespace {

using quant::BlockQ4_K;
using quant::BlockQ8_0;
using quant::BlockQ8_K;
using quant::kQk;
using quant::kQkK;

float HorizontalSum(__m256 v) {  // v: [8] f32
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// 8 int32 lanes of sum over 4 adjacent i8 products x_k * y_k, x, y: [32] i8 in [-127, 127].
// maddubs needs an unsigned operand: |x| * (y with x's sign) is the same product.
__m256i DotI8Pairs(__m256i x, __m256i y) {
  const __m256i prod16 = _mm256_maddubs_epi16(_mm256_abs_epi8(x), _mm256_sign_epi8(y, x));
  return _mm256_madd_epi16(prod16, _mm256_set1_epi16(1));  // |pair| <= 2 * 127^2 < 2^15
}

// [8] i32: lane j = m_j * (bsums[2j] + bsums[2j + 1]), the block's min term before dmin * d_a.
// |lane| <= 63 * 2 * 16 * 127 fits i32. mins: [8] u8, bsums: [16] i16.
__m256i MinsDotBsums(const uint8_t* mins, const int16_t* bsums) {
  const __m128i m8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(mins));
  const __m256i m16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));  // m0 m0 m1 m1 .. m7 m7
  return _mm256_madd_epi16(m16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bsums)));
}

}  // namespace

float DotQ4K_Q8K_Avx2(const void* w_row, const void* a_row, int64_t n) {
  const auto* w = static_cast<const BlockQ4_K*>(w_row);  // [n / 256]
  const auto* a = static_cast<const BlockQ8_K*>(a_row);  // [n / 256]
  const int64_t nb = n / kQkK;
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  __m256 acc = _mm256_setzero_ps();  // [8] f32: per-lane sum of d * isum - dmin * min dots
  for (int64_t b = 0; b < nb; ++b) {
    const Q4KScales s = UnpackQ4KScales(w[b].scales);
    __m256i isum = _mm256_setzero_si256();  // [8] i32
    for (int c = 0; c < 4; ++c) {
      // 32 bytes = values 64c + l (low nibbles, sub-block 2c) and 64c + 32 + l (sub-block 2c+1).
      const __m256i q4 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs + 32 * c));
      const __m256i lo = _mm256_and_si256(q4, low4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q4, 4), low4);
      const __m256i y0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].qs + 64 * c));
      const __m256i y1 =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].qs + 64 * c + 32));
      // [16] i16: pairs of nibble * q8, |.| <= 2 * 15 * 127; then * scale -> [8] i32.
      const __m256i p0 =
          _mm256_madd_epi16(_mm256_maddubs_epi16(lo, y0), _mm256_set1_epi16(s.scale[2 * c]));
      const __m256i p1 =
          _mm256_madd_epi16(_mm256_maddubs_epi16(hi, y1), _mm256_set1_epi16(s.scale[2 * c + 1]));
      isum = _mm256_add_epi32(isum, _mm256_add_epi32(p0, p1));
    }
    const float d = _cvtsh_ss(w[b].d) * a[b].d;
    const float dmin = _cvtsh_ss(w[b].dmin) * a[b].d;
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum), acc);
    acc = _mm256_fnmadd_ps(_mm256_set1_ps(dmin),
                           _mm256_cvtepi32_ps(MinsDotBsums(s.min, a[b].bsums)), acc);
  }
  return HorizontalSum(acc);
}

float DotQ8_0_Q8_0_Avx2(const void* w_row, const void* a_row, int64_t n) {
  const auto* w = static_cast<const BlockQ8_0*>(w_row);  // [n / 32]
  const auto* a = static_cast<const BlockQ8_0*>(a_row);  // [n / 32]
  const int64_t nb = n / kQk;
  __m256 acc0 = _mm256_setzero_ps();  // [8] f32, even blocks
  __m256 acc1 = _mm256_setzero_ps();  // [8] f32, odd blocks (two chains hide FMA latency)
  int64_t b = 0;
  for (; b + 1 < nb; b += 2) {
    const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs));
    const __m256i y0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].qs));
    const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b + 1].qs));
    const __m256i y1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b + 1].qs));
    const float d0 = _cvtsh_ss(w[b].d) * _cvtsh_ss(a[b].d);
    const float d1 = _cvtsh_ss(w[b + 1].d) * _cvtsh_ss(a[b + 1].d);
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(d0), _mm256_cvtepi32_ps(DotI8Pairs(x0, y0)), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_set1_ps(d1), _mm256_cvtepi32_ps(DotI8Pairs(x1, y1)), acc1);
  }
  if (b < nb) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs));
    const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].qs));
    const float d = _cvtsh_ss(w[b].d) * _cvtsh_ss(a[b].d);
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(DotI8Pairs(x, y)), acc0);
  }
  return HorizontalSum(_mm256_add_ps(acc0, acc1));
}

}  // namespace moesplit::gemv::internal
