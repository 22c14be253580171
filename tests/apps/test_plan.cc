// `moesplit plan` and the ModelShape sources: a preset and the file written from it give the same
// shape; the reference scenario (DeepSeek-R1 Q4_K_M on 2x EPYC 9554): one socket beats a naive
// two-socket (interleave) run and shard beats both; JSON keys; argument errors; the example
// profiles in configs/profiles load and cover their topologies.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "apps/cmd_plan.h"
#include "apps/cpu_placement.h"
#include "apps/model_shape_source.h"
#include "core/engine/engine.h"
#include "core/engine/kv_cache.h"
#include "core/synth/model_spec.h"
#include "core/synth/model_writer.h"
#include "numa/machine_profile.h"
#include "numa/planner.h"
#include "numa/topology.h"
#include "tests/core/engine/host_backend.h"
#include "tests/testdata.h"

namespace moesplit::app {
namespace {

std::string Source(const std::string& rel) { return std::string(MOESPLIT_SOURCE_DIR) + "/" + rel; }
const std::string kTopo2s = "configs/topologies/epyc-9554-2s-nps1.xml";
const std::string kRefProfile = "configs/profiles/epyc-9554-2s-nps1-ddr5-5600.yaml";

void ExpectSameShape(const numa::ModelShape& a, const numa::ModelShape& b) {
  EXPECT_EQ(a.arch, b.arch);
  EXPECT_EQ(a.quant, b.quant);
  EXPECT_EQ(a.n_layers, b.n_layers);
  EXPECT_EQ(a.n_moe_layers, b.n_moe_layers);
  EXPECT_EQ(a.n_dense_layers, b.n_dense_layers);
  EXPECT_EQ(a.n_embd, b.n_embd);
  EXPECT_EQ(a.n_vocab, b.n_vocab);
  EXPECT_EQ(a.n_head, b.n_head);
  EXPECT_EQ(a.n_expert, b.n_expert);
  EXPECT_EQ(a.n_expert_used, b.n_expert_used);
  EXPECT_EQ(a.n_expert_shared, b.n_expert_shared);
  EXPECT_EQ(a.n_ff_exp, b.n_ff_exp);
  EXPECT_EQ(a.n_ff, b.n_ff);
  for (auto f : {&numa::TensorClassSizes::routed_experts, &numa::TensorClassSizes::shared_experts,
                 &numa::TensorClassSizes::dense_ffn, &numa::TensorClassSizes::attention,
                 &numa::TensorClassSizes::router, &numa::TensorClassSizes::norms,
                 &numa::TensorClassSizes::embeddings, &numa::TensorClassSizes::output,
                 &numa::TensorClassSizes::other}) {
    EXPECT_EQ(a.bytes.*f, b.bytes.*f);
    EXPECT_EQ(a.params.*f, b.params.*f);
  }
  EXPECT_EQ(a.routed_bytes_per_expert_layer, b.routed_bytes_per_expert_layer);
  EXPECT_EQ(a.routed_params_per_expert_layer, b.routed_params_per_expert_layer);
  EXPECT_EQ(a.kv_bytes_per_token_f16, b.kv_bytes_per_token_f16);
  EXPECT_EQ(a.kv_bytes_per_token_f32, b.kv_bytes_per_token_f32);
  EXPECT_EQ(a.attn_macs_per_position, b.attn_macs_per_position);
}

TEST(ModelShapeSource, PresetAndItsFileAgree) {
  for (const char* preset : {"ds-tiny", "ds-v2-lite-tiny", "qwen3moe-tiny", "mixtral-tiny"}) {
    SCOPED_TRACE(preset);
    StatusOr<synth::ModelSpec> spec = synth::BuildModelSpec({.preset = preset, .quant = synth::QuantMix::kQ8_0});
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    const std::string path = testing::ScratchDir() + "/plan-shape-" + preset + ".gguf";
    ASSERT_TRUE(synth::WriteModel(*spec, {.path = path, .threads = 1, .show_progress = false}).ok());
    StatusOr<numa::ModelShape> from_file = ModelShapeFromGguf(path);
    StatusOr<numa::ModelShape> from_preset = ModelShapeFromPreset(preset, 0, "Q8_0");
    std::remove(path.c_str());
    ASSERT_TRUE(from_file.ok()) << from_file.status().ToString();
    ASSERT_TRUE(from_preset.ok()) << from_preset.status().ToString();
    ExpectSameShape(*from_file, *from_preset);
    EXPECT_GT(from_preset->bytes.routed_experts, 0u);
    EXPECT_EQ(from_preset->bytes.Total(), synth::TotalTensorBytes(*spec));
  }
}

TEST(ModelShapeSource, DeepSeekV3FullSize) {
  StatusOr<numa::ModelShape> s = ModelShapeFromPreset("ds-v3");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->n_layers, 61);
  EXPECT_EQ(s->n_moe_layers, 58);
  EXPECT_EQ(s->n_dense_layers, 3);
  EXPECT_EQ(s->n_ff_exp, 2048);
  // 256 experts x 3 x 7168 x 2048 per MoE layer = 11.27 G weights; 58 layers = 654 G.
  EXPECT_EQ(s->params.routed_experts, 58ull * 256 * 3 * 7168 * 2048);
  EXPECT_EQ(s->routed_params_per_expert_layer, 3ull * 7168 * 2048);
  // MLA cache: 512 + 64 latent values x 61 layers x 2 bytes.
  EXPECT_EQ(s->kv_bytes_per_token_f16, 576ull * 61 * 2);
  EXPECT_EQ(s->quant, "Q4_K_M");
}

TEST(ModelShapeSource, KimiK2FullSize) {
  StatusOr<numa::ModelShape> s = ModelShapeFromPreset("kimi-k2");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->n_layers, 61);
  EXPECT_EQ(s->n_moe_layers, 60);
  EXPECT_EQ(s->n_dense_layers, 1);
  EXPECT_EQ(s->n_ff_exp, 2048);
  // 384 experts x 3 x 7168 x 2048 per MoE layer = 16.9 G weights; 60 layers = 1015 G.
  EXPECT_EQ(s->params.routed_experts, 60ull * 384 * 3 * 7168 * 2048);
  EXPECT_EQ(s->routed_params_per_expert_layer, 3ull * 7168 * 2048);
  EXPECT_EQ(s->kv_bytes_per_token_f16, 576ull * 61 * 2);  // MLA: as DeepSeek-V3
  // Per token the same 8 experts x 3 matrices are read as for DeepSeek-V3 (2048 wide), but
  // over 60 MoE layers instead of 58.
  StatusOr<numa::ModelShape> v3 = ModelShapeFromPreset("ds-v3");
  ASSERT_TRUE(v3.ok());
  EXPECT_EQ(s->routed_params_per_expert_layer, v3->routed_params_per_expert_layer);
}

TEST(ModelShapeSource, Errors) {
  StatusOr<numa::ModelShape> s = ModelShapeFromPreset("ds-v9");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("ds-v3"), std::string::npos);  // lists the presets
  EXPECT_FALSE(ModelShapeFromPreset("ds-v3", 0, "IQ1_S").ok());
  s = ModelShapeFromGguf("/nonexistent/model.gguf");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("/nonexistent/model.gguf"), std::string::npos);
}

// The reference observation (DESIGN.md): 2x EPYC 9554, DeepSeek-R1 Q4_K_M, another runtime:
// 13.7 tok/s on one socket, 8.4 on both. The planner must predict one socket > the naive spread
// over both, and shard ahead of both — with and without a GPU.
// No placement flag: a one-node machine keeps the default pool; a two-socket machine gets the
// planner's choice: the fastest predicted mode that fits, for ds-tiny one socket (never one pool
// spread over both sockets).
// The planner's KV bytes are what the engine allocates for the same context: on the CPU the
// f32 latent rows, on the GPU the hybrid pass's f16 latent rows (here on the host backend,
// which allocates what CudaBackend does), both in whole blocks.
TEST(PlanKv, EqualsTheEngineAllocation) {
  MOESPLIT_REQUIRE_TESTDATA();
  static_assert(numa::kKvBlockPositions == engine::kKvBlockSize);
  const std::string path = testing::TestDataPath("models/ds-tiny-Q4_K_M.gguf");
  StatusOr<numa::ModelShape> shape = ModelShapeFromGguf(path);
  ASSERT_TRUE(shape.ok()) << shape.status().ToString();
  std::unique_ptr<engine::Model> model = engine::Model::Load(path).value();
  for (int64_t ctx : {1, 100, 128}) {
    numa::PlanRequest rq;
    rq.model = *shape;
    rq.ctx_size = ctx;
    engine::Session cpu(*model, {.ctx_size = ctx, .n_threads = 1});
    EXPECT_EQ(numa::KvCacheBytes(rq, /*on_gpu=*/false), cpu.kv_cache_bytes()) << "ctx " << ctx;

    testing::HostBackend backend;
    engine::SessionOptions o{.ctx_size = ctx, .n_threads = 1};
    o.backend = &backend;
    o.expert_homes.assign(static_cast<size_t>(model->config().n_layer), engine::ExpertHome::kCpu);
    StatusOr<std::unique_ptr<engine::Session>> gpu = engine::Session::Create(*model, o);
    ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
    EXPECT_EQ(numa::KvCacheBytes(rq, /*on_gpu=*/true), (*gpu)->kv_cache_bytes()) << "ctx " << ctx;
  }
  // And in a whole plan, CPU only and with a GPU.
  StatusOr<numa::Topology> topo = numa::LoadTopology("pack:1 numa:1 core:4 pu:1");
  ASSERT_TRUE(topo.ok()) << topo.status().ToString();
  numa::PlanRequest rq;
  rq.model = *shape;
  rq.ctx_size = 100;
  engine::Session cpu(*model, {.ctx_size = 100, .n_threads = 1});
  StatusOr<numa::Plan> plan = numa::MakePlan(*topo, numa::AssumedProfile(*topo), rq);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->kv_device, "cpu");
  EXPECT_EQ(plan->kv_bytes, cpu.kv_cache_bytes());
  rq.gpu.memory_bytes = uint64_t{8} << 30;
  plan = numa::MakePlan(*topo, numa::AssumedProfile(*topo), rq);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->kv_device, "gpu");
  EXPECT_EQ(plan->kv_bytes, numa::KvCacheBytes(rq, /*on_gpu=*/true));
}

TEST(AutoPlacement, NoFlagsOnTwoSocketsUsesThePlan) {
  StatusOr<synth::ModelSpec> spec =
      synth::BuildModelSpec({.preset = "ds-tiny", .quant = synth::QuantMix::kQ8_0});
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  const std::string path = testing::ScratchDir() + "/auto-placement.gguf";
  ASSERT_TRUE(synth::WriteModel(*spec, {.path = path, .threads = 1, .show_progress = false}).ok());

  StatusOr<numa::Topology> one = numa::LoadTopology("pack:1 numa:1 core:4 pu:2");
  ASSERT_TRUE(one.ok());
  std::ostringstream log;
  StatusOr<engine::CpuPlacement> p = ResolvePlacement({}, 0, *one, path, &log);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(p->groups.empty());  // the default pool
  EXPECT_EQ(log.str(), "");

  StatusOr<numa::Topology> two = numa::LoadTopology(Source(kTopo2s));
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  p = ResolvePlacement({}, 0, *two, path, &log);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->mode, numa::NumaMode::kSingle);
  ASSERT_EQ(p->groups.size(), 1u);
  EXPECT_EQ(p->groups[0].mem_nodes, std::vector<int>{0});
  EXPECT_EQ(p->groups[0].cpus.size(), 64u);  // one worker per physical core of socket 0
  EXPECT_TRUE(p->pin);
  EXPECT_NE(log.str().find("the planner's choice, single over node 0: 64 workers"),
            std::string::npos)
      << log.str();
  // -t 8: 8 workers, still on one socket; a flag replaces the plan entirely.
  p = ResolvePlacement({}, 8, *two, path, nullptr);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->groups.size(), 1u);
  EXPECT_EQ(p->groups[0].cpus.size(), 8u);
  p = ResolvePlacement({.numa = "shard", .nodes = "0,1"}, 8, *two, path, nullptr);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->mode, numa::NumaMode::kShard);
  EXPECT_EQ(p->groups.size(), 2u);
  EXPECT_TRUE(p->repack);
  EXPECT_DOUBLE_EQ(p->repack_growth, 0.08);  // --repack-growth's default, 8 %
  // --no-repack and --repack-growth hold with every other flag, on the live topology too.
  for (bool live : {false, true}) {
    const PlacementFlags f{.numa = "single", .no_repack = true, .repack_growth_pct = 20};
    p = live ? ResolvePlacement(f, 1, std::string(), nullptr)
             : ResolvePlacement(f, 8, *two, path, nullptr);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_FALSE(p->repack) << "live " << live;
    EXPECT_DOUBLE_EQ(p->repack_growth, 0.2) << "live " << live;
  }
  // A model the planner cannot read is the reader's error, with the path.
  p = ResolvePlacement({}, 0, *two, "/nonexistent/auto.gguf", nullptr);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("/nonexistent/auto.gguf"), std::string::npos);
  std::remove(path.c_str());
}

TEST(PlanReference, OneSocketBeatsInterleaveAndShardBeatsBoth) {
  StatusOr<numa::Topology> topo = numa::LoadTopology(Source(kTopo2s));
  ASSERT_TRUE(topo.ok()) << topo.status().ToString();
  StatusOr<numa::MachineProfile> prof = numa::LoadMachineProfile(Source(kRefProfile));
  ASSERT_TRUE(prof.ok()) << prof.status().ToString();
  StatusOr<numa::ModelShape> r1 = ModelShapeFromPreset("ds-v3", 0, "Q4_K_M");
  ASSERT_TRUE(r1.ok());
  for (uint64_t gpu : {uint64_t{0}, uint64_t{48} << 30}) {
    SCOPED_TRACE(gpu);
    auto decode = [&](numa::NumaMode mode, std::vector<int> nodes) {
      numa::PlanRequest rq{.model = *r1, .numa_mode = mode, .nodes = nodes};
      rq.gpu.memory_bytes = gpu;
      StatusOr<numa::Plan> p = numa::MakePlan(*topo, *prof, rq);
      EXPECT_TRUE(p.ok()) << p.status().ToString();
      return p.ok() ? p->predicted.decode_tok_s : 0.0;
    };
    const double single = decode(numa::NumaMode::kSingle, {0});
    const double interleave = decode(numa::NumaMode::kInterleave, {0, 1});
    const double shard = decode(numa::NumaMode::kShard, {0, 1});
    EXPECT_GT(single, interleave);
    EXPECT_GT(shard, single);
    EXPECT_GT(shard, interleave);
  }
}

// Issue 29: on 2x EPYC 9554 the planner predicted DeepSeek-V3 Q4_K_M decode at 17.9 tok/s for
// single, 29.5 for shard and 29.5 for replicate, and then picked single. The default must be the
// fastest predicted mode that fits, a tie going to the mode that needs less RAM (shard: one copy
// of the experts; replicate: one per socket). Both example profiles, with and without a GPU.
TEST(PlanReference, DefaultIsTheFastestModeThatFits) {
  StatusOr<numa::Topology> topo = numa::LoadTopology(Source(kTopo2s));
  ASSERT_TRUE(topo.ok()) << topo.status().ToString();
  StatusOr<numa::ModelShape> v3 = ModelShapeFromPreset("ds-v3", 0, "Q4_K_M");
  ASSERT_TRUE(v3.ok());
  for (const char* profile_path : {"configs/profiles/epyc-9554-2s-nps1.yaml", kRefProfile.c_str()}) {
    StatusOr<numa::MachineProfile> prof = numa::LoadMachineProfile(Source(profile_path));
    ASSERT_TRUE(prof.ok()) << prof.status().ToString();
    for (uint64_t gpu : {uint64_t{0}, uint64_t{48} << 30}) {
      SCOPED_TRACE(std::string(profile_path) + " gpu " + std::to_string(gpu));
      auto plan = [&](std::optional<numa::NumaMode> mode) {
        numa::PlanRequest rq{.model = *v3, .numa_mode = mode};
        rq.gpu.memory_bytes = gpu;
        return numa::MakePlan(*topo, *prof, rq);
      };
      StatusOr<numa::Plan> single = plan(numa::NumaMode::kSingle);
      StatusOr<numa::Plan> shard = plan(numa::NumaMode::kShard);
      StatusOr<numa::Plan> replicate = plan(numa::NumaMode::kReplicate);
      StatusOr<numa::Plan> chosen = plan(std::nullopt);
      ASSERT_TRUE(single.ok() && shard.ok() && replicate.ok() && chosen.ok());
      const double fastest = std::max({single->predicted.decode_tok_s,
                                       shard->predicted.decode_tok_s,
                                       replicate->predicted.decode_tok_s});
      // The premise: a second socket adds bandwidth in this model of the machine.
      ASSERT_GT(shard->predicted.decode_tok_s, 1.3 * single->predicted.decode_tok_s);
      EXPECT_GE(chosen->predicted.decode_tok_s, 0.99 * fastest);
      EXPECT_EQ(chosen->numa_mode, numa::NumaMode::kShard);
      EXPECT_EQ(chosen->nodes.size(), 2u);
      EXPECT_LT(shard->cpu_bytes, replicate->cpu_bytes);
      std::string reasons;
      for (const std::string& r : chosen->reasons) reasons += r + "\n";
      EXPECT_NE(reasons.find("the fastest predicted decode"), std::string::npos) << reasons;
    }
  }
}

TEST(PlanCmd, PresetJsonHasTheIssueKeys) {
  PlanArgs a;
  a.preset = "ds-v3";
  a.topology = Source(kTopo2s);
  a.format = "json";
  std::ostringstream out;
  Status s = RunPlan(a, out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const nlohmann::json j = nlohmann::json::parse(out.str());
  for (const char* k : {"numa_mode", "nodes", "gpu_bytes", "cpu_bytes", "kv_bytes", "predicted",
                        "tensors", "reasons"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  ASSERT_FALSE(j["nodes"].empty());
  for (const char* k : {"id", "threads", "cpus", "expert_bytes"}) {
    EXPECT_TRUE(j["nodes"][0].contains(k)) << k;
  }
  EXPECT_EQ(j["nodes"][0]["threads"], 64);
  for (const char* k : {"decode_tok_s", "prefill_tok_s", "bottleneck"}) {
    EXPECT_TRUE(j["predicted"].contains(k)) << k;
  }
  EXPECT_GT(j["predicted"]["decode_tok_s"].get<double>(), 0);
  // The profile beside the topology file was used.
  EXPECT_NE(j["reasons"][0].get<std::string>().find("profiles/epyc-9554-2s-nps1.yaml"),
            std::string::npos)
      << j["reasons"][0];
}

TEST(PlanCmd, TextYamlAndOutputFile) {
  PlanArgs a;
  a.preset = "ds-v2-lite";
  a.topology = Source("configs/topologies/epyc-9554-1s-nps4.xml");
  a.gpu_mem = "24G";
  a.output = testing::ScratchDir() + "/plan-cmd.yaml";
  std::ostringstream text;
  ASSERT_TRUE(RunPlan(a, text).ok());
  EXPECT_NE(text.str().find("numa mode:"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("attention        gpu"), std::string::npos) << text.str();
  StatusOr<numa::Plan> saved = numa::LoadPlan(a.output);
  std::remove(a.output.c_str());
  ASSERT_TRUE(saved.ok()) << saved.status().ToString();
  EXPECT_EQ(saved->kv_device, "gpu");
  a.output.clear();
  a.format = "yaml";
  std::ostringstream yaml;
  ASSERT_TRUE(RunPlan(a, yaml).ok());
  StatusOr<numa::Plan> back = numa::PlanFromYaml(yaml.str(), "stdout");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->predicted.decode_tok_s, saved->predicted.decode_tok_s);
}

TEST(PlanCmd, OverridesReachThePlan) {
  PlanArgs a;
  a.preset = "ds-v3";
  a.topology = Source(kTopo2s);
  a.numa = "shard";
  a.nodes = "0,1";
  a.threads = 100;
  a.format = "json";
  std::ostringstream out;
  ASSERT_TRUE(RunPlan(a, out).ok());
  const nlohmann::json j = nlohmann::json::parse(out.str());
  EXPECT_EQ(j["numa_mode"], "shard");
  ASSERT_EQ(j["nodes"].size(), 2u);
  EXPECT_EQ(j["nodes"][0]["threads"], 50);
  EXPECT_EQ(j["nodes"][1]["cpus"][0], 64);
}

TEST(PlanCmd, UserErrors) {
  auto error_of = [](PlanArgs a) {
    if (a.topology.empty()) a.topology = Source(kTopo2s);
    std::ostringstream out;
    Status s = RunPlan(a, out);
    EXPECT_FALSE(s.ok());
    return s.message();
  };
  PlanArgs a;
  a.preset = "ds-v9";
  EXPECT_NE(error_of(a).find("presets:"), std::string::npos);
  a.preset = "ds-v3";
  a.numa = "distribute";
  EXPECT_NE(error_of(a).find("--numa"), std::string::npos);
  a.numa.clear();
  a.nodes = "0,5";
  EXPECT_NE(error_of(a).find("node 5"), std::string::npos);
  a.nodes = "zero";
  EXPECT_NE(error_of(a).find("--nodes"), std::string::npos);
  a.nodes.clear();
  a.gpu_mem = "lots";
  EXPECT_NE(error_of(a).find("size 'lots'"), std::string::npos);
  a.gpu_mem = "4G";  // attention alone is 6 GiB
  EXPECT_NE(error_of(a).find("--gpu-mem 0"), std::string::npos);
  a.gpu_mem = "0";
  a.topology = "pack:1 numa:1(memory=16GB) core:4 pu:1";  // 16 GB of RAM: R1 does not fit
  EXPECT_NE(error_of(a).find("GiB of RAM"), std::string::npos);
  a.topology.clear();
  a.model = "/some/file.gguf";  // and --preset
  EXPECT_NE(error_of(a).find("exactly one"), std::string::npos);
  a.preset.clear();
  a.model = "/nonexistent/file.gguf";
  EXPECT_NE(error_of(a).find("/nonexistent/file.gguf"), std::string::npos);
  a.model.clear();
  a.preset = "ds-v3";
  a.format = "xml";
  EXPECT_NE(error_of(a).find("--format"), std::string::npos);
}

TEST(PlanCmd, ParseSize) {
  EXPECT_EQ(*ParseSize("24G"), 24ull << 30);
  EXPECT_EQ(*ParseSize("24GiB"), 24ull << 30);
  EXPECT_EQ(*ParseSize("24gib"), 24ull << 30);
  EXPECT_EQ(*ParseSize("512M"), 512ull << 20);
  EXPECT_EQ(*ParseSize("80GB"), 80'000'000'000ull);
  EXPECT_EQ(*ParseSize("1.5T"), 3ull << 39);
  EXPECT_EQ(*ParseSize("4096"), 4096u);
  EXPECT_EQ(*ParseSize("0"), 0u);
  for (const char* bad : {"", "G", "24X", "-1G", "24 G", "nan"}) {
    EXPECT_FALSE(ParseSize(bad).ok()) << bad;
  }
}

// Every example profile loads and has figures for every node of its topology (same stem).
TEST(PlanConfigs, ProfilesCoverTheirTopologies) {
  namespace fs = std::filesystem;
  int n = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(Source("configs/profiles"))) {
    if (e.path().extension() != ".yaml") continue;
    SCOPED_TRACE(e.path().string());
    ++n;
    StatusOr<numa::MachineProfile> prof = numa::LoadMachineProfile(e.path().string());
    ASSERT_TRUE(prof.ok()) << prof.status().ToString();
    EXPECT_FALSE(prof->measured);
    StatusOr<numa::Topology> topo = numa::LoadTopology(Source(prof->topology));
    ASSERT_TRUE(topo.ok()) << topo.status().ToString();
    for (const numa::NumaNode& node : topo->nodes) {
      EXPECT_GT(prof->ReadGbps(node.id, node.NumCores()), 0) << "node " << node.id;
    }
    StatusOr<numa::ModelShape> r1 = ModelShapeFromPreset("ds-v3");
    StatusOr<numa::Plan> plan = numa::MakePlan(*topo, *prof, {.model = *r1});
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    EXPECT_GT(plan->predicted.decode_tok_s, 1);
  }
  EXPECT_EQ(n, 6);
}

}  // namespace
}  // namespace moesplit::app
