// gpu::Route against moe::Route on a device. The GPU's scores differ from the CPU's by a few ulp
// (CUDA expf), so ids must match exactly except where the two candidates' select values are
// within 1e-5 of each other (a near-tie; exact ties must match); weights within 2e-6 relative.
// ids / weights are poisoned (0xFF: -1 / NaN) before each run. Config errors need no GPU.
#include "gpu_kernels/router.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gpu_kernels/device_buffer.h"
#include "moe/routing.h"
#include "tests/gpu_kernels/gpu_test_util.h"

namespace moesplit::gpu {
namespace {

using testing::Poisoned;
using testing::RandomUniform;
using testing::Upload;

RouterConfig Config(int E, int k, int groups, int groups_used, bool sigmoid, bool norm,
                    float scale) {
  RouterConfig c;
  c.n_expert = E;
  c.n_expert_used = k;
  c.n_group = groups;
  c.n_group_used = groups_used;
  c.gating = sigmoid ? RouterGating::kSigmoid : RouterGating::kSoftmax;
  c.norm_weights = norm;
  c.weights_scale = scale;
  return c;
}

moe::RouterConfig ToCpu(const RouterConfig& c) {
  moe::RouterConfig r;
  r.n_expert = c.n_expert;
  r.n_expert_used = c.n_expert_used;
  r.n_group = c.n_group;
  r.n_group_used = c.n_group_used;
  r.gating = c.gating == RouterGating::kSigmoid ? moe::Gating::kSigmoid : moe::Gating::kSoftmax;
  r.norm_weights = c.norm_weights;
  r.weights_scale = c.weights_scale;
  return r;
}

void CheckRoute(const RouterConfig& c, const std::vector<float>& logits,
                const std::vector<float>* bias) {
  const int E = c.n_expert, k = c.n_expert_used;
  const int64_t n_tok = static_cast<int64_t>(logits.size()) / E;
  std::vector<int32_t> ids_ref(n_tok * k);
  std::vector<float> w_ref(n_tok * k);
  moe::Route(ToCpu(c), logits.data(), bias ? bias->data() : nullptr, n_tok, ids_ref.data(),
             w_ref.data());
  DeviceBuffer dl = Upload(logits);
  DeviceBuffer db = bias ? Upload(*bias) : DeviceBuffer();
  DeviceBuffer dids = Poisoned<int32_t>(n_tok * k);
  DeviceBuffer dw = Poisoned<float>(n_tok * k);
  ASSERT_TRUE(Route(c, dl.as<float>(), bias ? db.as<float>() : nullptr, n_tok, dids.as<int32_t>(),
                    dw.as<float>(), nullptr)
                  .ok());
  ASSERT_TRUE(Synchronize(nullptr).ok());
  std::vector<int32_t> ids(n_tok * k);
  std::vector<float> w(n_tok * k);
  ASSERT_TRUE(dids.CopyToHost(ids.data(), ids.size() * sizeof(int32_t)).ok());
  ASSERT_TRUE(dw.CopyToHost(w.data(), w.size() * sizeof(float)).ok());
  // The CPU's select values (host RouteToken: bit-exact with moe::Route) judge near-ties.
  std::vector<float> scores(E), select(E), gs(std::max(1, c.n_group)), tw(k);
  std::vector<int32_t> tids(k);
  for (int64_t t = 0; t < n_tok; ++t) {
    RouteToken(c, &logits[t * E], bias ? bias->data() : nullptr, scores.data(), select.data(),
               gs.data(), tids.data(), tw.data());
    bool same = true;
    for (int j = 0; j < k; ++j) {
      const int32_t g = ids[t * k + j], r = ids_ref[t * k + j];
      ASSERT_GE(g, 0) << "token " << t;
      ASSERT_LT(g, E) << "token " << t;
      if (g == r) continue;
      same = false;
      EXPECT_LE(std::fabs(select[g] - select[r]), 1e-5f)
          << "token " << t << " slot " << j << ": gpu " << g << " cpu " << r;
    }
    if (!same) continue;  // a near-tie swap: the weights follow the ids
    for (int j = 0; j < k; ++j) {
      EXPECT_NEAR(w[t * k + j], w_ref[t * k + j], 2e-6 * std::fabs(w_ref[t * k + j]))
          << "token " << t << " slot " << j;
    }
  }
}

TEST(GpuRouter, DeepseekV3SigmoidBiasGroups) {
  MOESPLIT_SKIP_WITHOUT_GPU();
  const RouterConfig c = Config(256, 8, 8, 4, true, true, 2.5f);
  const std::vector<float> bias = RandomUniform(256, -0.5f, 0.5f, 1);
  const std::vector<float> logits = RandomUniform(256 * 37, -4.0f, 4.0f, 2);
  CheckRoute(c, logits, &bias);
  CheckRoute(c, logits, nullptr);
  CheckRoute(c, RandomUniform(256, -4.0f, 4.0f, 3), &bias);  // one token
}

TEST(GpuRouter, DeepseekV2LiteSoftmax) {
  MOESPLIT_SKIP_WITHOUT_GPU();
  CheckRoute(Config(64, 6, 0, 0, false, false, 1.0f), RandomUniform(64 * 29, -6.0f, 6.0f, 4),
             nullptr);
  CheckRoute(Config(64, 6, 1, 1, false, true, 0.0f), RandomUniform(64 * 3, -6.0f, 6.0f, 5),
             nullptr);
}

TEST(GpuRouter, OddShapes) {
  MOESPLIT_SKIP_WITHOUT_GPU();
  CheckRoute(Config(7, 7, 0, 0, false, true, 0.0f), RandomUniform(7 * 3, -1.0f, 1.0f, 6), nullptr);
  const std::vector<float> bias = RandomUniform(12, -0.1f, 0.1f, 7);
  CheckRoute(Config(12, 3, 12, 5, true, true, 1.5f), RandomUniform(12 * 4, -2.0f, 2.0f, 8), &bias);
  CheckRoute(Config(512, 16, 16, 3, true, false, 0.0f), RandomUniform(512 * 3, -3.0f, 3.0f, 9),
             nullptr);
  CheckRoute(Config(32, 16, 8, 1, true, true, 1.0f), RandomUniform(32 * 2, -1.0f, 1.0f, 10),
             nullptr);  // fewer eligible experts than k: -inf ones fill up
}

// Exact ties give equal scores on the GPU too (same inputs, same expf): lower index first.
TEST(GpuRouter, Ties) {
  MOESPLIT_SKIP_WITHOUT_GPU();
  const RouterConfig v3 = Config(256, 8, 8, 4, true, true, 2.5f);
  std::vector<float> logits(256 * 4, 0.0f);
  for (int e = 0; e < 256; ++e) {
    logits[256 + e] = static_cast<float>(e % 4);
    logits[512 + e] = (e % 32 < 2) ? 1.0f : 0.0f;
    logits[768 + e] = static_cast<float>((e / 3) % 2);
  }
  CheckRoute(v3, logits, nullptr);
  std::vector<float> bias(256, 0.0f);
  for (int e = 0; e < 256; e += 2) bias[e] = 0.25f;
  CheckRoute(v3, logits, &bias);
  CheckRoute(Config(64, 6, 0, 0, false, false, 1.0f), std::vector<float>(64 * 2, 0.5f), nullptr);
}

TEST(GpuRouter, BadConfigFailsBeforeCuda) {
  auto expect_invalid = [](const RouterConfig& c, const std::string& needle) {
    const Status s = Route(c, nullptr, nullptr, 1, nullptr, nullptr, nullptr);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.ToString();
  };
  expect_invalid(Config(513, 8, 0, 0, true, true, 1.0f), "513");
  expect_invalid(Config(0, 1, 0, 0, true, true, 1.0f), "n_expert = 0");
  expect_invalid(Config(256, 17, 0, 0, true, true, 1.0f), "17");
  expect_invalid(Config(8, 9, 0, 0, true, true, 1.0f), "9");
  expect_invalid(Config(256, 0, 0, 0, true, true, 1.0f), "n_expert_used = 0");
  expect_invalid(Config(250, 8, 8, 4, true, true, 1.0f), "250");
  expect_invalid(Config(256, 8, 8, 0, true, true, 1.0f), "n_group_used = 0");
  expect_invalid(Config(256, 8, 8, 9, true, true, 1.0f), "9");
  const Status s = Route(Config(256, 8, 8, 4, true, true, 1.0f), nullptr, nullptr, -4, nullptr,
                         nullptr, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("-4"), std::string::npos) << s.ToString();
  EXPECT_TRUE(ValidateRouterConfig(Config(256, 8, 8, 4, true, true, 2.5f)).ok());
}

}  // namespace
}  // namespace moesplit::gpu
