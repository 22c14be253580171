#include "numa/plan.h"

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <type_traits>

#include "numa/topology.h"

namespace moesplit::numa {
namespace {

constexpr NumaMode kModes[] = {NumaMode::kSingle, NumaMode::kInterleave, NumaMode::kReplicate,
                               NumaMode::kShard};
constexpr const char* kBottlenecks[] = {"dram_bandwidth", "interconnect", "pcie", "gpu",
                                        "compute"};

std::string GiB(uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.2f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return b;
}

// Reads `key` of map `node` into *out; `path` names the field in errors. Every plan field is
// required: a plan is written by PlanToYaml, not by hand.
template <typename T>
Status Field(const YAML::Node& node, const char* key, const std::string& path, T* out) {
  const YAML::Node v = node[key];
  if (!v) return InvalidArgumentError(path, ".", key, ": missing");
  try {
    *out = v.as<T>();
  } catch (const YAML::Exception&) {
    return InvalidArgumentError(path, ".", key, ": cannot read '", YAML::Dump(v), "' as ",
                                std::is_same_v<T, std::string> ? "a string" : "a number");
  }
  if constexpr (std::is_arithmetic_v<T>) {
    // YAML's .nan / .inf read as doubles; no count, rate or time here may be either.
    if constexpr (std::is_floating_point_v<T>) {
      if (!std::isfinite(*out)) {
        return InvalidArgumentError(path, ".", key, ": ", *out, " is not a finite number");
      }
    }
    if (*out < 0) return InvalidArgumentError(path, ".", key, ": negative value ", *out);
  }
  return Status::Ok();
}

Status OneOf(const std::string& value, std::initializer_list<const char*> allowed,
             const std::string& path) {
  std::string list;
  for (const char* a : allowed) {
    if (value == a) return Status::Ok();
    if (!list.empty()) list += " | ";
    list += a;
  }
  return InvalidArgumentError(path, ": '", value, "' is not one of ", list);
}

Status ParseNodePlan(const YAML::Node& y, const std::string& path, NodePlan* n) {
  if (!y.IsMap()) return InvalidArgumentError(path, ": expected a map");
  MOESPLIT_RETURN_IF_ERROR(Field(y, "id", path, &n->id));
  MOESPLIT_RETURN_IF_ERROR(Field(y, "threads", path, &n->threads));
  MOESPLIT_RETURN_IF_ERROR(Field(y, "cpus", path, &n->cpus));
  MOESPLIT_RETURN_IF_ERROR(Field(y, "expert_bytes", path, &n->expert_bytes));
  MOESPLIT_RETURN_IF_ERROR(Field(y, "ram_bytes", path, &n->ram_bytes));
  if (static_cast<size_t>(n->threads) != n->cpus.size()) {
    return InvalidArgumentError(path, ".cpus: ", n->cpus.size(), " CPUs for ", n->threads,
                                " threads");
  }
  return Status::Ok();
}

Status ParsePrediction(const YAML::Node& y, const std::string& path, Prediction* p) {
  if (!y || !y.IsMap()) return InvalidArgumentError(path, ": expected a map");
  MOESPLIT_RETURN_IF_ERROR(Field(y, "decode_tok_s", path, &p->decode_tok_s));
  MOESPLIT_RETURN_IF_ERROR(Field(y, "prefill_tok_s", path, &p->prefill_tok_s));
  MOESPLIT_RETURN_IF_ERROR(Field(y, "bottleneck", path, &p->bottleneck));
  MOESPLIT_RETURN_IF_ERROR(Field(y, "prefill_bottleneck", path, &p->prefill_bottleneck));
  MOESPLIT_RETURN_IF_ERROR(Field(y, "decode_cpu_s", path, &p->decode_cpu_s));
  MOESPLIT_RETURN_IF_ERROR(Field(y, "decode_gpu_s", path, &p->decode_gpu_s));
  MOESPLIT_RETURN_IF_ERROR(Field(y, "decode_sync_s", path, &p->decode_sync_s));
  for (const std::string* b : {&p->bottleneck, &p->prefill_bottleneck}) {
    if (std::find(std::begin(kBottlenecks), std::end(kBottlenecks), *b) ==
        std::end(kBottlenecks)) {
      return InvalidArgumentError(path, ": bottleneck '", *b,
                                  "' is not one of dram_bandwidth | interconnect | pcie | gpu | "
                                  "compute");
    }
  }
  return Status::Ok();
}

Status ParseLists(const YAML::Node& root, const std::string& name, Plan* p) {
  const YAML::Node nodes = root["nodes"];
  if (!nodes || !nodes.IsSequence() || nodes.size() == 0) {
    return InvalidArgumentError(name, ".nodes: expected a non-empty list");
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    NodePlan n;
    MOESPLIT_RETURN_IF_ERROR(ParseNodePlan(nodes[i], name + ".nodes[" + std::to_string(i) + "]", &n));
    p->nodes.push_back(std::move(n));
  }
  const YAML::Node tensors = root["tensors"];
  if (!tensors || !tensors.IsSequence()) return InvalidArgumentError(name, ".tensors: expected a list");
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string path = name + ".tensors[" + std::to_string(i) + "]";
    if (!tensors[i].IsMap()) return InvalidArgumentError(path, ": expected a map");
    TensorPlacement t;
    MOESPLIT_RETURN_IF_ERROR(Field(tensors[i], "class", path, &t.tensor_class));
    MOESPLIT_RETURN_IF_ERROR(Field(tensors[i], "device", path, &t.device));
    MOESPLIT_RETURN_IF_ERROR(Field(tensors[i], "bytes", path, &t.bytes));
    MOESPLIT_RETURN_IF_ERROR(OneOf(t.device, {"gpu", "cpu"}, path + ".device"));
    p->tensors.push_back(std::move(t));
  }
  const YAML::Node reasons = root["reasons"];
  if (reasons && !reasons.IsSequence()) return InvalidArgumentError(name, ".reasons: expected a list");
  for (size_t i = 0; reasons && i < reasons.size(); ++i) {
    p->reasons.push_back(reasons[i].as<std::string>());
  }
  return Status::Ok();
}

Status ParsePlan(const YAML::Node& root, const std::string& name, Plan* p) {
  if (!root.IsMap()) return InvalidArgumentError(name, ": expected a YAML map at the top");
  MOESPLIT_RETURN_IF_ERROR(Field(root, "model", name, &p->model));
  MOESPLIT_RETURN_IF_ERROR(Field(root, "ctx_size", name, &p->ctx_size));
  MOESPLIT_RETURN_IF_ERROR(Field(root, "batch", name, &p->batch));
  std::string mode;
  MOESPLIT_RETURN_IF_ERROR(Field(root, "numa_mode", name, &mode));
  StatusOr<NumaMode> m = NumaModeFromName(mode);
  if (!m.ok()) return InvalidArgumentError(name, ".numa_mode: ", m.status().message());
  p->numa_mode = *m;
  MOESPLIT_RETURN_IF_ERROR(ParseLists(root, name, p));
  MOESPLIT_RETURN_IF_ERROR(Field(root, "gpu_bytes", name, &p->gpu_bytes));
  MOESPLIT_RETURN_IF_ERROR(Field(root, "cpu_bytes", name, &p->cpu_bytes));
  MOESPLIT_RETURN_IF_ERROR(Field(root, "kv_bytes", name, &p->kv_bytes));
  MOESPLIT_RETURN_IF_ERROR(Field(root, "kv_device", name, &p->kv_device));
  MOESPLIT_RETURN_IF_ERROR(OneOf(p->kv_device, {"gpu", "cpu"}, name + ".kv_device"));
  // Absent in plans saved before experts could go to VRAM: none there.
  if (root["gpu_moe_layers"]) {
    MOESPLIT_RETURN_IF_ERROR(Field(root, "gpu_moe_layers", name, &p->gpu_moe_layers));
  }
  if (root["prefill_stream_min_batch"]) {
    MOESPLIT_RETURN_IF_ERROR(
        Field(root, "prefill_stream_min_batch", name, &p->prefill_stream_min_batch));
  }
  return ParsePrediction(root["predicted"], name + ".predicted", &p->predicted);
}

}  // namespace

const char* NumaModeName(NumaMode mode) {
  switch (mode) {
    case NumaMode::kSingle: return "single";
    case NumaMode::kInterleave: return "interleave";
    case NumaMode::kReplicate: return "replicate";
    case NumaMode::kShard: return "shard";
  }
  return "?";
}

StatusOr<NumaMode> NumaModeFromName(const std::string& name) {
  for (NumaMode m : kModes) {
    if (name == NumaModeName(m)) return m;
  }
  return InvalidArgumentError("unknown NUMA mode '", name,
                              "' (expected single | interleave | replicate | shard)");
}

int Plan::TotalThreads() const {
  int t = 0;
  for (const NodePlan& n : nodes) t += n.threads;
  return t;
}

std::string PlanToText(const Plan& p) {
  std::ostringstream os;
  char line[256];
  os << "plan: " << p.model << ", ctx " << p.ctx_size << ", batch " << p.batch << "\n";
  os << "numa mode: " << NumaModeName(p.numa_mode) << ", " << p.nodes.size() << " node(s), "
     << p.TotalThreads() << " threads\n\n";
  std::snprintf(line, sizeof(line), "  %-5s %-8s %-24s %14s %14s\n", "node", "threads", "cpus",
                "experts", "ram");
  os << line;
  for (const NodePlan& n : p.nodes) {
    std::string cpus = FormatCpuList(n.cpus);
    if (cpus.size() > 24) cpus = cpus.substr(0, 21) + "...";
    std::snprintf(line, sizeof(line), "  %-5d %-8d %-24s %14s %14s\n", n.id, n.threads,
                  cpus.c_str(), GiB(n.expert_bytes).c_str(), GiB(n.ram_bytes).c_str());
    os << line;
  }
  os << "\n";
  std::snprintf(line, sizeof(line), "  %-16s %-6s %14s\n", "tensors", "device", "size");
  os << line;
  for (const TensorPlacement& t : p.tensors) {
    std::snprintf(line, sizeof(line), "  %-16s %-6s %14s\n", t.tensor_class.c_str(),
                  t.device.c_str(), GiB(t.bytes).c_str());
    os << line;
  }
  os << "\nRAM needed: " << GiB(p.cpu_bytes) << "   VRAM needed: " << GiB(p.gpu_bytes)
     << "   KV cache: " << GiB(p.kv_bytes) << " on " << p.kv_device << "\n";
  if (p.gpu_moe_layers > 0) {
    os << "routed experts of the last " << p.gpu_moe_layers << " MoE layers in VRAM\n";
  }
  if (p.prefill_stream_min_batch > 0) {
    os << "prompts of " << p.prefill_stream_min_batch
       << "+ tokens per batch: CPU-side experts streamed to the GPU over PCIe\n";
  }
  const Prediction& r = p.predicted;
  std::snprintf(line, sizeof(line),
                "predicted: decode %.2f tok/s (bottleneck: %s), prefill %.1f tok/s at %d-token "
                "prompts (bottleneck: %s)\n",
                r.decode_tok_s, r.bottleneck.c_str(), r.prefill_tok_s, p.batch,
                r.prefill_bottleneck.c_str());
  os << line;
  std::snprintf(line, sizeof(line),
                "  per decoded token: CPU %.2f ms + GPU %.2f ms + sync %.2f ms\n",
                r.decode_cpu_s * 1e3, r.decode_gpu_s * 1e3, r.decode_sync_s * 1e3);
  os << line;
  if (!p.reasons.empty()) os << "\nwhy:\n";
  for (const std::string& s : p.reasons) os << "  - " << s << "\n";
  return os.str();
}

std::string PlanToJson(const Plan& p) {
  nlohmann::ordered_json j;
  j["model"] = p.model;
  j["ctx_size"] = p.ctx_size;
  j["batch"] = p.batch;
  j["numa_mode"] = NumaModeName(p.numa_mode);
  j["nodes"] = nlohmann::ordered_json::array();
  for (const NodePlan& n : p.nodes) {
    j["nodes"].push_back({{"id", n.id},
                          {"threads", n.threads},
                          {"cpus", n.cpus},
                          {"expert_bytes", n.expert_bytes},
                          {"ram_bytes", n.ram_bytes}});
  }
  j["tensors"] = nlohmann::ordered_json::array();
  for (const TensorPlacement& t : p.tensors) {
    j["tensors"].push_back({{"class", t.tensor_class}, {"device", t.device}, {"bytes", t.bytes}});
  }
  j["gpu_bytes"] = p.gpu_bytes;
  j["cpu_bytes"] = p.cpu_bytes;
  j["kv_bytes"] = p.kv_bytes;
  j["kv_device"] = p.kv_device;
  j["gpu_moe_layers"] = p.gpu_moe_layers;
  j["prefill_stream_min_batch"] = p.prefill_stream_min_batch;
  const Prediction& r = p.predicted;
  j["predicted"] = {{"decode_tok_s", r.decode_tok_s},
                    {"prefill_tok_s", r.prefill_tok_s},
                    {"bottleneck", r.bottleneck},
                    {"prefill_bottleneck", r.prefill_bottleneck},
                    {"decode_cpu_s", r.decode_cpu_s},
                    {"decode_gpu_s", r.decode_gpu_s},
                    {"decode_sync_s", r.decode_sync_s}};
  j["reasons"] = p.reasons;
  // A model name from a file's metadata need not be UTF-8: replace, do not throw.
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

std::string PlanToYaml(const Plan& p) {
  YAML::Emitter out;
  out.SetDoublePrecision(17);  // exact round trip of every double
  out << YAML::BeginMap;
  out << YAML::Key << "model" << YAML::Value << p.model;
  out << YAML::Key << "ctx_size" << YAML::Value << p.ctx_size;
  out << YAML::Key << "batch" << YAML::Value << p.batch;
  out << YAML::Key << "numa_mode" << YAML::Value << NumaModeName(p.numa_mode);
  out << YAML::Key << "nodes" << YAML::Value << YAML::BeginSeq;
  for (const NodePlan& n : p.nodes) {
    out << YAML::BeginMap << YAML::Key << "id" << YAML::Value << n.id << YAML::Key << "threads"
        << YAML::Value << n.threads << YAML::Key << "cpus" << YAML::Value << YAML::Flow << n.cpus
        << YAML::Key << "expert_bytes" << YAML::Value << n.expert_bytes << YAML::Key
        << "ram_bytes" << YAML::Value << n.ram_bytes << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::Key << "tensors" << YAML::Value << YAML::BeginSeq;
  for (const TensorPlacement& t : p.tensors) {
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "class" << YAML::Value << t.tensor_class
        << YAML::Key << "device" << YAML::Value << t.device << YAML::Key << "bytes" << YAML::Value
        << t.bytes << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::Key << "gpu_bytes" << YAML::Value << p.gpu_bytes;
  out << YAML::Key << "cpu_bytes" << YAML::Value << p.cpu_bytes;
  out << YAML::Key << "kv_bytes" << YAML::Value << p.kv_bytes;
  out << YAML::Key << "kv_device" << YAML::Value << p.kv_device;
  out << YAML::Key << "gpu_moe_layers" << YAML::Value << p.gpu_moe_layers;
  out << YAML::Key << "prefill_stream_min_batch" << YAML::Value << p.prefill_stream_min_batch;
  const Prediction& r = p.predicted;
  out << YAML::Key << "predicted" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "decode_tok_s" << YAML::Value << r.decode_tok_s;
  out << YAML::Key << "prefill_tok_s" << YAML::Value << r.prefill_tok_s;
  out << YAML::Key << "bottleneck" << YAML::Value << r.bottleneck;
  out << YAML::Key << "prefill_bottleneck" << YAML::Value << r.prefill_bottleneck;
  out << YAML::Key << "decode_cpu_s" << YAML::Value << r.decode_cpu_s;
  out << YAML::Key << "decode_gpu_s" << YAML::Value << r.decode_gpu_s;
  out << YAML::Key << "decode_sync_s" << YAML::Value << r.decode_sync_s;
  out << YAML::EndMap;
  out << YAML::Key << "reasons" << YAML::Value << p.reasons;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

StatusOr<Plan> PlanFromYaml(const std::string& text, const std::string& name) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError(name, ": not valid YAML: ", e.what());
  }
  Plan p;
  try {
    MOESPLIT_RETURN_IF_ERROR(ParsePlan(root, name, &p));
  } catch (const YAML::Exception& e) {  // e.g. a reason that is a map, not a string
    return InvalidArgumentError(name, ": ", e.what());
  }
  return p;
}

StatusOr<Plan> LoadPlan(const std::string& path) {
  std::ifstream f(path);
  if (!f) return NotFoundError("plan ", path, " not found (make one with `moesplit plan -o FILE`)");
  std::stringstream ss;
  ss << f.rdbuf();
  return PlanFromYaml(ss.str(), path);
}

}  // namespace moesplit::numa
