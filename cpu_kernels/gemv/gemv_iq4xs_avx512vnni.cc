// IQ4_XS weights x Q8_K activations, AVX-512 VNNI tier: the file-layout dot and the kernels of
// the 16-row layout kIQ4_XS_R16 (cpu_kernels/quant/repack.h). Compiled with
// MOESPLIT_FLAGS_AVX512VNNI (gemv/kquants.cmake); reached only through
// KernelsFor(IsaTier::kAvx512Vnni / kAmx).
//
// Integer scheme: a table lookup (vpshufb, the 16 levels in every 128-bit lane) turns each index
// nibble into u = kIq4Values[q] + 128 in [1, 241], vpdpbusd multiplies it by the signed
// activations, and the + 128 comes off with the Q8_K block sums:
//   sum_i kIq4Values[q_i] a_i = sum_i u_i a_i - 128 * bsum32_j     (per 32-value sub-block j)
// |that| <= 32 * 241 * 127 + 128 * 32 * 127 < 2^21, times (s_j - 32) in [-32, 31] and summed
// over 8 sub-blocks: < 2^29, exact in i32. One float step per 256 values (cvt rounds above 2^24:
// results agree with the scalar dot to ~1e-6 of sum |w a|).
//
// Decode on kIQ4_XS_R16, per group block (16 rows x 256 values, 2208 bytes), lane r = row r:
//   for sub-block j < 8: i_j = -128 bsum32_j, then for its 4 q dwords k = 4j + kk:
//     i_j += dpbusd(lut(q & 15), a dword 32j + 4kk x16) + dpbusd(lut(q >> 4 & 15), a dword
//            32j + 16 + 4kk x16)
//   I += vpmulld(i_j, s_j - 32);  acc += cvt(I) * d * d_a
// Per block: 32 loads, 32 shifts, 64 ANDs, 64 vpshufb, 64 vpdpbusd, 8 vpmulld + ~20: ~290 vector
// ops per 2208 bytes; two groups at a time share the activation broadcasts (as the Q4_K_R16
// decode, gemv_kquants_r16_avx512vnni.inc, whose prefetch scheme this copies).
//
// Several tokens on kIQ4_XS_R16: per 16-row group, chunks of blocks are expanded once into u8
// values + i32 scales + f32 d's in an L1 buffer, then every token runs the decode arithmetic on
// the buffer (4 tokens per pass share each buffer load).
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

using quant::BlockIQ4_XS;
using quant::BlockIQ4_XS_R16;
using quant::BlockQ8_K;
using quant::kQkK;
using quant::kR16Rows;

#define IQ4_INLINE inline __attribute__((always_inline))

// kIq4Values + 128 as u8 in each 128-bit lane: the vpshufb table.
IQ4_INLINE __m512i LevelTable() {
  return _mm512_xor_si512(
      _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(quant::kIq4Values))),
      _mm512_set1_epi8(static_cast<char>(0x80)));
}

// The 6-bit scale of sub-block j minus 32.
IQ4_INLINE int SubScale(const BlockIQ4_XS& w, int j) {
  return (((w.scales_l[j / 2] >> 4 * (j % 2)) & 0xF) | ((w.scales_h >> 2 * j) & 3) << 4) - 32;
}

// bsum32_j = bsums[2j] + bsums[2j + 1] of a Q8_K block, j < 8.
IQ4_INLINE void Bsum32(const BlockQ8_K& a, int32_t* out) {
  for (int j = 0; j < 8; ++j) out[j] = a.bsums[2 * j] + a.bsums[2 * j + 1];
}

// acc + vpdpbusd(w, the dword at p in all 16 lanes), the broadcast folded into the instruction.
IQ4_INLINE __m512i DotBcast(__m512i acc, __m512i w, const int8_t* p) {
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*reinterpret_cast<const int32_t*>(p)));
  return acc;
}

// The integer dot of one file-layout block: sub-blocks 2m, 2m + 1 per zmm (their 32 index
// bytes in value order: low nibbles of 16 bytes, then high nibbles, twice).
IQ4_INLINE int32_t BlockDot(const BlockIQ4_XS& w, const BlockQ8_K& a, __m512i table) {
  const __m512i nib = _mm512_set1_epi8(0x0F);
  __m512i isum = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int m = 0; m < 4; ++m) {
    const __m512i x = _mm512_mask_broadcast_i32x4(
        _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.qs + 32 * m))),
        0xFF00, _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.qs + 32 * m + 16)));
    // 128-bit lanes 1 and 3 take the high nibbles.
    const __m512i idx = _mm512_and_si512(_mm512_mask_srli_epi16(x, 0xFF00FF00, x, 4), nib);
    const __m512i u = _mm512_shuffle_epi8(table, idx);
    const __m512i act = _mm512_loadu_si512(a.qs + 64 * m);
    const __m512i d = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, act);
    const __m512i s = _mm512_mask_set1_epi32(_mm512_set1_epi32(SubScale(w, 2 * m)), 0xFF00,
                                             SubScale(w, 2 * m + 1));
    isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(d, s));
  }
  int32_t bs[8];
  Bsum32(a, bs);
  int32_t corr = 0;
  for (int j = 0; j < 8; ++j) corr += SubScale(w, j) * bs[j];
  return _mm512_reduce_add_epi32(isum) - 128 * corr;
}

// y[16 i .. 16 i + 16) = group i's rows . the token, G groups gstride blocks apart; prefetches
// (into L2, one block ahead, one line per 64 bytes read) stop at pf_end.
template <int G>
void DecodeGroups(const BlockIQ4_XS_R16* g, int64_t gstride, const BlockQ8_K* a, int64_t nb,
                  uintptr_t pf_end, float* y) {
  const __m512i table = LevelTable(), nib = _mm512_set1_epi8(0x0F);
  __m512 acc[G];
  for (int i = 0; i < G; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockIQ4_XS_R16* blk[G];
    const char* ahead[G];
    for (int i = 0; i < G; ++i) {
      blk[i] = g + i * gstride + b;
      ahead[i] = reinterpret_cast<const char*>(b + 1 < nb ? blk[i] + 1 : g + (i + G) * gstride);
    }
    const bool pf = reinterpret_cast<uintptr_t>(ahead[G - 1]) < pf_end;
    for (int i = 0; pf && i < G; ++i) {  // the lines past the q dwords (scales, d's)
      _mm_prefetch(ahead[i] + 32 * 64, _MM_HINT_T1);
      _mm_prefetch(ahead[i] + 33 * 64, _MM_HINT_T1);
      _mm_prefetch(ahead[i] + sizeof(BlockIQ4_XS_R16) - 1, _MM_HINT_T1);
    }
    const int8_t* aq = a[b].qs;
    int32_t bs[8];
    Bsum32(a[b], bs);
    __m512i isum[G];
    for (int i = 0; i < G; ++i) isum[i] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      __m512i ij[G];
      for (int i = 0; i < G; ++i) ij[i] = _mm512_set1_epi32(-128 * bs[j]);
#pragma GCC unroll 4
      for (int kk = 0; kk < 4; ++kk) {
        int32_t lo_dw, hi_dw;
        std::memcpy(&lo_dw, aq + 32 * j + 4 * kk, 4);
        std::memcpy(&hi_dw, aq + 32 * j + 16 + 4 * kk, 4);
        const __m512i a_lo = _mm512_set1_epi32(lo_dw), a_hi = _mm512_set1_epi32(hi_dw);
        for (int i = 0; i < G; ++i) {
          if (pf) _mm_prefetch(ahead[i] + 64 * (4 * j + kk), _MM_HINT_T1);
          __m512i q = _mm512_loadu_si512(blk[i]->q[4 * j + kk]);
          asm("" : "+v"(q));  // one load feeding both lookups
          const __m512i lo = _mm512_shuffle_epi8(table, _mm512_and_si512(q, nib));
          const __m512i hi = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(q, 4), nib));
          ij[i] = _mm512_dpbusd_epi32(ij[i], lo, a_lo);
          ij[i] = _mm512_dpbusd_epi32(ij[i], hi, a_hi);
        }
      }
      for (int i = 0; i < G; ++i) {
        const __m512i s =
            _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[i]->sc[j])));
        isum[i] = _mm512_add_epi32(isum[i], _mm512_mullo_epi32(ij[i], s));
      }
    }
    const __m512 da = _mm512_set1_ps(a[b].d);
    for (int i = 0; i < G; ++i) {
      const __m512 d =
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[i]->d)));
      acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[i]), _mm512_mul_ps(d, da), acc[i]);
    }
  }
  for (int i = 0; i < G; ++i) _mm512_storeu_ps(y + 16 * i, acc[i]);
}

// One group block expanded for the multi-token tile: lane r = row r everywhere.
struct Expanded {
  __m512i u[64];  // [2k + h] u8 values of q dword k: h = 0 low nibbles, 1 high, as kIq4Values + 128
  __m512i s[8];   // [j] i32 s_j - 32
  __m512 d;       // f32 d
};

constexpr int64_t kExpandChunk = 8;  // blocks per buffer fill: 8 x 4672 B = 37 KiB (L1)

__attribute__((noinline)) void Expand(const BlockIQ4_XS_R16* g, int64_t b0, int64_t b1,
                                      Expanded* buf) {
  const __m512i table = LevelTable(), nib = _mm512_set1_epi8(0x0F);
  for (int64_t b = b0; b < b1; ++b) {
    const BlockIQ4_XS_R16& in = g[b];
    Expanded& out = buf[b - b0];
    for (int k = 0; k < 32; ++k) {
      const __m512i q = _mm512_loadu_si512(in.q[k]);
      out.u[2 * k] = _mm512_shuffle_epi8(table, _mm512_and_si512(q, nib));
      out.u[2 * k + 1] = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(q, 4), nib));
    }
    for (int j = 0; j < 8; ++j) {
      out.s[j] = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in.sc[j])));
    }
    out.d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in.d)));
  }
}

// y rows [0, 16) of tokens t0 .. t0 + T - 1 (= if first, else +=) over buffered blocks [b0, b1).
template <int T>
void ExpandedTokens(const Expanded* buf, const uint8_t* a, size_t a_stride, int64_t t0, int64_t b0,
                    int64_t b1, bool first, float* y, int64_t ldy) {
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = b0; b < b1; ++b) {
    const Expanded& e = buf[b - b0];
    const BlockQ8_K* at[T];
    int32_t bs[T][8];
    for (int t = 0; t < T; ++t) {
      at[t] = reinterpret_cast<const BlockQ8_K*>(a + (t0 + t) * a_stride) + b;
      Bsum32(*at[t], bs[t]);
    }
    __m512i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
    for (int j = 0; j < 8; ++j) {
      __m512i ij[T];
      for (int t = 0; t < T; ++t) ij[t] = _mm512_set1_epi32(-128 * bs[t][j]);
#pragma GCC unroll 4
      for (int kk = 0; kk < 4; ++kk) {
        const __m512i lo = _mm512_load_si512(&e.u[2 * (4 * j + kk)]);
        const __m512i hi = _mm512_load_si512(&e.u[2 * (4 * j + kk) + 1]);
        for (int t = 0; t < T; ++t) {
          ij[t] = DotBcast(ij[t], lo, at[t]->qs + 32 * j + 4 * kk);
          ij[t] = DotBcast(ij[t], hi, at[t]->qs + 32 * j + 16 + 4 * kk);
        }
      }
      for (int t = 0; t < T; ++t) isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(ij[t], e.s[j]));
    }
    for (int t = 0; t < T; ++t) {
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]),
                               _mm512_mul_ps(e.d, _mm512_set1_ps(at[t]->d)), acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) {
    float* out = y + (t0 + t) * ldy;
    _mm512_storeu_ps(out, first ? acc[t] : _mm512_add_ps(_mm512_loadu_ps(out), acc[t]));
  }
}

}  // namespace

float DotIQ4XS_Q8K_Avx512Vnni(const void* w_row, const void* a_row, int64_t n) {
  const auto* w = static_cast<const BlockIQ4_XS*>(w_row);  // [n / 256]
  const auto* a = static_cast<const BlockQ8_K*>(a_row);    // [n / 256]
  const __m512i table = LevelTable();
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQkK; ++b) {
    sum += HalfToFloat(w[b].d) * a[b].d * static_cast<float>(BlockDot(w[b], a[b], table));
  }
  return sum;
}

void GemmIQ4XSR16_Q8K_Avx512Vnni(const void* w_ptr, size_t w_stride, int64_t n_rows,
                                 const void* a_ptr, size_t a_stride, int64_t n_tok, int64_t n,
                                 float* y, int64_t ldy) {
  const auto* w = static_cast<const uint8_t*>(w_ptr);
  const auto* a = static_cast<const uint8_t*>(a_ptr);
  const int64_t nb = n / kQkK;
  auto group = [&](int64_t r0) {
    return reinterpret_cast<const BlockIQ4_XS_R16*>(w + static_cast<size_t>(r0) * w_stride);
  };
  if (n_tok == 1) {
    const uintptr_t end = PrefetchEnd(w, n_rows, w_stride);
    const auto* act = reinterpret_cast<const BlockQ8_K*>(a);
    const int64_t gstride = group(kR16Rows) - group(0);
    int64_t r0 = 0;
    for (; r0 + 2 * kR16Rows <= n_rows; r0 += 2 * kR16Rows) {
      DecodeGroups<2>(group(r0), gstride, act, nb, end, y + r0);
    }
    if (r0 < n_rows) DecodeGroups<1>(group(r0), gstride, act, nb, end, y + r0);
    return;
  }
  alignas(64) Expanded buf[kExpandChunk];
  for (int64_t r0 = 0; r0 < n_rows; r0 += kR16Rows) {
    for (int64_t b0 = 0; b0 < nb; b0 += kExpandChunk) {
      const int64_t b1 = nb - b0 < kExpandChunk ? nb : b0 + kExpandChunk;
      Expand(group(r0), b0, b1, buf);
      int64_t t = 0;
      for (; t + 4 <= n_tok; t += 4) ExpandedTokens<4>(buf, a, a_stride, t, b0, b1, b0 == 0, y + r0, ldy);
      for (; t < n_tok; ++t) ExpandedTokens<1>(buf, a, a_stride, t, b0, b1, b0 == 0, y + r0, ldy);
    }
  }
}

#undef IQ4_INLINE

}  // namespace moesplit::gemv::internal
