#include "numa/machine_profile.h"

#include <gtest/gtest.h>

#include <cmath>

namespace moesplit::numa {
namespace {

MachineProfile TwoNodes() {
  MachineProfile p;
  p.measured = true;
  p.cpu_model = "AMD EPYC 9554";
  p.topology = "synthetic:pack:2 numa:1 core:64 pu:2";
  p.nodes = {{.node = 0, .read = {{1, 30}, {8, 200}, {64, 380}}, .stream_gbps = 370},
             {.node = 1, .read = {{1, 31}, {64, 381}}}};
  p.cross = {{.cpu_node = 0, .mem_node = 1, .threads = 64, .gbps = 110}};
  p.kernels = {.isa = "avx512vnni", .decode_fraction = 0.9, .gemm_gmacs_per_core = 120,
               .barrier_us = 3.5};
  return p;
}

TEST(MachineProfile, ReadGbpsInterpolates) {
  const MachineProfile p = TwoNodes();
  EXPECT_DOUBLE_EQ(p.ReadGbps(0, 1), 30);
  EXPECT_DOUBLE_EQ(p.ReadGbps(0, 8), 200);
  EXPECT_NEAR(p.ReadGbps(0, 36), 200 + 28.0 / 56 * 180, 1e-9);
  EXPECT_DOUBLE_EQ(p.ReadGbps(0, 128), 380);  // flat above the last point
  EXPECT_DOUBLE_EQ(p.ReadGbps(2, 8), 0);      // unknown node
  EXPECT_DOUBLE_EQ(p.CrossGbps(0, 1), 110);
  EXPECT_DOUBLE_EQ(p.CrossGbps(1, 0), 0);
}

TEST(MachineProfile, YamlRoundTrip) {
  const MachineProfile p = TwoNodes();
  StatusOr<MachineProfile> q = MachineProfileFromYaml(MachineProfileToYaml(p), "x.yaml");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->source, "x.yaml");
  EXPECT_TRUE(q->measured);
  EXPECT_EQ(q->cpu_model, p.cpu_model);
  ASSERT_EQ(q->nodes.size(), 2u);
  EXPECT_EQ(q->nodes[0].read.size(), 3u);
  EXPECT_DOUBLE_EQ(q->nodes[0].read[2].gbps, 380);
  EXPECT_DOUBLE_EQ(q->nodes[0].stream_gbps, 370);
  EXPECT_DOUBLE_EQ(q->CrossGbps(0, 1), 110);
  EXPECT_EQ(q->kernels.isa, "avx512vnni");
  EXPECT_DOUBLE_EQ(q->kernels.barrier_us, 3.5);
}

// The prefill calibrations of `topo --measure`: the MoE curve by tokens per expert, the dense
// rate by weight type and the SwiGLU FFN survive a round trip, and the lookups interpolate.
TEST(MachineProfile, PrefillCalibrations) {
  MachineProfile p = TwoNodes();
  p.kernels.moe_gmacs_per_core = 100;
  p.kernels.moe_gmacs_by_tokens_per_expert = {{6, 40}, {16, 60}, {48, 100}};
  p.kernels.ffn_gmacs_per_core = 170;
  p.kernels.gemm_gmacs_by_type = {{"q4_K", 200}, {"q6_K", 100}, {"f32", 44}};
  StatusOr<MachineProfile> q = MachineProfileFromYaml(MachineProfileToYaml(p), "x.yaml");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->kernels.moe_gmacs_by_tokens_per_expert, p.kernels.moe_gmacs_by_tokens_per_expert);
  EXPECT_EQ(q->kernels.gemm_gmacs_by_type, p.kernels.gemm_gmacs_by_type);
  EXPECT_DOUBLE_EQ(q->kernels.ffn_gmacs_per_core, 170);
  EXPECT_DOUBLE_EQ(q->kernels.moe_gmacs_per_core, 100);

  // Clamped at the ends, linear in log(tokens per expert) between points.
  EXPECT_DOUBLE_EQ(MoeGmacsPerCore(p.kernels, 2), 40);
  EXPECT_DOUBLE_EQ(MoeGmacsPerCore(p.kernels, 16), 60);
  EXPECT_DOUBLE_EQ(MoeGmacsPerCore(p.kernels, 500), 100);
  EXPECT_NEAR(MoeGmacsPerCore(p.kernels, std::sqrt(16.0 * 48)), 80, 1e-9);
  // No curve: the 512-token figure; nothing measured: the assumed share of the dense rate.
  KernelProfile flat = p.kernels;
  flat.moe_gmacs_by_tokens_per_expert.clear();
  EXPECT_DOUBLE_EQ(MoeGmacsPerCore(flat, 16), 100);
  flat.moe_gmacs_per_core = 0;
  EXPECT_DOUBLE_EQ(MoeGmacsPerCore(flat, 16), 120 * 0.29);
  EXPECT_DOUBLE_EQ(MoeGmacsPerCore(flat, 1000), 120 * 0.48);

  // Half the elements at half q4_K's rate: 1.5x slower; unknown types run at q4_K's rate.
  EXPECT_DOUBLE_EQ(TypeMixSlowdown(p.kernels, {{"q4_K", 10}, {"q6_K", 10}}), 1.5);
  EXPECT_DOUBLE_EQ(TypeMixSlowdown(p.kernels, {{"iq2_xxs", 10}}), 1.0);
  EXPECT_DOUBLE_EQ(TypeMixSlowdown(p.kernels, {}), 1.0);

  EXPECT_FALSE(MachineProfileFromYaml("nodes: [{node: 0, read: [{threads: 1, gbps: 1}]}]\n"
                                      "kernels: {gemm_gmacs_by_type: {q4_K: -3}}",
                                      "p.yaml")
                   .ok());
  EXPECT_FALSE(MachineProfileFromYaml("nodes: [{node: 0, read: [{threads: 1, gbps: 1}]}]\n"
                                      "kernels: {moe_gmacs_by_tokens_per_expert: {fast: 3}}",
                                      "p.yaml")
                   .ok());
}

// The routed-expert decode rate per core by type survives a round trip; a bad rate names the
// field and the type.
TEST(MachineProfile, ExpertDecodeRatesPerCore) {
  MachineProfile p = TwoNodes();
  p.kernels.expert_decode_gbps_per_core = {{"iq2_xxs", 27.5}, {"q4_K", 41}};
  StatusOr<MachineProfile> q = MachineProfileFromYaml(MachineProfileToYaml(p), "x.yaml");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->kernels.expert_decode_gbps_per_core, p.kernels.expert_decode_gbps_per_core);
  // Not measured: absent from the file, and read back empty.
  p.kernels.expert_decode_gbps_per_core.clear();
  EXPECT_EQ(MachineProfileToYaml(p).find("expert_decode"), std::string::npos);
  for (const char* bad : {"{iq1_s: 0}", "{iq1_s: -2}", "{iq1_s: fast}", "[1, 2]"}) {
    StatusOr<MachineProfile> r =
        MachineProfileFromYaml(std::string("nodes: [{node: 0, read: [{threads: 1, gbps: 1}]}]\n"
                                           "kernels: {expert_decode_gbps_per_core: ") +
                                   bad + "}",
                               "p.yaml");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().ToString().find("p.yaml.kernels.expert_decode_gbps_per_core"),
              std::string::npos)
        << r.status().ToString();
  }
}

TEST(MachineProfile, ErrorsNameTheField) {
  auto err = [](const std::string& text) {
    StatusOr<MachineProfile> p = MachineProfileFromYaml(text, "p.yaml");
    EXPECT_FALSE(p.ok()) << text;
    return p.ok() ? std::string() : p.status().ToString();
  };
  EXPECT_NE(err("nodes: [").find("not valid YAML"), std::string::npos);
  EXPECT_NE(err("measured: true").find("p.yaml.nodes"), std::string::npos);
  EXPECT_NE(err("nodes: [{node: 0, read: [{threads: 1, gbps: fast}]}]")
                .find("p.yaml.nodes[0].read[0].gbps"),
            std::string::npos);
  EXPECT_NE(err("nodes: [{node: 0, read: [{threads: 2, gbps: 1}, {threads: 1, gbps: 2}]}]")
                .find("ascend"),
            std::string::npos);
  EXPECT_NE(err("nodes: [{node: 0, read: [{threads: 1, gbps: -3}]}]").find("negative"),
            std::string::npos);
  EXPECT_NE(err("nodes: [{node: 0, read: [{threads: 1, gbps: 3}]}, {node: 0, read: [{threads: "
                "1, gbps: 3}]}]")
                .find("twice"),
            std::string::npos);
  EXPECT_FALSE(LoadMachineProfile("/nonexistent/profile.yaml").ok());
}

}  // namespace
}  // namespace moesplit::numa
