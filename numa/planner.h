// The planner: a pure function (topology, machine profile, model shape, GPU, context, batch) ->
// Plan (numa/plan.h): which tensor classes go to the GPU and which stay on CPU nodes, the NUMA
// mode, the nodes and threads, the KV cache's home, RAM per node and VRAM, and the predicted
// prefill / decode tokens/s with the bottleneck named. No I/O, no clocks: every input is a
// number, so any server can be planned (and the planner tested) anywhere.
//
//   MOESPLIT_ASSIGN_OR_RETURN(Plan p, MakePlan(topo, profile, {.model = shape, .ctx_size = 4096}));
//
// Infeasible requests (model larger than RAM, attention + KV larger than VRAM, a node that cannot
// hold its share) come back as FailedPrecondition with the numbers and what to change.
// The cost model is described in numa/cost_model.h.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/base/status.h"
#include "numa/machine_profile.h"
#include "numa/model_shape.h"
#include "numa/plan.h"
#include "numa/topology.h"

namespace moesplit::numa {

// The GPU as the planner sees it. Figures the user did not give are the stated defaults below
// and flagged as assumed (the plan's reasons say so).
struct GpuSpec {
  uint64_t memory_bytes = 0;  // usable VRAM; 0 = no GPU (CPU only)
  double mem_gbps = 0;        // device memory read GB/s (0 = kAssumedGpuMemGbps)
  double pcie_gbps = 0;       // host<->device GB/s, one direction (0 = kAssumedPcieGbps)
  double gmacs = 0;           // dense GEMM GMAC/s for prefill (0 = kAssumedGpuGmacs)
};

// Defaults for a workstation GPU when the user gives none (the reference setup's RTX 6000 Ada:
// 960 GB/s GDDR6; PCIe 4.0 x16 = 32 GB/s raw, ~25 GB/s achieved by cudaMemcpy; 91 TFLOPS FP16
// dense = 45.5 TMAC/s peak, half of it sustained by dequantize + GEMM).
inline constexpr double kAssumedGpuMemGbps = 960;
inline constexpr double kAssumedPcieGbps = 25;
inline constexpr double kAssumedGpuGmacs = 22750;

enum class KvType { kF16, kF32 };
const char* KvTypeName(KvType type);  // "f16" | "f32"

struct PlanRequest {
  ModelShape model;
  int64_t ctx_size = 4096;  // KV cache positions
  int batch = 512;          // prompt tokens per prefill batch (prefill is predicted at this size)
  // Positions already in the cache when decode is predicted: 0 = llama-bench's tg test (what
  // `moesplit bench -n` measures); ctx_size / 2 for a conversation's average.
  int64_t decode_depth = 0;
  // The CPU cache's type: f32 is what run / chat / bench / serve allocate (eval --kv-type f16
  // halves it). A cache on the GPU is always the hybrid pass's f16 latent rows.
  KvType kv_type = KvType::kF32;
  GpuSpec gpu;
  // Overrides (empty = the planner decides).
  std::optional<NumaMode> numa_mode;
  std::vector<int> nodes;  // OS node ids
  int threads = 0;         // total workers, split evenly over the nodes; 0 = every physical core
  // Routed experts in VRAM, whole MoE layers at a time (llama.cpp's --cpu-moe / --n-cpu-moe):
  // nullopt = the planner fills the VRAM left after every other class with the experts of the
  // last MoE layers; N = the experts of blocks 0..N-1 stay on the CPU and those of all later
  // MoE blocks go to the GPU (FailedPrecondition if they do not fit); N >= n_layers
  // (--cpu-moe) = every routed expert on the CPU. Assumes the dense blocks lead (DeepSeek).
  std::optional<int64_t> n_cpu_moe;
};

// Positions of one KV block in the engine's caches (core/engine/kv_cache.h kKvBlockSize; the
// planner does not include the engine, a test compares the two).
inline constexpr int64_t kKvBlockPositions = 32;

// KV cache bytes per position as the engine allocates them: the hybrid pass's f16 latent rows on
// the GPU (model.kv_gpu_bytes_per_token), the CPU cache at request.kv_type otherwise.
uint64_t KvBytesPerPosition(const PlanRequest& request, bool on_gpu);
// The whole cache: ctx_size positions rounded up to whole blocks.
uint64_t KvCacheBytes(const PlanRequest& request, bool on_gpu);

StatusOr<Plan> MakePlan(const Topology& topo, const MachineProfile& profile,
                        const PlanRequest& request);

// Figures for a machine nobody measured (no --profile): each node's read bandwidth grows
// linearly to kAssumedNodeGbps(cores) and the cross-node figures follow the SLIT distances. The
// result has measured = false and source "assumed: ..."; plans made with it say so and how to
// measure (`moesplit topo --measure --save FILE`).
MachineProfile AssumedProfile(const Topology& topo);

}  // namespace moesplit::numa
