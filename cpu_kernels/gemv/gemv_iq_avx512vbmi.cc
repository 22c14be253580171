// IQ2_XXS / IQ1_S / IQ1_M weights x Q8_K activations, AVX-512 VNNI tier on CPUs with AVX-512
// VBMI and GFNI (every CPU with VNNI and VBMI has GFNI: Ice Lake, Sapphire Rapids, Zen 4 on).
// Compiled with MOESPLIT_FLAGS_AVX512VNNI + -mavx512vbmi -mgfni (gemv/kquants.cmake); reached
// only through KernelsFor(IsaTier::kAvx512Vnni / kAmx) where DetectCpuFeatures().avx512vbmi
// and .gfni.
// The integers per block are the scalar dot's (gemv_iq_scalar.cc).
//
// Why this shape: at ~2 bits/weight a core must turn each weight byte into ~4 products at
// memory speed, so the op count per block is what matters (the kernels are issue-bound, not
// latency-bound). Three choices keep it low:
//  - Chunk m of a block (64 values) is group m of every sub-block: qword j of the chunk holds
//    values 32 j + 8 m .. + 7. The 4 group codes of sub-block j then sit in one qword, and one
//    vpmultishiftqb per chunk spreads them to bytes (no cross-lane permute per chunk), and each
//    dword lane of every chunk belongs to one sub-block (IQ1_M: one 16-value half per chunk
//    pair), so the scale is one vpmulld per block instead of a word permute per chunk.
//  - The activations are permuted to that order once per call and token (8 x 4 qwords per
//    block: 3 ops per chunk), not once per row.
//  - IQ2_XXS's grid entries are 2-bit level codes, 16 bits per group (IqTables), looked up in
//    registers (vpermi2b on the low / high code bytes); IQ1's 2048 entries are whole level
//    bytes, 8 per group, fetched by masked broadcast loads into the chunk order.
//
// IQ2_XXS block (66 B): x = the 64 index bytes, qword j = sub-block j (4 grid indices, then
//   aux = 4 x 7 sign bits | scale << 28).
//   ks = vpermi2b(ksigns, vpmultishiftqb(x) -> the 7-bit sign fields)      sign bytes (j, g)
//   C  = vpermi2b lookups of (idx, idx) byte pairs in the low / high code tables, blended
//        qword j: group g's 16-bit code at bits 16 g
//   chunk m: u = gf2p8affineqb(vpmultishiftqb(C, 16 m + 2 k)): code c -> {8, 25, 43}[c]
//            neg = vptestmb(vpmultishiftqb(ks, 8 m), 1 << k)
//   token:   P += vpdpbusd(u, a negated under neg)   (|a| <= 127: the negation is exact)
//   block:   isum = P * (2 s_j + 1) per dword lane
// IQ1_S (50 B) / IQ1_M (56 B): 32 11-bit indices (qs | high bits << 8, pdep per sub-block); 32
//   masked broadcast loads of their level qwords (8 grid + 16 per value) into the 4 chunks.
//   chunk m: u = levels + 2 [delta > 0] = 8 grid + 16 + 2 [delta > 0], so u - 17 = 8 (grid +
//            delta)
//   token:   P += vpdpbusd(u, a); block: isum = P * (2 s + 1) - 17 sum_h (2 s_h + 1) bsum_h
// Once per block and token: acc += cvt(isum) * (d / 8) * d_a.
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
constexpr int64_t kBlockBytes = K == Kind::kIQ2XXS ? 66
                                : K == Kind::kIQ1S ? 50
                                                   : 56;

// Permutation / shift-control tables (constant data: nothing here runs at static-init time).
struct Index {
  uint64_t act_pick[4][8];    // chunk m: activation qwords m, 4 + m, 8 + m, 12 + m, twice
  uint8_t code_ctrl[4][64];   // chunk m: byte k of each qword <- bits 16 m + 2 k (k < 8)
  uint8_t sign_ctrl[4][64];   // IQ2: every byte of each qword <- sign byte m (bits 8 m)
  uint8_t delta_ctrl[4][64];  // IQ1_M: every byte <- bits 4 m (group m's nibble; bit 3 sign)
  uint8_t bit_sel[64];        // 1 << (b % 8)
  uint16_t half_q[32];        // IQ1_M: half h -> scale word h / 4
  uint16_t half_shift[32];    // IQ1_M: 3 (h % 4)
  uint16_t lane_sub[32];      // IQ1_S: word 2 i (dword lane i) <- sub-block i / 2
  uint16_t lane_half_lo[32];  // IQ1_M: word 2 i <- half 2 (i / 2)
  uint16_t lane_half_hi[32];  // IQ1_M: word 2 i <- half 2 (i / 2) + 1
  uint16_t half_sub[32];      // IQ1_S: half h -> sub-block h / 2
};

constexpr Index MakeIndex() {
  Index x{};
  for (int m = 0; m < 4; ++m) {
    for (int q = 0; q < 8; ++q) x.act_pick[m][q] = static_cast<uint64_t>(4 * (q % 4) + m);
    for (int b = 0; b < 64; ++b) {
      x.code_ctrl[m][b] = static_cast<uint8_t>(16 * m + 2 * (b % 8));
      x.sign_ctrl[m][b] = static_cast<uint8_t>(8 * m);
      x.delta_ctrl[m][b] = static_cast<uint8_t>(4 * m);
    }
  }
  for (int b = 0; b < 64; ++b) x.bit_sel[b] = static_cast<uint8_t>(1 << (b % 8));
  for (int i = 0; i < 32; ++i) {
    x.half_q[i] = static_cast<uint16_t>(i < 16 ? i / 4 : 0);
    x.half_shift[i] = static_cast<uint16_t>(3 * (i % 4));
    x.lane_sub[i] = static_cast<uint16_t>(i / 4);
    x.lane_half_lo[i] = static_cast<uint16_t>(2 * (i / 4));
    x.lane_half_hi[i] = static_cast<uint16_t>(2 * (i / 4) + 1);
    x.half_sub[i] = static_cast<uint16_t>(i < 16 ? i / 2 : 0);
  }
  return x;
}

alignas(64) constexpr Index kIdx = MakeIndex();

IQ_INLINE __m512i Load(const void* p) { return _mm512_loadu_si512(p); }

// The lookup tables in registers (IqTables, gemv_internal.h).
struct Tables {
  __m512i lo[4], hi[4];  // IQ2_XXS code tables, entries 64 i .. 64 i + 63
  __m512i ks[2];         // ksigns, entries 0-63 / 64-127
  const uint64_t* iq1_levels;
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
  r.iq1_levels = t.iq1_levels;
  return r;
}

// One weight block, decoded for every token of the tile.
struct Decoded {
  __m512i u[4];      // [4][64] u8 levels of chunk m (qword j: values 32 j + 8 m .. + 7)
  __mmask64 neg[4];  // IQ2_XXS: the values whose activation is negated
  __m512i s[2];      // [16] i32 2 s + 1 per dword lane: chunks 0-1 / 2-3 (equal but IQ1_M)
  __m256i sw17;      // IQ1: [16] i16 17 (2 s_h + 1) of the natural halves, against the bsums
  float d8;          // d / 8
};

// The activation block in chunk order: out[64 m + 8 j + k] = qs[32 j + 8 m + k].
IQ_INLINE void PermuteBlock(const int8_t* qs, uint8_t* out) {
  const __m512i a0 = Load(qs), a1 = Load(qs + 64), a2 = Load(qs + 128), a3 = Load(qs + 192);
#pragma GCC unroll 4
  for (int m = 0; m < 4; ++m) {
    const __m512i pick = Load(kIdx.act_pick[m]);
    const __m512i c = _mm512_mask_blend_epi64(0xF0, _mm512_permutex2var_epi64(a0, pick, a1),
                                              _mm512_permutex2var_epi64(a2, pick, a3));
    _mm512_storeu_si512(out + 64 * m, c);
  }
}

// A 256-entry byte lookup of each byte of idx (bit 7 given as a mask).
IQ_INLINE __m512i Lookup256(const __m512i* t, __m512i idx, __mmask64 bit7) {
  return _mm512_mask_blend_epi8(bit7, _mm512_permutex2var_epi8(t[0], idx, t[1]),
                                _mm512_permutex2var_epi8(t[2], idx, t[3]));
}

IQ_INLINE __m512i Ms(const void* ctrl, __m512i x) {
  return _mm512_multishift_epi64_epi8(Load(ctrl), x);
}

IQ_INLINE void DecodeIQ2XXS(const uint8_t* blk, const Tables& t, Decoded* dec) {
  uint16_t d;
  std::memcpy(&d, blk, 2);
  dec->d8 = 0.125f * _cvtsh_ss(d);
  const __m512i x = Load(blk + 2);
  // bytes 0-3 of qword j: the 7-bit sign fields at bits 32 + 7 g (bit 7 of each byte ignored)
  const __m512i ks = _mm512_permutex2var_epi8(
      t.ks[0], _mm512_multishift_epi64_epi8(_mm512_set1_epi64(0x352E2720352E2720LL), x), t.ks[1]);
  // bytes 2 g, 2 g + 1 of qword j: grid index g, twice (low code byte, high code byte)
  const __m512i dup = _mm512_multishift_epi64_epi8(_mm512_set1_epi64(0x1818101008080000LL), x);
  const __mmask64 bit7 = _mm512_movepi8_mask(dup);
  const __m512i code = _mm512_mask_blend_epi8(0xAAAAAAAAAAAAAAAAull, Lookup256(t.lo, dup, bit7),
                                              Lookup256(t.hi, dup, bit7));
  // 2 s_j + 1 in both dwords of qword j
  const __m512i sc =
      _mm512_or_si512(_mm512_slli_epi64(_mm512_srli_epi64(x, 60), 1), _mm512_set1_epi64(1));
  dec->s[0] = dec->s[1] = _mm512_or_si512(sc, _mm512_slli_epi64(sc, 32));
  // Code c (bits 0-1 of a byte, c < 3) -> level {8, 25, 43}[c] as one GF(2) affine map of the
  // byte: 8 ^ 17 c0 ^ 35 c1 (25 = 8 ^ 17, 43 = 8 ^ 35; c0 and c1 are never both set), which
  // ignores bits 2-7: one op on port 0 where AND + vpshufb were two, one of them on port 5.
  // Matrix byte 7 - i = the code bits feeding level bit i: bit 0 <- c0 ^ c1, 1 <- c1, 4 <- c0,
  // 5 <- c1.
  constexpr uint64_t kLevelMatrix =
      uint64_t{0x03} << 56 | uint64_t{0x02} << 48 | uint64_t{0x01} << 24 | uint64_t{0x02} << 16;
  const __m512i level_matrix = _mm512_set1_epi64(static_cast<int64_t>(kLevelMatrix));
  const __m512i bits = Load(kIdx.bit_sel);
#pragma GCC unroll 4
  for (int m = 0; m < 4; ++m) {
    dec->u[m] = _mm512_gf2p8affine_epi64_epi8(Ms(kIdx.code_ctrl[m], code), level_matrix, 8);
    // (vpshufbitqmb of bits 8 m + k, one op for these two, measured no faster: 58.7 us
    // against 57-59 in bench_gemv iq2_xxs/avx512vnni/1408x2048/hot)
    dec->neg[m] = _mm512_test_epi8_mask(Ms(kIdx.sign_ctrl[m], ks), bits);
  }
}

// The level bytes (8 grid + 16) of the 32 groups in chunk order, u[m] qword j = group m of
// sub-block j. Per sub-block, the four 11-bit indices come as the words of one u64 (pdep of
// the 4 qs bytes | pdep of the 12 high bits: IQ1_S qh[j] bits 3 g, IQ1_M the low 3 bits of
// qh bytes 2 j, 2 j + 1's nibbles, packed by pext); each indexes IqTables::iq1_levels (16 KB,
// L1-resident) with a masked vpbroadcastq from memory into lane j of chunk g's register (a
// load and a blend: no shuffle port). Why loads: the 2048-entry grid has no structure a
// register lookup could use. Measured in cache (bench_gemv iq1_s/avx512vnni/1408x2048/hot,
// Zen 5, us): this 108; the same loads with the indices from a vector store (store-to-load
// forwarding of a zmm store to word loads) 153, with vmovq / vmovhpd + inserts 158, four
// 8-lane vpgatherdq 197-201, qwords through a stack buffer read back by vector loads 210; 241
// before 2026-11-29 (16-bit codes assembled in GPRs, _mm512_set_epi64, 3 ops per chunk to turn
// codes into levels).
template <bool kM>
IQ_INLINE void Iq1LevelBytes(const uint8_t* qs, const uint8_t* qh, const uint64_t* levels,
                             __m512i* u) {
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    uint32_t q4;
    std::memcpy(&q4, qs + 4 * j, 4);
    uint16_t h;
    std::memcpy(&h, qh + 2 * j, 2);
    const uint64_t high12 = kM ? _pext_u32(h, 0x7777u) : h;
    const uint64_t idx =
        _pdep_u64(q4, 0x00FF00FF00FF00FFull) | _pdep_u64(high12, 0x0700070007000700ull);
    for (int g = 0; g < 4; ++g) {
      const auto v = static_cast<int64_t>(levels[(idx >> (16 * g)) & 0xFFFF]);
      u[g] = j == 0 ? _mm512_set1_epi64(v)
                    : _mm512_mask_set1_epi64(u[g], static_cast<__mmask8>(1u << j), v);
    }
  }
}

IQ_INLINE void DecodeIQ1S(const uint8_t* blk, const Tables& t, Decoded* dec) {
  uint16_t d;
  std::memcpy(&d, blk, 2);
  dec->d8 = 0.125f * _cvtsh_ss(d);
  Iq1LevelBytes<false>(blk + 2, blk + 34, t.iq1_levels, dec->u);
  const __m128i qh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 34));  // [8] u16
  // 2 in every byte of qword j where sub-block j's delta is positive (qh bit 15 clear)
  const __mmask8 neg = _mm_movepi16_mask(qh);
  const __m512i dpos = _mm512_maskz_mov_epi64(static_cast<__mmask8>(~neg), _mm512_set1_epi8(2));
  // 2 s_j + 1 = (qh >> 11 & 14) | 1
  const __m128i sc =
      _mm_or_si128(_mm_and_si128(_mm_srli_epi16(qh, 11), _mm_set1_epi16(14)), _mm_set1_epi16(1));
  const __m512i sc512 = _mm512_castsi128_si512(sc);
  dec->s[0] = dec->s[1] = _mm512_maskz_permutexvar_epi16(0x55555555u, Load(kIdx.lane_sub), sc512);
  dec->sw17 = _mm256_mullo_epi16(
      _mm512_castsi512_si256(_mm512_permutexvar_epi16(Load(kIdx.half_sub), sc512)),
      _mm256_set1_epi16(17));
  for (int m = 0; m < 4; ++m) dec->u[m] = _mm512_add_epi8(dec->u[m], dpos);
}

IQ_INLINE void DecodeIQ1M(const uint8_t* blk, const Tables& t, Decoded* dec) {
  uint16_t sc[4];
  std::memcpy(sc, blk + 48, sizeof(sc));
  const uint16_t d_bits = static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) |
                                                ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000));
  dec->d8 = 0.125f * _cvtsh_ss(d_bits);
  Iq1LevelBytes<true>(blk, blk + 32, t.iq1_levels, dec->u);
  const __m128i qh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 32));  // [16] u8
  // qword j = qh bytes 2 j, 2 j + 1: group g's nibble at bits 4 g, its delta sign at 4 g + 3
  const __m512i nib = _mm512_cvtepu16_epi64(qh);
  // 2 s_h + 1 of the 16 halves (scale word h / 4, bits 3 (h % 4))
  const __m512i sv = _mm512_srlv_epi16(
      _mm512_permutexvar_epi16(Load(kIdx.half_q), _mm512_castsi128_si512(_mm_loadl_epi64(
                                                      reinterpret_cast<const __m128i*>(blk + 48)))),
      Load(kIdx.half_shift));
  const __m512i s16 = _mm512_ternarylogic_epi32(_mm512_slli_epi16(sv, 1), _mm512_set1_epi16(14),
                                                _mm512_set1_epi16(1), 0xEA);  // (A & B) | C
  dec->s[0] = _mm512_maskz_permutexvar_epi16(0x55555555u, Load(kIdx.lane_half_lo), s16);
  dec->s[1] = _mm512_maskz_permutexvar_epi16(0x55555555u, Load(kIdx.lane_half_hi), s16);
  dec->sw17 = _mm256_mullo_epi16(_mm512_castsi512_si256(s16), _mm256_set1_epi16(17));
  const __m512i two = _mm512_set1_epi8(2), eight = _mm512_set1_epi8(8);
#pragma GCC unroll 4
  for (int m = 0; m < 4; ++m) {  // + 2 where the group's delta is positive (nibble bit 3 clear)
    const __mmask64 pos = _mm512_testn_epi8_mask(Ms(kIdx.delta_ctrl[m], nib), eight);
    dec->u[m] = _mm512_mask_add_epi8(dec->u[m], pos, dec->u[m], two);
  }
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

// The block's integer for one token: [16] i32. act: the block's permuted activations [256].
template <Kind K>
IQ_INLINE __m512i BlockSum(const Decoded& dec, const uint8_t* act, const BlockQ8_K& a) {
  __m512i p[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
#pragma GCC unroll 4
  for (int m = 0; m < 4; ++m) {
    __m512i x = Load(act + 64 * m);
    if constexpr (K == Kind::kIQ2XXS) {
      x = _mm512_mask_sub_epi8(x, dec.neg[m], _mm512_setzero_si512(), x);
    }
    p[m / 2] = _mm512_dpbusd_epi32(p[m / 2], dec.u[m], x);
  }
  if constexpr (K == Kind::kIQ2XXS) {
    return _mm512_mullo_epi32(_mm512_add_epi32(p[0], p[1]), dec.s[0]);
  } else {
    const __m512i scaled = K == Kind::kIQ1S
                               ? _mm512_mullo_epi32(_mm512_add_epi32(p[0], p[1]), dec.s[0])
                               : _mm512_add_epi32(_mm512_mullo_epi32(p[0], dec.s[0]),
                                                  _mm512_mullo_epi32(p[1], dec.s[1]));
    const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums));
    return _mm512_sub_epi32(scaled, _mm512_zextsi256_si512(_mm256_madd_epi16(dec.sw17, bs)));
  }
}

// Tokens per decoded block: up to 8. The IQ1 decode is ~40 cycles per block and each token's
// dot ~10, so 8 tokens spend ~15 per token-block where 4 spent ~20 (ds-v2-lite UD-IQ1_S pp512
// with 4: 75 t/s, 0.88x ik_llama.cpp).
constexpr int kTileTokens = 8;
// Activations of one call, permuted per segment of kSegBlocks blocks for up to kTileTokens
// tokens: 8 x 16 x 256 bytes = 32 KB of stack.
constexpr int64_t kSegBlocks = 16;
struct PermutedActs {
  alignas(64) uint8_t qs[kTileTokens][kSegBlocks * kQkK];  // [token][block][256] chunk order
};

void PermuteTokens(const uint8_t* a, size_t a_stride, int n, int64_t b0, int64_t nb,
                   PermutedActs* p) {
  for (int t = 0; t < n; ++t) {
    const auto* at = reinterpret_cast<const BlockQ8_K*>(a + t * a_stride);
    for (int64_t b = 0; b < nb; ++b) PermuteBlock(at[b0 + b].qs, p->qs[t] + b * kQkK);
  }
}

// y[t * ldy] (+)= row w . token t over blocks b0 .. b0 + nb (w: the row's block b0; a: token
// 0's Q8_K row, rows a_stride apart; p: their permuted quants from block b0).
template <Kind K, int T>
void RowTile(const uint8_t* w, const uint8_t* a, size_t a_stride, int64_t b0, int64_t nb,
             const PermutedActs& p, const Tables& tab, bool add, float* y, int64_t ldy) {
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    Decoded dec;
    Decode<K>(w + b * kBlockBytes<K>, tab, &dec);
    for (int t = 0; t < T; ++t) {
      const auto& at = reinterpret_cast<const BlockQ8_K*>(a + t * a_stride)[b0 + b];
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(BlockSum<K>(dec, p.qs[t] + b * kQkK, at)),
                               _mm512_set1_ps(dec.d8 * at.d), acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) {
    const float v = _mm512_reduce_add_ps(acc[t]);
    y[t * ldy] = add ? y[t * ldy] + v : v;
  }
}

template <Kind K>
void RowsTile(int n_tok, const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* a,
              size_t a_stride, int64_t b0, int64_t nb, const PermutedActs& p, const Tables& tab,
              float* y, int64_t ldy) {
  const uint8_t* wb = w + b0 * kBlockBytes<K>;
  const bool add = b0 > 0;
  using TileFn = void (*)(const uint8_t*, const uint8_t*, size_t, int64_t, int64_t,
                          const PermutedActs&, const Tables&, bool, float*, int64_t);
  static constexpr TileFn kTiles[kTileTokens + 1] = {nullptr,       RowTile<K, 1>, RowTile<K, 2>,
                                                     RowTile<K, 3>, RowTile<K, 4>, RowTile<K, 5>,
                                                     RowTile<K, 6>, RowTile<K, 7>, RowTile<K, 8>};
  const TileFn tile = kTiles[n_tok];
  for (int64_t r = 0; r < n_rows; ++r)
    tile(wb + r * w_stride, a, a_stride, b0, nb, p, tab, add, y + r, ldy);
}

// Per segment of kSegBlocks blocks and kTileTokens tokens: permute their activations (32 KB of
// stack), then every row.
template <Kind K>
void Gemm(const void* w_ptr, size_t w_stride, int64_t n_rows, const void* a_ptr, size_t a_stride,
          int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  const auto* w = static_cast<const uint8_t*>(w_ptr);
  const auto* a = static_cast<const uint8_t*>(a_ptr);
  const int64_t nb = n / kQkK;
  const Tables tab = LoadTables();
  PermutedActs p;
  for (int64_t b0 = 0; b0 < nb; b0 += kSegBlocks) {
    const int64_t sb = nb - b0 < kSegBlocks ? nb - b0 : kSegBlocks;
    for (int64_t t0 = 0; t0 < n_tok; t0 += kTileTokens) {
      const int tn = static_cast<int>(n_tok - t0 < kTileTokens ? n_tok - t0 : kTileTokens);
      const uint8_t* at = a + t0 * a_stride;
      PermuteTokens(at, a_stride, tn, b0, sb, &p);
      RowsTile<K>(tn, w, w_stride, n_rows, at, a_stride, b0, sb, p, tab, y + t0 * ldy, ldy);
    }
  }
}

template <Kind K>
float Dot(const void* w_row, const void* a_row, int64_t n) {
  float y = 0.0f;
  Gemm<K>(w_row, 0, 1, a_row, 0, 1, n, &y, 0);
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
