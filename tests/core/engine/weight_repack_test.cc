// Load-time repacking of the dense matrices (core/engine/weight_repack.h), at every CPU kernel
// tier the machine has (the tier is the last part of the test name; missing tiers skip):
// lossless (every group unpacks to the file's bytes), only where the tier has native group
// tiles, never token_embd or a tied output head, both MLA forms read the repacked per-head
// maps, and a session's logits with the dense matrices repacked match a --no-repack session's.
#include "core/engine/weight_repack.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/engine/engine.h"
#include "core/engine/forward.h"
#include "core/synth/model_spec.h"
#include "core/synth/model_writer.h"
#include "cpu_kernels/quant/repack.h"
#include "moe/expert_store.h"
#include "moe/grouped_experts.h"
#include "numa/thread_pool.h"
#include "tests/isa_tiers.h"

namespace moesplit::engine {
namespace {

class WeightRepackTest : public ::testing::TestWithParam<cpu::IsaTier> {
 protected:
  static void SetUpTestSuite() {
    path_ = new std::string("weight_repack_test." + std::to_string(::getpid()) + ".gguf");
    const synth::ModelSpec spec =
        synth::BuildModelSpec({.preset = "ds-tiny", .quant = synth::QuantMix::kQ4_K_M}).value();
    ASSERT_TRUE(synth::WriteModel(spec, {.path = *path_, .seed = 5, .show_progress = false}).ok());
  }
  static void TearDownTestSuite() {
    std::remove(path_->c_str());
    delete path_;
  }
  void SetUp() override {
    if (static_cast<int>(GetParam()) > static_cast<int>(cpu::BestTier(cpu::DetectCpuFeatures()))) {
      GTEST_SKIP() << "this CPU lacks ISA tier " << cpu::IsaTierName(GetParam());
    }
  }
  static std::string* path_;
};
std::string* WeightRepackTest::path_ = nullptr;

// Every view of `w` that may be repacked, paired with the model's: output, then per layer.
std::vector<std::pair<const TensorView*, const TensorView*>> DenseViews(const ModelWeights& got,
                                                                        const ModelWeights& file) {
  std::vector<std::pair<const TensorView*, const TensorView*>> v = {{&got.output, &file.output}};
  for (size_t il = 0; il < got.layers.size(); ++il) {
    const LayerWeights &g = got.layers[il], &f = file.layers[il];
    v.insert(v.end(), {{&g.attn_q_a, &f.attn_q_a},
                       {&g.attn_q_b, &f.attn_q_b},
                       {&g.attn_q, &f.attn_q},
                       {&g.attn_kv_a_mqa, &f.attn_kv_a_mqa},
                       {&g.attn_k_b, &f.attn_k_b},
                       {&g.attn_v_b, &f.attn_v_b},
                       {&g.attn_output, &f.attn_output},
                       {&g.ffn_gate, &f.ffn_gate},
                       {&g.ffn_up, &f.ffn_up},
                       {&g.ffn_down, &f.ffn_down}});
  }
  return v;
}

// Whether the tier has group kernels for any dense matrix of the file (ds-tiny Q4_K_M: q6_K
// output, q4_K / q5_0 projections, all with rows a multiple of 16): the AVX-512 VNNI tier for
// all of them, the AVX2 tier for q5_0.
bool AnyDenseRepacks(const ModelWeights& file, const gemv::GemvKernels& k) {
  for (const auto& [got, want] : DenseViews(file, file)) {
    if (want->data != nullptr && gemv::LoadLayout(k, want->type, want->ne[1]) != want->type) {
      return true;
    }
  }
  return false;
}

TEST_P(WeightRepackTest, LosslessAndOnlyWhereTheTierHasGroupTiles) {
  std::unique_ptr<Model> model = *Model::Load(*path_);
  const ModelWeights& file = model->weights();
  const gemv::GemvKernels& k = gemv::KernelsFor(GetParam());
  numa::ThreadPool pool(2);
  StatusOr<DenseRepack> r = RepackDenseWeights(file, k, 0, pool);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->weights.token_embd.data, file.token_embd.data);
  EXPECT_EQ(r->weights.token_embd.type, file.token_embd.type);
  int64_t repacked = 0;
  for (const auto& [got, want] : DenseViews(r->weights, file)) {
    if (want->data == nullptr) continue;
    const GgmlType layout = gemv::LoadLayout(k, want->type, want->ne[1]);
    ASSERT_EQ(got->type, layout) << want->name;
    if (layout == want->type) {
      EXPECT_EQ(got->data, want->data) << want->name;
      continue;
    }
    ++repacked;
    const int64_t rows = want->NumRows(), cols = want->ne[0];  // k_b / v_b: all heads' rows
    ASSERT_EQ(got->nbytes, static_cast<uint64_t>(RowBytes(layout, cols) * rows)) << want->name;
    const size_t row = static_cast<size_t>(RowBytes(want->type, cols));
    std::vector<uint8_t> back(row * quant::kR16Rows);  // [16 x row] one group, unpacked
    for (int64_t g = 0; g < rows / quant::kR16Rows; ++g) {
      const auto* src =
          static_cast<const uint8_t*>(got->data) + g * quant::kR16Rows * RowBytes(layout, cols);
      quant::UnpackRows16(layout, src, cols, back.data(), row);
      ASSERT_EQ(std::memcmp(back.data(),
                            static_cast<const uint8_t*>(want->data) + g * quant::kR16Rows * row,
                            back.size()),
                0)
          << want->name << " group " << g;
    }
  }
  EXPECT_EQ(repacked, r->tensors);
  EXPECT_EQ(r->tensors > 0, AnyDenseRepacks(file, k));
  const bool group_kernels = GetParam() >= cpu::IsaTier::kAvx2;
  EXPECT_EQ(r->tensors > 0, group_kernels) << "q5_0 has group kernels at every SIMD tier";
}

TEST_P(WeightRepackTest, TiedOutputHeadIsNotRepacked) {
  std::unique_ptr<Model> model = *Model::Load(*path_);
  ModelWeights tied = model->weights();
  tied.output = tied.token_embd;  // a file without output.weight
  numa::ThreadPool pool(1);
  StatusOr<DenseRepack> r = RepackDenseWeights(tied, gemv::KernelsFor(GetParam()), 0, pool);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->weights.output.data, tied.token_embd.data);
  EXPECT_EQ(r->weights.output.type, tied.token_embd.type);
}

TEST_P(WeightRepackTest, SessionLogitsMatchTheFileLayout) {
  std::unique_ptr<Model> model = *Model::Load(*path_);
  const std::vector<int32_t> prompt = {1, 5, 9, 200, 17, 3, 44};
  auto logits = [&](bool repack, std::vector<std::string>* report) {
    Session s(
        *model,
        {.ctx_size = 64, .n_threads = 2, .isa_tier = GetParam(), .placement = {.repack = repack}});
    *report = s.placement_report();
    std::vector<float> all = *s.Eval(prompt, /*all_logits=*/true);
    const std::vector<float> next = *s.Eval(std::vector<int32_t>{8}, false);  // one decode step
    all.insert(all.end(), next.begin(), next.end());
    return all;
  };
  std::vector<std::string> report_file, report_repacked;
  const std::vector<float> want = logits(false, &report_file);
  const std::vector<float> got = logits(true, &report_repacked);
  ASSERT_EQ(got.size(), want.size());
  double max_diff = 0, max_abs = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_FALSE(std::isnan(got[i])) << "logit " << i;
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(got[i]) - want[i]));
    max_abs = std::max(max_abs, std::fabs(static_cast<double>(want[i])));
  }
  // Same weights, same activations; the group kernels sum in another order.
  EXPECT_LT(max_diff, 1e-3 * std::max(1.0, max_abs));
  auto mentions = [](const std::vector<std::string>& lines) {
    for (const std::string& l : lines) {
      if (l.find("dense weights repacked") != std::string::npos) return true;
    }
    return false;
  };
  EXPECT_FALSE(mentions(report_file));
  EXPECT_EQ(mentions(report_repacked),
            AnyDenseRepacks(model->weights(), gemv::KernelsFor(GetParam())));
}

// Both MLA forms read the repacked per-head maps: the absorbed form multiplies them, the
// expanded (prefill) form dequantizes them group by group (forward_mla.cc DequantizeRows).
TEST_P(WeightRepackTest, MlaFormsReadRepackedHeadMaps) {
  std::unique_ptr<Model> model = *Model::Load(*path_);
  const ModelConfig& c = model->config();
  const gemv::GemvKernels& k = gemv::KernelsFor(GetParam());
  numa::ThreadPool pool(2);
  StatusOr<DenseRepack> r = RepackDenseWeights(model->weights(), k, 0, pool);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::unique_ptr<moe::ExpertStore> store = *moe::ExpertStore::Build(
      std::vector<moe::ExpertEngine::Layer>(static_cast<size_t>(c.n_layer)), {.nodes = {0}});
  moe::GroupedExperts experts(store.get(), {&pool}, {}, &k);
  constexpr int64_t kTok = 40;
  std::vector<float> hs(static_cast<size_t>(kTok * c.n_embd));  // [kTok x D]
  for (size_t i = 0; i < hs.size(); ++i) hs[i] = std::sin(0.37f * static_cast<float>(i));
  auto attend = [&](const ModelWeights& w, MlaForm form) {
    KvCache kv(c, kTok);
    Workspace ws;
    const ForwardContext ctx{c, w, pool, kv, experts, RopeParamsFor(c), k, ws};
    std::vector<float> out(hs.size(), NAN);  // [kTok x D]
    MlaAttention(ctx, 0, hs.data(), kTok, 0, out.data(), form);
    return out;
  };
  for (MlaForm form : {MlaForm::kAbsorbed, MlaForm::kExpanded}) {
    const std::vector<float> want = attend(model->weights(), form);
    const std::vector<float> got = attend(r->weights, form);
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-3 * (1 + std::fabs(want[i])))
          << (form == MlaForm::kExpanded ? "expanded" : "absorbed") << " value " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTiers, WeightRepackTest, testing::AllIsaTiers(),
                         testing::IsaTierParamName());

}  // namespace
}  // namespace moesplit::engine
