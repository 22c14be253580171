// libFuzzer entry point for the YAML loaders: the first byte picks the loader (0: placement rule
// files, apps/placement_rules.h; 1: saved plans, numa/plan.h; 2: machine profiles,
// numa/machine_profile.h), the rest is the file's text. Any text must give an error with a
// message, or a value within the loader's documented limits; plans and profiles must then
// survive a save and load unchanged (what `plan -o` / `topo --save` write is read back as is).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "apps/placement_rules.h"
#include "numa/machine_profile.h"
#include "numa/plan.h"

namespace numa = moesplit::numa;

namespace {

void CheckRules(const std::string& text) {
  auto f = moesplit::app::RuleFileFromYaml(text, "fuzz.yaml");
  if (!f.ok()) {
    if (f.status().message().empty()) __builtin_trap();
    return;
  }
  for (const moesplit::PlacementRule& r : f->rules) {
    if (!moesplit::ValidateRule(r).ok()) __builtin_trap();
  }
  for (const auto& n : {f->n_cpu_moe, f->n_gpu_layers, f->threads}) {
    if (n && *n < 0) __builtin_trap();
  }
}

void CheckPlan(const std::string& text) {
  auto p = numa::PlanFromYaml(text, "fuzz.yaml");
  if (!p.ok()) {
    if (p.status().message().empty()) __builtin_trap();
    return;
  }
  for (const numa::NodePlan& n : p->nodes) {
    if (n.threads < 0 || static_cast<size_t>(n.threads) != n.cpus.size()) __builtin_trap();
    for (int cpu : n.cpus) {
      if (cpu < 0) __builtin_trap();
    }
  }
  if (!std::isfinite(p->predicted.decode_tok_s) || !std::isfinite(p->predicted.prefill_tok_s)) {
    __builtin_trap();
  }
  const std::string saved = numa::PlanToYaml(*p);
  auto again = numa::PlanFromYaml(saved, "saved.yaml");
  if (!again.ok() || numa::PlanToYaml(*again) != saved) __builtin_trap();
  (void)numa::PlanToText(*p);
  (void)numa::PlanToJson(*p);
}

void CheckProfile(const std::string& text) {
  auto p = numa::MachineProfileFromYaml(text, "fuzz.yaml");
  if (!p.ok()) {
    if (p.status().message().empty()) __builtin_trap();
    return;
  }
  for (const numa::NodeProfile& n : p->nodes) {
    if (n.read.empty()) __builtin_trap();
    for (const numa::BandwidthPoint& b : n.read) {
      if (b.threads < 1 || !std::isfinite(b.gbps) || b.gbps < 0) __builtin_trap();
    }
    // What the planner asks of a profile: finite bandwidths at any thread count.
    for (int threads : {0, 1, n.read.back().threads, 1 << 20}) {
      if (!std::isfinite(p->ReadGbps(n.node, threads))) __builtin_trap();
    }
  }
  for (double tpe : {0.5, 6.0, 48.0, 1e6}) {
    if (!std::isfinite(numa::MoeGmacsPerCore(p->kernels, tpe))) __builtin_trap();
  }
  const std::string saved = numa::MachineProfileToYaml(*p);
  auto again = numa::MachineProfileFromYaml(saved, "saved.yaml");
  if (!again.ok() || numa::MachineProfileToYaml(*again) != saved) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0:
      CheckRules(text);
      break;
    case 1:
      CheckPlan(text);
      break;
    default:
      CheckProfile(text);
      break;
  }
  return 0;
}
