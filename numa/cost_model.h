// The planner's cost model (internal to numa/planner.cc, exposed for its tests): seconds per
// decoded token and per prompt batch for one layout (mode, nodes, threads, what is on the GPU).
//
// Decode of one token reads, from DRAM, k routed experts per MoE layer (k x bytes per expert-layer
// x MoE layers: 11.5 GB for DeepSeek-V3 at Q4_K_M) plus every CPU-resident non-expert weight once
// (plus the KV cache rows at the decode depth); the GEMV kernels are mostly bandwidth-bound, so
//   decode s = bytes / (read GB/s of the mode x decode_fraction)        [DRAM / interconnect]
//            except for the routed experts where their kernels are slower than that: with the
//            profile's per-core rate by expert type, max(read, sum_t bytes_t / (T x rate_t))
//            [compute: IQ2_XXS / IQ1_S on 2 cores, ~25 GB/s each against a 74 GB/s probe]
//            + GPU bytes / GPU GB/s + 2 PCIe hand-offs per MoE layer   [gpu / pcie, with a GPU]
//            + barriers: barrier_us x parallel phases per layer x layers
// where the read GB/s of a mode is (per node i with t_i of the T threads, GB/s from the profile):
//   single      B / R_i(t_i)                                 one node reads everything locally
//   interleave  max_i sum_j (B t_i/T / n) / R_ij             pages round-robin over n nodes: 1/n
//               of every thread's bytes is local, the rest crosses to node j at the cross-node
//               GB/s R_ij (the interconnect): this is what makes a naive 2-socket run slower
//   replicate   max_i B c_i/k / R_i(t_i)                    node i computes c_i of the k experts
//   shard       max_i B t_i/T / R_i(t_i) + exchange          every node reads its slice of every
//               expert locally; the partial outputs (D floats per node) are summed over the
//               interconnect once per MoE layer
// Prefill of P prompt tokens: per part, max(MACs / (GMAC/s per core x threads), weight bytes
// read once per batch / read GB/s), summed; routed experts touched by a batch: the fraction
// 1 - (1 - k/E)^P of them. Routed experts run at moe_gmacs_per_core (the MoE path: a few dozen
// tokens per expert, dispatch and combine), everything else at gemm_gmacs_per_core.
#pragma once

#include <string>
#include <vector>

#include "numa/machine_profile.h"
#include "numa/model_shape.h"
#include "numa/plan.h"
#include "numa/planner.h"
#include "numa/topology.h"

namespace moesplit::numa {

// Named constants of the model (each one's source in its comment).
//
// Parallel phases (ParallelFor barriers) per layer of the CPU engine's decode step
// (core/engine/forward_mla.cc, moe/fused_ffn.cc): MLA projections (q_a + kv_a_mqa), q_b,
// attention, attn_output, router, experts up/gate, experts down = 7 in a MoE layer; a dense
// layer has 4 + FFN up, down = 6; with a GPU the CPU runs only the experts' 2.
inline constexpr int kCpuPhasesMoeLayer = 7;
inline constexpr int kCpuPhasesDenseLayer = 6;
inline constexpr int kExpertPhasesMoeLayer = 2;
// A cache line moving between sockets costs ~3.5x one moving between cores of a socket
// (published core-to-core latencies of 2-socket EPYC 9004 / Xeon 4th gen: ~120 ns within a
// socket, ~400-500 ns across xGMI / UPI). A flat barrier's arrival counter is one line every
// worker updates in turn, so its cost grows with the workers (barrier_us x T / T_node) and by
// this factor when the workers span packages; same-package nodes (NPS4 / SNC) cost 1.3x.
inline constexpr double kCrossPackageLineFactor = 3.5;
inline constexpr double kCrossNodeLineFactor = 1.3;
// One hand-off between node pools (NodeFanout: a leader wakes / is waited for): one cache-line
// round trip, ~2 x the latencies above.
inline constexpr double kCrossPackageHopUs = 1.0;
inline constexpr double kCrossNodeHopUs = 0.3;
// One small host<->device copy plus stream synchronisation (cudaMemcpyAsync + event wait of a
// few KB): ~10 us measured by llama.cpp / KTransformers users; two per MoE layer per token.
inline constexpr double kPcieHopUs = 10;
// Cross-node GB/s when the profile has no figure for a pair: local GB/s x 10 / SLIT distance
// (EPYC 2-socket NPS1: 10/32 -> 31% of local, close to xGMI's ~120 of ~380 GB/s).
inline constexpr double kSlitLocalDistance = 10;

// Which threads share one barrier / which memory they read.
struct NodeUse {
  int id = 0;       // OS node id
  int index = 0;    // index into Topology::nodes
  int package = 0;  // Topology package index
  int threads = 0;  // workers on this node
};

// A layout to cost: everything the planner decided except the prediction.
struct Layout {
  NumaMode mode = NumaMode::kSingle;
  std::vector<NodeUse> nodes;  // ascending id, at least one
  TensorClassSizes gpu_bytes;  // classes placed on the GPU (bytes / params)
  TensorClassSizes gpu_params;
  TensorClassSizes cpu_bytes;  // classes left on the CPU
  TensorClassSizes cpu_params;
  bool kv_on_gpu = false;
  // MoE layers whose routed experts are in VRAM (gpu_bytes.routed_experts holds their bytes):
  // decode reads k experts of each of them on the GPU instead of from DRAM.
  int64_t gpu_moe_layers = 0;
  uint64_t gpu_free_bytes = 0;  // VRAM left after everything placed (for streamed experts)
};

// Prefill with the CPU's routed experts streamed to the GPU instead, layer by layer: each MoE
// layer's experts cross PCIe in chunks of kStreamChunkBytes, double-buffered, so the copy of the
// next chunk overlaps the GPU's multiply of this one; a layer then costs max(bytes / PCIe,
// MACs / GPU rate) against the CPU's time for the same layer. It pays for long prompts: V3
// Q4_K_M moves ~6.2 GiB per layer = ~270 ms at 25 GB/s, the CPU's share of a 512-token batch
// is ~30-60 ms per layer, of 8192 tokens ~0.5-1 s.
inline constexpr uint64_t kStreamChunkBytes = uint64_t{1} << 30;

struct StreamCost {
  bool feasible = false;      // a GPU with 2 chunks of free VRAM and CPU-side MoE layers
  int64_t min_batch = 0;      // the smallest batch (power of 2, <= 65536) where streaming wins; 0 = none
  double cpu_layer_s = 0;     // at the request's batch: one MoE layer's routed experts on the CPU
  double stream_layer_s = 0;  // ... streamed to the GPU
};
StreamCost PredictStreaming(const Topology& topo, const MachineProfile& profile,
                            const PlanRequest& request, const Layout& layout);

struct CostResult {
  Prediction predicted;
  std::vector<std::string> notes;  // the arithmetic, one line each, for the plan's reasons
};

CostResult PredictCost(const Topology& topo, const MachineProfile& profile,
                       const PlanRequest& request, const Layout& layout);

}  // namespace moesplit::numa
