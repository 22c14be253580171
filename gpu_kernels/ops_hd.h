// Per-element arithmetic of the GPU element-wise ops (gpu_kernels/ops.cu), shared with the host
// tests. Each follows the matching cpu_kernels/ops/ops.cc expression in the same precision and
// order; only the reductions around them (sum of squares, softmax max / sum) are reordered on
// the GPU, and expf is CUDA's (<= 2 ulp) there.
#pragma once

#include <cmath>
#include <cstdint>

#include "gpu_kernels/hd.h"

namespace moesplit::gpu {

// RMSNorm: scale = 1 / sqrt(float(sum_sq / n) + eps), sum_sq = sum of x^2 in double;
// y = x * scale * w (w == nullptr: x * scale).
MOESPLIT_HD float RmsNormScale(double sum_sq, int64_t n, float eps) {
  return 1.0f / sqrtf(static_cast<float>(sum_sq / static_cast<double>(n)) + eps);
}
MOESPLIT_HD float RmsNormApply(float x, float scale, const float* w, int64_t i) {
  return w == nullptr ? x * scale : x * scale * w[i];
}

// SwiGLU: silu(g) * u = g / (1 + exp(-g)) * u.
MOESPLIT_HD float SiluMul(float g, float u) { return g / (1.0f + expf(-g)) * u; }

// Softmax: e_i = exp(x_i - max), inv = float(1 / sum(e) in double), y_i = e_i * inv.
MOESPLIT_HD float SoftmaxExp(float x, float max) { return expf(x - max); }
MOESPLIT_HD float SoftmaxInv(double sum) { return static_cast<float>(1.0 / sum); }

}  // namespace moesplit::gpu
