#include "core/model/device_map.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace moesplit {
namespace {

// A DeepSeek-shaped table: block 0 dense, blocks 1-3 MoE; experts 100 bytes per matrix, the
// rest 1-10 bytes.
std::vector<TensorEntry> Tensors() {
  std::vector<TensorEntry> t = {
      {"token_embd.weight", 10}, {"output_norm.weight", 1}, {"output.weight", 10}};
  for (int b = 0; b < 4; ++b) {
    const std::string p = "blk." + std::to_string(b) + ".";
    t.push_back({p + "attn_norm.weight", 1});
    t.push_back({p + "attn_kv_a_mqa.weight", 5});
    t.push_back({p + "attn_output.weight", 5});
    t.push_back({p + "ffn_norm.weight", 1});
    if (b == 0) {
      for (const char* m : {"ffn_gate", "ffn_up", "ffn_down"}) t.push_back({p + m + ".weight", 8});
      continue;
    }
    t.push_back({p + "ffn_gate_inp.weight", 2});
    for (const char* m : {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"}) {
      t.push_back({p + m + ".weight", 100});
    }
    for (const char* m : {"ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp"}) {
      t.push_back({p + m + ".weight", 3});
    }
  }
  return t;
}

const std::vector<std::string> kAllButExperts = {
    "attention", "norms", "router", "other", "shared_experts", "dense_ffn", "output", "embeddings"};

Device DeviceOf(const std::vector<TensorEntry>& t, const DeviceMap& m, const std::string& name) {
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i].name == name) return m.device[i];
  }
  ADD_FAILURE() << "no tensor " << name;
  return Device::kCpu;
}

TEST(DeviceMap, WithoutGpuEverythingIsOnTheCpu) {
  const auto t = Tensors();
  StatusOr<DeviceMap> m = AssignDevices(t, {.no_gpu_reason = "--device cpu", .n_gpu_layers = 99});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->gpu_bytes, 0u);
  for (Device d : m->device) EXPECT_EQ(d, Device::kCpu);
  ASSERT_EQ(m->warnings.size(), 1u);
  EXPECT_NE(m->warnings[0].find("-ngl 99 ignored"), std::string::npos);
  // A rule that asks for the GPU is an error that says why there is none.
  StatusOr<std::vector<PlacementRule>> r = ParseOverrideTensor("attn=CUDA0");
  ASSERT_TRUE(r.ok());
  StatusOr<DeviceMap> bad = AssignDevices(t, {.rules = *r, .no_gpu_reason = "--device cpu"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--device cpu"), std::string::npos);
  EXPECT_NE(bad.status().message().find("attn=GPU"), std::string::npos);
}

TEST(DeviceMap, PlanClassesAndExpertLayersInVram) {
  const auto t = Tensors();
  StatusOr<DeviceMap> m =
      AssignDevices(t, {.gpu = true, .gpu_classes = kAllButExperts, .gpu_moe_layers = 1});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(DeviceOf(t, *m, "blk.0.attn_kv_a_mqa.weight"), Device::kGpu);
  EXPECT_EQ(DeviceOf(t, *m, "blk.1.ffn_up_exps.weight"), Device::kCpu);
  EXPECT_EQ(DeviceOf(t, *m, "blk.2.ffn_up_exps.weight"), Device::kCpu);
  EXPECT_EQ(DeviceOf(t, *m, "blk.3.ffn_up_exps.weight"), Device::kGpu);  // the last MoE block
  EXPECT_EQ(DeviceOf(t, *m, "blk.3.ffn_up_shexp.weight"), Device::kGpu);
  EXPECT_EQ(m->cpu_bytes, 600u);
  EXPECT_EQ(m->gpu_bytes + m->cpu_bytes, 21u + 4 * 12 + 24 + 3 * (2 + 300 + 9));
}

TEST(DeviceMap, FirstMatchingRuleWins) {
  const auto t = Tensors();
  StatusOr<std::vector<PlacementRule>> r =
      ParseOverrideTensor("blk\\.3\\.ffn_(up|gate)_exps=CUDA0,exps=CPU,attn_output=cpu");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 3u);
  StatusOr<DeviceMap> m = AssignDevices(
      t, {.rules = *r, .gpu = true, .gpu_classes = kAllButExperts, .gpu_moe_layers = 0});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(DeviceOf(t, *m, "blk.3.ffn_up_exps.weight"), Device::kGpu);
  EXPECT_EQ(DeviceOf(t, *m, "blk.3.ffn_down_exps.weight"), Device::kCpu);
  EXPECT_EQ(DeviceOf(t, *m, "blk.1.attn_output.weight"), Device::kCpu);
  EXPECT_EQ(DeviceOf(t, *m, "blk.1.attn_kv_a_mqa.weight"), Device::kGpu);
  const std::string text = DescribeDeviceMap(t, *m);
  EXPECT_NE(text.find("blk 1-3"), std::string::npos) << text;
  EXPECT_NE(text.find("rule 'exps=CPU' (-ot)"), std::string::npos) << text;
  EXPECT_TRUE(m->warnings.empty());
}

TEST(DeviceMap, CpuMoeAndNCpuMoeFollowLlamaCpp) {
  const auto t = Tensors();
  StatusOr<DeviceMap> all = AssignDevices(
      t,
      {.rules = {CpuMoeRule()}, .gpu = true, .gpu_classes = kAllButExperts, .gpu_moe_layers = 3});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->cpu_bytes, 900u);
  // --n-cpu-moe 2: blocks 0 and 1 (block 0 has no experts), so only blk.1's experts.
  StatusOr<DeviceMap> two = AssignDevices(
      t,
      {.rules = {NCpuMoeRule(2)}, .gpu = true, .gpu_classes = kAllButExperts, .gpu_moe_layers = 3});
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(DeviceOf(t, *two, "blk.1.ffn_down_exps.weight"), Device::kCpu);
  EXPECT_EQ(DeviceOf(t, *two, "blk.2.ffn_down_exps.weight"), Device::kGpu);
  EXPECT_EQ(two->cpu_bytes, 300u);
}

TEST(DeviceMap, NglKeepsTheFirstBlocksOnTheCpu) {
  const auto t = Tensors();
  DeviceMapRequest rq{.gpu = true, .gpu_classes = kAllButExperts, .n_gpu_layers = 2};
  StatusOr<DeviceMap> m = AssignDevices(t, rq);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(DeviceOf(t, *m, "blk.1.attn_output.weight"), Device::kCpu);
  EXPECT_EQ(DeviceOf(t, *m, "blk.2.attn_output.weight"), Device::kGpu);
  EXPECT_EQ(DeviceOf(t, *m, "output.weight"), Device::kCpu);  // the head is layer n_layer + 1
  rq.n_gpu_layers = 5;
  m = AssignDevices(t, rq);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(DeviceOf(t, *m, "output.weight"), Device::kGpu);
  EXPECT_EQ(DeviceOf(t, *m, "blk.0.attn_output.weight"), Device::kGpu);
}

TEST(DeviceMap, MoreThanTheVramIsAnErrorNamingTheRule) {
  const auto t = Tensors();
  StatusOr<std::vector<PlacementRule>> r = ParseOverrideTensor("exps=GPU");
  ASSERT_TRUE(r.ok());
  StatusOr<DeviceMap> m = AssignDevices(
      t, {.rules = *r, .gpu = true, .gpu_classes = kAllButExperts, .gpu_weight_budget = 500});
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(m.status().message().find("rule 'exps=GPU' (-ot)"), std::string::npos)
      << m.status().message();
  EXPECT_NE(m.status().message().find("--n-cpu-moe"), std::string::npos);
}

TEST(DeviceMap, UnusedRuleWarns) {
  const auto t = Tensors();
  StatusOr<std::vector<PlacementRule>> r = ParseOverrideTensor("exps=CPU,ffn_up_exps=CPU");
  ASSERT_TRUE(r.ok());
  StatusOr<DeviceMap> m = AssignDevices(t, {.rules = *r, .gpu = true});
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m->warnings.size(), 1u);
  EXPECT_NE(m->warnings[0].find("ffn_up_exps"), std::string::npos);
}

TEST(DeviceMap, BadOverridesNameThePiece) {
  for (const char* bad : {"exps", "=CPU", "exps=TPU", "(exps=CPU", "exps=CUDA1", "a=CPU,,"}) {
    StatusOr<std::vector<PlacementRule>> r = ParseOverrideTensor(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  StatusOr<std::vector<PlacementRule>> r = ParseOverrideTensor("exps=TPU");
  EXPECT_NE(r.status().message().find("'exps=TPU'"), std::string::npos) << r.status().message();
  EXPECT_TRUE(ParseOverrideTensor("blk\\.[0-9]+\\.ffn_.*=cuda").ok());
}

// libstdc++ overflows a long on repetition counts of 19+ digits (undefined behaviour, found by
// yaml_fuzz): numbers past 6 digits are refused before the regex compiler sees them.
TEST(DeviceMap, HugeRegexNumbersAreRefused) {
  for (const char* bad :
       {"a{11111111111111111111}=CPU", "exps{1234567}=CPU", "(a)\\12345678=CPU"}) {
    StatusOr<std::vector<PlacementRule>> r = ParseOverrideTensor(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("more than 6 digits"), std::string::npos)
        << r.status().message();
  }
  EXPECT_TRUE(ParseOverrideTensor("blk\\.[0-9]{1}\\.ffn_up_exps=CPU").ok());
}

}  // namespace
}  // namespace moesplit
