// Reference quantization of Q2_K and Q3_K (ggml's quantize_row_q2_K_ref / q3_K_ref arithmetic).
//
// Q2_K (affine, 16-value sub-blocks, levels 0..3): FitAffineQuants with weights |x| minimizing
// the weighted absolute error; scales and mins quantized to 4 bits against max / 15.
// Q3_K (symmetric, 16-value sub-blocks, levels -4..3): FitSymmetricQuantsIterative; the signed
// scales quantized to 6 bits (biased by 32) against d = -max_scale / 32.
// Both then re-quantize every value against the scale it will be decoded with.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "cpu_kernels/quant/blocks.h"
#include "cpu_kernels/quant/kquant_search.h"
#include "cpu_kernels/quant/quant_internal.h"
#include "cpu_kernels/quant/quant_math.h"

namespace moesplit::quant::internal {
namespace {

// Quantizes the 16 float (scale, min) fits to 4 bits each and stores them with d, dmin in `b`.
void StoreQ2KScales(const float* scales, const float* mins, BlockQ2_K* b) {
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < 16; ++j) {
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  std::memset(b->scales, 0, sizeof(b->scales));
  b->d = ToHalf(0.0f);
  b->dmin = ToHalf(0.0f);
  if (max_scale > 0.0f) {
    const float iscale = 15.0f / max_scale;
    for (int j = 0; j < 16; ++j)
      b->scales[j] = static_cast<uint8_t>(NearestInt(iscale * scales[j]));
    b->d = ToHalf(max_scale / 15.0f);
  }
  if (max_min > 0.0f) {
    const float iscale = 15.0f / max_min;
    for (int j = 0; j < 16; ++j) {
      b->scales[j] |= static_cast<uint8_t>(NearestInt(iscale * mins[j]) << 4);
    }
    b->dmin = ToHalf(max_min / 15.0f);
  }
}

void QuantizeQ2KBlock(const float* x, BlockQ2_K* b) {
  const AffineSearch search{3, -0.5f, 0.1f, 15, true};
  uint8_t L[kQkK];
  uint8_t laux[16];
  float weights[16];
  float scales[16], mins[16];
  for (int j = 0; j < 16; ++j) {
    for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
    scales[j] = FitAffineQuants(16, x + 16 * j, weights, search, L + 16 * j, &mins[j], laux);
  }
  StoreQ2KScales(scales, mins, b);
  for (int j = 0; j < 16; ++j) {
    const float d = Half(b->d) * static_cast<float>(b->scales[j] & 0xF);
    if (d == 0.0f) continue;
    const float dm = Half(b->dmin) * static_cast<float>(b->scales[j] >> 4);
    for (int l = 0; l < 16; ++l) {
      const int q = NearestInt((x[16 * j + l] + dm) / d);
      L[16 * j + l] = static_cast<uint8_t>(std::clamp(q, 0, 3));
    }
  }
  Pack2Bit(L, b->qs);
}

// Packs 16 biased 6-bit scales (layout in BlockQ3_K).
void PackScalesQ3K(const int* ls, uint8_t* q) {
  std::memset(q, 0, kKScaleBytes);
  for (int j = 0; j < 16; ++j) {
    q[j % 8] |= static_cast<uint8_t>((ls[j] & 0xF) << (j < 8 ? 0 : 4));
    q[8 + j % 4] |= static_cast<uint8_t>((ls[j] >> 4) << (2 * (j / 4)));
  }
}

void QuantizeQ3KBlock(const float* x, BlockQ3_K* b) {
  int8_t L[kQkK];
  float scales[16];
  float max_scale = 0.0f, amax = 0.0f;
  for (int j = 0; j < 16; ++j) {
    scales[j] = FitSymmetricQuantsIterative(16, 4, x + 16 * j, L + 16 * j);
    if (std::fabs(scales[j]) > amax) {
      amax = std::fabs(scales[j]);
      max_scale = scales[j];
    }
  }
  int ls[16] = {};
  b->d = ToHalf(0.0f);
  if (max_scale != 0.0f) {
    const float iscale = -32.0f / max_scale;
    for (int j = 0; j < 16; ++j) ls[j] = std::clamp(NearestInt(iscale * scales[j]), -32, 31) + 32;
    b->d = ToHalf(1.0f / iscale);
  }
  PackScalesQ3K(ls, b->scales);
  for (int j = 0; j < 16; ++j) {
    const float d = Half(b->d) * static_cast<float>(UnpackScaleQ3K(j, b->scales) - 32);
    if (d == 0.0f) continue;
    for (int l = 0; l < 16; ++l) {
      const int q = std::clamp(NearestInt(x[16 * j + l] / d), -4, 3);
      L[16 * j + l] = static_cast<int8_t>(q + 4);
    }
  }
  // Bit 2 of value v goes to hmask[v % 32] bit v / 32; qs keeps the low 2 bits.
  std::memset(b->hmask, 0, sizeof(b->hmask));
  uint8_t low[kQkK];
  for (int v = 0; v < kQkK; ++v) {
    if (L[v] > 3) b->hmask[v % 32] |= static_cast<uint8_t>(1u << (v / 32));
    low[v] = static_cast<uint8_t>(L[v] & 3);
  }
  Pack2Bit(low, b->qs);
}

}  // namespace

// 256 values -> 84 B (2.625 bpw).
void QuantQ2_K(const float* src, void* dst, int64_t nb) {
  auto* blocks = static_cast<BlockQ2_K*>(dst);
  for (int64_t i = 0; i < nb; ++i, src += kQkK) QuantizeQ2KBlock(src, &blocks[i]);
}

// 256 values -> 110 B (3.4375 bpw).
void QuantQ3_K(const float* src, void* dst, int64_t nb) {
  auto* blocks = static_cast<BlockQ3_K*>(dst);
  for (int64_t i = 0; i < nb; ++i, src += kQkK) QuantizeQ3KBlock(src, &blocks[i]);
}

}  // namespace moesplit::quant::internal
