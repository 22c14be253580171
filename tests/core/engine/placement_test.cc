// Sessions with a CPU placement (engine.h CpuPlacement) compute the same logits as the default
// session: single (pinned pool, experts copied to node memory), interleave, replicate and shard
// over a fake node map (two groups on node 0 of this one-node machine, one CPU each). The
// expert slices, copies, fan-out and partial sums are what a two-socket server runs; only the
// page placement differs. Also: bad placements are errors, not crashes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/engine/engine.h"
#include "core/synth/model_spec.h"
#include "core/synth/model_writer.h"
#include "numa/affinity.h"

namespace moesplit::engine {
namespace {

class PlacementTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = new std::string("placement_test." + std::to_string(::getpid()) + ".gguf");
    const synth::ModelSpec spec =
        synth::BuildModelSpec({.preset = "ds-tiny", .quant = synth::QuantMix::kQ4_K_M}).value();
    ASSERT_TRUE(synth::WriteModel(spec, {.path = *path_, .seed = 11, .show_progress = false}).ok());
  }
  static void TearDownTestSuite() {
    std::remove(path_->c_str());
    delete path_;
  }
  static std::vector<float> Logits(Session& s) {
    const std::vector<int32_t> prompt = {1, 5, 9, 200, 17, 3, 44};
    std::vector<float> all = *s.Eval(prompt, /*all_logits=*/true);
    const std::vector<float> next = *s.Eval(std::vector<int32_t>{8}, false);  // one decode step
    all.insert(all.end(), next.begin(), next.end());
    return all;
  }
  static std::string* path_;
};
std::string* PlacementTest::path_ = nullptr;

CpuPlacement TwoGroups(numa::NumaMode mode) {
  const std::vector<int> cpus = numa::AllowedCpus();
  const int second = cpus.size() > 1 ? cpus[1] : cpus[0];
  return {.mode = mode,
          .groups = {{.mem_nodes = {0}, .cpus = {cpus[0]}}, {.mem_nodes = {0}, .cpus = {second}}}};
}

TEST_F(PlacementTest, EveryModeMatchesTheDefaultSession) {
  std::unique_ptr<Model> model = *Model::Load(*path_);
  Session plain(*model, {.ctx_size = 64, .n_threads = 2});
  const std::vector<float> want = Logits(plain);
  const std::vector<int> cpus = numa::AllowedCpus();
  std::vector<std::pair<std::string, CpuPlacement>> cases = {
      {"single copied",
       {.mode = numa::NumaMode::kSingle,
        .groups = {{.mem_nodes = {0}, .cpus = cpus}},
        .copy_single = true}},
      {"single mapped",
       {.mode = numa::NumaMode::kSingle, .groups = {{.mem_nodes = {0}, .cpus = cpus}}}},
      {"interleave",
       {.mode = numa::NumaMode::kInterleave, .groups = {{.mem_nodes = {0}, .cpus = cpus}}}},
      {"shard 2", TwoGroups(numa::NumaMode::kShard)},
      {"replicate 2", TwoGroups(numa::NumaMode::kReplicate)},
      {"shard unpinned", TwoGroups(numa::NumaMode::kShard)},
  };
  cases.back().second.pin = false;
  for (auto& [name, placement] : cases) {
    StatusOr<std::unique_ptr<Session>> s =
        Session::Create(*model, {.ctx_size = 64, .placement = placement});
    ASSERT_TRUE(s.ok()) << name << ": " << s.status().ToString();
    EXPECT_EQ((*s)->numa_mode(), placement.mode) << name;
    EXPECT_FALSE((*s)->placement_report().empty()) << name;
    const std::vector<float> got = Logits(**s);
    ASSERT_EQ(got.size(), want.size());
    double max_diff = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_FALSE(std::isnan(got[i])) << name << " logit " << i;
      max_diff = std::max(max_diff, std::fabs(static_cast<double>(got[i]) - want[i]));
    }
    // Only the summation order of the partial outputs differs (shard / replicate).
    EXPECT_LT(max_diff, 1e-3) << name;
  }
}

TEST_F(PlacementTest, BadPlacementsAreErrors) {
  std::unique_ptr<Model> model = *Model::Load(*path_);
  CpuPlacement two_single = TwoGroups(numa::NumaMode::kSingle);
  StatusOr<std::unique_ptr<Session>> s = Session::Create(*model, {.placement = two_single});
  EXPECT_FALSE(s.ok());
  CpuPlacement missing_node = TwoGroups(numa::NumaMode::kShard);
  missing_node.groups[1].mem_nodes = {999};
  s = Session::Create(*model, {.placement = missing_node});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().ToString().find("999"), std::string::npos) << s.status().ToString();
  // A CPU the machine does not have: a warning in the report, not a failure.
  CpuPlacement bad_cpu{.groups = {{.mem_nodes = {0}, .cpus = {numa::AllowedCpus()[0], 4000}}}};
  s = Session::Create(*model, {.placement = bad_cpu});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  bool warned = false;
  for (const std::string& line : (*s)->placement_report()) {
    warned |= line.find("warning") != std::string::npos && line.find("4000") != std::string::npos;
  }
  EXPECT_TRUE(warned);
}

}  // namespace
}  // namespace moesplit::engine
