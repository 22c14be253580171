// ggml's quantized block layouts, byte for byte (ggml-common.h). Every block is a plain struct
// whose sizeof equals ggml's type_size, so a row of n values is n / block_size blocks back to back.
//
// Naming: `d` is the (super-)block scale, `dmin`/`m` the offset, `qs` the low bits of the
// quants, `qh` the high bits, `scales` the packed per-sub-block scales. fp16 fields are stored as
// raw IEEE-half bits (uint16_t) and converted with core/base/float16.h.
//
//   type  values  bytes  bits/weight  value
//   Q4_0    32     18      4.5        d * (q - 8)              q in [0, 15]
//   Q4_1    32     20      5.0        d * q + m                q in [0, 15]
//   Q5_0    32     22      5.5        d * (q - 16)             q in [0, 31]
//   Q5_1    32     24      6.0        d * q + m                q in [0, 31]
//   Q8_0    32     34      8.5        d * q                    q in [-128, 127]
//   Q2_K   256     84      2.625      d*s_j * q - dmin*m_j     q in [0, 3],  16 sub-blocks of 16
//   Q3_K   256    110      3.4375     d*(s_j - 32) * (q - 4)   q in [0, 7],  16 sub-blocks of 16
//   Q4_K   256    144      4.5        d*s_j * q - dmin*m_j     q in [0, 15], 8 sub-blocks of 32
//   Q5_K   256    176      5.5        d*s_j * q - dmin*m_j     q in [0, 31], 8 sub-blocks of 32
//   Q6_K   256    210      6.5625     d*s_j * (q - 32)         q in [0, 63], 16 sub-blocks of 16
//   Q8_K   256    292      9.125      d * q (f32 d)            q in [-127, 127]; activations only
//   IQ4_NL  32     18      4.5        d * kIq4Values[q]        q in [0, 15]
//   IQ4_XS 256    136      4.25       d*(s_j - 32) * kIq4Values[q]  s_j 6-bit, 8 sub-blocks of 32
#pragma once

#include <cstdint>

namespace moesplit::quant {

inline constexpr int kQk = 32;           // values per legacy block (Q4_0 .. Q8_0)
inline constexpr int kQkK = 256;         // values per K-quant super-block
inline constexpr int kKScaleBytes = 12;  // 8 x (6-bit scale, 6-bit min), or 16 x 6-bit (Q3_K)

// 4.5 bpw. qs[j] holds value j in its low nibble and value j + 16 in its high nibble.
struct BlockQ4_0 {
  uint16_t d;           // f16 scale
  uint8_t qs[kQk / 2];  // [16] nibbles
};

// 5.0 bpw. Same nibble order as Q4_0.
struct BlockQ4_1 {
  uint16_t d;           // f16 scale
  uint16_t m;           // f16 offset (the block minimum)
  uint8_t qs[kQk / 2];  // [16] nibbles
};

// 5.5 bpw. Bit j of qh (little-endian uint32) is the 5th bit of value j.
struct BlockQ5_0 {
  uint16_t d;           // f16 scale
  uint8_t qh[4];        // [32 bits] high bits, bit j -> value j
  uint8_t qs[kQk / 2];  // [16] low nibbles, as Q4_0
};

// 6.0 bpw.
struct BlockQ5_1 {
  uint16_t d;           // f16 scale
  uint16_t m;           // f16 offset
  uint8_t qh[4];        // [32 bits] high bits
  uint8_t qs[kQk / 2];  // [16] low nibbles
};

// 8.5 bpw.
struct BlockQ8_0 {
  uint16_t d;      // f16 scale
  int8_t qs[kQk];  // [32] signed quants
};

// 2.625 bpw. scales[j] = s_j (low nibble) | m_j << 4 for sub-block j of 16 values.
// qs: two 128-value halves of 32 bytes; byte l of half h holds values h*128 + l + 32*k at bit
// 2k (k = 0..3).
struct BlockQ2_K {
  uint8_t scales[kQkK / 16];  // [16] 4-bit scale | 4-bit min
  uint8_t qs[kQkK / 4];       // [64] 2-bit quants
  uint16_t d;                 // f16 super-scale of the scales
  uint16_t dmin;              // f16 super-scale of the mins
};

// 3.4375 bpw. Low 2 bits in qs (as Q2_K); bit 2 of value j is bit (j / 32) of hmask[j % 32];
// a set bit means "no -4". 16 6-bit scales packed in 12 bytes: scale j has its low nibble in
// scales[j % 8] (j < 8: low nibble, else high) and its top 2 bits at scales[8 + j % 4] bit
// 2 * (j / 4); stored biased by 32.
struct BlockQ3_K {
  uint8_t hmask[kQkK / 8];       // [32] high bits
  uint8_t qs[kQkK / 4];          // [64] low 2 bits
  uint8_t scales[kKScaleBytes];  // [12] 16 x 6-bit scales
  uint16_t d;                    // f16 super-scale
};

// 4.5 bpw. 8 (scale, min) pairs of 6 bits in 12 bytes (see PackScaleMinK4 in quant_math.h).
// qs: four 64-value chunks of 32 bytes; byte l of chunk c holds value 64c + l (low nibble) and
// 64c + 32 + l (high nibble).
struct BlockQ4_K {
  uint16_t d;                    // f16 super-scale of the scales
  uint16_t dmin;                 // f16 super-scale of the mins
  uint8_t scales[kKScaleBytes];  // [12] 8 x (6-bit scale, 6-bit min)
  uint8_t qs[kQkK / 2];          // [128] nibbles
};

// 5.5 bpw. Nibbles as Q4_K; the 5th bit of value 64c + l is bit 2c of qh[l], of value
// 64c + 32 + l bit 2c + 1 (l < 32).
struct BlockQ5_K {
  uint16_t d;                    // f16 super-scale of the scales
  uint16_t dmin;                 // f16 super-scale of the mins
  uint8_t scales[kKScaleBytes];  // [12] 8 x (6-bit scale, 6-bit min)
  uint8_t qh[kQkK / 8];          // [32] 5th bits
  uint8_t qs[kQkK / 2];          // [128] low nibbles
};

// 6.5625 bpw. Two 128-value halves; in half h (ql += 64h, qh += 32h), for l < 32:
//   value 128h + l      = ql[l]      & 15 | (qh[l] >> 0 & 3) << 4
//   value 128h + l + 32 = ql[l + 32] & 15 | (qh[l] >> 2 & 3) << 4
//   value 128h + l + 64 = ql[l]      >> 4 | (qh[l] >> 4 & 3) << 4
//   value 128h + l + 96 = ql[l + 32] >> 4 | (qh[l] >> 6 & 3) << 4
struct BlockQ6_K {
  uint8_t ql[kQkK / 2];      // [128] low nibbles
  uint8_t qh[kQkK / 4];      // [64] high 2 bits
  int8_t scales[kQkK / 16];  // [16] signed 8-bit sub-block scales
  uint16_t d;                // f16 super-scale
};

// 9.125 bpw; the activation format of K-quant dot products. bsums lets a dot product subtract
// the Q*_K mins without touching the quants again.
struct BlockQ8_K {
  float d;                   // f32 scale
  int8_t qs[kQkK];           // [256] quants
  int16_t bsums[kQkK / 16];  // [16] sum of qs[16j .. 16j + 15]
};

// The 16 non-linear levels of IQ4_NL / IQ4_XS (ggml's kvalues_iq4nl): a 4-bit index selects
// one. Denser near zero, where most weights are; the most negative level has the largest
// magnitude, as in the linear types.
inline constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                          1,    13,   25,  38,  53,  69,  89,  113};

// 4.5 bpw. Q4_0's layout with table values: qs[j] holds the index of value j in its low
// nibble and of value j + 16 in its high nibble.
struct BlockIQ4_NL {
  uint16_t d;           // f16 scale
  uint8_t qs[kQk / 2];  // [16] 4-bit indices into kIq4Values
};

// 4.25 bpw. 8 sub-blocks of 32 values; sub-block j has the 6-bit scale
//   s_j = (scales_l[j / 2] >> 4 (j % 2)) & 15 | ((scales_h >> 2j) & 3) << 4
// stored biased by 32 (value = d * (s_j - 32) * kIq4Values[q]), and its indices in
// qs[16j .. 16j + 15] as IQ4_NL's block (low nibble value 32j + l, high nibble 32j + 16 + l).
struct BlockIQ4_XS {
  uint16_t d;                   // f16 super-scale
  uint16_t scales_h;            // [8 x 2 bits] high bits of s_j
  uint8_t scales_l[kQkK / 64];  // [4] low nibbles of s_j
  uint8_t qs[kQkK / 2];         // [128] 4-bit indices
};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockIQ4_XS) == 136);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);
// Kernels read blocks in place: rows must start at a multiple of these (quant.cc CHECKs it).
static_assert(alignof(BlockQ4_0) == 2 && alignof(BlockQ6_K) == 2 && alignof(BlockQ2_K) == 2);
static_assert(alignof(BlockQ8_K) == 4);

}  // namespace moesplit::quant
