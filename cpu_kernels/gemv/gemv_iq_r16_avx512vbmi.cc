// IQ2_XXS / IQ2_XS / IQ2_S / IQ3_XXS / IQ3_S / IQ1_S / IQ1_M weights in the 16-row layouts
// kIQ2_XXS_R16 / kIQ2_XS_R16 / kIQ2_S_R16 / kIQ3_XXS_R16 / kIQ3_S_R16 / kIQ1_S_R16 / kIQ1_M_R16
// (cpu_kernels/quant/repack.h) x Q8_K activations: the
// AVX-512 VNNI tier's kernels on CPUs with VBMI and GFNI. Compiled with MOESPLIT_FLAGS_AVX512VNNI +
// -mavx512vbmi -mgfni (gemv/kquants.cmake); reached only through KernelsFor(IsaTier::kAvx512Vnni /
// kAmx) where DetectCpuFeatures().avx512vbmi and .gfni. The integer per (row, block, token) is the
// scalar dot's (gemv_iq_scalar.cc, gemv_iq23_scalar.cc):
//   sum_j (2 s_j + 1) sum_i grid_i sign_i q8_i, times d d_a / 8 (IQ2_XXS; IQ2_XS, IQ2_S: j over
//   16 values), / 4 (IQ3_XXS) or 1 (IQ3_S).
//
// Per group block (16 rows x 256 values) and sub-block j, lane r = row r:
//   IQ2_XXS: x = q[j], 64 grid indices (byte 4 r + g = row r's group g of 8 values), looked up
//     in IqTables::iq2xxs_lo / hi (256 entries: two vpermi2b blended by bit 7 of x, Lookup256) into
//     C_lo / C_hi, the 2-bit level codes of values 0-3 / 4-7 of every group; with the sign bytes S
//     = sgn[j] four bit selects give V0 = C_lo & 15 | S & 48, V1 = S & 3 | (C_lo >> 2) & 60, V2 /
//     V3 the same from C_hi and S >> 2: each value's code and sign in a 6-bit field (repack.h);
//     value m: u = vpermb(V_{m/2}, the table of 43 + its signed level), 0 .. 86; a = the token's
//     dword (4 activations of the 4 lanes' groups at value m) in all lanes; P = vpdpbusd(P, u, a)
//     from P = -43 B_j (B_j the sub-block's activation sum, from the Q8_K bsums), so P = sum sign
//     level q8.
//   IQ2_XS: IQ2_XXS's codes over 512 entries (four vpermi2b and three blends per table,
//     the index's 9th bit the mask qh[j]: LookupTree) and its signed levels u; a lane's 4 bytes
//     span two scales (groups 0-1, 2-3), so per value p = vpmaddubsw(u, a) (the two groups' i16
//     pair, |p| <= 2 x 86 x 128) and I = vpdpwssd(I, p, the pair (2 s_0 + 1, 2 s_1 + 1)), from I -=
//     vpdpwssd of 43 x that pair with the halves' activation sums (the Q8_K bsums 2 j, 2 j + 1 are
//     that i16 pair)
//   IQ2_S: as IQ2_XS over 1024 entries (eight vpermi2b and seven blends per table, index bits 8
//     and 9 the masks qh[j][0], qh[j][1])
//   IQ3_XXS: x = q[j][h] (h = 0, 1; groups of 4 values), each looked up into A (3-bit codes of
//     values 0-1: iq3xxs_lo, bits 0-5 used) and B (values 2-3: the code's bits 6-11); with the
//     sign bytes S = sgn[j], value m = 4 h + k: V = A or B under the mask 0x07 (k even) or 0x38
//     (k odd), the rest from S >> kIq3R16SignShift[m] (one bit select: code and sign in the
//     6-bit index, repack.h), u = vpermb(V, the table of 62 + its signed level), 0 .. 124 (the
//     levels {4, 12, .., 52, 62} are no affine map of the code: 62, not 60); a as IQ2_XXS's;
//     P = vpdpbusd(P, u, a) from P = -62 B_j
//   IQ3_S: IQ3_XXS's lookups over 512 entries (four vpermi2b and three blends, the index's 9th
//     bit the mask qh[j][h]); V as IQ3_XXS's with S >> kIq3SR16SignShift[m] (0-4: each value's
//     sign at bit 3 beside a code at bits 0-2, at bit 0 beside one at 3-5), so two tables of 15 +
//     the signed level (1, 3, .., 15) serve all eight values, u 0 .. 30; P = vpdpbusd(P, u, a)
//     from P = -15 B_j. Until 2026-12-02 u was the unsigned level and a negated under a 64-bit
//     sign mask per value and token (a mask load and a masked vpsubb each): decode the same on
//     Zen 5, prefill 4-16 tokens 1.11-1.12x now (the select is once per value, not per token)
//   I += P * (2 s_j + 1)     [16] i32: |I| <= 8 x 31 x 32 x 62 x 128 < 2^31 (IQ3_XXS's offset
//     terms cancel within a sub-block; vpdpbusd's i32 sums do not saturate on the way)
// per block and token: acc += cvt(I) * d * d_a / 8 (or / 4). IQ2_XXS: ~30 vector ops per 512
// weights (1 token), where the file layout's block decode (gemv_iq_avx512vbmi.cc) takes ~90: no
// per-value shuffle of the activations, no sign ops per value and token, and no horizontal
// sums (the lanes are rows). IQ3_XXS: ~37 per 512 (two lookups per sub-block, a select and a
// vpermb per value; with 64-bit sign masks, a mask load and a masked negate per value and
// token, ~42 and the mask ops on Zen 4's critical path) where the file layout's gemm
// (gemv_iq23_avx512vbmi.cc) takes ~100.
// IQ1_S (kIQ1_S_R16, base-3 digits t + 1 of the grid values t): per sub-block j,
//   x = a[j] looked up (Lookup256 each) into C (digits of values 0-3 as 2-bit
//     fields) and D4 (value 4's digit); f[j]'s 16 words spread into the dword lanes (vpermb),
//     each group's 5-bit field moved to its byte (vpmultishiftqb) and looked up (vpermb, bit 5
//     ignored by a doubled table) into E (values 5-7 as 2-bit fields);
//   for m < 8: u = the digit byte of value m (PickDigit: fields of C / E, or D4);
//     P = vpdpbusd(P, u, a), so P = G + B (G = sum grid q8, B = the sub-block's sum of q8);
//   I += P * 8 (2 s_j + 1) + B * (2 s_j + 1) (e_j - 8)   (= (2 s_j + 1) (8 G + e_j B), the
//     scalar dot's integer; e_j = -1 / +1 the delta's sign; the factors an i16 pair by one
//     vpermd from the word's bits 20-23; B from the Q8_K bsums; P (|P| <= 2 x 127 x 32) and B
//     (|B| <= 127 x 32) blended into an i16 pair, so one vpdpwssd does both products)
// ~31 vector ops per 512 weights where the file layout's kernel spends ~40 cycles per 256.
// IQ1_M (kIQ1_M_R16): the same digits; a scale per 16 values (groups 0-1, 2-3 of a lane's
//   dword) and a delta sign per group. Each value's digit byte goes into two vpdpbusd, against
//   the activations with groups 2-3 zeroed (P0) and with groups 0-1 zeroed (P1); per half h
//   I += P_h * 8 (2 s_h + 1) + vpdpwssd((2 s_h + 1) (e_g - 8) for its 2 groups, their sums S_g)
//   (the factors by one 32-entry vpermt2d each from the half's 5 bits; S_g by vpsadbw). ~46
//   ops per 512 weights.
// The activations are permuted once per call so that each (j, m) dword is contiguous:
// IQ2_XXS / IQ1_S / IQ1_M out[32 j + 4 k + g] = qs[32 j + 8 g + k]; IQ3_XXS out[16 i + 4 k + g]
// = qs[16 i + 4 g + k] (one vpermb per 64 bytes); the IQ1 sums follow all tokens' quants.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "cpu_kernels/gemv/gemv_internal.h"
#include "cpu_kernels/gemv/gemv_isa_common.h"
#include "cpu_kernels/quant/blocks.h"
#include "cpu_kernels/quant/repack.h"

namespace moesplit::gemv::internal {
namespace {

using quant::BlockIQ1_M_R16;
using quant::BlockIQ1_S_R16;
using quant::BlockIQ2_S_R16;
using quant::BlockIQ2_XS_R16;
using quant::BlockIQ2_XXS_R16;
using quant::BlockIQ3_S_R16;
using quant::BlockIQ3_XXS_R16;
using quant::BlockQ8_K;
using quant::kQkK;
using quant::kR16Rows;

#define IQ_INLINE inline __attribute__((always_inline))

enum class Kind { kIQ2XXS, kIQ2XS, kIQ2S, kIQ3XXS, kIQ3S, kIQ1S, kIQ1M };

template <Kind K>
using GroupBlock = std::conditional_t<
    K == Kind::kIQ2XXS, BlockIQ2_XXS_R16,
    std::conditional_t<
        K == Kind::kIQ2XS, BlockIQ2_XS_R16,
        std::conditional_t<
            K == Kind::kIQ2S, BlockIQ2_S_R16,
            std::conditional_t<
                K == Kind::kIQ3XXS, BlockIQ3_XXS_R16,
                std::conditional_t<
                    K == Kind::kIQ3S, BlockIQ3_S_R16,
                    std::conditional_t<K == Kind::kIQ1S, BlockIQ1_S_R16, BlockIQ1_M_R16>>>>>>;
constexpr bool IsIq1(Kind k) { return k == Kind::kIQ1S || k == Kind::kIQ1M; }
constexpr bool IsIq3(Kind k) { return k == Kind::kIQ3XXS || k == Kind::kIQ3S; }
constexpr bool IsIq2(Kind k) { return k == Kind::kIQ2XXS || k == Kind::kIQ2XS || k == Kind::kIQ2S; }
// A 4-bit scale per 16 values (two per lane's four groups).
constexpr bool ScalePer16(Kind k) { return k == Kind::kIQ2XS || k == Kind::kIQ2S; }
// 64-entry table registers per code table: the grid's size / 64 (the index bits past 7 in lane
// masks).
constexpr int TableRegs(Kind k) {
  return k == Kind::kIQ2S ? 16 : k == Kind::kIQ2XS || k == Kind::kIQ3S ? 8 : 4;
}
// Permuted activation bytes per block and token (IQ1_M: the quants twice, once with groups
// 2-3 of each sub-block zeroed and once with groups 0-1, one per half's scale), and the i32 of
// activation sums per block and token that follow all tokens' quants (IQ1_S: B_j << 16 per
// sub-block; IQ2_XXS / IQ3_XXS: -kOffset B_j; IQ1_M: per half the i16 pair of its two groups'
// sums).
template <Kind K>
constexpr int kActBytes = K == Kind::kIQ1M ? 2 * kQkK : kQkK;
template <Kind K>
constexpr int kAuxInts = K == Kind::kIQ1M                                     ? 16
                         : K == Kind::kIQ1S || K == Kind::kIQ2XXS || IsIq3(K) ? 8
                                                                              : 0;
// Payload cache lines per group block: 17 / 19 / 20 / 25 / 27 / 14 / 16.
template <Kind K>
constexpr int kLines = static_cast<int>(sizeof(GroupBlock<K>) / 64);
// d * d_a times this is the block's float factor: IQ2_XXS d (2 s + 1) / 8, IQ3_XXS / 4, IQ3_S 1.
template <Kind K>
constexpr float kScale = K == Kind::kIQ3XXS ? 0.25f
                         : K == Kind::kIQ3S ? 1.0f
                                            : 0.125f;

// The offset of the signed levels into vpdpbusd's unsigned range: IQ2_XXS (and IQ2_XS / IQ2_S)
// -43 .. 43, IQ3_XXS -62 .. 62, IQ3_S -15 .. 15.
constexpr int kIq2Offset = 43;
template <Kind K>
constexpr int kOffset = K == Kind::kIQ3XXS ? 62
                        : K == Kind::kIQ3S ? 15
                                           : kIq2Offset;
// The sign bits Codes' selects rely on: values 0, 1 at bits 4, 5 and 2, 3 at 0, 1 (kept where
// V0's / V1's fields have them), values 4-7 two bits higher than 0-3 (sgn >> 2 brings them there).
static_assert(quant::kIq2R16SignBit[0] == 4 && quant::kIq2R16SignBit[1] == 5 &&
              quant::kIq2R16SignBit[2] == 0 && quant::kIq2R16SignBit[3] == 1);
static_assert([] {
  for (int k = 0; k < 4; ++k) {
    if (quant::kIq2R16SignBit[k + 4] != quant::kIq2R16SignBit[k] + 2) return false;
  }
  return true;
}());
// Codes keeps the IQ3_XXS sign bytes shifted by 0, 2, 4 (c[4 + s / 2]): the shifts Levels reads.
static_assert([] {
  for (int s : quant::kIq3R16SignShift) {
    if (s != 0 && s != 2 && s != 4) return false;
  }
  return true;
}());
#include "cpu_kernels/gemv/gemv_iq_r16_consts.inc"

// n_tok tokens' quants in the permuted order: out + t * (nb * 256), nb blocks each.
// IQ1_S / IQ1_M: then the tokens' kAuxInts i32 per block at out + n_tok * nb * kActBytes.
template <Kind K>
void PermuteTokens(const uint8_t* a, size_t a_stride, int64_t n_tok, int64_t nb, uint8_t* out) {
  const __m512i ctrl = _mm512_load_si512(kConsts.perm[IsIq3(K) ? 1 : 0]);
  const __m512i lo_groups = _mm512_load_si512(kConsts.iq1m_lo_groups);
  auto* aux = reinterpret_cast<int32_t*>(out + n_tok * nb * kActBytes<K>);
  for (int64_t t = 0; t < n_tok; ++t) {
    const auto* at = reinterpret_cast<const BlockQ8_K*>(a + t * a_stride);
    uint8_t* o = out + t * nb * kActBytes<K>;
    for (int64_t b = 0; b < nb; ++b) {
      for (int c = 0; c < 4; ++c) {
        const __m512i q = _mm512_loadu_si512(at[b].qs + 64 * c);
        const __m512i pq = _mm512_permutexvar_epi8(ctrl, q);
        uint8_t* ob = o + b * kActBytes<K> + 64 * c;
        if constexpr (K == Kind::kIQ1M) {
          _mm512_storeu_si512(ob, _mm512_and_si512(pq, lo_groups));
          _mm512_storeu_si512(ob + kQkK, _mm512_andnot_si512(lo_groups, pq));
          // Each group's sum of 8 quants: vpsadbw of q + 128 against 0, less 8 x 128.
          const __m512i sums = _mm512_sub_epi64(
              _mm512_sad_epu8(_mm512_xor_si512(q, _mm512_set1_epi8(-128)), _mm512_setzero_si512()),
              _mm512_set1_epi64(8 * 128));
          _mm_storeu_si128(reinterpret_cast<__m128i*>(aux + (t * nb + b) * 16 + 4 * c),
                           _mm512_cvtepi64_epi16(sums));
        } else {
          _mm512_storeu_si512(ob, pq);
        }
      }
      if constexpr (kAuxInts<K> == 8) {  // B_j << 16 (IQ1_S: TileIq1's high i16) or -kOffset B_j
        const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at[b].bsums));
        const int16_t f = K == Kind::kIQ1S ? 1 : -kOffset<K>;
        __m256i v = _mm256_madd_epi16(bs, _mm256_set1_epi16(f));
        if constexpr (K == Kind::kIQ1S) v = _mm256_slli_epi32(v, 16);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(aux + (t * nb + b) * 8), v);
      }
    }
  }
}

// The code tables in registers, entries 64 i .. 64 i + 63: IQ2_XXS c0 / c1 = iq2xxs_lo / hi
// and its four signed-level tables (IQ2_XS / IQ2_S: iq2xs_* / iq2s_*, c0 / c1 [0..7] / [0..15],
// the same level tables);
// IQ3_XXS c0 = iq3xxs_lo (the 12-bit code's bits 0-7; the level lookups use bits 0-5), c1 =
// iq3xxs_b (bits 6-11), and the eight signed-level tables; IQ3_S the same over 512 entries (c0 /
// c1 [0..7]) and two unsigned-level tables.
// IQ1_S: c0 / c1 = iq1_lo / iq1_d4, and its field table, spread / shift controls and scale
// factors.
struct Tables {
  __m512i c0[16], c1[16];
  __m512i level[8], iq2_level[4];  // level: IQ3_XXS [8], IQ3_S [2]
  __m512i hi, spread, shift, pair;
  __m512i m_ls8[2], m_ec[2];  // IQ1_M's 32-entry tables
};
template <Kind K>
Tables LoadTables() {
  const IqTables& t = GetIqTables();
  Tables r;
  for (int i = 0; i < TableRegs(K); ++i) {
    if constexpr (K == Kind::kIQ2S) {
      r.c0[i] = _mm512_load_si512(t.iq2s_lo + 64 * i);
      r.c1[i] = _mm512_load_si512(t.iq2s_hi + 64 * i);
    } else if constexpr (K == Kind::kIQ2XS) {
      r.c0[i] = _mm512_load_si512(t.iq2xs_lo + 64 * i);
      r.c1[i] = _mm512_load_si512(t.iq2xs_hi + 64 * i);
    } else if constexpr (K == Kind::kIQ3S) {
      r.c0[i] = _mm512_load_si512(t.iq3s_lo + 64 * i);
      r.c1[i] = _mm512_load_si512(t.iq3s_b + 64 * i);
    } else if constexpr (K == Kind::kIQ2XXS) {
      r.c0[i] = _mm512_load_si512(t.iq2xxs_lo + 64 * i);
      r.c1[i] = _mm512_load_si512(t.iq2xxs_hi + 64 * i);
    } else if constexpr (IsIq1(K)) {
      r.c0[i] = _mm512_load_si512(kConsts.iq1_lo + 64 * i);
      r.c1[i] = _mm512_load_si512(kConsts.iq1_d4 + 64 * i);
    } else {
      r.c0[i] = _mm512_load_si512(t.iq3xxs_lo + 64 * i);
      r.c1[i] = _mm512_load_si512(t.iq3xxs_b + 64 * i);
    }
  }
  for (int m = 0; m < (K == Kind::kIQ3S ? 2 : 8); ++m) {
    r.level[m] = _mm512_load_si512(K == Kind::kIQ3S ? kConsts.iq3s_level[m] : kConsts.iq3_level[m]);
  }
  for (int t = 0; t < 4; ++t) r.iq2_level[t] = _mm512_load_si512(kConsts.iq2_level[t]);
  r.hi = _mm512_load_si512(kConsts.iq1_hi);
  r.spread = _mm512_load_si512(kConsts.iq1_spread);
  r.shift = _mm512_load_si512(kConsts.iq1_shift);
  r.pair = _mm512_load_si512(kConsts.iq1_pair);
  for (int i = 0; i < 2; ++i) {
    r.m_ls8[i] = _mm512_load_si512(kConsts.iq1m_ls8 + 16 * i);
    r.m_ec[i] = _mm512_load_si512(kConsts.iq1m_ec + 16 * i);
  }
  return r;
}

// A 256-entry byte lookup of every byte of x: entries 0-127 and 128-255 by two independent
// vpermi2b (each reads bits 0-6), blended by bit 7. Until 2026-12-02 the second lookup was a
// masked vpermi2b merging into the first's result (no blend, one op fewer): that chains the two
// lookups, and on Zen 5 the chain cost more than the blend (bench_gemv 1 thread in cache:
// iq2_xxs_r16 1.13-1.20x, iq1_s_r16 1.11-1.13x; the ops' throughput is not what binds here).
IQ_INLINE __m512i Lookup256(const __m512i* t, __m512i x, __mmask64 bit7) {
  const __m512i lo = _mm512_permutex2var_epi8(t[0], x, t[1]);
  const __m512i hi = _mm512_permutex2var_epi8(t[2], x, t[3]);
  return _mm512_mask_blend_epi8(bit7, lo, hi);
}

// The same over 256 << B entries (B = 1: 512, 2: 1024) as a tree: each 256-entry chunk by
// Lookup256, then the chunks blended by the index bits 8, 9 (high[0], high[1]): 2^(1 + B)
// vpermi2b and 2^(1 + B) - 1 blends, no mask arithmetic. Until 2026-12-02 a chain of masked
// vpermi2b, one per 128 entries, under masks ANDed from bit 7 and the high bits (IQ2_S: 14 mask
// ops): on Zen 5 the tree reads 1.00-1.12x as fast in decode, 1.01-1.57x in prefill (bench_gemv).
template <int B>
IQ_INLINE __m512i LookupTree(const __m512i* t, __m512i x, __mmask64 bit7,
                             const __mmask64 (&high)[B]) {
  constexpr int kChunks = 1 << B;
  __m512i q[kChunks];
  for (int c = 0; c < kChunks; ++c) q[c] = Lookup256(t + 4 * c, x, bit7);
  for (int i = 0; i < B; ++i) {
    for (int c = 0; c < (kChunks >> (i + 1)); ++c) {
      q[c] = _mm512_mask_blend_epi8(high[i], q[2 * c], q[2 * c + 1]);
    }
  }
  return q[0];
}

// The grid lookups of sub-block j's index vectors (IQ2: one, IQ3: two): c[2 h], c[2 h + 1] =
// vector h looked up in the tables c0, c1 (IQ2_XXS: C_lo / C_hi).
template <Kind K>
IQ_INLINE void Lookups(const GroupBlock<K>& blk, int j, const Tables& tab, __m512i* c) {
  constexpr int kVectors = IsIq2(K) ? 1 : 2;
  for (int h = 0; h < kVectors; ++h) {
    const __m512i x = _mm512_loadu_si512(blk.Q(j) + 64 * h);
    const __mmask64 bit7 = _mm512_movepi8_mask(x);
    if constexpr (K == Kind::kIQ2S) {
      c[2 * h] = LookupTree<2>(tab.c0, x, bit7, {blk.qh[j][0], blk.qh[j][1]});
      c[2 * h + 1] = LookupTree<2>(tab.c1, x, bit7, {blk.qh[j][0], blk.qh[j][1]});
    } else if constexpr (K == Kind::kIQ3S) {
      c[2 * h] = LookupTree<1>(tab.c0, x, bit7, {blk.qh[j][h]});
      c[2 * h + 1] = LookupTree<1>(tab.c1, x, bit7, {blk.qh[j][h]});
    } else if constexpr (K == Kind::kIQ2XS) {
      c[2 * h] = LookupTree<1>(tab.c0, x, bit7, {blk.qh[j]});
      c[2 * h + 1] = LookupTree<1>(tab.c1, x, bit7, {blk.qh[j]});
    } else {
      c[2 * h] = Lookup256(tab.c0, x, bit7);
      c[2 * h + 1] = Lookup256(tab.c1, x, bit7);
    }
  }
}

// The code vectors of sub-block j: IQ2_XXS / IQ2_XS c[0..3] = V0 .. V3 (codes and signs of
// values 0-1, 2-3, 4-5, 6-7 of the groups), IQ3_XXS / IQ3_S c[0..3] (A, B of half 0, then of
// half 1) and IQ3_XXS c[4 + s / 2] the sign bytes shifted right by s = 0, 2, 4
// (kIq3R16SignShift; Levels selects), IQ3_S c[4] the sign bytes (Levels shifts them).
// pre (IQ2 kinds; or null): sub-block j's Lookups, done ahead (IQ2_XXS's Tile).
template <Kind K>
IQ_INLINE void Codes(const GroupBlock<K>& blk, int j, const Tables& tab, __m512i* c,
                     const __m512i* pre = nullptr) {
  if (pre == nullptr) Lookups<K>(blk, j, tab, c);
  if constexpr (IsIq2(K)) {
    // Bit selects (vpternlogq 0xE4: third ? first : second, the codes being the operand the
    // instruction overwrites, not the mask constant); the 16-bit shifts move no bit that a
    // select keeps across a byte boundary.
    const __m512i sg = _mm512_loadu_si512(blk.Sgn(j)), sg2 = _mm512_srli_epi16(sg, 2);
    const __m512i lo4 = _mm512_set1_epi8(0x0F), mid4 = _mm512_set1_epi8(0x3C);
    const __m512i lo = pre ? pre[0] : c[0], hi = pre ? pre[1] : c[1];
    c[0] = _mm512_ternarylogic_epi64(lo, sg, lo4, 0xE4);
    c[1] = _mm512_ternarylogic_epi64(_mm512_srli_epi16(lo, 2), sg, mid4, 0xE4);
    c[2] = _mm512_ternarylogic_epi64(hi, sg2, lo4, 0xE4);
    c[3] = _mm512_ternarylogic_epi64(_mm512_srli_epi16(hi, 2), sg2, mid4, 0xE4);
  } else if constexpr (K == Kind::kIQ3XXS) {
    // The 16-bit shifts move into a byte only bits above those a select takes from it.
    const __m512i sg = _mm512_loadu_si512(blk.Sgn(j));
    c[4] = sg;
    c[5] = _mm512_srli_epi16(sg, 2);
    c[6] = _mm512_srli_epi16(sg, 4);
  } else if constexpr (K == Kind::kIQ3S) {
    c[4] = _mm512_loadu_si512(blk.Sgn(j));  // Levels shifts it per value (kIq3SR16SignShift)
  }
}

// The level bytes of value m of the groups, kOffset + the signed level (IQ3: m = 4 h + k,
// the code beside its sign by one bit select: the code's bits 0-2 or 3-5 of A / B, the rest
// of the sign bytes shifted by kIq3R16SignShift[m] (IQ3_XXS: table m) or kIq3SR16SignShift[m]
// (IQ3_S: table m % 2)).
template <Kind K>
IQ_INLINE __m512i Levels(const __m512i* c, int m, const Tables& tab) {
  if constexpr (IsIq2(K)) {
    return _mm512_permutexvar_epi8(c[m / 2], tab.iq2_level[m % 4]);
  } else {
    // IQ3_S: the shifted sign bytes are common subexpressions of the unrolled values (shifts
    // 0-4); the bits a 16-bit shift brings in from the next byte land where the tables do not
    // look.
    constexpr bool kS = K == Kind::kIQ3S;
    const __m512i signs = kS ? _mm512_srli_epi16(c[4], quant::kIq3SR16SignShift[m])
                             : c[4 + quant::kIq3R16SignShift[m] / 2];
    const __m512i code_bits = _mm512_set1_epi8(m % 2 == 0 ? 0x07 : 0x38);
    const __m512i v = _mm512_ternarylogic_epi64(c[m / 2], signs, code_bits, 0xE4);
    return _mm512_permutexvar_epi8(v, tab.level[kS ? m % 2 : m]);
  }
}

// A group of nb blocks at g: its [nb][16] f16 d's, then the payloads.
template <Kind K>
IQ_INLINE const GroupBlock<K>* GroupBlocks(const uint8_t* g, int64_t nb) {
  return reinterpret_cast<const GroupBlock<K>*>(g + nb * kR16Rows * 2);
}

// Blocks ahead of the one being read that decode prefetches (per stream), and the hint. Until
// 2026-12-02 2 blocks with prefetcht1, as the Q2_K / Q3_K tiles. Zen 4 and later put a T1 line in
// L2 only, so each demand load still waits on L2; prefetchnta brings it to L1 (AMD: not kept in
// L2 on eviction: these lines are read once). 4 blocks ahead x 2 streams x 1,088 B (IQ2_XXS) =
// 8.7 KiB per core in flight, 19 KiB for IQ3_S's 1,728 B blocks: inside L1's 48 KiB. V3 layer
// decode on Zen 5, 2 threads, 3 alternated rounds against the old binary (GB/s medians): IQ2_XXS
// 1.11-1.14x (bw_frac 0.70-0.75 against 0.62-0.68 at 72-82 GB/s probes), IQ1_M 1.02-1.08x,
// IQ3_XXS 1.01-1.08x, IQ1_S 0.97-1.04x. A sweep on IQ2_XXS (bw_frac): 4 ahead with T1 0.71-0.87
// and 2 ahead with NTA 0.63-0.72 (each alone is not the gain), 1 ahead 0.58-0.62, 6 / 8 ahead
// no better than 4. docs/PERFORMANCE.md has the commands.
constexpr int64_t kAhead = 4;
constexpr auto kPrefetchHint = _MM_HINT_NTA;

// The G streams' d rows and payloads (group i at g + i * gstride), and zero accumulators.
template <Kind K, int G, int T>
IQ_INLINE void InitStreams(const uint8_t* g, size_t gstride, int64_t nb, const uint16_t** dw,
                           const GroupBlock<K>** blocks, __m512 (&acc)[G][T]) {
  for (int i = 0; i < G; ++i) {
    dw[i] = reinterpret_cast<const uint16_t*>(g + i * gstride);
    blocks[i] = GroupBlocks<K>(g + i * gstride, nb);
    for (int t = 0; t < T; ++t) acc[i][t] = _mm512_setzero_ps();
  }
}
template <int G, int T>
IQ_INLINE void StoreTile(const __m512 (&acc)[G][T], float* y, int64_t ldy) {
  for (int i = 0; i < G; ++i) {
    for (int t = 0; t < T; ++t) _mm512_storeu_ps(y + t * ldy + 16 * i, acc[i][t]);
  }
}

// Block b's payload of each of the G streams, and the block each reads kAhead blocks on (past
// the last: the next group's, which that stream reads next). Returns whether to prefetch
// (decode, and the last stream's block ahead is inside the matrix); then the d's ahead are.
template <Kind K, int G, int T>
IQ_INLINE bool BlockPointers(const uint8_t* g, size_t gstride, const GroupBlock<K>* const* blocks,
                             const uint16_t* const* dw, int64_t b, int64_t nb, uintptr_t pf_end,
                             const GroupBlock<K>** blk, const char** ahead) {
  for (int i = 0; i < G; ++i) {
    blk[i] = blocks[i] + b;
    ahead[i] = reinterpret_cast<const char*>(
        b + kAhead < nb ? blocks[i] + b + kAhead
                        : GroupBlocks<K>(g + (i + G) * gstride, nb) + (b + kAhead - nb));
  }
  const bool pf = T == 1 && reinterpret_cast<uintptr_t>(ahead[G - 1]) < pf_end;
  for (int i = 0; pf && i < G; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(dw[i] + kR16Rows * (b + kAhead)), kPrefetchHint);
  }
  return pf;
}

// acc += block b's integers times d * d_a * kScale, per stream and token.
template <Kind K, int G, int T>
IQ_INLINE void AccumulateBlock(const uint16_t* const* dw, int64_t b, const uint8_t* a,
                               size_t a_stride, const __m512i (&isum)[G][T], __m512 (&acc)[G][T]) {
  for (int i = 0; i < G; ++i) {
    const __m512 d =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(dw[i] + kR16Rows * b)));
    for (int t = 0; t < T; ++t) {
      const float da = kScale<K> * reinterpret_cast<const BlockQ8_K*>(a + t * a_stride)[b].d;
      acc[i][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[i][t]),
                                  _mm512_mul_ps(d, _mm512_set1_ps(da)), acc[i][t]);
    }
  }
}

// IQ2_XS's / IQ2_S's sub-block j of block b (header comment): I += its integers, scaled.
template <Kind K, int G, int T>
IQ_INLINE void SubBlockPer16(const GroupBlock<K>* const* blk, int j, const uint8_t* ab,
                             size_t act_stride, const uint8_t* a, size_t a_stride, int64_t b,
                             const Tables& tab, __m512i (&isum)[G][T]) {
  __m512i c[G][4], sp[G];  // sp: [16] the i16 pair (2 s_0 + 1, 2 s_1 + 1) of each row
  for (int i = 0; i < G; ++i) {
    Codes<K>(*blk[i], j, tab, c[i]);
    const __m512i v =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[i]->sc[j])));
    // s_0 (bits 0-3) to bits 1-4 and s_1 (bits 4-7) to bits 17-20, then | 1 in both halves.
    const __m512i both = _mm512_or_si512(_mm512_slli_epi32(v, 1), _mm512_slli_epi32(v, 13));
    sp[i] = _mm512_ternarylogic_epi32(both, _mm512_set1_epi32(0x001E001E),
                                      _mm512_set1_epi32(0x00010001), 0xEA);  // A&B | C
    const __m512i off = _mm512_mullo_epi16(sp[i], _mm512_set1_epi16(-kIq2Offset));
    for (int t = 0; t < T; ++t) {
      const auto* at = reinterpret_cast<const BlockQ8_K*>(a + t * a_stride) + b;
      isum[i][t] = _mm512_dpwssd_epi32(
          isum[i][t], off, _mm512_set1_epi32(static_cast<int>(LoadU32(at->bsums + 2 * j))));
    }
  }
#pragma GCC unroll 8
  for (int m = 0; m < 8; ++m) {
    __m512i at[T];
    for (int t = 0; t < T; ++t) {
      at[t] = _mm512_set1_epi32(static_cast<int>(LoadU32(ab + t * act_stride + 32 * j + 4 * m)));
    }
    for (int i = 0; i < G; ++i) {
      const __m512i u = Levels<K>(c[i], m, tab);
      for (int t = 0; t < T; ++t) {
        isum[i][t] = _mm512_dpwssd_epi32(isum[i][t], _mm512_maddubs_epi16(u, at[t]), sp[i]);
      }
    }
  }
}

// y[t * ldy + 16 i + r] = row r of group i . token t, G groups (at g + i * gstride) x T tokens
// over nb blocks. act: token 0's permuted quants (tokens act_stride bytes apart); a: token 0's
// Q8_K row (a_stride apart, for the d's); aux (IQ2_XXS): token 0's -43 B_j per block (tokens
// nb * 8 apart). Decode (T = 1) prefetches kAhead blocks ahead per stream, stopping at pf_end.
template <Kind K, int G, int T>
void Tile(const uint8_t* g, size_t gstride, const uint8_t* act, size_t act_stride, const uint8_t* a,
          size_t a_stride, const int32_t* aux, int64_t nb, uintptr_t pf_end, const Tables& tab,
          float* y, int64_t ldy) {
  constexpr int kPerSub = (kLines<K> - 1) / 8;  // prefetched lines per sub-block (+1-4 per block)
  // The first sub-block line: every layout here keeps its scale (and index-bit) lines first
  // (repack.h).
  constexpr int kSub0 = kLines<K> - 8 * kPerSub;
  const __m512i zero = _mm512_setzero_si512();
  __m512 acc[G][T];
  const uint16_t* dw[G];
  const GroupBlock<K>* blocks[G];
  InitStreams<K, G, T>(g, gstride, nb, dw, blocks, acc);
  for (int64_t b = 0; b < nb; ++b) {
    const GroupBlock<K>* blk[G];
    const char* ahead[G];
    const bool pf = BlockPointers<K, G, T>(g, gstride, blocks, dw, b, nb, pf_end, blk, ahead);
    // The lines before the sub-blocks' (IQ2_XXS, IQ3_XXS: 1, IQ3_S, IQ2_XS: 3, IQ2_S: 4).
    for (int i = 0; pf && i < G; ++i) {
      for (int l = 0; l < kSub0; ++l) _mm_prefetch(ahead[i] + 64 * l, kPrefetchHint);
    }
    const uint8_t* ab = act + b * kQkK;
    __m512i isum[G][T];
    for (int i = 0; i < G; ++i) {
      for (int t = 0; t < T; ++t) isum[i][t] = zero;
    }
    // IQ2_XXS: each sub-block's lookups issued one sub-block ahead (software pipelining), so
    // that the lookup chain (index load, vpmovb2m, vpermi2b, blend) is done by the time its
    // selects and vpdpbusd come: Zen 5 bench_gemv 1 thread in cache 1.06-1.16x, prefill 2-16
    // tokens 1.07-1.10x, cold and the V3 layer unchanged (memory-side there). Not tried for the
    // others: by count, IQ3_XXS's four lookup vectors per stream ahead would pass the 32
    // registers beside the current ones.
    constexpr bool kPipe = K == Kind::kIQ2XXS;
    __m512i ahead_codes[G][2];
    if constexpr (kPipe) {
      for (int i = 0; i < G; ++i) Lookups<K>(*blk[i], 0, tab, ahead_codes[i]);
    }
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      __m512i s[G][2];  // [16] i32 2 s + 1 of sub-blocks 2p, 2p + 1
      for (int i = 0; !ScalePer16(K) && i < G; ++i) {
        const __m512i v =
            _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[i]->sc[p])));
        const __m512i m30 = _mm512_set1_epi32(30), one = _mm512_set1_epi32(1);
        s[i][0] = _mm512_ternarylogic_epi32(_mm512_slli_epi32(v, 1), m30, one, 0xEA);  // A&B | C
        s[i][1] = _mm512_ternarylogic_epi32(_mm512_srli_epi32(v, 3), m30, one, 0xEA);
      }
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const int j = 2 * p + h;
        for (int i = 0; pf && i < G; ++i) {
          for (int l = 0; l < kPerSub; ++l) {
            _mm_prefetch(ahead[i] + 64 * (kSub0 + kPerSub * j + l), kPrefetchHint);
          }
        }
        if constexpr (ScalePer16(K)) {
          SubBlockPer16<K, G, T>(blk, j, ab, act_stride, a, a_stride, b, tab, isum);
          continue;
        }
        __m512i c[G][7], P[G][T];
        __m512i p0[T];  // -kOffset B_j of each token
        for (int t = 0; t < T; ++t) {
          p0[t] = _mm512_set1_epi32(aux[t * nb * kAuxInts<K> + b * kAuxInts<K> + j]);
        }
        if constexpr (kPipe) {
          __m512i cur[G][2];
          for (int i = 0; i < G; ++i) {
            cur[i][0] = ahead_codes[i][0];
            cur[i][1] = ahead_codes[i][1];
            if (j < 7) Lookups<K>(*blk[i], j + 1, tab, ahead_codes[i]);
          }
          for (int i = 0; i < G; ++i) Codes<K>(*blk[i], j, tab, c[i], cur[i]);
        } else {
          for (int i = 0; i < G; ++i) Codes<K>(*blk[i], j, tab, c[i]);
        }
        for (int i = 0; i < G; ++i) {
          for (int t = 0; t < T; ++t) P[i][t] = p0[t];
        }
#pragma GCC unroll 8
        for (int m = 0; m < 8; ++m) {
          __m512i at[T];
          for (int t = 0; t < T; ++t) {
            at[t] =
                _mm512_set1_epi32(static_cast<int>(LoadU32(ab + t * act_stride + 32 * j + 4 * m)));
          }
          for (int i = 0; i < G; ++i) {
            const __m512i u = Levels<K>(c[i], m, tab);
            for (int t = 0; t < T; ++t) P[i][t] = _mm512_dpbusd_epi32(P[i][t], u, at[t]);
          }
        }
        for (int i = 0; i < G; ++i) {
          for (int t = 0; t < T; ++t) {
            isum[i][t] = _mm512_add_epi32(isum[i][t], _mm512_mullo_epi32(P[i][t], s[i][h]));
          }
        }
      }
    }
    AccumulateBlock<K, G, T>(dw, b, a, a_stride, isum, acc);
  }
  StoreTile<G, T>(acc, y, ldy);
}

// The 2-bit field k of every byte of x as its digit byte (0, 1, 2): field 0 by one AND (a
// simple op any vector pipe runs), the others by vgf2p8affineqb (one op for a shift and a
// mask, but it competes with vpermb / vpdpbusd for their pipes). Until 2026-12-03 field 0 took
// vgf2p8affineqb too: bench_gemv 1 thread hot iq1_s_r16 1.03-1.05x, iq1_m_r16 1.01-1.04x (4
// alternated rounds, Zen 5); every field by shift + AND was 0.96-1.05x.
IQ_INLINE __m512i PickDigit(__m512i x, int k) {
  if (k == 0) return _mm512_and_si512(x, _mm512_set1_epi8(3));
  return _mm512_gf2p8affine_epi64_epi8(x, _mm512_set1_epi64(static_cast<int64_t>(PickMatrix(k))),
                                       0);
}

// The IQ1 tiles, as Tile, and aux: token 0's kAuxInts<K> i32 per block (PermuteTokens; tokens
// nb * kAuxInts<K> apart). IQ1_S: per sub-block I += P * 8 (2 s + 1) + B * (2 s + 1) (e - 8),
// one vpdpwssd of the i16 pairs (P, B) and (8 (2 s + 1), (2 s + 1) (e - 8)).
// IQ1_M: P0 / P1 take the activations with groups 2-3 / 0-1 zeroed (one per half's scale), and
// I += P_h * 8 (2 s_h + 1) + vpdpwssd of the half's pair (2 s_h + 1) (e_g - 8) with its groups'
// activation sums: the same integer as the scalar dot's sum over groups of (2 s_h + 1) (8 G_g
// + e_g S_g).
template <Kind K, int G, int T>
void TileIq1(const uint8_t* g, size_t gstride, const uint8_t* act, size_t act_stride,
             const uint8_t* a, size_t a_stride, const int32_t* aux, int64_t nb, uintptr_t pf_end,
             const Tables& tab, float* y, int64_t ldy) {
  constexpr bool kM = K == Kind::kIQ1M;
  constexpr int kH = kM ? 2 : 1;  // scales (halves) per sub-block
  const __m512i zero = _mm512_setzero_si512();
  __m512 acc[G][T];
  const uint16_t* dw[G];
  const GroupBlock<K>* blocks[G];
  InitStreams<K, G, T>(g, gstride, nb, dw, blocks, acc);
  for (int64_t b = 0; b < nb; ++b) {
    const GroupBlock<K>* blk[G];
    const char* ahead[G];
    const bool pf = BlockPointers<K, G, T>(g, gstride, blocks, dw, b, nb, pf_end, blk, ahead);
    const uint8_t* ab = act + b * kActBytes<K>;
    __m512i isum[G][T];
    for (int i = 0; i < G; ++i) {
      for (int t = 0; t < T; ++t) isum[i][t] = zero;
    }
#pragma GCC unroll 2
    for (int j = 0; j < 8; ++j) {
      // 14 / 16 lines per block: two lines of the block ahead per sub-block (IQ1_S: 0-6).
      for (int i = 0; pf && (kM || j < 7) && i < G; ++i) {
        _mm_prefetch(ahead[i] + 128 * j, kPrefetchHint);
        _mm_prefetch(ahead[i] + 128 * j + 64, kPrefetchHint);
      }
      // ls8: IQ1_M's 8 (2 s_h + 1) per half (unused by IQ1_S); cb: IQ1_M's half's pair of
      // (2 s_h + 1) (e_g - 8), IQ1_S's pair (8 (2 s + 1), (2 s + 1) (e - 8)): [16] i16 pairs.
      __m512i c[G], d4[G], e[G], ls8[G][kH], cb[G][kH], P[G][T][kH];
      for (int i = 0; i < G; ++i) {
        const __m512i x = _mm512_loadu_si512(blk[i]->A(j));
        const __mmask64 bit7 = _mm512_movepi8_mask(x);
        c[i] = Lookup256(tab.c0, x, bit7);
        d4[i] = Lookup256(tab.c1, x, bit7);
        __m512i words;
        if constexpr (kM) {
          words = _mm512_loadu_si512(blk[i]->W(j));
          for (int h = 0; h < 2; ++h) {
            const __m512i sv = _mm512_srli_epi32(words, quant::kIq1mR16HalfShift[h]);
            ls8[i][h] = _mm512_permutex2var_epi32(tab.m_ls8[0], sv, tab.m_ls8[1]);
            cb[i][h] = _mm512_permutex2var_epi32(tab.m_ec[0], sv, tab.m_ec[1]);
          }
        } else {
          words = _mm512_permutexvar_epi8(tab.spread,
                                          _mm512_maskz_loadu_epi8(0xFFFFFFFFFFFFull, blk[i]->F(j)));
          const __m512i sv = _mm512_srli_epi32(words, quant::kIq1R16ScaleShift);
          cb[i][0] = _mm512_permutexvar_epi32(sv, tab.pair);
        }
        e[i] = _mm512_permutexvar_epi8(_mm512_multishift_epi64_epi8(tab.shift, words), tab.hi);
        for (int t = 0; t < T; ++t) {
          for (int h = 0; h < kH; ++h) P[i][t][h] = zero;
        }
      }
#pragma GCC unroll 8
      for (int m = 0; m < 8; ++m) {
        __m512i at[T][kH];
        for (int t = 0; t < T; ++t) {
          for (int h = 0; h < kH; ++h) {
            at[t][h] = _mm512_set1_epi32(
                static_cast<int>(LoadU32(ab + t * act_stride + h * kQkK + 32 * j + 4 * m)));
          }
        }
        for (int i = 0; i < G; ++i) {
          const __m512i u = m < 4 ? PickDigit(c[i], m) : m == 4 ? d4[i] : PickDigit(e[i], m - 5);
          for (int t = 0; t < T; ++t) {
            for (int h = 0; h < kH; ++h) P[i][t][h] = _mm512_dpbusd_epi32(P[i][t][h], u, at[t][h]);
          }
        }
      }
      for (int t = 0; t < T; ++t) {
        const int32_t* ax = aux + t * nb * kAuxInts<K> + b * kAuxInts<K>;
        __m512i bhi = zero;  // IQ1_S: B_j << 16 (IQ1_M's sums are per half, below)
        if constexpr (!kM) bhi = _mm512_set1_epi32(ax[j]);
        for (int i = 0; i < G; ++i) {
          for (int h = 0; h < kH; ++h) {
            if constexpr (kM) {  // the half's two groups' sums, an i16 pair
              const __m512i v =
                  _mm512_add_epi32(isum[i][t], _mm512_mullo_epi32(P[i][t][h], ls8[i][h]));
              isum[i][t] = _mm512_dpwssd_epi32(v, cb[i][h], _mm512_set1_epi32(ax[2 * j + h]));
            } else {  // (P, B) as an i16 pair (|P| <= 2 x 127 x 32 = 8128) against tab.pair's
              const __m512i pb = _mm512_mask_blend_epi16(0xAAAAAAAAu, P[i][t][h], bhi);
              isum[i][t] = _mm512_dpwssd_epi32(isum[i][t], pb, cb[i][h]);
            }
          }
        }
      }
    }
    AccumulateBlock<K, G, T>(dw, b, a, a_stride, isum, acc);
  }
  StoreTile<G, T>(acc, y, ldy);
}

using TileFn = void (*)(const uint8_t*, size_t, const uint8_t*, size_t, const uint8_t*, size_t,
                        const int32_t*, int64_t, uintptr_t, const Tables&, float*, int64_t);
template <Kind K, int G, int T>
constexpr TileFn TileFor() {
  if constexpr (IsIq1(K)) {
    return TileIq1<K, G, T>;
  } else {
    return Tile<K, G, T>;
  }
}
template <Kind K, int G, int T>
constexpr TileFn kTile = TileFor<K, G, T>();

// Groups (streams) per decode pass, chosen by measurement (Zen 5, bench_gemv, alternated
// rounds; why a third stream pays for IQ1_S alone is not established): IQ1_S 3, decode
// 1.06-1.22x over 2 (V3 MoE layer 1.05-1.10x); with 3 the others lost or did not gain
// (IQ2_XXS 0.91x hot, IQ3_XXS 0.79-0.83x, IQ2_S 0.53x, IQ1_M 0.97-1.05x), so they keep 2.
template <Kind K>
constexpr int kDecodeGroups = K == Kind::kIQ1S ? 3 : 2;

// Decode: kDecodeGroups<K> groups per pass (streams sharing the activation dwords), then 2, 1.
// Several tokens: per group, 4 tokens per pass, then the rest 3 / 2 / 1 (the group's 16 rows x n
// stay in L1 / L2 while the tokens go by).
template <Kind K>
void Gemm(const void* w_ptr, size_t w_stride, int64_t n_rows, const void* a_ptr, size_t a_stride,
          int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  const auto* w = static_cast<const uint8_t*>(w_ptr);
  const auto* a = static_cast<const uint8_t*>(a_ptr);
  const int64_t nb = n / kQkK;
  const size_t gstride = static_cast<size_t>(kR16Rows) * w_stride;
  const Tables tab = LoadTables<K>();
  // The permuted quants of every token (IQ1_M's twice) and the IQ1 activation sums (IQ1_S 32,
  // IQ1_M 64 bytes per block and token): on the stack for one token of up to 16384 values
  // (IQ1_M: 7168, 576 bytes per 256; a decode call), else on the heap (prefill).
  constexpr int64_t kStackBytes = 16384 + 2048;
  alignas(64) uint8_t stack[kStackBytes];
  std::vector<uint8_t> heap;
  const int64_t perm_bytes = n_tok * nb * (kActBytes<K> + 4 * kAuxInts<K>);
  if (perm_bytes > kStackBytes) heap.resize(static_cast<size_t>(perm_bytes));
  uint8_t* perm = perm_bytes > kStackBytes ? heap.data() : stack;
  PermuteTokens<K>(a, a_stride, n_tok, nb, perm);
  const auto* aux = reinterpret_cast<const int32_t*>(perm + n_tok * nb * kActBytes<K>);
  const size_t act_stride = static_cast<size_t>(nb * kActBytes<K>);
  auto group = [&](int64_t r0) { return w + static_cast<size_t>(r0) * w_stride; };
  if (n_tok == 1) {
    const uintptr_t end = PrefetchEnd(w, n_rows, w_stride);
    int64_t r0 = 0;
    for (; r0 + kDecodeGroups<K> * kR16Rows <= n_rows; r0 += kDecodeGroups<K> * kR16Rows) {
      kTile<K, kDecodeGroups<K>, 1>(group(r0), gstride, perm, act_stride, a, a_stride, aux, nb, end,
                                    tab, y + r0, ldy);
    }
    if (2 < kDecodeGroups<K> && r0 + 2 * kR16Rows <= n_rows) {
      kTile<K, 2, 1>(group(r0), gstride, perm, act_stride, a, a_stride, aux, nb, end, tab, y + r0,
                     ldy);
      r0 += 2 * kR16Rows;
    }
    if (r0 < n_rows) {
      kTile<K, 1, 1>(group(r0), gstride, perm, act_stride, a, a_stride, aux, nb, end, tab, y + r0,
                     ldy);
    }
    return;
  }
  constexpr TileFn kTiles[5] = {nullptr, kTile<K, 1, 1>, kTile<K, 1, 2>, kTile<K, 1, 3>,
                                kTile<K, 1, 4>};
  for (int64_t r0 = 0; r0 < n_rows; r0 += kR16Rows) {
    for (int64_t t = 0; t < n_tok; t += 4) {
      const int64_t tn = n_tok - t < 4 ? n_tok - t : 4;
      kTiles[tn](group(r0), gstride, perm + t * act_stride, act_stride, a + t * a_stride, a_stride,
                 aux + t * nb * kAuxInts<K>, nb, 0, tab, y + t * ldy + r0, ldy);
    }
  }
}

#undef IQ_INLINE

}  // namespace

void GemmIQ2XXSR16_Q8K_Avx512Vbmi(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                                  size_t a_stride, int64_t n_tok, int64_t n, float* y,
                                  int64_t ldy) {
  Gemm<Kind::kIQ2XXS>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}
void GemmIQ3XXSR16_Q8K_Avx512Vbmi(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                                  size_t a_stride, int64_t n_tok, int64_t n, float* y,
                                  int64_t ldy) {
  Gemm<Kind::kIQ3XXS>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}
void GemmIQ2XSR16_Q8K_Avx512Vbmi(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                                 size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  Gemm<Kind::kIQ2XS>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}
void GemmIQ2SR16_Q8K_Avx512Vbmi(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                                size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  Gemm<Kind::kIQ2S>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}
void GemmIQ3SR16_Q8K_Avx512Vbmi(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                                size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  Gemm<Kind::kIQ3S>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}
void GemmIQ1SR16_Q8K_Avx512Vbmi(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                                size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  Gemm<Kind::kIQ1S>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}
void GemmIQ1MR16_Q8K_Avx512Vbmi(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                                size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  Gemm<Kind::kIQ1M>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}

}  // namespace moesplit::gemv::internal
