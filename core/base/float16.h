// IEEE half and bfloat16 <-> float conversions, bit-exact with ggml's reference (scalar) code:
// f32->f16 and f32->bf16 round to nearest even; bf16 keeps NaNs quiet.
#pragma once

#include <cstdint>
#include <cstring>

namespace moesplit {

inline float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t FloatToBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Exact: every half is representable as a float.
inline float Fp16ToFp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return BitsToFloat(sign | 0x7f800000u | (mant << 13));  // inf / nan
  if (exp == 0) {
    if (mant == 0) return BitsToFloat(sign);
    // Subnormal: value = mant * 2^-24.
    float v = static_cast<float>(mant) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  return BitsToFloat(sign | ((exp + 112) << 23) | (mant << 13));
}

// Round to nearest even, overflow to inf, NaN stays NaN.
inline uint16_t Fp32ToFp16(float f) {
  const uint32_t x = FloatToBits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520: inf
  if (abs < 0x38800000u) {
    // Result is subnormal or zero: value / 2^-24, rounded to nearest even by the FPU.
    const float v = BitsToFloat(abs) * 16777216.0f;
    const float r = v + 12582912.0f - 12582912.0f;  // 1.5 * 2^23 trick: RNE to integer
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(r));
  }
  // Normal: rebias exponent (127 -> 15) and round 13 dropped mantissa bits to nearest even.
  uint32_t h = ((abs >> 13) - (112u << 10));
  const uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

inline float Bf16ToFp32(uint16_t b) { return BitsToFloat(static_cast<uint32_t>(b) << 16); }

// ggml_compute_fp32_to_bf16: NaN -> quiet NaN, otherwise round to nearest even.
inline uint16_t Fp32ToBf16(float f) {
  uint32_t u = FloatToBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 64u);
  return static_cast<uint16_t>((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

}  // namespace moesplit
