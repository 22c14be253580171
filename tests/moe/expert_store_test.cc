// ExpertStore + GroupedExperts: every NUMA mode computes the same layer as the plain fused path.
// On a one-node machine the groups use a "fake node map" (all on node 0), which exercises the
// slicing, copying, fan-out and partial sums exactly as on a multi-node server; only the page
// placement differs (checked separately: the report names node 0).
#include "moe/expert_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <thread>

#include "cpu_kernels/quant/quant.h"
#include "moe/grouped_experts.h"
#include "numa/thread_pool.h"

namespace moesplit::moe {
namespace {

struct Slab {  // one stacked [cols, rows, E] tensor in a quant type
  std::vector<uint8_t> raw;
  TensorView view;
  Slab(GgmlType t, int64_t cols, int64_t rows, int64_t E, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> n(0.0f, 0.3f);
    const int64_t rb = RowBytes(t, cols);
    raw.resize(static_cast<size_t>(rb * rows * E));
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t i = 0; i < rows * E; ++i) {
      for (float& x : row) x = n(rng);
      quant::QuantizeRow(t, row.data(), raw.data() + i * rb, cols);
    }
    view.type = t;
    view.n_dims = E > 1 ? 3 : 2;
    view.ne = {cols, rows, E, 1};
    view.data = raw.data();
    view.nbytes = raw.size();
  }
};

constexpr int64_t kD = 256, kF = 768, kE = 6, kFs = 512;

struct TestLayer {
  Slab gate{GgmlType::kQ4_K, kD, kF, kE, 1}, up{GgmlType::kQ4_K, kD, kF, kE, 2},
      down{GgmlType::kQ8_0, kF, kD, kE, 3};
  Slab sgate{GgmlType::kQ4_K, kD, kFs, 1, 4}, sup{GgmlType::kQ4_K, kD, kFs, 1, 5},
      sdown{GgmlType::kQ6_K, kFs, kD, 1, 6};
  ExpertEngine::Layer Layer() const {
    return {gate.view, up.view, down.view, sgate.view, sup.view, sdown.view};
  }
};

TEST(ShardSlice, BlockAlignedAndCovering) {
  EXPECT_EQ(ShardSlice(2048, 256, 0, 2).f1, 1024);
  EXPECT_EQ(ShardSlice(2048, 256, 1, 2).f0, 1024);
  EXPECT_EQ(ShardSlice(1408, 32, 0, 2).f1, 704);
  for (int n : {1, 2, 3, 5}) {
    int64_t next = 0;
    for (int g = 0; g < n; ++g) {
      const FSlice s = ShardSlice(512, 256, g, n);
      EXPECT_EQ(s.f0, next);
      EXPECT_EQ(s.f0 % 256, 0);
      EXPECT_GE(s.f1, s.f0);
      next = s.f1;
    }
    EXPECT_EQ(next, 512);
  }
}

struct Case {
  numa::NumaMode mode;
  int groups;
  bool repack = false;  // repack_for = the best tier's kernels (Q4_K -> 16-row groups on VNNI)
};

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  static constexpr const char* kNames[] = {"single", "interleave", "replicate", "shard"};
  return std::string(kNames[static_cast<int>(info.param.mode)]) + "_" +
         std::to_string(info.param.groups) + (info.param.repack ? "_repack" : "");
}

class GroupedTest : public ::testing::TestWithParam<Case> {};

TEST_P(GroupedTest, MatchesThePlainFusedPath) {
  const Case c = GetParam();
  const gemv::GemvKernels& kernels = gemv::KernelsFor(cpu::BestTier(cpu::DetectCpuFeatures()));
  TestLayer tl;
  // Layer 0 dense (no experts), layer 1 MoE.
  std::vector<ExpertEngine::Layer> layers(2);
  layers[1] = tl.Layer();
  std::vector<std::unique_ptr<numa::ThreadPool>> pools;
  std::vector<moesplit::Executor*> execs;
  for (int g = 0; g < c.groups; ++g) {
    pools.push_back(std::make_unique<numa::ThreadPool>(1 + g % 2));
    execs.push_back(pools.back().get());
  }
  std::vector<int> nodes(c.mode == numa::NumaMode::kSingle ? 1 : c.groups, 0);
  uint64_t last_done = 0;
  StatusOr<std::unique_ptr<ExpertStore>> store = ExpertStore::Build(
      layers, {.mode = c.mode,
               .nodes = nodes,
               .copiers = execs,
               .copy = !c.repack,         // a repack must copy on its own
               .release_mapping = false,  // the slabs are heap memory, not a file mapping
               .repack_for = c.repack ? &kernels : nullptr,
               .progress = [&](uint64_t done, uint64_t) { last_done = done; }});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  // Repacked: the Q4_K gate/up of the routed and the shared expert, the routed Q8_0 down and the
  // shared Q6_K down (whole 16-row groups), in every group.
  const bool native = c.repack && kernels.native_layout[static_cast<size_t>(GgmlType::kQ4_K_R16)];
  ASSERT_EQ(native, c.repack && kernels.native_layout[static_cast<size_t>(GgmlType::kQ8_0_R16)]);
  // A repack copies on its own. Where the best tier has no 16-row kernels (an AVX2-only CPU) a
  // repack-only single store has nothing to change and keeps the slabs in place; shard and
  // replicate copy per node anyway.
  const bool per_node = c.mode == numa::NumaMode::kShard || c.mode == numa::NumaMode::kReplicate;
  const bool copies = !c.repack || native || per_node;
  EXPECT_EQ((*store)->copied(), copies);
  int64_t present = 0;  // repackable tensors of non-empty slices (shard: a slice can be empty)
  for (int g = 0; g < c.groups; ++g) {
    const ExpertEngine::Layer& l = (*store)->layer(g, 1);
    for (const TensorView* t : {&l.gate_exps, &l.up_exps, &l.gate_shexp, &l.up_shexp}) {
      if (t->data == nullptr) continue;
      ++present;
      EXPECT_EQ(t->type, native ? GgmlType::kQ4_K_R16 : GgmlType::kQ4_K) << "group " << g;
    }
    if (l.down_exps.data != nullptr) {
      ++present;
      EXPECT_EQ(l.down_exps.type, native ? GgmlType::kQ8_0_R16 : GgmlType::kQ8_0) << "group " << g;
    }
    if (l.down_shexp.data != nullptr) {
      ++present;
      EXPECT_EQ(l.down_shexp.type, native ? GgmlType::kQ6_K_R16 : GgmlType::kQ6_K) << "group " << g;
    }
  }
  EXPECT_EQ((*store)->repacked_tensors(), native ? present : 0);
  if (copies) {
    EXPECT_GT(last_done, 0u);
  } else {
    EXPECT_EQ(last_done, 0u);  // no copy, no progress
  }
  ASSERT_EQ((*store)->num_groups(), c.groups);
  for (const std::string& line : (*store)->Report()) {
    EXPECT_NE(line.find("node 0"), std::string::npos) << line;
  }
  auto run_groups = [](const std::function<void(int)>& fn, int n) {
    std::vector<std::thread> t;
    for (int g = 1; g < n; ++g) t.emplace_back(fn, g);
    fn(0);
    for (auto& x : t) x.join();
  };
  GroupedExperts grouped(
      store->get(), execs, [&](const std::function<void(int)>& fn) { run_groups(fn, c.groups); },
      &kernels);
  numa::ThreadPool ref_pool(2);
  ExpertEngine ref(&ref_pool, &kernels);
  std::mt19937 rng(7);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (int64_t T : {1, 3, 17}) {
    const int k = 3;
    std::vector<float> x(T * kD), w(T * k);
    std::vector<int32_t> ids(T * k);
    for (float& v : x) v = n(rng);
    for (int64_t t = 0; t < T; ++t) {
      for (int j = 0; j < k; ++j) {
        ids[t * k + j] = static_cast<int32_t>((t * 5 + j * (1 + t % 2)) % kE);
        w[t * k + j] = 0.2f + 0.1f * j;
      }
    }
    std::vector<float> want(T * kD, std::numeric_limits<float>::quiet_NaN()), got = want;
    ref.Forward(layers[1], x.data(), T, ids.data(), w.data(), k, want.data());
    grouped.Forward(1, x.data(), T, ids.data(), w.data(), k, got.data());
    for (int64_t i = 0; i < T * kD; ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-4f * (1 + std::fabs(want[i])))
          << "T " << T << " element " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Modes, GroupedTest,
    ::testing::Values(Case{numa::NumaMode::kSingle, 1}, Case{numa::NumaMode::kInterleave, 1},
                      Case{numa::NumaMode::kShard, 2}, Case{numa::NumaMode::kShard, 3},
                      Case{numa::NumaMode::kShard, 4}, Case{numa::NumaMode::kReplicate, 2},
                      Case{numa::NumaMode::kReplicate, 3}, Case{numa::NumaMode::kSingle, 1, true},
                      Case{numa::NumaMode::kShard, 3, true},
                      Case{numa::NumaMode::kReplicate, 2, true}),
    CaseName);

TEST(ExpertStore, Errors) {
  std::vector<ExpertEngine::Layer> layers(1);
  EXPECT_FALSE(ExpertStore::Build(layers, {.nodes = {}}).ok());
  EXPECT_FALSE(ExpertStore::Build(layers, {.mode = numa::NumaMode::kSingle, .nodes = {0, 0}}).ok());
  TestLayer tl;
  layers[0] = tl.Layer();
  StatusOr<std::unique_ptr<ExpertStore>> bad =
      ExpertStore::Build(layers, {.mode = numa::NumaMode::kShard, .nodes = {0, 999}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().ToString().find("999"), std::string::npos) << bad.status().ToString();
}

// IQ1_S's 16-row layout grows its tensors (58 / 50 bytes): repack_growth_limit caps what the
// repacks may add, in layer order, the rest keeping the file layout; -1 repacks everything.
// Each store's layer still computes what the plain fused path does.
TEST(ExpertStore, RepackGrowthLimitKeepsTheRestInTheFileLayout) {
  const gemv::GemvKernels& kernels = gemv::KernelsFor(cpu::BestTier(cpu::DetectCpuFeatures()));
  if (gemv::LoadLayout(kernels, GgmlType::kIQ1_S, kF) != GgmlType::kIQ1_S_R16) {
    GTEST_SKIP() << "no native iq1_s_r16 kernel on this CPU (AVX-512 VNNI + VBMI + GFNI)";
  }
  const Slab gate(GgmlType::kIQ1_S, kD, kF, kE, 1), up(GgmlType::kIQ1_S, kD, kF, kE, 2),
      down(GgmlType::kQ8_0, kF, kD, kE, 3);
  std::vector<ExpertEngine::Layer> layers(2);
  layers[1] = {gate.view, up.view, down.view};
  // One IQ1_S tensor grows by 8 bytes per 256 values: kF rows x kE experts x 8.
  const int64_t one = kF * kE * (58 - 50) * (kD / 256);
  struct Want {
    int64_t limit;
    GgmlType gate, up;
    int64_t kept;
  };
  for (const Want& w : {Want{-1, GgmlType::kIQ1_S_R16, GgmlType::kIQ1_S_R16, 0},
                        Want{one, GgmlType::kIQ1_S_R16, GgmlType::kIQ1_S, 1},
                        Want{one - 1, GgmlType::kIQ1_S, GgmlType::kIQ1_S, 2}}) {
    StatusOr<std::unique_ptr<ExpertStore>> store =
        ExpertStore::Build(layers, {.nodes = {0},
                                    .release_mapping = false,
                                    .repack_for = &kernels,
                                    .repack_growth_limit = w.limit});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    const ExpertEngine::Layer& l = (*store)->layer(0, 1);
    EXPECT_EQ(l.gate_exps.type, w.gate) << "limit " << w.limit;
    EXPECT_EQ(l.up_exps.type, w.up) << "limit " << w.limit;
    EXPECT_EQ(l.down_exps.type, kernels.native_layout[static_cast<size_t>(GgmlType::kQ8_0_R16)]
                                    ? GgmlType::kQ8_0_R16
                                    : GgmlType::kQ8_0);
    EXPECT_EQ((*store)->kept_tensors(), w.kept) << "limit " << w.limit;
    EXPECT_EQ((*store)->growth(), static_cast<uint64_t>(one * (2 - w.kept)));
    EXPECT_EQ((*store)->kept_growth(), static_cast<uint64_t>(one * w.kept));
    numa::ThreadPool pool(2);
    ExpertEngine ref(&pool, &kernels);
    GroupedExperts grouped(store->get(), {&pool}, nullptr, &kernels);
    std::vector<float> x(kD, 0.5f);
    for (int64_t i = 0; i < kD; ++i) x[i] = std::sin(0.1f * static_cast<float>(i));
    const int32_t ids[2] = {1, 4};
    const float wts[2] = {0.6f, 0.4f};
    std::vector<float> want(kD), got(kD);
    ref.Forward(layers[1], x.data(), 1, ids, wts, 2, want.data());
    grouped.Forward(1, x.data(), 1, ids, wts, 2, got.data());
    for (int64_t i = 0; i < kD; ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-4f * (1 + std::fabs(want[i]))) << "limit " << w.limit;
    }
  }
}

// Whether the page holding p is mapped in this process (/proc/self/pagemap bit 63; mincore
// would answer for the page cache, which keeps a released file page).
bool PagePresent(const void* p) {
  const long page = sysconf(_SC_PAGESIZE);
  const int fd = ::open("/proc/self/pagemap", O_RDONLY);
  EXPECT_GE(fd, 0);
  uint64_t entry = 0;
  const off_t off = static_cast<off_t>(reinterpret_cast<uintptr_t>(p) / page * 8);
  EXPECT_EQ(::pread(fd, &entry, 8, off), 8);
  ::close(fd);
  return (entry >> 63) & 1;
}

// Runs the tasks in order on the calling thread, calling after(n_tasks, task) after each.
class InOrder final : public moesplit::Executor {
 public:
  std::function<void(int64_t, int64_t)> after;
  int size() const override { return 1; }
  void ParallelFor(int64_t n, const std::function<void(int64_t, int)>& fn) override {
    for (int64_t t = 0; t < n; ++t) {
      fn(t, 0);
      after(n, t);
    }
  }
};

// With release_mapping, the file pages of each routed expert go right after it is copied, not
// when the whole layer is done (a V3 layer is 6-7 GB: that was +44% of peak resident memory on
// a 5-layer V3 file): after expert e's copy its gate / up / down pages are gone and expert
// e + 1's are still mapped.
TEST(ExpertStore, ReleasesEachExpertsFilePagesAsSoonAsItIsCopied) {
  TestLayer tl;
  const std::string path =
      ::testing::TempDir() + "/expert_store_release." + std::to_string(::getpid()) + ".bin";
  const long page = sysconf(_SC_PAGESIZE);
  std::vector<Slab*> slabs = {&tl.gate, &tl.up, &tl.down, &tl.sgate, &tl.sup, &tl.sdown};
  std::vector<size_t> offsets;
  {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    size_t at = 0;
    for (Slab* s : slabs) {
      offsets.push_back(at);
      std::fseek(f, static_cast<long>(at), SEEK_SET);
      ASSERT_EQ(std::fwrite(s->raw.data(), 1, s->raw.size(), f), s->raw.size());
      at += (s->raw.size() + page - 1) / page * page;
    }
    std::fclose(f);
  }
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  const size_t size = offsets.back() + slabs.back()->raw.size();
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  ASSERT_NE(map, MAP_FAILED);
  for (size_t i = 0; i < slabs.size(); ++i) {
    slabs[i]->view.data = static_cast<const uint8_t*>(map) + offsets[i];
    volatile uint8_t sum = 0;  // fault every page in
    for (size_t b = 0; b < slabs[i]->raw.size(); b += static_cast<size_t>(page)) {
      sum = sum + static_cast<const volatile uint8_t*>(slabs[i]->view.data)[b];
    }
  }
  // The middle page of expert e of a routed tensor.
  auto mid = [&](const Slab& s, int64_t e) {
    const size_t per = s.raw.size() / kE;
    return static_cast<const uint8_t*>(s.view.data) + e * per + per / 2;
  };
  for (int64_t e = 0; e < kE; ++e) ASSERT_TRUE(PagePresent(mid(tl.gate, e)));
  InOrder copier;
  int checked = 0;
  copier.after = [&](int64_t n, int64_t e) {
    if (n != kE) return;  // the shared expert's one task
    for (const Slab* s : {&tl.gate, &tl.up, &tl.down}) {
      EXPECT_FALSE(PagePresent(mid(*s, e))) << "expert " << e << " still mapped";
      if (e + 1 < kE) {
        EXPECT_TRUE(PagePresent(mid(*s, e + 1))) << "expert " << e + 1 << " gone";
      }
    }
    ++checked;
  };
  std::vector<ExpertEngine::Layer> layers = {tl.Layer()};
  StatusOr<std::unique_ptr<ExpertStore>> store = ExpertStore::Build(
      layers, {.nodes = {0}, .copiers = {&copier}, .copy = true, .release_mapping = true});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ(checked, kE);
  ::munmap(map, size);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace moesplit::moe
