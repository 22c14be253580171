#include "numa/machine_profile.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <sstream>

namespace moesplit::numa {

double TypeMixSlowdown(const KernelProfile& k, const std::map<std::string, uint64_t>& mix) {
  const auto q4k = k.gemm_gmacs_by_type.find("q4_K");
  const double base = q4k != k.gemm_gmacs_by_type.end() ? q4k->second : k.gemm_gmacs_per_core;
  double total = 0, weighted = 0;
  for (const auto& [type, elements] : mix) {
    const auto it = k.gemm_gmacs_by_type.find(type);
    const double rate = it != k.gemm_gmacs_by_type.end() && it->second > 0 ? it->second : base;
    total += static_cast<double>(elements);
    weighted += static_cast<double>(elements) * (base > 0 ? base / rate : 1.0);
  }
  return total > 0 ? weighted / total : 1.0;
}

double ExpertDecodeComputeSeconds(const KernelProfile& k,
                                  const std::map<std::string, uint64_t>& bytes_by_type,
                                  double routed_bytes, int threads) {
  double total = 0, seconds = 0;
  for (const auto& [type, bytes] : bytes_by_type) total += static_cast<double>(bytes);
  if (total <= 0 || threads <= 0) return 0;
  for (const auto& [type, bytes] : bytes_by_type) {
    const auto it = k.expert_decode_gbps_per_core.find(type);
    if (it == k.expert_decode_gbps_per_core.end() || it->second <= 0) continue;
    seconds += routed_bytes * (static_cast<double>(bytes) / total) / (threads * it->second * 1e9);
  }
  return seconds;
}

namespace {

// A curve {tokens per expert -> value} interpolated in log(tokens per expert), clamped at its
// ends.
double Interpolate(const std::map<double, double>& c, double x) {
  if (x <= c.begin()->first) return c.begin()->second;
  if (x >= c.rbegin()->first) return c.rbegin()->second;
  const auto hi = c.upper_bound(x);
  const auto lo = std::prev(hi);
  const double f = std::log(x / lo->first) / std::log(hi->first / lo->first);
  return lo->second + f * (hi->second - lo->second);
}

}  // namespace

double MoeGmacsPerCore(const KernelProfile& k, double tokens_per_expert) {
  if (!k.moe_gmacs_by_tokens_per_expert.empty()) {
    return Interpolate(k.moe_gmacs_by_tokens_per_expert, tokens_per_expert);
  }
  if (k.moe_gmacs_per_core > 0) return k.moe_gmacs_per_core;
  const std::map<double, double> share(std::begin(kAssumedMoeShare), std::end(kAssumedMoeShare));
  return k.gemm_gmacs_per_core * Interpolate(share, tokens_per_expert);
}

const NodeProfile* MachineProfile::FindNode(int node) const {
  for (const NodeProfile& n : nodes) {
    if (n.node == node) return &n;
  }
  return nullptr;
}

double MachineProfile::ReadGbps(int node, int threads) const {
  const NodeProfile* n = FindNode(node);
  if (n == nullptr || n->read.empty() || threads <= 0) return 0;
  const std::vector<BandwidthPoint>& r = n->read;
  if (threads <= r.front().threads) return r.front().gbps * threads / r.front().threads;
  for (size_t i = 1; i < r.size(); ++i) {
    if (threads <= r[i].threads) {
      const double f =
          static_cast<double>(threads - r[i - 1].threads) / (r[i].threads - r[i - 1].threads);
      return r[i - 1].gbps + f * (r[i].gbps - r[i - 1].gbps);
    }
  }
  return r.back().gbps;
}

double MachineProfile::CrossGbps(int cpu_node, int mem_node) const {
  for (const CrossProfile& c : cross) {
    if (c.cpu_node == cpu_node && c.mem_node == mem_node) return c.gbps;
  }
  return 0;
}

std::string MachineProfileToYaml(const MachineProfile& p) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "measured" << YAML::Value << p.measured;
  out << YAML::Key << "cpu_model" << YAML::Value << p.cpu_model;
  out << YAML::Key << "topology" << YAML::Value << p.topology;
  out << YAML::Key << "nodes" << YAML::Value << YAML::BeginSeq;
  for (const NodeProfile& n : p.nodes) {
    out << YAML::BeginMap << YAML::Key << "node" << YAML::Value << n.node;
    out << YAML::Key << "read" << YAML::Value << YAML::BeginSeq;
    for (const BandwidthPoint& b : n.read) {
      out << YAML::Flow << YAML::BeginMap << YAML::Key << "threads" << YAML::Value << b.threads
          << YAML::Key << "gbps" << YAML::Value << b.gbps << YAML::EndMap;
    }
    out << YAML::EndSeq;
    out << YAML::Key << "stream_gbps" << YAML::Value << n.stream_gbps;
    out << YAML::Key << "strided_gbps" << YAML::Value << n.strided_gbps << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::Key << "cross" << YAML::Value << YAML::BeginSeq;
  for (const CrossProfile& c : p.cross) {
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "cpu_node" << YAML::Value << c.cpu_node
        << YAML::Key << "mem_node" << YAML::Value << c.mem_node << YAML::Key << "threads"
        << YAML::Value << c.threads << YAML::Key << "gbps" << YAML::Value << c.gbps
        << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::Key << "kernels" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "isa" << YAML::Value << p.kernels.isa;
  out << YAML::Key << "decode_fraction" << YAML::Value << p.kernels.decode_fraction;
  if (p.kernels.dense_decode_fraction > 0) {
    out << YAML::Key << "dense_decode_fraction" << YAML::Value << p.kernels.dense_decode_fraction;
  }
  out << YAML::Key << "gemm_gmacs_per_core" << YAML::Value << p.kernels.gemm_gmacs_per_core;
  if (p.kernels.moe_gmacs_per_core > 0) {
    out << YAML::Key << "moe_gmacs_per_core" << YAML::Value << p.kernels.moe_gmacs_per_core;
  }
  if (p.kernels.ffn_gmacs_per_core > 0) {
    out << YAML::Key << "ffn_gmacs_per_core" << YAML::Value << p.kernels.ffn_gmacs_per_core;
  }
  if (!p.kernels.moe_gmacs_by_tokens_per_expert.empty()) {
    out << YAML::Key << "moe_gmacs_by_tokens_per_expert" << YAML::Value << YAML::Flow
        << YAML::BeginMap;
    for (const auto& [tpe, rate] : p.kernels.moe_gmacs_by_tokens_per_expert) {
      out << YAML::Key << tpe << YAML::Value << rate;
    }
    out << YAML::EndMap;
  }
  for (const auto& [key, rates] :
       {std::pair{"gemm_gmacs_by_type", &p.kernels.gemm_gmacs_by_type},
        std::pair{"expert_decode_gbps_per_core", &p.kernels.expert_decode_gbps_per_core}}) {
    if (rates->empty()) continue;
    out << YAML::Key << key << YAML::Value << YAML::Flow << YAML::BeginMap;
    for (const auto& [type, rate] : *rates) out << YAML::Key << type << YAML::Value << rate;
    out << YAML::EndMap;
  }
  out << YAML::Key << "barrier_us" << YAML::Value << p.kernels.barrier_us;
  out << YAML::EndMap << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

namespace {

// Reads `key` of map `node` into *out; `path` names the field in errors. Absent keys keep the
// default unless `required`.
template <typename T>
Status Field(const YAML::Node& node, const char* key, const std::string& path, bool required,
             T* out) {
  const YAML::Node v = node[key];
  if (!v) {
    if (required) return InvalidArgumentError(path, ".", key, ": missing");
    return Status::Ok();
  }
  try {
    *out = v.as<T>();
  } catch (const YAML::Exception&) {
    return InvalidArgumentError(path, ".", key, ": cannot read '", YAML::Dump(v), "' as ",
                                std::is_same_v<T, std::string> ? "a string"
                                : std::is_same_v<T, bool>      ? "true/false"
                                                               : "a number");
  }
  if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
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

// A map of weight type -> a positive rate under `key` of `k` (absent: left empty); `what` is the
// unit, for the error.
Status TypeRates(const YAML::Node& k, const char* key, const std::string& path, const char* what,
                 std::map<std::string, double>* out) {
  const YAML::Node types = k[key];
  if (!types) return Status::Ok();
  if (!types.IsMap()) return InvalidArgumentError(path, ".", key, ": expected a map");
  for (const auto& kv : types) {
    const std::string type = kv.first.as<std::string>();
    double rate = 0;
    MOESPLIT_RETURN_IF_ERROR(Field(types, type.c_str(), path + "." + key, true, &rate));
    if (!(rate > 0 && std::isfinite(rate))) {
      return InvalidArgumentError(path, ".", key, ".", type, ": ", rate, " must be > 0 (", what,
                                  ")");
    }
    (*out)[type] = rate;
  }
  return Status::Ok();
}

Status ParseNode(const YAML::Node& y, const std::string& path, NodeProfile* n) {
  if (!y.IsMap()) return InvalidArgumentError(path, ": expected a map");
  MOESPLIT_RETURN_IF_ERROR(Field(y, "node", path, true, &n->node));
  const YAML::Node read = y["read"];
  if (!read || !read.IsSequence() || read.size() == 0) {
    return InvalidArgumentError(path, ".read: expected a non-empty list of {threads, gbps}");
  }
  for (size_t i = 0; i < read.size(); ++i) {
    const std::string p = path + ".read[" + std::to_string(i) + "]";
    if (!read[i].IsMap()) return InvalidArgumentError(p, ": expected a map");
    BandwidthPoint b;
    MOESPLIT_RETURN_IF_ERROR(Field(read[i], "threads", p, true, &b.threads));
    MOESPLIT_RETURN_IF_ERROR(Field(read[i], "gbps", p, true, &b.gbps));
    if (b.threads < 1) return InvalidArgumentError(p, ".threads: must be >= 1");
    if (!n->read.empty() && b.threads <= n->read.back().threads) {
      return InvalidArgumentError(p, ".threads: thread counts must ascend");
    }
    n->read.push_back(b);
  }
  MOESPLIT_RETURN_IF_ERROR(Field(y, "stream_gbps", path, false, &n->stream_gbps));
  return Field(y, "strided_gbps", path, false, &n->strided_gbps);
}

Status ParseProfile(const YAML::Node& root, const std::string& name, MachineProfile* p) {
  if (!root.IsMap()) return InvalidArgumentError(name, ": expected a YAML map at the top");
  MOESPLIT_RETURN_IF_ERROR(Field(root, "measured", name, false, &p->measured));
  MOESPLIT_RETURN_IF_ERROR(Field(root, "cpu_model", name, false, &p->cpu_model));
  MOESPLIT_RETURN_IF_ERROR(Field(root, "topology", name, false, &p->topology));
  const YAML::Node nodes = root["nodes"];
  if (!nodes || !nodes.IsSequence() || nodes.size() == 0) {
    return InvalidArgumentError(name, ".nodes: expected a non-empty list of node profiles");
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    NodeProfile n;
    MOESPLIT_RETURN_IF_ERROR(ParseNode(nodes[i], name + ".nodes[" + std::to_string(i) + "]", &n));
    if (p->FindNode(n.node) != nullptr) {
      return InvalidArgumentError(name, ".nodes[", i, "]: node ", n.node, " listed twice");
    }
    p->nodes.push_back(std::move(n));
  }
  if (const YAML::Node cross = root["cross"]) {
    if (!cross.IsSequence()) return InvalidArgumentError(name, ".cross: expected a list");
    for (size_t i = 0; i < cross.size(); ++i) {
      const std::string path = name + ".cross[" + std::to_string(i) + "]";
      if (!cross[i].IsMap()) return InvalidArgumentError(path, ": expected a map");
      CrossProfile c;
      MOESPLIT_RETURN_IF_ERROR(Field(cross[i], "cpu_node", path, true, &c.cpu_node));
      MOESPLIT_RETURN_IF_ERROR(Field(cross[i], "mem_node", path, true, &c.mem_node));
      MOESPLIT_RETURN_IF_ERROR(Field(cross[i], "threads", path, false, &c.threads));
      MOESPLIT_RETURN_IF_ERROR(Field(cross[i], "gbps", path, true, &c.gbps));
      p->cross.push_back(c);
    }
  }
  if (const YAML::Node k = root["kernels"]) {
    const std::string path = name + ".kernels";
    if (!k.IsMap()) return InvalidArgumentError(path, ": expected a map");
    MOESPLIT_RETURN_IF_ERROR(Field(k, "isa", path, false, &p->kernels.isa));
    MOESPLIT_RETURN_IF_ERROR(Field(k, "decode_fraction", path, false, &p->kernels.decode_fraction));
    MOESPLIT_RETURN_IF_ERROR(
        Field(k, "dense_decode_fraction", path, false, &p->kernels.dense_decode_fraction));
    if (p->kernels.dense_decode_fraction > 1.5) {
      return InvalidArgumentError(path, ".dense_decode_fraction: ",
                                  p->kernels.dense_decode_fraction,
                                  " is not a fraction of the read bandwidth (expected 0..1.5)");
    }
    MOESPLIT_RETURN_IF_ERROR(
        Field(k, "gemm_gmacs_per_core", path, false, &p->kernels.gemm_gmacs_per_core));
    MOESPLIT_RETURN_IF_ERROR(Field(k, "barrier_us", path, false, &p->kernels.barrier_us));
    MOESPLIT_RETURN_IF_ERROR(
        Field(k, "moe_gmacs_per_core", path, false, &p->kernels.moe_gmacs_per_core));
    MOESPLIT_RETURN_IF_ERROR(
        Field(k, "ffn_gmacs_per_core", path, false, &p->kernels.ffn_gmacs_per_core));
    if (const YAML::Node curve = k["moe_gmacs_by_tokens_per_expert"]) {
      const std::string cpath = path + ".moe_gmacs_by_tokens_per_expert";
      if (!curve.IsMap()) return InvalidArgumentError(cpath, ": expected a map");
      for (const auto& kv : curve) {
        double tpe = 0, rate = 0;
        try {
          tpe = kv.first.as<double>();
          rate = kv.second.as<double>();
        } catch (const YAML::Exception&) {
          return InvalidArgumentError(cpath, ": expected tokens-per-expert: GMAC/s numbers");
        }
        if (!(tpe > 0 && rate > 0 && std::isfinite(tpe) && std::isfinite(rate))) {
          return InvalidArgumentError(cpath, ".", tpe, ": ", rate,
                                      " must both be finite and > 0");
        }
        p->kernels.moe_gmacs_by_tokens_per_expert[tpe] = rate;
      }
    }
    MOESPLIT_RETURN_IF_ERROR(TypeRates(k, "gemm_gmacs_by_type", path, "GMAC/s per core",
                                       &p->kernels.gemm_gmacs_by_type));
    MOESPLIT_RETURN_IF_ERROR(TypeRates(k, "expert_decode_gbps_per_core", path,
                                       "GB/s of file bytes per core",
                                       &p->kernels.expert_decode_gbps_per_core));
    if (p->kernels.decode_fraction > 1.5) {
      return InvalidArgumentError(path, ".decode_fraction: ", p->kernels.decode_fraction,
                                  " is not a fraction of the read bandwidth (expected 0..1)");
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<MachineProfile> MachineProfileFromYaml(const std::string& text, const std::string& name) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError(name, ": not valid YAML: ", e.what());
  }
  MachineProfile p;
  try {
    MOESPLIT_RETURN_IF_ERROR(ParseProfile(root, name, &p));
  } catch (const YAML::Exception& e) {  // e.g. a gemm_gmacs_by_type key that is a list
    return InvalidArgumentError(name, ": ", e.what());
  }
  p.source = name;
  return p;
}

Status SaveMachineProfile(const MachineProfile& profile, const std::string& path) {
  std::ofstream f(path);
  if (!f) return IoError("cannot write machine profile ", path);
  f << "# moesplit machine profile (moesplit topo --measure); GB/s = 1e9 bytes/s\n"
    << MachineProfileToYaml(profile);
  if (!f) return IoError("error writing machine profile ", path);
  return Status::Ok();
}

StatusOr<MachineProfile> LoadMachineProfile(const std::string& path) {
  std::ifstream f(path);
  if (!f) {
    return NotFoundError("machine profile ", path,
                         " not found (make one with `moesplit topo --measure --save FILE`)");
  }
  std::stringstream ss;
  ss << f.rdbuf();
  return MachineProfileFromYaml(ss.str(), path);
}

}  // namespace moesplit::numa
