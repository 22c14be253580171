// AVX2 + FMA tier, Q8_0 dot (the K-quant kernels live in gemv_kquants_avx2.cc). Compiled with
// -mavx2 -mfma -mf16c (cpu_kernels/CMakeLists.txt); only reached through
// KernelsFor(IsaTier::kAvx2), which the caller picks after CPUID says AVX2 is there.
#include <immintrin.h>

#include <cstdint>

#include "cpu_kernels/gemv/gemv_internal.h"
#include "cpu_kernels/gemv/gemv_isa_common.h"
#include "cpu_kernels/quant/blocks.h"

namespace moesplit::gemv::internal {
namespace {

using quant::BlockQ8_0;
using quant::kQk;

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

}  // namespace

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
