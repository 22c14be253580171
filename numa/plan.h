// Plan: the planner's answer (numa/planner.h) as plain data — where every class of tensor goes
// (GPU or CPU node(s)), the NUMA mode, the nodes and threads used, RAM per node, VRAM, the KV
// cache's home, and the predicted tokens/s with the bottleneck named. Printable as a table,
// JSON or YAML; `moesplit run/bench --plan plan.yaml` loads the YAML back.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/status.h"

namespace moesplit::numa {

// How routed-expert weights (and the threads that read them) are spread over NUMA nodes.
enum class NumaMode {
  kSingle,      // one node (or socket): its threads read only its memory
  kInterleave,  // pages round-robin over the nodes, threads on all of them (the naive spread)
  kReplicate,   // a full copy per node; each node computes a share of the experts (memory x nodes)
  kShard,       // each expert's intermediate dim split across nodes; partial outputs summed (1x)
};
const char* NumaModeName(NumaMode mode);                  // "single" | "interleave" | ...
StatusOr<NumaMode> NumaModeFromName(const std::string& name);  // error lists the valid names

struct NodePlan {
  int id = 0;                 // OS node id
  int threads = 0;            // workers (one per physical core)
  std::vector<int> cpus;      // [threads] OS CPU ids the workers pin to
  uint64_t expert_bytes = 0;  // routed-expert weight bytes resident on this node
  uint64_t ram_bytes = 0;     // everything resident on this node (experts + CPU tensors + KV)
};

struct TensorPlacement {
  std::string tensor_class;  // "routed_experts", "shared_experts", "attention", "dense_ffn",
                             // "embeddings", "output", "norms", "kv_cache"
  std::string device;        // "gpu" or "cpu"
  uint64_t bytes = 0;
};

struct Prediction {
  double decode_tok_s = 0;
  double prefill_tok_s = 0;
  // "dram_bandwidth" | "interconnect" | "pcie" | "gpu" | "compute"
  std::string bottleneck;          // of decode
  std::string prefill_bottleneck;
  // Seconds per decoded token by part (they sum to 1 / decode_tok_s).
  double decode_cpu_s = 0, decode_gpu_s = 0, decode_sync_s = 0;
};

struct Plan {
  std::string model;                // model name / file
  int64_t ctx_size = 0;
  int batch = 1;
  NumaMode numa_mode = NumaMode::kSingle;
  std::vector<NodePlan> nodes;      // nodes used, ascending id
  std::vector<TensorPlacement> tensors;
  uint64_t gpu_bytes = 0;           // VRAM needed (weights on the GPU + KV there + scratch)
  uint64_t cpu_bytes = 0;           // RAM needed over all nodes
  uint64_t kv_bytes = 0;
  std::string kv_device;            // "gpu" or "cpu"
  // MoE layers whose routed experts sit in VRAM: always the last ones (blocks counted from the
  // end), so that --n-cpu-moe N means "the first N MoE layers' experts on the CPU".
  int64_t gpu_moe_layers = 0;
  // Prompt batches of at least this many tokens stream the CPU-side experts to the GPU layer by
  // layer (numa/cost_model.h PredictStreaming); 0 = never (no GPU, no room, or never faster).
  int64_t prefill_stream_min_batch = 0;
  Prediction predicted;
  std::vector<std::string> reasons; // why: one line per decision, for the text form

  int TotalThreads() const;
};

std::string PlanToText(const Plan& plan);
std::string PlanToJson(const Plan& plan);  // keys as the issue lists them (numa_mode, nodes...)
std::string PlanToYaml(const Plan& plan);
StatusOr<Plan> PlanFromYaml(const std::string& text, const std::string& name);
StatusOr<Plan> LoadPlan(const std::string& path);

}  // namespace moesplit::numa
