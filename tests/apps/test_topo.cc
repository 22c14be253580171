// `moesplit topo` end to end (in process): the tree of every example machine, JSON that parses
// and matches the text, `--measure --quick` writing a profile the planner can load, and clear
// refusals (measuring another machine, measure-only flags without --measure).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "apps/cmd_topo.h"
#include "core/base/dtype.h"
#include "cpu_kernels/cpu_features.h"
#include "cpu_kernels/gemv/gemv.h"
#include "numa/machine_profile.h"
#include "tests/testdata.h"

namespace moesplit::app {
namespace {

using moesplit::testing::ScratchDir;

const std::string kTopologies = std::string(MOESPLIT_SOURCE_DIR) + "/configs/topologies";

struct Result {
  int code;
  std::string out, err;
};

Result Topo(const TopoArgs& args) {
  std::ostringstream out, err;
  const int code = RunTopo(args, out, err);
  return {code, out.str(), err.str()};
}

TEST(Topo, PrintsEveryExampleMachine) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kTopologies)) {
    if (entry.path().extension() != ".xml") continue;
    ++files;
    TopoArgs args;
    args.topology = entry.path().string();
    Result r = Topo(args);
    ASSERT_EQ(r.code, 0) << args.topology << ": " << r.err;
    EXPECT_NE(r.out.find("topology: xml:" + args.topology), std::string::npos);
    EXPECT_NE(r.out.find("distances"), std::string::npos);
    EXPECT_NE(r.out.find("L3 "), std::string::npos);
  }
  EXPECT_GE(files, 5);
}

TEST(Topo, XeonSnc4Text) {
  TopoArgs args;
  args.topology = kTopologies + "/xeon-8480-2s-snc4.xml";
  Result r = Topo(args);
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* want :
       {"cpu: Intel(R) Xeon(R) Platinum 8480+",
        "machine: 2 package(s), 8 NUMA node(s), 112 cores, 224 PUs, 1024.0 GiB",
        "node 5: 128.0 GiB, 14 cores, 28 PUs (2 PUs per core), cpus 70-83,182-195",
        "L3 26.25 MiB: 14 cores", "     0  10  12  12  12  21  21  21  21"}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  }
}

TEST(Topo, JsonParsesAndMatches) {
  TopoArgs args;
  args.topology = kTopologies + "/epyc-9554-2s-nps4.xml";
  args.format = "json";
  Result r = Topo(args);
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["cores"], 128);
  EXPECT_EQ(j["pus"], 256);
  EXPECT_EQ(j["memory_bytes"], uint64_t{1536} << 30);
  ASSERT_EQ(j["packages"].size(), 2u);
  ASSERT_EQ(j["nodes"].size(), 8u);
  EXPECT_EQ(j["nodes"][5]["cpus"], "80-95,208-223");
  EXPECT_EQ(j["nodes"][5]["primary_cpus"], "80-95");
  EXPECT_EQ(j["nodes"][5]["package"], 1);
  EXPECT_EQ(j["nodes"][0]["l3_groups"][1]["cores"][0]["pus"], nlohmann::json({8, 136}));
  EXPECT_EQ(j["distances"][0][3], 12);
  EXPECT_EQ(j["distances"][0][4], 32);
  EXPECT_TRUE(j["distances_from_source"]);
}

TEST(Topo, LiveAndSynthetic) {
  Result live = Topo(TopoArgs{});
  ASSERT_EQ(live.code, 0) << live.err;
  EXPECT_NE(live.out.find("topology: live"), std::string::npos);
  TopoArgs args;
  args.topology = "pack:2 numa:2 l3:2 core:4 pu:2";
  Result r = Topo(args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("machine: 2 package(s), 4 NUMA node(s), 32 cores, 64 PUs"),
            std::string::npos)
      << r.out;
}

TEST(Topo, BadTopologyIsAnError) {
  TopoArgs args;
  args.topology = "pack:2 nonsense:4";
  Result r = Topo(args);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("pack:2 nonsense:4"), std::string::npos) << r.err;
  args.topology = "/nonexistent/box.xml";
  r = Topo(args);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("NOT_FOUND"), std::string::npos) << r.err;
}

TEST(Topo, MeasureOnlyFlagsNeedMeasure) {
  TopoArgs args;
  args.save = ScratchDir() + "/never.yaml";
  Result r = Topo(args);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("only apply with --measure"), std::string::npos) << r.err;
}

TEST(Topo, MeasureQuickSavesALoadableProfile) {
  const std::string path = ScratchDir() + "/topo_quick_profile.yaml";
  std::filesystem::remove(path);
  TopoArgs args;
  args.measure = true;
  args.quick = true;
  args.save = path;
  Result r = Topo(args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("probe / STREAM = "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("machine profile saved to " + path), std::string::npos);
  EXPECT_NE(r.err.find("[1/"), std::string::npos) << "progress on stderr";
  StatusOr<numa::MachineProfile> p = numa::LoadMachineProfile(path);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(p->measured);
  EXPECT_EQ(p->topology, "live");
  ASSERT_FALSE(p->nodes.empty());
  for (const numa::NodeProfile& n : p->nodes) {
    ASSERT_FALSE(n.read.empty());
    EXPECT_GT(n.read.back().gbps, 0);
    EXPECT_GT(n.stream_gbps, 0);
    EXPECT_GT(n.strided_gbps, 0);
  }
  EXPECT_FALSE(p->kernels.isa.empty());
  EXPECT_GT(p->kernels.decode_fraction, 0);
  EXPECT_GT(p->kernels.gemm_gmacs_per_core, 0);
  EXPECT_GT(p->kernels.barrier_us, 0);
  // Routed-expert decode per core: every tier has q4_K's kernels and quantizer; each rate is
  // a measurement (> 0) and the report lists them.
  EXPECT_GT(p->kernels.expert_decode_gbps_per_core.count("q4_K"), 0u);
  for (const auto& [type, gbps] : p->kernels.expert_decode_gbps_per_core) {
    EXPECT_GT(gbps, 0) << type;
  }
  EXPECT_NE(r.out.find("routed-expert decode by type, 1 thread"), std::string::npos) << r.out;
  // The decode calibrations store their weights as the engine does after loading, and say so:
  // q4_K_r16 where the profile's tier repacks Q4_K, q4_K where it reads the file's layout.
  StatusOr<cpu::IsaTier> tier = cpu::ParseIsaCap(p->kernels.isa);
  ASSERT_TRUE(tier.ok()) << p->kernels.isa;
  const std::string q4k =
      TypeName(gemv::LoadLayout(gemv::KernelsFor(*tier), GgmlType::kQ4_K, 1408));
  EXPECT_NE(r.out.find("2048x1408 experts as " + q4k + " / "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2816x2048 matrices as " + q4k + ", 1 token"), std::string::npos) << r.out;
}

TEST(Topo, MeasureWithoutSavePrintsYamlOnly) {
  TopoArgs args;
  args.measure = true;
  args.quick = true;
  args.threads = "1";
  Result r = Topo(args);
  ASSERT_EQ(r.code, 0) << r.err;
  StatusOr<numa::MachineProfile> p = numa::MachineProfileFromYaml(r.out, "stdout");
  ASSERT_TRUE(p.ok()) << p.status().ToString() << "\n" << r.out;
  EXPECT_TRUE(p->measured);
  EXPECT_EQ(p->nodes[0].read.front().threads, 1);
  EXPECT_NE(r.err.find("topology: live"), std::string::npos) << "the tree goes to stderr";
}

TEST(Topo, MeasureOfAnotherMachineIsRefused) {
  TopoArgs args;
  args.measure = true;
  args.quick = true;
  args.topology = kTopologies + "/epyc-9554-2s-nps4.xml";
  Result r = Topo(args);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("describes another one"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
}

TEST(Topo, ParseByteSize) {
  EXPECT_EQ(*ParseByteSize("1G"), int64_t{1} << 30);
  EXPECT_EQ(*ParseByteSize("512M"), int64_t{512} << 20);
  EXPECT_EQ(*ParseByteSize("64MiB"), int64_t{64} << 20);
  EXPECT_EQ(*ParseByteSize("2gb"), int64_t{2} << 30);
  EXPECT_EQ(*ParseByteSize("4096"), 4096);
  for (const char* bad : {"", "G", "1X", "0", "-1G", "1.5G", "99999999G"}) {
    EXPECT_FALSE(ParseByteSize(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace moesplit::app
