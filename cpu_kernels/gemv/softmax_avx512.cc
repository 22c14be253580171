// AVX-512 softmax of attention score rows (GemvKernels::scaled_softmax) and the FFNs' SwiGLU
// (GemvKernels::swiglu), both on the exponential below. Why the softmax: the scalar
// reference (ops::Softmax: std::exp and a double sum, one value at a time) cost ~1 ms of a
// 12 ms V3 prefill token at 2048 tokens: 128 heads x ~1024 positions = 131k exponentials per
// token and layer. Here 16 lanes at a time, exp by range reduction and a degree-6 polynomial:
//   e^x = 2^k e^r,  k = round(x log2 e),  r = x - k ln2 in [-ln2/2, ln2/2]  (ln2 split in two
//   parts, Cody-Waite), e^r = sum_{i<=6} r^i / i!  (truncation r^7/7! < 1.2e-7 relative),
//   2^k applied with vscalefps (0 for k below the subnormal range).
// Sums in 16 f32 lanes (the reference sums in double): results within ~4e-7 relative of it.
// Why the SwiGLU: one expf per intermediate value, F x tokens per expert (ds-v2-lite pp512:
// 26 layers x 8 FFNs x 1408 = 293k per token), ran as glibc's scalar expf inside the fused
// FFN's gate/up tasks: ~5% of the pp512 profile (RunUpTask + __expf_fma). Here 16 at a time:
// g u / (1 + e^-g), within ~3e-7 relative of the reference.
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "cpu_kernels/gemv/gemv_internal.h"

namespace moesplit::gemv::internal {
namespace {

inline __m512 Exp(__m512 x) {
  // Below -104, e^x < 2^-150: flushed to 0 by the scale step (also for -inf).
  x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693145751953125f), x);
  r = _mm512_fnmadd_ps(k, _mm512_set1_ps(1.428606820309417232e-6f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, k);
}

inline __mmask16 Tail(int64_t left) {
  return left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
}

}  // namespace

float ScaledSoftmax_Avx512(float* x, int64_t valid, int64_t n, float scale) {
  const __m512 s = _mm512_set1_ps(scale);
  __m512 vmax = _mm512_set1_ps(-INFINITY);
  for (int64_t i = 0; i < valid; i += 16) {
    const __mmask16 m = Tail(valid - i);
    const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), s);
    vmax = _mm512_mask_max_ps(vmax, m, vmax, v);
  }
  const float max = _mm512_reduce_max_ps(vmax);
  const __m512 neg_max = _mm512_set1_ps(-max);
  __m512 vsum = _mm512_setzero_ps();
  for (int64_t i = 0; i < valid; i += 16) {
    const __mmask16 m = Tail(valid - i);
    const __m512 e = Exp(_mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x + i), s, neg_max));
    _mm512_mask_storeu_ps(x + i, m, e);
    vsum = _mm512_mask_add_ps(vsum, m, vsum, e);
  }
  const float sum = _mm512_reduce_add_ps(vsum);
  const __m512 inv = _mm512_set1_ps(1.0f / sum);
  for (int64_t i = 0; i < valid; i += 16) {
    const __mmask16 m = Tail(valid - i);
    _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv));
  }
  for (int64_t i = valid; i < n; i += 16) {
    _mm512_mask_storeu_ps(x + i, Tail(n - i), _mm512_setzero_ps());
  }
  return valid == 0 ? -INFINITY : max + std::log(sum);
}

void SwiGlu_Avx512(float* gate, const float* up, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = Tail(n - i);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    // -g past 88.7: e^-g is +inf and g u / inf = -0, as the reference's expf gives.
    const __m512 d = _mm512_add_ps(one, Exp(_mm512_sub_ps(_mm512_setzero_ps(), g)));
    _mm512_mask_storeu_ps(gate + i, m,
                          _mm512_div_ps(_mm512_mul_ps(g, _mm512_maskz_loadu_ps(m, up + i)), d));
  }
}

}  // namespace moesplit::gemv::internal
