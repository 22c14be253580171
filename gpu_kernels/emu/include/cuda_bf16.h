// Emulated CUDA device: __nv_bfloat16 and __nv_bfloat162 (round to nearest even, NaN kept
// quiet, as CUDA's __float2bfloat16_rn and the project's CPU conversion).
#pragma once

#include <cstdint>

#include "core/base/float16.h"
#include "gpu_kernels/emu/types.h"

struct __nv_bfloat16 {
  uint16_t x;
};
struct alignas(4) __nv_bfloat162 {
  __nv_bfloat16 x, y;
};

inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  return __nv_bfloat16{::moesplit::Fp32ToBf16(f)};
}
inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }
inline float __bfloat162float(__nv_bfloat16 h) { return ::moesplit::Bf16ToFp32(h.x); }
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
  return __nv_bfloat162{__float2bfloat16_rn(a), __float2bfloat16_rn(b)};
}
inline float2 __bfloat1622float2(__nv_bfloat162 h) {
  return make_float2(__bfloat162float(h.x), __bfloat162float(h.y));
}
