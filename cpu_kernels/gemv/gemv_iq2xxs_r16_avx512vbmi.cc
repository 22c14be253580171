// IQ2_XXS weights in the 16-row layout kIQ2_XXS_R16 (cpu_kernels/quant/repack.h) x Q8_K
// activations: the AVX-512 VNNI tier's kernel on CPUs with VBMI and GFNI. Compiled with
// MOESPLIT_FLAGS_AVX512VNNI + -mavx512vbmi -mgfni (gemv/kquants.cmake); reached only through
// KernelsFor(IsaTier::kAvx512Vnni / kAmx) where DetectCpuFeatures().avx512vbmi and .gfni.
// The integer per (row, block, token) is the scalar dot's (gemv_iq_scalar.cc):
//   sum_j (2 s_j + 1) sum_i grid_i sign_i q8_i, times d d_a / 8.
//
// Per group block (16 rows x 256 values) and sub-block j, lane r = row r:
//   x    = q[j]: 64 grid indices, byte 4 r + g = row r's group g
//   C_lo = vpermi2b of x in IqTables::iq2xxs_lo (256 entries: two masked vpermi2b, bit 7 of x
//          choosing the pair), C_hi likewise: the 2-bit level codes of values 0-3 / 4-7 of
//          every group
//   for k < 8 (value k of every group):
//     u = vgf2p8affineqb(C, k)         level byte {8, 25, 43} of value 32 j + 8 g + k
//     a = the token's dword (4 activations of values 32 j + 8 g + k, g < 4) in all lanes,
//         negated under sgn[j][k] (|a| <= 127: exact)
//     P = vpdpbusd(P, u, a)
//   I += P * (2 s_j + 1)                [16] i32: |I| <= 8 x 31 x 32 x 43 x 127 < 2^31
// per block and token: acc += cvt(I) * d * d_a / 8. That is ~31 vector ops per 512 weights
// (1 token), where the file layout's block decode (gemv_iq_avx512vbmi.cc) takes ~90: no
// per-value shuffle, the signs are mask loads, and no horizontal sums (the lanes are rows).
// The activations are permuted once per call so that each (j, k) dword is contiguous:
// out[32 j + 4 k + g] = qs[32 j + 8 g + k] (one vpermb per 64 bytes).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cpu_kernels/gemv/gemv_internal.h"
#include "cpu_kernels/gemv/gemv_isa_common.h"
#include "cpu_kernels/quant/blocks.h"
#include "cpu_kernels/quant/repack.h"

namespace moesplit::gemv::internal {
namespace {

using quant::BlockIQ2_XXS_R16;
using quant::BlockQ8_K;
using quant::kQkK;
using quant::kR16Rows;

#define IQ_INLINE inline __attribute__((always_inline))

// vgf2p8affineqb matrix turning the 2-bit code of value k (bits 2 (k % 4), 2 (k % 4) + 1 of a
// code byte: c0, c1, never both set) into its level 8 ^ 17 c0 ^ 35 c1 (25 = 8 ^ 17, 43 = 8 ^
// 35; the 8 is the instruction's constant). Byte 7 - i of the matrix selects the source bits
// of result bit i: bit 0 <- c0 ^ c1, bit 1 <- c1, bit 4 <- c0, bit 5 <- c1.
constexpr uint64_t LevelMatrix(int k) {
  const uint64_t c0 = uint64_t{1} << (2 * (k % 4)), c1 = c0 << 1;
  return (c0 | c1) << 56 | c1 << 48 | c0 << 24 | c1 << 16;
}

// vpermb control of the activation permutation, per 64 bytes (two sub-blocks h):
// out[32 h + 4 k + g] = in[32 h + 8 g + k].
struct PermIndex {
  uint8_t idx[64];
};
constexpr PermIndex MakePermIndex() {
  PermIndex p{};
  for (int b = 0; b < 64; ++b) {
    const int h = b / 32, k = (b % 32) / 4, g = b % 4;
    p.idx[b] = static_cast<uint8_t>(32 * h + 8 * g + k);
  }
  return p;
}
alignas(64) constexpr PermIndex kPerm = MakePermIndex();

// n_tok tokens' quants in the permuted order: out + t * (nb * 256), nb blocks each.
void PermuteTokens(const uint8_t* a, size_t a_stride, int64_t n_tok, int64_t nb, uint8_t* out) {
  const __m512i ctrl = _mm512_load_si512(kPerm.idx);
  for (int64_t t = 0; t < n_tok; ++t) {
    const auto* at = reinterpret_cast<const BlockQ8_K*>(a + t * a_stride);
    uint8_t* o = out + t * nb * kQkK;
    for (int64_t b = 0; b < nb; ++b) {
      for (int c = 0; c < 4; ++c) {
        _mm512_storeu_si512(o + b * kQkK + 64 * c,
                            _mm512_permutexvar_epi8(ctrl, _mm512_loadu_si512(at[b].qs + 64 * c)));
      }
    }
  }
}

// IqTables::iq2xxs_lo / hi in registers: entries 64 i .. 64 i + 63.
struct Tables {
  __m512i lo[4], hi[4];
};
Tables LoadTables() {
  const IqTables& t = GetIqTables();
  Tables r;
  for (int i = 0; i < 4; ++i) {
    r.lo[i] = _mm512_load_si512(t.iq2xxs_lo + 64 * i);
    r.hi[i] = _mm512_load_si512(t.iq2xxs_hi + 64 * i);
  }
  return r;
}

// A 256-entry byte lookup of every byte of x: entries 0-127 where bit 7 is clear (the other
// bytes keep x), then entries 128-255 indexed by the kept bytes (no blend).
IQ_INLINE __m512i Lookup256(const __m512i* t, __m512i x, __mmask64 bit7) {
  const __m512i low = _mm512_mask2_permutex2var_epi8(t[0], x, ~bit7, t[1]);
  return _mm512_mask2_permutex2var_epi8(t[2], low, bit7, t[3]);
}

// A group of nb blocks at g: its [nb][16] f16 d's, then the payloads.
IQ_INLINE const BlockIQ2_XXS_R16* GroupBlocks(const uint8_t* g, int64_t nb) {
  return reinterpret_cast<const BlockIQ2_XXS_R16*>(g + nb * kR16Rows * 2);
}

// Blocks ahead of the one being read that decode prefetches (per stream): 2 x 1088 bytes, as
// the Q2_K / Q3_K tiles (one block is read in less than a DRAM miss).
constexpr int64_t kAhead = 2;

// y[t * ldy + 16 i + r] = row r of group i . token t, G groups (at g + i * gstride) x T tokens
// over nb blocks. act: token 0's permuted quants (tokens act_stride bytes apart); a: token 0's
// Q8_K row (a_stride apart, for the d's). Decode (T = 1) prefetches kAhead blocks ahead per
// stream, stopping at pf_end.
template <int G, int T>
void Tile(const uint8_t* g, size_t gstride, const uint8_t* act, size_t act_stride, const uint8_t* a,
          size_t a_stride, int64_t nb, uintptr_t pf_end, const Tables& tab, float* y, int64_t ldy) {
  const __m512i zero = _mm512_setzero_si512();
  __m512 acc[G][T];
  const uint16_t* dw[G];
  const BlockIQ2_XXS_R16* blocks[G];
  for (int i = 0; i < G; ++i) {
    dw[i] = reinterpret_cast<const uint16_t*>(g + i * gstride);
    blocks[i] = GroupBlocks(g + i * gstride, nb);
    for (int t = 0; t < T; ++t) acc[i][t] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    const BlockIQ2_XXS_R16* blk[G];
    const char* ahead[G];  // the block this stream reads kAhead blocks on (past the last: the
                           // next group's, which this stream reads next)
    for (int i = 0; i < G; ++i) {
      blk[i] = blocks[i] + b;
      ahead[i] = reinterpret_cast<const char*>(
          b + kAhead < nb ? blocks[i] + b + kAhead
                          : GroupBlocks(g + (i + G) * gstride, nb) + (b + kAhead - nb));
    }
    const bool pf = T == 1 && reinterpret_cast<uintptr_t>(ahead[G - 1]) < pf_end;
    for (int i = 0; pf && i < G; ++i) {
      _mm_prefetch(ahead[i] + 64 * 16, _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(dw[i] + kR16Rows * (b + kAhead)), _MM_HINT_T1);
    }
    const uint8_t* ab = act + b * kQkK;
    __m512i isum[G][T];
    for (int i = 0; i < G; ++i) {
      for (int t = 0; t < T; ++t) isum[i][t] = zero;
    }
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      __m512i s[G][2];  // [16] i32 2 s + 1 of sub-blocks 2p, 2p + 1
      for (int i = 0; i < G; ++i) {
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
          _mm_prefetch(ahead[i] + 128 * j, _MM_HINT_T1);
          _mm_prefetch(ahead[i] + 128 * j + 64, _MM_HINT_T1);
        }
        __m512i clo[G], chi[G], P[G][T];
        for (int i = 0; i < G; ++i) {
          const __m512i x = _mm512_loadu_si512(blk[i]->q[j]);
          const __mmask64 bit7 = _mm512_movepi8_mask(x);
          clo[i] = Lookup256(tab.lo, x, bit7);
          chi[i] = Lookup256(tab.hi, x, bit7);
          for (int t = 0; t < T; ++t) P[i][t] = zero;
        }
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) {
          __m512i at[T];
          for (int t = 0; t < T; ++t) {
            at[t] =
                _mm512_set1_epi32(static_cast<int>(LoadU32(ab + t * act_stride + 32 * j + 4 * k)));
          }
          for (int i = 0; i < G; ++i) {
            const __m512i u = _mm512_gf2p8affine_epi64_epi8(
                k < 4 ? clo[i] : chi[i], _mm512_set1_epi64(static_cast<int64_t>(LevelMatrix(k))),
                8);
            const __mmask64 neg = blk[i]->sgn[j][k];
            for (int t = 0; t < T; ++t) {
              P[i][t] =
                  _mm512_dpbusd_epi32(P[i][t], u, _mm512_mask_sub_epi8(at[t], neg, zero, at[t]));
            }
          }
        }
        for (int i = 0; i < G; ++i) {
          for (int t = 0; t < T; ++t) {
            isum[i][t] = _mm512_add_epi32(isum[i][t], _mm512_mullo_epi32(P[i][t], s[i][h]));
          }
        }
      }
    }
    for (int i = 0; i < G; ++i) {
      const __m512 d = _mm512_cvtph_ps(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(dw[i] + kR16Rows * b)));
      for (int t = 0; t < T; ++t) {
        const float da = 0.125f * reinterpret_cast<const BlockQ8_K*>(a + t * a_stride)[b].d;
        acc[i][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[i][t]),
                                    _mm512_mul_ps(d, _mm512_set1_ps(da)), acc[i][t]);
      }
    }
  }
  for (int i = 0; i < G; ++i) {
    for (int t = 0; t < T; ++t) _mm512_storeu_ps(y + t * ldy + 16 * i, acc[i][t]);
  }
}

using TileFn = void (*)(const uint8_t*, size_t, const uint8_t*, size_t, const uint8_t*, size_t,
                        int64_t, uintptr_t, const Tables&, float*, int64_t);

// Decode: two groups per pass (two streams sharing the activation dwords), then one. Several
// tokens: per group, 4 tokens per pass, then the rest 3 / 2 / 1 (the group's 16 rows x n
// stay in L1 / L2 while the tokens go by).
void Gemm(const void* w_ptr, size_t w_stride, int64_t n_rows, const void* a_ptr, size_t a_stride,
          int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  const auto* w = static_cast<const uint8_t*>(w_ptr);
  const auto* a = static_cast<const uint8_t*>(a_ptr);
  const int64_t nb = n / kQkK;
  const size_t gstride = static_cast<size_t>(kR16Rows) * w_stride;
  const Tables tab = LoadTables();
  // The permuted quants of every token: on the stack for one token of up to 16384 values (a
  // decode call), else on the heap (prefill: n_tok x n bytes).
  constexpr int64_t kStackBytes = 16384;
  alignas(64) uint8_t stack[kStackBytes];
  std::vector<uint8_t> heap;
  const int64_t perm_bytes = n_tok * nb * kQkK;
  if (perm_bytes > kStackBytes) heap.resize(static_cast<size_t>(perm_bytes));
  uint8_t* perm = perm_bytes > kStackBytes ? heap.data() : stack;
  PermuteTokens(a, a_stride, n_tok, nb, perm);
  const size_t act_stride = static_cast<size_t>(nb * kQkK);
  auto group = [&](int64_t r0) { return w + static_cast<size_t>(r0) * w_stride; };
  if (n_tok == 1) {
    const uintptr_t end = PrefetchEnd(w, n_rows, w_stride);
    int64_t r0 = 0;
    for (; r0 + 2 * kR16Rows <= n_rows; r0 += 2 * kR16Rows) {
      Tile<2, 1>(group(r0), gstride, perm, act_stride, a, a_stride, nb, end, tab, y + r0, ldy);
    }
    if (r0 < n_rows) {
      Tile<1, 1>(group(r0), gstride, perm, act_stride, a, a_stride, nb, end, tab, y + r0, ldy);
    }
    return;
  }
  constexpr TileFn kTiles[5] = {nullptr, Tile<1, 1>, Tile<1, 2>, Tile<1, 3>, Tile<1, 4>};
  for (int64_t r0 = 0; r0 < n_rows; r0 += kR16Rows) {
    for (int64_t t = 0; t < n_tok; t += 4) {
      const int64_t tn = n_tok - t < 4 ? n_tok - t : 4;
      kTiles[tn](group(r0), gstride, perm + t * act_stride, act_stride, a + t * a_stride, a_stride,
                 nb, 0, tab, y + t * ldy + r0, ldy);
    }
  }
}

#undef IQ_INLINE

}  // namespace

void GemmIQ2XXSR16_Q8K_Avx512Vbmi(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                                  size_t a_stride, int64_t n_tok, int64_t n, float* y,
                                  int64_t ldy) {
  Gemm(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}

}  // namespace moesplit::gemv::internal
