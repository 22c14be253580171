// AVX2 + FMA weighted sum of f32 rows (GemvKernels::row_mix; why: row_mix_avx512.cc). 16 values
// (2 ymm) of a row at a time for four outputs: 4 x 2 accumulators + 2 row vectors + a broadcast
// weight = 11 of the 16 ymm registers; the rows are read once per 4 outputs. (2 outputs x 32
// values, the first form, re-read them per 2: 71 GFLOP/s in bench_gemv's mla/row_mix at 16 x 512
// x 576 on Zen 5, this form 90-96.)
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

// Outputs [0, TH) over all d values, NV vectors (8 NV values) per pass over the rows.
template <int TH, int NV>
void Chunks(const float* p, int64_t ldp, const float* rows, int64_t ld_rows, int64_t n, int64_t d,
            float* y, int64_t ldy) {
  int64_t d0 = 0;
  for (; d0 + NV * kV <= d; d0 += NV * kV) {
    Chunk<TH, NV>(p, ldp, rows + d0, ld_rows, n, TailMask(kV), y + d0, ldy);
  }
  for (; d0 < d; d0 += kV) {  // the rest, a vector at a time (the last one masked)
    const int width = static_cast<int>(d - d0 < kV ? d - d0 : kV);
    Chunk<TH, 1>(p, ldp, rows + d0, ld_rows, n, TailMask(width), y + d0, ldy);
  }
}

}  // namespace

void RowMix_Avx2(const float* p, int64_t ldp, int64_t n_out, const float* rows, int64_t ld_rows,
                 int64_t n, int64_t d, float* y, int64_t ldy) {
  int64_t t = 0;
  for (; t + 4 <= n_out; t += 4)
    Chunks<4, 2>(p + t * ldp, ldp, rows, ld_rows, n, d, y + t * ldy, ldy);
  for (; t + 2 <= n_out; t += 2)
    Chunks<2, 4>(p + t * ldp, ldp, rows, ld_rows, n, d, y + t * ldy, ldy);
  if (t < n_out) Chunks<1, 4>(p + t * ldp, ldp, rows, ld_rows, n, d, y + t * ldy, ldy);
}

}  // namespace moesplit::gemv::internal
