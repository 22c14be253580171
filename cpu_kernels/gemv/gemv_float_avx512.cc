// AVX-512 float-family kernels: F32 / F16 / BF16 weights x F32 activations. Compiled with
// MOESPLIT_FLAGS_AVX512 (F/BW/VL/DQ + F16C + FMA); the AVX-512 VNNI tier registers these same
// functions (float FMA has no VNNI form).
//
// Weights are widened exactly to f32 (F16: vcvtph2ps; BF16: zero-extend to 32 bits, shift left
// by 16), then multiplied with vfmadd231ps. Two GEMM forms, by token count (W::kMaxDotTok, from
// single-core timings on Zen: the crossover lies at 8-24 tokens depending on cache residency):
//   few tokens (decode):  "dot form": R rows x T tokens of vector accumulators, straight from the
//       weights; every weight vector is widened once and used for all T tokens; one horizontal
//       sum per (row, token) and value block. One token: one row at a time (DotRow, weights
//       streamed once, in order). More: 4 rows x 4 tokens over blocks of kDotKc values, so the 4
//       weight rows of a block stay in L1 while the tokens go by.
//   many tokens (prefill):  "packed form": 32 rows x kKc values of weights are widened and
//       transposed once into an f32 panel [kKc][32] (L2; long sequential row reads, which DRAM
//       prefetching needs), then a micro-kernel computes
//       y[t][r0 .. r0 + 32) += panel[k][.] * a[t][k] for up to 12 tokens with broadcast FMAs: no
//       horizontal sums at all, 24 FMAs per 2 panel loads + 12 broadcasts.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "cpu_kernels/gemv/gemv_internal.h"

namespace moesplit::gemv::internal {
namespace {

constexpr int kV = 16;                // f32 lanes per zmm
constexpr int kPrefetchBytes = 4096;  // decode: software prefetch distance along the weights
constexpr int64_t kDotKc = 1024;      // dot form value block: 4 rows x 1024 f32 = 16 KiB
constexpr int kPanelRows = 32;        // rows per packed panel (2 zmm)
constexpr int64_t kKc = 2048;         // values per panel: [kKc][kPanelRows] f32 = 256 KiB
constexpr int kPackT = 12;            // tokens per micro-kernel call: 24 accumulators

// Lanes [0, count) set, count clamped to [0, 16].
__mmask16 TailMask(int64_t count) {
  if (count <= 0) return 0;
  return count >= kV ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << count) - 1);
}

// Weight formats: Load widens the 16 weights at p to f32; LoadMasked reads only lanes in m
// (others are 0 and their memory is not touched).
struct WF32 {
  static constexpr int kBytes = 4;
  static constexpr int64_t kMaxDotTok = 12;  // more tokens: packed form
  static __m512 Load(const uint8_t* p) { return _mm512_loadu_ps(p); }
  static __m512 LoadMasked(const uint8_t* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};

struct WF16 {
  static constexpr int kBytes = 2;
  static constexpr int64_t kMaxDotTok = 16;
  static __m512 Load(const uint8_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static __m512 LoadMasked(const uint8_t* p, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
  }
};

// bf16 is the high half of an f32: f32 bits = u16 << 16.
struct WBF16 {
  static constexpr int kBytes = 2;
  static constexpr int64_t kMaxDotTok = 16;
  static __m512 Widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static __m512 Load(const uint8_t* p) {
    return Widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static __m512 LoadMasked(const uint8_t* p, __mmask16 m) {
    return Widen(_mm256_maskz_loadu_epi16(m, p));
  }
};

// One row x one activation row: four accumulators (16 values each) hide the FMA latency. The
// weights are prefetched kPrefetchBytes ahead: one core's DRAM stream reached ~40 GB/s with it
// and ~30 GB/s without (F32, Zen 5; neutral for L3-resident rows).
template <class W>
float DotRow(const void* w_row, const void* a_row, int64_t n) {
  const auto* w = static_cast<const uint8_t*>(w_row);  // [n] weights
  const auto* a = static_cast<const float*>(a_row);    // [n] f32
  __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  int64_t i = 0;
  for (; i + 4 * kV <= n; i += 4 * kV) {
    const uint8_t* wi = w + W::kBytes * i;
    // This step's 4 kV W::kBytes bytes, kPrefetchBytes ahead (past the row end: the next row).
    for (int l = 0; l < 4 * kV * W::kBytes / 64; ++l) {
      _mm_prefetch(reinterpret_cast<const char*>(wi) + kPrefetchBytes + 64 * l, _MM_HINT_T0);
    }
    acc0 = _mm512_fmadd_ps(W::Load(wi), _mm512_loadu_ps(a + i), acc0);
    acc1 = _mm512_fmadd_ps(W::Load(wi + W::kBytes * kV), _mm512_loadu_ps(a + i + kV), acc1);
    acc2 = _mm512_fmadd_ps(W::Load(wi + W::kBytes * 2 * kV), _mm512_loadu_ps(a + i + 2 * kV), acc2);
    acc3 = _mm512_fmadd_ps(W::Load(wi + W::kBytes * 3 * kV), _mm512_loadu_ps(a + i + 3 * kV), acc3);
  }
  for (; i + kV <= n; i += kV) {
    acc0 = _mm512_fmadd_ps(W::Load(w + W::kBytes * i), _mm512_loadu_ps(a + i), acc0);
  }
  if (i < n) {
    const __mmask16 m = TailMask(n - i);
    acc1 =
        _mm512_fmadd_ps(W::LoadMasked(w + W::kBytes * i, m), _mm512_maskz_loadu_ps(m, a + i), acc1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

// Dot form: y[t * ldy + r] (+)= sum_{i < n} w[r][i] * a[t][i] for r < R, t < T.
// w: R rows w_stride bytes apart; a: T f32 rows a_stride bytes apart (both already offset to
// the first value). accumulate: add to y (later value blocks) instead of overwriting.
template <class W, int R, int T>
void DotTile(const uint8_t* w, size_t w_stride, const uint8_t* a, size_t a_stride, int64_t n,
             float* y, int64_t ldy, bool accumulate) {
  __m512 acc[R][T];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  }
  auto step = [&](int64_t i, __mmask16 m, bool masked) {
    __m512 wv[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const uint8_t* p = w + r * w_stride + W::kBytes * i;
      wv[r] = masked ? W::LoadMasked(p, m) : W::Load(p);
    }
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const float* p = reinterpret_cast<const float*>(a + t * a_stride) + i;
      const __m512 av = masked ? _mm512_maskz_loadu_ps(m, p) : _mm512_loadu_ps(p);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], av, acc[r][t]);
    }
  };
  int64_t i = 0;
  for (; i + kV <= n; i += kV) step(i, 0, false);
  if (i < n) step(i, TailMask(n - i), true);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const float sum = _mm512_reduce_add_ps(acc[r][t]);
      y[t * ldy + r] = accumulate ? y[t * ldy + r] + sum : sum;
    }
  }
}

// R rows x all tokens over one value block, 4 tokens per tile: the R weight rows (R x kDotKc
// values) stay in L1 while the tokens go by.
template <class W, int R>
void DotRowTiles(const uint8_t* w, size_t w_stride, const uint8_t* a, size_t a_stride,
                 int64_t n_tok, int64_t n, float* y, int64_t ldy, bool accumulate) {
  for (int64_t t0 = 0; t0 < n_tok; t0 += 4) {
    const uint8_t* at = a + t0 * a_stride;
    float* yt = y + t0 * ldy;
    switch (n_tok - t0) {
      case 1:
        DotTile<W, R, 1>(w, w_stride, at, a_stride, n, yt, ldy, accumulate);
        break;
      case 2:
        DotTile<W, R, 2>(w, w_stride, at, a_stride, n, yt, ldy, accumulate);
        break;
      case 3:
        DotTile<W, R, 3>(w, w_stride, at, a_stride, n, yt, ldy, accumulate);
        break;
      default:
        DotTile<W, R, 4>(w, w_stride, at, a_stride, n, yt, ldy, accumulate);
        break;
    }
  }
}

// Dot form over all rows and tokens. Decode (one token): DotRow row after row, one sequential
// weight stream (timed on Zen 5: up to 1.5x the bandwidth of 8-row tiles for F16/BF16, whose 8
// interleaved streams the prefetchers follow worse), equal to `dot` bit for bit. Several tokens:
// 4-row x 4-token tiles over value blocks of kDotKc when there is more than one token tile to
// reuse the rows for; y accumulates over the blocks. Leftover rows one at a time.
template <class W>
void GemmDotForm(const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* a,
                 size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  if (n_tok == 1) {
    for (int64_t r = 0; r < n_rows; ++r) y[r] = DotRow<W>(w + r * w_stride, a, n);
    return;
  }
  const int64_t block = n_tok <= 4 ? n : kDotKc;  // one token tile: no reuse to block for
  for (int64_t k0 = 0; k0 < n; k0 += block) {
    const int64_t kc = n - k0 < block ? n - k0 : block;
    const uint8_t* wk = w + W::kBytes * k0;
    const uint8_t* ak = a + 4 * k0;
    int64_t r = 0;
    for (; r + 4 <= n_rows; r += 4) {
      DotRowTiles<W, 4>(wk + r * w_stride, w_stride, ak, a_stride, n_tok, kc, y + r, ldy, k0 > 0);
    }
    for (; r < n_rows; ++r) {
      DotRowTiles<W, 1>(wk + r * w_stride, w_stride, ak, a_stride, n_tok, kc, y + r, ldy, k0 > 0);
    }
  }
}

// In-register transpose of a 16 x 16 f32 block: v[j][c] -> v[c][j].
//   1. unpack{lo,hi}_ps of row pairs, 2. unpack{lo,hi}_pd of those: u[4q + c'] holds, in
//   128-bit lane L, column 4L + c' of rows 4q .. 4q + 3;  3. two shuffle_f32x4 rounds move lane L
//   of u[c'], u[4 + c'], u[8 + c'], u[12 + c'] into v[4L + c'].
__attribute__((always_inline)) inline void Transpose16(__m512* v) {  // v: [16]
  __m512 t[16], u[16];
  for (int p = 0; p < 8; ++p) {
    t[2 * p] = _mm512_unpacklo_ps(v[2 * p], v[2 * p + 1]);
    t[2 * p + 1] = _mm512_unpackhi_ps(v[2 * p], v[2 * p + 1]);
  }
  for (int q = 0; q < 4; ++q) {
    const __m512d t0 = _mm512_castps_pd(t[4 * q]), t1 = _mm512_castps_pd(t[4 * q + 1]);
    const __m512d t2 = _mm512_castps_pd(t[4 * q + 2]), t3 = _mm512_castps_pd(t[4 * q + 3]);
    u[4 * q + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
    u[4 * q + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
    u[4 * q + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
    u[4 * q + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
  }
  for (int c = 0; c < 4; ++c) {
    const __m512 x0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x44);  // A0 A1 B0 B1
    const __m512 x1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xEE);  // A2 A3 B2 B3
    const __m512 y0 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x44);
    const __m512 y1 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xEE);
    v[c] = _mm512_shuffle_f32x4(x0, y0, 0x88);       // A0 B0 C0 D0
    v[4 + c] = _mm512_shuffle_f32x4(x0, y0, 0xDD);   // A1 B1 C1 D1
    v[8 + c] = _mm512_shuffle_f32x4(x1, y1, 0x88);   // A2 B2 C2 D2
    v[12 + c] = _mm512_shuffle_f32x4(x1, y1, 0xDD);  // A3 B3 C3 D3
  }
}

// panel[k * 16 RV + r] = w[r][k0 + k] widened, for r < 16 RV, k < kc; rows >= nr are 0.
// w: rows w_stride bytes apart. panel: [kc][16 RV] f32.
template <class W, int RV>
void PackPanel(const uint8_t* w, size_t w_stride, int64_t nr, int64_t k0, int64_t kc,
               float* panel) {
  for (int g = 0; g < RV; ++g) {
    for (int64_t k = 0; k < kc; k += kV) {
      const __mmask16 m = TailMask(kc - k);
      __m512 v[16];
      for (int j = 0; j < 16; ++j) {
        const int64_t r = 16 * g + j;
        v[j] = r < nr ? W::LoadMasked(w + r * w_stride + W::kBytes * (k0 + k), m)
                      : _mm512_setzero_ps();
      }
      Transpose16(v);
      const int64_t cols = kc - k < kV ? kc - k : kV;
      for (int64_t c = 0; c < cols; ++c) _mm512_store_ps(panel + (k + c) * 16 * RV + 16 * g, v[c]);
    }
  }
}

// y[t * ldy + r] (+)= sum_{k < kc} panel[k][r] * a[t][k], r < 16 RV (rows outside m[] are
// neither read nor written), t < T. panel: [kc][16 RV] f32; a: T f32 rows a_stride bytes apart,
// already offset to value k0. accumulate: add to y (later k-blocks) instead of overwriting.
template <int RV, int T>
void MicroKernel(const float* panel, const uint8_t* a, size_t a_stride, int64_t kc, float* y,
                 int64_t ldy, const __mmask16* m, bool accumulate) {
  __m512 acc[T][RV];
  const float* at[T];
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
    at[t] = reinterpret_cast<const float*>(a + t * a_stride);
#pragma GCC unroll 4
    for (int v = 0; v < RV; ++v) {
      acc[t][v] =
          accumulate ? _mm512_maskz_loadu_ps(m[v], y + t * ldy + 16 * v) : _mm512_setzero_ps();
    }
  }
  for (int64_t k = 0; k < kc; ++k) {
    __m512 wv[RV];
#pragma GCC unroll 4
    for (int v = 0; v < RV; ++v) wv[v] = _mm512_load_ps(panel + k * 16 * RV + 16 * v);
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const __m512 b = _mm512_set1_ps(at[t][k]);
#pragma GCC unroll 4
      for (int v = 0; v < RV; ++v) acc[t][v] = _mm512_fmadd_ps(wv[v], b, acc[t][v]);
    }
  }
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
#pragma GCC unroll 4
    for (int v = 0; v < RV; ++v) _mm512_mask_storeu_ps(y + t * ldy + 16 * v, m[v], acc[t][v]);
  }
}

using RowMaskT = __mmask16;  // which rows of a y vector a micro-kernel touches
RowMaskT RowsMask(int64_t count) { return TailMask(count); }
constexpr size_t kPanelAlign = 64;

#include "cpu_kernels/gemv/gemv_float_packed.inc"

}  // namespace

MOESPLIT_GEMV_FLOAT_EXPORTS(Avx512)

}  // namespace moesplit::gemv::internal
