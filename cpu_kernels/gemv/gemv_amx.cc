// AMX tier: the prefill GEMMs of the layouts repacked at load (q4_K_r16 / q5_K_r16 / q6_K_r16 x
// Q8_K; q8_0_r16 / q5_0_r16 / q4_0_r16 x Q8_0) on AMX-INT8 tiles, 16 tokens x 16 weight rows per
// tile. Q5_K differs from Q4_K only in B's 5th bits (FillQ5Pair); Q6_K has its own section.
// Compiled with the VNNI flags + -mamx-tile -mamx-int8 (cpu_kernels/CMakeLists.txt); reached only
// through KernelsFor(IsaTier::kAmx), whose table is the AVX-512 VNNI one with these gemms.
//
// The repacked layout is already AMX's B operand: TDPBSUD C[M x N] += A[M x K] (s8) . B (u8),
// with B stored "VNNI-style" as K/4 rows of N x 4 bytes, i.e. row k holds for each column n the
// 4 bytes that multiply A[., 4k .. 4k+3]. A q4_K_r16 group block stores, for sub-block pair c
// and dword k < 8, the 16 rows' dword 8c + k: low nibbles = values 64c + 4k .. +3 of sub-block
// 2c, high nibbles the same of sub-block 2c + 1. So with
//   M = 16 tokens, N = the group's 16 weight rows, K = one 32-value sub-block j,
//   A_j = the tokens' Q8_K quants [64c + 32h .. +32) (loaded straight from the activation rows,
//         stride = their row stride; h = j % 2),
//   B_j = the 8 vectors (q[8c + k] >> 4h) & 0x0F (a 512-byte scratch tile, built once per group
//         block and reused by every 16-token tile),
// one TDPBSUD gives C_j[t][r] = sum over the sub-block of q_rk a_tk: 16 x 16 x 32 = 8192
// multiply-adds per instruction against 64 per vpdpbusd. The Q4_K scales are per (row,
// sub-block), i.e. per column of C, so they apply after the product, in f32:
//   y[t][r] += d_a[t] * (sum_j (d_r s_rj) C_j[t][r] - sum_j (dmin_r m_rj) bsum32_j[t])
// (C_j is exact: |C_j| <= 32 * 15 * 127). Per 16 x 16 x 256 block: 8 TDPBSUD + 8 tile stores and
// ~26 vector ops per token row (8 fma for the scales, 8 for the mins, load/convert), ~2.5x fewer
// instructions than the VNNI row-lane tile (64 vpdpbusd per token row); results agree with the
// Q4_K dot up to float summation order.
//
// Token counts below 16 (decode, small experts) take the VNNI tier's q4_K_r16 gemm; above, the
// last n_tok % 16 tokens run as one shorter tile (its own tile configuration).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cpu_kernels/gemv/amx_tile_config.h"
#include "cpu_kernels/gemv/gemv_internal.h"
#include "cpu_kernels/gemv/q6k_r16_values_avx512.h"
#include "cpu_kernels/quant/blocks.h"
#include "cpu_kernels/quant/repack.h"

namespace moesplit::gemv::internal {
namespace {

using quant::BlockQ4_K_R16;
using quant::BlockQ8_K;
using quant::kR16Rows;

constexpr int64_t kTile = 16;  // tokens per A / C tile, and weight rows per group
constexpr int64_t kChunk = 8;  // group blocks per scratch fill: 8 x 5 KiB = 40 KiB (L1 / L2)
constexpr int kSubBlocks = 8;  // 32-value sub-blocks per 256-value block

// Tile registers: 0-3 = C (16 tokens x 16 rows int32) of four sub-blocks in flight, 4-5 = A
// (16 tokens x 32 s8), 6-7 = B (8 x 64 u8): the four products of a half block issue back to back
// and their stores follow, instead of one zero-load-multiply-store chain per sub-block (AmxQuad).

// n_tok (1..16) token rows in the C and A tiles: 16 for the full tiles, n_tok % 16 for the last.
// a_colsb = K bytes per product (32: a Q4_K / Q5_K sub-block, 16: a Q6_K one), B = K / 4 rows.
TileConfig MakeConfig(int n_tok, int a_colsb = 32) {
  TileConfig c;
  for (int i = 0; i < 4; ++i) {
    c.rows[i] = static_cast<uint8_t>(n_tok);
    c.colsb[i] = kTile * 4;
  }
  for (int i = 4; i < 6; ++i) {
    c.rows[i] = static_cast<uint8_t>(n_tok);
    c.colsb[i] = static_cast<uint16_t>(a_colsb);
  }
  for (int i = 6; i < 8; ++i) {
    c.rows[i] = static_cast<uint8_t>(a_colsb / 4);
    c.colsb[i] = 64;
  }
  return c;
}

// One group block prepared for the tiles: B_j, the f32 scales and the mins as i16 pairs (lane
// r = row r).
struct alignas(64) AmxBlock {
  uint8_t b[kSubBlocks][8][64];  // [j][k][row r x 4 bytes] nibbles of sub-block j
  float sf[kSubBlocks][16];      // d_r s_rj
  uint32_t mn[4][16];            // [pair p] m_r,2p | m_r,2p+1 << 16
  float ndm[16];                 // -dmin_r
};

// Q5_K (kQ5_K_R16): q dword 8c + k takes its 5th bits from qh dword k, bit 2c of each byte for
// the low nibbles (sub-block 2c) and bit 2c + 1 for the high ones; moved to bit 4 with a 16-bit
// shift (by 4 - 2c, resp. 3 - 2c; a bit carried across the byte boundary lands outside the
// 0x10 mask) and OR-ed in: B holds the 5-bit values 0 .. 31, |C_j| <= 32 * 31 * 127.
template <int kShift>
inline __m512i Bit4(__m512i h) {
  const __m512i m10 = _mm512_set1_epi8(0x10);
  if constexpr (kShift >= 0) return _mm512_and_si512(_mm512_slli_epi16(h, kShift), m10);
  return _mm512_and_si512(_mm512_srli_epi16(h, -kShift), m10);
}

template <int c>
inline void FillQ5Pair(const quant::BlockQ5_K_R16& in, AmxBlock* out) {
  const __m512i lo = _mm512_set1_epi8(0x0F);
  for (int k = 0; k < 8; ++k) {
    const __m512i q = _mm512_loadu_si512(in.q[8 * c + k]);
    const __m512i h = _mm512_loadu_si512(in.qh[k]);
    // (q & 0x0F) | bit: truth table (A & C) | B = 0xEC.
    _mm512_store_si512(out->b[2 * c][k],
                       _mm512_ternarylogic_epi32(q, Bit4<4 - 2 * c>(h), lo, 0xEC));
    _mm512_store_si512(
        out->b[2 * c + 1][k],
        _mm512_ternarylogic_epi32(_mm512_srli_epi16(q, 4), Bit4<3 - 2 * c>(h), lo, 0xEC));
  }
}

template <typename Block>
void FillAmxBlock(const Block& in, AmxBlock* out) {
  if constexpr (std::is_same_v<Block, quant::BlockQ5_K_R16>) {
    FillQ5Pair<0>(in, out);
    FillQ5Pair<1>(in, out);
    FillQ5Pair<2>(in, out);
    FillQ5Pair<3>(in, out);
  } else {
    const __m512i lo = _mm512_set1_epi8(0x0F);
    for (int c = 0; c < 4; ++c) {
      for (int k = 0; k < 8; ++k) {
        const __m512i q = _mm512_loadu_si512(in.q[8 * c + k]);
        _mm512_store_si512(out->b[2 * c][k], _mm512_and_si512(q, lo));
        _mm512_store_si512(out->b[2 * c + 1][k], _mm512_and_si512(_mm512_srli_epi16(q, 4), lo));
      }
    }
  }
  const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in.d)));
  for (int j = 0; j < kSubBlocks; ++j) {
    const __m512i s =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in.sc[j])));
    _mm512_store_ps(out->sf[j], _mm512_mul_ps(_mm512_cvtepi32_ps(s), d));
  }
  for (int p = 0; p < 4; ++p) {
    _mm512_store_si512(
        out->mn[p],
        _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in.mn[p]))));
  }
  _mm512_store_ps(out->ndm, _mm512_sub_ps(_mm512_setzero_ps(),
                                          _mm512_cvtph_ps(_mm256_loadu_si256(
                                              reinterpret_cast<const __m256i*>(in.dmin)))));
}

// C_j .. C_j+3 (tiles 0-3) = A_j . B_j for four consecutive products j of kK bytes each: A_j
// at a + kK j (rows a_stride apart), B_j at b + j b_step (64-byte rows), stored to c[0 .. 3].
// kSignedB: TDPBSSD (Q6_K's values made signed) instead of TDPBSUD. Tiles 4-5 hold A, 6-7 B:
// the four products issue back to back and their stores follow.
template <int kK, bool kSignedB>
inline void AmxQuad(const uint8_t* a, long a_stride, const uint8_t* b, size_t b_step,
                    int32_t (*c)[kTile][kTile]) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, a, a_stride);
  _tile_loadd(6, b, 64);
  _tile_loadd(5, a + kK, a_stride);
  _tile_loadd(7, b + b_step, 64);
  // GCC's tile intrinsics paste their tile numbers into the instruction text, so they must be
  // literals (no template parameters, no helper function): a local macro picks the opcode.
#define MOESPLIT_AMX_DOT(dst, ta, tb) \
  do {                                \
    if constexpr (kSignedB) {         \
      _tile_dpbssd(dst, ta, tb);      \
    } else {                          \
      _tile_dpbsud(dst, ta, tb);      \
    }                                 \
  } while (0)
  MOESPLIT_AMX_DOT(0, 4, 6);
  MOESPLIT_AMX_DOT(1, 5, 7);
  _tile_loadd(4, a + 2 * kK, a_stride);
  _tile_loadd(6, b + 2 * b_step, 64);
  _tile_loadd(5, a + 3 * kK, a_stride);
  _tile_loadd(7, b + 3 * b_step, 64);
  MOESPLIT_AMX_DOT(2, 4, 6);
  MOESPLIT_AMX_DOT(3, 5, 7);
#undef MOESPLIT_AMX_DOT
  _tile_stored(0, c[0], kTile * 4);
  _tile_stored(1, c[1], kTile * 4);
  _tile_stored(2, c[2], kTile * 4);
  _tile_stored(3, c[3], kTile * 4);
}

// acc[t] (t < nt <= 16, lane r = row r) += the nt tokens at a (rows a_stride apart) . group
// block blk, whose Q8_K block index is b. The loaded tile configuration has nt token rows.
inline void AmxTokenTile(const AmxBlock& blk, const uint8_t* a, size_t a_stride, int64_t b,
                         int64_t nt, __m512* acc) {
  alignas(64) int32_t c[kSubBlocks][kTile][kTile];  // [j][token][row]
  const uint8_t* a_blk = a + b * sizeof(BlockQ8_K);
  const uint8_t* a_qs = a_blk + offsetof(BlockQ8_K, qs);
  // Halves 0 and 1 of the block: sub-blocks 0-3 and 4-7 (32 bytes of A, one 512-byte B each).
  const long stride = static_cast<long>(a_stride);
  const auto* b0 = &blk.b[0][0][0];
  AmxQuad<32, false>(a_qs, stride, b0, sizeof(blk.b[0]), c);
  AmxQuad<32, false>(a_qs + 4 * 32, stride, b0 + 4 * sizeof(blk.b[0]), sizeof(blk.b[0]), c + 4);
  const __m512 ndm = _mm512_load_ps(blk.ndm);
  for (int64_t t = 0; t < nt; ++t) {
    const auto& at = *reinterpret_cast<const BlockQ8_K*>(a_blk + t * a_stride);
    __m512 s = _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int j = 0; j < kSubBlocks; ++j) {
      s = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c[j][t])), _mm512_load_ps(blk.sf[j]),
                          s);
    }
    // sum_j m_j bsum32_j: the bsum pairs (bsum32_2p, bsum32_2p+1) as i16 against (m_2p, m_2p+1).
    const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at.bsums));
    const __m256i s32 = _mm256_madd_epi16(bs, _mm256_set1_epi16(1));  // [8] bsum32_j
    alignas(16) int32_t pairs[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(pairs), _mm256_cvtepi32_epi16(s32));
    __m512i mins = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      mins = _mm512_dpwssd_epi32(mins, _mm512_load_si512(blk.mn[p]), _mm512_set1_epi32(pairs[p]));
    }
    s = _mm512_fmadd_ps(_mm512_cvtepi32_ps(mins), ndm, s);
    acc[t] = _mm512_fmadd_ps(s, _mm512_set1_ps(at.d), acc[t]);
  }
}

// The token tiles of one chunk of a row group's blocks: for t0 = 0, 16, .. < n_tok,
// acc[0..nt) = y rows t0.. (zero when first), body(a + t0 * a_stride, nt, acc), y rows = acc.
// The n_tok % 16 rest runs under its own tile configuration (LDTILECFG per chunk: cheap next
// to a chunk), after which the 16-token one is restored.
template <typename Body>
void ForTokenTiles(const uint8_t* a, size_t a_stride, int64_t n_tok, bool first,
                   const TileConfig& full, const TileConfig& rest, float* y, int64_t ldy,
                   Body body) {
  const int64_t n_full = n_tok / kTile * kTile;
  for (int64_t t0 = 0; t0 < n_tok; t0 += kTile) {
    const int64_t nt = n_tok - t0 < kTile ? n_tok - t0 : kTile;
    if (t0 == n_full) _tile_loadconfig(&rest);
    __m512 acc[kTile];
    for (int64_t t = 0; t < nt; ++t) {
      acc[t] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(y + (t0 + t) * ldy);
    }
    body(a + t0 * a_stride, nt, acc);
    for (int64_t t = 0; t < nt; ++t) _mm512_storeu_ps(y + (t0 + t) * ldy, acc[t]);
  }
  if (n_full < n_tok) _tile_loadconfig(&full);
}

// y[t * ldy + r0 ..] for t < n_tok of one row group, kChunk blocks per scratch fill: each group
// block prepared once (FillAmxBlock into Prep), then every token tile (AmxTokenTile).
template <typename Block, typename Prep>
void AmxGroup(const Block* g, int64_t nb, const uint8_t* a, size_t a_stride, int64_t n_tok,
              const TileConfig& full, const TileConfig& rest, float* y, int64_t ldy) {
  Prep blocks[kChunk];
  for (int64_t b0 = 0; b0 < nb; b0 += kChunk) {
    const int64_t n_chunk = nb - b0 < kChunk ? nb - b0 : kChunk;
    for (int64_t i = 0; i < n_chunk; ++i) FillAmxBlock(g[b0 + i], &blocks[i]);
    ForTokenTiles(a, a_stride, n_tok, b0 == 0, full, rest, y, ldy,
                  [&](const uint8_t* at, int64_t nt, __m512* acc) {
                    for (int64_t i = 0; i < n_chunk; ++i) {
                      AmxTokenTile(blocks[i], at, a_stride, b0 + i, nt, acc);
                    }
                  });
  }
}

// The driver of every AMX gemm: fewer than 16 tokens run the VNNI tiles `vnni`; else the two
// tile configurations (16 tokens, and the n_tok % 16 rest) are set up around
// group(weights of rows r0.., full, rest, y + r0) for each 16-row group.
template <typename Group>
void AmxGemm(GemmFn vnni, const void* w_ptr, size_t w_stride, int64_t n_rows, const void* a_ptr,
             size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy, Group group,
             int a_colsb = 32) {
  if (n_tok < kTile) {  // decode and small batches
    vnni(w_ptr, w_stride, n_rows, a_ptr, a_stride, n_tok, n, y, ldy);
    return;
  }
  const auto* w = static_cast<const uint8_t*>(w_ptr);
  const TileConfig full = MakeConfig(kTile, a_colsb);
  const TileConfig rest =
      MakeConfig(n_tok % kTile == 0 ? kTile : static_cast<int>(n_tok % kTile), a_colsb);
  _tile_loadconfig(&full);
  for (int64_t r0 = 0; r0 < n_rows; r0 += kR16Rows) {
    group(w + static_cast<size_t>(r0) * w_stride, full, rest, y + r0);
  }
  _tile_release();
}

// q4_K_r16 / q5_K_r16 (Block) x Q8_K; fewer than 16 tokens on the VNNI tier's gemm kVnni.
template <typename Block, GemmFn kVnni>
void GemmKR16_Q8K_Amx(const void* w, size_t w_stride, int64_t n_rows, const void* a_ptr,
                      size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  const auto* a = static_cast<const uint8_t*>(a_ptr);
  AmxGemm(kVnni, w, w_stride, n_rows, a_ptr, a_stride, n_tok, n, y, ldy,
          [&](const uint8_t* g, const TileConfig& full, const TileConfig& rest, float* yg) {
            AmxGroup<Block, AmxBlock>(reinterpret_cast<const Block*>(g), n / quant::kQkK, a,
                                      a_stride, n_tok, full, rest, yg, ldy);
          });
}

// ---- Q6_K repacked in 16-row groups (q6_K_r16) x Q8_K ---------------------------------------
// Q6_K's scales are per 16-value sub-block, so one product is K = 16 (A: 16 tokens x 16 s8, B:
// 4 x 64): 16 TDPBSSD per group block, each 16 x 16 x 16. B holds the values made signed,
// q - 32 in [-32, 31], so no bsum correction is needed (TDPBSSD: s8 x s8), and
//   y[t][r] += d_a[t] * sum_s (d_r sc_rs) C_s[t][r],   |C_s| <= 16 * 32 * 127 (exact).
// The values are built once per group block as in the VNNI group kernel (Q6R16StepValues: step
// i < 16 gives sub-blocks 4 (i / 4) + c, c < 4, dword i % 4 of each; the fourth as 4x its
// levels, shifted back here).
// Per 16 x 16 x 256: 16 TDPBSSD + 16 tile stores and 16 (cvt + fma) + 1 fma per token row,
// against the VNNI group tile's 64 vpdpbusd + 16 (vpmulld + add) per token row.

struct alignas(64) AmxQ6Block {
  int8_t b[16][4][64];  // [sub-block s][k][row r x 4 bytes] values 16s + 4k .. +3 of row r, - 32
  float sf[16][16];     // [s][row] d_r sc_rs
};

void FillAmxBlock(const quant::BlockQ6_K_R16& in, AmxQ6Block* out) {
  const __m512i c32 = _mm512_set1_epi8(32);
  for (int i = 0; i < 16; ++i) {
    __m512i v[4];
    Q6R16StepValues(in, i, v);
    v[3] = _mm512_srli_epi16(v[3], 2);  // bits 0-1 are 0: nothing crosses bytes
    for (int c = 0; c < 4; ++c) {
      _mm512_store_si512(out->b[4 * (i / 4) + c][i % 4], _mm512_sub_epi8(v[c], c32));
    }
  }
  const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in.d)));
  for (int s = 0; s < 16; ++s) {
    const __m512i sc =
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in.sc[s])));
    _mm512_store_ps(out->sf[s], _mm512_mul_ps(_mm512_cvtepi32_ps(sc), d));
  }
}

// acc[t] (t < nt) += the nt tokens at a (rows a_stride apart) . group block blk (Q8_K block b).
inline void AmxTokenTile(const AmxQ6Block& blk, const uint8_t* a, size_t a_stride, int64_t b,
                         int64_t nt, __m512* acc) {
  alignas(64) int32_t c[16][kTile][kTile];  // [s][token][row]
  const uint8_t* a_blk = a + b * sizeof(BlockQ8_K);
  const uint8_t* a_qs = a_blk + offsetof(BlockQ8_K, qs);
  const long stride = static_cast<long>(a_stride);
  for (int s = 0; s < 16; s += 4) {  // K = 16 bytes of A and one 256-byte B per sub-block
    AmxQuad<16, true>(a_qs + 16 * s, stride, reinterpret_cast<const uint8_t*>(blk.b[s]),
                      sizeof(blk.b[0]), c + s);
  }
  for (int64_t t = 0; t < nt; ++t) {
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();  // two chains of 8 fma
#pragma GCC unroll 8
    for (int s = 0; s < 16; s += 2) {
      s0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c[s][t])),
                           _mm512_load_ps(blk.sf[s]), s0);
      s1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c[s + 1][t])),
                           _mm512_load_ps(blk.sf[s + 1]), s1);
    }
    const float d_a = reinterpret_cast<const BlockQ8_K*>(a_blk + t * a_stride)->d;
    acc[t] = _mm512_fmadd_ps(_mm512_add_ps(s0, s1), _mm512_set1_ps(d_a), acc[t]);
  }
}

void GemmQ6KR16_Q8K_Amx(const void* w, size_t w_stride, int64_t n_rows, const void* a_ptr,
                        size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  const auto* a = static_cast<const uint8_t*>(a_ptr);
  AmxGemm(
      GemmQ6KR16_Q8K_Avx512Vnni, w, w_stride, n_rows, a_ptr, a_stride, n_tok, n, y, ldy,
      [&](const uint8_t* g, const TileConfig& full, const TileConfig& rest, float* yg) {
        AmxGroup<quant::BlockQ6_K_R16, AmxQ6Block>(reinterpret_cast<const quant::BlockQ6_K_R16*>(g),
                                                   n / quant::kQkK, a, a_stride, n_tok, full, rest,
                                                   yg, ldy);
      },
      /*a_colsb=*/16);
}

// ---- legacy blocks repacked in 16-row groups (q8_0_r16 / q5_0_r16 / q4_0_r16) x Q8_0 ----------
// A group is [nb][16] f16 d's, then nb payloads (quant::LegacyR16Payload bytes); per block
// the 8 dwords k of the 16 rows hold values 4k .. 4k+3 (Q8_0: stored q + 128; Q4_0 / Q5_0:
// dword j's low nibbles are values 4j .., its high nibbles values 16 + 4j .., Q5_0's 5th bits
// in eight 64-bit byte masks after the nibbles). One block is one K = 32 step: B = the 8
// value vectors made signed (q, in [-16, 15] / [-8, 7] / [-127, 127]), A = the 16 tokens'
// Q8_0 quants of the block, TDPBSSD, then per token acc += cvt(C_b[t]) * d_w * d_a[t, b].
// Per 16 x 16 x 32: 1 TDPBSSD and ~5 vector ops per token row, against 8 vpdpbusd + ~3 in the
// VNNI row-lane tile.

constexpr int64_t kQ8_0Bytes = 34;  // Q8_0 activation block: f16 d + 32 quants

struct alignas(64) AmxLegacyBlock {
  int8_t b[8][64];  // [k][row r x 4 bytes] signed values 4k .. 4k+3 of row r
  float d[16];      // d_w of the 16 rows
};

template <GgmlType kT>
void FillAmxLegacy(const uint16_t* dw, const uint8_t* p, AmxLegacyBlock* out) {
  if constexpr (kT == GgmlType::kQ8_0_R16) {
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    for (int k = 0; k < 8; ++k) {
      _mm512_store_si512(out->b[k], _mm512_xor_si512(_mm512_loadu_si512(p + 64 * k), flip));
    }
  } else {
    const __m512i nib = _mm512_set1_epi8(0x0F);
    const __m512i off = _mm512_set1_epi8(kT == GgmlType::kQ5_0_R16 ? 16 : 8);
    for (int j = 0; j < 4; ++j) {
      const __m512i q = _mm512_loadu_si512(p + 64 * j);
      __m512i lo = _mm512_and_si512(q, nib);
      __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), nib);
      if constexpr (kT == GgmlType::kQ5_0_R16) {
        uint64_t h_lo, h_hi;
        std::memcpy(&h_lo, p + 256 + 8 * j, 8);
        std::memcpy(&h_hi, p + 256 + 8 * (j + 4), 8);
        const __m512i c16 = _mm512_set1_epi8(16);
        lo = _mm512_mask_add_epi8(lo, _cvtu64_mask64(h_lo), lo, c16);
        hi = _mm512_mask_add_epi8(hi, _cvtu64_mask64(h_hi), hi, c16);
      }
      _mm512_store_si512(out->b[j], _mm512_sub_epi8(lo, off));
      _mm512_store_si512(out->b[j + 4], _mm512_sub_epi8(hi, off));
    }
  }
  _mm512_store_ps(out->d,
                  _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(dw))));
}

// C (tiles 0-3) of n <= 4 consecutive blocks blk[0..n) (Q8_0 block indices b ..) for the
// tokens at a, stored to c; tiles 4-5 hold A, 6-7 B. Blocks past n are not touched (their
// activation bytes may lie past the end of the rows).
inline void AmxLegacyQuad(const AmxLegacyBlock* blk, int64_t n, const uint8_t* a, long a_stride,
                          int64_t b, int32_t (*c)[kTile][kTile]) {
  const uint8_t* q = a + b * kQ8_0Bytes + 2;
  _tile_zero(0);
  _tile_loadd(4, q, a_stride);
  _tile_loadd(6, blk[0].b, 64);
  _tile_dpbssd(0, 4, 6);
  if (n > 1) {
    _tile_zero(1);
    _tile_loadd(5, q + kQ8_0Bytes, a_stride);
    _tile_loadd(7, blk[1].b, 64);
    _tile_dpbssd(1, 5, 7);
  }
  if (n > 2) {
    _tile_zero(2);
    _tile_loadd(4, q + 2 * kQ8_0Bytes, a_stride);
    _tile_loadd(6, blk[2].b, 64);
    _tile_dpbssd(2, 4, 6);
  }
  if (n > 3) {
    _tile_zero(3);
    _tile_loadd(5, q + 3 * kQ8_0Bytes, a_stride);
    _tile_loadd(7, blk[3].b, 64);
    _tile_dpbssd(3, 5, 7);
  }
  _tile_stored(0, c[0], kTile * 4);
  if (n > 1) _tile_stored(1, c[1], kTile * 4);
  if (n > 2) _tile_stored(2, c[2], kTile * 4);
  if (n > 3) _tile_stored(3, c[3], kTile * 4);
}

// acc[t] (t < nt) += the nt tokens at a . blocks blk[0..n) (block indices b ..), n <= 4.
inline void AmxLegacyTile(const AmxLegacyBlock* blk, int64_t n, const uint8_t* a, size_t a_stride,
                          int64_t b, int64_t nt, __m512* acc) {
  alignas(64) int32_t c[4][kTile][kTile];  // [block][token][row]
  AmxLegacyQuad(blk, n, a, static_cast<long>(a_stride), b, c);
  for (int64_t t = 0; t < nt; ++t) {
    const uint8_t* at = a + t * a_stride + b * kQ8_0Bytes;
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, at + i * kQ8_0Bytes, 2);
      const __m512 d = _mm512_mul_ps(_mm512_load_ps(blk[i].d), _mm512_set1_ps(_cvtsh_ss(h)));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c[i][t])), d, acc[t]);
    }
  }
}

constexpr int64_t kLegacyChunk = 16;  // blocks per scratch fill: 16 x 576 B = 9 KiB

template <GgmlType kT>
void AmxLegacyGroup(const uint8_t* g, int64_t nb, const uint8_t* a, size_t a_stride, int64_t n_tok,
                    const TileConfig& full, const TileConfig& rest, float* y, int64_t ldy) {
  constexpr int64_t kP = quant::LegacyR16Payload(kT);
  const auto* dw = reinterpret_cast<const uint16_t*>(g);  // [nb][16] f16
  const uint8_t* payload = g + nb * kR16Rows * 2;
  AmxLegacyBlock blocks[kLegacyChunk];
  for (int64_t b0 = 0; b0 < nb; b0 += kLegacyChunk) {
    const int64_t n_chunk = nb - b0 < kLegacyChunk ? nb - b0 : kLegacyChunk;
    for (int64_t i = 0; i < n_chunk; ++i) {
      FillAmxLegacy<kT>(dw + (b0 + i) * kR16Rows, payload + (b0 + i) * kP, &blocks[i]);
    }
    ForTokenTiles(a, a_stride, n_tok, b0 == 0, full, rest, y, ldy,
                  [&](const uint8_t* at, int64_t nt, __m512* acc) {
                    for (int64_t i = 0; i < n_chunk; i += 4) {
                      AmxLegacyTile(blocks + i, n_chunk - i < 4 ? n_chunk - i : 4, at, a_stride,
                                    b0 + i, nt, acc);
                    }
                  });
  }
}

template <GgmlType kT, GemmFn kVnni>
void GemmLegacyR16_Q8_0_Amx(const void* w, size_t w_stride, int64_t n_rows, const void* a_ptr,
                            size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  const auto* a = static_cast<const uint8_t*>(a_ptr);
  AmxGemm(kVnni, w, w_stride, n_rows, a_ptr, a_stride, n_tok, n, y, ldy,
          [&](const uint8_t* g, const TileConfig& full, const TileConfig& rest, float* yg) {
            AmxLegacyGroup<kT>(g, n / 32, a, a_stride, n_tok, full, rest, yg, ldy);
          });
}

}  // namespace

void AddAmxKernels(GemvKernels* k) {
  k->by_type[static_cast<size_t>(GgmlType::kQ4_K_R16)].gemm =
      GemmKR16_Q8K_Amx<BlockQ4_K_R16, GemmQ4KR16_Q8K_Avx512Vnni>;
  k->by_type[static_cast<size_t>(GgmlType::kQ5_K_R16)].gemm =
      GemmKR16_Q8K_Amx<quant::BlockQ5_K_R16, GemmQ5KR16_Q8K_Avx512Vnni>;
  k->by_type[static_cast<size_t>(GgmlType::kQ6_K_R16)].gemm = GemmQ6KR16_Q8K_Amx;
  k->by_type[static_cast<size_t>(GgmlType::kQ8_0_R16)].gemm =
      GemmLegacyR16_Q8_0_Amx<GgmlType::kQ8_0_R16, GemmQ8_0R16_Q8_0_Avx512Vnni>;
  k->by_type[static_cast<size_t>(GgmlType::kQ5_0_R16)].gemm =
      GemmLegacyR16_Q8_0_Amx<GgmlType::kQ5_0_R16, GemmQ5_0R16_Q8_0_Avx512Vnni>;
  k->by_type[static_cast<size_t>(GgmlType::kQ4_0_R16)].gemm =
      GemmLegacyR16_Q8_0_Amx<GgmlType::kQ4_0_R16, GemmQ4_0R16_Q8_0_Avx512Vnni>;
}

}  // namespace moesplit::gemv::internal
