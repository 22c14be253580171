// Reference dequantization of the 32-value block formats, bit-exact with ggml's to_float: each
// output is one float multiply (and one add for the offset types) of exactly the same operands.
#include "cpu_kernels/quant/blocks.h"
#include "cpu_kernels/quant/quant_internal.h"
#include "cpu_kernels/quant/quant_math.h"

namespace moesplit::quant::internal {
namespace {

// The 5th bits of a Q5 block as one little-endian word: bit j belongs to value j.
uint32_t LoadHighBits(const uint8_t* qh) {
  return static_cast<uint32_t>(qh[0]) | static_cast<uint32_t>(qh[1]) << 8 |
         static_cast<uint32_t>(qh[2]) << 16 | static_cast<uint32_t>(qh[3]) << 24;
}

}  // namespace

// 18 B -> 32 values: d * (nibble - 8).
void DequantQ4_0(const void* src, float* dst, int64_t nb) {
  const auto* blocks = static_cast<const BlockQ4_0*>(src);
  for (int64_t i = 0; i < nb; ++i, dst += kQk) {
    const BlockQ4_0& b = blocks[i];
    const float d = Half(b.d);
    for (int j = 0; j < kQk / 2; ++j) {
      dst[j] = static_cast<float>((b.qs[j] & 0xF) - 8) * d;
      dst[j + kQk / 2] = static_cast<float>((b.qs[j] >> 4) - 8) * d;
    }
  }
}

// 20 B -> 32 values: d * nibble + m.
void DequantQ4_1(const void* src, float* dst, int64_t nb) {
  const auto* blocks = static_cast<const BlockQ4_1*>(src);
  for (int64_t i = 0; i < nb; ++i, dst += kQk) {
    const BlockQ4_1& b = blocks[i];
    const float d = Half(b.d);
    const float m = Half(b.m);
    for (int j = 0; j < kQk / 2; ++j) {
      dst[j] = static_cast<float>(b.qs[j] & 0xF) * d + m;
      dst[j + kQk / 2] = static_cast<float>(b.qs[j] >> 4) * d + m;
    }
  }
}

// 22 B -> 32 values: d * ((nibble | high << 4) - 16).
void DequantQ5_0(const void* src, float* dst, int64_t nb) {
  const auto* blocks = static_cast<const BlockQ5_0*>(src);
  for (int64_t i = 0; i < nb; ++i, dst += kQk) {
    const BlockQ5_0& b = blocks[i];
    const float d = Half(b.d);
    const uint32_t qh = LoadHighBits(b.qh);
    for (int j = 0; j < kQk / 2; ++j) {
      const int h0 = static_cast<int>((qh >> j) & 1u) << 4;
      const int h1 = static_cast<int>((qh >> (j + kQk / 2)) & 1u) << 4;
      dst[j] = static_cast<float>(((b.qs[j] & 0xF) | h0) - 16) * d;
      dst[j + kQk / 2] = static_cast<float>(((b.qs[j] >> 4) | h1) - 16) * d;
    }
  }
}

// 24 B -> 32 values: d * (nibble | high << 4) + m.
void DequantQ5_1(const void* src, float* dst, int64_t nb) {
  const auto* blocks = static_cast<const BlockQ5_1*>(src);
  for (int64_t i = 0; i < nb; ++i, dst += kQk) {
    const BlockQ5_1& b = blocks[i];
    const float d = Half(b.d);
    const float m = Half(b.m);
    const uint32_t qh = LoadHighBits(b.qh);
    for (int j = 0; j < kQk / 2; ++j) {
      const int h0 = static_cast<int>((qh >> j) & 1u) << 4;
      const int h1 = static_cast<int>((qh >> (j + kQk / 2)) & 1u) << 4;
      dst[j] = static_cast<float>((b.qs[j] & 0xF) | h0) * d + m;
      dst[j + kQk / 2] = static_cast<float>((b.qs[j] >> 4) | h1) * d + m;
    }
  }
}

// 34 B -> 32 values: d * q.
void DequantQ8_0(const void* src, float* dst, int64_t nb) {
  const auto* blocks = static_cast<const BlockQ8_0*>(src);
  for (int64_t i = 0; i < nb; ++i, dst += kQk) {
    const BlockQ8_0& b = blocks[i];
    const float d = Half(b.d);
    for (int j = 0; j < kQk; ++j) dst[j] = static_cast<float>(b.qs[j]) * d;
  }
}

}  // namespace moesplit::quant::internal
