// IQ2_XXS / IQ1_S / IQ1_M weights x Q8_K activations, AVX-512 VNNI tier on CPUs with AVX-512
// VBMI. Compiled with MOESPLIT_FLAGS_AVX512VNNI + -mavx512vbmi (gemv/kquants.cmake); reached
// only through KernelsFor(IsaTier::kAvx512Vnni / kAmx) where DetectCpuFeatures().avx512vbmi.
// The integers per block are the scalar dot's (gemv_iq_scalar.cc).
//
// Why this shape: at ~2 bits/weight a core must turn each weight byte into ~4 products at
// memory speed, so the 8-byte grid entries are never fetched one by one. Each block is decoded
// once into 4 x 64 u8 "levels" (and, for IQ2_XXS, 4 sign masks), then every token of the tile
// (1-4) costs per 64 values: a load, [a masked negate,] vpmaddubsw and vpdpwssd.
//
// IQ2_XXS block (66 B): the 64 index bytes in one zmm, qword j = sub-block j.
//   f  = vpmultishiftqb(x): per qword bytes 0-3 = the 7-bit sign indices (bits 32 + 7g),
//        bytes 4-7 = the 4 grid indices
//   ks = vpermi2b(ksigns[128], f)            the sign bytes of the 32 groups
//   lo/hi = the 256-entry code tables (IqTables) by two vpermi2b + a blend on bit 7 each:
//        the grid entry as 8 2-bit level codes
//   per 64 values m: codes = vpermi2b(lo, hi) -> each qword the 16-bit code of its group;
//        vpmultishiftqb (offsets 0, 2, .., 14) & 3 -> level code per byte;
//        u = vpshufb({8, 25, 43}, code); neg = vptestmb(vpermb(ks) broadcast, bit k)
//   token: a' = a negated under neg (|a| <= 127: no overflow), p = maddubs(u, a') (|pair| <=
//        10922), s = dpwssd(s, p, 2 s_j + 1)
// IQ1_S (50 B) / IQ1_M (56 B): 32 11-bit indices as words (qs | high bits << 8), two 16-lane
//   gathers of the 16-bit code of each group (IqTables iq1_codes: grid + 1 per value),
//   per 64 values: vpermd (the group's code into its qword), vpmultishiftqb, ternlog with the
//   delta bit (4 where delta > 0), u = vpshufb({8, 16, 24, _, 10, 18, 26, _}, code) =
//   8 grid + 16 + 2 [delta > 0]; p = maddubs(u, a), s = dpwssd(s, p, 2 s_h + 1);
//   per block s -= 17 sum_h (2 s_h + 1) bsum_h (u - 17 = 8 (grid + delta)).
// Once per block and token: acc += cvt(s) * (d / 8) * d_a.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cpu_kernels/gemv/gemv_internal.h"
#include "cpu_kernels/quant/blocks.h"
#include "cpu_kernels/quant/blocks_iq.h"

namespace moesplit::gemv::internal {
namespace {

using quant::BlockQ8_K;
using quant::kQkK;

#define IQ_INLINE inline __attribute__((always_inline))

enum class Kind { kIQ2XXS, kIQ1S, kIQ1M };

template <Kind K>
constexpr int64_t kBlockBytes = K == Kind::kIQ2XXS ? 66 : K == Kind::kIQ1S ? 50 : 56;

// Permutation indices (constant data: nothing here runs at static-initialization time).
struct Index {
  uint8_t sign_bcast[4][64];  // IQ2: chunk m byte b -> its group's ksign byte, 8 j + g
  uint8_t code_pick[4][64];   // IQ2: chunk m qword q -> bytes 0 / 1 = lo / hi code of group q
  uint8_t bit_sel[64];        // 1 << (b % 8)
  uint16_t half_pick[4][32];  // chunk m word w -> half (16 values) 4 m + w / 8
  uint16_t half_sub[32];      // IQ2: word h -> scale word 4 (h / 2); IQ1_S: h / 2 via sub_word
  uint16_t sub_word[32];      // IQ1_S: word h -> h / 2
  uint16_t half_q[32];        // IQ1_M: word h -> h / 4 (its scale word)
  uint16_t half_shift[32];    // IQ1_M: 3 (h % 4)
  uint32_t iq1_pick[2][16];   // IQ1: dwords 2q, 2q + 1 = gathered group 8 p + q
  uint8_t delta_pick[4][64];  // IQ1: chunk m byte b -> byte 2 G of the delta words, G = 8m + b/8
  uint16_t grp_sub[32];       // IQ1_S: group G -> qh word G / 4
  uint16_t grp_shift_s[32];   // IQ1_S: 3 (G % 4)
  uint16_t grp_pair[32];      // IQ1_M: group G -> qh byte G / 2
  uint16_t grp_shift_m[32];   // IQ1_M: 4 (G % 2)
};

constexpr Index MakeIndex() {
  Index x{};
  for (int m = 0; m < 4; ++m) {
    for (int b = 0; b < 64; ++b) {
      const int q = b / 8, j = 2 * m + q / 4, g = q % 4;
      x.sign_bcast[m][b] = static_cast<uint8_t>(8 * j + g);
      const int p = 8 * j + 4 + g;
      x.code_pick[m][b] = static_cast<uint8_t>(b % 8 == 1 ? p + 64 : p);
      x.delta_pick[m][b] = static_cast<uint8_t>(2 * (8 * m + q));
    }
    for (int w = 0; w < 32; ++w) x.half_pick[m][w] = static_cast<uint16_t>(4 * m + w / 8);
  }
  for (int b = 0; b < 64; ++b) x.bit_sel[b] = static_cast<uint8_t>(1 << (b % 8));
  for (int h = 0; h < 32; ++h) {
    x.half_sub[h] = static_cast<uint16_t>(h < 16 ? 4 * (h / 2) : 0);
    x.sub_word[h] = static_cast<uint16_t>(h < 16 ? h / 2 : 0);
    x.half_q[h] = static_cast<uint16_t>(h < 16 ? h / 4 : 0);
    x.half_shift[h] = static_cast<uint16_t>(3 * (h % 4));
    x.grp_sub[h] = static_cast<uint16_t>(h / 4);
    x.grp_shift_s[h] = static_cast<uint16_t>(3 * (h % 4));
    x.grp_pair[h] = static_cast<uint16_t>(h / 2);
    x.grp_shift_m[h] = static_cast<uint16_t>(4 * (h % 2));
  }
  for (int p = 0; p < 2; ++p) {
    for (int d = 0; d < 16; ++d) x.iq1_pick[p][d] = static_cast<uint32_t>(8 * p + d / 2);
  }
  return x;
}

alignas(64) constexpr Index kIdx = MakeIndex();

IQ_INLINE __m512i Load(const void* p) { return _mm512_loadu_si512(p); }

// The lookup tables in registers (IqTables, gemv_internal.h).
struct Tables {
  __m512i lo[4], hi[4];  // IQ2_XXS code tables, entries 64 i .. 64 i + 63
  __m512i ks[2];         // ksigns, entries 0-63 / 64-127
  const uint16_t* iq1_codes;
};

Tables LoadTables() {
  const IqTables& t = GetIqTables();
  Tables r;
  for (int i = 0; i < 4; ++i) {
    r.lo[i] = Load(t.iq2xxs_lo + 64 * i);
    r.hi[i] = Load(t.iq2xxs_hi + 64 * i);
  }
  r.ks[0] = Load(t.ksigns);
  r.ks[1] = Load(t.ksigns + 64);
  r.iq1_codes = t.iq1_codes;
  return r;
}

// One weight block, decoded for every token of the tile.
struct Decoded {
  __m512i u[4];      // [4][64] u8 levels of values 64 m .. 64 m + 63
  __mmask64 neg[4];  // IQ2_XXS: the values whose activation is negated
  __m512i sw[4];     // [4][32] i16: 2 s + 1 of each activation byte pair's half
  __m256i sw17;      // IQ1: [16] i16 17 (2 s_h + 1), against the bsums
  float d8;          // d / 8
};

// A 256-entry byte lookup of the low 8 bits of each byte of idx.
IQ_INLINE __m512i Lookup256(const __m512i* t, __m512i idx, __mmask64 bit7) {
  return _mm512_mask_blend_epi8(bit7, _mm512_permutex2var_epi8(t[0], idx, t[1]),
                                _mm512_permutex2var_epi8(t[2], idx, t[3]));
}

// The 2-bit codes of each chunk byte from 8 16-bit codes, one per qword (bits 0-15).
IQ_INLINE __m512i SplitCodes(__m512i c16) {
  return _mm512_multishift_epi64_epi8(_mm512_set1_epi64(0x0E0C0A0806040200LL), c16);
}

IQ_INLINE void DecodeIQ2XXS(const uint8_t* blk, const Tables& t, Decoded* dec) {
  uint16_t d;
  std::memcpy(&d, blk, 2);
  dec->d8 = 0.125f * _cvtsh_ss(d);
  const __m512i x = Load(blk + 2);  // qword j: 4 grid indices, then aux (signs, scale << 28)
  const __m512i f = _mm512_multishift_epi64_epi8(_mm512_set1_epi64(0x18100800352E2720LL), x);
  const __m512i ks = _mm512_permutex2var_epi8(t.ks[0], f, t.ks[1]);
  const __mmask64 bit7 = _mm512_movepi8_mask(f);
  const __m512i lo = Lookup256(t.lo, f, bit7), hi = Lookup256(t.hi, f, bit7);
  // qword j's low word = 2 s_j + 1; S16 word h = that of sub-block h / 2
  const __m512i sc = _mm512_or_si512(_mm512_slli_epi64(_mm512_srli_epi64(x, 60), 1),
                                     _mm512_set1_epi64(1));
  const __m512i s16 = _mm512_permutexvar_epi16(Load(kIdx.half_sub), sc);
  const __m512i levels = _mm512_broadcast_i32x4(_mm_setr_epi8(8, 25, 43, 0, 0, 0, 0, 0, 0, 0, 0,
                                                              0, 0, 0, 0, 0));
  const __m512i bits = Load(kIdx.bit_sel), three = _mm512_set1_epi8(3);
#pragma GCC unroll 4
  for (int m = 0; m < 4; ++m) {
    const __m512i c16 = _mm512_permutex2var_epi8(lo, Load(kIdx.code_pick[m]), hi);
    dec->u[m] = _mm512_shuffle_epi8(levels, _mm512_and_si512(SplitCodes(c16), three));
    dec->neg[m] =
        _mm512_test_epi8_mask(_mm512_permutexvar_epi8(Load(kIdx.sign_bcast[m]), ks), bits);
    dec->sw[m] = _mm512_permutexvar_epi16(Load(kIdx.half_pick[m]), s16);
  }
}

// The IQ1 tail shared by IQ1_S and IQ1_M: idx = [32] u16 grid indices, dpos = [32] u16 (4 where
// the group's delta is positive), s16 = [16] u16 2 s_h + 1 in the low half.
IQ_INLINE void DecodeIQ1Common(__m512i idx, __m512i dpos, __m512i s16, const Tables& t,
                               Decoded* dec) {
  const __m512i g[2] = {
      _mm512_i32gather_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(idx)), t.iq1_codes, 2),
      _mm512_i32gather_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(idx, 1)),
                             t.iq1_codes, 2)};
  const __m512i levels = _mm512_broadcast_i32x4(_mm_setr_epi8(8, 16, 24, 0, 10, 18, 26, 0, 0, 0,
                                                              0, 0, 0, 0, 0, 0));
  const __m512i three = _mm512_set1_epi8(3);
#pragma GCC unroll 4
  for (int m = 0; m < 4; ++m) {
    const __m512i c16 = _mm512_permutexvar_epi32(Load(kIdx.iq1_pick[m % 2]), g[m / 2]);
    const __m512i dp = _mm512_permutexvar_epi8(Load(kIdx.delta_pick[m]), dpos);
    // (code & 3) | dp
    const __m512i code = _mm512_ternarylogic_epi32(SplitCodes(c16), three, dp, 0xEA);
    dec->u[m] = _mm512_shuffle_epi8(levels, code);
    dec->sw[m] = _mm512_permutexvar_epi16(Load(kIdx.half_pick[m]), s16);
  }
  dec->sw17 = _mm256_mullo_epi16(_mm512_castsi512_si256(s16), _mm256_set1_epi16(17));
}

// idx | (high bits & 7) << 8 for [32] u16 (high bits already shifted to bit 0).
IQ_INLINE __m512i Index11(__m512i low, __m512i high) {
  return _mm512_ternarylogic_epi32(low, _mm512_slli_epi16(high, 8), _mm512_set1_epi16(0x700),
                                   0xF8);  // A | (B & C)
}

IQ_INLINE void DecodeIQ1S(const uint8_t* blk, const Tables& t, Decoded* dec) {
  uint16_t d;
  std::memcpy(&d, blk, 2);
  dec->d8 = 0.125f * _cvtsh_ss(d);
  const __m512i low = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2)));
  const __m128i qh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 34));  // [8] u16
  const __m512i hw = _mm512_permutexvar_epi16(Load(kIdx.grp_sub), _mm512_castsi128_si512(qh));
  const __m512i hs = _mm512_srlv_epi16(hw, Load(kIdx.grp_shift_s));
  // delta sign: bit 15 of the sub-block's qh (set: negative)
  const __m512i dpos = _mm512_andnot_si512(_mm512_srai_epi16(hw, 15), _mm512_set1_epi16(4));
  // 2 s_j + 1 = (qh >> 11 & 14) | 1, then per half h: sub-block h / 2
  const __m128i sc = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(qh, 11), _mm_set1_epi16(14)),
                                  _mm_set1_epi16(1));
  const __m512i s16 = _mm512_permutexvar_epi16(Load(kIdx.sub_word), _mm512_castsi128_si512(sc));
  DecodeIQ1Common(Index11(low, hs), dpos, s16, t, dec);
}

IQ_INLINE void DecodeIQ1M(const uint8_t* blk, const Tables& t, Decoded* dec) {
  uint16_t sc[4];
  std::memcpy(sc, blk + 48, sizeof(sc));
  const uint16_t d_bits = static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) |
                                                ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000));
  dec->d8 = 0.125f * _cvtsh_ss(d_bits);
  const __m512i low = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
  const __m256i qh = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 32)));
  const __m512i hw = _mm512_permutexvar_epi16(Load(kIdx.grp_pair), _mm512_castsi256_si512(qh));
  const __m512i hs = _mm512_srlv_epi16(hw, Load(kIdx.grp_shift_m));  // the group's nibble
  const __m512i dpos = _mm512_srli_epi16(_mm512_andnot_si512(hs, _mm512_set1_epi16(8)), 1);
  const __m512i sv = _mm512_srlv_epi16(
      _mm512_permutexvar_epi16(Load(kIdx.half_q), _mm512_castsi128_si512(_mm_loadl_epi64(
                                                      reinterpret_cast<const __m128i*>(blk + 48)))),
      Load(kIdx.half_shift));
  // ((s & 7) << 1) | 1
  const __m512i s16 = _mm512_ternarylogic_epi32(_mm512_slli_epi16(sv, 1), _mm512_set1_epi16(14),
                                                _mm512_set1_epi16(1), 0xEA);
  DecodeIQ1Common(Index11(low, hs), dpos, s16, t, dec);
}

template <Kind K>
IQ_INLINE void Decode(const uint8_t* blk, const Tables& t, Decoded* dec) {
  if constexpr (K == Kind::kIQ2XXS) {
    DecodeIQ2XXS(blk, t, dec);
  } else if constexpr (K == Kind::kIQ1S) {
    DecodeIQ1S(blk, t, dec);
  } else {
    DecodeIQ1M(blk, t, dec);
  }
}

// The block's integer for one token: [16] i32 (two chains of two chunks each).
template <Kind K>
IQ_INLINE __m512i BlockSum(const Decoded& dec, const BlockQ8_K& a) {
  __m512i s[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
#pragma GCC unroll 4
  for (int m = 0; m < 4; ++m) {
    __m512i act = Load(a.qs + 64 * m);
    if constexpr (K == Kind::kIQ2XXS) {
      act = _mm512_mask_sub_epi8(act, dec.neg[m], _mm512_setzero_si512(), act);
    }
    s[m % 2] = _mm512_dpwssd_epi32(s[m % 2], _mm512_maddubs_epi16(dec.u[m], act), dec.sw[m]);
  }
  __m512i sum = _mm512_add_epi32(s[0], s[1]);
  if constexpr (K != Kind::kIQ2XXS) {
    const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums));
    sum = _mm512_sub_epi32(sum, _mm512_zextsi256_si512(_mm256_madd_epi16(dec.sw17, bs)));
  }
  return sum;
}

// y[t * ldy] = row w . token t (a + t * a_stride) for t < T, over nb blocks.
template <Kind K, int T>
void RowTile(const uint8_t* w, const uint8_t* a, size_t a_stride, int64_t nb, const Tables& tab,
             float* y, int64_t ldy) {
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    Decoded dec;
    Decode<K>(w + b * kBlockBytes<K>, tab, &dec);
    for (int t = 0; t < T; ++t) {
      const auto& at = reinterpret_cast<const BlockQ8_K*>(a + t * a_stride)[b];
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(BlockSum<K>(dec, at)),
                               _mm512_set1_ps(dec.d8 * at.d), acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) y[t * ldy] = _mm512_reduce_add_ps(acc[t]);
}

// Rows in slabs of 16 (their weights stay in L1 / L2 while every token passes over them), the
// tokens 4 at a time per row, then the remaining 1-3.
template <Kind K>
void Gemm(const void* w_ptr, size_t w_stride, int64_t n_rows, const void* a_ptr, size_t a_stride,
          int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  const auto* w = static_cast<const uint8_t*>(w_ptr);
  const auto* a = static_cast<const uint8_t*>(a_ptr);
  const int64_t nb = n / kQkK;
  const Tables tab = LoadTables();
  constexpr int64_t kSlab = 16;
  for (int64_t r0 = 0; r0 < n_rows; r0 += kSlab) {
    const int64_t r1 = r0 + kSlab < n_rows ? r0 + kSlab : n_rows;
    int64_t t = 0;
    for (; t + 4 <= n_tok; t += 4) {
      for (int64_t r = r0; r < r1; ++r) {
        RowTile<K, 4>(w + r * w_stride, a + t * a_stride, a_stride, nb, tab, y + t * ldy + r, ldy);
      }
    }
    for (int64_t r = r0; r < r1 && t < n_tok; ++r) {
      const uint8_t* wr = w + r * w_stride;
      const uint8_t* at = a + t * a_stride;
      float* yr = y + t * ldy + r;
      switch (n_tok - t) {
        case 3:
          RowTile<K, 3>(wr, at, a_stride, nb, tab, yr, ldy);
          break;
        case 2:
          RowTile<K, 2>(wr, at, a_stride, nb, tab, yr, ldy);
          break;
        default:
          RowTile<K, 1>(wr, at, a_stride, nb, tab, yr, ldy);
          break;
      }
    }
  }
}

template <Kind K>
float Dot(const void* w_row, const void* a_row, int64_t n) {
  float y;
  RowTile<K, 1>(static_cast<const uint8_t*>(w_row), static_cast<const uint8_t*>(a_row), 0,
                n / kQkK, LoadTables(), &y, 0);
  return y;
}

#undef IQ_INLINE

}  // namespace

float DotIQ2XXS_Q8K_Avx512Vbmi(const void* w_row, const void* a_row, int64_t n) {
  return Dot<Kind::kIQ2XXS>(w_row, a_row, n);
}
float DotIQ1S_Q8K_Avx512Vbmi(const void* w_row, const void* a_row, int64_t n) {
  return Dot<Kind::kIQ1S>(w_row, a_row, n);
}
float DotIQ1M_Q8K_Avx512Vbmi(const void* w_row, const void* a_row, int64_t n) {
  return Dot<Kind::kIQ1M>(w_row, a_row, n);
}
void GemmIQ2XXS_Q8K_Avx512Vbmi(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                               size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  Gemm<Kind::kIQ2XXS>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}
void GemmIQ1S_Q8K_Avx512Vbmi(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                             size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  Gemm<Kind::kIQ1S>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}
void GemmIQ1M_Q8K_Avx512Vbmi(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                             size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  Gemm<Kind::kIQ1M>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}

}  // namespace moesplit::gemv::internal
