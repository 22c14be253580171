// Decoding of GGUF weight blocks on both sides (MOESPLIT_HD): the GPU kernels (qgemv.cu,
// dequant.cu) call these per lane / per thread, and tests/gpu_kernels/quant_blocks_hd_test.cc
// checks them on the CPU, bit for bit, against cpu_kernels' DequantizeRow (ggml's to_float).
//
// The unit of work is 32 consecutive values of one row ("a unit"):
//   type   block values  block bytes  units/block  value
//   Q4_0        32           18            1       (q - 8) * d
//   Q5_0        32           22            1       (q - 16) * d
//   Q4_1        32           20            1       q * d + m
//   Q5_1        32           24            1       q * d + m
//   Q8_0        32           34            1       q * d
//   Q4_K       256          144            8       (d * s_j) * q - dmin * m_j   (sub-block j)
//   Q5_K       256          176            8       (d * s_j) * q - dmin * m_j
//   Q6_K       256          210            8       (d * s_k) * (q - 32)  (two scales per unit)
//   Q2_K       256           84            8       (d * s_k) * q - dmin * m_k  (two per unit)
//   Q3_K       256          110            8       (d * (s_k - 32)) * (q - 4 * !hbit)  (two)
//   IQ4_NL      32           18            1       d * kIq4[q]
//   IQ4_XS     256          136            8       (d * (s_j - 32)) * kIq4[q]
//   IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, MXFP4: quant_iq_blocks_hd.h
//   F32/F16/BF16  32 (a group of 32 elements) 128 / 64 / 64    1
// so a warp lane (or a thread) decodes one unit with HdDecodeUnit<type>(block, j, out).
//
// Bit-exactness: the reference rounds after every multiply and subtract. nvcc fuses a * b - c
// into one FMA by default (a different number), so on the device every product and difference
// goes through __fmul_rn / __fsub_rn, which are never contracted. On the host the project's
// default flags target x86-64 without FMA, so plain operators round the same way.
// Blocks are read byte by byte (little-endian), so no alignment is assumed: Q6_K and the legacy
// blocks are only 2-byte aligned, and the GEMV decodes from a shared-memory copy.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/base/dtype.h"
#include "gpu_kernels/hd.h"
#include "gpu_kernels/hd_bits.h"
#include "gpu_kernels/quant_iq_blocks_hd.h"

namespace moesplit::gpu {

inline constexpr int kUnitValues = 32;  // values decoded per HdDecodeUnit call

// ---------------------------------------------------------------------------------------------
// Geometry. "Block" here is the decode block: ggml's block for quantized types, a group of 32
// elements for F32/F16/BF16. 0 for a type these decoders do not handle.
// ---------------------------------------------------------------------------------------------
MOESPLIT_HD constexpr int HdBlockValues(GgmlType t) {
  switch (t) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
    case GgmlType::kQ4_0:
    case GgmlType::kQ5_0:
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_1:
    case GgmlType::kQ8_0:
    case GgmlType::kIQ4_NL:
    case GgmlType::kMXFP4:
      return 32;
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ6_K:
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K:
    case GgmlType::kIQ4_XS:
    case GgmlType::kIQ2_XXS:
    case GgmlType::kIQ2_XS:
    case GgmlType::kIQ2_S:
    case GgmlType::kIQ3_XXS:
    case GgmlType::kIQ3_S:
    case GgmlType::kIQ1_S:
    case GgmlType::kIQ1_M:
      return 256;
    default:
      return 0;
  }
}

MOESPLIT_HD constexpr int HdBlockBytes(GgmlType t) {
  switch (t) {
    case GgmlType::kF32:
      return 128;  // 32 x 4 B
    case GgmlType::kF16:
    case GgmlType::kBF16:
      return 64;  // 32 x 2 B
    case GgmlType::kQ4_0:
      return 18;  // f16 d + 16 B nibbles
    case GgmlType::kQ5_0:
      return 22;  // f16 d + 4 B high bits + 16 B nibbles
    case GgmlType::kQ4_1:
      return 20;  // f16 d, f16 m + 16 B nibbles
    case GgmlType::kQ5_1:
      return 24;  // f16 d, f16 m + 4 B high bits + 16 B nibbles
    case GgmlType::kQ8_0:
      return 34;  // f16 d + 32 B int8
    case GgmlType::kQ4_K:
      return 144;  // f16 d, f16 dmin, 12 B scales, 128 B nibbles
    case GgmlType::kQ5_K:
      return 176;  // as Q4_K + 32 B fifth bits
    case GgmlType::kQ6_K:
      return 210;  // 128 B low nibbles, 64 B high pairs, 16 B int8 scales, f16 d
    case GgmlType::kQ2_K:
      return 84;  // 16 B scale|min nibbles, 64 B 2-bit quants, f16 d, f16 dmin
    case GgmlType::kQ3_K:
      return 110;  // 32 B high bits, 64 B 2-bit quants, 12 B 6-bit scales, f16 d
    case GgmlType::kIQ4_NL:
      return 18;  // f16 d + 16 B 4-bit indices
    case GgmlType::kIQ4_XS:
      return 136;  // f16 d, 16-bit high scale bits, 4 B low scale nibbles, 128 B indices
    case GgmlType::kIQ2_XXS:  // the lattice types and MXFP4: quant_iq_blocks_hd.h
      return 66;
    case GgmlType::kIQ2_XS:
      return 74;
    case GgmlType::kIQ2_S:
      return 82;
    case GgmlType::kIQ3_XXS:
      return 98;
    case GgmlType::kIQ3_S:
      return 110;
    case GgmlType::kIQ1_S:
      return 50;
    case GgmlType::kIQ1_M:
      return 56;
    case GgmlType::kMXFP4:
      return 17;
    default:
      return 0;
  }
}

MOESPLIT_HD constexpr bool HdCanDecode(GgmlType t) { return HdBlockValues(t) != 0; }
// The types above, for error messages.
inline constexpr char kHdDecodableTypes[] =
    "q4_0, q5_0, q4_1, q5_1, q8_0, iq4_nl, mxfp4, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_xs, iq2_xxs, "
    "iq2_xs, iq2_s, iq3_xxs, iq3_s, iq1_s, iq1_m, f32, f16, bf16";

// Every type above as X(enumerator): the one list that the dispatch switches (here, qgemv.cu,
// dequant.cu) expand, so a new decoder is reached everywhere by one line.
// clang-format off
#define MOESPLIT_HD_DECODABLE_TYPES(X)                                                   \
  X(kQ4_0) X(kQ5_0) X(kQ4_1) X(kQ5_1) X(kQ8_0) X(kIQ4_NL) X(kMXFP4)                      \
  X(kQ2_K) X(kQ3_K) X(kQ4_K) X(kQ5_K) X(kQ6_K) X(kIQ4_XS)                                \
  X(kIQ2_XXS) X(kIQ2_XS) X(kIQ2_S) X(kIQ3_XXS) X(kIQ3_S) X(kIQ1_S) X(kIQ1_M)             \
  X(kF32) X(kF16) X(kBF16)
// clang-format on
MOESPLIT_HD constexpr bool HdIsPlainFloat(GgmlType t) {
  return t == GgmlType::kF32 || t == GgmlType::kF16 || t == GgmlType::kBF16;
}

// Q4_K / Q5_K: 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes at q.
//   j < 4:  s = q[j] & 63,  m = q[j + 4] & 63
//   j >= 4: s = q[j + 4] & 15 | (q[j - 4] >> 6) << 4,  m = q[j + 4] >> 4 | (q[j] >> 6) << 4
MOESPLIT_HD void HdScaleMinK4(int j, const uint8_t* q, int* scale, int* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// ---------------------------------------------------------------------------------------------
// Unit decoders: out[0..32) = values 32j .. 32j + 31 of the block at b.
// ---------------------------------------------------------------------------------------------

// 18 B: d at 0, qs[16] at 2; qs[l] = value l (low nibble) | value l + 16 (high nibble).
MOESPLIT_HD void HdDecodeQ4_0(const uint8_t* b, float* out) {
  const float d = HdHalfToFloat(HdLoadU16(b));
  const uint8_t* qs = b + 2;
  MOESPLIT_HD_UNROLL
  for (int l = 0; l < 16; ++l) {
    out[l] = HdMul(static_cast<float>((qs[l] & 0xF) - 8), d);
    out[l + 16] = HdMul(static_cast<float>((qs[l] >> 4) - 8), d);
  }
}

// 20 B: d at 0, m at 2, qs[16] at 4 (Q4_0's nibble order); value q * d + m, rounded after the
// multiply and after the add, as ggml's dequantize_row_q4_1.
MOESPLIT_HD void HdDecodeQ4_1(const uint8_t* b, float* out) {
  const float d = HdHalfToFloat(HdLoadU16(b));
  const float m = HdHalfToFloat(HdLoadU16(b + 2));
  const uint8_t* qs = b + 4;
  MOESPLIT_HD_UNROLL
  for (int l = 0; l < 16; ++l) {
    out[l] = HdAdd(HdMul(static_cast<float>(qs[l] & 0xF), d), m);
    out[l + 16] = HdAdd(HdMul(static_cast<float>(qs[l] >> 4), d), m);
  }
}

// 24 B: d at 0, m at 2, qh (bit l -> value l's fifth bit) at 4, qs[16] at 8; q * d + m.
MOESPLIT_HD void HdDecodeQ5_1(const uint8_t* b, float* out) {
  const float d = HdHalfToFloat(HdLoadU16(b));
  const float m = HdHalfToFloat(HdLoadU16(b + 2));
  const uint32_t qh = HdLoadU32(b + 4);
  const uint8_t* qs = b + 8;
  MOESPLIT_HD_UNROLL
  for (int l = 0; l < 16; ++l) {
    const int h0 = static_cast<int>((qh >> l) & 1u) << 4;
    const int h1 = static_cast<int>((qh >> (l + 16)) & 1u) << 4;
    out[l] = HdAdd(HdMul(static_cast<float>((qs[l] & 0xF) | h0), d), m);
    out[l + 16] = HdAdd(HdMul(static_cast<float>((qs[l] >> 4) | h1), d), m);
  }
}

// 22 B: d at 0, qh (32 bits, little-endian, bit l -> value l) at 2, qs[16] at 6.
MOESPLIT_HD void HdDecodeQ5_0(const uint8_t* b, float* out) {
  const float d = HdHalfToFloat(HdLoadU16(b));
  const uint32_t qh = HdLoadU32(b + 2);
  const uint8_t* qs = b + 6;
  MOESPLIT_HD_UNROLL
  for (int l = 0; l < 16; ++l) {
    const int h0 = static_cast<int>((qh >> l) & 1u) << 4;
    const int h1 = static_cast<int>((qh >> (l + 16)) & 1u) << 4;
    out[l] = HdMul(static_cast<float>(((qs[l] & 0xF) | h0) - 16), d);
    out[l + 16] = HdMul(static_cast<float>(((qs[l] >> 4) | h1) - 16), d);
  }
}

// 34 B: d at 0, int8 qs[32] at 2.
MOESPLIT_HD void HdDecodeQ8_0(const uint8_t* b, float* out) {
  const float d = HdHalfToFloat(HdLoadU16(b));
  MOESPLIT_HD_UNROLL
  for (int l = 0; l < 32; ++l) {
    out[l] = HdMul(static_cast<float>(static_cast<int8_t>(b[2 + l])), d);
  }
}

// 144 B: d at 0, dmin at 2, scales[12] at 4, qs[128] at 16. Sub-block j uses the low (j even)
// or high (j odd) nibbles of qs[32 * (j / 2) ..+32].
MOESPLIT_HD void HdDecodeQ4_K(const uint8_t* b, int j, float* out) {
  const float d = HdHalfToFloat(HdLoadU16(b));
  const float dmin = HdHalfToFloat(HdLoadU16(b + 2));
  int sc, m;
  HdScaleMinK4(j, b + 4, &sc, &m);
  const float dl = HdMul(d, static_cast<float>(sc));
  const float ml = HdMul(dmin, static_cast<float>(m));
  const uint8_t* q = b + 16 + 32 * (j / 2);
  const int shift = 4 * (j % 2);
  MOESPLIT_HD_UNROLL
  for (int l = 0; l < 32; ++l) {
    out[l] = HdSub(HdMul(dl, static_cast<float>((q[l] >> shift) & 0xF)), ml);
  }
}

// 176 B: d at 0, dmin at 2, scales[12] at 4, qh[32] at 16, qs[128] at 48. As Q4_K, plus 16 when
// bit j of qh[l] is set.
MOESPLIT_HD void HdDecodeQ5_K(const uint8_t* b, int j, float* out) {
  const float d = HdHalfToFloat(HdLoadU16(b));
  const float dmin = HdHalfToFloat(HdLoadU16(b + 2));
  int sc, m;
  HdScaleMinK4(j, b + 4, &sc, &m);
  const float dl = HdMul(d, static_cast<float>(sc));
  const float ml = HdMul(dmin, static_cast<float>(m));
  const uint8_t* qh = b + 16;
  const uint8_t* q = b + 48 + 32 * (j / 2);
  const int shift = 4 * (j % 2);
  const uint32_t hbit = 1u << j;
  MOESPLIT_HD_UNROLL
  for (int l = 0; l < 32; ++l) {
    const int v = ((q[l] >> shift) & 0xF) + ((qh[l] & hbit) ? 16 : 0);
    out[l] = HdSub(HdMul(dl, static_cast<float>(v)), ml);
  }
}

// 210 B: ql[128] at 0, qh[64] at 128, int8 scales[16] at 192, d at 208. Unit j = values
// 128h + 32k + l (h = j / 4, k = j % 4): low nibble of ql[64h + 32(k % 2) + l] >> 4(k / 2),
// high pair bits 2k of qh[32h + l]; scale of value v is scales[v / 16] (two per unit).
MOESPLIT_HD void HdDecodeQ6_K(const uint8_t* b, int j, float* out) {
  const float d = HdHalfToFloat(HdLoadU16(b + 208));
  const int h = j / 4, k = j % 4;
  const uint8_t* ql = b + 64 * h + 32 * (k % 2);
  const uint8_t* qh = b + 128 + 32 * h;
  const int lshift = 4 * (k / 2), hshift = 2 * k;
  const float d0 = HdMul(d, static_cast<float>(static_cast<int8_t>(b[192 + 2 * j])));
  const float d1 = HdMul(d, static_cast<float>(static_cast<int8_t>(b[192 + 2 * j + 1])));
  MOESPLIT_HD_UNROLL
  for (int l = 0; l < 32; ++l) {
    const int q = (((ql[l] >> lshift) & 0xF) | (((qh[l] >> hshift) & 3) << 4)) - 32;
    out[l] = HdMul(l < 16 ? d0 : d1, static_cast<float>(q));
  }
}

// Q2_K / Q3_K unit j: values 32j .. 32j + 31 are sub-blocks 2j and 2j + 1 (16 values each) and
// sit in half h = j / 4 of qs (32 bytes each) at bit pair 2 (j % 4): value 32j + l in byte l.

// 84 B: scales[16] at 0 (low nibble scale, high nibble min), qs[64] at 16, d at 80, dmin at 82.
MOESPLIT_HD void HdDecodeQ2_K(const uint8_t* b, int j, float* out) {
  const float d = HdHalfToFloat(HdLoadU16(b + 80));
  const float dmin = HdHalfToFloat(HdLoadU16(b + 82));
  const uint8_t* q = b + 16 + 32 * (j / 4);
  const int shift = 2 * (j % 4);
  MOESPLIT_HD_UNROLL
  for (int half = 0; half < 2; ++half) {
    const uint32_t sc = b[2 * j + half];
    const float dl = HdMul(d, static_cast<float>(sc & 0xF));
    const float ml = HdMul(dmin, static_cast<float>(sc >> 4));
    MOESPLIT_HD_UNROLL
    for (int l = 16 * half; l < 16 * half + 16; ++l) {
      out[l] = HdSub(HdMul(dl, static_cast<float>((q[l] >> shift) & 3)), ml);
    }
  }
}

// Q3_K's 6-bit scale k (0..15) from the 12 bytes at q: low nibble of q[k] (k < 8) or high
// nibble of q[k - 8]; high 2 bits at bit 2 (k / 4) of q[8 + k % 4].
MOESPLIT_HD int HdScaleQ3K(int k, const uint8_t* q) {
  const int low = k < 8 ? (q[k] & 0xF) : (q[k - 8] >> 4);
  return low | (((q[8 + k % 4] >> (2 * (k / 4))) & 3) << 4);
}

// 110 B: hmask[32] at 0 (bit j of hmask[l] is the third bit of value 32j + l), qs[64] at 32,
// scales[12] at 96, d at 108. A value is its low 2 bits, minus 4 when its high bit is clear.
MOESPLIT_HD void HdDecodeQ3_K(const uint8_t* b, int j, float* out) {
  const float d = HdHalfToFloat(HdLoadU16(b + 108));
  const uint8_t* q = b + 32 + 32 * (j / 4);
  const int shift = 2 * (j % 4);
  const uint32_t hbit = 1u << j;
  MOESPLIT_HD_UNROLL
  for (int half = 0; half < 2; ++half) {
    const float dl = HdMul(d, static_cast<float>(HdScaleQ3K(2 * j + half, b + 96) - 32));
    MOESPLIT_HD_UNROLL
    for (int l = 16 * half; l < 16 * half + 16; ++l) {
      const int v = static_cast<int>((q[l] >> shift) & 3) - ((b[l] & hbit) ? 0 : 4);
      out[l] = HdMul(dl, static_cast<float>(v));
    }
  }
}

// IQ4_NL / IQ4_XS's 16 non-linear levels (ggml's kvalues_iq4nl; cpu_kernels' kIq4Values). A
// switch rather than a table: the same code on both sides, no __constant__ array for the
// host-compiled emulation to stand in for, and nvcc turns it into a few selects.
MOESPLIT_HD float HdIq4Level(uint32_t i) {
  switch (i & 0xF) {
    case 0: return -127.0f;
    case 1: return -104.0f;
    case 2: return -83.0f;
    case 3: return -65.0f;
    case 4: return -49.0f;
    case 5: return -35.0f;
    case 6: return -22.0f;
    case 7: return -10.0f;
    case 8: return 1.0f;
    case 9: return 13.0f;
    case 10: return 25.0f;
    case 11: return 38.0f;
    case 12: return 53.0f;
    case 13: return 69.0f;
    case 14: return 89.0f;
    default: return 113.0f;
  }
}

// 16 bytes of indices: byte l holds value l (low nibble) and value l + 16 (high nibble).
MOESPLIT_HD void HdDecodeIq4Indices(const uint8_t* qs, float dl, float* out) {
  MOESPLIT_HD_UNROLL
  for (int l = 0; l < 16; ++l) {
    out[l] = HdMul(dl, HdIq4Level(qs[l]));
    out[l + 16] = HdMul(dl, HdIq4Level(qs[l] >> 4));
  }
}

// 18 B: d at 0, qs[16] at 2.
MOESPLIT_HD void HdDecodeIQ4_NL(const uint8_t* b, float* out) {
  HdDecodeIq4Indices(b + 2, HdHalfToFloat(HdLoadU16(b)), out);
}

// 136 B: d at 0, scales_h (u16) at 2, scales_l[4] at 4, qs[128] at 8; sub-block j's 6-bit scale
// is nibble j % 2 of scales_l[j / 2] | bits 2j..2j+1 of scales_h << 4, its indices qs[16j..].
MOESPLIT_HD void HdDecodeIQ4_XS(const uint8_t* b, int j, float* out) {
  const float d = HdHalfToFloat(HdLoadU16(b));
  const uint32_t sh = HdLoadU16(b + 2);
  const int ls = static_cast<int>(((b[4 + j / 2] >> (4 * (j % 2))) & 0xF) |
                                  (((sh >> (2 * j)) & 3u) << 4));
  HdDecodeIq4Indices(b + 8 + 16 * j, HdMul(d, static_cast<float>(ls - 32)), out);
}

MOESPLIT_HD void HdDecodeF32(const uint8_t* b, float* out) {
  MOESPLIT_HD_UNROLL
  for (int l = 0; l < 32; ++l) out[l] = HdBitsToFloat(HdLoadU32(b + 4 * l));
}
MOESPLIT_HD void HdDecodeF16(const uint8_t* b, float* out) {
  MOESPLIT_HD_UNROLL
  for (int l = 0; l < 32; ++l) out[l] = HdHalfToFloat(HdLoadU16(b + 2 * l));
}
MOESPLIT_HD void HdDecodeBF16(const uint8_t* b, float* out) {
  MOESPLIT_HD_UNROLL
  for (int l = 0; l < 32; ++l) out[l] = HdBf16ToFloat(HdLoadU16(b + 2 * l));
}

// Unit j (0 <= j < HdBlockValues(kType) / 32) of the block at b; the type is a compile-time
// constant so kernels get one straight-line decoder each.
template <GgmlType kType>
MOESPLIT_HD void HdDecodeUnit(const uint8_t* b, int j, float* out) {
  if constexpr (kType == GgmlType::kQ4_0) {
    HdDecodeQ4_0(b, out);
  } else if constexpr (kType == GgmlType::kQ5_0) {
    HdDecodeQ5_0(b, out);
  } else if constexpr (kType == GgmlType::kQ4_1) {
    HdDecodeQ4_1(b, out);
  } else if constexpr (kType == GgmlType::kQ5_1) {
    HdDecodeQ5_1(b, out);
  } else if constexpr (kType == GgmlType::kQ8_0) {
    HdDecodeQ8_0(b, out);
  } else if constexpr (kType == GgmlType::kQ4_K) {
    HdDecodeQ4_K(b, j, out);
  } else if constexpr (kType == GgmlType::kQ5_K) {
    HdDecodeQ5_K(b, j, out);
  } else if constexpr (kType == GgmlType::kQ6_K) {
    HdDecodeQ6_K(b, j, out);
  } else if constexpr (kType == GgmlType::kQ2_K) {
    HdDecodeQ2_K(b, j, out);
  } else if constexpr (kType == GgmlType::kQ3_K) {
    HdDecodeQ3_K(b, j, out);
  } else if constexpr (kType == GgmlType::kIQ4_NL) {
    HdDecodeIQ4_NL(b, out);
  } else if constexpr (kType == GgmlType::kIQ4_XS) {
    HdDecodeIQ4_XS(b, j, out);
  } else if constexpr (kType == GgmlType::kIQ2_XXS) {
    HdDecodeIQ2_XXS(b, j, out);
  } else if constexpr (kType == GgmlType::kIQ2_XS) {
    HdDecodeIQ2_XS(b, j, out);
  } else if constexpr (kType == GgmlType::kIQ2_S) {
    HdDecodeIQ2_S(b, j, out);
  } else if constexpr (kType == GgmlType::kIQ3_XXS) {
    HdDecodeIQ3_XXS(b, j, out);
  } else if constexpr (kType == GgmlType::kIQ3_S) {
    HdDecodeIQ3_S(b, j, out);
  } else if constexpr (kType == GgmlType::kIQ1_S) {
    HdDecodeIQ1_S(b, j, out);
  } else if constexpr (kType == GgmlType::kIQ1_M) {
    HdDecodeIQ1_M(b, j, out);
  } else if constexpr (kType == GgmlType::kMXFP4) {
    HdDecodeMXFP4(b, out);
  } else if constexpr (kType == GgmlType::kF32) {
    HdDecodeF32(b, out);
  } else if constexpr (kType == GgmlType::kF16) {
    HdDecodeF16(b, out);
  } else {
    static_assert(kType == GgmlType::kBF16, "no unit decoder for this type");
    HdDecodeBF16(b, out);
  }
}

// Runtime-dispatched form (host tests, cold paths). Returns false for a type HdCanDecode rejects.
MOESPLIT_HD bool HdDecodeUnit(GgmlType t, const uint8_t* b, int j, float* out) {
#define MOESPLIT_HD_DECODE_CASE(T)        \
  case GgmlType::T:                       \
    HdDecodeUnit<GgmlType::T>(b, j, out); \
    return true;
  switch (t) {
    MOESPLIT_HD_DECODABLE_TYPES(MOESPLIT_HD_DECODE_CASE)
    default:
      return false;
  }
#undef MOESPLIT_HD_DECODE_CASE
}

// One element of a plain float row (any alignment): element i of the row at p.
template <GgmlType kType>
MOESPLIT_HD float HdPlainElement(const uint8_t* p, int64_t i) {
  if constexpr (kType == GgmlType::kF32) {
    return HdBitsToFloat(HdLoadU32(p + 4 * i));
  } else if constexpr (kType == GgmlType::kF16) {
    return HdHalfToFloat(HdLoadU16(p + 2 * i));
  } else {
    static_assert(kType == GgmlType::kBF16, "not a plain float type");
    return HdBf16ToFloat(HdLoadU16(p + 2 * i));
  }
}

}  // namespace moesplit::gpu
