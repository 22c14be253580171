#include "apps/gpu_placement.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <set>

#include "core/engine/hybrid_forward.h"
#include "core/engine/mla_split.h"
#include "cpu_kernels/quant/quant.h"

#ifdef MOESPLIT_HAVE_CUDA
#include "core/engine/cuda_backend.h"
#include "gpu_kernels/device_info.h"
#endif

namespace moesplit::app {
void AddDeviceFlags(CLI::App* cmd, DeviceFlags* f, bool with_device) {
  if (with_device) {
    cmd->add_option("--device", f->device,
                    "cpu | cuda | auto: where the forward pass runs; cuda: the hybrid pass (attention, "
                    "dense and shared layers on CUDA device 0, routed experts on the CPU pools); "
                    "auto: cuda when a device is visible and the hybrid pass can run the model, "
                    "else the CPU (docs/GPU.md)")
        ->capture_default_str();
  }
  // -ngl and -ot (llama.cpp's spellings) are rewritten to these by main.cc: CLI11 takes one
  // letter after a single dash.
  cmd->add_option("--n-gpu-layers,--gpu-layers", f->n_gpu_layers,
                  "-ngl: blocks on the GPU, counted from the last (default: all that fit)");
  cmd->add_option("--override-tensor", f->override_tensor,
                  "-ot REGEX=DEVICE[,...]: tensors whose name matches go to DEVICE (CPU, CUDA0); "
                  "first match wins; repeatable");
  cmd->add_flag("--cpu-moe", f->cpu_moe, "keep every routed expert on the CPU");
  cmd->add_option("--n-cpu-moe", f->n_cpu_moe,
                  "keep the routed experts of the first N blocks on the CPU");
  cmd->add_option("--rules", f->rules,
                  "YAML placement rule file (configs/placement/); flags override it");
}

StatusOr<DeviceSettings> ResolveDeviceSettings(const DeviceFlags& flags) {
  DeviceSettings s;
  if (!flags.rules.empty()) {
    MOESPLIT_ASSIGN_OR_RETURN(RuleFile f, LoadRuleFile(flags.rules));
    s.file = std::move(f);
  }
  for (const std::string& ot : flags.override_tensor) {
    MOESPLIT_ASSIGN_OR_RETURN(std::vector<PlacementRule> r, ParseOverrideTensor(ot, "-ot"));
    s.rules.insert(s.rules.end(), r.begin(), r.end());
  }
  if (flags.n_cpu_moe < -1) {
    return InvalidArgumentError("--n-cpu-moe ", flags.n_cpu_moe, " must be >= 0");
  }
  // The command line first, then the file.
  const bool cpu_moe = flags.cpu_moe || (flags.n_cpu_moe < 0 && s.file && s.file->cpu_moe);
  if (cpu_moe) {
    s.n_cpu_moe = 1 << 30;
    s.rules.push_back(CpuMoeRule());
  } else if (flags.n_cpu_moe >= 0 || (s.file && s.file->n_cpu_moe)) {
    s.n_cpu_moe = flags.n_cpu_moe >= 0 ? flags.n_cpu_moe : *s.file->n_cpu_moe;
    if (*s.n_cpu_moe > 0) s.rules.push_back(NCpuMoeRule(*s.n_cpu_moe));
  }
  s.n_gpu_layers = flags.n_gpu_layers;
  if (s.n_gpu_layers < 0 && s.file && s.file->n_gpu_layers) s.n_gpu_layers = *s.file->n_gpu_layers;
  if (s.file) s.rules.insert(s.rules.end(), s.file->rules.begin(), s.file->rules.end());
  return s;
}

void DeviceSettings::FillUnset(int* threads, std::string* numa, std::string* nodes) const {
  if (!file) return;
  if (threads != nullptr && *threads == 0 && file->threads) *threads = *file->threads;
  if (numa != nullptr && numa->empty()) *numa = file->numa;
  if (nodes != nullptr && nodes->empty()) *nodes = file->nodes;
}

std::string NoGpuReason(std::string* name) {
#ifdef MOESPLIT_HAVE_CUDA
  StatusOr<std::vector<gpu::DeviceInfo>> devices = gpu::ListDevices();
  if (!devices.ok()) return "the CUDA runtime failed: " + devices.status().message();
  if (devices->empty()) return "no CUDA device found";
  if (name != nullptr) {
    const gpu::DeviceInfo& d = devices->front();
    *name = d.name + " (" + std::to_string(d.total_bytes >> 20) + " MiB)";
  }
  return "";
#else
  (void)name;
  return "this moesplit was built without CUDA";
#endif
}

std::vector<TensorEntry> TensorEntriesOf(const std::vector<gguf::TensorInfo>& tensors) {
  std::vector<TensorEntry> out;
  out.reserve(tensors.size());
  for (const gguf::TensorInfo& t : tensors) out.push_back({t.name, t.nbytes});
  return out;
}

namespace {

// The split the hybrid pass runs: every routed expert on the CPU, every other tensor on the GPU.
Device HybridDeviceOf(const std::string& name) {
  return std::string(PlanClassOf(name)) == "routed_experts" ? Device::kCpu : Device::kGpu;
}

}  // namespace

namespace {

// N of "blk.N.", or -1.
int BlockOf(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  return std::atoi(name.c_str() + 4);
}

}  // namespace

StatusOr<std::vector<engine::ExpertHome>> CheckHybridSplit(const DeviceSettings& s,
                                                           const std::vector<TensorEntry>& tensors,
                                                           std::ostream& err) {
  MOESPLIT_ASSIGN_OR_RETURN(
      DeviceMap map, AssignDevices(tensors, {.rules = s.rules,
                                             .gpu = true,
                                             .gpu_classes = {"attention", "norms", "router",
                                                             "other", "shared_experts", "dense_ffn",
                                                             "output", "embeddings"},
                                             .gpu_moe_layers = 0,
                                             .n_gpu_layers = s.n_gpu_layers}));
  int n_layer = 0;
  for (const TensorEntry& t : tensors) n_layer = std::max(n_layer, BlockOf(t.name) + 1);
  std::vector<engine::ExpertHome> homes(static_cast<size_t>(n_layer), engine::ExpertHome::kAuto);
  std::vector<int> decided(static_cast<size_t>(n_layer), -1);  // tensor index that set homes[b]
  int64_t differ = 0;
  size_t first = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const int blk = BlockOf(tensors[i].name);
    if (HybridDeviceOf(tensors[i].name) == Device::kCpu && blk >= 0) {
      // A routed expert tensor: the plan leaves it to the session (spare VRAM), a rule decides.
      const engine::ExpertHome h = map.origin[i] == "plan"         ? engine::ExpertHome::kAuto
                                   : map.device[i] == Device::kGpu ? engine::ExpertHome::kDevice
                                                                   : engine::ExpertHome::kCpu;
      const size_t b = static_cast<size_t>(blk);
      if (decided[b] >= 0 && homes[b] != h) {
        return UnimplementedError("--device cuda: the routed experts of blk ", blk,
                                  " would be split between devices (", tensors[decided[b]].name,
                                  " vs ", tensors[i].name, " by ", map.origin[i],
                                  "); a layer's experts live on one device: match all three "
                                  "(e.g. -ot 'blk\\.",
                                  blk, "\\.ffn_.*_exps=CUDA0')");
      }
      homes[b] = h;
      decided[b] = static_cast<int>(i);
      continue;
    }
    if (map.device[i] == Device::kGpu) continue;
    if (differ++ == 0) first = i;
  }
  if (differ > 0) {
    return UnimplementedError(
        "--device cuda: ", tensors[first].name, " would be on the CPU (", map.origin[first], "; ",
        differ,
        " tensors in all), but this version's hybrid pass runs everything but the routed experts "
        "on the GPU (partial offload is not built); drop that rule / -ngl, or run --device cpu");
  }
  err << "placement (GPU: everything but the routed experts; routed experts without a rule go "
         "to spare VRAM, whole layers, the last first):\n"
      << DescribeDeviceMap(tensors, map);
  for (const std::string& w : map.warnings) err << "warning: " << w << "\n";
  return homes;
}

std::string HybridBlocker(const engine::Model& model,
                          const std::function<bool(GgmlType)>& device_has_kernel) {
  const Status arch = engine::HybridForward::CheckModel(model.config());
  if (!arch.ok()) return arch.message();
  for (const gguf::TensorInfo& t : model.file().tensors()) {
    if (t.n_dims < 2 || HybridDeviceOf(t.name) == Device::kCpu) continue;  // norms, experts
    // The legacy attn_kv_b never goes to the GPU: attn_k_b / attn_v_b derived from it do
    // (engine/mla_split.h), in their own type.
    if (t.name.find("attn_kv_b") != std::string::npos) {
      const GgmlType derived = engine::MlaSplitType(t.type);
      if (!quant::CanDequantize(t.type)) {
        return StrCat(t.name, " is ", TypeName(t.type), ", which cannot be dequantized to derive ",
                      "the attn_k_b / attn_v_b the GPU needs from it");
      }
      if (!device_has_kernel(derived)) {
        return StrCat(t.name, ": the attn_k_b / attn_v_b the GPU needs are derived from it in ",
                      TypeName(derived), ", which the GPU kernels do not handle");
      }
      continue;
    }
    if (!device_has_kernel(t.type)) {
      return StrCat(t.name, " is ", TypeName(t.type),
                    ", which the GPU kernels do not handle (docs/GPU.md lists the types they do)");
    }
  }
  // The CUDA MLA kernels are written for DeepSeek's latent, 512 + 64 values a position (any
  // width runs on the HostBackend tests); others run on the CPU instead of failing at the first
  // step on the GPU (found on the emulated device).
  const ModelConfig& c = model.config();
  if (c.kv_lora_rank != 512 || c.qk_rope != 64) {
    return StrCat("the GPU's MLA kernels take DeepSeek's 512 + 64 latent; this model's is ",
                  c.kv_lora_rank, " + ", c.qk_rope);
  }
  return "";
}

bool CudaHasKernel(GgmlType type) {
#ifdef MOESPLIT_HAVE_CUDA
  return engine::CudaBackend::HasKernel(type);
#else
  (void)type;
  return false;
#endif
}

StatusOr<DeviceChoice> ApplyDeviceFlags(const DeviceFlags& flags,
                                        const std::vector<TensorEntry>& tensors, std::ostream& err,
                                        int* threads, std::string* numa, std::string* nodes,
                                        const std::string& hybrid_blocker) {
  if (flags.device != "cpu" && flags.device != "cuda" && flags.device != "auto") {
    return InvalidArgumentError("--device '", flags.device, "' (expected cpu | cuda | auto)");
  }
  MOESPLIT_ASSIGN_OR_RETURN(DeviceSettings s, ResolveDeviceSettings(flags));
  std::string gpu_name;
  std::string no_gpu = flags.device == "cpu" ? "--device cpu" : NoGpuReason(&gpu_name);
  if (flags.device == "cuda" && !no_gpu.empty()) {
    return FailedPreconditionError("--device cuda: ", no_gpu);
  }
  if (no_gpu.empty() && !hybrid_blocker.empty()) {
    if (flags.device == "cuda") {
      return FailedPreconditionError("--device cuda: ", hybrid_blocker, "; run --device cpu");
    }
    no_gpu = StrCat("a CUDA device is present, but the hybrid pass cannot run this model: ",
                    hybrid_blocker);
  }
  DeviceChoice choice;
  if (no_gpu.empty()) {  // cuda, or auto with a device: the hybrid pass
    err << "device: cuda (" << gpu_name << "); routed experts on the CPU\n";
    MOESPLIT_ASSIGN_OR_RETURN(choice.expert_homes, CheckHybridSplit(s, tensors, err));
    s.FillUnset(threads, numa, nodes);
    choice.gpu = true;
    choice.gpu_name = gpu_name;
    return choice;
  }
  err << "device: cpu (" << no_gpu << ")\n";
  MOESPLIT_ASSIGN_OR_RETURN(DeviceMap map,
                            AssignDevices(tensors, {.rules = s.rules,
                                                    .gpu = false,
                                                    .no_gpu_reason = no_gpu,
                                                    .n_gpu_layers = s.n_gpu_layers}));
  err << "placement: all " << tensors.size() << " tensors on the CPU";
  if (s.file) err << " (rules: " << s.file->path << ")";
  err << "\n";
  s.FillUnset(threads, numa, nodes);
  for (const std::string& w : map.warnings) err << "warning: " << w << "\n";
  return choice;
}

StatusOr<std::unique_ptr<engine::DenseBackend>> OpenDenseBackend(const DeviceChoice& choice) {
  if (!choice.gpu) return std::unique_ptr<engine::DenseBackend>();
#ifdef MOESPLIT_HAVE_CUDA
  MOESPLIT_ASSIGN_OR_RETURN(std::unique_ptr<engine::CudaBackend> gpu,
                            engine::CudaBackend::Create(0));
  return std::unique_ptr<engine::DenseBackend>(std::move(gpu));
#else
  return FailedPreconditionError("this moesplit was built without CUDA");
#endif
}

}  // namespace moesplit::app
