// IQ2_XXS / IQ1_S / IQ1_M weights x Q8_K activations, AVX2 + FMA tier (also the AVX-512 tier's,
// and the VNNI tier's on CPUs without VBMI). Compiled with MOESPLIT_FLAGS_AVX2
// (gemv/kquants.cmake). The integers per block are the scalar dot's (gemv_iq_scalar.cc). Each
// type is a format of the AVX2 token tile (gemv_avx2_tile.inc): piece j is sub-block j.
//
// Per sub-block of 32 values, the four 8-byte grid entries come from scalar loads
// (kIq2XxsGrid: 2 KB; kIq1SGrid: 16 KB, both L1/L2-resident) into one ymm:
//   IQ2_XXS: m = grid bytes (8 / 25 / 43), a' = a negated where the sign bit is set
//            (kIqSignMask bytes), p = maddubs(m, a')  [16] i16, |pair| <= 2 * 43 * 127
//   IQ1:     u = 8 grid + 16 + 2 [delta > 0] in [8, 26] (vpshufb of grid & 3, + 2 per group),
//            p = maddubs(u, a); u - 17 = 8 (grid + delta), the -17 is the block integer's
//            start, -17 sum_h (2 s_h + 1) bsum_h (the Q8_K bsums are the 16-value sums)
//   s += madd(p, 2 s + 1 per 16 values)   [8] i32
// and once per block acc += cvt(s) * d * d_a / 8.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cpu_kernels/gemv/gemv_internal.h"
#include "cpu_kernels/gemv/gemv_isa_common.h"
#include "cpu_kernels/gemv/iq_sign_masks.h"
#include "cpu_kernels/quant/blocks.h"
#include "cpu_kernels/quant/blocks_iq.h"
#include "cpu_kernels/quant/iq_grids.h"

namespace moesplit::gemv::internal {
namespace {

#include "cpu_kernels/gemv/gemv_avx2_tile.inc"
#include "cpu_kernels/gemv/gemv_avx2_wide.inc"

using quant::BlockIQ1_M;
using quant::BlockIQ1_S;
using quant::BlockIQ2_XXS;
using quant::BlockQ8_K;
using quant::kQkK;
namespace qi = quant::internal;

#define IQ_INLINE [[gnu::always_inline]] inline

// u = 8 g + 16 + 2 pos for the grid bytes g in {-1, 0, 1} of four groups: vpshufb of g & 3
// ({0, 1, -1} -> 16, 24, 8), plus `plus2` (0x02 bytes in the groups whose delta is positive).
IQ_INLINE __m256i Iq1Levels(__m256i g, __m256i plus2) {
  const __m256i table = _mm256_setr_epi8(16, 24, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  //
                                         16, 24, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm256_add_epi8(_mm256_shuffle_epi8(table, _mm256_and_si256(g, _mm256_set1_epi8(3))),
                         plus2);
}

// ---------------------------------------------------------------------------------------------
// IQ2_XXS and IQ1_S as formats of the AVX2 token tile (gemv_avx2_tile.inc): piece p is
// sub-block p (32 values, one scale), its four grid entries fetched once per (row, block) and
// used by every token of the tile.
// ---------------------------------------------------------------------------------------------

struct IqScalesPrep {
  __m256i sc;     // [16] i16: the 8 sub-block multipliers 2 s_j + 1 in both halves (PickWord)
  __m256i binit;  // [16] i16: -17 (2 s_j + 1) per 16 values (IQ1_S's offset)
};

// IQ2_XXS: w = d / 8 (2 s_j + 1) m sign, m the grid bytes (8 / 25 / 43); magnitudes m and the
// activations negated where the sign bit is set (|pair| <= 2 * 43 * 127). The scales are read
// per piece (scalar work, off the vector ports), not unpacked into a register up front.
struct Iq2XxsL {
  using Block = BlockIQ2_XXS;
  static constexpr float kD = 0.125f;
  static constexpr int kMaxMag = 43;  // the grid's largest magnitude
  static MOESPLIT_KQ_INLINE void Sub(const Block& w, int j, __m256i* m, __m256i* neg) {
    const uint32_t idx = LoadU32(&w.qs[4 * j]), aux = LoadU32(&w.qs[4 * j + 2]);
    *m = Grid4(qi::kIq2XxsGrid, idx & 0xFF, (idx >> 8) & 0xFF, (idx >> 16) & 0xFF, idx >> 24);
    *neg = Grid4(kIqSignMask.v, aux & 127, (aux >> 7) & 127, (aux >> 14) & 127,
                 (aux >> 21) & 127);  // 0xFF where negative
  }
  static MOESPLIT_KQ_INLINE __m256i Scale(const Block& w, int j) {
    return _mm256_set1_epi16(static_cast<int16_t>(2 * (LoadU32(&w.qs[4 * j + 2]) >> 28) + 1));
  }
};
using IQ2XXSFmt = LatticeFmt<Iq2XxsL>;

// IQ1_S: u = 8 grid + 16 + 2 [delta > 0] in [8, 26] (Iq1Levels), w = d / 8 (2 s_j + 1)(u - 17);
// the -17 is I's start, -17 sum_h (2 s_h + 1) bsum_h (|lane| <= 2 * 17 * 15 * 2032 after madd).
struct IQ1SFmt : FmtTraits {
  using Block = BlockIQ1_S;
  static constexpr int kMaxQuant = 26;
  using Prep = IqScalesPrep;
  static constexpr bool kBsumInit = true;
  static MOESPLIT_KQ_INLINE float D(const uint8_t* blk) {
    return 0.125f * _cvtsh_ss(reinterpret_cast<const Block*>(blk)->d);
  }
  static MOESPLIT_KQ_INLINE void Prepare(const uint8_t* blk, Prep* p) {
    const auto& w = *reinterpret_cast<const Block*>(blk);
    // qh[j] >> 12 & 7 = s_j for the 8 words: 2 s_j + 1 as [8] i16, then per 16 values
    const __m128i qh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.qh));
    const __m128i sc =
        _mm_or_si128(_mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(qh, 12), _mm_set1_epi16(7)), 1),
                     _mm_set1_epi16(1));
    p->sc = _mm256_broadcastsi128_si256(sc);
    const __m256i sc16 = _mm256_cvtepu16_epi32(sc);  // [8] i32 lanes j: (sc_j, 0) as i16 pairs
    const __m256i twice = _mm256_or_si256(sc16, _mm256_slli_epi32(sc16, 16));  // (sc_j, sc_j)
    p->binit = _mm256_mullo_epi16(twice, _mm256_set1_epi16(-17));
  }
  static MOESPLIT_KQ_INLINE __m256i Values(const uint8_t* blk, const Prep&, int j) {
    const auto& w = *reinterpret_cast<const Block*>(blk);
    const unsigned qh = w.qh[j];
    const int i0 = w.qs[4 * j] | (qh & 7) << 8, i1 = w.qs[4 * j + 1] | (qh >> 3 & 7) << 8;
    const int i2 = w.qs[4 * j + 2] | (qh >> 6 & 7) << 8, i3 = w.qs[4 * j + 3] | (qh >> 9 & 7) << 8;
    return Iq1Levels(Grid4(qi::kIq1SGrid, i0, i1, i2, i3), _mm256_set1_epi8(qh & 0x8000 ? 0 : 2));
  }
  static MOESPLIT_KQ_INLINE __m256i Scales(const Prep& pr, int j) {
    return _mm256_shuffle_epi8(pr.sc, PickWord(2 * j));
  }
};

struct IQ1MPrep {
  __m256i sc_lo, sc_hi;  // [16] i16: 2 s_h + 1 of halves 0..7 / 8..15 in both lanes (PairScales)
  __m256i binit;         // [16] i16: -17 (2 s_h + 1) per 16 values
};

// IQ1_M: as IQ1_S with a scale per 16 values (two per piece) and a delta sign per group of 8;
// d is spread over the top nibbles of the four scale words.
struct IQ1MFmt : FmtTraits {
  using Block = BlockIQ1_M;
  static constexpr int kMaxQuant = 26;
  using Prep = IQ1MPrep;
  static constexpr bool kBsumInit = true;
  static MOESPLIT_KQ_INLINE float D(const uint8_t* blk) {
    uint16_t sc[4];
    std::memcpy(sc, reinterpret_cast<const Block*>(blk)->scales, sizeof(sc));
    const uint16_t d_bits = static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) |
                                                  ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000));
    return 0.125f * _cvtsh_ss(d_bits);
  }
  static MOESPLIT_KQ_INLINE void Prepare(const uint8_t* blk, Prep* p) {
    const auto& w = *reinterpret_cast<const Block*>(blk);
    // half h = 4 m + i: scales word m bits 3i .. 3i + 2 (i < 4), as [16] i16 by per-lane shifts
    uint64_t sc64;
    std::memcpy(&sc64, w.scales, sizeof(sc64));
    const __m256i words = _mm256_cvtepu16_epi32(_mm_set_epi64x(0, static_cast<int64_t>(sc64)));
    // [8] i32 lanes m = 0..3 twice: lanes 0-3 give halves 4m + 0, 1 (shifts 0, 3), lanes 4-7
    // halves 4m + 2, 3 (shifts 6, 9), packed below as i16 pairs
    const __m256i w2 = _mm256_permute4x64_epi64(words, 0x44);  // words 0..3 in both lanes
    const __m256i lo = _mm256_srlv_epi32(w2, _mm256_setr_epi32(0, 0, 0, 0, 6, 6, 6, 6));
    const __m256i hi = _mm256_srlv_epi32(w2, _mm256_setr_epi32(3, 3, 3, 3, 9, 9, 9, 9));
    const __m256i m7 = _mm256_set1_epi32(7);
    // lane k: (s of half 4m + i, s of half 4m + i + 1) as an i16 pair
    const __m256i pair =
        _mm256_or_si256(_mm256_and_si256(lo, m7), _mm256_slli_epi32(_mm256_and_si256(hi, m7), 16));
    // pair lanes 0-3: halves (4m, 4m + 1), lanes 4-7: (4m + 2, 4m + 3); reorder to half order
    const __m256i ordered =
        _mm256_permutevar8x32_epi32(pair, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    const __m256i sw16 = _mm256_or_si256(_mm256_slli_epi16(ordered, 1), _mm256_set1_epi16(1));
    SplitScales(sw16, &p->sc_lo, &p->sc_hi);
    p->binit = _mm256_mullo_epi16(sw16, _mm256_set1_epi16(-17));
  }
  static MOESPLIT_KQ_INLINE __m256i Values(const uint8_t* blk, const Prep&, int j) {
    const auto& w = *reinterpret_cast<const Block*>(blk);
    const unsigned h0 = w.qh[2 * j], h1 = w.qh[2 * j + 1];  // nibbles of groups 0, 1 | 2, 3
    const int i0 = w.qs[4 * j] | (h0 & 7) << 8, i1 = w.qs[4 * j + 1] | (h0 >> 4 & 7) << 8;
    const int i2 = w.qs[4 * j + 2] | (h1 & 7) << 8, i3 = w.qs[4 * j + 3] | (h1 >> 4 & 7) << 8;
    auto plus2 = [](unsigned nibble_sign) -> int64_t {
      return nibble_sign ? 0 : 0x0202020202020202LL;
    };
    const __m256i p2 =
        _mm256_set_epi64x(plus2(h1 & 0x80), plus2(h1 & 0x08), plus2(h0 & 0x80), plus2(h0 & 0x08));
    return Iq1Levels(Grid4(qi::kIq1SGrid, i0, i1, i2, i3), p2);
  }
  static MOESPLIT_KQ_INLINE __m256i Scales(const Prep& pr, int j) {
    return PairScales(pr.sc_lo, pr.sc_hi, j);
  }
};

}  // namespace

float DotIQ2XXS_Q8K_Avx2(const void* w_row, const void* a_row, int64_t n) {
  return KQuantDot<Avx2Core, IQ2XXSFmt>(w_row, a_row, n);
}
float DotIQ1S_Q8K_Avx2(const void* w_row, const void* a_row, int64_t n) {
  return KQuantDot<Avx2Core, IQ1SFmt>(w_row, a_row, n);
}
void GemmIQ2XXS_Q8K_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                         size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  Avx2Gemm<IQ2XXSFmt>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}
void GemmIQ1S_Q8K_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                       size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  Avx2Gemm<IQ1SFmt>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}

float DotIQ1M_Q8K_Avx2(const void* w_row, const void* a_row, int64_t n) {
  return KQuantDot<Avx2Core, IQ1MFmt>(w_row, a_row, n);
}
void GemmIQ1M_Q8K_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                       size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  Avx2Gemm<IQ1MFmt>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}

#undef IQ_INLINE
#undef MOESPLIT_KQ_INLINE

}  // namespace moesplit::gemv::internal
