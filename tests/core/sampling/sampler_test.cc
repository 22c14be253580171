#include "core/sampling/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

namespace moesplit::sampling {
namespace {

std::vector<int32_t> Ids(const Candidates& c) {
  std::vector<int32_t> ids;
  for (const Candidate& cand : c.items) ids.push_back(cand.id);
  return ids;
}

Candidates Make(const std::vector<float>& logits) {
  Candidates c;
  InitCandidates(logits, &c);
  return c;
}

// log(p) for each p: softmax of these logits at temperature 1 is exactly p (sum 1).
std::vector<float> LogitsOf(const std::vector<float>& probs) {
  std::vector<float> l;
  for (float p : probs) l.push_back(std::log(p));
  return l;
}

SamplerConfig AllOff() {
  SamplerConfig c;
  c.temperature = 1.0f;
  c.top_k = 0;
  c.top_p = 1.0f;
  c.min_p = 0.0f;
  c.repeat_penalty = 1.0f;
  c.seed = 1234;
  return c;
}

TEST(SamplerConfigTest, DefaultsAreLlamaCpps) {
  SamplerConfig c;
  EXPECT_FLOAT_EQ(c.temperature, 0.8f);
  EXPECT_EQ(c.top_k, 40);
  EXPECT_FLOAT_EQ(c.top_p, 0.95f);
  EXPECT_FLOAT_EQ(c.min_p, 0.05f);
  EXPECT_FLOAT_EQ(c.repeat_penalty, 1.0f);
  EXPECT_EQ(c.repeat_last_n, 64);
  EXPECT_TRUE(ValidateSamplerConfig(c).ok());
}

TEST(SamplerConfigTest, InvalidValuesNameTheFlag) {
  struct Case {
    void (*set)(SamplerConfig*);
    const char* flag;
  };
  const Case cases[] = {
      {[](SamplerConfig* c) { c->temperature = -0.5f; }, "--temp"},
      {[](SamplerConfig* c) { c->temperature = NAN; }, "--temp"},
      {[](SamplerConfig* c) { c->top_k = -1; }, "--top-k"},
      {[](SamplerConfig* c) { c->top_p = 0.0f; }, "--top-p"},
      {[](SamplerConfig* c) { c->top_p = 1.5f; }, "--top-p"},
      {[](SamplerConfig* c) { c->min_p = -0.1f; }, "--min-p"},
      {[](SamplerConfig* c) { c->min_p = 2.0f; }, "--min-p"},
      {[](SamplerConfig* c) { c->repeat_penalty = 0.0f; }, "--repeat-penalty"},
      {[](SamplerConfig* c) { c->repeat_last_n = -2; }, "--repeat-last-n"},
      {[](SamplerConfig* c) { c->frequency_penalty = INFINITY; }, "--frequency-penalty"},
      {[](SamplerConfig* c) { c->presence_penalty = NAN; }, "--presence-penalty"},
  };
  for (const Case& k : cases) {
    SamplerConfig c;
    k.set(&c);
    Status s = ValidateSamplerConfig(c);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << k.flag;
    EXPECT_NE(s.message().find(k.flag), std::string::npos) << s.message();
    EXPECT_FALSE(Sampler::Create(c).ok()) << k.flag;
  }
  SamplerConfig edge;  // the closed ends of the ranges are valid
  edge.temperature = 0.0f;
  edge.top_k = 0;
  edge.top_p = 1.0f;
  edge.min_p = 1.0f;
  edge.repeat_last_n = -1;
  EXPECT_TRUE(ValidateSamplerConfig(edge).ok());
}

TEST(SamplerStageTest, RepetitionPenaltyDividesPositiveMultipliesNegative) {
  Candidates c = Make({2.0f, -1.0f, 3.0f, 0.5f, -2.0f});
  // Window of the last 4 tokens: {1, 2, 1, 9}; token 0 is older and out of the window,
  // 9 is outside the vocabulary (ignored), 1 appears twice but is penalized once.
  const std::vector<int32_t> history = {0, 1, 2, 1, 9};
  ApplyPenalties(history, 4, 2.0f, 0.0f, 0.0f, &c);
  EXPECT_FLOAT_EQ(c.items[0].logit, 2.0f);   // not in window
  EXPECT_FLOAT_EQ(c.items[1].logit, -2.0f);  // -1 * 2
  EXPECT_FLOAT_EQ(c.items[2].logit, 1.5f);   // 3 / 2
  EXPECT_FLOAT_EQ(c.items[3].logit, 0.5f);
  EXPECT_FLOAT_EQ(c.items[4].logit, -2.0f);
}

TEST(SamplerStageTest, FrequencyAndPresencePenalties) {
  Candidates c = Make({1.0f, 1.0f, 1.0f});
  const std::vector<int32_t> history = {0, 0, 0, 1};
  ApplyPenalties(history, -1, 1.0f, 0.25f, 0.5f, &c);
  EXPECT_FLOAT_EQ(c.items[0].logit, 1.0f - 3 * 0.25f - 0.5f);
  EXPECT_FLOAT_EQ(c.items[1].logit, 1.0f - 1 * 0.25f - 0.5f);
  EXPECT_FLOAT_EQ(c.items[2].logit, 1.0f);
}

TEST(SamplerStageTest, PenaltiesOnAReorderedSet) {
  Candidates c = Make({1.0f, 4.0f, 2.0f, 3.0f});
  ApplyTopK(3, &c);  // {1, 3, 2}
  const std::vector<int32_t> history = {3, 0};
  ApplyPenalties(history, 0, 2.0f, 0.0f, 0.0f, &c);  // last_n 0 = off
  EXPECT_FLOAT_EQ(c.items[1].logit, 3.0f);
  ApplyPenalties(history, 2, 2.0f, 0.0f, 0.0f, &c);
  EXPECT_EQ(Ids(c), (std::vector<int32_t>{1, 3, 2}));
  EXPECT_FLOAT_EQ(c.items[1].logit, 1.5f);
  EXPECT_FALSE(c.sorted);
}

TEST(SamplerStageTest, TopKKeepsTheKLargestInOrder) {
  Candidates c = Make({0.1f, 5.0f, -3.0f, 2.0f, 2.0f, 4.0f});
  ApplyTopK(3, &c);
  EXPECT_EQ(Ids(c), (std::vector<int32_t>{1, 5, 3}));  // tie 3/4 at 2.0: lower id first
  EXPECT_TRUE(c.sorted);
  Candidates d = Make({1.0f, 2.0f});
  ApplyTopK(0, &d);  // off
  EXPECT_EQ(Ids(d), (std::vector<int32_t>{0, 1}));
  ApplyTopK(10, &d);  // k > n: everything, sorted
  EXPECT_EQ(Ids(d), (std::vector<int32_t>{1, 0}));
}

TEST(SamplerStageTest, HeapTopKMatchesSelectTopK) {
  std::vector<float> logits(5000);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::round(std::sin(1.7f * i) * 50.0f);
  for (int32_t k : {1, 7, 40, 4999, 5000, 6000, 0}) {
    Candidates a = Make(logits);
    ApplyTopK(k, &a);
    Candidates b;
    TopKFromLogits(logits, k, &b);
    EXPECT_EQ(Ids(a), Ids(b)) << k;  // many ties (rounded logits): lower id first in both
  }
}

TEST(SamplerStageTest, PenalizeLogitsMatchesCandidatePenalties) {
  std::vector<float> logits = {2.0f, -1.0f, 3.0f, 0.5f, -2.0f};
  Candidates c = Make(logits);
  const std::vector<int32_t> history = {0, 1, 2, 1, 9, -3};
  ApplyPenalties(history, 5, 1.3f, 0.1f, 0.2f, &c);
  PenalizeLogits(history, 5, 1.3f, 0.1f, 0.2f, logits);
  for (size_t i = 0; i < logits.size(); ++i) EXPECT_EQ(c.items[i].logit, logits[i]) << i;
}

TEST(SamplerStageTest, TopPKeepsSmallestPrefixReachingP) {
  // p = {0.5, 0.25, 0.125, 0.0625, 0.0625} (ids shuffled): cumulative 0.5, 0.75, 0.875, ...
  const std::vector<float> logits = LogitsOf({0.125f, 0.5f, 0.0625f, 0.25f, 0.0625f});
  Candidates c = Make(logits);
  ApplyTopP(0.75f, &c);  // 0.5 + 0.25 reaches 0.75 exactly: two tokens
  EXPECT_EQ(Ids(c), (std::vector<int32_t>{1, 3}));
  EXPECT_NEAR(c.items[0].p, 0.5f, 1e-6);  // probabilities at temperature 1, before renorm
  EXPECT_NEAR(c.items[1].p, 0.25f, 1e-6);
  Candidates d = Make(logits);
  ApplyTopP(0.76f, &d);
  EXPECT_EQ(Ids(d), (std::vector<int32_t>{1, 3, 0}));
  Candidates e = Make(logits);
  ApplyTopP(0.3f, &e);  // the best token alone already exceeds p
  EXPECT_EQ(Ids(e), (std::vector<int32_t>{1}));
  Candidates f = Make(logits);
  ApplyTopP(1.0f, &f);  // off
  EXPECT_EQ(f.items.size(), 5u);
}

TEST(SamplerStageTest, TopPOnALargeVocabularyBeyondTheFirst256) {
  // 2000 equal logits: p = 1/2000 each, p = 0.5 needs 1000 tokens (past the adaptive 256).
  std::vector<float> logits(2000, 0.0f);
  logits[7] = 1.0f;  // one clear winner first
  Candidates c = Make(logits);
  ApplyTopP(0.5f, &c);
  const double p7 = std::exp(1.0) / (std::exp(1.0) + 1999.0);
  const double p_other = 1.0 / (std::exp(1.0) + 1999.0);
  const size_t expect = 1 + static_cast<size_t>(std::ceil((0.5 - p7) / p_other));
  EXPECT_NEAR(static_cast<double>(c.items.size()), static_cast<double>(expect), 1.0);
  EXPECT_EQ(c.items[0].id, 7);
  for (size_t i = 2; i < c.items.size(); ++i) EXPECT_LT(c.items[i - 1].id, c.items[i].id);
}

TEST(SamplerStageTest, MinPKeepsTokensAboveFractionOfMax) {
  // p_max = 0.5; min_p = 0.25 keeps p >= 0.125 (0.5, 0.25, 0.125), drops 0.0625s.
  Candidates c = Make(LogitsOf({0.125f, 0.5f, 0.0625f, 0.25f, 0.0625f}));
  ApplyMinP(0.25f, &c);
  EXPECT_EQ(Ids(c), (std::vector<int32_t>{0, 1, 3}));  // order kept (unsorted input)
  Softmax(&c);  // renormalized over the survivors: 0.125/0.875, 0.5/0.875, 0.25/0.875
  EXPECT_NEAR(c.items[0].p, 0.125f / 0.875f, 1e-6);
  EXPECT_NEAR(c.items[1].p, 0.5f / 0.875f, 1e-6);
  EXPECT_NEAR(c.items[2].p, 0.25f / 0.875f, 1e-6);
  Candidates d = Make({1.0f, 0.0f});
  ApplyMinP(1.0f, &d);  // only the max survives
  EXPECT_EQ(Ids(d), (std::vector<int32_t>{0}));
}

TEST(SamplerStageTest, TemperatureScalesLogits) {
  Candidates c = Make({2.0f, 0.0f});
  ApplyTemperature(0.5f, &c);
  Softmax(&c);
  // softmax(4, 0) = (e^4, 1) / (e^4 + 1)
  EXPECT_NEAR(c.items[0].p, std::exp(4.0) / (std::exp(4.0) + 1.0), 1e-6);
  EXPECT_NEAR(c.items[1].p, 1.0 / (std::exp(4.0) + 1.0), 1e-6);
}

TEST(SamplerStageTest, DrawIndexIsTheInverseCdf) {
  Candidates c = Make(LogitsOf({0.5f, 0.25f, 0.25f}));
  Softmax(&c);
  EXPECT_EQ(DrawIndex(c, 0.0), 0u);
  EXPECT_EQ(DrawIndex(c, 0.49), 0u);
  EXPECT_EQ(DrawIndex(c, 0.51), 1u);
  EXPECT_EQ(DrawIndex(c, 0.74), 1u);
  EXPECT_EQ(DrawIndex(c, 0.76), 2u);
  EXPECT_EQ(DrawIndex(c, 0.999999), 2u);
}

TEST(SamplerTest, ChainInLlamaCppOrder) {
  // logits -> probs at T=1 over 6 tokens; penalty pushes token 0 down before top-k.
  const std::vector<float> logits = {3.0f, 2.5f, 2.0f, 1.0f, 0.0f, -5.0f};
  SamplerConfig cfg = AllOff();
  cfg.repeat_penalty = 3.0f;  // token 0: 3 -> 1
  cfg.top_k = 4;              // {1 (2.5), 2 (2.0), 0 (1.0), 3 (1.0)}
  cfg.top_p = 0.9f;           // softmax over those 4, cumulative until >= 0.9
  cfg.min_p = 0.3f;           // relative to the max (token 1)
  cfg.temperature = 2.0f;
  auto s = Sampler::Create(cfg);
  ASSERT_TRUE(s.ok());
  const std::vector<int32_t> history = {0};
  const Candidates& c = s->Filter(logits, history);
  // After top-k: logits 2.5, 2.0, 1.0, 1.0 (ids 1, 2, 0, 3). Softmax:
  const double z = std::exp(2.5) + std::exp(2.0) + 2 * std::exp(1.0);
  const double p1 = std::exp(2.5) / z, p2 = std::exp(2.0) / z;  // 0.506, 0.307: sum 0.813 < 0.9
  ASSERT_LT(p1 + p2, 0.9);
  // top-p keeps {1, 2, 0} (cum 0.925); min-p 0.3: exp(1.0 - 2.5) = 0.22 < 0.3 drops token 0.
  ASSERT_EQ(Ids(c), (std::vector<int32_t>{1, 2}));
  // temperature 2: softmax(1.25, 1.0)
  const double q1 = std::exp(1.25) / (std::exp(1.25) + std::exp(1.0));
  EXPECT_NEAR(c.items[0].p, q1, 1e-6);
  EXPECT_NEAR(c.items[1].p, 1.0 - q1, 1e-6);
}

TEST(SamplerTest, GreedyIsArgmaxAfterPenalties) {
  SamplerConfig cfg;
  cfg.temperature = 0.0f;
  cfg.repeat_penalty = 4.0f;
  auto s = Sampler::Create(cfg);
  ASSERT_TRUE(s.ok());
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f};
  EXPECT_EQ(s->Sample(logits, {}), 1);  // tie with 3: lowest id
  const std::vector<int32_t> history = {1, 3};
  EXPECT_EQ(s->Sample(logits, history), 2);  // 3 / 4 = 0.75 < 2
  const Candidates& c = s->Filter(logits, history);
  ASSERT_EQ(c.items.size(), 1u);
  EXPECT_EQ(c.items[0].id, 2);
  EXPECT_EQ(c.items[0].p, 1.0f);
}

TEST(SamplerTest, SameSeedSameTokens) {
  std::vector<float> logits(129280);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(0.37f * i) * 4.0f;
  SamplerConfig cfg;  // defaults: top-k 40, top-p 0.95, min-p 0.05, T 0.8
  cfg.seed = 42;
  auto a = Sampler::Create(cfg);
  auto b = Sampler::Create(cfg);
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<int32_t> ta, tb;
  for (int i = 0; i < 100; ++i) {
    ta.push_back(a->Sample(logits, ta));
    tb.push_back(b->Sample(logits, tb));
  }
  EXPECT_EQ(ta, tb);
  std::map<int32_t, int> distinct;
  for (int32_t t : ta) distinct[t]++;
  EXPECT_GT(distinct.size(), 1u);  // it does sample, not argmax
  a->Reseed(42);
  std::vector<int32_t> tc;
  for (int i = 0; i < 100; ++i) tc.push_back(a->Sample(logits, tc));
  EXPECT_EQ(ta, tc);
  cfg.seed = 43;
  auto d = Sampler::Create(cfg);
  std::vector<int32_t> td;
  for (int i = 0; i < 100; ++i) td.push_back(d->Sample(logits, td));
  EXPECT_NE(ta, td);
}

TEST(SamplerTest, RandomSeedIsReported) {
  SamplerConfig cfg;
  auto s = Sampler::Create(cfg);
  ASSERT_TRUE(s.ok());
  EXPECT_NE(s->seed(), kRandomSeed);
}

TEST(SamplerTest, TemperatureSamplingMatchesSoftmax) {
  // 5 tokens, T = 0.7, no filters: expected p = softmax(logits / 0.7). 40000 draws with a fixed
  // seed; Pearson's chi-square with 4 degrees of freedom must be below 18.47 (p = 0.001).
  const std::vector<float> logits = {1.0f, 0.5f, 0.0f, -0.5f, -1.5f};
  SamplerConfig cfg = AllOff();
  cfg.temperature = 0.7f;
  cfg.seed = 20240601;
  auto s = Sampler::Create(cfg);
  ASSERT_TRUE(s.ok());
  std::vector<double> expect(logits.size());
  double z = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) z += expect[i] = std::exp(logits[i] / 0.7);
  const int n = 40000;
  std::vector<int> count(logits.size(), 0);
  for (int i = 0; i < n; ++i) count[s->Sample(logits, {})]++;
  double chi2 = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const double e = n * expect[i] / z;
    chi2 += (count[i] - e) * (count[i] - e) / e;
  }
  EXPECT_LT(chi2, 18.47) << count[0] << " " << count[1] << " " << count[2] << " " << count[3];
}

}  // namespace
}  // namespace moesplit::sampling
