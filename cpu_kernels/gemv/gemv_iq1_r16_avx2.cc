// IQ1_S / IQ1_M weights in their 16-row layouts kIQ1_S_R16 / kIQ1_M_R16
// (cpu_kernels/quant/repack.h) x Q8_K activations, AVX2 + FMA tier (also the AVX-512 tier's, and
// the VNNI tier's on CPUs without VBMI / GFNI). Compiled with MOESPLIT_FLAGS_AVX2
// (gemv/kquants.cmake). The integer per (row, block, token) is the scalar dot's
// (gemv_iq_scalar.cc), with the grid values t_i = d_i - 1 written as their digits d_i in {0, 1, 2}:
//   I = sum_j (2 s_j + 1) (8 sum_i d_i q8_i + (e_j - 8) B_j),   y = sum_blocks I d d_a / 8,
// e_j = +1 / -1 the sign of sub-block j's delta, B_j its 32 activations' sum (the Q8_K bsums).
//
// Why: the file layout's AVX2 tile (gemv_iq_avx2.cc) fetches each group's 8 values from the
// 2048-entry grid by an 11-bit index assembled with scalar ops (4 loads and inserts per 32
// values and row) and reduces each row across lanes: ~1.4-1.7 GB/s of IQ1_S per Zen 3 core,
// a twentieth of what a core reads. The 16-row layout stores each group's digits as two numbers
// scaled to fill their bits (quant::Iq1DigitByte / Iq1DigitField), from which multiplications by
// 3 carry out the digits one by one: no table, no scalar op, and the lanes are rows. Per block,
// half h (rows 8 h .. 8 h + 7: lane r = row 8 h + r) and sub-block j:
//   x = a[j]'s 32 bytes of the half (byte 4 r + g: row r's group g), xor 0x80 so that signed
//     compares order them; five times: digit = [x >= 86] + [x >= 171] (two vpcmpgtb, an add,
//     an abs: floor(3 x / 256)), then x = 3 x mod 256 (two vpaddb; the bias survives: 3 x 128
//     = 128 mod 256). The digits of values 4, 3, 2, 1, 0 of the 32 (row, group) bytes.
//   f[j]'s 8 words spread into the dword lanes (vpshufb: word 0 = the word's bytes 0-1, word 1
//     = bytes 1-2), each group's 5-bit field moved to the top of its byte (two vpmullw: x 8 and
//     x 2 put the fields of groups 0 and 2 there, x 64 and x 16 those of groups 1 and 3; two
//     masks, an or): the same steps give values 7, 6, 5. The top 4 bits of the spread words
//     (scale s_j, sign) pick the i16 pair K = (8 (2 s_j + 1), (2 s_j + 1) (e_j - 8)) from two
//     8-entry tables (vpermd each, blended by the sign bit).
//   per value m: P += maddubs(digit_m, the token's dword of values 32 j + 8 g + m, g < 4)
//     [16] i16, |P| <= 8 x 2 x 2 x 128 = 4096
//   I += madd(blend16(madd(P, 1), B_j << 16), K)   [8] i32: 8 (2 s + 1) P_r + (2 s + 1)(e - 8) B_j
// ~80 vector ops per 8 rows x 32 values and token, none of them a lookup in memory. The
// activations are permuted once per call (out[32 j + 4 m + g] = qs[32 j + 8 g + m], as the VNNI
// kernel's), with B_j << 16 after each block's quants.
// IQ1_M: the same digits from its dword words; its scales are per 16 values and its delta
// signs per 8 (SubBlock). From wide::kMinTokens tokens on, the wide path (gemv_avx2_wide.inc)
// decodes each block once per 64 tokens (Iq1R16Fmt::DecodeSet).
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

#include "cpu_kernels/gemv/gemv_avx2_tile.inc"
#include "cpu_kernels/gemv/gemv_avx2_wide.inc"

using quant::BlockIQ1_M_R16;
using quant::BlockIQ1_S_R16;
using quant::BlockQ8_K;
using quant::kQkK;
using quant::kR16Rows;

#define IQ_INLINE [[gnu::always_inline]] inline

// kM: IQ1_M (kIQ1_M_R16), else IQ1_S (kIQ1_S_R16).
template <bool kM>
using Block = std::conditional_t<kM, BlockIQ1_M_R16, BlockIQ1_S_R16>;

// Bytes per token and block of the permuted activations: 256 quants, then per sub-block j
// IQ1_S one i32 B_j << 16; IQ1_M three: the i16 pairs (B_2j, B_2j+1) (16-value sums), (S_0,
// S_1) and (S_2, S_3) (the 4 groups' 8-value sums).
template <bool kM>
constexpr int64_t kActBytes = kQkK + (kM ? 96 : 32);

// n_tok tokens' blocks (Q8_K rows a_stride apart) -> out + (t nb + b) kActBytes<kM>.
template <bool kM>
void PermuteTokens(const uint8_t* a, size_t a_stride, int64_t n_tok, int64_t nb, uint8_t* out) {
  // Within each 128-bit lane (groups 2 l, 2 l + 1 of a sub-block): byte 2 k + g <- 8 g + k.
  const __m256i pair = _mm256_setr_epi8(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15, 0, 8,
                                        1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
  // The low i16 of each lane's two qword sums side by side in its dword 0.
  const __m256i sums_pair =
      _mm256_setr_epi8(0, 1, 8, 9, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 1, 8, 9, -1,
                       -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  for (int64_t t = 0; t < n_tok; ++t) {
    const auto* at = reinterpret_cast<const BlockQ8_K*>(a + t * a_stride);
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* o = out + (t * nb + b) * kActBytes<kM>;
      for (int j = 0; j < 8; ++j) {
        const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at[b].qs + 32 * j));
        const __m256i q = _mm256_shuffle_epi8(raw, pair);
        // lane 0: qwords 0 of both lanes (values 0-3), lane 1: qwords 1 (values 4-7); then the
        // word pairs (groups 0-1, groups 2-3) of each value side by side.
        const __m256i y = _mm256_permute4x64_epi64(q, 0xD8);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 32 * j),
                            _mm256_unpacklo_epi16(y, _mm256_bsrli_epi128(y, 8)));
        if constexpr (kM) {
          // The groups' sums: vpsadbw of q + 128 against 0, less 8 x 128 (|S_g| <= 1024).
          const __m256i s = _mm256_shuffle_epi8(
              _mm256_sub_epi64(_mm256_sad_epu8(_mm256_xor_si256(raw, _mm256_set1_epi8(-128)),
                                               _mm256_setzero_si256()),
                               _mm256_set1_epi64x(8 * 128)),
              sums_pair);
          const int32_t aux[3] = {static_cast<int32_t>(LoadU32(at[b].bsums + 2 * j)),
                                  _mm256_extract_epi32(s, 0), _mm256_extract_epi32(s, 4)};
          std::memcpy(o + kQkK + 12 * j, aux, sizeof(aux));
        }
      }
      if constexpr (!kM) {
        const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at[b].bsums));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + kQkK),
                            _mm256_slli_epi32(_mm256_madd_epi16(bs, _mm256_set1_epi16(1)), 16));
      }
    }
  }
}

struct Consts {
  __m256i bias;                // [32] 0x80
  __m256i ge86, ge171;         // [32] -43, 42: x - 128 > these <=> x >= 86, x >= 171
  __m256i spread;              // vpshufb control: the rows' words -> dwords (Codes)
  __m256i mul_a, mul_b;        // [16] i16 (8, 2), (64, 16): the fields' shifts
  __m256i mask_a, mask_b;      // [16] i16 0x00F8, 0xF800
  __m256i pair_pos, pair_neg;  // IQ1_S: [8] i32 by s: the i16 pair K for e = +1 / -1
  __m256i ones16;              // [16] i16 1
  __m256i lo_twice, hi_twice;  // vpshufb controls: each dword's word 0 / word 1, twice
};
template <bool kM>
IQ_INLINE Consts MakeConsts() {
  Consts c;
  c.bias = _mm256_set1_epi8(static_cast<char>(0x80));
  c.ge86 = _mm256_set1_epi8(86 - 128 - 1);
  c.ge171 = _mm256_set1_epi8(171 - 128 - 1);
  // dword r = bytes (0, 1, 1, 2) of its row's word. IQ1_S (3-byte words): lane 0 reads the
  // half's words from its byte 0 (rows 0-3 at 3 r), lane 1 from byte 8 (rows 4-7 at 4 + 3 r);
  // IQ1_M: the rows' dwords in place.
  alignas(32) uint8_t sp[32];
  for (int i = 0; i < 32; ++i) {
    const int r = (i % 16) / 4, k = i % 4, byte = k < 2 ? k : k - 1;
    sp[i] = static_cast<uint8_t>(kM ? 4 * r + byte : (i < 16 ? 0 : 4) + 3 * r + byte);
  }
  c.spread = _mm256_load_si256(reinterpret_cast<const __m256i*>(sp));
  c.mul_a = _mm256_set1_epi32(8 | 2 << 16);
  c.mul_b = _mm256_set1_epi32(64 | 16 << 16);
  c.mask_a = _mm256_set1_epi16(0x00F8);
  c.mask_b = _mm256_set1_epi16(static_cast<int16_t>(0xF800));
  if constexpr (!kM) {
    alignas(32) int32_t pos[8], neg[8];
    for (int s = 0; s < 8; ++s) {
      const int k = 2 * s + 1;
      pos[s] = static_cast<int32_t>(static_cast<uint16_t>(8 * k) |
                                    static_cast<uint32_t>(static_cast<uint16_t>(-7 * k)) << 16);
      neg[s] = static_cast<int32_t>(static_cast<uint16_t>(8 * k) |
                                    static_cast<uint32_t>(static_cast<uint16_t>(-9 * k)) << 16);
    }
    c.pair_pos = _mm256_load_si256(reinterpret_cast<const __m256i*>(pos));
    c.pair_neg = _mm256_load_si256(reinterpret_cast<const __m256i*>(neg));
  }
  c.ones16 = _mm256_set1_epi16(1);
  c.lo_twice = _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13, 0, 1, 0, 1, 4,
                                5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13);
  c.hi_twice = _mm256_add_epi8(c.lo_twice, _mm256_set1_epi8(2));
  return c;
}

// The digit carried out of x (bytes biased by 0x80), and x <- 3 x mod 256 when `advance`.
IQ_INLINE __m256i Digit(__m256i* x, bool advance, const Consts& c) {
  const __m256i d = _mm256_abs_epi8(
      _mm256_add_epi8(_mm256_cmpgt_epi8(*x, c.ge86), _mm256_cmpgt_epi8(*x, c.ge171)));
  if (advance) *x = _mm256_add_epi8(*x, _mm256_add_epi8(*x, *x));
  return d;
}

// Half h of sub-block j of block w: x / xf = the biased codes of values 0-4 / 5-7 (byte
// 4 r + g: row 8 h + r's group g), and the rows' factors ([8] i32 lanes, i16 pairs):
//   IQ1_S k = (8 (2 s_j + 1), (2 s_j + 1)(e_j - 8));
//   IQ1_M k = (8 k_0, 8 k_1) (k_h = 2 s_h + 1 of the 16-value half h: groups 2 h, 2 h + 1),
//     e01 = (k_0 e_0, k_0 e_1), e23 = (k_1 e_2, k_1 e_3) (e_g = +1 / -1 group g's delta sign),
//     kk = (k_0, k_1), word = the 8 rows' dword words.
struct HalfCodes {
  __m256i x, xf, k, e01, e23, kk, word;
};
template <bool kM>
IQ_INLINE HalfCodes Codes(const Block<kM>& w, int j, int h, const Consts& c) {
  HalfCodes r;
  r.x = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.A(j) + 32 * h)),
                         c.bias);
  __m256i s;  // dword r: word 0 = the row's word bits 0-15, word 1 = bits 8-23
  if constexpr (kM) {
    r.word = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.W(j) + 8 * h));
    s = _mm256_shuffle_epi8(r.word, c.spread);
  } else {
    const uint8_t* f = w.F(j) + 24 * h;  // 24 bytes: the half's 8 words
    s = _mm256_shuffle_epi8(_mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(f + 8),
                                                reinterpret_cast<const __m128i*>(f)),
                            c.spread);
  }
  r.xf =
      _mm256_xor_si256(_mm256_or_si256(_mm256_and_si256(_mm256_mullo_epi16(s, c.mul_a), c.mask_a),
                                       _mm256_and_si256(_mm256_mullo_epi16(s, c.mul_b), c.mask_b)),
                       c.bias);
  if constexpr (kM) {
    // hw = the word's bits 16-31: s_0 at 4-6, e_0 / e_1's signs at 7 / 8, s_1 at 9-11, e_2 /
    // e_3's at 12 / 13 (repack.h). v: hw, and hw >> 5 in the high word (s_1 where s_0 is).
    const __m256i hw = _mm256_srli_epi32(r.word, 16);
    const __m256i v = _mm256_or_si256(hw, _mm256_slli_epi32(hw, 11));
    r.k = _mm256_add_epi16(_mm256_and_si256(v, _mm256_set1_epi16(0x70)), _mm256_set1_epi16(8));
    r.kk = _mm256_srli_epi16(r.k, 3);
    // Sign bits 7, 8 (12, 13) of hw at bit 15 of the pair's words, | 1: vpsignw's operand.
    const __m256i v1 = _mm256_or_si256(hw, _mm256_slli_epi32(hw, 15));  // high word: hw >> 1
    const __m256i both0 = _mm256_shuffle_epi8(r.kk, c.lo_twice);
    const __m256i both1 = _mm256_shuffle_epi8(r.kk, c.hi_twice);
    r.e01 = _mm256_sign_epi16(both0, _mm256_or_si256(_mm256_slli_epi16(v1, 8), c.ones16));
    r.e23 = _mm256_sign_epi16(both1, _mm256_or_si256(_mm256_slli_epi16(v1, 3), c.ones16));
  } else {
    // s's top 4 bits are the word's bits 20-23: s_j (vpermd reads bits 0-2), then the sign.
    const __m256i code = _mm256_srli_epi32(s, 28);
    r.k = _mm256_castps_si256(
        _mm256_blendv_ps(_mm256_castsi256_ps(_mm256_permutevar8x32_epi32(c.pair_pos, code)),
                         _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(c.pair_neg, code)),
                         _mm256_castsi256_ps(s)));
  }
  return r;
}

// Half h of sub-block j of block w, T tokens (act[t]: token t's permuted block): isum[t] lane r
// += row 8 h + r's sub-block integer:
//   IQ1_S madd(blend16(madd(P, 1), B_j << 16), k)
//   IQ1_M madd(P - (B_2j, B_2j+1), k) + madd(e01, (S_0, S_1)) + madd(e23, (S_2, S_3)), i.e.
//     sum_h k_h (8 P_h - 8 B_h) + sum_g k_h e_g S_g = sum_h k_h sum_g (8 P_g + (e_g - 8) S_g)
//     (P's words are the halves' sums P_h: |P_h - B_h| <= 4096 + 2048)
template <bool kM, int T>
IQ_INLINE void SubBlock(const Block<kM>& w, int j, int h, const uint8_t* const* act,
                        const Consts& c, __m256i (&isum)[T]) {
  HalfCodes hc = Codes<kM>(w, j, h, c);
  __m256i p[T];
  auto dot = [&](__m256i d, int m, bool first) {
    for (int t = 0; t < T; ++t) {
      const __m256i q = _mm256_maddubs_epi16(
          d, _mm256_set1_epi32(static_cast<int32_t>(LoadU32(act[t] + 32 * j + 4 * m))));
      p[t] = first ? q : _mm256_add_epi16(p[t], q);
    }
  };
#pragma GCC unroll 5
  for (int i = 0; i < 5; ++i) dot(Digit(&hc.x, i < 4, c), 4 - i, i == 0);  // values 4 .. 0
#pragma GCC unroll 3
  for (int i = 0; i < 3; ++i) dot(Digit(&hc.xf, i < 2, c), 7 - i, false);  // values 7 .. 5
  for (int t = 0; t < T; ++t) {
    if constexpr (kM) {
      const uint8_t* aux = act[t] + kQkK + 12 * j;
      const __m256i bp = _mm256_set1_epi32(static_cast<int32_t>(LoadU32(aux)));
      const __m256i s01 = _mm256_set1_epi32(static_cast<int32_t>(LoadU32(aux + 4)));
      const __m256i s23 = _mm256_set1_epi32(static_cast<int32_t>(LoadU32(aux + 8)));
      const __m256i x = _mm256_madd_epi16(_mm256_sub_epi16(p[t], bp), hc.k);
      isum[t] = _mm256_add_epi32(
          isum[t], _mm256_add_epi32(x, _mm256_add_epi32(_mm256_madd_epi16(hc.e01, s01),
                                                        _mm256_madd_epi16(hc.e23, s23))));
    } else {
      const __m256i pr = _mm256_madd_epi16(p[t], c.ones16);  // |.| <= 8192: an i16
      const __m256i bj = _mm256_set1_epi32(static_cast<int32_t>(LoadU32(act[t] + kQkK + 4 * j)));
      isum[t] =
          _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_blend_epi16(pr, bj, 0xAA), hc.k));
    }
  }
}

// y[t * ldy + 0 .. 16) = the group's rows . token t, T tokens (perm: token 0's permuted blocks,
// tokens act_stride apart; a[t]: token t's Q8_K blocks, for d_a).
template <bool kM, int T>
void Group(const uint8_t* g, int64_t nb, const uint8_t* perm, size_t act_stride,
           const BlockQ8_K* const* a, uintptr_t pf_end, const Consts& c, float* y, int64_t ldy) {
  const auto* dw = reinterpret_cast<const uint16_t*>(g);  // [nb][16] f16
  const auto* pay = reinterpret_cast<const Block<kM>*>(g + nb * kR16Rows * 2);
  __m256 acc[T][2];  // [token][half] x [8] f32
  for (int t = 0; t < T; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const auto* next = reinterpret_cast<const uint8_t*>(pay + b) + avx2_wide::kR16PrefetchBytes;
    avx2_wide::PrefetchLinesL2(next, sizeof(Block<kM>), pf_end);
    const uint8_t* act[T];
    for (int t = 0; t < T; ++t) act[t] = perm + t * act_stride + b * kActBytes<kM>;
#pragma GCC unroll 1
    for (int h = 0; h < 2; ++h) {
      __m256i isum[T];  // |.| <= 8 x (120 x 8192 + 135 x 4096)
      for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) SubBlock<kM, T>(pay[b], j, h, act, c, isum);
      avx2_wide::AccumulateHalf<T>(isum, dw + b * kR16Rows + 8 * h, 0.125f, a, b, h, acc);
    }
  }
  avx2_wide::StoreGroup<T>(acc, y, ldy);
}

// T tokens through every group.
template <bool kM, int T>
void Tokens(const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* perm,
            size_t act_stride, const uint8_t* a, size_t a_stride, int64_t nb, const Consts& c,
            float* y, int64_t ldy) {
  const BlockQ8_K* at[T];
  for (int t = 0; t < T; ++t) at[t] = reinterpret_cast<const BlockQ8_K*>(a + t * a_stride);
  const uintptr_t pf_end = PrefetchEnd(w, n_rows, w_stride);
  for (int64_t r0 = 0; r0 < n_rows; r0 += kR16Rows) {
    Group<kM, T>(w + static_cast<size_t>(r0) * w_stride, nb, perm, act_stride, at, pf_end, c,
                 y + r0, ldy);
  }
}

// The quads of values 4 q .. 4 q + 3 of every (row, group) from the digit vectors d[0..3] of
// those values (dword r: groups 0-3 of lane row r): out[g] dword r = (d[0], .., d[3]) bytes of
// row r's group g. A 4 x 4 byte transpose within each dword lane, then a 4 x 4 dword one.
IQ_INLINE void Quads(const __m256i* d, __m256i* out) {
  const __m256i t0 = _mm256_unpacklo_epi8(d[0], d[1]), t1 = _mm256_unpackhi_epi8(d[0], d[1]);
  const __m256i t2 = _mm256_unpacklo_epi8(d[2], d[3]), t3 = _mm256_unpackhi_epi8(d[2], d[3]);
  // u_r: lane row r's 4 quads (groups 0-3), rows 0-3 of each lane
  const __m256i u0 = _mm256_unpacklo_epi16(t0, t2), u1 = _mm256_unpackhi_epi16(t0, t2);
  const __m256i u2 = _mm256_unpacklo_epi16(t1, t3), u3 = _mm256_unpackhi_epi16(t1, t3);
  const __m256i v0 = _mm256_unpacklo_epi32(u0, u1), v1 = _mm256_unpackhi_epi32(u0, u1);
  const __m256i v2 = _mm256_unpacklo_epi32(u2, u3), v3 = _mm256_unpackhi_epi32(u2, u3);
  out[0] = _mm256_unpacklo_epi64(v0, v2);
  out[1] = _mm256_unpackhi_epi64(v0, v2);
  out[2] = _mm256_unpacklo_epi64(v1, v3);
  out[3] = _mm256_unpackhi_epi64(v1, v3);
}

// The wide path's view of the layouts (wide::TokenBlock takes a format with kR16), blocks of 16
// rows. IQ1_S: u = the digits, scale 8 (2 s_j + 1) and offset (2 s_j + 1)(e_j - 8) per 16
// values. IQ1_M: its delta signs are per 8 values, finer than the offsets' 16 (the Q8_K bsums),
// so u = 8 d + 1 + e_g in [0, 18] (the signed value 8 (d - 1) + e_g = u - 9), scale k_h and
// offset -9 k_h per 16 values (the file layout's tile does the same with its levels).
template <bool kM>
struct Iq1R16Fmt : FmtTraits {
  using Block = internal::Block<kM>;
  static constexpr bool kR16 = true;
  static constexpr bool kBsumInit = true;        // the offsets
  static constexpr int kMaxQuant = kM ? 18 : 2;  // the largest u
  // Blocks [b0, b0 + nbk) of the group at g: their d's, then their payloads.
  static void PrefetchChunk(const uint8_t* g, int64_t nb, int64_t b0, int64_t nbk) {
    avx2_wide::PrefetchGroupChunk(g, nb, b0, nbk, kR16Rows * 2, sizeof(Block));
  }
  // Set s (rows 8 s .. 8 s + 7) of block b of the group at g -> out: per sub-block j the
  // digits as in the decode (Codes, Digit), transposed into quads (8 j + 2 g + q: values
  // 32 j + 8 g + 4 q ..), and the factors spread to the scale and offset pairs.
  static void DecodeSet(const uint8_t* g, int64_t nb, int s, int64_t b, wide::SetBlock* out) {
    const auto* dw = reinterpret_cast<const uint16_t*>(g) + b * kR16Rows;  // [16] f16
    const Block& w = reinterpret_cast<const Block*>(g + nb * kR16Rows * 2)[b];
    const Consts c = MakeConsts<kM>();
    // IQ1_M: byte g of a row's dword <- the word's byte holding group g's sign (bits 23, 24,
    // 28, 29: byte 2 bit 7, byte 3 bits 0, 4, 5), tested against that bit.
    const __m256i sign_bytes =
        _mm256_setr_epi8(2, 3, 3, 3, 6, 7, 7, 7, 10, 11, 11, 11, 14, 15, 15, 15, 2, 3, 3, 3, 6, 7,
                         7, 7, 10, 11, 11, 11, 14, 15, 15, 15);
    const __m256i sign_bits = _mm256_set1_epi32(static_cast<int32_t>(0x20100180u));
    for (int j = 0; j < 8; ++j) {
      HalfCodes hc = Codes<kM>(w, j, s, c);
      __m256i d[8];  // [value m] x [32] u, byte 4 r + g
      for (int i = 0; i < 5; ++i) d[4 - i] = Digit(&hc.x, i < 4, c);
      for (int i = 0; i < 3; ++i) d[7 - i] = Digit(&hc.xf, i < 2, c);
      if constexpr (kM) {
        // 1 + e_g: 2 where group g's sign bit is clear, else 0
        const __m256i set = _mm256_cmpeq_epi8(
            _mm256_and_si256(_mm256_shuffle_epi8(hc.word, sign_bytes), sign_bits), sign_bits);
        const __m256i e1 = _mm256_andnot_si256(set, _mm256_set1_epi8(2));
        // 8 d (d <= 2: the 16-bit shift moves no bit across a byte) + 1 + e_g
        for (int m = 0; m < 8; ++m) d[m] = _mm256_add_epi8(_mm256_slli_epi16(d[m], 3), e1);
      }
      for (int q = 0; q < 2; ++q) {
        __m256i quads[4];  // [group]
        Quads(d + 4 * q, quads);
        for (int gi = 0; gi < 4; ++gi) {
          _mm256_store_si256(reinterpret_cast<__m256i*>(out->u[8 * j + 2 * gi + q]), quads[gi]);
        }
      }
      if constexpr (kM) {  // (k_h, k_h) for 16-value group 2 j + h, offsets (-9 k_0, -9 k_1)
        _mm256_store_si256(reinterpret_cast<__m256i*>(out->s[2 * j]),
                           _mm256_shuffle_epi8(hc.kk, c.lo_twice));
        _mm256_store_si256(reinterpret_cast<__m256i*>(out->s[2 * j + 1]),
                           _mm256_shuffle_epi8(hc.kk, c.hi_twice));
        _mm256_store_si256(reinterpret_cast<__m256i*>(out->o[j]),
                           _mm256_mullo_epi16(hc.kk, _mm256_set1_epi16(-9)));
      } else {  // (8 k, 8 k) for both 16-value groups, offsets (k (e - 8), k (e - 8))
        const __m256i sc = _mm256_shuffle_epi8(hc.k, c.lo_twice);
        _mm256_store_si256(reinterpret_cast<__m256i*>(out->s[2 * j]), sc);
        _mm256_store_si256(reinterpret_cast<__m256i*>(out->s[2 * j + 1]), sc);
        _mm256_store_si256(reinterpret_cast<__m256i*>(out->o[j]),
                           _mm256_shuffle_epi8(hc.k, c.hi_twice));
      }
    }
    _mm256_store_ps(out->d, _mm256_mul_ps(avx2_wide::Halves8(dw + avx2_wide::kSetRows * s),
                                          _mm256_set1_ps(0.125f)));
  }
};

// The wide path from wide::kMinTokens tokens (but for a last token block under it), then 2
// tokens per pass and the odd one alone.
template <bool kM>
void Gemm(const void* w, size_t w_stride, int64_t n_rows, const void* a, size_t a_stride,
          int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* ab = static_cast<const uint8_t*>(a);
  const int64_t nb = n / kQkK;
  int64_t t = avx2_wide::WideTokens(n_tok, wide::kMinTokens, wide::kTokBlock);
  if (t > 0) wide::WideGemm<Iq1R16Fmt<kM>>(wb, w_stride, n_rows, ab, a_stride, t, n, y, ldy);
  const int64_t rest = n_tok - t;
  if (rest == 0) return;
  // The rest's permuted blocks: on the stack for a decode call of up to 16384 values (64
  // blocks), else on the heap.
  constexpr int64_t kStackBytes = 64 * kActBytes<kM>;
  alignas(32) uint8_t stack[kStackBytes];
  std::vector<uint8_t> heap;
  const int64_t bytes = rest * nb * kActBytes<kM>;
  if (bytes > kStackBytes) heap.resize(static_cast<size_t>(bytes));
  uint8_t* perm = bytes > kStackBytes ? heap.data() : stack;
  const uint8_t* at = ab + t * a_stride;
  PermuteTokens<kM>(at, a_stride, rest, nb, perm);
  const auto act_stride = static_cast<size_t>(nb * kActBytes<kM>);
  const Consts c = MakeConsts<kM>();
  // Two tokens per pass, the odd one alone. Passes of 4 measured no faster than two of 2
  // (IQ1_S, bench_gemv 256 x 7168, 4 tokens: 90-93 GFLOP/s either way) and, spilling 16 ymm of
  // state, ran a quarter of that at some stack offsets (the spills' stores 4 KB apart from the
  // activation loads: the same binary 23 GFLOP/s from one path, 91 from another).
  int64_t i = 0;
  for (; i + 2 <= rest; i += 2) {
    Tokens<kM, 2>(wb, w_stride, n_rows, perm + i * act_stride, act_stride, at + i * a_stride,
                  a_stride, nb, c, y + (t + i) * ldy, ldy);
  }
  if (i < rest) {
    Tokens<kM, 1>(wb, w_stride, n_rows, perm + i * act_stride, act_stride, at + i * a_stride,
                  a_stride, nb, c, y + (t + i) * ldy, ldy);
  }
}

}  // namespace

void GemmIQ1SR16_Q8K_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                          size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  Gemm<false>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}
void GemmIQ1MR16_Q8K_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                          size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  Gemm<true>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}

#undef IQ_INLINE
#undef MOESPLIT_KQ_INLINE

}  // namespace moesplit::gemv::internal
