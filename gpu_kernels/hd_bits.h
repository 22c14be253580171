// Bit-level helpers of the MOESPLIT_HD decoders (quant_blocks_hd.h, quant_iq_blocks_hd.h): float
// <-> bits, little-endian loads of any alignment, half and bf16 conversions, the same on both
// sides.
#pragma once

#include <cstdint>
#include <cstring>

#include "gpu_kernels/hd.h"

namespace moesplit::gpu {

MOESPLIT_HD float HdBitsToFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

MOESPLIT_HD uint32_t HdFloatToBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

MOESPLIT_HD uint32_t HdLoadU16(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8;
}
MOESPLIT_HD uint32_t HdLoadU32(const uint8_t* p) { return HdLoadU16(p) | HdLoadU16(p + 2) << 16; }

// IEEE half -> float, exact (every half is a float). Same cases as core/base/float16.h.
MOESPLIT_HD float HdHalfToFloat(uint32_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return HdBitsToFloat(sign | 0x7f800000u | (mant << 13));  // inf / nan
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact (a normal float for mant > 0).
    const float v = HdMul(static_cast<float>(mant), 1.0f / 16777216.0f);
    return HdBitsToFloat(sign | HdFloatToBits(v));
  }
  return HdBitsToFloat(sign | ((exp + 112) << 23) | (mant << 13));  // rebias 15 -> 127
}

MOESPLIT_HD float HdBf16ToFloat(uint32_t b) { return HdBitsToFloat((b & 0xffffu) << 16); }

// float -> bf16 bits, round to nearest even; NaN stays a quiet NaN (ggml_compute_fp32_to_bf16).
MOESPLIT_HD uint16_t HdFloatToBf16(float f) {
  const uint32_t u = HdFloatToBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 64u);
  return static_cast<uint16_t>((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

}  // namespace moesplit::gpu
