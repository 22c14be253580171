// ggml's block layouts of the lattice ("i-quant") families IQ2, IQ3, IQ1 and of MXFP4, byte
// for byte (ggml-common.h); the 4-bit IQ4_NL / IQ4_XS are in blocks.h. Every block is 256
// values (MXFP4: 32) split into 32-value sub-blocks; each sub-block has a small scale, and its
// values come in groups of 8 (IQ2, IQ1) or 4 (IQ3) that are one index into a lattice table
// (iq_grids.h) plus signs. "Sub-block j" below is values 32j .. 32j + 31, "group g" of it is
// values 32j + 8g .. 32j + 8g + 7.
//
//   type     values  bytes  bits/weight  value
//   IQ2_XXS   256     66     2.0625      (d * (0.5 + s_j) * 0.25) * grid * sign, s_j 4-bit
//   IQ2_XS    256     74     2.3125      same with two 4-bit scales per sub-block (16 values)
//   IQ2_S     256     82     2.5625      as IQ2_XS, 10-bit grid index, 8 explicit sign bits
//   IQ3_XXS   256     98     3.0625      (d * (0.5 + s_j) * 0.5) * grid * sign
//   IQ3_S     256    110     3.4375      (d * (1 + 2 s_j)) * grid * sign, s_j 4-bit
//   IQ1_S     256     50     1.5625      (d * (2 s_j + 1)) * (grid +/- 0.125), grid in -1/0/1
//   IQ1_M     256     56     1.75        as IQ1_S, 3-bit scale per 16 values, d spread in scales
//   MXFP4      32     17     4.25        2^(e - 128) * kMxfp4Values[q] (an E8M0 exponent)
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

#include "cpu_kernels/quant/blocks.h"

namespace moesplit::quant {

// 2.0625 bpw. Sub-block j is the 8 bytes qs[4j .. 4j + 3] read as two little-endian uint32
// a = qs[4j] | qs[4j + 1] << 16, b = qs[4j + 2] | qs[4j + 3] << 16:
//   a's byte g          = grid index (kIq2XxsGrid) of group g (g = 0..3),
//   b >> 7g & 127       = sign index of group g (Iq2SignByte),
//   b >> 28             = the 4-bit scale s_j.
struct BlockIQ2_XXS {
  uint16_t d;             // f16 super-scale
  uint16_t qs[kQkK / 8];  // [32] packed as above
};

// 2.3125 bpw. qs[4j + g] = grid index (9 bits, kIq2XsGrid) | sign index (7 bits) << 9 of
// group g of sub-block j; scales[j] = scale of groups 0-1 (low nibble), of groups 2-3 (high).
struct BlockIQ2_XS {
  uint16_t d;                 // f16 super-scale
  uint16_t qs[kQkK / 8];      // [32] 9-bit grid index | 7-bit sign index << 9
  uint8_t scales[kQkK / 32];  // [8] two 4-bit scales per sub-block
};

// 2.5625 bpw. Group g of sub-block j: grid index (10 bits, kIq2SGrid) qs[4j + g] | bits
// 2g..2g+1 of qh[j] << 8; its 8 signs are the byte qs[32 + 4j + g] (bit i: value i negative,
// all 8 explicit); scales as IQ2_XS.
struct BlockIQ2_S {
  uint16_t d;                 // f16 super-scale
  uint8_t qs[kQkK / 4];       // [64] 32 low grid-index bytes, then 32 sign bytes
  uint8_t qh[kQkK / 32];      // [8] high 2 bits of the 4 grid indices of sub-block j
  uint8_t scales[kQkK / 32];  // [8] two 4-bit scales per sub-block
};

// 3.0625 bpw. qs[0..63]: one kIq3XxsGrid index per 4 values (value 4k .. 4k + 3 is index k).
// qs[64 + 4j .. 64 + 4j + 3] as a little-endian uint32 u: u >> 7g & 127 is the sign index of
// group g (8 values, Iq2SignByte), u >> 28 the scale s_j.
struct BlockIQ3_XXS {
  uint16_t d;                // f16 super-scale
  uint8_t qs[3 * kQkK / 8];  // [96] 64 grid indices, then 8 x uint32 signs + scale
};

// 3.4375 bpw. Value 4k .. 4k + 3 is kIq3SGrid index qs[k] | (bit k % 8 of qh[k / 8]) << 8;
// signs[k / 2] bit 4 (k % 2) + i is the sign of value 4k + i; the scale of sub-block j
// (values 32j .. 32j + 31) is 1 + 2 * (scales[j / 2] >> 4 (j % 2) & 15).
struct BlockIQ3_S {
  uint16_t d;                 // f16 super-scale
  uint8_t qs[kQkK / 4];       // [64] low 8 bits of the grid indices
  uint8_t qh[kQkK / 32];      // [8] 9th bits
  uint8_t signs[kQkK / 8];    // [32] one sign bit per value
  uint8_t scales[kQkK / 64];  // [4] 4-bit scales, two per byte
};

// 1.5625 bpw. Group g of sub-block j: kIq1SGrid index qs[4j + g] | (qh[j] >> 3g & 7) << 8;
// qh[j] >> 12 & 7 is the 3-bit scale s_j, bit 15 the sign of the sub-block's delta (set: -).
struct BlockIQ1_S {
  uint16_t d;              // f16 super-scale
  uint8_t qs[kQkK / 8];    // [32] low 8 bits of the grid indices
  uint16_t qh[kQkK / 32];  // [8] 3 x 3-bit high index bits | scale << 12 | sign << 15
};

// 1.75 bpw, no separate scale field: the f16 super-scale's 16 bits are the top nibbles of the
// four little-endian uint16 of `scales` (bits 0-3 of d in scales word 0's top nibble, ...).
// Group g of sub-block j: index qs[4j + g] | (qh[2j + g / 2] >> 4 (g % 2) & 7) << 8, delta
// sign bit 3 of that nibble; scale of groups 0-1 is scales word (j / 2) >> 6 (j % 2) & 7, of
// groups 2-3 the next 3 bits.
struct BlockIQ1_M {
  uint8_t qs[kQkK / 8];       // [32] low 8 bits of the grid indices
  uint8_t qh[kQkK / 16];      // [16] per group pair: 3 index bits + delta sign, twice
  uint8_t scales[kQkK / 32];  // [8] 4 uint16: 4 x 3-bit scales + one nibble of d each
};

// The 16 levels of an E2M1 (4-bit float) value, doubled so that they are integers (ggml's
// kvalues_mxfp4): 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives, times 2. The block's scale
// is halved to compensate (DequantMXFP4: 2^(e - 128)).
inline constexpr int8_t kMxfp4Values[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                            0, -1, -2, -3, -4, -6, -8, -12};

// The block scale 2^(e - 128) that multiplies kMxfp4Values (half the E8M0 value 2^(e - 127)),
// built from its f32 bits as ggml's GGML_E8M0_TO_FP32_HALF does: e < 2 gives the subnormals
// 2^-128 / 2^-127, e = 255 gives 2^127 (not the E8M0 NaN).
inline float Mxfp4HalfScale(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  return std::bit_cast<float>(bits);
}

// 4.25 bpw (OCP microscaling MXFP4). qs[j] holds value j in its low nibble and value j + 16 in
// its high nibble, as Q4_0; e is an E8M0 exponent (scale 2^(e - 127), no sign, no mantissa).
struct BlockMXFP4 {
  uint8_t e;            // E8M0 shared exponent
  uint8_t qs[kQk / 2];  // [16] 4-bit E2M1 codes
};

static_assert(sizeof(BlockIQ2_XXS) == 66);
static_assert(sizeof(BlockIQ2_XS) == 74);
static_assert(sizeof(BlockIQ2_S) == 82);
static_assert(sizeof(BlockIQ3_XXS) == 98);
static_assert(sizeof(BlockIQ3_S) == 110);
static_assert(sizeof(BlockIQ1_S) == 50);
static_assert(sizeof(BlockIQ1_M) == 56);
static_assert(sizeof(BlockMXFP4) == 17);
// Kernels read blocks in place: rows must start at a multiple of these (quant.cc CHECKs it).
static_assert(alignof(BlockIQ2_XXS) == 2 && alignof(BlockIQ1_S) == 2);
static_assert(alignof(BlockIQ1_M) == 1 && alignof(BlockMXFP4) == 1);

// IQ1_M's f16 super-scale d from its four scale words (the top nibbles, SetLatticeBlockScale's
// inverse). For generic-flag files (the ISA-flagged kernels spell it out: an inline function
// used from files of different flags could be merged into one copy).
inline uint16_t Iq1mD(const uint16_t* sc) {
  return static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) | ((sc[2] >> 4) & 0x0F00) |
                               (sc[3] & 0xF000));
}

// Writes the f16 scale d into one 256-value block of a lattice type: IQ2_XXS / IQ2_XS / IQ2_S /
// IQ3_XXS / IQ3_S / IQ1_S open the block with it; IQ1_M spreads its 4 nibbles over the top
// nibbles of the 4 scale words (bytes 48..55). For tests and benchmarks that build blocks from
// random bytes with a chosen scale.
inline void SetLatticeBlockScale(bool iq1_m, uint8_t* blk, uint16_t d) {
  if (!iq1_m) {
    std::memcpy(blk, &d, 2);
    return;
  }
  uint16_t sc[4];
  std::memcpy(sc, blk + 48, 8);
  for (int k = 0; k < 4; ++k) {
    sc[k] = static_cast<uint16_t>((sc[k] & 0x0FFF) | ((d >> (4 * k)) & 0xF) << 12);
  }
  std::memcpy(blk + 48, sc, 8);
}

}  // namespace moesplit::quant
