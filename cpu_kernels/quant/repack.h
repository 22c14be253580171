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
// kQ8_0_R16 / kQ5_0_R16 / kQ4_0_R16: the 32-value legacy blocks, 16 rows interleaved the same
// way, at exactly the file type's bytes per row (the f16 d's move, nothing is added). A group of
// nb = n / 32 blocks is the group's [nb][16] f16 d's, then nb payloads of LegacyR16Payload(t)
// bytes (64-byte multiples: whole cache lines; 64-byte aligned when nb is even). The d's lead:
// a decode kernel prefetching its one stream ahead then reaches the next group's d's before that
// group starts (behind the payloads, the first d line of every group missed: -20% cold).
//   Q8_0: u32 q[8][16]  lane r of dword k = row r's quants 4k .. 4k+3 as u8 (q + 128 = q ^ 0x80:
//         vpdpbusd takes unsigned weights; the kernels subtract 128 x the activation block sum)
//   Q4_0: u32 q[4][16]  lane r of dword k = row r's qs bytes 4k .. 4k+3 as stored (low nibbles:
//         values 4k .. 4k+3, high nibbles: values 16 + 4k .. 16 + 4k+3)
//   Q5_0: Q4_0's q, then u64 h[8]: bit 4r + b of h[g] = the 5th bit of row r's value 4g + b, so
//         h[g] is the AVX-512 byte mask (vpaddb {k}) that adds 16 to dword g's values
//         (g < 4: the low nibbles of q[g], g >= 4: the high nibbles of q[g - 4]).
//   Q5_1: Q5_0's payload (q, then h); its head holds per block the 16 f16 d's, then the 16 f16
//         m's ([nb][2][16]: one 64-byte line per block), so one vcvtph2ps loads each.
//   Q4_1: Q4_0's payload (q) with Q5_1's head (kQ4_1_R16).
// Bytes per 16 x 32 values: Q8_0 512 + 32 = 16 x 34, Q5_0 320 + 32 = 16 x 22, Q4_0 256 + 32 =
// 16 x 18, Q5_1 320 + 64 = 16 x 24, Q4_1 256 + 64 = 16 x 20.
//
// kQ6_K_R16: Q6_K with 16 rows interleaved, one BlockQ6_K_R16 per (16-row group, 256 columns),
// at exactly Q6_K's 210 bytes per row and block (16 x 210 = 3360). The 6-bit levels L (0..63)
// are regrouped so that a kernel builds them with ~8 vector ops per 256 (the file's nibble /
// bit-pair split costs 13, gemv_kquants_q6k_r16_avx512vnni.inc). Step i < 16 (quad Q = i / 4,
// t = i % 4) is three 64-byte vectors q[3i + c], c < 3; byte j < 4 of lane (row) r holds
//   bits 0-5: L of value 16 (4Q + c) + 4t + j            (sub-block 4Q + c)
//   bits 6-7: bits 4 - 2c, 5 - 2c of L of value 16 (4Q + 3) + 4t + j   (sub-block 4Q + 3)
// so c < 3 is one AND (& 0x3F), and sub-block 4Q + 3 is the three top bit pairs put side by side
// (two 16-bit shifts, two bit selects, one AND: 4 L in bits 2-7).
//
// kQ5_K_R16: Q5_K with 16 rows interleaved, one BlockQ5_K_R16 per (16-row group, 256 columns):
// kQ4_K_R16's fields for the low 4 bits, the scales and the mins (q dword i = row r's qs bytes
// 4i .. 4i+3), and qh dword m (m < 8) = row r's qh bytes 4m .. 4m+3 as stored (in Q5_K, qs byte
// l of 64-value chunk c = l / 32 holds values 64c + l % 32 (low nibble) and 64c + 32 + l % 32
// (high); their 5th bits are bits 2c and 2c + 1 of qh[l % 32], so q dword i = 8c + m takes its
// 5th bits from qh dword m, bits 2c / 2c + 1 of each byte). The kernels move those bits to bit 4
// with a shift and an and; unpacking is a copy. 16 x 180 bytes per block (Q5_K: 176).
//
// kIQ4_NL_R16: IQ4_NL's blocks in kQ4_0_R16's layout exactly (f16 d's first, then u32 q[4][16]
// of the stored index bytes): the nibbles are indices into kIq4Values instead of q + 8, so the
// kernels look them up (vpshufb) where Q4_0's use them as they are. 16 x 18 bytes per 32 values.
//
// kMXFP4_R16: MXFP4's blocks in kIQ4_NL_R16's layout with the [nb][16] E8M0 exponent bytes
// (one per row and block) first instead of the f16 d's: 16 x 17 bytes per 32 values, as the
// file. The kernels look the nibbles up in kMxfp4Values and turn the 16 exponents of a block
// into f32 scales (vpmovzxbd, shift, one blend for the two subnormal exponents).
//
// kIQ4_XS_R16: IQ4_XS with 16 rows interleaved. A group of nb = n / 256 blocks is, as the
// legacy R16 layouts, the group's [nb][16] f16 d's, then nb BlockIQ4_XS_R16 payloads: dword
// Q(i) = row r's qs bytes 4i .. 4i+3 as stored (sub-block i / 4: low nibbles values
// 32 (i / 4) + 4 (i % 4) + 0..3, high nibbles the same + 16), and the 6-bit scales unpacked to
// signed bytes s_j - 32 (both nibbles of a dword share one sub-block, so one vpmulld per
// sub-block applies it). A payload is 2176 bytes = 34 cache lines (64-byte aligned when nb is
// even, as 7168 / 256 and 2048 / 256 are: with the d's inside, 2208-byte blocks straddled lines
// every other block and read ~20% slower cold). 16 x 138 bytes per 256 values (IQ4_XS: 136).
// Lines in read order: per half (sub-blocks 4k .. 4k + 3) its scale line, then its 16 dwords.
//
// kQ2_K_R16: Q2_K with 16 rows interleaved, one BlockQ2_K_R16 per (16-row group, 256 columns),
// at exactly Q2_K's 84 bytes per row and block (16 x 84 = 1344 = 21 cache lines). Vectors
// 2P and 2P + 1 (64 bytes each, lane r = row r) hold the sub-block pair (2P, 2P + 1): vector
// 2P + h has the 2-bit level of value 32P + 16s + 8h + 4t + b (s, t < 2, b < 4) at bits
// 8b + 2(2t + s) of the lane's dword. So with y = q >> 4, the four ANDs q & 3, q & 12, y & 3,
// y & 12 are the u8 dwords of values 8h + 4t + 0..3 of sub-block 2P (as is) and 2P + 1 (times
// 4) for four vpdpbusd: one shift and four ANDs per vector, where levels in order (value
// 16j + 4t + b at bits 8b + 2t) needed three shifts and four ANDs; the times-4 sums fit i16
// and shift into place for free (gemv_q23k_avx512.inc). The file's scale bytes
// (s_j | m_j << 4) stay bytes, dword p of row r in the order 4p, 4p+2, 4p+1, 4p+3, so that one
// AND (& 0x000F000F) gives the i16 pair (s_4p, s_4p+1) and a shift more (s_4p+2, s_4p+3), and
// the mins pair the same way with the Q8_K block sums as stored (dword i = bsum_2i, bsum_2i+1):
// vpdpwssd applies both without unpacking. Lines in read order: quarter p = the scale line of
// sub-blocks 4p .. 4p + 3 then vectors 4p .. 4p + 3, the d / dmin line last (a decode that read
// the four scale lines first and the vectors after streamed a Zen 4 core's memory ~13-17%
// slower: the hardware prefetch follows ascending lines).
//
// kQ3_K_R16: Q3_K with 16 rows interleaved. A group of nb = n / 256 blocks is the group's
// [nb][16] f16 d's, then nb BlockQ3_K_R16 payloads of 1792 bytes (28 cache lines). The 3-bit
// level q3 = low + 4 h in [0, 7] of every value (value q3 - 4; the kernels take the 4 off with
// the block sums) is stored whole, so that no kernel merges the file's two bit planes: per
// sub-block pair P, three planes X, Y, Z of 64 bytes (lane r = row r, byte b of the lane's
// dword = values 16 j + 4 t + b of the pair's 8 extractions e = 4 (j - 2P) + t) hold
//   e = 0, 1: X bits 0-2, 3-5    e = 2, 3: Y bits 0-2, 3-5    e = 4, 5: Z bits 0-2, 3-5
//   e = 6: X bits 6-7, Y bit 6   e = 7: Y bit 7, Z bits 6-7   (kQ3R16Bits, low bit first)
// so each extraction is one AND or one vgf2p8affineqb bit pick (e = 6, 7: two and an OR) into
// the u8 dword of one vpdpbusd. (Until 2026-11-29 the high bits were 64 byte masks for masked
// vpaddb: 64 mask loads per block doubled the in-cache decode time of the low bits alone.)
// The 6-bit scales as signed bytes s_j - 32 in (2P, 2P + 1) pairs per row, so one vpmovsxbw
// gives vpdpwssd's (s_2P, s_2P+1) i16 pairs. 16 x 114 bytes per 256 values (Q3_K: 110). Lines
// in read order: per two pairs, their scale line, then each pair's three planes (as Q2_K's).
//
// kIQ2_XXS_R16: IQ2_XXS with 16 rows interleaved, so that a kernel looks up 64 grid indices
// (16 rows x 4 groups) per vector and takes each of a group's 8 values from them with one op.
// A group of nb = n / 256 blocks is the group's [nb][16] f16 d's, then nb BlockIQ2_XXS_R16
// payloads of 1088 bytes (17 cache lines). Per sub-block j (values 32 j .. 32 j + 31 of a row):
//   Q(j)      byte 4 r + g = row r's grid index of group g (values 32 j + 8 g .. + 7)
//   Sgn(j)    byte 4 r + g = the signs of that group's 8 values: value k negative at bit
//             kIq2R16SignBit[k] (4 5 0 1 6 7 2 3, so that one select puts two values' signs
//             beside their level codes, below)
//   sc[p]     byte r = s_2p | s_2p+1 << 4 (row r's 4-bit scales of sub-blocks 2p, 2p + 1)
// in read order: the scale line, then Q(j), Sgn(j) per sub-block (until 2026-12-01 all codes,
// then all signs, then the scales: the V3 layer's decode read 0.78-0.80x as fast at 2 threads
// on the Zen 4 VM).
// The file's 7-bit sign index of a group is its sign byte's values 0-6 (value 7's bit is their
// parity, Iq2SignByte), so the unpack recovers it. Why this shape: the kernel turns the 64
// indices into 2-bit level codes with four vpermi2b (C_lo: values 0-3, C_hi: 4-7, 2 bits each
// in value order), then merges codes and signs with one bit select per two values:
// V0 = C_lo bits 0-3 | sgn bits 4-5 (values 0, 1), V1 = sgn bits 0-1 | (C_lo >> 2) bits 2-5
// (values 2, 3), and V2 / V3 the same from C_hi and sgn >> 2 (values 4-7); each value's 6-bit
// field is then one vpermb to 43 + its signed level (0 .. 86, unsigned for vpdpbusd), whose
// extra 43 x the sub-block's activation sum starts the accumulator negated. Per 512 weights
// ~28 vector ops and no mask loads, where a masked negate of the activations per value (the
// layout before: 64-bit sign masks, one mask load and one blend per value) took ~39 and the
// file layout's block decode ~90. 16 x 70 bytes per 256 values (IQ2_XXS: 66; the sign bytes
// are 8 bits per group where the file stores 7).
//
// kIQ3_XXS_R16: IQ3_XXS the same way. Its grid entries are 4 values, so a sub-block's 8 indices
// per row fill two vectors: Q(j) + 64 h byte 4 r + g = row r's index of values 32 j + 16 h + 4 g
// .. + 3, and Sgn(j) byte 4 r + g holds the signs of both halves' groups g: value 32 j + 16 h + 4 g
// + k negative at bit kIq3R16SignBit[4 h + k] (the activations are permuted per 16: out[16 i +
// 4 k + g] = in[16 i + 4 g + k]). The kernel looks each vector up into two 6-bit code bytes
// (3-bit levels of values 0-1 and 2-3 of each group: A, B), then per value m = 4 h + k one bit
// select puts the code beside its sign, V = (A or B) under the mask 0x07 (k even: code bits
// 0-2) or 0x38 (k odd: bits 3-5), the rest from sgn >> kIq3R16SignShift[m]; the sign lands at
// index bit 3-5 (k even) or 0-2 (k odd), {3, 0, 3, 0, 5, 1, 4, 0}, and one vpermb takes the
// value to its offset signed level (IQ3_XXS's levels 4, 12, .., 52, 62 are no affine map of the
// code: 62, not 60). The bit order below is one that gives every value such a place with
// three shifts of the byte (0, 4, 2). Where the layout before kept 64-bit masks, one mask load
// and one masked negate of the activations per value and token, this takes one select per value
// (and none per token). 16 x 102 bytes per 256 values (IQ3_XXS: 98).
//
// kIQ3_S_R16: IQ3_S in kIQ3_XXS_R16's shape, the file's bytes rearranged (110 per 256 values
// and row, as the file). IQ3_S's grid has 512 entries of 4 values (levels 1, 3, .., 15), its
// signs are one bit per value and its 4-bit scales are per 32 values, so per sub-block j:
//   q[j][h]   byte 4 r + g = the low 8 bits of row r's index of values 32 j + 16 h + 4 g .. + 3
//   qh[j][h]  bit 4 r + g = that index's 9th bit (a mask a kernel loads as it is)
//   sgn[j][m] bit 4 r + g = value 32 j + 16 h + 4 g + k negative (m = 4 h + k), a 64-bit mask
//             per value of the groups, copied from the file's sign bits
//   sc[p]     byte r = s_2p | s_2p+1 << 4
// Why: the kernel looks up 64 indices per vector as IQ3_XXS's does, with two more masked
// vpermi2b per table for the upper 256 entries (the 9th bit a mask, no blend); the signs go to
// the activations, a masked negate per value and token under sgn[j][m]. (IQ3_XXS's sign bytes
// measured 0-5% slower here in decode, the eight signed-level tables spilling beside IQ3_S's
// 16 code tables; and two 4-bit grid values per code byte taken by an AND instead of a vpermb
// measured no faster.)
//
// kIQ2_XS_R16: IQ2_XS in kIQ2_XXS_R16's shape. IQ2_XS's grid has 512 entries (levels 8, 25,
// 43 as IQ2_XXS's) and a 4-bit scale per 16 values, so per sub-block j:
//   q[j]      byte 4 r + g = the low 8 bits of row r's grid index of group g
//   qh[j]     bit 4 r + g = that index's 9th bit
//   sgn[j]    as kIQ2_XXS_R16's (kIq2R16SignBit order)
//   sc[j]     byte r = the file's scale byte j of row r (s of groups 0-1 | s of groups 2-3 << 4)
// Why: the kernel is IQ2_XXS's with 512-entry lookups and, since a lane's 4 bytes (groups 0-3
// of a value) span two scales, vpmaddubsw (groups 0-1 and 2-3 as i16 pairs) and vpdpwssd with
// the scale pair in place of vpdpbusd. 16 x 78 bytes per 256 values (IQ2_XS: 74).
//
// kIQ2_S_R16: IQ2_S the same way, its 1024-entry grid's index bits 8-9 in two lane masks
// (qh[j][0] / [1] bit 4 r + g) and its explicit sign bytes reordered to kIq2R16SignBit: 82 bytes
// per row and 256 values, as the file.
//
// kIQ1_S_R16: IQ1_S with 16 rows interleaved and its grid entries as base-3 digits, so that no
// kernel looks up an 11-bit index (2048 entries: no register table holds them; the file
// layout's kernel spends ~40 cycles per block on its 32 lookups). Grid value t_k in {-1, 0, 1}
// is stored as the digit t_k + 1: a group's values 0-4 as the number A = sum_k<5 (t_k + 1) 3^k
// (< 243) in one byte, values 5-7 as F = sum_k<3 (t_{5+k} + 1) 3^k (< 27) in a 5-bit field,
// each scaled up to fill its bits (Iq1DigitByte / Iq1DigitField: the byte ceil(256 A / 243),
// the field ceil(32 F / 27)), so that the digits come out of it most significant first by
// multiplications by 3 (x <- 3 x mod 256, digit = the carry floor(3 x / 256); a field as the
// byte 8 q), with no table (the AVX2 kernel, gemv_iq1_r16_avx2.cc). A group of nb = n /
// 256 blocks is the group's [nb][16] f16 d's, then nb BlockIQ1_S_R16 payloads of 896 bytes (14
// cache lines). Per sub-block j (values 32 j .. 32 j + 31 of a row):
//   a[j]  byte 4 r + g = row r's group g (values 32 j + 8 g ..), values 0-4
//   f[j]  bytes 3 r .. 3 r + 2 = row r's 24-bit word: bits 5 g .. 5 g + 4 group g's values
//         5-7, bits 20-22 the scale s_j, bit 23 the sign of the delta (set: -1/8)
// in read order by halves: a[0..3], f[0..3], then a[4..7], f[4..7] (7 lines each; A(j), F(j)).
// Why this shape: a kernel turns the 64 bytes of a[j] into 2-bit digits with two 256-entry
// byte lookups (values 0-3 as four 2-bit fields, value 4 whole), spreads f[j]'s 16 words into
// the dword lanes with one vpermb and one vpmultishiftqb and looks the fields up with one
// vpermb (values 5-7); then value k of every group is one vgf2p8affineqb (field -> digit byte)
// and one vpdpbusd against the token's 4 activations (lane r's dword = values 32 j + 8 g + k,
// g < 4, as kIQ2_XXS_R16's permutation). 16 x 58 bytes per 256 values (IQ1_S: 50; 3^8 = 6561
// digit patterns need 13 bits where the grid's 2048 need 11): 1.16x the file for these
// tensors, which a file mixing them with wider down projections keeps under 1.1x overall
// (docs/PERFORMANCE.md). Lossless: the unpack finds each digit pattern's grid index.
//
// kIQ1_M_R16: IQ1_M the same way. IQ1_M has a 3-bit scale per 16 values and a delta sign per
// group, so the word of row r and sub-block j is 30 bits, one dword: bits 5 g .. 5 g + 4 group
// g's values 5-7, then per half h (groups 2 h, 2 h + 1) five bits at 20 + 5 h: the scale
// s_{2 j + h} (3 bits) and the two groups' delta signs (set: -1/8), so that one 32-entry vpermd
// table lookup of word >> (20 + 5 h) gives a half's factors. The f16 d (spread over IQ1_M's
// scale words) sits whole in the group head. 16 x 66 bytes per 256 values (IQ1_M: 56; 1.18x).
// Lines in read order: per sub-block its digit line a[j], then its word line w[j].
//
// A matrix of R rows (R a multiple of 16) and n columns is R / 16 groups back to back, each
// n / 256 (Q4_K) or n / 32 (legacy) blocks: rows [16 g, 16 g + 16) start at byte
// g * 16 * RowBytes(type, n), i.e. the usual row * row_bytes addressing holds at multiples of
// 16 rows.
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

struct BlockQ6_K_R16 {
  uint32_t q[48][kR16Rows];  // [3 step + c][row r] 4 levels + 4 bit pairs (layout above)
  int8_t sc[16][kR16Rows];   // [sub-block s][row] signed 8-bit scale of values 16s .. 16s+15
  uint16_t d[kR16Rows];      // [row] f16 super-scale
};
static_assert(sizeof(BlockQ6_K_R16) == kR16Rows * 210, "16 rows x 210 bytes");

struct BlockQ5_K_R16 {
  uint32_t q[32][kR16Rows];    // [dword i][row r] row r's qs bytes 4i .. 4i+3, as stored in Q5_K
  uint32_t qh[8][kR16Rows];    // [dword m][row r] row r's qh bytes 4m .. 4m+3, as stored
  uint8_t sc[8][kR16Rows];     // [sub-block j][row] 6-bit scale s_j
  uint8_t mn[4][kR16Rows][2];  // [pair p][row][k] 6-bit min m_{2p+k}
  uint16_t d[kR16Rows];        // [row] f16 super-scale of the scales
  uint16_t dmin[kR16Rows];     // [row] f16 super-scale of the mins
};
static_assert(sizeof(BlockQ5_K_R16) == kR16Rows * 180, "16 rows x 180 bytes");

struct BlockIQ4_XS_R16 {
  // Half k: sub-blocks 4k .. 4k + 3, their scale line first, in the order a decode reads them.
  struct Half {
    int8_t sc[4][kR16Rows];    // [sub-block j % 4][row] s_j - 32 in [-32, 31]
    uint32_t q[16][kR16Rows];  // [dword i % 16][row r] row r's qs bytes 4i .. 4i+3, as stored
  };
  Half half[2];

  const uint32_t* Q(int i) const { return half[i / 16].q[i % 16]; }  // dword i, [16] rows
  uint32_t* Q(int i) { return half[i / 16].q[i % 16]; }
  const int8_t* Sc(int j) const { return half[j / 4].sc[j % 4]; }  // sub-block j, [16] rows
  int8_t* Sc(int j) { return half[j / 4].sc[j % 4]; }
};
static_assert(sizeof(BlockIQ4_XS_R16) == 34 * 64, "34 cache lines");
// With its [16] f16 d's at the group head: 16 x 138 bytes per block.
static_assert(sizeof(BlockIQ4_XS_R16) + kR16Rows * 2 == kR16Rows * 138);

struct BlockQ2_K_R16 {
  // Quarter p: the 64-byte lines a decode reads for sub-blocks 4p .. 4p + 3, in the order it
  // reads them (the scale line first), so that a block streams through in address order.
  struct Quarter {
    uint32_t sm[kR16Rows];    // [row r] the file's scale bytes 4p, 4p+2, 4p+1, 4p+3 (s | m << 4)
    uint32_t q[4][kR16Rows];  // [k][row r] vector 4p + k (below)
  };
  Quarter quarter[4];
  uint16_t d[kR16Rows];     // [row] f16 super-scale of the scales
  uint16_t dmin[kR16Rows];  // [row] f16 super-scale of the mins

  // Vector w = 2P + h, [16] dwords (lane r = row r): the level of value 32P + 16s + 8h + 4t + b
  // at bits 8b + 2(2t + s) (s, t < 2).
  const uint32_t* Q(int w) const { return quarter[w / 4].q[w % 4]; }
  uint32_t* Q(int w) { return quarter[w / 4].q[w % 4]; }
  // Scale dwords of sub-blocks 4p .. 4p + 3, [16] (lane r = row r).
  const uint32_t* Sm(int p) const { return quarter[p].sm; }
  uint32_t* Sm(int p) { return quarter[p].sm; }
};
static_assert(sizeof(BlockQ2_K_R16) == kR16Rows * 84, "16 rows x 84 bytes, 21 cache lines");

struct BlockQ3_K_R16 {
  using Planes = uint32_t[3][kR16Rows];    // [plane X/Y/Z][row r] bits placed by kQ3R16Bits
  using PairScales = int8_t[kR16Rows][2];  // [row r][e] s_{2P+e} - 32 in [-32, 31]
  // Quarter k: pairs 2k and 2k + 1 in the order a decode reads them (their scale line, then
  // each pair's three planes), so that a block streams through in address order.
  struct Quarter {
    PairScales sc[2];  // [pair 2k + m]
    Planes v[2];       // [pair 2k + m]
  };
  Quarter quarter[4];

  const Planes& V(int pair) const { return quarter[pair / 2].v[pair % 2]; }
  Planes& V(int pair) { return quarter[pair / 2].v[pair % 2]; }
  const PairScales& Sc(int pair) const { return quarter[pair / 2].sc[pair % 2]; }
  PairScales& Sc(int pair) { return quarter[pair / 2].sc[pair % 2]; }
};
// kQ3R16Bits[e][i] = {plane, bit} of bit i of extraction e's level (see kQ3_K_R16 above).
inline constexpr int8_t kQ3R16Bits[8][3][2] = {
    {{0, 0}, {0, 1}, {0, 2}}, {{0, 3}, {0, 4}, {0, 5}}, {{1, 0}, {1, 1}, {1, 2}},
    {{1, 3}, {1, 4}, {1, 5}}, {{2, 0}, {2, 1}, {2, 2}}, {{2, 3}, {2, 4}, {2, 5}},
    {{0, 6}, {0, 7}, {1, 6}}, {{1, 7}, {2, 6}, {2, 7}}};
static_assert(sizeof(BlockQ3_K_R16) == 28 * 64, "28 cache lines");
// With its [16] f16 d's at the group head: 16 x 114 bytes per block.
static_assert(sizeof(BlockQ3_K_R16) + kR16Rows * 2 == kR16Rows * 114);

// Q(j) / Sgn(j): sub-block j's index bytes ([64]; IQ3: [2][64]) and sign bytes ([64]) in the
// lattice layouts whose sub[8] keeps them in read order (kIQ2_XXS_R16, kIQ2_XS_R16, kIQ2_S_R16,
// kIQ3_XXS_R16, kIQ3_S_R16). An empty base: the layouts keep their size and standard layout.
template <class Block>
struct SubBlockLines {
  const uint8_t* Q(int j) const { return reinterpret_cast<const uint8_t*>(self().sub[j].q); }
  uint8_t* Q(int j) { return reinterpret_cast<uint8_t*>(self().sub[j].q); }
  const uint8_t* Sgn(int j) const { return self().sub[j].sgn; }
  uint8_t* Sgn(int j) { return self().sub[j].sgn; }

 private:
  const Block& self() const { return static_cast<const Block&>(*this); }
  Block& self() { return static_cast<Block&>(*this); }
};

// kIQ2_XXS_R16 / kIQ2_XS_R16 / kIQ2_S_R16's sub-block: its index line, then its sign line.
struct Iq2R16SubBlock {
  uint8_t q[4 * kR16Rows];    // [4 r + g] grid index (bits 0-7) of row r's group g
  uint8_t sgn[4 * kR16Rows];  // [4 r + g] bit kIq2R16SignBit[k]: value k negative
};

struct BlockIQ2_XXS_R16 : SubBlockLines<BlockIQ2_XXS_R16> {
  // Lines in the order a decode reads them (the scales, then per sub-block its codes and signs),
  // so that a block streams through in address order (as kQ2_K_R16's).
  uint8_t sc[4][kR16Rows];  // [pair p][row r] s_2p | s_2p+1 << 4
  Iq2R16SubBlock sub[8];    // [sub-block j]
};
// Where value k of a group keeps its sign in a kIQ2_XXS_R16 sign byte.
inline constexpr int kIq2R16SignBit[8] = {4, 5, 0, 1, 6, 7, 2, 3};
static_assert(sizeof(BlockIQ2_XXS_R16) == 17 * 64, "17 cache lines");
// With its [16] f16 d's at the group head: 16 x 70 bytes per block.
static_assert(sizeof(BlockIQ2_XXS_R16) + kR16Rows * 2 == kR16Rows * 70);

// kIQ3_XXS_R16 / kIQ3_S_R16's sub-block: its two index lines, then its sign line.
struct Iq3R16SubBlock {
  uint8_t q[2][4 * kR16Rows];  // [half h][4 r + g] grid index (bits 0-7; 4 values)
  uint8_t sgn[4 * kR16Rows];   // [4 r + g] value k of half h's group g negative: bit
                               // kIq3R16SignBit[4 h + k] (IQ3_XXS) / kIq3SR16SignBit (IQ3_S)
};

struct BlockIQ3_XXS_R16 : SubBlockLines<BlockIQ3_XXS_R16> {
  // Lines in read order, as kIQ2_XXS_R16's: the scales, then per sub-block its two index lines
  // and its sign line.
  uint8_t sc[4][kR16Rows];  // [pair p][row r] s_2p | s_2p+1 << 4
  Iq3R16SubBlock sub[8];    // [sub-block j]
};
// Where value m = 4 h + k of a sub-block's groups g keeps its sign in a kIQ3_XXS_R16 sign byte, and
// the right shift that takes it to its place in the value's vpermb index: bits 3-5 for even k (code
// at bits 0-2), 0-2 for odd k (code at bits 3-5).
inline constexpr int kIq3R16SignBit[8] = {3, 0, 7, 4, 5, 1, 6, 2};
inline constexpr int kIq3R16SignShift[8] = {0, 0, 4, 4, 0, 0, 2, 2};
// Whether sign positions bit[8] take each bit of a byte once and, shifted right by shift[m], land
// where in_place(m, position) allows.
template <class InPlace>
constexpr bool SignLayoutFits(const int (&bit)[8], const int (&shift)[8], InPlace in_place) {
  int used = 0;
  for (int m = 0; m < 8; ++m) {
    if (!in_place(m, bit[m] - shift[m])) return false;
    used |= 1 << bit[m];
  }
  return used == 255;
}
static_assert(SignLayoutFits(kIq3R16SignBit, kIq3R16SignShift, [](int m, int at) {
  return m % 2 == 0 ? at >= 3 && at <= 5 : at >= 0 && at <= 2;
}));
static_assert(sizeof(BlockIQ3_XXS_R16) == 25 * 64, "25 cache lines");
static_assert(sizeof(BlockIQ3_XXS_R16) + kR16Rows * 2 == kR16Rows * 102);

struct BlockIQ3_S_R16 : SubBlockLines<BlockIQ3_S_R16> {
  // Lines in read order, as kIQ3_XXS_R16's: the index bits 8 and the scales, then per sub-block
  // its two index lines and its sign line.
  uint64_t qh[8][2];        // [sub-block j][h] bit 4 r + g: index bit 8
  uint8_t sc[4][kR16Rows];  // [pair p][row r] s_2p | s_2p+1 << 4
  Iq3R16SubBlock sub[8];    // [sub-block j]
};
// Where value m = 4 h + k of a sub-block's groups keeps its sign in a kIQ3_S_R16 sign byte, and
// the right shift that takes it to its place in the value's vpermb index: bit 3 for even k (the
// code at bits 0-2), bit 0 for odd k (the code at bits 3-5). One position per parity, so that
// two level tables serve all eight values (kIQ3_XXS_R16's signs sit where its kinds' shifts
// leave them, and it keeps eight tables); the price is five shifted copies of the sign bytes
// (0-4) in place of three.
inline constexpr int kIq3SR16SignBit[8] = {4, 0, 5, 1, 6, 2, 7, 3};
inline constexpr int kIq3SR16SignShift[8] = {1, 0, 2, 1, 3, 2, 4, 3};
static_assert(SignLayoutFits(kIq3SR16SignBit, kIq3SR16SignShift,
                             [](int m, int at) { return at == (m % 2 == 0 ? 3 : 0); }));
static_assert(sizeof(BlockIQ3_S_R16) == 27 * 64, "27 cache lines");
static_assert(sizeof(BlockIQ3_S_R16) + kR16Rows * 2 == kR16Rows * 110, "IQ3_S's bytes");

struct BlockIQ2_XS_R16 : SubBlockLines<BlockIQ2_XS_R16> {
  // Lines in read order, as kIQ2_XXS_R16's: the index bits 8 and the scales, then per sub-block
  // its index line and its sign line.
  uint64_t qh[8];           // [sub-block j] bit 4 r + g: grid index bit 8
  uint8_t sc[8][kR16Rows];  // [j][row r] s of values 0-15 | s of values 16-31 << 4
  Iq2R16SubBlock sub[8];    // [j]
};
static_assert(sizeof(BlockIQ2_XS_R16) == 19 * 64, "19 cache lines");
static_assert(sizeof(BlockIQ2_XS_R16) + kR16Rows * 2 == kR16Rows * 78, "IQ2_XS's 74 + 4");

struct BlockIQ2_S_R16 : SubBlockLines<BlockIQ2_S_R16> {
  // Lines in read order, as kIQ2_XS_R16's.
  uint64_t qh[8][2];        // [sub-block j][b] bit 4 r + g: grid index bit 8 + b
  uint8_t sc[8][kR16Rows];  // [j][row r] s of values 0-15 | s of values 16-31 << 4
  Iq2R16SubBlock sub[8];    // [j]
};
static_assert(sizeof(BlockIQ2_S_R16) == 20 * 64, "20 cache lines");
static_assert(sizeof(BlockIQ2_S_R16) + kR16Rows * 2 == kR16Rows * 82, "IQ2_S's bytes");

struct BlockIQ1_S_R16 {
  // Lines in read order by halves (sub-blocks 0-3, then 4-7), each its four digit lines, then
  // their words (3 lines): a sub-block's 112 bytes would leave every other digit line unaligned.
  // (Until 2026-12-02 all digit lines, then all words.)
  struct Half {
    uint8_t a[4][4 * kR16Rows];  // [j % 4][4 r + g] base-3 digits of values 0-4 of a group
    uint8_t f[4][3 * kR16Rows];  // [j % 4][3 r + i] byte i of row r's word (values 5-7, s_j, sign)
  };
  Half half[2];

  const uint8_t* A(int j) const { return half[j / 4].a[j % 4]; }  // sub-block j's digits, [64]
  uint8_t* A(int j) { return half[j / 4].a[j % 4]; }
  const uint8_t* F(int j) const { return half[j / 4].f[j % 4]; }  // its words, [48]
  uint8_t* F(int j) { return half[j / 4].f[j % 4]; }
};
static_assert(sizeof(BlockIQ1_S_R16) == 14 * 64, "14 cache lines");
static_assert(sizeof(BlockIQ1_S_R16) + kR16Rows * 2 == kR16Rows * 58);
// Bits of a kIQ1_S_R16 word: group g's field at 5 g, the scale at 20, the delta sign at 23.
inline constexpr int kIq1R16ScaleShift = 20;
inline constexpr int kIq1R16SignBit = 23;
// kIQ1_S_R16's / kIQ1_M_R16's stored forms of a group's digit numbers A (values 0-4, < 243)
// and F (values 5-7, < 27), and back: the byte ceil(256 A / 243), the 5-bit field
// ceil(32 F / 27) (the smallest codes whose multiplications by 3 carry out the digits; checked
// for every A and F in tests/cpu_kernels/gemv_iq_r16_test.cc); 243 q / 256 and 27 q / 32
// (floors) invert them.
constexpr int Iq1DigitByte(int a) { return (256 * a + 242) / 243; }
constexpr int Iq1DigitByteNumber(int q) { return 243 * q / 256; }
constexpr int Iq1DigitField(int f) { return (32 * f + 26) / 27; }
constexpr int Iq1DigitFieldNumber(int q) { return 27 * q / 32; }

struct BlockIQ1_M_R16 {
  // Lines in read order: per sub-block its digit line, then its word line. (Until 2026-12-02
  // all digit lines, then all words.)
  struct SubBlock {
    uint8_t a[4 * kR16Rows];  // [4 r + g] base-3 digits of values 0-4 of row r's group g
    uint32_t w[kR16Rows];     // [row r] values 5-7 of the 4 groups, the halves' scales, signs
  };
  SubBlock sub[8];  // [sub-block j]

  const uint8_t* A(int j) const { return sub[j].a; }
  uint8_t* A(int j) { return sub[j].a; }
  const uint32_t* W(int j) const { return sub[j].w; }
  uint32_t* W(int j) { return sub[j].w; }
};
static_assert(sizeof(BlockIQ1_M_R16) == 16 * 64, "16 cache lines");
static_assert(sizeof(BlockIQ1_M_R16) + kR16Rows * 2 == kR16Rows * 66);
// Half h's 5 bits (scale | sign of group 2 h << 3 | sign of group 2 h + 1 << 4) start here.
inline constexpr int kIq1mR16HalfShift[2] = {20, 25};

// The repacked type of `t` for a matrix of `rows` rows, or `t` itself when it has none (Q4_K,
// Q5_K, Q6_K, Q8_0, Q5_0, Q5_1, Q4_0, Q4_1, IQ4_NL, MXFP4, IQ4_XS, Q2_K, Q3_K, IQ2_XXS, IQ2_XS,
// IQ2_S, IQ3_XXS, IQ3_S, IQ1_S and IQ1_M with rows a multiple of 16 repack).
GgmlType RepackedType(GgmlType t, int64_t rows);
// The file type a repacked layout came from (kQ5_0_R16 -> kQ5_0); `t` itself for file types.
GgmlType UnpackedType(GgmlType t);
// Payload bytes per legacy R16 group block (without the d's): 512 / 320 / 256; 0 otherwise.
// constexpr: the AVX-512 VNNI kernels take it as a compile-time constant (never a call from
// their ISA-flagged file, see gemv_internal.h).
constexpr int64_t LegacyR16Payload(GgmlType t) {
  return t == GgmlType::kQ8_0_R16     ? 8 * 64
         : t == GgmlType::kQ5_0_R16   ? 4 * 64 + 64
         : t == GgmlType::kQ5_1_R16   ? 4 * 64 + 64
         : t == GgmlType::kQ4_0_R16   ? 4 * 64
         : t == GgmlType::kQ4_1_R16   ? 4 * 64
         : t == GgmlType::kIQ4_NL_R16 ? 4 * 64
         : t == GgmlType::kMXFP4_R16  ? 4 * 64
                                      : 0;
}
// Bytes of one row's scales in a legacy R16 group's head: 2 (f16 d), 1 for kMXFP4_R16 (E8M0),
// 4 for kQ5_1_R16 / kQ4_1_R16 (f16 d and m).
constexpr int64_t LegacyR16ScaleBytes(GgmlType t) {
  return t == GgmlType::kMXFP4_R16                              ? 1
         : t == GgmlType::kQ5_1_R16 || t == GgmlType::kQ4_1_R16 ? 4
                                                                : 2;
}

// 16 rows of n values (n a multiple of 256) of Q4_K at src (rows src_stride bytes apart) ->
// n / 256 BlockQ4_K_R16 at dst. Lossless: UnpackQ4KRows16 gives the same bytes back.
void RepackQ4KRows16(const void* src, size_t src_stride, int64_t n, void* dst);
// The inverse: n / 256 BlockQ4_K_R16 at src -> 16 Q4_K rows at dst, dst_stride bytes apart.
void UnpackQ4KRows16(const void* src, int64_t n, void* dst, size_t dst_stride);

// The same for Q6_K (kQ6_K_R16): n / 256 BlockQ6_K_R16 at dst, and the inverse.
void RepackQ6KRows16(const void* src, size_t src_stride, int64_t n, void* dst);
void UnpackQ6KRows16(const void* src, int64_t n, void* dst, size_t dst_stride);

// The same for Q5_K (kQ5_K_R16): n / 256 BlockQ5_K_R16 at dst, and the inverse.
void RepackQ5KRows16(const void* src, size_t src_stride, int64_t n, void* dst);
void UnpackQ5KRows16(const void* src, int64_t n, void* dst, size_t dst_stride);

// The same for IQ4_XS (kIQ4_XS_R16): one group (n / 256 d rows, then the payloads) at dst, and
// the inverse.
void RepackIQ4XSRows16(const void* src, size_t src_stride, int64_t n, void* dst);
void UnpackIQ4XSRows16(const void* src, int64_t n, void* dst, size_t dst_stride);

// The same for Q2_K (kQ2_K_R16: n / 256 BlockQ2_K_R16 at dst) and Q3_K (kQ3_K_R16: one group,
// n / 256 d rows, then the payloads), and the inverses (repack_q23k.cc).
void RepackQ2KRows16(const void* src, size_t src_stride, int64_t n, void* dst);
void UnpackQ2KRows16(const void* src, int64_t n, void* dst, size_t dst_stride);
void RepackQ3KRows16(const void* src, size_t src_stride, int64_t n, void* dst);
void UnpackQ3KRows16(const void* src, int64_t n, void* dst, size_t dst_stride);

// The same for IQ2_XXS (kIQ2_XXS_R16: one group, n / 256 d rows, then the payloads) and IQ3_XXS
// (kIQ3_XXS_R16, likewise), and the inverses (repack_iq_r16.cc).
void RepackIQ2XXSRows16(const void* src, size_t src_stride, int64_t n, void* dst);
void UnpackIQ2XXSRows16(const void* src, int64_t n, void* dst, size_t dst_stride);
void RepackIQ3XXSRows16(const void* src, size_t src_stride, int64_t n, void* dst);
void UnpackIQ3XXSRows16(const void* src, int64_t n, void* dst, size_t dst_stride);
// The same for IQ3_S (kIQ3_S_R16, likewise; repack_iq_r16.cc).
void RepackIQ3SRows16(const void* src, size_t src_stride, int64_t n, void* dst);
void UnpackIQ3SRows16(const void* src, int64_t n, void* dst, size_t dst_stride);
// The same for IQ2_XS (kIQ2_XS_R16; repack_iq_r16.cc).
void RepackIQ2XSRows16(const void* src, size_t src_stride, int64_t n, void* dst);
void UnpackIQ2XSRows16(const void* src, int64_t n, void* dst, size_t dst_stride);
// The same for IQ2_S (kIQ2_S_R16; repack_iq_r16.cc).
void RepackIQ2SRows16(const void* src, size_t src_stride, int64_t n, void* dst);
void UnpackIQ2SRows16(const void* src, int64_t n, void* dst, size_t dst_stride);
// The same for IQ1_S (kIQ1_S_R16) and IQ1_M (kIQ1_M_R16; repack_iq1_r16.cc).
void RepackIQ1SRows16(const void* src, size_t src_stride, int64_t n, void* dst);
void UnpackIQ1SRows16(const void* src, int64_t n, void* dst, size_t dst_stride);
void RepackIQ1MRows16(const void* src, size_t src_stride, int64_t n, void* dst);
void UnpackIQ1MRows16(const void* src, int64_t n, void* dst, size_t dst_stride);

// 16 rows of n values (n a multiple of 32) of a legacy type `from` (Q8_0 / Q5_0 / Q5_1 / Q4_0 /
// Q4_1 / IQ4_NL / MXFP4) at src -> one group of RepackedType(from, 16) at dst; and the inverse
// (`r16` the repacked type).
void RepackLegacyRows16(GgmlType from, const void* src, size_t src_stride, int64_t n, void* dst);
void UnpackLegacyRows16(GgmlType r16, const void* src, int64_t n, void* dst, size_t dst_stride);

// rows x n values of `from` (rows src_stride bytes apart) -> RepackedType(from, rows) at dst
// (rows * RowBytes(to, n) bytes). from must repack (CHECKed).
void RepackRows(GgmlType from, const void* src, size_t src_stride, int64_t rows, int64_t n,
                void* dst);
// One 16-row group of a repacked type back to its file type's rows (dst_stride bytes apart).
void UnpackRows16(GgmlType r16, const void* src, int64_t n, void* dst, size_t dst_stride);

}  // namespace moesplit::quant
