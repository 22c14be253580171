// The planner's decisions and cost model on hand-built topologies and model shapes (no hwloc,
// no files): the fastest predicted mode that fits (single on one node, shard when a second
// socket adds bandwidth); larger than a node -> shard; larger than RAM, attention
// + KV larger than VRAM -> refusals with the numbers; the GPU takes attention first; overrides;
// the cost model's arithmetic on a case small enough to do by hand.
#include "numa/planner.h"

#include <gtest/gtest.h>

#include <cmath>

#include "numa/cost_model.h"

namespace moesplit::numa {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

// `packages` x `nodes_per_package` nodes of `cores` cores with 2 PUs each, numbered like Linux on
// EPYC: PU ids of core g (machine-wide) are g and g + total cores.
Topology MakeTopology(int packages, int nodes_per_package, int cores, uint64_t memory_per_node) {
  Topology t;
  t.source = "test";
  const int total_cores = packages * nodes_per_package * cores;
  int g = 0;
  for (int p = 0; p < packages; ++p) {
    Package pk;
    pk.id = p;
    for (int n = 0; n < nodes_per_package; ++n) {
      NumaNode node;
      node.id = static_cast<int>(t.nodes.size());
      node.package = p;
      node.memory_bytes = memory_per_node;
      L3Group l3;
      for (int c = 0; c < cores; ++c, ++g) l3.cores.push_back({g, {g, g + total_cores}});
      node.l3_groups.push_back(l3);
      pk.nodes.push_back(node.id);
      t.nodes.push_back(node);
    }
    t.packages.push_back(pk);
  }
  return t;
}

// Every node reads `gbps` with any thread count; cross-node pairs at `cross_gbps` (0: none).
MachineProfile FlatProfile(const Topology& t, double gbps, double cross_gbps,
                           double barrier_us = 0) {
  MachineProfile p;
  p.source = "test-profile";
  p.measured = true;
  // One point at 1 thread: ReadGbps is flat above the last point.
  for (const NumaNode& n : t.nodes) p.nodes.push_back({.node = n.id, .read = {{1, gbps}}});
  for (const NumaNode& a : t.nodes) {
    for (const NumaNode& b : t.nodes) {
      if (a.id != b.id && cross_gbps > 0) p.cross.push_back({a.id, b.id, 8, cross_gbps});
    }
  }
  p.kernels = {.isa = "test", .decode_fraction = 1.0, .gemm_gmacs_per_core = 100,
               .barrier_us = barrier_us};
  return p;
}

// A DeepSeek-like shape: 10 layers (1 dense + 9 MoE), 64 experts top-8; `routed` bytes of
// routed experts, `other` bytes split over the other classes.
ModelShape Toy(uint64_t routed, uint64_t other) {
  ModelShape m;
  m.name = "toy";
  m.arch = "deepseek2";
  m.quant = "Q4_K_M";
  m.n_layers = 10, m.n_moe_layers = 9, m.n_dense_layers = 1;
  m.n_embd = 4096, m.n_vocab = 32000, m.n_head = 32;
  m.n_expert = 64, m.n_expert_used = 8, m.n_expert_shared = 1;
  m.n_ff_exp = 1024, m.n_ff = 8192;
  m.bytes.routed_experts = routed;
  m.bytes.attention = other / 2;
  m.bytes.shared_experts = other / 8;
  m.bytes.dense_ffn = other / 8;
  m.bytes.output = other / 8;
  m.bytes.embeddings = other / 8;
  m.bytes.norms = 1 << 20;
  m.bytes.router = 1 << 20;
  // Q4_K: 4.5 bits per weight -> params = bytes * 16 / 9.
  auto params = [](uint64_t b) { return b * 16 / 9; };
  m.params = {params(m.bytes.routed_experts), params(m.bytes.shared_experts),
              params(m.bytes.dense_ffn),      params(m.bytes.attention),
              m.bytes.router / 4,             m.bytes.norms / 4,
              params(m.bytes.embeddings),     params(m.bytes.output), 0};
  m.routed_bytes_per_expert_layer = routed / (9 * 64);
  m.routed_params_per_expert_layer = params(routed) / (9 * 64);
  m.kv_bytes_per_token_f16 = 10 * 1088 * 2;
  m.kv_bytes_per_token_f32 = 10 * 1088 * 4;
  m.kv_gpu_bytes_per_token = 10 * 576 * 2;  // f16 latent rows (512 + 64) per layer
  m.attn_macs_per_position = 32 * 1088 * 10;
  return m;
}

const TensorPlacement* Find(const Plan& p, const std::string& cls, const std::string& device) {
  for (const TensorPlacement& t : p.tensors) {
    if (t.tensor_class == cls && t.device == device) return &t;
  }
  return nullptr;
}

bool AnyReasonHas(const Plan& p, const std::string& text) {
  for (const std::string& r : p.reasons) {
    if (r.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(Planner, FitsInOneNodeIsSingleOnEveryCore) {
  const Topology t = MakeTopology(1, 1, 16, 128 * kGiB);
  StatusOr<Plan> p = MakePlan(t, FlatProfile(t, 100, 0), {.model = Toy(20 * kGiB, 4 * kGiB)});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->numa_mode, NumaMode::kSingle);
  ASSERT_EQ(p->nodes.size(), 1u);
  EXPECT_EQ(p->nodes[0].threads, 16);
  ASSERT_EQ(p->nodes[0].cpus.size(), 16u);
  EXPECT_EQ(p->nodes[0].cpus.front(), 0);  // primary PUs: 0..15, not the SMT siblings 16..31
  EXPECT_EQ(p->nodes[0].cpus.back(), 15);
  EXPECT_EQ(p->nodes[0].expert_bytes, 20 * kGiB);
  EXPECT_EQ(p->kv_device, "cpu");
  EXPECT_EQ(p->gpu_bytes, 0u);
  // Everything is on the CPU: RAM = all tensors + KV (4096 tokens f32, as run / chat / serve
  // allocate it).
  EXPECT_EQ(p->cpu_bytes, Toy(20 * kGiB, 4 * kGiB).bytes.Total() + 4096 * 10 * 1088 * 4);
  EXPECT_EQ(p->kv_bytes, 4096u * 10 * 1088 * 4);
  EXPECT_GT(p->predicted.decode_tok_s, 0);
  EXPECT_GT(p->predicted.prefill_tok_s, 0);
}

TEST(Planner, DecodeArithmeticOnOneNode) {
  // 100 GB/s, decode_fraction 1, no barriers, no GPU: s/token = bytes read / 1e11 with
  // bytes = 8 experts x (routed / 576) x 9 layers + non-expert bytes + one embedding row.
  const Topology t = MakeTopology(1, 1, 16, 128 * kGiB);
  const ModelShape m = Toy(36 * kGiB, 4 * kGiB);
  StatusOr<Plan> p = MakePlan(t, FlatProfile(t, 100, 0), {.model = m});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const double routed = 8.0 * m.routed_bytes_per_expert_layer * 9;
  const double dense = static_cast<double>(m.bytes.Total() - m.bytes.routed_experts -
                                           m.bytes.embeddings) +
                       static_cast<double>(m.bytes.embeddings) / m.n_vocab;
  EXPECT_NEAR(1 / p->predicted.decode_tok_s, (routed + dense) / 100e9, 1e-9);
  EXPECT_EQ(p->predicted.bottleneck, "dram_bandwidth");
  EXPECT_NEAR(p->predicted.decode_cpu_s + p->predicted.decode_gpu_s + p->predicted.decode_sync_s,
              1 / p->predicted.decode_tok_s, 1e-12);
}

TEST(Planner, DecodeWaitsOnExpertKernelsSlowerThanTheMemory) {
  // IQ2_XXS experts at 20 GB/s per core (measured by topo --measure) against 100 GB/s of
  // memory: 2 cores compute 40 GB/s, so the routed experts take routed / 40e9, not / 100e9;
  // 16 cores compute 320 and the memory binds again.
  ModelShape m = Toy(36 * kGiB, 4 * kGiB);
  m.routed_bytes_by_type = {{"iq2_xxs", m.bytes.routed_experts}};
  const double routed = 8.0 * m.routed_bytes_per_expert_layer * 9;
  const double dense =
      static_cast<double>(m.bytes.Total() - m.bytes.routed_experts - m.bytes.embeddings) +
      static_cast<double>(m.bytes.embeddings) / m.n_vocab;
  for (const int cores : {2, 16}) {
    SCOPED_TRACE(cores);
    const Topology t = MakeTopology(1, 1, cores, 128 * kGiB);
    MachineProfile prof = FlatProfile(t, 100, 0);
    prof.kernels.expert_decode_gbps_per_core = {{"iq2_xxs", 20}, {"q4_K", 60}};
    StatusOr<Plan> p = MakePlan(t, prof, {.model = m});
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    if (cores == 2) {
      EXPECT_NEAR(1 / p->predicted.decode_tok_s, routed / 40e9 + dense / 100e9, 1e-9);
      EXPECT_EQ(p->predicted.bottleneck, "compute");
      EXPECT_TRUE(AnyReasonHas(*p, "compute-bound")) << p->reasons.size();
      EXPECT_TRUE(AnyReasonHas(*p, "iq2_xxs 20.0"));
    } else {
      EXPECT_NEAR(1 / p->predicted.decode_tok_s, (routed + dense) / 100e9, 1e-9);
      EXPECT_EQ(p->predicted.bottleneck, "dram_bandwidth");
      EXPECT_FALSE(AnyReasonHas(*p, "compute-bound"));
    }
  }
  // Q4_K experts at 60 GB/s per core: 2 cores compute 120, above the memory's 100.
  m.routed_bytes_by_type = {{"q4_K", m.bytes.routed_experts}};
  const Topology t = MakeTopology(1, 1, 2, 128 * kGiB);
  MachineProfile prof = FlatProfile(t, 100, 0);
  prof.kernels.expert_decode_gbps_per_core = {{"iq2_xxs", 20}, {"q4_K", 60}};
  StatusOr<Plan> p = MakePlan(t, prof, {.model = m});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_NEAR(1 / p->predicted.decode_tok_s, (routed + dense) / 100e9, 1e-9);
  EXPECT_EQ(p->predicted.bottleneck, "dram_bandwidth");
}

TEST(Planner, ExpertDecodeComputeSecondsSplitsTheBytesByType) {
  KernelProfile k;
  k.expert_decode_gbps_per_core = {{"q2_K", 40}, {"q3_K", 20}};
  // 3/4 of the bytes q2_K at 40 GB/s per core, 1/4 q3_K at 20, 2 threads, 8 GB per token:
  // 6e9 / 80e9 + 2e9 / 40e9 = 0.125 s.
  EXPECT_DOUBLE_EQ(ExpertDecodeComputeSeconds(k, {{"q2_K", 3}, {"q3_K", 1}}, 8e9, 2), 0.125);
  // A type without a rate adds nothing; no rates at all or no bytes: 0 (no cap).
  EXPECT_DOUBLE_EQ(ExpertDecodeComputeSeconds(k, {{"q2_K", 1}, {"iq1_s", 1}}, 8e9, 1), 0.1);
  EXPECT_DOUBLE_EQ(ExpertDecodeComputeSeconds(KernelProfile{}, {{"q2_K", 1}}, 8e9, 2), 0);
  EXPECT_DOUBLE_EQ(ExpertDecodeComputeSeconds(k, {}, 8e9, 2), 0);
}

TEST(Planner, LargerThanANodeIsShard) {
  // 2 sockets x 1 node x 8 cores x 16 GiB: 24 GiB of experts fit in no node.
  const Topology t = MakeTopology(2, 1, 8, 16 * kGiB);
  StatusOr<Plan> p = MakePlan(t, FlatProfile(t, 100, 30), {.model = Toy(24 * kGiB, 2 * kGiB)});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->numa_mode, NumaMode::kShard);
  ASSERT_EQ(p->nodes.size(), 2u);
  EXPECT_EQ(p->nodes[0].expert_bytes, 12 * kGiB);
  EXPECT_EQ(p->nodes[1].expert_bytes, 12 * kGiB);
  EXPECT_EQ(p->nodes[1].cpus.front(), 8);
  EXPECT_EQ(p->TotalThreads(), 16);
}

TEST(Planner, LargerThanRamIsRefusedWithTheNumbers) {
  const Topology t = MakeTopology(2, 1, 8, 16 * kGiB);
  StatusOr<Plan> p = MakePlan(t, FlatProfile(t, 100, 30), {.model = Toy(40 * kGiB, 2 * kGiB)});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(p.status().message().find("routed experts 40.0 GiB"), std::string::npos)
      << p.status().message();
  EXPECT_NE(p.status().message().find("32.0 GiB"), std::string::npos) << p.status().message();
}

TEST(Planner, GpuTakesAttentionAndKvFirst) {
  const Topology t = MakeTopology(1, 1, 16, 128 * kGiB);
  PlanRequest rq{.model = Toy(20 * kGiB, 4 * kGiB)};
  rq.gpu.memory_bytes = 24 * kGiB;
  StatusOr<Plan> p = MakePlan(t, FlatProfile(t, 100, 0), rq);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_NE(Find(*p, "attention", "gpu"), nullptr);
  EXPECT_EQ(Find(*p, "attention", "cpu"), nullptr);
  ASSERT_NE(Find(*p, "routed_experts", "cpu"), nullptr);
  // The ~19 GiB left after 4 GiB of other weights, KV and scratch hold 8 of the 9 MoE layers'
  // experts (2.2 GiB each).
  EXPECT_EQ(p->gpu_moe_layers, 8);
  ASSERT_NE(Find(*p, "routed_experts", "gpu"), nullptr);
  EXPECT_EQ(Find(*p, "routed_experts", "gpu")->bytes, 8 * (rq.model.bytes.routed_experts / 9));
  EXPECT_NE(Find(*p, "shared_experts", "gpu"), nullptr);
  EXPECT_EQ(p->kv_device, "gpu");
  EXPECT_GE(p->gpu_bytes, rq.model.bytes.attention + p->kv_bytes);
  EXPECT_LE(p->gpu_bytes, rq.gpu.memory_bytes);
  EXPECT_EQ(p->nodes[0].ram_bytes, p->cpu_bytes);
  EXPECT_GT(p->predicted.decode_gpu_s, 0);
  EXPECT_GT(p->predicted.decode_sync_s, 0);  // PCIe hand-offs
  EXPECT_TRUE(AnyReasonHas(*p, "GPU figures assumed"));
}

TEST(Planner, CpuMoeKeepsEveryExpertOnTheCpu) {
  const Topology t = MakeTopology(1, 1, 16, 128 * kGiB);
  PlanRequest rq{.model = Toy(20 * kGiB, 4 * kGiB)};
  rq.gpu.memory_bytes = 24 * kGiB;
  rq.n_cpu_moe = 10;  // --cpu-moe: every block
  StatusOr<Plan> cpu_moe = MakePlan(t, FlatProfile(t, 100, 0), rq);
  ASSERT_TRUE(cpu_moe.ok()) << cpu_moe.status().ToString();
  EXPECT_EQ(cpu_moe->gpu_moe_layers, 0);
  EXPECT_EQ(Find(*cpu_moe, "routed_experts", "gpu"), nullptr);
  rq.n_cpu_moe.reset();  // the planner's choice: 8 layers in VRAM, decode reads far less DRAM
  StatusOr<Plan> spare = MakePlan(t, FlatProfile(t, 100, 0), rq);
  ASSERT_TRUE(spare.ok()) << spare.status().ToString();
  EXPECT_GT(spare->predicted.decode_tok_s, 2 * cpu_moe->predicted.decode_tok_s);
  EXPECT_GT(cpu_moe->cpu_bytes, spare->cpu_bytes);
}

TEST(Planner, NCpuMoeKeepsTheFirstLayersOnTheCpu) {
  const Topology t = MakeTopology(1, 1, 16, 128 * kGiB);
  PlanRequest rq{.model = Toy(20 * kGiB, 4 * kGiB)};
  rq.gpu.memory_bytes = 24 * kGiB;
  rq.n_cpu_moe = 6;  // blocks 0-5: the dense block 0 and MoE blocks 1-5
  StatusOr<Plan> p = MakePlan(t, FlatProfile(t, 100, 0), rq);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->gpu_moe_layers, 4);
  EXPECT_TRUE(AnyReasonHas(*p, "--n-cpu-moe 6"));
  // All 9 layers' experts (20 GiB) do not fit next to the rest: the error says what would.
  rq.n_cpu_moe = 0;
  StatusOr<Plan> q = MakePlan(t, FlatProfile(t, 100, 0), rq);
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(q.status().message().find("use --n-cpu-moe 2 or more"), std::string::npos)
      << q.status().message();
}

TEST(Planner, LongPromptsStreamExpertsOverPcie) {
  const Topology t = MakeTopology(1, 1, 16, 128 * kGiB);
  PlanRequest rq{.model = Toy(20 * kGiB, 4 * kGiB)};
  rq.gpu.memory_bytes = 24 * kGiB;
  rq.n_cpu_moe = 10;  // all experts on the CPU: VRAM left for the stream buffers
  StatusOr<Plan> p = MakePlan(t, FlatProfile(t, 100, 0), rq);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_GT(p->prefill_stream_min_batch, 0);
  EXPECT_TRUE(AnyReasonHas(*p, "streaming each CPU-side MoE layer"));
  // Past the threshold the prefill prediction is the streamed one, and faster than the CPU's.
  rq.batch = static_cast<int>(p->prefill_stream_min_batch) * 2;
  StatusOr<Plan> streamed = MakePlan(t, FlatProfile(t, 100, 0), rq);
  ASSERT_TRUE(streamed.ok());
  EXPECT_EQ(streamed->predicted.prefill_bottleneck, "pcie");
  // The same batch without a GPU: no streaming, slower prefill.
  rq.gpu.memory_bytes = 0;
  StatusOr<Plan> cpu = MakePlan(t, FlatProfile(t, 100, 0), rq);
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(cpu->prefill_stream_min_batch, 0);
  EXPECT_GT(streamed->predicted.prefill_tok_s, cpu->predicted.prefill_tok_s);
  // Round trip through YAML keeps the threshold.
  StatusOr<Plan> back = PlanFromYaml(PlanToYaml(*streamed), "streamed.yaml");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->prefill_stream_min_batch, streamed->prefill_stream_min_batch);
  EXPECT_EQ(back->gpu_moe_layers, streamed->gpu_moe_layers);
}

TEST(Planner, GpuLeavesWhatDoesNotFitOnTheCpu) {
  const Topology t = MakeTopology(1, 1, 16, 128 * kGiB);
  PlanRequest rq{.model = Toy(20 * kGiB, 16 * kGiB)};  // attention 8 GiB, the rest 2 GiB each
  rq.gpu.memory_bytes = 12 * kGiB;
  StatusOr<Plan> p = MakePlan(t, FlatProfile(t, 100, 0), rq);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_NE(Find(*p, "attention", "gpu"), nullptr);
  EXPECT_NE(Find(*p, "embeddings", "cpu"), nullptr);  // the last in line: no room left
  EXPECT_TRUE(AnyReasonHas(*p, "does not fit"));
}

TEST(Planner, KvLargerThanVramIsRefused) {
  const Topology t = MakeTopology(1, 1, 16, 512 * kGiB);
  // The GPU's f16 latent rows: ~43 GiB of KV for 4M tokens.
  PlanRequest rq{.model = Toy(20 * kGiB, 4 * kGiB), .ctx_size = 4'000'000};
  rq.gpu.memory_bytes = 24 * kGiB;
  StatusOr<Plan> p = MakePlan(t, FlatProfile(t, 100, 0), rq);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(p.status().message().find("--ctx-size"), std::string::npos);
  EXPECT_NE(p.status().message().find("--gpu-mem 0"), std::string::npos);
  EXPECT_NE(p.status().message().find("4000000 tokens"), std::string::npos)
      << p.status().message();
}

TEST(Planner, InterleaveAcrossSocketsLosesToOneSocketAndShardWins) {
  // Two sockets, 64 cores each, local 360 GB/s, xGMI 100 GB/s, 5 us barriers.
  const Topology t = MakeTopology(2, 1, 64, 768 * kGiB);
  const MachineProfile prof = FlatProfile(t, 360, 100, 5);
  PlanRequest rq{.model = Toy(360 * kGiB, 16 * kGiB)};
  auto decode = [&](std::optional<NumaMode> mode, std::vector<int> nodes) {
    PlanRequest r = rq;
    r.numa_mode = mode;
    r.nodes = nodes;
    StatusOr<Plan> p = MakePlan(t, prof, r);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return p.ok() ? p->predicted : Prediction{};
  };
  const Prediction single = decode(NumaMode::kSingle, {0});
  const Prediction interleave = decode(NumaMode::kInterleave, {0, 1});
  const Prediction shard = decode(NumaMode::kShard, {0, 1});
  EXPECT_GT(single.decode_tok_s, interleave.decode_tok_s);
  EXPECT_GT(shard.decode_tok_s, single.decode_tok_s);
  EXPECT_EQ(interleave.bottleneck, "interconnect");
  EXPECT_EQ(single.bottleneck, "dram_bandwidth");
  // Auto: the fastest predicted mode that fits -- shard, although the model fits one socket;
  // replicate predicts the same speed here but needs a second copy of the experts.
  StatusOr<Plan> autoplan = MakePlan(t, prof, rq);
  ASSERT_TRUE(autoplan.ok());
  EXPECT_EQ(autoplan->numa_mode, NumaMode::kShard);
  EXPECT_NEAR(autoplan->predicted.decode_tok_s, shard.decode_tok_s, 1e-9);
  EXPECT_TRUE(AnyReasonHas(*autoplan, "the fastest predicted decode"));
  EXPECT_TRUE(AnyReasonHas(*autoplan, "single nodes 0"));  // the alternatives line
  // --numa single still means one socket.
  PlanRequest one = rq;
  one.numa_mode = NumaMode::kSingle;
  StatusOr<Plan> single_plan = MakePlan(t, prof, one);
  ASSERT_TRUE(single_plan.ok());
  EXPECT_EQ(single_plan->numa_mode, NumaMode::kSingle);
  EXPECT_EQ(single_plan->nodes.size(), 1u);
}

TEST(Planner, DefaultKeepsSingleWhenTheInterconnectMakesShardSlower) {
  // A measured interconnect of 0.5 MB/s: shard's per-layer exchange of partial outputs (16 KB)
  // costs more than the second socket's bandwidth saves, so one socket stays the answer.
  const Topology t = MakeTopology(2, 1, 64, 768 * kGiB);
  const MachineProfile prof = FlatProfile(t, 360, 0.0005, 5);
  PlanRequest rq{.model = Toy(360 * kGiB, 16 * kGiB)};
  PlanRequest sharded = rq;
  sharded.numa_mode = NumaMode::kShard;
  StatusOr<Plan> shard = MakePlan(t, prof, sharded);
  ASSERT_TRUE(shard.ok()) << shard.status().ToString();
  StatusOr<Plan> autoplan = MakePlan(t, prof, rq);
  ASSERT_TRUE(autoplan.ok()) << autoplan.status().ToString();
  ASSERT_LT(shard->predicted.decode_tok_s, autoplan->predicted.decode_tok_s);
  EXPECT_EQ(autoplan->numa_mode, NumaMode::kSingle);
}

TEST(Planner, DefaultOnOneNodeIsSingle) {
  // A fan-out mode over one node is no option: a one-node machine stays `single`.
  const Topology t = MakeTopology(1, 1, 16, 128 * kGiB);
  StatusOr<Plan> p = MakePlan(t, FlatProfile(t, 100, 0), {.model = Toy(20 * kGiB, 4 * kGiB)});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->numa_mode, NumaMode::kSingle);
}

TEST(Planner, SinglePicksTheFasterNode) {
  Topology t = MakeTopology(2, 1, 8, 64 * kGiB);
  MachineProfile prof = FlatProfile(t, 100, 30);
  prof.nodes[1].read = {{1, 150}};
  StatusOr<Plan> p =
      MakePlan(t, prof, {.model = Toy(20 * kGiB, 2 * kGiB), .numa_mode = NumaMode::kSingle});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->numa_mode, NumaMode::kSingle);
  ASSERT_EQ(p->nodes.size(), 1u);
  EXPECT_EQ(p->nodes[0].id, 1);
}

TEST(Planner, SingleMayUseAWholePackage) {
  // NPS4-like: 4 nodes of 16 GiB per package; 40 GiB fits a package, not a node.
  const Topology t = MakeTopology(2, 4, 4, 16 * kGiB);
  StatusOr<Plan> p = MakePlan(t, FlatProfile(t, 50, 20),
                              {.model = Toy(40 * kGiB, 2 * kGiB), .numa_mode = NumaMode::kSingle});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->numa_mode, NumaMode::kSingle);
  ASSERT_EQ(p->nodes.size(), 4u);
  EXPECT_EQ(p->nodes[0].expert_bytes, 10 * kGiB);
}

TEST(Planner, OverridesThreadsNodesAndMode) {
  const Topology t = MakeTopology(2, 1, 8, 64 * kGiB);
  PlanRequest rq{.model = Toy(20 * kGiB, 2 * kGiB)};
  rq.threads = 5;
  rq.nodes = {0, 1};
  rq.numa_mode = NumaMode::kInterleave;
  StatusOr<Plan> p = MakePlan(t, FlatProfile(t, 100, 30), rq);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->numa_mode, NumaMode::kInterleave);
  ASSERT_EQ(p->nodes.size(), 2u);
  EXPECT_EQ(p->nodes[0].threads, 3);
  EXPECT_EQ(p->nodes[1].threads, 2);
  EXPECT_EQ(p->nodes[0].expert_bytes, 10 * kGiB);

  rq.threads = 12;  // 12 workers on 8 cores: 4 SMT siblings join
  rq.nodes = {1};
  rq.numa_mode.reset();
  p = MakePlan(t, FlatProfile(t, 100, 30), rq);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->numa_mode, NumaMode::kSingle);
  EXPECT_EQ(p->nodes[0].threads, 12);
  EXPECT_EQ(p->nodes[0].cpus[0], 8);        // node 1's first core
  EXPECT_EQ(p->nodes[0].cpus[8], 8 + 16);   // its sibling, after the 8 primaries

  rq.threads = 17;  // more than the node's 16 PUs
  EXPECT_EQ(MakePlan(t, FlatProfile(t, 100, 30), rq).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(Planner, BadNodeIdsAreRefused) {
  const Topology t = MakeTopology(2, 1, 8, 64 * kGiB);
  PlanRequest rq{.model = Toy(20 * kGiB, 2 * kGiB), .nodes = {0, 7}};
  StatusOr<Plan> p = MakePlan(t, FlatProfile(t, 100, 30), rq);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("node 7"), std::string::npos);
  EXPECT_NE(p.status().message().find("nodes: 0,1"), std::string::npos);
}

TEST(Planner, ReplicateNeedsACopyPerNode) {
  const Topology t = MakeTopology(2, 1, 8, 32 * kGiB);
  PlanRequest rq{.model = Toy(24 * kGiB, 2 * kGiB), .numa_mode = NumaMode::kReplicate};
  StatusOr<Plan> p = MakePlan(t, FlatProfile(t, 100, 30), rq);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->nodes[0].expert_bytes, 24 * kGiB);
  EXPECT_EQ(p->nodes[1].expert_bytes, 24 * kGiB);
  rq.model = Toy(40 * kGiB, 2 * kGiB);  // fits the machine (64 GiB) only once
  p = MakePlan(t, FlatProfile(t, 100, 30), rq);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(p.status().message().find("replicate"), std::string::npos);
}

TEST(Planner, PrefillBottleneckFollowsTheBatch) {
  const Topology t = MakeTopology(1, 1, 16, 128 * kGiB);
  const MachineProfile prof = FlatProfile(t, 100, 0);
  PlanRequest rq{.model = Toy(20 * kGiB, 4 * kGiB), .batch = 1};
  StatusOr<Plan> one = MakePlan(t, prof, rq);
  rq.batch = 512;
  StatusOr<Plan> many = MakePlan(t, prof, rq);
  ASSERT_TRUE(one.ok() && many.ok());
  EXPECT_EQ(one->predicted.prefill_bottleneck, "dram_bandwidth");
  EXPECT_EQ(many->predicted.prefill_bottleneck, "compute");
  EXPECT_GT(many->predicted.prefill_tok_s, one->predicted.prefill_tok_s);
}

TEST(Planner, AssumedProfileSaysSoAndHowToMeasure) {
  const Topology t = MakeTopology(1, 1, 64, 768 * kGiB);
  const MachineProfile prof = AssumedProfile(t);
  EXPECT_FALSE(prof.measured);
  ASSERT_EQ(prof.nodes.size(), 1u);
  EXPECT_DOUBLE_EQ(prof.ReadGbps(0, 1), 20);
  EXPECT_DOUBLE_EQ(prof.ReadGbps(0, 64), 320);  // 5 GB/s x 64 cores
  StatusOr<Plan> p = MakePlan(t, prof, {.model = Toy(20 * kGiB, 4 * kGiB)});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(AnyReasonHas(*p, "moesplit topo --measure"));
}

TEST(Planner, ProfileWithoutTheNodeIsAnError) {
  const Topology t = MakeTopology(2, 1, 8, 64 * kGiB);
  MachineProfile prof = FlatProfile(t, 100, 30);
  prof.nodes.pop_back();
  PlanRequest rq{.model = Toy(20 * kGiB, 2 * kGiB), .nodes = {1}};
  StatusOr<Plan> p = MakePlan(t, prof, rq);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("no figures for node 1"), std::string::npos);
}

TEST(Planner, BadRequestsAreErrors) {
  const Topology t = MakeTopology(1, 1, 8, 64 * kGiB);
  const MachineProfile prof = FlatProfile(t, 100, 0);
  EXPECT_FALSE(MakePlan(t, prof, {.model = ModelShape{}}).ok());
  EXPECT_FALSE(MakePlan(t, prof, {.model = Toy(kGiB, kGiB), .ctx_size = 0}).ok());
  EXPECT_FALSE(MakePlan(t, prof, {.model = Toy(kGiB, kGiB), .batch = 0}).ok());
  MachineProfile no_kernels = prof;
  no_kernels.kernels.decode_fraction = 0;
  EXPECT_FALSE(MakePlan(t, no_kernels, {.model = Toy(kGiB, kGiB)}).ok());
  EXPECT_FALSE(MakePlan(Topology{}, prof, {.model = Toy(kGiB, kGiB)}).ok());
}

}  // namespace
}  // namespace moesplit::numa
