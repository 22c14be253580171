#include "moe/routing.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace moesplit::moe {
namespace {

float Logit(float p) { return std::log(p / (1.0f - p)); }  // sigmoid^-1

// DeepSeek-V3 style: 8 experts in 4 groups of 2, top-2 groups, top-3 experts, sigmoid,
// bias for selection only, weights renormalised and scaled by 2.5.
TEST(RoutingTest, SigmoidBiasGroupsHandBuilt) {
  RouterConfig c{.n_expert = 8,
                 .n_expert_used = 3,
                 .n_group = 4,
                 .n_group_used = 2,
                 .gating = Gating::kSigmoid,
                 .norm_weights = true,
                 .weights_scale = 2.5f};
  // Scores (sigmoid):   g0: e0 .90 e1 .10 | g1: e2 .50 e3 .50 | g2: e4 .80 e5 .05 | g3: e6 .40 e7
  // .45
  const std::vector<float> p = {0.90f, 0.10f, 0.50f, 0.50f, 0.80f, 0.05f, 0.40f, 0.45f};
  std::vector<float> logits;
  for (float x : p) logits.push_back(Logit(x));
  // Bias: pushes e7 up by 0.5 (biased .95) and e0 down by 0.3 (biased .60).
  const std::vector<float> bias = {-0.3f, 0, 0, 0, 0, 0, 0, 0.5f};
  // Biased group scores (sum of top-2): g0 .60+.10=.70, g1 1.00, g2 .85, g3 .95+.40=1.35
  // -> groups g3 and g1 kept; top-3 biased among e2 .5, e3 .5, e6 .4, e7 .95: e7, e2, e3.
  int32_t ids[3];
  float w[3];
  Route(c, logits.data(), bias.data(), 1, ids, w);
  EXPECT_EQ(ids[0], 7);
  EXPECT_EQ(ids[1], 2);
  EXPECT_EQ(ids[2], 3);
  // Weights from the unbiased scores .45, .50, .50, renormalised (sum 1.45), x2.5.
  EXPECT_NEAR(w[0], 0.45f / 1.45f * 2.5f, 1e-5);
  EXPECT_NEAR(w[1], 0.50f / 1.45f * 2.5f, 1e-5);
  EXPECT_NEAR(w[2], 0.50f / 1.45f * 2.5f, 1e-5);
  // Without groups e0 (biased .60) beats e3 (.50): the group limit matters.
  RouterConfig no_groups = c;
  no_groups.n_group = 0;
  Route(no_groups, logits.data(), bias.data(), 1, ids, w);
  EXPECT_EQ(ids[0], 7);
  EXPECT_EQ(ids[1], 4);  // .80
  EXPECT_EQ(ids[2], 0);  // .60 biased
}

TEST(RoutingTest, SoftmaxTopKRenormalised) {
  // Mixtral / Qwen3: softmax over all experts, top-k, renormalise to 1.
  RouterConfig c{
      .n_expert = 4, .n_expert_used = 2, .gating = Gating::kSoftmax, .norm_weights = true};
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 0.0f, /*token 2*/ 0.0f, 0.0f, 5.0f, 1.0f};
  int32_t ids[4];
  float w[4];
  Route(c, logits.data(), nullptr, 2, ids, w);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 2);
  const float e1 = std::exp(3.0f), e2 = std::exp(2.0f);
  EXPECT_NEAR(w[0], e1 / (e1 + e2), 1e-6);
  EXPECT_NEAR(w[1], e2 / (e1 + e2), 1e-6);
  EXPECT_EQ(ids[2], 2);
  EXPECT_EQ(ids[3], 3);
  EXPECT_NEAR(w[2] + w[3], 1.0f, 1e-6);
}

TEST(RoutingTest, SoftmaxWithoutNormKeepsFullSoftmaxWeights) {
  // DeepSeek-V2: softmax, no renormalisation, scale 1.
  RouterConfig c{.n_expert = 3, .n_expert_used = 1, .gating = Gating::kSoftmax};
  const std::vector<float> logits = {0.0f, std::log(2.0f), std::log(1.0f)};  // softmax .25 .5 .25
  int32_t id;
  float w;
  Route(c, logits.data(), nullptr, 1, &id, &w);
  EXPECT_EQ(id, 1);
  EXPECT_NEAR(w, 0.5f, 1e-6);
}

TEST(RoutingTest, TiesGoToTheLowerIndex) {
  RouterConfig c{.n_expert = 4, .n_expert_used = 2, .gating = Gating::kSigmoid};
  const std::vector<float> logits = {0.5f, 0.5f, 0.5f, 0.5f};
  int32_t ids[2];
  float w[2];
  Route(c, logits.data(), nullptr, 1, ids, w);
  EXPECT_EQ(ids[0], 0);
  EXPECT_EQ(ids[1], 1);
}

}  // namespace
}  // namespace moesplit::moe
