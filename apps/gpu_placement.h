// The GPU placement flags of run / chat / bench / plan, in llama.cpp's language, and YAML rule
// files (configs/placement/, apps/placement_rules.h):
//
//   --device cpu|cuda|auto      where the forward pass runs (auto: the GPU when it can be used)
//   -ngl, --n-gpu-layers N      blocks [n_layer - N, n_layer) on the GPU (N > n_layer: + the head)
//   -ot, --override-tensor R=D  tensors whose name matches regex R on device D (CPU | CUDA0 | GPU);
//                               repeatable, comma-separated lists allowed; first match wins
//   --cpu-moe                   every routed expert on the CPU
//   --n-cpu-moe N               the routed experts of blocks 0..N-1 on the CPU
//   --rules FILE                a YAML rule file; the command line's flags win over it
//
// Rule files: apps/placement_rules.h.
//
// With a CUDA device (--device cuda, or auto when one is visible) run / bench / chat / eval use
// the hybrid pass (core/engine/hybrid_forward.h): everything but the routed experts on the GPU;
// routed experts on the CPU, or in VRAM by whole layers (rules: -ot, --n-cpu-moe, --cpu-moe;
// without a rule spare VRAM takes the last layers). Partial offload (-ngl below the layer
// count, non-expert tensors on the CPU) is not built yet and is an error that says so; without a
// device every tensor is on the CPU and a GPU rule is an error. `moesplit plan --gpu-mem N` plans
// and prints any GPU placement for any machine.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "core/engine/dense_backend.h"
#include "core/engine/engine.h"
#include "core/gguf/gguf_file.h"
#include "core/model/device_map.h"
#include "apps/placement_rules.h"

namespace CLI {
class App;  // <CLI/CLI.hpp> only where flags are registered: it costs ~6 s per file
}  // namespace CLI

namespace moesplit::app {

struct DeviceFlags {
  std::string device = "auto";               // --device (run / chat / bench only)
  int n_gpu_layers = -1;                     // -ngl; < 0: not given
  std::vector<std::string> override_tensor;  // -ot, in command-line order
  bool cpu_moe = false;                      // --cpu-moe
  int n_cpu_moe = -1;                        // --n-cpu-moe; < 0: not given
  std::string rules;                         // --rules FILE
};

// Adds the flags above to a subcommand (--device only when with_device).
void AddDeviceFlags(CLI::App* cmd, DeviceFlags* flags, bool with_device);

// The placement flags after merging the rule file (if any) under the command line's: the rules in
// order (-ot, then --cpu-moe / --n-cpu-moe, then the file's), the -ngl / --n-cpu-moe values, and
// the file's thread / NUMA settings for the caller to apply where its own flags are unset.
struct DeviceSettings {
  std::vector<PlacementRule> rules;
  int n_gpu_layers = -1;
  std::optional<int> n_cpu_moe;  // --cpu-moe = a value >= every block count
  std::optional<RuleFile> file;

  // The rule file's threads / numa / nodes into *threads (when 0; threads may be null), *numa
  // and *nodes (when empty): the command line's flags win.
  void FillUnset(int* threads, std::string* numa, std::string* nodes) const;
};
StatusOr<DeviceSettings> ResolveDeviceSettings(const DeviceFlags& flags);

// With a GPU: the device map of the hybrid pass (the plan puts every non-expert class on the GPU;
// the user's rules come first), printed to err, and where each layer's routed experts live
// ([n_layer]: a rule's device, else kAuto: spare VRAM). Unimplemented, naming the first tensor
// and the rule that moved it, when the rules or -ngl put a non-expert tensor on the CPU or split
// a layer's experts between devices.
StatusOr<std::vector<engine::ExpertHome>> CheckHybridSplit(const DeviceSettings& s,
                                                           const std::vector<TensorEntry>& tensors,
                                                           std::ostream& err);

// What ApplyDeviceFlags decided.
struct DeviceChoice {
  bool gpu = false;                              // the hybrid pass on CUDA device 0
  std::string gpu_name;                          // "NVIDIA H100 80GB HBM3 (81559 MiB)"
  std::vector<engine::ExpertHome> expert_homes;  // GPU: SessionOptions::expert_homes
};

// For run / chat / bench / eval: resolves --device against this build and machine, checks the
// rules against the model's tensors (without a GPU a GPU rule is an error; with one, a split
// other than the hybrid pass's is; rules that match nothing warn), prints the device and the
// placement to `err`, and fills the rule file's threads / numa / nodes in with
// DeviceSettings::FillUnset (threads may be null). hybrid_blocker (HybridBlocker's answer, ""
// when the hybrid pass runs the model): with a device, `auto` then runs on the CPU saying why
// and `cuda` is an error.
StatusOr<DeviceChoice> ApplyDeviceFlags(const DeviceFlags& flags,
                                        const std::vector<TensorEntry>& tensors, std::ostream& err,
                                        int* threads, std::string* numa, std::string* nodes,
                                        const std::string& hybrid_blocker = "");

// Why the hybrid pass cannot run `model`, or "": its architecture / attention layout
// (HybridForward::CheckModel), or the first tensor it would put on the GPU whose type the GPU
// has no kernel for (device_has_kernel; a file with Q2_K / Q3_K attention; for a legacy
// attn_kv_b, the type of the attn_k_b / attn_v_b derived from it, engine/mla_split.h). Routed
// experts without a kernel are no blocker: they stay on the CPU.
std::string HybridBlocker(const engine::Model& model,
                          const std::function<bool(GgmlType)>& device_has_kernel);
// The CUDA kernels' types (engine::CudaBackend::HasKernel); false for all without CUDA.
bool CudaHasKernel(GgmlType type);

// The backend of the choice: nullptr for the CPU, the CUDA device otherwise (errors: no device,
// the runtime failed). It must outlive the sessions that use it.
StatusOr<std::unique_ptr<engine::DenseBackend>> OpenDenseBackend(const DeviceChoice& choice);

// Every tensor of a GGUF file as (name, bytes).
std::vector<TensorEntry> TensorEntriesOf(const std::vector<gguf::TensorInfo>& tensors);

// "no CUDA device found" / "this moesplit was built without CUDA" / "" (a device is visible);
// `name` receives the first device's name and memory when there is one.
std::string NoGpuReason(std::string* name);

}  // namespace moesplit::app
