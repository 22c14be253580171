// AVX2 + FMA weighted sum of f32 rows (GemvKernels::row_mix; why: row_mix_avx512.cc). 32 values
// (4 ymm) of a row at a time for two outputs: 2 x 4 accumulators + 4 row vectors + the two
// broadcast weights = 14 of the 16 ymm registers.
#include <immintrin.h>

#include <cstdint>

#include "cpu_kernels/gemv/gemv_internal.h"

namespace moesplit::gemv::internal {
namespace {

constexpr int kV = 8;  // f32 per ymm

// Lanes [0, count) set: the mask of a partial last vector.
__m256i TailMask(int count) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(count), lanes);
}

template <int TH, int NV>
void Chunk(const float* p, int64_t ldp, const float* rows, int64_t ld_rows, int64_t n, __m256i last,
           float* y, int64_t ldy) {
  __m256 acc[TH][NV];
#pragma GCC unroll 8
  for (int t = 0; t < TH; ++t) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[t][v] = _mm256_setzero_ps();
  }
  for (int64_t s = 0; s < n; ++s) {
    const float* r = rows + s * ld_rows;
    __m256 rv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      rv[v] = v == NV - 1 ? _mm256_maskload_ps(r + kV * v, last) : _mm256_loadu_ps(r + kV * v);
    }
#pragma GCC unroll 8
    for (int t = 0; t < TH; ++t) {
      const __m256 w = _mm256_broadcast_ss(p + t * ldp + s);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[t][v] = _mm256_fmadd_ps(rv[v], w, acc[t][v]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < TH; ++t) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      float* dst = y + t * ldy + kV * v;
      if (v == NV - 1) {
        _mm256_maskstore_ps(dst, last, acc[t][v]);
      } else {
        _mm256_storeu_ps(dst, acc[t][v]);
      }
    }
  }
}

template <int TH>
void Chunks(const float* p, int64_t ldp, const float* rows, int64_t ld_rows, int64_t n, int64_t d,
            float* y, int64_t ldy) {
  for (int64_t d0 = 0; d0 < d; d0 += 4 * kV) {
    const int64_t width = d - d0 < 4 * kV ? d - d0 : 4 * kV;
    const int nv = static_cast<int>((width + kV - 1) / kV);
    const __m256i last = TailMask(static_cast<int>(width - kV * (nv - 1)));
    const float* r = rows + d0;
    float* yd = y + d0;
    switch (nv) {
      case 1:
        Chunk<TH, 1>(p, ldp, r, ld_rows, n, last, yd, ldy);
        break;
      case 2:
        Chunk<TH, 2>(p, ldp, r, ld_rows, n, last, yd, ldy);
        break;
      case 3:
        Chunk<TH, 3>(p, ldp, r, ld_rows, n, last, yd, ldy);
        break;
      default:
        Chunk<TH, 4>(p, ldp, r, ld_rows, n, last, yd, ldy);
        break;
    }
  }
}

}  // namespace

void RowMix_Avx2(const float* p, int64_t ldp, int64_t n_out, const float* rows, int64_t ld_rows,
                 int64_t n, int64_t d, float* y, int64_t ldy) {
  int64_t t = 0;
  for (; t + 2 <= n_out; t += 2) Chunks<2>(p + t * ldp, ldp, rows, ld_rows, n, d, y + t * ldy, ldy);
  if (t < n_out) Chunks<1>(p + t * ldp, ldp, rows, ld_rows, n, d, y + t * ldy, ldy);
}

}  // namespace moesplit::gemv::internal
