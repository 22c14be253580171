// GQA attention (qwen3moe / llama): a prompt of >= 32 tokens takes the batched core (two f32
// GEMMs per block of tokens and head, over the values transposed once per kv head), shorter
// batches the one-(token, head)-at-a-time core (AttendOne). Both must give the same values up
// to summation order: a 40-token prompt in one batch against the same tokens in batches of 8,
// from position 0 and after 8 tokens already in the cache, at every ISA tier the machine has,
// with output poisoned (NaN) before each run.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "core/engine/forward.h"
#include "cpu_kernels/cpu_features.h"
#include "moe/expert_store.h"
#include "moe/grouped_experts.h"
#include "numa/thread_pool.h"
#include "tests/core/engine/f32_view.h"
#include "tests/cpu_kernels/kquant_test_util.h"
#include "tests/isa_tiers.h"

namespace moesplit::engine {
namespace {

constexpr int64_t D = 32, H = 4, Hk = 2, HD = 8;

using gemv::kquant_testing::RandomRow;
using testing::F32View;

ModelConfig Config() {
  ModelConfig c;
  c.arch = ModelArch::kQwen3Moe;
  c.n_embd = D, c.n_layer = 1, c.n_head = H, c.n_head_kv = Hk;
  c.head_dim_k = HD, c.head_dim_v = HD, c.n_rot = HD;
  c.rms_eps = 1e-6f, c.rope_freq_base = 10000.0f;
  c.kq_scale = 1.0f / std::sqrt(float(HD));
  return c;
}

class GqaTest : public ::testing::TestWithParam<cpu::IsaTier> {
 protected:
  void SetUp() override {
    if (static_cast<int>(GetParam()) > static_cast<int>(cpu::BestTier(cpu::DetectCpuFeatures()))) {
      GTEST_SKIP() << "tier not here";
    }
  }
};

// out[n x D] of tokens [first, first + n) of hs, attended in batches of `batch` tokens over a
// fresh cache (tokens before `first` are fed first, in batches of 8, their outputs dropped).
std::vector<float> Attend(cpu::IsaTier tier, const std::vector<float>& hs, int64_t first, int64_t n,
                          int64_t batch) {
  const ModelConfig c = Config();
  static const std::vector<float> wq = RandomRow(H * HD * D, 1, 0.4f),
                                  wk = RandomRow(Hk * HD * D, 2, 0.4f),
                                  wv = RandomRow(Hk * HD * D, 3, 0.4f),
                                  wo = RandomRow(D * H * HD, 4, 0.4f), qn = RandomRow(HD, 5, 1.0f),
                                  kn = RandomRow(HD, 6, 1.0f);
  LayerWeights l;
  l.attn_q = F32View(wq, {D, H * HD, 1, 1}, 2);
  l.attn_k = F32View(wk, {D, Hk * HD, 1, 1}, 2);
  l.attn_v = F32View(wv, {D, Hk * HD, 1, 1}, 2);
  l.attn_output = F32View(wo, {H * HD, D, 1, 1}, 2);
  l.attn_q_norm = F32View(qn, {HD, 1, 1, 1}, 1);
  l.attn_k_norm = F32View(kn, {HD, 1, 1, 1}, 1);
  ModelWeights mw;
  mw.layers.push_back(l);
  numa::ThreadPool pool(3);
  KvCache kv(c, first + n);
  std::unique_ptr<moe::ExpertStore> store =
      *moe::ExpertStore::Build(std::vector<moe::ExpertEngine::Layer>(1), {.nodes = {0}});
  const gemv::GemvKernels& k = gemv::KernelsFor(tier);
  moe::GroupedExperts experts(store.get(), {&pool}, {}, &k);
  Workspace ws;
  const ForwardContext ctx{c, mw, pool, kv, experts, RopeParamsFor(c), k, ws};
  std::vector<float> prefix(static_cast<size_t>(8 * D));
  for (int64_t t0 = 0; t0 < first; t0 += 8) {
    GqaAttention(ctx, 0, hs.data() + t0 * D, std::min<int64_t>(8, first - t0), t0, prefix.data());
  }
  std::vector<float> out(static_cast<size_t>(n * D), NAN);
  for (int64_t t0 = 0; t0 < n; t0 += batch) {
    const int64_t nt = std::min(batch, n - t0);
    GqaAttention(ctx, 0, hs.data() + (first + t0) * D, nt, first + t0, out.data() + t0 * D);
  }
  return out;
}

TEST_P(GqaTest, BatchedCoreMatchesOneTokenAtATime) {
  const std::vector<float> hs = RandomRow(48 * D, 7, 1.0f);
  for (int64_t first : {0, 8}) {
    const std::vector<float> batched = Attend(GetParam(), hs, first, 40, 40);  // >= 32: batched
    const std::vector<float> small = Attend(GetParam(), hs, first, 40, 8);     // AttendOne
    double worst = 0, scale = 0;
    for (size_t i = 0; i < small.size(); ++i) {
      ASSERT_FALSE(std::isnan(batched[i])) << "first " << first << " value " << i;
      worst = std::max(worst, double(std::fabs(batched[i] - small[i])));
      scale = std::max(scale, double(std::fabs(small[i])));
    }
    EXPECT_LE(worst, 1e-5 * scale) << "first " << first << ", scale " << scale;
    EXPECT_GT(scale, 0.1);  // the outputs are not trivially zero
  }
}

INSTANTIATE_TEST_SUITE_P(AllTiers, GqaTest, testing::AllIsaTiers(), testing::IsaTierParamName());

}  // namespace
}  // namespace moesplit::engine
