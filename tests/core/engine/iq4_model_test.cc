// The 4-bit make-model mixes: IQ4_XS (llama-quantize IQ4_XS without an importance matrix:
// experts IQ4_XS, the 128-wide rows of ds-tiny's down projections and attn_k_b falling back to
// IQ4_NL) and MXFP4_MOE (every routed expert MXFP4, the rest Q8_0); and UD-IQ2_XXS (gate / up
// IQ2_XXS, repacked to iq2_xxs_r16; ds-tiny's 128-wide down rows Q4_0), UD-IQ1_S and UD-IQ1_M
// (gate / up IQ1_S / IQ1_M, repacked to iq1_s_r16 / iq1_m_r16, the base-3 layouts); and Q4_0
// with an importance matrix's types (16 layers: the first two layers' down projections Q4_1,
// repacked to q4_1_r16). Each file loads, every
// tensor type has a fast kernel at every tier (no reference-matmul fallback), the experts are
// repacked where the tier has the 16-row layouts, and each tier's logits agree with the scalar
// tier's (the reference dots), prompt and decode, repacked or not.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <string>
#include <tuple>
#include <vector>

#include "core/engine/engine.h"
#include "core/gguf/gguf_file.h"
#include "core/synth/model_spec.h"
#include "core/synth/model_writer.h"
#include "cpu_kernels/gemv/gemv.h"
#include "tests/core/engine/logits_util.h"
#include "tests/isa_tiers.h"

namespace moesplit::engine {
namespace {

using moesplit::testing::Pearson;

// What a mix puts where in ds-tiny, and the layout its experts are repacked to.
struct MixCase {
  synth::QuantMix mix;
  GgmlType gate_up, down, output;  // the last layer's experts, the output head
  const char* r16;  // the repacked experts' layout name in the placement report
  int64_t layers = 0;                    // 0: the preset's 4
  GgmlType early_down = GgmlType::kF32;  // layer 1's down experts where they differ (F32: not)
  // The file type whose layout r16 is (the early down projections' where set, else gate / up).
  constexpr GgmlType R16Of() const { return early_down != GgmlType::kF32 ? early_down : gate_up; }
};
constexpr MixCase kMixes[] = {
    {synth::QuantMix::kIQ4_XS, GgmlType::kIQ4_XS, GgmlType::kIQ4_NL, GgmlType::kQ6_K, "iq4_xs_r16"},
    {synth::QuantMix::kMXFP4_MOE, GgmlType::kMXFP4, GgmlType::kMXFP4, GgmlType::kQ8_0, "mxfp4_r16"},
    {synth::QuantMix::kUdIQ2_XXS, GgmlType::kIQ2_XXS, GgmlType::kQ4_0, GgmlType::kQ6_K,
     "iq2_xxs_r16"},
    {synth::QuantMix::kUdIQ1_S, GgmlType::kIQ1_S, GgmlType::kIQ4_NL, GgmlType::kQ6_K, "iq1_s_r16"},
    {synth::QuantMix::kUdIQ1_M, GgmlType::kIQ1_M, GgmlType::kIQ4_NL, GgmlType::kQ6_K, "iq1_m_r16"},
    // Two of llama-quantize's IQ mixes (attention, shared experts and token_embd in lattice types
    // too; IQ2_XS and IQ3_XXS ran here as well, 2026-11-30, and are left out for the ~3 s each
    // test process spends writing a file: their layouts are tested per kernel, and
    // scripts/check-llama-quants.sh runs all four against llama.cpp).
    {synth::QuantMix::kIQ2_M, GgmlType::kIQ2_S, GgmlType::kIQ4_NL, GgmlType::kQ5_K, "iq2_s_r16"},
    {synth::QuantMix::kIQ3_M, GgmlType::kIQ3_S, GgmlType::kIQ4_NL, GgmlType::kQ6_K, "iq3_s_r16"},
    {synth::QuantMix::kQ4_0, GgmlType::kQ4_0, GgmlType::kQ4_0, GgmlType::kQ6_K, "q4_1_r16", 16,
     GgmlType::kQ4_1},
};

class Iq4ModelTest : public ::testing::TestWithParam<std::tuple<cpu::IsaTier, int>> {
 protected:
  // Each file is written on first use only: ctest runs every test in its own process, so
  // writing every mix up front (the IQ1 quantizers are the slow ones) cost each process
  // ~8 s here.
  static void SetUpTestSuite() {
    paths_ = new std::vector<std::string>;
    written_ = new std::vector<bool>(std::size(kMixes), false);
    for (const MixCase& m : kMixes) {
      paths_->push_back(std::string("iq4_model_test.") + synth::QuantMixName(m.mix) + "." +
                        std::to_string(::getpid()) + ".gguf");
    }
  }
  static void TearDownTestSuite() {
    for (size_t i = 0; i < paths_->size(); ++i) {
      if ((*written_)[i]) std::remove((*paths_)[i].c_str());
    }
    delete paths_;
    delete written_;
  }
  void SetUp() override {
    if (static_cast<int>(Tier()) > static_cast<int>(cpu::BestTier(cpu::DetectCpuFeatures()))) {
      GTEST_SKIP() << "this CPU lacks ISA tier " << cpu::IsaTierName(Tier());
    }
    const int i = std::get<1>(GetParam());
    if ((*written_)[i]) return;
    const synth::ModelSpec spec =
        synth::BuildModelSpec(
            {.preset = "ds-tiny", .layers = kMixes[i].layers, .quant = kMixes[i].mix})
            .value();
    // Seed 11: no router near-tie on this prompt. (With seed 9 the avx2 tier's IQ4_XS logits
    // left the scalar tier's by 1e-2 from position 2 on while positions 0-1 agreed to 2e-7 and
    // every other tier to 2e-7 everywhere: a top-k selection flipped by rounding, the effect
    // shared/testdata/README.md measures in llama.cpp itself; the kernels are checked per
    // product in tests/cpu_kernels/gemv_iq4_test.cc and gemv_mxfp4_test.cc.)
    ASSERT_TRUE(
        synth::WriteModel(spec, {.path = (*paths_)[i], .seed = 11, .show_progress = false}).ok());
    (*written_)[i] = true;
  }
  static cpu::IsaTier Tier() { return std::get<0>(GetParam()); }
  static const MixCase& Mix() { return kMixes[std::get<1>(GetParam())]; }
  static const std::string& Path() { return (*paths_)[std::get<1>(GetParam())]; }
  // Logits of a 7-token prompt (every row) and one decode step after it.
  static std::vector<float> Logits(const Model& model, cpu::IsaTier tier, bool repack,
                                   std::vector<std::string>* report = nullptr,
                                   double repack_growth = 0.08) {
    Session s(model, {.ctx_size = 64,
                      .n_threads = 2,
                      .isa_tier = tier,
                      .placement = {.repack = repack, .repack_growth = repack_growth}});
    if (report != nullptr) *report = s.placement_report();
    std::vector<float> all = *s.Eval(std::vector<int32_t>{1, 5, 9, 200, 17, 3, 44}, true);
    const std::vector<float> next = *s.Eval(std::vector<int32_t>{8}, false);
    all.insert(all.end(), next.begin(), next.end());
    return all;
  }
  static std::vector<std::string>* paths_;  // [kMixes]
  static std::vector<bool>* written_;       // [kMixes] by this process
};
std::vector<std::string>* Iq4ModelTest::paths_ = nullptr;
std::vector<bool>* Iq4ModelTest::written_ = nullptr;

TEST_P(Iq4ModelTest, FileHasTheMixAndEveryTypeAFastKernel) {
  std::unique_ptr<Model> model = *Model::Load(Path());
  const ModelWeights& w = model->weights();
  const LayerWeights& moe = w.layers.back();
  EXPECT_EQ(moe.ffn_gate_exps.type, Mix().gate_up);
  EXPECT_EQ(moe.ffn_up_exps.type, Mix().gate_up);
  EXPECT_EQ(moe.ffn_down_exps.type, Mix().down);  // 128-wide rows: IQ4_XS -> IQ4_NL, Q2_K -> Q4_0
  EXPECT_EQ(w.output.type, Mix().output);
  if (Mix().early_down != GgmlType::kF32) {
    EXPECT_EQ(w.layers[1].ffn_down_exps.type, Mix().early_down);
    EXPECT_EQ(w.layers[2].ffn_down_exps.type, Mix().down);
  }
  EXPECT_TRUE(model->FallbackTypes(gemv::KernelsFor(Tier())).empty());
}

// The 16-layer file (Q4_0) is compared at the prompt's first position only: through 16 layers
// of random weights the tiers' ~1e-7 rounding differences grow until a router choice flips,
// from position 1-2 on in 7 of 8 seeds tried (IQ4_XS at 16 layers alike: not the Q4_1 kernels);
// position 0 already runs every layer's experts, the Q4_1 ones included, and agrees to ~2e-7.
TEST_P(Iq4ModelTest, LogitsMatchTheScalarTier) {
  std::unique_ptr<Model> model = *Model::Load(Path());
  const std::vector<float> want = Logits(*model, cpu::IsaTier::kScalar, false);
  const size_t compared = Mix().layers > 0 ? want.size() / 8 : want.size();  // 8 positions
  for (bool repack : {false, true}) {
    std::vector<std::string> report;
    const std::vector<float> got = Logits(*model, Tier(), repack, &report);
    ASSERT_EQ(got.size(), want.size());
    double max_diff = 0, max_abs = 0;
    for (size_t i = 0; i < compared; ++i) {
      ASSERT_FALSE(std::isnan(got[i])) << "logit " << i;
      max_diff = std::max(max_diff, std::fabs(static_cast<double>(got[i]) - want[i]));
      max_abs = std::max(max_abs, std::fabs(static_cast<double>(want[i])));
    }
    // Same integers per block; only the float summation order differs between tiers.
    EXPECT_LT(max_diff, 1e-3 * std::max(1.0, max_abs)) << "repack " << repack;
    EXPECT_GT(Pearson(got.data(), want.data(), static_cast<int64_t>(compared)), 0.99999);
    bool repacked = false;
    for (const std::string& l : report)
      repacked = repacked || l.find(Mix().r16) != std::string::npos;
    const bool native =
        gemv::LoadLayout(gemv::KernelsFor(Tier()), Mix().R16Of(), 16) != Mix().R16Of();
    EXPECT_EQ(repacked, repack && native) << "repack " << repack;
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllTiers, Iq4ModelTest,
    ::testing::Combine(testing::AllIsaTiers(),
                       ::testing::Range(0, static_cast<int>(std::size(kMixes)))),
    [](const ::testing::TestParamInfo<std::tuple<cpu::IsaTier, int>>& info) {
      std::string mix = synth::QuantMixName(kMixes[std::get<1>(info.param)].mix);
      mix.erase(std::remove_if(mix.begin(), mix.end(), [](char c) { return c == '_' || c == '-'; }),
                mix.end());
      return std::string(cpu::IsaTierName(std::get<0>(info.param))) + "_" + mix;
    });

// UD-IQ1_S only (kMixes[3]).
class Iq1GrowthTest : public Iq4ModelTest {};

// --repack-growth 0: IQ1_S's layout is larger than the file's, so its experts stay in the file
// layout, the report says so, and the logits are the scalar tier's as before.
TEST_P(Iq1GrowthTest, RepackGrowthZeroKeepsIq1sInTheFileLayout) {
  ASSERT_EQ(Mix().mix, synth::QuantMix::kUdIQ1_S);
  if (gemv::LoadLayout(gemv::KernelsFor(Tier()), GgmlType::kIQ1_S, 16) == GgmlType::kIQ1_S) {
    GTEST_SKIP() << "no iq1_s_r16 kernel at this tier";
  }
  std::unique_ptr<Model> model = *Model::Load(Path());
  std::vector<std::string> report;
  const std::vector<float> got = Logits(*model, Tier(), true, &report, 0.0);
  const std::vector<float> want = Logits(*model, cpu::IsaTier::kScalar, false);
  bool kept = false, repacked = false;
  for (const std::string& l : report) {
    kept = kept || l.find("experts kept in the file layout") != std::string::npos;
    repacked = repacked || (l.find("experts repacked at load") != std::string::npos &&
                            l.find("iq1_s_r16") != std::string::npos);
  }
  EXPECT_TRUE(kept);
  EXPECT_FALSE(repacked);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_GT(Pearson(got.data(), want.data(), static_cast<int64_t>(got.size())), 0.99999);
}

INSTANTIATE_TEST_SUITE_P(AllTiers, Iq1GrowthTest,
                         ::testing::Combine(testing::AllIsaTiers(), ::testing::Values(3)),
                         [](const ::testing::TestParamInfo<std::tuple<cpu::IsaTier, int>>& info) {
                           return std::string(cpu::IsaTierName(std::get<0>(info.param)));
                         });

}  // namespace
}  // namespace moesplit::engine
