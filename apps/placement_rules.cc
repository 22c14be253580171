#include "apps/placement_rules.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <sstream>

namespace moesplit::app {
namespace {

// "FILE:LINE: " for messages about a node of a rule file.
std::string At(const std::string& path, const YAML::Node& n) {
  return path + ":" + std::to_string(n.Mark().line + 1) + ": ";
}

template <typename T>
StatusOr<T> As(const std::string& path, const YAML::Node& n, const char* key, const char* what) {
  try {
    return n.as<T>();
  } catch (const YAML::Exception&) {
    return InvalidArgumentError(At(path, n), key, ": expected ", what, ", got '", YAML::Dump(n),
                                "'");
  }
}

StatusOr<std::vector<PlacementRule>> ParseRules(const std::string& path, const YAML::Node& list) {
  if (!list.IsSequence()) {
    return InvalidArgumentError(At(path, list), "rules: expected a list of {match, device}");
  }
  std::vector<PlacementRule> rules;
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node r = list[i];
    const std::string where = path + " rule " + std::to_string(i + 1);
    if (!r.IsMap() || !r["match"] || !r["device"] || r.size() != 2) {
      return InvalidArgumentError(At(path, r), "rule ", i + 1,
                                  ": expected exactly the keys match (a regex) and device "
                                  "(CPU | GPU | CUDA0)");
    }
    MOESPLIT_ASSIGN_OR_RETURN(std::string match,
                              As<std::string>(path, r["match"], "match", "a regex string"));
    MOESPLIT_ASSIGN_OR_RETURN(std::string dev,
                              As<std::string>(path, r["device"], "device", "a device name"));
    StatusOr<Device> d = ParseDeviceName(dev);
    if (!d.ok()) return InvalidArgumentError(At(path, r["device"]), d.status().message());
    PlacementRule rule{.pattern = match, .device = *d, .origin = where};
    Status ok = ValidateRule(rule);
    if (!ok.ok()) return InvalidArgumentError(At(path, r["match"]), ok.message());
    rules.push_back(std::move(rule));
  }
  return rules;
}

Status ParseKey(const std::string& key, const YAML::Node& v, RuleFile* f) {
  const std::string& p = f->path;
  if (key == "description") {
    MOESPLIT_ASSIGN_OR_RETURN(f->description, As<std::string>(p, v, "description", "text"));
  } else if (key == "rules") {
    MOESPLIT_ASSIGN_OR_RETURN(f->rules, ParseRules(p, v));
  } else if (key == "cpu_moe") {
    MOESPLIT_ASSIGN_OR_RETURN(f->cpu_moe, As<bool>(p, v, "cpu_moe", "true or false"));
  } else if (key == "n_cpu_moe" || key == "n_gpu_layers" || key == "threads") {
    MOESPLIT_ASSIGN_OR_RETURN(int n, As<int>(p, v, key.c_str(), "an integer"));
    if (n < 0) return InvalidArgumentError(At(p, v), key, ": ", n, " must be >= 0");
    (key == "n_cpu_moe" ? f->n_cpu_moe : key == "threads" ? f->threads : f->n_gpu_layers) = n;
  } else if (key == "numa") {
    MOESPLIT_ASSIGN_OR_RETURN(f->numa, As<std::string>(p, v, "numa", "a NUMA mode"));
  } else if (key == "nodes") {
    MOESPLIT_ASSIGN_OR_RETURN(f->nodes, As<std::string>(p, v, "nodes", "node ids like \"0,1\""));
  } else {
    return InvalidArgumentError(At(p, v), "unknown key '", key,
                                "' (known: description, rules, cpu_moe, n_cpu_moe, n_gpu_layers, "
                                "threads, numa, nodes)");
  }
  return Status::Ok();
}

// The top-level map's keys and values. yaml-cpp throws on what the checks above do not
// foresee (a key that is itself a list, an alias to nothing); that is the user's file, so it
// becomes an error naming the file rather than an escaped exception.
Status ParseRoot(const YAML::Node& root, RuleFile* f) {
  const std::string& path = f->path;
  if (root.IsNull()) return Status::Ok();
  if (!root.IsMap()) return InvalidArgumentError("rule file ", path, ": expected a YAML map");
  try {
    for (const auto& kv : root) {
      if (!kv.first.IsScalar()) {
        return InvalidArgumentError(At(path, kv.first), "expected a key name, got '",
                                    YAML::Dump(kv.first), "'");
      }
      MOESPLIT_RETURN_IF_ERROR(ParseKey(kv.first.Scalar(), kv.second, f));
    }
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError("rule file ", path, ": ", e.what());
  }
  return Status::Ok();
}

}  // namespace

StatusOr<RuleFile> RuleFileFromYaml(const std::string& text, const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError("rule file ", path, ": not valid YAML (", e.what(), ")");
  }
  RuleFile f;
  f.path = path;
  MOESPLIT_RETURN_IF_ERROR(ParseRoot(root, &f));
  return f;
}

StatusOr<RuleFile> LoadRuleFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFoundError("rule file ", path, ": cannot open it");
  std::stringstream ss;
  ss << in.rdbuf();
  return RuleFileFromYaml(ss.str(), path);
}

}  // namespace moesplit::app
