// AMX tier: the float-weight GEMMs (F32, F16, BF16 weights x F32 activations) on AMX-BF16
// tiles. Compiled with the AVX-512 flags + -mavx512bf16 -mamx-tile -mamx-bf16
// (cpu_kernels/gemv/float.cmake); reached through KernelsFor(IsaTier::kAmx).
//
// A TDPBF16PS multiplies bf16 pairs exactly and accumulates in f32, so each f32 operand is
// split into bf16 parts (SplitParts) and the part products that matter are summed:
//   BF16 weights (the table's BF16 gemm): w is one bf16, loaded into the A tile in place; the
//     activation a = p0 + p1 + p2 exactly (truncated parts: 3 x 8 significant bits hold an
//     f32), w . a = w . p0 + w . p1 + w . p2 (3 products): exact up to the f32 accumulation
//   F16 weights (the table's F16 gemm): w = w0 + w1 exactly (an f16 has 11 significant bits),
//     w0 . (p0 + p1 + p2) + w1 . (p0 + p1) (5 products; drops w1 p2 < 2^-7 x 2^-15 = 2^-22 of
//     |w a|; f16's range, subnormals included, is inside bf16's)
//   F32 weights (GemvKernels::f32_gemm_bf16x3, not the table's F32 gemm): two rounded parts
//     each, w0 a0 + w1 a0 + w0 a1 (3 products): <= 3 x 2^-18 = 1.1e-5 of |w a| per product, so a
//     result is within ~1.5e-5 of sum |w a| (f32 FMA: ~1e-7; llama.cpp's f16 K.Q: ~1e-3). For the
//     f32 products of CPU prefill that have no quantized weights: MLA's expanded keys and values
//     against the queries and the softmax rows (35% of a V3 prefill step at 2048 tokens,
//     PERFORMANCE.md (i)), the key / value expansion, F32 routers. A sharp 27-layer F32 model
//     drifts past the oracle's bound with it, so it is not the F32 gemm itself.
// llama.cpp instead rounds the activations to bf16 (BF16 weights) or f16 (F16 weights).
// A non-finite value (inf, NaN; for rounded F32 parts also |x| above bf16's largest finite
// value) sends the whole call to the AVX-512 kernel of its type, which keeps IEEE semantics (the
// tiles would turn inf x a zero part into NaN where f32 arithmetic gives +/-inf).
// bf16 has f32's exponent range: parts below 2^-126 are flushed (an absolute error below 2^-126
// |a|).
//
// Roles: A = 16 weight rows x 32 values (row-major: BF16 rows straight from the matrix, F16 /
// F32 rows split per K step), B = 32 values x 16 tokens in VNNI pairs (B row i = value pair i of
// each token: a 16 x 16 dword transpose of the token rows), C = 16 rows x 16 tokens (f32),
// transposed on the way out to y[t * ldy + r]. Per 16 x 16 x 32: one TDPBF16PS = 8192
// multiply-adds, against 512 FMA instructions of 16 lanes at the same work.
// Blocking: tokens in batches of 4 tiles (64 tokens, C tiles 0-3), K in chunks of 32 steps
// (1024 values): a chunk's B parts (4 tiles x 32 steps x 3 parts x 1 KiB = 384 KiB) stay in L2
// while every 16-row group passes over them; C is kept in memory between chunks ([groups x 4 x
// 256] f32, 4 KiB per group). Fewer than 16 tokens or rows, or fewer than 32 values, take the
// AVX-512 kernel.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>

#include "cpu_kernels/gemv/amx_tile_config.h"
#include "cpu_kernels/gemv/gemv_internal.h"

namespace moesplit::gemv::internal {
namespace {

constexpr int64_t kT = 16;  // weight rows per A / C tile, tokens per B / C tile
constexpr int64_t kK = 32;  // values per K step (64 bytes of bf16 in an A row)

// Tiles 0-3: C of up to four token tiles; 4 / 5: A parts 0 / 1; 6: B, its parts in turn.
TileConfig BfConfig() {
  TileConfig c;
  for (int i = 0; i < 7; ++i) {
    c.rows[i] = kT;
    c.colsb[i] = 64;
  }
  return c;
}

// In-register transpose of a 16 x 16 dword matrix (r[i] = row i).
inline void Transpose16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  // Each 128-bit lane now holds a transposed 4 x 4 block; move the blocks.
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0xDD);
    t[i + 8] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0xDD);
  }
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xDD);
  }
}

// Masks of the first n_valid of 32 values as two 16-lane halves.
inline void HalfMasks(int64_t n_valid, __mmask16* m0, __mmask16* m1) {
  *m0 = n_valid >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << n_valid) - 1);
  const int64_t n1 = n_valid - 16;
  *m1 = n1 >= 16 ? 0xFFFF : n1 <= 0 ? 0 : static_cast<__mmask16>((1u << n1) - 1);
}

// 32 f32 values at x (the first n_valid, zeros after) as halves lo = values 0..15, hi = 16..31.
inline void LoadF32x32(const float* x, int64_t n_valid, __m512* lo, __m512* hi) {
  __mmask16 m0, m1;
  HalfMasks(n_valid, &m0, &m1);
  *lo = _mm512_maskz_loadu_ps(m0, x);
  *hi = _mm512_maskz_loadu_ps(m1, x + 16);
}

// The same for 32 f16 values (widened exactly).
inline void LoadF16x32(const uint16_t* x, int64_t n_valid, __m512* lo, __m512* hi) {
  const __mmask32 m = n_valid >= 32 ? 0xFFFFFFFFu : static_cast<__mmask32>((1u << n_valid) - 1);
  const __m512i v = _mm512_maskz_loadu_epi16(m, x);
  *lo = _mm512_cvtph_ps(_mm512_castsi512_si256(v));
  *hi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(v, 1));
}

// 32 values (lo = 0..15, hi = 16..31) -> P bf16 parts, part p as 16 dwords (32 bf16 in value
// order), each part bf16(what the parts before it left), rounded to nearest (kRound) or
// truncated. Truncated parts are exact: a part is the remainder with its low 16 bits cleared
// (one AND instead of a conversion back from bf16), each takes the next 8 significant bits, so
// three hold an f32 (24 bits) and two an f16 (11) exactly, normal or not; rounded parts leave
// less per part (2^-9 of the remainder against 2^-8), which the two-part F32 scheme needs. False
// when a value is not finite (rounded: when part 0 is not, i.e. also above bf16's largest
// finite value; truncation cannot overflow).
template <int P, bool kRound>
inline bool SplitParts(__m512 lo, __m512 hi, __m512i* parts) {
  // fpclass 0x99: QNaN | +inf | -inf | SNaN.
  if (!kRound && (_mm512_fpclass_ps_mask(lo, 0x99) | _mm512_fpclass_ps_mask(hi, 0x99)) != 0) {
    return false;
  }
  const __m512i keep = _mm512_set1_epi32(static_cast<int32_t>(0xFFFF0000u));
  for (int p = 0; p < P; ++p) {
    if (!kRound && p == P - 1) {  // what is left fits one bf16: converted exactly
      parts[p] = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));
      break;
    }
    __m512 hl, hh;  // this part in f32
    if constexpr (kRound) {
      const __m512i h = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));
      // Back to f32: a bf16 is the upper half of an f32.
      hl = _mm512_castsi512_ps(
          _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(h)), 16));
      hh = _mm512_castsi512_ps(
          _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(h, 1)), 16));
      if (p == 0 && (_mm512_fpclass_ps_mask(hl, 0x99) | _mm512_fpclass_ps_mask(hh, 0x99)) != 0) {
        return false;
      }
      parts[p] = h;
    } else {
      hl = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(lo), keep));
      hh = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(hi), keep));
      parts[p] = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hh, hl));  // exact
    }
    lo = _mm512_sub_ps(lo, hl);  // exact: the difference has <= 16 significant bits
    hi = _mm512_sub_ps(hi, hh);
  }
  return true;
}

// One GEMM call's operands.
struct Call {
  const uint8_t* w;  // [n_rows x w_stride] weights
  size_t w_stride;
  int64_t n_rows;
  const uint8_t* a;  // [n_tok x a_stride] f32 activations
  size_t a_stride;
  int64_t n_tok;
  int64_t n;  // values per row
  float* y;   // [n_tok x ldy]
  int64_t ldy;
  int64_t n_steps;  // ceil(n / 32)
  int64_t n_tiles;  // ceil(n_tok / 16)
};

// The weight types: how a K step of 16 rows becomes A tiles (kAParts: tile 4, and 5 for the
// second part), how many parts the tokens take (kBParts) and how many of those the second A
// part multiplies (kLoProducts). Products per C tile and step: kBParts + kLoProducts.
enum class Weights { kF32, kF16, kBF16 };
template <Weights W>
struct Scheme;
template <>
struct Scheme<Weights::kF32> {
  static constexpr int kAParts = 2, kBParts = 2, kLoProducts = 1;
};
template <>
struct Scheme<Weights::kF16> {
  static constexpr int kAParts = 2, kBParts = 3, kLoProducts = 2;
};
template <>
struct Scheme<Weights::kBF16> {
  static constexpr int kAParts = 1, kBParts = 3, kLoProducts = 0;
};

constexpr int64_t kBatchTiles = 4;   // token tiles per batch: C tiles 0-3
constexpr int64_t kChunkSteps = 32;  // K steps per chunk (1024 values)

// Token tiles [tile0, tile0 + nt), K steps [s0, s1) in B form: b[(j x (s1 - s0) + s - s0) x P
// + p] = 16 x 16 dwords, row i = value pair i of the tile's 16 tokens (part p). Missing tokens
// and values are zero. False: a value is not finite (see SplitParts).
template <int P, bool kRoundTokens>
bool PackTokens(const Call& c, int64_t tile0, int64_t nt, int64_t s0, int64_t s1, uint32_t* b) {
  for (int64_t j = 0; j < nt; ++j) {
    const int64_t t0 = (tile0 + j) * kT;
    for (int64_t s = s0; s < s1; ++s) {
      __m512i parts[P][16];  // [part][token]
      for (int64_t t = 0; t < kT; ++t) {
        __m512i q[P];
        if (t0 + t >= c.n_tok) {
          for (int p = 0; p < P; ++p) q[p] = _mm512_setzero_si512();
        } else {
          const auto* row = reinterpret_cast<const float*>(c.a + (t0 + t) * c.a_stride);
          __m512 lo, hi;
          LoadF32x32(row + s * kK, c.n - s * kK, &lo, &hi);
          if (!SplitParts<P, kRoundTokens>(lo, hi, q)) return false;
        }
        for (int p = 0; p < P; ++p) parts[p][t] = q[p];
      }
      uint32_t* dst = b + (j * (s1 - s0) + (s - s0)) * P * 256;
      for (int p = 0; p < P; ++p) {
        Transpose16(parts[p]);
        for (int i = 0; i < 16; ++i) _mm512_store_si512(dst + p * 256 + 16 * i, parts[p][i]);
      }
    }
  }
  return true;
}

// Rows r0 .. r0 + 15 (zeros past n_rows), K step s, into A tile 4 (and 5). BF16 rows are
// loaded in place when the group and step are whole, and checked (when `check`: once per call)
// for non-finite values; F16 / F32 rows are split into a_buf (2 x 256 dwords). False: a weight
// is not finite (in bf16).
template <Weights W>
bool LoadA(const Call& c, int64_t r0, int64_t s, bool check, uint32_t* a_buf) {
  const int64_t valid = c.n - s * kK < kK ? c.n - s * kK : kK;
  const uint8_t* src = c.w + r0 * c.w_stride;
  if constexpr (W == Weights::kBF16) {
    const bool whole = r0 + kT <= c.n_rows && valid == kK;
    if (check || !whole) {
      const __mmask32 m = valid == kK ? 0xFFFFFFFFu : static_cast<__mmask32>((1u << valid) - 1);
      const __m512i exp = _mm512_set1_epi16(0x7F80);
      for (int64_t r = 0; r < kT; ++r) {
        const __m512i v = r0 + r < c.n_rows
                              ? _mm512_maskz_loadu_epi16(m, src + r * c.w_stride + s * 64)
                              : _mm512_setzero_si512();
        // inf / NaN: every exponent bit set.
        if (_mm512_cmpeq_epi16_mask(_mm512_and_si512(v, exp), exp) != 0) return false;
        if (!whole) _mm512_store_si512(a_buf + 16 * r, v);
      }
    }
    if (whole) {
      _tile_loadd(4, src + s * 64, static_cast<int64_t>(c.w_stride));
    } else {
      _tile_loadd(4, a_buf, 64);
    }
    return true;
  } else {
    for (int64_t r = 0; r < kT; ++r) {
      __m512i q[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
      if (r0 + r < c.n_rows) {
        __m512 lo, hi;
        if constexpr (W == Weights::kF16) {
          const auto* row = reinterpret_cast<const uint16_t*>(src + r * c.w_stride);
          LoadF16x32(row + s * kK, valid, &lo, &hi);
        } else {
          const auto* row = reinterpret_cast<const float*>(src + r * c.w_stride);
          LoadF32x32(row + s * kK, valid, &lo, &hi);
        }
        if (!SplitParts<2, W == Weights::kF32>(lo, hi, q)) return false;
      }
      _mm512_store_si512(a_buf + 16 * r, q[0]);
      _mm512_store_si512(a_buf + 256 + 16 * r, q[1]);
    }
    _tile_loadd(4, a_buf, 64);
    _tile_loadd(5, a_buf + 256, 64);
    return true;
  }
}

// c (16 rows x 16 tokens) -> y[t * ldy + r0 + r] for the valid rows and tokens.
void StoreTransposed(const float* c, int64_t rows, int64_t toks, float* y, int64_t ldy) {
  __m512i v[16];
  for (int i = 0; i < 16; ++i) v[i] = _mm512_load_si512(c + 16 * i);
  Transpose16(v);
  const __mmask16 m = rows >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << rows) - 1);
  for (int64_t t = 0; t < toks; ++t) {
    _mm512_mask_storeu_ps(y + t * ldy, m, _mm512_castsi512_ps(v[t]));
  }
}

// The product of every 16-row group with the token tiles [tb, tb + nt) over K steps [s0, s1)
// (their B parts in b), C tiles kept in cbuf ([groups x 4 x 256] f32; nullptr when K is one
// chunk) between chunks and stored to y after the last. False: a weight is not finite.
template <Weights W>
bool ChunkProduct(const Call& c, int64_t tb, int64_t nt, int64_t s0, int64_t s1, const uint32_t* b,
                  float* cbuf) {
  using S = Scheme<W>;
  alignas(64) uint32_t a_buf[2 * 256];
  alignas(64) float ctile[256];
  const bool first = s0 == 0, last = s1 == c.n_steps;
  for (int64_t r0 = 0; r0 < c.n_rows; r0 += kT) {
    float* cg = cbuf == nullptr ? nullptr : cbuf + (r0 / kT) * kBatchTiles * 256;
    // Tile registers are named by immediates: one block per C tile.
#define MOESPLIT_EACH_C_TILE(M) M(0) M(1) M(2) M(3)
#define MOESPLIT_C_BEGIN(J)             \
  if (J < nt) {                         \
    if (first) {                        \
      _tile_zero(J);                    \
    } else {                            \
      _tile_loadd(J, cg + J * 256, 64); \
    }                                   \
  }
    MOESPLIT_EACH_C_TILE(MOESPLIT_C_BEGIN)
#undef MOESPLIT_C_BEGIN
    for (int64_t s = s0; s < s1; ++s) {
      if (!LoadA<W>(c, r0, s, tb == 0, a_buf)) return false;
#define MOESPLIT_STEP(J)                                                    \
  if (J < nt) {                                                             \
    const uint32_t* bj = b + (J * (s1 - s0) + (s - s0)) * S::kBParts * 256; \
    for (int p = 0; p < S::kBParts; ++p) {                                  \
      _tile_loadd(6, bj + p * 256, 64);                                     \
      _tile_dpbf16ps(J, 4, 6);                                              \
      if (S::kAParts == 2 && p < S::kLoProducts) _tile_dpbf16ps(J, 5, 6);   \
    }                                                                       \
  }
      MOESPLIT_EACH_C_TILE(MOESPLIT_STEP)
#undef MOESPLIT_STEP
    }
    const int64_t rows = c.n_rows - r0 < kT ? c.n_rows - r0 : kT;
#define MOESPLIT_C_END(J)                                               \
  if (J < nt) {                                                         \
    if (last) {                                                         \
      _tile_stored(J, ctile, 64);                                       \
      const int64_t t0 = (tb + J) * kT;                                 \
      const int64_t toks = c.n_tok - t0 < kT ? c.n_tok - t0 : kT;       \
      StoreTransposed(ctile, rows, toks, c.y + t0 * c.ldy + r0, c.ldy); \
    } else {                                                            \
      _tile_stored(J, cg + J * 256, 64);                                \
    }                                                                   \
  }
    MOESPLIT_EACH_C_TILE(MOESPLIT_C_END)
#undef MOESPLIT_C_END
#undef MOESPLIT_EACH_C_TILE
  }
  return true;
}

// 64-byte aligned storage of `dwords` 4-byte values, left uninitialized (every value is written
// before it is read; zeroing the 384 KiB of B parts cost 15% of a BF16 prefill).
uint32_t* Aligned(std::unique_ptr<uint32_t[]>* v, size_t dwords) {
  *v = std::make_unique_for_overwrite<uint32_t[]>(dwords + 16);
  return reinterpret_cast<uint32_t*>((reinterpret_cast<uintptr_t>(v->get()) + 63) & ~uintptr_t{63});
}

// The tiled GEMM of weight type W; false (y partly written) when a value is not finite.
template <Weights W>
bool TiledGemm(const Call& c) {
  constexpr int P = Scheme<W>::kBParts;
  std::unique_ptr<uint32_t[]> b_storage, c_storage;
  // [4 tiles][32 steps][P parts][256] dwords: 384 KiB at P = 3.
  // [<= 4 tiles][<= 32 steps][P parts][256] dwords: 384 KiB at P = 3 (less for small calls).
  const int64_t tiles = std::min(kBatchTiles, c.n_tiles), steps = std::min(kChunkSteps, c.n_steps);
  uint32_t* b = Aligned(&b_storage, static_cast<size_t>(tiles * steps * P * 256));
  // [groups][4 tiles][256] f32: C between K chunks (4 KiB per group); none with one chunk.
  const int64_t groups = (c.n_rows + kT - 1) / kT;
  float* cbuf = c.n_steps <= kChunkSteps
                    ? nullptr
                    : reinterpret_cast<float*>(
                          Aligned(&c_storage, static_cast<size_t>(groups * kBatchTiles * 256)));
  const TileConfig cfg = BfConfig();
  _tile_loadconfig(&cfg);
  bool ok = true;
  for (int64_t tb = 0; ok && tb < c.n_tiles; tb += kBatchTiles) {
    const int64_t nt = c.n_tiles - tb < kBatchTiles ? c.n_tiles - tb : kBatchTiles;
    for (int64_t s0 = 0; ok && s0 < c.n_steps; s0 += kChunkSteps) {
      const int64_t s1 = c.n_steps - s0 < kChunkSteps ? c.n_steps : s0 + kChunkSteps;
      ok = PackTokens<P, W == Weights::kF32>(c, tb, nt, s0, s1, b) &&
           ChunkProduct<W>(c, tb, nt, s0, s1, b, cbuf);
    }
  }
  _tile_release();
  return ok;
}

// The AMX GEMM of weight type W, or `fallback` (the AVX-512 kernel) for small shapes and
// non-finite values.
template <Weights W, GemmFn fallback>
void GemmAmx(const void* w, size_t w_stride, int64_t n_rows, const void* a, size_t a_stride,
             int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  if (n_tok < kT || n_rows < kT || n < kK) {
    fallback(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
    return;
  }
  const Call c{static_cast<const uint8_t*>(w),
               w_stride,
               n_rows,
               static_cast<const uint8_t*>(a),
               a_stride,
               n_tok,
               n,
               y,
               ldy,
               (n + kK - 1) / kK,
               (n_tok + kT - 1) / kT};
  if (!TiledGemm<W>(c)) fallback(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}

}  // namespace

void AddAmxFloatKernels(GemvKernels* k) {
  k->f32_gemm_bf16x3 = GemmAmx<Weights::kF32, GemmF32_F32_Avx512>;
  TypeKernels& f16 = k->by_type[static_cast<size_t>(GgmlType::kF16)];
  f16.gemm = GemmAmx<Weights::kF16, GemmF16_F32_Avx512>;
  f16.self_blocking = true;
  TypeKernels& bf16 = k->by_type[static_cast<size_t>(GgmlType::kBF16)];
  bf16.gemm = GemmAmx<Weights::kBF16, GemmBF16_F32_Avx512>;
  bf16.self_blocking = true;
}

}  // namespace moesplit::gemv::internal
