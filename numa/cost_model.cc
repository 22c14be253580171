#include "numa/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace moesplit::numa {
namespace {

constexpr double kGB = 1e9;  // GB/s = 1e9 bytes/s

std::string Fmt(const char* format, double a, double b = 0, double c = 0, double d = 0) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), format, a, b, c, d);
  return buf;
}

// Bandwidths the model reads, decode-kernel GB/s (probe GB/s x decode_fraction).
struct Rates {
  const Topology& topo;
  const MachineProfile& profile;
  double fraction;  // kernels.decode_fraction

  // Node u's workers reading their own node's memory.
  double Local(const NodeUse& u) const { return profile.ReadGbps(u.id, u.threads) * fraction; }
  // What node u's memory controllers deliver at most (all its cores reading).
  double Peak(const NodeUse& u) const {
    const int cores = std::max(u.threads, topo.nodes[u.index].NumCores());
    return profile.ReadGbps(u.id, cores) * fraction;
  }
  // Node a's workers reading node b's memory: the measured pair (no faster than a's local
  // reads), else local x 10 / SLIT distance.
  double Cross(const NodeUse& a, const NodeUse& b) const {
    const double measured = profile.CrossGbps(a.id, b.id) * fraction;
    if (measured > 0) return std::min(measured, Local(a));
    return Local(a) * kSlitLocalDistance / topo.Distance(a.index, b.index);
  }
};

// Seconds for the critical node to read its bytes: the local part (DRAM) and the part that
// crosses the interconnect.
struct ReadTime {
  double dram_s = 0;
  double link_s = 0;
  double Total() const { return dram_s + link_s; }
};

int TotalThreads(const std::vector<NodeUse>& nodes) {
  int t = 0;
  for (const NodeUse& u : nodes) t += u.threads;
  return t;
}

// `bytes` spread page-round-robin over the n nodes, read by all workers (node i's share of
// the work t_i / T): node i reads (bytes t_i/T)/n from every node j, at Local from its own and
// Cross from the others; a node's memory serves bytes/n in all, no faster than its Peak.
ReadTime ReadSpread(const Rates& r, const std::vector<NodeUse>& nodes, double bytes) {
  const double n = static_cast<double>(nodes.size());
  const double total_threads = TotalThreads(nodes);
  ReadTime worst;
  for (const NodeUse& a : nodes) {
    const double slice = bytes * a.threads / total_threads / n;  // from each node
    ReadTime t;
    for (const NodeUse& b : nodes) {
      if (a.id == b.id) {
        t.dram_s += slice / (r.Local(a) * kGB);
      } else {
        t.link_s += slice / (r.Cross(a, b) * kGB);
      }
    }
    if (t.Total() > worst.Total()) worst = t;
  }
  for (const NodeUse& b : nodes) {
    const double mc_s = bytes / n / (r.Peak(b) * kGB);
    if (mc_s > worst.Total()) worst = {mc_s, 0};
  }
  return worst;
}

// Node i reads bytes x share[i] from its own memory.
ReadTime ReadLocal(const Rates& r, const std::vector<NodeUse>& nodes,
                   const std::vector<double>& share, double bytes) {
  ReadTime worst;
  for (size_t i = 0; i < nodes.size(); ++i) {
    worst.dram_s = std::max(worst.dram_s, bytes * share[i] / (r.Local(nodes[i]) * kGB));
  }
  return worst;
}

// Shares of the routed experts per node: shard splits every expert by threads (t_i / T);
// replicate hands whole experts out, c_i of the k per token (largest remainder of k t_i / T),
// so the slowest node reads c_max / k.
std::vector<double> ExpertShares(const Layout& l, int64_t k) {
  const double total = TotalThreads(l.nodes);
  std::vector<double> share;
  for (const NodeUse& u : l.nodes) share.push_back(u.threads / total);
  if (l.mode != NumaMode::kReplicate || k <= 0) return share;
  std::vector<int64_t> count(share.size());
  int64_t given = 0;
  for (size_t i = 0; i < share.size(); ++i) given += count[i] = static_cast<int64_t>(share[i] * k);
  for (size_t i = 0; given < k; i = (i + 1) % share.size(), ++given) ++count[i];
  for (size_t i = 0; i < share.size(); ++i) share[i] = static_cast<double>(count[i]) / k;
  return share;
}

bool SpansPackages(const std::vector<NodeUse>& nodes) {
  for (const NodeUse& u : nodes) {
    if (u.package != nodes.front().package) return true;
  }
  return false;
}

// Barrier seconds per parallel phase. One node's pool: barrier_us. A flat pool over several
// nodes (interleave, single over a socket): its counter line is updated by all T workers, so
// barrier_us x T / T_node, x kCrossPackageLineFactor (kCrossNodeLineFactor) when the workers
// span packages (nodes). A fan-out over node pools: the slowest node's barrier plus one
// leader hand-off (kCrossPackageHopUs / kCrossNodeHopUs).
struct BarrierCost {
  double node_s = 0;     // within one node
  double pool_s = 0;     // the mode's pool over all its nodes (flat or fan-out)
  double pool_cross_s = 0;  // the part of pool_s due to crossing nodes/packages
};

BarrierCost Barriers(const MachineProfile& p, const Layout& l) {
  BarrierCost b;
  b.node_s = p.kernels.barrier_us * 1e-6;
  if (l.nodes.size() == 1) {
    b.pool_s = b.node_s;
    return b;
  }
  const bool packages = SpansPackages(l.nodes);
  int max_node = 0;
  for (const NodeUse& u : l.nodes) max_node = std::max(max_node, u.threads);
  const bool flat = l.mode == NumaMode::kSingle || l.mode == NumaMode::kInterleave;
  if (flat) {
    const double workers = static_cast<double>(TotalThreads(l.nodes)) / max_node;
    const double factor = packages ? kCrossPackageLineFactor : kCrossNodeLineFactor;
    b.pool_s = b.node_s * workers * factor;
  } else {
    b.pool_s = b.node_s + (packages ? kCrossPackageHopUs : kCrossNodeHopUs) * 1e-6;
  }
  b.pool_cross_s = b.pool_s - b.node_s;
  return b;
}

double GpuGbps(const GpuSpec& g) { return g.mem_gbps > 0 ? g.mem_gbps : kAssumedGpuMemGbps; }
double PcieGbps(const GpuSpec& g) { return g.pcie_gbps > 0 ? g.pcie_gbps : kAssumedPcieGbps; }
double GpuGmacs(const GpuSpec& g) { return g.gmacs > 0 ? g.gmacs : kAssumedGpuGmacs; }

// Bytes / params of the non-expert classes (everything but routed experts and embeddings, which
// are a lookup: one row per token).
uint64_t DenseSum(const TensorClassSizes& s) {
  return s.shared_experts + s.dense_ffn + s.attention + s.router + s.norms + s.output + s.other;
}

// Parallel phases per token of the CPU: all of a layer's steps without a GPU; with one, the
// experts of each MoE layer plus whatever dense work stayed on the CPU.
struct Phases {
  double expert = 0;  // phases that fan out over all the mode's nodes
  double other = 0;   // phases of the non-expert work
};

Phases CountPhases(const ModelShape& m, const Layout& l, bool gpu) {
  Phases ph;
  ph.expert = static_cast<double>(kExpertPhasesMoeLayer * m.n_moe_layers);
  if (!gpu) {
    ph.other = static_cast<double>((kCpuPhasesMoeLayer - kExpertPhasesMoeLayer) * m.n_moe_layers +
                                   kCpuPhasesDenseLayer * m.n_dense_layers + 1);
    return ph;
  }
  if (l.cpu_bytes.dense_ffn > 0) ph.other += 2.0 * m.n_dense_layers;
  if (l.cpu_bytes.output > 0) ph.other += 1;
  return ph;
}

}  // namespace

namespace {

// Seconds per token (decode) or per batch (prefill) by cause; the bottleneck is the largest.
struct Parts {
  double dram = 0;     // local DRAM reads of the CPU
  double link = 0;     // reads and hand-offs that cross the interconnect
  double compute = 0;  // CPU arithmetic and in-node barriers
  double gpu = 0;
  double pcie = 0;
  double sync = 0;  // the barrier / exchange / PCIe share of the above (for the report)

  double Total() const { return dram + link + compute + gpu + pcie; }
  const char* Bottleneck() const {
    const std::pair<double, const char*> all[] = {{dram, "dram_bandwidth"},
                                                  {link, "interconnect"},
                                                  {compute, "compute"},
                                                  {gpu, "gpu"},
                                                  {pcie, "pcie"}};
    const auto* best = std::max_element(std::begin(all), std::end(all),
                                        [](const auto& a, const auto& b) { return a.first < b.first; });
    return best->second;
  }
};

bool Spread(const Layout& l) {
  return l.mode == NumaMode::kSingle || l.mode == NumaMode::kInterleave;
}

// Routed-expert bytes read under the layout's mode (see the file comment of cost_model.h).
ReadTime ReadExperts(const Rates& r, const Layout& l, int64_t k, double bytes) {
  if (Spread(l)) {
    return l.nodes.size() == 1 ? ReadLocal(r, l.nodes, {1.0}, bytes)
                               : ReadSpread(r, l.nodes, bytes);
  }
  return ReadLocal(r, l.nodes, ExpertShares(l, k), bytes);
}

// Non-expert CPU bytes: over the pool's nodes (single / interleave) or on the first node, whose
// pool runs the dense work in shard / replicate.
ReadTime ReadDense(const Rates& routed_rates, const Layout& l, double bytes) {
  // Large dense GEMVs stream at their own measured fraction of the probe.
  const KernelProfile& k = routed_rates.profile.kernels;
  const Rates r{routed_rates.topo, routed_rates.profile,
                k.dense_decode_fraction > 0 ? k.dense_decode_fraction : k.decode_fraction};
  if (Spread(l) && l.nodes.size() > 1) return ReadSpread(r, l.nodes, bytes);
  return ReadLocal(r, {l.nodes.front()}, {1.0}, bytes);
}

// Shard / replicate: per MoE layer every other node's partial output (D f32 values) crosses to
// the first node, which sums them.
double ExchangeSeconds(const Rates& r, const Layout& l, const ModelShape& m) {
  if (Spread(l)) return 0;
  double s = 0;
  for (size_t j = 1; j < l.nodes.size(); ++j) {
    s += static_cast<double>(m.n_embd) * 4 / (r.Cross(l.nodes.front(), l.nodes[j]) * kGB);
  }
  return s * static_cast<double>(m.n_moe_layers);
}

void AddBarriers(const MachineProfile& p, const Layout& l, const Phases& ph, Parts* parts) {
  const BarrierCost b = Barriers(p, l);
  // Spread modes run every phase on the one flat pool; fan-out modes only the expert phases.
  const double cross_phases = Spread(l) ? ph.expert + ph.other : ph.expert;
  parts->compute += (ph.expert + ph.other) * b.node_s;
  parts->link += cross_phases * b.pool_cross_s;
  parts->sync += (ph.expert + ph.other) * b.node_s + cross_phases * b.pool_cross_s;
}

// Two host<->device hand-offs per MoE layer (and per dense layer / the head if their FFN /
// output stayed on the CPU), each of `bytes_per_hop`.
double PcieSeconds(const PlanRequest& rq, const Layout& l, double bytes_per_hop) {
  const ModelShape& m = rq.model;
  double hops = 2.0 * m.n_moe_layers;
  if (l.cpu_bytes.dense_ffn > 0) hops += 2.0 * m.n_dense_layers;
  if (l.cpu_bytes.output > 0) hops += 2;
  return hops * (kPcieHopUs * 1e-6 + bytes_per_hop / (PcieGbps(rq.gpu) * kGB));
}

Parts DecodeParts(const Rates& r, const MachineProfile& p, const PlanRequest& rq, const Layout& l,
                  std::vector<std::string>* notes) {
  const ModelShape& m = rq.model;
  const bool gpu = rq.gpu.memory_bytes > 0;
  const int64_t k = m.n_expert_used;
  Parts parts;
  // Routed: k experts x bytes per expert-layer x MoE layers on the CPU, e.g. V3 Q4_K_M
  // 8 x 24.8 MB x 58 (the layers whose experts are in VRAM are read by the GPU below).
  const int64_t cpu_moe_layers = m.n_moe_layers - l.gpu_moe_layers;
  const double routed = static_cast<double>(k) * m.routed_bytes_per_expert_layer * cpu_moe_layers;
  const double gpu_routed =
      static_cast<double>(k) * m.routed_bytes_per_expert_layer * l.gpu_moe_layers;
  const ReadTime rt = ReadExperts(r, l, k, routed);
  // The experts' kernels may not keep up with the memory on few cores (the 2-core development
  // VM: IQ2_XXS ~27 GB/s per core from DRAM against a 70 GB/s probe): decode then takes the
  // kernels' time, and it counts as compute.
  const int threads = static_cast<int>(TotalThreads(l.nodes));
  const double kernel_s =
      ExpertDecodeComputeSeconds(p.kernels, m.routed_bytes_by_type, routed, threads);
  std::string bound_note;
  if (kernel_s > rt.Total()) {
    parts.compute += kernel_s;
    std::string rates;
    for (const auto& [type, bytes] : m.routed_bytes_by_type) {
      const auto it = p.kernels.expert_decode_gbps_per_core.find(type);
      if (it == p.kernels.expert_decode_gbps_per_core.end()) continue;
      rates += StrCat(rates.empty() ? "" : ", ", type, " ", Fmt("%.1f", it->second));
    }
    bound_note = Fmt("decode: the routed experts are compute-bound: their kernels turn out %.1f "
                     "GB/s on %.0f thread(s) ",
                     routed / kGB / kernel_s, threads) +
                 "(GB/s per core: " + rates +
                 Fmt("), below the %.1f GB/s the memory delivers", routed / kGB / rt.Total());
  } else {
    parts.dram += rt.dram_s, parts.link += rt.link_s;
  }
  // Non-expert CPU weights once per token (+ one embedding row) + the KV rows at the depth.
  const double kv = static_cast<double>(KvBytesPerPosition(rq, l.kv_on_gpu)) * rq.decode_depth;
  const double embed_row = m.n_vocab > 0 ? static_cast<double>(l.cpu_bytes.embeddings) / m.n_vocab
                                         : 0;
  const double dense = static_cast<double>(DenseSum(l.cpu_bytes)) + embed_row +
                       (l.kv_on_gpu ? 0 : kv);
  const ReadTime nt = ReadDense(r, l, dense);
  parts.dram += nt.dram_s, parts.link += nt.link_s;
  const double exchange_s = ExchangeSeconds(r, l, m);
  parts.link += exchange_s, parts.sync += exchange_s;
  AddBarriers(p, l, CountPhases(m, l, gpu), &parts);
  notes->push_back(Fmt("decode: routed experts %.3f GB/token in %.2f ms, ", routed / kGB,
                       std::max(rt.Total(), kernel_s) * 1e3) +
                   Fmt("other CPU weights + KV %.3f GB in %.2f ms, barriers + exchange %.2f ms",
                       dense / kGB, nt.Total() * 1e3, parts.sync * 1e3));
  if (!bound_note.empty()) notes->push_back(bound_note);
  if (!gpu) return parts;
  // GPU: its weights once per token (+ embedding row, + KV rows), at mem_gbps; the shared
  // experts run while the CPU reads the routed ones, so only what exceeds that time counts.
  const double gpu_gbps = GpuGbps(rq.gpu) * kGB;
  const double g_embed = m.n_vocab > 0 ? static_cast<double>(l.gpu_bytes.embeddings) / m.n_vocab
                                       : 0;
  const double g_bytes = static_cast<double>(DenseSum(l.gpu_bytes)) + g_embed +
                         (l.kv_on_gpu ? kv : 0) + gpu_routed;
  const double shared_s = static_cast<double>(l.gpu_bytes.shared_experts) / gpu_gbps;
  parts.gpu = g_bytes / gpu_gbps - std::min(shared_s, std::max(rt.Total(), kernel_s));
  parts.pcie = PcieSeconds(rq, l, static_cast<double>(m.n_embd) * 4);
  parts.sync += parts.pcie;
  notes->push_back(Fmt("decode: GPU reads %.3f GB/token at %.0f GB/s = %.2f ms; PCIe %.2f ms",
                       g_bytes / kGB, gpu_gbps / kGB, parts.gpu * 1e3, parts.pcie * 1e3));
  return parts;
}

// One part of a prefill batch: compute-bound or read-bound, whichever takes longer.
void AddPrefillPart(double macs, double gmacs, const ReadTime& read, Parts* parts) {
  const double compute_s = macs / (gmacs * 1e9);
  if (compute_s >= read.Total()) {
    parts->compute += compute_s;
  } else {
    parts->dram += read.dram_s, parts->link += read.link_s;
  }
}

// The CPU's non-routed prefill work: SwiGLU FFNs (dense layers, shared experts) at the FFN
// rate, the other projections (attention, router, norms, the head's last row) at the GEMM rate,
// both scaled by the model's weight-type mix, and attention over the cache at the f32 rate.
struct DenseWork {
  double macs = 0;
  double core_s = 0;  // seconds on one core
};

DenseWork CpuDenseWork(const KernelProfile& k, const ModelShape& m, const TensorClassSizes& params,
                       double P, double attn_macs) {
  const double slow = TypeMixSlowdown(k, m.dense_params_by_type);
  const double gemm = k.gemm_gmacs_per_core / slow;
  const double ffn = (k.ffn_gmacs_per_core > 0 ? k.ffn_gmacs_per_core : k.gemm_gmacs_per_core) /
                     slow;
  const auto f32 = k.gemm_gmacs_by_type.find("f32");
  const double attn =
      f32 != k.gemm_gmacs_by_type.end() && f32->second > 0 ? f32->second : k.gemm_gmacs_per_core;
  const double ffn_macs = P * static_cast<double>(params.dense_ffn + params.shared_experts);
  const double proj_macs =
      P * static_cast<double>(params.attention + params.router + params.norms + params.other) +
      static_cast<double>(params.output);
  return {ffn_macs + proj_macs + attn_macs,
          (ffn_macs / ffn + proj_macs / gemm + attn_macs / attn) * 1e-9};
}

// Seconds of one CPU-side MoE layer's routed experts for a batch of P tokens (compute or read,
// whichever is longer), and the same layer streamed to the GPU.
struct LayerSeconds {
  double cpu = 0, stream = 0;
};
// The routed experts at a batch of P tokens: a batch touches the fraction 1 - (1 - k/E)^P of
// the experts, each read once; tokens per touched expert: V2-Lite 512 x 6 / 64 = 48, V3
// 512 x 8 / 256 = 16; the MoE rate at that many tokens, scaled by the model's expert types
// against the calibration's (gate/up q4_K, down q8_0: apps/moe_calibration.h).
struct MoeBatch {
  double touched = 0;
  double tokens_per_expert = 0;
  double moe_gmacs = 0;  // per core
};
MoeBatch MoeBatchAt(const MachineProfile& p, const ModelShape& m, double P) {
  const int64_t k = m.n_expert_used;
  MoeBatch b;
  b.touched = m.n_expert > 0 ? 1 - std::pow(1 - static_cast<double>(k) / m.n_expert, P) : 0;
  b.tokens_per_expert = m.n_expert > 0 ? P * k / (m.n_expert * std::max(b.touched, 1e-9)) : P;
  b.moe_gmacs = MoeGmacsPerCore(p.kernels, b.tokens_per_expert) *
                TypeMixSlowdown(p.kernels, {{"q4_K", 2}, {"q8_0", 1}}) /
                TypeMixSlowdown(p.kernels, m.routed_params_by_type);
  return b;
}

LayerSeconds RoutedLayerSeconds(const Rates& r, const MachineProfile& p, const PlanRequest& rq,
                                const Layout& l, double P) {
  const ModelShape& m = rq.model;
  const int64_t k = m.n_expert_used;
  const auto [touched, tokens_per_expert, moe_gmacs] = MoeBatchAt(p, m, P);
  const double macs = P * k * m.routed_params_per_expert_layer;
  const double layer_bytes =
      m.n_moe_layers > 0 ? static_cast<double>(m.bytes.routed_experts) / m.n_moe_layers : 0;
  const ReadTime read = ReadExperts(r, l, k, layer_bytes * touched);
  LayerSeconds s;
  s.cpu = std::max(macs / (moe_gmacs * TotalThreads(l.nodes) * 1e9), read.Total());
  s.stream = std::max(layer_bytes * touched / (PcieGbps(rq.gpu) * kGB),
                      macs / (GpuGmacs(rq.gpu) * 1e9));
  return s;
}

Parts PrefillParts(const Rates& r, const MachineProfile& p, const PlanRequest& rq,
                   const Layout& l, std::vector<std::string>* notes) {
  const ModelShape& m = rq.model;
  const bool gpu = rq.gpu.memory_bytes > 0;
  const double P = std::max(1, rq.batch);
  const int64_t k = m.n_expert_used;
  // Routed experts: P tokens x k experts x params per expert-layer x MoE layers MACs.
  const auto [touched, tokens_per_expert, moe_gmacs] = MoeBatchAt(p, m, P);
  const double all_threads = TotalThreads(l.nodes);
  const double dense_threads = Spread(l) ? all_threads : l.nodes.front().threads;
  Parts parts;
  const int64_t cpu_moe_layers = m.n_moe_layers - l.gpu_moe_layers;
  const double routed_macs = P * k * m.routed_params_per_expert_layer * cpu_moe_layers;
  const double gpu_routed_macs = P * k * m.routed_params_per_expert_layer * l.gpu_moe_layers;
  const double routed_bytes = static_cast<double>(l.cpu_bytes.routed_experts) * touched;
  AddPrefillPart(routed_macs, moe_gmacs * all_threads, ReadExperts(r, l, k, routed_bytes),
                 &parts);
  // Attention over the cache: P tokens at positions 0..P-1 see (P + 1) / 2 positions on average.
  const double attn_macs = static_cast<double>(m.attn_macs_per_position) * P * (P + 1) / 2;
  // Dense classes: every token once, except the head (logits of the last token only).
  auto dense_macs = [&](const TensorClassSizes& params) {
    return P * static_cast<double>(DenseSum(params) - params.output) +
           static_cast<double>(params.output);
  };
  const DenseWork cpu = CpuDenseWork(p.kernels, m, l.cpu_params, P, gpu ? 0 : attn_macs);
  const double compute_s = cpu.core_s / dense_threads;
  const ReadTime read = ReadDense(r, l, static_cast<double>(DenseSum(l.cpu_bytes)));
  if (compute_s >= read.Total()) {
    parts.compute += compute_s;
  } else {
    parts.dram += read.dram_s, parts.link += read.link_s;
  }
  AddBarriers(p, l, CountPhases(m, l, gpu), &parts);
  notes->push_back(Fmt("prefill of %.0f tokens: %.0f%% of the experts touched, ", P,
                       touched * 100) +
                   Fmt("routed experts %.1f GMAC at %.0f GMAC/s per core ", routed_macs / 1e9,
                       moe_gmacs) +
                   Fmt("(%.0f tokens per expert), ", tokens_per_expert) +
                   Fmt("other CPU work %.1f GMAC in %.2f core-s", cpu.macs / 1e9, cpu.core_s));
  if (!gpu) return parts;
  const double g_macs = dense_macs(l.gpu_params) + attn_macs + gpu_routed_macs;
  const double g_read =
      (static_cast<double>(DenseSum(l.gpu_bytes)) + l.gpu_bytes.routed_experts * touched) /
      (GpuGbps(rq.gpu) * kGB);
  parts.gpu = std::max(g_macs / (GpuGmacs(rq.gpu) * 1e9), g_read);
  parts.pcie = PcieSeconds(rq, l, P * static_cast<double>(m.n_embd) * 4);
  return parts;
}

}  // namespace

StreamCost PredictStreaming(const Topology& topo, const MachineProfile& profile,
                            const PlanRequest& request, const Layout& layout) {
  const ModelShape& m = request.model;
  StreamCost out;
  const int64_t cpu_layers = m.n_moe_layers - layout.gpu_moe_layers;
  const uint64_t layer_bytes =
      m.n_moe_layers > 0 ? m.bytes.routed_experts / static_cast<uint64_t>(m.n_moe_layers) : 0;
  out.feasible = request.gpu.memory_bytes > 0 && cpu_layers > 0 &&
                 layout.gpu_free_bytes >= 2 * std::min(layer_bytes, kStreamChunkBytes);
  if (!out.feasible) return out;
  const Rates rates{topo, profile, profile.kernels.decode_fraction};
  const LayerSeconds at = RoutedLayerSeconds(rates, profile, request, layout,
                                             std::max(1, request.batch));
  out.cpu_layer_s = at.cpu;
  out.stream_layer_s = at.stream;
  for (int64_t P = 16; P <= 65536; P *= 2) {
    const LayerSeconds s = RoutedLayerSeconds(rates, profile, request, layout,
                                              static_cast<double>(P));
    if (s.stream < s.cpu) {
      out.min_batch = P;
      break;
    }
  }
  return out;
}

CostResult PredictCost(const Topology& topo, const MachineProfile& profile,
                       const PlanRequest& request, const Layout& layout) {
  MOESPLIT_CHECK(!layout.nodes.empty(), "a layout needs at least one node");
  const Rates rates{topo, profile, profile.kernels.decode_fraction};
  CostResult out;
  const Parts d = DecodeParts(rates, profile, request, layout, &out.notes);
  const Parts f = PrefillParts(rates, profile, request, layout, &out.notes);
  Prediction& p = out.predicted;
  p.decode_tok_s = d.Total() > 0 ? 1 / d.Total() : 0;
  p.prefill_tok_s = f.Total() > 0 ? std::max(1, request.batch) / f.Total() : 0;
  p.bottleneck = d.Bottleneck();
  p.prefill_bottleneck = f.Bottleneck();
  // cpu = the CPU's reads; sync = barriers, hand-offs, PCIe; they sum to 1 / decode_tok_s.
  p.decode_gpu_s = d.gpu;
  p.decode_sync_s = d.sync;
  p.decode_cpu_s = d.Total() - d.gpu - d.sync;
  return out;
}

}  // namespace moesplit::numa
