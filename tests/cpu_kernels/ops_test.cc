// Reference ops against hand-computed values: RMSNorm, softmax, SiLU, RoPE pairs (normal and
// NEOX) at known angles, the YaRN correction range, ramp and magnitude.
#include "cpu_kernels/ops/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace moesplit::ops {
namespace {

TEST(OpsTest, RmsNorm) {
  const std::vector<float> x = {1, 2, 3, 4};
  const std::vector<float> w = {1, 0.5f, 2, -1};
  std::vector<float> y(4);
  RmsNorm(x.data(), w.data(), 4, 1e-6f, y.data());
  const float inv = 1.0f / std::sqrt(30.0f / 4 + 1e-6f);  // mean of squares 7.5
  EXPECT_NEAR(y[0], 1 * inv, 1e-6);
  EXPECT_NEAR(y[1], 2 * inv * 0.5f, 1e-6);
  EXPECT_NEAR(y[2], 3 * inv * 2, 1e-6);
  EXPECT_NEAR(y[3], -4 * inv, 1e-6);
  RmsNorm(x.data(), nullptr, 4, 1e-6f, y.data());
  EXPECT_NEAR(y[3], 4 * inv, 1e-6);
}

TEST(OpsTest, SoftmaxAndSilu) {
  std::vector<float> x = {0.0f, std::log(3.0f), -INFINITY};
  Softmax(x.data(), 3);
  EXPECT_NEAR(x[0], 0.25f, 1e-7);
  EXPECT_NEAR(x[1], 0.75f, 1e-7);
  EXPECT_EQ(x[2], 0.0f);
  EXPECT_NEAR(Silu(1.0f), 1.0f / (1.0f + std::exp(-1.0f)), 1e-7);
  EXPECT_NEAR(Silu(-2.0f), -2.0f / (1.0f + std::exp(2.0f)), 1e-7);
  std::vector<float> g = {1.0f, -2.0f}, u = {3.0f, 0.5f};
  SwiGluInPlace(g.data(), u.data(), 2);
  EXPECT_NEAR(g[0], Silu(1.0f) * 3.0f, 1e-6);
  EXPECT_NEAR(g[1], Silu(-2.0f) * 0.5f, 1e-6);
}

// Rotation of (a, b) by theta.
void Rot(float a, float b, float theta, float* ra, float* rb) {
  *ra = a * std::cos(theta) - b * std::sin(theta);
  *rb = a * std::sin(theta) + b * std::cos(theta);
}

TEST(OpsTest, RopeNormalAndNeoxPairs) {
  // n_dims 4, base 10000, position 3: theta_0 = 3, theta_1 = 3 * 10000^(-2/4) = 0.03.
  RopeParams p;
  p.n_dims = 4;
  p.freq_base = 10000.0f;
  std::vector<float> cs(4);
  RopeCosSin(p, 3, cs.data());
  EXPECT_NEAR(cs[0], std::cos(3.0f), 1e-6);
  EXPECT_NEAR(cs[1], std::sin(3.0f), 1e-6);
  EXPECT_NEAR(cs[2], std::cos(0.03f), 1e-6);
  EXPECT_NEAR(cs[3], std::sin(0.03f), 1e-6);
  float e[6];
  // Normal (deepseek2, llama): pairs (x0, x1), (x2, x3); dims past n_dims untouched.
  std::vector<float> x = {1, 2, 3, 4, 5, 6};
  RopeApply(p, cs.data(), x.data());
  Rot(1, 2, 3.0f, &e[0], &e[1]);
  Rot(3, 4, 0.03f, &e[2], &e[3]);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(x[i], e[i], 1e-5) << i;
  EXPECT_EQ(x[4], 5);
  EXPECT_EQ(x[5], 6);
  // NEOX (qwen3moe): pairs (x0, x2), (x1, x3).
  p.style = RopeStyle::kNeox;
  x = {1, 2, 3, 4};
  RopeApply(p, cs.data(), x.data());
  Rot(1, 3, 3.0f, &e[0], &e[2]);
  Rot(2, 4, 0.03f, &e[1], &e[3]);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(x[i], e[i], 1e-5) << i;
  // Position 0 is the identity.
  RopeCosSin(p, 0, cs.data());
  EXPECT_EQ(cs[0], 1.0f);
  EXPECT_EQ(cs[1], 0.0f);
}

// DeepSeek-V3 YaRN: 64 rope dims, base 10000, factor 40, original context 4096, beta 32 / 1.
RopeParams V3Yarn() {
  RopeParams p;
  p.n_dims = 64;
  p.freq_base = 10000.0f;
  p.freq_scale = 1.0f / 40.0f;
  p.ext_factor = 1.0f;
  p.n_ctx_orig = 4096;
  return p;
}

TEST(OpsTest, YarnCorrectionRange) {
  // corr(b) = 64 ln(4096 / (2 pi b)) / (2 ln 10000): b=32 -> 10.47 (floor 10), b=1 -> 22.51
  // (ceil 23).
  float low, high;
  YarnCorrDims(V3Yarn(), &low, &high);
  EXPECT_EQ(low, 10.0f);
  EXPECT_EQ(high, 23.0f);
}

TEST(OpsTest, YarnRampAndMagnitude) {
  RopeParams p = V3Yarn();
  // llama.cpp passes attn_factor = 1 / (1 + 0.1 ln 40) for deepseek2 so that ggml's YaRN
  // magnitude (1 + 0.1 ln 40 = 1.3689) cancels: net magnitude 1.
  const float ggml_mscale = 1.0f + 0.1f * std::log(40.0f);
  p.attn_factor = 1.0f / ggml_mscale;
  std::vector<float> cs(64);
  const int64_t pos = 5;
  RopeCosSin(p, pos, cs.data());
  auto theta_extrap = [&](int i) { return pos * std::pow(10000.0f, -2.0f * i / 64.0f); };
  for (int i : {0, 5, 10, 16, 22, 23, 31}) {
    const float ramp = 1.0f - std::min(1.0f, std::max(0.0f, (i - 10.0f) / 13.0f));
    // i <= 10: extrapolated (original) angle; i >= 23: interpolated (angle / 40); between: mix.
    const float th = theta_extrap(i) / 40.0f * (1 - ramp) + theta_extrap(i) * ramp;
    EXPECT_NEAR(cs[2 * i], std::cos(th), 2e-5) << i;
    EXPECT_NEAR(cs[2 * i + 1], std::sin(th), 2e-5) << i;
  }
  // Without the compensation the magnitude is 1 + 0.1 ln 40.
  p.attn_factor = 1.0f;
  RopeCosSin(p, 0, cs.data());
  EXPECT_NEAR(cs[0], ggml_mscale, 1e-6);
  EXPECT_NEAR(ggml_mscale, 1.368888f, 1e-5);
}

}  // namespace
}  // namespace moesplit::ops
