#include "core/model/device_map.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <regex>
#include <set>
#include <tuple>

#include "core/model/tensor_role.h"

namespace moesplit {
namespace {

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string GiB(uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.2f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return b;
}

// libstdc++'s regex compiler reads a repetition count or back-reference number into a long
// without an overflow check ("a{11111111111111111111}" is undefined behaviour; found by
// yaml_fuzz), so a number longer than 6 digits is refused first. Tensor names hold block
// numbers of 1-3 digits, and libstdc++ caps a compiled pattern at 100,000 states anyway.
constexpr size_t kMaxRegexNumberDigits = 6;

StatusOr<std::regex> Compile(const PlacementRule& rule) {
  size_t run = 0;
  for (char c : rule.pattern) {
    run = std::isdigit(static_cast<unsigned char>(c)) ? run + 1 : 0;
    if (run > kMaxRegexNumberDigits) {
      return InvalidArgumentError(rule.origin, ": regex '", rule.pattern, "' holds a number of ",
                                  "more than ", kMaxRegexNumberDigits, " digits; tensor names ",
                                  "have block numbers such as blk.3, and a repetition count ",
                                  "that large is not a placement rule");
    }
  }
  try {
    return std::regex(rule.pattern, std::regex::ECMAScript | std::regex::optimize);
  } catch (const std::regex_error& e) {
    return InvalidArgumentError(rule.origin, ": regex '", rule.pattern, "' does not compile (",
                                e.what(), ")");
  }
}

std::string RuleText(const PlacementRule& r) {
  return "rule '" + r.pattern + "=" + DeviceName(r.device) + "' (" + r.origin + ")";
}

// "blk 0-2,5,7-9" for the set of blocks; "global" for tensors outside blocks (-1).
std::string Blocks(const std::set<int>& layers) {
  std::string out;
  for (auto it = layers.lower_bound(0); it != layers.end();) {
    const int first = *it;
    int last = first;
    while (++it != layers.end() && *it == last + 1) last = *it;
    out += out.empty() ? "blk " : ",";
    out += std::to_string(first);
    if (last > first) {
      out += '-';
      out += std::to_string(last);
    }
  }
  if (layers.count(-1) > 0) out += out.empty() ? "global" : " + global";
  return out;
}

struct Context {
  const DeviceMapRequest& rq;
  std::vector<std::regex> regexes;  // [rules]
  std::vector<int> hits;            // [rules] tensors each rule decided
  std::set<int> gpu_moe_blocks;     // blocks whose routed experts the plan put in VRAM
  int n_layer = 0;                  // blocks: 1 + the largest block index
};

// Device and origin of one tensor (see the order in device_map.h).
StatusOr<std::pair<Device, std::string>> Decide(const TensorEntry& t, Context* c) {
  const DeviceMapRequest& rq = c->rq;
  for (size_t r = 0; r < rq.rules.size(); ++r) {
    if (!std::regex_search(t.name, c->regexes[r])) continue;
    const PlacementRule& rule = rq.rules[r];
    if (rule.device == Device::kGpu && !rq.gpu) {
      return InvalidArgumentError(RuleText(rule), " puts ", t.name, " on the GPU, but no GPU is ",
                                  "used (", rq.no_gpu_reason,
                                  "): drop the rule or run where a CUDA device is");
    }
    ++c->hits[r];
    return std::pair{rule.device, RuleText(rule)};
  }
  if (!rq.gpu) return std::pair{Device::kCpu, std::string("no GPU")};
  const int layer = LayerOfTensor(t.name);
  if (rq.n_gpu_layers >= 0) {
    const bool on_gpu =
        layer >= 0 ? layer >= c->n_layer - rq.n_gpu_layers : rq.n_gpu_layers > c->n_layer;
    if (!on_gpu) return std::pair{Device::kCpu, "-ngl " + std::to_string(rq.n_gpu_layers)};
  }
  const std::string cls = PlanClassOf(t.name);
  bool gpu = false;
  if (cls == "routed_experts") {
    gpu = c->gpu_moe_blocks.count(layer) > 0;
  } else {
    gpu = std::find(rq.gpu_classes.begin(), rq.gpu_classes.end(), cls) != rq.gpu_classes.end();
  }
  return std::pair{gpu ? Device::kGpu : Device::kCpu, std::string("plan")};
}

Status CheckBudget(const std::vector<TensorEntry>& tensors, const DeviceMap& map, uint64_t budget) {
  if (budget == 0 || map.gpu_bytes <= budget) return Status::Ok();
  // The largest GPU groups by origin, so the message says which rule or choice to change.
  std::map<std::string, uint64_t> by_origin;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (map.device[i] == Device::kGpu) by_origin[map.origin[i]] += tensors[i].bytes;
  }
  std::vector<std::pair<uint64_t, std::string>> groups;
  for (const auto& [o, b] : by_origin) groups.push_back({b, o});
  std::sort(groups.rbegin(), groups.rend());
  std::string largest;
  for (size_t i = 0; i < groups.size() && i < 3; ++i) {
    largest += (i ? ", " : "") + groups[i].second + " " + GiB(groups[i].first);
  }
  return FailedPreconditionError(
      "the tensors placed on the GPU need ", GiB(map.gpu_bytes), " but the GPU has ", GiB(budget),
      " for weights after the KV cache and scratch (largest: ", largest,
      "): move tensors to the CPU (-ot REGEX=CPU, --n-cpu-moe N, --cpu-moe, a lower -ngl) or "
      "lower --ctx-size");
}

}  // namespace

const char* DeviceName(Device d) { return d == Device::kGpu ? "GPU" : "CPU"; }

StatusOr<Device> ParseDeviceName(const std::string& name) {
  const std::string u = Upper(name);
  if (u == "CPU") return Device::kCpu;
  if (u == "GPU" || u == "CUDA" || u == "CUDA0") return Device::kGpu;
  if (u.rfind("CUDA", 0) == 0) {
    return InvalidArgumentError("device '", name,
                                "': moesplit uses one GPU (CUDA0); multi-GPU placement is not "
                                "supported");
  }
  return InvalidArgumentError("device '", name, "' (expected CPU, GPU, CUDA or CUDA0)");
}

StatusOr<std::vector<PlacementRule>> ParseOverrideTensor(const std::string& text,
                                                         const std::string& origin) {
  std::vector<PlacementRule> rules;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string piece =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t eq = piece.rfind('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgumentError(origin, " '", piece,
                                  "': expected REGEX=DEVICE, e.g. 'exps=CPU' or "
                                  "'blk\\.(3|4)\\.ffn_.*_exps=CUDA0'");
    }
    PlacementRule rule{.pattern = piece.substr(0, eq), .origin = origin};
    StatusOr<Device> d = ParseDeviceName(piece.substr(eq + 1));
    if (!d.ok()) return InvalidArgumentError(origin, " '", piece, "': ", d.status().message());
    rule.device = *d;
    MOESPLIT_RETURN_IF_ERROR(ValidateRule(rule));
    rules.push_back(std::move(rule));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return rules;
}

Status ValidateRule(const PlacementRule& rule) { return Compile(rule).status(); }

PlacementRule CpuMoeRule() {
  return {.pattern = "\\.ffn_(up|down|gate)_exps", .device = Device::kCpu, .origin = "--cpu-moe"};
}

PlacementRule NCpuMoeRule(int n) {
  std::string alt;
  for (int i = 0; i < n; ++i) {
    if (i > 0) alt += '|';
    alt += std::to_string(i);
  }
  return {.pattern = "^blk\\.(" + alt + ")\\.ffn_(up|down|gate)_exps",
          .device = Device::kCpu,
          .origin = "--n-cpu-moe " + std::to_string(n)};
}

const char* PlanClassOf(const std::string& tensor_name) {
  switch (ClassifyTensor(tensor_name)) {
    case TensorRole::kRoutedExperts:
      return "routed_experts";
    case TensorRole::kSharedExperts:
      return "shared_experts";
    case TensorRole::kDenseFfn:
      return "dense_ffn";
    case TensorRole::kRouter:
      return "router";
    case TensorRole::kAttention:
      return "attention";
    case TensorRole::kEmbeddings:
      return "embeddings";
    case TensorRole::kOutput:
      return "output";
    case TensorRole::kNorms:
      return "norms";
    case TensorRole::kOther:
      return "other";
  }
  return "other";
}

StatusOr<DeviceMap> AssignDevices(const std::vector<TensorEntry>& tensors,
                                  const DeviceMapRequest& rq) {
  Context c{.rq = rq, .hits = std::vector<int>(rq.rules.size(), 0)};
  for (const PlacementRule& r : rq.rules) {
    MOESPLIT_ASSIGN_OR_RETURN(std::regex re, Compile(r));
    c.regexes.push_back(std::move(re));
  }
  std::set<int> moe_blocks;
  for (const TensorEntry& t : tensors) {
    const int layer = LayerOfTensor(t.name);
    c.n_layer = std::max(c.n_layer, layer + 1);
    if (ClassifyTensor(t.name) == TensorRole::kRoutedExperts) moe_blocks.insert(layer);
  }
  // The last gpu_moe_layers MoE blocks.
  for (auto it = moe_blocks.rbegin();
       it != moe_blocks.rend() && static_cast<int64_t>(c.gpu_moe_blocks.size()) < rq.gpu_moe_layers;
       ++it) {
    c.gpu_moe_blocks.insert(*it);
  }
  DeviceMap map;
  for (const TensorEntry& t : tensors) {
    MOESPLIT_ASSIGN_OR_RETURN(auto decided, Decide(t, &c));
    map.device.push_back(decided.first);
    map.origin.push_back(std::move(decided.second));
    (decided.first == Device::kGpu ? map.gpu_bytes : map.cpu_bytes) += t.bytes;
  }
  for (size_t r = 0; r < rq.rules.size(); ++r) {
    if (c.hits[r] == 0) {
      map.warnings.push_back(RuleText(rq.rules[r]) +
                             " decides no tensor (it matches none, or an earlier rule wins)");
    }
  }
  if (!rq.gpu && rq.n_gpu_layers > 0) {
    map.warnings.push_back("-ngl " + std::to_string(rq.n_gpu_layers) + " ignored: no GPU (" +
                           rq.no_gpu_reason + ")");
  }
  MOESPLIT_RETURN_IF_ERROR(CheckBudget(tensors, map, rq.gpu ? rq.gpu_weight_budget : 0));
  return map;
}

std::string DescribeDeviceMap(const std::vector<TensorEntry>& tensors, const DeviceMap& map) {
  struct Group {
    std::set<int> layers;
    uint64_t bytes = 0;
    int count = 0;
  };
  std::map<std::tuple<Device, std::string, std::string>, Group> groups;
  for (size_t i = 0; i < tensors.size(); ++i) {
    Group& g = groups[{map.device[i], PlanClassOf(tensors[i].name), map.origin[i]}];
    g.layers.insert(LayerOfTensor(tensors[i].name));
    g.bytes += tensors[i].bytes;
    ++g.count;
  }
  std::vector<std::pair<uint64_t, std::string>> lines;
  for (const auto& [key, g] : groups) {
    char b[512];
    std::snprintf(b, sizeof(b), "  %-3s  %-15s %-16s %4d tensors %11s  %s\n",
                  DeviceName(std::get<0>(key)), std::get<1>(key).c_str(), Blocks(g.layers).c_str(),
                  g.count, GiB(g.bytes).c_str(), std::get<2>(key).c_str());
    lines.push_back({g.bytes, b});
  }
  std::stable_sort(lines.begin(), lines.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string out = "placement: " + std::to_string(tensors.size()) + " tensors, GPU " +
                    GiB(map.gpu_bytes) + ", CPU " + GiB(map.cpu_bytes) + "\n";
  for (const auto& l : lines) out += l.second;
  for (const std::string& w : map.warnings) out += "  warning: " + w + "\n";
  return out;
}

}  // namespace moesplit
