// AVX2 float-family kernels: F32 / F16 / BF16 weights x F32 activations. Compiled with
// MOESPLIT_FLAGS_AVX2 (AVX2 + FMA + F16C).
//
// Same structure as gemv_float_avx512.cc with 8-lane ymm vectors and 16 registers:
//   few tokens (decode; W::kMaxDotTok):  dot form, accumulators straight from the weights: one
//       token: one row at a time (DotRow); more: 3 rows x 3 tokens over blocks of kDotKc values;
//       one horizontal sum per (row, token) and value block;
//   many tokens (prefill):  packed form, 16 rows x kKc values widened and transposed once into
//       an f32 panel [kKc][16], then y[t][r0 .. r0 + 16) += panel[k][.] * a[t][k] for up to 6
//       tokens with broadcast FMAs (12 accumulators + 2 panel vectors + 1 broadcast).
// AVX2 has no masked 16-bit loads: partial vectors (n % 8 values, rows % 8) go through a
// zero-padded stack copy.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "cpu_kernels/gemv/gemv_internal.h"

namespace moesplit::gemv::internal {
namespace {

constexpr int kV = 8;                 // f32 lanes per ymm
constexpr int kPrefetchBytes = 4096;  // decode: software prefetch distance along the weights
constexpr int kDotT = 3;              // dot form tokens per tile (several tokens)
constexpr int64_t kDotKc = 1024;      // dot form value block: 3 rows x 1024 f32 = 12 KiB
constexpr int kPanelRows = 16;        // rows per packed panel (2 ymm)
constexpr int64_t kKc = 2048;         // values per panel: [kKc][kPanelRows] f32 = 128 KiB
constexpr int kPackT = 6;             // tokens per micro-kernel call: 12 accumulators

struct WF32 {
  static constexpr int kBytes = 4;
  static constexpr int64_t kMaxDotTok = 12;  // more tokens: packed form
  static __m256 Load(const uint8_t* p) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  }
};

struct WF16 {
  static constexpr int kBytes = 2;
  static constexpr int64_t kMaxDotTok = 16;
  static __m256 Load(const uint8_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
};

// bf16 is the high half of an f32: f32 bits = u16 << 16.
struct WBF16 {
  static constexpr int kBytes = 2;
  static constexpr int64_t kMaxDotTok = 16;
  static __m256 Load(const uint8_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
};

// The first `count` (< 8) elements of `bytes`-byte values at p, widened by W, the rest 0;
// reads only count * bytes bytes.
template <class W>
__m256 LoadPartial(const uint8_t* p, int64_t count) {
  alignas(32) uint8_t buf[kV * 4] = {};  // [8] values of W::kBytes bytes
  std::memcpy(buf, p, static_cast<size_t>(count) * W::kBytes);
  return W::Load(buf);
}

float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// One row x one activation row: four accumulators (8 values each) hide the FMA latency. The
// weights are prefetched kPrefetchBytes ahead (see gemv_float_avx512.cc).
template <class W>
float DotRow(const void* w_row, const void* a_row, int64_t n) {
  const auto* w = static_cast<const uint8_t*>(w_row);  // [n] weights
  const auto* a = static_cast<const float*>(a_row);    // [n] f32
  __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  int64_t i = 0;
  for (; i + 4 * kV <= n; i += 4 * kV) {
    const uint8_t* wi = w + W::kBytes * i;
    // This step's 4 kV W::kBytes bytes, kPrefetchBytes ahead (past the row end: the next row).
    for (int l = 0; l < 4 * kV * W::kBytes / 64; ++l) {
      _mm_prefetch(reinterpret_cast<const char*>(wi) + kPrefetchBytes + 64 * l, _MM_HINT_T0);
    }
    acc0 = _mm256_fmadd_ps(W::Load(wi), _mm256_loadu_ps(a + i), acc0);
    acc1 = _mm256_fmadd_ps(W::Load(wi + W::kBytes * kV), _mm256_loadu_ps(a + i + kV), acc1);
    acc2 = _mm256_fmadd_ps(W::Load(wi + W::kBytes * 2 * kV), _mm256_loadu_ps(a + i + 2 * kV), acc2);
    acc3 = _mm256_fmadd_ps(W::Load(wi + W::kBytes * 3 * kV), _mm256_loadu_ps(a + i + 3 * kV), acc3);
  }
  for (; i + kV <= n; i += kV) {
    acc0 = _mm256_fmadd_ps(W::Load(w + W::kBytes * i), _mm256_loadu_ps(a + i), acc0);
  }
  if (i < n) {
    const __m256 wv = LoadPartial<W>(w + W::kBytes * i, n - i);
    const __m256 av = LoadPartial<WF32>(reinterpret_cast<const uint8_t*>(a + i), n - i);
    acc1 = _mm256_fmadd_ps(wv, av, acc1);
  }
  return HorizontalSum(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
}

// Dot form: y[t * ldy + r] (+)= sum_{i < n} w[r][i] * a[t][i] for r < R, t < T.
// w: R rows w_stride bytes apart; a: T f32 rows a_stride bytes apart (both already offset to
// the first value). accumulate: add to y (later value blocks) instead of overwriting.
template <class W, int R, int T>
void DotTile(const uint8_t* w, size_t w_stride, const uint8_t* a, size_t a_stride, int64_t n,
             float* y, int64_t ldy, bool accumulate) {
  __m256 acc[R][T];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  // count < kV: the partial last vector.
  auto step = [&](int64_t i, int64_t count) {
    __m256 wv[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const uint8_t* p = w + r * w_stride + W::kBytes * i;
      wv[r] = count == kV ? W::Load(p) : LoadPartial<W>(p, count);
    }
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const uint8_t* p = a + t * a_stride + 4 * i;
      const __m256 av = count == kV ? WF32::Load(p) : LoadPartial<WF32>(p, count);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], av, acc[r][t]);
    }
  };
  int64_t i = 0;
  for (; i + kV <= n; i += kV) step(i, kV);
  if (i < n) step(i, n - i);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const float sum = HorizontalSum(acc[r][t]);
      y[t * ldy + r] = accumulate ? y[t * ldy + r] + sum : sum;
    }
  }
}

// R rows x all tokens over one value block, kDotT tokens per tile: the R weight rows (R x
// kDotKc values) stay in L1 while the tokens go by.
template <class W, int R>
void DotRowTiles(const uint8_t* w, size_t w_stride, const uint8_t* a, size_t a_stride,
                 int64_t n_tok, int64_t n, float* y, int64_t ldy, bool accumulate) {
  static_assert(kDotT == 3);
  for (int64_t t0 = 0; t0 < n_tok; t0 += kDotT) {
    const uint8_t* at = a + t0 * a_stride;
    float* yt = y + t0 * ldy;
    switch (n_tok - t0) {
      case 1:
        DotTile<W, R, 1>(w, w_stride, at, a_stride, n, yt, ldy, accumulate);
        break;
      case 2:
        DotTile<W, R, 2>(w, w_stride, at, a_stride, n, yt, ldy, accumulate);
        break;
      default:
        DotTile<W, R, 3>(w, w_stride, at, a_stride, n, yt, ldy, accumulate);
        break;
    }
  }
}

// Dot form over all rows and tokens. Decode (one token): DotRow row after row, one sequential
// weight stream (timed on Zen 5: up to 1.5x the bandwidth of 8-row tiles, whose 8 interleaved
// streams the prefetchers follow worse), equal to `dot` bit for bit. Several tokens: 3-row x
// 3-token tiles (9 accumulators + 3 weight vectors + 1 activation of the 16 registers) over
// value blocks of kDotKc when there is more than one token tile to reuse the rows for; y
// accumulates over the blocks. Leftover rows one at a time.
template <class W>
void GemmDotForm(const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* a,
                 size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  if (n_tok == 1) {
    for (int64_t r = 0; r < n_rows; ++r) y[r] = DotRow<W>(w + r * w_stride, a, n);
    return;
  }
  const int64_t block = n_tok <= kDotT ? n : kDotKc;  // one token tile: no reuse to block for
  for (int64_t k0 = 0; k0 < n; k0 += block) {
    const int64_t kc = n - k0 < block ? n - k0 : block;
    const uint8_t* wk = w + W::kBytes * k0;
    const uint8_t* ak = a + 4 * k0;
    int64_t r = 0;
    for (; r + 3 <= n_rows; r += 3) {
      DotRowTiles<W, 3>(wk + r * w_stride, w_stride, ak, a_stride, n_tok, kc, y + r, ldy, k0 > 0);
    }
    for (; r < n_rows; ++r) {
      DotRowTiles<W, 1>(wk + r * w_stride, w_stride, ak, a_stride, n_tok, kc, y + r, ldy, k0 > 0);
    }
  }
}

// In-register transpose of an 8 x 8 f32 block: v[j][c] -> v[c][j]. After unpack{lo,hi}_ps and
// unpack{lo,hi}_pd, u[4q + c'] holds in 128-bit lane L column 4L + c' of rows 4q .. 4q + 3;
// permute2f128 then joins lane L of u[c'] and u[4 + c'] into v[4L + c'].
void Transpose8(__m256* v) {  // v: [8]
  __m256 t[8], u[8];
  for (int p = 0; p < 4; ++p) {
    t[2 * p] = _mm256_unpacklo_ps(v[2 * p], v[2 * p + 1]);
    t[2 * p + 1] = _mm256_unpackhi_ps(v[2 * p], v[2 * p + 1]);
  }
  for (int q = 0; q < 2; ++q) {
    const __m256d t0 = _mm256_castps_pd(t[4 * q]), t1 = _mm256_castps_pd(t[4 * q + 1]);
    const __m256d t2 = _mm256_castps_pd(t[4 * q + 2]), t3 = _mm256_castps_pd(t[4 * q + 3]);
    u[4 * q + 0] = _mm256_castpd_ps(_mm256_unpacklo_pd(t0, t2));
    u[4 * q + 1] = _mm256_castpd_ps(_mm256_unpackhi_pd(t0, t2));
    u[4 * q + 2] = _mm256_castpd_ps(_mm256_unpacklo_pd(t1, t3));
    u[4 * q + 3] = _mm256_castpd_ps(_mm256_unpackhi_pd(t1, t3));
  }
  for (int c = 0; c < 4; ++c) {
    v[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);      // lane 0 of each
    v[4 + c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);  // lane 1 of each
  }
}

// panel[k * 8 RV + r] = w[r][k0 + k] widened, for r < 8 RV, k < kc; rows >= nr are 0.
// w: rows w_stride bytes apart. panel: [kc][8 RV] f32.
template <class W, int RV>
void PackPanel(const uint8_t* w, size_t w_stride, int64_t nr, int64_t k0, int64_t kc,
               float* panel) {
  for (int g = 0; g < RV; ++g) {
    for (int64_t k = 0; k < kc; k += kV) {
      const int64_t cols = kc - k < kV ? kc - k : kV;
      __m256 v[8];
      for (int j = 0; j < 8; ++j) {
        const int64_t r = 8 * g + j;
        const uint8_t* p = w + r * w_stride + W::kBytes * (k0 + k);
        v[j] = r >= nr ? _mm256_setzero_ps() : cols == kV ? W::Load(p) : LoadPartial<W>(p, cols);
      }
      Transpose8(v);
      for (int64_t c = 0; c < cols; ++c) _mm256_store_ps(panel + (k + c) * 8 * RV + 8 * g, v[c]);
    }
  }
}

// Lanes [0, count) all-ones (count clamped to [0, 8]): the row mask of a y vector.
__m256i RowMask(int64_t count) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const int c = count < 0 ? 0 : count > kV ? kV : static_cast<int>(count);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(c), lane);
}

// y[t * ldy + r] (+)= sum_{k < kc} panel[k][r] * a[t][k], r < 8 RV (rows outside m[] are
// neither read nor written), t < T. panel: [kc][8 RV] f32; a: T f32 rows a_stride bytes apart,
// already offset to value k0. accumulate: add to y (later k-blocks) instead of overwriting.
template <int RV, int T>
void MicroKernel(const float* panel, const uint8_t* a, size_t a_stride, int64_t kc, float* y,
                 int64_t ldy, const __m256i* m, bool accumulate) {
  __m256 acc[T][RV];
  const float* at[T];
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
    at[t] = reinterpret_cast<const float*>(a + t * a_stride);
#pragma GCC unroll 4
    for (int v = 0; v < RV; ++v) {
      acc[t][v] = accumulate ? _mm256_maskload_ps(y + t * ldy + 8 * v, m[v]) : _mm256_setzero_ps();
    }
  }
  for (int64_t k = 0; k < kc; ++k) {
    __m256 wv[RV];
#pragma GCC unroll 4
    for (int v = 0; v < RV; ++v) wv[v] = _mm256_load_ps(panel + k * 8 * RV + 8 * v);
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const __m256 b = _mm256_broadcast_ss(at[t] + k);
#pragma GCC unroll 4
      for (int v = 0; v < RV; ++v) acc[t][v] = _mm256_fmadd_ps(wv[v], b, acc[t][v]);
    }
  }
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
#pragma GCC unroll 4
    for (int v = 0; v < RV; ++v) _mm256_maskstore_ps(y + t * ldy + 8 * v, m[v], acc[t][v]);
  }
}

using RowMaskT = __m256i;  // which rows of a y vector a micro-kernel touches
RowMaskT RowsMask(int64_t count) { return RowMask(count); }
constexpr size_t kPanelAlign = 32;

#include "cpu_kernels/gemv/gemv_float_packed.inc"

}  // namespace

MOESPLIT_GEMV_FLOAT_EXPORTS(Avx2)

}  // namespace moesplit::gemv::internal
