#include "apps/cmd_plan.h"

#include <CLI/CLI.hpp>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>

#include "apps/model_shape_source.h"
#include "numa/machine_profile.h"
#include "numa/plan.h"
#include "numa/planner.h"
#include "numa/topology.h"

namespace moesplit::app {
namespace {

// A topology file configs/topologies/<stem>.xml has its profile at configs/profiles/<stem>.yaml;
// "" when `topology` is not such a file or the profile does not exist.
std::string ProfileBeside(const std::string& topology) {
  namespace fs = std::filesystem;
  const fs::path t(topology);
  std::error_code ec;
  if (t.extension() != ".xml" || !fs::is_regular_file(t, ec)) return "";
  const fs::path dir = t.parent_path();
  if (dir.filename() != "topologies") return "";
  const fs::path p = dir.parent_path() / "profiles" / (t.stem().string() + ".yaml");
  return fs::is_regular_file(p, ec) ? p.string() : "";
}

StatusOr<numa::MachineProfile> ProfileFor(const PlanArgs& args, const numa::Topology& topo) {
  if (!args.profile.empty()) return numa::LoadMachineProfile(args.profile);
  const std::string beside = ProfileBeside(args.topology);
  if (!beside.empty()) return numa::LoadMachineProfile(beside);
  return numa::AssumedProfile(topo);
}

StatusOr<numa::ModelShape> ShapeFor(const PlanArgs& args, std::vector<TensorEntry>* tensors) {
  if (args.model.empty() == args.preset.empty()) {
    return InvalidArgumentError("give exactly one of -m FILE and --preset NAME");
  }
  if (!args.model.empty()) return ModelShapeFromGguf(args.model, tensors);
  return ModelShapeFromPreset(args.preset, args.layers, args.quant, tensors);
}

// The plan applied to every tensor, after the -ot / --cpu-moe / --n-cpu-moe / -ngl / rule-file
// rules; the VRAM left for weights is what the plan keeps for the KV cache and scratch.
StatusOr<std::string> DeviceMapText(const numa::Plan& plan, const numa::PlanRequest& rq,
                                    const DeviceSettings& s,
                                    const std::vector<TensorEntry>& tensors) {
  DeviceMapRequest dm{.rules = s.rules,
                      .gpu = rq.gpu.memory_bytes > 0,
                      .no_gpu_reason = "--gpu-mem 0",
                      .gpu_moe_layers = plan.gpu_moe_layers,
                      .n_gpu_layers = s.n_gpu_layers};
  uint64_t gpu_weights = 0;
  for (const numa::TensorPlacement& t : plan.tensors) {
    if (t.device != "gpu" || t.tensor_class == "kv_cache") continue;
    gpu_weights += t.bytes;
    if (t.tensor_class != "routed_experts") dm.gpu_classes.push_back(t.tensor_class);
  }
  if (dm.gpu) dm.gpu_weight_budget = rq.gpu.memory_bytes - (plan.gpu_bytes - gpu_weights);
  MOESPLIT_ASSIGN_OR_RETURN(DeviceMap map, AssignDevices(tensors, dm));
  std::string text = DescribeDeviceMap(tensors, map);
  if (!s.rules.empty() || s.n_gpu_layers >= 0) {
    text +=
        "  (the prediction above is the planner's class-level layout; -ot / -ngl / rule-file "
        "moves are applied here, per tensor, after it)\n";
  }
  return text;
}

StatusOr<numa::PlanRequest> RequestFor(const PlanArgs& args, numa::ModelShape shape) {
  numa::PlanRequest rq;
  rq.model = std::move(shape);
  rq.ctx_size = args.ctx_size;
  rq.batch = args.batch;
  rq.decode_depth = args.depth;
  if (args.kv_type == "f16" || args.kv_type == "f32") {
    rq.kv_type = args.kv_type == "f16" ? numa::KvType::kF16 : numa::KvType::kF32;
  } else {
    return InvalidArgumentError("--kv-type '", args.kv_type, "' (expected f16 | f32)");
  }
  MOESPLIT_ASSIGN_OR_RETURN(rq.gpu.memory_bytes, ParseSize(args.gpu_mem));
  if (args.gpu_bw < 0) return InvalidArgumentError("--gpu-bw ", args.gpu_bw, " must be >= 0");
  rq.gpu.mem_gbps = args.gpu_bw;
  if (args.threads < 0) return InvalidArgumentError("--threads ", args.threads, " must be >= 0");
  rq.threads = args.threads;
  if (!args.numa.empty()) {
    StatusOr<numa::NumaMode> m = numa::NumaModeFromName(args.numa);
    if (!m.ok()) return InvalidArgumentError("--numa: ", m.status().message());
    rq.numa_mode = *m;
  }
  if (!args.nodes.empty()) {
    StatusOr<std::vector<int>> ids = numa::ParseCpuList(args.nodes);
    if (!ids.ok()) return InvalidArgumentError("--nodes: ", ids.status().message());
    rq.nodes = *ids;
  }
  return rq;
}

}  // namespace

StatusOr<uint64_t> ParseSize(const std::string& text) {
  size_t end = 0;
  double value = 0;
  try {
    value = std::stod(text, &end);
  } catch (const std::exception&) {
    end = 0;
  }
  std::string unit = text.substr(end);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (!unit.empty() && unit.back() == 'B' && unit != "B") {
    const bool binary = unit.size() == 3 && unit[1] == 'I';  // "GIB"
    unit = unit.substr(0, 1) + (binary ? "" : "D");          // "G" binary, "GD" decimal
  }
  const std::pair<const char*, double> units[] = {
      {"", 1},       {"B", 1},    {"K", 1024.0}, {"M", 1048576.0}, {"G", 0x1p30},
      {"T", 0x1p40}, {"KD", 1e3}, {"MD", 1e6},   {"GD", 1e9},      {"TD", 1e12}};
  for (const auto& [name, scale] : units) {
    if (end > 0 && unit == name && value >= 0 && std::isfinite(value)) {
      return static_cast<uint64_t>(std::llround(value * scale));
    }
  }
  return InvalidArgumentError("size '", text,
                              "': expected a number with an optional unit (24G, 24GiB, 512M, "
                              "80GB)");
}

Status RunPlan(const PlanArgs& args, std::ostream& out) {
  if (args.format != "text" && args.format != "json" && args.format != "yaml") {
    return InvalidArgumentError("--format '", args.format, "' (expected text | json | yaml)");
  }
  MOESPLIT_ASSIGN_OR_RETURN(DeviceSettings ds, ResolveDeviceSettings(args.device));
  PlanArgs merged = args;  // the rule file's threads / numa / nodes where the flags are unset
  ds.FillUnset(&merged.threads, &merged.numa, &merged.nodes);
  std::vector<TensorEntry> tensors;
  MOESPLIT_ASSIGN_OR_RETURN(numa::ModelShape shape, ShapeFor(merged, &tensors));
  MOESPLIT_ASSIGN_OR_RETURN(numa::PlanRequest rq, RequestFor(merged, std::move(shape)));
  rq.n_cpu_moe = ds.n_cpu_moe;
  MOESPLIT_ASSIGN_OR_RETURN(numa::Topology topo, numa::LoadTopology(args.topology));
  MOESPLIT_ASSIGN_OR_RETURN(numa::MachineProfile profile, ProfileFor(args, topo));
  MOESPLIT_ASSIGN_OR_RETURN(numa::Plan plan, numa::MakePlan(topo, profile, rq));
  MOESPLIT_ASSIGN_OR_RETURN(std::string map, DeviceMapText(plan, rq, ds, tensors));
  if (!args.output.empty()) {
    std::ofstream f(args.output);
    f << "# moesplit plan (" << topo.source << ")\n" << numa::PlanToYaml(plan);
    if (!f) return IoError("cannot write plan ", args.output);
  }
  if (args.format == "json") {
    out << numa::PlanToJson(plan);
  } else if (args.format == "yaml") {
    out << numa::PlanToYaml(plan);
  } else {
    out << "topology: " << topo.source
        << (topo.cpu_model.empty() ? "" : " (" + topo.cpu_model + ")") << "\n"
        << numa::PlanToText(plan);
    out << "\n" << map;
  }
  return Status::Ok();
}

void RegisterPlan(CLI::App& app, std::function<int()>* action) {
  auto a = std::make_shared<PlanArgs>();
  CLI::App* cmd = app.add_subcommand(
      "plan",
      "Plan where a model's tensors go (GPU / CPU nodes, NUMA mode, threads) and predict "
      "its prefill and decode tokens/s on this or any machine");
  cmd->add_option("-m,--model", a->model, "GGUF model file");
  cmd->add_option("--preset", a->preset,
                  "plan a make-model preset at full size instead (ds-v3 = DeepSeek-V3/R1)");
  cmd->add_option("--quant", a->quant, "with --preset: Q4_K_M | Q8_0 | IQ4_XS | Q3_K_M | UD-Q2_K_XL | F16 | BF16")
      ->capture_default_str();
  cmd->add_option("--layers", a->layers, "with --preset: blocks (default: all)");
  cmd->add_option("--topology", a->topology,
                  "hwloc XML file or synthetic description (default: this machine)");
  cmd->add_option("--profile", a->profile,
                  "machine profile YAML (default: configs/profiles/<stem>.yaml beside a "
                  "configs/topologies file, else assumed figures)");
  cmd->add_option("--gpu-mem", a->gpu_mem, "GPU memory, e.g. 24G (0 = CPU only)")
      ->capture_default_str();
  cmd->add_option("--gpu-bw", a->gpu_bw, "GPU memory bandwidth in GB/s (default: assumed)");
  cmd->add_option("-c,--ctx-size", a->ctx_size, "KV cache positions")->capture_default_str();
  cmd->add_option("-b,--batch", a->batch, "prompt tokens per prefill batch")->capture_default_str();
  cmd->add_option("--depth", a->depth, "tokens in the cache when decode is predicted")
      ->capture_default_str();
  cmd->add_option("--kv-type", a->kv_type,
                  "f16 | f32: the KV cache's type on the CPU (run / chat / serve allocate f32; a "
                  "cache on the GPU is always f16 latent rows)")
      ->capture_default_str();
  cmd->add_option("-t,--threads", a->threads, "total CPU workers (default: every physical core)");
  cmd->add_option("--numa", a->numa, "single | interleave | replicate | shard (default: the fastest "
                  "predicted of single, shard and replicate that fits; ties: less RAM)");
  cmd->add_option("--nodes", a->nodes, "NUMA node ids to use, e.g. 0,1");
  cmd->add_option("--format", a->format, "text | json | yaml")->capture_default_str();
  cmd->add_option("-o,--output", a->output, "also save the plan as YAML");
  AddDeviceFlags(cmd, &a->device, /*with_device=*/false);
  cmd->callback([a, action] {
    *action = [a] {
      Status s = RunPlan(*a);
      if (!s.ok()) {
        std::cerr << "plan: " << s.ToString() << "\n";
        return 1;
      }
      return 0;
    };
  });
}

}  // namespace moesplit::app
