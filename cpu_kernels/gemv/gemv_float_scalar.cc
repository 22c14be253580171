// Scalar reference dots of the float family: F32 / F16 / BF16 weights x F32 activations. Each
// weight is widened exactly to f32 (F16 via HalfToFloat, BF16 by a 16-bit shift) and multiplied
// in f32; the products are summed in a fixed order:
//   acc[j] = sum over i = j (mod 8) of w_i * a_i,   j < 8, i in index order
//   result = ((acc0 + acc1) + (acc2 + acc3)) + ((acc4 + acc5) + (acc6 + acc7))
// Eight partial sums (not one) keep the rounding error ~8x smaller than a single running sum,
// and let the compiler vectorize the loop without reassociating anything.
#include <cstdint>
#include <cstring>

#include "cpu_kernels/gemv/gemv_internal.h"
#include "cpu_kernels/gemv/gemv_isa_common.h"

namespace moesplit::gemv::internal {
namespace {

constexpr int kLanes = 8;

struct LoadF32 {
  static float At(const uint8_t* w, int64_t i) {  // w: [n] f32
    float v;
    std::memcpy(&v, w + 4 * i, 4);
    return v;
  }
};

struct LoadF16 {
  static float At(const uint8_t* w, int64_t i) {  // w: [n] IEEE half
    uint16_t h;
    std::memcpy(&h, w + 2 * i, 2);
    return HalfToFloat(h);
  }
};

struct LoadBF16 {
  static float At(const uint8_t* w, int64_t i) {  // w: [n] bf16 = the high half of an f32
    uint16_t h;
    std::memcpy(&h, w + 2 * i, 2);
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float v;
    std::memcpy(&v, &bits, 4);
    return v;
  }
};

template <class Load>
float DotFloat(const void* w_row, const void* a_row, int64_t n) {
  const auto* w = static_cast<const uint8_t*>(w_row);  // [n] weights
  const auto* a = static_cast<const float*>(a_row);    // [n] f32
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) acc[j] += Load::At(w, i + j) * a[i + j];
  }
  for (int j = 0; i + j < n; ++j) acc[j] += Load::At(w, i + j) * a[i + j];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

}  // namespace

float DotF32_F32_Scalar(const void* w_row, const void* a_row, int64_t n) {
  return DotFloat<LoadF32>(w_row, a_row, n);
}

float DotF16_F32_Scalar(const void* w_row, const void* a_row, int64_t n) {
  return DotFloat<LoadF16>(w_row, a_row, n);
}

float DotBF16_F32_Scalar(const void* w_row, const void* a_row, int64_t n) {
  return DotFloat<LoadBF16>(w_row, a_row, n);
}

}  // namespace moesplit::gemv::internal
