// IQ3_XXS / IQ3_S / IQ2_XS / IQ2_S weights x Q8_K activations, AVX-512 VNNI tier on CPUs with
// AVX-512 VBMI. Compiled with MOESPLIT_FLAGS_AVX512VNNI + -mavx512vbmi -mbmi2
// (gemv/kquants.cmake); reached only through KernelsFor(IsaTier::kAvx512Vnni / kAmx) where
// DetectCpuFeatures().avx512vbmi. The integers per block are the scalar dot's
// (gemv_iq23_scalar.cc); the gemm is GemmByDots.
//
// A block is 4 chunks of 64 values (chunk c = values 64 c .. 64 c + 63). Per chunk:
//   m     = [64] u8 grid magnitudes, from the grid entries' level codes (IqTables iq3*_lo /
//           hi: 3 bits a value; iq2*_lo / hi: 2 bits a value) looked up by vpermi2b over the
//           256, 512 or 1024 entries once per block for all its indices, then per chunk one
//           vpermi2b + vpmultishiftqb + vpermb (Iq3Block, Iq2Block). Gathers measured slower
//           here (they cost per lane; MoE decode, 2 threads: a 16-lane dword gather per 64
//           IQ3_XXS values 3.9 GB/s against 11.1, 8-lane qword gathers 4.8 / 4.9 GB/s against
//           8.5 / 5.7 for IQ2_XS / IQ2_S).
//   neg   = __mmask64, bit i set where value 64 c + i is negative: the stored bits themselves
//           (IQ3_S, IQ2_S), or the block's 32 sign bytes from its 7-bit sign indices by one
//           vpermi2b of ksigns (IQ3_XXS: fields cut out by vpmultishiftqb; IQ2_XS: qs >> 9)
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

IQ_INLINE uint32_t LoadU32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

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

IQ_INLINE float Reduce(__m512 acc) { return _mm512_reduce_add_ps(acc); }

}  // namespace

namespace {

// A 256-entry byte lookup of each byte of idx (bit 7 given as a mask): t = 4 x 64 entries.
IQ_INLINE __m512i Lookup256(const __m512i* t, __m512i idx, __mmask64 bit7) {
  return _mm512_mask_blend_epi8(bit7, _mm512_permutex2var_epi8(t[0], idx, t[1]),
                                _mm512_permutex2var_epi8(t[2], idx, t[3]));
}

// The 256 magnitudes of an IQ3 block from its 64 entries' 12-bit codes (lo / hi bytes in
// entry order), then the block's integer: per chunk c, one vpermi2b puts the codes of entries
// 16 c + 2 q, 16 c + 2 q + 1 in bytes 0-3 of qword q, vpmultishiftqb cuts byte k's 3 bits
// (entry k / 4, bits 16 (k / 4) + 3 (k % 4)), vpermb maps them to levels.
IQ_INLINE __m512i Iq3Block(__m512i lo, __m512i hi, __m512i levels, const uint64_t* sg, __m512i sc8,
                           const int8_t* q8) {
  const __m512i field = Load(kIdx.iq3_field);
  __m512i s = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    const __m512i code = _mm512_permutex2var_epi8(lo, Load(kIdx.iq3_pair[c]), hi);
    const __m512i m = _mm512_permutexvar_epi8(_mm512_multishift_epi64_epi8(field, code), levels);
    s = Chunk(s, m, _cvtu64_mask64(sg[c]), q8 + 64 * c,
              _mm512_permutexvar_epi16(Load(kIdx.sc32[c]), sc8));
  }
  return s;
}

// [64] bytes: level l (0..7) of byte i & 7.
IQ_INLINE __m512i Levels(const int8_t (&l)[8]) {
  return _mm512_set1_epi64(static_cast<long long>(LoadU64(l)));
}

}  // namespace

float DotIQ3XXS_Q8K_Avx512Vbmi(const void* w_row, const void* a_row, int64_t n) {
  const auto* w = static_cast<const BlockIQ3_XXS*>(w_row);  // [n / 256]
  const auto* a = static_cast<const BlockQ8_K*>(a_row);     // [n / 256]
  const IqTables& t = GetIqTables();
  const __m512i ks0 = Load(t.ksigns), ks1 = Load(t.ksigns + 64);
  const __m512i lo_t[4] = {Load(t.iq3xxs_lo), Load(t.iq3xxs_lo + 64), Load(t.iq3xxs_lo + 128),
                           Load(t.iq3xxs_lo + 192)};
  const __m512i hi_t[4] = {Load(t.iq3xxs_hi), Load(t.iq3xxs_hi + 64), Load(t.iq3xxs_hi + 128),
                           Load(t.iq3xxs_hi + 192)};
  static constexpr int8_t kLevels[8] = {4, 12, 20, 28, 36, 44, 52, 62};
  const __m512i levels = Levels(kLevels);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t b = 0; b < n / kQkK; ++b) {
    const __m512i idx = Load(w[b].qs);  // [64] grid indices
    const __mmask64 bit7 = _mm512_movepi8_mask(idx);
    // [8] u32: 4 x 7 sign bits | s_j << 28 of sub-block j
    const __m256i aux = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs + kQkK / 4));
    const __m512i fields =
        _mm512_multishift_epi64_epi8(Load(kIdx.iq3xxs_sign), _mm512_cvtepu32_epi64(aux));
    alignas(32) uint64_t sg[4];  // sign bits of chunks 0-3
    StoreSigns(_mm512_cvtepi64_epi32(_mm512_permutex2var_epi8(ks0, fields, ks1)), sg);
    const __m256i sc =
        _mm256_or_si256(_mm256_slli_epi32(_mm256_srli_epi32(aux, 28), 1), _mm256_set1_epi32(1));
    const __m512i sc8 = _mm512_castsi128_si512(_mm256_cvtepi32_epi16(sc));  // [8] i16
    const __m512i s =
        Iq3Block(Lookup256(lo_t, idx, bit7), Lookup256(hi_t, idx, bit7), levels, sg, sc8, a[b].qs);
    acc = _mm512_fmadd_ps(_mm512_set1_ps(0.25f * _cvtsh_ss(w[b].d) * a[b].d), _mm512_cvtepi32_ps(s),
                          acc);
  }
  return Reduce(acc);
}

float DotIQ3S_Q8K_Avx512Vbmi(const void* w_row, const void* a_row, int64_t n) {
  const auto* w = static_cast<const BlockIQ3_S*>(w_row);  // [n / 256]
  const auto* a = static_cast<const BlockQ8_K*>(a_row);   // [n / 256]
  const IqTables& t = GetIqTables();
  // entries 0-255 / 256-511 of the code tables, 4 x 64 each
  const __m512i lo_t[2][4] = {
      {Load(t.iq3s_lo), Load(t.iq3s_lo + 64), Load(t.iq3s_lo + 128), Load(t.iq3s_lo + 192)},
      {Load(t.iq3s_lo + 256), Load(t.iq3s_lo + 320), Load(t.iq3s_lo + 384), Load(t.iq3s_lo + 448)}};
  const __m512i hi_t[2][4] = {
      {Load(t.iq3s_hi), Load(t.iq3s_hi + 64), Load(t.iq3s_hi + 128), Load(t.iq3s_hi + 192)},
      {Load(t.iq3s_hi + 256), Load(t.iq3s_hi + 320), Load(t.iq3s_hi + 384), Load(t.iq3s_hi + 448)}};
  static constexpr int8_t kLevels[8] = {1, 3, 5, 7, 9, 11, 13, 15};
  const __m512i levels = Levels(kLevels);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t b = 0; b < n / kQkK; ++b) {
    const __m512i idx = Load(w[b].qs);  // [64] low 8 bits of the grid indices
    const __mmask64 bit7 = _mm512_movepi8_mask(idx);
    const __mmask64 bit8 = _cvtu64_mask64(LoadU64(w[b].qh));  // 9th bits, entry k at bit k
    const __m512i lo =
        _mm512_mask_blend_epi8(bit8, Lookup256(lo_t[0], idx, bit7), Lookup256(lo_t[1], idx, bit7));
    const __m512i hi =
        _mm512_mask_blend_epi8(bit8, Lookup256(hi_t[0], idx, bit7), Lookup256(hi_t[1], idx, bit7));
    uint64_t sg[4];  // the explicit sign bits of chunks 0-3
    std::memcpy(sg, w[b].signs, sizeof(sg));
    const __m512i sc8 = _mm512_castsi256_si512(OddScales16(LoadU32(w[b].scales)));
    const __m512i s = Iq3Block(lo, hi, levels, sg, sc8, a[b].qs);
    acc = _mm512_fmadd_ps(_mm512_set1_ps(_cvtsh_ss(w[b].d) * a[b].d), _mm512_cvtepi32_ps(s), acc);
  }
  return Reduce(acc);
}

namespace {

// IQ2_XS / IQ2_S: the block's 32 groups' 16-bit codes (lo / hi bytes in group order), then its
// integer: per chunk c, one vpermi2b puts the code of group 8 c + q in bytes 0-1 of qword q,
// vpmultishiftqb cuts byte k's 2 bits (bits 2 k), vpermb maps them to 8 / 25 / 43.
IQ_INLINE __m512i Iq2Block(__m512i lo, __m512i hi, const uint64_t* sg, uint64_t scale_nibbles,
                           const int8_t* q8) {
  const __m512i sc16 = _mm512_castsi256_si512(OddScales16(scale_nibbles));
  const __m512i field = Load(kIdx.iq2_field);
  const __m512i levels = _mm512_set1_epi32(0x002B1908);  // 8, 25, 43 at codes 0, 1, 2
  __m512i s = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    const __m512i code = _mm512_permutex2var_epi8(lo, Load(kIdx.iq2_pair[c]), hi);
    const __m512i m = _mm512_permutexvar_epi8(_mm512_multishift_epi64_epi8(field, code), levels);
    s = Chunk(s, m, _cvtu64_mask64(sg[c]), q8 + 64 * c,
              _mm512_permutexvar_epi16(Load(kIdx.sc16[c]), sc16));
  }
  return s;
}

// A 512-entry byte lookup (t = 8 x 64 entries) of the low bytes of the 32 words of idx16
// (bits 0-8 the index): bytes 0-31 of the result.
IQ_INLINE __m512i Lookup512(const __m512i* t, __m512i idx8, __mmask64 bit7, __mmask64 bit8) {
  return _mm512_mask_blend_epi8(bit8, Lookup256(t, idx8, bit7), Lookup256(t + 4, idx8, bit7));
}

// The 32 low index bytes of idx16 in bytes 0-31, and the masks of index bits 7, 8 and 9.
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

}  // namespace

float DotIQ2XS_Q8K_Avx512Vbmi(const void* w_row, const void* a_row, int64_t n) {
  const auto* w = static_cast<const BlockIQ2_XS*>(w_row);  // [n / 256]
  const auto* a = static_cast<const BlockQ8_K*>(a_row);    // [n / 256]
  const IqTables& t = GetIqTables();
  const __m512i ks0 = Load(t.ksigns), ks1 = Load(t.ksigns + 64);
  __m512i lo_t[8], hi_t[8];  // code tables, entries 64 i .. 64 i + 63
  for (int i = 0; i < 8; ++i) {
    lo_t[i] = Load(t.iq2xs_lo + 64 * i);
    hi_t[i] = Load(t.iq2xs_hi + 64 * i);
  }
  __m512 acc = _mm512_setzero_ps();
  for (int64_t b = 0; b < n / kQkK; ++b) {
    const __m512i q = Load(w[b].qs);  // [32] u16: 9-bit grid index | 7-bit sign index << 9
    // sign byte of group g: ksigns[q_g >> 9] in the low byte of word g (ksigns[0] = 0 in the
    // high byte), truncated to bytes
    alignas(32) uint64_t sg[4];
    StoreSigns(_mm512_cvtepi16_epi8(_mm512_permutex2var_epi8(ks0, _mm512_srli_epi16(q, 9), ks1)),
               sg);
    const Iq2Index x = SplitIndex(q);
    const __m512i s =
        Iq2Block(Lookup512(lo_t, x.idx8, x.bit7, x.bit8), Lookup512(hi_t, x.idx8, x.bit7, x.bit8),
                 sg, LoadU64(w[b].scales), a[b].qs);
    acc = _mm512_fmadd_ps(_mm512_set1_ps(0.125f * _cvtsh_ss(w[b].d) * a[b].d),
                          _mm512_cvtepi32_ps(s), acc);
  }
  return Reduce(acc);
}

float DotIQ2S_Q8K_Avx512Vbmi(const void* w_row, const void* a_row, int64_t n) {
  const auto* w = static_cast<const BlockIQ2_S*>(w_row);  // [n / 256]
  const auto* a = static_cast<const BlockQ8_K*>(a_row);   // [n / 256]
  const IqTables& t = GetIqTables();
  const auto* lo_t = reinterpret_cast<const __m512i*>(t.iq2s_lo);  // [16] x 64 entries
  const auto* hi_t = reinterpret_cast<const __m512i*>(t.iq2s_hi);  // [16] x 64 entries
  const __m512i ctrl = Load(kIdx.iq2s_high), two_bits = _mm512_set1_epi16(0x0300);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t b = 0; b < n / kQkK; ++b) {
    // index of group g = qs[g] | (bits 2 g .. 2 g + 1 of the 8 qh bytes as a u64) << 8
    const __m512i lo =
        _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs)));
    const __m512i hi = _mm512_multishift_epi64_epi8(
        ctrl, _mm512_set1_epi64(static_cast<long long>(LoadU64(w[b].qh))));
    const Iq2Index x = SplitIndex(_mm512_ternarylogic_epi32(hi, two_bits, lo, 0xEA));  // A&B | C
    const __m512i code_lo = _mm512_mask_blend_epi8(x.bit9, Lookup512(lo_t, x.idx8, x.bit7, x.bit8),
                                                   Lookup512(lo_t + 8, x.idx8, x.bit7, x.bit8));
    const __m512i code_hi = _mm512_mask_blend_epi8(x.bit9, Lookup512(hi_t, x.idx8, x.bit7, x.bit8),
                                                   Lookup512(hi_t + 8, x.idx8, x.bit7, x.bit8));
    uint64_t signs[4];  // the explicit sign bits of chunks 0-3 (qs bytes 32-63)
    std::memcpy(signs, w[b].qs + kQkK / 8, sizeof(signs));
    const __m512i s = Iq2Block(code_lo, code_hi, signs, LoadU64(w[b].scales), a[b].qs);
    acc = _mm512_fmadd_ps(_mm512_set1_ps(0.125f * _cvtsh_ss(w[b].d) * a[b].d),
                          _mm512_cvtepi32_ps(s), acc);
  }
  return Reduce(acc);
}

#undef IQ_INLINE

}  // namespace moesplit::gemv::internal
