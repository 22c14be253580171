// AMX tier: F32 x F32 GEMM (F32 weights, F32 activations) on AMX-BF16 tiles, for the products
// of CPU prefill that have no quantized weights: MLA's expanded keys and values against the
// queries and the softmax rows (attention over long prompts: 35% of a V3 prefill step at 2048
// tokens, PERFORMANCE.md (i)), the key / value expansion, F32 routers. Compiled with the AVX-512
// flags + -mavx512bf16 -mamx-tile -mamx-bf16 (cpu_kernels/gemv/float.cmake); reached through
// KernelsFor(IsaTier::kAmx).
//
// Precision: each f32 x is split into two bf16, x = hi + lo + e with hi = bf16(x) (|x - hi| <=
// 2^-9 |x|), lo = bf16(x - hi) (|e| <= 2^-18 |x|), and
//   w . a ~= w_hi . a_hi + w_hi . a_lo + w_lo . a_hi      (TDPBF16PS accumulates in f32)
// drops w_lo a_lo and the e terms: <= 3 x 2^-18 = 1.1e-5 of |w a| per product, so a result is
// within ~1.5e-5 of sum |w a| (f32 FMA: ~1e-7; llama.cpp's f16 K.Q: ~1e-3). Inputs whose hi is
// not finite (|x| above bf16's largest finite value, inf, NaN) send the call to the AVX-512
// kernel, which keeps IEEE semantics; bf16 has f32's exponent range, so nothing finite
// underflows except lo parts below 2^-126 (flushed: an absolute error below 2^-126 |a|).
//
// Roles: A = 16 weight rows x 32 values (row-major, converted per K step), B = 32 values x 16
// tokens in VNNI pairs (B row i = value pair i of each token: a 16 x 16 dword transpose of the
// token rows, built once per call and reused by every 16-row group), C = 16 rows x 16 tokens
// (f32), transposed on the way out to y[t * ldy + r]. Per 16 x 16 x 32: 3 TDPBF16PS (16 x 16 x
// 32 = 8192 multiply-adds each) against 512 FMA instructions of 16 lanes at the same work.
// Fewer than 16 tokens or rows, or fewer than 32 values, take the AVX-512 kernel.
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "cpu_kernels/gemv/amx_tile_config.h"
#include "cpu_kernels/gemv/gemv_internal.h"

namespace moesplit::gemv::internal {
namespace {

constexpr int64_t kT = 16;  // weight rows per A / C tile, tokens per B / C tile
constexpr int64_t kK = 32;  // values per K step (64 bytes of bf16 in an A row)

// Tiles 0-3: C of up to four token tiles; 4 / 5: A hi / lo; 6: B (hi, then lo).
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

// 32 values at x (the first n_valid, zeros after) -> bf16 hi / lo (32 each, as 16 dwords);
// returns false when a hi is not finite.
inline bool Split32(const float* x, int64_t n_valid, __m512i* hi, __m512i* lo) {
  const __mmask16 m0 = n_valid >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << n_valid) - 1);
  const int64_t n1 = n_valid - 16;
  const __mmask16 m1 = n1 >= 16 ? 0xFFFF : n1 <= 0 ? 0 : static_cast<__mmask16>((1u << n1) - 1);
  const __m512 a = _mm512_maskz_loadu_ps(m0, x), b = _mm512_maskz_loadu_ps(m1, x + 16);
  const __m512i h = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(b, a));  // [a 0..15, b 16..31]
  // hi back to f32: a bf16 is the upper half of an f32.
  const __m512 ha =
      _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(h)), 16));
  const __m512 hb = _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(h, 1)), 16));
  // fpclass 0x99: QNaN | +inf | -inf | SNaN.
  if ((_mm512_fpclass_ps_mask(ha, 0x99) | _mm512_fpclass_ps_mask(hb, 0x99)) != 0) return false;
  *hi = h;
  *lo = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(_mm512_sub_ps(b, hb), _mm512_sub_ps(a, ha)));
  return true;
}

// The tokens in B form: for token tile tt and K step s, 2 x 16 x 16 dwords (hi, then lo), row i =
// value pair i of each of the 16 tokens. Missing tokens and values are zero. False: a value's hi
// is not finite.
bool PackTokens(const uint8_t* a, size_t a_stride, int64_t n_tok, int64_t n, int64_t n_steps,
                uint32_t* b) {
  for (int64_t t0 = 0; t0 < n_tok; t0 += kT) {
    for (int64_t s = 0; s < n_steps; ++s) {
      __m512i hi[16], lo[16];
      for (int64_t t = 0; t < kT; ++t) {
        if (t0 + t >= n_tok) {
          hi[t] = lo[t] = _mm512_setzero_si512();
          continue;
        }
        const auto* row = reinterpret_cast<const float*>(a + (t0 + t) * a_stride);
        if (!Split32(row + s * kK, n - s * kK, &hi[t], &lo[t])) return false;
      }
      Transpose16(hi);
      Transpose16(lo);
      uint32_t* dst = b + ((t0 / kT) * n_steps + s) * 2 * 256;
      for (int i = 0; i < 16; ++i) {
        _mm512_store_si512(dst + 16 * i, hi[i]);
        _mm512_store_si512(dst + 256 + 16 * i, lo[i]);
      }
    }
  }
  return true;
}

// A hi / lo (16 rows x 32 bf16 each, 1 KiB) of rows r0 .. r0 + 15 (zeros past n_rows), K step s.
bool PackRows(const uint8_t* w, size_t w_stride, int64_t n_rows, int64_t r0, int64_t n, int64_t s,
              uint32_t* a_hi, uint32_t* a_lo) {
  for (int64_t r = 0; r < kT; ++r) {
    __m512i hi = _mm512_setzero_si512(), lo = _mm512_setzero_si512();
    if (r0 + r < n_rows) {
      const auto* row = reinterpret_cast<const float*>(w + (r0 + r) * w_stride);
      if (!Split32(row + s * kK, n - s * kK, &hi, &lo)) return false;
    }
    _mm512_store_si512(a_hi + 16 * r, hi);
    _mm512_store_si512(a_lo + 16 * r, lo);
  }
  return true;
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

// The tiled product once the tokens are packed (b); false if a weight is not finite in bf16.
// Per 16-row group and batch of up to 4 token tiles: C tiles 0-3 over every K step.
bool TiledProduct(const uint8_t* w, size_t w_stride, int64_t n_rows, int64_t n_tok, int64_t n,
                  int64_t n_steps, const uint32_t* b, float* y, int64_t ldy) {
  alignas(64) uint32_t a_hi[256], a_lo[256];
  alignas(64) float c[16 * 16];
  const int64_t n_tiles = (n_tok + kT - 1) / kT;
  for (int64_t r0 = 0; r0 < n_rows; r0 += kT) {
    for (int64_t tb = 0; tb < n_tiles; tb += 4) {
      const int64_t nt = n_tiles - tb < 4 ? n_tiles - tb : 4;
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      for (int64_t s = 0; s < n_steps; ++s) {
        if (!PackRows(w, w_stride, n_rows, r0, n, s, a_hi, a_lo)) return false;
        _tile_loadd(4, a_hi, 64);
        _tile_loadd(5, a_lo, 64);
        // Tile registers are named by immediates: one block per C tile.
#define MOESPLIT_BF16X3(J)                                       \
  if (J < nt) {                                                  \
    const uint32_t* bj = b + ((tb + J) * n_steps + s) * 2 * 256; \
    _tile_loadd(6, bj, 64);                                      \
    _tile_dpbf16ps(J, 4, 6);                                     \
    _tile_dpbf16ps(J, 5, 6);                                     \
    _tile_loadd(6, bj + 256, 64);                                \
    _tile_dpbf16ps(J, 4, 6);                                     \
  }
        MOESPLIT_BF16X3(0)
        MOESPLIT_BF16X3(1)
        MOESPLIT_BF16X3(2)
        MOESPLIT_BF16X3(3)
#undef MOESPLIT_BF16X3
      }
      const int64_t rows = n_rows - r0 < kT ? n_rows - r0 : kT;
      for (int64_t j = 0; j < nt; ++j) {
        switch (j) {
          case 0:
            _tile_stored(0, c, 64);
            break;
          case 1:
            _tile_stored(1, c, 64);
            break;
          case 2:
            _tile_stored(2, c, 64);
            break;
          default:
            _tile_stored(3, c, 64);
            break;
        }
        const int64_t t0 = (tb + j) * kT;
        const int64_t toks = n_tok - t0 < kT ? n_tok - t0 : kT;
        StoreTransposed(c, rows, toks, y + t0 * ldy + r0, ldy);
      }
    }
  }
  return true;
}

void GemmF32_F32_Amx(const void* w_ptr, size_t w_stride, int64_t n_rows, const void* a_ptr,
                     size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  if (n_tok < kT || n_rows < kT || n < kK) {
    GemmF32_F32_Avx512(w_ptr, w_stride, n_rows, a_ptr, a_stride, n_tok, n, y, ldy);
    return;
  }
  const auto* w = static_cast<const uint8_t*>(w_ptr);
  const auto* a = static_cast<const uint8_t*>(a_ptr);
  const int64_t n_steps = (n + kK - 1) / kK, n_tiles = (n_tok + kT - 1) / kT;
  // [n_tiles][n_steps][hi, lo][16 x 16] dwords: 4 bytes per token and value (2 KiB per token
  // tile and K step; 16 tokens x 4096 values = 256 KiB).
  std::vector<uint32_t> b_storage(static_cast<size_t>(n_tiles * n_steps * 512) + 16);
  auto* b = reinterpret_cast<uint32_t*>((reinterpret_cast<uintptr_t>(b_storage.data()) + 63) &
                                        ~uintptr_t{63});
  bool ok = PackTokens(a, a_stride, n_tok, n, n_steps, b);
  if (ok) {
    const TileConfig cfg = BfConfig();
    _tile_loadconfig(&cfg);
    ok = TiledProduct(w, w_stride, n_rows, n_tok, n, n_steps, b, y, ldy);
    _tile_release();
  }
  if (!ok) GemmF32_F32_Avx512(w_ptr, w_stride, n_rows, a_ptr, a_stride, n_tok, n, y, ldy);
}

}  // namespace

void AddAmxFloatKernels(GemvKernels* k) { k->f32_gemm_bf16x3 = GemmF32_F32_Amx; }

}  // namespace moesplit::gemv::internal
