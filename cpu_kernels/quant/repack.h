// Lossless load-time repacking of weight rows into SIMD-friendly layouts (moesplit's own types,
// never stored in a file). The GGUF stays untouched; the repacked copy replaces the mapped
// pages of the tensor it came from (moe/expert_store.cc releases them).
//
// kQ4_K_R16: Q4_K with 16 rows interleaved, one BlockQ4_K_R16 per (16-row group, 256 columns).
// Lane r of every 64-byte vector is row r, so one load feeds 16 rows' accumulators and the
// token's 4 matching activations are a broadcast dword (vpdpbusd m32bcst): no per-row
// horizontal sums and no scale shuffles in the kernels (gemv_kquants_r16_avx512vnni.inc).
// The 6-bit scales are stored unpacked (bytes), +4 B per row and block over Q4_K's 144
// (+2.8%): unpacking 16 rows' packed scales costs ~60 vector ops per block, a third of a
// one-token block's work.
//
// A matrix of R rows (R a multiple of 16) and n columns is R / 16 groups back to back, each
// n / 256 blocks: rows [16 g, 16 g + 16) start at byte g * 16 * RowBytes(kQ4_K_R16, n), i.e.
// the usual row * row_bytes addressing holds at multiples of 16 rows.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/base/dtype.h"
#include "cpu_kernels/quant/blocks.h"

namespace moesplit::quant {

inline constexpr int kR16Rows = 16;  // rows per kQ4_K_R16 group

struct BlockQ4_K_R16 {
  uint32_t q[32][kR16Rows];    // [dword i][row r] row r's qs bytes 4i .. 4i+3, as stored in Q4_K
  uint8_t sc[8][kR16Rows];     // [sub-block j][row] 6-bit scale s_j
  uint8_t mn[4][kR16Rows][2];  // [pair p][row][k] 6-bit min m_{2p+k}
  uint16_t d[kR16Rows];        // [row] f16 super-scale of the scales
  uint16_t dmin[kR16Rows];     // [row] f16 super-scale of the mins
};
static_assert(sizeof(BlockQ4_K_R16) == kR16Rows * 148, "16 rows x 148 bytes");

// The repacked type of `t` for a matrix of `rows` rows, or `t` itself when it has none (only
// Q4_K with rows a multiple of 16 repacks).
GgmlType RepackedType(GgmlType t, int64_t rows);

// 16 rows of n values (n a multiple of 256) of Q4_K at src (rows src_stride bytes apart) ->
// n / 256 BlockQ4_K_R16 at dst. Lossless: UnpackQ4KRows16 gives the same bytes back.
void RepackQ4KRows16(const void* src, size_t src_stride, int64_t n, void* dst);
// The inverse: n / 256 BlockQ4_K_R16 at src -> 16 Q4_K rows at dst, dst_stride bytes apart.
void UnpackQ4KRows16(const void* src, int64_t n, void* dst, size_t dst_stride);

// rows x n values of `from` (rows src_stride bytes apart) -> RepackedType(from, rows) at dst
// (rows * RowBytes(to, n) bytes). from must repack (CHECKed).
void RepackRows(GgmlType from, const void* src, size_t src_stride, int64_t rows, int64_t n,
                void* dst);

}  // namespace moesplit::quant
