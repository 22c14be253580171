// IQ3_XXS / IQ3_S / IQ2_XS / IQ2_S weights x Q8_K activations, AVX-512 VNNI tier on CPUs with
// AVX-512 VBMI. Compiled with MOESPLIT_FLAGS_AVX512VNNI + -mavx512vbmi -mbmi2
// (gemv/kquants.cmake); reached only through KernelsFor(IsaTier::kAvx512Vnni / kAmx) where
// DetectCpuFeatures().avx512vbmi. The integers per block are the scalar dot's
// (gemv_iq23_scalar.cc). The gemm decodes each weight block once (m, neg, the scale words:
// Decoded) for a tile of 1-4 tokens, then only the per-token steps below run per token.
//
// A block is 4 chunks of 64 values (chunk c = values 64 c .. 64 c + 63). Per chunk:
//   m     = [64] u8 grid magnitudes, from the grid entries' level codes (IqTables iq3*_lo /
//           hi: 3 bits a value; iq2*_lo / hi: 2 bits a value) looked up by vpermi2b over the
//           256, 512 or 1024 entries once per block for all its indices, then per chunk one
//           vpermi2b + vpmultishiftqb + vpermb (FillIq3, FillIq2). Gathers measured slower
//           here (they cost per lane; MoE decode, 2 threads: a 16-lane dword gather per 64
//           IQ3_XXS values 3.9 GB/s against 11.1, 8-lane qword gathers 4.8 / 4.9 GB/s against
//           8.5 / 5.7 for IQ2_XS / IQ2_S).
//   neg   = __mmask64, bit i set where value 64 c + i is negative: the stored bits themselves
//           (IQ3_S, IQ2_S), or the block's 32 sign bytes from its 7-bit sign indices by one
//           vpermi2b of ksigns (IQ3_XXS: fields cut out by vpmultishiftqb; IQ2_XS: qs >> 9)
// per token:
//   p16   = maddubs(m, a negated under neg)   [32] i16, |pair| <= 2 * 62 * 127 < 2^15
//   s    += vpdpwssd(p16, 2 s + 1 of the word's sub-block)   [16] i32
// and once per block acc += cvt(s) * d * d_a * (1/4 IQ3_XXS, 1 IQ3_S, 1/8 IQ2_XS / IQ2_S).
// The 2 s + 1 words: the block's 8 (IQ3) or 16 (IQ2) scales as words, spread to each chunk's
// 32 words by one vpermw (word w of chunk c: sub-block 2 c + w / 16, or half 4 c + w / 8).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cpu_kernels/gemv/gemv_internal.h"
#include "cpu_kernels/gemv/gemv_isa_common.h"
#include "cpu_kernels/quant/blocks.h"
#include "cpu_kernels/quant/blocks_iq.h"
#include "cpu_kernels/quant/iq_grids.h"

namespace moesplit::gemv::internal {
namespace {

using quant::BlockIQ2_S;
using quant::BlockIQ2_XS;
using quant::BlockIQ3_S;
using quant::BlockIQ3_XXS;
using quant::BlockQ8_K;
using quant::kQkK;
namespace qi = quant::internal;

#define IQ_INLINE inline __attribute__((always_inline))

// Permutation / shift-control tables (constant data: nothing here runs at static-init time).
struct Index {
  uint16_t sc32[4][32];     // IQ3 chunk c: word w <- scale word 2 c + w / 16
  uint16_t sc16[4][32];     // IQ2 chunk c: word w <- scale word 4 c + w / 8
  uint8_t iq3xxs_sign[64];  // qword j: bytes 0-3 <- bits 7 g (the 7-bit sign fields)
  uint8_t iq2s_high[64];    // qword lane l, word k: high byte <- bits 2 (4 l + k) of qh
  uint8_t iq3_pair[4][64];  // IQ3 chunk c, qword q: lo, hi of entry 16 c + 2 q, then + 1
  uint8_t iq3_field[64];    // byte k of each qword <- bits 16 (k / 4) + 3 (k % 4)
  uint8_t iq2_pair[4][64];  // IQ2 chunk c, qword q: lo, hi of group 8 c + q
  uint8_t iq2_field[64];    // byte k of each qword <- bits 2 k
};

constexpr Index MakeIndex() {
  Index x{};
  for (int c = 0; c < 4; ++c) {
    for (int w = 0; w < 32; ++w) {
      x.sc32[c][w] = static_cast<uint16_t>(2 * c + w / 16);
      x.sc16[c][w] = static_cast<uint16_t>(4 * c + w / 8);
    }
  }
  for (int b = 0; b < 64; ++b) {
    x.iq3xxs_sign[b] = static_cast<uint8_t>(b % 8 < 4 ? 7 * (b % 8) : 0);
    const int group = 4 * (b / 8) + (b % 8) / 2;
    x.iq2s_high[b] = static_cast<uint8_t>(b % 2 ? 2 * group : 0);
    const int k = b % 8;
    x.iq3_field[b] = static_cast<uint8_t>(16 * (k / 4) + 3 * (k % 4));
    x.iq2_field[b] = static_cast<uint8_t>(2 * k);
    for (int c = 0; c < 4; ++c) {
      const int entry = 16 * c + 2 * (b / 8) + (k / 2) % 2;  // k = 0, 1: entry; 2, 3: entry + 1
      x.iq3_pair[c][b] = static_cast<uint8_t>(k < 4 ? entry + (k % 2 ? 64 : 0) : 0);
      x.iq2_pair[c][b] = static_cast<uint8_t>(k < 2 ? 8 * c + b / 8 + 64 * k : 0);
    }
  }
  return x;
}

alignas(64) constexpr Index kIdx = MakeIndex();

IQ_INLINE __m512i Load(const void* p) { return _mm512_loadu_si512(p); }

IQ_INLINE uint64_t LoadU64(const void* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// s + vpdpwssd(maddubs(m, a negated under neg), scale16): one chunk of 64 values.
IQ_INLINE __m512i Chunk(__m512i s, __m512i m, __mmask64 neg, const int8_t* q8, __m512i scale16) {
  __m512i a = Load(q8);
  a = _mm512_mask_sub_epi8(a, neg, _mm512_setzero_si512(), a);
  return _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(m, a), scale16);
}

// 2 s + 1 as words from n nibbles (low nibble first): pdep spreads them to bytes.
IQ_INLINE __m256i OddScales16(uint64_t nibbles) {  // 16 nibbles -> [16] i16
  const uint64_t lo = _pdep_u64(nibbles & 0xFFFFFFFF, 0x0F0F0F0F0F0F0F0Full);
  const uint64_t hi = _pdep_u64(nibbles >> 32, 0x0F0F0F0F0F0F0F0Full);
  const __m256i s =
      _mm256_cvtepu8_epi16(_mm_set_epi64x(static_cast<int64_t>(hi), static_cast<int64_t>(lo)));
  return _mm256_or_si256(_mm256_slli_epi16(s, 1), _mm256_set1_epi16(1));
}

// [4] u64: the sign bits of chunks 0-3, from 32 sign bytes in value order.
IQ_INLINE void StoreSigns(__m256i sign_bytes, uint64_t* out) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), sign_bytes);
}

// A 256-entry byte lookup of each byte of idx (bit 7 given as a mask): t = 4 x 64 entries.
IQ_INLINE __m512i Lookup256(const __m512i* t, __m512i idx, __mmask64 bit7) {
  return _mm512_mask_blend_epi8(bit7, _mm512_permutex2var_epi8(t[0], idx, t[1]),
                                _mm512_permutex2var_epi8(t[2], idx, t[3]));
}

// A 512-entry byte lookup (t = 8 x 64 entries), index bit 8 given as a mask.
IQ_INLINE __m512i Lookup512(const __m512i* t, __m512i idx8, __mmask64 bit7, __mmask64 bit8) {
  return _mm512_mask_blend_epi8(bit8, Lookup256(t, idx8, bit7), Lookup256(t + 4, idx8, bit7));
}

// One weight block, decoded once for every token of a tile.
struct Decoded {
  __m512i m[4];      // [4][64] u8 magnitudes of chunk c
  __mmask64 neg[4];  // chunk c's negative values
  __m512i sc[4];     // [4][32] i16: 2 s + 1 of each maddubs word of chunk c
  float d;           // the block's factor: d / 4 (IQ3_XXS), d (IQ3_S), d / 8 (IQ2_XS / IQ2_S)
};

IQ_INLINE float Half(const uint8_t* blk) {
  uint16_t d;
  std::memcpy(&d, blk, 2);
  return _cvtsh_ss(d);
}

// IQ3: the magnitudes from the 64 entries' 12-bit codes (lo / hi bytes in entry order): per
// chunk c, one vpermi2b puts the codes of entries 16 c + 2 q, 16 c + 2 q + 1 in bytes 0-3 of
// qword q, vpmultishiftqb cuts byte k's 3 bits (bits 16 (k / 4) + 3 (k % 4)), vpermb maps
// them to levels. sc8: [8] i16 2 s_j + 1; sg: sign bits of chunks 0-3.
IQ_INLINE void FillIq3(__m512i lo, __m512i hi, __m512i levels, const uint64_t* sg, __m512i sc8,
                       Decoded* dec) {
  const __m512i field = Load(kIdx.iq3_field);
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    const __m512i code = _mm512_permutex2var_epi8(lo, Load(kIdx.iq3_pair[c]), hi);
    dec->m[c] = _mm512_permutexvar_epi8(_mm512_multishift_epi64_epi8(field, code), levels);
    dec->neg[c] = _cvtu64_mask64(sg[c]);
    dec->sc[c] = _mm512_permutexvar_epi16(Load(kIdx.sc32[c]), sc8);
  }
}

// IQ2_XS / IQ2_S: the same from the 32 groups' 16-bit codes: per chunk c, one vpermi2b puts
// the code of group 8 c + q in bytes 0-1 of qword q, vpmultishiftqb cuts byte k's 2 bits
// (bits 2 k), vpermb maps them to 8 / 25 / 43. nibbles: the 16 half scales.
IQ_INLINE void FillIq2(__m512i lo, __m512i hi, const uint64_t* sg, uint64_t nibbles, Decoded* dec) {
  const __m512i sc16 = _mm512_castsi256_si512(OddScales16(nibbles));
  const __m512i field = Load(kIdx.iq2_field);
  const __m512i levels = _mm512_set1_epi32(0x002B1908);  // 8, 25, 43 at codes 0, 1, 2
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    const __m512i code = _mm512_permutex2var_epi8(lo, Load(kIdx.iq2_pair[c]), hi);
    dec->m[c] = _mm512_permutexvar_epi8(_mm512_multishift_epi64_epi8(field, code), levels);
    dec->neg[c] = _cvtu64_mask64(sg[c]);
    dec->sc[c] = _mm512_permutexvar_epi16(Load(kIdx.sc16[c]), sc16);
  }
}

// The 32 low index bytes of idx16's words in bytes 0-31, and the masks of index bits 7-9.
struct Iq2Index {
  __m512i idx8;
  __mmask64 bit7, bit8, bit9;
};

IQ_INLINE Iq2Index SplitIndex(__m512i idx16) {
  Iq2Index r;
  r.idx8 = _mm512_zextsi256_si512(_mm512_cvtepi16_epi8(idx16));
  r.bit7 = _mm512_movepi8_mask(r.idx8);
  r.bit8 = _mm512_test_epi16_mask(idx16, _mm512_set1_epi16(0x100));
  r.bit9 = _mm512_test_epi16_mask(idx16, _mm512_set1_epi16(0x200));
  return r;
}

// Each decoder holds its tables in registers for one call and decodes one block.
struct Iq3XxsDecoder {
  static constexpr int64_t kBlockBytes = sizeof(BlockIQ3_XXS);
  __m512i ks0, ks1, lo_t[4], hi_t[4], levels;
  Iq3XxsDecoder() {
    const IqTables& t = GetIqTables();
    ks0 = Load(t.ksigns);
    ks1 = Load(t.ksigns + 64);
    for (int i = 0; i < 4; ++i) {
      lo_t[i] = Load(t.iq3xxs_lo + 64 * i);
      hi_t[i] = Load(t.iq3xxs_hi + 64 * i);
    }
    levels = _mm512_set1_epi64(0x3E342C241C140C04LL);  // 4, 12, .., 52, 62 at codes 0..7
  }
  IQ_INLINE void Decode(const uint8_t* blk, Decoded* dec) const {
    dec->d = 0.25f * Half(blk);
    const uint8_t* qs = blk + 2;
    const __m512i idx = Load(qs);  // [64] grid indices
    const __mmask64 bit7 = _mm512_movepi8_mask(idx);
    // [8] u32: 4 x 7 sign bits | s_j << 28 of sub-block j
    const __m256i aux = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + kQkK / 4));
    const __m512i fields =
        _mm512_multishift_epi64_epi8(Load(kIdx.iq3xxs_sign), _mm512_cvtepu32_epi64(aux));
    alignas(32) uint64_t sg[4];  // sign bits of chunks 0-3
    StoreSigns(_mm512_cvtepi64_epi32(_mm512_permutex2var_epi8(ks0, fields, ks1)), sg);
    const __m256i sc =
        _mm256_or_si256(_mm256_slli_epi32(_mm256_srli_epi32(aux, 28), 1), _mm256_set1_epi32(1));
    const __m512i sc8 = _mm512_castsi128_si512(_mm256_cvtepi32_epi16(sc));  // [8] i16
    FillIq3(Lookup256(lo_t, idx, bit7), Lookup256(hi_t, idx, bit7), levels, sg, sc8, dec);
  }
};

struct Iq3SDecoder {
  static constexpr int64_t kBlockBytes = sizeof(BlockIQ3_S);
  __m512i lo_t[8], hi_t[8], levels;  // code tables, entries 64 i .. 64 i + 63
  Iq3SDecoder() {
    const IqTables& t = GetIqTables();
    for (int i = 0; i < 8; ++i) {
      lo_t[i] = Load(t.iq3s_lo + 64 * i);
      hi_t[i] = Load(t.iq3s_hi + 64 * i);
    }
    levels = _mm512_set1_epi64(0x0F0D0B0907050301LL);  // 1, 3, .., 15 at codes 0..7
  }
  IQ_INLINE void Decode(const uint8_t* blk, Decoded* dec) const {
    const auto& w = *reinterpret_cast<const BlockIQ3_S*>(blk);
    dec->d = Half(blk);
    const __m512i idx = Load(w.qs);  // [64] low 8 bits of the grid indices
    const __mmask64 bit7 = _mm512_movepi8_mask(idx);
    const __mmask64 bit8 = _cvtu64_mask64(LoadU64(w.qh));  // 9th bits, entry k at bit k
    uint64_t sg[4];                                        // the explicit sign bits of chunks 0-3
    std::memcpy(sg, w.signs, sizeof(sg));
    const __m512i sc8 = _mm512_castsi256_si512(OddScales16(LoadU32(w.scales)));
    FillIq3(Lookup512(lo_t, idx, bit7, bit8), Lookup512(hi_t, idx, bit7, bit8), levels, sg, sc8,
            dec);
  }
};

struct Iq2XsDecoder {
  static constexpr int64_t kBlockBytes = sizeof(BlockIQ2_XS);
  __m512i ks0, ks1, lo_t[8], hi_t[8];  // code tables, entries 64 i .. 64 i + 63
  Iq2XsDecoder() {
    const IqTables& t = GetIqTables();
    ks0 = Load(t.ksigns);
    ks1 = Load(t.ksigns + 64);
    for (int i = 0; i < 8; ++i) {
      lo_t[i] = Load(t.iq2xs_lo + 64 * i);
      hi_t[i] = Load(t.iq2xs_hi + 64 * i);
    }
  }
  IQ_INLINE void Decode(const uint8_t* blk, Decoded* dec) const {
    const auto& w = *reinterpret_cast<const BlockIQ2_XS*>(blk);
    dec->d = 0.125f * Half(blk);
    const __m512i q = Load(w.qs);  // [32] u16: 9-bit grid index | 7-bit sign index << 9
    // sign byte of group g: ksigns[q_g >> 9] in the low byte of word g (ksigns[0] = 0 in the
    // high byte), truncated to bytes
    alignas(32) uint64_t sg[4];
    StoreSigns(_mm512_cvtepi16_epi8(_mm512_permutex2var_epi8(ks0, _mm512_srli_epi16(q, 9), ks1)),
               sg);
    const Iq2Index x = SplitIndex(q);
    FillIq2(Lookup512(lo_t, x.idx8, x.bit7, x.bit8), Lookup512(hi_t, x.idx8, x.bit7, x.bit8), sg,
            LoadU64(w.scales), dec);
  }
};

struct Iq2SDecoder {
  static constexpr int64_t kBlockBytes = sizeof(BlockIQ2_S);
  const __m512i* lo_t;  // [16] x 64 entries (in memory: 32 registers' worth)
  const __m512i* hi_t;  // [16] x 64 entries
  __m512i ctrl, two_bits;
  Iq2SDecoder() {
    const IqTables& t = GetIqTables();
    lo_t = reinterpret_cast<const __m512i*>(t.iq2s_lo);
    hi_t = reinterpret_cast<const __m512i*>(t.iq2s_hi);
    ctrl = Load(kIdx.iq2s_high);
    two_bits = _mm512_set1_epi16(0x0300);
  }
  IQ_INLINE void Decode(const uint8_t* blk, Decoded* dec) const {
    const auto& w = *reinterpret_cast<const BlockIQ2_S*>(blk);
    dec->d = 0.125f * Half(blk);
    // index of group g = qs[g] | (bits 2 g .. 2 g + 1 of the 8 qh bytes as a u64) << 8
    const __m512i lo =
        _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs)));
    const __m512i hi = _mm512_multishift_epi64_epi8(
        ctrl, _mm512_set1_epi64(static_cast<long long>(LoadU64(w.qh))));
    const Iq2Index x = SplitIndex(_mm512_ternarylogic_epi32(hi, two_bits, lo, 0xEA));  // A&B | C
    const __m512i code_lo = _mm512_mask_blend_epi8(x.bit9, Lookup512(lo_t, x.idx8, x.bit7, x.bit8),
                                                   Lookup512(lo_t + 8, x.idx8, x.bit7, x.bit8));
    const __m512i code_hi = _mm512_mask_blend_epi8(x.bit9, Lookup512(hi_t, x.idx8, x.bit7, x.bit8),
                                                   Lookup512(hi_t + 8, x.idx8, x.bit7, x.bit8));
    uint64_t sg[4];  // the explicit sign bits of chunks 0-3 (qs bytes 32-63)
    std::memcpy(sg, w.qs + kQkK / 8, sizeof(sg));
    FillIq2(code_lo, code_hi, sg, LoadU64(w.scales), dec);
  }
};

// The block's integer for one token: [16] i32.
IQ_INLINE __m512i BlockSum(const Decoded& dec, const int8_t* q8) {
  __m512i s = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) s = Chunk(s, dec.m[c], dec.neg[c], q8 + 64 * c, dec.sc[c]);
  return s;
}

// y[t * ldy] = row w . token t for T tokens (a: token 0's Q8_K row, rows a_stride apart), each
// block decoded once.
template <typename D, int T>
void RowTile(const D& dec_fn, const uint8_t* w, const uint8_t* a, size_t a_stride, int64_t nb,
             float* y, int64_t ldy) {
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    Decoded dec;
    dec_fn.Decode(w + b * D::kBlockBytes, &dec);
    for (int t = 0; t < T; ++t) {
      const auto& at = reinterpret_cast<const BlockQ8_K*>(a + t * a_stride)[b];
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(BlockSum(dec, at.qs)),
                               _mm512_set1_ps(dec.d * at.d), acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) y[t * ldy] = _mm512_reduce_add_ps(acc[t]);
}

// Per group of up to 4 tokens, every row: each weight block decoded once per group.
template <typename D>
void Gemm(const void* w_ptr, size_t w_stride, int64_t n_rows, const void* a_ptr, size_t a_stride,
          int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  const auto* w = static_cast<const uint8_t*>(w_ptr);
  const auto* a = static_cast<const uint8_t*>(a_ptr);
  const int64_t nb = n / kQkK;
  const D dec;
  for (int64_t t0 = 0; t0 < n_tok; t0 += 4) {
    const int64_t tn = n_tok - t0 < 4 ? n_tok - t0 : 4;
    const uint8_t* at = a + t0 * a_stride;
    for (int64_t r = 0; r < n_rows; ++r) {
      const uint8_t* wr = w + r * w_stride;
      float* yr = y + t0 * ldy + r;
      switch (tn) {
        case 4:
          RowTile<D, 4>(dec, wr, at, a_stride, nb, yr, ldy);
          break;
        case 3:
          RowTile<D, 3>(dec, wr, at, a_stride, nb, yr, ldy);
          break;
        case 2:
          RowTile<D, 2>(dec, wr, at, a_stride, nb, yr, ldy);
          break;
        default:
          RowTile<D, 1>(dec, wr, at, a_stride, nb, yr, ldy);
          break;
      }
    }
  }
}

template <typename D>
float Dot(const void* w_row, const void* a_row, int64_t n) {
  float y = 0.0f;
  Gemm<D>(w_row, 0, 1, a_row, 0, 1, n, &y, 0);
  return y;
}

}  // namespace

float DotIQ3XXS_Q8K_Avx512Vbmi(const void* w_row, const void* a_row, int64_t n) {
  return Dot<Iq3XxsDecoder>(w_row, a_row, n);
}
float DotIQ3S_Q8K_Avx512Vbmi(const void* w_row, const void* a_row, int64_t n) {
  return Dot<Iq3SDecoder>(w_row, a_row, n);
}
float DotIQ2XS_Q8K_Avx512Vbmi(const void* w_row, const void* a_row, int64_t n) {
  return Dot<Iq2XsDecoder>(w_row, a_row, n);
}
float DotIQ2S_Q8K_Avx512Vbmi(const void* w_row, const void* a_row, int64_t n) {
  return Dot<Iq2SDecoder>(w_row, a_row, n);
}
void GemmIQ3XXS_Q8K_Avx512Vbmi(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                               size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  Gemm<Iq3XxsDecoder>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}
void GemmIQ3S_Q8K_Avx512Vbmi(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                             size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  Gemm<Iq3SDecoder>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}
void GemmIQ2XS_Q8K_Avx512Vbmi(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                              size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  Gemm<Iq2XsDecoder>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}
void GemmIQ2S_Q8K_Avx512Vbmi(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                             size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  Gemm<Iq2SDecoder>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}

#undef IQ_INLINE

}  // namespace moesplit::gemv::internal
