#include "cpu_kernels/ops/ops.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace moesplit::ops {

void RmsNorm(const float* x, const float* w, int64_t n, float eps, float* y) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float scale = 1.0f / std::sqrt(static_cast<float>(sum / static_cast<double>(n)) + eps);
  if (w == nullptr) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale * w[i];
  }
}

void Softmax(float* x, int64_t n) {
  float max = -INFINITY;
  for (int64_t i = 0; i < n; ++i) max = std::max(max, x[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);  // exp(-inf) = 0 for masked entries
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void SwiGluInPlace(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) gate[i] = Silu(gate[i]) * up[i];
}

namespace {
float CorrDim(const RopeParams& p, float beta) {
  return static_cast<float>(p.n_dims) *
         std::log(static_cast<float>(p.n_ctx_orig) / (beta * 2.0f * std::numbers::pi_v<float>)) /
         (2.0f * std::log(p.freq_base));
}
}  // namespace

void YarnCorrDims(const RopeParams& p, float* low, float* high) {
  *low = std::max(0.0f, std::floor(CorrDim(p, p.beta_fast)));
  *high = std::min(static_cast<float>(p.n_dims - 1), std::ceil(CorrDim(p, p.beta_slow)));
}

void RopeCosSin(const RopeParams& p, int64_t pos, float* cos_sin) {
  float low = 0.0f, high = 0.0f;
  if (p.ext_factor != 0.0f) YarnCorrDims(p, &low, &high);
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_dims));
  float mscale = p.attn_factor;
  if (p.ext_factor != 0.0f) mscale *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
  // theta_i = pos * theta_scale^i, built by repeated multiplication as ggml does.
  float theta_extrap = static_cast<float>(pos);
  for (int i = 0; i < p.n_dims / 2; ++i) {
    const float theta_interp = p.freq_scale * theta_extrap;
    float theta = theta_interp;
    if (p.ext_factor != 0.0f) {
      const float y = (static_cast<float>(i) - low) / std::max(0.001f, high - low);
      const float ramp_mix = (1.0f - std::min(1.0f, std::max(0.0f, y))) * p.ext_factor;
      theta = theta_interp * (1.0f - ramp_mix) + theta_extrap * ramp_mix;
    }
    cos_sin[2 * i] = std::cos(theta) * mscale;
    cos_sin[2 * i + 1] = std::sin(theta) * mscale;
    theta_extrap *= theta_scale;
  }
}

void RopeApply(const RopeParams& p, const float* cos_sin, float* x) {
  const int half = p.n_dims / 2;
  for (int i = 0; i < half; ++i) {
    // kNormal rotates (x[2i], x[2i+1]); kNeox rotates (x[i], x[i + n_dims/2]).
    float* a = p.style == RopeStyle::kNormal ? x + 2 * i : x + i;
    float* b = p.style == RopeStyle::kNormal ? a + 1 : a + half;
    const float c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
    const float x0 = *a, x1 = *b;
    *a = x0 * c - x1 * s;
    *b = x0 * s + x1 * c;
  }
}

}  // namespace moesplit::ops
