// YAML placement rule files (configs/placement/), the file form of -ot / --cpu-moe /
// --n-cpu-moe / -ngl and a few CPU settings (apps/gpu_placement.h merges them under the flags).
//
// Rule file (every key optional; unknown keys are errors, so typos do not pass silently):
//   description: DeepSeek-R1 Q4_K_M on one 24 GB GPU, one EPYC socket
//   rules:                          # after -ot / --cpu-moe / --n-cpu-moe; first match wins
//     - {match: '\.ffn_(up|down|gate)_exps\.', device: CPU}
//   n_cpu_moe: 10                   # or cpu_moe: true
//   n_gpu_layers: 99
//   threads: 64                     # CPU workers (run/bench -t; plan --threads)
//   numa: single                    # --numa
//   nodes: "0"                      # --nodes
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "core/model/device_map.h"

namespace moesplit::app {

struct RuleFile {
  std::string path;
  std::string description;
  std::vector<PlacementRule> rules;
  std::optional<int> n_cpu_moe;
  bool cpu_moe = false;
  std::optional<int> n_gpu_layers;
  std::optional<int> threads;
  std::string numa;
  std::string nodes;
};

// Parses a rule file. Errors name the file, the key or rule index, and the line.
StatusOr<RuleFile> LoadRuleFile(const std::string& path);
// The same for the file's text; `path` names it in errors. Any text gives a RuleFile or an
// InvalidArgument error (tests/fuzz/yaml_fuzz.cc).
StatusOr<RuleFile> RuleFileFromYaml(const std::string& text, const std::string& path);

}  // namespace moesplit::app
