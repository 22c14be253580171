// AVX2 + FMA softmax of attention score rows (GemvKernels::scaled_softmax) and the FFNs'
// SwiGLU (GemvKernels::swiglu) of the avx2 tier: softmax_avx512.cc's arithmetic 8 lanes at a
// time. Why: the scalar reference's expf per intermediate value (ds-v2-lite pp512: 26 layers x
// 8 FFNs x 1408 = 293k per token) was ~3.5% of the Zen 3 pp512 profile (SwiGluInPlace +
// __expf_fma) once the wide expert GEMMs had halved the rest.
//   e^x = 2^k e^r,  k = round(x log2 e),  r = x - k ln2 (Cody-Waite, two parts),
//   e^r = sum_{i<=6} r^i / i!,  2^k by adding k to the float's exponent field.
// AVX2 has no vscalefps, so the range is cut by hand: x < -87 gives 0 (e^x < 2^-125: below the
// normal range, where the reference's result is a subnormal under 1e-38) and x > 88 gives +inf
// (the reference's e^x is finite up to 88.72, where g u / (1 + e^-g) is below 1e-36 in
// magnitude). Results within ~3e-7 relative of the references (gemv_float_test.cc).
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "cpu_kernels/gemv/gemv_internal.h"

namespace moesplit::gemv::internal {
namespace {

inline __m256 Exp(__m256 x) {
  const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
  const __m256 k = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693145751953125f), xc);
  r = _mm256_fnmadd_ps(k, _mm256_set1_ps(1.428606820309417232e-6f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  // k in [-126, 127]: 2^k is the float with exponent field k + 127
  const __m256i bits =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
  __m256 e = _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
  e = _mm256_blendv_ps(e, _mm256_setzero_ps(),
                       _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_LT_OQ));
  return _mm256_blendv_ps(e, _mm256_set1_ps(INFINITY),
                          _mm256_cmp_ps(x, _mm256_set1_ps(88.0f), _CMP_GT_OQ));
}

// [8] f32 from p[0 .. left) (left < 8), the other lanes `fill`.
inline __m256 LoadTail(const float* p, int64_t left, float fill) {
  alignas(32) float t[8];
  for (int i = 0; i < 8; ++i) t[i] = i < left ? p[i] : fill;
  return _mm256_load_ps(t);
}

inline void StoreTail(float* p, int64_t left, __m256 v) {
  alignas(32) float t[8];
  _mm256_store_ps(t, v);
  std::memcpy(p, t, static_cast<size_t>(left) * sizeof(float));
}

inline float HorizontalMax(__m256 v) {
  const __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  return _mm_cvtss_f32(_mm_max_ss(m2, _mm_movehdup_ps(m2)));
}

inline float HorizontalAdd(__m256 v) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

}  // namespace

float ScaledSoftmax_Avx2(float* x, int64_t valid, int64_t n, float scale) {
  const __m256 s = _mm256_set1_ps(scale);
  const int64_t full = valid / 8 * 8, left = valid - full;
  __m256 vmax = _mm256_set1_ps(-INFINITY);
  for (int64_t i = 0; i < full; i += 8)
    vmax = _mm256_max_ps(vmax, _mm256_mul_ps(_mm256_loadu_ps(x + i), s));
  if (left > 0) vmax = _mm256_max_ps(vmax, _mm256_mul_ps(LoadTail(x + full, left, -INFINITY), s));
  const float max = HorizontalMax(vmax);
  const __m256 neg_max = _mm256_set1_ps(-max);
  __m256 vsum = _mm256_setzero_ps();
  for (int64_t i = 0; i < full; i += 8) {
    const __m256 e = Exp(_mm256_fmadd_ps(_mm256_loadu_ps(x + i), s, neg_max));
    _mm256_storeu_ps(x + i, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  if (left > 0) {  // the padding lanes are -inf: e^-inf = 0 adds nothing
    const __m256 e = Exp(_mm256_fmadd_ps(LoadTail(x + full, left, -INFINITY), s, neg_max));
    StoreTail(x + full, left, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  const float sum = HorizontalAdd(vsum);
  const float inv = 1.0f / sum;
  const __m256 vinv = _mm256_set1_ps(inv);
  for (int64_t i = 0; i < full; i += 8)
    _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vinv));
  for (int64_t i = full; i < valid; ++i) x[i] *= inv;
  for (int64_t i = valid; i < n; ++i) x[i] = 0.0f;
  return valid == 0 ? -INFINITY : max + std::log(sum);
}

void SwiGlu_Avx2(float* gate, const float* up, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const int64_t full = n / 8 * 8, left = n - full;
  auto block = [&](__m256 g, __m256 u) {
    // -g past 88: e^-g is +inf and g u / inf = -0, as the reference's expf gives.
    const __m256 d = _mm256_add_ps(one, Exp(_mm256_sub_ps(_mm256_setzero_ps(), g)));
    return _mm256_div_ps(_mm256_mul_ps(g, u), d);
  };
  for (int64_t i = 0; i < full; i += 8) {
    _mm256_storeu_ps(gate + i, block(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  }
  if (left > 0) {
    StoreTail(gate + full, left,
              block(LoadTail(gate + full, left, 0.0f), LoadTail(up + full, left, 0.0f)));
  }
}

}  // namespace moesplit::gemv::internal
