// AVX-512 weighted sum of f32 rows (GemvKernels::row_mix): the attention output of MLA's
// absorbed decode, o_lat[t] = sum_s p[t][s] c_s, straight from the latent cache rows.
//
// Why: the dot form over the transposed latent cache (C^T: L rows of the positions, each row a
// cache-slot stride apart, 16 KB at 4096 slots) read 4 far-apart rows per tile and ran the
// layer's f32 cache products at ~18 GMAC/s per core (ds-v2-lite tg512 on Zen 5: "attention
// (cache, scores)" 6.3 ms of 34 per token). Here each position's row is read once per 8
// outputs, 32 values (2 vectors) at a time: 8 x 2 accumulators + 2 row vectors + a broadcast
// weight = 19 of the 32 zmm registers, 16 independent FMA chains per position, and rows walk at
// a constant stride the hardware prefetcher follows. (2 outputs x 128 values, the first form,
// re-read the rows per 2 outputs, from L3 past L2's size: 71 GFLOP/s in bench_gemv's
// mla/row_mix at 16 x 512 x 576 on Zen 5; this form 198-205, 8 x 3 the same, 16 x 1 129, 4 x 4
// 153.) Outputs past the last 8 go 2 x 128 values at a time, then 1.
#include <immintrin.h>

#include <cstdint>

#include "cpu_kernels/gemv/gemv_internal.h"

namespace moesplit::gemv::internal {
namespace {

constexpr int kV = 16;  // f32 per zmm

// y[t][d0 + 16 v + i] for t < TH, v < NV (the last vector masked by `last`).
template <int TH, int NV>
void Chunk(const float* p, int64_t ldp, const float* rows, int64_t ld_rows, int64_t n,
           __mmask16 last, float* y, int64_t ldy) {
  __m512 acc[TH][NV];
#pragma GCC unroll 16
  for (int t = 0; t < TH; ++t) {
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) acc[t][v] = _mm512_setzero_ps();
  }
  for (int64_t s = 0; s < n; ++s) {
    const float* r = rows + s * ld_rows;
    __m512 rv[NV];
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) {
      rv[v] = v == NV - 1 ? _mm512_maskz_loadu_ps(last, r + kV * v) : _mm512_loadu_ps(r + kV * v);
    }
#pragma GCC unroll 16
    for (int t = 0; t < TH; ++t) {
      const __m512 w = _mm512_set1_ps(p[t * ldp + s]);
#pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) acc[t][v] = _mm512_fmadd_ps(rv[v], w, acc[t][v]);
    }
  }
#pragma GCC unroll 16
  for (int t = 0; t < TH; ++t) {
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) {
      float* dst = y + t * ldy + kV * v;
      if (v == NV - 1) {
        _mm512_mask_storeu_ps(dst, last, acc[t][v]);
      } else {
        _mm512_storeu_ps(dst, acc[t][v]);
      }
    }
  }
}

// Outputs [0, TH) over all d values, NV vectors (16 NV values) per pass over the rows.
template <int TH, int NV>
void Chunks(const float* p, int64_t ldp, const float* rows, int64_t ld_rows, int64_t n, int64_t d,
            float* y, int64_t ldy) {
  int64_t d0 = 0;
  for (; d0 + NV * kV <= d; d0 += NV * kV) {
    Chunk<TH, NV>(p, ldp, rows + d0, ld_rows, n, static_cast<__mmask16>(0xFFFF), y + d0, ldy);
  }
  for (; d0 < d; d0 += kV) {  // the rest, a vector at a time (the last one masked)
    const int64_t width = d - d0 < kV ? d - d0 : kV;
    const __mmask16 last = static_cast<__mmask16>((1u << width) - 1);
    Chunk<TH, 1>(p, ldp, rows + d0, ld_rows, n, last, y + d0, ldy);
  }
}

}  // namespace

void RowMix_Avx512(const float* p, int64_t ldp, int64_t n_out, const float* rows, int64_t ld_rows,
                   int64_t n, int64_t d, float* y, int64_t ldy) {
  int64_t t = 0;
  for (; t + 8 <= n_out; t += 8)
    Chunks<8, 2>(p + t * ldp, ldp, rows, ld_rows, n, d, y + t * ldy, ldy);
  for (; t + 2 <= n_out; t += 2)
    Chunks<2, 8>(p + t * ldp, ldp, rows, ld_rows, n, d, y + t * ldy, ldy);
  if (t < n_out) Chunks<1, 8>(p + t * ldp, ldp, rows, ld_rows, n, d, y + t * ldy, ldy);
}

}  // namespace moesplit::gemv::internal
