// AVX-512 weighted sum of f32 rows (GemvKernels::row_mix): the attention output of MLA's
// absorbed decode, o_lat[t] = sum_s p[t][s] c_s, straight from the latent cache rows.
//
// Why: the dot form over the transposed latent cache (C^T: L rows of the positions, each row a
// cache-slot stride apart, 16 KB at 4096 slots) read 4 far-apart rows per tile and ran the
// layer's f32 cache products at ~18 GMAC/s per core (ds-v2-lite tg512 on Zen 5: "attention
// (cache, scores)" 6.3 ms of 34 per token). Here each position's row is read once per pair of
// outputs, 128 values (8 vectors) at a time: 2 x 8 accumulators + 8 row vectors = 24 of the 32
// zmm registers, 16 independent FMA chains per position, and rows walk at a constant stride the
// hardware prefetcher follows.
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

template <int TH>
void Chunks(const float* p, int64_t ldp, const float* rows, int64_t ld_rows, int64_t n, int64_t d,
            float* y, int64_t ldy) {
  for (int64_t d0 = 0; d0 < d; d0 += 8 * kV) {
    const int64_t width = d - d0 < 8 * kV ? d - d0 : 8 * kV;
    const int nv = static_cast<int>((width + kV - 1) / kV);
    const int tail = static_cast<int>(width - kV * (nv - 1));
    const __mmask16 last = static_cast<__mmask16>((1u << tail) - 1);
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
      case 4:
        Chunk<TH, 4>(p, ldp, r, ld_rows, n, last, yd, ldy);
        break;
      case 5:
        Chunk<TH, 5>(p, ldp, r, ld_rows, n, last, yd, ldy);
        break;
      case 6:
        Chunk<TH, 6>(p, ldp, r, ld_rows, n, last, yd, ldy);
        break;
      case 7:
        Chunk<TH, 7>(p, ldp, r, ld_rows, n, last, yd, ldy);
        break;
      default:
        Chunk<TH, 8>(p, ldp, r, ld_rows, n, last, yd, ldy);
        break;
    }
  }
}

}  // namespace

void RowMix_Avx512(const float* p, int64_t ldp, int64_t n_out, const float* rows, int64_t ld_rows,
                   int64_t n, int64_t d, float* y, int64_t ldy) {
  int64_t t = 0;
  for (; t + 2 <= n_out; t += 2) Chunks<2>(p + t * ldp, ldp, rows, ld_rows, n, d, y + t * ldy, ldy);
  if (t < n_out) Chunks<1>(p + t * ldp, ldp, rows, ld_rows, n, d, y + t * ldy, ldy);
}

}  // namespace moesplit::gemv::internal
