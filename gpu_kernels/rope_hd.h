// RoPE with YaRN, the arithmetic shared by the GPU kernel (gpu::Rope in gpu_kernels/ops.cu) and
// the host tests. It follows ops::YarnCorrDims / RopeCosSin / RopeApply (cpu_kernels/ops/ops.h)
// operation by operation, in the same float precision and order:
//   theta_scale = freq_base^(-2 / n_dims)
//   theta_extrap(i) = float(pos) * theta_scale * ... * theta_scale   (i multiplications, in order)
//   theta_interp(i) = freq_scale * theta_extrap(i)
//   YaRN: y = (i - low) / max(0.001, high - low), mix = (1 - clamp(y, 0, 1)) * ext_factor,
//         theta = theta_interp * (1 - mix) + theta_extrap * mix;   else theta = theta_interp
//   cos_i = cos(theta) * mscale, sin_i = sin(theta) * mscale
//   rotate (a, b) -> (a cos - b sin, a sin + b cos)
// On the device every product that feeds a sum is rounded on its own (__fmul_rn / __fadd_rn: no
// fused multiply-add), so theta is bit-identical to the CPU's; only cosf / sinf (CUDA: <= 2 ulp)
// and the rotation's inputs differ. On the host (plain C++, no FMA contraction in this build) the
// functions give the reference's bits exactly.
#pragma once

#include <cmath>
#include <cstdint>

#include "cpu_kernels/ops/ops.h"  // ops::RopeParams / RopeStyle: a header-only struct
#include "gpu_kernels/hd.h"

namespace moesplit::gpu {

// The per-launch constants of one ops::RopeParams (computed once, on the host, by RopeConstsFor).
struct RopeConsts {
  float theta_scale = 1.0f;  // freq_base^(-2 / n_dims)
  float corr_low = 0.0f;     // YaRN ramp [corr_low, corr_high] in pair units (0, 0 without YaRN)
  float corr_high = 0.0f;
  float mscale = 1.0f;  // attn_factor, times 1 + 0.1 ln(1 / freq_scale) with YaRN
};

// std::max / std::min exactly ((a < b) ? b : a and (b < a) ? b : a), NaN behaviour included.
MOESPLIT_HD float RopeMax(float a, float b) { return (a < b) ? b : a; }
MOESPLIT_HD float RopeMin(float a, float b) { return (b < a) ? b : a; }

// corr(beta) = n_dims * ln(n_ctx_orig / (beta * 2 pi)) / (2 ln freq_base)   (ggml's corr dim)
MOESPLIT_HD float RopeCorrDim(const ops::RopeParams& p, float beta) {
  constexpr float kPi = 3.14159265358979323846f;  // == std::numbers::pi_v<float>
  const float num = HdMul(static_cast<float>(p.n_dims), logf(static_cast<float>(p.n_ctx_orig) /
                                                               HdMul(HdMul(beta, 2.0f), kPi)));
  return num / HdMul(2.0f, logf(p.freq_base));
}

// low = max(0, floor(corr(beta_fast))), high = min(n_dims - 1, ceil(corr(beta_slow))).
MOESPLIT_HD void RopeYarnCorrDims(const ops::RopeParams& p, float* low, float* high) {
  *low = RopeMax(0.0f, floorf(RopeCorrDim(p, p.beta_fast)));
  *high = RopeMin(static_cast<float>(p.n_dims - 1), ceilf(RopeCorrDim(p, p.beta_slow)));
}

MOESPLIT_HD RopeConsts RopeConstsFor(const ops::RopeParams& p) {
  RopeConsts k;
  if (p.ext_factor != 0.0f) RopeYarnCorrDims(p, &k.corr_low, &k.corr_high);
  k.theta_scale = powf(p.freq_base, -2.0f / static_cast<float>(p.n_dims));
  k.mscale = p.attn_factor;
  if (p.ext_factor != 0.0f) {
    k.mscale = HdMul(k.mscale, HdAdd(1.0f, HdMul(0.1f, logf(1.0f / p.freq_scale))));
  }
  return k;
}

// The angle of pair i (0 <= i < n_dims / 2) at position pos.
MOESPLIT_HD float RopeTheta(const ops::RopeParams& p, const RopeConsts& k, int64_t pos, int i) {
  float theta_extrap = static_cast<float>(pos);
  for (int j = 0; j < i; ++j) theta_extrap = HdMul(theta_extrap, k.theta_scale);
  const float theta_interp = HdMul(p.freq_scale, theta_extrap);
  if (p.ext_factor == 0.0f) return theta_interp;
  const float y = HdSub(static_cast<float>(i), k.corr_low) /
                  RopeMax(0.001f, HdSub(k.corr_high, k.corr_low));
  const float ramp_mix = HdMul(HdSub(1.0f, RopeMin(1.0f, RopeMax(0.0f, y))), p.ext_factor);
  return HdAdd(HdMul(theta_interp, HdSub(1.0f, ramp_mix)), HdMul(theta_extrap, ramp_mix));
}

// cos(theta_i) * mscale and sin(theta_i) * mscale.
MOESPLIT_HD void RopeCosSinAt(const ops::RopeParams& p, const RopeConsts& k, int64_t pos, int i,
                              float* c, float* s) {
  const float theta = RopeTheta(p, k, pos, i);
  *c = HdMul(cosf(theta), k.mscale);
  *s = HdMul(sinf(theta), k.mscale);
}

// The offsets of pair i inside a head: kNormal (2i, 2i + 1), kNeox (i, i + n_dims / 2).
MOESPLIT_HD void RopePair(const ops::RopeParams& p, int i, int* a, int* b) {
  if (p.style == ops::RopeStyle::kNormal) {
    *a = 2 * i;
    *b = 2 * i + 1;
  } else {
    *a = i;
    *b = i + p.n_dims / 2;
  }
}

// (x[a], x[b]) <- (x[a] c - x[b] s, x[a] s + x[b] c).
MOESPLIT_HD void RopeRotate(float c, float s, float* xa, float* xb) {
  const float x0 = *xa, x1 = *xb;
  *xa = HdSub(HdMul(x0, c), HdMul(x1, s));
  *xb = HdAdd(HdMul(x0, s), HdMul(x1, c));
}

// Whole-head forms with ops::RopeCosSin / RopeApply's interfaces (cos_sin: [n_dims], pairs
// (cos, sin); x: one head, its first n_dims values rotated in place).
MOESPLIT_HD void RopeCosSinTable(const ops::RopeParams& p, int64_t pos, float* cos_sin) {
  const RopeConsts k = RopeConstsFor(p);
  for (int i = 0; i < p.n_dims / 2; ++i) {
    RopeCosSinAt(p, k, pos, i, &cos_sin[2 * i], &cos_sin[2 * i + 1]);
  }
}
MOESPLIT_HD void RopeApplyTable(const ops::RopeParams& p, const float* cos_sin, float* x) {
  for (int i = 0; i < p.n_dims / 2; ++i) {
    int a = 0, b = 0;
    RopePair(p, i, &a, &b);
    RopeRotate(cos_sin[2 * i], cos_sin[2 * i + 1], &x[a], &x[b]);
  }
}

}  // namespace moesplit::gpu
