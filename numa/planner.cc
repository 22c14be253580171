#include "numa/planner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <optional>
#include <string>

#include "numa/cost_model.h"

namespace moesplit::numa {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// VRAM kept free of weights: the CUDA context + cuBLAS workspace (~512 MiB) and one batch of
// activations — batch x kGpuActivationWidths hidden-size f32 rows (residual, norms, q/kv
// projections, the dense FFN's gate+up at ~2.5 D each) + the logits row.
constexpr uint64_t kGpuContextBytes = uint64_t{512} << 20;
constexpr int64_t kGpuActivationWidths = 10;

// AssumedProfile's figures (used only without --profile; the plan says they are assumed):
// one core streams ~20 GB/s alone (DDR4/DDR5 servers measure 15-35 GB/s single-thread) and a
// node's channels saturate at ~5 GB/s per core (EPYC 9554: ~370 GB/s sustained / 64 cores =
// 5.8; Xeon 8480+: ~250 GB/s / 56 = 4.5). moesplit's Q4_K GEMV streams at 80-91% of the probe
// (docs/PERFORMANCE.md); AVX-512 VNNI Q4_K x Q8_K GEMM reaches ~200 GMAC/s per Zen 5 core in
// cache, half of that is assumed for an unknown x86 server; an empty parallel-for over a
// node's workers costs a few microseconds.
constexpr double kAssumedThreadGbps = 20;
constexpr double kAssumedCoreGbps = 5;
constexpr double kAssumedDecodeFraction = 0.8;
constexpr double kAssumedGemmGmacsPerCore = 100;
constexpr double kAssumedBarrierUs = 5;

std::string GiB(uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.1f GiB", bytes / kGiB);
  return b;
}

std::string Num(double v, const char* format = "%.1f") {
  char b[32];
  std::snprintf(b, sizeof(b), format, v);
  return b;
}

std::vector<const Core*> CoresOf(const NumaNode& node) {
  std::vector<const Core*> cores;
  for (const L3Group& g : node.l3_groups) {
    for (const Core& c : g.cores) cores.push_back(&c);
  }
  return cores;
}

// The first `n` CPUs of a node for workers: pus[0] of every core first (one worker per physical
// core), then the SMT siblings. Empty when the node has fewer than n PUs.
std::vector<int> WorkerCpus(const NumaNode& node, int n) {
  std::vector<int> cpus;
  const std::vector<const Core*> cores = CoresOf(node);
  for (size_t level = 0; static_cast<int>(cpus.size()) < n; ++level) {
    bool any = false;
    for (const Core* c : cores) {
      if (level < c->pus.size() && static_cast<int>(cpus.size()) < n) {
        cpus.push_back(c->pus[level]);
        any = true;
      }
    }
    if (!any) return {};
  }
  return cpus;
}

std::string NodeList(const std::vector<NodeUse>& nodes) {
  std::string s;
  for (const NodeUse& u : nodes) {
    if (!s.empty()) s += ',';
    s += std::to_string(u.id);
  }
  return s;
}

Status CheckRequest(const Topology& topo, const MachineProfile& profile, const PlanRequest& rq) {
  const ModelShape& m = rq.model;
  if (m.n_layers <= 0 || m.bytes.Total() == 0) {
    return InvalidArgumentError("model '", m.name, "' has no layers or no tensor bytes");
  }
  if (m.n_expert_used > m.n_expert) {
    return InvalidArgumentError("model '", m.name, "': top-", m.n_expert_used, " of ",
                                m.n_expert, " experts");
  }
  if (rq.ctx_size < 1) return InvalidArgumentError("ctx size ", rq.ctx_size, " must be >= 1");
  if (rq.batch < 1) return InvalidArgumentError("batch ", rq.batch, " must be >= 1");
  if (rq.decode_depth < 0 || rq.decode_depth > rq.ctx_size) {
    return InvalidArgumentError("decode depth ", rq.decode_depth, " must be in [0, ctx size ",
                                rq.ctx_size, "]");
  }
  if (rq.threads < 0) return InvalidArgumentError("threads ", rq.threads, " must be >= 0");
  if (topo.nodes.empty()) return InvalidArgumentError("topology '", topo.source, "' has no nodes");
  const KernelProfile& k = profile.kernels;
  if (k.decode_fraction <= 0 || k.gemm_gmacs_per_core <= 0) {
    return InvalidArgumentError("machine profile ", profile.source,
                                ": kernels.decode_fraction and kernels.gemm_gmacs_per_core must "
                                "be > 0 (re-measure with `moesplit topo --measure --save FILE`)");
  }
  return Status::Ok();
}


// The tensor classes in the order the GPU takes them after attention + norms + router + other
// (which must fit with the KV cache): shared experts, dense FFN, output, embeddings.
struct ClassRef {
  const char* name;  // TensorPlacement::tensor_class
  uint64_t TensorClassSizes::*field;
};
constexpr ClassRef kRequiredOnGpu[] = {{"attention", &TensorClassSizes::attention},
                                       {"norms", &TensorClassSizes::norms},
                                       {"router", &TensorClassSizes::router},
                                       {"other", &TensorClassSizes::other}};
constexpr ClassRef kOptionalOnGpu[] = {{"shared_experts", &TensorClassSizes::shared_experts},
                                       {"dense_ffn", &TensorClassSizes::dense_ffn},
                                       {"output", &TensorClassSizes::output},
                                       {"embeddings", &TensorClassSizes::embeddings}};

// What goes where between the GPU and the CPU side (the layout's nodes come later).
struct Placement {
  Layout layout;         // gpu_* / cpu_* / kv_on_gpu filled
  uint64_t kv_bytes = 0;
  uint64_t gpu_total = 0;  // weights + KV + scratch on the GPU
  std::vector<TensorPlacement> tensors;
  std::vector<std::string> reasons;
};

void MoveToGpu(const ModelShape& m, const ClassRef& c, Placement* p) {
  p->layout.gpu_bytes.*c.field = m.bytes.*c.field;
  p->layout.gpu_params.*c.field = m.params.*c.field;
  p->layout.cpu_bytes.*c.field = 0;
  p->layout.cpu_params.*c.field = 0;
  p->gpu_total += m.bytes.*c.field;
}

// Whole MoE layers' routed experts into the VRAM left (the last layers first), or as many as
// --n-cpu-moe asks. One V3 Q4_K_M MoE layer's experts: 256 x 3 x 7168 x 2048 x ~4.6 bits =
// ~6.2 GiB, so a 48 GB card holds a few after the ~13 GiB of non-expert weights.
Status PlaceExpertLayers(const PlanRequest& rq, Placement* p) {
  const ModelShape& m = rq.model;
  const int64_t n_moe = m.n_moe_layers;
  // Bytes of MoE layer i (block order): measured per layer when the shape has them.
  auto layer_bytes = [&](int64_t i) {
    return static_cast<int64_t>(m.routed_bytes_by_moe_layer.size()) == n_moe
               ? m.routed_bytes_by_moe_layer[static_cast<size_t>(i)]
               : m.bytes.routed_experts / static_cast<uint64_t>(n_moe);
  };
  const uint64_t left = rq.gpu.memory_bytes - p->gpu_total;
  // The last g layers, as many as fit in `left` when g is not given.
  int64_t fit = 0;
  uint64_t fit_bytes = 0;
  while (fit < n_moe && fit_bytes + layer_bytes(n_moe - 1 - fit) <= left) {
    fit_bytes += layer_bytes(n_moe - 1 - fit);
    ++fit;
  }
  int64_t g = fit;
  if (rq.n_cpu_moe.has_value()) {
    // llama.cpp counts blocks: --n-cpu-moe N keeps blocks 0..N-1 on the CPU, the leading dense
    // blocks (DeepSeek-V3: 3) included.
    g = n_moe - std::clamp<int64_t>(*rq.n_cpu_moe - m.n_dense_layers, 0, n_moe);
    if (g > fit) {
      uint64_t want = 0;
      for (int64_t i = n_moe - g; i < n_moe; ++i) want += layer_bytes(i);
      return FailedPreconditionError(
          "--n-cpu-moe ", *rq.n_cpu_moe, " puts the experts of ", g, " MoE layers (",
          GiB(want), ") on the GPU, but only ", GiB(left), " of VRAM is left: use --n-cpu-moe ",
          m.n_dense_layers + n_moe - fit, " or more (or --cpu-moe)");
    }
  }
  if (g > 0) {
    uint64_t b = 0;
    for (int64_t i = n_moe - g; i < n_moe; ++i) b += layer_bytes(i);
    const uint64_t params = m.params.routed_experts / static_cast<uint64_t>(n_moe) * g;
    p->layout.gpu_bytes.routed_experts = b;
    p->layout.gpu_params.routed_experts = params;
    p->layout.cpu_bytes.routed_experts -= b;
    p->layout.cpu_params.routed_experts -= params;
    p->layout.gpu_moe_layers = g;
    p->gpu_total += b;
    p->reasons.push_back(
        "routed experts of the last " + std::to_string(g) + " of " + std::to_string(n_moe) +
        " MoE layers -> GPU (" + GiB(b) + ", " +
        (rq.n_cpu_moe ? "--n-cpu-moe " + std::to_string(*rq.n_cpu_moe) : "spare VRAM") + ")");
  }
  p->reasons.push_back("routed experts " + GiB(p->layout.cpu_bytes.routed_experts) +
                       " on the CPU (decode reads " + std::to_string(m.n_expert_used) + " of " +
                       std::to_string(m.n_expert) + " per layer from DRAM)");
  return Status::Ok();
}

// GPU first (when there is one): KV + attention + norms + router must fit, then shared experts,
// dense FFN, output and embeddings each if what is left holds them; routed experts stay on CPU.
StatusOr<Placement> PlaceTensors(const PlanRequest& rq) {
  const ModelShape& m = rq.model;
  Placement p;
  const bool gpu = rq.gpu.memory_bytes > 0;
  p.kv_bytes = KvCacheBytes(rq, gpu);
  p.layout.cpu_bytes = m.bytes;
  p.layout.cpu_params = m.params;
  const std::string kv_text = GiB(p.kv_bytes) + " (" + std::to_string(rq.ctx_size) +
                              " tokens x " + (gpu ? "f16 latent rows" : KvTypeName(rq.kv_type)) +
                              ")";
  if (!gpu) {
    p.reasons.push_back("no GPU (--gpu-mem 0): every tensor and the KV cache " + kv_text +
                        " on the CPU");
    return p;
  }
  const uint64_t scratch =
      kGpuContextBytes + static_cast<uint64_t>(rq.batch) *
                             static_cast<uint64_t>(kGpuActivationWidths * m.n_embd + m.n_vocab) * 4;
  uint64_t required = p.kv_bytes + scratch;
  for (const ClassRef& c : kRequiredOnGpu) required += m.bytes.*c.field;
  if (required > rq.gpu.memory_bytes) {
    return FailedPreconditionError(
        "the GPU's ", GiB(rq.gpu.memory_bytes), " cannot hold attention + norms + router (",
        GiB(required - p.kv_bytes - scratch), ") + KV cache ", kv_text, " + scratch ",
        GiB(scratch), " = ", GiB(required), ": lower --ctx-size or add --gpu-mem 0 (CPU only)");
  }
  for (const ClassRef& c : kRequiredOnGpu) MoveToGpu(m, c, &p);
  p.gpu_total += p.kv_bytes + scratch;
  p.layout.kv_on_gpu = true;
  p.reasons.push_back("GPU " + GiB(rq.gpu.memory_bytes) + ": attention + norms + router " +
                      GiB(p.gpu_total - p.kv_bytes - scratch) + ", KV cache " + kv_text +
                      ", scratch " + GiB(scratch));
  for (const ClassRef& c : kOptionalOnGpu) {
    const uint64_t b = m.bytes.*c.field;
    if (b == 0) continue;
    const uint64_t left = rq.gpu.memory_bytes - p.gpu_total;
    if (b <= left) {
      MoveToGpu(m, c, &p);
      p.reasons.push_back(std::string(c.name) + " " + GiB(b) + " -> GPU (" +
                          GiB(rq.gpu.memory_bytes - p.gpu_total) + " left)");
    } else {
      p.reasons.push_back(std::string(c.name) + " " + GiB(b) + " does not fit in the " +
                          GiB(left) + " left -> CPU");
    }
  }
  MOESPLIT_RETURN_IF_ERROR(PlaceExpertLayers(rq, &p));
  p.layout.gpu_free_bytes = rq.gpu.memory_bytes - p.gpu_total;
  return p;
}

// Streaming the CPU-side experts to the GPU for long prompts: the batch from which it wins and,
// when the request's batch is past it, the prefill prediction with it.
void AddStreaming(const Topology& topo, const MachineProfile& profile, const PlanRequest& rq,
                  const Layout& layout, Plan* plan) {
  if (rq.gpu.memory_bytes == 0) return;
  const StreamCost s = PredictStreaming(topo, profile, rq, layout);
  if (!s.feasible) {
    plan->reasons.push_back("prefill: no expert streaming (needs 2 x " +
                            GiB(kStreamChunkBytes) + " of free VRAM and MoE layers on the CPU)");
    return;
  }
  plan->prefill_stream_min_batch = s.min_batch;
  if (s.min_batch == 0) {
    plan->reasons.push_back("prefill: streaming experts over PCIe never beats the CPU here");
    return;
  }
  char b[256];
  std::snprintf(b, sizeof(b),
                "prefill: streaming each CPU-side MoE layer's experts to the GPU (double-buffered "
                "%s chunks) beats the CPU from %lld-token batches; at %d tokens a layer takes "
                "%.1f ms streamed vs %.1f ms on the CPU",
                GiB(kStreamChunkBytes).c_str(), static_cast<long long>(s.min_batch), rq.batch,
                s.stream_layer_s * 1e3, s.cpu_layer_s * 1e3);
  plan->reasons.push_back(b);
  if (rq.batch < s.min_batch || plan->predicted.prefill_tok_s <= 0) return;
  const double layers = static_cast<double>(rq.model.n_moe_layers - layout.gpu_moe_layers);
  const double t = rq.batch / plan->predicted.prefill_tok_s -
                   layers * (s.cpu_layer_s - s.stream_layer_s);
  if (t > 0) {
    plan->predicted.prefill_tok_s = rq.batch / t;
    plan->predicted.prefill_bottleneck = "pcie";
  }
}

std::vector<TensorPlacement> TensorList(const Placement& p) {
  std::vector<TensorPlacement> out;
  auto add = [&](const char* name, uint64_t TensorClassSizes::*f) {
    const uint64_t g = p.layout.gpu_bytes.*f, c = p.layout.cpu_bytes.*f;
    if (g > 0) out.push_back({name, "gpu", g});
    if (c > 0) out.push_back({name, "cpu", c});
  };
  add("routed_experts", &TensorClassSizes::routed_experts);
  for (const ClassRef& c : kOptionalOnGpu) add(c.name, c.field);
  for (const ClassRef& c : kRequiredOnGpu) add(c.name, c.field);
  if (p.kv_bytes > 0) out.push_back({"kv_cache", p.layout.kv_on_gpu ? "gpu" : "cpu", p.kv_bytes});
  return out;
}

// Workers per node (indices into topo.nodes): every physical core, or `threads` split evenly
// (the first nodes take the remainder; beyond a node's cores its SMT siblings are used).
StatusOr<std::vector<NodeUse>> UseNodes(const Topology& topo, const std::vector<int>& indices,
                                        int threads) {
  std::vector<NodeUse> out;
  const int n = static_cast<int>(indices.size());
  if (threads > 0 && threads < n) {
    return InvalidArgumentError("--threads ", threads, " is fewer than the ", n, " nodes used");
  }
  for (int i = 0; i < n; ++i) {
    const NumaNode& node = topo.nodes[indices[i]];
    NodeUse u{node.id, indices[i], node.package, node.NumCores()};
    if (threads > 0) u.threads = threads / n + (i < threads % n ? 1 : 0);
    if (WorkerCpus(node, u.threads).empty()) {
      return InvalidArgumentError("--threads ", threads, ": node ", node.id, " would need ",
                                  u.threads, " workers but has fewer CPUs");
    }
    out.push_back(u);
  }
  return out;
}

struct NodeRam {
  uint64_t experts = 0;  // routed-expert bytes on the node
  uint64_t total = 0;    // + non-expert CPU tensors + KV when it is on the CPU
};

// single over one node: everything there; spread (interleave, single over a package's nodes):
// pages round-robin, 1/n each; replicate: a full expert copy per node; shard: experts split by
// threads; in the fan-out modes the non-expert tensors and the KV live on the first node.
std::vector<NodeRam> RamPerNode(const Layout& l, const Placement& p) {
  const uint64_t routed = l.cpu_bytes.routed_experts;
  const uint64_t other =
      l.cpu_bytes.Total() - routed + (l.kv_on_gpu ? 0 : p.kv_bytes);
  const uint64_t n = l.nodes.size();
  int total_threads = 0;
  for (const NodeUse& u : l.nodes) total_threads += u.threads;
  std::vector<NodeRam> ram(n);
  const bool spread = l.mode == NumaMode::kSingle || l.mode == NumaMode::kInterleave;
  for (size_t i = 0; i < n; ++i) {
    if (spread) {
      ram[i].experts = routed / n + (i < routed % n ? 1 : 0);
      ram[i].total = ram[i].experts + other / n + (i < other % n ? 1 : 0);
      continue;
    }
    ram[i].experts = l.mode == NumaMode::kReplicate
                         ? routed
                         : static_cast<uint64_t>(static_cast<double>(routed) *
                                                 l.nodes[i].threads / total_threads);
    ram[i].total = ram[i].experts + (i == 0 ? other : 0);
  }
  if (l.mode == NumaMode::kShard) {  // rounding remainder to the first node
    uint64_t sum = 0;
    for (const NodeRam& r : ram) sum += r.experts;
    ram[0].experts += routed - sum, ram[0].total += routed - sum;
  }
  return ram;
}

// A costed candidate layout.
struct Candidate {
  Layout layout;
  std::vector<NodeRam> ram;
  CostResult cost;
};

// Builds and costs `mode` over `indices`; FailedPrecondition (with the numbers) when a node
// cannot hold its share (nodes of unknown memory size are not checked).
StatusOr<Candidate> Evaluate(const Topology& topo, const MachineProfile& profile,
                             const PlanRequest& rq, const Placement& p, NumaMode mode,
                             const std::vector<int>& indices) {
  Candidate c;
  c.layout = p.layout;
  c.layout.mode = mode;
  MOESPLIT_ASSIGN_OR_RETURN(c.layout.nodes, UseNodes(topo, indices, rq.threads));
  for (const NodeUse& u : c.layout.nodes) {
    if (profile.FindNode(u.id) == nullptr) {
      return InvalidArgumentError("machine profile ", profile.source, " has no figures for node ",
                                  u.id, " (measure this machine with `moesplit topo --measure "
                                  "--save FILE`, or leave --profile out for assumed figures)");
    }
  }
  c.ram = RamPerNode(c.layout, p);
  for (size_t i = 0; i < c.ram.size(); ++i) {
    const uint64_t have = topo.nodes[c.layout.nodes[i].index].memory_bytes;
    if (have > 0 && c.ram[i].total > have) {
      return FailedPreconditionError(
          NumaModeName(mode), " over nodes ", NodeList(c.layout.nodes), ": node ",
          c.layout.nodes[i].id, " would hold ", GiB(c.ram[i].total), " (routed experts ",
          GiB(c.ram[i].experts), ") but has ", GiB(have));
    }
  }
  c.cost = PredictCost(topo, profile, rq, c.layout);
  return c;
}

std::vector<int> NodesWithCores(const Topology& topo) {
  std::vector<int> out;
  for (size_t i = 0; i < topo.nodes.size(); ++i) {
    if (topo.nodes[i].NumCores() > 0) out.push_back(static_cast<int>(i));
  }
  return out;
}

// Node sets `single` may use: each node, and each package of several nodes.
std::vector<std::vector<int>> SingleCandidates(const Topology& topo) {
  std::vector<std::vector<int>> sets;
  const std::vector<int> usable = NodesWithCores(topo);
  for (int i : usable) sets.push_back({i});
  for (size_t pk = 0; pk < topo.packages.size(); ++pk) {
    std::vector<int> set;
    for (int i : usable) {
      if (topo.nodes[i].package == static_cast<int>(pk)) set.push_back(i);
    }
    if (set.size() > 1) sets.push_back(set);
  }
  return sets;
}

// The fastest feasible `single` candidate, or the last refusal.
StatusOr<Candidate> BestSingle(const Topology& topo, const MachineProfile& profile,
                               const PlanRequest& rq, const Placement& p) {
  Status refusal = FailedPreconditionError("no node has cores");
  std::optional<Candidate> best;
  for (const std::vector<int>& set : SingleCandidates(topo)) {
    StatusOr<Candidate> c = Evaluate(topo, profile, rq, p, NumaMode::kSingle, set);
    if (!c.ok()) {
      if (c.status().code() != StatusCode::kFailedPrecondition) return c.status();
      refusal = c.status();
      continue;
    }
    if (!best || c->cost.predicted.decode_tok_s > best->cost.predicted.decode_tok_s) {
      best = std::move(*c);
    }
  }
  if (!best) return refusal;
  return std::move(*best);
}

// `shard` over the fewest packages (in order) whose nodes hold the CPU side.
StatusOr<Candidate> ShardOverNeeded(const Topology& topo, const MachineProfile& profile,
                                    const PlanRequest& rq, const Placement& p) {
  const std::vector<int> usable = NodesWithCores(topo);
  Status last = FailedPreconditionError("no node has cores");
  for (size_t n_pk = 1; n_pk <= std::max<size_t>(topo.packages.size(), 1); ++n_pk) {
    std::vector<int> set;
    for (int i : usable) {
      if (topo.packages.empty() || topo.nodes[i].package < static_cast<int>(n_pk)) set.push_back(i);
    }
    if (set.empty()) continue;
    StatusOr<Candidate> c = Evaluate(topo, profile, rq, p, NumaMode::kShard, set);
    if (c.ok() || c.status().code() != StatusCode::kFailedPrecondition) return c;
    last = c.status();
  }
  return last;
}

// OS node ids -> indices into topo.nodes; errors name the id and the topology's nodes.
StatusOr<std::vector<int>> NodeIndices(const Topology& topo, const std::vector<int>& ids) {
  std::vector<int> out;
  std::string known;
  for (const NumaNode& n : topo.nodes) {
    if (!known.empty()) known += ',';
    known += std::to_string(n.id);
  }
  for (int id : ids) {
    const int i = topo.NodeIndex(id);
    if (i < 0) {
      return InvalidArgumentError("--nodes: node ", id, " is not in topology ", topo.source,
                                  " (nodes: ", known, ")");
    }
    if (topo.nodes[i].NumCores() == 0) {
      return InvalidArgumentError("--nodes: node ", id, " has no CPUs (memory only)");
    }
    if (std::find(out.begin(), out.end(), i) != out.end()) {
      return InvalidArgumentError("--nodes: node ", id, " listed twice");
    }
    out.push_back(i);
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool OnePackage(const Topology& topo, const std::vector<int>& indices) {
  for (int i : indices) {
    if (topo.nodes[i].package != topo.nodes[indices.front()].package) return false;
  }
  return true;
}

// Refuses when all nodes together (memory known) cannot hold the CPU side.
Status CheckTotalRam(const Topology& topo, const Placement& p) {
  uint64_t have = 0;
  for (const NumaNode& n : topo.nodes) {
    if (n.memory_bytes == 0) return Status::Ok();  // unknown: checked per node later
    have += n.memory_bytes;
  }
  const TensorClassSizes& c = p.layout.cpu_bytes;
  const uint64_t kv = p.layout.kv_on_gpu ? 0 : p.kv_bytes;
  const uint64_t need = c.Total() + kv;
  if (need <= have) return Status::Ok();
  // A GPU takes the non-expert tensors and the KV cache, never the routed experts.
  const bool gpu_would_fit = c.routed_experts <= have && !p.layout.kv_on_gpu;
  return FailedPreconditionError(
      "the CPU side needs ", GiB(need), " of RAM (routed experts ", GiB(c.routed_experts),
      " + other tensors ", GiB(c.Total() - c.routed_experts), " + KV cache ", GiB(kv),
      ") but the machine has ", GiB(have), " over ", topo.nodes.size(),
      " node(s): use a smaller quant or a machine with more RAM",
      gpu_would_fit ? ", or move the non-expert tensors and the KV cache to a GPU (--gpu-mem)"
                    : "");
}

uint64_t TotalRam(const Candidate& c) {
  uint64_t total = 0;
  for (const NodeRam& r : c.ram) total += r.total;
  return total;
}

// Predictions this close are a tie: the cost model is not precise to 1%, and the tie-break
// (less RAM) is worth more than the difference -- replicate holds a second copy of every expert.
constexpr double kTieFraction = 0.01;

// The default when no mode or nodes are given: the fastest predicted decode among the modes that
// fit -- `single` on its best node set, `shard` over the packages needed and over every node,
// `replicate` over every node -- ties going to the one that needs less RAM. The planner's
// default must be its own best answer: a two-socket box whose plan predicts shard well ahead of
// one socket should get shard from a plain `moesplit run`. Interleave stays opt-in (--numa): its
// cost rests on interconnect figures an assumed profile does not have, and one pool spread over
// sockets is the classic NUMA failure.
StatusOr<Candidate> FastestThatFits(const Topology& topo, const MachineProfile& profile,
                                    const PlanRequest& rq, const Placement& p,
                                    std::vector<std::string>* why) {
  std::vector<StatusOr<Candidate>> options;
  options.push_back(BestSingle(topo, profile, rq, p));
  // Shard over the fewest packages that hold the CPU side: its refusal is the one to show when
  // nothing fits.
  StatusOr<Candidate> shard_needed = ShardOverNeeded(topo, profile, rq, p);
  const Status refusal = shard_needed.ok() ? options[0].status() : shard_needed.status();
  const std::vector<int> all = NodesWithCores(topo);
  if (all.size() > 1) {
    options.push_back(std::move(shard_needed));
    options.push_back(Evaluate(topo, profile, rq, p, NumaMode::kShard, all));
    options.push_back(Evaluate(topo, profile, rq, p, NumaMode::kReplicate, all));
  }
  double fastest = 0;
  for (StatusOr<Candidate>& c : options) {
    if (!c.ok()) {
      // Anything but "does not fit" is the request's error (e.g. a profile without a node).
      if (c.status().code() != StatusCode::kFailedPrecondition) return c.status();
      continue;
    }
    // A fan-out mode over one node is `single` with extra steps: not an option.
    if (c->layout.mode != NumaMode::kSingle && c->layout.nodes.size() < 2) {
      c = FailedPreconditionError("one node");
      continue;
    }
    fastest = std::max(fastest, c->cost.predicted.decode_tok_s);
  }
  auto near_fastest = [&](const StatusOr<Candidate>& c) {
    return c.ok() && c->cost.predicted.decode_tok_s >= fastest * (1 - kTieFraction);
  };
  int best_i = -1;
  for (size_t i = 0; i < options.size(); ++i) {
    if (!near_fastest(options[i])) continue;
    const Candidate& c = *options[i];
    if (best_i < 0 || TotalRam(c) < TotalRam(*options[best_i]) ||
        (TotalRam(c) == TotalRam(*options[best_i]) &&
         c.cost.predicted.decode_tok_s > options[best_i]->cost.predicted.decode_tok_s)) {
      best_i = static_cast<int>(i);
    }
  }
  if (best_i < 0) return refusal;  // single fits whenever it is ok: refusal is an error here
  const Candidate* best = &*options[best_i];
  std::string line = std::string(NumaModeName(best->layout.mode)) + " over node(s) " +
                     NodeList(best->layout.nodes) + ": the fastest predicted decode (" +
                     Num(best->cost.predicted.decode_tok_s) + " tok/s) of the modes that fit";
  if (!options[0].ok()) {
    line += "; no node or package holds the CPU side alone (" + options[0].status().message() + ")";
  }
  // Say which near-equal mode lost the tie, and why.
  for (const StatusOr<Candidate>& c : options) {
    if (!near_fastest(c) || c->layout.mode == best->layout.mode) continue;
    line += "; " + std::string(NumaModeName(c->layout.mode)) + " predicts " +
            Num(c->cost.predicted.decode_tok_s) + " tok/s (within " +
            Num(kTieFraction * 100, "%.0f") + "%) but needs " + GiB(TotalRam(*c)) +
            " of RAM, not " + GiB(TotalRam(*best));
    break;
  }
  why->push_back(line);
  return std::move(*options[best_i]);
}

// The mode and nodes: overrides first, else the fastest predicted mode that fits
// (FastestThatFits).
StatusOr<Candidate> ChooseLayout(const Topology& topo, const MachineProfile& profile,
                                 const PlanRequest& rq, const Placement& p,
                                 std::vector<std::string>* why) {
  MOESPLIT_RETURN_IF_ERROR(CheckTotalRam(topo, p));
  if (!rq.nodes.empty()) {
    MOESPLIT_ASSIGN_OR_RETURN(std::vector<int> indices, NodeIndices(topo, rq.nodes));
    const NumaMode mode = rq.numa_mode.value_or(OnePackage(topo, indices) ? NumaMode::kSingle
                                                                           : NumaMode::kShard);
    why->push_back(std::string("nodes given (--nodes): ") + NumaModeName(mode) +
                   (rq.numa_mode ? " (--numa)" : " (one package: single, else shard)"));
    return Evaluate(topo, profile, rq, p, mode, indices);
  }
  if (rq.numa_mode && *rq.numa_mode != NumaMode::kSingle) {
    why->push_back(std::string("--numa ") + NumaModeName(*rq.numa_mode) + " over every node");
    return Evaluate(topo, profile, rq, p, *rq.numa_mode, NodesWithCores(topo));
  }
  if (!rq.numa_mode) return FastestThatFits(topo, profile, rq, p, why);
  StatusOr<Candidate> single = BestSingle(topo, profile, rq, p);
  if (single.ok()) {
    why->push_back("single (--numa): node(s) " + NodeList(single->layout.nodes) +
                   ", the fastest node set that holds the CPU side (" +
                   GiB(single->ram.front().total * single->ram.size()) + ")");
  }
  return single;
}

// One line comparing the other modes over all nodes (what --numa would give).
std::string Alternatives(const Topology& topo, const MachineProfile& profile,
                         const PlanRequest& rq, const Placement& p, const Candidate& chosen) {
  const std::vector<int> all = NodesWithCores(topo);
  if (all.size() < 2) return "";
  std::vector<std::string> items;
  auto add = [&](NumaMode mode, const StatusOr<Candidate>& c) {
    if (c.ok() && c->layout.mode == chosen.layout.mode &&
        NodeList(c->layout.nodes) == NodeList(chosen.layout.nodes)) {
      return;
    }
    std::string item = NumaModeName(mode);
    if (!c.ok()) {
      item += c.status().code() == StatusCode::kFailedPrecondition ? " (does not fit)" : " (n/a)";
    } else {
      item += " nodes " + NodeList(c->layout.nodes) + " " +
              Num(c->cost.predicted.decode_tok_s) + " tok/s";
    }
    items.push_back(item);
  };
  add(NumaMode::kSingle, BestSingle(topo, profile, rq, p));
  for (NumaMode m : {NumaMode::kInterleave, NumaMode::kShard, NumaMode::kReplicate}) {
    add(m, Evaluate(topo, profile, rq, p, m, all));
  }
  std::string line = "other modes (--numa), predicted decode:";
  for (size_t i = 0; i < items.size(); ++i) line += (i == 0 ? " " : "; ") + items[i];
  return line;
}

}  // namespace

const char* KvTypeName(KvType type) { return type == KvType::kF16 ? "f16" : "f32"; }

uint64_t KvBytesPerPosition(const PlanRequest& rq, bool on_gpu) {
  if (on_gpu) return rq.model.kv_gpu_bytes_per_token;
  return rq.kv_type == KvType::kF16 ? rq.model.kv_bytes_per_token_f16
                                    : rq.model.kv_bytes_per_token_f32;
}

uint64_t KvCacheBytes(const PlanRequest& rq, bool on_gpu) {
  const int64_t blocks = (std::max<int64_t>(rq.ctx_size, 1) + kKvBlockPositions - 1) /
                         kKvBlockPositions;
  return KvBytesPerPosition(rq, on_gpu) * static_cast<uint64_t>(blocks * kKvBlockPositions);
}

MachineProfile AssumedProfile(const Topology& topo) {
  MachineProfile p;
  p.source = "assumed: " + Num(kAssumedThreadGbps, "%.0f") + " GB/s per thread up to " +
             Num(kAssumedCoreGbps, "%.0f") + " GB/s per core per node";
  p.measured = false;
  p.cpu_model = topo.cpu_model;
  p.topology = topo.source;
  for (const NumaNode& n : topo.nodes) {
    const int cores = n.NumCores();
    if (cores == 0) continue;
    // Linear at kAssumedThreadGbps per thread until the channels saturate, flat after.
    const double sat = std::max(kAssumedThreadGbps, kAssumedCoreGbps * cores);
    const int sat_threads =
        std::clamp(static_cast<int>(std::ceil(sat / kAssumedThreadGbps)), 1, cores);
    NodeProfile np;
    np.node = n.id;
    np.read.push_back({1, kAssumedThreadGbps});
    if (sat_threads > 1) np.read.push_back({sat_threads, sat});
    np.stream_gbps = sat;
    p.nodes.push_back(np);
  }
  p.kernels = {.isa = "assumed",
               .decode_fraction = kAssumedDecodeFraction,
               .gemm_gmacs_per_core = kAssumedGemmGmacsPerCore,
               .barrier_us = kAssumedBarrierUs};
  return p;
}

StatusOr<Plan> MakePlan(const Topology& topo, const MachineProfile& profile,
                        const PlanRequest& rq) {
  MOESPLIT_RETURN_IF_ERROR(CheckRequest(topo, profile, rq));
  MOESPLIT_ASSIGN_OR_RETURN(Placement placement, PlaceTensors(rq));
  std::vector<std::string> why;
  MOESPLIT_ASSIGN_OR_RETURN(Candidate c, ChooseLayout(topo, profile, rq, placement, &why));
  Plan plan;
  const ModelShape& m = rq.model;
  plan.model = m.name + (m.quant.empty() ? "" : " " + m.quant);
  plan.ctx_size = rq.ctx_size;
  plan.batch = rq.batch;
  plan.numa_mode = c.layout.mode;
  for (size_t i = 0; i < c.layout.nodes.size(); ++i) {
    const NodeUse& u = c.layout.nodes[i];
    NodePlan n;
    n.id = u.id;
    n.threads = u.threads;
    n.cpus = WorkerCpus(topo.nodes[u.index], u.threads);
    n.expert_bytes = c.ram[i].experts;
    n.ram_bytes = c.ram[i].total;
    plan.cpu_bytes += n.ram_bytes;
    plan.nodes.push_back(std::move(n));
  }
  plan.tensors = TensorList(placement);
  plan.gpu_bytes = rq.gpu.memory_bytes > 0 ? placement.gpu_total : 0;
  plan.kv_bytes = placement.kv_bytes;
  plan.kv_device = placement.layout.kv_on_gpu ? "gpu" : "cpu";
  plan.gpu_moe_layers = placement.layout.gpu_moe_layers;
  plan.predicted = c.cost.predicted;
  plan.gpu_moe_layers = placement.layout.gpu_moe_layers;

  std::vector<std::string>& r = plan.reasons;
  r.push_back(profile.measured
                  ? "machine profile " + profile.source + " (measured)"
                  : "machine profile " + profile.source +
                        ": figures assumed or from published specs, not measured here; measure "
                        "this machine with `moesplit topo --measure --save FILE` and pass "
                        "--profile FILE");
  r.insert(r.end(), placement.reasons.begin(), placement.reasons.end());
  r.insert(r.end(), why.begin(), why.end());
  r.push_back(std::to_string(plan.TotalThreads()) + " threads: " +
              (rq.threads > 0 ? "--threads split evenly over the nodes"
                              : "one per physical core of the nodes used (SMT siblings idle)"));
  r.insert(r.end(), c.cost.notes.begin(), c.cost.notes.end());
  if (rq.gpu.memory_bytes > 0 &&
      (rq.gpu.mem_gbps <= 0 || rq.gpu.pcie_gbps <= 0 || rq.gpu.gmacs <= 0)) {
    r.push_back("GPU figures assumed where not given: " + Num(kAssumedGpuMemGbps, "%.0f") +
                " GB/s memory, " + Num(kAssumedPcieGbps, "%.0f") + " GB/s PCIe, " +
                Num(kAssumedGpuGmacs, "%.0f") + " GMAC/s (--gpu-bw sets the memory figure)");
  }
  AddStreaming(topo, profile, rq, c.layout, &plan);
  const std::string alt = Alternatives(topo, profile, rq, placement, c);
  if (!alt.empty()) r.push_back(alt);
  return plan;
}

}  // namespace moesplit::numa
