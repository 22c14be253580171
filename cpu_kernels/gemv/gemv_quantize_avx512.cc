// AVX-512 (F/BW/VL/DQ) activation quantizers, byte-identical to the scalar references
// quant::internal::QuantQ8_K (quant_kquants.cc) and QuantQ8_0 (quant_legacy.cc). Compiled with
// MOESPLIT_FLAGS_AVX512 plus -ffp-contract=off (gemv/legacy.cmake): a fused x * id - t would
// change the Q8_0 tie test below. Reached through KernelsFor(kAvx512 / kAvx512Vnni).
//
// Exactness, step by step (the reference's float operations, in its order, one rounding each):
//   Q8_K: max = the x of largest |x|, FIRST index on ties (NaN skipped); iscale = -127 / max;
//         q = min(127, NearestInt(iscale * x)) truncated to int8 like the reference's cast, where
//         NearestInt(v) = bits(clamp(v, +-(2^22 - 1)) + 1.5 * 2^23) & 0x7fffff - 2^22 (RNE; the
//         same bit trick here keeps even NaN/inf garbage identical); d = 1 / iscale.
//   Q8_0: amax = max |x| (NaN skipped); d = amax / 127; id = d != 0 ? 1 / d : 0; f16(d) by
//         vcvtps2ph RNE (== Fp32ToFp16); q = roundf(x * id) (half away from zero) clamped to
//         [-127, 127], NaN -> 0. roundf exactly: t = trunc(v), f = v - t (exact: f is v's own
//         fraction bits), r = t + (|f| >= 0.5 ? copysign(1, v) : 0) (t +- 1 exact, |t| < 2^23).
//
// gemv_quantize_avx2.cc takes the same steps in the same order but shares no instruction with
// this file (mask registers, vpmovdb narrowing and sad_epu8 bsums here; pack/permute and hadd
// there), so the two stay separate files: the duplicates tool's ~20-line match is the shape of
// the steps, and a template over both vector widths would hide what each step costs.
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

// dword i of the result = dword 4 * (i % 4) + i / 4 of the input: the 4x4 transpose that undoes
// the lane interleave of packus_epi32 + packus_epi16 (and gathers the SAD sums below).
[[gnu::always_inline]] inline __m512i Transpose4x4Index() {
  return _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
}

// The reference's SignedAbsMax over one 256-value block; 0 when every |x| is 0 or NaN.
float SignedAbsMax256(const float* x) {  // x: [256]
  const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  __m512 amax = _mm512_setzero_ps();  // [16] running max |x|, never NaN
  for (int i = 0; i < kQkK; i += 16) {
    // MAXPS returns its second operand when one is NaN: NaN |x| leaves amax as it was.
    amax = _mm512_max_ps(_mm512_and_ps(_mm512_loadu_ps(x + i), abs_mask), amax);
  }
  const float m = _mm512_reduce_max_ps(amax);
  if (m == 0.0f) return 0.0f;
  // The scalar scan keeps the first x with |x| > every earlier |x|: the first x with |x| == m.
  const __m512 vm = _mm512_set1_ps(m);
  for (int i = 0; i < kQkK; i += 16) {
    const __mmask16 eq =
        _mm512_cmp_ps_mask(_mm512_and_ps(_mm512_loadu_ps(x + i), abs_mask), vm, _CMP_EQ_OQ);
    if (eq != 0) return x[i + __builtin_ctz(eq)];
  }
  return 0.0f;  // unreachable: m is one of the |x|
}

// 16 values -> min(127, NearestInt(iscale * x)) as i32 (the reference's bits, see the top).
[[gnu::always_inline]] inline __m512i NearestQ8K(__m512 iscale, const float* x) {
  __m512 v = _mm512_mul_ps(iscale, _mm512_loadu_ps(x));
  // std::clamp(v, -(2^22 - 1), 2^22 - 1) keeps NaN: MAXPS/MINPS return v (second) when v is NaN.
  v = _mm512_min_ps(_mm512_set1_ps(4194303.0f), _mm512_max_ps(_mm512_set1_ps(-4194303.0f), v));
  const __m512i bits = _mm512_castps_si512(_mm512_add_ps(v, _mm512_set1_ps(12582912.0f)));
  const __m512i q = _mm512_sub_epi32(_mm512_and_si512(bits, _mm512_set1_epi32(0x007fffff)),
                                     _mm512_set1_epi32(0x00400000));
  return _mm512_min_epi32(q, _mm512_set1_epi32(127));
}

// Four [16] i32 -> [64] i8 = their low bytes (the reference's int -> int8_t cast), in order.
[[gnu::always_inline]] inline __m512i TruncPack64(__m512i q0, __m512i q1, __m512i q2, __m512i q3) {
  const __m512i low = _mm512_set1_epi32(0xff);
  // Masked to [0, 255], the unsigned-saturating packs cannot saturate. Per 128-bit lane k the
  // result holds dwords [q0 k, q1 k, q2 k, q3 k] (4 values each): transpose back.
  const __m512i p01 = _mm512_packus_epi32(_mm512_and_si512(q0, low), _mm512_and_si512(q1, low));
  const __m512i p23 = _mm512_packus_epi32(_mm512_and_si512(q2, low), _mm512_and_si512(q3, low));
  return _mm512_permutexvar_epi32(Transpose4x4Index(), _mm512_packus_epi16(p01, p23));
}

// bsums[16] of a block from its 4 x 64 quant bytes: sad_epu8 of (q ^ 0x80) = sum of 8 (q + 128)
// per u64, so lane k of z_m (group 4m + k) has its two halves in qwords 2k, 2k + 1.
void StoreBsums(const __m512i* z, int16_t* bsums) {  // z: [4] x [64] i8, bsums: [16]
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512i s[4];  // [4] x [8] u64 sums of 8 biased bytes (< 2^11)
  for (int m = 0; m < 4; ++m) {
    s[m] = _mm512_sad_epu8(_mm512_xor_si512(z[m], bias), _mm512_setzero_si512());
  }
  // Lane k dwords: w01 = [s0 lo, s1 lo, s0 hi, s1 hi]; adding the swapped qwords gives
  // [G(k), G(4 + k), ...]; unpacklo with the (s2, s3) pair: [G(k), G(4+k), G(8+k), G(12+k)].
  const __m512i w01 = _mm512_or_si512(s[0], _mm512_slli_epi64(s[1], 32));
  const __m512i w23 = _mm512_or_si512(s[2], _mm512_slli_epi64(s[3], 32));
  const __m512i t01 = _mm512_add_epi32(w01, _mm512_shuffle_epi32(w01, _MM_PERM_BADC));
  const __m512i t23 = _mm512_add_epi32(w23, _mm512_shuffle_epi32(w23, _MM_PERM_BADC));
  __m512i g = _mm512_unpacklo_epi64(t01, t23);  // dword 4k + j = biased G(4j + k)
  g = _mm512_sub_epi32(_mm512_permutexvar_epi32(Transpose4x4Index(), g),
                       _mm512_set1_epi32(16 * 128));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(bsums), _mm512_cvtepi32_epi16(g));
}

void QuantizeBlockQ8K(const float* x, BlockQ8_K* b) {  // x: [256]
  const float max = SignedAbsMax256(x);
  if (max == 0.0f) {
    std::memset(b, 0, sizeof(*b));
    return;
  }
  const float iscale = -127.0f / max;
  const __m512 vs = _mm512_set1_ps(iscale);
  __m512i z[4];  // [4] x [64] i8: the block's quants
  for (int m = 0; m < 4; ++m) {
    const float* xm = x + 64 * m;
    z[m] = TruncPack64(NearestQ8K(vs, xm), NearestQ8K(vs, xm + 16), NearestQ8K(vs, xm + 32),
                       NearestQ8K(vs, xm + 48));
    _mm512_storeu_si512(b->qs + 64 * m, z[m]);
  }
  StoreBsums(z, b->bsums);
  b->d = 1.0f / iscale;
}

// 16 values -> roundf(x * id) clamped to [-127, 127], NaN -> 0, as i32 (see the top).
[[gnu::always_inline]] inline __m512i RoundQ8_0(__m512 id, const float* x) {
  const __m512 sign_mask = _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(0x80000000u)));
  const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x), id);
  const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(v, t);  // exact; NaN for v = +-inf (then no step)
  const __mmask16 away = _mm512_cmp_ps_mask(_mm512_abs_ps(f), _mm512_set1_ps(0.5f), _CMP_GE_OQ);
  const __m512 step = _mm512_or_ps(_mm512_set1_ps(1.0f), _mm512_and_ps(v, sign_mask));
  __m512 r = _mm512_mask_add_ps(t, away, t, step);
  const __mmask16 ordered = _mm512_cmp_ps_mask(r, r, _CMP_ORD_Q);
  r = _mm512_min_ps(_mm512_max_ps(r, _mm512_set1_ps(-127.0f)), _mm512_set1_ps(127.0f));
  return _mm512_maskz_cvttps_epi32(ordered, r);
}

void QuantizeBlockQ8_0(const float* x, BlockQ8_0* b) {  // x: [32]
  const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  const __m512 a0 = _mm512_and_ps(_mm512_loadu_ps(x), abs_mask);
  const __m512 a1 = _mm512_and_ps(_mm512_loadu_ps(x + 16), abs_mask);
  // std::max(amax, |x|) skips NaN; so does MAXPS with the running max second.
  const float amax =
      _mm512_reduce_max_ps(_mm512_max_ps(a1, _mm512_max_ps(a0, _mm512_setzero_ps())));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b->d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
  const __m512 vid = _mm512_set1_ps(id);
  const __m128i lo = _mm512_cvtepi32_epi8(RoundQ8_0(vid, x));  // values in [-127, 127]
  const __m128i hi = _mm512_cvtepi32_epi8(RoundQ8_0(vid, x + 16));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(b->qs), lo);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(b->qs + 16), hi);
}

}  // namespace

void QuantizeQ8K_Avx512(const float* x, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < n / kQkK; ++i) QuantizeBlockQ8K(x + i * kQkK, blocks + i);
}

void QuantizeQ8_0_Avx512(const float* x, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQk; ++i) QuantizeBlockQ8_0(x + i * kQk, blocks + i);
}

}  // namespace moesplit::gemv::internal
