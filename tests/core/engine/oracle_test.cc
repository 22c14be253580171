// The forward pass against llama.cpp's own logits for the tiny DeepSeek-V3-style model in
// shared/testdata (README "Acceptance rule"): per position Pearson >= 0.999 and the same argmax
// where the reference top-1 leads top-2 by > 1% of the row's range; a position may match the
// batch or the seq file; 12 of seqA's 16 and 56 of seqB's 64 positions must pass (measured 13 and
// 58-59: routing near-ties flip experts at a few positions even inside llama.cpp). Every test runs at every CPU kernel tier
// the machine has (the tier is the last part of the test name; missing tiers skip).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/engine/engine.h"
#include "tests/core/engine/logits_util.h"
#include "tests/isa_tiers.h"
#include "tests/testdata.h"

namespace moesplit::engine {
namespace {

using moesplit::testing::Pearson;
using moesplit::testing::ReadF32;

constexpr int64_t kVocab = 1024;

bool RowAgrees(const float* ours, const float* ref) {
  return moesplit::testing::RowAgrees(ours, ref, kVocab);
}

std::vector<int32_t> SeqA() { return moesplit::testing::TinySeqA(); }
std::vector<int32_t> SeqB() { return moesplit::testing::TinySeqB(); }

std::vector<float> RunTokens(const Model& model, const std::vector<int32_t>& tokens, bool decode,
                             int threads, cpu::IsaTier tier,
                             KvCacheType kv_type = KvCacheType::kF32) {
  Session s(model, {.ctx_size = 128, .n_threads = threads, .kv_type = kv_type, .isa_tier = tier});
  if (!decode) return s.Eval(tokens, true).value();
  std::vector<float> all;
  for (int32_t t : tokens) {
    std::vector<float> row = s.Eval(std::span<const int32_t>(&t, 1), false).value();
    all.insert(all.end(), row.begin(), row.end());
  }
  EXPECT_EQ(s.position(), static_cast<int64_t>(tokens.size()));
  return all;
}

void CheckSequence(const char* name, const std::vector<int32_t>& tokens, bool decode, int threads,
                   cpu::IsaTier tier, KvCacheType kv_type = KvCacheType::kF32) {
  const std::string base = testing::TestDataPath("models/ds-tiny-Q4_K_M");
  std::unique_ptr<Model> model = Model::Load(base + ".gguf").value();
  const std::vector<float> ours = RunTokens(*model, tokens, decode, threads, tier, kv_type);
  const std::vector<float> batch = ReadF32(base + "." + name + ".batch.f32");
  const std::vector<float> seq = ReadF32(base + "." + name + ".seq.f32");
  const int64_t n = static_cast<int64_t>(tokens.size());
  ASSERT_EQ(ours.size(), static_cast<size_t>(n * kVocab));
  ASSERT_EQ(batch.size(), ours.size());
  int agree = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float* o = &ours[i * kVocab];
    const bool ok = RowAgrees(o, &batch[i * kVocab]) || RowAgrees(o, &seq[i * kVocab]);
    agree += ok;
    if (!ok) {
      std::printf("%s position %lld: pearson vs batch %.5f (routing near-tie?)\n", name,
                  static_cast<long long>(i), Pearson(o, &batch[i * kVocab], kVocab));
    }
  }
  std::printf("%s %s (%s): %d/%lld positions agree\n", name, decode ? "decode" : "batch",
              std::string(cpu::IsaTierName(tier)).c_str(), agree, static_cast<long long>(n));
  // Measured: 14/16 (seqA) and 62/64 (seqB) with the f32 reference matmul (as a float64 pass);
  // 13/16 and 58-59/64 once Q4_K products take Q8_K activations as in llama.cpp (other
  // near-ties flip; the same at every tier). Floors: the measured counts less a margin of one
  // position in 16 and two in 64 (an f16 cache or another tier may flip one more near-tie).
  ASSERT_TRUE(n == 16 || n == 64) << name;
  EXPECT_GE(agree, n == 16 ? 12 : 56) << name;
}

// Parametrized by the CPU kernel tier; tiers this CPU lacks skip.
class OracleTierTest : public ::testing::TestWithParam<cpu::IsaTier> {
 protected:
  void SetUp() override {
    const cpu::IsaTier best = cpu::BestTier(cpu::DetectCpuFeatures());
    if (static_cast<int>(GetParam()) > static_cast<int>(best)) {
      GTEST_SKIP() << "this CPU lacks ISA tier " << cpu::IsaTierName(GetParam());
    }
  }
};

TEST_P(OracleTierTest, SeqABatch) {
  MOESPLIT_REQUIRE_TESTDATA();
  CheckSequence("seqA", SeqA(), /*decode=*/false, 2, GetParam());
}
TEST_P(OracleTierTest, SeqADecode) {
  MOESPLIT_REQUIRE_TESTDATA();
  CheckSequence("seqA", SeqA(), /*decode=*/true, 3, GetParam());
}
TEST_P(OracleTierTest, SeqBBatch) {
  MOESPLIT_REQUIRE_TESTDATA();
  CheckSequence("seqB", SeqB(), /*decode=*/false, 4, GetParam());
}
TEST_P(OracleTierTest, SeqBDecode) {
  MOESPLIT_REQUIRE_TESTDATA();
  CheckSequence("seqB", SeqB(), /*decode=*/true, 1, GetParam());
}

TEST_P(OracleTierTest, SeqBDecodeF16Cache) {
  // llama.cpp's own default cache type.
  MOESPLIT_REQUIRE_TESTDATA();
  CheckSequence("seqB", SeqB(), /*decode=*/true, 2, GetParam(), KvCacheType::kF16);
}

TEST_P(OracleTierTest, BatchEqualsDecodeClosely) {
  MOESPLIT_REQUIRE_TESTDATA();
  std::unique_ptr<Model> model =
      Model::Load(testing::TestDataPath("models/ds-tiny-Q4_K_M.gguf")).value();
  const std::vector<float> a = RunTokens(*model, SeqA(), false, 2, GetParam());
  const std::vector<float> b = RunTokens(*model, SeqA(), true, 2, GetParam());
  for (int64_t i = 0; i < 16; ++i)
    EXPECT_GT(Pearson(&a[i * kVocab], &b[i * kVocab], kVocab), 0.9999);
}

INSTANTIATE_TEST_SUITE_P(AllTiers, OracleTierTest, testing::AllIsaTiers(),
                         testing::IsaTierParamName());

TEST(OracleTest, F16CacheIsHalfTheBytes) {
  MOESPLIT_REQUIRE_TESTDATA();
  std::unique_ptr<Model> model =
      Model::Load(testing::TestDataPath("models/ds-tiny-Q4_K_M.gguf")).value();
  // 4 layers x 128 slots (100 positions in blocks of 32) x (kv_lora 64 + rope 16 values): the
  // latent rows only.
  Session f32(*model, {.ctx_size = 100, .n_threads = 1});
  Session f16(*model, {.ctx_size = 100, .n_threads = 1, .kv_type = KvCacheType::kF16});
  EXPECT_EQ(f32.kv_cache_bytes(), 4u * 128u * 80u * 4u);
  EXPECT_EQ(f16.kv_cache_bytes(), 4u * 128u * 80u * 2u);
}

TEST(OracleTest, ErrorsAreStatuses) {
  MOESPLIT_REQUIRE_TESTDATA();
  std::unique_ptr<Model> model =
      Model::Load(testing::TestDataPath("models/ds-tiny-Q4_K_M.gguf")).value();
  Session s(*model, {.ctx_size = 4, .n_threads = 1});
  const std::vector<int32_t> bad = {0, 1024};
  EXPECT_EQ(s.Eval(bad, true).status().code(), StatusCode::kInvalidArgument);
  const std::vector<int32_t> neg = {-1};
  EXPECT_EQ(s.Eval(neg, true).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Eval({}, true).status().code(), StatusCode::kInvalidArgument);
  const std::vector<int32_t> three = {0, 5, 6};
  ASSERT_TRUE(s.Eval(three, false).ok());
  EXPECT_EQ(s.position(), 3);
  const std::vector<int32_t> two = {7, 8};
  const Status overflow = s.Eval(two, false).status();
  EXPECT_EQ(overflow.code(), StatusCode::kOutOfRange);
  EXPECT_NE(overflow.message().find("context"), std::string::npos);
  EXPECT_EQ(s.position(), 3);
  s.Reset();
  EXPECT_EQ(s.position(), 0);
  EXPECT_TRUE(s.Eval(two, false).ok());
}

TEST(OracleTest, MissingFileAndTensorsAreErrors) {
  EXPECT_FALSE(Model::Load("/nonexistent/model.gguf").ok());
}

}  // namespace
}  // namespace moesplit::engine
