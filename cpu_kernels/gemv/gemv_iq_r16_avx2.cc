// IQ2_XXS weights in their 16-row layout kIQ2_XXS_R16 (cpu_kernels/quant/repack.h) x Q8_K
// activations, AVX2 + FMA tier (also the AVX-512 tier's, and the VNNI tier's on CPUs without
// VBMI / GFNI). Compiled with MOESPLIT_FLAGS_AVX2 (gemv/kquants.cmake). The integer per (row,
// block, token) is the scalar dot's (gemv_iq_scalar.cc):
//   I = sum_j (2 s_j + 1) sum_i grid_i sign_i q8_i,   y = sum_blocks I d d_a / 8.
//
// Why: the file layout's AVX2 tile (gemv_iq_avx2.cc) decodes IQ2_XXS at ~3.8 GB/s per core (Zen 4,
// bench_gemv 2048 x 7168, hot = cold: compute-bound), a tenth of what a core can read. Per 32
// values of one row it fetches 4 grid entries and 4 sign entries (kIqSignMask, 8 bytes each) by
// scalar loads and vector inserts, extracts 8 indices with ~18 scalar ops, broadcasts the
// scale, and reduces the row across lanes. The 16-row layout stores whole sign bytes (the file's
// 7-bit index plus its parity bit), so here, per 32 values of one row (1-4 tokens):
//   G  = the 4 grid entries of q[j] bytes 4 r .. 4 r + 3 (byte loads of the indices, 8-byte
//        loads of the entries: levels 8 / 25 / 43 in value order)
//   M  = 0xFF where the value is negative: the 4 sign bytes broadcast, spread to their 8 values'
//        bytes (vpshufb), tested against each value's bit (kIq2R16SignBit): and + cmpeq
//   P  = maddubs(G, blend(a, -a, M))            [16] i16, |pair| <= 2 x 43 x 127   per token
//   I_r += madd(P, 2 s_j + 1)                   [8] i32 (lanes of one row; the scale vector
//                                               read from a 16-entry table)    per token
// and per block the 8 rows' I_r reduce across lanes into one vector whose lane r is row r (6
// vphaddd, 2 permutes, 1 add per 8 rows and 256 values): acc = fma(cvt(I), d_w d_a / 8, acc).
// ~13 vector ops per 32 values, row and token where the tile takes ~17 and ~18 scalar ones.
// The activations keep the file's value order (the grid entries' bytes are in value order).
// From wide::kMinTokens tokens on, the wide path (gemv_avx2_wide.inc) decodes each block once
// per 64 tokens from the groups (Iq2XxsR16Fmt::DecodeSet: the same G and M per row, u = 43 +
// the signed level).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cpu_kernels/gemv/gemv_internal.h"
#include "cpu_kernels/gemv/gemv_isa_common.h"
#include "cpu_kernels/quant/blocks.h"
#include "cpu_kernels/quant/iq_grids.h"
#include "cpu_kernels/quant/repack.h"

namespace moesplit::gemv::internal {
namespace {

#include "cpu_kernels/gemv/gemv_avx2_tile.inc"
#include "cpu_kernels/gemv/gemv_avx2_wide.inc"

using quant::BlockIQ2_XXS_R16;
using quant::BlockQ8_K;
using quant::kR16Rows;
namespace qi = quant::internal;

#define IQ_INLINE [[gnu::always_inline]] inline

constexpr int kPassRows = 8;  // rows per pass over a block: one i32 lane each once reduced

// [32] u8 levels of one row's 4 groups (indices q[0..3]): byte 8 g + k = value k of group g.
IQ_INLINE __m256i GridRow(const uint8_t* q) {
  const uint64_t* grid = qi::kIq2XxsGrid;
  const __m128i lo =
      _mm_set_epi64x(static_cast<int64_t>(grid[q[1]]), static_cast<int64_t>(grid[q[0]]));
  const __m128i hi =
      _mm_set_epi64x(static_cast<int64_t>(grid[q[3]]), static_cast<int64_t>(grid[q[2]]));
  return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
}

// The constants of the sign expansion: vpshufb control taking byte g of a broadcast dword to
// bytes 8 g .. 8 g + 7 (groups 0-1 in the low 128-bit half, 2-3 in the high), and the bit of
// each value k within its group's sign byte.
struct SignConsts {
  __m256i spread;  // [32] u8
  __m256i bits;    // [32] u8: 1 << kIq2R16SignBit[k] at byte 8 g + k
};
IQ_INLINE SignConsts MakeSignConsts() {
  alignas(32) uint8_t spread[32], bits[32];
  for (int i = 0; i < 32; ++i) {
    spread[i] = static_cast<uint8_t>(i / 8);  // within each half: groups (i / 8) % 2 + 2 (i / 16)
    bits[i] = static_cast<uint8_t>(1u << quant::kIq2R16SignBit[i % 8]);
  }
  return {_mm256_load_si256(reinterpret_cast<const __m256i*>(spread)),
          _mm256_load_si256(reinterpret_cast<const __m256i*>(bits))};
}

// [32] bytes 0xFF where value 8 g + k of row `row`'s sub-block j is negative (its 4 sign bytes
// broadcast, spread to their values, tested against each value's bit), else 0.
IQ_INLINE __m256i NegMask(const BlockIQ2_XXS_R16& w, int j, int row, const SignConsts& c) {
  const __m256i sb = _mm256_set1_epi32(static_cast<int32_t>(LoadU32(w.Sgn(j) + 4 * row)));
  return _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(sb, c.spread), c.bits), c.bits);
}

// Row `row`'s 4-bit scale s_j of sub-block j.
IQ_INLINE int Scale4(const BlockIQ2_XXS_R16& w, int j, int row) {
  return (w.sc[j / 2][row] >> (4 * (j % 2))) & 15;
}

// Row k = 2 k + 1 in all 16 i16 lanes: madd's scale operand read from memory (L1), where a
// broadcast from a general register took two more vector ops per 32 values.
struct ScaleTable {
  alignas(32) int16_t v[16][16];  // [4-bit scale s][lane] 2 s + 1
};
constexpr ScaleTable MakeScaleTable() {
  ScaleTable t{};
  for (int s = 0; s < 16; ++s) {
    for (int l = 0; l < 16; ++l) t.v[s][l] = static_cast<int16_t>(2 * s + 1);
  }
  return t;
}
constexpr ScaleTable kScaleTable = MakeScaleTable();

// [8] i32: lane r = the sum of the 8 lanes of x[r].
IQ_INLINE __m256i ReduceRows(const __m256i (&x)[kPassRows]) {
  const __m256i t0 = _mm256_hadd_epi32(x[0], x[1]), t1 = _mm256_hadd_epi32(x[2], x[3]);
  const __m256i t2 = _mm256_hadd_epi32(x[4], x[5]), t3 = _mm256_hadd_epi32(x[6], x[7]);
  // u0 half h: rows 0-3's sums of lanes 4 h .. 4 h + 3; u1 the same for rows 4-7
  const __m256i u0 = _mm256_hadd_epi32(t0, t1), u1 = _mm256_hadd_epi32(t2, t3);
  return _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20),
                          _mm256_permute2x128_si256(u0, u1, 0x31));
}

// Row `row` of block w, T tokens (aq[t]: token t's 256 quants of the block): rs[t][r] = the
// row's [8] i32 partial sums of its block integer.
template <int T>
IQ_INLINE void RowSums(const BlockIQ2_XXS_R16& w, const int8_t* const* aq, int row, int r,
                       const SignConsts& c, __m256i (&rs)[T][kPassRows]) {
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    const __m256i g = GridRow(w.Q(j) + 4 * row);
    const __m256i neg = NegMask(w, j, row, c);
    const __m256i sc =
        _mm256_load_si256(reinterpret_cast<const __m256i*>(kScaleTable.v[Scale4(w, j, row)]));
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(aq[t] + 32 * j));
      const __m256i nav = _mm256_sub_epi8(_mm256_setzero_si256(), av);  // |q8| <= 127: exact
      const __m256i p = _mm256_maddubs_epi16(g, _mm256_blendv_epi8(av, nav, neg));
      const __m256i x = _mm256_madd_epi16(p, sc);
      rs[t][r] = j == 0 ? x : _mm256_add_epi32(rs[t][r], x);  // |.| <= 8 x 31 x 2 x 10922 x 8
    }
  }
}

// Rows 8 h .. 8 h + 7 of block w, T tokens: isum[t] lane r = row 8 h + r's block integer.
// Row-major (one row's T accumulators live at a time): with the sub-blocks outer, the 8 rows'
// accumulators and the working set did not fit the 16 ymm registers and spilled every add. For
// one token the rows are unrolled; for several, not (unrolled, GCC's schedule of 8 rows x T
// tokens spilled: 4 tokens ran 0.66x the file layout's 4-token tile).
template <int T>
IQ_INLINE void BlockPass(const BlockIQ2_XXS_R16& w, const int8_t* const* aq, int h,
                         const SignConsts& c, __m256i (&isum)[T]) {
  __m256i rs[T][kPassRows];  // [token][row] x [8] i32
  if constexpr (T == 1) {    // RowSums<1>'s order of the same ops measured 0.93x (decode)
#pragma GCC unroll 8
    for (int r = 0; r < kPassRows; ++r) {
      const int row = kPassRows * h + r;
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(aq[0] + 32 * j));
        const __m256i nav = _mm256_sub_epi8(_mm256_setzero_si256(), av);
        const __m256i g = GridRow(w.Q(j) + 4 * row);
        const __m256i neg = NegMask(w, j, row, c);
        const __m256i p = _mm256_maddubs_epi16(g, _mm256_blendv_epi8(av, nav, neg));
        const int s = Scale4(w, j, row);
        const __m256i x = _mm256_madd_epi16(
            p, _mm256_load_si256(reinterpret_cast<const __m256i*>(kScaleTable.v[s])));
        rs[0][r] = j == 0 ? x : _mm256_add_epi32(rs[0][r], x);
      }
    }
  } else {
#pragma GCC unroll 1
    for (int r = 0; r < kPassRows; ++r) RowSums<T>(w, aq, kPassRows * h + r, r, c, rs);
  }
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) isum[t] = ReduceRows(rs[t]);
}

// y[t * ldy + 0 .. 16) = the group's rows . token t (a[t]: its nb Q8_K blocks), T tokens.
template <int T>
void Iq2XxsR16Group(const uint8_t* g, int64_t nb, const BlockQ8_K* const* a, uintptr_t pf_end,
                    float* y, int64_t ldy) {
  const auto* dw = reinterpret_cast<const uint16_t*>(g);  // [nb][16] f16
  const auto* pay = reinterpret_cast<const BlockIQ2_XXS_R16*>(g + nb * kR16Rows * 2);
  const SignConsts c = MakeSignConsts();
  __m256 acc[T][2];  // [token][half] x [8] f32
  for (int t = 0; t < T; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const auto* next = reinterpret_cast<const uint8_t*>(pay + b) + avx2_wide::kR16PrefetchBytes;
    avx2_wide::PrefetchLinesL2(next, sizeof(BlockIQ2_XXS_R16), pf_end);
    const int8_t* aq[T];
    for (int t = 0; t < T; ++t) aq[t] = a[t][b].qs;
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m256i isum[T];
      BlockPass<T>(pay[b], aq, h, c, isum);
      avx2_wide::AccumulateHalf<T>(isum, dw + b * kR16Rows + 8 * h, 0.125f, a, b, h, acc);
    }
  }
  avx2_wide::StoreGroup<T>(acc, y, ldy);
}

// T tokens (rows a_stride apart) through every group.
template <int T>
void Iq2XxsR16Tokens(const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* a,
                     size_t a_stride, int64_t nb, float* y, int64_t ldy) {
  const BlockQ8_K* at[T];
  for (int t = 0; t < T; ++t) at[t] = reinterpret_cast<const BlockQ8_K*>(a + t * a_stride);
  const uintptr_t pf_end = PrefetchEnd(w, n_rows, w_stride);
  for (int64_t r0 = 0; r0 < n_rows; r0 += kR16Rows) {
    Iq2XxsR16Group<T>(w + static_cast<size_t>(r0) * w_stride, nb, at, pf_end, y + r0, ldy);
  }
}

// The wide path's view of the layout (wide::TokenBlock takes a format with kR16): IQ2_XXS's
// traits (signed levels up to 43, a scale per 32 values), blocks of 16 rows.
struct Iq2XxsR16Fmt : FmtTraits {
  using Block = BlockIQ2_XXS_R16;
  static constexpr bool kR16 = true;
  static constexpr bool kSigned = true;
  static constexpr int kMaxQuant = 43;  // the grid's largest level
  // Blocks [b0, b0 + nbk) of the group at g: their d's, then their payloads.
  static void PrefetchChunk(const uint8_t* g, int64_t nb, int64_t b0, int64_t nbk) {
    avx2_wide::PrefetchGroupChunk(g, nb, b0, nbk, kR16Rows * 2, sizeof(Block));
  }
  // Set s (rows 8 s .. 8 s + 7) of block b of the group at g -> out: u = 43 + the signed level,
  // the 16-value groups 2 j, 2 j + 1 both with scale 2 s_j + 1 and offset -43 (2 s_j + 1).
  static void DecodeSet(const uint8_t* g, int64_t nb, int s, int64_t b, wide::SetBlock* out) {
    const auto* dw = reinterpret_cast<const uint16_t*>(g) + b * kR16Rows;  // [16] f16
    const Block& w = reinterpret_cast<const Block*>(g + nb * kR16Rows * 2)[b];
    const SignConsts c = MakeSignConsts();
    alignas(32) uint8_t u[avx2_wide::kSetRows][256];  // [row][value]
    alignas(32) int16_t sc[avx2_wide::kSetRows][16];  // [row][16-value group] 2 s_j + 1
    alignas(32) int16_t o[avx2_wide::kSetRows][16];   // [row][16-value group] -43 (2 s_j + 1)
    for (int r = 0; r < avx2_wide::kSetRows; ++r) {
      const int row = avx2_wide::kSetRows * s + r;
      for (int j = 0; j < 8; ++j) {
        const __m256i gr = GridRow(w.Q(j) + 4 * row);
        const __m256i neg = NegMask(w, j, row, c);
        const __m256i v = _mm256_sign_epi8(gr, _mm256_or_si256(neg, _mm256_set1_epi8(1)));
        _mm256_store_si256(reinterpret_cast<__m256i*>(&u[r][32 * j]),
                           _mm256_add_epi8(v, _mm256_set1_epi8(kMaxQuant)));
        const int k = 2 * Scale4(w, j, row) + 1;
        sc[r][2 * j] = sc[r][2 * j + 1] = static_cast<int16_t>(k);
        o[r][2 * j] = o[r][2 * j + 1] = static_cast<int16_t>(-kMaxQuant * k);
      }
      out->d[r] = 0.125f * _cvtsh_ss(dw[row]);
    }
    wide::InterleaveSet<false>(u, sc, o, nullptr, out);
  }
};

}  // namespace

// One token per pass up to 4, the wide path from wide::kMinTokens (but for a last token block
// under it, which the passes take).
void GemmIQ2XXSR16_Q8K_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                            size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* ab = static_cast<const uint8_t*>(a);
  const int64_t nb = n / quant::kQkK;
  int64_t t = avx2_wide::WideTokens(n_tok, wide::kMinTokens, wide::kTokBlock);
  if (t > 0) wide::WideGemm<Iq2XxsR16Fmt>(wb, w_stride, n_rows, ab, a_stride, t, n, y, ldy);
  for (; t + 4 <= n_tok; t += 4) {
    Iq2XxsR16Tokens<4>(wb, w_stride, n_rows, ab + t * a_stride, a_stride, nb, y + t * ldy, ldy);
  }
  const uint8_t* at = ab + t * a_stride;
  float* yt = y + t * ldy;
  switch (n_tok - t) {
    case 3:
      Iq2XxsR16Tokens<3>(wb, w_stride, n_rows, at, a_stride, nb, yt, ldy);
      break;
    case 2:
      Iq2XxsR16Tokens<2>(wb, w_stride, n_rows, at, a_stride, nb, yt, ldy);
      break;
    case 1:
      Iq2XxsR16Tokens<1>(wb, w_stride, n_rows, at, a_stride, nb, yt, ldy);
      break;
    default:
      break;
  }
}

#undef IQ_INLINE
#undef MOESPLIT_KQ_INLINE

}  // namespace moesplit::gemv::internal
