// Reference quantization of Q4_K, Q5_K, Q6_K and Q8_K, following ggml's quantize_row_*_ref
// (no importance matrix) so the bytes match ggml's.
//
// Q4_K / Q5_K (two-level affine): each 32-value sub-block j gets a float (scale_j, min_j) from
// FitAffineQuants with weights |x| + rms(sub-block); the 8 scales and 8 mins are then quantized
// to 6 bits against d = max scale / 63 and dmin = max min / 63, and finally every value is
// re-quantized against the stored (f16 d * s_j, f16 dmin * m_j) it will be decoded with.
// Q6_K (two-level symmetric): 16-value sub-blocks fitted by FitSymmetricQuants (levels -32..31),
// scales quantized to int8 against d = -max_scale / 128, values re-quantized likewise.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "cpu_kernels/quant/blocks.h"
#include "cpu_kernels/quant/kquant_search.h"
#include "cpu_kernels/quant/quant_internal.h"
#include "cpu_kernels/quant/quant_math.h"

namespace moesplit::quant::internal {
namespace {

constexpr float kGroupMaxEps = 1e-15f;

// The parts of a Q4_K / Q5_K block that do not depend on the quant width.
struct ScaleMinHeader {
  uint16_t d;                    // f16 super-scale of the scales
  uint16_t dmin;                 // f16 super-scale of the mins
  uint8_t scales[kKScaleBytes];  // [12] packed 6-bit (scale, min) x 8
};

// Fits one 256-value super-block with levels [0, nmax]; fills the header and L[256].
void QuantizeScaleMinBlock(const float* x, const AffineSearch& search, ScaleMinHeader* h,
                           uint8_t* L) {
  float scales[8], mins[8];
  float weights[32];
  uint8_t laux[32];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0.0f;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / 32.0f);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
    scales[j] = FitAffineQuants(32, xs, weights, search, L + 32 * j, &mins[j], laux);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
  uint8_t ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    ls[j] = static_cast<uint8_t>(std::min(63, NearestInt(inv_scale * scales[j])));
    lm[j] = static_cast<uint8_t>(std::min(63, NearestInt(inv_min * mins[j])));
  }
  PackScaleMinK4(ls, lm, h->scales);
  h->d = ToHalf(max_scale / 63.0f);
  h->dmin = ToHalf(max_min / 63.0f);

  // Re-quantize against the decoded scales. A sub-block whose scale decodes to 0 keeps the
  // levels of its float fit (they decode to -dmin * m_j whatever they are).
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    UnpackScaleMinK4(j, h->scales, &sc, &m);
    const float d = Half(h->d) * static_cast<float>(sc);
    if (d == 0.0f) continue;
    const float dm = Half(h->dmin) * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) {
      const int q = NearestInt((x[32 * j + l] + dm) / d);
      L[32 * j + l] = static_cast<uint8_t>(std::clamp(q, 0, search.nmax));
    }
  }
}

void QuantizeQ6KBlock(const float* x, BlockQ6_K* b) {
  int8_t L[kQkK];
  float scales[16];
  float max_scale = 0.0f, max_abs_scale = 0.0f;
  for (int j = 0; j < 16; ++j) {
    scales[j] = FitSymmetricQuants(16, 32, x + 16 * j, L + 16 * j);
    if (std::fabs(scales[j]) > max_abs_scale) {
      max_abs_scale = std::fabs(scales[j]);
      max_scale = scales[j];
    }
  }
  if (max_abs_scale < kGroupMaxEps) {  // all (near) zero: every field 0
    std::memset(b, 0, sizeof(*b));
    return;
  }
  // Sign chosen so the largest scale maps to -128 (int8's extra level).
  const float iscale = -128.0f / max_scale;
  b->d = ToHalf(1.0f / iscale);
  for (int j = 0; j < 16; ++j) {
    b->scales[j] = static_cast<int8_t>(std::min(127, NearestInt(iscale * scales[j])));
  }
  for (int j = 0; j < 16; ++j) {
    const float d = Half(b->d) * static_cast<float>(b->scales[j]);
    if (d == 0.0f) continue;
    for (int l = 0; l < 16; ++l) {
      const int q = std::clamp(NearestInt(x[16 * j + l] / d), -32, 31);
      L[16 * j + l] = static_cast<int8_t>(q + 32);
    }
  }
  PackQ6KLevels(reinterpret_cast<const uint8_t*>(L), b);  // L: levels 0..63
}

}  // namespace

// 256 values -> 144 B (4.5 bpw).
void QuantQ4_K(const float* src, void* dst, int64_t nb) {
  auto* blocks = static_cast<BlockQ4_K*>(dst);
  const AffineSearch search{15, -1.0f, 0.1f, 20, false};
  uint8_t L[kQkK];
  for (int64_t i = 0; i < nb; ++i, src += kQkK) {
    ScaleMinHeader h;
    QuantizeScaleMinBlock(src, search, &h, L);
    BlockQ4_K& b = blocks[i];
    b.d = h.d;
    b.dmin = h.dmin;
    std::memcpy(b.scales, h.scales, kKScaleBytes);
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        b.qs[32 * c + l] = static_cast<uint8_t>(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
      }
    }
  }
}

// 256 values -> 176 B (5.5 bpw).
void QuantQ5_K(const float* src, void* dst, int64_t nb) {
  auto* blocks = static_cast<BlockQ5_K*>(dst);
  const AffineSearch search{31, -0.5f, 0.1f, 15, false};
  uint8_t L[kQkK];
  for (int64_t i = 0; i < nb; ++i, src += kQkK) {
    ScaleMinHeader h;
    QuantizeScaleMinBlock(src, search, &h, L);
    BlockQ5_K& b = blocks[i];
    b.d = h.d;
    b.dmin = h.dmin;
    std::memcpy(b.scales, h.scales, kKScaleBytes);
    std::memset(b.qh, 0, sizeof(b.qh));
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        const int lo = L[64 * c + l], hi = L[64 * c + 32 + l];
        b.qs[32 * c + l] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
        b.qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
      }
    }
  }
}

// 256 values -> 210 B (6.5625 bpw).
void QuantQ6_K(const float* src, void* dst, int64_t nb) {
  auto* blocks = static_cast<BlockQ6_K*>(dst);
  for (int64_t i = 0; i < nb; ++i, src += kQkK) QuantizeQ6KBlock(src, &blocks[i]);
}

// 256 values -> 292 B. d = -max / 127 (sign of the largest-magnitude value), q = round(x / d)
// capped at 127, bsums = sums of 16 quants.
void QuantQ8_K(const float* src, void* dst, int64_t nb) {
  auto* blocks = static_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < nb; ++i, src += kQkK) {
    BlockQ8_K& b = blocks[i];
    const float max = SignedAbsMax(src, kQkK);
    if (max == 0.0f) {
      std::memset(&b, 0, sizeof(b));
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < kQkK; ++j) {
      b.qs[j] = static_cast<int8_t>(std::min(127, NearestInt(iscale * src[j])));
    }
    for (int j = 0; j < kQkK / 16; ++j) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += b.qs[16 * j + l];
      b.bsums[j] = static_cast<int16_t>(sum);
    }
    b.d = 1.0f / iscale;
  }
}

}  // namespace moesplit::quant::internal
