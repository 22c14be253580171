// Reference quantization of the 32-value block formats, following ggml's quantize_row_*_ref
// arithmetic so that the bytes match ggml's (the scale d is computed in f32 and only rounded to
// f16 when stored; the quants use the unrounded 1/d).
//
// Symmetric types (Q4_0, Q5_0): d = v / -2^(b-1) where v is the value of largest magnitude, so v
// itself maps to the extra negative level (-8 or -16) and the others to
// trunc(x / d + 2^(b-1) + 0.5), clamped to the top level.
// Offset types (Q4_1, Q5_1): d = (max - min) / (2^b - 1), m = min, q = trunc((x - min) / d + 0.5).
// Q8_0: d = amax / 127, q = round-half-away(x / d).
#include <algorithm>
#include <cfloat>
#include <cmath>

#include "cpu_kernels/quant/blocks.h"
#include "cpu_kernels/quant/quant_internal.h"
#include "cpu_kernels/quant/quant_math.h"

namespace moesplit::quant::internal {
namespace {

struct MinMax {
  float min;
  float max;
};

MinMax BlockMinMax(const float* x) {
  MinMax r{FLT_MAX, -FLT_MAX};
  for (int j = 0; j < kQk; ++j) {
    if (x[j] < r.min) r.min = x[j];
    if (x[j] > r.max) r.max = x[j];
  }
  return r;
}

// 1 / d, or 0 for an all-zero block (so every quant lands on the zero level, no 0/0).
float InverseOrZero(float d) { return d != 0.0f ? 1.0f / d : 0.0f; }

// Truncating float -> int like ggml's (int8_t) casts. `v` is in [0, 32] for finite input; the
// clamp and the NaN test only keep garbage input (inf/NaN values) from being undefined behaviour.
int Trunc(float v) { return std::isnan(v) ? 0 : static_cast<int>(std::clamp(v, -128.0f, 255.0f)); }

// Splits 32 5-bit quants into the Q5 nibbles and the 32-bit high-bit word (little-endian).
void Pack5Bit(const int* q, uint8_t* qs, uint8_t* qh) {
  uint32_t high = 0;
  for (int j = 0; j < kQk / 2; ++j) {
    qs[j] = static_cast<uint8_t>((q[j] & 0xF) | ((q[j + kQk / 2] & 0xF) << 4));
    high |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
    high |= static_cast<uint32_t>((q[j + kQk / 2] >> 4) & 1) << (j + kQk / 2);
  }
  for (int k = 0; k < 4; ++k) qh[k] = static_cast<uint8_t>(high >> (8 * k));
}

}  // namespace

// 32 values -> 18 B (4.5 bpw).
void QuantQ4_0(const float* src, void* dst, int64_t nb) {
  auto* blocks = static_cast<BlockQ4_0*>(dst);
  for (int64_t i = 0; i < nb; ++i, src += kQk) {
    const float d = SignedAbsMax(src, kQk) / -8.0f;
    const float id = InverseOrZero(d);
    blocks[i].d = ToHalf(d);
    for (int j = 0; j < kQk / 2; ++j) {
      const int q0 = std::min(15, Trunc(src[j] * id + 8.5f));
      const int q1 = std::min(15, Trunc(src[j + kQk / 2] * id + 8.5f));
      blocks[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

// 32 values -> 20 B (5 bpw).
void QuantQ4_1(const float* src, void* dst, int64_t nb) {
  auto* blocks = static_cast<BlockQ4_1*>(dst);
  for (int64_t i = 0; i < nb; ++i, src += kQk) {
    const MinMax mm = BlockMinMax(src);
    const float d = (mm.max - mm.min) / 15.0f;
    const float id = InverseOrZero(d);
    blocks[i].d = ToHalf(d);
    blocks[i].m = ToHalf(mm.min);
    for (int j = 0; j < kQk / 2; ++j) {
      const int q0 = std::min(15, Trunc((src[j] - mm.min) * id + 0.5f));
      const int q1 = std::min(15, Trunc((src[j + kQk / 2] - mm.min) * id + 0.5f));
      blocks[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

// 32 values -> 22 B (5.5 bpw).
void QuantQ5_0(const float* src, void* dst, int64_t nb) {
  auto* blocks = static_cast<BlockQ5_0*>(dst);
  for (int64_t i = 0; i < nb; ++i, src += kQk) {
    const float d = SignedAbsMax(src, kQk) / -16.0f;
    const float id = InverseOrZero(d);
    blocks[i].d = ToHalf(d);
    int q[kQk];
    for (int j = 0; j < kQk; ++j) q[j] = std::min(31, Trunc(src[j] * id + 16.5f));
    Pack5Bit(q, blocks[i].qs, blocks[i].qh);
  }
}

// 32 values -> 24 B (6 bpw). No clamp to 31, as in ggml: only bits 0-4 are stored.
void QuantQ5_1(const float* src, void* dst, int64_t nb) {
  auto* blocks = static_cast<BlockQ5_1*>(dst);
  for (int64_t i = 0; i < nb; ++i, src += kQk) {
    const MinMax mm = BlockMinMax(src);
    const float d = (mm.max - mm.min) / 31.0f;
    const float id = InverseOrZero(d);
    blocks[i].d = ToHalf(d);
    blocks[i].m = ToHalf(mm.min);
    int q[kQk];
    for (int j = 0; j < kQk; ++j) q[j] = Trunc((src[j] - mm.min) * id + 0.5f);
    Pack5Bit(q, blocks[i].qs, blocks[i].qh);
  }
}

// 32 values -> 34 B (8.5 bpw).
void QuantQ8_0(const float* src, void* dst, int64_t nb) {
  auto* blocks = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < nb; ++i, src += kQk) {
    float amax = 0.0f;
    for (int j = 0; j < kQk; ++j) amax = std::max(amax, std::fabs(src[j]));
    const float d = amax / 127.0f;
    const float id = InverseOrZero(d);
    blocks[i].d = ToHalf(d);
    for (int j = 0; j < kQk; ++j) {
      // round() is half away from zero (ggml's roundf); |x * id| <= 127 for finite input.
      const float r = std::round(src[j] * id);
      blocks[i].qs[j] = static_cast<int8_t>(std::isnan(r) ? 0.0f : std::clamp(r, -127.0f, 127.0f));
    }
  }
}

}  // namespace moesplit::quant::internal
