// One routed-MoE layer for the bench programs (bench_moe_layer, bench_pool): the experts'
// stacked slabs quantized from random floats, built once per variant, and per-iteration routes.
//
// Memory: MOESPLIT_BENCH_EXPERTS=N caps the experts built (routing then spans N); without it all
// experts are built if MemAvailable leaves 2 GiB spare, else as many as fit (printed).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "bench/bench_common.h"
#include "core/base/dtype.h"
#include "cpu_kernels/gemv/gemv.h"
#include "moe/expert_engine.h"

namespace moesplit::bench {

struct Variant {
  const char* name;  // "v3/q4_K-q6_K"
  int64_t d;         // hidden size
  int64_t f;         // expert FFN width
  int64_t experts;   // routed experts of the model
  int k;             // experts per token
  GgmlType gate_up;  // file types
  GgmlType down;
  // Stored as the engine stores them by default: repacked at load where the kernels have a
  // layout for it (gemv::LoadLayout; the expert store's default), else the file layout.
  bool repack = false;
};

// Stacked expert slabs of one layer, llama.cpp layout: gate/up [D, F, E], down [F, D, E].
struct ExpertLayer {
  const Variant* variant = nullptr;
  int64_t experts = 0;       // E built (<= variant->experts)
  int64_t expert_bytes = 0;  // gate + up + down bytes of one expert, as stored
  GgmlType gate_up_type = GgmlType::kF32, down_type = GgmlType::kF32;  // as stored
  LargeBuffer gate, up, down;
  moe::ExpertEngine::Layer views;
};

// One layer at a time: Google Benchmark calls a benchmark function several times, and the
// benchmarks of one variant are registered together, so each variant is built once per run
// (and the previous one freed first).
class LayerCache {
 public:
  // kernels: the tier the layer is repacked for (Variant::repack).
  const ExpertLayer& Get(const Variant& v, const gemv::GemvKernels& kernels);

 private:
  std::unique_ptr<ExpertLayer> layer_;
};

// One iteration's routing: ids/weights [n_tok x k]; distinct = experts with >= 1 token.
struct RouteSet {
  std::vector<int32_t> ids;    // [n_tok x k]
  std::vector<float> weights;  // [n_tok x k], each row sums to 1
  int64_t distinct = 0;
};

// Decode (n_tok == 1): k distinct experts uniformly. Prefill: per token k distinct experts from
// P(rank r) ~ 1 / (r + 1) over a random ranking of the E experts (rejection of repeats).
RouteSet MakeRoutes(int64_t experts, int k, int64_t n_tok, uint32_t seed);

}  // namespace moesplit::bench
