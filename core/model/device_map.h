// Which device every tensor of a model lives on: the planner's class-level choice (numa/plan.h:
// which tensor classes go to the GPU, how many MoE layers' experts sit in VRAM) applied to tensor
// names, after the user's rules in llama.cpp's language:
//
//   -ot / --override-tensor REGEX=DEVICE[,REGEX=DEVICE...]   first matching rule wins
//   --cpu-moe          every routed expert (ffn_{gate,up,down}_exps) on the CPU
//   --n-cpu-moe N      the routed experts of blocks 0..N-1 on the CPU
//   -ngl N             blocks [n_layer - N, n_layer) on the GPU, the others on the CPU; N > n_layer
//                      also puts the output head and the embeddings there (llama.cpp counts the
//                      head as one more layer)
//   configs/placement/*.yaml rule files (apps/placement_rules.h): the same rules, after the
//                      command line's
//
// A regex is searched anywhere in the name (std::regex_search, ECMAScript), as llama.cpp does:
// "exps=CPU" matches "blk.7.ffn_up_exps.weight". Pure function of names and sizes: testable
// without a model file or a GPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/status.h"

namespace moesplit {

enum class Device { kCpu, kGpu };
const char* DeviceName(Device d);  // "CPU" | "GPU"

// "CPU" -> CPU; "GPU", "CUDA", "CUDA0" -> GPU (case-insensitive; one GPU, so CUDA1+ is an error
// saying so). Anything else: InvalidArgument listing the names.
StatusOr<Device> ParseDeviceName(const std::string& name);

struct PlacementRule {
  std::string pattern;  // ECMAScript regex searched in the tensor name
  Device device = Device::kCpu;
  std::string origin;  // where it came from, for messages: "-ot", "--cpu-moe", "r1.yaml rule 2"
};

// llama.cpp's -ot syntax: "REGEX=DEVICE" or several joined by commas. Errors name the piece:
// no '=', empty regex, a regex std::regex rejects, an unknown device.
StatusOr<std::vector<PlacementRule>> ParseOverrideTensor(const std::string& text,
                                                         const std::string& origin = "-ot");
// Checks that `rule.pattern` compiles (used for rules from files).
Status ValidateRule(const PlacementRule& rule);

// --cpu-moe and --n-cpu-moe N (N > 0) as the rules llama.cpp generates for them.
PlacementRule CpuMoeRule();
PlacementRule NCpuMoeRule(int n);

struct TensorEntry {
  std::string name;  // GGUF name, e.g. "blk.3.ffn_up_exps.weight"
  uint64_t bytes = 0;
};

struct DeviceMapRequest {
  std::vector<PlacementRule> rules;  // user rules, in order (first match wins)
  bool gpu = false;                  // false: every tensor on the CPU; a GPU rule is an error
  std::string no_gpu_reason;         // why there is none, for that error ("--device cpu")
  // The plan's choice (numa::Plan): classes on the GPU by name ("attention", "norms", "router",
  // "other", "shared_experts", "dense_ffn", "output", "embeddings"; the planner's TensorPlacement
  // names) and the number of MoE layers whose experts sit in VRAM (the last ones).
  std::vector<std::string> gpu_classes;
  int64_t gpu_moe_layers = 0;
  int n_gpu_layers = -1;           // -ngl; < 0: not given (every block may use the GPU)
  uint64_t gpu_weight_budget = 0;  // VRAM for weights after KV + scratch; 0 = unchecked
};

struct DeviceMap {
  std::vector<Device> device;       // [tensors] parallel to the input list
  std::vector<std::string> origin;  // [tensors] why: "plan", "-ngl 20", "rule 'exps=CPU' (-ot)"
  uint64_t gpu_bytes = 0;
  uint64_t cpu_bytes = 0;
  std::vector<std::string> warnings;  // rules that matched no tensor, ignored -ngl, ...
};

// Errors: a rule naming the GPU when there is none (InvalidArgument with no_gpu_reason), more
// bytes on the GPU than gpu_weight_budget (FailedPrecondition naming the largest groups and what
// to change), a rule whose regex does not compile.
StatusOr<DeviceMap> AssignDevices(const std::vector<TensorEntry>& tensors,
                                  const DeviceMapRequest& request);

// The map grouped for people: one line per (device, tensor class, origin) with the blocks as
// ranges and the bytes, largest first, e.g.
//   GPU  attention        blk 0-60        8.90 GiB  plan
//   CPU  routed_experts   blk 3-57      327.61 GiB  rule 'exps=CPU' (-ot)
std::string DescribeDeviceMap(const std::vector<TensorEntry>& tensors, const DeviceMap& map);

// The planner's class name of a tensor ("routed_experts", "attention", ...).
const char* PlanClassOf(const std::string& tensor_name);

}  // namespace moesplit
