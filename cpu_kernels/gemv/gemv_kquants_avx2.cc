// AVX2 + FMA tier of the K-quant kernels (weights Q2_K / Q3_K / Q4_K / Q5_K / Q6_K / IQ4_XS,
// activations Q8_K). Compiled with MOESPLIT_FLAGS_AVX2 (gemv/kquants.cmake); reached through
// KernelsFor(IsaTier::kAvx2) (IQ4_XS also through kAvx512).
//
// A weight block is unpacked into 8 ymm "pieces" p of 32 u8 quants, values 32p .. 32p + 31
// (the Q8_K byte order, so activations are plain loads), once per block and reused for the
// tile's tokens (1 row x 4 tokens in prefill; 1 row, Q3_K 2, in decode). Per (row, token,
// block):
//   8 x  I += madd(maddubs(W_p, A_p), S_p)  S_p: [16] i16 scale of each pair lane (one vpshufb)
//        acc = fma(cvt(I), d * d_a, acc)   [8] f32
// and the offsets through the Q8_K bsums: Q4_K / Q5_K acc = fma(-dmin m_j, d_a bsum32_j, acc)
// (bsum32_j: activation sum of sub-block j); Q2_K acc = fma(cvt(madd(m16, bsums)), -dmin d_a,
// acc) (a min per 16 values); Q6_K / Q3_K start I at -32 sum_k sc_k bsum_k / -4 sum_k
// (s_k - 32) bsum_k (one madd), so their quants stay unsigned (0..63 / 0..7) for maddubs.
// IQ4_XS's table levels are signed: maddubs(|W_p|, A_p with W_p's signs).
// Integer lanes are exact; cvt rounds above 2^24, so the results agree with the scalar dots
// to ~1e-6 of sum |w a|, and dot, gemv and every gemm tile agree bit for bit. From 8 tokens
// the gemm takes the wide path (gemv_avx2_wide.inc: the same block integers, summed in another
// float order), which agrees with the tiles to ~1e-6, not bit for bit.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cpu_kernels/gemv/gemv_internal.h"
#include "cpu_kernels/gemv/gemv_isa_common.h"
#include "cpu_kernels/quant/blocks.h"
#include "cpu_kernels/quant/repack.h"

namespace moesplit::gemv::internal {
namespace {

using quant::BlockQ4_K;
using quant::BlockQ5_K;
using quant::BlockQ6_K;
using quant::BlockQ8_K;

#include "cpu_kernels/gemv/gemv_avx2_tile.inc"
#include "cpu_kernels/gemv/gemv_avx2_wide.inc"

// [16] u8: s_0..s_7, m_0..m_7 of Q4_K's 12 packed scale bytes b (blocks.h), vectorized:
//   s_j = b[j] & 63,  m_j = b[j + 4] & 63                      (j < 4)
//   s_j = b[j + 4] & 15 | (b[j - 4] >> 6) << 4                 (j >= 4)
//   m_j = b[j + 4] >> 4 | (b[j] >> 6) << 4
// Reads 16 bytes at b (the 4 after the scales are the block's first quants; unused).
MOESPLIT_KQ_INLINE __m128i UnpackQ4KScalesVec(const uint8_t* b) {
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
  // low = [b0..3 & 63, b8..11 & 15, b4..7 & 63, b8..11 >> 4]
  const __m128i lo_src =
      _mm_shuffle_epi8(x, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
  const __m128i lo_shift = _mm_blend_epi16(lo_src, _mm_srli_epi16(lo_src, 4), 0xC0);
  const __m128i low = _mm_and_si128(
      lo_shift, _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 15, 15, 15, 15));
  // high = [0, (b0..3 >> 6) << 4, 0, (b4..7 >> 6) << 4]  ((x >> 2) & 0x30 == (x >> 6) << 4)
  const __m128i hi_src =
      _mm_shuffle_epi8(x, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
  const __m128i high = _mm_and_si128(_mm_srli_epi16(hi_src, 2), _mm_set1_epi8(0x30));
  return _mm_or_si128(low, high);
}

// Q4_K / Q5_K's mins for the wide path (gemv_avx2_wide.inc): [16] i16 m_{k / 2} per 16-value
// group k, and -dmin.
MOESPLIT_KQ_INLINE __m256i Q4KMins16(const uint8_t* scales12) {
  const __m128i raw = UnpackQ4KScalesVec(scales12);  // scale[8] min[8]
  return _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(raw, raw));
}

struct Q4KPrep {
  __m256i sc;   // [16] i16: s_0..s_7 in both 128-bit halves (for PickWord)
  __m256 mins;  // [8] f32: -dmin * m_j
};

MOESPLIT_KQ_INLINE void PrepareQ4K(const uint8_t* scales12, uint16_t dmin, Q4KPrep* p) {
  const __m128i raw = UnpackQ4KScalesVec(scales12);  // scale[8] min[8]
  p->sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(raw));
  p->mins = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(raw, 8))),
                          _mm256_set1_ps(-_cvtsh_ss(dmin)));
}

// Piece p of Q4_K / Q5_K: chunk p / 2, low nibbles (p even) or high nibbles (p odd).
MOESPLIT_KQ_INLINE __m256i Nibbles(const uint8_t* qs, int p) {
  const __m256i x = Load256(qs + 32 * (p / 2));
  const __m256i m = _mm256_set1_epi8(0x0F);
  return p % 2 == 0 ? _mm256_and_si256(x, m) : _mm256_and_si256(_mm256_srli_epi16(x, 4), m);
}

struct Q4KFmt : FmtTraits {
  using Block = BlockQ4_K;
  static constexpr int kMaxQuant = 15;
  static MOESPLIT_KQ_INLINE __m256i Mins16(const uint8_t* blk) {
    return Q4KMins16(reinterpret_cast<const Block*>(blk)->scales);
  }
  static MOESPLIT_KQ_INLINE float NegDmin(const uint8_t* blk) {
    return -_cvtsh_ss(reinterpret_cast<const Block*>(blk)->dmin);
  }
  using Prep = Q4KPrep;
  static MOESPLIT_KQ_INLINE float D(const uint8_t* blk) {
    return _cvtsh_ss(reinterpret_cast<const Block*>(blk)->d);
  }
  static constexpr bool kMins = true;
  static MOESPLIT_KQ_INLINE void Prepare(const uint8_t* blk, Prep* p) {
    const auto& b = *reinterpret_cast<const Block*>(blk);
    PrepareQ4K(b.scales, b.dmin, p);
  }
  static MOESPLIT_KQ_INLINE __m256i Values(const uint8_t* blk, const Prep&, int p) {
    return Nibbles(reinterpret_cast<const Block*>(blk)->qs, p);
  }
  // Piece p is sub-block p: s_p in all 16 pair lanes.
  static MOESPLIT_KQ_INLINE __m256i Scales(const Prep& pr, int p) {
    return _mm256_shuffle_epi8(pr.sc, PickWord(2 * p));
  }
};

struct Q5KPrep : Q4KPrep {
  __m256i qh;  // [32] u8: bit p of byte l = 5th bit of value 32p + l
};

struct Q5KFmt : FmtTraits {
  using Block = BlockQ5_K;
  static constexpr int kMaxQuant = 31;
  static MOESPLIT_KQ_INLINE __m256i Mins16(const uint8_t* blk) {
    return Q4KMins16(reinterpret_cast<const Block*>(blk)->scales);
  }
  static MOESPLIT_KQ_INLINE float NegDmin(const uint8_t* blk) {
    return -_cvtsh_ss(reinterpret_cast<const Block*>(blk)->dmin);
  }
  using Prep = Q5KPrep;
  static MOESPLIT_KQ_INLINE float D(const uint8_t* blk) {
    return _cvtsh_ss(reinterpret_cast<const Block*>(blk)->d);
  }
  static constexpr bool kMins = true;
  static MOESPLIT_KQ_INLINE void Prepare(const uint8_t* blk, Prep* p) {
    const auto& b = *reinterpret_cast<const Block*>(blk);
    PrepareQ4K(b.scales, b.dmin, p);
    p->qh = Load256(b.qh);
  }
  // Nibbles | (bit p of qh) << 4: qh shifted per 16-bit lane so that bit p lands on bit 4
  // (bits crossing the byte boundary land outside bit 4 and are masked off).
  static MOESPLIT_KQ_INLINE __m256i Values(const uint8_t* blk, const Prep& pr, int p) {
    const __m256i nib = Nibbles(reinterpret_cast<const Block*>(blk)->qs, p);
    const __m256i h = p <= 4 ? _mm256_slli_epi16(pr.qh, 4 - p) : _mm256_srli_epi16(pr.qh, p - 4);
    return _mm256_or_si256(nib, _mm256_and_si256(h, _mm256_set1_epi8(0x10)));
  }
  static MOESPLIT_KQ_INLINE __m256i Scales(const Prep& pr, int p) {
    return _mm256_shuffle_epi8(pr.sc, PickWord(2 * p));
  }
};

struct Q6KPrep {
  __m256i sc_lo;  // [16] i16: sc_0..sc_7 in both 128-bit halves
  __m256i sc_hi;  // [16] i16: sc_8..sc_15 in both halves
  __m256i binit;  // [16] i16: -32 * sc_k (|.| <= 4096), the bsums' weights of I's start
};

struct Q6KFmt : FmtTraits {
  using Block = BlockQ6_K;
  static constexpr int kMaxQuant = 63;
  using Prep = Q6KPrep;
  static MOESPLIT_KQ_INLINE float D(const uint8_t* blk) {
    return _cvtsh_ss(reinterpret_cast<const Block*>(blk)->d);
  }
  static constexpr bool kBsumInit = true;
  static MOESPLIT_KQ_INLINE void Prepare(const uint8_t* blk, Prep* p) {
    const auto& b = *reinterpret_cast<const Block*>(blk);
    const __m256i sc16 =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
    SplitScales(sc16, &p->sc_lo, &p->sc_hi);
    p->binit = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sc16, 5));
  }
  // Piece p = 4h + k (values 128h + 32k + l): ql[64h + 32 (k % 2) + l], nibble k / 2, with qh
  // bits 2k, 2k + 1 of qh[32h + l] moved to bits 4-5.
  static MOESPLIT_KQ_INLINE __m256i Values(const uint8_t* blk, const Prep&, int p) {
    const auto& b = *reinterpret_cast<const Block*>(blk);
    const int h = p / 4, k = p % 4;
    const __m256i ql = Load256(b.ql + 64 * h + 32 * (k % 2));
    const __m256i qh = Load256(b.qh + 32 * h);
    const __m256i m0f = _mm256_set1_epi8(0x0F);
    const __m256i lo =
        k < 2 ? _mm256_and_si256(ql, m0f) : _mm256_and_si256(_mm256_srli_epi16(ql, 4), m0f);
    const __m256i hs = k == 0   ? _mm256_slli_epi16(qh, 4)
                       : k == 1 ? _mm256_slli_epi16(qh, 2)
                       : k == 2 ? qh
                                : _mm256_srli_epi16(qh, 2);
    return _mm256_or_si256(lo, _mm256_and_si256(hs, _mm256_set1_epi8(0x30)));
  }
  static MOESPLIT_KQ_INLINE __m256i Scales(const Prep& pr, int p) {
    return PairScales(pr.sc_lo, pr.sc_hi, p);
  }
};

// Piece p = 4h + k of Q2_K / Q3_K (values 128h + 32k + l): bits 2k, 2k + 1 of qs[32h + l].
MOESPLIT_KQ_INLINE __m256i Crumbs(const uint8_t* qs, int p) {
  const __m256i x = Load256(qs + 32 * (p / 4));
  return _mm256_and_si256(_mm256_srli_epi16(x, 2 * (p % 4)), _mm256_set1_epi8(3));
}

struct Q2KPrep {
  __m256i sc_lo, sc_hi;  // [16] i16: s_0..s_7 / s_8..s_15 (4 bits) in both halves
};

// Q2_K: w = d s_j q - dmin m_j, q in [0, 3] (|pair| <= 2 * 3 * 128: no saturation).
struct Q2KFmt : FmtTraits {
  using Block = quant::BlockQ2_K;
  static constexpr int kMaxQuant = 3;
  using Prep = Q2KPrep;
  static MOESPLIT_KQ_INLINE float D(const uint8_t* blk) {
    return _cvtsh_ss(reinterpret_cast<const Block*>(blk)->d);
  }
  static constexpr bool kMins16 = true;
  // [16] i16 m_0..m_15 and -dmin, read at the block's end (not kept in Prep: registers).
  static MOESPLIT_KQ_INLINE __m256i Mins16(const uint8_t* blk) {
    const __m128i raw = _mm_loadu_si128(
        reinterpret_cast<const __m128i*>(reinterpret_cast<const Block*>(blk)->scales));
    return _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(0x0F)));
  }
  static MOESPLIT_KQ_INLINE float NegDmin(const uint8_t* blk) {
    return -_cvtsh_ss(reinterpret_cast<const Block*>(blk)->dmin);
  }
  static MOESPLIT_KQ_INLINE void Prepare(const uint8_t* blk, Prep* p) {
    const auto& b = *reinterpret_cast<const Block*>(blk);
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
    const __m128i m0f = _mm_set1_epi8(0x0F);
    SplitScales(_mm256_cvtepu8_epi16(_mm_and_si128(raw, m0f)), &p->sc_lo, &p->sc_hi);
  }
  static MOESPLIT_KQ_INLINE __m256i Values(const uint8_t* blk, const Prep&, int p) {
    return Crumbs(reinterpret_cast<const Block*>(blk)->qs, p);
  }
  static MOESPLIT_KQ_INLINE __m256i Scales(const Prep& pr, int p) {
    return PairScales(pr.sc_lo, pr.sc_hi, p);
  }
};

struct Q3KPrep {
  __m256i sc_lo, sc_hi;  // [16] i16: s_0 - 32 .. s_7 - 32 / s_8 - 32 .. in both halves
  __m256i binit;         // [16] i16: -4 (s_k - 32) (|.| <= 128)
  __m256i hm;            // [32] u8: hmask; bit p of byte l = bit 2 of value 32p + l
};

// Q3_K: w = d (s_j - 32)(q3 - 4), q3 = crumb + 4 hbit in [0, 7]; the -4 is I's start.
struct Q3KFmt : FmtTraits {
  using Block = quant::BlockQ3_K;
  static constexpr int kMaxQuant = 7;
  using Prep = Q3KPrep;
  static MOESPLIT_KQ_INLINE float D(const uint8_t* blk) {
    return _cvtsh_ss(reinterpret_cast<const Block*>(blk)->d);
  }
  static constexpr bool kBsumInit = true;
  static MOESPLIT_KQ_INLINE void Prepare(const uint8_t* blk, Prep* p) {
    const auto& b = *reinterpret_cast<const Block*>(blk);
    alignas(16) int8_t s8[16];  // s_k - 32
    UnpackQ3KScales(b.scales, s8);
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(s8)));
    SplitScales(sc16, &p->sc_lo, &p->sc_hi);
    p->binit = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sc16, 2));
    p->hm = Load256(b.hmask);
  }
  // Bit p of each hmask byte moved to bit 2 within 16-bit lanes (bits crossing from the other
  // byte land on bits 0-1 or 3-7 and are masked off).
  static MOESPLIT_KQ_INLINE __m256i Values(const uint8_t* blk, const Prep& pr, int p) {
    const __m256i h = p <= 2 ? _mm256_slli_epi16(pr.hm, 2 - p) : _mm256_srli_epi16(pr.hm, p - 2);
    return _mm256_or_si256(Crumbs(reinterpret_cast<const Block*>(blk)->qs, p),
                           _mm256_and_si256(h, _mm256_set1_epi8(4)));
  }
  static MOESPLIT_KQ_INLINE __m256i Scales(const Prep& pr, int p) {
    return PairScales(pr.sc_lo, pr.sc_hi, p);
  }
};

struct IQ4XSPrep {
  __m256i sc;  // [16] i16: s_0 - 32 .. s_7 - 32 in both halves (for PickWord)
};

// IQ4_XS: w = d (s_j - 32) kIq4Values[q], values in [-127, 113]: signed, so maddubs takes
// |w| and the activations with w's signs (|pair| <= 2 * 127 * 127 < 2^15).
struct IQ4XSFmt : FmtTraits {
  using Block = quant::BlockIQ4_XS;
  static constexpr int kMaxQuant = 127;
  using Prep = IQ4XSPrep;
  static MOESPLIT_KQ_INLINE float D(const uint8_t* blk) {
    return _cvtsh_ss(reinterpret_cast<const Block*>(blk)->d);
  }
  static constexpr bool kSigned = true;
  static MOESPLIT_KQ_INLINE void Prepare(const uint8_t* blk, Prep* p) {
    const auto& b = *reinterpret_cast<const Block*>(blk);
    // [8] i32 lane j: s_j - 32 = (nibble j of scales_l | bits 2j, 2j + 1 of scales_h << 4) - 32
    uint32_t lo4;
    std::memcpy(&lo4, b.scales_l, 4);
    const __m256i l = _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(lo4)),
                                        _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
    const __m256i h = _mm256_srlv_epi32(_mm256_set1_epi32(b.scales_h),
                                        _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14));
    const __m256i s32 = _mm256_sub_epi32(
        _mm256_or_si256(_mm256_and_si256(l, _mm256_set1_epi32(0xF)),
                        _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(3)), 4)),
        _mm256_set1_epi32(32));
    const __m128i s16 =
        _mm_packs_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
    p->sc = _mm256_broadcastsi128_si256(s16);
  }
  // Sub-block p: its 16 index bytes, low nibbles = values 0..15, high = 16..31.
  static MOESPLIT_KQ_INLINE void SignedValues(const uint8_t* blk, const Prep&, int p, __m256i* mag,
                                              __m256i* sgn) {
    const __m128i x = _mm_loadu_si128(
        reinterpret_cast<const __m128i*>(reinterpret_cast<const Block*>(blk)->qs + 16 * p));
    const __m256i idx =
        _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(x, 4), x), _mm256_set1_epi8(0x0F));
    const __m256i table = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(quant::kIq4Values)));
    *sgn = _mm256_shuffle_epi8(table, idx);
    *mag = _mm256_abs_epi8(*sgn);
  }
  static MOESPLIT_KQ_INLINE __m256i Scales(const Prep& pr, int p) {
    return _mm256_shuffle_epi8(pr.sc, PickWord(2 * p));
  }
};

#include "cpu_kernels/gemv/gemv_q2k_r16_avx2.inc"
#include "cpu_kernels/gemv/gemv_q3k_r16_avx2.inc"
// After IQ4XSFmt and the wide path: it uses their helpers (avx2_wide).
#include "cpu_kernels/gemv/gemv_iq4xs_r16_avx2.inc"

#undef MOESPLIT_KQ_INLINE

}  // namespace

float DotQ4K_Q8K_Avx2(const void* w_row, const void* a_row, int64_t n) {
  return KQuantDot<Avx2Core, Q4KFmt>(w_row, a_row, n);
}
float DotQ5K_Q8K_Avx2(const void* w_row, const void* a_row, int64_t n) {
  return KQuantDot<Avx2Core, Q5KFmt>(w_row, a_row, n);
}
float DotQ6K_Q8K_Avx2(const void* w_row, const void* a_row, int64_t n) {
  return KQuantDot<Avx2Core, Q6KFmt>(w_row, a_row, n);
}

float DotQ2K_Q8K_Avx2(const void* w_row, const void* a_row, int64_t n) {
  return KQuantDot<Avx2Core, Q2KFmt>(w_row, a_row, n);
}
float DotQ3K_Q8K_Avx2(const void* w_row, const void* a_row, int64_t n) {
  return KQuantDot<Avx2Core, Q3KFmt>(w_row, a_row, n);
}
float DotIQ4XS_Q8K_Avx2(const void* w_row, const void* a_row, int64_t n) {
  return KQuantDot<Avx2Core, IQ4XSFmt>(w_row, a_row, n);
}

void GemmQ4K_Q8K_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                      size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  Avx2Gemm<Q4KFmt>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}
void GemmQ5K_Q8K_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                      size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  Avx2Gemm<Q5KFmt>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}
void GemmQ6K_Q8K_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                      size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  Avx2Gemm<Q6KFmt>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}

void GemmQ2K_Q8K_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                      size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  Avx2Gemm<Q2KFmt>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}
void GemmQ2KR16_Q8K_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                         size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* ab = static_cast<const uint8_t*>(a);
  if (n_tok == 1) {
    Q2KR16Gemm<1>(wb, w_stride, n_rows, ab, a_stride, n, y, ldy);
  } else if (n_tok == 2) {
    Q2KR16Gemm<2>(wb, w_stride, n_rows, ab, a_stride, n, y, ldy);
  } else {  // the wide path from 3 tokens: the layout's decode costs a shift and an AND
    wide::WideGemm<Q2KR16Fmt>(wb, w_stride, n_rows, ab, a_stride, n_tok, n, y, ldy);
  }
}
void GemmQ3KR16_Q8K_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                         size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* ab = static_cast<const uint8_t*>(a);
  if (n_tok == 1) {
    Q3KR16Gemv(wb, w_stride, n_rows, ab, n, y);
  } else {
    wide::WideGemm<Q3KR16Fmt>(wb, w_stride, n_rows, ab, a_stride, n_tok, n, y, ldy);
  }
}
void GemmQ3K_Q8K_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                      size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  Avx2Gemm<Q3KFmt>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}
void GemmIQ4XSR16_Q8K_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                           size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* ab = static_cast<const uint8_t*>(a);
  int64_t t = 0;
  for (; t + 2 <= n_tok; t += 2) {
    IQ4XSR16Gemm<2>(wb, w_stride, n_rows, ab + t * a_stride, a_stride, n, y + t * ldy, ldy);
  }
  if (t < n_tok)
    IQ4XSR16Gemm<1>(wb, w_stride, n_rows, ab + t * a_stride, a_stride, n, y + t * ldy, ldy);
}
void GemmIQ4XS_Q8K_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                        size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  Avx2Gemm<IQ4XSFmt>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}

}  // namespace moesplit::gemv::internal
