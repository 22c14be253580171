// AVX2 activation quantizers, byte-identical to the scalar references quant::internal::QuantQ8_K
// (quant_kquants.cc) and QuantQ8_0 (quant_legacy.cc). Compiled with MOESPLIT_FLAGS_AVX2 plus
// -ffp-contract=off (gemv/legacy.cmake): a fused x * id - t would change the Q8_0 tie test.
// Reached through KernelsFor(kAvx2). The arithmetic, and why each step is exact, is spelled
// out at the top of gemv_quantize_avx512.cc; this file is the same algorithm on 8 lanes.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "cpu_kernels/gemv/gemv_internal.h"
#include "cpu_kernels/quant/blocks.h"

namespace moesplit::gemv::internal {
namespace {

using quant::BlockQ8_0;
using quant::BlockQ8_K;
using quant::kQk;
using quant::kQkK;

[[gnu::always_inline]] inline __m256 AbsPs(__m256 v) {
  return _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)));
}

// Max of 8 non-NaN lanes.
[[gnu::always_inline]] inline float HorizontalMax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

// dword i of the result = dword 4 * (i % 2) + i / 2: undoes the lane interleave of
// packus_epi32 + packus_epi16 over four [8] i32 inputs.
[[gnu::always_inline]] inline __m256i UninterleaveIndex() {
  return _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
}

// The reference's SignedAbsMax over one 256-value block; 0 when every |x| is 0 or NaN.
float SignedAbsMax256(const float* x) {  // x: [256]
  __m256 amax = _mm256_setzero_ps();     // [8] running max |x|, never NaN
  for (int i = 0; i < kQkK; i += 8) {
    // MAXPS returns its second operand when one is NaN: NaN |x| leaves amax as it was.
    amax = _mm256_max_ps(AbsPs(_mm256_loadu_ps(x + i)), amax);
  }
  const float m = HorizontalMax(amax);
  if (m == 0.0f) return 0.0f;
  // The scalar scan keeps the first x with |x| > every earlier |x|: the first x with |x| == m.
  const __m256 vm = _mm256_set1_ps(m);
  for (int i = 0; i < kQkK; i += 8) {
    const int eq = _mm256_movemask_ps(_mm256_cmp_ps(AbsPs(_mm256_loadu_ps(x + i)), vm, _CMP_EQ_OQ));
    if (eq != 0) return x[i + __builtin_ctz(eq)];
  }
  return 0.0f;  // unreachable: m is one of the |x|
}

// 8 values -> min(127, NearestInt(iscale * x)) as i32, NearestInt's own bit trick.
[[gnu::always_inline]] inline __m256i NearestQ8K(__m256 iscale, const float* x) {
  __m256 v = _mm256_mul_ps(iscale, _mm256_loadu_ps(x));
  // std::clamp(v, -(2^22 - 1), 2^22 - 1) keeps NaN: MAXPS/MINPS return v (second) when v is NaN.
  v = _mm256_min_ps(_mm256_set1_ps(4194303.0f), _mm256_max_ps(_mm256_set1_ps(-4194303.0f), v));
  const __m256i bits = _mm256_castps_si256(_mm256_add_ps(v, _mm256_set1_ps(12582912.0f)));
  const __m256i q = _mm256_sub_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x007fffff)),
                                     _mm256_set1_epi32(0x00400000));
  return _mm256_min_epi32(q, _mm256_set1_epi32(127));
}

// Four [8] i32 -> [32] i8 = their low bytes (the reference's int -> int8_t cast), in order.
[[gnu::always_inline]] inline __m256i TruncPack32(__m256i q0, __m256i q1, __m256i q2, __m256i q3) {
  const __m256i low = _mm256_set1_epi32(0xff);
  // Masked to [0, 255], the unsigned-saturating packs cannot saturate. Per 128-bit lane L the
  // result holds dwords [q0 L, q1 L, q2 L, q3 L] (4 values each).
  const __m256i p01 = _mm256_packus_epi32(_mm256_and_si256(q0, low), _mm256_and_si256(q1, low));
  const __m256i p23 = _mm256_packus_epi32(_mm256_and_si256(q2, low), _mm256_and_si256(q3, low));
  return _mm256_permutevar8x32_epi32(_mm256_packus_epi16(p01, p23), UninterleaveIndex());
}

// bsums[16] from the block's 8 x 32 quant bytes (y_m: group 2m in lane 0, 2m + 1 in lane 1).
void StoreBsums(const __m256i* y, int16_t* bsums) {  // y: [8] x [32] i8, bsums: [16]
  const __m256i ones8 = _mm256_set1_epi8(1);
  const __m256i ones16 = _mm256_set1_epi16(1);
  __m256i p[8];  // [8] x [8] i32 sums of 4 quants; |pair| <= 256, no maddubs saturation
  for (int m = 0; m < 8; ++m) {
    p[m] = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, y[m]), ones16);
  }
  // Two hadds per half: lane L = [G(L), G(2 + L), G(4 + L), G(6 + L)] (+8 for the upper half).
  const __m256i lo =
      _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
  const __m256i hi =
      _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7]));
  // packs: lane 0 = [G0, G2, .., G14], lane 1 = [G1, G3, .., G15] (|G| <= 2048, no saturation).
  const __m256i w = _mm256_packs_epi32(lo, hi);
  const __m128i even = _mm256_castsi256_si128(w);
  const __m128i odd = _mm256_extracti128_si256(w, 1);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(bsums), _mm_unpacklo_epi16(even, odd));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(bsums + 8), _mm_unpackhi_epi16(even, odd));
}

void QuantizeBlockQ8K(const float* x, BlockQ8_K* b) {  // x: [256]
  const float max = SignedAbsMax256(x);
  if (max == 0.0f) {
    std::memset(b, 0, sizeof(*b));
    return;
  }
  const float iscale = -127.0f / max;
  const __m256 vs = _mm256_set1_ps(iscale);
  __m256i y[8];  // [8] x [32] i8: the block's quants
  for (int m = 0; m < 8; ++m) {
    const float* xm = x + 32 * m;
    y[m] = TruncPack32(NearestQ8K(vs, xm), NearestQ8K(vs, xm + 8), NearestQ8K(vs, xm + 16),
                       NearestQ8K(vs, xm + 24));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(b->qs + 32 * m), y[m]);
  }
  StoreBsums(y, b->bsums);
  b->d = 1.0f / iscale;
}

// 8 values -> roundf(x * id) clamped to [-127, 127], NaN -> 0, as i32:
// t = trunc(v), f = v - t (exact), r = t + (|f| >= 0.5 ? copysign(1, v) : 0).
[[gnu::always_inline]] inline __m256i RoundQ8_0(__m256 id, const float* x) {
  const __m256 sign_mask = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(0x80000000u)));
  const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x), id);
  const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 f = _mm256_sub_ps(v, t);  // exact; NaN for v = +-inf (then no step)
  const __m256 away = _mm256_cmp_ps(AbsPs(f), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
  const __m256 step = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(v, sign_mask));
  __m256 r = _mm256_add_ps(t, _mm256_and_ps(away, step));
  r = _mm256_and_ps(r, _mm256_cmp_ps(r, r, _CMP_ORD_Q));  // NaN -> +0
  r = _mm256_min_ps(_mm256_max_ps(r, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
  return _mm256_cvttps_epi32(r);
}

void QuantizeBlockQ8_0(const float* x, BlockQ8_0* b) {  // x: [32]
  // std::max(amax, |x|) skips NaN; so does MAXPS with the running max second.
  __m256 m = _mm256_setzero_ps();
  for (int i = 0; i < kQk; i += 8) m = _mm256_max_ps(AbsPs(_mm256_loadu_ps(x + i)), m);
  const float amax = HorizontalMax(m);
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b->d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);  // RNE, == Fp32ToFp16
  const __m256 vid = _mm256_set1_ps(id);
  // Values are in [-127, 127]: the signed-saturating packs keep them; permute undoes lanes.
  const __m256i q01 = _mm256_packs_epi32(RoundQ8_0(vid, x), RoundQ8_0(vid, x + 8));
  const __m256i q23 = _mm256_packs_epi32(RoundQ8_0(vid, x + 16), RoundQ8_0(vid, x + 24));
  const __m256i q = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(q01, q23), UninterleaveIndex());
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(b->qs), q);
}

}  // namespace

void QuantizeQ8K_Avx2(const float* x, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < n / kQkK; ++i) QuantizeBlockQ8K(x + i * kQkK, blocks + i);
}

void QuantizeQ8_0_Avx2(const float* x, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQk; ++i) QuantizeBlockQ8_0(x + i * kQk, blocks + i);
}

}  // namespace moesplit::gemv::internal
