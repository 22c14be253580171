#include "numa/machine_profile.h"

#include <gtest/gtest.h>

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
