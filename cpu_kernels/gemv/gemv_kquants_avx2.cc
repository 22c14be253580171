// AVX2 + FMA tier of the K-quant kernels (weights Q4_K / Q5_K / Q6_K, activations Q8_K).
// Compiled with MOESPLIT_FLAGS_AVX2 (gemv/kquants.cmake); reached only through
// KernelsFor(IsaTier::kAvx2).
//
// The AVX-512 kernels (gemv_kquants_avx512.inc) at half width: a weight block is unpacked into
// 8 ymm "pieces" p of 32 u8 quants, values 32p .. 32p + 31 (the Q8_K byte order), once per
// block and reused for the tile's tokens. Per (row, token, block):
//   8 x  I += madd(maddubs(W_p, A_p), S_p)  S_p: [16] i16 scale of each pair lane
//        acc = fma(cvt(I), d * d_a, acc)   [8] f32
//   2 x  acc = fma(off, bsf, acc)          mins / Q6_K's -32 via the bsums (16 f32 = 2 ymm)
// with off and bsf as in gemv_kquants_avx512.inc.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "cpu_kernels/gemv/gemv_internal.h"
#include "cpu_kernels/gemv/gemv_isa_common.h"
#include "cpu_kernels/quant/blocks.h"

namespace moesplit::gemv::internal {
namespace {

#include "cpu_kernels/gemv/gemv_kquants_tiles.inc"

using quant::BlockQ4_K;
using quant::BlockQ5_K;
using quant::BlockQ6_K;
using quant::BlockQ8_K;

#define MOESPLIT_KQ_INLINE inline __attribute__((always_inline))

MOESPLIT_KQ_INLINE __m256i Load256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// [8] f32 each: -scale * (the 8 u8 / i8 at p, widened).
MOESPLIT_KQ_INLINE __m256 ScaledU8(__m128i v8, float scale) {
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v8)), _mm256_set1_ps(scale));
}
MOESPLIT_KQ_INLINE __m256 ScaledI8(__m128i v8, float scale) {
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v8)), _mm256_set1_ps(scale));
}

// ---------------------------------------------------------------------------------------------
// Weight formats: Prepare once per (row, block); Values / Scales per piece p (32 values).
// ---------------------------------------------------------------------------------------------

struct Q4KPrep {
  Q4KScales s;    // 8 x (s_j, m_j)
  __m256 d;       // [8] f32: d
  __m256 off[2];  // [16] f32: lane k = -dmin * m_{k/2}
};

MOESPLIT_KQ_INLINE void PrepareQ4K(const uint8_t* scales12, uint16_t d, uint16_t dmin, Q4KPrep* p) {
  p->s = UnpackQ4KScales(scales12);
  const __m128i mins2 =
      _mm_unpacklo_epi8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p->s.min)),
                        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p->s.min)));
  const float neg_dmin = -_cvtsh_ss(dmin);
  p->d = _mm256_set1_ps(_cvtsh_ss(d));
  p->off[0] = ScaledU8(mins2, neg_dmin);                     // m0 m0 m1 m1 .. m3 m3
  p->off[1] = ScaledU8(_mm_srli_si128(mins2, 8), neg_dmin);  // m4 m4 .. m7 m7
}

// Piece p of Q4_K / Q5_K: chunk p / 2, low nibbles (p even) or high nibbles (p odd).
MOESPLIT_KQ_INLINE __m256i Nibbles(const uint8_t* qs, int p) {
  const __m256i x = Load256(qs + 32 * (p / 2));
  const __m256i m = _mm256_set1_epi8(0x0F);
  return p % 2 == 0 ? _mm256_and_si256(x, m) : _mm256_and_si256(_mm256_srli_epi16(x, 4), m);
}

struct Q4KFmt {
  using Block = BlockQ4_K;
  using Prep = Q4KPrep;
  static MOESPLIT_KQ_INLINE void Prepare(const uint8_t* blk, Prep* p) {
    const auto& b = *reinterpret_cast<const Block*>(blk);
    PrepareQ4K(b.scales, b.d, b.dmin, p);
  }
  static MOESPLIT_KQ_INLINE __m256i Values(const uint8_t* blk, const Prep&, int p) {
    return Nibbles(reinterpret_cast<const Block*>(blk)->qs, p);
  }
  // Piece p is sub-block p: one scale for all 16 pair lanes.
  static MOESPLIT_KQ_INLINE __m256i Scales(const Prep& pr, int p) {
    return _mm256_set1_epi16(pr.s.scale[p]);
  }
};

struct Q5KPrep : Q4KPrep {
  __m256i qh;  // [32] u8: bit p of byte l = 5th bit of value 32p + l
};

struct Q5KFmt {
  using Block = BlockQ5_K;
  using Prep = Q5KPrep;
  static MOESPLIT_KQ_INLINE void Prepare(const uint8_t* blk, Prep* p) {
    const auto& b = *reinterpret_cast<const Block*>(blk);
    PrepareQ4K(b.scales, b.d, b.dmin, p);
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
    return _mm256_set1_epi16(pr.s.scale[p]);
  }
};

struct Q6KPrep {
  __m128i sc8;    // [16] i8 sub-block scales
  __m256 d;       // [8] f32: d
  __m256 off[2];  // [16] f32: lane k = -32 * d * sc_k
};

struct Q6KFmt {
  using Block = BlockQ6_K;
  using Prep = Q6KPrep;
  static MOESPLIT_KQ_INLINE void Prepare(const uint8_t* blk, Prep* p) {
    const auto& b = *reinterpret_cast<const Block*>(blk);
    const float d = _cvtsh_ss(b.d);
    p->sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
    p->d = _mm256_set1_ps(d);
    p->off[0] = ScaledI8(p->sc8, -32.0f * d);  // exact: 11-bit d x 8-bit sc x 2^5
    p->off[1] = ScaledI8(_mm_srli_si128(p->sc8, 8), -32.0f * d);
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
  // Piece p = sub-blocks 2p (pair lanes 0..7) and 2p + 1 (lanes 8..15).
  static MOESPLIT_KQ_INLINE __m256i Scales(const Prep& pr, int p) {
    const __m128i idx =
        _mm_setr_epi8(2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p + 1, 2 * p + 1,
                      2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1);
    return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(pr.sc8, idx));
  }
};

// ---------------------------------------------------------------------------------------------
// The register tile.
// ---------------------------------------------------------------------------------------------

// [16] f32 as 2 ymm: bsf_k = d_a * bsum_k.
MOESPLIT_KQ_INLINE void ScaledBsums(const BlockQ8_K& a, __m256* lo, __m256* hi) {
  const __m256 da = _mm256_set1_ps(a.d);
  const __m128i b0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a.bsums));
  const __m128i b1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a.bsums + 8));
  *lo = _mm256_mul_ps(da, _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(b0)));
  *hi = _mm256_mul_ps(da, _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(b1)));
}

// The sum of the 8 lanes, pairing lane i with i + 4, then i + 2, i + 1 (fixed order).
MOESPLIT_KQ_INLINE float ReduceLanes(__m256 v) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

struct Avx2Core {
  static constexpr int kTileTokens = 4;  // 1 row x 4 tokens: 16 ymm registers
  static constexpr int kDecodeRows = 2;

  static void StoreBsf(const BlockQ8_K& a, float* dst) {
    __m256 lo, hi;
    ScaledBsums(a, &lo, &hi);
    _mm256_store_ps(dst, lo);
    _mm256_store_ps(dst + 8, hi);
  }

  template <class Fmt, int R, int T>
  static MOESPLIT_KQ_INLINE void ChunkSums(const uint8_t* const* w, const TokenRows& a, int64_t b0,
                                           int64_t b1, float (&out)[R][T]) {
    constexpr size_t kWb = sizeof(typename Fmt::Block);
    constexpr size_t kAb = sizeof(BlockQ8_K);
    __m256 acc[R][T];  // [R][T] x [8] f32
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    }
    for (int64_t b = b0; b < b1; ++b) {
      const uint8_t* wb[R];
      typename Fmt::Prep p[R];
      __m256i isum[R][T];  // [R][T] x [8] i32
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        wb[r] = w[r] + b * kWb;
        Fmt::Prepare(wb[r], &p[r]);
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) isum[r][t] = _mm256_setzero_si256();
      }
#pragma GCC unroll 8
      for (int pc = 0; pc < 8; ++pc) {
        __m256i wv[R], sv[R];  // [32] u8 quants, [16] i16 pair scales of values 32pc ..
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          wv[r] = Fmt::Values(wb[r], p[r], pc);
          sv[r] = Fmt::Scales(p[r], pc);
        }
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          const auto* q8 = reinterpret_cast<const BlockQ8_K*>(a.row[t] + b * kAb)->qs;
          const __m256i av = Load256(q8 + 32 * pc);
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r) {
            // |pair| <= 2 * 63 * 128 < 2^15: maddubs never saturates.
            const __m256i pr = _mm256_maddubs_epi16(wv[r], av);
            isum[r][t] = _mm256_add_epi32(isum[r][t], _mm256_madd_epi16(pr, sv[r]));
          }
        }
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const auto& ab = *reinterpret_cast<const BlockQ8_K*>(a.row[t] + b * kAb);
        __m256 bsf_lo, bsf_hi;
        if (a.bsf != nullptr) {
          const float* f = a.bsf + (t * kChunkBlocks + (b - b0)) * 16;
          bsf_lo = _mm256_load_ps(f);
          bsf_hi = _mm256_load_ps(f + 8);
        } else {
          ScaledBsums(ab, &bsf_lo, &bsf_hi);
        }
        const __m256 da = _mm256_set1_ps(ab.d);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const __m256 dd = _mm256_mul_ps(p[r].d, da);
          acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r][t]), dd, acc[r][t]);
          acc[r][t] = _mm256_fmadd_ps(p[r].off[0], bsf_lo, acc[r][t]);
          acc[r][t] = _mm256_fmadd_ps(p[r].off[1], bsf_hi, acc[r][t]);
        }
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) out[r][t] = ReduceLanes(acc[r][t]);
    }
  }
};

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

void GemmQ4K_Q8K_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                      size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  KQuantGemm<Avx2Core, Q4KFmt>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}
void GemmQ5K_Q8K_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                      size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  KQuantGemm<Avx2Core, Q5KFmt>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}
void GemmQ6K_Q8K_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                      size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  KQuantGemm<Avx2Core, Q6KFmt>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}

}  // namespace moesplit::gemv::internal
