// Plan I/O: YAML round trip (exact, doubles included), JSON keys, text form, errors that name
// the field, NumaMode names.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "numa/plan.h"

namespace moesplit::numa {
namespace {

Plan Sample() {
  Plan p;
  p.model = "ds-v3 Q4_K_M";
  p.ctx_size = 8192;
  p.batch = 512;
  p.numa_mode = NumaMode::kShard;
  p.nodes = {{.id = 0, .threads = 3, .cpus = {0, 1, 2}, .expert_bytes = 1ull << 38,
              .ram_bytes = (1ull << 38) + 12345},
             {.id = 1, .threads = 2, .cpus = {64, 65}, .expert_bytes = 1ull << 37,
              .ram_bytes = 1ull << 37}};
  p.tensors = {{"routed_experts", "cpu", 404'000'000'000ull}, {"attention", "gpu", 11'000'000'000ull},
               {"kv_cache", "gpu", 1'087'000'000ull}};
  p.gpu_bytes = 20'000'000'001ull;
  p.cpu_bytes = (1ull << 38) + (1ull << 37) + 12345;
  p.kv_bytes = 1'087'000'000ull;
  p.kv_device = "gpu";
  p.predicted = {.decode_tok_s = 1.0 / 3,
                 .prefill_tok_s = 123.456789012345678,
                 .bottleneck = "dram_bandwidth",
                 .prefill_bottleneck = "compute",
                 .decode_cpu_s = 0.1,
                 .decode_gpu_s = 2.0 / 7,
                 .decode_sync_s = 1e-17};
  p.reasons = {"fits: node 0", "a reason with: a colon and 'quotes'"};
  return p;
}

void ExpectSame(const Plan& a, const Plan& b) {
  EXPECT_EQ(a.model, b.model);
  EXPECT_EQ(a.ctx_size, b.ctx_size);
  EXPECT_EQ(a.batch, b.batch);
  EXPECT_EQ(a.numa_mode, b.numa_mode);
  ASSERT_EQ(a.nodes.size(), b.nodes.size());
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    EXPECT_EQ(a.nodes[i].id, b.nodes[i].id);
    EXPECT_EQ(a.nodes[i].threads, b.nodes[i].threads);
    EXPECT_EQ(a.nodes[i].cpus, b.nodes[i].cpus);
    EXPECT_EQ(a.nodes[i].expert_bytes, b.nodes[i].expert_bytes);
    EXPECT_EQ(a.nodes[i].ram_bytes, b.nodes[i].ram_bytes);
  }
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    EXPECT_EQ(a.tensors[i].tensor_class, b.tensors[i].tensor_class);
    EXPECT_EQ(a.tensors[i].device, b.tensors[i].device);
    EXPECT_EQ(a.tensors[i].bytes, b.tensors[i].bytes);
  }
  EXPECT_EQ(a.gpu_bytes, b.gpu_bytes);
  EXPECT_EQ(a.cpu_bytes, b.cpu_bytes);
  EXPECT_EQ(a.kv_bytes, b.kv_bytes);
  EXPECT_EQ(a.kv_device, b.kv_device);
  // Exact: the YAML carries 17 significant digits.
  EXPECT_EQ(a.predicted.decode_tok_s, b.predicted.decode_tok_s);
  EXPECT_EQ(a.predicted.prefill_tok_s, b.predicted.prefill_tok_s);
  EXPECT_EQ(a.predicted.bottleneck, b.predicted.bottleneck);
  EXPECT_EQ(a.predicted.prefill_bottleneck, b.predicted.prefill_bottleneck);
  EXPECT_EQ(a.predicted.decode_cpu_s, b.predicted.decode_cpu_s);
  EXPECT_EQ(a.predicted.decode_gpu_s, b.predicted.decode_gpu_s);
  EXPECT_EQ(a.predicted.decode_sync_s, b.predicted.decode_sync_s);
  EXPECT_EQ(a.reasons, b.reasons);
}

TEST(PlanIo, YamlRoundTripIsExact) {
  const Plan p = Sample();
  const std::string yaml = PlanToYaml(p);
  StatusOr<Plan> q = PlanFromYaml(yaml, "p.yaml");
  ASSERT_TRUE(q.ok()) << q.status().ToString() << "\n" << yaml;
  ExpectSame(p, *q);
  EXPECT_EQ(PlanToYaml(*q), yaml);
}

TEST(PlanIo, LoadPlanReadsTheFile) {
  const std::string path = testing::TempDir() + "/plan_io_test_" + std::to_string(getpid()) + ".yaml";
  {
    std::ofstream f(path);
    f << PlanToYaml(Sample());
  }
  StatusOr<Plan> q = LoadPlan(path);
  std::remove(path.c_str());
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  ExpectSame(Sample(), *q);
  StatusOr<Plan> missing = LoadPlan(path);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(path), std::string::npos);
}

TEST(PlanIo, YamlErrorsNameTheField) {
  const std::string good = PlanToYaml(Sample());
  auto error_of = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    StatusOr<Plan> p = PlanFromYaml(text, "x.yaml");
    EXPECT_FALSE(p.ok()) << to;
    return p.ok() ? std::string() : p.status().message();
  };
  EXPECT_NE(error_of("numa_mode: shard", "numa_mode: spread").find("x.yaml.numa_mode"),
            std::string::npos);
  EXPECT_NE(error_of("ctx_size: 8192", "ctx_size: lots").find("x.yaml.ctx_size"),
            std::string::npos);
  EXPECT_NE(error_of("kv_device: gpu", "kv_device: tpu").find("x.yaml.kv_device"),
            std::string::npos);
  EXPECT_NE(error_of("threads: 2", "threads: 5").find("x.yaml.nodes[1].cpus"), std::string::npos);
  EXPECT_NE(error_of("bottleneck: dram_bandwidth", "bottleneck: vibes").find("x.yaml.predicted"),
            std::string::npos);
  EXPECT_NE(error_of("gpu_bytes: 20000000001\n", "").find("x.yaml.gpu_bytes: missing"),
            std::string::npos);
  EXPECT_NE(error_of("ram_bytes: 137438953472", "ram_bytes: -1").find("x.yaml.nodes[1].ram_bytes"),
            std::string::npos);
  EXPECT_FALSE(PlanFromYaml("[1, 2", "bad.yaml").ok());
  EXPECT_FALSE(PlanFromYaml("- a list", "list.yaml").ok());
}

TEST(PlanIo, JsonHasTheIssueKeys) {
  const nlohmann::json j = nlohmann::json::parse(PlanToJson(Sample()));
  for (const char* key : {"numa_mode", "nodes", "gpu_bytes", "cpu_bytes", "kv_bytes", "predicted",
                          "tensors", "reasons"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["numa_mode"], "shard");
  ASSERT_EQ(j["nodes"].size(), 2u);
  for (const char* key : {"id", "threads", "cpus", "expert_bytes"}) {
    EXPECT_TRUE(j["nodes"][0].contains(key)) << key;
  }
  EXPECT_EQ(j["nodes"][1]["cpus"], nlohmann::json({64, 65}));
  EXPECT_EQ(j["nodes"][0]["expert_bytes"].get<uint64_t>(), 1ull << 38);
  for (const char* key : {"decode_tok_s", "prefill_tok_s", "bottleneck"}) {
    EXPECT_TRUE(j["predicted"].contains(key)) << key;
  }
  EXPECT_EQ(j["predicted"]["bottleneck"], "dram_bandwidth");
  EXPECT_EQ(j["tensors"][0]["class"], "routed_experts");
}

TEST(PlanIo, TextShowsTheTableAndReasons) {
  const std::string text = PlanToText(Sample());
  EXPECT_NE(text.find("numa mode: shard"), std::string::npos) << text;
  EXPECT_NE(text.find("0-2"), std::string::npos) << text;  // node 0's cpus as a range
  EXPECT_NE(text.find("64-65"), std::string::npos) << text;
  EXPECT_NE(text.find("routed_experts"), std::string::npos);
  EXPECT_NE(text.find("decode 0.33 tok/s (bottleneck: dram_bandwidth)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("- fits: node 0"), std::string::npos);
}

TEST(PlanIo, NumaModeNames) {
  for (NumaMode m : {NumaMode::kSingle, NumaMode::kInterleave, NumaMode::kReplicate,
                     NumaMode::kShard}) {
    StatusOr<NumaMode> back = NumaModeFromName(NumaModeName(m));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, m);
  }
  StatusOr<NumaMode> bad = NumaModeFromName("distribute");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("single | interleave | replicate | shard"),
            std::string::npos);
}

}  // namespace
}  // namespace moesplit::numa
