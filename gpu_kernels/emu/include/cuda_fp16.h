// Emulated CUDA device: __half and __half2 with the conversions the kernels use (round to
// nearest even, as CUDA's _rn intrinsics and the project's CPU conversions).
#pragma once

#include <cstdint>

#include "core/base/float16.h"
#include "gpu_kernels/emu/types.h"

struct __half {
  uint16_t x;
};
struct alignas(4) __half2 {
  __half x, y;
};
using half = __half;
using half2 = __half2;

inline __half __float2half_rn(float f) { return __half{::moesplit::Fp32ToFp16(f)}; }
inline __half __float2half(float f) { return __float2half_rn(f); }
inline float __half2float(__half h) { return ::moesplit::Fp16ToFp32(h.x); }
inline __half2 __floats2half2_rn(float a, float b) {
  return __half2{__float2half_rn(a), __float2half_rn(b)};
}
inline __half2 __float2half2_rn(float a) { return __floats2half2_rn(a, a); }
inline float2 __half22float2(__half2 h) {
  return make_float2(__half2float(h.x), __half2float(h.y));
}
inline float __low2float(__half2 h) { return __half2float(h.x); }
inline float __high2float(__half2 h) { return __half2float(h.y); }
