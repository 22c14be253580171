// Small helpers shared by the reference quantizers and dequantizers. Internal to quant/.
//
// Bit-exactness with ggml depends on doing the same float operations in the same order, so the
// helpers here are deliberately literal (no fused multiply-add: this library is compiled with
// -ffp-contract=off).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/base/float16.h"
#include "cpu_kernels/quant/blocks.h"

namespace moesplit::quant::internal {

inline float Half(uint16_t h) { return Fp16ToFp32(h); }
inline uint16_t ToHalf(float f) { return Fp32ToFp16(f); }

// Round to nearest, ties to even, as an int. Adding 1.5 * 2^23 puts the rounded integer in the
// low mantissa bits (the FPU rounds RNE); valid for |v| < 2^22. Larger magnitudes (only possible
// with degenerate scales) are clamped first so the result stays defined and in [-2^22, 2^22).
inline int NearestInt(float v) {
  constexpr float kLimit = 4194303.0f;  // 2^22 - 1
  v = std::clamp(v, -kLimit, kLimit);
  const uint32_t bits = FloatToBits(v + 12582912.0f);
  return static_cast<int>(bits & 0x007fffffu) - 0x00400000;
}

// The value with the largest |x| (first one on ties) -- the sign matters: the scale is chosen so
// that this value maps to the most negative quant, which has one more level than the positive side.
inline float SignedAbsMax(const float* x, int n) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  return max;
}

// Q4_K / Q5_K scale packing: 8 sub-blocks j, each a 6-bit scale s_j and a 6-bit min m_j, in 12
// bytes (96 bits = 8 * 12):
//   j < 4:  q[j]     = s_j | (s_{j+4} >> 4) << 6
//           q[j + 4] = m_j | (m_{j+4} >> 4) << 6
//   j >= 4: q[j + 4] = (s_j & 15) | (m_j & 15) << 4
inline void UnpackScaleMinK4(int j, const uint8_t* q, int* scale, int* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Inverse of UnpackScaleMinK4 for all 8 pairs; ls/lm are in [0, 63].
inline void PackScaleMinK4(const uint8_t* ls, const uint8_t* lm, uint8_t* q) {
  std::memset(q, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      q[j] |= ls[j];
      q[j + 4] |= lm[j];
    } else {
      q[j + 4] = static_cast<uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
      q[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
      q[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
    }
  }
}

// Q3_K: the 6-bit biased scale of sub-block j (0..15) from its 12 packed bytes (see BlockQ3_K).
inline int UnpackScaleQ3K(int j, const uint8_t* q) {
  const int low = j < 8 ? (q[j] & 0xF) : (q[j - 8] >> 4);
  const int high = (q[8 + j % 4] >> (2 * (j / 4))) & 3;
  return low | (high << 4);
}

// Q2_K / Q3_K low bits: 256 2-bit values in 64 bytes; byte l of half h (32 bytes each) holds
// values 128h + l + 32k at bits 2k.
inline void Pack2Bit(const uint8_t* L, uint8_t* qs) {
  for (int h = 0; h < 2; ++h) {
    const uint8_t* v = L + 128 * h;
    for (int l = 0; l < 32; ++l) {
      qs[32 * h + l] =
          static_cast<uint8_t>(v[l] | (v[l + 32] << 2) | (v[l + 64] << 4) | (v[l + 96] << 6));
    }
  }
}

// A Q6_K block's 256 levels (0..63, zero at 32) in value order (layout in BlockQ6_K); eight
// values per 64-bit word (the masks keep every byte's bits in that byte).
inline void Q6KLevels(const BlockQ6_K& b, uint8_t* L) {
  constexpr uint64_t k0F = 0x0F0F0F0F0F0F0F0FULL, k03 = 0x0303030303030303ULL;
  for (int h = 0; h < 2; ++h) {
    for (int l = 0; l < 32; l += 8) {
      uint64_t q0, q1, hb;
      std::memcpy(&q0, b.ql + 64 * h + l, 8);
      std::memcpy(&q1, b.ql + 64 * h + 32 + l, 8);
      std::memcpy(&hb, b.qh + 32 * h + l, 8);
      const uint64_t v[4] = {(q0 & k0F) | (hb & k03) << 4, (q1 & k0F) | (hb >> 2 & k03) << 4,
                             (q0 >> 4 & k0F) | (hb >> 4 & k03) << 4,
                             (q1 >> 4 & k0F) | (hb >> 6 & k03) << 4};
      for (int k = 0; k < 4; ++k) std::memcpy(L + 128 * h + 32 * k + l, &v[k], 8);
    }
  }
}

// The inverse: 256 levels (0..63) -> ql / qh.
inline void PackQ6KLevels(const uint8_t* L, BlockQ6_K* b) {
  for (int h = 0; h < 2; ++h) {
    const uint8_t* v = L + 128 * h;
    uint8_t* ql = b->ql + 64 * h;
    uint8_t* qh = b->qh + 32 * h;
    for (int l = 0; l < 32; ++l) {
      ql[l] = static_cast<uint8_t>((v[l] & 0xF) | ((v[l + 64] & 0xF) << 4));
      ql[l + 32] = static_cast<uint8_t>((v[l + 32] & 0xF) | ((v[l + 96] & 0xF) << 4));
      qh[l] = static_cast<uint8_t>((v[l] >> 4) | ((v[l + 32] >> 4) << 2) | ((v[l + 64] >> 4) << 4) |
                                   ((v[l + 96] >> 4) << 6));
    }
  }
}

}  // namespace moesplit::quant::internal
