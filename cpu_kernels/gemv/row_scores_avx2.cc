// AVX2 scores of several queries against f32 rows (GemvKernels::row_scores): MLA's absorbed
// decode, s[j][p] = q_j . c_p, as row_scores_avx512.cc (whose header says why) with 8 lanes:
// the queries transposed into a panel [d][8] per 8 heads, tiles of 8 positions x 8 heads,
//   acc[i] += panel[k] * broadcast(c_{p+i}[k])      (one panel load, 8 FMAs with broadcasts)
// 8 independent FMA chains (latency 4 x 2 pipes), results transposed out through a buffer.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cpu_kernels/gemv/gemv_internal.h"

namespace moesplit::gemv::internal {
namespace {

constexpr int kV = 8;  // f32 per ymm: heads per panel
constexpr int kP = 8;  // positions per tile

// s[j * lds + p0 + i] for j < nq, i < np (<= kP): the tile's rows, rows past np repeat row np - 1
// (computed, not stored).
void Tile(const float* panel, const float* rows, int64_t ld_rows, int64_t np, int64_t d, int64_t nq,
          float* s, int64_t lds) {
  const float* r[kP];
  for (int i = 0; i < kP; ++i) r[i] = rows + std::min<int64_t>(i, np - 1) * ld_rows;
  __m256 acc[kP];
#pragma GCC unroll 8
  for (int i = 0; i < kP; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t k = 0; k < d; ++k) {
    const __m256 pv = _mm256_load_ps(panel + k * kV);
#pragma GCC unroll 8
    for (int i = 0; i < kP; ++i) acc[i] = _mm256_fmadd_ps(pv, _mm256_set1_ps(r[i][k]), acc[i]);
  }
  alignas(32) float out[kP][kV];
#pragma GCC unroll 8
  for (int i = 0; i < kP; ++i) _mm256_store_ps(out[i], acc[i]);
  for (int64_t j = 0; j < nq; ++j) {
    for (int64_t i = 0; i < np; ++i) s[j * lds + i] = out[i][j];
  }
}

}  // namespace

void RowScores_Avx2(const float* q, int64_t ldq, int64_t n_q, const float* rows, int64_t ld_rows,
                    int64_t n, int64_t d, float* s, int64_t lds) {
  // [d][16] f32, 64-byte aligned: the transposed queries of one group of 16 (zero past n_q).
  std::vector<float> panel_buf(static_cast<size_t>((d + 1) * kV));
  float* panel = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(panel_buf.data()) + 31) &
                                          ~uintptr_t{31});
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
