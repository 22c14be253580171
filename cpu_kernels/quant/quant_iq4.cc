// Reference dequantization and quantization of the non-linear 4-bit types IQ4_NL (32 values in
// 18 bytes) and IQ4_XS (256 values in 136 bytes), bit-exact with ggml (quant_oracle_test.cc).
//
// Dequantization is one float multiply per value, d * kIq4Values[q] (IQ4_XS: (d * (s_j - 32))
// * kIq4Values[q]), the same operands in the same order as ggml's to_float.
//
// Quantization follows llama.cpp's no-importance-matrix path (ggml_quantize_chunk without an
// imatrix, i.e. quantize_iq4_nl / quantize_iq4_xs with quant_weights == NULL): weights x^2, the
// scale searched over 2 * 7 + 1 candidates per 32-value block. The same float operations in the
// same order (this library is built with -ffp-contract=off), so the bytes are ggml's.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "cpu_kernels/quant/blocks.h"
#include "cpu_kernels/quant/blocks_iq.h"
#include "cpu_kernels/quant/quant_internal.h"
#include "cpu_kernels/quant/quant_math.h"

namespace moesplit::quant::internal {
namespace {

constexpr int kIq4Tries = 7;  // llama.cpp's ntry without an importance matrix
constexpr float kGroupMaxEps = 1e-15f;

// The index of the level nearest to x (the lower one on a tie), by bisection over the sorted
// table; out-of-range x clamps to the end levels.
int NearestLevel(float x) {
  const int8_t* v = kIq4Values;
  if (x <= v[0]) return 0;
  if (x >= v[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (x < v[mid]) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return x - v[hi - 1] < v[hi] - x ? hi - 1 : hi;
}

// sum w q x and sum w q^2 over a 32-value block quantized with inverse scale id.
void WeightedSums(const float* x, const float* w, float id, float* sumqx, float* sumq2,
                  uint8_t* L) {
  float qx = 0.0f, q2 = 0.0f;
  for (int j = 0; j < kQk; ++j) {
    const int l = NearestLevel(id * x[j]);
    if (L != nullptr) L[j] = static_cast<uint8_t>(l);
    const float q = kIq4Values[l];
    qx += w[j] * q * x[j];
    q2 += w[j] * q * q;
  }
  *sumqx = qx;
  *sumq2 = q2;
}

// The best scale of one 32-value block (0 for an all-zero block): the least-squares scale of
// the first guess (the largest |x| on the -127 level), then of the 15 inverse scales
// (t + kIq4Values[0]) / max, t in [-7, 7], keeping the one with the largest sumqx^2 / sumq2.
float BlockScale(const float* x) {
  float w[kQk];
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kQk; ++j) {
    w[j] = x[j] * x[j];
    const float ax = std::fabs(x[j]);
    if (ax > amax) {
      amax = ax;
      max = x[j];
    }
  }
  if (amax < kGroupMaxEps) return 0.0f;
  float d = -max / kIq4Values[0];
  float sumqx = 0.0f, sumq2 = 0.0f;
  WeightedSums(x, w, 1 / d, &sumqx, &sumq2, nullptr);
  d = sumq2 > 0 ? sumqx / sumq2 : 0.0f;
  float best = d * sumqx;
  for (int t = -kIq4Tries; t <= kIq4Tries; ++t) {
    const float id = (t + kIq4Values[0]) / max;
    WeightedSums(x, w, id, &sumqx, &sumq2, nullptr);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

// 32 indices -> 16 bytes: value l in the low nibble of byte l, value l + 16 in its high nibble.
void PackIndices(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < kQk / 2; ++j) qs[j] = static_cast<uint8_t>(L[j] | L[j + kQk / 2] << 4);
}

}  // namespace

// 18 B -> 32 values: d * kIq4Values[nibble].
void DequantIQ4_NL(const void* src, float* dst, int64_t nb) {
  const auto* blocks = static_cast<const BlockIQ4_NL*>(src);
  for (int64_t i = 0; i < nb; ++i, dst += kQk) {
    const BlockIQ4_NL& b = blocks[i];
    const float d = Half(b.d);
    for (int j = 0; j < kQk / 2; ++j) {
      dst[j] = d * kIq4Values[b.qs[j] & 0xF];
      dst[j + kQk / 2] = d * kIq4Values[b.qs[j] >> 4];
    }
  }
}

// 136 B -> 256 values: (d * (s_j - 32)) * kIq4Values[nibble] in sub-block j.
void DequantIQ4_XS(const void* src, float* dst, int64_t nb) {
  const auto* blocks = static_cast<const BlockIQ4_XS*>(src);
  for (int64_t i = 0; i < nb; ++i) {
    const BlockIQ4_XS& b = blocks[i];
    const float d = Half(b.d);
    for (int j = 0; j < kQkK / kQk; ++j, dst += kQk) {
      const int ls = ((b.scales_l[j / 2] >> 4 * (j % 2)) & 0xF) | ((b.scales_h >> 2 * j) & 3) << 4;
      const float dl = d * static_cast<float>(ls - 32);
      const uint8_t* qs = b.qs + 16 * j;
      for (int l = 0; l < kQk / 2; ++l) {
        dst[l] = dl * kIq4Values[qs[l] & 0xF];
        dst[l + kQk / 2] = dl * kIq4Values[qs[l] >> 4];
      }
    }
  }
}

// One scale per 32 values, stored as f16 (the f32 scale picks the indices, as in ggml). An
// all-zero block has d = 0 and every index at the level nearest 0 (index 8, value 1).
void QuantIQ4_NL(const float* src, void* dst, int64_t nb) {
  auto* blocks = static_cast<BlockIQ4_NL*>(dst);
  for (int64_t i = 0; i < nb; ++i, src += kQk) {
    BlockIQ4_NL& b = blocks[i];
    const float d = BlockScale(src);
    b.d = ToHalf(d);
    const float id = d != 0.0f ? 1 / d : 0.0f;
    uint8_t L[kQk];
    for (int j = 0; j < kQk; ++j) L[j] = static_cast<uint8_t>(NearestLevel(id * src[j]));
    PackIndices(L, b.qs);
  }
}

// MXFP4 (ggml's quantize_row_mxfp4_ref): e = floor(log2 amax) - 2 + 127, so the level scale
// 2^(e - 128) = 2^(floor(log2 amax) - 3) puts amax / scale in [8, 16): the largest magnitudes
// take the doubled levels 8 or 12 (anything above 12 clamps there). Each value takes the level
// of least |level x scale - x|, the first on ties (codes 0..15 in order: code 8, -0, never wins
// over 0). e is clamped to [0, 255] (ggml leaves amax outside 2^-125..2^128 undefined).
void QuantMXFP4(const float* src, void* dst, int64_t nb) {
  auto* blocks = static_cast<BlockMXFP4*>(dst);
  for (int64_t i = 0; i < nb; ++i, src += kQk) {
    BlockMXFP4& b = blocks[i];
    float amax = 0.0f;
    for (int j = 0; j < kQk; ++j) amax = std::max(amax, std::fabs(src[j]));
    const float e = amax > 0.0f ? std::floor(std::log2(amax)) - 2 + 127 : 0.0f;
    b.e = static_cast<uint8_t>(std::clamp(e, 0.0f, 255.0f));
    const float d = Mxfp4HalfScale(b.e);
    auto best = [d](float x) {
      int best_i = 0;
      float best_err = std::fabs(kMxfp4Values[0] * d - x);
      for (int k = 1; k < 16; ++k) {
        const float err = std::fabs(kMxfp4Values[k] * d - x);
        if (err < best_err) {
          best_i = k;
          best_err = err;
        }
      }
      return static_cast<uint8_t>(best_i);
    };
    for (int j = 0; j < kQk / 2; ++j) {
      b.qs[j] = static_cast<uint8_t>(best(src[j]) | best(src[j + kQk / 2]) << 4);
    }
  }
}

// Per 256 values: the 8 block scales as above; the super-scale d = -(the scale of largest
// magnitude) / 32 stored as f16 (the f32 value is used for the sub-block scales, as ggml does);
// s_j = clamp(round(scale_j / d), -32, 31) + 32; indices re-found with 1 / (d * (s_j - 32)).
void QuantIQ4_XS(const float* src, void* dst, int64_t nb) {
  auto* blocks = static_cast<BlockIQ4_XS*>(dst);
  for (int64_t i = 0; i < nb; ++i, src += kQkK) {
    BlockIQ4_XS& b = blocks[i];
    float scales[kQkK / kQk];
    float amax_scale = 0.0f, max_scale = 0.0f;
    for (int j = 0; j < kQkK / kQk; ++j) {
      scales[j] = BlockScale(src + kQk * j);
      if (std::fabs(scales[j]) > amax_scale) {
        amax_scale = std::fabs(scales[j]);
        max_scale = scales[j];
      }
    }
    const float d = -max_scale / 32;
    b.d = ToHalf(d);
    const float id = d != 0.0f ? 1 / d : 0.0f;
    b.scales_h = 0;
    std::memset(b.scales_l, 0, sizeof(b.scales_l));
    for (int j = 0; j < kQkK / kQk; ++j) {
      int l = NearestInt(id * scales[j]);
      l = l < -32 ? -32 : (l > 31 ? 31 : l);
      const float dl = d * static_cast<float>(l);
      const float idl = dl != 0.0f ? 1 / dl : 0.0f;
      uint8_t L[kQk];
      for (int k = 0; k < kQk; ++k)
        L[k] = static_cast<uint8_t>(NearestLevel(idl * src[kQk * j + k]));
      PackIndices(L, b.qs + 16 * j);
      l += 32;
      b.scales_l[j / 2] |= static_cast<uint8_t>((l & 0xF) << 4 * (j % 2));
      b.scales_h |= static_cast<uint16_t>((l >> 4) << 2 * j);
    }
  }
}

}  // namespace moesplit::quant::internal
