// The GPU placement flags and rule files (apps/gpu_placement.h) as a user meets them: `plan`
// prints the per-tensor device map for -ot / --n-cpu-moe / --cpu-moe / rule files; `run` without
// a GPU refuses --device cuda and rules that ask for the GPU, and accepts the rest; with one, the
// hybrid pass's split is checked (CheckHybridSplit, tested here on the tiny model's tensors).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "apps/cmd_plan.h"
#include "apps/cmd_run.h"
#include "apps/gpu_placement.h"
#include "core/synth/model_spec.h"
#include "core/synth/model_writer.h"
#include "tests/testdata.h"

namespace moesplit::app {
namespace {

const std::string kSrc = MOESPLIT_SOURCE_DIR;
const std::string kTopo2s = kSrc + "/configs/topologies/epyc-9554-2s-nps1.xml";

PlanArgs V3Plan(const std::string& gpu_mem) {
  PlanArgs a;
  a.preset = "ds-v3";
  a.topology = kTopo2s;
  a.gpu_mem = gpu_mem;
  return a;
}

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = std::string(MOESPLIT_BINARY_DIR) + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(PlanPlacement, SpareVramTakesTheLastLayersExperts) {
  std::ostringstream out;
  Status s = RunPlan(V3Plan("48G"), out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_NE(out.str().find("GPU  routed_experts  blk 56-60"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("CPU  routed_experts  blk 3-55"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("routed experts of the last 5 MoE layers in VRAM"), std::string::npos);
}

TEST(PlanPlacement, CpuMoeAndOverrideTensor) {
  PlanArgs a = V3Plan("48G");
  a.device.cpu_moe = true;
  std::ostringstream out;
  ASSERT_TRUE(RunPlan(a, out).ok());
  EXPECT_EQ(out.str().find("GPU  routed_experts"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("--cpu-moe"), std::string::npos);
  a = V3Plan("24G");
  a.device.override_tensor = {"exps=CUDA0"};
  std::ostringstream big;
  Status s = RunPlan(a, big);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("rule 'exps=GPU' (-ot)"), std::string::npos) << s.message();
  a = V3Plan("0");
  a.device.override_tensor = {"attn=GPU"};
  s = RunPlan(a, big);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--gpu-mem 0"), std::string::npos) << s.message();
}

TEST(PlanPlacement, NCpuMoeThatDoesNotFitSaysWhatWould) {
  PlanArgs a = V3Plan("48G");
  a.device.n_cpu_moe = 50;
  std::ostringstream out;
  Status s = RunPlan(a, out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("use --n-cpu-moe 56 or more"), std::string::npos) << s.message();
  a.device.n_cpu_moe = -5;
  s = RunPlan(a, out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--n-cpu-moe -5 must be >= 0"), std::string::npos) << s.message();
}

TEST(RuleFiles, EveryShippedFilePlans) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(kSrc + "/configs/placement")) {
    if (e.path().extension() != ".yaml") continue;
    ++n;
    StatusOr<RuleFile> f = LoadRuleFile(e.path().string());
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_FALSE(f->description.empty()) << e.path();
    const std::string name = e.path().filename().string();
    PlanArgs a = V3Plan(name.find("48gb") != std::string::npos ? "48G" : "24G");
    a.device.rules = e.path().string();
    std::ostringstream out;
    Status s = RunPlan(a, out);
    ASSERT_TRUE(s.ok()) << name << ": " << s.ToString();
    EXPECT_EQ(out.str().find("warning"), std::string::npos) << name << "\n" << out.str();
    const bool two_sockets = name.find("-2s") != std::string::npos;
    EXPECT_NE(out.str().find(two_sockets ? "numa mode: shard" : "numa mode: single"),
              std::string::npos)
        << name;
  }
  EXPECT_GE(n, 4);
}

TEST(RuleFiles, ErrorsNameFileLineAndKey) {
  struct Case {
    const char* text;
    const char* expect;
  } cases[] = {
      {"rulez: []\n", "unknown key 'rulez'"},
      {"rules:\n  - {match: '(exps', device: CPU}\n", ":2: "},
      {"rules:\n  - {match: 'exps', device: TPU}\n", "TPU"},
      {"rules:\n  - {match: 'exps'}\n", "rule 1"},
      {"n_cpu_moe: -3\n", "must be >= 0"},
      {"threads: many\n", "threads: expected an integer"},
      {"- a\n- b\n", "expected a YAML map"},
  };
  for (const Case& c : cases) {
    const std::string path = WriteTemp("bad_rules.yaml", c.text);
    StatusOr<RuleFile> f = LoadRuleFile(path);
    ASSERT_FALSE(f.ok()) << c.text;
    EXPECT_NE(f.status().message().find(c.expect), std::string::npos)
        << c.text << " -> " << f.status().message();
    EXPECT_NE(f.status().message().find("bad_rules.yaml"), std::string::npos);
  }
  EXPECT_EQ(LoadRuleFile("/nonexistent/rules.yaml").status().code(), StatusCode::kNotFound);
}

// Mutated rule files and -ot strings: every one is accepted or refused with a message, none
// crashes or hangs (yaml-cpp parses, our layer validates every node it reads).
TEST(RuleFiles, MutationsNeverCrash) {
  const std::string seed_text =
      "description: x\nrules:\n  - {match: '\\.ffn_(up|down)_exps', device: CPU}\n"
      "  - {match: 'attn', device: CUDA0}\nn_cpu_moe: 3\nthreads: 2\nnuma: single\n"
      "nodes: \"0\"\ncpu_moe: false\nn_gpu_layers: 9\n";
  const std::string alphabet = "{}[]:,-'\"\\.|()*+?=\n #&!%@`~0123456789abcCPUGexps";
  std::mt19937 rng(11);
  int ok = 0, refused = 0;
  for (int i = 0; i < 1500; ++i) {
    std::string t = seed_text;
    const int edits = 1 + static_cast<int>(rng() % 6);
    for (int e = 0; e < edits && !t.empty(); ++e) {
      const size_t at = rng() % t.size();
      switch (rng() % 3) {
        case 0:
          t[at] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          t.erase(at, 1 + rng() % 8);
          break;
        default:
          t.insert(at, 1, alphabet[rng() % alphabet.size()]);
          break;
      }
    }
    StatusOr<RuleFile> f = LoadRuleFile(WriteTemp("mutated_rules.yaml", t));
    if (f.ok()) {
      ++ok;
    } else {
      ++refused;
      EXPECT_FALSE(f.status().message().empty());
    }
    StatusOr<std::vector<PlacementRule>> r = ParseOverrideTensor(t.substr(0, 40));
    if (!r.ok()) {
      EXPECT_FALSE(r.status().message().empty());
    }
  }
  EXPECT_GT(ok, 0);
  EXPECT_GT(refused, 0);
}

RunArgs TinyRun() {
  RunArgs a;
  a.model = moesplit::testing::TestDataPath("models/ds-tiny-Q4_K_M.gguf");
  a.prompt = "hi";
  a.n_predict = 2;
  a.threads = 1;
  a.ctx_size = 32;
  return a;
}

TEST(RunDevice, CpuOnlyForwardPassRefusesGpuRequests) {
  std::ostringstream out, err;
  RunArgs a = TinyRun();
  a.placement.device.device = "cuda";
  Status s = RunRun(a, out, err);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--device cuda"), std::string::npos) << s.message();
  a.placement.device.device = "tpu";
  EXPECT_NE(RunRun(a, out, err).message().find("cpu | cuda | auto"), std::string::npos);
  a = TinyRun();
  a.placement.device.override_tensor = {"attn_kv=CUDA0"};
  s = RunRun(a, out, err);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("attn_kv"), std::string::npos) << s.message();
}

TEST(HybridSplit, DefaultIsExpertsOnTheCpuAndOtherSplitsAreRefused) {
  MOESPLIT_REQUIRE_TESTDATA();
  auto file = gguf::GgufFile::Open(TinyRun().model).value();
  const std::vector<TensorEntry> tensors = TensorEntriesOf(file->tensors());
  std::ostringstream err;
  DeviceSettings s;
  // No rule: every MoE layer's experts kAuto (spare VRAM decides); --cpu-moe: all kCpu;
  // --n-cpu-moe 2 + the rest forced to the GPU: 0-1 kCpu, the others kDevice.
  const std::vector<engine::ExpertHome> auto_homes = CheckHybridSplit(s, tensors, err).value();
  ASSERT_EQ(auto_homes.size(), 4u);  // ds-tiny: 4 blocks, the first dense
  for (engine::ExpertHome h : auto_homes) EXPECT_EQ(h, engine::ExpertHome::kAuto);
  EXPECT_NE(err.str().find("routed_experts"), std::string::npos) << err.str();
  EXPECT_NE(err.str().find("GPU  attention"), std::string::npos) << err.str();
  s.rules = {CpuMoeRule()};
  const std::vector<engine::ExpertHome> cpu_homes = CheckHybridSplit(s, tensors, err).value();
  EXPECT_EQ(cpu_homes[0], engine::ExpertHome::kAuto);  // the dense block: no experts
  for (int b = 1; b < 4; ++b) EXPECT_EQ(cpu_homes[b], engine::ExpertHome::kCpu) << b;
  s.rules = {NCpuMoeRule(2), ParseOverrideTensor("exps=CUDA0").value()[0]};
  const std::vector<engine::ExpertHome> mixed = CheckHybridSplit(s, tensors, err).value();
  EXPECT_EQ(mixed[1], engine::ExpertHome::kCpu);
  EXPECT_EQ(mixed[2], engine::ExpertHome::kDevice);
  EXPECT_EQ(mixed[3], engine::ExpertHome::kDevice);
  // One layer's experts split between devices, attention on the CPU, partial -ngl: errors.
  for (const auto& [ot, says] : {std::pair{"blk\\.2\\.ffn_up_exps=CUDA0", "one device"},
                                 std::pair{"attn_kv_a=CPU", "--device cpu"}}) {
    s.rules = ParseOverrideTensor(ot).value();
    const Status st = CheckHybridSplit(s, tensors, err).status();
    ASSERT_FALSE(st.ok()) << ot;
    EXPECT_EQ(st.code(), StatusCode::kUnimplemented);
    EXPECT_NE(st.message().find(says), std::string::npos) << st.message();
  }
  s.rules.clear();
  s.n_gpu_layers = 1;
  const Status st = CheckHybridSplit(s, tensors, err).status();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("-ngl"), std::string::npos) << st.message();
}

// With a GPU, `--device auto` runs the CPU pass on a model the hybrid pass cannot run, saying
// why: the first tensor the GPU would get whose type has no kernel (ds-tiny's output head is
// q6_K; a TQ1_0 file's attention tq1_0), or the architecture (HybridForward::CheckModel).
TEST(HybridSplit, BlockerNamesTheFirstTensorWithoutAGpuKernel) {
  MOESPLIT_REQUIRE_TESTDATA();
  std::unique_ptr<engine::Model> model = engine::Model::Load(TinyRun().model).value();
  // With every type handled, ds-tiny's 64 + 16 latent is what keeps it off the GPU.
  const std::string latent = HybridBlocker(*model, [](GgmlType) { return true; });
  EXPECT_NE(latent.find("512 + 64 latent; this model's is 64 + 16"), std::string::npos) << latent;
  const std::string b = HybridBlocker(*model, [](GgmlType t) { return t != GgmlType::kQ6_K; });
  EXPECT_NE(b.find("output.weight is q6_K"), std::string::npos) << b;
  // The f32 norms (1-D) and the router need no matrix kernel check beyond f32's.
  const std::string f32 = HybridBlocker(*model, [](GgmlType t) { return t != GgmlType::kF32; });
  EXPECT_NE(f32.find("ffn_gate_inp"), std::string::npos) << f32;
  EXPECT_EQ(f32.find("norm"), std::string::npos) << f32;
#ifndef MOESPLIT_HAVE_CUDA
  EXPECT_FALSE(CudaHasKernel(GgmlType::kQ4_K));
#else
  // Q5_1: the first dense ffn_down of the ds-v2-lite IQ4_XS / Q3_K_M mixes (Q5_K's fallback).
  // The lattice types and MXFP4: llama.cpp's IQ mixes put them on attention.
  for (GgmlType t : {GgmlType::kQ4_K, GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kIQ4_NL,
                     GgmlType::kIQ4_XS, GgmlType::kQ5_1, GgmlType::kQ4_1, GgmlType::kIQ2_XXS,
                     GgmlType::kIQ2_XS, GgmlType::kIQ2_S, GgmlType::kIQ3_XXS, GgmlType::kIQ3_S,
                     GgmlType::kIQ1_S, GgmlType::kIQ1_M, GgmlType::kMXFP4}) {
    EXPECT_TRUE(CudaHasKernel(t)) << TypeName(t);
  }
  EXPECT_FALSE(CudaHasKernel(GgmlType::kTQ1_0));
#endif
}

// A legacy attn_kv_b file is no blocker by its layout: the GPU gets attn_k_b / attn_v_b derived
// from it at load, so the derived type (f16 for a quantized kv_b) is what needs a kernel, not
// kv_b's own.
TEST(HybridSplit, LegacyLayoutBlocksOnlyOnTheDerivedType) {
  StatusOr<synth::ModelSpec> spec = synth::BuildModelSpec(
      {.preset = "ds-tiny", .quant = synth::QuantMix::kQ8_0, .mla = synth::MlaLayout::kLegacy});
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  const std::string path = testing::ScratchDir() + "/blocker-legacy-ds-tiny.gguf";
  ASSERT_TRUE(synth::WriteModel(*spec, {.path = path, .threads = 1, .show_progress = false}).ok());
  std::unique_ptr<engine::Model> model = engine::Model::Load(path).value();
  ASSERT_FALSE(model->config().mla_split);
  // Every type handled: only ds-tiny's 64 + 16 latent keeps it off the GPU.
  const std::string all = HybridBlocker(*model, [](GgmlType) { return true; });
  EXPECT_NE(all.find("512 + 64 latent"), std::string::npos) << all;
  // No f16 kernel: the q8_0 kv_b is fine itself, its f16 derivatives are not.
  const std::string f16 = HybridBlocker(*model, [](GgmlType t) { return t != GgmlType::kF16; });
  EXPECT_NE(f16.find("attn_kv_b.weight: the attn_k_b / attn_v_b the GPU needs are derived from "
                     "it in f16"),
            std::string::npos)
      << f16;
  std::remove(path.c_str());
}

TEST(RunDevice, CpuRulesAndIgnoredNglRun) {
  std::ostringstream out, err;
  RunArgs a = TinyRun();
  a.placement.device.override_tensor = {"exps=CPU", "nothing_matches_this=CPU"};
  a.placement.device.n_gpu_layers = 99;
  Status s = RunRun(a, out, err);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_NE(err.str().find("device: cpu ("), std::string::npos) << err.str();
  EXPECT_NE(err.str().find("placement: all"), std::string::npos) << err.str();
  EXPECT_NE(err.str().find("-ngl 99 ignored"), std::string::npos) << err.str();
  EXPECT_NE(err.str().find("nothing_matches_this"), std::string::npos) << err.str();
}

TEST(RunDevice, RuleFileThreadsAndNumaApplyWhereTheFlagsAreUnset) {
  const std::string rules = WriteTemp("run_rules.yaml",
                                      "rules:\n  - {match: exps, device: CPU}\nnuma: single\n"
                                      "nodes: \"0\"\nthreads: 1\n");
  RunArgs a = TinyRun();
  a.threads = 0;
  a.placement.device.rules = rules;
  std::ostringstream out, err;
  Status s = RunRun(a, out, err);
  ASSERT_TRUE(s.ok()) << s.ToString() << err.str();
  EXPECT_NE(err.str().find("(rules: " + rules + ")"), std::string::npos) << err.str();
  EXPECT_NE(err.str().find("pool node 0: 1 workers"), std::string::npos) << err.str();
}

TEST(RunNoMmap, CopiesTheExpertsAndGeneratesTheSameText) {
  RunArgs a = TinyRun();
  a.sampling.seed = 3;
  std::ostringstream out1, err1, out2, err2;
  ASSERT_TRUE(RunRun(a, out1, err1).ok()) << err1.str();
  a.placement.no_mmap = true;
  Status s = RunRun(a, out2, err2);
  ASSERT_TRUE(s.ok()) << s.ToString() << err2.str();
  EXPECT_NE(err2.str().find("experts group 0 (single"), std::string::npos) << err2.str();
  EXPECT_EQ(out1.str(), out2.str());  // the same weights, copied: the same greedy-free sample
}

}  // namespace
}  // namespace moesplit::app
