// AVX-512 scores of several queries against f32 rows (GemvKernels::row_scores): MLA's absorbed
// decode, s[j][p] = q_j . c_p for the heads' latent queries q_j [L + R] and the latent cache
// rows c_p as they lie (576 floats, 2304 B apart for DeepSeek).
//
// Why not the F32 GEMM: with 16-32 heads against 128-512 positions it takes either the dot form
// (4 x 4 tiles, one horizontal sum per (row, head), the rows re-read per 4 heads) or the packed
// form, which transposes every cache row into a panel before using it for 16 heads: tg64 @ d2048
// on ds-v2-lite spent more time packing (PackPanel, 15% of the samples) than multiplying.
// Here the queries are transposed instead (a panel [d][16] per 16 heads: 36 KB for d = 576,
// built once per call), and each tile of 8 positions x 16 heads runs
//   acc[i] += panel[k] * broadcast(c_{p+i}[k])      (one panel load, 8 FMAs with broadcasts)
// over all k: 8 independent FMA chains (latency 4 x 2 pipes), no horizontal sums; the 8 x 16
// results leave through a 512 B buffer, transposed into s.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cpu_kernels/gemv/gemv_internal.h"

namespace moesplit::gemv::internal {
namespace {

constexpr int kV = 16;  // f32 per zmm: heads per panel
constexpr int kP = 8;   // positions per tile

// s[j * lds + p0 + i] for j < nq, i < np (<= kP): the tile's rows, rows past np repeat row np - 1
// (computed, not stored).
void Tile(const float* panel, const float* rows, int64_t ld_rows, int64_t np, int64_t d, int64_t nq,
          float* s, int64_t lds) {
  const float* r[kP];
  for (int i = 0; i < kP; ++i) r[i] = rows + std::min<int64_t>(i, np - 1) * ld_rows;
  __m512 acc[kP];
#pragma GCC unroll 8
  for (int i = 0; i < kP; ++i) acc[i] = _mm512_setzero_ps();
  // The next tile's rows (kP ld_rows floats from rows + kP ld_rows), one line per 2 values of k.
  const char* next = reinterpret_cast<const char*>(rows + kP * ld_rows);
  const int64_t pf_step = std::max<int64_t>(64, kP * ld_rows * 4 * 2 / d);
  int64_t pf = 0;
  for (int64_t k = 0; k < d; ++k) {
    if ((k & 1) == 0) {
      _mm_prefetch(next + pf, _MM_HINT_T1);
      pf += pf_step;
    }
    const __m512 pv = _mm512_load_ps(panel + k * kV);
#pragma GCC unroll 8
    for (int i = 0; i < kP; ++i) acc[i] = _mm512_fmadd_ps(pv, _mm512_set1_ps(r[i][k]), acc[i]);
  }
  alignas(64) float out[kP][kV];
#pragma GCC unroll 8
  for (int i = 0; i < kP; ++i) _mm512_store_ps(out[i], acc[i]);
  for (int64_t j = 0; j < nq; ++j) {
    for (int64_t i = 0; i < np; ++i) s[j * lds + i] = out[i][j];
  }
}

}  // namespace

void RowScores_Avx512(const float* q, int64_t ldq, int64_t n_q, const float* rows, int64_t ld_rows,
                      int64_t n, int64_t d, float* s, int64_t lds) {
  // [d][16] f32, 64-byte aligned: the transposed queries of one group of 16 (zero past n_q).
  std::vector<float> panel_buf(static_cast<size_t>((d + 1) * kV));
  float* panel = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(panel_buf.data()) + 63) &
                                          ~uintptr_t{63});
  for (int64_t j0 = 0; j0 < n_q; j0 += kV) {
    const int64_t nq = std::min<int64_t>(kV, n_q - j0);
    for (int64_t k = 0; k < d; ++k) {
      for (int64_t j = 0; j < kV; ++j) panel[k * kV + j] = j < nq ? q[(j0 + j) * ldq + k] : 0.0f;
    }
    for (int64_t p = 0; p < n; p += kP) {
      Tile(panel, rows + p * ld_rows, ld_rows, std::min<int64_t>(kP, n - p), d, nq,
           s + j0 * lds + p, lds);
    }
  }
}

}  // namespace moesplit::gemv::internal
